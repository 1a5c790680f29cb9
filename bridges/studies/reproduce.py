"""``fv reproduce``: the whole study in one command (theory curves, a training grid of Models A, B, C
beside the theory, key patching, function-vector probes), written to one folder:

``report.md``, ``fig_loss_vs_budget.png``, ``fig_patching.png``, ``fig_probes.png``, every number as
``results.json`` and CSV, and ``cells/`` (one finished unit of work each, keyed by a hash of its
configuration, written atomically). Re-running skips finished cells, so an interrupted run resumes.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from fvnum.defaults import KEYED
from fvnum.model_rows import BUILT_IN, MODELS
from fvnum.priors.registry import prior_entry

from bridges.runs.config import RECIPE_EVAL_EVERY, DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.runs.data_config import study_tree, tree_label
from bridges.runs.store import (AUDIT, ESTIMATE, KEYED_ROWS, THEORY_ROWS, RunStore, csv_text, fields, with_checksum, write_atomic,
                    write_json)
from bridges.errors import require
from bridges.runs.devices import check_device_name
from fvsym.errors import InputError

from bridges.runs.results import DictLayout, frame_of

KIND = "reproduce"
GRID_PRIORS = ("tree", "gaussian")  # the training issue's grid: the tree and its matched Gaussian
SEARCH_SAMPLES = 2000  # samples per candidate of the theory tables' searches (fvnum.theory.comparison_table)
# The reproduction figure's curves: each strategy's exact loss where it applies (Strategy.applies), and its Monte
# Carlo under the tokens channel by the strategy UNDER_NOISE names (optimal is exact only when small: its noiseless
# policy), with the options NOISY_OPTIONS gives it
CURVES = ("path", "top_levels", "optimal", "optimal_nonadaptive")
UNDER_NOISE = {"optimal": "bellman_noiseless"}
NOISY_OPTIONS = {"optimal_nonadaptive": dict(measurement="coordinate", search_samples=2000)}
# contexts of real tokens of A's and B's keyed rows on real tokens (fvnum.keys.real_tokens; the tree cells): about 5 s
# at the default cell on the shared machine (studies/scaling/real_tokens.md)
REAL_SAMPLES = 2000


# what each kind of cell holds (checked when a cell is read and before it is stored, bridges.runs.store)
SHAPES = {
    "theory": fields("value", "stderr", numbers=("value",)),
    "keyed": KEYED_ROWS,
    "theory_table": THEORY_ROWS,
    "compare": fields("key", "model", "prior", "depth", "budget", "n_tokens", "tau", "seed", numbers=("tau",),
                      nested={"trained": fields("loss", "stderr", "n", "steps", "wall_s", numbers=("loss", "stderr")),
                              "theory": THEORY_ROWS}, optional={"audit": AUDIT}),
    "audit": AUDIT,
    "patching_theory": fields("loss", "stderr", "unpatched", "n", "strategy", "layers", "depths",
                              nested={"unpatched": ESTIMATE}),
    "probes_theory": fields("prefix", "final_prefix"),
    "train": fields("run_key", "loss", "stderr", "n", "steps", numbers=("loss", "stderr")),
}
SHAPES["patching_model"], SHAPES["probes_model"] = SHAPES["patching_theory"], SHAPES["probes_theory"]
_TRANSPLANT = fields("loss", "stderr", "effect", "effect_stderr", "unpatched", "n", "layers", "depths", "intervention",
                     numbers=("n",), nested={"unpatched": ESTIMATE})
_INJECTION = fields("prefix_accuracy", "loss", "effect", "unpatched", "own_accuracy", "n", "layers", "depths",
                    "intervention", numbers=("n",), nested={"unpatched": ESTIMATE})
SHAPES.update(transplant_theory=_TRANSPLANT, transplant_model=_TRANSPLANT, injection_theory=_INJECTION,
              injection_model=_INJECTION)


def keyed_search_samples(cfg) -> int:
    """The samples of a grid's keyed searches (``keyed_cells``): ``SEARCH_SAMPLES``, or as few as the study's
    ``samples`` where those are fewer."""
    return min(SEARCH_SAMPLES, cfg.samples)


# The default cell (docs/reproduce.md, with every cell tried): one where Model A's row says something true. Its
# prediction (the best adaptive policy under weighted keys) is 0.131 +- 0.008, far from 0, and A trained for
# DEFAULT_STEPS reaches it within the band [0.8, 1.25] (1.10; seeds 1, 2 of fv train: 0.96, 0.93); A/B = 0.54
# and A/C = 0.15 are under the 0.6 of THEORY.md section 7. The old cell (alpha 0.5, N 128, budget 3, 1500 steps)
# had a prediction of 0.0004 (three adaptive layers read the tree out) and A at 0.0158, far from it.
DEFAULT_CELL = {"depth": 4, "alpha": 0.6, "n_tokens": 64, "train_budget": 2}
DEFAULT_STEPS = 4000
# ``full``: the grid of the training issue at its own cell (alpha 0.5, N 128; patching and probes at budget 3)
FULL_CELL = {"depth": 4, "alpha": 0.5, "n_tokens": 128, "train_budget": 3}


@dataclass(frozen=True)
class ReproduceConfig:
    """Defaults: the cell ``DEFAULT_CELL`` (tree depth 4, alpha 0.6, N 64, budget 2) for ``DEFAULT_STEPS``
    steps per run, priced at 9.1 minutes on 2 CPU cores. ``full`` runs the grid of the training issue, at
    ``FULL_CELL`` (alpha 0.5, N 128, budget 3) unless they are given.

    Training runs go through the engine of ``bridges.runs.engine``: a local Dask cluster of ``workers`` processes
    (default: the number of cores), or the running cluster at ``scheduler``. With one local worker (or one
    run to train) they train in this process. The tree: ``alpha`` or general ``scales`` (then ``depth`` is
    their number; not with ``full``, whose grid has two depths), as in ``DataConfig``."""

    out: str = "runs/reproduce"
    depth: int | None = None  # None: 4, or the number of scales
    alpha: float | None = None  # None: 0.6 (full: 0.5) unless scales are given
    n_tokens: int | None = None  # None: 64 (full: 128)
    s2: float = 0.01
    train_budget: int | None = None  # None: 2 (full: 3)
    steps: int | None = DEFAULT_STEPS  # None: the recipe's steps (bridges.runs.config.recipe_steps)
    samples: int = 20_000
    seed: int = 0
    workers: int | None = None
    scheduler: str | None = None
    full: bool = False
    scaling_steps_per_budget: int = 1000  # the scaling study of --full (bridges.studies.scaling)
    progress: bool = True
    device: str = "cpu"  # torch device of the training runs (enters the cells' keys unless cpu)
    models: str = "".join(BUILT_IN)  # the models of the training grid: those of THEORY.md section 7
    scales: tuple[str, ...] | None = None  # general tree scales instead of alpha (bridges.runs.config.DataConfig)
    keyed: str | None = KEYED  # key family of the prediction rows of A and B (fvnum.keys.nonadaptive); None: linear keys
    # A's and B's keyed rows also on this many contexts of real tokens (best_adaptive_keyed_real,
    # best_nonadaptive_keyed_real) in the tree cells, where they are built (linear or weighted keys); None: none
    real_samples: int | None = REAL_SAMPLES

    def __post_init__(self):
        if self.full and self.scales is not None:
            raise InputError(f"scales give one depth (K = {len(self.scales)}) and the full grid has depths 4 and 6; "
                             "give alpha with full, or scales without it")
        cell = FULL_CELL if self.full else DEFAULT_CELL
        for name in ("n_tokens", "train_budget"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, cell[name])
        study_tree(self, cell["depth"], cell["alpha"])
        from fvsym._validate import check_int

        if self.real_samples is not None:
            object.__setattr__(self, "real_samples", check_int(self.real_samples, "real_samples", 2))
        for name in ("steps", "samples", "workers", "train_budget", "scaling_steps_per_budget"):
            if getattr(self, name) is not None:  # an integer >= 1 (not a float, a text or a bool)
                object.__setattr__(self, name, check_int(getattr(self, name), name, 1))
        if self.train_budget > 2**self.depth - 1:
            raise InputError(f"the training budget {self.train_budget} (train_budget, fv reproduce --budget) exceeds "
                             f"D = {2**self.depth - 1} at depth {self.depth}: give a smaller budget or a larger depth")
        if not self.models or any(m not in MODELS for m in self.models) or len(set(self.models)) != len(self.models):
            raise InputError(f"models must be distinct letters of {''.join(MODELS)}, got {self.models!r}")
        check_device_name(self.device)
        from fvnum.keys.families import check_family

        object.__setattr__(self, "keyed", check_family(self.keyed, optional=True))

    def data(self, prior: str, depth: int | None = None) -> DataConfig:
        return DataConfig(prior=prior, depth=depth or self.depth, alpha=self.alpha, n_tokens=self.n_tokens,
                          s2=self.s2, cov=None if prior_entry(prior).heap else "matched", scales=self.scales)

    @property
    def tree(self) -> str:
        return tree_label(self.alpha, self.scales)

    def to_dict(self) -> dict:
        """The fields (``scales`` only where given, so results by alpha read as before)."""
        d = asdict(self)
        if d["scales"] is None:
            del d["scales"]
        return d


def real_samples_of(cfg: ReproduceConfig, data: DataConfig) -> int | None:
    """The real-token contexts of the keyed rows of ``data``'s cells: ``cfg.real_samples`` in the tree cells with
    linear or weighted keys (where ``fvnum.keys.real_tokens`` builds them), else None."""
    from fvnum.keys.real_tokens import REAL_FAMILIES

    return cfg.real_samples if data.has_leaves and cfg.keyed in REAL_FAMILIES else None


def patched_model(models) -> str | None:
    """The model whose keys the study patches: the first adaptive one (Model A), or None."""
    return next((m for m in models if MODELS[m].adaptive), None)


# --- grid ------------------------------------------------------------------------------------------
def grid(cfg: ReproduceConfig, train_out: str) -> list[RunConfig]:
    """The training runs: reduced (one depth, one seed) or ``full`` (the grid of the training issue:
    depth 4 budget 3 and depth 6 budget 4, two seeds for the depth-6 tree cells)."""
    cells = [(cfg.depth, cfg.train_budget)] if not cfg.full else [(4, 3), (6, 4)]
    runs = []
    for prior in GRID_PRIORS:
        for depth, budget in cells:
            seeds = (cfg.seed, cfg.seed + 1) if cfg.full and prior_entry(prior).heap and depth == 6 else (cfg.seed,)
            for model in cfg.models:
                for seed in seeds:
                    runs.append(RunConfig(
                        cfg.data(prior, depth),
                        ModelConfig(model=model, budget=budget),
                        TrainConfig(steps=cfg.steps, seed=seed, out=train_out, device=cfg.device,  # lr, batch: the recipe
                                    eval_every=RECIPE_EVAL_EVERY if cfg.steps is None else max(1, cfg.steps // 5),
                                    checkpoint_every=max(1, (cfg.steps or 1000) // 10)),
                    ))
    return runs


def train_cell(run: dict) -> dict:
    """One training cell (on a worker): train ``RunConfig.from_dict(run)``, resuming its checkpoint."""
    from bridges.training.train import train

    result = train(RunConfig.from_dict(run), progress=False)
    return {"run_key": result.config.key(), "loss": result.loss, "stderr": result.stderr, "n": result.n_eval,
            "steps": result.steps}


# --- stages ----------------------------------------------------------------------------------------
def reproduction_curves(cfg: ReproduceConfig, store: RunStore, log) -> list[dict]:
    """Loss against budget for every strategy, both priors, noiseless (exact) and at the noise of N."""
    import fvnum
    from fvnum.mc.channels import gaussian, make_channel, tokens
    from fvnum.options import StrategyOptions
    from fvnum.policies.strategies import STRATEGIES
    from fvnum.linear_theory import gaussian_optimum
    from fvsym.tree import tree_loss

    from bridges.training.data import data_channel, fv_prior

    rows = []
    K = cfg.depth
    budgets = list(range(1, 2**K))
    for B in budgets:
        for prior_name in GRID_PRIORS:
            data = cfg.data(prior_name)
            prior = fv_prior(data)
            base = {"prior": prior_name, "depth": K, "alpha": cfg.alpha, "budget": B,
                    **({"scales": list(cfg.scales)} if cfg.scales is not None else {})}
            jobs = []
            if data.has_leaves:
                for strategy in CURVES:
                    if not STRATEGIES[strategy].applies(K, 2**K - 1, B, 0.0):  # path: B <= K
                        continue
                    jobs.append((dict(base, strategy=strategy, noise="none"), lambda s=strategy: _exact(
                        tree_loss(K, B, s, alpha=None if cfg.scales else repr(cfg.alpha), scales=cfg.scales))))
                    kw = NOISY_OPTIONS.get(strategy)
                    kw = {} if kw is None else dict(options=StrategyOptions(**kw))
                    noisy = UNDER_NOISE.get(strategy, strategy)  # optimal is exact only when small
                    jobs.append((dict(base, strategy=noisy, noise=f"N={cfg.n_tokens}"), lambda s=noisy, kw=kw:
                                 fvnum.loss_mc(prior, s, B, tokens(cfg.n_tokens, cfg.s2),
                                               samples=cfg.samples, seed=cfg.seed, **kw).to_dict()))
            jobs.append((dict(base, strategy="gaussian_optimum", noise="none"),
                         lambda: {"value": gaussian_optimum(prior, B, make_channel(prior, gaussian(0))), "stderr": 0.0,
                                  "how": "exact"}))
            jobs.append((dict(base, strategy="gaussian_optimum", noise=f"N={cfg.n_tokens}"),  # gaussian channel, same tau
                         lambda: {"value": gaussian_optimum(prior, B, data_channel(data)), "stderr": 0.0,
                                  "how": "exact"}))
            for key, fn in jobs:
                result, _ = store.cell("theory", key, fn, SHAPES["theory"])
                rows.append({**key, **result})
        log(f"theory curves: budget {B}/{budgets[-1]} done")
    return rows


def _exact(formula) -> dict:
    value = formula.expr
    return {"value": float(value), "stderr": 0.0, "how": "exact", "exact": str(value)}


def training(cfg: ReproduceConfig, store: RunStore, log) -> list[dict]:
    """Train the grid on the engine of ``bridges.runs.engine`` (one torch thread per worker), then compare every
    run with theory."""
    from bridges.analysis.compare import compare
    from bridges.runs.engine import Cell, run_cells
    from bridges.training.train import train

    train_out = str(store.folder / "train")
    runs = grid(cfg, train_out)
    todo = [r for r in runs if store.get(_cell_key("compare", r), shape=SHAPES["compare"]) is None]
    in_process = cfg.scheduler is None and (cfg.workers == 1 or len(todo) < 2
                                            or cfg.workers is None and (_cores() < 2 or not _has_dask()))
    if todo and not in_process:
        log(f"training {len(todo)} runs ({cfg.steps or 'recipe'} steps each)")
        absolute = str(store.folder.resolve() / "train")  # workers may start in another folder
        cells = [Cell.keyed("train", r.cell_config(), train_cell, {"run": r.replace(train={"out": absolute}).to_dict()},
                            SHAPES["train"]) for r in todo]
        run_cells(cells, store, scheduler=cfg.scheduler, workers=cfg.workers, progress=cfg.progress, log=log)
    from bridges.analysis.compare import keyed_cells, theory_losses

    def keyed_rows(data):  # once per data configuration, every budget of the grid at once (a cell)
        if cfg.keyed is None:
            return {}
        budgets = sorted({r.model.budget for r in runs if r.data == data})
        n, real = keyed_search_samples(cfg), real_samples_of(cfg, data)
        found, cached = store.cell("keyed", {"data": data.to_dict(), "budgets": budgets, "family": cfg.keyed,
                                             "samples": n, "seed": cfg.seed,
                                             **({"real_samples": real} if real is not None else {})},
                                   lambda: keyed_cells(data, budgets, cfg.keyed, search_samples=n, seed=cfg.seed,
                                                       real_samples=real), SHAPES["keyed"])
        if not cached:
            log(f"  keyed theory rows ({cfg.keyed} keys) of {tree_label(data.alpha, data.scales)} {data.prior} "
                f"K{data.depth}, budgets {budgets} done")
        return found

    def theory_rows(run):  # shared by every model and seed of a (data, budget) cell
        real = real_samples_of(cfg, run.data)
        config = {"data": run.data.to_dict(), "budget": run.model.budget, "samples": cfg.samples, "seed": cfg.seed,
                  **({"keyed": cfg.keyed} if cfg.keyed is not None else {}),  # linear keys: the cells stored before
                  **({"real_samples": real} if real is not None else {})}
        rows, _ = store.cell("theory_table", config, lambda: theory_losses(
            run.data, run.model.budget, samples=cfg.samples, seed=cfg.seed, search_samples=SEARCH_SAMPLES,
            keyed=cfg.keyed, keyed_rows=keyed_rows(run.data).get(str(run.model.budget)), real_samples=real),
            SHAPES["theory_table"])
        return rows

    tables = []
    for run in runs:
        def work(run=run):
            result = train(run, progress=cfg.progress and in_process)
            return compare(result, samples=cfg.samples, seed=cfg.seed, theory=theory_rows(run)).to_dict()

        table, cached = store.cell("compare", run.cell_config(), work, SHAPES["compare"])
        # the theory rows of the current settings (a compare cell keeps the trained model's numbers; its theory
        # is the theory cell's, so a change of key family recomputes the theory cells only, no training)
        table = {**table, "theory": theory_rows(run)}
        if "audit" not in table:  # compare cells stored before the audit existed: the audit as its own cell
            from bridges.analysis.compare import AUDIT_SIZES, audit_dict

            found, _ = store.cell("audit", {"run": run.key(), "sizes": AUDIT_SIZES, "seed": cfg.seed},
                                  lambda run=run: audit_dict(train(run, progress=False), seed=cfg.seed), SHAPES["audit"])
            table = {**table, "audit": found}
        tables.append(table)
        log(f"  compared {run.key()}: trained {table['trained']['loss']:.4f}" + (" (cached)" if cached else ""))
    return tables


def _cores() -> int:
    from fvnum.mc._chunks import default_threads  # the cores this process may use (affinity), as the kernels count

    return default_threads()


def _has_dask() -> bool:
    """Whether the ``[dask]`` extra is installed: without it the grid trains in this process, one run at a time
    (``--workers`` or ``--scheduler`` then say which extra to install)."""
    from importlib.util import find_spec

    return find_spec("distributed") is not None


def _cell_key(name: str, run: RunConfig) -> str:
    from bridges.runs.store import config_key

    return f"{name}-{config_key({'name': name, **run.cell_config()})}"


def _load_model(run: RunConfig):
    from bridges.training.train import train

    return train(run, progress=False).model


def patching_and_probes(cfg: ReproduceConfig, store: RunStore, log) -> dict:
    """Key-patching tables (theory ``path`` and trained Model A) and probes (theory and A, B, C)."""
    from bridges.patching.keys import key_patching_table, theory_patching_table
    from bridges.analysis.probes import theory_probes, workspace_probes

    train_out = str(store.folder / "train")
    runs = {r.model.model: r for r in grid(cfg, train_out) if r.data.has_leaves and r.data.depth == cfg.depth
            and r.model.budget == cfg.train_budget and r.train.seed == cfg.seed}
    data, B = cfg.data("tree"), cfg.train_budget
    n = max(512, cfg.samples // 10)
    out = {}
    out["patching_theory"], _ = store.cell("patching_theory", {"data": data.to_dict(), "budget": B, "samples": cfg.samples,
                                                               "seed": cfg.seed},
                                           lambda: theory_patching_table(data, B, samples=cfg.samples, seed=cfg.seed).to_dict(),
                                           SHAPES["patching_theory"])
    deep = patched_model(runs)
    if deep is not None:
        out[f"patching_{deep}"], _ = store.cell("patching_model", {"run": runs[deep].cell_config(), "n": n,
                                                             "seed": cfg.seed},
                                          lambda: key_patching_table(_load_model(runs[deep]), data, n_contexts=n,
                                                                     seed=cfg.seed).to_dict(), SHAPES["patching_model"])
    log("patching tables done")
    out.update(function_vector_tables(cfg, store, data, B, n, runs.get(deep) if deep is not None else None, deep))
    log("function-vector tables done")
    probes = {}
    probes["theory path"], _ = store.cell("probes_theory", {"data": data.to_dict(), "budget": B, "n": 4 * n, "seed": cfg.seed},
                                          lambda: theory_probes(data, B, samples=4 * n, seed=cfg.seed).to_dict(),
                                          SHAPES["probes_theory"])
    for name, run in runs.items():
        probes[f"Model {name}"], _ = store.cell("probes_model", {"run": run.cell_config(), "n": 4 * n, "seed": cfg.seed},
                                               lambda run=run: workspace_probes(_load_model(run), data, n_contexts=4 * n,
                                                                                seed=cfg.seed).to_dict(),
                                               SHAPES["probes_model"])
    out["probes"] = probes
    log("probes done")
    return out


def function_vector_tables(cfg: ReproduceConfig, store: RunStore, data, B: int, n: int, run, deep) -> dict:
    """Transplant and injection tables (docs/theory.md section 9) of the theory's ``path`` and of the deep model."""
    from fvnum.mc.channels import tokens
    from fvnum.patching.state import injection_table as theory_injection
    from fvnum.patching.state import state_patching_table as theory_transplant

    from bridges.patching.state import model_injection_table, model_state_patching_table
    from bridges.training.data import fv_prior

    theory = dict(samples=cfg.samples, seed=cfg.seed)
    channel = tokens(data.n_tokens, data.s2)
    key = {"data": data.to_dict(), "budget": B, "samples": cfg.samples, "seed": cfg.seed}
    out = {}
    out["transplant_theory"], _ = store.cell("transplant_theory", key, lambda: theory_transplant(
        fv_prior(data), "path", B, channel, **theory).to_dict(), SHAPES["transplant_theory"])
    out["injection_theory"], _ = store.cell("injection_theory", key, lambda: theory_injection(
        fv_prior(data), "path", B, channel, **theory).to_dict(), SHAPES["injection_theory"])
    if run is not None:
        at = {"run": run.cell_config(), "n": n, "seed": cfg.seed}
        out[f"transplant_{deep}"], _ = store.cell("transplant_model", at, lambda: model_state_patching_table(
            _load_model(run), data, n_contexts=n, seed=cfg.seed).to_dict(), SHAPES["transplant_theory"])
        out[f"injection_{deep}"], _ = store.cell("injection_model", at, lambda: model_injection_table(
            _load_model(run), data, n_contexts=n, seed=cfg.seed, mean_contexts=4 * n).to_dict(), SHAPES["injection_theory"])
    return out


