"""The path strategy, fused (THEORY.md sections 6 and 8): routing, reading, optional key patching and
decoding in one pass per sample."""
from __future__ import annotations

import numpy as np
from numba import njit

from .common import _theta_at
from .coord import _coord_done, _coord_loss, _coord_posterior, _coord_scratch


@njit(cache=True, nogil=True)
def _path_reading(s, node, leaf, noise_l, stat, tokens, tau, K, scales):
    """The reading of ``node``: ``stat[s, node - 1]`` (tokens channel) or ``theta_node + tau noise``."""
    if tokens:
        return stat[s, node - 1]
    return _theta_at(leaf, node, K, scales) + tau * noise_l


@njit(cache=True, nogil=True)
def _tree_path_sim(leaves, noise, stat, tau, scales, donors, dstat, patch_layer, informed,
                   out_loss, out_phi, out_nodes):
    """Path strategy (THEORY.md section 6) for ``L = out_phi.shape[1]`` layers of width 1.

    Layer ``l`` reads the depth-``l`` node of the path decoded so far (sign of each reading, a tie
    counts as +1). Channel: ``stat`` (n, D) non-empty means the tokens channel (reading = ``stat[node]``),
    else the gaussian channel (reading = ``theta_node + tau * noise[s, l]``). Decoding: exact posterior
    with gaussian likelihood of noise ``tau``.
    Key patching (section 8) when ``patch_layer >= 1``: the donor (leaf ``donors[s]``, same noise, or
    its statistic ``dstat``) runs its own path; at layer ``patch_layer`` the target reads the donor's
    node but keeps routing by its own readings. The decoder assumes the target's own routing
    (``informed = False``) or knows the nodes actually read (``informed = True``).
    Writes ``out_loss`` (n,), ``out_phi`` (n, L) readings and ``out_nodes`` (n, L) routed nodes.
    """
    K = scales.shape[0]
    L = out_phi.shape[1]
    tokens = stat.shape[0] > 0
    cs = _coord_scratch(K, L)
    actual = np.zeros(L, dtype=np.int64)
    for s in range(leaves.shape[0]):
        leaf = leaves[s]
        node = 1
        dnode = 1
        for l in range(L):
            act = node
            if patch_layer >= 1 and l < patch_layer:
                if l == patch_layer - 1:
                    act = dnode
                else:
                    dr = _path_reading(s, dnode, donors[s] if not tokens else 0, noise[s, l], dstat, tokens, tau,
                                       K, scales)
                    dnode = 2 * dnode + (1 if dr < 0 else 0)
            r = _path_reading(s, act, leaf, noise[s, l], stat, tokens, tau, K, scales)
            out_phi[s, l] = r
            out_nodes[s, l] = node
            actual[l] = act
            node = 2 * node + (1 if r < 0 else 0)
        _coord_posterior(actual if informed else out_nodes[s], out_phi[s], tau, scales, cs)
        out_loss[s] = _coord_loss(leaf, scales, cs)
        _coord_done(cs)
