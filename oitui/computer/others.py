"""The smaller runtimes: html, applescript, and persistent R / PowerShell.

- html: the code is written to a new file under ``computer.output_dir``; the output names it.
- applescript: each block runs with ``osascript`` (macOS only; ``Computer.available`` says so
  elsewhere).
- r / powershell: one persistent ``R --vanilla`` / ``pwsh`` process reading commands on stdin.
  Each block is written to a file and sourced; completion is a per-run random token appended to
  a private status file (out of band, never on stdout).
"""

from __future__ import annotations

import codecs
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator

from .base import ProcessRuntime, Runtime, StopClock, output_chunk, timeout_note
from .launcher import launch


class HtmlRuntime(Runtime):
    """Writes each html block to ``<output_dir>/page-<time>-<n>.html`` and names the file."""

    name = "html"

    def __init__(self, computer) -> None:
        super().__init__(computer)
        self._n = 0

    def run(self, code: str, timeout: float = 0) -> Iterator[dict]:
        """Write ``code`` to a new .html file; yield one output chunk naming it."""
        from .computer import _default_output_dir

        folder = self.computer.output_dir or _default_output_dir()
        try:
            os.makedirs(folder, exist_ok=True)
            self._n += 1
            path = os.path.join(folder, f"page-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}-{self._n}.html")
            with open(path, "w", encoding="utf-8") as f:
                f.write(code)
        except OSError as e:
            yield output_chunk(f"could not write the HTML file in {folder}: {e}\n")
            return
        yield output_chunk(f"HTML written to {path}\n")


class AppleScriptRuntime(Runtime):
    """Runs each block with ``osascript`` (macOS)."""

    name = "applescript"

    def __init__(self, computer) -> None:
        super().__init__(computer)
        self._proc: subprocess.Popen | None = None

    def run(self, code: str, timeout: float = 0) -> Iterator[dict]:
        """Run ``code`` with osascript; yield its output when it ends (or is stopped)."""
        self.stop_event.clear()
        try:
            proc = launch(
                ["osascript", "-"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self.computer.cwd,
            )
        except OSError as e:
            yield output_chunk(f"could not start osascript: {e}\n")
            return
        self._proc = proc
        proc.stdin.write(code.encode("utf-8"))
        proc.stdin.close()
        deadline = time.monotonic() + timeout if timeout else None
        timed_out = False
        while proc.poll() is None:
            if self.stop_event.is_set() or (deadline and time.monotonic() > deadline):
                timed_out = not self.stop_event.is_set()
                proc.kill()
                break
            time.sleep(0.05)
        out = proc.stdout.read().decode("utf-8", "replace")
        proc.wait()
        if out:
            yield output_chunk(out)
        if timed_out:
            yield output_chunk(timeout_note(timeout))

    def terminate(self) -> None:
        """Kill a running osascript."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()


class _SourcingRuntime(ProcessRuntime):
    """A persistent interpreter fed one 'source this file, then write a token' line per block."""

    argv: list[str] = []
    suffix = ".txt"
    program = "?"

    def __init__(self, computer) -> None:
        super().__init__(computer)
        self._proc: subprocess.Popen | None = None
        self._dir = tempfile.mkdtemp(prefix=f"oitui-{self.name}-")
        self._block = os.path.join(self._dir, "block" + self.suffix)
        self._status = os.path.join(self._dir, "status")
        self._lock = threading.Lock()
        self._lost = False

    def command(self, block: str, status: str, token: str) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _start(self) -> None:
        self._proc = launch(
            self.argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.computer.cwd,
        )
        os.set_blocking(self._proc.stdout.fileno(), False)

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                proc.kill()
        if proc is not None:
            try:
                proc.wait(timeout=5)
            except Exception:
                pass

    def run(self, code: str, timeout: float = 0) -> Iterator[dict]:
        """Run ``code`` in the persistent interpreter; yield output chunks as they come."""
        with self._lock:
            self.stop_event.clear()
            if self._proc is None or self._proc.poll() is not None:
                had = self._proc is not None or self._lost
                self._kill()
                try:
                    self._start()
                except OSError as e:
                    yield output_chunk(f"could not start {self.program}: {e}\n")
                    return
                if had:
                    self._lost = False
                    yield output_chunk(f"[{self.program} had stopped and was restarted: earlier state is lost]\n")
            yield from self._run(code, timeout)

    def _run(self, code: str, timeout: float) -> Iterator[dict]:
        proc = self._proc
        with open(self._block, "w", encoding="utf-8") as f:
            f.write(code if code.endswith("\n") else code + "\n")
        token = uuid.uuid4().hex
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        try:
            proc.stdin.write(self.command(self._block, self._status, token).encode("utf-8"))
            proc.stdin.flush()
        except OSError:
            pass
        out_fd = proc.stdout.fileno()
        clock = StopClock(self.stop_event, timeout, grace=2)
        done = False
        while not done:
            step = clock.poll()
            if step == "interrupt":
                try:
                    os.kill(proc.pid, signal.SIGINT)
                except OSError:
                    pass
            elif step == "kill":
                self._kill()
                self._lost = True
                yield output_chunk(f"\n[{self.program} did not stop and was killed; earlier state is lost]\n")
                break
            ready, _, _ = select.select([out_fd], [], [], 0.05)
            if ready:
                try:
                    data = os.read(out_fd, 65536)
                except (BlockingIOError, InterruptedError):
                    data = b""
                if data:
                    yield output_chunk(decoder.decode(data))
            try:
                with open(self._status, encoding="utf-8", errors="replace") as f:
                    done = token in f.read()
            except OSError:
                pass
            if not done and proc.poll() is not None:
                self._lost = True
                yield output_chunk(f"\n[{self.program} exited with status {proc.returncode}]\n")
                break
        while self._proc is not None:
            try:
                data = os.read(out_fd, 65536)
            except (BlockingIOError, InterruptedError, OSError):
                break
            if not data:
                break
            yield output_chunk(decoder.decode(data))
        if clock.interrupted and not clock.timed_out:
            yield output_chunk("\n^C [interrupted]\n")
        if clock.timed_out:
            yield output_chunk(timeout_note(timeout))

    def __del__(self):  # pragma: no cover
        shutil.rmtree(getattr(self, "_dir", ""), ignore_errors=True)


def _r_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


class RRuntime(_SourcingRuntime):
    """R in a persistent ``R --vanilla`` process."""

    name = "r"
    argv = ["R", "--vanilla", "--quiet", "--no-echo"]
    suffix = ".R"
    program = "R"

    def command(self, block: str, status: str, token: str) -> str:
        return (
            f"tryCatch(source({_r_str(block)}, echo = FALSE, print.eval = TRUE), "
            "error = function(e) message('Error: ', conditionMessage(e))); "
            f"cat({_r_str(token)}, '\\n', file = {_r_str(status)}, append = TRUE)\n"
        )


def _ps_str(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


class PowerShellRuntime(_SourcingRuntime):
    """PowerShell in a persistent ``pwsh`` process."""

    name = "powershell"
    argv = ["pwsh", "-NoLogo", "-NoProfile", "-NonInteractive", "-Command", "-"]
    suffix = ".ps1"
    program = "pwsh"

    def command(self, block: str, status: str, token: str) -> str:
        return (
            f"try {{ . {_ps_str(block)} }} catch {{ Write-Output $_ }}; "
            f"Add-Content -Path {_ps_str(status)} -Value {_ps_str(token)}\n"
        )
