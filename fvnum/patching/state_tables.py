"""The tables of the state interventions on a theory strategy (docs/theory.md section 9; :mod:`fvnum.patching.state`,
which these names are importable from too): :class:`MeanState`, the mean workspaces of the contexts that share a
prefix, and :class:`InjectionTable`, what injecting them does (:func:`injection_from_dict` reads a stored one back).
The transplant's table is key patching's ``PatchingTable`` (:mod:`fvnum.patching.keys`). A trained model's
interventions (``bridges.patching.state``) return the same types.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fvnum.estimate import Estimate
from fvsym.errors import InputError



def _chance(layers, depth: int) -> np.ndarray:
    """Prefix accuracy by chance after each layer: ``2^-min(l, K)``."""
    return np.array([2.0 ** -min(l, depth) for l in layers])


def _json_array(a) -> list:
    """An array as JSON lists, NaN as null (a cell the table has no value for)."""
    return np.where(np.isnan(a), None, a).tolist()

@dataclass(frozen=True)
class MeanState:
    """Mean workspaces ``Phi_bar_l(s_1..s_l)`` of a strategy or a model (docs/theory.md section 9).

    ``means[l]`` (``2^min(l, K)``, ``l * d``): the mean of ``Phi_l`` over the contexts whose leaves have the
    prefix of index ``p`` (row ``p``: the prefix's bits, first level first, a bit 1 for a sign -1, as
    ``leaf >> (K - l)``); ``counts[l]`` the contexts of each prefix (a row with none is NaN). ``n``: contexts
    drawn; ``source``: the strategy (or ``model ...``); ``origin``: the prior, strategy, budget and channel it was
    drawn under (``fvnum.mean_state``), which an injection of another is refused for."""

    means: dict
    counts: dict
    n: int
    source: str
    depth: int
    width: int = 1
    origin: tuple = ()  # ((what, its text), ...): the prior, strategy, budget and channel it was drawn under
    # per layer, sums (G, 2^level, l d) and counts (G, 2^level) of G groups of the contexts (context i in group
    # i mod G): an injection's jackknife of the mean state's own error (fvnum.patching._jackknife)
    group_sums: dict = field(default_factory=dict, repr=False)
    group_counts: dict = field(default_factory=dict, repr=False)

    @property
    def layers(self) -> tuple:
        return tuple(sorted(self.means))

    @property
    def groups(self) -> int:
        """Groups of its contexts held (0: none, its own Monte Carlo error cannot be estimated)."""
        return min((len(c) for c in self.group_counts.values()), default=0) if self.group_counts else 0

    def prefix_index(self, layer: int, prefix) -> int:
        """The row of ``prefix`` (an index in ``0..2^l - 1`` or ``l`` signs in {+1, -1}) at ``layer``."""
        level = min(layer, self.depth)
        if np.ndim(prefix) == 1:
            signs = [int(x) for x in prefix]
            if len(signs) != level or any(x not in (1, -1) for x in signs):
                raise InputError(f"a prefix at layer {layer} is {level} signs in {{+1, -1}}, got {tuple(signs)}")
            return int(sum((x < 0) << (level - 1 - i) for i, x in enumerate(signs)))
        if isinstance(prefix, bool) or not isinstance(prefix, (int, np.integer)) or not 0 <= prefix < 2**level:
            raise InputError(f"a prefix at layer {layer} is an index in 0..{2**level - 1} or {level} signs, got {prefix!r}")
        return int(prefix)

    def of(self, layer: int, prefix) -> np.ndarray:
        """``Phi_bar_l`` of one prefix: (l * d,)."""
        if layer not in self.means:
            raise InputError(f"no mean state at layer {layer}; layers held: {', '.join(map(str, self.layers))}")
        return self.means[layer][self.prefix_index(layer, prefix)]

    def to_dict(self) -> dict:
        return {"source": self.source, "n": self.n, "depth": self.depth, "width": self.width,
                "origin": dict(self.origin), "layers": list(self.layers), "groups": self.groups,
                "means": {str(l): np.where(np.isnan(m), None, m).tolist() for l, m in self.means.items()},
                "counts": {str(l): c.tolist() for l, c in self.counts.items()}}

    def __repr__(self) -> str:
        least = min(int(c.min()) for c in self.counts.values()) if self.counts else 0
        return (f"MeanState({self.source}: layers {', '.join(map(str, self.layers))}, {self.n} contexts, "
                f"at least {least} per prefix)")


@dataclass(frozen=True)
class InjectionTable:
    """Mean-vector injection (docs/theory.md section 9): rows the injection layer ``l``, columns the divergence
    depth ``j`` of the injected prefix from the target's own (``j <= min(l, K)``; NaN elsewhere).

    ``prefix_accuracy[l-1, j-1]`` (and ``accuracy_stderr``): the fraction of targets whose decoded leaf has the
    injected prefix; ``loss``/``stderr``: ``||theta_hat - theta||^2`` against the target's own ``theta``;
    ``effect``/``effect_stderr``: ``loss - unpatched``, paired. ``own_accuracy[l-1]``: the fraction of
    unpatched targets whose decoded leaf has their own prefix of length ``l`` (what injection has to beat);
    ``own_injected_accuracy[l-1]`` and ``own_injected_loss[l-1]`` (with their stderr): the control, each target
    given the mean state of its *own* prefix (is a mean state a state the later layers can read at all?);
    ``chance[l-1]`` = ``2^-min(l, K)``. ``n`` targets per cell, ``mean_samples`` contexts behind the means."""

    layers: tuple
    depths: tuple
    prefix_accuracy: np.ndarray
    accuracy_stderr: np.ndarray
    loss: np.ndarray
    stderr: np.ndarray
    effect: np.ndarray
    effect_stderr: np.ndarray
    unpatched: Estimate
    own_accuracy: np.ndarray
    own_accuracy_stderr: np.ndarray
    n: int
    strategy: str
    mean_samples: int
    depth: int
    metric: str = "theta"
    decoder: str | None = None
    own_injected_accuracy: np.ndarray | None = None
    own_injected_accuracy_stderr: np.ndarray | None = None
    own_injected_loss: np.ndarray | None = None
    own_injected_loss_stderr: np.ndarray | None = None
    stderr_includes: str = "targets only"  # what every standard error holds (fvnum.patching._jackknife)
    seed: int | None = None
    patched: str = "Phi_l, the workspace slots of layers 1..l"  # the tensor patched (a model's: workspace.{l})
    how: str = "replaced by the mean workspace of the donor's prefix"
    intervention: str = field(default="injection", init=False)

    @property
    def chance(self) -> np.ndarray:
        return _chance(self.layers, self.depth)

    def to_dict(self) -> dict:
        arr = _json_array
        return {"intervention": self.intervention, "strategy": self.strategy, "n": self.n, "depth": self.depth,
                "mean_samples": self.mean_samples, "layers": list(self.layers), "depths": list(self.depths),
                "prefix_accuracy": arr(self.prefix_accuracy), "accuracy_stderr": arr(self.accuracy_stderr),
                "loss": arr(self.loss), "stderr": arr(self.stderr), "effect": arr(self.effect),
                "effect_stderr": arr(self.effect_stderr), "unpatched": self.unpatched.to_dict(),
                "own_accuracy": self.own_accuracy.tolist(), "own_accuracy_stderr": self.own_accuracy_stderr.tolist(),
                "chance": self.chance.tolist(), "metric": self.metric, "decoder": self.decoder,
                "stderr_includes": self.stderr_includes, "seed": self.seed, "patched": self.patched, "how": self.how,
                **{k: None if getattr(self, k) is None else arr(getattr(self, k))
                   for k in ("own_injected_accuracy", "own_injected_accuracy_stderr", "own_injected_loss",
                             "own_injected_loss_stderr")}}

    def to_frame(self):
        """Long form: one row per (layer, divergence depth) with accuracy, loss and effect (pandas)."""
        from fvnum.estimate import to_frame

        rows = []
        for a, l in enumerate(self.layers):
            for b, j in enumerate(self.depths):
                if np.isnan(self.loss[a, b]):
                    continue
                rows.append({"layer": l, "depth": j, "prefix_accuracy": float(self.prefix_accuracy[a, b]),
                             "accuracy_stderr": float(self.accuracy_stderr[a, b]), "loss": float(self.loss[a, b]),
                             "stderr": float(self.stderr[a, b]), "effect": float(self.effect[a, b]),
                             "effect_stderr": float(self.effect_stderr[a, b]),
                             "own_accuracy": float(self.own_accuracy[a]), "chance": float(self.chance[a])})
        return to_frame(rows, "an InjectionTable")

    def to_markdown(self) -> str:
        from fvnum.estimate import value_text  # a standard error below floating-point noise prints as exact

        def table(values, errors, fmt, scale):
            control = self.own_injected_accuracy is not None
            head = ("| layer \\ j | " + " | ".join(str(j) for j in self.depths) + " | own prefix, unpatched |"
                    + (" own prefix injected |" if control else ""))
            sep = "|---" * (len(self.depths) + 2 + control) + "|"
            body = []
            for a, l in enumerate(self.layers):
                cells = [("" if np.isnan(values[a, b]) else value_text(values[a, b], errors[a, b], fmt, scale=scale[a, b]))
                         for b in range(len(self.depths))]
                own = f"{self.own_accuracy[a]:.3f}" if fmt == ".3f" else ""
                row = f"| {l} | " + " | ".join(cells) + f" | {own} |"
                if control:
                    v, e = ((self.own_injected_accuracy, self.own_injected_accuracy_stderr) if fmt == ".3f"
                            else (self.own_injected_loss, self.own_injected_loss_stderr))
                    row += f" {value_text(v[a], e[a], fmt)} |"
                body.append(row)
            return [head, sep, *body]

        return "\n".join([f"injection: {self.patched} {self.how}; {self.n} targets a cell, mean states of "
                          f"{self.mean_samples} contexts, seed {self.seed}; standard errors: {self.stderr_includes}", "",
                          "prefix accuracy (decoded leaf has the injected prefix):", "",
                          *table(self.prefix_accuracy, self.accuracy_stderr, ".3f", self.prefix_accuracy), "",
                          f"loss (against the target's own theta; unpatched {self.unpatched}):", "",
                          *table(self.loss, self.stderr, ".4g", self.loss)])

    def __repr__(self) -> str:
        head = (f"InjectionTable({self.strategy}, {len(self.layers)} layers x {len(self.depths)} divergence depths, "
                f"n = {self.n} per cell, means of {self.mean_samples} contexts; unpatched {self.unpatched})")
        cols = "".join(f"{'j=' + str(j):>9}" for j in self.depths)
        body = [f"  l={l:<3}" + "".join("" if np.isnan(v) else f"{v:>9.3f}" for v in self.prefix_accuracy[a])
                + f"   (own {self.own_accuracy[a]:.3f})" for a, l in enumerate(self.layers)]
        return "\n".join([head, "  prefix accuracy", "       " + cols, *body])


def injection_from_dict(d: dict) -> InjectionTable:
    """The ``InjectionTable`` of its ``to_dict()`` (a stored table, theory or model), to lay it out again."""
    def arr(name):
        return np.array([[np.nan if x is None else x for x in row] for row in d[name]], dtype=float)

    u = d["unpatched"]
    return InjectionTable(tuple(d["layers"]), tuple(d["depths"]), arr("prefix_accuracy"), arr("accuracy_stderr"),
                          arr("loss"), arr("stderr"), arr("effect"), arr("effect_stderr"),
                          Estimate(u["value"], u["stderr"], u["n"], u.get("how", "mc"), u.get("decoder")),
                          np.array([np.nan if x is None else x for x in d["own_accuracy"]], dtype=float),
                          np.array([np.nan if x is None else x for x in d["own_accuracy_stderr"]], dtype=float),
                          d["n"], d["strategy"], d["mean_samples"], d["depth"] if "depth" in d else len(d["depths"]),
                          metric=d.get("metric", "theta"), decoder=d.get("decoder"),
                          stderr_includes=d.get("stderr_includes", "targets only"), seed=d.get("seed"),
                          **{k: d[k] for k in ("patched", "how") if d.get(k) is not None},
                          **{k: None if d.get(k) is None else np.array([np.nan if x is None else x for x in d[k]],
                                                                        dtype=float)
                             for k in ("own_injected_accuracy", "own_injected_accuracy_stderr", "own_injected_loss",
                                       "own_injected_loss_stderr")})


@dataclass(frozen=True)
class SteeringTable:
    """Additive steering (docs/theory.md section 9; Todd et al.'s function vectors added to the residual stream):
    rows the layer ``l``, columns the scale ``c``; each target's ``Phi_l`` gets ``c (Phi_bar_l(donor prefix) -
    Phi_bar_l(own prefix))`` added, its donor of divergence depth ``depth_j``. ``prefix_accuracy`` (the decoded leaf
    has the donor's prefix) and ``loss`` (against the target's own ``theta``), with ``effect = loss - unpatched``
    paired; ``own_accuracy[l-1]`` the unpatched targets' own prefix accuracy, ``chance`` ``2^-min(l, K)``."""

    layers: tuple
    scales: tuple
    depth_j: int
    prefix_accuracy: np.ndarray
    accuracy_stderr: np.ndarray
    loss: np.ndarray
    stderr: np.ndarray
    effect: np.ndarray
    effect_stderr: np.ndarray
    unpatched: Estimate
    own_accuracy: np.ndarray
    n: int
    mean_samples: int
    depth: int
    seed: int | None = None
    strategy: str = "model"
    metric: str = "theta"
    stderr_includes: str = "targets only"
    patched: str = "workspace.{l}"
    how: str = "added: scale * (Phi_bar_l(donor's prefix) - Phi_bar_l(own prefix))"
    intervention: str = field(default="steering", init=False)

    @property
    def chance(self) -> np.ndarray:
        return _chance(self.layers, self.depth)

    def to_dict(self) -> dict:
        arr = _json_array
        return {"intervention": self.intervention, "strategy": self.strategy, "patched": self.patched,
                "how": self.how, "n": self.n, "mean_samples": self.mean_samples, "seed": self.seed,
                "depth": self.depth, "depth_j": self.depth_j, "layers": list(self.layers),
                "scales": list(self.scales), "prefix_accuracy": arr(self.prefix_accuracy),
                "accuracy_stderr": arr(self.accuracy_stderr), "loss": arr(self.loss), "stderr": arr(self.stderr),
                "effect": arr(self.effect), "effect_stderr": arr(self.effect_stderr),
                "unpatched": self.unpatched.to_dict(), "own_accuracy": arr(self.own_accuracy),
                "chance": self.chance.tolist(), "metric": self.metric, "stderr_includes": self.stderr_includes}

    def to_markdown(self) -> str:
        from fvnum.estimate import value_text

        def table(values, errors, fmt, scale):
            head = "| layer \\ scale | " + " | ".join(f"{c:g}" for c in self.scales) + " |"
            sep = "|---" * (len(self.scales) + 1) + "|"
            return [head, sep, *(f"| {l} | " + " | ".join(value_text(values[a, s], errors[a, s], fmt, scale=scale[a, s])
                                                        for s in range(len(self.scales))) + " |"
                                 for a, l in enumerate(self.layers))]

        head = (f"steering: {self.patched} {self.how}; donors of divergence depth {self.depth_j}; {self.n} targets a "
                f"cell, mean states of {self.mean_samples} contexts, seed {self.seed}; standard errors: "
                f"{self.stderr_includes}")
        own = ", ".join(f"l={l}: {a:.3f}" for l, a in zip(self.layers, self.own_accuracy))
        return "\n".join([head, "", f"prefix accuracy (decoded leaf has the donor's prefix; unpatched, own prefix: "
                          f"{own}):", "", *table(self.prefix_accuracy, self.accuracy_stderr, ".3f", self.prefix_accuracy),
                          "", f"loss (against the target's own theta; unpatched {self.unpatched}):", "",
                          *table(self.loss, self.stderr, ".4g", self.loss), "", "effect (steered - unpatched, paired):",
                          "", *table(self.effect, self.effect_stderr, ".4g", self.loss)])

    def __repr__(self) -> str:
        return (f"SteeringTable({self.strategy}, {len(self.layers)} layers x scales {', '.join(f'{c:g}' for c in self.scales)}"
                f", donors of depth {self.depth_j}, n = {self.n} per cell; unpatched {self.unpatched})")