# --- outputs ---------------------------------------------------------------------------------------
def _write_outputs(cfg: ReproduceConfig, folder: Path, curves, tables, extra) -> list[Path]:
    from bridges.studies import figures
    from bridges.analysis.compare import to_markdown

    written = [
        write_json(folder / "results.json", with_checksum({"config": cfg.to_dict(), "theory_curves": curves, "training": tables, **extra})),
        write_atomic(folder / "theory_curves.csv", csv_text(curves)),
        write_atomic(folder / "training.csv", csv_text([
            {"key": t["key"], "model": t["model"], "prior": t["prior"], "depth": t["depth"], "budget": t["budget"],
             "seed": t["seed"], "loss": t["trained"]["loss"], "stderr": t["trained"]["stderr"],
             **{f"theory_{r['name']}": r["value"] for r in t["theory"]}} for t in tables])),
    ]
    written += figures.reproduction_figure(folder / "fig_loss_vs_budget.png", curves, tables, cfg)
    deep = patched_model(cfg.models)
    written += figures.patching(folder / "fig_patching.png", {"theory: path strategy": extra.get("patching_theory"),
                                                              f"trained Model {deep}": extra.get(f"patching_{deep}")})
    written += figures.function_vectors(folder / "fig_function_vectors.png",
                                        {"theory: path": extra.get("transplant_theory"),
                                         f"trained Model {deep}": extra.get(f"transplant_{deep}")},
                                        {"theory: path": extra.get("injection_theory"),
                                         f"trained Model {deep}": extra.get(f"injection_{deep}")})
    written += figures.probes(folder / "fig_probes.png", extra.get("probes", {}))
    written.append(write_atomic(folder / "report.md", report_markdown(cfg, curves, tables, extra, to_markdown)))
    return written


