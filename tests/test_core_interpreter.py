"""The agent core beyond the fault cases: approval (BR-29 decline and edit), confirmation chunks,
loop mode, images, offline mode, compaction/trimming, stop(), sessions and metrics."""

from __future__ import annotations

import base64
import json
import socket
import threading
import time

import pytest

from oitui import Approval, ApprovalRequest, OpenInterpreter
from oitui.core.respond import DECLINED
from support.core_helpers import (
    check_runs,
    codes,
    fresh,
    make_interpreter,
    outputs,
    run_turn,
    texts,
    tool_messages,
    visible_outputs,
)
from support.scripted_server import (  # noqa: F401  (fixtures)
    scripted_server,
    scripted_server_module,
    text_reply,
    tool_reply,
)

PNG_1x1 = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@pytest.fixture(scope="module")
def shared(scripted_server_module, tmp_path_factory):
    interp = make_interpreter(scripted_server_module, str(tmp_path_factory.mktemp("core")))
    yield interp
    interp.terminate()


@pytest.fixture
def interp(shared, scripted_server):
    return fresh(shared)


# -- approval ---------------------------------------------------------------------------------


def test_br29b_decline_stores_message_and_ends_turn(interp, scripted_server):
    fresh(interp, auto_run=False)
    asked: list[ApprovalRequest] = []

    def handler(req):
        asked.append(req)
        return Approval(action="decline")

    interp.approval_handler = handler
    scripted_server.reset([text_reply("```python\nprint('orig')\n```"), text_reply("DONE.")])
    chunks = run_turn(interp)
    check_runs(chunks)
    assert len(asked) == 1 and asked[0].language == "python" and asked[0].code == "print('orig')"
    assert asked[0].scope == "all python code this session"
    assert outputs(interp.messages) == [DECLINED]
    assert not any(c.get("format") == "active_line" for c in chunks)  # nothing executed
    assert len(scripted_server.requests) == 1  # not re-offered in a loop
    scripted_server.reset([text_reply("OK.")])
    interp.chat("why?", display=False)
    sent = str(scripted_server.requests[0]["messages"])
    assert sent.count(DECLINED) == 1


def test_br29_decline_reason_reaches_model(interp, scripted_server):
    fresh(interp, auto_run=False, function_calling=True)
    interp.approval_handler = lambda req: Approval(action="decline", reason="Too risky.")
    scripted_server.reset([tool_reply(("call_1", "execute", '{"language": "python", "code": "print(1)"}'),
                                      ("call_2", "execute", '{"language": "python", "code": "print(2)"}'))])
    run_turn(interp)
    scripted_server.reset([text_reply("OK.")])
    interp.chat("next", display=False)
    tools = tool_messages(scripted_server.requests[0])
    assert [t["tool_call_id"] for t in tools] == ["call_1", "call_2"]
    assert tools[0]["content"] == f"{DECLINED} Too risky."
    assert "declined" in tools[1]["content"]


def test_br29a_edited_code_replaces_block(interp, scripted_server):
    fresh(interp, auto_run=False)
    interp.approval_handler = lambda req: Approval(action="run", code="print('edited')")
    scripted_server.reset([text_reply("```python\nprint('orig')\n```"), text_reply("DONE.")])
    run_turn(interp)
    assert outputs(interp.messages) == ["edited"]
    assert codes(interp.messages) == [("python", "print('edited')")]
    sent = str(scripted_server.requests[1]["messages"])
    assert "print('edited')" in sent and "print('orig')" not in sent


def test_confirmation_only_when_auto_run_off(interp, scripted_server):
    scripted_server.reset([text_reply("```python\nprint(1)\n```")])
    chunks = run_turn(interp)
    assert not any(c.get("type") == "confirmation" for c in chunks)
    fresh(interp, auto_run=False)
    interp.approval_handler = lambda req: Approval(action="run")
    scripted_server.reset([text_reply("```python\nprint(1)\n```")])
    chunks = run_turn(interp)
    conf = [c for c in chunks if c.get("type") == "confirmation"]
    assert len(conf) == 1
    assert conf[0]["format"] == "execution" and conf[0]["content"]["content"] == "print(1)"
    assert all(m.get("type") != "confirmation" for m in interp.messages)
    assert outputs(interp.messages) == ["1"]


