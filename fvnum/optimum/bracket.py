"""The noisy adaptive optimum, bracketed (docs/theory.md section 3, "under noise"), and the best adaptive
policy the engine finds.

- :func:`bounds`: for the tree prior, coordinate class, ``L = B`` layers of width 1 (repeats allowed):
  ``lower`` = the noiseless Bellman optimum (``fvsym.bellman.solve``): the gaussian channel is a
  garbling of the noiseless one (Blackwell), and so is the tokens channel on the tree prior, so no
  policy under noise beats it; ``upper`` = the Monte Carlo loss of the best of several adaptive
  policies (path, greedy one-step lookahead, rollout over greedy, the noiseless Bellman policy, and the
  exact noisy policy where it is solved), chosen on one stream of common random numbers (``SELECT``)
  and re-estimated on another (``EVAL``); ``exact`` = the exact noisy optimum of ``fvnum.noisy_bellman``
  where the tree is small enough (gaussian channel; for ``tokens`` at its effective ``tau``), else None.
  Every candidate's ``EVAL`` estimate is kept, with the paired difference of ``rollout`` against
  ``path`` and ``greedy_coordinate`` on the same samples. Where the exact optimum is solved the bracket
  collapses onto it (no policy beats it; gaussian channel, or tau = 0), so by default a candidate priced
  above ``CHEAP_SECONDS`` is not sampled (the exact policy of budget 3, the rollout); under tokens (where the
  recursion, solved at tau(N), is a reference, not the optimum) one priced above ``TOKENS_SECONDS`` is not sampled by default:
  ``skipped`` says which and why, and named ``candidates`` are always sampled. The plan (what is
  solved, what is sampled, at what price) is :func:`bounds_plan`; ``fv bounds`` refuses a plan priced
  over its time cap.
- :func:`best_adaptive`: the best adaptive policy among named candidates (also unit class).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from fvsym.errors import InputError

from fvnum.mc import _chunks
from fvnum.estimate import Estimate, SearchResult
from fvnum.priors.capabilities import capability
from fvnum.mc.channels import check_channel, gaussian
from fvnum.mc.simulate import check_inputs, check_samples, simulate
from fvnum.priors.tree import TreeSpec

from fvnum.policies.strategies import candidates as role_candidates
from fvnum.policies.strategies import STRATEGIES, strategy_object, strategy_of

# The default candidates of the bracket and of best_adaptive are the strategies whose object says so
# (Strategy.roles "bracket" and "best_adaptive", in their ranks' order: path, greedy_coordinate, rollout,
# bellman_noiseless, optimal; path, bellman_noiseless, greedy_coordinate, greedy_dense); where each applies is
# its object's too (Strategy.applies, min_budget, solved_only).
CHEAP_SECONDS = 1.0  # where the exact optimum is solved, default candidates priced above this are not sampled
TOKENS_SECONDS = 2.0  # under tokens on a solved tree (no exact optimum), default candidates priced above this are not sampled


def bound_candidates() -> tuple:
    """The bracket's default candidates: the registered strategies of role ``bracket``."""
    return role_candidates("bracket")


def adaptive_candidates() -> tuple:
    """:func:`best_adaptive`'s default candidates: the registered strategies of role ``best_adaptive``."""
    return role_candidates("best_adaptive")


