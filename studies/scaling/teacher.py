"""The keyed teacher checked (issue 45, item 3; studies/scaling/distil.md): are the rows of A's prediction policy
(the greedy adaptive keyed search, :func:`fvnum.keys.adaptive.adaptive_keyed_trace`) a function of the readings
that a router could learn?

Command: ``PYTHONPATH=. python studies/scaling/teacher.py [--contexts=512] [--out=DIR]`` (about 8 minutes of one
core on a loaded 2-core machine; the trace and every re-run are kept in ``DIR``, default
studies/scaling/distil/train/teacher, git-ignored, so an interrupted run resumes where it stopped). It writes
``teacher_consistency`` into studies/scaling/distil.json; ``--table`` prints distil.md's two tables from it.

The cell is the distillation's (``distil_scan.py``): tree depth 7, alpha 0.6, N 64, s2 0.01, budget 4, seed 0, the
teacher's trace on 4096 samples with canonical signs (``bridges.training.distil.KeyedTeacher``: the router's
regression data), the last 512 held out. For each layer ``l = 2..4`` (the row chosen after readings ``1..l-1``):

- **re-run** (:func:`search_rows`): on ``contexts`` held-out samples, the search of row ``l`` re-run from the
  trace's own state (its rows and readings ``1..l-1``): from the same starts (``same``: it must give the trace's
  row bit for bit), from the search's starts built on another fixed direction (``fixed-s``), from three random
  unit starts (``random-s``), and from the search's starts with four times the Adam steps (``steps-100``). Each
  row is compared with the trace's by :func:`errors`, and by the search's own objective (:func:`objective`: the
  expected loss after reading it, one-step lookahead by quadrature on 128 nodes): its excess over the trace's
  row, relative to the trace's row's gain (the loss before the reading minus after);
- **nearby** readings: the whole policy re-run (:func:`fvnum.keys.adaptive.adaptive_keyed_trace` with given
  readings, as ``KeyedTeacher.keys_on`` does) on the same contexts' readings moved by ``eps`` times each
  reading's standard deviation (independent normal steps): how far row ``l`` moves when the readings barely do;
- **k-NN** (:func:`knn_rows`): the held-out samples' row ``l`` predicted from the rows of their ``k`` nearest
  training samples (3584, the router's) in the space of readings ``1..l-1`` standardized; and leave-one-out on the
  training samples. The best a smooth function of the readings can be expected to do at this sample size.

Errors (:func:`errors`) are the router's (``bridges.training.distil._relative_errors``: mean squared key error over
fresh tokens relative to the key variance), computed exactly for a row ``w``: the key ``f(x) = (w.x) / (x^T Q x +
c)`` has ``E[f_w f_v] = w^T diag(h) v`` with ``h = E[x_d^2 / (x^T Q x + c)^2]`` (``WeightedKeys.h_``), so the error
of a prediction ``p`` of rows ``w`` is ``sum_n (p_n - w_n)^T diag(h) (p_n - w_n) / sum_n w_n^T diag(h) w_n``. The
policy is invariant to the sign of a row (a row and its negative read the same, up to the reading's sign) and
to its scale (the search's rows are unit; ``fvnum.keys.tree.rows_of``), so every error is given three ways: as it
is (``plain``: what the regression is asked), modulo sign (``sign``: ``min`` over ``+-p``), and modulo sign and
scale (``direction``: the best multiple ``c p`` per sample, ``c`` of either sign).
"""
from __future__ import annotations
from fvnum.options import KeyedSearch

