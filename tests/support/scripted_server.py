"""A scripted OpenAI-compatible chat server on 127.0.0.1 for tests (real HTTP, SSE streaming).

Reach it through litellm with ``model="openai/<any-name>"`` and ``api_base=server.url``.

A *script* is a list of replies consumed one per request (``/v1/chat/completions`` or
``/chat/completions``). Each reply is a dict (build them with :func:`text_reply`,
:func:`tool_reply`, :func:`error_reply`) with these optional keys:

- ``deltas``: list of delta dicts sent one per SSE chunk, exactly as given (e.g.
  ``{"content": "Hi"}`` or ``{"tool_calls": [...]}``). A string item is shorthand for
  ``{"content": item}``. An item ``{"__raw__": {...}}`` is sent as the whole chunk object
  (e.g. ``{"choices": []}``).
- ``finish_reason``: sent in a last chunk with an empty delta (default ``"stop"``; ``None``
  sends no finish chunk).
- ``usage``: ``{"prompt_tokens", "completion_tokens"}`` sent in a final usage chunk (default
  10/5) when the request asked for ``stream_options.include_usage``.
- ``delay``: seconds before the first chunk; ``interval``: seconds between chunks.
- ``status``: an HTTP error status (429, 500, 401...) returned instead of a stream, with an
  OpenAI-style error body (``message`` overrides its text).
- ``cut``: True closes the connection after the deltas, mid-stream, with no finish chunk and an
  incomplete chunked body (the client sees a broken stream).

When the script runs out the server answers ``server.default`` (text ``DONE.``).
``server.requests`` holds every request body (parsed JSON) in order; ``server.disconnects``
the ``time.monotonic()`` moments at which a client closed the connection mid-stream;
``server.paths`` the request paths; ``server.durations`` the seconds spent answering each
request (the scripted model's own time).

Use in a test module::

    from support.scripted_server import scripted_server, text_reply  # noqa: F401  (fixture)

    def test_x(scripted_server):
        scripted_server.script = [text_reply("Hello")]
"""

from __future__ import annotations

import json
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

__all__ = [
    "ScriptedServer",
    "scripted_server",
    "text_reply",
    "tool_reply",
    "tool_call_delta",
    "error_reply",
    "split_three_ways",
]


def text_reply(content: str | list[str], **kw: Any) -> dict:
    """A text reply: ``content`` as one delta (str) or exact deltas (list of str)."""
    deltas = [content] if isinstance(content, str) else list(content)
    return {"deltas": deltas, **kw}


def tool_call_delta(index: int, id: str | None = None, name: str | None = None, arguments: str | None = None) -> dict:
    """One raw ``tool_calls`` delta dict (fields left out when None)."""
    call: dict[str, Any] = {"index": index}
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    fn: dict[str, Any] = {}
    if name is not None:
        fn["name"] = name
    if arguments is not None:
        fn["arguments"] = arguments
    if fn:
        call["function"] = fn
    return {"tool_calls": [call]}


def tool_reply(*calls: tuple[str, str, str], **kw: Any) -> dict:
    """A function-mode reply: each call (id, name, arguments) in one delta; finish "tool_calls"."""
    deltas = [tool_call_delta(i, id=cid, name=name, arguments=args) for i, (cid, name, args) in enumerate(calls)]
    kw.setdefault("finish_reason", "tool_calls")
    return {"deltas": deltas, **kw}


def error_reply(status: int, message: str = "scripted error", **kw: Any) -> dict:
    """An HTTP error reply with an OpenAI-style error body."""
    return {"status": status, "message": message, **kw}


