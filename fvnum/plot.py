"""Loss against budget from Python: strategies, formulas and trained results on one axis, with error bars.

    import fvnum
    from fvsym import TreePrior
    from fvsym.tree import path_loss
    from fvnum import plot

    prior = TreePrior(6, "1/2")
    fig = plot.loss_vs_budget(
        {"path (mc)": "path", "top levels (mc)": "top_levels",
         "path, noiseless (exact)": path_loss().subs(alpha="1/2", K=6)},
        budgets=range(1, 7), prior=prior, channel=fvnum.gaussian(0.3), samples=4000, seed=0)
    fig.savefig("loss.png")

A *source* is one of:

- a strategy name (``"path"``, ``"top_levels"``, ``"optimal_nonadaptive_coordinate"``, ...): its Monte Carlo
  loss ``fvnum.loss_mc(prior, name, B, ...)`` at every budget, under ``channel=`` as everywhere
  (``fvnum.gaussian(tau)`` or ``fvnum.tokens(N)``), with its standard error;
- a ``fvsym.Formula`` whose only free parameter left is the budget ``B`` (fix the others first with
  ``f.subs(...)``, or pass ``values={"alpha": "1/2", "K": 6}``): exact values, no error bar;
- a callable ``budget -> value`` (a number, an ``Estimate``, or anything with ``value`` and ``stderr``);
- points: a mapping ``{budget: value}`` or a list of ``(budget, value)``, ``(budget, value, stderr)``,
  dicts with ``budget`` and ``value`` or ``loss`` (and ``stderr``), or results with ``to_dict()`` such as
  ``bridges.training.train.TrainResult`` (budget read from its config): trained models as points;
- a :class:`Curve` (already evaluated).

Figures are ``matplotlib.figure.Figure`` objects built without pyplot (no display, no global state:
safe under any backend, in scripts, tests and notebooks); :func:`draw` puts curves on an existing axis,
which is how the report figures of ``bridges.studies.figures`` are drawn, so every figure of the project has
this one source.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np
from fvsym.errors import InputError, reworded


@dataclass(frozen=True)
class Curve:
    """One line of a loss-against-budget plot: ``budgets`` and ``values``, ``errors`` (standard errors, or
    a pair ``(below, above)`` of sequences; None for exact values), ``kind`` (``mc``, ``exact`` or
    ``points``) and the matplotlib ``style`` (keyword arguments of ``errorbar``)."""

    label: str
    budgets: tuple
    values: tuple
    errors: tuple | None = None
    kind: str = "points"
    style: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        errors = None
        if self.errors is not None:
            errors = [list(e) for e in self.errors] if _asymmetric(self.errors) else list(self.errors)
        return {"label": self.label, "budgets": list(self.budgets), "values": list(self.values), "errors": errors,
                "kind": self.kind}

    def __repr__(self) -> str:
        pts = ", ".join(f"{b}: {v:.4g}" for b, v in zip(self.budgets, self.values))
        return f"Curve({self.label!r}, {self.kind}: {pts})"


def _asymmetric(errors) -> bool:
    return len(errors) == 2 and all(isinstance(e, (list, tuple, np.ndarray)) for e in errors)


def _value_error(x) -> tuple[float, float]:
    """``(value, stderr)`` of a number, an Estimate-like object, a ``(value, stderr)`` pair or a dict."""
    if isinstance(x, dict):
        value = x.get("value", x.get("loss"))
        if value is None:
            raise InputError(f"a point needs 'value' or 'loss', got keys {sorted(x)}")
        return float(value), float(x.get("stderr") or 0.0)
    if hasattr(x, "value") and not callable(getattr(x, "value")):
        return float(x.value), float(getattr(x, "stderr", 0.0) or 0.0)
    if isinstance(x, (tuple, list)) and len(x) == 2:
        return float(x[0]), float(x[1])
    try:
        return float(x), 0.0
    except (TypeError, ValueError):
        raise InputError(f"cannot read a loss from {type(x).__name__}: give a number, an Estimate or (value, stderr)") from None


def _budget_of(d: dict) -> int:
    if "budget" in d:
        return int(d["budget"])
    try:
        return int(d["config"]["model"]["budget"])  # a training result
    except (KeyError, TypeError):
        raise InputError(f"a point needs its budget ('budget', or config.model.budget), got keys {sorted(d)}") from None


def _point(item) -> tuple[int, float, float]:
    if hasattr(item, "to_dict") and not isinstance(item, dict):
        item = item.to_dict()
    if isinstance(item, dict):
        value, err = _value_error(item)
        return _budget_of(item), value, err
    if isinstance(item, (tuple, list)) and len(item) in (2, 3):
        b, v = item[0], item[1]
        value, err = _value_error(v)
        if len(item) == 3:
            err = float(item[2])
        return int(b), value, err
    raise InputError(f"a point is (budget, value[, stderr]), a dict or a result with to_dict(); got {item!r}")


def _budgets(budgets) -> tuple:
    if budgets is None:
        raise InputError("this source is evaluated at budgets: give budgets=, e.g. range(1, 6)")
    out = tuple(int(b) for b in budgets)
    if not out or any(b < 0 for b in out):
        raise InputError(f"budgets must be integers >= 0, got {list(budgets)}")
    return out


def curve(label: str, source, budgets=None, *, prior=None, channel=None, samples: int = 20_000, seed: int = 0,
          values=None, style=None, **mc) -> Curve:
    """Evaluate one source (module docstring) into a :class:`Curve`. Monte Carlo sources use ``prior``,
    ``channel`` (``fvnum.gaussian(tau)`` or ``fvnum.tokens(N)``), ``samples`` and ``seed`` (the same seed
    at every budget), and any other keyword of ``loss_mc`` (``options=``, ``threads=``, ...)."""
    style = dict(style or {})
    if isinstance(source, Curve):
        return source if not style else Curve(source.label, source.budgets, source.values, source.errors,
                                              source.kind, {**source.style, **style})
    if isinstance(source, str):
        from fvnum.policies.registry import loss_mc

        if prior is None or channel is None:
            raise InputError(f"curve {label!r}: the strategy {source!r} needs prior= and channel= "
                             "(fvnum.gaussian(tau) or fvnum.tokens(N))")
        bs = _budgets(budgets)
        ests = []
        for b in bs:
            try:
                ests.append(loss_mc(prior, source, b, channel, samples=samples, seed=seed, **mc))
            except ValueError as exc:
                raise reworded(exc, f"curve {label!r} at budget {b}: {exc}") from None
        return Curve(label, bs, tuple(e.value for e in ests), tuple(e.stderr for e in ests), "mc", style)
    from fvsym import Formula

    if isinstance(source, Formula):
        f = source.subs(**values) if values else source
        left = [str(p) for p in f.params if str(p) != "B"]
        if "B" not in f.symbols or left:
            raise InputError(f"curve {label!r}: the formula {f.name} must have the budget B as its only free "
                             f"parameter; left: {', '.join(left) or 'no B'} (fix them with f.subs(...) or values=)")
        bs = _budgets(budgets)
        return Curve(label, bs, tuple(float(f.exact(B=b)) for b in bs), None, "exact", style)
    if callable(source):
        bs = _budgets(budgets)
        pairs = [_value_error(source(b)) for b in bs]
        errors = tuple(e for _, e in pairs)
        return Curve(label, bs, tuple(v for v, _ in pairs), errors if any(errors) else None, "points", style)
    if isinstance(source, dict):
        items = [(b, v) for b, v in source.items()]
    elif hasattr(source, "to_dict"):
        items = [source]
    else:
        try:
            items = list(source)
        except TypeError:
            raise InputError(f"curve {label!r}: cannot plot a {type(source).__name__} (module docstring lists "
                             "the sources)") from None
    pts = sorted(_point(i) for i in items)
    if not pts:
        raise InputError(f"curve {label!r} has no points")
    errors = tuple(p[2] for p in pts)
    return Curve(label, tuple(p[0] for p in pts), tuple(p[1] for p in pts), errors if any(errors) else None,
                 "points", style)


@dataclass(frozen=True)
class Look:
    """How :func:`loss_vs_budget` draws its axis: ``styles`` (``label -> errorbar keywords``), ``title`` (default:
    the prior and the channel), ``logy`` (a log loss axis) and ``legend``."""

    styles: dict | None = None
    title: str | None = None
    logy: bool = True
    legend: bool = True


_DEFAULT_STYLE = {"mc": dict(marker=".", ms=5, capsize=2, ls="-"),
                  "exact": dict(marker=".", ms=4, ls="--"),
                  "points": dict(marker="o", ms=7, capsize=3, ls="none", mfc="none", mew=1.8)}


def draw(ax, curves, *, logy: bool = True, min_value: float = 1e-12, floor: float | None = None) -> list:
    """Draw :class:`Curve`s on the matplotlib axis ``ax`` (``errorbar``, error bars where known), so that each
    can be seen:

    - on a log axis, values <= ``min_value`` (exact zeros: a budget that resolves the leaf) cannot be drawn; they
      are drawn as down-pointing triangles on the axis floor and the curve's label says so
      (``path, noiseless (0 at B = 3, 4: ▼ on the floor)``), never dropped in silence;
    - a curve that coincides with one drawn before it (the same points within 1e-9) would hide under it: it is
      drawn wider and fainter beneath, and its label says which curve it coincides with.

    ``floor``: where the triangles go (by default a third of the smallest value drawn; give one floor to panels
    that share their y axis). Returns the artists."""
    curves = list(curves)
    if logy and floor is None:
        floor = zero_floor(curves, min_value)
    artists, drawn = [], []
    for c in curves:
        keep = [i for i, v in enumerate(c.values) if not logy or v > min_value]
        zeros = [c.budgets[i] for i, v in enumerate(c.values) if logy and v <= min_value]
        label = c.label
        if zeros:
            label += f" (0 at B = {', '.join(f'{b:g}' for b in zeros)}: ▼ on the floor)"
        same = next((d for d in drawn if _coincide(d, c)), None)
        style = {**_DEFAULT_STYLE.get(c.kind, {}), **c.style}
        if same is not None:
            label += f" (the same as: {same.label})"
            style.update(lw=style.get("lw", 1.5) + 3, alpha=0.35, zorder=1)
        if keep:
            b = [c.budgets[i] for i in keep]
            v = [c.values[i] for i in keep]
            yerr = None
            if c.errors is not None:
                if _asymmetric(c.errors):
                    yerr = [[c.errors[0][i] for i in keep], [c.errors[1][i] for i in keep]]
                else:
                    yerr = [c.errors[i] for i in keep]
            artists.append(ax.errorbar(b, v, yerr=yerr, label=label, **style))
            drawn.append(c)
        if zeros:
            colour = style.get("color") or (artists[-1].lines[0].get_color() if keep else None)
            artists.append(ax.plot(zeros, [floor] * len(zeros), ls="none", marker="v", ms=8, color=colour,
                                   **({} if keep else {"label": label}))[0])
    if logy:
        ax.set_yscale("log")
        if floor is not None and any(v <= min_value for c in curves for v in c.values):
            ax.set_ylim(bottom=floor / 1.5)
    ax.xaxis.get_major_locator().set_params(integer=True)
    return artists


def zero_floor(curves, min_value: float = 1e-12) -> float:
    """Where :func:`draw` puts the zeros of ``curves`` on a log axis: a third of the smallest value drawn."""
    shown = [v for c in curves for v in c.values if v > min_value]
    return min(shown) / 3 if shown else min_value


def _coincide(a: Curve, b: Curve, rtol: float = 1e-9) -> bool:
    """Whether two curves have the same points (budgets, and values within ``rtol``)."""
    if tuple(a.budgets) != tuple(b.budgets) or len(a.values) != len(b.values):
        return False
    return bool(np.allclose(np.asarray(a.values, float), np.asarray(b.values, float), rtol=rtol, atol=1e-15))


@functools.cache
def _figure_class():
    from matplotlib.figure import Figure

    class PlotFigure(Figure):
        """A matplotlib Figure that a notebook shows as a PNG (``_repr_png_``), made without pyplot."""

        def _repr_png_(self):
            return png(self)

    return PlotFigure


def figure(figsize=(7.5, 4.8), ncols: int = 1, **kw):
    """A matplotlib Figure and its axes, without pyplot (nothing is displayed; Agg renders on save; a
    notebook shows it as a PNG)."""
    fig = _figure_class()(figsize=figsize, layout="constrained")
    axes = fig.subplots(1, ncols, squeeze=True, **kw)
    return fig, axes


def loss_vs_budget(sources, budgets=None, *, prior=None, channel=None, samples: int = 20_000, seed: int = 0,
                   values=None, look: Look | None = None, ax=None, **mc):
    """Loss ``E||theta_hat - theta||^2`` against the budget for any set of sources (module docstring),
    with error bars, on one axis. ``sources``: a mapping ``label -> source`` or a list of sources (labelled
    by their strategy name or formula name) or :class:`Curve`s. ``look``: a :class:`Look` (styles, title, log
    axis, legend). ``ax``: draw into this axis instead of a new figure. Returns the matplotlib ``Figure``."""
    look = Look() if look is None else look
    if not isinstance(look, Look):
        raise InputError(f"look must be a fvnum.plot.Look, got {type(look).__name__}")
    styles, title, logy, legend = look.styles, look.title, look.logy, look.legend
    if isinstance(sources, dict):
        named = list(sources.items())
    else:
        named = [(_label(s), s) for s in sources]
    styles = styles or {}
    curves = [curve(label, s, budgets, prior=prior, channel=channel, samples=samples, seed=seed, values=values,
                    style=styles.get(label), **mc)
              for label, s in named]
    if ax is None:
        fig, ax = figure()
    else:
        fig = ax.figure
    draw(ax, curves, logy=logy)
    ax.set_xlabel("budget B = L d")
    ax.set_ylabel("loss  E||theta_hat - theta||^2")
    if title is None and prior is not None:
        said = "" if channel is None else f"tau {channel.tau}" if channel.kind == "gaussian" else \
            f"N = {channel.n_tokens} tokens"
        title = f"{prior!r}" + (f", {said}" if said else "")
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3, which="both")
    if legend and curves:
        ax.legend(fontsize=8)
    return fig


def _label(source) -> str:
    if isinstance(source, Curve):
        return source.label
    if isinstance(source, str):
        return source
    name = getattr(source, "name", None)
    if isinstance(name, str):
        return name
    return type(source).__name__


def png(fig, dpi: int = 120) -> bytes:
    """The figure as PNG bytes (Agg)."""
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, bbox_inches="tight")
    return buf.getvalue()


__all__ = ["Curve", "curve", "draw", "figure", "loss_vs_budget", "png"]

