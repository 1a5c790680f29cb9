"""Function-vector interventions on a theory strategy: transplant of the workspace and injection of mean
vectors (docs/theory.md section 9), beside key patching (:mod:`fvnum.patching.keys`, section 8).

Target and donor contexts are those of key patching, drawn the same way from the same streams
(:func:`fvnum.patching.keys.draw_pair`): a target leaf ``s`` uniform, a donor of divergence depth ``j``,
the same gaussian-channel noise ``xi`` or the same tokens and label noise.

- **Transplant at layer l**: the target's workspace slots of layers ``1..l`` (``Phi_l``) are replaced by the
  donor's; layers ``l+1..L`` route from that state (the policy's rows after the donor's readings) and read the
  target's context; the decoder decodes the final state with the rows the policy chooses after it (a readout
  that does not know about the transplant). ``effect = loss - unpatched`` is paired (the same targets). For
  ``path`` under the gaussian channel with shared noise, ``j > l`` gives the donor the target's own readings,
  so the effect is exactly 0, bit for bit.
- **Mean vector** :func:`mean_state`: ``Phi_bar_l(s_1..s_l)``, the mean of ``Phi_l`` over contexts whose
  leaves share the prefix ``s_1..s_l`` (independent draws, stream ``MEAN``).
- **Injection** :func:`injection_table`: a target's ``Phi_l`` is replaced by ``Phi_bar_l`` of the prefix of
  its donor of divergence depth ``j <= l`` (the target's prefix with ``s_j`` flipped, the signs below ``j``
  uniform), and the policy runs on. Measured: ``prefix_accuracy``, the fraction of targets whose decoded leaf
  (the leaf nearest the posterior mean) has the injected prefix, and the loss against the target's own
  ``theta``. Standard errors hold the targets' spread and the mean state's own Monte Carlo error (a second
  draw of ``Phi_bar`` moves every cell): a delete-a-group jackknife over 8 groups of the mean contexts, each
  cell measured again on its first 4096 targets with each leave-one-group-out mean state
  (:mod:`fvnum.patching._jackknife`); the table's ``stderr_includes`` says what its errors hold.

Every layer ``k <= l`` of an intervened run is *replayed*: the policy's state is rebuilt from the readings
it is given, as a router that is a function of the workspace would see them. The keyed prediction policies
(``adaptive_keyed_<family>``, the adaptive row of Model A, :mod:`fvnum.patching.keyed`) are intervened on
drawn tokens the same way.

The tables (``MeanState``, ``InjectionTable``, ``injection_from_dict``) are :mod:`fvnum.patching.state_tables`.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from fvsym._validate import check_int

from fvnum.estimate import Estimate, Moments, pool
from fvnum.mc import _chunks
from fvnum.mc.channels import decoder_of
from fvnum.mc.simulate import Draws, blocks, check_inputs, decode_losses, decode_means, draw_samples, read
from fvnum.patching import _jackknife as jk
from fvnum.patching._jackknife import grouped_means
from fvnum.patching.keys import PatchingTable, _setup, donor_leaves, draw_pair
from fvnum.patching.state_tables import InjectionTable, MeanState
from fvnum.mc.protocol import check_rows
from fvsym.errors import InputError

KEYED_PREFIX = "adaptive_keyed_"  # strategy names of the keyed prediction policies: adaptive_keyed_<family>
STRATEGY_SAMPLES, KEYED_SAMPLES = 20_000, 500  # default samples (per divergence depth, per table)
KEYED_JACKKNIFE = 128  # a keyed policy's targets measured with each leave-one-group-out mean state (its runs are dear)
# Measured (2 cores, load 3-4): path, K4 B3, gaussian, 20,000 samples a replay: 7.7 us a sample and replay; K7 B4 tokens
# 23 us; the price below says 8.7 and 54 us (an upper estimate).
REPLAY_S = 1.5e-6


# --- the engine of a registered strategy --------------------------------------------------------------
def replay(spec, channel, pol, draws: Draws, prefix: np.ndarray | None = None):
    """Run ``pol`` on ``draws`` with the readings of its first ``l`` layers given (``prefix`` (n, l, d); None:
    none): each layer's rows follow from the readings before it, as the policy routes them; layers after ``l``
    read ``draws``. Returns the readings (n, L, d) and the rows read (one ``Rows`` a layer)."""
    n, L, d, D = draws.n, pol.layers, pol.width, spec.dim
    given = 0 if prefix is None else prefix.shape[1]
    phi = np.zeros((n, L, d))
    if given:
        phi[:, :given] = prefix
    state, chosen = pol.start(n), []
    for k in range(L):
        rows = check_rows(pol.rows(k, state, phi[:, :k]), n=n, width=d, dim=D, layer=k)
        if k >= given:
            phi[:, k] = read(spec, channel, draws, rows, k * d)
        state = pol.update(k, state, rows, phi[:, k])
        chosen.append(rows)
    return phi, chosen


def _loss(spec, channel, draws, run) -> np.ndarray:
    phi, rows = run
    return decode_losses(spec, channel, draws, rows, phi.reshape(draws.n, -1))


def _decoded(spec, channel, draws, run) -> tuple[np.ndarray, np.ndarray]:
    """Per-sample loss and decoded leaf (the leaf nearest the posterior mean) of a run."""
    phi, rows = run
    mean = decode_means(spec, channel, draws, rows, phi.reshape(draws.n, -1))
    return ((mean - draws.dense(spec)) ** 2).sum(-1), nearest_leaves(spec, mean)


def nearest_leaves(spec, estimates: np.ndarray) -> np.ndarray:
    """(n,) the leaf whose ``theta`` is nearest each estimate (n, D): every leaf has the same norm, so the one of
    largest inner product (``fvnum.priors.tree.TreeSpec.thetas`` of all leaves)."""
    thetas = spec.thetas(np.arange(spec.n_leaves))  # (2^K, D)
    out = np.empty(len(estimates), dtype=np.int64)
    step = max(1, 2**22 // max(1, thetas.size))
    for i in range(0, len(estimates), step):
        out[i:i + step] = np.argmax(estimates[i:i + step] @ thetas.T, axis=1)
    return out


def _check_price(what: str, spec, channel, strategy, pol, budget: int, samples: int, replays: int, threads) -> None:
    """Refuse in one line (the time cap, ``fvsym.guards.limits.check_time``) a table of ``replays`` runs of
    ``strategy`` (its name or object; a class-named spelling priced as the strategy it runs as) on ``samples``
    samples each: three times the engine's price of the strategy (``fvnum.policies.prices.mc_cost`` with its
    ``work``: its routing, through :func:`replay` rather than a fused kernel) plus the layer-by-layer engine's own
    cost, ``REPLAY_S`` a sample, layer and ``1 + D / 16``."""
    from fvnum.policies.prices import mc_cost
    from fvnum.policies.strategies import strategy_object
    from fvnum.mc._chunks import default_threads
    from fvnum.priors.capabilities import capability
    from fvsym.guards.limits import check_time

    priced = strategy_object(strategy)
    priced = strategy_object(priced.runs_as) if priced.runs_as is not None else priced
    depth = capability(spec, "heap_depth")
    _, seconds = mc_cost(depth=depth, dim=spec.dim, budget=budget, strategy=priced,
                         token_channel=channel.kind == "tokens", samples=samples,
                         threads=default_threads() if threads is None else int(threads), solve=False)
    floor = REPLAY_S * budget * (1 + spec.dim / 16)  # the layer-by-layer engine itself, per sample and replay
    per = replays * (3 * seconds / max(samples, 1) + floor)
    check_time(f"{what} of {pol.name} with {samples} samples", per * samples,
               f"; at most about {int(max(2, 0.9 * _cap() / per))} samples fit" if per > 0 else "")


def _cap() -> float:
    from fvsym.guards.limits import max_seconds

    return max_seconds()


def _check_budget(budget) -> int:
    return check_int(budget, "budget", minimum=1)


def _hit(leaves: np.ndarray, prefixes: np.ndarray, K: int, layer: int) -> np.ndarray:
    """1.0 where a decoded leaf has the prefix (index at level ``min(layer, K)``), else 0.0."""
    return ((leaves >> (K - min(layer, K))) == prefixes).astype(float)


def _check_layers(layers, L: int, what: str = "layer") -> tuple:
    if layers is None:
        return tuple(range(1, L + 1))
    out = tuple(check_int(l, f"{what} l", minimum=1, maximum=L) for l in np.atleast_1d(layers).tolist())
    if not out:
        raise InputError(f"layers must name at least one {what} in 1..{L}")
    return out


def _check_depths(depths, K: int) -> tuple:
    if depths is None:
        return tuple(range(1, K + 1))
    out = tuple(check_int(j, "divergence depth j", minimum=1, maximum=K) for j in np.atleast_1d(depths).tolist())
    if not out:
        raise InputError(f"depths must name at least one divergence depth in 1..{K}")
    return out


def _transplant_column(spec, channel, pol, budget, j, layers, samples, seed, threads, progress):
    """Moments of the unpatched loss (entry 0), the transplanted losses and their paired effects, column ``j``."""
    def chunk(sizes, rngs):
        pairs = [draw_pair(spec, channel, n, budget, j, rng) for n, rng in zip(sizes, rngs)]
        target, donor = Draws.concat([p[0] for p in pairs]), Draws.concat([p[1] for p in pairs])
        base = _loss(spec, channel, target, replay(spec, channel, pol, target))
        dphi, _ = replay(spec, channel, pol, donor)
        out = [Moments.of(base)]
        for l in layers:
            loss = _loss(spec, channel, target, replay(spec, channel, pol, target, dphi[:, :l]))
            out += [Moments.of(loss), Moments.of(loss - base)]
        return out

    parts = _chunks.run_chunks(chunk, samples, seed, **blocks(spec, channel, pol, budget, factor=3),
                               purpose=_chunks.DONOR + 16 * j, threads=threads, progress=progress)
    return [pool(p[i] for p in parts) for i in range(1 + 2 * len(layers))]


def state_patching_table(prior, strategy: str, budget: int, channel, *, samples: int | None = None, seed: int = 0,
                         options=None, patch=None, threads=None, progress=False) -> PatchingTable:
    """The (transplant layer ``l``, divergence depth ``j``) table of a strategy on the tree prior (module
    docstring): ``loss[l-1, j-1]`` with the target's ``Phi_l`` replaced by the donor's, ``effect`` the paired
    ``loss - unpatched``. ``strategy``: any registered strategy (``path``, ``optimal``, ``bellman_noiseless``,
    ``greedy_coordinate``, ``greedy_dense``, ...; a callable in ``options.policy`` with ``strategy="policy"``) or a
    keyed prediction policy ``adaptive_keyed_linear`` | ``adaptive_keyed_weighted`` | ``adaptive_keyed_softmax``
    (the tokens channel). ``samples`` per divergence depth (default 20,000; 500 for a keyed policy), shared by every
    transplant layer; ``patch`` (``fvnum.PatchSpec``): ``layers`` the transplant layers (default all), ``depths``
    the divergence depths (default 1..K)."""
    layers, depths = _patched(patch)
    if isinstance(strategy, str) and strategy.startswith(KEYED_PREFIX):
        return _keyed(prior, strategy, budget, channel, samples, seed, layers, depths).transplant()
    samples = STRATEGY_SAMPLES if samples is None else samples
    spec, channel, pol, samples, seed = _setup(prior, strategy, _check_budget(budget), channel, options, samples,
                                               seed, threads)
    layers = _check_layers(layers, pol.layers)
    depths = _check_depths(depths, spec.depth)
    _check_price("state_patching_table", spec, channel, strategy, pol, budget, samples,
                 len(depths) * (2 + len(layers)), threads)
    cols = [_transplant_column(spec, channel, pol, budget, j, layers, samples, seed, threads, progress)
            for j in depths]
    est = [[[cols[b][1 + 2 * a + e].estimate() for b in range(len(depths))] for a in range(len(layers))]
           for e in (0, 1)]
    value = lambda e: np.array([[x.value for x in row] for row in est[e]])  # noqa: E731
    error = lambda e: np.array([[x.stderr for x in row] for row in est[e]])  # noqa: E731
    base = [c[0].estimate() for c in cols]
    decoder = decoder_of(spec, channel)
    return PatchingTable(value(0), error(0), replace(pool(c[0] for c in cols).estimate(), decoder=decoder),
                         np.array([e.value for e in base]), np.array([e.stderr for e in base]), samples, pol.name,
                         layers, depths, effect=value(1), effect_stderr=error(1), decoder=decoder,
                         intervention="transplant", seed=seed)


def _patched(patch) -> tuple:
    """``(layers, depths)`` of a ``fvnum.PatchSpec`` (None: every layer, every depth)."""
    from fvnum.options import PatchSpec, check_options

    patch = check_options(patch, PatchSpec, "patch")
    return patch.layers, patch.depths


def _origin(spec, channel_words: str, name: str, budget: int) -> tuple:
    """What a mean state was drawn under: its prior, strategy, budget and channel, as texts."""
    exact = getattr(spec, "exact_prior", None)
    prior = str(exact()) if callable(exact) else repr(spec)
    return (("prior", prior), ("strategy", name), ("budget", str(budget)), ("channel", channel_words))


def _channel_words(channel) -> str:
    if channel.kind == "tokens":
        return f"tokens n_tokens={channel.n_tokens}, s2={channel.s2!r}"
    return f"gaussian tau={channel.tau!r}"


def _check_given_means(means, mean_samples, origin: tuple) -> None:
    """Refuse ``mean_samples`` beside ``means`` (it would be ignored), and a mean state drawn under another prior,
    strategy, budget or channel than the injection's (``origin``), naming each difference."""
    if means is None:
        return
    if mean_samples is not None:
        raise InputError(f"mean_samples={mean_samples!r:.20} draws the injection's own mean state, and means gives "
                         "one: give means or mean_samples, not both")
    if not isinstance(means, MeanState):
        raise InputError(f"means must be a MeanState (fvnum.mean_state), got {type(means).__name__}")
    if not means.origin:
        raise InputError(f"the mean state ({means.source}) does not say its prior, strategy, budget and channel: "
                         "draw it with fvnum.mean_state")
    theirs, ours = dict(means.origin), dict(origin)
    differ = [f"{k} {theirs.get(k)} (the injection's: {v})" for k, v in ours.items() if theirs.get(k) != v]
    if differ:
        raise InputError("the mean state was drawn under another " + ", ".join(k for k, v in ours.items()
                         if theirs.get(k) != v) + ": " + "; ".join(differ)
                         + "; draw it with the injection's own arguments (fvnum.mean_state)")


