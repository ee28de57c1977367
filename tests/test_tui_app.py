"""Pilot tests of the main Textual app driving whole turns against the scripted model server.

One scripted server and one real ``OpenInterpreter`` (one Python kernel) are shared by the module;
each test starts a fresh ``OituiApp`` on that interpreter. Case ids from
``shared/cases/tui_cases.md`` and ``fault_cases.md`` name the tests.
"""

from __future__ import annotations

import asyncio
import html
import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from support.scripted_server import ScriptedServer, text_reply, tool_reply

FENCE = "```"


def code_reply(language: str, code: str, before: str = "", **kw) -> dict:
    """A text-mode reply holding one fenced code block."""
    return text_reply([before, f"{FENCE}{language}\n", code if code.endswith("\n") else code + "\n", f"{FENCE}\n"], **kw)


@pytest.fixture(scope="module")
def server():
    srv = ScriptedServer()
    yield srv
    srv.close()


@pytest.fixture(scope="module")
def interp(server):
    from oitui.core.interpreter import OpenInterpreter

    it = OpenInterpreter()
    it.llm.model = "openai/x"
    it.llm.api_base = server.url
    it.llm.api_key = "sk-test-not-real"
    it.llm.supports_functions = False
    yield it
    it.terminate()


@pytest.fixture
def fresh(server, interp):
    """Reset the shared server and interpreter for one test; returns (server, interp)."""
    server.reset()
    server.default = text_reply("DONE.")
    interp.reset()
    interp.auto_run = False
    interp.session = None
    return server, interp


def make_app(interp):
    from oitui.tui.app import OituiApp

    return OituiApp(interpreter=interp)


