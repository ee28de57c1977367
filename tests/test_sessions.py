"""Session store: BR-28 round trip and damage, two writers, search, resume, exports, imports."""

from __future__ import annotations

import base64
import json
import multiprocessing
import os
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import time
import zlib
import struct
from pathlib import Path

import pytest

from oitui.core.sessions import (
    AmbiguousSession,
    SessionImportError,
    SessionNotFound,
    SessionStore,
    sanitize,
)
from oitui.core.errors import OituiError
from support.scripted_server import scripted_server, scripted_server_module  # noqa: F401  (fixtures)

PY = sys.executable


def _png_1x1() -> str:
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0))
    raw += chunk(b"IDAT", zlib.compress(b"\x00\xff\x00\x00")) + chunk(b"IEND", b"")
    return base64.b64encode(raw).decode()


BR26A = (
    "import sys\n"
    "for p in (10, 50, 100):\n"
    "    sys.stdout.write(f'\\rProgress {p}%')\n"
    "    sys.stdout.flush()\n"
    "print()\n"
    "print('\\x1b[31mRED\\x1b[0m done')\n"
)
PNG = _png_1x1()

#: The BR-28 scripted session as the core stores it (outputs already as a terminal shows them).
BR28_MESSAGES = [
    {"role": "user", "type": "message", "content": "héllo ✅ — test"},
    {"role": "assistant", "type": "message", "content": "Running."},
    {"role": "assistant", "type": "code", "format": "python", "content": BR26A, "call_id": "call_1",
     "tool": {"name": "execute", "arguments": {"language": "python", "code": BR26A}}},
    {"role": "computer", "type": "console", "format": "output", "content": "Progress 100%\nRED done\n",
     "call_id": "call_1"},
    {"role": "assistant", "type": "code", "format": "shell", "content": "echo 'naïve — ✅'", "call_id": "call_2"},
    {"role": "computer", "type": "console", "format": "output", "content": "naïve — ✅\n", "call_id": "call_2"},
    {"role": "assistant", "type": "code", "format": "python",
     "content": "from IPython.display import Image, display\ndisplay(Image(data=b'...'))", "call_id": "call_3"},
    {"role": "computer", "type": "image", "format": "base64.png", "content": PNG, "call_id": "call_3"},
    {"role": "assistant", "type": "reasoning", "content": "Think — ✓", "signature": "sig=="},
    {"role": "assistant", "type": "message", "content": "DONE."},
]


@pytest.fixture
def store(tmp_path):
    return SessionStore(tmp_path / "sessions", outputs_dir=tmp_path / "outputs")


def _save(store, messages, **kw):
    s = store.create(model=kw.pop("model", "gpt-4o"), cwd="/work/x", **kw)
    for m in messages:
        s.append(m)
    return s


def _load_in_fresh_process(path: Path) -> list:
    """Read a session file in another Python process (json.load per line, strict UTF-8)."""
    code = (
        "import json, sys\n"
        "data = open(sys.argv[1], 'rb').read().decode('utf-8')\n"
        "from oitui.core.sessions import SessionStore\n"
        "from pathlib import Path\n"
        "p = Path(sys.argv[1])\n"
        "lines = [json.loads(l) for l in data.splitlines()]\n"
        "s = SessionStore(p.parent).open(p.stem)\n"
        "json.dump({'messages': s.messages, 'lines': len(lines), 'warnings': s.warnings}, sys.stdout)\n"
    )
    out = subprocess.run([PY, "-c", code, str(path)], capture_output=True, timeout=120, check=True)
    return json.loads(out.stdout)


def test_br28_round_trip_unicode_code_outputs(store):
    s = _save(store, BR28_MESSAGES)
    assert s.messages == BR28_MESSAGES
    # (a) a fresh process loads a deep-equal message list
    loaded = _load_in_fresh_process(s.path)
    assert loaded["messages"] == BR28_MESSAGES and loaded["warnings"] == []
    assert store.open(s.id).messages == BR28_MESSAGES
    # ... and through the JSON export
    exported = json.loads(store.export(s.id, "json"))
    assert exported["lmc_version"] == 1 and exported["messages"] == BR28_MESSAGES
    assert exported["session"]["id"] == s.id and exported["session"]["title"] == "héllo ✅ — test"
    # importing that export gives the same conversation again
    tmp = s.path.parent.parent / "export.json"
    tmp.write_text(store.export(s.id, "json"), encoding="utf-8")
    again = store.import_file(tmp)
    assert again.id != s.id and store.open(again.id).messages == BR28_MESSAGES


