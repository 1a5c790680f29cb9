"""Causal evidence where the claim is made (issue 29, item 5): key patching and workspace probes of Model A at
the scaling study's largest budget, beside the same tables for theory policies (studies/scaling/causal.md).

Command: ``PYTHONPATH=. python studies/scaling/causal.py [--budget=6] [--contexts=2048] [--samples=2000]
[--keyed-samples=400] [--qk-runs=DIR] [--only=theory|keyed|models] [--table]``.

Pieces, each written to studies/scaling/causal.json as soon as it is done (atomically; a rerun skips finished
pieces):

- ``model:A`` -- Model A trained from scratch by the study's own command (its row of scaling.json, seed 0),
  its run folder under studies/scaling/study/train (git-ignored: rerun the ``command`` to rebuild it);
- ``model:A-path-finetuned`` -- Model A started from the ``path`` policy and fine-tuned with the recipe
  (studies/scaling/distil.py, seed 0), where that run has finished;
- ``theory:path``, ``theory:greedy_dense`` -- the theory's tables for ``path`` (the coordinate policy A's keys
  can express) and ``greedy_dense`` (the adaptive unit-class policy of the strategy registry), under the tokens
  channel of the study's cell.

- ``model:qk A`` -- Model A with the query-key router (THEORY.md section 7b) trained by its command in
  studies/scaling/qk.json (budget 6, seed 0), its run folder under ``--qk-runs`` (default studies/scaling/qk/train).
- ``theory:best_adaptive_keyed`` -- A's prediction policy: the probes of the search's own readings
  (``bridges.analysis.probes.prediction_probes``, ``fvnum.keys.adaptive.adaptive_keyed_trace``) and its full
  key-patching table (``fvnum.keyed_patching_table``: every layer and divergence depth, ``--keyed-samples``
  contexts, default 400; the per-sample search re-run after each patch, about 25 minutes on 2 idle cores).

Every table is ``key_patching_table`` / ``fvnum.patching_table`` (loss with layer ``l``'s keys replaced by a donor
that diverges from the target at depth ``j``) and ``workspace_probes`` / ``theory_probes`` (linear probes of the
leaf's sign prefix from the state after each layer, with a shuffled control).
"""
import json
import os
import sys

import numpy as np

from bridges.analysis.audit import load_run
from bridges.runs.config import DataConfig
from bridges.patching import key_patching_table, theory_patching_table, table_from_dict
from bridges.analysis.probes import prediction_probes, theory_probes, workspace_probes
from bridges.runs.store import update_json
from bridges.runs.options import script_options

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "causal.json")
with open(os.path.join(HERE, "scaling.json")) as _f:
    STUDY = json.load(_f)
DATA = DataConfig(prior="tree", depth=STUDY["config"]["depth"], alpha=STUDY["config"]["alpha"],
                  n_tokens=STUDY["config"]["n_tokens"], s2=STUDY["config"]["s2"])
THEORY = ("path", "greedy_dense")


def load() -> dict:
    from bridges.runs.options import study_json

    return study_json(OUT, "causal checks")


def save(name: str, entry: dict) -> None:
    update_json(OUT, lambda cells: cells.__setitem__(name, entry))


def study_row(budget: int) -> dict:
    (row,) = [r for r in STUDY["runs"] if r["model"] == "A" and r["budget"] == budget and r["seed"] == 0]
    return row


def qk_folder(budget: int, runs: str) -> tuple[str, str]:
    """The run folder and command of qk A (studies/scaling/qk.py) at ``budget``, seed 0, in ``runs``."""
    sys.path.insert(0, HERE)
    import qk

    run = qk.run_of("qk", budget, 0, 1, runs)
    return qk.folder_of(run), qk.shown_command(run)


