"""oitui: Open Interpreter as a full-screen Textual terminal app.

Importing this package is cheap: nothing heavy (litellm, textual, jupyter, semgrep) loads until
it is used. The public names are resolved lazily (PEP 562 module ``__getattr__``):

- ``interpreter``: a ready :class:`OpenInterpreter` with ``config.toml`` and the environment applied.
- ``OpenInterpreter``: the engine class; ``OpenInterpreter()`` starts from defaults only.
- ``ApprovalRequest`` / ``Approval``: the shapes the approval handler takes and returns.
- ``OituiError``, ``ModelError``, ``LimitReached``, ``ConfigError``, ``NotAvailableYet``: the errors
  the API raises.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = [
    "__version__",
    "interpreter",
    "OpenInterpreter",
    "ApprovalRequest",
    "Approval",
    "OituiError",
    "ModelError",
    "LimitReached",
    "ConfigError",
    "NotAvailableYet",
]

_interpreter = None


def __getattr__(name: str):
    global _interpreter
    if name in ("OituiError", "ModelError", "LimitReached", "ConfigError", "NotAvailableYet"):
        from oitui.core import errors

        return getattr(errors, name)
    if name in ("ApprovalRequest", "Approval"):
        from oitui.core import approval

        return getattr(approval, name)
    if name == "OpenInterpreter":
        from oitui.core.interpreter import OpenInterpreter

        return OpenInterpreter
    if name == "interpreter":
        if _interpreter is None:
            from oitui.core.interpreter import make_configured_interpreter

            _interpreter = make_configured_interpreter()
        return _interpreter
    raise AttributeError(f"module 'oitui' has no attribute {name!r}")