def test_always_approves_the_language_for_the_session(interp, scripted_server):
    fresh(interp, auto_run=False)
    asked = []

    def handler(req):
        asked.append(req.language)
        return Approval(action="always")

    interp.approval_handler = handler
    reply = "```python\nprint(1)\n```\n```python\nprint(2)\n```\n```bash\necho 3\n```"
    scripted_server.reset([text_reply(reply)])
    run_turn(interp)
    assert asked == ["python", "shell"]
    assert outputs(interp.messages) == ["1", "2", "3"]


def test_default_handler_declines_without_auto_run(interp, scripted_server):
    fresh(interp, auto_run=False)
    scripted_server.reset([text_reply("```python\nprint(1)\n```")])
    run_turn(interp)
    assert outputs(interp.messages) == [DECLINED]


# -- streaming --------------------------------------------------------------------------------


def test_stream_has_one_start_end_pair_per_run(interp, scripted_server):
    reply = ["Intro text.\n```python\nimport sys\nprint('x')\nprint('y', file=sys.stderr)\n```\nAfter."]
    scripted_server.reset([text_reply(reply), text_reply(["Final", " words."])])
    chunks = run_turn(interp)
    check_runs(chunks)
    starts = [(c["role"], c["type"]) for c in chunks if c.get("start")]
    assert starts == [("assistant", "message"), ("assistant", "code"), ("assistant", "message"),
                      ("computer", "console"), ("assistant", "message")]
    assert sum(1 for c in chunks if c.get("end")) == len(starts)
    stored_types = [(m["role"], m["type"]) for m in interp.messages[1:]]
    assert stored_types == [("assistant", "message"), ("assistant", "code"), ("assistant", "message"),
                            ("computer", "console"), ("assistant", "message")]
    assert interp.messages[-1]["content"] == "Final words."


def test_chat_returns_new_messages_after_users(interp, scripted_server):
    scripted_server.reset([text_reply("Hi there.")])
    new = interp.chat("hello", display=False)
    assert new == [{"role": "assistant", "type": "message", "content": "Hi there."}]
    assert interp.messages[0] == {"role": "user", "type": "message", "content": "hello"}


def test_display_true_prints_without_crashing(interp, scripted_server, capsys):
    pytest.importorskip("oitui.core.display")
    scripted_server.reset([text_reply("Shown **text**.")])
    interp.chat("hello", display=True)
    assert "Shown" in capsys.readouterr().out


# -- loop mode --------------------------------------------------------------------------------


def test_loop_mode_stops_on_task_done(interp, scripted_server):
    interp.loop = True
    scripted_server.reset([text_reply("Working on it."), text_reply("```python\nprint(5)\n```"),
                           text_reply("The task is done.")])
    interp.chat("do it", display=False)
    assert len(scripted_server.requests) == 3
    second = scripted_server.requests[1]["messages"]
    assert second[-1]["role"] == "user" and "The task is done." in second[-1]["content"]
    assert texts(interp.messages)[-1] == "The task is done."


def test_loop_mode_bounded_by_max_turns(interp, scripted_server):
    interp.loop = True
    interp.max_turns = 3
    scripted_server.default = text_reply("Still working.")
    from oitui import LimitReached

    with pytest.raises(LimitReached):
        interp.chat("do it", display=False)
    assert len(scripted_server.requests) == 3


# -- images -----------------------------------------------------------------------------------


