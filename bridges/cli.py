"""The ``fv`` command line. Each package contributes its subcommands through ``register(subparsers)``
in its own ``cli.py``; handlers import their heavy dependencies lazily, so ``fv derive`` never loads
numba or torch.

Errors in the user's input (``ValueError``, a missing file, a scheduler that does not answer) print one line and exit with code 2.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys

from fvnum.resources import time_limit, watchdog
from fvsym.cli import number_arg

# Modules that contribute subcommands, in help order. Each has ``register(subparsers)``.
COMMAND_MODULES = ("fvsym.cli", "fvnum.cli", "bridges.commands")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit code 2 (argparse's convention)
        self.exit(2, f"{self.prog}: error: {message}\n")


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
    for name in COMMAND_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(sub)
    return parser


def main(argv=None, *, watch=None) -> int:
    """Run ``fv`` on ``argv`` (default: the command line). ``watch``: end the command in one line if it runs
    past its cap (``fvnum.resources.watchdog``, an ``os._exit``); default on for the process's own command
    line (``argv`` None), off for calls from Python (a test calling ``main([...])`` must not end its process)."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse's errors (one line, code 2) and --help (code 0): returned, not raised
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
    try:
        with time_limit(args.max_seconds, default=getattr(args, "default_max_seconds", None)), \
                watchdog(f"fv {args.command}", active=argv is None if watch is None else watch):
            return int(args.func(args) or 0)
    except BrokenPipeError:  # the reader went away (``fv ... | head``): stop quietly
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except (ValueError, FileNotFoundError, FileExistsError, PermissionError, NotADirectoryError,
            ConnectionError) as exc:
        print(f"fv {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:  # e.g. a read-only or full file system: one line naming the file
        where = f" ({exc.filename})" if exc.filename else ""
        print(f"fv {args.command}: error: {exc.strerror or exc}{where}", file=sys.stderr)
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
