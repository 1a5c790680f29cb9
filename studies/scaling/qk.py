"""Model A with the query-key router (docs/theory.md section 7b) in the scaling study (issue 45, items 2, 4 and 8).

Command: ``PYTHONPATH=. python studies/scaling/qk.py train [--out DIR] [--only NAME,..] [--workers N]`` (the
unfinished planned runs, ``N`` at a time), ``... qk.py park [--out DIR]`` (the unfinished runs' checkpoints, for the
next session), ``... qk.py report [--out DIR]`` (writes studies/scaling/qk.json and fig_qk.png from the finished
runs), ``... qk.py table`` (the report's table from qk.json), ``... qk.py rerun NAME [--out DIR]`` (a committed row
trained again from its command, the comparison stored in qk.json ``reruns``).

A user of the library: every run is a ``RunConfig`` (:func:`run_of`), the study's Model A run (same data, budget,
seed and recipe) with the qk router, or with its steps multiplied (``x2``: the step-doubling check at budget 6;
``x4``: where A's curve ends, for the MLP router and the qk router). ``train`` hands the unfinished runs, in the
order of :data:`PLAN` (budget 6 first), to the run engine (``bridges.runs.engine.run_cells``, its store in
``DIR/engine``, which one process holds at a time); each cell calls ``bridges.training.train.train``, which resumes
a run from its last checkpoint, so training can be stopped at any time and started again without losing finished
steps. Run folders are local to the machine that trains them; ``qk.py park`` copies the last checkpoint of every
unfinished run to ``studies/scaling/qk/parked/<name>.pt`` (committed), and a cell that finds no checkpoint of its
run in ``DIR`` starts from its parked one: that is how a run resumes across sessions on new machines.

Run folders live in ``DIR`` (default studies/scaling/qk/train, git-ignored). ``report`` reads every finished run's
``TrainResult`` (``bridges.training.train.load_result``: its format, checksum and key checked; a damaged or planted
``result.json`` is named in one line and not reported), keeps the rows qk.json already holds for runs not in
``DIR``, and writes qk.json atomically: ``runs`` (model, router, budget, seed, steps, loss, stderr, key, command),
``prediction`` (budget -> A's prediction row of the study), ``doubling``, ``curve_end`` (the 4x runs, each with its
loss at 1x, 2x and 4x the steps and :func:`step_curve`'s geometric tail), ``law_test`` and ``tests`` (the
decided tests of regime.md, ``fvnum.laws.decided_tests``). Bad input, or a qk.json that is not the study's, is
refused in one line with exit status 2 before anything is written.
"""
import argparse
import io
import json
import math
import os
import sys

from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.runs.store import read_json, write_atomic, write_json
from bridges.studies.scaling import command_of, config_of_command
from decided import predictions, trained
from doubling import CRITERION as CONVERGED, OUT as DOUBLING

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "qk.json")
RUNS = os.path.join(HERE, "qk", "train")
PARKED = os.path.join(HERE, "qk", "parked")
BUDGETS = (3, 4, 5, 6)
SEEDS = (0, 1, 2)
TOP = max(BUDGETS)
with open(os.path.join(HERE, "scaling.json")) as _f:
    STUDY = json.load(_f)
DATA = DataConfig(prior="tree", **{k: STUDY["config"][k] for k in ("depth", "alpha", "n_tokens", "s2")})

# (name, router, budget, seed, steps factor), trained in this order: budget 6 first, then the rest of the study's
# qk runs, the step doubling at budget 6, and the two 4x runs (the MLP router's first: its 2x run is committed)
PLAN = ([(f"qk-B{b}-s{s}", "qk", b, s, 1) for b in sorted(BUDGETS, reverse=True) for s in SEEDS]
        + [("qk-B6-s0-x2", "qk", TOP, 0, 2), ("mlp-B6-s0-x4", "mlp", TOP, 0, 4), ("qk-B6-s0-x4", "qk", TOP, 0, 4)])


ABSENT = object()  # no qk.json yet (a JSON null is a damaged one)


class StudyError(ValueError):
    """Bad input or a damaged file: one line on stderr, exit status 2, nothing written."""


def study_run(budget: int, seed: int) -> dict:
    """The study's Model A run (MLP router) at ``budget`` and ``seed``."""
    (row,) = [r for r in STUDY["runs"] if r["model"] == "A" and r["budget"] == budget and r["seed"] == seed]
    return row


