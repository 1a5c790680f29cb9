"""``fv mc``: Monte Carlo loss of a strategy under a noisy channel (THEORY.md sections 2, 4);
``fv bounds``: the noisy adaptive optimum bracketed (THEORY.md section 3, under noise).

    fv mc --prior tree --depth 4 --alpha 0.5 --budget 3 --strategy path --tau 0.3 --samples 100000 --seed 0
    fv bounds --prior tree --depth 3 --alpha 1/2 --budget 2 --tau 0.5 --format json

Numba and numpy load inside the handler only, so other ``fv`` commands stay light.
"""
from __future__ import annotations

import json
from fractions import Fraction

from .registry import CLI_STRATEGIES as STRATEGY_CHOICES


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "mc", help="Monte Carlo loss of a strategy under a noisy channel (exact Bayes decoder)",
        description="Monte Carlo loss E||theta_hat - theta||^2 of a strategy with the exact Bayes decoder, "
        "under the gaussian channel (--tau) or the tokens channel (--tokens N, label noise --s2).",
    )
    p.add_argument("--prior", choices=("tree", "gaussian"), default="tree")
    p.add_argument("--depth", type=int, default=4, help="tree depth K (D = 2^K - 1)")
    p.add_argument("--alpha", default="1/2", help="tree scale ratio in (0, 1), e.g. 0.5 or 1/2")
    p.add_argument("--cov", choices=("tree", "isotropic"), default="tree",
                   help="Gaussian prior: the matched Gaussian of the tree (default) or isotropic")
    p.add_argument("--dim", type=int, default=None, help="dimension D of the isotropic Gaussian (default 2^K - 1)")
    p.add_argument("--budget", type=int, default=3, help="measurements B = L x d")
    p.add_argument("--strategy", choices=STRATEGY_CHOICES, default="path")
    p.add_argument("--design", default=None, help="fixed design: comma-separated heap node numbers, e.g. 1,2,3")
    p.add_argument("--layers", type=int, default=None, help="layers L (strategies optimal, bellman_noiseless; default L = B)")
    p.add_argument("--width", type=int, default=None, help="channels per layer d (strategies optimal, bellman_noiseless)")
    p.add_argument("--measurement", choices=("unit", "coordinate"), default="unit",
                   help="class searched by optimal_nonadaptive (default unit)")
    channel = p.add_mutually_exclusive_group()
    channel.add_argument("--tau", default=None, help="gaussian channel noise tau >= 0")
    channel.add_argument("--tokens", type=int, default=None, help="tokens channel with N tokens")
    p.add_argument("--s2", type=float, default=0.01, help="label noise variance of the tokens channel")
    p.add_argument("--samples", type=int, default=100_000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=None, help="worker threads (default: all cores)")
    p.add_argument("--format", choices=("text", "json"), default="text")
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
    b.add_argument("--depth", type=int, default=3, help="tree depth K")
    b.add_argument("--alpha", default="1/2", help="tree scale ratio in (0, 1), e.g. 0.5 or 1/2")
    b.add_argument("--budget", type=int, default=2, help="layers L = B (width 1)")
    noise = b.add_mutually_exclusive_group(required=True)
    noise.add_argument("--tau", default=None, help="gaussian channel noise tau > 0")
    noise.add_argument("--tokens", type=int, default=None, help="tokens channel with N tokens")
    b.add_argument("--s2", default="1/100", help="label noise variance of the tokens channel")
    b.add_argument("--samples", type=int, default=20_000)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--threads", type=int, default=None, help="worker threads (default: all cores)")
    b.add_argument("--format", choices=("text", "json"), default="text")
    b.set_defaults(func=_bounds)


def _number(text, name):
    if text is None:
        return None
    try:
        return float(Fraction(str(text)))
    except (ValueError, ZeroDivisionError):
        raise ValueError(f"--{name} must be a number such as 0.3 or 3/10, got {text!r}") from None


def _bounds(args) -> int:
    from fvsym.priors import TreePrior

    from .optimum import bounds

    res = bounds(TreePrior(args.depth, args.alpha), args.budget, tau=_number(args.tau, "tau"), tokens=args.tokens,
                 s2=_number(args.s2, "s2"), samples=args.samples, seed=args.seed, threads=args.threads)
    out = {**res.to_dict(), "alpha": args.alpha}
    if args.format == "json":
        print(json.dumps(out, indent=2))
    else:
        print(res)
        for name, est in res.candidates.items():
            print(f"  {name:18s} {est}")
        for name, est in res.differences.items():
            print(f"  {name:36s} {est.value:+.4g} +- {est.stderr:.2g}")
    return 0


def _parse_design(text):
    if text is None:
        return None
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"--design must be comma-separated node numbers such as 1,2,3, got {text!r}") from None


def _prior(args):
    from fvsym.priors import GaussianPrior, TreePrior

    if args.prior == "tree":
        return TreePrior(args.depth, args.alpha)
    if args.cov == "isotropic":
        dim = args.dim if args.dim is not None else 2**args.depth - 1
        return GaussianPrior.isotropic(dim)
    return GaussianPrior.matched(TreePrior(args.depth, args.alpha))


def _mc(args) -> int:
    from . import loss_mc

    if args.strategy == "fixed" and args.design is None:
        raise ValueError("--strategy fixed needs --design n1,n2,...")
    if args.design is not None and args.strategy != "fixed":
        raise ValueError(f"--design applies to --strategy fixed only, got --strategy {args.strategy}")
    tau = _number(args.tau, "tau")
    est = loss_mc(
        _prior(args), args.strategy, args.budget, tau=tau, tokens=args.tokens, s2=args.s2,
        design=_parse_design(args.design), layers=args.layers, width=args.width, measurement=args.measurement,
        samples=args.samples, seed=args.seed, threads=args.threads, progress=True if args.progress else None,
    )
    inputs = {
        "prior": args.prior, "depth": args.depth, "alpha": args.alpha, "budget": args.budget,
        "strategy": args.strategy, "channel": "tokens" if args.tokens is not None else "gaussian",
        "tau": tau, "tokens": args.tokens, "s2": args.s2 if args.tokens is not None else None,
        "samples": args.samples, "seed": args.seed,
    }
    if args.prior == "gaussian":
        inputs.update(cov=args.cov, dim=args.dim)
    if args.design is not None:
        inputs["design"] = _parse_design(args.design)
    if args.layers is not None or args.width is not None:
        inputs.update(layers=args.layers, width=args.width)
    if args.strategy == "optimal_nonadaptive":
        inputs["measurement"] = args.measurement
    if args.format == "json":
        print(json.dumps({**est.as_dict(), **inputs}, indent=2))
    else:
        what = ", ".join(f"{k}={v}" for k, v in inputs.items() if v is not None)
        print(f"loss = {est.value:.6g} +- {est.stderr:.2g} ({est.how}, n={est.n})")
        print(f"  {what}")
    return 0
