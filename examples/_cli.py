"""Plumbing shared by the examples: ``--key=value`` overrides read from a frozen ``Config`` dataclass,
the run folder, and atomic outputs (``config.json``, ``results.json`` written last, optional figures).

An example ends with ``sys.exit(_cli.run(main, Config))``. ``run`` parses ``sys.argv[1:]``: every field
of ``Config`` is an option ``--field=value`` (``--field value`` works too; ``-`` and ``_`` are the same),
converted by the field's annotation: ``int``, ``float``, ``str``, ``bool`` (``true``/``false``/``1``/``0``),
``X | None`` (``none``) and ``tuple[X, ...]`` (comma-separated, e.g. ``--taus=0.1,0.3``). ``--help`` lists
the fields with their defaults. Bad input (an unknown option, a value of the wrong type, a ``ValueError``
from the Config or the example) prints one line and exits with code 2.
"""
from __future__ import annotations

import dataclasses
import sys
import time
import types
import typing
from pathlib import Path

from bridges.store import check_writable, write_atomic, write_json

RUNS = Path("runs") / "examples"
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def default_out(name: str) -> str:
    """``runs/examples/<name>`` (relative to the working directory)."""
    return str(RUNS / name)


# --- parsing ---------------------------------------------------------------------------------------
def _convert(text: str, kind, name: str):
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        if text.strip().lower() == "none" and type(None) in args:
            return None
        (inner,) = [a for a in args if a is not type(None)]
        return _convert(text, inner, name)
    if origin is tuple:
        inner = args[0]
        return tuple(_convert(part.strip(), inner, name) for part in text.split(",") if part.strip())
    if kind is bool:
        low = text.strip().lower()
        if low not in _TRUE + _FALSE:
            raise ValueError(f"--{name} takes true or false, got {text!r}")
        return low in _TRUE
    if kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            raise ValueError(f"--{name} takes {'an integer' if kind is int else 'a number'}, got {text!r}") from None
    if kind is str:
        return text
    raise TypeError(f"Config field {name} has an annotation the parser does not know: {kind!r}")  # a bug in the example


def _type_name(kind) -> str:
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(_type_name(a) for a in args)
    if origin is tuple:
        return f"{_type_name(args[0])},..."
    return "none" if kind is type(None) else kind.__name__


def usage(config_cls, prog: str) -> str:
    hints = typing.get_type_hints(config_cls)
    lines = [f"usage: python {prog} [--field=value ...]", "", (config_cls.__doc__ or "").strip(), "", "fields:"]
    for f in dataclasses.fields(config_cls):
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if isinstance(default, tuple):
            default = ",".join(map(str, default))
        lines.append(f"  --{f.name}=<{_type_name(hints[f.name])}>  (default {default})")
    return "\n".join(lines)


def parse(config_cls, argv: list[str]):
    """A ``config_cls`` instance from ``--field=value`` arguments (raises ``ValueError`` on bad input)."""
    hints = typing.get_type_hints(config_cls)
    names = [f.name for f in dataclasses.fields(config_cls)]
    values, args = {}, list(argv)
    while args:
        arg = args.pop(0)
        if not arg.startswith("--") or arg == "--":
            raise ValueError(f"unexpected argument {arg!r}; options look like --field=value")
        key, sep, text = arg[2:].partition("=")
        key = key.replace("-", "_")
        if key not in names:
            raise ValueError(f"unknown option --{key}; the options are {', '.join('--' + n for n in names)}")
        if not sep:
            if not args:
                raise ValueError(f"option --{key} needs a value (--{key}=value)")
            text = args.pop(0)
        values[key] = _convert(text, hints[key], key)
    return config_cls(**values)


def run(main, config_cls, argv: list[str] | None = None, *, ok=None) -> int:
    """Parse the command line, call ``main(cfg)``; the exit code is 0, or 1 when ``ok(results)`` is
    false, or 2 for bad input (one line on stderr)."""
    argv = sys.argv[1:] if argv is None else argv
    prog = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "example.py"
    if any(a in ("-h", "--help") for a in argv):
        print(usage(config_cls, prog))
        return 0
    try:
        cfg = parse(config_cls, argv)
        results = main(cfg)
    except (ValueError, PermissionError, NotADirectoryError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0 if ok is None or ok(results) else 1


# --- outputs ---------------------------------------------------------------------------------------
def png(fig) -> bytes:
    """A matplotlib figure as PNG bytes (the figure is closed)."""
    from bridges.figures import png_bytes

    return png_bytes(fig)


def train_config(cfg, *, evals: int, eval_batches: int):
    """The ``TrainConfig`` of an example's common fields (steps, batch, lr, seed, threads, out): linear
    warm-up over a tenth of the steps, ``evals`` held-out evaluations, the run under ``<out>/train``."""
    from bridges.config import TrainConfig

    return TrainConfig(steps=cfg.steps, batch=cfg.batch, lr=cfg.lr, warmup=max(1, cfg.steps // 10),
                       eval_every=max(1, cfg.steps // evals), eval_batches=eval_batches, seed=cfg.seed,
                       threads=cfg.threads, out=str(Path(cfg.out) / "train"), checkpoint_every=cfg.steps)


def prepare(cfg) -> Path:
    """Check (early) that ``cfg.out`` is a writable folder and remove a stale ``results.json`` there, so a
    run folder holds a ``results.json`` only once its run has finished. Returns the folder."""
    folder = check_writable(cfg.out)
    (folder / "results.json").unlink(missing_ok=True)
    return folder


def save(cfg, results: dict, files: dict | None = None) -> Path:
    """Write ``files`` ({name: bytes or text}), ``config.json`` and last ``results.json`` (its presence
    marks a finished run) into ``cfg.out``, each atomically. Returns the folder."""
    folder = check_writable(cfg.out)
    for name, data in (files or {}).items():
        write_atomic(folder / name, data)
    write_json(folder / "config.json", dataclasses.asdict(cfg))
    write_json(folder / "results.json", results)
    return folder


class Clock:
    """Seconds since construction: ``clock()``."""

    def __init__(self):
        self.start = time.perf_counter()

    def __call__(self) -> float:
        return round(time.perf_counter() - self.start, 3)
