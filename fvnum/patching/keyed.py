"""Key patching of the greedy keyed policy (:mod:`fvnum.keys.adaptive`: the adaptive prediction row of Model A
under a key family, ``linear``, ``weighted`` or ``softmax``; tree prior), on real tokens (docs/theory.md section 8).

:func:`fvnum.patching.keys.patching_table` patches the strategies of the registry; the keyed policy chooses its rows
per sample by a search, so it is patched here, by running it on drawn contexts: target leaves ``s`` uniform,
tokens ``x_1..x_N ~ N(0, I_D)`` and label noise drawn once and shared by every donor; a donor of divergence
depth ``j`` (``fvnum.patching.keys.donor_leaves``) has the target's tokens and noise, only its values
``y_i = <theta', x_i> + eps_i`` differ. Every reading is the family's exact reading of the drawn tokens
(``phi = (1/N) sum_i y_i f(x_i)``, or ``sum_i softmax_i(s(x_i)) y_i``), not a draw from its CLT law. The policy
chooses layer ``k``'s row from the readings of layers ``1..k-1`` (:func:`fvnum.keys.adaptive.adaptive_keyed_trace`
with those readings). Patching layer ``l``: the target reads at layer ``l`` the row the policy chose on the
donor's context (the donor's key), on its own values; the layers after ``l`` choose their rows from the
target's readings, patched one included; the decoder is the policy's exact Bayes decoder under the family's CLT
law for the rows the policy believes it read (its own choice at layer ``l``): a readout that does not know about
the patch, as in :mod:`fvnum.patching.keys`.

Common random numbers: every cell uses the same target contexts, so ``effect = loss - unpatched`` is paired;
layer 1's row does not depend on the context, so patching it changes nothing, bit for bit.
"""
from __future__ import annotations

import numpy as np

from fvnum.mc import _chunks
from fvnum.estimate import Estimate, SearchResult
from fvnum.keys.contexts import _Policy, decoded_losses, target_values
from fvnum.patching.keys import PatchingTable, donor_leaves
from fvnum.mc.channels import tokens_of
from fvnum.mc.simulate import check_inputs
from fvsym.errors import InputError


def donors(spec, leaves: np.ndarray, j: int, seed: int) -> np.ndarray:
    """The donor leaves of divergence depth ``j`` of :func:`keyed_patching_table`'s targets ``leaves``."""
    return donor_leaves(leaves, spec.depth, j, np.random.default_rng(_chunks.seed_sequence(seed, _chunks.DONOR + 16 * j)))


