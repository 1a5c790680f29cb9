"""Key patching on a theory strategy (docs/theory.md section 8).

Target leaf ``s`` uniform; donor leaf ``s'`` with divergence depth ``j`` (``s'_k = s_k`` for ``k < j``,
``s'_j = -s_j``, the signs below ``j`` uniform). Target and donor share the channel noise: the same
``xi`` under the gaussian channel, the same tokens ``x_i`` and label noise under ``tokens``. The target
runs its policy, except that layer ``l`` reads the rows the policy chooses on the donor context (the
donor's keys); every other layer, and the routing after the patch, follow the target's own readings.
The decoder is the target's Bayes decoder for the rows its own policy chose (a readout that does not
know about the patch); ``informed=True`` decodes with the rows actually read instead. Under the tokens
channel on the tree prior it is the exact decoder of the tokens (the law of their one statistic) (the table's ``decoder`` says so).

For the path strategy under the gaussian channel the donor reads exactly the target's nodes and
values up to depth ``j - 1``, so a patch at ``l <= j`` changes nothing: the loss equals the unpatched
loss on the same samples, bit for bit. For ``l > j`` the target reads a node off its own path.

:func:`patching_table` averages over random pairs of each divergence depth; :func:`patched_loss`
takes one given pair of leaves and averages over the channel noise only.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, replace

import numpy as np
from fvsym import heap
from fvsym._validate import _short

from fvnum.mc import _chunks
from fvnum.mc.channels import decoder_of, token_statistics
from fvnum.estimate import Estimate, Moments, pool
from fvnum.policies.strategies import strategy_object
from fvnum.mc.simulate import Draws, blocks, check_inputs, run_policy
from fvnum.priors.tree import TreeSpec
from fvsym.errors import InputError


@dataclass(frozen=True)
class PatchingTable:
    """The (patch layer ``l``, divergence depth ``j``) loss table, for a theory strategy and for a model alike.

    ``loss[l - 1, j - 1]``, ``stderr[...]``: loss with layer ``l`` patched by a donor of divergence depth
    ``j``; ``unpatched``: the loss without a patch (an Estimate, pooled over every column's targets);
    ``unpatched_by_depth[j - 1]`` and its ``unpatched_stderr_by_depth``: the unpatched loss on column ``j``'s
    own samples (so ``loss[l-1, j-1] - unpatched_by_depth[j-1]`` is the effect of the patch); ``n``:
    samples per cell; ``strategy`` (the theory's, or ``model``), ``layers`` and ``depths`` (both from 1);
    ``metric``: ``theta`` (``||theta_hat - theta||^2``) or ``query`` (the query error, a model's generic
    readout). Where the per-sample losses are paired (models), ``effect = loss - unpatched`` with its paired
    standard error ``effect_stderr``; else None. ``decoder``: the theory's decoder
    (``fvnum.mc.channels.decoder_of``); None for a model (its own readout)."""

    loss: np.ndarray
    stderr: np.ndarray
    unpatched: Estimate
    unpatched_by_depth: np.ndarray
    unpatched_stderr_by_depth: np.ndarray
    n: int
    strategy: str
    layers: tuple
    depths: tuple
    metric: str = "theta"
    effect: np.ndarray | None = None
    effect_stderr: np.ndarray | None = None
    decoder: str | None = None
    intervention: str = "key"  # key patching (section 8) or transplant of the workspace (section 9b)
    seed: int | None = None
    patched: str | None = None  # the tensor patched (None: the intervention's own, PATCHED)
    how: str | None = None  # how it was changed (None: replaced by the donor's)
    # the random-donor baseline, a column per layer (None where not asked): a donor of a leaf drawn uniformly and
    # independently of the target's, sharing its tokens, noise and query; its effect is an uninformed donor's
    random_donor: np.ndarray | None = None
    random_donor_stderr: np.ndarray | None = None
    random_donor_effect: np.ndarray | None = None
    random_donor_effect_stderr: np.ndarray | None = None

    @property
    def patched_tensor(self) -> str:
        return self.patched or PATCHED.get(self.intervention, self.intervention)

    @property
    def change(self) -> str:
        return self.how or "replaced by the donor's"

    def to_dict(self) -> dict:
        out = {
            "intervention": self.intervention, "strategy": self.strategy, "n": self.n, "seed": self.seed,
            "patched": self.patched_tensor, "how": self.change, "layers": list(self.layers),
            "depths": list(self.depths),
            "loss": self.loss.tolist(), "stderr": self.stderr.tolist(), "unpatched": self.unpatched.to_dict(),
            "unpatched_by_depth": self.unpatched_by_depth.tolist(),
            "unpatched_stderr_by_depth": self.unpatched_stderr_by_depth.tolist(), "metric": self.metric,
            "decoder": self.decoder,
        }
        if self.effect is not None:
            out.update(effect=self.effect.tolist(), effect_stderr=self.effect_stderr.tolist())
        if self.random_donor is not None:
            out.update({k: getattr(self, k).tolist() for k in RANDOM_FIELDS})
        return out

    def to_frame(self):
        """Long form as a pandas DataFrame: one row per (patched layer, divergence depth) with ``loss``,
        ``stderr``, ``unpatched`` (that column's own unpatched loss) and, where paired, ``effect``."""
        from fvnum.estimate import to_frame

        rows = []
        for a, layer in enumerate(self.layers):
            for b, depth in enumerate(self.depths):
                row = {"layer": layer, "depth": depth, "loss": float(self.loss[a, b]), "stderr": float(self.stderr[a, b]),
                       "unpatched": float(self.unpatched_by_depth[b])}
                if self.effect is not None:
                    row.update(effect=float(self.effect[a, b]), effect_stderr=float(self.effect_stderr[a, b]))
                rows.append(row)
        return to_frame(rows, "a PatchingTable")

    def __repr__(self) -> str:
        what = {"key": "key patching", "transplant": "state transplant"}.get(self.intervention, self.intervention)
        head = (f"PatchingTable({self.strategy}, {what}, metric {self.metric}, {len(self.layers)} layers x "
                f"{len(self.depths)} divergence depths, n = {self.n} per cell; unpatched {self.unpatched})")
        cols = "".join(f"{'j=' + str(j):>18}" for j in self.depths)
        from fvnum.estimate import stderr_text

        body = [f"  l={l:<3}" + "".join(f"{self.loss[a, b]:>10.4g} " + f"{stderr_text(self.stderr[a, b], self.loss[a, b], plus='+- '):<8}"
                                      for b in range(len(self.depths))) for a, l in enumerate(self.layers)]
        return "\n".join([head, "       " + cols, *body])

    def to_markdown(self) -> str:
        """The loss table, the unpatched loss and, where paired, the table of effects: one writer for all."""
        from fvnum.estimate import value_text  # a standard error below floating-point noise prints as exact

        rand = self.random_donor is not None

        def table(values, errors, extra):
            head = ("| layer \\ j | " + " | ".join("0 (no-op)" if j == 0 else str(j) for j in self.depths) + " |"
                    + (" random donor |" if rand else ""))
            sep = "|---" * (len(self.depths) + 1 + rand) + "|"
            body = [
                f"| {l} | " + " | ".join(value_text(values[a, b], errors[a, b], ".4g", scale=self.loss[a, b])
                                        for b in range(len(self.depths)))
                + " |" + (f" {value_text(extra[0][a], extra[1][a], '.4g', scale=self.random_donor[a])} |" if rand else "")
                for a, l in enumerate(self.layers)
            ]
            return [head, sep, *body]

        lines = [self.header(), "", *table(self.loss, self.stderr, (self.random_donor, self.random_donor_stderr)), "",
                 f"unpatched: {self.unpatched}"]
        if self.effect is not None:
            lines += ["", "effect (patched - unpatched, paired):", "",
                      *table(self.effect, self.effect_stderr, (self.random_donor_effect, self.random_donor_effect_stderr))]
        return "\n".join(lines)

    def header(self) -> str:
        """One line: what was patched and how, the columns, the sample sizes and the seed."""
        what = {"key": "key patching", "transplant": "transplant"}.get(self.intervention, self.intervention)
        cols = "columns: the donor's divergence depth j" + (" (0: the no-op control, donor = target)"
                                                           if 0 in self.depths else "")
        if self.random_donor is not None:
            cols += "; random donor: a leaf drawn independently of the target's (an uninformed donor)"
        seed = "" if self.seed is None else f", seed {self.seed}"
        return f"{what}: {self.patched_tensor} {self.change}; {cols}; {self.n} targets a cell{seed}"


PATCHED = {"key": "layer l's keys", "transplant": "Phi_l (the workspace slots of layers 1..l)",
           "attention transplant": "blocks.{1..l}.hook_attn_out (every token's attention output)"}
RANDOM_FIELDS = ("random_donor", "random_donor_stderr", "random_donor_effect", "random_donor_effect_stderr")


def donor_leaves(leaves: np.ndarray, depth: int, j: int, rng) -> np.ndarray:
    """Donor of divergence depth ``j``: same signs above ``j``, flipped at ``j``, uniform below."""
    low = depth - j
    return (((leaves >> low) ^ 1) << low) | rng.integers(0, 2**low, size=leaves.size, dtype=np.int64)


def draw_pair(spec: TreeSpec, channel, n: int, budget: int, j: int, rng, fixed=None):
    """Target and donor draws sharing their noise; ``fixed = (target_leaf, donor_leaf)`` pins the leaves."""
    leaves = spec.sample(n, rng) if fixed is None else np.full(n, fixed[0], dtype=np.int64)
    target = Draws(n, leaves=leaves)
    if channel.kind == "gaussian":
        target.noise = rng.standard_normal((n, budget))
    dl = donor_leaves(leaves, spec.depth, j, rng) if fixed is None else np.full(n, fixed[1], dtype=np.int64)
    donor = Draws(n, leaves=dl, noise=target.noise)
    if channel.kind == "tokens":
        target.stat, donor.stat = token_statistics(
            [target.dense(spec), donor.dense(spec)], channel.n_tokens, channel.s2, rng
        )
    return target, donor


def patching_table(prior, strategy: str, budget: int, channel, *, samples: int = 20_000, seed: int = 0,
                   options=None, patch=None, threads=None, progress=False) -> PatchingTable:
    """The (patch layer ``l``, divergence depth ``j``) loss table of a strategy (tree prior only), with
    ``samples`` samples per divergence depth shared by every patch layer (common random numbers).
    ``strategy``: ``path``, ``optimal``, ``bellman_noiseless``, ``greedy_coordinate``, ``greedy_dense``, ``policy``
    (``options.policy`` a callable) or any non-adaptive one (patching then changes nothing); ``options`` a
    ``fvnum.StrategyOptions``. ``patch`` (``fvnum.PatchSpec``): ``depths`` the divergence depths (default 1..K),
    ``informed`` decodes with the rows read."""
    from fvnum.options import PatchSpec, check_options

    patch = check_options(patch, PatchSpec, "patch")
    depths, informed = patch.depths, patch.informed
    spec, channel, pol, samples, seed = _setup(prior, strategy, budget, channel, options, samples, seed, threads)
    depths = tuple(range(1, spec.depth + 1)) if depths is None else tuple(int(j) for j in depths)
    for j in depths:
        if not 1 <= j <= spec.depth:
            raise InputError(f"divergence depth {j} is outside 1..{spec.depth}")
    L = pol.layers
    cols = [_column(spec, channel, pol, budget, j, None, samples, seed, informed, threads, progress) for j in depths]
    loss = np.array([[cols[b][l].estimate().value for b in range(len(depths))] for l in range(1, L + 1)])
    err = np.array([[cols[b][l].estimate().stderr for b in range(len(depths))] for l in range(1, L + 1)])
    base = [c[0].estimate() for c in cols]
    decoder = decoder_of(spec, channel)
    return PatchingTable(
        loss.reshape(L, len(depths)), err.reshape(L, len(depths)),
        replace(pool(c[0] for c in cols).estimate(), decoder=decoder),
        np.array([e.value for e in base]), np.array([e.stderr for e in base]), samples, pol.name,
        tuple(range(1, L + 1)), depths, decoder=decoder, seed=seed, patched="layer l's rows (the keys it reads)",
        how="replaced by the rows the policy chooses on the donor" + (" (decoded with the rows read)" if informed else ""),
    )


def patched_loss(prior, strategy: str, budget: int, channel, pair, *, samples: int = 20_000, seed: int = 0,
                 options=None, patch=None, threads=None) -> tuple:
    """Patching for one given pair of leaves ``pair = (target, donor)`` (index or sign vector each): the losses
    over the channel noise, ``(unpatched, [patched at layer 1, .., L])``, each an Estimate. ``options`` and
    ``patch`` (its ``informed``) as in :func:`patching_table`."""
    from fvnum.options import PatchSpec, check_options

    informed = check_options(patch, PatchSpec, "patch").informed
    if isinstance(pair, (str, bytes)) or not hasattr(pair, "__len__") or len(pair) != 2:
        raise InputError(f"pair must be (target, donor), two leaves, got {_short(pair)}")
    target, donor = pair
    spec, channel, pol, samples, seed = _setup(prior, strategy, budget, channel, options, samples, seed, threads)
    pair = tuple(_leaf_index(spec, x, name) for x, name in ((target, "target"), (donor, "donor")))
    if pair[0] == pair[1]:
        raise InputError(f"target and donor are the same leaf {pair[0]}; they must differ")
    s, sd = spec.signs(np.array(pair))
    j = int(np.argmax(s != sd)) + 1
    col = _column(spec, channel, pol, budget, j, pair, samples, seed, informed, threads, False)
    decoder = decoder_of(spec, channel)
    return replace(col[0].estimate(), decoder=decoder), [replace(c.estimate(), decoder=decoder) for c in col[1:]]


def _leaf_index(spec: TreeSpec, leaf, name: str) -> int:
    if np.ndim(leaf) == 1:
        signs = [int(x) for x in leaf]
        if len(signs) != spec.depth or any(x not in (1, -1) for x in signs):
            raise InputError(f"{name} leaf must be {spec.depth} signs in {{+1, -1}}, got {tuple(signs)}")
        return functools.reduce(heap.child, signs, 0)  # index <- 2 index + [s_k < 0], k = 1..K
    if isinstance(leaf, bool) or not isinstance(leaf, (int, np.integer)) or not 0 <= leaf < spec.n_leaves:
        raise InputError(f"{name} leaf must be an index in 0..{spec.n_leaves - 1} or a sign vector, got {_short(leaf)}")
    return int(leaf)


def _setup(prior, strategy, budget, channel, options, samples, seed, threads):
    from fvnum.mc._chunks import check_threads
    from fvnum.mc.channels import check_channel
    from fvnum.options import check_options

    check_threads(threads)
    spec, channel, samples, seed, budget = check_inputs(
        prior, check_channel(channel), samples=samples, seed=seed, budget=budget,
        tree="key patching needs a tree prior (divergence depth of two leaves)")
    options = check_options(options)
    chosen = strategy_object(strategy).using(design=options.design, fn=options.policy, layers=options.layers,
                                             width=options.width, measurement=options.measurement,
                                             search_samples=options.search_samples)
    pol = chosen.policy(prior, budget, channel, seed=seed, threads=threads)
    return spec, channel, pol, samples, seed


def _column(spec, channel, pol, budget, j, fixed, samples, seed, informed, threads, progress) -> list:
    """Moments of the loss unpatched (entry 0) and patched at each layer (entries 1..L), on common samples."""
    L = pol.layers

    def chunk(sizes, rngs):
        pairs = [draw_pair(spec, channel, n, budget, j, rng, fixed) for n, rng in zip(sizes, rngs)]
        target, donor = Draws.concat([p[0] for p in pairs]), Draws.concat([p[1] for p in pairs])

        def run(l):
            fused = pol.run(spec, channel, target, budget, donor=donor, patch_layer=l, informed=informed)
            if fused is not None:
                return fused
            return run_policy(spec, channel, pol, target, donor=donor, patch_layer=l, informed=informed)

        return [Moments.of(run(l).loss) for l in range(L + 1)]

    parts = _chunks.run_chunks(chunk, samples, seed, **blocks(spec, channel, pol, budget, factor=2),
                               purpose=_chunks.DONOR + 16 * j, threads=threads, progress=progress)
    return [pool(p[l] for p in parts) for l in range(L + 1)]
