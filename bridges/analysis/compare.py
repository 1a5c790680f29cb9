"""Trained models beside the theory (docs/theory.md sections 2, 5-7).

``theory_table(data, budget)``: the theory side, computed in ``fvnum.theory`` for the prior of ``data``
under the channel the models see (``tokens`` with the same ``N`` and ``s2``; every row says which
channel it is for); ``theory_losses`` gives its rows as dicts. This module computes no theory itself.
``learned_routing(model, data)``: what a trained model's keys measure (Stein rows, section 2), per
layer and, for the tree prior, per path prefix read so far, beside the ``path`` policy.
``compare(result)``: one :class:`Comparison` of both (``to_dict()``: its JSON layout), with the audit of the model's own readings
(``bridges.analysis.audit``), and ``to_markdown(table)``. Every theory row says what it is beside the models (``role``,
``models``, ``class``, ``keys``, ``channel``; ``fvnum.theory.row_kind``), and each model is held to its one
prediction row (``fvnum.theory.prediction_row``). ``seed_summary(tables)`` aggregates seeds (mean, spread,
n seeds) beside the prediction; ``summary_markdown`` lays it out.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from fvnum.defaults import KEYED  # the key family of A's and B's prediction rows: one constant for all

from bridges.runs.config import DataConfig
from bridges.training.data import ContextSampler, EVAL_SEED, EVAL_STREAM, data_channel, fv_prior, path_nodes
from bridges.models.registry import MODELS
from bridges.models.networks import WorkspaceModel, key_rows
from bridges.runs.results import DictLayout
from bridges.models.taps import record




def check_keyed(keyed) -> str | None:
    """``keyed`` as the comparisons take it: a key family (``fvnum.keys.families.FAMILIES``) or None (``"none"``
    too: the linear-key rows are then the predictions of A and B)."""
    from fvnum.keys.families import check_family

    return check_family(keyed, optional=True)


def keyed_cells(data: DataConfig, budgets, keyed: str | None = KEYED, *, search_samples: int = 2_000,
                 seed: int = 0, real_samples: int | None = None) -> dict:
    """The keyed rows of ``data`` at every budget at once (``fvnum.theory.keyed_curves``: the adaptive
    policy is run once to the largest budget), as ``{str(budget): [row dicts]}`` (the layout of a run
    store's cell); ``{}`` without a key family. ``real_samples``: with A's and B's rows on that many contexts of
    real tokens (``fvnum.keys.real_tokens``)."""
    from fvnum.theory import keyed_curves as curves

    keyed = check_keyed(keyed)
    if keyed is None:
        return {}
    found = curves(fv_prior(data), budgets, data_channel(data), keyed, samples=search_samples, seed=seed,
                   real_samples=real_samples)
    return {str(b): [r.to_dict() for r in rows] for b, rows in found.items()}


def theory_table(data: DataConfig, budget: int, *, samples: int = 20_000, seed: int = 0,
                 search_samples: int = 2_000, dense: bool = True, keyed: str | None = KEYED, keyed_rows=None,
                 real_samples: int | None = None):
    """The ``fvnum.theory.ComparisonTable`` for the prior of ``data`` under the channel the models see
    (``tokens`` with ``N`` and ``s2`` of ``data``). ``keyed``: the key family whose best rows found are the
    predictions of A and B (default weighted; None or ``"none"``: the linear-key rows); ``keyed_rows``: those
    rows computed beforehand (:func:`keyed_cells` at this budget); ``real_samples``: A's and B's keyed rows also
    on that many contexts of real tokens (``comparison_table``'s ``real_samples``)."""
    from fvnum.mc.channels import tokens
    from fvnum.theory import comparison_table

    own = has_own_table(data)  # the atoms prior: its own rows, no keyed rows (fvnum.theory.comparison_table)
    channel = tokens(data.n_tokens, data.s2, keys=check_keyed(keyed))  # data_channel's, with the key family
    return comparison_table(fv_prior(data), budget, channel, samples=samples, seed=seed,
                            search_samples=search_samples, dense=dense,
                            keyed_rows_given=None if own else keyed_rows, real_samples=real_samples)


def has_own_table(data: DataConfig) -> bool:
    """Whether the prior of ``data`` has its own theory rows (a finite prior, the atoms prior: found by its class,
    ``fvnum.priors.analyses``), rather than the tree's and Gaussian's of ``fvnum.theory.comparison_table``."""
    from fvnum.priors.analyses import analysis

    return analysis(fv_prior(data), "comparison_table") is not None


def theory_losses(data: DataConfig, budget: int, *, samples: int = 20_000, seed: int = 0,
                  search_samples: int = 2_000, dense: bool = True, keyed: str | None = KEYED,
                  keyed_rows=None, real_samples: int | None = None) -> list[dict]:
    """The rows of :func:`theory_table` as JSON-able dicts ``{name, value, stderr, how, what, channel, ..}``
    (the layout of the comparison tables and the run store)."""
    return theory_table(data, budget, samples=samples, seed=seed, search_samples=search_samples, dense=dense,
                        keyed=keyed, keyed_rows=keyed_rows, real_samples=real_samples).to_dict()["rows"]


@torch.no_grad()
def _eval_contexts(data: DataConfig, n: int, seed: int = EVAL_SEED):
    sampler = ContextSampler(data)
    return sampler.sample(n, sampler.generator(seed, EVAL_STREAM, 10_000))


def learned_routing(model: WorkspaceModel, data: DataConfig, *, n_contexts: int = 256, n_stein: int = 256,
                    seed: int = 0) -> dict:
    """What each layer's keys measure. Rows ``W_l(p)`` (Stein, ``bridges.models.networks.key_rows``) are taken at
    the workspace the layer actually sees; their energy ``w_n^2 / ||w||^2`` is summarised per layer:

    - ``energy_by_depth``: mean energy on the nodes of each tree depth (the prior's eigen-directions; on the
      atoms prior, which has no depth, on each coordinate);
    - tree prior: ``on_path_node`` (mean energy on the node ``n_l(s)`` that ``path`` reads),
      ``in_path_subtree`` (energy in the subtree of ``n_l(s)``), ``top_is_path_node`` (how often the
      strongest node is ``n_l(s)``), and ``by_prefix``: for each path prefix ``s_1..s_{l-1}``, the
      strongest node of the mean row and the node ``path`` reads there.
    """
    c = _eval_contexts(data, n_contexts)
    model.eval()
    names = [f"workspace.{l}" for l in range(1, model.n_layers + 1)]
    with torch.no_grad(), record(model, names) as rec:
        model(c.x, c.y, c.x_q)
    D = data.dim
    # the nodes of each tree depth; on a prior without a heap of nodes (atoms) each coordinate is its own group
    depth_of = np.array([int(n).bit_length() if data.depth is not None else n for n in range(1, D + 1)])  # (D,)
    K = int(depth_of.max())
    out = {"layers": []}
    truth = path_nodes(c.signs).numpy() if c.signs is not None else None  # (n, K)
    for l in range(1, model.n_layers + 1):
        p = torch.zeros(n_contexts, model.budget) if l == 1 else rec[f"workspace.{l - 1}"]
        rows = key_rows(model, l, p, n_samples=n_stein, seed=seed).numpy()  # (n, d, D)
        energy = rows**2 / np.maximum((rows**2).sum(-1, keepdims=True), 1e-30)  # (n, d, D)
        layer = {"layer": l, "channels": []}
        for ch in range(rows.shape[1]):
            e = energy[:, ch]  # (n, D)
            info = {
                "energy_by_depth": [float(e[:, depth_of == k].sum(1).mean()) for k in range(1, K + 1)],
                "top_node_mean_row": int(np.abs(rows[:, ch].mean(0)).argmax()) + 1,
            }
            if truth is not None and model.width == 1 and l <= K:
                target = truth[:, l - 1]  # (n,) node n_l(s)
                sub = _subtree_masks(D)[target - 1]  # (n, D)
                info["on_path_node"] = float(e[np.arange(len(target)), target - 1].mean())
                info["in_path_subtree"] = float((e * sub).sum(1).mean())
                info["top_is_path_node"] = float((e.argmax(1) + 1 == target).mean())
                info["by_prefix"] = _by_prefix(rows[:, ch], c.signs.numpy(), l, target)
            layer["channels"].append(info)
        out["layers"].append(layer)
    if model.n_layers == 1:
        rows = key_rows(model, 1, torch.zeros(1, model.budget), n_samples=4 * n_stein, seed=seed).numpy()[0]
        out["design_top_nodes"] = [int(np.abs(r).argmax()) + 1 for r in rows]
        out["design_energy_on_top_levels"] = float(
            (rows[:, : model.budget] ** 2).sum() / max((rows**2).sum(), 1e-30))
    return out


def _subtree_masks(D: int) -> np.ndarray:
    """(D, D) mask: row n-1 marks node n and its descendants."""
    mask = np.zeros((D, D))
    for n in range(D, 0, -1):
        mask[n - 1, n - 1] = 1
        for child in (2 * n, 2 * n + 1):
            if child <= D:
                mask[n - 1] = np.maximum(mask[n - 1], mask[child - 1])
    return mask


def _by_prefix(rows: np.ndarray, signs: np.ndarray, layer: int, target: np.ndarray) -> list:
    out = []
    code = np.zeros(len(signs), dtype=int)
    for k in range(layer - 1):
        code = 2 * code + (signs[:, k] < 0)
    for value in np.unique(code):
        sel = code == value
        prefix = "".join("+" if b == "0" else "-" for b in format(value, f"0{layer - 1}b")) if layer > 1 else ""
        mean = rows[sel].mean(0)
        top = int(np.abs(mean).argmax()) + 1
        out.append({"prefix": prefix, "n": int(sel.sum()), "top_node": top, "path_node": int(target[sel][0]),
                    "top_energy": float(mean[top - 1] ** 2 / max((mean**2).sum(), 1e-30))})
    return out


AUDIT_SAMPLES = 500  # contexts of the audit that comparisons, reproduce and scaling attach to every model
AUDIT_TOKEN_SAMPLE = 4096
# Gaussian prior: importance sampling per context costs about 100 times more (measured: 500 contexts, 4096
# tokens, 256 draws took 14 s at depth 2 on one thread); the attached audit is smaller there
AUDIT_GAUSSIAN = dict(samples=200, token_sample=2048, n_latents=128)
AUDIT_SIZES = {"tree": dict(samples=AUDIT_SAMPLES, token_sample=AUDIT_TOKEN_SAMPLE), "gaussian": AUDIT_GAUSSIAN,
               "atoms": dict(samples=AUDIT_SAMPLES, token_sample=AUDIT_TOKEN_SAMPLE)}  # atoms: exact, as the tree


def audit_dict(result, *, seed: int = 0) -> dict:
    """The audit of a trained run's own readings (``bridges.analysis.audit``; a ``TrainResult`` or a run folder) at
    the comparisons' sizes (:data:`AUDIT_SIZES`), as a dict."""
    from bridges.analysis.audit import audit, load_run

    if not hasattr(result, "config"):
        result = load_run(result)
    return audit(result, seed=seed, **AUDIT_SIZES[result.config.data.prior]).to_dict()


@dataclass(frozen=True)
class Comparison(DictLayout):
    """One trained run beside the theory (:func:`compare`): what was trained (``key``, ``model``, the data's
    ``prior``, ``depth``, ``budget``, ``n_tokens``, ``alpha`` or ``scales``, the models' ``channel`` and
    ``tau``, the training ``seed``), its held-out loss (``trained``: loss, stderr, n, steps, ...), every
    theory row with what it is (``theory``), and where the model is at hand its learned ``routing`` and the
    ``audit`` of its own readings. ``to_dict()`` is the JSON layout of ``fv compare`` and the run store
    (``table["trained"]`` reads it too); ``to_frame()`` the theory rows beside the trained loss as a DataFrame."""

    key: str
    model: str
    prior: str
    depth: int
    budget: int
    n_tokens: int
    alpha: float | None
    scales: tuple | None
    channel: str
    tau: float
    seed: int
    trained: dict
    theory: list
    routing: dict | None = None
    audit: dict | None = None
    dim: int | None = None  # D where the prior has no depth (the atoms prior); None otherwise (D = 2^depth - 1)
    theory_model: str | None = None  # the name the theory holds it by where it is not ``model`` (T-deep, T-wide)

    def to_dict(self) -> dict:
        d = {"key": self.key, "model": self.model, "prior": self.prior, "depth": self.depth, "budget": self.budget,
             **({"dim": self.dim} if self.dim is not None else {}),
             **({"theory_model": self.theory_model} if self.theory_model is not None else {}),
             "n_tokens": self.n_tokens, "alpha": self.alpha,
             **({"scales": list(self.scales)} if self.scales is not None else {}), "channel": self.channel,
             "tau": self.tau, "seed": self.seed, "trained": dict(self.trained), "theory": list(self.theory)}
        if self.routing is not None:
            d["routing"] = self.routing
        if self.audit is not None:
            d["audit"] = self.audit
        return d

    def beside_prediction(self) -> dict | None:
        """The trained loss beside the row the model is held to (:func:`beside_of`)."""
        return beside_of(self.to_dict())

    def to_frame(self):
        """The theory rows (name, value, stderr, role, ...) with the trained loss as a first row ``trained``,
        as a pandas DataFrame (pandas is optional: a one-line ImportError without it)."""
        try:
            import pandas as pd
        except ImportError:
            raise ImportError("to_frame() of a Comparison needs pandas (pip install pandas)") from None
        t = self.trained
        first = {"name": "trained", "value": t["loss"], "stderr": t["stderr"], "role": f"Model {self.model}"}
        return pd.DataFrame([first, *self.theory])

    def to_markdown(self) -> str:
        return to_markdown(self.to_dict())


BY_ATTENTION = "attention"  # compare's default key family: the one of the model's attention (keyed_for)


def keyed_for(cfg, keyed=BY_ATTENTION) -> str | None:
    """The key family a run (a ``RunConfig``) is held to: ``keyed`` where given; by default (:data:`BY_ATTENTION`)
    the family of its attention, ``softmax`` rows for a softmax model on the tree prior (the prior where softmax
    rows are searched), else :data:`fvnum.defaults.KEYED` (``weighted``). Model T is held to A's and B's own rows
    (its shape's prediction, docs/theory.md section 7.1), whatever its attention."""
    if keyed != BY_ATTENTION:
        return check_keyed(keyed)
    softmax = getattr(cfg.model, "attention", "linear") == "softmax" and cfg.data.prior == "tree" \
        and not cfg.model.spec.shaped
    return "softmax" if softmax else KEYED


def compare(result, *, samples: int = 20_000, seed: int = 0, search_samples: int = 2_000, dense: bool = True,
            theory: list | None = None, audit: bool = True, keyed: str | None = BY_ATTENTION,
            real_samples: int | None = None) -> Comparison:
    """The comparison of one trained run (a ``bridges.training.train.TrainResult`` with its model), a
    :class:`Comparison`; ``audit`` adds the audit of the model's own readings (``.audit``); ``keyed``: the key
    family of the prediction rows of A and B (:func:`theory_table`; not used when ``theory`` is given); by
    default the family of the model's attention (:func:`keyed_for`: softmax models are held to their softmax
    rows, linear ones to the weighted rows); ``real_samples``: A's and B's keyed rows also on that many contexts
    of real tokens (``best_adaptive_keyed_real``, ``best_nonadaptive_keyed_real``; tree prior, linear or
    weighted keys; not used when ``theory`` is given)."""
    from fvnum.theory import describe_rows

    cfg = result.config
    keyed = keyed_for(cfg, keyed)
    data, B = cfg.data, cfg.model.budget
    if theory is None and cfg.model.spec.values:  # Model G: the gradient-descent rows (docs/theory.md section 13)
        from bridges.analysis.gd import theory_rows

        theory = theory_rows(cfg, samples=samples, seed=seed)
    if theory is None:
        theory = theory_losses(data, B, samples=samples, seed=seed, search_samples=search_samples, dense=dense,
                               keyed=keyed, real_samples=real_samples)
    theory = describe_rows(theory)
    routing = audited = None
    if result.model is not None:
        if hasattr(result.model, "layers"):  # the key functions of A, B, C (Model T's keys are its heads')
            routing = learned_routing(result.model, data, seed=seed)
        if audit and result.config.model.spec.audits(data):  # Model T on a Gaussian: no finite latents to
            audited = audit_dict(result, seed=seed)   # measure its readings' law at (bridges.analysis.audit.audit_measured)
    trained = {"loss": result.loss, "stderr": result.stderr, "n": result.n_eval, "steps": result.steps,
               "steps_per_s": result.steps_per_s, "wall_s": result.wall_seconds}
    return Comparison(cfg.key(), cfg.model.model, data.prior, data.depth, B, data.n_tokens, data.alpha,
                      None if data.scales is None else tuple(data.scales), "tokens", data_channel(data).tau,
                      cfg.train.seed, trained, theory, routing, audited, data.dim if data.depth is None else None,
                      cfg.model.theory_name if cfg.model.theory_name != cfg.model.model else None)


def _size(table: dict) -> str:
    """``depth 4`` of a tree or Gaussian table; ``D 8`` of a prior without depth (the atoms prior)."""
    return f"depth {table['depth']}" if table.get("depth") is not None else f"D {table.get('dim', '?')}"


from fvnum.row_groups import NEAR_ZERO_SE  # noqa: E402 (a prediction within this many of its standard errors of 0 is 0)


def beside_prediction(loss: float, loss_se: float, prediction: float, prediction_se: float | None) -> dict:
    """How a trained loss stands beside its prediction, the one rule of every table (``fv compare``, the grid,
    ``fv reproduce``'s report, their JSON, the examples; ``fvnum.row_groups.trained_beside``): ``difference`` =
    loss - prediction with ``difference_se``, always; ``ratio`` = loss / prediction only where the prediction is
    clearly above 0 (more than :data:`NEAR_ZERO_SE` of its standard errors), else None (``near_zero``)."""
    from fvnum.row_groups import trained_beside

    return trained_beside(loss, loss_se, prediction, prediction_se)


def beside_text(b: dict) -> str:
    """:func:`beside_prediction` as table text: the ratio (``1.234``), or where the prediction is 0 within its
    error the difference with its standard error (``difference +0.015 ± 0.00031``)."""
    if b["ratio"] is not None:
        return f"{b['ratio']:.3f}"
    from fvnum.estimate import value_text

    return f"difference {value_text(b['difference'], b['difference_se'], '+.2g', digits=2)}"


def prediction_of(table: dict) -> dict | None:
    """The theory row (a dict) the table's model is held to, or None."""
    from fvnum.theory import describe_rows, prediction_row

    rows = {r["name"]: r for r in describe_rows(table["theory"])}
    name = prediction_row(table.get("theory_model") or table["model"], rows)
    return None if name is None else rows[name]


def beside_of(table: dict) -> dict | None:
    """One run's table: its trained loss beside its prediction row (:func:`prediction_of`), as
    ``{prediction, prediction_value, prediction_stderr, ratio, difference, difference_se, near_zero}``
    (:func:`beside_prediction`); None for a model held to no row."""
    pred = prediction_of(table)
    if pred is None:
        return None
    t = table["trained"]
    return {"prediction": pred["name"], "prediction_value": pred["value"], "prediction_stderr": pred.get("stderr"),
            **beside_prediction(t["loss"], t["stderr"], pred["value"], pred.get("stderr"))}


def _se(stderr, value=0.0) -> str:
    """`` ± 0.004`` after a value, or nothing where the standard error is below floating-point noise
    (``fvnum.estimate.stderr_text``: the one formatter of a standard error)."""
    from fvnum.estimate import stderr_text

    return stderr_text(stderr, value, exact="", plus=" ± ")


def to_markdown(table: dict) -> str:
    """One run's table as Markdown. It opens with the model's own line (``fvnum.row_groups.model_line``: trained
    X against its prediction Y, the row's name, the ratio), then the audit on its own contexts, then the trained
    loss and every theory row grouped by what it is to this model (``fvnum.row_groups.grouped_rows``: its
    prediction, the bounds and references of its class, then each other class with why its bounds do not bound
    this model), the learned routing."""
    from fvnum.row_groups import grouped_rows, loss_format, model_line, role_text, se_cell
    from fvnum.theory import describe_rows

    t = table["trained"]
    pred = prediction_of(table)
    lines = [
        f"### Model {table['model']}, {table['prior']} prior, {_size(table)}, budget {table['budget']}, "
        f"N {table['n_tokens']}, seed {table['seed']} (tau = {table['tau']:.4f})", "",
        model_line(table["model"], pred, (t["loss"], t["stderr"]), held_as=table.get("theory_model")), "",
    ]
    if table.get("audit"):
        lines += [audit_line(table), ""]
    lines += [
        "| what | loss | ± | how | role | class | keys | channel |",
        "|---|---|---|---|---|---|---|---|",
        f"| **trained Model {table['model']}** | **{t['loss']:{loss_format(t['loss'])}}** | "
        f"{se_cell({'value': t['loss'], 'stderr': t['stderr']})} "
        f"| {t['steps']} steps, {t['wall_s']:.0f} s, {t.get('n', '?')} held-out contexts | | | "
        f"{_keys_of(table['model'])} | tokens |",
    ]
    rows = describe_rows(table["theory"])
    own = pred["class"] if pred else None
    for title, group in grouped_rows(rows, None if pred is None else pred["name"]):
        lines.append(f"| *{title}* | | | | | | | |")
        for r in group:
            lines.append(f"| {r['name']} ({short_what(r.get('what', ''))}) | {r['value']:{loss_format(r['value'])}} | "
                         f"{se_cell(r)} | "
                         f"{r.get('how', '')} | {role_text(r, own)} | {r['class']} | {r['keys']} | "
                         f"{r.get('channel', 'tokens')} |")  # tables stored before rows carried their channel: tokens
    glossary = [f"- `{r['name']}`: {r['what']}" for r in rows if r.get("what") and short_what(r["what"]) != r["what"]]
    if glossary:
        lines += ["", "The rows in full:", "", *glossary]
    routing = table.get("routing")
    if routing:
        lines += ["", "Learned routing (energy of each layer's Stein rows):", ""]
        by = "depth" if table.get("depth") is not None else "coordinate"  # a prior without levels
        for layer in routing["layers"]:
            for ch, info in enumerate(layer["channels"]):
                depth = ", ".join(f"{e:.2f}" for e in info["energy_by_depth"])
                extra = ""
                if "on_path_node" in info:
                    extra = (f"; on path node {info['on_path_node']:.2f}, in its subtree "
                             f"{info['in_path_subtree']:.2f}, strongest = path node {info['top_is_path_node']:.0%}")
                lines.append(f"- layer {layer['layer']} channel {ch + 1}: energy by {by} [{depth}]{extra}")
        if "design_top_nodes" in routing:
            lines.append(f"- learned design: strongest node of each row {routing['design_top_nodes']}, "
                         f"energy on the top-levels nodes {routing['design_energy_on_top_levels']:.2f}")
    return "\n".join(lines) + "\n"


def audit_line(table: dict) -> str:
    """The audit of a run's own readings in one line, on its own contexts: the model's loss there, Bayes on its
    readings and the gap between them (paired, the same contexts), and why the model's loss there differs from
    the held-out loss of the table's first line (another sample of contexts)."""
    from fvnum.estimate import value_text

    a, t = table["audit"], table["trained"]
    own = a.get("loss")  # audits stored before the model's loss was kept: none
    model = f"model {value_text(own['value'], own['stderr'])}, " if own else ""
    why = (f"; the trained {t['loss']:.4f} above is on the {t.get('n', '?')} held-out contexts, another sample"
           if own else "")
    return (f"Audit of its readings, all on the audit's own {a['samples']} contexts: {model}Bayes on its readings "
            f"{value_text(a['bayes_on_readings']['value'], a['bayes_on_readings']['stderr'])}, decoder gap "
            f"(model - Bayes, paired) {value_text(a['decoder_gap']['value'], a['decoder_gap']['stderr'], '+.4f')}"
            f"{why} ({a['decoder']})")


SHORT_WHAT = 72  # characters of a row's description in a table; the whole definition goes in the glossary below


def short_what(what: str, width: int = SHORT_WHAT) -> str:
    """A row's description as a table cell shows it: its head (up to the first parenthesis, ``;`` or ``:``, the
    first that fits), else cut at a word to ``width`` characters with an ellipsis; the whole text is the table's
    glossary entry (:func:`to_markdown`)."""
    text = " ".join(str(what).split())
    if len(text) <= width:
        return text
    for mark in (" (", "; ", ": "):
        head = text.split(mark, 1)[0]
        if 0 < len(head) <= width:
            return head + " …"
    cut = text[:width - 2].rsplit(" ", 1)[0]
    return cut + " …"


def grid_checks(tables: list[dict]) -> list[dict]:
    """The predictions of docs/theory.md section 7 (``fvnum.theory.prediction_checks``: the tree prior's and the
    matched Gaussian's, with their thresholds) checked on every (depth, budget) cell of the grid, seeds
    averaged. Cells missing from the grid are skipped."""
    from fvnum.priors.registry import PRIORS
    from fvnum.theory import prediction_checks as checks_of  # one cell's checks; this function: a grid's

    def mean_loss(prior, depth, budget, model):
        ls = [t["trained"]["loss"] for t in tables
              if (t["prior"], t["depth"], t["budget"], t["model"]) == (prior, depth, budget, model)]
        return sum(ls) / len(ls) if ls else None

    def theory(prior, depth, budget):  # the rows of the cell's first table
        for t in tables:
            if (t["prior"], t["depth"], t["budget"]) == (prior, depth, budget):
                return {r["name"]: r["value"] for r in reversed(t["theory"])}
        return {}

    checks = []
    present = [name for name in PRIORS if any(t["prior"] == name for t in tables)]  # in the registry's order
    for depth, budget in sorted({(t["depth"], t["budget"]) for t in tables}):
        for prior in present:
            losses = {m: v for m in MODELS if (v := mean_loss(prior, depth, budget, m)) is not None}
            checks += checks_of(prior, depth, budget, losses, theory(prior, depth, budget))
    return checks


def _keys_of(model: str) -> str:
    """``MLP`` or ``linear``: the keys of a stored table's model (``?`` for a model not registered now)."""
    spec = MODELS.get(model)
    return "?" if spec is None else "MLP" if spec.mlp_keys else "linear"


def seed_summary(tables: list[dict]) -> list[dict]:
    """One row per (prior, depth, budget, model): trained ``mean``, ``spread`` (standard deviation over seeds; None
    for one seed, which has none: it prints as ``(1 seed)``, :func:`seeds_text`), ``n_seeds``, the ``prediction`` row (name, value, stderr), the mean beside it (``difference`` =
    mean - prediction, ``difference_se``, and ``ratio`` = mean / prediction, None where the prediction is 0
    within its error: :func:`beside_prediction`), and where every seed has an audit the means of its
    ``bayes_on_readings``, ``decoder_gap`` and of the model's own loss on the audit's contexts (``audit_loss``, the
    sample the other two are on; ``audit_samples`` contexts), not the held-out sample of ``mean``."""
    import statistics

    groups: dict = {}
    for t in tables:
        groups.setdefault((t["prior"], t["depth"], t["budget"], t["model"]), []).append(t)
    out = []
    for (prior, depth, budget, model), ts in sorted(groups.items()):
        losses = [t["trained"]["loss"] for t in ts]
        mean = statistics.mean(losses)
        pred = prediction_of(ts[0])
        row = {"prior": prior, "depth": depth, "budget": budget, "model": model, "mean": mean,
               "spread": statistics.stdev(losses) if len(losses) > 1 else None, "n_seeds": len(losses),
               "prediction": None if pred is None else pred["name"],
               "prediction_value": None if pred is None else pred["value"],
               "prediction_stderr": None if pred is None else pred.get("stderr"),
               **_beside_mean(ts, mean, pred)}
        audits = [t["audit"] for t in ts if t.get("audit")]
        if audits and len(audits) == len(ts):
            row["bayes_on_readings"] = statistics.mean(a["bayes_on_readings"]["value"] for a in audits)
            row["decoder_gap"] = statistics.mean(a["decoder_gap"]["value"] for a in audits)
            row["audit_samples"] = audits[0]["samples"]
            if all(a.get("loss") for a in audits):  # the model's loss on the audit's own contexts (the gap's)
                row["audit_loss"] = statistics.mean(a["loss"]["value"] for a in audits)
        out.append(row)
    return out


def _beside_mean(tables: list[dict], mean: float, pred: dict | None) -> dict:
    """``ratio``, ``difference`` and ``difference_se`` of the seeds' mean loss (its standard error from the
    runs' own: sqrt(sum se^2) / n) beside the prediction (:func:`beside_prediction`); None without one."""
    if pred is None:
        return {"ratio": None, "difference": None, "difference_se": None}
    se = float(np.sqrt(sum((t["trained"].get("stderr") or 0.0) ** 2 for t in tables))) / len(tables)
    b = beside_prediction(mean, se, pred["value"], pred.get("stderr"))
    return {k: b[k] for k in ("ratio", "difference", "difference_se")}


def seeds_text(mean: float, spread: float | None, n_seeds: int) -> str:
    """``0.1441 (1 seed)`` or ``0.1302 ± 0.011 (3 seeds)``: a seed mean with its spread over seeds; one seed has no
    spread to show (never ``± 0``)."""
    if n_seeds < 2 or spread is None:
        return f"{mean:.4f} ({n_seeds} seed{'s' if n_seeds != 1 else ''})"
    return f"{mean:.4f} ± {spread:.2g} ({n_seeds} seeds)"


def summary_markdown(summary: list[dict]) -> str:
    """:func:`seed_summary` as a Markdown table: each model's mean beside its prediction as a ratio, or where the
    prediction is 0 within its error as the difference (trained - prediction) with its standard error. The audit's
    columns are on the audit's own contexts (``audit_samples``): the model's loss there, Bayes on its readings and
    the gap between the two add up; the trained column is the held-out evaluation's, another sample."""
    audited = [r for r in summary if "bayes_on_readings" in r]
    where = "on the audit's own contexts"
    lines = ["| prior | depth | budget | model | trained, held out: mean ± spread (seeds) | prediction | trained / "
             f"prediction (or the difference) | model {where} (how many) | Bayes on its readings {where} | decoder gap "
             f"(model - Bayes, paired) |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in summary:
        pred = "" if r["prediction"] is None else (f"{r['prediction']} {r['prediction_value']:.4f}"
                                                   f"{_se(r.get('prediction_stderr'), r['prediction_value'])}")
        ratio = "" if r.get("difference") is None else beside_text(r)
        model = (f"{r['audit_loss']:.4f} ({r.get('audit_samples', '?')})" if "audit_loss" in r
                 else f"({r['audit_samples']})" if "audit_samples" in r else "")
        bayes = f"{r['bayes_on_readings']:.4f}" if "bayes_on_readings" in r else ""
        gap = f"{r['decoder_gap']:+.4f}" if "decoder_gap" in r else ""
        lines.append(f"| {r['prior']} | {r['depth']} | {r['budget']} | {r['model']} | "
                     f"{seeds_text(r['mean'], r['spread'], r['n_seeds'])} | {pred} | {ratio} | {model} | {bayes} | {gap} |")
    if audited:
        lines += ["", f"The trained column is each model's loss on the held-out evaluation contexts; the last three "
                  f"columns are {where} (`fv audit`), a smaller sample: there the model's loss minus Bayes is the "
                  f"decoder gap, and the model's loss differs from the held-out one by sampling."]
    return "\n".join(lines) + "\n"


def grid_markdown(tables: list[dict], checks: list[dict]) -> str:
    """The experiment grid's ``table.md`` (``fv compare --grid``): the seed summary (each model beside its
    prediction), the prediction checks, then every run's table."""
    md = ["# Experiment grid: trained models beside the theory", "",
          "Each model beside its one prediction row (A: the best adaptive policy found for its keys, B: the best "
          "one-layer design found, C: the exact linear theory). A keyed row is the best found within its key "
          "family: an upper bound on that family's optimum, not a bound on a trained model.", "",
          summary_markdown(seed_summary(tables)), ""]
    md += ["| prediction | measured | holds |", "|---|---|---|"]
    md += [f"| {c['prediction']} | {c['measured']} | {'yes' if c['holds'] else 'no'} |" for c in checks]
    md += [""] + [to_markdown(t) for t in tables]
    return "\n".join(md) + "\n"