def _means_of(leaves, phi, K, layers, n_mean, source, width, origin: tuple = ()) -> MeanState:
    return grouped_means(leaves, {l: phi[:, :l].reshape(len(leaves), -1) for l in layers}, K, n_mean, source, width,
                         origin)


def mean_state(prior, strategy: str, budget: int, channel, *, samples: int | None = None, seed: int = 0,
               options=None, layers=None, threads=None) -> MeanState:
    """``Phi_bar_l(s_1..s_l)`` of a strategy (or a keyed prediction policy) for each layer of ``layers`` (default
    all): the mean workspace over ``samples`` contexts (default 20,000; 500 keyed) grouped by their leaves'
    prefix, drawn from their own stream (``seed``), independent of the targets of the other tables. ``options``:
    a ``fvnum.StrategyOptions``."""
    if isinstance(strategy, str) and strategy.startswith(KEYED_PREFIX):
        k = _keyed(prior, strategy, budget, channel, samples, seed, layers, None)
        return k.mean_state(k.samples)
    samples = STRATEGY_SAMPLES if samples is None else samples
    spec, channel, pol, samples, seed = _setup(prior, strategy, _check_budget(budget), channel, options, samples,
                                               seed, threads)
    layers = _check_layers(layers, pol.layers)
    _check_price("mean_state", spec, channel, strategy, pol, budget, samples, 1, threads)
    return _strategy_means(spec, channel, pol, budget, layers, samples, seed, threads)


