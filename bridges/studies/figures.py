"""Figures of the report (matplotlib, Agg backend, PNG). The writers return the paths they wrote; the builders
(`reproduction_fig`, `patching_figure`, `function_vectors_figure`) return the matplotlib Figure."""
from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

from fvnum.priors.registry import prior_entry

from bridges.models.registry import MODELS
from bridges.runs.store import write_atomic

class StrategyStyles(Mapping):
    """``strategy -> (label, colour)`` of the curves of :func:`reproduction_figure`, read live from the strategy registry
    (``fvnum.policies.strategies.STRATEGIES``: each strategy object's ``label`` and ``colour``; a registered strategy with a
    label is drawn too), in the figure's order (the role ``figure``'s ranks, then labelled strategies without
    one), then the theory rows drawn beside them (:data:`ROW_STYLE`). Each curve's noise is added to its label."""

    def _styles(self) -> dict:
        from fvnum.policies.strategies import STRATEGIES

        drawn = [s for s in STRATEGIES.values() if s.label is not None]
        ranks = [s.rank("figure") for s in drawn]
        order = sorted(range(len(drawn)), key=lambda i: (ranks[i] is None, ranks[i] or 0, i))
        return {**{drawn[i].name: (drawn[i].label, drawn[i].colour or "C7") for i in order}, **ROW_STYLE}

    def __getitem__(self, name):
        return self._styles()[name]

    def __iter__(self):
        return iter(self._styles())

    def __len__(self) -> int:
        return len(self._styles())


ROW_STYLE = {"gaussian_optimum": ("Gaussian optimum (gaussian channel at the same tau)", "C7")}  # a theory row
STYLE = StrategyStyles()
UNREGISTERED_MARKER = ("x", "C7")  # a stored table's model that is not registered now


def model_marker(model: str) -> tuple[str, str]:
    """``(marker, colour)`` of a model's points: its ``ModelSpec.marker`` (``bridges.models.registry``)."""
    spec = MODELS.get(model)
    return UNREGISTERED_MARKER if spec is None else spec.marker


