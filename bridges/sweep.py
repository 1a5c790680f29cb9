"""``fv sweep``: a grid of ``fv train``, ``fv compare`` or ``fv mc`` runs on a ``dask.distributed`` cluster.

A spec is TOML (or the same dict in Python)::

    command = "train"        # train | compare | mc
    [base]                   # options of that command, by their long names (dashes or underscores)
    model = "A"
    depth = 4
    steps = 300
    [grid]                   # every combination of these is one cell
    budget = [2, 3]
    seed = [0, 1, 2]

Every cell is parsed by the command's own ``argparse`` parser (so a new or renamed option of ``fv train``
works here unchanged), checked, and keyed by a hash of its full configuration (defaults included) before
any work starts. ``run(spec, out=DIR)`` computes the missing cells and writes ``DIR/results.csv`` and
``DIR/results.json`` (one row per cell: the grid values, ``loss`` (train, compare) or ``value`` (mc),
``stderr``, ``n`` and the cell ``key``). Finished cells are kept in ``DIR/cells/`` (the run store of
``bridges.store``), so a re-run computes only what is missing. Training checkpoints go to ``DIR/train``.

The cells run on the engine of ``bridges.engine`` (``Cell``, ``run_cells``, ``cluster``; re-exported here):
a local Dask cluster of ``--workers`` processes, the running cluster at ``--scheduler``, or this process
(``synchronous``).
"""
from __future__ import annotations

import contextlib
import csv
import io
import itertools
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from fvsym._emit import add_format_argument, emit
from fvsym._validate import plain_error
from fvnum.resources import DEFAULT_LONG_SECONDS
from fvsym.cli import int_arg

from .engine import CONNECT_TIMEOUT, SYNCHRONOUS, Cell, cluster, run_cells, scheduler_address
from .store import RunStore, with_checksum, write_atomic, write_json

MAX_THREADS = max(8, 4 * (os.cpu_count() or 1))

__all__ = [
    "COMMANDS", "CONNECT_TIMEOUT", "SYNCHRONOUS", "Cell", "Spec", "SweepResult", "cluster", "load_spec", "plan", "run",
    "run_cells", "run_command",
]

KIND = "sweep"
RESULTS_FORMAT = "fv-sweep-1"


# --- the commands a sweep runs ----------------------------------------------------------------------
@dataclass(frozen=True)
class _Command:
    """How ``fv sweep`` runs one ``fv`` command: options it sets itself, what keys a cell, what it reports."""

    name: str
    reserved: tuple  # options the sweep sets or that make no sense in a cell
    execution: tuple  # options that change how a cell runs, not its numbers (left out of the key)
    column: str  # "loss" or "value"

    def config(self, args) -> dict:
        """The cell's full configuration (what its key hashes); raises ValueError on values the command rejects."""
        if self.name == "mc":
            _check_mc(args)
            return {"options": {k: v for k, v in sorted(vars(args).items())
                                if k not in ("func", "command", *self.reserved, *self.execution)}}
        from .commands import config_from_args

        run = config_from_args(args)  # validates every field of the run
        config = {"run": run.key_dict()}
        if run.train.device != "cpu":  # numbers from another device are other numbers (CPU keys as before)
            config["device"] = run.train.device
        if self.name == "compare":
            config["samples"] = args.samples
        return config


COMMANDS = {
    "train": _Command("train", ("out", "quiet", "no_resume"), ("device", "threads", "checkpoint_every"), "loss"),
    "compare": _Command("compare", ("out", "quiet", "grid", "jobs", "workers", "scheduler"),
                        ("device", "threads", "checkpoint_every"), "loss"),
    "mc": _Command("mc", ("format", "progress"), ("threads",), "value"),
}


def _check_mc(args) -> None:
    """The checks of ``fv mc`` that are cheap enough to run on every cell before any work starts (the
    command checks the rest when the cell runs)."""
    from fractions import Fraction

    if (args.tau is None) == (args.tokens is None):
        raise ValueError("give exactly one of tau (gaussian channel) or tokens (tokens channel)")
    if args.tau is not None:
        try:
            tau = Fraction(args.tau)
        except (ValueError, ZeroDivisionError):
            raise ValueError(f"tau must be a number such as 0.3 or 3/10, got {args.tau!r}") from None
        if tau < 0:
            raise ValueError(f"tau must be >= 0, got {args.tau}")
    if args.strategy == "fixed" and args.design is None:
        raise ValueError("strategy fixed needs design = \"n1,n2,...\"")
    if args.design is not None and args.strategy != "fixed":
        raise ValueError(f"design applies to strategy fixed only, got strategy {args.strategy}")
    for name, low in (("samples", 2), ("seed", 0), ("budget", 1)):
        if getattr(args, name) < low:
            raise ValueError(f"{name} must be >= {low}, got {getattr(args, name)}")
    try:
        from fvnum.cli import _prior
    except ImportError:  # pragma: no cover  (fvnum reorganised: the command checks the prior itself)
        return
    _prior(args)  # depth, alpha


