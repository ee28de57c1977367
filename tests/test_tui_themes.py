"""Themes (oitui/tui/themes.py, themes/*.toml) and snapshot tests of our own screens.

Snapshots (pytest-textual-snapshot ``snap_compare``; baselines under ``__snapshots__/``): the
session browser on a frozen store, and a theme sampler in each of our themes. Each snapshot is
paired with assertions on what it must show, so a wrong baseline cannot pass unnoticed.
Refresh baselines with ``pytest tests/test_tui_themes.py --snapshot-update`` and review the SVGs.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

import pytest

pytest.importorskip("textual")

from pygments.styles import get_all_styles  # noqa: E402
from textual.app import App, ComposeResult  # noqa: E402
from textual.binding import Binding  # noqa: E402
from textual.containers import Horizontal, Vertical  # noqa: E402
from textual.theme import BUILTIN_THEMES  # noqa: E402
from textual.widgets import Button, Footer, Input, Label, Markdown, Static  # noqa: E402

from oitui.resources import resource_dir  # noqa: E402
from oitui.tui.themes import (  # noqa: E402
    code_theme_for,
    load_themes,
    register_themes,
    registered_theme_names,
    text_area_theme_for,
)

OUR_THEMES = ["oitui-dark", "oitui-light"]
TEXT_AREA_THEMES = {"monokai", "dracula", "vscode_dark", "github_light", "css"}


class Sampler(App):
    """A small app showing the parts a theme colours (tests and snapshots only)."""

    BINDINGS = [Binding("ctrl+q", "quit", "Quit"), Binding("ctrl+s", "noop", "Sessions")]
    CSS = """
    Screen { padding: 1 2; }
    #title { text-style: bold; color: $primary; margin-bottom: 1; }
    .ok { color: $success; } .warn { color: $warning; } .err { color: $error; }
    #panel { background: $panel; padding: 0 1; height: auto; margin: 1 0; }
    Markdown { height: auto; }
    Horizontal { height: auto; }
    Button { margin-right: 2; }
    """

    def __init__(self, theme_name: str | None = None, dirs: list[Path] | None = None):
        super().__init__()
        self.errors = register_themes(self, dirs)
        self.wanted = theme_name

    def compose(self) -> ComposeResult:
        yield Static("oitui theme sampler", id="title")
        with Vertical(id="panel"):
            yield Label("model openai/gpt-4o-mini · auto-run off · tokens 1,234 / 56")
            yield Label("idle", classes="ok")
            yield Label("approval: y run · n decline · e edit · a always (python)", classes="warn")
            yield Label("error: the model endpoint refused the key", classes="err")
        yield Markdown("Here is the plan:\n\n```python\nfor i in range(3):\n    print(i)\n```\n")
        with Horizontal():
            yield Button("Run (y)", variant="success")
            yield Button("Decline (n)", variant="error")
            yield Button("Edit (e)", variant="primary")
        yield Input(placeholder="Ask oitui to do something…")
        yield Footer()

    def on_mount(self) -> None:
        if self.wanted:
            self.theme = self.wanted

    def action_noop(self) -> None:
        pass


def test_our_themes_load_and_register():
    themes, errors = load_themes([resource_dir("themes")])
    assert errors == []
    assert sorted(t.name for t in themes) == OUR_THEMES
    app = Sampler()
    assert app.errors == []
    assert set(OUR_THEMES) <= set(registered_theme_names(app))
    assert set(OUR_THEMES) <= set(app.available_themes)
    dark = app.available_themes["oitui-dark"]
    light = app.available_themes["oitui-light"]
    assert dark.dark is True and light.dark is False
    assert dark.background.upper() == "#14181D" and light.background.upper() == "#F6F7F9"
    assert dark.variables["footer-key-foreground"] == "#F2A65A"


def test_user_theme_folder_is_read_and_can_override(oitui_home):
    user_dir = oitui_home / "themes"
    user_dir.mkdir()
    (user_dir / "mine.toml").write_text('name = "mine"\nprimary = "#ff0000"\ndark = false\n')
    app = Sampler()
    assert app.errors == []
    assert "mine" in registered_theme_names(app) and "oitui-dark" in registered_theme_names(app)
    assert app.available_themes["mine"].primary == "#ff0000"
    assert code_theme_for("mine") == "default" and text_area_theme_for("mine") == "github_light"


def test_broken_theme_files_are_reported_not_fatal(tmp_path):
    (tmp_path / "a_syntax.toml").write_text('name = "x"\nprimary = \n')
    (tmp_path / "b_unknown.toml").write_text('name = "y"\nprimary = "#123456"\nprimay = "#000000"\n')
    (tmp_path / "c_colour.toml").write_text('name = "z"\nprimary = "not-a-colour"\n')
    (tmp_path / "d_noname.toml").write_text('primary = "#123456"\n')
    (tmp_path / "e_code.toml").write_text('name = "w"\nprimary = "#123456"\ncode_theme = "nope"\n')
    (tmp_path / "f_vars.toml").write_text('name = "v"\nprimary = "#123456"\n[variables]\nx = 3\n')
    (tmp_path / "g_binary.toml").write_bytes(b"\xff\xfe\x00bad")
    (tmp_path / "good.toml").write_text('name = "good-one"\nprimary = "#336699"\n')
    app = Sampler(dirs=[tmp_path])
    assert registered_theme_names(app) == ["good-one"]
    assert len(app.errors) == 7
    for stem, words in [
        ("a_syntax", "bad TOML"),
        ("b_unknown", "primay"),
        ("c_colour", "not-a-colour"),
        ("d_noname", "'name' is required"),
        ("e_code", "not a pygments style"),
        ("f_vars", "[variables]"),
        ("g_binary", "g_binary.toml"),
    ]:
        matching = [e for e in app.errors if f"{stem}.toml" in e]
        assert len(matching) == 1 and words in matching[0], (stem, app.errors)


def test_missing_folder_gives_no_themes_and_no_crash(tmp_path):
    themes, errors = load_themes([tmp_path / "does-not-exist"])
    assert themes == [] and errors == []


def test_code_theme_follows_every_theme():
    styles = set(get_all_styles())
    load_themes([resource_dir("themes")])  # our files name their code themes
    assert code_theme_for("oitui-dark") == "one-dark"
    assert code_theme_for("oitui-light") == "friendly"
    assert text_area_theme_for("oitui-dark") == "vscode_dark"
    assert text_area_theme_for("oitui-light") == "github_light"
    for name, theme in BUILTIN_THEMES.items():
        assert code_theme_for(name) in styles, name
        assert text_area_theme_for(name) in TEXT_AREA_THEMES, name
        light_code = code_theme_for(name) in {"default", "friendly", "solarized-light", "github_light"}
        assert light_code == (not theme.dark), name
    assert code_theme_for("somebody-elses-light") == "default"
    assert code_theme_for("somebody-elses", dark=True) == "monokai"


async def test_theme_switch_changes_the_screen_colours():
    app = Sampler("oitui-dark")
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert app.theme == "oitui-dark"
        dark_bg = app.screen.styles.background.hex.upper()
        app.theme = "oitui-light"
        await pilot.pause()
        light_bg = app.screen.styles.background.hex.upper()
        assert dark_bg == "#14181D" and light_bg == "#F6F7F9"


# ------------------------------------------------------------------------------- snapshots


@pytest.mark.parametrize("theme_name", OUR_THEMES)
def test_snapshot_theme(theme_name, snap_compare):
    """The sampler in one of our themes: title, status colours, a code block, buttons, input."""
    app = Sampler(theme_name)
    seen: dict = {}

    async def check(pilot):
        await pilot.pause()
        seen["theme"] = app.theme
        seen["bg"] = app.screen.styles.background.hex.upper()
        seen["placeholder"] = app.query_one(Input).placeholder

    assert snap_compare(app, terminal_size=(80, 24), run_before=check)
    expected_bg = {"oitui-dark": "#14181D", "oitui-light": "#F6F7F9"}[theme_name]
    assert seen == {"theme": theme_name, "bg": expected_bg, "placeholder": "Ask oitui to do something…"}


@dataclass
class _Info:
    id: str
    updated: datetime
    turns: int
    model: str
    harness: str
    cwd: str
    title: str
    error: str | None = None


@dataclass
class _Hit:
    info: _Info
    snippet: str
    message_index: int


@dataclass
class _Session:
    messages: list


class FrozenStore:
    """Fixed sessions (ids, dates, paths) so the browser snapshot is stable; same interface as
    SessionStore for what the browser uses."""

    def __init__(self):
        utc = timezone.utc
        self.data = {
            "k3v9q2ab": (
                _Info("k3v9q2ab", datetime(2026, 11, 28, 14, 5, tzinfo=utc), 2, "openai/gpt-4o-mini", "native",
                      "/home/ada/projects/plots", "Plot a sine wave and save it as PNG"),
                [
                    {"role": "user", "type": "message", "content": "Plot a sine wave and save it as PNG"},
                    {"role": "assistant", "type": "message", "content": "I'll use matplotlib."},
                    {"role": "assistant", "type": "code", "format": "python",
                     "content": "import numpy as np\nimport matplotlib.pyplot as plt"},
                    {"role": "computer", "type": "console", "format": "output", "content": "saved sine.png"},
                ],
            ),
            "m7p2x8cd": (
                _Info("m7p2x8cd", datetime(2026, 11, 27, 9, 30, tzinfo=utc), 1, "local/smollm2", "native",
                      "/home/ada", "How many files are in this folder?"),
                [{"role": "user", "type": "message", "content": "How many files are in this folder?"},
                 {"role": "assistant", "type": "code", "format": "shell", "content": "ls | wc -l"},
                 {"role": "computer", "type": "console", "format": "output", "content": "42"}],
            ),
            "q1w2e3rt": (
                _Info("q1w2e3rt", datetime(2026, 11, 20, 18, 0, tzinfo=utc), 5, "anthropic/claude-sonnet-4",
                      "native", "/srv/app", "Why does the nightly backup fail?", error="line 9: not JSON"),
                [{"role": "user", "type": "message", "content": "Why does the nightly backup fail?"}],
            ),
        }

    def list(self):
        return [info for info, _ in self.data.values()]

    def search(self, query):
        q = query.lower()
        return [_Hit(info, f"…{m['content']}…", i) for info, msgs in self.data.values()
                for i, m in enumerate(msgs) if q in str(m["content"]).lower()][:1]

    def open(self, ref):
        return _Session(self.data[ref][1])

    def delete(self, ref):
        del self.data[ref]

    def export(self, ref, fmt):
        return "# exported\n"


class BrowserHost(App):
    """The session browser over an empty screen, in a given theme."""

    def __init__(self, theme_name: str = "oitui-dark"):
        super().__init__()
        register_themes(self)
        self.wanted = theme_name

    def compose(self) -> ComposeResult:
        yield Label("conversation")

    def on_mount(self) -> None:
        from oitui.tui.sessions_screen import SessionBrowser

        self.theme = self.wanted
        self.push_screen(SessionBrowser(FrozenStore(), time_format=lambda d: d.strftime("%Y-%m-%d %H:%M")))


def test_snapshot_session_browser(snap_compare):
    """The session browser: three sessions (one damaged), the first highlighted with its preview."""
    app = BrowserHost()
    seen: dict = {}

    async def check(pilot):
        await pilot.pause()
        browser = app.screen
        seen["ids"] = browser.session_ids
        seen["highlighted"] = browser.highlighted_id
        seen["preview"] = str(browser.query_one("#session-preview").render())

    assert snap_compare(app, terminal_size=(110, 30), run_before=check)
    assert seen["ids"] == ["k3v9q2ab", "m7p2x8cd", "q1w2e3rt"]
    assert seen["highlighted"] == "k3v9q2ab"
    assert "Plot a sine wave" in seen["preview"] and "saved sine.png" in seen["preview"]


def test_snapshot_session_browser_search(snap_compare):
    """The session browser after typing a word found only in one session's output."""
    app = BrowserHost("oitui-light")
    seen: dict = {}

    async def check(pilot):
        import asyncio

        await pilot.press("slash", *"42")
        await pilot.pause(0.4)
        for _ in range(100):
            if not app.screen.searching:
                break
            await asyncio.sleep(0.05)
        await pilot.pause()
        seen["ids"] = app.screen.session_ids

    assert snap_compare(app, terminal_size=(110, 30), run_before=check)
    assert seen["ids"] == ["m7p2x8cd"]
