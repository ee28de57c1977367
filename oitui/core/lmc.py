"""LMC (Language Model Computer) messages, version 1: constructors, chunk merging, conversion.

An LMC message is a plain dict ``{"role", "type", "format"?, "content", ...our fields}``; see
``docs/protocol.md`` for the full table. Streaming chunks carry the same keys plus
``"start": True`` / ``"end": True`` around each run of one role/type/format.

- constructors (:func:`message`, :func:`code`, :func:`console_output`, ...) used everywhere;
- :class:`ChunkMerger`: streaming chunks -> finished messages (ephemeral chunks dropped);
- :func:`to_openai_messages`: stored LMC messages -> OpenAI chat messages for litellm;
- :func:`lmc_to_oi` / :func:`oi_to_lmc`: Open Interpreter's plain message list and back.

Pure logic; no third-party imports.
"""

from __future__ import annotations

import base64
import json
import mimetypes
import os
import re
from typing import Any, Iterable

__all__ = [
    "LMC_VERSION",
    "ROLES",
    "TYPES",
    "message",
    "text",
    "code",
    "tool_call",
    "reasoning",
    "console_output",
    "active_line",
    "image",
    "confirmation",
    "input_request",
    "error",
    "is_ephemeral",
    "strip_flags",
    "ChunkMerger",
    "to_openai_messages",
    "lmc_to_oi",
    "oi_to_lmc",
    "fence",
    "NO_OUTPUT",
    "NOT_RUN",
    "EMPTY_CODE_OUTPUT",
    "CODE_OUTPUT_PREFIX",
]

#: Saved files carry ``"lmc_version": LMC_VERSION``.
LMC_VERSION = 1
ROLES = ("user", "assistant", "computer")
TYPES = ("message", "code", "tool_call", "reasoning", "console", "image", "confirmation", "error")

#: Tool result for a call that ran and printed nothing (function mode).
NO_OUTPUT = "No output"
#: Tool result for a call that was never answered (the reply or run was interrupted).
NOT_RUN = "This call was not run: the reply was interrupted or never finished."
#: Text-mode stand-in for a block that printed nothing.
EMPTY_CODE_OUTPUT = "The code ran with no output."
#: Text-mode prefix of code output sent back as a user message.
CODE_OUTPUT_PREFIX = "Code output:\n"

_FLAG_KEYS = ("start", "end")
_OI_KEYS = ("role", "type", "format", "content")


# ------------------------------------------------------------------------------------------
# Constructors
# ------------------------------------------------------------------------------------------


def message(role: str, type: str, content: Any, format: str | None = None, **extra: Any) -> dict:
    """Build one LMC message/chunk: ``{"role", "type", "format"?, "content", **extra}``.

    ``format`` is left out when None; ``extra`` keys whose value is None are left out too (so
    ``call_id=None`` adds nothing). Flags are passed as extra: ``message(..., start=True)``.
    Raises ``ValueError`` for an unknown role or type.
    """
    if role not in ROLES:
        raise ValueError(f"unknown LMC role {role!r}; expected one of {', '.join(ROLES)}")
    if type not in TYPES:
        raise ValueError(f"unknown LMC type {type!r}; expected one of {', '.join(TYPES)}")
    msg: dict = {"role": role, "type": type}
    if format is not None:
        msg["format"] = format
    msg["content"] = content
    for k, v in extra.items():
        if v is not None:
            msg[k] = v
    return msg


def text(role: str, content: str, **extra: Any) -> dict:
    """A ``message`` (markdown text) from ``user`` or ``assistant``."""
    return message(role, "message", content, **extra)


def code(language: str, content: str, *, call_id: str | None = None, tool: dict | None = None, **extra: Any) -> dict:
    """An assistant ``code`` message. ``tool`` = ``{"name", "arguments"}`` when it came as a tool call."""
    return message("assistant", "code", content, format=language, call_id=call_id, tool=tool, **extra)


