"""The fields of a frozen dataclass as command-line options: one mechanism for ``fv train``/``fv compare``
(the fields of a run, ``bridges.runs.config.RUN_OPTIONS``) and the examples (``examples/_cli.py``).

:func:`options_of` makes one :class:`Option` per field of a dataclass: its flag (``--mlp-width`` for the
field ``mlp_width``), its kind from the field's annotation (``int``, ``float`` = ``real``, ``str`` = ``text``,
``bool``, ``X | None``, ``tuple[X, ...]`` = comma-separated ``X``), its default from the field's default;
keyword arguments per field refine it (a help text, bounds, choices, another flag, aliases).
``Option.parse`` reads an option's text (a one-line ValueError naming the option) and ``Option.text``
writes a value back. Two readers share them: the argparse parsers of the ``fv`` commands
(``bridges.commands.add_options``) and :func:`read_argv`, the plain ``--field=value`` reader of the
examples (:func:`usage` is its ``--help``).

Standard library and ``fvsym._validate`` (the one number parser) only; no argparse (``bridges.runs.config``
imports this module, and nothing below the command line loads argparse).
"""
from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from dataclasses import dataclass

from fvsym._validate import _short, check_choice, check_int, check_real, parse_number_list
from fvsym.errors import InputError

KINDS = ("int", "real", "choice", "text", "numbers", "bool")
_INT = re.compile(r"[+-]?\d{1,19}")
_TRUE, _FALSE = ("1", "true", "yes", "on"), ("0", "false", "no", "off")
_SHOWN = {"int": "int", "real": "float", "text": "str", "bool": "bool", "numbers": "number"}  # in usage()


@dataclass(frozen=True)
class Option:
    """One field as a command-line option: ``flag`` (or one of its ``aliases``) sets ``field`` (of the
    config ``section``, where one config holds several). ``kind``: ``int`` or ``real`` (exact rationals such
    as ``1/2`` read, within ``low``..``high``), ``choice`` (one of ``choices``), ``text``, ``bool``
    (true/false, yes/no, on/off, 1/0), ``numbers`` (comma-separated exact numbers, kept as strings).
    ``many``: a comma-separated tuple of values of ``kind``; ``none``: the text ``none`` reads as None.
    ``default`` is what the option reads when it is not given. ``parse`` reads the option's text
    (one-line ValueError naming ``label``, else the flag); ``text`` writes a value back."""

    flag: str
    section: str | None
    field: str
    kind: str
    help: str = ""
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    choices: tuple = ()
    aliases: tuple = ()
    label: str | None = None
    metavar: str | None = None
    default: typing.Any = None
    many: bool = False
    none: bool = False
    check: typing.Any = None  # a further check of a value read (returns it, or raises a one-line InputError)

    def __post_init__(self):
        if self.kind not in KINDS or not self.flag.startswith("--"):
            raise InputError(f"option {self.flag}: kind {self.kind!r} is unknown or the flag lacks its '--'")

    @property
    def dest(self) -> str:
        return self.flag[2:].replace("-", "_")

    @property
    def names(self) -> tuple:
        """Every spelling as a name without dashes: ``tokens``, ``n_tokens``."""
        return tuple(f[2:].replace("-", "_") for f in (self.flag, *self.aliases))

    def parse(self, text):
        name = self.label or self.flag
        if self.none and str(text).strip().lower() == "none":
            return None
        if self.many:
            items = [item.strip() for item in str(text).split(",")]
            if not all(items):
                raise InputError(f"{name} must be comma-separated values such as 1,2, got {str(text)[:60]!r} "
                                 "(an empty item)")
            return tuple(self._one(item, name) for item in items)
        return self._one(text, name)

    def _one(self, text, name: str):
        if self.kind == "int":
            t = str(text).strip()
            if not _INT.fullmatch(t):
                raise InputError(f"{name} must be an integer, got {_short(text)}")
            return check_int(int(t), name, -math.inf if self.low is None else self.low, self.high)
        if self.kind == "real":
            low, high = (-math.inf if self.low is None else self.low), (math.inf if self.high is None else self.high)
            return check_real(str(text), name, low, high, open_low=self.open_low, open_high=self.open_high,
                              shown=str(text).strip())
        if self.kind == "choice":
            return check_choice(text, name, self.choices)
        if self.kind == "bool":
            low = str(text).strip().lower()
            if low not in _TRUE + _FALSE:
                raise InputError(f"{name} must be true or false, got {text!r}")
            return low in _TRUE
        if self.kind == "numbers":
            return tuple(parse_number_list(text, name))
        if self.check is not None:  # its message names the value
            return self.check(str(text))
        return str(text)

    def text(self, value) -> str:
        """``value`` as this option's text (``parse(text(v)) == v``; a float by its ``repr``)."""
        if value is None and self.none:
            return "none"
        if self.kind == "numbers" or self.many:
            return ",".join(self._text_one(v) for v in value)
        return self._text_one(value)

    def _text_one(self, value) -> str:
        if isinstance(value, bool):
            return "true" if value else "false"
        return repr(value) if isinstance(value, float) else str(value)