async def wait_for(pilot, cond, timeout: float = 20.0, what: str = "") -> None:
    """Poll ``cond()`` every 50 ms; fail after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        await pilot.pause(0.05)
    raise AssertionError(f"timed out waiting for {what or cond}")


async def wait_status(pilot, app, status: str, timeout: float = 20.0) -> None:
    await wait_for(pilot, lambda: app.status == status, timeout, f"status {status!r} (now {app.status!r})")


async def ready(pilot, app) -> None:
    await wait_for(pilot, lambda: app.interp is not None and app.session is not None, 20, "core loaded")
    await pilot.pause(0.05)


_KEYS = {" ": "space", "\n": "shift+enter"}


async def type_text(pilot, text: str, delay: float = 0.0) -> None:
    for ch in text:
        await pilot.press(_KEYS.get(ch, ch))
        if delay:
            await pilot.pause(delay)


async def send(pilot, text: str) -> None:
    await type_text(pilot, text)
    await pilot.press("enter")
    await pilot.pause(0.1)


def screen_text(app) -> str:
    """The screen as plain text rows (from the SVG export)."""
    svg = app.export_screenshot()
    rows: dict[float, list[tuple[float, str]]] = {}
    for m in re.finditer(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)" textLength="[\d.]+" clip-path="[^"]*">(.*?)</text>', svg):
        rows.setdefault(float(m.group(2)), []).append((float(m.group(1)), html.unescape(m.group(3))))
    out = []
    for y in sorted(rows):
        line = ""
        for x, t in sorted(rows[y]):
            col = round(x / 12.2)
            line = line.ljust(col)[:col] + t
        out.append(line.replace("\xa0", " "))
    return "\n".join(out)


def request_texts(server, index: int = -1) -> str:
    """All message contents of request ``index`` joined (what the model saw)."""
    msgs = server.requests[index]["messages"]
    parts = []
    for m in msgs:
        c = m.get("content")
        if isinstance(c, list):
            c = " ".join(p.get("text", "") for p in c if isinstance(p, dict))
        parts.append(str(c or ""))
    return "\n".join(parts)


def last_user(server) -> str:
    msgs = [m for m in server.requests[-1]["messages"] if m.get("role") == "user"]
    c = msgs[-1]["content"]
    if isinstance(c, list):
        c = "".join(p.get("text", "") for p in c if isinstance(p, dict))
    return c


# ---------------------------------------------------------------------------- whole turns


async def test_turn_code_approve_output_reply(fresh):
    server, interp = fresh
    server.script = [
        code_reply("python", "for i in range(3):\n    print('n', i)", before="Let me count.\n\n"),
        text_reply("Counted to two. REPLY-OK"),
    ]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        assert app.status == "idle"
        assert app.prompt.placeholder.startswith("Ask oitui")
        await send(pilot, "count please")
        await wait_status(pilot, app, "approval")
        assert "awaiting approval" in app.code_pane.border_title
        assert app.code_pane.view.text == "for i in range(3):\n    print('n', i)"
        assert "Run this python code?" in screen_text(app)
        assert app.title == "oitui — approval pending"
        await pilot.press("y")
        await wait_for(pilot, lambda: "n 2" in app.console_pane.text(), 20, "console output")
        await wait_status(pilot, app, "idle")
        assert app.console_pane.text().splitlines() == ["n 0", "n 1", "n 2"]
        assert app.code_pane.border_title.startswith("python · done")
        assert "REPLY-OK" in app.conversation.plain_text()
        assert "count please" in screen_text(app)
        assert app.chunk_errors == []
        assert len(server.requests) == 2
        assert app.sidebar.tokens_in > 0


async def test_br29b_decline_with_reason(fresh):
    server, interp = fresh
    server.script = [code_reply("python", "print('orig')"), text_reply("OK, not running it.")]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await send(pilot, "run it")
        await wait_status(pilot, app, "approval")
        await pilot.press("n")
        await pilot.pause(0.1)
        assert app.approval_bar.reason.display
        await type_text(pilot, "not today")
        await pilot.press("enter")
        await wait_status(pilot, app, "idle")
        assert "orig" not in app.console_pane.text().replace("print('orig')", "")
        assert "declined" in app.code_pane.border_title
        stored = json.dumps(interp.messages)
        assert "not today" in stored and "declined" in stored
        # the reason reaches the model with the next request
        server.script = [text_reply("understood")]
        await send(pilot, "ok then")
        await wait_status(pilot, app, "idle")
        assert "not today" in request_texts(server)


async def test_br29a_edit_then_run(fresh):
    server, interp = fresh
    server.script = [code_reply("python", "print('orig')"), text_reply("DONE.")]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await send(pilot, "run it")
        await wait_status(pilot, app, "approval")
        await pilot.press("e")
        await pilot.pause(0.1)
        editor = app.code_pane.editor
        assert editor.display and app.focused is editor
        assert editor.text.rstrip("\n") == "print('orig')"
        editor.select_all()
        await type_text(pilot, "print('edited')")
        await pilot.press("escape")
        await pilot.pause(0.05)
        # asked again, showing the edited code; keys are ignored for 0.5 s
        assert app.approval_bar.display and not app.code_pane.editor.display
        assert "edited" in str(app.approval_bar.hint.render())
        assert app.code_pane.view.text == "print('edited')"
        await wait_status(pilot, app, "approval")
        await pilot.press("y")
        await wait_status(pilot, app, "idle")
        assert app.console_pane.text().strip() == "edited"
        code_msgs = [m for m in interp.messages if m.get("type") == "code"]
        assert code_msgs and "print('edited')" in code_msgs[-1]["content"]
        assert "print('edited')" in request_texts(server)


async def test_br29d_invalid_key_repeats_and_early_keys_ignored(fresh):
    server, interp = fresh
    server.script = [code_reply("python", "print('ran-once')"), text_reply("DONE.")]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await send(pilot, "go")
        await wait_for(pilot, lambda: app.approval_bar.display, 20, "approval bar")
        await pilot.press("y")  # within 0.5 s of the bar appearing: ignored
        await pilot.pause(0.1)
        assert app.approval_bar.display and app.console_pane.text() == ""
        await wait_status(pilot, app, "approval")
        await pilot.press("x")
        await pilot.pause(0.2)
        assert "not a choice" in str(app.approval_bar.hint.render())
        assert app.approval_bar.display and app.console_pane.text() == ""
        # TUI-06 D: a paste whose first line is "y" never approves
        from textual import events

        app.approval_bar.post_message(events.Paste("y\nyes\n"))
        await pilot.pause(0.3)
        assert app.approval_bar.display and app.console_pane.text() == ""
        assert len(server.requests) == 1
        await pilot.press("y")
        await wait_status(pilot, app, "idle")
        assert app.console_pane.text().strip() == "ran-once"


async def test_br16_input_answered_in_console(fresh):
    server, interp = fresh
    interp.auto_run = True
    server.script = [code_reply("python", "name = input('Name? ')\nprint('hi', name)"), text_reply("DONE.")]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await send(pilot, "ask my name")
        await wait_for(pilot, lambda: app.console_pane.prompt.display, 30, "input prompt")
        assert "Name?" in app.console_pane.text() + app.console_pane.prompt.placeholder
        assert app.focused is app.console_pane.prompt
        await type_text(pilot, "Ada")
        await pilot.press("enter")
        await wait_for(pilot, lambda: "hi Ada" in app.console_pane.text(), 20, "hi Ada")
        await wait_status(pilot, app, "idle")
        assert app.console_pane.text().splitlines()[:2] == ["Name? Ada", "hi Ada"]


async def test_tui08c_esc_interrupts_loop_kernel_survives(fresh):
    server, interp = fresh
    interp.auto_run = True
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        server.script = [code_reply("python", "x = 41"), text_reply("set.")]
        await send(pilot, "set x")
        await wait_status(pilot, app, "idle")
        server.script = [code_reply("python", "import time\nprint('START', flush=True)\nwhile True:\n    pass"),
                         text_reply("stopped.")]
        await send(pilot, "loop")
        await wait_for(pilot, lambda: "START" in app.console_pane.text(), 30, "START")
        await pilot.pause(0.3)
        assert app.code_pane.view.active_line in (3, 4)
        t0 = time.monotonic()
        await pilot.press("escape")
        await wait_status(pilot, app, "interrupted", timeout=5)
        await wait_status(pilot, app, "idle", timeout=10)
        assert time.monotonic() - t0 < 10
        assert "interrupted" in app.conversation.plain_text()
        server.script = [code_reply("python", "print(x + 1)"), text_reply("42 it is.")]
        await send(pilot, "print x+1")
        await wait_for(pilot, lambda: "42" in app.console_pane.text(), 30, "42")
        await wait_status(pilot, app, "idle")
        assert app.console_pane.text().strip() == "42"


async def test_shell_bang_command_runs_without_model(fresh):
    server, interp = fresh
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await send(pilot, "!echo BANG-$((6*7))")
        await wait_for(pilot, lambda: "BANG-42" in app.console_pane.text(), 20, "shell output")
        await wait_status(pilot, app, "idle")
        assert server.requests == []


async def test_slash_commands(fresh, tmp_path):
    server, interp = fresh
    server.script = [text_reply("first answer")]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await send(pilot, "/help")
        await pilot.pause(0.1)
        assert "/export md|ipynb|json" in app.conversation.plain_text()
        # slash completion: "/au" + tab -> "/auto-run "
        await type_text(pilot, "/au")
        await pilot.pause(0.05)
        assert app.query_one("#completions").display
        await pilot.press("tab")
        assert app.prompt.text == "/auto-run "
        await pilot.press("enter")
        await pilot.pause(0.1)
        assert interp.auto_run is True and app.sidebar.auto_run is True
        await send(pilot, "/auto-run off")
        assert interp.auto_run is False
        await send(pilot, "hello there")
        await wait_status(pilot, app, "idle")
        await wait_for(pilot, lambda: any(m.get("content") == "first answer" for m in interp.messages), 10)
        out = tmp_path / "conv.json"
        app.prompt.load_text(f"/save {out}")
        await pilot.press("enter")
        await pilot.pause(0.2)
        saved = json.loads(out.read_text())
        assert saved["lmc_version"] == 1
        assert [m["content"] for m in saved["messages"]] == ["hello there", "first answer"]
        await send(pilot, "%undo")
        await pilot.pause(0.2)
        assert interp.messages == []
        assert app.prompt.text == "hello there"
        app.prompt.load_text(f"%load_message {out}")
        await pilot.press("enter")
        await pilot.pause(0.3)
        assert [m["content"] for m in interp.messages] == ["hello there", "first answer"]
        assert "first answer" in app.conversation.plain_text()
        await send(pilot, "/tokens")
        assert "context now" in app.conversation.plain_text()
        await send(pilot, "/info")
        assert "session:" in app.conversation.plain_text()
        await send(pilot, "/nosuch")
        await send(pilot, "%reset")
        await pilot.pause(0.2)
        assert interp.messages == []
        await send(pilot, "%% echo MAGIC-OK")
        await wait_for(pilot, lambda: "MAGIC-OK" in app.console_pane.text(), 20)
        await wait_status(pilot, app, "idle")
        await send(pilot, "/clear")
        await pilot.pause(0.1)
        assert len(app.conversation.children) == 0
        # a pasted multi-line text that contains /help is one message, never a command
        app.prompt.load_text("/help\nplease")
        assert __import__("oitui.tui.commands", fromlist=["parse"]).parse(app.prompt.text) is None
        assert server.requests and len(server.requests) == 1


async def test_paste_multiline_is_one_message(fresh):
    from textual import events

    server, interp = fresh
    server.script = [text_reply("got it")]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        payload = "line one\r\n/help\ny\n\tindented\nPASTE-END"
        app.prompt.post_message(events.Paste(payload))
        await pilot.pause(0.2)
        assert server.requests == []
        assert app.prompt.text == payload.replace("\r\n", "\n")
        await pilot.press("enter")
        await wait_status(pilot, app, "idle")
        assert len(server.requests) == 1
        assert last_user(server) == payload.replace("\r\n", "\n")


# ---------------------------------------------------------------------------- TUI-07


SLOW = [f"w{i:02d} " for i in range(1, 24)] + ["T1-END"]


async def test_tui07_a_type_ahead_while_streaming(fresh):
    server, interp = fresh
    server.script = [text_reply(SLOW, interval=0.15)]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "start")
        await wait_for(pilot, lambda: "w01" in app.conversation.plain_text(), 20, "first chunk")
        draft = "draft: yes no edit all"
        for ch in draft:
            t = time.monotonic()
            await pilot.press(_KEYS.get(ch, ch))
            await wait_for(pilot, lambda: app.prompt.text.endswith(ch), 0.5, "echo")
            assert time.monotonic() - t < 0.5
            await pilot.pause(0.03)
        assert app.busy
        await wait_status(pilot, app, "idle")
        assert "T1-END" in app.conversation.plain_text()
        assert app.prompt.text == draft
        assert len(server.requests) == 1
        assert not app.code_pane.display
        server.script = [text_reply("ok")]
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(server.requests) == 2, 20)
        assert last_user(server) == draft
        await wait_status(pilot, app, "idle")


async def test_tui07_b_always_key_runs_and_stays_on(fresh):
    server, interp = fresh
    server.script = [code_reply("shell", "echo RAN-2"), text_reply("done 2"),
                     code_reply("shell", "echo RAN-AGAIN"), text_reply("done again")]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "go2")
        await wait_status(pilot, app, "approval")
        assert "always = all shell code this session" in screen_text(app).replace("\n", " ") or \
            "always" in str(app.approval_bar.question.render())
        await pilot.press("a")
        await wait_for(pilot, lambda: "RAN-2" in app.console_pane.text(), 5, "RAN-2")
        assert app.prompt.text == ""
        await wait_status(pilot, app, "idle")
        await send(pilot, "again")
        await wait_for(pilot, lambda: "RAN-AGAIN" in app.console_pane.text(), 20, "ran without asking")
        await wait_status(pilot, app, "idle")
        assert app.prompt.text == ""


async def test_tui07_c_early_key_before_prompt(fresh):
    server, interp = fresh
    server.script = [code_reply("shell", "echo RAN-3", delay=1.5), text_reply("done 3")]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "go3")
        await pilot.pause(1.2)
        assert not app.approval_bar.display
        await pilot.press("n")  # before the prompt exists: goes into the input
        await wait_for(pilot, lambda: app.approval_bar.display, 20, "approval bar")
        from oitui.tui.widgets.approval import ApprovalBar

        pressed_at = time.monotonic() - app.approval_bar.shown_at
        await pilot.press("n")  # right after it appears: ignored (keys not live yet)
        await pilot.pause(0.1)
        if pressed_at < ApprovalBar.ARM_DELAY - 0.1:  # a loaded machine may be later than that
            assert app.approval_bar.display and not app.approval_bar.reason.display
            assert app.prompt.text == "n"
        else:
            pytest.skip(f"the key reached the bar only {pressed_at:.2f}s after it appeared (machine busy)")
        await wait_status(pilot, app, "approval")
        assert app.console_pane.text() == "" and len(server.requests) == 1
        await pilot.press("y")
        await wait_for(pilot, lambda: "RAN-3" in app.console_pane.text(), 10, "RAN-3")
        await wait_status(pilot, app, "idle")
        assert app.prompt.text == "n"


async def test_tui07_d_enter_while_streaming_queues_once(fresh):
    server, interp = fresh
    server.script = [text_reply(SLOW, interval=0.25), text_reply("answer to queued")]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "first")
        await wait_for(pilot, lambda: "w01" in app.conversation.plain_text(), 20)
        await send(pilot, "queued msg")
        assert app.prompt.text == ""
        note = app.query_one("#queued-note")
        assert note.display and "queued" in str(note.render())
        await send(pilot, "second try")  # only one can be queued: stays in the input
        assert app.prompt.text == "second try"
        await wait_for(pilot, lambda: len(server.requests) == 2, 20, "queued request")
        await wait_status(pilot, app, "idle")
        assert last_user(server) == "queued msg"
        assert sum(1 for m in interp.messages if m.get("role") == "user" and m.get("content") == "queued msg") == 1
        assert len(server.requests) == 2
        assert not note.display


# ---------------------------------------------------------------------------- TUI-08


async def test_tui08_a_esc_stops_stream(fresh):
    server, interp = fresh
    server.script = [text_reply([f"c{i:03d} " for i in range(100)], interval=0.1)]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "stream a lot")
        await wait_for(pilot, lambda: "c005" in app.conversation.plain_text(), 20)
        t0 = time.monotonic()
        await pilot.press("escape")
        await wait_status(pilot, app, "interrupted", timeout=0.7 + 1.0)
        await wait_status(pilot, app, "idle", timeout=5)
        await wait_for(pilot, lambda: server.disconnects, 3, "client disconnect")
        assert server.disconnects[0] - t0 < 2.0
        text = app.conversation.plain_text()
        assert "c005" in text and "c099" not in text and "interrupted" in text
        size = len(text)
        await pilot.pause(0.5)
        assert len(app.conversation.plain_text()) == size
        server.script = [text_reply("normal reply")]
        await send(pilot, "next")
        await wait_status(pilot, app, "idle")
        await wait_for(pilot, lambda: "normal reply" in app.conversation.plain_text(), 5)


async def test_tui08_b_esc_kills_shell_child(fresh):
    server, interp = fresh
    interp.auto_run = True
    server.script = [code_reply("shell", "echo START-$$; sleep 313; echo NOT-REACHED"), text_reply("ok")]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "sleep")
        await wait_for(pilot, lambda: "START-" in app.console_pane.text(), 30, "START-")
        await pilot.press("escape")
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            if subprocess.run(["pgrep", "-f", "^sleep 313$"], capture_output=True).returncode != 0:
                break
            await pilot.pause(0.1)
        assert subprocess.run(["pgrep", "-f", "^sleep 313$"], capture_output=True).returncode != 0
        await wait_status(pilot, app, "idle", timeout=10)
        await pilot.pause(0.3)
        assert "NOT-REACHED" not in app.console_pane.text()
        assert "interrupted" in app.conversation.plain_text()  # the interrupt note
        blocks = list(app.query("CodeBlock"))
        assert blocks and blocks[-1].state == "interrupted"
        # text mode: the interrupted output goes back to the model with the next message
        server.script = [text_reply("after the interrupt")]
        await send(pilot, "what happened?")
        await wait_status(pilot, app, "idle")
        seen = request_texts(server)
        assert "START-" in seen and "NOT-REACHED" not in seen.replace("echo NOT-REACHED", "")


async def test_tui08_d_esc_at_approval(fresh):
    server, interp = fresh
    server.script = [code_reply("python", "print('MUST-NOT-RUN')")]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "go")
        await wait_status(pilot, app, "approval")
        await pilot.press("escape")
        await wait_status(pilot, app, "idle", timeout=5)
        assert "MUST-NOT-RUN" not in app.console_pane.text()
        assert not app.approval_bar.display
        server.script = [text_reply("fine")]
        await send(pilot, "next")
        await wait_status(pilot, app, "idle")
        assert "fine" in app.conversation.plain_text()


# ---------------------------------------------------------------------------- TUI-09


async def test_tui09_a_ctrl_c_idle_never_quits(fresh):
    server, interp = fresh
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await pilot.press("ctrl+c")
        await pilot.pause(0.3)
        assert app.is_running
        assert any("ctrl+q" in n.message for n in app._notifications)
        assert app.status == "idle"


async def test_tui09_b_ctrl_c_while_streaming_interrupts(fresh):
    server, interp = fresh
    server.script = [text_reply([f"s{i:02d} " for i in range(60)], interval=0.1)]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "stream")
        await wait_for(pilot, lambda: "s03" in app.conversation.plain_text(), 20)
        await pilot.press("ctrl+c")
        await wait_status(pilot, app, "interrupted", timeout=2)
        await wait_status(pilot, app, "idle", timeout=5)
        assert app.is_running
        path = Path(app.session.path)
        lines = [json.loads(x) for x in path.read_text().splitlines()]
        assert any(m.get("role") == "user" and m.get("content") == "stream" for m in lines)


async def test_tui09_d_ctrl_q_quits_after_saving(fresh):
    server, interp = fresh
    server.script = [text_reply("the last message")]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "hello")
        await wait_status(pilot, app, "idle")
        path = Path(app.session.path)
        await pilot.press("ctrl+q")
        await pilot.pause(0.2)
    assert app.return_code == 0
    raw = path.read_bytes()
    assert raw.endswith(b"\n") and b"\x00" not in raw
    lines = [json.loads(x) for x in raw.decode().splitlines()]
    messages = [x for x in lines if "role" in x]
    assert messages[-1]["content"] == "the last message"


async def test_tui09_c_ctrl_c_copies_selection(fresh):
    server, interp = fresh
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        app.prompt.load_text("COPY-ME-1234 done")
        app.prompt.select_line(0)
        app.prompt.selection = type(app.prompt.selection)((0, 0), (0, 12))
        await pilot.press("ctrl+c")
        await pilot.pause(0.1)
        assert app.clipboard == "COPY-ME-1234"
        assert app.is_running and app.status == "idle"


def test_crash_gives_nonzero_return_code():
    from oitui.tui.app import OituiApp

    class Crashing(OituiApp):
        def on_mount(self) -> None:
            super().on_mount()
            self.set_timer(0.05, self._boom)

        def _boom(self) -> None:
            raise RuntimeError("forced crash")

    async def main():
        app = Crashing(load_core=False)
        with pytest.raises(RuntimeError):
            async with app.run_test(size=(80, 24)) as pilot:
                await pilot.pause(0.5)
        return app.return_code

    assert asyncio.run(main()) == 1


def test_import_does_not_load_litellm_or_jupyter():
    code = ("import sys, oitui.tui.app; bad = [m for m in ('litellm', 'jupyter_client', 'ipykernel') "
            "if m in sys.modules]; print(bad)")
    out = subprocess.run([__import__("sys").executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


# ---------------------------------------------------------------------------- more cases


async def test_tui08_e_esc_closes_only_the_modal(fresh):
    from oitui.tui.sessions_screen import SessionBrowser

    server, interp = fresh
    server.script = [text_reply([f"m{i:02d} " for i in range(60)], interval=0.1)]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "stream")
        await wait_for(pilot, lambda: "m02" in app.conversation.plain_text(), 20)
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionBrowser), 5, "session browser")
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, SessionBrowser), 5, "browser closed")
        size = len(app.conversation.plain_text())
        assert app.busy and app.status == "streaming"
        await pilot.pause(0.6)
        assert len(app.conversation.plain_text()) > size  # the stream went on
        await pilot.press("escape")
        await wait_status(pilot, app, "interrupted", timeout=2)
        await wait_status(pilot, app, "idle", timeout=5)


async def test_resume_from_session_browser(fresh):
    from oitui.tui.sessions_screen import SessionBrowser

    server, interp = fresh
    server.script = [text_reply("remember RESUME-ME")]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "first session")
        await wait_status(pilot, app, "idle")
        old_id = app.session.id
        await send(pilot, "/reset")
        await pilot.pause(0.2)
        assert app.session.id != old_id and "RESUME-ME" not in app.conversation.plain_text()
        await send(pilot, "/sessions")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionBrowser), 5, "session browser")
        app.screen.dismiss(old_id)
        await wait_for(pilot, lambda: "RESUME-ME" in app.conversation.plain_text(), 5, "resumed")
        assert app.session.id == old_id
        assert [m["content"] for m in interp.messages] == ["first session", "remember RESUME-ME"]


async def test_tui01_narrow_approval_shows_all_choices(fresh):
    server, interp = fresh
    server.script = [code_reply("shell", "echo " + "0123456789" * 10 + "XYZAB")]
    app = make_app(interp)
    async with app.run_test(size=(40, 24)) as pilot:
        await ready(pilot, app)
        assert not app.sidebar.display  # hidden below 100 columns
        await send(pilot, "run it")
        await wait_status(pilot, app, "approval")
        text = screen_text(app)
        for choice in ("[y] run", "[n] decline", "[e] edit", "[a] always"):
            assert choice in text, text
        assert app.query_one("#statusbar").size.height == 1
        await pilot.press("n")
        await pilot.press("enter")
        await wait_status(pilot, app, "idle")


async def test_reasoning_collapsed_and_image_saved(fresh, tmp_path):
    import base64

    from oitui.tui.messages import CoreChunk
    from oitui.tui.widgets.conversation import ImageItem, ReasoningBlock

    server, interp = fresh
    app = make_app(interp)
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.new("RGB", (8, 6), (200, 30, 30)).save(buf, format="PNG")
    png = base64.b64encode(buf.getvalue()).decode()
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        for c in [{"role": "assistant", "type": "reasoning", "start": True},
                  {"role": "assistant", "type": "reasoning", "content": "thinking hard"},
                  {"role": "assistant", "type": "reasoning", "end": True},
                  {"role": "computer", "type": "image", "format": "base64.png", "content": png, "start": True, "end": True}]:
            app.post_message(CoreChunk(c))
        await pilot.pause(0.3)
        block = app.query_one(ReasoningBlock)
        assert block.collapsed and block.text == "thinking hard"
        item = app.query_one(ImageItem)
        assert Path(item.path).read_bytes()[:4] == b"\x89PNG"
        assert f"image saved to {item.path}" in screen_text(app).replace("\n", "")  or Path(item.path).exists()
        assert app.chunk_errors == []


async def test_missing_api_key_note(fresh, monkeypatch):
    from oitui.core.interpreter import OpenInterpreter
    from oitui.tui.app import OituiApp

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    it = OpenInterpreter()
    it.llm.model = "gpt-4o-mini"
    app = OituiApp(interpreter=it)
    async with app.run_test(size=(100, 30)) as pilot:
        await wait_for(pilot, lambda: "No API key" in app.conversation.plain_text(), 30, "key note")
        assert "OPENAI_API_KEY" in app.conversation.plain_text()
        assert app.status == "idle" and app.is_running


async def test_console_bounded_and_conversation_pruned():
    from oitui.tui.app import OituiApp
    from oitui.tui.widgets.console import ConsolePane
    from oitui.tui.widgets.conversation import Conversation, Note

    app = OituiApp(load_core=False)
    async with app.run_test(size=(100, 30)) as pilot:
        assert not app.console_pane.is_mounted  # not on the first screen: mounted on first use
        await app._ensure_panes()
        console = app.console_pane
        console.display = True
        console.write("".join(f"line {i}\n" for i in range(ConsolePane.MAX_LINES + 250)) + "\x1b[31mred")
        console.refresh_body()
        lines = console.text().splitlines()
        assert len(lines) == ConsolePane.MAX_LINES + 1
        assert lines[0] == "line 250" and lines[-1] == "\x1b[31mred"
        assert console.dropped == 250 and "250 earlier lines dropped" in console.border_title
        console.write("\rprogress 10%\rprogress 99%\n")
        assert console.text().splitlines()[-1] == "progress 99%"
        conv = app.conversation
        for i in range(Conversation.MAX_ITEMS + 15):
            await conv.add(Note(f"note {i}"))
        assert len(conv.children) == Conversation.MAX_ITEMS and conv.pruned == 15
        assert conv.children[0].text == "note 15"
        await pilot.pause()


async def test_api_error_is_one_readable_line_and_next_turn_works(fresh):
    from support.scripted_server import error_reply

    server, interp = fresh
    server.script = [error_reply(401, "Incorrect API key provided: sk-test")]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "hi")
        await wait_status(pilot, app, "error", timeout=30)
        errors = [n.text for n in app.conversation.query(".conv-error")]
        assert errors and all("\n" not in e for e in errors)
        assert "401" in errors[-1] or "API key" in errors[-1] or "auth" in errors[-1].lower()
        await wait_status(pilot, app, "idle", timeout=5)
        assert app.is_running
        server.script = [text_reply("recovered")]
        await send(pilot, "again")
        await wait_status(pilot, app, "idle")
        assert "recovered" in app.conversation.plain_text()


async def test_palette_model_export_copy(fresh, tmp_path, monkeypatch):
    server, interp = fresh
    server.script = [text_reply("copy **this** reply")]
    monkeypatch.chdir(tmp_path)
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        # command palette entry "safety: toggle auto-run"
        await pilot.press("ctrl+p")
        await pilot.pause(0.3)
        await type_text(pilot, "toggle auto-run")
        await pilot.pause(0.5)
        await pilot.press("enter")
        await wait_for(pilot, lambda: interp.auto_run is True, 5, "auto-run via palette")
        await send(pilot, "/auto-run off")
        await send(pilot, "reply please")
        await wait_status(pilot, app, "idle")
        await send(pilot, "/copy")
        await pilot.pause(0.1)
        assert app.clipboard == "copy **this** reply"
        await send(pilot, "/export md")
        await pilot.pause(0.3)
        exported = tmp_path / f"oitui-{app.session.id}.md"
        assert "copy **this** reply" in exported.read_text()
        await send(pilot, "/theme textual-light")
        assert app.theme == "textual-light"
        from oitui.tui.app import ChoiceScreen

        await send(pilot, "/model")
        await wait_for(pilot, lambda: isinstance(app.screen, ChoiceScreen), 5, "model picker")
        await pilot.press("down")
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ChoiceScreen), 5, "picker closed")
        assert interp.llm.model != "openai/x" and app.sidebar.model == interp.llm.model
        await send(pilot, "/model openai/other-model")
        assert interp.llm.model == "openai/other-model" and app.sidebar.model == "openai/other-model"
        interp.llm.model = "openai/x"


async def test_function_mode_tool_call_approved(fresh):
    server, interp = fresh
    interp.llm.supports_functions = True
    try:
        server.script = [tool_reply(("call_1", "execute", json.dumps({"language": "shell", "code": "echo TOOL-RAN"}))),
                         text_reply("tool done")]
        app = make_app(interp)
        async with app.run_test(size=(100, 30)) as pilot:
            await ready(pilot, app)
            await send(pilot, "use the tool")
            await wait_status(pilot, app, "approval")
            assert "echo TOOL-RAN" in app.code_pane.view.text
            await pilot.press("y")
            await wait_for(pilot, lambda: "TOOL-RAN" in app.console_pane.text(), 20, "tool output")
            await wait_status(pilot, app, "idle")
            assert "tool done" in app.conversation.plain_text()
            tool_msgs = [m for m in server.requests[-1]["messages"] if m.get("role") == "tool"]
            assert tool_msgs and tool_msgs[-1]["tool_call_id"] == "call_1"
    finally:
        interp.llm.supports_functions = False


async def test_history_and_tiny_terminal():
    from oitui.tui.app import OituiApp

    app = OituiApp(load_core=False)
    async with app.run_test(size=(80, 24)) as pilot:
        prompt = app.prompt
        prompt.add_history("first")
        prompt.add_history("second")
        prompt.load_text("draft")
        await pilot.press("up")
        assert prompt.text == "second"
        await pilot.press("up")
        assert prompt.text == "first"
        await pilot.press("down")
        await pilot.press("down")
        assert prompt.text == "draft"
        await pilot.press("shift+enter")
        await type_text(pilot, "x")
        assert prompt.text == "draft\nx"
        await pilot.resize_terminal(20, 10)
        await pilot.pause(0.2)
        await pilot.resize_terminal(80, 24)
        await pilot.pause(0.2)
        assert app.is_running and prompt.text == "draft\nx"
        assert str(app.query_one("#status").render()) == "idle"


async def test_at_mention_attaches_file_and_tab_completes(fresh, tmp_path, monkeypatch):
    server, interp = fresh
    (tmp_path / "notes_for_model.txt").write_text("SECRET-FACT 42\n")
    monkeypatch.chdir(tmp_path)
    server.script = [text_reply("read it")]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await type_text(pilot, "summarize @notes_f")
        await pilot.press("tab")
        assert app.prompt.text == "summarize @notes_for_model.txt"
        await pilot.press("enter")
        await wait_status(pilot, app, "idle")
        sent = last_user(server)
        assert sent.startswith("summarize @notes_for_model.txt") and "SECRET-FACT 42" in sent
        assert "attached: notes_for_model.txt" in app.conversation.plain_text()


async def test_paging_keys_scroll_conversation_from_input():
    from oitui.tui.app import OituiApp
    from oitui.tui.widgets.conversation import Note

    app = OituiApp(load_core=False)
    async with app.run_test(size=(80, 24)) as pilot:
        conv = app.conversation
        for i in range(60):
            await conv.add(Note(f"row {i}"))
        await pilot.pause(0.2)
        conv.scroll_end(animate=False)
        await pilot.pause(0.1)
        bottom = conv.scroll_y
        assert bottom > 0 and app.focused is app.prompt
        await pilot.press("pageup")
        await pilot.pause(0.2)
        assert conv.scroll_y < bottom
        await pilot.press("ctrl+home")
        await pilot.pause(0.2)
        assert conv.scroll_y == 0
        await pilot.press("pagedown")
        await pilot.pause(0.2)
        assert conv.scroll_y > 0


async def test_code_pane_follows_the_theme_and_the_choice_persists(fresh, oitui_home):
    """The live code pane's TextArea theme and Pygments style follow the app theme
    (themes.text_area_theme_for / code_theme_for), and ``/theme NAME`` is saved to config.toml."""
    from oitui.core.settings import load_settings

    server, interp = fresh
    app = make_app(interp)
    async with app.run_test(size=(120, 36)) as pilot:
        await ready(pilot, app)
        await wait_for(pilot, lambda: "oitui-light" in app.available_themes, 20, "our themes registered")
        await app.run_command("theme", "oitui-dark")
        await pilot.pause(0.1)
        await app._ensure_panes()  # mounted on first use (normally by the first turn)
        await pilot.pause(0.1)
        app.code_pane.begin("python")
        app.code_pane.set_code("x = 1\nprint(x)\n")
        await pilot.pause(0.1)
        view = app.code_pane.view
        assert view.theme == "vscode_dark" and app.code_pane.editor.theme == "vscode_dark"
        view._highlighted()
        assert view._cache_key[2] == "one-dark"
        await app.run_command("theme", "oitui-light")
        await pilot.pause(0.1)
        assert app.theme == "oitui-light"
        assert view.theme == "github_light" and app.code_pane.editor.theme == "github_light"
        view._highlighted()
        assert view._cache_key[2] == "friendly"
    text = (oitui_home / "config.toml").read_text()
    assert 'theme = "oitui-light"' in text
    assert load_settings().get("theme") == "oitui-light"


async def test_streaming_code_is_drawn_live_once_in_the_conversation():
    """While a block streams, the live code pane follows every chunk but the conversation's copy
    is highlighted only when the block is complete (not once per chunk)."""
    from oitui.tui.app import OituiApp
    from oitui.tui.messages import CoreChunk
    from oitui.tui.widgets.conversation import CodeBlock

    app = OituiApp(load_core=False)
    async with app.run_test(size=(120, 36)) as pilot:
        app.busy = True
        app.post_message(CoreChunk({"role": "assistant", "type": "code", "format": "python", "start": True}))
        for i in range(40):
            app.post_message(CoreChunk({"role": "assistant", "type": "code", "format": "python",
                                        "content": f"print({i})\n"}))
            if i % 5 == 4:
                await pilot.pause(0.05)  # several flushes (about 30 a second) while it streams
        await pilot.pause(0.2)
        block = app.query_one(CodeBlock)
        assert "print(39)" in app.code_pane.view.text  # the live pane is up to date
        assert block.code.endswith("print(39)\n")
        assert block.renders <= 1  # only the empty block at mount
        app.post_message(CoreChunk({"role": "assistant", "type": "code", "format": "python", "end": True}))
        await pilot.pause(0.2)
        assert block.renders == 2  # drawn once, complete


async def test_tui06_c_large_paste_is_a_chip_sent_in_full(fresh):
    """A paste over CHIP_CHARS shows as a chip at once and the whole text is sent on Enter."""
    from textual import events

    from oitui.tui.widgets.input_box import CHIP_CHARS

    server, interp = fresh
    server.script = [text_reply("got the big one")]
    big = "".join(f"row {i:05d} " + "z" * 40 + "\r\n" for i in range(3000)) + "BIG-END"
    assert len(big) > CHIP_CHARS
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        started = time.monotonic()
        app.prompt.post_message(events.Paste(big))
        await pilot.pause(0.1)
        assert app.prompt.text == "[paste #1: 3,001 lines, 153 KB]"  # CRLF counted as LF
        assert time.monotonic() - started < 1.0
        await type_text(pilot, " see above")
        await pilot.press("enter")
        await wait_status(pilot, app, "idle")
        assert len(server.requests) == 1
        assert last_user(server) == big.replace("\r\n", "\n") + " see above"


# ---------------------------------------------------------------------------- newcomer bugs


def _session_store():
    from oitui.core.sessions import SessionStore
    from oitui.core.settings import paths

    return SessionStore(paths().sessions_dir)


async def test_resume_restores_token_totals_and_adds_up(fresh):
    """Resuming (-c / --resume) shows the session's totals and the next turn adds to them."""
    server, interp = fresh
    store = _session_store()
    old = store.create(model="openai/x", cwd=str(Path.cwd()), title="old totals")
    old.append({"role": "user", "type": "message", "content": "earlier"})
    old.append({"role": "assistant", "type": "message", "content": "EARLIER-REPLY"})
    old.update_meta(prompt_tokens=68, completion_tokens=21, cost=0.5)
    old.close()
    interp.metrics = {"prompt_tokens": 999, "completion_tokens": 999, "cost": None}  # stale counts
    server.script = [text_reply("more", usage={"prompt_tokens": 54, "completion_tokens": 5})]
    from oitui.tui.app import OituiApp

    app = OituiApp(interpreter=interp, resume=old.id)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await wait_for(pilot, lambda: "EARLIER-REPLY" in app.conversation.plain_text(), 10, "rebuilt")
        await pilot.pause(0.1)
        assert (app.sidebar.tokens_in, app.sidebar.tokens_out) == (68, 21)
        assert app.sidebar.cost == 0.5
        assert app.sidebar.session_title == "old totals"
        await send(pilot, "one more")
        await wait_status(pilot, app, "idle")
        assert (interp.metrics["prompt_tokens"], interp.metrics["completion_tokens"]) == (122, 26)
        assert (app.sidebar.tokens_in, app.sidebar.tokens_out) == (122, 26)
    meta = store.open(old.id).meta
    assert (meta["prompt_tokens"], meta["completion_tokens"]) == (122, 26)


