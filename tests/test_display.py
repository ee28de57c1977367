"""TerminalDisplay: the plain text format (non-TTY) and rich rendering (TTY)."""

from __future__ import annotations

import io
import subprocess
import sys

import pytest

from oitui.core.display import TerminalDisplay, render_plain

STREAM = [
    {"role": "user", "type": "message", "content": "what is 6*7?\nthanks", "start": True, "end": True},
    {"role": "assistant", "type": "message", "start": True},
    {"role": "assistant", "type": "message", "content": "Let me "},
    {"role": "assistant", "type": "message", "content": "check."},
    {"role": "assistant", "type": "message", "end": True},
    {"role": "assistant", "type": "code", "format": "python", "start": True, "call_id": "c1"},
    {"role": "assistant", "type": "code", "format": "python", "content": "print(6*7)\n"},
    {"role": "assistant", "type": "code", "format": "python", "content": "for i in range(2): print(i)"},
    {"role": "assistant", "type": "code", "format": "python", "end": True},
    {"role": "computer", "type": "confirmation", "format": "execution", "content": {"type": "code"}},
    {"role": "computer", "type": "console", "format": "active_line", "content": 1, "start": True},
    {"role": "computer", "type": "console", "format": "output", "content": "4"},
    {"role": "computer", "type": "console", "format": "active_line", "content": 2},
    {"role": "computer", "type": "console", "format": "output", "content": "2\n\x1b[31m0\x1b[0m\n10%\r100%"},
    {"role": "computer", "type": "console", "format": "active_line", "content": None, "end": True},
    {"role": "assistant", "type": "message", "content": "It is **42**.", "start": True, "end": True},
    {"role": "computer", "type": "error", "content": "rate limited", "kind": "api", "start": True, "end": True},
]

PLAIN = (
    "> what is 6*7?\n"
    "> thanks\n"
    "\n"
    "Let me check.\n"
    "\n"
    "```python\n"
    "print(6*7)\n"
    "for i in range(2): print(i)\n"
    "```\n"
    "42\n"
    "0\n"
    "100%\n"
    "\n"
    "It is **42**.\n"
    "\n"
    "Error: rate limited\n"
)


def test_plain_text_format_exact():
    buf = io.StringIO()
    d = TerminalDisplay(buf)
    assert d.rich is False  # a StringIO is not a TTY
    for c in STREAM:
        d.feed(c)
    d.close()
    assert buf.getvalue() == PLAIN


def test_plain_without_flags_and_nested_fence():
    buf = io.StringIO()
    d = TerminalDisplay(buf, rich=False)
    code = "readme = '''\n```bash\nls\n```\n'''"
    d.feed({"role": "assistant", "type": "message", "content": "Writing it."})
    d.feed({"role": "assistant", "type": "code", "format": "python", "content": code})
    d.feed({"role": "computer", "type": "console", "format": "output", "content": "done\n"})
    d.feed({"role": "assistant", "type": "code", "format": "shell", "content": "echo hi"})
    d.feed({"role": "computer", "type": "console", "format": "output", "content": "hi"})
    d.close()
    assert buf.getvalue() == (
        "Writing it.\n\n````python\n" + code + "\n````\ndone\n\n```shell\necho hi\n```\nhi\n"
    )


def test_render_plain_stored_messages():
    msgs = [
        {"role": "user", "type": "message", "content": "go"},
        {"role": "assistant", "type": "code", "format": "shell", "content": "echo 1", "call_id": "c"},
        {"role": "computer", "type": "console", "format": "output", "content": "1", "call_id": "c"},
        {"role": "assistant", "type": "tool_call", "format": "Read", "content": {"path": "a.txt"}, "call_id": "t"},
        {"role": "computer", "type": "image", "format": "path", "content": "/tmp/x.png"},
        {"role": "assistant", "type": "reasoning", "content": "secret thoughts"},
        {"role": "assistant", "type": "message", "content": "ok"},
    ]
    assert render_plain(msgs) == (
        "> go\n\n```shell\necho 1\n```\n1\n\n→ Read: {\"path\": \"a.txt\"}\n\n[image /tmp/x.png]\n\nok\n"
    )


def test_rich_rendering_to_a_terminal_console():
    from rich.console import Console

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=70, color_system=None)
    d = TerminalDisplay(console=console)
    assert d.rich is True
    for c in STREAM:
        d.feed(c)
    d.close()
    out = buf.getvalue()
    assert "> what is 6*7?" in out
    assert "Let me check." in out
    assert "print(6*7)" in out and "─ python ─" in out
    assert "─ output ─" in out
    for line in ("42", "0", "100%"):
        assert f"│ {line} " in out
    assert "10%" not in out.split("─ output ─")[-1].split("It is")[0].replace("100%", "")
    assert "It is 42." in out  # markdown rendered (bold markers gone)
    assert "Error: rate limited" in out


def test_tty_detection_and_bad_input():
    class FakeTTY(io.StringIO):
        def isatty(self):
            return True

    assert TerminalDisplay(FakeTTY()).rich is True
    assert TerminalDisplay(io.StringIO(), rich=True).rich is True
    d = TerminalDisplay(io.StringIO())
    with pytest.raises(TypeError):
        d.feed("text")  # type: ignore[arg-type]
    d.close()
    d.close()  # idempotent


def test_rich_is_imported_lazily():
    code = (
        "import sys, io\n"
        "import oitui.core.display as m, oitui.core.lmc, oitui.core.parsing, oitui.core.context\n"
        "d = m.TerminalDisplay(io.StringIO())\n"
        "d.feed({'role': 'assistant', 'type': 'message', 'content': 'hi'}); d.close()\n"
        "bad = [x for x in ('rich', 'litellm', 'textual') if x in sys.modules]\n"
        "assert not bad, bad\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
