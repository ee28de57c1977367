"""Parsing a model's reply: streamed markdown fences (text mode) and tool calls (function mode).

Pure logic, no third-party imports. Everything here gives the same result whatever way the
provider splits its stream (fault cases BR-01 to BR-09).

Text mode
    :class:`FenceParser` turns streamed text into events (``text``, ``code_start``, ``code``,
    ``code_end``) following CommonMark's fenced-code rules.
    :func:`extract_hallucinated_calls` finds Open Interpreter's known hallucinated call shapes in
    a finished text reply; :func:`guess_language` picks a runtime for an untagged block.

Function mode
    :class:`ToolCallAccumulator` merges OpenAI-style streamed ``tool_calls`` deltas by ``index``;
    :func:`repair_json` parses arguments leniently; :func:`interpret_execute_call` turns one call
    into ``{"ok": True, "language", "code"}`` or ``{"ok": False, "error"}``.
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = [
    "FenceParser",
    "ToolCallAccumulator",
    "repair_json",
    "interpret_execute_call",
    "extract_hallucinated_calls",
    "guess_language",
    "collapse_events",
    "EXECUTE_TOOL_NAME",
]

#: The one tool function-calling models get.
EXECUTE_TOOL_NAME = "execute"

_FENCE_CHARS = "`~"


# --------------------------------------------------------------------------------------------
# Fenced code blocks
# --------------------------------------------------------------------------------------------


def _opening_fence(line: str) -> tuple[str, int, int, str] | None:
    """Parse a complete line (no newline) as an opening fence.

    Returns ``(char, length, indent, info)`` or None. ``info`` is the raw info string.
    """
    indent = len(line) - len(line.lstrip(" "))
    if indent > 3:
        return None
    rest = line[indent:]
    if not rest or rest[0] not in _FENCE_CHARS:
        return None
    ch = rest[0]
    n = len(rest) - len(rest.lstrip(ch))
    if n < 3:
        return None
    info = rest[n:]
    if ch == "`" and "`" in info:
        return None
    return ch, n, indent, info


def _could_open(partial: str) -> bool:
    """True while an incomplete line (no newline yet) may still become an opening fence line."""
    indent = len(partial) - len(partial.lstrip(" "))
    if indent > 3:
        return False
    rest = partial[indent:]
    if not rest:
        return True
    ch = rest[0]
    if ch not in _FENCE_CHARS:
        return False
    n = len(rest) - len(rest.lstrip(ch))
    if n == len(rest):  # only fence characters so far
        return True
    if n < 3:
        return False
    return not (ch == "`" and "`" in rest[n:])


def _is_closing(line: str, ch: str, length: int) -> bool:
    """True when a complete line (no newline) closes a fence of ``length`` x ``ch``."""
    line = line.rstrip("\r")
    indent = len(line) - len(line.lstrip(" "))
    if indent > 3:
        return False
    rest = line[indent:]
    n = len(rest) - len(rest.lstrip(ch)) if rest[:1] == ch else 0
    if n < length:
        return False
    return rest[n:].strip(" \t") == ""


def _could_close(partial: str, ch: str, length: int) -> bool:
    """True while an incomplete line inside a block may still become its closing fence."""
    partial = partial.rstrip("\r")
    indent = len(partial) - len(partial.lstrip(" "))
    if indent > 3:
        return False
    rest = partial[indent:]
    if not rest:
        return True
    n = len(rest) - len(rest.lstrip(ch)) if rest[0] == ch else 0
    if n == 0:
        return False
    if n == len(rest):
        return True
    return n >= length and rest[n:].strip(" \t") == ""


def _tag_of(info: str) -> str:
    info = info.strip(" \t\r")
    return info.split()[0] if info else ""


class FenceParser:
    """Streaming CommonMark fenced-code parser for text-mode replies.

    Usage::

        p = FenceParser()
        for delta in stream:
            for ev in p.feed(delta): ...
        for ev in p.finish(finish_reason): ...

    Events are dicts:

    - ``{"kind": "text", "content": str}``: prose, emitted as soon as it cannot be part of a fence
      line. Concatenating every text event gives the reply exactly, minus the fence lines and the
      code inside them (the newline ending a prose line before a fence stays in the prose).
    - ``{"kind": "code_start", "tag": str}``: the info string's first word, stripped once
      (``"``` Python "`` -> ``"Python"``; ``""`` when untagged). Not normalised: use
      ``oitui.computer.languages.normalize_language`` / :func:`guess_language`.
    - ``{"kind": "code", "content": str}``: code text as it streams. A line is held back only
      while it could still be the closing fence, so fence text never leaks into the code.
    - ``{"kind": "code_end", "tag": str, "code": str, "closed": bool}``: the full code without
      its trailing newline. ``closed`` is False for a block still open when the stream ended;
      such an event also has ``"truncated": True`` when ``finish_reason == "length"`` (the
      caller must not run it and should say the reply was cut).

    Rules (CommonMark): a fence is 3+ backticks or tildes indented by at most 3 spaces; it is
    closed only by a line of the same character, at least as long, with nothing but spaces
    after; a backtick fence's info string may not contain a backtick (so inline code is prose);
    the opening fence's indentation is removed from each code line (up to that many spaces).
    Several blocks per reply are reported in order.

    The concatenation of the ``text`` events, the ``code`` events and the ``code_start`` /
    ``code_end`` sequence are identical for any split of the same reply into deltas (see
    :func:`collapse_events`). ``feed`` accepts ``None`` (treated as ``""``); a non-string raises
    ``TypeError``; feeding after ``finish`` raises ``RuntimeError``.
    """

    def __init__(self) -> None:
        self._line = ""  # pending part of the current line (not yet emitted)
        self._line_mode: str | None = None  # None (undecided) | "text" | "code" for the current line
        self._in_code = False
        self._fence: tuple[str, int, int] | None = None  # char, length, indent
        self._tag = ""
        self._code: list[str] = []
        self._indent_left = 0  # spaces still to strip at the start of the current code line
        self._finished = False

    # -- public API ---------------------------------------------------------------------------

    @property
    def in_code(self) -> bool:
        """True while inside an open code block."""
        return self._in_code

    def feed(self, delta: str | None) -> list[dict]:
        """Consume one streamed piece of the reply; return the events it completes."""
        if self._finished:
            raise RuntimeError("FenceParser.feed() called after finish()")
        if delta is None:
            return []
        if not isinstance(delta, str):
            raise TypeError(f"FenceParser.feed() expects str, got {type(delta).__name__}")
        events: list[dict] = []
        pos = 0
        while pos < len(delta):
            nl = delta.find("\n", pos)
            if nl == -1:
                self._add_partial(delta[pos:], events)
                break
            self._add_partial(delta[pos:nl], events)
            self._end_line(events)
            pos = nl + 1
        return _merge_adjacent(events)

    def finish(self, finish_reason: str | None = "stop") -> list[dict]:
        """End the stream; return the remaining events.

        A pending last line is resolved (a closing fence without a trailing newline closes its
        block). A block still open gets ``code_end`` with ``closed=False`` (and
        ``truncated=True`` when ``finish_reason == "length"``). Calling it twice raises
        ``RuntimeError``.
        """
        if self._finished:
            raise RuntimeError("FenceParser.finish() called twice")
        self._finished = True
        events: list[dict] = []
        line = self._line
        self._line = ""
        if self._in_code:
            assert self._fence is not None
            if self._line_mode is None and line and _is_closing(line, self._fence[0], self._fence[1]):
                self._close(events, closed=True)
            else:
                if line:
                    self._emit_code(line, events)
                end = self._close(events, closed=False)
                if finish_reason == "length":
                    end["truncated"] = True
        else:
            if self._line_mode is None and line:
                op = _opening_fence(line)
                if op is not None:
                    # An opening fence as the very last line: an empty block that never closed.
                    events.append({"kind": "code_start", "tag": _tag_of(op[3])})
                    self._in_code, self._tag = True, _tag_of(op[3])
                    end = self._close(events, closed=False)
                    if finish_reason == "length":
                        end["truncated"] = True
                else:
                    events.append({"kind": "text", "content": line})
            elif line:
                events.append({"kind": "text", "content": line})
        return _merge_adjacent(events)

    # -- internals ----------------------------------------------------------------------------

    def _add_partial(self, piece: str, events: list[dict]) -> None:
        """Add text that contains no newline to the current line."""
        if not piece:
            return
        if self._line_mode == "text":
            events.append({"kind": "text", "content": piece})
            return
        if self._line_mode == "code":
            self._emit_code(piece, events)
            return
        self._line += piece
        if self._in_code:
            assert self._fence is not None
            if not _could_close(self._line, self._fence[0], self._fence[1]):
                self._line_mode = "code"
                pending, self._line = self._line, ""
                self._emit_code(pending, events)
        elif not _could_open(self._line):
            self._line_mode = "text"
            events.append({"kind": "text", "content": self._line})
            self._line = ""

    def _end_line(self, events: list[dict]) -> None:
        """A newline arrived: resolve the current line."""
        line, mode = self._line, self._line_mode
        self._line, self._line_mode = "", None
        if self._in_code:
            assert self._fence is not None
            if mode is None and _is_closing(line, self._fence[0], self._fence[1]):
                self._close(events, closed=True)
                return
            self._emit_code(line + "\n", events)
            self._indent_left = self._fence[2]
            return
        if mode is None:
            op = _opening_fence(line.rstrip("\r"))
            if op is not None:
                ch, n, indent, info = op
                self._in_code = True
                self._fence = (ch, n, indent)
                self._tag = _tag_of(info)
                self._code = []
                self._indent_left = indent
                events.append({"kind": "code_start", "tag": self._tag})
                return
        events.append({"kind": "text", "content": line + "\n"})

    def _emit_code(self, text: str, events: list[dict]) -> None:
        if self._indent_left:
            k = 0
            while k < len(text) and k < self._indent_left and text[k] == " ":
                k += 1
            self._indent_left = self._indent_left - k if k == len(text) else 0
            text = text[k:]
        if text:
            self._code.append(text)
            events.append({"kind": "code", "content": text})

    def _close(self, events: list[dict], *, closed: bool) -> dict:
        code = "".join(self._code)
        if code.endswith("\n"):
            code = code[:-1]
        end = {"kind": "code_end", "tag": self._tag, "code": code, "closed": closed}
        events.append(end)
        self._in_code = False
        self._fence = None
        self._code = []
        self._tag = ""
        self._indent_left = 0
        self._line_mode = None
        return end


def _merge_adjacent(events: list[dict]) -> list[dict]:
    out: list[dict] = []
    for ev in events:
        if out and ev["kind"] in ("text", "code") and out[-1]["kind"] == ev["kind"]:
            out[-1] = {"kind": ev["kind"], "content": out[-1]["content"] + ev["content"]}
        else:
            out.append(ev)
    return out


def collapse_events(events: list[dict]) -> list[dict]:
    """Merge adjacent ``text`` events and adjacent ``code`` events (copies; input untouched).

    Two event lists from different chunkings of one reply collapse to equal lists.
    """
    return _merge_adjacent([dict(e) for e in events])


# --------------------------------------------------------------------------------------------
# Tool calls
# --------------------------------------------------------------------------------------------


def _get(obj: Any, key: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


class ToolCallAccumulator:
    """Merges OpenAI-style streamed ``tool_calls`` deltas into whole calls, keyed by ``index``.

    ``add(delta.tool_calls)`` for every streamed delta (items may be dicts or litellm objects
    with attributes). ``id``, ``type`` and ``function.name`` are *set* when a delta carries a
    non-empty value (a provider repeating them in every delta does not give ``executeexecute``,
    BR-08); ``function.arguments`` fragments are appended. An item without ``index`` continues
    the last call unless it carries a new ``id``, which starts a new call.

    ``calls()`` -> ``[{"index": int, "id": str | None, "name": str, "arguments": str}]`` in
    index order (``arguments`` is the raw concatenated string; parse it with
    :func:`repair_json` or :func:`interpret_execute_call`).
    """

    def __init__(self) -> None:
        self._calls: dict[int, dict] = {}
        self._last: int | None = None

    def __bool__(self) -> bool:
        return bool(self._calls)

    def __len__(self) -> int:
        return len(self._calls)

    def add(self, delta_tool_calls: list | None) -> None:
        """Merge one delta's ``tool_calls`` list (None or empty is ignored)."""
        if not delta_tool_calls:
            return
        if not isinstance(delta_tool_calls, (list, tuple)):
            delta_tool_calls = [delta_tool_calls]
        for item in delta_tool_calls:
            if item is None:
                continue
            index = _get(item, "index")
            call_id = _get(item, "id")
            if not isinstance(index, int):
                if self._last is None or (call_id and self._calls[self._last]["id"] not in (None, call_id)):
                    index = max(self._calls, default=-1) + 1
                else:
                    index = self._last
            call = self._calls.setdefault(index, {"index": index, "id": None, "type": "function", "name": "", "arguments": []})
            self._last = index
            if call_id:
                call["id"] = str(call_id)
            typ = _get(item, "type")
            if typ:
                call["type"] = str(typ)
            fn = _get(item, "function")
            name = _get(fn, "name")
            if name:
                call["name"] = str(name)
            args = _get(fn, "arguments")
            if args:
                call["arguments"].append(args if isinstance(args, str) else json.dumps(args))

    def calls(self) -> list[dict]:
        """The accumulated calls, in index order (fresh dicts; see the class docstring)."""
        return [
            {"index": c["index"], "id": c["id"], "name": c["name"], "arguments": "".join(c["arguments"])}
            for _, c in sorted(self._calls.items())
        ]


