"""Figures of the report (matplotlib, Agg backend, PNG). Each function returns the paths it wrote."""
from __future__ import annotations

import io
from collections.abc import Mapping
from pathlib import Path

from fvnum.priors.registry import prior_entry

from bridges.models.registry import MODELS
from bridges.runs.store import write_atomic

class StrategyStyles(Mapping):
    """``strategy -> (label, colour)`` of the curves of :func:`reproduction_figure`, read live from the strategy registry
    (``fvnum.policies.registry.STRATEGIES``: each strategy object's ``label`` and ``colour``; a registered strategy with a
    label is drawn too), in the figure's order (the role ``figure``'s ranks, then labelled strategies without
    one), then the theory rows drawn beside them (:data:`ROW_STYLE`). Each curve's noise is added to its label."""

    def _styles(self) -> dict:
        from fvnum.policies.registry import STRATEGIES

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
    """Two panels (tree, matched Gaussian): loss against budget on a log scale, exact noiseless lines
    dashed, lines at the noise of N solid (Monte Carlo error bars), trained models as points."""
    from fvnum import plot

    fig, axes = plot.figure(figsize=(12, 4.6), ncols=2, sharey=True)
    fig.set_layout_engine(None)
    for ax, prior in zip(axes, ("tree", "gaussian")):
        lines = []
        for strategy, (label, colour) in STYLE.items():
            for noise, ls in (("none", "--"), (f"N={cfg.n_tokens}", "-")):
                pts = [(r["budget"], r["value"], r.get("stderr") or 0.0) for r in curves
                       if r["prior"] == prior and r["strategy"] == strategy and r["noise"] == noise]
                pts = [p for p in pts if p[1] > 1e-6]
                if pts:
                    lines.append(plot.curve(f"{label}, {'noiseless' if noise == 'none' else noise}", pts,
                                            style=dict(ls=ls, color=colour, marker=".", ms=4, capsize=2, mfc=None)))
        for t in tables:
            if t["prior"] != prior or t["depth"] != cfg.depth:
                continue
            m, c = model_marker(t["model"])
            lines.append(plot.curve(f"trained Model {t['model']} (seed {t['seed']})",
                                    [(t["budget"], t["trained"]["loss"], t["trained"]["stderr"])],
                                    style=dict(marker=m, color=c, ms=9, mfc="none", mew=2, ls="none")))
        plot.draw(ax, lines, min_value=1e-6)
        ax.set_xlabel("budget B = L d")
        shown = prior if prior_entry(prior).heap else f"matched {prior.capitalize()}"  # reproduce's Gaussian: matched
        ax.set_title(f"{shown} prior, depth {cfg.depth}, {cfg.tree}")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("loss  E||theta_hat - theta||^2")
    handles, labels = axes[0].get_legend_handles_labels()
    seen = dict(zip(labels, handles))
    for h, l in zip(*axes[1].get_legend_handles_labels()[::-1]):
        seen.setdefault(h, l)
    fig.legend(list(seen.values()), list(seen.keys()), loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=4,
               fontsize=8)
    return _save(fig, Path(path))


def patching_effects(table: dict):
    """``loss - unpatched`` per cell (layer, divergence depth), on the same target contexts."""
    import numpy as np

    loss = np.array(table["loss"])
    base = table.get("unpatched_by_depth") or [table["unpatched"]["value"]] * loss.shape[1]
    return loss - np.array(base)[None, :]


def patching_png(panels: dict) -> bytes:
    """Heat maps of the loss increase over (patched layer l, divergence depth j), one panel per table."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(panels), figsize=(4.6 * len(panels), 3.8), squeeze=False, layout="constrained")
    for ax, (title, t) in zip(axes[0], panels.items()):
        delta = patching_effects(t)
        im = ax.imshow(delta, cmap="magma", vmin=0, aspect="auto")
        ax.set_xticks(range(len(t["depths"])), [str(j) for j in t["depths"]])
        ax.set_yticks(range(len(t["layers"])), [str(l) for l in t["layers"]])
        ax.set_xlabel("divergence depth j")
        ax.set_ylabel("patched layer l")
        ax.set_title(title)
        top = max(float(delta.max()), 1e-12)
        for a in range(delta.shape[0]):
            for b in range(delta.shape[1]):
                ax.text(b, a, f"{delta[a, b]:.3f}", ha="center", va="center", fontsize=8,
                        color="white" if delta[a, b] < 0.6 * top else "black")
        fig.colorbar(im, ax=ax, label="loss increase")
    return png_bytes(fig)


def patching(path, panels: dict) -> list[Path]:
    """``patching_png`` written to ``path`` (nothing when there are no tables)."""
    panels = {k: v for k, v in panels.items() if v}
    return [write_atomic(path, patching_png(panels))] if panels else []


def function_vectors_png(transplant: dict, injection: dict) -> bytes:
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
    left.legend(fontsize=7)
    top = 1
    for c, (name, t) in enumerate((k, v) for k, v in injection.items() if v and "prefix_accuracy" in v):
        acc = np.array([[np.nan if x is None else x for x in row] for row in t["prefix_accuracy"]], dtype=float)
        if np.isnan(acc).all():
            continue
        right.plot(t["layers"], np.nanmean(acc, axis=1), "o-", color=colours[c % len(colours)], label=name)
        if t.get("own_injected_accuracy") is not None:  # the control: each target given its own prefix's mean
            own = np.array([np.nan if x is None else x for x in t["own_injected_accuracy"]], dtype=float)
            right.plot(t["layers"], own, "s:", color=colours[c % len(colours)], alpha=0.6, label=f"{name}, own prefix")
        top = max(top, max(t["layers"]))
    layers = np.arange(1, top + 1)
    right.plot(layers, 2.0 ** -layers, "k:", label="chance")
    right.set(xlabel="injection layer l", ylabel="prefix accuracy (mean over j <= l)", ylim=(0, 1.05),
              title="mean-workspace injection")
    from matplotlib.ticker import MaxNLocator

    for ax in (left, right):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    right.legend(fontsize=7)
    return png_bytes(fig)


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
            xs = list(range(1, len(acc) + 1))
            ax.errorbar(xs, acc, yerr=se, marker="o", capsize=3, label=name, color=f"C{i}")
        longest = max((p[key] for p in probes.values()), key=len)
        ax.plot(range(1, len(longest) + 1), [c for _, _, c in longest], "k:", label="chance")
        ax.set_xlabel(xlabel)
        ax.set_xticks(range(1, len(longest) + 1))
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("held-out accuracy")
    axes[1].legend(fontsize=8)
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
        pts = [(b, t["value"]) for b in budgets for t in theory[b] if t["name"] == name and t["value"] > 1e-8]
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
