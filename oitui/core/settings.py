"""Configuration: folders (``OITUI_HOME``), ``config.toml``, profiles, environment, precedence.

Where things live (:func:`paths`): with ``OITUI_HOME=DIR`` everything is under DIR
(``config.toml``, ``skills/``, ``themes/``, ``sessions/``, ``outputs/``, ``cache/``, ``logs/``);
without it, platformdirs' config folder (config.toml, skills, themes), data folder (sessions,
outputs), cache folder and log folder for "oitui".

Config keys are the long command-line flag names with underscores (:data:`DEFAULTS` lists every
one). A value is looked up in this order, later winning::

    DEFAULTS < config.toml < [profiles.NAME] < environment (OITUI_<KEY>) < command line

The tables ``[mcp_servers.NAME]``, ``[hooks]`` and ``[default_models]`` are kept as they are
(``settings["mcp_servers"]`` etc.). ``config/default.toml`` in the repository documents every key.

This module is cheap to import (standard library only; ``tomli_w``, ``yaml`` and ``platformdirs``
load inside the functions that need them).
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from oitui.core.errors import ConfigError

__all__ = [
    "Paths",
    "paths",
    "DEFAULTS",
    "KEY_TYPES",
    "TABLES",
    "Settings",
    "load_settings",
    "load_settings_or_defaults",
    "save_setting",
    "import_oi_profile",
    "parse_value",
]

APP_NAME = "oitui"


# --------------------------------------------------------------------------------------------
# Folders
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Paths:
    """The folders and files oitui uses. All are absolute ``Path`` objects; none is created here.

    - ``home``: ``OITUI_HOME`` when set, else the platformdirs config folder.
    - ``config_file``: ``config.toml``.
    - ``sessions_dir``: ``sessions/`` (``<ID>.jsonl`` files and ``index.sqlite``).
    - ``outputs_dir``: ``outputs/`` (``outputs/<ID>/`` holds what a session made).
    - ``cache_dir``, ``logs_dir``, ``skills_dir``, ``themes_dir``.
    """

    home: Path
    config_file: Path
    sessions_dir: Path
    outputs_dir: Path
    cache_dir: Path
    logs_dir: Path
    skills_dir: Path
    themes_dir: Path

    def ensure(self) -> "Paths":
        """Create every folder (not the config file) and return self. Raises OSError."""
        for p in (self.home, self.sessions_dir, self.outputs_dir, self.cache_dir, self.logs_dir,
                  self.skills_dir, self.themes_dir):
            p.mkdir(parents=True, exist_ok=True)
        return self


def paths(environ: Mapping[str, str] | None = None) -> Paths:
    """Return the :class:`Paths` in effect now (``OITUI_HOME`` is read at each call).

    ``environ`` defaults to ``os.environ``. Nothing is created on disk.
    """
    env = os.environ if environ is None else environ
    home = env.get("OITUI_HOME")
    if home:
        base = Path(home).expanduser().resolve()
        return Paths(
            home=base,
            config_file=base / "config.toml",
            sessions_dir=base / "sessions",
            outputs_dir=base / "outputs",
            cache_dir=base / "cache",
            logs_dir=base / "logs",
            skills_dir=base / "skills",
            themes_dir=base / "themes",
        )
    import platformdirs

    config = Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))
    data = Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    return Paths(
        home=config,
        config_file=config / "config.toml",
        sessions_dir=data / "sessions",
        outputs_dir=data / "outputs",
        cache_dir=Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False)),
        logs_dir=Path(platformdirs.user_log_dir(APP_NAME, appauthor=False)),
        skills_dir=config / "skills",
        themes_dir=config / "themes",
    )


# --------------------------------------------------------------------------------------------
# Keys, defaults and types
# --------------------------------------------------------------------------------------------

#: Every config key and its default. ``None`` means "not set" (the engine decides).
DEFAULTS: dict[str, Any] = {
    "model": None,
    "api_base": None,
    "api_key": None,
    "harness": "native",
    "auto_run": False,
    "safe_mode": "off",
    "sandbox": "auto",
    "sandbox_network": "on",
    "add_dir": [],
    "max_output": 2800,
    "max_tool_output": 30000,
    "max_budget": None,
    "max_turns": 50,
    "context_window": None,
    "max_tokens": None,
    "temperature": 0.0,
    "offline": False,
    "loop": False,
    "custom_instructions": "",
    "system_message": None,
    "local": False,
    "python": None,
    "theme": None,
    "highlight_active_line": True,
    "llm_supports_functions": None,
    "llm_supports_vision": None,
    "verbose": False,
}

#: The type of each key: "str", "bool", "int", "float", "list" (of str), or a tuple of the
#: allowed strings. A key whose default is None also accepts None (from the command line).
KEY_TYPES: dict[str, Any] = {
    "model": "str",
    "api_base": "str",
    "api_key": "str",
    "harness": "str",
    "auto_run": "bool",
    "safe_mode": ("off", "ask", "auto"),
    "sandbox": ("auto", "off", "read-only", "workspace-write"),
    "sandbox_network": ("on", "off"),
    "add_dir": "list",
    "max_output": "int",
    "max_tool_output": "int",
    "max_budget": "float",
    "max_turns": "int",
    "context_window": "int",
    "max_tokens": "int",
    "temperature": "float",
    "offline": "bool",
    "loop": "bool",
    "custom_instructions": "str",
    "system_message": "str",
    "local": "bool",
    "python": "str",
    "theme": "str",
    "highlight_active_line": "bool",
    "llm_supports_functions": "bool",
    "llm_supports_vision": "bool",
    "verbose": "bool",
}

#: Tables kept as they are (their contents are checked by their owners): name -> default.
TABLES: dict[str, Any] = {"mcp_servers": {}, "hooks": {}, "default_models": {}}

_NON_NEGATIVE = {"max_output", "max_tool_output", "max_turns", "context_window", "max_tokens", "max_budget"}
_TRUE = {"1", "true", "yes", "on", "y"}
_FALSE = {"0", "false", "no", "off", "n"}


def _type_name(kind: Any) -> str:
    if isinstance(kind, tuple):
        return "one of " + ", ".join(repr(k) for k in kind)
    return {"str": "a string", "bool": "true or false", "int": "an integer", "float": "a number",
            "list": "a list of strings"}[kind]


def parse_value(key: str, text: str) -> Any:
    """Parse the text of an environment variable or flag into ``key``'s type.

    Booleans accept 1/0, true/false, yes/no, on/off; lists are split on ``os.pathsep`` (and
    commas); an empty text or "none" means None for keys whose default is None.
    Raises ``ValueError`` with a short reason when the text does not fit.
    """
    kind = KEY_TYPES[key]
    t = text.strip()
    if DEFAULTS.get(key) is None and t.lower() in ("", "none", "null"):
        return None
    if kind == "bool":
        if t.lower() in _TRUE:
            return True
        if t.lower() in _FALSE:
            return False
        raise ValueError(f"expected {_type_name(kind)}, got {text!r}")
    if kind == "int":
        try:
            return int(t)
        except ValueError:
            raise ValueError(f"expected {_type_name(kind)}, got {text!r}") from None
    if kind == "float":
        try:
            return float(t)
        except ValueError:
            raise ValueError(f"expected {_type_name(kind)}, got {text!r}") from None
    if kind == "list":
        parts = re.split(r"[,%s]" % re.escape(os.pathsep), t) if t else []
        return [p.strip() for p in parts if p.strip()]
    if isinstance(kind, tuple):
        if t not in kind:
            raise ValueError(f"expected {_type_name(kind)}, got {text!r}")
        return t
    return text


def _check_value(key: str, value: Any) -> Any:
    """Return ``value`` normalised for ``key`` or raise ValueError saying what was expected."""
    kind = KEY_TYPES[key]
    if value is None:
        if DEFAULTS.get(key) is None:
            return None
        raise ValueError(f"expected {_type_name(kind)}, got nothing")
    if kind == "bool":
        if isinstance(value, bool):
            return value
    elif kind == "int":
        if isinstance(value, int) and not isinstance(value, bool):
            if key in _NON_NEGATIVE and value < 0:
                raise ValueError(f"expected a number >= 0, got {value!r}")
            return value
    elif kind == "float":
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            if key in _NON_NEGATIVE and value < 0:
                raise ValueError(f"expected a number >= 0, got {value!r}")
            return float(value)
    elif kind == "list":
        if isinstance(value, str):
            return [value]
        if isinstance(value, (list, tuple)) and all(isinstance(v, (str, os.PathLike)) for v in value):
            return [os.fspath(v) for v in value]
    elif isinstance(kind, tuple):
        if isinstance(value, str) and value in kind:
            return value
    elif kind == "str":
        if isinstance(value, str):
            return value
        if isinstance(value, os.PathLike):
            return os.fspath(value)
    raise ValueError(f"expected {_type_name(kind)}, got {value!r}")


# --------------------------------------------------------------------------------------------
# Settings
# --------------------------------------------------------------------------------------------


class Settings(Mapping):
    """The effective configuration: a read-only mapping of every key in :data:`DEFAULTS` and
    :data:`TABLES` to its value.

    - ``settings["model"]``, ``settings.get("theme", "x")``, ``dict(settings)``.
    - ``settings.errors``: list of non-fatal warnings (unknown keys, ...), as text.
    - ``settings.source_of(key)``: "default", "config", "profile", "env" or "cli".
    - ``settings.profile``: the selected profile name or None; ``settings.config_path``: the file.
    - ``settings.apply(interpreter)``: sets the interpreter's attributes from these values.
    """

    def __init__(self, values: dict[str, Any], sources: dict[str, str], errors: list[str] | None = None,
                 profile: str | None = None, config_path: Path | None = None):
        self._values = dict(values)
        self._sources = dict(sources)
        self.errors: list[str] = list(errors or [])
        self.profile = profile
        self.config_path = config_path

    def __getitem__(self, key: str) -> Any:
        return self._values[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def __repr__(self) -> str:
        shown = {k: ("***" if k == "api_key" and v else v) for k, v in self._values.items()}
        return f"Settings({shown!r})"

    def source_of(self, key: str) -> str:
        """Where ``key``'s value came from: "default", "config", "profile", "env" or "cli".

        Raises KeyError for an unknown key.
        """
        if key not in self._values:
            raise KeyError(key)
        return self._sources.get(key, "default")

    def as_dict(self) -> dict[str, Any]:
        """A plain (shallow) copy of every value."""
        return dict(self._values)

    def apply(self, interpreter: Any) -> Any:
        """Set ``interpreter``'s attributes from these settings and return it.

        LLM: ``llm.model/api_base/api_key/temperature/context_window/max_tokens/
        supports_functions/supports_vision`` (values that are None are left alone). Engine:
        ``auto_run, max_output, max_tool_output, offline, loop, custom_instructions, max_budget,
        max_turns, safe_mode, harness`` and ``system_message`` only when set; ``sandbox``,
        ``sandbox_network``, ``add_dir``, ``verbose`` where the interpreter has them. Computer:
        ``python`` and ``highlight_active_line`` where ``interpreter.computer`` has them.
        A configured ``api_key`` is registered for redaction from saved sessions.
        """
        v = self._values
        llm = getattr(interpreter, "llm", None)
        if llm is not None:
            for key, attr in (("model", "model"), ("api_base", "api_base"), ("api_key", "api_key"),
                              ("temperature", "temperature"), ("context_window", "context_window"),
                              ("max_tokens", "max_tokens"), ("llm_supports_functions", "supports_functions"),
                              ("llm_supports_vision", "supports_vision")):
                if v.get(key) is not None:
                    setattr(llm, attr, v[key])
        for key in ("auto_run", "max_output", "max_tool_output", "offline", "loop", "custom_instructions",
                    "max_budget", "max_turns", "safe_mode", "harness"):
            if v.get(key) is not None or key == "max_budget":
                setattr(interpreter, key, v.get(key))
        if v.get("system_message") is not None:
            interpreter.system_message = v["system_message"]
        for key in ("sandbox", "sandbox_network", "add_dir", "verbose"):
            if hasattr(interpreter, key) and v.get(key) is not None:
                setattr(interpreter, key, v[key])
        computer = getattr(interpreter, "computer", None)
        if computer is not None:
            for key in ("python", "highlight_active_line"):
                if v.get(key) is not None and hasattr(computer, key):
                    try:
                        setattr(computer, key, v[key])
                    except AttributeError:
                        pass
        if v.get("api_key"):
            try:
                from oitui.core import sessions

                sessions.register_secret(v["api_key"])
            except Exception:  # pragma: no cover - redaction registration must never break apply
                pass
        return interpreter


def _find_line(text: str, key: str, table: str | None) -> int | None:
    """The 1-based line where ``key`` is assigned inside ``[table]`` (None: top level)."""
    current: str | None = None
    header = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
    assign = re.compile(r"^\s*(?:\"%s\"|'%s'|%s)\s*=" % (re.escape(key), re.escape(key), re.escape(key)))
    for n, line in enumerate(text.splitlines(), 1):
        m = header.match(line)
        if m:
            current = re.sub(r"\s*\.\s*", ".", m.group(1)).replace('"', "").replace("'", "")
            continue
        if current == table and assign.match(line):
            return n
    return None


def _read_toml(path: Path) -> tuple[dict, str]:
    """Read and parse ``path``; raise ConfigError naming the file and line on bad TOML."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ConfigError(f"cannot read config file {path}: {e.strerror or e}", path=str(path)) from e
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise ConfigError(f"{path}: line {line}: not valid UTF-8", path=str(path), line=line) from e
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        msg = str(e)
        m = re.search(r"\(at line (\d+), column (\d+)\)", msg)
        line = int(m.group(1)) if m else None
        reason = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg).strip() or "invalid TOML"
        where = f"line {line}, column {m.group(2)}" if m else "end of file"
        if m is None and "end of document" in msg:
            line = text.count("\n") + 1
        raise ConfigError(f"{path}: {where}: invalid TOML: {reason}", path=str(path), line=line) from e
    return data, text


