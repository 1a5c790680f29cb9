"""``fv`` subcommands of one run: ``fv train``, ``compare``, ``audit``, ``intervene`` (the studies' own, ``reproduce``,
``scaling`` and ``sweep``, are in :mod:`bridges.study_commands`).

The options of one run are generated from ``bridges.runs.config.RUN_OPTIONS`` (``add_run_arguments``, through
``add_options``, the argparse reader of every ``bridges.runs.options.Option``) and read back by
``RunConfig.from_options`` (``config_from_args``); those of the studies from their config
dataclasses' defaults. Handlers import torch lazily (``fv --help`` must stay light). This is the top layer:
no module of the packages imports it.
"""
from __future__ import annotations

import argparse

from fvsym._emit import add_format_argument, emit
from fvsym.cli import int_arg
from fvsym._validate import parse_int_list
from fvnum.defaults import KEYED
from fvsym.guards.limits import DEFAULT_LONG_SECONDS, check_memory, fits_memory, format_bytes, largest_fitting

from bridges.runs.config import DEFAULT_SAMPLES, MAX_THREADS, RENAMED_OPTIONS, RUN_OPTIONS, RunConfig
from bridges.models.registry import BUILT_IN, MODELS
from bridges.errors import require
from bridges.runs.devices import check_device
from bridges.runs.options import Option
from fvsym.errors import InputError

WORKER_BYTES = 600e6  # one training process: torch, a model, a batch (measured: about 400 to 500 MB)
_UNIT = dict(low=0, high=1, open_low=True, open_high=True)


def add_run_commands(subparsers) -> None:
    """Add the commands of one run (``fv train``, ``compare``, ``audit``, ``intervene``) to the ``fv`` dispatcher."""
    _register_train(subparsers)
    _register_compare(subparsers)
    _register_audit(subparsers)
    _register_intervene(subparsers)


class _Renamed(argparse.Action):
    """An old option spelling: refuse it with one line naming the new one."""

    def __init__(self, option_strings, dest, *, new: str, why: str = "", **kw):
        super().__init__(option_strings, dest, nargs="?", **kw)
        self.new, self.why = new, why

    def __call__(self, parser, namespace, values, option_string=None):
        why = f" ({self.why})" if self.why else ""
        parser.error(f"{option_string} is now {self.new}{why}")


def _arg_type(option: Option):
    """``option.parse`` as an argparse ``type=`` (its one-line message kept)."""
    def parse(text):
        try:
            return option.parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = option.kind
    return parse


_GROUPS = {"data": "data (docs/theory.md section 1)", "model": "model (docs/theory.md section 7)", "train": "training"}


def add_options(p: argparse.ArgumentParser, options, groups: dict | None = None, required: tuple = ()) -> None:
    """An argparse option per :class:`bridges.runs.options.Option` (its flag and aliases, ``dest``, default, help,
    metavar; choices shown as argparse choices, every other kind read by ``Option.parse``), in the argument
    group ``groups[option.section]`` where ``groups`` names one (``{section: title}``); the options whose
    ``dest`` is in ``required`` must be given (no default)."""
    made = {}
    for o in options:
        where = p
        if groups and o.section in groups:
            if o.section not in made:
                made[o.section] = p.add_argument_group(groups[o.section])
            where = made[o.section]
        kw = dict(choices=o.choices) if o.kind == "choice" else dict(type=_arg_type(o))
        kw["required"], kw["default"] = (True, None) if o.dest in required else (False, o.default)
        where.add_argument(o.flag, *o.aliases, dest=o.dest, metavar=o.metavar, help=o.help or None, **kw)


def add_run_arguments(p: argparse.ArgumentParser, *, model_required: bool = True) -> None:
    """The options that define one run (data, model, training), generated from ``bridges.runs.config.RUN_OPTIONS``."""
    add_options(p, RUN_OPTIONS, _GROUPS, required=("model",) if model_required else ())
    for old, (new, why) in RENAMED_OPTIONS.items():
        p.add_argument(old, action=_Renamed, new=new, why=why, help=argparse.SUPPRESS)


