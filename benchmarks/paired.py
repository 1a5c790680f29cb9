"""Paired speed of the engine refactor (issue 30, item 7): the main Numba kernel paths and the test suite,
timed alternately in a baseline checkout and in this one, each run in a fresh process.

    PYTHONPATH=. python benchmarks/paired.py [--baseline=REV] [--pairs=N] [--no-suite] [--quick] [--out=DIR]
        [--limit=PCT] [--cases=NAME,...] [--tag=NAME]

The baseline (default ``24854ae``, the commit just before the refactor: the engine's first commits,
``0a21c1a`` "docs/architecture: the engine's design" on engine/api and ``8951d0b`` "the prior protocol
and registry" on engine/atoms, both branch off it, before the merges that precede ``9ea18bf``) is checked
out with ``git worktree add --detach`` into a temporary folder, removed at the end (also on Ctrl-C or
SIGTERM). Each case runs ``--pairs`` times in each checkout (default 5; 2 with ``--quick``), baseline then
current, the two runs of a pair back to back, in a child process whose ``PYTHONPATH`` is that checkout, one
thread, and a Numba cache of its own per checkout (empty at the start, so each checkout compiles its kernels
in its first pair: that first call is the compile time, reported apart; later first calls load the cache).
A child times one warm-up call, then repeats the call until ``MIN_TIME`` seconds have passed (at least
three calls) and keeps the fastest. Per case the script prints the median over the pairs in each checkout,
their ratio current / baseline, the spread of the per-pair ratios (min-max) and the verdict: "within 10%"
when the ratio is at most 1.10 (``--limit=5``: 5%). The suite (``python -m pytest -q -n 2 -p no:cacheprovider``) is timed the
same way, pair by pair (``--no-suite`` leaves it out; it is not the same set of tests in the two checkouts:
the tests added since the baseline run only in the current one). A case the baseline lacks (the finite-atom
decoder) is timed in the current checkout alone. Results: ``<date>-paired.json`` (written atomically) and
``<date>-paired.md`` in ``--out`` (default this folder; ``--tag=api``: ``<date>-paired-api.*``); ``--cases``
times only the cases whose names contain one of the given words. On a loaded machine a ratio moves by up to 10%
between repeats (docs/benchmarks/2026-12-02-architecture.md): measure on a quiet one.
"""
from __future__ import annotations

