"""The engine that runs keyed cells on ``dask.distributed`` (or in this process), for any caller:
``fv sweep`` (``bridges.studies.sweep``), ``fv reproduce --full``, ``fv scaling``. It knows nothing of the command
line: a cell is a function and its keyword arguments.

::

    run_cells(cells: Sequence[Cell], store: RunStore | None = None, *, scheduler=None, workers=None,
              progress=True, log=print) -> dict[str, dict]

- ``Cell(key, fn, kwargs, name="cell", config=None)``: one unit of work, ``fn(**kwargs)`` returning a
  JSON-able dict. ``fn`` should be an importable top-level function (workers of a real cluster import it
  by name: the package must be installed there, at the same version); ``kwargs`` must be JSON-able.
  ``key`` names the stored result (letters, digits, ``.``, ``_``, ``-``); build it with
  ``Cell.keyed(name, config, fn, kwargs)``, which hashes ``config`` exactly as ``RunStore.cell`` does.
  Seeds belong in ``kwargs``: a cell gives the same numbers in-process, on a local or a remote cluster.
- ``store``: a ``bridges.runs.store.RunStore``; cells already there are not run again, each finished cell is
  written there (by this process only, atomically) as soon as it arrives. ``None``: nothing is kept.
- The command's time cap (``fv --max-seconds``): every cell runs under it (the time left when it starts); a cell
  that stops at it (training keeps its checkpoint), is not started because it has passed, or refuses a piece
  of its work for the time it has left raises :class:`TimeCapStop` (a one-line ``ResourceRefused``), once the
  cells still running, which share the deadline, have come back and every finished cell is stored: calling the
  run again resumes it.
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
import json
import os
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from fvsym.errors import DamagedFile, InputError, ResourceRefused, reworded
from fvsym.guards.limits import TIME_CAP_NOTE

from bridges.runs.store import RunStore, config_key

__all__ = ["CONNECT_TIMEOUT", "SYNCHRONOUS", "Cell", "TimeCapStop", "cluster", "run_cells", "scheduler_address"]

SYNCHRONOUS = "synchronous"
CONNECT_TIMEOUT = 5.0  # seconds to reach a scheduler before giving up
_KEY = re.compile(r"^[A-Za-z0-9._-]+$")


class TimeCapStop(ResourceRefused):
    """A cell stopped at the command's time cap, was not started because the cap had passed, or refused a piece of
    its work priced over the time it had left under the cap; the finished cells are stored and a training cell
    keeps its checkpoint, so running the cells again (with more time) resumes them."""


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
    shape: Callable | None = field(default=None, compare=False, repr=False)  # what its result holds (store.fields)

    def __post_init__(self):
        if not isinstance(self.key, str) or not _KEY.match(self.key):
            raise InputError(f"cell key must be letters, digits, '.', '_' or '-', got {self.key!r}")
        if not callable(self.fn):
            raise InputError(f"cell {self.key}: fn must be a function, got {self.fn!r}")
        if not isinstance(self.kwargs, dict):
            raise InputError(f"cell {self.key}: kwargs must be a dict, got {type(self.kwargs).__name__}")
        try:
            json.dumps(self.kwargs, sort_keys=True)
        except (TypeError, ValueError) as exc:
            raise reworded(exc, f"cell {self.key}: kwargs must be JSON-able ({exc})") from None

    @classmethod
    def keyed(cls, name: str, config: dict, fn: Callable, kwargs: dict | None = None, shape=None) -> "Cell":
        """The cell whose key is ``name-<hash of config>``, the key ``RunStore.cell(name, config, ...)``
        uses; ``kwargs`` default to ``config``."""
        key = f"{name}-{config_key({'name': name, **config})}"
        return cls(key, fn, dict(config if kwargs is None else kwargs), name, config, shape)


# errors a cell reports as one line (the command's own errors): returned by the worker, not raised there, so
# that no worker log prints a traceback where the command prints its one line
_REPORTED = (ValueError, OSError, MemoryError, OverflowError, RecursionError)


def _call(fn: Callable, kwargs: dict, deadline: float | None = None) -> dict:
    """Run one cell (on a worker): its result made plain strict JSON (``store._normal``), and where and how
    long it ran; or ``{"error": ...}``, the one-line error the cell raised (:func:`_raise_reported` raises it
    again in the caller). ``deadline`` (``time.time()`` seconds): the command's time cap, which training
    inside the cell watches."""
    from fvsym.guards.limits import time_limit

    from bridges.runs.store import _normal

    start = time.perf_counter()
    try:
        if deadline is None:
            result = fn(**kwargs)
        else:
            left = deadline - time.time()
            if left <= 0:
                raise ResourceRefused(f"the time cap ({TIME_CAP_NOTE}) passed before this cell started; "
                                      "finished cells are kept: run again to resume")
            with time_limit(left):
                result = fn(**kwargs)
        result = _normal(result)
    except _REPORTED as exc:
        # under the command's cap, a time refusal is the cap's: training stopped at it, the cell never started, or
        # a piece of the cell (an audit after training) was priced over the time the cell had left
        at_cap = isinstance(exc, ResourceRefused) and getattr(exc, "limit", None) == "time" and deadline is not None
        return {"error": {"type": type(exc).__name__, "os": isinstance(exc, OSError), "time_cap": at_cap,
                          "value": isinstance(exc, ValueError), "errno": getattr(exc, "errno", None),
                          "strerror": getattr(exc, "strerror", None), "filename": _text(getattr(exc, "filename", None)),
                          "message": str(exc)}}
    return {"result": result, "host": socket.gethostname(), "pid": os.getpid(),
            "seconds": round(time.perf_counter() - start, 3)}


def _text(x):
    return None if x is None else str(x)


def _raise_reported(ran: dict) -> dict:
    """``ran``, or the error its cell reported, raised again here (an ``OSError`` with its errno and file, a
    ``ValueError``, or the error of its type)."""
    error = ran.get("error")
    if error is None:
        return ran
    if error.get("time_cap"):
        raise TimeCapStop(error["message"])
    if error["os"]:
        if error["errno"] is not None and error["strerror"] is not None:
            raise OSError(error["errno"], error["strerror"], *([error["filename"]] if error["filename"] else []))
        raise OSError(error["message"])
    if error["value"]:  # a typed error comes back as its class; a plain ValueError as an InputError
        typed = {"ResourceRefused": ResourceRefused, "DamagedFile": DamagedFile, "DamagedResult": DamagedFile,
                 "DamagedCheckpoint": DamagedFile}
        raise typed.get(error["type"], InputError)(error["message"])
    kind = {"MemoryError": MemoryError, "OverflowError": OverflowError, "RecursionError": RecursionError}
    raise kind.get(error["type"], RuntimeError)(error["message"])


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
        raise InputError(f"workers must be an integer >= 1, got {workers!r}")
    from distributed import Client

    if scheduler is not None and not isinstance(scheduler, str):
        if not isinstance(scheduler, Client):
            raise InputError(f"scheduler must be an address, a scheduler file, {SYNCHRONOUS!r} or a Client, "
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
    address = scheduler_address(scheduler)
    try:
        client = Client(address, timeout=CONNECT_TIMEOUT)
    except (OSError, TimeoutError) as exc:
        raise ConnectionError(f"cannot connect to the Dask scheduler at {address}: {exc}") from None
    with client:
        n = len(client.scheduler_info().get("workers", {}))
        log(f"Dask cluster at {address}: {n} workers now" + ("" if n else " (cells wait for `dask worker`)"))
        yield client


def scheduler_address(scheduler: str) -> str:
    """The address of a scheduler given by address or scheduler file, checked to answer (ConnectionError)."""
    if os.path.isfile(scheduler):
        try:
            address = json.loads(Path(scheduler).read_text())["address"]
        except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError):
            raise InputError(f"{scheduler} is not a Dask scheduler file (JSON with an 'address')") from None
    else:
        address = scheduler
        if ":" not in address:
            raise InputError(f"scheduler must be an address such as tcp://host:8786, a scheduler file or "
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
            raise InputError(f"run_cells takes Cell objects, got {type(cell).__name__}")
        seen = by_key.get(cell.key)
        if seen is None:
            by_key[cell.key] = cell
            order.append(cell.key)
        elif (seen.fn, seen.kwargs) != (cell.fn, cell.kwargs):
            raise InputError(f"two different cells share the key {cell.key}")
    from fvsym.guards.limits import seconds_left, time_over

    deadline = time.time() + seconds_left() if time_over() is not None else None  # the command's time cap
    results, todo = {}, []
    for key in order:
        found = store.get(key, shape=by_key[key].shape) if store is not None else None
        if found is not None and "result" in found:
            results[key] = found["result"]
        else:
            todo.append(by_key[key])
    if todo:
        from bridges.progress import progress_bar

        log(f"{len(order)} cells: {len(order) - len(todo)} finished before, {len(todo)} to run")
        with cluster(scheduler, workers, quiet=not progress, log=log) as client, \
                progress_bar(total=len(order), initial=len(order) - len(todo), desc="cells", unit="cell",
                             enabled=progress) as bar:
            def done(cell: Cell, ran: dict) -> None:
                if store is not None:
                    _guard(cell, lambda: store.put(
                        cell.key, {"name": cell.name, "config": cell.config if cell.config is not None
                                   else cell.kwargs, "result": ran["result"],
                                   "ran": {k: ran[k] for k in ("host", "pid", "seconds")}}, shape=cell.shape))
                results[cell.key] = ran["result"]
                bar.update(1)

            if client is None:
                for cell in todo:
                    done(cell, _guard(cell, lambda cell=cell: _raise_reported(_call(cell.fn, cell.kwargs, deadline))))
            else:
                _run_on(client, todo, done, deadline)
    return {key: results[key] for key in order}


def _guard(cell: Cell, get):
    """``get()``, with a cell's ValueError turned into one line that names the cell (a :class:`TimeCapStop`
    stays one)."""
    try:
        return get()
    except ValueError as exc:
        text = str(exc)
        kind = TimeCapStop if isinstance(exc, TimeCapStop) else InputError
        raise kind(text if text.startswith(f"cell {cell.key}: ") else f"cell {cell.key}: {text}") from None


def _run_on(client, todo: list[Cell], done, deadline: float | None = None) -> None:
    from distributed import as_completed
    from distributed.scheduler import KilledWorker

    futures = {client.submit(_call, cell.fn, cell.kwargs, deadline, key=f"fv-{cell.key}", pure=False): cell
               for cell in todo}
    stopped = None  # the first cell stopped by the time cap: raised once the others (same deadline) are back
    try:
        for future in as_completed(futures):
            cell = futures[future]
            try:
                ran = _guard(cell, lambda: _raise_reported(future.result()))
            except KilledWorker:
                raise RuntimeError(f"cell {cell.key}: its worker died on every try (out of memory?); "
                                   "finished cells are kept") from None
            except TimeCapStop as exc:
                stopped = stopped or exc
                futures[future] = None
                continue
            done(cell, ran)
            futures[future] = None
        if stopped is not None:
            raise stopped
    finally:
        pending = [f for f, c in futures.items() if c is not None]
        if pending:
            client.cancel(pending)
