"""The llama.cpp runtime behind the ``local`` provider: load once per GGUF, chat, stream.

Imported only when a local model is used (it imports ``llama_cpp`` lazily in :func:`get_model`).

- :func:`read_gguf_metadata` -- a GGUF file's scalar metadata, without llama.cpp.
- :func:`get_model` -- the loaded :class:`LocalModel` for a ``local/...`` name (cached per path,
  loaded once under a lock; load-state changes reported to :mod:`oitui.local`).
- :class:`LocalModel` -- ``stream_chat(messages, ...)`` yields text pieces and finally a
  :class:`Completion` with the finish reason and token counts.
"""

from __future__ import annotations

import os
import struct
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from oitui.local import LocalModelError, _set_state, resolve_model_path

#: Upper bound of the context size: min(the model's trained context, this).
MAX_CONTEXT = 8192

#: Completion tokens per request when the caller gives no max_tokens.
DEFAULT_MAX_TOKENS = 1024

# ChatML: the fallback template for a GGUF that carries none.
_CHATML = (
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] "
    "+ '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


# --------------------------------------------------------------------------- GGUF metadata

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


def read_gguf_metadata(path: str | os.PathLike, keys_limit: int = 4096) -> dict[str, object]:
    """Scalar and string metadata of a GGUF file (arrays are skipped), read from its header.

    Returns e.g. ``{"general.architecture": "llama", "llama.context_length": 8192, ...}``.
    Raises :class:`LocalModelError` when the file is not GGUF (v2 or v3) or is truncated.
    """
    try:
        with open(path, "rb") as fh:

            def read(fmt: str):
                size = struct.calcsize(fmt)
                data = fh.read(size)
                if len(data) != size:
                    raise EOFError
                return struct.unpack(fmt, data)[0]

            def read_str() -> str:
                n = read("<Q")
                if n > 1 << 26:
                    raise ValueError("string too long")
                data = fh.read(n)
                if len(data) != n:
                    raise EOFError
                return data.decode("utf-8", "replace")

            def skip_value(vtype: int) -> None:
                if vtype in _SCALARS:
                    fh.seek(struct.calcsize(_SCALARS[vtype]), 1)
                elif vtype == 8:
                    fh.seek(read("<Q"), 1)
                elif vtype == 9:
                    inner, count = read("<I"), read("<Q")
                    if inner in _SCALARS:
                        fh.seek(struct.calcsize(_SCALARS[inner]) * count, 1)
                    else:
                        for _ in range(count):
                            skip_value(inner)
                else:
                    raise ValueError(f"unknown GGUF value type {vtype}")

            if fh.read(4) != b"GGUF":
                raise ValueError("not a GGUF file (bad magic)")
            version = read("<I")
            if version < 2:
                raise ValueError(f"GGUF version {version} is not supported (need 2 or 3)")
            read("<Q")  # tensor count
            kv_count = read("<Q")
            meta: dict[str, object] = {}
            for _ in range(min(kv_count, keys_limit)):
                key = read_str()
                vtype = read("<I")
                if vtype in _SCALARS:
                    meta[key] = read(_SCALARS[vtype])
                elif vtype == 8:
                    meta[key] = read_str()
                else:
                    skip_value(vtype)
            return meta
    except (OSError, EOFError, ValueError, struct.error) as exc:
        raise LocalModelError(f"cannot read GGUF metadata from {path}: {exc or type(exc).__name__}") from None


def context_size_for(meta: dict[str, object], cap: int = MAX_CONTEXT) -> int:
    """min(the model's trained context length, ``cap``); ``cap`` when the GGUF does not say."""
    arch = meta.get("general.architecture")
    trained = meta.get(f"{arch}.context_length") if arch else None
    if not isinstance(trained, int) or trained <= 0:
        trained = next((v for k, v in meta.items() if k.endswith(".context_length") and isinstance(v, int)), None)
    if not isinstance(trained, int) or trained <= 0:
        return cap
    return max(256, min(int(trained), cap))


# --------------------------------------------------------------------------- messages

