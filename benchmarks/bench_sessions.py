"""Benchmark the session store.

Goals (issue 5): saving one message, median under 5 ms; full-text search over 10,000 synthetic
sessions of 20 messages each, under 100 ms; and the time to list them.

Run:  .venv/bin/python benchmarks/bench_sessions.py [--sessions 10000] [--messages 20] [--dir DIR]

The synthetic sessions are written straight to disk in the store's own file format (header line
plus one message per line) so that setting up 200,000 messages does not take 200,000 fsyncs; the
save benchmark uses ``Session.append`` itself (with its fsync).
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from oitui.core.sessions import SessionStore, _new_id  # noqa: E402

WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu data frame plot file read write "
         "list sort merge csv json http server client error warning value index column row table chart "
         "python shell install package version build test run print import numpy pandas matplotlib").split()


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def bench_append(root: Path, n: int = 500) -> dict:
    store = SessionStore(root / "append")
    s = store.create(model="gpt-4o")
    s.append({"role": "user", "type": "message", "content": "start"})
    rng = random.Random(1)
    times = []
    for i in range(n):
        msg = {"role": "computer", "type": "console", "format": "output", "call_id": f"call_{i}",
               "content": " ".join(rng.choice(WORDS) for _ in range(60))}
        t = time.perf_counter()
        s.append(msg)
        times.append(time.perf_counter() - t)
    s.close()
    times.sort()
    return {"median": statistics.median(times), "p95": times[int(len(times) * 0.95)], "max": times[-1]}


def make_sessions(d: Path, count: int, per: int, rare_word: str, rare_every: int) -> None:
    d.mkdir(parents=True, exist_ok=True)
    rng = random.Random(7)
    base = time.time() - count * 60
    for k in range(count):
        sid = _new_id()
        while (d / f"{sid}.jsonl").exists():
            sid = _new_id()
        created = time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime(base + k * 60))
        lines = [json.dumps({"lmc_version": 1, "session": {
            "id": sid, "title": None, "created": created, "updated": created, "cwd": "/home/u/project",
            "model": "gpt-4o", "harness": "native", "prompt_tokens": 0, "completion_tokens": 0, "cost": 0.0,
            "lmc_version": 1}})]
        for i in range(per):
            words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 40)))
            kind = i % 4
            if kind == 0:
                m = {"role": "user", "type": "message", "content": f"please {words}"}
            elif kind == 1:
                m = {"role": "assistant", "type": "code", "format": "python", "content": f"print('{words}')",
                     "call_id": f"c{i}"}
            elif kind == 2:
                out = words + (f" {rare_word}" if (k % rare_every == 0 and i == 2) else "")
                m = {"role": "computer", "type": "console", "format": "output", "content": out, "call_id": f"c{i - 1}"}
            else:
                m = {"role": "assistant", "type": "message", "content": f"Done: {words}"}
            lines.append(json.dumps(m, ensure_ascii=False))
        (d / f"{sid}.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")


def timed(fn, repeat: int = 5) -> tuple[float, object]:
    best = None
    result = None
    samples = []
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - t)
    best = statistics.median(samples)
    return best, result


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=10_000)
    ap.add_argument("--messages", type=int, default=20)
    ap.add_argument("--dir", help="work folder (default: a temporary folder, removed afterwards)")
    args = ap.parse_args(argv)
    root = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="oitui-bench-"))
    try:
        a = bench_append(root)
        print(f"save one message: median {_ms(a['median'])}, p95 {_ms(a['p95'])}, max {_ms(a['max'])}"
              f"  (goal: median < 5 ms: {'MET' if a['median'] < 0.005 else 'NOT MET'})")

        d = root / "sessions"
        t = time.perf_counter()
        make_sessions(d, args.sessions, args.messages, "zanzibarite", 1000)
        print(f"wrote {args.sessions} sessions x {args.messages} messages in {time.perf_counter() - t:.1f} s")
        store = SessionStore(d)
        t = time.perf_counter()
        infos = store.list()
        print(f"first list (builds the index from the files): {time.perf_counter() - t:.2f} s, {len(infos)} sessions")

        lt, infos = timed(store.list)
        print(f"list {len(infos)} sessions (index up to date, includes the staleness check): median {_ms(lt)}")

        results = {}
        for label, q in (("rare word (10 sessions)", "zanzibarite"), ("two common words", "pandas merge"),
                         ("one very common word", "print"), ("prefix", "matplot")):
            st, hits = timed(lambda q=q: store.search(q, limit=50))
            results[label] = st
            print(f"search {label!r} {q!r}: median {_ms(st)}, {len(hits)} hits")
        worst = max(results.values())
        print(f"search goal (< 100 ms): {'MET' if worst < 0.1 else 'NOT MET'} (worst median {_ms(worst)})")

        # after one session grows (the index catches up incrementally)
        s = store.open(infos[0].id)
        s.append({"role": "computer", "type": "console", "format": "output", "content": "firstword"})
        store.search("firstword")  # the first append creates .changes.log: one full staleness sweep
        time.sleep(2.5)  # a folder mtime is trusted once it is 2 s old (coarse file-system clocks)
        store.search("firstword")
        s.append({"role": "computer", "type": "console", "format": "output", "content": "freshword"})
        t = time.perf_counter()
        hits = store.search("freshword")
        print(f"search right after an append elsewhere (incremental index update): {_ms(time.perf_counter() - t)},"
              f" {len(hits)} hit")
        t = time.perf_counter()
        n = store.reindex()
        print(f"reindex(): full staleness sweep (stat every file), nothing changed: {_ms(time.perf_counter() - t)}"
              f" ({n} files re-read)")
        # after the folder changed (a new session file), list/search do that full sweep once
        (d / "zzzzzzzz.jsonl").write_text((d / f"{infos[0].id}.jsonl").read_text())
        t = time.perf_counter()
        hits = store.search("zanzibarite")
        print(f"search right after a new session file appeared (full sweep + index 1 file): "
              f"{_ms(time.perf_counter() - t)}, {len(hits)} hits")
        return 0
    finally:
        if not args.dir:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
