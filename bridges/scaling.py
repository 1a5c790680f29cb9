"""``fv scaling``: loss against budget for trained Models A, B, C beside the theory, with fitted laws.

The study (the training issue): tree prior of depth 6, alpha 0.5, N = 128 tokens, budgets 1..6, Models
A, B, C with 3 seeds each, trained with the recipe of ``bridges.config`` but with the study's own step
rule, ``steps_per_budget x budget`` steps (default 1000 x budget; the recipe's steps for all 54 runs would
take hours). Beside them, at the same noise and channel (``tokens``), the theory rows of
``bridges.compare.theory_losses``: ``path``, the best adaptive policy found, ``top_levels``, the best
coordinate and unit non-adaptive designs, and the linear theory.

Outputs in ``out``: ``scaling.json`` (config, one row per run with the exact ``fv train`` command that
reproduces it, the theory rows, the fits), ``scaling.csv``, ``fig_scaling.png`` and ``report.md`` with the
fitted laws (``bridges.fits``): the rate ``r`` of ``loss ~ c r^B`` for A and the adaptive theory, the
exponent ``e`` of ``loss ~ c B^-e`` for B and the non-adaptive theory, each with a 95% interval, and
for every model which law fits better, and the audit of every trained model's readings (``fv audit``: the
loss its measurements allow). Runs, audits and theory rows are cells of a ``RunStore`` (``out/cells``,
training folders in ``out/train``): an interrupted study resumes where it stopped.
"""
from __future__ import annotations

import shlex
import time
from dataclasses import asdict, dataclass

from .config import DataConfig, ModelConfig, RunConfig, TrainConfig, study_tree, tree_label
from .store import RunStore, csv_text, write_atomic, write_json

STUDY_STEPS_PER_BUDGET = 1000  # the study's step rule (the recipe's 5000 x budget is for one configuration)

KIND = "scaling"
# the law each model and theory row should follow (fvnum.theory.predicted_law) and the theory row each model is
# held against (fvnum.theory.prediction_row) are chosen in fvnum


@dataclass(frozen=True)
class ScalingConfig:
    """Defaults: the study of the training issue (about 70 minutes on 2 CPU cores, one run per core: docs/scaling)."""

    out: str = "runs/scaling"
    depth: int | None = None  # None: 6, or the number of scales
    alpha: float | None = None  # None: 0.5 unless scales are given
    n_tokens: int = 128
    s2: float = 0.01
    budgets: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    models: str = "ABC"
    seeds: int = 3
    steps_per_budget: int = STUDY_STEPS_PER_BUDGET
    samples: int = 20_000
    search_samples: int = 2_000
    seed: int = 0
    workers: int | None = None  # local Dask worker processes (None: the number of cores; 1: this process)
    threads: int = 1
    scheduler: str | None = None  # a running Dask cluster (bridges.engine)
    progress: bool = True
    device: str = "cpu"
    scales: tuple[str, ...] | None = None  # general tree scales instead of alpha (bridges.config.DataConfig)

    def __post_init__(self):
        study_tree(self, 6)
        budgets = tuple(int(b) for b in self.budgets)
        if not budgets or any(b < 1 or b > 2**self.depth - 1 for b in budgets):
            raise ValueError(f"budgets must lie in 1..D = {2**self.depth - 1}, got {list(self.budgets)}")
        object.__setattr__(self, "budgets", tuple(sorted(set(budgets))))
        if not self.models or any(m not in "ABC" for m in self.models):
            raise ValueError(f"models must be letters of ABC, got {self.models!r}")
        for name in ("seeds", "steps_per_budget", "samples", "search_samples", "workers", "threads"):
            value = getattr(self, name)
            if value is None and name == "workers":
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an integer >= 1, got {value!r}")

    def data(self) -> DataConfig:
        return DataConfig(prior="tree", depth=self.depth, alpha=self.alpha, n_tokens=self.n_tokens, s2=self.s2,
                          scales=self.scales)

    @property
    def tree(self) -> str:
        return tree_label(self.alpha, self.scales)

    def steps(self, budget: int) -> int:
        """The stated rule: ``steps_per_budget x budget`` for every model."""
        return self.steps_per_budget * budget

    def runs(self, train_out: str) -> list[RunConfig]:
        """Every training run of the study: models x budgets x seeds, the recipe otherwise."""
        return [RunConfig(self.data(), ModelConfig(model=m, budget=b),
                          TrainConfig(steps=self.steps(b), seed=self.seed + s, out=train_out, threads=self.threads,
                                      device=self.device))
                for b in self.budgets for m in self.models for s in range(self.seeds)]


