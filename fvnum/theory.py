"""The theory side of a comparison with trained models (docs/theory.md sections 3 to 7), for one prior, one
budget and one :class:`~fvnum.mc.channels.Channel`.

Every row carries the channel it is for (``channel``): the channel the models see (``tokens``, or the
``gaussian`` channel when that is the one given), or says plainly which other one it is (``gaussian``:
the gaussian channel at the same ``tau``; ``noiseless``: ``tau = 0``). Monte Carlo rows come from
``fvnum`` under the given channel; exact rows from ``fvsym`` (sympy, then a float) or from the exact
linear theory (:mod:`fvnum.linear_theory`).

Every row also says what it is beside the trained models (``role``, ``models``, ``class``, ``keys``;
:data:`ROW_KINDS`, :func:`row_kind`): each model has exactly one ``prediction`` row (:func:`prediction_row`:
A the adaptive optimum found for its class and keys, B the non-adaptive one, C the exact linear theory); a
``lower_bound`` or ``upper_bound`` row is a bound where it is proven, and names the models it bounds (none
when it bounds a theory quantity only: the noiseless optimum bounds coordinate-class policies with linear
keys, not the MLP keys of Models A and B); the rest are ``reference`` rows. The models are those registered
(:data:`MODELS`, ``fvnum.model_rows``: A, B, C are declared there by their theory, each naming its rows;
``bridges`` attaches their networks and registers more).

Exact linear theory (docs/theory.md section 3): :mod:`fvnum.linear_theory` (:func:`lmmse`,
:func:`best_linear_loss`, :func:`gaussian_optimum`, Model C's readout of softmax readings), its names importable
from here too.
"""
from __future__ import annotations
from fvnum.options import KeyedSearch

from dataclasses import dataclass

from fvsym._validate import _short
from fvsym.errors import InputError

from fvnum.mc.channels import Channel
from fvnum.defaults import KEYED
from fvnum.estimate import Estimate
from fvnum.guards.limits import DESIGN_SAMPLES_PER_SAMPLE, gaussian_design_settings
from fvnum.policies.prices import mc_cost
from fvnum.model_rows import MODELS, model, plain_models
from fvnum.priors.registry import prior_entry
from fvnum.policies.strategies import adaptive_class
from fvnum.linear_theory import _check_channel, best_linear_loss, gaussian_optimum, lmmse, top_levels_rows

ROW_CHANNELS = ("tokens", "gaussian", "noiseless")
ROLES = ("prediction", "lower_bound", "upper_bound", "reference")
CLASSES = ("coordinate", "unit", "linear")  # linear: the exact linear theory (linear keys, linear readout)
# MODELS (fvnum.model_rows): the registered models, each naming its ``prediction`` rows, ``bounded_by`` and its law

# What each named row is, beside the models (THEORY.md section 7): (role when it is not a model's prediction,
# measurement class, key family). A bound is a bound only where it is proven, and for the rows and models
# named: the noiseless optimum bounds coordinate-class policies with linear keys under the gaussian channel and
# under tokens on the tree prior (Blackwell), NOT the MLP keys of Models A and B (a key that down-weights
# large-|y| tokens is less noisy, docs/theory.md) nor Model C (unit class); the best linear non-adaptive loss
# (Ky Fan) bounds every linear estimator with linear keys: Model C.
ROW_KINDS = {
    "path": ("reference", "coordinate", "linear"),
    "best_adaptive": ("upper_bound", None, "linear"),  # class from its policy
    # the keyed rows are the best found within a key family: an upper bound on THAT FAMILY's optimum (a search
    # can only overstate it), a bound on no trained model (a model's keys may lie outside the family)
    "best_adaptive_keyed": ("upper_bound", "unit", None),  # keys from the row
    "greedy_adaptive_keyed": ("upper_bound", "unit", None),  # softmax keys: the greedy search (layer-1 Q), kept
    "optimum_lower": ("lower_bound", "coordinate", "linear"),
    "optimum_upper": ("upper_bound", "coordinate", "linear"),
    "optimum_exact": ("reference", "coordinate", "linear"),
    "top_levels": ("reference", "coordinate", "linear"),
    "best_nonadaptive_coordinate": ("reference", "coordinate", "linear"),
    "best_nonadaptive_unit": ("upper_bound", "unit", "linear"),
    "best_nonadaptive_keyed": ("upper_bound", "unit", None),
    # the same policy and design on real tokens (fvnum.keys.real_tokens): achievable, so upper bounds as well
    "best_adaptive_keyed_real": ("upper_bound", "unit", None), "best_nonadaptive_keyed_real": ("upper_bound", "unit", None),
    "water_filling_mc": ("reference", "unit", "linear"),
    "top_levels_linear": ("reference", "linear", "linear"),
    "best_linear_nonadaptive": ("lower_bound", "linear", "linear"),
    "gaussian_optimum": ("reference", "unit", "linear"),
    # L steps of preconditioned gradient descent, D channels a layer, residual values (fvnum.values.gd): Model G's row
    "gd_steps": ("reference", "unit", "linear"),
}
# The one row each model is held to is named by the model object (``prediction``, first present wins;
# bridges.models.registry declares Models A, B, C of THEORY.md section 7): A the adaptive optimum found for its class
# and keys, B the non-adaptive one (unit class), C the exact linear theory of its one layer (top levels = the prior's
# top eigen-directions, the best linear design). Gaussian prior (no adaptive search): the one-layer keyed design for
# A as for B (measured, not proven: Theorem G1 is for the gaussian channel), or without keyed rows the water-filling
# design. A bound row bounds the models that name it (``bounded_by``); every other bound row bounds a theory
# quantity, no trained model.
RENAMED_ROWS = {"optimal_mc": "water_filling_mc"}  # names in tables stored before: not an optimum under tokens


