"""Softmax against linear aggregation, trained (issue 31, item 3; docs/softmax.md).

Command: ``PYTHONPATH=. python studies/softmax/study.py [--depth=4] [--budgets=1,2,3,4] [--seeds=0,1,2]
[--models=ABC] [--steps-per-budget=2000 | --steps=scaling] [--phase=theory|train] [--samples=1000]
[--families=weighted,softmax] [--table] [--contrasts] [--figure]``. ``--contrasts`` prints A / B under each
aggregation, each model's softmax over its linear twin and the theory's same ratios.

``--depth=7 --steps=scaling``: the scaling study's cell with its own recipe (A 5000, B and C 2500 steps a
budget): each softmax run is the committed run's ``command`` of studies/scaling/scaling.json with ``--attention
softmax`` added, and its linear twin is that committed run, read from scaling.json, not trained again.

On the tree prior (alpha 0.6, N 64, s2 0.01; depth 4 by default, the cell of ``fv reproduce``, or 7, the
scaling study's): every model A, B, C at every budget and seed is trained twice with the same recipe and steps,
once with linear attention (the theory's aggregation) and once with ``--attention softmax``; beside them the
keyed prediction rows of both families (``fvnum.theory.keyed_curves``: the greedy adaptive policy for A, the best
one-layer design for B, under ``weighted`` keys and under ``softmax`` scores) and C's exact linear theory, and
under softmax C's linear readout of the top levels' softmax readings (``fvnum.linear_theory.top_levels_softmax``).

Runs live in ``studies/softmax/train/<key>/`` (git-ignored) and resume after interruption; every finished run and
every theory row is added to ``studies/softmax/study.json`` at once (atomically). ``--table`` prints the table of
docs/softmax.md from study.json without computing anything.

The matched Gaussian cell (``--prior=gaussian``; docs/softmax.md, section "The matched Gaussian prior"):
``PYTHONPATH=. python studies/softmax/study.py --prior=gaussian [--budgets=1,2,3] [--seeds=0] [--models=AB]
[--steps-per-budget=2000] [--phase=train|theory] [--table] [--paired]``: Models A and B, linear and softmax, on
``theta ~ N(0, C)`` with ``C`` the covariance of the tree cell (``--cov matched``, depth 4, alpha 0.6: the same
``D = 15`` and second moments, so only the tree's non-Gaussianity differs), same recipe and steps as the tree
cell; beside them the one-layer keyed rows (weighted and linear keys; no softmax row is searched on a Gaussian
prior). Results in ``studies/softmax/gaussian.json`` (the shape of study.json; runs ``<model>-<attention>-G4-B<b>-s0``),
resumable. ``--table`` prints its table; ``--paired`` evaluates A and B of each budget on the same 8192 fresh
contexts and prints (and stores) ``loss(A) - loss(B)`` with its paired standard error.
"""
import fvnum
import json
import os
import sys

from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.runs.store import update_json, write_atomic
from bridges.runs.options import script_options
from bridges.studies.scaling import command_of, config_of_command

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "study.json")
CELL = {"alpha": 0.6, "tokens": 64, "s2": 0.01}
THEORY_SAMPLES = 1000


def load(path: str = OUT) -> dict:
    """study.json (or gaussian.json): its runs and theory rows; one that is damaged or not the study's is a one-line
    InputError (restore it first), never a fresh start over committed results."""
    from bridges.runs.options import study_json

    doc = study_json(path, "runs and theory rows") or {"runs": {}, "theory": {}}
    if set(doc) != {"runs", "theory"}:
        raise SystemExit(f"{path} is not the study's runs and theory rows; restore it (git checkout) first")
    return doc


def save(kind: str, name: str, entry: dict, path: str = OUT) -> None:
    """Add one entry (under a lock: two processes of this script, one per core, may finish runs at once)."""
    update_json(path, lambda data: data[kind].__setitem__(name, entry), {"runs": {}, "theory": {}}, sort_keys=True)


def config(model: str, budget: int, seed: int, depth: int, attention: str, steps_per_budget: int,
           prior: str = "tree") -> RunConfig:
    """The run of the tree cell (or, ``prior="gaussian"``, of its matched Gaussian), its run folder
    studies/softmax/train (relative to the repository's root)."""
    cov = {"cov": "matched"} if prior == "gaussian" else {}
    return RunConfig(DataConfig(prior=prior, **cov, depth=depth, alpha=CELL["alpha"], n_tokens=CELL["tokens"],
                                s2=CELL["s2"]),
                     ModelConfig(model, budget, attention=attention),
                     TrainConfig(steps=steps_per_budget * budget, seed=seed, threads=1, out="studies/softmax/train"))


