"""The shape of Model T (docs/theory.md section 7.1): ``layers`` L, ``heads`` H, ``width`` d (values per head),
``head_dim``, ``d_model``, or one of the two named shapes at a budget, ``deep`` (``L = B``, ``H d = 1``) and
``wide`` (``L = 1``, ``H = B`` heads of ``d = 1``: each channel its own query and key, as Model B's channels have
their own keys). The budget is what the summary token receives from the context, ``B = L H d``.

A configuration gives a named ``shape`` or the three numbers (``layers``, ``heads``, ``width``; ``heads`` and
``width`` default to 1); numbers that spell a named shape are stored as that shape, so the same experiment has one
key. Models without a shape (A, B, C) refuse every one of these fields in one line. Standard library only
(``bridges.runs.config`` checks a configuration without loading torch).
"""
from __future__ import annotations

from fvsym._validate import check_choice, check_int
from fvsym.errors import InputError

SHAPES = ("deep", "wide")
HEAD_DIM, D_MODEL = 16, 64  # Model T's defaults (docs/theory.md section 7.1's prototype)
MAX_SIZE = 1 << 14  # d_model, head_dim, layers, heads and width above this are absurd on any machine here
_FIELDS = ("shape", "layers", "heads", "width", "head_dim", "d_model")


def _set(obj, name, value):
    object.__setattr__(obj, name, value)


def named_shape(shape: str, budget: int) -> tuple[int, int, int]:
    """``(L, H, d)`` of the named shape at ``budget``: deep ``(B, 1, 1)``, wide ``(1, B, 1)``."""
    return (budget, 1, 1) if shape == "deep" else (1, budget, 1)


VALUES = ("residual", "label", "token")  # Model G's values (docs/theory.md section 13); the first is its default


def check_values(mc) -> None:
    """Check (and normalise) the fields of Model G (docs/theory.md section 13): ``layers`` L (default 1) and ``values``
    (default ``residual``); no other shape field, the linear attention, no MLP. Any other model refuses ``values``.
    InputError, one line naming the value."""
    if not mc.spec.values:
        if mc.values is not None:
            raise InputError(f"values={mc.values!r} applies to model G (docs/theory.md section 13), not to "
                             f"model {mc.model}")
        return
    for name in _FIELDS:
        if name != "layers" and getattr(mc, name) is not None:
            raise InputError(f"{name}={getattr(mc, name)!r} applies to model T; model {mc.model} takes layers and values "
                             "(docs/theory.md section 13)")
    if mc.hidden_layers != 2 or mc.router != "mlp":
        what = f"hidden_layers={mc.hidden_layers!r}" if mc.hidden_layers != 2 else f"router={mc.router!r}"
        raise InputError(f"{what} applies to models A and B; model {mc.model} has no MLP (docs/theory.md section 13)")
    if mc.attention != "linear":
        raise InputError(f"model {mc.model} is linear self-attention; attention={mc.attention!r} applies to A, B, C and T")
    if mc.layers is None:
        _set(mc, "layers", 1)
    if isinstance(mc.layers, float):
        raise InputError(f"layers must be an integer, got {mc.layers!r}")
    check_int(mc.layers, "layers", 1, MAX_SIZE)
    if mc.values is None:
        _set(mc, "values", mc.spec.values[0])
    check_choice(mc.values, "values", mc.spec.values)


