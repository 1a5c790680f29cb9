"""A mixture of priors with atoms (docs/theory.md section 6), added through the public extension points alone
(``fvnum.priors.registry.register_prior``, ``fvnum.priors.atoms.FinitePrior`` and ``fvnum.priors.atoms.atoms_of``): the union of the
components' atoms, component ``c``'s atom ``m`` weighted ``pi_c w_{c,m}``. For example two trees of different
``alpha``, or a tree and the same tree turned by an orthogonal matrix::

    from fvnum.priors.atoms import AtomsPrior
    tree = TreePrior(3, "1/2")
    MixturePrior([tree, TreePrior(3, "1/4")])           # equal weights
    MixturePrior([tree, AtomsPrior.of(tree).rotated(Q)], [0.7, 0.3])

Everything else is the finite prior's: its sampling and exact decoder, and the analyses registered for its class
(``fvnum.priors.analyses``: greedy policies, the noiseless and noisy Bellman recursions, the bracket, the price,
the theory rows).
"""
from __future__ import annotations

import numpy as np

from fvsym._validate import _short

from fvnum.priors.atoms import FinitePrior
from fvnum.priors.registry import atoms_of
from fvnum.priors.atoms_arrays import check_weights
from fvsym.errors import InputError


class MixturePrior(FinitePrior):
    """``theta`` drawn from component ``c`` (one of ``priors``, each a prior with atoms: a finite prior or a
    tree prior) with probability ``weights[c]`` (non-negative, summing to more than 0; normalised; None, the
    default: the components equally likely, as ``AtomsPrior``'s atoms are)."""

    name = "mixture"

    def __init__(self, priors, weights=None):
        if isinstance(priors, (str, bytes)) or not hasattr(priors, "__len__") or len(priors) == 0:
            raise InputError(f"priors must be a non-empty list of priors with atoms, got {_short(priors)}")
        pi = np.ones(len(priors)) if weights is None else check_weights(weights, len(priors), "component")
        parts = [atoms_of(p) for p in priors]
        dims = {a.shape[1] for a, _ in parts}
        if len(dims) > 1:
            raise InputError(f"the components of a mixture must share their dimension D, got {sorted(dims)}")
        atoms = np.concatenate([a for a, _ in parts])
        with np.errstate(divide="ignore"):
            log_w = np.concatenate([np.log(p / pi.sum()) + lw for p, (_, lw) in zip(pi, parts)])
        self.priors, self.mixture_weights = tuple(priors), pi / pi.sum()
        self.component = np.repeat(np.arange(len(parts)), [a.shape[0] for a, _ in parts])
        self._set(atoms, np.exp(log_w))

    def to_dict(self) -> dict:
        return {**super().to_dict(), "components": [repr(p) for p in self.priors],
                "weights": self.mixture_weights.tolist()}

    def __repr__(self) -> str:
        parts = ", ".join(f"{w:.3g} {p!r}" for w, p in zip(self.mixture_weights, self.priors))
        return f"MixturePrior({parts}; M={self.n_atoms}, D={self.dim})"
