"""The noisy adaptive optimum, bracketed (THEORY.md section 3, "under noise"), and the best adaptive
policy the engine finds.

- :func:`bounds`: for the tree prior, coordinate class, ``L = B`` layers of width 1 (repeats allowed):
  ``lower`` = the noiseless Bellman optimum (``fvsym.bellman.solve``): the gaussian channel is a
  garbling of the noiseless one (Blackwell), and so is the tokens channel on the tree prior, so no
  policy under noise beats it; ``upper`` = the Monte Carlo loss of the best of several adaptive
  policies (path, greedy one-step lookahead, rollout over greedy, the noiseless Bellman policy, and the
  exact noisy policy where it is solved), chosen on one stream of common random numbers (``SELECT``)
  and re-estimated on another (``EVAL``); ``exact`` = the exact noisy optimum of ``fvnum.bellman``
  where the tree is small enough (gaussian channel; for ``tokens`` at its effective ``tau``), else None.
  Every candidate's ``EVAL`` estimate is kept, with the paired difference of ``rollout`` against
  ``path`` and ``greedy_coordinate`` on the same samples.
- :func:`best_adaptive`: the best adaptive policy among named candidates (also unit class).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import _chunks
from .channels import make_channel
from .estimate import Estimate
from .gaussian import GaussSpec
from .registry import build_policy
from .simulate import check_budget, check_samples, check_seed, simulate
from .tree import TreeSpec, numeric_prior

BOUND_CANDIDATES = ("path", "greedy_coordinate", "rollout", "bellman_noiseless", "optimal")
ADAPTIVE_CANDIDATES = ("path", "bellman_noiseless", "greedy_coordinate", "greedy_dense")


@dataclass(frozen=True)
class Bounds:
    """``lower`` (value, how) <= the noisy optimum <= ``upper`` (a Monte Carlo Estimate of ``policy``).
    ``exact``: the exact noisy optimum where solved (else None). ``candidates``: every policy's
    Estimate on the same samples; ``differences``: paired ``rollout - other`` Estimates."""

    lower: float
    lower_how: str
    upper: Estimate
    policy: str
    exact: float | None
    exact_how: str | None
    candidates: dict = field(default_factory=dict)
    differences: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {
            "lower": {"value": self.lower, "how": self.lower_how},
            "upper": {"value": self.upper.value, "stderr": self.upper.stderr, "n": self.upper.n,
                      "policy": self.policy},
            "exact": self.exact, "exact_how": self.exact_how,
            "candidates": {k: v.as_dict() for k, v in self.candidates.items()},
            "differences": {k: v.as_dict() for k, v in self.differences.items()},
            **self.inputs,
        }

    def __str__(self) -> str:
        exact = "n/a" if self.exact is None else f"{self.exact:.6g}"
        return (f"optimum in [{self.lower:.6g}, {self.upper.value:.6g} +- {self.upper.stderr:.2g}]  "
                f"(lower: {self.lower_how}; upper: {self.policy}, mc n={self.upper.n}; exact: {exact})")


def noiseless_lower(prior, spec: TreeSpec, budget: int) -> tuple[float, str]:
    """The noiseless Bellman optimum of ``budget`` layers of width 1 (0 once the budget resolves the leaf)."""
    from fvsym import bellman
    from fvsym.priors import TreePrior

    if not isinstance(prior, TreePrior):
        prior = TreePrior(spec.depth, scales=[str(a) for a in spec.scales])
    if budget == 0:
        return float(spec.second_moment), "no reading: the prior's second moment"
    loss = bellman.solve(prior, min(budget, spec.dim), 1).loss
    return float(loss), "noiseless Bellman optimum (fvsym.bellman.solve), a lower bound under any noise (Blackwell)"


def _paired(a: np.ndarray, b: np.ndarray) -> Estimate:
    d = np.asarray(a) - np.asarray(b)
    return Estimate(float(d.mean()), float(d.std(ddof=1) / math.sqrt(d.size)), int(d.size))


def bounds(prior, budget: int, tau=None, *, tokens=None, s2=0.01, samples: int = 20_000, seed: int = 0,
           select_samples: int = 2000, candidates=None, exact=None, threads=None, progress=None) -> Bounds:
    """Bracket the noisy adaptive optimum of the tree prior (coordinate class, ``L = budget``, ``d = 1``)
    under the gaussian channel ``tau`` or the tokens channel of ``tokens`` = N. ``candidates``: the
    policies tried for the upper bound (default ``BOUND_CANDIDATES``, each where it applies);
    ``exact``: solve the exact recursion (default: where ``fvnum.bellman.exact_feasible``)."""
    from . import bellman

    spec = numeric_prior(prior)
    if not isinstance(spec, TreeSpec):
        raise ValueError("bounds need a tree prior (a Gaussian prior's optimum is exact: water-filling)")
    channel = make_channel(spec, tau, tokens, s2)
    samples, seed = check_samples(samples), check_seed(seed)
    budget = check_budget(budget)
    if budget < 1:
        raise ValueError(f"bounds need budget >= 1, got {budget}")
    lower, lower_how = noiseless_lower(prior, spec, budget)
    solve_exact = channel.tau > 0 and bellman.exact_feasible(spec, budget, tau=channel.tau) if exact is None else bool(exact)
    exact_value = exact_how = None
    names = BOUND_CANDIDATES if candidates is None else tuple(candidates)
    policies = {}
    if channel.tau == 0:  # the noiseless optimum is exact and attained
        exact_value, exact_how = lower, "noiseless Bellman optimum"
    elif solve_exact:
        solved = bellman.noisy_bellman(spec, budget, channel.tau, threads=threads)
        exact_value, exact_how = solved.value, solved.how + (
            f" (gaussian channel at the tokens channel's effective tau {channel.tau:.4g})"
            if channel.kind == "tokens" else "")
        if "optimal" in names:
            policies["optimal"] = solved.policy
    for name in names:
        if name == "optimal" or (name == "path" and budget > spec.depth):
            continue
        if name == "bellman_noiseless" and budget > spec.dim:
            continue
        if name == "rollout" and (channel.tau == 0 or budget < 2):
            continue
        policies[name] = build_policy(prior, spec, channel, name, budget, seed=seed, threads=threads)
    n_select = check_samples(min(samples, select_samples))
    scores = {name: simulate(spec, channel, pol, budget, samples=n_select, seed=seed, threads=threads,
                             purpose=_chunks.SELECT)[0] for name, pol in policies.items()}
    best = min(scores, key=lambda k: scores[k].value)
    runs = {name: simulate(spec, channel, pol, budget, samples=samples, seed=seed, threads=threads, record=True,
                           progress=progress) for name, pol in policies.items()}
    found = {name: r[0] for name, r in runs.items()}
    diffs = {}
    if "rollout" in runs:
        for other in ("path", "greedy_coordinate", "bellman_noiseless"):
            if other in runs:
                diffs[f"rollout - {other}"] = _paired(runs["rollout"][1].loss, runs[other][1].loss)
    inputs = {"prior": "tree", "depth": spec.depth, "scales": [float(a) for a in spec.scales], "budget": budget,
              "channel": channel.kind, "tau": channel.tau, "tokens": channel.n_tokens if channel.kind == "tokens"
              else None, "s2": channel.s2 if channel.kind == "tokens" else None, "measurement": "coordinate",
              "layers": budget, "width": 1, "samples": samples, "seed": seed}
    return Bounds(lower, lower_how, found[best], best, exact_value, exact_how, found, diffs, inputs)


def best_adaptive(prior, budget: int, tau=None, *, tokens=None, s2=0.01, samples: int = 20_000, seed: int = 0,
                  candidates=None, select_samples: int = 2000, return_all: bool = False, threads=None):
    """The best adaptive policy the engine finds (``L = B``, ``d = 1``) under the given noise.
    Candidates (tree prior): ``path`` (when ``B <= K``), ``bellman_noiseless`` (the noiseless Bellman
    policy of ``fvsym`` run under noise), ``greedy_coordinate`` and ``greedy_dense`` (add ``rollout``
    with ``candidates``). They are compared on ``min(samples, select_samples)`` common random numbers
    (stream ``SELECT``); the winner is re-estimated on ``samples`` samples of the ``EVAL`` stream.
    Gaussian prior: the water-filling design (``"optimal"``; by Theorem G1 nothing adaptive beats it).
    Cost is dominated by ``greedy_dense`` (milliseconds a sample at depth 6); leave it out with
    ``candidates`` when that is too slow. Returns ``(name, Estimate)``, or ``(name, Estimate, {name:
    Estimate})`` with ``return_all``."""
    spec = numeric_prior(prior)
    channel = make_channel(spec, tau, tokens, s2)
    samples, seed = check_samples(samples), check_seed(seed)
    budget = check_budget(budget)
    if isinstance(spec, GaussSpec):
        pol = build_policy(prior, spec, channel, "optimal", budget)
        est = simulate(spec, channel, pol, budget, samples=samples, seed=seed, threads=threads)[0]
        return ("optimal", est, {"optimal": est}) if return_all else ("optimal", est)
    names = ADAPTIVE_CANDIDATES if candidates is None else tuple(candidates)
    policies = {}
    for name in names:
        if name == "path" and budget > spec.depth:
            continue
        if name in ("bellman_noiseless", "optimal") and budget > spec.dim:
            continue
        if name == "rollout" and channel.tau == 0:
            continue
        policies[name] = build_policy(prior, spec, channel, name, budget, seed=seed, threads=threads)
    if not policies:
        raise ValueError(f"no adaptive candidate applies to budget {budget} (candidates {names})")
    n_select = check_samples(min(samples, select_samples))
    scores = {
        name: simulate(spec, channel, pol, budget, samples=n_select, seed=seed, threads=threads,
                       purpose=_chunks.SELECT)[0]
        for name, pol in policies.items()
    }
    best = min(scores, key=lambda k: scores[k].value)
    est = simulate(spec, channel, policies[best], budget, samples=samples, seed=seed, threads=threads)[0]
    return (best, est, scores) if return_all else (best, est)
