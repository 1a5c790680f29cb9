"""``fv scaling``: loss against budget for trained Models A, B, C beside the theory, with fitted laws.

The study (studies/scaling/): the regime the theory chose before training (studies/scaling/regime.md: tree prior of
depth 7, alpha 0.6, N = 64 tokens, budgets 1..6), Models A, B, C with 3 seeds each, trained with the recipe of
``bridges.runs.config`` (its steps per model, A 5000 and B, C 2500 x budget, or ``steps_per_budget x budget`` for
every model). Beside them, at the same noise and channel (``tokens``), the theory rows of
``fvnum.theory.comparison_table`` (the prediction rows of A and B under the ``keyed`` key family,
``fvnum.theory.keyed_curves``; ``path``, the best adaptive policy found, ``top_levels``, the best coordinate
and unit non-adaptive designs, and the linear theory of Model C).

Outputs in ``out``: ``scaling.json`` (config, one row per run with the exact ``fv train`` command that
reproduces it, its held-out curve and its audit, the theory rows, the fits), ``scaling.csv``,
``fig_scaling.png``, ``fig_decay.png`` and ``report.md``: trained over predicted, the law test of
``fvnum.laws`` (rate ``r`` of ``loss ~ c r^B``, exponent ``e`` of ``loss ~ c B^-e``, 95% intervals, a verdict
that can say ``can't tell``), the local decay per budget, whether each run is trained out, the audit of every
trained model's readings (``fv audit``) and the CPU time. Runs, audits and theory rows are cells of a
``RunStore`` (``out/cells``, training folders in ``out/train``): an interrupted study resumes where it stopped,
and ``scaling_study(cfg, train=False)`` (``fv scaling --report-only``) writes the report of the runs finished so far.
"""
from __future__ import annotations

import shlex
import time
from dataclasses import asdict, dataclass

from fvnum.defaults import KEYED
from fvnum.laws import DEFAULT_CUT

from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.runs.data_config import study_tree, tree_label
from bridges.models.registry import BUILT_IN, DEFAULT_MODEL, MODELS, adaptive_names
from bridges.runs.store import AUDIT, KEYED_ROWS, THEORY_ROWS, RunStore, csv_text, fields, write_atomic, write_json
from bridges.errors import require
from bridges.runs.devices import check_device_name
from fvsym.errors import InputError

from bridges.runs.results import DictLayout, frame_of
from bridges.studies.scaling_report import _count, _steps_words, report_markdown

STUDY_DEPTH, STUDY_ALPHA = 7, 0.6  # the regime chosen by the theory (studies/scaling/regime.md), with N 64

KIND = "scaling"


# what each kind of cell of the study holds (checked when read and before it is stored, bridges.runs.store)
SHAPES = {
    "run": fields("key", "model", "budget", "seed", "loss", "stderr", "n", "steps", "wall_seconds", "history",
                  "command", numbers=("loss", "stderr", "wall_seconds"), optional={"audit": AUDIT}),
    "audit": AUDIT, "keyed": KEYED_ROWS, "theory": THEORY_ROWS,
}


