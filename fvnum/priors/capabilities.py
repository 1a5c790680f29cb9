"""The questions the engine asks every numeric prior (issue 30 item 1), answered by the object instead of
dispatched on its class: :class:`Capabilities` with the defaults of a prior that has none of the structures asked
for, and :func:`capability` (an object speaking the protocol without the base class gets the default). The
numeric tree and Gaussian (``fvnum.priors.tree.TreeSpec``, ``fvnum.priors.gaussian.GaussSpec``) and every prior object
(``fvnum.priors.registry.Prior``) subclass it. A leaf module: it imports nothing of fvnum, so every module may ask.
"""
from __future__ import annotations
from fvsym.errors import InputError


class Capabilities:
    """What the engine asks of every numeric prior before it computes with it, with the defaults of a prior
    that has none of these structures. The numeric tree (``fvnum.priors.tree.TreeSpec``), the numeric Gaussian
    (``fvnum.priors.gaussian.GaussSpec``) and every :class:`Prior` answer them, so callers ask the object, never its
    class:

    - ``heap_depth``: the depth ``K`` where the coordinates ``1..D`` are the heap-numbered nodes of a binary
      tree with one value per level on each root-to-leaf path, scaled by ``scales`` (docs/theory.md section 6): the
      tree's strategies (``path``, the noisy Bellman recursion, node searches, their fused kernels) read it;
      None where they do not apply;
    - ``linear_posterior``: the posterior mean is linear in the readings (a Gaussian prior): the water-filling
      design is exactly optimal and nothing adaptive beats it (docs/theory.md section 5, Theorem G1);
    - ``exact_under_tokens``: its decoder is exact under the tokens channel (else the gaussian channel's decoder
      at ``tau(N)``, an approximation);
    - ``decodes_nodes``: its decoder takes node numbers as they are (else unit rows);
    - ``coordinate_values``: a reader of coordinates from latents without their dense values, or None;
    - ``draw_latents(n, rng)``: ``(latents, theta)`` of ``n`` samples (latents such as leaf or atom indices, or None
      where the sample is its value ``theta``);
    - ``check_floats()``, ``check_resolution(what)``, ``check_noiseless_readings(nodes, phi)``: refusals (one
      line) of numbers the kernels cannot compute in doubles; none by default;
    - ``atoms_and_weights()``: ``(atoms (M, D), log_weights (M,))`` where it is finite (the tree: its ``2^K``
      leaves), else a one-line ValueError;
    - ``exact_prior()``: the ``fvsym`` prior with exact numbers the symbolic solvers take (``fvsym.bellman``);
    - ``matched_gaussian()``: the ``fvsym.GaussianPrior`` of its covariance (exact where the prior is), which the
      linear rows of a comparison (``fvnum.theory``) and the ridge baseline are computed on.
    """

    heap_depth = None
    linear_posterior = False
    exact_under_tokens = False
    decodes_nodes = True
    coordinate_values = None
    atoms = None
    log_weights = None

    def draw_latents(self, n: int, rng):
        return self.sample(n, rng), None

    def check_floats(self) -> None:
        return None

    def check_resolution(self, what: str) -> None:
        return None

    def check_noiseless_readings(self, nodes, phi) -> None:
        return None

    def atoms_and_weights(self):
        atoms, log_weights = getattr(self, "atoms", None), getattr(self, "log_weights", None)
        if atoms is None or log_weights is None:
            raise InputError(f"{type(self).__name__} has no atoms (a finite prior or a tree prior has)")
        return atoms, log_weights

    def exact_prior(self):
        raise InputError(f"{type(self).__name__} has no exact (fvsym) form for the symbolic solvers")

    def matched_gaussian(self):
        from fvsym.priors import GaussianPrior

        return GaussianPrior(self.covariance)


def capability(prior, name: str):
    """``prior``'s answer to one of :class:`Capabilities` (its default for an object speaking the protocol
    without subclassing it)."""
    if hasattr(prior, name):
        return getattr(prior, name)
    default = getattr(Capabilities, name)
    return default.__get__(prior) if callable(default) else default