@dataclass(frozen=True)
class Bounds:
    """``lower`` (value, how) <= the noisy optimum <= ``upper`` (an Estimate). Where the optimum is solved
    (gaussian channel, or tau = 0) the bracket collapses onto it: ``lower`` = ``exact - exact_error`` (no less
    than the noiseless optimum) and ``upper`` = ``Estimate(exact + exact_error, 0, n)`` (``how`` says so);
    elsewhere ``lower`` is the noiseless optimum and ``upper`` the best policy's Monte Carlo Estimate.
    ``exact``: the exact noisy optimum where solved (else None), ``exact_error`` its quadrature error
    estimate (``fvnum.optimum.noisy_dp.NoisyBellman.error``: the difference of a default and a refined solve; 0
    at tau = 0). ``policy`` and ``best``: the best sampled policy and its Monte Carlo Estimate (what ``upper``
    is when not solved). ``candidates``: every policy's Estimate on the same samples; ``differences``: paired
    ``rollout - other`` Estimates; ``skipped``: the candidates not sampled (and the exact solve, when not
    run), each with its reason."""

    lower: float
    lower_how: str
    upper: Estimate
    policy: str
    exact: float | None
    exact_how: str | None
    candidates: dict = field(default_factory=dict)
    differences: dict = field(default_factory=dict)
    inputs: dict = field(default_factory=dict)
    skipped: dict = field(default_factory=dict)
    exact_error: float | None = None
    best: Estimate | None = None

    @property
    def collapsed(self) -> bool:
        """Whether the bracket is the solved optimum +- its error (not the noiseless bound and a policy)."""
        return self.best is not None and self.upper is not self.best

    def to_dict(self) -> dict:
        best = self.best if self.best is not None else self.upper
        return {
            "lower": {"value": self.lower, "how": self.lower_how},
            "upper": {"value": self.upper.value, "stderr": self.upper.stderr, "n": self.upper.n,
                      "policy": self.policy, "how": self.upper.how},
            "exact": self.exact, "exact_error": self.exact_error, "exact_how": self.exact_how,
            "collapsed": self.collapsed,
            "best": {"policy": self.policy, **best.to_dict()},
            "candidates": {k: v.to_dict() for k, v in self.candidates.items()},
            "differences": {k: v.to_dict() for k, v in self.differences.items()},
            "skipped": dict(self.skipped),
            **self.inputs,
        }

    def to_frame(self):
        """Every candidate policy's Estimate on the same samples, as a pandas DataFrame."""
        from fvnum.estimate import to_frame

        return to_frame([{"policy": k, **v.to_dict()} for k, v in self.candidates.items()], "a Bounds")

    def __repr__(self) -> str:
        lines = [f"Bounds({self})"]
        lines += [f"  {name:18s} {est}" for name, est in self.candidates.items()]
        from fvnum.estimate import stderr_text  # a difference on the same samples can be exactly 0

        lines += [f"  {name:36s} {est.value:+.4g}{stderr_text(est.stderr, est.value, digits=2, exact=' exact', plus=' +- ')}"
                  for name, est in self.differences.items()]
        return "\n".join(lines)

    def __str__(self) -> str:
        best = self.best if self.best is not None else self.upper
        if self.collapsed:
            what = ("the exact noisy recursion, error from a refined quadrature" if self.inputs.get("tau", 1) != 0
                    else "the noiseless Bellman optimum, exact at tau = 0")
            return (f"optimum in [{self.lower:.6g}, {self.upper.value:.6g}]  (solved: {self.exact:.6g} +- "
                    f"{self.exact_error:.2g}, {what}; best policy sampled: {self.policy}, {best.value:.6g} +- "
                    f"{best.stderr:.2g}, mc n={best.n})")
        exact = "n/a" if self.exact is None else f"{self.exact:.6g}" + (
            f" +- {self.exact_error:.2g}" if self.exact_error is not None else "")
        return (f"optimum in [{self.lower:.6g}, {self.upper.value:.6g} +- {self.upper.stderr:.2g}]  "
                f"(lower: {self.lower_how}; upper: {self.policy}, mc n={self.upper.n}; exact: {exact})")


def noiseless_cost(spec, budget: int) -> tuple[float, float]:
    """``(bytes, seconds)``: the price of :func:`noiseless_lower` (one ``fvsym.bellman.solve``), the same
    price ``fv derive tree-loss --strategy optimal`` checks (``fvsym.guards.costs.tree_loss_cost``)."""
    from fvsym.guards.costs import tree_loss_cost

    if budget == 0:
        return 0.0, 0.0
    return tree_loss_cost(spec.depth, min(int(budget), spec.dim), "optimal", False)


def noiseless_lower(prior, spec: TreeSpec, budget: int) -> tuple[float, str]:
    """The noiseless Bellman optimum of ``budget`` layers of width 1 (0 once the budget resolves the leaf)."""
    from fvsym import bellman

    if budget == 0:
        return float(spec.second_moment), "no reading: the prior's second moment"
    loss = bellman.solve(spec.exact_prior(), min(budget, spec.dim), 1).loss  # exact numbers where given
    return float(loss), "noiseless Bellman optimum (fvsym.bellman.solve), a lower bound under any noise (Blackwell)"


