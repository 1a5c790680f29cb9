"""The analyses of a finite prior (``fvnum.priors.atoms.FinitePrior``: the atoms and mixture priors) that the
engine asks for, registered for its class (``fvnum.priors.analyses``, at the end of ``fvnum.priors.atoms``): the
policies of the strategies it builds itself and their prices, each registered for the pair (``FinitePrior``, the
strategy's class), as ``register_kl`` registers a pair of distributions: ``greedy_coordinate``, ``greedy_dense``,
``optimal`` (:class:`fvnum.policies.builtin.GreedyCoordinate`, ``GreedyDense``, ``Optimal``), the strategies every
prior shares (``fixed``, ``top_levels``, ``policy``: built by the strategy itself), and the other built-in ones
(refused in one line); the price of its Monte Carlo (:func:`finite_mc_seconds`: the decoder's, plus the pair's own),
its guard (:func:`check_finite_cost`) and the bracket of its noisy optimum (``fvnum.bounds`` on a finite prior). A
subclass of a strategy finds its base's; a user's strategy class registers its own pair the same way. Its
noiseless and noisy recursions are :mod:`fvnum.optimum.atoms_dp`.
"""
from __future__ import annotations

import math
from functools import partial

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


# --- the policies, one per (FinitePrior, strategy class) pair: prior.policy(strategy, channel, budget, **options) ---
def shared_policy(prior, strategy, channel, budget: int, **options):
    """``fixed``, ``top_levels``, ``policy``: None, the strategy builds its own policy (as on every prior)."""
    return None


def greedy_coordinate_policy(prior, strategy, channel, budget: int, *, layers=None, width=None, **options):
    """The greedy one-step lookahead over coordinates (``fvnum.policies.policies.FiniteGreedy``)."""
    return _greedy(prior, strategy, channel, budget, layers, width, dense=False)


def greedy_dense_policy(prior, strategy, channel, budget: int, *, layers=None, width=None, **options):
    """The greedy one-step lookahead over coordinates and the prior's principal directions."""
    return _greedy(prior, strategy, channel, budget, layers, width, dense=True)


def _greedy(prior, strategy, channel, budget, layers, width, *, dense: bool):
    prior._check_channel(channel)
    if (layers not in (None, budget)) or (width not in (None, 1)):
        raise InputError(f"strategy {strategy.name!r} has layers = budget and width = 1")
    return FiniteGreedy(prior, channel.tau, budget, dense=dense)


def finite_optimal_policy(prior, strategy, channel, budget: int, *, layers=None, width=None, **options):
    """``optimal``: the noiseless Bellman policy at ``tau = 0`` (any layout); under noise the exact noisy policy
    where its recursion is solved (width 1, small budgets), else a one-line ValueError."""
    from fvnum.policies.builtin import layout as _layout

    prior._check_channel(channel)
    if channel.tau == 0:
        L, d = _layout(budget, layers, width)
        return FiniteBellmanPolicy(atoms_dp.noiseless_bellman(prior, L, d), name="optimal")
    if (layers not in (None, budget)) or (width not in (None, 1)) or not atoms_dp.feasible(
            prior.atoms, channel.tau, budget):
        raise InputError(f"strategy 'optimal' under noise (tau = {channel.tau:.4g}) on the {prior.name} prior is "
                         f"solved exactly only for width 1 and budget <= {atoms_dp.MAX_BUDGET} where the "
                         f"recursion's work fits (M = {prior.n_atoms}, D = {prior.dim}, budget {budget} does "
                         "not); greedy_coordinate is an upper bound, and the noiseless optimum (tau = 0) a "
                         "lower one (fvnum.bounds brackets it)")
    return atoms_dp.atoms_noisy_bellman(prior, budget, channel, refine=False).policy


def refused_policy(prior, strategy, channel, budget: int, **options):
    """The other built-in strategies (the tree's and the searches'): a one-line ValueError."""
    prior._check_channel(channel)
    raise InputError(f"strategy {strategy.runs_as or strategy.name!r} does not apply to the {prior.name} prior; "
                     "choose fixed, top_levels, greedy_coordinate, greedy_dense, policy, or optimal (at tau = 0; "
                     "under noise for width 1 and budget <= 3 where its recursion fits)")


