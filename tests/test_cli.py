"""The headless command line end to end: real `python -m oitui` subprocesses talking to the
scripted server over HTTP. Kept few: each one pays litellm's import."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from oitui.cli import build_parser, main
from support.scripted_server import (  # noqa: F401  (fixtures)
    error_reply,
    scripted_server,
    scripted_server_module,
    text_reply,
)

CODE_REPLY = "Let me check.\n```python\nprint(6*7)\n```\n"


def _env(home) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("OITUI_")}
    env["OITUI_HOME"] = str(home)
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


def oitui(args, home, server=None, stdin=None, timeout=120):
    base = [sys.executable, "-m", "oitui"]
    if server is not None:
        base += ["-m", "openai/scripted", "--api-base", server.url, "--api-key", "sk-test", "--no-llm-supports-functions"]
    return subprocess.run(base + list(args), input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, text=True, env=_env(home), timeout=timeout,
                          cwd=str(home))


@pytest.fixture
def home(tmp_path):
    h = tmp_path / "home"
    h.mkdir()
    return h


def test_cli_version_and_help_are_light():
    code = (
        "import sys, io, contextlib\n"
        "import oitui.cli as c\n"
        "buf = io.StringIO()\n"
        "with contextlib.redirect_stdout(buf):\n"
        "    a = c.main(['--version']); b = c.main(['--help'])\n"
        "heavy = [m for m in ('litellm', 'textual', 'jupyter_client', 'semgrep') if m in sys.modules]\n"
        "print(a, b, heavy, 'oitui 0.1.0' in buf.getvalue(), '--max-output' in buf.getvalue())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60).stdout
    assert out.strip() == "0 0 [] True True"


def test_cli_flags_accept_dash_and_underscore_spellings():
    p = build_parser()
    a = p.parse_args(["-p", "x", "--auto_run", "--max_output", "100", "--api_base", "http://h", "--context_window",
                      "9000", "--no-llm-supports-functions", "--max-budget", "0.5", "--no-highlight-active-line"])
    assert (a.auto_run, a.max_output, a.api_base, a.context_window) == (True, 100, "http://h", 9000)
    assert a.llm_supports_functions is False and a.max_budget == 0.5 and a.highlight_active_line is False
    b = p.parse_args(["-p", "x", "-y", "--max-output", "7", "-c", "--llm_supports_functions"])
    assert (b.auto_run, b.max_output, b.continue_, b.llm_supports_functions) == (True, 7, True, True)


def test_cli_bad_usage_exits_2(home, capsys):
    assert main(["--no-such-flag"]) == 2
    assert "usage" in capsys.readouterr().err
    assert main(["-p", "x", "--sandbox", "read-only"]) == 2
    assert "not available yet" in capsys.readouterr().err
    assert main(["-p", "x", "--safe-mode", "ask"]) == 2
    assert main(["-p", "x", "--harness", "claude"]) == 2
    assert "not available yet" in capsys.readouterr().err


def test_cli_no_key_for_remote_model_exits_2(home):
    r = oitui(["-p", "hello", "-m", "gpt-4o"], home)
    assert r.returncode == 2, r.stderr
    assert "OPENAI_API_KEY" in r.stderr


def test_cli_text_with_stdin_exit_0(home, scripted_server):
    scripted_server.reset([text_reply(CODE_REPLY), text_reply("It is 42.")])
    r = oitui(["-p", "compute this", "-y"], home, scripted_server, stdin="PIPED LOG LINE\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Let me check.\n```python\nprint(6*7)\n```\n42\nIt is 42.\n"
    assert "session: " in r.stderr and "model: openai/scripted" in r.stderr
    first_user = [m for m in scripted_server.requests[0]["messages"] if m["role"] == "user"][0]["content"]
    assert first_user == "compute this\n\nPIPED LOG LINE\n"


def test_cli_stream_json_declines_without_y(home, scripted_server):
    scripted_server.reset([text_reply(CODE_REPLY), text_reply("Understood.")])
    r = oitui(["-p", "compute", "--output-format", "stream-json"], home, scripted_server)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert lines[0]["type"] == "session" and lines[0]["model"] == "openai/scripted" and lines[0]["harness"] == "native"
    assert lines[0]["session_id"]
    assert lines[-1]["type"] == "result" and lines[-1]["exit"] == 0
    assert set(lines[-1]) == {"type", "exit", "usage", "cost"}
    outs = [c["content"] for c in lines[1:-1] if c.get("type") == "console" and "content" in c]
    assert outs == ["I have declined to run this code."]
    assert not any(c.get("format") == "active_line" for c in lines)  # nothing ran
    assert len(scripted_server.requests) == 1  # the turn ended at the decline
    # the decline is recorded in the saved session
    sessions = list((home / "sessions").glob("*.jsonl"))
    assert len(sessions) == 1 and "I have declined to run this code." in sessions[0].read_text()


def test_cli_json_output_and_resume(home, scripted_server):
    scripted_server.reset([text_reply(CODE_REPLY), text_reply("It is 42.")])
    r = oitui(["-p", "compute", "-y", "--output-format", "json", "--verbose"], home, scripted_server)
    assert r.returncode == 0, r.stderr
    log_line = [ln for ln in r.stderr.splitlines() if ln.startswith("log: ")]
    assert log_line and os.path.isfile(log_line[0][5:])
    obj = json.loads(r.stdout)
    assert set(obj) == {"session_id", "messages", "usage", "cost", "exit"}
    assert obj["exit"] == 0 and obj["usage"] == {"prompt_tokens": 20, "completion_tokens": 10}
    assert obj["cost"] is None
    kinds = [(m["role"], m["type"]) for m in obj["messages"]]
    assert kinds == [("user", "message"), ("assistant", "message"), ("assistant", "code"),
                     ("computer", "console"), ("assistant", "message")]
    # --resume continues with the same history; an unknown id exits 2
    scripted_server.reset([text_reply("Still 42.")])
    r2 = oitui(["-p", "again?", "--resume", obj["session_id"][:6], "--output-format", "json"], home, scripted_server)
    assert r2.returncode == 0, r2.stderr
    sent = scripted_server.requests[0]["messages"]
    assert "print(6*7)" in str(sent) and sent[-1]["content"] == "again?"
    r3 = oitui(["-p", "x", "--resume", "zzzzzzzz"], home, scripted_server)
    assert r3.returncode == 2


def test_cli_model_failure_exit_1_and_limit_exit_3(home, scripted_server):
    scripted_server.reset([error_reply(401, "Incorrect API key")])
    r = oitui(["-p", "hello", "--output-format", "stream-json"], home, scripted_server)
    assert r.returncode == 1, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert any(c.get("type") == "error" for c in lines)
    assert lines[-1]["type"] == "result" and lines[-1]["exit"] == 1

    scripted_server.reset([text_reply(CODE_REPLY), text_reply(CODE_REPLY)])
    r = oitui(["-p", "loop", "-y", "--max-turns", "1"], home, scripted_server)
    assert r.returncode == 3, r.stderr
    assert "max_turns" in r.stderr


def test_cli_interrupted_exits_130(home, scripted_server):
    import signal
    import time

    scripted_server.reset([text_reply([f"w{i} " for i in range(200)], interval=0.1)])
    base = [sys.executable, "-m", "oitui", "-m", "openai/scripted", "--api-base", scripted_server.url,
            "--api-key", "sk-test", "-p", "talk", "--output-format", "stream-json"]
    proc = subprocess.Popen(base, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(home), cwd=str(home))
    lines = []
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:  # wait until the reply streams
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if '"content": "w' in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    last = json.loads(out.splitlines()[-1])
    assert last["type"] == "result" and last["exit"] == 130