async def test_switching_sessions_with_browser_swaps_totals_and_title(fresh):
    from oitui.tui.sessions_screen import SessionBrowser

    server, interp = fresh
    store = _session_store()
    other = store.create(model="openai/x", cwd=str(Path.cwd()))  # no title
    other.append({"role": "user", "type": "message", "content": "other one"})
    other.update_meta(prompt_tokens=7, completion_tokens=3, cost=0)
    other.close()
    server.script = [text_reply("first reply", usage={"prompt_tokens": 40, "completion_tokens": 4})]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await send(pilot, "first")
        await wait_status(pilot, app, "idle")
        assert (app.sidebar.tokens_in, app.sidebar.tokens_out) == (40, 4)
        app.sidebar.session_title = "a title of the previous session"
        await pilot.press("ctrl+s")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionBrowser), 5, "session browser")
        app.screen.dismiss(other.id)
        await wait_for(pilot, lambda: app.session.id == other.id, 5, "switched")
        await pilot.pause(0.1)
        assert (app.sidebar.tokens_in, app.sidebar.tokens_out) == (7, 3)
        assert interp.metrics["prompt_tokens"] == 7 and interp.metrics["cost"] is None
        assert app.sidebar.session_title == "other one"  # its own title (from its first message)


async def test_reloaded_blocks_show_their_real_state(fresh):
    from oitui.tui.widgets.conversation import CodeBlock

    server, interp = fresh
    interp.messages = [
        {"role": "user", "type": "message", "content": "go"},
        {"role": "assistant", "type": "code", "format": "python", "content": "print('no')"},
        {"role": "computer", "type": "console", "format": "output",
         "content": "I have declined to run this code. not today"},
        {"role": "assistant", "type": "code", "format": "python", "content": "1/0"},
        {"role": "computer", "type": "console", "format": "output",
         "content": "Traceback (most recent call last):\n  File \"<stdin>\", line 1\nZeroDivisionError: division by zero\n"},
        {"role": "assistant", "type": "code", "format": "python", "content": "import time; time.sleep(99)"},
        {"role": "computer", "type": "console", "format": "output",
         "content": "Traceback (most recent call last):\n  File \"<stdin>\", line 1\nKeyboardInterrupt\n"},
        {"role": "assistant", "type": "code", "format": "python", "content": "1/0"},
        {"role": "computer", "type": "console", "format": "output",
         "content": "Stopped: the same python code failed 3 times (max_retries_per_code_block = 3); it was not run again."},
        {"role": "assistant", "type": "code", "format": "python", "content": "print('ok')"},
        {"role": "computer", "type": "console", "format": "output", "content": "ok\n"},
    ]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await app._rebuild_conversation()
        await pilot.pause(0.1)
        blocks = list(app.conversation.query(CodeBlock))
        assert [b.state for b in blocks] == ["declined", "failed", "interrupted", "not run", "done"]
        assert [str(b.header.render()) for b in blocks][0] == "python · declined"