import os
import pickle
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "distil.json")
COMMAND = "PYTHONPATH=. python studies/scaling/teacher.py"
DEPTH, ALPHA, N_TOKENS, S2, BUDGET, SEED = 7, 0.6, 64, 0.01, 4, 0
TRACE_SAMPLES, HELD_OUT = 4096, 512  # bridges.training.distil: TRACE_SAMPLES, HELD_OUT_CONTEXTS
KS = (1, 2, 4, 8, 16, 32, 64)
SEARCH_FIXED_SEED = 20240229  # the search's fixed start direction (fvnum.keys.adaptive._policy_layers)
RERUNS = (("same", {}), ("fixed-1", {"fixed": 1}), ("fixed-2", {"fixed": 2}), ("fixed-3", {"fixed": 3}),
          ("random-1", {"random": 1}), ("random-2", {"random": 2}), ("random-3", {"random": 3}),
          ("steps-100", {"steps": 100}))
NEARBY = (0.001, 0.01, 0.1)  # reading steps, in standard deviations of each reading
NEARBY_SEED = 11
MODES = ("plain", "sign", "direction")
# the routers' forced key errors at budget 4, seed 0, layers 1-4 (distil.md): the MLP router of the run keyed-B4-s0
# on 512 training and the 512 held-out trace workspaces (distil_fit.py), the qk router in the same regression
# (distil_scan.py's recipe, training workspaces; issue 45)
ROUTERS = {"mlp_train": [0.0003, 0.30, 0.81, 0.88], "mlp_held_out": [0.00035, 0.33, 0.86, 0.92],
           "qk_train": [0.0, 0.30, 0.84, 0.87]}


def canonical(rows: np.ndarray) -> np.ndarray:
    """Rows (..., D) with the sign that makes each one's largest entry (in absolute value) positive, as the
    search's ``canonical`` option chooses it."""
    big = np.take_along_axis(rows, np.abs(rows).argmax(-1)[..., None], -1)
    return np.where(big < 0, -rows, rows)


def _state(first, spec, rows, phi, n_tokens, s2):
    from fvnum.keys.lookahead import _posterior_state
    from fvnum.keys.tree import _torch, _Tree, geometry_of

    torch = _torch()
    tree = _Tree(spec)
    with torch.no_grad():
        geo = geometry_of(tree, first.keys, s2, torch)
        rows_t, phi_t = torch.as_tensor(rows, dtype=torch.float64), torch.as_tensor(phi, dtype=torch.float64)
        return (tree, geo, rows_t, *_posterior_state(tree, geo, rows_t, phi_t, n_tokens, torch)), torch


def search_rows(first, spec, rows, phi, *, n_tokens: int, s2: float, fixed=None, starts=None, steps: int = 25,
                screen=None, node_step=None, grid: int = 128) -> np.ndarray:
    """(n, D) the rows the greedy keyed search (:func:`fvnum.keys.adaptive._next_rows`, the Numba kernel) chooses
    next after rows ``rows`` (n, l, D) read ``phi`` (n, l), signs as the search leaves them (before
    :func:`canonical`). Its starts are ``starts`` (n, S, D) if given, else the search's three
    (:func:`fvnum.keys.lookahead._starts`) built on the direction ``fixed`` (D,) (default: the search's own);
    ``steps``, ``screen``, ``node_step`` and ``grid`` as in :func:`fvnum.keys.adaptive.adaptive_keyed_losses`."""
    from fvnum.keys.adaptive import NODE_STEP
    from fvnum.keys.lookahead import _lookahead_state
    from fvnum.mc._kernels import keyed as KK

    (tree, geo, rows_t, mean, L, alpha, logw), torch = _state(first, spec, rows, phi, n_tokens, s2)
    node_step = NODE_STEP if node_step is None else float(node_step)
    st, n_live = _lookahead_state(tree, geo, rows_t, mean, L, alpha, logw, n_tokens, node_step, torch)
    n, D = rows_t.shape[0], spec.dim
    if starts is None:
        fixed = np.random.default_rng(SEARCH_FIXED_SEED).standard_normal(D) if fixed is None else fixed
        starts = np.zeros((n, 3, D))
        KK._power_starts(st[10], st[2], st[3], np.ascontiguousarray(fixed, dtype=float), starts)
    out_w, out_phi = np.zeros((n, D)), np.zeros(n)
    wk = KK.work_arrays(int(n_live.max()), spec.depth, rows_t.shape[1], D)
    KK._adam_rows(np.ascontiguousarray(starts, dtype=float), n_live, np.zeros(n, dtype=np.int64), np.zeros(n),
                  int(steps), int(steps if screen is None else screen), 0.05, int(grid), st, wk, out_w, out_phi)
    return out_w


