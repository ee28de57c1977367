"""The ``oitui`` command line: the TUI launcher, headless ``-p`` runs and subcommands.

``oitui --version`` and ``oitui --help`` import nothing heavy (no litellm, textual or jupyter):
every heavy import sits inside the function that needs it.

Exit codes (DESIGN.md): 0 done (also when code was declined or raised); 1 the model or API
failed for good; 2 bad usage or config (unknown flag, bad TOML, unknown session id, no key for a
remote model, a feature not available yet); 3 a limit stopped the turn; 130 interrupted.

``--sandbox auto`` (the default) means "use a sandbox when one is available": none is available
yet, so code runs unsandboxed; asking for one explicitly (``read-only``, ``workspace-write``)
exits 2 with "not available yet", as do ``--safe-mode ask|auto``, ``--harness`` other than
``native``, ``--sandbox-network off``, ``--add-dir`` and ``oitui acp`` until those land.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

EXIT_OK, EXIT_MODEL, EXIT_USAGE, EXIT_LIMIT, EXIT_INTERRUPTED = 0, 1, 2, 3, 130

SUBCOMMANDS = ("sessions", "config", "doctor", "acp")


class _Parser(argparse.ArgumentParser):
    """argparse that exits 2 with a usage message on bad flags (argparse's default, kept explicit)."""

    def error(self, message: str) -> None:  # noqa: D401
        self.print_usage(sys.stderr)
        print(f"oitui: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)


def _add(p: argparse.ArgumentParser, *names: str, **kw: Any) -> None:
    """Add a flag with both dash and underscore spellings of each long name."""
    all_names: list[str] = []
    for n in names:
        all_names.append(n)
        if n.startswith("--") and "-" in n[2:]:
            alias = "--" + n[2:].replace("-", "_")
            if alias not in all_names:
                all_names.append(alias)
    p.add_argument(*all_names, **kw)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser for ``oitui`` (flags listed in DESIGN.md)."""
    from oitui import __version__

    p = _Parser(
        prog="oitui",
        description="Open Interpreter as a full-screen terminal app: a language model writes code, "
        "your machine runs it. Without -p, opens the TUI.",
        epilog="Subcommands: oitui sessions ..., oitui config import FILE, oitui doctor, oitui acp.",
    )
    p.add_argument("--version", action="version", version=f"oitui {__version__}")
    _add(p, "-p", "--print", dest="prompt", metavar="TASK", help="run one task headless (stdin appended when piped)")
    _add(p, "--output-format", choices=("text", "json", "stream-json"), default="text",
         help="headless output: text (default), json or stream-json")
    _add(p, "-m", "--model", help="litellm model name, e.g. gpt-4o, anthropic/claude-..., openai/NAME")
    _add(p, "--api-base", help="OpenAI-compatible endpoint URL")
    _add(p, "--api-key", help="API key for the model's provider")
    _add(p, "-y", "--auto-run", action="store_true", default=None, help="run code without asking")
    _add(p, "--harness", help="prompt/tool harness (only 'native' for now)")
    _add(p, "--max-output", type=int, help="chars of code/shell output sent back (default 2800)")
    _add(p, "--max-tool-output", type=int, help="chars of file/browser/MCP results sent back (default 30000)")
    _add(p, "--max-budget", type=float, help="USD per session")
    _add(p, "--max-turns", type=int, help="model requests per user turn (default 50)")
    _add(p, "--context-window", type=int, help="the model's context window in tokens")
    _add(p, "--max-tokens", type=int, help="max tokens per model reply")
    _add(p, "--temperature", type=float, help="sampling temperature (default 0)")
    _add(p, "--safe-mode", choices=("off", "ask", "auto"), help="semgrep scanning (only 'off' for now)")
    _add(p, "--sandbox", choices=("auto", "off", "read-only", "workspace-write"),
         help="sandbox for code (default auto = none available yet)")
    _add(p, "--sandbox-network", choices=("on", "off"), help="network inside the sandbox")
    _add(p, "--add-dir", action="append", metavar="DIR", help="extra writable folder for the sandbox")
    _add(p, "--offline", action="store_true", default=None, help="contact nothing but the model endpoint")
    _add(p, "--loop", action="store_true", default=None, help="keep going until the model says the task is done")
    _add(p, "--custom-instructions", help="text appended to the system message")
    _add(p, "--system-message", help="replace the system message")
    _add(p, "--profile", help="[profiles.NAME] table of config.toml to apply")
    _add(p, "--local", action="store_true", default=None, help="use the embedded local model")
    _add(p, "--python", metavar="PATH", help="the Python interpreter the kernel runs")
    _add(p, "--resume", metavar="ID", help="resume a session (ID, unique prefix, or 'last')")
    _add(p, "-c", "--continue", dest="continue_", action="store_true", help="resume the last session")
    _add(p, "--verbose", action="store_true", default=None, help="write a debug log (its path is printed)")
    _add(p, "--no-highlight-active-line", dest="highlight_active_line", action="store_false", default=None,
         help="turn active-line tracking off")
    fc = p.add_mutually_exclusive_group()
    fc.add_argument("--llm-supports-functions", "--llm_supports_functions", dest="llm_supports_functions",
                    action="store_true", default=None, help="force tool calls")
    fc.add_argument("--no-llm-supports-functions", "--no_llm_supports_functions", dest="llm_supports_functions",
                    action="store_false", help="force markdown fences")
    return p


_OVERRIDE_KEYS = (
    "model", "api_base", "api_key", "auto_run", "harness", "max_output", "max_tool_output", "max_budget",
    "max_turns", "context_window", "max_tokens", "temperature", "safe_mode", "sandbox", "sandbox_network",
    "add_dir", "offline", "loop", "custom_instructions", "system_message", "local", "python",
    "highlight_active_line", "llm_supports_functions", "verbose",
)


def _overrides(args: argparse.Namespace) -> dict:
    return {k: getattr(args, k) for k in _OVERRIDE_KEYS if getattr(args, k, None) is not None}


def _not_available(settings) -> str | None:
    """The message for a requested feature that has not landed, or None."""
    sandbox = settings.get("sandbox") or "auto"
    if sandbox in ("read-only", "workspace-write"):
        return f"--sandbox {sandbox}: sandboxing is not available yet (code will not run unsandboxed)"
    if (settings.get("sandbox_network") or "on") == "off":
        return "--sandbox-network off: sandboxing is not available yet"
    if settings.get("add_dir"):
        return "--add-dir: sandboxing is not available yet"
    if (settings.get("safe_mode") or "off") != "off":
        return f"--safe-mode {settings.get('safe_mode')}: safe mode is not available yet"
    if (settings.get("harness") or "native") != "native":
        return f"--harness {settings.get('harness')}: harnesses other than native are not available yet"
    return None


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``oitui`` console script. Returns the process exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv == ["--version"]:  # the fast path: nothing but the version string
        from oitui import __version__

        print(f"oitui {__version__}")
        return EXIT_OK
    if argv and argv[0] in SUBCOMMANDS:
        return _subcommand(argv[0], argv[1:])
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help/--version exit 0, bad usage 2
        return int(e.code or 0) if isinstance(e.code, int) else EXIT_USAGE
    if args.continue_ and not args.resume:
        args.resume = "last"
    if args.prompt is not None:
        return _headless(args)
    return _tui(args)


def _subcommand(name: str, rest: list[str]) -> int:
    if name == "doctor":
        from oitui.doctor import main as doctor_main

        return doctor_main(rest)
    if name in ("sessions", "config"):
        try:
            from oitui.cli_sessions import main as sessions_main
        except ImportError:
            print(f"oitui {name}: not available yet", file=sys.stderr)
            return EXIT_USAGE
        return int(sessions_main([name, *rest]) or 0)
    if name == "acp":
        try:
            from oitui.acp import main as acp_main  # type: ignore[attr-defined]
        except ImportError:
            print("oitui acp: not available yet", file=sys.stderr)
            return EXIT_USAGE
        return int(acp_main(rest) or 0)
    return EXIT_USAGE  # pragma: no cover


def _setup_log(verbose: bool) -> str | None:
    """Log to a new file under the logs folder (DEBUG when verbose, else WARNING); return its
    path (None when the folder cannot be written)."""
    import logging
    import time

    try:
        from oitui.core.settings import paths

        logs = paths().logs_dir
        logs.mkdir(parents=True, exist_ok=True)
        path = logs / f"oitui-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    except Exception:
        return None
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.WARNING)
    if verbose:
        for name in ("httpcore", "openai"):
            logging.getLogger(name).setLevel(logging.INFO)
    from oitui.core.llm import configure_litellm_logging  # cheap: litellm itself loads later

    configure_litellm_logging(verbose)
    return str(path)


def _tui(args: argparse.Namespace) -> int:
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        # The TUI reads keys from stdin and draws on stdout; with either redirected it could
        # neither be driven nor quit. Piped text belongs to a headless run.
        print(
            "oitui: the app needs a terminal on stdin and stdout; for piped input or output use "
            '`oitui -p "TASK"` (piped stdin is appended to the task).',
            file=sys.stderr,
        )
        return EXIT_USAGE
    from oitui.core.settings import load_settings_or_defaults

    settings, _error = load_settings_or_defaults(profile=args.profile, overrides=_overrides(args))
    msg = _not_available(settings)
    if msg:
        print(f"oitui: {msg}", file=sys.stderr)
        return EXIT_USAGE
    if args.verbose or settings.get("verbose"):
        path = _setup_log(True)
        if path:
            print(f"log: {path}", file=sys.stderr)
    try:
        try:
            from oitui.tui.app import run_app
        except ImportError:
            from oitui.tui import run_app  # type: ignore[no-redef]
    except ImportError as e:
        print(f"oitui: the TUI could not be loaded ({e}); use `oitui -p TASK` for headless runs.", file=sys.stderr)
        return EXIT_MODEL
    return int(run_app(settings=settings, resume=args.resume) or 0)


# -- headless ------------------------------------------------------------------------------------


class _Out:
    """Writes chunks in one of the three output formats."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.console: list[str] = []
        self.in_console = False
        self.at_line_start = True
        self.errors_shown: set[str] = set()  # error chunks already printed (text format)

    def line(self, obj: dict) -> None:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False, default=str) + "\n")
        sys.stdout.flush()

    def _w(self, text: str) -> None:
        if not text:
            return
        sys.stdout.write(text)
        sys.stdout.flush()
        self.at_line_start = text.endswith("\n")

    def _nl(self) -> None:
        if not self.at_line_start:
            self._w("\n")

    def chunk(self, c: dict) -> None:
        if self.fmt == "stream-json":
            self.line(c)
            return
        if self.fmt != "text":
            return
        role, typ, fmt = c.get("role"), c.get("type"), c.get("format")
        if typ == "error":
            print(f"oitui: {c.get('content')}", file=sys.stderr)
            self.errors_shown.add(str(c.get("content")))
            return
        if typ == "message" and role == "assistant":
            if c.get("start"):
                self._nl()
            self._w(c.get("content") or "")
            if c.get("end"):
                self._nl()
        elif typ == "code":
            if c.get("start"):
                self._nl()
                self._w(f"```{fmt or ''}\n")
            elif c.get("end"):
                self._nl()
                self._w("```\n")
            else:
                self._w(c.get("content") or "")
        elif typ == "console":
            if c.get("start"):
                self.console = []
            elif c.get("end"):
                from oitui.computer.output import terminal_text

                text = terminal_text("".join(self.console))
                if text:
                    self._nl()
                    self._w(text)
                    self._nl()
                self.console = []
            elif fmt == "output":
                self.console.append(str(c.get("content") or ""))