def report_markdown(cfg, curves, tables, extra, to_markdown) -> str:
    from bridges.analysis.compare import grid_checks
    from bridges.patching.keys import table_from_dict

    lines = [
        "# fv reproduce: report", "",
        f"Depth {cfg.depth}, {cfg.tree}, N {cfg.n_tokens} tokens, s2 {cfg.s2}; training budget "
        f"{cfg.train_budget}, {cfg.steps or 'recipe'} steps per run, seed {cfg.seed}{', full grid' if cfg.full else ''}.", "",
        "## Loss against budget", "", "![loss vs budget](fig_loss_vs_budget.png)", "",
        "Exact values (`noise = none`) come from `fvsym`; Monte Carlo values at the noise of N tokens from `fvnum` "
        "(see theory_curves.csv).", "",
        "## Trained models beside the theory", "",
    ]
    from bridges.analysis.compare import seed_summary, summary_markdown

    lines += ["Each model beside the one theory row it is held to (fvnum.theory.prediction_row), seeds aggregated, "
              "and the audit of its own readings (`fv audit`: the Bayes posterior mean on the CLT law of its readings, "
              "the loss its measurements allow):", "", summary_markdown(seed_summary(tables))]
    checks = grid_checks(tables)
    if checks:
        lines += ["| prediction | measured | holds |", "|---|---|---|"]
        lines += [f"| {c['prediction']} | {c['measured']} | {'yes' if c['holds'] else '**no**'} |" for c in checks]
        lines.append("")
    lines += real_token_lines(tables)
    for t in tables:
        lines.append(to_markdown(t))
    if extra.get("scaling_fits"):
        lines += ["## Scaling study (depth 6, budgets 1..6)", "",
                  "Trained models against budget with fitted laws: see [scaling/report.md](scaling/report.md).", "",
                  "![scaling](scaling/fig_scaling.png)", ""]
    if extra.get("patching_theory"):
        lines += ["## Key patching (docs/theory.md section 8)", "", "![patching](fig_patching.png)", "",
                  "Loss with layer l's keys patched from a donor whose path first differs at depth j.", "",
                  "Theory (path strategy):", "", table_from_dict(extra["patching_theory"]).to_markdown(), ""]
        deep = patched_model(cfg.models)
        if extra.get(f"patching_{deep}"):
            lines += [f"Trained Model {deep}:", "", table_from_dict(extra[f"patching_{deep}"]).to_markdown(), "",
                      *unpatched_note(deep, tables, cfg, extra[f"patching_{deep}"], "key-patching")]
    if extra.get("transplant_theory"):
        from fvnum.patching.state_tables import injection_from_dict

        deep = patched_model(cfg.models)
        lines += ["## Function vectors: transplant and injection (docs/theory.md section 9)", "",
                  "![function vectors](fig_function_vectors.png)", "",
                  "Transplant: the target's workspace Phi_l replaced by its donor's (divergence depth j); the later "
                  "layers read the target's tokens from that state. Injection: Phi_l replaced by the mean workspace "
                  "of the donor's prefix; prefix accuracy is the fraction of targets decoded into the injected "
                  "subtree.", ""]
        for name, key in (("Theory (path strategy)", "theory"), (f"Trained Model {deep}", deep)):
            if extra.get(f"transplant_{key}"):
                lines += [f"{name}, transplant:", "", table_from_dict(extra[f"transplant_{key}"]).to_markdown(), ""]
            if extra.get(f"injection_{key}"):
                lines += [f"{name}, injection:", "", injection_from_dict(extra[f"injection_{key}"]).to_markdown(), ""]
            if key == deep and extra.get(f"transplant_{key}"):
                lines += unpatched_note(deep, tables, cfg, extra[f"transplant_{key}"], "transplant and injection")
    if extra.get("probes"):
        lines += ["## Function-vector probes (docs/theory.md section 9)", "", "![probes](fig_probes.png)", "",
                  "Held-out accuracy of a linear probe from the workspace after layer l to the path prefix s_1..s_l.", "",
                  "| source | " + " | ".join(f"layer {l + 1}" for l in range(cfg.train_budget)) + " |",
                  "|---" * (cfg.train_budget + 1) + "|"]
        for name, p in extra["probes"].items():
            cells = [f"{a:.2f} (chance {c:.2f})" for a, _, c in p["prefix"]]
            cells += ["(one layer)"] * (cfg.train_budget - len(cells))
            lines.append(f"| {name} | " + " | ".join(cells) + " |")
        lines += ["", "From the final workspace (the whole function vector), the prefix s_1..s_m:", "",
                  "| source | " + " | ".join(f"m = {m}" for m in range(1, cfg.depth + 1)) + " |",
                  "|---" * (cfg.depth + 1) + "|"]
        for name, p in extra["probes"].items():
            lines.append(f"| {name} | " + " | ".join(f"{a:.2f}" for a, _, _ in p["final_prefix"]) + " |")
        lines.append("")
    return "\n".join(lines) + "\n"


