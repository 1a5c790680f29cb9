"""``fv mc``: Monte Carlo loss of a strategy under a noisy channel (docs/theory.md sections 2, 4);
``fv bounds``: the noisy adaptive optimum bracketed (docs/theory.md section 3, under noise).

    fv mc --prior tree --depth 4 --alpha 0.5 --budget 3 --strategy path --tau 0.3 --samples 100000 --seed 0
    fv bounds --prior tree --depth 3 --alpha 1/2 --budget 2 --tau 0.5 --format json

Numba and numpy load inside the handler only, so other ``fv`` commands stay light.
"""
from __future__ import annotations

import functools
import os
import sys
from dataclasses import dataclass

from fvsym._emit import add_format_argument, emit
from fvsym._validate import check_node_list, parse_int_list
from fvsym.cli import SCALES_HELP, int_arg, number_arg

from fvnum.priors.registry import PRIORS, cli_priors, prior_entry
from fvnum.policies.registry import CLI_STRATEGIES as STRATEGY_CHOICES
from fvnum.policies.strategies import strategy_of, taking
from fvsym.errors import InputError


MAX_DEPTH = 30
MAX_SAMPLES = 10**10


def max_threads() -> int:
    """More threads than 4 x the cores only costs memory: refused."""
    return max(8, 4 * (os.cpu_count() or 1))


# --- every option once, by its full name -----------------------------------------------------------------
_ONCE_KINDS = (None, "store", "store_const", "store_true", "store_false")  # "append" and "count" may repeat


def strict_options(parser) -> None:
    """Options of ``parser`` (and of its argument groups, which share its registry) given twice are refused
    in one line (``--depth is given twice (3, then 4): give each option once``), an alias counting as its
    option (``--tokens 3 --n-tokens 4``); a prefix is no option (``allow_abbrev`` off). Call it before the
    options are added: it swaps argparse's store actions for ones that remember the namespaces they wrote
    into (``append`` and ``count`` actions, meant to repeat, are left as they are)."""
    parser.allow_abbrev = False
    for kind in _ONCE_KINDS:
        base = parser._registry_get("action", kind, None)
        if base is not None and not getattr(base, "_fv_once", False):
            parser.register("action", kind, _once(base))


@functools.cache
def _once(base):
    """``base`` (an argparse store action) refusing a second write into the same namespace."""
    import weakref

    class Once(base):
        _fv_once = True

        def __call__(self, parser, namespace, values, option_string=None, _base=base):
            if self.option_strings:  # {id(namespace): (weak reference, flag, value)} of this option
                written = self.__dict__.setdefault("_fv_written", {})
                ref, flag, first = written.get(id(namespace), (lambda: None, None, None))
                if ref() is namespace:
                    again = "is given twice" if flag == option_string else f"repeats {flag}"
                    shown = "" if self.nargs == 0 else f" ({_brief(first)}, then {_brief(values)})"
                    parser.error(f"{option_string} {again}{shown}: give each option once")
                if len(written) > 64:  # forget the namespaces of earlier parses
                    for key in [k for k, (r, _, _) in written.items() if r() is None]:
                        del written[key]
                written[id(namespace)] = (weakref.ref(namespace), option_string, values)
            return _base.__call__(self, parser, namespace, values, option_string)

    Once.__name__ = f"Once{base.__name__}"
    return Once


def _brief(text) -> str:
    """An option's text in an error line, abridged (a 10 MB value prints as its ends)."""
    text = str(text)
    return text if len(text) <= 40 else f"{text[:25]}...{text[-10:]} ({len(text)} characters)"


