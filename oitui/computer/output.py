"""Terminal rendering and truncation of program output.

Programs print raw text: ANSI colour codes, carriage-return progress bars, backspaces. What is
stored and what goes back to the model is what a terminal would finally show
(:func:`terminal_text`), cut to a size budget that keeps the head and the tail
(:func:`truncate_output`). :class:`OutputAccumulator` does both incrementally, for output fed
chunk by chunk, with memory bounded whatever the program prints.

Size convention used in banners: a text's size counts every line with its newline, i.e. the
characters the program printed when its last line ends with a newline (``print`` does).
"""

from __future__ import annotations

import re
from collections import deque

__all__ = ["terminal_text", "truncate_output", "OutputAccumulator", "DEFAULT_MAX_CHARS"]

#: Default budget (characters of kept program text, banner excluded).
DEFAULT_MAX_CHARS = 2800

# Escape sequences and control characters (``\t`` and ``\n`` excluded).
_TOKEN = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC ... BEL or ST
    r"|\x1b[PX^_][^\x1b]*\x1b\\"  # DCS, SOS, PM, APC ... ST
    r"|\x1b[ -/]*[0-~]"  # other two/three-byte escapes: ESC ( B, ESC =, ESC 7 ...
    r"|[\x00-\x08\x0b-\x1f\x7f]"  # control characters incl. \r, \b and a lone ESC
)
_SPECIAL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
# An escape sequence possibly cut off at the end of a chunk.
_INCOMPLETE_ESC = re.compile(r"\x1b(?:\[[0-?]*[ -/]*|\][^\x07\x1b]*|[PX^_][^\x1b]*|[ -/]*)?$")

_LINE_CAP = 100_000  # a single line longer than this keeps only its head and tail


class _Line:
    """One terminal line being drawn: characters plus a cursor column."""

    __slots__ = ("buf", "col", "dropped")

    def __init__(self) -> None:
        self.buf: list[str] = []
        self.col = 0
        self.dropped = 0  # characters cut from the middle of a huge line

    def put(self, seg: str) -> None:
        buf, col = self.buf, self.col
        n = len(buf)
        if col == n:
            buf.extend(seg)
        elif col > n:
            buf.extend(" " * (col - n))
            buf.extend(seg)
        else:
            buf[col : col + len(seg)] = seg
        self.col = col + len(seg)
        if len(buf) > _LINE_CAP and self.col == len(buf):
            half = _LINE_CAP // 4
            cut = len(buf) - 2 * half
            del buf[half : half + cut]
            self.dropped += cut
            self.col = len(buf)

    def feed(self, text: str) -> None:
        """Draw ``text`` (no ``\\n`` inside) onto the line."""
        if not text:
            return
        if _SPECIAL.search(text) is None:
            self.put(text)
            return
        pos = 0
        for m in _TOKEN.finditer(text):
            if m.start() > pos:
                self.put(text[pos : m.start()])
            pos = m.end()
            tok = m.group()
            if tok == "\r":
                self.col = 0
            elif tok == "\b":
                self.col = max(0, self.col - 1)
            elif tok.startswith("\x1b[") and len(tok) > 2:
                self._csi(tok)
            # everything else (colours, OSC titles, bells, ...) draws nothing
        if pos < len(text):
            self.put(text[pos:])

    def _csi(self, tok: str) -> None:
        final = tok[-1]
        params = tok[2:-1]
        if params.startswith("?"):
            return
        try:
            n = int(params.split(";")[0]) if params.split(";")[0] else None
        except ValueError:
            return
        if final == "K":
            mode = n or 0
            if mode == 0:
                del self.buf[self.col :]
            elif mode == 1:
                self.buf[: self.col] = " " * min(self.col, len(self.buf))
            else:
                self.buf.clear()
        elif final == "G":
            self.col = max(0, (n or 1) - 1)
        elif final == "C":
            self.col += n or 1
        elif final == "D":
            self.col = max(0, self.col - (n or 1))

    def text(self) -> str:
        return "".join(self.buf)

    def size(self) -> int:
        return len(self.buf) + self.dropped

    def empty(self) -> bool:
        return not self.buf and not self.dropped


def _render_line(line: str) -> str:
    if _SPECIAL.search(line) is None:
        return line
    ln = _Line()
    ln.feed(line)
    return ln.text()


