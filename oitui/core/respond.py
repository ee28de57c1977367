"""The respond loop: model -> code -> approval -> computer -> model, as a generator of LMC chunks.

:func:`respond` drives one user turn for an :class:`~oitui.core.interpreter.OpenInterpreter`
whose last stored message is the user's. It yields streaming LMC chunks (DESIGN.md, "LMC
messages"): every run of one role/type/format is opened by a chunk with ``"start": True`` and
closed by one with ``"end": True`` (console output and active lines share one run); ephemeral
chunks (``active_line``, ``confirmation``, ``input_request``) are never stored. Finished messages
are stored with ``interp._store(msg)``.

Per model request (bounded by ``max_turns``):

1. build the request (LMC -> OpenAI messages, compaction/trimming to the context window,
   budget pre-check), stream the reply;
2. function mode: tool calls accumulate by ``index``; text mode: markdown fences are parsed as
   the deltas arrive (``parsing.FenceParser``);
3. when the reply finished normally, each block runs in order (approval first unless auto-run);
   its output (terminal text cut to ``max_output``) is stored and answers its ``call_id``;
4. if something ran, ask the model again; else the turn ends (loop mode re-prompts with the loop
   message until a loop breaker, ``max_turns`` or three empty replies in a row).

Ending rules: a declined block ends the turn (later calls of the same reply are answered "not
run"); the same block failing ``max_retries_per_code_block`` times raises ``LimitReached``
("retries"); an identical block that already succeeded twice with the same output is not run
again and ends the turn (small models otherwise repeat it until ``max_turns``); a reply cut by
the token limit is not run and ends the turn.

Failures: a model error stores what is consistent (the reply's text only, never an unanswered
tool call), yields one ``error`` chunk and raises ``ModelError``; a provider's "context window
exceeded" is retried once after compaction with half the prompt budget; limits raise
``LimitReached`` (after an ``error`` chunk). When the consumer drops the generator mid-run, the
running code is stopped and what it printed is stored.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING, Any, Iterator

from oitui.core.approval import Approval, ApprovalRequest
from oitui.core.errors import LimitReached, ModelError

if TYPE_CHECKING:  # pragma: no cover
    from oitui.core.interpreter import OpenInterpreter

log = logging.getLogger("oitui.respond")

#: Stop the loop after this many consecutive replies with neither text nor code.
MAX_EMPTY_REPLIES = 3

DECLINED = "I have declined to run this code."

#: An identical block that already succeeded this many times with the same output ends the turn.
REPEAT_LIMIT = 2
REPEATED = ("Not run again: this exact code already ran twice in this turn with the same output. "
            "The turn ended; tell the user the result.")

_ERROR_MARKERS = re.compile(
    r"Traceback \(most recent call last\)|\b\w*Error\b|command not found|No such file or directory|"
    r"syntax error|Exception\b",
)

EXECUTE_TOOL_NAME = "execute"


def execute_tool_schema(languages: list[str]) -> dict:
    """The OpenAI tool schema of ``execute(language, code)`` for these canonical languages."""
    return {
        "type": "function",
        "function": {
            "name": EXECUTE_TOOL_NAME,
            "description": "Executes code on the user's machine **in the user's local environment** and returns the output.",
            "parameters": {
                "type": "object",
                "properties": {
                    "language": {
                        "type": "string",
                        "description": "The programming language (required parameter to the `execute` function).",
                        "enum": list(languages),
                    },
                    "code": {"type": "string", "description": "The code to execute (required)."},
                },
                "required": ["language", "code"],
            },
        },
    }


class RunTracker:
    """Adds start/end flags: one pair around each run of one role/type/format.

    ``emit(chunk)`` returns the chunks to yield (maybe an end for the previous run, a start for a
    new one, then the chunk); ``close()`` returns the end chunk of the open run, if any.
    Console output, active lines and input requests share one run (key role/type "console").
    """

    def __init__(self) -> None:
        self.key: tuple | None = None
        self.base: dict | None = None

    @staticmethod
    def _key(chunk: dict) -> tuple:
        if chunk.get("type") == "console":
            return (chunk.get("role"), "console", chunk.get("call_id"))
        return (chunk.get("role"), chunk.get("type"), chunk.get("format"), chunk.get("call_id"))

    def emit(self, chunk: dict) -> list[dict]:
        if chunk.get("__close__"):
            return self.close()
        out: list[dict] = []
        key = self._key(chunk)
        if key != self.key:
            out.extend(self.close())
            base = {"role": chunk["role"], "type": chunk["type"]}
            fmt = chunk.get("format")
            if chunk.get("type") == "console":
                fmt = "output"
            if fmt is not None:
                base["format"] = fmt
            for extra in ("call_id",):
                if chunk.get(extra) is not None:
                    base[extra] = chunk[extra]
            self.key, self.base = key, base
            out.append({**base, "start": True})
        out.append(chunk)
        return out

    def close(self) -> list[dict]:
        if self.key is None:
            return []
        end = {**(self.base or {}), "end": True}
        self.key, self.base = None, None
        return [end]


class _Block:
    """One unit of work from a reply: a code block or a tool call, in reply order."""

    def __init__(self, *, message: dict | None, call_id: str | None = None, language: str | None = None,
                 code: str | None = None, error: str | None = None, tag: str | None = None,
                 not_runnable: str | None = None) -> None:
        self.message = message  # the stored assistant message (code or tool_call)
        self.call_id = call_id
        self.language = language
        self.code = code
        self.error = error  # a tool-call error to answer with (unknown tool, bad arguments)
        self.tag = tag
        self.not_runnable = not_runnable  # a reason the code is not run (language, empty)


def _result(content: str, call_id: str | None) -> dict:
    msg = {"role": "computer", "type": "console", "format": "output", "content": content}
    if call_id:
        msg["call_id"] = call_id
    return msg


def _supported_text(interp: "OpenInterpreter") -> str:
    try:
        langs = list(interp.computer.languages)
    except Exception:
        langs = ["python", "shell"]
    return ", ".join(langs)


def _check_language(interp: "OpenInterpreter", tag: str | None, code: str) -> tuple[str | None, str | None]:
    """(canonical language, None) when runnable, else (format to store, reason message)."""
    from oitui.computer.languages import is_display_only, normalize_language

    supported = _supported_text(interp)
    if not code.strip():
        lang = normalize_language(tag) or (tag or "python").strip().lower() or "python"
        return lang, f"The code block was empty; nothing was run. Write the code to run (languages: {supported})."
    raw = (tag or "").strip()
    if not raw:
        from oitui.core.parsing import guess_language

        return guess_language(code) or "python", None
    if is_display_only(raw):
        return raw.lower(), (f"`{raw.lower()}` blocks are for display only and are not run. "
                             f"To run code use one of: {supported}.")
    lang = normalize_language(raw)
    if lang is None:
        return raw.lower(), f"`{raw.lower()}` is not a supported language; available: {supported}."
    disabled = getattr(interp, "disabled_languages", None) or ()
    if lang in disabled:
        return lang, f"`{lang}` is disabled; available: {supported}."
    try:
        ok, why = interp.computer.available(lang)
    except Exception as e:  # pragma: no cover - defensive
        ok, why = False, str(e)
    if not ok:
        # DESIGN.md's one-message form (the same text the computer gives)
        return lang, f"`{lang}` is not available on this machine ({why}); available: {supported}"
    return lang, None


def _looks_failed(output: str) -> bool:
    return bool(_ERROR_MARKERS.search(output or ""))


def _merge_consecutive_users(msgs: list[dict]) -> list[dict]:
    """Join adjacent user messages so roles alternate whatever the history holds."""
    out: list[dict] = []
    for m in msgs:
        if out and m.get("role") == "user" and out[-1].get("role") == "user":
            a, b = out[-1].get("content"), m.get("content")
            if isinstance(a, str) and isinstance(b, str):
                out[-1] = {**out[-1], "content": (a + "\n\n" + b) if a and b else (a or b)}
                continue
            if isinstance(a, list) or isinstance(b, list):
                la = a if isinstance(a, list) else ([{"type": "text", "text": a}] if a else [])
                lb = b if isinstance(b, list) else ([{"type": "text", "text": b}] if b else [])
                out[-1] = {**out[-1], "content": la + lb}
                continue
        out.append(m)
    return out


def estimate_tokens(msgs: list[dict]) -> int:
    """Token estimate of OpenAI messages (``context.estimate_tokens``; chars/4 if unavailable)."""
    try:
        from oitui.core import context

        return int(context.estimate_tokens(msgs))
    except ImportError:
        import json as _json

        return len(_json.dumps(msgs, ensure_ascii=False)) // 4 + 1


def build_request(interp: "OpenInterpreter") -> tuple[list[dict], list[dict] | None]:
    """The OpenAI messages and tools of the next request (compacted/trimmed to the window)."""
    from oitui.core import lmc

    fc = interp.llm.function_calling()
    history = interp._history_for_model()
    msgs = lmc.to_openai_messages(
        history,
        system_message=interp.full_system_message(function_calling=fc),
        function_calling=fc,
        vision=interp.llm.vision(),
        provider=interp._provider(),
    )
    msgs = _merge_consecutive_users(msgs)
    budget = interp._max_prompt_tokens()
    try:
        if estimate_tokens(msgs) > budget:
            from oitui.core import context

            msgs = context.trim_to_window(msgs, budget)
    except Exception as e:  # never lose the turn to a trimming bug
        log.warning("trimming failed: %s", e)
    if interp._provider() == "anthropic":
        msgs = add_cache_control(msgs)
    tools = [execute_tool_schema(list(interp.computer.languages))] if fc else None
    return msgs, tools


def add_cache_control(msgs: list[dict]) -> list[dict]:
    """Anthropic prompt caching (litellm's ``cache_control``): mark the system message and the
    latest user/tool message as ephemeral cache breakpoints. Returns a new list."""
    out = [dict(m) for m in msgs]

    def mark(m: dict) -> None:
        content = m.get("content")
        if isinstance(content, str) and content:
            m["content"] = [{"type": "text", "text": content, "cache_control": {"type": "ephemeral"}}]
        elif isinstance(content, list) and content:
            parts = [dict(p) for p in content]
            parts[-1]["cache_control"] = {"type": "ephemeral"}
            m["content"] = parts

    if out and out[0].get("role") == "system":
        mark(out[0])
    for m in reversed(out):
        if m.get("role") in ("user", "tool"):
            mark(m)
            break
    return out


def respond(interp: "OpenInterpreter") -> Iterator[dict]:
    """Run the loop for the current user turn; yield LMC chunks. See the module docstring."""
    runs = RunTracker()
    turns = 0
    empty_replies = 0
    failures: dict[tuple[str, str], int] = {}
    repeats: dict[tuple[str, str], list[str]] = {}  # successful runs' outputs per identical block
    shrunk = False
    interp._window_factor = 1.0
    max_turns = interp.max_turns
    while True:
        if interp._stop_requested():
            return
        turns += 1
        if max_turns is not None and turns > int(max_turns):
            msg = f"Stopped: this turn reached max_turns ({max_turns} model requests)."
            yield {"role": "computer", "type": "error", "content": msg, "kind": "max_turns"}
            raise LimitReached(msg, kind="max_turns")

        # 1. the request -----------------------------------------------------------------------
        try:
            interp._maybe_compact()
        except ModelError as e:
            log.warning("compaction failed: %s", e)
        msgs, tools = build_request(interp)
        try:
            est = estimate_tokens(msgs)
            interp.llm.check_budget(est, interp.metrics.get("cost"), interp.max_budget)
        except LimitReached as e:
            yield {"role": "computer", "type": "error", "content": str(e), "kind": "budget"}
            raise
        note = interp.llm.price_unknown_note() if interp.max_budget is not None else None
        if note:
            yield {"role": "computer", "type": "error", "content": note, "kind": "price_unknown"}

        # 2. the reply -------------------------------------------------------------------------
        reply = _Reply(interp, function_calling=bool(tools))
        try:
            for delta in interp.llm.stream(msgs, tools):
                for chunk in reply.feed(delta):
                    yield from runs.emit(chunk)
                if interp._stop_requested():
                    break
        except ModelError as e:
            if getattr(e, "context_exceeded", False) and not getattr(e, "mid_stream", False) and not shrunk:
                # the provider counts tokens differently: compact, halve the budget, try once more
                shrunk = True
                interp._window_factor = 0.5
                try:
                    interp.compact()
                except ModelError as ce:
                    log.warning("compaction failed: %s", ce)
                turns -= 1
                continue
            yield from runs.close()
            for m in reply.partial_messages():
                interp._store(m)
            if reply.usage or getattr(e, "mid_stream", False):
                # a request that failed before its first token was not billed: count nothing
                interp._count_usage(reply.usage, msgs)
            yield {"role": "computer", "type": "error", "content": str(e), "kind": "model"}
            raise
        for chunk in reply.finish():
            yield from runs.emit(chunk)
        yield from runs.close()
        interp._count_usage(reply.usage, msgs)

        if interp._stop_requested():
            for m in reply.partial_messages():
                interp._store(m)
            return

        blocks = reply.blocks
        if reply.finish_reason == "length":
            for m in reply.messages:
                interp._store(m)
            note = ("The reply was cut off at the token limit (max_tokens) before it was complete; "
                    "its code was not run.")
            for b in blocks:
                if b.message is not None:
                    interp._store(_result(note, b.call_id))
            yield {"role": "computer", "type": "error", "content": note, "kind": "length"}
            return

        if not reply.messages and not blocks:
            empty_replies += 1
            if interp.loop and empty_replies < MAX_EMPTY_REPLIES:
                interp._store({"role": "user", "type": "message", "content": interp.loop_message})
                continue
            return
        empty_replies = 0

        if not blocks:
            for m in reply.messages:
                interp._store(m)
            if interp.loop:
                text = " ".join(str(m.get("content") or "") for m in reply.messages if m.get("type") == "message")
                if any(b.lower() in text.lower() for b in interp.loop_breakers):
                    return
                interp._store({"role": "user", "type": "message", "content": interp.loop_message})
                continue
            return

        # 3. run the blocks --------------------------------------------------------------------
        results: list[dict] = []
        stop_turn: str | None = None  # "declined" | "stopped" | "retries"
        limit_msg = None
        try:
            for b in blocks:
                if stop_turn:
                    if b.call_id:
                        why = {"declined": "Not run: the user declined an earlier block.",
                               "repeated": "Not run: the turn ended.",
                               "stopped": "Not run: the user stopped the run.",
                               "retries": "Not run: the turn was stopped."}[stop_turn]
                        results.append(_result(why, b.call_id))
                    continue
                if b.error is not None or b.not_runnable is not None:
                    res = _result(b.error if b.error is not None else b.not_runnable, b.call_id)
                    results.append(res)
                    yield from _show(runs, res)
                    continue
                key = (b.language or "", (b.code or "").strip())
                limit = interp.max_retries_per_code_block
                if len(set(repeats.get(key, []))) == 1 and len(repeats[key]) >= REPEAT_LIMIT:
                    # the model asks for code that already ran twice with the same result: it is
                    # not making progress; end the turn instead of looping to max_turns
                    res = _result(REPEATED, b.call_id)
                    results.append(res)
                    yield from _show(runs, res)
                    stop_turn = "repeated"
                    continue
                if limit is not None and failures.get(key, 0) >= int(limit):
                    limit_msg = (f"Stopped: the same {b.language} code failed {failures[key]} times "
                                 f"(max_retries_per_code_block = {limit}); it was not run again.")
                    results.append(_result(limit_msg, b.call_id))
                    stop_turn = "retries"
                    continue
                # approval
                approval = yield from _approve(interp, b)
                if interp._stop_requested():
                    results.append(_result("Not run: the user stopped the run.", b.call_id))
                    stop_turn = "stopped"
                    continue
                if approval.action == "decline":
                    text = DECLINED + (f" {approval.reason.strip()}" if approval.reason and approval.reason.strip() else "")
                    res = _result(text, b.call_id)
                    results.append(res)
                    yield from _show(runs, res)
                    stop_turn = "declined"
                    continue
                if approval.action == "always" and b.language:
                    interp._always_languages.add(b.language)
                if approval.code is not None and approval.code != b.code:
                    b.code = approval.code
                    if b.message is not None:
                        b.message["content"] = approval.code
                        if isinstance(b.message.get("tool"), dict):
                            import json as _json

                            b.message["tool"]["arguments"] = _json.dumps(
                                {"language": b.language, "code": approval.code}, ensure_ascii=False)
                        b.message["edited"] = True
                    key = (b.language or "", (b.code or "").strip())
                # execution
                before = len(results)
                yield from _execute(interp, b, runs, results)
                text_out = "".join(m.get("content") or "" for m in results[before:] if m.get("type") == "console")
                if _looks_failed(text_out):
                    failures[key] = failures.get(key, 0) + 1
                else:
                    repeats.setdefault(key, []).append(text_out)
                if interp._stop_requested():
                    stop_turn = "stopped"
        finally:  # no yield here: a consumer closing the generator must not be answered with chunks
            for m in reply.messages:
                interp._store(m)
            for m in results:
                interp._store(m)
        yield from runs.close()
        if stop_turn == "retries":
            yield {"role": "computer", "type": "error", "content": limit_msg, "kind": "retries"}
            raise LimitReached(limit_msg or "max_retries_per_code_block reached", kind="retries")
        if stop_turn in ("declined", "stopped", "repeated"):
            return
        # 4. loop: the model sees the results


def _show(runs: RunTracker, msg: dict) -> Iterator[dict]:
    """Yield a stored-only result (decline, not-runnable notice) as one console run."""
    yield from runs.emit(dict(msg))
    yield from runs.close()


#: How many times an invalid answer from the approval handler is asked again before declining.
MAX_INVALID_ANSWERS = 5

_ANSWERS = {"run": "run", "y": "run", "yes": "run", "decline": "decline", "n": "decline", "no": "decline",
            "always": "always", "a": "always"}


def _as_approval(answer: Any) -> Approval | None:
    """The handler's answer as an Approval, or None when it is not a valid answer (ask again).
    Accepts an Approval, a bool, None (no answer: decline), or one of "run/y/yes",
    "decline/n/no", "always/a"."""
    if answer is None:
        return Approval(action="decline")
    if isinstance(answer, bool):
        return Approval(action="run" if answer else "decline")
    if isinstance(answer, str):
        action = _ANSWERS.get(answer.strip().lower())
        return Approval(action=action) if action else None
    if isinstance(answer, Approval) and answer.action in ("run", "decline", "always"):
        return answer
    return None


def _scan(interp: "OpenInterpreter", language: str | None, code: str | None) -> list:
    scanner = getattr(interp, "code_scanner", None)
    if scanner is None or (interp.safe_mode or "off") == "off":
        return []
    try:
        return list(scanner(language, code) or [])
    except Exception as e:
        log.warning("code scanner failed: %s", e)
        return [f"the scan failed: {e}"]


def _approve(interp: "OpenInterpreter", b: _Block) -> Iterator[dict]:
    """Yield the confirmation chunk (when asking) and return the Approval (generator return).

    With ``interp.code_scanner`` set (the safety layer's seam: ``scanner(language, code) ->
    list of findings``) and ``safe_mode`` not "off", the code is scanned first; findings are
    put in the request and make it ask even when auto-run is on or the language was "always"
    approved. An answer that runs *edited* code has the edited code scanned too: findings in it
    ask again (with the edited code and its findings) before anything runs. An invalid answer
    (not an Approval/bool/known word) asks again, up to ``MAX_INVALID_ANSWERS`` times, then
    declines. A handler that raises declines with the reason."""
    findings = _scan(interp, b.language, b.code)
    if not findings and (interp.auto_run or (b.language in interp._always_languages)):
        return Approval(action="run")
    code = b.code
    invalid = 0
    edits = 0
    while True:
        content = dict(b.message or {"role": "assistant", "type": "code", "format": b.language, "content": code})
        content["content"] = code
        yield {"role": "computer", "type": "confirmation", "format": "execution", "content": content}
        req = ApprovalRequest(kind="code", language=b.language, tool=EXECUTE_TOOL_NAME if b.call_id else None,
                              code=code, arguments={"language": b.language, "code": code} if b.call_id else None,
                              findings=findings, scope=f"all {b.language} code this session", call_id=b.call_id)
        try:
            answer = interp.approval_handler(req)
        except Exception as e:
            log.warning("approval handler failed: %s", e)
            return Approval(action="decline", reason=f"(the approval prompt failed: {e})")
        approval = _as_approval(answer)
        if approval is None:
            invalid += 1
            if invalid >= MAX_INVALID_ANSWERS or interp._stop_requested():
                return Approval(action="decline", reason="(no valid answer was given)")
            continue
        if approval.action != "decline" and approval.code is not None and approval.code != code:
            new_findings = _scan(interp, b.language, approval.code)
            if new_findings:
                # the edited code is scanned before it may run: ask again about it (its
                # findings shown); code with findings never runs without being asked about
                if edits >= MAX_INVALID_ANSWERS:
                    return Approval(action="decline", reason="(the edited code still had findings)")
                code, findings, edits = approval.code, new_findings, edits + 1
                continue
        if approval.code is None and code != b.code:
            approval = Approval(action=approval.action, code=code, reason=approval.reason)
        return approval


def _execute(interp: "OpenInterpreter", b: _Block, runs: RunTracker, results: list[dict]) -> Iterator[dict]:
    """Run one block through the computer; yield its chunks; append the messages to store
    (its output, cut to ``max_output``, then any images) to ``results``, even when interrupted."""
    from oitui.computer.output import OutputAccumulator

    acc = OutputAccumulator(max_chars=int(interp.max_output or 2800))
    stored: list[dict] = []
    interp._wait_warm_up()
    interp._executing = True
    asked_stop = False
    finished = False
    gen = None
    try:
        gen = interp.computer.run(b.language, b.code, stream=True)
        for chunk in gen:
            if not isinstance(chunk, dict):
                continue
            chunk = dict(chunk)
            chunk.pop("start", None)
            chunk.pop("end", None)
            if b.call_id:
                chunk["call_id"] = b.call_id
            ctype, fmt = chunk.get("type"), chunk.get("format")
            if ctype == "console" and fmt == "output":
                acc.feed(str(chunk.get("content") or ""))
            elif ctype == "image":
                img = {k: v for k, v in chunk.items() if k in ("role", "type", "format", "content", "call_id")}
                stored.append(img)
            yield from runs.emit(chunk)
            if interp._stop_requested() and not asked_stop:
                asked_stop = True
                try:
                    interp.computer.stop()
                except Exception:
                    pass
        finished = True
    except Exception as e:  # the computer must never kill the turn
        log.exception("computer failed")
        acc.feed(("\n" if acc.total_chars else "") + f"{type(e).__name__}: {e}\n")
        finished = True
    finally:  # also when the consumer drops the generator or ^C arrives: stop the code, keep its output
        interp._executing = False
        if not finished and gen is not None:
            # nobody reads the runtime any more: ask it to stop and drain it until it has
            # (the runtime interrupts the block within about 2 s), keeping what it printed
            try:
                interp.computer.stop()
                for chunk in gen:
                    if isinstance(chunk, dict) and chunk.get("type") == "console" and chunk.get("format") == "output":
                        acc.feed(str(chunk.get("content") or ""))
            except Exception:
                pass
        results.append(_result(acc.result(), b.call_id))
        results.extend(stored)
    yield from runs.close()


class _Reply:
    """Collects one model reply from normalized deltas; turns them into chunks and messages."""

    def __init__(self, interp: "OpenInterpreter", *, function_calling: bool) -> None:
        self.interp = interp
        self.fc = function_calling
        self.text_parts: list[str] = []  # current assistant text (between blocks)
        self.reasoning: list[str] = []
        self.messages: list[dict] = []  # finished messages in reply order
        self.blocks: list[_Block] = []
        self.finish_reason: str | None = None
        self.usage: dict | None = None
        self.fence = None
        self.acc = None
        self.signature: str | None = None
        self.streamed: dict[int, dict] = {}  # tool-call index -> what was shown while streaming
        self._code_tag: str | None = None
        self._display_only = False
        if function_calling:
            from oitui.core.parsing import ToolCallAccumulator

            self.acc = ToolCallAccumulator()
        else:
            from oitui.core.parsing import FenceParser

            self.fence = FenceParser()

    # -- helpers -------------------------------------------------------------------------------
    def _flush_text(self, before_code: bool = False) -> None:
        if before_code and self.text_parts and self.text_parts[-1].endswith("\n"):
            self.text_parts[-1] = self.text_parts[-1][:-1]  # the line end belongs to the fence
        if self.reasoning:
            msg = {"role": "assistant", "type": "reasoning", "content": "".join(self.reasoning)}
            if self.signature:
                msg["signature"] = self.signature
            self.messages.append(msg)
            self.reasoning = []
        text = "".join(self.text_parts)
        self.text_parts = []
        if text.strip():
            self.messages.append({"role": "assistant", "type": "message", "content": text})

    def _text_chunk(self, text: str) -> list[dict]:
        if not text:
            return []
        self.text_parts.append(text)
        return [{"role": "assistant", "type": "message", "content": text}]

    # -- feeding -------------------------------------------------------------------------------
    def feed(self, delta: dict) -> list[dict]:
        kind = delta.get("type")
        if kind == "usage":
            self.usage = {"prompt_tokens": delta.get("prompt_tokens", 0),
                          "completion_tokens": delta.get("completion_tokens", 0)}
            return []
        if kind == "finish":
            self.finish_reason = delta.get("reason")
            return []
        if kind == "signature":
            self.signature = delta.get("signature")
            return []
        if kind == "reasoning":
            self.reasoning.append(delta.get("text") or "")
            return [{"role": "assistant", "type": "reasoning", "content": delta.get("text") or ""}]
        if kind == "tool_calls" and self.acc is not None:
            self.acc.add(delta.get("calls") or [])
            return self._stream_calls()
        return self._feed_content(kind, delta)

    def _stream_calls(self) -> list[dict]:
        """Show the code of ``execute`` calls as their arguments stream (display only; the
        stored message comes from the finished, repaired arguments)."""
        from oitui.core.parsing import EXECUTE_TOOL_NAME as _EXEC

        out: list[dict] = []
        for call in self.acc.calls():
            name = (call.get("name") or "").replace("functions.", "")
            if not name.startswith(_EXEC):
                continue
            st = self.streamed.setdefault(call["index"], {"sent": "", "format": None, "id": call.get("id")})
            raw = call.get("arguments") or ""
            lang, lang_done, lang_at = partial_json_string(raw, "language")
            code, _done, code_at = partial_json_string(raw, "code")
            if code is None:
                continue
            if st["format"] is None:
                if not (lang_done and lang_at is not None and lang_at < code_at):
                    continue  # the language is not known yet: wait for the finished call
                st["format"] = _display_format(lang)
            if not code.startswith(st["sent"]) or len(code) == len(st["sent"]):
                continue
            new = code[len(st["sent"]):]
            st["sent"] = code
            out.append({"role": "assistant", "type": "code", "format": st["format"], "content": new,
                        "call_id": st["id"] or f"call_{call['index']}"})
        return out

    def _feed_content(self, kind: str | None, delta: dict) -> list[dict]:
        if kind == "content":
            text = delta.get("text") or ""
            if self.fence is None:
                return self._text_chunk(text)
            return self._events(self.fence.feed(text))
        return []

    def _events(self, events: list[dict]) -> list[dict]:
        out: list[dict] = []
        for ev in events or []:
            k = ev.get("kind")
            if k == "text":
                out += self._text_chunk(ev.get("text") or ev.get("content") or "")
            elif k == "code_start":
                from oitui.computer.languages import is_display_only

                tag = ev.get("tag")
                if tag is None:
                    tag = ev.get("language")
                self._code_tag = tag
                self._display_only = is_display_only(tag)
                if self._display_only:
                    out += self._text_chunk(f"```{(tag or '').strip()}\n")
                else:
                    self._flush_text(before_code=True)
            elif k == "code":
                text = ev.get("text") or ev.get("code") or ev.get("content") or ""
                if self._display_only:
                    out += self._text_chunk(text)
                elif text:
                    fmt = _display_format(self._code_tag)
                    out.append({"role": "assistant", "type": "code", "format": fmt, "content": text})
            elif k == "code_end":
                tag = ev.get("tag", self._code_tag)
                code = ev.get("code") or ""
                if self._display_only:
                    tail = "" if code.endswith("\n") or not code else "\n"
                    out += self._text_chunk(tail + "```\n")
                    self._display_only = False
                    continue
                out.append({"__close__": True})
                lang, reason = _check_language(self.interp, tag, code)
                msg = {"role": "assistant", "type": "code", "format": lang or "python", "content": code}
                if ev.get("truncated") or (not ev.get("closed", True) and self.finish_reason == "length"):
                    msg["truncated"] = True
                self.messages.append(msg)
                self.blocks.append(_Block(message=msg, language=lang, code=code, tag=tag, not_runnable=reason))
        return out

    def finish(self) -> list[dict]:
        """End of stream: flush the parser and build the tool-call blocks."""
        out: list[dict] = []
        if self.fence is not None:
            out += self._events(self.fence.finish(self.finish_reason))
        self._flush_text()
        if self.acc is not None:
            from oitui.core.parsing import interpret_execute_call

            calls = self.acc.calls()
            text_msgs = [m for m in self.messages if m.get("type") == "message"]
            if not calls and text_msgs:
                # hallucinated call shapes written as text (functions.execute({...}) etc.)
                try:
                    from oitui.core.parsing import extract_hallucinated_calls

                    found = extract_hallucinated_calls(text_msgs[-1]["content"]) or []
                except Exception:
                    found = []
                for i, h in enumerate(found):
                    lang, reason = _check_language(self.interp, h.get("language"), h.get("code") or "")
                    msg = {"role": "assistant", "type": "code", "format": lang or "python", "content": h.get("code") or ""}
                    self.messages.append(msg)
                    self.blocks.append(_Block(message=msg, language=lang, code=h.get("code") or "", not_runnable=reason))
                    out.append(dict(msg))
            for call in calls:
                cid = call.get("id") or f"call_{len(self.blocks) + 1}"
                name = call.get("name") or ""
                raw = call.get("arguments") or ""
                parsed = interpret_execute_call(name, raw)
                if parsed.get("ok"):
                    lang, reason = _check_language(self.interp, parsed.get("language"), parsed.get("code") or "")
                    msg = {"role": "assistant", "type": "code", "format": lang or "python",
                           "content": parsed.get("code") or "", "call_id": cid,
                           "tool": {"name": name, "arguments": raw}}
                    self.messages.append(msg)
                    self.blocks.append(_Block(message=msg, call_id=cid, language=lang, code=parsed.get("code") or "",
                                              not_runnable=reason))
                    st = self.streamed.get(call.get("index"))
                    if st and st["sent"]:
                        rest = msg["content"][len(st["sent"]):] if msg["content"].startswith(st["sent"]) else ""
                        if rest:
                            out.append({"role": "assistant", "type": "code", "format": st["format"], "content": rest,
                                        "call_id": st["id"] or cid})
                    else:
                        out.append({k: v for k, v in msg.items() if k != "tool"})
                    out.append({"__close__": True})
                else:
                    args: Any
                    try:
                        import json as _json

                        args = _json.loads(raw) if raw.strip() else {}
                    except ValueError:
                        args = raw
                    msg = {"role": "assistant", "type": "tool_call", "format": name or "unknown",
                           "content": args, "call_id": cid, "tool": {"name": name, "arguments": raw}}
                    self.messages.append(msg)
                    err = parsed.get("error") or f"The call to {name!r} could not be run."
                    self.blocks.append(_Block(message=msg, call_id=cid, error=str(err)))
                    out.append({k: v for k, v in msg.items() if k != "tool"})
                    out.append({"__close__": True})
        return out

    def partial_messages(self) -> list[dict]:
        """What to store when the reply failed or was stopped: its text only (no code or calls)."""
        self._flush_text()
        return [m for m in self.messages if m.get("type") in ("message",)]


_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", '"': '"', "\\": "\\", "/": "/"}


def partial_json_string(raw: str, key: str) -> tuple[str | None, bool, int | None]:
    """Decode the (possibly unfinished) JSON string value of ``key`` in streamed arguments.

    Returns ``(value so far or None, finished, position of the key or None)``. Lenient like
    the argument repair: an invalid escape keeps its backslash; an escape cut at the end of
    ``raw`` is left out until it completes; surrogate pairs are joined.
    """
    m = re.search(r'"%s"\s*:\s*"' % re.escape(key), raw)
    if not m:
        return None, False, None
    i, out, n = m.end(), [], len(raw)
    while i < n:
        ch = raw[i]
        if ch == '"':
            return "".join(out), True, m.start()
        if ch == "\\":
            if i + 1 >= n:
                break
            nxt = raw[i + 1]
            if nxt == "u":
                if i + 6 > n:
                    break
                try:
                    cp = int(raw[i + 2 : i + 6], 16)
                except ValueError:
                    out.append("\\u")
                    i += 2
                    continue
                if 0xD800 <= cp < 0xDC00:
                    if i + 12 > n:
                        break
                    if raw[i + 6 : i + 8] == "\\u":
                        try:
                            low = int(raw[i + 8 : i + 12], 16)
                        except ValueError:
                            low = 0
                        if 0xDC00 <= low < 0xE000:
                            out.append(chr(0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)))
                            i += 12
                            continue
                    out.append("\ufffd")
                    i += 6
                    continue
                out.append(chr(cp) if not 0xDC00 <= cp < 0xE000 else "\ufffd")
                i += 6
                continue
            out.append(_ESCAPES.get(nxt, "\\" + nxt))
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out), False, m.start()


def _display_format(tag: str | None) -> str:
    from oitui.computer.languages import normalize_language

    return normalize_language(tag) or ((tag or "").strip().lower() or "python")
