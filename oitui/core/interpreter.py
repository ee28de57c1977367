"""``OpenInterpreter``: the engine every front end drives (TUI, headless CLI, ACP, Python).

Usage::

    from oitui import OpenInterpreter
    interp = OpenInterpreter()
    interp.llm.model = "openai/gpt-4o-mini"; interp.auto_run = True
    for chunk in interp.chat("print 1+1 with python", stream=True, display=False):
        ...
    interp.messages   # stored LMC messages (DESIGN.md, "LMC messages")

Settings keep Open Interpreter's names and defaults (see :class:`OpenInterpreter`).
"""

from __future__ import annotations

import logging
import os
import platform
import re
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from oitui.core.approval import Approval, ApprovalRequest
from oitui.core.errors import LimitReached, ModelError, NotAvailableYet
from oitui.core.llm import Llm, provider_of

log = logging.getLogger("oitui.interpreter")

#: Open Interpreter's loop message, verbatim in meaning.
DEFAULT_LOOP_MESSAGE = (
    "Proceed. You CAN run code on my machine. If the entire task I asked for is done, say exactly "
    "'The task is done.' If you need some specific information (like username or password) say "
    "EXACTLY 'Please provide more information.' If it's impossible, say 'The task is impossible.' "
    "(If I haven't provided a task, say exactly 'Let me know what you'd like to do next.') "
    "Otherwise keep going."
)

#: Open Interpreter's four loop breakers.
DEFAULT_LOOP_BREAKERS = [
    "The task is done.",
    "The task is impossible.",
    "Let me know what you'd like to do next.",
    "Please provide more information.",
]

DEFAULT_SYSTEM_MESSAGE = """You are Open Interpreter, a world-class programmer that can complete any goal by executing code.
First, write a plan. **Always recap the plan between each code block** (you have extreme short-term memory loss, so you need to recap the plan between each message block to retain it).
When you execute code, it will be executed **on the user's machine**. The user has given you **full and complete permission** to execute any code necessary to complete the task. Execute the code.
You can access the internet. Run **any code** to achieve the goal, and if at first you don't succeed, try again and again.
You can install new packages.
When a user refers to a filename, they're likely referring to an existing file in the directory you're currently executing code in.
Write messages to the user in Markdown.
In general, try to **make plans** with as few steps as possible. As for actually executing code to carry out that plan, for *stateful* languages (like python, javascript, shell, but NOT for html which starts from 0 every time) **it's critical not to try to do everything in one code block.** You should try something, print information about it, then continue from there in tiny, informed steps. You will never get it on the first try, and attempting it in one go will often lead to errors you cant see.
You are capable of **any** task."""

_PATH_TOKEN = re.compile(r""""([^"]+)"|'([^']+)'|((?:\\ |\S)+)""")
_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg")


def default_approval_handler(interp: "OpenInterpreter") -> Callable[[ApprovalRequest], Approval]:
    """The API/headless default: run only when ``auto_run`` is on (and the safety scan, if any,
    found nothing), else decline."""

    def handler(request: ApprovalRequest) -> Approval:
        if interp.auto_run and not request.findings:
            return Approval(action="run")
        return Approval(action="decline")

    return handler


