"""Resource guards of the Monte Carlo engine: memory and time of ``loss_mc`` estimated from its
arguments before any work, refused with one line naming the limit and the largest size that fits.

The estimates are deliberately simple upper bounds on what the engine allocates (eight ``D``-sized
scratch arrays per thread; a chunk of at least 256 samples, with dense ``D``-vectors per sample for
the strategies and channels that need them (measured: see ``BASE_BYTES``); ``D x D`` matrices for a Gaussian prior) and on its work
(``0.3 B K`` per sample for coordinate strategies, ``2^K B`` for dense rows on the tree prior, ``2^K K B``
for the ``greedy_dense`` search, ``D B`` for a Gaussian prior), at a conservative ``RATE`` operations per second and thread.
Each strategy's factors are its ``Work``, on its object (``fvnum.policies.objects``); a strategy with a price of its
own (``Strategy.price``) is checked against the time cap by :func:`check_price`.
"""
from __future__ import annotations

from functools import lru_cache

from fvsym._validate import _short, check_int
from fvsym.errors import InputError
from fvsym.guards.limits import check_memory, check_time, fits_memory, fits_time, largest_fitting
from fvnum.policies.objects import COORDINATE, DENSE, Strategy, Work, classed_by_measurement, load, strategy_of

RATE = 2e7  # elementary operations per second and thread (a slow, shared core)
MIN_CHUNK = 256
# Memory, measured as the peak RSS of `fv mc --depth K --samples S --threads T` (K = 16..23, S = 1000 and
# 100,000, T = 1, 2; GNU time's %M): the interpreter with numpy, numba and the CLI 205 to 300 MB; coordinate
# strategies (path, top_levels, greedy_coordinate) under tau about 7 D-float scratch arrays per working thread
# (56 bytes per node: 666 MB at depth 23); the tokens channel about 7.8 D floats per sample of a 256-sample
# chunk per thread (1.25 GB at depth 16 on one thread, 2.2 GB on two; 24 GB at depth 20 on two, which the old
# estimate of 3 D floats priced at 12.5 GB). The constants below are those measurements rounded up.
BASE_BYTES = 300e6
SCRATCH_FLOATS = 8  # D-sized float arrays per thread
TOKENS_FLOATS = 10  # D floats per sample of a chunk under the tokens channel
GAUSS_OPS = 0.2  # per sample, reading and coordinate of a Gaussian prior (was 4: 15 to 45 times over at D 200, B 10)
TOKENS_OPS = 1.5  # per sample and coordinate of the tokens statistic (was 4: 3.7 times over at depth 12)
# Each strategy's own factors (operations a sample, dense rows, searches, solves) are its Work, on its object
# (fvnum.policies.objects; the coordinate kernels' measured factor there, COORDINATE): mc_cost reads them; a
# strategy registered without one is priced like a user policy (dense rows on every sample).
COORDINATE_OPS = COORDINATE.tree_ops  # per sample, reading and level of a coordinate strategy


def mc_cost(*, tree: bool, depth: int, dim: int, budget: int, strategy, token_channel: bool, samples: int,
            threads: int, dense_design: bool = False, search_samples: int = 4000,
            solve: bool = True) -> tuple[float, float]:
    """``(bytes, seconds)`` of one ``loss_mc`` call (upper estimates) of ``strategy`` (a name or a
    ``fvnum.policies.objects.Strategy``), from its :class:`~fvnum.policies.objects.Work`. ``solve``: include the
    exact noiseless solve (``fvsym.bellman.solve``, priced by ``fvsym.guards.costs.tree_loss_cost``) that the policies
    ``bellman_noiseless`` and ``optimal`` (tree prior) build before sampling; False where the caller prices
    the solves itself."""
    w = strategy_work(strategy)
    if dense_design and w.rows_given:  # a given design of dense rows
        w = DENSE
    D, B = dim, max(int(budget), 1)
    per_sample = 2 + 6 * B + (depth if tree else 0)
    if token_channel:
        per_sample += TOKENS_FLOATS * D
    elif not tree or w.dense_rows:
        per_sample += 3 * D
    fixed = SCRATCH_FLOATS * D * max(1, threads) + (3 * D * D if not tree else 0)
    memory = 8.0 * (fixed + MIN_CHUNK * per_sample * max(1, threads)) + BASE_BYTES
    if tree:
        ops = w.tree_ops_per_sample(depth, B)
    else:
        ops = D * B * GAUSS_OPS + (D * D * B if w.quadratic else 0)
    if token_channel:
        ops += TOKENS_OPS * D
    work = samples * ops + (D**3 if not tree else 0)
    if tree and w.first_samples:  # a shared first row, priced as this many samples' work
        work += w.first_samples * ops
    elif w.search:
        work += search_samples * ops * max(D, 1) * w.search
    seconds = work / (RATE * max(1, threads))
    if tree and w.tree_seconds is not None:  # the strategy's own measured model on the tree
        seconds = load(w.tree_seconds)(depth, dim, B, samples, search_samples, threads, dense_design)
    if solve and tree and w.solve and budget >= 1:
        from fvsym.guards.costs import tree_loss_cost

        solve_bytes, solve_seconds = tree_loss_cost(depth, min(B, dim), "optimal", False)
        memory, seconds = max(memory, solve_bytes + BASE_BYTES / 2), seconds + solve_seconds
    return memory, seconds