def unpatched_note(model: str, tables, cfg, patched: dict, what: str) -> list[str]:
    """Why a model has two unpatched losses in the report: the held-out loss of its comparison (the evaluation's
    contexts) and the unpatched loss of the intervention tables (their own target contexts), with the difference
    of the two in standard errors; none where the model's comparison is not in ``tables``."""
    from fvnum.estimate import value_text

    t = next((t["trained"] for t in tables if t["model"] == model and t["depth"] == cfg.depth and t["seed"] == cfg.seed
              and t["budget"] == cfg.train_budget and prior_entry(t["prior"]).heap), None)
    u = patched.get("unpatched")
    if t is None or not u:
        return []
    d, se = u["value"] - t["loss"], (u.get("stderr", 0.0) ** 2 + (t.get("stderr") or 0.0) ** 2) ** 0.5
    return [f"Two unpatched losses of Model {model}: {value_text(u['value'], u.get('stderr'))} in the {what} tables "
            f"is on their own {u.get('n', patched.get('n', '?'))} target contexts; {value_text(t['loss'], t.get('stderr'))} in "
            f"the comparison above is on the {t.get('n', '?')} held-out contexts of its evaluation. Two samples of "
            f"contexts: they differ by {d:+.4f} ({abs(d) / se:.1f} standard errors)." if se > 0 else
            f"Two unpatched losses of Model {model}: {u['value']:.4f} ({what} tables, their own target contexts) and "
            f"{t['loss']:.4f} (the comparison's held-out contexts).", ""]


