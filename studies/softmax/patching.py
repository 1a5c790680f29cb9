"""Key patching of the softmax models and their linear twins beside the theory's tables (issue 31, item 3;
docs/softmax.md, section "Key patching").

Command: ``PYTHONPATH=. python studies/softmax/patching.py [--train-dir=studies/softmax/train] [--budgets=2,3]
[--contexts=2048] [--samples=2000] [--keyed-samples=300] [--table]``.

The cell of studies/softmax/study.py (tree depth 4, alpha 0.6, N 64, s2 0.01), seed 0. Pieces, each written to
studies/softmax/patching.json as soon as it is done (atomically; a rerun skips finished pieces):

- ``model:<run>`` for Models A and B, linear and softmax attention, at every budget: ``key_patching_table`` (loss
  with layer ``l``'s keys, or a softmax layer's scores, replaced by those of a donor that diverges from the
  target at depth ``j``; ``contexts`` target contexts, paired effects). The runs are those of
  studies/softmax/study.json (``<model>-<attention>-K4-B<budget>-s0``). Each is read from ``--train-dir/<key>``,
  else from studies/softmax/train/<key>; where neither holds a finished run, it is trained from the run's recorded
  ``command`` (into studies/softmax/train, the command's own ``--out``: minutes per run), so the script stays
  re-runnable on a clean clone. Nothing is ever written into ``--train-dir``.
- ``theory:path-B<b>``: ``fvnum.patching_table`` of the ``path`` policy (the coordinate policy A's keys can
  express; tokens channel, Bayes decoder; ``samples`` per divergence depth);
- ``theory:adaptive_keyed_<family>-B<b>`` for ``weighted`` and ``softmax``: A's prediction policies (the greedy
  keyed policies of ``fvnum.keys.adaptive``, the rows of docs/softmax.md) patched on real tokens
  (``fvnum.patching.keyed.keyed_patching_table``, ``keyed-samples`` target contexts). B's prediction, the best
  one-layer design, is not adaptive: no patch changes it (its table is 0 everywhere), so it has no piece.

``--table`` prints the tables of docs/softmax.md (effects ``loss - unpatched``) and the sign patterns.
"""
import json
import os
import shlex
import sys

import numpy as np

from bridges.runs.options import script_options
from bridges.runs.store import read_json, write_atomic

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(HERE, "patching.json")
STUDY = os.path.join(HERE, "study.json")
DEFAULT_TRAIN = os.path.join("studies", "softmax", "train")
DEPTH, SEED = 4, 0
FAMILIES = ("weighted", "softmax")
Z = 5.0  # a cell moves when its effect is more than Z paired standard errors from 0
LARGE = 0.1  # ... and, in the "large" pattern, at least this fraction of the table's largest effect
OPTIONS = {"train-dir", "budgets", "contexts", "samples", "keyed-samples", "table"}


def load() -> dict:
    return read_json(OUT, {})


def save(name: str, entry: dict) -> None:
    pieces = load()
    pieces[name] = entry
    write_atomic(OUT, json.dumps(pieces, indent=1, allow_nan=False) + "\n")


def data_config():
    from bridges.runs.config import DataConfig

    with open(STUDY) as f:
        cell = next(iter(json.load(f)["runs"].values()))["command"]
    argv = shlex.split(cell)
    value = {flag: argv[argv.index(flag) + 1] for flag in ("--alpha", "--tokens", "--s2")}
    return DataConfig(prior="tree", depth=DEPTH, alpha=float(value["--alpha"]), n_tokens=int(value["--tokens"]),
                      s2=float(value["--s2"]))


def run_folder(name: str, train_dir: str) -> tuple:
    """``(folder, command)`` of the study's run ``name``: found finished (its ``TrainResult`` read and checked,
    ``bridges.training.train.load_result``) in ``train_dir`` or in its command's ``--out`` (studies/softmax/train,
    relative to the repository root), or trained there (``bridges.training.train.train``) from its recorded command's
    configuration."""
    from bridges.studies.scaling import config_of_command
    from bridges.training.train import load_result, train

    with open(STUDY) as f:
        runs = json.load(f)["runs"]
    if name not in runs:
        raise SystemExit(f"{name}: not a run of {STUDY}")
    command = runs[name]["command"]
    config = config_of_command(command)
    key = config.key()
    if key != runs[name]["key"]:
        raise SystemExit(f"{name}: its command gives the key {key}, study.json records {runs[name]['key']}")
    out = os.path.join(ROOT, config.train.out)  # the recorded --out is relative to the repository root
    for base in (train_dir, out):
        path = os.path.join(base, key, "result.json")
        if os.path.exists(path):
            try:
                if load_result(path, config).finished:
                    return os.path.join(base, key), command
            except ValueError as exc:  # damaged or planted: not a finished run (train sets it aside in ``out``)
                print(f"{name}: {exc}", file=sys.stderr)
    print(f"{name}: no finished run in {train_dir}; training it ({command})", flush=True)
    train(config.replace(train=dict(out=out)), progress=False)
    return os.path.join(out, key), command