SCALING = os.path.join(os.path.dirname(os.path.dirname(HERE)), "studies", "scaling", "scaling.json")  # the repository's


def scaling_twin(model: str, budget: int, seed: int) -> dict:
    """The committed linear run of the scaling study (studies/scaling/scaling.json: depth 7, alpha 0.6, N 64) of
    this model, budget and seed: the linear twin of a softmax run trained with the same command."""
    with open(SCALING) as f:
        runs = json.load(f)["runs"]
    found = [r for r in runs if (r["model"], r["budget"], r["seed"]) == (model, budget, seed)]
    if not found:
        raise SystemExit(f"{model} B{budget} s{seed}: no run of the scaling study (studies/scaling/scaling.json)")
    return found[0]


def scaling_config(model: str, budget: int, seed: int, attention: str) -> RunConfig:
    """The scaling study's run (its recipe's steps, batch and learning rate, read from its command in scaling.json)
    with ``attention`` and its run folder studies/softmax/train."""
    twin = config_of_command(scaling_twin(model, budget, seed)["command"])
    return twin.replace(model=dict(attention=attention), train=dict(out="studies/softmax/train"))


def train_twin(model: str, budget: int, seed: int) -> None:
    """The scaling study's cell (``--steps=scaling``, depth 7): the softmax run trained with the scaling study's
    own command, beside its linear twin, which is the committed run of the study (not trained again)."""
    twin = scaling_twin(model, budget, seed)
    name = f"{model}-linear-K7-B{budget}-s{seed}"
    if name not in load()["runs"]:
        save("runs", name, {"model": model, "attention": "linear", "depth": 7, "budget": budget, "seed": seed,
                            "key": twin["key"], "command": twin["command"], "loss": twin["loss"],
                            "stderr": twin["stderr"], "steps": twin["steps"],
                            "train_seconds": twin.get("train_seconds"), "source": "studies/scaling/scaling.json"})
    name = f"{model}-softmax-K7-B{budget}-s{seed}"
    if name not in load()["runs"]:
        _train(name, scaling_config(model, budget, seed, "softmax"),
               {"model": model, "attention": "softmax", "depth": 7, "budget": budget, "seed": seed}, OUT)


def _train(name: str, run: RunConfig, entry: dict, out: str) -> None:
    """Train ``run`` (its folder under studies/softmax/train) and add its typed result to ``out`` as run ``name``:
    ``entry`` with the run's key, command, loss, stderr, steps and training seconds."""
    from bridges.training.train import train

    root = os.path.dirname(os.path.dirname(HERE))  # the run folder is relative to the repository's root
    result = train(run.replace(train=dict(out=os.path.join(root, run.train.out))), progress=False)
    save("runs", name, {**entry, "key": run.key(), "command": command_of(run), "loss": result.loss,
                        "stderr": result.stderr, "steps": result.steps, "train_seconds": result.train_seconds}, out)
    print(f"{name}: {result.loss:.4f} ± {result.stderr:.4f}", flush=True)


def train_one(model: str, budget: int, seed: int, depth: int, attention: str, steps_per_budget: int,
              prior: str = "tree") -> None:
    """Train one run of the tree cell (``prior="tree"``, results in study.json) or of its matched Gaussian
    (``prior="gaussian"``, results in gaussian.json), unless its results are there already."""
    gaussian = prior == "gaussian"
    name = f"{model}-{attention}-{'G' if gaussian else 'K'}{depth}-B{budget}-s{seed}"
    out = GAUSSIAN_OUT if gaussian else OUT
    if name in load(out)["runs"]:
        return
    _train(name, config(model, budget, seed, depth, attention, steps_per_budget, prior), {"model": model, "attention": attention, **({"prior": "gaussian"} if gaussian else {}),
                        "depth": depth, "budget": budget, "seed": seed}, out)


