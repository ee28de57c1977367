"""The headless command line against DESIGN.md's contracts (output formats, exit codes, flags).

Most runs call ``oitui.cli.main`` in this process (litellm is imported once), talking to the
scripted server over real HTTP; only the things a process boundary matters for run as real
``python -m oitui`` subprocesses (piped stdin, Ctrl-C, start-up imports), since each pays
litellm's import.
"""

from __future__ import annotations

import io
import json
import logging
import os
import re
import subprocess
import sys

import pytest

import oitui.core.llm as llm_module
from oitui.cli import build_parser, main
from support.scripted_server import (  # noqa: F401  (fixtures)
    error_reply,
    scripted_server,
    scripted_server_module,
    text_reply,
)

CODE_REPLY = "Let me check.\n```python\nprint(6*7)\n```\n"


class _Stdin(io.StringIO):
    """sys.stdin for an in-process run: a terminal (nothing piped) when ``text`` is None."""

    def __init__(self, text: str | None) -> None:
        super().__init__(text or "")
        self._tty = text is None

    def isatty(self) -> bool:
        return self._tty


class Result:
    def __init__(self, code: int, out: str, err: str) -> None:
        self.returncode, self.stdout, self.stderr = code, out, err


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys, scripted_server):
    """``cli(args, server=True, stdin=None) -> Result``: ``oitui`` in this process with a fresh
    OITUI_HOME (``cli.home``, also the working directory), no API keys in the environment and,
    with ``server``, the scripted model (``-m openai/scripted --api-base ... --api-key sk-test``,
    text mode)."""
    home = tmp_path / "home"
    home.mkdir()
    for k in list(os.environ):
        if k.endswith("_API_KEY") or k.startswith("OITUI_"):
            monkeypatch.delenv(k)
    monkeypatch.setenv("OITUI_HOME", str(home))
    monkeypatch.chdir(home)

    def run(args, server: bool = True, stdin: str | None = None) -> Result:
        base = []
        if server:
            base = ["-m", "openai/scripted", "--api-base", scripted_server.url, "--api-key", "sk-test",
                    "--no-llm-supports-functions"]
        monkeypatch.setattr(sys, "stdin", _Stdin(stdin))
        root = logging.getLogger()
        handlers, level = list(root.handlers), root.level
        capsys.readouterr()
        try:
            code = main(base + list(args))
        finally:
            for h in root.handlers[:]:
                if h not in handlers:
                    root.removeHandler(h)
                    h.close()
            root.setLevel(level)
            llm_module.configure_litellm_logging(False)
        out = capsys.readouterr()
        return Result(code, out.out, out.err)

    run.home = home
    return run


def _env(home) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY") and not k.startswith("OITUI_")}
    env["OITUI_HOME"] = str(home)
    env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    return env


# -- no model needed --------------------------------------------------------------------------


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
    c = p.parse_args(["-p", "x", "--max_turns", "4", "--max_tool_output", "9", "--max_budget", "1", "--max_tokens",
                      "5", "--custom_instructions", "ci", "--system_message", "sm", "--safe_mode", "off",
                      "--sandbox_network", "on", "--output_format", "json", "--api_key", "k"])
    assert (c.max_turns, c.max_tool_output, c.max_budget, c.max_tokens) == (4, 9, 1.0, 5)
    assert (c.custom_instructions, c.system_message, c.safe_mode, c.sandbox_network) == ("ci", "sm", "off", "on")
    assert (c.output_format, c.api_key) == ("json", "k")


@pytest.mark.parametrize("args,word", [
    (["--sandbox", "read-only"], "--sandbox read-only"),
    (["--sandbox", "workspace-write"], "--sandbox workspace-write"),
    (["--sandbox-network", "off"], "--sandbox-network"),
    (["--add-dir", "/tmp"], "--add-dir"),
    (["--safe-mode", "ask"], "--safe-mode ask"),
    (["--safe_mode", "auto"], "--safe-mode auto"),
    (["--harness", "claude"], "--harness claude"),
])
def test_cli_features_not_available_yet_exit_2(cli, args, word):
    r = cli(["-p", "x", "-y", *args])
    assert r.returncode == 2
    assert "not available yet" in r.stderr and word in r.stderr
    assert r.stdout == ""