def add_numeric_commands(subparsers) -> None:
    """Add ``fv mc`` and ``fv bounds`` to the ``fv`` dispatcher (``bridges.cli.COMMANDS``)."""
    p = subparsers.add_parser(
        "mc", help="Monte Carlo loss of a strategy under a noisy channel (Bayes decoder; see the decoder field)",
        description="Monte Carlo loss E||theta_hat - theta||^2 of a strategy decoded by the posterior mean, "
        "under the gaussian channel (--tau) or the tokens channel (--tokens N, label noise --s2). The decoder is "
        "exact for the gaussian channel and for the tokens channel on the tree prior (the law of the tokens: "
        "one statistic read by every layer, so a repeated row adds nothing); for the tokens channel on a Gaussian "
        "prior it is an approximation (the gaussian channel's decoder at tau(N)). The output's decoder field "
        "says which (docs/decoders.md).",
    )
    strict_options(p)  # also where fv sweep builds this parser with a class of its own
    p.add_argument("--prior", choices=cli_priors(), default="tree",
                   help="the prior (fvnum.priors.registry.PRIORS): tree, gaussian, or a registered one such as atoms")
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
    _add_prior_options(p)
    p.add_argument("--budget", type=int_arg("--budget", 0), default=None,
                   help="measurements B = L x d (default: the number of --design nodes, else 3)")
    p.add_argument("--strategy", choices=STRATEGY_CHOICES, default=None,
                   help="default: fixed with --design, else the prior's own (tree: path, gaussian: optimal, i.e. "
                        "water-filling; atoms: greedy_coordinate)")
    p.add_argument("--design", default=None,
                   help="fixed design: comma-separated heap node numbers, e.g. 1,2,3 (its length is the budget)")
    p.add_argument("--layers", type=int_arg("--layers", 1), default=None,
                   help="layers L (strategies optimal, bellman_noiseless; default L = B)")
    p.add_argument("--width", type=int_arg("--width", 1), default=None,
                   help="channels per layer d (strategies optimal, bellman_noiseless)")
    p.add_argument("--measurement", choices=("unit", "coordinate"), default=None,
                   help="class searched by the old spelling optimal_nonadaptive (default unit); better: "
                   "--strategy optimal_nonadaptive_unit or optimal_nonadaptive_coordinate")
    _add_channel_and_sampling(p, required=False, s2=None, samples=100_000)
    p.add_argument("--progress", action="store_true", help="progress bar on stderr (default: only on a TTY)")
    p.set_defaults(func=_mc, default_depth=4)

    b = subparsers.add_parser(
        "bounds", help="bracket the noisy adaptive optimum: [lower, upper] and the exact value where solved",
        description="The noisy adaptive optimum of the tree prior, or of a finite prior (--prior atoms; gaussian "
        "channel), in the coordinate class (L = B layers of width 1, repeats allowed) lies in [lower, upper]: "
        "lower = the noiseless Bellman optimum (no noisy channel beats it), upper = the Monte Carlo loss of the "
        "best adaptive policy found; exact = the exact noisy recursion where the prior is small enough (else "
        "null).",
    )
    strict_options(b)
    bounds_priors = tuple(n for n in cli_priors() if n != "gaussian")
    b.set_defaults(default_depth=3, prior_choices=bounds_priors)
    b.add_argument("--prior", choices=bounds_priors, default="tree",
                   help="the prior: tree, or a finite prior registered with its options, such as atoms")
    b.add_argument("--depth", type=int_arg("--depth", 1, MAX_DEPTH), default=None,
                   help="tree depth K (default 3, or the number of --scales)")
    b.add_argument("--alpha", type=number_arg("--alpha", exact=True, low=0, high=1, open_low=True, open_high=True),
                   default=None, help="tree scale ratio in (0, 1), e.g. 0.5 or 1/2 (default 1/2)")
    b.add_argument("--scales", default=None, help=SCALES_HELP)
    _add_prior_options(b)
    b.add_argument("--budget", type=int_arg("--budget", 0), default=2, help="layers L = B (width 1)")
    _add_channel_and_sampling(b, required=True, s2="1/100", samples=20_000)
    b.set_defaults(func=_bounds)


def _add_prior_options(p) -> None:
    """The options of every registered prior built from options (``fvnum.priors.registry.PriorOption``), each flag once."""
    seen = set()
    for entry in PRIORS.values():
        for opt in entry.options:
            if opt.flag in seen:
                continue
            seen.add(opt.flag)
            kind = int_arg(opt.flag, opt.minimum if opt.minimum is not None else 0) if opt.kind == "int" else str
            p.add_argument(opt.flag, type=kind, default=None, help=opt.help,
                           metavar="FILE" if opt.kind == "path" else None)


def _own_options(prior: str) -> set:
    """The dests of the options a prior built from options takes (``fvnum.priors.registry``)."""
    return {opt.dest for opt in PRIORS[prior].options} if prior in PRIORS else set()


