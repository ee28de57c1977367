"""Helpers for the agent-core tests: one interpreter per module wired to the scripted server."""

from __future__ import annotations

from typing import Any

from oitui.core.interpreter import OpenInterpreter


def make_interpreter(server, cwd: str, *, function_calling: bool = False) -> OpenInterpreter:
    """An OpenInterpreter talking to ``server`` (model ``openai/scripted``), auto-run on,
    fast retry backoff, code running in ``cwd``. litellm is imported here, so tests that time a
    turn do not pay for the import."""
    from oitui.core.llm import get_litellm

    get_litellm()
    interp = OpenInterpreter()
    interp.llm.model = "openai/scripted"
    interp.llm.api_base = server.url
    interp.llm.api_key = "sk-test"
    interp.llm.supports_functions = function_calling
    interp.llm.supports_vision = False
    interp.llm.backoff = 0.01
    interp.llm.timeout = 60
    interp.auto_run = True
    interp.cwd = cwd
    return interp


def fresh(interp: OpenInterpreter, *, function_calling: bool = False, auto_run: bool = True) -> OpenInterpreter:
    """Reset the conversation and the per-test settings of a shared interpreter."""
    interp.reset()
    interp.llm.supports_functions = function_calling
    interp.llm.supports_vision = False
    interp.llm.max_tokens = None
    interp.llm.context_window = None
    interp.llm.model = "openai/scripted"
    interp.auto_run = auto_run
    interp.loop = False
    interp.max_turns = 50
    interp.max_budget = None
    interp.max_output = 2800
    interp.max_retries_per_code_block = 3
    interp.offline = False
    interp.safe_mode = "off"
    interp.sandbox = "auto"
    interp.sandbox_network = "on"
    interp.add_dir = []
    interp.harness = "native"
    interp.code_scanner = None
    interp.session = None
    interp.output_dir = None
    interp.highlight_active_line = True
    from oitui.core.interpreter import default_approval_handler

    interp.approval_handler = default_approval_handler(interp)
    return interp


def run_turn(interp: OpenInterpreter, message: Any = "go") -> list[dict]:
    """Run one turn with streaming; return every chunk."""
    return list(interp.chat(message, stream=True, display=False))


def outputs(messages: list[dict]) -> list[str]:
    """Stored console outputs, in order, one trailing newline stripped."""
    out = []
    for m in messages:
        if m.get("role") == "computer" and m.get("type") == "console" and m.get("format") == "output":
            text = m.get("content") or ""
            out.append(text[:-1] if text.endswith("\n") else text)
    return out


def codes(messages: list[dict]) -> list[tuple[str, str]]:
    """Stored (language, code) pairs of assistant code messages."""
    return [(m.get("format"), m.get("content")) for m in messages if m.get("role") == "assistant" and m.get("type") == "code"]


def texts(messages: list[dict]) -> list[str]:
    """Stored assistant text messages."""
    return [m.get("content") for m in messages if m.get("role") == "assistant" and m.get("type") == "message"]


def tool_messages(request: dict) -> list[dict]:
    """The ``tool`` messages of a recorded request body."""
    return [m for m in request["messages"] if m.get("role") == "tool"]


def check_runs(chunks: list[dict]) -> None:
    """Assert start/end flags pair up: one run open at a time, every start closed by an end of
    the same role/type (console runs share one pair), content chunks only inside a run."""
    open_run = None
    for c in chunks:
        if c.get("type") in ("confirmation", "error"):
            assert open_run is None, f"{c} inside an open run {open_run}"
            continue
        key = (c.get("role"), c.get("type"), None if c.get("type") == "console" else c.get("format"))
        if c.get("start"):
            assert open_run is None, f"start {c} while {open_run} is open"
            open_run = key
        elif c.get("end"):
            assert open_run == key, f"end {c} does not close {open_run}"
            open_run = None
        else:
            assert open_run == key, f"content chunk {c} outside its run ({open_run})"
    assert open_run is None, f"run {open_run} never closed"


CODE_OUTPUT_PREFIX = "Code output:\n"


def visible_outputs(request: dict) -> list[str]:
    """Model-visible code outputs of a recorded request body, in order (text mode: the user
    messages carrying ``Code output:``; function mode: the ``tool`` messages), one trailing
    newline stripped."""
    out = []
    for m in request["messages"]:
        content = m.get("content")
        if not isinstance(content, str):
            continue
        if m.get("role") == "tool":
            text = content
        elif m.get("role") == "user" and content.startswith(CODE_OUTPUT_PREFIX):
            text = content[len(CODE_OUTPUT_PREFIX):]
        else:
            continue
        out.append(text[:-1] if text.endswith("\n") else text)
    return out
