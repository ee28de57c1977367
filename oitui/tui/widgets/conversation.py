"""The conversation pane: user messages, streamed assistant markdown, code blocks with their
output folded underneath, collapsed reasoning, error lines and inline images.

Pinned to the bottom while new content arrives unless the person scrolls up (``Widget.anchor``);
old items are pruned beyond :attr:`Conversation.MAX_ITEMS` so long sessions never slow down.
"""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Collapsible, Static


class UserMessage(Static):
    """A message the person sent (plain text, shown verbatim)."""

    DEFAULT_CSS = ""

    def __init__(self, text: str) -> None:
        super().__init__(Text(text), markup=False, classes="user-message")
        self.text = text


class Note(Static):
    """A one-line notice in the conversation (``kind``: "note", "error" or "interrupt")."""

    def __init__(self, text: str, kind: str = "note") -> None:
        super().__init__(Text(text), markup=False, classes=f"conv-{kind}")
        self.text = text


def AssistantMarkdown(markdown: str | None = None):  # noqa: N802 - a lazy class factory
    """A new :class:`oitui.tui.widgets.reply.AssistantMarkdown` (Textual's Markdown loads on first use)."""
    from oitui.tui.widgets.reply import AssistantMarkdown as cls

    return cls(markdown)


class ReasoningBlock(Collapsible):
    """The model's reasoning: collapsed and dimmed, above its reply."""

    def __init__(self) -> None:
        self.body = Static("", classes="reasoning-text", markup=False)
        super().__init__(self.body, title="reasoning", collapsed=True, classes="reasoning")
        self.text = ""

    def append(self, text: str) -> None:
        """Add streamed reasoning text."""
        self.text += text
        self.body.update(Text(self.text))
        self.title = f"reasoning ({len(self.text):,} chars)"


class CodeBlock(Vertical):
    """One code block with its language/state header and its output folded underneath.

    ``state`` is one of "streaming", "awaiting approval", "running", "done", "failed",
    "declined", "interrupted". Output is kept to the last :attr:`MAX_OUTPUT_LINES` lines.
    """

    MAX_OUTPUT_LINES = 200

    def __init__(self, language: str, code: str = "") -> None:
        super().__init__(classes="code-block")
        self.language = language or "text"
        self.code = code
        self.output = ""
        self.total_lines = 0  # lines of output received (a partial last line counts once)
        self.cut_total: int | None = None  # the full size named by a "[output truncated: ...]" banner
        self._open_line = False
        self.state = "streaming"
        self.renders = 0  # how many times the code was highlighted (tests check it stays small)
        self._code_dirty = False
        self.header = Static("", classes="code-header", markup=False)
        self.code_view = Static("", classes="code-body")
        self.output_view = Static("", classes="code-output", markup=False)
        self.folder = Collapsible(self.output_view, title="output", collapsed=False, classes="output-fold")
        self.folder.display = False

    def compose(self):
        yield self.header
        yield self.code_view
        yield self.folder

    def on_mount(self) -> None:
        self._render_header()
        self._render_code()

    def _render_header(self) -> None:
        self.header.update(Text(f"{self.language} · {self.state}"))

    def _render_code(self) -> None:
        from rich.syntax import Syntax

        self._code_dirty = False
        self.renders += 1

        self.code_view.update(
            Syntax(self.code.rstrip("\n") or " ", _lexer(self.language), theme=code_theme(self.app),
                   word_wrap=True, background_color="default")
        )

    def set_code(self, code: str, live: bool = False) -> None:
        """Replace the code text (streaming or after an edit).

        live: True while the model is still writing the block and the live code pane shows it:
        the text is only stored, and this copy is highlighted once, when the block leaves
        "streaming" (:meth:`set_state`) or on :meth:`flush_code`, never once per chunk.
        """
        self.code = code
        if live:
            self._code_dirty = True
            return
        if self.is_mounted:
            self._render_code()

    def flush_code(self) -> None:
        """Draw code stored by ``set_code(..., live=True)`` (no-op when nothing is pending)."""
        if getattr(self, "_code_dirty", False) and self.is_mounted:
            self._render_code()

    def set_state(self, state: str) -> None:
        """Show a new state word in the header (and the code, if it was held back while streaming)."""
        self.state = state
        if self.is_mounted:
            self._render_header()
            self.flush_code()

    def append_output(self, raw: str) -> None:
        """Add raw program output (ANSI colours rendered); keeps the last MAX_OUTPUT_LINES lines."""
        self.output += raw
        if raw:
            # lines = completed lines (newlines seen) + an unfinished last line
            self._newlines = getattr(self, "_newlines", 0) + raw.count("\n")
            self._open_line = not raw.endswith("\n")
            self.total_lines = self._newlines + (1 if self._open_line else 0)
            banner = _BANNER_RE.search(raw)
            if banner:
                self.cut_total = max(self.cut_total or 0, int(banner.group(1).replace(",", "")))
        lines = self.output.replace("\r\n", "\n").split("\n")
        dropped = len(lines) > self.MAX_OUTPUT_LINES
        if dropped:
            lines = lines[-self.MAX_OUTPUT_LINES:]
            self.output = "\n".join(lines)
            self._dropped = True
        n = len([ln for ln in lines if ln.strip()])
        self.folder.display = True
        total = max(self.cut_total or 0, self.total_lines)
        if self.cut_total or getattr(self, "_dropped", False):
            self.folder.title = f"output (cut: last {n:,} of {total:,} lines)"
        else:
            self.folder.title = f"output ({n} line{'s' if n != 1 else ''})"
        if n > 12 and not self.folder.collapsed and not getattr(self, "_auto_folded", False):
            self.folder.collapsed = True
            self._auto_folded = True
        self.output_view.update(Text.from_ansi(_apply_cr(self.output.rstrip("\n"))))