def _text_of(content) -> str:
    """OpenAI message content (str, list of parts, None) -> plain text."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict):
                if part.get("type") == "text":
                    parts.append(str(part.get("text", "")))
                elif part.get("type") in ("image_url", "image", "input_image"):
                    parts.append("[image omitted: this model cannot see images]")
            elif isinstance(part, str):
                parts.append(part)
        return "\n".join(parts)
    return str(content)


def normalize_messages(messages: Sequence[dict]) -> list[dict[str, str]]:
    """OpenAI chat messages -> ``[{"role": system|user|assistant, "content": str}]``.

    Tool results and function messages become user messages; assistant tool calls become a
    short text line; consecutive messages of the same role are joined (tiny models' templates
    expect alternation).
    """
    out: list[dict[str, str]] = []
    for msg in messages:
        if not isinstance(msg, dict):
            continue
        role = msg.get("role") or "user"
        text = _text_of(msg.get("content"))
        if role == "assistant" and msg.get("tool_calls"):
            calls = []
            for call in msg.get("tool_calls") or []:
                fn = (call or {}).get("function") or {}
                calls.append(f"{fn.get('name', 'tool')}({fn.get('arguments', '')})")
            text = (text + "\n" if text else "") + "\n".join(calls)
        if role in ("tool", "function"):
            role, text = "user", f"Output:\n{text}"
        elif role in ("developer",):
            role = "system"
        elif role not in ("system", "user", "assistant"):
            role = "user"
        if role == "system" and out and out[-1]["role"] != "system":
            role = "user"  # a late system note: show it as a user message
        if out and out[-1]["role"] == role:
            out[-1]["content"] += "\n\n" + text
        else:
            out.append({"role": role, "content": text})
    if not out or out[-1]["role"] == "assistant" and not out[-1]["content"]:
        out.append({"role": "user", "content": ""})
    return out


# --------------------------------------------------------------------------- the model

@dataclass
class Completion:
    """The end of one generation: ``finish_reason`` ("stop" or "length"), token counts."""

    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    seconds_to_first_token: float | None
    seconds: float


class LocalModel:
    """One loaded GGUF model. Thread-safe: generations run one at a time (a lock).

    Attributes: ``path`` (Path), ``n_ctx`` (int, tokens), ``load_seconds`` (float),
    ``metadata`` (dict from the GGUF header).
    """

    def __init__(self, path: Path, *, n_ctx: int | None = None, n_threads: int | None = None):
        meta = read_gguf_metadata(path)
        self.path = Path(path)
        self.metadata = meta
        self.n_ctx = n_ctx or context_size_for(meta)
        self.n_threads = n_threads or os.cpu_count() or 1
        self._lock = threading.Lock()
        started = time.perf_counter()
        self._llm = _load_llama(self.path, self.n_ctx, self.n_threads)
        self.load_seconds = time.perf_counter() - started
        self._formatter, self._stop_ids, self._eos_text = self._make_formatter()

    def _make_formatter(self):
        from llama_cpp import llama_chat_format

        llm = self._llm
        template = llm.metadata.get("tokenizer.chat_template") or _CHATML
        eos_id = llm.token_eos()
        bos_id = llm.token_bos()
        eos = llm._model.token_get_text(eos_id) if eos_id != -1 else ""
        bos = llm._model.token_get_text(bos_id) if bos_id != -1 else ""
        stop_ids = {eos_id} if eos_id != -1 else set()
        # ChatML models also end a turn with <|im_end|> even when EOS is another token.
        if "<|im_end|>" in template:
            ids = llm.tokenize(b"<|im_end|>", add_bos=False, special=True)
            if len(ids) == 1:
                stop_ids.add(ids[0])
        formatter = llama_chat_format.Jinja2ChatFormatter(
            template=template, eos_token=eos, bos_token=bos, stop_token_ids=list(stop_ids)
        )
        return formatter, stop_ids, eos

    def count_tokens(self, text: str) -> int:
        """Number of tokens of ``text`` (special tokens parsed)."""
        return len(self._llm.tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _prompt_tokens(self, messages: list[dict[str, str]], prefill: str = "") -> tuple[list[int], list[str]]:
        rendered = self._formatter(messages=messages)
        tokens = self._llm.tokenize(
            (rendered.prompt + prefill).encode("utf-8"), add_bos=not rendered.added_special, special=True
        )
        stops = [s for s in (rendered.stop if isinstance(rendered.stop, list) else [rendered.stop]) if s]
        return tokens, stops

    def _fit(self, messages: list[dict[str, str]], max_tokens: int,
             prefill: str = "") -> tuple[list[int], list[str], int]:
        """Tokens of the prompt (+ ``prefill``), dropping the oldest non-system turns until
        prompt + at least 64 completion tokens fit in ``n_ctx``. Returns (tokens, stops, max_tokens)."""
        msgs = list(messages)
        while True:
            tokens, stops = self._prompt_tokens(msgs, prefill)
            room = self.n_ctx - len(tokens)
            if room >= min(max_tokens, 64):
                return tokens, stops, max(1, min(max_tokens, room))
            first = 1 if msgs and msgs[0]["role"] == "system" else 0
            if len(msgs) - first <= 1:
                raise LocalModelError(
                    f"the prompt ({len(tokens)} tokens) does not fit this model's context window "
                    f"({self.n_ctx} tokens)"
                )
            del msgs[first]

    def stream_chat(
        self,
        messages: Sequence[dict],
        *,
        max_tokens: int | None = None,
        temperature: float | None = None,
        top_p: float | None = None,
        stop: Sequence[str] | str | None = None,
        seed: int | None = None,
        repeat_penalty: float = 1.1,
        presence_penalty: float = 0.0,
        frequency_penalty: float = 0.0,
        prefill: str = "",
    ) -> Iterator[str | Completion]:
        """Generate a reply to OpenAI-style ``messages``.

        Yields text pieces (str) as they are produced, then one :class:`Completion`. Holds the
        model's lock until the generator finishes or is closed. ``temperature`` defaults to 0
        (greedy: tiny models do best that way); ``max_tokens`` to :data:`DEFAULT_MAX_TOKENS`,
        shrunk to what fits the context. Raises :class:`LocalModelError` when the prompt cannot
        fit.

        ``prefill`` (assistant prefill): text appended to the prompt right after the assistant
        header, so the model continues from it; it is also yielded as the first text piece (the
        reply the caller sees starts with it). When the prefill leaves a code fence open (e.g.
        ``"```python\n"``), generation stops at the closing fence, which is yielded too: the
        reply is exactly one fenced block.
        """
        msgs = normalize_messages(messages)
        want = int(max_tokens) if max_tokens else DEFAULT_MAX_TOKENS
        stops_extra = [stop] if isinstance(stop, str) else list(stop or [])
        prefill = prefill or ""
        fence_open = prefill.count("```") % 2 == 1
        if fence_open and "```" not in stops_extra:
            stops_extra.append("```")
        with self._lock:
            started = time.perf_counter()
            tokens, stops, want = self._fit(msgs, want, prefill)
            seen_lengths: set[int] = set()  # one length per sampled token (see _stopping_criteria)
            stream = self._llm.create_completion(
                prompt=tokens,
                max_tokens=want,
                temperature=0.0 if temperature is None else float(temperature),
                top_p=0.95 if top_p is None else float(top_p),
                stop=[s for s in stops + stops_extra if s],
                seed=seed,
                repeat_penalty=repeat_penalty,
                presence_penalty=presence_penalty,
                frequency_penalty=frequency_penalty,
                stream=True,
                stopping_criteria=self._stopping_criteria(seen_lengths),
            )
            first_at = None
            finish = "stop"
            if prefill:
                yield prefill
            last = prefill
            for chunk in stream:
                choice = chunk["choices"][0]
                text = choice.get("text") or ""
                if text:
                    if first_at is None:
                        first_at = time.perf_counter() - started
                    last = text
                    yield text
                if choice.get("finish_reason"):
                    finish = choice["finish_reason"]
            if fence_open and finish == "stop":
                # Stopped at the closing fence (a stop string: not part of the text) or at the end
                # of the turn inside the block: close the block.
                yield ("```" if last.endswith("\n") else "\n```")
            yield Completion(
                finish_reason=finish,
                prompt_tokens=len(tokens),
                completion_tokens=len(seen_lengths),
                seconds_to_first_token=first_at,
                seconds=time.perf_counter() - started,
            )

    def _stopping_criteria(self, seen_lengths: set[int]):
        """Stop after the template's end-of-turn token; record ``len(ids)`` of every call.

        llama-cpp-python calls this once per sampled token with the ids evaluated so far (a
        different length each time) and once more after the loop (a repeated length), so the
        number of distinct lengths is the number of completion tokens. (Counting in a logits
        processor would work too, but llama-cpp-python makes that path ~30x slower.)
        """
        from llama_cpp import StoppingCriteriaList

        stop_ids = self._stop_ids

        def on_stop_token(ids, _logits) -> bool:
            seen_lengths.add(len(ids))
            return len(ids) > 0 and int(ids[-1]) in stop_ids

        return StoppingCriteriaList([on_stop_token])

    def chat(self, messages: Sequence[dict], **kwargs) -> tuple[str, Completion]:
        """Non-streaming :meth:`stream_chat`: returns (text, Completion)."""
        pieces: list[str] = []
        done: Completion | None = None
        for item in self.stream_chat(messages, **kwargs):
            if isinstance(item, Completion):
                done = item
            else:
                pieces.append(item)
        assert done is not None
        return "".join(pieces), done


_load_lock = threading.Lock()


def _load_llama(path: Path, n_ctx: int, n_threads: int):
    """``llama_cpp.Llama`` for ``path`` with the GGUF's chat template, quiet.

    Weight repacking ("extra buffer types") is turned off: with it, this llama.cpp build
    crashes (SIGSEGV) in batched prompt decoding on CPUs with AMX, and tiny models gain little
    from it.
    """
    try:
        import llama_cpp
        import llama_cpp.llama as llama_module
    except ImportError as exc:
        from oitui.local import INSTALL_HINT

        raise LocalModelError(
            f"the local model runtime (llama-cpp-python) is not installed ({exc}); install it with: {INSTALL_HINT}"
        ) from None
    with _load_lock:
        low = llama_module.llama_cpp
        original = low.llama_model_default_params

        def defaults():
            params = original()
            if hasattr(params, "use_extra_bufts"):
                params.use_extra_bufts = False
            return params

        low.llama_model_default_params = defaults
        try:
            return llama_cpp.Llama(
                model_path=str(path),
                n_ctx=n_ctx,
                n_batch=min(512, n_ctx),
                n_threads=n_threads,
                n_threads_batch=n_threads,
                chat_format=None,
                verbose=False,
            )
        except Exception as exc:  # noqa: BLE001 - llama.cpp raises ValueError/RuntimeError
            raise LocalModelError(f"cannot load the local model {path}: {exc}") from None
        finally:
            low.llama_model_default_params = original


_models: dict[str, LocalModel] = {}
_models_lock = threading.Lock()
_path_locks: dict[str, threading.Lock] = {}
_atexit_done = False


def close_all() -> None:
    """Free every loaded model (registered with atexit: freeing them during interpreter
    teardown makes llama-cpp-python print a TypeError)."""
    for model in list(_models.values()):
        try:
            model._llm.close()
        except Exception:  # noqa: BLE001
            pass
    _models.clear()


def get_model(model: str) -> LocalModel:
    """The loaded model for a ``local/...`` name or GGUF path, loading it on first use.

    Loads once per file (a per-file lock: concurrent callers wait for the one load) and
    reports the state ("loading", "ready", "error: ...") through :mod:`oitui.local`.
    Raises :class:`LocalModelError` when the extra is missing or the file cannot be loaded.
    """
    path = resolve_model_path(model)
    key = str(path)
    cached = _models.get(key)
    if cached is not None:
        return cached
    with _models_lock:
        lock = _path_locks.setdefault(key, threading.Lock())
    with lock:
        cached = _models.get(key)
        if cached is not None:
            return cached
        _set_state(path, "loading")
        try:
            loaded = LocalModel(path)
        except LocalModelError as exc:
            _set_state(path, f"error: {exc}")
            raise
        except Exception as exc:  # noqa: BLE001 - any loader failure becomes a clear error
            _set_state(path, f"error: {exc}")
            raise LocalModelError(f"cannot load the local model {path}: {exc}") from None
        _models[key] = loaded
        global _atexit_done
        if not _atexit_done:
            import atexit

            atexit.register(close_all)
            _atexit_done = True
        _set_state(path, "ready")
        return loaded
