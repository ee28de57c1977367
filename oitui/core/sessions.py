"""Saved conversations: one JSON Lines file per session plus a SQLite FTS5 search index.

File format (``sessions/<ID>.jsonl``, readable with ``cat`` and ``jq``)::

    {"lmc_version": 1, "session": {"id": ..., "title": ..., "created": ..., ...}}   header
    {"role": "user", "type": "message", "content": "..."}                           one LMC message per line
    {"role": "assistant", "type": "code", "format": "python", "content": "...", "call_id": "..."}
    {"meta": {"prompt_tokens": 120, "updated": "..."}}                              a metadata update

Readers take the header's metadata updated by every later ``{"meta": ...}`` line. Lines are
appended with one ``write`` on an ``O_APPEND`` descriptor and ``fsync``'d, so a crash loses at
most the line being written and two processes never interleave inside a line. A damaged or
truncated line is skipped with a warning; the file is never rewritten with less data (except by
an explicit :meth:`Session.replace_messages`, used for /undo and /reset).

Older formats are migrated on read (the file itself is only rewritten, after a ``.bak`` copy,
when something is appended): a header without ``lmc_version``, a file of bare messages, Open
Interpreter's saved conversation (a JSON list of its messages), Open Interpreter 0.1's messages
(``{"role", "message", "language", "code", "output"}``), and our JSON export.

The index (``sessions/index.sqlite``) is a cache built from the files: it is brought up to date
(only the new bytes of files that grew) at every :meth:`SessionStore.list` and
:meth:`SessionStore.search`, and rebuilt when missing, damaged or of another schema.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import os
import re
import secrets as _secrets_mod
import shutil
import sqlite3
import tempfile
import threading
import time
import unicodedata
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from oitui.core.errors import OituiError

__all__ = [
    "LMC_VERSION",
    "Session",
    "SessionStore",
    "SessionInfo",
    "SearchHit",
    "SessionNotFound",
    "AmbiguousSession",
    "SessionImportError",
    "sanitize",
    "register_secret",
    "render_text",
    "EXPORT_FORMATS",
]

LMC_VERSION = 1
EXPORT_FORMATS = ("md", "ipynb", "json", "oi")
_ID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case
_ID_LEN = 8
_INDEX_SCHEMA = 4
_CHANGES = ".changes.log"  # ids of sessions appended to, one per line (index hints)
_CHANGES_MAX = 1 << 20
_SEARCH_WINDOW = 2000
_INFO_COLUMNS = "id, created, updated, turns, model, harness, cwd, title, error"
_MAX_INDEXED_CHARS = 200_000
_TITLE_CHARS = 80


def _private_dir(path: Path) -> None:
    """Create ``path`` (and parents) and keep it private to its owner (mode 0700).

    Conversations, the search index and backups live here; other local users must not read
    them, whatever the umask. A folder we cannot chmod (not ours) is left as it is.
    """
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        if path.stat().st_mode & 0o077:
            path.chmod(0o700)
    except OSError:
        pass


class SessionNotFound(OituiError):
    """No session matches the id, prefix or "last" (``ref`` names what was asked for)."""

    def __init__(self, message: str, ref: str | None = None):
        super().__init__(message)
        self.ref = ref


class AmbiguousSession(OituiError):
    """An id prefix matches more than one session (``matches`` lists their ids)."""

    def __init__(self, message: str, ref: str | None = None, matches: list[str] | None = None):
        super().__init__(message)
        self.ref = ref
        self.matches = matches or []


class SessionImportError(OituiError):
    """A file given to :meth:`SessionStore.import_file` cannot be read as a conversation."""


# --------------------------------------------------------------------------------------------
# Sanitising
# --------------------------------------------------------------------------------------------

_EXTRA_SECRETS: set[str] = set()
_ANSI = re.compile(
    r"\x1b(?:\[[0-?]*[ -/]*[@-~]"          # CSI
    r"|\][^\x07\x1b]*(?:\x07|\x1b\\)?"      # OSC
    r"|[PX^_][^\x1b]*(?:\x1b\\)?"           # DCS, SOS, PM, APC
    r"|[ -/]*[0-~])?"                       # two-char and nF escapes; a lone ESC
    r"|\x9b[0-?]*[ -/]*[@-~]"               # 8-bit CSI
)
_SURROGATE = re.compile(r"[\ud800-\udfff]")
REDACTED = "[REDACTED]"


def register_secret(value: str | None) -> None:
    """Add a key value (e.g. the configured ``api_key``) to redact from everything saved.
    Values shorter than 8 characters are ignored (too likely to hit ordinary text)."""
    if value and isinstance(value, str) and len(value) >= 8:
        _EXTRA_SECRETS.add(value)


def _known_secrets(extra: Iterable[str] = ()) -> list[str]:
    found = set(_EXTRA_SECRETS)
    for k, v in os.environ.items():
        if v and len(v) >= 8 and (k.endswith("_API_KEY") or k.endswith("_API_TOKEN") or k == "OITUI_API_KEY"):
            found.add(v)
    for v in extra:
        if v and len(v) >= 8:
            found.add(v)
    return sorted(found, key=len, reverse=True)


def _clean_str(s: str, secrets: list[str]) -> str:
    if "\x1b" in s or "\x9b" in s:
        s = _ANSI.sub("", s)
        s = s.replace("\x1b", "")
    if not s.isascii() and _SURROGATE.search(s):
        s = _SURROGATE.sub("\ufffd", s)
    for v in secrets:
        if v in s:
            s = s.replace(v, REDACTED)
    return s


def sanitize(obj: Any, secrets: list[str] | None = None, *, _image: bool = False) -> Any:
    """Return a JSON-safe copy of ``obj`` fit to be saved.

    Strings lose ANSI escape sequences and lone surrogates (replaced by U+FFFD) and have known
    API key values (``*_API_KEY`` environment variables and :func:`register_secret` values)
    replaced by ``[REDACTED]``. Non-JSON values are converted: bytes to base64 (image content)
    or UTF-8 text, pydantic-style objects via ``model_dump()``, dataclasses to dicts, sets and
    tuples to lists, paths to strings, NaN/infinity to None, anything else to ``str(obj)``.
    """
    if secrets is None:
        secrets = _known_secrets()
    if isinstance(obj, str):
        return _clean_str(obj, secrets)
    if obj is None or isinstance(obj, (bool, int)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        image = obj.get("type") == "image"
        return {(_clean_str(k, secrets) if isinstance(k, str) else str(k)):
                sanitize(v, secrets, _image=image and k == "content") for k, v in obj.items()}
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [sanitize(v, secrets) for v in obj]
    if isinstance(obj, (bytes, bytearray, memoryview)):
        data = bytes(obj)
        if _image:
            return base64.b64encode(data).decode("ascii")
        return _clean_str(data.decode("utf-8", errors="replace"), secrets)
    if isinstance(obj, os.PathLike):
        return _clean_str(os.fspath(obj), secrets)
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return sanitize(dataclasses.asdict(obj), secrets)
    dump = getattr(obj, "model_dump", None) or getattr(obj, "dict", None)
    if callable(dump):
        try:
            return sanitize(dump(), secrets)
        except Exception:
            pass
    return _clean_str(str(obj), secrets)


# --------------------------------------------------------------------------------------------
# Reading and migrating
# --------------------------------------------------------------------------------------------


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds")


def _parse_time(text: Any) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return dt


def _migrate_message(m: Any) -> list[dict]:
    """Turn one stored message of any known older shape into LMC v1 messages ([] if unusable)."""
    if not isinstance(m, dict):
        return []
    if "type" in m and "role" in m:
        return [m]
    role = m.get("role")
    out: list[dict] = []
    # Open Interpreter 0.1: {"role", "message", "language", "code", "output", "image"}.
    if any(k in m for k in ("message", "code", "output", "language")):
        if m.get("message"):
            out.append({"role": role or "assistant", "type": "message", "content": m["message"]})
        if m.get("code"):
            out.append({"role": "assistant", "type": "code", "format": m.get("language") or "python",
                        "content": m["code"]})
        if m.get("output"):
            out.append({"role": "computer", "type": "console", "format": "output", "content": m["output"]})
        if m.get("image"):
            out.append({"role": "computer", "type": "image", "format": "base64.png", "content": m["image"]})
        return out
    if role in ("user", "assistant", "system") and "content" in m:
        c = m["content"]
        if not isinstance(c, str):
            c = json.dumps(c, ensure_ascii=False)
        return [{**m, "type": "message", "content": c}]
    return []


def _derived_title(messages: Iterable[dict]) -> str | None:
    for m in messages:
        if m.get("role") == "user" and m.get("type") == "message" and isinstance(m.get("content"), str):
            return _title_of(m["content"])
    return None


def _title_of(text: str) -> str | None:
    for line in text.splitlines():
        line = " ".join(line.split())
        if line:
            return line if len(line) <= _TITLE_CHARS else line[: _TITLE_CHARS - 1] + "…"
    return None


def _is_turn(m: dict) -> bool:
    return m.get("role") == "user" and m.get("type") == "message"


class _Scanner:
    """Reads the lines of a JSONL session file one at a time; shared by loading and indexing.

    ``state`` (JSON-able, kept in the index between syncs): meta, version, header, lines,
    messages, turns, title, warnings.
    """

    def __init__(self, name: str, state: dict | None = None):
        self.name = name
        self.state = state or {"meta": {}, "version": None, "header": False, "lines": 0, "messages": 0,
                               "turns": 0, "title": None, "warnings": []}

    def feed(self, raw: bytes, last_partial: bool = False) -> list[dict] | None:
        """Feed one line (without its newline). Returns the messages it holds (maybe []), or None
        when the line is a partial last line that did not parse (not counted)."""
        st = self.state
        if not raw.strip():
            if not last_partial:
                st["lines"] += 1
            return []
        lineno = st["lines"] + 1
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            if last_partial:
                return None
            st["lines"] += 1
            st["warnings"].append(f"{self.name}: line {lineno} is damaged; skipped")
            return []
        st["lines"] += 1
        if not isinstance(obj, dict):
            st["warnings"].append(f"{self.name}: line {lineno} is not a JSON object; skipped")
            return []
        if "role" not in obj:
            if "session" in obj and isinstance(obj["session"], dict) and st["messages"] == 0 and not st["header"]:
                st["header"] = True
                version = obj.get("lmc_version", 0)
                st["version"] = version if isinstance(version, int) else 0
                if st["version"] > LMC_VERSION:
                    st["warnings"].append(f"{self.name}: written by a newer oitui (lmc_version {version}); "
                                          f"read as version {LMC_VERSION}")
                st["meta"].update(obj["session"])
                return []
            if "meta" in obj and isinstance(obj["meta"], dict):
                st["meta"].update(obj["meta"])
                return []
        if st["version"] is None:
            st["version"] = 0  # bare messages without a header: an older format
        msgs = [obj] if (st["version"] >= 1 and "type" in obj and "role" in obj) else _migrate_message(obj)
        if not msgs:
            st["warnings"].append(f"{self.name}: line {lineno} is not a message; skipped")
        for m in msgs:
            st["messages"] += 1
            if _is_turn(m):
                st["turns"] += 1
                if st["title"] is None and isinstance(m.get("content"), str):
                    st["title"] = _title_of(m["content"])
        return msgs


@dataclass
class _Parsed:
    meta: dict
    messages: list
    warnings: list
    migrated: bool        # the file is not in our JSONL v1 format (rewrite before appending)
    end_offset: int       # bytes of complete lines (JSONL), else the file size
    state: dict | None    # scanner state for JSONL files


def _parse_json_list_prefix(text: str) -> tuple[list, bool]:
    """Parse a JSON list, recovering the complete leading elements when it is cut short.
    Returns (elements, complete)."""
    try:
        data = json.loads(text)
        if isinstance(data, list):
            return data, True
    except ValueError:
        pass
    dec = json.JSONDecoder()
    i = text.index("[") + 1
    items: list = []
    n = len(text)
    while True:
        while i < n and text[i] in " \t\r\n,":
            i += 1
        if i >= n or text[i] == "]":
            return items, False
        try:
            obj, i = dec.raw_decode(text, i)
        except ValueError:
            return items, False
        items.append(obj)


def _parse_bytes(data: bytes, name: str) -> _Parsed:
    """Parse a session file of any supported format. Never raises for bad content: what cannot
    be read becomes a warning (no messages and a warning when nothing at all is readable)."""
    head = data.lstrip(b"\xef\xbb\xbf \t\r\n")[:1]
    if head == b"[":
        text = data.decode("utf-8", errors="replace").lstrip("\ufeff")
        items, complete = _parse_json_list_prefix(text)
        messages = [m for item in items for m in _migrate_message(item)]
        warnings = [] if complete else [f"{name}: the JSON list is cut short; read {len(items)} messages"]
        return _Parsed({}, messages, warnings, True, len(data), None)
    if head == b"{":
        first = data.split(b"\n", 1)[0]
        try:
            json.loads(first.decode("utf-8"))
            jsonl = True
        except (UnicodeDecodeError, ValueError):
            jsonl = b"\n" not in data.rstrip()  # a single damaged line is still JSONL
        if not jsonl:
            try:
                doc = json.loads(data.decode("utf-8"))
            except (UnicodeDecodeError, ValueError):
                doc = None
            if isinstance(doc, dict) and isinstance(doc.get("messages"), list):
                meta = doc.get("session") if isinstance(doc.get("session"), dict) else {}
                messages = [m for item in doc["messages"] for m in _migrate_message(item)]
                return _Parsed(dict(meta), messages, [], True, len(data), None)
    scanner = _Scanner(name)
    lines = data.split(b"\n")
    partial = lines.pop()  # b"" when the file ends with a newline
    messages: list[dict] = []
    for raw in lines:
        messages.extend(scanner.feed(raw))
    end = len(data) - len(partial)
    if partial.strip():
        got = scanner.feed(partial, last_partial=True)
        if got is None:
            scanner.state["warnings"].append(
                f"{name}: the last line is incomplete ({len(partial)} bytes, probably cut short); skipped")
        else:
            messages.extend(got)
            end = len(data)
    st = scanner.state
    warnings = list(st["warnings"])
    if not st["header"] and not messages and not warnings and data.strip():
        warnings.append(f"{name}: no session header or messages found")
    migrated = (st["version"] or 0) < 1
    return _Parsed(dict(st["meta"]), messages, warnings, migrated, end, st)


# --------------------------------------------------------------------------------------------
# Session
# --------------------------------------------------------------------------------------------


def _new_id() -> str:
    bits = _secrets_mod.randbits(5 * _ID_LEN)
    return "".join(_ID_ALPHABET[(bits >> (5 * i)) & 31] for i in range(_ID_LEN - 1, -1, -1))


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _fsync_dir(path: Path) -> None:
    try:
        fd = os.open(str(path), os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class Session:
    """One saved conversation.

    - ``id``: short unique id (8 lower-case base32 characters); ``path``: ``sessions/<ID>.jsonl``.
    - ``meta``: dict with id, title, created, updated (ISO 8601 UTC), cwd, model, harness,
      prompt_tokens, completion_tokens, cost, lmc_version.
    - ``messages``: the stored LMC messages (sanitised copies), oldest first.
    - ``warnings``: what was wrong when the file was read (damaged lines skipped, ...).

    The file is created with the first :meth:`append` (a session nobody used leaves no file).
    Methods are thread-safe. Writes raise ``OSError`` (disk full, ...) after leaving the file
    as it was before the failing line.
    """

    def __init__(self, path: Path, meta: dict, messages: list[dict] | None = None,
                 warnings: list[str] | None = None, *, exists: bool = False, migrated: bool = False,
                 store: "SessionStore | None" = None):
        self.path = Path(path)
        self.meta = meta
        self.messages: list[dict] = list(messages or [])
        self.warnings: list[str] = list(warnings or [])
        self._exists = exists
        self._migrated = migrated
        self._store = store
        self._fd: int | None = None
        self._changes_fd: int | None = None
        self._lock = threading.RLock()

    @property
    def id(self) -> str:
        """The session id (the file name without ``.jsonl``)."""
        return self.meta["id"]

    @property
    def title(self) -> str | None:
        """The title (explicit, else from the first user message), or None."""
        return self.meta.get("title") or _derived_title(self.messages)

    @property
    def turns(self) -> int:
        """Number of user messages."""
        return sum(1 for m in self.messages if _is_turn(m))

    def __repr__(self) -> str:
        return f"Session(id={self.id!r}, messages={len(self.messages)}, path={str(self.path)!r})"

    # -- writing ------------------------------------------------------------------------------

    def _header_line(self) -> bytes:
        meta = dict(self.meta)
        meta["lmc_version"] = LMC_VERSION
        return (_dumps({"lmc_version": LMC_VERSION, "session": meta}) + "\n").encode("utf-8")

    def _open_fd(self) -> int:
        if self._fd is not None:
            return self._fd
        if self._migrated and self.path.exists():
            self._rewrite(self.messages, backup=True)
        if not self._exists:
            _private_dir(self.path.parent)
            fd = os.open(str(self.path), os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, self._header_line())
                os.fsync(fd)
            except BaseException:
                os.close(fd)
                raise
            self._exists = True
            _fsync_dir(self.path.parent)
        else:
            fd = os.open(str(self.path), os.O_WRONLY | os.O_APPEND)
            try:
                size = os.fstat(fd).st_size
                if size:
                    with open(self.path, "rb") as f:
                        f.seek(size - 1)
                        if f.read(1) != b"\n":
                            os.write(fd, b"\n")  # keep a cut-short last line apart from ours
            except BaseException:
                os.close(fd)
                raise
        self._fd = fd
        return fd

    def _write_line(self, obj: Any) -> None:
        line = (_dumps(obj) + "\n").encode("utf-8")
        fd = self._open_fd()
        n = os.write(fd, line)
        if n != len(line):  # a short write (disk full): finish the line or fail loudly
            rest = line[n:]
            while rest:
                k = os.write(fd, rest)
                if k <= 0:
                    raise OSError("short write to " + str(self.path))
                rest = rest[k:]
        os.fsync(fd)
        self._note_change()

    def _note_change(self) -> None:
        """Tell the index this file changed (a hint; the folder's mtime covers new files)."""
        try:
            if self._changes_fd is None:
                self._changes_fd = os.open(str(self.path.parent / _CHANGES),
                                           os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            os.write(self._changes_fd, (self.id + "\n").encode("ascii", "replace"))
        except OSError:
            pass

    def append(self, message: dict) -> dict:
        """Store one LMC message: sanitised (see :func:`sanitize`), appended as one line,
        flushed and fsync'd. Returns the stored (sanitised) copy. Ephemeral chunks
        (``active_line``, ``confirmation``, ``input_request``) are ignored (returned as is).

        Raises ``TypeError`` when ``message`` is not a dict; ``OSError`` when the disk refuses.
        """
        if not isinstance(message, dict):
            raise TypeError(f"a message is a dict, got {type(message).__name__}")
        if message.get("format") in ("active_line", "input_request") or message.get("type") == "confirmation":
            return message
        secrets = _known_secrets([self._store.api_key] if self._store and self._store.api_key else [])
        clean = sanitize({k: v for k, v in message.items() if k not in ("start", "end")}, secrets)
        with self._lock:
            if not self.meta.get("title") and _is_turn(clean) and isinstance(clean.get("content"), str):
                self.meta["title"] = _title_of(clean["content"])
            self._write_line(clean)
            self.messages.append(clean)
            self.meta["updated"] = _now()
        return clean

    def update_meta(self, **fields: Any) -> None:
        """Merge ``fields`` (e.g. ``model``, ``title``, ``prompt_tokens``, ``cost``) into the
        metadata and append them as one ``{"meta": {...}}`` line (the file is created if needed).
        ``id`` and ``lmc_version`` cannot be changed (ValueError)."""
        if "id" in fields or "lmc_version" in fields:
            raise ValueError("id and lmc_version cannot be changed")
        secrets = _known_secrets()
        clean = sanitize(fields, secrets)
        with self._lock:
            clean["updated"] = _now()
            self.meta.update(clean)
            if not self._exists and not self.messages:
                return  # written with the header when the first message arrives
            self._write_line({"meta": clean})

    def replace_messages(self, messages: list[dict]) -> None:
        """Replace the whole conversation (for /undo, /reset, compaction): the new file is
        written beside the old one and moved over it with ``os.replace`` only once complete."""
        secrets = _known_secrets()
        clean = [sanitize(m, secrets) for m in messages]
        with self._lock:
            self.meta["updated"] = _now()
            self._rewrite(clean, backup=False)
            self.messages = clean

    def _rewrite(self, messages: list[dict], backup: bool) -> None:
        self.close()
        _private_dir(self.path.parent)
        if backup and self.path.exists():
            bak = self.path.with_name(self.path.name + ".bak")
            if not bak.exists():
                shutil.copy2(self.path, bak)
                os.chmod(bak, 0o600)
        payload = bytearray(self._header_line())
        for m in messages:
            payload += (_dumps(m) + "\n").encode("utf-8")
        fd, tmp = tempfile.mkstemp(prefix=f".{self.id}.", suffix=".tmp", dir=str(self.path.parent))
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        _fsync_dir(self.path.parent)
        self._exists = True
        self._migrated = False

    def close(self) -> None:
        """Close the file descriptors (reopened by the next write)."""
        with self._lock:
            for attr in ("_fd", "_changes_fd"):
                fd = getattr(self, attr)
                if fd is not None:
                    setattr(self, attr, None)
                    try:
                        os.close(fd)
                    except OSError:
                        pass

    def __del__(self):  # pragma: no cover - best effort
        try:
            for fd in (self._fd, self._changes_fd):
                if fd is not None:
                    os.close(fd)
        except Exception:
            pass


# --------------------------------------------------------------------------------------------
# Store
# --------------------------------------------------------------------------------------------


@dataclass
class SessionInfo:
    """One line of the session list.

    ``updated``/``created`` are timezone-aware UTC datetimes (``created`` may be None for
    files without metadata); ``turns`` counts user messages; ``error`` is None, or the first
    problem found in a damaged file (the valid part stays readable).
    """

    id: str
    updated: datetime
    created: datetime | None
    turns: int
    model: str | None
    harness: str | None
    cwd: str | None
    title: str | None
    path: Path
    error: str | None = None

    def to_json(self) -> dict:
        """``{id, updated, created, turns, model, harness, cwd, title, error}`` (ISO 8601 times)."""
        return {"id": self.id, "updated": self.updated.isoformat(),
                "created": self.created.isoformat() if self.created else None, "turns": self.turns,
                "model": self.model, "harness": self.harness, "cwd": self.cwd, "title": self.title,
                "error": self.error}


@dataclass
class SearchHit:
    """A search result: the session, a one-line snippet around the match, and the index of the
    matching message in ``Session.messages``."""

    info: SessionInfo
    snippet: str
    message_index: int


def _message_text(m: dict) -> str:
    t = m.get("type")
    if t == "image":
        return ""
    c = m.get("content")
    if isinstance(c, str):
        text = c
    elif c is None:
        text = ""
    else:
        text = json.dumps(c, ensure_ascii=False)
    if t == "tool_call" and m.get("format"):
        text = f"{m['format']} {text}"
    return text[:_MAX_INDEXED_CHARS]


def _fts_query(query: str) -> str | None:
    """Turn what a person typed into a safe FTS5 query: every word quoted (AND), the last one
    also matching as a prefix. None when there is no word in it."""
    words = re.findall(r"\w+", query)
    if not words:
        return None
    parts = ['"' + w.replace('"', '""') + '"' for w in words]
    parts[-1] = parts[-1] + "*"
    return " ".join(parts)


def _fold(text: str) -> str:
    """Lower-case and strip accents character by character (same length as ``text``)."""
    out = []
    for ch in text:
        if ch.isascii():
            out.append(ch.lower())
        else:
            base = unicodedata.normalize("NFKD", ch)[:1] or ch
            low = base.lower()
            out.append(low if len(low) == 1 else base)
    return "".join(out)


def _snippet(text: str, words: list[str], width: int = 100) -> str:
    """One line of ``text`` around the first place one of ``words`` occurs (the last word also
    as a prefix), about ``width`` characters, with "…" where it was cut."""
    folded = _fold(text)
    best = None
    for n, w in enumerate(words):
        fw = _fold(w)
        pattern = r"(?<!\w)" + re.escape(fw) + (r"" if n == len(words) - 1 else r"(?!\w)")
        m = re.search(pattern, folded)
        if m and (best is None or m.start() < best):
            best = m.start()
    if best is None:
        best = 0
    start = max(0, best - width // 3)
    if start:
        space = text.rfind(" ", max(0, start - 15), start + 1)
        start = space + 1 if space >= 0 else start
    end = min(len(text), start + width)
    if end < len(text):
        space = text.find(" ", end, end + 15)
        end = space if space >= 0 else end
    piece = " ".join(text[start:end].split())
    return ("…" if start > 0 else "") + piece + ("…" if end < len(text) else "")


class _FileLock:
    """An exclusive ``fcntl.flock`` on a file, as a context manager (no-op where unsupported)."""

    def __init__(self, path: Path):
        self.path = path
        self.fd: int | None = None

    def __enter__(self):
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows
            return self
        self.fd = os.open(str(self.path), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        if self.fd is not None:
            import fcntl

            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None


_SCHEMA = """
CREATE TABLE IF NOT EXISTS files(
    id TEXT PRIMARY KEY, inode INTEGER, size INTEGER, mtime_ns INTEGER, offset INTEGER,
    jsonl INTEGER, state TEXT, created TEXT, updated TEXT, turns INTEGER, model TEXT,
    harness TEXT, cwd TEXT, title TEXT, error TEXT);
CREATE INDEX IF NOT EXISTS files_updated ON files(updated);
CREATE TABLE IF NOT EXISTS msgs(rowid INTEGER PRIMARY KEY, sid TEXT, idx INTEGER);
CREATE INDEX IF NOT EXISTS msgs_sid ON msgs(sid);
CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(text, tokenize='unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS kv(k TEXT PRIMARY KEY, v);
"""


class SessionStore:
    """The saved sessions in one folder (``paths().sessions_dir``).

    ``outputs_dir``: where ``outputs/<ID>/`` folders live (deleted with their session);
    ``api_key``: a configured key to redact besides the environment's ``*_API_KEY`` values.
    The folder is created when the first session is written.
    """

    def __init__(self, sessions_dir: str | os.PathLike, outputs_dir: str | os.PathLike | None = None,
                 api_key: str | None = None):
        self.dir = Path(sessions_dir)
        self.outputs_dir = Path(outputs_dir) if outputs_dir is not None else None
        self.api_key = api_key
        self.index_path = self.dir / "index.sqlite"
        self._lock_path = self.dir / ".index.lock"

    def __repr__(self) -> str:
        return f"SessionStore({str(self.dir)!r})"

    # -- sessions -----------------------------------------------------------------------------

    def create(self, model: str | None = None, harness: str = "native", cwd: str | os.PathLike | None = None,
               title: str | None = None) -> Session:
        """A new, empty session (its file appears with the first message). ``cwd`` defaults to
        the current directory."""
        for _ in range(100):
            sid = _new_id()
            if not (self.dir / f"{sid}.jsonl").exists():
                break
        now = _now()
        if cwd is None:
            try:
                cwd = os.getcwd()
            except OSError:
                cwd = None
        meta = {"id": sid, "title": title, "created": now, "updated": now,
                "cwd": os.fspath(cwd) if cwd is not None else None, "model": model, "harness": harness,
                "prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0, "lmc_version": LMC_VERSION}
        return Session(self.dir / f"{sid}.jsonl", meta, store=self)

    def _ids(self) -> list[str]:
        try:
            with os.scandir(self.dir) as it:
                return [e.name[:-6] for e in it if e.name.endswith(".jsonl") and not e.name.startswith(".")]
        except FileNotFoundError:
            return []

    def resolve(self, ref: str) -> str:
        """The id ``ref`` names: "last" (most recently updated), an exact id, or a unique prefix.
        Raises SessionNotFound or AmbiguousSession."""
        ref = (ref or "").strip()
        if not ref:
            raise SessionNotFound("no session id given", ref=ref)
        if ref.lower() == "last":
            for info in self.list():
                if info.turns or not info.error:
                    return info.id
            raise SessionNotFound("there are no saved sessions yet", ref=ref)
        ids = self._ids()
        if ref in ids:
            return ref
        low = ref.lower()
        matches = sorted(i for i in ids if i.lower().startswith(low))
        if low in (i.lower() for i in matches):
            return next(i for i in matches if i.lower() == low)
        if not matches:
            raise SessionNotFound(f"no session matches {ref!r}", ref=ref)
        if len(matches) > 1:
            shown = ", ".join(matches[:10]) + (", …" if len(matches) > 10 else "")
            raise AmbiguousSession(f"{ref!r} matches {len(matches)} sessions: {shown}", ref=ref, matches=matches)
        return matches[0]

    def open(self, ref: str) -> Session:
        """Load the session ``ref`` names ("last", an id or a unique id prefix).

        A damaged file loads what is readable, with ``session.warnings`` saying what was skipped;
        an older format is migrated in memory. Raises SessionNotFound / AmbiguousSession, and
        OSError when the file cannot be read.
        """
        sid = self.resolve(ref)
        return self._load(sid)

    def _load(self, sid: str) -> Session:
        path = self.dir / f"{sid}.jsonl"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            raise SessionNotFound(f"no session matches {sid!r}", ref=sid) from None
        parsed = _parse_bytes(data, path.name)
        meta = self._complete_meta(parsed.meta, sid, parsed.messages, path)
        return Session(path, meta, parsed.messages, parsed.warnings, exists=True, migrated=parsed.migrated,
                       store=self)

    @staticmethod
    def _complete_meta(meta: dict, sid: str, messages: list[dict], path: Path | None) -> dict:
        meta = dict(meta)
        meta["id"] = sid
        mtime = None
        if path is not None:
            try:
                mtime = datetime.fromtimestamp(path.stat().st_mtime, timezone.utc).isoformat(timespec="milliseconds")
            except OSError:
                pass
        meta.setdefault("created", mtime or _now())
        meta.setdefault("updated", meta.get("created"))
        if not meta.get("title"):
            meta["title"] = _derived_title(messages)
        for k, v in (("cwd", None), ("model", None), ("harness", "native"), ("prompt_tokens", 0),
                     ("completion_tokens", 0), ("cost", 0.0)):
            meta.setdefault(k, v)
        meta["lmc_version"] = LMC_VERSION
        return meta

    def delete(self, ref: str) -> str:
        """Delete the session (its file, its ``outputs/<ID>/`` folder and its index rows);
        returns its id. Raises SessionNotFound / AmbiguousSession."""
        sid = self.resolve(ref)
        (self.dir / f"{sid}.jsonl").unlink(missing_ok=True)
        if self.outputs_dir is not None:
            out = self.outputs_dir / sid
            if out.is_dir():
                shutil.rmtree(out, ignore_errors=True)
        if self.index_path.exists():
            try:
                with _FileLock(self._lock_path), self._connect() as conn:
                    self._drop(conn, sid)
            except sqlite3.Error:
                pass
        return sid

    # -- index --------------------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(str(self.index_path), timeout=30, isolation_level=None)
        try:
            try:
                os.chmod(self.index_path, 0o600)  # it holds the full message text
            except OSError:
                pass
            conn.execute("PRAGMA busy_timeout=30000")
            # TRUNCATE keeps the journal file, so index writes do not change the folder's mtime
            # (which the staleness check watches for new and deleted session files).
            conn.execute("PRAGMA journal_mode=TRUNCATE")
            conn.execute("PRAGMA synchronous=NORMAL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != _INDEX_SCHEMA:
                conn.executescript("DROP TABLE IF EXISTS files; DROP TABLE IF EXISTS msgs; DROP TABLE IF EXISTS fts;")
                conn.executescript(_SCHEMA)
                conn.execute(f"PRAGMA user_version={_INDEX_SCHEMA}")
        except BaseException:
            conn.close()
            raise
        return conn

    def _open_index(self) -> sqlite3.Connection:
        """Connect, rebuilding a damaged index file from scratch."""
        _private_dir(self.dir)
        try:
            conn = self._connect()
            conn.execute("SELECT id FROM files LIMIT 1").fetchone()
            return conn
        except sqlite3.DatabaseError:
            for suffix in ("", "-wal", "-shm"):
                try:
                    os.unlink(str(self.index_path) + suffix)
                except OSError:
                    pass
            return self._connect()

    @staticmethod
    def _drop(conn: sqlite3.Connection, sid: str) -> None:
        conn.execute("DELETE FROM fts WHERE rowid IN (SELECT rowid FROM msgs WHERE sid=?)", (sid,))
        conn.execute("DELETE FROM msgs WHERE sid=?", (sid,))
        conn.execute("DELETE FROM files WHERE id=?", (sid,))

    def _index_messages(self, conn: sqlite3.Connection, sid: str, start: int, messages: list[dict]) -> None:
        rows = []
        for i, m in enumerate(messages, start):
            text = _message_text(m)
            if text.strip():
                cur = conn.execute("INSERT INTO msgs(sid, idx) VALUES(?, ?)", (sid, i))
                rows.append((cur.lastrowid, text))
        if rows:
            conn.executemany("INSERT INTO fts(rowid, text) VALUES(?, ?)", rows)

    def _store_row(self, conn, sid, st, offset, jsonl, state, meta, turns, title, error, mtime_iso):
        created = meta.get("created") if isinstance(meta.get("created"), str) else None
        updated = meta.get("updated") if isinstance(meta.get("updated"), str) else None
        upd_dt = max([d for d in (_parse_time(updated), _parse_time(mtime_iso)) if d is not None])
        conn.execute(
            "INSERT OR REPLACE INTO files(id, inode, size, mtime_ns, offset, jsonl, state, created, updated, turns,"
            " model, harness, cwd, title, error) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            (sid, st.st_ino, st.st_size, st.st_mtime_ns, offset, int(jsonl), json.dumps(state) if state else None,
             created or mtime_iso, upd_dt.isoformat(timespec="milliseconds"), turns,
             _s(meta.get("model")), _s(meta.get("harness")), _s(meta.get("cwd")),
             _s(meta.get("title")) or title, error))

    def _sync_file(self, conn: sqlite3.Connection, sid: str, path: str, st: os.stat_result, row) -> None:
        mtime_iso = datetime.fromtimestamp(st.st_mtime_ns / 1e9, timezone.utc).isoformat(timespec="milliseconds")
        try:
            with open(path, "rb") as f:
                if (row is not None and row["jsonl"] and row["inode"] == st.st_ino and row["state"]
                        and st.st_size >= row["offset"] >= 0 and st.st_size >= row["size"]):
                    # The file only grew: read the new complete lines.
                    f.seek(row["offset"])
                    data = f.read()
                    state = json.loads(row["state"])
                    scanner = _Scanner(Path(path).name, state)
                    lines = data.split(b"\n")
                    partial = lines.pop()
                    start = state["messages"]
                    new: list[dict] = []
                    for raw in lines:
                        new.extend(scanner.feed(raw))
                    offset = row["offset"] + len(data) - len(partial)
                    pending = None
                    if partial.strip():
                        pending = f"{Path(path).name}: the last line is incomplete; skipped"
                    self._index_messages(conn, sid, start, new)
                    error = (state["warnings"][0] if state["warnings"] else pending)
                    self._store_row(conn, sid, st, offset, True, state, state["meta"], state["turns"],
                                    state["title"], error, mtime_iso)
                    return
                data = f.read()
        except OSError as e:
            self._drop(conn, sid)
            conn.execute("INSERT OR REPLACE INTO files(id, inode, size, mtime_ns, offset, jsonl, state, created,"
                         " updated, turns, error) VALUES(?,?,?,?,?,?,?,?,?,?,?)",
                         (sid, st.st_ino, st.st_size, st.st_mtime_ns, 0, 0, None, mtime_iso, mtime_iso, 0,
                          f"{Path(path).name}: cannot be read: {e.strerror or e}"))
            return
        parsed = _parse_bytes(data, Path(path).name)
        self._drop(conn, sid)
        self._index_messages(conn, sid, 0, parsed.messages)
        turns = sum(1 for m in parsed.messages if _is_turn(m))
        error = parsed.warnings[0] if parsed.warnings else None
        jsonl = parsed.state is not None and not parsed.migrated
        state = parsed.state if jsonl else None
        if state is not None and parsed.end_offset < len(data):
            pass  # the incomplete last line is not part of the state; it is re-read next time
        self._store_row(conn, sid, st, parsed.end_offset if jsonl else len(data), jsonl, state, parsed.meta,
                        turns, _derived_title(parsed.messages), error, mtime_iso)

    def reindex(self, full: bool = False) -> int:
        """Bring the index up to date with the files by checking every file (``full=True``:
        rebuild it from scratch). Returns the number of files (re)read.

        :meth:`list` and :meth:`search` keep the index current on their own (cheaply: they
        watch the folder's mtime and ``.changes.log``, where every :meth:`Session.append`
        notes its id); call this after editing session files by other means."""
        if not self.dir.is_dir():
            return 0
        with _FileLock(self._lock_path):
            conn = self._open_index()
            try:
                conn.row_factory = sqlite3.Row
                if full:
                    conn.execute("BEGIN IMMEDIATE")
                    conn.execute("DELETE FROM fts")
                    conn.execute("DELETE FROM msgs")
                    conn.execute("DELETE FROM files")
                    conn.execute("COMMIT")
                return self._sync(conn, force=True)
            finally:
                conn.close()

    def _sync(self, conn: sqlite3.Connection, force: bool = False) -> int:
        """Bring the index up to date; the caller holds the index lock.

        Cheap when nothing changed: the folder's mtime (new, renamed and deleted files) and the
        size of ``.changes.log`` (appends by our writers) are compared with what was recorded.
        A full sweep (stat every file) runs when the folder changed, when ``force`` is set, or
        when the folder's mtime is too recent to be trusted (coarse file-system clocks).
        """
        log_path = self.dir / _CHANGES
        try:
            log_size = os.stat(log_path).st_size
        except FileNotFoundError:
            log_size = 0
        kv = dict(conn.execute("SELECT k, v FROM kv").fetchall())
        stored_log = kv.get("changes_offset") or 0
        if log_size > _CHANGES_MAX:
            try:
                os.truncate(log_path, 0)
                log_size = 0
            except OSError:
                pass
            force = True
        if log_size < stored_log:
            force = True
            stored_log = 0
        dir_mtime = os.stat(self.dir).st_mtime_ns
        if not force and kv.get("dir_mtime_ns") == dir_mtime and stored_log == log_size:
            return 0
        full = force or kv.get("dir_mtime_ns") != dir_mtime
        changed: list[tuple[str, str, os.stat_result]] = []
        gone: list[str] = []
        new_log = log_size
        if full:
            entries: dict[str, tuple[str, os.stat_result]] = {}
            with os.scandir(self.dir) as it:
                for e in it:
                    name = e.name
                    if name.endswith(".jsonl") and not name.startswith("."):
                        try:
                            entries[name[:-6]] = (e.path, e.stat())
                        except OSError:
                            continue
            rows = {r[0]: r for r in conn.execute("SELECT id, inode, size, mtime_ns FROM files")}
            for sid, (path, st) in entries.items():
                r = rows.get(sid)
                if r is None or r[1] != st.st_ino or r[2] != st.st_size or r[3] != st.st_mtime_ns:
                    changed.append((sid, path, st))
            gone = [sid for sid in rows if sid not in entries]
        else:
            with open(log_path, "rb") as f:
                f.seek(stored_log)
                chunk = f.read(log_size - stored_log)
            cut = chunk.rfind(b"\n") + 1
            new_log = stored_log + cut
            ids = {i for i in chunk[:cut].decode("ascii", "replace").split("\n") if i}
            for sid in ids:
                path = self.dir / f"{sid}.jsonl"
                try:
                    st = os.stat(path)
                except FileNotFoundError:
                    gone.append(sid)
                    continue
                except OSError:
                    continue
                r = conn.execute("SELECT inode, size, mtime_ns FROM files WHERE id=?", (sid,)).fetchone()
                if r is None or tuple(r) != (st.st_ino, st.st_size, st.st_mtime_ns):
                    changed.append((sid, str(path), st))
        # A folder mtime within the file system's clock tick of now may still change without its
        # value moving; record it only once it is safely in the past.
        trusted = (time.time_ns() - dir_mtime) > 2_000_000_000
        changed.sort(key=lambda c: c[2].st_mtime_ns)  # older first: rowids follow recency
        conn.execute("BEGIN IMMEDIATE")
        try:
            for sid in gone:
                self._drop(conn, sid)
            for sid, path, st in changed:
                row = conn.execute("SELECT id, inode, size, mtime_ns, offset, jsonl, state FROM files WHERE id=?",
                                   (sid,)).fetchone()
                self._sync_file(conn, sid, path, st, row)
            conn.execute("INSERT OR REPLACE INTO kv(k, v) VALUES('dir_mtime_ns', ?)", (dir_mtime if trusted else None,))
            conn.execute("INSERT OR REPLACE INTO kv(k, v) VALUES('changes_offset', ?)", (new_log,))
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return len(changed) + len(gone)

    @staticmethod
    def _info(row, directory: Path) -> SessionInfo:
        return SessionInfo(
            id=row["id"], updated=_parse_time(row["updated"]) or datetime.fromtimestamp(0, timezone.utc),
            created=_parse_time(row["created"]), turns=row["turns"] or 0, model=row["model"],
            harness=row["harness"], cwd=row["cwd"], title=row["title"], path=directory / f"{row['id']}.jsonl",
            error=row["error"])

    def list(self) -> list[SessionInfo]:
        """Every session, most recently updated first. Damaged files are listed with ``error``
        set; nothing in a file can make this raise (OSError only if the folder is unreadable)."""
        if not self.dir.is_dir():
            return []
        try:
            with _FileLock(self._lock_path):
                conn = self._open_index()
                try:
                    conn.row_factory = sqlite3.Row
                    self._sync(conn)
                    rows = conn.execute(f"SELECT {_INFO_COLUMNS} FROM files ORDER BY updated DESC, created DESC, id"
                                        ).fetchall()
                finally:
                    conn.close()
        except (sqlite3.Error, OSError):
            return [info for info, _ in self._scan_files()]  # no usable index (read-only folder...)
        return [self._info(r, self.dir) for r in rows]

    def _scan_files(self) -> list[tuple[SessionInfo, list[dict]]]:
        """Read every session file without the index (slow path), newest first."""
        out = []
        for sid in self._ids():
            path = self.dir / f"{sid}.jsonl"
            try:
                data = path.read_bytes()
                st = path.stat()
            except OSError as e:
                now = datetime.now(timezone.utc)
                out.append((SessionInfo(sid, now, None, 0, None, None, None, None, path,
                                        f"{path.name}: cannot be read: {e.strerror or e}"), []))
                continue
            parsed = _parse_bytes(data, path.name)
            meta = parsed.meta
            mtime = datetime.fromtimestamp(st.st_mtime, timezone.utc)
            updated = max(d for d in (_parse_time(meta.get("updated")), mtime) if d is not None)
            out.append((SessionInfo(
                id=sid, updated=updated, created=_parse_time(meta.get("created")) or mtime,
                turns=sum(1 for m in parsed.messages if _is_turn(m)), model=_s(meta.get("model")),
                harness=_s(meta.get("harness")), cwd=_s(meta.get("cwd")),
                title=_s(meta.get("title")) or _derived_title(parsed.messages), path=path,
                error=parsed.warnings[0] if parsed.warnings else None), parsed.messages))
        out.sort(key=lambda p: p[0].updated, reverse=True)
        return out

    def _search_files(self, words: list[str], limit: int) -> list[SearchHit]:
        """Search by reading every file (used only when the index cannot be used)."""
        folded = [_fold(w) for w in words]
        hits = []
        for info, messages in self._scan_files():
            for i, m in enumerate(messages):
                text = _message_text(m)
                ft = _fold(text)
                if text and all(w in ft for w in folded):
                    hits.append(SearchHit(info, _snippet(text, words), i))
                    break
            if len(hits) >= limit:
                break
        return hits

    def search(self, query: str, limit: int = 50) -> list[SearchHit]:
        """Full-text search over message text, code, outputs and tool calls.

        ``query`` is plain words as a person types them (punctuation and quotes are only word
        separators; all words must appear in one message; the last word also matches as a
        prefix). Returns at most ``limit`` hits, one per session (its best-matching message),
        best (BM25) first. For words found in very many messages, only the most recent 2,000
        matching messages are ranked. Never raises for any query text.
        """
        fts = _fts_query(query or "")
        words = re.findall(r"\w+", query or "")
        if fts is None or limit <= 0 or not self.dir.is_dir():
            return []
        try:
            with _FileLock(self._lock_path):
                conn = self._open_index()
                try:
                    conn.row_factory = sqlite3.Row
                    self._sync(conn)
                except BaseException:
                    conn.close()
                    raise
        except (sqlite3.Error, OSError):
            return self._search_files(words, limit)  # no usable index (read-only folder...)
        try:
            rows = conn.execute("SELECT rowid, bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY rowid DESC LIMIT ?",
                                (fts, _SEARCH_WINDOW)).fetchall()
            if not rows:
                return []
            score = dict(rows)
            where: dict[int, tuple[str, int]] = {}
            ids = list(score)
            for i in range(0, len(ids), 500):
                part = ids[i:i + 500]
                marks = ",".join("?" * len(part))
                for rid, sid, idx in conn.execute(f"SELECT rowid, sid, idx FROM msgs WHERE rowid IN ({marks})", part):
                    where[rid] = (sid, idx)
            best: dict[str, tuple[float, int]] = {}
            for rid in ids:  # newest first
                if rid not in where:
                    continue
                sid = where[rid][0]
                if sid not in best or score[rid] < best[sid][0]:
                    best[sid] = (score[rid], rid)
            ranked = sorted(best.items(), key=lambda kv: (kv[1][0], -kv[1][1]))[:limit]
            hits: list[SearchHit] = []
            for sid, (_, rid) in ranked:
                frow = conn.execute(f"SELECT {_INFO_COLUMNS} FROM files WHERE id=?", (sid,)).fetchone()
                if frow is None:
                    continue
                text = conn.execute("SELECT text FROM fts WHERE rowid=?", (rid,)).fetchone()
                snippet = _snippet(text[0] if text else "", words)
                hits.append(SearchHit(self._info(frow, self.dir), snippet, where[rid][1]))
            return hits
        except sqlite3.OperationalError:
            return []
        finally:
            conn.close()

    # -- export / import ----------------------------------------------------------------------

    def export(self, ref: str, fmt: str) -> str:
        """The session as text in ``fmt``:

        - ``md``: markdown (user and assistant text, fenced code, fenced outputs, images inline).
        - ``ipynb``: a Jupyter notebook (nbformat v4): code cells with their outputs (stream
          outputs; images as display_data), user/assistant text as markdown cells; non-Python
          code uses cell magics (``%%bash``, ``%%script node``, ``%%html``...).
        - ``json``: ``{"lmc_version": 1, "session": {...meta}, "messages": [...]}``, all fields.
        - ``oi``: Open Interpreter's plain list of ``{role, type, format?, content}``.

        Raises SessionNotFound / AmbiguousSession, ValueError for an unknown format.
        """
        if fmt not in EXPORT_FORMATS:
            raise ValueError(f"unknown export format {fmt!r}; use one of: {', '.join(EXPORT_FORMATS)}")
        s = self.open(ref)
        if fmt == "json":
            return json.dumps({"lmc_version": LMC_VERSION, "session": s.meta, "messages": s.messages},
                              ensure_ascii=False, indent=2) + "\n"
        if fmt == "oi":
            return json.dumps(to_oi_messages(s.messages), ensure_ascii=False, indent=2) + "\n"
        if fmt == "md":
            return to_markdown(s)
        return to_ipynb(s)

    def import_file(self, path: str | os.PathLike) -> Session:
        """Import a conversation as a new session: Open Interpreter's JSON (a list of messages,
        0.1 or later), our JSON export, or one of our ``.jsonl`` files. Metadata (title, model,
        cwd, created, tokens, cost) is kept where present; the id is new.

        Raises SessionImportError when the file cannot be read or holds no messages.
        """
        src = Path(path)
        try:
            data = src.read_bytes()
        except OSError as e:
            raise SessionImportError(f"cannot read {src}: {e.strerror or e}") from e
        parsed = _parse_bytes(data, src.name)
        if not parsed.messages:
            raise SessionImportError(
                f"cannot import {src}: no messages found (expected Open Interpreter's JSON list of messages, "
                f"an `oitui sessions export --format json` file, or a session .jsonl)")
        session = self.create(model=_s(parsed.meta.get("model")), harness=_s(parsed.meta.get("harness")) or "native",
                              cwd=_s(parsed.meta.get("cwd")) or os.getcwd(), title=_s(parsed.meta.get("title")))
        for k in ("created", "prompt_tokens", "completion_tokens", "cost"):
            if k in parsed.meta and parsed.meta[k] is not None:
                session.meta[k] = sanitize(parsed.meta[k])
        session.meta["imported_from"] = str(src)
        session.warnings = list(parsed.warnings)
        session.replace_messages(parsed.messages)
        if not session.meta.get("title"):
            session.meta["title"] = _derived_title(session.messages)
        return session


def _s(v: Any) -> str | None:
    return v if isinstance(v, str) else (None if v is None else str(v))


# --------------------------------------------------------------------------------------------
# Renderings
# --------------------------------------------------------------------------------------------


def to_oi_messages(messages: list[dict]) -> list[dict]:
    """Open Interpreter's message list: ``{role, type, format?, content}`` only. Reasoning is
    dropped; tool calls become assistant text; errors become console output."""
    out: list[dict] = []
    for m in messages:
        t = m.get("type")
        role = m.get("role")
        if t == "reasoning":
            continue
        if t == "tool_call":
            out.append({"role": "assistant", "type": "message",
                        "content": f"[{m.get('format')}] {json.dumps(m.get('content'), ensure_ascii=False)}"})
            continue
        if t == "error":
            out.append({"role": "computer", "type": "console", "format": "output",
                        "content": f"Error: {m.get('content')}"})
            continue
        item = {"role": role, "type": t}
        if m.get("format") is not None:
            item["format"] = m["format"]
        item["content"] = m.get("content")
        out.append(item)
    return out


def _fence(text: str, lang: str = "") -> str:
    run = max((len(r) for r in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, run + 1)
    return f"{ticks}{lang}\n{text.rstrip(chr(10))}\n{ticks}"


_MIME = {"base64.png": "image/png", "base64.jpeg": "image/jpeg", "base64.jpg": "image/jpeg",
         "base64.gif": "image/gif", "base64.webp": "image/webp"}


def to_markdown(session: Session) -> str:
    """The session as markdown: a title line, then each message in order."""
    parts = [f"# {session.title or 'Session ' + session.id}", "",
             f"*oitui session {session.id} · {session.meta.get('created', '')} · model "
             f"{session.meta.get('model') or 'unknown'}*", ""]
    last_role = None
    for m in session.messages:
        role, t, c = m.get("role"), m.get("type"), m.get("content")
        if role == "user" and t == "message" or (role == "assistant" and t == "message"):
            if role != last_role:
                parts += [f"## {'User' if role == 'user' else 'Assistant'}", ""]
            parts += [str(c or ""), ""]
            last_role = role
            continue
        if last_role not in ("assistant", "computer") and role in ("assistant", "computer"):
            parts += ["## Assistant", ""]
        last_role = "assistant" if role == "computer" else role
        if t == "code":
            parts += [_fence(str(c or ""), str(m.get("format") or "")), ""]
        elif t == "console":
            if m.get("format") == "output" and c:
                parts += [_fence(str(c), "text"), ""]
        elif t == "image":
            fmt = m.get("format", "")
            src = str(c) if fmt == "path" else f"data:{_MIME.get(fmt, 'image/png')};base64,{c}"
            parts += [f"![image]({src})", ""]
        elif t == "tool_call":
            parts += [f"**Tool call** `{m.get('format')}`", "",
                      _fence(json.dumps(c, ensure_ascii=False, indent=2), "json"), ""]
        elif t == "reasoning":
            parts += ["<details><summary>Reasoning</summary>", "", str(c or ""), "", "</details>", ""]
        elif t == "error":
            parts += [f"> **Error:** {c}", ""]
        elif t == "message":
            parts += [str(c or ""), ""]
    return "\n".join(parts).rstrip("\n") + "\n"


_MAGIC = {"shell": "%%bash", "bash": "%%bash", "sh": "%%bash", "zsh": "%%bash", "javascript": "%%script node",
          "js": "%%script node", "html": "%%html", "r": "%%script Rscript -", "R": "%%script Rscript -",
          "powershell": "%%script pwsh -NoProfile -Command -", "applescript": "%%script osascript"}


def to_ipynb(session: Session) -> str:
    """The session as a Jupyter notebook (nbformat v4 JSON text) with its outputs."""
    import nbformat
    from nbformat import v4

    nb = v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    nb.metadata["language_info"] = {"name": "python"}
    nb.metadata["oitui"] = {"session": session.id, "title": session.title, "model": session.meta.get("model")}
    cells = nb.cells
    current = None  # the code cell that outputs attach to
    pending_md: list[str] = []

    def flush_md():
        nonlocal pending_md
        if pending_md:
            cells.append(v4.new_markdown_cell("\n\n".join(pending_md)))
            pending_md = []

    for m in session.messages:
        role, t, c = m.get("role"), m.get("type"), m.get("content")
        if t == "message":
            who = "**User:**" if role == "user" else ""
            pending_md.append(f"{who} {c}".strip() if who else str(c or ""))
            current = None
        elif t == "code":
            flush_md()
            lang = str(m.get("format") or "python")
            src = str(c or "")
            if lang not in ("python", "py", "python3"):
                magic = _MAGIC.get(lang, f"%%script {lang}")
                src = f"{magic}\n{src}"
            current = v4.new_code_cell(src)
            current.metadata["oitui"] = {"language": lang, **({"call_id": m["call_id"]} if m.get("call_id") else {})}
            cells.append(current)
        elif t == "console" and m.get("format") == "output":
            if current is None:
                pending_md.append(_fence(str(c or ""), "text"))
            else:
                current.outputs.append(v4.new_output("stream", name="stdout", text=str(c or "")))
        elif t == "image":
            fmt = m.get("format", "")
            if fmt in _MIME and current is not None:
                current.outputs.append(v4.new_output("display_data", data={_MIME[fmt]: c}))
            elif fmt in _MIME:
                pending_md.append(f"![image](data:{_MIME[fmt]};base64,{c})")
            else:
                pending_md.append(f"![image]({c})")
        elif t == "tool_call":
            pending_md.append(f"**Tool call** `{m.get('format')}`\n\n"
                              + _fence(json.dumps(c, ensure_ascii=False, indent=2), "json"))
            current = None
        elif t == "error":
            pending_md.append(f"> **Error:** {c}")
        elif t == "reasoning":
            pending_md.append(f"<details><summary>Reasoning</summary>\n\n{c}\n\n</details>")
    flush_md()
    return nbformat.writes(nb, version=4)


def render_text(messages: list[dict]) -> str:
    """A conversation as plain text, as the headless ``text`` output shows it: user text
    prefixed with ``> ``, assistant text as is, code fenced with its language, output as is,
    errors as ``error: ...``; images and reasoning as one-line notes."""
    out: list[str] = []
    for m in messages:
        role, t, c = m.get("role"), m.get("type"), m.get("content")
        if t == "message" and role == "user":
            out.append("\n".join("> " + line for line in str(c or "").splitlines() or [""]))
        elif t == "message":
            out.append(str(c or "").rstrip("\n"))
        elif t == "code":
            out.append(_fence(str(c or ""), str(m.get("format") or "")))
        elif t == "console" and m.get("format") == "output":
            if c:
                out.append(str(c).rstrip("\n"))
        elif t == "image":
            out.append(f"[image: {c if m.get('format') == 'path' else m.get('format')}]")
        elif t == "tool_call":
            out.append(f"[tool call {m.get('format')}: {json.dumps(c, ensure_ascii=False)}]")
        elif t == "error":
            out.append(f"error: {c}")
        elif t == "reasoning":
            continue
    return "\n\n".join(out) + ("\n" if out else "")