def model_markers() -> dict:
    """``{model: (marker, colour)}`` of every registered model, in the registry's order."""
    return {name: spec.marker for name, spec in MODELS.items()}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def png_bytes(fig) -> bytes:
    """A figure as PNG bytes (the figure is closed)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=120, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def _save(fig, path: Path) -> list[Path]:
    return [write_atomic(path, png_bytes(fig))]


def reproduction_figure(path, curves: list[dict], tables: list[dict], cfg) -> list[Path]:
    """Two panels (tree, matched Gaussian), each with its legend: loss against budget on a log scale, exact
    noiseless lines dashed, lines at the noise of N solid (Monte Carlo error bars; a curve reaching 0 ends in
    triangles on the floor, and a curve the same as another says so: ``fvnum.plot.draw``), trained models as
    hollow points, each beside its own prediction row (a filled point of its colour, joined to it by a thin line),
    the models side by side around their budget (:func:`model_offsets`) so that none hides another."""
    return _save(reproduction_fig(curves, tables, cfg), Path(path))


def reproduction_fig(curves: list[dict], tables: list[dict], cfg):
    """The figure of :func:`reproduction_figure` (a matplotlib Figure)."""
    from fvnum import plot

    fig, axes = plot.figure(figsize=(13, 7.2), ncols=2, sharey=True)
    shift = model_offsets()
    panels = {}
    for prior in ("tree", "gaussian"):
        lines = panels[prior] = []
        for strategy, (label, colour) in STYLE.items():
            for noise, ls in (("none", "--"), (f"N={cfg.n_tokens}", "-")):
                pts = [(r["budget"], r["value"], r.get("stderr") or 0.0) for r in curves
                       if r["prior"] == prior and r["strategy"] == strategy and r["noise"] == noise]
                if pts:
                    lines.append(plot.curve(f"{label}, {'noiseless' if noise == 'none' else noise}", pts,
                                            style=dict(ls=ls, color=colour, marker=".", ms=4, capsize=2, mfc=None)))
        for t in tables:
            if t["prior"] != prior or t["depth"] != cfg.depth:
                continue
            lines += model_beside_prediction(t, shift.get(t["model"], 0.0))
    floor = plot.zero_floor([c for lines in panels.values() for c in lines], 1e-6)  # one floor: the panels share y
    for ax, (prior, lines) in zip(axes, panels.items()):
        plot.draw(ax, lines, min_value=1e-6, floor=floor)
        ax.set_xlabel("budget B = L d (models side by side around their budget)")
        shown = prior if prior_entry(prior).heap else f"matched {prior.capitalize()}"  # reproduce's Gaussian: matched
        ax.set_title(f"{shown} prior, depth {cfg.depth}, {cfg.tree}")
        ax.grid(alpha=0.3, which="both")
        if lines:  # every panel its own legend
            ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncol=1)
        else:
            ax.text(0.5, 0.5, f"no curves of the {prior} prior", ha="center", transform=ax.transAxes)
    axes[0].set_ylabel("loss  E||theta_hat - theta||^2")
    return fig


def model_offsets(width: float = 0.8) -> dict:
    """``{model: x offset}``: the registered models side by side around a budget (A left, C right), so that two
    models with the same loss (A and B on the Gaussian) do not hide each other."""
    names = list(MODELS)
    if len(names) < 2:
        return {n: 0.0 for n in names}
    return {n: width * (i / (len(names) - 1) - 0.5) for i, n in enumerate(names)}


def model_beside_prediction(table: dict, dx: float = 0.0) -> list:
    """The curves of one trained run beside its own prediction (``fvnum.plot.Curve``): the trained loss (hollow
    marker) and its prediction row (``bridges.analysis.compare.prediction_of``; filled, smaller) at ``budget +
    dx``, joined by a thin line of the model's colour; the prediction alone is missing where the model has none."""
    from fvnum import plot

    from bridges.analysis.compare import prediction_of

    m, c = model_marker(table["model"])
    b, tr = table["budget"] + dx, table["trained"]
    out = [plot.Curve(f"trained Model {table['model']} (seed {table['seed']})", (b,), (tr["loss"],),
                      (tr["stderr"] or 0.0,), "points", dict(marker=m, color=c, ms=10, mfc="none", mew=2, ls="none",
                                                             zorder=5))]
    pred = prediction_of(table)
    if pred is not None:
        out.append(plot.Curve(f"Model {table['model']}'s prediction: {pred['name']}", (b,), (pred["value"],),
                              (pred.get("stderr") or 0.0,), "points", dict(marker=m, color=c, ms=5, mfc=c, ls="none",
                                                                           zorder=6, capsize=2)))
        if pred["value"] > 0 and tr["loss"] > 0:
            out.append(plot.Curve("_joins the two", (b, b), (tr["loss"], pred["value"]), None, "points",
                                  dict(color=c, lw=0.8, ls="-", marker="", zorder=4)))
    return out


def patching_effects(table: dict):
    """``loss - unpatched`` per cell (layer, divergence depth), on the same target contexts."""
    import numpy as np

    loss = np.array(table["loss"])
    base = table.get("unpatched_by_depth") or [table["unpatched"]["value"]] * loss.shape[1]
    return loss - np.array(base)[None, :]


NOISE = 1e-9  # a cell whose effect is this small beside the losses is 0 (floating-point noise, fvnum.estimate)


def empty_workspace_rows(t: dict, delta) -> list[int]:
    """The rows of a key-patching table that are 0 by construction: layer 1 reads an empty workspace, so its keys
    are the same for every context and a donor's keys change nothing (Models A, B and the theory's path). A row is
    named only where every cell of it is 0 within floating-point noise."""
    import numpy as np

    loss = np.abs(np.array(t["loss"], dtype=float))
    return [a for a, l in enumerate(t["layers"])
            if l == 1 and np.all(np.abs(delta[a]) <= NOISE * np.maximum(loss[a], 1e-3))]


def patching_png(panels: dict) -> bytes:
    """:func:`patching_figure` as PNG bytes."""
    return png_bytes(patching_figure(panels))


