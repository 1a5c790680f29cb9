"""The prices of ``fv derive`` against measured time and memory, over a table of cases (issue 32: every price
within 3x of measured, both ways). Each case runs in a fresh interpreter (no warm caches): the seconds of the
command after its imports and the peak resident memory, beside the price the command checks before work.

    python benchmarks/bench_derive_prices.py            # the default table (a few minutes)
    python benchmarks/bench_derive_prices.py --quick    # the cases under about 2 s each
    python benchmarks/bench_derive_prices.py --only bellman

Prints one row per case: price and measured seconds and MB, their ratios, and ``OUT`` where a ratio lies
outside [1/3, 3]. Timing depends on the machine's load: run it on a quiet machine; it asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# (kind, argv after "fv derive", quick)
CASES = [
    ("tree-loss", "--strategy optimal --depth 9 --budget 3 --alpha 1/2", True),
    ("tree-loss", "--strategy optimal --depth 7 --budget 4 --alpha 1/2", True),
    ("tree-loss", "--strategy optimal --depth 5 --budget 4 --alpha 1/2", True),
    ("tree-loss", "--strategy optimal --depth 6 --budget 6 --alpha 1/2", True),
    ("tree-loss", "--strategy optimal --depth 11 --budget 2 --alpha 1/2", True),
    ("tree-loss", "--strategy optimal --depth 8 --budget 4 --alpha 1/2", False),
    ("tree-loss", "--strategy optimal --depth 12 --budget 2 --alpha 1/2", False),
    ("tree-loss", "--strategy optimal --depth 10 --budget 3 --alpha 1/2", False),
    ("tree-loss", "--strategy optimal --depth 7 --budget 5 --alpha 1/2", False),
    ("tree-loss", "--strategy optimal --depth 8 --budget 5 --alpha 1/2", False),
    ("tree-loss", "--strategy optimal_nonadaptive --depth 10 --budget 5 --alpha 1/2", True),
    ("tree-loss", "--strategy optimal_nonadaptive --depth 9 --budget 7 --alpha 1/2", True),
    ("tree-loss", "--strategy optimal_nonadaptive --depth 13 --budget 3 --alpha 1/2", False),
    ("tree-loss", "--strategy optimal_nonadaptive --depth 12 --budget 4 --alpha 1/2", False),
    ("tree-loss", "--strategy optimal_nonadaptive --depth 12 --budget 6 --alpha 1/2", False),
    ("tree-loss", "--strategy top_levels --depth 30 --budget 5 --alpha 1/2", True),
    ("tree-loss", "--strategy top_levels --depth 30 --budget 5", True),
    ("tree-loss", "--strategy path --depth 30 --budget 7", True),
    ("bellman", "--depth 3 --layers 2 --alpha 1/2 --unroll", True),
    ("bellman", "--depth 4 --layers 3 --alpha 1/2 --unroll", True),
    ("bellman", "--depth 6 --layers 2 --alpha 1/2 --unroll", True),
    ("bellman", "--depth 7 --layers 2 --alpha 1/2 --unroll", False),
    ("bellman", "--depth 4 --layers 4 --alpha 1/2 --unroll", False),
    ("bellman", "--depth 5 --layers 3 --alpha 1/2 --unroll", False),
    ("bellman", "--depth 4 --layers 2 --width 2 --alpha 1/2 --unroll", True),
    ("bellman", "--depth 5 --layers 2 --width 2 --alpha 1/2 --unroll", False),
    ("bellman", "--depth 3 --layers 2 --unroll", True),
    ("bellman", "--depth 3 --layers 3 --unroll", True),
    ("bellman", "--depth 5 --layers 1 --unroll", True),
    ("bellman", "--depth 4 --layers 1 --width 2 --unroll", False),
    ("bellman", "--depth 4 --layers 2 --unroll", False),
    ("gaussian-loss", "--cov matched --depth 10 --budget 100 --tau 1/2 --alpha 1/2", True),
    ("gaussian-loss", "--cov matched --depth 10 --budget 100 --tau 1/2", False),
    ("gaussian-loss", "--dim 1000000 --budget 1000 --tau 1/2", True),
]

RUN = r"""
import contextlib, io, json, resource, sys, time
from bridges.cli import main
argv = json.loads(sys.argv[1])
start = time.perf_counter()
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["--max-seconds", "100000"] + argv)
seconds = time.perf_counter() - start
print(json.dumps({"code": code, "seconds": seconds,
                  "rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

PRICE = r"""
import json, sys
from fvsym.cli import derive_price
print(json.dumps(derive_price(json.loads(sys.argv[1]))))
"""


def run(code: str, argv: list[str], timeout: float) -> dict:
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(argv)], capture_output=True, text=True,
                          cwd=ROOT, timeout=timeout, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else "failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the cases marked quick")
    parser.add_argument("--only", default=None, help="only one kind: tree-loss, bellman or gaussian-loss")
    parser.add_argument("--timeout", type=float, default=300.0)
    args = parser.parse_args()
    print(f"{'case':72s} {'price s':>8s} {'meas s':>8s} {'ratio':>6s} {'price MB':>9s} {'meas MB':>8s} {'ratio':>6s}")
    for kind, text, quick in CASES:
        if (args.quick and not quick) or (args.only and kind != args.only):
            continue
        argv = ["derive", kind, *text.split()]
        try:
            price = run(PRICE, argv, 120)
            measured = run(RUN, argv, args.timeout)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            print(f"{kind + ' ' + text:72s} failed: {exc}")
            continue
        t_ratio = price["seconds"] / measured["seconds"]
        m_ratio = price["bytes"] / measured["rss"]
        flag = "" if all(1 / 3 <= r <= 3 for r in (t_ratio, m_ratio)) else "  OUT"
        print(f"{kind + ' ' + text:72s} {price['seconds']:8.3g} {measured['seconds']:8.3g} {t_ratio:6.2f} "
              f"{price['bytes'] / 2**20:9.0f} {measured['rss'] / 2**20:8.0f} {m_ratio:6.2f}{flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