def prediction_row(name: str, names) -> str | None:
    """The name of the row the model ``name`` (a registered model: :data:`MODELS`) is held to among ``names``
    (the model's ``prediction``, first present wins), or None when the table has none of its candidates."""
    candidates = model(name).prediction
    names = set(names)
    return next((n for n in candidates if n in names), None)


# The law of loss against budget each theory row should follow (THEORY.md section 6): depth (adaptive: the
# adaptive rows, and Model A: its ``law``) decays exponentially, loss ~ c r^B; one layer (non-adaptive: the
# non-adaptive rows, Models B and C) as a power, loss ~ c B^-e. A model's law is its own (``MODELS[name].law``).
PREDICTED_LAW = {
    "path": "exponential", "best_adaptive": "exponential", "best_adaptive_keyed": "exponential",
    "greedy_adaptive_keyed": "exponential",
    "top_levels": "power", "best_nonadaptive_coordinate": "power", "best_nonadaptive_unit": "power",
    "best_nonadaptive_keyed": "power", "top_levels_linear": "power",
    "best_adaptive_keyed_real": "exponential", "best_nonadaptive_keyed_real": "power",
}


def predicted_law(name: str) -> str | None:
    """``exponential`` or ``power``: the law a registered model (its ``law``) or a theory row
    (:data:`PREDICTED_LAW`) should follow against the budget; None for a row the theory makes no such
    prediction for."""
    known = name in MODELS or "-" in name and name.split("-", 1)[0] in MODELS  # a model or a variant (T-deep)
    return model(name).law if known else PREDICTED_LAW.get(name)


# The predictions of THEORY.md section 7 on the trained grid (seed means): tree prior, A at most TREE_A_RATIO
# times B and C, C within TREE_C_TOLERANCE of the exact linear top-levels theory; matched Gaussian, every model
# within GAUSSIAN_TOLERANCE of the optimum and A / B within GAUSSIAN_A_OVER_B.
TREE_A_RATIO = 0.6
TREE_C_TOLERANCE = 0.2
GAUSSIAN_TOLERANCE = 0.15
GAUSSIAN_A_OVER_B = (0.85, 1.15)


