"""Fence parser, tool-call accumulation and argument repair (fault cases BR-01 to BR-09)."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from oitui.core.parsing import (
    FenceParser,
    ToolCallAccumulator,
    collapse_events,
    extract_hallucinated_calls,
    guess_language,
    interpret_execute_call,
    repair_json,
)

# ---------------------------------------------------------------------------- helpers


def _one(text: str) -> list[str]:
    return [text]


def _threes(text: str) -> list[str]:
    return [text[i : i + 3] for i in range(0, len(text), 3)]


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _tokens(text: str) -> list[str]:
    return [t for t in re.findall(r"`+|~+|\w+|\s|[^\w\s`~]", text) if t]


def _chars(text: str) -> list[str]:
    return list(text)


CHUNKINGS = [_one, _threes, _lines, _tokens, _chars]


def parse(deltas, finish_reason="stop") -> list[dict]:
    p = FenceParser()
    events: list[dict] = []
    for d in deltas:
        events += p.feed(d)
    events += p.finish(finish_reason)
    return collapse_events(events)


def parse_all_ways(text: str, finish_reason: str = "stop") -> list[dict]:
    """Parse ``text`` under every chunking; assert they agree; return the (collapsed) events."""
    results = [parse(chunk(text), finish_reason) for chunk in CHUNKINGS]
    for r in results[1:]:
        assert r == results[0]
    return results[0]


def prose(events) -> str:
    return "".join(e["content"] for e in events if e["kind"] == "text")


def blocks(events) -> list[dict]:
    return [e for e in events if e["kind"] == "code_end"]


def check_code_stream(events) -> None:
    """The streamed ``code`` pieces add up to each block's code (plus its newline)."""
    current = None
    for e in events:
        if e["kind"] == "code_start":
            current = ""
        elif e["kind"] == "code":
            current += e["content"]
        elif e["kind"] == "code_end":
            assert current is not None
            assert current in (e["code"], e["code"] + "\n")
            current = None


# ---------------------------------------------------------------------------- BR-01


@pytest.mark.parametrize(
    "tag_line, code, tag",
    [
        ("```bash", "echo alias-bash", "bash"),
        ("```sh", "echo alias-sh", "sh"),
        ("```zsh", "echo alias-zsh", "zsh"),
        ("```shell", "echo alias-shell", "shell"),
        ("```py", "print('alias-py')", "py"),
        ("```python3", "print('alias-python3')", "python3"),
        ("``` Python ", "print('alias-spaced')", "Python"),
        ("```", "print('untagged')", ""),
        ("```powershell", "Get-ChildItem", "powershell"),
        ("```markdown", "# Heading", "markdown"),
    ],
)
def test_br01_tags(tag_line, code, tag):
    events = parse_all_ways(f"{tag_line}\n{code}\n```")
    assert [e["kind"] for e in events] == ["code_start", "code", "code_end"]
    assert events[0] == {"kind": "code_start", "tag": tag}
    assert blocks(events) == [{"kind": "code_end", "tag": tag, "code": code, "closed": True}]
    assert prose(events) == ""


def test_br01_tag_with_attributes_takes_first_word():
    events = parse_all_ways("```python title=x.py\nprint(1)\n```\n")
    assert blocks(events)[0]["tag"] == "python"


def test_br01_untagged_guess():
    assert guess_language("print('untagged')") == "python"
    assert guess_language("ls") == "shell"
    assert guess_language("ls -la /tmp") == "shell"


# ---------------------------------------------------------------------------- BR-02


def test_br02_coarse_deltas_keep_language_word_in_code():
    events = parse(["```python\n", "print('python is fun')\n", "```"])
    assert blocks(events) == [{"kind": "code_end", "tag": "python", "code": "print('python is fun')", "closed": True}]
    assert parse_all_ways("```python\nprint('python is fun')\n```") == events


def test_br02_token_like_deltas():
    deltas = ["```", "python", "\n", "print", "('", "python", " is", " fun", "')", "\n", "```"]
    events = parse(deltas)
    assert blocks(events)[0]["code"] == "print('python is fun')"
    assert blocks(events)[0]["tag"] == "python"
    check_code_stream(events)


def test_br02_shell():
    events = parse(["```shell\n", "echo shell scripts are shell\n", "```"])
    assert blocks(events) == [{"kind": "code_end", "tag": "shell", "code": "echo shell scripts are shell", "closed": True}]


# ---------------------------------------------------------------------------- BR-03


