"""The defaults the Python API and the command line share, one constant each, read by both (a function's
keyword default and its ``fv`` option's default), so ``comparison_table(...)`` and ``fv compare`` give the
same table. Standard library only: the parsers read it without loading numpy. ``tests/test_defaults_agree.py``
walks the parsers and the functions and configurations they set and holds the defaults equal. The key families
and their check live here too, so the channel (``fvnum.tokens(N, keys=...)``) reads them without the keys' room."""
from fvsym.errors import InputError

KEYED = "weighted"  # the key family of the prediction rows of Models A and B (fvnum.keys.nonadaptive); None: linear keys

FAMILIES = ("linear", "weighted", "softmax")  # the key families the keyed searches (fvnum.keys.nonadaptive) run over


def check_family(family, *, optional: bool = False) -> str | None:
    """A key family of :data:`FAMILIES`; with ``optional``, also None or ``"none"`` (no key family: the
    linear-key rows of the tokens channel), returned as None."""
    if optional and (family is None or family == "none"):
        return None
    if family not in FAMILIES:
        extra = (" (or none)" if optional else
                 " (none is no key family: where a key family is optional, give None or 'none')" if family == "none"
                 else "")
        raise InputError(f"unknown key family {family!r}; choose one of {', '.join(FAMILIES)}{extra}")
    return family