def _subparser(command: str):
    """The ``fv <command>`` parser itself (built by ``bridges.cli``), raising ValueError instead of exiting."""
    import argparse

    from .cli import build_parser

    parser = build_parser()
    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    p = sub.choices[command]

    def error(message):
        raise ValueError(message)

    p.error = error
    return p


def run_command(command: str, argv: list[str]) -> dict:
    """One cell of a sweep: ``fv <command> <argv>`` run in this process; its result as a dict with
    ``loss`` (train, compare) or ``value`` (mc), ``stderr`` and ``n``."""
    args = _subparser(command).parse_args(list(argv))
    if command == "mc":
        args.format, args.progress = "json", False
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            args.func(args)
        return json.loads(out.getvalue())
    from .commands import config_from_args
    from .train import train

    result = train(config_from_args(args), progress=False)
    summary = {"loss": result.loss, "stderr": result.stderr, "n": result.n_eval, "metric": result.metric,
               "steps": result.steps, "run_key": result.config.key(), "run_dir": result.run_dir}
    if command == "compare":
        from .compare import compare

        summary["table"] = compare(result, samples=args.samples, seed=args.seed)
    return summary


# --- specs ---------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Spec:
    """A sweep: ``command`` with the ``base`` options, over every combination of the ``grid`` values."""

    command: str
    base: dict
    grid: dict

    def to_dict(self) -> dict:
        return {"command": self.command, "base": dict(self.base), "grid": {k: list(v) for k, v in self.grid.items()}}

    def points(self) -> list[dict]:
        """The grid values of every cell, in order (the last grid key varies fastest)."""
        names = list(self.grid)
        return [dict(zip(names, values)) for values in itertools.product(*self.grid.values())]


def _option_name(key) -> str:
    return str(key).replace("-", "_")


def load_spec(spec) -> Spec:
    """A ``Spec`` from a TOML file path, a dict of the same shape, or a ``Spec``; one-line ValueError on a
    malformed one (unknown top-level keys, an empty grid, a key in both tables, non-scalar values)."""
    if isinstance(spec, Spec):
        return spec
    where = "spec"
    if isinstance(spec, (str, os.PathLike)):
        path = Path(spec)
        where = str(path)
        if not path.is_file():
            raise FileNotFoundError(f"sweep spec {path} does not exist")
        try:
            import tomllib
        except ModuleNotFoundError:  # Python 3.10
            import tomli as tomllib
        try:
            spec = tomllib.loads(path.read_text())
        except (ValueError, UnicodeDecodeError) as exc:  # TOMLDecodeError, or Python's limit on int digits
            raise ValueError(f"{path} is not valid TOML ({plain_error(exc)})") from None
    if not isinstance(spec, dict):
        raise ValueError(f"a sweep spec is a TOML file or a dict, got {type(spec).__name__}")
    unknown = set(spec) - {"command", "base", "grid"}
    if unknown:
        raise ValueError(f"{where}: unknown key {sorted(unknown)[0]!r}; a spec has command, [base] and [grid]")
    command = spec.get("command")
    if command not in COMMANDS:
        raise ValueError(f"{where}: command = {command!r} is not one of {', '.join(COMMANDS)}")
    tables = {}
    for table in ("base", "grid"):
        raw = spec.get(table, {})
        if not isinstance(raw, dict):
            raise ValueError(f"{where}: {table} must be a table of options, got {raw!r}")
        tables[table] = {}
        for key, value in raw.items():
            name = _option_name(key)
            if name in tables[table] or (table == "grid" and name in tables["base"]):
                raise ValueError(f"{where}: option {key!r} is given twice (in [base] and [grid], or spelled twice)")
            if table == "grid":
                if not isinstance(value, list) or not value:
                    raise ValueError(f"{where}: grid.{key} must be a non-empty list of values, got {value!r}")
                for v in value:
                    _scalar(v, f"grid.{key}", where)
                if len(set(map(repr, value))) != len(value):
                    raise ValueError(f"{where}: grid.{key} repeats a value: {value!r}")
                value = tuple(value)
            else:
                _scalar(value, f"base.{key}", where)
            tables[table][name] = value
    if not tables["grid"]:
        raise ValueError(f"{where}: grid is empty; give at least one option with a list of values in [grid]")
    return Spec(command, tables["base"], tables["grid"])


