"""Scaling laws fitted to loss against budget (the shape the theory predicts, docs/theory.md section 6).

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
from fvsym.errors import InputError

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
        raise InputError(f"budgets and losses must have the same length, got {b.size} and {v.size}")
    if b.size < 3 or np.unique(b).size < 2:
        raise InputError(f"a law needs at least 3 points at 2 or more budgets, got {b.size} at {np.unique(b).size}")
    if np.any(b < 1) or np.any(~np.isfinite(v)) or np.any(v <= 0):
        raise InputError("budgets must be >= 1 and losses finite and positive")
    return b, v


def _t95(dof: int) -> float:
    from scipy import stats

    return float(stats.t.ppf(0.975, dof)) if dof > 0 else math.inf


def fit_law(law: str, budgets, losses) -> LawFit:
    """Fit ``law`` (``exponential`` or ``power``) to points ``(budgets[i], losses[i])``."""
    if law not in LAWS:
        raise InputError(f"unknown law {law!r}; choose one of {', '.join(LAWS)}")
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


# --- the law test: local decay and weighted fits past the dense-measurement drop -----------------------
DEFAULT_CUT = 2  # the first budget of the test (module docstring of law_test)
EVIDENCE = 9.0  # chi-square difference that decides between the laws (about 3 standard deviations)
FIT_P = 0.01  # a law whose fit has a p-value below this does not fit the points


@dataclass(frozen=True)
class Decay:
    """The local decay ``log L(B) - log L(B + 1)`` between ``budget`` and ``budget + 1`` with its 95% interval
    ``ci`` (constant for a geometric law, ``e log(1 + 1/B)`` ~ ``e / B`` for a power law)."""

    budget: int
    value: float
    ci: tuple[float, float]

    def to_dict(self) -> dict:
        return {"budget": self.budget, "value": self.value, "ci": list(self.ci)}


@dataclass(frozen=True)
class LawTest:
    """Which law the points prefer (:func:`law_test`): ``verdict`` is ``exponential``, ``power``, ``can't tell``
    or ``neither`` (no law fits), with the reason. ``fits``: the weighted fit of each law over ``budgets``
    (past ``cut``), ``chi2`` and its p-value ``p`` per law (``dof`` degrees of freedom), ``delta`` =
    chi2(power) - chi2(exponential) (positive: the exponential law fits better), ``decay``: the local decay at
    every budget (the cut's included), ``noise``: how the variance of log loss was found."""

    verdict: str
    reason: str
    cut: int
    budgets: tuple[int, ...]
    fits: dict
    chi2: dict
    p: dict
    dof: int
    delta: float
    decay: tuple[Decay, ...]
    noise: str

    def to_dict(self) -> dict:
        return {"verdict": self.verdict, "reason": self.reason, "cut": self.cut, "budgets": list(self.budgets),
                "fits": {k: f.to_dict() for k, f in self.fits.items()}, "chi2": dict(self.chi2),
                "p": dict(self.p), "dof": self.dof, "delta": self.delta,
                "decay": [d.to_dict() for d in self.decay], "noise": self.noise}

    def __repr__(self) -> str:
        r = self.fits["exponential"].value
        e = self.fits["power"].value
        return (f"LawTest({self.verdict!r}: budgets {self.budgets[0]}..{self.budgets[-1]}, r = {r:.3g}, e = {e:.3g}, "
                f"chi2 exponential {self.chi2['exponential']:.3g}, power {self.chi2['power']:.3g}, dof {self.dof})")


def _grouped(budgets, losses, stderr, floor):
    """Mean log loss per budget, its variance, and the noise's degrees of freedom (None: known variance)."""
    b = np.asarray(budgets, dtype=float).ravel()
    v = np.asarray(losses, dtype=float).ravel()
    if b.shape != v.shape:
        raise InputError(f"budgets and losses must have the same length, got {b.size} and {v.size}")
    if np.any(b < 1) or np.any(b != np.round(b)) or np.any(~np.isfinite(v)) or np.any(v <= 0):
        raise InputError("budgets must be integers >= 1 and losses finite and positive")
    if not (isinstance(floor, (int, float)) and 0 <= floor < 1):
        raise InputError(f"floor must be a relative error in [0, 1), got {floor!r}")
    levels = np.unique(b).astype(int)
    logs = np.log(v)
    mean = np.array([logs[b == k].mean() for k in levels])
    count = np.array([(b == k).sum() for k in levels])
    if stderr is not None:
        se = np.asarray(stderr, dtype=float).ravel()
        if se.shape != v.shape or np.any(se < 0) or np.any(~np.isfinite(se)):
            raise InputError("stderr must be finite, >= 0 and one per loss")
        if np.any(count > 1):
            raise InputError("give either one loss per budget with its stderr, or several seeds per budget")
        var = np.array([(se[b == k] / v[b == k])[0] ** 2 for k in levels]) + floor**2
        if np.any(var <= 0):
            raise InputError("a loss with stderr 0 needs floor > 0 (the relative error to allow)")
        return levels, mean, var, None, f"stderr of each point, relative floor {floor:g}"
    dof = int((count - 1).sum())
    if dof < 1:
        raise InputError("several seeds at some budget are needed to estimate the noise (or pass stderr)")
    pooled = sum(((logs[b == k] - m) ** 2).sum() for k, m in zip(levels, mean)) / dof
    pooled = max(pooled, floor**2)
    return levels, mean, pooled / count, dof, f"seed spread of log loss pooled over budgets ({dof} dof)"


def _weighted_line(x, y, var):
    w = 1 / var
    X = np.stack([np.ones_like(x), x], axis=1)
    cov = np.linalg.inv(X.T @ (X * w[:, None]))
    a, s = cov @ (X.T @ (w * y))
    chi2 = float((w * (y - a - s * x) ** 2).sum())
    return float(a), float(s), float(np.sqrt(cov[1, 1])), chi2


def local_decay(budgets, losses, *, stderr=None, floor: float = 0.0) -> tuple[Decay, ...]:
    """The local decay ``log L(B) - log L(B + 1)`` at every budget ``B`` whose successor is present, with a
    95% interval from the seed spread (several losses per budget) or from ``stderr`` (one per budget)."""
    levels, mean, var, dof, _ = _grouped(budgets, losses, stderr, floor)
    from scipy import stats

    q = float(stats.t.ppf(0.975, dof)) if dof is not None else 1.959963984540054
    out = []
    for i in range(levels.size - 1):
        if levels[i + 1] != levels[i] + 1:
            continue
        d, sd = mean[i] - mean[i + 1], math.sqrt(var[i] + var[i + 1])
        out.append(Decay(int(levels[i]), float(d), (float(d - q * sd), float(d + q * sd))))
    return tuple(out)


def law_test(budgets, losses, *, stderr=None, cut: int = DEFAULT_CUT, floor: float = 0.0) -> LawTest:
    """Is loss against budget geometric (``c r^B``) or a power law (``c B^-e``)? A fair test.

    Both laws are straight lines in ``log L`` (against ``B`` and against ``log B``), so they are fitted by
    weighted least squares to the mean log loss at each budget ``>= cut``, weighted by its variance: the seed
    spread pooled over budgets (several seeds per budget; a chi2 of estimated variance, judged with the F
    distribution) or ``stderr`` (one Monte Carlo value per budget, plus a relative ``floor``). Budgets below
    ``cut`` (default 2) are left out of the fits: the first reading is of the whole context (the top node's
    dense measurement), a drop no law in the budget describes. The verdict: the law whose chi2 is smaller by
    more than :data:`EVIDENCE` wins if it fits (p-value above :data:`FIT_P`); if neither fits, ``neither``;
    else ``can't tell``. The local decay (:func:`local_decay`) is what the figure shows: flat for a geometric
    law, shrinking like ``e / B`` for a power law."""
    from scipy import stats

    if isinstance(cut, bool) or not isinstance(cut, int) or cut < 1:
        raise InputError(f"cut must be an integer budget >= 1, got {cut!r}")
    levels, mean, var, dof, noise = _grouped(budgets, losses, stderr, floor)
    keep = levels >= cut
    if keep.sum() < 4:
        raise InputError(f"the law test needs at least 4 budgets at or past the cut {cut}, got "
                         f"{[int(k) for k in levels[keep]]}")
    x_b, y, v = levels[keep].astype(float), mean[keep], var[keep]
    n = int(keep.sum())
    fits, chi2, p = {}, {}, {}
    q = float(stats.t.ppf(0.975, dof)) if dof is not None else 1.959963984540054
    for law in LAWS:
        x = x_b if law == "exponential" else np.log(x_b)
        a, s, se, c2 = _weighted_line(x, y, v)
        if law == "exponential":
            fits[law] = LawFit(law, "r", math.exp(s), (math.exp(s - q * se), math.exp(s + q * se)), math.exp(a), c2, n)
        else:
            fits[law] = LawFit(law, "e", -s, (-s - q * se, -s + q * se), math.exp(a), c2, n)
        chi2[law] = c2
        p[law] = float(stats.chi2.sf(c2, n - 2) if dof is None else stats.f.sf(c2 / (n - 2), n - 2, dof))
    delta = chi2["power"] - chi2["exponential"]
    ok = {law: p[law] > FIT_P for law in LAWS}
    if delta > EVIDENCE and ok["exponential"]:
        verdict, reason = "exponential", f"chi2 {chi2['exponential']:.3g} against {chi2['power']:.3g} for the power law"
    elif delta < -EVIDENCE and ok["power"]:
        verdict, reason = "power", f"chi2 {chi2['power']:.3g} against {chi2['exponential']:.3g} for the exponential law"
    elif not ok["exponential"] and not ok["power"]:
        verdict, reason = "neither", (f"neither law fits (p {p['exponential']:.2g} exponential, {p['power']:.2g} "
                                      f"power)")
    else:
        verdict, reason = "can't tell", (f"chi2 {chi2['exponential']:.3g} exponential, {chi2['power']:.3g} power: "
                                         f"a difference of {abs(delta):.3g} <= {EVIDENCE:g}, or the better law "
                                         f"does not fit")
    return LawTest(verdict, reason, cut, tuple(int(k) for k in levels[keep]), fits, chi2, p, n - 2, float(delta),
                   local_decay(budgets, losses, stderr=stderr, floor=floor), noise)


# --- the power of the law test for a predicted curve -----------------------------------------------------
VERDICTS = ("exponential", "power", "can't tell", "neither")


@dataclass(frozen=True)
class LawPower:
    """How often the study's law test (:func:`law_test` on seeds as points, as ``bridges.studies.scaling.fit_study`` calls
    it for trained models) reaches each verdict on synthetic replicates of a study whose losses scatter around a
    predicted ``curve`` (:func:`law_power`). ``fractions`` and their binomial standard errors ``stderr`` per
    verdict (:data:`VERDICTS`); ``power`` is the fraction of ``target`` (None without one)."""

    fractions: dict
    stderr: dict
    target: str | None
    replicates: int
    n_seeds: int
    spread: float
    bias: tuple[float, ...]
    budgets: tuple[int, ...]
    curve: tuple[float, ...]
    cut: int
    seed: int
    noise: str
    floor: float = 0.0

    @property
    def power(self) -> float | None:
        return None if self.target is None else self.fractions[self.target]

    def to_dict(self) -> dict:
        return {"fractions": dict(self.fractions), "stderr": dict(self.stderr), "target": self.target,
                "power": self.power, "replicates": self.replicates, "n_seeds": self.n_seeds, "spread": self.spread,
                "bias": list(self.bias), "budgets": list(self.budgets), "curve": list(self.curve), "cut": self.cut,
                "seed": self.seed, "noise": self.noise, "floor": self.floor}

    def __repr__(self) -> str:
        shown = ", ".join(f"{v} {self.fractions[v]:.3f}" for v in VERDICTS)
        return (f"LawPower({shown}; {self.n_seeds} seeds, spread {self.spread:.3g}, {self.replicates} replicates"
                + (f", power of {self.target!r} {self.power:.3f} ± {self.stderr[self.target]:.3f})" if self.target
                   else ")"))


def _whole(name: str, value, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise InputError(f"{name} must be an integer >= {least}, got {value!r}")
    return int(value)


def law_power(budgets, curve, *, spread: float, n_seeds: int = 3, target: str | None = None, bias=0.0,
              replicates: int = 1000, cut: int = DEFAULT_CUT, floor: float = 0.0, seed: int = 0) -> LawPower:
    """The power of the study's law test for a predicted ``curve`` (one loss per budget of ``budgets``, every
    budget of the study, those below ``cut`` included: they enter the pooled seed spread as in the study).

    Each of ``replicates`` synthetic studies draws ``n_seeds`` trained losses per budget,
    ``curve_B (1 + bias_B) exp(spread z)`` with ``z`` standard normal: normal in log loss with standard deviation
    ``spread`` (the seed spread of log loss, about the relative standard deviation of the losses) around the
    log of the biased curve (``bias``: a relative bias, one number or one per budget; a constant one moves
    every point by the same factor and changes no verdict). Each replicate goes through exactly the test the
    study applies to a trained model: ``law_test(budgets repeated per seed, losses, cut=cut)`` (seeds as points,
    their pooled spread as the noise, no floor; ``floor`` > 0: the variant ``law_test(.., floor=floor)``, whose
    pooled seed standard deviation is at least ``floor``). Returns the fraction of each verdict with its binomial
    standard error. ``seed``: the random numbers (one ``np.random.default_rng(seed)`` draw of shape
    ``(replicates, budgets, n_seeds)``), so the same seed gives the same numbers, and two calls that differ only
    in ``spread`` or ``bias`` share their normals."""
    b = np.asarray(budgets, dtype=float).ravel()
    v = np.asarray(curve, dtype=float).ravel()
    if b.size == 0 or np.any(~np.isfinite(b)) or np.any(b < 1) or np.any(b != np.round(b)):
        raise InputError(f"budgets must be integers >= 1, got {list(np.asarray(budgets).ravel())}")
    if np.unique(b).size != b.size:
        raise InputError(f"budgets must be distinct (one curve value each), got {[int(k) for k in b]}")
    if v.shape != b.shape:
        raise InputError(f"curve must have one loss per budget: {b.size} budgets, got {v.size} losses")
    if np.any(~np.isfinite(v)) or np.any(v <= 0):
        raise InputError(f"curve must be finite and positive, got {list(v)}")
    if isinstance(spread, bool) or not isinstance(spread, (int, float, np.floating)) or not (
            math.isfinite(spread) and spread > 0):
        raise InputError(f"spread must be a positive standard deviation of log loss, got {spread!r}")
    n_seeds = _whole("n_seeds", n_seeds, 2)
    replicates = _whole("replicates", replicates, 1)
    cut = _whole("cut", cut, 1)
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor < 1:
        raise InputError(f"floor must be a relative error in [0, 1), got {floor!r}")
    if target is not None and target not in VERDICTS:
        raise InputError(f"target must be one of {', '.join(map(repr, VERDICTS))} or None, got {target!r}")
    if int((b >= cut).sum()) < 4:
        raise InputError(f"the law test needs at least 4 budgets at or past the cut {cut}, got "
                         f"{[int(k) for k in b if k >= cut]}")
    bias_v = np.broadcast_to(np.asarray(bias, dtype=float), b.shape) if np.ndim(bias) == 0 else np.asarray(
        bias, dtype=float).ravel()
    if bias_v.shape != b.shape or np.any(~np.isfinite(bias_v)) or np.any(bias_v <= -1):
        raise InputError(f"bias must be one relative bias > -1 or one per budget ({b.size}), got {bias!r}")
    order = np.argsort(b)
    b, v, bias_v = b[order].astype(int), v[order], bias_v[order]
    z = np.random.default_rng(seed).standard_normal((replicates, b.size, n_seeds))
    centre = np.log(v * (1 + bias_v))[:, None]
    points = np.repeat(b, n_seeds)
    counts = dict.fromkeys(VERDICTS, 0)
    for r in range(replicates):
        losses = np.exp(centre + spread * z[r]).ravel()
        counts[law_test(points, losses, cut=cut, floor=floor).verdict] += 1
    fractions = {k: c / replicates for k, c in counts.items()}
    stderr = {k: math.sqrt(f * (1 - f) / replicates) for k, f in fractions.items()}
    return LawPower(fractions, stderr, target, replicates, n_seeds, float(spread), tuple(float(x) for x in bias_v),
                    tuple(int(k) for k in b), tuple(float(x) for x in v), cut, seed,
                    "normal in log loss (lognormal losses) around log(curve (1 + bias)), sd = spread", float(floor))
