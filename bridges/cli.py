"""The ``fv`` command line. Each package contributes its subcommands through a function of ``subparsers`` in its
own ``cli.py`` (:data:`COMMANDS`, entry points ``module:function``); handlers import their heavy dependencies
lazily, so ``fv derive`` never loads numba or torch.

Errors in the user's input (``ValueError``, a missing file, a scheduler that does not answer) print one line and exit with code 2.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from bridges.errors import missing_extra
from fvnum.cli import strict_options
from fvnum.guards.resources import watchdog
from fvsym.guards.limits import time_limit
from fvsym.cli import cli_words, number_arg
from fvsym.errors import InputError

GIVEN = "_given"  # the namespace attribute holding the dests of the options given (``bridges.commands.given``)
# The functions that add subcommands (each takes ``subparsers``), as entry points ``module:function``, in help order.
COMMANDS = ("fvsym.cli:add_derive_commands", "fvnum.cli:add_numeric_commands", "bridges.commands:add_run_commands",
            "bridges.study_commands:add_study_commands")
_ADDED: list[str] = []  # entry points added from outside (register_commands), after the built-in ones


def register_commands(entry_point: str) -> None:
    """Add the subcommands that ``entry_point`` adds (``"module:function"``: an importable module and its function
    of ``subparsers``, as each package's own ``cli.py`` has) to ``fv``, after the built-in ones: the extension point
    of a new command."""
    module, _, function = entry_point.partition(":") if isinstance(entry_point, str) else ("", "", "")
    if not (all(part.isidentifier() for part in module.split(".")) and function.isidentifier()):
        raise InputError(f"a command is 'module:function' (a dotted module name and its function), "
                         f"got {entry_point!r:.60}")
    if entry_point not in COMMANDS and entry_point not in _ADDED:
        _ADDED.append(entry_point)


def unregister_commands(entry_point: str) -> None:
    """Remove an entry point added by :func:`register_commands` (the built-in ones stay)."""
    if entry_point not in _ADDED:
        raise InputError(f"command {entry_point!r:.60} was not added by register_commands")
    _ADDED.remove(entry_point)


WRITES = ("train", "compare", "reproduce", "scaling", "sweep")  # the commands that write files as they go
MAX_ERROR = 400  # characters of an error line's message; a longer one (a value of megabytes) is abridged


def abridged(message: str) -> str:
    """``message`` on one line of at most about :data:`MAX_ERROR` characters: its start and end, and its size."""
    message = " ".join(str(message).split("\n"))
    if len(message) <= MAX_ERROR:
        return message
    return f"{message[:MAX_ERROR - 100]} ... {message[-60:]} ({len(message)} characters)"


class _Parser(argparse.ArgumentParser):
    """Every ``fv`` parser: options by their full names only, each given once (``fvnum.cli.strict_options``),
    errors in one line; an abbreviated option is named with the full names it starts (``--dep``: ``--depth``)."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **{**kw, "allow_abbrev": False})
        strict_options(self)

    def parse_known_args(self, args=None, namespace=None):
        """argparse's; the namespace also says which options were given (``GIVEN``: their dests), since a
        default cannot (``--mlp-width 64`` is the default and still does not apply to Model C)."""
        self._fv_argv = list(sys.argv[1:] if args is None else args)  # for the hints of error()
        parsed, extras = super().parse_known_args(args, namespace)
        dests = {flag: a.dest for a in self._actions for flag in a.option_strings}
        words = (str(w).split("=", 1)[0] for w in self._fv_argv)
        given = {dests[w] for w in words if w in dests}  # a subcommand's, copied up by argparse, and these
        setattr(parsed, GIVEN, frozenset(getattr(parsed, GIVEN, frozenset()) | given))
        return parsed, extras

    def parse_args(self, args=None, namespace=None):
        """argparse's, with unrecognized arguments reported by the subcommand that was parsed."""
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            parser = self
            while parser._subparsers is not None:  # down to the subcommand that was parsed
                sub = next(a for a in parser._subparsers._group_actions if isinstance(a, argparse._SubParsersAction))
                name = getattr(parsed, sub.dest, None) if sub.dest is not argparse.SUPPRESS else None
                if name not in sub.choices:
                    break
                parser = sub.choices[name]
            shown = " ".join(extras)
            parser.error(f"unrecognized arguments: {shown if len(shown) <= 80 else shown[:60] + '...' + shown[-10:]}")
        return parsed

    def error(self, message):  # one line, exit code 2 (argparse's convention)
        self.exit(2, f"{self.prog}: error: {abridged(message)}{self._abbreviations()}\n")

    def _abbreviations(self) -> str:
        """`` (options take their full names; --dep: --depth?)`` for the words of this parser's arguments that
        start some of its options without being one (argparse would have guessed them); else ``""``."""
        flags = [f for a in self._actions for f in a.option_strings if a.help is not argparse.SUPPRESS]
        commands = {name for a in self._actions if isinstance(a, argparse._SubParsersAction) for name in a.choices}
        hints = []
        for word in getattr(self, "_fv_argv", []):
            if word in commands:  # the rest belongs to the subcommand
                break
            word = str(word).split("=", 1)[0]
            full = [f for f in flags if word.startswith("--") and f.startswith(word) and f != word]
            if full and word not in flags and len(hints) < 3:
                hints.append(f"{word}: {' or '.join(full[:5])}?")
        return f" (options take their full names; {'; '.join(hints)})" if hints else ""


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="fv",
        description="Theory engine for adaptive inference and function vectors in deep transformers.",
    )
    parser.add_argument("--max-seconds", type=number_arg("--max-seconds", low=0, open_low=True), default=None,
                        metavar="S", help="time cap of the command: work estimated to take longer is refused before it "
                        "starts, and training that runs past it stops (checkpoint kept) (default: env FV_MAX_SECONDS, "
                        "else 3600; 86400 for the commands that train)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    for entry_point in (*COMMANDS, *_ADDED):
        name, _, function = entry_point.partition(":")
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name and entry_point in COMMANDS:
                continue
            raise
        getattr(module, function)(sub)
    return parser


def main(argv=None, *, watch=None) -> int:
    """Run ``fv`` on ``argv`` (default: the command line). ``watch``: end the command in one line if it runs
    past its cap (``fvnum.guards.resources.watchdog``, an ``os._exit``); default on for the process's own command
    line (``argv`` None), off for calls from Python (a test calling ``main([...])`` must not end its process)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse's errors (one line, code 2) and --help (code 0): returned, not raised
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    try:
        with time_limit(args.max_seconds, default=getattr(args, "default_max_seconds", None)), \
                watchdog(f"fv {args.command}", active=argv is None if watch is None else watch,
                         writes=args.command in WRITES):
            return int(args.func(args) or 0)
    except BrokenPipeError:  # the reader went away (``fv ... | head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except ImportError as exc:  # an optional dependency (torch, Dask) is not installed: which extra installs it
        words = missing_extra(exc)
        if words is None:
            raise
        print(f"fv {args.command}: error: {words}", file=sys.stderr)
        return 2
    except (ValueError, FileNotFoundError, FileExistsError, PermissionError, NotADirectoryError,
            ConnectionError) as exc:
        print(f"fv {args.command}: error: {abridged(cli_words(exc))}", file=sys.stderr)  # the flags, not the API's words
        return 2
    except OSError as exc:  # e.g. a read-only or full file system: one line naming the file
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"fv {args.command}: error: {abridged(f'{exc.strerror or exc}{where}')}", file=sys.stderr)
        return 2
    except (MemoryError, OverflowError, RecursionError) as exc:  # a guard missed a size: still one line
        what = ("out of memory" if isinstance(exc, MemoryError) else "a number is too large"
                if isinstance(exc, OverflowError) else "too deeply nested")
        print(f"fv {args.command}: error: {what} ({str(exc)[:120] or type(exc).__name__}); try smaller sizes",
              file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"fv {args.command}: interrupted; finished work is kept, run again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