def test_br03a_inline_code_is_prose():
    events = parse(["Run `", "ls`", " to list files."])
    assert events == [{"kind": "text", "content": "Run `ls` to list files."}]
    assert parse_all_ways("Run `ls` to list files.") == events


def test_br03a_backtick_ending_delta_is_flushed_at_finish():
    p = FenceParser()
    out = p.feed("Run `")
    out += p.feed("ls`")
    assert prose(out) == "Run `ls`"  # not held back: "R" already rules out a fence
    out += p.feed(" to list files.")
    out += p.finish()
    assert prose(out) == "Run `ls` to list files."


@pytest.mark.parametrize("reply", ["Let me check.\n```python\nprint(6*7)\n```", "Let me check.\n```python\nprint(6*7)\n```\n"])
def test_br03bd_whole_reply_in_one_delta(reply):
    events = parse([reply])
    assert prose(events).strip() == "Let me check."
    assert prose(events) == "Let me check.\n"
    assert blocks(events) == [{"kind": "code_end", "tag": "python", "code": "print(6*7)", "closed": True}]
    assert parse_all_ways(reply) == events


def test_br03c_closing_fence_shares_delta_with_code():
    events = parse(["```python\n", "print(1)\n", "print(2)\n```"])
    assert blocks(events) == [{"kind": "code_end", "tag": "python", "code": "print(1)\nprint(2)", "closed": True}]
    assert parse_all_ways("```python\nprint(1)\nprint(2)\n```") == events
    check_code_stream(events)


def test_br03_code_streams_before_the_block_ends():
    p = FenceParser()
    out = p.feed("```python\nprint(")
    assert {"kind": "code", "content": "print("} in out
    out = p.feed("1)\n``")
    assert out == [{"kind": "code", "content": "1)\n"}]  # the partial fence is held back
    out = p.feed("`")
    assert out == []
    assert p.finish() == [{"kind": "code_end", "tag": "python", "code": "print(1)", "closed": True}]


# ---------------------------------------------------------------------------- BR-04

BR04 = "First:\n```python\nx = 5\nprint(x)\n```\nThen:\n```python\nprint(x * 2)\n```\nDone."


def test_br04_several_blocks_and_prose_kept():
    events = parse_all_ways(BR04)
    assert [b["code"] for b in blocks(events)] == ["x = 5\nprint(x)", "print(x * 2)"]
    assert all(b["closed"] for b in blocks(events))
    assert prose(events) == "First:\nThen:\nDone."
    kinds = [e["kind"] for e in events]
    assert kinds == ["text", "code_start", "code", "code_end", "text", "code_start", "code", "code_end", "text"]
    assert events[4]["content"] == "Then:\n"
    assert events[8]["content"] == "Done."


# ---------------------------------------------------------------------------- BR-05

BR05_CODE = (
    "readme = '''# Demo\n```bash\npip install demo\n```\n'''\n"
    "with open('README.md', 'w') as fh:\n    fh.write(readme)\nprint(len(readme.splitlines()))"
)


def test_br05_nested_fences():
    events = parse_all_ways("````python\n" + BR05_CODE + "\n````")
    assert blocks(events) == [{"kind": "code_end", "tag": "python", "code": BR05_CODE, "closed": True}]
    assert len(BR05_CODE.splitlines()) == 8
    assert prose(events) == ""
    check_code_stream(events)


def test_br05_shorter_or_other_char_fence_does_not_close():
    events = parse_all_ways("~~~~\na\n~~~\n```\n````x\n~~~~~  \nafter")
    assert blocks(events) == [{"kind": "code_end", "tag": "", "code": "a\n~~~\n```\n````x", "closed": True}]
    assert prose(events) == "after"


def test_br05_closing_fence_with_trailing_text_is_code():
    events = parse_all_ways("```\n``` not a close\n```")
    assert blocks(events)[0]["code"] == "``` not a close"


def test_backtick_info_with_backtick_is_prose_but_tilde_allows_it():
    events = parse_all_ways("```a`b\nstill prose\n")
    assert blocks(events) == []
    assert prose(events) == "```a`b\nstill prose\n"
    events = parse_all_ways("~~~a`b\ncode\n~~~")
    assert blocks(events)[0] == {"kind": "code_end", "tag": "a`b", "code": "code", "closed": True}


def test_indented_fence_strips_indent_and_four_spaces_is_not_a_fence():
    events = parse_all_ways("  ```py\n  x = 1\n    y\n z\n  ```\nhi")
    assert blocks(events)[0]["code"] == "x = 1\n  y\nz"
    assert prose(events) == "hi"
    events = parse_all_ways("    ```py\n    x\n")
    assert blocks(events) == []
    assert prose(events) == "    ```py\n    x\n"


