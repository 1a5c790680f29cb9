"""Key patching: the theory's (layer, divergence depth) table beside the same experiment on models
(THEORY.md section 8; ``fvnum.patching_table``, ``bridges.patching``, ``bridges.models.taps.patch``).

    python examples/05_key_patching.py                          # theory, hand-built path model, tiny Model A
    python examples/05_key_patching.py --models=path            # no training: a few seconds
    python examples/05_key_patching.py --steps=3000 --mlp_width=64  # a better trained Model A

A target context (leaf ``s``) runs with the keys of layer ``l`` replaced by those its donor (leaf ``s'``,
same tokens ``x_i``, label noise and query; ``s'`` first differs from ``s`` at depth ``j``) computes at
layer ``l``. Theory (the ``path`` strategy): harmless for ``l <= j``, costly for ``l > j``.

Models: ``path`` is Model A built by hand: its keys follow the path policy exactly and its readout is the
theory's Bayes decoder (``bridges.patching.path_bayes_decoder``), so its table must equal the theory's
within Monte Carlo error (the example reports the largest ``|z|``), and at ``l <= j`` the donor's keys are
the target's own (unless one of the two decodes a sign differently, which is rare): no effect.
``trained`` is a tiny Model A trained here (400 steps, 10-20 s); it need not route like the theory.
20-35 s in all on the defaults, a few seconds with ``--models=path``.
Outputs in ``runs/examples/05_key_patching``: ``config.json``, ``results.json``, ``patching.png``, and the
training run under ``train/``.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import _cli
import numpy as np

from bridges.studies.figures import patching_effects as effects

MODELS = ("path", "trained")


@dataclass(frozen=True)
class Config:
    """Tree prior of ``depth`` and ``alpha``, ``n_tokens`` tokens, Model A with ``budget`` layers of width 1.
    ``models``: which model tables (``path``: hand-built, ``trained``: trained ``steps`` steps with MLP
    ``mlp_width``); ``n_contexts`` target contexts per model cell, ``theory_samples`` per theory column."""

    depth: int = 3
    budget: int = 3
    alpha: float = 0.5
    n_tokens: int = 128
    models: tuple[str, ...] = MODELS
    n_contexts: int = 2048
    theory_samples: int = 20_000
    steps: int = 400
    mlp_width: int = 32
    batch: int = 128
    lr: float = 3e-3
    seed: int = 0
    threads: int = 1
    progress: bool = True
    figure: bool = True
    out: str = _cli.default_out("05_key_patching")

    def __post_init__(self):
        unknown = [m for m in self.models if m not in MODELS]
        if unknown or not self.models:
            raise ValueError(f"unknown model {unknown[0] if unknown else '(none given)'!r}; "
                             f"choose from {', '.join(MODELS)}")
        if not 1 <= self.budget <= self.depth:
            raise ValueError(f"budget must lie in 1..depth={self.depth} (path reads one node per level), "
                             f"got {self.budget}")
        self.data_config()

    def data_config(self):
        from bridges.runs.config import DataConfig

        return DataConfig(prior="tree", depth=self.depth, alpha=self.alpha, n_tokens=self.n_tokens)

    def run_config(self):
        from bridges.runs.config import ModelConfig, RunConfig

        return RunConfig(
            self.data_config(), ModelConfig(model="A", budget=self.budget, mlp_width=self.mlp_width),
            _cli.train_config(self, evals=4, eval_batches=4),
        )


def build(name: str, cfg: Config):
    """The model ``name`` (``path`` or ``trained``) and a line describing it."""
    from bridges.models.networks import path_model
    from bridges.patching import path_bayes_decoder

    data = cfg.data_config()
    if name == "path":
        return path_model(data, cfg.budget, readout=path_bayes_decoder(data)), "hand-built path model"
    from bridges.training.train import train

    result = train(cfg.run_config(), progress=cfg.progress)
    return result.model, f"trained Model A, {result.steps} steps, held-out loss {result.loss:.4f} ± {result.stderr:.4f}"


def harmlessness(table: dict) -> dict:
    """Largest ``|effect|`` over the cells ``l <= j`` and smallest effect over ``l > j``."""
    e = effects(table)
    le = [abs(e[a, b]) for a, l in enumerate(table["layers"]) for b, j in enumerate(table["depths"]) if l <= j]
    gt = [e[a, b] for a, l in enumerate(table["layers"]) for b, j in enumerate(table["depths"]) if l > j]
    return {"max_abs_effect_l_le_j": max(le) if le else 0.0, "min_effect_l_gt_j": min(gt) if gt else None}


def z_scores(model: dict, theory: dict) -> np.ndarray:
    """``(model - theory) / combined stderr`` per cell (0 where both are exact and equal)."""
    diff = np.array(model["loss"]) - np.array(theory["loss"])
    se = np.sqrt(np.array(model["stderr"]) ** 2 + np.array(theory["stderr"]) ** 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(se > 0, diff / np.where(se > 0, se, 1), np.where(diff == 0, 0.0, np.inf))


def main(cfg: Config) -> dict:
    import torch

    from bridges.training.data import fv_prior
    from bridges.studies.figures import patching_png
    from bridges.patching import key_patching_table, theory_patching_table
    from fvnum import tau_of_tokens

    clock = _cli.Clock()
    _cli.prepare(cfg)
    data = cfg.data_config()
    tau = tau_of_tokens(fv_prior(data), data.n_tokens, data.s2)
    print(f"key patching, tree prior depth {cfg.depth}, alpha {cfg.alpha}, N {cfg.n_tokens} (tau = {tau:.4f}), "
          f"Model A with {cfg.budget} layers\n")
    theory = theory_patching_table(data, cfg.budget, samples=cfg.theory_samples, seed=cfg.seed).to_dict()
    print(f"## theory: path strategy ({cfg.theory_samples} samples per column)\n")
    print(_markdown(theory))
    results = {"tau": tau, "theory": theory, "theory_harmlessness": harmlessness(theory), "models": {}}
    threads = torch.get_num_threads()
    torch.set_num_threads(cfg.threads)
    try:
        for name in cfg.models:
            model, what = build(name, cfg)
            table = key_patching_table(model, data, n_contexts=cfg.n_contexts, seed=cfg.seed).to_dict()
            z = z_scores(table, theory)
            entry = {"what": what, "table": table, "harmlessness": harmlessness(table), "z_vs_theory": z.tolist(),
                     "max_abs_z_vs_theory": float(np.abs(z).max())}
            results["models"][name] = entry
            print(f"## {what} ({cfg.n_contexts} contexts, the same targets in every cell)\n")
            print(_markdown(table))
            print(f"largest |z| against the theory table: {entry['max_abs_z_vs_theory']:.2f}; "
                  f"largest |effect| at l <= j: {entry['harmlessness']['max_abs_effect_l_le_j']:.3g}\n")
    finally:
        torch.set_num_threads(threads)
    results["seconds"] = clock()
    panels = {"theory: path strategy": theory}
    panels.update({v["what"].split(",")[0]: v["table"] for v in results["models"].values()})
    files = {"patching.png": patching_png(panels)} if cfg.figure else {}
    folder = _cli.save(cfg, results, files)
    print(f"wrote {folder}/ ({', '.join([*files, 'config.json', 'results.json'])}) in {results['seconds']:.1f} s")
    return results


def _markdown(table: dict) -> str:
    """Loss per (layer, divergence depth) with standard errors, and the effect ``loss - unpatched``."""
    depths, layers = table["depths"], table["layers"]
    e = effects(table)
    head = "| layer \\ j | " + " | ".join(str(j) for j in depths) + " |"
    sep = "|---" * (len(depths) + 1) + "|"
    rows = [f"| {l} | " + " | ".join(f"{table['loss'][a][b]:.4f} ± {table['stderr'][a][b]:.1g} ({e[a, b]:+.4f})"
                                      for b in range(len(depths))) + " |" for a, l in enumerate(layers)]
    u = table["unpatched"]
    return "\n".join([head, sep, *rows, "", f"unpatched: {u['value']:.4g} ± {u['stderr']:.1g}; "
                      "in brackets: the increase over the unpatched loss on the same targets", ""])


if __name__ == "__main__":
    sys.exit(_cli.run(main, Config))