def test_image_path_reaches_vision_model(interp, scripted_server, tmp_path):
    img = tmp_path / "shot.png"
    img.write_bytes(PNG_1x1)
    interp.llm.supports_vision = True
    scripted_server.reset([text_reply("A pixel.")])
    interp.chat(f"What is in {img} ?", display=False)
    user = [m for m in scripted_server.requests[0]["messages"] if m["role"] == "user"][-1]
    parts = user["content"]
    assert isinstance(parts, list)
    urls = [p["image_url"]["url"] for p in parts if p.get("type") == "image_url"]
    assert urls == ["data:image/png;base64," + base64.b64encode(PNG_1x1).decode()]


def test_image_path_for_text_model_gets_a_note(interp, scripted_server, tmp_path):
    img = tmp_path / "shot.png"
    img.write_bytes(PNG_1x1)
    scripted_server.reset([text_reply("ok")])
    interp.chat(f"look at {img}", display=False)
    sent = str(scripted_server.requests[0]["messages"])
    assert "image_url" not in sent and "cannot see images" in sent


# -- offline ----------------------------------------------------------------------------------


def test_offline_contacts_only_the_model_endpoint(interp, scripted_server, monkeypatch):
    interp.offline = True
    seen: list = []
    real_connect = socket.socket.connect

    def connect(self, address):
        seen.append(address)
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    scripted_server.reset([text_reply("```python\nprint(1)\n```"), text_reply("Done.")])
    interp.chat("go", display=False)
    inet = [a for a in seen if isinstance(a, tuple)]
    assert inet and all(a[0] == "127.0.0.1" and a[1] == scripted_server.port for a in inet), inet


# -- compaction and trimming ------------------------------------------------------------------


def _long_history(n: int) -> list[dict]:
    msgs = []
    for i in range(n):
        msgs += [
            {"role": "user", "type": "message", "content": f"step {i}: " + "word " * 150},
            {"role": "assistant", "type": "code", "format": "python", "content": f"print({i})",
             "call_id": f"call_{i}", "tool": {"name": "execute", "arguments": ""}},
            {"role": "computer", "type": "console", "format": "output", "content": f"{i}\n" + "x" * 400,
             "call_id": f"call_{i}"},
            {"role": "assistant", "type": "message", "content": f"done {i}"},
        ]
    return msgs


def _pairs_intact(request: dict) -> None:
    msgs = request["messages"]
    assert msgs[0]["role"] == "system"
    for k, m in enumerate(msgs):
        if m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            assert [t.get("tool_call_id") for t in msgs[k + 1 : k + 1 + len(ids)]] == ids
        if m["role"] == "tool":
            assert any(m["tool_call_id"] in [c["id"] for c in (p.get("tool_calls") or [])] for p in msgs[:k])


def test_compaction_near_window(interp, scripted_server):
    from oitui.core.context import COMPACTION_PROMPT, estimate_tokens

    fresh(interp, function_calling=True)
    interp.messages = _long_history(30)
    stored_before = len(interp.messages)
    interp.llm.context_window = 6000
    interp.llm.max_tokens = 500
    scripted_server.reset([text_reply("SUMMARY: thirty steps printed their numbers."), text_reply("Continuing.")])
    interp.chat("next step", display=False)
    assert COMPACTION_PROMPT.splitlines()[0] in str(scripted_server.requests[0]["messages"])
    final = scripted_server.requests[1]
    assert "SUMMARY: thirty steps" in str(final["messages"])
    assert estimate_tokens(final["messages"]) <= 6000 - 500
    assert final["messages"][-1]["content"] == "next step"
    _pairs_intact(final)
    assert len(interp.messages) == stored_before + 2  # the stored history keeps everything


def test_trimming_keeps_calls_and_results_together(interp, scripted_server):
    from oitui.core.context import estimate_tokens

    fresh(interp, function_calling=True)
    interp.messages = _long_history(30)
    interp.llm.context_window = 3000
    interp.llm.max_tokens = 500
    # the compaction request fails (empty summary): the outgoing request is trimmed instead
    scripted_server.reset([text_reply(""), text_reply("Continuing.")])
    interp.chat("next step", display=False)
    final = scripted_server.requests[-1]
    assert estimate_tokens(final["messages"]) <= 3000
    assert final["messages"][-1]["content"] == "next step"
    _pairs_intact(final)


