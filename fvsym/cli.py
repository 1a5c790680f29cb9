"""``fv derive``: exact losses from the command line (the Python API mirrors it with the same names).

    fv derive tree-loss --depth K --budget B --strategy {path,top_levels,optimal,optimal_nonadaptive_coordinate}
                        [--layers L --width d] [--alpha A | --scales a1,..,aK] [--format text|latex|json]
    fv derive tree-loss --depth K --strategy fixed --design n1,n2,.. [--alpha A | --scales ..]
    fv derive gaussian-loss --dim D --budget B [--tau T] [--cov isotropic|matched|FILE] [--depth K --alpha A]
                        [--eigenvalues c1,c2,..] [--scales a1,..,aK (with --cov matched)]
                        [--format text|latex|json]
    fv derive bellman --depth K --layers L --width d [--alpha A] [--unroll] [--format text|latex|json]
    fv derive bellman --depth K --layers L --tau T [--alpha A]     (the noisy recursion, small trees)

``tree-loss --strategy optimal`` (or ``optimal_nonadaptive_coordinate``) without ``--alpha`` prints the exact
optimum for every alpha in (0, 1): a Piecewise with certified pieces, each with its policy.

``--alpha`` and ``--tau`` take exact rationals (``1/2``) or decimals (``0.3``, read exactly as 3/10).
Handlers import the derivations lazily; nothing here loads numba or torch.

This is fvsym's command-line layer, above the rest of fvsym (nothing in fvsym imports it): the one fvsym
module with argparse types (:func:`number_arg`, :func:`int_arg`, shared by every ``fv`` command) and
:func:`cli_words` (a library refusal said with the command line's flags). Its guards are :mod:`fvsym.guards.limits`.
"""
from __future__ import annotations

import math
import re

import sympy as sp

from fvsym._emit import to_json
from fvsym._validate import _short, check_alpha, check_int, check_printable, check_real, check_tau, parse_fraction, parse_number_list
from fvsym.guards.costs import tree_loss_cost
from fvsym.guards.limits import TIME_CAP_NOTE, check_memory, check_time, fits_memory, fits_time, largest_fitting
from fvsym.priors import MAX_DEPTH
from fvsym.strategy_names import BARE, CLASS_NAMED, bare_refusal
from fvsym.strategy_names import DERIVE as STRATEGIES
from fvsym.covfile import covariance_of
from fvsym.errors import InputError
FORMATS = ("text", "latex", "json")
_ALPHA = dict(exact=True, low=0, high=1, open_low=True, open_high=True)
_PRINT_HINT = "; give alpha and tau with fewer digits (such as 1/2) or a smaller depth"
SCALES_HELP = "general tree scales a_1 >= .. >= a_K > 0, comma-separated (e.g. 1,1/2,1/3), instead of --alpha"


# --- the command line's words for a library refusal ---------------------------------------------------
CLI_TIME_CAP_NOTE = "fv --max-seconds S raises it"  # the flag that sets the time cap on the command line


def cli_words(exc) -> str:
    """The one-line message of a library error as ``fv`` prints it: the library names the time cap in its own
    words (:data:`fvsym.guards.limits.TIME_CAP_NOTE`), the command line names its flag (``fv --max-seconds S``). Works
    on an error re-raised with more words around it (a sweep's cell), so it goes by the text."""
    return str(exc).replace(TIME_CAP_NOTE, CLI_TIME_CAP_NOTE)


# --- argparse types: every fv command parses numbers the same way --------------------------------------
def strategy_arg(text: str) -> str:
    """An argparse ``type=`` for ``--strategy``: the bare ``optimal_nonadaptive`` (no class) is refused in one
    line saying the class names (``fv derive`` and ``fv mc`` alike); other names go to argparse's choices."""
    import argparse

    if str(text).strip() == BARE:
        raise argparse.ArgumentTypeError(bare_refusal(BARE))
    return text


