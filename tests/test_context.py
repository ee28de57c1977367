"""Context window: token estimates, trimming with calls and results kept paired, compaction split."""

from __future__ import annotations

import pytest

from oitui.core import lmc
from oitui.core.context import (
    COMPACTION_PROMPT,
    OMITTED_NOTE,
    SUMMARY_PREFIX,
    estimate_tokens,
    needs_compaction,
    split_for_compaction,
    summary_message,
    trim_to_window,
)
from oitui.core.lmc import to_openai_messages


def long_history(turns: int = 200) -> list[dict]:
    """LMC history: each turn = user ask, assistant text + 2 tool calls, their outputs, a reply."""
    msgs: list[dict] = []
    for t in range(turns):
        msgs.append(lmc.text("user", f"Turn {t}: please compute something about item {t}. " + "detail " * 20))
        msgs.append(lmc.text("assistant", f"Working on turn {t}."))
        msgs.append(lmc.code("python", f"print({t} * 2)\n" + "# pad\n" * 10, call_id=f"call_{t}_a"))
        msgs.append(lmc.code("shell", f"echo turn-{t}", call_id=f"call_{t}_b"))
        msgs.append(lmc.console_output(f"{t * 2}\n" + "out " * 30, call_id=f"call_{t}_a"))
        msgs.append(lmc.console_output(f"turn-{t}\n", call_id=f"call_{t}_b"))
        msgs.append(lmc.text("assistant", f"Turn {t} done: {t * 2}."))
    return msgs


def assert_paired(out: list[dict]) -> None:
    i = 0
    while i < len(out):
        m = out[i]
        if m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            nxt = out[i + 1 : i + 1 + len(ids)]
            assert [x.get("tool_call_id") for x in nxt] == ids, f"call at {i} not answered in order"
            i += 1 + len(ids)
            continue
        assert m["role"] != "tool", f"orphan tool result at {i}"
        i += 1


def test_estimate_tokens_fallback_real_values():
    msgs = [{"role": "user", "content": "x" * 400}]
    assert estimate_tokens(msgs) == 100 + 4 + 3
    with_call = [{"role": "assistant", "content": None, "tool_calls": [
        {"id": "c", "type": "function", "function": {"name": "execute", "arguments": "y" * 92}}]}]
    assert estimate_tokens(with_call) == (7 + 92 + 8 + 3) // 4 + 4 + 3
    img = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}]
    assert estimate_tokens(img) >= 765
    assert estimate_tokens([]) == 3
    with pytest.raises(TypeError):
        estimate_tokens("hello")  # type: ignore[arg-type]


def test_estimate_tokens_unknown_model_falls_back_cleanly():
    msgs = [{"role": "user", "content": "hello world " * 50}]
    n = estimate_tokens(msgs, model="surely-not-a-model/xyz")
    assert 50 <= n <= 400
    # litellm's real tokenizer (offline, local price map): 100 word tokens plus message overhead
    assert 100 <= estimate_tokens(msgs, model="gpt-4o-mini") <= 115


def test_trim_200_turns_under_window_pairs_kept():
    history = long_history(200)
    full = to_openai_messages(history, system_message="SYSTEM PROMPT", function_calling=True)
    full_tokens = estimate_tokens(full)
    assert full_tokens > 30_000
    limit = 8_000
    out = trim_to_window(full, limit)
    assert estimate_tokens(out) <= limit
    assert out[0] == {"role": "system", "content": "SYSTEM PROMPT"}
    assert OMITTED_NOTE in str(out[1]["content"])
    # the newest user message and everything after it are there
    newest_user = [m for m in full if m["role"] == "user"][-1]
    tail = full[full.index(newest_user) + 1 :]
    assert out[-len(tail) :] == tail
    assert any(m["role"] == "user" and "Turn 199:" in str(m["content"]) for m in out)
    assert not any("Turn 0:" in str(m.get("content")) for m in out)
    assert_paired(out)
    # the dropped part is whole turns: the first kept message after the note is the user's
    assert out[1]["role"] == "user" and out[1]["content"].startswith(OMITTED_NOTE)
    ids = [c["id"] for m in out if m.get("tool_calls") for c in m["tool_calls"]]
    answered = [m["tool_call_id"] for m in out if m["role"] == "tool"]
    assert ids == answered
    assert full == to_openai_messages(history, system_message="SYSTEM PROMPT", function_calling=True)  # input untouched


def test_trim_noop_when_it_fits():
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]
    assert trim_to_window(msgs, 1000) == msgs


