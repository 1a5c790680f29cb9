"""Run folders: results keyed by a hash of their configuration, written atomically.

A run folder holds ``manifest.json`` (format and version), ``cells/<key>.json`` (one finished unit of
work each) and whatever the caller writes beside them. A cell is written with a temporary file and
``os.replace``, so an interrupted run leaves either the whole cell or nothing; re-running skips
finished cells. Temporary files of a writer that died (``.NAME.PID.*.tmp``) are removed by the next
write of the same file.

Integrity: every cell carries its key and a SHA-256 checksum of its content and key. A cell that is not
JSON, has the wrong shape (e.g. ``{}``), another key, no checksum or a wrong one (a hand-edited value)
is reported in one line on stderr and recomputed.

One process at a time: ``RunStore`` takes an exclusive lock on ``DIR/.lock`` (released when the process
ends); a second ``fv reproduce``, ``fv scaling``, ``fv sweep`` or ``fv compare --grid`` into the same
folder stops with one line naming the process that holds it.
"""
from __future__ import annotations

import errno
import hashlib
import json
import os
import stat
import sys
import tempfile
import time
from pathlib import Path

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


def write_json(path, obj) -> Path:
    return write_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=_jsonable) + "\n")


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
    """``value`` as it reads back from JSON (numpy numbers become numbers, tuples lists)."""
    return json.loads(json.dumps(value, default=_jsonable))


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


def _lock(folder: Path, kind: str) -> None:
    """Take ``folder/.lock`` (never through a symbolic link: a link there is refused in one line)."""
    import fcntl

    where = str(folder.resolve())
    if where in _HELD:
        return
    path = folder / ".lock"
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o666 & ~_UMASK)
    except OSError as exc:
        if exc.errno == errno.ELOOP or path.is_symlink():
            raise ValueError(f"{path} is a symbolic link; fv does not follow it (remove it, or choose "
                             "another output folder)") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise ValueError(f"{path} is not a regular file; remove it, or choose another output folder")
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        try:
            holder = os.read(fd, 200).decode(errors="replace").split()
        finally:
            os.close(fd)
        who = f"process {holder[0]}" + (f" (fv {holder[1]})" if len(holder) > 1 else "") if holder else "another process"
        raise ValueError(f"{folder} is in use by {who}; wait for it to finish or choose another output folder") from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()} {kind}\n".encode())
    _HELD[where] = fd


class RunStore:
    """A run folder with finished cells keyed by configuration hash.

    ``RunStore(folder, kind)`` creates the folder (or reopens one written by the same ``kind`` and
    format version) and refuses, with a one-line error, a folder written by another version or kind,
    or a non-empty folder that is not a run folder.
    """

    def __init__(self, folder, kind: str, *, log=None):
        self.folder = check_writable(folder)
        self.kind = kind
        self.log = log if log is not None else (lambda message: print(message, file=sys.stderr))
        self._reported: set[str] = set()
        _lock(self.folder, kind)
        manifest = self.folder / "manifest.json"
        expected = {"format": FORMAT, "version": FORMAT_VERSION, "kind": kind}
        if manifest.exists():
            try:
                found = json.loads(manifest.read_text())
            except (json.JSONDecodeError, UnicodeDecodeError):
                raise ValueError(f"{manifest} is corrupt; choose a new output folder") from None
            if {k: found.get(k) for k in expected} != expected:
                raise ValueError(
                    f"{self.folder} holds a run of another kind or version "
                    f"({found.get('kind')}, format {found.get('version')}; this is {kind}, format "
                    f"{FORMAT_VERSION}); choose a new output folder"
                )
        else:
            visible = [p for p in self.folder.iterdir() if not p.name.startswith(".")]
            if visible:
                raise ValueError(f"{self.folder} is not empty and is not a run folder; choose a new output folder")
            write_json(manifest, expected)
        (self.folder / "cells").mkdir(exist_ok=True)

    def path(self, key: str) -> Path:
        return self.folder / "cells" / f"{key}.json"

    def get(self, key: str, required=("result",)):
        """The stored cell ``key`` (a dict), or None when it is absent, or damaged: not JSON, not an object
        with the ``required`` fields, another key, no checksum or a wrong one. A damaged cell is reported
        in one line (``log``) and will be recomputed."""
        p = self.path(key)
        if not p.exists():
            return None
        try:
            found = json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return self._damaged(key, "is not valid JSON")
        except OSError as exc:
            return self._damaged(key, f"cannot be read ({exc.strerror})")
        if not isinstance(found, dict):
            return self._damaged(key, f"is a JSON {type(found).__name__}, not a cell")
        missing = [f for f in (*required, "key", "checksum") if f not in found]
        if missing:
            return self._damaged(key, f"lacks {', '.join(missing)}")
        if found["key"] != key:
            return self._damaged(key, f"is the cell of key {found['key']!r}")
        content = {k: v for k, v in found.items() if k not in ("key", "checksum")}
        if found["checksum"] != checksum(key, content):
            return self._damaged(key, "fails its checksum (edited or corrupted)")
        return content

    def _damaged(self, key: str, why: str):
        if key not in self._reported:
            self._reported.add(key)
            self.log(f"cell {self.path(key)} {why}; recomputing it")
        return None

    def put(self, key: str, value: dict) -> Path:
        """Store the cell ``key`` (a dict) with its key and checksum."""
        if not isinstance(value, dict):
            raise ValueError(f"a cell is a JSON object, got {type(value).__name__}")
        content = _normal(value)
        return write_json(self.path(key), {**content, "key": key, "checksum": checksum(key, content)})

    def cell(self, name: str, config: dict, compute):
        """Return the stored result of ``(name, config)``, computing and storing it if absent.

        Returns ``(result, cached)``.
        """
        key = f"{name}-{config_key({'name': name, **config})}"
        found = self.get(key)
        if found is not None:
            return found["result"], True
        from fvnum.resources import check_deadline

        check_deadline(f"fv {self.kind} stopped before cell {key}")  # past fv --max-seconds: stop between cells
        result = compute()
        self.put(key, {"name": name, "config": config, "result": result})
        return result, False
