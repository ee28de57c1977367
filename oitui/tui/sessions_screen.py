"""The session browser: every saved conversation, searchable, with a preview (``/sessions``, ctrl+s).

``SessionBrowser(store)`` is a ``ModalScreen[str | None]``: it dismisses with the chosen session's
id (to resume it) or None (Escape). Keys:

- type in the search box: live full-text search over message text, code and program output
  (debounced, run off the UI thread through ``store.search``); down arrow or tab moves to the list;
- up/down: move through the list, the preview follows (the session's first messages);
- enter: resume the highlighted session (from the list or the search box);
- ``d``: delete the highlighted session after a yes/no confirmation (:class:`ConfirmScreen`);
- ``x``: export it (markdown by default) into the outputs folder and show the path;
- escape: close the browser (dismiss None); it never reaches the app behind (no interrupt).

The store is duck-typed on ``oitui.core.sessions.SessionStore``: ``list() -> [SessionInfo(id,
updated, turns, model, harness, cwd, title, error)]``, ``search(query) -> [SearchHit(info, snippet,
message_index)]``, ``open(ref) -> Session(.messages)``, ``delete(ref)``, ``export(ref, fmt) -> str``.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any, Callable

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.timer import Timer
from textual.widgets import Button, Input, Label, OptionList, Static
from textual.widgets.option_list import Option

#: Seconds of typing pause before the search runs.
SEARCH_DEBOUNCE = 0.25
#: Messages shown in the preview, and characters kept of each.
PREVIEW_MESSAGES = 8
PREVIEW_CHARS = 400


def format_updated(value: Any) -> str:
    """``YYYY-MM-DD HH:MM`` in local time for a datetime (naive = local) or ISO string; "" if unknown."""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value[:16]
    if isinstance(value, datetime):
        try:
            if value.tzinfo is not None:
                value = value.astimezone()
        except (OverflowError, OSError, ValueError):
            pass
        return value.strftime("%Y-%m-%d %H:%M")
    return ""


def _one_line(text: Any, limit: int) -> str:
    text = " ".join(str(text or "").split())
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


class ConfirmScreen(ModalScreen[bool]):
    """A small yes/no question. Dismisses True for ``y`` / the confirm button, False for ``n`` /
    Escape / the cancel button."""

    DEFAULT_CSS = """
    ConfirmScreen { align: center middle; }
    ConfirmScreen > Vertical {
        width: 60; max-width: 95%; height: auto; padding: 1 2;
        border: thick $error; background: $panel;
    }
    ConfirmScreen #confirm-question { width: 100%; margin-bottom: 1; }
    ConfirmScreen Horizontal { height: auto; align-horizontal: right; }
    ConfirmScreen Button { margin-left: 2; }
    """

    BINDINGS = [
        Binding("y", "answer(True)", "Yes"),
        Binding("n", "answer(False)", "No"),
        Binding("escape", "answer(False)", "Cancel"),
    ]

    def __init__(self, question: str, confirm_label: str = "Delete (y)", cancel_label: str = "Cancel (n)") -> None:
        """``question``: the text shown; the button labels may be changed."""
        super().__init__()
        self.question = question
        self.confirm_label = confirm_label
        self.cancel_label = cancel_label

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Label(self.question, id="confirm-question")
            with Horizontal():
                yield Button(self.cancel_label, id="confirm-no")
                yield Button(self.confirm_label, id="confirm-yes", variant="error")

    def on_mount(self) -> None:
        self.query_one("#confirm-no", Button).focus()

    def action_answer(self, value: bool) -> None:
        """Dismiss with ``value``."""
        self.dismiss(value)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        event.stop()
        self.dismiss(event.button.id == "confirm-yes")


class SessionList(OptionList):
    """The list of sessions (an ``OptionList`` whose option ids are session ids)."""


class SessionBrowser(ModalScreen[str | None]):
    """Browse, search, resume, delete and export saved sessions.

    ``store``: a ``SessionStore``. ``outputs_dir``: where exports go (default
    ``oitui.core.settings.paths().outputs_dir``); an export of session ID lands in
    ``outputs_dir/ID/ID.<fmt>``. ``export_format``: "md" (default), "ipynb", "json" or "oi".
    ``time_format``: turns ``SessionInfo.updated`` into the date shown (tests freeze it).
    Dismisses with the session id to resume, or None.
    """

    DEFAULT_CSS = """
    SessionBrowser { align: center middle; }
    SessionBrowser > #browser {
        width: 94%; height: 90%; max-width: 160;
        border: round $primary; background: $surface; padding: 0 1;
        border-title-color: $primary; border-title-style: bold;
        border-subtitle-color: $text-muted;
    }
    SessionBrowser #session-search { margin: 0 0 1 0; }
    SessionBrowser #browser-body { height: 1fr; }
    SessionBrowser #session-list {
        width: 1fr; min-width: 24; height: 100%; border: none;
        text-wrap: nowrap; text-overflow: ellipsis;
    }
    SessionBrowser #session-preview-scroll {
        width: 1fr; height: 100%; border-left: solid $panel-lighten-2; padding: 0 1;
    }
    SessionBrowser #session-preview { width: 100%; }
    SessionBrowser #browser-status { height: 1; color: $text-muted; }
    SessionBrowser.-narrow #session-preview-scroll { display: none; }
    """

    BINDINGS = [
        Binding("escape", "close", "Close", priority=False),
        Binding("d", "delete", "Delete"),
        Binding("x", "export", "Export"),
        Binding("slash", "focus_search", "Search", show=False),
        Binding("ctrl+f", "focus_search", "Search", show=False),
    ]

    def __init__(
        self,
        store: Any,
        *,
        outputs_dir: str | Path | None = None,
        export_format: str = "md",
        time_format: Callable[[Any], str] | None = None,
        name: str | None = None,
    ) -> None:
        super().__init__(name=name)
        self.store = store
        self._outputs_dir = Path(outputs_dir) if outputs_dir is not None else None
        self.export_format = export_format
        self.time_format = time_format or format_updated
        self._infos: dict[str, Any] = {}
        self._hits: dict[str, Any] = {}
        self._query = ""
        self._search_timer: Timer | None = None
        self._search_generation = 0
        self.selected_message_index: int | None = None
        """After a dismiss with an id chosen from search results: the index of the matching
        message in that session (so the app can scroll to that turn); otherwise None."""

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        with Vertical(id="browser"):
            yield Input(placeholder="Search messages, code and output…", id="session-search")
            with Horizontal(id="browser-body"):
                yield SessionList(id="session-list")
                with VerticalScroll(id="session-preview-scroll"):
                    yield Static("", id="session-preview")
            yield Static("enter resume · d delete · x export · / search · esc close", id="browser-status")

    def on_mount(self) -> None:
        browser = self.query_one("#browser")
        browser.border_title = "Sessions"
        self.set_class(self.size.width < 80, "-narrow")
        self._load_all()
        self.query_one(SessionList).focus()

    def on_resize(self, event: Any) -> None:
        self.set_class(self.size.width < 80, "-narrow")

    # ------------------------------------------------------------------ data

    @property
    def session_ids(self) -> list[str]:
        """Ids of the sessions listed right now, in order (a list of str)."""
        option_list = self.query_one(SessionList)
        return [option_list.get_option_at_index(i).id for i in range(option_list.option_count)]

    @property
    def highlighted_id(self) -> str | None:
        """Id of the highlighted session, or None when the list is empty."""
        option_list = self.query_one(SessionList)
        index = option_list.highlighted
        if index is None or option_list.option_count == 0:
            return None
        return option_list.get_option_at_index(index).id

    def outputs_dir(self) -> Path:
        """Where exports go (see the class docstring). Raises OSError only when writing."""
        if self._outputs_dir is not None:
            return self._outputs_dir
        try:
            from oitui.core.settings import paths

            return Path(paths().outputs_dir)
        except Exception:
            return Path.cwd()

    def _load_all(self) -> None:
        try:
            infos = list(self.store.list())
        except Exception as exc:  # a broken store must not take the app down
            infos = []
            self.notify(f"Cannot list sessions: {exc}", severity="error")
        self._infos = {info.id: info for info in infos}
        self._hits = {}
        self._show(infos, total=len(infos))

    def _option_for(self, info: Any, hit: Any = None) -> Option:
        title = _one_line(getattr(info, "title", "") or "(untitled)", 200)
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(title, style="bold")
        error = getattr(info, "error", None)
        if error:
            text.append(" ⚠ damaged", style="bold red")
        turns = getattr(info, "turns", 0) or 0
        meta = [
            self.time_format(getattr(info, "updated", None)),
            f"{turns} turn" + ("" if turns == 1 else "s"),
            _one_line(getattr(info, "model", "") or "?", 40),
            str(info.id),
        ]
        text.append("\n" + " · ".join(part for part in meta if part), style="dim")
        if hit is not None and getattr(hit, "snippet", ""):
            text.append("\n  " + _one_line(hit.snippet, 160), style="italic")
        return Option(text, id=str(info.id))

    def _show(self, infos: list[Any], total: int, hits: dict[str, Any] | None = None) -> None:
        option_list = self.query_one(SessionList)
        previous = self.highlighted_id
        option_list.clear_options()
        option_list.add_options([self._option_for(info, (hits or {}).get(info.id)) for info in infos])
        option_list.refresh()
        browser = self.query_one("#browser")
        if self._query:
            browser.border_subtitle = f"{len(infos)} match{'es' if len(infos) != 1 else ''} for “{_one_line(self._query, 40)}”"
        else:
            browser.border_subtitle = f"{total} session{'s' if total != 1 else ''}"
        if infos:
            ids = [str(info.id) for info in infos]
            option_list.highlighted = ids.index(previous) if previous in ids else 0
        self._update_preview()

    # ------------------------------------------------------------------ search

    @on(Input.Changed, "#session-search")
    def _query_changed(self, event: Input.Changed) -> None:
        event.stop()
        if self._search_timer is not None:
            self._search_timer.stop()
        self._search_timer = self.set_timer(SEARCH_DEBOUNCE, lambda: self._start_search(event.value))

    def _start_search(self, query: str) -> None:
        self._search_timer = None
        query = query.strip()
        self._query = query
        self._search_generation += 1
        if not query:
            self._load_all()
            return
        self._run_search(query, self._search_generation)

    @work(thread=True, exclusive=True, group="session-search", exit_on_error=False)
    def _run_search(self, query: str, generation: int) -> None:
        try:
            hits = list(self.store.search(query))
            error = None
        except Exception as exc:
            hits, error = [], str(exc)
        self.app.call_from_thread(self._apply_search, query, generation, hits, error)

    def _apply_search(self, query: str, generation: int, hits: list[Any], error: str | None) -> None:
        if generation != self._search_generation or not self.is_attached:
            return  # a newer query is on its way
        if error:
            self.notify(f"Search failed: {error}", severity="error")
        best: dict[str, Any] = {}
        order: list[Any] = []
        for hit in hits:
            info = hit.info
            if info.id not in best:
                best[info.id] = hit
                order.append(info)
        self._hits = best
        self._show(order, total=len(self._infos), hits=best)

    @property
    def searching(self) -> bool:
        """True while a typed query has not been applied yet (debounce or search running)."""
        return self._search_timer is not None or any(
            w.group == "session-search" and w.is_running for w in self.workers
        )

    # ------------------------------------------------------------------ preview

    @on(OptionList.OptionHighlighted, "#session-list")
    def _highlighted_changed(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self._update_preview()

    def _update_preview(self) -> None:
        preview = self.query_one("#session-preview", Static)
        session_id = self.highlighted_id
        if session_id is None:
            preview.update(Text("No sessions match." if self._query else "No saved sessions yet.", style="dim"))
            return
        preview.update(self.render_preview(session_id))

    def render_preview(self, session_id: str) -> Text:
        """A Rich ``Text`` with the session's metadata, the search match (if any) and its first
        :data:`PREVIEW_MESSAGES` messages, or, when the match lies further on, the first two
        messages and the ones around the match (marked ▶). Errors opening the session are shown,
        not raised."""
        info = self._infos.get(session_id) or getattr(self._hits.get(session_id), "info", None)
        text = Text()
        if info is not None:
            text.append(_one_line(getattr(info, "title", "") or "(untitled)", 200) + "\n", style="bold")
            for label, value in (
                ("id", info.id),
                ("updated", self.time_format(getattr(info, "updated", None))),
                ("model", getattr(info, "model", "")),
                ("harness", getattr(info, "harness", "")),
                ("cwd", getattr(info, "cwd", "")),
            ):
                if value:
                    text.append(f"{label}: ", style="dim")
                    text.append(f"{value}\n")
            if getattr(info, "error", None):
                text.append(f"damaged: {info.error}\n", style="bold red")
        hit = self._hits.get(session_id)
        if hit is not None and getattr(hit, "snippet", ""):
            index = getattr(hit, "message_index", None)
            where = f" (message {index + 1})" if isinstance(index, int) else ""
            text.append(f"\nmatch{where}: ", style="bold")
            text.append(_one_line(hit.snippet, 300) + "\n", style="italic")
        try:
            messages = list(self.store.open(session_id).messages)
        except Exception as exc:
            text.append(f"\ncannot open: {exc}\n", style="red")
            return text
        text.append("\n")
        match = getattr(hit, "message_index", None) if hit is not None else None
        if isinstance(match, int) and match >= PREVIEW_MESSAGES:
            # the match lies beyond the first messages: show the start, then the turn around it
            head = messages[:2]
            start = max(2, match - 2)
            window = list(enumerate(messages))[start : match + 3]
            for message in head:
                self._append_message(text, message)
            if start > 2:
                text.append(f"… {start - 2} messages …\n", style="dim")
            for index, message in window:
                if index == match:
                    text.append("▶ ", style="bold")
                self._append_message(text, message)
            rest = len(messages) - (match + 3)
            if rest > 0:
                text.append(f"… {rest} more messages\n", style="dim")
            return text
        for message in messages[:PREVIEW_MESSAGES]:
            self._append_message(text, message)
        if len(messages) > PREVIEW_MESSAGES:
            text.append(f"… {len(messages) - PREVIEW_MESSAGES} more messages\n", style="dim")
        return text

    @staticmethod
    def _append_message(text: Text, message: dict) -> None:
        if not isinstance(message, dict):
            return
        role = message.get("role", "?")
        kind = message.get("type", "message")
        content = message.get("content", "")
        if kind == "code":
            label, style = f"{message.get('format') or 'code'}", "bold magenta"
        elif kind == "console":
            label, style = "output", "bold green"
        elif kind == "tool_call":
            label, style = f"tool {message.get('format', '')}", "bold magenta"
        elif kind in ("image", "reasoning", "error"):
            label, style = kind, "bold yellow" if kind == "error" else "dim"
            if kind == "image":
                content = "[image]"
        elif role == "user":
            label, style = "you", "bold cyan"
        else:
            label, style = role, "bold blue"
        if not isinstance(content, str):
            content = str(content)
        body = content.strip()
        if len(body) > PREVIEW_CHARS:
            body = body[: PREVIEW_CHARS - 1] + "…"
        text.append(f"{label}: ", style=style)
        text.append(body + "\n", style="dim" if kind in ("console", "reasoning") else "")

    # ------------------------------------------------------------------ actions

    def action_close(self) -> None:
        """Escape: close the browser without choosing (dismiss None)."""
        self.dismiss(None)

    def action_focus_search(self) -> None:
        """Focus the search box."""
        self.query_one("#session-search", Input).focus()

    @on(Input.Submitted, "#session-search")
    def _search_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self._search_timer is not None:  # run the pending search first, then resume from the list
            self._search_timer.stop()
            self._start_search(event.value)
            self.query_one(SessionList).focus()
            return
        self._resume()

    @on(OptionList.OptionSelected, "#session-list")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self._resume(event.option.id)

    def on_key(self, event: Any) -> None:
        search = self.query_one("#session-search", Input)
        if event.key == "down" and search.has_focus:
            event.stop()
            self.query_one(SessionList).focus()

    def _resume(self, session_id: str | None = None) -> None:
        session_id = session_id or self.highlighted_id
        if session_id is None:
            self.app.bell()
            return
        hit = self._hits.get(session_id) if self._query else None
        index = getattr(hit, "message_index", None)
        self.selected_message_index = index if isinstance(index, int) else None
        self.dismiss(session_id)

    def action_delete(self) -> None:
        """``d``: ask, then delete the highlighted session and refresh the list."""
        session_id = self.highlighted_id
        if session_id is None:
            self.app.bell()
            return
        info = self._infos.get(session_id)
        title = _one_line(getattr(info, "title", "") or "(untitled)", 60)

        def done(confirmed: bool | None) -> None:
            if not confirmed:
                return
            try:
                self.store.delete(session_id)
            except Exception as exc:
                self.notify(f"Cannot delete {session_id}: {exc}", severity="error")
                return
            self.notify(f"Deleted session {session_id}")
            self._infos.pop(session_id, None)
            if self._query:
                self._start_search(self._query)
            else:
                self._load_all()

        self.app.push_screen(ConfirmScreen(f"Delete session “{title}” ({session_id})? This cannot be undone."), done)

    def action_export(self) -> None:
        """``x``: export the highlighted session to ``outputs_dir/ID/ID.<fmt>`` and show the path."""
        session_id = self.highlighted_id
        if session_id is None:
            self.app.bell()
            return
        path = self.export_session(session_id)
        if path is not None:
            self.notify(f"Exported to {path}", title="Session exported", timeout=8)

    def export_session(self, session_id: str, fmt: str | None = None) -> Path | None:
        """Export ``session_id`` as ``fmt`` (default :attr:`export_format`) into the outputs folder.

        Returns the file written, or None after notifying the error (never raises).
        """
        fmt = fmt or self.export_format
        try:
            data = self.store.export(session_id, fmt)
            folder = self.outputs_dir() / session_id
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / f"{session_id}.{'oi.json' if fmt == 'oi' else fmt}"
            path.write_text(data, encoding="utf-8")
        except Exception as exc:
            self.notify(f"Cannot export {session_id}: {exc}", severity="error")
            return None
        return path
