"""Fitting the conversation into the model's context window: estimating, trimming, compaction.

- :func:`estimate_tokens` counts a request's prompt tokens (litellm's counter when a model is
  given and litellm imports, else about 4 characters per token).
- :func:`trim_to_window` drops the oldest turns of an outgoing request (never the stored
  history) until it fits, keeping the system message, the newest user message and every tool
  call together with its results.
- :func:`split_for_compaction` and :data:`COMPACTION_PROMPT` prepare a summary of the older
  turns; the interpreter makes the model call and stores :func:`summary_message`.

litellm is imported lazily, only by :func:`estimate_tokens` when a model name is given.
"""

from __future__ import annotations

import os
from typing import Any, Callable

__all__ = [
    "estimate_tokens",
    "trim_to_window",
    "split_for_compaction",
    "needs_compaction",
    "summary_message",
    "add_cache_control",
    "COMPACTION_PROMPT",
    "SUMMARY_PREFIX",
    "OMITTED_NOTE",
]

#: The one-line note put where trimmed turns were.
OMITTED_NOTE = "[Earlier turns of this conversation were omitted to fit the model's context window.]"

#: Sent (as the user message after the older turns) to ask the model for a summary.
COMPACTION_PROMPT = """\
Summarise the conversation above so that you can continue the task without it. Write one \
concise message, in the user's language, covering:
- the user's goals and requests, with any exact values, names, paths and URLs they gave;
- what was done: commands and code that ran, files created or changed (with paths), and results;
- errors met and how they were solved, or whether they are still open;
- decisions made and constraints the user set (including code they declined to run);
- what remains to be done, and the next step.
Do not run code and do not call tools. Reply with the summary only."""

#: Prefix of the stored message that replaces the compacted turns.
SUMMARY_PREFIX = "Summary of the earlier conversation (older turns were compacted):\n\n"

_IMAGE_TOKENS = 765  # a high-detail 512px tile budget; images are rare, err on the high side
_MESSAGE_OVERHEAD = 4


def _fallback_count(openai_messages: list[dict]) -> int:
    chars = 0
    images = 0
    for m in openai_messages:
        if not isinstance(m, dict):
            continue
        content = m.get("content")
        if isinstance(content, str):
            chars += len(content)
        elif isinstance(content, list):
            for part in content:
                if not isinstance(part, dict):
                    continue
                if part.get("type") == "image_url":
                    images += 1
                else:
                    chars += len(str(part.get("text", "")))
        for call in m.get("tool_calls") or ():
            fn = call.get("function", {}) if isinstance(call, dict) else {}
            chars += len(str(fn.get("name", ""))) + len(str(fn.get("arguments", ""))) + 8
        for block in m.get("thinking_blocks") or ():
            if isinstance(block, dict):
                chars += len(str(block.get("thinking", "")))
        chars += len(str(m.get("tool_call_id", "")))
    return (chars + 3) // 4 + images * _IMAGE_TOKENS + _MESSAGE_OVERHEAD * len(openai_messages) + 3


def estimate_tokens(openai_messages: list[dict], model: str | None = None) -> int:
    """Estimated prompt tokens of ``openai_messages`` (OpenAI chat dicts).

    With a ``model`` name, litellm's ``token_counter`` is used (litellm imported lazily, with
    its local price map); without one, or when litellm is missing or fails on these messages,
    about one token per 4 characters plus a per-message overhead (images count 765 each).
    Never raises for well-formed messages; returns an int >= 0.
    """
    if not isinstance(openai_messages, (list, tuple)):
        raise TypeError(f"openai_messages must be a list, got {type(openai_messages).__name__}")
    if model:
        try:
            os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
            import litellm  # noqa: PLC0415 - lazy on purpose

            return int(litellm.token_counter(model=model, messages=list(openai_messages)))
        except Exception:
            pass
    return _fallback_count(list(openai_messages))


def _units(messages: list[dict]) -> list[list[dict]]:
    """Group messages so an assistant tool_calls message and its tool results form one unit."""
    units: list[list[dict]] = []
    for m in messages:
        if m.get("role") == "tool" and units and (units[-1][0].get("tool_calls")):
            units[-1].append(m)
        else:
            units.append([m])
    return units


def _prepend_note(msg: dict) -> dict:
    content = msg.get("content")
    if isinstance(content, list):
        return {**msg, "content": [{"type": "text", "text": OMITTED_NOTE}] + list(content)}
    return {**msg, "content": OMITTED_NOTE + "\n\n" + (content or "")}