@dataclass(frozen=True)
class ScalingConfig:
    """Defaults: the regime the theory chose before training (studies/scaling/regime.md): depth 7, alpha 0.6,
    N 64, budgets 1..6, Models A, B, C with 3 seeds at the recipe's steps (many hours on 2 CPU cores; resumable)."""

    out: str = "runs/scaling"
    depth: int | None = None  # None: STUDY_DEPTH, or the number of scales
    alpha: float | None = None  # None: STUDY_ALPHA unless scales are given
    n_tokens: int = 64
    s2: float = 0.01
    budgets: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    models: str = "".join(BUILT_IN)  # Models A, B, C (a registered model joins when named)
    seeds: int = 3
    steps_per_budget: int | None = None  # None: the recipe's steps per model (bridges.runs.config.recipe_steps)
    samples: int = 20_000
    search_samples: int = 2_000
    seed: int = 0
    workers: int | None = None  # local Dask worker processes (None: the number of cores; 1: this process)
    threads: int = 1
    scheduler: str | None = None  # a running Dask cluster (bridges.runs.engine)
    progress: bool = True
    device: str = "cpu"
    keyed: str | None = KEYED  # key family of the prediction rows of A and B (fvnum.keys.nonadaptive); None: linear keys
    cut: int = DEFAULT_CUT  # first budget of the law test (fvnum.laws.law_test)
    scales: tuple[str, ...] | None = None  # general tree scales instead of alpha (bridges.runs.config.DataConfig)
    # (model, reference): ``model`` trains for the steps whose FLOPs equal ``reference``'s run (by the steps rule) at
    # the same budget (bridges.prices.flops.flop_matched_steps), every other model by the steps rule; the reference need not
    # be one of the study's models (``models="A", flop_match=("A", "B")``: the FLOP-matched arm alone)
    flop_match: tuple[str, str] | None = None
    router: str = "mlp"  # the router of the study's adaptive models (A): mlp, or qk (THEORY.md section 7b)

    def __post_init__(self):
        check_device_name(self.device)
        study_tree(self, STUDY_DEPTH, STUDY_ALPHA)
        from bridges.runs.config import ROUTERS

        if self.router not in ROUTERS:
            raise InputError(f"router must be one of {', '.join(ROUTERS)}, got {self.router!r:.40}")
        budgets = tuple(int(b) for b in self.budgets)
        if not budgets or any(b < 1 or b > 2**self.depth - 1 for b in budgets):
            raise InputError(f"budgets must lie in 1..D = {2**self.depth - 1}, got {list(self.budgets)}")
        object.__setattr__(self, "budgets", tuple(sorted(set(budgets))))
        if not isinstance(self.models, str) or not self.models or any(m not in MODELS for m in self.models) \
                or len(set(self.models)) != len(self.models):
            raise InputError(f"models must be distinct letters of {''.join(MODELS)}, got {self.models!r:.40}")
        for name in ("seeds", "steps_per_budget", "samples", "search_samples", "workers", "threads", "cut"):
            value = getattr(self, name)
            if value is None and name in ("workers", "steps_per_budget"):
                continue
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{name} must be an integer >= 1, got {value!r}")
        if self.flop_match is not None:
            pair = tuple(self.flop_match) if isinstance(self.flop_match, (tuple, list)) else ()
            if len(pair) != 2 or pair[0] == pair[1] or pair[0] not in self.models or pair[1] not in MODELS:
                raise InputError(f"flop_match must name a model of the study ({self.models}) and another model as its "
                                 f"reference (trained or not), e.g. ('A', 'B'); got {self.flop_match!r:.40}")
            object.__setattr__(self, "flop_match", pair)
        routed = [m for m in self.models if MODELS[m].adaptive and MODELS[m].mlp_keys]
        if self.router != "mlp" and not routed:
            raise InputError(f"router {self.router!r} is the router of the adaptive model with MLP keys "
                             f"({adaptive_names()}), and the study's models {self.models} have none: add A to the "
                             "models, or leave the router out")

    def data(self) -> DataConfig:
        return DataConfig(prior="tree", depth=self.depth, alpha=self.alpha, n_tokens=self.n_tokens, s2=self.s2,
                          scales=self.scales)

    @property
    def tree(self) -> str:
        return tree_label(self.alpha, self.scales)

    def rule_steps(self, budget: int, model: str = DEFAULT_MODEL) -> int:
        """The stated rule: the recipe's steps of each model (``bridges.runs.config.recipe_steps``: A 5000, B and C
        2500 x budget), or ``steps_per_budget x budget`` for every model when it is set."""
        from bridges.runs.config import recipe_steps

        return recipe_steps(budget, model) if self.steps_per_budget is None else self.steps_per_budget * budget

    def steps(self, budget: int, model: str = DEFAULT_MODEL) -> int:
        """The steps of ``model`` at ``budget``: the rule (:meth:`rule_steps`), except for the model that
        ``flop_match`` names, which trains for the FLOPs of its reference's run (counted on both models by torch,
        ``bridges.prices.flops.step_flops``; computed once per data, models and budget)."""
        if self.flop_match is None or model != self.flop_match[0]:
            return self.rule_steps(budget, model)
        ref = self.flop_match[1]
        return _flop_matched(self.data(), model, ref, budget, self.rule_steps(budget, ref))

    def router_of(self, model: str) -> str:
        """The router of ``model`` in the study: :attr:`router` for an adaptive model with MLP keys (A), else
        ``mlp`` (B and C have one layer; their runs keep their keys)."""
        spec = MODELS[model]
        return self.router if spec.adaptive and spec.mlp_keys else "mlp"

    def runs(self, train_out: str) -> list[RunConfig]:
        """Every training run of the study: models x budgets x seeds, the recipe otherwise."""
        return [RunConfig(self.data(), ModelConfig(model=m, budget=b, router=self.router_of(m)),
                          TrainConfig(steps=self.steps(b, m), seed=self.seed + s, out=train_out, threads=self.threads,
                                      device=self.device))
                for b in self.budgets for m in self.models for s in range(self.seeds)]


