"""Every price against what it prices (issue 32, item 1): each case runs one ``fv`` command in a child process,
measures its wall time and peak RSS, asks the same price the command checks before work, and prints
price, measured, their ratio and whether it lies within [1/3, 3].

    python benchmarks/bench_prices.py                 # the whole table (about 8 minutes on 2 shared cores)
    python benchmarks/bench_prices.py --quick         # a subset (about 2 minutes)
    python benchmarks/bench_prices.py --markdown FILE # also write the table as markdown

Time. The prices of ``fv mc``, ``fv bounds`` and ``fv derive`` price the work, not the start of Python with
numpy, numba (and sympy) and the loading of the cached kernels: their measured seconds are the wall time less
the start-up of the same command family, measured first on a tiny instance (``baseline`` rows). The prices of
``fv train`` and ``fv audit`` include their start-up (torch's import, the model), so their whole wall time is
compared. Memory: the prices are peak resident sets (``BASE_BYTES`` of the interpreter included), compared
with the child's ``ru_maxrss`` (``os.wait4``), for the cases whose price is memory-sized (large ones; a price
under 400 MB is the interpreter's floor and is shown, not judged).

Cases owned by other parts (``fv derive``'s prices: ``fvsym.guards.costs``; ``fv derive gaussian-loss`` has no time
price) are measured and reported, not tuned here. One thread everywhere (``--threads 1``), seeds fixed. The
machine's load average is printed with the table: a loaded machine lengthens every measurement.
"""
from __future__ import annotations
import fvnum

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

WITHIN = (1 / 3, 3.0)
MEMORY_FLOOR = 400e6  # prices below this are the interpreter's floor: shown, not judged
CASE_TIMEOUT = 120.0  # a case still running after this is ended and reported (exit -9, "over 120 s")


@dataclass
class Case:
    name: str
    family: str  # mc, bounds, derive, train, audit (start-up subtracted for mc, bounds, derive)
    argv: list
    price: object  # () -> (bytes or None, seconds or None)
    quick: bool = False


# --- the prices, asked as the commands ask them --------------------------------------------------------------
def mc_price(depth=None, budget=3, strategy="path", samples=100_000, tau=0.3, tokens=None, prior=None):
    from fvsym.priors import TreePrior

    from fvnum.optimum import noisy_work
    from fvnum.mc.channels import make_channel
    from fvnum.policies.prices import mc_cost
    from fvnum.policies.registry import resolve_strategy
    from fvnum.priors.tree import TreeSpec, numeric_prior

    prior = prior if prior is not None else TreePrior(depth, "1/2")
    spec = numeric_prior(prior)
    tree = isinstance(spec, TreeSpec)
    name, klass = resolve_strategy(strategy, None)
    memory, seconds = mc_cost(depth=spec.depth if tree else None, dim=spec.dim, budget=budget, strategy=name,
                              tokens=tokens is not None, samples=samples, threads=1,
                              dense_design=name == "optimal_nonadaptive" and klass == "unit")
    if name == "optimal" and tree and tau:  # fvnum.policies.registry._check_noisy_optimal_cost: the exact noisy policy
        channel = make_channel(spec, fvnum.gaussian(tau))
        seconds = (noisy_work.tree_solve_seconds(spec, budget, channel.tau, 1, refine=False)
                   + noisy_work.tree_policy_seconds(spec, budget, samples, channel.tau, 1))
    return memory, seconds


def bounds_price(depth, budget, tau, samples):
    from fvsym.priors import TreePrior

    from fvnum.optimum.bracket import bounds_plan
    from fvnum.mc.channels import make_channel
    from fvnum.priors.tree import numeric_prior

    spec = numeric_prior(TreePrior(depth, "1/2"))
    plan = bounds_plan(spec, make_channel(spec, fvnum.gaussian(tau)), budget, samples=samples, threads=1)
    return plan.bytes, plan.total_seconds


def tree_loss_price(depth, budget, strategy):
    from fvsym.guards.costs import tree_loss_cost

    return tree_loss_cost(depth, budget, strategy, False)


