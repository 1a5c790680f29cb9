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

The engine, for any list of keyed cells (``fv sweep``, ``fv reproduce --full``, ``fv scaling``)::

    run_cells(cells: Sequence[Cell], store: RunStore | None = None, *, scheduler=None, workers=None,
              progress=True, log=print) -> dict[str, dict]

- ``Cell(key, fn, kwargs, name="cell", config=None)``: one unit of work, ``fn(**kwargs)`` returning a
  JSON-able dict. ``fn`` should be an importable top-level function (workers of a real cluster import it
  by name: the package must be installed there, at the same version); ``kwargs`` must be JSON-able.
  ``key`` names the stored result (letters, digits, ``.``, ``_``, ``-``); build it with
  ``Cell.keyed(name, config, fn, kwargs)``, which hashes ``config`` exactly as ``RunStore.cell`` does.
  Seeds belong in ``kwargs``: a cell gives the same numbers in-process, on a local or a remote cluster.
- ``store``: a ``bridges.store.RunStore``; cells already there are not run again, each finished cell is
  written there (by this process only, atomically) as soon as it arrives. ``None``: nothing is kept.
- ``scheduler``: ``None`` starts a ``LocalCluster`` of ``workers`` processes (default: the number of
  cores), one thread each, listening on 127.0.0.1 only, and stops it on return; ``"tcp://host:port"`` (or
  the path of a ``dask scheduler --scheduler-file``) uses a running cluster; a ``distributed.Client``
  reuses a connection the caller holds (see ``cluster``); ``"synchronous"`` runs the cells one after
  another in this process, without Dask (debugging, and the in-process reference).
- Returns ``{cell.key: result}`` for every cell, in the order of ``cells`` (duplicate keys run once).
  A worker that dies mid-cell (killed, out of memory) is replaced and its cell runs again elsewhere
  (Dask gives up after ``distributed.scheduler.allowed-failures`` deaths, default 3). A cell that raises
  ``ValueError`` stops the run with a one-line ``ValueError`` naming the cell; finished cells are kept.
- A scheduler that does not answer: ``ConnectionError`` within ``CONNECT_TIMEOUT`` seconds.

``cluster(scheduler, workers)`` is the same engine as a context manager yielding a ``Client`` (or
``None`` for ``"synchronous"``), for callers that submit several batches to one cluster.
"""
from __future__ import annotations

import contextlib
import csv
import io
import itertools
import json
import os
import re
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from fvsym._emit import add_format_argument, emit
from fvsym._validate import DEFAULT_LONG_SECONDS, int_arg

from .store import RunStore, config_key, with_checksum, write_atomic, write_json

MAX_THREADS = max(8, 4 * (os.cpu_count() or 1))

__all__ = [
    "COMMANDS", "CONNECT_TIMEOUT", "Cell", "Spec", "SweepResult", "cluster", "load_spec", "run", "run_cells",
    "run_command",
]

KIND = "sweep"
RESULTS_FORMAT = "fv-sweep-1"
SYNCHRONOUS = "synchronous"
CONNECT_TIMEOUT = 5.0  # seconds to reach a scheduler before giving up
_KEY = re.compile(r"^[A-Za-z0-9._-]+$")


# --- the engine --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One unit of work: ``fn(**kwargs)`` returns a JSON-able dict, stored under ``key``.

    ``name`` and ``config`` are stored beside the result (``config`` defaults to ``kwargs``).
    """

    key: str
    fn: Callable
    kwargs: dict = field(default_factory=dict)
    name: str = "cell"
    config: dict | None = None

    def __post_init__(self):
        if not isinstance(self.key, str) or not _KEY.match(self.key):
            raise ValueError(f"cell key must be letters, digits, '.', '_' or '-', got {self.key!r}")
        if not callable(self.fn):
            raise ValueError(f"cell {self.key}: fn must be a function, got {self.fn!r}")
        if not isinstance(self.kwargs, dict):
            raise ValueError(f"cell {self.key}: kwargs must be a dict, got {type(self.kwargs).__name__}")
        try:
            json.dumps(self.kwargs, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"cell {self.key}: kwargs must be JSON-able ({exc})") from None

    @classmethod
    def keyed(cls, name: str, config: dict, fn: Callable, kwargs: dict | None = None) -> "Cell":
        """The cell whose key is ``name-<hash of config>``, the key ``RunStore.cell(name, config, ...)``
        uses; ``kwargs`` default to ``config``."""
        key = f"{name}-{config_key({'name': name, **config})}"
        return cls(key, fn, dict(config if kwargs is None else kwargs), name, config)


