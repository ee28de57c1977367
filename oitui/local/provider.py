"""The litellm ``CustomLLM`` that serves ``local/...`` models with :mod:`oitui.local.runtime`.

Imported by :func:`oitui.local.register` (this module imports litellm at import time).

Assistant prefill (on by default; ``OITUI_LOCAL_PREFILL=0`` turns it off): tiny models often
answer a request in prose, or write Python 2. When the request ends with a new user message
(the start of a user turn) or with code output that shows an error, the model's reply is
started for it with ``"```python\n"`` (:data:`PREFILL`): the prompt ends with the assistant
header plus that text, the text is streamed as the reply's first content delta, and generation
stops at the closing fence (which is streamed too), so the reply is one runnable block
(at most :data:`PREFILL_MAX_TOKENS` tokens unless the caller sets max_tokens). After code output
without an error the model is not prefilled: it reports the result in its own words. After an
error or no output, the model gets a fresh, prefilled try at the user's request without the
failed code (:func:`retry_messages`), sampled at :data:`FIX_TEMPERATURE` when the caller
asked for greedy decoding. See :func:`prefill_for`.
Errors reach callers as litellm exceptions carrying our :class:`~oitui.local.LocalModelError`
message (``CustomLLMError`` with status 400 for a missing extra / bad path / prompt too long,
500 for a crash inside llama.cpp).
"""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
from collections.abc import AsyncIterator, Iterator

import litellm
from litellm.llms.custom_llm import CustomLLM, CustomLLMError
from litellm.types.utils import GenericStreamingChunk, ModelResponse

from oitui.local import PROVIDER, LocalModelError

_registered_info: set[str] = set()
_info_lock = threading.Lock()


def register_model_info(model: str, *, context_window: int) -> None:
    """Tell litellm about a local model: price 0, no function calling, its context window.

    ``model`` is the full name (``local/...``). Registered once per name and context size.
    """
    key = f"{model}@{context_window}"
    with _info_lock:
        if key in _registered_info:
            return
        _registered_info.add(key)
    info = {
        "litellm_provider": PROVIDER,
        "mode": "chat",
        "max_tokens": context_window,
        "max_input_tokens": context_window,
        "max_output_tokens": context_window,
        "input_cost_per_token": 0.0,
        "output_cost_per_token": 0.0,
        "supports_function_calling": False,
        "supports_parallel_function_calling": False,
        "supports_tool_choice": False,
        "supports_vision": False,
        "supports_system_messages": True,
        "cache_creation_input_token_cost": 0.0,
        "cache_read_input_token_cost": 0.0,
    }
    try:
        litellm.register_model({model: info})
    except Exception:  # noqa: BLE001 - pricing info is a nicety; never block a request on it
        pass


def _params(optional_params: dict | None) -> dict:
    """litellm's optional params -> :meth:`LocalModel.stream_chat` keyword arguments."""
    p = dict(optional_params or {})
    out: dict = {}
    max_tokens = p.get("max_tokens") or p.get("max_completion_tokens")
    if max_tokens:
        out["max_tokens"] = int(max_tokens)
    for name in ("temperature", "top_p", "seed", "presence_penalty", "frequency_penalty"):
        if p.get(name) is not None:
            out[name] = p[name]
    if p.get("repeat_penalty") is not None:
        out["repeat_penalty"] = float(p["repeat_penalty"])
    if p.get("stop"):
        out["stop"] = p["stop"]
    return out


#: What a prefilled reply starts with: an open python fence.
PREFILL = "```python\n"

#: Completion tokens of a prefilled reply when the caller gives no max_tokens: one short block
#: (a simple task needs well under 200; a rambling sample is cut here).
PREFILL_MAX_TOKENS = 384

#: The environment switch: "0", "false", "no" or "off" turn prefill off.
PREFILL_ENV = "OITUI_LOCAL_PREFILL"

# How the core (oitui.core.lmc) sends code output back in text-fence mode.
_OUTPUT_PREFIXES = ("Code output:", "The code ran with no output.", "No output", "Error:", "Output:")
_ERROR_RE = re.compile(
    r"Traceback \(most recent call last\)|\b\w*Error\b|\bException\b|command not found|"
    r"No such file or directory|\berror:",
)


def _env_float(name: str, default: float) -> float:
    """``float(os.environ[name])`` (at least 0); ``default`` when unset or unparsable."""
    try:
        return max(0.0, float(os.environ.get(name, default)))
    except ValueError:
        return default


#: Sampling temperature of a prefilled reply to failed code when the caller asked for greedy
#: decoding (0 or unset): greedy decoding repeats the failing code word for word.
#: ``OITUI_LOCAL_FIX_TEMPERATURE`` overrides it (an unparsable value is ignored).
FIX_TEMPERATURE = _env_float("OITUI_LOCAL_FIX_TEMPERATURE", 0.7)


