"""The litellm ``CustomLLM`` that serves ``local/...`` models with :mod:`oitui.local.runtime`.

Imported by :func:`oitui.local.register` (this module imports litellm at import time).
Errors reach callers as litellm exceptions carrying our :class:`~oitui.local.LocalModelError`
message (``CustomLLMError`` with status 400 for a missing extra / bad path / prompt too long,
500 for a crash inside llama.cpp).
"""

from __future__ import annotations

import asyncio
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
        gen = loaded.stream_chat(messages, **params)
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

