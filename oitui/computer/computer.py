"""`Computer`: runs code blocks in stateful language runtimes.

See docs/architecture.md ("Computer") for the contract. Runtimes start lazily on first use and
live until :meth:`Computer.terminate`.
"""

from __future__ import annotations

import atexit
import os
import platform
import shutil
import threading
import weakref
from collections.abc import Iterator

from .base import active_line_chunk, output_chunk
from .languages import LANGUAGES, normalize_language

__all__ = ["Computer"]

_LIVE: "weakref.WeakSet[Computer]" = weakref.WeakSet()


@atexit.register
def _terminate_all() -> None:
    for computer in list(_LIVE):
        try:
            computer.terminate()
        except Exception:
            pass


def _default_output_dir() -> str:
    home = os.environ.get("OITUI_HOME")
    if home:
        base = os.path.join(home, "outputs")
    else:
        import platformdirs

        base = os.path.join(platformdirs.user_data_dir("oitui", appauthor=False), "outputs")
    return os.path.join(base, "computer")


class Computer:
    """Runs code in persistent runtimes, streaming LMC chunks.

    Args:
        python: interpreter the Python kernel runs (default ``sys.executable``).
        cwd: working directory runtimes start in (default: the current directory).
        output_dir: folder for files the runtimes write (html pages); default
            ``<OITUI_HOME or the platform data dir>/outputs/computer``.
        highlight_active_line: report which line runs (``active_line`` chunks).
        timeout: per-block limit in seconds; 0 means none.

    Attributes ``interactive`` (True in the TUI: input prompts are surfaced as
    ``input_request`` chunks and answered with :meth:`send_input`), ``highlight_active_line``,
    ``timeout`` and ``python`` may be changed between blocks.
    """

    def __init__(
        self,
        python: str | None = None,
        cwd: str | None = None,
        output_dir: str | None = None,
        highlight_active_line: bool = True,
        timeout: float = 0,
    ) -> None:
        self.python = python
        self.cwd = os.fspath(cwd) if cwd else None
        self.output_dir = os.fspath(output_dir) if output_dir else None
        self.highlight_active_line = highlight_active_line
        self.timeout = timeout
        self.interactive = False
        self._runtimes: dict = {}
        self._lock = threading.Lock()
        self._current = None
        _LIVE.add(self)

    # -- availability ------------------------------------------------------------------
    def available(self, language: str) -> tuple[bool, str]:
        """(True, "") when ``language`` can run here, else (False, a short reason)."""
        lang = normalize_language(language)
        if lang is None:
            return False, f"{language!r} is not a language oitui can run"
        if lang in ("python", "html"):
            return True, ""
        if lang == "shell":
            return (True, "") if shutil.which("bash") else (False, "bash is not installed")
        if lang == "javascript":
            return (True, "") if shutil.which("node") else (False, "Node.js is not installed")
        if lang == "r":
            return (True, "") if shutil.which("R") else (False, "R is not installed")
        if lang == "powershell":
            return (True, "") if shutil.which("pwsh") else (False, "PowerShell (pwsh) is not installed")
        if lang == "applescript":
            if platform.system() != "Darwin":
                return False, "AppleScript needs macOS"
            return (True, "") if shutil.which("osascript") else (False, "osascript is not installed")
        return False, "unknown language"

    @property
    def languages(self) -> list[str]:
        """Canonical names of the languages that can run on this machine."""
        return [lang for lang in LANGUAGES if self.available(lang)[0]]

    # -- running -----------------------------------------------------------------------
    def _runtime(self, lang: str):
        with self._lock:
            rt = self._runtimes.get(lang)
            if rt is None:
                if lang == "python":
                    from .python_kernel import PythonRuntime as cls
                elif lang == "shell":
                    from .shell import ShellRuntime as cls
                elif lang == "javascript":
                    from .node import NodeRuntime as cls
                elif lang == "html":
                    from .others import HtmlRuntime as cls
                elif lang == "applescript":
                    from .others import AppleScriptRuntime as cls
                elif lang == "r":
                    from .others import RRuntime as cls
                elif lang == "powershell":
                    from .others import PowerShellRuntime as cls
                else:  # pragma: no cover - guarded by available()
                    raise ValueError(lang)
                rt = cls(self)
                self._runtimes[lang] = rt
            return rt

    def run(self, language: str, code: str, stream: bool = False):
        """Run ``code`` in ``language``'s runtime.

        ``stream=True``: a generator of chunks (see docs/architecture.md), ending with an
        ``active_line: None`` chunk when line tracking is on. ``stream=False``: a list of LMC
        messages: one console/output message holding the terminal text of everything printed
        (not truncated; omitted when nothing was printed) and one message per image.
        An unknown or unavailable language gives one output chunk/message saying so; nothing
        raises for bad code. Raises TypeError when ``code`` is not a str.
        """
        if not isinstance(code, str):
            raise TypeError(f"code must be a str, got {type(code).__name__}")
        gen = self._stream(language, code)
        if stream:
            return gen
        return self._collect(gen)

    @staticmethod
    def _collect(gen) -> list[dict]:
        from .output import terminal_text

        parts: list[str] = []
        images: list[dict] = []
        for chunk in gen:
            if chunk.get("type") == "console" and chunk.get("format") == "output":
                parts.append(chunk["content"])
            elif chunk.get("type") == "image":
                images.append(dict(chunk))
        messages = []
        text = terminal_text("".join(parts))
        if text:
            messages.append(output_chunk(text))
        return messages + images

    def _stream(self, language: str, code: str) -> Iterator[dict]:
        lang = normalize_language(language)
        ok, why = self.available(language)
        if not ok:
            shown = lang or (language or "").strip() or "(no language)"
            yield output_chunk(
                f"`{shown}` is not available on this machine ({why}); "
                f"available: {', '.join(self.languages)}"
            )
            return
        rt = self._runtime(lang)
        self._current = rt
        track = bool(self.highlight_active_line)
        try:
            yield from rt.run(code, timeout=float(self.timeout or 0))
        finally:
            self._current = None
        if track:
            yield active_line_chunk(None)

    def stop(self) -> None:
        """Interrupt the running block (thread-safe; it ends within about 2 s)."""
        rt = self._current
        if rt is not None:
            rt.stop()

    def send_input(self, text: str) -> None:
        """Answer the pending ``input_request`` with one line of ``text`` (TUI)."""
        rt = self._current
        if rt is not None:
            rt.send_input(text)

    def terminate(self) -> None:
        """End every runtime; the next block starts fresh ones."""
        with self._lock:
            runtimes, self._runtimes = list(self._runtimes.values()), {}
        for rt in runtimes:
            try:
                rt.terminate()
            except Exception:
                pass

    def __del__(self):  # pragma: no cover - best effort
        try:
            self.terminate()
        except Exception:
            pass