def _is_fix_turn(messages: list) -> bool:
    """True when the last message is code output (the model is asked to fix an error)."""
    from oitui.local.runtime import _text_of

    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    if last.get("role") in ("tool", "function"):
        return True
    return last.get("role") == "user" and _text_of(last.get("content")).lstrip().startswith(_OUTPUT_PREFIXES)


def prefill_enabled(environ=None) -> bool:
    """False when ``OITUI_LOCAL_PREFILL`` is "0"/"false"/"no"/"off" (case-insensitive), else True."""
    value = (environ if environ is not None else os.environ).get(PREFILL_ENV, "1")
    return str(value).strip().lower() not in ("0", "false", "no", "off")


def prefill_for(messages: list, environ=None) -> str:
    """The assistant prefill for a request: :data:`PREFILL` or ``""``.

    ``messages``: OpenAI chat messages, as litellm passes them. Returns PREFILL when prefill is
    enabled (:func:`prefill_enabled`) and the last message is either a user message that is not
    code output (a new request) or code output (a ``tool`` message, or a user message starting
    with the core's "Code output:" / "Error:" / "The code ran with no output." texts) that shows
    an error (a traceback, an ``...Error``, "command not found") or no output at all, so the
    model writes a fix. Returns "" otherwise: after code that printed something without an
    error the model should report, and an assistant-last request is left alone.
    """
    if not prefill_enabled(environ) or not messages:
        return ""
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    role = last.get("role")
    from oitui.local.runtime import _text_of

    text = _text_of(last.get("content")).lstrip()
    if role in ("tool", "function"):
        is_output = True
    elif role == "user":
        is_output = text.startswith(_OUTPUT_PREFIXES)
    else:
        return ""
    if not is_output:
        return PREFILL
    no_output = (not text.strip() or text.startswith(("The code ran with no output.", "No output"))
                 if role in ("tool", "function") else not text.startswith(("Code output:", "Output:")))
    if _ERROR_RE.search(text) or no_output:
        return PREFILL  # an error, or no output at all: the result was not shown
    return ""


_ANSI_RE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_ERROR_LINE_RE = re.compile(r"^\s*([A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b.*)$")


def condense_error(text: str) -> str:
    """A code-output text with a Python traceback -> its prefix line and the final error line.

    ``"Code output:\n---...\nNameError  Traceback ...\n...\nNameError: name 'x' is not defined"``
    -> ``"Code output:\nNameError: name 'x' is not defined"``. Text without a traceback is
    returned unchanged. Tiny models fix the error better from one line than from a long
    IPython traceback (and copy less of it).
    """
    if "Traceback" not in text:
        return text
    clean = _ANSI_RE.sub("", text)
    lines = [ln.rstrip() for ln in clean.splitlines() if ln.strip()]
    head = lines[0] if lines and lines[0].startswith(_OUTPUT_PREFIXES) else ""
    last = next((m.group(1) for ln in reversed(lines) if (m := _ERROR_LINE_RE.match(ln))), None)
    if last is None:
        return text
    return (head + "\n" if head else "") + last


def retry_messages(messages: list, hint: bool | None = None) -> list:
    """The request a tiny model gets when its code failed: a fresh try at the user's request.

    ``messages`` ends with code output showing an error. Returns the system message(s), the
    conversation before the last user request, and that request, followed, when ``hint`` (None:
    :data:`HINT`), by one line naming the error (``"(A first try failed with: NameError: name
    'x' is not defined)"``). The failed code and its long traceback are left out: a 135M model
    copies them instead of fixing them.
    Returns ``messages`` unchanged when no user request is found.
    """
    from oitui.local.runtime import _text_of

    def is_output(msg: dict) -> bool:
        return msg.get("role") in ("tool", "function") or (
            msg.get("role") == "user" and _text_of(msg.get("content")).lstrip().startswith(_OUTPUT_PREFIXES))

    msgs = [m for m in messages if isinstance(m, dict)]
    req = next((i for i in range(len(msgs) - 1, -1, -1) if msgs[i].get("role") == "user" and not is_output(msgs[i])), None)
    if req is None:
        return messages
    err = condense_error(_text_of(msgs[-1].get("content"))).splitlines()
    err_line = err[-1].strip() if err else ""
    text = _text_of(msgs[req].get("content"))
    if (HINT if hint is None else hint) and err_line and not err_line.startswith(_OUTPUT_PREFIXES):
        text += f"\n\n(A first try failed with: {err_line[:200]})"
    return msgs[:req] + [{"role": "user", "content": text}]


#: Name the error in the retried request (off by default: in the benchmark a bare fresh try
#: did better, 11/20 against 7-8/20; ``OITUI_LOCAL_FIX_HINT=1`` turns it on).
HINT = os.environ.get("OITUI_LOCAL_FIX_HINT", "0") not in ("0", "", "false", "no", "off")


def _fail(exc: Exception) -> CustomLLMError:
    if isinstance(exc, LocalModelError):
        return CustomLLMError(status_code=400, message=str(exc))
    return CustomLLMError(status_code=500, message=f"local model failed: {exc}")