def test_cli_bad_usage_and_config_exit_2(cli, monkeypatch):
    r = cli(["--no-such-flag"], server=False)
    assert r.returncode == 2 and "usage" in r.stderr
    r = cli(["-p", "x", "--max-turns", "many"], server=False)
    assert r.returncode == 2 and "usage" in r.stderr
    r = cli(["acp"], server=False)
    assert r.returncode == 2 and "not available yet" in r.stderr
    # a sandbox asked for in the config or the environment is refused the same way
    (cli.home / "config.toml").write_text('sandbox = "read-only"\n')
    r = cli(["-p", "x"])
    assert r.returncode == 2 and "not available yet" in r.stderr
    (cli.home / "config.toml").write_text("")
    monkeypatch.setenv("OITUI_SAFE_MODE", "ask")
    r = cli(["-p", "x"])
    assert r.returncode == 2 and "not available yet" in r.stderr
    monkeypatch.delenv("OITUI_SAFE_MODE")
    # bad TOML names the file and line
    (cli.home / "config.toml").write_text("model = [oops\n")
    r = cli(["-p", "x"])
    assert r.returncode == 2 and "config.toml" in r.stderr and "line 1" in r.stderr


def test_cli_no_key_for_remote_model_exits_2(cli, scripted_server):
    r = cli(["-p", "hello", "-m", "gpt-4o"], server=False)
    assert r.returncode == 2, r.stderr
    assert "OPENAI_API_KEY" in r.stderr
    r = cli(["-p", "hello", "-m", "anthropic/claude-3-5-sonnet-20241022"], server=False)
    assert r.returncode == 2 and "ANTHROPIC_API_KEY" in r.stderr
    assert scripted_server.requests == []


def test_cli_unknown_session_id_exits_2(cli, scripted_server):
    r = cli(["-p", "x", "--resume", "zzzzzzzz"])
    assert r.returncode == 2 and r.stderr.strip()
    r = cli(["-p", "x", "-c"])  # nothing to continue yet
    assert r.returncode == 2
    assert scripted_server.requests == []


# -- the three output formats -------------------------------------------------------------------


def test_cli_text_format_session_on_stderr(cli, scripted_server):
    scripted_server.reset([text_reply(CODE_REPLY), text_reply("It is 42.")])
    r = cli(["-p", "compute", "-y"])
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Let me check.\n```python\nprint(6*7)\n```\n42\nIt is 42.\n"
    ids = re.findall(r"^session: (\S+)$", r.stderr, re.M)
    assert len(ids) == 1 and (cli.home / "sessions" / f"{ids[0]}.jsonl").is_file()


def test_cli_stream_json_declines_without_y(cli, scripted_server):
    scripted_server.reset([text_reply(CODE_REPLY), text_reply("Understood.")])
    r = cli(["-p", "compute", "--output-format", "stream-json"])
    assert r.returncode == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]  # every line is JSON
    first, last = lines[0], lines[-1]
    assert set(first) == {"type", "session_id", "model", "harness"}
    assert (first["type"], first["model"], first["harness"]) == ("session", "openai/scripted", "native")
    assert first["session_id"] and (cli.home / "sessions" / f"{first['session_id']}.jsonl").is_file()
    assert set(last) == {"type", "exit", "usage", "cost"}
    assert last["type"] == "result" and last["exit"] == 0
    assert set(last["usage"]) == {"prompt_tokens", "completion_tokens"}
    chunks = lines[1:-1]
    assert all("role" in c and "type" in c for c in chunks)  # every LMC chunk, flags included
    assert any(c.get("start") for c in chunks) and any(c.get("end") for c in chunks)
    outs = [c["content"] for c in chunks if c.get("type") == "console" and "content" in c]
    assert outs == ["I have declined to run this code."]
    assert not any(c.get("format") == "active_line" for c in lines)  # nothing ran
    assert len(scripted_server.requests) == 1  # the turn ended at the decline
    saved = (cli.home / "sessions" / f"{first['session_id']}.jsonl").read_text()
    assert "I have declined to run this code." in saved  # the decline is recorded