def run_of(router: str, budget: int, seed: int, factor: int, out: str) -> RunConfig:
    """The ``RunConfig`` of a planned run: the study's Model A run at ``budget`` and ``seed`` (its data, recipe and
    seed) with the ``router``, its steps times ``factor`` and its run folder root ``out``."""
    return RunConfig(DATA, ModelConfig(model="A", budget=budget, router=router),
                     TrainConfig(steps=factor * int(study_run(budget, seed)["steps"]), seed=seed, out=out,
                                 threads=STUDY["config"]["threads"], device=STUDY["config"]["device"]))


def shown_command(run: RunConfig) -> str:
    """The command as committed: ``fv train ...`` with the run folder the default one, relative to the repo."""
    return command_of(run, os.path.relpath(RUNS, ROOT))


def folder_of(run: RunConfig) -> str:
    return os.path.join(run.train.out, run.key())


def result_of(run: RunConfig, quiet: bool = False):
    """The finished run's ``TrainResult`` (``load_result``: format, checksum, key and fields checked), or None where
    it has not finished; a damaged or planted ``result.json`` is named in one line (unless ``quiet``) and is None."""
    from bridges.training.train import load_result

    path = os.path.join(folder_of(run), "result.json")
    if not os.path.lexists(path):
        return None
    try:
        result = load_result(path, run)
    except ValueError as exc:
        if not quiet:
            print(f"{exc}: not reported (qk.py train sets it aside and finishes the run again)", file=sys.stderr)
        return None
    return result if result.finished else None


def train_cell(name: str, run: dict) -> dict:
    """One cell of the engine: the planned run ``name`` (a ``RunConfig.to_dict``) trained, resumed from its own or
    its parked checkpoint; its typed result as a row."""
    from bridges.training.train import train

    cfg = RunConfig.from_dict(run)
    unpark(name, folder_of(cfg))
    result = train(cfg, progress=False)
    print(f"{name}: loss {result.loss:.4f}", flush=True)
    return {"key": cfg.key(), "loss": result.loss, "stderr": result.stderr, "steps": result.steps}


def train(out: str, only: list[str] | None = None, workers: int = 1) -> int:
    """Every planned run not committed and not finished in ``out``, in plan order (in the order of ``only`` where it
    is given: the runs a session can still finish first), on the run engine, ``workers`` at a time."""
    from bridges.runs.engine import SYNCHRONOUS, Cell, run_cells
    from bridges.runs.store import RunStore

    plan = {p[0]: p for p in PLAN}
    unknown = [n for n in only or () if n not in plan]
    if unknown:
        raise StudyError(f"--only: no planned run {', '.join(unknown)} (planned: {', '.join(plan)})")
    done = committed_names()
    todo = [(name, run_of(*fields, out)) for name, *fields in ([plan[n] for n in only] if only else PLAN)
            if name not in done]
    todo = [(name, run) for name, run in todo if result_of(run, quiet=True) is None]
    if not todo:
        print("every planned run is committed or finished", flush=True)
        return 0
    os.makedirs(out, exist_ok=True)
    store = RunStore(os.path.join(out, "engine"), "qk-study")  # one process at a time trains in ``out``
    for name, run in todo:  # a stored cell whose run has lost its result is trained again (train resumes it)
        if os.path.exists(store.path(f"{name}-{run.key()}")):
            os.remove(store.path(f"{name}-{run.key()}"))
    cells = [Cell(f"{name}-{run.key()}", train_cell, {"name": name, "run": run.to_dict()}, name, run.cell_config())
             for name, run in todo]
    run_cells(cells, store, scheduler=SYNCHRONOUS if workers == 1 else None, workers=workers, progress=False)
    return 0


def unpark(name: str, folder: str, parked: str = PARKED) -> bool:
    """Start run ``name`` in ``folder`` from its parked checkpoint where ``folder`` has none (``train`` checks
    that it fits the run's configuration, and sets a damaged one aside)."""
    src = os.path.join(parked, f"{name}.pt")
    if not os.path.exists(src) or os.path.exists(os.path.join(folder, "checkpoint.pt")):
        return False
    os.makedirs(folder, exist_ok=True)
    with open(src, "rb") as f:
        write_atomic(os.path.join(folder, "checkpoint.pt"), f.read())
    print(f"{name}: resumes from {os.path.relpath(src, ROOT)}", flush=True)
    return True


