"""``fv`` subcommands of the studies: ``fv reproduce`` (the main job), ``fv scaling`` (the law study) and ``fv sweep``
(any grid of runs on Dask). Their options come from the study config dataclasses' defaults; the options of one
run and the helpers they share with ``fv train`` and ``fv compare`` are those of :mod:`bridges.commands`. Handlers
import torch and Dask lazily. The top layer, as :mod:`bridges.commands`: no module of the packages imports it.
"""
from __future__ import annotations

import argparse
import re
import sys

from fvsym._emit import add_format_argument, emit
from fvsym._validate import parse_int_list
from fvsym.cli import int_arg, number_arg
from fvsym.errors import InputError
from fvsym.guards.limits import DEFAULT_LONG_SECONDS

from bridges.commands import _add_engine_arguments, _add_keyed_argument, _arg_type, _check_study, check_workers
from bridges.runs.config import MAX_THREADS, ROUTERS, RUN_OPTIONS
from bridges.runs.devices import check_device, check_device_name

CALL_AGAIN = 75  # exit code of ``fv scaling --resumable`` stopped at its cap with work left (sysexits' EX_TEMPFAIL)


def add_study_commands(subparsers) -> None:
    """Add the study subcommands to the ``fv`` dispatcher (after those of one run, :mod:`bridges.commands`)."""
    _register_reproduce(subparsers)
    _register_scaling(subparsers)
    _register_sweep(subparsers)


def _register_reproduce(subparsers) -> None:
    from bridges.studies.reproduce import ReproduceConfig

    d = ReproduceConfig()
    p = subparsers.add_parser(
        "reproduce",
        help="the whole study in one command: theory curves, training grid, patching, probes, report",
        description="Theory curves (every strategy, both priors, noiseless and at the noise of N tokens), a "
        "training grid of Models A, B, C beside the theory, key-patching tables and function-vector probes, "
        "written to one folder with report.md, figures (PNG), JSON and CSV. Finished cells are kept: "
        "re-running resumes an interrupted run.",
    )
    _add_study_arguments(p, d, "report folder", "tree depth of the reduced grid and curves")
    full = ReproduceConfig(full=True)
    p.set_defaults(tokens=None)  # None: the config's, which --full changes
    p.add_argument("--full", action="store_true", help="the full grid of the training issue (depths 4 and 6; "
                   f"alpha {full.alpha}, N {full.n_tokens}, budget {full.train_budget} unless given)")
    p.add_argument("--budget", type=int_arg("--budget", 1), default=None,
                   help=f"training budget (default {d.train_budget}; {full.train_budget} with --full)")
    p.add_argument("--steps", type=int_arg("--steps", 1), default=d.steps, help=f"training steps per run (default {d.steps})")
    _add_keyed_argument(p, d.keyed)
    p.add_argument("--real-samples", type=_real_samples, default=d.real_samples, metavar="N|none",
                   help="contexts of real tokens of A's and B's keyed rows on real tokens in the tree cells "
                   f"(best_adaptive_keyed_real, best_nonadaptive_keyed_real; --keyed weighted or linear; default "
                   f"{d.real_samples}; none: no such rows)")
    add_format_argument(p)
    p.set_defaults(func=reproduce_command, default_max_seconds=DEFAULT_LONG_SECONDS)


def _real_samples(text: str) -> int | None:
    """``--real-samples``: a number of contexts >= 2, or ``none``."""
    return None if str(text).strip().lower() == "none" else int_arg("--real-samples", 2, 10**7)(text)


