"""How a theory table reads for one model (docs/theory.md section 7): the model's own line first, then the other
rows grouped by what they are to it.

Every theory table of a model (``fv compare``, the report of ``fv reproduce``, ``ComparisonTable.to_markdown``)
opens with :func:`model_line`, "Model A: trained X against its prediction Y (row): ratio X/Y", and lays its rows out
in the groups of :func:`grouped_rows`: the prediction, then the rows of the model's own measurement class (its
bounds, then references), then each other class with a line saying that a bound of that class bounds that class
only. So a lower bound of the coordinate class (0.2520) never sits unexplained above an upper bound of the unit
class (0.2028): they are in different groups, and the group's line says why the order does not matter.

The one rule of a trained loss beside its prediction is :func:`trained_beside` (a ratio only where the prediction
is clearly above 0). Standard library and ``fvnum.estimate`` only.
"""
from __future__ import annotations

import math

from fvnum.estimate import below_noise, value_text

NEAR_ZERO_SE = 3  # a prediction within this many of its standard errors of 0 is 0 within its error
CLASS_WORDS = {  # what a measurement class reads (fvnum.theory.CLASSES)
    "coordinate": "reads single coordinates of the prior",
    "unit": "reads any unit direction",
    "linear": "linear keys and a linear readout",
}
ROLE_ORDER = {"prediction": 0, "lower_bound": 1, "upper_bound": 2, "reference": 3}


def trained_beside(loss: float, loss_se: float | None, prediction: float, prediction_se: float | None) -> dict:
    """A trained loss beside its prediction: ``difference`` = loss - prediction with ``difference_se`` (both
    standard errors combined: independent estimates), always; ``ratio`` = loss / prediction only where the
    prediction is clearly above 0 (more than :data:`NEAR_ZERO_SE` of its standard errors; an exact prediction has
    none), else None (``near_zero``): a ratio to a prediction that is 0 within its error means nothing."""
    se = float(prediction_se or 0.0)
    near_zero = not (prediction > 0 and prediction > NEAR_ZERO_SE * se)
    return {"difference": loss - prediction, "difference_se": float(math.hypot(loss_se or 0.0, se)),
            "ratio": None if near_zero else loss / prediction, "near_zero": bool(near_zero)}


def model_line(model: str, prediction: dict | None, trained: tuple | None = None, *, held_as: str | None = None) -> str:
    """The model's own line, the first of each of its tables: ``Model A: trained 0.1441 ± 0.004 against its
    prediction 0.1308 ± 0.008 (best_adaptive_keyed): ratio 1.102``. ``prediction``: its row (a dict with ``name``,
    ``value``, ``stderr``) or None; ``trained``: ``(loss, stderr)`` or None (a theory table alone: the prediction
    only); ``held_as``: the name the theory holds the model by where it is not ``model`` (``T-deep``). A
    prediction 0 within its error gets the difference with its standard error instead of a ratio."""
    who = f"Model {model}" + (f" (held to the rows of {held_as})" if held_as and held_as != model else "")
    if prediction is None:
        return f"{who}: no prediction row in this table" + (
            f" (trained {value_text(*trained)})" if trained is not None else "")
    v = prediction["value"]
    fmt = loss_format(v)
    pred = (f"its prediction {v:{fmt}} ({prediction['name']}, exact)" if below_noise(prediction.get("stderr"), v)
            else f"its prediction {value_text(v, prediction.get('stderr'), fmt)} ({prediction['name']})")
    if trained is None:
        return f"{who}: {pred}; no trained loss in this table"
    b = trained_beside(trained[0], trained[1], prediction["value"], prediction.get("stderr"))
    head = f"{who}: trained {value_text(*trained, loss_format(trained[0]))} against {pred}"
    if b["ratio"] is not None:
        return f"{head}: ratio {b['ratio']:.3f}"
    return (f"{head}: difference {value_text(b['difference'], b['difference_se'], '+.2g', digits=2)} (the prediction "
            f"is 0 within {NEAR_ZERO_SE} standard errors: no ratio)")


def loss_format(value: float) -> str:
    """``.4f``, or ``.3g`` for a value near 0 that would print as 0.0000 (a prediction of 1.46e-07 keeps its digits)."""
    return ".4f" if value == 0 or abs(value) >= 1e-3 else ".3g"


