"""Make the SVG screenshots in this folder from real app states (Pilot + the scripted model server).

Run from the repository root::

    .venv/bin/python screenshots/make_screenshots.py [--size 120x36] [--out screenshots]

It starts one scripted OpenAI-compatible server on 127.0.0.1 (``tests/support/scripted_server.py``)
and one real ``OpenInterpreter`` (a real Python kernel) on a temporary OITUI_HOME, drives
``OituiApp`` with Pilot, and saves with ``app.save_screenshot()``:

- ``idle.svg``: the empty app, ready;
- ``approval.svg``: a proposed Python block waiting on the approval bar;
- ``running.svg``: a block mid-run, its active line highlighted, output streaming in the console;
- ``conversation.svg``: the finished turn (reply, code and output folded in the conversation);
- ``sessions.svg``: the session browser (ctrl+s) over a few saved sessions;
- ``theme-<name>.svg``: the finished turn in each of oitui's own themes.

Nothing here talks to the internet. Exit status 0 when every screenshot was written, 1 otherwise
(the failing state is named on stderr).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FENCE = "```"


def _code_reply(text_reply, language: str, code: str, before: str = "", **kw) -> dict:
    return text_reply([before, f"{FENCE}{language}\n", code.rstrip("\n") + "\n", f"{FENCE}\n"], **kw)


async def _wait(pilot, cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        await pilot.pause(0.05)
    raise TimeoutError(f"timed out waiting for {what}")


async def _send(pilot, text: str) -> None:
    for ch in text:
        await pilot.press({" ": "space"}.get(ch, ch))
    await pilot.press("enter")
    await pilot.pause(0.1)


async def make_all(out: Path, size: tuple[int, int]) -> list[str]:
    """Drive the app through each state and save the SVGs into ``out``; returns the file names."""
    sys.path.insert(0, str(ROOT / "tests"))
    from support.scripted_server import ScriptedServer, text_reply

    from oitui.core.interpreter import OpenInterpreter
    from oitui.tui.app import OituiApp

    out.mkdir(parents=True, exist_ok=True)
    written: list[str] = []
    server = ScriptedServer()
    interp = OpenInterpreter()
    interp.llm.model = "openai/gpt-4o-mini"
    interp.llm.api_base = server.url
    interp.llm.api_key = "sk-screenshots-not-real"
    interp.llm.supports_functions = False
    interp.auto_run = False

    def save(app, name: str) -> None:
        app.save_screenshot(filename=name, path=str(out))
        written.append(name)
        print(f"wrote {out / name}", file=sys.stderr)

    try:
        # 1-4: one conversation: idle, approval, running (active line), finished
        server.reset([
            _code_reply(
                text_reply,
                "python",
                "import time\nfor i in range(1, 6):\n    print(f'step {i} of 5', flush=True)\n    time.sleep(0.7)\n"
                "print('sum of squares:', sum(n * n for n in range(1, 6)))",
                before="I'll print five steps, then the sum of the first five squares.\n\n",
            ),
            text_reply("Done: the loop printed five steps and the **sum of squares is 55**."),
        ])
        app = OituiApp(interpreter=interp)
        async with app.run_test(size=size) as pilot:
            await _wait(pilot, lambda: app.interp is not None and app.session is not None, 60, "core loaded")
            await pilot.pause(0.3)
            save(app, "idle.svg")
            await _send(pilot, "count to five slowly, then add the squares")
            await _wait(pilot, lambda: app.status == "approval", 60, "approval")
            await pilot.pause(0.2)
            save(app, "approval.svg")
            await pilot.press("y")
            await _wait(pilot, lambda: "step 2 of 5" in app.console_pane.text(), 60, "running output")
            await pilot.pause(0.1)
            save(app, "running.svg")
            await _wait(pilot, lambda: app.status == "idle" and "55" in app.conversation.plain_text(), 60, "reply")
            await pilot.pause(0.3)
            save(app, "conversation.svg")
            for theme in getattr(app, "oitui_themes", []) or ["oitui-dark", "oitui-light"]:
                if theme in app.available_themes:
                    app.theme = theme
                    await pilot.pause(0.3)
                    save(app, f"theme-{theme}.svg")

        # 5: the session browser over a few saved sessions
        for task, reply in (
            ("how many python files are in this repo?", "There are 84 Python files."),
            ("summarise the README", "oitui is Open Interpreter as a full-screen terminal app."),
        ):
            server.reset([text_reply(reply)])
            interp.reset()
            interp.session = None
            app = OituiApp(interpreter=interp)
            async with app.run_test(size=size) as pilot:
                await _wait(pilot, lambda: app.interp is not None and app.session is not None, 60, "core loaded")
                await _send(pilot, task)
                await _wait(pilot, lambda: app.status == "idle" and reply[:10] in app.conversation.plain_text(),
                            60, "reply")
        interp.reset()
        interp.session = None
        app = OituiApp(interpreter=interp)
        async with app.run_test(size=size) as pilot:
            await _wait(pilot, lambda: app.interp is not None and app.session is not None, 60, "core loaded")
            await pilot.press("ctrl+s")
            from oitui.tui.sessions_screen import SessionBrowser

            await _wait(pilot, lambda: isinstance(app.screen, SessionBrowser), 10, "session browser")
            await pilot.pause(0.5)
            save(app, "sessions.svg")
    finally:
        try:
            interp.terminate()
        finally:
            server.close()
    return written


def main(argv: list[str] | None = None) -> int:
    """Parse ``--size WxH`` and ``--out DIR``, make every screenshot; returns the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", default="120x36", help="terminal size WxH (default 120x36)")
    parser.add_argument("--out", default=str(ROOT / "screenshots"), help="output folder")
    args = parser.parse_args(argv)
    try:
        width, height = (int(v) for v in args.size.lower().split("x"))
    except ValueError:
        parser.error(f"--size must look like 120x36, not {args.size!r}")
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    home = tempfile.mkdtemp(prefix="oitui-screenshots-")
    os.environ["OITUI_HOME"] = home
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OITUI_MODEL"):
        os.environ.pop(key, None)
    work = Path(home) / "project"
    work.mkdir()
    os.chdir(work)
    try:
        asyncio.run(make_all(Path(args.out).resolve(), (width, height)))
    except Exception as exc:  # noqa: BLE001 - report which state failed
        print(f"make_screenshots: failed: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