def _add_study_arguments(p: argparse.ArgumentParser, d, out_help: str, depth_help: str) -> None:
    """The options ``fv reproduce`` and ``fv scaling`` share, with the defaults of their config ``d``; the
    tree by ``--alpha`` or by ``--scales`` as in ``fv train`` (``--depth`` then follows the scales)."""
    tree = {o.dest: o for o in RUN_OPTIONS if o.dest in ("depth", "alpha", "scales", "tokens")}
    p.add_argument("--out", default=d.out, metavar="DIR", help=f"{out_help} (default {d.out})")
    p.add_argument("--depth", type=_arg_type(tree["depth"]), default=None, metavar="K",
                   help=f"{depth_help} (default {d.depth}, or the number of --scales)")
    p.add_argument("--alpha", type=_arg_type(tree["alpha"]), default=None, help=f"e.g. 1/2 (default {d.alpha})")
    p.add_argument("--scales", type=_arg_type(tree["scales"]), default=None, metavar="a1,..,aK",
                   help=tree["scales"].help)
    p.add_argument("--tokens", "--n-tokens", dest="tokens", type=_arg_type(tree["tokens"]), default=d.n_tokens,
                   metavar="N", help=f"context length (default {d.n_tokens})")
    p.add_argument("--samples", type=int_arg("--samples", 2, 10**10), default=d.samples, help=f"Monte Carlo samples per theory number (default {d.samples})")
    p.add_argument("--seed", type=int_arg("--seed", 0, 2**63 - 1), default=d.seed, help=f"first seed (default {d.seed})")
    _add_engine_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress output")




def _tree_of(args) -> dict:
    """``depth``, ``alpha`` and ``scales`` of a study config from its options (None: the config's default)."""
    return {k: getattr(args, k) for k in ("depth", "alpha", "scales") if getattr(args, k) is not None}


def reproduce_command(args: argparse.Namespace) -> int:
    from bridges.studies.reproduce import ReproduceConfig, reproduce

    check_workers(args.workers, args.scheduler)
    cfg = ReproduceConfig(out=args.out, **_tree_of(args), n_tokens=args.tokens,  # None: the config's defaults
                          train_budget=args.budget, steps=args.steps, samples=args.samples, seed=args.seed,
                          workers=args.workers, scheduler=args.scheduler, full=args.full, progress=not args.quiet,
                          keyed=args.keyed, real_samples=args.real_samples)
    from bridges.prices.cost import reproduce_seconds

    _check_study(f"fv reproduce at depth {cfg.depth}" + (" (--full)" if cfg.full else ""), reproduce_seconds, cfg)
    quiet = args.quiet or args.format == "json"
    out = reproduce(cfg, log=(lambda *a: None) if quiet else print)
    emit({"folder": out.folder, "written": list(out.written)}, args.format, [f"report: {out.folder}/report.md"])
    return 0


def _parse_budgets(text: str) -> tuple[int, ...]:
    """``1-6`` or ``1,2,4`` (budgets 1..64, a range in increasing order)."""
    text = str(text).strip()
    if "-" in text:
        ends = text.split("-")
        if len(ends) != 2 or not all(re.fullmatch(r"\s*\d{1,19}\s*", e) for e in ends):
            raise InputError(f"--budgets must be a range such as 1-6 or a list such as 1,2,4, got {text!r}")
        lo, hi = (int(e) for e in ends)
        if not 1 <= lo <= hi <= 64:
            raise InputError(f"--budgets must lie in 1..64 in increasing order, got {text!r}")
        return tuple(range(lo, hi + 1))
    return tuple(parse_int_list(text, "--budgets", 1, 64))


