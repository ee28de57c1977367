"""End to end with the real embedded model: ``oitui -p ... -y --local --output-format stream-json``.

Not mocked: the CLI starts, the core streams from SmolLM2-135M through llama.cpp, the python
block runs in the real kernel, and its output comes back. Skipped (reason printed) only when
llama_cpp or the bundled model is not installed.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

import oitui.local as local
from oitui.local import LocalModelError

try:
    _MODEL_OK = local.llama_cpp_available() and bool(local.find_smollm2())
    _WHY = "llama_cpp is not installed (pip install 'oitui[local]')"
except LocalModelError as exc:
    _MODEL_OK, _WHY = False, str(exc)

if not _MODEL_OK:
    print(f"\nSKIP test_local_cli: {_WHY}", file=sys.stderr)

pytestmark = [
    pytest.mark.local_model,
    pytest.mark.slow,
    pytest.mark.skipif(not _MODEL_OK, reason=_WHY),
]

HELLO = re.compile(r"hello,?\s*world", re.I)


def test_local_hello_world_stream_json(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(OITUI_HOME=str(home), LITELLM_LOCAL_MODEL_COST_MAP="True")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "oitui", "-p", "print hello world using python", "-y", "--local",
         "--output-format", "stream-json"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )
    elapsed = time.monotonic() - started
    assert elapsed < 120, f"took {elapsed:.0f} s (limit 120 s)"
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert lines, f"no output; exit {proc.returncode}; stderr:\n{proc.stderr[-2000:]}"
    assert lines[0]["type"] == "session" and lines[0]["model"] == "local/smollm2"
    assert lines[-1]["type"] == "result"
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "local/smollm2" in proc.stderr  # the CLI says which model and why

    # A python code chunk, then console output (after it) that prints hello world.
    code_at = next(i for i, c in enumerate(lines)
                   if c.get("role") == "assistant" and c.get("type") == "code" and c.get("format") == "python")
    output = "".join(str(c.get("content") or "") for c in lines[code_at:]
                     if c.get("role") == "computer" and c.get("type") == "console" and c.get("format") == "output")
    assert HELLO.search(output), f"no hello world in the code output: {output[:500]!r}"
    code = "".join(str(c.get("content") or "") for c in lines
                   if c.get("role") == "assistant" and c.get("type") == "code" and c.get("format") == "python")
    assert "print" in code
    assert lines[-1]["cost"] == 0.0
    assert lines[-1]["usage"]["completion_tokens"] > 0
