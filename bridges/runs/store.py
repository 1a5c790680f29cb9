"""Run folders: results keyed by a hash of their configuration, written atomically.

A run folder holds ``manifest.json`` (format and version), ``cells/<key>.json`` (one finished unit of
work each) and whatever the caller writes beside them. A cell is written with a temporary file and
``os.replace``, so an interrupted run leaves either the whole cell or nothing; re-running skips
finished cells. Temporary files of a writer that died (``.NAME.PID.*.tmp``) are removed by the next
write of the same file.

Integrity: every cell carries its key and a SHA-256 checksum of its content and key, and is checked on
read for its shape and range: a cell that is not JSON, has the wrong shape (``{}``, a string or null where
a table is expected, a missing field: :func:`fields`, :func:`rows`, :func:`each` describe what a kind of
cell holds), a number that is not finite or a negative loss, value, standard error or count
(:func:`number_problem`), another key, no checksum or a wrong one (a hand-edited value) is reported in one
line on stderr and recomputed. A computed result that would fail those checks is refused, not stored.

Strict JSON: every JSON output (:func:`write_json`, cells) is written with ``allow_nan=False``, a number
that is not finite written as ``null``.

A folder is checked before anything is written in it: ``RunStore`` opens a folder that is new (absent or
empty but for hidden files) or holds a ``manifest.json`` of this kind and version, and refuses any other
without creating, truncating or locking anything there. A ``manifest.json`` that cannot be read (not JSON,
not an fv manifest) beside a ``cells/`` folder is set aside (``manifest.json.corrupt-<n>``) and rebuilt,
so the finished cells are kept (each carries its key and checksum).

One process at a time: ``RunStore`` takes an exclusive lock on ``DIR/.fv-lock`` (a name of this project, so
another program's ``.lock`` is never touched; released when the process ends); a second ``fv reproduce``,
``fv scaling``, ``fv sweep`` or ``fv compare --grid`` into the same folder stops with one line naming the
process that holds it.
"""
from __future__ import annotations

import errno
import hashlib
import json
import math
import os
import stat
import sys
import tempfile
import time
from pathlib import Path

from fvsym.errors import DamagedFile, InputError

FORMAT = "fv-run"
_UMASK = os.umask(0o022)
os.umask(_UMASK)
FORMAT_VERSION = 1


def config_key(obj) -> str:
    """Short stable hash of a JSON-able configuration (key order does not matter)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class _Recording:
    """A file wrapper that remembers the ``OSError`` its ``write`` raised (torch's writer turns it into a
    ``RuntimeError`` whose text no longer says that the disk is full)."""

    def __init__(self, fh):
        self._fh, self.error = fh, None

    def write(self, data):
        try:
            return self._fh.write(data)
        except OSError as exc:
            self.error = exc
            raise

    def __getattr__(self, name):
        return getattr(self._fh, name)


def _open_tmp(fd: int, path: Path):
    """The binary file object of a temporary file being written for ``path`` (tests replace it to make the
    disk full)."""
    return os.fdopen(fd, "wb")


def atomic_write_bytes(path, write, *, keep: Path | None = None) -> Path:
    """Call ``write(file)`` on a temporary binary file in ``path``'s folder, then ``os.replace`` it onto
    ``path``: readers see the old file or the whole new one, never a half-written one. ``keep``: move the
    old ``path`` there first (the previous checkpoint). A full disk (``ENOSPC``, ``EDQUOT``) is one
    ``OSError`` naming the file; the previous file is left as it was."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    clean_stale_tmp(path)
    tmp = None
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.", suffix=".tmp")
        with _open_tmp(fd, path) as raw:
            fh = _Recording(raw)
            try:
                write(fh)
            except Exception as exc:
                if isinstance(fh.error, OSError) and not isinstance(exc, OSError):
                    raise fh.error from None
                raise
            raw.flush()
            os.fsync(raw.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual permissions
        if keep is not None and path.exists():
            os.replace(path, keep)
        os.replace(tmp, path)
    except BaseException as exc:
        if tmp is not None and os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.errno in DISK_FULL:
            what = "no space left on the device" if exc.errno == errno.ENOSPC else "disk quota exceeded"
            raise OSError(exc.errno, f"{what} while writing {path.name}; the previous file is kept, "
                          "free some space and run again", str(path)) from None
        raise
    return path


def set_aside(path, label: str = "corrupt") -> Path:
    """Rename ``path`` to ``NAME.<label>-<n>`` (the first free ``n``) and return the new path: a damaged file
    is set aside, never deleted."""
    path = Path(path)
    n = 1
    while os.path.lexists(path.with_name(f"{path.name}.{label}-{n}")):
        n += 1
    target = path.with_name(f"{path.name}.{label}-{n}")
    os.replace(path, target)
    return target


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, ValueError):
        return True
    return True


