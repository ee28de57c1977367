"""Other local servers: Ollama (``ollama/NAME`` + ``OLLAMA_HOST``), LM Studio, vLLM, and any
OpenAI-compatible endpoint (``--api-base``): the endpoint resolves and requests reach it.

Real HTTP to the scripted server on 127.0.0.1 (tests/support/scripted_server.py).
"""

from __future__ import annotations

import os

import pytest
from support.scripted_server import scripted_server, scripted_server_module, text_reply  # noqa: F401

from oitui.local.servers import normalize_ollama_host, resolve_api_base


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("127.0.0.1:9000", "http://127.0.0.1:9000"),
        ("myhost", "http://myhost:11434"),
        ("0.0.0.0", "http://127.0.0.1:11434"),
        ("0.0.0.0:11500", "http://127.0.0.1:11500"),
        ("http://box:5/", "http://box:5"),
        ("https://ollama.example.com", "https://ollama.example.com"),
        ("[::1]:8080", "http://[::1]:8080"),
        ("::1", "http://[::1]:11434"),
    ],
)
def test_normalize_ollama_host(value, expected):
    assert normalize_ollama_host(value) == expected


def test_bad_ollama_host():
    with pytest.raises(ValueError, match="bad port"):
        normalize_ollama_host("box:abc")
    with pytest.raises(ValueError):
        normalize_ollama_host("  ")
    # resolve_api_base never raises: a bad value falls back to the default port.
    assert resolve_api_base("ollama/llama3", environ={"OLLAMA_HOST": "box:abc"}) == "http://localhost:11434"


def test_resolve_api_base_rules():
    env = {"OLLAMA_HOST": "10.0.0.5:7000"}
    assert resolve_api_base("ollama/llama3", environ=env) == "http://10.0.0.5:7000"
    assert resolve_api_base("ollama_chat/llama3", environ=env) == "http://10.0.0.5:7000"
    assert resolve_api_base("ollama/llama3", environ={}) == "http://localhost:11434"
    # OLLAMA_API_BASE (litellm's own variable) beats OLLAMA_HOST; an explicit api_base beats both.
    env2 = {**env, "OLLAMA_API_BASE": "http://a:1/"}
    assert resolve_api_base("ollama/llama3", environ=env2) == "http://a:1"
    assert resolve_api_base("ollama/llama3", "http://flag:2/", environ=env2) == "http://flag:2"
    assert resolve_api_base("lm_studio/qwen", environ={}) == "http://localhost:1234/v1"
    assert resolve_api_base("hosted_vllm/m", environ={"HOSTED_VLLM_API_BASE": "http://v:8000/v1"}) == "http://v:8000/v1"
    assert resolve_api_base("hosted_vllm/m", environ={}) is None
    assert resolve_api_base("gpt-4o", environ=env) is None
    assert resolve_api_base("openai/anything", "http://127.0.0.1:8080/v1", environ={}) == "http://127.0.0.1:8080/v1"


@pytest.fixture(scope="module")
def litellm_mod():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    litellm.suppress_debug_info = True
    return litellm


def test_openai_compatible_api_base_reaches_the_server(scripted_server, litellm_mod):  # noqa: F811
    """llamafile, LM Studio, vLLM, Ollama's /v1: ``--model openai/NAME --api-base URL``."""
    scripted_server.script = [text_reply(["Hi ", "from ", "the server"])]
    base = resolve_api_base("openai/my-model", scripted_server.url, environ={})
    chunks = list(litellm_mod.completion(model="openai/my-model", api_base=base, api_key="none",
                                         messages=[{"role": "user", "content": "hello"}], stream=True))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hi from the server"
    assert scripted_server.paths == ["/v1/chat/completions"]
    assert scripted_server.requests[0]["model"] == "my-model"


def test_core_passes_api_base_through(scripted_server):  # noqa: F811
    """The engine with ``llm.api_base`` set (what ``--api-base`` does) talks to that endpoint."""
    from oitui.core.interpreter import OpenInterpreter

    scripted_server.script = [text_reply("All done here.")]
    interp = OpenInterpreter()
    interp.llm.model = "openai/local-server-model"
    interp.llm.api_base = scripted_server.url
    interp.llm.api_key = "none"
    interp.llm.supports_functions = False
    out = interp.chat("hello", display=False)
    assert any("All done here." in str(m.get("content")) for m in out)
    assert scripted_server.requests and scripted_server.requests[0]["model"] == "local-server-model"


def test_ollama_host_reaches_the_server(scripted_server, litellm_mod):  # noqa: F811
    """``ollama_chat/NAME`` with ``OLLAMA_HOST=127.0.0.1:PORT`` posts to that host's /api/chat.

    The scripted server speaks only the OpenAI protocol, so it answers 404: what is checked is
    that the request went to the resolved endpoint with the model name.
    """
    base = resolve_api_base("ollama_chat/llama3.2", environ={"OLLAMA_HOST": f"127.0.0.1:{scripted_server.port}"})
    assert base == f"http://127.0.0.1:{scripted_server.port}"
    with pytest.raises(Exception):  # noqa: B017 - any litellm error for the 404 answer
        litellm_mod.completion(model="ollama_chat/llama3.2", api_base=base,
                               messages=[{"role": "user", "content": "hello"}], max_retries=0)
    assert scripted_server.paths and scripted_server.paths[0] == "/api/chat"
    assert scripted_server.requests[0]["model"] == "llama3.2"
