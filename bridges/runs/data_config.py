"""The data section of a run's configuration (docs/theory.md sections 1, 6): :class:`DataConfig`, its priors and
their checks (the tree's depth and scales, the atoms prior's file or draw), and the field checks every section of
``bridges.runs.config`` shares. Its names are importable from ``bridges.runs.config`` too.

Like ``bridges.runs.config``, this module imports nothing heavier than the standard library and the shared checks
of ``fvsym._validate`` (numpy only inside the atoms prior's checks, when a run is on atoms).
"""
from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass

from fvsym._validate import check_choice, check_int, check_real
from fvsym.errors import InputError

PRIORS = ("tree", "gaussian", "atoms")  # atoms: THEORY.md section 6b, the atoms from a file or drawn (DataConfig)
COVARIANCES = ("matched", "isotropic")  # = fvsym.gaussian.COVARIANCES (a test holds them equal)
MAX_DEPTH = 16


# --- the field checks of every section (bridges.runs.config uses them too) -----------------------------
def _int(value, name: str, minimum: int, maximum: int | None = None) -> int:
    if isinstance(value, float):  # a configuration field is an int, not a float that happens to be whole
        raise InputError(f"{name} must be an integer, got {value!r}")
    return check_int(value, name, minimum, maximum)


def _float(value, name: str, low: float = -math.inf, high: float = math.inf, *, open_low=False, open_high=False):
    if isinstance(value, str):
        raise InputError(f"{name} must be a finite number, got {value!r}")
    return check_real(value, name, low, high, open_low=open_low, open_high=open_high)


_choice = check_choice


def _set(obj, name, value):  # normalise a field of a frozen dataclass inside __post_init__
    object.__setattr__(obj, name, value)


# --- the tree of a study -----------------------------------------------------------------------------
def _tree_scales(depth: int, scales) -> tuple[str, ...]:
    """General tree scales checked by ``fvsym.priors.TreePrior`` (count = depth, > 0, non-increasing), as
    exact rational strings (``0.5`` and ``"1/2"`` are both ``"1/2"``)."""
    from fvsym.priors import TreePrior  # sympy: loaded only when scales are given

    if isinstance(scales, (str, bytes)) or not hasattr(scales, "__iter__"):
        raise InputError(f"scales must be a sequence of depth={depth} numbers such as (1, 1/2, 1/3), got {scales!r}")
    prior = TreePrior(depth, scales=list(scales))
    for k, a in enumerate(prior.scales, 1):
        if not a.is_Rational:
            raise InputError(f"scales must be rational numbers such as 1/3, got a_{k} = {a}")
    return tuple(str(a) for a in prior.scales)


def tree_label(alpha, scales) -> str:
    """``alpha 0.5`` or ``scales 1, 1/2, 1/3``: how a report names the tree of a study."""
    return f"alpha {alpha}" if scales is None else "scales " + ", ".join(scales)


def study_tree(cfg, default_depth: int, default_alpha: float | None = None) -> None:
    """Normalise the tree fields ``depth``, ``alpha``, ``scales`` of a study configuration (a frozen dataclass)
    as ``DataConfig`` does: ``alpha`` ``default_alpha`` (None: DataConfig's 0.5) unless ``scales`` are given,
    ``depth`` the number of scales or ``default_depth``; the scales as exact strings. ValueError (one line) on
    bad or conflicting values."""
    if cfg.scales is not None and cfg.alpha is not None:
        raise InputError(f"give alpha or scales, not both (got alpha={cfg.alpha!r} and scales)")
    if cfg.scales is not None and (isinstance(cfg.scales, (str, bytes)) or not hasattr(cfg.scales, "__len__")):
        raise InputError(f"scales must be a sequence of numbers such as (1, 1/2, 1/3), got {cfg.scales!r}")
    depth = cfg.depth if cfg.depth is not None else default_depth if cfg.scales is None else len(cfg.scales)
    alpha = default_alpha if cfg.alpha is None and cfg.scales is None else cfg.alpha
    data = DataConfig(depth=depth, alpha=alpha, n_tokens=cfg.n_tokens, s2=cfg.s2, scales=cfg.scales)  # validates
    _set(cfg, "depth", data.depth)
    _set(cfg, "alpha", data.alpha)
    _set(cfg, "scales", data.scales)


