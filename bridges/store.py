"""Run folders: results keyed by a hash of their configuration, written atomically.

A run folder holds ``manifest.json`` (format and version), ``cells/<key>.json`` (one finished unit of
work each) and whatever the caller writes beside them. A cell is written with a temporary file and
``os.replace``, so an interrupted run leaves either the whole cell or nothing; re-running skips
finished cells.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
from pathlib import Path

FORMAT = "fv-run"
_UMASK = os.umask(0o022)
os.umask(_UMASK)
FORMAT_VERSION = 1


def config_key(obj) -> str:
    """Short stable hash of a JSON-able configuration (key order does not matter)."""
    text = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def atomic_write_bytes(path, write) -> Path:
    """Call ``write(file)`` on a temporary binary file in ``path``'s folder, then ``os.replace`` it onto
    ``path``: readers see the old file or the whole new one, never a half-written one."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def write_atomic(path, data: bytes | str) -> Path:
    """Write ``data`` (bytes, or text as UTF-8) to ``path`` atomically."""
    raw = data if isinstance(data, bytes) else data.encode()
    return atomic_write_bytes(path, lambda fh: fh.write(raw))


def write_json(path, obj) -> Path:
    return write_atomic(path, json.dumps(obj, indent=2, sort_keys=True, default=_jsonable) + "\n")


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


class RunStore:
    """A run folder with finished cells keyed by configuration hash.

    ``RunStore(folder, kind)`` creates the folder (or reopens one written by the same ``kind`` and
    format version) and refuses, with a one-line error, a folder written by another version or kind,
    or a non-empty folder that is not a run folder.
    """

    def __init__(self, folder, kind: str):
        self.folder = check_writable(folder)
        self.kind = kind
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

    def get(self, key: str):
        p = self.path(key)
        if not p.exists():
            return None
        try:
            return json.loads(p.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            return None  # a damaged cell is recomputed

    def put(self, key: str, value) -> Path:
        return write_json(self.path(key), value)

    def cell(self, name: str, config: dict, compute):
        """Return the stored result of ``(name, config)``, computing and storing it if absent.

        Returns ``(result, cached)``.
        """
        key = f"{name}-{config_key({'name': name, **config})}"
        found = self.get(key)
        if found is not None:
            return found["result"], True
        result = compute()
        self.put(key, {"name": name, "config": config, "result": result})
        return result, False