def patching_figure(panels: dict):
    """Heat maps of the loss increase over (patched layer l, divergence depth j), one panel per table, on one
    colour scale (the panels are compared: one colour bar for all). A row 0 by construction (layer 1's keys, which
    see an empty workspace: :func:`empty_workspace_rows`) is hatched and says why."""
    import numpy as np

    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels) + 1, 4.2), squeeze=False, layout="constrained")
    deltas = {title: patching_effects(t) for title, t in panels.items()}
    top = max([float(np.nanmax(d)) for d in deltas.values()] + [1e-12])
    im = None
    for ax, (title, t) in zip(axes[0], panels.items()):
        delta = deltas[title]
        im = ax.imshow(delta, cmap="magma", vmin=0, vmax=top, aspect="auto")
        ax.set_xticks(range(len(t["depths"])), [str(j) for j in t["depths"]])
        ax.set_yticks(range(len(t["layers"])), [str(l) for l in t["layers"]])
        ax.set_xlabel("divergence depth j")
        ax.set_ylabel("patched layer l")
        ax.set_title(title)
        empty = empty_workspace_rows(t, delta)
        for a in range(delta.shape[0]):
            for b in range(delta.shape[1]):
                ax.text(b, a, f"{delta[a, b]:.3f}", ha="center", va="center", fontsize=8,
                        color="white" if delta[a, b] < 0.6 * top else "black")
        for a in empty:
            ax.add_patch(plt.Rectangle((-0.5, a - 0.5), delta.shape[1], 1, fill=False, hatch="//", ec="0.6", lw=0))
            ax.text((delta.shape[1] - 1) / 2, a + 0.32, "0 by construction: layer 1 reads an empty workspace,\n"
                    "its keys are the same for every context", ha="center", va="center", fontsize=7, color="white",
                    bbox=dict(fc="black", ec="none", alpha=0.75))
    fig.colorbar(im, ax=list(axes[0]), label="loss increase (one scale for all panels)")
    return fig


def patching(path, panels: dict) -> list[Path]:
    """``patching_png`` written to ``path`` (nothing when there are no tables)."""
    panels = {k: v for k, v in panels.items() if v}
    return [write_atomic(path, patching_png(panels))] if panels else []


CEILING = 0.9995  # an accuracy that prints as 1.000: at the ceiling


def function_vectors_png(transplant: dict, injection: dict) -> bytes:
    """:func:`function_vectors_figure` as PNG bytes."""
    return png_bytes(function_vectors_figure(transplant, injection))


def function_vectors_figure(transplant: dict, injection: dict):
    """docs/theory.md section 9. Left: the transplant's effect (loss - unpatched, paired) against the divergence depth
    ``j`` with the whole state transplanted (``l = L``, solid) and the first layer's (``l = 1``, dashed). Right: the
    injection's prefix accuracy by injection layer ``l`` (mean over ``j <= l``; squares: the control, each target
    given its own prefix's mean state) with chance ``2^-l`` dotted. One
    line per table (``to_dict`` of a ``PatchingTable`` / ``InjectionTable``; None or empty tables left out)."""
    import numpy as np

    plt = _plt()
    fig, (left, right) = plt.subplots(1, 2, figsize=(10.5, 4.0), layout="constrained")
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for c, (name, t) in enumerate((k, v) for k, v in transplant.items() if v and "effect" in v):
        eff = np.array(t["effect"], dtype=float)
        colour = colours[c % len(colours)]
        left.plot(t["depths"], eff[-1], "o-", color=colour, label=f"{name}, l = {t['layers'][-1]}")
        if len(t["layers"]) > 1:
            left.plot(t["depths"], eff[0], "x--", color=colour, alpha=0.7, label=f"{name}, l = {t['layers'][0]}")
    left.axhline(0, color="grey", lw=0.5)
    left.set(xlabel="divergence depth j", ylabel="transplant effect (paired)", title="workspace transplant")
    if left.get_legend_handles_labels()[0]:  # every panel its legend, or a line saying it has nothing to show
        left.legend(fontsize=7)
    else:
        left.text(0.5, 0.5, "no transplant table", ha="center", transform=left.transAxes)
    top, drawn = 1, []
    tables = [(k, v) for k, v in injection.items() if v and "prefix_accuracy" in v]
    for c, (name, t) in enumerate(tables):
        acc = np.array([[np.nan if x is None else x for x in row] for row in t["prefix_accuracy"]], dtype=float)
        if np.isnan(acc).all():
            continue
        dx = 0.06 * (c - (len(tables) - 1) / 2)  # side by side: curves at the same accuracy do not hide each other
        x = np.array(t["layers"], dtype=float) + dx
        right.plot(x, np.nanmean(acc, axis=1), "o-", color=colours[c % len(colours)], label=name, ms=7 - 2 * c)
        drawn.append(np.nanmean(acc, axis=1))
        if t.get("own_injected_accuracy") is not None:  # the control: each target given its own prefix's mean
            own = np.array([np.nan if x is None else x for x in t["own_injected_accuracy"]], dtype=float)
            right.plot(x, own, "s:", color=colours[c % len(colours)], alpha=0.6, mfc="none", ms=9 - 2 * c,
                       label=f"{name}, own prefix")
            drawn.append(own)
        top = max(top, max(t["layers"]))
    layers = np.arange(1, top + 1)
    right.plot(layers, 2.0 ** -layers, "k:", label="chance")
    if drawn and all(np.nanmin(d) >= CEILING for d in drawn):
        right.text(0.5, 0.5, "every curve at the ceiling 1.000: each target is decoded into the injected\n"
                   "prefix's subtree at every layer (the curves drawn side by side)", ha="center", va="center",
                   fontsize=7, transform=right.transAxes, bbox=dict(fc="white", ec="0.7"))
    right.set(xlabel="injection layer l", ylabel="prefix accuracy (mean over j <= l)", ylim=(0, 1.05),
              title="mean-workspace injection")
    from matplotlib.ticker import MaxNLocator

    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.legend(fontsize=7)
    return fig


