"""Terminal rendering, truncation, the bounded accumulator, the launcher and language names."""

from __future__ import annotations

import subprocess
import sys

import pytest

from oitui.computer.languages import normalize_language
from oitui.computer.launcher import child_env, launch
from oitui.computer.output import OutputAccumulator, terminal_text, truncate_output

BR25_RAW = "".join(f"line {i}\n" for i in range(200000))
BR26_RAW = "\rProgress 10%\rProgress 50%\rProgress 100%\n\x1b[31mRED\x1b[0m done\n"


def test_br26_terminal_text_progress_and_colours():
    assert terminal_text(BR26_RAW) == "Progress 100%\nRED done"
    assert terminal_text("\rProgress 10%\rProgress 50%\rProgress 100%\n") == "Progress 100%"
    assert terminal_text("abcdef\rXY\n") == "XYcdef"


def test_terminal_text_escapes_backspace_and_crlf():
    assert terminal_text("abc\b\bZ") == "aZc"
    assert terminal_text("\x1b]0;window title\x07hello \x1b[1;32mworld\x1b[0m\x1b(B") == "hello world"
    assert terminal_text("one\r\ntwo\r\n") == "one\ntwo"
    assert terminal_text("50%\x1b[2K\rdone") == "done"
    out = terminal_text("x\x1b[?25lcursor\x1b[?25h\x07\x00")
    assert out == "xcursor"
    assert "\x1b" not in out and "\r" not in out
    assert terminal_text("") == ""


def test_br25_truncate_output_keeps_head_tail_and_size():
    text = terminal_text(BR25_RAW)
    out = truncate_output(text, 2800)
    lines = out.split("\n")
    assert lines[0] == "line 0"
    assert lines[-1] == "line 199999"
    banners = [line for line in lines if line.startswith("[output truncated")]
    assert len(banners) == 1
    banner = banners[0]
    assert len(banner) <= 500
    assert "2,288,890 characters" in banner and "200,000 lines" in banner
    kept = out.replace(banner, "")
    assert len(kept) <= 2800
    # every kept line is a whole line of the original
    assert all(line.startswith("line ") and line[5:].isdigit() for line in lines if line != banner)
    # the raw form (with the final newline) reports the same size
    assert truncate_output(BR25_RAW, 2800) == out


def test_truncate_output_short_text_unchanged_and_char_boundaries():
    assert truncate_output("short\ntext", 2800) == "short\ntext"
    out = truncate_output("x" * 10000, 100)
    head, banner, tail = out.split("\n")
    assert set(head) == {"x"} and set(tail) == {"x"}
    assert len(head) + len(tail) <= 100
    assert "10,001 characters in 1 line" in banner
    with pytest.raises(ValueError):
        truncate_output("abc", 1)


def test_accumulator_matches_truncate_and_stays_bounded():
    acc = OutputAccumulator(2800, keep_full_chars=50_000)
    for i in range(0, len(BR25_RAW), 4093):  # odd chunk size: lines cut anywhere
        acc.feed(BR25_RAW[i : i + 4093])
    assert acc.total_chars == 2_288_890
    assert acc.total_lines == 200_000
    assert acc.full_text() is None
    assert acc.result() == truncate_output(terminal_text(BR25_RAW), 2800)
    # bounded: what is kept is a few kilobytes, not the 2.3 MB
    kept = sum(map(len, acc._head)) + sum(map(len, acc._tail))
    assert kept < 10_000


def test_accumulator_escapes_split_across_chunks():
    acc = OutputAccumulator()
    for ch in BR26_RAW:
        acc.feed(ch)
    assert acc.result() == "Progress 100%\nRED done"
    assert acc.full_text() == "Progress 100%\nRED done"
    acc2 = OutputAccumulator()
    acc2.feed(b"caf\xc3\xa9 \xff ok\n")
    assert acc2.result() == "café \ufffd ok"


def test_language_aliases_normalised():
    cases = {
        "Python": "python", " py ": "python", "python3": "python", "ipython": "python",
        "BASH": "shell", "sh": "shell", "zsh": "shell", "console": "shell", "shell": "shell",
        "js": "javascript", "Node": "javascript", "R": "r", "HTML": "html",
        "osascript": "applescript", "pwsh": "powershell", "ps1": "powershell",
    }
    for name, want in cases.items():
        assert normalize_language(name) == want, name
    assert normalize_language("cobol") is None
    assert normalize_language("") is None


def test_launcher_removes_api_keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret-2")
    monkeypatch.setenv("SOMEVENDOR_API_KEY", "sk-secret-3")
    monkeypatch.setenv("HUGGINGFACE_API_TOKEN", "hf-secret-4")
    monkeypatch.setenv("OITUI_HARMLESS", "kept")
    env = child_env()
    assert "OPENAI_API_KEY" not in env and "SOMEVENDOR_API_KEY" not in env and "HUGGINGFACE_API_TOKEN" not in env
    assert env["OITUI_HARMLESS"] == "kept"
    proc = launch(
        [sys.executable, "-c", "import os; print(sorted(k for k in os.environ if 'API_KEY' in k), os.environ.get('OITUI_HARMLESS'))"],
        stdout=subprocess.PIPE,
    )
    out, _ = proc.communicate(timeout=60)
    assert out.decode().strip() == "[] kept"
    with pytest.raises(ValueError):
        launch([])


def test_import_computer_is_cheap():
    code = "import sys, oitui.computer; from oitui.computer import output, languages; print('jupyter_client' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == "False", out.stderr
