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
  (m, B, D), m = 1 or n), as ``fvnum.priors.tree.posterior_losses`` for the tree;
- ``policy(strategy, channel, budget, **options)``: the Policy of a strategy (the
  ``fvnum.policies.strategies.Strategy`` object) this prior builds itself, or None where the strategy builds its own
  (the strategies every prior shares: ``fixed``, ``top_levels``, ``policy``, and a user's); a ValueError for one
  that does not apply to it. Choose by the strategy's class, not its name: a prior class registers its policies
  for pairs of classes (``fvnum.priors.analyses``, as the finite prior does);
- ``check_cost(strategy, budget, channel, samples, threads)``: its price (and the channels it decodes) of the
  strategy object, refused in one line over the guards.

What is computed about a prior beyond these (the policies of its own strategies, their price, its noisy optimum,
its bracket, its theory rows) lives in the room that owns it and is found by the prior's class
(``fvnum.priors.analyses``): a prior's own method of that name, or the implementation registered for its class.

``register_prior(name, entry_point, ...)`` is the extension point (gymnasium's ``register``): the entry point
is the class, or a ``"module:attribute"`` string loaded on first use, so this module stays light (``fv --help``
reads the names and options without loading numpy). A prior's command-line options are :class:`PriorOption`
rows, and ``from_options`` builds the prior from them.

The tree and Gaussian priors (``fvsym.priors``) are registered by name; the engine still reaches their
numbers through ``fvnum.priors.tree.numeric_prior`` (their ``TreeSpec`` and ``GaussSpec`` views).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from importlib import import_module

from fvnum.priors.capabilities import Capabilities, capability  # noqa: F401 (the questions every prior answers, named here too)
from fvsym.errors import InputError


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
    strategy: str = "top_levels"  # fv mc's default strategy on this prior: one that applies to it

    def load(self):
        """The prior's class (the entry point, imported on first use)."""
        return _resolve(self.entry_point)

    def build(self, args):
        """The prior of a namespace of its options (``fv mc``'s arguments)."""
        if self.from_options is None:
            raise InputError(f"prior {self.name!r} has no builder from options")
        return _resolve(self.from_options)(args)


PRIORS: dict = {}


def register_prior(name: str, entry_point, *, options=(), from_options=None, summary: str = "",
                   replace: bool = False, heap: bool = False, strategy: str = "top_levels") -> PriorEntry:
    """Register a prior by ``name`` (the extension point): ``entry_point`` is its class or a
    ``"module:attribute"`` string; ``options`` its command-line :class:`PriorOption` rows; ``from_options`` what
    builds it from them; ``heap`` and ``strategy`` (``fv mc``'s default strategy on it; ``top_levels``, which every
    prior shares, unless given) (:class:`PriorEntry`). A name already taken is refused unless ``replace``."""
    if not isinstance(name, str) or not name.isidentifier():
        raise InputError(f"a prior's name must be an identifier such as 'atoms', got {name!r}")
    if name in PRIORS and not replace:
        raise InputError(f"prior {name!r} is registered already (give replace=True to replace it)")
    if not (isinstance(entry_point, str) and ":" in entry_point) and not callable(entry_point):
        raise InputError(f"entry_point must be a class or 'module:attribute', got {entry_point!r}")
    for opt in options:
        if not isinstance(opt, PriorOption):
            raise InputError(f"options must be PriorOption rows, got {type(opt).__name__}")
    if not isinstance(strategy, str) or not strategy:
        raise InputError(f"a prior's default strategy must be a strategy's name, got {strategy!r}")
    entry = PriorEntry(name, entry_point, tuple(options), from_options, summary, heap=bool(heap), strategy=strategy)
    PRIORS[name] = entry
    return entry


def prior_entry(name: str) -> PriorEntry:
    if name not in PRIORS:
        raise InputError(f"unknown prior {name!r}; choose one of {', '.join(PRIORS)}")
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


def atoms_of(prior):
    """``(atoms (M, D), log_weights (M,))`` of a prior with atoms: a prior object with ``atoms``, or a ``fvsym``
    tree prior with numeric scales (its ``2^K`` leaves, uniform; docs/theory.md section 6): the numeric prior's
    ``atoms_and_weights()`` (``fvnum.priors.capabilities.Capabilities``), as float arrays."""
    import numpy as np

    atoms, log_w = capability(numeric(prior), "atoms_and_weights")()
    return np.asarray(atoms, dtype=float), np.asarray(log_w, dtype=float)


def numeric(prior):
    """The object the engine computes with: a prior object itself, or the numeric view of a ``fvsym`` tree or
    Gaussian prior (``fvnum.priors.tree.numeric_prior``)."""
    if is_prior_object(prior):
        return prior
    from fvnum.priors.tree import numeric_prior

    return numeric_prior(prior)


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

    def policy(self, strategy, channel, budget: int, **options):
        """The Policy of ``strategy`` (its object) built by this prior, or None: the strategy builds its own."""
        return None

    def check_cost(self, strategy, budget: int, channel, samples: int, threads=None) -> None:
        """Refuse (one-line ValueError) a Monte Carlo run over the guards; none by default."""
        return None

    def work_floats(self, budget: int) -> int:
        """Floats of work per sample of the decoder (sizes the engine's chunks)."""
        return self.dim * (budget + 1)


# --- the built-in priors ---------------------------------------------------------------------------------
register_prior("tree", "fvsym.priors:TreePrior", summary="the hierarchical tree prior (docs/theory.md section 6)",
               heap=True, strategy="path")
register_prior("gaussian", "fvsym.priors:GaussianPrior", summary="theta ~ N(0, C) (docs/theory.md section 5)",
               strategy="optimal")  # water-filling: adaptivity buys nothing on a Gaussian (Theorem G1)
register_prior(
    "atoms", "fvnum.priors.atoms:AtomsPrior", from_options="fvnum.priors.atoms:atoms_from_options",
    summary="theta uniform (or weighted) over M given atoms (docs/theory.md section 6)", strategy="greedy_coordinate",
    options=(PriorOption("--atoms", "path", "atoms prior: an (M, D) .npy file of the atoms"),
             PriorOption("--diversity", "int", "atoms prior: M atoms drawn once from N(0, I_D) by --seed "
                         "(with --dim D)", minimum=1),
             PriorOption("--dim", "int", "dimension D: of the isotropic Gaussian (--prior gaussian --cov isotropic; "
                         "default 2^K - 1), or of the atoms of --diversity", minimum=1)),
)
register_prior("mixture", "fvnum.priors.mixture:MixturePrior", strategy="greedy_coordinate",
               summary="a mixture of priors with atoms: the union of their atoms, weighted (docs/theory.md section 6)")