def number_arg(name: str, *, exact: bool = False, low: float = -math.inf, high: float = math.inf,
               open_low: bool = False, open_high: bool = False):
    """An argparse ``type=``: parses with :func:`parse_fraction` and checks the range; returns a float,
    or with ``exact`` the validated text (an exact rational such as ``1/2`` stays exact)."""
    import argparse

    def parse(text):
        try:
            value = parse_fraction(text, name)
            check_real(value, name, low, high, open_low=open_low, open_high=open_high, shown=str(text).strip(),
                       float_in_range=not exact)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return str(text).strip() if exact else float(value)

    parse.__name__ = "number"
    return parse


def int_arg(name: str, minimum: int | None = None, maximum: int | None = None):
    """An argparse ``type=`` for integers in ``[minimum, maximum]`` (at most 19 digits)."""
    import argparse

    def parse(text):
        t = str(text).strip()
        if not re.fullmatch(r"[+-]?\d{1,19}", t):
            raise argparse.ArgumentTypeError(f"{name} must be an integer, got {_short(text)}")
        v = int(t)
        if minimum is not None and v < minimum:
            raise argparse.ArgumentTypeError(f"{name} must be >= {minimum}, got {v}")
        if maximum is not None and v > maximum:
            raise argparse.ArgumentTypeError(f"{name} must be <= {maximum}, got {v}")
        return v

    parse.__name__ = "integer"
    return parse




# --- inputs shared by the tree and Gaussian commands (fv derive, fv mc, fv bounds) -------------------------
def tree_prior_of(depth, alpha, scales):
    """The ``TreePrior`` of ``--depth`` with ``--alpha`` or ``--scales`` (text); ``depth=None`` with scales:
    the number of scales."""
    from fvsym.priors import TreePrior

    if scales is None:
        return TreePrior(depth) if alpha is None else TreePrior(depth, check_alpha(alpha))
    if alpha is not None:
        raise InputError(f"give --alpha or --scales, not both (got --alpha {alpha})")
    values = parse_number_list(scales, "--scales")
    if depth is not None and depth != len(values):
        raise InputError(f"--scales needs depth = {depth} entries (one a_k per level), got {len(values)}")
    return TreePrior(len(values), scales=values)


