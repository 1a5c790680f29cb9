"""Evaluate a custom adaptive policy by Monte Carlo, beside ``path`` and ``top_levels``, with error bars
(THEORY.md sections 2, 4, 6; the policy protocol of ``fvnum.policies.policies``).

    python examples/03_custom_adaptive_policy.py
    python examples/03_custom_adaptive_policy.py --taus=0.1,0.5,0.8 --confidence=0.99 --samples=100000

The custom policy, ``confident_path``, is the path strategy with second thoughts: layer ``l`` keeps
reading the current path node until the posterior probability of its sign reaches ``confidence``, and
only then descends to the child that sign points to. Under the gaussian channel a re-read brings fresh
noise, so where ``path`` commits to a wrong branch at high noise, ``confident_path`` spends budget on
certainty at the top of the tree, where mistakes cost most. At ``tau = 0`` it is exactly ``path``.

All strategies share their random numbers (same seed, same budget), so the difference
``confident_path - path`` gets a paired standard error from per-sample losses. Outputs in
``runs/examples/03_custom_adaptive_policy``: ``config.json``, ``results.json``, ``loss_vs_tau.png``.
A few seconds on the defaults.
"""
from __future__ import annotations

import math
import sys
from dataclasses import dataclass

import _cli
import numpy as np

from fvnum import StrategyOptions, gaussian, loss_mc
from fvsym import TreePrior

STRATEGIES = ("path", "top_levels", "confident_path")


def confident_path(scales, tau: float, confidence: float):
    """The policy (``fvnum.policies.policies`` protocol: ``rows = policy(layer, phi)``, ``phi`` (n, layer, 1) the
    readings so far, ``rows`` (n, 1) node numbers, 0 = idle). It is stateless: it replays its own earlier
    decisions from ``phi``. Reading a path node of amplitude ``a`` with sum of readings ``S`` gives the sign
    log-odds ``2 a S / tau^2``; the policy descends once they reach ``log(confidence / (1 - confidence))``."""
    scales = np.asarray(scales, dtype=float)
    K = scales.size
    D = 2**K - 1
    threshold = math.log(confidence / (1 - confidence))

    def policy(layer: int, phi: np.ndarray) -> np.ndarray:
        n = phi.shape[0]
        node = np.ones(n, dtype=np.int64)  # (n,) the node being read; > D once past the leaves
        total = np.zeros(n)  # (n,) summed readings of that node
        for l in range(layer):
            live = node <= D
            total = total + phi[:, l, 0]
            level = np.minimum(np.frexp(node.astype(float))[1], K)  # k(n) = bit length of n
            amplitude = scales[level - 1]
            sure = np.ones(n, dtype=bool) if tau == 0 else 2 * amplitude * np.abs(total) / tau**2 >= threshold
            descend = sure & live
            node = np.where(descend, 2 * node + (total < 0), node)  # a tie counts as +1, as in path
            total = np.where(descend, 0.0, total)
        return np.where(node <= D, node, 0)[:, None]  # (n, 1)

    return policy


@dataclass(frozen=True)
class Config:
    """Tree prior (``depth``, ``alpha``), ``budget`` (<= depth) layers of width 1, gaussian channel at each
    noise in ``taus``; ``confidence`` of the custom policy; ``samples`` per estimate; ``figure``: write a PNG."""

    depth: int = 4
    alpha: float = 0.5
    budget: int = 4
    taus: tuple[float, ...] = (0.0, 0.2, 0.4, 0.6)
    confidence: float = 0.9
    samples: int = 20_000
    seed: int = 0
    figure: bool = True
    out: str = _cli.default_out("03_custom_adaptive_policy")

    def __post_init__(self):
        if not 1 <= self.budget <= self.depth:
            raise ValueError(f"budget must lie in 1..depth={self.depth} (path reads one node per level), "
                             f"got {self.budget}")
        if not 0.5 < self.confidence < 1:
            raise ValueError(f"confidence must lie in (0.5, 1), got {self.confidence}")
        if not self.taus or any(not (t >= 0 and math.isfinite(t)) for t in self.taus):
            raise ValueError(f"taus must be one or more finite numbers >= 0, got {self.taus}")


def _estimate(prior, strategy: str, cfg: Config, tau: float):
    """(Estimate, per-sample losses) of one strategy at noise ``tau``."""
    kw = dict(samples=cfg.samples, seed=cfg.seed, record=True)
    if strategy == "confident_path":
        scales = [float(a) for a in prior.scales]
        options = StrategyOptions(policy=confident_path(scales, tau, cfg.confidence), layers=cfg.budget, width=1)
        est = loss_mc(prior, "policy", cfg.budget, gaussian(tau), options=options, **kw)
    else:
        est = loss_mc(prior, strategy, cfg.budget, gaussian(tau), **kw)
    return est, est.function_vectors.loss


def _figure(rows: list[dict], cfg: Config) -> bytes:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for i, strategy in enumerate(STRATEGIES):
        pts = [(r["tau"], r["value"], r["stderr"]) for r in rows if r["strategy"] == strategy]
        t, v, e = zip(*pts)
        ax.errorbar(t, v, yerr=e, marker="o", capsize=3, color=f"C{i}", label=strategy)
    ax.set_xlabel("channel noise tau")
    ax.set_ylabel("loss  E||theta_hat - theta||^2")
    ax.set_title(f"tree prior, depth {cfg.depth}, alpha {cfg.alpha}, budget {cfg.budget}")
    ax.grid(alpha=0.3)
    ax.legend()
    return _cli.png(fig)


def main(cfg: Config) -> dict:
    clock = _cli.Clock()
    _cli.prepare(cfg)
    prior = TreePrior(cfg.depth, repr(float(cfg.alpha)))
    rows, differences = [], []
    print(f"tree prior depth {cfg.depth}, alpha {cfg.alpha}, budget {cfg.budget}, gaussian channel, "
          f"{cfg.samples} samples per estimate (Bayes decoder)\n")
    print(f"{'tau':>5} | " + " | ".join(f"{s:>19}" for s in STRATEGIES) + " | confident - path (paired)")
    for tau in cfg.taus:
        losses = {}
        for strategy in STRATEGIES:
            est, losses[strategy] = _estimate(prior, strategy, cfg, tau)
            rows.append({"tau": tau, "strategy": strategy, **est.to_dict()})
        diff = losses["confident_path"] - losses["path"]
        d = {"tau": tau, "value": float(diff.mean()), "stderr": float(diff.std(ddof=1) / math.sqrt(diff.size))}
        differences.append(d)
        cells = [f"{r['value']:.4f} ± {r['stderr']:.4f}" for r in rows[-len(STRATEGIES):]]
        print(f"{tau:>5.2f} | " + " | ".join(f"{c:>19}" for c in cells) + f" | {d['value']:+.4f} ± {d['stderr']:.4f}")
    results = {
        "prior": {"depth": cfg.depth, "alpha": cfg.alpha, "second_moment": float(prior.second_moment)},
        "rows": rows, "confident_minus_path": differences, "seconds": clock(),
    }
    files = {"loss_vs_tau.png": _figure(rows, cfg)} if cfg.figure else {}
    folder = _cli.save(cfg, results, files)
    print(f"\nwrote {folder}/ ({', '.join([*files, 'config.json', 'results.json'])}) in {results['seconds']:.1f} s")
    return results


if __name__ == "__main__":
    sys.exit(_cli.run(main, Config))
