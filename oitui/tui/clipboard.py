"""Copy text to the clipboard: OSC 52 through the terminal, plus a native tool when there is one.

OSC 52 (``App.copy_to_clipboard``) works in most terminals and through tmux (``set-clipboard
on``) and ssh, but the terminal never says whether it accepted it. A native tool (``wl-copy``,
``xclip``, ``xsel``, ``pbcopy``) is tried as well, in a background thread, when a display for it
exists. :func:`copy_text` returns False only when the copy surely failed (no terminal to write to
and no native tool), so the caller can show a notice instead of failing silently.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from textual.app import App


def native_copy_command() -> list[str] | None:
    """The argv of a native clipboard tool usable here (text on its stdin), or None.

    Checks ``pbcopy`` on macOS, ``wl-copy`` when ``WAYLAND_DISPLAY`` is set, ``xclip``/``xsel``
    when ``DISPLAY`` is set. Never raises.
    """
    if sys.platform == "darwin" and shutil.which("pbcopy"):
        return ["pbcopy"]
    if os.environ.get("WAYLAND_DISPLAY") and shutil.which("wl-copy"):
        return ["wl-copy"]
    if os.environ.get("DISPLAY"):
        if shutil.which("xclip"):
            return ["xclip", "-selection", "clipboard"]
        if shutil.which("xsel"):
            return ["xsel", "--clipboard", "--input"]
    return None


def _run_native(argv: list[str], data: bytes) -> None:
    try:
        subprocess.run(
            argv,
            input=data,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            timeout=3,
            check=False,
        )
    except (OSError, subprocess.SubprocessError):
        pass


def copy_text(app: "App", text: str) -> bool:
    """Put ``text`` on the clipboard; return False when it surely failed.

    Writes OSC 52 through the app's driver (``app.copy_to_clipboard``, which also sets
    ``app.clipboard``) and, when a native clipboard tool is available, feeds it the text in a
    daemon thread (never blocking the UI). Lone surrogates are replaced so encoding cannot fail.
    Returns True when OSC 52 went to the terminal or a native tool was started (or, in a headless
    test app, when ``app.clipboard`` holds the text); False when there was nowhere to copy to.
    Never raises.
    """
    if not isinstance(text, str):
        text = str(text)
    safe = text.encode("utf-8", "replace").decode("utf-8")
    sent = False
    try:
        app.copy_to_clipboard(safe)
        driver = getattr(app, "_driver", None)
        sent = driver is not None
    except Exception:
        sent = False
    argv = native_copy_command()
    if argv is not None:
        threading.Thread(
            target=_run_native, args=(argv, safe.encode("utf-8")), name="oitui-clipboard", daemon=True
        ).start()
        sent = True
    return sent
