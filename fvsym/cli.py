"""``fv derive``: exact losses from the command line (the Python API mirrors it with the same names).

    fv derive tree-loss --depth K --budget B --strategy {path,top_levels,optimal,optimal_nonadaptive}
                        [--layers L --width d] [--alpha A] [--format text|latex|json]
    fv derive gaussian-loss --dim D --budget B [--tau T] [--cov isotropic|matched] [--depth K --alpha A]
                        [--format text|latex|json]
    fv derive bellman --depth K --layers L --width d [--alpha A] [--unroll] [--format text|latex|json]

``tree-loss --strategy optimal`` (or ``optimal_nonadaptive``) without ``--alpha`` prints the exact
optimum for every alpha in (0, 1): a Piecewise with certified pieces, each with its policy.

``--alpha`` and ``--tau`` take exact rationals (``1/2``) or decimals (``0.3``, read exactly as 3/10).
Handlers import the derivations lazily; nothing here loads numba or torch.
"""
from __future__ import annotations

import sympy as sp

from ._emit import to_json
from ._validate import (
    check_alpha, check_int, check_memory, check_tau, check_time, fits_memory, fits_time, int_arg,
    largest_fitting, number_arg,
)
from .priors import MAX_DEPTH

STRATEGIES = ("path", "top_levels", "optimal", "optimal_nonadaptive")
FORMATS = ("text", "latex", "json")
_ALPHA = dict(exact=True, low=0, high=1, open_low=True, open_high=True)


def register(subparsers) -> None:
    derive = subparsers.add_parser(
        "derive", help="derive an exact loss (fvsym)", description="Derive an exact loss of THEORY.md."
    )
    quantities = derive.add_subparsers(dest="quantity", metavar="QUANTITY")
    quantities.required = True

    tree = quantities.add_parser(
        "tree-loss", help="noiseless loss of a strategy on the tree prior (THEORY.md 3, 6)",
        description="Noiseless loss of a strategy on TreePrior(depth, alpha), coordinate class.",
    )
    tree.add_argument("--depth", type=int_arg("depth", 1, MAX_DEPTH), required=True, help="tree depth K >= 1")
    tree.add_argument("--budget", type=int_arg("budget", 0), required=True, help="budget B = L * d")
    tree.add_argument("--strategy", required=True, choices=STRATEGIES)
    tree.add_argument("--layers", type=int_arg("layers", 0), default=None, help="L (optimal strategies)")
    tree.add_argument("--width", type=int_arg("width", 1), default=None, help="d (optimal strategies)")
    tree.add_argument("--alpha", type=number_arg("alpha", **_ALPHA), default=None,
                      help="scale ratio in (0, 1), e.g. 1/2 (default: symbolic)")
    tree.add_argument("--format", choices=FORMATS, default="text")
    tree.add_argument("--policy", action="store_true",
                      help="also show the optimal policy (decision tree) or design (optimal strategies)")
    tree.set_defaults(func=_tree_loss)

    gauss = quantities.add_parser(
        "gaussian-loss", help="optimal loss for a Gaussian prior (THEORY.md 5)",
        description="Optimal unit-class loss of a Gaussian prior by rank-constrained water-filling.",
    )
    gauss.add_argument("--dim", type=int_arg("dim", 1), default=None,
                       help="D (optional for --cov matched: 2^depth - 1)")
    gauss.add_argument("--budget", type=int_arg("budget", 0), required=True, help="budget B")
    gauss.add_argument("--tau", type=number_arg("tau", exact=True, low=0), default=None,
                       help="channel noise >= 0, e.g. 1/2 (default: symbolic)")
    gauss.add_argument("--cov", default="isotropic",
                       help="isotropic (C = I_D, default) or matched (the matched Gaussian of the tree prior)")
    gauss.add_argument("--depth", type=int_arg("depth", 1, MAX_DEPTH), default=None, help="tree depth K (--cov matched)")
    gauss.add_argument("--alpha", type=number_arg("alpha", **_ALPHA), default=None,
                       help="tree scale ratio (--cov matched; default: symbolic)")
    gauss.add_argument("--format", choices=FORMATS, default="text")
    gauss.set_defaults(func=_gaussian_loss)

    bell = quantities.add_parser(
        "bellman", help="the Bellman recursion as equations (THEORY.md 3)",
        description="The Bellman recursion of the noiseless coordinate class on TreePrior(depth, alpha), "
                    "as sympy equations; --unroll expands it for this tree and evaluates it.",
    )
    bell.add_argument("--depth", type=int_arg("depth", 1, MAX_DEPTH), required=True, help="tree depth K >= 1")
    bell.add_argument("--layers", type=int_arg("layers", 1), required=True, help="L >= 1")
    bell.add_argument("--width", type=int_arg("width", 1), default=1, help="d, nodes read per layer (default 1)")
    bell.add_argument("--alpha", type=number_arg("alpha", **_ALPHA), default=None,
                      help="scale ratio in (0, 1) for --unroll (default: symbolic)")
    bell.add_argument("--unroll", action="store_true",
                      help="also expand the recursion for this tree (small trees) and evaluate it")
    bell.add_argument("--format", choices=FORMATS, default="text")
    bell.set_defaults(func=_bellman)