def objective(first, spec, rows, phi, candidates, *, n_tokens: int, s2: float, grid: int = 128,
              chunk: int = 32) -> tuple:
    """The search's objective for candidate next rows ``candidates`` (n, S, D) after ``rows`` (n, l, D) read
    ``phi`` (n, l): ``(before (n,), after (n, S))``, the posterior's expected loss now and after reading each
    candidate (one-step lookahead under the exact conditional law, :func:`fvnum.keys.adaptive._lookahead`, on
    ``grid`` nodes; a row's scale and sign do not change it)."""
    from fvnum.keys.adaptive import _lookahead
    from fvnum.keys.tree import rows_of

    (tree, geo, rows_t, mean, L, alpha, logw), torch = _state(first, spec, rows, phi, n_tokens, s2)
    th = torch.as_tensor(tree.thetas, dtype=torch.float64)
    W = rows_of(geo, torch.as_tensor(candidates, dtype=torch.float64), torch)
    after = torch.zeros(W.shape[:2], dtype=torch.float64)
    with torch.no_grad():
        p = torch.exp(logw)
        before = p @ (th**2).sum(-1) - ((p @ th) ** 2).sum(-1)
        order = torch.argsort(logw.argmax(1), stable=True)
        for a in range(0, len(order), chunk):
            sl = order[a : a + chunk]
            live = (logw[sl] > logw[sl].max(1, keepdim=True).values - 27.6).any(0)
            after[sl] = _lookahead(tree, geo, rows_t[sl], mean[sl], L[sl], alpha[sl], logw[sl], live,
                                   tree.thetas[live.numpy()], W[sl], n_tokens, grid, torch)[0]
    return before.numpy(), after.numpy()


def errors(pred: np.ndarray, target: np.ndarray, h: np.ndarray) -> dict:
    """The router's relative key error (module docstring) of predicted rows ``pred`` (n, D) for rows ``target``
    (n, D) under key weights ``h`` (D,), per mode of :data:`MODES`, and the rows' own relative distance
    ``|p - w| / |w|`` (mean and median; ``sign``: the nearer of ``+-p``; ``changed_fraction``: the samples whose
    row moved by more than 1e-6 of its norm, either sign)."""
    hw = (target * target * h).sum(-1)  # (n,) |w|_h^2
    hp, cross = (pred * pred * h).sum(-1), (pred * target * h).sum(-1)
    plain = hp - 2 * cross + hw
    sign = hp - 2 * np.abs(cross) + hw
    direction = hw - np.divide(cross**2, hp, out=np.zeros_like(hp), where=hp > 0)
    norm = np.linalg.norm(target, axis=-1)
    dist = np.linalg.norm(pred - target, axis=-1) / norm
    dist_sign = np.minimum(dist, np.linalg.norm(pred + target, axis=-1) / norm)
    out = {m: float(e.sum() / hw.sum()) for m, e in zip(MODES, (plain, sign, direction))}
    out.update(changed_fraction=float((dist_sign > 1e-6).mean()),
               row_distance_mean=float(dist.mean()), row_distance_median=float(np.median(dist)),
               row_distance_sign_mean=float(dist_sign.mean()), row_distance_sign_median=float(np.median(dist_sign)))
    return out


def standardize(train: np.ndarray, *others):
    """``train`` (n, d) and ``others`` in units of ``train``'s per-column mean and standard deviation."""
    mu, sd = train.mean(0), train.std(0)
    sd = np.where(sd > 0, sd, 1.0)
    return [(a - mu) / sd for a in (train, *others)]