def _call(fn: Callable, kwargs: dict, deadline: float | None = None) -> dict:
    """Run one cell (on a worker): its result made plain JSON, and where and how long it ran. ``deadline``
    (``time.time()`` seconds): the command's time cap, which training inside the cell watches."""
    from fvsym._validate import time_limit

    start = time.perf_counter()
    if deadline is None:
        result = fn(**kwargs)
    else:
        left = deadline - time.time()
        if left <= 0:
            raise ValueError("the command's time cap (fv --max-seconds) passed before this cell started; "
                             "finished cells are kept: run again to resume")
        with time_limit(left):
            result = fn(**kwargs)
    result = json.loads(json.dumps(result, default=_plain))
    return {"result": result, "host": socket.gethostname(), "pid": os.getpid(),
            "seconds": round(time.perf_counter() - start, 3)}


def _plain(x):
    from .store import _jsonable

    return _jsonable(x)


def _check_address(address: str) -> None:
    """Fail fast (``ConnectionError``, one line) unless a Dask scheduler answers at ``address`` within
    ``CONNECT_TIMEOUT`` seconds (a refused port fails at once; a silent one after the timeout)."""
    match = re.match(r"^(?:tcp://)?\[?([^\]]+?)\]?:(\d+)$", address)
    if not match:
        return  # another protocol (tls://, ucx://): Dask checks it
    host, port = match.group(1), int(match.group(2))
    try:
        socket.create_connection((host, port), timeout=CONNECT_TIMEOUT).close()
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        raise ConnectionError(f"no Dask scheduler answers at {address} ({why}); start one with "
                              f"`dask scheduler` or leave out --scheduler for a local cluster") from None
    import asyncio
    import threading

    async def identity():
        from distributed.comm import connect

        comm = await asyncio.wait_for(connect(address, timeout=CONNECT_TIMEOUT), CONNECT_TIMEOUT)
        try:
            await asyncio.wait_for(comm.write({"op": "identity", "reply": True}), CONNECT_TIMEOUT)
            return await asyncio.wait_for(comm.read(), CONNECT_TIMEOUT)
        finally:
            comm.abort()

    found = []

    def probe():  # in a thread of its own: the caller may be inside an event loop (a notebook)
        try:
            found.append(asyncio.run(identity()))
        except Exception as exc:  # noqa: BLE001  (reported below as one line)
            found.append(exc)

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(3 * CONNECT_TIMEOUT)
    reply = found[0] if found else TimeoutError()
    if isinstance(reply, BaseException) or not isinstance(reply, dict):
        raise ConnectionError(f"{address} accepts connections but no Dask scheduler answered within "
                              f"{CONNECT_TIMEOUT:g} s") from None
    if reply.get("type") != "Scheduler":
        raise ConnectionError(f"{address} is a Dask {reply.get('type', 'server')}, not a scheduler") from None


def _default_workers() -> int:
    from dask.system import CPU_COUNT

    return int(CPU_COUNT)


@contextlib.contextmanager
def cluster(scheduler=None, workers: int | None = None, *, quiet: bool = False, log=print):
    """A ``distributed.Client`` on the engine that ``run_cells`` documents (``None`` for ``synchronous``).

    A ``LocalCluster`` started here is closed on exit (its worker processes end with it)."""
    if scheduler == SYNCHRONOUS:
        yield None
        return
    if workers is not None and (isinstance(workers, bool) or not isinstance(workers, int) or workers < 1):
        raise ValueError(f"workers must be an integer >= 1, got {workers!r}")
    from distributed import Client

    if scheduler is not None and not isinstance(scheduler, str):
        if not isinstance(scheduler, Client):
            raise ValueError(f"scheduler must be an address, a scheduler file, {SYNCHRONOUS!r} or a Client, "
                             f"got {scheduler!r}")
        yield scheduler  # the caller's connection: the caller closes it
        return
    if scheduler is None:
        import logging

        from distributed import LocalCluster

        n = workers or _default_workers()
        with LocalCluster(n_workers=n, threads_per_worker=1, processes=True, host="127.0.0.1",
                          dashboard_address="127.0.0.1:0", silence_logs=logging.ERROR if quiet else logging.WARNING) \
                as local, Client(local) as client:
            log(f"local Dask cluster: {n} worker processes at {local.scheduler_address}"
                + (f", dashboard {local.dashboard_link}" if _has_dashboard(local) else ""))
            yield client
        return
    address = _address(scheduler)
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise ConnectionError(f"cannot connect to the Dask scheduler at {address}: {exc}") from None
    with client:
        n = len(client.scheduler_info().get("workers", {}))
        log(f"Dask cluster at {address}: {n} workers now" + ("" if n else " (cells wait for `dask worker`)"))
        yield client