def keyed_patching_table(prior, budget: int, channel, *, samples: int = 500, seed: int = 0, patch=None,
                         search=None) -> PatchingTable:
    """The (patch layer ``l``, divergence depth ``j``) loss table of the greedy keyed policy at ``budget`` layers
    (module docstring) under ``channel``, ``fvnum.tokens(N, s2=..., keys=...)`` (``keys`` the family: ``linear``,
    ``weighted`` or ``softmax``), on ``samples`` target contexts shared by every cell. ``patch``
    (``fvnum.PatchSpec``): ``layers`` the patched layers (default 1..budget), ``depths`` the donors' divergence
    depths (default 1..K). ``search`` (``fvnum.KeyedSearch``): the policy's search, as
    :func:`fvnum.keys.adaptive.adaptive_keyed_losses` takes it (``first`` its layer-1 design, default
    ``best_nonadaptive_keyed`` at budget 1; ``steps`` its Adam steps per layer). The losses are ``||theta_hat -
    theta||^2`` of the policy's decoder; ``effect`` is paired. About ``budget (budget - 1) / 2 (1 + 2
    len(depths))`` layers of the policy's search on ``samples`` samples (the softmax family runs its torch engine:
    tens of seconds per layer on 300 samples)."""
    from fvsym._validate import check_int

    from fvnum.keys.nonadaptive import best_nonadaptive_keyed
    from fvnum.options import KeyedSearch, PatchSpec, check_options

    family = tokens_of(channel, "keyed_patching_table", keys=True).keys
    patch = check_options(patch, PatchSpec, "patch")
    search = check_options(search, KeyedSearch, "search")
    if patch.informed or patch.mean_samples is not None:
        raise InputError("keyed_patching_table decodes with the policy's own decoder and draws no mean state: give "
                         "fvnum.PatchSpec(layers=..., depths=...) only")
    spec, channel, samples, seed, budget = check_inputs(prior, channel, samples=samples, seed=seed, budget=budget,
        tree="key patching of the keyed policy needs the tree prior (divergence depth of two leaves)")
    if samples < 2:
        raise InputError(f"samples must be >= 2 (a standard error needs two), got {samples}")
    check_int(budget, "budget", minimum=1, maximum=spec.dim)
    N, s2 = channel.n_tokens, channel.s2
    K, D = spec.depth, spec.dim
    depths = tuple(range(1, K + 1)) if patch.depths is None else tuple(
        check_int(j, "divergence depth j", minimum=1, maximum=K) for j in np.atleast_1d(patch.depths).tolist())
    if not depths:
        raise InputError("depths must name at least one divergence depth")
    layers = tuple(range(1, budget + 1)) if patch.layers is None else tuple(
        check_int(l, "patch layer l", minimum=1, maximum=budget) for l in np.atleast_1d(patch.layers).tolist())
    if not layers:
        raise InputError(f"layers must name at least one patch layer in 1..{budget}")
    first = search.first
    if first is None:
        first = best_nonadaptive_keyed(spec, 1, channel, seed=seed)
    if not isinstance(first, SearchResult) or getattr(first.keys, "name", None) != family or first.design is None \
            or np.shape(first.design)[0] != 1:
        raise InputError(f"search.first must be a one-key {family} design (a SearchResult of best_nonadaptive_keyed "
                         f"at budget 1), got {type(first).__name__}")
    policy = _Policy(prior, family, first, samples, N, s2, seed, search.steps, search)
    leaves, theta, X, eps, y = target_values(spec, samples, N, s2, seed)

    def loss(phi, believed):
        return decoded_losses(spec, first.keys, believed, phi, theta, N, s2)

    phi0, rows0 = policy.run(X, y, budget)
    base = loss(phi0, rows0)
    cells = {}
    for j in depths:
        donor_theta = spec.thetas(donors(spec, leaves, j, seed))
        _, donor_rows = policy.run(X, np.einsum("nid,nd->ni", X, donor_theta) + eps, budget)
        for l in layers:  # layers 1..l-1 read what they read unpatched; the decoder believes layer l read its own row
            if np.array_equal(donor_rows[:, l - 1], rows0[:, l - 1]):  # the same key (layer 1): the unpatched run
                cells[l, j] = base.copy()
                continue
            phi, believed = policy.run(X, y, budget, patch=(l, donor_rows[:, l - 1]),
                                       prefix=(phi0[:, : l - 1], rows0[:, :l]))
            believed = believed.copy()
            believed[:, l - 1] = rows0[:, l - 1]
            cells[l, j] = loss(phi, believed)
    shape = (len(layers), len(depths))
    out = [np.zeros(shape) for _ in range(4)]
    for a, l in enumerate(layers):
        for b, j in enumerate(depths):
            cell, effect = Estimate.of(cells[l, j]), Estimate.of(cells[l, j] - base)
            out[0][a, b], out[1][a, b], out[2][a, b], out[3][a, b] = cell.value, cell.stderr, effect.value, effect.stderr
    unpatched = Estimate.of(base)
    return PatchingTable(out[0], out[1], unpatched, np.full(len(depths), unpatched.value),
                         np.full(len(depths), unpatched.stderr), samples, f"adaptive_keyed_{family}", layers, depths,
                         effect=out[2], effect_stderr=out[3], decoder=f"{family} keys' CLT law (exact Bayes)",
                         seed=seed, patched="layer l's keys (the key statistics it reads)", how="replaced by the donor's")
