"""The decided tests of the scaling study (studies/scaling/regime.md, "The decided tests"): fixed rules, written
with their power before they are applied, that say ``pass`` or ``fail`` of trained models against their predictions.

Inputs are per model the trained losses by budget (one per seed) and its prediction row by budget (value and Monte
Carlo standard error). The seed spread of a model is the standard deviation of log loss pooled over its budgets (the
mean of the per-budget variances, ``sum(n_B - 1)`` degrees of freedom), as :func:`fvnum.laws.law_test` pools it.

- ``band``: the seed mean lies in ``[0.8, 1.25]`` of the prediction (:data:`BAND`) at every budget of the model.
- ``decay``: one-sided, the adaptive model's local decay ``d(B) = log L(B) - log L(B+1)`` (``log L``: the seed mean
  of log loss) exceeds the one-layer model's at every budget ``B >= cut`` where both have ``B`` and ``B + 1``:
  ``(d_a - d_o) / se > t_(1 - LEVEL)`` at each such budget (an intersection-union test: its size is at most
  ``LEVEL``), ``se`` from the two pooled spreads (``Var d = 2 sigma^2 / n``), Welch-Satterthwaite dof.
- ``ratio``: the log ratio ``log L_a(B) - log L_o(B)`` falls with the budget as the predictions' log ratio does:
  its least-squares slope over the shared budgets ``>= cut`` is negative (one-sided at ``LEVEL``) and differs from
  the predictions' slope by less than ``t_(1 - LEVEL/2)`` combined standard errors (seeds and Monte Carlo).

``power`` of each test (:func:`decided_power`): the fraction of synthetic studies that pass when every model sits on
its prediction (the true curve drawn around the computed prediction with its Monte Carlo error, the seeds around the
true curve, normal in log loss with the planning spread), each replicate going through exactly the rule above;
``band`` also reports how often it fails when one budget is ``1.5 x`` off (:data:`BAND_ALTERNATIVE`).
"""
from __future__ import annotations

import math

import numpy as np
from fvsym.errors import InputError

BAND = (0.8, 1.25)
LEVEL = 0.05
BAND_ALTERNATIVE = 1.5  # band's power against one budget this far above its prediction (the largest budget)
TESTS = ("band", "decay", "ratio")
MAX_REPLICATES = 20_000  # about 5 ms each for three models of six budgets: under two minutes


def _t(q: float, dof: float) -> float:
    from scipy.stats import t

    return float(t.ppf(q, dof))


def _check_shape(losses, predictions) -> None:
    """One line where ``losses`` is not a dict model -> budget -> losses or ``predictions`` not a dict."""
    if not isinstance(losses, dict) or not all(isinstance(v, dict) for v in losses.values()) \
            or not isinstance(predictions, dict):
        raise InputError(f"losses must be a dict model -> budget -> losses (one per seed) and predictions a dict "
                         f"model -> budget -> (value, stderr), got {losses!r:.60} and {predictions!r:.60}")


def _points(name: str, losses: dict) -> dict[int, np.ndarray]:
    if not isinstance(losses, dict) or not losses:
        raise InputError(f"{name}: the trained losses must be a dict budget -> losses (one per seed), got "
                         f"{losses!r:.60}")
    out = {}
    for b, vals in losses.items():
        v = np.asarray(vals, dtype=float).ravel()
        if v.size == 0 or np.any(~np.isfinite(v)) or np.any(v <= 0):
            raise InputError(f"{name}: losses at budget {b} must be finite and positive, got {list(v)}")
        out[int(b)] = v
    return dict(sorted(out.items()))


def _prediction(name: str, pred: dict, budgets) -> dict[int, tuple[float, float]]:
    out = {}
    for b in budgets:
        entry = pred.get(b, pred.get(str(b))) if isinstance(pred, dict) else None
        if entry is None:
            raise InputError(f"{name}: no prediction at budget {b}")
        value, se = (entry, 0.0) if np.ndim(entry) == 0 else (entry[0], entry[1])
        if not (math.isfinite(value) and value > 0 and math.isfinite(se) and se >= 0):
            raise InputError(f"{name}: the prediction at budget {b} must be a positive value with a stderr >= 0, "
                             f"got {entry!r}")
        out[b] = (float(value), float(se))
    return out


