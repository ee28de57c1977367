"""Terminal hygiene beyond stock Textual 8.2.8 (case TUI-11).

Three things stock Textual gets wrong, and what this module gives the app for each:

1. **SIGTERM and SIGHUP leave the terminal broken** (alternate screen, mouse reporting, hidden
   cursor, raw tty). :func:`install_signal_handlers` makes SIGTERM, SIGHUP and SIGINT call
   ``app.exit(return_code=128 + signum)`` on the app's event loop, so the normal shutdown runs
   (the session is saved, the driver restores every mode). A watchdog restores the terminal with
   :func:`restore_terminal` and ends the process if the app has not exited within a few seconds,
   and a second signal of the same kind does that at once. Exit statuses: SIGINT 130, SIGTERM
   143, SIGHUP 129 (the shell convention 128 + n).
2. **Stray input bytes crash the app.** Textual's Linux driver decodes stdin with a strict UTF-8
   incremental decoder, so a legacy X10 mouse report with a coordinate byte above 0x7F
   (``1b 5b 4d 20 e0 30``, Textual#6668) or a lone ``0xff`` raises ``UnicodeDecodeError`` in the
   input thread and the app panics. :class:`SafeLinuxDriver` is the same driver with an
   ``errors="replace"`` decoder; the app passes it as ``driver_class`` (see
   :func:`safe_driver_class`). :func:`make_input_decoder` and :func:`decode_and_parse` expose the
   same decoding + Textual's own parser for unit tests.
3. **A killed process cannot clean up.** :func:`restore_terminal` writes the reset sequences
   (alternate screen off, every mouse mode off, cursor shown, bracketed paste off, focus events
   off, kitty keyboard popped, autowrap on) and restores the tty modes saved by
   :func:`save_tty_state` (or sane cooked modes). :func:`run_with_launcher` is an optional tiny
   parent that runs the TUI as a child and restores the terminal after it dies, even by SIGKILL.
"""

from __future__ import annotations

import asyncio
import codecs
import os
import signal
import sys
import threading
from typing import TYPE_CHECKING, Any, Callable, Iterable

if TYPE_CHECKING:  # pragma: no cover
    from textual.app import App
    from textual.driver import Driver

#: Everything Textual 8.2.8 turns on at start, turned off again (plus cursor shown, autowrap on).
RESET_SEQUENCES = (
    "\x1b[<u"  # pop the kitty keyboard protocol flags (must precede leaving the alt screen)
    "\x1b[?1000l\x1b[?1002l\x1b[?1003l\x1b[?1005l\x1b[?1006l\x1b[?1015l\x1b[?1016l"  # mouse off
    "\x1b[?2004l"  # bracketed paste off
    "\x1b[?1004l"  # focus in/out events off
    "\x1b[?2048l"  # in-band window resize off
    "\x1b[?1049l"  # leave the alternate screen
    "\x1b[?7h"  # autowrap on
    "\x1b[?25h"  # cursor visible
    "\x1b[?1l\x1b>"  # normal cursor keys, normal keypad
    "\x1b[0m"  # default colours
)

#: Exit status used for each handled signal (128 + n).
SIGNAL_EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143, signal.SIGHUP: 129}

#: Seconds the app gets to exit cleanly after a signal before the watchdog forces it.
EXIT_GRACE_SECONDS = 5.0

_saved_tty: tuple[int, list[Any]] | None = None


# --------------------------------------------------------------------------- tty state


def save_tty_state(fd: int | None = None) -> bool:
    """Remember the tty modes of ``fd`` (default stdin) for :func:`restore_terminal`.

    Call it before the app starts (before Textual puts the tty in raw mode). Returns False when
    ``fd`` is not a terminal. Never raises.
    """
    global _saved_tty
    try:
        import termios

        fd = sys.__stdin__.fileno() if fd is None else fd
        if not os.isatty(fd):
            return False
        _saved_tty = (fd, termios.tcgetattr(fd))
        return True
    except Exception:
        return False


def _restore_tty_modes() -> None:
    try:
        import termios
    except ImportError:  # pragma: no cover - not on Windows
        return
    if _saved_tty is not None:
        fd, attrs = _saved_tty
        try:
            termios.tcsetattr(fd, termios.TCSANOW, attrs)
            return
        except Exception:
            pass
    try:  # no saved modes: turn the usual cooked-mode flags back on
        fd = sys.__stdin__.fileno()
        if not os.isatty(fd):
            return
        attrs = termios.tcgetattr(fd)
        attrs[0] |= termios.ICRNL | termios.IXON
        attrs[3] |= termios.ICANON | termios.ECHO | termios.ISIG | termios.IEXTEN
        termios.tcsetattr(fd, termios.TCSANOW, attrs)
    except Exception:
        pass


