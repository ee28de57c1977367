"""oitui's colour themes: Textual ``Theme`` objects loaded from TOML files.

Two folders are read, in this order (a later file with the same ``name`` replaces an earlier one):

1. the ``themes/`` folder shipped with oitui (``oitui.resources.resource_dir("themes")``);
2. the person's own themes folder (``oitui.core.settings.paths().themes_dir``), when it exists.

The file format is described in ``themes/README.md``. A bad file (TOML syntax, a missing
``name``/``primary``, an unknown key, a colour Textual cannot parse) is never fatal: it is skipped
and described in the list of error strings that :func:`register_themes` returns, so the app can
show it.

:func:`code_theme_for` gives the pygments style that suits a theme (for code highlighted with
Rich ``Syntax``), :func:`text_area_theme_for` the ``TextArea`` theme, so the code pane follows the
app theme.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from textual.app import App
    from textual.theme import Theme

#: Colour keys of a theme file (all optional except ``primary``); values are colour strings.
COLOR_KEYS = (
    "primary",
    "secondary",
    "accent",
    "foreground",
    "background",
    "surface",
    "panel",
    "boost",
    "success",
    "warning",
    "error",
)
#: Every key a theme file may hold.
ALLOWED_KEYS = frozenset(
    COLOR_KEYS
    + ("name", "dark", "variables", "luminosity_spread", "text_alpha", "ansi", "code_theme", "text_area_theme")
)

# Our themes' code styles, filled as files load: theme name -> (pygments style, TextArea theme).
_CODE_THEMES: dict[str, tuple[str, str]] = {}

# Textual's built-in themes -> (pygments style, TextArea theme).
_BUILTIN_CODE_THEMES: dict[str, tuple[str, str]] = {
    "textual-dark": ("monokai", "monokai"),
    "textual-light": ("default", "github_light"),
    "nord": ("nord", "vscode_dark"),
    "gruvbox": ("gruvbox-dark", "monokai"),
    "catppuccin-mocha": ("one-dark", "dracula"),
    "catppuccin-frappe": ("one-dark", "dracula"),
    "catppuccin-macchiato": ("one-dark", "dracula"),
    "catppuccin-latte": ("friendly", "github_light"),
    "dracula": ("dracula", "dracula"),
    "tokyo-night": ("one-dark", "vscode_dark"),
    "monokai": ("monokai", "monokai"),
    "flexoki": ("zenburn", "monokai"),
    "solarized-light": ("solarized-light", "github_light"),
    "solarized-dark": ("solarized-dark", "vscode_dark"),
    "rose-pine": ("one-dark", "dracula"),
    "rose-pine-moon": ("one-dark", "dracula"),
    "rose-pine-dawn": ("friendly", "github_light"),
    "atom-one-dark": ("one-dark", "vscode_dark"),
    "atom-one-light": ("default", "github_light"),
    "ansi-dark": ("monokai", "css"),
    "ansi-light": ("default", "github_light"),
}
_DARK_DEFAULT = ("monokai", "vscode_dark")
_LIGHT_DEFAULT = ("default", "github_light")


def theme_dirs() -> list[Path]:
    """Folders searched for ``*.toml`` theme files, shipped folder first.

    The user's folder is included only when it exists. Never raises: a missing shipped folder or
    an unavailable settings module just leaves that folder out.
    """
    dirs: list[Path] = []
    try:
        from oitui.resources import resource_dir

        dirs.append(resource_dir("themes"))
    except (ImportError, FileNotFoundError):
        pass
    try:
        from oitui.core.settings import paths

        user_dir = Path(paths().themes_dir)
        if user_dir.is_dir() and user_dir not in dirs:
            dirs.append(user_dir)
    except Exception:  # settings not importable yet, or a bad OITUI_HOME: just skip the folder
        pass
    return dirs


def parse_theme_file(path: Path) -> tuple["Theme", str | None, str | None]:
    """Read one theme file.

    Returns ``(theme, code_theme, text_area_theme)`` (the last two None when the file gives none).
    Raises ValueError with a one-line reason (naming the file) when the file is not a valid theme.
    """
    from textual.color import Color, ColorParseError
    from textual.theme import Theme

    try:
        data: dict[str, Any] = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: bad TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot read: {exc}") from None
    unknown = sorted(set(data) - ALLOWED_KEYS)
    if unknown:
        raise ValueError(f"{path}: unknown key(s) {', '.join(unknown)} (allowed: {', '.join(sorted(ALLOWED_KEYS))})")
    name = data.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ValueError(f"{path}: 'name' is required and must be a non-empty string")
    if "primary" not in data:
        raise ValueError(f"{path}: 'primary' colour is required")
    kwargs: dict[str, Any] = {"name": name.strip()}
    for key in COLOR_KEYS:
        if key in data:
            value = data[key]
            if not isinstance(value, str):
                raise ValueError(f"{path}: {key!r} must be a colour string like \"#1e90ff\", not {value!r}")
            try:
                Color.parse(value)
            except ColorParseError:
                raise ValueError(f"{path}: {key!r} = {value!r} is not a colour Textual understands") from None
            kwargs[key] = value
    if "dark" in data:
        if not isinstance(data["dark"], bool):
            raise ValueError(f"{path}: 'dark' must be true or false")
        kwargs["dark"] = data["dark"]
    if "ansi" in data:
        if not isinstance(data["ansi"], bool):
            raise ValueError(f"{path}: 'ansi' must be true or false")
        kwargs["ansi"] = data["ansi"]
    for key in ("luminosity_spread", "text_alpha"):
        if key in data:
            if not isinstance(data[key], (int, float)) or isinstance(data[key], bool):
                raise ValueError(f"{path}: {key!r} must be a number")
            kwargs[key] = float(data[key])
    variables = data.get("variables", {})
    if not isinstance(variables, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in variables.items()
    ):
        raise ValueError(f"{path}: [variables] must be a table of string values")
    kwargs["variables"] = dict(variables)
    code_theme = data.get("code_theme")
    text_area_theme = data.get("text_area_theme")
    for key, value in (("code_theme", code_theme), ("text_area_theme", text_area_theme)):
        if value is not None and not isinstance(value, str):
            raise ValueError(f"{path}: {key!r} must be a string")
    if code_theme is not None:
        from pygments.styles import get_all_styles

        if code_theme not in set(get_all_styles()):
            raise ValueError(f"{path}: code_theme {code_theme!r} is not a pygments style")
    theme = Theme(**kwargs)
    try:  # build the colour system once so bad variables surface here, not at paint time
        theme.to_color_system().generate()
    except Exception as exc:
        raise ValueError(f"{path}: theme does not build: {exc}") from None
    return theme, code_theme, text_area_theme


def load_themes(dirs: list[Path] | None = None) -> tuple[list["Theme"], list[str]]:
    """Load every ``*.toml`` theme in ``dirs`` (default :func:`theme_dirs`), sorted by file name.

    Returns ``(themes, errors)``: valid themes (a later folder's theme replaces an earlier one of
    the same name) and one error string per bad file. Never raises.
    """
    themes: dict[str, Theme] = {}
    errors: list[str] = []
    for folder in theme_dirs() if dirs is None else dirs:
        try:
            files = sorted(Path(folder).glob("*.toml"))
        except OSError as exc:
            errors.append(f"{folder}: cannot list themes: {exc}")
            continue
        for path in files:
            try:
                theme, code_theme, ta_theme = parse_theme_file(path)
            except ValueError as exc:
                errors.append(str(exc))
                continue
            default = _DARK_DEFAULT if theme.dark else _LIGHT_DEFAULT
            _CODE_THEMES[theme.name] = (code_theme or default[0], ta_theme or default[1])
            themes[theme.name] = theme
    return list(themes.values()), errors


def register_themes(app: "App", dirs: list[Path] | None = None) -> list[str]:
    """Register our themes (and the person's) with ``app`` via ``App.register_theme``.

    ``dirs`` overrides the folders searched (tests). Returns the list of error strings, one per
    theme file that was skipped (empty when all loaded); the names registered are in
    ``app.oitui_themes`` afterwards (a list of str). Never raises.
    """
    themes, errors = load_themes(dirs)
    names: list[str] = []
    for theme in themes:
        try:
            app.register_theme(theme)
            names.append(theme.name)
        except Exception as exc:  # pragma: no cover - register_theme only stores the object
            errors.append(f"theme {theme.name!r}: cannot register: {exc}")
    try:
        app.oitui_themes = names  # type: ignore[attr-defined]
    except Exception:  # pragma: no cover
        pass
    return errors


def registered_theme_names(app: "App") -> list[str]:
    """Names of the themes :func:`register_themes` added to ``app`` (empty before it ran)."""
    return list(getattr(app, "oitui_themes", []))


def _code_pair(theme_name: str, dark: bool | None = None) -> tuple[str, str]:
    if theme_name in _CODE_THEMES:
        return _CODE_THEMES[theme_name]
    if theme_name in _BUILTIN_CODE_THEMES:
        return _BUILTIN_CODE_THEMES[theme_name]
    if dark is None:
        dark = "light" not in theme_name.lower() and "latte" not in theme_name.lower() and "dawn" not in theme_name.lower()
    return _DARK_DEFAULT if dark else _LIGHT_DEFAULT


def code_theme_for(theme_name: str, dark: bool | None = None) -> str:
    """The pygments style name (for Rich ``Syntax``) that suits app theme ``theme_name``.

    Our themes use their file's ``code_theme``; Textual's built-ins have a fixed mapping; any
    other theme gets a dark or light default (``dark`` says which; guessed from the name when
    None). Always returns a valid pygments style name.
    """
    return _code_pair(theme_name, dark)[0]


def text_area_theme_for(theme_name: str, dark: bool | None = None) -> str:
    """The ``TextArea`` theme name (monokai, dracula, vscode_dark, github_light, css) that suits
    app theme ``theme_name``; same rules as :func:`code_theme_for`."""
    return _code_pair(theme_name, dark)[1]