def pooled_spread(points: dict[int, np.ndarray]) -> tuple[float, int]:
    """(sigma, dof): the standard deviation of log loss pooled over the budgets with two seeds or more."""
    var, dof = [], 0
    for v in points.values():
        if v.size > 1:
            var.append(np.var(np.log(v), ddof=1))
            dof += v.size - 1
    if not var:
        raise InputError("the decided tests need two seeds at one budget at least (a seed spread)")
    return float(math.sqrt(np.mean(var))), dof


def _welch(va: float, na: int, vo: float, no: int) -> float:
    num = (va + vo) ** 2
    den = (va ** 2 / max(na, 1)) + (vo ** 2 / max(no, 1))
    return num / den if den > 0 else float(na + no)


def band_test(points, prediction, band=BAND) -> dict:
    """``band`` of one model (module docstring): per budget the ratio seed mean / prediction."""
    lo, hi = band
    rows = {b: float(np.mean(v)) / prediction[b][0] for b, v in points.items()}
    return {"verdict": "pass" if all(lo <= r <= hi for r in rows.values()) else "fail",
            "ratios": {str(b): r for b, r in rows.items()}, "band": [lo, hi]}


def _log_means(points):
    return {b: float(np.mean(np.log(v))) for b, v in points.items()}


def decay_test(pa, pb, cut: int, level: float = LEVEL) -> dict:
    """``decay`` of an adaptive model's points ``pa`` against a one-layer model's ``pb`` (module docstring)."""
    (sa, fa), (so, fo) = pooled_spread(pa), pooled_spread(pb)
    ma, mo = _log_means(pa), _log_means(pb)
    rows = {}
    for b in sorted(set(pa) & set(pb)):
        if b < cut or b + 1 not in pa or b + 1 not in pb:
            continue
        da, do = ma[b] - ma[b + 1], mo[b] - mo[b + 1]
        va = sa ** 2 * (1 / pa[b].size + 1 / pa[b + 1].size)
        vo = so ** 2 * (1 / pb[b].size + 1 / pb[b + 1].size)
        se = math.sqrt(va + vo)
        dof = _welch(va, fa, vo, fo)
        rows[str(b)] = {"decay_a": da, "decay_o": do, "difference": da - do, "se": se, "dof": dof,
                        "t": (da - do) / se if se > 0 else math.inf, "critical": _t(1 - level, dof)}
    if not rows:
        raise InputError(f"decay: no budget >= {cut} where both models have B and B + 1")
    ok = all(r["t"] > r["critical"] for r in rows.values())
    return {"verdict": "pass" if ok else "fail", "budgets": rows, "level": level}


def _slope_weights(x: np.ndarray, var: np.ndarray) -> np.ndarray:
    """c with ``slope = c @ y``: the weighted least-squares slope (weights ``1 / var``) as a linear map."""
    w = 1 / var
    xm = np.sum(w * x) / np.sum(w)
    return w * (x - xm) / np.sum(w * (x - xm) ** 2)


