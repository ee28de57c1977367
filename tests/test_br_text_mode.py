"""Fault cases BR-01..BR-06, BR-10(c), BR-25, BR-26 (model-visible parts), text mode, end to end:
scripted OpenAI-compatible server over real HTTP (through litellm) + the real Computer."""

from __future__ import annotations

import pytest

from support.core_helpers import check_runs, codes, fresh, make_interpreter, outputs, run_turn, texts
from support.scripted_server import (  # noqa: F401  (fixtures)
    scripted_server,
    scripted_server_module,
    split_three_ways,
    text_reply,
)

WAYS = ("one", "three", "lines")


@pytest.fixture(scope="module")
def shared(scripted_server_module, tmp_path_factory):
    interp = make_interpreter(scripted_server_module, str(tmp_path_factory.mktemp("br-text")))
    yield interp
    interp.terminate()


@pytest.fixture
def interp(shared, scripted_server):
    return fresh(shared)


def _script(server, reply_text, way, *more):
    server.reset([text_reply(split_three_ways(reply_text)[way]), *more])


# -- BR-01 ------------------------------------------------------------------------------------

ALIASES = [
    ("a", "```bash\necho alias-bash\n```", "shell", "alias-bash"),
    ("b", "```sh\necho alias-sh\n```", "shell", "alias-sh"),
    ("c", "```zsh\necho alias-zsh\n```", "shell", "alias-zsh"),
    ("d", "```shell\necho alias-shell\n```", "shell", "alias-shell"),
    ("e", "```py\nprint('alias-py')\n```", "python", "alias-py"),
    ("f", "```python3\nprint('alias-python3')\n```", "python", "alias-python3"),
    ("g", "``` Python \nprint('alias-spaced')\n```", "python", "alias-spaced"),
    ("h", "```\nprint('untagged')\n```", "python", "untagged"),
]


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("case,reply,language,expected", ALIASES, ids=[a[0] for a in ALIASES])
def test_br01_language_aliases(interp, scripted_server, case, reply, language, expected, way):
    _script(scripted_server, reply, way)
    chunks = run_turn(interp)
    check_runs(chunks)
    new = interp.messages[1:]
    assert [c[0] for c in codes(new)] == [language]
    assert outputs(new) == [expected]
    assert len(scripted_server.requests) == 2
    assert texts(new)[-1] == "DONE."


def test_br01_untagged_shell_command_routes_to_shell(interp, scripted_server):
    scripted_server.reset([text_reply("```\necho untagged-shell\n```")])
    run_turn(interp)
    assert codes(interp.messages) == [("shell", "echo untagged-shell")]
    assert outputs(interp.messages) == ["untagged-shell"]


@pytest.mark.parametrize("way", WAYS)
def test_br01_unavailable_language(interp, scripted_server, way):
    _script(scripted_server, "```powershell\nGet-ChildItem\n```", way)
    chunks = run_turn(interp)
    check_runs(chunks)
    outs = outputs(interp.messages)
    assert len(outs) == 1
    assert "`powershell` is not available on this machine" in outs[0]
    assert "python" in outs[0] and "shell" in outs[0]
    assert texts(interp.messages)[-1] == "DONE."
    second = scripted_server.requests[1]["messages"]
    assert sum("powershell` is not available" in str(m.get("content")) for m in second) == 1


@pytest.mark.parametrize("tag", ["markdown", "md", "text", "output", "json"])
def test_br01_display_only_never_runs(interp, scripted_server, tag):
    scripted_server.reset([text_reply(f"```{tag}\n# Heading\n```")])
    run_turn(interp)
    assert codes(interp.messages) == []
    assert outputs(interp.messages) == []
    assert "# Heading" in "".join(texts(interp.messages))
    assert len(scripted_server.requests) == 1  # shown as text: nothing to send back


# -- BR-02 ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "deltas,code,expected",
    [
        (["```python\n", "print('python is fun')\n", "```"], "print('python is fun')", "python is fun"),
        (["```", "python", "\n", "print", "('", "python", " is", " fun", "')", "\n", "```"],
         "print('python is fun')", "python is fun"),
        (["```shell\n", "echo shell scripts are shell\n", "```"], "echo shell scripts are shell",
         "shell scripts are shell"),
    ],
    ids=["a", "b", "c"],
)
def test_br02_language_name_inside_code(interp, scripted_server, deltas, code, expected):
    scripted_server.reset([text_reply(deltas)])
    run_turn(interp)
    assert [c[1] for c in codes(interp.messages)] == [code]
    assert outputs(interp.messages) == [expected]


# -- BR-03 ------------------------------------------------------------------------------------


def test_br03a_inline_code_is_prose(interp, scripted_server):
    scripted_server.reset([text_reply(["Run `", "ls`", " to list files."])])
    chunks = run_turn(interp)
    check_runs(chunks)
    assert texts(interp.messages) == ["Run `ls` to list files."]
    assert codes(interp.messages) == [] and outputs(interp.messages) == []
    shown = "".join(c.get("content") or "" for c in chunks if c.get("type") == "message")
    assert shown == "Run `ls` to list files."
    assert len(scripted_server.requests) == 1


@pytest.mark.parametrize("reply", ["Let me check.\n```python\nprint(6*7)\n```",
                                   "Let me check.\n```python\nprint(6*7)\n```\n"], ids=["b", "d"])
def test_br03bd_whole_reply_in_one_delta(interp, scripted_server, reply):
    scripted_server.reset([text_reply([reply])])
    run_turn(interp)
    new = interp.messages[1:]
    assert texts(new)[0] == "Let me check."
    assert codes(new) == [("python", "print(6*7)")]
    assert outputs(new) == ["42"]