def add_derive_commands(subparsers) -> None:
    """Add ``fv derive`` and its quantities to the ``fv`` dispatcher (``bridges.cli.COMMANDS``)."""
    derive = subparsers.add_parser(
        "derive", help="derive an exact loss (fvsym)", description="Derive an exact loss of docs/theory.md."
    )
    quantities = derive.add_subparsers(dest="quantity", metavar="QUANTITY")
    quantities.required = True

    tree = quantities.add_parser(
        "tree-loss", help="noiseless loss of a strategy on the tree prior (docs/theory.md section 3, 6)",
        description="Noiseless loss of a strategy on TreePrior(depth, alpha), coordinate class.",
    )
    tree.add_argument("--depth", type=int_arg("depth", 1, MAX_DEPTH), default=None,
                      help="tree depth K >= 1 (required unless --scales gives it)")
    tree.add_argument("--budget", type=int_arg("budget", 0), default=None,
                      help="budget B = L * d (for --strategy fixed: the number of design nodes)")
    tree.add_argument("--strategy", required=True, choices=STRATEGIES, type=strategy_arg)
    tree.add_argument("--design", default=None,
                      help="--strategy fixed: heap node numbers read in one layer, e.g. 1,2,3")
    tree.add_argument("--scales", default=None, help=SCALES_HELP)
    tree.add_argument("--layers", type=int_arg("layers", 0), default=None, help="L (optimal strategies)")
    tree.add_argument("--width", type=int_arg("width", 1), default=None, help="d (optimal strategies)")
    tree.add_argument("--alpha", type=number_arg("alpha", **_ALPHA), default=None,
                      help="scale ratio in (0, 1), e.g. 1/2 (default: symbolic)")
    tree.add_argument("--format", choices=FORMATS, default="text")
    tree.add_argument("--policy", action="store_true",
                      help="also show the optimal policy (decision tree) or design (optimal strategies)")
    tree.set_defaults(func=_tree_loss)

    gauss = quantities.add_parser(
        "gaussian-loss", help="optimal loss for a Gaussian prior (docs/theory.md section 5)",
        description="Optimal unit-class loss of a Gaussian prior by rank-constrained water-filling.",
    )
    gauss.add_argument("--dim", type=int_arg("dim", 1), default=None,
                       help="D (optional for --cov matched: 2^depth - 1)")
    gauss.add_argument("--budget", type=int_arg("budget", 0), required=True, help="budget B")
    gauss.add_argument("--tau", type=number_arg("tau", exact=True, low=0), default=None,
                       help="channel noise >= 0, e.g. 1/2 (default: symbolic)")
    gauss.add_argument("--cov", default="isotropic",
                       help="isotropic (C = I_D, default), matched (the matched Gaussian of the tree prior), or a "
                            "file: .npy, or .csv/.txt rows of numbers")
    gauss.add_argument("--eigenvalues", default=None,
                       help="the spectrum of C, comma-separated (e.g. 1,1/2,1/4): the loss depends on nothing else")
    gauss.add_argument("--scales", default=None, help="--cov matched: " + SCALES_HELP)
    gauss.add_argument("--depth", type=int_arg("depth", 1, MAX_DEPTH), default=None, help="tree depth K (--cov matched)")
    gauss.add_argument("--alpha", type=number_arg("alpha", **_ALPHA), default=None,
                       help="tree scale ratio (--cov matched; default: symbolic)")
    gauss.add_argument("--format", choices=FORMATS, default="text")
    gauss.set_defaults(func=_gaussian_loss)

    bell = quantities.add_parser(
        "bellman", help="the Bellman recursion as equations (docs/theory.md section 3)",
        description="The Bellman recursion of the noiseless coordinate class on TreePrior(depth, alpha), "
                    "as sympy equations; --unroll expands it for this tree and evaluates it.",
    )
    bell.add_argument("--depth", type=int_arg("depth", 1, MAX_DEPTH), default=None,
                      help="tree depth K >= 1 (required unless --scales gives it)")
    bell.add_argument("--scales", default=None, help=SCALES_HELP)
    bell.add_argument("--layers", type=int_arg("layers", 1), required=True, help="L >= 1")
    bell.add_argument("--width", type=int_arg("width", 1), default=1, help="d, nodes read per layer (default 1)")
    bell.add_argument("--alpha", type=number_arg("alpha", **_ALPHA), default=None,
                      help="scale ratio in (0, 1) for --unroll (default: symbolic)")
    bell.add_argument("--tau", type=number_arg("tau", exact=True, low=0, high=1e100), default=None,
                      help="gaussian channel noise tau > 0: the noisy recursion over beliefs (width 1, depth <= 3)")
    bell.add_argument("--unroll", action="store_true",
                      help="also expand the recursion for this tree (small trees) and evaluate it")
    bell.add_argument("--format", choices=FORMATS, default="text")
    bell.set_defaults(func=_bellman)