def function_vectors(path, transplant: dict, injection: dict) -> list[Path]:
    """``function_vectors_png`` written to ``path`` (nothing when there are no tables)."""
    if not any(transplant.values()) and not any(injection.values()):
        return []
    return [write_atomic(path, function_vectors_png(transplant, injection))]


def probes(path, probes: dict) -> list[Path]:
    """Left: accuracy of the prefix s_1..s_l from the workspace after layer l. Right: accuracy of the
    prefix s_1..s_m from the final workspace. Chance levels dotted."""
    if not probes:
        return []
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for key, ax, xlabel in (("prefix", axes[0], "layer l (prefix s_1..s_l from the workspace after layer l)"),
                            ("final_prefix", axes[1], "prefix length m (from the final workspace)")):
        for i, (name, p) in enumerate(probes.items()):
            acc, se, chance = zip(*p[key])
            dx = 0.05 * (i - (len(probes) - 1) / 2)  # side by side: sources at the same accuracy stay visible
            xs = [x + dx for x in range(1, len(acc) + 1)]
            ax.errorbar(xs, acc, yerr=se, marker="os^Dv"[i % 5], capsize=3, label=name, color=f"C{i}", mfc="none", ms=7)
        longest = max((p[key] for p in probes.values()), key=len)
        ax.plot(range(1, len(longest) + 1), [c for _, _, c in longest], "k:", label="chance")
        ax.set_xlabel(xlabel)
        ax.set_xticks(range(1, len(longest) + 1))
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
    axes[0].set_ylabel("held-out accuracy")
    return _save(fig, Path(path))


SCALING_THEORY = {  # theory row -> (label, colour, line style)
    "best_adaptive_keyed": ("A's prediction: best adaptive policy found, weighted keys", "C0", "-"),
    "best_nonadaptive_keyed": ("B's prediction: best one-layer design found, weighted keys", "C1", "-"),
    "path": ("path (adaptive, linear keys)", "C9", "-."),
    "best_adaptive": ("best adaptive policy found, linear keys", "C2", "-."),
    "top_levels": ("top levels (one layer)", "C1", "--"),
    "best_nonadaptive_coordinate": ("best coordinate design (one layer)", "C3", "--"),
    "best_nonadaptive_unit": ("best unit design (one layer)", "C5", "--"),
    "top_levels_linear": ("linear theory: top levels, LMMSE (tokens channel)", "C4", ":"),
    "gaussian_optimum": ("Gaussian optimum (gaussian channel)", "C7", ":"),
}


