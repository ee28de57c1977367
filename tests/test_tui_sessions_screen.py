"""Pilot tests of the session browser (oitui/tui/sessions_screen.py) on a real SessionStore.

A tiny host app pushes ``SessionBrowser(store)`` and records what it dismisses with; the store is
the real JSONL + SQLite one on a fresh OITUI_HOME, filled with three sessions.
"""

from __future__ import annotations

import asyncio
import time

import pytest

pytest.importorskip("textual")
sessions_mod = pytest.importorskip("oitui.core.sessions")

from textual.app import App, ComposeResult  # noqa: E402
from textual.widgets import Label, Static  # noqa: E402

from oitui.core.settings import paths  # noqa: E402
from oitui.tui.sessions_screen import ConfirmScreen, SessionBrowser  # noqa: E402

SessionStore = sessions_mod.SessionStore


class Host(App):
    """Pushes the browser on mount; ``results`` collects what it dismissed with."""

    def __init__(self, store, outputs_dir=None):
        super().__init__()
        self.store = store
        self.outputs_dir = outputs_dir
        self.results: list = []

    def compose(self) -> ComposeResult:
        yield Label("host screen")

    def on_mount(self) -> None:
        self.push_screen(SessionBrowser(self.store, outputs_dir=self.outputs_dir), self.results.append)


@pytest.fixture
def store(oitui_home):
    """A real store on a fresh OITUI_HOME with three sessions; returns (store, ids dict)."""
    p = paths()
    st = SessionStore(p.sessions_dir, p.outputs_dir)
    s1 = st.create(model="openai/gpt-4o-mini", cwd=str(oitui_home))
    s1.append({"role": "user", "type": "message", "content": "Plot a sine wave"})
    s1.append({"role": "assistant", "type": "code", "format": "python", "content": "print('hello from python')"})
    s1.append({"role": "computer", "type": "console", "format": "output", "content": "zanzibar-quokka 42"})
    s1.append({"role": "assistant", "type": "message", "content": "The plot is ready."})
    time.sleep(0.01)
    s2 = st.create(model="local/smollm2", cwd=str(oitui_home))
    s2.append({"role": "user", "type": "message", "content": "Count the files here"})
    s2.append({"role": "assistant", "type": "code", "format": "shell", "content": "ls | wc -l"})
    s2.append({"role": "computer", "type": "console", "format": "output", "content": "7"})
    time.sleep(0.01)
    s3 = st.create(model="openai/gpt-4o", cwd=str(oitui_home))
    s3.append({"role": "user", "type": "message", "content": "Write a haiku about tea"})
    s3.append({"role": "assistant", "type": "message", "content": "Steam curls from the cup"})
    s3.append({"role": "user", "type": "message", "content": "Another one"})
    for s in (s1, s2, s3):
        s.close()
    return st, {"sine": s1.id, "files": s2.id, "haiku": s3.id}


async def _settle(pilot, browser, timeout=10.0):
    """Wait until the browser's debounced search has been applied."""
    deadline = time.monotonic() + timeout
    await pilot.pause(0.05)
    while browser.searching and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    await pilot.pause()


def _preview_text(browser) -> str:
    return str(browser.query_one("#session-preview", Static).render())


async def test_lists_every_session_with_title_date_model_turns(store):
    st, ids = store
    app = Host(st)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        browser = app.screen
        assert isinstance(browser, SessionBrowser)
        assert set(browser.session_ids) == set(ids.values())
        assert browser.session_ids[0] == ids["haiku"]  # newest first
        option_list = browser.query_one("#session-list")
        prompts = [str(option_list.get_option_at_index(i).prompt) for i in range(option_list.option_count)]
        joined = "\n".join(prompts)
        for title in ("Plot a sine wave", "Count the files here", "Write a haiku about tea"):
            assert title in joined
        haiku = prompts[0]
        assert "openai/gpt-4o" in haiku and "2 turns" in haiku
        assert any(ch.isdigit() for ch in haiku.split("·")[0])  # the date
        assert "3 sessions" in str(browser.query_one("#browser").border_subtitle)
        # the preview shows the highlighted session's first messages
        preview = _preview_text(browser)
        assert "Write a haiku about tea" in preview and "Steam curls from the cup" in preview
        await pilot.press("down")
        await pilot.pause()
        assert browser.highlighted_id == browser.session_ids[1]
        assert "Count the files here" in _preview_text(browser)
        assert "ls | wc -l" in _preview_text(browser)


