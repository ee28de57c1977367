"""``oitui sessions ...`` and ``oitui config import``: the session store and config from a shell.

``main(argv)`` takes the arguments after ``oitui`` (e.g. ``["sessions", "list", "--json"]``) and
returns the exit code: 0 done, 2 bad usage, unknown or ambiguous id, unreadable file or config.

- ``sessions list [--json]``: one tab-separated line per session, newest first:
  ``ID  UPDATED  TURNS  MODEL  TITLE`` (UPDATED is ``YYYY-MM-DD HH:MM`` local time); no header.
  ``--json``: a list of ``{id, updated, turns, model, harness, cwd, title}`` (ISO 8601 times).
- ``sessions search QUERY [--json]``: the same lines for matching sessions, each followed by a
  line starting with two spaces showing the snippet (``--json``: the objects plus ``snippet``
  and ``message_index``).
- ``sessions show ID|last``: the conversation as plain text.
- ``sessions export ID|last --format md|ipynb|json|oi [-o PATH]``.
- ``sessions import FILE``: prints the new session's id.
- ``sessions delete ID``.
- ``config import FILE [--profile NAME]``: an Open Interpreter YAML profile into config.toml.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

EXIT_OK = 0
EXIT_USAGE = 2


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser that raises instead of exiting, so ``main`` returns 2."""

    def error(self, message: str):  # noqa: D401 - argparse API
        raise _UsageError(f"{self.prog}: {message}")

    def exit(self, status: int = 0, message: str | None = None):
        if message:
            (sys.stderr if status else sys.stdout).write(message)
        raise SystemExit(status)


def _build_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="oitui", add_help=True)
    sub = p.add_subparsers(dest="group", required=True, parser_class=_Parser)

    ps = sub.add_parser("sessions", help="list, search, show, export, import and delete saved sessions")
    ss = ps.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    x = ss.add_parser("list", help="saved sessions, newest first")
    x.add_argument("--json", action="store_true", help="print a JSON list")
    x = ss.add_parser("search", help="full-text search over messages, code and outputs")
    x.add_argument("query", nargs="+", help="words to find")
    x.add_argument("--json", action="store_true", help="print a JSON list")
    x.add_argument("--limit", type=int, default=50, help="most sessions to show (default 50)")
    x = ss.add_parser("show", help="print a conversation")
    x.add_argument("id", help="session id, unique prefix, or 'last'")
    x = ss.add_parser("export", help="export a session")
    x.add_argument("id", help="session id, unique prefix, or 'last'")
    x.add_argument("--format", "-f", required=True, choices=["md", "ipynb", "json", "oi"])
    x.add_argument("-o", "--output", help="write to this file instead of stdout")
    x = ss.add_parser("import", help="import Open Interpreter's JSON or ours as a new session")
    x.add_argument("file")
    x = ss.add_parser("delete", help="delete a session")
    x.add_argument("id", help="session id or unique prefix")

    pc = sub.add_parser("config", help="configuration")
    cs = pc.add_subparsers(dest="cmd", required=True, parser_class=_Parser)
    x = cs.add_parser("import", help="import an Open Interpreter YAML profile into config.toml")
    x.add_argument("file")
    x.add_argument("--profile", help="store it as [profiles.NAME] instead of the top level")
    return p


def _store():
    from oitui.core.sessions import SessionStore
    from oitui.core.settings import paths

    p = paths()
    return SessionStore(p.sessions_dir, outputs_dir=p.outputs_dir)


def _clean_field(value) -> str:
    return " ".join(str(value).split()) if value not in (None, "") else "-"


def _line(info) -> str:
    updated = info.updated.astimezone().strftime("%Y-%m-%d %H:%M")
    title = info.title or ("(damaged: " + info.error + ")" if info.error else "(untitled)")
    return "\t".join([info.id, updated, str(info.turns), _clean_field(info.model), _clean_field(title)])


def _info_json(info) -> dict:
    return {"id": info.id, "updated": info.updated.isoformat(), "turns": info.turns, "model": info.model,
            "harness": info.harness, "cwd": info.cwd, "title": info.title}


def _write_out(text: str, output: str | None) -> None:
    if output:
        path = Path(output)
        tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def _sessions(args) -> int:
    store = _store()
    if args.cmd == "list":
        infos = store.list()
        if args.json:
            print(json.dumps([_info_json(i) for i in infos], ensure_ascii=False, indent=2))
        else:
            for i in infos:
                print(_line(i))
        return EXIT_OK
    if args.cmd == "search":
        hits = store.search(" ".join(args.query), limit=max(1, args.limit))
        if args.json:
            print(json.dumps([{**_info_json(h.info), "snippet": h.snippet, "message_index": h.message_index}
                              for h in hits], ensure_ascii=False, indent=2))
        else:
            for h in hits:
                print(_line(h.info))
                print("  " + h.snippet)
        return EXIT_OK
    if args.cmd == "show":
        from oitui.core.sessions import render_text

        s = store.open(args.id)
        for w in s.warnings:
            print(f"oitui: warning: {w}", file=sys.stderr)
        sys.stdout.write(render_text(s.messages))
        return EXIT_OK
    if args.cmd == "export":
        text = store.export(args.id, args.format)
        _write_out(text, args.output)
        return EXIT_OK
    if args.cmd == "import":
        s = store.import_file(args.file)
        for w in s.warnings:
            print(f"oitui: warning: {w}", file=sys.stderr)
        print(s.id)
        return EXIT_OK
    if args.cmd == "delete":
        sid = store.delete(args.id)
        print(f"deleted {sid}", file=sys.stderr)
        return EXIT_OK
    raise _UsageError(f"unknown sessions command {args.cmd!r}")


def _config(args) -> int:
    from oitui.core.settings import import_oi_profile, paths

    skipped: list[str] = []
    mapped = import_oi_profile(args.file, profile=args.profile, skipped=skipped)
    where = f"[profiles.{args.profile}]" if args.profile else "the top level"
    keys = ", ".join(sorted(mapped)) or "nothing"
    print(f"imported {keys} into {where} of {paths().config_file}")
    if skipped:
        print(f"oitui: skipped (no equivalent): {', '.join(skipped)}", file=sys.stderr)
    return EXIT_OK


def main(argv: list[str]) -> int:
    """Run ``oitui sessions ...`` or ``oitui config import ...``; return the exit code.

    ``argv`` excludes the program name. Errors (unknown or ambiguous id, unreadable file, bad
    config, bad usage) print one line on stderr and return 2.
    """
    from oitui.core.errors import OituiError

    try:
        args = _build_parser().parse_args(list(argv))
    except _UsageError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    except SystemExit as e:  # --help
        return int(e.code or 0) if isinstance(e.code, int) else EXIT_USAGE
    try:
        if args.group == "sessions":
            return _sessions(args)
        return _config(args)
    except _UsageError as e:
        print(str(e), file=sys.stderr)
        return EXIT_USAGE
    except OituiError as e:
        print(f"oitui: {e}", file=sys.stderr)
        return EXIT_USAGE
    except ValueError as e:
        print(f"oitui: {e}", file=sys.stderr)
        return EXIT_USAGE
    except BrokenPipeError:  # pragma: no cover - `oitui sessions list | head`
        return EXIT_OK
    except OSError as e:
        name = f" {e.filename}" if getattr(e, "filename", None) else ""
        print(f"oitui: cannot access{name}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main(sys.argv[1:]))