def _add_channel_and_sampling(p, *, required: bool, s2, samples: int) -> None:
    """The channel (``--tau`` or ``--tokens`` with ``--s2``), ``--samples``, ``--seed``, ``--threads`` and
    ``--format`` of ``fv mc`` and ``fv bounds``."""
    channel = p.add_mutually_exclusive_group(required=required)
    channel.add_argument("--tau", type=number_arg("--tau", exact=True, low=0, high=1e100), default=None,
                         help="gaussian channel noise tau >= 0")
    channel.add_argument("--tokens", "--n-tokens", dest="tokens", type=int_arg("tokens N", 1, 10**12), default=None,
                         metavar="N", help="tokens channel with N tokens (exact decoder on the tree prior, approximate on "
                                           "a Gaussian prior; Python: fvnum.tokens(N))")
    p.add_argument("--s2", type=number_arg("--s2", exact=True, low=0, high=1e100), default=s2,
                   help="label noise variance of the tokens channel (default 1/100)")
    p.add_argument("--samples", type=int_arg("--samples", 2, MAX_SAMPLES), default=samples)
    p.add_argument("--seed", type=int_arg("--seed", 0, 2**63 - 1), default=0)
    p.add_argument("--threads", type=int_arg("--threads", 1, max_threads()), default=None,
                   help="worker threads (default: all cores)")
    add_format_argument(p)


def channel_of(tau, n_tokens, s2):
    """The channel of the flags ``--tau`` or ``--tokens N`` with ``--s2``: ``fvnum.gaussian(tau)`` or
    ``fvnum.tokens(N, s2)`` (neither or both: one line naming the flags)."""
    from fvnum.mc.channels import gaussian, tokens

    if (tau is None) == (n_tokens is None):
        given = "both" if tau is not None else "neither"
        raise InputError(f"give exactly one of --tau (gaussian channel) or --tokens N (tokens channel); got {given}")
    return gaussian(tau) if n_tokens is None else tokens(n_tokens, s2)


def _number(text):
    from fvsym._validate import parse_fraction

    return None if text is None else float(parse_fraction(text, "number"))


def _bounds(args) -> int:
    from fvsym.priors import TreePrior

    from fvnum.optimum.bracket import bounds

    check_prior_options(args)
    prior = prior_of(args)
    if args.tokens is None and args.s2 != "1/100":
        raise InputError("--s2 applies to the tokens channel (--tokens N) only")
    # priced whole before any work (fvnum.optimum.bracket.check_bounds_cost)
    res = bounds(prior, args.budget, channel_of(_number(args.tau), args.tokens, _number(args.s2)),
                 samples=args.samples, seed=args.seed, threads=args.threads)
    record = {**res.to_dict(), **cli_prior(args.prior).shown(args, prior)}
    line = str(res)
    if res.exact is not None:  # say the channel of the exact value: under tokens it is the gaussian channel's
        record["exact_channel"] = "noiseless" if res.inputs.get("tau") == 0 else "gaussian"
        if args.tokens is not None:
            line = line.replace("; exact: ", "; exact under the gaussian channel at the same tau (no exact value "
                                "for tokens; not bracketed with them): ")
    lines = [line]
    lines += [f"  {name:18s} {est}" for name, est in res.candidates.items()]
    from fvnum.estimate import stderr_text  # the one formatter of a standard error

    lines += [f"  {name:36s} {est.value:+.4g}{stderr_text(est.stderr, est.value, digits=2, exact=' exact', plus=' +- ')}"
              for name, est in res.differences.items()]  # the same samples: a difference of 0 +- 0 is exact
    lines += [f"  {name:18s} {why}" for name, why in res.skipped.items()]
    emit(record, args.format, lines)
    return 0


# strategies of fv mc on a Gaussian prior: non-adaptive ones (adaptivity does not help there, Theorem G1)
GAUSSIAN_STRATEGIES = ("top_levels", "fixed", "optimal", "optimal_nonadaptive", "optimal_nonadaptive_unit")