def real_token_lines(tables) -> list[str]:
    """The report's lines on A's and B's keyed rows on real tokens (``best_*_keyed_real``) beside their law rows (the
    predictions) and the trained models, one line per model of each cell that has them; none without them."""
    from fvnum.estimate import value_text  # the one formatter of a standard error

    pairs = {"A": ("best_adaptive_keyed_real", "best_adaptive_keyed"), "B": ("best_nonadaptive_keyed_real",
                                                                           "best_nonadaptive_keyed")}
    out = []
    for t in tables:
        rows = {r["name"]: r for r in t["theory"]}
        real, law = pairs.get(t["model"], (None, None))
        if real in rows and law in rows:
            r, p = rows[real], rows[law]
            out.append(f"| {t['prior']} K{t['depth']} B{t['budget']} seed {t['seed']} | {t['model']} | "
                       f"{value_text(r['value'], r['stderr'])} ({r['how']}) | {value_text(p['value'], p['stderr'])} | "
                       f"{r['value'] / p['value']:.3f} | {t['trained']['loss']:.4f} |")
    if not out:
        return []
    return ["A's and B's prediction rows on real tokens (fvnum.keys.real_tokens: the same policy and design reading "
            "drawn tokens, decoded by the posterior under the CLT law; studies/scaling/real_tokens.md):", "",
            "| cell | model | on real tokens | law (the prediction) | real / law | trained |", "|---|---|---|---|---|---|",
            *out, ""]