def prediction_checks(prior: str, depth: int, budget: int, losses: dict, theory: dict) -> list[dict]:
    """The predictions of docs/theory.md section 7 checked on one cell of the grid: ``losses`` maps each registered
    model (:data:`MODELS`) to its trained loss (seeds averaged), ``theory`` each row name to its value. Returns
    ``{prediction, measured, holds}`` dicts; none when a model is missing. Tree prior: each adaptive model (A) at
    most ``TREE_A_RATIO`` times each one-layer model (B, C), each model held to the exact linear theory
    (``top_levels_linear``: C) within ``TREE_C_TOLERANCE`` of it. Matched Gaussian: every model within
    ``GAUSSIAN_TOLERANCE`` of the optimum, each adaptive model over each one-layer model of the same MLP keys
    (A / B) within ``GAUSSIAN_A_OVER_B``. The optimum is the best linear non-adaptive loss of the models' tokens
    channel (``best_linear_nonadaptive``), or, for tables without that row, the gaussian channel's
    (``gaussian_optimum``)."""
    checked = plain_models()  # a model with variants (T) is checked by its study, not by this grid
    if not checked or any(losses.get(m) is None for m in checked):
        return []
    deep = [m for m, s in checked.items() if s.adaptive]
    flat = [m for m, s in checked.items() if not s.adaptive]
    if prior_entry(prior).heap:  # the tree's checks (depth beats one layer), else the Gaussian's (it does not)
        cell = f"{prior} K{depth} B{budget}"
        checks = [{"prediction": f"{cell}: {a} <= {TREE_A_RATIO:g} x {m}", "measured": f"{a}/{m} = {losses[a] / losses[m]:.3f}",
                   "holds": losses[a] <= TREE_A_RATIO * losses[m]} for a in deep for m in flat]
        lin = theory.get("top_levels_linear")
        if lin:
            checks += [{"prediction": f"{cell}: {m} within {TREE_C_TOLERANCE:.0%} of linear top-levels theory",
                        "measured": f"{m} / theory = {losses[m] / lin:.3f}",
                        "holds": abs(losses[m] / lin - 1) <= TREE_C_TOLERANCE}
                       for m, s in checked.items() if "top_levels_linear" in s.prediction]
        return checks
    cell = f"Gaussian K{depth} B{budget}"
    bar = "best_linear_nonadaptive" if theory.get("best_linear_nonadaptive") else "gaussian_optimum"
    opt = theory.get(bar)
    if not opt:
        return []
    where = "tokens channel" if bar == "best_linear_nonadaptive" else "gaussian channel"
    lo, hi = GAUSSIAN_A_OVER_B
    checks = [{"prediction": f"{cell}: {m} within {GAUSSIAN_TOLERANCE:.0%} of the optimum ({where})",
               "measured": f"{m} / optimum = {losses[m] / opt:.3f}", "holds": abs(losses[m] / opt - 1) <= GAUSSIAN_TOLERANCE}
              for m in checked]
    checks += [{"prediction": f"{cell}: {a} / {m} in [{lo}, {hi}]", "measured": f"{a}/{m} = {losses[a] / losses[m]:.3f}",
                "holds": lo <= losses[a] / losses[m] <= hi}
               for a in deep for m in flat if MODELS[a].mlp_keys and MODELS[m].mlp_keys]
    return checks


def row_kind(name: str, names, *, policy: str | None = None, keys: str | None = None) -> dict:
    """``role``, ``models``, ``class`` and ``keys`` of the row ``name`` in a table whose rows are ``names``."""
    role, klass, family = ROW_KINDS.get(name, ("reference", "unit", "linear"))
    if klass is None:
        klass = adaptive_class(policy)  # the class of the policy found: its strategy object's
    plain = plain_models()
    predicted = tuple(m for m in plain if prediction_row(m, names) == name)
    bounded = tuple(m for m, s in plain.items() if name in s.bounded_by)
    models = predicted if predicted else bounded if role in ("lower_bound", "upper_bound") else ()
    return {"role": "prediction" if predicted else role, "models": models, "class": klass,
            "keys": keys or family or "linear"}


def describe_rows(rows: list) -> list:
    """Row dicts (``TheoryRow.to_dict``, or rows of a table stored before rows said what they are) with
    ``role``, ``models``, ``class`` and ``keys`` filled in where absent (:func:`row_kind`), and old names
    replaced (:data:`RENAMED_ROWS`: ``optimal_mc`` was the water-filling design under tokens, no optimum there)."""
    rows = [{**r, "name": RENAMED_ROWS[r["name"]], "renamed_from": r["name"]} if r["name"] in RENAMED_ROWS else r
            for r in rows]
    names = [r["name"] for r in rows]
    out = []
    for r in rows:
        kind = row_kind(r["name"], names, policy=r.get("policy"), keys=r.get("keys"))
        kind["models"] = list(kind["models"])
        out.append({**r, **{k: v for k, v in kind.items() if k not in r}})
    return out