def clean_stale_tmp(path, max_age: float = 3600.0) -> list[Path]:
    """Remove the temporary files ``.NAME.PID.*.tmp`` that a writer of ``path`` left when it was killed
    (its process is gone; files without a process id: older than ``max_age`` seconds). Returns them."""
    path = Path(path)
    removed = []
    try:
        candidates = list(path.parent.glob(f".{path.name}.*.tmp"))
    except OSError:
        return removed
    for tmp in candidates:
        middle = tmp.name[len(path.name) + 2:-len(".tmp")].split(".")[0]
        try:
            stale = not _alive(int(middle)) if middle.isdigit() else time.time() - tmp.stat().st_mtime > max_age
            if stale:
                tmp.unlink()
                removed.append(tmp)
        except OSError:
            continue
    return removed


def write_atomic(path, data: bytes | str) -> Path:
    """Write ``data`` (bytes, or text as UTF-8) to ``path`` atomically."""
    raw = data if isinstance(data, bytes) else data.encode()
    return atomic_write_bytes(path, lambda fh: fh.write(raw))


def read_json(path, default=None):
    """The JSON document at ``path``, or ``default`` when there is none yet (a study's results before its first
    cell). A damaged file raises: a study must not start again over results it cannot read."""
    if not os.path.exists(path):
        return default
    with open(path) as f:
        return json.load(f)


def update_json(path, change, default=None, *, indent: int = 1, sort_keys: bool = False) -> dict:
    """Read the JSON document at ``path`` (``default``, else ``{}``, when there is none), apply ``change`` to it
    (a function that edits it in place), and write it back atomically, all under an exclusive lock on
    ``path + ".lock"``: several processes of one study (one per core) may finish pieces at the same time, and
    none may lose another's. Returns the document as written."""
    import copy
    import fcntl

    with open(f"{path}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        data = read_json(path, None)
        if data is None:
            data = {} if default is None else copy.deepcopy(default)
        change(data)
        write_atomic(path, json.dumps(data, indent=indent, sort_keys=sort_keys, allow_nan=False) + "\n")
    return data


def write_json(path, obj) -> Path:
    """Write ``obj`` as strict JSON (numbers that are not finite become ``null``), atomically."""
    return write_atomic(path, json.dumps(_normal(obj), indent=2, sort_keys=True, allow_nan=False) + "\n")


def csv_text(rows: list[dict], columns=None, *, lineterminator: str = "\r\n") -> str:
    """``rows`` as CSV text with a header: the given ``columns`` (other keys left out), or every key whose
    values are scalars, sorted; ``""`` for no rows without columns."""
    import csv
    import io

    if columns is None:
        if not rows:
            return ""
        columns = sorted({k for r in rows for k in r if not isinstance(r[k], (list, dict))})
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(columns), extrasaction="ignore", lineterminator=lineterminator)
    writer.writeheader()
    writer.writerows(rows)
    return buf.getvalue()


def _jsonable(x):
    try:
        import numpy as np

        if isinstance(x, np.generic):
            return x.item()
        if isinstance(x, np.ndarray):
            return x.tolist()
    except ImportError:  # pragma: no cover
        pass
    return str(x)


