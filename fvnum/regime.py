"""The regime of a scaling study, chosen by the theory before any training (``studies/scaling/regime.md``).

For every cell of a grid of (depth, alpha, N) the theory curves of loss against budget are computed under the
tokens channel: ``path`` (adaptive, linear keys) and ``top_levels`` (one layer, the prior's top levels) cheaply
everywhere, and on a shortlist the prediction rows of Models A and B under weighted keys
(``best_adaptive_keyed``, ``best_nonadaptive_keyed``; :mod:`fvnum.keys.nonadaptive`). Each curve gets the law test of
:func:`fvnum.laws.law_test` past the dense-measurement drop. A cell is *separating* when the adaptive curves
are judged geometric and the one-layer curves a power law, over budgets whose largest is below the depth (so
the path law is not ended by the tree's last level). Among separating cells the cheapest to train wins (the
cost of a training step grows with ``N``), then the larger separation (chi2 differences).
"""
from __future__ import annotations
from fvnum.options import KeyedSearch

import itertools
import time
from dataclasses import dataclass, field

from fvnum.estimate import Estimate
from fvnum.laws import DEFAULT_CUT, law_test
from fvnum.model_rows import model as model_of
from fvsym.errors import InputError

ADAPTIVE = ("path", "best_adaptive_keyed")
ONE_LAYER = ("top_levels", "best_nonadaptive_keyed")
FLOOR = 0.01  # relative model error allowed to every theory point (exact values have stderr 0)
# The agreement the study asks of each model at every budget: trained seed mean over its prediction row
# (fvnum.theory.prediction_row) inside the band the model names (its ``band``, fvnum.model_rows). A model held to a
# searched row (the best policy or design found under its key family: Models A and B) is ``searched``, one held to
# an exact theory (Model C, the exact linear theory) ``exact``.
AGREEMENT = {"searched": (0.8, 1.25), "exact": (0.95, 1.05)}


def band(model: str) -> tuple[float, float]:
    """``(low, high)``: the band of :data:`AGREEMENT` the registered model ``model`` names."""
    return AGREEMENT[model_of(model).band]


def agrees(model: str, ratio: float) -> bool:
    """Whether trained / predicted ``ratio`` of the registered model ``model`` lies in its band (:func:`band`)."""
    lo, hi = band(model)
    return lo <= ratio <= hi


@dataclass(frozen=True)
class Regime:
    """One cell of the scan: its curves (name -> one ``Estimate`` per budget), their law tests, and whether the
    cell separates the laws."""

    depth: int
    alpha: float
    n_tokens: int
    budgets: tuple[int, ...]
    curves: dict
    tests: dict
    seconds: float
    s2: float = 0.01
    cut: int = DEFAULT_CUT

    @property
    def separating(self) -> bool:
        adaptive = [n for n in ADAPTIVE if n in self.tests]
        one_layer = [n for n in ONE_LAYER if n in self.tests]
        return (max(self.budgets) < self.depth and bool(adaptive) and bool(one_layer)
                and all(self.tests[n].verdict == "exponential" for n in adaptive)
                and all(self.tests[n].verdict == "power" for n in one_layer))

    @property
    def separation(self) -> float:
        """The smallest chi2 margin by which a curve's predicted law wins (exponential: delta; power: -delta)."""
        margins = [self.tests[n].delta for n in ADAPTIVE if n in self.tests]
        margins += [-self.tests[n].delta for n in ONE_LAYER if n in self.tests]
        return min(margins) if margins else float("-inf")

    def to_dict(self) -> dict:
        return {"depth": self.depth, "alpha": self.alpha, "n_tokens": self.n_tokens, "s2": self.s2,
                "budgets": list(self.budgets), "cut": self.cut, "seconds": self.seconds,
                "separating": self.separating, "separation": self.separation,
                "curves": {n: [e.to_dict() for e in es] for n, es in self.curves.items()},
                "tests": {n: t.to_dict() for n, t in self.tests.items()}}

    def __repr__(self) -> str:
        verdicts = ", ".join(f"{n} {t.verdict}" for n, t in self.tests.items())
        return (f"Regime(depth {self.depth}, alpha {self.alpha:g}, N {self.n_tokens}, budgets "
                f"{self.budgets[0]}..{self.budgets[-1]}: {verdicts}; separating {self.separating})")


def tree_prior(depth: int, alpha=None, scales=None):
    """The tree prior of a cell: ``alpha`` (a number, read as an exact fraction) or general ``scales``
    (variances ``a_k^2`` given as exact fractions, e.g. ``(1, 1/2, 1/4, 1/4)``)."""
    from fractions import Fraction

    import sympy as sp

    from fvsym.priors import TreePrior

    if scales is not None:
        return TreePrior(depth, scales=[sp.sqrt(sp.Rational(str(Fraction(v).limit_denominator(10**6))))
                                        for v in scales])
    return TreePrior(depth, str(Fraction(alpha).limit_denominator(1000)))


def tail_geometric_variances(depth: int, alpha) -> tuple:
    """Level variances whose noiseless ``path`` loss is exactly geometric up to ``B = depth - 1``: ``alpha^(k-1)``
    for levels ``k < depth`` and ``alpha^(depth - 2)`` (the previous level's) for the last level, so that the
    tail sum after ``B`` levels is ``alpha^B / (1 - alpha)`` times a constant with no truncation term; the
    scales stay non-increasing for ``alpha <= 1/2``."""
    from fractions import Fraction

    a = Fraction(alpha).limit_denominator(1000)
    if not 0 < a <= Fraction(1, 2):
        raise InputError(f"tail-geometric scales need alpha in (0, 1/2], got {alpha!r}")
    return tuple(a ** (k - 1) for k in range(1, depth)) + (a ** (depth - 2),)


