"""The python runtime: a Jupyter kernel (ipykernel) in its own process.

The kernel is started through :func:`oitui.computer.launcher.launch` (never by jupyter_client's
own launcher) and reached over ZeroMQ IPC sockets in a private temporary folder. Interrupts use
the kernel's ``interrupt_request`` control message (the kernel signals itself), so they also work
when the kernel runs inside a sandbox.

Active lines: at start a silent cell installs a sampler thread inside the kernel. While a cell
runs and tracking is on, it looks at the main thread's frame stack about 30 times a second
(``sys._current_frames()``), finds the innermost frame that belongs to the running cell, and
writes ``"<msg_id> <line>\\n"`` to a pipe inherited from oitui — out of band, never on
the program's stdout. The code itself is never rewritten. With tracking off the thread sleeps.
"""

from __future__ import annotations

import os
import queue
import shutil
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator

from .base import (
    Runtime,
    active_line_chunk,
    image_chunk,
    input_request_chunk,
    output_chunk,
    timeout_note,
)
from .launcher import launch

_SETUP = r'''
def __oitui_setup(fd, track):
    import os, sys, threading, time
    ip = get_ipython()
    for args in (("colors", "nocolor"), ("colors", "NoColor")):
        try:
            ip.run_line_magic(*args)
            break
        except Exception:
            pass
    kernel = getattr(ip, "kernel", None)
    if kernel is not None:
        ns = {}
        exec(compile(
            "def wrap(orig, what):\n"
            "    def inner(*a, **kw):\n"
            "        __tracebackhide__ = True\n"
            "        try:\n"
            "            return orig(*a, **kw)\n"
            "        except EOFError:\n"
            "            raise EOFError(f'EOF when reading a line: {what} got end of file "
            "(no input is available)') from None\n"
            "    return inner\n",
            "<oitui stdin>", "exec"), ns)
        wrap = ns["wrap"]
        kernel.raw_input = wrap(kernel.raw_input, "input()")
        kernel.getpass = wrap(kernel.getpass, "getpass()")
    main_ident = threading.main_thread().ident
    state = {"count": None, "last": None}
    running = threading.Event()
    tracking = threading.Event()
    wake = threading.Event()
    if track:
        tracking.set()

    def pre(*_a):
        mid = "-"
        try:
            hdr = ip.parent_header or {}
            mid = (hdr.get("header") or {}).get("msg_id") or "-"
        except Exception:
            pass
        state["count"] = mid
        state["last"] = None
        running.set()
        if tracking.is_set():
            wake.set()

    def post(*_a):
        running.clear()
        wake.clear()

    def cell_line(frame):
        chain = []
        f = frame
        cell_file = None
        while f is not None:
            chain.append(f)
            b = f.f_back
            if b is not None and b.f_code.co_name == "run_code" and b.f_code.co_filename.endswith("interactiveshell.py"):
                cell_file = f.f_code.co_filename
                break
            f = b
        if cell_file is None:
            return None
        for f in chain:
            if f.f_code.co_filename == cell_file:
                return f.f_lineno
        return None

    def loop():
        while True:
            wake.wait()
            time.sleep(0.033)
            if not (running.is_set() and tracking.is_set()):
                continue
            frame = sys._current_frames().get(main_ident)
            try:
                line = cell_line(frame) if frame is not None else None
            except Exception:
                line = None
            finally:
                frame = None
            if line is not None and line != state["last"]:
                state["last"] = line
                try:
                    os.write(fd, f"{state['count']} {line}\n".encode())
                except OSError:
                    return

    def set_tracking(on):
        if on:
            tracking.set()
            if running.is_set():
                wake.set()
        else:
            tracking.clear()
            wake.clear()

    ip.events.register("pre_run_cell", pre)
    ip.events.register("post_run_cell", post)
    if fd >= 0:
        threading.Thread(target=loop, name="oitui-active-line", daemon=True).start()
    return set_tracking

__oitui_set_tracking = __oitui_setup(__OITUI_FD__, __OITUI_TRACK__)
del __oitui_setup
'''

