"""The sidebar: model (and why it was chosen), harness, auto-run, safe mode, sandbox, tokens in/out,
cost and budget left, session title, working directory and the state of background loads.

Every field is a reactive; the app sets them from core messages and the sidebar repaints."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual.reactive import reactive
from textual.widget import Widget


def _money(value) -> str:
    if value is None:
        return "unknown"
    return f"${value:,.4f}" if value < 1 else f"${value:,.2f}"


class Sidebar(Widget):
    """Facts about the session. Fields (all reactive): model, model_reason, harness, auto_run,
    always (comma-separated languages allowed with "a" this session, "" for none),
    safe_mode, sandbox, tokens_in, tokens_out, cost (USD or None = unknown), budget (USD or None),
    session_title, session_id, cwd, kernel, llm (load state text)."""

    model: reactive[str] = reactive("loading…")
    model_reason: reactive[str] = reactive("")
    harness: reactive[str] = reactive("native")
    auto_run: reactive[bool] = reactive(False)
    always: reactive[str] = reactive("")
    safe_mode: reactive[str] = reactive("off")
    sandbox: reactive[str] = reactive("off")
    tokens_in: reactive[int] = reactive(0)
    tokens_out: reactive[int] = reactive(0)
    cost: reactive[float | None] = reactive(0.0)
    budget: reactive[float | None] = reactive(None)
    session_title: reactive[str] = reactive("new session")
    session_id: reactive[str] = reactive("")
    cwd: reactive[str] = reactive("")
    kernel: reactive[str] = reactive("starts on first use")
    llm: reactive[str] = reactive("loading…")

    def render(self) -> Table:
        table = Table.grid(padding=(0, 1))
        table.add_column(style="dim", no_wrap=True)
        table.add_column(overflow="fold")
        table.add_row("model", Text(self.model))
        if self.model_reason:
            table.add_row("", Text(self.model_reason, style="dim italic"))
        table.add_row("harness", self.harness)
        if self.auto_run:
            auto = Text("on", style="bold red")
        elif self.always:
            auto = Text(f"{self.always} always", style="bold yellow")
        else:
            auto = Text("off")
        table.add_row("auto-run", auto)
        table.add_row("safe mode", str(self.safe_mode))
        table.add_row("sandbox", str(self.sandbox))
        table.add_row("tokens", f"{self.tokens_in:,} in / {self.tokens_out:,} out")
        cost = "$0.00" if self.cost is None and not (self.tokens_in or self.tokens_out) else _money(self.cost)
        if self.budget:
            left = None if self.cost is None else max(0.0, self.budget - self.cost)
            cost += f" (left {_money(left)} of {_money(self.budget)})"
        table.add_row("cost", cost)
        table.add_row("session", Text(self.session_title))
        if self.session_id:
            table.add_row("id", self.session_id)
        table.add_row("cwd", Text(self.cwd))
        table.add_row("llm", Text(self.llm))
        table.add_row("kernel", Text(self.kernel))
        return table
