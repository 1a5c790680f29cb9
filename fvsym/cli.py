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

import json

import sympy as sp

from ._validate import check_alpha, check_int, check_tau

STRATEGIES = ("path", "top_levels", "optimal", "optimal_nonadaptive")
FORMATS = ("text", "latex", "json")


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
    tree.add_argument("--depth", type=int, required=True, help="tree depth K >= 1")
    tree.add_argument("--budget", type=int, required=True, help="budget B = L * d")
    tree.add_argument("--strategy", required=True, choices=STRATEGIES)
    tree.add_argument("--layers", type=int, default=None, help="L (optimal strategy)")
    tree.add_argument("--width", type=int, default=None, help="d (optimal strategy)")
    tree.add_argument("--alpha", default=None, help="scale ratio in (0, 1), e.g. 1/2 (default: symbolic)")
    tree.add_argument("--format", choices=FORMATS, default="text")
    tree.add_argument("--policy", action="store_true",
                      help="also show the optimal policy (decision tree) or design (optimal strategies)")
    tree.set_defaults(func=_tree_loss)

    gauss = quantities.add_parser(
        "gaussian-loss", help="optimal loss for a Gaussian prior (THEORY.md 5)",
        description="Optimal unit-class loss of a Gaussian prior by rank-constrained water-filling.",
    )
    gauss.add_argument("--dim", type=int, default=None, help="D (optional for --cov matched: 2^depth - 1)")
    gauss.add_argument("--budget", type=int, required=True, help="budget B")
    gauss.add_argument("--tau", default=None, help="channel noise >= 0, e.g. 1/2 (default: symbolic)")
    gauss.add_argument("--cov", default="isotropic",
                       help="isotropic (C = I_D, default) or matched (the matched Gaussian of the tree prior)")
    gauss.add_argument("--depth", type=int, default=None, help="tree depth K (--cov matched)")
    gauss.add_argument("--alpha", default=None, help="tree scale ratio (--cov matched; default: symbolic)")
    gauss.add_argument("--format", choices=FORMATS, default="text")
    gauss.set_defaults(func=_gaussian_loss)

    bell = quantities.add_parser(
        "bellman", help="the Bellman recursion as equations (THEORY.md 3)",
        description="The Bellman recursion of the noiseless coordinate class on TreePrior(depth, alpha), "
                    "as sympy equations; --unroll expands it for this tree and evaluates it.",
    )
    bell.add_argument("--depth", type=int, required=True, help="tree depth K >= 1")
    bell.add_argument("--layers", type=int, required=True, help="L >= 1")
    bell.add_argument("--width", type=int, default=1, help="d, nodes read per layer (default 1)")
    bell.add_argument("--alpha", default=None, help="scale ratio in (0, 1) for --unroll (default: symbolic)")
    bell.add_argument("--unroll", action="store_true",
                      help="also expand the recursion for this tree (small trees) and evaluate it")
    bell.add_argument("--format", choices=FORMATS, default="text")
    bell.set_defaults(func=_bellman)


def _tree_loss(args) -> int:
    from .tree import tree_loss

    depth = check_int(args.depth, "depth", minimum=1)
    budget = check_int(args.budget, "budget", minimum=0)
    alpha = None if args.alpha is None else check_alpha(args.alpha)
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
    prior = TreePrior(depth) if alpha is None else TreePrior(depth, alpha)
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
        print(json.dumps(record, indent=2))
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

    if args.strategy not in ("optimal", "optimal_nonadaptive"):
        raise ValueError(f"--policy needs strategy optimal or optimal_nonadaptive, got {args.strategy}")
    if alpha is None:  # symbolic alpha: every piece of the optimum carries its own policy
        return {}
    prior = TreePrior(depth, alpha)
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
        print(json.dumps(record, indent=2))
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
