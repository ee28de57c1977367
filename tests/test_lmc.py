"""LMC v1 helpers: constructors, chunk merging, LMC -> OpenAI conversion, OI compatibility."""

from __future__ import annotations

import base64
import json

import pytest

from oitui.core import lmc
from oitui.core.lmc import ChunkMerger, lmc_to_oi, oi_to_lmc, to_openai_messages

# A 1x1 PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
PNG_B64 = base64.b64encode(PNG).decode()


def tool_ids_answered(out: list[dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for m in out:
        if m["role"] == "tool":
            counts[m["tool_call_id"]] = counts.get(m["tool_call_id"], 0) + 1
    return counts


def assert_calls_paired(out: list[dict]) -> None:
    """Every assistant tool call is answered exactly once, right after its assistant message."""
    i = 0
    while i < len(out):
        m = out[i]
        if m.get("tool_calls"):
            ids = [c["id"] for c in m["tool_calls"]]
            following = out[i + 1 : i + 1 + len(ids)]
            assert [f["role"] for f in following] == ["tool"] * len(ids)
            assert [f["tool_call_id"] for f in following] == ids
            i += 1 + len(ids)
            continue
        assert m["role"] != "tool", f"orphan tool message at {i}: {m}"
        i += 1


# ---------------------------------------------------------------------------- constructors


def test_constructors_shapes():
    assert lmc.message("user", "message", "hi") == {"role": "user", "type": "message", "content": "hi"}
    assert lmc.code("python", "print(1)", call_id="c1") == {
        "role": "assistant", "type": "code", "format": "python", "content": "print(1)", "call_id": "c1"}
    assert lmc.console_output("1\n", call_id="c1") == {
        "role": "computer", "type": "console", "format": "output", "content": "1\n", "call_id": "c1"}
    assert lmc.active_line(3)["content"] == 3
    assert lmc.message("computer", "console", None, format="active_line", start=True)["start"] is True
    assert lmc.error("rate limited", "api") == {"role": "computer", "type": "error", "content": "rate limited", "kind": "api"}
    assert lmc.tool_call("Read", {"path": "a"}, call_id="t1")["format"] == "Read"
    assert lmc.reasoning("hmm", signature="sig")["signature"] == "sig"
    assert lmc.image(PNG_B64)["format"] == "base64.png"
    assert lmc.confirmation({"x": 1})["format"] == "execution"
    assert lmc.input_request("Name: ")["password"] is False
    with pytest.raises(ValueError):
        lmc.message("robot", "message", "x")
    with pytest.raises(ValueError):
        lmc.message("user", "shout", "x")


def test_is_ephemeral():
    assert lmc.is_ephemeral(lmc.active_line(1))
    assert lmc.is_ephemeral(lmc.confirmation({}))
    assert lmc.is_ephemeral(lmc.input_request("?"))
    assert not lmc.is_ephemeral(lmc.console_output("x"))
    assert not lmc.is_ephemeral("nope")  # type: ignore[arg-type]


def test_fence_longer_than_inner_backticks():
    assert lmc.fence("python", "print(1)") == "```python\nprint(1)\n```"
    inner = "x = '''\n```bash\nls\n```\n'''"
    assert lmc.fence("python", inner) == "````python\n" + inner + "\n````"


# ---------------------------------------------------------------------------- ChunkMerger


def test_chunk_merger_stream():
    chunks = [
        {"role": "assistant", "type": "message", "start": True},
        {"role": "assistant", "type": "message", "content": "Let me "},
        {"role": "assistant", "type": "message", "content": "check."},
        {"role": "assistant", "type": "message", "end": True},
        {"role": "assistant", "type": "code", "format": "python", "start": True, "call_id": "c1"},
        {"role": "assistant", "type": "code", "format": "python", "content": "print("},
        {"role": "assistant", "type": "code", "format": "python", "content": "42)"},
        {"role": "assistant", "type": "code", "format": "python", "end": True},
        {"role": "computer", "type": "confirmation", "format": "execution", "content": {"code": "print(42)"}},
        {"role": "computer", "type": "console", "format": "active_line", "content": 1, "start": True},
        {"role": "computer", "type": "console", "format": "output", "content": "4", "call_id": "c1"},
        {"role": "computer", "type": "console", "format": "output", "content": "2\n"},
        {"role": "computer", "type": "console", "format": "active_line", "content": None, "end": True},
    ]
    m = ChunkMerger()
    finished = []
    for c in chunks:
        finished += m.feed(c)
    finished += m.finish()
    assert finished == [
        {"role": "assistant", "type": "message", "content": "Let me check."},
        {"role": "assistant", "type": "code", "format": "python", "content": "print(42)", "call_id": "c1"},
        {"role": "computer", "type": "console", "format": "output", "content": "42\n", "call_id": "c1"},
    ]
    assert m.messages == finished


def test_chunk_merger_implicit_boundaries_and_finish():
    m = ChunkMerger()
    out = m.feed({"role": "assistant", "type": "message", "content": "Hi"})
    assert out == []
    out = m.feed({"role": "assistant", "type": "code", "format": "shell", "content": "ls"})
    assert out == [{"role": "assistant", "type": "message", "content": "Hi"}]
    out = m.feed({"role": "assistant", "type": "code", "format": "shell", "content": "ls", "start": True, "end": True})
    assert out == [{"role": "assistant", "type": "code", "format": "shell", "content": "ls"}] * 2
    assert m.finish() == []
    m.feed({"role": "assistant", "type": "message", "start": True, "content": "cut"})
    assert m.finish() == [{"role": "assistant", "type": "message", "content": "cut"}]
    with pytest.raises(TypeError):
        m.feed("text")  # type: ignore[arg-type]


def test_chunk_merger_empty_message_and_dict_content():
    m = ChunkMerger()
    out = m.feed({"role": "assistant", "type": "message", "start": True})
    out += m.feed({"role": "assistant", "type": "message", "end": True})
    assert out == [{"role": "assistant", "type": "message", "content": ""}]
    out = m.feed({"role": "assistant", "type": "tool_call", "format": "Read", "content": {"path": "a"}, "call_id": "t", "start": True, "end": True})
    assert out[0]["content"] == {"path": "a"}


# ---------------------------------------------------------------------------- function mode


def test_br09_two_calls_one_assistant_message():
    msgs = [
        lmc.text("user", "run both"),
        lmc.code("python", "print('A')", call_id="call_a", tool={"name": "execute", "arguments": {"language": "python", "code": "print('A')"}}),
        lmc.code("shell", "echo B", call_id="call_b", tool={"name": "execute", "arguments": '{"language": "shell", "code": "echo B"}'}),
        lmc.console_output("A\n", call_id="call_a"),
        lmc.console_output("B\n", call_id="call_b"),
        lmc.text("assistant", "Both ran."),
    ]
    out = to_openai_messages(msgs, system_message="SYS", function_calling=True)
    assert out[0] == {"role": "system", "content": "SYS"}
    assert out[1] == {"role": "user", "content": "run both"}
    assert out[2]["role"] == "assistant" and out[2]["content"] is None
    assert out[2]["tool_calls"] == [
        {"id": "call_a", "type": "function", "function": {"name": "execute", "arguments": json.dumps({"language": "python", "code": "print('A')"})}},
        {"id": "call_b", "type": "function", "function": {"name": "execute", "arguments": '{"language": "shell", "code": "echo B"}'}},
    ]
    assert out[3] == {"role": "tool", "tool_call_id": "call_a", "content": "A"}
    assert out[4] == {"role": "tool", "tool_call_id": "call_b", "content": "B"}
    assert out[5] == {"role": "assistant", "content": "Both ran."}
    assert len(out) == 6
    assert_calls_paired(out)


def test_interleaved_results_still_valid():
    msgs = [
        lmc.text("user", "go"),
        lmc.code("python", "print(1)", call_id="a"),
        lmc.console_output("1", call_id="a"),
        lmc.code("python", "print(2)", call_id="b"),
        lmc.console_output("2", call_id="b"),
    ]
    out = to_openai_messages(msgs, system_message="", function_calling=True)
    assert out[0]["role"] == "user"
    assert_calls_paired(out)
    assert tool_ids_answered(out) == {"a": 1, "b": 1}


def test_text_then_call_grouped_and_no_output():
    msgs = [
        lmc.text("user", "make a dir"),
        lmc.text("assistant", "Creating it."),
        lmc.code("shell", "mkdir x", call_id="c1"),
        lmc.console_output("", call_id="c1"),
    ]
    out = to_openai_messages(msgs, system_message="s", function_calling=True)
    assert out[2]["content"] == "Creating it."
    assert out[2]["tool_calls"][0]["function"]["arguments"] == '{"language": "shell", "code": "mkdir x"}'
    assert out[3] == {"role": "tool", "tool_call_id": "c1", "content": "No output"}


def test_multiple_outputs_of_one_call_joined():
    msgs = [
        lmc.text("user", "x"),
        lmc.code("python", "print(1); 1/0", call_id="c1"),
        lmc.console_output("1\n", call_id="c1"),
        lmc.console_output("ZeroDivisionError\n", call_id="c1"),
    ]
    out = to_openai_messages(msgs, system_message="s", function_calling=True)
    assert out[-1] == {"role": "tool", "tool_call_id": "c1", "content": "1\nZeroDivisionError"}


def test_br11b_unanswered_call_gets_synthetic_result():
    msgs = [
        lmc.text("user", "run"),
        lmc.code("python", "print(1)", call_id="call_1"),
        lmc.error("API connection error", "api"),
        lmc.text("user", "hi again"),
    ]
    out = to_openai_messages(msgs, system_message="s", function_calling=True)
    assert_calls_paired(out)
    assert out[3] == {"role": "tool", "tool_call_id": "call_1", "content": lmc.NOT_RUN}
    assert out[4] == {"role": "user", "content": "Error: API connection error\n\nhi again"}


def test_br07_error_result_answers_call_once():
    for name in ("browse_web", "functions.execute", "executeexecute"):
        msgs = [
            lmc.text("user", "x"),
            lmc.code("python", "", call_id="call_1", tool={"name": name, "arguments": '{"url": "x"}'}),
            lmc.console_output("The function `browse_web` does not exist. Available: execute(language, code).", call_id="call_1"),
        ]
        out = to_openai_messages(msgs, system_message="s", function_calling=True)
        assert tool_ids_answered(out) == {"call_1": 1}
        fn_name = out[2]["tool_calls"][0]["function"]["name"]
        assert fn_name == ("browse_web" if name == "browse_web" else "execute")
        assert out[2]["tool_calls"][0]["function"]["arguments"] == '{"url": "x"}'


def test_raw_non_json_arguments_replayed_as_json():
    msgs = [
        lmc.text("user", "x"),
        lmc.code("python", "import math\nprint(math.factorial(5))", call_id="call_1",
                 tool={"name": "python", "arguments": "import math\nprint(math.factorial(5))"}),
        lmc.console_output("120\n", call_id="call_1"),
    ]
    out = to_openai_messages(msgs, system_message="s", function_calling=True)
    call = out[2]["tool_calls"][0]
    assert call["function"]["name"] == "python"
    assert json.loads(call["function"]["arguments"]) == {"language": "python", "code": "import math\nprint(math.factorial(5))"}


def test_tool_call_messages_and_error_results():
    msgs = [
        lmc.text("user", "read it"),
        lmc.tool_call("Read", {"path": "a.txt"}, call_id="t1"),
        lmc.tool_call("mcp__srv__tool", {"q": 1}, call_id="t2"),
        lmc.console_output("hello", call_id="t1"),
        lmc.error("blocked by policy", "policy", call_id="t2"),
    ]
    out = to_openai_messages(msgs, system_message="s", function_calling=True)
    assert out[2]["tool_calls"] == [
        {"id": "t1", "type": "function", "function": {"name": "Read", "arguments": '{"path": "a.txt"}'}},
        {"id": "t2", "type": "function", "function": {"name": "mcp__srv__tool", "arguments": '{"q": 1}'}},
    ]
    assert out[3] == {"role": "tool", "tool_call_id": "t1", "content": "hello"}
    assert out[4] == {"role": "tool", "tool_call_id": "t2", "content": "Error: blocked by policy"}


def test_orphan_result_becomes_text():
    msgs = [lmc.text("user", "x"), lmc.console_output("stray", call_id="ghost")]
    out = to_openai_messages(msgs, system_message="s", function_calling=True)
    assert out[1:] == [{"role": "user", "content": "x\n\nCode output:\nstray"}]


def test_flags_and_ephemeral_ignored():
    msgs = [
        {"role": "user", "type": "message", "content": "hi", "start": True, "end": True},
        lmc.active_line(1),
        lmc.confirmation({"role": "assistant", "type": "code"}),
        {"role": "assistant", "type": "message", "content": "hello", "end": True},
    ]
    out = to_openai_messages(msgs, system_message="s", function_calling=True)
    assert out == [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]


# ---------------------------------------------------------------------------- text mode


def test_text_mode_fences_and_code_output():
    msgs = [
        lmc.text("user", "go"),
        lmc.text("assistant", "First:"),
        lmc.code("python", "x = 5\nprint(x)"),
        lmc.text("assistant", "Then:"),
        lmc.code("python", "print(x * 2)"),
        lmc.text("assistant", "Done."),
        lmc.console_output("5\n"),
        lmc.console_output(""),
        lmc.text("assistant", "All good."),
    ]
    out = to_openai_messages(msgs, system_message="s", function_calling=False)
    assert out[2] == {"role": "assistant", "content": "First:\n\n```python\nx = 5\nprint(x)\n```\n\nThen:\n\n```python\nprint(x * 2)\n```\n\nDone."}
    assert out[3] == {"role": "user", "content": "Code output:\n5\n\nThe code ran with no output."}
    assert out[4] == {"role": "assistant", "content": "All good."}
    roles = [m["role"] for m in out[1:]]
    assert all(a != b for a, b in zip(roles, roles[1:]))


def test_text_mode_with_call_ids_has_no_tool_messages():
    msgs = [
        lmc.text("user", "go"),
        lmc.code("python", "print(1)", call_id="c1"),
        lmc.console_output("1", call_id="c1"),
        lmc.tool_call("Read", {"path": "a"}, call_id="t1"),
        lmc.console_output("contents", call_id="t1"),
    ]
    out = to_openai_messages(msgs, system_message="s", function_calling=False)
    assert all("tool_calls" not in m and m["role"] != "tool" for m in out)
    assert out[2] == {"role": "assistant", "content": "```python\nprint(1)\n```"}
    assert out[3] == {"role": "user", "content": "Code output:\n1"}
    assert out[4] == {"role": "assistant", "content": 'Called tool `Read` with arguments: {"path": "a"}'}


def test_consecutive_user_messages_merged_and_errors_as_user_text():
    msgs = [lmc.text("user", "a"), lmc.text("user", "b"), lmc.error("rate limited", "api")]
    out = to_openai_messages(msgs, system_message="", function_calling=False)
    assert out == [{"role": "user", "content": "a\n\nb\n\nError: rate limited"}]


# ---------------------------------------------------------------------------- images


def test_images_vision_and_not(tmp_path):
    p = tmp_path / "shot.png"
    p.write_bytes(PNG)
    msgs = [lmc.text("user", "what is this?"), lmc.image(str(p), "path", role="user")]
    out = to_openai_messages(msgs, system_message="s", function_calling=True, vision=True)
    assert out[1]["role"] == "user"
    assert out[1]["content"] == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG_B64}},
    ]
    out = to_openai_messages(msgs, system_message="s", function_calling=True, vision=False)
    assert out[1]["role"] == "user" and isinstance(out[1]["content"], str)
    assert out[1]["content"].startswith("what is this?\n\n[The user attached an image (")
    assert "cannot see images" in out[1]["content"]