def _tree_loss(args) -> int:
    from fvsym.tree import tree_loss

    if args.design is not None and args.strategy != "fixed":
        raise InputError(f"--design applies to --strategy fixed only, got --strategy {args.strategy}")
    if args.strategy == "fixed":
        return _fixed_design_loss(args)
    if args.budget is None:
        raise InputError(f"--strategy {args.strategy} needs --budget B")
    args.strategy = CLASS_NAMED.get(args.strategy, args.strategy)  # noiseless exact: the coordinate class
    if args.scales is not None:
        return _tree_loss_scales(args)
    if args.depth is None:
        raise InputError("--depth K is required (or give --scales a_1,..,a_K)")
    depth = check_int(args.depth, "depth", minimum=1)
    budget = check_int(args.budget, "budget", minimum=0)
    alpha = None if args.alpha is None else check_alpha(args.alpha)
    if args.strategy in ("path", "top_levels") and (args.layers is not None or args.width is not None):
        raise InputError(f"--layers and --width apply to the optimal strategies; {args.strategy} has "
                         + ("L = B, d = 1" if args.strategy == "path" else "L = 1, d = B"))
    check_tree_loss_cost(depth, budget, args.strategy, alpha, args.layers, args.width)
    if args.policy and args.strategy == "top_levels":
        check_design_listing_cost(budget)
    inputs = {"depth": depth, "budget": budget, "strategy": args.strategy, "alpha": args.alpha,
              "layers": args.layers, "width": args.width, "measurement": "coordinate"}
    formula = tree_loss(depth, budget, args.strategy, alpha=alpha, layers=args.layers, width=args.width)
    extra = _policy(depth, budget, args, alpha) if args.policy else None
    if formula.pieces:
        extra = dict(extra or {})
        extra["pieces"] = [p.to_dict() for p in formula.pieces]
        extra["pieces_text"] = _pieces_text(formula.pieces, args.policy)
    _emit(formula, inputs, args.format, extra)
    return 0


def _tree_loss_scales(args) -> int:
    """``fv derive tree-loss --scales``: the same derivations on a tree of general scales."""
    from fvsym.tree import tree_loss

    if args.policy:
        raise InputError("--policy applies with --alpha (or symbolic alpha), not --scales")
    prior = tree_prior_of(args.depth, args.alpha, args.scales)
    depth, budget = prior.depth, check_int(args.budget, "budget", minimum=0)
    check_tree_loss_cost(depth, budget, args.strategy, "1/2", args.layers, args.width)
    formula = tree_loss(depth, budget, args.strategy, layers=args.layers, width=args.width, scales=prior.scales)
    inputs = {"depth": depth, "budget": budget, "strategy": args.strategy, "scales": [str(a) for a in prior.scales],
              "layers": args.layers, "width": args.width}
    _emit(formula, inputs, args.format)
    return 0


def _fixed_design_loss(args) -> int:
    """``fv derive tree-loss --strategy fixed --design n1,n2,..``: the exact noiseless loss of a fixed
    coordinate design (``fvsym.tree.coordinate_design_loss``; symbolic in alpha by default)."""
    from fvsym._formula import Formula
    from fvsym._validate import check_node_list, parse_int_list
    from fvsym.tree import SOURCE, coordinate_design_loss

    if args.design is None:
        raise InputError("--strategy fixed needs --design n1,n2,... (heap node numbers)")
    if args.layers is not None or args.width is not None or args.policy:
        raise InputError("--layers, --width and --policy do not apply to --strategy fixed (one layer, the design)")
    if args.depth is None and args.scales is None:
        raise InputError("--depth K is required (or give --scales a_1,..,a_K)")
    prior = tree_prior_of(args.depth, args.alpha, args.scales)
    nodes = check_node_list(parse_int_list(args.design, "--design"), "design", prior.n_nodes)
    if args.budget is not None and check_int(args.budget, "budget") != len(nodes):
        raise InputError(f"--budget must equal the number of design nodes, {len(nodes)}, got {args.budget}")
    check_tree_loss_cost(prior.depth, len(nodes), "fixed", args.alpha or "1/2")  # one O(D K) pass
    expr = sp.simplify(coordinate_design_loss(prior, nodes))
    params = tuple(sorted(expr.free_symbols, key=str))
    formula = Formula("tree_loss_fixed", expr, params, SOURCE + f" (fixed coordinate design {list(nodes)})")
    inputs = {"depth": prior.depth, "budget": len(nodes), "strategy": "fixed", "design": list(nodes),
              "alpha": args.alpha, "scales": None if args.scales is None else [str(a) for a in prior.scales]}
    _emit(formula, inputs, args.format)
    return 0