async def test_retry_guard_leaves_no_streaming_block_and_error_shown_once(fresh):
    from oitui.tui.widgets.conversation import CodeBlock

    server, interp = fresh
    interp.auto_run = True
    bad = "raise ValueError('again')"
    server.script = [code_reply("python", bad) for _ in range(4)]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await send(pilot, "try it")
        await wait_status(pilot, app, "error", timeout=60)
        blocks = list(app.conversation.query(CodeBlock))
        assert len(blocks) == 4
        assert [b.state for b in blocks] == ["failed", "failed", "failed", "not run"]
        assert not app.code_pane.state.startswith("streaming")
        errors = [n.text for n in app.conversation.query(".conv-error")]
        stopped = [e for e in errors if "Stopped: the same python code failed 3 times" in e]
        assert len(stopped) == 1, errors
        await wait_status(pilot, app, "idle", timeout=5)


async def test_missing_key_error_shown_once(fresh):
    from support.scripted_server import error_reply

    server, interp = fresh
    server.script = [error_reply(401, "Incorrect API key provided: sk-test")]
    app = make_app(interp)
    async with app.run_test(size=(100, 30)) as pilot:
        await ready(pilot, app)
        await send(pilot, "hi")
        await wait_status(pilot, app, "error", timeout=30)
        await pilot.pause(0.2)
        errors = [n.text for n in app.conversation.query(".conv-error")]
        assert len(errors) == 1, errors