def _kind(annotation, name: str) -> dict:
    """``kind``, ``many`` and ``none`` of a field's annotation."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1 or len(args) != 2:
            raise TypeError(f"field {name}: a union other than X | None is no option kind: {annotation!r}")
        return {**_kind(inner[0], name), "none": True}
    if origin is tuple:
        if len(args) != 2 or args[1] is not Ellipsis:
            raise TypeError(f"field {name}: only tuple[X, ...] is an option kind, got {annotation!r}")
        return {**_kind(args[0], name), "many": True}
    kinds = {int: "int", float: "real", str: "text", bool: "bool"}
    if annotation not in kinds:
        raise TypeError(f"field {name} has an annotation no option reads: {annotation!r}")
    return {"kind": kinds[annotation], "many": False, "none": False}


def options_of(cls, *, section: str | None = None, none: bool = True, **spec) -> tuple[Option, ...]:
    """One :class:`Option` per field of the dataclass ``cls``: flag ``--<field with dashes>``, kind from the
    annotation (``str`` with ``choices`` is a ``choice``), default from the field. ``spec`` maps a field name
    to a dict of Option attributes that refine it (``help``, ``low``, ``flag``, ``kind``, ``default``, ...);
    the fields it names come first, in its order, then the rest in the order of ``cls``. ``none=False``:
    no option reads the text ``none`` (the fields of a run, whose None means "the default")."""
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(spec) - set(fields)
    if unknown:
        raise TypeError(f"{cls.__name__} has no fields {', '.join(sorted(unknown))}")
    out = []
    for name in [*spec, *(n for n in fields if n not in spec)]:
        f = fields[name]
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else None)
        attrs = {**_kind(hints[name], name), "flag": "--" + name.replace("_", "-"), "section": section,
                 "field": name, "default": default}
        attrs["none"] = attrs["none"] and none
        attrs.update(spec.get(name, {}))
        if attrs.get("choices") and attrs["kind"] == "text":
            attrs["kind"] = "choice"
        if attrs["kind"] == "numbers":
            attrs["many"] = False  # a numbers option is a comma-separated list already
        out.append(Option(**attrs))
    return tuple(out)


def read_argv(options, argv: list[str]) -> dict:
    """``{dest: value}`` of the options given in ``argv`` as ``--flag=value`` or ``--flag value`` (``-`` and
    ``_`` alike, aliases too). ValueError (one line) on an unknown option, a stray argument, a missing or
    bad value, an option given twice."""
    by_name = {name: o for o in options for name in o.names}
    values, args = {}, list(argv)
    while args:
        arg = args.pop(0)
        if not arg.startswith("--") or arg == "--":
            raise InputError(f"unexpected argument {arg!r}; options look like --field=value")
        key, sep, text = arg[2:].partition("=")
        option = by_name.get(key.replace("-", "_"))
        if option is None:
            raise InputError(f"unknown option --{key}; the options are {', '.join(o.flag for o in options)}")
        if not sep:
            if not args:
                raise InputError(f"option {option.flag} needs a value ({option.flag}=value)")
            text = args.pop(0)
        if option.dest in values:
            raise InputError(f"option {option.flag} is given twice: give each option once")
        values[option.dest] = option.parse(text)
    return values


def config_of(cls, options, argv: list[str]):
    """A ``cls`` instance from ``argv`` (:func:`read_argv`); options left out keep the fields' defaults."""
    values = read_argv(options, argv)
    return cls(**{o.field: values[o.dest] for o in options if o.dest in values})