def _bellman(args) -> int:
    from fvsym import bellman

    if args.depth is None and args.scales is None:
        raise InputError("--depth K is required (or give --scales a_1,..,a_K)")
    prior = tree_prior_of(args.depth, args.alpha, args.scales)
    depth = prior.depth
    layers = check_int(args.layers, "layers", minimum=1)
    width = check_int(args.width, "width", minimum=1)
    alpha = None if args.alpha is None else check_alpha(args.alpha)
    tau = None if args.tau is None else check_tau(args.tau)
    if tau is not None and args.unroll:
        raise InputError("--unroll expands the noiseless recursion; the noisy optimum's value: fv bounds --tau T")
    if args.unroll:
        check_tree_loss_cost(depth, layers * width, "optimal", alpha if alpha is not None else "1/2", layers, width)
    if args.unroll:
        check_unroll_cost(prior, layers, width, symbolic=not prior.is_numeric)
    equations = bellman.recursion(prior, layers, width, tau=tau)
    for e in equations:
        check_printable(e, "the Bellman recursion", _PRINT_HINT)
    record = {
        "name": "bellman_recursion" if tau is None else "noisy_bellman_recursion",
        **equations.to_dict(),
        "source": "docs/theory.md §3 (" + ("noiseless coordinate class" if tau is None else
                                      "under noise: gaussian channel, coordinate class, width 1") + ", tree prior)",
        "inputs": {"depth": depth, "layers": layers, "width": width, "alpha": args.alpha, "tau": args.tau,
                   **({"scales": [str(a) for a in prior.scales]} if args.scales is not None else {})},
    }
    if args.unroll:
        expr = bellman.unroll(prior, layers, width)
        value = expr.doit() if prior.is_numeric else sp.simplify(expr.doit())
        check_printable(expr, "the unrolled recursion", _PRINT_HINT)
        check_printable(value, "the unrolled value", _PRINT_HINT)
        record["unrolled"] = sp.sstr(expr, order="none")  # in the order the recursion lists its actions (sorting
        # the terms of a large expression for printing took 10 times longer than building it)
        record["unrolled_value"] = sp.sstr(value)
        record["solve_loss"] = sp.sstr(bellman.solve(prior, layers, width).loss) if prior.is_numeric else None
    if args.format == "json":
        print(to_json(record))
        return 0
    if args.format == "latex":
        print(record["latex"])
    else:
        print(str(equations))
    if args.unroll:
        print(f"unrolled: {record['unrolled']}")
        print(f"value = {record['unrolled_value']}" + (f"  (solve: {record['solve_loss']})" if record["solve_loss"] else ""))
    return 0


def _policy(depth: int, budget: int, args, alpha):
    """The argmins behind an optimal loss: the decision tree, or the fixed design (cached solves)."""
    from fvsym import bellman
    from fvsym.priors import TreePrior

    from fvsym.tree import path_design, top_levels_design

    prior = TreePrior(depth) if alpha is None else TreePrior(depth, alpha)
    if args.strategy == "top_levels":  # the design does not depend on alpha
        return {"design": [int(n) for n in top_levels_design(prior, budget)]}
    if args.strategy == "path":
        policy = path_design(prior, budget)
        return {"policy": None if policy is None else policy.to_dict(),
                "policy_text": "read nothing" if policy is None else policy.describe()}
    if alpha is None:  # symbolic alpha: every piece of the optimum carries its own policy
        return {}
    if args.strategy == "optimal_nonadaptive":
        _, nodes = bellman.optimal_nonadaptive(prior, budget)
        return {"design": [int(n) for n in nodes]}
    layers = args.layers if args.layers is not None else budget // (args.width or 1)
    policy = bellman.solve(prior, layers, args.width or 1).policy
    return {"policy": None if policy is None else policy.to_dict(),
            "policy_text": "read nothing" if policy is None else policy.describe()}


