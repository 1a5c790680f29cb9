"""The analyses of a finite prior (``fvnum.priors.atoms.FinitePrior``: the atoms and mixture priors) that the
engine asks for, registered for its class (``fvnum.priors.analyses``): the policies of its own strategies
(``greedy_coordinate``, ``greedy_dense``, ``optimal``), the price of its Monte Carlo, and the bracket of its noisy
optimum (``fvnum.bounds`` on a finite prior). Its noiseless and noisy recursions are :mod:`fvnum.optimum.atoms_dp`.
"""
from __future__ import annotations

import math

import numpy as np

from fvsym.errors import InputError

from fvnum.optimum import atoms_dp
from fvnum.policies.policies import FiniteBellmanPolicy, FiniteGreedy
from fvnum.priors.atoms import GREEDY_DIRECTIONS

DECODE_OPS = 3  # per sample, atom and (reading + coordinate) of the decoder
RATE = 2e7  # elementary operations per second and thread (as fvnum.guards.limits)
GREEDY_RATE = 3e8  # the lookahead kernel's inner loop (grid point x atom x coordinate) per second and thread: measured
# 6.5e8 at M = 1024 and 4096, D = 8, budget 4, tau 0.35, on 2 cores at load 9 (studies/atoms/diversity.py)
BELLMAN_ROUTE_SECONDS = 2e-5  # per sample and layer of the noiseless policy (a Python lookup of its cell)


def finite_policy(prior, strategy: str, channel, budget: int, *, layers=None, width=None, **options):
    """``greedy_coordinate``, ``greedy_dense`` and (noiseless) ``optimal``; None for the shared strategies
    (``fixed``, ``top_levels``, ``policy``); a one-line ValueError for the others."""
    from fvnum.policies.builtin import layout as _layout

    if strategy in ("fixed", "top_levels", "policy"):
        return None
    prior._check_channel(channel)
    if strategy in ("greedy_coordinate", "greedy_dense"):
        if (layers not in (None, budget)) or (width not in (None, 1)):
            raise InputError(f"strategy {strategy!r} has layers = budget and width = 1")
        return FiniteGreedy(prior, channel.tau, budget, dense=strategy == "greedy_dense")
    if strategy == "optimal" and channel.tau == 0:
        L, d = _layout(budget, layers, width)
        return FiniteBellmanPolicy(atoms_dp.noiseless_bellman(prior, L, d), name="optimal")
    if strategy == "optimal":
        if (layers not in (None, budget)) or (width not in (None, 1)) or not atoms_dp.feasible(
                prior.atoms, channel.tau, budget):
            raise InputError(f"strategy 'optimal' under noise (tau = {channel.tau:.4g}) on the {prior.name} prior is "
                             f"solved exactly only for width 1 and budget <= {atoms_dp.MAX_BUDGET} where the "
                             f"recursion's work fits (M = {prior.n_atoms}, D = {prior.dim}, budget {budget} does "
                             "not); greedy_coordinate is an upper bound, and the noiseless optimum (tau = 0) a "
                             "lower one (fvnum.bounds brackets it)")
        return atoms_dp.atoms_noisy_bellman(prior, budget, channel, refine=False).policy
    raise InputError(f"strategy {strategy!r} does not apply to the {prior.name} prior; choose fixed, top_levels, "
                     "greedy_coordinate, greedy_dense, policy, or optimal (at tau = 0; under noise for width 1 "
                     "and budget <= 3 where its recursion fits)")


def check_finite_cost(prior, strategy: str, budget: int, channel, samples: int, threads=None) -> None:
    """Refuse (one-line ValueError) a Monte Carlo run over the time cap or the memory (``fvsym.guards.limits``):
    the decoder ``DECODE_OPS M (B + D)`` a sample; the greedy lookahead, per layer, its candidates times
    ``M (D + 1)`` times the grid (at most ``GRID_MAX`` points; the distinct readings without noise)."""
    from fvsym.guards.limits import check_memory, check_time

    from fvnum.mc._chunks import default_threads

    prior._check_channel(channel)
    threads = default_threads() if threads is None else int(threads)
    M, D, B = prior.n_atoms, prior.dim, max(int(budget), 1)
    seconds = finite_mc_seconds(prior, strategy, budget, channel, samples, threads)
    what = f"Monte Carlo of {strategy!r} on the {prior.name} prior (M = {M}, D = {D}, budget {budget})"
    check_memory(what, 8.0 * (M * D + 256 * threads * prior.work_floats(B)))
    check_time(f"{what} with {samples} samples", seconds)


