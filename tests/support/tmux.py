"""Run the real oitui app in a private tmux server and look at it as a terminal would.

Each :class:`TmuxPane` gets its own tmux server (``tmux -L <unique socket> -f <conf>``) with
``escape-time 10``, ``set-clipboard on`` and ``remain-on-exit on``. The pane runs a small shell
wrapper that records ``stty -a`` before and after the app, writes the app's pid (the app is
``exec``'d from a subshell, so the pid is the app's own) and prints ``EXIT=<status>`` when it ends,
then keeps the pane alive with ``cat -v`` so modes left on (bracketed paste, query replies) show.
stderr is never redirected (Textual draws on it).

Typical use::

    with TmuxPane(oitui_argv("--api-base", server.url, "--model", "openai/x"), env={"OITUI_HOME": home}) as t:
        t.wait_for("idle")
        t.send_text("hello"); t.send_keys("Enter")
        t.send_keys("C-q"); assert t.wait_exit() == 0
        assert t.mode_check() == []
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import signal
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterable

__all__ = [
    "TmuxPane",
    "tmux_available",
    "oitui_argv",
    "OITUI_BIN",
    "MODE_FLAGS",
    "LEAK_PATTERN",
]

#: The installed console script of the project's virtualenv.
OITUI_BIN = str(Path(__file__).resolve().parents[2] / ".venv" / "bin" / "oitui")

#: tmux pane flags read by :meth:`TmuxPane.mode_flags`, and their value in a clean terminal.
MODE_FLAGS = {
    "alternate_on": "0",
    "mouse_any_flag": "0",
    "mouse_all_flag": "0",
    "mouse_button_flag": "0",
    "mouse_standard_flag": "0",
    "mouse_sgr_flag": "0",
    "mouse_utf8_flag": "0",
    "cursor_flag": "1",
    "wrap_flag": "1",
    "keypad_flag": "0",
    "keypad_cursor_flag": "0",
    "insert_flag": "0",
    "origin_flag": "0",
}

#: Text that must not appear after the app exits (leaked terminal query replies, mouse reports).
LEAK_PATTERN = re.compile(r"\^\[\[|\$y|;rgb:|\[<\d+;\d+;\d+[mM]")

_STTY_SIZE = re.compile(r"\b(rows|columns) \d+;")

_TMUX_CONF = """\
set -g escape-time 10
set -g set-clipboard on
set -g remain-on-exit on
set -g history-limit 10000
set -g default-terminal "{term}"
set -g status off
"""


def tmux_available() -> bool:
    """True when a ``tmux`` binary is on PATH."""
    return shutil.which("tmux") is not None


def oitui_argv(*args: str) -> list[str]:
    """``[OITUI_BIN, *args]`` (the project's own ``oitui`` console script)."""
    return [OITUI_BIN, *args]


class TmuxError(RuntimeError):
    """A tmux command failed, or a wait timed out (the message holds the last screen)."""


class TmuxPane:
    """One app running in one private tmux server.

    ``argv``: the program and its arguments. ``env``: variables exported in the pane (on top of
    the test process's environment). ``width``/``height``: the window size in cells. ``cwd``: the
    working directory (default a temporary folder). ``stty``: extra ``stty`` settings applied
    before the app starts (e.g. ``"ixon"``). Use as a context manager or call :meth:`start` and
    :meth:`close`.
    """

    def __init__(
        self,
        argv: list[str],
        *,
        env: dict[str, str] | None = None,
        width: int = 100,
        height: int = 30,
        cwd: str | os.PathLike | None = None,
        stty: str | None = None,
        term: str = "tmux-256color",
    ) -> None:
        self.argv = list(argv)
        self.env = dict(env or {})
        self.width = width
        self.height = height
        self.dir = Path(tempfile.mkdtemp(prefix="oitui-tmux-"))
        self.cwd = Path(cwd) if cwd is not None else self.dir
        self.stty = stty
        self.term = term if _has_terminfo(term) else "screen"
        self.socket = f"oitui-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        self.target = "main:0.0"
        self.pid_file = self.dir / "app.pid"
        self.exit_file = self.dir / "exit.code"
        self.stty_before_file = self.dir / "stty.before"
        self.stty_after_file = self.dir / "stty.after"
        self.started = False

    # ------------------------------------------------------------------ lifecycle

    def _wrapper(self) -> str:
        lines = ["#!/bin/sh"]
        for key, value in self.env.items():
            lines.append(f"export {key}={shlex.quote(str(value))}")
        lines.append(f"cd {shlex.quote(str(self.cwd))}")
        if self.stty:
            lines.append(f"stty {self.stty}")
        lines.append(f"stty -a > {shlex.quote(str(self.stty_before_file))}")
        app = " ".join(shlex.quote(a) for a in self.argv)
        # the subshell writes its own pid, then becomes the app: that pid is the app's
        lines.append(f"sh -c 'echo $$ > {shlex.quote(str(self.pid_file))}; exec \"$@\"' oitui-app {app}")
        lines.append("code=$?")
        lines.append(f"stty -a > {shlex.quote(str(self.stty_after_file))}")
        lines.append(f"echo $code > {shlex.quote(str(self.exit_file))}")
        lines.append('echo "EXIT=$code"')
        lines.append("exec cat -v")
        return "\n".join(lines) + "\n"

    def _base(self) -> list[str]:
        return ["tmux", "-L", self.socket, "-f", str(self.dir / "tmux.conf")]

    def tmux(self, *args: str, check: bool = True, input: bytes | None = None) -> str:
        """Run one tmux command on this pane's server; returns its stdout (text).

        Raises TmuxError when ``check`` and tmux exits non-zero.
        """
        env = {k: v for k, v in os.environ.items() if k not in ("TMUX", "TMUX_PANE")}
        proc = subprocess.run([*self._base(), *args], input=input, capture_output=True, timeout=20, env=env)
        if check and proc.returncode != 0:
            raise TmuxError(f"tmux {' '.join(args)} failed: {proc.stderr.decode(errors='replace').strip()}")
        return proc.stdout.decode("utf-8", errors="replace")

    def start(self) -> "TmuxPane":
        """Start the tmux server and the wrapper running the app (returns self)."""
        (self.dir / "tmux.conf").write_text(_TMUX_CONF.format(term=self.term))
        script = self.dir / "run.sh"
        script.write_text(self._wrapper())
        script.chmod(0o755)
        self.started = True
        try:
            self.tmux(
                "new-session", "-d", "-s", "main", "-x", str(self.width), "-y", str(self.height),
                f"sh {shlex.quote(str(script))}",
            )
        except Exception:
            self.close()
            raise
        return self

    def close(self) -> None:
        """Kill the app if it still runs, and the private tmux server. Never raises."""
        pid = self.app_pid
        if pid is not None and self.app_alive():
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.tmux("kill-server", check=False)
        except Exception:
            pass
        self.started = False
        try:  # tmux 3.3a leaves the socket file behind
            socket_path = Path(os.environ.get("TMUX_TMPDIR", "/tmp")) / f"tmux-{os.getuid()}" / self.socket
            socket_path.unlink(missing_ok=True)
        except OSError:
            pass
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "TmuxPane":
        return self if self.started else self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ input

    def send_keys(self, *keys: str) -> None:
        """``send-keys`` with tmux key names (``"Enter"``, ``"C-q"``, ``"Escape"``, ``"PageUp"``)."""
        self.tmux("send-keys", "-t", self.target, *keys)

    def send_text(self, text: str) -> None:
        """Type ``text`` literally (``send-keys -l``), all at once."""
        if text:
            self.tmux("send-keys", "-t", self.target, "-l", text)

    def type_slowly(self, text: str, delay: float = 0.03) -> None:
        """Type ``text`` one character per ``send-keys`` with ``delay`` seconds between."""
        for ch in text:
            self.send_text(ch)
            time.sleep(delay)

    def send_hex(self, *hex_bytes: str) -> None:
        """Send raw bytes (``send-keys -H 1b 5b 4d``), e.g. stray mouse reports."""
        self.tmux("send-keys", "-t", self.target, "-H", *hex_bytes)

    def paste(self, text: str, bracketed: bool = True, lf_to_cr: bool = False) -> None:
        """Paste ``text`` (exact bytes, UTF-8) through a tmux buffer.

        ``bracketed``: ``paste-buffer -p``, which wraps it in bracketed-paste markers only when the
        app turned mode 2004 on; False pastes it raw. LF stays LF (``-r``) unless ``lf_to_cr``:
        then tmux sends each LF as CR, as a terminal does when text is pasted without markers
        (each line end then looks like the Enter key).
        """
        path = self.dir / f"paste-{uuid.uuid4().hex[:6]}.txt"
        path.write_bytes(text.encode("utf-8"))
        self.tmux("load-buffer", "-b", "oitui-paste", str(path))
        args = ["paste-buffer", "-t", self.target, "-b", "oitui-paste", "-d"]
        if not lf_to_cr:
            args.append("-r")
        if bracketed:
            args.insert(1, "-p")
        self.tmux(*args)

    def resize(self, width: int, height: int) -> None:
        """Resize the window to ``width`` x ``height`` cells."""
        self.tmux("resize-window", "-t", "main", "-x", str(width), "-y", str(height))
        self.width, self.height = width, height

    def show_buffer(self) -> str:
        """The newest tmux paste buffer (what OSC 52 copied), or "" when there is none."""
        return self.tmux("show-buffer", check=False)

    # ------------------------------------------------------------------ output

    def capture(self, escapes: bool = False) -> str:
        """The visible screen (``capture-pane -p``), rows joined with newlines."""
        args = ["capture-pane", "-p", "-t", self.target]
        if escapes:
            args.append("-e")
        return self.tmux(*args)

    def capture_all(self) -> str:
        """The screen plus scrollback (what ``cat -v`` printed after the app left the alt screen)."""
        return self.tmux("capture-pane", "-p", "-S", "-", "-t", self.target)

    def display(self, fmt: str) -> str:
        """``display-message -p FMT`` for this pane, stripped."""
        return self.tmux("display-message", "-p", "-t", self.target, fmt).strip()

    def cursor(self) -> tuple[int, int]:
        """tmux's cursor position ``(x, y)`` in the pane (0-based)."""
        x, y = self.display("#{cursor_x} #{cursor_y}").split()
        return int(x), int(y)

    def wait_for(self, pattern: str | re.Pattern, timeout: float = 10.0, interval: float = 0.05) -> str:
        """Poll the screen until ``pattern`` (a plain substring, or a compiled regex) shows.

        Returns the screen. Raises TmuxError with the last screen after ``timeout`` seconds, or
        at once when the app has exited (the EXIT line is shown with the screen).
        """
        deadline = time.monotonic() + timeout
        screen = ""
        while True:
            screen = self.capture()
            if isinstance(pattern, re.Pattern):
                if pattern.search(screen):
                    return screen
            elif pattern in screen:
                return screen
            if self.exit_code() is not None:
                raise TmuxError(f"app exited ({self.exit_code()}) before {pattern!r} showed:\n{self.capture_all()}")
            if time.monotonic() > deadline:
                raise TmuxError(f"{pattern!r} did not show within {timeout}s; screen:\n{screen}")
            time.sleep(interval)

    def wait_gone(self, text: str, timeout: float = 10.0) -> str:
        """Poll until ``text`` is no longer on screen; returns the screen (TmuxError on timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            screen = self.capture()
            if text not in screen:
                return screen
            if time.monotonic() > deadline:
                raise TmuxError(f"{text!r} still shown after {timeout}s:\n{screen}")
            time.sleep(0.05)

    # ------------------------------------------------------------------ process

    @property
    def app_pid(self) -> int | None:
        """The app's pid once it has started, else None."""
        try:
            return int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def wait_started(self, timeout: float = 10.0) -> int:
        """Wait until the app's pid is known; returns it (TmuxError on timeout)."""
        deadline = time.monotonic() + timeout
        while self.app_pid is None:
            if time.monotonic() > deadline:
                raise TmuxError(f"the app did not start within {timeout}s:\n{self.capture()}")
            time.sleep(0.05)
        return self.app_pid

    def app_alive(self) -> bool:
        """True while the app process exists (and is not a zombie)."""
        pid = self.app_pid
        if pid is None or self.exit_code() is not None:
            return False
        try:
            os.kill(pid, 0)
        except OSError:
            return False
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
            return stat.rsplit(")", 1)[1].split()[0] != "Z"
        except (OSError, IndexError):
            return True

    def kill(self, sig: int) -> None:
        """Send signal ``sig`` to the app (TmuxError when it has not started)."""
        pid = self.app_pid
        if pid is None:
            raise TmuxError("the app has not started")
        os.kill(pid, sig)

    def exit_code(self) -> int | None:
        """The app's exit status once it has ended (as the shell reports it: 128+n for a signal)."""
        try:
            return int(self.exit_file.read_text().strip())
        except (OSError, ValueError):
            return None

    def wait_exit(self, timeout: float = 10.0) -> int:
        """Wait for the app to end; returns its exit status (TmuxError with the screen on timeout)."""
        deadline = time.monotonic() + timeout
        while True:
            code = self.exit_code()
            if code is not None:
                return code
            if time.monotonic() > deadline:
                raise TmuxError(f"the app did not exit within {timeout}s; screen:\n{self.capture()}")
            time.sleep(0.05)

    def pane_dead(self) -> bool:
        """tmux's ``#{pane_dead}`` (the wrapper keeps the pane alive, so normally False)."""
        return self.display("#{pane_dead}") == "1"

    # ------------------------------------------------------------------ terminal state

    def mode_flags(self) -> dict[str, str]:
        """The pane's mode flags (keys of :data:`MODE_FLAGS`) as tmux reports them ("0"/"1").

        A flag this tmux does not know is reported as "".
        """
        names = list(MODE_FLAGS)
        values = self.display("\t".join("#{%s}" % n for n in names)).split("\t")
        values += [""] * (len(names) - len(values))
        return dict(zip(names, values))

    def stty_before(self) -> str:
        """``stty -a`` in the pane just before the app started, without the window size
        (``rows N; columns N;``, which a resize changes); "" if not recorded."""
        return _STTY_SIZE.sub("", _read(self.stty_before_file))

    def stty_after(self) -> str:
        """``stty -a`` in the pane just after the app ended, without the window size."""
        return _STTY_SIZE.sub("", _read(self.stty_after_file))

    def bracketed_paste_left_on(self) -> bool:
        """Paste a probe into the ``cat -v`` that runs after the app: True if ``^[[200~`` shows
        (mode 2004 was left on). Call only after the app has exited."""
        marker = f"PROBE{uuid.uuid4().hex[:6]}"
        self.paste(marker + "\n", bracketed=True)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            text = self.capture_all()
            if marker in text:
                break
            time.sleep(0.05)
        return "^[[200~" in self.capture_all()

    def mode_check(self, baseline: dict[str, str] | None = None, paste_probe: bool = True) -> list[str]:
        """Everything about the terminal that differs from a clean one after the app exited.

        Compares :meth:`mode_flags` with ``baseline`` (default :data:`MODE_FLAGS`; flags this tmux
        lacks are skipped), ``stty -a`` after with before, and (``paste_probe``) whether bracketed
        paste was left on; then looks for leaked query replies after the ``EXIT=`` line. Returns
        a list of problems (empty when clean).
        """
        problems: list[str] = []
        expected = baseline or MODE_FLAGS
        for name, value in self.mode_flags().items():
            if value == "" or name not in expected:
                continue
            if value != expected[name]:
                problems.append(f"{name}={value} (expected {expected[name]})")
        before, after = self.stty_before(), self.stty_after()
        if not before or not after:
            problems.append("stty before/after not recorded")
        elif before != after:
            problems.append("stty changed:\n" + _diff_words(before, after))
        if paste_probe and self.bracketed_paste_left_on():
            problems.append("bracketed paste left on (^[[200~ shown)")
        tail = self.capture_all().split("EXIT=", 1)
        if len(tail) == 2:
            leaked = LEAK_PATTERN.search(tail[1].split("\n", 1)[1] if "\n" in tail[1] else "")
            if leaked:
                problems.append(f"leaked escape text after exit: {leaked.group(0)!r}")
        return problems

    def traceback_shown(self) -> bool:
        """True when a Python traceback is on the screen or in the scrollback."""
        text = self.capture_all()
        return "Traceback (most recent call last)" in text or "UnicodeDecodeError" in text


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _diff_words(before: str, after: str) -> str:
    a, b = set(before.split()), set(after.split())
    return f"  before only: {' '.join(sorted(a - b))}\n  after only: {' '.join(sorted(b - a))}"


def _has_terminfo(term: str) -> bool:
    try:
        return subprocess.run(["infocmp", term], capture_output=True, timeout=5).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return term == "screen"


def split_rows(screen: str) -> list[str]:
    """The screen's rows (trailing newline dropped)."""
    return screen.rstrip("\n").split("\n")


def find_text(screen: str, text: str) -> tuple[int, int] | None:
    """``(row, column)`` of the first occurrence of ``text`` on ``screen`` (cells assume one
    column per character, fine for ASCII), or None."""
    for row, line in enumerate(split_rows(screen)):
        col = line.find(text)
        if col >= 0:
            return row, col
    return None


def all_present(screen: str, words: Iterable[str]) -> bool:
    """True when every word in ``words`` is on ``screen``."""
    return all(w in screen for w in words)