def test_br28_file_is_clean_utf8_json(store):
    dirty = [
        {"role": "user", "type": "message", "content": "bad \udcff surrogate and \x1b[1mbold\x1b[0m ✅"},
        {"role": "computer", "type": "console", "format": "output",
         "content": "\x1b]0;title\x07\x1b[32mgreen\x1b[0m\rdone \ud800", "call_id": "c"},
        {"role": "assistant", "type": "tool_call", "format": "Read", "content": {"path": b"/tmp/\xff\xfe"},
         "call_id": "t"},
        {"role": "computer", "type": "image", "format": "base64.png", "content": base64.b64decode(PNG)},
        {"role": "assistant", "type": "message", "content": float("nan")},
    ]
    s = _save(store, BR28_MESSAGES + dirty)
    raw = s.path.read_bytes()
    text = raw.decode("utf-8")  # (b) valid UTF-8 ...
    assert b"\x1b" not in raw and b"\x00" not in raw
    assert not re.search(r"\\u[dD][89abAB][0-9a-fA-F]{2}", text)  # no escaped lone surrogates
    assert not re.search(r"[\ud800-\udfff]", text)
    assert raw.endswith(b"\n")
    for line in text.splitlines():
        json.loads(line)  # ... JSON per line
    stored = s.messages[len(BR28_MESSAGES):]
    assert stored[0]["content"] == "bad \ufffd surrogate and bold ✅"
    assert stored[1]["content"] == "green\rdone \ufffd"
    assert stored[2]["content"] == {"path": "/tmp/\ufffd\ufffd"}
    assert stored[3]["content"] == PNG  # image bytes become base64
    assert stored[4]["content"] is None
    assert _load_in_fresh_process(s.path)["messages"] == s.messages


