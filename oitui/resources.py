"""Locate the data folders that ship with oitui (``config/`` and ``themes/``).

In a wheel they are the packages ``oitui.config`` and ``oitui.themes`` (mapped in pyproject);
in a source checkout or editable install they are the top-level folders beside ``oitui/``.
"""

from __future__ import annotations

from pathlib import Path


def resource_dir(name: str) -> Path:
    """Return the folder for ``name`` ("config" or "themes").

    Raises FileNotFoundError when neither location exists.
    """
    pkg = Path(__file__).resolve().parent
    for candidate in (pkg / name, pkg.parent / name):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"oitui resource folder {name!r} not found beside {pkg}")
