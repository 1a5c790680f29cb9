"""The theory rows of a finite prior (``fvnum.priors.atoms.FinitePrior``: the atoms and mixture priors) beside the
models trained on it: what ``fvnum.comparison_table`` answers for such a prior (registered for its class,
``fvnum.priors.analyses``), and its price. The ridge baseline and the linear readout without intercept are
``fvnum.linear_theory``'s (``ridge_loss``, ``ridge_optimum``, ``linear_loss``, ``top_directions``)."""
from __future__ import annotations

import numpy as np

from fvsym._validate import check_int
from fvsym.errors import InputError

from fvnum.linear_theory import linear_loss, ridge_loss, ridge_optimum, top_directions
from fvnum.theory import ComparisonTable, TheoryRow, _with_roles


def finite_comparison_table(prior, budget: int, channel, *, samples: int = 20_000, seed: int = 0,
                            search_samples: int = 2_000, dense: bool = True, keyed=None, threads=None):
    """The theory rows beside Models A, B, C trained on a finite prior (a ``fvnum.theory.ComparisonTable``; the
    models see the ``tokens`` ``channel``). Each model's prediction (``fvnum.model_rows``):

    - A: ``best_adaptive``, the better of the path-free adaptive policies ``greedy_coordinate`` and
      ``greedy_dense`` (``greedy_dense`` only with ``dense``) with the dMMSE decoder, chosen on
      ``search_samples`` samples and reported on them (the best adaptive policy found on atoms; an upper bound
      on the linear-key adaptive optimum of the gaussian channel);
    - B: ``best_nonadaptive_unit``, the best of the fixed designs: the top eigen-directions of ``S``, of the
      covariance, and the first ``B`` coordinates, with the dMMSE decoder (chosen on ``search_samples``
      samples of another seed, reported on ``samples``);
    - C: ``top_levels_linear``, the exact linear theory of the top eigen-directions of ``S`` (no intercept,
      as C's readout) under the models' channel, equal to ``best_linear_nonadaptive`` (Ky Fan: no linear
      estimator with linear keys and no intercept beats it, a lower bound for C).

    dMMSE rows are computed under the gaussian channel at the models' ``tau`` (the atoms prior's exact decoder
    is the gaussian channel's: under ``tokens`` the noise reveals ``||theta||^2``, which the atoms do not
    share), and say so (``channel: gaussian``); they are references for the trained models, not bounds.
    Reference rows: ``top_levels`` (dMMSE, coordinates ``1..B``), ridge (the Gaussian of the atoms' mean and
    covariance) on those coordinates (``ridge_top_levels``) and with its best design (``gaussian_optimum``),
    exact. Keyed rows (``keyed``) are not built on this prior: refused in one line."""
    from fvnum.mc.channels import gaussian
    from fvnum.options import StrategyOptions
    from fvnum.policies.registry import loss_mc

    if keyed is not None:
        raise InputError(f"keyed rows (key family {keyed!r}) are not built on the {prior.name} prior: their laws "
                         "and searches are the tree's and the Gaussian's; give keyed=None (fv compare: --keyed none)")
    B = check_int(budget, "budget", minimum=1, maximum=prior.dim)
    tau = channel.tau
    gauss = {"threads": threads, "progress": False}
    ch = gaussian(tau)
    here = f"dMMSE decoder, gaussian channel at the models' tau = {tau:.4g}"
    rows = [TheoryRow.mc("top_levels", loss_mc(prior, "top_levels", B, ch, samples=samples, seed=seed, **gauss),
                         f"non-adaptive, coordinates 1..B, {here}", "gaussian")]
    found = []
    for strategy in ("greedy_coordinate", "greedy_dense")[: 2 if dense else 1]:
        found.append((loss_mc(prior, strategy, B, ch, samples=search_samples, seed=seed, **gauss), strategy))
    est, name = min(found, key=lambda f: f[0].value)
    rows.append(TheoryRow.mc("best_adaptive", est, f"best adaptive policy found on atoms: {name} (of "
                             f"{', '.join(n for _, n in found)}), {here}", "gaussian", policy=name))
    designs = {"top eigen-directions of E[theta theta^T]": top_directions(prior, B),
               "top eigen-directions of the covariance": _top_eigen(prior.covariance, B),
               "coordinates 1..B": np.arange(1, B + 1, dtype=np.int64)}
    scored = [(loss_mc(prior, "fixed", B, ch, options=StrategyOptions(design=d), samples=search_samples,
                       seed=seed + 1, **gauss).value, what)
              for what, d in designs.items()]
    what = min(scored)[1]
    est = loss_mc(prior, "fixed", B, ch, options=StrategyOptions(design=designs[what]), samples=samples,
                  seed=seed, **gauss)
    rows.append(TheoryRow.mc("best_nonadaptive_unit", est, f"best non-adaptive design found: {what} (of "
                             f"{len(designs)} fixed designs), {here}", "gaussian"))
    linear = linear_loss(prior, top_directions(prior, B), channel)
    rows.append(TheoryRow.exact("top_levels_linear", linear, "exact linear theory: the top eigen-directions of "
                                "E[theta theta^T], linear keys, linear readout without intercept (Model C's)",
                                channel.kind))
    rows.append(TheoryRow.exact("best_linear_nonadaptive", linear, "best linear non-adaptive loss (any linear "
                                "keys, linear readout without intercept; Ky Fan on E[theta theta^T]): no such "
                                "estimator beats it", channel.kind))
    coords = np.arange(1, B + 1, dtype=np.int64)
    rows.append(TheoryRow.exact("ridge_top_levels", ridge_loss(prior, coords, tau), "ridge (the Gaussian of the "
                                "atoms' mean and covariance) on coordinates 1..B, gaussian channel at the same tau",
                                "gaussian"))
    rows.append(TheoryRow.exact("gaussian_optimum", ridge_optimum(prior, B, tau), "ridge with its best unit design "
                                "(water-filling on the atoms' covariance), gaussian channel at the same tau",
                                "gaussian"))
    return ComparisonTable(prior.name, B, channel, int(samples), int(seed), _with_roles(rows))


def finite_comparison_seconds(prior, budget: int, channel, *, samples: int = 20_000, search_samples: int = 2_000,
                              dense: bool = True, threads=None) -> float:
    """The price of :func:`finite_comparison_table` (its Monte Carlo runs, by
    ``fvnum.optimum.finite.finite_mc_seconds``)."""
    from fvnum.mc.channels import gaussian, make_channel
    from fvnum.optimum.finite import finite_mc_seconds

    gauss = make_channel(prior, gaussian(channel.tau))
    mc = lambda strategy, n: finite_mc_seconds(prior, strategy, budget, gauss, n, threads)  # noqa: E731
    adaptive = mc("greedy_coordinate", search_samples) + (mc("greedy_dense", search_samples) if dense else 0.0)
    return adaptive + 2 * mc("top_levels", samples) + 3 * mc("top_levels", search_samples)


def _top_eigen(matrix, budget: int) -> np.ndarray:
    """The ``budget`` leading eigen-directions of a symmetric ``matrix`` as unit rows (B, D)."""
    _, V = np.linalg.eigh(np.asarray(matrix, dtype=float))
    return np.ascontiguousarray(V[:, ::-1][:, : int(budget)].T)
