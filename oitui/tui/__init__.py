"""oitui's Textual front end (the only package that imports textual).

Entry point: :func:`oitui.tui.app.run_app` (imported lazily so ``import oitui.tui`` stays cheap).
"""

from __future__ import annotations

__all__ = ["run_app"]


def run_app(settings=None, resume: str | None = None) -> int:
    """Open the full-screen app; returns the process exit code (see :func:`oitui.tui.app.run_app`)."""
    from oitui.tui.app import run_app as _run_app

    return _run_app(settings=settings, resume=resume)