def theory_curves(depth: int, alpha, n_tokens: int, budgets, *, scales=None, keyed: bool = False, s2: float = 0.01,
                  samples: int = 20_000, keyed_samples: int = 1000, seed: int = 0) -> dict:
    """Loss against budget under the tokens channel: ``path`` and ``top_levels`` (``samples`` Monte Carlo
    samples each, common seed), and with ``keyed`` the weighted-key prediction rows of Models A and B."""
    from fvnum.mc.channels import tokens
    from fvnum.policies.registry import loss_mc

    prior = tree_prior(depth, alpha, scales)
    budgets = tuple(int(b) for b in budgets)
    kw = dict(samples=samples, seed=seed)
    channel = tokens(n_tokens, s2)
    curves = {"path": [loss_mc(prior, "path", b, channel, **kw) for b in budgets],
              "top_levels": [loss_mc(prior, "top_levels", b, channel, **kw) for b in budgets]}
    if keyed:
        from fvnum.keys.nonadaptive import best_nonadaptive_keyed
        from fvnum.keys.adaptive import adaptive_keyed_losses

        weighted = tokens(n_tokens, s2, keys="weighted")
        first = best_nonadaptive_keyed(prior, 1, weighted, seed=seed)
        found = adaptive_keyed_losses(prior, max(budgets), weighted, samples=keyed_samples, seed=seed,
                                      search=KeyedSearch(first=first))
        curves["best_adaptive_keyed"] = [found[b - 1].estimate for b in budgets]
        one = [first if b == 1 else None for b in budgets]
        for i, b in enumerate(budgets):
            if one[i] is None:
                one[i] = best_nonadaptive_keyed(prior, b, weighted, samples=2 * keyed_samples, seed=seed)
        curves["best_nonadaptive_keyed"] = [r.estimate for r in one]
    return curves


def assess(depth: int, alpha, n_tokens: int, budgets, curves: dict, *, s2: float = 0.01, cut: int = DEFAULT_CUT,
           seconds: float = 0.0, floor: float = FLOOR) -> Regime:
    """The law test of every curve (relative ``floor``, default :data:`FLOOR`) and the cell's :class:`Regime`."""
    budgets = tuple(int(b) for b in budgets)
    tests = {}
    for name, ests in curves.items():
        vals = [max(float(e.value), 1e-300) for e in ests]
        tests[name] = law_test(budgets, vals, stderr=[float(e.stderr) for e in ests], cut=cut, floor=floor)
    return Regime(int(depth), float(alpha), int(n_tokens), budgets, dict(curves), tests, float(seconds), s2, cut)


def scan(depths, alphas, n_tokens, budgets, *, keyed_samples: int | None = None, s2: float = 0.01,
         cut: int = DEFAULT_CUT, samples: int = 20_000, seed: int = 0, log=None) -> list:
    """Every cell of ``depths x alphas x n_tokens`` over ``budgets``: a list of :class:`Regime`; with
    ``keyed_samples``, the keyed rows of :func:`theory_curves` too, on that many samples."""
    out = []
    for depth, alpha, n in itertools.product(depths, alphas, n_tokens):
        start = time.time()
        keyed = {} if keyed_samples is None else {"keyed": True, "keyed_samples": keyed_samples}
        curves = theory_curves(depth, alpha, n, budgets, s2=s2, samples=samples, seed=seed, **keyed)
        out.append(assess(depth, alpha, n, budgets, curves, s2=s2, cut=cut, seconds=time.time() - start))
        if log is not None:
            log(repr(out[-1]))
    return out


def predicted_powers(budgets, curves: dict, *, spread, n_seeds: int = 3, replicates: int = 1000, floor: float = 0.0,
                     cut: int = DEFAULT_CUT, seed: int = 0) -> dict:
    """The power of the study's law test for each curve of ``curves`` (name -> one loss, or one ``Estimate``, per
    budget) whose law the cell predicts: ``exponential`` for :data:`ADAPTIVE` curves, ``power`` for
    :data:`ONE_LAYER` ones (:func:`fvnum.laws.law_power`, trained losses scattered around the curve with
    ``spread``, the seed SD of log loss: one number, or a dict ``{"adaptive": .., "one_layer": ..}``, e.g. the
    measured spreads of Models A and B). Other curves are left out. Returns name -> ``LawPower``."""
    from fvnum.laws import law_power

    if isinstance(spread, dict):
        if set(spread) != {"adaptive", "one_layer"}:
            raise InputError(f"spread must be a number or a dict with keys 'adaptive' and 'one_layer', got {spread!r}")
        spreads = spread
    else:
        spreads = {"adaptive": spread, "one_layer": spread}
    out = {}
    for name, values in curves.items():
        kind = "adaptive" if name in ADAPTIVE else "one_layer" if name in ONE_LAYER else None
        if kind is None:
            continue
        vals = [float(getattr(v, "value", v)) for v in values]
        out[name] = law_power(budgets, vals, spread=spreads[kind], n_seeds=n_seeds,
                              target="exponential" if kind == "adaptive" else "power", replicates=replicates,
                              floor=floor, cut=cut, seed=seed)
    return out


def choose(regimes) -> Regime | None:
    """The separating regime cheapest to train (smallest ``N``, then smallest depth), then the one with the
    largest separation; None when no cell separates the laws."""
    good = [r for r in regimes if r.separating]
    if not good:
        return None
    return min(good, key=lambda r: (r.n_tokens, r.depth, -r.separation))


__all__ = ["ADAPTIVE", "AGREEMENT", "agrees", "band", "ONE_LAYER", "Regime", "assess", "choose", "predicted_powers", "scan",
           "theory_curves"]