def test_missing_image_path_is_a_note(tmp_path):
    msgs = [lmc.image(str(tmp_path / "nope.png"), "path", role="user")]
    out = to_openai_messages(msgs, system_message="", function_calling=False, vision=True)
    assert out[0]["content"][0]["type"] == "text"
    assert "could not be read" in out[0]["content"][0]["text"]


def test_image_answering_call():
    msgs = [
        lmc.text("user", "plot"),
        lmc.code("python", "plt.show()", call_id="c1"),
        lmc.image(PNG_B64, "base64.png", call_id="c1"),
    ]
    out = to_openai_messages(msgs, system_message="s", function_calling=True, vision=True)
    assert out[3]["role"] == "tool" and out[3]["tool_call_id"] == "c1"
    assert out[4]["role"] == "user"
    assert out[4]["content"][1] == {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG_B64}}
    out = to_openai_messages(msgs, system_message="s", function_calling=True, vision=False)
    assert len(out) == 4 and "cannot see images" in out[3]["content"]


# ---------------------------------------------------------------------------- reasoning


def test_reasoning_dropped_except_anthropic_signature():
    msgs = [
        lmc.text("user", "x"),
        lmc.reasoning("thinking hard", signature="SIG"),
        lmc.code("python", "print(1)", call_id="c1"),
        lmc.console_output("1", call_id="c1"),
    ]
    out = to_openai_messages(msgs, system_message="s", function_calling=True, provider="anthropic")
    assert out[2]["thinking_blocks"] == [{"type": "thinking", "thinking": "thinking hard", "signature": "SIG"}]
    assert out[2]["tool_calls"][0]["id"] == "c1"
    for provider in ("openai", "deepseek", None):
        out = to_openai_messages(msgs, system_message="s", function_calling=True, provider=provider)
        assert "thinking_blocks" not in out[2]
        assert "thinking hard" not in json.dumps(out)
    unsigned = [lmc.text("user", "x"), lmc.reasoning("no sig"), lmc.text("assistant", "ok")]
    out = to_openai_messages(unsigned, system_message="s", function_calling=True, provider="anthropic")
    assert out[2] == {"role": "assistant", "content": "ok"}


