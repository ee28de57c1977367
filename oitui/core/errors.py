"""Errors raised by oitui's public API. Cheap to import (no third-party imports)."""

from __future__ import annotations


class OituiError(Exception):
    """Base class of every error oitui raises on purpose."""


class ModelError(OituiError):
    """The model or its API failed for good (after retries for rate limits and 5xx).

    ``interpreter.messages`` is left consistent (no tool call without its result) when raised.
    Attributes: ``status_code`` (int or None, the HTTP status when known), ``provider`` (str or None).
    """

    def __init__(self, message: str, *, status_code: int | None = None, provider: str | None = None):
        super().__init__(message)
        self.status_code = status_code
        self.provider = provider


class LimitReached(OituiError):
    """A limit stopped the turn: ``kind`` is "budget", "max_turns", "retries" or "loop"."""

    def __init__(self, message: str, *, kind: str = "limit"):
        super().__init__(message)
        self.kind = kind


class ConfigError(OituiError):
    """A bad config file or value. ``path``, ``line`` and ``key`` name where, when known."""

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None, key: str | None = None):
        super().__init__(message)
        self.path = path
        self.line = line
        self.key = key


class NotAvailableYet(OituiError):
    """A flag or feature whose issue has not landed yet (the CLI exits 2 with this message)."""