def check_shape(mc) -> None:
    """Check (and normalise) the shape fields of a ``ModelConfig``; InputError, one line naming the value."""
    check_values(mc)
    if mc.spec.values:  # Model G: layers and values only
        return
    given = [name for name in _FIELDS if getattr(mc, name) is not None]
    if not mc.spec.shaped:
        if given:
            name = given[0]
            hint = " (the MLP's hidden size is mlp_width)" if name == "width" else ""
            raise InputError(f"{name}={getattr(mc, name)!r} applies to model T (docs/theory.md section 7.1), not to model "
                             f"{mc.model}{hint}")
        return
    if mc.hidden_layers != 2:
        raise InputError(f"model T's blocks have the standard MLP of one hidden layer (its size mlp_width); "
                         f"hidden_layers={mc.hidden_layers!r} applies to models A and B")
    if mc.router != "mlp":
        raise InputError(f"router={mc.router!r} applies to models A and B; model T routes through its attention")
    for name in ("layers", "heads", "width", "head_dim", "d_model"):
        value = getattr(mc, name)
        if value is not None:
            if isinstance(value, float):
                raise InputError(f"{name} must be an integer, got {value!r}")
            check_int(value, name, 1, MAX_SIZE)
    if mc.head_dim is None:  # the defaults are stored: a key says every size it was trained at
        _set(mc, "head_dim", HEAD_DIM)
    if mc.d_model is None:
        _set(mc, "d_model", D_MODEL)
    if mc.shape is not None:
        check_choice(mc.shape, "shape", SHAPES)
        numbers = [n for n in ("layers", "heads", "width") if getattr(mc, n) is not None]
        if numbers:
            L, H, d = named_shape(mc.shape, mc.budget)
            want = dict(layers=L, heads=H, width=d)
            wrong = [n for n in numbers if getattr(mc, n) != want[n]]
            if wrong:
                n = wrong[0]
                raise InputError(f"shape={mc.shape!r} at budget {mc.budget} has {n} = {want[n]}, got {n}={getattr(mc, n)}; "
                                 "give the shape or the numbers")
            for n in numbers:
                _set(mc, n, None)
        return
    if mc.layers is None and mc.heads is None and mc.width is None:
        _set(mc, "shape", "deep")  # the default shape: deep, the theory's adaptive strategy
        return
    L = mc.layers if mc.layers is not None else 1
    H = mc.heads if mc.heads is not None else 1
    d = mc.width if mc.width is not None else 1
    if L * H * d != mc.budget:
        raise InputError(f"model T's budget is layers x heads x width = {L} x {H} x {d} = {L * H * d}, not "
                         f"budget={mc.budget}: give budget={L * H * d} or a shape (deep, wide)")
    for shape in SHAPES:  # numbers that spell a named shape are that shape (one experiment, one key)
        if (L, H, d) == named_shape(shape, mc.budget):
            _set(mc, "shape", shape)
            for n in ("layers", "heads", "width"):
                _set(mc, n, None)
            return
    _set(mc, "layers", L)
    _set(mc, "heads", H)
    _set(mc, "width", d)


def resolved(mc) -> tuple[int, int, int]:
    """``(L, H, d)`` of a checked configuration of Model T; of Model G ``(L, 1, budget / L)`` (``RunConfig`` sets its
    budget to ``L D``: D channels a layer)."""
    if mc.spec.values:
        return mc.layers, 1, max(1, mc.budget // mc.layers)
    if mc.shape is not None:
        return named_shape(mc.shape, mc.budget)
    return mc.layers, mc.heads, mc.width


def shape_of(mc) -> str | None:
    """The named shape of a configuration (``deep`` or ``wide``), or None for another shape."""
    return mc.shape




def gd_budget(cfg):
    """The model section of a ``RunConfig`` of Model G with its budget set to ``L D`` (D heads a layer into the
    summary, docs/theory.md section 13), or None for another model or a budget already ``L D``. A budget other than
    ``L D`` and the default 3 is refused in one line."""
    import dataclasses

    mc = cfg.model
    if not mc.spec.values:
        return None
    want = mc.layers * cfg.data.dim
    if mc.budget == want:
        return None
    if mc.budget != type(mc).budget:
        raise InputError(f"model {mc.model}'s budget is layers x D = {mc.layers} x {cfg.data.dim} = {want}, not "
                         f"budget={mc.budget}: give layers (docs/theory.md section 13)")
    return dataclasses.replace(mc, budget=want)
