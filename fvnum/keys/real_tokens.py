"""The keyed prediction rows of Models A and B on real tokens (``best_adaptive_keyed_real``,
``best_nonadaptive_keyed_real``; tree prior, linear and weighted keys).

The law rows of :func:`fvnum.theory.keyed_curves` (``best_adaptive_keyed``: A's prediction, the greedy keyed
policy of :mod:`fvnum.keys.adaptive`; ``best_nonadaptive_keyed``: B's, the one-layer design of
:func:`fvnum.keys.nonadaptive.best_nonadaptive_keyed`) draw every reading from the family's CLT law given the leaf.
Here the same policy and the same designs read real tokens: every context draws its leaf, ``N`` tokens ``x_i ~
N(0, I_D)`` and labels ``y_i = <theta, x_i> + eps_i`` (the target contexts of
:func:`fvnum.patching.keyed.keyed_patching_table`, :func:`fvnum.keys.contexts.target_values`: the same samples and
seed give the same contexts), each key reads ``phi = (1/N) sum_i y_i f(x_i)`` of those tokens exactly
(:func:`fvnum.keys.contexts.family_readings`), and the readings are decoded as in the law rows, by the exact
posterior mean under the family's CLT law (:func:`fvnum.keys.contexts.posterior_means`). That decoder does not
know the readings are real, so each row is an achievable loss (``||theta_hat - theta||^2``, its standard error
over the contexts); its gap to the law's row is what the CLT misses at this ``N``.

A's row: layer 1 reads the best single key (``first``), layer ``k`` the row the policy chooses from the real
readings of layers ``1..k-1`` (:class:`fvnum.keys.contexts._Policy`, unpatched): at budget ``B`` it is the
unpatched loss of ``keyed_patching_table`` at ``B`` with the same samples and seed, and the policy is greedy, so
one run to the largest budget gives every smaller one. B's row: the design found at each budget (its own ``Q``),
read on the same contexts, so A and B are paired. The softmax family is refused: its A row is a search of its own
(a ``Q`` per layer, :func:`fvnum.keys.adaptive.adaptive_softmax_losses`) that this run does not follow.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fvnum.estimate import Estimate, SearchResult
from fvnum.keys.families import check_family
from fvnum.mc.channels import tokens as tokens_channel
from fvnum.mc.simulate import check_inputs
from fvsym.errors import InputError

REAL_FAMILIES = ("linear", "weighted")  # the families whose A row is the greedy policy run here
REAL_ROWS = ("best_adaptive_keyed_real", "best_nonadaptive_keyed_real")
_WHAT = ("the best_{law} {what} on real tokens ({n} tokens and labels drawn per context, the exact readings of "
         "its {family} keys, decoded by the exact posterior mean under the keys' CLT law as the law's row): an "
         "achievable loss, beside best_{law} (the readings drawn from the CLT law)")


def check_real(prior, family, samples=None) -> str:
    """``family`` when real-token rows exist for it on ``prior`` (the tree prior; linear or weighted keys) and
    ``samples`` (given: the ``real_samples`` of a comparison) is a number of contexts >= 2, else an
    :class:`~fvsym.errors.InputError` in one line. ``prior`` the name ``"tree"`` or another prior's name: the
    prior's check by its name (the prices, before any prior is built)."""
    from fvsym._validate import _short

    from fvnum.priors.capabilities import capability
    from fvnum.priors.tree import numeric_prior

    if samples is not None and (isinstance(samples, bool) or not isinstance(samples, (int, np.integer)) or samples < 2):
        raise InputError(f"real_samples must be a number of contexts >= 2 (or None: no real-token rows), got "
                         f"{_short(samples)}")

    spec = None if isinstance(prior, str) else numeric_prior(prior)
    if prior != "tree" and (spec is None or capability(spec, "heap_depth") is None):
        name = prior if spec is None else getattr(spec, "name", None) or type(spec).__name__
        raise InputError(f"real-token rows are built on the tree prior (A's keyed policy needs its leaves), not on the "
                         f"{name} prior")
    family = check_family(family, optional=True)
    if family is None:
        raise InputError("real-token rows run the keyed policies of A and B: give a key family (keyed='weighted' or "
                         "'linear'; fv: --keyed weighted or linear), got none")
    if family not in REAL_FAMILIES:
        raise InputError(f"real-token rows run the greedy keyed policy of the {' and '.join(REAL_FAMILIES)} families; "
                         f"the {family} family's adaptive row is a search of its own, not run on real tokens here")
    return family


