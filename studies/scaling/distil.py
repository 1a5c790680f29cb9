"""Representation or optimisation: Model A started from a theory policy in the scaling study's cell
(studies/scaling/distil.md).

Command: ``PYTHONPATH=. python studies/scaling/distil.py [--teacher=path|keyed] [--phase=start|finetune]
[--budgets=4,5,6] [--seeds=0,1,2] [--out=DIR] [--table[=finetune]]``.

For every budget and seed, the study's Model A configuration (tree depth 7, alpha 0.6, N 64, MLPs 2 x 64, the
recipe: 5000 x budget steps) with ``init_policy`` the teacher (``bridges.training.distil``; ``path``, the default, or
``keyed``: A's prediction policy, the greedy adaptive keyed search; its cells are named ``keyed-B<b>-s<seed>``,
path's ``B<b>-s<seed>``):

- ``start``: the distillation alone (``train(cfg, stop_at=0)``: the distilled model is checkpointed, its
  held-out loss is the run's step-0 row), its key fidelity per layer, and ``fv audit`` of the distilled model:
  the loss its own readings allow under the exact Bayes decoder, beside the teacher's (``path`` with the exact
  Bayes decoder, audited the same way; ``keyed``: the search's own loss on its trace, ``teacher_loss``) and
  beside the distilled model's own readout;
- ``finetune``: the same runs trained on with the recipe from the distilled start (resumed from the step-0
  checkpoint), the loss after fine-tuning beside from-scratch A (the study's runs) and A's prediction.

Runs live in ``DIR/<key>/`` (default studies/scaling/distil/train, git-ignored) and resume after interruption;
every finished piece is added to studies/scaling/distil.json at once (atomically). ``--table`` prints the table
of distil.md from distil.json without computing anything.
"""
import json
import os
import statistics
import sys

from bridges.analysis.audit import audit_model, load_run
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.distil import TEACHERS, teacher_model
from bridges.runs.store import read_json, update_json
from bridges.training.train import train
from bridges.runs.options import script_options

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository: the recorded --out is relative to it
OUT = os.path.join(HERE, "distil.json")
with open(os.path.join(HERE, "scaling.json")) as _f:
    STUDY = json.load(_f)
DATA = DataConfig(prior="tree", depth=STUDY["config"]["depth"], alpha=STUDY["config"]["alpha"],
                  n_tokens=STUDY["config"]["n_tokens"], s2=STUDY["config"]["s2"])
AUDIT_SAMPLES = 1000


def config(budget: int, seed: int, out: str, teacher: str = "path") -> RunConfig:
    return RunConfig(DATA, ModelConfig("A", budget, mlp_width=64, hidden_layers=2),
                     TrainConfig(seed=seed, out=out, init_policy=teacher))


def cell(budget: int, seed: int, teacher: str = "path") -> str:
    """The name of a cell in distil.json: path's keep their first names."""
    return f"B{budget}-s{seed}" if teacher == "path" else f"{teacher}-B{budget}-s{seed}"


def theory(budget: int, name: str) -> dict:
    (row,) = [r for r in STUDY["theory"][str(budget)] if r["name"] == name]
    return {"name": row["name"], "value": row["value"], "stderr": row["stderr"]}


def prediction(budget: int) -> dict:
    (row,) = [r for r in STUDY["theory"][str(budget)] if r["role"] == "prediction" and "A" in r["models"]]
    return theory(budget, row["name"])


def study_losses(budget: int) -> list:
    return [r["loss"] for r in STUDY["runs"] if r["model"] == "A" and r["budget"] == budget]


def _est(e) -> dict:
    return {"value": e.value, "stderr": e.stderr}


def load() -> dict:
    return read_json(OUT, {})


def save(name: str, entry: dict) -> None:
    """Merge one entry into distil.json (under a lock: one process of this script per core may share it)."""
    update_json(OUT, lambda cells: cells.__setitem__(name, {**cells.get(name, {}), **entry}))