def test_api_keys_are_redacted(store, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-abcdefghijklmnop")
    store.api_key = "cfg-key-0123456789"
    s = _save(store, [{"role": "user", "type": "message", "content": "key sk-test-abcdefghijklmnop here"},
                      {"role": "computer", "type": "console", "format": "output",
                       "content": "OPENAI_API_KEY=sk-test-abcdefghijklmnop cfg-key-0123456789"}])
    raw = s.path.read_text()
    assert "sk-test-abcdefghijklmnop" not in raw and "cfg-key-0123456789" not in raw
    assert s.messages[0]["content"] == "key [REDACTED] here"
    assert "[REDACTED] [REDACTED]" in s.messages[1]["content"]
    assert sanitize("x sk-test-abcdefghijklmnop") == "x [REDACTED]"


def test_br28_truncated_copy_loads_with_warning_and_is_never_shrunk(store, tmp_path):
    s = _save(store, BR28_MESSAGES)
    original = s.path.read_bytes()
    other = SessionStore(tmp_path / "copy")
    other.dir.mkdir()
    damaged = other.dir / s.path.name
    damaged.write_bytes(original[:-20])  # (c) the last 20 bytes removed
    before = damaged.read_bytes()

    infos = other.list()
    assert [i.id for i in infos] == [s.id]
    assert infos[0].error and s.path.name in infos[0].error
    loaded = other.open(s.id)
    assert loaded.messages == BR28_MESSAGES[:-1]  # the valid prefix
    assert loaded.warnings and "last line" in loaded.warnings[0] and s.path.name in loaded.warnings[0]
    assert damaged.read_bytes() == before  # reading never writes
    assert other.search("Progress")[0].info.id == s.id

    # continuing the damaged session keeps every byte that was there
    loaded.append({"role": "user", "type": "message", "content": "after crash"})
    after = damaged.read_bytes()
    assert after.startswith(before) and len(after) > len(before)
    again = other.open(s.id)
    assert again.messages == BR28_MESSAGES[:-1] + [{"role": "user", "type": "message", "content": "after crash"}]
    assert s.path.read_bytes() == original

    # a damaged line in the middle and a garbage file never stop list or search
    mid = other.dir / "midbad00.jsonl"
    lines = original.split(b"\n")
    lines[3] = lines[3][:10]
    mid.write_bytes(b"\n".join(lines))
    (other.dir / "garbage0.jsonl").write_bytes(b"\x00\xff\xfe not json at all")
    (other.dir / "empty000.jsonl").write_bytes(b"")
    infos = {i.id: i for i in other.list()}
    assert set(infos) == {s.id, "midbad00", "garbage0", "empty000"}
    assert "line 4" in infos["midbad00"].error and infos["garbage0"].error
    assert len(other.open("midbad00").messages) == len(BR28_MESSAGES) - 1
    assert other.open("garbage0").messages == []
    assert {h.info.id for h in other.search("naïve")} == {s.id, "midbad00"}


def test_br28_older_formats_are_migrated(store):
    store.dir.mkdir(parents=True)
    # a header without lmc_version (format 0) and Open Interpreter 0.1 style messages
    old = store.dir / "old00001.jsonl"
    old.write_text("\n".join(json.dumps(x) for x in [
        {"session": {"title": "old one", "created": "2024-01-02T03:04:05+00:00", "model": "gpt-4"}},
        {"role": "user", "message": "plot it"},
        {"role": "assistant", "message": "Sure.", "language": "python", "code": "print(7)", "output": "7\n"},
    ]) + "\n", encoding="utf-8")
    # Open Interpreter's saved conversation: a JSON list
    oi = store.dir / "oilist01.jsonl"
    oi.write_text(json.dumps([{"role": "user", "type": "message", "content": "hi"},
                              {"role": "assistant", "type": "code", "format": "python", "content": "1+1"},
                              {"role": "computer", "type": "console", "format": "output", "content": "2"}]))
    s = store.open("old0")
    assert s.meta["title"] == "old one" and s.meta["model"] == "gpt-4" and s.meta["lmc_version"] == 1
    assert s.messages == [
        {"role": "user", "type": "message", "content": "plot it"},
        {"role": "assistant", "type": "message", "content": "Sure."},
        {"role": "assistant", "type": "code", "format": "python", "content": "print(7)"},
        {"role": "computer", "type": "console", "format": "output", "content": "7\n"},
    ]
    o = store.open("oilist")
    assert [m["content"] for m in o.messages] == ["hi", "1+1", "2"]
    infos = {i.id: i for i in store.list()}
    assert infos["old00001"].title == "old one" and infos["old00001"].turns == 1 and infos["oilist01"].turns == 1
    # writing to a migrated file first saves the original beside it, then rewrites it as v1
    before = old.read_bytes()
    s.append({"role": "user", "type": "message", "content": "more"})
    assert (store.dir / "old00001.jsonl.bak").read_bytes() == before
    first = json.loads(old.read_text().splitlines()[0])
    assert first["lmc_version"] == 1 and first["session"]["title"] == "old one"
    assert store.open("old00001").messages == s.messages and len(s.messages) == 5


def _writer(sessions_dir: str, shared_id: str, tag: str, n: int) -> None:
    store = SessionStore(sessions_dir)
    shared = store.open(shared_id)
    own = store.create(model=tag)
    for i in range(n):
        shared.append({"role": "computer", "type": "console", "format": "output", "content": f"{tag} line {i} " + "x" * 300})
        own.append({"role": "user", "type": "message", "content": f"{tag} own {i}"})
        if i % 25 == 0:
            store.search(f"{tag} line")
            store.list()


def test_two_processes_writing_at_once(store):
    shared = _save(store, [{"role": "user", "type": "message", "content": "shared start"}])
    ctx = multiprocessing.get_context("spawn")
    n = 150
    procs = [ctx.Process(target=_writer, args=(str(store.dir), shared.id, tag, n)) for tag in ("alpha", "bravo")]
    for p in procs:
        p.start()
    for p in procs:
        p.join(180)
        assert p.exitcode == 0
    lines = shared.path.read_text(encoding="utf-8").splitlines()
    for line in lines:
        json.loads(line)
    s = store.open(shared.id)
    assert s.warnings == []
    contents = [m["content"] for m in s.messages[1:]]
    for tag in ("alpha", "bravo"):
        mine = [c for c in contents if c.startswith(tag)]
        assert mine == [f"{tag} line {i} " + "x" * 300 for i in range(n)]
    infos = store.list()
    assert len(infos) == 3 and all(i.error is None for i in infos)
    assert {i.model for i in infos} == {"gpt-4o", "alpha", "bravo"}
    assert {i.turns for i in infos} == {1, n}
    hits = store.search("bravo line 149")
    assert [h.info.id for h in hits] == [shared.id]


def test_search_finds_word_only_in_program_output(store):
    a = _save(store, [
        {"role": "user", "type": "message", "content": "list the animals"},
        {"role": "assistant", "type": "code", "format": "python", "content": "print(open('zoo.txt').read())",
         "call_id": "c1"},
        {"role": "computer", "type": "console", "format": "output", "content": "llama\nquokka\nwombat\n",
         "call_id": "c1"},
        {"role": "assistant", "type": "message", "content": "Three animals."},
    ])
    b = _save(store, [{"role": "user", "type": "message", "content": "something else entirely"}])
    hits = store.search("quokka")
    assert len(hits) == 1 and hits[0].info.id == a.id and hits[0].message_index == 2
    assert "quokka" in hits[0].snippet and hits[0].info.title == "list the animals"
    assert store.open(a.id).messages[hits[0].message_index]["type"] == "console"
    assert [h.info.id for h in store.search("zoo.txt")] == [a.id]  # code is searched too
    assert [h.info.id for h in store.search("ENTIRELY")] == [b.id]
    assert [h.info.id for h in store.search("wom")] == [a.id]  # the last word matches as a prefix
    for query in ['"', '"unbalanced AND ( OR * NEAR', "", "-", "NOT", "a:b", "col:quokka", "'; DROP TABLE x; --",
                  "\\", "*", "^quokka", "\udcff", "ünïcödé"]:
        store.search(query)  # never raises
    assert [h.info.id for h in store.search("NOT quokka")] == []  # NOT is a plain word here
    # the index is a cache: removed, it is rebuilt from the files
    store.index_path.unlink()
    assert [h.info.id for h in store.search("quokka")] == [a.id]
    # stale: another writer appended after the last sync
    other = SessionStore(store.dir).open(b.id)
    other.append({"role": "computer", "type": "console", "format": "output", "content": "platypus"})
    assert [(h.info.id, h.message_index) for h in store.search("platypus")] == [(b.id, 1)]
    # a damaged index file is rebuilt too
    store.index_path.write_bytes(b"this is not sqlite" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(store.index_path) + suffix).unlink(missing_ok=True)
    assert [h.info.id for h in store.search("platypus")] == [b.id]


def test_resume_continues_with_same_history(store):
    s = _save(store, BR28_MESSAGES[:6])
    s.update_meta(prompt_tokens=120, completion_tokens=30, cost=0.0012)
    resumed = store.open("last")
    assert resumed.id == s.id and resumed.messages == s.messages
    assert resumed.meta["prompt_tokens"] == 120 and resumed.meta["cost"] == 0.0012
    resumed.append({"role": "user", "type": "message", "content": "continue"})
    again = store.open(s.id[:4])
    assert again.messages == BR28_MESSAGES[:6] + [{"role": "user", "type": "message", "content": "continue"}]
    assert store.list()[0].turns == 2


def test_ids_prefix_last_ambiguous_delete(store, tmp_path):
    with pytest.raises(SessionNotFound):
        store.open("last")
    a = _save(store, [{"role": "user", "type": "message", "content": "first"}])
    time.sleep(0.01)
    b = _save(store, [{"role": "user", "type": "message", "content": "second"}])
    assert re.fullmatch(r"[0-9a-z]{8}", a.id) and a.path == store.dir / f"{a.id}.jsonl"
    assert [i.id for i in store.list()] == [b.id, a.id]  # newest first
    assert store.open("last").id == b.id
    assert store.open(a.id.upper()).id == a.id
    with pytest.raises(SessionNotFound):
        store.open("zzzzzzzzz")
    # two ids with a common prefix
    for sid in ("abcd0001", "abcd0002"):
        shutil.copy(a.path, store.dir / f"{sid}.jsonl")
    with pytest.raises(AmbiguousSession) as e:
        store.open("abcd")
    assert e.value.matches == ["abcd0001", "abcd0002"]
    assert isinstance(e.value, OituiError)
    assert store.open("abcd0002").id == "abcd0002"
    (store.outputs_dir / b.id).mkdir(parents=True)
    (store.outputs_dir / b.id / "plot.png").write_bytes(b"x")
    assert store.delete(b.id[:6]) == b.id
    assert not b.path.exists() and not (store.outputs_dir / b.id).exists()
    assert b.id not in [i.id for i in store.list()]
    assert store.search("second") == []


def test_unused_session_leaves_no_file_and_update_meta(store):
    s = store.create(model="m")
    assert not s.path.exists() and store.list() == []
    s.update_meta(model="m2")
    assert not s.path.exists()
    s.append({"role": "user", "type": "message", "content": "go"})
    s.append({"role": "computer", "type": "console", "format": "active_line", "content": 3})  # ephemeral
    s.update_meta(prompt_tokens=5)
    s.update_meta(title="Renamed")
    lines = [json.loads(l) for l in s.path.read_text().splitlines()]
    assert lines[0]["lmc_version"] == 1 and lines[0]["session"]["model"] == "m2"
    assert lines[1] == {"role": "user", "type": "message", "content": "go"}
    assert lines[2]["meta"]["prompt_tokens"] == 5 and len(lines) == 4
    o = store.open(s.id)
    assert o.meta["title"] == "Renamed" and o.meta["prompt_tokens"] == 5 and o.meta["model"] == "m2"
    assert store.list()[0].title == "Renamed"
    with pytest.raises(ValueError):
        s.update_meta(id="x")


def test_replace_messages_is_atomic(store):
    s = _save(store, BR28_MESSAGES)
    s.replace_messages(BR28_MESSAGES[:2])
    assert store.open(s.id).messages == BR28_MESSAGES[:2]
    assert not [p for p in store.dir.iterdir() if p.name.endswith(".tmp")]
    s.append({"role": "user", "type": "message", "content": "after undo"})
    assert store.open(s.id).messages == BR28_MESSAGES[:2] + [{"role": "user", "type": "message",
                                                                "content": "after undo"}]
    assert store.search("Progress") == [] and store.search("undo")[0].message_index == 2


def test_append_is_fast(store):
    s = _save(store, [{"role": "user", "type": "message", "content": "go"}])
    times = []
    for i in range(50):
        t = time.perf_counter()
        s.append({"role": "computer", "type": "console", "format": "output", "content": f"line {i} " * 20})
        times.append(time.perf_counter() - t)
    assert statistics.median(times) < 0.05  # goal 5 ms (see benchmarks/bench_sessions.py); generous here


def test_export_markdown_and_oi(store):
    s = _save(store, BR28_MESSAGES + [{"role": "assistant", "type": "tool_call", "format": "Read",
                                       "content": {"path": "a.txt"}, "call_id": "t1"},
                                      {"role": "computer", "type": "error", "content": "blocked", "kind": "policy"}])
    md = store.export(s.id, "md")
    assert md.startswith("# héllo ✅ — test\n")
    assert "```python\n" + BR26A + "```" in md
    assert "```shell\necho 'naïve — ✅'\n```" in md
    assert "```text\nnaïve — ✅\n```" in md and "![image](data:image/png;base64," + PNG + ")" in md
    assert "DONE." in md and "`Read`" in md and "blocked" in md
    oi = json.loads(store.export(s.id, "oi"))
    assert all(set(m) <= {"role", "type", "format", "content"} for m in oi)
    assert oi[0] == {"role": "user", "type": "message", "content": "héllo ✅ — test"}
    assert {"role": "assistant", "type": "code", "format": "shell", "content": "echo 'naïve — ✅'"} in oi
    assert not any(m["type"] == "reasoning" for m in oi)
    # Open Interpreter's JSON imports as a new session
    path = store.dir.parent / "oi.json"
    path.write_text(json.dumps(oi), encoding="utf-8")
    imported = store.import_file(path)
    assert store.open(imported.id).messages[:3] == [{k: v for k, v in m.items() if k in ("role", "type", "format", "content")}
                                                     for m in BR28_MESSAGES[:3]]
    with pytest.raises(ValueError):
        store.export(s.id, "pdf")
    bad = store.dir.parent / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(SessionImportError):
        store.import_file(bad)
    with pytest.raises(SessionImportError):
        store.import_file(store.dir.parent / "missing.json")


def test_export_ipynb_opens_with_nbformat_and_cells_run(store, tmp_path):
    import nbformat

    messages = [
        {"role": "user", "type": "message", "content": "compute things"},
        {"role": "assistant", "type": "message", "content": "First a sum."},
        {"role": "assistant", "type": "code", "format": "python", "content": "x = 20 + 22\nprint('sum', x)",
         "call_id": "c1"},
        {"role": "computer", "type": "console", "format": "output", "content": "sum 42\n", "call_id": "c1"},
        {"role": "assistant", "type": "code", "format": "shell", "content": "echo shell-ok", "call_id": "c2"},
        {"role": "computer", "type": "console", "format": "output", "content": "shell-ok\n", "call_id": "c2"},
        {"role": "assistant", "type": "code", "format": "python", "content": "print('naïve ✅', x * 2)",
         "call_id": "c3"},
        {"role": "computer", "type": "console", "format": "output", "content": "naïve ✅ 84\n", "call_id": "c3"},
        {"role": "computer", "type": "image", "format": "base64.png", "content": PNG, "call_id": "c3"},
        {"role": "assistant", "type": "message", "content": "DONE."},
    ]
    s = _save(store, messages)
    nb = nbformat.reads(store.export(s.id, "ipynb"), as_version=4)
    nbformat.validate(nb)
    kinds = [c.cell_type for c in nb.cells]
    assert kinds == ["markdown", "code", "code", "code", "markdown"]
    assert "compute things" in nb.cells[0].source and "First a sum." in nb.cells[0].source
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert code[0].source == "x = 20 + 22\nprint('sum', x)"
    assert code[0].outputs[0]["output_type"] == "stream" and code[0].outputs[0]["text"] == "sum 42\n"
    assert code[1].source == "%%bash\necho shell-ok"
    assert code[2].outputs[1]["output_type"] == "display_data" and code[2].outputs[1]["data"]["image/png"] == PNG
    # the Python cells run and print what was recorded
    py_cells = [c for c in code if not c.source.startswith("%%")]
    script = tmp_path / "cells.py"
    script.write_text("\n".join(c.source for c in py_cells) + "\n", encoding="utf-8")
    run = subprocess.run([PY, str(script)], capture_output=True, timeout=120,
                         env={**os.environ, "PYTHONIOENCODING": "utf-8"})
    assert run.returncode == 0, run.stderr
    expected = "".join(o["text"] for c in py_cells for o in c.outputs if o["output_type"] == "stream")
    assert run.stdout.decode("utf-8") == expected == "sum 42\nnaïve ✅ 84\n"
    # the shell cell's body runs in bash with the recorded output
    bash = subprocess.run(["bash", "-c", code[1].source.split("\n", 1)[1]], capture_output=True, text=True, timeout=60)
    assert bash.stdout == code[1].outputs[0]["text"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores file permissions")
def test_read_only_folder_still_lists_and_searches(store):
    s = _save(store, [{"role": "user", "type": "message", "content": "readonly wombat"}])
    os.chmod(store.dir, 0o555)
    try:
        assert [i.id for i in store.list()] == [s.id]
        assert [h.info.id for h in store.search("wombat")] == [s.id]
    finally:
        os.chmod(store.dir, 0o755)


def test_works_without_usable_index(store, monkeypatch):
    s = _save(store, [{"role": "user", "type": "message", "content": "first"},
                      {"role": "computer", "type": "console", "format": "output", "content": "Naïve wombat"}])

    def broken(self):
        raise sqlite3.OperationalError("unable to open database file")

    monkeypatch.setattr(SessionStore, "_open_index", broken)
    infos = store.list()
    assert [(i.id, i.turns, i.title) for i in infos] == [(s.id, 1, "first")]
    hits = store.search("naive WOMB")
    assert [(h.info.id, h.message_index, h.snippet) for h in hits] == [(s.id, 1, "Naïve wombat")]


def test_br28_end_to_end_with_the_engine(store, scripted_server, tmp_path):
    """BR-28 (a) with the real engine: the scripted session is saved as it goes; a fresh process
    loads the same list; resuming sends the model the same history as continuing would."""
    from support.core_helpers import make_interpreter
    from support.scripted_server import text_reply

    scripted_server.script = [
        text_reply("Running.\n```python\n" + BR26A + "```\n"),
        text_reply("```bash\necho 'naïve — ✅'\n```\n"),
        text_reply("DONE."),
        text_reply("OK one."),
        text_reply("OK two."),
    ]
    interp = make_interpreter(scripted_server, str(tmp_path))
    session = store.create(model="openai/scripted", cwd=str(tmp_path))
    interp.session = session
    interp2 = None
    try:
        interp.chat("héllo ✅ — test", display=False)
        saved = json.loads(json.dumps(interp.messages))
        assert any(m.get("content") == "naïve — ✅\n" or "naïve — ✅" in str(m.get("content")) for m in saved
                   if m.get("type") == "console")
        loaded = _load_in_fresh_process(session.path)
        assert loaded["messages"] == saved and loaded["warnings"] == []
        raw = session.path.read_bytes()
        raw.decode("utf-8")
        assert b"\x1b" not in raw

        # continuing in the same process ...
        interp.chat("continue", display=False)
        continued = scripted_server.requests[-1]["messages"]
        # ... and resuming from the file in a new engine send the same history
        resumed = store.open(session.id)
        assert resumed.messages[: len(saved)] == saved
        interp2 = make_interpreter(scripted_server, str(tmp_path))
        interp2.messages = list(resumed.messages[: len(saved)])
        interp2.chat("continue", display=False)
        assert scripted_server.requests[-1]["messages"] == continued
    finally:
        interp.terminate()
        if interp2 is not None:
            interp2.terminate()


def test_reindex_catches_edits_made_outside_oitui(store):
    s = _save(store, [{"role": "user", "type": "message", "content": "before"}])
    assert [h.info.id for h in store.search("before")] == [s.id]
    with open(s.path, "a", encoding="utf-8") as f:  # an edit by another tool, in place
        f.write(json.dumps({"role": "assistant", "type": "message", "content": "hippogriff"}) + "\n")
    store.reindex()
    assert [(h.info.id, h.message_index) for h in store.search("hippogriff")] == [(s.id, 1)]
    assert store.reindex(full=True) == 1
    assert [h.info.id for h in store.search("hippogriff")] == [s.id]


def test_sessions_folder_index_and_files_are_private(tmp_path):
    """Conversations and the search index (which holds their full text) are not readable by
    other local users, whatever the umask."""
    import stat

    from oitui.core.sessions import SessionStore

    old = os.umask(0o022)
    try:
        store = SessionStore(tmp_path / "sessions")
        s = store.create(model="openai/x")
        s.append({"role": "user", "type": "message", "content": "private words"})
        assert store.search("private")
    finally:
        os.umask(old)
    mode = lambda p: stat.S_IMODE(p.stat().st_mode)  # noqa: E731
    assert mode(tmp_path / "sessions") == 0o700
    assert mode(s.path) == 0o600
    assert mode(tmp_path / "sessions" / "index.sqlite") == 0o600