def _strategy_means(spec, channel, pol, budget, layers, samples, seed, threads) -> MeanState:
    def chunk(sizes, rngs):
        draws = Draws.concat([draw_samples(spec, channel, n, budget, rng) for n, rng in zip(sizes, rngs)])
        return draws.leaves, replay(spec, channel, pol, draws)[0]

    parts = _chunks.run_chunks(chunk, samples, seed, **blocks(spec, channel, pol, budget), purpose=_chunks.MEAN,
                               threads=threads)
    leaves = np.concatenate([p[0] for p in parts])
    phi = np.concatenate([p[1] for p in parts])
    return _means_of(leaves, phi, spec.depth, layers, samples, pol.name, pol.width,
                     _origin(spec, _channel_words(channel), pol.name, budget))


def injected_prefixes(leaves: np.ndarray, depth: int, layer: int, j: int, rng) -> np.ndarray:
    """The prefix (index at level ``min(layer, K)``) injected into targets ``leaves`` at divergence depth ``j``:
    the prefix of their donor of depth ``j`` (:func:`fvnum.patching.keys.donor_leaves`); ``j = 0``: their own
    prefix (the control; no draw)."""
    if j == 0:
        return leaves >> (depth - min(layer, depth))
    return donor_leaves(leaves, depth, j, rng) >> (depth - min(layer, depth))


