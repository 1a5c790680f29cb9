"""The model registry (issue 30): a trained model is one object, :class:`ModelSpec`, found by its letter in
``MODELS`` and declared once, here (Models A, B, C of docs/theory.md section 7) or from outside with
:func:`register_model`. Everything the code asks of a model asks the object: its network builder
(``bridges.models.networks.build_model``), its training recipe (``bridges.runs.config``: the defaults of a run), its shape (``L``
and ``d``), its readouts, the theory rows it is held to, its law and agreement band (read by name from
``fvnum.theory`` and ``fvnum.regime``), its price (``bridges.prices.cost``) and its figure marker (``bridges.studies.figures``).

``MODELS`` is ``fvnum.model_rows.MODELS``, the one dict the theory reads too (fvnum imports nothing of bridges,
so the registry lives at the lower layer; fvnum reads only the theory's fields of the object). Models A, B, C are
declared there by their theory (``fvnum.model_rows.MODELS_OF_THEORY``, so fvnum alone knows them); this module
attaches their torch side (:meth:`ModelSpec.of`) and replaces their entries by the full objects. The public import
is ``from bridges.models.networks import register_model, MODELS``.

Standard library only (``bridges.runs.config`` reads the registry and ``fv --help`` loads no torch): a network builder
is a callable or a ``"module:function"`` string imported when a network is first built.
"""
from __future__ import annotations

import importlib
import math
import re
from dataclasses import dataclass
from typing import Callable

from fvsym.errors import InputError

from fvnum.model_rows import BUILT_IN, DECLARED, LAWS, MODEL_G, MODEL_T, MODELS, MODELS_OF_THEORY

_NAME = re.compile(r"[A-Z]")  # one capital letter: study options list models as letters (--models ABC)


@dataclass(frozen=True)
class Recipe:
    """The training recipe of a model (docs/training.md): the defaults of every run of it, peak Adam learning
    rate ``lr``, contexts per step ``batch`` and training steps per unit of budget ``steps_per_budget``."""

    lr: float
    batch: int
    steps_per_budget: int

    def __post_init__(self):
        if not isinstance(self.lr, (int, float)) or isinstance(self.lr, bool) or not 0 < self.lr < math.inf:
            raise InputError(f"recipe lr must be a finite number > 0, got {self.lr!r}")
        for name in ("batch", "steps_per_budget"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"recipe {name} must be an integer >= 1, got {value!r}")

    def steps(self, budget: int) -> int:
        """Training steps of the recipe: ``steps_per_budget x budget`` (a layer of A, a channel of B and C)."""
        return self.steps_per_budget * budget


