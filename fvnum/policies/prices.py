"""The engine's price of a strategy (issue 59 item 5: the prices that read a strategy's object live with the
strategies): memory and time of ``loss_mc`` estimated from its arguments before any work, refused with one line
naming the limit and the largest size that fits.

The estimates are deliberately simple upper bounds on what the engine allocates (eight ``D``-sized
scratch arrays per thread; a chunk of at least 256 samples, with dense ``D``-vectors per sample for
the strategies and channels that need them (measured: see ``BASE_BYTES``); ``D x D`` matrices for a Gaussian prior) and
on its work (``0.3 B K`` per sample for coordinate strategies, ``2^K B`` for dense rows on the tree prior, ``2^K K B``
for the ``greedy_dense`` search, ``D B`` for a Gaussian prior), at a conservative ``RATE`` operations per second and
thread. Each strategy's factors are its ``Work``, on its object (``fvnum.policies.strategies``); a strategy with a price
of its own (``Strategy.price``) is checked against the time cap by :func:`check_price`. The prices of the searches
and the prior's checks that read no strategy are :mod:`fvnum.guards.limits`.
"""
from __future__ import annotations

from fvsym._validate import _short
from fvsym.errors import InputError
from fvsym.guards.limits import check_memory, check_time, fits_memory, fits_time, largest_fitting
from fvnum.guards.limits import check_spec, coordinate_search_seconds, seconds_cap, unit_search_seconds
from fvnum.mc._chunks import check_threads
from fvnum.policies.strategies import (
    COORDINATE, DENSE, STRATEGIES, Strategy, Work, checked_seconds, classed_by_measurement, load, strategy_of,
)

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
# (fvnum.policies.strategies; the coordinate kernels' measured factor there, COORDINATE): mc_cost reads them; a
# strategy registered without one is priced like a user policy (dense rows on every sample).
COORDINATE_OPS = COORDINATE.tree_ops  # per sample, reading and level of a coordinate strategy


def mc_cost(*, depth: int | None, dim: int, budget: int, strategy, token_channel: bool, samples: int,
            threads: int, dense_design: bool = False, search_samples: int = 4000,
            solve: bool = True) -> tuple[float, float]:
    """``(bytes, seconds)`` of one ``loss_mc`` call (upper estimates) of ``strategy`` (a name or a
    ``fvnum.policies.strategies.Strategy``) on the tree of ``depth`` (None: a prior that is no tree) and ``dim``
    coordinates, from its :class:`~fvnum.policies.strategies.Work`. ``solve``: include the
    exact noiseless solve (``fvsym.bellman.solve``, priced by ``fvsym.guards.costs.tree_loss_cost``) that the policies
    ``bellman_noiseless`` and ``optimal`` (tree prior) build before sampling; False where the caller prices
    the solves itself."""
    tree = depth is not None
    depth = depth or 0
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
    """The :class:`~fvnum.policies.strategies.Work` of a strategy (a name or its object): its own, or a user
    policy's (:data:`~fvnum.policies.strategies.DENSE`) for a name not registered or a strategy without one."""
    obj = strategy if isinstance(strategy, Strategy) else strategy_of(strategy)
    return DENSE if obj is None else obj.engine_work


def engine_seconds(strategy, prior, channel, budget: int, samples: int, *, threads: int = 1,
                   search_samples: int = 4000, dense_design: bool = False, solve: bool = True) -> float:
    """The engine's price (:func:`mc_cost`, seconds) of ``samples`` samples of ``strategy`` on the numeric
    ``prior`` under ``channel``: what ``Strategy.cost`` answers for a strategy without a price of its own."""
    from fvnum.priors.capabilities import capability

    depth = capability(prior, "heap_depth")
    tree = depth is not None
    return mc_cost(depth=depth, dim=prior.dim, budget=budget, strategy=strategy,
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
    from fvnum.policies.policies import rollout_seconds

    return rollout_seconds(depth, budget, samples, threads)


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
        return mc_cost(depth=depth_ if tree else None, dim=dim, budget=budget_, strategy=strategy, token_channel=token_channel,
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
        return checked_seconds(strategy, strategy.cost(spec, channel, budget, n, threads=threads))  # a number >= 0

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
        takes = [name for name, s in STRATEGIES.items() if "design" in s.takes]  # fixed
        if strategy not in takes:
            raise InputError(f"design applies to strategy {' or '.join(map(repr, takes))} only, got strategy "
                             f"{_short(strategy)}")
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