def _scalar(value, key: str, where: str) -> None:
    if isinstance(value, (list, dict)):
        raise ValueError(f"{where}: {key} must be a single value (lists of values go in [grid]), got {value!r}")
    if not isinstance(value, (bool, int, float, str)):
        raise ValueError(f"{where}: {key} must be a number, a string or a boolean, got {value!r}")


def _argv(parser, command: str, options: dict, tables: dict) -> list[str]:
    """The command line of one cell; ValueError naming the spec key of an unknown or reserved option."""
    argv = []
    for name, value in options.items():
        key = f"{tables[name]}.{name}"
        if name in COMMANDS[command].reserved:
            raise ValueError(f"spec {key}: --{name.replace('_', '-')} is set by fv sweep, not by the spec")
        flag = "--" + name.replace("_", "-")
        action = parser._option_string_actions.get(flag)
        if action is None or flag in ("--help",):
            raise ValueError(f"spec {key}: fv {command} has no option {flag}")
        if action.nargs == 0:  # a switch such as --quiet
            if not isinstance(value, bool):
                raise ValueError(f"spec {key}: {flag} is a switch; give true or false, got {value!r}")
            if value == (action.const is not False):
                argv.append(flag)
            continue
        if isinstance(value, bool):
            raise ValueError(f"spec {key}: {flag} takes a value, got {str(value).lower()}")
        argv.append(f"{flag}={value!r}" if isinstance(value, float) else f"{flag}={value}")
    return argv


def _explain(message: str, command: str, options: dict, tables: dict) -> str:
    """An argparse or configuration error as one line naming the spec key behind it."""
    flag = re.search(r"argument (--[\w-]+)", message)
    if flag:
        name = _option_name(flag.group(1)[2:])
        if name in options:
            return f"spec {tables[name]}.{name} = {options[name]!r}: fv {command} rejects it ({message})"
    required = re.search(r"required: (--[\w-]+)", message)
    if required:
        name = _option_name(required.group(1)[2:])
        return f"spec: fv {command} needs {name}; set it in [base] or [grid]"
    return f"spec: fv {command} rejects {message}"


MAX_CELLS = 10_000  # a larger grid is refused before it is built (split it into several sweeps)


def plan(spec, out, *, workers: int | None = None) -> tuple[Spec, list[Cell], list[dict]]:
    """The cells of a spec, every one parsed and put through the command's own run-time checks (values,
    memory and time guards) before any work, with the grid values of each; then the whole sweep's time
    (the cells' estimates shared among ``workers`` processes) against the cap. One-line ValueErrors
    name the spec key and value behind a refusal."""
    spec = load_spec(spec)
    n_cells = 1
    for values in spec.grid.values():
        n_cells *= len(values)
    if n_cells > MAX_CELLS:
        sizes = " x ".join(str(len(v)) for v in spec.grid.values())
        raise ValueError(f"spec: the grid has {n_cells:,} cells ({sizes}), more than fv sweep takes ({MAX_CELLS:,}); "
                         "split it into several sweeps")
    command = COMMANDS[spec.command]
    parser = _subparser(spec.command)
    tables = {**{k: "base" for k in spec.base}, **{k: "grid" for k in spec.grid}}
    fixed = {"out": str(Path(out).resolve() / "train")} if spec.command in ("train", "compare") else {}
    if spec.command == "mc" and "threads" not in tables:
        fixed["threads"] = 1  # one process per core: numba uses one thread in each
    cells, points, seconds = [], [], 0.0
    for point in spec.points():
        options = {**spec.base, **point}
        argv = _argv(parser, spec.command, options, tables)
        argv += [f"--{k}={v}" for k, v in fixed.items()]
        try:
            args = parser.parse_args(argv)
        except ValueError as exc:
            raise ValueError(_explain(str(exc), spec.command, options, tables)) from None
        try:
            config = command.config(args)
            seconds += _cell_check(spec.command, args)
        except ValueError as exc:
            raise ValueError(_blame(str(exc), spec, point, options, tables)) from None
        cells.append(Cell.keyed(spec.command, config, run_command, {"command": spec.command, "argv": argv}))
        points.append(point)
    from fvnum.resources import check_time

    parallel = max(1, min(workers or _cpu_count(), _cpu_count()))
    check_time(f"fv sweep of {len(cells)} cells on {parallel} worker{'s' if parallel > 1 else ''}",
               seconds / parallel, "; fewer cells or smaller sizes fit")
    return spec, cells, points