@dataclass(frozen=True)
class TheoryRow:
    """One theory number: ``value`` with ``stderr`` (0 when exact), ``how`` (``exact`` or ``mc n=..``),
    ``what`` (in words), ``channel`` (the channel the number is for), and for some rows the ``policy``
    or the ``design`` (heap node numbers) behind it. What the row is beside the models: ``role``
    (``prediction``, ``lower_bound``, ``upper_bound`` or ``reference``), ``models`` (those it predicts or
    provably bounds; a bound of no model bounds the theory quantity its ``what`` names),
    ``measurement_class`` (``coordinate`` | ``unit`` | ``linear``; JSON key ``class``) and ``keys`` (the key
    family it assumes: ``linear`` for every row of the linear-key channel)."""

    name: str
    value: float
    stderr: float
    how: str
    what: str
    channel: str
    policy: str | None = None
    design: tuple | None = None
    role: str = "reference"
    models: tuple = ()
    measurement_class: str = "unit"
    keys: str = "linear"

    def __post_init__(self):
        if self.channel not in ROW_CHANNELS:
            raise InputError(f"row channel must be one of {', '.join(ROW_CHANNELS)}, got {self.channel!r}")
        if self.role not in ROLES:
            raise InputError(f"row role must be one of {', '.join(ROLES)}, got {self.role!r}")
        if self.measurement_class not in CLASSES:
            raise InputError(f"row class must be one of {', '.join(CLASSES)}, got {self.measurement_class!r}")
        models = tuple(self.models)
        if any(m not in MODELS for m in models):
            raise InputError(f"row models must be among {', '.join(MODELS)}, got {list(self.models)}")
        if self.role == "prediction" and not models:
            raise InputError(f"a prediction row names the models it predicts; row {self.name!r} names none")
        object.__setattr__(self, "models", models)
        if not isinstance(self.keys, str) or not self.keys:
            raise InputError(f"row keys must name a key family (e.g. 'linear'), got {self.keys!r}")

    @classmethod
    def exact(cls, name: str, value, what: str, channel: str, **extra) -> "TheoryRow":
        return cls(name, float(value), 0.0, "exact", what, channel, **extra)

    @classmethod
    def mc(cls, name: str, est: Estimate, what: str, channel: str, **extra) -> "TheoryRow":
        return cls(name, float(est.value), float(est.stderr), f"mc n={est.n}", what, channel, **extra)

    def bounds_below(self, model: str) -> bool:
        """Whether ``model`` provably cannot beat this row (a lower bound proven for it)."""
        return self.role == "lower_bound" and model in self.models

    def to_dict(self) -> dict:
        out = {"name": self.name, "value": self.value, "stderr": self.stderr, "how": self.how, "what": self.what,
               "channel": self.channel, "role": self.role, "models": list(self.models),
               "class": self.measurement_class, "keys": self.keys}
        if self.policy is not None:
            out["policy"] = self.policy
        if self.design is not None:
            out["design"] = list(self.design)
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "TheoryRow":
        """The row of :meth:`to_dict`."""
        d = dict(d)
        d["measurement_class"] = d.pop("class", "unit")
        d["models"] = tuple(d.get("models", ()))
        if d.get("design") is not None:
            d["design"] = tuple(d["design"])
        return cls(**d)


def _with_roles(rows: list) -> tuple:
    """``rows`` with ``role``, ``models``, ``class`` and ``keys`` set by :func:`row_kind` (one place)."""
    import dataclasses

    names = [r.name for r in rows]
    out = []
    for r in rows:
        kind = row_kind(r.name, names, policy=r.policy, keys=r.keys if r.keys != "linear" else None)
        out.append(dataclasses.replace(r, role=kind["role"], models=kind["models"],
                                       measurement_class=kind["class"], keys=kind["keys"]))
    return tuple(out)


@dataclass(frozen=True)
class ComparisonTable:
    """The theory rows of one comparison: ``prior`` (``tree`` | ``gaussian``), ``budget`` B, the
    ``channel`` the models see, ``samples`` and ``seed`` of the Monte Carlo rows, and ``rows``."""

    prior: str
    budget: int
    channel: Channel
    samples: int
    seed: int
    rows: tuple

    def __iter__(self):
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)

    @property
    def names(self) -> tuple:
        return tuple(r.name for r in self.rows)

    def prediction(self, model: str) -> TheoryRow | None:
        """The row ``model`` is held to (``fvnum.theory.prediction_row``), or None."""
        name = prediction_row(model, self.names)
        return None if name is None else self.row(name)

    def row(self, name: str) -> TheoryRow:
        for r in self.rows:
            if r.name == name:
                return r
        raise InputError(f"no theory row {name!r}; the table has {', '.join(self.names)}")

    @property
    def optimum_bracket(self) -> tuple | None:
        """``(lower, upper)`` of the noisy adaptive optimum (tree prior), else None."""
        if "optimum_lower" not in self.names:
            return None
        return self.row("optimum_lower").value, self.row("optimum_upper").value

    def to_dict(self) -> dict:
        return {"prior": self.prior, "budget": self.budget, **self.channel.to_dict(), "samples": self.samples,
                "seed": self.seed, "rows": [r.to_dict() for r in self.rows]}

    def to_frame(self):
        """The rows as a pandas DataFrame (one row per theory row; pandas is optional)."""
        from fvnum.estimate import to_frame

        return to_frame([r.to_dict() for r in self.rows], "a ComparisonTable")

    def to_markdown(self, model: str | None = None, trained: tuple | None = None) -> str:
        """Markdown for ``model``: its own line, then the rows grouped by what they are to it (``fvnum.row_groups``)."""
        from fvnum.row_groups import rows_markdown
        rows, pred = describe_rows([r.to_dict() for r in self.rows]), model and prediction_row(model, self.names)
        return rows_markdown(rows, model, trained=trained, prediction=pred)

    def __repr__(self) -> str:
        from fvnum.row_groups import table_text
        return table_text(self)


