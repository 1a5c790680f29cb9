"""Sweeps: a grid of ``fv train``, ``fv compare`` or ``fv mc`` cells on a ``dask.distributed`` cluster.

A spec is TOML (or the same dict in Python)::

    command = "train"        # train | compare | mc
    [base]                   # options of that command, by their long names (dashes or underscores)
    model = "A"
    depth = 4
    steps = 300
    [grid]                   # every combination of these is one cell
    budget = [2, 3]
    seed = [0, 1, 2]

A cell of ``train`` or ``compare`` is a ``RunConfig`` built from the options by the table that generates
those commands' options (``bridges.runs.config.RUN_OPTIONS``; ``compare`` also takes ``samples``); a cell of
``mc`` is parsed by ``fv mc``'s own parser (``fvnum.cli``), so a new or renamed option works here unchanged.
Every cell is checked and keyed by a hash of its full configuration (defaults included) before any work
starts. ``run_sweep(spec, out=DIR)`` computes the missing cells and writes ``DIR/results.csv`` and
``DIR/results.json`` (one row per cell: the grid values, ``loss`` (train, compare) or ``value`` (mc),
``stderr``, ``n`` and the cell ``key``). Finished cells are kept in ``DIR/cells/`` (the run store of
``bridges.runs.store``), so a re-run computes only what is missing. Training checkpoints go to ``DIR/train``.

The cells run on the engine of ``bridges.runs.engine`` (``Cell``, ``run_cells``, ``cluster``; re-exported here):
a local Dask cluster of ``workers`` processes, the running cluster at ``scheduler``, or this process
(``synchronous``). The command ``fv sweep`` is in ``bridges.commands``.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path

from fvsym._validate import check_int, parse_fraction, plain_error

from bridges.runs.config import DEFAULT_SAMPLES, RENAMED_OPTIONS, RUN_OPTION_NAMES, RunConfig
from bridges.runs.engine import CONNECT_TIMEOUT, SYNCHRONOUS, Cell, cluster, run_cells, scheduler_address
from bridges.runs.store import RunStore, abridge, csv_text, fields, short_repr, with_checksum, write_atomic, write_json
from fvsym.errors import InputError, reworded

__all__ = ["COMMANDS", "Spec", "SweepResult", "load_spec", "plan", "run_command", "run_sweep"]

KIND = "sweep"
RESULTS_FORMAT = "fv-sweep-1"
SHAPES = {  # what a cell of each command holds (checked when read and before it is stored, bridges.runs.store)
    "train": fields("loss", "stderr", "n", numbers=("loss", "stderr", "n")),
    "compare": fields("loss", "stderr", "n", "table", numbers=("loss", "stderr", "n")),
    "mc": fields("value", "stderr", "n", numbers=("value", "stderr", "n")),
}


# --- the commands a sweep runs ----------------------------------------------------------------------
@dataclass(frozen=True)
class _Command:
    """How a sweep runs one ``fv`` command: options it sets itself, what keys a cell, what it reports."""

    name: str
    reserved: tuple  # options the sweep sets or that make no sense in a cell
    column: str  # "loss" or "value"


COMMANDS = {
    "train": _Command("train", ("out", "quiet", "no_resume"), "loss"),
    "compare": _Command("compare", ("out", "quiet", "grid", "jobs", "workers", "scheduler"), "loss"),
    "mc": _Command("mc", ("format", "progress"), "value"),
}
_MC_EXECUTION = ("threads",)  # options of fv mc that change how a cell runs, not its numbers (not in the key)


def _run_options(command: str, options: dict, tables: dict, out: str) -> tuple[dict, int | None]:
    """The parsed run options (for ``RunConfig.from_options``) and, for compare, the samples of one train or
    compare cell; ValueError naming the spec key of an unknown, reserved or bad option."""
    values, samples = {"out": out}, DEFAULT_SAMPLES if command == "compare" else None
    for name, value in options.items():
        key, flag = f"{tables[name]}.{abridge(name, 60)}", "--" + abridge(name.replace("_", "-"), 60)
        if name in COMMANDS[command].reserved:
            raise InputError(f"spec {key}: {flag} is set by fv sweep, not by the spec")
        if flag in RENAMED_OPTIONS:
            new, why = RENAMED_OPTIONS[flag]
            raise InputError(f"spec {key}: {flag} is now {new} ({why})")
        option = RUN_OPTION_NAMES.get(name)
        if option is None and not (command == "compare" and name == "samples"):
            raise InputError(f"spec {key}: fv {command} has no option {flag}")
        if isinstance(value, bool):
            raise InputError(f"spec {key}: {flag} takes a value, got {str(value).lower()}")
        text = repr(value) if isinstance(value, float) else str(value)
        try:
            if option is None:
                samples = _samples(text)
            else:
                values[option.dest] = option.parse(text)
        except ValueError as exc:
            raise reworded(exc, f"spec {abridge(key, 60)} = {short_repr(value)}: fv {command} rejects it "
                             f"({abridge(str(exc), 200)})") from None
    if "model" not in values:
        raise InputError(f"spec: fv {command} needs model; set it in [base] or [grid]")
    return values, samples


def _samples(text: str) -> int:
    if not re.fullmatch(r"\s*\d{1,19}\s*", text):
        raise InputError(f"--samples must be an integer, got {short_repr(text)}")
    return check_int(int(text), "--samples", 2, 10**10)


def _run_key_config(command: str, run: RunConfig, samples: int | None) -> dict:
    """What keys a train or compare cell: the run's key fields (``out``, ``threads``, ``checkpoint_every``
    left out: they change how a cell runs, not its numbers), its device off the CPU, compare's samples."""
    config = {"run": run.key_dict()}
    if run.train.device != "cpu":  # numbers from another device are other numbers (CPU keys as before)
        config["device"] = run.train.device
    if command == "compare":
        config["samples"] = samples
    return config