def model_folders(budget: int, qk_runs: str | None = None) -> dict:
    """The run folders of the models to probe, by name (those that exist and have finished)."""
    row = study_row(budget)
    folders = {"A": (os.path.join(HERE, "study", "train", row["key"]), row["command"]),
               "qk A": qk_folder(budget, qk_runs or os.path.join(HERE, "qk", "train"))}
    distil = json.load(open(os.path.join(HERE, "distil.json"))) if os.path.exists(os.path.join(HERE, "distil.json")) else {}
    cell = distil.get(f"B{budget}-s0", {})
    if "finetuned" in cell:
        folders["A-path-finetuned"] = (os.path.join(HERE, "distil", "train", cell["key"]), cell["command"])
    return folders


def model_piece(name: str, folder: str, command: str, contexts: int) -> None:
    if f"model:{name}" in load():
        return
    if not os.path.exists(os.path.join(folder, "result.json")):
        print(f"model {name}: no finished run at {folder} (run: {command})", flush=True)
        return
    result = load_run(folder)
    table = key_patching_table(result.model, DATA, n_contexts=contexts, seed=0)
    probes = workspace_probes(result.model, DATA, n_contexts=2 * contexts, seed=0)
    save(f"model:{name}", {"command": command, "key": os.path.basename(folder), "loss": result.loss,
                           "patching": table.to_dict(), "probes": probes.to_dict()})
    print(f"model {name}: unpatched {table.unpatched.value:.4f}", flush=True)


def theory_piece(strategy: str, budget: int, samples: int) -> None:
    if f"theory:{strategy}" in load():
        return
    table = theory_patching_table(DATA, budget, samples=samples, seed=0, strategy=strategy)
    probes = theory_probes(DATA, budget, strategy, samples=2 * samples, seed=0)
    save(f"theory:{strategy}", {"patching": table.to_dict(), "probes": probes.to_dict(), "samples": samples})
    print(f"theory {strategy}: unpatched {table.unpatched.value:.4f}", flush=True)


def prediction_piece(budget: int, samples: int) -> None:
    """The probes of A's prediction policy on ``2 x samples`` samples of its search (as many as the theory probes):
    of its readings (``probes``, A's kind of state) and of its posterior mean (``probes_posterior``)."""
    name = "theory:best_adaptive_keyed"
    entry = load().get(name, {})
    if "probes" not in entry:
        probes = prediction_probes(DATA, budget, samples=2 * samples, seed=0)
        (row,) = [r for r in STUDY["theory"][str(budget)] if r["name"] == "best_adaptive_keyed"]
        entry = {"probes": probes.to_dict(), "samples": 2 * samples,
                 "loss": {"value": row["value"], "stderr": row["stderr"]}}
        save(name, entry)
        print(f"theory best_adaptive_keyed: probes {[round(p[0], 3) for p in probes.prefix]}", flush=True)
    if "probes_posterior" not in entry:
        probes = prediction_probes(DATA, budget, samples=2 * samples, seed=0, state="posterior")
        save(name, {**entry, "probes_posterior": probes.to_dict()})
        print(f"theory best_adaptive_keyed: posterior probes {[round(p[0], 3) for p in probes.prefix]}", flush=True)


def keyed_piece(budget: int, samples: int) -> None:
    """The full key-patching table of A's prediction policy (every layer and divergence depth) on ``samples``
    contexts, added to its entry."""
    from fvnum import keyed_patching_table, tokens
    from fvsym.priors import TreePrior

    name = "theory:best_adaptive_keyed"
    entry = load().get(name, {})
    if "patching" in entry:
        return
    prior = TreePrior(DATA.depth, str(DATA.alpha))
    table = keyed_patching_table(prior, budget, tokens(DATA.n_tokens, DATA.s2, keys="weighted"), samples=samples,
                                 seed=0)
    save(name, {**load().get(name, {}), "patching": table.to_dict(), "patching_samples": samples})
    print(f"theory best_adaptive_keyed: unpatched {table.unpatched.value:.4f} on {samples} contexts", flush=True)