def terminal_text(raw: str) -> str:
    """Return what a terminal would finally show for the program output ``raw``.

    Carriage returns move to the start of the line (``"abcdef\\rXY"`` -> ``"XYcdef"``),
    backspaces move one column left, ``ESC[K``/``ESC[nG``/``ESC[nC``/``ESC[nD`` act on the line;
    all other ANSI/OSC escapes and control characters (except tab and newline) are removed.
    ``"\\r\\n"`` is a plain line end. Trailing newlines are dropped. Never raises for any ``str``;
    ``None`` gives ``""``.
    """
    if not raw:
        return ""
    if not isinstance(raw, str):
        raise TypeError(f"terminal_text expects str, got {type(raw).__name__}")
    if _SPECIAL.search(raw) is None:
        return raw.rstrip("\n")
    return "\n".join(_render_line(line) for line in raw.split("\n")).rstrip("\n")


def _text_size(text: str) -> tuple[int, int]:
    """(characters counting a final newline, lines) of ``text``."""
    if not text:
        return 0, 0
    if text.endswith("\n"):
        return len(text), text.count("\n")
    return len(text) + 1, text.count("\n") + 1


def _banner(total_chars: int, total_lines: int, head_lines: int, tail_lines: int) -> str:
    def n(k: int, word: str) -> str:
        return f"{k:,} {word}" + ("" if k == 1 else "s")

    return (
        f"[output truncated: {n(total_chars, 'character')} in {n(total_lines, 'line')} in total; "
        f"showing the first {n(head_lines, 'line')} and the last {n(tail_lines, 'line')}]"
    )


def _budgets(max_chars: int) -> tuple[int, int]:
    head = max_chars // 2
    return head, max_chars - head


def _take_head(lines, budget: int) -> tuple[list[str], int]:
    """Lines from the start fitting ``budget`` (each counted with its newline).

    When the first line alone is too long, its first ``budget`` characters are kept.
    Returns (kept lines, number of whole-or-partial lines kept).
    """
    out: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > budget:
            if not out:
                out.append(line[: max(budget - 1, 0)])
            break
        out.append(line)
        used += len(line) + 1
    return out, len(out)


def _take_tail(lines_reversed, budget: int) -> list[str]:
    out: list[str] = []
    used = 0
    for line in lines_reversed:
        if used + len(line) + 1 > budget:
            if not out:
                out.append(line[-max(budget - 1, 1) :] if budget > 1 else "")
            break
        out.append(line)
        used += len(line) + 1
    out.reverse()
    return out


def _assemble(head: list[str], tail: list[str], total_chars: int, total_lines: int) -> str:
    banner = _banner(total_chars, total_lines, len(head), len(tail))
    parts = []
    if head:
        parts.append("\n".join(head))
    parts.append(banner)
    if tail:
        parts.append("\n".join(tail))
    return "\n".join(parts)


def truncate_output(text: str, max_chars: int = DEFAULT_MAX_CHARS) -> str:
    """Cut ``text`` to about ``max_chars`` characters, keeping its head and its tail.

    Returns ``text`` unchanged when it fits. Otherwise: the first lines filling half the budget,
    one banner line (under 500 characters) giving the full size in characters (counting a final
    newline) and lines, then the last lines filling the other half. Cuts fall on line boundaries,
    or on character boundaries when a single line is longer than its half.
    Raises ValueError when ``max_chars`` < 2.
    """
    if max_chars < 2:
        raise ValueError(f"max_chars must be at least 2, got {max_chars}")
    if not text or len(text) <= max_chars:
        return text or ""
    total_chars, total_lines = _text_size(text)
    body = text[:-1] if text.endswith("\n") else text
    head_budget, tail_budget = _budgets(max_chars)
    # Only look at the ends of the text: never split a huge string into all its lines.
    head_region = body[: head_budget + 1].split("\n")
    head, _ = _take_head(head_region if len(body) > head_budget + 1 else body.split("\n"), head_budget)
    tail_region = body[-(tail_budget + 1) :].split("\n")
    tail = _take_tail(reversed(tail_region), tail_budget)
    return _assemble(head, tail, total_chars, total_lines)