def knn_rows(train_x: np.ndarray, train_y: np.ndarray, test_x: np.ndarray | None, ks, *,
             align_sign: bool = False) -> dict:
    """``{k: (n, D)}``: each test point's prediction, the mean of the targets ``train_y`` (m, D) of its ``k``
    nearest training points (Euclidean, in the coordinates given: standardize first) by ``train_x`` (m, d);
    ``test_x`` None: leave-one-out on the training points (a point is not its own neighbour). ``align_sign``:
    each neighbour's target is given the sign that agrees with the nearest one's before averaging (rows
    defined up to sign)."""
    loo = test_x is None
    q = train_x if loo else test_x
    d2 = ((q[:, None, :] - train_x[None, :, :]) ** 2).sum(-1)  # (n, m)
    if loo:
        np.fill_diagonal(d2, np.inf)
    kmax = max(ks)
    near = np.argsort(d2, axis=1, kind="stable")[:, :kmax]  # (n, kmax), nearest first
    y = train_y[near]  # (n, kmax, D)
    if align_sign:
        y = y * np.where((y * y[:, :1]).sum(-1, keepdims=True) < 0, -1.0, 1.0)
    return {k: y[:, :k].mean(1) for k in ks}


def knn_distances(train_x: np.ndarray, test_x: np.ndarray) -> np.ndarray:
    """(n,) each test point's distance to its nearest training point."""
    return np.sqrt(((test_x[:, None, :] - train_x[None, :, :]) ** 2).sum(-1).min(1))


# --- the study: the cell's trace, its re-runs, the k-NN predictor, distil.json ---------------------------------
def _prior():
    """The cell's prior, as the distillation builds it (``bridges.training.data.fv_prior``)."""
    from bridges.runs.config import DataConfig
    from bridges.training.data import fv_prior

    return fv_prior(DataConfig(prior="tree", depth=DEPTH, alpha=ALPHA, n_tokens=N_TOKENS, s2=S2))


KEPT = {}  # path -> seconds the piece kept there took when it was computed, for the pieces this run did not compute


def _cached(path: str, make):
    """``make()``, kept at ``path`` with the seconds it took; read back from there next time (into :data:`KEPT`
    unless this run computed it: its time is this run's)."""
    if os.path.exists(path):
        with open(path, "rb") as f:
            value, seconds = pickle.load(f)
        KEPT.setdefault(path, seconds)
        return value
    KEPT[path] = 0.0
    t0 = time.perf_counter()
    value = make()
    with open(path + ".part", "wb") as f:
        pickle.dump((value, time.perf_counter() - t0), f)
    os.replace(path + ".part", path)
    return value


def teacher_trace(out: str):
    """The keyed teacher's trace at the cell (``KeyedTeacher``'s: canonical signs), kept in ``out``."""
    from fvnum.keys.adaptive import adaptive_keyed_trace

    return _cached(os.path.join(out, f"trace-B{BUDGET}-s{SEED}-n{TRACE_SAMPLES}.pkl"), lambda: adaptive_keyed_trace(
        _prior(), BUDGET, _channel(), samples=TRACE_SAMPLES, seed=SEED, canonical=True))


def _channel():
    """The cell's tokens channel, weighted keys (the teacher's family)."""
    from fvnum.mc.channels import tokens

    return tokens(N_TOKENS, S2, keys="weighted")


def _rerun(trace, spec, idx, layer, how: dict) -> np.ndarray:
    """Row ``layer`` (0-based) of samples ``idx`` re-run from the trace's state as ``how`` says (:data:`RERUNS`)."""
    D = spec.dim
    kw = {}
    if "fixed" in how:
        kw["fixed"] = np.random.default_rng(how["fixed"]).standard_normal(D)
    if "random" in how:
        u = np.random.default_rng([how["random"], layer]).standard_normal((len(idx), 3, D))
        kw["starts"] = u / np.linalg.norm(u, axis=-1, keepdims=True)
    return canonical(search_rows(trace.first, spec, trace.rows[idx, :layer], trace.phi[idx, :layer],
                                 n_tokens=N_TOKENS, s2=S2, steps=how.get("steps", 25), **kw))