def _layer(data: Mapping, text: str, path: Path, table: str | None, warnings: list[str]) -> dict[str, Any]:
    """Check the keys of one table of config.toml and return the known ones, normalised."""
    out: dict[str, Any] = {}
    where = f"[{table}]" if table else "top level"
    for key, value in data.items():
        if key in KEY_TYPES:
            try:
                out[key] = _check_value(key, value)
            except ValueError as e:
                line = _find_line(text, key, table)
                at = f"line {line}: " if line else ""
                raise ConfigError(f"{path}: {at}key {key!r}: {e}", path=str(path), line=line, key=key) from None
        elif key in TABLES and table is None:
            continue
        elif table is not None and table.startswith("profiles.") and key in ("mcp_servers", "hooks"):
            if not isinstance(value, dict):
                line = _find_line(text, key, table)
                raise ConfigError(f"{path}: line {line}: key {key!r}: expected a table", path=str(path),
                                  line=line, key=key)
            out[key] = value
        elif key == "profiles" and table is None:
            continue
        else:
            line = _find_line(text, key, table)
            at = f" (line {line})" if line else ""
            warnings.append(f"{path}{at}: unknown key {key!r} in {where} ignored")
    return out


_SHIPPED_MODELS: dict[str, str] | None = None


def shipped_default_models() -> dict[str, str]:
    """The ``[default_models]`` table of the shipped ``config/default.toml`` (provider -> litellm
    model name), read once; ``{}`` if the file is missing or unreadable."""
    global _SHIPPED_MODELS
    if _SHIPPED_MODELS is None:
        try:
            from oitui.resources import resource_dir

            with open(resource_dir("config") / "default.toml", "rb") as f:
                table = tomllib.load(f).get("default_models", {})
            _SHIPPED_MODELS = {str(k): str(v) for k, v in table.items()} if isinstance(table, dict) else {}
        except (OSError, tomllib.TOMLDecodeError):
            _SHIPPED_MODELS = {}
    return dict(_SHIPPED_MODELS)


