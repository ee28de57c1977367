"""The ``oitui`` command line (placeholder until the agent-core issue fills it in)."""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``oitui`` console script. Returns the process exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--version"]:
        from oitui import __version__

        print(f"oitui {__version__}")
        return 0
    print("oitui: not available yet", file=sys.stderr)
    return 2
