"""Fault cases BR-07..BR-11 (function mode and API errors), end to end through the scripted
server (real HTTP via litellm) and the real Computer."""

from __future__ import annotations

import time

import pytest

from oitui import LimitReached, ModelError
from support.core_helpers import check_runs, codes, fresh, make_interpreter, outputs, run_turn, texts, tool_messages
from support.scripted_server import (  # noqa: F401  (fixtures)
    error_reply,
    scripted_server,
    scripted_server_module,
    text_reply,
    tool_call_delta,
    tool_reply,
)


@pytest.fixture(scope="module")
def shared(scripted_server_module, tmp_path_factory):
    interp = make_interpreter(scripted_server_module, str(tmp_path_factory.mktemp("br-fn")), function_calling=True)
    yield interp
    interp.terminate()


@pytest.fixture
def interp(shared, scripted_server):
    return fresh(shared, function_calling=True)


# -- BR-07 ------------------------------------------------------------------------------------

BR07 = [
    ("a", "execute", '{"language": "python", "code": "import re\\nprint(re.findall(r\'\\d+\', \'a1b22\'))"}',
     "['1', '22']"),
    ("b", "execute", '{"language": "python", "code": "x = 41\nprint(x + 1)"}', "42"),
    ("c", "python", "import math\nprint(math.factorial(5))", "120"),
    ("d", "execute", '{"code": "print(7)"}', "7"),
]


@pytest.mark.parametrize("case,name,args,expected", BR07, ids=[c[0] for c in BR07])
def test_br07_malformed_tool_calls(interp, scripted_server, case, name, args, expected):
    scripted_server.reset([tool_reply(("call_1", name, args))])
    chunks = run_turn(interp)
    check_runs(chunks)
    assert outputs(interp.messages) == [expected]
    second = scripted_server.requests[1]
    tools = tool_messages(second)
    assert [t["tool_call_id"] for t in tools] == ["call_1"]
    assert tools[0]["content"].rstrip("\n") == expected
    assert texts(interp.messages)[-1] == "DONE."


def test_br07e_unknown_function(interp, scripted_server):
    scripted_server.reset([tool_reply(("call_1", "browse_web", '{"url": "x"}'))])
    chunks = run_turn(interp)
    check_runs(chunks)
    assert codes(interp.messages) == []
    assert not any(c.get("format") == "active_line" for c in chunks)
    tools = tool_messages(scripted_server.requests[1])
    assert [t["tool_call_id"] for t in tools] == ["call_1"]
    assert "browse_web" in tools[0]["content"] and "does not exist" in tools[0]["content"]
    assert "execute" in tools[0]["content"]


# -- BR-08 ------------------------------------------------------------------------------------