@dataclass(frozen=True)
class RealKeyedLosses:
    """What :func:`real_keyed_losses` measured on ``samples`` real-token contexts (seed ``seed``): per budget the
    per-context losses of A's policy (``adaptive``) and of B's design (``nonadaptive``, budgets whose design was
    given or searched), and ``readings`` (samples, largest budget): A's readings, to pass back as ``readings`` to
    continue the same run to a larger budget."""

    family: str
    samples: int
    seed: int
    adaptive: dict
    nonadaptive: dict
    readings: np.ndarray

    def estimate(self, name: str, budget: int) -> Estimate:
        """The :class:`~fvnum.estimate.Estimate` of row ``name`` (:data:`REAL_ROWS`) at ``budget``."""
        if name not in REAL_ROWS:
            raise InputError(f"real-token rows are {', '.join(REAL_ROWS)}, got {name!r}")
        found = (self.adaptive if name == REAL_ROWS[0] else self.nonadaptive).get(int(budget))
        if found is None:
            raise InputError(f"no {name} at budget {budget}; measured at {sorted(self.adaptive)}")
        return Estimate.of(found, "mc, real tokens, CLT-law Bayes decoder")


def real_keyed_losses(prior, budgets, family: str = "weighted", *, n_tokens: int = 64, s2: float = 0.01,
                      samples: int = 400, seed: int = 0, first: SearchResult | None = None, designs=None,
                      design_samples: int = 8000, steps: int = 25, readings=None) -> RealKeyedLosses:
    """A's policy and B's designs (module docstring) on ``samples`` real-token contexts at every budget of
    ``budgets``. ``first``: the layer-1 design (default ``best_nonadaptive_keyed`` at budget 1, as the law row and
    ``keyed_patching_table`` take it); ``designs``: ``{budget: SearchResult}`` of B's design (a budget missing is
    searched, ``best_nonadaptive_keyed`` on ``design_samples``: 8000 is what ``fvnum.theory.keyed_curves`` searches
    on with its default 2000 samples; ``designs={}`` and ``design_samples=0``: no B row); ``steps``: the policy's
    Adam steps per layer; ``readings`` (samples, k): A's readings of its first ``k`` layers on these contexts
    (:attr:`RealKeyedLosses.readings` of a call with the same arguments): the run goes on from there. About
    ``B (B - 1) / 2`` layers of the policy's search on ``samples`` samples (:func:`real_keyed_cost`)."""
    from fvsym._validate import check_int

    from fvsym.guards.limits import check_memory, check_time
    from fvnum.keys.nonadaptive import best_nonadaptive_keyed
    from fvnum.keys.contexts import _Policy, decoded_losses, family_readings, target_values

    family = check_real(prior, family)
    spec, channel, samples, seed, _ = check_inputs(prior, tokens_channel(n_tokens, s2, None), samples=samples, seed=seed,
                                                   budget=1)
    if samples < 2:
        raise InputError(f"samples must be >= 2 (a standard error needs two), got {samples}")
    if isinstance(budgets, (str, bytes)) or not hasattr(budgets, "__iter__"):
        raise InputError(f"budgets must be a list of budgets, got {budgets!r}")
    budgets = sorted({check_int(b, "budget", minimum=1, maximum=spec.dim) for b in budgets})
    if not budgets:
        raise InputError("real-token rows need at least one budget, got none")
    designs = dict(designs or {})
    design_samples = check_int(design_samples, "design_samples", minimum=0)
    N, s2 = channel.n_tokens, channel.s2
    keyed = tokens_channel(N, s2, family)  # the channel of the keyed searches: its keys the family
    what = f"the real-token rows on {samples} contexts of {N} tokens"
    check_time(f"{what} to budget {budgets[-1]}", real_keyed_cost(spec.depth, spec.dim, budgets, samples),
               "; give fewer samples or a larger cap")
    check_memory(what, real_keyed_memory(depth=spec.depth, dim=spec.dim, budgets=budgets, samples=samples,
                                         n_tokens=N))
    if first is None:
        first = designs[1] if 1 in designs else best_nonadaptive_keyed(spec, 1, keyed, seed=seed)
    for b, found in {**designs, 0: first}.items():
        if not isinstance(found, SearchResult) or found.design is None or found.keys is None \
                or found.keys.name != family or np.shape(found.design)[0] != max(b, 1):
            raise InputError(f"designs must be one-layer {family} designs (best_nonadaptive_keyed) of their budget, "
                             f"got {found!r} at budget {b}")
    _, theta, X, _, y = target_values(spec, samples, N, s2, seed)
    policy = _Policy(spec, family, first, samples, N, s2, seed, steps)
    rows1 = np.broadcast_to(np.asarray(first.design, dtype=float)[0], (samples, spec.dim))
    prefix = None
    if readings is not None:  # the rows of the layers read: the policy's on the readings before each
        phi = np.asarray(readings, dtype=float)
        if phi.ndim != 2 or phi.shape[0] != samples or not 1 <= phi.shape[1] <= budgets[-1] \
                or not np.allclose(phi[:, 0], family_readings(first.keys, rows1, X, y), rtol=1e-9, atol=1e-12):
            raise InputError(f"readings must be A's readings (samples, k) = ({samples}, 1..{budgets[-1]}) of these "
                             f"contexts (RealKeyedLosses.readings of the same arguments), got shape {np.shape(phi)}")
        prefix = (phi, policy.rows(phi[:, :-1]))
    phi, read = policy.run(X, y, budgets[-1], prefix=prefix)
    adaptive = {b: decoded_losses(spec, first.keys, read[:, :b], phi[:, :b], theta, N, s2) for b in budgets}
    nonadaptive = {}
    for b in budgets:
        found = first if b == 1 else designs.get(b)
        if found is None and design_samples:
            found = best_nonadaptive_keyed(spec, b, keyed, seed=seed, samples=design_samples)
        if found is not None:
            nonadaptive[b] = design_losses(spec, found, X, y, theta, N, s2)
    return RealKeyedLosses(family, samples, seed, adaptive, nonadaptive, phi)


