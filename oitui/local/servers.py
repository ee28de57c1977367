"""Endpoints of local model servers (Ollama, LM Studio, llamafile, vLLM, any OpenAI-compatible).

litellm reaches them by model prefix (``ollama/NAME``, ``ollama_chat/NAME``, ``lm_studio/NAME``,
``hosted_vllm/NAME``, ``openai/NAME`` + ``api_base``). This module resolves the ``api_base``
the request should carry, so the core can pass it explicitly (and show it):

- an explicit ``api_base`` (``--api-base``, config ``api_base``) always wins;
- ``ollama/`` and ``ollama_chat/`` models: ``OLLAMA_API_BASE``, else Ollama's own
  ``OLLAMA_HOST`` (``host``, ``host:port`` or a URL; ``0.0.0.0`` means this machine), else
  ``http://localhost:11434``;
- ``lm_studio/``: ``LM_STUDIO_API_BASE``, else ``http://localhost:1234/v1``;
- ``hosted_vllm/``: ``HOSTED_VLLM_API_BASE`` (no default);
- anything else: None (the provider's own endpoint).

Cheap to import (standard library only).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from urllib.parse import urlsplit

OLLAMA_DEFAULT = "http://localhost:11434"
LM_STUDIO_DEFAULT = "http://localhost:1234/v1"


def normalize_ollama_host(value: str) -> str:
    """Ollama's ``OLLAMA_HOST`` -> a base URL.

    ``"127.0.0.1:9000"`` -> ``"http://127.0.0.1:9000"``; ``"myhost"`` ->
    ``"http://myhost:11434"``; ``"0.0.0.0"`` -> ``"http://127.0.0.1:11434"`` (the server listens
    on every address; a client talks to this machine); a URL is kept (trailing ``/`` removed).
    Raises ValueError for an empty value.
    """
    text = (value or "").strip()
    if not text:
        raise ValueError("OLLAMA_HOST is empty")
    had_scheme = "://" in text
    if not had_scheme and text.count(":") > 1 and not text.startswith("["):
        text = f"[{text}]"  # a bare IPv6 address
    if not had_scheme:
        text = "http://" + text
    parts = urlsplit(text)
    host = parts.hostname or "127.0.0.1"
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        raise ValueError(f"bad port in OLLAMA_HOST={value!r}") from None
    if port is None and not had_scheme:
        port = 11434
    netloc = f"{host}:{port}" if port else host
    return f"{parts.scheme}://{netloc}{parts.path.rstrip('/')}"


def provider_prefix(model: str | None) -> str:
    """The part of a litellm model name before the first ``/`` (lower case), or ""."""
    if not isinstance(model, str) or "/" not in model:
        return ""
    return model.split("/", 1)[0].strip().lower()


def resolve_api_base(model: str | None, api_base: str | None = None, environ: Mapping[str, str] | None = None) -> str | None:
    """The endpoint a request for ``model`` should go to, or None for the provider's own.

    See the module docstring for the rules. ``environ`` defaults to ``os.environ``. A bad
    ``OLLAMA_HOST`` falls back to ``http://localhost:11434``. Never raises.
    """
    if api_base and str(api_base).strip():
        return str(api_base).strip().rstrip("/")
    env = os.environ if environ is None else environ
    prefix = provider_prefix(model)
    if prefix in ("ollama", "ollama_chat"):
        if env.get("OLLAMA_API_BASE", "").strip():
            return env["OLLAMA_API_BASE"].strip().rstrip("/")
        if env.get("OLLAMA_HOST", "").strip():
            try:
                return normalize_ollama_host(env["OLLAMA_HOST"])
            except ValueError:
                return OLLAMA_DEFAULT
        return OLLAMA_DEFAULT
    if prefix == "lm_studio":
        return (env.get("LM_STUDIO_API_BASE") or LM_STUDIO_DEFAULT).strip().rstrip("/")
    if prefix == "hosted_vllm":
        value = env.get("HOSTED_VLLM_API_BASE", "").strip()
        return value.rstrip("/") or None
    return None