def load_settings(profile: str | None = None, overrides: Mapping[str, Any] | None = None,
                  environ: Mapping[str, str] | None = None, config_path: str | os.PathLike | None = None
                  ) -> Settings:
    """Build the effective :class:`Settings`.

    - ``profile``: the ``[profiles.NAME]`` table to apply (ConfigError if it does not exist).
    - ``overrides``: command-line values by key; None values mean "flag not given" and are
      skipped; strings for typed keys are parsed like environment values.
    - ``environ``: where ``OITUI_<KEY>`` variables (and ``OITUI_HOME``) are read; default
      ``os.environ``.
    - ``config_path``: the config file; default ``paths(environ).config_file``. A missing file is
      the same as an empty one.

    Raises :class:`oitui.core.errors.ConfigError` for bad TOML (message names the file, line and
    column), a wrong-typed value (names the file, line and key), a bad environment value (names
    the variable), a bad override, or an unknown profile. Unknown keys only add a warning to
    ``settings.errors``.
    """
    return _load(profile, overrides, environ, config_path, read_config=True)


def _load(profile, overrides, environ, config_path, read_config: bool) -> Settings:
    env = os.environ if environ is None else environ
    path = Path(config_path) if config_path is not None else paths(env).config_file
    warnings: list[str] = []
    values: dict[str, Any] = {k: (list(v) if isinstance(v, list) else v) for k, v in DEFAULTS.items()}
    sources: dict[str, str] = {k: "default" for k in DEFAULTS}
    tables: dict[str, Any] = {k: dict(v) for k, v in TABLES.items()}
    tables["default_models"] = shipped_default_models()

    data: dict = {}
    text = ""
    if not read_config:
        pass
    elif path.is_file():
        data, text = _read_toml(path)
    elif path.exists():
        raise ConfigError(f"config path {path} is not a file", path=str(path))

    for k, v in _layer(data, text, path, None, warnings).items():
        values[k] = v
        sources[k] = "config"
    for name in TABLES:
        if name in data:
            if not isinstance(data[name], dict):
                line = _find_line(text, name, None)
                raise ConfigError(f"{path}: line {line}: key {name!r}: expected a table", path=str(path),
                                  line=line, key=name)
            if name == "default_models":
                tables[name].update(data[name])
            else:
                tables[name] = dict(data[name])
            sources[name] = "config"

    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict):
        line = _find_line(text, "profiles", None)
        raise ConfigError(f"{path}: line {line}: key 'profiles': expected tables [profiles.NAME]",
                          path=str(path), line=line, key="profiles")
    if profile:
        if profile not in profiles or not isinstance(profiles[profile], dict):
            avail = ", ".join(sorted(k for k, v in profiles.items() if isinstance(v, dict))) or "none"
            raise ConfigError(f"profile {profile!r} not found in {path} (profiles: {avail})",
                              path=str(path), key=profile)
        for k, v in _layer(profiles[profile], text, path, f"profiles.{profile}", warnings).items():
            if k in ("mcp_servers", "hooks"):
                merged = dict(tables[k])
                merged.update(v)
                tables[k] = merged
                sources[k] = "profile"
            else:
                values[k] = v
                sources[k] = "profile"

    for key in DEFAULTS:
        var = "OITUI_" + key.upper()
        if var in env:
            try:
                values[key] = _check_value(key, parse_value(key, env[var]))
            except ValueError as e:
                raise ConfigError(f"environment variable {var}: {e}", key=key) from None
            sources[key] = "env"

    for key, value in (overrides or {}).items():
        if value is None:
            continue
        if key not in KEY_TYPES:
            if key in TABLES and isinstance(value, dict):
                tables[key] = dict(value)
                sources[key] = "cli"
                continue
            raise ConfigError(f"unknown setting {key!r}", key=key)
        try:
            if isinstance(value, str) and KEY_TYPES[key] not in ("str",) and not isinstance(KEY_TYPES[key], tuple):
                value = parse_value(key, value)
            values[key] = _check_value(key, value)
        except ValueError as e:
            flag = "--" + key.replace("_", "-")
            raise ConfigError(f"{flag}: {e}", key=key) from None
        sources[key] = "cli"

    values.update(tables)
    return Settings(values, sources, warnings, profile=profile, config_path=path)


