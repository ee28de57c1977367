"""Runs code: stateful language runtimes with active-line tracking.

``from oitui.computer import Computer`` is cheap: the runtimes (and jupyter_client) load on
first use.
"""

from __future__ import annotations

__all__ = ["Computer"]


def __getattr__(name: str):
    if name == "Computer":
        from .computer import Computer

        return Computer
    raise AttributeError(f"module 'oitui.computer' has no attribute {name!r}")