_LOST_NOTE = (
    "[the Python kernel had stopped and was restarted: variables, imports and definitions "
    "from earlier blocks are lost]\n"
)


class KernelStartError(RuntimeError):
    """The Python kernel could not be started (message says why)."""


class PythonRuntime(Runtime):
    """Python in a persistent Jupyter kernel. See the module docstring."""

    name = "python"

    def __init__(self, computer) -> None:
        super().__init__(computer)
        self.python = computer.python or sys.executable
        self._proc = None
        self._kc = None
        self._dir: str | None = None
        self._al_r: int | None = None
        self._al_queue: "queue.Queue[tuple[str, int]]" = queue.Queue()
        self._tracking_sent: bool | None = None
        self._started_once = False
        self._lost_state = False
        self._lock = threading.Lock()
        self.cold_start_seconds: float | None = None

    # -- process management --------------------------------------------------------
    def alive(self) -> bool:
        """True while the kernel process runs."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> None:
        """Start the kernel and wait until it answers (raises KernelStartError)."""
        from jupyter_client.blocking import BlockingKernelClient
        from jupyter_client.connect import write_connection_file

        t0 = time.monotonic()
        self.python = self.computer.python or sys.executable
        self._dir = tempfile.mkdtemp(prefix="oitui-kernel-")
        cf = os.path.join(self._dir, "kernel.json")
        write_connection_file(
            cf, transport="ipc", ip=os.path.join(self._dir, "k"), key=uuid.uuid4().hex.encode()
        )
        al_r, al_w = os.pipe()
        os.set_inheritable(al_w, True)
        self._al_r = al_r
        env = dict(os.environ)
        env["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
        env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        env["PYTHONIOENCODING"] = "utf-8"
        env["JPY_PARENT_PID"] = str(os.getpid())  # the kernel exits if oitui dies
        log = open(os.path.join(self._dir, "kernel.log"), "wb")
        argv = [self.python, "-m", "ipykernel_launcher", "-f", cf, "--IPKernelApp.log_level=ERROR"]
        try:
            self._proc = launch(
                argv, env=env, cwd=self.computer.cwd, stdout=log, stderr=log, pass_fds=(al_w,)
            )
        except OSError as e:
            os.close(al_w)
            log.close()
            raise KernelStartError(f"could not start the Python kernel with {self.python}: {e}") from e
        finally:
            log.close()
        os.close(al_w)
        threading.Thread(target=self._read_active_lines, args=(al_r,), daemon=True).start()

        kc = BlockingKernelClient()
        kc.load_connection_file(cf)
        kc.start_channels()
        self._kc = kc
        deadline = time.monotonic() + 120
        ready = False
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                break
            msg_id = kc.kernel_info()
            try:
                while True:
                    reply = kc.get_shell_msg(timeout=1.0)
                    if reply["parent_header"].get("msg_id") == msg_id:
                        ready = True
                        break
            except queue.Empty:
                continue
            if ready:
                break
        if not ready:
            why = self._log_tail() or "no answer within 120 s"
            self._kill()
            raise KernelStartError(f"could not start the Python kernel with {self.python}: {why}")
        # Drain the iopub messages of startup.
        self._drain(kc.iopub_channel)
        track = bool(self.computer.highlight_active_line)
        code = _SETUP.replace("__OITUI_FD__", str(al_w)).replace("__OITUI_TRACK__", str(track))
        self._silent(code)
        self._tracking_sent = track
        self.cold_start_seconds = time.monotonic() - t0

    def _log_tail(self) -> str:
        try:
            with open(os.path.join(self._dir or "", "kernel.log"), "rb") as f:
                text = f.read()[-2000:].decode("utf-8", "replace").strip()
            return text.splitlines()[-1] if text else ""
        except OSError:
            return ""

    @staticmethod
    def _drain(channel) -> None:
        try:
            while True:
                channel.get_msg(timeout=0.05)
        except queue.Empty:
            pass

    def _silent(self, code: str, timeout: float = 30) -> None:
        """Run setup code silently and wait for its reply."""
        kc = self._kc
        msg_id = kc.execute(code, silent=True, store_history=False, allow_stdin=False)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                reply = kc.get_shell_msg(timeout=0.5)
            except queue.Empty:
                if not self.alive():
                    return
                continue
            if reply["parent_header"].get("msg_id") == msg_id:
                break
        self._drain(kc.iopub_channel)

    def _read_active_lines(self, fd: int) -> None:
        buf = b""
        while True:
            try:
                data = os.read(fd, 4096)
            except OSError:
                break
            if not data:
                break
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                try:
                    mid, lineno = line.split()
                    self._al_queue.put((mid.decode("ascii", "replace"), int(lineno)))
                except ValueError:
                    pass
        try:
            os.close(fd)
        except OSError:
            pass

    def _kill(self) -> None:
        kc, self._kc = self._kc, None
        if kc is not None:
            try:
                kc.stop_channels()
            except Exception:
                pass
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except OSError:
                try:
                    proc.kill()
                except OSError:
                    pass
            try:
                proc.wait(timeout=5)
            except Exception:
                pass
        if self._dir:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    def terminate(self) -> None:
        """Shut the kernel down (idempotent)."""
        self.stop_event.set()
        got = self._lock.acquire(timeout=3)
        if not got:
            # A block is still running in another thread and owns the client: kill only the
            # process; that block ends with a note and the next block starts a new kernel.
            proc = self._proc
            if proc is not None and proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except OSError:
                    pass
            return
        try:
            if self._kc is not None and self.alive():
                try:
                    msg = self._kc.session.msg("shutdown_request", {"restart": False})
                    self._kc.control_channel.send(msg)
                    self._proc.wait(timeout=2)
                except Exception:
                    pass
            self._kill()
            self._started_once = False
        finally:
            if got:
                self._lock.release()

    def interrupt(self) -> None:
        """Send the kernel an interrupt_request (the kernel raises KeyboardInterrupt in itself)."""
        if self._kc is not None:
            try:
                self._kc.control_channel.send(self._kc.session.msg("interrupt_request", {}))
            except Exception:
                pass

    # -- running -------------------------------------------------------------------
    def _ensure(self) -> Iterator[dict]:
        if self.alive() and self._kc is not None:
            return
        if self._started_once:
            self._kill()
            self._lost_state = True
        self.start()
        self._started_once = True
        if self._lost_state:
            self._lost_state = False
            yield output_chunk(_LOST_NOTE)

    def run(self, code: str, timeout: float = 0) -> Iterator[dict]:
        """Run ``code`` in the kernel; yield chunks as they come. See the module docstring."""
        with self._lock:
            self.stop_event.clear()
            try:
                yield from self._ensure()
            except KernelStartError as e:
                yield output_chunk(f"{e}\n")
                return
            yield from self._run(code, timeout)

    def _run(self, code: str, timeout: float) -> Iterator[dict]:
        kc = self._kc
        computer = self.computer
        track = bool(computer.highlight_active_line)
        if track != self._tracking_sent:
            self._silent(f"__oitui_set_tracking({track})")
            self._tracking_sent = track
        while not self._al_queue.empty():
            self._al_queue.get_nowait()
        while not self.input_queue.empty():
            self.input_queue.get_nowait()
        msg_id = kc.execute(code, silent=False, store_history=True, allow_stdin=True)
        start = time.monotonic()
        deadline = start + timeout if timeout and timeout > 0 else None
        pending_lines: list[tuple[str, int]] = []
        interrupted_at = None
        signalled = False
        timed_out = False
        saw_keyboard_interrupt = False
        last_line = None
        while True:
            # 1. stop / timeout
            now = time.monotonic()
            if interrupted_at is None and (self.stop_event.is_set() or (deadline and now > deadline)):
                timed_out = not self.stop_event.is_set()
                interrupted_at = now
                self.interrupt()
            elif interrupted_at is not None:
                if not signalled and now - interrupted_at > 1.5 and self.alive():
                    signalled = True
                    self.interrupt()  # once more; never a signal from here (the sandbox may wrap it)
                elif now - interrupted_at > 8.0:
                    self._kill()
                    self._lost_state = False
                    self._started_once = False  # this note already says the state is lost
                    yield output_chunk(
                        "\n[the Python kernel did not respond to the interrupt and was restarted: "
                        "earlier variables are lost]\n"
                    )
                    break
            # 2. kernel alive?
            if not self.alive():
                code_ = self._proc.returncode if self._proc is not None else None
                yield output_chunk(
                    f"\n[the Python kernel died (exit code {code_}); the next block starts a new kernel "
                    "and earlier variables are lost]\n"
                )
                break
            # 3. input requests
            try:
                while kc.stdin_channel.msg_ready():
                    req = kc.stdin_channel.get_msg(timeout=0)
                    if req["parent_header"].get("msg_id") != msg_id:
                        continue
                    yield from self._answer_input(kc, req, interrupted_at)
            except queue.Empty:
                pass
            # 4. active lines
            while True:
                try:
                    item = self._al_queue.get_nowait()
                except queue.Empty:
                    break
                pending_lines.append(item)
            if pending_lines:
                for mid, line in pending_lines:
                    if mid == msg_id and track and line != last_line:
                        last_line = line
                        yield active_line_chunk(line)
                pending_lines.clear()
            # 5. iopub
            try:
                msg = kc.get_iopub_msg(timeout=0.03)
            except queue.Empty:
                continue
            if msg["parent_header"].get("msg_id") != msg_id:
                continue
            mtype = msg["msg_type"]
            content = msg["content"]
            if mtype == "status":
                if content.get("execution_state") == "idle":
                    break
            elif mtype == "stream":
                text = content.get("text", "")
                if text:
                    yield output_chunk(text)
            elif mtype == "error":
                tb = "\n".join(content.get("traceback") or [])
                if content.get("ename") == "KeyboardInterrupt":
                    saw_keyboard_interrupt = True
                yield output_chunk(tb.rstrip("\n") + "\n")
            elif mtype in ("execute_result", "display_data", "update_display_data"):
                data = content.get("data") or {}
                if "image/png" in data:
                    png = data["image/png"]
                    yield image_chunk(png if isinstance(png, str) else str(png))
                elif "text/plain" in data:
                    yield output_chunk(str(data["text/plain"]).rstrip("\n") + "\n")
        # Drop the execute_reply (and any stale shell replies) so the channel never backs up.
        try:
            while self._kc is not None and self._kc.shell_channel.msg_ready():
                self._kc.shell_channel.get_msg(timeout=0)
        except Exception:
            pass
        if interrupted_at is not None:
            if timed_out:
                yield output_chunk(timeout_note(timeout))
            elif not saw_keyboard_interrupt:
                yield output_chunk("\nKeyboardInterrupt: stopped by the user\n")

    def _answer_input(self, kc, req, interrupted_at) -> Iterator[dict]:
        prompt = req["content"].get("prompt", "")
        password = bool(req["content"].get("password", False))
        if not self.computer.interactive or interrupted_at is not None:
            if prompt:
                yield output_chunk(prompt + "\n")
            kc.input("\x04")  # end of file: input() raises EOFError at once
            return
        if prompt:
            yield output_chunk(prompt)
        yield input_request_chunk(prompt, password)
        while True:
            if self.stop_event.is_set():
                kc.input("\x04")
                return
            if not self.alive():
                return
            try:
                text = self.input_queue.get(timeout=0.05)
            except queue.Empty:
                continue
            kc.input(text)
            if not password:
                yield output_chunk(text + "\n")
            else:
                yield output_chunk("\n")
            return
