"""Time prices of the commands that train: upper estimates checked against ``fv --max-seconds`` before any
work starts (torch is not imported here: a refusal takes a fraction of a second).

Training (``train_seconds``): a measured model of one optimisation step on one CPU thread, times
``SAFETY``. Per token and layer of an MLP key, ``W (NS_UNIT H + NS_MLP_D D) + NS_SQUARE W^2 (H - 1)`` ns (``W``
the MLP width, ``H`` its hidden layers, ``D = 2^K - 1``: the elementwise work of every hidden unit and the
``W x W`` products); per token, 15 ns per coordinate of ``x`` (drawing the context, the value ``y``) and, for
Model C's linear keys, ``2 D B`` ns; for softmax attention ``NS_SOFTMAX`` ns per token, layer and channel (the
``(batch, N, d)`` exp and normalisation); per step ``STEP_S`` plus ``LAYER_S`` per module (layers and readout,
times their hidden layers: autograd, Adam, Python). Refitted (issue 32) on 36 runs of A and B at widths 16 to
1024, 1 to 1000 hidden layers and 16 or 64 tokens on this project's 2-core machine at load 4 to 5 (the model
lay within 0.3 to 1.6 times each step measured there; the old one priced width 1024 seven times, 1000 hidden
layers four times over), then halved: a quiet machine runs the same steps 3 to 4 times faster
(docs/benchmarks/2026-12-03-prices.md: whole ``fv train`` runs priced 1.5 to 2.5 times their quiet wall time).
``SAFETY = 2`` covers a machine about twice as busy as the quiet one. Held-out evaluations (a forward pass, priced as a third of a step's arithmetic per context) and
checkpoints are added; torch's import and the model's set-up are ``STARTUP`` seconds. More threads are
assumed to gain nothing (on a busy machine they often do not). ``precision = bf16`` on a CPU without native
bfloat16 is emulated: priced 4 times float32. Memory (``train_bytes``): the activations, the weights with
their gradients and Adam's moments, and the interpreter (``bridges.prices.memory``, re-exported here).

Studies (``reproduce_seconds``, ``scaling_seconds``, ``compare_grid_seconds``): the sum of the training
runs (divided among the local worker processes, at most one per core) and of the theory, priced by
``fvnum.policies.prices.mc_cost`` for every Monte Carlo estimate (the Bellman solves by ``fvsym.guards.costs.tree_loss_cost``,
the keyed rows by ``fvnum.guards.limits.keyed_cost``).
Runs whose folder already holds a finished result cost nothing.
"""
from __future__ import annotations

import os
from pathlib import Path

from fvsym.guards.limits import check_time, fits_time, max_seconds

# the memory price of a run lives in a leaf module (bridges.runs.config prices its runs with it); re-exported here
from fvsym.errors import InputError

SAFETY = 2.0
STARTUP = 3.0  # seconds: import torch, build the model, the first step's allocations (1.5 to 2.5 s measured, quiet)
NS_UNIT, NS_MLP_D, NS_SQUARE = 2.5, 0.025, 0.0125  # per token and layer: W H, W D and W^2 (H - 1) (see above)
NS_TOKEN_D = 15.0  # per token and coordinate of x
NS_LINEAR_KEY = 2.0  # per token, coordinate and channel of Model C's keys
# per token and layer of the qk router: per (W + 1) d r of kappa's outputs and their product with the query. Measured
# (issue 56) on 6-step runs of A at depth 4, budget 3, r = 15 to 16384, one thread at load 9 to 10: 0.17 ns at
# r = 16384 (above r ~ 2000 the (batch, N, d r) tensors leave the caches; NS_MLP_D priced r = 65536 at 26 s for
# more than 60 s of work)
NS_QK = 0.1
NS_SOFTMAX = 20.0  # per token, layer and channel of softmax attention: exp, max, sum, divide, forward and backward
STEP_S, LAYER_S = 7e-3, 0.2e-3  # per optimisation step, and per module (layer or readout, per hidden layer) of it
CHECKPOINT_S = 0.2  # one checkpoint write (the models are small)
EVAL_BATCH = 256  # bridges.training.train.EVAL_BATCH (not imported: it would import torch)