def split_three_ways(text: str) -> dict[str, list[str]]:
    """The fault cases' chunking rule: one delta; 3-character pieces; split after each newline."""
    pieces = [text[i : i + 3] for i in range(0, len(text), 3)] or [""]
    lines = text.splitlines(keepends=True) or [""]
    return {"one": [text], "three": pieces, "lines": lines}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: "_HTTPServer"

    def log_message(self, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:  # /v1/models and anything else: a small JSON answer
        body = json.dumps({"object": "list", "data": [{"id": "scripted", "object": "model"}]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        t0 = time.monotonic()
        try:
            self._post()
        finally:
            with self.server.owner._lock:
                self.server.owner.durations.append(time.monotonic() - t0)

    def _post(self) -> None:
        owner: ScriptedServer = self.server.owner
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = {"_raw": raw.decode("utf-8", "replace")}
        path = self.path.split("?")[0]
        with owner._lock:
            owner.requests.append(body)
            owner.paths.append(path)
            owner.headers.append(dict(self.headers))
            reply = owner.script.pop(0) if owner.script else dict(owner.default)
        if not path.rstrip("/").endswith("chat/completions"):
            self._json(404, {"error": {"message": f"unknown path {path}", "type": "not_found"}})
            return
        if reply.get("delay"):
            time.sleep(reply["delay"])
        if reply.get("status"):
            status = int(reply["status"])
            etype = {401: "invalid_request_error", 429: "rate_limit_exceeded"}.get(status, "server_error")
            self._json(status, {"error": {"message": reply.get("message", "scripted error"), "type": etype,
                                          "code": str(status)}})
            return
        if not body.get("stream"):
            self._non_stream(body, reply)
            return
        self._stream(body, reply)

    # -- helpers -------------------------------------------------------------------------------
    def _json(self, status: int, obj: dict) -> None:
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _non_stream(self, body: dict, reply: dict) -> None:
        text = "".join(d if isinstance(d, str) else (d.get("content") or "") for d in reply.get("deltas", [])
                       if isinstance(d, str) or "__raw__" not in d)
        usage = reply.get("usage") or {"prompt_tokens": 10, "completion_tokens": 5}
        self._json(200, {
            "id": "chatcmpl-scripted", "object": "chat.completion", "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [{"index": 0, "message": {"role": "assistant", "content": text},
                         "finish_reason": reply.get("finish_reason", "stop") or "stop"}],
            "usage": {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]},
        })

    def _chunk(self, obj: dict | str) -> None:
        data = obj if isinstance(obj, str) else json.dumps(obj)
        payload = f"data: {data}\n\n".encode()
        self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
        self.wfile.flush()

    def _stream(self, body: dict, reply: dict) -> None:
        owner: ScriptedServer = self.server.owner
        model = body.get("model", "scripted")
        base = {"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": int(time.time()),
                "model": model}
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        interval = float(reply.get("interval") or 0)
        try:
            for i, d in enumerate(reply.get("deltas", [])):
                if i and interval:
                    time.sleep(interval)
                if isinstance(d, dict) and "__raw__" in d:
                    self._chunk({**base, **d["__raw__"]})
                    continue
                delta = {"content": d} if isinstance(d, str) else d
                self._chunk({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
            if reply.get("cut"):
                # Abort: no terminating zero-length chunk, so the client sees an incomplete body.
                try:
                    self.connection.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                self.close_connection = True
                return
            finish = reply.get("finish_reason", "stop")
            if finish is not None:
                if interval:
                    time.sleep(interval)
                self._chunk({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
            if (body.get("stream_options") or {}).get("include_usage"):
                usage = reply.get("usage") or {"prompt_tokens": 10, "completion_tokens": 5}
                usage = {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]}
                self._chunk({**base, "choices": [], "usage": usage})
            self._chunk("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            with owner._lock:
                owner.disconnects.append(time.monotonic())
            self.close_connection = True


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: "ScriptedServer"

    def handle_error(self, request, client_address) -> None:  # a client hanging up is normal
        import sys

        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, OSError)):
            return
        super().handle_error(request, client_address)


class ScriptedServer:
    """A running scripted server. ``url`` is its base URL (``http://127.0.0.1:PORT/v1``).

    Attributes: ``script`` (list of replies, consumed in order), ``default`` (reply when the
    script is empty), ``requests`` (request bodies), ``paths``, ``headers``, ``disconnects``.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.script: list[dict] = []
        self.default: dict = text_reply("DONE.")
        self.requests: list[dict] = []
        self.paths: list[str] = []
        self.headers: list[dict] = []
        self.disconnects: list[float] = []
        self.durations: list[float] = []
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.owner = self
        self.port = self._httpd.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="scripted-server", daemon=True)
        self._thread.start()

    def reset(self, script: list[dict] | None = None) -> None:
        """Clear recorded requests and set a new script."""
        with self._lock:
            self.script = list(script or [])
            self.requests.clear()
            self.paths.clear()
            self.headers.clear()
            self.disconnects.clear()
            self.durations.clear()

    def close(self) -> None:
        """Stop serving and close the socket."""
        self._httpd.shutdown()
        self._httpd.server_close()

    def __enter__(self) -> "ScriptedServer":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


@pytest.fixture(scope="module")
def scripted_server_module():
    """One scripted server per test module (reset it in each test with ``server.reset(script)``)."""
    server = ScriptedServer()
    yield server
    server.close()


@pytest.fixture
def scripted_server(scripted_server_module):
    """The module's scripted server, reset (empty script, no recorded requests) for this test."""
    scripted_server_module.reset()
    scripted_server_module.default = text_reply("DONE.")
    return scripted_server_module


if __name__ == "__main__":  # manual use: python tests/support/scripted_server.py
    s = ScriptedServer()
    print(s.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        s.close()