def test_crlf_line_endings():
    events = parse_all_ways("Hi\r\n```python\r\nprint(1)\r\n```\r\n")
    assert blocks(events)[0]["tag"] == "python"
    assert blocks(events)[0]["closed"] is True
    assert blocks(events)[0]["code"] == "print(1)\r"


# ---------------------------------------------------------------------------- BR-06


def test_br06a_unclosed_block_stop():
    text = "Running it now.\n```python\nprint('unterminated but complete')\n"
    events = parse_all_ways(text, "stop")
    assert prose(events) == "Running it now.\n"
    assert blocks(events) == [
        {"kind": "code_end", "tag": "python", "code": "print('unterminated but complete')", "closed": False}
    ]


def test_br06b_cut_by_length_is_marked_truncated():
    text = "```python\nfor i in range(3):\n    print('unter"
    events = parse_all_ways(text, "length")
    assert blocks(events) == [
        {
            "kind": "code_end",
            "tag": "python",
            "code": "for i in range(3):\n    print('unter",
            "closed": False,
            "truncated": True,
        }
    ]
    check_code_stream(events)


def test_br06_fence_line_as_last_line_opens_empty_block():
    events = parse_all_ways("Look:\n```python", "stop")
    assert prose(events) == "Look:\n"
    assert blocks(events) == [{"kind": "code_end", "tag": "python", "code": "", "closed": False}]


def test_br10c_empty_block():
    events = parse_all_ways("```python\n```")
    assert blocks(events) == [{"kind": "code_end", "tag": "python", "code": "", "closed": True}]


def test_parser_bad_input():
    p = FenceParser()
    assert p.feed(None) == []
    assert p.feed("") == []
    with pytest.raises(TypeError):
        p.feed(3)  # type: ignore[arg-type]
    assert p.finish() == []
    with pytest.raises(RuntimeError):
        p.feed("x")
    with pytest.raises(RuntimeError):
        p.finish()


def test_short_backtick_lines_are_prose():
    events = parse_all_ways("``\n`x`\n~~ y\n")
    assert prose(events) == "``\n`x`\n~~ y\n"


# ---------------------------------------------------------------------------- BR-07


BR07A = r"""{"language": "python", "code": "import re\nprint(re.findall(r'\d+', 'a1b22'))"}"""


def test_br07a_invalid_escape_kept_literally():
    assert repair_json(BR07A) == {"language": "python", "code": "import re\nprint(re.findall(r'\\d+', 'a1b22'))"}
    r = interpret_execute_call("execute", BR07A)
    assert r == {"ok": True, "language": "python", "code": "import re\nprint(re.findall(r'\\d+', 'a1b22'))"}
    assert r["code"] == "import re\nprint(re.findall(r'" + "\\" + "d+', 'a1b22'))"


def test_br07b_raw_control_characters():
    raw = '{"language": "python", "code": "x = 41\nprint(x + 1)"}'
    assert "\n" in raw  # a real 0x0A byte inside the string
    r = interpret_execute_call("execute", raw)
    assert r == {"ok": True, "language": "python", "code": "x = 41\nprint(x + 1)"}


def test_br07c_function_named_python_with_raw_code():
    r = interpret_execute_call("python", "import math\nprint(math.factorial(5))")
    assert r == {"ok": True, "language": "python", "code": "import math\nprint(math.factorial(5))"}
    r = interpret_execute_call("python", '{"code": "print(5)"}')
    assert r == {"ok": True, "language": "python", "code": "print(5)"}
    assert interpret_execute_call("bash", "echo hi") == {"ok": True, "language": "shell", "code": "echo hi"}


def test_br07d_missing_language_is_python():
    assert interpret_execute_call("execute", '{"code": "print(7)"}') == {"ok": True, "language": "python", "code": "print(7)"}


def test_br07e_unknown_function():
    r = interpret_execute_call("browse_web", '{"url": "x"}')
    assert r == {"ok": False, "error": "The function `browse_web` does not exist. Available: execute(language, code)."}


def test_nameless_call_with_code_is_execute():
    assert interpret_execute_call("", '{"code": "print(1)"}') == {"ok": True, "language": "python", "code": "print(1)"}
    r = interpret_execute_call("", '{"url": "x"}')
    assert r == {"ok": False, "error": "The function `(no name)` does not exist. Available: execute(language, code)."}