# --- the table -------------------------------------------------------------------------------------
def _keyed_row(found) -> TheoryRow:
    """The TheoryRow of a keyed search's result (``fvnum.keys.nonadaptive``: a ``SearchResult`` with its ``keys``)."""
    est, family = found.estimate, found.keys.name
    return TheoryRow(found.name, float(est.value), float(est.stderr), "exact" if est.stderr == 0 else f"mc n={est.n}",
                     f"{found.how}: the best found within the {family} key family, an upper bound on that family's "
                     f"optimum, not a bound on any trained model", "tokens", keys=family)


def _check_keyed_channel(channel: Channel) -> Channel:
    channel = _check_channel(channel)
    if channel.kind != "tokens":
        raise InputError(f"keyed rows are rows of the tokens channel (keys read tokens), not of the {channel.kind} channel")
    return channel


def keyed_rows(prior, budget: int, channel: Channel, family: str, *, samples: int, seed: int,
               real_samples: int | None = None) -> list:
    """The rows under the key family ``family`` at one budget (:func:`keyed_curves` at ``[budget]``)."""
    return keyed_curves(prior, [budget], channel, family, samples=samples, seed=seed, real_samples=real_samples)[int(budget)]


def keyed_curves(prior, budgets, channel: Channel, family: str = KEYED, *, samples: int = 2000,
                 seed: int = 0, design_samples: int | None = None, greedy: bool = False,
                 real_samples: int | None = None) -> dict:
    """The rows under the key family ``family`` (``fvnum.keys.nonadaptive``: ``best_adaptive_keyed`` where it exists, the
    tree prior, and ``best_nonadaptive_keyed``) at every budget of ``budgets`` at once
    (``{budget: [TheoryRow, ..]}``; tokens channel only: the key channel is the tokens' one): the greedy
    adaptive keyed policy is run once to the largest budget (its loss after ``B`` layers is the row at ``B``,
    on the same samples, ``samples`` of them), the one-layer design is searched per budget on
    ``design_samples`` common samples (default :data:`fvnum.guards.limits.DESIGN_SAMPLES_PER_SAMPLE` x ``samples``: its Monte
    Carlo loss is dominated by rare confusions of leaves, and a search on 2000 samples fits their noise —
    tree depth 4, budget 3: 0.0233 on its own samples, 0.039 on fresh ones; on 8000, 0.034). Each row is
    the best found within the family: an upper bound on the family's optimum, a bound on no trained model.
    Softmax keys: the adaptive row is :func:`fvnum.keys.adaptive.adaptive_softmax_losses` (a quadratic part per
    layer and sample); ``greedy``: also the greedy softmax search of docs/softmax.md's first table (every layer
    with the layer-1 key's ``Q``), as ``greedy_adaptive_keyed`` (same samples). ``real_samples``: also the
    same policy and designs on that many contexts of real tokens (``best_adaptive_keyed_real``,
    ``best_nonadaptive_keyed_real``, :mod:`fvnum.keys.real_tokens`; tree prior, linear and weighted keys)."""
    from dataclasses import replace

    from fvnum.keys.nonadaptive import best_nonadaptive_keyed, gaussian_keyed, keyed_memory
    from fvnum.keys.families import check_family
    from fvnum.keys.adaptive import adaptive_keyed_losses, has_adaptive_search
    from fvnum.keys.real_tokens import REAL_ROWS, check_real, real_keyed_losses, real_what
    from fvsym._validate import check_int

    from fvsym.guards.limits import check_memory
    from fvnum.priors.tree import numeric_prior

    channel = _check_keyed_channel(channel)
    family = check_family(family) if real_samples is None else check_real(prior, family, real_samples)
    if greedy and family != "softmax":
        raise InputError(f"greedy adds the softmax family's greedy adaptive row; the {family} adaptive row is that "
                         f"greedy search already")
    design_samples = DESIGN_SAMPLES_PER_SAMPLE * samples if design_samples is None else design_samples
    spec = numeric_prior(prior)
    if isinstance(budgets, (str, bytes)) or not hasattr(budgets, "__iter__"):
        raise InputError(f"budgets must be a list of budgets, got {_short(budgets)}")
    budgets = sorted({check_int(b, "budget", minimum=1, maximum=spec.dim) for b in budgets})
    if not budgets:
        raise InputError("keyed rows need at least one budget, got none")
    keyed = replace(channel, keys=family)  # the channel of the searches: its keys the family
    tree = has_adaptive_search(prior)
    check_memory(f"the {family} keyed rows at budgets {', '.join(map(str, budgets))}",
                 keyed_memory(tree=tree, depth=spec.depth if tree else 0, dim=spec.dim, budgets=budgets,
                              samples=samples, family=family))
    one = {1: best_nonadaptive_keyed(prior, 1, keyed, seed=seed)} if tree else {}  # layer 1 of the adaptive policy
    for b in budgets:
        if b not in one:
            one[b] = (best_nonadaptive_keyed(prior, b, keyed, samples=design_samples, seed=seed) if tree
                      else gaussian_keyed(prior, b, keyed, **gaussian_design_settings(b, samples), seed=seed))
    adaptive, old = None, None
    if tree and family == "softmax":
        from fvnum.keys.adaptive import adaptive_softmax_losses

        adaptive = adaptive_softmax_losses(prior, budgets[-1], keyed, samples=samples, seed=seed,
                                           search=KeyedSearch(first=one[1]))
        if greedy:
            old = [replace(r, name="greedy_adaptive_keyed")
                   for r in adaptive_keyed_losses(prior, budgets[-1], keyed, samples=samples, seed=seed,
                                                  search=KeyedSearch(first=one[1]))]
    elif tree:
        adaptive = adaptive_keyed_losses(prior, budgets[-1], keyed, samples=samples, seed=seed,
                                         search=KeyedSearch(first=one[1]))
    real = {}
    if real_samples is not None:  # the same policy and designs on real tokens, paired contexts
        found = real_keyed_losses(prior, budgets, family, n_tokens=channel.n_tokens, s2=channel.s2,
                                  samples=real_samples, seed=seed, first=one[1], designs=one)
        real = {b: [TheoryRow.mc(n, found.estimate(n, b), real_what(n, channel.n_tokens, family), "tokens", keys=family)
                    for n in REAL_ROWS] for b in budgets}
    return {b: [_keyed_row(r[b - 1]) for r in (adaptive, old) if r is not None] + [_keyed_row(one[b])]
            + real.get(b, []) for b in budgets}