def trim_to_window(
    openai_messages: list[dict],
    max_prompt_tokens: int,
    count: Callable[[list[dict]], int] = estimate_tokens,
) -> list[dict]:
    """Drop the oldest turns of an outgoing request until it fits ``max_prompt_tokens``.

    ``openai_messages`` are OpenAI chat dicts (as :func:`oitui.core.lmc.to_openai_messages`
    makes them); the input is not modified. Always kept: the leading system message(s), the
    newest user message and everything after it, and every assistant ``tool_calls`` message
    together with all its ``tool`` results (a pair is dropped or kept whole). Whole turns (a
    user message and what follows up to the next one) go first, oldest first; if the newest
    turn alone is still too long, its oldest assistant/tool units go next. Where something was
    dropped, :data:`OMITTED_NOTE` is inserted (merged into the next user message, or as a user
    message of its own). When nothing more can go, the shortest possible list is returned even
    if still over the limit. ``count(messages) -> int`` is called once per message (costs are
    summed), so trimming long histories stays linear.
    """
    if not isinstance(openai_messages, (list, tuple)):
        raise TypeError(f"openai_messages must be a list, got {type(openai_messages).__name__}")
    if not isinstance(max_prompt_tokens, int) or max_prompt_tokens <= 0:
        raise ValueError(f"max_prompt_tokens must be a positive int, got {max_prompt_tokens!r}")
    msgs = list(openai_messages)
    head_len = 0
    while head_len < len(msgs) and msgs[head_len].get("role") == "system":
        head_len += 1
    head, body = msgs[:head_len], msgs[head_len:]

    cost = [max(0, int(count([m]))) for m in body]
    head_cost = sum(max(0, int(count([m]))) for m in head)
    note_cost = max(0, int(count([{"role": "user", "content": OMITTED_NOTE}])))
    total = head_cost + sum(cost)
    if total <= max_prompt_tokens:
        return msgs

    last_user = max((i for i, m in enumerate(body) if m.get("role") == "user"), default=None)
    # Units with their start index in body.
    units: list[tuple[int, int]] = []  # (start, end) half-open
    i = 0
    for u in _units(body):
        units.append((i, i + len(u)))
        i += len(u)
    if last_user is not None:
        protected_from = last_user
    else:  # no user message at all: keep at least the newest unit
        protected_from = units[-1][0] if units else 0

    def unit_cost(u: tuple[int, int]) -> int:
        return sum(cost[u[0] : u[1]])

    # Turn boundaries: a unit starting with a user message starts a turn.
    drop_upto = 0  # body[:drop_upto] is dropped
    budget = max_prompt_tokens - head_cost - note_cost
    remaining = sum(cost)
    # 1. whole turns before the newest user message
    k = 0
    while remaining > budget and k < len(units) and units[k][0] < protected_from:
        # drop until the next turn start (a user message) or the protected part
        start = units[k][0]
        j = k + 1
        while j < len(units) and units[j][0] < protected_from and body[units[j][0]].get("role") != "user":
            j += 1
        end = units[j][0] if j < len(units) else len(body)
        end = min(end, protected_from) if start < protected_from else end
        remaining -= sum(cost[start:end])
        drop_upto = end
        k = j
    # 2. oldest units after the newest user message (never the user message itself, never the last unit)
    dropped_inner: list[tuple[int, int]] = []
    if remaining > budget and last_user is not None:
        inner = [u for u in units if u[0] > last_user]
        for u in inner[:-1]:
            if remaining <= budget:
                break
            dropped_inner.append(u)
            remaining -= unit_cost(u)

    if drop_upto == 0 and not dropped_inner:
        return msgs
    skip = set()
    for a, b_ in dropped_inner:
        skip.update(range(a, b_))
    kept_before = [m for idx, m in enumerate(body[drop_upto:], start=drop_upto) if idx not in skip and (last_user is None or idx <= last_user)]
    kept_after = [m for idx, m in enumerate(body) if last_user is not None and idx > last_user and idx not in skip]
    out = list(head)
    if drop_upto > 0:
        if kept_before and kept_before[0].get("role") == "user":
            kept_before[0] = _prepend_note(kept_before[0])
        else:
            out.append({"role": "user", "content": OMITTED_NOTE})
    out.extend(kept_before)
    if dropped_inner:
        # Keep roles valid: the newest user message, then a note (as text on it), then the rest.
        if out and out[-1].get("role") == "user":
            last = out[-1]
            content = last.get("content")
            if isinstance(content, list):
                out[-1] = {**last, "content": list(content) + [{"type": "text", "text": OMITTED_NOTE}]}
            else:
                out[-1] = {**last, "content": (content or "") + "\n\n" + OMITTED_NOTE}
    out.extend(kept_after)
    return out