def test_compact_on_demand(interp, scripted_server):
    fresh(interp)
    interp.messages = _long_history(5)
    scripted_server.reset([text_reply("Short summary.")])
    assert interp.compact() == "Short summary."
    scripted_server.reset([text_reply("ok")])
    interp.chat("go on", display=False)
    sent = str(scripted_server.requests[0]["messages"])
    assert "Short summary." in sent and "step 0:" not in sent


# -- stop() -----------------------------------------------------------------------------------


def test_stop_interrupts_generation(interp, scripted_server):
    scripted_server.reset([text_reply([f"word{i} " for i in range(100)], interval=0.2)])
    threading.Timer(1.0, interp.stop).start()
    t0 = time.monotonic()
    interp.chat("talk", display=False)
    assert time.monotonic() - t0 < 8
    stored = "".join(texts(interp.messages))
    assert stored.startswith("word0") and "word99" not in stored
    deadline = time.monotonic() + 5
    while not scripted_server.disconnects and time.monotonic() < deadline:
        time.sleep(0.1)
    assert scripted_server.disconnects  # the HTTP stream was closed


def test_stop_interrupts_running_code(interp, scripted_server):
    scripted_server.reset([text_reply("```python\nimport time\nprint('start', flush=True)\ntime.sleep(60)\n```")])
    stopped = None
    for c in interp.chat("sleep", stream=True, display=False):
        if stopped is None and c.get("format") == "output" and "start" in str(c.get("content")):
            stopped = time.monotonic()
            threading.Thread(target=interp.stop).start()  # from another thread, as a UI would
    assert stopped is not None and time.monotonic() - stopped < 5
    assert len(scripted_server.requests) == 1  # the turn ended
    outs = outputs(interp.messages)
    assert outs and outs[0].startswith("start")
    # the kernel still works afterwards
    scripted_server.reset([text_reply("```python\nprint('alive')\n```")])
    interp.chat("again", display=False)
    assert outputs(interp.messages)[-1] == "alive"


# -- sessions ---------------------------------------------------------------------------------


def test_session_gets_every_stored_message(interp, scripted_server, tmp_path):
    sessions = pytest.importorskip("oitui.core.sessions")
    store = sessions.SessionStore(tmp_path / "sessions")
    interp.session = store.create(model="openai/scripted", harness="native", cwd=str(tmp_path))
    try:
        scripted_server.reset([text_reply("```python\nprint('saved')\n```"), text_reply("Done.")])
        interp.chat("go", display=False)
        reopened = store.open(interp.session.id)
        assert [(m["role"], m["type"], m.get("content")) for m in reopened.messages] == [
            (m["role"], m["type"], m.get("content")) for m in interp.messages
        ]
    finally:
        interp.session = None


def test_independent_interpreters():
    a, b = OpenInterpreter(), OpenInterpreter()
    a.auto_run = True
    a.messages.append({"role": "user", "type": "message", "content": "x"})
    assert b.auto_run is False and b.messages == []
    assert a.llm is not b.llm
    assert b.max_output == 2800 and b.llm.temperature == 0 and b.max_turns == 50


# -- misc ---------------------------------------------------------------------------------------


def test_hallucinated_call_shape_runs(interp, scripted_server):
    fresh(interp, function_calling=True)
    scripted_server.reset([text_reply('functions.execute({"language": "python", "code": "print(8)"})')])
    run_turn(interp)
    assert outputs(interp.messages) == ["8"]


def test_unknown_price_with_budget_says_so_once(interp, scripted_server):
    interp.max_budget = 5.0
    scripted_server.reset([text_reply("```python\nprint(1)\n```"), text_reply("ok")])
    interp.llm._price_note_given.clear()
    chunks = run_turn(interp)
    notes = [c for c in chunks if c.get("kind") == "price_unknown"]
    assert len(notes) == 1 and "unknown" in notes[0]["content"]
    assert interp.metrics["cost"] is None