def theory(depth: int, budgets: list[int], samples: int = THEORY_SAMPLES,
           families: tuple = ("weighted", "softmax")) -> None:
    """The keyed rows of ``families`` (both by default) on ``samples`` samples and C's exact linear theory at
    every budget (seed 0); a family's rows record their sample count (``samples``)."""
    from fvnum.mc.channels import make_channel
    from fvnum.theory import keyed_curves
    from fvnum.linear_theory import lmmse, top_levels_rows
    from fvsym.priors import TreePrior

    prior = TreePrior(depth, str(CELL["alpha"]))
    channel = make_channel(prior, fvnum.tokens(CELL["tokens"], s2=CELL["s2"]))
    for family in families:
        name = f"K{depth}-{family}"
        if name in load()["theory"]:
            continue
        curves = keyed_curves(prior, budgets, channel, family, samples=samples, seed=0)
        save("theory", name, {str(b): [{**row.to_dict(), "samples": samples} for row in rows]
                              for b, rows in curves.items()})
        print(f"theory {name} done", flush=True)
    name = f"K{depth}-softmax-linear"  # Model C's row under softmax: its linear readout of softmax readings
    if name not in load()["theory"]:
        from fvnum.linear_theory import top_levels_softmax

        rows = {}
        for b in budgets:
            dec, beta = top_levels_softmax(prior, b, channel)
            rows[str(b)] = [{"name": "top_levels_softmax", "value": dec.loss, "stderr": 0.0, "beta": beta.tolist()}]
        save("theory", name, rows)
        print(f"theory {name} done", flush=True)
    name = f"K{depth}-linear"
    if name not in load()["theory"]:
        dim = 2**depth - 1
        save("theory", name, {str(b): [{"name": "top_levels_linear", "value": float(lmmse(prior, top_levels_rows(dim, b),
                                                                                          channel).loss), "stderr": 0.0}]
                              for b in budgets})
        print(f"theory {name} done", flush=True)


PREDICTION = {"adaptive": "best_adaptive_keyed", "one_layer": "best_nonadaptive_keyed"}


def _row(theory: dict, name: str, budget: int, row: str):
    rows = [r for r in theory.get(name, {}).get(str(budget), []) if r["name"] == row]
    return rows[0] if rows else None


def _mean(runs: list[dict]) -> str:
    if not runs:
        return "—"
    losses = [r["loss"] for r in runs]
    mean = sum(losses) / len(losses)
    spread = (sum((x - mean) ** 2 for x in losses) / (len(losses) - 1)) ** 0.5 if len(losses) > 1 else None
    return f"{mean:.4f}" + (f" ± {spread:.4f}" if spread is not None else "") + f" ({len(losses)})"


def table(depth: int = 4) -> str:
    """Per model and budget: trained linear and softmax (seed mean ± SD (seeds)) beside the prediction rows of
    both families (A: the adaptive keyed policy; B and C: the best one-layer design; C also its exact linear
    theory), and softmax / its prediction."""
    from bridges.models.registry import BUILT_IN, MODELS

    MODELS = {m: MODELS[m] for m in BUILT_IN}  # the models this study trained (A, B, C)

    data = load()
    lines = ["| model | B | trained, linear | prediction, linear (weighted keys; C: exact) | trained, softmax | "
             "prediction, softmax | softmax trained / prediction |", "|---|---|---|---|---|---|---|"]
    budgets = sorted({r["budget"] for r in data["runs"].values() if r["depth"] == depth})
    for model in MODELS:
        spec = MODELS[model]
        row = PREDICTION["adaptive" if spec.adaptive else "one_layer"]
        for b in budgets:
            runs = {a: [r for r in data["runs"].values() if (r["model"], r["depth"], r["budget"], r["attention"])
                        == (model, depth, b, a)] for a in ("linear", "softmax")}
            if not runs["linear"] and not runs["softmax"]:
                continue
            lin = (_row(data["theory"], f"K{depth}-linear", b, "top_levels_linear") if not spec.mlp_keys
                   else _row(data["theory"], f"K{depth}-weighted", b, row))
            # C reads its softmax readings with its linear readout: its row is that readout's loss under the law
            soft = (_row(data["theory"], f"K{depth}-softmax", b, row) if spec.mlp_keys
                    else _row(data["theory"], f"K{depth}-softmax-linear", b, "top_levels_softmax"))
            ratio = "—"
            if soft and runs["softmax"]:
                ratio = f"{sum(r['loss'] for r in runs['softmax']) / len(runs['softmax']) / soft['value']:.2f}"
            show = (lambda r: "—" if r is None else f"{r['value']:.4f}" + (f" ± {r['stderr']:.4f}" if r.get("stderr")
                                                                           else ""))
            lines.append(f"| {model} | {b} | {_mean(runs['linear'])} | {show(lin)} | {_mean(runs['softmax'])} | "
                         f"{show(soft)} | {ratio} |")
    return "\n".join(lines)