def _flop_matched(data: DataConfig, model: str, reference: str, budget: int, reference_steps: int) -> int:
    from bridges.prices.flops import flop_matched_steps

    run = lambda m, steps: RunConfig(data, ModelConfig(model=m, budget=budget), TrainConfig(steps=steps))  # noqa: E731
    return flop_matched_steps(run(model, 1), run(reference, reference_steps))


def train_row(run: RunConfig) -> dict:
    """Train one run (resuming its folder) and return its row of ``scaling.json``; a cell of the study."""
    from bridges.training.train import train

    result = train(run, progress=False)
    from bridges.analysis.compare import audit_dict

    # the audit reads the trained model, so it is part of the run's cell: a study whose run folders are gone
    # (only its cells kept, as in studies/scaling/) still has every finished run's audit
    audited = audit_dict(result, seed=run.train.seed) if run.model.spec.audits(run.data) else None
    return {"audit": audited, "key": run.key(), "model": run.model.model, "budget": run.model.budget, "seed": run.train.seed,
            "loss": result.loss, "stderr": result.stderr, "n": result.n_eval, "steps": result.steps,
            "wall_seconds": result.wall_seconds, "train_seconds": result.train_seconds,
            "steps_per_s": result.steps_per_s, "precision": result.precision, "device": run.train.device,
            "history": [[h[0], h[2]] for h in result.history],
            "command": command_of(run)}


def command_of(run: RunConfig, shown_out: str | None = None) -> str:
    """The ``fv train`` command that trains ``run`` (``RunConfig.to_argv``: every field spelled out), its run folder
    written as ``shown_out`` where given (a study's rows show the folder relative to the repository)."""
    if shown_out is not None:
        run = run.replace(train=dict(out=shown_out))
    return shlex.join(["fv", "train", *run.to_argv()])


def config_of_command(command: str) -> RunConfig:
    """The ``RunConfig`` that a recorded ``fv train`` command (a study row's ``command``) trains, read by the run
    options' own reader (``bridges.runs.options.read_argv``); a command that is not one is a one-line InputError."""
    from bridges.runs.config import RUN_OPTIONS
    from bridges.runs.options import read_argv

    words = shlex.split(command) if isinstance(command, str) else []
    if words[:2] != ["fv", "train"]:
        raise InputError(f"not an fv train command: {command!r:.80}")
    return RunConfig.from_options(read_argv(RUN_OPTIONS, words[2:]))


def _keyed_rows(cfg: ScalingConfig) -> dict:
    """The prediction rows of A and B under ``cfg.keyed`` keys at every budget (``fvnum.theory.keyed_curves``)."""
    from fvnum.theory import keyed_curves

    from bridges.training.data import data_channel, fv_prior

    curves = keyed_curves(fv_prior(cfg.data()), cfg.budgets, data_channel(cfg.data()), cfg.keyed,
                          samples=cfg.search_samples, seed=cfg.seed)
    return {str(b): [r.to_dict() for r in rows] for b, rows in curves.items()}