def check_mc_options(args) -> None:
    """Options that do not apply to the chosen prior, strategy or channel are refused, not ignored (nor
    echoed): each ValueError names the option, the value given and what it applies to. Fills the defaults that
    depend on other options: the strategy (``fixed`` with ``--design``, else the prior's own,
    :attr:`fvnum.priors.registry.PriorEntry.strategy`) and the budget (the design's length, else 3)."""
    if args.strategy is None:
        args.strategy = "fixed" if args.design is not None else prior_entry(args.prior).strategy
    if args.budget is None:
        args.budget = len(parse_int_list(args.design, "--design")) if args.design is not None else 3
    elif args.design is not None and args.budget != len(parse_int_list(args.design, "--design")):
        n = len(parse_int_list(args.design, "--design"))
        raise InputError(f"--budget {args.budget} does not match --design {_brief(args.design)} ({n} node"
                         f"{'s' if n != 1 else ''}): a fixed design's length is its budget; give --design alone")
    takes = _takes(args.strategy)  # the options the strategy's object reads
    if "design" in takes and args.design is None:
        raise InputError(f"--strategy {args.strategy} needs --design n1,n2,...")
    if args.design is not None and "design" not in takes:
        raise InputError(f"--design applies to --strategy {taking('design')} only, got --strategy {args.strategy}")
    check_prior_options(args)
    if args.s2 is not None and args.tokens is None:
        raise InputError("--s2 applies to the tokens channel (--tokens N) only")
    if args.measurement is not None and "measurement" not in takes:
        raise InputError(f"--measurement applies to --strategy {taking('measurement', classed=True)} only, got "
                         f"--strategy {args.strategy}")
    if (args.layers is not None or args.width is not None) and "layers" not in takes:
        raise InputError(f"--layers and --width apply to strategies {taking('layers')}, "
                         f"got --strategy {args.strategy}")


def _takes(name) -> frozenset:
    s = strategy_of(name)
    return frozenset() if s is None else s.takes


def check_prior_options(args) -> None:
    """The options of ``--prior``, of ``fv mc`` and ``fv bounds``: another prior's own options are refused
    (``--dim``: checked with the prior's own), then the prior's :class:`CliPrior` checks its own."""
    others = {dest for name in PRIORS if name != args.prior for dest in _own_options(name)} - _own_options(args.prior)
    for dest in sorted(others - {"dim"}):
        if getattr(args, dest, None) is not None:
            raise InputError(f"--{dest} applies to --prior {_owner(dest)} only, got --prior {args.prior} --{dest} "
                             f"{_brief(getattr(args, dest))}")
    cli_prior(args.prior).check(args)


def _owner(dest: str) -> str:
    return " or ".join(name for name in PRIORS if dest in _own_options(name))


def _check_tree_options(args) -> None:
    for opt in ("cov", "dim", "eigenvalues"):  # fv bounds has no --cov, --eigenvalues (nor --prior gaussian)
        if getattr(args, opt, None) is not None:
            owners = [name for name in cli_priors() if name != "tree" and (name == "gaussian" or opt in
                                                                          _own_options(name))]
            owners = [name for name in owners if name in getattr(args, "prior_choices", owners)]
            raise InputError(f"--{opt} applies to --prior {' or '.join(owners)} only, got --prior tree --{opt} "
                             f"{_brief(getattr(args, opt))}")


def _check_registered_options(args) -> None:
    """A prior built from its own options: the tree's and the Gaussian's do not apply."""
    for opt in ("depth", "alpha", "scales", "cov", "eigenvalues"):  # fv bounds has no --cov, --eigenvalues
        if getattr(args, opt, None) is not None:
            fv_own = " or ".join(n for n in FV_PRIORS if n in getattr(args, "prior_choices", FV_PRIORS))
            raise InputError(f"--{opt} applies to --prior {fv_own}, not to --prior {args.prior}: got "
                             f"--{opt} {_brief(getattr(args, opt))}")