def teacher_audit(budget: int) -> None:
    name = f"teacher-B{budget}"
    if name in load():
        return
    a = audit_model(teacher_model(DATA, budget), DATA, samples=AUDIT_SAMPLES, name="path")
    save(name, {"budget": budget, "bayes_on_readings": _est(a.bayes_on_readings), "path_row": theory(budget, "path")})
    print(f"teacher path B{budget}: Bayes on its readings {a.bayes_on_readings.value:.4f} "
          f"(theory row {theory(budget, 'path')['value']:.4f})", flush=True)


def start(budget: int, seed: int, out: str, teacher: str = "path") -> None:
    name = cell(budget, seed, teacher)
    if "distilled" in load().get(name, {}):
        return
    cfg = config(budget, seed, out, teacher)
    result = train(cfg, progress=False, stop_at=0)
    with open(os.path.join(out, cfg.key(), "distil.json")) as f:
        distilled = json.load(f)
    a = audit_model(result.model, DATA, samples=AUDIT_SAMPLES, key=cfg.key(), name=f"A distilled from {teacher}")
    extra = {} if "teacher_loss" not in distilled else {"teacher_loss": distilled["teacher_loss"]}
    save(name, {"budget": budget, "seed": seed, "key": cfg.key(), "command": "fv train " + " ".join(
                    config(budget, seed, os.path.relpath(out, ROOT), teacher).to_argv()),
                "distilled": {"loss": result.history[0][2], "stderr": result.history[0][3],
                              "fidelity_forced": distilled["fidelity_forced"],
                              "fidelity_own": distilled["fidelity_own"], "seconds": distilled["seconds"],
                              "audit_loss": _est(a.loss), "bayes_on_readings": _est(a.bayes_on_readings),
                              "decoder_gap": _est(a.decoder_gap), **extra},
                "prediction": prediction(budget), "path_row": theory(budget, "path"),
                "study": study_losses(budget)})
    print(f"{name}: distilled {result.history[0][2]:.4f}, Bayes on its readings {a.bayes_on_readings.value:.4f}; "
          f"fidelity {', '.join(f'{f:.3g}' for f in distilled['fidelity_own'])}", flush=True)


def finetune(budget: int, seed: int, out: str, teacher: str = "path") -> None:
    """Train on from the distilled start with the recipe, then audit the fine-tuned model (the loss its own
    readings allow under the exact Bayes decoder), each saved as soon as it is done."""
    name = cell(budget, seed, teacher)
    cfg = config(budget, seed, out, teacher)
    if "finetuned" not in load().get(name, {}):
        result = train(cfg, progress=False)
        save(name, {"finetuned": {"loss": result.loss, "stderr": result.stderr, "steps": result.steps,
                                  "train_seconds": result.train_seconds,
                                  "history": [[h[0], h[2]] for h in result.history]}})
        pred = prediction(budget)["value"]
        print(f"{name}: fine-tuned {result.loss:.4f} = {result.loss / pred:.2f} x prediction", flush=True)
    tuned = load()[name]["finetuned"]
    if "audit" not in tuned:
        a = audit_model(load_run(os.path.join(out, cfg.key())).model, DATA, samples=AUDIT_SAMPLES, key=cfg.key(),
                        name=f"A fine-tuned from {teacher}")
        save(name, {"finetuned": {**tuned, "audit": {"loss": _est(a.loss), "bayes_on_readings": _est(a.bayes_on_readings),
                                                     "samples": AUDIT_SAMPLES}}})
        print(f"{name}: fine-tuned, Bayes on its readings {a.bayes_on_readings.value:.4f}", flush=True)


