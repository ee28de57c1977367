"""Slash commands (``/help``, ``/model`` …), Open Interpreter's ``%`` magic aliases, completion,
and the command-palette provider listing each as ``category: action``.

A command runs as ``await app.run_command(name, arg)``: the app implements ``cmd_<name>(arg)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from textual.command import DiscoveryHit, Hit, Hits, Provider


@dataclass(frozen=True)
class Command:
    """One slash command: ``name`` (without ``/``), palette ``title`` ("category: action"), ``usage``."""

    name: str
    title: str
    usage: str
    help: str


COMMANDS: list[Command] = [
    Command("help", "help: show commands and keys", "/help", "list commands and keys"),
    Command("model", "model: choose the model", "/model [name]", "pick or set the model"),
    Command("harness", "model: choose the harness", "/harness [name]", "pick the harness (native only for now)"),
    Command("auto-run", "safety: toggle auto-run", "/auto-run [on|off]", "run code without asking"),
    Command("reset", "session: reset the conversation", "/reset", "forget the conversation (new session)"),
    Command("undo", "session: undo the last turn", "/undo", "remove the last user turn and what followed"),
    Command("save", "session: save conversation to a file", "/save [path]", "write LMC v1 JSON"),
    Command("load", "session: load conversation from a file", "/load [path]", "read ours or Open Interpreter's JSON"),
    Command("sessions", "session: browse saved sessions", "/sessions", "open the session browser (ctrl+s)"),
    Command("export", "session: export the session", "/export md|ipynb|json", "export to a file"),
    Command("tokens", "info: tokens and cost", "/tokens", "context size and estimated cost of the next request"),
    Command("theme", "view: change theme", "/theme [name]", "pick a theme"),
    Command("copy", "edit: copy last reply or output", "/copy", "copy the last reply (or output) to the clipboard"),
    Command("info", "info: session and system info", "/info", "model, paths, versions"),
    Command("clear", "view: clear the screen", "/clear", "clear the panes (the conversation is kept)"),
    Command("quit", "app: quit", "/quit", "save and quit (ctrl+q)"),
]

BY_NAME = {c.name: c for c in COMMANDS}
ALIASES = {
    "exit": "quit", "q": "quit", "autorun": "auto-run", "auto_run": "auto-run",
    "%reset": "reset", "%undo": "undo", "%save_message": "save", "%load_message": "load",
    "%tokens": "tokens", "%info": "info", "%help": "help",
}


def parse(text: str) -> tuple[str, str] | None:
    """Parse a typed line into ``(command, argument)``, or None when it is not a command.

    ``/save out.json`` -> ("save", "out.json"); ``%% ls`` -> ("shell", "ls");
    ``!ls`` -> ("shell", "ls"); an unknown ``/word`` -> ("unknown", "/word").
    Multi-line text is never a command (a pasted ``/help`` line must not run).
    """
    stripped = text.strip()
    if not stripped or "\n" in stripped:
        return None
    if stripped.startswith("%%"):
        return ("shell", stripped[2:].strip())
    if stripped.startswith("!") and len(stripped) > 1:
        return ("shell", stripped[1:].strip())
    if stripped.startswith("/") or stripped.startswith("%"):
        word, _, arg = stripped.partition(" ")
        key = word[1:] if word.startswith("/") else word
        name = ALIASES.get(key, ALIASES.get(word, key))
        if name in BY_NAME:
            return (name, arg.strip())
        if word.startswith("/") and (len(word) == 1 or "/" in word[1:]):
            return None  # a path like /etc/hosts, not a command
        return ("unknown", word)
    return None


def complete(text: str) -> str | None:
    """Tab completion: the command ``text`` (a partial ``/na``) completes to, or None."""
    if " " in text or "\n" in text:
        return None
    matches = matching(text)
    if not matches:
        return None
    if len(matches) == 1:
        return "/" + matches[0].name + " "
    prefix = _common_prefix([m.name for m in matches])
    return "/" + prefix if len(prefix) + 1 > len(text) else None


def matching(text: str) -> list[Command]:
    """Commands whose name starts with what follows the ``/`` in ``text``."""
    if not text.startswith("/") or " " in text:
        return []
    word = text[1:]
    return [c for c in COMMANDS if c.name.startswith(word)]


def _common_prefix(names: list[str]) -> str:
    first = names[0]
    for i, ch in enumerate(first):
        if any(len(n) <= i or n[i] != ch for n in names):
            return first[:i]
    return first


class SlashCommandProvider(Provider):
    """Command-palette entries ``category: action`` for every slash command."""

    async def discover(self) -> Hits:
        for cmd in COMMANDS:
            yield DiscoveryHit(cmd.title, partial(self._run, cmd.name), help=cmd.usage)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for cmd in COMMANDS:
            score = matcher.match(cmd.title)
            if score > 0:
                yield Hit(score, matcher.highlight(cmd.title), partial(self._run, cmd.name), help=cmd.usage)

    def _run(self, name: str) -> None:
        self.app.call_later(self.app.run_command, name, "")
