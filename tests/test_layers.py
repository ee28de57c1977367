"""The layer rules of DESIGN.md: only oitui.tui imports textual, core imports no front end,
computer never imports core; ``import oitui`` and ``oitui --version`` stay cheap."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
HEAVY = ("litellm", "textual", "jupyter_client", "semgrep", "llama_cpp", "rich")


def test_import_linter_contracts_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    result = subprocess.run(
        [str(lint), "--config", str(ROOT / "pyproject.toml")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


def test_textual_imported_only_under_tui():
    offenders = []
    for path in (ROOT / "oitui").rglob("*.py"):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("oitui/tui/"):
            continue
        for line in path.read_text(encoding="utf-8").splitlines():
            stripped = line.strip()
            if stripped.startswith(("import textual", "from textual")):
                offenders.append(rel)
    assert offenders == []


def test_import_oitui_and_version_load_nothing_heavy():
    code = (
        "import sys, oitui, oitui.cli\n"
        "rc = oitui.cli.main(['--version'])\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), rc)\n"
    )
    env = dict(os.environ)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=env)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("oitui ")
    assert lines[-1] == "[] 0"