def effects(entry: dict) -> np.ndarray:
    """The effect of the patch, loss - unpatched on the same column, (layers, depths)."""
    t = table_from_dict(entry["patching"])
    if t.effect is not None:
        return t.effect
    return t.loss - t.unpatched_by_depth[None, :]


def table() -> str:
    cells = load()
    out = []
    for name, entry in cells.items():
        if "patching" not in entry:  # probes only (A's prediction policy: a per-sample search, no keys to patch)
            loss = entry["loss"]
            out.append(f"### {name} (its loss: the prediction row, {loss['value']:.4f}; probes only)\n")
            post = entry.get("probes_posterior", {}).get("prefix")
            out.append("| layer | probe of its readings: prefix s_1..s_l (chance) | shuffled control | "
                       "probe of its posterior mean |")
            out.append("|---|---|---|---|")
            for a, ((acc, se, chance), (c_acc, _, _)) in enumerate(zip(entry["probes"]["prefix"],
                                                                       entry["probes"]["control"]), start=1):
                p = "—" if post is None else f"{post[a - 1][0]:.3f} ± {post[a - 1][1]:.3f}"
                out.append(f"| {a} | {acc:.3f} ± {se:.3f} ({chance:.3f}) | {c_acc:.3f} | {p} |")
            out.append("")
            continue
        t = table_from_dict(entry["patching"])
        eff = effects(entry)
        out.append(f"### {name} (unpatched {t.unpatched.value:.4f} ± {t.unpatched.stderr:.4f})\n")
        post = entry.get("probes_posterior", {}).get("prefix")  # A's prediction policy: probes of its posterior
        out.append("| layer | " + " | ".join(f"j={j}" for j in t.depths) + " | probe: prefix s_1..s_l (chance) |"
                   + (" probe of its posterior mean |" if post else ""))
        out.append("|---|" + "---|" * len(t.depths) + "---|" + ("---|" if post else ""))
        for a, layer in enumerate(t.layers):
            acc, se, chance = entry["probes"]["prefix"][a]
            out.append(f"| {layer} | " + " | ".join(f"{e:+.3f}" for e in eff[a])
                       + f" | {acc:.3f} ± {se:.3f} ({chance:.3f}) |"
                       + (f" {post[a][0]:.3f} ± {post[a][1]:.3f} |" if post else ""))
        out.append("")
    return "\n".join(out)


def main(argv: list[str]) -> int:
    opts = script_options(argv, {"budget", "contexts", "samples", "table", "keyed-samples", "qk-runs", "only"})
    if "table" in opts:
        print(table())
        return 0
    budgets = {str(r["budget"]) for r in STUDY["runs"] if r["model"] == "A"}
    if opts.get("budget", max(budgets)) not in budgets or opts.get("only") not in (None, "theory", "keyed", "models"):
        raise SystemExit(f"--budget={opts.get('budget', '')[:20]} --only={opts.get('only', '')[:20]}: give a budget of "
                         f"the study ({', '.join(sorted(budgets))}) and one of theory, keyed, models")
    load()  # a damaged causal.json is refused before anything is computed
    budget = int(opts.get("budget", max(budgets)))
    contexts, samples = int(opts.get("contexts", 2048)), int(opts.get("samples", 2000))
    only = opts.get("only")  # "keyed" or "models": one kind of piece
    if only in (None, "theory"):
        for strategy in THEORY:
            theory_piece(strategy, budget, samples)
        prediction_piece(budget, samples)
    if only in (None, "keyed"):
        keyed_piece(budget, int(opts.get("keyed-samples", 400)))
    if only in (None, "models"):
        for name, (folder, command) in model_folders(budget, opts.get("qk-runs")).items():
            model_piece(name, folder, command, contexts)
    return 0


if __name__ == "__main__":
    from bridges.runs.options import run_script

    sys.exit(run_script(main, sys.argv[1:], "causal.py"))