def tool_call(name: str, arguments: dict, *, call_id: str | None = None, **extra: Any) -> dict:
    """An assistant ``tool_call`` (Read, Edit, browser, mcp__srv__tool ...): format = tool name, content = arguments dict."""
    return message("assistant", "tool_call", arguments, format=name, call_id=call_id, **extra)


def reasoning(content: str, *, signature: str | None = None, **extra: Any) -> dict:
    """An assistant ``reasoning`` message; ``signature`` when the provider gives one (Anthropic)."""
    return message("assistant", "reasoning", content, signature=signature, **extra)


def console_output(content: str, *, call_id: str | None = None, **extra: Any) -> dict:
    """A computer ``console``/``output`` message (what a terminal would show), answering ``call_id``."""
    return message("computer", "console", content, format="output", call_id=call_id, **extra)


def active_line(line: int | None, **extra: Any) -> dict:
    """An ephemeral computer ``console``/``active_line`` chunk (line number, or None when done)."""
    return message("computer", "console", line, format="active_line", **extra)


def image(data: str, format: str = "base64.png", *, role: str = "computer", call_id: str | None = None, **extra: Any) -> dict:
    """An ``image`` message: ``format`` is ``base64.png``, ``base64.jpeg`` or ``path``."""
    return message(role, "image", data, format=format, call_id=call_id, **extra)


def confirmation(pending: dict, **extra: Any) -> dict:
    """An ephemeral computer ``confirmation``/``execution`` chunk carrying the pending code or tool call."""
    return message("computer", "confirmation", pending, format="execution", **extra)


def input_request(prompt: str, *, password: bool = False, **extra: Any) -> dict:
    """An ephemeral computer ``console``/``input_request`` chunk (the program waits on input)."""
    return message("computer", "console", prompt, format="input_request", password=password, **extra)


def error(content: str, kind: str | None = None, *, call_id: str | None = None, **extra: Any) -> dict:
    """A computer ``error`` message: a one-line reason; ``kind`` e.g. "api", "policy", "limit"."""
    return message("computer", "error", content, kind=kind, call_id=call_id, **extra)


def is_ephemeral(chunk: dict) -> bool:
    """True for chunks that are never stored: active lines, confirmations, input requests."""
    if not isinstance(chunk, dict):
        return False
    if chunk.get("type") == "confirmation":
        return True
    return chunk.get("type") == "console" and chunk.get("format") in ("active_line", "input_request")


def strip_flags(chunk: dict) -> dict:
    """A copy of ``chunk`` without its ``start`` / ``end`` flags."""
    return {k: v for k, v in chunk.items() if k not in _FLAG_KEYS}


def fence(language: str | None, body: str) -> str:
    """A markdown code fence around ``body`` that ``body`` cannot close (longer than any
    backtick run inside it, at least 3)."""
    longest = max((len(m) for m in re.findall(r"`+", body or "")), default=0)
    ticks = "`" * max(3, longest + 1)
    body = body or ""
    return f"{ticks}{language or ''}\n{body}{'' if body.endswith(chr(10)) or not body else chr(10)}{ticks}"


# ------------------------------------------------------------------------------------------
# Chunk merging
# ------------------------------------------------------------------------------------------


