"""A sweep on Dask: Monte Carlo losses of ``path`` and ``top_levels`` over budgets and seeds, one cell per
combination, run by ``bridges.studies.sweep`` on a local cluster of worker processes (``fv sweep`` in Python).

    python examples/06_sweep.py                                     # 2 x 3 x 2 = 12 cells, 2 workers
    python examples/06_sweep.py --tau=0 --samples=20000             # noiseless: path is exact
    python examples/06_sweep.py --scheduler=tcp://host:8786         # a running Dask cluster

Takes 10-20 s (starting the workers and their Numba kernels is most of it). The same sweep from the shell
is ``fv sweep runs/examples/06_sweep/spec.toml --out DIR``: the example writes that spec. Outputs in
``runs/examples/06_sweep``: ``spec.toml``, ``config.json``, ``results.json`` (every row, with the exact
noiseless losses of fvsym beside them) and ``sweep/`` (the sweep's own ``results.csv``, ``results.json`` and
``cells/``). Re-running reuses the finished cells: only changed or new cells are computed.
"""
from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path

import _cli


@dataclass(frozen=True)
class Config:
    """Tree prior of ``depth`` and ``alpha``; ``fv mc`` of each of ``strategies`` x ``budgets`` x ``seeds``
    at channel noise ``tau`` with ``samples`` samples; ``workers`` local Dask worker processes (none: one per
    core), or the running cluster at ``scheduler`` (``synchronous``: in this process)."""

    depth: int = 3
    alpha: str = "1/2"
    tau: str = "3/10"
    samples: int = 20_000
    strategies: tuple[str, ...] = ("path", "top_levels")
    budgets: tuple[int, ...] = (1, 2, 3)
    seeds: tuple[int, ...] = (0, 1)
    workers: int | None = 2
    scheduler: str | None = None
    progress: bool = True
    out: str = _cli.default_out("06_sweep")

    def spec(self) -> dict:
        """The sweep spec (the dict form of the TOML that ``fv sweep`` reads)."""
        return {"command": "mc",
                "base": {"prior": "tree", "depth": self.depth, "alpha": self.alpha, "tau": self.tau,
                         "samples": self.samples},
                "grid": {"strategy": list(self.strategies), "budget": list(self.budgets), "seed": list(self.seeds)}}

    def __post_init__(self):
        from bridges.studies.sweep import plan

        if any(b > self.depth for b in self.budgets) and "path" in self.strategies:
            raise ValueError(f"budgets {self.budgets} exceed depth {self.depth}: path reads one node per level")
        plan(self.spec(), self.out)  # one-line ValueErrors naming the bad option, before anything runs


def toml(spec: dict) -> str:
    """The spec as TOML (strings, numbers and lists of them)."""
    lines = [f"command = {json.dumps(spec['command'])}"]
    for table in ("base", "grid"):
        lines += ["", f"[{table}]"] + [f"{k} = {json.dumps(v)}" for k, v in spec[table].items()]
    return "\n".join(lines) + "\n"


def main(cfg: Config) -> dict:
    from bridges.studies import sweep
    from fvsym.tree import tree_loss

    clock = _cli.Clock()
    folder = _cli.prepare(cfg)
    spec = cfg.spec()
    result = sweep.run_sweep(spec, out=Path(folder) / "sweep", scheduler=cfg.scheduler, workers=cfg.workers,
                             progress=cfg.progress)
    exact = {(s, b): tree_loss(cfg.depth, b, s, alpha=cfg.alpha).expr for s in cfg.strategies for b in cfg.budgets}
    rows = [{**r, "exact_noiseless": str(exact[r["strategy"], r["budget"]])} for r in result.rows]
    print(f"\n{'strategy':>10} {'budget':>6} {'seed':>4} {'loss':>9} {'stderr':>8} {'noiseless':>10}")
    for r in rows:
        print(f"{r['strategy']:>10} {r['budget']:>6} {r['seed']:>4} {r['value']:9.4f} {r['stderr']:8.1g} "
              f"{float(exact[r['strategy'], r['budget']]):10.4f}")
    results = {"rows": rows, "n_computed": result.n_computed, "n_cached": result.n_cached,
               "sweep_folder": result.out, "seconds": clock()}
    _cli.save(cfg, results, {"spec.toml": toml(spec)})
    print(f"wrote {folder}/ (spec.toml, config.json, results.json; the sweep in {result.out}) in "
          f"{results['seconds']:.1f} s ({result.n_computed} cells computed, {result.n_cached} reused)")
    return results


if __name__ == "__main__":
    sys.exit(_cli.run(main, Config))