def restore_terminal(stream: Any = None) -> None:
    """Put the terminal back as a shell expects it. Safe to call at any time, any number of times.

    Writes :data:`RESET_SEQUENCES` to ``stream`` (default the original stderr, where Textual
    draws; a terminal that has gone away is ignored) and restores the tty modes saved by
    :func:`save_tty_state`, or turns cooked mode (icanon, echo, isig, iexten, icrnl, ixon) back on.
    Never raises.
    """
    out = stream if stream is not None else sys.__stderr__
    try:
        fd = out.fileno()
        if os.isatty(fd):
            os.write(fd, RESET_SEQUENCES.encode())
        else:
            out.write(RESET_SEQUENCES)
            out.flush()
    except Exception:
        try:
            out.write(RESET_SEQUENCES)
            out.flush()
        except Exception:
            pass
    _restore_tty_modes()


# --------------------------------------------------------------------------- signals


def install_signal_handlers(
    app: "App",
    signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT),
    grace: float = EXIT_GRACE_SECONDS,
    on_signal: Callable[[int], None] | None = None,
) -> list[int]:
    """Make ``signals`` end ``app`` cleanly; returns the signal numbers actually installed.

    Call it from the app's event loop (e.g. in ``on_mount``); outside a running loop it falls
    back to ``signal.signal`` with ``loop.call_soon_threadsafe``. On a signal: ``on_signal(signum)``
    runs if given (say, to stop the core and flush the session), then ``app.exit(return_code=128 +
    signum)``. If the app is still running ``grace`` seconds later, or the same signal arrives a
    second time, the terminal is restored and the process ends with that status (``os._exit``).
    Only works in the main thread; elsewhere returns ``[]``. Never raises.
    """
    if threading.current_thread() is not threading.main_thread():
        return []
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    state = {"count": {}}

    def force_exit(code: int) -> None:
        restore_terminal()
        os._exit(code)

    def watchdog(code: int) -> None:
        # Only force when the app is still up: once it has shut down, the driver has restored
        # the terminal and the process is ending on its own.
        if getattr(app, "_running", False):
            force_exit(code)

    def handle(signum: int) -> None:
        code = SIGNAL_EXIT_CODES.get(signum, 128 + int(signum))
        seen = state["count"].get(signum, 0)
        state["count"][signum] = seen + 1
        if seen:
            force_exit(code)
        if grace and grace > 0:
            timer = threading.Timer(grace, watchdog, args=(code,))
            timer.daemon = True
            timer.start()
        if on_signal is not None:
            try:
                on_signal(signum)
            except Exception:
                pass
        try:
            app.exit(return_code=code)
        except Exception:
            force_exit(code)

    installed: list[int] = []
    for sig in signals:
        try:
            if loop is not None:
                loop.add_signal_handler(sig, handle, sig)
            else:

                def _fallback(signum: int, _frame: Any) -> None:
                    try:
                        target = getattr(app, "_loop", None) or asyncio.get_event_loop()
                        target.call_soon_threadsafe(handle, signum)
                    except Exception:
                        handle(signum)

                signal.signal(sig, _fallback)
            installed.append(int(sig))
        except (ValueError, OSError, RuntimeError, NotImplementedError):
            continue
    return installed