def load_settings_or_defaults(profile: str | None = None, overrides: Mapping[str, Any] | None = None,
                              environ: Mapping[str, str] | None = None,
                              config_path: str | os.PathLike | None = None) -> tuple[Settings, str | None]:
    """Like :func:`load_settings`, but never raises: for the TUI, which starts anyway.

    Returns ``(settings, None)`` when everything loaded, else ``(fallback, error_text)`` where
    the fallback ignores the config file (defaults < environment < overrides), or is the bare
    defaults when the environment or overrides are bad too.
    """
    try:
        return load_settings(profile, overrides, environ, config_path), None
    except ConfigError as e:
        message = str(e)
    try:
        s = _load(None, overrides, environ, config_path, read_config=False)
    except ConfigError:
        s = _load(None, None, {}, config_path or Path(os.devnull), read_config=False)
        s.config_path = Path(config_path) if config_path is not None else paths(environ).config_file
    s.errors.insert(0, message)
    return s, message


def _write_toml_atomic(path: Path, data: dict) -> None:
    import tomli_w

    path.parent.mkdir(parents=True, exist_ok=True)
    payload = tomli_w.dumps(data).encode("utf-8")
    fd, tmp = tempfile.mkstemp(prefix=".config-", suffix=".toml", dir=str(path.parent))
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(payload)
            f.flush()
            os.fsync(f.fileno())
        if path.exists():
            try:
                os.chmod(tmp, path.stat().st_mode & 0o777)
            except OSError:
                pass
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _load_for_edit(path: Path) -> dict:
    if path.is_file():
        data, _ = _read_toml(path)
        return data
    return {}