# --- the data section --------------------------------------------------------------------------------
ATOMS_FIELDS = ("atoms", "diversity", "atoms_dim", "atoms_seed", "atoms_sha256")  # DataConfig's atoms prior
ATOMS_MAX = 10**8  # = fvnum.priors.atoms.MAX_ATOMS and MAX_DIM (a test holds them equal; this module loads no numpy)
ATOMS_MAX_DIM = 10**6


def built_from_options(prior: str) -> bool:
    """Whether the registered prior ``prior`` is built from its own options (``fvnum.priors.registry.PriorEntry.from_options``:
    the atoms prior, from a file or drawn), not from a tree's depth and scales."""
    from fvnum.priors.registry import prior_entry

    return prior_entry(prior).from_options is not None


@dataclass(frozen=True)
class DataConfig:
    """Contexts of docs/theory.md section 1: ``prior`` over ``theta`` in R^D with ``D = 2^depth - 1``.

    ``cov`` (``matched`` to the tree of the same ``depth``/``alpha``, or ``isotropic`` ``I_D``) applies to
    the gaussian prior only and defaults to ``matched`` there; ``n_tokens`` is N, ``s2`` the label noise.
    ``alpha`` (default 0.5) gives the tree's scales ``a_k = alpha^((k-1)/2)``; ``scales`` instead gives general
    ones ``a_1 >= .. >= a_K > 0`` (``depth`` entries, exact rationals such as ``"1/2"``; checked by
    ``fvsym.priors.TreePrior``, kept as strings such as ``("1", "1/2", "1/3")``), and then ``alpha`` is None.
    ``to_dict()`` leaves ``scales`` out when it is None, so configurations by ``alpha`` keep their keys.

    The atoms prior (docs/theory.md section 6; a prior the registry builds from its options, ``fvnum.priors.registry``): ``atoms``
    (the path of an ``(M, D)`` ``.npy`` file, read and checked here, its SHA-256 kept in ``atoms_sha256``) or
    ``diversity`` M with ``atoms_dim`` D (atoms drawn once from ``N(0, I_D)`` by ``atoms_seed``, which
    ``RunConfig`` sets to the run's seed unless given: ``fvnum.priors.atoms.AtomsPrior.draw``); ``atoms_dim`` is D in
    both cases (a file's own D, checked when given). ``depth``, ``alpha``, ``scales`` and ``cov`` do not apply to
    it (``depth`` is None). The path is where the atoms were found, not what they are: it stays out of the run's
    key (``RunConfig.key_dict``), the digest enters it. Every atoms field is left out of ``to_dict()`` when None.
    """

    prior: str = "tree"
    depth: int | None = 4
    alpha: float | None = None
    n_tokens: int = 128
    s2: float = 0.01
    cov: str | None = None
    scales: tuple[str, ...] | None = None
    atoms: str | None = None
    diversity: int | None = None
    atoms_dim: int | None = None
    atoms_seed: int | None = None
    atoms_sha256: str | None = None

    def __post_init__(self):
        _choice(self.prior, "prior", PRIORS)
        if built_from_options(self.prior):
            self._check_atoms()
            return
        given = [f for f in ATOMS_FIELDS if getattr(self, f) is not None]
        if given:
            raise InputError(f"{given[0]}={getattr(self, given[0])!r:.60} applies to the atoms prior, not to "
                             f"prior={self.prior!r}")
        _int(self.depth, "depth", 1, MAX_DEPTH)
        if self.scales is None:
            alpha = 0.5 if self.alpha is None else self.alpha
            _set(self, "alpha", _float(alpha, "alpha", 0.0, 1.0, open_low=True, open_high=True))
        elif self.alpha is not None:
            raise InputError(f"give alpha or scales, not both (got alpha={self.alpha!r} and scales)")
        else:
            _set(self, "scales", _tree_scales(self.depth, self.scales))
        _int(self.n_tokens, "n_tokens (N)", 1)
        _set(self, "s2", _float(self.s2, "s2", 0.0))
        if self.prior == "gaussian":
            if self.cov == "tree":  # the spelling of `fv derive`/`fv mc` before the names of THEORY.md
                raise InputError("cov 'tree' is now called 'matched' (the matched Gaussian of the tree prior)")
            _set(self, "cov", _choice("matched" if self.cov is None else self.cov, "cov", COVARIANCES))
        elif self.cov is not None:
            raise InputError(f"cov={self.cov!r} applies only to the gaussian prior, not to prior={self.prior!r}")
        if self.scales is not None and self.cov == "isotropic":
            raise InputError("scales apply to the tree prior and the matched gaussian, not to cov='isotropic'")

    def _check_atoms(self) -> None:
        """The fields of the atoms prior (class docstring): one of ``atoms`` or ``diversity``, D known and
        consistent; the file read, checked and digested unless its digest and D are given (a stored run, whose
        atoms the run folder keeps: ``bridges.training.data.atoms_prior`` finds them by their digest)."""
        for name, value in (("depth", self.depth if self.depth != DataConfig.depth else None), ("alpha", self.alpha),
                            ("scales", self.scales), ("cov", self.cov)):
            if value is not None:
                raise InputError(f"{name}={value!r:.40} applies to the tree and gaussian priors, not to the atoms "
                                 f"prior (its atoms give D)")
        _set(self, "depth", None)
        if (self.atoms is None) == (self.diversity is None):
            raise InputError("the atoms prior needs exactly one of atoms (an (M, D) .npy file) or diversity M (with "
                             f"D), got {'both' if self.atoms is not None else 'neither'}")
        if self.atoms_dim is not None:
            _int(self.atoms_dim, "dim D", 1, ATOMS_MAX_DIM)
        if self.diversity is not None:
            _int(self.diversity, "diversity M", 1, ATOMS_MAX)
            if self.atoms_dim is None:
                raise InputError(f"diversity M = {self.diversity} needs the atoms' dimension D (--dim)")
            if self.atoms_sha256 is not None:
                raise InputError("atoms_sha256 is the digest of an atoms file; drawn atoms (diversity) have none")
            if self.atoms_seed is not None:
                _int(self.atoms_seed, "atoms_seed", 0, 2**63 - 1)
            from fvsym.guards.limits import check_memory  # before any run folder: the atoms are drawn when training starts

            check_memory(f"{self.diversity} atoms of dimension {self.atoms_dim}", 16.0 * self.diversity * self.atoms_dim)
            return
        if self.atoms_seed is not None:
            raise InputError(f"atoms_seed={self.atoms_seed!r} draws the atoms of diversity M; atoms read from a file "
                             "take none")
        if not isinstance(self.atoms, str) or not self.atoms:
            raise InputError(f"atoms must be the path of an (M, D) .npy file, got {self.atoms!r:.60}")
        if self.atoms_sha256 is not None and not (isinstance(self.atoms_sha256, str)
                                                  and re.fullmatch(r"[0-9a-f]{64}", self.atoms_sha256)):
            raise InputError(f"atoms_sha256 must be 64 hex digits (a SHA-256), got {self.atoms_sha256!r:.80}")
        if self.atoms_sha256 is None or self.atoms_dim is None:
            from fvnum.priors.atoms_arrays import read_atoms_file  # numpy: loaded only for a run on atoms

            arr, digest = read_atoms_file(self.atoms, self.atoms_sha256)
            if self.atoms_dim is not None and arr.shape[1] != self.atoms_dim:
                raise InputError(f"atoms file {self.atoms[:80]!r} holds atoms of dimension D = {arr.shape[1]}, "
                                 f"not the D = {self.atoms_dim} given (--dim)")
            _set(self, "atoms_dim", int(arr.shape[1]))
            _set(self, "atoms_sha256", digest)

    def to_dict(self) -> dict:
        """The fields as a JSON-able dict; ``scales`` (a list) only where it is given, the atoms fields only
        where they are given."""
        d = dataclasses.asdict(self)
        for name in ATOMS_FIELDS:
            if d[name] is None:  # the keys of every tree and Gaussian configuration stay as they were
                del d[name]
        if d["scales"] is None:
            del d["scales"]  # the keys of every configuration by alpha stay as they were before scales existed
        else:
            d["scales"] = list(d["scales"])
        return d

    @property
    def dim(self) -> int:
        """``D = 2^depth - 1`` (the gaussian priors live in the same space as the tree of that depth); the atoms'
        D for the atoms prior."""
        return self.atoms_dim if self.depth is None else 2**self.depth - 1

    @property
    def has_leaves(self) -> bool:
        """Whether its prior has leaves (the registered prior's ``heap``, ``fvnum.priors.registry.PriorEntry``): leaf signs,
        divergence depths, the path policy and the exact decoder over its ``2^K`` leaves."""
        from fvnum.priors.registry import prior_entry

        return prior_entry(self.prior).heap
