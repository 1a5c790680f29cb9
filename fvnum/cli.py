"""``fv mc``: Monte Carlo loss of a strategy under a noisy channel (THEORY.md sections 2, 4);
``fv bounds``: the noisy adaptive optimum bracketed (THEORY.md section 3, under noise).

    fv mc --prior tree --depth 4 --alpha 0.5 --budget 3 --strategy path --tau 0.3 --samples 100000 --seed 0
    fv bounds --prior tree --depth 3 --alpha 1/2 --budget 2 --tau 0.5 --format json

Numba and numpy load inside the handler only, so other ``fv`` commands stay light.
"""
from __future__ import annotations

import os
import sys

from fvsym._emit import add_format_argument, emit
from fvsym._validate import check_node_list, parse_int_list
from fvsym.cli import SCALES_HELP, int_arg, number_arg

from .registry import CLI_STRATEGIES as STRATEGY_CHOICES


MAX_DEPTH = 30
MAX_SAMPLES = 10**10


def max_threads() -> int:
    """More threads than 4 x the cores only costs memory: refused."""
    return max(8, 4 * (os.cpu_count() or 1))


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "mc", help="Monte Carlo loss of a strategy under a noisy channel (Bayes decoder; see the decoder field)",
        description="Monte Carlo loss E||theta_hat - theta||^2 of a strategy decoded by the posterior mean, "
        "under the gaussian channel (--tau) or the tokens channel (--tokens N, label noise --s2). The decoder is "
        "exact for the gaussian channel and for the tokens channel on the tree prior (the law of the tokens: "
        "one statistic read by every layer, so a repeated row adds nothing); for the tokens channel on a Gaussian "
        "prior it is an approximation (the gaussian channel's decoder at tau(N)). The output's decoder field "
        "says which (docs/decoders.md).",
    )
    p.add_argument("--prior", choices=("tree", "gaussian"), default="tree")
    p.add_argument("--depth", type=int_arg("--depth", 1, MAX_DEPTH), default=None,
                   help="tree depth K (D = 2^K - 1; default 4, or the number of --scales)")
    p.add_argument("--alpha", type=number_arg("--alpha", exact=True, low=0, high=1, open_low=True, open_high=True),
                   default=None, help="tree scale ratio in (0, 1), e.g. 0.5 or 1/2 (default 1/2)")
    p.add_argument("--scales", default=None, help=SCALES_HELP)
    p.add_argument("--cov", default=None,
                   help="Gaussian prior: matched (the matched Gaussian of the tree, default), isotropic, or a "
                        "covariance file (.npy, or .csv/.txt rows of numbers)")
    p.add_argument("--eigenvalues", default=None,
                   help="Gaussian prior: the diagonal covariance of these eigenvalues, comma-separated (e.g. 1,1/2)")
    p.add_argument("--dim", type=int_arg("--dim", 1), default=None,
                   help="dimension D of the isotropic Gaussian (--prior gaussian --cov isotropic; default 2^K - 1)")
    p.add_argument("--budget", type=int_arg("--budget", 0), default=3, help="measurements B = L x d")
    p.add_argument("--strategy", choices=STRATEGY_CHOICES, default="path")
    p.add_argument("--design", default=None, help="fixed design: comma-separated heap node numbers, e.g. 1,2,3")
    p.add_argument("--layers", type=int_arg("--layers", 1), default=None,
                   help="layers L (strategies optimal, bellman_noiseless; default L = B)")
    p.add_argument("--width", type=int_arg("--width", 1), default=None,
                   help="channels per layer d (strategies optimal, bellman_noiseless)")
    p.add_argument("--measurement", choices=("unit", "coordinate"), default=None,
                   help="class searched by the old spelling optimal_nonadaptive (default unit); better: "
                   "--strategy optimal_nonadaptive_unit or optimal_nonadaptive_coordinate")
    _add_channel_and_sampling(p, required=False, s2=None, samples=100_000)
    p.add_argument("--progress", action="store_true", help="progress bar on stderr (default: only on a TTY)")
    p.set_defaults(func=_mc)

    b = subparsers.add_parser(
        "bounds", help="bracket the noisy adaptive optimum: [lower, upper] and the exact value where solved",
        description="The noisy adaptive optimum of the tree prior (coordinate class, L = B layers of width 1, "
        "repeats allowed) lies in [lower, upper]: lower = the noiseless Bellman optimum (no noisy channel beats "
        "it), upper = the Monte Carlo loss of the best adaptive policy found; exact = the exact noisy "
        "recursion where the tree is small enough (else null).",
    )
    b.add_argument("--prior", choices=("tree",), default="tree")
    b.add_argument("--depth", type=int_arg("--depth", 1, MAX_DEPTH), default=None,
                   help="tree depth K (default 3, or the number of --scales)")
    b.add_argument("--alpha", type=number_arg("--alpha", exact=True, low=0, high=1, open_low=True, open_high=True),
                   default=None, help="tree scale ratio in (0, 1), e.g. 0.5 or 1/2 (default 1/2)")
    b.add_argument("--scales", default=None, help=SCALES_HELP)
    b.add_argument("--budget", type=int_arg("--budget", 0), default=2, help="layers L = B (width 1)")
    _add_channel_and_sampling(b, required=True, s2="1/100", samples=20_000)
    b.set_defaults(func=_bounds)