def unroll_price(depth, layers, width):
    from fvsym import bellman
    from fvsym.guards.costs import UNROLL_SECONDS_PER_NODE
    from fvsym.priors import TreePrior

    prior = TreePrior(depth, "1/2")
    return None, 2.0 + UNROLL_SECONDS_PER_NODE[False] * bellman.unrolled_size(prior, layers, width)


def train_price(out, **options):
    from bridges.runs.config import RunConfig
    from bridges.prices.cost import train_seconds
    from bridges.prices.memory import train_bytes

    cfg = RunConfig.from_options({**options, "out": out})
    return train_bytes(cfg), train_seconds(cfg)


def audit_price(run_dir, samples, token_sample):
    from bridges.analysis.audit import audit_cost
    from bridges.training.train import load_result

    cfg = load_result(Path(run_dir) / "result.json").config
    m, d = cfg.model, cfg.data
    return audit_cost(tree=d.prior == "tree", depth=d.depth, dim=d.dim, layers=m.n_layers, width=m.n_channels, budget=m.budget,
                      mlp_width=m.mlp_width if m.model != "C" else 1, hidden_layers=m.hidden_layers,
                      samples=samples, token_sample=token_sample)


# --- the cases -----------------------------------------------------------------------------------------------
def cases(tmp: Path, quick: bool) -> list:
    T = ["--tau", "0.3", "--threads", "1", "--seed", "0"]

    def mc(depth, budget, strategy, samples, q=False, **kw):
        argv = ["mc", "--depth", depth, "--budget", budget, "--strategy", strategy, "--samples", samples, *T]
        return Case(f"mc {strategy} K{depth} B{budget} n{samples}", "mc", argv,
                    lambda: mc_price(depth, budget, strategy, samples, **kw), q)

    out = [
        mc(16, 8, "path", 3_000_000, True), mc(20, 10, "path", 1_000_000),
        mc(16, 8, "top_levels", 3_000_000),
        mc(8, 4, "greedy_coordinate", 20_000, True), mc(12, 6, "greedy_coordinate", 5000),
        mc(4, 3, "rollout", 4000, True), mc(6, 4, "rollout", 2000), mc(3, 6, "rollout", 1500),
        mc(4, 3, "optimal_nonadaptive_unit", 100_000, True), mc(6, 4, "optimal_nonadaptive_unit", 20_000),
        mc(6, 4, "optimal_nonadaptive_coordinate", 20_000), mc(8, 3, "optimal_nonadaptive_coordinate", 20_000, True),
        mc(5, 3, "greedy_dense", 300), mc(6, 3, "greedy_dense", 200, True),
        mc(3, 3, "optimal", 400, True), mc(2, 3, "optimal", 1000),
        mc(10, 3, "bellman_noiseless", 20_000, True),
    ]
    tok = ["mc", "--depth", 12, "--budget", 6, "--strategy", "path", "--samples", 20_000, "--tokens", 64, "--threads", 1]
    out.append(Case("mc path K12 B6 tokens 64 n20000", "mc", tok,
                    lambda: mc_price(12, 6, "path", 20_000, tokens=64)))

    def gauss():
        from fvsym.priors import GaussianPrior

        return mc_price(budget=10, strategy="optimal", samples=50_000, prior=GaussianPrior.isotropic(200))

    out.append(Case("mc gaussian isotropic D200 B10 n50000", "mc",
                    ["mc", "--prior", "gaussian", "--cov", "isotropic", "--dim", 200, "--budget", 10, "--strategy",
                     "optimal", "--samples", 50_000, *T], gauss))

    def bounds(depth, budget, tau, samples, q=False):
        argv = ["bounds", "--depth", depth, "--budget", budget, "--tau", tau, "--samples", samples, "--threads", 1]
        return Case(f"bounds K{depth} B{budget} tau {tau} n{samples}", "bounds", argv,
                    lambda: bounds_price(depth, budget, tau, samples), q)

    out += [bounds(3, 3, 0.5, 20_000, True), bounds(10, 3, 0.3, 5000), bounds(4, 5, 0.5, 2000, True)]

    def derive(depth, budget, strategy, q=False):
        argv = ["derive", "tree-loss", "--depth", depth, "--budget", budget, "--strategy", strategy, "--alpha", "1/2"]
        return Case(f"derive tree-loss {strategy} K{depth} B{budget}", "derive", argv,
                    lambda: tree_loss_price(depth, budget, strategy), q)

    out += [derive(9, 3, "optimal", True), derive(10, 3, "optimal"), derive(7, 5, "optimal"),
            derive(10, 5, "optimal_nonadaptive", True)]
    for depth, layers in ((3, 3), (4, 2)):
        argv = ["derive", "bellman", "--depth", depth, "--layers", layers, "--width", 1, "--alpha", "1/2", "--unroll"]
        out.append(Case(f"derive bellman --unroll K{depth} L{layers}", "derive", argv,
                        lambda d=depth, l=layers: unroll_price(d, l, 1), depth == 3))
    import numpy as np

    for n in (12, 24):  # a dense covariance: the exact eigen-decomposition in sympy (no time price)
        x = np.random.default_rng(0).standard_normal((n, n))
        np.save(tmp / f"cov{n}.npy", x @ x.T / n + np.eye(n))
        out.append(Case(f"derive gaussian-loss cov {n}x{n} B4 (no time price)", "derive",
                        ["derive", "gaussian-loss", "--cov", tmp / f"cov{n}.npy", "--dim", n, "--budget", 4, "--tau",
                         "1/2"], lambda: (None, None), n == 12))

    runs = tmp / "runs"

    def train(name, q=False, **opts):
        argv = ["train", "--out", runs, "--quiet", "--eval-batches", 2]
        for k, v in opts.items():
            argv += [f"--{k.replace('_', '-')}", v]
        dests = {"tokens" if k == "tokens" else k: v for k, v in opts.items()}
        return Case(f"train {name}", "train", argv, lambda: train_price(str(runs), eval_batches=2, **dests), q)

    out += [
        train("A steps 60 N64", True, model="A", steps=60, tokens=64),
        train("A width 512 steps 20 N32", model="A", mlp_width=512, steps=20, tokens=32),
        train("A hidden 100 steps 5 N16", True, model="A", hidden_layers=100, steps=5, tokens=16),
        train("B hidden 20 steps 20 N64", model="B", hidden_layers=20, steps=20, tokens=64),
        train("C steps 200 N64", model="C", steps=200, tokens=64),
    ]
    return out