def _nearby(trace, idx, eps: float) -> np.ndarray:
    """(n, B, D) the policy's rows on the readings of samples ``idx`` moved by ``eps`` standard deviations."""
    from fvnum.keys.adaptive import adaptive_keyed_trace

    phi = trace.phi[idx]
    step = np.random.default_rng([NEARBY_SEED, int(round(1e6 * eps))]).standard_normal(phi.shape)
    moved = phi + eps * trace.phi.std(0) * step
    return adaptive_keyed_trace(_prior(), BUDGET, _channel(), samples=len(idx), seed=SEED,
                                search=KeyedSearch(first=trace.first), readings=moved, canonical=True).rows


def _excess(before, after) -> dict:
    """The objective of re-run rows (``after[:, 1:]``) against the trace's row (``after[:, 0]``)."""
    gain = before - after[:, 0]
    out = {}
    for j in range(1, after.shape[1]):
        d = after[:, j] - after[:, 0]
        out[j] = {"excess_mean": float(d.mean()), "excess_stderr": float(d.std(ddof=1) / np.sqrt(len(d))),
                  "excess_over_gain": float(d.mean() / gain.mean()),
                  "better_fraction": float((d < -1e-9 * np.abs(after[:, 0])).mean())}
    return out


def consistency(out: str, n_contexts: int) -> dict:
    """The ``teacher_consistency`` entry of distil.json (module docstring)."""
    from fvnum.priors.tree import numeric_prior

    t0 = time.perf_counter()
    KEPT.clear()
    trace = teacher_trace(out)
    spec = numeric_prior(_prior())
    h = np.asarray(trace.keys.h_, dtype=float)
    n_train = TRACE_SAMPLES - HELD_OUT
    idx = np.arange(n_train, n_train + n_contexts)
    layers = {}
    for layer in range(1, BUDGET):  # 0-based: row `layer` follows readings 0..layer-1
        target = trace.rows[idx, layer]
        reruns = {name: _cached(os.path.join(out, f"rerun-{name}-l{layer + 1}-n{n_contexts}.pkl"),
                                lambda how=how: _rerun(trace, spec, idx, layer, how)) for name, how in RERUNS}
        nearby = {eps: _cached(os.path.join(out, f"nearby-{eps:g}-n{n_contexts}.pkl"),
                               lambda eps=eps: _nearby(trace, idx, eps))[:, layer] for eps in NEARBY}
        x_train, x_test = standardize(trace.phi[:n_train, :layer], trace.phi[n_train:, :layer])
        y_train, y_test = trace.rows[:n_train, layer], trace.rows[n_train:, layer]
        held, loo = knn_rows(x_train, y_train, x_test, KS), knn_rows(x_train, y_train, None, KS)
        held_sign = knn_rows(x_train, y_train, x_test, KS, align_sign=True)
        best_k = min(KS, key=lambda k: errors(held[k], y_test, h)["plain"])
        names = list(reruns)
        cands = np.stack([target, *reruns.values(), held[1][:n_contexts], held[best_k][:n_contexts],
                          np.broadcast_to(y_train.mean(0), target.shape)], axis=1)
        before, after = objective(trace.first, spec, trace.rows[idx, :layer], trace.phi[idx, :layer], cands,
                                  n_tokens=N_TOKENS, s2=S2)
        excess = _excess(before, after)
        same = reruns["same"]
        layers[str(layer + 1)] = {
            "readings": layer,
            "objective": {"before": float(before.mean()), "after_teacher": float(after[:, 0].mean()),
                          "gain": float((before - after[:, 0]).mean())},
            "rerun": {"contexts": n_contexts, "same_start_identical": bool(np.array_equal(same, target)),
                      **{name: {**errors(r, target, h), **excess[j + 1]} for j, (name, r) in enumerate(reruns.items())},
                      "best_of_reruns": _best_of(after[:, 1 : 1 + len(names)], np.stack(list(reruns.values()), 1),
                                                 after[:, 0], target, h)},
            "nearby": {f"{eps:g}": errors(r, target, h) for eps, r in nearby.items()},
            "knn": {"train": n_train, "held_out": HELD_OUT, "ks": list(KS),
                    "held_out_errors": {str(k): errors(held[k], y_test, h) for k in KS},
                    "held_out_sign_aligned": {str(k): errors(held_sign[k], y_test, h) for k in KS},
                    "leave_one_out": {str(k): errors(loo[k], y_train, h) for k in KS},
                    "best_k": best_k,
                    "objective_1nn": excess[len(names) + 1], "objective_best_k": excess[len(names) + 2],
                    "nearest_distance_median": float(np.median(knn_distances(x_train, x_test)))},
            "mean_row": {"held_out": errors(np.broadcast_to(y_train.mean(0), y_test.shape), y_test, h),
                         "objective": excess[len(names) + 3]},
            "routers": {name: v[layer] for name, v in ROUTERS.items()},
        }
        print(_summary(layer + 1, layers[str(layer + 1)]), flush=True)
    seconds = time.perf_counter() - t0
    return {"command": COMMAND, "seconds": round(seconds + sum(KEPT.values()), 1),  # the kept pieces' included
            "seconds_this_run": round(seconds, 1),
            "cell": {"depth": DEPTH, "alpha": ALPHA, "n_tokens": N_TOKENS, "s2": S2, "budget": BUDGET, "seed": SEED,
                     "trace_samples": TRACE_SAMPLES, "held_out": HELD_OUT, "canonical": True},
            "reruns": {name: how for name, how in RERUNS}, "nearby_eps": list(NEARBY), "nearby_seed": NEARBY_SEED,
            "method": __doc__.split("\n\n", 2)[2].strip(), "routers_source": _ROUTERS_SOURCE, "layers": layers}


