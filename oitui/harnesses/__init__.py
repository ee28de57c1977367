"""Harness emulation (per-model-family prompts, tool schemas and output parsing).

Only ``native`` exists so far; the others (claude-code, kimi-cli, ...) arrive with the harness issue.
"""

AVAILABLE_HARNESSES = ("native",)
PLANNED_HARNESSES = (
    "native",
    "claude-code",
    "claude-code-bare",
    "kimi-cli",
    "qwen-code",
    "deepseek-tui",
    "swe-agent",
    "minimal",
)