def audit_cases(tmp: Path) -> list:
    runs = sorted((tmp / "runs").glob("A-tree-K4-B3-N64-*"))  # the first training case's run (default MLP)
    if not runs:
        return []
    run = runs[0]
    return [Case(f"audit A n{n} x{x}", "audit", ["audit", run, "--samples", n, "--token-sample", x],
                 lambda n=n, x=x: audit_price(run, n, x), q) for n, x, q in ((200, 2048, True), (400, 8192, False))]


BASELINES = {
    "mc": ["mc", "--depth", 2, "--budget", 1, "--samples", 2, "--tau", "0.3", "--threads", 1],
    "bounds": ["bounds", "--depth", 1, "--budget", 1, "--tau", "0.3", "--samples", 2, "--threads", 1],
    "derive": ["derive", "tree-loss", "--depth", 2, "--budget", 1, "--strategy", "optimal", "--alpha", "1/2"],
}


# --- measuring -----------------------------------------------------------------------------------------------
def run(argv) -> tuple[float, float, int, str]:
    """(wall seconds, peak RSS bytes, exit code, last stderr line) of ``fv ARGV`` in a child process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1", "FVNUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "bridges.cli", "--max-seconds", "100000", *map(str, argv)]
    t0 = time.perf_counter()
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env, cwd=ROOT)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t0 > CASE_TIMEOUT:
                proc.kill()
                _, status, usage = os.wait4(proc.pid, 0)
                break
            time.sleep(0.02)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        err.seek(0)
        lines = err.read().decode(errors="replace").strip().splitlines()
    if wall > CASE_TIMEOUT and proc.returncode == -9:
        lines.append(f"over {CASE_TIMEOUT:.0f} s: ended by the benchmark")
    return wall, usage.ru_maxrss * 1024.0, proc.returncode, lines[-1] if lines else ""


def judge(ratio) -> str:
    if ratio is None:
        return "-"
    return "yes" if WITHIN[0] <= ratio <= WITHIN[1] else "NO"


def fmt(x, unit=""):
    if x is None:
        return "-"
    return f"{x / 1e6:.0f} MB" if unit == "B" else f"{x:.3g}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a subset of the cases")
    ap.add_argument("--markdown", default=None, help="also write the table as markdown to this file")
    args = ap.parse_args(argv)
    rows = []
    load0 = os.getloadavg()
    t_start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-prices-") as tmpdir:
        tmp = Path(tmpdir)
        base = {}
        for family, bargv in BASELINES.items():
            base[family] = min(run(bargv)[0] for _ in range(2))
            print(f"baseline {family}: {base[family]:.2f} s (start-up, subtracted)", flush=True)
        todo = [c for c in cases(tmp, args.quick) if c.quick or not args.quick]
        todo_audit = None
        for case in todo + [None]:
            if case is None:  # the audits need a trained run
                todo_audit = [c for c in audit_cases(tmp) if c.quick or not args.quick]
                for c in todo_audit:
                    rows.append(measure(c, base))
                break
            rows.append(measure(case, base))
    load1 = os.getloadavg()
    table = render(rows, load0, load1, time.perf_counter() - t_start, args.quick)
    print("\n".join(table))
    if args.markdown:
        Path(args.markdown).write_text("\n".join(table) + "\n")
    return 0


def measure(case: Case, base: dict) -> dict:
    price_bytes, price_s = case.price()
    wall, rss, code, last = run(case.argv)
    work = wall - base.get(case.family, 0.0)
    work = max(work, 0.05)
    t_ratio = None if price_s is None else price_s / work
    m_ratio = None if price_bytes is None or price_bytes < MEMORY_FLOOR else price_bytes / rss
    row = dict(name=case.name, code=code, wall=wall, work=work, price_s=price_s, t_ratio=t_ratio, rss=rss,
               price_bytes=price_bytes, m_ratio=m_ratio, error=last if code else "",
               argv="fv " + " ".join(map(str, case.argv)))
    print(f"{case.name:52s} exit {code}  wall {wall:7.2f} s  work {work:7.2f} s  price {fmt(price_s):>7s} s  "
          f"ratio {fmt(t_ratio):>6s} {judge(t_ratio):3s}  rss {rss / 1e6:6.0f} MB  price "
          f"{fmt(price_bytes, 'B'):>8s}  {judge(m_ratio)}" + (f"  [{last[:100]}]" if code else ""), flush=True)
    return row


def render(rows, load0, load1, seconds, quick) -> list:
    out = [f"| case | exit | wall s | work s | price s | price / work | within 3x | peak RSS | price | price / RSS | within 3x |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['name']} | {r['code']} | {r['wall']:.2f} | {r['work']:.2f} | {fmt(r['price_s'])} | "
                   f"{fmt(r['t_ratio'])} | {judge(r['t_ratio'])} | {r['rss'] / 1e6:.0f} MB | "
                   f"{fmt(r['price_bytes'], 'B')} | {fmt(r['m_ratio'])} | {judge(r['m_ratio'])} |")
    judged = [r["t_ratio"] for r in rows if r["t_ratio"] is not None] + [r["m_ratio"] for r in rows if r["m_ratio"] is not None]
    inside = sum(WITHIN[0] <= x <= WITHIN[1] for x in judged)
    out += ["", f"{len(rows)} cases{' (--quick)' if quick else ''} in {seconds:.0f} s; {inside} of {len(judged)} judged "
            f"ratios within [1/3, 3]; load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end."]
    failed = [r for r in rows if r["code"]]
    for r in failed:
        out.append(f"- exit {r['code']}: `{r['argv']}`: {r['error'][:200]}")
    return out


if __name__ == "__main__":
    sys.exit(main())
