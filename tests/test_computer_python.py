"""The python runtime: a real Jupyter kernel (one for the whole module)."""

from __future__ import annotations

import base64
import os
import threading
import time

import pytest

from oitui.computer import Computer
from oitui.computer.output import terminal_text, truncate_output


@pytest.fixture(scope="module")
def computer():
    os.environ["OPENAI_API_KEY"] = "sk-test-should-not-leak"
    os.environ["ACME_API_KEY"] = "acme-should-not-leak"
    c = Computer()
    try:
        c.run("python", "pass")  # start the kernel while the keys are set
    finally:
        os.environ.pop("OPENAI_API_KEY", None)
        os.environ.pop("ACME_API_KEY", None)
    yield c
    c.terminate()


def out(c: Computer, code: str) -> str:
    msgs = c.run("python", code)
    return "\n".join(m["content"] for m in msgs if m["format"] == "output")


def stop_after(c: Computer, seconds: float) -> threading.Timer:
    t = threading.Timer(seconds, c.stop)
    t.start()
    return t


def test_api_keys_absent_from_kernel(computer):
    assert out(computer, "import os\nprint(sorted(k for k in os.environ if k.endswith('API_KEY')))") == "[]"


def test_state_persists_and_final_expression_shown(computer):
    assert out(computer, "x = 41") == ""
    assert out(computer, "print(x + 1)") == "42"
    assert out(computer, "10+12") == "22"
    assert out(computer, "y = 5\ny * 2") == "10"


def test_br13_strings_and_docstrings_unchanged(computer):
    a = 'def f():\n    """One-line doc."""\n    return 1\ntext = """line1\n\n# not a comment\nline3"""\nprint(repr(text))\n'
    assert out(computer, a) == "'line1\\n\\n# not a comment\\nline3'"
    b = 'def g():\n    """Summary.\n\n    Details after a blank line."""\n    return 0\nprint(g.__doc__.count("\\n"))\n'
    assert out(computer, b) == "2"
    c = 's = """a\n\nb"""\nprint(s.count("\\n"))\n'
    for on in (True, False):
        computer.highlight_active_line = on
        try:
            assert out(computer, c) == "2"
        finally:
            computer.highlight_active_line = True


def test_br14_future_main_decorators_magics(computer):
    a = "from __future__ import annotations\ndef g(x: UndefinedType) -> int:\n    return 3\nprint(g(1))\n"
    assert out(computer, a) == "3"
    b = 'def main():\n    print("main ran")\nif __name__ == "__main__":\n    main()\n'
    assert out(computer, b) == "main ran"
    c = (
        "import functools\ndef deco(fn):\n    @functools.wraps(fn)\n    def w(*a):\n        return fn(*a) * 10\n"
        "    return w\n@deco\ndef h(x):\n    return x + 1\ntry:\n    print(h(1))\n    raise ValueError(\"boom\")\n"
        "except ValueError as e:\n    print(\"caught\", e)\nfinally:\n    print(\"finally\")\n"
    )
    assert out(computer, c) == "20\ncaught boom\nfinally"
    assert out(computer, "!echo magic-ok\nprint('py-ok')") == "magic-ok\npy-ok"
    assert out(computer, "%timeit -n1 -r1 pass").endswith("per loop (mean ± std. dev. of 1 run, 1 loop each)")


def test_traceback_plain_with_model_line_numbers(computer):
    text = out(computer, "a = 1\nb = 0\nprint(a / b)")
    assert "\x1b" not in text
    assert "ZeroDivisionError: division by zero" in text
    assert "----> 3 print(a / b)" in text


def test_br16_input_and_getpass_get_eof_headless(computer):
    t0 = time.monotonic()
    text = out(computer, "name = input('Name? ')\nprint('hi', name)")
    assert time.monotonic() - t0 < 30
    assert "EOFError" in text and "input()" in text
    assert not any(line.startswith("hi") for line in text.splitlines())
    assert out(computer, "print('still alive')") == "still alive"
    text = out(computer, "import getpass\npw = getpass.getpass('Password: ')\nprint('got', len(pw))")
    assert "EOFError" in text and "getpass()" in text
    assert not any(line.startswith("got") for line in text.splitlines())
    assert out(computer, "print('still alive')") == "still alive"


def test_br16_interactive_input_reaches_program(computer):
    computer.interactive = True
    try:
        chunks = []
        for chunk in computer.run("python", "name = input('Name? ')\nprint('hi', name)", stream=True):
            chunks.append(chunk)
            if chunk["format"] == "input_request":
                assert chunk["content"] == "Name? " and chunk["password"] is False
                computer.send_input("Ada")
    finally:
        computer.interactive = False
    text = terminal_text("".join(c["content"] for c in chunks if c["format"] == "output"))
    assert text.startswith("Name? ") and text.endswith("hi Ada")


def test_active_lines_reported_out_of_band(computer):
    code = "import time; time.sleep(0.3)\ntime.sleep(0.3)\ntime.sleep(0.3)"
    chunks = list(computer.run("python", code, stream=True))
    lines = [c["content"] for c in chunks if c["format"] == "active_line"]
    assert lines == [1, 2, 3, None]
    assert not [c for c in chunks if c["format"] == "output"]


def test_active_lines_inside_function_use_cell_lines(computer):
    code = "import time\ndef f():\n    time.sleep(0.3)\n    time.sleep(0.3)\nf()"
    lines = [c["content"] for c in computer.run("python", code, stream=True) if c["format"] == "active_line"]
    assert lines[:2] == [3, 4] and lines[-1] is None


