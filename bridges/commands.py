"""``fv`` subcommands of the torch side: ``fv train`` (more, such as ``compare``, register here too).

``add_run_arguments`` / ``config_from_args`` turn command-line options into a ``RunConfig`` and are
shared by every subcommand that trains. Handlers import torch lazily (``fv --help`` must stay light).
"""
from __future__ import annotations

import argparse

from .config import (
    COVARIANCES, MODELS, PRIORS, READOUTS, SCHEDULES, TRAIN_LOSSES, DataConfig, ModelConfig, RunConfig, TrainConfig,
)

DEFAULT_OUT = "runs"


def register(subparsers) -> None:
    """Add the bridges subcommands to the ``fv`` dispatcher."""
    _register_train(subparsers)
    _register_compare(subparsers)
    _register_reproduce(subparsers)
    from .sweep import register as _register_sweep

    _register_sweep(subparsers)


def add_run_arguments(p: argparse.ArgumentParser, *, model_required: bool = True) -> None:
    """Options that define one run (data, model, training)."""
    d, m, t = DataConfig(), ModelConfig(), TrainConfig()
    g = p.add_argument_group("data (THEORY.md section 1)")
    g.add_argument("--prior", choices=PRIORS, default=d.prior)
    g.add_argument("--cov", choices=COVARIANCES, default=None, help="gaussian prior only (default matched)")
    g.add_argument("--depth", type=int, default=d.depth, metavar="K",
                   help=f"tree depth, D = 2^K - 1 (default {d.depth})")
    g.add_argument("--alpha", type=float, default=d.alpha, help=f"scale ratio in (0, 1) (default {d.alpha})")
    g.add_argument("--tokens", type=int, default=d.n_tokens, metavar="N", help=f"context length (default {d.n_tokens})")
    g.add_argument("--s2", type=float, default=d.s2, help=f"label noise variance (default {d.s2})")
    g = p.add_argument_group("model (THEORY.md section 7)")
    g.add_argument("--model", choices=MODELS, required=model_required, default=None if model_required else m.model)
    g.add_argument("--budget", type=int, default=m.budget, metavar="B", help=f"workspace slots (default {m.budget})")
    g.add_argument("--width", type=int, default=m.width, help=f"MLP width (default {m.width})")
    g.add_argument("--hidden-layers", type=int, default=m.hidden_layers,
                   help=f"MLP hidden layers (default {m.hidden_layers})")
    g.add_argument("--readout", choices=READOUTS, default=m.readout)
    g = p.add_argument_group("training")
    g.add_argument("--steps", type=int, default=t.steps, help=f"default {t.steps}")
    g.add_argument("--batch", type=int, default=t.batch, help=f"default {t.batch}")
    g.add_argument("--lr", type=float, default=t.lr, help=f"peak Adam learning rate (default {t.lr:g})")
    g.add_argument("--warmup", type=int, default=t.warmup, help=f"linear warm-up steps (default {t.warmup})")
    g.add_argument("--schedule", choices=SCHEDULES, default=t.schedule)
    g.add_argument("--loss", choices=TRAIN_LOSSES, default=t.loss, help="training loss (default query)")
    g.add_argument("--eval-every", type=int, default=t.eval_every, help=f"default {t.eval_every}")
    g.add_argument("--eval-batches", type=int, default=t.eval_batches, help=f"default {t.eval_batches}")
    g.add_argument("--seed", type=int, default=t.seed, help=f"default {t.seed}")
    g.add_argument("--device", default=t.device, help="torch device (default cpu)")
    g.add_argument("--threads", type=int, default=t.threads, help=f"torch CPU threads (default {t.threads})")
    g.add_argument("--checkpoint-every", type=int, default=t.checkpoint_every, help=f"default {t.checkpoint_every}")
    g.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                   help=f"run folders go to DIR/<key>/ (default {DEFAULT_OUT})")


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The ``RunConfig`` of parsed ``add_run_arguments`` options (validated: ValueError on bad values)."""
    data = DataConfig(prior=args.prior, depth=args.depth, alpha=args.alpha, n_tokens=args.tokens, s2=args.s2,
                      cov=args.cov)
    model = ModelConfig(model=args.model, budget=args.budget, width=args.width, hidden_layers=args.hidden_layers,
                        readout=args.readout)
    train = TrainConfig(steps=args.steps, batch=args.batch, lr=args.lr, warmup=args.warmup, schedule=args.schedule,
                        loss=args.loss, eval_every=args.eval_every, eval_batches=args.eval_batches, seed=args.seed,
                        device=args.device, threads=args.threads, out=args.out, checkpoint_every=args.checkpoint_every)
    return RunConfig(data, model, train)


def _register_train(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="train Model A, B or C on in-context regression",
        description="Train Model A (deep, L = B, d = 1), B (one wide layer) or C (linear keys, bilinear readout) "
        "on contexts of THEORY.md section 1. Writes DIR/<key>/config.json, checkpoint.pt, result.json; "
        "re-running resumes an interrupted run and returns a finished one.",
    )
    add_run_arguments(p)
    p.add_argument("--no-resume", action="store_true", help="start from scratch even if a checkpoint exists")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=train_command)


def train_command(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    from .train import train  # torch is imported here, not at `fv --help`

    result = train(cfg, progress=not args.quiet, resume=not args.no_resume)
    unit = "E||theta_hat - theta||^2" if result.metric == "theta" else "query MSE (= E||theta_hat - theta||^2)"
    if result.run_dir:
        print(f"run folder: {result.run_dir}  (config.json, checkpoint.pt, result.json)")
    else:
        print("no run folder (--out is empty): nothing was written")
    print(f"key: {cfg.key()}")
    print(f"final held-out loss: {result.loss:.5g} +- {result.stderr:.2g}  ({unit}, {result.n_eval} contexts)")
    print(f"steps: {result.steps}, {result.steps_per_s:.3g} steps/s, {result.wall_seconds:.1f} s")
    return 0


def _register_compare(subparsers) -> None:
    p = subparsers.add_parser(
        "compare",
        help="train (or load) a model and put its loss beside the theory",
        description="Train or load one run (the options of fv train) and write a table of its held-out loss "
        "beside the theory at the same prior, budget and effective noise, with the learned routing; or, with "
        "--grid, the whole experiment grid (tree and matched Gaussian priors, depth 4 budget 3 and depth 6 "
        "budget 4, Models A, B, C, two seeds for the depth-6 tree cells) and the predictions checked on it.",
    )
    add_run_arguments(p, model_required=False)
    p.add_argument("--grid", action="store_true", help="run the experiment grid instead of one run")
    p.add_argument("--samples", type=int, default=20_000, help="Monte Carlo samples per theory number (default 20000)")
    _add_engine_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=compare_command)


def compare_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .store import RunStore, write_atomic, write_json

    if args.grid:
        from .compare import prediction_checks, to_markdown
        from .reproduce import ReproduceConfig, training

        cfg = ReproduceConfig(out=str(Path(args.out) / "compare-grid"), steps=args.steps, samples=args.samples,
                              seed=args.seed, workers=args.workers, scheduler=args.scheduler, full=True,
                              progress=not args.quiet, alpha=args.alpha, n_tokens=args.tokens, s2=args.s2)
        store = RunStore(cfg.out, "compare-grid")
        tables = training(cfg, store, print)
        checks = prediction_checks(tables)
        write_json(store.folder / "table.json", {"runs": tables, "predictions": checks})
        md = ["# Experiment grid: trained models beside the theory", ""]
        md += ["| prediction | measured | holds |", "|---|---|---|"]
        md += [f"| {c['prediction']} | {c['measured']} | {'yes' if c['holds'] else 'no'} |" for c in checks]
        md += [""] + [to_markdown(t) for t in tables]
        write_atomic(store.folder / "table.md", "\n".join(md) + "\n")
        for c in checks:
            print(f"{'holds ' if c['holds'] else 'FAILS '} {c['prediction']}: {c['measured']}")
        print(f"tables: {store.folder / 'table.md'} and table.json")
        return 0
    cfg = config_from_args(args)
    from .compare import compare, to_markdown
    from .train import run_dir, train

    result = train(cfg, progress=not args.quiet)
    table = compare(result, samples=args.samples, seed=args.seed)
    folder = run_dir(cfg) or Path(".")
    write_json(folder / "compare.json", table)
    write_atomic(folder / "compare.md", to_markdown(table))
    print(to_markdown(table))
    print(f"tables: {folder / 'compare.md'} and {folder / 'compare.json'}")
    return 0


def _add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """``--scheduler`` and ``--workers`` (alias ``--jobs``): where training runs go (see ``bridges.sweep``)."""
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="train on the running Dask cluster at ADDRESS (tcp://host:8786 or a scheduler file); "
                   "the output folder must be on a file system every worker sees")
    p.add_argument("--workers", "--jobs", dest="workers", type=int, default=None, metavar="N",
                   help="training processes of the local Dask cluster (default: the number of cores; 1: in this "
                   "process)")


def _register_reproduce(subparsers) -> None:
    from .reproduce import ReproduceConfig

    d = ReproduceConfig()
    p = subparsers.add_parser(
        "reproduce",
        help="the whole study in one command: theory curves, training grid, patching, probes, report",
        description="Theory curves (every strategy, both priors, noiseless and at the noise of N tokens), a "
        "training grid of Models A, B, C beside the theory, key-patching tables and function-vector probes, "
        "written to one folder with report.md, figures (PNG), JSON and CSV. Finished cells are kept: "
        "re-running resumes an interrupted run.",
    )
    p.add_argument("--out", default=d.out, metavar="DIR", help=f"report folder (default {d.out})")
    p.add_argument("--full", action="store_true", help="the full grid of the training issue (depths 4 and 6)")
    p.add_argument("--depth", type=int, default=d.depth, help=f"tree depth of the reduced grid and curves (default {d.depth})")
    p.add_argument("--alpha", type=float, default=d.alpha, help=f"default {d.alpha}")
    p.add_argument("--tokens", type=int, default=d.n_tokens, metavar="N", help=f"context length (default {d.n_tokens})")
    p.add_argument("--budget", type=int, default=d.train_budget, help=f"training budget (default {d.train_budget})")
    p.add_argument("--steps", type=int, default=d.steps, help=f"training steps per run (default {d.steps})")
    p.add_argument("--samples", type=int, default=d.samples, help=f"Monte Carlo samples per number (default {d.samples})")
    p.add_argument("--seed", type=int, default=d.seed, help=f"default {d.seed}")
    _add_engine_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=reproduce_command)


def reproduce_command(args: argparse.Namespace) -> int:
    from .reproduce import ReproduceConfig, reproduce

    cfg = ReproduceConfig(out=args.out, depth=args.depth, alpha=args.alpha, n_tokens=args.tokens,
                          train_budget=args.budget, steps=args.steps, samples=args.samples, seed=args.seed,
                          workers=args.workers, scheduler=args.scheduler, full=args.full, progress=not args.quiet)
    reproduce(cfg, log=(lambda *a: None) if args.quiet else print)
    return 0
