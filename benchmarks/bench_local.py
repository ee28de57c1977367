"""Benchmark of the embedded local model (SmolLM2-135M-Instruct through llama.cpp).

Measures, on this machine:

1. load time (median of several fresh loads), time to first token and tokens per second
   (medians over the requests below, streamed through ``litellm.completion(model="local/smollm2")``);
2. the 20-request table: 20 simple requests, none of which appears in the tiny-model prompt
   (``config/prompts/local.md``) or its example. For each: does the first code block run without
   error, and does the task end correctly after the error loop (up to 3 model replies, each
   block's output or error sent back)?

The loop is driven by ``oitui.core.interpreter.OpenInterpreter`` (auto_run) when it exists and
``--driver core`` is given (the default when available); otherwise by a small loop of this file:
litellm + a fresh ``python -c`` / ``bash -c`` subprocess per block in a scratch folder.

Usage::

    .venv/bin/python benchmarks/bench_local.py            # everything, table to stdout
    .venv/bin/python benchmarks/bench_local.py --speed-only
    .venv/bin/python benchmarks/bench_local.py --tasks 3 --verbose
    .venv/bin/python benchmarks/bench_local.py --markdown benchmarks/results_local.md
"""

from __future__ import annotations

import argparse
import datetime as _dt
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
for _key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "DEEPSEEK_API_KEY", "MOONSHOT_API_KEY", "DASHSCOPE_API_KEY"):
    os.environ.pop(_key, None)

MODEL = "local/smollm2"
MAX_REPLIES = 3  # model replies per task (first try + 2 fixes)


# --------------------------------------------------------------------------- the 20 requests

def _seed(files: dict[str, str]) -> Callable[[Path], None]:
    def setup(folder: Path) -> None:
        for name, text in files.items():
            (folder / name).write_text(text)

    return setup


def _out_has(*needles: str) -> Callable[[Path, str], bool]:
    def check(_folder: Path, output: str) -> bool:
        low = output.lower()
        return all(n.lower() in low for n in needles)

    return check


def _today(_folder: Path, output: str) -> bool:
    now = _dt.datetime.now()
    return str(now.year) in output and (f"{now.month:02d}" in output or now.strftime("%B").lower() in output.lower()
                                         or now.strftime("%b").lower() in output.lower())


def _clock(_folder: Path, output: str) -> bool:
    return re.search(r"\b\d{1,2}:\d{2}\b", output) is not None


def _random_1_10(_folder: Path, output: str) -> bool:
    nums = [int(n) for n in re.findall(r"\b\d+\b", output)]
    return any(1 <= n <= 10 for n in nums)


def _folder_made(name: str) -> Callable[[Path, str], bool]:
    return lambda folder, _out: (folder / name).is_dir()


def _file_has(name: str, text: str) -> Callable[[Path, str], bool]:
    def check(folder: Path, _out: str) -> bool:
        path = folder / name
        return path.is_file() and text.lower() in path.read_text(errors="replace").lower()

    return check


def _file_gone(name: str) -> Callable[[Path, str], bool]:
    return lambda folder, _out: not (folder / name).exists()


def _cwd_shown(folder: Path, output: str) -> bool:
    return str(folder) in output or folder.name in output


@dataclass
class Task:
    """One request: ``setup(folder)`` seeds the scratch folder, ``check(folder, all_output)``."""

    id: str
    request: str
    check: Callable[[Path, str], bool]
    setup: Callable[[Path], None] = field(default=lambda _folder: None)


DATA = "apple\nbanana\ncherry\ndate\nelderberry\nfig\ngrape\n"

