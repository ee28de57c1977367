"""Shared pytest setup: an isolated OITUI_HOME, no real API keys, litellm kept offline.

Shared test helpers live in ``tests/support/`` (import as ``from support.x import ...``).
"""

from __future__ import annotations

import os
import tempfile

import pytest

os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
for _key in (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "DEEPSEEK_API_KEY",
    "MOONSHOT_API_KEY",
    "DASHSCOPE_API_KEY",
    "OITUI_MODEL",
):
    os.environ.pop(_key, None)
_HOME = tempfile.mkdtemp(prefix="oitui-test-home-")
os.environ["OITUI_HOME"] = _HOME


@pytest.fixture
def oitui_home(tmp_path, monkeypatch):
    """A fresh, empty OITUI_HOME for one test (a pathlib.Path)."""
    home = tmp_path / "oitui-home"
    home.mkdir()
    monkeypatch.setenv("OITUI_HOME", str(home))
    return home