def _pieces_text(pieces, with_policy: bool) -> str:
    lines = []
    for p in pieces:
        what = f"design {list(p.design)}" if p.design is not None else "policy below" if with_policy else ""
        lines.append(f"piece {p.lower} < alpha < {p.upper}: loss {p.loss}"
                     + (f"; {what}" if what else "") + f" (checked at alpha = {p.sample})")
        if with_policy and p.policy is not None:
            lines.append(p.policy.describe())
    return "\n".join(lines)


def _gaussian_loss(args) -> int:
    from fvsym.gaussian import gaussian_loss

    tau = None if args.tau is None else check_tau(args.tau)
    alpha = None if args.alpha is None else check_alpha(args.alpha)
    cov, eigenvalues = covariance_of(args.cov, args.eigenvalues)
    scales = None if args.scales is None else parse_number_list(args.scales, "--scales")
    if scales is not None and args.depth is None:
        args.depth = len(scales)
    check_gaussian_loss_cost(cov, eigenvalues, args.dim, args.depth, alpha is None and scales is None, tau is None,
                             budget=args.budget)
    inputs = {"dim": args.dim, "budget": args.budget, "tau": args.tau, "cov": args.cov,
              "depth": args.depth, "alpha": args.alpha}
    inputs.update({k: v for k, v in (("eigenvalues", eigenvalues), ("scales", scales)) if v is not None})
    formula = gaussian_loss(args.dim, args.budget, tau, cov=cov, depth=args.depth, alpha=alpha,
                            eigenvalues=eigenvalues, scales=scales)
    _emit(formula, inputs, args.format)
    return 0


def result_record(formula, inputs: dict) -> dict:
    """The JSON record of a derived formula: ``expr``, ``latex``, and ``value``/``float`` when no
    symbol is left (``value`` is exact, e.g. ``"3/8"``, unless a float entered the derivation)."""
    expr = formula.expr
    check_printable(expr, f"the result {formula.name}", _PRINT_HINT)
    record = {
        "name": formula.name,
        "expr": sp.sstr(expr),
        "latex": formula.latex,
        "params": [str(p) for p in formula.params],
        "source": formula.source,
        "inputs": inputs,
    }
    if not expr.free_symbols:
        exact = not expr.has(sp.Float)
        record["value"] = sp.sstr(expr) if exact else repr(float(expr))
        record["exact"] = exact
        record["float"] = float(expr)
    return record


def _emit(formula, inputs: dict, fmt: str, extra: dict | None = None) -> None:
    record = result_record(formula, inputs)
    if extra:
        record.update({k: v for k, v in extra.items() if k not in ("policy_text", "pieces_text")})
    if fmt == "json":
        print(to_json(record))
    elif fmt == "latex":
        print(f"{record['name']} = {record['latex']}")
    else:
        print(f"{record['name']} = {record['expr']}")
        if "value" in record:
            print(f"value = {record['value']} ({record['float']:.12g})")
        print(f"source: {record['source']}")
    if extra and fmt == "latex":  # LaTeX only: the pieces as cases, any text (a decision tree) as comments
        if "pieces" in extra:
            from fvsym.bellman import pieces_latex

            print(pieces_latex(formula.pieces))
        text = extra.get("policy_text") or (f"design: nodes {extra['design']}" if "design" in extra else None)
        if text and "pieces" not in extra:
            print("\n".join("% " + line for line in text.splitlines()))
    elif extra and fmt != "json":
        if "pieces_text" in extra:
            print(extra["pieces_text"])
        elif "policy_text" in extra or "design" in extra:
            print(extra.get("policy_text") or f"design: nodes {extra['design']}")