def scaling(path, rows: list[dict], theory: dict, cfg) -> list[Path]:
    """Loss against budget (log scale): theory lines, trained models as seed means with their range and
    the single seeds as faint points."""
    from fvnum import plot

    fig, ax = plot.figure(figsize=(8, 5.2))
    fig.set_layout_engine(None)
    budgets = sorted(theory)
    lines = []
    for name, (label, colour, ls) in SCALING_THEORY.items():
        pts = [(b, t["value"]) for b in budgets for t in theory[b] if t["name"] == name]  # zeros: on the floor
        if pts:
            lines.append(plot.curve(label, pts, style=dict(ls=ls, color=colour, marker=".", ms=4, lw=1.2, mfc=None)))
    plot.draw(ax, lines, min_value=1e-8)
    for model, (marker, colour) in model_markers().items():
        mine = [r for r in rows if r["model"] == model]
        if not mine:
            continue
        bs = sorted({r["budget"] for r in mine})
        means, lo, hi = [], [], []
        for b in bs:
            ls_ = [r["loss"] for r in mine if r["budget"] == b]
            means.append(sum(ls_) / len(ls_))
            lo.append(means[-1] - min(ls_))
            hi.append(max(ls_) - means[-1])
        ax.scatter([r["budget"] for r in mine], [r["loss"] for r in mine], marker=marker, color=colour, alpha=0.25,
                   s=14)
        plot.draw(ax, [plot.Curve(f"trained Model {model}" + ("" if cfg.seeds == 1 else " (mean, seed range)"),
                                  tuple(bs), tuple(means), (lo, hi), "points",
                                  dict(marker=marker, color=colour, ms=7, capsize=3, lw=1.8, ls="-", mfc=None))])
    ax.set_yscale("log")
    ax.set_xticks(budgets)
    ax.set_xlabel("budget B (scalars written to the workspace)")
    ax.set_ylabel("E ||theta_hat - theta||^2 (held out)")
    ax.set_title(f"Tree prior, depth {cfg.depth}, {cfg.tree}, N = {cfg.n_tokens}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    return _save(fig, Path(path))


def decay(path, fits: dict, cfg) -> list[Path]:
    """The local decay ``log L(B) - log L(B+1)`` per budget with its 95% interval: trained models (seed
    spread) and their prediction rows (Monte Carlo error), beside the two laws' shapes fitted to each model
    (a flat line for the geometric law, ``e log(1 + 1/B)`` for the power law)."""
    import numpy as np

    from fvnum import plot
    from fvnum.theory import prediction_row

    fig, ax = plot.figure(figsize=(8, 5.2))
    fig.set_layout_engine(None)
    markers = model_markers()
    shift = {m: 0.12 * (i - (len(markers) - 1) / 2) for i, m in enumerate(markers)}  # A -0.12, B 0, C 0.12
    drawn = False
    for model, (marker, colour) in markers.items():
        entry = fits["models"].get(model, {})
        ds, test = entry.get("decay"), entry.get("test")
        if not ds:
            continue
        drawn = True
        x = np.array([d["budget"] for d in ds]) + 0.5 + shift[model]
        y = np.array([d["value"] for d in ds])
        err = np.array([[d["value"] - d["ci"][0] for d in ds], [d["ci"][1] - d["value"] for d in ds]])
        ax.errorbar(x, y, yerr=err, fmt=marker, color=colour, capsize=3, ms=7, mfc="none",
                    label=f"trained Model {model} (95%)")
        pred = prediction_row(model, fits["theory"])
        pd_ = fits["theory"].get(pred, {}).get("decay") if pred else None
        if pd_:
            ax.plot([d["budget"] + 0.5 for d in pd_], [d["value"] for d in pd_], ls="-", color=colour, lw=1.4,
                    marker=".", label=f"{pred} ({model}'s prediction)")
        if not test:
            continue
        bs = np.linspace(max(test["cut"], 1), max(d["budget"] for d in ds) + 1, 50)
        r, e = test["fits"]["exponential"]["value"], test["fits"]["power"]["value"]
        ax.plot(bs[:-1] + 0.5, np.full(bs.size - 1, -np.log(r)), ls=":", color=colour, lw=1)
        ax.plot(bs[:-1] + 0.5, e * np.log1p(1 / bs[:-1]), ls="--", color=colour, lw=1)
    ax.axhline(0, color="0.6", lw=0.8)
    if not drawn:
        ax.text(0.5, 0.5, "no local decay: the study needs two budgets and two seeds", ha="center",
                transform=ax.transAxes)
    ax.set_xlabel("B -> B + 1")
    ax.set_ylabel("log L(B) - log L(B + 1)")
    ax.set_title(f"Local decay (dotted: geometric fit, flat; dashed: power fit, e log(1 + 1/B)); depth {cfg.depth}, "
                 f"N = {cfg.n_tokens}", fontsize=9)
    ax.grid(True, alpha=0.3)
    if drawn:
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.13), ncol=2)
    return _save(fig, Path(path))
