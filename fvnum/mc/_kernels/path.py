"""The path strategy, fused (docs/theory.md sections 6 and 8): routing, reading, optional key patching and
decoding in one pass per sample. The routed nodes form a chain (one node per depth, each the child of
the one before), so the decoder is ``tokens._chain_loss``, O(L) per sample; only a decoder told the
nodes a patched run actually read (``informed``), or exact readings (``tau = 0``), need the closure."""
from __future__ import annotations

import numpy as np
from numba import njit

from fvnum.priors._kernels.common import _child, _theta_at
from fvnum.priors._kernels.coord import _coord_done, _coord_loss, _coord_posterior, _coord_scratch
from fvnum.priors._kernels.tokens import _chain_loss, _tokens_posterior


@njit(cache=True, nogil=True)
def _tree_path_sim(leaves, noise, stat, tau, n_tok, sigma2, scales, donors, dstat, patch_layer, informed,
                   out_loss, out_phi, out_nodes):
    """Path strategy (docs/theory.md section 6) for ``L = out_phi.shape[1]`` layers of width 1.

    Layer ``l`` reads the depth-``l`` node of the path decoded so far (sign of each reading, a tie
    counts as +1). Channel: ``stat`` (n, D) non-empty means the tokens channel (reading = ``stat[node]``),
    else the gaussian channel (reading = ``theta_node + tau * noise[s, l]``). Decoding: the exact
    posterior under the tokens law ``(n_tok, sigma2)`` when ``n_tok > 0`` (``tokens``), else under the gaussian
    likelihood of noise ``tau``.
    Key patching (section 8) when ``patch_layer >= 1``: the donor (leaf ``donors[s]``, same noise, or
    its statistic ``dstat``) runs its own path; at layer ``patch_layer`` the target reads the donor's
    node but keeps routing by its own readings. The decoder assumes the target's own routing
    (``informed = False``) or knows the nodes actually read (``informed = True``).
    Writes ``out_loss`` (n,), ``out_phi`` (n, L) readings and ``out_nodes`` (n, L) routed nodes.
    """
    K = scales.shape[0]
    L = out_phi.shape[1]
    tokens = stat.shape[0] > 0
    exact_tokens = n_tok > 0
    general = (informed and patch_layer >= 1) or (tau == 0 and not exact_tokens)
    cs = _coord_scratch(K, L)
    w = (np.zeros(L), np.zeros(L), np.zeros(L), np.zeros(L))
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
                    if tokens:
                        dr = dstat[s, dnode - 1]
                    else:
                        dr = _theta_at(donors[s], dnode, K, scales) + tau * noise[s, l]
                    dnode = _child(dnode, dr)
            if tokens:
                r = stat[s, act - 1]
            else:
                r = _theta_at(leaf, act, K, scales) + tau * noise[s, l]
            out_phi[s, l] = r
            out_nodes[s, l] = node
            actual[l] = act
            node = _child(node, r)
        if not general:
            out_loss[s] = _chain_loss(leaf, out_nodes[s], out_phi[s], tau, n_tok, sigma2, scales, w)
            continue
        read = actual if informed else out_nodes[s]
        if exact_tokens:
            _tokens_posterior(read, out_phi[s], n_tok, sigma2, scales, cs)
        else:
            _coord_posterior(read, out_phi[s], tau, scales, cs)
        out_loss[s] = _coord_loss(leaf, scales, cs)
        _coord_done(cs)