def train_row(run: RunConfig) -> dict:
    """Train one run (resuming its folder) and return its row of ``scaling.json``; a cell of the study."""
    from .train import train

    result = train(run, progress=False)
    return {"key": run.key(), "model": run.model.model, "budget": run.model.budget, "seed": run.train.seed,
            "loss": result.loss, "stderr": result.stderr, "n": result.n_eval, "steps": result.steps,
            "wall_seconds": result.wall_seconds, "train_seconds": result.train_seconds,
            "steps_per_s": result.steps_per_s, "precision": result.precision,
            "command": shlex.join(["fv", "train", *run.to_argv()])}


def _run_cells(cfg: ScalingConfig, store: RunStore, runs: list[RunConfig], log) -> list[dict]:
    """Train every run not yet stored on the engine of ``bridges.engine`` (a local Dask cluster of
    ``workers`` processes, the cluster at ``scheduler``, or this process when ``workers`` is 1) and return
    the rows in ``runs`` order."""
    from .engine import SYNCHRONOUS, Cell, run_cells

    cells = [Cell(_cell_key(run), train_row_dict, {"run": run.to_dict()}, "run", run.cell_config()) for run in runs]
    scheduler = cfg.scheduler if cfg.scheduler is not None else (SYNCHRONOUS if cfg.workers == 1 else None)
    results = run_cells(cells, store, scheduler=scheduler, workers=cfg.workers, progress=cfg.progress, log=log)
    return [results[cell.key] for cell in cells]


def train_row_dict(run: dict) -> dict:
    """``train_row`` of a run given as the dict of ``RunConfig.to_dict`` (a cell of the study)."""
    return train_row(RunConfig.from_dict(run))


def _audit_cell(store: RunStore, run: RunConfig, seed: int) -> dict:
    """The audit of one trained run's readings (``bridges.compare.audit_dict``), a cell of its own."""
    from .compare import AUDIT_SIZES, audit_dict
    from .train import run_dir

    config = {"run": run.key(), "sizes": AUDIT_SIZES, "seed": seed}
    result, _ = store.cell("audit", config, lambda: audit_dict(str(run_dir(run)), seed=seed))
    return result


def _cell_key(run: RunConfig) -> str:
    from .store import config_key

    return f"run-{run.key()}-{config_key(run.cell_config())}"


def run(cfg: ScalingConfig = ScalingConfig(), log=print) -> dict:
    """The whole study: train (skipping finished runs), theory per budget, fits, outputs."""
    from .compare import theory_losses

    start = time.time()
    store = RunStore(cfg.out, KIND)
    log(f"output folder: {store.folder}")
    runs = cfg.runs(str(store.folder / "train"))
    log(f"{len(runs)} runs: models {cfg.models}, budgets {list(cfg.budgets)}, {_count(cfg.seeds, 'seed')}, "
        f"steps = {cfg.steps_per_budget} x budget")
    rows = _run_cells(cfg, store, runs, log)
    rows = [{**row, "audit": _audit_cell(store, run, cfg.seed)} for row, run in zip(rows, runs)]
    log(f"audits of {len(rows)} runs done")
    theory = {}
    for b in cfg.budgets:
        config = {"data": cfg.data().to_dict(), "budget": b, "samples": cfg.samples,
                  "search_samples": cfg.search_samples, "seed": cfg.seed}
        theory[b], cached = store.cell("theory", config, lambda b=b: theory_losses(
            cfg.data(), b, samples=cfg.samples, seed=cfg.seed, search_samples=cfg.search_samples))
        log(f"theory at budget {b} done" + (" (cached)" if cached else ""))
    fits = fit_study(rows, theory)
    written = write_outputs(cfg, store.folder, rows, theory, fits)
    log(f"report: {store.folder / 'report.md'}  ({time.time() - start:.0f} s)")
    return {"folder": str(store.folder), "runs": rows, "theory": theory, "fits": fits,
            "written": [str(p) for p in written]}