def _cells(layers, depths, K) -> list:
    """The injection's cells ``(a, l, b, j)``: every ``j <= min(l, K)`` of ``depths``, then the control of each layer
    (``b`` None, ``j = 0``: the target's own prefix), drawn after the others so that they do not move."""
    cells = [(a, l, b, j) for a, l in enumerate(layers) for b, j in enumerate(depths) if j <= min(l, K)]
    return cells + [(a, l, None, 0) for a, l in enumerate(layers)]


def _check_means(means: MeanState, layer: int, wanted: np.ndarray):
    missing = np.unique(wanted[means.counts[layer][wanted] == 0])
    if missing.size:
        raise InputError(f"no context among the mean state's {means.n} has the prefix {int(missing[0])} at layer "
                         f"{layer} ({missing.size} such prefixes); draw more contexts (mean_samples)")


def injection_table(prior, strategy: str, budget: int, channel, *, samples: int | None = None, seed: int = 0,
                    options=None, patch=None, means: MeanState | None = None, threads=None) -> InjectionTable:
    """Mean-vector injection (module docstring) for a strategy or a keyed prediction policy: for each layer ``l``
    of ``patch.layers`` and divergence depth ``j <= min(l, K)`` of ``patch.depths`` (``fvnum.PatchSpec``),
    ``samples`` targets (default 20,000; 500 keyed), shared by every cell, get ``Phi_bar_l`` of their donor's
    prefix (means of ``patch.mean_samples`` contexts, default ``samples``, or ``means`` from :func:`mean_state`). A
    noisy channel only: a mean of noiseless readings is not a reading the noiseless decoder can hold."""
    layers, depths = _patched(patch)
    mean_samples = patch.mean_samples if patch is not None else None
    if isinstance(strategy, str) and strategy.startswith(KEYED_PREFIX):
        k = _keyed(prior, strategy, budget, channel, samples, seed, layers, depths)
        return k.injection(mean_samples, means)
    samples = STRATEGY_SAMPLES if samples is None else samples
    spec, channel, pol, samples, seed = _setup(prior, strategy, _check_budget(budget), channel, options, samples,
                                               seed, threads)
    if channel.kind == "gaussian" and channel.tau == 0:
        raise InputError("injection needs a noisy channel (tau > 0 or n_tokens): the mean of noiseless readings is "
                         "not a reading the noiseless decoder can hold")
    _check_given_means(means, mean_samples, _origin(spec, _channel_words(channel), pol.name, budget))
    layers = _check_layers(layers, pol.layers)
    depths = _check_depths(depths, spec.depth)
    cells_n = sum(min(l, spec.depth) for l in layers) + 2 * len(layers)
    cells_n += len(_cells(layers, depths, spec.depth)) * jk.MEAN_GROUPS * min(1.0, jk.JACKKNIFE_TARGETS / samples)
    _check_price("injection_table", spec, channel, strategy, pol, budget, samples, 1 + cells_n, threads)
    if means is None:
        n_mean = samples if mean_samples is None else check_int(mean_samples, "mean_samples", minimum=1)
        _check_price("mean_state", spec, channel, strategy, pol, budget, n_mean, 1, threads)
        means = _strategy_means(spec, channel, pol, budget, layers, n_mean, seed, threads)
    _check_mean_layers(means, layers, pol.width)
    K = spec.depth
    cells = _cells(layers, depths, K)

    def chunk(sizes, rngs):
        targets, inj = [], []
        for n, rng in zip(sizes, rngs):
            t = draw_samples(spec, channel, n, budget, rng)
            targets.append(t)
            inj.append([injected_prefixes(t.leaves, K, l, j, rng) for _, l, _, j in cells])
        target = Draws.concat(targets)
        inj = [np.concatenate([x[c] for x in inj]) for c in range(len(cells))]
        base_loss, base_leaf = _decoded(spec, channel, target, replay(spec, channel, pol, target))
        out = [Moments.of(base_loss)]
        out += [Moments.of(_hit(base_leaf, target.leaves >> (K - min(l, K)), K, l)) for l in layers]
        for (a, l, b, j), p in zip(cells, inj):
            _check_means(means, l, p)
            prefix = means.means[l][p].reshape(target.n, l, pol.width)
            loss, leaf = _decoded(spec, channel, target, replay(spec, channel, pol, target, prefix))
            out += [Moments.of(_hit(leaf, p, K, l)), Moments.of(loss), Moments.of(loss - base_loss)]
        m = jk.subset(target.n, samples)
        head = Draws(m, target.leaves[:m], None if target.theta is None else target.theta[:m],
                     None if target.noise is None else target.noise[:m], None if target.stat is None else target.stat[:m])
        for (a, l, b, j), p in zip(cells, inj):  # the cell again with each leave-one-group-out mean state
            for g in range(means.groups):
                prefix = jk.leave_out(means, l, g)[p[:m]].reshape(m, l, pol.width)
                loss, leaf = _decoded(spec, channel, head, replay(spec, channel, pol, head, prefix))
                out += [Moments.of(_hit(leaf, p[:m], K, l)), Moments.of(loss)]
        return out

    parts = _chunks.run_chunks(chunk, samples, seed, **blocks(spec, channel, pol, budget, factor=3),
                               purpose=_chunks.INJECT, threads=threads)
    stats = [pool(p[i] for p in parts).estimate() for i in range(len(parts[0]))]
    return _injection_of(stats, layers, depths, cells, samples, pol.name, means.n, K, decoder_of(spec, channel),
                         groups=means.groups, seed=seed)


