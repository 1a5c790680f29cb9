"""Plumbing shared by the examples: ``--field=value`` overrides read from a frozen ``Config`` dataclass,
the run folder, and atomic outputs (``config.json``, ``results.json`` written last, optional figures).

An example ends with ``sys.exit(_cli.run(main, Config))``. ``run`` parses ``sys.argv[1:]``: every field
of ``Config`` is an option ``--field=value`` (``--field value`` works too; ``-`` and ``_`` are the same),
made by ``bridges.runs.options.options_of`` (the mechanism that makes the options of ``fv train``): read by the
field's annotation, ``int``, ``float`` (``1/2`` reads too), ``str``, ``bool`` (``true``/``false``/``1``/``0``),
``X | None`` (``none``) and ``tuple[X, ...]`` (comma-separated, e.g. ``--taus=0.1,0.3``). ``--help`` lists
the fields with their defaults. Bad input (an unknown option, a value of the wrong type, a ``ValueError``
from the Config or the example) prints one line and exits with code 2.
"""
from __future__ import annotations

import dataclasses
import inspect
import sys
import time
from pathlib import Path

from bridges.runs.options import config_of, options_of
from bridges.runs.options import usage as options_usage
from bridges.runs.store import check_writable, write_atomic, write_json

RUNS = Path("runs") / "examples"


def default_out(name: str) -> str:
    """``runs/examples/<name>`` (relative to the working directory)."""
    return str(RUNS / name)


# --- parsing ---------------------------------------------------------------------------------------
def usage(config_cls, prog: str) -> str:
    """The ``--help`` of an example: its Config's docstring and every field as an option, with its default."""
    return options_usage(options_of(config_cls), f"python {prog}", inspect.cleandoc(config_cls.__doc__ or ""))


def parse(config_cls, argv: list[str]):
    """A ``config_cls`` instance from ``--field=value`` arguments (raises ``ValueError`` on bad input)."""
    return config_of(config_cls, options_of(config_cls), argv)


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
    from bridges.studies.figures import png_bytes

    return png_bytes(fig)


def train_config(cfg, *, evals: int, eval_batches: int):
    """The ``TrainConfig`` of an example's common fields (steps, batch, lr, seed, threads, out): linear
    warm-up over a tenth of the steps, ``evals`` held-out evaluations, the run under ``<out>/train``."""
    from bridges.runs.config import TrainConfig

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