import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "24854ae32130b89bb8df4d967156a9e4f4ed4895"
LIMIT = 0.10  # "no slower": within 10% of the baseline
MIN_TIME = 1.0  # seconds of repeated calls per child after the warm-up (QUICK_TIME with --quick)
QUICK_TIME = 0.2
SUITE = [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider"]
OPTIONS = ("baseline", "pairs", "no-suite", "quick", "out", "limit", "cases", "tag")

# (name, kind, arguments); tau 0.3 and one thread unless named; sizes chosen so one call takes 0.1-1 s
CASES = [
    ("path K6 B4", "loss_mc", dict(strategy="path", depth=6, budget=4, samples=200_000)),
    ("path K10 B6", "loss_mc", dict(strategy="path", depth=10, budget=6, samples=200_000)),
    ("path K6 B4 N128", "loss_mc", dict(strategy="path", depth=6, budget=4, samples=50_000, n_tokens=128)),
    ("top_levels K6 B4", "loss_mc", dict(strategy="top_levels", depth=6, budget=4, samples=200_000)),
    ("top_levels K10 B6", "loss_mc", dict(strategy="top_levels", depth=10, budget=6, samples=200_000)),
    ("greedy_coordinate K6 B4", "loss_mc", dict(strategy="greedy_coordinate", depth=6, budget=4, samples=5000)),
    ("greedy_coordinate K10 B4", "loss_mc", dict(strategy="greedy_coordinate", depth=10, budget=4, samples=5000)),
    ("greedy_dense K6 B4", "loss_mc", dict(strategy="greedy_dense", depth=6, budget=4, samples=100)),
    ("optimal K4 B3 tau 0 (noiseless Bellman)", "loss_mc",
     dict(strategy="optimal", depth=4, budget=3, samples=200_000, tau=0.0)),
    ("optimal K4 B2 (noisy Bellman policy)", "loss_mc", dict(strategy="optimal", depth=4, budget=2, samples=20_000)),
    ("noisy Bellman solve K4 B2", "noisy_bellman", dict(depth=4, budget=2)),
    ("noisy Bellman solve K3 B3 (one quadrature)", "noisy_bellman", dict(depth=3, budget=3, refine=False)),
    ("nonadaptive keyed search K4 B2", "nonadaptive_keyed", dict(depth=4, budget=2, samples=500)),
    ("adaptive keyed search K4 B2", "adaptive_keyed", dict(depth=4, budget=2, samples=200)),
    ("atoms decoder M256 D8 B4", "atoms_decoder", dict(atoms=256, dim=8, budget=4, samples=20_000)),
]
QUICK = {"path K6 B4": dict(samples=20_000), "top_levels K6 B4": dict(samples=20_000),
         "greedy_coordinate K6 B4": dict(samples=500), "optimal K4 B2 (noisy Bellman policy)": dict(samples=2000),
         "noisy Bellman solve K4 B2": {}, "nonadaptive keyed search K4 B2": dict(budget=1, samples=200),
         "atoms decoder M256 D8 B4": dict(atoms=64, samples=2000)}

# One case in a child process (either checkout's API: both take these calls). Prints one JSON line.
CHILD = r"""
import json, sys, time
a = json.loads(sys.argv[1])
import numpy as np
import fvnum
from fvsym.priors import TreePrior
kind, p = a["kind"], a["args"]
NEW = callable(getattr(fvnum, "tokens", None))  # the channel as one object (issue 59), else the old keywords
def channel(tau=0.3, n_tokens=None):
    if NEW:
        return {"channel": fvnum.gaussian(tau) if n_tokens is None else fvnum.tokens(n_tokens)}
    return {"tau": tau} if n_tokens is None else {"n_tokens": n_tokens}
if kind == "atoms_decoder":
    try:
        from fvnum.priors.atoms import AtomsPrior
    except ImportError:
        print(json.dumps({"absent": "no fvnum.priors.atoms in this checkout"}))
        sys.exit(0)
    rng = np.random.default_rng(0)
    prior = AtomsPrior(rng.standard_normal((p["atoms"], p["dim"])))
    rows, phi = np.eye(p["dim"])[: p["budget"]], rng.standard_normal((p["samples"], p["budget"]))
    call = lambda: float(fvnum.posterior_mean(prior, rows, phi, **channel()).sum())
else:
    prior = TreePrior(p["depth"], "1/2")
if kind == "loss_mc":
    given = channel(p.get("tau", 0.3), p.get("n_tokens"))
    call = lambda: fvnum.loss_mc(prior, p["strategy"], p["budget"], samples=p["samples"], seed=0, threads=1,
                                 **given).value
elif kind == "noisy_bellman":
    call = lambda: fvnum.noisy_bellman(prior, p["budget"], fvnum.gaussian(0.3) if NEW else 0.3, threads=1,
                                       refine=p.get("refine", True)).value
elif kind in ("nonadaptive_keyed", "adaptive_keyed"):
    import inspect
    search = fvnum.best_nonadaptive_keyed if kind == "nonadaptive_keyed" else fvnum.best_adaptive_keyed
    if "channel" not in inspect.signature(search).parameters:  # the old family and keywords (a **kw search too)
        keyed, given = "weighted", {"n_tokens": 128}
    else:  # the channel as one object (issue 59)
        keyed, given = fvnum.tokens(128, keys="weighted"), {}
    call = lambda: search(prior, p["budget"], keyed, samples=p["samples"], seed=0, **given).estimate.value
t0 = time.perf_counter()
value = call()
first = time.perf_counter() - t0
times = []
while len(times) < 3 or sum(times) < a["min_time"]:
    t0 = time.perf_counter()
    call()
    times.append(time.perf_counter() - t0)
print(json.dumps({"first": first, "best": min(times), "calls": len(times), "value": value}))
"""


def fail(message: str):
    """One line on stderr, exit code 2."""
    print(f"paired.py: {message}", file=sys.stderr)
    raise SystemExit(2)


def paired_ratio(base: list, cur: list, limit: float | None = None) -> dict:
    """Medians of paired timings (seconds, pair ``i`` is ``base[i]``, ``cur[i]``), their ratio current /
    baseline, the min-max of the per-pair ratios and the verdict (``within`` when the ratio is at most
    ``1 + limit``)."""
    limit = LIMIT if limit is None else limit
    if len(base) != len(cur) or not base:
        raise ValueError(f"paired timings need as many baseline as current runs, at least one: {len(base)}, {len(cur)}")
    if any(not t > 0 for t in (*base, *cur)):
        raise ValueError(f"timings must be positive seconds: {base}, {cur}")
    mb, mc = statistics.median(base), statistics.median(cur)
    pairs = [c / b for b, c in zip(base, cur)]
    ratio = mc / mb
    within = ratio <= 1 + limit
    return {"baseline_s": mb, "current_s": mc, "ratio": ratio, "spread": [min(pairs), max(pairs)],
            "pair_ratios": pairs, "within": within,
            "verdict": f"within {limit:.0%}" if within else f"{ratio - 1:.0%} slower: not within {limit:.0%}"}


def git(*args, cwd=ROOT) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"git {' '.join(args)}: {out.stderr.strip().splitlines()[-1:]}")
    return out.stdout.strip()


