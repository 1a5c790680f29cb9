"""Derive the losses of the theory in the REPL style: sympy expressions, LaTeX, exact values, the two
scaling laws, the Bellman optimum and its policy tree, the Bellman recursion as equations and its optimum
for every alpha at once, Theorem G1 with a symbolic tau (THEORY.md sections 3, 5, 6).

    python examples/01_derive_losses.py                       # depth 4, budget 2, alpha 1/2
    python examples/01_derive_losses.py --depth=5 --budget=3 --alpha=2/3 --out=runs/examples/mine

Every line printed after ``>>>`` is Python you can type into a REPL: the example evaluates exactly that
text (nothing else) and prints its value, so the transcript is the computation. Outputs in the run
folder (default ``runs/examples/01_derive_losses``): ``transcript.txt``, ``config.json`` and
``results.json`` (every expression as a sympy string and LaTeX, exact values as rational strings).
Finishes in a few seconds.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import _cli

SETUP = "from fractions import Fraction; from fvsym import tree, bellman, gaussian, symbols, TreePrior"


@dataclass(frozen=True)
class Config:
    """Tree prior of depth ``depth`` with ``alpha`` (exact, e.g. 1/2), budget ``budget`` (<= depth, read
    by the path strategy in ``budget`` layers); ``tau`` is the noise of the Gaussian comparison."""

    depth: int = 4
    budget: int = 2
    alpha: str = "1/2"
    tau: str = "1/10"
    out: str = _cli.default_out("01_derive_losses")

    def __post_init__(self):
        if not 1 <= self.depth <= 5:
            raise ValueError(f"depth must lie in 1..5 (the exact Bellman solver stays fast there), got {self.depth}")
        if not 1 <= self.budget <= self.depth:
            raise ValueError(f"budget must lie in 1..depth={self.depth} (the path strategy reads one node per level), "
                             f"got {self.budget}")


class Session:
    """A tiny REPL: ``session(source)`` prints ``>>> source``, runs it in one namespace and prints the
    value of an expression as the interpreter would (its ``repr``); it returns that value."""

    def __init__(self, **namespace):
        self.namespace = dict(namespace)
        self.lines: list[str] = []

    def _print(self, text: str = "") -> None:
        print(text)
        self.lines.append(text)

    def __call__(self, source: str):
        self._print(f">>> {source}")
        try:
            code = compile(source, "<example 01>", "eval")
        except SyntaxError:  # a statement (import, assignment)
            exec(compile(source, "<example 01>", "exec"), self.namespace)
            return None
        value = eval(code, self.namespace)
        if value is not None:
            self._print(repr(value))
        return value

    def let(self, name: str, source: str):
        """``>>> name = source``: evaluate, bind ``name`` in the namespace, return the value."""
        self._print(f">>> {name} = {source}")
        value = self.namespace[name] = eval(compile(source, "<example 01>", "eval"), self.namespace)
        return value

    def show(self, source: str) -> str:
        """``print(source)`` in the transcript (multi-line text such as LaTeX or a policy tree)."""
        self._print(f">>> print({source})")
        text = str(eval(compile(source, "<example 01>", "eval"), self.namespace))
        self._print(text)
        return text

    def comment(self, text: str) -> None:
        self._print()
        self._print(f"# {text}")

    @property
    def transcript(self) -> str:
        return "\n".join(self.lines) + "\n"


def _formula(f) -> dict:
    return {"expr": str(f.expr), "latex": f.latex, "params": [str(p) for p in f.params], "source": f.source}


def main(cfg: Config) -> dict:
    clock = _cli.Clock()
    _cli.prepare(cfg)
    s = Session()
    s(SETUP)
    s(f"depth, budget, alpha, tau = {cfg.depth}, {cfg.budget}, {cfg.alpha!r}, {cfg.tau!r}")

    s.comment("THEORY.md section 6: the path strategy, one node per layer, noiseless (symbolic in alpha, K, B)")
    path = s.let("f", "tree.path_loss()")
    s("f.expr")
    s.show("f.latex")
    path_exact = s("f.exact(alpha=alpha, K=depth, B=budget)")
    path_numpy = s("f(float(Fraction(alpha)), depth, budget)")  # the numpy view
    s("f.source")

    s.comment("the top-levels design (every node of levels 1..j, B = 2^j - 1) and E||theta||^2")
    top = s("tree.top_levels_loss().expr")
    moment = s("tree.second_moment().exact(alpha=alpha, K=depth)")
    top_exact = s("tree.tree_loss(depth, budget, 'top_levels', alpha=alpha).expr")

    s.comment("scaling laws (K -> oo): exponential in B for path, a power law for top_levels")
    path_rate = s("tree.path_loss_rate().expr")
    top_rate = s("tree.top_levels_rate().expr")
    exponents = s("tree.scaling_exponents()")

    s.comment("THEORY.md section 3: the exact Bellman optimum with L = budget layers of width 1; it beats path\n"
              "# (noiseless, a zero reading is informative: the path avoids that node)")
    s.let("prior", "TreePrior(depth, alpha)")
    solution = s.let("sol", "bellman.solve(prior, layers=budget, width=1)")
    optimal = s("sol.loss")
    policy_text = s.show("sol.policy")
    nonadaptive, design = s("bellman.optimal_nonadaptive(prior, budget)")

    s.comment("THEORY.md section 3 as symbols: the recursion as equations, the optimum for every alpha at once\n"
              "# (certified pieces, each with its policy), the domain every formula carries")
    s.let("eqs", "bellman.recursion(TreePrior(depth), layers=budget, width=1)")
    s.show("bellman.recursion_latex(eqs)")
    unrolled_ok = s("bellman.unroll(prior, budget, 1).doit() == sol.loss") if cfg.depth <= 3 else None
    symbolic = s.let("g", "tree.tree_loss(depth, budget, 'optimal')")
    s("g.expr")
    s("[(p.lower, p.upper) for p in g.pieces]")
    s("g.expr.subs(g.params[0], Fraction(alpha)) == sol.loss")
    s("tree.path_loss().conditions")

    s.comment("THEORY.md section 5: the Gaussian side (water-filling), isotropic and matched to the tree")
    iso = s("gaussian.isotropic_loss().expr")
    matched = s("gaussian.gaussian_loss(None, budget, tau=tau, cov='matched', depth=depth, alpha=alpha).expr")
    g1 = s("gaussian.deep_shallow_gap(gaussian.GaussianPrior.isotropic(2), 2, symbols.tau)")

    ns = s.namespace
    results = {
        "formulas": {
            "path_loss": _formula(path),
            "top_levels_loss": _formula(ns["tree"].top_levels_loss()),
            "second_moment": _formula(ns["tree"].second_moment()),
            "path_loss_rate": _formula(ns["tree"].path_loss_rate()),
            "top_levels_rate": _formula(ns["tree"].top_levels_rate()),
            "isotropic_loss": _formula(ns["gaussian"].isotropic_loss()),
        },
        "top_levels_expr": str(top),
        "rates": {"path": str(path_rate), "top_levels": str(top_rate)},
        "scaling_exponents": {k: str(v) for k, v in exponents.items()},
        "exact": {
            "second_moment": str(moment), "path": str(path_exact), "top_levels": str(top_exact),
            "optimal": str(optimal), "optimal_nonadaptive": str(nonadaptive),
            "gaussian_matched_optimum": str(matched), "gaussian_isotropic": str(iso),
        },
        "float": {
            "second_moment": float(moment), "path": float(path_exact), "top_levels": float(top_exact),
            "optimal": float(optimal), "optimal_nonadaptive": float(nonadaptive),
            "gaussian_matched_optimum": float(matched),
        },
        "numpy_view": {"path": float(path_numpy)},
        "bellman": {"loss": str(optimal), "policy": solution.policy.to_dict(), "policy_text": policy_text,
                    "n_policy_nodes": solution.policy.n_policy_nodes, "n_states": solution.n_states},
        "optimal_nonadaptive_design": [int(n) for n in design],
        "symbolic": {
            "recursion": [str(e) for e in ns["eqs"]],
            "recursion_latex": ns["bellman"].recursion_latex(ns["eqs"]),
            "unrolled_equals_solve": unrolled_ok,
            "optimal_in_alpha": str(symbolic.expr),
            "pieces": [p.to_dict() for p in symbolic.pieces],
            "g1": g1.to_dict(),
        },
    }
    results["seconds"] = clock()
    folder = _cli.save(cfg, results, {"transcript.txt": s.transcript})
    print(f"\nwrote {folder}/ (transcript.txt, config.json, results.json) in {results['seconds']:.1f} s")
    return results


if __name__ == "__main__":
    sys.exit(_cli.run(main, Config))
