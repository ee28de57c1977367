"""An assistant reply streamed token by token through Textual's ``Markdown.get_stream()``.

Kept in its own module so Textual's Markdown (and markdown-it) load on the first reply, not
before the first frame."""

from __future__ import annotations

from textual.widgets import Markdown


class AssistantMarkdown(Markdown):
    """An assistant reply streamed token by token through ``Markdown.get_stream()``.

    ``text`` holds the markdown received so far; ``is_reply`` marks it for the conversation.
    """

    is_reply = True
    #: True for a later part of one long reply (see ``OituiApp._maybe_split_reply``).
    continuation = False

    def __init__(self, markdown: str | None = None) -> None:
        super().__init__(markdown or "", classes="assistant-message")
        self.text = markdown or ""
        self._stream = None

    async def write(self, fragment: str) -> None:
        """Append ``fragment`` (markdown text) to the reply."""
        self.text += fragment
        if self._stream is None:
            self._stream = Markdown.get_stream(self)
        await self._stream.write(fragment)

    async def finish(self) -> None:
        """Stop streaming; afterwards the widget shows exactly ``self.text``."""
        if self._stream is not None:
            stream, self._stream = self._stream, None
            await stream.stop()
        if self.source != self.text:
            await self.update(self.text)