def check_writable(folder) -> Path:
    """Create ``folder`` if needed and check that files can be written in it (one-line error if not)."""
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise NotADirectoryError(f"output folder {folder} exists and is not a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-test.")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise PermissionError(f"output folder {folder} is not writable ({exc.strerror})") from None
    return folder


def _normal(value):
    """``value`` as it reads back from strict JSON (numpy numbers become numbers, tuples lists, numbers that
    are not finite ``None``)."""
    return json.loads(json.dumps(value, default=_jsonable), parse_constant=lambda _: None)


# --- what a result may hold ------------------------------------------------------------------------------
NONNEGATIVE = frozenset({"loss", "stderr", "n", "n_eval", "steps", "tau", "seconds", "wall_s", "wall_seconds",
                         "train_seconds", "steps_per_s", "samples", "accuracy", "chance", "n_test", "budget", "depth"})
SIGNED = frozenset({"decoder_gap", "effect", "change", "history", "decay"})  # differences: any sign


def number_problem(value, where: str = "result") -> str | None:
    """The first number in ``value`` (nested dicts and lists) that cannot be a result, as words, or None: a
    number that is not finite, or a negative one under a key of :data:`NONNEGATIVE` (and ``value``, a loss,
    unless it is a difference under a key of :data:`SIGNED`)."""
    stack = [(value, where, "free")]
    while stack:
        obj, path, mode = stack.pop()
        if isinstance(obj, bool) or obj is None or isinstance(obj, str):
            continue
        if isinstance(obj, (int, float)):
            if isinstance(obj, float) and not math.isfinite(obj):
                return f"has {obj} at {path}"
            if mode == "nonneg" and obj < 0:
                return f"has a negative number ({abridge(obj)}) at {path}"
        elif isinstance(obj, dict):
            for k, v in obj.items():
                child = ("signed" if k in SIGNED else "nonneg" if k in NONNEGATIVE
                         else "nonneg" if k == "value" and mode != "signed" else mode)
                stack.append((v, f"{path}.{abridge(k, 40)}", child))
        elif isinstance(obj, (list, tuple)):
            stack.extend((v, f"{path}[{i}]", mode) for i, v in enumerate(obj))
        else:
            return f"has a {type(obj).__name__} at {path}"
    return None


def _kind(obj) -> str:
    return {dict: "an object", list: "a list", str: "a string", type(None): "null", bool: "a boolean"}.get(
        type(obj), "a number" if isinstance(obj, (int, float)) else type(obj).__name__)


def fields(*names: str, numbers=(), nested: dict | None = None, optional: dict | None = None):
    """The shape of a result that is an object with the fields ``names``; ``numbers`` among them must be
    numbers; ``nested`` (and ``optional``, where present) map fields to the shapes of their values."""
    nested, optional = dict(nested or {}), dict(optional or {})

    def check(obj, where="result"):
        if not isinstance(obj, dict):
            return f"has {_kind(obj)} where an object is expected at {where}"
        missing = [n for n in (*names, *nested) if n not in obj]
        if missing:
            return f"lacks {where}.{missing[0]}"
        for n in numbers:
            if isinstance(obj[n], bool) or not isinstance(obj[n], (int, float)):
                return f"has {_kind(obj[n])} where a number is expected at {where}.{n}"
        for n, shape in [*nested.items(), *((n, s) for n, s in optional.items() if obj.get(n) is not None)]:
            problem = shape(obj[n], f"{where}.{n}")
            if problem:
                return problem
        return None

    return check


def rows(*names: str, numbers=(), empty: bool = False):
    """The shape of a list of objects with the fields ``names`` (a table of rows), non-empty unless ``empty``."""
    row = fields(*names, numbers=numbers)

    def check(obj, where="result"):
        if not isinstance(obj, list) or not (obj or empty):
            return f"has {'an empty list' if obj == [] else _kind(obj)} where a list of rows is expected at {where}"
        for i, r in enumerate(obj):
            problem = row(r, f"{where}[{i}]")
            if problem:
                return problem
        return None

    return check