def step_seconds(cfg, load: tuple[float, float] | None = None) -> float:
    """Measured seconds of one training step of ``cfg`` (a ``RunConfig``) on one thread (no SAFETY): the model's
    own price where it has one (``ModelSpec.price``), else the measured model above for its keys (MLP keys, or
    the linear keys of Model C). ``load``: the step's ``(tokens, contexts)`` of the batch where they differ from
    ``batch x N`` and ``batch`` (a noise curriculum or larger batches late; a model's own price is scaled by
    the tokens)."""
    d, m, t = cfg.data, cfg.model, cfg.train
    tokens, contexts = load if load is not None else (t.batch * d.n_tokens, t.batch)
    price = m.spec.price
    if price is not None:
        seconds = float(price(cfg))
        if not seconds >= 0:
            raise InputError(f"model {m.model}: its price gave {seconds!r} seconds a step; a price is a number >= 0")
        seconds *= tokens / (t.batch * d.n_tokens)
    else:
        seconds = (tokens * _token_ns(cfg) + contexts * _context_ns(cfg)) * 1e-9 + overhead_seconds(cfg)
    if t.precision == "bf16" and not str(t.device).startswith("cuda"):
        seconds *= 4.0
    return seconds


SCHEDULE_POINTS = 4096  # steps at which a varying batch (bridges.runs.config.TrainConfig.tokens_at, batch_at) is priced