def _tree_loss(args) -> int:
    from .tree import tree_loss

    depth = check_int(args.depth, "depth", minimum=1)
    budget = check_int(args.budget, "budget", minimum=0)
    alpha = None if args.alpha is None else check_alpha(args.alpha)
    if args.strategy in ("path", "top_levels") and (args.layers is not None or args.width is not None):
        raise ValueError(f"--layers and --width apply to the optimal strategies; {args.strategy} has "
                         + ("L = B, d = 1" if args.strategy == "path" else "L = 1, d = B"))
    check_tree_loss_cost(depth, budget, args.strategy, alpha, args.layers, args.width)
    inputs = {"depth": depth, "budget": budget, "strategy": args.strategy, "alpha": args.alpha,
              "layers": args.layers, "width": args.width}
    formula = tree_loss(depth, budget, args.strategy, alpha=alpha, layers=args.layers, width=args.width)
    extra = _policy(depth, budget, args, alpha) if args.policy else None
    if formula.pieces:
        extra = dict(extra or {})
        extra["pieces"] = [p.to_dict() for p in formula.pieces]
        extra["pieces_text"] = _pieces_text(formula.pieces, args.policy)
    _emit(formula, inputs, args.format, extra)
    return 0


def _bellman(args) -> int:
    from . import bellman
    from .priors import TreePrior

    depth = check_int(args.depth, "depth", minimum=1)
    layers = check_int(args.layers, "layers", minimum=1)
    width = check_int(args.width, "width", minimum=1)
    alpha = None if args.alpha is None else check_alpha(args.alpha)
    if args.unroll:
        check_tree_loss_cost(depth, layers * width, "optimal", alpha if alpha is not None else "1/2", layers, width)
    prior = TreePrior(depth) if alpha is None else TreePrior(depth, alpha)
    if args.unroll:
        check_unroll_cost(prior, layers, width, symbolic=alpha is None)
    equations = bellman.recursion(prior, layers, width)
    record = {
        "name": "bellman_recursion",
        "equations": [{"lhs": sp.sstr(e.lhs), "rhs": sp.sstr(e.rhs), "latex": sp.latex(e)} for e in equations],
        "latex": bellman.recursion_latex(equations),
        "source": "THEORY.md §3 (noiseless coordinate class, tree prior)",
        "inputs": {"depth": depth, "layers": layers, "width": width, "alpha": args.alpha},
    }
    if args.unroll:
        expr = bellman.unroll(prior, layers, width)
        value = expr.doit() if alpha is not None else sp.simplify(expr.doit())
        record["unrolled"] = sp.sstr(expr)
        record["unrolled_value"] = sp.sstr(value)
        record["solve_loss"] = sp.sstr(bellman.solve(prior, layers, width).loss) if alpha is not None else None
    if args.format == "json":
        print(to_json(record))
        return 0
    if args.format == "latex":
        print(record["latex"])
    else:
        for e in equations:
            print(f"{sp.sstr(e.lhs)} = {sp.sstr(e.rhs)}")
    if args.unroll:
        print(f"unrolled: {record['unrolled']}")
        print(f"value = {record['unrolled_value']}" + (f"  (solve: {record['solve_loss']})" if record["solve_loss"] else ""))
    return 0