_ROUTERS_SOURCE = ("mlp_train, mlp_held_out: the MLP router (2 x 64, 4000 regression steps) of keyed-B4-s0 on 512 "
                   "training and the 512 held-out trace workspaces (distil_fit.py; the held-out ones are "
                   "distilled.fidelity_forced of keyed-B4-s0); qk_train: the query-key router in distil_scan.py's "
                   "regression on training workspaces (issue 45)")


def _best_of(after, rows, teacher_after, target, h) -> dict:
    """The lowest-objective row of every sample among the re-runs and the trace's own, against the trace's."""
    pick = after.argmin(1)
    best = np.where((after[np.arange(len(pick)), pick] < teacher_after)[:, None], rows[np.arange(len(pick)), pick],
                    target)
    return errors(best, target, h)


def _summary(layer: int, e: dict) -> str:
    r, k = e["rerun"], e["knn"]
    best = k["held_out_errors"][str(k["best_k"])]
    return (f"layer {layer}: re-run same {r['same_start_identical']}, fixed-1 {r['fixed-1']['plain']:.3f} "
            f"(sign {r['fixed-1']['sign']:.3f}), random-1 {r['random-1']['plain']:.3f} (sign "
            f"{r['random-1']['sign']:.3f}, excess/gain {r['random-1']['excess_over_gain']:.4f}), steps-100 "
            f"{r['steps-100']['plain']:.3f}; nearby 0.01 {e['nearby']['0.01']['plain']:.3f}; 1-NN "
            f"{k['held_out_errors']['1']['plain']:.3f} (sign {k['held_out_sign_aligned']['1']['sign']:.3f}), best "
            f"k={k['best_k']} {best['plain']:.3f}; mean row {e['mean_row']['held_out']['plain']:.3f}; routers "
            f"{e['routers']}")