async def test_sidebar_shows_always_allowed_language(fresh):
    server, interp = fresh
    server.script = [code_reply("python", "print('A1')"), text_reply("DONE.")]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        assert "auto-run off" in " ".join(screen_text(app).split())
        await send(pilot, "run")
        await wait_status(pilot, app, "approval")
        await pilot.press("a")
        await wait_status(pilot, app, "idle")
        assert app.sidebar.always == "python"
        assert "python always" in screen_text(app)
        assert not app.sidebar.auto_run


async def test_large_output_header_says_cut_with_real_total(fresh):
    from oitui.tui.widgets.conversation import CodeBlock

    server, interp = fresh
    interp.auto_run = True
    server.script = [code_reply("python", "for i in range(100000):\n    print(i)"), text_reply("DONE.")]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await send(pilot, "print a lot")
        await wait_status(pilot, app, "idle", timeout=120)
        block = app.query_one(CodeBlock)
        title = str(block.folder.title)
        assert "100,000" in title and "cut" in title, title
        # reloaded from the stored (truncated) console message: the banner names the full size
        await app._rebuild_conversation()
        await pilot.pause(0.1)
        title = str(app.query_one(CodeBlock).folder.title)
        assert "100,000" in title and "cut" in title, title


async def test_model_reason_from_config_toml(tmp_path, monkeypatch):
    """`model = "local/smollm2"` in config.toml: the sidebar's reason names config.toml."""
    from oitui.core.settings import load_settings_or_defaults
    from oitui.tui.app import OituiApp

    monkeypatch.setenv("OITUI_HOME", str(tmp_path))
    (tmp_path / "config.toml").write_text('model = "local/smollm2"\n', encoding="utf-8")
    settings, error = load_settings_or_defaults()
    assert error is None
    app = OituiApp(settings=settings)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_for(pilot, lambda: app.interp is not None, 30, "core loaded")
            await pilot.pause(0.1)
            assert app.sidebar.model == "local/smollm2"
            assert app.sidebar.model_reason == "from config.toml"
            assert "no API key" not in app.sidebar.model_reason
    finally:
        if app.interp is not None:
            app.interp.terminate()