# --- resource guards ----------------------------------------------------------------------------------
def check_unroll_cost(prior, layers: int, width: int, *, symbolic: bool = False) -> None:
    """Refuse, before building it, an unrolled recursion that would not fit in memory or would take longer
    than the cap (one line: the estimate, the cap, the most layers that fit); ``bellman.unroll_cost`` prices
    it (``symbolic`` is read from the prior)."""
    from fvsym import bellman

    what = f"fv derive bellman --unroll at depth {prior.depth} with {layers} layers"
    memory, seconds = bellman.unroll_cost(prior, layers, width)
    if not fits_memory(memory):
        check_memory(what, memory, largest_fitting("--layers", range(1, layers),
                                                   lambda n: fits_memory(bellman.unroll_cost(prior, n, width)[0])))
    if not fits_time(seconds):
        check_time(what, seconds, largest_fitting("--layers", range(1, layers),
                                                  lambda n: fits_time(bellman.unroll_cost(prior, n, width)[1])))


def _gaussian_price(cov, eigenvalues, dim, depth, symbolic_alpha: bool, symbolic_tau: bool, budget: int = 0):
    """``(bytes, seconds, what, resize)`` of ``fv derive gaussian-loss`` for these inputs (``cov`` a name or
    the rows read from a file); ``resize(D)`` prices the same command at dimension ``D``."""
    from fvsym.guards.costs import gaussian_loss_cost

    if eigenvalues is not None:
        def resize(D):
            return gaussian_loss_cost("eigenvalues", D)
        n, what = len(eigenvalues), f"{len(eigenvalues)} eigenvalues"
    elif cov == "matched":
        def resize(D):
            return gaussian_loss_cost("matched", D, symbolic_alpha=symbolic_alpha, budget=budget)
        n = 2 ** depth - 1 if depth is not None else 1
        what = f"the matched Gaussian of depth {depth}"
    elif cov in (None, "isotropic"):
        def resize(D):
            return gaussian_loss_cost("isotropic", D)
        n, what = dim or 1, "an isotropic covariance"
    else:
        n = len(cov)
        diagonal = all(_is_zero(x) for i, row in enumerate(cov) for j, x in enumerate(row) if i != j)

        def resize(D):
            return gaussian_loss_cost("matrix", D, diagonal=diagonal, symbolic_tau=symbolic_tau)
        what = f"a {'diagonal' if diagonal else 'dense'} {n} x {n} covariance" \
               + ("" if diagonal else " (its exact eigenvalues)")
    memory, seconds = resize(n)
    return memory, seconds, what, resize


def _is_zero(text) -> bool:
    try:
        return parse_fraction(text, "covariance entry") == 0
    except ValueError:
        return False


def check_gaussian_loss_cost(cov, eigenvalues, dim, depth, symbolic_alpha: bool, symbolic_tau: bool, *,
                             budget: int = 0) -> None:
    """Refuse, before the exact covariance is built, a gaussian-loss that would not fit in memory or in the
    time cap, naming the largest dimension that fits."""
    memory, seconds, what, resize = _gaussian_price(cov, eigenvalues, dim, depth, symbolic_alpha, symbolic_tau,
                                                    budget)
    what = f"fv derive gaussian-loss on {what}"
    if fits_memory(memory) and fits_time(seconds):
        return
    n = 1
    while n < 1024 and fits_memory(resize(n + 1)[0]) and fits_time(resize(n + 1)[1]):
        n += 1
    hint = f"; the largest dimension D that fits is {n}" if fits_time(resize(1)[1]) else ""
    check_memory(what, memory, hint)
    check_time(what, seconds, hint)