class _Refusing(argparse.ArgumentParser):
    """A parser that raises ValueError instead of exiting, and takes options by their full names only."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **{**kw, "allow_abbrev": False})

    def error(self, message):
        raise InputError(message)


def _mc_parser() -> argparse.ArgumentParser:
    """``fv mc``'s own parser (``fvnum.cli.add_numeric_commands``), raising ValueError instead of exiting."""
    from fvnum.cli import add_numeric_commands

    sub = _Refusing(add_help=False).add_subparsers(parser_class=_Refusing)
    add_numeric_commands(sub)
    return sub.choices["mc"]


def _mc_argv(options: dict, tables: dict) -> list[str]:
    """The command line of one mc cell; ValueError naming the spec key of a reserved option or a switch."""
    argv = []
    for name, value in options.items():
        key, flag = f"{tables[name]}.{abridge(name, 60)}", "--" + abridge(name.replace("_", "-"), 60)
        if name in COMMANDS["mc"].reserved:
            raise InputError(f"spec {key}: {flag} is set by fv sweep, not by the spec")
        if name == "help":
            raise InputError(f"spec {key}: fv mc has no option {flag}")
        if isinstance(value, bool):  # every option of fv mc a spec may set takes a value
            raise InputError(f"spec {key}: {flag} takes a value, got {str(value).lower()}")
        argv.append(f"{flag}={value!r}" if isinstance(value, float) else f"{flag}={value}")
    return argv


def _mc_config(args) -> dict:
    """The mc cell's full configuration (what its key hashes): every parsed option but those of execution."""
    _check_mc(args)
    return {"options": {k: v for k, v in sorted(vars(args).items())
                        if k not in ("func", "command", *COMMANDS["mc"].reserved, *_MC_EXECUTION)}}