def test_configured_interpreter_from_package(monkeypatch, tmp_path):
    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text('model = "openai/from-config"\nmax_output = 1234\nauto_run = true\n')
    monkeypatch.setenv("OITUI_HOME", str(home))
    from oitui.core.interpreter import make_configured_interpreter

    interp = make_configured_interpreter()
    assert interp.llm.model == "openai/from-config"
    assert interp.max_output == 1234 and interp.auto_run is True
    interp2 = make_configured_interpreter(overrides={"model": "openai/flag"})
    assert interp2.llm.model == "openai/flag"


def test_anthropic_gets_cache_control(interp, scripted_server):
    from oitui.core.respond import build_request

    interp.llm.model = "anthropic/claude-sonnet-4-5"
    interp.messages = [{"role": "user", "type": "message", "content": "hi"}]
    msgs, _ = build_request(interp)
    assert msgs[0]["content"][0]["cache_control"] == {"type": "ephemeral"}
    assert msgs[-1]["content"][-1]["cache_control"] == {"type": "ephemeral"}


def test_function_mode_code_streams_as_arguments_arrive(interp, scripted_server):
    fresh(interp, function_calling=True)
    args = '{"language": "python", "code": "print(\\"a\\u00e9\\")\\nprint(2)"}'
    pieces = [args[i : i + 5] for i in range(0, len(args), 5)]
    deltas = [{"tool_calls": [{"index": 0, "id": "call_s", "type": "function", "function": {"name": "execute", "arguments": ""}}]}]
    deltas += [{"tool_calls": [{"index": 0, "function": {"arguments": p}}]} for p in pieces]
    scripted_server.reset([{"deltas": deltas, "finish_reason": "tool_calls"}])
    chunks = run_turn(interp)
    check_runs(chunks)
    code_chunks = [c for c in chunks if c.get("type") == "code" and "content" in c]
    assert len(code_chunks) > 3  # streamed, not one piece at the end
    assert "".join(c["content"] for c in code_chunks) == 'print("aé")\nprint(2)'
    assert all(c["call_id"] == "call_s" and c["format"] == "python" for c in code_chunks)
    assert outputs(interp.messages) == ["aé\n2"]


def test_adjacent_blocks_are_separate_runs(interp, scripted_server):
    scripted_server.reset([text_reply("```python\nprint(1)\n```\n```python\nprint(2)\n```")])
    chunks = run_turn(interp)
    check_runs(chunks)
    assert sum(1 for c in chunks if c.get("type") == "code" and c.get("start")) == 2
    assert outputs(interp.messages) == ["1", "2"]


def test_dropping_the_stream_mid_run_stops_code_and_keeps_history(interp, scripted_server):
    fresh(interp, function_calling=True)
    code = "import time\\nprint('begun', flush=True)\\ntime.sleep(60)"
    scripted_server.reset([tool_reply(("call_x", "execute", '{"language": "python", "code": "%s"}' % code))])
    gen = interp.chat("go", stream=True, display=False)
    t0 = time.monotonic()
    for chunk in gen:
        if chunk.get("format") == "output" and "begun" in str(chunk.get("content")):
            break
    gen.close()
    assert time.monotonic() - t0 < 30
    outs = outputs(interp.messages)
    assert len(outs) == 1 and outs[0].startswith("begun") and "KeyboardInterrupt" in outs[0]
    assert [m.get("call_id") for m in interp.messages if m.get("role") == "computer"] == ["call_x"]
    scripted_server.reset([text_reply("```python\nprint('after')\n```")])
    fresh(interp)
    interp.chat("again", display=False)
    assert time.monotonic() - t0 < 30
    assert outputs(interp.messages)[-1] == "after"


def test_highlight_active_line_off_sends_no_active_lines(interp, scripted_server):
    interp.highlight_active_line = False
    try:
        scripted_server.reset([text_reply("```python\nprint(1)\nprint(2)\n```")])
        chunks = run_turn(interp)
        assert not any(c.get("format") == "active_line" for c in chunks)
        assert outputs(interp.messages) == ["1\n2"]
    finally:
        interp.highlight_active_line = True