@dataclass(frozen=True)
class BoundsPlan:
    """What :func:`bounds` will do, priced before any work: ``solve`` (run the exact recursion),
    ``sample`` (the candidates sampled, in order), ``skipped`` ({name: reason}), ``seconds`` (upper price
    of each part: ``noiseless`` (the lower bound's exact noiseless solve), ``exact`` (the noisy recursion) and
    every candidate, its ``SELECT`` and ``EVAL`` runs), ``bytes`` (memory: the largest part, the Monte Carlo
    chunks and records, the solves)."""

    solve: bool
    sample: tuple
    skipped: dict
    seconds: dict
    bytes: float

    @property
    def total_seconds(self) -> float:
        return (self.seconds.get("noiseless", 0.0) + (self.seconds.get("exact", 0.0) if self.solve else 0.0)
                + sum(self.seconds[n] for n in self.sample))

    def to_dict(self) -> dict:
        return {"solve": self.solve, "sample": list(self.sample), "skipped": dict(self.skipped),
                "seconds": dict(self.seconds), "total_seconds": self.total_seconds, "bytes": self.bytes}


def candidate_seconds(name: str, spec: TreeSpec, channel, budget: int, samples: int, threads: int) -> float:
    """Upper price of sampling one candidate of :func:`bounds` on ``samples`` samples: the exact noisy policy's
    (``solved_only``) by ``fvnum.optimum.noisy_dp``, every other the strategy's own (``Strategy.cost``)."""
    from fvnum.optimum import noisy_work
    from fvnum.policies.prices import mc_cost

    s = strategy_of(name)
    if s is not None and s.solved_only:
        return noisy_work.tree_policy_seconds(spec, budget, samples, channel.tau, threads)
    if s is not None:
        return s.cost(spec, channel, budget, samples, threads=threads)  # bellman_noiseless: with its solve
    return mc_cost(depth=spec.depth, dim=spec.dim, budget=budget, strategy=name,
                   token_channel=channel.kind == "tokens", samples=samples, threads=threads)[1]  # bellman_noiseless: with its solve


def bounds_plan(spec: TreeSpec, channel, budget: int, *, samples: int, select_samples: int = 2000,
                candidates=None, exact=None, threads=None) -> BoundsPlan:
    """The plan of :func:`bounds` (see :class:`BoundsPlan`). The exact recursion is solved where
    ``fvnum.optimum.noisy_work.exact_feasible`` and its price fits the time cap (``exact``: force it on or off).
    Once the optimum is known exactly (solved, or ``tau = 0``), default candidates priced above
    ``CHEAP_SECONDS`` are skipped (the cheapest one is always sampled); named ``candidates`` are sampled."""
    from fvsym.guards.limits import max_seconds

    from fvnum.optimum import noisy_dp, noisy_work
    from fvnum.mc._chunks import default_threads

    threads = default_threads() if threads is None else max(1, int(threads))
    tau = channel.tau
    skipped, seconds = {}, {}
    solve_bytes, seconds["noiseless"] = noiseless_cost(spec, budget)
    if tau == 0:
        solve = False
    elif exact is not None:
        solve = bool(exact)
    else:
        solve = noisy_work.exact_feasible(spec, budget, tau=tau)
        if not solve and budget > 3:
            skipped["exact"] = "not solved: the exact recursion is solved for budget <= 3"
        elif not solve:
            skipped["exact"] = (f"not solved: the exact recursion at depth {spec.depth}, budget {budget} is too "
                                f"large (work {noisy_work.tree_work(spec, budget, tau=tau):.2g} > "
                                f"{noisy_work.MAX_WORK:.0g})")
    if solve:
        seconds["exact"] = noisy_work.tree_solve_seconds(spec, budget, tau, threads)
        if exact is None and seconds["exact"] > max_seconds() / 2:
            solve = False
            skipped["exact"] = (f"not solved: the exact recursion would take about {seconds['exact']:.3g} s, over "
                                f"half the time cap of {max_seconds():.3g} s")
    names = bound_candidates() if candidates is None else tuple(candidates)
    applies = []
    for name in names:
        s = strategy_of(name)
        if s is not None and s.solved_only:  # the exact noisy policy: where the recursion is solved
            if solve:
                applies.append(name)
        elif s is None or (s.applies(spec.depth, spec.dim, budget, tau) and budget >= s.min_budget):
            applies.append(name)
    n = samples + min(samples, select_samples)
    for name in applies:
        seconds[name] = candidate_seconds(name, spec, channel, budget, n, threads)
    sample = list(applies)
    # the exact recursion is the optimum of the gaussian channel; for tokens it is a reference at tau(N)
    known = (solve and channel.kind == "gaussian") or tau == 0
    limit, why = None, None
    if known:
        what = "the exact recursion" if solve else "the noiseless Bellman optimum (tau = 0)"
        limit = CHEAP_SECONDS
        why = (lambda t: f"not sampled: the optimum is known exactly ({what}), so no policy narrows the bracket, and "
                         f"{samples} samples of it would take up to {t:.3g} s (name it in candidates to sample it)")
    elif solve and channel.kind == "tokens":
        # small trees under tokens (the recursion is a reference at tau(N), not the optimum): every candidate may
        # narrow the bracket, but by default one priced above TOKENS_SECONDS (the exact gaussian-channel policy at
        # tau(N), about 3 ms a sample) is left out so a small tree's bracket stays a matter of seconds
        limit = TOKENS_SECONDS
        why = (lambda t: f"not sampled by default: {samples} samples of it would take up to {t:.3g} s, over "
                         f"{TOKENS_SECONDS:g} s; the bracket's upper end is the best of the others (name it in "
                         "candidates to sample it)")
    if limit is not None and candidates is None and applies:
        cheapest = min(applies, key=lambda k: seconds[k])  # the cheapest is always sampled
        for name in applies:
            if name != cheapest and seconds[name] > limit:
                sample.remove(name)
                skipped[name] = why(seconds[name])
    from fvnum.policies.prices import mc_cost

    chunk = max(mc_cost(depth=spec.depth, dim=spec.dim, budget=budget, strategy=name,
                        token_channel=channel.kind == "tokens", samples=samples, threads=threads)[0]
                for name in ("path", "greedy_coordinate"))
    recorded = 8.0 * samples * (3 + 2 * budget) * max(1, len(sample))
    memory = max(chunk, solve_bytes) + recorded + (8.0 * 3 * noisy_dp.CHUNK_FLOATS if solve else 0.0)
    return BoundsPlan(solve, tuple(sample), skipped, seconds, memory)