def _check_mc(args) -> None:
    """The checks of ``fv mc`` that are cheap enough to run on every cell before any work starts (the
    command checks the rest when the cell runs)."""
    from fractions import Fraction

    from fvnum.policies.strategies import strategy_of, taking

    if (args.tau is None) == (args.tokens is None):
        raise InputError("give exactly one of tau (gaussian channel) or tokens (tokens channel)")
    if args.tau is not None:
        try:
            tau = Fraction(args.tau)
        except (ValueError, ZeroDivisionError):
            raise InputError(f"tau must be a number such as 0.3 or 3/10, got {short_repr(args.tau)}") from None
        if tau < 0:
            raise InputError(f"tau must be >= 0, got {args.tau}")
    takes = getattr(strategy_of(args.strategy), "takes", frozenset())  # the options the strategy's object reads
    if "design" in takes and args.design is None:
        raise InputError(f"strategy {args.strategy} needs design = \"n1,n2,...\"")
    if args.design is not None and "design" not in takes:
        raise InputError(f"design applies to strategy {taking('design')} only, got strategy {args.strategy}")
    for name, low in (("samples", 2), ("seed", 0), ("budget", 1)):
        if getattr(args, name) < low:
            raise InputError(f"{name} must be >= {low}, got {getattr(args, name)}")
    from fvnum.cli import prior_of

    prior_of(args)  # depth, alpha


def run_command(command: str, argv: list[str] | None = None, *, run: dict | None = None,
                samples: int | None = None) -> dict:
    """One cell of a sweep, in this process: ``fv mc <argv>`` (its result), or the training run ``run``
    (``RunConfig.to_dict``) of ``fv train`` or ``fv compare`` (compared with the theory at ``samples``);
    a dict with ``loss`` (train, compare) or ``value`` (mc), ``stderr`` and ``n``."""
    if command == "mc":
        args = _mc_parser().parse_args(list(argv))
        args.format, args.progress = "json", False
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            args.func(args)
        return json.loads(out.getvalue())
    from bridges.training.train import train

    result = train(RunConfig.from_dict(run), progress=False)
    summary = {"loss": result.loss, "stderr": result.stderr, "n": result.n_eval, "metric": result.metric,
               "steps": result.steps, "run_key": result.config.key(), "run_dir": result.run_dir}
    if command == "compare":
        from bridges.analysis.compare import compare

        summary["table"] = compare(result, samples=samples, seed=result.config.train.seed).to_dict()
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
            raise reworded(exc, f"{path} is not valid TOML ({plain_error(exc)})") from None
    if not isinstance(spec, dict):
        raise InputError(f"a sweep spec is a TOML file or a dict, got {type(spec).__name__}")
    unknown = set(spec) - {"command", "base", "grid"}
    if unknown:
        raise InputError(f"{where}: unknown key {short_repr(sorted(unknown)[0])}; a spec has command, [base] and "
                         "[grid]")
    command = spec.get("command")
    if command not in COMMANDS:
        raise InputError(f"{where}: command = {short_repr(command)} is not one of {', '.join(COMMANDS)}")
    tables = {}
    for table in ("base", "grid"):
        raw = spec.get(table, {})
        if not isinstance(raw, dict):
            raise InputError(f"{where}: {table} must be a table of options, got {short_repr(raw)}")
        tables[table] = {}
        for key, value in raw.items():
            name = _option_name(key)
            if name in tables[table] or (table == "grid" and name in tables["base"]):
                raise InputError(f"{where}: option {short_repr(key)} is given twice (in [base] and [grid], or spelled "
                                 "twice)")
            if table == "grid":
                if not isinstance(value, list) or not value:
                    raise InputError(f"{where}: grid.{abridge(key, 60)} must be a non-empty list of values, got "
                                     f"{short_repr(value)}")
                for v in value:
                    _scalar(v, f"grid.{key}", where)
                if len(set(map(repr, value))) != len(value):
                    raise InputError(f"{where}: grid.{abridge(key, 60)} repeats a value: {short_repr(value)}")
                value = tuple(value)
            else:
                _scalar(value, f"base.{key}", where)
            tables[table][name] = value
    if not tables["grid"]:
        raise InputError(f"{where}: grid is empty; give at least one option with a list of values in [grid]")
    return Spec(command, tables["base"], tables["grid"])


