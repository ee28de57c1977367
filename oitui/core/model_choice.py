"""Which model to use when none is configured, and why.

Order (DESIGN.md, issue 6):

1. an explicit ``model`` in the settings (flag, environment, profile or config.toml) wins;
2. ``local = true`` (``--local``) forces the embedded local model (``local/smollm2``), unless the
   explicit model came from a *higher*-precedence source (``--local`` in config.toml does not
   override ``-m gpt-4o`` on the command line); an explicit ``local/...`` model is kept as is;
3. else the first API key found in the environment, in the order of :data:`PROVIDER_KEYS`,
   picks that provider's default model (``[default_models]`` in ``config/default.toml``, with
   :data:`FALLBACK_DEFAULT_MODELS` when that table is missing);
4. else the embedded local model.

Cheap to import: no third-party imports.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

#: The embedded model's litellm name (served by :mod:`oitui.local`).
LOCAL_MODEL = "local/smollm2"

#: Environment variable -> provider, in the order they are looked up.
PROVIDER_KEYS: tuple[tuple[str, str], ...] = (
    ("ANTHROPIC_API_KEY", "anthropic"),
    ("OPENAI_API_KEY", "openai"),
    ("DEEPSEEK_API_KEY", "deepseek"),
    ("MOONSHOT_API_KEY", "moonshot"),
    ("DASHSCOPE_API_KEY", "dashscope"),
)

#: Default model per provider when ``config/default.toml`` has no ``[default_models]`` table
#: (the same values as that table). Every name is a key of ``litellm.model_cost`` (checked by
#: tests/test_model_choice.py).
FALLBACK_DEFAULT_MODELS: dict[str, str] = {
    "openai": "gpt-4o",
    "anthropic": "claude-sonnet-4-6",
    "deepseek": "deepseek/deepseek-chat",
    "moonshot": "moonshot/kimi-k2.6",
    "dashscope": "dashscope/qwen3-coder-plus",
}

# Precedence rank of a setting's source (higher wins); unknown sources rank as "config".
_RANKS = (
    ("default", 0),
    ("built-in", 0),
    ("builtin", 0),
    ("config", 1),
    ("toml", 1),
    ("profile", 2),
    ("env", 3),
    ("oitui_", 3),
    ("cli", 4),
    ("command", 4),
    ("flag", 4),
    ("--", 4),
    ("argument", 4),
    ("override", 4),
)


def is_local_model(model: str | None) -> bool:
    """True when ``model`` names the embedded llama.cpp provider (``local/...``)."""
    return isinstance(model, str) and model.strip().lower().startswith("local/")


def _source_of(settings: Mapping, key: str) -> str | None:
    fn = getattr(settings, "source_of", None)
    if not callable(fn):
        return None
    try:
        src = fn(key)
    except Exception:  # noqa: BLE001 - a settings object without that key
        return None
    return None if src is None else str(src)


def _rank(source: str | None) -> int:
    if source is None:
        return 1
    low = source.lower()
    for token, rank in _RANKS:
        if token in low:
            return rank
    return 1


def _describe(source: str | None, key: str) -> str:
    """A short human reason for a setting that came from ``source``."""
    flag = "--" + key.replace("_", "-")
    if source is None:
        return f"set by {flag}" if key == "local" else "set in the settings"
    low = source.lower()
    if any(t in low for t in ("cli", "command", "flag", "argument", "override")):
        return f"set by {flag}"
    if low.startswith("--"):
        return f"set by {source}"
    if "oitui_" in low:
        return f"set by {source}"
    if "env" in low:
        return f"set by OITUI_{key.upper()}"
    if "profile" in low:
        return f"from {source}"
    if "config" in low or "toml" in low:
        return "from config.toml"
    return f"set by {source}"


def _truthy(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


def default_models(settings: Mapping | None = None) -> dict[str, str]:
    """Provider -> default model name.

    Taken from ``settings["default_models"]`` when the settings carry that table, else from the
    ``[default_models]`` table of the shipped ``config/default.toml``, over
    :data:`FALLBACK_DEFAULT_MODELS`. Never raises (a missing or bad file gives the fallback).
    """
    merged = dict(FALLBACK_DEFAULT_MODELS)
    table = None
    if isinstance(settings, Mapping):
        table = settings.get("default_models")
    if not isinstance(table, Mapping):
        table = _default_toml_table()
    if isinstance(table, Mapping):
        for provider, model in table.items():
            if isinstance(model, str) and model.strip():
                merged[str(provider)] = model.strip()
    return merged


def _default_toml_table() -> Mapping | None:
    try:
        import tomllib

        from oitui.resources import resource_dir

        path = resource_dir("config") / "default.toml"
        with open(path, "rb") as fh:
            data = tomllib.load(fh)
    except Exception:  # noqa: BLE001 - missing or broken file: use the fallback
        return None
    table = data.get("default_models")
    return table if isinstance(table, Mapping) else None


def choose_model(settings: Mapping | None, environ: Mapping | None = None) -> tuple[str, str]:
    """Pick the model and say why.

    ``settings``: a Mapping of setting name -> value (``model``, ``local``, optional
    ``default_models``), optionally with a ``source_of(key) -> str`` method naming where a value
    came from ("cli", "env", "config.toml", "profile NAME", "default", ...). ``environ``: the
    environment to look for API keys in (``os.environ`` when None).

    Returns ``(model, reason)``, e.g. ``("gpt-4o", "OPENAI_API_KEY is set")`` or
    ``("local/smollm2", "no API key found; using the embedded local model")``. Never raises.
    """
    settings = settings if isinstance(settings, Mapping) else {}
    environ = os.environ if environ is None else environ

    model = settings.get("model")
    model = model.strip() if isinstance(model, str) else None
    model_source = _source_of(settings, "model") if model else None
    if model and _rank(model_source) == 0:
        model = None  # a model from the built-in defaults is not an explicit choice

    local = _truthy(settings.get("local", False))
    local_source = _source_of(settings, "local") if local else None

    if local:
        if model and is_local_model(model):
            return model, f"{_describe(model_source, 'model')} (local model)"
        if not (model and _rank(model_source) > _rank(local_source)):
            return LOCAL_MODEL, f"{_describe(local_source, 'local')}; using the embedded local model"
    if model:
        return model, _describe(model_source, "model")

    models = default_models(settings)
    for env_name, provider in PROVIDER_KEYS:
        value = environ.get(env_name)
        if isinstance(value, str) and value.strip():
            return models.get(provider, FALLBACK_DEFAULT_MODELS[provider]), f"{env_name} is set"
    return LOCAL_MODEL, "no API key found; using the embedded local model"


def local_prompt_path() -> Path:
    """Path of the tiny-model system prompt (``config/prompts/local.md``)."""
    from oitui.resources import resource_dir

    return resource_dir("config") / "prompts" / "local.md"


def default_system_message_for(model: str | None) -> str | None:
    """The system message a model needs instead of the normal one, or None for the normal one.

    For the embedded local model (``local/...``) this is the short tiny-model prompt of
    ``config/prompts/local.md`` (text-fence mode: the model writes fenced code blocks; one
    few-shot example). Returns None for every other model, or when the prompt file is missing.
    """
    if not is_local_model(model):
        return None
    try:
        return local_prompt_path().read_text(encoding="utf-8").strip()
    except OSError:
        return None