TASKS: list[Task] = [
    Task("date", "Print today's date.", _today),
    Task("list", "List the files in the current folder.", _out_has("notes.txt", "data.txt"),
         _seed({"notes.txt": "x\n", "data.txt": DATA})),
    Task("add", "Add 17 and 25 and show the result.", _out_has("42")),
    Task("mkdir", "Make a new folder named reports.", _folder_made("reports")),
    Task("count_lines", "Count the lines in the file data.txt.", _out_has("7"), _seed({"data.txt": DATA})),
    Task("pyversion", "Which version of Python is installed?", _out_has(f"{sys.version_info.major}.{sys.version_info.minor}")),
    Task("write_file", "Create a file called greeting.txt that contains the text good morning.",
         _file_has("greeting.txt", "good morning")),
    Task("multiply", "Multiply 12 by 13.", _out_has("156")),
    Task("one_to_five", "Print the numbers from 1 to 5.", _out_has("1", "2", "3", "4", "5")),
    Task("reverse", "Reverse the string stressed.", _out_has("desserts")),
    Task("upper", "Convert the word python to uppercase.", _out_has("PYTHON")),
    Task("cwd", "Show the current working directory.", _cwd_shown),
    Task("sqrt", "What is the square root of 144?", _out_has("12")),
    Task("sort", "Sort the numbers 9, 4 and 7 from smallest to largest.",
         lambda _f, out: re.search(r"4\D{1,4}7\D{1,4}9", out) is not None),
    Task("len", "How many letters are in the word banana?", _out_has("6")),
    Task("time", "What time is it now?", _clock),
    Task("random", "Pick a random number between 1 and 10.", _random_1_10),
    Task("words", "Count the words in the sentence: the quick brown fox jumps.", _out_has("5")),
    Task("delete", "Delete the file old.txt.", _file_gone("old.txt"), _seed({"old.txt": "old\n"})),
    Task("sum100", "What is the sum of all numbers from 1 to 100?", _out_has("5050")),
]


# --------------------------------------------------------------------------- own loop

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|\Z)", re.S)
_LANG = {"": "python", "python": "python", "py": "python", "python3": "python",
         "bash": "shell", "sh": "shell", "shell": "shell", "console": "shell", "zsh": "shell"}


def first_block(text: str) -> tuple[str, str] | None:
    """(language, code) of the first fenced block in ``text`` (an unclosed one counts)."""
    m = _FENCE.search(text)
    if not m or not m.group(2).strip():
        return None
    return _LANG.get(m.group(1).lower(), m.group(1).lower()), m.group(2)


def run_block(language: str, code: str, folder: Path) -> tuple[bool, str]:
    """Run one block in ``folder``: (ran without error, output text)."""
    if language == "python":
        argv = [sys.executable, "-c", code]
    elif language == "shell":
        argv = ["bash", "-c", code]
    else:
        return False, f"`{language}` is not available on this machine; available: python, shell"
    try:
        proc = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=20,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return False, "the code ran longer than 20 s and was stopped"
    out = (proc.stdout + proc.stderr).strip()
    return proc.returncode == 0, out[-2800:]


@dataclass
class Outcome:
    task: str
    first_ok: bool  # the first reply held a block that ran without error
    done: bool  # after the loop: the task's check passed
    replies: int  # code blocks the model wrote
    first_reply: str


RETRY_TEMPERATURE = 0.0  # own driver: temperature of the replies after an error (--retry-temperature)


def own_loop(task: Task, system: str, folder: Path, verbose: bool = False) -> Outcome:
    """Our small loop: reply -> first block -> run -> output back, up to MAX_REPLIES replies."""
    import litellm

    messages = [{"role": "system", "content": system}, {"role": "user", "content": task.request}]
    outputs: list[str] = []
    first_ok = False
    first_reply = ""
    blocks = 0
    for n in range(1, MAX_REPLIES + 1):
        temperature = 0.0 if n == 1 else RETRY_TEMPERATURE
        resp = litellm.completion(model=MODEL, messages=messages, temperature=temperature, max_tokens=256)
        reply = resp.choices[0].message.content or ""
        if n == 1:
            first_reply = reply
        blocks = n
        messages.append({"role": "assistant", "content": reply})
        block = first_block(reply)
        if verbose:
            print(f"--- {task.id} reply {n}:\n{reply}\n", file=sys.stderr)
        if block is None:
            blocks = n - 1
            break  # no code: the model answered in prose; the loop ends as in the core
        ok, out = run_block(*block, folder)
        outputs.append(out)
        if verbose:
            print(f"--- {task.id} ran ok={ok}:\n{out}\n", file=sys.stderr)
        if n == 1:
            first_ok = ok
        if ok:
            break
        # What the core sends back in text mode (oitui.core.lmc.CODE_OUTPUT_PREFIX).
        messages.append({"role": "user", "content": f"Code output:\n{out}" if out.strip() else "The code ran with no output."})
    done = task.check(folder, "\n".join(outputs))
    return Outcome(task.id, first_ok, done, blocks, first_reply)


