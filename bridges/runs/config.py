"""Frozen, validated configurations of a training run (docs/theory.md sections 1, 7).

``RunConfig(data, model, train)`` is the unit that is trained, saved and compared. Every field is
checked in ``__post_init__`` with a one-line ``ValueError`` naming the bad value. ``RunConfig.key()`` is a
short, stable name for the experiment (results and checkpoints are stored under ``out/<key>/``); it
ignores the fields that only say *where and how fast* a run executes (``out``, ``device``, ``threads``,
``checkpoint_every``), so the same experiment keeps its key on another machine.

``RUN_OPTIONS`` is the one table of a run's fields as command-line options, generated from the fields of
``DataConfig``, ``ModelConfig`` and ``TrainConfig`` by ``bridges.runs.options.options_of`` (``--tokens`` is
``data.n_tokens``): ``fv train`` and ``fv compare`` build their parsers from it, ``fv sweep`` builds its
cells' configurations from it (``RunConfig.from_options``), and ``RunConfig.to_argv()`` writes the options
that give the same configuration back.

This module imports nothing heavier than the standard library and the shared checks of
``fvsym._validate`` (``fv --help`` must not load torch), and no command-line code (no argparse).
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
from dataclasses import dataclass, field

from fvsym._validate import plain_error

from bridges.models.registry import DEFAULT_MODEL, MODEL_NAMES, MODELS
from bridges.models.registry import adaptive_names as _adaptive
from bridges.runs.data_config import (
    ATOMS_MAX, ATOMS_MAX_DIM, COVARIANCES, MAX_DEPTH, PRIORS, DataConfig, _choice, _float, _int, _set)
from bridges.models.shapes import D_MODEL, HEAD_DIM, MAX_SIZE, SHAPES, VALUES, check_shape
from bridges.models.shapes import gd_budget as check_gd_budget
from bridges.runs.devices import check_device_name
from bridges.runs.options import options_of
from fvsym.errors import DamagedFile, InputError

# PRIORS, COVARIANCES, MAX_DEPTH and DataConfig: bridges.runs.data_config
# MODELS (bridges.models.registry): the registered models, each with its recipe, shape and readouts
READOUTS = ("decode", "generic")
ATTENTIONS = ("linear", "softmax")  # THEORY.md sections 7 (linear) and 2b (softmax)
MAX_QUERY_DIM = 1 << 16  # r of the qk router
SHAPE_FIELDS = ("shape", "layers", "heads", "width", "head_dim", "d_model")  # Model T's (docs/theory.md section 7.1)
ROUTERS = ("mlp", "qk")  # Model A's router: THEORY.md sections 7 (mlp: k = f([x, p])) and 7b (qk: <q(p), kappa(x)>)
SCHEDULES = ("cosine", "constant")
TRAIN_LOSSES = ("query", "theta")
PRECISIONS = ("auto", "bf16", "fp32")
INIT_POLICIES = ("path", "keyed")  # theory policies Model A's routers can be distilled from (bridges.training.distil)
MAX_THREADS = max(8, 4 * (os.cpu_count() or 1))  # torch threads of a run, or local worker processes: more only cost memory
# The training recipe (docs/training.md): the defaults of every run. Peak learning rate, batch and steps per unit
# of budget are the model's (``MODELS[model].recipe``, bridges.models.registry); warm-up and evaluation are shared.
RECIPE_WARMUP = 200
CURRICULUM_FRACTION = 0.5  # the noise curriculum (tokens_from) falls to the data's N over this part of the steps
LATE_FRACTION = 0.5  # larger batches late (batch_late) from this part of the steps on
RECIPE_EVAL_EVERY = 200


def recipe_steps(budget: int, model: str = DEFAULT_MODEL) -> int:
    """Training steps of the recipe: the model's ``steps_per_budget x budget`` (a layer of Model A, a channel of
    B and C)."""
    return MODELS[_choice(model, "model", MODELS)].recipe.steps(budget)


def _recipes(what) -> str:
    """The recipe's values of every registered model, for a help text: ``A 5000, B 2500, C 2500``."""
    return ", ".join(f"{name} {what(spec.recipe)}" for name, spec in MODELS.items())


FORMAT = "fv-run-2"  # bump when the meaning of a configuration changes; it enters every key
_NOT_IN_KEY = ("out", "device", "threads", "checkpoint_every")
_KEY = re.compile(r"[A-Z]s?q?-[A-Za-z]+-[KD]\d+-B\d+-N\d+-s\d+-[0-9a-f]{10}")  # RunConfig.key()
# the prior's part of a run key: tree-K4, gaussmat-K4 / gaussiso-K4 (as before the atoms prior), atoms-D8 (its D;
# the atoms themselves, by their digest or M, D and seed, enter the key's hash)
_KEY_PRIOR = {"tree": lambda d: f"tree-K{d.depth}", "gaussian": lambda d: f"gauss{d.cov[:3]}-K{d.depth}",
              "atoms": lambda d: f"atoms-D{d.dim}"}


