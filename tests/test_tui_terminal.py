"""Terminal hygiene helpers (oitui/tui/terminal.py) and the clipboard helper (oitui/tui/clipboard.py).

TUI-11 (b): stray input bytes are fed to the same decoder + Textual parser the SafeLinuxDriver
uses; (a) signal handlers end a running app with 128 + n; (c) restore_terminal on a real pty.
The end-to-end versions (real app in tmux) are in test_tui_tmux.py.
"""

from __future__ import annotations

import asyncio
import codecs
import io
import os
import signal
import termios
import time
import tty

import pytest

pytest.importorskip("textual")

from textual import events  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.widgets import Input  # noqa: E402

from oitui.tui import terminal  # noqa: E402
from oitui.tui.clipboard import copy_text  # noqa: E402
from oitui.tui.terminal import (  # noqa: E402
    RESET_SEQUENCES,
    decode_and_parse,
    install_signal_handlers,
    make_input_decoder,
    remove_signal_handlers,
    restore_terminal,
    safe_driver_class,
    save_tty_state,
)

X10_HIGH = b"\x1b[M \xe00"  # TUI-11 E9: an X10 report whose column byte is 0xE0
X10_FF = b"\x1b[M#\xff0"


def _keys(events_list) -> str:
    return "".join(e.character or "" for e in events_list if isinstance(e, events.Key))


def test_stock_strict_decoder_really_fails_on_these_bytes():
    """The baseline the fix is for: Textual's own decoder (strict UTF-8) raises."""
    strict = codecs.getincrementaldecoder("utf-8")().decode
    with pytest.raises(UnicodeDecodeError):
        strict(X10_HIGH)


@pytest.mark.parametrize(
    "chunks",
    [
        [X10_HIGH],
        [X10_FF],
        [b"\xff"],
        [b"\x1b[M \xe0", b"0"],  # the report split across two reads
        [b"\x1b[", b"M \xe00"],
        [b"\x1b", b"[M \xe00"],
        [X10_HIGH, X10_FF, b"\xff"],
    ],
    ids=["x10-e0", "x10-ff", "lone-ff", "split-in-report", "split-in-prefix", "split-after-esc", "all"],
)
def test_stray_bytes_decode_without_error_and_type_nothing(chunks):
    decoded = decode_and_parse([*chunks, b"ok"])
    assert _keys(decoded) == "ok"
    assert not any(isinstance(e, events.Key) and e.character == "\ufffd" for e in decoded)


def test_valid_input_is_unchanged():
    decode = make_input_decoder()
    assert decode("漢字 🚀 e\u0301".encode()) == "漢字 🚀 e\u0301"
    # a multi-byte character split across reads still decodes
    decode = make_input_decoder()
    data = "漢".encode()
    assert decode(data[:1]) == "" and decode(data[1:]) == "漢"
    # a U+FFFD the person really typed (valid UTF-8) is kept
    assert make_input_decoder()("\ufffd".encode()) == "\ufffd"
    parsed = decode_and_parse([b"\x1b[A", b"\x1b[<0;5;7M", "x".encode()])
    assert isinstance(parsed[0], events.Key) and parsed[0].key == "up"
    assert isinstance(parsed[1], events.MouseDown) and (parsed[1].x, parsed[1].y) == (4, 6)
    assert _keys(parsed) == "x"


def test_a_valid_x10_report_still_parses_as_one_sequence():
    # column and row bytes below 0x80 are plain ASCII: the report is consumed whole
    assert _keys(decode_and_parse([b"\x1b[M #!", b"z"])) == "z"


def test_safe_driver_class_is_a_linux_driver_with_the_tolerant_decoder():
    from textual.drivers.linux_driver import LinuxDriver

    cls = safe_driver_class()
    assert cls is not None and issubclass(cls, LinuxDriver)
    assert cls is terminal.SafeLinuxDriver
    assert cls.run_input_thread is not LinuxDriver.run_input_thread
    assert cls.process_message is not LinuxDriver.process_message


class _Host(App):
    def compose(self) -> ComposeResult:
        yield Input(placeholder="type")