def core_loop(task: Task, folder: Path, verbose: bool = False) -> Outcome:
    """The same request through oitui's OpenInterpreter (auto_run, text-fence mode)."""
    from oitui.core.interpreter import OpenInterpreter

    interp = OpenInterpreter()
    interp.llm.model = MODEL
    interp.auto_run = True
    interp.max_turns = MAX_REPLIES
    interp.cwd = str(folder)
    prev = os.getcwd()
    os.chdir(folder)
    outputs: list[str] = []
    first_ok = None
    replies = 0
    first_reply = ""
    try:
        try:
            messages = interp.chat(task.request, stream=False, display=False)
        except Exception as exc:  # noqa: BLE001 - a limit or model error ends the task
            messages = [m for m in interp.messages if m.get("role") != "user"]
            if verbose:
                print(f"--- {task.id}: {type(exc).__name__}: {exc}", file=sys.stderr)
        for m in messages:
            if m.get("role") == "assistant" and m.get("type") == "message":
                first_reply = first_reply or str(m.get("content"))
            if m.get("role") == "assistant" and m.get("type") == "code":
                replies += 1
                first_reply = first_reply or f"```{m.get('format')}\n{m.get('content')}\n```"
            if m.get("role") == "computer" and m.get("type") == "console" and m.get("format") == "output":
                text = str(m.get("content") or "")
                outputs.append(text)
                if first_ok is None:
                    first_ok = not re.search(r"Traceback|Error:|error:|command not found", text)
    finally:
        os.chdir(prev)
        try:
            interp.computer.terminate()
        except Exception:  # noqa: BLE001
            pass
    done = task.check(folder, "\n".join(outputs))
    return Outcome(task.id, bool(first_ok), done, replies, first_reply)


# --------------------------------------------------------------------------- speed

def measure_speed(n_loads: int = 5) -> dict[str, float]:
    """Medians: load seconds (fresh llama.cpp loads), time to first token (the first token the
    model generates: the streamed assistant prefill does not count) and tokens/s."""
    import litellm

    import oitui.local
    from oitui.local.provider import PREFILL
    from oitui.local.runtime import LocalModel

    path = oitui.local.find_smollm2()
    loads = []
    for _ in range(n_loads):
        t = time.perf_counter()
        m = LocalModel(path)
        loads.append(time.perf_counter() - t)
        del m
    oitui.local.register()
    ttfts, rates = [], []
    for task in TASKS:
        t = time.perf_counter()
        first = None
        n_chars = 0
        usage = None
        for chunk in litellm.completion(model=MODEL, messages=[{"role": "user", "content": task.request}],
                                        stream=True, stream_options={"include_usage": True},
                                        temperature=0, max_tokens=128):
            delta = chunk.choices[0].delta.content if chunk.choices else None
            if delta and n_chars == 0 and delta == PREFILL:
                n_chars += len(delta)  # the assistant prefill is not a model token
                continue
            if delta:
                if first is None:
                    first = time.perf_counter() - t
                n_chars += len(chunk.choices[0].delta.content)
            if getattr(chunk, "usage", None):
                usage = chunk.usage
        total = time.perf_counter() - t
        if first is not None:
            ttfts.append(first)
        if usage and usage.completion_tokens and total > (first or 0):
            rates.append((usage.completion_tokens - 1) / (total - (first or 0)))
    return {
        "load_s": statistics.median(loads),
        "ttft_s": statistics.median(ttfts),
        "tokens_per_s": statistics.median(rates),
        "loads": len(loads),
        "requests": len(ttfts),
    }