def ratio_test(pa, pred_a, pb, pred_b, cut: int, level: float = LEVEL) -> dict:
    """``ratio`` of an adaptive model against a one-layer model (module docstring): the same weighted slope of the
    trained and of the predicted log ratios, each with its standard error."""
    (sa, fa), (so, fo) = pooled_spread(pa), pooled_spread(pb)
    ma, mo = _log_means(pa), _log_means(pb)
    shared = [b for b in sorted(set(pa) & set(pb)) if b >= cut]
    if len(shared) < 3:
        raise InputError(f"ratio: fewer than 3 shared budgets >= {cut} ({shared}): no slope with an error")
    x = np.array(shared, dtype=float)
    y = np.array([ma[b] - mo[b] for b in shared])
    var = np.array([sa ** 2 / pa[b].size + so ** 2 / pb[b].size for b in shared])
    yp = np.array([math.log(pred_a[b][0] / pred_b[b][0]) for b in shared])
    varp = np.array([(pred_a[b][1] / pred_a[b][0]) ** 2 + (pred_b[b][1] / pred_b[b][0]) ** 2 for b in shared])
    c = _slope_weights(x, var)
    s, se = float(c @ y), float(math.sqrt(c ** 2 @ var))
    sp, sep = float(c @ yp), float(math.sqrt(c ** 2 @ varp))
    dof = _welch(sa ** 2 * float(np.mean([1 / pa[b].size for b in shared])), fa,
                 so ** 2 * float(np.mean([1 / pb[b].size for b in shared])), fo)
    falls = s / se < -_t(1 - level, dof)
    agrees = abs(s - sp) <= _t(1 - level / 2, dof) * math.sqrt(se ** 2 + sep ** 2)
    return {"verdict": "pass" if falls and agrees else "fail", "budgets": shared, "slope": s, "slope_se": se,
            "predicted_slope": sp, "predicted_slope_se": sep, "dof": dof, "falls": bool(falls),
            "agrees": bool(agrees), "level": level}


def apply_tests(losses: dict, predictions: dict, *, adaptive, one_layer, cut: int = 2, reference: str | None = None
                ) -> dict:
    """Every decided test on trained ``losses`` (model -> budget -> losses by seed) against ``predictions`` (model
    -> budget -> (value, stderr)). ``adaptive`` and ``one_layer`` name the models of each kind; ``decay`` and
    ``ratio`` of an adaptive model are taken against ``reference`` (default the first one-layer model), those of a
    one-layer model against the first adaptive model. Returns ``{test: {model: result}}`` (each with ``verdict``
    and ``pair`` where two models enter; ``verdict`` "not run" with the reason where the models have too few
    budgets or seeds for the test)."""
    _check_shape(losses, predictions)
    pts = {m: _points(m, v) for m, v in losses.items()}
    preds = {m: _prediction(m, predictions.get(m, {}), pts[m]) for m in pts}
    ref = reference or one_layer[0]
    out = {t: {} for t in TESTS}
    for m in pts:
        out["band"][m] = band_test(pts[m], preds[m])
    for m in pts:
        if m in adaptive and ref in pts:
            pair = (m, ref)
        elif m in one_layer and adaptive and adaptive[0] in pts:
            pair = (adaptive[0], m)
        else:
            continue
        a, o = pair
        for test, run in (("decay", lambda: decay_test(pts[a], pts[o], cut)),
                          ("ratio", lambda: ratio_test(pts[a], preds[a], pts[o], preds[o], cut))):
            try:
                out[test][m] = {"pair": list(pair), **run()}
            except InputError as exc:  # too few budgets or seeds for this test
                out[test][m] = {"pair": list(pair), "verdict": "not run", "refused": str(exc)}
    return out