async def test_search_finds_a_word_only_in_program_output(store):
    st, ids = store
    app = Host(st)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        browser = app.screen
        await pilot.press("slash")
        for ch in "zanzibar":
            await pilot.press(ch)
        await _settle(pilot, browser)
        assert browser.session_ids == [ids["sine"]]
        assert "1 match" in str(browser.query_one("#browser").border_subtitle)
        preview = _preview_text(browser)
        assert "zanzibar" in preview.lower() and "match" in preview
        # clearing the query lists everything again
        for _ in range(len("zanzibar")):
            await pilot.press("backspace")
        await _settle(pilot, browser)
        assert set(browser.session_ids) == set(ids.values())
        # a query that matches nothing, with punctuation people type, does not fail
        for ch in 'don\'t "AND':
            await pilot.press(ch if ch != " " else "space")
        await _settle(pilot, browser)
        assert browser.session_ids == []
        assert "No sessions match" in _preview_text(browser)


async def test_enter_from_search_box_resumes_the_match(store):
    st, ids = store
    app = Host(st)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("slash", *"haiku")
        browser = app.screen
        await _settle(pilot, browser)
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == [ids["haiku"]]
        assert browser.selected_message_index == 0  # the matching message: the first user turn
        assert not isinstance(app.screen, SessionBrowser)


async def test_enter_on_list_returns_the_highlighted_id(store):
    st, ids = store
    app = Host(st)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        browser = app.screen
        await pilot.press("down", "down")
        await pilot.pause()
        expected = browser.highlighted_id
        assert expected == browser.session_ids[2]
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == [expected]


async def test_d_asks_then_deletes_only_after_yes(store):
    st, ids = store
    app = Host(st)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        browser = app.screen
        target = browser.highlighted_id
        await pilot.press("d")
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert target in app.screen.question
        await pilot.press("n")
        await pilot.pause()
        assert app.screen is browser
        assert target in {i.id for i in st.list()}
        await pilot.press("d")
        await pilot.pause()
        await pilot.press("y")
        await pilot.pause()
        assert app.screen is browser
        assert target not in {i.id for i in st.list()}
        assert not (paths().sessions_dir / f"{target}.jsonl").exists()
        assert target not in browser.session_ids and len(browser.session_ids) == 2
        assert app.results == []  # still open


async def test_x_exports_markdown_to_the_outputs_folder(store, tmp_path):
    st, ids = store
    out = tmp_path / "outs"
    app = Host(st, outputs_dir=out)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        browser = app.screen
        await pilot.press("down", "down")  # the oldest: the sine-wave session
        await pilot.pause()
        assert browser.highlighted_id == ids["sine"]
        await pilot.press("x")
        await pilot.pause()
        path = out / ids["sine"] / f"{ids['sine']}.md"
        assert path.is_file()
        text = path.read_text(encoding="utf-8")
        assert "Plot a sine wave" in text and "zanzibar-quokka 42" in text
        assert any(str(path) in n.message for n in app._notifications)


async def test_escape_returns_none_and_only_closes_the_modal(store):
    st, ids = store
    app = Host(st)
    async with app.run_test(size=(120, 36)) as pilot:
        await pilot.pause()
        await pilot.press("slash", "h")  # escape from inside the search box too
        await pilot.press("escape")
        await pilot.pause()
        assert app.results == [None]
        assert not isinstance(app.screen, SessionBrowser)
        assert app.is_running
        assert str(app.screen.query_one(Label).render()) == "host screen"