def test_code_scanner_seam_forces_a_question(interp, scripted_server):
    asked = []
    interp.safe_mode = "auto"
    interp.code_scanner = lambda language, code: ["dangerous: rm"] if "rm" in code else []

    def handler(req):
        asked.append(req.findings)
        return Approval(action="decline")

    interp.approval_handler = handler
    try:
        scripted_server.reset([text_reply("```python\nprint('rm')\n```\n```python\nprint('ok')\n```")])
        run_turn(interp)
        assert asked == [["dangerous: rm"]]
        assert outputs(interp.messages) == [DECLINED]
        fresh(interp)
        interp.safe_mode, interp.code_scanner = "auto", (lambda language, code: [])
        scripted_server.reset([text_reply("```python\nprint('ok')\n```")])
        run_turn(interp)
        assert outputs(interp.messages) == ["ok"]  # auto-run, nothing found: no question
    finally:
        interp.safe_mode, interp.code_scanner = "off", None


# -- BR-29 through the approval handler: edit (e), unchanged edit, invalid key -----------------


def _keyed_handler(keys: list[str], editor=None, shown: list | None = None):
    """A test double of the TUI's approval prompt: reads ``keys`` in order; ``e`` opens the
    code in a temporary file, lets ``editor(path)`` rewrite it, shows the result and asks again
    (as the TUI does itself); ``y`` runs what is shown (``Approval.code`` when it was edited);
    ``n`` declines; any other key is returned as it is (the core asks again)."""
    import os
    import tempfile

    def handler(req: ApprovalRequest):
        code = req.code
        while True:
            if shown is not None:
                shown.append(code)
            key = keys.pop(0)
            if key == "e":
                fd, path = tempfile.mkstemp(suffix=".py")
                with os.fdopen(fd, "w") as fh:
                    fh.write(code)
                editor(path)
                with open(path) as fh:
                    code = fh.read()
                os.unlink(path)
                continue
            if key == "y":
                return Approval(action="run", code=code if code != req.code else None)
            if key == "n":
                return Approval(action="decline")
            return key  # invalid: the core must ask again

    return handler


def _rewrite(text: str):
    def editor(path: str) -> None:
        with open(path, "w") as fh:
            fh.write(text)
    return editor


def _shown_outputs(chunks: list[dict]) -> str:
    return "".join(str(c.get("content") or "") for c in chunks if c.get("format") == "output")


def test_br29a_edit_then_run_runs_the_edited_code_once(interp, scripted_server):
    fresh(interp, auto_run=False)
    shown: list[str] = []
    interp.approval_handler = _keyed_handler(["e", "y"], _rewrite("print('edited')"), shown)
    scripted_server.reset([text_reply("```python\nprint('orig')\n```"), text_reply("DONE.")])
    chunks = run_turn(interp)
    assert shown == ["print('orig')", "print('edited')"]  # the edited code is shown and asked again
    assert outputs(interp.messages) == ["edited"]  # exactly one execution
    assert "orig" not in _shown_outputs(chunks)  # orig never printed
    sent = scripted_server.requests[1]["messages"]  # the next request shows the code that ran
    text = str(sent)
    assert "print('edited')" in text and "print('orig')" not in text
    assert visible_outputs(scripted_server.requests[1]) == ["edited"]
    i = next(k for k, m in enumerate(sent) if m["role"] == "assistant" and "print('edited')" in str(m["content"]))
    assert sent[i + 1]["role"] == "user" and sent[i + 1]["content"].rstrip("\n").endswith("edited")


