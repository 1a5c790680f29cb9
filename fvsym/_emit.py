"""The one result emitter of every ``fv`` command: ``--format text|json``.

A command builds its result as a JSON-able record (a dict) and the lines of its text form, and hands
both to :func:`emit`; ``--format json`` prints the record (strict JSON: NaN and infinities become
``null``; numpy scalars and arrays become numbers and lists; anything else its ``str``), ``--format
text`` the lines. Commands with more views (``fv derive``: ``latex``) add them to ``formats``.
"""
from __future__ import annotations

import json
import math
import sys

FORMATS = ("text", "json")


def add_format_argument(parser, formats=FORMATS, default: str = "text") -> None:
    parser.add_argument("--format", choices=formats, default=default,
                        help=f"output: {' | '.join(formats)} (default {default})")


def jsonable(x):
    """``x`` with every value strict JSON can hold (recursively)."""
    if isinstance(x, dict):
        return {str(k): jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [jsonable(v) for v in x]
    if isinstance(x, bool) or x is None or isinstance(x, (int, str)):
        return x
    if isinstance(x, float):
        return x if math.isfinite(x) else None
    if hasattr(x, "to_dict"):
        return jsonable(x.to_dict())
    if hasattr(x, "tolist"):  # numpy scalars and arrays
        return jsonable(x.tolist())
    return str(x)


def to_json(record) -> str:
    return json.dumps(jsonable(record), indent=2, allow_nan=False)


def emit(record: dict, fmt: str, text=None, *, file=None) -> None:
    """Print ``record`` as JSON (``fmt == "json"``) or ``text`` (a string or lines; default: ``key = value``
    lines of the record) on stdout."""
    file = sys.stdout if file is None else file
    if fmt == "json":
        print(to_json(record), file=file)
        return
    if text is None:
        text = [f"{k} = {v}" for k, v in record.items()]
    print(text if isinstance(text, str) else "\n".join(text), file=file)