def check_noiseless_cost(spec: TreeSpec, budget: int, what: str) -> None:
    """Refuse (one line, naming the largest depth that fits at this budget) a bracket whose lower bound, the
    exact noiseless solve (:func:`noiseless_cost`), would not fit in memory or in the time cap."""
    from fvsym.guards.limits import check_memory, check_time, fits_memory, fits_time, largest_fitting

    need, seconds = noiseless_cost(spec, budget)
    depths = range(max(1, (budget + 1).bit_length() - 1), spec.depth + 1)

    def cost(k):
        return noiseless_cost(_Depth(k), budget)

    what = f"{what}: its lower bound, the exact noiseless solve (fvsym.bellman.solve),"
    hint = largest_fitting("depth", depths, lambda k: fits_memory(cost(k)[0]) and fits_time(cost(k)[1]))
    check_memory(what, need, hint)
    check_time(what, seconds, hint)


class _Depth:
    """The sizes of a tree of depth ``depth`` that the prices read (``depth``, ``dim``)."""

    def __init__(self, depth: int):
        self.depth, self.dim = int(depth), 2 ** int(depth) - 1


def check_bounds_cost(spec: TreeSpec, channel, budget: int, *, samples: int, select_samples: int = 2000,
                      candidates=None, exact=None, threads=None) -> BoundsPlan:
    """Refuse (one-line ValueError) a :func:`bounds` whose plan is priced over the memory or the time cap,
    naming the largest ``samples`` that fits; returns the plan otherwise."""
    from fvsym.guards.limits import check_memory, check_time, fits_time, format_seconds

    def plan(n):
        return bounds_plan(spec, channel, budget, samples=n, select_samples=select_samples, candidates=candidates,
                           exact=exact, threads=threads)

    from fvnum.policies.prices import check_mc

    for name in ("path", "greedy_coordinate"):  # the engine's own guard names the largest depth that fits
        check_mc(spec, budget=budget, strategy=name, token_channel=channel.kind == "tokens", samples=samples,
                 threads=threads)
    what = f"fv bounds at depth {spec.depth}, budget {budget}"
    check_noiseless_cost(spec, budget, what)
    p = plan(samples)
    check_memory(what, p.bytes)
    if not fits_time(p.total_seconds):
        lo, hi = 1, samples  # the largest sample count that fits, by bisection
        if not fits_time(plan(2).total_seconds):
            hint = "; no sample count fits (the exact recursion alone is over the cap: pass exact=False)"
        else:
            while hi - lo > max(1, lo // 100):
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fits_time(plan(mid).total_seconds) else (lo, mid)
            hint = f"; at this size at most {max(lo, 2)} samples fit"
        parts = ", ".join(f"{k} {format_seconds(v)}" for k, v in p.seconds.items() if k in p.sample or k == "exact")
        check_time(f"{what} with {samples} samples ({parts})", p.total_seconds, hint)
    return p


def bounds(prior, budget: int, channel, *, samples: int = 20_000, seed: int = 0, select_samples: int = 2000,
           candidates=None, exact=None, threads=None, progress=None) -> Bounds:
    """Bracket the noisy adaptive optimum of the tree prior (coordinate class, ``L = budget``, ``d = 1``)
    under ``channel``, ``fvnum.gaussian(tau)`` or ``fvnum.tokens(N)`` (a finite prior, ``fvnum.AtomsPrior``
    or ``fvnum.MixturePrior``, has its own bracket: ``fvnum.optimum.finite.finite_bounds``, gaussian channel).
    ``candidates``: the policies tried for the upper bound (default :func:`bound_candidates`, each where it applies, less those
    not worth sampling once the optimum is known exactly: see :func:`bounds_plan`); ``exact``: solve the
    exact recursion (default: where ``fvnum.optimum.noisy_work.exact_feasible`` and within the time cap)."""
    from fvnum.optimum import noisy_dp
    from fvnum.mc.simulate import plain_scalars
    from fvnum.priors.analyses import analysis

    from fvsym._validate import check_int

    select_samples, threads = plain_scalars(select_samples=select_samples, threads=threads).values()
    select_samples = check_int(select_samples, "select_samples", minimum=2, maximum=10**10)
    threads = None if threads is None else check_int(threads, "threads", minimum=1, maximum=1024)
    spec, channel, samples, seed, budget = check_inputs(
        prior, check_channel(channel), samples=samples, seed=seed, budget=budget)
    own = analysis(spec, "bounds")  # by the prior's class: a finite prior's (fvnum.optimum.finite.finite_bounds)
    if own is not None:
        return own(budget, channel, samples=samples, seed=seed, exact=exact, threads=threads, progress=progress)
    if capability(spec, "heap_depth") is None:
        raise InputError("bounds need a tree prior or a finite prior (a Gaussian prior's optimum is exact: "
                         "water-filling)")
    if budget < 1:
        raise InputError(f"bounds need budget >= 1, got {budget}")
    plan = check_bounds_cost(spec, channel, budget, samples=samples, select_samples=select_samples,
                             candidates=candidates, exact=exact, threads=threads)
    lower, lower_how = noiseless_lower(prior, spec, budget)
    exact_value = exact_how = exact_error = None
    policies = {}
    solved_only = {name for name in plan.sample if getattr(strategy_of(name), "solved_only", False)}  # optimal
    if channel.tau == 0:  # the noiseless optimum is exact and attained
        exact_value, exact_how, exact_error = lower, "noiseless Bellman optimum", 0.0
    elif plan.solve:
        solved = noisy_dp.noisy_bellman(spec, budget, gaussian(channel.tau), threads=threads)
        exact_value, exact_error, exact_how = solved.value, solved.error, solved.how + (
            f" (gaussian channel at the tokens channel's effective tau {channel.tau:.4g})"
            if channel.kind == "tokens" else "")
        policies.update((name, solved.policy) for name in plan.sample if name in solved_only)
    for name in plan.sample:
        if name not in solved_only:
            policies[name] = strategy_object(name).policy(prior, budget, channel, seed=seed, threads=threads)
    if not policies:
        raise InputError(f"no candidate policy applies to budget {budget} (candidates {candidates})")
    n_select = check_samples(min(samples, select_samples))
    scores = {name: simulate(spec, channel, pol, budget, samples=n_select, seed=seed, threads=threads,
                             purpose=_chunks.SELECT) for name, pol in policies.items()}
    best = min(scores, key=lambda k: scores[k].value)
    runs = {name: simulate(spec, channel, pol, budget, samples=samples, seed=seed, threads=threads, record=True,
                           progress=progress) for name, pol in policies.items()}
    diffs = {}
    if "rollout" in runs:
        for other in ("path", "greedy_coordinate", "bellman_noiseless"):
            if other in runs:
                diffs[f"rollout - {other}"] = Estimate.of(runs["rollout"].function_vectors.loss
                                                          - runs[other].function_vectors.loss)
    found = {name: replace(est, function_vectors=None) for name, est in runs.items()}
    inputs = {"prior": "tree", "depth": spec.depth, "scales": [float(a) for a in spec.scales], "budget": budget,
              "channel": channel.kind, "tau": channel.tau, "tokens": channel.n_tokens if channel.kind == "tokens"
              else None, "s2": channel.s2 if channel.kind == "tokens" else None, "measurement": "coordinate",
              "layers": budget, "width": 1, "samples": samples, "seed": seed}
    upper = found[best]
    if exact_value is not None and (channel.kind == "gaussian" or channel.tau == 0):  # solved: the bracket collapses
        err = float(exact_error or 0.0)
        if exact_value - err > lower:
            lower, lower_how = exact_value - err, "the solved optimum less its error estimate (refined quadrature)"
        elif channel.tau == 0:
            lower_how = "the noiseless Bellman optimum, the optimum at tau = 0"
        upper = Estimate(exact_value + err, 0.0, upper.n,
                         "exact" if channel.tau == 0 else "the solved optimum plus its error estimate")
    return Bounds(lower, lower_how, upper, best, exact_value, exact_how, found, diffs, inputs, plan.skipped,
                  exact_error, found[best])


def best_adaptive(prior, budget: int, channel, *, samples: int = 20_000, seed: int = 0, candidates=None,
                  select_samples: int = 2000, threads=None) -> SearchResult:
    """The best adaptive policy the engine finds (``L = B``, ``d = 1``) under ``channel`` (``fvnum.gaussian(tau)``
    or ``fvnum.tokens(N)``).
    Candidates (tree prior; by default the strategies of role ``best_adaptive``): ``path`` (when ``B <= K``), ``bellman_noiseless`` (the noiseless Bellman
    policy of ``fvsym`` run under noise), ``greedy_coordinate`` and ``greedy_dense`` (add ``rollout``
    with ``candidates``). They are compared on ``min(samples, select_samples)`` common random numbers
    (stream ``SELECT``); the winner is re-estimated on ``samples`` samples of the ``EVAL`` stream.
    Gaussian prior: the water-filling design (``"optimal"``; by Theorem G1 nothing adaptive beats it).
    Cost is dominated by ``greedy_dense`` (milliseconds a sample at depth 6); leave it out with
    ``candidates`` when that is too slow. Returns a ``SearchResult``: ``name`` (the winner), ``estimate``
    (its ``EVAL`` loss), ``policy``, and ``candidates`` (every candidate's ``SELECT`` Estimate)."""
    spec, channel, samples, seed, budget = check_inputs(prior, check_channel(channel), samples=samples, seed=seed,
                                                        budget=budget)
    if capability(spec, "linear_posterior"):
        pol = STRATEGIES["optimal"].policy(prior, budget, channel)
        est = simulate(spec, channel, pol, budget, samples=samples, seed=seed, threads=threads)
        return SearchResult("optimal", est, "water-filling design (by Theorem G1 no adaptive policy beats it)",
                            pol.design, pol, {"optimal": est})
    names = adaptive_candidates() if candidates is None else tuple(candidates)
    policies = {}
    for name in names:
        s = strategy_of(name)
        if s is not None and not s.applies(spec.depth, spec.dim, budget, channel.tau):
            continue
        policies[name] = strategy_object(name).policy(prior, budget, channel, seed=seed, threads=threads)
    if not policies:
        raise InputError(f"no adaptive candidate applies to budget {budget} (candidates {names})")
    n_select = check_samples(min(samples, select_samples))
    scores = {
        name: simulate(spec, channel, pol, budget, samples=n_select, seed=seed, threads=threads,
                       purpose=_chunks.SELECT)
        for name, pol in policies.items()
    }
    best = min(scores, key=lambda k: scores[k].value)
    est = simulate(spec, channel, policies[best], budget, samples=samples, seed=seed, threads=threads)
    how = (f"the best of {len(policies)} adaptive candidates on {n_select} common samples, re-estimated on "
           f"{samples} fresh samples")
    pol = policies[best]
    return SearchResult(best, est, how, None if pol.adaptive else pol.design, pol, scores)