def _check_mean_layers(means: MeanState, layers, width):
    if not isinstance(means, MeanState):
        raise InputError(f"means must be a MeanState (fvnum.mean_state), got {type(means).__name__}")
    missing = [l for l in layers if l not in means.means]
    if missing or means.width != width:
        raise InputError(f"the mean state holds layers {', '.join(map(str, means.layers))} of width {means.width}; "
                         f"the injection needs layers {', '.join(map(str, layers))} of width {width}")


def _injection_of(stats, layers, depths, cells, n, name, n_mean, K, decoder, *, groups: int = 0,
                  seed: int | None = None) -> InjectionTable:
    """The table of ``stats``: the unpatched loss, the own accuracy of each layer, three per cell (accuracy, loss,
    effect) and, with ``groups``, two per cell and group (accuracy and loss with the leave-one-group-out mean
    state), whose jackknife variance is added to the cell's (``fvnum.patching._jackknife``)."""
    shape = (len(layers), len(depths))
    acc, acc_e, loss, loss_e, eff, eff_e = (np.full(shape, np.nan) for _ in range(6))
    control = [np.full(len(layers), np.nan) for _ in range(4)]
    tail = 1 + len(layers) + 3 * len(cells)
    for c, (a, _, b, _) in enumerate(cells):
        x, y, z = stats[1 + len(layers) + 3 * c: 4 + len(layers) + 3 * c]
        if groups:
            reps = stats[tail + 2 * groups * c: tail + 2 * groups * (c + 1)]
            va = jk.jackknife_variance([r.value for r in reps[0::2]])
            vl = jk.jackknife_variance([r.value for r in reps[1::2]])
            x, y, z = (replace(x, stderr=float(np.sqrt(x.stderr**2 + va))),
                       replace(y, stderr=float(np.sqrt(y.stderr**2 + vl))),
                       replace(z, stderr=float(np.sqrt(z.stderr**2 + vl))))
        if b is None:
            control[0][a], control[1][a], control[2][a], control[3][a] = x.value, x.stderr, y.value, y.stderr
            continue
        acc[a, b], acc_e[a, b], loss[a, b], loss_e[a, b] = x.value, x.stderr, y.value, y.stderr
        eff[a, b], eff_e[a, b] = z.value, z.stderr
    own = stats[1:1 + len(layers)]
    return InjectionTable(tuple(layers), tuple(depths), acc, acc_e, loss, loss_e, eff, eff_e,
                          replace(stats[0], decoder=decoder), np.array([o.value for o in own]),
                          np.array([o.stderr for o in own]), n, name, n_mean, K, decoder=decoder,
                          own_injected_accuracy=control[0], own_injected_accuracy_stderr=control[1],
                          own_injected_loss=control[2], own_injected_loss_stderr=control[3],
                          stderr_includes=jk.STDERR_WITH_MEANS if groups else jk.STDERR_TARGETS_ONLY, seed=seed)


