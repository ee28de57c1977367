"""The live code pane: the block being written or run, syntax-highlighted with line numbers, the
active line highlighted as execution moves, and ``language · state · elapsed`` in its title.

In edit mode (approval ``e``) an editable TextArea replaces the read-only view.
"""

from __future__ import annotations

import time

from rich.style import Style
from rich.text import Text
from textual import events
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import TextArea

from oitui.tui.widgets.conversation import _lexer, code_theme

ACTIVE_LINE_STYLE = Style(bgcolor="#5f5f00", bold=True)


def text_area_theme(app) -> str:
    """The ``TextArea`` theme (monokai, vscode_dark, github_light, …) that suits ``app``'s current
    Textual theme, from :func:`oitui.tui.themes.text_area_theme_for`; "css" if that fails."""
    theme = getattr(app, "theme", "") or ""
    dark = getattr(getattr(app, "current_theme", None), "dark", None)
    try:
        from oitui.tui.themes import text_area_theme_for

        return text_area_theme_for(theme, dark)
    except Exception:  # noqa: BLE001 - the app's own CSS colours still work
        return "css"


def follow_app_theme(area: TextArea) -> None:
    """Give ``area`` the TextArea theme matching its app's theme (no-op when unchanged/unmounted)."""
    try:
        wanted = text_area_theme(area.app)
    except Exception:  # noqa: BLE001 - no active app
        return
    if wanted not in area.available_themes:
        wanted = "css"
    if area.theme != wanted:
        area.theme = wanted


