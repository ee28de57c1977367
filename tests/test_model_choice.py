"""Model choice when none is configured: explicit model > --local > first API key > local model.

Fake keys only, in a plain dict environment (no network, no real keys).
"""

from __future__ import annotations

import os

import pytest

from oitui.core.model_choice import (
    FALLBACK_DEFAULT_MODELS,
    LOCAL_MODEL,
    PROVIDER_KEYS,
    choose_model,
    default_models,
    default_system_message_for,
    is_local_model,
)


class FakeSettings(dict):
    """A settings Mapping that knows where each value came from (like core.settings)."""

    def __init__(self, values: dict, sources: dict | None = None):
        super().__init__(values)
        self._sources = sources or {}

    def source_of(self, key: str) -> str:
        return self._sources.get(key, "default")


ALL_KEYS = {name: f"fake-{name.lower()}" for name, _ in PROVIDER_KEYS}


def test_no_key_no_model_picks_the_local_model():
    assert choose_model({}, {}) == (LOCAL_MODEL, "no API key found; using the embedded local model")


@pytest.mark.parametrize("index", range(len(PROVIDER_KEYS)))
def test_first_key_in_order_wins(index):
    # Only keys from `index` on are set: the first of those decides.
    env = {name: "fake" for name, _ in PROVIDER_KEYS[index:]}
    env["UNRELATED"] = "x"
    name, provider = PROVIDER_KEYS[index]
    model, reason = choose_model({}, env)
    assert model == default_models()[provider]
    assert reason == f"{name} is set"


def test_order_is_anthropic_openai_deepseek_moonshot_dashscope():
    assert [name for name, _ in PROVIDER_KEYS] == [
        "ANTHROPIC_API_KEY",
        "OPENAI_API_KEY",
        "DEEPSEEK_API_KEY",
        "MOONSHOT_API_KEY",
        "DASHSCOPE_API_KEY",
    ]
    model, reason = choose_model({}, dict(ALL_KEYS))
    assert reason == "ANTHROPIC_API_KEY is set"
    assert model == default_models()["anthropic"]


def test_openai_default_is_gpt_4o_and_empty_key_is_ignored():
    model, reason = choose_model({}, {"ANTHROPIC_API_KEY": "  ", "OPENAI_API_KEY": "sk-fake"})
    assert (model, reason) == ("gpt-4o", "OPENAI_API_KEY is set")


def test_explicit_model_wins_over_keys_with_its_source_as_reason():
    s = FakeSettings({"model": "deepseek/deepseek-chat"}, {"model": "cli"})
    assert choose_model(s, dict(ALL_KEYS)) == ("deepseek/deepseek-chat", "set by --model")
    s = FakeSettings({"model": "gpt-4o-mini"}, {"model": "config.toml"})
    assert choose_model(s, dict(ALL_KEYS)) == ("gpt-4o-mini", "from config.toml")
    s = FakeSettings({"model": "gpt-4o-mini"}, {"model": "env"})
    assert choose_model(s, {}) == ("gpt-4o-mini", "set by OITUI_MODEL")
    s = FakeSettings({"model": "gpt-4o-mini"}, {"model": "profile fast"})
    assert choose_model(s, {}) == ("gpt-4o-mini", "from profile fast")
    # A plain Mapping (no source_of) still wins.
    assert choose_model({"model": "gpt-4o-mini"}, dict(ALL_KEYS))[0] == "gpt-4o-mini"


def test_a_model_from_the_builtin_defaults_is_not_an_explicit_choice():
    s = FakeSettings({"model": "gpt-4o"}, {"model": "default"})
    assert choose_model(s, {"DEEPSEEK_API_KEY": "fake"}) == (default_models()["deepseek"], "DEEPSEEK_API_KEY is set")


def test_local_forces_the_local_model_over_keys():
    s = FakeSettings({"local": True}, {"local": "cli"})
    assert choose_model(s, dict(ALL_KEYS)) == (LOCAL_MODEL, "set by --local; using the embedded local model")
    assert choose_model({"local": "true"}, dict(ALL_KEYS))[0] == LOCAL_MODEL
    assert choose_model({"local": False}, dict(ALL_KEYS))[0] != LOCAL_MODEL


def test_local_from_config_does_not_override_a_model_flag():
    s = FakeSettings({"local": True, "model": "gpt-4o"}, {"local": "config.toml", "model": "cli"})
    assert choose_model(s, {}) == ("gpt-4o", "set by --model")
    # Same level: --local forces.
    s = FakeSettings({"local": True, "model": "gpt-4o"}, {"local": "cli", "model": "cli"})
    assert choose_model(s, {})[0] == LOCAL_MODEL
    # --local with an explicit local model keeps that file.
    s = FakeSettings({"local": True, "model": "local/models/x.gguf"}, {"local": "cli", "model": "cli"})
    assert choose_model(s, {})[0] == "local/models/x.gguf"


def test_default_models_come_from_settings_table_over_the_fallback():
    models = default_models({"default_models": {"openai": "gpt-4.1"}})
    assert models["openai"] == "gpt-4.1"
    assert models["anthropic"]  # the rest still there
    model, _ = choose_model({"default_models": {"openai": "gpt-4.1"}}, {"OPENAI_API_KEY": "fake"})
    assert model == "gpt-4.1"


def test_shipped_default_toml_matches_the_fallback_and_litellm_knows_every_name():
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    shipped = default_models()
    for provider, model in FALLBACK_DEFAULT_MODELS.items():
        assert model in litellm.model_cost, f"fallback {provider} model {model!r} unknown to litellm"
        assert shipped[provider] in litellm.model_cost, f"config/default.toml {provider} model unknown"
    assert shipped == FALLBACK_DEFAULT_MODELS, "keep FALLBACK_DEFAULT_MODELS equal to config/default.toml"


def test_is_local_model():
    assert is_local_model("local/smollm2")
    assert is_local_model("LOCAL//abs/x.gguf")
    assert not is_local_model("ollama/llama3")
    assert not is_local_model("gpt-4o")
    assert not is_local_model(None)


def test_tiny_prompt_only_for_local_models():
    prompt = default_system_message_for("local/smollm2")
    assert prompt and "```python" in prompt
    assert len(prompt) < 1500, "the tiny-model prompt must stay short"
    assert default_system_message_for("gpt-4o") is None
    assert default_system_message_for(None) is None