def _check_gaussian_options(args) -> None:
    """``fv mc --prior gaussian``: the options of the covariance chosen (``--cov matched``: a tree's
    ``--depth`` and ``--alpha`` or ``--scales``; ``isotropic``: ``--dim`` or ``--depth``; a file or
    ``--eigenvalues``: none of them) and the strategies that apply to a Gaussian prior."""
    given = args.eigenvalues is not None or args.cov not in (None, "isotropic", "matched")
    what = ("--eigenvalues" if args.eigenvalues is not None else f"--cov {_brief(args.cov)}") if given else (
        f"--cov {args.cov or 'matched'}")
    if args.eigenvalues is not None and args.cov is not None:
        raise InputError(f"--cov applies without --eigenvalues (the eigenvalues give the covariance), got --cov "
                         f"{_brief(args.cov)} --eigenvalues {_brief(args.eigenvalues)}")
    if args.cov == "isotropic" or given:
        for opt in ("alpha", "scales"):
            if getattr(args, opt) is not None:
                raise InputError(f"--{opt} applies to a tree (--prior tree, or --prior gaussian --cov matched), "
                                 f"not to {what}: got --{opt} {_brief(getattr(args, opt))}")
    if args.depth is not None and (given or args.dim is not None):
        raise InputError(f"--depth applies to a tree (--cov matched, or --cov isotropic without --dim: D = 2^depth - "
                         f"1), not to {what}{' --dim ' + str(args.dim) if args.dim is not None else ''}: got "
                         f"--depth {args.depth}")
    if args.dim is not None and args.cov != "isotropic":
        raise InputError("--dim applies to --cov isotropic (the matched Gaussian has D = 2^depth - 1; a covariance "
                         f"file or --eigenvalues gives its own D), got {what} --dim {args.dim}")
    if args.strategy not in GAUSSIAN_STRATEGIES:
        why = ("the coordinate-class search is for the tree prior; a Gaussian prior's optimum is the water-filling "
               "design of the unit class" if getattr(strategy_of(args.strategy), "runs_as", None) else
               "it is adaptive; on a Gaussian prior adaptivity does not help, docs/theory.md Theorem G1")
        named = ("--strategy " if "strategy" in getattr(args, "_given", ("strategy",)) else
                 "fv mc's default strategy, ")  # fv's parser records the options given
        raise InputError(f"{named}{args.strategy} applies to --prior tree only ({why}); on a Gaussian prior give "
                         f"--strategy {' | '.join(GAUSSIAN_STRATEGIES)} (optimal: water-filling)")
    if args.measurement == "coordinate":
        raise InputError("--measurement coordinate applies to --prior tree only (a Gaussian prior's optimum is the "
                         "water-filling design of the unit class)")
    if args.layers is not None or args.width is not None:
        raise InputError("--layers and --width apply to --prior tree only (a Gaussian prior's optimum, water-filling, "
                         "is one layer)")


def _tree(args, default_depth: int):
    """The tree of ``--depth`` with ``--alpha`` (default 1/2) or ``--scales``."""
    from fvsym.cli import tree_prior_of

    depth = args.depth if args.depth is not None or args.scales is not None else default_depth
    alpha = args.alpha if args.alpha is not None or args.scales is not None else "1/2"
    return tree_prior_of(depth, alpha, args.scales)


def _gaussian(args):
    """The Gaussian prior of ``--cov`` (matched, the default; isotropic; a file) or ``--eigenvalues``."""
    from fvsym.covfile import covariance_of
    from fvsym.priors import GaussianPrior

    if args.eigenvalues is not None or args.cov not in (None, "isotropic", "matched"):
        import sympy as sp

        cov, eigenvalues = covariance_of(args.cov, args.eigenvalues)
        return GaussianPrior(sp.diag(*eigenvalues) if eigenvalues is not None else cov)
    if args.cov == "isotropic":
        dim = args.dim if args.dim is not None else 2 ** (args.depth or 4) - 1
        return GaussianPrior.isotropic(dim)
    return GaussianPrior.matched(_tree(args, default_depth=4))


def _gaussian_inputs(args, prior, spec) -> dict:
    return {"cov": args.cov or "matched" if args.eigenvalues is None else "eigenvalues", "dim": spec.dim}


def _registered_inputs(args, prior, spec) -> dict:
    """A registered prior: its options and what it is (no depth)."""
    inputs = {dest: getattr(args, dest) for dest in sorted(_own_options(args.prior))}
    inputs.update(dim=spec.dim, **({"n_atoms": spec.n_atoms} if getattr(spec, "atoms", None) is not None else {}))
    return inputs


@dataclass(frozen=True)
class CliPrior:
    """How ``fv mc`` reads a prior from its options: ``check(args)`` refuses the options that do not apply to
    it, ``build(args)`` makes the prior, ``inputs(args, prior, spec)`` what the output records of it beyond the
    common inputs; ``alpha``: whether it is computed at the tree's ``--alpha`` (``depth``: at its ``--depth``)."""

    check: object
    build: object
    inputs: object = lambda args, prior, spec: {}
    alpha: bool = True
    depth: bool = True
    shown: object = lambda args, prior: {}  # what fv bounds records of the prior beside its result


# the two priors fv builds from its own options (--depth, --alpha, --scales, --cov, --eigenvalues); every other
# registered prior builds itself from its options (fvnum.priors.registry.PriorEntry.build)
def _tree_shown(args, prior) -> dict:
    return {"alpha": args.alpha if args.scales is None else None,
            **({"scales": [str(a) for a in prior.scales]} if args.scales is not None else {})}


def _registered_shown(args, prior) -> dict:
    return {dest: getattr(args, dest) for dest in sorted(_own_options(args.prior)) if getattr(args, dest) is not None}