async def test_empty_store_shows_a_friendly_note(oitui_home):
    st = SessionStore(paths().sessions_dir)
    app = Host(st)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        browser = app.screen
        assert browser.session_ids == []
        assert "No saved sessions yet" in _preview_text(browser)
        await pilot.press("enter", "d", "x")  # nothing to act on: no crash, still open
        await pilot.pause()
        assert app.screen is browser and app.results == []


async def test_tui08_e_escape_closes_only_the_modal_while_a_turn_streams(oitui_home):
    """TUI-08 E on the real app: with the browser open over a streaming turn, Escape closes only
    the browser and the stream goes on; a second Escape (conversation focused) interrupts it."""
    from support.scripted_server import ScriptedServer, text_reply

    from oitui.core.interpreter import OpenInterpreter
    from oitui.tui.app import OituiApp

    server = ScriptedServer()
    interp = OpenInterpreter()
    try:
        interp.llm.model = "openai/x"
        interp.llm.api_base = server.url
        interp.llm.api_key = "sk-test-not-real"
        interp.llm.supports_functions = False
        server.script = [text_reply([f"chunk{i:02d} " for i in range(60)], interval=0.1)]
        app = OituiApp(interpreter=interp)
        async with app.run_test(size=(120, 36)) as pilot:
            deadline = time.monotonic() + 60
            while (app.interp is None or app.session is None or app.store is None) and time.monotonic() < deadline:
                await pilot.pause(0.05)
            for ch in "go":
                await pilot.press(ch)
            await pilot.press("enter")
            deadline = time.monotonic() + 60
            while "chunk02" not in app.conversation.plain_text() and time.monotonic() < deadline:
                await pilot.pause(0.05)
            assert app.status == "streaming"
            await pilot.press("ctrl+s")
            await pilot.pause(0.2)
            assert isinstance(app.screen, SessionBrowser)
            await pilot.press("ctrl+s")  # inside the browser: no second browser on top
            await pilot.pause(0.2)
            assert sum(isinstance(s, SessionBrowser) for s in app.screen_stack) == 1
            await pilot.press("escape")
            await pilot.pause(0.1)
            assert not isinstance(app.screen, SessionBrowser)
            assert app.status == "streaming"
            before = app.conversation.plain_text().count("chunk")
            await pilot.pause(0.6)
            assert app.conversation.plain_text().count("chunk") > before  # the stream went on
            await pilot.press("escape")
            deadline = time.monotonic() + 10
            while app.status not in ("interrupted", "idle") and time.monotonic() < deadline:
                await pilot.pause(0.05)
            assert app.status in ("interrupted", "idle")
            assert "chunk59" not in app.conversation.plain_text()
    finally:
        interp.terminate()
        server.close()


async def test_preview_jumps_to_a_match_deep_in_a_long_session(oitui_home):
    st = SessionStore(paths().sessions_dir)
    s = st.create(model="openai/x")
    for i in range(12):
        s.append({"role": "user", "type": "message", "content": f"question {i:02d}"})
        s.append({"role": "assistant", "type": "message", "content": f"answer {i:02d}"})
    s.append({"role": "user", "type": "message", "content": "where is the platypus-needle"})
    s.append({"role": "assistant", "type": "message", "content": "found it"})
    s.close()
    app = Host(st)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        browser = app.screen
        preview = _preview_text(browser)
        assert "question 00" in preview and "platypus" not in preview
        await pilot.press("slash", *"platypus")
        await _settle(pilot, browser)
        preview = _preview_text(browser)
        assert "question 00" in preview  # the start of the conversation
        assert "▶ you: where is the platypus-needle" in preview  # the matching turn, marked
        assert "found it" in preview and "question 05" not in preview
        await pilot.press("enter")
        await pilot.pause()
        assert app.results == [s.id] and browser.selected_message_index == 24