def _add_channel_and_sampling(p, *, required: bool, s2, samples: int) -> None:
    """The channel (``--tau`` or ``--tokens`` with ``--s2``), ``--samples``, ``--seed``, ``--threads`` and
    ``--format`` of ``fv mc`` and ``fv bounds``."""
    channel = p.add_mutually_exclusive_group(required=required)
    channel.add_argument("--tau", type=number_arg("--tau", exact=True, low=0, high=1e100), default=None,
                         help="gaussian channel noise tau >= 0")
    channel.add_argument("--tokens", "--n-tokens", dest="tokens", type=int_arg("tokens N", 1, 10**12), default=None,
                         metavar="N", help="tokens channel with N tokens (exact decoder on the tree prior, approximate on "
                                           "a Gaussian prior; Python: n_tokens=N, or tokens=N)")
    p.add_argument("--s2", type=number_arg("--s2", exact=True, low=0, high=1e100), default=s2,
                   help="label noise variance of the tokens channel (default 1/100)")
    p.add_argument("--samples", type=int_arg("--samples", 2, MAX_SAMPLES), default=samples)
    p.add_argument("--seed", type=int_arg("--seed", 0, 2**63 - 1), default=0)
    p.add_argument("--threads", type=int_arg("--threads", 1, max_threads()), default=None,
                   help="worker threads (default: all cores)")
    add_format_argument(p)


def _number(text):
    from fvsym._validate import parse_fraction

    return None if text is None else float(parse_fraction(text, "number"))


def _bounds(args) -> int:
    from fvsym.priors import TreePrior

    from .bounds import bounds

    prior = _tree(args, default_depth=3)
    if args.tokens is None and args.s2 != "1/100":
        raise ValueError("--s2 applies to the tokens channel (--tokens N) only")
    # priced whole before any work (fvnum.bounds.check_bounds_cost)
    res = bounds(prior, args.budget, tau=_number(args.tau), tokens=args.tokens,
                 s2=_number(args.s2), samples=args.samples, seed=args.seed, threads=args.threads)
    record = {**res.to_dict(), "alpha": args.alpha if args.scales is None else None,
              **({"scales": [str(a) for a in prior.scales]} if args.scales is not None else {})}
    line = str(res)
    if res.exact is not None:  # say the channel of the exact value: under tokens it is the gaussian channel's
        record["exact_channel"] = "noiseless" if res.inputs.get("tau") == 0 else "gaussian"
        if args.tokens is not None:
            line = line.replace("; exact: ", "; exact under the gaussian channel at the same tau (no exact value "
                                "for tokens; not bracketed with them): ")
    lines = [line]
    lines += [f"  {name:18s} {est}" for name, est in res.candidates.items()]
    lines += [f"  {name:36s} {est.value:+.4g} +- {est.stderr:.2g}" for name, est in res.differences.items()]
    lines += [f"  {name:18s} {why}" for name, why in res.skipped.items()]
    emit(record, args.format, lines)
    return 0


def check_mc_options(args) -> None:
    """Options that do not apply to the chosen prior, strategy or channel are refused, not ignored."""
    if args.strategy == "fixed" and args.design is None:
        raise ValueError("--strategy fixed needs --design n1,n2,...")
    if args.design is not None and args.strategy != "fixed":
        raise ValueError(f"--design applies to --strategy fixed only, got --strategy {args.strategy}")
    if args.prior == "tree":
        for opt in ("cov", "dim", "eigenvalues"):
            if getattr(args, opt) is not None:
                raise ValueError(f"--{opt} applies to --prior gaussian only, got --prior tree --{opt} {getattr(args, opt)}")
    elif args.dim is not None and args.cov != "isotropic":
        raise ValueError("--dim applies to --cov isotropic (the matched Gaussian has D = 2^depth - 1)")
    elif (args.eigenvalues is not None or args.cov not in (None, "isotropic", "matched")) and (
            args.scales is not None or args.alpha is not None):
        raise ValueError("--alpha and --scales apply to a tree (or --cov matched), not to a given covariance")
    if args.s2 is not None and args.tokens is None:
        raise ValueError("--s2 applies to the tokens channel (--tokens N) only")
    if args.measurement is not None and not args.strategy.startswith("optimal_nonadaptive"):
        raise ValueError(f"--measurement applies to --strategy optimal_nonadaptive only, got --strategy {args.strategy}")
    if (args.layers is not None or args.width is not None) and args.strategy not in ("optimal", "bellman_noiseless"):
        raise ValueError(f"--layers and --width apply to strategies optimal and bellman_noiseless, "
                         f"got --strategy {args.strategy}")


def _tree(args, default_depth: int):
    """The tree of ``--depth`` with ``--alpha`` (default 1/2) or ``--scales``."""
    from fvsym.cli import tree_prior_of

    depth = args.depth if args.depth is not None or args.scales is not None else default_depth
    alpha = args.alpha if args.alpha is not None or args.scales is not None else "1/2"
    return tree_prior_of(depth, alpha, args.scales)