# --- fits --------------------------------------------------------------------------------------------
def fit_study(rows: list[dict], theory: dict[int, list[dict]]) -> dict:
    """Both laws for every model (seeds as points) and for every theory row, and which fits better."""
    from fvnum.theory import predicted_law

    from .fits import compare_laws

    out = {"models": {}, "theory": {}}
    for model in sorted({r["model"] for r in rows}):
        pts = [(r["budget"], r["loss"]) for r in rows if r["model"] == model]
        if len({b for b, _ in pts}) >= 2 and len(pts) >= 3:
            out["models"][model] = {"predicted": predicted_law(model), **compare_laws(*zip(*pts))}
    names = sorted({t["name"] for ts in theory.values() for t in ts})
    for name in names:
        pts = [(b, t["value"]) for b, ts in theory.items() for t in ts if t["name"] == name and t["value"] > 1e-8]
        if len(pts) >= 3:
            out["theory"][name] = {"predicted": predicted_law(name), **compare_laws(*zip(*pts))}
    return out


# --- outputs -----------------------------------------------------------------------------------------
CSV_COLUMNS = ("model", "budget", "seed", "loss", "stderr", "n", "steps", "wall_seconds", "train_seconds",
               "steps_per_s", "precision", "key", "command")


def write_outputs(cfg: ScalingConfig, folder, rows, theory, fits) -> list:
    from . import figures

    config = {k: v for k, v in asdict(cfg).items() if k != "progress"  # progress: display only
              and not (k == "scales" and v is None)}  # scales only where given: studies by alpha read as before
    written = [
        write_json(folder / "scaling.json", {"config": config, "runs": rows,
                                             "theory": {str(b): ts for b, ts in theory.items()}, "fits": fits}),
        write_atomic(folder / "scaling.csv", csv_text(rows, CSV_COLUMNS)),
    ]
    written += figures.scaling(folder / "fig_scaling.png", rows, theory, cfg)
    written.append(write_atomic(folder / "report.md", report_markdown(cfg, rows, theory, fits)))
    return written


def _summary(rows, model, budget):
    import statistics

    ls = [r["loss"] for r in rows if r["model"] == model and r["budget"] == budget]
    if not ls:
        return None
    spread = statistics.stdev(ls) if len(ls) > 1 else 0.0
    return statistics.mean(ls), spread, min(ls), max(ls), len(ls)


def _fit_line(name: str, entry: dict) -> str:
    law = entry["predicted"] or entry["better"]
    f = entry["fits"][law]
    other = entry["fits"]["power" if law == "exponential" else "exponential"]
    verdict = "yes" if entry["better"] == law else "**no**"
    return (f"| {name} | {law}: {f['param']} = {f['value']:.3g} [{f['ci'][0]:.3g}, {f['ci'][1]:.3g}] | "
            f"{f['rss']:.3g} | {other['law']}: {other['param']} = {other['value']:.3g}, RSS {other['rss']:.3g} | "
            f"{entry['better']} ({verdict}) |")