_BANNER_RE = re.compile(r"\[output truncated: [\d,]+ characters? in ([\d,]+) lines? in total")


def _apply_cr(text: str) -> str:
    """Apply carriage returns per line the way a terminal would (later text overwrites)."""
    out = []
    for line in text.split("\n"):
        if "\r" in line:
            segs = line.split("\r")
            cur = ""
            for seg in segs:
                cur = seg + cur[len(seg):]
            line = cur
        out.append(line)
    return "\n".join(out)


_LEXERS = {"shell": "bash", "bash": "bash", "sh": "bash", "javascript": "javascript", "python": "python",
           "r": "r", "html": "html", "applescript": "applescript", "powershell": "powershell"}


def code_theme(app) -> str:
    """The pygments style for code under the app's current theme (themes.code_theme_for)."""
    theme = getattr(app, "theme", "") or ""
    dark = getattr(getattr(app, "current_theme", None), "dark", True)
    try:
        from oitui.tui.themes import code_theme_for

        return code_theme_for(theme, dark)
    except Exception:  # noqa: BLE001
        return "monokai" if dark else "default"


def _lexer(language: str) -> str:
    return _LEXERS.get((language or "").lower(), language or "text")


class ImageItem(Vertical):
    """An image the code produced, shown inline (textual-image, block fallback) with its file path."""

    def __init__(self, path: str) -> None:
        super().__init__(classes="image-item")
        self.path = path

    def compose(self):
        widget = None
        try:
            from PIL import Image as PILImage
            from textual_image.widget import HalfcellImage

            with PILImage.open(self.path) as img:
                img.load()  # a broken file must fail here, not while rendering
                image = img.copy()
            widget = HalfcellImage(image, classes="inline-image")
        except Exception:  # noqa: BLE001 - unreadable or no image support: the path note is enough
            widget = None
        if widget is not None:
            yield widget
        yield Static(Text(f"image saved to {self.path}"), classes="conv-note", markup=False)


class Conversation(VerticalScroll):
    """The scrolling transcript. Items are appended at the bottom; the view stays anchored to the
    bottom unless the person scrolls up. At most MAX_ITEMS widgets are kept (oldest pruned)."""

    MAX_ITEMS = 300
    can_focus = True

    BINDINGS = [
        ("pageup", "page_up", "Page up"),
        ("pagedown", "page_down", "Page down"),
        ("home", "scroll_home", "Top"),
        ("end", "scroll_end", "Bottom"),
        ("shift+up", "scroll_up", "Up"),
        ("shift+down", "scroll_down", "Down"),
    ]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.pruned = 0

    def on_mount(self) -> None:
        self.anchor()

    async def add(self, widget) -> Any:
        """Mount ``widget`` at the bottom and prune the oldest items when over MAX_ITEMS."""
        await self.mount(widget)
        over = len(self.children) - self.MAX_ITEMS
        if over > 0:
            old = list(self.children)[:over]
            self.pruned += len(old)
            await self.remove_children(old)
        return widget

    def plain_text(self) -> str:
        """All visible text of the transcript (for tests and /copy)."""
        parts = []
        for child in self.children:
            if isinstance(child, (UserMessage, Note)):
                parts.append(child.text)
            elif getattr(child, "is_reply", False):
                parts.append(child.text)
            elif isinstance(child, ReasoningBlock):
                parts.append(child.text)
            elif isinstance(child, CodeBlock):
                parts.append(child.code)
                parts.append(child.output)
        return "\n".join(parts)