class OpenInterpreter:
    """The agent engine.

    Attributes (Open Interpreter's names and defaults):

    - ``llm`` (:class:`~oitui.core.llm.Llm`): model, api_base, api_key, temperature (0),
      context_window, max_tokens, supports_functions (None = ask litellm), supports_vision.
    - ``computer``: the :class:`oitui.computer.Computer` (created lazily on first use).
    - ``messages``: stored LMC messages. ``metrics``: {"prompt_tokens", "completion_tokens",
      "cost"} for this conversation (cost in USD, None while no request could be priced).
    - ``auto_run`` (False), ``max_output`` (2800 chars), ``max_tool_output`` (30000),
      ``offline`` (False), ``loop`` (False), ``loop_message``, ``loop_breakers``,
      ``custom_instructions`` (""), ``system_message``, ``max_budget`` (USD or None),
      ``max_turns`` (50 model requests per user turn), ``max_retries_per_code_block`` (3),
      ``safe_mode`` ("off"), ``harness`` ("native"), ``highlight_active_line`` (True),
      ``python`` (the kernel's interpreter, None = this one), ``cwd``.
    - ``sandbox`` ("auto"), ``sandbox_network`` ("on"), ``add_dir`` ([]): asking for a sandbox
      (``read-only``/``workspace-write``, network off, extra folders) makes :meth:`chat` raise
      ``NotAvailableYet`` until the sandbox lands: code never runs unsandboxed when a sandbox was
      asked for. The same holds for ``safe_mode`` other than "off" without a ``code_scanner``,
      and ``harness`` other than "native".
    - ``output_dir``: where html pages and other files code makes go; None = ``outputs/<session
      id>/`` under the oitui home when ``session`` is set, else the computer's default.
    - ``approval_handler(ApprovalRequest) -> Approval``; ``session`` (a sessions.Session or None).

    Stored messages have the values of known API keys (``llm.api_key`` and every ``*_API_KEY``
    environment variable, 8 characters or longer) replaced by ``[REDACTED]``.
    """

    def __init__(self, **settings: Any) -> None:
        self.llm = Llm()
        self._computer = None
        self.messages: list[dict] = []
        self.metrics: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0, "cost": None}
        self.auto_run = False
        self.max_output = 2800
        self.max_tool_output = 30000
        self.offline = False
        self.loop = False
        self.loop_message = DEFAULT_LOOP_MESSAGE
        self.loop_breakers = list(DEFAULT_LOOP_BREAKERS)
        self.custom_instructions = ""
        self.system_message = DEFAULT_SYSTEM_MESSAGE
        self.max_budget: float | None = None
        self.max_turns: int | None = 50
        self.max_retries_per_code_block: int | None = 3
        self.safe_mode = "off"
        self.harness = "native"
        self.sandbox = "auto"
        self.sandbox_network = "on"
        self.add_dir: list[str] = []
        self._highlight_active_line = True
        self._python: str | None = None
        self._cwd: str | None = None
        self._output_dir: str | None = None
        self.disabled_languages: list[str] = []
        #: the safety layer's seam: ``code_scanner(language, code) -> list of findings`` (None = no scan)
        self.code_scanner: Callable[[str, str], list] | None = None
        self._session = None
        self.model_reason: str | None = None  # why this model was chosen (make_configured_interpreter)
        self.approval_handler: Callable[[ApprovalRequest], Approval] = default_approval_handler(self)
        self._always_languages: set[str] = set()
        self._stop = threading.Event()
        self._executing = False
        self._warmups: list[threading.Thread] = []
        self._lock = threading.RLock()
        self._compacted_upto = 0  # messages[:n] are replaced by self._summary in requests
        self._summary: str | None = None
        self._price_notes: set[str] = set()
        for k, v in settings.items():
            if k.startswith("llm_") or k in ("model", "api_base", "api_key", "temperature", "context_window", "max_tokens"):
                setattr(self.llm, k[4:] if k.startswith("llm_") else k, v)
            else:
                setattr(self, k, v)

    # -- the computer --------------------------------------------------------------------------
    @property
    def computer(self):
        """The Computer that runs code (created on first use with python/cwd/active-line settings)."""
        if self._computer is None:
            from oitui.computer import Computer

            self._computer = Computer(python=self._python, cwd=self._cwd, output_dir=self._effective_output_dir(),
                                      highlight_active_line=self._highlight_active_line)
        return self._computer

    # -- session and output folder -------------------------------------------------------------
    @property
    def session(self):
        """The ``oitui.core.sessions.Session`` every stored message is appended to (or None).
        Setting it also points the computer's output folder at ``outputs/<session id>/``
        (unless ``output_dir`` was set explicitly)."""
        return self._session

    @session.setter
    def session(self, value) -> None:
        self._session = value
        self._sync("output_dir", self._effective_output_dir())

    @property
    def output_dir(self) -> str | None:
        """The folder for html pages and other files code makes (None = automatic: ``outputs/<session
        id>/`` when a session is set, else the computer's default ``outputs/computer``)."""
        return self._output_dir

    @output_dir.setter
    def output_dir(self, value) -> None:
        self._output_dir = os.fspath(value) if value else None
        self._sync("output_dir", self._effective_output_dir())

    def _effective_output_dir(self) -> str | None:
        if self._output_dir:
            return self._output_dir
        session = self._session
        sid = getattr(session, "id", None) if session is not None else None
        if not sid:
            return None
        base = getattr(getattr(session, "_store", None), "outputs_dir", None)
        if base is None:
            try:
                from oitui.core.settings import paths

                base = paths().outputs_dir
            except Exception as e:  # pragma: no cover - a broken home falls back to the default
                log.debug("no outputs folder: %s", e)
                return None
        return os.path.join(os.fspath(base), str(sid))

    # -- features not available yet --------------------------------------------------------------
    def unavailable_reason(self) -> str | None:
        """Why this configuration asks for something that has not landed yet, or None.

        A sandbox explicitly asked for (``sandbox`` "read-only"/"workspace-write",
        ``sandbox_network`` "off", ``add_dir``), ``safe_mode`` other than "off" with no
        ``code_scanner`` plugged in, or a ``harness`` other than "native"."""
        sandbox = str(self.sandbox or "auto")
        if sandbox not in ("auto", "off"):
            return (f"sandbox {sandbox!r}: sandboxing is not available yet "
                    "(code will not run unsandboxed when a sandbox was asked for)")
        if str(self.sandbox_network or "on") == "off":
            return "sandbox_network 'off': sandboxing is not available yet"
        if self.add_dir:
            return "add_dir: sandboxing is not available yet"
        if str(self.safe_mode or "off") != "off" and self.code_scanner is None:
            return f"safe_mode {self.safe_mode!r}: safe mode is not available yet"
        if str(self.harness or "native") != "native":
            return f"harness {self.harness!r}: harnesses other than native are not available yet"
        return None

    @computer.setter
    def computer(self, value) -> None:
        self._computer = value

    def _sync(self, name: str, value) -> None:
        if self._computer is not None and hasattr(self._computer, name):
            try:
                setattr(self._computer, name, value)
            except AttributeError:
                pass

    @property
    def python(self) -> str | None:
        """The Python interpreter the kernel runs (None = this one); applies to kernels started later."""
        return getattr(self._computer, "python", None) if self._computer is not None else self._python

    @python.setter
    def python(self, value: str | None) -> None:
        self._python = value
        self._sync("python", value)

    @property
    def cwd(self) -> str | None:
        """The folder code runs in (None = the current directory); applies to runtimes started later."""
        return getattr(self._computer, "cwd", None) if self._computer is not None else self._cwd

    @cwd.setter
    def cwd(self, value) -> None:
        self._cwd = os.fspath(value) if value else None
        self._sync("cwd", self._cwd)

    @property
    def highlight_active_line(self) -> bool:
        """Whether code reports its active line (``--no-highlight-active-line`` turns it off)."""
        if self._computer is not None:
            return bool(getattr(self._computer, "highlight_active_line", self._highlight_active_line))
        return self._highlight_active_line

    @highlight_active_line.setter
    def highlight_active_line(self, value: bool) -> None:
        self._highlight_active_line = bool(value)
        self._sync("highlight_active_line", bool(value))

    def warm_up(self, language: str = "python") -> threading.Thread:
        """Start ``language``'s runtime in a background thread (e.g. the Python kernel while the
        first model request is in flight). Code runs wait for it. Returns the thread."""

        def work() -> None:
            try:
                for _ in self.computer.run(language, "", stream=True):
                    pass
            except Exception as e:  # the real run reports problems
                log.debug("warm-up of %s failed: %s", language, e)

        t = threading.Thread(target=work, name=f"oitui-warm-{language}", daemon=True)
        self._warmups.append(t)
        t.start()
        return t

    def _wait_warm_up(self) -> None:
        for t in self._warmups:
            t.join()
        self._warmups = []

    # -- prompts -------------------------------------------------------------------------------
    def full_system_message(self, *, function_calling: bool | None = None) -> str:
        """The system message sent to the model: the base message, the machine, how to run code,
        and ``custom_instructions``. With the default system message, a model that needs its own
        prompt (``model_choice.default_system_message_for``: the embedded tiny model) gets that
        prompt plus ``custom_instructions`` instead."""
        if self.system_message == DEFAULT_SYSTEM_MESSAGE:
            # a model that needs its own prompt (the embedded tiny model) gets it, short, as is
            try:
                from oitui.core.model_choice import default_system_message_for

                special = default_system_message_for(self.llm.model)
            except Exception:
                special = None
            if special:
                extra = str(self.custom_instructions or "").strip()
                return special + ("\n\n" + extra if extra else "")
        if function_calling is None:
            function_calling = self.llm.function_calling()
        try:
            langs = ", ".join(self.computer.languages)
        except Exception:
            langs = "python, shell"
        parts = [self.system_message.strip()]
        parts.append(f"[User Info]\nOS: {platform.system()}\nWorking directory: {self.cwd or os.getcwd()}")
        if function_calling:
            parts.append(f"To run code, call the `execute` tool with `language` (one of: {langs}) and `code`.")
        else:
            parts.append(
                "To run code, write it in a markdown code block that starts with the language name, e.g.\n"
                f"```python\nprint('hello')\n```\nAvailable languages: {langs}. It will run on the user's machine "
                "and you will see the output."
            )
        if self.custom_instructions:
            parts.append(str(self.custom_instructions).strip())
        return "\n\n".join(p for p in parts if p)

    def _provider(self) -> str | None:
        return provider_of(self.llm.model)

    def _max_prompt_tokens(self) -> int:
        """Prompt tokens a request may use: the window minus the reply's reserve (scaled down
        after the provider rejected a request as too long)."""
        window = self.llm.window()
        reserve = int(self.llm.max_tokens or min(4096, max(256, window // 4)))
        return max(256, int((window - reserve) * getattr(self, "_window_factor", 1.0)))

    # -- storing -------------------------------------------------------------------------------
    def _store(self, msg: dict) -> None:
        """Store one finished LMC message (and append it to ``session`` when set)."""
        if msg.get("type") in ("confirmation",) or msg.get("format") in ("active_line", "input_request"):
            return
        msg = {k: v for k, v in msg.items() if k not in ("start", "end")}
        secrets = self._secrets()
        if secrets:
            msg = _redact(msg, secrets)
        with self._lock:
            self.messages.append(msg)
            if self.session is not None:
                try:
                    self.session.append(msg)
                except Exception as e:  # a full disk must not kill the turn
                    log.warning("could not save the message to the session: %s", e)

    def _secrets(self) -> list[str]:
        """Known API key values (longest first) to redact from stored messages."""
        found = set()
        if isinstance(self.llm.api_key, str) and len(self.llm.api_key) >= 8:
            found.add(self.llm.api_key)
        for k, v in os.environ.items():
            if v and len(v) >= 8 and (k.upper().endswith("_API_KEY") or k.upper().endswith("_API_TOKEN")):
                found.add(v)
        return sorted(found, key=len, reverse=True)

    def _history_for_model(self) -> list[dict]:
        """Stored messages with the compacted prefix replaced by its summary."""
        if self._summary and 0 < self._compacted_upto <= len(self.messages):
            from oitui.core.context import summary_message

            return [summary_message(self._summary)] + self.messages[self._compacted_upto:]
        return list(self.messages)

    def _count_usage(self, usage: dict | None, request_messages: list[dict]) -> None:
        if usage is None:
            try:
                from oitui.core.respond import estimate_tokens

                usage = {"prompt_tokens": estimate_tokens(request_messages), "completion_tokens": 0}
            except Exception:
                usage = {"prompt_tokens": 0, "completion_tokens": 0}
        pt, ct = int(usage.get("prompt_tokens") or 0), int(usage.get("completion_tokens") or 0)
        self.metrics["prompt_tokens"] += pt
        self.metrics["completion_tokens"] += ct
        cost = self.llm.cost(pt, ct)
        if cost is not None:
            self.metrics["cost"] = (self.metrics.get("cost") or 0.0) + cost

    # -- control -------------------------------------------------------------------------------
    def _stop_requested(self) -> bool:
        return self._stop.is_set()

    def stop(self) -> None:
        """Interrupt the turn in progress (thread-safe): closes the model stream and stops code."""
        self._stop.set()
        try:
            self.llm.close()
        except Exception:
            pass
        if self._executing and self._computer is not None:
            try:
                self._computer.stop()
            except Exception:
                pass

    def reset(self) -> None:
        """Forget the conversation (messages, metrics, "always" approvals); keep settings and runtimes."""
        self.messages = []
        self.metrics = {"prompt_tokens": 0, "completion_tokens": 0, "cost": None}
        self._always_languages = set()
        self._compacted_upto = 0
        self._summary = None
        self._stop.clear()

    def terminate(self) -> None:
        """End every runtime process."""
        if self._computer is not None:
            try:
                self._computer.terminate()
            except Exception:
                pass

    # -- compaction ----------------------------------------------------------------------------
    def _maybe_compact(self) -> None:
        """Compact when the history passes 80% of the prompt budget."""
        if len(self.messages) < 4:
            return
        try:
            from oitui.core import context, lmc
        except ImportError:
            return
        msgs = lmc.to_openai_messages(self._history_for_model(), system_message=self.full_system_message(),
                                      function_calling=self.llm.function_calling(), vision=False,
                                      provider=self._provider())
        if context.needs_compaction(context.estimate_tokens(msgs), self.llm.window(), self.llm.max_tokens):
            self.compact()

    def compact(self) -> str | None:
        """Summarise the older turns with the model into one message used in later requests.

        The stored ``messages`` keep everything; later requests carry the summary in place of
        the older turns. Returns the summary text, or None when there is nothing old enough to
        compact (two turns or fewer). Raises ModelError when the model fails.
        """
        from oitui.core import context, lmc

        history = self._history_for_model()
        old, _recent = context.split_for_compaction(self.messages[self._compacted_upto:])
        if not old:
            return None
        n_old = len(old)
        if self._summary:
            old = [history[0]] + old  # the earlier summary is part of what gets summarised
        req = lmc.to_openai_messages(old, system_message=self.full_system_message(function_calling=False),
                                     function_calling=False, vision=False, provider=self._provider())
        req.append({"role": "user", "content": context.COMPACTION_PROMPT})
        from oitui.core.respond import _merge_consecutive_users

        req = _merge_consecutive_users(req)
        text = []
        usage = None
        for d in self.llm.stream(req, None):
            if d.get("type") == "content":
                text.append(d["text"])
            elif d.get("type") == "usage":
                usage = d
        self._count_usage(usage, req)
        summary = "".join(text).strip()
        if summary:
            self._summary = summary
            self._compacted_upto += n_old
        return summary or None

    # -- chat ----------------------------------------------------------------------------------
    def _user_messages(self, message: Any) -> list[dict]:
        if message is None:
            return []
        if isinstance(message, str):
            msgs = [{"role": "user", "type": "message", "content": message}]
        elif isinstance(message, dict):
            msgs = [dict(message)]
        elif isinstance(message, list):
            msgs = [dict(m) for m in message]
        else:
            raise TypeError(f"chat() takes a str, an LMC dict or a list of them, not {type(message).__name__}")
        out: list[dict] = []
        for m in msgs:
            m.setdefault("role", "user")
            m.setdefault("type", "message")
            out.append(m)
            if m["role"] == "user" and m["type"] == "message" and isinstance(m.get("content"), str):
                for path in self._image_paths(m["content"]):
                    out.append({"role": "user", "type": "image", "format": "path", "content": path})
        return out

    def _image_paths(self, text: str) -> list[str]:
        """Existing PNG/JPEG files named in ``text`` (plain, quoted, or with ``\\ `` escaped
        spaces as terminals paste dropped files; relative to ``cwd``), in order, no repeats."""
        found: list[str] = []
        for m in _PATH_TOKEN.finditer(text or ""):
            token = next(g for g in m.groups() if g is not None)
            token = token.replace("\\ ", " ").rstrip(".,;:!?)]}").lstrip("([{<")
            if token.startswith("file://"):
                token = token[7:]
            if not token.lower().endswith(_IMAGE_SUFFIXES):
                continue
            p = Path(os.path.expanduser(token))
            if not p.is_absolute():
                p = Path(self.cwd or os.getcwd()) / p
            try:
                if p.is_file() and str(p) not in found:
                    found.append(str(p))
            except OSError:
                continue
        return found

    def chat(self, message: Any = None, stream: bool = False, display: bool = True):
        """Send ``message`` (a str, an LMC dict or a list of them) and run the turn.

        ``stream=True`` returns a generator of LMC chunks (start/end flags around each run);
        otherwise runs to the end and returns the new messages stored after the user's.
        ``display=True`` prints the conversation in the terminal (rich; plain when not a TTY).
        Raises ModelError (the model failed for good) or LimitReached (budget, max_turns,
        retries) after leaving ``messages`` consistent; raises NotAvailableYet at once (nothing
        stored, nothing run) when a feature that has not landed was asked for
        (:meth:`unavailable_reason`).
        """
        reason = self.unavailable_reason()
        if reason:
            raise NotAvailableYet(reason)
        if stream:
            return self._chat_stream(message, display)
        for _ in self._chat_stream(message, display):
            pass
        return self._last_new

    def _chat_stream(self, message: Any, display: bool) -> Iterator[dict]:
        from oitui.core.respond import respond

        self._stop.clear()
        self._last_new = []
        for m in self._user_messages(message):
            self._store(m)
        start = len(self.messages)
        disp = None
        if display:
            try:
                from oitui.core.display import TerminalDisplay

                disp = TerminalDisplay()
            except Exception as e:  # pragma: no cover
                log.warning("display unavailable: %s", e)
        try:
            for chunk in respond(self):
                if disp is not None:
                    disp.feed(chunk)
                yield chunk
        finally:
            if disp is not None:
                try:
                    disp.close()
                except Exception:
                    pass
            self._last_new = self.messages[start:]
            self._stop.clear()
            if self.session is not None:
                try:
                    self.session.update_meta(model=self.llm.model, prompt_tokens=self.metrics["prompt_tokens"],
                                             completion_tokens=self.metrics["completion_tokens"],
                                             cost=self.metrics["cost"])
                except Exception as e:
                    log.debug("session meta update failed: %s", e)


REDACTED = "[REDACTED]"


def _redact(obj: Any, secrets: list[str]) -> Any:
    """A copy of ``obj`` (str / dict / list, nested) with each secret value replaced by ``[REDACTED]``."""
    if isinstance(obj, str):
        for v in secrets:
            if v in obj:
                obj = obj.replace(v, REDACTED)
        return obj
    if isinstance(obj, dict):
        return {k: _redact(v, secrets) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_redact(v, secrets) for v in obj]
    return obj


def make_configured_interpreter(profile: str | None = None, overrides: dict | None = None,
                                environ: dict | None = None) -> OpenInterpreter:
    """An OpenInterpreter with config.toml, the profile, the environment and ``overrides`` applied
    (precedence: defaults < config.toml < profile < environment < overrides); when no model is
    configured, ``model_choice.choose_model`` picks one. Raises ConfigError for a bad config."""
    from oitui.core.settings import load_settings

    settings = load_settings(profile=profile, overrides=overrides, environ=environ)
    interp = OpenInterpreter()
    settings.apply(interp)
    try:
        from oitui.core.model_choice import choose_model

        model, reason = choose_model(settings, environ if environ is not None else os.environ)
        if model:
            interp.llm.model = model
        interp.model_reason = reason
    except Exception as e:  # pragma: no cover
        log.warning("model choice failed: %s", e)
    return interp


__all__ = ["OpenInterpreter", "make_configured_interpreter", "DEFAULT_LOOP_MESSAGE", "DEFAULT_LOOP_BREAKERS",
           "DEFAULT_SYSTEM_MESSAGE", "LimitReached", "ModelError"]