def derive_price(argv) -> dict:
    """The price ``{"seconds", "bytes"}`` that ``fv derive`` checks before work for ``argv`` (starting with
    ``derive``), summed over its pieces; for benchmarks/bench_derive_prices.py, which sets it beside the
    measured time and memory."""
    import argparse

    from fvsym import bellman
    from fvsym.guards.costs import DESIGN_LISTING_BYTES_PER_NODE, DESIGN_LISTING_SECONDS_PER_NODE, tree_loss_cost

    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--max-seconds", default=None)
    add_derive_commands(parser.add_subparsers(dest="command"))
    args = parser.parse_args(list(argv))
    if args.quantity == "tree-loss":
        strategy = CLASS_NAMED.get(args.strategy, args.strategy)
        if strategy == "fixed":
            prior = tree_prior_of(args.depth, args.alpha, args.scales)
            return dict(zip(("bytes", "seconds"), tree_loss_cost(prior.depth, len(args.design.split(",")), "fixed",
                                                               False)))
        depth = args.depth if args.depth is not None else len(parse_number_list(args.scales, "--scales"))
        memory, seconds = tree_loss_cost(depth, args.budget, strategy, args.alpha is None and args.scales is None,
                                         args.layers, args.width)
        if args.policy and strategy == "top_levels":
            memory += DESIGN_LISTING_BYTES_PER_NODE * args.budget
            seconds += DESIGN_LISTING_SECONDS_PER_NODE * args.budget
        return {"bytes": memory, "seconds": seconds}
    if args.quantity == "bellman":
        prior = tree_prior_of(args.depth, args.alpha, args.scales)
        memory, seconds = 60e6, 0.2  # the recursion's equations
        if args.unroll:
            if prior.is_numeric:
                solve = tree_loss_cost(prior.depth, args.layers * args.width, "optimal", False, args.layers, args.width)
                memory, seconds = max(memory, solve[0]), seconds + solve[1]
            unroll = bellman.unroll_cost(prior, args.layers, args.width)
            memory, seconds = max(memory, unroll[0]), seconds + unroll[1] - 0.2
        return {"bytes": memory, "seconds": seconds}
    cov, eigenvalues = covariance_of(args.cov, args.eigenvalues)
    memory, seconds, _, _ = _gaussian_price(cov, eigenvalues, args.dim, args.depth, args.alpha is None,
                                            args.tau is None, args.budget)
    return {"bytes": memory, "seconds": seconds}


def check_design_listing_cost(budget: int) -> None:
    """Refuse, before building it, a listed design (``--policy`` of top_levels: its ``B`` node numbers) that
    would not fit in memory or in the time cap, naming the largest budget that fits."""
    from fvsym.guards.costs import DESIGN_LISTING_BYTES_PER_NODE as per_byte, DESIGN_LISTING_SECONDS_PER_NODE as per_second

    from fvsym.guards.limits import available_memory, max_seconds

    what = f"listing the design of {budget} nodes (--policy)"
    fit_memory = int(max(available_memory() - 150e6, 0) // per_byte)
    check_memory(what, 150e6 + per_byte * budget, f"; the largest --budget with --policy that fits is {fit_memory}")
    fit_time = int(max(max_seconds() - 1.0, 0) // per_second)
    check_time(what, 1.0 + per_second * budget, f"; the largest --budget with --policy that fits is {fit_time}")


def check_tree_loss_cost(depth, budget, strategy, alpha, layers=None, width=None) -> None:
    """Refuse, before any work, a derivation that would not fit in memory or in the time cap."""
    if strategy in ("optimal", "optimal_nonadaptive") and alpha is None:
        return  # the symbolic optimum has its own limit (depth <= 5), checked by the solver
    symbolic = alpha is None

    def cost(k):
        return tree_loss_cost(k, min(budget, 2**k - 1), strategy, symbolic, layers, width)

    memory, seconds = cost(depth)
    what = f"fv derive tree-loss --strategy {strategy} at depth {depth}, budget {budget}"
    depths = range(1, depth + 1)
    check_memory(what, memory, largest_fitting("depth", depths, lambda k: fits_memory(cost(k)[0])))
    check_time(what, seconds, largest_fitting("depth", depths, lambda k: fits_time(cost(k)[1])))