def test_bad_input():
    with pytest.raises(TypeError):
        to_openai_messages("hi", system_message="s", function_calling=True)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        to_openai_messages(["hi"], system_message="s", function_calling=True)  # type: ignore[list-item]


# ---------------------------------------------------------------------------- OI compatibility


def test_lmc_oi_round_trip():
    msgs = [
        lmc.text("user", "héllo ✅ — test"),
        lmc.code("python", "print(1)", call_id="c1", tool={"name": "execute", "arguments": {}}),
        lmc.active_line(1),
        lmc.console_output("1", call_id="c1"),
    ]
    oi = lmc_to_oi(msgs)
    assert oi == [
        {"role": "user", "type": "message", "content": "héllo ✅ — test"},
        {"role": "assistant", "type": "code", "format": "python", "content": "print(1)"},
        {"role": "computer", "type": "console", "format": "output", "content": "1"},
    ]
    assert oi_to_lmc(oi) == oi
    assert oi_to_lmc(msgs) == [m for m in msgs if not lmc.is_ephemeral(m)]


def test_oi_to_lmc_old_shapes_and_errors():
    assert oi_to_lmc([{"role": "user", "content": "hi"}]) == [{"role": "user", "type": "message", "content": "hi"}]
    assert oi_to_lmc([{"role": "computer", "type": "console", "content": "x"}])[0]["format"] == "output"
    with pytest.raises(ValueError):
        oi_to_lmc({"role": "user"})  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        oi_to_lmc([{"content": "no role"}])