def test_cli_json_output_and_resume(cli, scripted_server):
    scripted_server.reset([text_reply(CODE_REPLY), text_reply("It is 42.")])
    r = cli(["-p", "compute", "-y", "--output-format", "json", "--verbose"])
    assert r.returncode == 0, r.stderr
    log_line = [ln for ln in r.stderr.splitlines() if ln.startswith("log: ")]
    assert log_line and os.path.isfile(log_line[0][5:])
    assert r.stdout.count("\n") == 1, repr(r.stdout[:300])
    obj = json.loads(r.stdout)
    assert len(r.stdout.strip().splitlines()) == 1  # one object at the end
    assert set(obj) == {"session_id", "messages", "usage", "cost", "exit"}
    assert obj["exit"] == 0 and obj["usage"] == {"prompt_tokens": 20, "completion_tokens": 10}
    assert obj["cost"] is None  # the scripted model has no known price
    kinds = [(m["role"], m["type"]) for m in obj["messages"]]
    assert kinds == [("user", "message"), ("assistant", "message"), ("assistant", "code"),
                     ("computer", "console"), ("assistant", "message")]
    # --resume (by unique prefix) continues with the same history
    scripted_server.reset([text_reply("Still 42.")])
    r2 = cli(["-p", "again?", "--resume", obj["session_id"][:6], "--output-format", "json"])
    assert r2.returncode == 0, r2.stderr
    sent = scripted_server.requests[0]["messages"]
    assert "print(6*7)" in str(sent) and sent[-1]["content"] == "again?"
    obj2 = json.loads(r2.stdout)
    assert obj2["session_id"] == obj["session_id"]
    assert obj2["usage"] == {"prompt_tokens": 10, "completion_tokens": 5}  # this run's usage
    assert [m["content"] for m in obj2["messages"]] == ["again?", "Still 42."]  # only the new messages
    # -c continues the last session too
    scripted_server.reset([text_reply("Yes.")])
    r3 = cli(["-p", "once more", "-c", "--output-format", "json"])
    assert r3.returncode == 0 and json.loads(r3.stdout)["session_id"] == obj["session_id"]
    assert "again?" in str(scripted_server.requests[0]["messages"])


def test_cli_code_that_raises_still_exits_0(cli, scripted_server):
    scripted_server.reset([text_reply("```python\nraise ValueError('boom')\n```"), text_reply("It failed.")])
    r = cli(["-p", "try", "-y", "--output-format", "json"])
    assert r.returncode == 0, r.stderr
    obj = json.loads(r.stdout)
    assert obj["exit"] == 0
    outs = [m["content"] for m in obj["messages"] if m["type"] == "console"]
    assert len(outs) == 1 and "ValueError: boom" in outs[0]  # the model handles it


# -- exit codes 1 and 3 ---------------------------------------------------------------------


def test_cli_rejected_key_exits_1(cli, scripted_server):
    scripted_server.reset([error_reply(401, "Incorrect API key")])
    r = cli(["-p", "hello", "--output-format", "stream-json"])
    assert r.returncode == 1, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    errors = [c for c in lines if c.get("type") == "error"]
    assert len(errors) == 1 and "401" in errors[0]["content"]
    assert lines[-1]["type"] == "result" and lines[-1]["exit"] == 1
    assert len(scripted_server.requests) == 1  # a rejected key is not retried