def test_br07_missing_code_and_hopeless_json_are_errors():
    r = interpret_execute_call("execute", '{"language": "python"}')
    assert r["ok"] is False and "`code`" in r["error"]
    r = interpret_execute_call("execute", "not json at all")
    assert r["ok"] is False and "JSON" in r["error"]
    r = interpret_execute_call("execute", "[1, 2]")
    assert r["ok"] is False


def test_execute_name_variants_and_languages():
    args = '{"language": "bash", "code": "echo 1"}'
    for name in ("execute", "executeexecute", "functions.execute", "executeexecuteexecute", " Execute "):
        assert interpret_execute_call(name, args) == {"ok": True, "language": "shell", "code": "echo 1"}
    r = interpret_execute_call("execute", '{"language": "PowerShell", "code": "Get-ChildItem"}')
    assert r == {"ok": True, "language": "powershell", "code": "Get-ChildItem"}
    r = interpret_execute_call("execute", '{"language": "cobol", "code": "x"}')
    assert r == {"ok": True, "language": "cobol", "code": "x"}


def test_repair_json_levels():
    assert repair_json('{"a": 1}') == {"a": 1}
    assert repair_json('{"a": "x\ty"}') == {"a": "x\ty"}
    assert repair_json(r'{"a": "C:\Users\d"}') == {"a": "C:\\Users\\d"}
    assert repair_json(r'{"a": "ok\\n", "b": "\u00e9"}') == {"a": "ok\\n", "b": "é"}
    assert repair_json('{"a": 1} trailing words') == {"a": 1}
    assert repair_json('{"a": 1}{"a": 1}') == {"a": 1}
    assert repair_json('Sure: {"code": "print(1)"} done') == {"code": "print(1)"}
    assert repair_json("") == {}
    assert repair_json("   ") == {}
    assert repair_json('{"a": ') is None
    assert repair_json("nonsense") is None
    assert repair_json("[1]") is None
    assert repair_json(None) is None  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- BR-08 / BR-09


def test_br08_fields_repeated_in_every_delta():
    deltas = [
        [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "execute", "arguments": ""}}],
        [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "execute", "arguments": '{"language": "pyth'}}],
        [{"index": 0, "function": {"arguments": 'on", "code": "print(\\"frag'}}],
        [{"index": 0, "function": {"arguments": 'ment-ok\\")"}'}}],
    ]
    acc = ToolCallAccumulator()
    for d in deltas:
        acc.add(d)
    calls = acc.calls()
    assert calls == [
        {"index": 0, "id": "call_1", "name": "execute", "arguments": '{"language": "python", "code": "print(\\"fragment-ok\\")"}'}
    ]
    assert json.loads(calls[0]["arguments"]) == {"language": "python", "code": 'print("fragment-ok")'}
    r = interpret_execute_call(calls[0]["name"], calls[0]["arguments"])
    assert r == {"ok": True, "language": "python", "code": 'print("fragment-ok")'}


def test_br08_litellm_style_objects():
    def obj(index, id=None, name=None, arguments=None):
        return SimpleNamespace(index=index, id=id, type="function" if id else None,
                               function=SimpleNamespace(name=name, arguments=arguments))

    acc = ToolCallAccumulator()
    acc.add([obj(0, "call_1", "execute", "")])
    acc.add([obj(0, None, None, '{"code": ')])
    acc.add([obj(0, None, None, '"print(3)"}')])
    assert acc.calls() == [{"index": 0, "id": "call_1", "name": "execute", "arguments": '{"code": "print(3)"}'}]
    acc.add(None)
    acc.add([])
    assert len(acc) == 1


def test_br09_parallel_calls_by_index():
    deltas = [
        [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "execute", "arguments": ""}}],
        [{"index": 0, "function": {"arguments": "{\"language\": \"python\", \"code\": \"print('A')\"}"}}],
        [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "execute", "arguments": ""}}],
        [{"index": 1, "function": {"arguments": "{\"language\": \"shell\", \"code\": \"echo B\"}"}}],
    ]
    acc = ToolCallAccumulator()
    for d in deltas:
        acc.add(d)
    calls = acc.calls()
    assert [c["id"] for c in calls] == ["call_a", "call_b"]
    assert [interpret_execute_call(c["name"], c["arguments"]) for c in calls] == [
        {"ok": True, "language": "python", "code": "print('A')"},
        {"ok": True, "language": "shell", "code": "echo B"},
    ]


