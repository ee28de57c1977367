"""Printing a conversation in a plain terminal (``chat(display=True)`` outside the TUI).

:class:`TerminalDisplay` consumes LMC chunks as they stream. On a TTY it renders with rich
(markdown, syntax-highlighted code panels with the active line marked, output panels); otherwise
it writes the plain ``text`` format that ``oitui -p`` and ``oitui sessions show`` use:

- assistant text as written;
- each code block as a markdown fence (``` + language, the code, ```);
- its output lines, as a terminal would finally show them (ANSI escapes removed, carriage
  returns applied);
- ``Error: ...`` lines for computer errors; user messages as ``> `` quoted lines.

Each message starts on a new line, with a blank line between messages. ``rich`` is imported
lazily, only in rich mode.
"""

from __future__ import annotations

import json
import re
import sys
from typing import IO, Any

__all__ = ["TerminalDisplay", "render_plain"]


def _terminal_text(raw: str) -> str:
    try:
        from oitui.computer.output import terminal_text
    except Exception:  # pragma: no cover - computer package always present
        return re.sub(r"\x1b\[[0-?]*[ -/]*[@-~]", "", raw).rstrip("\n")
    return terminal_text(raw)


def _fence_ticks(body: str) -> str:
    longest = max((len(m) for m in re.findall(r"`+", body or "")), default=0)
    return "`" * max(3, longest + 1)