def _register_scaling(subparsers) -> None:
    from bridges.studies.scaling import ScalingConfig

    d = ScalingConfig()
    p = subparsers.add_parser(
        "scaling",
        help="the scaling study: trained A, B, C against budget beside the theory, with fitted laws",
        description="Train Models A, B, C at every budget with several seeds (the recipe; steps = "
        "the recipe's per model, or STEPS_PER_BUDGET x budget), put them beside the theory at the same noise "
        "(the prediction rows of A and B under weighted keys, path, best adaptive, top levels, best non-adaptive "
        "designs, linear theory), test which law each follows (loss ~ c r^B or c B^-e, local decay, a verdict "
        "that can say can't tell), and write scaling.json, scaling.csv, fig_scaling.png, fig_decay.png and "
        "report.md. Finished runs are kept: re-running resumes.",
    )
    _add_study_arguments(p, d, "study folder", "tree depth K")
    p.add_argument("--s2", type=number_arg("--s2", low=0, high=1e100), default=d.s2, help=f"label noise variance (default {d.s2})")
    p.add_argument("--budgets", default=f"{d.budgets[0]}-{d.budgets[-1]}", help="range or list (default 1-6)")
    p.add_argument("--models", default=d.models, help=f"default {d.models}")
    p.add_argument("--seeds", type=int_arg("--seeds", 1, 1000), default=d.seeds, help=f"seeds per model and budget (default {d.seeds})")
    p.add_argument("--steps-per-budget", type=int_arg("--steps-per-budget", 1), default=d.steps_per_budget,
                   help="training steps per unit of budget for every model (default: the recipe's, A 5000, B and C "
                   "2500)")
    p.add_argument("--flop-match", type=_flop_match_arg, default=d.flop_match, metavar="M:REF",
                   help="train model M for the steps whose FLOPs (counted on both models) equal model REF's run at "
                   "the same budget, e.g. A:B (default: every model by the steps rule)")
    _add_keyed_argument(p, d.keyed)
    p.add_argument("--router", choices=ROUTERS, default=d.router,
                   help=f"router of the adaptive model A (default {d.router}; qk: docs/theory.md section 7, B and C unchanged)")
    p.add_argument("--cut", type=int_arg("--cut", 1), default=d.cut,
                   help=f"first budget of the law test (default {d.cut}: after the dense first reading)")
    p.add_argument("--search-samples", type=int_arg("--search-samples", 2, 10**9), default=d.search_samples,
                   help=f"samples per candidate in the policy and design searches (default {d.search_samples})")
    p.add_argument("--threads", type=int_arg("--threads", 1, MAX_THREADS), default=d.threads, help=f"torch threads per run (default {d.threads})")
    p.add_argument("--device", type=_device_arg, default=d.device,
                   help="torch device of the runs: cpu, cuda, cuda:<i> or mps (default cpu)")
    p.add_argument("--report-only", action="store_true",
                   help="train nothing: write the outputs of the runs finished so far (the report says how many)")
    p.add_argument("--resumable", action="store_true",
                   help="work in calls of at most the time cap (fv --max-seconds S) instead of refusing a study "
                   f"priced over it: a call trains until the cap (checkpoints kept) and exits with code {CALL_AGAIN} "
                   "('call again') while work is left; once every run is trained, the theory starts in a call whose "
                   "time left covers its price; the call that writes the outputs exits with 0")
    add_format_argument(p)
    p.set_defaults(func=scaling_command, default_max_seconds=DEFAULT_LONG_SECONDS)


def _flop_match_arg(text: str) -> tuple[str, str]:
    parts = text.split(":")
    if len(parts) != 2 or not all(len(x) == 1 for x in parts):
        raise argparse.ArgumentTypeError(f"--flop-match takes two model letters as M:REF (e.g. A:B), got {text!r:.40}")
    return parts[0], parts[1]