def save_setting(key: str, value: Any, config_path: str | os.PathLike | None = None,
                 profile: str | None = None) -> Path:
    """Write ``key = value`` into config.toml (or its ``[profiles.NAME]`` table), keeping every
    other key, and return the file's path. ``value=None`` removes the key.

    The file is rewritten with tomli-w (comments are not kept) atomically (temp file +
    ``os.replace``). Raises ConfigError for an unknown key, a wrong-typed value, or when the
    existing file is not valid TOML (it is then left untouched).
    """
    if key not in KEY_TYPES and key not in TABLES:
        raise ConfigError(f"unknown setting {key!r}", key=key)
    if key in KEY_TYPES and value is not None:
        try:
            value = _check_value(key, value)
        except ValueError as e:
            raise ConfigError(f"setting {key!r}: {e}", key=key) from None
    path = Path(config_path) if config_path is not None else paths().config_file
    data = _load_for_edit(path)
    target = data
    if profile:
        target = data.setdefault("profiles", {}).setdefault(profile, {})
    if value is None:
        target.pop(key, None)
    else:
        target[key] = value
    _write_toml_atomic(path, data)
    return path


# --------------------------------------------------------------------------------------------
# Open Interpreter profiles
# --------------------------------------------------------------------------------------------

_OI_LLM = {
    "model": "model",
    "api_base": "api_base",
    "api_key": "api_key",
    "temperature": "temperature",
    "context_window": "context_window",
    "max_tokens": "max_tokens",
    "supports_functions": "llm_supports_functions",
    "supports_vision": "llm_supports_vision",
}
_OI_TOP = {
    "auto_run": "auto_run",
    "custom_instructions": "custom_instructions",
    "system_message": "system_message",
    "offline": "offline",
    "safe_mode": "safe_mode",
    "loop": "loop",
    "max_output": "max_output",
    "max_budget": "max_budget",
    "verbose": "verbose",
    "local": "local",
    # Open Interpreter 0.1.x kept the LLM settings at the top level.
    "model": "model",
    "api_base": "api_base",
    "api_key": "api_key",
    "temperature": "temperature",
    "context_window": "context_window",
    "max_tokens": "max_tokens",
}
_OI_IGNORED = {"version"}


