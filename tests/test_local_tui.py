"""Issue 6: the TUI streams a reply from the real embedded local model (SmolLM2 via llama.cpp)."""

from __future__ import annotations

import importlib.util
import time

import pytest

if importlib.util.find_spec("llama_cpp") is None:  # pragma: no cover - CI installs the local extra
    pytest.skip("llama_cpp is not installed: pip install 'oitui[local]'", allow_module_level=True)


async def _wait(pilot, cond, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return
        await pilot.pause(0.1)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


async def test_local_model_streams_a_reply_into_the_tui(oitui_home):
    from oitui.core.interpreter import OpenInterpreter
    from oitui.tui.app import OituiApp

    interp = OpenInterpreter()
    interp.llm.model = "local/smollm2"
    interp.auto_run = False
    app = OituiApp(interpreter=interp)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await _wait(pilot, lambda: app.interp is not None and app.session is not None, 30, "the core to load")
            seen_streaming = []
            for ch in "print hello world using python":
                await pilot.press("space" if ch == " " else ch)
            await pilot.press("enter")

            def progressed() -> bool:
                if app.status == "streaming":
                    seen_streaming.append(True)
                return app.status in ("approval", "idle") and bool(seen_streaming) or app.status == "approval"

            await _wait(pilot, progressed, 120, f"a streamed reply (status {app.status!r})")
            assert seen_streaming, "the status never showed 'streaming' while the local model answered"
            # the model's reply reached the core's history as an assistant message or code block
            assistant = [m for m in interp.messages if m["role"] == "assistant"]
            pending = app.code_pane.view.text if app.status == "approval" else ""
            assert assistant or pending, interp.messages
            if app.status == "approval":
                assert pending.strip(), "the approval bar is up with no code in the code pane"
                await pilot.pause(0.6)  # the bar ignores keys for 0.5 s
                await pilot.press("n")
                await pilot.press("enter")
                await _wait(pilot, lambda: app.status == "idle", 60, "idle after declining")
            assert app.interp.metrics["completion_tokens"] > 0
    finally:
        interp.terminate()
