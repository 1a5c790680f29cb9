"""Test theorems of the theory on random instances with hypothesis, as a script (THEORY.md sections 3, 5, 6).

    python examples/02_theorem_with_hypothesis.py                                  # the true theorems
    python examples/02_theorem_with_hypothesis.py --n_examples=100 --seed=3
    python examples/02_theorem_with_hypothesis.py --theorems=path_is_optimal       # a false claim: exit 1

Each theorem is a claim about one random example (drawn by a hypothesis strategy) computed exactly with
``fvsym``; hypothesis draws ``n_examples`` of them and, when the claim fails, shrinks the failure to a
minimal counter-example. The script prints how many examples passed, and exits with code 1 on a
counter-example. Outputs in ``runs/examples/02_theorem_with_hypothesis`` (``config.json``,
``results.json``). About 10 s on the defaults (Theorem G1 runs a numerical optimisation per example).

The theorems:
- ``gaussian_depth`` (Theorem G1): for a Gaussian prior with a random diagonal covariance, the deep
  optimum (``L = B`` layers of width 1, found by optimising the sequential problem) equals the shallow
  one (``L = 1``, exact water-filling);
- ``optimal_le_path``: noiseless tree prior, random rational ``alpha``, depth and budget: the exact
  Bellman optimum is at most the ``path`` loss, which is at most ``E||theta||^2``;
- ``adaptive_le_nonadaptive``: the Bellman optimum with ``L = B`` layers is at most the best fixed
  design (``optimal_nonadaptive``, ``L = 1``, ``d = B``);
- ``path_is_optimal``: the FALSE claim ``path <= optimum`` (THEORY.md section 6: a zero reading is
  informative, so the optimum beats path), to show what a counter-example looks like.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass
from fractions import Fraction

import _cli
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st

from fvnum.priors import gaussian as fvnum_gaussian
from fvsym import GaussianPrior, TreePrior, bellman, tree

G1_RELATIVE_TOLERANCE = 1e-6  # the deep optimum is a BFGS result in floating point; the shallow one is exact


# --- random examples --------------------------------------------------------------------------------
def spectra():
    """A diagonal covariance (1 to 4 rational eigenvalues in [1/10, 3]), a budget 1..4, a noise tau."""
    eigenvalue = st.fractions(min_value=Fraction(1, 10), max_value=3, max_denominator=10)
    return st.fixed_dictionaries({
        "eigenvalues": st.lists(eigenvalue, min_size=1, max_size=4),
        "budget": st.integers(1, 4),
        "tau": st.fractions(min_value=Fraction(1, 10), max_value=1, max_denominator=10),
    })


def trees():
    """A tree of depth 2..4, a budget 1..depth, a rational alpha in [1/20, 19/20]."""
    alpha = st.fractions(min_value=Fraction(1, 20), max_value=Fraction(19, 20), max_denominator=20)
    return st.integers(2, 4).flatmap(
        lambda K: st.fixed_dictionaries({"depth": st.just(K), "budget": st.integers(1, K), "alpha": alpha})
    )


# --- the claims: example -> (holds, numbers) ----------------------------------------------------------
def gaussian_depth(ex, seed: int):
    prior = GaussianPrior(sp.diag(*[sp.Rational(c.numerator, c.denominator) for c in ex["eigenvalues"]]))
    tau = sp.Rational(ex["tau"].numerator, ex["tau"].denominator)
    result = fvnum_gaussian.numeric_deep_shallow_gap(prior, ex["budget"], tau, seed=seed)
    shallow = float(result.shallow)
    holds = abs(result.deep - shallow) <= G1_RELATIVE_TOLERANCE * (1 + shallow)
    return holds, {"deep": result.deep, "shallow": str(result.shallow), "shallow_float": shallow}


def _tree_numbers(ex):
    alpha = f"{ex['alpha'].numerator}/{ex['alpha'].denominator}"
    prior = TreePrior(ex["depth"], alpha)
    return {
        "optimal": bellman.solve(prior, ex["budget"], 1).loss,
        "path": tree.tree_loss(ex["depth"], ex["budget"], "path", alpha=alpha).expr,
        "optimal_nonadaptive": bellman.optimal_nonadaptive(prior, ex["budget"])[0],
        "second_moment": prior.second_moment,
    }


def _exact(numbers: dict) -> dict:
    return {k: str(v) for k, v in numbers.items()}


def optimal_le_path(ex, seed: int):
    n = _tree_numbers(ex)
    return bool(n["optimal"] <= n["path"] <= n["second_moment"]), _exact(n)


def adaptive_le_nonadaptive(ex, seed: int):
    n = _tree_numbers(ex)
    return bool(n["optimal"] <= n["optimal_nonadaptive"]), _exact(n)


def path_is_optimal(ex, seed: int):
    n = _tree_numbers(ex)
    return bool(n["path"] <= n["optimal"]), _exact(n)


THEOREMS = {
    "gaussian_depth": ("Theorem G1: deep optimum == shallow optimum (random Gaussian spectra)", spectra,
                       gaussian_depth),
    "optimal_le_path": ("Bellman optimum <= path <= E||theta||^2 (tree, noiseless, random alpha)", trees,
                        optimal_le_path),
    "adaptive_le_nonadaptive": ("Bellman optimum (L = B) <= optimal_nonadaptive (L = 1)", trees,
                                adaptive_le_nonadaptive),
    "path_is_optimal": ("FALSE CLAIM: path <= Bellman optimum", trees, path_is_optimal),
}


@dataclass(frozen=True)
class Config:
    """Which ``theorems`` to test (names of THEOREMS), on ``n_examples`` random examples each, drawn
    reproducibly from ``seed``."""

    theorems: tuple[str, ...] = ("gaussian_depth", "optimal_le_path", "adaptive_le_nonadaptive")
    n_examples: int = 50
    seed: int = 0
    out: str = _cli.default_out("02_theorem_with_hypothesis")

    def __post_init__(self):
        unknown = [t for t in self.theorems if t not in THEOREMS]
        if unknown or not self.theorems:
            raise ValueError(f"unknown theorem {unknown[0] if unknown else '(none given)'!r}; "
                             f"choose from {', '.join(THEOREMS)}")
        if self.n_examples < 1:
            raise ValueError(f"n_examples must be >= 1, got {self.n_examples}")
        if self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")


def _jsonable(ex: dict) -> dict:
    return {k: (str(v) if isinstance(v, Fraction) else [str(x) for x in v] if isinstance(v, list) else v)
            for k, v in ex.items()}


class CounterExample(AssertionError):
    pass


def check(strategy, claim, *, n_examples: int, seed: int) -> dict:
    """Run ``claim`` on ``n_examples`` examples of ``strategy`` with hypothesis. Returns ``passed`` (examples
    that held before the first failure), ``counterexample`` (the shrunk one with its numbers, or None)."""
    record = {"passed": 0, "counterexample": None}

    @hypothesis_seed(seed)
    @settings(max_examples=n_examples, deadline=None, database=None, print_blob=False,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large])
    @given(strategy)
    def property_holds(example):
        holds, numbers = claim(example, seed)
        if not holds:
            # hypothesis shrinks: the last failing call is the minimal counter-example
            record["counterexample"] = {"example": _jsonable(example), "numbers": numbers}
            raise CounterExample(f"{_jsonable(example)}: {numbers}")
        if record["counterexample"] is None:
            record["passed"] += 1

    try:
        property_holds()
    except CounterExample:
        pass
    return record


def all_hold(results: dict) -> bool:
    """The exit status of the script: 0 when every theorem held, 1 on a counter-example."""
    return results["all_hold"]


def main(cfg: Config) -> dict:
    clock = _cli.Clock()
    _cli.prepare(cfg)
    out = {}
    for name in cfg.theorems:
        statement, strategy, claim = THEOREMS[name]
        t = _cli.Clock()
        r = check(strategy(), claim, n_examples=cfg.n_examples, seed=cfg.seed)
        out[name] = {"statement": statement, **r, "holds": r["counterexample"] is None, "seconds": t()}
        if r["counterexample"] is None:
            print(f"[pass] {statement}: {r['passed']} examples passed ({out[name]['seconds']:.1f} s)")
        else:
            c = r["counterexample"]
            print(f"[FAIL] {statement}: counter-example after {r['passed']} passing examples\n"
                  f"       example {c['example']}\n       numbers {c['numbers']}")
    results = {"theorems": out, "all_hold": all(v["holds"] for v in out.values()), "seconds": clock()}
    folder = _cli.save(cfg, results)
    print(f"{'all theorems hold' if results['all_hold'] else 'COUNTER-EXAMPLE FOUND'}; wrote {folder}/ "
          f"in {results['seconds']:.1f} s")
    return results


if __name__ == "__main__":
    sys.exit(_cli.run(main, Config, ok=all_hold))