def model_piece(model: str, attention: str, budget: int, train_dir: str, contexts: int) -> None:
    from bridges.analysis.audit import load_run
    from bridges.patching import key_patching_table

    name = f"{model}-{attention}-K{DEPTH}-B{budget}-s{SEED}"
    if f"model:{name}" in load():
        return
    folder, command = run_folder(name, train_dir)
    result = load_run(folder)
    table = key_patching_table(result.model, data_config(), n_contexts=contexts, seed=SEED)
    save(f"model:{name}", {"model": model, "attention": attention, "budget": budget, "command": command,
                           "key": os.path.basename(folder), "loss": result.loss, "patching": table.to_dict()})
    print(f"model {name}: unpatched {table.unpatched.value:.4f}", flush=True)


def theory_piece(strategy: str, budget: int, samples: int, keyed_samples: int) -> None:
    from bridges.training.data import fv_prior
    from bridges.patching import theory_patching_table
    from fvnum.mc.channels import tokens
    from fvnum.patching.keyed import keyed_patching_table

    name = f"theory:{strategy}-B{budget}"
    if name in load():
        return
    data = data_config()
    if strategy == "path":
        table = theory_patching_table(data, budget, samples=samples, seed=SEED, strategy="path")
        n = samples
    else:
        family = strategy.removeprefix("adaptive_keyed_")
        table = keyed_patching_table(fv_prior(data), budget, tokens(data.n_tokens, data.s2, keys=family),
                                     samples=keyed_samples, seed=SEED)
        n = keyed_samples
    save(name, {"strategy": strategy, "budget": budget, "samples": n, "patching": table.to_dict()})
    print(f"{name}: unpatched {table.unpatched.value:.4f}", flush=True)


# --- the tables ------------------------------------------------------------------------------------
def effects(entry: dict) -> tuple:
    """(effect, its standard error), (layers, depths): paired where the table has them, else against the
    column's own unpatched loss."""
    from bridges.patching import table_from_dict

    t = table_from_dict(entry["patching"])
    if t.effect is not None:
        return t.effect, t.effect_stderr
    se = np.sqrt(t.stderr**2 + t.unpatched_stderr_by_depth[None, :] ** 2)
    return t.loss - t.unpatched_by_depth[None, :], se


def pattern(entry: dict, large: bool = False) -> list:
    """Per layer, per divergence depth: ``+`` (the patch raises the loss by more than Z standard errors),
    ``-`` (lowers it), ``0`` (neither); ``large``: a sign only where the effect is also at least LARGE times the
    table's largest (2048 contexts resolve effects of 0.01, where the largest are about 1)."""
    eff, se = effects(entry)
    floor = LARGE * np.abs(eff).max() if large else 0.0
    return ["".join("+" if e > max(Z * s, floor) else "-" if e < -max(Z * s, floor) else "0" for e, s in zip(er, sr))
            for er, sr in zip(eff, se)]


def _block(name: str, entry: dict) -> list:
    from bridges.patching import table_from_dict

    t = table_from_dict(entry["patching"])
    eff, se = effects(entry)
    out = [f"**{name}** (unpatched {t.unpatched.value:.4f} ± {t.unpatched.stderr:.4f}; {t.n} "
           f"{'contexts' if name.startswith('model') else 'samples'}; pattern {' / '.join(pattern(entry))}, large "
           f"{' / '.join(pattern(entry, True))})", "",
           "| layer | " + " | ".join(f"j={j}" for j in t.depths) + " |", "|---|" + "---|" * len(t.depths)]
    out += [f"| {layer} | " + " | ".join(f"{e:+.3f} ± {s:.3f}" for e, s in zip(eff[a], se[a])) + " |"
            for a, layer in enumerate(t.layers)]
    return out + [""]


