"""The R runtime: a persistent ``R --vanilla`` when R is installed (CI installs r-base-core)."""

from __future__ import annotations

import shutil

import pytest

from oitui.computer import Computer

pytestmark = pytest.mark.skipif(shutil.which("R") is None, reason="R is not installed (apt-get install r-base-core)")


@pytest.fixture(scope="module")
def computer():
    c = Computer()
    yield c
    c.terminate()


def _output(messages):
    return "\n".join(m["content"] for m in messages if m.get("format") == "output")


def test_r_state_persists_between_blocks(computer):
    assert computer.available("R") == (True, "")
    assert _output(computer.run("r", "x <- 41")).strip() == ""
    assert _output(computer.run("R", "print(x + 1)")).strip() == "[1] 42"


def test_r_error_is_reported_and_runtime_survives(computer):
    out = _output(computer.run("r", 'print("before")\nstop("boom")\nprint("never")'))
    assert '[1] "before"' in out
    assert "Error: boom" in out
    assert "never" not in out
    assert _output(computer.run("r", "cat(2 * 21, '\\n')")).strip() == "42"