def shown_kind(option: Option) -> str:
    """How :func:`usage` names what an option takes: ``int``, ``float``, ``a|b``, ``int,...``, ``float | none``."""
    shown = option.metavar or ("|".join(map(str, option.choices)) if option.kind == "choice" else _SHOWN[option.kind])
    if option.many or option.kind == "numbers":
        shown += ",..."
    return shown + (" | none" if option.none else "")


def usage(options, prog: str, description: str = "") -> str:
    """The ``--help`` of a :func:`read_argv` command line: each option, what it takes, its help, its default."""
    lines = [f"usage: {prog} [--field=value ...]", "", description.strip(), "", "options:"]
    for o in options:
        default = o.text(o.default) if o.default is not None or o.none else "none"
        help_ = f"{o.help}; " if o.help else ""
        lines.append(f"  {o.flag}=<{shown_kind(o)}>  ({help_}default {default})")
    return "\n".join(lines)


def script_options(argv: list[str], names) -> dict:
    """The options of the study scripts (``studies/scaling/*.py``, ``studies/softmax/study.py``): ``--name=value``,
    or ``--name`` alone for ``"1"``. An option not among ``names``, or a word that is no option, ends the script: one
    line on stderr naming it, exit code 2."""
    import sys

    stray = [a for a in argv if not a.startswith("--") or a == "--"]
    if stray:
        print(f"unexpected argument {stray[0][:40]!r}; " + (f"options look like --name=value (--{', --'.join(sorted(names))})"
                                                             if names else "the script takes none"), file=sys.stderr)
        raise SystemExit(2)
    opts = dict(a[2:].split("=", 1) if "=" in a else (a[2:], "1") for a in argv)
    unknown = sorted(set(opts) - set(names))
    if unknown:
        print(f"unknown options: {', '.join(unknown)}; choose among --{', --'.join(sorted(names))}", file=sys.stderr)
        raise SystemExit(2)
    return opts


def study_json(path, what: str = "results", entries: bool = True) -> dict:
    """A study script's committed JSON object at ``path`` ({} where there is none yet). One that is damaged, empty or
    not an object (of objects, its entries, with ``entries``) is a one-line InputError naming it (restore it first): a
    script never starts again over results it cannot read."""
    import json
    import os

    if not os.path.exists(path):
        return {}
    fix = f"restore it (git checkout {os.path.basename(path)}) first"
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path} is damaged ({type(exc).__name__}); {fix}") from None
    if not isinstance(doc, dict) or (entries and not all(isinstance(v, dict) for v in doc.values())):
        raise InputError(f"{path} is not the study's {what} (a JSON object of entries); {fix}")
    return doc


def run_command(commands: dict, argv: list[str], prog: str) -> int:
    """A study script's one-word command line: ``argv`` is one name of ``commands`` (name -> a callable of no
    arguments), run with one OpenMP thread unless the environment says otherwise; anything else is answered by
    one usage line on stderr and exit status 2."""
    import os
    import sys

    if len(argv) != 1 or argv[0] not in commands:
        print(f"usage: {prog} {{{','.join(commands)}}}; got {' '.join(argv) or 'nothing'}", file=sys.stderr)
        return 2
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    commands[argv[0]]()
    return 0


def run_script(main, argv: list[str], prog: str) -> int:
    """``main(argv)`` of a study script, its refusals (a ValueError such as ``InputError``, an ``OSError``, a
    ``SystemExit`` with a message) written as one line ``prog: message`` on stderr with exit status 2."""
    import sys

    try:
        return main(argv)
    except SystemExit as exc:
        if not isinstance(exc.code, str):
            raise
        message = exc.code
    except (ValueError, OSError) as exc:
        message = str(exc) or type(exc).__name__
    print(f"{prog}: {' '.join(message.split())}", file=sys.stderr)
    return 2
