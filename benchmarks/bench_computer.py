"""Benchmarks of oitui's Computer, side by side with classic Open Interpreter 0.4.3.

Run:  .venv/bin/python benchmarks/bench_computer.py [--skip-oi] [--runs 50]

Prints figures; asserts nothing. Measures:
- kernel cold start (ms): first python block on a fresh Computer;
- warm round trip (ms, median of N): ``print(1)`` in python, ``echo 1`` in the shell;
- active-line tracking cost: a top-level loop of 10**6 iterations, tracking on vs off.
The same with classic Open Interpreter (open-interpreter==0.4.3 installed into
``benchmarks/.venv-oi``, created on first run; timings run in a subprocess there). If the
install fails, the reason is printed and the rest continues.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

LOOP = "for i in range(1000000):\n    x = i * 2\n"
OI_VENV = HERE / ".venv-oi"
OI_VERSION = "0.4.3"


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def bench_ours(runs: int) -> dict:
    from oitui.computer import Computer

    res: dict = {}
    c = Computer()
    try:
        res["cold_start"] = timed(lambda: c.run("python", "pass"))
        res["kernel_start_only"] = c._runtimes["python"].cold_start_seconds
        c.run("python", "print(1)")
        res["py_rt"] = statistics.median(timed(lambda: c.run("python", "print(1)")) for _ in range(runs))
        c.run("shell", "echo 1")
        res["sh_rt"] = statistics.median(timed(lambda: c.run("shell", "echo 1")) for _ in range(runs))
        on, off = [], []
        for _ in range(3):
            c.highlight_active_line = False
            off.append(timed(lambda: c.run("python", LOOP)))
            c.highlight_active_line = True
            on.append(timed(lambda: c.run("python", LOOP)))
        res["loop_on"] = statistics.median(on)
        res["loop_off"] = statistics.median(off)
    finally:
        c.terminate()
    return res


OI_SCRIPT = r"""
import json, statistics, sys, time, os
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
runs = int(sys.argv[1]); loop = sys.argv[2]
from interpreter import interpreter
comp = interpreter.computer
def timed(fn):
    t0 = time.perf_counter(); fn(); return time.perf_counter() - t0
res = {}
res["cold_start"] = timed(lambda: comp.run("python", "pass"))
comp.run("python", "print(1)")
res["py_rt"] = statistics.median(timed(lambda: comp.run("python", "print(1)")) for _ in range(runs))
comp.run("shell", "echo 1")
res["sh_rt"] = statistics.median(timed(lambda: comp.run("shell", "echo 1")) for _ in range(runs))
print(json.dumps(res), flush=True)
res["loop"] = timed(lambda: comp.run("python", loop))
print(json.dumps(res), flush=True)
comp.terminate()
os._exit(0)
"""


def ensure_oi() -> Path | None:
    py = OI_VENV / "bin" / "python"
    ok = py.exists() and subprocess.run(
        [str(py), "-c", "import importlib.metadata as m; assert m.version('open-interpreter') == '%s'" % OI_VERSION],
        capture_output=True,
    ).returncode == 0
    if ok:
        return py
    print(f"installing open-interpreter=={OI_VERSION} into {OI_VENV} (one time) ...", flush=True)
    try:
        if not py.exists():
            subprocess.run([sys.executable, "-m", "venv", str(OI_VENV)], check=True, capture_output=True, text=True)
        r = subprocess.run(
            [str(py), "-m", "pip", "install", "-q", f"open-interpreter=={OI_VERSION}"],
            capture_output=True, text=True, timeout=1800,
        )
        if r.returncode != 0:
            print("open-interpreter install failed:\n" + (r.stderr or r.stdout)[-2000:])
            return None
    except (OSError, subprocess.SubprocessError) as e:
        print(f"open-interpreter install failed: {e}")
        return None
    return py


def bench_oi(runs: int, loop_timeout: float) -> dict | None:
    py = ensure_oi()
    if py is None:
        return None
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    proc = subprocess.Popen(
        [str(py), "-c", OI_SCRIPT, str(runs), LOOP],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )
    res: dict | None = None
    try:
        out, err = proc.communicate(timeout=300 + loop_timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        out, err = proc.communicate()
    for line in out.splitlines():
        if line.startswith("{"):
            res = json.loads(line)
    if res is None:
        print("classic Open Interpreter run failed:\n" + err[-2000:])
    elif "loop" not in res:
        res["loop"] = None
    return res


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--skip-oi", action="store_true", help="do not install/run classic Open Interpreter")
    ap.add_argument("--oi-loop-timeout", type=float, default=600)
    args = ap.parse_args()

    ours = bench_ours(args.runs)
    theirs = None if args.skip_oi else bench_oi(args.runs, args.oi_loop_timeout)

    def col(d, key):
        if d is None or d.get(key) is None:
            return "n/a"
        return ms(d[key])

    print()
    print(f"{'measure':44} {'oitui':>12} {'OI 0.4.3':>12} {'ratio':>7}")
    rows = [
        ("kernel cold start (first python block)", "cold_start", "cold_start"),
        (f"warm print(1) python, median of {args.runs}", "py_rt", "py_rt"),
        (f"warm echo 1 shell, median of {args.runs}", "sh_rt", "sh_rt"),
        ("10^6-iteration loop, tracking ON", "loop_on", "loop"),
        ("10^6-iteration loop, tracking OFF", "loop_off", None),
    ]
    for label, k_ours, k_theirs in rows:
        ratio = ""
        if theirs and k_theirs and theirs.get(k_theirs):
            ratio = f"{ours[k_ours] / theirs[k_theirs]:.3f}x"
        print(f"{label:44} {col(ours, k_ours):>12} {col(theirs, k_theirs) if k_theirs else '':>12} {ratio:>7}")
    print(f"{'kernel process start to ready (oitui)':44} {col(ours, 'kernel_start_only'):>12}")
    print(f"tracking cost (on/off): {ours['loop_on'] / ours['loop_off']:.2f}x  (goal <= 1.3x)")
    if theirs and theirs.get("py_rt"):
        print(f"warm python round trip ours/theirs: {ours['py_rt'] / theirs['py_rt']:.3f}  (goal <= 0.5)")
        print(f"warm shell round trip ours/theirs: {ours['sh_rt'] / theirs['sh_rt']:.3f}  (goal <= 0.5)")


if __name__ == "__main__":
    main()
