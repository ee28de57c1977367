"""Shared pieces of the runtimes: chunk constructors and the runtime interface."""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Iterator

Chunk = dict


def output_chunk(text: str) -> Chunk:
    """A console output chunk carrying raw program text."""
    return {"role": "computer", "type": "console", "format": "output", "content": text}


def active_line_chunk(line: int | None) -> Chunk:
    """An (ephemeral) active-line chunk: the 1-based line now running, or None when done."""
    return {"role": "computer", "type": "console", "format": "active_line", "content": line}


def image_chunk(b64png: str) -> Chunk:
    """An image chunk with base64-encoded PNG data."""
    return {"role": "computer", "type": "image", "format": "base64.png", "content": b64png}


def input_request_chunk(prompt: str, password: bool) -> Chunk:
    """An (ephemeral) input request: the program waits for a line typed by the person."""
    return {
        "role": "computer",
        "type": "console",
        "format": "input_request",
        "content": prompt,
        "password": bool(password),
    }


class Runtime:
    """One stateful language runtime.

    Subclasses implement :meth:`run` (a generator of chunks), :meth:`terminate`, and react to
    :attr:`stop_event` within 2 s. ``computer`` is the owning ``Computer`` (read for
    ``highlight_active_line``, ``timeout``, ``interactive``, ``cwd``).
    """

    name = "runtime"

    def __init__(self, computer) -> None:
        self.computer = computer
        self.stop_event = threading.Event()
        self.input_queue: queue.Queue[str] = queue.Queue()

    def run(self, code: str, timeout: float = 0) -> Iterator[Chunk]:  # pragma: no cover - abstract
        """Run ``code``; yield output/image/active-line/input-request chunks as they happen."""
        raise NotImplementedError

    def stop(self) -> None:
        """Ask the running block to stop (thread-safe)."""
        self.stop_event.set()

    def send_input(self, text: str) -> None:
        """Answer the pending input prompt with ``text`` (one line, no newline needed)."""
        self.input_queue.put(text)

    def terminate(self) -> None:
        """End the runtime's processes (idempotent)."""


class StopClock:
    """One block's stop request and the grace period after it.

    A block is asked to stop when ``stop_event`` is set or its ``timeout`` (seconds, 0 = none)
    passes; if it still runs ``grace`` seconds later it must be killed. :meth:`poll` returns
    "interrupt" once, then "kill" once, else None. ``timed_out`` tells which of the two asked.
    """

    def __init__(self, stop_event: threading.Event, timeout: float | None, grace: float) -> None:
        self._stop = stop_event
        self.deadline = time.monotonic() + timeout if timeout and timeout > 0 else None
        self.grace = grace
        self.interrupted_at: float | None = None
        self.timed_out = False
        self._killed = False

    @property
    def interrupted(self) -> bool:
        """True once the block was asked to stop (by stop() or the timeout)."""
        return self.interrupted_at is not None

    def poll(self) -> str | None:
        """"interrupt" when the block should now be asked to stop, "kill" when the grace period
        after that has passed, None otherwise (each answer is given once)."""
        now = time.monotonic()
        if self.interrupted_at is None:
            if self._stop.is_set() or (self.deadline is not None and now > self.deadline):
                self.timed_out = not self._stop.is_set()
                self.interrupted_at = now
                return "interrupt"
        elif not self._killed and now - self.interrupted_at > self.grace:
            self._killed = True
            return "kill"
        return None


class ProcessRuntime(Runtime):
    """A runtime backed by one persistent process (bash, node, R, pwsh).

    Subclasses create ``self._lock`` (held while a block runs), implement :meth:`_kill` (end the
    process) and may extend :meth:`_forget` (drop what a restart would otherwise restore).
    """

    def _kill(self) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _forget(self) -> None:
        """Forget per-process state after :meth:`terminate` (called with the lock held if free)."""
        self._lost = False

    def terminate(self) -> None:
        """End the process (idempotent). A running block may hold the lock: after 3 s the process
        is killed anyway, and that block ends with a note."""
        self.stop_event.set()
        got = self._lock.acquire(timeout=3)
        try:
            self._kill()
            self._forget()
        finally:
            if got:
                self._lock.release()


def timeout_note(seconds: float) -> str:
    """The note added to the output when a block exceeds the per-block timeout."""
    return f"\n[timed out after {seconds:g} s: the block was stopped (computer.timeout = {seconds:g})]\n"