FV_PRIORS = {"tree": CliPrior(_check_tree_options, lambda args: _tree(args, default_depth=getattr(args, "default_depth", 4)),
                              shown=_tree_shown),
             "gaussian": CliPrior(_check_gaussian_options, _gaussian, _gaussian_inputs)}


def cli_prior(name: str) -> CliPrior:
    """The :class:`CliPrior` of ``--prior name``."""
    if name in FV_PRIORS:
        return FV_PRIORS[name]
    return CliPrior(_check_registered_options, PRIORS[name].build, _registered_inputs, alpha=False, depth=False,
                    shown=_registered_shown)


def prior_of(args):
    """The prior of ``fv mc``'s options (``--prior``, ``--depth``, ``--alpha`` or ``--scales``, ``--cov``,
    ``--eigenvalues``, ``--dim``, or a registered prior's own); also what ``fv sweep`` checks an mc cell by."""
    return cli_prior(args.prior).build(args)


def _alpha_shown(args):
    """The alpha a result was computed at (None for general scales or a covariance of its own)."""
    if not cli_prior(args.prior).alpha:
        return None
    if args.scales is not None or args.eigenvalues is not None or args.cov not in (None, "matched"):
        return None  # general scales, an isotropic Gaussian, a covariance of its own
    return args.alpha or "1/2"


def _mc(args) -> int:
    from fvnum import loss_mc
    from fvnum.mc.channels import make_channel
    from fvnum.options import StrategyOptions
    from fvnum.policies.prices import check_mc
    from fvnum.priors.tree import numeric_prior

    check_mc_options(args)
    from fvnum.policies.registry import resolve_strategy

    if getattr(strategy_of(args.strategy), "classed", False):  # the old spelling: say the class it means here
        _, klass = resolve_strategy(args.strategy, args.measurement)
        print(f"fv mc: note: --strategy optimal_nonadaptive --measurement {klass} is --strategy "
              f"optimal_nonadaptive_{klass}", file=sys.stderr)  # without --measurement it is refused: no class
    prior = prior_of(args)
    design = None
    if args.design is not None:
        design = check_node_list(parse_int_list(args.design, "--design"), "design", prior.dim)
    tau = _number(args.tau)
    s2 = _number(args.s2) if args.s2 is not None else 0.01
    spec = numeric_prior(prior)
    strategy, klass = resolve_strategy(args.strategy, args.measurement)
    if args.tau is None and args.tokens is None:  # the library says n_tokens; the command line names its flags
        raise InputError("give exactly one of --tau (gaussian channel) or --tokens N (tokens channel); got neither")
    check_mc(spec, budget=args.budget, strategy=strategy, measurement=klass,
             token_channel=args.tokens is not None, samples=args.samples, threads=args.threads, design=design)
    given = channel_of(tau, args.tokens, s2)
    channel = make_channel(spec, given)
    options = StrategyOptions(design=design, layers=args.layers, width=args.width, measurement=args.measurement)
    est = loss_mc(prior, args.strategy, args.budget, given, samples=args.samples, seed=args.seed, options=options,
                  threads=args.threads, progress=True if args.progress else None)
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
    reader = cli_prior(args.prior)
    inputs.update(reader.inputs(args, prior, spec))
    if not reader.depth:
        inputs.pop("depth", None)
    if design is not None:
        inputs["design"] = design
    if args.layers is not None or args.width is not None:
        inputs.update(layers=args.layers, width=args.width)
    if "measurement" in _takes(args.strategy):  # a design search of a class (optimal_nonadaptive)
        strategy, inputs["measurement"] = resolve_strategy(args.strategy, args.measurement)
        inputs["strategy"] = f"{strategy}_{inputs['measurement']}"
    shown = {**inputs, "tau": args.tau if args.tokens is None else f"{channel.tau:.6g} (tokens)"}
    if channel.tau_given is not None:  # noiseless in effect (fvnum.mc.channels): computed at tau = 0
        inputs["tau_given"] = channel.tau_given
        shown["tau"] = f"{args.tau} (noiseless in effect: computed at tau = 0)"
    what = ", ".join(f"{k}={v}" for k, v in shown.items() if v is not None)
    from fvnum.estimate import stderr_text  # the one formatter of a standard error

    lines = [f"loss = {est.value:.6g}{stderr_text(est.stderr, est.value, digits=2, exact=' exact', plus=' +- ')} "
             f"({est.how}, n={est.n})", f"  {what}",
             f"  decoder: {est.decoder}"]
    emit({**est.to_dict(), **inputs}, args.format, lines)
    return 0