def test_br29a_safe_mode_scans_the_edited_code_before_it_runs(interp, scripted_server):
    fresh(interp, auto_run=False)
    scanned: list[str] = []

    def scanner(language, code):
        scanned.append(code)
        return ["writes a file"] if "open(" in code else []

    interp.safe_mode, interp.code_scanner = "ask", scanner
    requests: list[ApprovalRequest] = []
    edited = "open('x.txt', 'w').write('e'); print('edited')"

    def handler(req):
        requests.append(req)
        return Approval(action="run", code=edited) if len(requests) == 1 else Approval(action="run")

    interp.approval_handler = handler
    scripted_server.reset([text_reply("```python\nprint('orig')\n```"), text_reply("DONE.")])
    run_turn(interp)
    assert scanned[:2] == ["print('orig')", edited]  # the edited code was scanned too
    assert len(requests) == 2  # its findings asked again before it ran
    assert requests[1].code == edited and requests[1].findings == ["writes a file"]
    assert outputs(interp.messages) == ["edited"]


def test_br29c_edit_without_changes_runs_the_original(interp, scripted_server):
    fresh(interp, auto_run=False)
    interp.approval_handler = _keyed_handler(["e", "y"], lambda path: None)
    scripted_server.reset([text_reply("```python\nprint('orig')\n```"), text_reply("DONE.")])
    run_turn(interp)
    assert outputs(interp.messages) == ["orig"]
    assert codes(interp.messages) == [("python", "print('orig')")]
    assert visible_outputs(scripted_server.requests[1]) == ["orig"]


def test_br29d_invalid_key_asks_again_until_y(interp, scripted_server):
    fresh(interp, auto_run=False)
    asked: list[str] = []
    interp.approval_handler = _keyed_handler(["x", "x", "y"], shown=asked)
    scripted_server.reset([text_reply("```python\nprint('orig')\n```"), text_reply("DONE.")])
    chunks = run_turn(interp)
    assert len(asked) == 3  # the prompt repeated for each invalid key
    assert len([c for c in chunks if c.get("type") == "confirmation"]) == 3
    assert outputs(interp.messages) == ["orig"]  # ran once, after y
    # a handler that never gives a valid answer declines in the end (nothing runs)
    fresh(interp, auto_run=False)
    interp.approval_handler = lambda req: "x"
    scripted_server.reset([text_reply("```python\nprint('orig')\n```")])
    chunks = run_turn(interp)
    assert not any(c.get("format") == "active_line" for c in chunks)
    assert outputs(interp.messages)[0].startswith(DECLINED)


# -- features not available yet, cost of the local model, outputs folder, secrets ------------


@pytest.mark.parametrize("setting,value", [
    ("safe_mode", "ask"), ("safe_mode", "auto"), ("sandbox", "read-only"), ("sandbox", "workspace-write"),
    ("sandbox_network", "off"), ("add_dir", ["/tmp"]), ("harness", "claude"),
])
def test_api_refuses_features_not_available_yet(interp, scripted_server, setting, value):
    from oitui.core.errors import NotAvailableYet, OituiError

    setattr(interp, setting, value)
    scripted_server.reset([text_reply("```python\nprint('ran')\n```")])
    for stream in (False, True):
        with pytest.raises(NotAvailableYet) as info:
            interp.chat("go", stream=stream, display=False)
        assert "not available yet" in str(info.value) and isinstance(info.value, OituiError)
    assert scripted_server.requests == [] and interp.messages == []  # nothing sent, stored or run
    fresh(interp)
    assert interp.unavailable_reason() is None
    for ok in (("sandbox", "auto"), ("sandbox", "off")):
        setattr(interp, *ok)
        assert interp.unavailable_reason() is None


def test_local_model_cost_is_zero_not_unknown():
    from oitui.core.llm import Llm

    llm = Llm(model="local/smollm2-135m")
    assert llm.prices() == (0.0, 0.0)
    assert llm.cost(1000, 500) == 0.0
    assert llm.price_unknown_note() is None
    llm.check_budget(10_000, 0.0, 0.0)  # free: never over budget