@dataclass(frozen=True)
class ModelSpec:
    """One trained model, everything the code asks of it.

    ``name``: one capital letter (the ``--model`` choice, the prefix of a run's key). ``description``: one line.
    ``network``: ``(data: DataConfig, model: ModelConfig) -> WorkspaceModel`` (a ``bridges.models.networks.WorkspaceModel``
    with ``layers(budget)`` layers of ``width(budget)`` channels), or its ``"module:function"``. ``recipe``: a
    :class:`Recipe`. ``adaptive``: ``L = budget`` layers of one channel, each reading the workspace written before
    it (Model A), else one layer of ``d = budget`` channels. ``mlp_keys``: MLP keys and an MLP readout (the
    ``readout`` option ``decode`` or ``generic``; bfloat16 autocast where native), else linear keys and a bilinear
    readout (``decode`` only).
    The theory's side, by name: ``prediction`` the rows of ``fvnum.theory`` it is held to (first present wins),
    ``law`` the law it should follow (``exponential`` or ``power``), ``band`` its agreement band
    (``fvnum.regime.AGREEMENT``), ``bounded_by`` the bound rows proven for it.
    ``marker``: ``(matplotlib marker, colour)`` of its figures. ``price``: None (``bridges.prices.cost`` prices a step
    from the shape: MLP keys or linear keys) or ``(cfg: RunConfig) -> seconds`` of one training step on one
    thread. ``values``: the value options it takes, the first its default (Model G of docs/theory.md section 13:
    ``residual``, ``label``, ``token``; its ``layers`` set its depth and its budget is ``L D``), else ``()``."""

    name: str
    description: str
    network: str | Callable
    recipe: Recipe
    prediction: tuple[str, ...]
    law: str
    band: str
    marker: tuple[str, str]
    adaptive: bool = False
    mlp_keys: bool = True
    bounded_by: tuple[str, ...] = ()
    variants: tuple = ()
    price: Callable | None = None
    attention: str = "linear"
    shaped: bool = False
    values: tuple = ()

    def __post_init__(self):
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise InputError(f"a model's name is one capital letter such as D, got {self.name!r}")
        if not isinstance(self.description, str) or not self.description.strip() or "\n" in self.description:
            raise InputError(f"model {self.name}: the description is one line of text, got {self.description!r}")
        if not (callable(self.network) or isinstance(self.network, str) and re.fullmatch(r"[\w.]+:\w+", self.network)):
            raise InputError(f"model {self.name}: network must be a callable or 'module:function', got {self.network!r}")
        if not isinstance(self.recipe, Recipe):
            raise InputError(f"model {self.name}: recipe must be a Recipe, got {type(self.recipe).__name__}")
        for name in ("prediction", "bounded_by"):
            rows = getattr(self, name)
            if isinstance(rows, str) or not isinstance(rows, (tuple, list)) or not all(isinstance(r, str) for r in rows):
                raise InputError(f"model {self.name}: {name} must be a tuple of row names, got {rows!r}")
            object.__setattr__(self, name, tuple(rows))
        if not self.prediction:
            raise InputError(f"model {self.name}: prediction names no row (the theory row it is held to)")
        if self.law not in LAWS:
            raise InputError(f"model {self.name}: law must be one of {', '.join(LAWS)}, got {self.law!r}")
        if not isinstance(self.band, str):
            raise InputError(f"model {self.name}: band must name an agreement band, got {self.band!r}")
        if not (isinstance(self.marker, tuple) and len(self.marker) == 2 and all(isinstance(m, str) for m in self.marker)):
            raise InputError(f"model {self.name}: marker must be (marker, colour) such as ('D', 'C5'), got {self.marker!r}")
        for name in ("adaptive", "mlp_keys"):
            if not isinstance(getattr(self, name), bool):
                raise InputError(f"model {self.name}: {name} must be True or False, got {getattr(self, name)!r}")
        if self.attention not in ("linear", "softmax"):
            raise InputError(f"model {self.name}: attention must be 'linear' or 'softmax', got {self.attention!r}")
        if not isinstance(self.shaped, bool):
            raise InputError(f"model {self.name}: shaped must be True or False, got {self.shaped!r}")
        if not isinstance(self.values, tuple) or not all(isinstance(v, str) for v in self.values):
            raise InputError(f"model {self.name}: values must be a tuple of value names, got {self.values!r}")
        if self.price is not None and not callable(self.price):
            raise InputError(f"model {self.name}: price must be None or a callable, got {self.price!r}")

    @classmethod
    def of(cls, theory, network: str | Callable, recipe: Recipe, marker: tuple[str, str],
           price: Callable | None = None, **torch_side) -> "ModelSpec":
        """The full model of a theory declaration (``fvnum.model_rows.ModelTheory``) and its torch side
        (``attention``: its default attention; ``shaped``: its shape is set by ``layers``, ``heads``, ``width``,
        as Model T's)."""
        return cls(**theory.theory(), network=network, recipe=recipe, marker=marker, price=price, **torch_side)

    def layers(self, budget: int) -> int:
        """``L``: ``budget`` for an adaptive model, else 1."""
        return budget if self.adaptive else 1

    def width(self, budget: int) -> int:
        """``d``, channels per layer: 1 for an adaptive model, else ``budget``."""
        return 1 if self.adaptive else budget

    @property
    def audited(self) -> bool:
        """Whether ``fv audit`` applies: A, B, C (the CLT law of key functions of one token and the workspace) and
        Model T (its readings' law measured at each latent, on a prior of finitely many latents); not Model G."""
        return not self.values

    def audits(self, data) -> bool:
        """Whether the audit applies to a run of this model on ``data``: a measured audit (Model T) needs finitely
        many latents (the tree, the atoms prior)."""
        return self.audited and (not self.shaped or data.has_leaves or data.prior == "atoms")

    @property
    def readouts(self) -> tuple[str, ...]:
        """The ``readout`` options it takes: ``decode`` and ``generic`` with MLP keys, else ``decode``."""
        return ("decode", "generic") if self.mlp_keys else ("decode",)

    def build(self, data, model):
        """Its network for a ``DataConfig`` and a ``ModelConfig`` (weights from torch's current RNG state)."""
        network = self.network
        if isinstance(network, str):
            module, _, function = network.partition(":")
            network = getattr(importlib.import_module(module), function)
        return network(data, model)


def check_theory(spec: ModelSpec) -> None:
    """Refuse (InputError, one line) a model whose theory names are not those of ``fvnum``: its prediction and bound
    rows among ``fvnum.theory.ROW_KINDS``, its band among ``fvnum.regime.AGREEMENT``."""
    from fvnum.regime import AGREEMENT
    from fvnum.theory import ROW_KINDS

    for row in (*spec.prediction, *spec.bounded_by):
        if row not in ROW_KINDS:
            raise InputError(f"model {spec.name}: unknown theory row {row!r}; choose among {', '.join(ROW_KINDS)}")
    for row in spec.bounded_by:
        if ROW_KINDS[row][0] != "lower_bound":
            raise InputError(f"model {spec.name}: bounded_by names {row!r}, which is no lower bound")
    if spec.band not in AGREEMENT:
        raise InputError(f"model {spec.name}: unknown band {spec.band!r}; choose one of {', '.join(AGREEMENT)}")