def test_br08_fragmented_arguments(interp, scripted_server):
    deltas = [
        {"role": "assistant", "content": None,
         "tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "execute", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "id": "call_1", "type": "function",
                         "function": {"name": "execute", "arguments": '{"language": "pyth'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": 'on", "code": "print(\\"frag'}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": 'ment-ok\\")"}'}}]},
    ]
    scripted_server.reset([{"deltas": deltas, "finish_reason": "tool_calls"}])
    run_turn(interp)
    assert codes(interp.messages) == [("python", 'print("fragment-ok")')]
    assert outputs(interp.messages) == ["fragment-ok"]
    sent = [m for m in scripted_server.requests[1]["messages"] if m.get("tool_calls")][0]["tool_calls"]
    assert len(sent) == 1
    assert sent[0]["id"] == "call_1" and sent[0]["type"] == "function"
    assert sent[0]["function"]["name"] == "execute"
    assert sent[0]["function"]["arguments"] == '{"language": "python", "code": "print(\\"fragment-ok\\")"}'


# -- BR-09 ------------------------------------------------------------------------------------


def test_br09_parallel_tool_calls(interp, scripted_server):
    deltas = [
        {"role": "assistant", "content": None, "tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                                               "function": {"name": "execute", "arguments": ""}}]},
        {"tool_calls": [{"index": 0, "function": {"arguments": "{\"language\": \"python\", \"code\": \"print('A')\"}"}}]},
        {"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "execute", "arguments": ""}}]},
        {"tool_calls": [{"index": 1, "function": {"arguments": "{\"language\": \"shell\", \"code\": \"echo B\"}"}}]},
    ]
    scripted_server.reset([{"deltas": deltas, "finish_reason": "tool_calls"}, text_reply("Both ran.")])
    chunks = run_turn(interp)
    check_runs(chunks)
    shown = [c["content"] for c in chunks if c.get("format") == "output" and c.get("content")]
    assert "".join(shown).split() == ["A", "B"]
    sent = scripted_server.requests[1]["messages"]
    i = next(k for k, m in enumerate(sent) if m.get("tool_calls"))
    assert [c["id"] for c in sent[i]["tool_calls"]] == ["call_a", "call_b"]
    assert [(m["tool_call_id"], m["content"].strip()) for m in sent[i + 1 : i + 3]] == [("call_a", "A"), ("call_b", "B")]
    assert len(tool_messages(scripted_server.requests[1])) == 2
    assert texts(interp.messages)[-1] == "Both ran."


# -- BR-10 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["a", "b"])
def test_br10_empty_reply(interp, scripted_server, case):
    if case == "a":
        reply = {"deltas": [{"role": "assistant", "content": None}], "finish_reason": "stop"}
    else:
        reply = {"deltas": [{"__raw__": {"choices": []}}, {"content": ""}], "finish_reason": "stop"}
    interp.chat("warm up litellm's HTTP client", display=False)  # the timing below is the engine's, warm
    fresh(interp, function_calling=True)
    scripted_server.reset([reply])
    t0 = time.monotonic()
    chunks = list(interp.chat("hello", stream=True, display=False))
    assert time.monotonic() - t0 < 1.0  # returns within 1 s, no exception
    assert len(scripted_server.requests) == 1  # the fake was called exactly once
    new = interp.messages[1:]
    assistant = [m for m in new if m.get("role") == "assistant"]
    assert len(assistant) <= 1 and all(not (m.get("content") or "").strip() for m in assistant)
    assert new == assistant  # nothing else stored; history consistent
    shown = "".join(str(c.get("content") or "") for c in chunks)
    assert len(shown) <= 80  # nothing, or a short notice
    # the next request is well-formed
    scripted_server.reset([text_reply("fine")])
    interp.chat("again", display=False)
    _roles_alternate(scripted_server.requests[0])


def test_br10d_empty_replies_in_loop_mode_are_bounded(interp, scripted_server):
    interp.loop = True
    empty = {"deltas": [{"role": "assistant", "content": None}], "finish_reason": "stop"}
    scripted_server.reset([dict(empty) for _ in range(10)])
    scripted_server.default = dict(empty)
    interp.chat("hello", display=False)
    assert 1 <= len(scripted_server.requests) <= 3  # a small, documented number of re-prompts


# -- BR-11 ------------------------------------------------------------------------------------


def _roles_alternate(request: dict) -> None:
    roles = [m["role"] for m in request["messages"] if m["role"] != "system"]
    for a, b in zip(roles, roles[1:]):
        assert not (a == b == "user") and not (a == b == "assistant"), roles
    calls = {c["id"] for m in request["messages"] for c in (m.get("tool_calls") or [])}
    answered = {m["tool_call_id"] for m in request["messages"] if m["role"] == "tool"}
    assert calls == answered


def test_br11a_error_mid_stream_then_recovers(interp, scripted_server):
    scripted_server.reset([{"deltas": ["Partial "], "cut": True}, text_reply("hello")])
    chunks = []
    with pytest.raises(ModelError):
        for c in interp.chat("task", stream=True, display=False):
            chunks.append(c)
    errors = [c for c in chunks if c.get("type") == "error"]
    assert len(errors) == 1 and "\n" not in errors[0]["content"].strip()  # one readable line
    assert not any("Traceback" in str(c.get("content")) for c in chunks)  # no raw traceback
    assert len(scripted_server.requests) == 1  # not retried after the first token
    assert all(m.get("type") == "message" for m in interp.messages)  # no half tool call kept
    new = interp.chat("hi again", display=False)
    assert texts(new) == ["hello"]
    _roles_alternate(scripted_server.requests[1])


def test_br11b_tool_call_stream_never_finished_is_not_run(interp, scripted_server):
    partial = tool_call_delta(0, "call_1", "execute", '{"language": "python", "code": "print(1)"}')
    scripted_server.reset([{"deltas": [partial], "cut": True}, text_reply("hello")])
    with pytest.raises(ModelError):
        interp.chat("task", display=False)
    assert codes(interp.messages) == [] and outputs(interp.messages) == []
    interp.chat("hi again", display=False)
    _roles_alternate(scripted_server.requests[-1])
    assert "tool_calls" not in str(scripted_server.requests[-1]["messages"])


def test_br11c_rate_limit_retried_before_first_token(interp, scripted_server):
    scripted_server.reset([error_reply(429, "rate limited"), text_reply("Recovered.")])
    new = interp.chat("task", display=False)
    assert texts(new) == ["Recovered."]  # exactly, no partial or duplicated prefix
    assert [m for m in new if m.get("role") == "assistant"] == [
        {"role": "assistant", "type": "message", "content": "Recovered."}]
    assert len(scripted_server.requests) == 2  # the fake was called twice
    assert scripted_server.requests[0]["messages"] == scripted_server.requests[1]["messages"]  # same request
    _roles_alternate(scripted_server.requests[1])


def test_br11_gives_up_after_retries_on_5xx(interp, scripted_server):
    scripted_server.reset([error_reply(500) for _ in range(6)])
    with pytest.raises(ModelError) as info:
        interp.chat("task", display=False)
    assert len(scripted_server.requests) == 4  # 1 + 3 retries
    assert "4 attempts" in str(info.value)
    assert interp.messages[-1]["role"] == "user"


def test_br11_auth_error_names_the_key(interp, scripted_server):
    scripted_server.reset([error_reply(401, "Incorrect API key provided")])
    with pytest.raises(ModelError) as info:
        interp.chat("task", display=False)
    assert len(scripted_server.requests) == 1
    assert "OPENAI_API_KEY" in str(info.value) and info.value.status_code == 401


# -- limits -----------------------------------------------------------------------------------


def test_max_turns_limit(interp, scripted_server):
    interp.max_turns = 2
    call = ("call_1", "execute", '{"language": "python", "code": "print(3)"}')
    scripted_server.reset([tool_reply(call), tool_reply(("call_2",) + call[1:]), tool_reply(("call_3",) + call[1:])])
    with pytest.raises(LimitReached) as info:
        interp.chat("loop forever", display=False)
    assert info.value.kind == "max_turns"
    assert len(scripted_server.requests) == 2
    assert outputs(interp.messages) == ["3", "3"]


def test_max_retries_per_code_block(interp, scripted_server):
    interp.max_retries_per_code_block = 2
    args = '{"language": "python", "code": "raise ValueError(\'boom\')"}'
    scripted_server.reset([tool_reply((f"call_{i}", "execute", args)) for i in range(5)])
    with pytest.raises(LimitReached) as info:
        interp.chat("go", display=False)
    assert info.value.kind == "retries"
    runs = [o for o in outputs(interp.messages) if "ValueError" in o]
    assert len(runs) == 2
    assert "max_retries_per_code_block" in outputs(interp.messages)[-1]
    assert len(scripted_server.requests) == 3
    # every call is answered in the stored history
    ids = {m["call_id"] for m in interp.messages if m.get("role") == "assistant" and m.get("call_id")}
    answered = {m["call_id"] for m in interp.messages if m.get("role") == "computer" and m.get("call_id")}
    assert ids == answered


def test_budget_precheck(interp, scripted_server):
    interp.llm.model = "openai/gpt-4o"  # a priced model, served by the scripted server
    interp.max_budget = 0.000001
    with pytest.raises(LimitReached) as info:
        interp.chat("hello", display=False)
    assert info.value.kind == "budget"
    assert len(scripted_server.requests) == 0


def test_cost_and_usage_counted(interp, scripted_server):
    interp.llm.model = "openai/gpt-4o"
    scripted_server.reset([text_reply("hi", usage={"prompt_tokens": 1000, "completion_tokens": 100})])
    interp.chat("hello", display=False)
    assert interp.metrics["prompt_tokens"] == 1000 and interp.metrics["completion_tokens"] == 100
    assert interp.metrics["cost"] is not None and interp.metrics["cost"] > 0


def test_unknown_price_cost_is_none(interp, scripted_server):
    scripted_server.reset([text_reply("hi")])
    interp.chat("hello", display=False)
    assert interp.metrics["cost"] is None
    assert interp.metrics["prompt_tokens"] == 10


def test_context_window_exceeded_is_retried_once_with_a_smaller_request(interp, scripted_server):
    msg = ("This model's maximum context length is 8192 tokens. However, your messages resulted in "
           "9000 tokens. Please reduce the length of the messages.")
    scripted_server.reset([{"status": 400, "message": msg}, text_reply("fits now")])
    new = interp.chat("hello", display=False)
    assert texts(new) == ["fits now"]
    assert len(scripted_server.requests) == 2


def test_identical_successful_block_repeated_ends_the_turn(interp, scripted_server):
    args = '{"language": "python", "code": "print(\'same\')"}'
    scripted_server.reset([tool_reply((f"call_{i}", "execute", args)) for i in range(10)])
    interp.chat("go", display=False)  # no exception: the turn simply ends
    assert len(scripted_server.requests) == 3
    outs = outputs(interp.messages)
    assert outs[:2] == ["same", "same"] and "already ran twice" in outs[2]
    ids = {m["call_id"] for m in interp.messages if m.get("role") == "assistant" and m.get("call_id")}
    answered = {m["call_id"] for m in interp.messages if m.get("role") == "computer" and m.get("call_id")}
    assert ids == answered