def contrasts(depth: int = 4) -> str:
    """Per budget, from the seed means: the adaptive model over the one-layer one with MLP keys (A / B) under
    each aggregation, each model's softmax over its linear twin, and what the theory says of the same: the
    one-layer softmax row over the weighted one (the cost of self-normalisation to the best design found) and
    the adaptive rows' A / B."""
    from bridges.models.registry import BUILT_IN, MODELS

    MODELS = {m: MODELS[m] for m in BUILT_IN}  # the models this study trained (A, B, C)

    data = load()
    adaptive = next(m for m, s in MODELS.items() if s.adaptive and s.mlp_keys)
    one_layer = next(m for m, s in MODELS.items() if not s.adaptive and s.mlp_keys)
    runs = data["runs"].values()

    def mean(model, b, attention):
        losses = [r["loss"] for r in runs if (r["model"], r["depth"], r["budget"], r["attention"]) == (model, depth, b,
                                                                                                       attention)]
        return sum(losses) / len(losses) if losses else None

    def ratio(x, y):
        return "—" if x is None or y is None else f"{x / y:.2f}"

    def row(family, b, name):
        r = _row(data["theory"], f"K{depth}-{family}", b, name)
        return r["value"] if r else None

    head = (f"| B | {adaptive} / {one_layer}, linear | {adaptive} / {one_layer}, softmax | theory {adaptive} / "
            f"{one_layer}, weighted; softmax | " + " | ".join(f"{m} softmax / linear" for m in MODELS)
            + " | theory one-layer softmax / weighted |")
    lines = [head, "|" + "---|" * (5 + len(MODELS))]
    budgets = sorted({r["budget"] for r in runs if r["depth"] == depth})
    for b in budgets:
        theory_ab = "; ".join(ratio(row(f, b, PREDICTION["adaptive"]), row(f, b, PREDICTION["one_layer"]))
                              for f in ("weighted", "softmax"))
        lines.append(f"| {b} | {ratio(mean(adaptive, b, 'linear'), mean(one_layer, b, 'linear'))} | "
                     f"{ratio(mean(adaptive, b, 'softmax'), mean(one_layer, b, 'softmax'))} | {theory_ab} | "
                     + " | ".join(ratio(mean(m, b, "softmax"), mean(m, b, "linear")) for m in MODELS)
                     + f" | {ratio(row('softmax', b, PREDICTION['one_layer']), row('weighted', b, PREDICTION['one_layer']))} |")
    return "\n".join(lines)


def figure(depth: int = 4) -> str:
    """Loss against budget per model: trained linear and softmax (points, seed mean) beside the prediction rows of
    both families (lines); written to studies/softmax/fig_K<depth>.png (atomically)."""
    import io

    import matplotlib
    import matplotlib.ticker

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from bridges.models.registry import BUILT_IN, MODELS

    MODELS = {m: MODELS[m] for m in BUILT_IN}  # the models this study trained (A, B, C)

    data = load()
    fig, axes = plt.subplots(1, len(MODELS), figsize=(4.2 * len(MODELS), 3.6), sharey=True)
    for ax, (model, spec) in zip(axes, MODELS.items()):
        row = PREDICTION["adaptive" if spec.adaptive else "one_layer"]
        for attention, colour in (("linear", "C0"), ("softmax", "C3")):
            runs = [r for r in data["runs"].values() if (r["model"], r["depth"], r["attention"]) == (model, depth,
                                                                                                    attention)]
            budgets = sorted({r["budget"] for r in runs})
            means = [sum(r["loss"] for r in runs if r["budget"] == b) / sum(r["budget"] == b for r in runs)
                     for b in budgets]
            ax.plot(budgets, means, "o", color=colour, ms=7, mfc="none", mew=2, label=f"trained, {attention}")
            family = ("weighted" if attention == "linear" else "softmax") if spec.mlp_keys else (
                "linear" if attention == "linear" else "softmax-linear")
            name = row if spec.mlp_keys else "top_levels_linear" if attention == "linear" else "top_levels_softmax"
            curve = sorted((int(b), rows) for b, rows in data["theory"].get(f"K{depth}-{family}", {}).items())
            xs = [b for b, rows in curve if any(r["name"] == name for r in rows)]
            ys = [next(r["value"] for r in rows if r["name"] == name) for b, rows in curve if b in xs]
            ax.plot(xs, ys, "-", color=colour, alpha=0.7, label=f"prediction, {family}")
        ax.set_yscale("log")
        ax.set_xlabel("budget B")
        ax.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        ax.set_title(f"Model {model}")
        ax.grid(alpha=0.3, which="both")
    axes[0].set_ylabel("held-out loss")
    axes[0].legend(fontsize=8)
    fig.suptitle(f"tree depth {depth}, alpha {CELL['alpha']}, N {CELL['tokens']}: linear against softmax aggregation")
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    path = os.path.join(HERE, f"fig_K{depth}.png")
    write_atomic(path, buffer.getvalue())
    return path


