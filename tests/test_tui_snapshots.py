"""Snapshot tests (pytest-textual-snapshot) of the main screen's key states, each paired with
Pilot assertions on what must show, so a wrong baseline cannot pass unnoticed.

The app runs without the core (``load_core=False``); its state is driven with the same LMC chunks
and approval messages the core posts. Everything that varies (paths, model, session id, costs,
elapsed time, cursor blink) is frozen. Update baselines with ``pytest --snapshot-update``.
"""

from __future__ import annotations

from concurrent.futures import Future

from oitui.core.approval import ApprovalRequest
from oitui.tui.app import OituiApp
from oitui.tui.messages import ApprovalRequested, CoreChunk

SIZE = (120, 36)
CODE = "import time\nfor i in range(3):\n    print('tick', i)\n    time.sleep(1)\n"


def _app() -> OituiApp:
    return OituiApp(load_core=False)


async def _freeze(pilot) -> None:
    app = pilot.app
    sb = app.sidebar
    sb.model = "openai/gpt-4o-mini"
    sb.model_reason = "OPENAI_API_KEY is set"
    sb.cwd = "/home/ada/project"
    sb.session_id = "k3v9x2ab"
    sb.session_title = "count ticks"
    sb.llm = "ready"
    sb.kernel = "starts on first use"
    sb.cost = 0.0012
    sb.tokens_in = 1234
    sb.tokens_out = 56
    app.prompt.cursor_blink = False
    await pilot.pause()


async def _feed(pilot, chunks) -> None:
    app = pilot.app
    app.busy = True
    for c in chunks:
        app.post_message(CoreChunk(c))
    await pilot.pause(0.3)
    await pilot.pause()


def _code_chunks() -> list[dict]:
    return [
        {"role": "user", "type": "message", "content": "count ticks"},
        {"role": "assistant", "type": "message", "start": True},
        {"role": "assistant", "type": "message", "content": "I'll print three **ticks**, one a second."},
        {"role": "assistant", "type": "message", "end": True},
        {"role": "assistant", "type": "code", "format": "python", "start": True},
        {"role": "assistant", "type": "code", "format": "python", "content": CODE},
        {"role": "assistant", "type": "code", "format": "python", "end": True},
    ]


def test_snapshot_idle_main_screen(snap_compare):
    async def run_before(pilot) -> None:
        await _freeze(pilot)
        app = pilot.app
        assert app.status == "idle"
        assert str(app.query_one("#status").render()) == "idle"
        assert app.prompt.placeholder.startswith("Ask oitui to do something")
        assert app.sidebar.display  # 120 columns: sidebar shown
        assert not app.code_pane.display and not app.approval_bar.display
        assert not app.code_pane.is_mounted  # mounted on first use, not on the first screen

    assert snap_compare(_app(), terminal_size=SIZE, run_before=run_before)


def test_snapshot_block_mid_run_active_line(snap_compare):
    async def run_before(pilot) -> None:
        await _freeze(pilot)
        app = pilot.app
        await pilot.app.conversation.add(__import__("oitui.tui.widgets.conversation", fromlist=["UserMessage"]).UserMessage("count ticks"))
        await _feed(pilot, _code_chunks() + [
            {"role": "computer", "type": "console", "format": "active_line", "content": 3, "start": True},
            {"role": "computer", "type": "console", "format": "output", "content": "tick 0\n\x1b[32mtick 1\x1b[0m\n"},
        ])
        app.code_pane.started = None  # freeze the elapsed time out of the title
        app.code_pane._update_title()
        await pilot.pause()
        assert app.status == "running"
        assert app.code_pane.view.active_line == 3
        assert app.code_pane.border_title == "python · running"
        line = app.code_pane.view.get_line(2)
        assert line.plain == "    print('tick', i)"
        assert any(span.style and getattr(span.style, "bgcolor", None) for span in line.spans)
        assert app.console_pane.text() == "tick 0\n\x1b[32mtick 1\x1b[0m"

    assert snap_compare(_app(), terminal_size=SIZE, run_before=run_before)


def test_snapshot_approval_bar(snap_compare):
    async def run_before(pilot) -> None:
        await _freeze(pilot)
        app = pilot.app
        await _feed(pilot, _code_chunks())
        request = ApprovalRequest(kind="code", language="python", code=CODE,
                                  scope="all python code this session")
        app.post_message(ApprovalRequested(request, Future()))
        await pilot.pause(0.2)
        assert app.status != "approval"  # keys not live yet
        await pilot.pause(0.5)
        assert app.status == "approval"
        assert app.approval_bar.armed
        question = str(app.approval_bar.question.render())
        for part in ("Run this python code?", "[y] run", "[n] decline", "[e] edit", "[a] always",
                     "always = all python code this session"):
            assert part in question
        assert app.code_pane.border_title == "python · awaiting approval"
        assert app.title == "oitui — approval pending"

    assert snap_compare(_app(), terminal_size=SIZE, run_before=run_before)