def test_cli_persistent_5xx_exits_1_after_retries_with_backoff(cli, scripted_server, monkeypatch):
    waits: list[float] = []
    monkeypatch.setattr(llm_module, "_sleep", waits.append)
    scripted_server.reset([error_reply(503, "overloaded") for _ in range(10)])
    r = cli(["-p", "hello"])
    assert r.returncode == 1, r.stderr
    assert len(scripted_server.requests) >= 3  # at least 3 attempts
    assert len(waits) == len(scripted_server.requests) - 1 and waits == sorted(waits) and waits[0] > 0
    assert all(b == 2 * a for a, b in zip(waits, waits[1:]))  # exponential backoff
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("oitui: ")]
    assert len(errors) == 1 and "attempts" in errors[0]  # said once, clearly


def test_cli_limits_exit_3(cli, scripted_server):
    scripted_server.reset([text_reply(CODE_REPLY), text_reply(CODE_REPLY)])
    r = cli(["-p", "loop", "-y", "--max_turns", "1"])
    assert r.returncode == 3, r.stderr
    assert "max_turns" in r.stderr
    # a budget too small for the next request's estimate stops before anything is sent
    scripted_server.reset([text_reply("hi")])
    base = ["-m", "openai/gpt-4o-mini", "--api-base", scripted_server.url, "--api-key", "sk-test",
            "--no-llm-supports-functions"]
    r = cli(base + ["-p", "hello", "--max-budget", "0.000001", "--output-format", "json"], server=False)
    assert r.returncode == 3, r.stderr
    assert json.loads(r.stdout)["exit"] == 3 and "Budget" in r.stderr
    assert scripted_server.requests == []


# -- real processes: piped stdin and Ctrl-C ---------------------------------------------------


def oitui_process(args, home, server, stdin=None, timeout=180):
    base = [os.path.join(os.path.dirname(sys.executable), "oitui"), "-m", "openai/scripted", "--api-base",
            server.url, "--api-key", "sk-test", "--no-llm-supports-functions"]
    if not os.path.exists(base[0]):
        base[0:1] = [sys.executable, "-m", "oitui"]
    return subprocess.run(base + list(args), input=stdin, stdin=None if stdin is not None else subprocess.DEVNULL,
                          capture_output=True, text=True, env=_env(home), timeout=timeout, cwd=str(home))


def test_cli_process_text_with_piped_stdin_exit_0(tmp_path, scripted_server):
    scripted_server.reset([text_reply(CODE_REPLY), text_reply("It is 42.")])
    r = oitui_process(["-p", "compute this", "-y"], tmp_path, scripted_server, stdin="PIPED LOG LINE\n")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "Let me check.\n```python\nprint(6*7)\n```\n42\nIt is 42.\n"
    assert re.search(r"^session: \S+$", r.stderr, re.M) and "model: openai/scripted" in r.stderr
    first_user = [m for m in scripted_server.requests[0]["messages"] if m["role"] == "user"][0]["content"]
    assert first_user == "compute this\n\nPIPED LOG LINE\n"  # stdin appended after a blank line


def test_cli_interrupted_exits_130(tmp_path, scripted_server):
    import signal
    import time

    scripted_server.reset([text_reply([f"w{i} " for i in range(200)], interval=0.1)])
    base = [sys.executable, "-m", "oitui", "-m", "openai/scripted", "--api-base", scripted_server.url,
            "--api-key", "sk-test", "-p", "talk", "--output-format", "stream-json"]
    proc = subprocess.Popen(base, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env(tmp_path), cwd=str(tmp_path))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # wait until the reply streams
        line = proc.stdout.readline()
        if not line or '"content": "w' in line:
            break
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    last = json.loads(out.splitlines()[-1])
    assert last["type"] == "result" and last["exit"] == 130


def test_tui_refuses_piped_stdin_with_a_hint(monkeypatch, capsys):
    """`echo hi | oitui` (no -p) would open a screen nobody can drive; it exits 2 pointing at -p."""
    import io

    from oitui import cli

    monkeypatch.setattr("sys.stdin", io.StringIO("hi\n"))
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert "needs a terminal" in err and "oitui -p" in err
