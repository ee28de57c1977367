"""Agent-core benchmarks (issue 3). Run: ``.venv/bin/python benchmarks/bench_core.py [--runs N]``.

1. ``oitui --version`` wall time, median of N runs (goal: under 50 ms), with the virtual
   environment's own ``oitui`` script (no pyenv shim).
2. ``python -c "import oitui"`` wall time, median (goal: under 30 ms), with the venv's python.
   ``python -c pass`` is measured too, as the floor.
3. One scripted headless turn that runs ``print(1)`` (``oitui -p ... -y`` against the scripted
   server on 127.0.0.1): total wall time, the scripted model's own time (request in -> last byte
   out, as the server measures it), and the engine's overhead = total - model time. Also the
   same turn in-process with a warm interpreter (kernel already started, litellm imported).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
BIN = Path(sys.executable).parent


def _wall(argv: list[str], env: dict, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
        times.append((time.perf_counter() - t0) * 1000)
    return times


def _fmt(name: str, times: list[float], goal: float | None = None) -> str:
    med = statistics.median(times)
    line = f"{name:<34} median {med:7.1f} ms  (min {min(times):.1f}, max {max(times):.1f}, n={len(times)})"
    if goal is not None:
        line += f"  goal < {goal:.0f} ms: {'MET' if med < goal else 'NOT MET'}"
    return line


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=21)
    ap.add_argument("--turns", type=int, default=3)
    a = ap.parse_args()
    home = tempfile.mkdtemp(prefix="oitui-bench-")
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    env.update(OITUI_HOME=home, LITELLM_LOCAL_MODEL_COST_MAP="True")
    py, oitui = str(BIN / "python"), str(BIN / "oitui")

    print(_fmt("python -c pass", _wall([py, "-c", "pass"], env, a.runs)))
    print(_fmt("python -c 'import oitui'", _wall([py, "-c", "import oitui"], env, a.runs), 30))
    print(_fmt("oitui --version", _wall([oitui, "--version"], env, a.runs), 50))

    from support.scripted_server import ScriptedServer, text_reply

    server = ScriptedServer()
    reply = ["Running it.\n```python\nprint(1)\n```\n"]
    totals, models = [], []
    for _ in range(a.turns):
        server.reset([text_reply(reply), text_reply("Printed 1.")])
        t0 = time.perf_counter()
        r = subprocess.run([oitui, "-p", "print 1", "-y", "-m", "openai/bench", "--api-base", server.url,
                            "--api-key", "sk-bench", "--no-llm-supports-functions"], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True, text=True)
        totals.append((time.perf_counter() - t0) * 1000)
        assert r.returncode == 0 and "1" in r.stdout, r.stderr
        models.append(sum(server.durations) * 1000)
    print(_fmt("headless turn print(1), total", totals))
    print(_fmt("  scripted model time", models))
    print(_fmt("  engine overhead (total - model)", [t - m for t, m in zip(totals, models)]))
    print("  (overhead includes process start, litellm import and the Python kernel's start)")

    # warm, in-process: the engine's own per-turn overhead
    os.environ.update(LITELLM_LOCAL_MODEL_COST_MAP="True", OITUI_HOME=home)
    from oitui.core.interpreter import OpenInterpreter

    interp = OpenInterpreter()
    interp.llm.model, interp.llm.api_base, interp.llm.api_key = "openai/bench", server.url, "sk-bench"
    interp.llm.supports_functions = False
    interp.auto_run = True
    interp.cwd = home
    server.reset([text_reply(reply), text_reply("ok")])
    interp.chat("warm up", display=False)
    warm, warm_model = [], []
    for _ in range(max(5, a.turns)):
        interp.reset()
        server.reset([text_reply(reply), text_reply("Printed 1.")])
        t0 = time.perf_counter()
        interp.chat("print 1", display=False)
        warm.append((time.perf_counter() - t0) * 1000)
        warm_model.append(sum(server.durations) * 1000)
    print(_fmt("warm in-process turn print(1)", warm))
    print(_fmt("  engine overhead (total - model)", [t - m for t, m in zip(warm, warm_model)]))
    interp.terminate()
    server.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