# --- the matched Gaussian cell (issue 31, item 3: "on the Gaussian prior does it still not [beat one layer]") ---
GAUSSIAN_OUT = os.path.join(HERE, "gaussian.json")  # the shape of study.json; run names ``<model>-<attention>-G..``
PRIORS = ("tree", "gaussian")


def gaussian_theory(depth: int, budgets: list[int]) -> None:
    """The one-layer keyed rows on the matched Gaussian, weighted and linear keys (``keyed_curves``: on a
    Gaussian prior no adaptive keyed search exists and none is needed, Theorem G1: the one-layer row is the
    prediction of A and of B). Softmax rows are searched on the tree prior only (docs/theory.md section 11.1)."""
    from bridges.runs.config import DataConfig
    from bridges.training.data import data_channel, fv_prior
    from fvnum.theory import keyed_curves

    data = DataConfig(prior="gaussian", cov="matched", depth=depth, alpha=CELL["alpha"], n_tokens=CELL["tokens"],
                      s2=CELL["s2"])
    for family in ("weighted", "linear"):
        name = f"G{depth}-{family}"
        if name in load(GAUSSIAN_OUT)["theory"]:
            continue
        curves = keyed_curves(fv_prior(data), budgets, data_channel(data), family, samples=THEORY_SAMPLES, seed=0)
        save("theory", name, {str(b): [row.to_dict() for row in rows] for b, rows in curves.items()}, GAUSSIAN_OUT)
        print(f"theory {name} done", flush=True)


def gaussian_table(depth: int = 4) -> str:
    """Per budget: trained A and B (seed 0: loss ± its held-out standard error), linear and softmax, their ratio
    A / B (depth over one layer) beside the tree cell's, and the one-layer keyed rows (the prediction of both)."""
    data, tree = load(GAUSSIAN_OUT), load()

    def run(source, model, attention, b, prior):
        found = [r for r in source["runs"].values() if (r["model"], r["attention"], r["depth"], r["budget"],
                                                         r.get("prior", "tree")) == (model, attention, depth, b, prior)
                 and r["seed"] == 0]
        return found[0] if found else None

    def ratio(a, b):
        if a is None or b is None:
            return "—"
        r = a["loss"] / b["loss"]
        return f"{r:.3f} ± {r * ((a['stderr'] / a['loss']) ** 2 + (b['stderr'] / b['loss']) ** 2) ** 0.5:.3f}"

    show = (lambda r: "—" if r is None else f"{r['loss']:.4f} ± {r['stderr']:.4f}")
    lines = ["| B | A linear | B linear | A softmax | B softmax | A / B linear | A / B softmax | A / B on the tree "
             "(linear; softmax) | one layer, weighted | one layer, linear |", "|---" * 10 + "|"]
    budgets = sorted({r["budget"] for r in data["runs"].values() if r["depth"] == depth})
    for b in budgets:
        cells = {(m, a): run(data, m, a, b, "gaussian") for m in "AB" for a in ("linear", "softmax")}
        trees = {(m, a): run(tree, m, a, b, "tree") for m in "AB" for a in ("linear", "softmax")}
        rows = [_row(data["theory"], f"G{depth}-{f}", b, "best_nonadaptive_keyed") for f in ("weighted", "linear")]
        rows = ["—" if r is None else f"{r['value']:.4f}" + (f" ± {r['stderr']:.4f}" if r.get("stderr") else "")
                for r in rows]
        lines.append(f"| {b} | " + " | ".join(show(cells[k]) for k in (("A", "linear"), ("B", "linear"), ("A", "softmax"),
                                                                        ("B", "softmax")))
                     + f" | {ratio(cells['A', 'linear'], cells['B', 'linear'])} | "
                     f"{ratio(cells['A', 'softmax'], cells['B', 'softmax'])} | "
                     f"{ratio(trees['A', 'linear'], trees['B', 'linear'])}; "
                     f"{ratio(trees['A', 'softmax'], trees['B', 'softmax'])} | {rows[0]} | {rows[1]} |")
    return "\n".join(lines)