def each(shape):
    """The shape of a non-empty object whose every value has ``shape`` (e.g. rows by budget)."""
    def check(obj, where="result"):
        if not isinstance(obj, dict) or not obj:
            return f"has {'an empty object' if obj == {} else _kind(obj)} where an object is expected at {where}"
        for k, v in obj.items():
            problem = shape(v, f"{where}.{abridge(k, 40)}")
            if problem:
                return problem
        return None

    return check


ESTIMATE = fields("value", "stderr", "n", numbers=("value",))  # an Estimate's to_dict
# the cells the studies share (fv reproduce, fv scaling, fv compare --grid)
THEORY_ROWS = rows("name", "value", numbers=("value",))  # fvnum.theory rows, as bridges.analysis.compare lays them out
KEYED_ROWS = each(rows("name", "value", numbers=("value",), empty=True))  # {str(budget): keyed rows}
AUDIT = fields("loss", "bayes_on_readings", "decoder_gap", "samples", "decoder",  # bridges.analysis.compare.audit_dict
               nested={"loss": ESTIMATE, "bayes_on_readings": ESTIMATE, "decoder_gap": ESTIMATE})


def result_problem(result, shape=None) -> str | None:
    """Why ``result`` (as read back from JSON) cannot be a stored result, or None: not an object or a list
    (or, without a ``shape``, an empty one), not of ``shape`` (:func:`fields`, :func:`rows`, :func:`each`), or
    a number out of range (:func:`number_problem`)."""
    if not isinstance(result, (dict, list)) or (shape is None and not result):
        return f"has {'an empty ' + ('object' if result == {} else 'list') if result in ({}, []) else _kind(result)} " \
               "as its result"
    if shape is not None:
        problem = shape(result, "result")
        if problem:
            return problem
    return number_problem(result)


def abridge(value, limit: int = 80) -> str:
    """``value`` (a string as it is, anything else by its ``repr``) cut to about ``limit`` characters, saying
    how long it was: what an error line shows of a value, so that a 10 MB input gives a short line."""
    text = value if isinstance(value, str) else repr(value)
    if len(text) <= limit:
        return text
    head = max(8, limit - 30)
    return f"{text[:head]}... ({len(text):,} characters)"


def short_repr(value, limit: int = 80) -> str:
    """``repr(value)`` abridged (:func:`abridge`)."""
    return abridge(repr(value), limit)


def checksum(key: str, content) -> str:
    """SHA-256 of a cell's key and content (canonical JSON, key order ignored)."""
    text = json.dumps({"key": key, "content": content}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def with_checksum(record: dict, name: str = "results") -> dict:
    """``record`` with ``"checksum"``: the SHA-256 of its content (as JSON reads it back) under ``name``;
    :func:`verify_checksum` checks it."""
    content = _normal({k: v for k, v in record.items() if k != "checksum"})
    return {**content, "checksum": checksum(name, content)}


def verify_checksum(record, name: str = "results") -> bool:
    return (isinstance(record, dict) and "checksum" in record
            and record["checksum"] == checksum(name, {k: v for k, v in record.items() if k != "checksum"}))


_HELD: dict[str, int] = {}  # folders this process has locked -> the lock file's descriptor
LOCK = ".fv-lock"  # the lock file of a run folder (a name of this project: another program's .lock is never touched)
MAX_MANIFEST_BYTES = 1 << 20  # a manifest is a few lines; a larger file is not one (sized before it is read)


def _lock(folder: Path, kind: str) -> None:
    """Take ``folder/.fv-lock`` (never through a symbolic link: a link there is refused in one line)."""
    import fcntl

    where = str(folder.resolve())
    if where in _HELD:
        return
    path = folder / LOCK
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666 & ~_UMASK)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise DamagedFile(f"{path} is a symbolic link; fv does not follow it (remove it, or choose "
                              "another output folder)", path=path) from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise DamagedFile(f"{path} is not a regular file; remove it, or choose another output folder", path=path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            holder = os.read(fd, 200).decode(errors="replace").split()
        finally:
            os.close(fd)
        who = (f"process {abridge(holder[0], 20)}" + (f" (fv {abridge(holder[1], 20)})" if len(holder) > 1 else "")
               if holder else "another process")
        raise InputError(f"{folder} is in use by {who}; wait for it to finish or choose another output folder") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()} {kind}\n".encode())
    _HELD[where] = fd


