"""Priors as self-describing objects (issue 30 item 1): the protocol the engine asks of a prior, and the one
registry ``PRIORS`` where every prior is found by name.

A prior object (a subclass of :class:`Prior`, or any object with the same methods) carries what the engine
asks of it, so ``loss_mc``, ``fv mc`` and the decoders ask the object, never its name:

- ``name`` (its registry name) and ``dim`` (``D``);
- ``sample(n, rng)``: ``n`` latents (an array whose first axis is the sample; for a finite prior, atom
  indices), and ``thetas(latents)``: their ``(n, D)`` values;
- ``atoms`` ``(M, D)`` and ``log_weights`` ``(M,)`` where the prior is finite (else None);
  ``mean`` ``(D,)``, ``covariance`` ``(D, D)``, ``second_moment`` ``E||theta||^2``, ``eigenvalues`` of the
  covariance (largest first; the channel compares its noise with them);
- ``posterior_means(channel, design, phi)`` and ``posterior_losses(channel, design, phi, latents)``: the exact
  Bayes decoder given readings ``phi`` (n, B) of ``design`` (node numbers (n, B), 0 idle, or unit rows
  (m, B, D), m = 1 or n), as ``fvnum.tree.posterior_losses`` for the tree;
- ``policy(strategy, channel, budget, **options)``: the Policy of a strategy this prior builds itself, or
  None for the strategies every prior shares (``fixed``, ``top_levels``, ``policy``); a ValueError for one
  that does not apply to it;
- ``check_cost(strategy, budget, channel, samples, threads)``: its price (and the channels it decodes), refused in
  one line over the guards.

``register_prior(name, entry_point, ...)`` is the extension point (gymnasium's ``register``): the entry point
is the class, or a ``"module:attribute"`` string loaded on first use, so this module stays light (``fv --help``
reads the names and options without loading numpy). A prior's command-line options are :class:`PriorOption`
rows, and ``from_options`` builds the prior from them.

The tree and Gaussian priors (``fvsym.priors``) are registered by name; the engine still reaches their
numbers through ``fvnum.tree.numeric_prior`` (their ``TreeSpec`` and ``GaussSpec`` views).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module


@dataclass(frozen=True)
class PriorOption:
    """One command-line option of a prior: ``flag`` (``--atoms``), ``kind`` (``int`` or ``path``), ``help``,
    ``minimum`` (ints). ``fvnum.cli`` makes an argparse option of it (shared flags are added once)."""

    flag: str
    kind: str = "int"
    help: str = ""
    minimum: int | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class PriorEntry:
    """A registered prior: ``name``, ``entry_point`` (a class or ``"module:attribute"``), ``options`` (its
    :class:`PriorOption` rows), ``from_options`` (a callable or ``"module:attribute"`` building the prior from
    a namespace of those options and ``seed``; None where ``fv`` builds it itself), ``summary``; ``heap``:
    its objects' coordinates are the heap-numbered nodes of a tree (their numeric view answers ``heap_depth``:
    leaf signs, divergence depths, the exact decoder over its ``2^K`` leaves), what a caller holding only the
    name (a run configuration) asks without building the prior."""

    name: str
    entry_point: object
    options: tuple = ()
    from_options: object = None
    summary: str = ""
    extra: dict = field(default_factory=dict)
    heap: bool = False

    def load(self):
        """The prior's class (the entry point, imported on first use)."""
        return _resolve(self.entry_point)

    def build(self, args):
        """The prior of a namespace of its options (``fv mc``'s arguments)."""
        if self.from_options is None:
            raise ValueError(f"prior {self.name!r} has no builder from options")
        return _resolve(self.from_options)(args)


PRIORS: dict = {}