def park(out: str, parked: str = PARKED, dest: str | None = None) -> dict[str, int]:
    """Copy the last checkpoint of every planned run unfinished in ``out`` to ``parked/<name>.pt`` (atomically) and
    drop the parked checkpoints of runs that have finished here or are committed in ``dest``; returns name ->
    parked step."""
    import torch

    done = committed_names(dest)
    os.makedirs(parked, exist_ok=True)
    steps = {}
    for name, *fields in PLAN:
        run = run_of(*fields, out)
        target = os.path.join(parked, f"{name}.pt")
        if name in done or result_of(run, quiet=True) is not None:
            if os.path.exists(target):
                os.remove(target)
            continue
        ckpt = os.path.join(folder_of(run), "checkpoint.pt")
        if not os.path.exists(ckpt):
            continue
        with open(ckpt, "rb") as f:
            data = f.read()  # read once: the step and the copy are of the same bytes
        steps[name] = int(torch.load(io.BytesIO(data), map_location="cpu", weights_only=False)["step"])
        write_atomic(target, data)
    return steps


def cell(row: dict) -> tuple:
    """A qk.json row's place in the plan: (router, budget, seed, steps factor)."""
    return row["router"], row["budget"], row["seed"], row["factor"]


def committed(dest: str | None = None) -> dict:
    """The qk.json at ``dest`` ({} where there is none yet). One that is damaged, or is not the study's (an object
    with its ``runs``, each a row with its place in the plan) is a one-line StudyError, not a fresh start over
    committed rows."""
    dest = dest or OUT  # read when called: a test (or a caller) may point OUT elsewhere
    shown = os.path.relpath(dest, ROOT)
    fix = f"restore it (git checkout {shown}) before training, parking or reporting"
    try:
        doc = read_json(dest, ABSENT)
    except (ValueError, UnicodeDecodeError) as exc:
        raise StudyError(f"{dest} is damaged ({str(exc)[:80]}); {fix}") from None
    if doc is ABSENT:
        return {}
    runs = doc.get("runs") if isinstance(doc, dict) else None
    if not isinstance(runs, list) or not all(isinstance(r, dict) and {"router", "budget", "seed", "factor", "loss",
                                                                      "key", "command"} <= set(r) for r in runs):
        what = "no runs" if isinstance(doc, dict) else f"a JSON {type(doc).__name__}"
        raise StudyError(f"{dest} is not the study's qk.json ({what}, not an object with its rows of runs); {fix}")
    return doc


def rerun(name: str, out: str, dest: str | None = None) -> dict:
    """Train the committed row ``name`` again from its ``command`` in ``out`` (a finished run there is read back,
    not retrained) and record the comparison in ``dest``'s ``reruns``: both losses, whether they are identical,
    and the machine of the re-run (a seed gives the same numbers on the same kind of machine)."""
    from bridges.models.precision import machine
    from bridges.training.train import train as fit

    dest = dest or OUT
    doc = committed(dest)
    plan = {p[0]: p[1:] for p in PLAN}
    rows = [r for r in doc.get("runs", []) if name in plan and cell(r) == plan[name]]
    if not rows:
        raise StudyError(f"rerun: {name!r} is not a committed row of {os.path.relpath(dest, ROOT)} "
                         f"(committed: {', '.join(sorted(committed_names(dest))) or 'none'})")
    (row,) = rows
    run = config_of_command(row["command"]).replace(train=dict(out=out))
    if run.key() != row["key"]:
        raise StudyError(f"rerun {name}: its command trains {run.key()}, not the row's key {row['key']}")
    result = fit(run, progress=False)
    entry = {"command": row["command"], "loss_committed": row["loss"], "loss_rerun": result.loss,
             "identical": result.loss == row["loss"], "relative_change": result.loss / row["loss"] - 1,
             "machine": result.machine or machine("cpu"), "committed_machine": row.get("machine")}
    doc.setdefault("reruns", {})[name] = entry
    write_json(dest, doc)
    return entry