# ---------------------------------------------------------------------------- litellm accepts it


def test_litellm_translates_output_for_anthropic():
    """litellm's own Anthropic translation reads our messages: thinking first, tool_use, tool_result."""
    import os

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from litellm.litellm_core_utils.prompt_templates.factory import anthropic_messages_pt
    from litellm.utils import validate_chat_completion_user_messages

    msgs = [
        lmc.text("user", "x"),
        lmc.image(PNG_B64, "base64.png", role="user"),
        lmc.reasoning("thinking hard", signature="SIG"),
        lmc.text("assistant", "Running."),
        lmc.code("python", "print(1)", call_id="c1"),
        lmc.code("shell", "echo 2", call_id="c2"),
        lmc.console_output("1", call_id="c1"),
        lmc.console_output("", call_id="c2"),
        lmc.text("assistant", "done"),
        lmc.text("user", "more"),
    ]
    out = to_openai_messages(msgs, system_message="sys", function_calling=True, vision=True, provider="anthropic")
    validate_chat_completion_user_messages(out)
    anth = anthropic_messages_pt(out[1:], model="claude-sonnet-4-5", llm_provider="anthropic")
    assert [m["role"] for m in anth] == ["user", "assistant", "user", "assistant", "user"]
    assert anth[0]["content"][1]["type"] == "image"
    assistant = anth[1]["content"]
    assert assistant[0] == {"type": "thinking", "thinking": "thinking hard", "signature": "SIG"}
    assert [b["type"] for b in assistant[1:]] == ["text", "tool_use", "tool_use"]
    assert assistant[2]["input"] == {"language": "python", "code": "print(1)"}
    assert [(b["tool_use_id"], b["content"]) for b in anth[2]["content"]] == [("c1", "1"), ("c2", "No output")]