def test_html_goes_to_the_sessions_outputs_folder(interp, scripted_server, tmp_path):
    from oitui.core.sessions import SessionStore

    store = SessionStore(tmp_path / "sessions", outputs_dir=tmp_path / "outputs")
    interp.session = store.create(model="openai/scripted", harness="native", cwd=str(tmp_path))
    scripted_server.reset([text_reply("```html\n<p>hello page</p>\n```")])
    run_turn(interp)
    folder = tmp_path / "outputs" / interp.session.id
    pages = list(folder.glob("*.html"))
    assert len(pages) == 1 and "hello page" in pages[0].read_text()
    assert str(pages[0]) in outputs(interp.messages)[0]  # the output names the file
    interp.session = None
    assert interp.computer.output_dir is None  # back to the default folder


def test_known_key_values_are_redacted_from_stored_messages(interp, scripted_server, monkeypatch, tmp_path):
    from oitui.core.sessions import SessionStore

    secret = "sk-live-abcdef0123456789"
    monkeypatch.setenv("ACME_API_KEY", secret)
    store = SessionStore(tmp_path / "sessions")
    interp.session = store.create(model="openai/scripted", harness="native", cwd=str(tmp_path))
    code = "print('sk-live-' + 'abcdef0123456789')\nimport os\nprint(os.environ.get('ACME_API_KEY'))"
    scripted_server.reset([text_reply(f"```python\n{code}\n```")])
    run_turn(interp)
    assert outputs(interp.messages) == ["[REDACTED]\nNone"]  # redacted; and not in the runtime's env
    assert secret not in str(scripted_server.requests[1]["messages"])  # nor sent back to the model
    assert secret not in interp.session.path.read_text()


def test_jpeg_path_reaches_vision_model_as_jpeg(interp, scripted_server, tmp_path):
    img = tmp_path / "photo 1.jpeg"
    img.write_bytes(PNG_1x1)  # the bytes do not matter for the request shape
    interp.llm.supports_vision = True
    scripted_server.reset([text_reply("A photo.")])
    interp.chat(f"What is in {str(img).replace(' ', chr(92) + ' ')}?", display=False)
    user = [m for m in scripted_server.requests[0]["messages"] if m["role"] == "user"][-1]
    urls = [p["image_url"]["url"] for p in user["content"] if p.get("type") == "image_url"]
    assert urls == ["data:image/jpeg;base64," + base64.b64encode(PNG_1x1).decode()]
    assert any(p.get("type") == "text" and "What is in" in p["text"] for p in user["content"])


def test_br29a_function_mode_edit_replaces_the_call_arguments(interp, scripted_server):
    fresh(interp, auto_run=False, function_calling=True)
    interp.approval_handler = _keyed_handler(["e", "y"], _rewrite("print('edited')"))
    scripted_server.reset([tool_reply(("call_1", "execute", '{"language": "python", "code": "print(\'orig\')"}')),
                           text_reply("DONE.")])
    chunks = run_turn(interp)
    assert outputs(interp.messages) == ["edited"] and "orig" not in _shown_outputs(chunks)
    sent = scripted_server.requests[1]["messages"]
    call = [m for m in sent if m.get("tool_calls")][0]["tool_calls"][0]
    assert call["id"] == "call_1"
    assert json.loads(call["function"]["arguments"]) == {"language": "python", "code": "print('edited')"}
    assert [(t["tool_call_id"], t["content"].strip()) for t in tool_messages(scripted_server.requests[1])] == [
        ("call_1", "edited")]


def test_configured_sandbox_request_is_refused_not_ignored(monkeypatch, tmp_path):
    from oitui.core.errors import NotAvailableYet
    from oitui.core.interpreter import make_configured_interpreter

    home = tmp_path / "h"
    home.mkdir()
    (home / "config.toml").write_text('model = "openai/from-config"\nsandbox = "workspace-write"\n')
    monkeypatch.setenv("OITUI_HOME", str(home))
    interp = make_configured_interpreter()
    assert interp.sandbox == "workspace-write"
    with pytest.raises(NotAvailableYet):
        interp.chat("go", display=False)
    assert interp.messages == []
    interp = make_configured_interpreter(environ={"OITUI_HOME": str(home), "OITUI_SANDBOX": "off"})
    assert interp.sandbox == "off" and interp.unavailable_reason() is None