def table(budgets) -> str:
    pieces = load()
    out = []
    for b in budgets:
        out.append(f"### Budget {b}\n")
        names = [f"theory:{s}-B{b}" for s in ("path", *(f"adaptive_keyed_{f}" for f in FAMILIES))]
        names += [f"model:{m}-{a}-K{DEPTH}-B{b}-s{SEED}" for m in "AB" for a in ("linear", "softmax")]
        for name in names:
            if name in pieces:
                out += _block(name, pieces[name])
        out.append(same_patterns(pieces, b))
        out.append("")
    return "\n".join(out)


def same_patterns(pieces: dict, budget: int) -> str:
    """Which theory table each trained A's sign pattern equals, cell for cell."""
    theories = {s: pieces.get(f"theory:{s}-B{budget}") for s in ("path", *(f"adaptive_keyed_{f}" for f in FAMILIES))}
    lines = []
    for attention in ("linear", "softmax"):
        entry = pieces.get(f"model:A-{attention}-K{DEPTH}-B{budget}-s{SEED}")
        if entry is None:
            continue
        for large in (False, True):
            mine = pattern(entry, large)
            same = [s for s, t in theories.items() if t is not None and pattern(t, large) == mine]

            def agree(t):
                cells = list(zip("".join(mine), "".join(pattern(t, large))))
                return f"{sum(a == b for a, b in cells)} of {len(cells)} cells agree"

            lines.append(f"- A {attention}, budget {budget}, {'large' if large else 'significant'} effects: "
                         f"{' / '.join(mine)}; the same as {', '.join(same) if same else 'no theory table'}"
                         + "".join(f"; {s} {' / '.join(pattern(t, large))} ({agree(t)})" for s, t in theories.items()
                                   if t is not None and s not in same))
    return "\n".join(lines)


# --- options ---------------------------------------------------------------------------------------
def _fail(message: str):
    print(message, file=sys.stderr)
    raise SystemExit(2)


def _count(opts: dict, name: str, default: int, low: int) -> int:
    text = opts.get(name, str(default))
    try:
        value = int(text)
    except ValueError:
        _fail(f"--{name} must be an integer >= {low}, got {text!r}")
    if value < low:
        _fail(f"--{name} must be an integer >= {low}, got {text!r}")
    return value


def options(argv: list) -> dict:
    """The options, checked: one line on stderr naming the bad value and exit code 2."""
    opts = script_options(argv, OPTIONS)
    text = opts.get("budgets", "2,3")
    try:
        budgets = sorted({int(b) for b in text.split(",")})
    except ValueError:
        budgets = []
    if not budgets or not all(1 <= b <= DEPTH for b in budgets):
        _fail(f"--budgets must be budgets in 1..{DEPTH} separated by commas, got {text!r}")
    train_dir = opts.get("train-dir", os.path.join(ROOT, DEFAULT_TRAIN))
    if train_dir in ("", "1"):
        _fail(f"--train-dir needs a folder, got {opts.get('train-dir')!r}")
    if os.path.exists(train_dir) and not os.path.isdir(train_dir):
        _fail(f"--train-dir {train_dir!r} is not a folder")
    return {"budgets": budgets, "train_dir": train_dir, "table": "table" in opts,
            "contexts": _count(opts, "contexts", 2048, 2), "samples": _count(opts, "samples", 2000, 2),
            "keyed_samples": _count(opts, "keyed-samples", 300, 2)}


def main(argv: list) -> int:
    opts = options(argv)
    if opts["table"]:
        print(table(opts["budgets"]))
        return 0
    import torch

    torch.set_num_threads(1)
    for b in opts["budgets"]:
        for model in "AB":
            for attention in ("linear", "softmax"):
                model_piece(model, attention, b, opts["train_dir"], opts["contexts"])
        theory_piece("path", b, opts["samples"], opts["keyed_samples"])
    for b in opts["budgets"]:
        for family in FAMILIES:
            theory_piece(f"adaptive_keyed_{family}", b, opts["samples"], opts["keyed_samples"])
    return 0


if __name__ == "__main__":
    from bridges.runs.options import run_script

    sys.exit(run_script(main, sys.argv[1:], "patching.py"))