def _address(scheduler: str) -> str:
    """The address of a scheduler given by address or scheduler file, checked to answer (ConnectionError)."""
    if os.path.isfile(scheduler):
        try:
            address = json.loads(Path(scheduler).read_text())["address"]
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
            raise ValueError(f"{scheduler} is not a Dask scheduler file (JSON with an 'address')") from None
    else:
        address = scheduler
        if ":" not in address:
            raise ValueError(f"scheduler must be an address such as tcp://host:8786, a scheduler file or "
                             f"{SYNCHRONOUS!r}, got {scheduler!r}")
    _check_address(address)
    return address


def _has_dashboard(local) -> bool:
    try:
        return bool(local.dashboard_link) and "dashboard" in local.scheduler.services
    except Exception:  # noqa: BLE001  (no bokeh: no dashboard, nothing to say)
        return False


def run_cells(cells: Sequence[Cell], store: RunStore | None = None, *, scheduler=None, workers: int | None = None,
              progress: bool = True, log=print) -> dict[str, dict]:
    """Run every cell not yet in ``store`` on the engine; ``{key: result}`` for all cells (see the module)."""
    order, by_key = [], {}
    for cell in cells:
        if not isinstance(cell, Cell):
            raise ValueError(f"run_cells takes Cell objects, got {type(cell).__name__}")
        seen = by_key.get(cell.key)
        if seen is None:
            by_key[cell.key] = cell
            order.append(cell.key)
        elif (seen.fn, seen.kwargs) != (cell.fn, cell.kwargs):
            raise ValueError(f"two different cells share the key {cell.key}")
    from fvsym._validate import seconds_left, time_over

    deadline = time.time() + seconds_left() if time_over() is not None else None  # the command's time cap
    results, todo = {}, []
    for key in order:
        found = store.get(key) if store is not None else None
        if found is not None and "result" in found:
            results[key] = found["result"]
        else:
            todo.append(by_key[key])
    if todo:
        from .progress import progress_bar

        log(f"{len(order)} cells: {len(order) - len(todo)} finished before, {len(todo)} to run")
        with cluster(scheduler, workers, quiet=not progress, log=log) as client, \
                progress_bar(total=len(order), initial=len(order) - len(todo), desc="cells", unit="cell",
                             enabled=progress) as bar:
            def done(cell: Cell, ran: dict) -> None:
                if store is not None:
                    store.put(cell.key, {"name": cell.name, "config": cell.config if cell.config is not None
                                         else cell.kwargs, "result": ran["result"],
                                         "ran": {k: ran[k] for k in ("host", "pid", "seconds")}})
                results[cell.key] = ran["result"]
                bar.update(1)

            if client is None:
                for cell in todo:
                    done(cell, _guard(cell, lambda cell=cell: _call(cell.fn, cell.kwargs, deadline)))
            else:
                _run_on(client, todo, done, deadline)
    return {key: results[key] for key in order}


def _guard(cell: Cell, get):
    """``get()``, with a cell's ValueError turned into one line that names the cell."""
    try:
        return get()
    except ValueError as exc:
        raise ValueError(f"cell {cell.key}: {exc}") from None


def _run_on(client, todo: list[Cell], done, deadline: float | None = None) -> None:
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    futures = {client.submit(_call, cell.fn, cell.kwargs, deadline, key=f"fv-{cell.key}", pure=False): cell
               for cell in todo}
    try:
        for future in as_completed(futures):
            cell = futures[future]
            try:
                ran = _guard(cell, future.result)
            except KilledWorker:
                raise RuntimeError(f"cell {cell.key}: its worker died on every try (out of memory?); "
                                   "finished cells are kept") from None
            done(cell, ran)
            futures[future] = None
    finally:
        pending = [f for f, c in futures.items() if c is not None]
        if pending:
            client.cancel(pending)


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
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ValueError(f"{path} is not valid TOML ({exc})") from None
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
    from fvsym._validate import check_time

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
        _address(scheduler)  # a scheduler that does not answer: one line, before anything is written
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
    """``fv sweep`` (called by ``bridges.commands.register``)."""
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
