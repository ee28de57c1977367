"""The console pane: live output of the running block with ANSI colours rendered, bounded to the
last :attr:`ConsolePane.MAX_LINES` lines (the title counts what was dropped), and a prompt line
when the program waits for input (the answer goes to ``computer.send_input``)."""

from __future__ import annotations

from collections import deque

from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Input, Static


class ConsolePane(Vertical):
    """Live program output plus an input prompt line (hidden until a program asks)."""

    MAX_LINES = 1000

    class InputAnswered(Message):
        """The person answered the program's input prompt with ``text``."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self._lines: deque[Text] = deque(maxlen=self.MAX_LINES)
        self._plain: deque[str] = deque(maxlen=self.MAX_LINES)
        self._partial = ""
        self.dropped = 0
        self.body = Static("", id="console-text", markup=False)
        self.scroller = VerticalScroll(self.body, id="console-scroll")
        self.prompt = Input(placeholder="type the program's answer, Enter sends", id="console-input")
        self.prompt.display = False
        self._dirty = False

    def compose(self):
        yield self.scroller
        yield self.prompt

    def on_mount(self) -> None:
        self.border_title = "console"
        self.scroller.anchor()

    def clear(self) -> None:
        """Empty the console (a new block starts)."""
        self._lines.clear()
        self._plain.clear()
        self._partial = ""
        self.dropped = 0
        self.prompt.display = False
        self.refresh_body()

    def write(self, raw: str) -> None:
        """Add raw program text (ANSI escapes kept and rendered, ``\\r`` overwrites the line)."""
        data = (self._partial + raw).replace("\r\n", "\n")
        parts = data.split("\n")
        self._partial = parts.pop()
        for line in parts:
            if len(self._lines) == self.MAX_LINES:
                self.dropped += 1
            line = _cr(line)
            self._plain.append(line)
            self._lines.append(Text.from_ansi(line))
        self._dirty = True

    def text(self) -> str:
        """The kept output as plain text with escapes (tests, /copy)."""
        return "\n".join(list(self._plain) + ([_cr(self._partial)] if self._partial else []))

    def refresh_body(self) -> None:
        """Redraw the output (called by the app's coalesced flush)."""
        lines = list(self._lines)
        if self._partial:
            lines.append(Text.from_ansi(_cr(self._partial)))
        self.body.update(Text("\n").join(lines))
        title = "console"
        if self.dropped:
            title += f" · {self.dropped:,} earlier lines dropped"
        self.border_title = title
        self._dirty = False

    def ask(self, prompt: str, password: bool = False) -> None:
        """Show the prompt line for an ``input()`` request and focus it."""
        self.prompt.password = password
        self.prompt.value = ""
        self.prompt.placeholder = f"{prompt.strip() or 'input'} (Enter sends)"
        self.prompt.display = True
        self.prompt.focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input is self.prompt:
            event.stop()
            text = event.value
            self.prompt.value = ""
            self.prompt.display = False
            self.post_message(self.InputAnswered(text))


def _cr(line: str) -> str:
    if "\r" not in line:
        return line
    cur = ""
    for seg in line.split("\r"):
        cur = seg + cur[len(seg):]
    return cur