# --- the keyed prediction policies -------------------------------------------------------------------
class _keyed:
    """Transplant, mean state and injection of the keyed policy ``adaptive_keyed_<family>`` on drawn tokens
    (the contexts and donors of :func:`fvnum.patching.keyed.keyed_patching_table`)."""

    def __init__(self, prior, strategy, budget, channel, samples, seed, layers, depths, first=None, steps: int = 25):
        from fvnum.keys.families import check_family
        from fvnum.keys.nonadaptive import best_nonadaptive_keyed
        from fvnum.keys.contexts import _Policy

        family = check_family(strategy[len(KEYED_PREFIX):])
        from fvnum.mc.channels import check_channel

        if check_channel(channel).kind != "tokens":
            raise InputError(f"{strategy} reads drawn tokens: give the tokens channel, fvnum.tokens(N), not "
                             f"the {channel.kind} channel")
        spec, channel, samples, seed, budget = check_inputs(
            prior, channel, samples=KEYED_SAMPLES if samples is None else samples,
            seed=seed, budget=budget, tree=f"{strategy} on state patching needs the tree prior (prefixes of leaves)")
        if samples < 2:
            raise InputError(f"samples must be >= 2 (a standard error needs two), got {samples}")
        check_int(budget, "budget", minimum=1, maximum=spec.dim)
        self.spec, self.family, self.budget, self.samples, self.seed = spec, family, budget, samples, seed
        self.N, self.s2 = channel.n_tokens, channel.s2
        self.name = f"{KEYED_PREFIX}{family}"
        self.layers = _check_layers(layers, budget)
        self.depths = _check_depths(depths, spec.depth)
        self.first = best_nonadaptive_keyed(spec, 1, replace(channel, keys=family), seed=seed) \
            if first is None else first
        self.make = lambda n: _Policy(prior, family, self.first, n, self.N, self.s2, seed, steps)  # noqa: E731

    def check_price(self, what: str, samples: int, runs: int) -> None:
        """Refuse in one line a table of ``runs`` runs of the keyed policy on ``samples`` contexts: each run a
        search of every layer (``fvnum.keys.adaptive.adaptive_keyed_trace_cost`` of the whole budget, once a layer)."""
        from fvnum.keys.adaptive import adaptive_keyed_trace_cost
        from fvsym.guards.limits import check_time

        per = sum(adaptive_keyed_trace_cost(self.spec.depth, self.spec.dim, b, samples) for b in range(2, self.budget + 1))
        check_time(f"{what} of {self.name} with {samples} contexts", runs * per)

    def _contexts(self, n, purpose):
        from fvnum.keys.contexts import contexts

        if purpose == _chunks.DONOR:
            return contexts(self.spec, n, self.N, self.s2, self.seed)
        rng = np.random.default_rng(_chunks.seed_sequence(self.seed, purpose))
        leaves = self.spec.sample(n, rng)
        X = rng.standard_normal((n, self.N, self.spec.dim))
        return leaves, X, np.sqrt(self.s2) * rng.standard_normal((n, self.N))

    def _values(self, X, leaves, eps):
        return np.einsum("nid,nd->ni", X, self.spec.thetas(leaves)) + eps

    def _decode(self, phi, rows, theta):
        from fvnum.keys.contexts import posterior_means

        mean = posterior_means(self.spec, self.first.keys, rows, phi, self.N, self.s2)
        return ((mean - theta) ** 2).sum(-1), nearest_leaves(self.spec, mean)

    def transplant(self) -> PatchingTable:
        from fvnum.patching.keyed import donors

        self.check_price("state_patching_table", self.samples, 1 + len(self.depths) * (1 + len(self.layers)))
        leaves, X, eps = self._contexts(self.samples, _chunks.DONOR)
        theta, y = self.spec.thetas(leaves), self._values(X, leaves, eps)
        pol = self.make(self.samples)
        phi0, rows0 = pol.run(X, y, self.budget)
        base = self._decode(phi0, rows0, theta)[0]
        shape = (len(self.layers), len(self.depths))
        out = [np.zeros(shape) for _ in range(4)]
        for b, j in enumerate(self.depths):
            dphi, drows = pol.run(X, self._values(X, donors(self.spec, leaves, j, self.seed), eps), self.budget)
            for a, l in enumerate(self.layers):
                if l == self.budget:
                    phi, rows = dphi, drows
                else:
                    phi, rows = pol.run(X, y, self.budget, prefix=(dphi[:, :l], drows[:, :l + 1]))
                loss = self._decode(phi, rows, theta)[0]
                cell, eff = Estimate.of(loss), Estimate.of(loss - base)
                out[0][a, b], out[1][a, b], out[2][a, b], out[3][a, b] = cell.value, cell.stderr, eff.value, eff.stderr
        un = Estimate.of(base)
        return PatchingTable(out[0], out[1], un, np.full(len(self.depths), un.value),
                             np.full(len(self.depths), un.stderr), self.samples, self.name, self.layers, self.depths,
                             effect=out[2], effect_stderr=out[3], decoder=f"{self.family} keys' CLT law (exact Bayes)",
                             intervention="transplant", seed=self.seed)

    def mean_state(self, n) -> MeanState:
        self.check_price("mean_state", n, 1)
        leaves, X, eps = self._contexts(n, _chunks.MEAN)
        phi, _ = self.make(n).run(X, self._values(X, leaves, eps), self.budget)
        return _means_of(leaves, phi[:, :, None], self.spec.depth, self.layers, n, self.name, 1, self.origin)

    @property
    def origin(self) -> tuple:
        return _origin(self.spec, f"tokens n_tokens={self.N}, s2={self.s2!r}", self.name, self.budget)

    def injection(self, mean_samples, means) -> InjectionTable:
        K, n = self.spec.depth, self.samples
        _check_given_means(means, mean_samples, self.origin)
        cells_n = sum(min(l, K) for l in self.layers) + len(self.layers)
        self.check_price("injection_table", n, 1 + cells_n * (1 + jk.MEAN_GROUPS * min(1.0, KEYED_JACKKNIFE / n)))
        if means is None:
            means = self.mean_state(n if mean_samples is None else check_int(mean_samples, "mean_samples", minimum=2))
        _check_mean_layers(means, self.layers, 1)
        leaves, X, eps = self._contexts(n, _chunks.INJECT)
        theta, y = self.spec.thetas(leaves), self._values(X, leaves, eps)
        pol = self.make(n)
        phi0, rows0 = pol.run(X, y, self.budget)
        base_loss, base_leaf = self._decode(phi0, rows0, theta)
        stats = [Estimate.of(base_loss)]
        stats += [Estimate.of(_hit(base_leaf, leaves >> (K - min(l, K)), K, l)) for l in self.layers]
        cells = _cells(self.layers, self.depths, K)
        rng = np.random.default_rng(_chunks.seed_sequence(self.seed, _chunks.INJECT + 16))
        m = min(n, KEYED_JACKKNIFE)  # the targets each leave-one-group-out replicate is measured on
        sub, reps = self.make(m), []
        for a, l, b, j in cells:
            p = injected_prefixes(leaves, K, l, j, rng)
            _check_means(means, l, p)
            loss, leaf = self._injected(pol, means.means[l][p], l, X, y, theta)
            stats += [Estimate.of(_hit(leaf, p, K, l)), Estimate.of(loss), Estimate.of(loss - base_loss)]
            for g in range(means.groups):
                r_loss, r_leaf = self._injected(sub, jk.leave_out(means, l, g)[p[:m]], l, X[:m], y[:m], theta[:m])
                reps += [Estimate(float(_hit(r_leaf, p[:m], K, l).mean()), 0.0, m), Estimate(float(r_loss.mean()), 0.0, m)]
        return _injection_of(stats + reps, self.layers, self.depths, cells, n, self.name, means.n, K,
                             f"{self.family} keys' CLT law (exact Bayes)", groups=means.groups, seed=self.seed)

    def _injected(self, pol, prefix, l, X, y, theta):
        """Per-context loss and decoded leaf with the readings of layers ``1..l`` given (``prefix`` (n, l))."""
        rows = pol.rows(prefix[:, : l - 1])  # the rows of layers 1..l after the injected readings
        phi, read = pol.run(X, y, self.budget, prefix=(prefix, rows)) if l < self.budget else (prefix, rows)
        return self._decode(phi, read, theta)


__all__ = [
    "injection_table", "mean_state", "nearest_leaves", "replay", "state_patching_table",
]