def finetune_table(teacher_name: str = "path") -> str:
    """The fine-tuning table of distil.md: the start and the end, each by its own readout and by the audit, one
    row a seed, then the seed mean (± SD over seeds) of every budget with more than one seed."""
    cells = load()
    lines = ["| budget | seed | distilled: own readout / Bayes on its readings | fine-tuned: own readout | fine-tuned: "
             "Bayes on its readings | from scratch (study mean) | path (Bayes) | prediction | fine-tuned / prediction |",
             "|---|---|---|---|---|---|---|---|---|"]
    done = {}
    for name, e in sorted(cells.items()):
        if name.startswith("teacher") or name != cell(e["budget"], e["seed"], teacher_name) or "finetuned" not in e:
            continue
        d, f = e["distilled"], e["finetuned"]
        bayes = f.get("audit", {}).get("bayes_on_readings")
        audit = "—" if bayes is None else f"{bayes['value']:.4f} ± {bayes['stderr']:.4f}"
        path = cells.get(f"teacher-B{e['budget']}", {}).get("bayes_on_readings", e["path_row"])
        done.setdefault(e["budget"], []).append((f["loss"], e["prediction"]["value"],
                                                 None if bayes is None else bayes["value"]))
        lines.append(
            f"| {e['budget']} | {e['seed']} | {d['loss']:.4f} / {d['bayes_on_readings']['value']:.4f} | {f['loss']:.4f} ± "
            f"{f['stderr']:.4f} | {audit} | {sum(e['study']) / len(e['study']):.4f} | {path['value']:.4f} | "
            f"{e['prediction']['value']:.4f} | {f['loss'] / e['prediction']['value']:.2f} |")
    for budget, runs in sorted(done.items()):
        if len(runs) > 1:
            losses = [loss for loss, _, _ in runs]
            mean, sd, pred = statistics.mean(losses), statistics.stdev(losses), runs[0][1]
            audits = [b for _, _, b in runs if b is not None]
            allowed = (f"{statistics.mean(audits):.4f} ({statistics.mean(audits) / pred:.2f}x)"
                       if len(audits) == len(runs) else "")
            lines.append(f"| {budget} | mean of {len(runs)} | | **{mean:.4f}** (SD {sd:.4f}) | {allowed} | | | "
                         f"{pred:.4f} | **{mean / pred:.2f}** |")
    return "\n".join(lines)


def table(teacher_name: str = "path") -> str:
    cells = load()
    lines = ["| budget | seed | key fidelity by layer (own workspaces) | distilled | Bayes on its readings | "
             f"{teacher_name} (Bayes) | fine-tuned | from scratch (study) | prediction | fine-tuned / prediction |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, e in sorted(cells.items()):
        if name.startswith("teacher") or name != cell(e["budget"], e["seed"], teacher_name):
            continue
        d, f = e["distilled"], e.get("finetuned")
        teacher = d.get("teacher_loss") or cells.get(f"teacher-B{e['budget']}", {}).get("bayes_on_readings")
        study = e["study"]
        ratio = "—" if f is None else f"{f['loss'] / e['prediction']['value']:.2f}"
        tuned = "(to run)" if f is None else f"{f['loss']:.4f} ± {f['stderr']:.4f}"
        path = "—" if teacher is None else f"{teacher['value']:.4f}"
        bayes = d["bayes_on_readings"]
        lines.append(
            f"| {e['budget']} | {e['seed']} | {', '.join(f'{x:.2g}' for x in d['fidelity_own'])} | "
            f"{d['loss']:.4f} | {bayes['value']:.4f} ± {bayes['stderr']:.4f} | {path} | {tuned} | "
            f"{sum(study) / len(study):.4f} | {e['prediction']['value']:.4f} | {ratio} |")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    opts = script_options(argv, {"phase", "budgets", "seeds", "out", "table", "teacher"})
    teacher = opts.get("teacher", "path")
    if teacher not in TEACHERS:
        print(f"--teacher must be one of {', '.join(TEACHERS)}, got {teacher!r}", file=sys.stderr)
        return 2
    if "table" in opts:
        print(finetune_table(teacher) if opts["table"] == "finetune" else table(teacher))
        return 0
    out = opts.get("out", os.path.join(HERE, "distil", "train"))
    os.makedirs(out, exist_ok=True)
    budgets = [int(b) for b in opts.get("budgets", "4,5,6").split(",")]
    seeds = [int(s) for s in opts.get("seeds", "0,1,2").split(",")]
    phases = [opts["phase"]] if "phase" in opts else ["start", "finetune"]
    for phase in phases:
        for budget in budgets:
            if phase == "start" and teacher == "path":
                teacher_audit(budget)
            for seed in seeds:
                (start if phase == "start" else finetune)(budget, seed, out, teacher)
    return 0


if __name__ == "__main__":
    from bridges.runs.options import run_script

    sys.exit(run_script(main, sys.argv[1:], "distil.py"))