def design_losses(spec, design: SearchResult, X: np.ndarray, y: np.ndarray, theta: np.ndarray, n_tokens: int,
                  s2: float) -> np.ndarray:
    """(n,) losses of the one-layer design ``design`` (its rows and keys) on contexts ``X`` (n, N, D), ``y`` (n, N)
    with latents ``theta`` (n, D): every row read exactly, decoded as A's policy is."""
    from fvnum.keys.contexts import decoded_losses, family_readings

    W = np.asarray(design.design, dtype=float)
    rows = np.repeat(W[None], X.shape[0], axis=0)  # (n, b, D): every context reads the same rows
    phi = np.stack([family_readings(design.keys, rows[:, j], X, y) for j in range(W.shape[0])], axis=1)
    return decoded_losses(spec, design.keys, rows, phi, theta, n_tokens, s2)


def real_what(name: str, n_tokens: int, family: str) -> str:
    """What the row ``name`` (:data:`REAL_ROWS`) is, in words (the table's glossary entry)."""
    law, what = {REAL_ROWS[0]: ("adaptive_keyed", "policy"), REAL_ROWS[1]: ("nonadaptive_keyed", "design")}[name]
    return _WHAT.format(law=law, what=what, n=n_tokens, family=family)


def real_keyed_memory(*, depth: int, dim: int, budgets, samples: int, n_tokens: int) -> float:
    """Bytes (an upper estimate) :func:`real_keyed_losses` holds at once: the tokens ``X`` (samples, N, D) and two
    arrays of their size (the squares a weighted key's reading takes, a copy), the values, and the policy's search
    on ``samples`` samples (``fvnum.keys.nonadaptive.keyed_memory``'s adaptive part)."""
    from fvnum.keys.nonadaptive import keyed_memory

    return 8.0 * samples * n_tokens * (3 * dim + 4) + keyed_memory(tree=True, depth=depth, dim=dim, budgets=budgets,
                                                                   samples=samples)


def real_keyed_cost(depth: int, dim: int, budgets, samples: int) -> float:
    """Seconds of :func:`real_keyed_losses` given its designs, on the tree of ``depth`` (``dim`` coordinates): the
    policy's search chooses layer ``k``'s rows by running layers ``2..k`` again (``adaptive_keyed_trace`` on the
    readings so far), ``sum_k (k - 1)`` lookahead layers to the largest budget, at the constants of
    ``fvnum.guards.limits.keyed_cost``; and the tokens, ``samples N D`` per budget, folded into the state term."""
    from fvnum.guards.limits import KEYED_ADAPTIVE, KEYED_STATE

    last = max((int(b) for b in budgets), default=0)
    leaves = 2**depth
    return sum(samples * leaves * (KEYED_ADAPTIVE * (k - 1) + KEYED_STATE * k * dim) for k in range(2, last + 1))


__all__ = ["REAL_FAMILIES", "REAL_ROWS", "RealKeyedLosses", "check_real", "design_losses", "real_keyed_cost",
           "real_keyed_losses", "real_keyed_memory", "real_what"]