def _scalar(value, key: str, where: str) -> None:
    if isinstance(value, (list, dict)):
        raise InputError(f"{where}: {abridge(key, 60)} must be a single value (lists of values go in [grid]), got "
                         f"{short_repr(value)}")
    if not isinstance(value, (bool, int, float, str)):
        raise InputError(f"{where}: {abridge(key, 60)} must be a number, a string or a boolean, got "
                         f"{short_repr(value)}")


def _explain(message: str, command: str, options: dict, tables: dict) -> str:
    """An error of ``fv mc``'s parser as one line naming the spec key behind it."""
    unknown = re.search(r"unrecognized arguments: (--[\w-]+)", message)
    if unknown:
        name = _option_name(unknown.group(1)[2:])
        if name in options:
            return f"spec {tables[name]}.{name}: fv {command} has no option {unknown.group(1)}"
    flag = re.search(r"argument (--[\w-]+)", message)
    if flag:
        name = _option_name(flag.group(1)[2:])
        if name in options:
            return (f"spec {tables[name]}.{abridge(name, 60)} = {short_repr(options[name])}: fv {command} rejects it "
                    f"({abridge(message, 200)})")
    required = re.search(r"required: (--[\w-]+)", message)
    if required:
        name = _option_name(required.group(1)[2:])
        return f"spec: fv {command} needs {name}; set it in [base] or [grid]"
    return f"spec: fv {command} rejects {abridge(message, 200)}"


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
        raise InputError(f"spec: the grid has {n_cells:,} cells ({sizes}), more than fv sweep takes ({MAX_CELLS:,}); "
                         "split it into several sweeps")
    tables = {**{k: "base" for k in spec.base}, **{k: "grid" for k in spec.grid}}
    train_out = str(Path(out).resolve() / "train")
    parser = _mc_parser() if spec.command == "mc" else None
    cells, points, seconds = [], [], 0.0
    for point in spec.points():
        options = {**spec.base, **point}
        if spec.command == "mc":
            argv = _mc_argv(options, tables) + ([] if "threads" in tables else ["--threads=1"])  # numba: 1 per process
            try:
                args = parser.parse_args(argv)
            except ValueError as exc:
                raise reworded(exc, _explain(str(exc), spec.command, options, tables)) from None
        else:
            values, samples = _run_options(spec.command, options, tables, train_out)
        try:
            if spec.command == "mc":
                config, payload = _mc_config(args), {"command": "mc", "argv": argv}
                seconds += _mc_cell_seconds(args)
            else:
                run = RunConfig.from_options(values)
                config = _run_key_config(spec.command, run, samples)
                payload = {"command": spec.command, "run": run.to_dict(), "samples": samples}
                seconds += _train_cell_seconds(run, samples)
        except ValueError as exc:
            raise reworded(exc, _blame(str(exc), spec, point, options, tables)) from None
        cells.append(Cell.keyed(spec.command, config, run_command, payload, SHAPES[spec.command]))
        points.append(point)
    from fvsym.guards.limits import check_time

    check_time(f"fv sweep of {len(cells)} cells {priced_on(workers)}", seconds / _parallel(workers),
               "; fewer cells or smaller sizes fit")
    return spec, cells, points


def _parallel(workers: int | None) -> int:
    """How many cells the price assumes run at once: the workers, at most one per core."""
    return max(1, min(workers or _cpu_count(), _cpu_count()))


def priced_on(workers: int | None) -> str:
    """What the sweep's price assumes, in words (``--workers`` beyond the cores is said to be priced on the
    cores: the extra workers share them)."""
    n = _parallel(workers)
    words = f"on {n} worker{'s' if n > 1 else ''}"
    if workers is not None and workers > n:
        words += f" (--workers {workers} priced on the {n} core{'s' if n > 1 else ''} that run them at once)"
    return words


def _cpu_count() -> int:
    return os.cpu_count() or 1


def _train_cell_seconds(run: RunConfig, samples: int | None) -> float:
    """The run-time checks of a train or compare cell (memory and time guards, what the command refuses when
    it starts); returns the cell's estimated seconds."""
    from bridges.prices.cost import check_train_time, theory_table_seconds

    seconds = check_train_time(run.check_resources())
    if samples is not None:
        seconds += theory_table_seconds(run.data, run.model.budget, samples, 2000)
    return seconds


