"""The input box: a multi-line TextArea where Enter sends, shift+enter / ctrl+j add a line, a
pasted multi-line text stays one message, up/down walk the history (on the first/last line) and
``/`` shows slash-command completion (Tab completes).

Paste-burst guard: Enter is held back for :attr:`PromptInput.ENTER_GRACE` seconds; if more keys
arrive in that window (an unbracketed paste through a multiplexer), the Enter becomes a newline.

Large pastes: a paste over :data:`CHIP_CHARS` characters is shown as a chip such as
``[paste #1: 21,001 lines, 2.0 MB]`` and sent in full when the message is sent (the chip is
replaced by the pasted text, byte for byte after CR/CRLF become LF). Soft-wrapping megabytes in
the TextArea took seconds; the chip takes none. Deleting the chip drops the paste. A paste over
:data:`MAX_PASTE_CHARS` is refused with a "paste too large" notice.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from textual import events
from textual.binding import Binding
from textual.message import Message
from textual.widgets import TextArea

MENTION_MAX_BYTES = 200_000
#: Larger pastes are refused with a notice.
MAX_PASTE_CHARS = 5_000_000
#: Pastes longer than this are shown as a chip (see the module docstring), not inserted as text.
CHIP_CHARS = 100_000
_MENTION = re.compile(r"(?<![\w@])@([\w./~+-][^\s]*)")


_CHIP = re.compile(r"\[paste #(\d+):")


def _size(n: int) -> str:
    """``n`` bytes as ``"2.0 MB"`` / ``"120 KB"``."""
    return f"{n / 1_000_000:.1f} MB" if n >= 1_000_000 else f"{n / 1000:.0f} KB"


def expand_mentions(text: str, cwd: Path) -> tuple[str, list[str]]:
    """Attach files named as ``@path`` (relative to ``cwd``, or absolute/``~``) to the message.

    Returns ``(message, attached)``: the text followed by one fenced block per readable text
    file (at most MENTION_MAX_BYTES each, larger files are cut with a note), and the list of
    paths attached. Tokens that are not existing files (e-mail addresses, ``@user``) are left as
    they are. Never raises.
    """
    attached: list[str] = []
    blocks: list[str] = []
    for match in _MENTION.finditer(text):
        raw = match.group(1).rstrip(".,;:!?)")
        path = Path(os.path.expanduser(raw))
        if not path.is_absolute():
            path = cwd / path
        try:
            if not path.is_file() or raw in attached:
                continue
            data = path.read_bytes()[: MENTION_MAX_BYTES + 1]
            content = data[:MENTION_MAX_BYTES].decode("utf-8", "replace")
        except OSError:
            continue
        note = f"\n[cut at {MENTION_MAX_BYTES:,} bytes]" if len(data) > MENTION_MAX_BYTES else ""
        blocks.append(f"Contents of {raw}:\n~~~\n{content}{'' if content.endswith(chr(10)) else chr(10)}~~~{note}")
        attached.append(raw)
    if not blocks:
        return text, []
    return text + "\n\n" + "\n\n".join(blocks), attached


def complete_path(text: str, cwd: Path) -> str | None:
    """Tab completion of a trailing ``@partial`` path in ``text``: the completed text, or None."""
    match = re.search(r"(?:^|\s)@([^\s]*)$", text)
    if not match:
        return None
    partial = match.group(1)
    base = cwd / os.path.dirname(partial) if not os.path.isabs(partial) else Path(os.path.dirname(partial))
    stem = os.path.basename(partial)
    try:
        names = sorted(n for n in os.listdir(base)
                       if n.startswith(stem) and (stem.startswith(".") or not n.startswith(".")))
    except OSError:
        return None
    if not names:
        return None
    common = os.path.commonprefix(names)
    if len(names) == 1 and (base / names[0]).is_dir():
        common += "/"
    if common == stem:
        return None
    return text[: len(text) - len(stem)] + common


PLACEHOLDER = "Ask oitui to do something… (/ for commands, shift+enter for a new line)"


class PromptInput(TextArea):
    """The person's message editor. Posts :class:`PromptInput.Submitted` with the text."""

    ENTER_GRACE = 0.03

    BINDINGS = [
        # Paging keys scroll the conversation even while typing (the input rarely needs them).
        Binding("pageup", "conversation('page_up')", "Page up", show=False),
        Binding("pagedown", "conversation('page_down')", "Page down", show=False),
        Binding("ctrl+home", "conversation('scroll_home')", "Top", show=False),
        Binding("ctrl+end", "conversation('scroll_end')", "Bottom", show=False),
        Binding("shift+pageup", "conversation('page_up')", "Page up", show=False),
        Binding("shift+pagedown", "conversation('page_down')", "Page down", show=False),
    ]

    class Submitted(Message):
        """The person pressed Enter: ``text`` is the whole message (lines joined by ``\\n``)."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, **kwargs) -> None:
        super().__init__("", soft_wrap=True, tab_behavior="focus", show_line_numbers=False,
                         placeholder=PLACEHOLDER, highlight_cursor_line=False, compact=True, **kwargs)
        self.sent_history: list[str] = []
        self._hist_pos: int | None = None
        self._draft = ""
        self._pending_enter = None
        self.pastes: dict[str, str] = {}  # chip text -> the large paste it stands for
        self.cursor_blink = False  # a steady cursor: no repaint twice a second while idle
        self.completer = None  # callable(text) -> str | None (Tab completion)

    def action_conversation(self, name: str) -> None:
        """Scroll the conversation pane (``page_up``, ``page_down``, ``scroll_home``, ``scroll_end``)."""
        try:
            conv = self.app.query_one("#conversation")
        except Exception:  # noqa: BLE001
            return
        getattr(conv, f"action_{name}")()

    def _fire_enter(self) -> None:
        self._pending_enter = None
        text = self.text
        if not text.strip():
            return
        self.post_message(self.Submitted(self.expand_pastes(text)))

    def expand_pastes(self, text: str) -> str:
        """``text`` with every paste chip still in it replaced by the text it stands for."""
        for chip, body in self.pastes.items():
            if chip in text:
                text = text.replace(chip, body)
        return text

    def submit_now(self) -> None:
        """Send the current text at once (used by tests and the queued-enter path)."""
        if self._pending_enter is not None:
            self._pending_enter.stop()
        self._fire_enter()

    def add_history(self, text: str) -> None:
        """Remember a sent message for up/down recall."""
        if text and (not self.sent_history or self.sent_history[-1] != text):
            self.sent_history.append(text)
        self._hist_pos = None

    async def _on_key(self, event: events.Key) -> None:
        key = event.key
        if self._pending_enter is not None:
            # More keys right after Enter: an unbracketed paste. The Enter was a newline.
            self._pending_enter.stop()
            self._pending_enter = None
            self.insert("\n")
        if key == "enter":
            event.stop()
            event.prevent_default()
            self._pending_enter = self.set_timer(self.ENTER_GRACE, self._fire_enter)
            return
        if key in ("shift+enter", "ctrl+j", "alt+enter"):
            event.stop()
            event.prevent_default()
            self.insert("\n")
            return
        if key == "tab" and "@" in self.text:
            completed = complete_path(self.text, Path.cwd())
            if completed:
                event.stop()
                event.prevent_default()
                self.load_text(completed)
                self.move_cursor(self.document.end)
                return
        if key == "tab" and self.completer is not None and self.text.startswith(("/", "%")):
            completed = self.completer(self.text)
            if completed:
                event.stop()
                event.prevent_default()
                self.load_text(completed)
                self.move_cursor(self.document.end)
                return
        if key == "up" and self.sent_history and self.cursor_location[0] == 0:
            event.stop()
            event.prevent_default()
            if self._hist_pos is None:
                self._draft = self.text
                self._hist_pos = len(self.sent_history)
            if self._hist_pos > 0:
                self._hist_pos -= 1
                self.load_text(self.sent_history[self._hist_pos])
                self.move_cursor(self.document.end)
            return
        if key == "down" and self._hist_pos is not None and self.cursor_location[0] == self.document.line_count - 1:
            event.stop()
            event.prevent_default()
            self._hist_pos += 1
            if self._hist_pos >= len(self.sent_history):
                self._hist_pos = None
                self.load_text(self._draft)
            else:
                self.load_text(self.sent_history[self._hist_pos])
            self.move_cursor(self.document.end)
            return
        # Anything else: TextArea's own handler runs next (Textual dispatches along the MRO).

    async def _on_paste(self, event: events.Paste) -> None:
        if self._pending_enter is not None:
            self._pending_enter.stop()
            self._pending_enter = None
            self.insert("\n")
        event.prevent_default()
        event.stop()
        if self.read_only:
            return
        if len(event.text) > MAX_PASTE_CHARS:
            self.app.notify(f"paste too large ({len(event.text):,} characters; the limit is {MAX_PASTE_CHARS:,}): "
                            "nothing was inserted. Save it to a file and mention it as @path.",
                            severity="warning")
            return
        text = event.text.replace("\r\n", "\n").replace("\r", "\n")
        if len(text) > CHIP_CHARS:
            current = self.text
            self.pastes = {chip: body for chip, body in self.pastes.items() if chip in current}
            number = max((int(m.group(1)) for m in map(_CHIP.match, self.pastes) if m), default=0) + 1
            chip = f"[paste #{number}: {text.count(chr(10)) + 1:,} lines, {_size(len(text.encode('utf-8')))}]"
            self.pastes[chip] = text
            text = chip
        if result := self._replace_via_keyboard(text, *self.selection):
            self.move_cursor(result.end_location)
            self.focus()