def needs_compaction(prompt_tokens: int, context_window: int, max_tokens: int | None = None, threshold: float = 0.8) -> bool:
    """True when a request of ``prompt_tokens`` plus ``max_tokens`` of reply fills more than
    ``threshold`` (0-1) of ``context_window`` tokens. Raises ``ValueError`` for a window <= 0."""
    if not context_window or context_window <= 0:
        raise ValueError(f"context_window must be a positive number of tokens, got {context_window!r}")
    return prompt_tokens + (max_tokens or 0) > threshold * context_window


def _turn_starts(messages: list[dict]) -> list[int]:
    starts = []
    for i, m in enumerate(messages):
        if m.get("role") == "user" and (i == 0 or messages[i - 1].get("role") != "user"):
            starts.append(i)
    return starts


def split_for_compaction(messages: list[dict], keep_recent_turns: int = 2) -> tuple[list[dict], list[dict]]:
    """Split stored LMC messages into ``(older, recent)`` for compaction.

    ``recent`` starts at the user message that begins the ``keep_recent_turns``-th newest user
    turn (consecutive user messages, e.g. text plus an image, form one turn start), so a call
    and its result are never separated. ``older`` is everything before (``[]`` when there are
    not more than ``keep_recent_turns`` turns: nothing to compact). The interpreter sends
    ``older`` (converted) plus :data:`COMPACTION_PROMPT` to the model and replaces ``older`` by
    :func:`summary_message` of its answer in the outgoing history. Raises ``ValueError`` for a
    negative ``keep_recent_turns``.
    """
    if not isinstance(messages, (list, tuple)):
        raise TypeError(f"messages must be a list of LMC dicts, got {type(messages).__name__}")
    if not isinstance(keep_recent_turns, int) or keep_recent_turns < 0:
        raise ValueError(f"keep_recent_turns must be an int >= 0, got {keep_recent_turns!r}")
    msgs = list(messages)
    if keep_recent_turns == 0:
        return msgs, []
    starts = _turn_starts(msgs)
    if len(starts) <= keep_recent_turns:
        return [], msgs
    cut = starts[-keep_recent_turns]
    return msgs[:cut], msgs[cut:]


def summary_message(summary: str, **extra: Any) -> dict:
    """The LMC message that stands for compacted turns: a user ``message`` starting with
    :data:`SUMMARY_PREFIX` and carrying ``"compacted": True`` (plus ``extra`` fields)."""
    msg = {"role": "user", "type": "message", "content": SUMMARY_PREFIX + (summary or "").strip(), "compacted": True}
    msg.update({k: v for k, v in extra.items() if v is not None})
    return msg


_CACHE = {"type": "ephemeral"}


def add_cache_control(openai_messages: list[dict], provider: str | None) -> list[dict]:
    """Mark prompt-cache breakpoints for Anthropic (litellm's message-level ``cache_control``).

    For ``provider == "anthropic"``: a copy of ``openai_messages`` where the first system
    message and the newest user or tool message (the latest turn) carry
    ``"cache_control": {"type": "ephemeral"}`` (two of Anthropic's four breakpoints; the tool
    definitions come before the system prompt, so they are cached with it). For any other
    provider the list is returned unchanged (other APIs reject the key). Input dicts are not
    modified.
    """
    if not isinstance(openai_messages, (list, tuple)):
        raise TypeError(f"openai_messages must be a list, got {type(openai_messages).__name__}")
    msgs = list(openai_messages)
    if provider != "anthropic":
        return msgs
    for i, m in enumerate(msgs):
        if m.get("role") == "system":
            msgs[i] = {**m, "cache_control": dict(_CACHE)}
            break
    for i in range(len(msgs) - 1, -1, -1):
        if msgs[i].get("role") in ("user", "tool"):
            msgs[i] = {**msgs[i], "cache_control": dict(_CACHE)}
            break
    return msgs