def comparison_table(prior, budget: int, channel: Channel, *, samples: int = 20_000, seed: int = 0,
                     search_samples: int = 2_000, dense: bool = True, keyed_rows_given=None,
                     real_samples: int | None = None) -> ComparisonTable:
    """Theory rows for ``prior`` and ``budget`` under ``channel`` (the channel the models see):
    ``fvnum.gaussian(tau)`` or ``fvnum.tokens(N, s2=..., keys=...)``.

    Tree prior: ``path``, the best adaptive policy found, the noisy adaptive optimum's bracket
    (``optimum_lower`` (noiseless), ``optimum_upper``, and ``optimum_exact`` where solved; ``fvnum.bounds``),
    ``top_levels`` (Bayes decoder), the best non-adaptive coordinate and unit designs (searched under the
    noise). Gaussian prior: the water-filling design's Monte Carlo loss (``water_filling_mc``; the gaussian
    channel's optimum, not the tokens channel's). A prior with its own rows (the atoms and mixture priors:
    ``fvnum.finite_theory.finite_comparison_table``, found by the prior's class) gives them; the default key
    family reads as none there (keyed rows are built on the tree and Gaussian priors only). Tree and Gaussian: ``top_levels``
    with the exact linear decoder (``top_levels_linear``), the best linear non-adaptive loss
    (``best_linear_nonadaptive``) and the Gaussian optimum under the gaussian channel at the same ``tau``
    (``gaussian_optimum``). ``dense=False`` skips the unit-class searches (the slowest rows). The tokens channel's
    ``keys``: a key family whose best rows (:func:`keyed_rows`) join the table and become the prediction rows of
    Models A and B (their ``prediction``, :data:`MODELS`); default :data:`fvnum.defaults.KEYED` (``"weighted"``,
    as ``fv compare``), None: the linear-key rows are their predictions. Keys read tokens: the gaussian channel
    has none. ``keyed_rows_given``: the keyed rows computed
    beforehand (:func:`keyed_curves`), as ``TheoryRow`` or their dicts. ``real_samples``: A's and B's keyed rows
    also on that many contexts of real tokens (``best_adaptive_keyed_real``, ``best_nonadaptive_keyed_real``;
    :mod:`fvnum.keys.real_tokens`: tree prior, keys linear or weighted; given rows must hold them).
    """
    from fvnum.optimum.bracket import best_adaptive, bound_candidates, bounds
    from fvnum.priors.capabilities import capability
    from fvnum.policies.registry import loss_mc
    from fvnum.policies.search import optimal_nonadaptive_coordinate, optimal_nonadaptive_unit
    from fvnum.mc.channels import check_channel, make_channel
    from fvnum.priors.analyses import analysis
    from fvnum.priors.tree import numeric_prior

    channel = make_channel(numeric_prior(prior), check_channel(channel))
    keyed = channel.keys if channel.kind == "tokens" else None
    channel = _check_channel(channel)
    spec = numeric_prior(prior)
    own = analysis(spec, "comparison_table")  # by the prior's class: a finite prior's (fvnum.finite_theory)
    if keyed_rows_given is not None:
        keyed_rows_given = [TheoryRow.from_dict(r) if isinstance(r, dict) else r for r in keyed_rows_given]
    if real_samples is not None:
        from fvnum.keys.real_tokens import check_real

        check_real(spec, None if own is not None else keyed, real_samples)
        real = [r.name for r in keyed_rows_given or () if r.name.endswith("_keyed_real") and r.how == f"mc n={real_samples}"]
        if keyed_rows_given is not None and len(real) != 2:
            raise InputError(f"real_samples={real_samples}: keyed_rows_given must hold the real-token rows of "
                             f"{real_samples} contexts (keyed_curves(..., real_samples={real_samples}))")
    if own is not None:  # a prior with its own rows (a finite prior: fvnum.finite_theory.finite_comparison_table)
        if keyed_rows_given is not None:
            raise InputError(f"keyed_rows_given: the {getattr(spec, 'name', 'given')} prior computes its own rows "
                             "(no keyed rows); give keyed_rows_given=None")
        return own(budget, channel, samples=samples, seed=seed, search_samples=search_samples, dense=dense,
                   keyed=None if keyed == KEYED else keyed)
    B, ch = budget, channel.kind
    kw = dict(samples=samples, seed=seed)
    rows = []
    linear_keys = "linear keys: not a bound for the MLP keys of Models A and B"
    depth = capability(spec, "heap_depth")
    if depth is not None:  # the tree's strategies: its heap of nodes
        if B <= depth:
            rows.append(TheoryRow.mc("path", loss_mc(prior, "path", B, channel, **kw), "adaptive, coordinate", ch))
        # the greedy dense policy costs milliseconds a sample at depth 6: its search uses fewer samples
        few = dict(samples=min(samples, 4 * search_samples), seed=seed, select_samples=min(1000, search_samples))
        found = best_adaptive(prior, B, channel, **few)
        rows.append(TheoryRow.mc("best_adaptive", found.estimate, f"best adaptive policy found: {found.name} "
                                 f"({linear_keys}; an upper bound on the linear-key adaptive optimum)", ch,
                                 policy=found.name))
        br = bounds(prior, B, channel, **few, candidates=bound_candidates())  # every default candidate, each where it applies
        rows.append(TheoryRow.exact("optimum_lower", br.lower,
                                    f"noisy adaptive optimum of the coordinate class with linear keys ({ch} channel) "
                                    f">= this: {br.lower_how}; not a bound for Models A, B (MLP keys) or C "
                                    f"(unit class)", "noiseless"))
        rows.append(TheoryRow.mc("optimum_upper", br.upper, f"noisy adaptive optimum of the coordinate class with "
                                 f"linear keys <= this: {br.policy}", ch, policy=br.policy))
        if br.exact is not None:
            rows.append(TheoryRow.exact("optimum_exact", br.exact, f"noisy adaptive optimum of the coordinate class "
                                        f"with linear keys under the gaussian channel: {br.exact_how}", "gaussian"))
        rows.append(TheoryRow.mc("top_levels", loss_mc(prior, "top_levels", B, channel, **kw), "non-adaptive, coordinate", ch))
        found = optimal_nonadaptive_coordinate(prior, B, channel, samples=search_samples, seed=seed)
        rows.append(TheoryRow.mc("best_nonadaptive_coordinate", found.estimate, "non-adaptive, coordinate (searched)",
                                 ch, design=tuple(int(n) for n in found.design)))
        if dense:
            est = optimal_nonadaptive_unit(prior, B, channel, samples=search_samples, seed=seed).estimate
            rows.append(TheoryRow.mc("best_nonadaptive_unit", est, f"best non-adaptive unit design found ({linear_keys}; "
                                     f"an upper bound on the linear-key non-adaptive optimum)", ch))
    elif capability(spec, "linear_posterior"):
        rows.append(TheoryRow.mc("water_filling_mc", loss_mc(prior, "optimal", B, channel, **kw),
                                 f"the water-filling design (the gaussian channel's optimum) run under the {ch} channel "
                                 f"with the gaussian-channel decoder; {linear_keys}", ch))
    else:  # a prior of its own: the strategy every prior runs, with its own exact decoder
        rows.append(TheoryRow.mc("top_levels", loss_mc(prior, "top_levels", B, channel, **kw), "non-adaptive, coordinate", ch))
    linear = lmmse(prior, top_levels_rows(spec.dim, B), channel).loss
    rows.append(TheoryRow.exact("top_levels_linear", linear, "exact linear theory: top levels (the prior's top "
                                "eigen-directions), linear keys, linear decoder", ch))
    rows.append(TheoryRow.exact("best_linear_nonadaptive", best_linear_loss(prior, B, channel),
                                "best linear non-adaptive loss (any linear keys, linear decoder; Ky Fan): no linear "
                                "estimator with linear keys beats it", ch))
    if ch == "gaussian":
        what = "Gaussian of the same covariance, optimal (= best linear non-adaptive)"
    else:
        what = (f"Gaussian of the same covariance, optimal under the gaussian channel at the same tau "
                f"(not the models' {ch} channel, not a bound for it)")
    rows.append(TheoryRow.exact("gaussian_optimum", gaussian_optimum(prior, B, channel), what, "gaussian"))
    if keyed_rows_given is not None:  # computed beforehand (keyed_curves: every budget at once)
        rows += keyed_rows_given
    elif keyed is not None:
        rows += keyed_rows(prior, B, channel, keyed, samples=search_samples, seed=seed, real_samples=real_samples)
    rows = _with_roles(rows)
    return ComparisonTable(getattr(spec, "name", type(spec).__name__), int(B), channel, int(samples),
                           int(seed), tuple(rows))