def test_br03c_closing_fence_with_last_line(interp, scripted_server):
    scripted_server.reset([text_reply(["```python\n", "print(1)\n", "print(2)\n```"])])
    run_turn(interp)
    assert codes(interp.messages) == [("python", "print(1)\nprint(2)")]
    assert outputs(interp.messages) == ["1\n2"]


# -- BR-04 ------------------------------------------------------------------------------------

BR04 = "First:\n```python\nx = 5\nprint(x)\n```\nThen:\n```python\nprint(x * 2)\n```\nDone."


@pytest.mark.parametrize("way", WAYS)
def test_br04_several_blocks_and_prose(interp, scripted_server, way):
    _script(scripted_server, BR04, way)
    chunks = run_turn(interp)
    check_runs(chunks)
    new = interp.messages[1:]
    assert outputs(new) == ["5", "10"]
    assert codes(new) == [("python", "x = 5\nprint(x)"), ("python", "print(x * 2)")]
    first_reply = "".join(texts(new)[:3])
    for word in ("First:", "Then:", "Done."):
        assert word in first_reply
    sent = scripted_server.requests[1]["messages"]
    assistant = [m for m in sent if m["role"] == "assistant"][0]["content"]
    assert "First:" in assistant and "Then:" in assistant and "Done." in assistant
    assert "print(x * 2)" in assistant


# -- BR-05 ------------------------------------------------------------------------------------

BR05 = (
    "````python\nreadme = '''# Demo\n```bash\npip install demo\n```\n'''\n"
    "with open('README.md', 'w') as fh:\n    fh.write(readme)\nprint(len(readme.splitlines()))\n````"
)


@pytest.mark.parametrize("way", WAYS)
def test_br05_nested_fences(interp, scripted_server, way):
    import os

    _script(scripted_server, BR05, way)
    run_turn(interp)
    assert outputs(interp.messages) == ["4"]
    with open(os.path.join(interp.cwd, "README.md"), "rb") as fh:
        assert fh.read() == b"# Demo\n```bash\npip install demo\n```\n"


# -- BR-06 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("way", WAYS)
def test_br06a_unclosed_block_runs_once(interp, scripted_server, way):
    _script(scripted_server, "Running it now.\n```python\nprint('unterminated but complete')\n", way)
    run_turn(interp)
    assert outputs(interp.messages) == ["unterminated but complete"]
    assert len(codes(interp.messages)) == 1


@pytest.mark.parametrize("way", WAYS)
def test_br06b_cut_by_token_limit_not_run(interp, scripted_server, way):
    reply = "```python\nfor i in range(3):\n    print('unter"
    scripted_server.reset([text_reply(split_three_ways(reply)[way], finish_reason="length")])
    chunks = run_turn(interp)
    errors = [c for c in chunks if c.get("type") == "error"]
    assert errors and "cut off at the token limit" in errors[0]["content"]
    assert not any(c.get("type") == "console" and c.get("format") == "active_line" for c in chunks)
    assert len(scripted_server.requests) == 1  # the turn ends promptly
    outs = outputs(interp.messages)
    assert outs and "cut off" in outs[0] and "unter" not in outs[0]
    # the model is told on the next request
    scripted_server.reset([text_reply("ok")])
    run_turn(interp, "continue")
    assert "cut off at the token limit" in str(scripted_server.requests[0]["messages"])


# -- BR-10 (c) --------------------------------------------------------------------------------


def test_br10c_empty_code_block(interp, scripted_server):
    scripted_server.reset([text_reply("```python\n```")])
    run_turn(interp)
    assert len(scripted_server.requests) <= 2
    outs = outputs(interp.messages)
    assert len(outs) == 1 and "empty" in outs[0]
    assert not any(m.get("format") == "active_line" for m in interp.messages)


# -- BR-25 / BR-26: model-visible output ------------------------------------------------------


def test_br25_huge_output_model_visible(interp, scripted_server):
    scripted_server.reset([text_reply("```python\nfor i in range(200000):\n    print(f'line {i}')\n```")])
    run_turn(interp)
    sent = scripted_server.requests[1]["messages"]
    visible = [m["content"] for m in sent if m["role"] == "user" and "line 0" in str(m["content"])][0]
    assert len(visible) <= 2800 + 500 + len("Code output:\n")
    body = visible.split("Code output:\n", 1)[1]
    assert body.startswith("line 0")
    assert body.rstrip("\n").endswith("line 199999")
    digits = body.replace(",", "").replace("\u202f", "").replace(" ", "")
    assert "2288890" in digits and "200000" in digits
    stored = outputs(interp.messages)[0]
    assert len(stored) <= 3300


def test_br26a_progress_bar_and_colours(interp, scripted_server):
    code = (
        "```python\nimport sys\nfor p in (10, 50, 100):\n    sys.stdout.write(f'\\rProgress {p}%')\n"
        "    sys.stdout.flush()\nprint()\nprint('\\x1b[31mRED\\x1b[0m done')\n```"
    )
    scripted_server.reset([text_reply(code)])
    run_turn(interp)
    assert outputs(interp.messages) == ["Progress 100%\nRED done"]
    sent = str(scripted_server.requests[1]["messages"])
    assert "\x1b" not in sent and "\r" not in sent
    assert "Progress 100%\\nRED done" in sent or "Progress 100%\nRED done" in sent


def test_br26b_bash_carriage_return(interp, scripted_server):
    scripted_server.reset([text_reply("```bash\nprintf 'abcdef\\rXY\\n'\n```")])
    run_turn(interp)
    assert outputs(interp.messages) == ["XYcdef"]
    user = [m for m in scripted_server.requests[1]["messages"] if m["role"] == "user"][-1]["content"]
    assert user.endswith("XYcdef") or user.endswith("XYcdef\n")