def _mc_cell_seconds(args) -> float:
    """``fv mc``'s checks before its Monte Carlo: the prior, the budget against the tree, the channel, the
    design, the resource guard (``fvnum.guards.limits``); and the estimated seconds."""
    from fvnum.mc.channels import make_channel
    from fvnum.cli import channel_of, check_mc_options, prior_of
    from fvnum.policies.prices import check_loss_mc_args, mc_cost
    from fvnum.mc.simulate import check_budget
    from fvnum.policies.strategies import strategy_of
    from fvnum.priors.capabilities import capability
    from fvnum.priors.tree import numeric_prior

    check_mc_options(args)
    prior = prior_of(args)
    spec = numeric_prior(prior)
    design = parse_design(args.design) if args.design is not None else None
    tree = capability(spec, "heap_depth") is not None  # the tree's strategies and prices
    check_loss_mc_args(spec, args.strategy, args.budget, design=design, token_channel=args.tokens is not None,
                       samples=args.samples, threads=args.threads, search_samples=4000)
    channel = make_channel(spec, channel_of(float(parse_fraction(args.tau, "tau")) if args.tau is not None else None,
                                            args.tokens,
                                            float(parse_fraction(args.s2, "s2")) if args.s2 is not None else 0.01))
    own = strategy_of(args.strategy)
    if own is not None and own.quick:  # a policy that costs nothing to build: its checks
        own.using(design=design, layers=args.layers, width=args.width).policy(prior, args.budget, channel)
    elif tree and own is not None and own.max_budget == "dim":  # a coordinate design of distinct nodes (bellman_noiseless, optimal)
        check_budget(args.budget, spec.dim, f"a coordinate design reads at most D = {spec.dim} distinct nodes")
    if own is not None and own.prices_itself:  # its own price (optimal: the exact noisy policy under noise)
        return own.cost(spec, channel, args.budget, args.samples, threads=args.threads or 1)
    return mc_cost(depth=spec.depth if tree else None, dim=spec.dim, budget=args.budget,
                   strategy=args.strategy, token_channel=args.tokens is not None, samples=args.samples,
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
            return (f"spec {tables[name]}.{abridge(name, 60)} = {short_repr(options[name])}: fv {spec.command} "
                    f"rejects it ({abridge(message, 200)})")
    label = abridge(", ".join(f"{abridge(k, 40)}={short_repr(v, 40)}" for k, v in point.items()), 200)
    return f"spec cell {label}: fv {spec.command} rejects it ({abridge(message, 200)})"


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


def run_sweep(spec, *, out, scheduler=None, workers: int | None = None, progress: bool = True, log=print) -> SweepResult:
    """Run a sweep (a TOML path, a dict or a ``Spec``) into the folder ``out``; see the module docstring."""
    start = time.perf_counter()
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise InputError(f"workers must be an integer >= 1, got {short_repr(workers)}")
    spec, cells, points = plan(spec, out, workers=workers)  # every cell checked before anything is written
    if isinstance(scheduler, str) and scheduler != SYNCHRONOUS:
        scheduler_address(scheduler)  # a scheduler that does not answer: one line, before anything is written
    else:  # the cells train here: their devices must be here, said before the folder and the cluster
        from bridges.runs.devices import check_device

        for device in sorted({c.kwargs["run"]["train"]["device"] for c in cells if "run" in c.kwargs}):
            check_device(device)
    store = RunStore(out, KIND)
    cached = sum(store.get(c.key, shape=c.shape) is not None for c in {c.key: c for c in cells}.values())
    log(f"sweep of fv {spec.command}: {len(cells)} cells into {store.folder}, priced {priced_on(workers)}")
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
    return [
        write_atomic(folder / "results.csv", csv_text(rows, list(rows[0]), lineterminator="\n")),
        write_json(folder / "results.json", with_checksum({"format": RESULTS_FORMAT, "spec": spec.to_dict(),
                                                           "rows": [{**r, "result": d} for r, d in zip(rows, details)]})),
    ]
