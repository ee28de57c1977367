"""Approval request/response shapes shared by every front end (see shared DESIGN.md, Python).

Every kind of request (code, tool call, browser action, MCP call) goes through one handler:
``interpreter.approval_handler(request: ApprovalRequest) -> Approval``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


@dataclass
class ApprovalRequest:
    """What the core asks a person (or policy) to approve.

    kind: "code" | "tool" | "browser" | "mcp".
    language: canonical runtime name for code ("python", "shell", ...), else None.
    tool: the tool's name for tool calls (e.g. "execute", "Read", "mcp__srv__tool"), else None.
    code: the code text (for code requests).
    arguments: the tool call's arguments dict (for tool requests).
    findings: safety findings (semgrep results; empty until the safety issue lands).
    scope: human-readable description of what "always" would allow, e.g. "all python code this session".
    call_id: the tool call id this request answers, when it came as a tool call.
    """

    kind: Literal["code", "tool", "browser", "mcp"] = "code"
    language: str | None = None
    tool: str | None = None
    code: str | None = None
    arguments: dict[str, Any] | None = None
    findings: list[Any] = field(default_factory=list)
    scope: str | None = None
    call_id: str | None = None


@dataclass
class Approval:
    """The answer: action "run" | "decline" | "always".

    code: with "run", edited code to run instead of the proposed code (None = unchanged).
    reason: with "decline", the person's reason, stored for the model.
    """

    action: Literal["run", "decline", "always"] = "decline"
    code: str | None = None
    reason: str | None = None
