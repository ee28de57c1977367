"""The javascript runtime: one persistent ``node`` process.

A small server script (below) reads JSON requests ``{"token", "code"}`` from a private pipe,
runs the code with ``vm.runInThisContext`` (so globals and top-level declarations persist between
blocks), prints the value of a final expression like the node REPL does, prints errors with
their stack trace, and reports completion as ``<token> <status>`` on another private pipe — never
on the program's stdout. User code's stdin is /dev/null. ``stop()`` sends SIGINT to node
(``breakOnSigint`` turns it into an error); if node does not stop, it is restarted.
"""

from __future__ import annotations

import codecs
import json
import os
import select
import shutil
import signal
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator

from .base import ProcessRuntime, StopClock, output_chunk, timeout_note
from .launcher import launch

_SERVER = r"""
'use strict';
const fs = require('fs');
const vm = require('vm');
const util = require('util');
const CMD = parseInt(process.argv[2], 10);
const ST = parseInt(process.argv[3], 10);
process.on('SIGINT', () => {});
let buf = '';
let queue = Promise.resolve();
function cleanStack(err) {
  let s = (err && err.stack) ? String(err.stack) : String(err);
  return s.split('\n').filter(l => !/node:vm|node:internal|oitui-node-server/.test(l)).join('\n');
}
async function runOne(req) {
  let status = 0;
  try {
    let result = vm.runInThisContext(req.code, { filename: 'block.js', breakOnSigint: true });
    if (result && typeof result.then === 'function') { result = await result; }
    if (result !== undefined) { process.stdout.write(util.inspect(result, { colors: false }) + '\n'); }
  } catch (err) {
    status = 1;
    if (err && /Script execution (was )?interrupted/.test(String(err.message))) {
      process.stderr.write('KeyboardInterrupt: script execution interrupted\n');
      status = 130;
    } else {
      process.stderr.write(cleanStack(err) + '\n');
    }
  }
  fs.writeSync(ST, req.token + ' ' + status + '\n');
}
const stream = new (require('net').Socket)({ fd: CMD, readable: true, writable: false });
stream.on('data', (d) => {
  buf += d.toString('utf8');
  let i;
  while ((i = buf.indexOf('\n')) >= 0) {
    const line = buf.slice(0, i);
    buf = buf.slice(i + 1);
    if (!line.trim()) continue;
    let req;
    try { req = JSON.parse(line); } catch (e) { continue; }
    queue = queue.then(() => runOne(req));
  }
});
stream.on('end', () => process.exit(0));
"""


class NodeRuntime(ProcessRuntime):
    """JavaScript in a persistent node process. See the module docstring."""

    name = "javascript"

    def __init__(self, computer) -> None:
        super().__init__(computer)
        self._proc: subprocess.Popen | None = None
        self._dir = tempfile.mkdtemp(prefix="oitui-node-")
        self._script = os.path.join(self._dir, "oitui-node-server.js")
        with open(self._script, "w", encoding="utf-8") as f:
            f.write(_SERVER)
        self._cmd_w = self._st_r = None
        self._lock = threading.Lock()
        self._lost = False

    def alive(self) -> bool:
        """True while node runs."""
        return self._proc is not None and self._proc.poll() is None

    def _start(self) -> None:
        cmd_r, cmd_w = os.pipe()
        st_r, st_w = os.pipe()
        try:
            self._proc = launch(
                ["node", self._script, str(cmd_r), str(st_w)],
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self.computer.cwd,
                pass_fds=(cmd_r, st_w),
            )
        finally:
            os.close(cmd_r)
            os.close(st_w)
        self._cmd_w, self._st_r = cmd_w, st_r
        os.set_blocking(self._proc.stdout.fileno(), False)

    def _kill(self) -> None:
        proc, self._proc = self._proc, None
        for fd in (self._cmd_w, self._st_r):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self._cmd_w = self._st_r = None
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
        try:
            proc.stdout.close()
            proc.wait(timeout=5)
        except Exception:
            pass

    def run(self, code: str, timeout: float = 0) -> Iterator[dict]:
        """Run ``code`` in node; yield output chunks as they come."""
        with self._lock:
            self.stop_event.clear()
            if not self.alive():
                had = self._proc is not None or self._lost
                self._kill()
                try:
                    self._start()
                except OSError as e:
                    yield output_chunk(f"could not start node: {e}\n")
                    return
                if had:
                    self._lost = False
                    yield output_chunk(
                        "[node had stopped and was restarted: variables from earlier blocks are lost]\n"
                    )
            yield from self._run(code, timeout)

    def _run(self, code: str, timeout: float) -> Iterator[dict]:
        proc = self._proc
        token = uuid.uuid4().hex
        decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        out_fd = proc.stdout.fileno()
        try:
            os.write(self._cmd_w, (json.dumps({"token": token, "code": code}) + "\n").encode())
        except OSError:
            pass
        clock = StopClock(self.stop_event, timeout, grace=1.5)
        status = None
        st_buf = b""
        died = False
        while status is None:
            step = clock.poll()
            if step == "interrupt":
                try:
                    os.kill(proc.pid, signal.SIGINT)
                except OSError:
                    pass
            elif step == "kill":
                self._kill()
                self._lost = True
                yield output_chunk("\n[node did not stop and was killed; variables from earlier blocks are lost]\n")
                died = True
                break
            try:
                ready, _, _ = select.select([out_fd, self._st_r], [], [], 0.05)
            except (OSError, ValueError):
                ready = []
            if out_fd in ready:
                try:
                    data = os.read(out_fd, 65536)
                except (BlockingIOError, InterruptedError):
                    data = b""
                if data:
                    yield output_chunk(decoder.decode(data))
            if self._st_r in ready:
                st_buf += os.read(self._st_r, 4096)
                for line in st_buf.split(b"\n"):
                    parts = line.split()
                    if len(parts) == 2 and parts[0].decode("ascii", "replace") == token:
                        status = int(parts[1]) if parts[1].lstrip(b"-").isdigit() else -1
                st_buf = st_buf.rsplit(b"\n", 1)[-1]
            if status is None and proc.poll() is not None:
                died = True
                self._lost = True
                break
        if not died or self._proc is not None:
            while True:
                try:
                    ready, _, _ = select.select([out_fd], [], [], 0.2 if died else 0)
                    data = os.read(out_fd, 65536) if ready else b""
                except (OSError, ValueError):
                    data = b""
                if not data:
                    break
                yield output_chunk(decoder.decode(data))
        tail = decoder.decode(b"", True)
        if tail:
            yield output_chunk(tail)
        if died and self._proc is not None:
            yield output_chunk(f"\n[node exited with status {proc.returncode}]\n")
            self._kill()
        if clock.timed_out:
            yield output_chunk(timeout_note(timeout))

    def __del__(self):  # pragma: no cover
        shutil.rmtree(getattr(self, "_dir", ""), ignore_errors=True)