@pytest.mark.parametrize("sig,code", [(signal.SIGTERM, 143), (signal.SIGHUP, 129), (signal.SIGINT, 130)])
async def test_signal_handlers_exit_the_app_with_128_plus_n(sig, code):
    app = _Host()
    seen: list[int] = []
    async with app.run_test() as pilot:
        installed = install_signal_handlers(app, grace=0, on_signal=seen.append)
        try:
            assert set(installed) == {int(signal.SIGTERM), int(signal.SIGHUP), int(signal.SIGINT)}
            os.kill(os.getpid(), sig)
            for _ in range(100):
                await asyncio.sleep(0.02)
                if app._exit:
                    break
        finally:
            remove_signal_handlers()
        await pilot.pause()
    assert seen == [int(sig)]
    assert app.return_code == code


def test_restore_terminal_writes_resets_and_restores_tty_modes():
    master, slave = os.openpty()
    try:
        cooked = termios.tcgetattr(slave)
        assert save_tty_state(slave)
        tty.setraw(slave)
        assert termios.tcgetattr(slave) != cooked
        out = io.StringIO()
        restore_terminal(out)
        assert termios.tcgetattr(slave) == cooked
        written = out.getvalue()
        assert written == RESET_SEQUENCES
        for seq in ("\x1b[?1049l", "\x1b[?1003l", "\x1b[?1006l", "\x1b[?25h", "\x1b[?2004l", "\x1b[?7h", "\x1b[<u"):
            assert seq in written
        # written to a real tty, the bytes arrive unchanged
        with os.fdopen(os.dup(slave), "w") as stream:
            restore_terminal(stream)
        os.set_blocking(master, False)
        assert os.read(master, 4096).decode().startswith("\x1b[<u")
    finally:
        terminal._saved_tty = None
        os.close(master)
        os.close(slave)


def test_restore_terminal_never_raises_on_a_closed_stream():
    stream = io.StringIO()
    stream.close()
    restore_terminal(stream)  # no exception


async def test_copy_text_uses_osc52_and_reports_success():
    app = _Host()
    async with app.run_test() as pilot:
        assert copy_text(app, "COPY-ME-1234") is True
        assert app.clipboard == "COPY-ME-1234"
        assert copy_text(app, "bad \udc80 surrogate") is True  # never raises on lone surrogates
        assert app.clipboard == "bad ? surrogate"
        await pilot.pause()


def test_copy_text_reports_failure_when_nothing_can_copy(monkeypatch):
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
    app = _Host()  # not running: no driver, no terminal to write OSC 52 to
    assert copy_text(app, "x") is False


def _paste_texts(events_: list) -> list[str]:
    from textual import events

    return [e.text for e in events_ if isinstance(e, events.Paste)]


def _key_names(events_: list) -> list[str]:
    from textual import events

    return [e.key for e in events_ if isinstance(e, events.Key)]


@pytest.mark.parametrize("cut", [1, 3, 7, 4096, 4099, 4101, 4103])
def test_fast_paste_feeder_matches_textual_for_any_read_split(cut):
    """TUI-06 C: the bracketed paste fast path gives the same events as Textual's own parser,
    wherever the reads split the stream (inside the end marker too)."""
    from textual._xterm_parser import XTermParser

    body = "".join(f"line {i:04d}\ty 漢字 🚀\r\n" for i in range(300)) + "PASTE-END\x00"
    stream = ("a" + "\x1b[200~" + body + "\x1b[201~" + "b").encode("utf-8")
    reference = list(XTermParser(False).feed(stream.decode("utf-8")))
    chunks = [stream[i : i + cut] for i in range(0, len(stream), cut)]
    got = decode_and_parse(chunks)
    assert _paste_texts(got) == _paste_texts(reference) == [body.replace("\x00", "")]
    assert _key_names(got) == _key_names(reference) == ["a", "b"]


def test_fast_paste_feeder_is_fast_for_2_mb():
    from oitui.tui.terminal import FastPasteFeeder
    from textual._xterm_parser import XTermParser

    body = "x" * 99 + "\n"
    data = "\x1b[200~" + body * 21_000 + "\x1b[201~"
    feeder = FastPasteFeeder(XTermParser(False))
    started = time.perf_counter()
    out = []
    for i in range(0, len(data), 4096):
        out.extend(feeder.feed(data[i : i + 4096]))
    assert time.perf_counter() - started < 0.5
    assert _paste_texts(out) == [body * 21_000]