def committed_names(dest: str | None = None) -> set[str]:
    """The planned runs whose rows qk.json holds."""
    have = {cell(r) for r in committed(dest).get("runs", [])}
    return {name for name, *fields in PLAN if tuple(fields) in have}


def finished(out: str, kept: str | None = None) -> dict[str, dict]:
    """The planned runs finished in ``out``, by name: the plan's fields, the typed result's loss and the command. A
    run not finished in ``out`` but committed in the qk.json at ``kept`` keeps its committed row (run folders are
    local to the machine that trained them: a new checkout has none, and reporting there must not drop finished
    work)."""
    rows = {}
    kept_rows = {cell(r): r for r in committed(kept).get("runs", [])} if kept else {}
    for name, router, budget, seed, factor in PLAN:
        run = run_of(router, budget, seed, factor, out)
        result = result_of(run)
        if result is None:
            if (router, budget, seed, factor) in kept_rows:
                rows[name] = kept_rows[(router, budget, seed, factor)]
            continue
        row = kept_rows.get((router, budget, seed, factor))
        rows[name] = {"model": "A", "router": router, "budget": budget, "seed": seed, "steps": result.steps,
                      "factor": factor, "loss": result.loss, "stderr": result.stderr, "key": run.key(),
                      "train_seconds": result.train_seconds, "machine": result.machine,
                      # a committed row's command (an earlier spelling of the same run) is kept: it re-runs this key
                      "command": row["command"] if row and row["key"] == run.key() else shown_command(run)}
    return rows


def prediction() -> dict[str, float]:
    """A's prediction row of the study (``best_adaptive_keyed``) at every budget: qk A is held to the same."""
    return {str(b): v for b, (v, _) in predictions()["A"].items()}


def seed_means(rows: list[dict]) -> dict[int, tuple[float, float, int]]:
    """budget -> (mean loss over seeds, its standard error from the seeds' spread, number of seeds)."""
    by: dict[int, list[float]] = {}
    for r in rows:
        by.setdefault(r["budget"], []).append(r["loss"])
    out = {}
    for b, losses in sorted(by.items()):
        m = sum(losses) / len(losses)
        sd = math.sqrt(sum((x - m) ** 2 for x in losses) / (len(losses) - 1)) if len(losses) > 1 else float("nan")
        out[b] = (m, sd / math.sqrt(len(losses)), len(losses))
    return out


def mlp_doubling() -> dict | None:
    """MLP A's step doubling at budget 6, seed 0 (studies/scaling/doubling.json ``A-s0``), or None."""
    return (read_json(DOUBLING, None) or {}).get("A-s0")


def router_name(router: str) -> str:
    """A router as the pages write it: MLP or qk."""
    return "MLP" if router == "mlp" else router


def step_curve(curve: list[tuple[int, float]]) -> dict:
    """A run's loss at T, 2T and 4T steps (seed 0 at budget 6), each a run of its own cosine schedule: the change
    per doubling, and where the curve ends if every further doubling shrinks the gain by the last ratio (the
    geometric tail of Aitken's extrapolation, ``L(4T) - d r / (1 - r)`` with ``d = L(2T) - L(4T)`` and
    ``r = d / (L(T) - L(2T))``; ``None`` unless the gains shrink, ``0 < r < 1``)."""
    (t1, l1), (t2, l2), (t4, l4) = curve
    if not (t2 == 2 * t1 and t4 == 2 * t2):
        raise ValueError(f"step curve: steps {t1}, {t2}, {t4} are not T, 2T, 4T")
    d1, d2 = l1 - l2, l2 - l4
    r = d2 / d1 if d1 else float("nan")
    limit = l4 - d2 * r / (1 - r) if 0 < r < 1 else None
    return {"steps_curve": [t1, t2, t4], "loss_curve": [l1, l2, l4],
            "change_per_doubling": [(l2 - l1) / l1, (l4 - l2) / l2], "gain_ratio": r,
            "converged": abs(l4 - l2) / l2 < CONVERGED, "extrapolated": limit,
            "extrapolated_ratio": limit / prediction()[str(TOP)] if limit is not None else None}