def given(args: argparse.Namespace, dest: str) -> bool:
    """Whether the option of ``dest`` was given on the command line (``fv``'s parser records it; a namespace
    from elsewhere gives none)."""
    return dest in getattr(args, "_given", ())


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """The ``RunConfig`` of parsed ``add_run_arguments`` options (validated: ValueError on bad values). Every
    field is an option, whether or not the model uses it (``--mlp-width`` of Model C): it is part of the run's
    key, and ``RunConfig.to_argv`` spells every field, so its command line must be taken back."""
    return RunConfig.from_options(vars(args))


def _register_train(subparsers) -> None:
    p = subparsers.add_parser(
        "train",
        help="train Model A, B or C on in-context regression",
        description="Train Model A (deep, L = B, d = 1), B (one wide layer) or C (linear keys, bilinear readout) "
        "on contexts of docs/theory.md section 1. Writes DIR/<key>/config.json, checkpoint.pt, result.json; "
        "re-running resumes an interrupted run and returns a finished one.",
    )
    add_run_arguments(p)
    p.add_argument("--no-resume", action="store_true", help="start from scratch even if a checkpoint exists")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_format_argument(p)
    p.set_defaults(func=train_command, default_max_seconds=DEFAULT_LONG_SECONDS)


def train_command(args: argparse.Namespace) -> int:
    cfg = config_from_args(args).check_resources()
    check_device(cfg.train.device)  # before anything on disk: a device this machine lacks is no damaged file
    from bridges.prices.cost import check_train_time

    check_train_time(cfg)
    from bridges.training.train import train  # torch is imported here, not at `fv --help`

    result = train(cfg, progress=not args.quiet and args.format == "text", resume=not args.no_resume)
    unit = "E||theta_hat - theta||^2" if result.metric == "theta" else "query MSE (= E||theta_hat - theta||^2)"
    lines = [f"run folder: {result.run_dir}  (config.json, checkpoint.pt, result.json)" if result.run_dir
             else "no run folder (--out is empty): nothing was written",
             f"key: {cfg.key()}",
             f"final held-out loss: {result.loss:.5g} +- {result.stderr:.2g}  ({unit}, {result.n_eval} contexts)",
             f"steps: {result.steps}, {result.steps_per_s:.3g} steps/s, {result.wall_seconds:.1f} s"]
    record = {"key": cfg.key(), "run_dir": result.run_dir, "loss": result.loss, "stderr": result.stderr,
              "n": result.n_eval, "metric": result.metric, "steps": result.steps,
              "steps_per_s": result.steps_per_s, "wall_seconds": result.wall_seconds, "config": cfg.to_dict()}
    emit(record, args.format, lines)
    return 0


