"""Train one model and hold it against the theory at the same prior, budget and effective noise
(THEORY.md sections 2, 5-7; ``bridges.training.train`` and ``bridges.analysis.compare``).

    python examples/04_train_and_compare.py                                  # Model A, depth 3, budget 2
    python examples/04_train_and_compare.py --model=B --steps=2000 --depth=4 --budget=3
    python examples/04_train_and_compare.py --prior=gaussian                 # matched Gaussian prior

Trains Model A, B or C (tiny by default: MLP width 32, 300 steps, 7-13 s of training on one core; about 40 s
of CPU in all, the keyed theory rows included), then prints the Markdown comparison table: the trained held-out
loss beside the theory's losses under the
``tokens`` channel of the same ``N`` (``path``, the best adaptive policy found, ``top_levels``, the best
non-adaptive coordinate and unit designs, the linear and Gaussian bounds) and the learned routing.
The tiny default model is far from converged; raise ``--steps`` and ``--mlp_width`` to approach the theory.
Outputs in ``runs/examples/04_train_and_compare``: ``config.json``, ``results.json`` (the table),
``comparison.md``, and the training run (checkpoint, result) under ``train/``; re-running the same
configuration reuses the finished training run.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import _cli


@dataclass(frozen=True)
class Config:
    """Model ``model`` (A, B, C) with ``budget`` slots on the ``prior`` (tree or matched gaussian) of
    ``depth`` and ``alpha``, ``n_tokens`` tokens per context; training ``steps`` x ``batch`` contexts at
    learning rate ``lr`` with MLP ``mlp_width``; the theory from ``theory_samples`` Monte Carlo samples (searches on
    ``search_samples``; ``dense``: include the unit-class search)."""

    model: str = "A"
    prior: str = "tree"
    depth: int = 3
    budget: int = 2
    alpha: float = 0.5
    n_tokens: int = 128
    mlp_width: int = 32
    steps: int = 300
    batch: int = 128
    lr: float = 3e-3
    seed: int = 0
    threads: int = 1
    theory_samples: int = 5_000
    search_samples: int = 1_000
    dense: bool = True
    progress: bool = True
    out: str = _cli.default_out("04_train_and_compare")

    def run_config(self):
        """The ``bridges.runs.config.RunConfig`` of this example (validated there)."""
        from bridges.runs.config import DataConfig, ModelConfig, RunConfig

        return RunConfig(
            DataConfig(prior=self.prior, depth=self.depth, alpha=self.alpha, n_tokens=self.n_tokens),
            ModelConfig(model=self.model, budget=self.budget, mlp_width=self.mlp_width),
            _cli.train_config(self, evals=5, eval_batches=8),
        )

    def __post_init__(self):
        self.run_config()  # one-line ValueErrors for a bad model, prior, budget, ...
        for name in ("theory_samples", "search_samples"):
            if getattr(self, name) < 2:
                raise ValueError(f"{name} must be >= 2, got {getattr(self, name)}")


def main(cfg: Config) -> dict:
    from bridges.analysis.compare import beside_of, compare, to_markdown
    from bridges.training.train import train

    clock = _cli.Clock()
    _cli.prepare(cfg)
    run = cfg.run_config()
    result = train(run, progress=cfg.progress)
    print(f"trained Model {cfg.model} ({result.steps} steps, {result.steps_per_s:.1f} steps/s): held-out loss "
          f"{result.loss:.4f} ± {result.stderr:.4f} ({result.metric} metric, {result.n_eval} contexts)")
    train_s = clock()
    table = compare(result, samples=cfg.theory_samples, seed=cfg.seed, search_samples=cfg.search_samples,
                    dense=cfg.dense).to_dict()
    markdown = to_markdown(table)
    print()
    print(markdown)
    results = {"table": table, "beside_prediction": beside_of(table), "run_key": run.key(), "run_dir": result.run_dir, "train_seconds": train_s,
               "history": [list(row) for row in result.history], "seconds": clock()}
    folder = _cli.save(cfg, results, {"comparison.md": markdown})
    print(f"wrote {folder}/ (comparison.md, config.json, results.json; training run in {result.run_dir}) "
          f"in {results['seconds']:.1f} s")
    return results


if __name__ == "__main__":
    sys.exit(_cli.run(main, Config))