def decided_power(predictions: dict, budgets: dict, spreads: dict, n_seeds: dict, *, adaptive, one_layer,
                  cut: int = 2, reference: str | None = None, replicates: int = 2000, seed: int = 0) -> dict:
    """The power of every decided test (module docstring): ``{test: {model: {"power", "stderr"}}}``, ``band`` with
    ``power_against`` (one budget :data:`BAND_ALTERNATIVE` x off). ``budgets``, ``spreads`` (planning sd of log
    loss) and ``n_seeds`` per model; ``seed``: the random numbers (the same seed, the same numbers)."""
    if isinstance(replicates, bool) or not isinstance(replicates, int) or not 2 <= replicates <= MAX_REPLICATES:
        raise InputError(f"replicates must be an integer in [2, {MAX_REPLICATES}] (a power's binomial standard error "
                         f"of 0.0035 at the top), got {replicates!r:.40}")
    models = list(budgets)
    preds = {m: _prediction(m, predictions.get(m, {}), budgets[m]) for m in models}
    for m in models:
        s = spreads.get(m)
        if not (isinstance(s, (int, float)) and math.isfinite(s) and s > 0):
            raise InputError(f"{m}: the planning spread must be a positive sd of log loss, got {s!r}")
        if isinstance(n_seeds.get(m), bool) or not isinstance(n_seeds.get(m), int) or n_seeds[m] < 2:
            raise InputError(f"{m}: n_seeds must be an integer >= 2, got {n_seeds.get(m)!r}")
    rng = np.random.default_rng(seed)
    counts: dict = {t: {} for t in TESTS}
    against = dict.fromkeys(models, 0)
    for _ in range(replicates):
        draw = {}
        for m in models:
            true = {b: v * math.exp(se / v * rng.standard_normal()) for b, (v, se) in preds[m].items()}
            draw[m] = {b: t * np.exp(spreads[m] * rng.standard_normal(n_seeds[m])) for b, t in true.items()}
        result = apply_tests(draw, predictions, adaptive=adaptive, one_layer=one_layer, cut=cut, reference=reference)
        for test, per in result.items():
            for m, r in per.items():
                counts[test][m] = counts[test].get(m, 0) + (r["verdict"] == "pass")
        for m in models:
            top = max(draw[m])
            off = {**draw[m], top: draw[m][top] * BAND_ALTERNATIVE}
            against[m] += band_test(off, preds[m])["verdict"] == "fail"
    out: dict = {}
    for test, per in counts.items():
        out[test] = {}
        for m, c in per.items():
            p = c / replicates
            out[test][m] = {"power": p, "stderr": math.sqrt(p * (1 - p) / replicates)}
    for m in models:
        p = against[m] / replicates
        out["band"][m]["power_against"] = {"alternative": f"x{BAND_ALTERNATIVE:g} at budget {max(budgets[m])}",
                                           "power": p, "stderr": math.sqrt(p * (1 - p) / replicates)}
    return {"replicates": replicates, "seed": seed, "spreads": dict(spreads), "n_seeds": dict(n_seeds),
            "tests": out}


POWER_REPLICATES = 400  # replicates of the power in a study's fits (binomial SE at most 0.025)


def study_tests(losses: dict, predictions: dict, *, adaptive, one_layer, cut: int = 2, reference: str | None = None,
                spreads: dict | None = None, n_seeds: dict | None = None, replicates: int = POWER_REPLICATES,
                seed: int = 0) -> dict:
    """``{test: {model: {"verdict", "power", ...}}}``: :func:`apply_tests` on the trained ``losses`` beside
    :func:`decided_power` at the planning ``spreads`` and ``n_seeds`` (default: each model's own pooled spread and
    seed count), the form of a study's ``fits.tests``. Models with one seed at every budget get no tests (no
    spread)."""
    _check_shape(losses, predictions)
    usable = {m: v for m, v in losses.items() if any(np.size(x) > 1 for x in v.values())}
    if not usable:
        return {}
    pts = {m: _points(m, v) for m, v in usable.items()}
    spreads = {m: pooled_spread(p)[0] for m, p in pts.items()} | dict(spreads or {})
    n_seeds = {m: max(v.size for v in p.values()) for m, p in pts.items()} | dict(n_seeds or {})
    verdicts = apply_tests(usable, predictions, adaptive=adaptive, one_layer=one_layer, cut=cut, reference=reference)
    power = decided_power(predictions, {m: sorted(p) for m, p in pts.items()}, {m: spreads[m] for m in pts},
                          {m: n_seeds[m] for m in pts}, adaptive=adaptive, one_layer=one_layer, cut=cut,
                          reference=reference, replicates=replicates, seed=seed)
    out = {}
    for test, per in verdicts.items():  # a test not run (too few budgets or seeds) has no power either
        out[test] = {m: {**r, **(power["tests"][test].get(m, {}) if r["verdict"] != "not run" else {"power": None})}
                     for m, r in per.items()}
    out["power_of"] = {"replicates": replicates, "seed": seed, "spreads": spreads, "n_seeds": n_seeds,
                       "meaning": "power: the fraction of synthetic studies that pass when every model sits on its "
                                  "prediction (fvnum.decided)"}
    return out