def test_br09_out_of_order_indices_and_missing_index():
    acc = ToolCallAccumulator()
    acc.add([{"index": 1, "id": "b", "function": {"name": "execute", "arguments": "{}"}}])
    acc.add([{"index": 0, "id": "a", "function": {"name": "execute", "arguments": "{}"}}])
    assert [c["id"] for c in acc.calls()] == ["a", "b"]
    acc2 = ToolCallAccumulator()
    acc2.add([{"id": "x", "function": {"name": "execute", "arguments": '{"co'}}])
    acc2.add([{"function": {"arguments": 'de": "1"}'}}])
    acc2.add([{"id": "y", "function": {"name": "execute", "arguments": "{}"}}])
    assert [(c["id"], c["arguments"]) for c in acc2.calls()] == [("x", '{"code": "1"}'), ("y", "{}")]


# ---------------------------------------------------------------------------- hallucinated shapes


def test_hallucinated_functions_execute():
    text = 'Sure.\nfunctions.execute({"language": "python", "code": "print(1)"})\nand execute({"code": "print(2)"})'
    assert extract_hallucinated_calls(text) == [
        {"language": "python", "code": "print(1)"},
        {"language": "python", "code": "print(2)"},
    ]


def test_hallucinated_json_body():
    assert extract_hallucinated_calls('{"language": "shell", "code": "echo hi"}') == [{"language": "shell", "code": "echo hi"}]
    assert extract_hallucinated_calls('```json\n{"language": "python", "code": "print(\\"x\\")"}\n```') == [
        {"language": "python", "code": 'print("x")'}
    ]
    assert extract_hallucinated_calls(r'functions.execute({"language": "python", "code": "print(r\"\d\")"})') == [
        {"language": "python", "code": 'print(r"\\d")'}
    ]


def test_hallucinated_none():
    assert extract_hallucinated_calls("Just prose with execute mentioned.") == []
    assert extract_hallucinated_calls('{"name": "x", "value": 3}') == []
    assert extract_hallucinated_calls("") == []
    assert extract_hallucinated_calls(None) == []  # type: ignore[arg-type]


# ---------------------------------------------------------------------------- guess_language


@pytest.mark.parametrize(
    "code, expected",
    [
        ("ls", "shell"),
        ("cd /tmp && ls", "shell"),
        ("pip install requests", "shell"),
        ("pip3 install x", "shell"),
        ("git status", "shell"),
        ("echo hi", "shell"),
        ("mkdir -p a/b", "shell"),
        ("curl -s http://127.0.0.1", "shell"),
        ("apt-get install -y jq", "shell"),
        ("python3 script.py", "shell"),
        ("python -m pip list", "shell"),
        ("./run.sh --fast", "shell"),
        ("sudo apt update", "shell"),
        ("#!/bin/bash\nx=1", "shell"),
        ("# list files\nls -la", "shell"),
        ("$ ls", "shell"),
        ("print('untagged')", "python"),
        ("import os\nos.listdir()", "python"),
        ("cat = 3\nprint(cat)", "python"),
        ("find(x)", "python"),
        ("head: int = 1", "python"),
        ("x = 1", "python"),
        ("#!/usr/bin/env python3\nprint(1)", "python"),
        ("", "python"),
        ("for i in range(3): print(i)", "python"),
    ],
)
def test_guess_language(code, expected):
    assert guess_language(code) == expected


# ---------------------------------------------------------------------------- any chunking

CORPUS = [
    BR04,
    "````python\n" + BR05_CODE + "\n````\nAfter.",
    "Run `ls` to list files.\n``not a fence``\n~~~\nx\n~~~",
    "Intro\n  ```bash\n  ls -la\n   ```\n\n```\nprint('untagged')\n```\n",
    "```python\nfor i in range(3):\n    print('unter",
    "text ``` inline ``` text\n```js\nconsole.log('```')\n```",
]


@pytest.mark.parametrize("text", CORPUS)
def test_random_chunkings_agree(text):
    import random

    rng = random.Random(1234)
    expected = parse([text])
    for finish in ("stop", "length"):
        expected = parse([text], finish)
        for _ in range(200):
            cuts = sorted(rng.sample(range(1, len(text)), k=min(len(text) - 1, rng.randint(1, 12))))
            pieces = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
            got = parse(pieces, finish)
            assert got == expected, pieces
            check_code_stream(got)
    # prose + code contents reconstruct the reply around the fence lines
    events = parse([text])
    assert all(e["kind"] != "text" or e["content"] for e in events)