def _cpu_count() -> int:
    return os.cpu_count() or 1


def _cell_check(command: str, args) -> float:
    """The run-time checks of one cell of ``fv <command>`` (what the command itself refuses when it starts,
    memory and time guards included); returns the cell's estimated seconds."""
    if command == "mc":
        return _mc_cell_seconds(args)
    from .commands import config_from_args
    from .cost import check_train_time, theory_table_seconds

    run = config_from_args(args).check_resources()
    seconds = check_train_time(run)
    if command == "compare":
        seconds += theory_table_seconds(run.data, run.model.budget, args.samples, 2000)
    return seconds


def _mc_cell_seconds(args) -> float:
    """``fv mc``'s checks before its Monte Carlo: the prior, the budget against the tree, the channel, the
    design, the resource guard (``fvnum.limits``); and the estimated seconds."""
    from fvnum.channels import make_channel
    from fvnum.cli import _check_options, _number, _prior
    from fvnum.limits import check_loss_mc_args, mc_cost
    from fvnum.registry import build_policy
    from fvnum.simulate import check_budget
    from fvnum.tree import TreeSpec, numeric_prior

    _check_options(args)
    prior = _prior(args)
    spec = numeric_prior(prior)
    design = parse_design(args.design) if args.design is not None else None
    tree = isinstance(spec, TreeSpec)
    check_loss_mc_args(spec, args.strategy, args.budget, design=design, tokens=args.tokens is not None,
                       samples=args.samples, threads=args.threads, search_samples=4000)
    channel = make_channel(spec, _number(args.tau) if args.tau is not None else None, args.tokens,
                           _number(args.s2) if args.s2 is not None else 0.01)
    if args.strategy in ("path", "top_levels", "fixed"):  # policies that cost nothing to build: their checks
        build_policy(prior, spec, channel, args.strategy, args.budget, design=design, layers=args.layers,
                     width=args.width)
    elif tree and args.strategy in ("bellman_noiseless", "optimal"):
        check_budget(args.budget, spec.dim, f"a coordinate design reads at most D = {spec.dim} distinct nodes")
    return mc_cost(tree=tree, depth=spec.depth if tree else 0, dim=spec.dim, budget=args.budget,
                   strategy=args.strategy, tokens=args.tokens is not None, samples=args.samples,
                   threads=args.threads or 1)[1]


def parse_design(text) -> list[int]:
    from fvsym._validate import parse_int_list

    return parse_int_list(text, "--design")