async def test_two_blocks_in_one_reply_each_get_their_own_output(fresh):
    """Both blocks stream before the first is asked about: each approval, state and output
    belongs to its own block; declining the first leaves the second `not run`."""
    from oitui.tui.widgets.conversation import CodeBlock

    server, interp = fresh
    two = text_reply([f"{FENCE}python\nprint('B1')\n{FENCE}\n\n{FENCE}python\nprint('B2')\n{FENCE}\n"])
    server.script = [two, text_reply("DONE."), two, text_reply("OK.")]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await send(pilot, "two")
        await wait_status(pilot, app, "approval")
        assert app.code_pane.view.text.strip() == "print('B1')"
        await pilot.press("y")
        await wait_for(pilot, lambda: app.status == "approval" and "B2" in app.code_pane.view.text, 20, "2nd ask")
        await pilot.press("y")
        await wait_status(pilot, app, "idle")
        blocks = list(app.conversation.query(CodeBlock))
        assert [(b.state, b.output.strip()) for b in blocks] == [("done", "B1"), ("done", "B2")]
        await send(pilot, "again")
        await wait_status(pilot, app, "approval")
        await pilot.press("n")
        await pilot.press("enter")
        await wait_status(pilot, app, "idle")
        assert [b.state for b in app.conversation.query(CodeBlock)][2:] == ["declined", "not run"]