# --------------------------------------------------------------------------- main

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--speed-only", action="store_true")
    ap.add_argument("--tasks-only", action="store_true")
    ap.add_argument("--tasks", type=int, default=len(TASKS), help="run the first N requests")
    ap.add_argument("--only", default="", help="comma-separated task ids")
    ap.add_argument("--driver", choices=("auto", "own", "core"), default="auto")
    ap.add_argument("--verbose", action="store_true")
    ap.add_argument("--markdown", default="", help="also write the report to this file")
    ap.add_argument("--retry-temperature", type=float, default=0.0,
                    help="own driver: sampling temperature of the replies after an error")
    ap.add_argument("--prompt-file", default="", help="use this tiny-model prompt instead of config/prompts/local.md")
    args = ap.parse_args(argv)

    import oitui.local
    from oitui.core.model_choice import default_system_message_for

    global RETRY_TEMPERATURE
    RETRY_TEMPERATURE = args.retry_temperature

    oitui.local.register()
    lines: list[str] = []

    def say(line: str = "") -> None:
        print(line, flush=True)
        lines.append(line)

    say(f"# bench_local: {MODEL} on {os.cpu_count()} cores, {_dt.datetime.now(_dt.timezone.utc):%Y-%m-%d %H:%M} UTC")
    if not args.tasks_only:
        s = measure_speed()
        say()
        say(f"load time (median of {s['loads']}): {s['load_s'] * 1000:.0f} ms")
        say(f"time to first token (median of {s['requests']}): {s['ttft_s'] * 1000:.0f} ms")
        say(f"tokens per second (median): {s['tokens_per_s']:.0f}")
    if not args.speed_only:
        driver = args.driver
        if driver == "auto":
            try:
                import oitui.core.interpreter  # noqa: F401

                driver = "core"
            except ImportError:
                driver = "own"
        system = default_system_message_for(MODEL) or ""
        if args.prompt_file:  # try another tiny-model prompt (both drivers)
            system = Path(args.prompt_file).read_text().strip()
            import oitui.core.model_choice as model_choice

            model_choice.default_system_message_for = lambda model, _s=system: _s if model_choice.is_local_model(model) else None
        tasks = TASKS[: args.tasks]
        if args.only:
            wanted = set(args.only.split(","))
            tasks = [t for t in TASKS if t.id in wanted]
        say()
        say(f"20-request table (driver: {driver}; up to {MAX_REPLIES} model replies per request)")
        say()
        say("| # | request | first block runs | done after loop | blocks written |")
        say("|---|---|---|---|---|")
        results = []
        for i, task in enumerate(tasks, 1):
            folder = Path(tempfile.mkdtemp(prefix=f"bench-{task.id}-"))
            try:
                task.setup(folder)
                if driver == "core":
                    out = core_loop(task, folder, args.verbose)
                else:
                    out = own_loop(task, system, folder, args.verbose)
            finally:
                shutil.rmtree(folder, ignore_errors=True)
            results.append(out)
            say(f"| {i} | {task.request} | {'yes' if out.first_ok else 'no'} | {'yes' if out.done else 'no'} | {out.replies} |")
        n = len(results)
        first = sum(r.first_ok for r in results)
        done = sum(r.done for r in results)
        say()
        say(f"first block runs without error: {first}/{n}; done correctly after the error loop: {done}/{n} "
            f"(target: {(n + 1) // 2}/{n}) -> {'met' if done * 2 >= n else 'not met'}")
    if args.markdown:
        Path(args.markdown).write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
