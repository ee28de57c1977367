"""Language names and aliases, normalised in one place.

Every code path that asks "which runtime is this?" or "is this language enabled?" goes through
:func:`normalize_language`, so a tag like `` Python ``, ``py``, ``python3`` or ``zsh`` is treated
the same everywhere (fault case BR-01).
"""

from __future__ import annotations

import re

#: Canonical runtime names, in the order they are listed to the model.
LANGUAGES: tuple[str, ...] = ("python", "shell", "javascript", "r", "html", "applescript", "powershell")

_ALIASES: dict[str, str] = {
    "python": "python",
    "py": "python",
    "python3": "python",
    "ipython": "python",
    "shell": "shell",
    "bash": "shell",
    "sh": "shell",
    "zsh": "shell",
    "console": "shell",
    "javascript": "javascript",
    "js": "javascript",
    "node": "javascript",
    "nodejs": "javascript",
    "r": "r",
    "html": "html",
    "applescript": "applescript",
    "osascript": "applescript",
    "powershell": "powershell",
    "pwsh": "powershell",
    "ps1": "powershell",
}

#: Fence tags that are for display only and are never executed.
DISPLAY_ONLY: frozenset[str] = frozenset(
    {"markdown", "md", "text", "txt", "output", "json", "plaintext", "plain", "log", "yaml", "toml", "diff", "csv"}
)


def normalize_language(name: str | None) -> str | None:
    """Return the canonical runtime name for ``name``, or None when it names no runtime.

    Case and surrounding whitespace never matter; a trailing version number is ignored for
    python/bash style names (``python3.11`` -> ``python``). ``None`` or an empty string gives None.
    """
    if not name:
        return None
    key = name.strip().lower()
    if not key:
        return None
    if key in _ALIASES:
        return _ALIASES[key]
    # python3.11, bash5 ...
    stripped = re.sub(r"[\d.]+$", "", key)
    if stripped and stripped in _ALIASES and stripped in ("python", "bash", "sh", "zsh", "node", "pwsh"):
        return _ALIASES[stripped]
    return None


def is_display_only(name: str | None) -> bool:
    """True when a fence tag (``markdown``, ``text``, ``json``, ...) marks a block that is never run."""
    return bool(name) and name.strip().lower() in DISPLAY_ONLY