async def test_two_blocks_auto_run_each_get_their_own_output(fresh):
    """BR-04 in the TUI with auto-run: both blocks stream before either runs; each output run
    lands under its own block, in order."""
    from oitui.tui.widgets.conversation import CodeBlock

    server, interp = fresh
    interp.auto_run = True
    server.script = [
        text_reply([f"First:\n{FENCE}python\nx = 5\nprint(x)\n{FENCE}\nThen:\n{FENCE}python\nprint(x * 2)\n{FENCE}\nDone.\n"]),
        text_reply("DONE."),
    ]
    app = make_app(interp)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app)
        await send(pilot, "two")
        await wait_for(pilot, lambda: len(server.requests) >= 2 and app.status == "idle", 30, "the turn to end")
        blocks = list(app.conversation.query(CodeBlock))
        assert [(b.state, b.output.strip()) for b in blocks] == [("done", "5"), ("done", "10")]


async def test_no_api_key_turn_error_shown_once(fresh, monkeypatch):
    """The core's "No API key for …" error chunk and the raised error are one line, not two."""
    from oitui.core.interpreter import OpenInterpreter
    from oitui.tui.app import OituiApp

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    it = OpenInterpreter()
    it.llm.model = "gpt-4o"
    app = OituiApp(interpreter=it)
    try:
        async with app.run_test(size=(100, 30)) as pilot:
            await ready(pilot, app)
            await send(pilot, "hi")
            await wait_status(pilot, app, "error", timeout=30)
            await pilot.pause(0.2)
            errors = [n.text for n in app.conversation.query(".conv-error") if "No API key for gpt-4o" in n.text]
            assert len(errors) == 1, errors
            assert "OPENAI_API_KEY" in errors[0]
    finally:
        it.terminate()
