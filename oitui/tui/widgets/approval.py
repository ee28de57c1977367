"""The approval bar: asks whether to run the proposed code (or tool call).

Keys: ``y`` run, ``n`` decline (then an optional reason for the model), ``e`` edit in place,
``a`` always allow (the scope from the ``ApprovalRequest`` is written on the bar), ``esc``
declines. Keys are ignored for :attr:`ApprovalBar.ARM_DELAY` seconds after the bar appears so a
stray keystroke can never approve code; any other key repeats the question. Room is kept for
safety findings (``request.findings``).
"""

from __future__ import annotations

import time
from typing import Any

from rich.text import Text
from textual import events
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Static

#: The four choices, never split across lines (see :func:`pack_choices`).
CHOICE_LIST = ("[y] run", "[n] decline", "[e] edit", "[a] always")
CHOICES = "  ".join(CHOICE_LIST)


def pack_choices(width: int) -> str:
    """The choices joined by two spaces, broken into lines of at most ``width`` cells between
    choices only (a choice is never cut, so none can be lost at a narrow width)."""
    lines: list[str] = []
    cur = ""
    for choice in CHOICE_LIST:
        cand = f"{cur}  {choice}" if cur else choice
        if cur and len(cand) > max(width, 1):
            lines.append(cur)
            cur = choice
        else:
            cur = cand
    lines.append(cur)
    return "\n".join(lines)


def describe(request: Any) -> str:
    """One line saying what is asked (``Run this python code?``, ``Allow tool Edit?``)."""
    kind = getattr(request, "kind", "code") or "code"
    if kind == "code":
        return f"Run this {getattr(request, 'language', None) or 'code'} code?"
    tool = getattr(request, "tool", None) or kind
    return f"Allow {kind} call {tool}?"


def default_scope(request: Any) -> str:
    """The scope "always" grants: the request's own text, else a description per DESIGN.md."""
    scope = getattr(request, "scope", None)
    if scope:
        return scope
    if getattr(request, "kind", "code") == "code":
        return f"all {getattr(request, 'language', None) or 'code'} code this session"
    return f"this {getattr(request, 'tool', None) or 'tool'} this session"


class ApprovalBar(Vertical):
    """The question, the choices with the "always" scope, findings and the decline-reason line."""

    ARM_DELAY = 0.5
    can_focus = True

    class Decided(Message):
        """The person answered: ``action`` "run" | "decline" | "always" | "edit"; ``reason`` for declines."""

        def __init__(self, action: str, reason: str | None = None) -> None:
            super().__init__()
            self.action = action
            self.reason = reason

    class Armed(Message):
        """The keys are live now (the status word may say ``approval``)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.question = Static("", id="approval-question", markup=False)
        self.findings = Static("", id="approval-findings", markup=False)
        self.hint = Static("", id="approval-hint", markup=False)
        self.reason = Input(placeholder="reason for the model (optional) · Enter sends · Esc skips", id="approval-reason")
        self.request: Any = None
        self.armed = False
        self.shown_at = 0.0
        self.asking_reason = False
        self._arm_timer = None

    def compose(self):
        yield self.question
        yield self.findings
        yield self.hint
        yield self.reason

    def on_mount(self) -> None:
        self.findings.display = False
        self.reason.display = False
        self.border_title = "approval"

    def ask(self, request: Any, note: str | None = None) -> None:
        """Show the bar for ``request``; keys go live after ARM_DELAY seconds."""
        self.request = request
        self.armed = False
        self.asking_reason = False
        self.shown_at = time.monotonic()
        self._render_question()
        findings = list(getattr(request, "findings", None) or [])
        if findings:
            self.findings.update(Text("\n".join(f"⚠ {_finding(f)}" for f in findings[:5]), style="yellow"))
        self.findings.display = bool(findings)
        self.set_hint(note or "", "dim")
        self.reason.display = False
        self.reason.value = ""
        self.display = True
        self.focus()
        if self._arm_timer is not None:
            self._arm_timer.stop()
        self._arm_timer = self.set_timer(self.ARM_DELAY, self._arm)

    def _render_question(self) -> None:
        if self.request is None:
            return
        width = self.question.size.width or max(self.size.width - 4, 0) or 80
        self.question.update(Text.assemble(
            (describe(self.request), "bold"), "\n", pack_choices(width), "\n",
            ("always = " + default_scope(self.request), "italic"),
        ))

    def on_resize(self, _event) -> None:
        self._render_question()

    def set_hint(self, text: str, style: str = "dim") -> None:
        """Show (or, when empty, hide) the hint line under the question."""
        self.hint.update(Text(text, style=style))
        self.hint.display = bool(text)

    def _arm(self) -> None:
        self._arm_timer = None
        if self.display and self.request is not None:
            self.armed = True
            self.post_message(self.Armed())

    def close(self) -> None:
        """Hide the bar (the question was answered or withdrawn)."""
        self.request = None
        self.armed = False
        self.asking_reason = False
        self.reason.display = False
        self.display = False
        if self._arm_timer is not None:
            self._arm_timer.stop()
            self._arm_timer = None

    def on_key(self, event: events.Key) -> None:
        if self.request is None:
            return
        if self.asking_reason:
            if event.key == "escape":
                event.stop()
                event.prevent_default()
                self.post_message(self.Decided("decline", self.reason.value.strip() or None))
            return
        if event.key in ("tab", "shift+tab", "ctrl+q", "ctrl+c", "ctrl+p"):
            return
        event.stop()
        event.prevent_default()
        if not self.armed:
            return  # a stray key typed before the bar was readable: ignored
        key = event.key
        if key == "y":
            self.post_message(self.Decided("run"))
        elif key == "a":
            self.post_message(self.Decided("always"))
        elif key == "e":
            self.post_message(self.Decided("edit"))
        elif key == "escape":
            self.post_message(self.Decided("interrupt"))
        elif key == "n":
            self.asking_reason = True
            self.reason.display = True
            self.reason.focus()
        else:
            self.set_hint(f"'{event.character or key}' is not a choice: press y, n, e or a", "yellow")

    def on_paste(self, event: events.Paste) -> None:
        event.stop()
        event.prevent_default()
        if self.request is not None:
            self.set_hint("paste ignored while approval waits: press y, n, e or a", "yellow")

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input is self.reason:
            event.stop()
            self.post_message(self.Decided("decline", event.value.strip() or None))


def _finding(f: Any) -> str:
    if isinstance(f, dict):
        return f.get("message") or f.get("check_id") or str(f)
    return str(getattr(f, "message", f))