def _policy(depth: int, budget: int, args, alpha):
    """The argmins behind an optimal loss: the decision tree, or the fixed design (cached solves)."""
    from . import bellman
    from .priors import TreePrior

    from .tree import path_design, top_levels_design

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
    from .gaussian import gaussian_loss

    tau = None if args.tau is None else check_tau(args.tau)
    alpha = None if args.alpha is None else check_alpha(args.alpha)
    inputs = {"dim": args.dim, "budget": args.budget, "tau": args.tau, "cov": args.cov,
              "depth": args.depth, "alpha": args.alpha}
    formula = gaussian_loss(args.dim, args.budget, tau, cov=args.cov, depth=args.depth, alpha=alpha)
    _emit(formula, inputs, args.format)
    return 0


def result_record(formula, inputs: dict) -> dict:
    """The JSON record of a derived formula: ``expr``, ``latex``, and ``value``/``float`` when no
    symbol is left (``value`` is exact, e.g. ``"3/8"``, unless a float entered the derivation)."""
    expr = formula.expr
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
    if extra and fmt != "json":
        if "pieces_text" in extra:
            print(extra["pieces_text"])
        elif "policy_text" in extra or "design" in extra:
            print(extra.get("policy_text") or f"design: nodes {extra['design']}")


# --- resource guards ----------------------------------------------------------------------------------
# Measured on one slow shared core (solve and optimal_nonadaptive at alpha = 1/2): the adaptive solver
# took 0.13 s at depth 8, budget 3, about D^2 times that per depth and D/25 times per unit of budget
# (depth 7: 0.19, 0.96, 4.75 s at budgets 4, 5, 6), with about 100 MB per second of work; the one-layer
# table of optimal_nonadaptive, built up to the budget asked for, took 0.04 s at depth 10, budget 3, about
# 3 times that per depth and 2.6 times per unit of budget (0.69 s at depth 10, budget 6).
def tree_loss_cost(depth: int, budget: int, strategy: str, symbolic: bool, layers=None, width=None):
    """``(bytes, seconds)`` estimated for ``fv derive tree-loss`` (numeric alpha; symbolic alpha has
    its own depth limit in ``bellman``)."""
    D = 2**depth - 1
    base = 150e6
    if strategy == "path":
        return base, 0.01
    if strategy == "top_levels":
        closed = (budget + 1) & budget == 0 and not symbolic
        return base + (0 if closed else 200.0 * D * depth), 0.01 if closed else 2e-5 * D * depth
    if strategy == "optimal_nonadaptive":
        seconds = 0.04 * 3.0 ** (depth - 10) * 2.6 ** (budget - 3) + 2e-6 * D
        return base + 2e8 * seconds + 200.0 * D * depth, seconds
    b = budget if layers is None or width is None else layers * width
    seconds = 0.13 * (D / 255) ** 2 * (D / 25) ** max(b - 3, 0)
    return base + 1e8 * seconds, seconds


# Measured (numeric alpha, depths 3 to 6, 2 to 4 layers, a busy 2-core machine): building the unrolled
# expression, evaluating and printing it took 40 to 300 microseconds per node of the expression written out
# (``bellman.unrolled_size``); simplifying it for symbolic alpha 2 to 8 ms per node.
UNROLL_SECONDS_PER_NODE = {False: 5e-4, True: 2e-2}


def check_unroll_cost(prior, layers: int, width: int, *, symbolic: bool) -> None:
    """Refuse, before building it, an unrolled recursion whose expression would take longer than the cap
    (one line: the estimate, the cap, the most layers that fit)."""
    from . import bellman

    def seconds(n_layers):
        return 2.0 + UNROLL_SECONDS_PER_NODE[symbolic] * bellman.unrolled_size(prior, n_layers, width)

    need = seconds(layers)
    if not fits_time(need):
        best = largest_fitting("--layers", range(1, layers), lambda n: fits_time(seconds(n)))
        check_time(f"fv derive bellman --unroll at depth {prior.depth} with {layers} layers", need, best)


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
