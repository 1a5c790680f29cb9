"""Scaling laws fitted to loss against budget (the shape the theory predicts, THEORY.md section 6).

- ``exponential``: ``loss = c r^B`` (adaptive depth: the path strategy's ``alpha^B / (1 - alpha)``);
- ``power``: ``loss = c B^-e`` (one layer: top levels' ``(B + 1)^(log2 alpha)``).

Both are straight lines after taking logs (in ``B`` and in ``log B``), fitted by least squares to every
observation (each seed is one point, so the seed spread enters the residuals). The 95% confidence interval
of the rate or exponent is the t interval of the slope. Both laws have two parameters, so the one with the
smaller residual sum of squares (in log loss) fits better; ``compare_laws`` also gives the ratio.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

LAWS = ("exponential", "power")


@dataclass(frozen=True)
class LawFit:
    """``law`` (``exponential``: ``loss = c r^B``; ``power``: ``loss = c B^-e``), its rate or exponent
    ``value`` with a 95% interval ``ci``, the prefactor ``c``, the residual sum of squares of log loss
    ``rss`` and the number of points ``n``."""

    law: str
    param: str  # "r" or "e"
    value: float
    ci: tuple[float, float]
    c: float
    rss: float
    n: int

    def to_dict(self) -> dict:
        d = asdict(self)
        d["ci"] = list(self.ci)
        return d

    def __str__(self) -> str:
        form = "c r^B" if self.law == "exponential" else "c B^-e"
        return (f"loss = {form}: {self.param} = {self.value:.3g} (95% CI {self.ci[0]:.3g} .. {self.ci[1]:.3g}), "
                f"c = {self.c:.3g}, RSS(log) = {self.rss:.3g}, n = {self.n}")


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float, float, float]:
    """Least squares ``y = a + b x``: (a, b, standard error of b, residual sum of squares)."""
    n = x.size
    xm, ym = x.mean(), y.mean()
    sxx = float(((x - xm) ** 2).sum())
    b = float(((x - xm) * (y - ym)).sum() / sxx)
    a = float(ym - b * xm)
    rss = float(((y - a - b * x) ** 2).sum())
    se = math.sqrt(rss / (n - 2) / sxx) if n > 2 else math.inf
    return a, b, se, rss


def _points(budgets, losses) -> tuple[np.ndarray, np.ndarray]:
    b = np.asarray(budgets, dtype=float).ravel()
    v = np.asarray(losses, dtype=float).ravel()
    if b.shape != v.shape:
        raise ValueError(f"budgets and losses must have the same length, got {b.size} and {v.size}")
    if b.size < 3 or np.unique(b).size < 2:
        raise ValueError(f"a law needs at least 3 points at 2 or more budgets, got {b.size} at {np.unique(b).size}")
    if np.any(b < 1) or np.any(~np.isfinite(v)) or np.any(v <= 0):
        raise ValueError("budgets must be >= 1 and losses finite and positive")
    return b, v


def _t95(dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, dof)) if dof > 0 else math.inf


def fit_law(law: str, budgets, losses) -> LawFit:
    """Fit ``law`` (``exponential`` or ``power``) to points ``(budgets[i], losses[i])``."""
    if law not in LAWS:
        raise ValueError(f"unknown law {law!r}; choose one of {', '.join(LAWS)}")
    b, v = _points(budgets, losses)
    x = b if law == "exponential" else np.log(b)
    a, slope, se, rss = _line(x, np.log(v))
    t = _t95(b.size - 2)
    if law == "exponential":  # log loss = log c + B log r
        value, ci = math.exp(slope), (math.exp(slope - t * se), math.exp(slope + t * se))
        return LawFit(law, "r", value, ci, math.exp(a), rss, b.size)
    # log loss = log c - e log B
    return LawFit(law, "e", -slope, (-slope - t * se, -slope + t * se), math.exp(a), rss, b.size)


def compare_laws(budgets, losses) -> dict:
    """Both laws fitted to the same points; ``better`` is the one with the smaller residuals (both have
    two parameters), ``rss_ratio`` = RSS(other) / RSS(better) (1: no preference)."""
    fits = {law: fit_law(law, budgets, losses) for law in LAWS}
    better = min(LAWS, key=lambda law: fits[law].rss)
    other = fits[LAWS[1 - LAWS.index(better)]]
    ratio = other.rss / fits[better].rss if fits[better].rss > 0 else math.inf
    return {"fits": {k: f.to_dict() for k, f in fits.items()}, "better": better, "rss_ratio": ratio}
