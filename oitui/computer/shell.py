"""The shell runtime: one persistent ``bash --noprofile --norc`` process.

Each block is written to a file and sourced in the persistent shell (so ``cd``, exported
variables and functions persist). The end of a block is detected out of band: after the block,
the shell writes ``<random token> <exit status>`` to a private pipe (file descriptor inherited
from oitui), never to the program's stdout. Active lines come from a DEBUG trap that writes
``$LINENO`` (only for commands of the block file, only when it changes) to another private pipe.

After every completed block the shell's state (working directory, exported variables,
functions) is saved to a file; when the shell dies (``exit``, a crash, an interrupt that kills
it), the next block starts a new shell, restores that state and says so in the output.
User code reads stdin from /dev/null, or from a FIFO fed by ``send_input`` when the computer is
interactive.
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

from .base import ProcessRuntime, StopClock, active_line_chunk, output_chunk, timeout_note
from .launcher import launch


def _descendants(root: int) -> list[int]:
    """PIDs of all descendants of ``root`` (Linux /proc; empty elsewhere)."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(b")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        for child in children.get(pid, []):
            out.append(child)
            todo.append(child)
    return out


def _q(path: str) -> str:
    """Single-quote ``path`` for bash."""
    return "'" + path.replace("'", "'\\''") + "'"


