"""The shell (bash), javascript (node) and small runtimes, with real processes."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time

import pytest

from oitui.computer import Computer


@pytest.fixture(scope="module")
def computer(tmp_path_factory):
    os.environ["OPENAI_API_KEY"] = "sk-test-should-not-leak"
    os.environ["ACME_API_KEY"] = "acme-should-not-leak"
    work = tmp_path_factory.mktemp("shell-cwd")
    c = Computer(cwd=str(work), output_dir=str(work / "outputs"))
    try:
        c.run("shell", "true")
        if shutil.which("node"):
            c.run("javascript", "1")
    finally:
        os.environ.pop("OPENAI_API_KEY", None)
        os.environ.pop("ACME_API_KEY", None)
    yield c
    c.terminate()


def sh(c: Computer, code: str, lang: str = "shell") -> str:
    msgs = c.run(lang, code)
    return "\n".join(m["content"] for m in msgs if m["format"] == "output")


needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")


def test_api_keys_absent_from_shell(computer):
    assert sh(computer, "env | grep -c '_API_KEY=' || true") == "0"


def test_shell_state_persists(computer, tmp_path):
    sh(computer, f"cd {tmp_path}\nexport OITUI_T=persisted\ngreet() {{ echo \"hello $1\"; }}\nplain=1")
    assert sh(computer, "pwd; echo $OITUI_T; greet bob; echo $plain") == f"{tmp_path}\npersisted\nhello bob\n1"


def test_pager_is_cat(computer):
    assert sh(computer, "echo $PAGER $GIT_PAGER") == "cat cat"


def test_br19_heredoc_case_multiline_quotes(computer, tmp_path):
    code = (
        f"cd {tmp_path}\ncat > notes.txt <<'EOF'\nalpha\nbeta\nEOF\ncat notes.txt\nwc -l < notes.txt\nx=b\ncase $x in\n"
        '  a) echo "is a" ;;\n  b) echo "is b" ;;\nesac\necho "first\nsecond"\n'
    )
    t0 = time.monotonic()
    assert sh(computer, code) == "alpha\nbeta\n2\nis b\nfirst\nsecond"
    assert time.monotonic() - t0 < 5
    assert (tmp_path / "notes.txt").read_bytes() == b"alpha\nbeta\n"


def test_br21_exit_syntax_errors_unknown_command(computer):
    sh(computer, "export BR21_VAR=kept\nbr21_fn() { echo fn-kept; }")
    t0 = time.monotonic()
    one = sh(computer, "echo before\nexit 3\necho never")
    assert time.monotonic() - t0 < 2.5
    assert one.startswith("before") and "never" not in one and "status 3" in one
    two = sh(computer, "echo after-exit\necho $BR21_VAR\nbr21_fn")
    assert two.endswith("after-exit\nkept\nfn-kept")
    assert "restored" in two  # the note about the new shell
    three = sh(computer, "echo start\nfi\necho unreachable")
    assert three.startswith("start\n")
    assert "syntax error near unexpected token `fi'" in three
    assert "unreachable" not in three
    four = sh(computer, "nonexistent_cmd_xyz\necho after-missing")
    assert "nonexistent_cmd_xyz: command not found" in four and four.endswith("after-missing")
    t0 = time.monotonic()
    five = sh(computer, "if true; then\n  echo open-if\n")
    assert time.monotonic() - t0 < 5
    assert "syntax error: unexpected end of file" in five and "open-if" not in five
    assert sh(computer, "echo still-works") == "still-works"


@pytest.mark.skipif(
    os.geteuid() == 0 or shutil.which("sudo") is None
    or subprocess.run(["sudo", "-n", "true"], capture_output=True).returncode == 0,
    reason="needs a non-root user with sudo installed that asks for a password",
)
def test_br16_sudo_needs_terminal(computer):
    text = sh(computer, "sudo -k\nsudo ls /root\necho after-sudo")
    assert ("terminal is required" in text or "password is required" in text) and text.endswith("after-sudo")
    assert sh(computer, "echo next") == "next"


def test_br26_carriage_return_in_shell(computer):
    raw = "".join(c["content"] for c in computer.run("shell", "printf 'abcdef\\rXY\\n'", stream=True) if c["format"] == "output")
    assert raw == "abcdef\rXY\n"
    assert sh(computer, "printf 'abcdef\\rXY\\n'") == "XYcdef"


def test_background_job_does_not_hold_block(computer):
    t0 = time.monotonic()
    assert sh(computer, "sleep 30 &\necho started") == "started"
    assert time.monotonic() - t0 < 5
    sh(computer, "kill %1 2>/dev/null; true")


def test_stdin_is_dev_null_headless(computer):
    t0 = time.monotonic()
    assert sh(computer, "read -r line || echo no-input\ncat; echo done") == "no-input\ndone"
    assert time.monotonic() - t0 < 5


def test_interactive_stdin_pipe(computer):
    computer.interactive = True
    try:
        chunks = []
        gen = computer.run("shell", "read -r name\necho \"hi $name\"", stream=True)
        threading.Timer(0.5, computer.send_input, args=("Ada",)).start()
        for chunk in gen:
            chunks.append(chunk)
    finally:
        computer.interactive = False
    assert "".join(c["content"] for c in chunks if c["format"] == "output") == "hi Ada\n"


def test_shell_active_lines(computer):
    chunks = list(computer.run("shell", "sleep 0.3\nsleep 0.3\nsleep 0.3", stream=True))
    assert [c["content"] for c in chunks if c["format"] == "active_line"] == [1, 2, 3, None]
    computer.highlight_active_line = False
    try:
        chunks = list(computer.run("shell", "sleep 0.1\necho x", stream=True))
    finally:
        computer.highlight_active_line = True
    assert [c for c in chunks if c["format"] == "active_line"] == []


def test_shell_interrupt_busy_loop_and_child(computer):
    sh(computer, "export KEEP_ME=yes")
    for code in ("while true; do :; done\necho after", "sleep 20\necho after"):
        threading.Timer(1.0, computer.stop).start()
        t0 = time.monotonic()
        text = sh(computer, code)
        assert time.monotonic() - t0 < 1.0 + 2.5
        assert "after" not in text and "interrupted" in text
    assert sh(computer, "echo $KEEP_ME") .endswith("yes")


def test_shell_timeout(computer):
    computer.timeout = 1
    try:
        text = sh(computer, "sleep 20")
    finally:
        computer.timeout = 0
    assert "timed out after 1 s" in text
    assert sh(computer, "echo ok") == "ok"


def test_invalid_utf8_is_replaced(computer):
    assert sh(computer, "printf 'caf\\xc3\\xa9 \\xff\\n'") == "café \ufffd"


@needs_node
def test_javascript_state_errors_and_interrupt(computer):
    assert sh(computer, "let jx = 41; var jy = 1; console.log('hi')", "js") == "hi"
    assert sh(computer, "console.log(jx + jy); jx * 2", "node") == "42\n82"
    err = sh(computer, "function boom() { throw new Error('kaput'); }\nboom()", "javascript")
    assert "Error: kaput" in err and "at boom (block.js:1" in err
    threading.Timer(1.0, computer.stop).start()
    t0 = time.monotonic()
    assert "interrupted" in sh(computer, "while (true) {}", "js")
    assert time.monotonic() - t0 < 3.5
    assert sh(computer, "console.log(jx)", "js") == "41"
    assert sh(computer, "Object.keys(process.env).filter(k => k.endsWith('_API_KEY')).length", "js") == "0"


def test_html_written_to_output_dir(computer):
    text = sh(computer, "<h1>Hello</h1>", "HTML")
    path = text.split("HTML written to ", 1)[1].strip()
    assert path.startswith(computer.output_dir)
    with open(path, encoding="utf-8") as f:
        assert f.read() == "<h1>Hello</h1>"


def test_unavailable_and_unknown_languages(computer):
    msgs = computer.run("cobol", "DISPLAY 'x'")
    assert len(msgs) == 1
    assert msgs[0]["content"].startswith("`cobol` is not available on this machine")
    assert "available: python, shell" in msgs[0]["content"]
    if shutil.which("R") is None:
        text = sh(computer, "print(1)", "R")
        assert text.startswith("`r` is not available on this machine (R is not installed); available: python, shell")
        assert computer.available("r") == (False, "R is not installed")
    if os.uname().sysname != "Darwin":
        assert "AppleScript needs macOS" in sh(computer, 'display dialog "x"', "osascript")
    assert "python" in computer.languages and "shell" in computer.languages


def test_terminate_ends_runtimes_and_next_block_starts_fresh(computer):
    sh(computer, "export FRESH_CHECK=old")
    rt = computer._runtimes["shell"]
    old_pid = rt._proc.pid
    computer.terminate()
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(old_pid, 0)
            time.sleep(0.1)
    assert sh(computer, "echo \"[$FRESH_CHECK]\"") == "[]"