def _full_name(model: str) -> str:
    return model if model.startswith(PROVIDER + "/") else f"{PROVIDER}/{model}"


class LocalLLM(CustomLLM):
    """``local/<name or path>`` through llama.cpp: streaming, non-streaming, sync and async.

    The model loads on the first request (in the calling thread: the core's worker), once per
    GGUF file. Tools are not supported: the model writes fenced code blocks (text-fence mode).
    Replies to a new request or to failed code are prefilled with ``"```python\n"`` (see the
    module docstring and :func:`prefill_for`; ``OITUI_LOCAL_PREFILL=0`` turns it off).
    """

    def _model(self, model: str):
        from oitui.local.runtime import get_model

        try:
            loaded = get_model(_full_name(model))
        except Exception as exc:  # noqa: BLE001
            raise _fail(exc) from None
        register_model_info(_full_name(model), context_window=loaded.n_ctx)
        return loaded

    def _iter(self, model: str, messages: list, optional_params: dict) -> Iterator[GenericStreamingChunk]:
        from oitui.local.runtime import Completion

        loaded = self._model(model)
        params = _params(optional_params)
        prefill = prefill_for(messages)
        if prefill and not params.get("max_tokens"):
            params["max_tokens"] = PREFILL_MAX_TOKENS
        if prefill and _is_fix_turn(messages):
            messages = retry_messages(messages)
            if not params.get("temperature"):
                params["temperature"] = FIX_TEMPERATURE
        gen = loaded.stream_chat(messages, prefill=prefill, **params)
        try:
            while True:
                try:
                    item = next(gen)
                except StopIteration:
                    return
                except Exception as exc:  # noqa: BLE001
                    raise _fail(exc) from None
                if isinstance(item, Completion):
                    yield {
                        "text": "",
                        "tool_use": None,
                        "is_finished": True,
                        "finish_reason": item.finish_reason,
                        "usage": {
                            "prompt_tokens": item.prompt_tokens,
                            "completion_tokens": item.completion_tokens,
                            "total_tokens": item.prompt_tokens + item.completion_tokens,
                        },
                        "index": 0,
                    }
                else:
                    yield {
                        "text": item,
                        "tool_use": None,
                        "is_finished": False,
                        "finish_reason": "",
                        "usage": None,
                        "index": 0,
                    }
        finally:
            gen.close()  # releases the model's lock when the caller stops early

    # ----------------------------------------------------------------- litellm entry points

    def completion(self, model, messages, api_base, custom_prompt_dict, model_response: ModelResponse,
                   print_verbose, encoding, api_key, logging_obj, optional_params, acompletion=None,
                   litellm_params=None, logger_fn=None, headers={}, timeout=None, client=None) -> ModelResponse:
        """Non-streaming: the whole reply in ``model_response`` with usage."""
        text_parts: list[str] = []
        finish = "stop"
        usage = None
        for chunk in self._iter(model, messages, optional_params):
            text_parts.append(chunk["text"])
            if chunk["is_finished"]:
                finish, usage = chunk["finish_reason"], chunk["usage"]
        model_response.choices[0].message.content = "".join(text_parts)  # type: ignore[union-attr]
        model_response.choices[0].finish_reason = finish
        model_response.created = int(time.time())
        model_response.model = _full_name(model)
        if usage:
            model_response.usage = litellm.Usage(**usage)  # type: ignore[attr-defined]
        return model_response

    def streaming(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                  encoding, api_key, logging_obj, optional_params, acompletion=None, litellm_params=None,
                  logger_fn=None, headers={}, timeout=None, client=None) -> Iterator[GenericStreamingChunk]:
        """Streaming: GenericStreamingChunk dicts, the last one with ``is_finished`` and usage."""
        return self._iter(model, messages, optional_params)

    async def acompletion(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                          encoding, api_key, logging_obj, optional_params, acompletion=None,
                          litellm_params=None, logger_fn=None, headers={}, timeout=None, client=None):
        """Async non-streaming: :meth:`completion` in a worker thread."""
        return await asyncio.to_thread(
            self.completion, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
            encoding, api_key, logging_obj, optional_params,
        )

    async def astreaming(self, model, messages, api_base, custom_prompt_dict, model_response, print_verbose,
                         encoding, api_key, logging_obj, optional_params, acompletion=None,
                         litellm_params=None, logger_fn=None, headers={}, timeout=None,
                         client=None) -> AsyncIterator[GenericStreamingChunk]:
        """Async streaming: the sync generator driven from a worker thread, chunk by chunk."""
        it = self._iter(model, messages, optional_params)
        sentinel = object()
        try:
            while True:
                chunk = await asyncio.to_thread(next, it, sentinel)
                if chunk is sentinel:
                    return
                yield chunk  # type: ignore[misc]
        finally:
            await asyncio.to_thread(it.close)