class ShellRuntime(ProcessRuntime):
    """bash in a persistent process. See the module docstring."""

    name = "shell"

    def __init__(self, computer) -> None:
        super().__init__(computer)
        self._proc: subprocess.Popen | None = None
        self._dir = tempfile.mkdtemp(prefix="oitui-sh-")
        self._block = os.path.join(self._dir, "block")
        self._state = os.path.join(self._dir, "state")
        self._fifo = os.path.join(self._dir, "stdin")
        self._st_r = self._al_r = None
        self._lock = threading.Lock()
        self._restart_reason: str | None = None
        self.last_status: int | None = None

    # -- process management ------------------------------------------------------------
    def alive(self) -> bool:
        """True while the bash process runs."""
        return self._proc is not None and self._proc.poll() is None

    def _start(self, restore: bool = False) -> None:
        st_r, st_w = os.pipe()
        al_r, al_w = os.pipe()
        env = dict(os.environ)
        env.update(PAGER="cat", GIT_PAGER="cat", PS1="", PS2="")
        env.setdefault("TERM", "dumb")
        env.pop("BASH_ENV", None)
        env.pop("ENV", None)
        try:
            self._proc = launch(
                ["bash", "--noprofile", "--norc"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self.computer.cwd,
                env=env,
                pass_fds=(st_w, al_w),
            )
        finally:
            os.close(st_w)
            os.close(al_w)
        for fd in (self._st_r, self._al_r):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._st_r, self._al_r = st_r, al_r
        os.set_blocking(self._proc.stdout.fileno(), False)
        block = self._block
        setup = (f". {_q(self._state)} >/dev/null 2>&1\n" if restore else "") + (
            "set +o history 2>/dev/null\n"
            "trap '__oitui_intr=1; return 130 2>/dev/null' INT\n"
            "__oitui_save() { { builtin printf 'builtin cd -- %q\\n' \"$PWD\"; builtin export -p; "
            f"builtin declare -f; }} > {_q(self._state)} 2>/dev/null; }}\n"
            "__oitui_done() { builtin trap - DEBUG; builtin set +T; __oitui_save; "
            f"builtin printf '%s %s\\n' \"$1\" \"$2\" >&{st_w}; }}\n"
            f"__oitui_trap='[[ ${{BASH_SOURCE[0]-}} == {block} && $LINENO != \"$__oitui_l\" ]] && "
            f"{{ __oitui_l=$LINENO; builtin printf \"%s\\n\" \"$LINENO\" >&{al_w}; }}'\n"
        )
        self._send(setup)

    def _send(self, text: str) -> None:
        assert self._proc is not None and self._proc.stdin is not None
        self._proc.stdin.write(text.encode("utf-8", "replace"))
        self._proc.stdin.flush()

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                try:
                    proc.kill()
                except OSError:
                    pass
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except Exception:
                pass
        try:
            proc.wait(timeout=5)
        except Exception:
            pass

    def _forget(self) -> None:
        """Forget the saved state and start a fresh private folder (after ``terminate``)."""
        self._restart_reason = None
        for fd in (self._st_r, self._al_r):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._st_r = self._al_r = None
        shutil.rmtree(self._dir, ignore_errors=True)
        self._dir = tempfile.mkdtemp(prefix="oitui-sh-")
        self._block = os.path.join(self._dir, "block")
        self._state = os.path.join(self._dir, "state")
        self._fifo = os.path.join(self._dir, "stdin")

    def _ensure(self) -> Iterator[dict]:
        if self.alive():
            return
        restarted = self._proc is not None or self._restart_reason is not None
        self._kill()
        restore = restarted and os.path.exists(self._state)
        self._start(restore=restore)
        if restarted:
            reason = self._restart_reason or "the shell had stopped"
            self._restart_reason = None
            if restore:
                yield output_chunk(
                    f"[{reason}; a new shell was started and the working directory, exported "
                    "variables and functions were restored]\n"
                )
            else:
                yield output_chunk(f"[{reason}; a new shell was started]\n")

    # -- running -----------------------------------------------------------------------
    def _interrupt(self, hard: bool) -> None:
        proc = self._proc
        if proc is None or proc.poll() is not None:
            return
        # bash first: its INT trap then returns from the block as soon as the foreground
        # command ends, so the block's next line never runs.
        if not hard:
            try:
                os.kill(proc.pid, signal.SIGINT)
            except OSError:
                pass
        for pid in _descendants(proc.pid):
            try:
                os.kill(pid, signal.SIGKILL if hard else signal.SIGINT)
            except OSError:
                pass

    def run(self, code: str, timeout: float = 0) -> Iterator[dict]:
        """Run ``code`` in the persistent bash; yield chunks. See the module docstring."""
        with self._lock:
            self.stop_event.clear()
            while not self.input_queue.empty():
                self.input_queue.get_nowait()
            try:
                yield from self._ensure()
            except OSError as e:
                yield output_chunk(f"could not start bash: {e}\n")
                return
            yield from self._run(code, timeout)

    def _run(self, code: str, timeout: float) -> Iterator[dict]:
        proc = self._proc
        assert proc is not None
        with open(self._block, "w", encoding="utf-8", errors="replace") as f:
            f.write(code if code.endswith("\n") else code + "\n")
        token = uuid.uuid4().hex
        track = bool(self.computer.highlight_active_line)
        fifo_fd = None
        stdin = "/dev/null"
        if self.computer.interactive:
            try:
                if not os.path.exists(self._fifo):
                    os.mkfifo(self._fifo, 0o600)
                fifo_fd = os.open(self._fifo, os.O_RDWR | os.O_NONBLOCK)
                stdin = self._fifo
            except OSError:
                fifo_fd = None
        prefix = "__oitui_l=; set -T; trap \"$__oitui_trap\" DEBUG; " if track else ""
        command = f"{prefix}. {_q(self._block)} < {_q(stdin)}; __oitui_done {token} $?\n"
        # Replace the block file's path in bash's own messages with "bash".
        hide = self._block + ": "
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        held = ""
        out_fd = proc.stdout.fileno()
        status_buf = b""
        al_buf = b""
        status = None
        last_line = None
        clock = StopClock(self.stop_event, timeout, grace=1.5)
        died = False

        def emit(data: bytes, final: bool = False) -> str:
            nonlocal held
            text = held + decoder.decode(data, final)
            held = ""
            if hide in text:
                text = text.replace(hide, "bash: ")
            if not final:
                for k in range(min(len(hide) - 1, len(text)), 0, -1):
                    if hide.startswith(text[-k:]):
                        held = text[-k:]
                        text = text[:-k]
                        break
            return text

        try:
            self._send(command)
        except OSError:
            died = True
        while not died and status is None:
            step = clock.poll()
            if step == "interrupt":
                self._interrupt(hard=False)
            elif step == "kill":
                self._interrupt(hard=True)
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
            if fifo_fd is not None:
                while not self.input_queue.empty():
                    line = self.input_queue.get_nowait()
                    try:
                        os.write(fifo_fd, (line + "\n").encode("utf-8", "replace"))
                    except OSError:
                        pass
            fds = [out_fd, self._st_r, self._al_r]
            try:
                ready, _, _ = select.select(fds, [], [], 0.05)
            except (OSError, ValueError):
                ready = []
            if out_fd in ready:
                data = self._read(out_fd)
                if data:
                    text = emit(data)
                    if text:
                        yield output_chunk(text)
            if self._al_r in ready:
                data = self._read(self._al_r)
                al_buf += data
                *lines, al_buf = al_buf.split(b"\n")
                if lines and track:
                    try:
                        line_no = int(lines[-1])
                    except ValueError:
                        line_no = None
                    if line_no is not None and line_no != last_line:
                        last_line = line_no
                        yield active_line_chunk(line_no)
            if self._st_r in ready:
                status_buf += self._read(self._st_r)
                for line in status_buf.split(b"\n"):
                    parts = line.split()
                    if len(parts) == 2 and parts[0].decode("ascii", "replace") == token:
                        try:
                            status = int(parts[1])
                        except ValueError:
                            status = -1
                status_buf = status_buf.rsplit(b"\n", 1)[-1]
            if status is None and proc.poll() is not None:
                died = True
        # Collect what is still in the output pipe.
        end = time.monotonic() + (0.2 if died else 0.0)
        while True:
            try:
                ready, _, _ = select.select([out_fd], [], [], max(0.0, end - time.monotonic()))
            except (OSError, ValueError):
                break
            if not ready:
                break
            data = self._read(out_fd)
            if not data:
                break
            text = emit(data)
            if text:
                yield output_chunk(text)
        tail = emit(b"", final=True)
        if tail:
            yield output_chunk(tail)
        if fifo_fd is not None:
            os.close(fifo_fd)
        if died:
            code_ = proc.returncode
            self.last_status = code_
            if clock.interrupted:
                self._restart_reason = "the shell was killed to stop the block"
                yield output_chunk("\n^C [interrupted: the shell was stopped]\n")
            else:
                how = f"with status {code_}" if code_ is not None and code_ >= 0 else f"by signal {-code_}"
                self._restart_reason = f"the previous shell exited {how}"
                yield output_chunk(f"\n[the shell exited {how}]\n")
            self._kill()
        else:
            self.last_status = status
            if clock.interrupted and not clock.timed_out:
                yield output_chunk("\n^C [interrupted]\n")
        if clock.timed_out:
            yield output_chunk(timeout_note(timeout))

    @staticmethod
    def _read(fd: int) -> bytes:
        try:
            return os.read(fd, 65536)
        except (BlockingIOError, InterruptedError):
            return b""
        except OSError:
            return b""
