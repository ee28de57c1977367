"""The model adapter: every provider through litellm, always streaming.

``Llm`` holds the model settings (Open Interpreter's names) and runs one streaming request with
:meth:`Llm.stream`, which yields *normalized deltas* (plain dicts, never SDK objects):

- ``{"type": "content", "text": str}``
- ``{"type": "reasoning", "text": str}`` (reasoning/thinking text where the provider streams it)
- ``{"type": "signature", "signature": str}`` (Anthropic's thinking-block signature)
- ``{"type": "tool_calls", "calls": [{"index", "id"?, "type"?, "function": {"name"?, "arguments"?}}]}``
  (raw fragments, exactly as streamed; accumulate them with ``parsing.ToolCallAccumulator``)
- ``{"type": "finish", "reason": str}`` ("stop", "length", "tool_calls", ...)
- ``{"type": "usage", "prompt_tokens": int, "completion_tokens": int}``

Errors: rate limits (429), 5xx and connection failures *before the first delta* are retried with
exponential backoff (``retries`` extra attempts, ``backoff`` seconds first, doubled each time);
then, or for any other failure, :class:`oitui.core.errors.ModelError` is raised. A failure after
the first delta raises ``ModelError`` with ``mid_stream = True`` (never retried: the caller has
already shown part of the reply). A rejected key (401) says which environment variable to set.

litellm is imported lazily, with ``LITELLM_LOCAL_MODEL_COST_MAP=True`` set first so that the
import never touches the network.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Iterator

from oitui.core.errors import LimitReached, ModelError

log = logging.getLogger("oitui.llm")

_litellm = None
_litellm_lock = threading.Lock()

#: How :meth:`Llm.stream` waits between retries (seconds); a module global so tests can record it.
_sleep = time.sleep

#: Which environment variable holds the key for a provider prefix (first word of the model).
KEY_ENV = {
    "openai": "OPENAI_API_KEY",
    "anthropic": "ANTHROPIC_API_KEY",
    "claude": "ANTHROPIC_API_KEY",
    "deepseek": "DEEPSEEK_API_KEY",
    "moonshot": "MOONSHOT_API_KEY",
    "dashscope": "DASHSCOPE_API_KEY",
    "gemini": "GEMINI_API_KEY",
    "groq": "GROQ_API_KEY",
    "mistral": "MISTRAL_API_KEY",
    "openrouter": "OPENROUTER_API_KEY",
    "together_ai": "TOGETHERAI_API_KEY",
    "xai": "XAI_API_KEY",
}

#: Providers that need no key (local servers).
KEYLESS = {"ollama", "ollama_chat", "local", "lm_studio", "llamafile", "hosted_vllm", "vllm"}


def get_litellm():
    """Import and configure litellm once (thread-safe); returns the module."""
    global _litellm
    if _litellm is None:
        with _litellm_lock:
            if _litellm is None:
                os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
                configure_litellm_logging(_verbose_logging)  # levels first: the import logs too
                import litellm  # noqa: PLC0415 - heavy, lazy on purpose

                litellm.drop_params = True
                litellm.suppress_debug_info = True
                litellm.telemetry = False
                _litellm = litellm
                configure_litellm_logging(_verbose_logging)
    return _litellm


_verbose_logging = False
_LITELLM_LOGGERS = ("LiteLLM", "LiteLLM Proxy", "LiteLLM Router")


def configure_litellm_logging(verbose: bool) -> None:
    """Route litellm's log records to the root logger (our log file) instead of litellm's own
    handler, which writes INFO records to *stdout* (that would corrupt ``--output-format json``
    and the TUI's screen). ``verbose``: INFO records are kept (``--verbose``), else ERROR only.
    Applies now when litellm is imported, else at its import."""
    global _verbose_logging
    _verbose_logging = bool(verbose)
    level = logging.INFO if verbose else logging.ERROR
    logging.getLogger("httpx").setLevel(level)
    imported = "litellm" in sys.modules
    for name in _LITELLM_LOGGERS:
        lg = logging.getLogger(name)
        lg.setLevel(level)
        if imported:
            for h in lg.handlers[:]:
                if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler):
                    lg.removeHandler(h)
            lg.propagate = True


def provider_of(model: str | None) -> str | None:
    """The provider word of a litellm model name ("anthropic/claude-x" -> "anthropic";
    "gpt-4o" -> "openai"; "claude-3-5" -> "anthropic"), or None when unknown."""
    if not model:
        return None
    if "/" in model:
        return model.split("/", 1)[0].lower()
    m = model.lower()
    if m.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        return "openai"
    if m.startswith("claude"):
        return "anthropic"
    if m.startswith("deepseek"):
        return "deepseek"
    return None


def key_env_for(model: str | None) -> str | None:
    """The environment variable that holds the API key for ``model`` (None for keyless/unknown)."""
    prov = provider_of(model)
    if prov is None or prov in KEYLESS:
        return None
    return KEY_ENV.get(prov, f"{prov.upper()}_API_KEY")


@dataclass
class Llm:
    """Model settings and the streaming call.

    Attributes (Open Interpreter's names): ``model`` (litellm model name), ``api_base``,
    ``api_key``, ``temperature`` (0), ``context_window`` (tokens; None = litellm's value or 8000),
    ``max_tokens`` (per request; None = provider default), ``supports_functions`` (None = ask
    litellm), ``supports_vision`` (None = ask litellm), ``retries`` (extra attempts for 429/5xx/
    connection errors before the first token; 3 -> 4 attempts in all), ``backoff`` (first wait in
    seconds, doubled each retry), ``timeout`` (seconds per request), ``extra`` (more litellm kwargs).
    """

    model: str = "gpt-4o"
    api_base: str | None = None
    api_key: str | None = None
    temperature: float = 0.0
    context_window: int | None = None
    max_tokens: int | None = None
    supports_functions: bool | None = None
    supports_vision: bool | None = None
    retries: int = 3
    backoff: float = 1.0
    timeout: float = 600.0
    extra: dict = field(default_factory=dict)
    _price_note_given: set = field(default_factory=set, repr=False)
    _current: Any = field(default=None, repr=False)
    _closed: threading.Event = field(default_factory=threading.Event, repr=False)

    # -- capabilities --------------------------------------------------------------------------
    def _info(self) -> dict:
        if not self.model or self.model.startswith("local/"):
            return {}
        try:
            return dict(get_litellm().get_model_info(self.model) or {})
        except Exception:
            return {}

    def function_calling(self) -> bool:
        """Whether to use the ``execute`` tool (True) or markdown fences (False)."""
        if self.supports_functions is not None:
            return bool(self.supports_functions)
        if not self.model or self.model.startswith("local/"):
            return False
        try:
            return bool(get_litellm().supports_function_calling(self.model))
        except Exception:
            return False

    def vision(self) -> bool:
        """Whether the model takes image input."""
        if self.supports_vision is not None:
            return bool(self.supports_vision)
        if not self.model or self.model.startswith("local/"):
            return False
        try:
            return bool(get_litellm().supports_vision(self.model))
        except Exception:
            return False

    def window(self) -> int:
        """The context window in tokens (setting, else litellm's max_input_tokens, else 8000)."""
        if self.context_window:
            return int(self.context_window)
        info = self._info()
        return int(info.get("max_input_tokens") or info.get("max_tokens") or 8000)

    def prices(self) -> tuple[float, float] | None:
        """(input USD per token, output USD per token), or None when the price is unknown.
        The embedded model (``local/...``) runs on this machine and costs nothing: (0.0, 0.0)."""
        if self.model and self.model.startswith("local/"):
            return 0.0, 0.0
        info = self._info()
        inp, out = info.get("input_cost_per_token"), info.get("output_cost_per_token")
        if inp is None or out is None:
            return None
        return float(inp), float(out)

    # -- cost ----------------------------------------------------------------------------------
    def cost(self, prompt_tokens: int, completion_tokens: int) -> float | None:
        """USD cost of a request, or None when the model's price is unknown."""
        p = self.prices()
        if p is None:
            return None
        return prompt_tokens * p[0] + completion_tokens * p[1]

    def price_unknown_note(self) -> str | None:
        """A one-time note (per model) that the price is unknown; None after the first time."""
        if self.prices() is not None or self.model in self._price_note_given:
            return None
        self._price_note_given.add(self.model)
        return f"The price of {self.model} is unknown; only reported cost is counted."

    def check_budget(self, prompt_tokens: int, spent: float | None, max_budget: float | None) -> None:
        """Raise LimitReached("budget") when ``spent`` + this request's estimated cost
        (``prompt_tokens`` at the input price + ``max_tokens`` (or 1000) at the output price)
        would exceed ``max_budget`` USD. Unknown prices: only ``spent`` is compared."""
        if max_budget is None:
            return
        spent = spent or 0.0
        p = self.prices()
        est = 0.0
        if p is not None:
            est = prompt_tokens * p[0] + int(self.max_tokens or 1000) * p[1]
        if spent + est > float(max_budget):
            raise LimitReached(
                f"Budget reached: spent ${spent:.4f} of ${float(max_budget):.4f}; the next request "
                f"(about ${est:.4f}) would exceed it.",
                kind="budget",
            )

    # -- the call ------------------------------------------------------------------------------
    def _kwargs(self, messages: list[dict], tools: list[dict] | None) -> dict:
        kw: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
            "temperature": self.temperature,
            "max_retries": 0,
            "timeout": self.timeout,
        }
        api_base = self.api_base
        if not api_base:
            # Ollama's OLLAMA_HOST, LM Studio and vLLM defaults (litellm itself reads only OLLAMA_API_BASE)
            from oitui.local.servers import resolve_api_base  # noqa: PLC0415

            api_base = resolve_api_base(self.model, None)
        if api_base:
            kw["api_base"] = api_base
        if self.api_key:
            kw["api_key"] = self.api_key
        if self.max_tokens:
            kw["max_tokens"] = int(self.max_tokens)
        if tools:
            kw["tools"] = tools
        kw.update(self.extra or {})
        return kw

    def _missing_key_error(self) -> ModelError | None:
        if self.api_key or self.api_base:
            return None
        env = key_env_for(self.model)
        if env and not os.environ.get(env):
            return ModelError(
                f"No API key for {self.model}: set {env} in the environment, or pass --api-key "
                f"(config key api_key).",
                status_code=401,
                provider=provider_of(self.model),
            )
        return None

    def close(self) -> None:
        """Close the stream in progress, if any (thread-safe; used by ``stop()``)."""
        self._closed.set()
        cur = self._current
        if cur is not None:
            for target in (cur, getattr(cur, "completion_stream", None), getattr(cur, "response", None)):
                close = getattr(target, "close", None)
                if callable(close):
                    try:
                        close()
                    except Exception:
                        pass

    def stream(self, messages: list[dict], tools: list[dict] | None = None, *, sleep=None) -> Iterator[dict]:
        """Run one streaming completion; yield normalized deltas (see the module docstring).

        ``messages`` are OpenAI chat messages; ``tools`` OpenAI tool schemas (None in text mode);
        ``sleep(seconds)`` waits between retries (default ``time.sleep``).
        Raises ModelError (``.mid_stream`` True when some deltas were already yielded).
        """
        sleep = sleep or _sleep
        self._closed.clear()
        if self.model and self.model.startswith("local/"):
            try:
                from oitui import local  # noqa: PLC0415

                local.register()
            except Exception as e:  # pragma: no cover - depends on the local extra
                raise ModelError(f"The local model is not available: {e}", provider="local") from e
        missing = self._missing_key_error()
        if missing is not None:
            raise missing
        litellm = get_litellm()
        attempts = max(1, int(self.retries) + 1)
        delay = float(self.backoff)
        last: Exception | None = None
        for attempt in range(attempts):
            if self._closed.is_set():
                return
            started = False
            try:
                resp = litellm.completion(**self._kwargs(messages, tools))
                self._current = resp
                for chunk in resp:
                    for d in _normalize(chunk):
                        started = True
                        yield d
                return
            except GeneratorExit:
                self.close()
                raise
            except Exception as e:  # classify
                if self._closed.is_set():
                    return
                err = _classify(e, self.model)
                if started:
                    err.mid_stream = True
                    raise err from e
                last = e
                if getattr(err, "retryable", False) and attempt < attempts - 1:
                    log.info("model request failed (%s); retry %d in %.2fs", e, attempt + 1, delay)
                    sleep(delay)
                    delay *= 2
                    continue
                if getattr(err, "retryable", False):
                    err.args = (f"{err.args[0]} (gave up after {attempts} attempts)",)
                raise err from e
            finally:
                self._current = None
        if last is not None:  # pragma: no cover
            raise _classify(last, self.model)


def _get(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _normalize(chunk: Any) -> Iterator[dict]:
    """litellm stream chunk -> normalized deltas."""
    choices = _get(chunk, "choices") or []
    for choice in choices[:1]:
        delta = _get(choice, "delta")
        if delta is not None:
            reasoning = _get(delta, "reasoning_content")
            if reasoning:
                yield {"type": "reasoning", "text": str(reasoning)}
            for block in _get(delta, "thinking_blocks") or []:
                sig = _get(block, "signature")
                if sig:
                    yield {"type": "signature", "signature": str(sig)}
            content = _get(delta, "content")
            if content:
                yield {"type": "content", "text": str(content)}
            tcs = _get(delta, "tool_calls")
            if tcs:
                calls = []
                for tc in tcs:
                    fn = _get(tc, "function")
                    raw: dict[str, Any] = {"index": _get(tc, "index", 0) or 0}
                    if _get(tc, "id"):
                        raw["id"] = _get(tc, "id")
                    if _get(tc, "type"):
                        raw["type"] = _get(tc, "type")
                    f: dict[str, Any] = {}
                    if fn is not None:
                        if _get(fn, "name"):
                            f["name"] = _get(fn, "name")
                        if _get(fn, "arguments") is not None:
                            f["arguments"] = _get(fn, "arguments")
                    raw["function"] = f
                    calls.append(raw)
                yield {"type": "tool_calls", "calls": calls}
        finish = _get(choice, "finish_reason")
        if finish:
            yield {"type": "finish", "reason": str(finish)}
    usage = _get(chunk, "usage")
    if usage:
        pt, ct = _get(usage, "prompt_tokens"), _get(usage, "completion_tokens")
        if pt is not None or ct is not None:
            yield {"type": "usage", "prompt_tokens": int(pt or 0), "completion_tokens": int(ct or 0)}


def _classify(e: Exception, model: str | None) -> ModelError:
    """Turn a litellm/openai/httpx exception into a ModelError with ``retryable`` set."""
    status = getattr(e, "status_code", None)
    name = type(e).__name__
    names = {c.__name__ for c in type(e).__mro__}
    text = str(e).strip().splitlines()[0] if str(e).strip() else name
    text = text.replace("litellm.", "")
    # litellm repeats the class name ("InternalServerError: InternalServerError: ..."): keep one
    text = re.sub(r"^(\w+: )(?:\1)+", r"\1", text)
    if text.startswith(name + ": ") and len(text) > len(name) + 2:
        text = text[len(name) + 2:]  # the class name is said once, below
    if len(text) > 300:
        text = text[:300] + "..."
    provider = provider_of(model)
    if status == 401 or "AuthenticationError" in names:
        env = key_env_for(model)
        hint = f"set {env} or pass --api-key" if env else "check --api-key / api_key"
        err = ModelError(f"The API rejected the key (HTTP 401) for {model}: {hint}. ({text})",
                         status_code=401, provider=provider)
        err.retryable = False
        return err
    retryable = (
        status == 429
        or (isinstance(status, int) and status >= 500 and "MidStreamFallbackError" not in names)
        or bool(names & {"RateLimitError", "APIConnectionError", "InternalServerError", "ServiceUnavailableError",
                         "Timeout", "APITimeoutError", "RemoteProtocolError", "ConnectError", "ReadError",
                         "MidStreamFallbackError"})
    )
    if status == 429 or "RateLimitError" in names:
        msg = f"Rate limited by the API for {model}. ({text})"
    elif "MidStreamFallbackError" in names or "APIConnectionError" in names:
        msg = f"The connection to the model failed: {text}"
    else:
        msg = f"The model request failed ({name}{', HTTP ' + str(status) if status else ''}): {text}"
    if "ContextWindowExceededError" in names:
        msg = f"The request is longer than {model}'s context window: {text}"
    err = ModelError(msg, status_code=status if isinstance(status, int) else None, provider=provider)
    err.retryable = retryable and "ContextWindowExceededError" not in names
    err.mid_stream = False
    err.context_exceeded = "ContextWindowExceededError" in names
    return err