def _theory_rows(cfg: ScalingConfig, budget: int, keyed_rows: list | None) -> list[dict]:
    """The comparison rows at ``budget`` (``fvnum.theory.comparison_table``), the keyed rows among them."""
    from fvnum.mc.channels import tokens
    from fvnum.theory import comparison_table

    from bridges.training.data import fv_prior

    data = cfg.data()
    table = comparison_table(fv_prior(data), budget, tokens(data.n_tokens, data.s2, keys=cfg.keyed), samples=cfg.samples,
                             seed=cfg.seed, search_samples=cfg.search_samples, keyed_rows_given=keyed_rows)
    return table.to_dict()["rows"]


def train_runs(cfg: ScalingConfig, store: RunStore, runs: list[RunConfig], log) -> list[dict]:
    """Train every run of ``runs`` not yet stored in ``store`` on the engine of ``bridges.runs.engine`` (a local
    Dask cluster of ``workers`` processes, the cluster at ``scheduler``, or this process when ``workers`` is 1) and
    return the rows in ``runs`` order: the training half of :func:`run`, which ``fv scaling --resumable`` calls
    under its time cap."""
    from bridges.runs.engine import SYNCHRONOUS, Cell, run_cells

    cells = [Cell(_cell_key(run), train_row_dict, {"run": run.to_dict()}, "run", run.cell_config(), SHAPES["run"])
             for run in runs]
    scheduler = cfg.scheduler if cfg.scheduler is not None else (SYNCHRONOUS if cfg.workers == 1 else None)
    results = run_cells(cells, store, scheduler=scheduler, workers=cfg.workers, progress=cfg.progress, log=log)
    return [results[cell.key] for cell in cells]


def train_row_dict(run: dict) -> dict:
    """``train_row`` of a run given as the dict of ``RunConfig.to_dict`` (a cell of the study)."""
    return train_row(RunConfig.from_dict(run))


def _audit_cell(store: RunStore, run: RunConfig, seed: int) -> dict:
    """The audit of one trained run's readings (``bridges.analysis.compare.audit_dict``), a cell of its own."""
    from bridges.analysis.compare import AUDIT_SIZES, audit_dict
    from bridges.training.train import run_dir

    config = {"run": run.key(), "sizes": AUDIT_SIZES, "seed": seed}
    result, _ = store.cell("audit", config, lambda: audit_dict(str(run_dir(run)), seed=seed), SHAPES["audit"])
    return result


def _cell_key(run: RunConfig) -> str:
    from bridges.runs.store import config_key

    return f"run-{run.key()}-{config_key(run.cell_config())}"


@dataclass(frozen=True)
class ScalingStudy(DictLayout):
    """What :func:`run` did: the output ``folder``, the trained ``runs`` (one row per run: its result, audit and
    command), the ``theory`` rows per budget, the law ``fits`` (``fits["models"][X]["test"]["verdict"]``) and the
    files ``written``. ``to_dict()`` is the earlier dict layout; ``to_frame("runs" | "theory")`` one table
    (the theory rows with their budget)."""

    folder: str
    runs: list
    theory: dict
    fits: dict
    written: tuple

    def to_dict(self) -> dict:
        return {"folder": self.folder, "runs": self.runs, "theory": self.theory, "fits": self.fits,
                "written": list(self.written)}

    def to_frame(self, which: str = "runs"):
        theory = [{"budget": b, **row} for b, rows in self.theory.items() for row in rows]
        return frame_of({"runs": self.runs, "theory": theory}, which, "a ScalingStudy")