@dataclass(frozen=True)
class Reproduction(DictLayout):
    """What :func:`reproduce` did: the output ``folder``, the files ``written``, the theory curves
    (``theory_curves``: one row per prior, strategy, noise and budget), the trained models beside the theory
    (``training``: one comparison table per run) and ``extra`` (patching tables, probes, and with ``full`` the
    scaling study's fits). ``to_dict()`` is the earlier dict layout (``extra``'s entries at the top level);
    ``to_frame("theory_curves" | "training")`` one of its tables."""

    folder: str
    written: tuple
    theory_curves: list
    training: list
    extra: dict

    def to_dict(self) -> dict:
        return {"folder": self.folder, "written": list(self.written), "theory_curves": self.theory_curves,
                "training": self.training, **self.extra}

    def to_frame(self, which: str = "theory_curves"):
        return frame_of({"theory_curves": self.theory_curves, "training": self.training}, which, "a Reproduction")


def reproduce(cfg: ReproduceConfig = ReproduceConfig(), log=print) -> Reproduction:
    """Run every stage (skipping finished cells) and write the report. Returns a :class:`Reproduction`."""
    start = time.time()
    if cfg.scheduler not in (None, "synchronous"):
        from bridges.runs.engine import scheduler_address

        scheduler_address(cfg.scheduler)  # a scheduler that does not answer: one line now, not after the theory curves
    require("fv reproduce")  # it trains: without torch, refused before its folder and lock exist
    store = RunStore(cfg.out, KIND)
    log(f"output folder: {store.folder}")
    curves = reproduction_curves(cfg, store, log)
    tables = training(cfg, store, log)
    extra = patching_and_probes(cfg, store, log)
    if cfg.full:
        from bridges.studies.scaling import ScalingConfig, scaling_study

        study = scaling_study(ScalingConfig(out=str(store.folder / "scaling"), alpha=cfg.alpha, n_tokens=cfg.n_tokens,
                                            s2=cfg.s2, steps_per_budget=cfg.scaling_steps_per_budget, seed=cfg.seed,
                                            workers=cfg.workers, scheduler=cfg.scheduler, samples=cfg.samples, progress=cfg.progress), log=log)
        extra["scaling_fits"] = study["fits"]
    written = _write_outputs(cfg, store.folder, curves, tables, extra)
    log(f"report: {store.folder / 'report.md'}  ({time.time() - start:.0f} s)")
    return Reproduction(str(store.folder), tuple(str(p) for p in written), curves, tables, extra)