def test_active_line_tracking_off_reports_nothing(computer):
    computer.highlight_active_line = False
    try:
        chunks = list(computer.run("python", "import time\ntime.sleep(0.3)", stream=True))
    finally:
        computer.highlight_active_line = True
    assert [c for c in chunks if c["format"] == "active_line"] == []


def test_output_streams_as_it_arrives(computer):
    seen = []
    t0 = time.monotonic()
    for chunk in computer.run("python", "import time\nprint('a', flush=True); time.sleep(1); print('b')", stream=True):
        if chunk["format"] == "output":
            seen.append((chunk["content"], time.monotonic() - t0))
    text = "".join(s for s, _ in seen)
    assert text == "a\nb\n"
    t_a = next(t for s, t in seen if "a" in s)
    t_b = next(t for s, t in seen if "b" in s)
    assert t_b - t_a >= 0.8


def test_br18_interrupt_keeps_partial_output_and_state(computer):
    # (a) interrupted about 1 s after its output starts
    code = "import time\nfor i in range(1000):\n    print(i, flush=True)\n    time.sleep(0.1)"
    parts, timer, stopped = [], None, []
    for chunk in computer.run("python", code, stream=True):
        if chunk["format"] == "output":
            parts.append(chunk["content"])
            if timer is None:
                timer = threading.Timer(1.0, lambda: (stopped.append(time.monotonic()), computer.stop()))
                timer.start()
    ended = time.monotonic()
    timer.join()
    assert ended - stopped[0] < 2.0  # stops within 2 s of the interrupt
    text = terminal_text("".join(parts))
    assert "KeyboardInterrupt" in text
    numbers = [int(line) for line in text.splitlines() if line.strip().isdigit()]
    assert numbers and numbers[0] == 0 and numbers == list(range(len(numbers)))
    assert 5 <= numbers[-1] <= 30  # 0 up to about 9
    last = numbers[-1]
    # (b) a busy loop stops too
    t = stop_after(computer, 1.0)
    t0 = time.monotonic()
    text_b = out(computer, "while True:\n    pass")
    t.join()
    assert time.monotonic() - t0 < 1.0 + 2.5
    assert "KeyboardInterrupt" in text_b
    # (c) state survived
    assert out(computer, "print('i is', i)") == f"i is {last}"


def test_stopped_file_loop_holds_first_iterations(computer, tmp_path):
    path = tmp_path / "loop.txt"
    code = (
        "import time\n"
        f"for n in range(1, 6):\n    with open({str(path)!r}, 'a') as f:\n        f.write(f'{{n}}\\n')\n"
        "    print(n, flush=True)\n    time.sleep(0.5)\n"
    )
    seen = []
    for chunk in computer.run("python", code, stream=True):
        if chunk["format"] == "output":
            seen.append(chunk["content"])
            if "3\n" in "".join(seen):
                computer.stop()
    lines = path.read_text().split()
    assert lines[:3] == ["1", "2", "3"]
    assert "5" not in lines


def test_timeout_stops_block_with_message(computer):
    computer.timeout = 1
    try:
        t0 = time.monotonic()
        text = out(computer, "import time\ntime.sleep(20)")
        assert time.monotonic() - t0 < 5
    finally:
        computer.timeout = 0
    assert "timed out after 1 s" in text
    assert out(computer, "print('ok')") == "ok"


def test_br25_huge_output_completes(computer):
    msgs = computer.run("python", "for i in range(200000):\n    print(f'line {i}')")
    text = msgs[0]["content"]
    assert len(text) == 2_288_889
    cut = truncate_output(text, 2800)
    assert cut.startswith("line 0\n") and cut.endswith("line 199999")
    assert "2,288,890 characters" in cut and "200,000 lines" in cut


def test_br26_progress_bar_program(computer):
    code = (
        "import sys\nfor p in (10, 50, 100):\n    sys.stdout.write(f'\\rProgress {p}%')\n    sys.stdout.flush()\n"
        "print()\nprint('\\x1b[31mRED\\x1b[0m done')\n"
    )
    raw = "".join(c["content"] for c in computer.run("python", code, stream=True) if c["format"] == "output")
    assert raw == "\rProgress 10%\rProgress 50%\rProgress 100%\n\x1b[31mRED\x1b[0m done\n"
    text = out(computer, code)
    assert text == "Progress 100%\nRED done"


def test_matplotlib_figure_becomes_png(computer):
    pytest.importorskip("matplotlib")
    msgs = computer.run(
        "python", "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3])\nplt.show()\nprint('shown')"
    )
    images = [m for m in msgs if m["type"] == "image"]
    assert [m["content"] for m in msgs if m["format"] == "output"] == ["shown"]
    assert len(images) == 1 and images[0]["format"] == "base64.png"
    assert base64.b64decode(images[0]["content"])[:8] == b"\x89PNG\r\n\x1a\n"


def test_dead_kernel_restarted_with_note(computer):
    text = out(computer, "import os\nos._exit(1)")
    assert "kernel died" in text
    text = out(computer, "print('fresh')")
    assert "state" in text.lower() or "lost" in text
    assert text.endswith("fresh")
    assert "NameError" in out(computer, "print(x)")


def test_bad_python_path_gives_clear_message(tmp_path):
    c = Computer(python=str(tmp_path / "no-such-python"))
    try:
        msgs = c.run("python", "print(1)")
    finally:
        c.terminate()
    assert len(msgs) == 1
    assert msgs[0]["content"].startswith(f"could not start the Python kernel with {tmp_path / 'no-such-python'}")


def test_terminate_then_fresh_kernel(computer):
    out(computer, "fresh_marker = 1")
    computer.terminate()
    text = out(computer, "print('fresh_marker' in globals())")
    assert text == "False"