def report(out: str, dest: str | None = None, fig: bool = True) -> dict:
    """qk.json from the runs finished in ``out`` and the rows already committed in ``dest`` (:func:`finished`); the
    decided tests and the law test once qk A has two seeds at a budget and the budgets the tests need."""
    from fvnum.decided import study_tests
    from fvnum.laws import law_test

    dest = dest or OUT
    rows = finished(out, kept=dest)
    study = [r for r in rows.values() if r["factor"] == 1 and r["router"] == "qk"]
    pred = prediction()
    means = seed_means(study)
    mlp = seed_means([r for r in STUDY["runs"] if r["model"] == "A" and r["budget"] in BUDGETS])
    per_budget = {str(b): {"qk_mean": m, "qk_se": se, "qk_seeds": n, "mlp_mean": mlp[b][0], "mlp_se": mlp[b][1],
                           "prediction": pred[str(b)], "qk_ratio": m / pred[str(b)],
                           "mlp_ratio": mlp[b][0] / pred[str(b)], "qk_over_mlp": m / mlp[b][0],
                           "in_band": 0.8 <= m / pred[str(b)] <= 1.25}
                  for b, (m, se, n) in means.items()}
    doubling = {}
    base, two = rows.get("qk-B6-s0"), rows.get("qk-B6-s0-x2")
    if base and two:
        change = (two["loss"] - base["loss"]) / base["loss"]
        doubling = {"seed": 0, "budget": TOP, "steps_T": base["steps"], "loss_T": base["loss"],
                    "stderr_T": base["stderr"], "steps_2T": two["steps"], "loss_2T": two["loss"],
                    "stderr_2T": two["stderr"], "change": change, "converged": abs(change) < CONVERGED,
                    "criterion": f"|L(2T) - L(T)| / L(T) < {CONVERGED} (studies/scaling/doubling.py)"}
    mlp2 = mlp_doubling() or {}
    earlier = {"mlp": [(study_run(TOP, 0)["steps"], mlp2.get("loss_T")), (mlp2.get("steps"), mlp2.get("loss_2T"))],
               "qk": [(r["steps"], r["loss"]) if r else (None, None) for r in (base, two)]}
    curve_end = {}
    for name, r in rows.items():
        if r["factor"] == 4:
            curve = earlier[r["router"]] + [(r["steps"], r["loss"])]
            curve_end[name] = {"router": r["router"], "steps": r["steps"], "loss": r["loss"],
                               "stderr": r["stderr"], "prediction": pred[str(TOP)], "ratio": r["loss"] / pred[str(TOP)],
                               **(step_curve(curve) if all(v is not None for p in curve for v in p) else {})}
    law = None
    pts = [(r["budget"], r["loss"]) for r in study]
    if len({b for b, _ in pts}) >= 4 and any(n > 1 for *_, n in means.values()):
        law = {"diagnostic": "fvnum.laws.law_test, seeds as points, as fit_study applies it to trained models",
               **law_test(*zip(*pts), cut=2).to_dict()}
    losses = {m: v for m, v in trained().items()}
    losses["qk A"] = {}
    for r in study:
        losses["qk A"].setdefault(r["budget"], []).append(r["loss"])
    if not any(len(v) > 1 for v in losses["qk A"].values()):
        losses.pop("qk A")
    tests = study_tests(losses, predictions(), adaptive=("A", "qk A"), one_layer=("B", "C"), reference="B")
    doc = {"regime": {k: STUDY["config"][k] for k in ("depth", "alpha", "n_tokens", "s2", "keyed")},
           "budgets": list(BUDGETS), "seeds": list(SEEDS), "planned": [p[0] for p in PLAN],
           "runs": sorted(rows.values(), key=lambda r: (r["factor"], r["router"], r["budget"], r["seed"])),
           "prediction": pred, "per_budget": per_budget, "doubling": doubling, "curve_end": curve_end,
           "law_test": law, "tests": tests, "reruns": committed(dest).get("reruns", {})}
    write_json(dest, doc)
    if fig:
        figure(doc)
    return doc