def scaling_study(cfg: ScalingConfig = ScalingConfig(), log=print, *, train: bool = True) -> ScalingStudy:
    """The whole study: train (skipping finished runs), theory per budget, fits, outputs. ``train=False``:
    no training, the outputs cover the runs finished so far (the report says how many of how many)."""
    start = time.time()
    try:
        if train:
            require("fv scaling")  # it trains: without torch, refused before its folder and lock exist
        store = RunStore(cfg.out, KIND, create=train)  # --report-only: nothing created in a folder without a study
    except ValueError as exc:
        if train or "holds no" not in str(exc):
            raise
        raise InputError(f"{cfg.out} has no finished run of this study yet; run fv scaling without --report-only "
                         "to train") from None
    log(f"output folder: {store.folder}")
    runs = cfg.runs(str(store.folder / "train"))
    log(f"{len(runs)} runs: models {cfg.models}, budgets {list(cfg.budgets)}, {_count(cfg.seeds, 'seed')}, "
        f"steps: {_steps_words(cfg)}")
    if train:
        rows = train_runs(cfg, store, runs, log)
    else:
        found = [(store.get(_cell_key(run), shape=SHAPES["run"]), run) for run in runs]
        runs = [run for cell, run in found if cell is not None]
        rows = [cell["result"] for cell, _ in found if cell is not None]
        log(f"report only: {len(rows)} of {len(found)} runs finished, no training")
        if not rows:
            raise InputError(f"{store.folder} has no finished run of this study yet; run fv scaling without "
                             "--report-only to train")
    rows = [row if row.get("audit") or not run.model.spec.audited else {**row, "audit": _audit_cell(store, run, cfg.seed)}
            for row, run in zip(rows, runs)]
    log(f"audits of {len(rows)} runs done")
    keyed = None
    if cfg.keyed is not None:
        config = {"data": cfg.data().to_dict(), "budgets": list(cfg.budgets), "family": cfg.keyed,
                  "samples": cfg.search_samples, "seed": cfg.seed}
        keyed, cached = store.cell("keyed", config, lambda: _keyed_rows(cfg), SHAPES["keyed"])
        log(f"keyed theory rows ({cfg.keyed} keys) done" + (" (cached)" if cached else ""))
    theory = {}
    for b in cfg.budgets:
        config = {"data": cfg.data().to_dict(), "budget": b, "samples": cfg.samples,
                  "search_samples": cfg.search_samples, "seed": cfg.seed, "keyed": cfg.keyed}
        given = None if keyed is None else keyed[str(b)]
        theory[b], cached = store.cell("theory", config, lambda b=b, given=given: _theory_rows(
            cfg, b, given), SHAPES["theory"])
        log(f"theory at budget {b} done" + (" (cached)" if cached else ""))
    fits = fit_study(rows, theory, cfg.cut)
    written = _write_outputs(cfg, store.folder, rows, theory, fits, planned=len(cfg.runs("")))
    log(f"report: {store.folder / 'report.md'}  ({time.time() - start:.0f} s)")
    return ScalingStudy(str(store.folder), rows, theory, fits, tuple(str(p) for p in written))


# --- fits --------------------------------------------------------------------------------------------


def fit_study(rows: list[dict], theory: dict[int, list[dict]], cut: int = DEFAULT_CUT) -> dict:
    """The law test (``fvnum.laws.law_test``, budgets from ``cut``) of every model (seeds as points, their
    spread as the noise) and of every theory row with enough budgets (its Monte Carlo stderr, relative floor
    ``fvnum.regime.FLOOR``), and both unweighted fits over every budget (``compare_laws``, for the record)."""
    from fvnum.laws import compare_laws, law_test, local_decay
    from fvnum.regime import FLOOR
    from fvnum.theory import predicted_law

    out = {"cut": cut, "models": {}, "theory": {}}
    for model in sorted({r["model"] for r in rows}):
        pts = [(r["budget"], r["loss"]) for r in rows if r["model"] == model]
        entry = {"predicted": predicted_law(model)}
        if len({b for b, _ in pts}) >= 2 and len(pts) >= 3:
            entry.update(compare_laws(*zip(*pts)))
        try:
            entry["test"] = law_test(*zip(*pts), cut=cut).to_dict()
        except ValueError as exc:  # too few budgets or seeds for the test
            entry["test_refused"] = str(exc)
        try:
            entry["decay"] = [d.to_dict() for d in local_decay(*zip(*pts))]
        except ValueError:  # one seed: no spread to put an interval on
            pass
        out["models"][model] = entry
    names = sorted({t["name"] for ts in theory.values() for t in ts})
    for name in names:
        pts = [(b, t["value"], t.get("stderr") or 0.0) for b, ts in theory.items() for t in ts
               if t["name"] == name and t["value"] > 1e-8]
        if len(pts) < 3:
            continue
        entry = {"predicted": predicted_law(name), **compare_laws([p[0] for p in pts], [p[1] for p in pts])}
        try:
            entry["test"] = law_test([p[0] for p in pts], [p[1] for p in pts], stderr=[p[2] for p in pts],
                                     cut=cut, floor=FLOOR).to_dict()
        except ValueError as exc:
            entry["test_refused"] = str(exc)
        entry["decay"] = [d.to_dict() for d in local_decay([p[0] for p in pts], [p[1] for p in pts],
                                                           stderr=[p[2] for p in pts], floor=FLOOR)]
        out["theory"][name] = entry
    out["tests"] = decided_tests(rows, theory, cut)
    return out