class TerminalDisplay:
    """Prints LMC chunks to a terminal as they stream.

    ``TerminalDisplay(file=None, *, rich=None, console=None)``: ``file`` defaults to
    ``sys.stdout``; ``rich=None`` means "rich when ``file`` is a TTY"; ``console`` is an
    optional ``rich.console.Console`` to render to (implies rich mode; tests use one writing
    to a ``StringIO``).

    ``feed(chunk)`` takes one LMC chunk (flags optional: a change of role/type/format also
    ends a run); ``close()`` ends any open run and must be called at the end. Ephemeral
    chunks are used (active line marking in rich mode) but never printed in plain mode;
    confirmations and input requests print nothing (the approval handler / runtime prompts).
    A non-dict chunk raises ``TypeError``.
    """

    def __init__(self, file: IO[str] | None = None, *, rich: bool | None = None, console: Any = None) -> None:
        self.file = file if file is not None else sys.stdout
        if console is not None:
            rich = True
        elif rich is None:
            try:
                rich = bool(self.file.isatty())
            except (AttributeError, ValueError):
                rich = False
        self.rich = bool(rich)
        self._console = console
        self._run: tuple | None = None  # (role, type, format-group) of the open run
        self._first = True
        # plain mode
        self._at_line_start = True
        self._pending_output = ""  # console text not yet ending in a newline (plain)
        self._code_ticks = "```"
        self._code_buf = ""
        self._quote_start = True
        # rich mode
        self._live = None
        self._text = ""
        self._code: dict | None = None  # {"language", "code", "output", "line"}

    # ------------------------------------------------------------------ public

    def feed(self, chunk: dict) -> None:
        """Print one LMC chunk (see the class docstring)."""
        if not isinstance(chunk, dict):
            raise TypeError(f"TerminalDisplay.feed() expects an LMC dict, got {type(chunk).__name__}")
        role, typ, fmt = chunk.get("role"), chunk.get("type"), chunk.get("format")
        if typ == "confirmation" or (typ == "console" and fmt == "input_request"):
            return
        if typ == "console":
            key = (role, "console")
        else:
            key = (role, typ, fmt)
        if chunk.get("start") or key != self._run:
            if not (typ == "console" and self._run == key):
                self._end_run(next_key=key)
                self._begin_run(key, chunk)
        self._content(key, chunk)
        if chunk.get("end"):
            self._end_run(next_key=None)

    def close(self) -> None:
        """End any open run and flush (idempotent)."""
        self._end_run(next_key=None)
        if self.rich:
            self._stop_live()
        else:
            try:
                self.file.flush()
            except (AttributeError, ValueError):
                pass

    # ------------------------------------------------------------------ run handling

    def _begin_run(self, key: tuple, chunk: dict) -> None:
        self._run = key
        if self.rich:
            self._rich_begin(key, chunk)
            return
        role, typ = key[0], key[1]
        if typ == "console" or typ == "reasoning":
            if typ == "console":
                self._pending_output = ""
            return
        self._separate()
        if typ == "code":
            self._code_buf = ""
            self._code_ticks = None  # decided at the end when the whole code is known
        elif role == "user" and typ == "message":
            self._quote_start = True

    def _end_run(self, next_key: tuple | None) -> None:
        if self._run is None:
            return
        key, self._run = self._run, None
        if self.rich:
            self._rich_end(key, next_key)
            return
        role, typ = key[0], key[1]
        if typ == "code":
            body = self._code_buf
            ticks = _fence_ticks(body)
            lang = key[2] or ""
            self._write(f"{ticks}{lang}\n{body}")
            if body and not body.endswith("\n"):
                self._write("\n")
            self._write(f"{ticks}\n")
            self._code_buf = ""
        elif typ == "console":
            if self._pending_output:
                self._write_output_line(self._pending_output)
                self._pending_output = ""
        elif typ in ("message",):
            if not self._at_line_start:
                self._write("\n")

    def _content(self, key: tuple, chunk: dict) -> None:
        if self.rich:
            self._rich_content(key, chunk)
            return
        role, typ = key[0], key[1]
        content = chunk.get("content")
        fmt = chunk.get("format")
        if typ == "message":
            if isinstance(content, str) and content:
                if role == "user":
                    self._write_quoted(content)
                else:
                    self._write(content)
        elif typ == "code":
            if isinstance(content, str):
                self._code_buf += content
        elif typ == "console":
            if fmt == "output" and isinstance(content, str) and content:
                self._feed_output(content)
        elif typ == "error":
            if content:
                self._write(f"Error: {content}\n")
        elif typ == "image":
            if content:
                where = f" {content}" if fmt == "path" else ""
                self._write(f"[image{where}]\n")
        elif typ == "tool_call":
            if content is not None:
                args = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
                self._write(f"→ {fmt}: {args}\n")
        # reasoning: not printed in plain text

    # ------------------------------------------------------------------ plain helpers

    def _write(self, s: str) -> None:
        if not s:
            return
        self.file.write(s)
        self._at_line_start = s.endswith("\n")

    def _separate(self) -> None:
        if not self._at_line_start:
            self._write("\n")
        if not self._first:
            self._write("\n")
        self._first = False

    def _write_quoted(self, text: str) -> None:
        out = []
        for piece in re.split(r"(\n)", text):
            if piece == "\n":
                out.append("\n")
                self._quote_start = True
            elif piece:
                if self._quote_start:
                    out.append("> ")
                    self._quote_start = False
                out.append(piece)
        self._write("".join(out))

    def _feed_output(self, text: str) -> None:
        buf = self._pending_output + text
        *lines, rest = buf.split("\n")
        for line in lines:
            self._write_output_line(line)
        self._pending_output = rest

    def _write_output_line(self, line: str) -> None:
        if self._first:
            self._first = False
        elif not self._at_line_start:
            self._write("\n")
        self._write(_terminal_text(line) + "\n")

    # ------------------------------------------------------------------ rich mode

    def _get_console(self):
        if self._console is None:
            from rich.console import Console

            self._console = Console(file=self.file)
        return self._console

    def _stop_live(self) -> None:
        if self._live is not None:
            try:
                self._live.stop()
            finally:
                self._live = None

    def _start_live(self) -> None:
        from rich.live import Live

        self._stop_live()
        self._live = Live(self._renderable(), console=self._get_console(), refresh_per_second=8, transient=False, auto_refresh=False)
        self._live.start()

    def _update_live(self) -> None:
        if self._live is not None:
            self._live.update(self._renderable(), refresh=True)

    def _renderable(self):
        from rich.console import Group
        from rich.markdown import Markdown
        from rich.panel import Panel
        from rich.syntax import Syntax
        from rich.text import Text

        if self._code is not None:
            c = self._code
            parts = []
            if c["language"] is not None:
                highlight = {c["line"]} if isinstance(c["line"], int) else set()
                lexer = {"shell": "bash", "r": "r"}.get(c["language"] or "", c["language"] or "text")
                parts.append(Panel(Syntax(c["code"].rstrip("\n") or " ", lexer, theme="monokai", line_numbers=False, highlight_lines=highlight, word_wrap=True), title=c["language"] or "code", title_align="left"))
            if c["output"]:
                out = "\n".join(_cr_line(line) for line in c["output"].rstrip("\n").split("\n"))
                parts.append(Panel(Text.from_ansi(out), title="output", title_align="left", border_style="dim"))
            return Group(*parts)
        return Markdown(self._text or "")

    def _rich_begin(self, key: tuple, chunk: dict) -> None:
        role, typ = key[0], key[1]
        console = self._get_console()
        if typ == "message" and role == "assistant":
            self._code = None
            self._text = ""
            self._start_live()
        elif typ == "code":
            self._code = {"language": key[2] or "", "code": "", "output": "", "line": None}
            self._start_live()
        elif typ == "console":
            if self._code is None or self._live is None:
                self._code = {"language": None, "code": "", "output": "", "line": None}
                self._start_live()
        else:
            self._stop_live()
            self._code = None
            if typ == "message" and role == "user":
                body = str(chunk.get("content") or "")
                console.print("\n".join(f"[bold]>[/bold] {_escape(line)}" for line in body.split("\n")), highlight=False)
                self._run = None  # user messages print whole; later chunks print again only if content

    def _rich_content(self, key: tuple, chunk: dict) -> None:
        role, typ = key[0], key[1]
        content = chunk.get("content")
        fmt = chunk.get("format")
        console = self._get_console()
        if typ == "message" and role == "assistant":
            if isinstance(content, str) and content:
                self._text += content
                self._update_live()
        elif typ == "code":
            if isinstance(content, str) and self._code is not None:
                self._code["code"] += content
                self._update_live()
        elif typ == "console" and self._code is not None:
            if fmt == "active_line":
                self._code["line"] = content if isinstance(content, int) else None
                self._update_live()
            elif fmt == "output" and isinstance(content, str):
                self._code["output"] += content
                self._update_live()
        elif typ == "error" and content:
            console.print(f"[bold red]Error:[/bold red] {_escape(str(content))}", highlight=False)
        elif typ == "image" and content:
            where = f" {content}" if fmt == "path" else ""
            console.print(f"[dim]\\[image{_escape(where)}][/dim]", highlight=False)
        elif typ == "tool_call" and content is not None:
            args = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
            console.print(f"[cyan]→ {_escape(str(fmt))}[/cyan] {_escape(args)}", highlight=False)
        elif typ == "reasoning" and isinstance(content, str) and content:
            console.print(f"[dim italic]{_escape(content)}[/dim italic]", highlight=False, end="")

    def _rich_end(self, key: tuple, next_key: tuple | None) -> None:
        typ = key[1]
        if typ == "code" and next_key is not None and next_key[1] == "console":
            return  # keep the panel live: its output and active line come next
        if typ == "code" and next_key is None:
            return  # the end flag of the code run; output may still follow
        if typ in ("message", "code", "console"):
            if self._code is not None:
                self._code["line"] = None
                self._update_live()
            self._stop_live()
            self._code = None
        if typ == "reasoning":
            self._get_console().print()


def _cr_line(line: str) -> str:
    """The part of a line a terminal keeps after carriage returns (ANSI kept for rich)."""
    line = line.rstrip("\r")
    return line.rsplit("\r", 1)[-1]


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)


def render_plain(messages: list[dict]) -> str:
    """The plain ``text`` format of stored LMC messages, as one string (for ``sessions show``)."""
    import io

    buf = io.StringIO()
    d = TerminalDisplay(buf, rich=False)
    for m in messages:
        if isinstance(m, dict):
            d.feed({**m, "start": True, "end": True} if m.get("type") != "console" or m.get("format") == "output" else m)
    d.close()
    return buf.getvalue()
