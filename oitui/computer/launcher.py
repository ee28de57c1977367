"""The one place where runtime processes start.

Every runtime (the Jupyter kernel, bash, node, R, pwsh, osascript) is started with
:func:`launch`, so a sandbox can wrap every one of them by changing this module only.
Provider API keys are removed from the environment the child gets.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence

__all__ = ["launch", "child_env", "SECRET_ENV_NAMES"]

#: Variables always removed from a runtime's environment (plus every ``*_API_KEY`` and ``*_API_TOKEN``).
SECRET_ENV_NAMES: frozenset[str] = frozenset(
    {
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "DEEPSEEK_API_KEY",
        "MOONSHOT_API_KEY",
        "DASHSCOPE_API_KEY",
        "OPENROUTER_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "AZURE_API_KEY",
        "HF_TOKEN",
        "HUGGINGFACE_API_KEY",
    }
)


def _is_secret(name: str) -> bool:
    upper = name.upper()
    return upper in SECRET_ENV_NAMES or upper.endswith(("_API_KEY", "_API_TOKEN"))


def child_env(env: Mapping[str, str] | None = None, **extra: str) -> dict[str, str]:
    """Return a copy of ``env`` (default ``os.environ``) plus ``extra``, API keys removed.

    Removed: the names in :data:`SECRET_ENV_NAMES` and every name ending in ``_API_KEY`` or
    ``_API_TOKEN`` (case-insensitive), also when given in ``extra``.
    """
    base = dict(os.environ if env is None else env)
    base.update(extra)
    return {k: v for k, v in base.items() if not _is_secret(k)}


def launch(argv: Sequence[str], **popen_kwargs) -> subprocess.Popen:
    """Start a runtime process: ``subprocess.Popen(list(argv), **popen_kwargs)``.

    ``env`` (a mapping, default ``os.environ``) is filtered with :func:`child_env`, so no
    provider API key reaches the child. Unless the caller says otherwise the child gets
    ``stdin=DEVNULL`` and ``start_new_session=True`` (its own process group, so a terminal's
    Ctrl-C never reaches it directly). Raises ``ValueError`` for an empty ``argv`` and
    ``FileNotFoundError``/``OSError`` when the program cannot be started.
    """
    argv = [os.fspath(a) for a in argv]
    if not argv:
        raise ValueError("launch() needs a program to run")
    popen_kwargs["env"] = child_env(popen_kwargs.get("env"))
    popen_kwargs.setdefault("stdin", subprocess.DEVNULL)
    popen_kwargs.setdefault("start_new_session", True)
    return subprocess.Popen(argv, **popen_kwargs)