_VALID_ESCAPE = re.compile(r'\\(?:u[0-9a-fA-F]{4}|["\\/bfnrt])|\\')


def _fix_escapes(raw: str) -> str:
    """Double every backslash that does not start a valid JSON escape (``\\d`` -> ``\\\\d``)."""
    return _VALID_ESCAPE.sub(lambda m: m.group(0) if len(m.group(0)) > 1 else "\\\\", raw)


def repair_json(raw: str) -> dict | None:
    """Parse tool-call arguments leniently; return a dict, or None when hopeless.

    Tried in order: strict ``json.loads``; raw control characters allowed (``strict=False``);
    invalid escapes such as ``\\d`` kept literally (the backslash stays in the value); then the
    first JSON object in the text, ignoring text around it (trailing garbage, a doubled
    ``{...}{...}``). An empty or blank string gives ``{}`` (a call with no arguments). A value
    that parses but is not an object (a list, a number) gives None. Never raises.
    """
    if not isinstance(raw, str):
        return raw if isinstance(raw, dict) else None
    if not raw.strip():
        return {}
    candidates = (raw, _fix_escapes(raw))
    for text in candidates:
        for strict in (True, False):
            try:
                value = json.loads(text, strict=strict)
            except (ValueError, RecursionError):
                continue
            return value if isinstance(value, dict) else None
    decoder = json.JSONDecoder(strict=False)
    for text in candidates:
        start = text.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(text, start)
            except (ValueError, RecursionError):
                start = text.find("{", start + 1)
                continue
            if isinstance(value, dict):
                return value
            start = text.find("{", start + 1)
    return None