def _mean(entries: list, key: str) -> float:
    return sum(e[key] for e in entries) / len(entries)


def table() -> str:
    """distil.md's tables from ``teacher_consistency`` in distil.json: the search re-run, then the predictors."""
    from bridges.runs.store import read_json

    tc = read_json(OUT, {})["teacher_consistency"]
    one = ["| layer (readings) | loss before / after the row (gain) | other fixed direction (3) | random starts (3) | "
           "100 steps | loss excess / gain: fixed, random, 100 steps | nearby readings: 0.1%, 1%, 10% SD |",
           "|---|---|---|---|---|---|---|"]
    two = ["| layer | k-NN held out: best k, plain / sign-aligned (sign) | k-NN leave-one-out, best | 1-NN held out "
           "(nearest distance, SD) | mean row | MLP router: train / held out | qk router: train | loss excess / "
           "gain: best k-NN row, mean row |", "|---|---|---|---|---|---|---|---|"]
    for layer, e in tc["layers"].items():
        r, k = e["rerun"], e["knn"]
        kinds = [[r[n] for n in r if n.startswith(p)] for p in ("fixed-", "random-")] + [[r["steps-100"]]]
        cell = ["{:.2f} / {:.2f} / {:.2f}".format(*(_mean(v, m) for m in MODES)) for v in kinds]
        ex = ", ".join(f"{_mean(v, 'excess_over_gain'):+.4f}" for v in kinds)
        near = ", ".join(f"{e['nearby'][f'{x:g}']['plain']:.2f}" for x in tc["nearby_eps"])
        o = e["objective"]
        one.append(f"| {layer} ({e['readings']}) | {o['before']:.3f} / {o['after_teacher']:.3f} ({o['gain']:.3f}) | "
                   f"{' | '.join(cell)} | {ex} | {near} |")
        best = k["best_k"]
        loo_k = min(k["ks"], key=lambda j: k["leave_one_out"][str(j)]["plain"])
        aligned = min(k["held_out_sign_aligned"].values(), key=lambda v: v["sign"])["sign"]
        rt = e["routers"]
        two.append(f"| {layer} | k = {best}: {k['held_out_errors'][str(best)]['plain']:.3f} / {aligned:.3f} | "
                   f"{k['leave_one_out'][str(loo_k)]['plain']:.3f} (k = {loo_k}) | "
                   f"{k['held_out_errors']['1']['plain']:.3f} ({k['nearest_distance_median']:.2g}) | "
                   f"{e['mean_row']['held_out']['plain']:.3f} | {rt['mlp_train']:.2f} / {rt['mlp_held_out']:.2f} | "
                   f"{rt['qk_train']:.2f} | {k['objective_best_k']['excess_over_gain']:.2f}, "
                   f"{e['mean_row']['objective']['excess_over_gain']:.2f} |")
    return "\n".join(one) + "\n\n" + "\n".join(two)


def main(argv: list[str]) -> int:
    from bridges.runs.options import script_options
    from bridges.runs.store import update_json

    opts = script_options(argv, {"contexts", "out", "table"})
    if "table" in opts:
        print(table())
        return 0
    n = int(opts.get("contexts", HELD_OUT))
    if not 2 <= n <= HELD_OUT:
        print(f"--contexts must be 2 to {HELD_OUT}, got {n}", file=sys.stderr)
        return 2
    out = opts.get("out", os.path.join(HERE, "distil", "train", "teacher"))
    os.makedirs(out, exist_ok=True)
    entry = consistency(out, n)
    update_json(OUT, lambda cells: cells.__setitem__("teacher_consistency", entry))
    return 0


if __name__ == "__main__":
    from bridges.runs.options import run_script

    sys.exit(run_script(main, sys.argv[1:], "teacher.py"))