# --- the prices ----------------------------------------------------------------------------------------------------
def check_finite_cost(prior, strategy, budget: int, channel, samples: int, threads=None) -> None:
    """Refuse (one-line ValueError) a Monte Carlo run over the time cap or the memory (``fvsym.guards.limits``):
    the decoder ``DECODE_OPS M (B + D)`` a sample; the greedy lookahead, per layer, its candidates times
    ``M (D + 1)`` times the grid (at most ``GRID_MAX`` points; the distinct readings without noise). ``strategy``:
    its object (or a registered name)."""
    from fvsym.guards.limits import check_memory, check_time

    from fvnum.mc._chunks import default_threads
    from fvnum.policies.strategies import strategy_object

    strategy = strategy_object(strategy)
    prior._check_channel(channel)
    threads = default_threads() if threads is None else int(threads)
    M, D, B = prior.n_atoms, prior.dim, max(int(budget), 1)
    seconds = finite_mc_seconds(prior, strategy, budget, channel, samples, threads)
    what = f"Monte Carlo of {strategy.name!r} on the {prior.name} prior (M = {M}, D = {D}, budget {budget})"
    check_memory(what, 8.0 * (M * D + 256 * threads * prior.work_floats(B)))
    check_time(f"{what} with {samples} samples", seconds)


def finite_mc_seconds(prior, strategy, budget: int, channel, samples: int, threads=None) -> float:
    """Estimated seconds of :func:`fvnum.loss_mc` of ``strategy`` (its object, or a registered name) on a finite
    prior (:func:`check_finite_cost`'s price): the price registered for the pair of their classes, else the
    decoder's alone (:func:`decoder_seconds`)."""
    from fvnum.mc._chunks import default_threads
    from fvnum.policies.strategies import strategy_object
    from fvnum.priors.analyses import paired

    strategy = strategy_object(strategy)
    threads = default_threads() if threads is None else int(threads)
    price = paired(prior, "mc_seconds", strategy) or partial(decoder_seconds, prior)
    return price(strategy, budget, channel, samples, threads)


def decoder_seconds(prior, strategy, budget: int, channel, samples: int, threads: int) -> float:
    """The decoder's price, ``DECODE_OPS M (B + D)`` operations a sample: a strategy whose reads cost nothing."""
    return _spread(samples, threads, _decoder_ops(prior, budget))


def greedy_coordinate_seconds(prior, strategy, budget: int, channel, samples: int, threads: int) -> float:
    """The decoder's price plus the lookahead's over the ``D`` coordinates, per layer."""
    return _spread(samples, threads, _decoder_ops(prior, budget) + _lookahead_ops(prior, budget, channel, 0))


def greedy_dense_seconds(prior, strategy, budget: int, channel, samples: int, threads: int) -> float:
    """The decoder's price plus the lookahead's over the coordinates and the principal directions, and its dense
    rows (``B M D^2`` operations a sample)."""
    M, D, B = prior.n_atoms, prior.dim, max(int(budget), 1)
    ops = _decoder_ops(prior, budget) + _lookahead_ops(prior, budget, channel, GREEDY_DIRECTIONS)
    return _spread(samples, threads, ops + B * M * D * D / RATE)


def finite_optimal_seconds(prior, strategy, budget: int, channel, samples: int, threads: int) -> float:
    """Under noise, where its recursion is solved, the exact noisy policy: its solve, then a solve per sample (a size
    it does not solve is refused by the policy, priced here as the decoder); at ``tau = 0`` the noiseless policy,
    which routes each sample in Python, a cell lookup per layer."""
    ops, B = _decoder_ops(prior, budget), max(int(budget), 1)
    if channel.tau > 0:
        if atoms_dp.feasible(prior.atoms, channel.tau, B):
            return (atoms_dp.solve_seconds(prior.atoms, channel.tau, B, refine=False) + samples * ops
                    + atoms_dp.policy_seconds(prior.atoms, channel.tau, B, samples))
        return _spread(samples, threads, ops)
    return _spread(samples, threads, ops + B * BELLMAN_ROUTE_SECONDS)


def _decoder_ops(prior, budget: int) -> float:
    return DECODE_OPS * prior.n_atoms * (max(int(budget), 1) + prior.dim) / RATE


def _lookahead_ops(prior, budget: int, channel, directions: int) -> float:
    """The greedy lookahead's seconds a sample: per layer, its candidates (``D`` + ``directions``) times
    ``M (D + 1)`` times the grid (at most ``GRID_MAX`` points; the distinct readings without noise)."""
    from fvnum.mc._kernels.atoms import GRID_MAX, GRID_STEP, GRID_TAIL

    M, D, B = prior.n_atoms, prior.dim, max(int(budget), 1)
    span = float(np.ptp(prior.atoms)) if M > 1 else 0.0
    tau = channel.tau
    grid = 1 if tau == 0 else min(GRID_MAX, (span + 2 * GRID_TAIL * tau) / (GRID_STEP * tau))
    return B * (D + directions) * M * (D + 1) * (grid + math.log2(M + 1)) / GREEDY_RATE


def _spread(samples: int, threads: int, ops: float) -> float:
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