def test_trim_inside_the_newest_turn_keeps_pairs():
    # one user turn followed by a long agent loop of tool calls
    history = [lmc.text("user", "do a long task")]
    for k in range(60):
        history.append(lmc.code("python", f"step({k})  " + "x" * 200, call_id=f"c{k}"))
        history.append(lmc.console_output("y" * 300, call_id=f"c{k}"))
    full = to_openai_messages(history, system_message="sys", function_calling=True)
    out = trim_to_window(full, 3000)
    assert estimate_tokens(out) <= 3000
    assert out[0]["role"] == "system"
    assert out[1]["role"] == "user" and out[1]["content"].startswith("do a long task")
    assert OMITTED_NOTE in out[1]["content"]
    assert out[-2]["tool_calls"][0]["id"] == "c59"
    assert out[-1] == {"role": "tool", "tool_call_id": "c59", "content": "y" * 300}
    assert_paired(out)


def test_trim_keeps_minimum_even_if_too_long():
    msgs = [{"role": "system", "content": "s" * 4000}, {"role": "user", "content": "u" * 4000}]
    assert trim_to_window(msgs, 10) == msgs


def test_trim_with_custom_counter_and_bad_args():
    msgs = [{"role": "system", "content": "s"}] + [
        {"role": r, "content": f"{r}{i}"} for i in range(10) for r in ("user", "assistant")
    ]
    out = trim_to_window(msgs, 6, count=lambda ms: len(ms))  # one "token" per message
    assert out[0]["role"] == "system"
    assert out[1] == {"role": "user", "content": OMITTED_NOTE + "\n\nuser8"}
    assert out[2:] == [{"role": "assistant", "content": "assistant8"}, {"role": "user", "content": "user9"}, {"role": "assistant", "content": "assistant9"}]
    with pytest.raises(ValueError):
        trim_to_window(msgs, 0)
    with pytest.raises(TypeError):
        trim_to_window("x", 10)  # type: ignore[arg-type]


def test_split_for_compaction():
    history = long_history(5)
    older, recent = split_for_compaction(history, keep_recent_turns=2)
    assert older + recent == history
    assert recent[0] == history[3 * 7]
    assert recent[0]["content"].startswith("Turn 3:")
    assert older[-1]["content"] == "Turn 2 done: 4."
    # calls and results never separated
    older_calls = {m["call_id"] for m in older if m.get("type") == "code"}
    older_results = {m["call_id"] for m in older if m.get("type") == "console"}
    assert older_calls == older_results
    assert split_for_compaction(history[:14], keep_recent_turns=2) == ([], history[:14])
    assert split_for_compaction(history, keep_recent_turns=0) == (history, [])
    with pytest.raises(ValueError):
        split_for_compaction(history, keep_recent_turns=-1)


def test_split_treats_consecutive_user_messages_as_one_turn_start():
    msgs = [
        lmc.text("user", "a"), lmc.text("assistant", "A"),
        lmc.text("user", "look"), lmc.image("x.png", "path", role="user"), lmc.text("assistant", "B"),
    ]
    older, recent = split_for_compaction(msgs, keep_recent_turns=1)
    assert older == msgs[:2] and recent == msgs[2:]


def test_compaction_helpers():
    assert "Summarise" in COMPACTION_PROMPT
    s = summary_message("  The user wants X.  ")
    assert s == {"role": "user", "type": "message", "content": SUMMARY_PREFIX + "The user wants X.", "compacted": True}
    assert needs_compaction(7000, 10000, 1000) is False
    assert needs_compaction(7500, 10000, 1000) is True
    with pytest.raises(ValueError):
        needs_compaction(1, 0)


def test_add_cache_control_anthropic_through_litellm():
    import os

    from oitui.core.context import add_cache_control

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    history = long_history(2)
    msgs = to_openai_messages(history, system_message="SYS", function_calling=True) + [{"role": "user", "content": "next"}]
    assert add_cache_control(msgs, "openai") == msgs
    marked = add_cache_control(msgs, "anthropic")
    assert [i for i, m in enumerate(marked) if "cache_control" in m] == [0, len(msgs) - 1]
    assert all("cache_control" not in m for m in msgs)  # input untouched
    req = litellm.AnthropicConfig().transform_request(
        model="claude-sonnet-4-5", messages=[dict(m) for m in marked],
        optional_params={"max_tokens": 10}, litellm_params={}, headers={})
    assert req["system"] == [{"type": "text", "text": "SYS", "cache_control": {"type": "ephemeral"}}]
    last = req["messages"][-1]["content"][-1]
    assert last["text"] == "next" and last["cache_control"] == {"type": "ephemeral"}
    # a tool result as the latest message carries the breakpoint too
    loop = to_openai_messages(history[:-1], system_message="SYS", function_calling=True)
    assert loop[-1]["role"] == "tool"
    marked = add_cache_control(loop, "anthropic")
    assert "cache_control" in marked[-1] and "cache_control" not in marked[-2]
    req = litellm.AnthropicConfig().transform_request(
        model="claude-sonnet-4-5", messages=[dict(m) for m in marked],
        optional_params={"max_tokens": 10}, litellm_params={}, headers={})
    result = req["messages"][-1]["content"][-1]
    assert result["type"] == "tool_result" and result["cache_control"] == {"type": "ephemeral"}