def remove_signal_handlers(signals: tuple[int, ...] = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT)) -> None:
    """Undo :func:`install_signal_handlers` on the running loop (default dispositions). Never raises."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    for sig in signals:
        try:
            if loop is not None:
                loop.remove_signal_handler(sig)
            signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
        except Exception:
            pass


# --------------------------------------------------------------------------- input decoding


_STRAY = "\U0010fffe"  # a noncharacter standing for one undecodable input byte
_X10_PREFIX = "\x1b[M"


def _stray_handler(exc: UnicodeError) -> tuple[str, int]:
    if isinstance(exc, UnicodeDecodeError):
        return _STRAY, exc.start + 1
    raise exc


codecs.register_error("oitui-stray", _stray_handler)


class _StrayFilter:
    """Keeps stray-byte placeholders only inside a legacy X10 mouse report (as U+FFFD, so the
    report keeps its 3 bytes and Textual's parser consumes it whole) and drops every other one.
    Remembers a report split across reads."""

    def __init__(self) -> None:
        self.report_left = 0  # characters of an X10 report still to come in the next chunk
        self.tail = ""  # end of the previous chunk that may be the start of ESC [ M

    def __call__(self, text: str) -> str:
        if not text:
            return text
        if _STRAY not in text and not self.report_left and not self.tail and _X10_PREFIX[0] not in text:
            return text
        out: list[str] = []
        index = 0
        length = len(text)
        # finish a report (or its prefix) begun in the previous chunk
        if self.tail:
            joined_prefix = self.tail + text[: len(_X10_PREFIX) - len(self.tail)]
            if joined_prefix == _X10_PREFIX:
                index = len(_X10_PREFIX) - len(self.tail)
                out.append(text[:index])
                self.report_left = 3
            self.tail = ""
        while index < length and self.report_left:
            char = text[index]
            out.append("\ufffd" if char == _STRAY else char)
            self.report_left -= 1
            index += 1
        while index < length:
            if text.startswith(_X10_PREFIX, index):
                report = text[index : index + len(_X10_PREFIX) + 3]
                out.append(report.replace(_STRAY, "\ufffd"))
                self.report_left = len(_X10_PREFIX) + 3 - len(report)
                index += len(report)
                continue
            if text[index] == "\x1b" and _X10_PREFIX.startswith(text[index:]):
                self.tail = text[index:]  # maybe the start of ESC [ M split across reads
                out.append(self.tail)
                break
            char = text[index]
            if char != _STRAY:
                out.append(char)
            index += 1
        return "".join(out)


def make_input_decoder() -> Callable[..., str]:
    """A UTF-8 incremental ``decode(data: bytes, final: bool = False) -> str`` that never raises.

    Invalid bytes never raise ``UnicodeDecodeError``: inside a legacy X10 mouse report
    (``ESC [ M`` + 3 bytes, where a coordinate above 0x7F is not UTF-8) each becomes U+FFFD so the
    report stays 3 characters long and is consumed as one (ignored) mouse report; anywhere else
    (a lone 0xff) it is dropped, so no stray character reaches the input box. Valid multi-byte
    characters split across reads still decode.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="oitui-stray")
    stray_filter = _StrayFilter()

    def decode(data: bytes, final: bool = False) -> str:
        return stray_filter(decoder.decode(data, final))

    return decode


PASTE_START = "\x1b[200~"
PASTE_END = "\x1b[201~"


class FastPasteFeeder:
    """Wraps Textual's ``XTermParser.feed`` so a bracketed paste is cut out with ``str.find``
    instead of going through the parser one character at a time (Textual 8.2.8's parser took
    2.2 s for a 2 MB paste; this takes milliseconds).

    ``feed(text)`` yields the same messages the parser would: keys and other sequences come from
    the parser; each paste becomes one ``events.Paste`` (NUL characters removed, as Textual does).
    A paste whose start marker is split across two reads is left to the parser (slow but right);
    an end marker split across reads is found (the possible prefix is held back).
    """

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self.in_paste = False
        self.parts: list[str] = []
        self.carry = ""

    def feed(self, data: str) -> Iterable[Any]:
        """Parse ``data`` (decoded terminal input); yields Textual messages."""
        from textual import events

        if self.carry:
            data, self.carry = self.carry + data, ""
        while data:
            if self.in_paste:
                index = data.find(PASTE_END)
                if index < 0:
                    keep = _marker_prefix_at_end(data, PASTE_END)
                    if keep:
                        self.carry = data[-keep:]
                        data = data[:-keep]
                    self.parts.append(data)
                    return
                self.parts.append(data[:index])
                text = "".join(self.parts).replace("\x00", "")
                self.parts = []
                self.in_paste = False
                data = data[index + len(PASTE_END) :]
                yield events.Paste(text)
                continue
            index = data.find(PASTE_START)
            if index < 0:
                yield from self.parser.feed(data)
                return
            if index:
                yield from self.parser.feed(data[:index])
            self.in_paste = True
            data = data[index + len(PASTE_START) :]

    def tick(self) -> Iterable[Any]:
        """The parser's timeout check (a lone Escape key)."""
        if self.in_paste:
            return iter(())
        return self.parser.tick()


def _marker_prefix_at_end(data: str, marker: str) -> int:
    """Length of the longest proper prefix of ``marker`` that ``data`` ends with (0 if none)."""
    for k in range(min(len(marker) - 1, len(data)), 0, -1):
        if data.endswith(marker[:k]):
            return k
    return 0


def decode_and_parse(chunks: list[bytes]) -> list[Any]:
    """Feed raw stdin ``chunks`` through :func:`make_input_decoder` and Textual's ``XTermParser``.

    Returns the Textual messages (``events.Key``, ``events.MouseDown``, ``events.Paste`` …) the
    driver would post, flushing the parser at the end. For tests of stray input bytes.
    """
    from textual._xterm_parser import XTermParser

    decode = make_input_decoder()
    parser = XTermParser(False)
    feeder = FastPasteFeeder(parser)
    out: list[Any] = []
    for index, chunk in enumerate(chunks):
        text = decode(chunk, final=index == len(chunks) - 1)
        if text:
            out.extend(feeder.feed(text))
    out.extend(feeder.tick())
    try:
        out.extend(parser.feed(""))
    except Exception:
        pass
    return out


def _build_safe_driver() -> type:
    from textual import events
    from textual._loop import loop_last
    from textual._parser import ParseError
    from textual._xterm_parser import XTermParser
    from textual.drivers.linux_driver import LinuxDriver

    class SafeLinuxDriver(LinuxDriver):
        """Textual's ``LinuxDriver`` with tolerant input.

        - The stdin decoder never raises (see :func:`make_input_decoder`); otherwise identical to
          ``LinuxDriver.run_input_thread`` in Textual 8.2.8. Stray bytes (legacy X10 mouse
          reports above 0x7F, a lone 0xff) never crash the app.
        - Mouse reports whose cell lies outside the terminal (a bogus ``ESC [ < 0;5000;5000 M``)
          are dropped: a real terminal never sends them, and Textual would treat one as a click
          on nothing and take the focus away from the input box.
        """

        def process_message(self, message: Any) -> None:
            """Drop out-of-screen mouse reports, pass everything else to ``LinuxDriver``."""
            if isinstance(message, events.MouseEvent) and not getattr(self, "_mouse_pixels", False):
                try:
                    columns, rows = os.get_terminal_size(self._file.fileno())
                except (OSError, ValueError, AttributeError):
                    columns = rows = 0
                if columns and rows and not (0 <= message.x < columns and 0 <= message.y < rows):
                    return
            super().process_message(message)

        def run_input_thread(self) -> None:
            """Wait for input and dispatch events (tolerant UTF-8 decoding)."""
            import selectors

            selector = selectors.SelectSelector()
            selector.register(self.fileno, selectors.EVENT_READ)
            fileno = self.fileno
            EVENT_READ = selectors.EVENT_READ
            parser = XTermParser(self._debug)
            feeder = FastPasteFeeder(parser)
            feed = feeder.feed
            tick = feeder.tick
            decode = make_input_decoder()
            read = os.read

            def process_selector_events(selector_events: list, final: bool = False) -> None:
                for last, (_key, mask) in loop_last(selector_events):
                    if mask & EVENT_READ:
                        unicode_data = decode(read(fileno, 1024 * 4), final=final and last)
                        if not unicode_data:
                            break
                        for event in feed(unicode_data):
                            self.process_message(event)
                for event in tick():
                    self.process_message(event)

            try:
                while not self.exit_event.is_set():
                    process_selector_events(selector.select(0.1))
                selector.unregister(self.fileno)
                process_selector_events(selector.select(0.1), final=True)
            finally:
                selector.close()
                try:
                    for _event in feed(""):
                        pass
                except (EOFError, ParseError):
                    pass

    return SafeLinuxDriver


_SAFE_DRIVER: type | None = None


def safe_driver_class() -> "type[Driver] | None":
    """The driver class the app should pass as ``App(driver_class=...)``.

    :class:`SafeLinuxDriver` on Linux and macOS; None elsewhere (Windows, or when the
    ``TEXTUAL_DRIVER`` environment variable picks a driver), letting Textual choose.
    """
    global _SAFE_DRIVER
    if sys.platform.startswith("win") or os.environ.get("TEXTUAL_DRIVER"):
        return None
    if _SAFE_DRIVER is None:
        _SAFE_DRIVER = _build_safe_driver()
    return _SAFE_DRIVER


def __getattr__(name: str) -> Any:
    # ``from oitui.tui.terminal import SafeLinuxDriver`` builds the class lazily (textual import).
    if name == "SafeLinuxDriver":
        global _SAFE_DRIVER
        if _SAFE_DRIVER is None:
            _SAFE_DRIVER = _build_safe_driver()
        return _SAFE_DRIVER
    raise AttributeError(name)


# --------------------------------------------------------------------------- launcher


def run_with_launcher(argv: list[str], env: dict[str, str] | None = None) -> int:
    """Run ``argv`` (the TUI) as a child, then restore the terminal whatever happened to it.

    The parent ignores SIGINT while the child runs (the child owns the terminal), forwards
    SIGTERM and SIGHUP to it, and after it ends (even by SIGKILL) calls :func:`restore_terminal`
    with the tty modes saved before the start. Returns the child's exit status (128 + n when a
    signal ended it). Raises OSError when ``argv`` cannot be started.
    """
    import subprocess

    save_tty_state()
    proc = subprocess.Popen(argv, env=env)
    previous: dict[int, Any] = {}

    def forward(signum: int, _frame: Any) -> None:
        try:
            proc.send_signal(signum)
        except Exception:
            pass

    for sig in (signal.SIGTERM, signal.SIGHUP):
        previous[sig] = signal.signal(sig, forward)
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        code = proc.wait()
    finally:
        for sig, handler in previous.items():
            try:
                signal.signal(sig, handler)
            except Exception:
                pass
    if code < 0:
        restore_terminal()
        return 128 - code
    if code != 0:
        restore_terminal()
    return code