def _blame(message: str, spec: Spec, point: dict, options: dict, tables: dict) -> str:
    """A cell's refusal as one line naming the spec key behind it: the option the message names (a grid
    key first), else the cell's grid values."""
    resource = "would take about" in message or "of memory" in message
    names = sorted((n for n in options if tables[n] == "grid" or not resource),  # sizes: blame a grid key only
                   key=lambda n: (tables[n] != "grid", -len(n)))
    for name in names:
        words = {name, name.replace("_", "-"), name.replace("_", " ")}
        if any(re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", message) for w in words):
            return f"spec {tables[name]}.{name} = {options[name]!r}: fv {spec.command} rejects it ({message})"
    label = ", ".join(f"{k}={v!r}" for k, v in point.items())
    return f"spec cell {label}: fv {spec.command} rejects it ({message})"


# --- fv sweep ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SweepResult:
    """Outcome of ``run``: one row per cell (grid values, ``loss``/``value``, ``stderr``, ``n``, ``key``)."""

    command: str
    out: str
    rows: tuple
    n_cells: int
    n_computed: int
    n_cached: int
    seconds: float
    files: tuple

    def to_frame(self):
        """One row per cell (grid values, loss or value, stderr, n, key) as a pandas DataFrame."""
        from fvnum.estimate import to_frame

        return to_frame([dict(r) for r in self.rows], "a SweepResult")

    def __repr__(self) -> str:
        return (f"SweepResult(fv {self.command} into {self.out}: {self.n_cells} cells, {self.n_computed} computed, "
                f"{self.n_cached} cached, {self.seconds:.1f} s; .rows, .to_frame())")

    def to_dict(self) -> dict:
        return {"command": self.command, "out": self.out, "rows": [dict(r) for r in self.rows],
                "n_cells": self.n_cells, "n_computed": self.n_computed, "n_cached": self.n_cached,
                "seconds": self.seconds, "files": list(self.files)}


def run(spec, *, out, scheduler=None, workers: int | None = None, progress: bool = True, log=print) -> SweepResult:
    """Run a sweep (a TOML path, a dict or a ``Spec``) into the folder ``out``; see the module docstring."""
    start = time.perf_counter()
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    spec, cells, points = plan(spec, out, workers=workers)  # every cell checked before anything is written
    if isinstance(scheduler, str) and scheduler != SYNCHRONOUS:
        scheduler_address(scheduler)  # a scheduler that does not answer: one line, before anything is written
    store = RunStore(out, KIND)
    cached = sum(store.get(c.key) is not None for c in {c.key: c for c in cells}.values())
    log(f"sweep of fv {spec.command}: {len(cells)} cells into {store.folder}")
    results = run_cells(cells, store, scheduler=scheduler, workers=workers, progress=progress, log=log)
    column = COMMANDS[spec.command].column
    rows = []
    for cell, point in zip(cells, points):
        r = results[cell.key]
        rows.append({**point, column: r[column], "stderr": r["stderr"], "n": r["n"], "key": cell.key})
    files = _write(store.folder, spec, rows, [results[c.key] for c in cells])
    unique = len({c.key for c in cells})
    result = SweepResult(spec.command, str(store.folder), tuple(rows), len(cells), unique - cached, cached,
                         round(time.perf_counter() - start, 3), tuple(str(f) for f in files))
    log(f"results: {files[0]} and {files[1].name} ({result.n_computed} cells computed, {result.n_cached} reused)")
    return result


def _write(folder: Path, spec: Spec, rows: list[dict], details: list[dict]) -> list[Path]:
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return [
        write_atomic(folder / "results.csv", buf.getvalue()),
        write_json(folder / "results.json", with_checksum({"format": RESULTS_FORMAT, "spec": spec.to_dict(),
                                                           "rows": [{**r, "result": d} for r, d in zip(rows, details)]})),
    ]


def register(subparsers) -> None:
    """``fv sweep`` (called by ``bridges.cli.build_parser``)."""
    p = subparsers.add_parser(
        "sweep", help="a grid of fv train, compare or mc runs on a Dask cluster (local by default)",
        description="Run every combination of the [grid] options of a TOML spec (command = train | compare | "
        "mc, [base] options, [grid] lists of values) on dask.distributed: a local cluster of --workers processes, "
        "or the running cluster at --scheduler. Writes DIR/results.csv and DIR/results.json (one row per cell); "
        "finished cells are kept in DIR/cells, so a re-run computes only what is missing. Training checkpoints "
        "go to DIR/train (on a cluster, DIR must be on a file system every worker sees).",
    )
    p.add_argument("spec", metavar="SPEC.toml", help="the sweep spec")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (results, cells, checkpoints)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="a running Dask scheduler, tcp://host:8786, or its --scheduler-file "
                   "(default: start a local cluster; 'synchronous': run in this process)")
    p.add_argument("--workers", type=int_arg("--workers", 1, MAX_THREADS), default=None, metavar="N",
                   help="worker processes of the local cluster (default: the number of cores)")
    add_format_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar or messages")
    p.set_defaults(func=sweep_command, default_max_seconds=DEFAULT_LONG_SECONDS)


def sweep_command(args) -> int:
    from .commands import check_workers

    check_workers(args.workers)
    quiet = args.quiet or args.format == "json"
    log = (lambda *a: None) if quiet else (lambda *a: print(*a, file=sys.stderr))
    try:
        result = run(args.spec, out=args.out, scheduler=args.scheduler, workers=args.workers,
                     progress=not args.quiet, log=log)
    except RuntimeError as exc:  # a cell whose worker kept dying: one line, finished cells kept
        print(f"fv sweep: error: {exc}", file=sys.stderr)
        return 1
    column = COMMANDS[result.command].column
    names = [k for k in result.rows[0] if k not in (column, "stderr", "n", "key")]
    lines = [" ".join(f"{n:>10}" for n in names) + f" {column:>12} {'stderr':>10} {'n':>8}  key"]
    for r in result.rows:
        lines.append(" ".join(f"{str(r[n]):>10}" for n in names) + f" {r[column]:12.6g} {r['stderr']:10.2g} "
                     f"{r['n']:8d}  {r['key']}")
    emit(result.to_dict(), args.format, lines)
    return 0