def _device_arg(text: str) -> str:
    try:
        return check_device_name(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def scaling_config(args: argparse.Namespace):
    """The ``ScalingConfig`` of parsed ``fv scaling`` options (its defaults are the config's)."""
    from bridges.studies.scaling import ScalingConfig

    return ScalingConfig(out=args.out, **_tree_of(args), n_tokens=args.tokens, s2=args.s2,
                         budgets=_parse_budgets(args.budgets), models=args.models, seeds=args.seeds,
                         steps_per_budget=args.steps_per_budget, samples=args.samples,
                         search_samples=args.search_samples, seed=args.seed, workers=args.workers,
                         scheduler=args.scheduler, threads=args.threads, device=args.device, progress=not args.quiet,
                         keyed=None if args.keyed == "none" else args.keyed, cut=args.cut, flop_match=args.flop_match,
                         router=args.router)


def scaling_command(args: argparse.Namespace) -> int:
    from bridges.studies.scaling import scaling_study

    check_workers(args.workers, args.scheduler)
    cfg = scaling_config(args)
    if not args.report_only and args.scheduler is None:  # the runs train here: their device must be here
        check_device(cfg.device)
    from bridges.prices.cost import scaling_seconds

    quiet = args.quiet or args.format == "json"
    log = (lambda *a: None) if quiet else print
    if args.resumable:
        if args.report_only:
            raise InputError("--resumable trains in calls and --report-only trains nothing: give one of them")
        result, left = resumable_scaling(cfg, log)
        if result is None:
            print(f"fv scaling: {left}: call the same command again to resume (exit code {CALL_AGAIN})",
                  file=sys.stderr)
            return CALL_AGAIN
    else:
        price = (lambda c: scaling_seconds(c, train=False)) if args.report_only else scaling_seconds
        _check_study(f"fv scaling of {len(cfg.runs(''))} runs", price, cfg, steps="steps_per_budget", depth=False)
        result = scaling_study(cfg, log=log, train=not args.report_only)
    lines = []
    for model, entry in result.fits["models"].items():
        t = entry.get("test")
        if t is None:
            lines.append(f"Model {model}: no law test ({entry.get('test_refused')})")
            continue
        r, e = t["fits"]["exponential"], t["fits"]["power"]
        lines.append(f"Model {model}: {t['verdict']} (predicted {entry['predicted']}); r = {r['value']:.3g} "
                     f"[{r['ci'][0]:.3g}, {r['ci'][1]:.3g}], e = {e['value']:.3g} [{e['ci'][0]:.3g}, {e['ci'][1]:.3g}]")
    lines.append(f"study: {result.folder}/report.md, scaling.json, scaling.csv, fig_scaling.png, fig_decay.png")
    emit({"folder": result.folder, "fits": result.fits}, args.format, lines)
    return 0


CALL_START_S = 30.0  # seconds a --resumable call allows for its start (torch, the local cluster) before a cell starts
CELL_END_S = 5.0  # and a training cell for its end beside the audit (the result, the checkpoint, the stored cell)


def resumable_scaling(cfg, log=print):
    """One call of ``fv scaling --resumable``: ``(ScalingStudy, None)`` when it wrote the outputs, or ``(None,
    why)`` when it stopped at the time cap with work left. No refusal by the whole study's price: the runs not
    finished are trained until the cap less a reserve (each stops there with its checkpoint kept and resumes from
    it in the next call), the reserve being the largest audit a training cell ends with
    (``bridges.prices.cost.audit_seconds``) and :data:`CELL_END_S`, so that a run trained just before it still
    finishes its cell within the cap; a cell with too little time left for its audit stops too
    (``bridges.runs.engine.TimeCapStop``) and is done by a later call. A cap that cannot hold a reserve and an audit
    after the start (:data:`CALL_START_S`) is refused before any work. Once every run is trained, the theory and
    the outputs (``scaling_study(cfg, train=False)``: the outputs of a whole ``fv scaling``) start in a call whose time left
    covers their price (``bridges.prices.cost.scaling_seconds(cfg, train=False)``; past the cap no further theory
    cell starts: the next call goes on); a theory priced over the whole cap is refused (one line) once the runs
    are trained: no call of that cap could compute it."""
    from pathlib import Path

    from fvsym.guards.limits import check_time, format_seconds, max_seconds, seconds_left, time_limit, time_over
    from fvsym.errors import ResourceRefused

    from bridges.prices.cost import audit_seconds, scaling_seconds
    from bridges.runs.engine import TimeCapStop
    from bridges.runs.store import RunStore
    from bridges.studies.scaling import KIND, scaling_study, train_runs

    reserve = max(audit_seconds(r) for r in cfg.runs("")) + CELL_END_S
    check_time(f"a call of fv scaling --resumable (its start and twice {format_seconds(reserve)}: the reserve "
               "kept after training for the audit a training cell ends with, and one audit within the training)",
               CALL_START_S + 2 * reserve, "; give a larger --max-seconds")
    theory = scaling_seconds(cfg, train=False)
    log(f"resumable: this call works for up to {format_seconds(max_seconds())}, training until "
        f"{format_seconds(reserve)} before its end; the study is priced at {format_seconds(scaling_seconds(cfg))} "
        f"(audits not counted), its theory and outputs at {format_seconds(theory)}")
    store = RunStore(cfg.out, KIND, create=True)
    runs = cfg.runs(str(store.folder / "train"))
    try:
        if seconds_left() <= reserve:
            raise TimeCapStop("the start took the time of the training")
        with time_limit(seconds_left() - reserve):  # an audit started before this deadline ends within the cap
            train_runs(cfg, store, runs, log)
    except TimeCapStop:
        done = sum((Path(r.train.out) / r.key() / "result.json").is_file() for r in runs)
        return None, (f"stopped at the time cap with {done} of {len(runs)} runs trained (the others resume from "
                      "their checkpoints)")
    check_time("the theory and outputs of the study (every run is trained; with --resumable they run in one "
               "call)", theory, "; give the call that computes them a larger --max-seconds (the theory needs no "
               "--device)")
    if seconds_left() < theory:
        return None, f"every run is trained; the theory starts in a call with {format_seconds(theory)} left"
    try:
        return scaling_study(cfg, log=log, train=False), None
    except ResourceRefused as exc:  # the cap passed between two theory cells (the store stops there)
        over = time_over()
        if exc.limit != "time" or over is None or over() is None:
            raise
        return None, "every run is trained; stopped at the time cap between two theory cells"


def _register_sweep(subparsers) -> None:
    p = subparsers.add_parser(
        "sweep", help="a grid of fv train, compare or mc runs on a Dask cluster (local by default)",
        description="Run every combination of the [grid] options of a TOML spec (command = train | compare | "
        "mc, [base] options, [grid] lists of values) on dask.distributed: a local cluster of --workers processes, "
        "or the running cluster at --scheduler. Writes DIR/results.csv and DIR/results.json (one row per cell); "
        "finished cells are kept in DIR/cells, so a re-run computes only what is missing. Training checkpoints "
        "go to DIR/train (on a cluster, DIR must be on a file system every worker sees).",
    )
    p.add_argument("spec", metavar="SPEC.toml", help="the sweep spec")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (results, cells, checkpoints)")
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="a running Dask scheduler, tcp://host:8786, or its --scheduler-file "
                   "(default: start a local cluster; 'synchronous': run in this process)")
    p.add_argument("--workers", type=int_arg("--workers", 1, MAX_THREADS), default=None, metavar="N",
                   help="worker processes of the local cluster (default: the number of cores)")
    add_format_argument(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar or messages")
    p.set_defaults(func=sweep_command, default_max_seconds=DEFAULT_LONG_SECONDS)


def sweep_command(args) -> int:
    import sys

    from bridges.studies.sweep import COMMANDS, run_sweep

    check_workers(args.workers, args.scheduler)
    quiet = args.quiet or args.format == "json"
    log = (lambda *a: None) if quiet else (lambda *a: print(*a, file=sys.stderr))
    try:
        result = run_sweep(args.spec, out=args.out, scheduler=args.scheduler, workers=args.workers,
                           progress=not args.quiet, log=log)
    except RuntimeError as exc:  # a cell whose worker kept dying: one line, finished cells kept
        print(f"fv sweep: error: {exc}", file=sys.stderr)
        return 1
    column = COMMANDS[result.command].column
    names = [k for k in result.rows[0] if k not in (column, "stderr", "n", "key")]
    lines = [" ".join(f"{n:>10}" for n in names) + f" {column:>12} {'stderr':>10} {'n':>8}  key"]
    for r in result.rows:
        lines.append(" ".join(f"{str(r[n]):>10}" for n in names) + f" {r[column]:12.6g} {r['stderr']:10.2g} "
                     f"{r['n']:8d}  {r['key']}")
    emit(result.to_dict(), args.format, lines)
    return 0