def register_prior(name: str, entry_point, *, options=(), from_options=None, summary: str = "",
                   replace: bool = False, heap: bool = False) -> PriorEntry:
    """Register a prior by ``name`` (the extension point): ``entry_point`` is its class or a
    ``"module:attribute"`` string; ``options`` its command-line :class:`PriorOption` rows; ``from_options`` what
    builds it from them; ``heap`` (:class:`PriorEntry`). A name already taken is refused unless ``replace``."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"a prior's name must be an identifier such as 'atoms', got {name!r}")
    if name in PRIORS and not replace:
        raise ValueError(f"prior {name!r} is registered already (give replace=True to replace it)")
    if not (isinstance(entry_point, str) and ":" in entry_point) and not callable(entry_point):
        raise ValueError(f"entry_point must be a class or 'module:attribute', got {entry_point!r}")
    for opt in options:
        if not isinstance(opt, PriorOption):
            raise ValueError(f"options must be PriorOption rows, got {type(opt).__name__}")
    entry = PriorEntry(name, entry_point, tuple(options), from_options, summary, heap=bool(heap))
    PRIORS[name] = entry
    return entry


def prior_entry(name: str) -> PriorEntry:
    if name not in PRIORS:
        raise ValueError(f"unknown prior {name!r}; choose one of {', '.join(PRIORS)}")
    return PRIORS[name]


def cli_priors() -> tuple:
    """The names ``fv mc --prior`` offers: the tree, the Gaussian, and every prior built from options."""
    return tuple(n for n, e in PRIORS.items() if n in ("tree", "gaussian") or e.from_options is not None)


def _resolve(target):
    if not isinstance(target, str):
        return target
    module, _, attr = target.partition(":")
    return getattr(import_module(module), attr)


def is_prior_object(prior) -> bool:
    """Whether ``prior`` speaks the protocol of this module itself (its decoder, sampling and policies)."""
    return isinstance(prior, Prior) or all(callable(getattr(prior, m, None))
                                           for m in ("sample", "thetas", "posterior_losses", "policy"))


def numeric(prior):
    """The object the engine computes with: a prior object itself, or the numeric view of a ``fvsym`` tree or
    Gaussian prior (``fvnum.tree.numeric_prior``)."""
    if is_prior_object(prior):
        return prior
    from .tree import numeric_prior

    return numeric_prior(prior)


class Capabilities:
    """What the engine asks of every numeric prior before it computes with it, with the defaults of a prior
    that has none of these structures. The numeric tree (``fvnum.tree.TreeSpec``), the numeric Gaussian
    (``fvnum.gaussian.GaussSpec``) and every :class:`Prior` answer them, so callers ask the object, never its
    class:

    - ``heap_depth``: the depth ``K`` where the coordinates ``1..D`` are the heap-numbered nodes of a binary
      tree with one value per level on each root-to-leaf path, scaled by ``scales`` (THEORY.md section 6): the
      tree's strategies (``path``, the noisy Bellman recursion, node searches, their fused kernels) read it;
      None where they do not apply;
    - ``linear_posterior``: the posterior mean is linear in the readings (a Gaussian prior): the water-filling
      design is exactly optimal and nothing adaptive beats it (THEORY.md section 5, Theorem G1);
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
            raise ValueError(f"{type(self).__name__} has no atoms (a finite prior or a tree prior has)")
        return atoms, log_weights

    def exact_prior(self):
        raise ValueError(f"{type(self).__name__} has no exact (fvsym) form for the symbolic solvers")

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


class Prior(Capabilities):
    """The protocol of a prior object (see the module docstring); subclasses define what they have. The
    defaults: no atoms, no prior-specific strategies, no price beyond the engine's own guards."""

    name: str = "prior"

    @property
    def dim(self) -> int:  # pragma: no cover (every prior defines it)
        raise NotImplementedError(f"{type(self).__name__} must define dim")

    def sample(self, n: int, rng):  # pragma: no cover
        raise NotImplementedError(f"{type(self).__name__} must define sample(n, rng)")

    def thetas(self, latents):  # pragma: no cover
        raise NotImplementedError(f"{type(self).__name__} must define thetas(latents)")

    def posterior_losses(self, channel, design, phi, latents):  # pragma: no cover
        raise NotImplementedError(f"{type(self).__name__} must define posterior_losses(channel, design, phi, latents)")

    @property
    def mean(self):  # pragma: no cover
        raise NotImplementedError(f"{type(self).__name__} must define mean")

    @property
    def covariance(self):  # pragma: no cover
        raise NotImplementedError(f"{type(self).__name__} must define covariance")

    @property
    def second_moment(self) -> float:
        """``E||theta||^2 = tr C + ||mean||^2``."""
        import numpy as np

        return float(np.trace(np.asarray(self.covariance, dtype=float)) + np.sum(np.asarray(self.mean) ** 2))

    @property
    def eigenvalues(self):
        """Eigenvalues of the covariance, largest first (the channel compares its noise with them)."""
        import numpy as np

        return np.sort(np.maximum(np.linalg.eigvalsh(np.asarray(self.covariance, dtype=float)), 0.0))[::-1]

    def policy(self, strategy: str, channel, budget: int, **options):
        """The Policy of ``strategy`` built by this prior, or None for the shared strategies."""
        return None

    def check_cost(self, strategy: str, budget: int, channel, samples: int, threads=None) -> None:
        """Refuse (one-line ValueError) a Monte Carlo run over the guards; none by default."""
        return None

    def work_floats(self, budget: int) -> int:
        """Floats of work per sample of the decoder (sizes the engine's chunks)."""
        return self.dim * (budget + 1)


# --- the built-in priors ---------------------------------------------------------------------------------
register_prior("tree", "fvsym.priors:TreePrior", summary="the hierarchical tree prior (THEORY.md section 6)",
               heap=True)
register_prior("gaussian", "fvsym.priors:GaussianPrior", summary="theta ~ N(0, C) (THEORY.md section 5)")
register_prior(
    "atoms", "fvnum.atoms:AtomsPrior", from_options="fvnum.atoms:atoms_from_options",
    summary="theta uniform (or weighted) over M given atoms (THEORY.md section 6b)",
    options=(PriorOption("--atoms", "path", "atoms prior: an (M, D) .npy file of the atoms"),
             PriorOption("--diversity", "int", "atoms prior: M atoms drawn once from N(0, I_D) by --seed "
                         "(with --dim D)", minimum=1),
             PriorOption("--dim", "int", "dimension D: of the isotropic Gaussian (--prior gaussian --cov isotropic; "
                         "default 2^K - 1), or of the atoms of --diversity", minimum=1)),
)
register_prior("mixture", "fvnum.mixture:MixturePrior",
               summary="a mixture of priors with atoms: the union of their atoms, weighted (THEORY.md section 6b)")