def figure(doc: dict) -> str:
    """fig_qk.png: loss against budget, MLP A and qk A (seeds and means) beside A's prediction, the 2x runs of both
    routers and the 4x runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ends = {k: v for k, v in (doc.get("curve_end") or {}).items() if "loss_curve" in v}
    fig, axes = plt.subplots(1, 2 if ends else 1, figsize=(11.5 if ends else 6.4, 4.2), squeeze=False,
                             gridspec_kw={"width_ratios": [1.4, 1]} if ends else None)
    ax = axes[0, 0]
    pred = {int(b): v for b, v in doc["prediction"].items()}
    ax.plot(sorted(pred), [pred[b] for b in sorted(pred)], "k--", label="A's prediction (best_adaptive_keyed)")
    mlp = [r for r in STUDY["runs"] if r["model"] == "A"]
    ax.plot([r["budget"] for r in mlp], [r["loss"] for r in mlp], "o", color="C0", alpha=0.35, ms=4)
    m = seed_means(mlp)
    ax.plot(sorted(m), [m[b][0] for b in sorted(m)], "-", color="C0", label="MLP A (3 seeds)")
    qk = [r for r in doc["runs"] if r["router"] == "qk" and r["factor"] == 1]
    if qk:
        ax.plot([r["budget"] for r in qk], [r["loss"] for r in qk], "s", color="C3", alpha=0.35, ms=4)
        q = seed_means(qk)
        ax.plot(sorted(q), [q[b][0] for b in sorted(q)], "-", color="C3",
                label="qk A (" + "-".join(sorted({str(v[2]) for v in q.values()})) + " seeds)")
    mlp2 = mlp_doubling()
    if mlp2:  # MLP A's step doubling at budget 6 (studies/scaling/doubling.py)
        ax.plot([TOP + 0.16], [mlp2["loss_2T"]], "v", color="C0", ms=7, label="MLP A, 2x steps")
    for r in doc["runs"]:
        if r["factor"] > 1:
            who = router_name(r["router"])
            ax.plot([r["budget"] + 0.08 * r["factor"]], [r["loss"]], "^" if r["router"] == "qk" else "v",
                    color="C3" if r["router"] == "qk" else "C0", ms=7, label=f"{who} A, {r['factor']}x steps")
    lo, hi = min(pred.values()), max(pred.values())
    ax.fill_between(sorted(pred), [0.8 * pred[b] for b in sorted(pred)], [1.25 * pred[b] for b in sorted(pred)],
                    color="0.85", label="band [0.8, 1.25] of the prediction")
    ax.set_yscale("log")
    ax.set_ylim(0.8 * lo, 1.3 * max(hi, max(r["loss"] for r in mlp)))
    ax.set_xlabel("budget B (layers of Model A)")
    ax.set_ylabel("held-out loss E||theta_hat - theta||^2")
    ax.set_title("Model A's two routers against its prediction (depth 7, alpha 0.6, N 64)", fontsize=9)
    ax.legend(fontsize=7)
    if ends:  # where the curve ends: loss at budget 6 (seed 0) against the steps of training, T, 2T and 4T
        ax = axes[0, 1]
        ax.axhline(pred[TOP], color="k", ls="--", label=f"prediction {pred[TOP]:.4f}")
        for name, v in sorted(ends.items()):
            c, who = "C3" if v["router"] == "qk" else "C0", f"{router_name(v['router'])} A"
            ax.plot(v["steps_curve"], v["loss_curve"], "o-", color=c, label=who)
            if v["extrapolated"] is not None:
                ax.axhline(v["extrapolated"], color=c, ls=":", lw=1,
                           label=f"{who}, geometric tail {v['extrapolated']:.4f}")
        ax.axhspan(0.8 * pred[TOP], 1.25 * pred[TOP], color="0.85")
        ax.set_xscale("log", base=2)
        steps = sorted({t for v in ends.values() for t in v["steps_curve"]})
        ax.set_xticks(steps, [f"{t:,}" for t in steps])
        ax.minorticks_off()
        ax.set_yscale("log")
        ax.set_xlabel("training steps (each its own cosine schedule)")
        ax.set_ylabel("held-out loss at budget 6, seed 0")
        ax.set_title("Where A's curve ends: 1x, 2x, 4x the study's steps", fontsize=9)
        ax.legend(fontsize=7)
    path = os.path.join(HERE, "fig_qk.png")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def table(doc: dict) -> str:
    """The Markdown table of the report's qk section: per budget both routers against A's prediction."""
    lines = ["| budget | prediction | MLP A (3 seeds) | ratio | qk A (seeds) | ratio | qk / MLP |",
             "|---|---|---|---|---|---|---|"]
    for b, v in sorted(doc["per_budget"].items()):
        se = "" if v["qk_se"] is None else f" ± {v['qk_se']:.4f}"
        lines.append(f"| {b} | {v['prediction']:.4f} | {v['mlp_mean']:.4f} ± {v['mlp_se']:.4f} | "
                     f"{v['mlp_ratio']:.2f} | {v['qk_mean']:.4f}{se} ({v['qk_seeds']}) | {v['qk_ratio']:.2f} | "
                     f"{v['qk_over_mlp']:.2f} |")
    ends = {k: v for k, v in (doc.get("curve_end") or {}).items() if "loss_curve" in v}
    if ends:  # where A's curve ends, budget 6, seed 0
        steps = next(iter(ends.values()))["steps_curve"]
        lines += ["", "| router | " + " | ".join(f"{t:,} steps" for t in steps)
                  + " | last doubling | geometric tail | tail / prediction |", "|---" * (len(steps) + 4) + "|"]
        for name, v in sorted(ends.items(), key=lambda kv: kv[1]["router"]):
            tail = ("none" if v["extrapolated"] is None
                    else f"{v['extrapolated']:.4f} | {v['extrapolated_ratio']:.2f}")
            lines.append(f"| {router_name(v['router'])} | "
                         + " | ".join(f"{x:.4f}" for x in v["loss_curve"])
                         + f" | {v['change_per_doubling'][-1]:+.1%} | {tail}"
                         + (" | |" if v["extrapolated"] is None else " |"))
    return "\n".join(lines)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit status 2 (argparse's usage block is left out)
        raise StudyError(f"{self.prog}: {message}")


def _folder(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("give a folder (it is empty)")
    return text


def _names(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise argparse.ArgumentTypeError("give planned runs, comma-separated")
    return names


def _workers(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"{text[:20]!r} is not a number of processes >= 1")
    return int(text)


def parser() -> argparse.ArgumentParser:
    p = _Parser(prog="qk.py", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)
    out = dict(type=_folder, default=RUNS, help="the run folders (default studies/scaling/qk/train)")
    t = sub.add_parser("train", help="train the unfinished planned runs")
    t.add_argument("--out", **out)
    t.add_argument("--only", type=_names, help="planned runs to train, comma-separated, in this order")
    t.add_argument("--workers", type=_workers, default=1, help="runs trained at once (processes)")
    sub.add_parser("park", help="the unfinished runs' checkpoints to studies/scaling/qk/parked").add_argument("--out", **out)
    sub.add_parser("report", help="qk.json and fig_qk.png from the finished runs and the committed rows") \
        .add_argument("--out", **out)
    sub.add_parser("table", help="the report's tables from qk.json")
    r = sub.add_parser("rerun", help="a committed row trained again from its command")
    r.add_argument("name", help="a committed row, e.g. qk-B3-s0")
    r.add_argument("--out", type=_folder, help="a scratch folder (default a new temporary one)")
    return p


def main(argv: list[str]) -> int:
    """The command line; bad input or a damaged qk.json: one line on stderr, exit status 2."""
    try:
        return _main(argv)
    except StudyError as exc:
        print(exc if str(exc).startswith("qk.py") else f"qk.py: {exc}", file=sys.stderr)
        return 2


def _main(argv: list[str]) -> int:
    args = parser().parse_args(argv)
    if args.command == "table":
        print(table(committed()))
    elif args.command == "rerun":
        import tempfile

        entry = rerun(args.name, args.out or tempfile.mkdtemp(prefix="qk-rerun-"))
        same = "identical" if entry["identical"] else f"{entry['relative_change']:+.2%}"
        print(f"{args.name}: committed {entry['loss_committed']!r}, re-run {entry['loss_rerun']!r} ({same}; "
              f"{entry['machine']})")
    elif args.command == "train":
        return train(args.out, args.only, args.workers)
    elif args.command == "park":
        for name, step in park(args.out).items():
            print(f"{name}: parked at step {step}")
    else:
        doc = report(args.out)
        print(f"qk.json: {len(doc['runs'])} of {len(PLAN)} planned runs finished")
    return 0


if __name__ == "__main__":
    import qk  # this file as the module qk: the engine's workers import its cells by that name

    sys.exit(qk.main(sys.argv[1:]))