class CodeView(TextArea):
    """A read-only TextArea that highlights code with Pygments and marks ``active_line``.

    active_line: 1-based line number being executed, or None.
    """

    active_line: reactive[int | None] = reactive(None)

    def __init__(self, **kwargs) -> None:
        super().__init__("", read_only=True, show_line_numbers=True, soft_wrap=True,
                         highlight_cursor_line=False, show_cursor=False, **kwargs)
        self.code_language = "text"
        self._cache_key: tuple | None = None
        self._lines: list[Text] = []

    def on_mount(self) -> None:
        follow_app_theme(self)

    def _highlighted(self) -> list[Text]:
        text = self.text
        theme = code_theme(self.app)
        key = (text, self.code_language, theme)
        if key != self._cache_key:
            from rich.syntax import Syntax

            syntax = Syntax("", _lexer(self.code_language), theme=theme)
            try:
                highlighted = syntax.highlight(text)
                highlighted.rstrip()
                lines = highlighted.split("\n", allow_blank=True)
            except Exception:  # noqa: BLE001 - unknown lexer: plain text
                lines = [Text(line) for line in text.split("\n")]
            self._lines = list(lines)
            self._cache_key = key
        return self._lines

    def get_line(self, line_index: int) -> Text:
        """Line ``line_index`` (0-based) as styled Text: syntax colours plus the active-line mark."""
        lines = self._highlighted()
        if 0 <= line_index < len(lines):
            line = lines[line_index].copy()
            line.end = ""
            line.no_wrap = True
        else:
            line = Text(self.document.get_line(line_index), end="", no_wrap=True)
        line.style = ""
        if self.active_line is not None and line_index == self.active_line - 1:
            line.stylize(ACTIVE_LINE_STYLE)
            if not line.plain:
                line.append(" ", ACTIVE_LINE_STYLE)
        return line

    def watch_active_line(self, old: int | None, new: int | None) -> None:
        cache = getattr(self, "_line_cache", None)
        if cache is not None:
            cache.clear()
        self.refresh()
        if new is not None:
            self.scroll_to(y=max(0, new - 1 - self.size.height // 2), animate=False)

    def show(self, code: str, language: str) -> None:
        """Replace the shown code (keeps the scroll position at the end while streaming)."""
        self.code_language = language or "text"
        if code != self.text:
            self.load_text(code)
        cache = getattr(self, "_line_cache", None)
        if cache is not None:
            cache.clear()
        self.refresh()


class CodeEditor(TextArea):
    """The in-place editor for a proposed block (approval ``e``): Tab indents, Esc posts
    :class:`CodeEditor.Done` (the app then asks about the edited code again)."""

    class Done(Message):
        """The person finished editing (Esc)."""

    def on_mount(self) -> None:
        follow_app_theme(self)

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "escape":
            event.stop()
            event.prevent_default()
            self.post_message(self.Done())


class CodePane(Vertical):
    """Container with the title ``language · state · elapsed``; holds the view and an editor.

    state: "streaming", "awaiting approval", "running", "done", "failed", "declined",
    "interrupted", "editing" or "" (empty pane).
    """

    state: reactive[str] = reactive("")

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.view = CodeView(id="code-view")
        self.editor = CodeEditor("", show_line_numbers=True, soft_wrap=True, tab_behavior="indent", id="code-editor")
        self.editor.display = False
        self.language = ""
        self.started: float | None = None
        self.finished: float | None = None
        self.code = ""
        self._ticker = None

    def compose(self):
        yield self.view
        yield self.editor

    def on_mount(self) -> None:
        self.border_title = "code"
        self._ticker = None  # a 1 s timer, only while a block runs (idle CPU stays near zero)

    def _tick(self) -> None:
        if self.state == "running":
            self._update_title()

    def elapsed(self) -> float | None:
        """Seconds the block has been running (or ran), or None before it started."""
        if self.started is None:
            return None
        return (self.finished or time.monotonic()) - self.started

    def _update_title(self) -> None:
        parts = [self.language or "code"]
        if self.state:
            parts.append(self.state)
        el = self.elapsed()
        if el is not None:
            parts.append(f"{el:.0f}s" if el >= 10 else f"{el:.1f}s")
        self.border_title = " · ".join(parts)

    def watch_state(self, state: str) -> None:
        if state == "running" and self.started is None:
            self.started = time.monotonic()
        if state == "running" and self._ticker is None and self.is_mounted:
            self._ticker = self.set_interval(1.0, self._tick)
        elif state != "running" and getattr(self, "_ticker", None) is not None:
            self._ticker.stop()
            self._ticker = None
        if state in ("done", "failed", "declined", "interrupted") and self.started is not None and self.finished is None:
            self.finished = time.monotonic()
        self._update_title()

    def begin(self, language: str) -> None:
        """Start showing a new block in ``language`` (state "streaming")."""
        self.language = language or "code"
        self.code = ""
        self.started = None
        self.finished = None
        self.view.active_line = None
        self.view.show("", self.language)
        self.display = True
        self.state = "streaming"
        self._update_title()

    def set_code(self, code: str) -> None:
        """Show ``code`` (the block so far)."""
        self.code = code
        self.view.show(code.rstrip("\n"), self.language)

    def apply_theme(self) -> None:
        """Re-colour the view and the editor for the app's current theme (called on a theme change):
        the TextArea theme from ``themes.text_area_theme_for`` and the Pygments style from
        ``themes.code_theme_for``."""
        follow_app_theme(self.view)
        follow_app_theme(self.editor)
        self.view.show(self.code.rstrip("\n"), self.language or "text")

    def set_active_line(self, line: int | None) -> None:
        """Highlight 1-based ``line`` (None clears the mark)."""
        self.view.active_line = line

    def start_edit(self) -> TextArea:
        """Switch to the editable TextArea holding the current code; returns it (focused)."""
        self.editor.load_text(self.code)
        try:
            self.editor.language = None
        except Exception:  # noqa: BLE001
            pass
        self.view.display = False
        self.editor.display = True
        self.state = "editing"
        self.editor.focus()
        return self.editor

    def end_edit(self) -> str:
        """Leave edit mode; returns the edited code, which the view now shows."""
        code = self.editor.text
        self.editor.display = False
        self.view.display = True
        self.set_code(code)
        return code
