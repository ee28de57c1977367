"""The litellm adapter (oitui.core.llm) against the scripted server, and `oitui doctor`."""

from __future__ import annotations

import pytest

from oitui import LimitReached, ModelError
from oitui.core.llm import Llm, key_env_for, provider_of
from support.scripted_server import (  # noqa: F401  (fixtures)
    error_reply,
    scripted_server,
    scripted_server_module,
    text_reply,
    tool_call_delta,
)


def _llm(server, **kw) -> Llm:
    return Llm(model="openai/scripted", api_base=server.url, api_key="sk-test", backoff=0.01, **kw)


def test_stream_yields_normalized_deltas(scripted_server):
    scripted_server.reset([text_reply(["Hel", "lo"], usage={"prompt_tokens": 7, "completion_tokens": 2})])
    deltas = list(_llm(scripted_server).stream([{"role": "user", "content": "hi"}]))
    assert deltas == [
        {"type": "content", "text": "Hel"},
        {"type": "content", "text": "lo"},
        {"type": "finish", "reason": "stop"},
        {"type": "usage", "prompt_tokens": 7, "completion_tokens": 2},
    ]
    body = scripted_server.requests[0]
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["temperature"] == 0 and body["model"] == "scripted"


def test_stream_tool_call_fragments_are_raw(scripted_server):
    scripted_server.reset([{"deltas": [tool_call_delta(0, "call_1", "execute", '{"a'), tool_call_delta(0, None, None, '": 1}')],
                            "finish_reason": "tool_calls"}])
    deltas = list(_llm(scripted_server).stream([{"role": "user", "content": "hi"}], tools=[]))
    calls = [d["calls"][0] for d in deltas if d["type"] == "tool_calls"]
    assert calls[0]["id"] == "call_1" and calls[0]["function"] == {"name": "execute", "arguments": '{"a'}
    assert calls[1]["function"] == {"arguments": '": 1}'} and "id" not in calls[1]


def test_retries_with_backoff_then_gives_up(scripted_server):
    scripted_server.reset([error_reply(429), error_reply(503), error_reply(500), error_reply(502)])
    waits = []
    with pytest.raises(ModelError) as info:
        list(_llm(scripted_server).stream([{"role": "user", "content": "hi"}], sleep=waits.append))
    assert len(scripted_server.requests) == 4
    assert waits == [0.01, 0.02, 0.04]
    assert "gave up after 4 attempts" in str(info.value)


def test_missing_key_is_reported_without_a_request(monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ModelError) as info:
        list(Llm(model="anthropic/claude-sonnet-4-5").stream([{"role": "user", "content": "hi"}]))
    assert "ANTHROPIC_API_KEY" in str(info.value)


def test_provider_and_key_names():
    assert provider_of("gpt-4o") == "openai" and key_env_for("gpt-4o") == "OPENAI_API_KEY"
    assert provider_of("claude-3-5-sonnet") == "anthropic"
    assert key_env_for("deepseek/deepseek-chat") == "DEEPSEEK_API_KEY"
    assert key_env_for("ollama/llama3") is None and key_env_for("local/smollm2") is None


def test_budget_estimate_uses_prices():
    llm = Llm(model="gpt-4o", max_tokens=1000)
    inp, out = llm.prices()
    assert inp > 0 and out > 0
    llm.check_budget(1000, 0.0, 1.0)  # fine
    with pytest.raises(LimitReached) as info:
        llm.check_budget(1000, 0.0, 1000 * inp + 999 * out)
    assert info.value.kind == "budget" and "$" in str(info.value)
    unknown = Llm(model="openai/no-such-model-xyz")
    assert unknown.prices() is None and unknown.cost(10, 10) is None
    assert "unknown" in unknown.price_unknown_note() and unknown.price_unknown_note() is None


def test_doctor_reports_each_check(capsys):
    from oitui.doctor import main

    assert main([]) == 0
    out = capsys.readouterr().out
    for name in ("python kernel", "bash", "node", "bubblewrap", "semgrep", "chromium", "local model"):
        assert name in out
    assert "OK" in out
    for line in out.splitlines():
        if line.startswith("missing"):
            break
    else:
        return
    assert "fix:" in out


def test_ollama_host_reaches_the_request(monkeypatch):
    """OLLAMA_HOST (what the Ollama CLI reads) sets the endpoint of `ollama/NAME` models."""
    from oitui.core.llm import Llm

    monkeypatch.delenv("OLLAMA_API_BASE", raising=False)
    monkeypatch.setenv("OLLAMA_HOST", "127.0.0.1:11500")
    llm = Llm()
    llm.model = "ollama/qwen2.5-coder"
    assert llm._kwargs([{"role": "user", "content": "hi"}], None)["api_base"] == "http://127.0.0.1:11500"
    llm.api_base = "http://10.0.0.2:9999/v1"
    assert llm._kwargs([{"role": "user", "content": "hi"}], None)["api_base"] == "http://10.0.0.2:9999/v1"
    llm.api_base = None
    llm.model = "openai/gpt-4o"
    assert "api_base" not in llm._kwargs([{"role": "user", "content": "hi"}], None)