@dataclass(frozen=True)
class ModelConfig:
    """Model ``A`` (L = budget, d = 1), ``B`` or ``C`` (L = 1, d = budget) of docs/theory.md section 7.

    ``mlp_width`` and ``hidden_layers`` size the MLPs (keys and readout) of A and B; ``readout`` is
    ``decode`` (``y_hat = <g(p), x_q>``, the Bayes form) or ``generic`` (``y_hat = g([x_q, p])``).
    Model C has linear keys and the bilinear readout ``x_q^T U p``; it takes no readout option.
    ``attention``: ``linear`` (``phi = (1/N) sum_i k_i y_i``, the default) or ``softmax`` (docs/theory.md section 2:
    ``phi = sum_i softmax_i(s_i) y_i``, the key function's output read as the score ``s``); ``to_dict()`` leaves it
    out when it is ``linear``, so every linear run keeps its key.
    ``router`` (adaptive models, A): ``mlp`` (``k_i = f_l([x_i, p])``, the default) or ``qk`` (docs/theory.md section
    7b: ``k_i = <q_l(p), kappa_l(x_i)>``, ``q_l`` an MLP of the workspace alone, a learned constant at layer 1,
    ``kappa_l`` an MLP of the token alone, both into ``R^r``); ``query_dim`` is ``r`` (qk only; default ``D``).
    ``to_dict()`` leaves out ``router`` when it is ``mlp`` and ``query_dim`` when it is not given, so every run of
    the MLP router keeps its key.
    ``n_layers`` (L) and ``n_channels`` (d a layer) follow from the model and the budget; Model T (docs/theory.md
    section 7.1) takes ``shape`` (deep, wide) or ``layers``, ``heads``, ``width``, with ``head_dim``, ``d_model``
    (``bridges.models.shapes``). ``attention`` None is the model's default (A, B, C linear; T softmax), resolved at
    construction: a ``replace`` that changes the model keeps it unless it passes ``attention=None``.
    Model G (docs/theory.md section 13) takes ``layers`` (default 1) and ``values`` (``residual``, ``label``,
    ``token``); ``RunConfig`` sets its budget to ``L D``; ``values`` is None, and out of ``to_dict()``, for every other
    model.
    """

    model: str = DEFAULT_MODEL
    budget: int = 3
    mlp_width: int = 64
    hidden_layers: int = 2
    readout: str = "decode"
    attention: str | None = None
    router: str = "mlp"
    query_dim: int | None = None
    shape: str | None = None
    layers: int | None = None
    heads: int | None = None
    width: int | None = None
    head_dim: int | None = None
    d_model: int | None = None
    values: str | None = None

    def __post_init__(self):
        _choice(self.model, "model", MODEL_NAMES)
        _int(self.budget, "budget", 1)
        _int(self.mlp_width, "mlp_width", 1)
        _int(self.hidden_layers, "hidden_layers", 1)
        _choice(self.readout, "readout", READOUTS)
        if self.attention is None:  # the model's own default: linear for A, B, C, softmax for T
            _set(self, "attention", self.spec.attention)
        _choice(self.attention, "attention", ATTENTIONS)
        check_shape(self)
        _choice(self.router, "router", ROUTERS)
        if self.router == "qk" and not (self.spec.adaptive and self.spec.mlp_keys):
            adaptive = " and ".join(m for m, s in MODELS.items() if s.adaptive and s.mlp_keys)
            raise InputError(f"router='qk' applies to the adaptive models ({adaptive}), not to model {self.model} "
                             "(one layer: its keys see an empty workspace)")
        if self.query_dim is not None:
            if self.router != "qk":
                raise InputError(f"query_dim applies to router='qk' only, got query_dim={self.query_dim!r} with "
                                 f"router={self.router!r}")
            _int(self.query_dim, "query_dim", 1)
            if self.query_dim > MAX_QUERY_DIM:
                raise InputError(f"query_dim must be <= {MAX_QUERY_DIM}, got {self.query_dim}")
        if self.readout not in self.spec.readouts:
            takes = " and ".join(m for m, s in MODELS.items() if self.readout in s.readouts)
            raise InputError(f"model {self.model} has the bilinear readout; readout={self.readout!r} applies to {takes}")

    def to_dict(self) -> dict:
        """The fields as a JSON-able dict; ``attention`` only where it is not ``linear`` (the keys of every
        linear run stay as they were before softmax attention existed)."""
        d = dataclasses.asdict(self)
        for name, default in (("attention", self.spec.attention), ("router", "mlp"), ("query_dim", None),
                              *((name, None) for name in (*SHAPE_FIELDS, "values"))):
            if d[name] == default:
                del d[name]
        return d

    def query_dim_for(self, dim: int) -> int:
        """``r`` of the qk router for a prior of dimension ``dim``: ``query_dim``, or ``D`` when not given."""
        return self.query_dim if self.query_dim is not None else dim

    @property
    def spec(self):
        """The model's registered ``ModelSpec`` (``bridges.models.registry``)."""
        return MODELS[self.model]

    @property
    def n_layers(self) -> int:
        """``L``: ``budget`` for an adaptive model (A), 1 for B and C; Model T's and G's ``layers``."""
        if self.spec.shaped or self.spec.values:
            from bridges.models.shapes import resolved

            return resolved(self)[0]
        return self.spec.layers(self.budget)

    @property
    def n_channels(self) -> int:
        """``d``, channels per layer: 1 for an adaptive model (A), ``budget`` for B and C (the MLP's size is
        ``mlp_width``); Model T's ``heads x width``, the scalars its summary token receives a block; Model G's D."""
        if self.spec.shaped or self.spec.values:
            from bridges.models.shapes import resolved

            _, heads, width = resolved(self)
            return heads * width
        return self.spec.width(self.budget)

    @property
    def theory_name(self) -> str:
        """The name the theory knows this model by: its letter, or for a shaped model (T) its letter and named
        shape, ``T-deep`` or ``T-wide`` (``fvnum.model_rows.model``), whose prediction rows differ; G its values."""
        if self.spec.values:
            return f"{self.model}-{self.values}"
        if self.spec.shaped:
            from bridges.models.shapes import shape_of

            shape = shape_of(self)
            return f"{self.model}-{shape}" if shape else self.model
        return self.model


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation: Adam, linear warm-up over ``warmup`` steps, then ``schedule`` (cosine decay to 0).

    ``steps``, ``batch``, ``lr`` and ``loss`` left as None take the recipe's values when the ``RunConfig`` is
    built (``recipe_steps(budget, model)``, ``RECIPE_BATCH[model]``, ``RECIPE_LR[model]``, ``theta`` for decoding
    readouts, else ``query``).
    ``loss``: ``query`` trains on ``(y_hat - <theta, x_q>)^2`` (the task of docs/theory.md section 1);
    ``theta`` trains on ``||theta_hat - theta||^2`` directly (decoding readouts only): the query loss with
    ``x_q ~ N(0, I)`` integrated out in closed form, so the same minimiser with less gradient noise. Held-out
    losses are always reported in the units of ``E||theta_hat - theta||^2`` (see ``bridges.training.train``).
    ``precision``: ``bf16`` runs the key MLPs under bfloat16 autocast (float32 master weights, aggregation,
    readout and loss), ``fp32`` everywhere float32, ``auto`` picks bf16 where the device multiplies bfloat16
    natively (``bridges.models.precision``) and the model has MLP keys.
    ``grad_clip`` (max global gradient norm; 0 disables). Held-out evaluation every ``eval_every`` steps on
    ``eval_batches`` x 256 fixed contexts. ``out``: run folder root, or None for no files.
    ``init_from``: the key of a finished Model A run in the same ``out`` at a smaller budget ``b`` (same data
    and MLP sizes) whose weights start this one (the curriculum, ``bridges.models.networks.grow``): layers ``1..b``
    and the readout start as the trained ones, the readout blind to the new slots, so training begins at the
    smaller model's loss; the new layers start fresh. None (the default) starts from random weights; it is
    left out of the configuration's dictionary and key, so runs without it keep their keys.
    ``init_policy``: Model A only, a theory policy of ``INIT_POLICIES`` (``path``) distilled into the routers
    before training (``bridges.training.distil``: key regression on the policy's contexts, then the readout fitted
    with the routers frozen); the held-out loss at step 0 is the distilled model's. None (the default) is
    left out of the dictionary and key, as ``init_from`` is.
    ``aux_readout``: adaptive models only, the weight ``W >= 0`` of an auxiliary loss after every layer: the
    training loss is ``loss(final) + W * mean over l < L of loss(readout of the workspace after layer l)``
    (slots ``l+1..B`` still zero), so each reading must pay off on its own; the held-out loss stays the
    final one. 0 (the default) is plain training and is left out of the dictionary and key.
    ``tokens_from``: a noise curriculum, large N first: training contexts start with ``N0 = tokens_from`` tokens
    (more than the data's N, so less reading noise), their count falling geometrically to N over the first
    ``CURRICULUM_FRACTION`` of the steps (``tokens_at``), then N; held-out contexts always have N tokens.
    ``batch_late``: larger batches late: from ``LATE_FRACTION`` of the steps on, each step draws
    ``batch_late`` contexts instead of ``batch`` (``batch_at``). Both 0 (the default): off, and left out of the
    dictionary and key.
    """

    steps: int | None = None
    batch: int | None = None
    lr: float | None = None
    warmup: int = RECIPE_WARMUP
    schedule: str = "cosine"
    loss: str | None = None
    precision: str = "auto"
    grad_clip: float = 1.0
    eval_every: int = RECIPE_EVAL_EVERY
    eval_batches: int = 16
    seed: int = 0
    device: str = "cpu"
    threads: int = 1
    out: str | None = None
    checkpoint_every: int = 200
    init_from: str | None = None
    init_policy: str | None = None
    aux_readout: float = 0.0
    tokens_from: int = 0
    batch_late: int = 0

    def tokens_at(self, step: int, n_tokens: int) -> int:
        """Tokens of the training contexts at ``step`` for data of ``n_tokens`` tokens (the noise curriculum)."""
        ramp = CURRICULUM_FRACTION * self.steps
        if self.tokens_from == 0 or step >= ramp:
            return n_tokens
        return max(n_tokens, round(self.tokens_from * (n_tokens / self.tokens_from) ** (step / ramp)))

    def batch_at(self, step: int) -> int:
        """Contexts of the training batch at ``step`` (larger batches late)."""
        return self.batch_late if self.batch_late and step >= LATE_FRACTION * self.steps else self.batch

    def __post_init__(self):
        if self.steps is not None:
            _int(self.steps, "steps", 1)
        if self.batch is not None:
            _int(self.batch, "batch", 1)
        if self.lr is not None:
            _set(self, "lr", _float(self.lr, "lr", 0.0, open_low=True))
        _int(self.warmup, "warmup", 0)
        _choice(self.schedule, "schedule", SCHEDULES)
        if self.loss is not None:
            _choice(self.loss, "loss", TRAIN_LOSSES)
        _choice(self.precision, "precision", PRECISIONS)
        _set(self, "grad_clip", _float(self.grad_clip, "grad_clip", 0.0))
        _int(self.eval_every, "eval_every", 1)
        _int(self.eval_batches, "eval_batches", 1)
        _int(self.seed, "seed", 0, 2**63 - 1)
        if not isinstance(self.device, str) or not self.device:
            raise InputError(f"device must be a torch device name such as 'cpu' or 'cuda', got {self.device!r}")
        _int(self.threads, "threads", 1)
        if self.out is not None and not isinstance(self.out, str):
            _set(self, "out", str(self.out))
        _int(self.checkpoint_every, "checkpoint_every", 1)
        if self.init_from is not None and (not isinstance(self.init_from, str) or not _KEY.fullmatch(self.init_from)):
            raise InputError(f"init_from must be the key of a run folder such as A-tree-K7-B3-N64-s0-7594e7fc4c, "
                             f"got {self.init_from!r:.80}")
        if self.init_policy is not None:
            _choice(self.init_policy, "init_policy", INIT_POLICIES)
        _set(self, "aux_readout", _float(self.aux_readout, "aux_readout", 0.0, 1e6))
        _int(self.tokens_from, "tokens_from", 0)
        _int(self.batch_late, "batch_late", 0)


@dataclass(frozen=True)
class RunConfig:
    """One training run: what data, which model, how it is trained."""

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self):
        for name, kind in (("data", DataConfig), ("model", ModelConfig), ("train", TrainConfig)):
            if not isinstance(getattr(self, name), kind):
                raise InputError(f"{name} must be a {kind.__name__}, got {type(getattr(self, name)).__name__}")
        if (gd := check_gd_budget(self)) is not None:  # Model G: budget L D (docs/theory.md section 13)
            _set(self, "model", gd)
        t, m = self.train, self.model
        mine = m.spec.recipe
        recipe = dict(steps=mine.steps(m.n_layers if m.spec.values else m.budget) if t.steps is None else t.steps,
                      batch=mine.batch if t.batch is None else t.batch,
                      lr=mine.lr if t.lr is None else t.lr,
                      loss=("query" if m.readout == "generic" else "theta") if t.loss is None else t.loss)
        if any(getattr(t, k) != v for k, v in recipe.items()):
            _set(self, "train", dataclasses.replace(t, **recipe))
        if self.data.diversity is not None and self.data.atoms_seed is None:  # drawn by the run's seed, as fv mc's
            _set(self, "data", dataclasses.replace(self.data, atoms_seed=self.train.seed))
        D = self.data.dim
        if self.model.budget > D and not self.model.spec.values:
            where = f"2^depth - 1 = {D} (depth={self.data.depth})" if self.data.depth is not None else f"{D} of the atoms"
            raise InputError(f"budget={self.model.budget} exceeds the dimension D = {where}")
        if self.train.loss == "theta" and self.model.readout == "generic":
            raise InputError("loss='theta' needs a decoding readout (theta_hat); readout='generic' has none")
        if self.model.spec.shaped or self.model.spec.values:  # T, G (docs/theory.md 7.1, 13): float32, random weights
            if self.train.precision == "bf16":
                raise InputError(f"model {self.model.model} trains in float32 (its attention and LayerNorms); "
                                 "precision='bf16' applies to the MLP keys of models A and B")
            for name in ("init_from", "init_policy"):
                if getattr(self.train, name) is not None:
                    raise InputError(f"{name} starts the routers of model A; model {self.model.model} is trained "
                                     "from random weights")
        if self.train.init_from is not None:
            if not self.model.spec.adaptive:
                raise InputError(f"init_from grows an adaptive model ({_adaptive()}) by layers; model "
                                 f"{self.model.model} has one layer")
            if self.train.out is None:
                raise InputError(f"init_from needs a run folder root (out): the run {self.train.init_from} "
                                 "is looked up there")
        if self.train.init_policy is not None:
            if not (self.model.spec.adaptive and self.model.spec.mlp_keys):
                raise InputError(f"init_policy distils a policy into the MLP routers of an adaptive model "
                                 f"({_adaptive()}); model {self.model.model} has one layer")
            if getattr(self.model, "router", "mlp") != "mlp":
                raise InputError(f"init_policy distils a policy into the MLP router k_i = f([x_i, p]) of Model A; the "
                                 f"{self.model.router} router has none to start: leave init_policy out, or use "
                                 "router mlp")
            if self.train.init_from is not None:
                raise InputError("give init_from or init_policy, not both")
            if not self.data.has_leaves or self.model.budget > self.data.depth:
                raise InputError(f"init_policy {self.train.init_policy!r} needs the tree prior and budget <= depth "
                                 f"(got prior {self.data.prior!r}, budget {self.model.budget}, depth {self.data.depth})")
        if self.train.aux_readout > 0:
            if not self.model.spec.adaptive:
                raise InputError(f"aux_readout reads the workspace after every layer of an adaptive model "
                                 f"({_adaptive()}); model {self.model.model} has one layer")
            if self.model.budget < 2:
                raise InputError(f"aux_readout needs at least two layers (budget >= 2), got budget {self.model.budget}")
        if 0 < self.train.tokens_from <= self.data.n_tokens:
            raise InputError(f"tokens_from starts a noise curriculum above the data's N = {self.data.n_tokens} tokens, "
                             f"got {self.train.tokens_from} (0: no curriculum)")

    def to_argv(self) -> list[str]:
        """The options of ``fv train`` (or ``fv compare``) that give exactly this configuration, every field
        spelled out (later changes of the defaults do not change what they run): ``RunConfig.from_options``
        of them, or the command line ``fv train <argv>``, is this configuration again. ``out`` None is
        ``--out ''`` (no run folder)."""
        argv = []
        for option in RUN_OPTIONS:
            value = getattr(getattr(self, option.section), option.field)
            if value is None:
                if option.default is None:  # not given reads as None: cov of a tree, alpha beside scales
                    continue
                value = ""
            argv += [option.flag, option.text(value)]
        return argv

    @classmethod
    def from_options(cls, values: dict) -> "RunConfig":
        """The configuration of parsed options ``{dest: value}`` (``Option.parse``, or an argparse namespace's
        ``vars``); options left out take their defaults (``Option.default``); other keys are ignored. Depth
        follows the scales when only they are given; ``out`` ``''`` is no run folder. ValueError on bad values."""
        v = {o.dest: values.get(o.dest, o.default) for o in RUN_OPTIONS}
        scales = None if v["scales"] is None else tuple(v["scales"])
        if scales is not None and v["alpha"] is not None:
            raise InputError(f"give --alpha or --scales, not both (got --alpha {v['alpha']!r})")
        if scales is not None and v["depth"] is not None and len(scales) != v["depth"]:
            raise InputError(f"--scales needs depth = {v['depth']} entries (one a_k per level), got {len(scales)}")
        v["depth"] = v["depth"] if v["depth"] is not None else DataConfig().depth if scales is None else len(scales)
        v["scales"], v["out"] = scales, v["out"] or None
        sections = {"data": {}, "model": {}, "train": {}}
        for o in RUN_OPTIONS:
            if v[o.dest] is not None or _FIELD_DEFAULTS[o.section, o.field] is None:  # None: the field's default
                sections[o.section][o.field] = v[o.dest]
        return cls(DataConfig(**sections["data"]), ModelConfig(**sections["model"]), TrainConfig(**sections["train"]))

    def to_dict(self) -> dict:
        train = dataclasses.asdict(self.train)
        for name in ("init_from", "init_policy"):
            if train[name] is None:  # runs without a curriculum or a distilled start keep their dictionaries and keys
                del train[name]
        for name in ("aux_readout", "tokens_from", "batch_late"):
            if train[name] == 0:  # runs without these keep their dictionaries and keys
                del train[name]
        return {"format": FORMAT, "data": self.data.to_dict(), "model": self.model.to_dict(),
                "train": train}

    @classmethod
    def from_dict(cls, d: dict) -> "RunConfig":
        if not isinstance(d, dict):
            raise InputError(f"a run configuration is a JSON object, got {type(d).__name__}")
        d = dict(d)
        fmt = d.pop("format", FORMAT)
        if fmt != FORMAT:
            raise InputError(f"run configuration format {fmt!r} is not {FORMAT!r} (written by another version)")
        unknown = set(d) - {"data", "model", "train"}
        if unknown:
            raise InputError(f"unknown run configuration sections: {', '.join(sorted(unknown))}")
        parts = {}
        for name, kind in (("data", DataConfig), ("model", ModelConfig), ("train", TrainConfig)):
            sub = d.get(name, {})
            if not isinstance(sub, dict):
                raise InputError(f"configuration section {name!r} must be an object, got {sub!r}")
            bad = set(sub) - {f.name for f in dataclasses.fields(kind)}
            if bad:
                raise InputError(f"unknown {name} configuration fields: {', '.join(sorted(bad))}")
            parts[name] = kind(**sub)
        return cls(**parts)

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=True, allow_nan=False)  # strict: every number is finite

    @classmethod
    def from_json(cls, text: str) -> "RunConfig":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DamagedFile(f"run configuration is not valid JSON ({exc.msg} at line {exc.lineno})") from None
        except ValueError as exc:  # Python's limit on the digits of an int
            raise DamagedFile(f"run configuration is not readable ({plain_error(exc)})") from None
        return cls.from_dict(d)

    def key_dict(self) -> dict:
        """The fields that define the experiment (everything but ``out``, ``device``, ``threads``,
        ``checkpoint_every``)."""
        d = self.to_dict()
        d["train"] = {k: v for k, v in d["train"].items() if k not in _NOT_IN_KEY}
        d["data"].pop("atoms", None)  # where an atoms file was found; its digest (atoms_sha256) is what it holds
        return d

    def cell_config(self) -> dict:
        """What keys a cell of this run in a run store (``fv reproduce``, ``fv scaling``): ``key_dict()`` and,
        off the CPU, the device (numbers from another device are other numbers; CPU cells keep their keys)."""
        config = self.key_dict()
        if self.train.device != "cpu":
            config["device"] = self.train.device
        return config

    def key(self) -> str:
        """Short stable key: a readable prefix and 10 hex digits of the SHA-256 of ``key_dict()``,
        e.g. ``A-tree-K4-B3-N128-s0-1f2e3d4c5b``; softmax attention marks the model, ``As-tree-...``, and the qk router too, ``Aq-tree-...``."""
        digest = hashlib.sha256(json.dumps(self.key_dict(), sort_keys=True).encode()).hexdigest()[:10]
        mark = ("s" if self.model.attention == "softmax" else "") + ("q" if self.model.router == "qk" else "")
        return (
            f"{self.model.model}{mark}-{_KEY_PRIOR[self.data.prior](self.data)}-B{self.model.budget}"
            f"-N{self.data.n_tokens}-s{self.train.seed}-{digest}"
        )

    def memory_bytes(self) -> float:
        """Estimated peak memory of training this run on the CPU (``bridges.prices.memory.train_bytes``: activations,
        weights with gradients and Adam's moments, the interpreter and torch)."""
        from bridges.prices.memory import train_bytes

        return train_bytes(self)

    def check_resources(self) -> "RunConfig":
        """Refuse (one-line ValueError naming the limit and the largest size that fits) a run whose training
        would not fit in the memory available (``bridges.prices.memory.check_train_memory``)."""
        from bridges.prices.memory import check_train_memory

        check_train_memory(self)
        return self

    def replace(self, **sections) -> "RunConfig":
        """``cfg.replace(train=dict(steps=10))``: a copy with fields of the named sections changed."""
        parts = {}
        for name, changes in sections.items():
            if name not in ("data", "model", "train"):
                raise InputError(f"unknown run configuration section {name!r}")
            parts[name] = dataclasses.replace(getattr(self, name), **changes)
        return dataclasses.replace(self, **parts)

    def differences(self, other: "RunConfig") -> list[str]:
        """``section.field: mine vs other`` for every experiment-defining field that differs."""
        a, b = self.key_dict(), other.key_dict()
        out = []
        for section in ("data", "model", "train"):
            for k in sorted(set(a[section]) | set(b[section])):
                if a[section].get(k) != b[section].get(k):
                    out.append(f"{section}.{k}: {a[section].get(k)!r} vs {b[section].get(k)!r}")
        return out


# --- a run's fields as command-line options (bridges.runs.options) -------------------------------------------
DEFAULT_OUT = "runs"  # the run folders of fv train and fv compare: DEFAULT_OUT/<key>/
DEFAULT_SAMPLES = 20_000  # Monte Carlo samples per theory number of fv compare (and its sweep cells)
_UNIT = dict(low=0, high=1, open_low=True, open_high=True)
RUN_OPTIONS = (
    *options_of(
        DataConfig, section="data", none=False,
        prior=dict(choices=PRIORS),
        cov=dict(help="gaussian prior only (default matched)", choices=COVARIANCES),
        depth=dict(help=f"tree depth, D = 2^K - 1 (default {DataConfig().depth}, or the number of --scales)", low=1,
                   high=MAX_DEPTH, metavar="K", default=None),  # None: the config's default, or the number of scales
        alpha=dict(help="scale ratio in (0, 1), e.g. 1/2 (default 0.5)", **_UNIT),
        scales=dict(kind="numbers", help="general tree scales a_1 >= .. >= a_K > 0, comma-separated (e.g. 1,1/2,1/3), "
                    "instead of --alpha (tree or --cov matched)", metavar="a1,..,aK"),
        n_tokens=dict(flag="--tokens", help=f"context length (default {DataConfig().n_tokens})", low=1,
                      aliases=("--n-tokens",), label="n_tokens (--tokens)", metavar="N"),
        s2=dict(help=f"label noise variance (default {DataConfig().s2})", low=0, high=1e100),
        atoms=dict(help="atoms prior: an (M, D) .npy file of the atoms (copied into the run folder as atoms.npy)",
                   metavar="FILE.npy"),
        diversity=dict(help="atoms prior: M atoms drawn once from N(0, I_D) (with --dim D)", low=1, high=ATOMS_MAX,
                       metavar="M", label="diversity M (--diversity)"),
        atoms_dim=dict(flag="--dim", help="atoms prior: the atoms' dimension D (with --diversity; with --atoms it "
                       "must match the file)", low=1, high=ATOMS_MAX_DIM, metavar="D", label="dim D (--dim)"),
        atoms_seed=dict(help="atoms prior: the seed the --diversity atoms are drawn by (default: --seed)", low=0,
                        high=2**63 - 1),
        atoms_sha256=dict(help="atoms prior: the SHA-256 of the --atoms file's atoms (computed when left out; given, "
                          "the file must hold those atoms)", metavar="HEX")),
    *options_of(
        ModelConfig, section="model", none=False,
        model=dict(choices=MODEL_NAMES),
        budget=dict(help=f"workspace slots (default {ModelConfig().budget})", low=1, metavar="B"),
        mlp_width=dict(help=f"hidden size of the MLPs (default {ModelConfig().mlp_width})", low=1, high=2**20),
        hidden_layers=dict(help=f"MLP hidden layers (default {ModelConfig().hidden_layers})", low=1, high=1000),
        readout=dict(choices=READOUTS),
        attention=dict(help="linear: phi = (1/N) sum_i k_i y_i (default); softmax: phi = sum_i softmax_i(s_i) y_i, "
                       "the key function's output as the score (docs/theory.md section 2)", choices=ATTENTIONS),
        router=dict(help="Model A's router: mlp, k_i = f([x_i, p]) (default); qk, k_i = <q_l(p), kappa_l(x_i)> "
                    "(docs/theory.md section 7)", choices=ROUTERS),
        query_dim=dict(help="r, the query and token-key size of --router qk (default D)", low=1, high=MAX_QUERY_DIM,
                       metavar="r"),
        shape=dict(help="model T: deep (L = B blocks, one head of one value) or wide (one block, B heads of one "
                   "value); default deep (docs/theory.md section 7.1)", choices=SHAPES),
        layers=dict(help="model T: blocks L (with --heads and --width: layers x heads x width = --budget); model G: "
                    "layers L (default 1; its budget is L D)", low=1,
                    high=MAX_SIZE, metavar="L"),
        heads=dict(help="model T: attention heads H per block (default 1)", low=1, high=MAX_SIZE, metavar="H"),
        width=dict(help="model T: values per head d, the theory's channels (default 1)", low=1, high=MAX_SIZE,
                   metavar="d"),
        head_dim=dict(help=f"model T: query and key size of a head (default {HEAD_DIM})", low=1, high=MAX_SIZE),
        d_model=dict(help=f"model T: the residual width (default {D_MODEL})", low=1, high=MAX_SIZE),
        values=dict(help="model G: what the values read, residual (default: gradient descent), label or token "
                    "(docs/theory.md section 13)", choices=VALUES)),
    *options_of(
        TrainConfig, section="train", none=False,
        steps=dict(help="training steps (default: the recipe, " + _recipes(lambda r: r.steps_per_budget)
                   + " x budget)", low=1),
        batch=dict(help="contexts per step (default: the recipe, " + _recipes(lambda r: r.batch) + ")", low=1),
        lr=dict(help="peak Adam learning rate (default: the recipe, " + _recipes(lambda r: f"{r.lr:g}") + ")", low=0,
                high=1e6, open_low=True),
        warmup=dict(help=f"linear warm-up steps (default {RECIPE_WARMUP})", low=0),
        schedule=dict(choices=SCHEDULES),
        loss=dict(help="training objective: theta = ||theta_hat - theta||^2 (default for decoding readouts), "
                  "query = (y_hat - <theta, x_q>)^2 (default for the generic readout)", choices=TRAIN_LOSSES),
        precision=dict(help="key MLPs in bfloat16 autocast or float32 (default auto: bf16 where native)",
                       choices=PRECISIONS),
        grad_clip=dict(help="max global gradient norm, 0 disables (default 1)", low=0, high=1e100),
        eval_every=dict(help=f"default {RECIPE_EVAL_EVERY}", low=1),
        eval_batches=dict(help=f"default {TrainConfig().eval_batches}", low=1, high=10**6),
        seed=dict(help="default 0", low=0, high=2**63 - 1),
        device=dict(help="torch device: cpu, cuda, cuda:<i> or mps (default cpu)", check=check_device_name),
        threads=dict(help="torch CPU threads (default 1)", low=1, high=MAX_THREADS),
        checkpoint_every=dict(help=f"default {TrainConfig().checkpoint_every}", low=1),
        init_from=dict(help="Model A only: start from the finished run KEY in --out at a smaller budget "
                       "(its layers and readout; the new layers fresh), the curriculum", metavar="KEY"),
        init_policy=dict(help="Model A only: start from the theory policy POLICY distilled into the routers "
                         "(bridges.training.distil)", choices=INIT_POLICIES, metavar="POLICY"),
        aux_readout=dict(help="adaptive models only: weight W of the readout loss after every layer (slots not yet "
                         "written zero), added to the final loss as W x their mean (default 0: none)", low=0,
                         high=1e6, metavar="W"),
        tokens_from=dict(help="a noise curriculum: training contexts start with N0 tokens (more than --tokens), "
                         f"falling geometrically to --tokens over the first {CURRICULUM_FRACTION:g} of the steps "
                         "(default 0: none)", low=0, metavar="N0"),
        batch_late=dict(help=f"larger batches late: from {LATE_FRACTION:g} of the steps on, NB contexts a step "
                        "(default 0: --batch throughout)", low=0, metavar="NB"),
        out=dict(help=f"run folders go to DIR/<key>/ (default {DEFAULT_OUT})", metavar="DIR", default=DEFAULT_OUT)),
)
RUN_OPTION_NAMES = {name: o for o in RUN_OPTIONS for name in o.names}  # every spelling, without dashes
# old spellings refused with one line naming the new one: {old flag: (new flag, why)}
RENAMED_OPTIONS: dict = {}  # {old flag: (new flag, why)}; --width is Model T's values per head (once --mlp-width's)
_FIELD_DEFAULTS = {(section, f.name): f.default for section, kind in (("data", DataConfig), ("model", ModelConfig),
                                                                     ("train", TrainConfig))
                   for f in dataclasses.fields(kind)}