def strategy_work(strategy) -> Work:
    """The :class:`~fvnum.policies.objects.Work` of a strategy (a name or its object): its own, or a user
    policy's (:data:`~fvnum.policies.objects.DENSE`) for a name not registered or a strategy without one."""
    obj = strategy if isinstance(strategy, Strategy) else strategy_of(strategy)
    return DENSE if obj is None else obj.engine_work


def engine_seconds(strategy, prior, channel, budget: int, samples: int, *, threads: int = 1,
                   search_samples: int = 4000, dense_design: bool = False, solve: bool = True) -> float:
    """The engine's price (:func:`mc_cost`, seconds) of ``samples`` samples of ``strategy`` on the numeric
    ``prior`` under ``channel``: what ``Strategy.cost`` answers for a strategy without a price of its own."""
    from fvnum.priors.capabilities import capability

    depth = capability(prior, "heap_depth")
    tree = depth is not None
    return mc_cost(tree=tree, depth=depth or 0, dim=prior.dim, budget=budget, strategy=strategy,
                   token_channel=channel.kind == "tokens", samples=samples, threads=threads, dense_design=dense_design,
                   search_samples=search_samples, solve=solve)[1]


def nonadaptive_search_seconds(depth: int, dim: int, budget: int, samples: int, search_samples: int, threads: int,
                               dense_design: bool) -> float:
    """The tree's price of ``optimal_nonadaptive``: the unit class's L-BFGS search (``dense_design``), or the
    coordinate class's search and then its design sampled."""
    if dense_design:
        return unit_search_seconds(depth, dim, budget, samples, search_samples, threads)
    return (coordinate_search_seconds(depth, dim, budget, search_samples)
            + samples * (budget * depth * COORDINATE_OPS) / (RATE * max(1, threads)))


def rollout_tree_seconds(depth: int, dim: int, budget: int, samples: int, search_samples: int, threads: int,
                         dense_design: bool) -> float:
    """The tree's price of ``rollout``: the policy's own measured model (quadratic in the budget)."""
    from fvnum.policies.strategies import rollout_seconds

    return rollout_seconds(depth, budget, samples, threads)


# The coordinate class's design search (fvnum.policies.search.optimal_nonadaptive_coordinate): every symmetry class of B
# nodes screened on min(search_samples, 1000) samples and the best 8 on search_samples where the classes are at
# most 3000, else greedy forward selection and swaps (about 3 B D designs on search_samples each). Measured on 2
# shared cores at load 9 (one thread): depth 6, budget 4 (1938 classes, 2000 searched): 5.2 s; depth 8, budget 3
# (1344 classes, 4000): 3.9 s (the old price, 2^K B D per searched sample, was 20 times that at depth 8): about
# COORD_NS per sample, design and reading-depth pair, and COORD_DESIGN_S per design.
COORD_NS, COORD_DESIGN_S = 55.0, 0.5e-3