def grouped_rows(rows: list[dict], prediction: str | None) -> list[tuple[str, list[dict]]]:
    """``rows`` (dicts with ``name``, ``role``, ``class``, ``models``; ``fvnum.theory.describe_rows``) in the
    groups a model's table shows, as ``[(title, rows)]`` with empty groups left out: the model's ``prediction`` row;
    its class (the prediction row's class): bounds, then references (other models' predictions among them); then
    each other class, in the order of ``fvnum.theory.CLASSES``, its bounds then references. Within a group the
    table's order is kept. Without a prediction, every class is a group of its own."""
    by_name = {r["name"]: r for r in rows}
    pred = by_name.get(prediction) if prediction else None
    own = pred["class"] if pred else None
    groups = []
    if pred is not None:
        groups.append(("its prediction", [pred]))
    classes = [own] if own else []
    classes += [c for c in ("coordinate", "unit", "linear") if c != own]
    classes += [r["class"] for r in rows if r["class"] not in classes]
    for klass in dict.fromkeys(classes):
        mine = [r for r in rows if r["class"] == klass and r is not pred]
        mine.sort(key=lambda r: 0 if r["role"] in ("lower_bound", "upper_bound") else 1)  # stable: table order kept
        if not mine:
            continue
        words = CLASS_WORDS.get(klass, "")
        if klass == own:
            title = f"its class ({klass}: {words}): bounds, then references" if words else f"its class ({klass})"
        else:
            title = (f"another class ({klass}{': ' + words if words else ''}): its bounds bound {klass}-class "
                     f"policies only, so a {klass} lower bound may sit above a bound of another class")
        groups.append((title, mine))
    return groups


def role_text(row: dict, own_class: str | None) -> str:
    """A row's role as its table says it: ``upper bound (A)``, ``prediction (B)``, ``lower bound of the coordinate
    class`` for a bound of another class than the model's, ``reference``."""
    role = row["role"].replace("_", " ")
    if row["role"] in ("lower_bound", "upper_bound") and own_class and row["class"] != own_class:
        role += f" of the {row['class']} class"
    return role + (f" ({', '.join(row['models'])})" if row.get("models") else "")


def rows_markdown(rows: list[dict], model: str | None = None, *, prediction: str | None = None,
                  trained: tuple | None = None, held_as: str | None = None) -> str:
    """A theory table's rows as Markdown for ``model`` (the layout of ``ComparisonTable.to_markdown``): its own
    line (:func:`model_line`), then ``| what | loss | ± | how | role | class | keys | channel |`` in the groups of
    :func:`grouped_rows`, each group opened by a line of its own. ``rows``: ``describe_rows`` dicts;
    ``prediction``: the name of the row the model is held to (``fvnum.theory.prediction_row``), or None."""
    pred_name = prediction if model else None
    pred = next((r for r in rows if r["name"] == pred_name), None)
    lines = [model_line(model, pred, trained, held_as=held_as), ""] if model else []
    lines += ["| what | loss | ± | how | role | class | keys | channel |", "|---|---|---|---|---|---|---|---|"]
    own = pred["class"] if pred else None
    for title, group in grouped_rows(rows, pred_name):
        lines.append(f"| *{title}* | | | | | | | |")
        for r in group:
            lines.append(f"| {r['name']} | {r['value']:{loss_format(r['value'])}} | {se_cell(r)} | {r.get('how', '')} | "
                         f"{role_text(r, own)} | {r['class']} | {r['keys']} | {r.get('channel', 'tokens')} |")
    return "\n".join(lines) + "\n"


def se_cell(row: dict) -> str:
    """The ± cell of a theory row: its standard error, ``exact`` below floating-point noise, empty for an exact
    row (its ``how`` says so)."""
    from fvnum.estimate import stderr_text

    return stderr_text(row.get("stderr"), row["value"], exact="" if row.get("how") == "exact" else "exact")


def table_text(table) -> str:
    """A ``ComparisonTable`` as plain text (its ``repr``): the channel, then one line per row."""
    from fvnum.estimate import stderr_text

    ch = table.channel
    what = (f"tokens channel, N = {ch.n_tokens} (tau {ch.tau:.4g})" if ch.kind == "tokens"
            else f"gaussian channel, tau {ch.tau:.4g}")
    lines = [f"ComparisonTable({table.prior} prior, budget {table.budget}, {what}; mc rows: {table.samples} samples, "
             f"seed {table.seed})"]
    width = max((len(r.name) for r in table.rows), default=4)
    for r in table.rows:
        err = stderr_text(r.stderr, r.value, digits=2, exact="", plus=" +- ")
        lines.append(f"  {r.name:<{width}}  {r.value:.5g}{err}  [{r.how}, {r.channel}]  {r.what}")
    return "\n".join(lines)