def _read_manifest(path: Path):
    """The manifest's object, or a string saying why it is not one (sized before it is read)."""
    try:
        size = path.stat().st_size
        if not path.is_file():
            return "is not a file"
        if size > MAX_MANIFEST_BYTES:
            return f"is {size:,} bytes, not a manifest"
        found = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError):
        return "is not valid JSON"
    except OSError as exc:
        return f"cannot be read ({exc.strerror or type(exc).__name__})"
    if not isinstance(found, dict):
        return f"holds {_kind(found)}, not a manifest"
    if found.get("format") != FORMAT or not {"kind", "version"} <= set(found):
        return f"is not an fv run manifest (format {FORMAT!r} with kind and version)"
    return found


class RunStore:
    """A run folder with finished cells keyed by configuration hash.

    ``RunStore(folder, kind)`` creates the folder (or reopens one written by the same ``kind`` and
    format version) and refuses, with a one-line error and before writing anything there, a folder written
    by another version or kind, or a non-empty folder that is not a run folder. ``create=False``: open an
    existing run folder only (``fv scaling --report-only``), refusing a new one without creating it. A
    damaged ``manifest.json`` beside ``cells/`` is set aside and rebuilt (one line through ``log``).
    """

    def __init__(self, folder, kind: str, *, log=None, create: bool = True):
        folder = Path(folder)
        self.kind = kind
        self.log = log if log is not None else (lambda message: print(message, file=sys.stderr))
        self._reported: set[str] = set()
        state = self._state(folder)  # checked before anything is created, truncated or locked
        if state == "new" and not create:
            raise InputError(f"{folder} holds no fv {kind} run yet")
        self.folder = check_writable(folder)
        _lock(self.folder, kind)
        state = self._state(self.folder)  # again, now that no other fv process can change it
        manifest = self.folder / "manifest.json"
        expected = {"format": FORMAT, "version": FORMAT_VERSION, "kind": kind}
        if state != "ours":
            if state != "new":
                aside = set_aside(manifest)
                self.log(f"{manifest} {state}: set aside as {aside.name} and rebuilt; the finished cells in "
                         f"{self.folder / 'cells'} are kept")
            write_json(manifest, expected)
        (self.folder / "cells").mkdir(exist_ok=True)

    def _state(self, folder: Path) -> str:
        """``ours`` (a run folder of this kind), ``new`` (absent, or empty but for hidden files), or why its
        damaged manifest must be rebuilt (a ``cells/`` folder beside it); a one-line ValueError otherwise."""
        if not folder.exists():
            return "new" if not folder.is_symlink() else self._refuse_new(folder)
        if not folder.is_dir():
            raise NotADirectoryError(f"output folder {folder} exists and is not a folder")
        manifest = folder / "manifest.json"
        if manifest.exists() or manifest.is_symlink():
            found = _read_manifest(manifest)
            if isinstance(found, str):
                if (folder / "cells").is_dir() and not manifest.is_symlink():
                    return found
                raise DamagedFile(f"{manifest} {found} and {folder} has no cells/ folder: it is not a run folder; "
                                  "choose a new output folder", path=manifest)
            expected = {"format": FORMAT, "version": FORMAT_VERSION, "kind": self.kind}
            if {k: found.get(k) for k in expected} != expected:
                raise DamagedFile(
                    f"{folder} holds a run of another kind or version "
                    f"({abridge(found.get('kind'), 30)}, format {abridge(found.get('version'), 30)}; this is "
                    f"{self.kind}, format {FORMAT_VERSION}); choose a new output folder", path=manifest)
            return "ours"
        try:
            visible = [p for p in folder.iterdir() if not p.name.startswith(".")]
        except OSError as exc:
            raise PermissionError(f"output folder {folder} cannot be read ({exc.strerror})") from None
        if visible:
            raise InputError(f"{folder} is not empty and is not a run folder; choose a new output folder")
        return "new"

    @staticmethod
    def _refuse_new(folder: Path) -> str:
        raise InputError(f"output folder {folder} is a dangling symbolic link; choose another output folder")

    def path(self, key: str) -> Path:
        return self.folder / "cells" / f"{key}.json"

    def get(self, key: str, required=("result",), shape=None):
        """The stored cell ``key`` (a dict), or None when it is absent, or damaged: not JSON, not an object
        with the ``required`` fields, another key, no checksum or a wrong one, a ``result`` that is not of
        ``shape`` or holds a number out of range (:func:`result_problem`). A damaged cell is reported in one
        line (``log``) and will be recomputed."""
        p = self.path(key)
        if not p.exists() and not p.is_symlink():
            return None
        try:
            if not p.is_file():  # a folder or a link to nothing: set aside, so that the cell can be written again
                return self._damaged(key, f"is not a file (set aside as {set_aside(p).name})")
            found = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError, ValueError):
            return self._damaged(key, "is not valid JSON")
        except OSError as exc:
            return self._damaged(key, f"cannot be read ({exc.strerror})")
        if not isinstance(found, dict):
            return self._damaged(key, f"is {_kind(found)}, not a cell")
        missing = [f for f in (*required, "key", "checksum") if f not in found]
        if missing:
            return self._damaged(key, f"lacks {', '.join(missing)}")
        if found["key"] != key:
            return self._damaged(key, f"is the cell of key {abridge(found['key'], 60)}")
        content = {k: v for k, v in found.items() if k not in ("key", "checksum")}
        if found["checksum"] != checksum(key, content):
            return self._damaged(key, "fails its checksum (edited or corrupted)")
        if "result" in required:
            problem = result_problem(found["result"], shape)
            if problem:
                return self._damaged(key, problem)
        return content

    def _damaged(self, key: str, why: str):
        if key not in self._reported:
            self._reported.add(key)
            self.log(f"cell {self.path(key)} {why}; recomputing it")
        return None

    def put(self, key: str, value: dict, shape=None) -> Path:
        """Store the cell ``key`` (a dict) with its key and checksum; a ``result`` that :meth:`get` would
        refuse (:func:`result_problem`) is a one-line ValueError and is not stored."""
        if not isinstance(value, dict):
            raise InputError(f"a cell is a JSON object, got {type(value).__name__}")
        content = _normal(value)
        if "result" in content:
            problem = result_problem(content["result"], shape)
            if problem:
                raise InputError(f"cell {key}: the computed result {problem} (numbers that are not finite are "
                                 "stored as null); it is not stored")
        return write_json(self.path(key), {**content, "key": key, "checksum": checksum(key, content)})

    def cell(self, name: str, config: dict, compute, shape=None):
        """Return the stored result of ``(name, config)``, computing and storing it if absent or damaged
        (``shape``: what the result must hold, see :meth:`get`).

        Returns ``(result, cached)``; a computed result comes back as it reads from the store.
        """
        key = f"{name}-{config_key({'name': name, **config})}"
        found = self.get(key, shape=shape)
        if found is not None:
            return found["result"], True
        from fvsym.guards.limits import check_deadline

        check_deadline(f"fv {self.kind} stopped before cell {key}")  # past fv --max-seconds: stop between cells
        result = compute()
        self.put(key, {"name": name, "config": config, "result": result}, shape=shape)
        return _normal(result), False