def _headless(args: argparse.Namespace) -> int:
    task = args.prompt
    if not sys.stdin.isatty():
        try:
            piped = sys.stdin.read()
        except (OSError, ValueError):
            piped = ""
        if piped.strip():
            task = f"{task}\n\n{piped}" if task else piped
    if not (task or "").strip():
        print("oitui: -p needs a task (as its value or on stdin)", file=sys.stderr)
        return EXIT_USAGE

    from oitui.core.errors import ConfigError, LimitReached, ModelError, NotAvailableYet, OituiError
    from oitui.core.settings import load_settings

    try:
        settings = load_settings(profile=args.profile, overrides=_overrides(args))
    except ConfigError as e:
        print(f"oitui: {e}", file=sys.stderr)
        return EXIT_USAGE
    msg = _not_available(settings)
    if msg:
        print(f"oitui: {msg}", file=sys.stderr)
        return EXIT_USAGE
    if args.verbose or settings.get("verbose"):
        log_path = _setup_log(True)
        if log_path:
            print(f"log: {log_path}", file=sys.stderr)

    from oitui.core.interpreter import OpenInterpreter
    from oitui.core.model_choice import choose_model

    interp = OpenInterpreter()
    settings.apply(interp)
    model, reason = choose_model(settings, os.environ)
    interp.llm.model = model
    print(f"model: {model} ({reason})", file=sys.stderr)
    missing = interp.llm._missing_key_error()
    if missing is not None:
        print(f"oitui: {missing}", file=sys.stderr)
        return EXIT_USAGE

    # the session
    session = None
    try:
        from oitui.core.sessions import SessionStore
        from oitui.core.settings import paths

        store = SessionStore(paths().sessions_dir, outputs_dir=paths().outputs_dir)
        if args.resume:
            session = store.open(args.resume)
            interp.messages = list(session.messages)
            _restore_metrics(interp, getattr(session, "meta", None) or {})
        else:
            session = store.create(model=model, harness=interp.harness, cwd=os.getcwd())
    except ImportError:
        if args.resume:
            print("oitui: --resume is not available yet", file=sys.stderr)
            return EXIT_USAGE
    except OituiError as e:
        print(f"oitui: {e}", file=sys.stderr)
        return EXIT_USAGE
    interp.session = session
    session_id = getattr(session, "id", None)

    out = _Out(args.output_format)
    if args.output_format == "stream-json":
        out.line({"type": "session", "session_id": session_id, "model": model, "harness": interp.harness})
    elif session_id:
        print(f"session: {session_id}", file=sys.stderr)

    if interp.auto_run:
        interp.warm_up("python")  # the kernel starts while the model answers
    start = len(interp.messages)
    before = dict(interp.metrics)
    code = EXIT_OK
    try:
        for chunk in interp.chat(task, stream=True, display=False):
            out.chunk(chunk)
    except NotAvailableYet as e:
        code = EXIT_USAGE
        print(f"oitui: {e}", file=sys.stderr)
    except ModelError as e:
        code = EXIT_MODEL
        if args.output_format != "stream-json" and str(e) not in out.errors_shown:
            print(f"oitui: {e}", file=sys.stderr)
    except LimitReached as e:
        code = EXIT_LIMIT
        if args.output_format != "stream-json" and str(e) not in out.errors_shown:
            print(f"oitui: {e}", file=sys.stderr)
    except KeyboardInterrupt:
        interp.stop()
        code = EXIT_INTERRUPTED
        if args.output_format == "stream-json":
            out.line({"role": "computer", "type": "error", "content": "Interrupted.", "kind": "interrupted"})
    finally:
        try:
            interp.terminate()
        except Exception:
            pass
    # usage and cost of this run (a resumed session's earlier spend counts for --max-budget only)
    usage = {k: int(interp.metrics.get(k) or 0) - int(before.get(k) or 0) for k in ("prompt_tokens", "completion_tokens")}
    cost = interp.metrics.get("cost")
    if cost is not None:
        cost = cost - (before.get("cost") or 0.0)
    if args.output_format == "stream-json":
        out.line({"type": "result", "exit": code, "usage": usage, "cost": cost})
    elif args.output_format == "json":
        out.line({"session_id": session_id, "messages": interp.messages[start:], "usage": usage,
                  "cost": cost, "exit": code})
    return code


def _restore_metrics(interp, meta: dict) -> None:
    """Carry a resumed session's totals (tokens, spend) into ``interp.metrics``, so that
    ``--max-budget`` (USD per session) counts what the session already spent."""
    try:
        interp.metrics["prompt_tokens"] = int(meta.get("prompt_tokens") or 0)
        interp.metrics["completion_tokens"] = int(meta.get("completion_tokens") or 0)
        cost = meta.get("cost")
        interp.metrics["cost"] = float(cost) if isinstance(cost, (int, float)) and cost > 0 else None
    except (TypeError, ValueError):  # a damaged header: start counting afresh
        pass


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