def mean_load(cfg, done: int = 0) -> tuple[float, float] | None:
    """The mean ``(tokens, contexts)`` of a training batch over steps ``done..steps`` where the schedule varies
    them (``tokens_from``, ``batch_late``; evaluated at up to ``SCHEDULE_POINTS`` evenly spaced steps), else None."""
    t, N = cfg.train, cfg.data.n_tokens
    if not (t.tokens_from or t.batch_late) or done >= t.steps:
        return None
    n = min(SCHEDULE_POINTS, t.steps - done)
    steps = [done + (i * (t.steps - done)) // n for i in range(n)]
    return (sum(t.batch_at(s) * t.tokens_at(s, N) for s in steps) / n, sum(t.batch_at(s) for s in steps) / n)


def _token_ns(cfg) -> float:
    """Nanoseconds a token of one context costs a step: drawing it, the keys of every layer, softmax attention."""
    D, m = cfg.data.dim, cfg.model
    W, H = m.mlp_width, m.hidden_layers
    per_token = NS_TOKEN_D * D
    if m.spec.mlp_keys:
        per_token += m.n_layers * (W * (NS_UNIT * H + NS_MLP_D * D) + NS_SQUARE * W * W * (H - 1))
        if getattr(m, "router", "mlp") == "qk":  # kappa's d r outputs a token and their product with the query
            per_token += m.n_layers * NS_QK * (W + 1) * m.n_channels * m.query_dim_for(D)
    else:
        per_token += NS_LINEAR_KEY * D * m.budget
    if m.attention == "softmax":
        per_token += NS_SOFTMAX * m.n_layers * m.n_channels  # the (batch, N, d) exp, sum and division of every layer
    return per_token


def _context_ns(cfg) -> float:
    """Nanoseconds the readout of one context costs a step (an MLP readout, or the bilinear one)."""
    D, m = cfg.data.dim, cfg.model
    W, H = m.mlp_width, m.hidden_layers
    return 3 * W * (m.budget + D + W * (H - 1)) if m.spec.mlp_keys else 3 * m.budget * D


def overhead_seconds(cfg) -> float:
    """The part of :func:`step_seconds` that does not grow with the batch: ``STEP_S`` and ``LAYER_S`` a module."""
    m = cfg.model
    return STEP_S + LAYER_S * (m.n_layers + 1) * (m.hidden_layers if m.spec.mlp_keys else 1)


def train_seconds(cfg, *, done: int = 0) -> float:
    """Upper estimate of the seconds ``fv train`` takes for ``cfg``, from step ``done`` (resumed runs)."""
    t = cfg.train
    steps = max(0, t.steps - done)
    step = step_seconds(cfg, mean_load(cfg, done))
    n_evals = steps // t.eval_every + 2
    # a held-out batch is a forward pass: a third of a step's arithmetic, none of its per-step overhead (autograd,
    # Adam), which is most of a deep narrow MLP's step (1000 hidden layers: the old half a step priced 4.4 times over)
    base = step_seconds(cfg)  # held-out contexts have N tokens whatever the training schedule
    eval_s = n_evals * t.eval_batches * EVAL_BATCH / t.batch * max(base - overhead_seconds(cfg), 0.0) / 3
    saves = steps // t.checkpoint_every + 1 if t.out else 0
    return SAFETY * (steps * step + eval_s) + saves * CHECKPOINT_S + STARTUP


def largest_steps(cfg) -> int:
    """The most training steps of ``cfg`` that fit in the time cap (0: none)."""
    cap = max_seconds()
    lo, hi = 0, cfg.train.steps
    while lo < hi:  # train_seconds grows with the steps
        mid = (lo + hi + 1) // 2
        if train_seconds(cfg.replace(train=dict(steps=mid))) <= cap:
            lo = mid
        else:
            hi = mid - 1
    return lo


def check_train_time(cfg, what: str | None = None) -> float:
    """Refuse (one-line ValueError: the estimate, the cap, the most steps that fit) a run over the cap."""
    seconds = train_seconds(cfg, done=_steps_done(cfg))
    if not fits_time(seconds):
        most = largest_steps(cfg)
        hint = f"; the largest --steps that fits is {most}" if most >= 1 else "; no --steps fits"
        size = f"depth {cfg.data.depth}" if cfg.data.depth is not None else f"D {cfg.data.dim}"  # atoms: no depth
        check_time(what or f"training {cfg.model.model} at {size}, budget {cfg.model.budget} "
                   f"for {cfg.train.steps} steps", seconds, hint)
    return seconds


def _steps_done(cfg) -> int:
    """Steps a run folder already holds: all of them for a finished result, else 0 (a checkpoint's step
    is not read here: that would import torch; resuming is priced from scratch, an upper bound)."""
    if not cfg.train.out:
        return 0
    return cfg.train.steps if (Path(cfg.train.out) / cfg.key() / "result.json").is_file() else 0


def runs_seconds(runs, workers: int | None) -> float:
    """Training a list of runs on ``workers`` local processes (at most one per core)."""
    cores = os.cpu_count() or 1
    total = sum(train_seconds(r, done=_steps_done(r)) - STARTUP for r in runs)
    parallel = max(1, min(workers or cores, cores, max(1, len(runs))))
    return total / parallel + STARTUP + (5.0 if parallel > 1 else 0.0)  # + the local cluster's start


# --- theory ------------------------------------------------------------------------------------------
def _mc(data, budget: int, strategy: str, samples: int, **kw) -> float:
    from fvnum.policies.prices import mc_cost

    tree = data.has_leaves
    return mc_cost(depth=data.depth if tree else None, dim=data.dim, budget=budget, strategy=strategy,
                   token_channel=True, samples=samples, threads=1, solve=False, **kw)[1]  # the solves: _solve


def _solve(depth: int, budget: int) -> float:
    from fvsym.guards.costs import tree_loss_cost

    return tree_loss_cost(depth, budget, "optimal", False)[1]


def keyed_seconds(data, budgets, samples: int, keyed, real_samples: int | None = None) -> float:
    """``bridges.analysis.compare.keyed_curves`` (``fvnum.theory.keyed_curves``) at ``budgets`` on ``samples``
    samples (``fvnum.guards.limits.keyed_cost``); nothing without a key family (``keyed`` None or ``"none"``). Its
    memory (``fvnum.keys.nonadaptive.keyed_memory``, bounded whatever the budget) is checked here too, before any
    training, refused in one line where it does not fit. ``real_samples``: with the real-token rows of that many
    contexts (``fvnum.keys.real_tokens.real_keyed_cost``, their memory checked too; refused in one line where they
    are not built)."""
    from fvnum.keys.nonadaptive import keyed_memory
    from fvnum.keys.families import check_family
    from fvnum.guards.limits import keyed_cost
    from fvsym.guards.limits import check_memory, fits_memory, largest_fitting

    tree = data.has_leaves
    if real_samples is not None:  # refused before any work where they are not built (no key family included)
        from fvnum.keys.real_tokens import check_real

        check_real("tree" if tree else data.prior, keyed, real_samples)
    if check_family(keyed, optional=True) is None:
        return 0.0
    if keyed == "softmax" and not tree:
        raise InputError(f"--keyed softmax: the softmax keyed rows are searched on the tree prior only, not on the "
                         f"{data.prior} prior")
    size = dict(tree=tree, depth=data.depth, dim=data.dim, budgets=budgets, samples=samples)
    need = keyed_memory(**size, family=keyed)
    hint = ""
    if tree and not fits_memory(need):
        hint = largest_fitting("--depth", range(1, data.depth),
                               lambda k: fits_memory(keyed_memory(**{**size, "depth": k, "dim": 2**k - 1}, family=keyed)))
    check_memory(f"the keyed rows at budget{'s' if len(set(budgets)) > 1 else ''} "
                 f"{', '.join(str(b) for b in sorted(set(budgets)))}", need, hint)
    from fvnum.keys.nonadaptive import SOFTMAX_COST_FACTOR

    factor = SOFTMAX_COST_FACTOR if keyed == "softmax" else 1.0
    seconds = keyed_cost(**{**size, "depth": data.depth if tree else 0}) * factor
    if keyed == "softmax":  # its adaptive row is its own search (fvnum.keys.adaptive.adaptive_softmax_losses)
        from fvnum.keys.adaptive import adaptive_softmax_cost

        seconds += adaptive_softmax_cost(data.depth, data.dim, max(budgets), samples)
    if real_samples is not None:
        from fvnum.keys.real_tokens import real_keyed_cost, real_keyed_memory

        check_memory(f"the real-token rows on {real_samples} contexts", real_keyed_memory(
            depth=data.depth, dim=data.dim, budgets=budgets, samples=real_samples, n_tokens=data.n_tokens))
        seconds += real_keyed_cost(data.depth, data.dim, budgets, real_samples)
    return seconds


def theory_table_seconds(data, budget: int, samples: int, search_samples: int, keyed=None,
                         real_samples: int | None = None) -> float:
    """``bridges.analysis.compare.theory_losses`` (``fvnum.theory.comparison_table``): its own price,
    ``fvnum.theory.comparison_table_seconds`` (every Monte Carlo row, the default candidates of ``best_adaptive``
    and of the bracket, the design searches), and the keyed rows of ``keyed`` (a key family; None: computed
    beforehand, or none), with the real-token rows of ``real_samples`` contexts."""
    from fvnum.theory import comparison_table_seconds

    tree = data.has_leaves
    return keyed_seconds(data, [budget], search_samples, keyed, real_samples) + comparison_table_seconds(
        tree=tree, depth=data.depth if tree else 0, dim=data.dim, budget=budget, samples=samples,
        search_samples=search_samples, token_channel=True, threads=1)


def reproduction_curves_seconds(cfg) -> float:
    """``bridges.studies.reproduce.reproduction_curves``: exact and Monte Carlo losses at every budget 1..2^K - 1."""
    from fvnum.policies.strategies import STRATEGIES
    from fvsym.guards.costs import tree_loss_cost

    from bridges.studies.reproduce import CURVES, NOISY_OPTIONS, UNDER_NOISE

    K = cfg.depth
    tree, gauss = cfg.data("tree"), cfg.data("gaussian")
    seconds = 0.0
    for B in range(1, 2**K):
        for s in CURVES:
            if not STRATEGIES[s].applies(K, 2**K - 1, B, 0.0):  # path: B <= K
                continue
            seconds += tree_loss_cost(K, B, s, False)[1]
            noisy = UNDER_NOISE.get(s, s)
            kw = {k: v for k, v in NOISY_OPTIONS.get(s, {}).items() if k == "search_samples"}  # priced by its search
            seconds += _mc(tree, B, noisy, cfg.samples, **kw)
        seconds += _solve(K, B) + 2 * (1e-7 * gauss.dim**3 + 0.01)
        if seconds > 1e12:  # far past any cap: stop counting
            break
    return seconds


def _probes_seconds(data, budget: int, samples: int) -> float:
    """Key patching and probes (theory ``path``, trained models): a few passes over ``samples`` contexts."""
    n = max(512, samples // 10)
    per_context = data.n_tokens * data.dim * 3e-7 * max(1, budget)
    return SAFETY * (10 * n * per_context + _mc(data, budget, "path", samples)) + 5.0


def _function_vector_seconds(cfg, runs) -> float:
    """Transplant and injection (docs/theory.md section 9) of ``path`` and of the deep model (``fv reproduce``): the theory's
    tables replay the strategy about ``(K + B)(2 + B)`` times (its generic engine: about 10 path kernels each),
    the model's are :func:`intervention_seconds` of its run."""
    from bridges.studies.reproduce import patched_model

    data, B = cfg.data("tree"), cfg.train_budget
    n = max(512, cfg.samples // 10)
    seconds = SAFETY * 10 * (data.depth + B) * (2 + B) * _mc(data, B, "path", cfg.samples) + 5.0
    deep = patched_model({r.model.model: r for r in runs if r.data.has_leaves and r.model.budget == B})
    for r in runs:
        if r.model.model == deep and r.data.has_leaves and r.data.depth == cfg.depth and r.model.budget == B:
            seconds += intervention_seconds(r, n_contexts=n, depths=data.depth, layers=r.model.n_layers,
                                            mean_contexts=4 * n) - STARTUP
            break
    return seconds


def reproduce_seconds(cfg) -> float:
    """Upper estimate of ``fv reproduce`` (a ``ReproduceConfig``)."""
    from bridges.studies.reproduce import grid

    train_out = str(Path(cfg.out) / "train")
    runs = grid(cfg, train_out)
    seconds = reproduction_curves_seconds(cfg) + runs_seconds(runs, cfg.workers)
    seconds += _tables_seconds(runs, cfg)
    seconds += _probes_seconds(cfg.data("tree"), cfg.train_budget, cfg.samples)
    seconds += _function_vector_seconds(cfg, runs)
    if cfg.full:
        from bridges.studies.scaling import ScalingConfig

        seconds += scaling_seconds(ScalingConfig(out=str(Path(cfg.out) / "scaling"), alpha=cfg.alpha,
                                                 n_tokens=cfg.n_tokens, s2=cfg.s2, workers=cfg.workers,
                                                 steps_per_budget=cfg.scaling_steps_per_budget, samples=cfg.samples))
    return seconds + 15.0  # report, figures


def _tables_seconds(runs, cfg) -> float:
    """The theory of a grid of runs (``bridges.studies.reproduce.training``): one table per (data, budget), the keyed
    rows once per data configuration at all its budgets."""
    from bridges.studies.reproduce import SEARCH_SAMPLES, keyed_search_samples, real_samples_of

    tables = {(r.data, r.model.budget) for r in runs}
    seconds = sum(theory_table_seconds(data, budget, cfg.samples, SEARCH_SAMPLES) for data, budget in tables)
    for data in {d for d, _ in tables}:
        seconds += keyed_seconds(data, [b for d, b in tables if d == data], keyed_search_samples(cfg), cfg.keyed,
                                 real_samples_of(cfg, data))
    return seconds


def compare_grid_seconds(cfg) -> float:
    """Upper estimate of ``fv compare --grid`` (its ``ReproduceConfig``: the training grid and its tables)."""
    from bridges.studies.reproduce import grid

    runs = grid(cfg, str(Path(cfg.out) / "train"))
    return runs_seconds(runs, cfg.workers) + 5.0 + _tables_seconds(runs, cfg)


def scaling_seconds(cfg, *, train: bool = True) -> float:
    """Upper estimate of ``fv scaling`` (a ``ScalingConfig``); ``train=False``: its theory and outputs only."""
    runs = cfg.runs(str(Path(cfg.out) / "train"))
    seconds = runs_seconds(runs, cfg.workers) if train else 0.0
    seconds += sum(theory_table_seconds(cfg.data(), b, cfg.samples, cfg.search_samples) for b in cfg.budgets)
    return seconds + keyed_seconds(cfg.data(), cfg.budgets, cfg.search_samples, cfg.keyed) + 15.0


def audit_seconds(cfg) -> float:
    """Upper estimate of the audit that ``fv scaling`` attaches to a trained run at the end of its cell
    (``bridges.analysis.compare.audit_dict``): ``bridges.analysis.audit.audit_cost`` at the comparisons' sizes, the
    model's sizes read from ``cfg`` (linear keys: an MLP of width 1, as the audit counts them). Imports torch (the
    audit's module)."""
    from bridges.analysis.audit import audit_cost
    from bridges.analysis.compare import AUDIT_SIZES

    d, m = cfg.data, cfg.model
    mlp = m.spec.mlp_keys
    return audit_cost(tree=d.has_leaves, depth=d.depth or 0, dim=d.dim, layers=m.n_layers, width=m.n_channels,
                      budget=m.budget, mlp_width=m.mlp_width if mlp else 1, hidden_layers=m.hidden_layers if mlp else 1,
                      **AUDIT_SIZES[d.prior])[1]


# A forward pass without gradients in batches of 256 contexts, as a share of a step's arithmetic per context. Measured
# (issue 56, one torch thread, load 8 to 10): 0.7 to 2 times (A at depth 3 to 6, widths 64 and 128, the qk router at
# r = 4096); B 0.26, C 0.07. The third that prices training's held-out batches (a batch of 16 to 256) priced the
# default fv intervene at 6 s for 4 to 27 s of work.
FORWARD_SHARE = 1.0


def forward_seconds(cfg, contexts: int) -> float:
    """Upper estimate of ``contexts`` forward passes of the model of ``cfg`` (no gradients, one torch thread):
    ``FORWARD_SHARE`` of a step's arithmetic per context, in batches of 256."""
    if cfg.model.spec.price is not None:  # a model's own price of a step (Model T), shared by its contexts
        per = float(cfg.model.spec.price(cfg)) / cfg.train.batch * FORWARD_SHARE
    else:
        per = (cfg.data.n_tokens * _token_ns(cfg) + _context_ns(cfg)) * 1e-9 * FORWARD_SHARE
    return SAFETY * (contexts * per + -(-contexts // 256) * overhead_seconds(cfg))


def intervention_seconds(cfg, *, n_contexts: int, depths: int, layers: int, mean_contexts: int = 0,
                         transplant: bool = True, injection: bool = True, patching: int = 0,
                         steering: int = 0) -> float:
    """Upper estimate of ``fv intervene`` on a run of ``cfg``: the transplant table (a donor and one patched pass
    per layer for each divergence depth), ``patching`` more tables of that kind (key patching, Model T's attention
    transplant) and the injection table (the mean workspaces' contexts and a patched pass per cell), plus loading
    the run."""
    passes = 0
    for _ in range(int(transplant) + patching):
        passes += n_contexts * (1 + depths * (1 + layers))
    if injection:
        # the cells, then each again with the mean state of 8 leave-one-group-out replicates on <= 512 targets
        passes += mean_contexts + n_contexts * (1 + depths * layers) + 8 * min(n_contexts, 512) * (depths + 1) * layers
    if steering:  # ``steering`` scales: a pass per layer and scale, and the replicates on <= 512 targets
        passes += mean_contexts + n_contexts * (1 + steering * layers) + 8 * min(n_contexts, 512) * steering * layers
    return forward_seconds(cfg, passes) + STARTUP


def check_seconds(what: str, seconds: float, hint: str = "") -> None:
    """``check_time`` with the estimate spelled out; ``hint`` names the largest size that fits."""
    check_time(what, seconds, hint)


__all__ = [
    "audit_seconds", "check_seconds", "forward_seconds", "intervention_seconds", "check_train_time",
    "compare_grid_seconds", "keyed_seconds", "reproduce_seconds", "scaling_seconds", "step_seconds",
    "theory_table_seconds", "train_seconds",
]