class OutputAccumulator:
    """Collects raw output chunks and renders them as a terminal would, in bounded memory.

    ``feed(raw)`` accepts chunks of any size, cut anywhere (escape sequences split across
    chunks are handled). Memory stays O(``max_chars`` + ``keep_full_chars``) whatever is fed:
    the first lines up to half the budget, a ring of the last lines, and counts.

    - :meth:`result` -> the terminal text cut like :func:`truncate_output` (the same string
      ``truncate_output(terminal_text(all_raw), max_chars)`` gives).
    - :meth:`full_text` -> the whole terminal text while it is at most ``keep_full_chars``
      characters, else None.
    - ``total_chars`` / ``total_lines``: size so far (characters counting line ends).
    """

    def __init__(self, max_chars: int = DEFAULT_MAX_CHARS, keep_full_chars: int = 1_000_000) -> None:
        if max_chars < 2:
            raise ValueError(f"max_chars must be at least 2, got {max_chars}")
        self.max_chars = max_chars
        self.keep_full_chars = keep_full_chars
        self._head_budget, self._tail_budget = _budgets(max_chars)
        self._head: list[str] = []
        self._head_used = 0
        self._head_full = False
        self._tail: deque[str] = deque()
        self._tail_used = 0
        self._full: list[str] | None = []
        self._full_used = 0
        self._done_chars = 0  # completed lines, each + 1
        self._done_lines = 0
        self._line = _Line()
        self._hold = ""

    # -- feeding -----------------------------------------------------------------
    def feed(self, raw: str) -> None:
        """Add a raw chunk (str; bytes are decoded as UTF-8 with replacement)."""
        if not raw:
            return
        if isinstance(raw, (bytes, bytearray)):
            raw = bytes(raw).decode("utf-8", errors="replace")
        if self._hold:
            raw = self._hold + raw
            self._hold = ""
        esc = raw.rfind("\x1b", max(0, len(raw) - 512))
        if esc != -1 and _INCOMPLETE_ESC.fullmatch(raw, esc):
            self._hold = raw[esc:]
            raw = raw[:esc]
        if "\n" not in raw:
            self._line.feed(raw)
            return
        pieces = raw.split("\n")
        last = pieces.pop()
        first = True
        plain = _SPECIAL.search(raw) is None
        for piece in pieces:
            if first or not plain:
                self._line.feed(piece)
                self._finish_line()
                first = False
            else:
                self._add_line(piece)
        self._line.feed(last)

    def _finish_line(self) -> None:
        ln = self._line
        if ln.dropped:
            text = ln.text()
            half = len(text) // 2
            text = text[:half] + f"…[{ln.dropped:,} characters]…" + text[half:]
            size = ln.size()
        else:
            text = ln.text()
            size = len(text)
        self._line = _Line()
        self._add_line(text, size)

    def _add_line(self, text: str, size: int | None = None) -> None:
        n = (len(text) if size is None else size) + 1
        self._done_chars += n
        self._done_lines += 1
        if self._full is not None:
            if self._full_used + n <= self.keep_full_chars:
                self._full.append(text)
                self._full_used += n
            else:
                self._full = None
        if not self._head_full:
            if self._head_used + len(text) + 1 <= self._head_budget:
                self._head.append(text)
                self._head_used += len(text) + 1
                return
            if not self._head:
                self._head.append(text[: max(self._head_budget - 1, 0)])
            self._head_full = True
        self._tail.append(text)
        self._tail_used += len(text) + 1
        while len(self._tail) > 1 and self._tail_used - (len(self._tail[0]) + 1) >= self._tail_budget:
            self._tail_used -= len(self._tail.popleft()) + 1

    # -- results -----------------------------------------------------------------
    def _pending(self) -> str:
        if not self._hold:
            return self._line.text() if not self._line.empty() else ""
        ln = _Line()
        ln.buf = list(self._line.buf)
        ln.col = self._line.col
        ln.feed(self._hold)
        return ln.text()

    @property
    def total_chars(self) -> int:
        """Characters so far, every line counted with its newline (a final partial line too)."""
        pending = self._pending()
        extra = (len(pending) + self._line.dropped + 1) if pending or self._line.dropped else 0
        return self._done_chars + extra

    @property
    def total_lines(self) -> int:
        """Lines so far (a final line without newline counts)."""
        pending = self._pending()
        return self._done_lines + (1 if pending or self._line.dropped else 0)

    def _all_lines_if_kept(self) -> list[str] | None:
        if self._full is None:
            return None
        lines = list(self._full)
        pending = self._pending()
        if pending or self._line.dropped:
            if self._full_used + len(pending) + 1 > self.keep_full_chars:
                return None
            lines.append(pending)
        return lines

    def full_text(self) -> str | None:
        """The whole terminal text, or None when it outgrew ``keep_full_chars``."""
        lines = self._all_lines_if_kept()
        if lines is None:
            return None
        return "\n".join(lines).rstrip("\n")

    def result(self) -> str:
        """Terminal text cut to ``max_chars`` with a banner (see :func:`truncate_output`)."""
        full = self.full_text()
        if full is not None:
            return truncate_output(full, self.max_chars)
        pending = self._pending()
        tail = list(self._tail)
        head = list(self._head)
        if pending or self._line.dropped:
            tail.append(pending)
        # Trailing empty lines are not shown (terminal_text drops trailing newlines).
        while tail and tail[-1] == "":
            tail.pop()
        total_chars, total_lines = self.total_chars, self.total_lines
        if not self._head_full:
            # Everything is still in head + tail.
            text = "\n".join(head + tail).rstrip("\n")
            if len(text) <= self.max_chars:
                return text
        tail = _take_tail(reversed(tail), self._tail_budget)
        return _assemble(head, tail, total_chars, total_lines)