@lru_cache(maxsize=None)
def count_classes(depth: int, budget: int) -> int:
    """The symmetry classes of ``budget`` distinct nodes of a depth-``depth`` tree (``len`` of
    ``fvnum.policies.search.coordinate_classes``); here, beside its price, so that the price imports no search (the
    search imports the engine, which imports these guards)."""
    if budget == 0:
        return 1
    if depth == 0 or budget > 2**depth - 1:
        return 0
    total = 0
    for r in (0, 1):
        rest = budget - r
        for a in range(rest // 2 + 1):
            left, right = count_classes(depth - 1, a), count_classes(depth - 1, rest - a)
            total += left * right if a < rest - a else left * (left + 1) // 2
    return total


def coordinate_search_seconds(depth: int, dim: int, budget: int, search_samples: int) -> float:
    if budget == 0:
        return 0.0
    classes = count_classes(depth, min(budget, dim)) if budget <= dim else 10**9
    if classes <= 3000:
        designs, evaluated = classes + 8, classes * min(search_samples, 1000) + 8 * search_samples
    else:
        designs = 3 * budget * dim
        evaluated = designs * search_samples
    return evaluated * budget * depth * COORD_NS * 1e-9 + designs * COORD_DESIGN_S


# The unit class's design search (fvnum.policies.search.optimal_nonadaptive_unit): 4 starts of L-BFGS, each evaluation
# the Monte Carlo loss and its gradient on search_samples common samples (the posterior over the 2^K leaves
# of B readings, its mean in D coordinates), then the design's loss on the samples. Measured on 2 shared cores
# at load 9 (one thread): depth 4, budget 3, 100,000 samples, 4000 searched: 5.0 s; depth 6, budget 4, 20,000
# and 2000: 7.7 s; depth 8, budget 3, 20,000 and 1000: 13.4 s (the old price, 2^K B D per searched sample, was
# 0.15 to 1.6 times that); on a quiet machine 3.5 times less (0.57 s and 2.2 s): about UNIT_EVAL_S of Python and
# scipy per evaluation whatever the size, which dominates small trees. The constants price a quiet machine
# about twice over, a machine at load 9 about half.
UNIT_EVALUATIONS = 400  # starts x evaluations of each (4 x up to 200; about 100 seen)
UNIT_EVAL_S = 2.5e-3
UNIT_NS = 0.3  # per searched sample, leaf and (B + D), per evaluation
UNIT_EVAL_NS = 3.0  # per sample, leaf and (B + D), the final estimate


def unit_search_seconds(depth: int, dim: int, budget: int, samples: int, search_samples: int, threads: int) -> float:
    """Upper price of ``loss_mc(..., 'optimal_nonadaptive_unit')`` on a tree (see the constants above)."""
    leaves = 2.0**depth * (budget + dim)
    search = UNIT_EVALUATIONS * (UNIT_EVAL_S + UNIT_NS * 1e-9 * search_samples * leaves)
    return search + UNIT_EVAL_NS * 1e-9 * samples * leaves / max(1, threads)


def check_mc(prior_spec, *, budget: int, strategy: str, token_channel: bool, samples: int, threads: int | None,
             design=None, search_samples: int = 4000, measurement: str | None = None) -> None:
    """Refuse (one-line ValueError) a ``loss_mc`` call that would not fit in memory or in the time cap.
    ``measurement``: the class of ``optimal_nonadaptive`` (``unit``, the default, searches dense rows)."""
    from fvnum.mc._chunks import default_threads
    from fvnum.priors.capabilities import capability

    threads = default_threads() if threads is None else int(threads)
    depth = capability(prior_spec, "heap_depth")
    tree = depth is not None  # the tree's kernels and prices (its heap of nodes, its 2^K leaves)
    depth = depth or 0
    dense = False
    if design is not None:
        try:
            import numpy as np

            dense = np.asarray(design).ndim == 2
        except (TypeError, ValueError):
            dense = False
    if classed_by_measurement(strategy) and measurement in (None, "unit"):
        dense = True  # the unit class's search
    own_price = getattr(strategy_of(strategy), "price", None) is not None  # its time: check_price, in loss_mc

    def cost(depth_=depth, samples_=samples, budget_=budget):
        dim = 2**depth_ - 1 if tree else prior_spec.dim
        return mc_cost(tree=tree, depth=depth_, dim=dim, budget=budget_, strategy=strategy, token_channel=token_channel,
                       samples=samples_, threads=threads, dense_design=dense, search_samples=search_samples)

    memory, seconds = cost()
    what = f"fv mc --strategy {strategy} at " + (f"depth {depth}" if tree else f"D = {prior_spec.dim}") \
        + f", budget {budget}"
    if tree:
        depths = range(max(1, (budget + 1).bit_length() - 1 or 1), depth + 1)
        mem_hint = largest_fitting("depth", depths, lambda k: fits_memory(cost(k)[0]))
        time_hint = largest_fitting("depth", depths, lambda k: fits_time(cost(k)[1]))
    else:
        mem_hint = time_hint = ""
    kind = getattr(strategy_of(strategy), "max_budget", None)
    most = {"depth": depth if tree else None, "dim": 2**depth - 1 if tree else prior_spec.dim}.get(kind)
    if most is not None and budget > most:  # the object's own bound, said before the size it would cost
        mem_hint = time_hint = (f"; the budget is the problem: strategy {strategy} reads at most "
                                f"{'K' if kind == 'depth' else 'D'} = {most}")
    if not fits_memory(memory) and (not tree or mem_hint.startswith("; no ")):
        mem_hint = _budget_hint(budget, lambda b: fits_memory(cost(budget_=b)[0]), mem_hint)
    check_memory(what, memory, mem_hint)
    if not own_price and not fits_time(seconds):
        per = seconds / samples
        most = int(max(0.0, (seconds_cap() - (cost(samples_=0)[1])) / per)) if per > 0 else samples
        extra = f"; at this size at most {most} samples fit" if most >= 2 else ""
        if not time_hint or time_hint.startswith("; no "):
            time_hint = _budget_hint(budget, lambda b: fits_time(cost(budget_=b)[1]), time_hint)
        check_time(f"{what} with {samples} samples", seconds, time_hint + extra)


def _budget_hint(budget: int, fits, otherwise: str) -> str:
    """``"; the budget is the problem: the largest that fits here is B"`` when a smaller budget fits (the largest
    found by bisection, the cost growing with the budget), else ``otherwise``."""
    if budget <= 1 or not fits(1):
        return otherwise
    low, high = 1, budget  # fits(low), not fits(high)
    while high - low > 1:
        mid = (low + high) // 2
        low, high = (mid, high) if fits(mid) else (low, mid)
    return f"; the budget is the problem: the largest that fits here is {low}"


def check_price(strategy: Strategy, spec, channel, budget: int, samples: int, threads: int | None) -> None:
    """Refuse (one line, naming the most samples that fit) a ``loss_mc`` call of a strategy with a price of its own
    (``Strategy.price``) that is priced over the time cap."""
    from fvnum.mc._chunks import default_threads

    threads = default_threads() if threads is None else int(threads)

    def seconds(n):
        return strategy.cost(spec, channel, budget, n, threads=threads)  # refuses a price that is no number >= 0

    total = seconds(samples)
    if fits_time(total):
        return
    lo, hi = 1, samples  # the most samples that fit, by bisection (a price grows with the samples)
    if fits_time(seconds(2)):
        while hi - lo > max(1, lo // 100):
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if fits_time(seconds(mid)) else (lo, mid)
        hint = f"; at this size at most {max(lo, 2)} samples fit"
    else:
        hint = "; no sample count fits"
    from fvnum.priors.capabilities import capability

    depth = capability(spec, "heap_depth")
    where = f"depth {depth}, " if depth is not None else ""
    check_time(f"the Monte Carlo of strategy {strategy.name} (its own price) at {where}budget {budget} with {samples} "
               f"samples", total, hint)


# The sizes of the keyed searches in a comparison (fvnum.theory.keyed_curves), and their price.
DESIGN_SAMPLES_PER_SAMPLE = 4  # the one-layer keyed search's samples per sample of the adaptive policy's


def gaussian_design_settings(budget: int, samples: int) -> dict:
    """The settings of ``fvnum.keys.nonadaptive.gaussian_keyed`` in a comparison: its decoder costs ``nodes^B`` per
    sample and Powell evaluation on a product grid, so at budget 4 it runs on 9 nodes a coordinate, 25
    evaluations and half the samples (depth 6, budget 4: minutes, where the defaults would take an hour);
    from budget 5 on (where ``9^B`` nodes would not fit: ``fvnum.keys.nonadaptive.GRID_POINTS``) the decoder's nodes are
    importance-sampled (``fvnum.keys.nonadaptive.IS_POINTS``), on a quarter of the samples and 15 evaluations."""
    if budget <= 3:
        return dict(samples=samples, nodes=11, maxiter=60)
    if budget == 4:
        return dict(samples=max(2, samples // 2), nodes=9, maxiter=25)
    return dict(samples=max(2, samples // 4), nodes=9, maxiter=15)


# fvnum.keys.nonadaptive's searches (docs/benchmarks/2026-12-03-keyed.md: CPU seconds on the shared 2-core machine, one
# thread, benchmarks/bench_keyed.py --prices checks the prices against a table of cases): the layer-1 search
# (quadrature, torch autograd on small tensors) KEYED_SEARCH_S plus KEYED_LEAF_S per leaf (0.25 s at depth 3,
# 0.7 s at depth 6); the one-layer Monte Carlo search at budget b (two starts of up to 200 L-BFGS steps, the
# gradient written out: fvnum.mc._kernels.keyed._one_layer_mc) KEYED_SEARCH_S plus KEYED_DESIGN s per design
# sample, leaf and (b^2 + D) (0.9 s at depth 3, budget 2 on 8000 samples; 9.3 s at depth 6, budget 2); the
# greedy adaptive policy KEYED_ADAPTIVE s per sample, lookahead layer and leaf (0.74 s for 2000 samples to 2
# layers at depth 3, 5.1 s at depth 6), plus KEYED_STATE per sample, layer, leaf and coordinate; the Gaussian one
# KEYED_GAUSSIAN s per decoder node, sample, evaluation and b^2 (4.6 s at depth 3, budget 2 on 2000 samples;
# 21 s at depth 4, budget 3 on 500; 20 s at budget 7 of an isotropic D = 7, importance-sampled nodes).
KEYED_SEARCH_S, KEYED_LEAF_S, KEYED_DESIGN = 0.3, 0.01, 5e-7
KEYED_ADAPTIVE, KEYED_STATE, KEYED_GAUSSIAN = 5e-5, 2e-7, 8e-8


def keyed_cost(*, tree: bool, depth: int, dim: int, budgets, samples: int) -> float:
    """Seconds (an estimate within 3x of the measured, both ways, on the table of bench_keyed.py --prices) of
    ``fvnum.theory.keyed_curves`` at ``budgets`` on ``samples`` samples: the adaptive keyed policy once to the
    largest budget (tree prior), the one-layer search at every budget."""
    budgets = sorted({max(int(b), 1) for b in budgets})
    if not budgets:
        return 0.0
    if tree:
        leaves, design_samples, last = 2**depth, DESIGN_SAMPLES_PER_SAMPLE * samples, budgets[-1]
        seconds = KEYED_SEARCH_S + KEYED_LEAF_S * leaves  # layer 1
        seconds += samples * leaves * (KEYED_ADAPTIVE * (last - 1) + KEYED_STATE * last * dim)
        return seconds + sum(KEYED_SEARCH_S + KEYED_DESIGN * design_samples * leaves * (b * b + dim)
                             for b in budgets if b > 1)
    seconds = 0.0
    for b in budgets:
        kw = gaussian_design_settings(b, samples)
        nodes = decoder_nodes(b, kw["nodes"])
        seconds += KEYED_SEARCH_S + KEYED_GAUSSIAN * nodes * kw["samples"] * (kw["maxiter"] + 1) * b * b
    return seconds


def seconds_cap() -> float:
    from fvsym.guards.limits import max_seconds

    return max_seconds()


def check_threads(threads) -> int | None:
    """``threads`` (None: all cores) if it is an integer in 1 .. max(8, 4 x the cores); else a one-line InputError."""
    from fvnum.mc._chunks import default_threads

    if threads is None:
        return None
    return check_int(threads, "threads", minimum=1, maximum=max(8, 4 * default_threads()))


def check_loss_mc_args(spec, strategy, budget, *, design, token_channel: bool, samples, threads, search_samples,
                       measurement: str | None = None) -> None:
    """The checks ``loss_mc`` runs before any work: types and ranges of the arguments, the design's
    nodes, and the resource guard (:func:`check_mc`)."""
    import numpy as np

    from fvsym._validate import check_int, check_node_list

    from fvnum.mc._chunks import default_threads

    check_spec(spec)
    if not isinstance(strategy, str):
        raise InputError(f"strategy must be a name such as 'path', got {type(strategy).__name__} {_short(strategy)}")
    budget = check_int(budget, "budget", minimum=0)
    check_threads(threads)
    samples = check_int(samples, "samples", minimum=2, maximum=10**10)
    search_samples = check_int(search_samples, "search_samples", minimum=2, maximum=10**10)
    if design is not None:
        if strategy != "fixed":
            raise InputError(f"design applies to strategy 'fixed' only, got strategy {_short(strategy)}")
        if isinstance(design, (str, bytes)) or not hasattr(design, "__len__"):
            raise InputError(f"design must be a list of node numbers or a (B, D) matrix, got {_short(design)}")
        arr = np.asarray(design, dtype=object) if not hasattr(design, "dtype") else np.asarray(design)
        if arr.ndim == 1:
            check_node_list(list(arr), "design", spec.dim)
        elif arr.ndim == 2:
            try:
                values = np.asarray(design, dtype=float)
            except (TypeError, ValueError, OverflowError):
                raise InputError("design matrix must hold numbers") from None
            if not np.isfinite(values).all():
                raise InputError("design matrix must hold finite numbers")
        else:
            raise InputError(f"design must be a node list or a (B, D) matrix, got an array of shape {arr.shape}")
    check_mc(spec, budget=budget, strategy=strategy, token_channel=token_channel, samples=samples, threads=threads,
             design=design if design is not None and np.asarray(design, dtype=object).ndim == 2 else None,
             search_samples=search_samples, measurement=measurement)


def check_posterior_args(spec, design, phi, tau: float):
    """``posterior_mean``'s inputs: finite readings of the design's shape; without noise, readings some
    latent can produce (tree prior, coordinate design). Returns ``(design, phi)`` as arrays."""
    import numpy as np

    from fvnum.priors.capabilities import capability

    check_spec(spec)
    try:
        phi = np.atleast_2d(np.asarray(phi, dtype=float))
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"readings phi must be numbers, got {_short(phi)}") from None
    if phi.ndim != 2:
        raise InputError(f"readings phi must have shape (n, B), got {phi.shape}")
    if not np.isfinite(phi).all():
        raise InputError("readings phi must be finite (got NaN or inf)")
    if isinstance(design, (str, bytes)):
        raise InputError(f"design must be node numbers or unit rows, got {_short(design)}")
    try:
        arr = np.asarray(design)
        if arr.dtype.kind not in "iuf":
            raise TypeError
    except (TypeError, ValueError, OverflowError):
        raise InputError(f"design must be node numbers or unit rows, got {_short(design)}") from None
    if arr.dtype.kind in "iu":
        if arr.shape not in ((phi.shape[1],), phi.shape):
            raise InputError(f"design nodes of shape {arr.shape} do not match readings of shape {phi.shape}")
        if tau == 0:
            capability(spec, "check_noiseless_readings")(np.broadcast_to(arr, phi.shape), phi)
    elif not np.isfinite(arr).all():
        raise InputError("design rows must be finite")
    return design, phi


def check_spec(spec) -> None:
    """Float numbers of a prior the kernels square must neither underflow nor overflow: the prior's own
    ``check_floats`` (the tree: ``fvnum.priors.checks.check_scales``; a Gaussian: ``check_variance``)."""
    from fvnum.priors.capabilities import capability

    capability(spec, "check_floats")()


def check_resolution(spec, what: str) -> None:
    """The lookahead policies (greedy, rollout, the noisy Bellman recursion) compare expected values of
    ``||E[theta | readings]||^2``, numbers near ``E||theta||^2``; a gain of ``a_K^2`` below ``RESOLUTION``
    of it is lost in doubles, and the policy silently stops reading deep levels (measured: greedy at
    ``alpha = 1e-6``, depth 4, ties the path strategy instead of the optimum). Refused in one line by the
    prior's own ``check_resolution`` (the tree: ``fvnum.priors.checks.check_level_resolution``)."""
    from fvnum.priors.capabilities import capability

    capability(spec, "check_resolution")(what)


GRID_POINTS = 6561  # Gaussian keyed decoder nodes per sample on a product grid (9^4); larger gives way to IS_POINTS
IS_POINTS = 1024  # importance-sampled decoder nodes per sample where a product grid would exceed GRID_POINTS


def decoder_nodes(budget: int, nodes: int) -> int:
    """Nodes per sample of the Gaussian keyed decoder (``fvnum.keys.nonadaptive._gaussian_losses``): ``nodes^B`` on a product
    grid up to :data:`GRID_POINTS`, else :data:`IS_POINTS` importance-sampled ones."""
    return nodes**budget if nodes**budget <= GRID_POINTS else IS_POINTS