def finite_mc_seconds(prior, strategy: str, budget: int, channel, samples: int, threads=None) -> float:
    """Estimated seconds of :func:`fvnum.loss_mc` of ``strategy`` on a finite prior (:func:`check_finite_cost`'s price)."""
    from fvnum.mc._chunks import default_threads
    from fvnum.mc._kernels.atoms import GRID_MAX, GRID_STEP, GRID_TAIL

    threads = default_threads() if threads is None else int(threads)
    M, D, B = prior.n_atoms, prior.dim, max(int(budget), 1)
    ops = DECODE_OPS * M * (B + D) / RATE
    if strategy in ("greedy_coordinate", "greedy_dense"):
        span = float(np.ptp(prior.atoms)) if M > 1 else 0.0
        tau = channel.tau
        grid = 1 if tau == 0 else min(GRID_MAX, (span + 2 * GRID_TAIL * tau) / (GRID_STEP * tau))
        cands = D + (GREEDY_DIRECTIONS if strategy == "greedy_dense" else 0)
        ops += B * cands * M * (D + 1) * (grid + math.log2(M + 1)) / GREEDY_RATE
        ops += (B * M * D * D / RATE if strategy == "greedy_dense" else 0)
    if strategy == "optimal" and channel.tau > 0:  # the exact noisy policy: its solve, then a solve per sample
        if atoms_dp.feasible(prior.atoms, channel.tau, B):
            return (atoms_dp.solve_seconds(prior.atoms, channel.tau, B, refine=False) + samples * ops
                    + atoms_dp.policy_seconds(prior.atoms, channel.tau, B, samples))
    elif strategy == "optimal":  # the noiseless policy routes each sample in Python, a cell lookup per layer
        ops += B * BELLMAN_ROUTE_SECONDS
    return samples * ops / max(1, min(threads, samples // 256 + 1))


def finite_bounds(prior, budget: int, channel, *, samples: int = 20_000, seed: int = 0, exact=None, threads=None,
                  progress=None):
    """Bracket the noisy adaptive optimum of a finite prior (coordinate class, ``L = budget``, ``d = 1``, gaussian
    channel), as ``fvnum.bounds`` does the tree's (a ``fvnum.optimum.bracket.Bounds``): ``lower`` the noiseless
    optimum (``fvnum.optimum.atoms_dp.noiseless_bellman``, where the atoms are at most ``BELLMAN_MAX_ATOMS``; else the
    trivial 0), ``upper`` the better Monte Carlo loss of ``greedy_coordinate`` and, where the recursion is solved,
    the exact policy; ``exact`` the solved optimum (``fvnum.optimum.atoms_dp.atoms_noisy_bellman``, where its work
    fits and its price is under half the time cap; ``exact``: force it on or off), onto which the bracket collapses
    with its error estimate."""
    from fvsym.guards.limits import check_time, max_seconds

    from fvnum.estimate import Estimate
    from fvnum.mc.channels import gaussian
    from fvnum.optimum.bracket import Bounds
    from fvnum.policies.registry import loss_mc

    M, D = prior.atoms.shape
    if channel.kind != "gaussian":
        raise InputError(f"bounds on the {prior.name} prior are the gaussian channel's (its exact decoder's); give "
                         "fvnum.gaussian(tau)")
    if not 1 <= budget <= D:
        raise InputError(f"bounds need 1 <= budget <= D = {D}, got {budget}")
    tau, skipped = channel.tau, {}
    MAX_BUDGET, MAX_WORK = atoms_dp.MAX_BUDGET, atoms_dp.MAX_WORK
    solve = tau > 0 and int(budget) <= MAX_BUDGET and atoms_dp.feasible(prior.atoms, tau, budget)
    if solve and exact is None and atoms_dp.solve_seconds(prior.atoms, tau, budget) > max_seconds() / 2:
        solve = False
        skipped["exact"] = (f"not solved: the exact recursion would take about "
                            f"{atoms_dp.solve_seconds(prior.atoms, tau, budget):.3g} s, over half the time cap")
    elif tau > 0 and not solve and exact is None:
        skipped["exact"] = (f"not solved: the exact recursion is solved for budget <= {MAX_BUDGET} where its work "
                            f"fits (M = {M}, D = {D}, budget {budget}: {atoms_dp.work(prior.atoms, tau, budget):.2g} > "
                            f"{MAX_WORK:.0g})")
    if exact is not None:
        solve = bool(exact) and tau > 0
    names = ["greedy_coordinate"] + (["optimal"] if solve else [])
    price = sum(finite_mc_seconds(prior, n, budget, channel, samples, threads) for n in names)
    check_time(f"bounds on the {prior.name} prior (M = {M}, D = {D}, budget {budget}, {samples} samples)",
               price + (atoms_dp.solve_seconds(prior.atoms, tau, budget) if solve else 0.0))
    lower = atoms_dp.noiseless_bellman(prior, budget).value if prior.n_atoms <= atoms_dp.BELLMAN_MAX_ATOMS else None
    if lower is not None:
        lower_how = "noiseless Bellman optimum over the atoms' partitions, a lower bound under any noise (Blackwell)"
    else:
        lower, lower_how = 0.0, "the trivial bound 0 (the noiseless recursion is not solved on this many atoms)"
    exact_value = exact_how = exact_error = None
    if tau == 0 and lower_how.startswith("noiseless"):
        exact_value, exact_how, exact_error = lower, "noiseless Bellman optimum", 0.0
    elif solve:
        solved = atoms_dp.atoms_noisy_bellman(prior, budget, channel)
        exact_value, exact_how, exact_error = solved.value, solved.how, solved.error
    kw = dict(samples=samples, seed=seed, threads=threads, progress=progress)
    found = {name: loss_mc(prior, name, budget, gaussian(tau), **kw) for name in names}
    best = min(found, key=lambda k: found[k].value)
    upper = found[best]
    if exact_value is not None:  # solved: the bracket collapses
        err = float(exact_error or 0.0)
        if exact_value - err > lower:
            lower, lower_how = exact_value - err, "the solved optimum less its error estimate (refined quadrature)"
        upper = Estimate(exact_value + err, 0.0, upper.n, "exact" if tau == 0 else
                         "the solved optimum plus its error estimate")
    inputs = {"prior": prior.name, "n_atoms": M, "dim": D, "budget": int(budget), "channel": "gaussian", "tau": tau,
              "measurement": "coordinate", "layers": int(budget), "width": 1, "samples": samples, "seed": seed}
    return Bounds(lower, lower_how, upper, best, exact_value, exact_how, found, {}, inputs, skipped, exact_error,
                  found[best])
