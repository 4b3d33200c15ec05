"""The ``tracepack`` command line.

Every subcommand has ``--help``. Errors are one line on stderr, never a
traceback; exit codes: 0 success, 1 internal error, 2 bad input (a file that
is not what it should be, a bad option), 130 interrupted.

Each command group is a module of this package with a ``register(sub)`` function
that adds its subcommands; :data:`COMMAND_MODULES` lists them in ``--help`` order.
A command is a thin call into the library: no format logic lives here.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import re
import sys
from collections.abc import Sequence
from typing import Any

from tracepack.cli._common import EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, add_limit, limit_settings, load_any
from tracepack.errors import TracepackError, UsageError, did_you_mean

__all__ = ["COMMAND_MODULES", "build_parser", "load_any", "main"]

#: The command groups, in the order ``tracepack --help`` lists them.
COMMAND_MODULES: tuple[str, ...] = (
    "tracepack.cli.core",
    "tracepack.cli.query",
    "tracepack.cli.torch",
    "tracepack.cli.schema",
    "tracepack.cli.runtime",
)

#: The module that registers each command, so that a command line imports only its own module (and
#: what that module needs); --help, a mistyped command or none at all load every module.
#: tests/ux/test_cli.py checks it against what the modules register.
COMMAND_OWNERS: dict[str, str] = {
    **dict.fromkeys(("convert", "inspect", "trace", "expand", "demo"), "tracepack.cli.core"),
    **dict.fromkeys(("nodes", "diff", "cat", "export"), "tracepack.cli.query"),
    **dict.fromkeys(("pack", "unpack", "upgrade"), "tracepack.cli.torch"),
    "schema": "tracepack.cli.schema",
    **dict.fromkeys(("symbolicate", "annotate"), "tracepack.cli.runtime"),
}


class _Parser(argparse.ArgumentParser):
    """argparse, but usage errors are one line and exit 2 through our own handler."""

    def error(self, message: str) -> Any:
        # The usage first (argparse's habit, and what a mistyped command needs), then the one-line error.
        self.print_usage(sys.stderr)
        sub = self.prog.removeprefix("tracepack").strip()
        m = re.match(r"(argument [^:]+): invalid choice: '([^']*)' \(choose from (.*)\)$", message)
        if m:  # a mistyped command or choice: name the close ones
            arg, given, choices = m.group(1), m.group(2), re.findall(r"'?([^,' ]+)'?", m.group(3))
            hint = did_you_mean(given, choices)
            message = f"{arg}: invalid choice {given!r}{hint}; expected one of {', '.join(choices)}"
        raise UsageError(message, where=sub or None)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser of every command, or of ``command`` alone when a module registers it."""
    from tracepack import __version__
    from tracepack.codecs import forms_loops

    p = _Parser(prog="tracepack", description="Exported ML graphs and their debug info, typed and interned.")
    version = f"tracepack {__version__} (columnar forms loops in {forms_loops()})"
    p.add_argument("--version", action="version", version=version)
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    owner = COMMAND_OWNERS.get(command or "")
    for name in COMMAND_MODULES if owner is None else (owner,):
        importlib.import_module(name).register(sub)
    for command_parser in sub.choices.values():
        add_limit(command_parser)
    return p


def _report(exc: BaseException, args: argparse.Namespace | None, text: str) -> None:
    """The one line on standard error: ``tracepack: TEXT``, or with ``--error-format json`` (``cat`` and
    ``trace``, the conformance protocol of spec §12.2) one JSON object naming the error class and place."""
    if getattr(args, "error_format", "text") == "json":
        where = exc.where if isinstance(exc, TracepackError) else None
        name = type(exc).__name__ if isinstance(exc, TracepackError) else "InternalError"
        print(json.dumps({"error": name, "place": where, "message": text}), file=sys.stderr)
    else:
        print(f"tracepack: {text}", file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``tracepack`` command; returns the exit code."""
    args: argparse.Namespace | None = None
    try:
        words = list(sys.argv[1:] if argv is None else argv)
        args, rest = build_parser(words[0] if words else None).parse_known_args(words)
        if rest and args.command != "schema":
            raise UsageError(f"unrecognized arguments: {' '.join(rest)}")
        args.rest = rest
        from tracepack.io import limits

        # --limit NAME=VALUE raises a budget for this command; one max_rendered total for all it renders
        with limits.raised(**limit_settings(args)), limits.rendering():
            return int(args.func(args))
    except TracepackError as exc:
        _report(exc, args, str(exc))
        return exc.exit_code
    except KeyboardInterrupt:
        print("tracepack: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # Output piped into `head` and friends: not an error worth a message.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_OK
    except MemoryError:
        print("tracepack: out of memory", file=sys.stderr)
        return EXIT_INTERNAL
    except Exception as exc:  # the CLI's promise: one line, never a traceback
        text = f"{type(exc).__name__}: {exc}".replace("\n", " ")
        _report(exc, args, f"internal error: {text} (please report this)")
        return EXIT_INTERNAL
