"""The oitui Textual app: conversation, live code pane, console, sidebar, input and approval bar.

Entry point :func:`run_app` (the CLI calls exactly this). Importing this module imports Textual
but never litellm or jupyter: the first frame appears first, then a thread worker loads the core
(settings, interpreter, model choice, session) and warms litellm, showing each state on the
sidebar.

Threads and messages: the core runs in a ``@work(thread=True, exclusive=True,
exit_on_error=False)`` worker; each LMC chunk becomes a :class:`~oitui.tui.messages.CoreChunk`
posted to the app; chunks are applied in batches at most ~30 times a second. An approval is an
:class:`~oitui.tui.messages.ApprovalRequested` carrying a ``concurrent.futures.Future`` that the
approval bar resolves.

Keys: Enter sends; Esc interrupts a streaming/running turn (at an approval: declines and stops);
ctrl+c copies a selection, else interrupts, and never quits (a notice names ctrl+q when idle);
ctrl+q saves and quits; ctrl+s opens the session browser; ctrl+p the command palette.

Status word (bottom left, always the first word of the status bar): ``idle``, ``streaming``,
``running``, ``approval`` (only once the approval keys are live), ``interrupted``, ``error``.

Documented behaviours (the TUI cases test them):

- Esc at an approval declines the block *and* stops the turn (status ``interrupted`` -> ``idle``).
- Keys typed while a turn streams stay in the input; Enter then queues the message (one at a
  time, shown under the conversation) and sends it once, right after the turn; a second Enter
  while one is queued leaves the text in the input with a notice.
- A key pressed before the approval bar is readable goes where the focus was (usually the
  input); keys on the bar are ignored for its first 0.5 s; a paste never answers it.
- After a turn the live code and console panes close; the conversation keeps each block with
  its output folded under it. Very long replies are split into several Markdown widgets at
  paragraph breaks so streaming stays cheap.
- ``/save`` writes ``{"lmc_version": 1, "messages": [...]}``; ``/load`` also takes Open
  Interpreter's plain message list. ``/export`` writes ``oitui-<session id>.<fmt>`` in the cwd.
- A paste over 100,000 characters shows as a chip (``[paste #1: 21,001 lines, 2.0 MB]``) and is
  sent in full; over 5,000,000 characters it is refused with a notice; ``@path`` attaches a file.
- Every code block ends a turn in a final state (``done``, ``failed``, ``declined``,
  ``interrupted`` or ``not run``); a conversation rebuilt from stored messages derives it from
  the stored output (:func:`stored_block_state`). A turn-ending error is shown once.
- Resuming a session (``--resume``/``-c`` or the ctrl+s browser) carries its token and cost
  totals into ``interp.metrics`` (as the CLI's ``-p`` path does), so they keep adding up.
- Printable keys pressed while the conversation has the focus (after a click or a mouse
  selection) go to the input box.
- Start-up: the code pane, console and approval bar are mounted on first use (not on the first
  screen); themes, the core and litellm load in daemon threads after the first frame, so ctrl+q
  never waits for them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import sys
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from rich.text import Text
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import ModalScreen
from textual.widgets import OptionList, Static, TextArea
from textual.widgets.option_list import Option
from textual.worker import Worker, WorkerState

from oitui.tui import commands as slash
from oitui.tui.messages import ApprovalRequested, CoreChunk, CoreLoaded, LoadState, TurnFinished
from oitui.tui.widgets.approval import ApprovalBar, default_scope
from oitui.tui.widgets.code_pane import CodePane
from oitui.tui.widgets.console import ConsolePane
from oitui.tui.widgets.conversation import (
    AssistantMarkdown,
    CodeBlock,
    Conversation,
    ImageItem,
    Note,
    ReasoningBlock,
    UserMessage,
)
from oitui.tui.widgets.input_box import PromptInput, expand_mentions
from oitui.tui.widgets.sidebar import Sidebar

STATUSES = ("idle", "streaming", "running", "approval", "interrupted", "error")
FLUSH_INTERVAL = 1 / 30
REPLY_SPLIT_BLOCKS = 40
SIDEBAR_MIN_WIDTH = 100
HINTS = "ctrl+q quit · esc stop · ctrl+c copy/stop · ctrl+s sessions · ctrl+p commands"


def _one_line(exc: BaseException | str, limit: int = 300) -> str:
    """A readable one-line reason from an exception or text."""
    text = str(exc) if not isinstance(exc, str) else exc
    if isinstance(exc, BaseException) and not text:
        text = type(exc).__name__
    text = " ".join(text.split())
    return text[: limit - 1] + "…" if len(text) > limit else text


class ChoiceScreen(ModalScreen[str | None]):
    """A small picker: ``title`` over an OptionList of ``choices``; returns the picked one or None."""

    BINDINGS = [Binding("escape", "dismiss_none", "Close")]
    DEFAULT_CSS = """
    ChoiceScreen { align: center middle; }
    ChoiceScreen > Vertical { width: 60; max-width: 90%; height: auto; max-height: 80%;
        border: round $accent; background: $panel; padding: 0 1; }
    ChoiceScreen OptionList { height: auto; max-height: 20; }
    """

    def __init__(self, title: str, choices: list[tuple[str, str]], current: str | None = None) -> None:
        super().__init__()
        self.title_text = title
        self.choices = choices
        self.current = current

    def compose(self) -> ComposeResult:
        with Vertical():
            yield Static(Text(self.title_text, style="bold"))
            yield OptionList(*[Option(label + (" ✓" if value == self.current else ""), id=value)
                               for value, label in self.choices])

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    def action_dismiss_none(self) -> None:
        self.dismiss(None)


class OituiApp(App[int]):
    """The full-screen app.

    Args:
        settings: an ``oitui.core.settings.Settings`` (None: loaded in the background, bad config
            falls back to defaults and the error is shown).
        resume: a session id, unique prefix or "last" to resume (None: a new session).
        interpreter: an existing ``OpenInterpreter`` to drive (tests share one per module); the
            app then neither applies settings to it nor terminates it on exit.
        load_core: False keeps the core unloaded (snapshot tests of the bare screen).
    """

    CSS_PATH = str(Path(__file__).with_name("app.tcss"))
    TITLE = "oitui"
    COMMANDS = App.COMMANDS | {slash.SlashCommandProvider}
    ENABLE_COMMAND_PALETTE = True

    BINDINGS = [
        Binding("ctrl+q", "quit_app", "Quit", priority=True),
        Binding("ctrl+c", "ctrl_c", "Copy / stop", priority=True, show=False),
        Binding("ctrl+s", "sessions", "Sessions", priority=True),
        Binding("escape", "escape", "Stop", show=False),
        Binding("ctrl+g", "external_editor", "Editor", show=False, priority=True),
    ]

    status: reactive[str] = reactive("idle")

    def __init__(self, settings: Any = None, resume: str | None = None, interpreter: Any = None,
                 load_core: bool = True, **kwargs: Any) -> None:
        driver_class = kwargs.pop("driver_class", None)
        if driver_class is None:
            try:
                from oitui.tui.terminal import safe_driver_class

                driver_class = safe_driver_class()
            except Exception:  # noqa: BLE001 - the stock driver still works
                driver_class = None
        super().__init__(driver_class=driver_class, **kwargs)
        self._settings = settings
        self._resume = resume
        self.interp = interpreter
        self._owns_interp = interpreter is None
        self._load_core = load_core
        self.session: Any = None
        self.store: Any = None
        self.busy = False
        self._stop_event = threading.Event()
        self._pending: list[dict] = []
        self._outbox: list[dict] = []
        self._outbox_lock = threading.Lock()
        self._outbox_posted = False
        self._flush_timer = None
        self._last_flush = 0.0
        self._flushing = False
        self._cur_md: Any = None  # the reply being streamed (widgets.reply.AssistantMarkdown)
        self._cur_reasoning: ReasoningBlock | None = None
        self._cur_block: CodeBlock | None = None
        self._code_text = ""
        self._approval_future: Future | None = None
        self._approval_request: Any = None
        self._edited_code: str | None = None
        self._queued: str | None = None
        self._status_timer = None
        self._image_count = 0
        self._last_output = ""
        self._turn_errors: list[str] = []  # error lines shown during the current turn
        self.config_error: str | None = None
        self.core_error: str | None = None
        self.first_frame_at: float | None = None
        self.theme_errors: list[str] = []
        self.chunk_errors: list[str] = []  # exceptions while applying chunks (tests assert it stays empty)
        self.persist_theme = False  # run_app turns it on: a theme picked in the app is saved

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        self.conversation = Conversation(id="conversation")
        self.code_pane = CodePane(id="code-pane")
        self.console_pane = ConsolePane(id="console-pane")
        self.approval_bar = ApprovalBar(id="approval-bar")
        self.prompt = PromptInput(id="prompt")
        self.sidebar = Sidebar(id="sidebar")
        # The code pane, console and approval bar are mounted on first use (_ensure_panes):
        # they are hidden on the first screen, and composing them (three TextAreas) cost about
        # 40 ms of the first frame.
        self._panes_mounted = False
        for pane in (self.code_pane, self.console_pane, self.approval_bar):
            pane.display = False
        with Horizontal(id="body"):
            with Vertical(id="main"):
                yield self.conversation
                yield Static("", id="queued-note", markup=False)
                yield Static("", id="completions", markup=False)
                yield self.prompt
            yield self.sidebar
        with Horizontal(id="statusbar"):
            yield Static("idle", id="status", markup=False)
            yield Static(HINTS, id="hints", markup=False)

    async def _ensure_panes(self) -> None:
        """Mount the code pane, console pane and approval bar (hidden) above the queued-note
        line, once; every path that shows one of them awaits this first."""
        if self._panes_mounted:
            return
        self._panes_mounted = True
        for pane in (self.code_pane, self.console_pane, self.approval_bar):
            pane.display = False
        await self.query_one("#main").mount(self.code_pane, self.console_pane, self.approval_bar,
                                            before=self.query_one("#queued-note"))

    def on_mount(self) -> None:
        self.query_one("#queued-note").display = False
        self.query_one("#completions").display = False
        self.prompt.completer = slash.complete
        self.prompt.focus()
        # The core's worker thread parses the model's stream in Python; a shorter GIL switch
        # interval lets the UI thread get the GIL back sooner, so keys echo promptly meanwhile.
        sys.setswitchinterval(0.001)
        self.sidebar.cwd = os.getcwd()
        self._apply_width(self.size.width)
        try:
            from oitui.tui.terminal import install_signal_handlers

            if self.is_headless is False:
                install_signal_handlers(self, on_signal=lambda _s: self._prepare_exit())
        except Exception:  # noqa: BLE001
            pass
        self.call_after_refresh(self._mark_first_frame)

    def _theme_loader(self) -> None:
        """Parse our theme files off the UI thread (after the first frame), then register them.
        Runs in a daemon thread (see :meth:`_start_background`)."""
        try:
            from oitui.tui.themes import load_themes
        except ImportError:
            return
        themes, errors = load_themes()
        if self.is_running:
            try:
                self.call_from_thread(self._register_themes, themes, errors)
            except RuntimeError:  # the app closed meanwhile
                pass

    def _start_background(self, target: Any, name: str) -> threading.Thread:
        """Run ``target()`` in a *daemon* thread and return the thread.

        The background loads (themes, the core, warming litellm: seconds of imports) must never
        hold the exit: Textual thread workers run in asyncio's default executor, which
        ``asyncio.run`` joins on shutdown, so ctrl+q pressed while litellm loads waited for the
        import (5 s). A daemon thread is simply abandoned once the session is saved.
        """

        def guarded() -> None:
            try:
                target()
            except Exception as exc:  # noqa: BLE001 - shown, never fatal
                self.core_error = self.core_error or _one_line(exc)

        thread = threading.Thread(target=guarded, name=name, daemon=True)
        thread.start()
        return thread

    def _register_themes(self, themes: list, errors: list[str]) -> None:
        names = []
        for theme in themes:
            try:
                self.register_theme(theme)
                names.append(theme.name)
            except Exception as exc:  # noqa: BLE001
                errors.append(f"theme {getattr(theme, 'name', '?')!r}: {exc}")
        self.oitui_themes = names
        self.theme_errors = errors
        wanted = self._settings.get("theme") if self._settings is not None else None
        if wanted and wanted in self.available_themes and self.theme != wanted:
            self.theme = wanted

    def _mark_first_frame(self) -> None:
        """The first frame is drawn: only now start the background loads (their imports would
        otherwise compete with the first frame for the GIL)."""
        if self.first_frame_at is not None:
            return
        self.first_frame_at = time.monotonic()
        self._start_background(self._theme_loader, "oitui-themes")
        if self._load_core:
            self._start_background(self._loader, "oitui-loader")

    def on_resize(self, event) -> None:
        self._apply_width(event.size.width)

    def _apply_width(self, width: int) -> None:
        self.sidebar.display = width >= SIDEBAR_MIN_WIDTH

    def watch_status(self, status: str) -> None:
        try:
            widget = self.query_one("#status", Static)
        except Exception:  # noqa: BLE001 - not composed yet
            return
        widget.update(status)
        widget.set_classes(f"status-{status}")

    def set_status(self, status: str, then_idle_after: float | None = None) -> None:
        """Show ``status`` (one of STATUSES); optionally fall back to ``idle`` after some seconds."""
        if self._status_timer is not None:
            self._status_timer.stop()
            self._status_timer = None
        self.status = status
        if then_idle_after is not None:
            self._status_timer = self.set_timer(then_idle_after, self._back_to_idle)

    def _back_to_idle(self) -> None:
        self._status_timer = None
        if not self.busy and self.status in ("interrupted", "error"):
            self.status = "idle"

    # ------------------------------------------------------------------ background loading

    def _loader(self) -> None:
        """Load settings, the interpreter, the model choice and the session, then warm litellm
        (runs in a daemon thread after the first frame; every step's state goes to the sidebar)."""
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        info: dict[str, Any] = {"notes": []}
        interp = self.interp
        try:
            from oitui.core.settings import load_settings_or_defaults, paths

            settings = self._settings
            if settings is None and self._owns_interp:
                settings, error = load_settings_or_defaults()
                if error:
                    info["config_error"] = error
            elif settings is not None and getattr(settings, "errors", None):
                info["config_error"] = "; ".join(str(e) for e in settings.errors)
            if interp is None:
                from oitui.core.interpreter import OpenInterpreter

                interp = OpenInterpreter()
                if settings is not None:
                    settings.apply(interp)
            elif settings is not None and self._settings is not None:
                settings.apply(interp)
            model = getattr(interp.llm, "model", None)
            reason = "set on the interpreter"
            if self._owns_interp or not model:
                from oitui.core.model_choice import choose_model

                chosen, why = choose_model(settings, os.environ)
                if chosen:
                    model = chosen
                    interp.llm.model = chosen
                    reason = why
            info["model"] = model
            info["model_reason"] = reason
            info["settings"] = settings
            try:
                interp.computer.interactive = True
            except Exception:  # noqa: BLE001
                pass
            interp.approval_handler = self._approval_handler
            try:
                from oitui.core.sessions import SessionStore

                store = SessionStore(paths().sessions_dir)
                if self._resume:
                    session = store.open(self._resume)
                    interp.messages = list(session.messages)
                    _restore_metrics(interp, getattr(session, "meta", None) or {})
                else:
                    session = store.create(model=model, harness=getattr(interp, "harness", None) or "native",
                                           cwd=os.getcwd())
                interp.session = session
                info["store"] = store
                info["session"] = session
            except ImportError:
                info["notes"].append("sessions are not available yet: this conversation is not saved")
            except Exception as exc:  # noqa: BLE001 - a bad resume id: start fresh, say why
                info["notes"].append(f"could not open the session: {_one_line(exc)}")
                try:
                    session = store.create(model=model, harness="native", cwd=os.getcwd())
                    interp.session = session
                    info["store"] = store
                    info["session"] = session
                except Exception:  # noqa: BLE001
                    pass
        except Exception as exc:  # noqa: BLE001 - shown on screen; the app stays up
            self.post_message(CoreLoaded(None, error=_one_line(exc), info=info))
            return
        self.post_message(CoreLoaded(interp, info=info))
        try:  # the reply widget's Markdown (markdown-it) and pygments, off the UI thread
            import rich.syntax  # noqa: F401

            import oitui.tui.widgets.reply  # noqa: F401
        except Exception:  # noqa: BLE001
            pass
        # Warm litellm off the UI thread so the first request does not pay for the import.
        self.post_message(LoadState("llm", "loading litellm…"))
        try:
            import litellm  # noqa: F401

            note = self._missing_key_note(interp)
            if note:
                self.post_message(LoadState("key", note))
            self.post_message(LoadState("llm", "ready"))
        except Exception as exc:  # noqa: BLE001
            self.post_message(LoadState("llm", f"failed: {_one_line(exc, 80)}"))

    @staticmethod
    def _missing_key_note(interp: Any) -> str | None:
        """A friendly note when the chosen remote model has no API key, else None."""
        llm = interp.llm
        model = getattr(llm, "model", "") or ""
        if getattr(llm, "api_key", None) or getattr(llm, "api_base", None):
            return None
        if model.startswith("local/") or model.startswith("ollama"):
            return None
        try:
            import litellm

            check = litellm.validate_environment(model=model)
        except Exception:  # noqa: BLE001
            return None
        missing = check.get("missing_keys") or []
        if check.get("keys_in_environment") or not missing:
            return None
        return (f"No API key for {model}: set {' or '.join(missing)} in your environment (or api_key in "
                "config.toml), or switch to the local model with /model local/smollm2.")

    def on_core_loaded(self, msg: CoreLoaded) -> None:
        sb = self.sidebar
        info = msg.info
        if msg.error or msg.interpreter is None:
            self.core_error = msg.error or "unknown error"
            sb.model = "unavailable"
            sb.llm = "failed"
            self._note(f"The agent core could not start: {msg.error}", "error")
            self.set_status("error", then_idle_after=2.0)
            return
        self.interp = msg.interpreter
        self.session = info.get("session")
        self.store = info.get("store")
        if info.get("settings") is not None and self._settings is None:
            self._settings = info["settings"]
        if info.get("config_error"):
            self.config_error = info["config_error"]
            self._note(f"Config error, started on defaults: {info['config_error']}", "error")
        for note in info.get("notes", []):
            self._note(note, "note")
        self._refresh_sidebar()
        sb.model_reason = info.get("model_reason", "")
        theme = (self._settings or {}).get("theme") if self._settings is not None else None
        if theme and theme in self.available_themes:
            self.theme = theme
        if self._resume and self.session is not None:
            self.call_later(self._rebuild_conversation)
        if self._queued is not None:
            text, self._queued = self._queued, None
            self._show_queued(None)
            self.send(text)

    def on_load_state(self, msg: LoadState) -> None:
        if msg.what == "llm":
            self.sidebar.llm = msg.state
        elif msg.what == "kernel":
            self.sidebar.kernel = msg.state
        elif msg.what == "key":
            self._note(msg.state, "note")

    def _refresh_sidebar(self) -> None:
        interp = self.interp
        if interp is None:
            return
        sb = self.sidebar
        sb.model = str(getattr(interp.llm, "model", "") or "none")
        sb.harness = str(getattr(interp, "harness", None) or "native")
        sb.auto_run = bool(getattr(interp, "auto_run", False))
        always = getattr(interp, "_always_languages", None) or ()
        sb.always = ", ".join(sorted(str(a) for a in always))
        sb.safe_mode = str(getattr(interp, "safe_mode", "off") or "off")
        sandbox = getattr(interp, "sandbox", None)
        if sandbox is None and self._settings is not None:
            sandbox = self._settings.get("sandbox")
        sb.sandbox = str(sandbox or "off")
        metrics = getattr(interp, "metrics", None) or {}
        sb.tokens_in = int(metrics.get("prompt_tokens") or 0)
        sb.tokens_out = int(metrics.get("completion_tokens") or 0)
        sb.cost = metrics.get("cost", 0.0)
        sb.budget = getattr(interp, "max_budget", None)
        if self.session is not None:
            sb.session_id = str(getattr(self.session, "id", ""))
            meta = getattr(self.session, "meta", None) or {}
            title = getattr(self.session, "title", None) or (meta.get("title") if isinstance(meta, dict) else None)
            sb.session_title = str(title) if title else "new session"

    # ------------------------------------------------------------------ sending

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        if event.text_area is not self.prompt:
            return
        text = event.text_area.text
        comp = self.query_one("#completions", Static)
        matches = slash.matching(text) if text.startswith("/") else []
        if matches and text.strip():
            comp.update(Text("  ".join(f"{c.usage} — {c.help}" for c in matches[:6]), style="dim"))
            comp.display = True
        else:
            comp.display = False

    async def on_prompt_input_submitted(self, msg: PromptInput.Submitted) -> None:
        text = msg.text
        prompt = self.prompt
        parsed = slash.parse(text)
        if parsed is not None:
            prompt.add_history(text.strip())
            prompt.load_text("")
            await self.run_command(*parsed)
            return
        if self.interp is None and self.core_error:
            self.notify(f"the agent core could not start ({self.core_error}); /info shows paths, ctrl+q quits",
                        severity="error")
            return
        if self.busy or self.interp is None:
            if self._queued is not None:
                self.notify("One message is already queued; this one stays in the input.", severity="warning")
                return
            self._queued = text
            prompt.add_history(text)
            prompt.load_text("")
            self._show_queued(text)
            return
        prompt.add_history(text)
        prompt.load_text("")
        self.send(text)

    def _show_queued(self, text: str | None) -> None:
        note = self.query_one("#queued-note", Static)
        if text is None:
            note.display = False
            return
        first = text.strip().splitlines()[0] if text.strip() else ""
        note.update(Text(f"queued (sent when this turn ends): {first[:60]}", style="italic"))
        note.display = True

    def send(self, text: str) -> None:
        """Start a user turn with ``text`` (the app must be idle and the core loaded)."""
        self.busy = True
        self._stop_event.clear()
        self.call_later(self._start_turn, text)

    async def _start_turn(self, text: str) -> None:
        await self._ensure_panes()
        await self._finish_streams()
        self._cur_block = None
        self._turn_errors = []
        await self.conversation.add(UserMessage(text))
        self.conversation.scroll_end(animate=False)
        self.set_status("streaming")
        message, attached = expand_mentions(text, Path.cwd())
        if attached:
            await self.conversation.add(Note("attached: " + ", ".join(attached), "note"))
        self._turn_worker(message)

    @work(thread=True, exclusive=True, exit_on_error=False, group="turn")
    def _turn_worker(self, message: str) -> None:
        error = None
        kind = None
        gen = None
        try:
            gen = self.interp.chat(message, stream=True, display=False)
            for chunk in gen:
                if self._stop_event.is_set():
                    break
                self._emit(chunk)
        except Exception as exc:  # noqa: BLE001 - shown as one line; the app never dies
            if not self._stop_event.is_set():
                error = _one_line(exc)
                kind = type(exc).__name__
        finally:
            if gen is not None and hasattr(gen, "close"):
                try:
                    gen.close()
                except Exception:  # noqa: BLE001
                    pass
        self.post_message(TurnFinished(error, interrupted=self._stop_event.is_set(), kind=kind))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR and event.worker.group == "turn" and self.busy:
            self.post_message(TurnFinished(_one_line(event.worker.error or "the turn failed"), kind="crash"))

    # ------------------------------------------------------------------ chunks

    def _emit(self, chunk: dict) -> None:
        """Worker side: hand one chunk to the UI (thread-safe).

        The chunk goes into an outbox and a :class:`CoreChunk` message is posted only when none is
        in flight, so a fast stream can never flood the app's message queue (keys stay snappy):
        the UI takes everything waiting in the outbox when it handles the message.
        """
        with self._outbox_lock:
            self._outbox.append(chunk)
            if self._outbox_posted:
                return
            self._outbox_posted = True
        self.post_message(CoreChunk(chunk, batched=True))

    def on_core_chunk(self, msg: CoreChunk) -> None:
        if msg.batched:
            with self._outbox_lock:
                self._pending.extend(self._outbox)
                self._outbox.clear()
                self._outbox_posted = False
        else:
            self._pending.append(msg.chunk)  # posted directly (tests, other front ends)
        if self._flush_timer is None:
            delay = max(0.002, FLUSH_INTERVAL - (time.monotonic() - self._last_flush))
            self._flush_timer = self.set_timer(delay, self._flush_chunks)

    async def _flush_chunks(self) -> None:
        """Apply every pending chunk (runs at most ~30 times a second)."""
        self._flush_timer = None
        if self._flushing or not self.is_running:
            return
        self._flushing = True
        try:
            await self._ensure_panes()
            while self._pending:
                chunks, self._pending = self._pending, []
                for chunk in _coalesce(chunks):
                    try:
                        await self._apply(chunk)
                    except Exception as exc:  # noqa: BLE001 - one bad chunk never kills the app
                        self.chunk_errors.append(repr(exc))
                        self.log.error(f"chunk failed: {exc!r} {chunk!r}")
            if self.console_pane._dirty:
                self.console_pane.refresh_body()
            self._refresh_sidebar()
        finally:
            self._flushing = False
            self._last_flush = time.monotonic()

    async def _flush_now(self) -> None:
        if self._flush_timer is not None:
            self._flush_timer.stop()
            self._flush_timer = None
        while self._flushing:
            await _sleep(0.005)
        await self._flush_chunks()

    async def _apply(self, chunk: dict) -> None:
        role = chunk.get("role")
        ctype = chunk.get("type")
        fmt = chunk.get("format")
        content = chunk.get("content")
        start = chunk.get("start")
        end = chunk.get("end")
        conv = self.conversation
        if role == "assistant" and ctype == "message":
            if start or self._cur_md is None:
                if start or content:
                    await self._finish_streams()
                    self._cur_md = await conv.add(AssistantMarkdown())
            if isinstance(content, str) and content and self._cur_md is not None:
                content = await self._maybe_split_reply(content)
                await self._cur_md.write(content)
            if self.status not in ("streaming",) and not self._approval_future:
                self.set_status("streaming")
            if end and self._cur_md is not None:
                await self._cur_md.finish()
                self._cur_md = None
        elif role == "assistant" and ctype == "reasoning":
            if start or self._cur_reasoning is None:
                self._cur_reasoning = await conv.add(ReasoningBlock())
            if isinstance(content, str) and content:
                self._cur_reasoning.append(content)
            if end:
                self._cur_reasoning = None
        elif role == "assistant" and ctype == "code":
            if start or self._cur_block is None or self._cur_block.state not in ("streaming",):
                await self._finish_streams()
                self._code_text = ""
                self._edited_code = None
                self._cur_block = await conv.add(CodeBlock(fmt or "code"))
                self.code_pane.begin(fmt or "code")
                self.console_pane.clear()
                self.console_pane.display = False
                self.set_status("streaming")
            if isinstance(content, str) and content:
                self._code_text += content
                # the live pane shows the block as it streams; the conversation's copy is drawn
                # once the block is complete (not on every chunk)
                self._cur_block.set_code(self._code_text, live=True)
                self.code_pane.set_code(self._code_text)
            if end and self._cur_block is not None:
                self._cur_block.flush_code()
        elif role == "assistant" and ctype == "tool_call":
            if start or content:
                await self._finish_streams()
                args = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)[:500]
                await conv.add(Note(f"tool call {fmt}: {args}", "note"))
        elif role == "computer" and ctype == "confirmation":
            code_msg = content if isinstance(content, dict) else {}
            code = code_msg.get("content")
            if isinstance(code, str):
                # a reply with several blocks streams them all before the first is asked about:
                # the approval is for the first block not yet run, not the last one streamed
                waiting = [b for b in conv.query(CodeBlock)
                           if b.state == "streaming" and b.code.strip() == code.strip()]
                if waiting and waiting[0] is not self._cur_block:
                    self._cur_block = waiting[0]
                    self.code_pane.begin(waiting[0].language)
                    self.console_pane.clear()
                    self.console_pane.display = False
                if self._cur_block is None:
                    self._cur_block = await conv.add(CodeBlock(code_msg.get("format") or "code", code))
                    self.code_pane.begin(code_msg.get("format") or "code")
                self.code_pane.set_code(code)
                self._cur_block.set_code(code)
            self.code_pane.state = "awaiting approval"
            if self._cur_block is not None:
                self._cur_block.set_state("awaiting approval")
        elif role == "computer" and ctype == "console":
            if start:
                self._attach_run_to_next_block(conv)
            if fmt == "active_line":
                self._mark_running()
                self.code_pane.set_active_line(content if isinstance(content, int) else None)
            elif fmt == "output":
                if start:
                    self._mark_running()
                if isinstance(content, str) and content:
                    self._mark_running()
                    self.console_pane.display = True
                    self.console_pane.write(content)
                    if self._cur_block is not None:
                        self._cur_block.append_output(content)
                    self._last_output += content
                    if len(self._last_output) > 200_000:
                        self._last_output = self._last_output[-100_000:]
            elif fmt == "input_request":
                prompt_text = str(content or "")
                self.console_pane.display = True
                if prompt_text and not self.console_pane.text().endswith(prompt_text):
                    self.console_pane.write(prompt_text)  # the prompt stays visible, as in a terminal
                self.console_pane.refresh_body()
                self.console_pane.ask(prompt_text, bool(chunk.get("password")))
            if end:
                self._block_finished()
        elif ctype == "image":
            await self._show_image(fmt, content)
        elif ctype == "error" or (role == "computer" and ctype == "message"):
            await self._finish_streams()
            text = _one_line(str(content))
            if ctype == "error":
                self._turn_errors.append(text)
            await conv.add(Note(text, "error" if ctype == "error" else "note"))

    def _attach_run_to_next_block(self, conv) -> None:
        """A reply with several blocks streams them all before the first one runs (auto-run, or a
        tool-call reply): each console run belongs to the first block that has not run yet, not
        to the last one streamed."""
        if self._cur_block is not None and self._cur_block.state in ("running", "awaiting approval", "declined"):
            return  # approved or declined through the bar: already the right block
        waiting = [b for b in conv.query(CodeBlock) if b.state == "streaming"]
        if not waiting or waiting[0] is self._cur_block:
            return
        block = waiting[0]
        self._cur_block = block
        self.code_pane.begin(block.language)
        self.code_pane.set_code(block.code)
        self.console_pane.clear()

    async def _maybe_split_reply(self, content: str) -> str:
        """Keep streaming cheap in very long replies: once the reply widget holds REPLY_SPLIT_BLOCKS
        blocks, finish it at a paragraph break (outside any fence) and continue in a new widget
        (finished parts keep their layout cached). Returns the part of ``content`` still to write."""
        md = self._cur_md
        if md is None or len(md.children) < REPLY_SPLIT_BLOCKS:
            return content
        idx = content.rfind("\n\n")
        if idx < 0:
            return content
        head = content[: idx + 2]
        if (md.text + head).count("```") % 2 or (md.text + head).count("~~~") % 2:
            return content
        await md.write(head)
        await md.finish()
        self._cur_md = await self.conversation.add(AssistantMarkdown())
        self._cur_md.continuation = True
        return content[idx + 2 :]

    def _mark_running(self) -> None:
        if self._cur_block is not None and self._cur_block.state == "declined":
            return  # the core's "declined" note for the model, not program output
        if self.code_pane.state != "running" and self._cur_block is not None:
            self.code_pane.state = "running"
            self._cur_block.set_state("running")
            if (self._cur_block.language or "").lower() == "python" and "ready" not in self.sidebar.kernel:
                self.sidebar.kernel = "running"
        if self.status != "running" and self._approval_future is None:
            self.set_status("running")

    def _block_finished(self) -> None:
        block = self._cur_block
        self.code_pane.set_active_line(None)
        if self.console_pane._dirty:
            self.console_pane.refresh_body()
        self.console_pane.prompt.display = False
        if block is None:
            return
        if block.state == "declined":
            self.code_pane.state = "declined"
            return
        out = block.output[-3000:]
        failed = bool(re.search(r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b.*:", out, re.M))
        if self._stop_event.is_set():
            state = "interrupted"
        else:
            state = "failed" if failed else "done"
        block.set_state(state)
        self.code_pane.state = state
        if (block.language or "").lower() == "python":
            self.sidebar.kernel = "ready"
        if self.status == "running":
            self.set_status("streaming")

    async def _show_image(self, fmt: str | None, content: Any) -> None:
        path = None
        if fmt == "path" and isinstance(content, str):
            path = content
        elif isinstance(content, str) and fmt and fmt.startswith("base64"):
            ext = fmt.split(".", 1)[-1] if "." in fmt else "png"
            try:
                from oitui.core.settings import paths

                folder = Path(paths().outputs_dir) / str(getattr(self.session, "id", "unsaved"))
            except Exception:  # noqa: BLE001
                folder = Path.cwd()
            try:
                folder.mkdir(parents=True, exist_ok=True)
                self._image_count += 1
                target = folder / f"image-{int(time.time())}-{self._image_count}.{ext}"
                target.write_bytes(base64.b64decode(content))
                path = str(target)
            except Exception as exc:  # noqa: BLE001
                await self.conversation.add(Note(f"could not save the image: {_one_line(exc)}", "error"))
                return
        if path:
            await self.conversation.add(ImageItem(path))

    async def _finish_streams(self) -> None:
        if self._cur_md is not None:
            md, self._cur_md = self._cur_md, None
            await md.finish()
        self._cur_reasoning = None

    # ------------------------------------------------------------------ turn end

    def _error_shown(self, error: str) -> bool:
        """True when this turn already showed ``error`` (the core yields an error chunk and then
        raises the same text): the turn-end line is then not printed a second time."""
        key = error.rstrip("…").strip()
        return bool(key) and any(key in shown or shown.rstrip("…").strip() in key
                                 for shown in self._turn_errors if shown.strip())

    async def on_turn_finished(self, msg: TurnFinished) -> None:
        await self._flush_now()
        await self._finish_streams()
        self.busy = False
        self._withdraw_approval()
        # every block of the turn ends in a final state: one still "streaming" or "awaiting
        # approval" was never run (a retry limit, a decline of an earlier block, an error)
        for block in self.conversation.query(CodeBlock):
            if block.state in ("streaming", "awaiting approval"):
                block.set_state("interrupted" if msg.interrupted else "not run")
            elif block.state == "running":
                block.set_state("interrupted" if msg.interrupted else "done")
        if self.code_pane.state in ("running", "streaming", "awaiting approval"):
            if msg.interrupted:
                self.code_pane.state = "interrupted"
            else:
                self.code_pane.state = "done" if self.code_pane.state == "running" else "not run"
        self.code_pane.set_active_line(None)
        self.console_pane.prompt.display = False
        self._refresh_sidebar()
        if msg.interrupted:
            await self.conversation.add(Note("⏹ interrupted", "interrupt"))
            self.set_status("interrupted", then_idle_after=0.6)
        elif msg.error:
            if not self._error_shown(msg.error):
                await self.conversation.add(Note(f"error: {msg.error}", "error"))
            self.set_status("error", then_idle_after=1.5)
        else:
            self.set_status("idle")
        self.title = "oitui"
        # The live panes show the block being written or run; once the turn is over the
        # conversation holds the record (code with its output folded under it).
        self.code_pane.display = False
        self.console_pane.display = False
        if self._queued is not None:
            text, self._queued = self._queued, None
            self._show_queued(None)
            self.send(text)
        elif self.focused is not self.conversation:
            self.prompt.focus()

    # ------------------------------------------------------------------ approval

    def _approval_handler(self, request: Any) -> Any:
        """Called by the core in the worker thread: posts the request and waits for the answer."""
        from oitui.core.approval import Approval

        future: Future = Future()
        self.post_message(ApprovalRequested(request, future))
        while True:
            try:
                return future.result(timeout=0.1)
            except FutureTimeout:
                if self._stop_event.is_set():
                    return Approval("decline", reason="interrupted by the user")
                if not self.is_running:
                    return Approval("decline", reason="the app was closed")

    async def on_approval_requested(self, msg: ApprovalRequested) -> None:
        await self._ensure_panes()
        await self._flush_now()
        await self._finish_streams()
        if self._stop_event.is_set():
            from oitui.core.approval import Approval

            msg.future.set_result(Approval("decline", reason="interrupted by the user"))
            return
        self._approval_future = msg.future
        self._approval_request = msg.request
        self._edited_code = None
        code = getattr(msg.request, "code", None)
        args = getattr(msg.request, "arguments", None)
        lang = getattr(msg.request, "language", None) or getattr(msg.request, "tool", None) or "code"
        if code is None and isinstance(args, dict):
            diff = args.get("diff") or args.get("patch")
            if isinstance(diff, str):
                code, lang = diff, "diff"  # file edits are shown as a unified diff
            else:
                code = json.dumps(args, indent=2, ensure_ascii=False)
                lang = "json"
        if code is not None:
            if not self.code_pane.display or self._cur_block is None or lang in ("diff", "json"):
                self.code_pane.begin(lang)
            self.code_pane.set_code(code)
        self.code_pane.state = "awaiting approval"
        if self._cur_block is not None:
            self._cur_block.set_state("awaiting approval")
        self.approval_bar.ask(msg.request)
        self.title = "oitui — approval pending"
        self.bell()

    def on_approval_bar_armed(self, _msg: ApprovalBar.Armed) -> None:
        if self._approval_future is not None:
            self.set_status("approval")

    async def on_approval_bar_decided(self, msg: ApprovalBar.Decided) -> None:
        from oitui.core.approval import Approval

        future = self._approval_future
        if future is None:
            self.approval_bar.close()
            return
        action = msg.action
        if action == "interrupt":
            self.action_interrupt()
            return
        if action == "edit":
            editor = self.code_pane.start_edit()
            self.approval_bar.set_hint("editing: esc finishes (then you are asked again) · ctrl+g opens $EDITOR",
                                       "italic")
            self.approval_bar.armed = False
            editor.focus()
            return
        code = self._edited_code
        if action == "run":
            result = Approval("run", code=code)
        elif action == "always":
            result = Approval("always", code=code)
            self.notify(f"Always allowing: {default_scope(self._approval_request)}")
        else:
            result = Approval("decline", reason=msg.reason)
        self._approval_future = None
        self._approval_request = None
        self.approval_bar.close()
        self.title = "oitui"
        if action == "decline":
            self.code_pane.state = "declined"
            if self._cur_block is not None:
                self._cur_block.set_state("declined")
            self.set_status("streaming")
        else:
            self.code_pane.state = "running"
            if self._cur_block is not None:
                self._cur_block.set_state("running")
                if code is not None:
                    self._cur_block.set_code(code)
            self.set_status("running")
        self.prompt.focus()
        if not future.done():
            future.set_result(result)

    def edit_finished(self) -> None:
        """The person left the code editor: show the edited code and ask again (BR-29)."""
        if self._approval_future is None:
            return
        code = self.code_pane.end_edit()
        original = getattr(self._approval_request, "code", None)
        self._edited_code = code if code != original else None
        if self._cur_block is not None:
            self._cur_block.set_code(code)
        self.code_pane.state = "awaiting approval"
        note = "edited: run this version?" if self._edited_code is not None else "unchanged: run it?"
        self.set_status("running")
        self.approval_bar.ask(self._approval_request, note=note)

    def _withdraw_approval(self) -> None:
        if self._approval_future is not None and not self._approval_future.done():
            from oitui.core.approval import Approval

            self._approval_future.set_result(Approval("decline", reason="interrupted by the user"))
        self._approval_future = None
        self._approval_request = None
        if not self._panes_mounted:
            return
        if self.code_pane.editor.display:
            self.code_pane.end_edit()
        had_focus = self.focused is not None and (self.focused is self.approval_bar or self.focused.parent is self.approval_bar
                                                  or self.focused is self.code_pane.editor)
        self.approval_bar.close()
        if had_focus:
            self.prompt.focus()

    # ------------------------------------------------------------------ keys

    def action_escape(self) -> None:
        """Esc: close a modal first; in the editor, finish editing; else interrupt a running turn."""
        if len(self.screen_stack) > 1:
            try:
                self.screen.dismiss(None)
            except Exception:  # noqa: BLE001
                self.pop_screen()
            return
        if self.code_pane.editor.display and self._approval_future is not None:
            self.edit_finished()
            return
        if self.busy:
            self.action_interrupt()

    def on_key(self, event) -> None:
        """Typing while the conversation has the focus (after a click or a mouse selection)
        goes to the input box instead of being lost."""
        if self.focused is self.conversation and event.is_printable and event.character:
            event.stop()
            self.prompt.focus()
            self.prompt.insert(event.character)

    def action_interrupt(self) -> None:
        """Stop the model stream or the running code (the app and the kernel survive)."""
        if not self.busy:
            return
        self._stop_event.set()
        self._withdraw_approval()
        self.set_status("interrupted")
        interp = self.interp
        if interp is not None:
            threading.Thread(target=_safe_call, args=(interp.stop,), name="oitui-stop", daemon=True).start()

    def action_ctrl_c(self) -> None:
        """ctrl+c: copy a selection; otherwise interrupt; never quit."""
        text = None
        focused = self.focused
        if isinstance(focused, TextArea) and focused.selected_text:
            text = focused.selected_text
        else:
            try:
                text = self.screen.get_selected_text()
            except Exception:  # noqa: BLE001
                text = None
        if text:
            self._copy(text)
            try:
                self.screen.clear_selection()
            except Exception:  # noqa: BLE001
                pass
            return
        if self.busy:
            self.action_interrupt()
            return
        self.notify("ctrl+c copies or stops; it never quits. Press ctrl+q to quit.", title="oitui")

    def _copy(self, text: str) -> bool:
        try:
            from oitui.tui.clipboard import copy_text

            ok = copy_text(self, text)
        except ImportError:
            self.copy_to_clipboard(text)
            ok = True
        if ok:
            self.notify(f"copied {len(text):,} characters")
        else:
            self.notify("could not copy: no clipboard and no terminal for OSC 52", severity="error")
        return ok

    def _prepare_exit(self) -> None:
        self._stop_event.set()
        self._withdraw_approval()
        if self.busy and self.interp is not None:
            _safe_call(self.interp.stop)
        session = self.session
        for name in ("flush", "close"):
            fn = getattr(session, name, None)
            if callable(fn):
                _safe_call(fn)

    def action_quit_app(self) -> None:
        """ctrl+q: stop any turn, save the session, quit with status 0."""
        self._prepare_exit()
        self.exit(0)

    async def action_sessions(self) -> None:
        await self.run_command("sessions", "")

    async def action_external_editor(self) -> None:
        """ctrl+g in the code editor: edit the code in $EDITOR (the app is suspended meanwhile)."""
        editor_widget = self.code_pane.editor
        if not editor_widget.display:
            return
        import shlex
        import subprocess
        import tempfile

        editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
        suffix = {"python": ".py", "shell": ".sh", "javascript": ".js", "r": ".R"}.get(self.code_pane.language, ".txt")
        with tempfile.NamedTemporaryFile("w", suffix=suffix, delete=False, encoding="utf-8") as f:
            f.write(editor_widget.text)
            path = f.name
        try:
            with self.suspend():
                subprocess.call([*shlex.split(editor), path])
            editor_widget.load_text(Path(path).read_text(encoding="utf-8"))
        except Exception as exc:  # noqa: BLE001 - headless or no editor
            self.notify(f"could not open $EDITOR: {_one_line(exc)}", severity="error")
        finally:
            try:
                os.unlink(path)
            except OSError:
                pass

    def on_code_editor_done(self, _msg) -> None:
        self.edit_finished()

    def on_console_pane_input_answered(self, msg: ConsolePane.InputAnswered) -> None:
        interp = self.interp
        if interp is None:
            return
        # the runtime echoes the answer (or a bare newline for a password) into the output
        threading.Thread(target=_safe_call, args=(interp.computer.send_input, msg.text),
                         name="oitui-send-input", daemon=True).start()
        self.prompt.focus()

    # ------------------------------------------------------------------ commands

    async def run_command(self, name: str, arg: str = "") -> None:
        """Run slash command ``name`` with argument text ``arg`` (see :mod:`oitui.tui.commands`)."""
        if name == "unknown":
            self.notify(f"unknown command {arg}: /help lists them", severity="warning")
            return
        if name == "shell":
            self.run_shell(arg)
            return
        handler = getattr(self, "cmd_" + name.replace("-", "_"), None)
        if handler is None:
            self.notify(f"/{name} is not available yet", severity="warning")
            return
        try:
            result = handler(arg)
            if hasattr(result, "__await__"):
                await result
        except Exception as exc:  # noqa: BLE001 - a command never kills the app
            self._note(f"/{name} failed: {_one_line(exc)}", "error")

    def _note(self, text: str, kind: str = "note") -> None:
        self.call_later(self.conversation.add, Note(text, kind))

    def _need_core(self) -> bool:
        if self.interp is None:
            self.notify("the core is still loading", severity="warning")
            return False
        return True

    def _need_idle(self) -> bool:
        if self.busy:
            self.notify("wait for the turn to end (or press esc)", severity="warning")
            return False
        return True

    def cmd_help(self, _arg: str) -> None:
        lines = ["Commands:"] + [f"  {c.usage:<24} {c.help}" for c in slash.COMMANDS] + [
            "  !cmd / %% cmd            run a shell command without the model",
            "Keys: enter send · shift+enter/ctrl+j newline · up/down history · esc stop · ctrl+c copy/stop",
            "      ctrl+s sessions · ctrl+p command palette · ctrl+q quit (saves first)",
            "Approval: y run · n decline (+ reason) · e edit (esc done, ctrl+g $EDITOR) · a always · esc stop",
            "Open Interpreter aliases: %reset %undo %save_message %load_message %tokens %info %help",
        ]
        self._note("\n".join(lines))

    async def cmd_model(self, arg: str) -> None:
        if not self._need_core():
            return
        if arg:
            self._set_model(arg)
            return
        current = str(getattr(self.interp.llm, "model", "") or "")
        choices: list[str] = []
        for m in [current, (self._settings or {}).get("model") if self._settings is not None else None]:
            if m and m not in choices:
                choices.append(m)
        try:
            from oitui.core.model_choice import default_models

            for m in default_models(self._settings).values():
                if m not in choices:
                    choices.append(m)
        except Exception:  # noqa: BLE001
            pass
        for m in ["gpt-4o-mini", "gpt-4o", "claude-sonnet-4-5", "deepseek/deepseek-chat", "local/smollm2"]:
            if m not in choices:
                choices.append(m)
        litellm = sys.modules.get("litellm")  # already loaded in the background: never import here
        by_provider = getattr(litellm, "models_by_provider", None) or {}
        for env_name, provider in (("OPENAI_API_KEY", "openai"), ("ANTHROPIC_API_KEY", "anthropic"),
                                   ("DEEPSEEK_API_KEY", "deepseek"), ("GEMINI_API_KEY", "gemini")):
            if os.environ.get(env_name):
                for m in sorted(by_provider.get(provider, []))[:15]:
                    if m not in choices:
                        choices.append(m)

        def picked(value: str | None) -> None:
            if value:
                self._set_model(value)

        self.push_screen(ChoiceScreen("Model (or type /model NAME)", [(m, m) for m in choices], current), picked)

    def _set_model(self, model: str) -> None:
        self.interp.llm.model = model
        self.sidebar.model = model
        self.sidebar.model_reason = "chosen with /model"
        if self.session is not None and hasattr(self.session, "update_meta"):
            _safe_call(self.session.update_meta, model=model)
        self.notify(f"model: {model}")

    def cmd_harness(self, arg: str) -> None:
        if arg and arg != "native":
            self.notify(f"harness {arg!r} is not available yet (native only)", severity="warning")
            return

        def picked(value: str | None) -> None:
            if value and value != "native":
                self.notify("not available yet", severity="warning")

        if not arg:
            self.push_screen(ChoiceScreen("Harness", [("native", "native (the only one for now)")], "native"), picked)

    def cmd_auto_run(self, arg: str) -> None:
        if not self._need_core():
            return
        value = arg.strip().lower()
        new = (not self.interp.auto_run) if value in ("", "toggle") else value in ("on", "true", "1", "yes")
        self.interp.auto_run = new
        self.sidebar.auto_run = new
        self.notify(f"auto-run {'on: code runs without asking' if new else 'off: code waits for approval'}")

    async def cmd_reset(self, _arg: str) -> None:
        if not (self._need_core() and self._need_idle()):
            return
        _safe_call(self.interp.reset)
        self.interp.messages = []
        if self.store is not None:
            try:
                self.session = self.store.create(model=self.interp.llm.model, harness="native", cwd=os.getcwd())
                self.interp.session = self.session
            except Exception:  # noqa: BLE001
                pass
        await self.conversation.remove_children()
        self._clear_panes()
        self.sidebar.session_title = "new session"
        self._refresh_sidebar()
        self._note("conversation reset: a new session started")

    async def cmd_undo(self, _arg: str) -> None:
        if not (self._need_core() and self._need_idle()):
            return
        msgs = list(self.interp.messages)
        idx = max((i for i, m in enumerate(msgs) if m.get("role") == "user" and m.get("type") == "message"),
                  default=None)
        if idx is None:
            self.notify("nothing to undo")
            return
        removed = msgs[idx]
        self.interp.messages = msgs[:idx]
        rewrite = getattr(self.session, "replace_messages", None)
        if callable(rewrite):
            _safe_call(rewrite, self.interp.messages)
        await self._rebuild_conversation()
        self.prompt.load_text(str(removed.get("content", "")))
        self.prompt.move_cursor(self.prompt.document.end)
        self.notify("last turn removed (its text is back in the input)")

    def cmd_save(self, arg: str) -> None:
        if not self._need_core():
            return
        path = Path(os.path.expanduser(arg or f"oitui-{getattr(self.session, 'id', 'conversation')}.json"))
        data = {"lmc_version": 1, "messages": [_storable(m) for m in self.interp.messages]}
        path.write_text(json.dumps(data, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
        self._note(f"saved {len(data['messages'])} messages to {path.resolve()}")

    async def cmd_load(self, arg: str) -> None:
        if not (self._need_core() and self._need_idle()):
            return
        if not arg:
            self.notify("usage: /load PATH (our JSON or Open Interpreter's message list)", severity="warning")
            return
        path = Path(os.path.expanduser(arg))
        data = json.loads(path.read_text(encoding="utf-8"))
        messages = data.get("messages") if isinstance(data, dict) else data
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise ValueError(f"{path} is not a list of messages")
        self.interp.messages = [dict(m) for m in messages]
        replace = getattr(self.session, "replace_messages", None)
        if callable(replace):
            _safe_call(replace, self.interp.messages)
        await self._rebuild_conversation()
        self._note(f"loaded {len(messages)} messages from {path}")

    async def cmd_sessions(self, _arg: str) -> None:
        if self.store is None:
            self.notify("sessions are still loading", severity="warning")
            return
        try:
            from oitui.tui.sessions_screen import SessionBrowser
        except ImportError:
            self.notify("the session browser is not available yet", severity="warning")
            return
        if any(isinstance(screen, SessionBrowser) for screen in self.screen_stack):
            return  # ctrl+s (or /sessions) inside the browser: it is already open

        async def resume(session_id: str | None) -> None:
            if not session_id:
                return
            if self.busy:
                self.notify("wait for the turn to end before switching sessions", severity="warning")
                return
            session = self.store.open(session_id)
            self.session = session
            self.interp.session = session
            self.interp.messages = list(session.messages)
            _restore_metrics(self.interp, getattr(session, "meta", None) or {})
            await self._rebuild_conversation()
            self._refresh_sidebar()
            self.notify(f"resumed session {session.id}")

        self.push_screen(SessionBrowser(self.store), resume)

    def cmd_export(self, arg: str) -> None:
        fmt = (arg or "md").strip().lower()
        if fmt not in ("md", "ipynb", "json"):
            self.notify("usage: /export md|ipynb|json", severity="warning")
            return
        if self.store is None or self.session is None:
            self.notify("no saved session to export yet", severity="warning")
            return
        text = self.store.export(self.session.id, fmt)
        path = Path.cwd() / f"oitui-{self.session.id}.{fmt}"
        path.write_text(text, encoding="utf-8")
        self._note(f"exported to {path}")

    def cmd_tokens(self, _arg: str) -> None:
        if not self._need_core():
            return
        metrics = getattr(self.interp, "metrics", None) or {}
        chars = sum(len(json.dumps(m.get("content"), ensure_ascii=False)) for m in self.interp.messages)
        est = chars // 4
        cost = metrics.get("cost")
        lines = [f"context now: about {est:,} tokens ({len(self.interp.messages)} messages)",
                 f"used: {metrics.get('prompt_tokens', 0):,} in / {metrics.get('completion_tokens', 0):,} out, "
                 f"cost {'unknown' if cost is None else f'${cost:.4f}'}"]
        try:
            import litellm

            pin, _ = litellm.cost_per_token(model=self.interp.llm.model, prompt_tokens=est, completion_tokens=0)
            lines.append(f"next request: about ${pin:.4f} for its prompt")
        except Exception:  # noqa: BLE001 - unpriced model
            lines.append("next request: cost unknown for this model")
        self._note("\n".join(lines))

    def cmd_theme(self, arg: str) -> None:
        if not arg:
            self.action_change_theme()
            return
        if arg not in self.available_themes:
            self.notify(f"unknown theme {arg!r}; try: {', '.join(sorted(self.available_themes)[:12])}…",
                        severity="warning")
            return
        self.theme = arg
        if not self.persist_theme:
            self._persist("theme", arg)

    def watch_theme(self, theme: str) -> None:
        if self.persist_theme and self.is_running:
            wanted = self._settings.get("theme") if self._settings is not None else None
            if theme != wanted:
                self._persist("theme", theme)  # the choice (also from the palette) persists
        try:
            for block in self.query(CodeBlock):
                block._render_code()
            if self._panes_mounted:
                self.code_pane.apply_theme()
        except Exception:  # noqa: BLE001
            pass

    def _persist(self, key: str, value: Any) -> None:
        try:
            from oitui.core.settings import save_setting

            save_setting(key, value)
        except Exception:  # noqa: BLE001 - not saved; still applied
            pass

    def cmd_copy(self, _arg: str) -> None:
        text = None
        children = list(self.conversation.children)
        for i in range(len(children) - 1, -1, -1):
            child = children[i]
            if getattr(child, "is_reply", False) and child.text.strip():
                parts = [child.text]
                while getattr(children[i], "continuation", False) and i > 0 and getattr(children[i - 1], "is_reply", False):
                    i -= 1
                    parts.insert(0, children[i].text)
                text = "".join(parts)
                break
            if isinstance(child, CodeBlock) and child.output.strip():
                text = child.output
                break
        if not text:
            self.notify("nothing to copy yet")
            return
        self._copy(text)

    def cmd_info(self, _arg: str) -> None:
        import textual

        from oitui import __version__

        lines = [f"oitui {__version__} · textual {textual.__version__}"]
        if self.interp is not None:
            lines.append(f"model: {self.interp.llm.model} ({self.sidebar.model_reason})")
            lines.append(f"auto-run: {'on' if self.interp.auto_run else 'off'} · messages: {len(self.interp.messages)}")
        if self.session is not None:
            lines.append(f"session: {self.session.id} · {getattr(self.session, 'path', '')}")
        lines.append(f"cwd: {os.getcwd()}")
        try:
            from oitui.core.settings import paths

            lines.append(f"home: {paths().home}")
        except Exception:  # noqa: BLE001
            pass
        self._note("\n".join(lines))

    async def cmd_clear(self, _arg: str) -> None:
        await self.conversation.remove_children()
        self._clear_panes()

    def cmd_quit(self, _arg: str) -> None:
        self.action_quit_app()

    def _clear_panes(self) -> None:
        self._cur_block = None
        if not self._panes_mounted:
            return
        self.console_pane.clear()
        self.console_pane.display = False
        self.code_pane.display = False
        self._cur_block = None

    async def _rebuild_conversation(self) -> None:
        """Redraw the conversation from ``interp.messages`` (after /undo, /load, resume)."""
        await self._finish_streams()
        conv = self.conversation
        await conv.remove_children()
        self._clear_panes()
        items: list = []
        block = None
        blocks: list = []
        stored: dict[int, str] = {}  # id(block) -> its stored output text
        for m in (self.interp.messages if self.interp is not None else [])[-conv.MAX_ITEMS:]:
            role, mtype = m.get("role"), m.get("type")
            content = m.get("content")
            if role == "user" and mtype == "message":
                items.append(UserMessage(str(content)))
            elif role == "assistant" and mtype == "message":
                items.append(AssistantMarkdown(str(content)))
            elif role == "assistant" and mtype == "code":
                block = CodeBlock(m.get("format") or "code", str(content))
                block.state = "done"
                items.append(block)
                blocks.append(block)
            elif role == "computer" and mtype == "console" and m.get("format") == "output" and block is not None:
                stored[id(block)] = stored.get(id(block), "") + str(content)
            elif mtype == "error":
                items.append(Note(str(content), "error"))
        for b in blocks:
            b.state = stored_block_state(stored.get(id(b), ""))
        if items:
            await conv.mount_all(items)
        for b in blocks:
            if stored.get(id(b)):
                b.append_output(stored[id(b)])
        conv.scroll_end(animate=False)

    # ------------------------------------------------------------------ shell

    def run_shell(self, command: str) -> None:
        """``!cmd`` / ``%% cmd``: run ``command`` in the shell runtime without the model."""
        if not command:
            self.notify("usage: !command", severity="warning")
            return
        if not (self._need_core() and self._need_idle()):
            return
        self.busy = True
        self._stop_event.clear()
        self.set_status("running")
        self.call_later(self._start_shell, command)

    async def _start_shell(self, command: str) -> None:
        await self._ensure_panes()
        self._cur_block = await self.conversation.add(CodeBlock("shell", command))
        self._cur_block.set_state("running")
        self.code_pane.begin("shell")
        self.code_pane.set_code(command)
        self.code_pane.state = "running"
        self.console_pane.clear()
        self.console_pane.display = True
        self._shell_worker(command)

    @work(thread=True, exclusive=True, exit_on_error=False, group="turn")
    def _shell_worker(self, command: str) -> None:
        error = None
        try:
            for chunk in self.interp.computer.run("shell", command, stream=True):
                if self._stop_event.is_set():
                    break
                self._emit(chunk)
            self._emit({"role": "computer", "type": "console", "format": "output", "content": "", "end": True})
        except Exception as exc:  # noqa: BLE001
            error = _one_line(exc)
        self.post_message(TurnFinished(error, interrupted=self._stop_event.is_set()))


_DECLINED_PREFIX = "I have declined to run this code."
_NOT_RUN_PREFIXES = ("Not run", "Stopped: the same", "The reply was cut off at the token limit")
_FAILED_RE = re.compile(r"Traceback \(most recent call last\)|^\w*(Error|Exception)\b.*:", re.M)


def stored_block_state(output: str) -> str:
    """The final state word of a reloaded code block from its stored output text ``output``:
    "declined" (the core's decline note), "not run" (a retry-limit / turn-ended note),
    "interrupted" (a KeyboardInterrupt), "failed" (a traceback or ``XError: ...`` line), else
    "done"."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", output or "").strip()
    if text.startswith(_DECLINED_PREFIX):
        return "declined"
    if text.startswith(_NOT_RUN_PREFIXES):
        return "not run"
    if "KeyboardInterrupt" in text[-3000:]:
        return "interrupted"
    if _FAILED_RE.search(text[-3000:]):
        return "failed"
    return "done"


def _restore_metrics(interp: Any, meta: dict) -> None:
    """Carry a resumed session's totals into ``interp.metrics`` (the same rule as the CLI's
    ``-p`` path): ``prompt_tokens``/``completion_tokens`` (ints) and ``cost`` (USD float, None
    when unknown or 0) from the session's ``meta`` dict; a damaged header leaves the metrics as
    they were. Never raises."""
    metrics = getattr(interp, "metrics", None)
    if not isinstance(metrics, dict) or not isinstance(meta, dict):
        return
    try:
        prompt = int(meta.get("prompt_tokens") or 0)
        completion = int(meta.get("completion_tokens") or 0)
        cost = meta.get("cost")
        cost = float(cost) if isinstance(cost, (int, float)) and cost > 0 else None
    except (TypeError, ValueError):  # a damaged header: keep counting from what we have
        return
    metrics["prompt_tokens"] = prompt
    metrics["completion_tokens"] = completion
    metrics["cost"] = cost


def _storable(message: dict) -> dict:
    return {k: v for k, v in message.items() if k not in ("start", "end")}


def _coalesce(chunks: list[dict]) -> list[dict]:
    """Merge runs of flag-less text chunks of the same role/type/format into one (fewer redraws)."""
    out: list[dict] = []
    for chunk in chunks:
        prev = out[-1] if out else None
        if (
            prev is not None
            and isinstance(chunk.get("content"), str)
            and isinstance(prev.get("content"), str)
            and not chunk.get("start")
            and not prev.get("end")
            and chunk.get("format") not in ("active_line", "input_request")
            and (prev.get("role"), prev.get("type"), prev.get("format"))
            == (chunk.get("role"), chunk.get("type"), chunk.get("format"))
            and chunk.get("type") in ("message", "code", "reasoning", "console")
        ):
            merged = dict(prev)
            merged["content"] = prev["content"] + chunk["content"]
            if chunk.get("end"):
                merged["end"] = True
            out[-1] = merged
        else:
            out.append(chunk)
    return out


def _safe_call(fn, *args, **kwargs) -> Any:
    try:
        return fn(*args, **kwargs)
    except Exception:  # noqa: BLE001
        return None


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


def run_app(settings: Any = None, resume: str | None = None) -> int:
    """Run the full-screen app until the person quits; returns the process exit code.

    settings: an ``oitui.core.settings.Settings`` or None (loaded in the background; a bad config
    starts on defaults and shows the error). resume: a session id/prefix or "last".
    Returns Textual's ``return_code`` (0 after ctrl+q, 128+n after a handled signal, non-zero
    after a crash).
    """
    try:
        from oitui.tui.terminal import save_tty_state

        save_tty_state()
    except Exception:  # noqa: BLE001
        pass
    app = OituiApp(settings=settings, resume=resume)
    app.persist_theme = True
    try:
        app.run()
    finally:
        interp = app.interp
        if interp is not None and app._owns_interp:
            computer = getattr(interp, "computer", None)
            if computer is not None and hasattr(computer, "terminate"):
                _safe_call(computer.terminate)
    code = app.return_code
    if code is None:
        code = 0
    return int(code)