class ChunkMerger:
    """Turns a stream of LMC chunks into finished, storable messages.

    ``feed(chunk) -> list[dict]`` returns the messages finished by that chunk (usually none or
    one); ``finish() -> list[dict]`` flushes a message still open when the stream ended (e.g. an
    interrupted run). ``messages`` holds everything finished so far.

    Rules: a chunk with ``start`` opens a new message (closing any open one); chunks of the same
    role/type/format append their string content (non-string content replaces); ``end`` closes
    it. A chunk with no open message, or of another role/type/format than the open one, starts a
    message implicitly. Ephemeral chunks (``active_line``, ``input_request``, ``confirmation``)
    are dropped, but their ``start``/``end`` flags still count: console output and active lines
    share one start/end pair, so an ``active_line`` chunk carrying ``end`` closes the open
    console output. Extra fields (``call_id``, ``tool``, ``signature``, ``kind`` ...) are kept
    from the first chunk that has them. Messages come out without flags. A non-dict chunk
    raises ``TypeError``.
    """

    def __init__(self) -> None:
        self._open: dict | None = None
        self._parts: list[str] = []  # string content of the open message, joined at close
        self.messages: list[dict] = []

    def feed(self, chunk: dict) -> list[dict]:
        """Consume one chunk; return the messages it finished."""
        if not isinstance(chunk, dict):
            raise TypeError(f"ChunkMerger.feed() expects an LMC dict, got {type(chunk).__name__}")
        done: list[dict] = []
        if chunk.get("start"):
            self._close(done)
        if is_ephemeral(chunk):
            if chunk.get("end") and self._open is not None and self._open.get("role") == chunk.get("role") and self._open.get("type") == chunk.get("type"):
                self._close(done)
            return done
        if self._open is not None and not _same_run(self._open, chunk):
            self._close(done)
        body = strip_flags(chunk)
        if self._open is None:
            self._open = body
            self._parts = []
            if isinstance(body.get("content"), str):
                self._parts.append(body.pop("content"))
                self._open["content"] = None
        else:
            self._append(body)
        if chunk.get("end"):
            self._close(done)
        return done

    def finish(self) -> list[dict]:
        """Close the open message, if any; return it in a list."""
        done: list[dict] = []
        self._close(done)
        return done

    def _append(self, body: dict) -> None:
        assert self._open is not None
        new = body.get("content")
        if isinstance(new, str):
            if self._open.get("content") is None:
                self._parts.append(new)
            else:  # after non-string content, a string replaces it
                self._open["content"] = None
                self._parts = [new]
        elif new is not None:
            self._open["content"] = new
            self._parts = []
        for k, v in body.items():
            if k == "content":
                continue
            if k not in self._open or self._open[k] is None:
                self._open[k] = v

    def _close(self, done: list[dict]) -> None:
        if self._open is not None:
            msg = self._open
            self._open = None
            if msg.get("content") is None and self._parts:
                msg["content"] = "".join(self._parts)
            self._parts = []
            if msg.get("content") is None and msg.get("type") in ("message", "console", "reasoning"):
                msg["content"] = ""
            self.messages.append(msg)
            done.append(msg)


def _same_run(a: dict, b: dict) -> bool:
    return a.get("role") == b.get("role") and a.get("type") == b.get("type") and a.get("format") == b.get("format")


# ------------------------------------------------------------------------------------------
# LMC -> OpenAI chat messages
# ------------------------------------------------------------------------------------------

_TOOL_NAME_OK = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


def _safe_tool_name(name: Any) -> str:
    """OpenAI accepts tool names matching ``^[A-Za-z0-9_-]{1,64}$``; repair others."""
    if not isinstance(name, str) or not name.strip():
        return "execute"
    n = name.strip()
    if _TOOL_NAME_OK.match(n):
        if n.lower() != "execute" and re.fullmatch(r"(?:execute)+", n.lower()):
            return "execute"
        return n
    low = n.lower()
    if low.endswith("execute") and re.fullmatch(r"(?:functions?\.)?(?:execute)+", low):
        return "execute"
    return (re.sub(r"[^A-Za-z0-9_-]", "_", n) or "execute")[:64]


def _image_url(msg: dict) -> tuple[str | None, str | None]:
    """(data URL, None) for an image message, or (None, reason) when it cannot be read."""
    fmt = (msg.get("format") or "base64.png").lower()
    data = msg.get("content")
    if not isinstance(data, str) or not data:
        return None, "empty image"
    if fmt == "path":
        path = os.path.expanduser(data)
        try:
            with open(path, "rb") as fh:
                raw = fh.read()
        except OSError as exc:
            return None, f"image file could not be read: {path} ({exc.strerror or exc})"
        mime = mimetypes.guess_type(path)[0] or "image/png"
        return f"data:{mime};base64,{base64.b64encode(raw).decode('ascii')}", None
    if data.startswith("data:"):
        return data, None
    sub = fmt.split(".", 1)[1] if "." in fmt else "png"
    sub = {"jpg": "jpeg"}.get(sub, sub)
    return f"data:image/{sub};base64,{data}", None