def _one_name(names_by_budget: dict) -> str:
    """The prediction row's name when it is the same at every budget that has one, else ``prediction``."""
    names = {n for n in names_by_budget.values() if n}
    return names.pop() if len(names) == 1 else "prediction"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def report_markdown(cfg: ScalingConfig, rows, theory, fits) -> str:
    budgets = list(cfg.budgets)
    total_wall = sum(r["wall_seconds"] for r in rows)
    value = {b: {t["name"]: t["value"] for t in theory.get(b, [])} for b in budgets}  # theory row values
    names = sorted({n for vs in value.values() for n in vs})
    lines = [
        "# Scaling study: loss against budget", "",
        f"Tree prior, depth {cfg.depth}, {cfg.tree}, N {cfg.n_tokens} tokens (tokens channel), s2 {cfg.s2}; "
        f"models {', '.join(cfg.models)}, budgets {budgets[0]}..{budgets[-1]}, {_count(cfg.seeds, 'seed')} each, trained with "
        f"the recipe (docs/training.md) for {cfg.steps_per_budget} x budget steps. Training time summed over the "
        f"{len(rows)} runs: {total_wall / 60:.0f} minutes ({_count(cfg.threads, 'thread')} per run, {cfg.workers or 'one per core'} at a time).",
        "", "![loss against budget](fig_scaling.png)", "",
        "Losses are E||theta_hat - theta||^2 on 4096 held-out contexts; "
        + ("one seed per point. " if cfg.seeds == 1 else "mean ± standard deviation over seeds (min .. max). ")
        + "Theory at the same noise, tokens channel, Monte Carlo with exact Bayes decoding "
        "(`fvnum`), except `top_levels_linear` and `gaussian_optimum` (exact linear theory).", "",
        "| budget | " + " | ".join(f"Model {m}" for m in cfg.models) + " | " + " | ".join(names) + " |",
        "|---" * (1 + len(cfg.models) + len(names)) + "|",
    ]
    for b in budgets:
        cells = []
        for m in cfg.models:
            s = _summary(rows, m, b)
            cells.append("" if s is None else f"{s[0]:.4f}" if s[4] == 1
                         else f"{s[0]:.4f} ± {s[1]:.2g} ({s[2]:.4f} .. {s[3]:.4f})")
        cells += [f"{value[b][n]:.4f}" if n in value[b] else "" for n in names]
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    from fvnum.theory import prediction_row

    held = {m: {b: prediction_row(m, value[b]) for b in budgets} for m in cfg.models}
    held = {m: bs for m, bs in held.items() if any(bs.values())}
    if held:
        lines += ["", "## Trained against theory", "",
                  "Seed mean of each model over the theory row it is held against (`fvnum.theory.prediction_row`: "
                  "A the best adaptive policy found, B the best one-layer unit design, both for their class and "
                  "keys, C the exact linear theory of one layer); the row's name where it changes with the budget.",
                  "", "| budget | " + " | ".join(f"{m} / {_one_name(bs)}" for m, bs in held.items()) + " |",
                  "|---" * (1 + len(held)) + "|"]
        for b in budgets:
            cells = []
            for m, rows_of in held.items():
                s, name = _summary(rows, m, b), rows_of[b]
                ref = value[b].get(name) if name else None
                shown = "" if _one_name(rows_of) != "prediction" else f" ({name})"
                cells.append(f"{s[0] / ref:.2f}{shown}" if s is not None and ref else "")
            lines.append(f"| {b} | " + " | ".join(cells) + " |")
    audited = [r for r in rows if r.get("audit")]
    if audited:
        lines += ["", "## Audit of the models' readings", "",
                  "Per model and budget (seed means): its own loss and the Bayes posterior mean on its own readings "
                  "under their CLT law given each leaf (`fv audit`, bridges.audit: keys evaluated on a fixed token "
                  "sample at each context's own workspace): the loss its measurements allow, and the decoder gap "
                  "(model - Bayes, paired).", "",
                  "| budget | " + " | ".join(f"{m}: own / Bayes on readings / gap" for m in cfg.models) + " |",
                  "|---" * (1 + len(cfg.models)) + "|"]
        for b in budgets:
            cells = []
            for m in cfg.models:
                mine = [r["audit"] for r in audited if r["model"] == m and r["budget"] == b]
                if not mine:
                    cells.append("")
                    continue
                mean = lambda k: sum(a[k]["value"] for a in mine) / len(mine)  # noqa: E731
                cells.append(f"{mean('loss'):.4f} / {mean('bayes_on_readings'):.4f} / {mean('decoder_gap'):+.4f}")
            lines.append(f"| {b} | " + " | ".join(cells) + " |")
    lines += ["", "## Fitted laws", "",
              "Exponential `loss = c r^B` (adaptive depth) and power `loss = c B^-e` (one layer), least squares in "
              "log loss over every run (seeds as points), 95% t intervals. Both laws have two parameters, so the "
              "one with the smaller residual sum of squares (RSS, in log loss) fits better.", "",
              "| what | predicted law: fit [95% CI] | RSS | the other law | better fit (as predicted?) |",
              "|---|---|---|---|---|"]
    for m, entry in fits["models"].items():
        lines.append(_fit_line(f"Model {m}", entry))
    for name, entry in fits["theory"].items():
        if entry["predicted"]:
            lines.append(_fit_line(f"theory: {name}", entry))
    lines += ["", "Every run is reproduced by the `command` of its row in scaling.json (or scaling.csv).", ""]
    return "\n".join(lines)