def _register_audit(subparsers) -> None:
    p = subparsers.add_parser(
        "audit",
        help="the loss a trained model's own readings allow: Bayes decoding on the law of its readings",
        description="For a finished fv train run (RUN_DIR = DIR/<key>/): draw contexts from its data, run the model, "
        "evaluate its keys at each context's own workspace on a fixed sample of tokens, take the CLT law of its "
        "readings given each latent (fvnum.keys.families) and decode them with the Bayes posterior mean. Reports the model's "
        "own loss, bayes_on_readings (the loss its measurements allow), decoder_gap (model - Bayes, paired) and the "
        "energy of each layer's Stein rows E grad f by tree depth (bridges.analysis.audit, docs/audit.md). Model T: "
        "the law of its readings (its heads' outputs at the summary token) is measured at each latent instead.",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a finished fv train run folder (DIR/<key>/)")
    p.add_argument("--samples", type=int_arg("--samples", 2, 10**7), default=1000, help="contexts (default 1000)")
    p.add_argument("--token-sample", type=int_arg("--token-sample", 2, 10**7), default=8192,
                   help="size of the fixed token sample the keys are evaluated on (default 8192)")
    p.add_argument("--latents", type=int_arg("--latents", 2, 10**6), default=None,
                   help="runs of a Gaussian prior: prior draws standing for it in the Bayes decoder (default 512; "
                   "refused for a tree run, whose decoder uses its 2^K leaves, exactly)")
    p.add_argument("--law-samples", type=int_arg("--law-samples", 8, 10**6), default=256,
                   help="Model T: contexts a latent its readings' law is measured on (default 256; "
                   "bridges.analysis.audit.audit_measured)")
    p.add_argument("--seed", type=int_arg("--seed", 0, 2**63 - 1), default=0, help="default 0")
    add_format_argument(p)
    p.set_defaults(func=audit_command)


def audit_command(args: argparse.Namespace) -> int:
    from bridges.analysis.audit import audit, load_run

    from bridges.runs.data_config import built_from_options

    run = load_run(args.run_dir)
    data = run.config.data
    if args.latents is not None and (data.has_leaves or built_from_options(data.prior)):  # exact: no draws
        what = "its 2^K leaves" if data.has_leaves else "its atoms"
        raise InputError(f"--latents applies to runs of a Gaussian prior (its decoder's prior draws); this run's "
                         f"prior is {data.prior}, whose decoder uses {what} exactly: got --latents {args.latents}")
    result = audit(run, samples=args.samples, token_sample=args.token_sample,
                   n_latents=512 if args.latents is None else args.latents, seed=args.seed,
                   law_samples=args.law_samples)
    emit(result.to_dict(), args.format, result.lines())
    return 0


def _register_intervene(subparsers) -> None:
    p = subparsers.add_parser(
        "intervene",
        help="function-vector interventions on a trained run: workspace transplant and mean-state injection",
        description="For a finished fv train run of the tree prior (RUN_DIR = DIR/<key>/): the transplant table "
        "(the target's workspace Phi_l replaced by a donor's of divergence depth j; loss and paired effect by (l, j)) "
        "and the injection table (Phi_l replaced by the mean workspace of the donor's prefix; prefix accuracy and "
        "loss by (l, j)), docs/theory.md section 9; with --theory, the same tables of the theory's path strategy at the "
        "run's prior, budget and tokens beside them (bridges.patching.state, fvnum.patching.state).",
    )
    p.add_argument("run_dir", metavar="RUN_DIR", help="a finished fv train run folder (DIR/<key>/)")
    p.add_argument("--table", choices=TABLES, default="both",
                   help="which tables: both (transplant and injection, the default), transplant, injection, keys (key "
                   "patching, docs/theory.md section 8), attention (Model T: every token's attention outputs of blocks "
                   "1..l transplanted), steering (scale * (Phi_bar(donor prefix) - Phi_bar(own prefix)) added to "
                   "workspace.{l}, a sweep over --scales), or all (every table the model has)")
    p.add_argument("--control", action="store_true",
                   help="add divergence depth 0, the no-op control (donor = target): every effect in it is exactly 0")
    p.add_argument("--baselines", action="store_true",
                   help="the donor tables (transplant, keys, attention) get both baselines: the no-op control (j = 0) "
                   "and a random donor (a leaf drawn independently of the target's, same tokens, noise and query)")
    p.add_argument("--slot", type=int_arg("--slot", 1, 10**6), default=None,
                   help="--table transplant: replace slot k (from 1) of workspace.{l} only, the other slots kept")
    p.add_argument("--scales", type=_scale_list, default=None,
                   help="--table steering: the scales of the added Phi_bar(donor prefix) - Phi_bar(own prefix), "
                   "comma-separated (default 0.5,1,2,4)")
    p.add_argument("--contexts", type=int_arg("--contexts", 2, 10**7), default=2048,
                   help="target contexts, shared by every cell (default 2048)")
    p.add_argument("--mean-contexts", type=int_arg("--mean-contexts", 2, 10**7), default=4096,
                   help="contexts behind the mean workspaces of the injection (default 4096)")
    p.add_argument("--depths", type=_int_list("--depths"), default=None,
                   help="divergence depths j, comma-separated (default 1..K; --table steering: one, default 1)")
    p.add_argument("--layers", type=_int_list("--layers"), default=None,
                   help="intervention layers l, comma-separated (default 1..L)")
    p.add_argument("--theory", action="store_true",
                   help="also the path strategy's tables at the run's prior, budget and N (tokens channel)")
    p.add_argument("--samples", type=int_arg("--samples", 2, 10**8), default=20_000,
                   help="theory samples per divergence depth with --theory (default 20000)")
    p.add_argument("--seed", type=int_arg("--seed", 0, 2**63 - 1), default=0, help="default 0")
    add_format_argument(p)
    p.set_defaults(func=intervene_command)


TABLES = ("both", "transplant", "injection", "keys", "attention", "steering", "all")  # fv intervene --table


def _scale_list(text):
    from fvsym._validate import parse_fraction, parse_number_list

    try:
        items = [float(parse_fraction(item, "--scales")) for item in parse_number_list(text, "--scales")]
    except ValueError as exc:  # its message names the flag
        raise argparse.ArgumentTypeError(str(exc)) from None
    if len(set(items)) < len(items):
        raise argparse.ArgumentTypeError(f"--scales must be distinct, got {str(text)[:60]}")
    return tuple(items)


def _int_list(flag: str):
    def parse(text):
        try:
            return parse_int_list(text, flag, minimum=1, distinct=True)
        except ValueError as exc:  # its message names the flag
            raise argparse.ArgumentTypeError(str(exc)) from None

    parse.__name__ = "integer list"
    return parse


def intervene_command(args: argparse.Namespace) -> int:
    from bridges.analysis.audit import load_run
    from bridges.patching.keys import check_tree_data
    from bridges.prices.cost import check_seconds, intervention_seconds

    want = {kind: args.table in (kind, "all") or args.table == "both" and kind in ("transplant", "injection")
            for kind in ("transplant", "injection", "keys", "attention", "steering")}
    for flag, dest, applies, what in (
            ("--scales", "scales", want["steering"], "sets the steering's scales (--table steering)"),
            ("--slot", "slot", want["transplant"], "transplants one slot of workspace.{l} (--table transplant)"),
            ("--baselines", "baselines", want["transplant"] or want["keys"] or want["attention"],
             "adds the no-op and random-donor baselines to the donor tables (transplant, keys, attention)")):
        if given(args, dest) and not applies:
            raise InputError(f"{flag} {what} and does not apply to --table {args.table}; leave it out")
    if args.table == "steering" and args.depths and len(args.depths) > 1:
        raise InputError(f"--depths {','.join(map(str, args.depths))}: --table steering takes one divergence depth "
                         "of its donors (default 1)")
    if given(args, "samples") and not args.theory:
        raise InputError(f"--samples {args.samples} sets the theory's samples and applies with --theory only; give "
                         "--theory or leave --samples out")
    if given(args, "mean_contexts") and not (want["injection"] or want["steering"]):
        raise InputError(f"--mean-contexts {args.mean_contexts} sets the injection's mean workspaces and does not "
                         f"apply to --table {args.table}; leave it out")
    run = load_run(args.run_dir)
    cfg = run.config
    check_tree_data(cfg.data, "fv intervene", "prefixes of leaves")
    if want["attention"] and not hasattr(run.model, "blocks"):
        if args.table == "attention":
            raise InputError(f"--table attention transplants the attention outputs of Model T's blocks; model "
                             f"{cfg.model.model} has none (its state is the workspace: --table transplant)")
        want["attention"] = False  # --table all: the tables this model has
    K, L = cfg.data.depth, cfg.model.n_layers
    depths = len(args.depths) if args.depths else K
    layers = len(args.layers) if args.layers else L
    depths += max(args.control, 2 * args.baselines)
    seconds = intervention_seconds(cfg, n_contexts=args.contexts, depths=depths, layers=layers,
                                   mean_contexts=args.mean_contexts, transplant=want["transplant"],
                                   injection=want["injection"], patching=want["keys"] + want["attention"],
                                   steering=len(args.scales or (0.5, 1, 2, 4)) if want["steering"] else 0)
    sizes = [f"{args.contexts} contexts"] + ([f"{args.mean_contexts} mean contexts"]
                                             if want["injection"] or want["steering"] else [])
    if args.theory:
        from bridges.prices.cost import _mc

        seconds += 2 * depths * (layers + 1) * _mc(cfg.data, cfg.model.budget, "path", args.samples)
        sizes.append(f"{args.samples} theory samples")
    check_seconds(f"fv intervene of {cfg.key()} with {', '.join(sizes)} ({depths} depths x {layers} layers)", seconds)
    data = cfg.data
    out = {"run": str(args.run_dir), "key": cfg.key(), "model": cfg.model.model, "budget": cfg.model.budget,
           "seed": args.seed, "contexts": args.contexts,
           "mean_contexts": args.mean_contexts if want["injection"] or want["steering"] else None,
           "theory_samples": args.samples if args.theory else None}
    lines = [f"fv intervene: {cfg.key()} (model {cfg.model.model}, budget {cfg.model.budget}, depth {K})"]
    theory = None
    if args.theory:
        from fvnum.mc.channels import tokens
        from fvnum.options import PatchSpec

        from bridges.training.data import fv_prior

        theory = dict(prior=fv_prior(data), strategy="path", budget=cfg.model.budget,
                      channel=tokens(data.n_tokens, data.s2), samples=args.samples, seed=args.seed,
                      patch=PatchSpec(layers=args.layers, depths=args.depths))
    from fvnum.patching import state as theory_tables
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as priced (bridges.prices.cost.forward_seconds): more threads on a busy machine wait
    try:
        _intervene_tables(args, run, cfg, want, theory, theory_tables, out, lines)
    finally:
        torch.set_num_threads(threads)
    emit(out, args.format, lines)
    return 0


def _intervene_tables(args, run, cfg, want, theory, theory_tables, out, lines) -> None:
    """The tables of ``fv intervene`` (the model's, and the theory's beside them), into ``out`` and ``lines``."""
    from bridges.patching.keys import key_patching_table
    from bridges.patching.state import model_injection_table, model_state_patching_table
    from bridges.patching.steering import SCALES, steering_table
    from fvnum.patching.keys import patching_table as theory_keys

    model, data = run.model, cfg.data
    depths = args.depths
    if args.control:  # the no-op control first: donor = target
        depths = (0, *(depths or range(1, data.depth + 1)))

    def keys_table(model, data, *, layers=None, **kw):
        table = key_patching_table(model, data, **kw)
        if layers:  # key patching runs every layer; the table keeps the ones asked for
            from bridges.patching.keys import table_from_dict
            from fvnum.patching.keys import RANDOM_FIELDS

            d = table.to_dict()
            rows = [table.layers.index(l) for l in layers]
            for name in ("loss", "stderr", "effect", "effect_stderr", *RANDOM_FIELDS):
                if d.get(name) is not None:
                    d[name] = [d[name][r] for r in rows]
            d["layers"] = list(layers)
            table = table_from_dict(d)
        return table

    def theory_key_table(prior, strategy, budget, channel, samples, seed, patch):
        from fvnum.options import PatchSpec

        return theory_keys(prior, strategy, budget, channel, samples=samples, seed=seed,
                           patch=PatchSpec(depths=patch.depths))  # key patching runs every layer

    donor = {"depths": depths, "baselines": args.baselines}
    for kind, of_model, of_theory, model_kw in (
            ("transplant", model_state_patching_table, theory_tables.state_patching_table, {**donor, "slot": args.slot}),
            ("attention", model_state_patching_table, None, {**donor, "site": "attention"}),
            ("keys", keys_table, theory_key_table, donor),
            ("injection", model_injection_table, theory_tables.injection_table,
             {"mean_contexts": args.mean_contexts, "depths": args.depths}),
            ("steering", steering_table, None, {"mean_contexts": args.mean_contexts, "scales": args.scales or SCALES,
                                                "depth": args.depths[0] if args.depths and len(args.depths) == 1 else 1})):
        if not want[kind]:
            continue
        table = of_model(model, data, n_contexts=args.contexts, seed=args.seed, layers=args.layers, **model_kw)
        out[kind] = {"model": table.to_dict()}
        if theory and of_theory is None and kind == "steering":
            lines += ["", "steering: the theory has no steering table (docs/theory.md section 9 defines replacement)"]
        title = {"attention": "attention transplant", "keys": "key patching"}.get(kind, kind)
        lines += ["", f"{title} (model {cfg.model.model}):", table.to_markdown()]
        if theory and of_theory is not None:
            th = of_theory(**theory)
            out[kind]["path"] = th.to_dict()
            lines += ["", f"{kind}, theory (path):", th.to_markdown()]


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
    p.set_defaults(model=None)  # one run: A; --grid: A, B and C
    p.add_argument("--grid", action="store_true", help="run the experiment grid instead of one run (--model: "
                   "only that model's cells)")
    p.add_argument("--samples", type=int_arg("--samples", 2, 10**10), default=DEFAULT_SAMPLES,
                   help=f"Monte Carlo samples per theory number (default {DEFAULT_SAMPLES})")
    _add_keyed_argument(p, KEYED, f"{KEYED}, softmax for a softmax model on the tree prior")
    p.add_argument("--real-samples", type=int_arg("--real-samples", 2, 10**7), default=None, metavar="N",
                   help="also A's and B's keyed rows on N contexts of real tokens (best_adaptive_keyed_real, "
                   "best_nonadaptive_keyed_real: the same policy and design reading drawn tokens; tree prior, "
                   "--keyed weighted or linear; default: none)")
    _add_engine_arguments(p)
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_format_argument(p)
    p.set_defaults(func=compare_command, default_max_seconds=DEFAULT_LONG_SECONDS)


def compare_command(args: argparse.Namespace) -> int:
    from pathlib import Path

    from bridges.runs.store import RunStore, write_atomic, write_json

    if args.grid:
        check_workers(args.workers, args.scheduler)
        _grid_options(args)
        from bridges.analysis.compare import grid_checks, grid_markdown, seed_summary
        from bridges.studies.reproduce import ReproduceConfig, training

        cfg = ReproduceConfig(out=str(Path(args.out) / "compare-grid"), steps=args.steps, samples=args.samples,
                              seed=args.seed, workers=args.workers, scheduler=args.scheduler, full=True,
                              progress=not args.quiet, alpha=args.alpha, n_tokens=args.tokens, s2=args.s2,
                              device=args.device, models=args.model or _grid_models(), keyed=args.keyed,
                              real_samples=args.real_samples)
        from bridges.prices.cost import compare_grid_seconds

        _check_study("fv compare --grid", compare_grid_seconds, cfg, depth=False)
        if args.scheduler is None:  # the runs train here
            check_device(cfg.device)
        require("fv compare --grid")  # without torch, refused before its folder and lock exist
        store = RunStore(cfg.out, "compare-grid")
        tables = training(cfg, store, print)
        checks = grid_checks(tables)
        write_json(store.folder / "table.json", {"runs": tables, "predictions": checks})
        write_atomic(store.folder / "table.md", grid_markdown(tables, checks))
        lines = [f"{'holds ' if c['holds'] else 'FAILS '} {c['prediction']}: {c['measured']}" for c in checks]
        lines.append(f"tables: {store.folder / 'table.md'} and table.json")
        emit({"runs": tables, "predictions": checks, "summary": seed_summary(tables), "folder": str(store.folder)},
             args.format, lines)
        return 0
    if args.scheduler is not None or args.workers is not None:
        raise InputError("--scheduler and --workers apply to fv compare --grid only")
    cfg = config_from_args(args).check_resources()
    check_device(cfg.train.device)
    from bridges.prices.cost import check_seconds, theory_table_seconds, train_seconds

    if not given(args, "keyed"):  # held to the rows of its own attention: softmax rows for a softmax model
        from bridges.analysis.compare import keyed_for

        args.keyed = keyed_for(cfg) or "none"
    theory_s = _own_table_seconds(cfg, args)
    if cfg.model.spec.values:  # Model G: two gd_steps rows and the limit (bridges.analysis.gd), seconds
        theory_s = 5.0 + 2e-8 * cfg.model.n_layers * args.samples * cfg.data.n_tokens * cfg.data.dim
    if theory_s is None:
        theory_s = theory_table_seconds(cfg.data, cfg.model.budget, args.samples, 2000, args.keyed, args.real_samples)
    check_seconds(f"fv compare of {cfg.key()} with {args.samples} samples", train_seconds(cfg) + theory_s)
    from bridges.analysis.compare import beside_of, compare, to_markdown
    from bridges.training.train import run_dir, train

    result = train(cfg, progress=not args.quiet and args.format == "text")
    table = compare(result, samples=args.samples, seed=args.seed, keyed=args.keyed,
                    real_samples=args.real_samples).to_dict()
    table["beside_prediction"] = beside_of(table)  # ratio, or the difference where the prediction is 0 within its SE
    folder = run_dir(cfg) or Path(".")
    write_json(folder / "compare.json", table)
    write_atomic(folder / "compare.md", to_markdown(table))
    emit(table, args.format, [to_markdown(table), f"tables: {folder / 'compare.md'} and {folder / 'compare.json'}"])
    return 0


def _grid_models() -> str:
    """The models of ``fv compare --grid`` by default: the grid's, A, B and C (Model T has its own study; Model G's
    budget is ``L D``, not the grid's)."""
    return "".join(BUILT_IN)


def _own_table_seconds(cfg, args) -> float | None:
    """The price of the theory rows of a prior that computes its own (the atoms prior:
    ``fvnum.finite_theory.finite_comparison_table``), or None for the others; an explicit ``--keyed`` family is
    refused there in one line (keyed rows are built on the tree and Gaussian priors only)."""
    from bridges.analysis.compare import has_own_table

    if not has_own_table(cfg.data):
        return None
    if args.real_samples is not None:
        raise InputError(f"--real-samples {args.real_samples}: real-token rows are built on the tree prior, not on the "
                         f"{cfg.data.prior} prior; leave it out")
    if given(args, "keyed") and args.keyed != "none":
        raise InputError(f"--keyed {args.keyed}: keyed rows are not built on the {cfg.data.prior} prior (A and B are "
                         "held to its dMMSE rows); leave --keyed out or give --keyed none")
    from fvnum.priors.analyses import analysis

    from bridges.training.data import data_channel, fv_prior

    seconds = analysis(fv_prior(cfg.data), "comparison_seconds")  # the price of its own rows, by its class
    return seconds(cfg.model.budget, data_channel(cfg.data), samples=args.samples)


def _grid_options(args) -> None:
    """``fv compare --grid`` trains its own grid (tree and Gaussian priors, depths 4 and 6, the recipe):
    ``--model`` (one model or several, e.g. AC) picks its models; the other options of one run would be
    ignored, so they are refused in one line naming them."""
    taken = ("model", "alpha", "tokens", "s2", "steps", "seed", "device", "out")  # what the grid reads
    ignored = [o.flag for o in RUN_OPTIONS
               if o.dest not in taken and (given(args, o.dest) or getattr(args, o.dest) != o.default)]
    if ignored:
        raise InputError(f"fv compare --grid runs its own grid (tree and Gaussian priors, depths 4 and 6, the "
                         f"recipe) and does not take {', '.join(ignored)}; leave "
                         f"{'it' if len(ignored) == 1 else 'them'} out, or run fv compare without --grid (or fv "
                         "sweep) for other runs")


def _check_study(what: str, price, cfg, steps: str = "steps", depth: bool = True) -> float:
    """Refuse a study whose estimate is over the cap, naming the largest depth (when the theory alone is
    too long) or number of ``steps`` (the config field) that fits."""
    import dataclasses

    from fvsym.guards.limits import check_time, fits_time

    seconds = price(cfg)
    if fits_time(seconds):
        return seconds
    hint = ""
    if depth and not fits_time(price(dataclasses.replace(cfg, **{steps: 1}))):
        best = None
        for k in range(1, cfg.depth):
            try:
                small = dataclasses.replace(cfg, depth=k, **{steps: 1})
            except ValueError:
                continue
            if not fits_time(price(small)):
                break
            best = k
        hint = f"; the largest --depth that fits is {best} (at 1 step)" if best else "; no --depth fits"
    elif getattr(cfg, steps) is None or isinstance(getattr(cfg, steps), int):
        lo, hi = 0, getattr(cfg, steps) or max(s.recipe.steps_per_budget for s in MODELS.values()) * 6  # None: the recipe's steps
        while lo < hi:  # the largest steps that fit (the price grows with the steps)
            mid = (lo + hi + 1) // 2
            if fits_time(price(dataclasses.replace(cfg, **{steps: mid}))):
                lo = mid
            else:
                hi = mid - 1
        flag = "--" + steps.replace("_", "-")
        hint = f"; the largest {flag} that fits is {lo}" if lo else f"; no {flag} fits"
    check_time(what, seconds, hint)
    return seconds


def check_workers(workers, scheduler=None) -> None:
    """Refuse more local training processes than the memory holds (one line, the largest count that fits),
    and a count of local processes beside a running cluster (``--scheduler``), whose own workers train."""
    if workers is not None and scheduler is not None:
        raise InputError("--workers sizes the local Dask cluster; with --scheduler the running cluster's own workers "
                         "train: give one of them")
    if workers is None or workers <= 1:
        return
    if not fits_memory(workers * WORKER_BYTES):
        hint = largest_fitting("--workers", range(1, workers + 1), lambda n: fits_memory(n * WORKER_BYTES))
        check_memory(f"{workers} training processes (about {format_bytes(WORKER_BYTES)} each)",
                     workers * WORKER_BYTES, hint)


def _add_engine_arguments(p: argparse.ArgumentParser) -> None:
    """``--scheduler`` and ``--workers`` (alias ``--jobs``): where training runs go (see ``bridges.runs.engine``)."""
    p.add_argument("--scheduler", default=None, metavar="ADDRESS",
                   help="train on the running Dask cluster at ADDRESS (tcp://host:8786 or a scheduler file); "
                   "the output folder must be on a file system every worker sees")
    p.add_argument("--workers", "--jobs", dest="workers", type=int_arg("--workers", 1, MAX_THREADS), default=None,
                   metavar="N",
                   help="training processes of the local Dask cluster (default: the number of cores; 1: in this "
                   "process)")


def _add_keyed_argument(p: argparse.ArgumentParser, default: str | None, words: str | None = None) -> None:
    """``--keyed weighted|softmax|linear|none``: the key family of the prediction rows of A and B
    (``fvnum.keys.nonadaptive``: the best found within the family, an upper bound on its optimum, not a bound on a
    trained model; softmax: the tree prior only; linear: the searched rows of the linear family; none: no keyed
    rows, the linear-key rows of the table). The words are Python's (``keyed="linear"``, ``keyed=None`` or
    ``"none"``)."""
    p.add_argument("--keyed", choices=("weighted", "softmax", "linear", "none"), default=default or "none",
                   help=f"key family of the prediction rows of A and B (default {words or default or 'none'}; the best found "
                   "within the family, an upper bound on its optimum, not a bound on a trained model; linear: the "
                   "linear family searched; none: no keyed rows, the table's linear-key rows)")