def register_model(spec: ModelSpec) -> ModelSpec:
    """Add ``spec`` to ``MODELS`` (after the models registered before it): then ``fv train --model``,
    ``ModelConfig``, the theory tables, prices and figures know it. Its theory names are checked against fvnum
    (:func:`check_theory`). InputError (one line) for a name already taken or a bad spec."""
    if not isinstance(spec, ModelSpec):
        raise InputError(f"register_model takes a ModelSpec, got {type(spec).__name__}")
    if spec.name in MODELS:
        raise InputError(f"model {spec.name} is registered already ({MODELS[spec.name].description})")
    check_theory(spec)
    MODELS[spec.name] = spec
    return spec


def unregister_model(name: str) -> ModelSpec:
    """Remove the model ``name`` registered with :func:`register_model` and return it; the models of docs/theory.md
    section 7 stay (InputError)."""
    if name in DECLARED:
        raise InputError(f"model {name} is one of docs/theory.md's models ({', '.join(DECLARED)}); it stays registered")
    if name not in MODELS:
        raise InputError(f"model {name!r} is not registered; registered: {', '.join(MODELS)}")
    return MODELS.pop(name)


class ModelNames:
    """The names of the registered models, live (a model registered later joins them): the choices of
    ``--model`` and of ``ModelConfig.model``."""

    def __iter__(self):
        return iter(tuple(MODELS))

    def __contains__(self, name) -> bool:
        return isinstance(name, str) and name in MODELS

    def __len__(self) -> int:
        return len(MODELS)

    def __repr__(self) -> str:
        return repr(tuple(MODELS))


MODEL_NAMES = ModelNames()


def adaptive_names() -> str:
    """The registered adaptive models, ``A`` (or ``A, D``): the models that grow by layers."""
    return ", ".join(m for m, s in MODELS.items() if s.adaptive)


# --- Models A, B, C of THEORY.md section 7 ------------------------------------------------------------------
# Recipes (docs/training.md): Model C, linear keys and a bilinear readout, has a quartic loss surface and needs the
# larger rate; Model A, still improving where B and C have converged, takes twice the steps at half the batch
# (about 13 minutes at depth 6, budget 4 on 2 CPU threads).
_A, _B, _C = MODELS_OF_THEORY  # their theory, declared in fvnum.model_rows


def _shaped_price(cfg) -> float:
    """Model T's step on one thread (``bridges.prices.transformer.step_seconds``; standard library)."""
    from bridges.prices.transformer import step_seconds

    return step_seconds(cfg)


def _gd_price(cfg) -> float:
    """Model G's step on one thread (``bridges.prices.gd.step_seconds``; standard library)."""
    from bridges.prices.gd import step_seconds

    return step_seconds(cfg)


_MODELS_OF_THEORY = (
    ModelSpec.of(_A, "bridges.models.networks:mlp_network", Recipe(lr=5e-3, batch=128, steps_per_budget=5000), ("o", "C0")),
    ModelSpec.of(_B, "bridges.models.networks:mlp_network", Recipe(lr=3e-3, batch=256, steps_per_budget=2500), ("s", "C1")),
    ModelSpec.of(_C, "bridges.models.networks:linear_network", Recipe(lr=1e-2, batch=256, steps_per_budget=2500), ("^", "C4")),
    # docs/theory.md section 7.1: the recipe of its prototype (Adam 3e-3, batch 128; 3,000 steps a unit of budget)
    ModelSpec.of(MODEL_T, "bridges.models.transformer:transformer_network", Recipe(lr=3e-3, batch=128, steps_per_budget=3000),
                 ("D", "C3"), price=lambda cfg: _shaped_price(cfg), attention="softmax", shaped=True),
    # docs/theory.md section 13: the recipe of studies/gd/regime.md (Adam 1e-2 with a cosine schedule, 3,000 steps a layer)
    ModelSpec.of(MODEL_G, "bridges.models.gd:gd_network", Recipe(lr=1e-2, batch=128, steps_per_budget=3000),
                 ("P", "C5"), price=lambda cfg: _gd_price(cfg), values=("residual", "label", "token")),
)
for _spec in _MODELS_OF_THEORY:  # their theory names are checked by tests/test_register_model.py (fvnum loads numpy)
    if not isinstance(MODELS.get(_spec.name), ModelSpec):
        MODELS[_spec.name] = _spec
DEFAULT_MODEL = BUILT_IN[0]  # ModelConfig's default: the first of docs/theory.md's models

__all__ = ["BUILT_IN", "DEFAULT_MODEL", "MODELS", "MODEL_NAMES", "ModelNames", "ModelSpec", "adaptive_names", "Recipe", "check_theory", "register_model",
           "unregister_model"]