def _canonical_runtime(name: str) -> str | None:
    try:
        from oitui.computer.languages import normalize_language
    except Exception:  # pragma: no cover - computer package always present
        return name.strip().lower() or None
    return normalize_language(name)


def _normalize_tool_name(name: str) -> str:
    """``functions.execute`` -> ``execute``; ``executeexecute`` -> ``execute``."""
    n = (name or "").strip()
    for prefix in ("functions.", "function.", "tools.", "functions:", "functions/"):
        if n.lower().startswith(prefix):
            n = n[len(prefix):]
            break
    low = n.lower()
    if low and len(low) % len(EXECUTE_TOOL_NAME) == 0 and low == EXECUTE_TOOL_NAME * (len(low) // len(EXECUTE_TOOL_NAME)):
        return EXECUTE_TOOL_NAME
    return n


def _language_value(value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        return None
    v = value.strip()
    if not v:
        return None
    return _canonical_runtime(v) or v.lower()


def interpret_execute_call(name: str, raw_arguments: str) -> dict:
    """Turn one function call into code to run, leniently (BR-07, BR-08).

    Returns ``{"ok": True, "language": str, "code": str}`` or ``{"ok": False, "error": str}``
    (the error text is meant for the model, as the tool result of that call id).

    - ``execute`` (also ``functions.execute``, ``executeexecute`` ...): arguments parsed with
      :func:`repair_json`; a missing ``language`` means python; a missing/non-string ``code``
      is an error.
    - a function named after a runtime (``python``, ``bash``, ``shell``, ...): its arguments
      are the raw code, unless they are a JSON object with ``"code"`` (then that code, and its
      ``language`` when given).
    - any other name: ``"The function `NAME` does not exist. Available: execute(language, code)."``

    - no name at all, with execute-shaped arguments (``{"code": ...}``): treated as ``execute``.

    ``language`` is the canonical runtime name (``python``, ``shell``, ...) when known, else the
    given value lower-cased (the caller reports unavailable languages).
    """
    raw = raw_arguments if isinstance(raw_arguments, str) else ("" if raw_arguments is None else json.dumps(raw_arguments))
    tool = _normalize_tool_name(name if isinstance(name, str) else "")
    if not tool:
        # A call with no name but execute-shaped arguments is an execute call.
        args = repair_json(raw)
        if isinstance(args, dict) and isinstance(args.get("code"), str):
            tool = EXECUTE_TOOL_NAME
    if tool.lower() == EXECUTE_TOOL_NAME:
        args = repair_json(raw)
        if args is None:
            try:
                json.loads(raw)
                detail = "it is not a JSON object"
            except ValueError as exc:
                detail = str(exc)
            return {
                "ok": False,
                "error": f"Could not parse the arguments of `execute` as JSON ({detail}). "
                'Call execute with {"language": "python", "code": "..."}.',
            }
        code = args.get("code")
        if not isinstance(code, str):
            return {
                "ok": False,
                "error": "The call to `execute` has no `code` string. "
                'Call execute with {"language": "python", "code": "..."}.',
            }
        language = _language_value(args.get("language")) or "python"
        return {"ok": True, "language": language, "code": code}

    runtime = _canonical_runtime(tool) if tool else None
    if runtime:
        args = repair_json(raw) if raw.lstrip().startswith("{") else None
        if isinstance(args, dict) and isinstance(args.get("code"), str):
            return {"ok": True, "language": _language_value(args.get("language")) or runtime, "code": args["code"]}
        return {"ok": True, "language": runtime, "code": raw}

    shown = name if isinstance(name, str) and name.strip() else "(no name)"
    return {"ok": False, "error": f"The function `{shown}` does not exist. Available: execute(language, code)."}


_HALLUCINATED_CALL = re.compile(r"(?:functions\.)?execute\s*\(\s*(?=\{)")


def extract_hallucinated_calls(text: str) -> list[dict]:
    """Find Open Interpreter's known hallucinated call shapes in a finished text-mode reply.

    Recognised: ``functions.execute({"language": ..., "code": ...})`` (or ``execute({...})``),
    any number of them; and a reply that is, as a whole, a JSON object with ``"code"`` (and
    usually ``"language"``), optionally wrapped in a ```json fence. JSON is parsed with the
    same leniency as :func:`repair_json`. Returns ``[{"language": str, "code": str}, ...]`` in
    order (language defaults to python); ``[]`` when there is none.
    """
    if not isinstance(text, str) or not text.strip():
        return []
    found: list[dict] = []
    decoder = json.JSONDecoder(strict=False)
    for m in _HALLUCINATED_CALL.finditer(text):
        start = m.end()
        value = None
        for candidate in (text, None):
            try:
                if candidate is not None:
                    value, _ = decoder.raw_decode(text, start)
                else:
                    close = _matching_paren_end(text, start)
                    value = repair_json(text[start:close])
            except ValueError:
                value = None
            if isinstance(value, dict):
                break
        if isinstance(value, dict) and isinstance(value.get("code"), str):
            found.append({"language": _language_value(value.get("language")) or "python", "code": value["code"]})
    if found:
        return found
    body = text.strip()
    fence = re.fullmatch(r"(`{3,}|~{3,})[ \t]*(?:json)?[ \t]*\r?\n(.*?)\r?\n[ \t]*\1[ \t]*", body, re.S | re.I)
    if fence:
        body = fence.group(2).strip()
    if body.startswith("{") and body.endswith("}"):
        value = repair_json(body)
        if isinstance(value, dict) and isinstance(value.get("code"), str) and set(value) <= {"language", "code"}:
            return [{"language": _language_value(value.get("language")) or "python", "code": value["code"]}]
    return []


def _matching_paren_end(text: str, start: int) -> int:
    """Index of the ``)`` closing a hallucinated call whose JSON starts at ``start`` (or end)."""
    end = text.rfind(")")
    return end if end > start else len(text)


# --------------------------------------------------------------------------------------------
# Untagged blocks
# --------------------------------------------------------------------------------------------

_SHELL_COMMANDS = frozenset(
    """
    ls ll la cd pwd pip pip3 pipx git echo printf cat mkdir rmdir curl wget rm cp mv touch grep egrep
    rg find apt apt-get apt-cache dpkg yum dnf pacman brew npm npx yarn pnpm node deno bun chmod chown
    sudo export which whereis head tail wc less more sort uniq cut tr sed awk xargs tar zip unzip gzip
    gunzip ssh scp rsync ps kill killall top df du free uname whoami env source ln file stat du date
    man history alias unset conda uv poetry docker kubectl make cmake gcc g++ go cargo rustc java
    javac ruby gem perl php systemctl service open xdg-open osascript say ping nslookup dig ifconfig
    ip netstat lsof tree clear diff patch basename dirname realpath readlink tee type command set
    nohup time watch jq yq sqlite3 psql mysql redis-cli ffmpeg convert magick pandoc
    """.split()
)

_PY_FIRST_WORD = re.compile(r"^([A-Za-z0-9_][A-Za-z0-9_.+\-]*|\./\S+|/\S+|~/\S+|\$)(.*)$")


def guess_language(code: str) -> str:
    """Runtime for an untagged block: ``"shell"`` when its first word is plainly a shell command
    (``ls``, ``cd``, ``pip``, ``git``, ``echo``, ``python3 script.py``, ``./run.sh``, a bash
    shebang ...), else ``"python"``.

    The first non-blank line that is not a comment decides (a ``#!`` shebang decides by itself).
    A first word used as Python (``cat = 3``, ``find(x)``, ``echo.x``) stays python.
    """
    if not isinstance(code, str):
        return "python"
    lines = code.splitlines()
    for line in lines:
        s = line.strip()
        if not s:
            continue
        if s.startswith("#!"):
            return "python" if "python" in s else "shell"
        if s.startswith("#"):
            continue
        if s.startswith("$ "):
            s = s[2:].lstrip()
        m = _PY_FIRST_WORD.match(s)
        if not m:
            return "python"
        word, rest = m.group(1), m.group(2)
        after = rest.lstrip()
        if word.startswith(("./", "/", "~/")):
            return "shell" if not rest.startswith((".", "(", "[")) else "python"
        if after[:1] in ("=", "(", "[", ".", ":", ",") or rest.startswith("."):
            return "python"  # ``cat = 1``, ``find(x)``, ``ls.sort()``, ``head: int``
        low = word.lower()
        if low in ("python", "python3") or re.fullmatch(r"python3(\.\d+)?", low):
            # ``python3 script.py`` / ``python -m pip`` are shell; a bare word is a NameError anyway
            return "shell" if after else "python"
        if low in _SHELL_COMMANDS:
            return "shell"
        return "python"
    return "python"