def decided_tests(rows: list[dict], theory: dict[int, list[dict]], cut: int = DEFAULT_CUT, **kw) -> dict:
    """The decided tests of studies/scaling/regime.md (``fvnum.decided.study_tests``: ``band``, ``decay``,
    ``ratio``, each with its ``verdict`` and ``power``) of the trained ``rows`` against each model's prediction row
    in ``theory``; the law test's chi2 verdicts (``models[m]["test"]``) stay beside them as a diagnostic."""
    from fvnum.decided import study_tests
    from fvnum.theory import prediction_row

    losses: dict = {}
    for r in rows:
        losses.setdefault(r["model"], {}).setdefault(int(r["budget"]), []).append(r["loss"])
    predictions: dict = {}
    for model in list(losses):
        for b, ts in theory.items():
            name = prediction_row(model, [t["name"] for t in ts])
            hit = [t for t in ts if t["name"] == name]
            if hit:
                predictions.setdefault(model, {})[int(b)] = (hit[0]["value"], hit[0].get("stderr") or 0.0)
        if set(predictions.get(model, {})) < set(losses[model]) or model not in MODELS:
            losses.pop(model)  # a model without its prediction at every budget it trained: no decided test
    adaptive = tuple(sorted(m for m in losses if MODELS[m].adaptive))
    one_layer = tuple(sorted(m for m in losses if not MODELS[m].adaptive))  # B first: the reference
    if not one_layer and not adaptive:
        return {}
    try:
        return study_tests(losses, predictions, adaptive=adaptive, one_layer=one_layer or ("",), cut=cut, **kw)
    except InputError as exc:  # too few budgets or seeds for a test
        return {"refused": str(exc)}


# --- outputs -----------------------------------------------------------------------------------------
CSV_COLUMNS = ("model", "budget", "seed", "loss", "stderr", "n", "steps", "wall_seconds", "train_seconds",
               "steps_per_s", "precision", "key", "command")


def _write_outputs(cfg: ScalingConfig, folder, rows, theory, fits, planned: int | None = None) -> list:
    from bridges.studies import figures

    config = {k: v for k, v in asdict(cfg).items() if k != "progress"  # progress: display only
              and not (k == "scales" and v is None)  # scales only where given: studies by alpha read as before
              and not (k == "router" and v == "mlp")  # the router where it is not the default: the studies before it
              and not (k == "flop_match" and v is None)}  # a FLOP-matched arm only where one is trained
    written = [
        write_json(folder / "scaling.json", {"config": config, "runs": rows,
                                             "theory": {str(b): ts for b, ts in theory.items()}, "fits": fits}),
        write_atomic(folder / "scaling.csv", csv_text(rows, CSV_COLUMNS)),
    ]
    written += figures.scaling(folder / "fig_scaling.png", rows, theory, cfg)
    written += figures.decay(folder / "fig_decay.png", fits, cfg)
    written.append(write_atomic(folder / "report.md", report_markdown(cfg, rows, theory, fits, planned)))
    return written