def prior_of(args):
    """The prior of ``fv mc``'s options (``--prior``, ``--depth``, ``--alpha`` or ``--scales``, ``--cov``,
    ``--eigenvalues``, ``--dim``); also what ``fv sweep`` checks an mc cell by."""
    from fvsym.cli import covariance_of
    from fvsym.priors import GaussianPrior

    if args.prior == "tree":
        return _tree(args, default_depth=4)
    if args.eigenvalues is not None or args.cov not in (None, "isotropic", "matched"):
        import sympy as sp

        cov, eigenvalues = covariance_of(args.cov, args.eigenvalues)
        return GaussianPrior(sp.diag(*eigenvalues) if eigenvalues is not None else cov)
    if args.cov == "isotropic":
        dim = args.dim if args.dim is not None else 2 ** (args.depth or 4) - 1
        return GaussianPrior.isotropic(dim)
    return GaussianPrior.matched(_tree(args, default_depth=4))


def _alpha_shown(args):
    """The alpha a result was computed at (None for general scales or a covariance of its own)."""
    if args.scales is not None or args.eigenvalues is not None or args.cov not in (None, "isotropic", "matched"):
        return None
    return args.alpha or "1/2"


def _mc(args) -> int:
    from . import loss_mc
    from .channels import make_channel
    from .limits import check_mc
    from .tree import numeric_prior

    check_mc_options(args)
    from .registry import resolve_strategy

    if args.strategy == "optimal_nonadaptive":  # the old spelling: say the class it means here
        _, klass = resolve_strategy(args.strategy, args.measurement)
        print(f"fv mc: note: --strategy optimal_nonadaptive here is the {klass} class "
              f"(optimal_nonadaptive_{klass}); in fv derive it is the coordinate class: say "
              f"optimal_nonadaptive_unit or optimal_nonadaptive_coordinate", file=sys.stderr)
    if args.prior == "gaussian" and args.eigenvalues is None and args.cov in (None, "isotropic", "matched"):
        from fvsym.gaussian import check_covariance

        args.cov = "matched" if args.cov is None else check_covariance(args.cov)
    design = None
    if args.design is not None:
        design = check_node_list(parse_int_list(args.design, "--design"), "design", prior_of(args).dim)
    tau = _number(args.tau)
    s2 = _number(args.s2) if args.s2 is not None else 0.01
    prior = prior_of(args)
    spec = numeric_prior(prior)
    strategy, klass = resolve_strategy(args.strategy, args.measurement)
    check_mc(spec, budget=args.budget, strategy=strategy, measurement=klass,
             tokens=args.tokens is not None, samples=args.samples, threads=args.threads, design=design)
    channel = make_channel(spec, tau, args.tokens, s2)
    est = loss_mc(
        prior, args.strategy, args.budget, tau=tau, tokens=args.tokens, s2=s2,
        design=design, layers=args.layers, width=args.width, measurement=args.measurement,
        samples=args.samples, seed=args.seed, threads=args.threads, progress=True if args.progress else None,
    )
    inputs = {
        "prior": args.prior, "depth": getattr(prior, "depth", args.depth), "alpha": _alpha_shown(args),
        "budget": args.budget,
        "strategy": args.strategy, "channel": channel.kind,
        # the channel's noise: tau itself, or tau_of_tokens(prior, N, s2) under the tokens channel (the isotropic
        # part of the covariance of the tokens statistic; see the decoder field)
        "tau": channel.tau, "tokens": args.tokens, "s2": s2 if args.tokens is not None else None,
        "samples": args.samples, "seed": args.seed,
    }
    if args.scales is not None:
        inputs["scales"] = [str(a) for a in prior.scales]
    if args.eigenvalues is not None:
        inputs["eigenvalues"] = args.eigenvalues.split(",")
    if args.prior == "gaussian":
        inputs.update(cov=args.cov if args.eigenvalues is None else "eigenvalues", dim=spec.dim)
    if design is not None:
        inputs["design"] = design
    if args.layers is not None or args.width is not None:
        inputs.update(layers=args.layers, width=args.width)
    if args.strategy.startswith("optimal_nonadaptive"):
        strategy, inputs["measurement"] = resolve_strategy(args.strategy, args.measurement)
        inputs["strategy"] = f"{strategy}_{inputs['measurement']}"
    shown = {**inputs, "tau": args.tau if args.tokens is None else f"{channel.tau:.6g} (tokens)"}
    if channel.tau_given is not None:  # noiseless in effect (fvnum.channels): computed at tau = 0
        inputs["tau_given"] = channel.tau_given
        shown["tau"] = f"{args.tau} (noiseless in effect: computed at tau = 0)"
    what = ", ".join(f"{k}={v}" for k, v in shown.items() if v is not None)
    lines = [f"loss = {est.value:.6g} +- {est.stderr:.2g} ({est.how}, n={est.n})", f"  {what}",
             f"  decoder: {est.decoder}"]
    emit({**est.to_dict(), **inputs}, args.format, lines)
    return 0
