"""Textual messages that carry the agent core's events from the worker thread to the UI.

The core runs in a thread worker; every LMC chunk it yields becomes a :class:`CoreChunk` posted
with ``App.post_message`` (thread-safe). An approval is a :class:`ApprovalRequested` carrying a
``concurrent.futures.Future`` that the UI resolves with an ``oitui.core.approval.Approval``.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

from textual.message import Message


class CoreChunk(Message):
    """One streamed LMC chunk (a dict with role/type/format/content and start/end flags).

    batched: True when the app's worker posted it through its outbox; the handler then takes
    every chunk waiting there (this one first), so a fast stream never floods the queue.
    """

    def __init__(self, chunk: dict[str, Any], batched: bool = False) -> None:
        super().__init__()
        self.chunk = chunk
        self.batched = batched


class ApprovalRequested(Message):
    """The core waits for a decision on ``request`` (an ``ApprovalRequest``).

    The UI must call ``future.set_result(Approval(...))`` exactly once.
    """

    def __init__(self, request: Any, future: Future) -> None:
        super().__init__()
        self.request = request
        self.future = future


class TurnFinished(Message):
    """A user turn ended.

    error: a one-line reason when the model/API failed or a limit stopped the turn, else None.
    interrupted: True when the person stopped it (Esc / ctrl+c).
    """

    def __init__(self, error: str | None = None, interrupted: bool = False, kind: str | None = None) -> None:
        super().__init__()
        self.error = error
        self.interrupted = interrupted
        self.kind = kind


class CoreLoaded(Message):
    """The background loader finished: ``interpreter`` is ready (or ``error`` says why not).

    info: sidebar facts (``model``, ``model_reason``, ``harness``, ``session_title``, ``notes``...).
    """

    def __init__(self, interpreter: Any = None, error: str | None = None, info: dict | None = None) -> None:
        super().__init__()
        self.interpreter = interpreter
        self.error = error
        self.info = info or {}


class LoadState(Message):
    """A background load step changed state (``what`` e.g. "litellm", "kernel"; ``state`` text)."""

    def __init__(self, what: str, state: str) -> None:
        super().__init__()
        self.what = what
        self.state = state