def map_oi_profile(data: Mapping[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Map a parsed Open Interpreter profile to our keys.

    Returns ``(mapped, skipped)``: ``mapped`` holds checked values by our key names; ``skipped``
    names each OI setting that has no equivalent (e.g. ``computer.import_computer_api``).
    Raises ConfigError when a known setting has a wrong type.
    """
    mapped: dict[str, Any] = {}
    skipped: list[str] = []

    def put(src: str, key: str, value: Any) -> None:
        if value is None:
            return
        if key == "safe_mode" and value is False:
            value = "off"
        try:
            mapped[key] = _check_value(key, value)
        except ValueError as e:
            raise ConfigError(f"Open Interpreter setting {src!r}: {e}", key=src) from None

    for k, v in data.items():
        if k == "llm" and isinstance(v, Mapping):
            for lk, lv in v.items():
                if lk in _OI_LLM:
                    put(f"llm.{lk}", _OI_LLM[lk], lv)
                else:
                    skipped.append(f"llm.{lk}")
        elif k == "computer" and isinstance(v, Mapping):
            for ck, cv in v.items():
                if ck == "highlight_active_line":
                    put("computer.highlight_active_line", "highlight_active_line", cv)
                else:
                    skipped.append(f"computer.{ck}")
        elif k in _OI_TOP:
            put(k, _OI_TOP[k], v)
        elif k in _OI_IGNORED:
            continue
        else:
            skipped.append(k)
    return mapped, skipped


def import_oi_profile(yaml_path: str | os.PathLike, profile: str | None = None,
                      config_path: str | os.PathLike | None = None, write: bool = True,
                      skipped: list[str] | None = None) -> dict[str, Any]:
    """Import an Open Interpreter YAML profile into config.toml; return the imported values.

    The profile's ``llm: {model, api_base, api_key, temperature, context_window, max_tokens,
    supports_functions}``, ``auto_run``, ``custom_instructions``, ``system_message``,
    ``offline``, ``safe_mode``, ``loop`` and ``computer.highlight_active_line`` become our keys
    (``version`` is ignored). They are merged into the top level of config.toml, or into
    ``[profiles.NAME]`` when ``profile`` is given, keeping every other key; ``write=False`` only
    maps. Settings with no equivalent are appended to ``skipped`` when a list is passed.

    Raises ConfigError when the file cannot be read, is not YAML, is not a mapping, has
    wrong-typed values, or when the existing config.toml is invalid (left untouched).
    """
    import yaml

    src = Path(yaml_path)
    try:
        text = src.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise ConfigError(f"cannot read {src}: {getattr(e, 'strerror', None) or e}", path=str(src)) from e
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        at = f"line {line}: " if line else ""
        raise ConfigError(f"{src}: {at}invalid YAML: {getattr(e, 'problem', None) or e}", path=str(src),
                          line=line) from e
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"{src}: expected a YAML mapping of settings", path=str(src))
    try:
        mapped, skip = map_oi_profile(data)
    except ConfigError as e:
        raise ConfigError(f"{src}: {e}", path=str(src), key=e.key) from None
    if skipped is not None:
        skipped.extend(skip)
    if write:
        path = Path(config_path) if config_path is not None else paths().config_file
        cfg = _load_for_edit(path)
        target = cfg
        if profile:
            profiles = cfg.setdefault("profiles", {})
            if not isinstance(profiles, dict):
                raise ConfigError(f"{path}: 'profiles' is not a table", path=str(path), key="profiles")
            target = profiles.setdefault(profile, {})
        target.update(mapped)
        _write_toml_atomic(path, cfg)
    return mapped


def _main(argv: list[str] | None = None) -> int:  # pragma: no cover - debugging helper
    """``python -m oitui.core.settings``: print the effective settings and their sources."""
    s = load_settings()
    for k in s:
        print(f"{k} = {s[k]!r}  ({s.source_of(k)})")
    for w in s.errors:
        print("warning:", w, file=sys.stderr)
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(_main())