PAIRED_CONTEXTS, PAIRED_STREAM = 8192, 3  # A and B on the same fresh contexts (training uses stream 0, evaluation 1)


def paired(depth: int = 4, n_contexts: int = PAIRED_CONTEXTS) -> str:
    """A against B on the same ``n_contexts`` fresh contexts of the Gaussian cell (seed 0, per budget and
    attention): ``loss(A) - loss(B)`` with its paired standard error, and their ratio; the runs' own held-out
    losses share their contexts too, but their standard errors are not paired. Written into gaussian.json
    (``paired``) and returned as a table."""
    import torch

    from bridges.analysis.audit import load_run
    from bridges.training.data import ContextSampler

    data = load(GAUSSIAN_OUT)
    lines = ["| B | attention | A | B | A - B (paired) | A / B |", "|---|---|---|---|---|---|"]
    found = {}
    for b in sorted({r["budget"] for r in data["runs"].values() if r["depth"] == depth}):
        for attention in ("linear", "softmax"):
            runs = {m: data["runs"].get(f"{m}-{attention}-G{depth}-B{b}-s0") for m in "AB"}
            if None in runs.values():
                continue
            losses = {}
            for m, run in runs.items():
                result = load_run(os.path.join(HERE, "train", run["key"]))
                model, cfg = result.model.eval(), result.config.data
                sampler = ContextSampler(cfg)
                per = []
                with torch.no_grad():
                    for c in range(0, n_contexts, 512):
                        ctx = sampler.sample(512, sampler.generator(0, PAIRED_STREAM, c // 512))
                        out = model(ctx.x, ctx.y, ctx.x_q)
                        per.append(((out.theta_hat.double() - ctx.theta.double()) ** 2).sum(-1))
                losses[m] = torch.cat(per).numpy()
            d = losses["A"] - losses["B"]
            entry = {"A": float(losses["A"].mean()), "B": float(losses["B"].mean()), "difference": float(d.mean()),
                     "stderr": float(d.std(ddof=1) / len(d) ** 0.5), "n": len(d)}
            found[f"G{depth}-B{b}-{attention}"] = entry
            se = {m: losses[m].std(ddof=1) / len(d) ** 0.5 for m in "AB"}
            lines.append(f"| {b} | {attention} | {entry['A']:.4f} ± {se['A']:.4f} | {entry['B']:.4f} ± {se['B']:.4f} | "
                         f"{entry['difference']:+.4f} ± {entry['stderr']:.4f} | {entry['A'] / entry['B']:.4f} |")
    save("theory", "paired", found, GAUSSIAN_OUT)
    return "\n".join(lines)


def _numbers(opts: dict, depth: int, budgets: str, seeds: str):
    """``(budgets, seeds, steps per budget)`` read from the options (defaults ``budgets`` and ``seeds``), or
    None after one line on stderr naming what was given."""
    try:
        budgets = [int(b) for b in opts.get("budgets", budgets).split(",")]
        seeds = [int(s) for s in opts.get("seeds", seeds).split(",")]
        steps = int(opts.get("steps-per-budget", 2000))
        if not all(1 <= b <= 2**depth - 1 for b in budgets) or min(seeds) < 0 or steps < 1:
            raise ValueError
    except ValueError:
        print(f"--budgets (1..{2**depth - 1}), --seeds (>= 0) and --steps-per-budget (>= 1) take integers separated by "
              f"commas, got {opts.get('budgets')!r}, {opts.get('seeds')!r}, {opts.get('steps-per-budget')!r}",
              file=sys.stderr)
        return None
    return budgets, seeds, steps


def _gaussian_main(opts: dict, depth: int) -> int:
    if "table" in opts:
        print(gaussian_table(depth))
        return 0
    if "paired" in opts:
        print(paired(depth))
        return 0
    numbers = _numbers(opts, depth, "1,2,3", "0")
    if numbers is None:
        return 2
    budgets, seeds, steps = numbers
    if set(opts.get("models", "AB")) - set("AB") or opts.get("phase", "train") not in ("train", "theory"):
        print(f"--models takes A and B, --phase train or theory, got {opts.get('models')!r}, {opts.get('phase')!r}",
              file=sys.stderr)
        return 2
    phases = [opts["phase"]] if "phase" in opts else ["train", "theory"]
    if "train" in phases:
        for seed in seeds:
            for budget in budgets:
                for model in opts.get("models", "AB"):
                    for attention in ("linear", "softmax"):
                        train_one(model, budget, seed, depth, attention, steps, "gaussian")
    if "theory" in phases:
        gaussian_theory(depth, budgets)
    return 0


def main(argv: list[str]) -> int:
    opts = script_options(argv, {"depth", "budgets", "seeds", "models", "steps-per-budget", "phase", "table",
                                 "figure", "prior", "paired", "steps", "samples", "families", "contrasts"})
    if opts.get("prior", "tree") not in PRIORS:
        print(f"--prior must be one of {', '.join(PRIORS)}, got {opts['prior']!r}", file=sys.stderr)
        return 2
    if opts.get("prior") == "gaussian":
        if opts.get("depth", "4") not in ("4", "7"):
            print(f"--depth of the Gaussian cell is 4 or 7 (the tree cells it matches), got {opts['depth']!r}",
                  file=sys.stderr)
            return 2
        return _gaussian_main(opts, int(opts.get("depth", 4)))
    if opts.get("depth", "4") not in ("4", "7"):
        print(f"--depth of the tree cell is 4 (fv reproduce's) or 7 (the scaling study's), got {opts['depth']!r}",
              file=sys.stderr)
        return 2
    depth = int(opts.get("depth", 4))
    if "table" in opts or "figure" in opts or "contrasts" in opts:
        print(table(depth) if "table" in opts else contrasts(depth) if "contrasts" in opts else figure(depth))
        return 0
    numbers = _numbers(opts, depth, "1,2,3,4", "0,1,2")
    if numbers is None:
        return 2
    budgets, seeds, steps = numbers
    if set(opts.get("models", "ABC")) - set("ABC") or opts.get("phase", "train") not in ("train", "theory"):
        print(f"--models takes A, B and C, --phase train or theory, got {opts.get('models')!r}, "
              f"{opts.get('phase')!r}", file=sys.stderr)
        return 2
    twins = opts.get("steps") == "scaling"
    if "steps" in opts and not twins:
        print(f"--steps takes one value, scaling (the scaling study's own commands), got {opts['steps']!r}",
              file=sys.stderr)
        return 2
    if twins and depth != 7:
        print(f"--steps=scaling trains the scaling study's cell, depth 7, got --depth={depth}", file=sys.stderr)
        return 2
    phases = [opts["phase"]] if "phase" in opts else ["theory", "train"]
    families = tuple(opts.get("families", "weighted,softmax").split(","))
    if not families or set(families) - {"weighted", "softmax"}:
        print(f"--families takes weighted and/or softmax, got {opts['families']!r}", file=sys.stderr)
        return 2
    try:
        samples = int(opts.get("samples", THEORY_SAMPLES))
    except ValueError:
        samples = 0
    if samples < 2:
        print(f"--samples must be an integer >= 2, got {opts.get('samples')!r}", file=sys.stderr)
        return 2
    if "theory" in phases:
        theory(depth, budgets, samples, families)
    if "train" in phases:
        for seed in seeds:
            for budget in budgets:
                for model in opts.get("models", "ABC"):
                    if twins:
                        train_twin(model, budget, seed)
                        continue
                    for attention in ("linear", "softmax"):
                        train_one(model, budget, seed, depth, attention, steps)
    return 0


if __name__ == "__main__":
    from bridges.runs.options import run_script

    sys.exit(run_script(main, sys.argv[1:], "study.py"))