@contextmanager
def baseline_worktree(rev: str, repo=ROOT, folder=None):
    """A detached ``git worktree`` of ``rev`` in a new temporary folder (inside ``folder`` if given), removed
    with its folder when the block ends, whatever ends it (an error, Ctrl-C, SIGTERM turned into Ctrl-C)."""
    tmp = Path(tempfile.mkdtemp(prefix="paired-", dir=folder))
    path = tmp / "baseline"
    try:
        git("worktree", "add", "--detach", "--quiet", str(path), rev, cwd=repo)
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=repo, capture_output=True)
        import shutil

        shutil.rmtree(tmp, ignore_errors=True)
        subprocess.run(["git", "worktree", "prune"], cwd=repo, capture_output=True)


def run_child(cmd: list, tree: Path, env: dict, timeout: float | None = None) -> tuple[int, str, str, float]:
    """Run ``cmd`` in ``tree`` in a new session; ``(returncode, stdout, stderr, seconds)``. On any interruption
    the child's whole process group is killed (pytest's workers too)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=tree, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise
    return proc.returncode, out, err, time.perf_counter() - t0


def child_env(tree: Path, cache: Path, one_thread: bool) -> dict:
    env = dict(os.environ, PYTHONPATH=str(tree), NUMBA_CACHE_DIR=str(cache))
    if one_thread:
        env.update(FVNUM_THREADS="1", NUMBA_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1",
                   OPENBLAS_NUM_THREADS="1")
    return env


def time_case(kind: str, args: dict, tree: Path, cache: Path, min_time: float) -> dict:
    payload = json.dumps({"kind": kind, "args": args, "min_time": min_time})
    rc, out, err, _ = run_child([sys.executable, "-c", CHILD, payload], tree, child_env(tree, cache, True))
    if rc:
        last = (err.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {rc}: {last}"}
    return json.loads(out.strip().splitlines()[-1])


def summarise(name: str, runs: dict) -> dict:
    """One case's row from its runs ``{"baseline": [...], "current": [...]}`` (each a child's answer)."""
    row = {"case": name, "runs": runs}
    ok = {k: [r for r in v if "best" in r] for k, v in runs.items()}
    for k, v in ok.items():
        if v:
            row[f"{k}_first_s"] = v[0]["first"]  # compile (empty cache) plus one call
            later = [r["first"] for r in v[1:]]
            row[f"{k}_warmup_s"] = statistics.median(later) if later else None  # cache load plus one call
            row[f"{k}_value"] = v[0]["value"]
    bad = [r.get("error") or r.get("absent") for v in runs.values() for r in v if "best" not in r]
    if bad:
        row["note"] = bad[0]
    if ok["baseline"] and len(ok["baseline"]) == len(runs["baseline"]) and len(ok["current"]) == len(runs["current"]):
        row.update(paired_ratio([r["best"] for r in ok["baseline"]], [r["best"] for r in ok["current"]]))
        b, c = row["baseline_value"], row["current_value"]
        row["same_value"] = abs(b - c) <= 1e-12 * max(1.0, abs(b))
    elif ok["current"]:
        row["current_s"] = statistics.median(r["best"] for r in ok["current"])
    return row


def markdown(result: dict) -> str:
    lines = [f"# Paired timings: {result['current_commit'][:10]} against {result['baseline_commit'][:10]}", "",
             f"{result['date']}, {result['pairs']} pairs{' (--quick)' if result['quick'] else ''}, "
             f"{result['cores']} cores, load average {result['load_before']:.2f} before, "
             f"{result['load_after']:.2f} after. Seconds: per child the fastest call after the warm-up, median "
             "over the pairs; spread: min-max of the per-pair ratios; compile: the first call in an empty "
             "Numba cache.", "",
             "| case | baseline s | current s | current / baseline | spread | verdict | compile s (base, cur) "
             "| same value |", "|---|---|---|---|---|---|---|---|"]
    fmt = lambda v, f="{:.4g}": "" if v is None else f.format(v)
    for r in result["cases"] + ([result["suite"]] if result.get("suite") else []):
        same = {True: "yes", False: "no"}.get(r.get("same_value"), "")
        spread = fmt(r.get("spread"), "{0[0]:.3f}-{0[1]:.3f}") if r.get("spread") else ""
        lines.append(f"| {r['case']} | {fmt(r.get('baseline_s'))} | {fmt(r.get('current_s'))} | "
                     f"{fmt(r.get('ratio'), '{:.3f}')} | {spread} | {r.get('verdict') or r.get('note', '')} | "
                     f"{fmt(r.get('baseline_first_s'), '{:.3g}')}, {fmt(r.get('current_first_s'), '{:.3g}')} "
                     f"| {same} |")
    suite = result.get("suite")
    if suite:
        last = {k: v[-1].get("summary", "") for k, v in suite["runs"].items()}
        lines += ["", f"Suite exit codes {suite['exit_codes']}; last summaries: baseline `{last['baseline']}`, "
                      f"current `{last['current']}` (the current checkout holds the tests added since the baseline)."]
    shared = result.get("shared_tests")
    if shared:
        lines += ["", f"Tests both checkouts hold ({shared['n_tests']}), the sum of their own times per run "
                      f"(JUnit XML): baseline {shared['baseline_s']:.1f} s, current {shared['current_s']:.1f} s, "
                      f"ratio {shared['ratio']:.3f} (spread {shared['spread'][0]:.3f}-{shared['spread'][1]:.3f}): "
                      f"{shared['verdict']}."]
    lines += ["", f"Verdict: {result['verdict']}.", ""]
    return "\n".join(lines)


def measure(base: Path, cur: Path, tmp: Path, pairs: int, quick: bool, suite: bool, only=None) -> dict:
    cases = [(n, k, {**a, **QUICK[n]}) for n, k, a in CASES if n in QUICK] if quick else CASES
    cases = [c for c in cases if only is None or any(s in c[0] for s in only)]
    trees = {"baseline": base, "current": cur}
    caches = {k: tmp / f"numba-{k}" for k in trees}
    rows = []
    for name, kind, args in cases:
        runs = {"baseline": [], "current": []}
        for _ in range(pairs):
            for k, tree in trees.items():
                runs[k].append(time_case(kind, args, tree, caches[k], QUICK_TIME if quick else MIN_TIME))
        row = summarise(name, runs)
        row["kind"], row["args"] = kind, args
        rows.append(row)
        print(f"{name:42} {row.get('baseline_s') or float('nan'):9.4g} {row.get('current_s') or float('nan'):9.4g}"
              f"  {row.get('ratio') or float('nan'):6.3f}  {row.get('verdict') or row.get('note', '')}", flush=True)
    result = {"cases": rows, "suite": None}
    if suite:
        runs = {"baseline": [], "current": []}
        times = {"baseline": [], "current": []}
        for i in range(pairs):
            for k, tree in trees.items():
                xml = tmp / f"suite-{k}-{i}.xml"
                rc, out, _, seconds = run_child(SUITE + [f"--junitxml={xml}"], tree, child_env(tree, caches[k], False))
                tail = (out.strip().splitlines() or [""])[-1]
                runs[k].append({"best": seconds, "first": seconds, "value": rc, "summary": tail})
                times[k].append(junit_times(xml))
        row = summarise("test suite (pytest -n 2)", runs)
        row.pop("same_value", None)
        row["exit_codes"] = {k: [r["value"] for r in v] for k, v in runs.items()}
        result["suite"] = row
        shared = shared_tests(times)
        if shared:  # the whole suite's wall time also counts the tests added since the baseline
            row["verdict"] = "not judged: the current checkout holds more tests (see the shared tests)"
        print(f"{row['case']:42} {row['baseline_s']:9.4g} {row['current_s']:9.4g}  {row['ratio']:6.3f}  "
              f"{row['verdict']} (exit codes {row['exit_codes']})", flush=True)
        if shared:
            result["shared_tests"] = shared
            print(f"{shared['case']:42} {shared['baseline_s']:9.4g} {shared['current_s']:9.4g}  "
                  f"{shared['ratio']:6.3f}  {shared['verdict']}", flush=True)
    return result


def junit_times(xml: Path) -> dict:
    """``{test id: seconds}`` from a JUnit XML report (empty when the run left none)."""
    import xml.etree.ElementTree as ET

    try:
        root = ET.parse(xml).getroot()
    except (OSError, ET.ParseError):
        return {}
    return {f"{c.get('classname')}::{c.get('name')}": float(c.get("time") or 0.0) for c in root.iter("testcase")
            if c.find("skipped") is None}


def shared_tests(times: dict) -> dict | None:
    """The suite restricted to the tests both checkouts hold (same id, run in every pair): per pair, the sum of
    their own times in each checkout, then :func:`paired_ratio`. The whole suite's wall time counts the tests
    added since the baseline; this one does not."""
    runs = [set(t) for k in ("baseline", "current") for t in times[k]]
    if not runs or not all(runs):
        return None
    common = set.intersection(*runs)
    if not common:
        return None
    sums = {k: [sum(t[i] for i in common) for t in times[k]] for k in ("baseline", "current")}
    row = {"case": f"shared tests ({len(common)}), sum of test times", "n_tests": len(common)}
    row.update(paired_ratio(sums["baseline"], sums["current"]))
    return row


def parse(argv: list) -> dict:
    from bridges.runs.options import script_options

    stray = [a for a in argv if not a.startswith("--")]
    if stray:
        fail(f"unexpected argument {stray[0]!r}; options are --{', --'.join(OPTIONS)} (--name=value)")
    opts = script_options(argv, OPTIONS)
    for flag in ("quick", "no-suite"):
        if opts.get(flag, "1") != "1":
            fail(f"--{flag} takes no value, got --{flag}={opts[flag]!r}")
    quick = "quick" in opts
    pairs = opts.get("pairs", "2" if quick else "5")
    if not (pairs.isascii() and pairs.isdigit()) or not 1 <= int(pairs) <= 100:
        fail(f"--pairs must be a whole number from 1 to 100, got {pairs!r}")
    given = opts.get("out")
    if given is not None and not (given and Path(given).is_dir()):
        fail(f"--out {given!r} is not a folder")
    out = Path(given) if given else ROOT / "docs" / "benchmarks"  # the pages of the site
    limit = opts.get("limit", f"{LIMIT * 100:g}")
    try:
        limit = float(limit) / 100
    except ValueError:
        fail(f"--limit is a percentage (5 for 5%), got {limit!r}")
    if not 0 < limit < 10:
        fail(f"--limit is a percentage between 0 and 1000, got {opts['limit']!r}")
    only = None
    if "cases" in opts:
        only = [s.strip() for s in opts["cases"].split(",") if s.strip()]
        if not only or not any(s in name for s in only for name, _, _ in CASES):
            fail(f"--cases {opts['cases']!r} names no case; the cases are: {'; '.join(n for n, _, _ in CASES)}")
    tag = opts.get("tag", "")
    if tag and not (tag.replace("-", "").isalnum() and tag.isascii()):
        fail(f"--tag is letters, digits and dashes, got {tag!r}")
    return {"baseline": opts.get("baseline", BASELINE), "pairs": int(pairs), "quick": quick,
            "suite": "no-suite" not in opts, "out": out, "limit": limit, "cases": only, "tag": tag}


def on_sigterm(signum, frame):
    raise KeyboardInterrupt


def main(argv=None) -> dict:
    from bridges.runs.store import write_atomic, write_json

    global LIMIT
    opts = parse(sys.argv[1:] if argv is None else argv)
    LIMIT = opts["limit"]
    try:
        rev = git("rev-parse", "--verify", "--quiet", "--end-of-options", opts["baseline"] + "^{commit}")
    except RuntimeError:
        fail(f"--baseline {opts['baseline']!r} names no commit of this repository")
    signal.signal(signal.SIGTERM, on_sigterm)
    head = git("rev-parse", "HEAD")
    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    load_before = os.getloadavg()[0]
    print(f"baseline {rev[:10]}, current {head[:10]}{' (with uncommitted changes)' if dirty else ''}, "
          f"{opts['pairs']} pairs{', quick' if opts['quick'] else ''}")
    print(f"{'case':42} {'base s':>9} {'cur s':>9}  {'ratio':>6}  verdict")
    with baseline_worktree(rev) as base:
        result = measure(base, ROOT, base.parent, opts["pairs"], opts["quick"], opts["suite"], opts["cases"])
    # the verdict: the kernels, and the suite on the tests both checkouts hold (its wall time when none is found)
    rows = [r for r in result["cases"] + [result.get("shared_tests") or result["suite"]] if r and "ratio" in r]
    slow = [r["case"] for r in rows if not r["within"]]
    date = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    result.update(date=date, baseline_commit=rev, current_commit=head, uncommitted=dirty, pairs=opts["pairs"],
                  quick=opts["quick"], cores=os.cpu_count(), load_before=load_before, load_after=os.getloadavg()[0],
                  min_time=QUICK_TIME if opts["quick"] else MIN_TIME, limit=LIMIT,
                  verdict=(f"every case within {LIMIT:.0%}" if not slow else
                           f"not within {LIMIT:.0%}: {', '.join(slow)}") if rows else "no case timed in both")
    stem = f"{date}-paired" + (f"-{opts['tag']}" if opts["tag"] else "")
    write_json(opts["out"] / f"{stem}.json", result)
    write_atomic(opts["out"] / f"{stem}.md", markdown(result))
    print(f"\n{result['verdict']}; written to {opts['out'] / (stem + '.json')} and .md")
    return result


if __name__ == "__main__":
    try:
        main()
    except KeyboardInterrupt:
        print("paired.py: interrupted; the baseline worktree was removed", file=sys.stderr)
        raise SystemExit(130)