def comparison_table_seconds(*, tree: bool, depth: int, dim: int, budget: int, samples: int, search_samples: int,
                             token_channel: bool = True, threads: int = 1) -> float:
    """Upper seconds of :func:`comparison_table` without its keyed rows (``fvnum.guards.limits.keyed_cost`` prices those),
    beside it and from the prices of the strategies it runs (``fvnum.policies.prices.mc_cost``, each strategy's factors
    from its object): the path row, the default candidates of ``best_adaptive`` (role ``best_adaptive``, each on
    the selection samples, the winner again on ``min(samples, 4 search_samples)``) and of the bracket (role
    ``bracket``, less the exact noisy policy, sampled twice), the three exact noiseless solves (the bracket's
    lower bound, its and best_adaptive's noiseless Bellman policy), the top levels and both design searches; on a
    prior without a tree's heap the water-filling design and its ``D^3`` solve."""
    from fvsym.guards.costs import tree_loss_cost

    from fvnum.policies.strategies import candidates, strategy_of

    B = budget

    def mc(strategy, n, **kw):
        return mc_cost(depth=depth if tree else None, dim=dim, budget=B, strategy=strategy, token_channel=token_channel,
                       samples=n, threads=threads, solve=False, **kw)[1]  # the solves: below

    if not tree:
        return mc("optimal", samples) + 1e-7 * dim**3 + 1.0
    few, select = min(samples, 4 * search_samples), min(1000, search_samples)

    def runs(role):  # the default candidates of a search that apply at this budget (the channel is noisy)
        return [s for s in candidates(role) if not strategy_of(s).solved_only
                and strategy_of(s).applies(depth, dim, B, tau=1.0)]

    adaptive, bracket = runs("best_adaptive"), runs("bracket")
    seconds = mc("path", samples) if B <= depth else 0.0
    seconds += sum(mc(s, select) for s in adaptive) + max(mc(s, few) for s in adaptive)
    seconds += 2 * sum(mc(s, few) for s in bracket) + 3 * tree_loss_cost(depth, B, "optimal", False)[1]
    seconds += mc("top_levels", samples)
    seconds += mc("optimal_nonadaptive", search_samples, search_samples=search_samples)
    seconds += mc("optimal_nonadaptive", search_samples, dense_design=True, search_samples=search_samples)
    return seconds + 1.0


__all__ = [
    "CLASSES", "ComparisonTable", "ROLES", "TheoryRow", "comparison_table", "comparison_table_seconds",
    "describe_rows", "keyed_curves", "prediction_checks", "prediction_row", "predicted_law", "row_kind",
]