def _image_note(msg: dict) -> str:
    where = f" ({msg['content']})" if msg.get("format") == "path" and isinstance(msg.get("content"), str) else ""
    who = "The code produced" if msg.get("role") == "computer" else "The user attached"
    return f"[{who} an image{where}; this model cannot see images.]"


def _image_part(msg: dict, vision: bool) -> dict:
    if vision:
        url, reason = _image_url(msg)
        if url:
            return {"type": "image_url", "image_url": {"url": url}}
        return {"type": "text", "text": f"[Image not attached: {reason}.]"}
    return {"type": "text", "text": _image_note(msg)}


def _json_arguments(msg: dict) -> str:
    """The JSON arguments string of a code message's tool call."""
    tool = msg.get("tool") if isinstance(msg.get("tool"), dict) else {}
    args = tool.get("arguments")
    if isinstance(args, dict):
        return json.dumps(args, ensure_ascii=False)
    if isinstance(args, str):
        try:
            if isinstance(json.loads(args), dict):
                return args
        except ValueError:
            pass
    return json.dumps({"language": msg.get("format") or "python", "code": msg.get("content") or ""}, ensure_ascii=False)


def _content_text(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    try:
        return json.dumps(content, ensure_ascii=False)
    except (TypeError, ValueError):
        return str(content)


class _Builder:
    """Accumulates OpenAI messages, merging same-role plain messages so roles alternate."""

    def __init__(self) -> None:
        self.out: list[dict] = []

    def add(self, role: str, content: str | list) -> None:
        if content is None or content == "" or content == []:
            return
        last = self.out[-1] if self.out else None
        if last is not None and last["role"] == role and role in ("user", "assistant") and not last.get("tool_calls") and not last.get("thinking_blocks"):
            last["content"] = _join_content(last["content"], content)
        else:
            self.out.append({"role": role, "content": content})

    def raw(self, msg: dict) -> None:
        self.out.append(msg)


def _join_content(a: str | list | None, b: str | list) -> str | list:
    if a is None or a == "":
        return b
    if isinstance(a, str) and isinstance(b, str):
        return a.rstrip("\n") + "\n\n" + b
    pa = [{"type": "text", "text": a}] if isinstance(a, str) else list(a)
    pb = [{"type": "text", "text": b}] if isinstance(b, str) else list(b)
    return pa + pb


def to_openai_messages(
    messages: list[dict],
    *,
    system_message: str,
    function_calling: bool,
    vision: bool = False,
    provider: str | None = None,
) -> list[dict]:
    """Convert stored LMC v1 messages into OpenAI chat messages for litellm.

    The result starts with ``{"role": "system", "content": system_message}`` (left out when
    ``system_message`` is empty). Flags are ignored and ephemeral chunks skipped.

    One *assistant reply* is a run of consecutive assistant messages (message, reasoning, code,
    tool_call); the computer messages after it carry its results. Store every message of a reply
    before its results (code a, code b, output a, output b) so that a reply with two calls is
    replayed as one assistant message; interleaved results still give a valid (split) history.

    Function mode (``function_calling=True``), for code with a ``call_id`` and every
    ``tool_call`` message: the reply becomes ONE assistant message ``{"role": "assistant",
    "content": text or None, "tool_calls": [{"id", "type": "function", "function": {"name",
    "arguments": JSON string}}]}`` (code: name = ``tool["name"]`` or ``"execute"``, repaired to a
    valid OpenAI name, arguments = ``tool["arguments"]`` or ``{"language", "code"}``; tool_call:
    name = format, arguments = content). Then one ``{"role": "tool", "tool_call_id", "content"}``
    per call, in order: its console outputs / errors joined (``"No output"`` when it ran
    silently, i.e. an empty output), or :data:`NOT_RUN` when nothing answered it. Each call id is
    answered exactly once; a result whose call is not in the preceding reply is sent as text.

    Text mode (``function_calling=False``, or code without ``call_id``): code becomes a fenced
    block inside the assistant content; computer output becomes a user message
    ``"Code output:\\n..."`` (:data:`EMPTY_CODE_OUTPUT` when empty); tool_call messages become a
    line of text naming the tool and its JSON arguments. Consecutive same-role messages are
    merged so roles alternate.

    Images: with ``vision`` an ``image_url`` content part (a ``data:`` URL; ``path`` images are
    read from disk), otherwise a short text note; an image answering a call adds a note to the
    tool message and, with vision, a user message with the image after the tool messages.
    Reasoning is dropped, except ``provider == "anthropic"`` with a ``signature``: then the
    reply's assistant message gets ``thinking_blocks`` [{"type": "thinking", "thinking",
    "signature"}] (litellm's format). ``computer``/``error`` messages become user text
    ``"Error: ..."`` (or a call's result when they carry its ``call_id``).

    Raises ``TypeError`` when ``messages`` is not a list of dicts.
    """
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of LMC dicts, got {type(messages).__name__}")
    b = _Builder()
    if system_message:
        b.raw({"role": "system", "content": system_message})

    reply: list[dict] = []  # pending assistant messages of the current reply
    pending_calls: list[str] = []  # call ids of the open group, in order
    results: dict[str, list[str]] = {}
    result_answered: set[str] = set()
    after_tools: list[dict] = []  # non-result computer messages seen while a group is open
    tool_images: list[dict] = []

    def flush_reply() -> None:
        nonlocal reply, pending_calls
        if not reply:
            return
        msgs, reply = reply, []
        texts: list[str] = []
        tool_calls: list[dict] = []
        thinking: list[dict] = []
        for m in msgs:
            t = m.get("type")
            if t == "message":
                if isinstance(m.get("content"), str) and m["content"].strip():
                    texts.append(m["content"])
            elif t == "reasoning":
                if provider == "anthropic" and m.get("signature"):
                    thinking.append({"type": "thinking", "thinking": _content_text(m.get("content")), "signature": m["signature"]})
            elif t == "code":
                if function_calling and m.get("call_id"):
                    cid = str(m["call_id"])
                    if cid in {c["id"] for c in tool_calls}:
                        continue  # a repeated id: answered once already
                    tool = m.get("tool") if isinstance(m.get("tool"), dict) else {}
                    tool_calls.append({"id": cid, "type": "function", "function": {"name": _safe_tool_name(tool.get("name")), "arguments": _json_arguments(m)}})
                else:
                    texts.append(fence(m.get("format"), _content_text(m.get("content"))))
            elif t == "tool_call":
                if function_calling and m.get("call_id"):
                    cid = str(m["call_id"])
                    if cid in {c["id"] for c in tool_calls}:
                        continue
                    args = m.get("content")
                    if isinstance(args, str):
                        try:
                            if not isinstance(json.loads(args), dict):
                                args = {"input": args}
                        except ValueError:
                            args = {"input": args}
                    arguments = args if isinstance(args, str) else json.dumps(args if isinstance(args, dict) else {}, ensure_ascii=False)
                    tool_calls.append({"id": cid, "type": "function", "function": {"name": _safe_tool_name(m.get("format")), "arguments": arguments}})
                else:
                    texts.append(f"Called tool `{m.get('format')}` with arguments: {_content_text(m.get('content'))}")
            elif t == "image":
                texts.append(_image_note(m))
        content = "\n\n".join(t.strip("\n") for t in texts) if texts else ""
        if tool_calls or thinking:
            msg: dict = {"role": "assistant", "content": content or None}
            if thinking:
                msg["thinking_blocks"] = thinking
            if tool_calls:
                msg["tool_calls"] = tool_calls
                pending_calls = [c["id"] for c in tool_calls]
                for cid in pending_calls:
                    results.setdefault(cid, [])
            b.raw(msg)
        else:
            b.add("assistant", content)

    def close_group() -> None:
        nonlocal pending_calls, after_tools, tool_images
        if pending_calls:
            for cid in pending_calls:
                if cid in result_answered:
                    outs = [o for o in results.get(cid, [])]
                    body = "\n".join(o.rstrip("\n") for o in outs if o.strip())
                    body = body if body.strip() else NO_OUTPUT
                else:
                    body = NOT_RUN
                b.raw({"role": "tool", "tool_call_id": cid, "content": body})
            pending_calls = []
        if tool_images and vision:
            b.add("user", [{"type": "text", "text": "Images produced by the code above:"}] + [_image_part(m, True) for m in tool_images])
        tool_images = []
        extra, after_tools = after_tools, []
        for m in extra:
            _add_plain_computer(b, m, vision)

    for m in messages:
        if not isinstance(m, dict):
            raise TypeError(f"every LMC message must be a dict, got {type(m).__name__}")
        if is_ephemeral(m):
            continue
        role, typ = m.get("role"), m.get("type")
        if role == "assistant":
            if not reply:
                close_group()
            reply.append(m)
            continue
        flush_reply()
        if role == "computer":
            cid = m.get("call_id")
            cid = str(cid) if cid is not None else None
            if cid is not None and cid in pending_calls and typ in ("console", "error", "image"):
                result_answered.add(cid)
                if typ == "console":
                    results[cid].append(_content_text(m.get("content")))
                elif typ == "error":
                    results[cid].append("Error: " + _content_text(m.get("content")))
                else:
                    results[cid].append("(The code produced an image; it follows as an image.)" if vision else _image_note(m))
                    tool_images.append(m)
            elif pending_calls:
                after_tools.append(m)
            else:
                _add_plain_computer(b, m, vision)
            continue
        # user (or unknown role: treated as user)
        close_group()
        if typ == "image":
            b.add("user", [_image_part(m, vision)] if vision else _image_note(m))
        elif typ in ("message", None):
            b.add("user", _content_text(m.get("content")))
        else:
            b.add("user", _content_text(m.get("content")))
    flush_reply()
    close_group()
    return b.out


def _add_plain_computer(b: _Builder, m: dict, vision: bool) -> None:
    typ = m.get("type")
    if typ == "console":
        out = _content_text(m.get("content"))
        b.add("user", CODE_OUTPUT_PREFIX + out if out.strip() else EMPTY_CODE_OUTPUT)
    elif typ == "image":
        b.add("user", [_image_part(m, True)] if vision else _image_note(m))
    elif typ == "error":
        b.add("user", "Error: " + _content_text(m.get("content")))
    elif m.get("content") not in (None, ""):
        b.add("user", _content_text(m.get("content")))


# ------------------------------------------------------------------------------------------
# Open Interpreter's plain message list
# ------------------------------------------------------------------------------------------


def lmc_to_oi(messages: Iterable[dict]) -> list[dict]:
    """Open Interpreter's plain list: only ``role``/``type``/``format``/``content`` of each
    stored message (ephemeral chunks dropped; ``tool_call`` content dicts kept as they are)."""
    out = []
    for m in messages:
        if not isinstance(m, dict) or is_ephemeral(m):
            continue
        out.append({k: m[k] for k in _OI_KEYS if k in m})
    return out


def oi_to_lmc(messages: Iterable[dict]) -> list[dict]:
    """Read Open Interpreter's saved list (or ours) as LMC v1 messages.

    Keeps every key of each message (our fields pass through), drops flags and ephemeral
    chunks, maps OI's old ``{"role": "function"}`` / ``"computer"`` output spellings onto
    ``computer``/``console``/``output``, and gives a missing ``type`` the value ``message``.
    Raises ``ValueError`` when ``messages`` is not a list of dicts with a ``role``.
    """
    if not isinstance(messages, (list, tuple)):
        raise ValueError("an Open Interpreter conversation must be a JSON list of messages")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m:
            raise ValueError(f"message {i} is not an object with a 'role'")
        m = strip_flags(m)
        if m["role"] == "function":
            m = {**m, "role": "computer", "type": "console", "format": "output"}
        m.setdefault("type", "message")
        if m["role"] == "computer" and m["type"] == "console" and "format" not in m:
            m["format"] = "output"
        if is_ephemeral(m):
            continue
        out.append(m)
    return out
