"""Function vectors at the scaling study's cell: transplant and injection tables (docs/theory.md, section 9).

The cell: the tree prior of depth K = 7, alpha = 0.6, N = 64 tokens, s2 = 0.01, budgets 4 and 6. Sources of each
table: ``path`` (the theory's deep adaptive strategy, tokens channel), ``adaptive_keyed_weighted`` (the keyed
prediction policy that Model A is held to), and the trained models of the scaling study, ``mlp`` A, ``B`` and
``C`` (seed 0; their ``fv train`` commands are below, the same configurations as the committed runs of
studies/scaling/study), and ``qk`` A (Model A with the query-key router, ``--router qk``, the same recipe).

Usage::

    python studies/function_vectors/run.py --runs RUNS_DIR      # RUNS_DIR/<key>/ from the fv train commands below
    python studies/function_vectors/run.py --train --runs DIR   # train the missing runs first (hours on 2 cores)
    python studies/function_vectors/run.py --budgets 4 --only models   # one budget, one kind: merged into the JSON

Every table is a cell (``cells/<name>.json``, written atomically when it is done, with the SHA-256 checksum of its
payload and name, checked on read), so an interrupted run resumes; a finished cell is read without its run folder.
``function_vectors.json``, its page and the figures ``fig_function_vectors_B<budget>.png`` are assembled from the
cells and merged into the committed JSON: a table computed now replaces its committed one, and a source that can be
neither read nor computed now keeps its committed table (it is marked missing only where none was committed).
Bad input, or a damaged cell or JSON, is refused in one line with exit status 2 before anything is written.
Preregistered (written before the tables were computed): see ``PREREGISTERED`` below.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
FIGURE = HERE / "fig_function_vectors.png"  # one a budget: fig_function_vectors_B4.png
CELL = dict(depth=7, alpha=0.6, n_tokens=64, s2=0.01)
BUDGETS = (4, 6)
SEED = 0
N_CONTEXTS, MEAN_CONTEXTS = 2048, 8192  # trained models: targets, contexts behind the mean workspaces
THEORY_SAMPLES = 20_000  # path: samples per divergence depth (transplant), targets (injection)
KEYED_SAMPLES, KEYED_MEAN = 120, 1200  # the keyed policy searches its rows per context: seconds per context
RECIPES = {  # the scaling study's recipes (studies/scaling/study/cells: steps, lr and batch by model and budget)
    ("A", 4): (20000, 0.005, 128), ("A", 6): (30000, 0.005, 128),
    ("B", 4): (10000, 0.003, 256), ("B", 6): (15000, 0.003, 256),
    ("C", 4): (10000, 0.01, 256), ("C", 6): (15000, 0.01, 256),
}
TRAINED = (("mlp A", "A", "mlp"), ("qk A", "A", "qk"), ("B", "B", "mlp"), ("C", "C", "mlp"))  # source, model, router
PREREGISTERED = {
    "question": "does a transplanted or injected workspace steer the later layers into its subtree, as the theory "
                "says a deep adaptive model does?",
    "test": "injection at layer l with a prefix of divergence depth j <= l: the prefix accuracy (decoded leaf has "
            "the injected prefix) against chance 2^-l and against the unpatched own-prefix accuracy; transplant: "
            "the effect where j > l is ~0 (the donor's state is the target's own up to noise) and grows as j falls",
    "prediction": "path and the keyed policy follow the injected prefix (accuracy near 1); a deep trained model "
                  "(A) follows it at every layer l; one-layer models (B, C) have only the readout to steer: their "
                  "l = 1 row follows the prefix of the first level only",
    "power": "trained models: 2048 targets per cell, so an accuracy's standard error is at most 0.011 and an "
             "effect's paired SE ~0.01-0.03; path: 20000 samples; the keyed policy: 120 targets (SE <= 0.046)",
}


def config(model: str, budget: int, runs, router: str = "mlp"):
    """The ``RunConfig`` of a trained source: the scaling study's recipe of ``model`` at ``budget`` (seed 0), its run
    folder root ``runs``."""
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig

    steps, lr, batch = RECIPES[(model, budget)]
    return RunConfig(DataConfig(prior="tree", depth=CELL["depth"], alpha=CELL["alpha"], n_tokens=CELL["n_tokens"],
                                s2=CELL["s2"]),
                     ModelConfig(model, budget, mlp_width=64, hidden_layers=2, readout="decode", router=router),
                     TrainConfig(steps=steps, batch=batch, lr=lr, warmup=200, schedule="cosine", loss="theta",
                                 eval_every=200, eval_batches=16, seed=SEED, out=str(runs)))


def train_command(model: str, budget: int, runs, router: str = "mlp") -> str:
    """The ``fv train`` command of a trained source (``bridges.studies.scaling.command_of`` of its config)."""
    from bridges.studies.scaling import command_of

    return command_of(config(model, budget, runs, router))


def run_folder(model: str, budget: int, runs: Path, train: bool, router: str = "mlp") -> Path | None:
    """The run folder of a trained source where its run has finished (its ``TrainResult`` read and checked:
    ``bridges.training.train.load_result``), trained first (``train``: resumed where it stopped) with ``train``;
    None where it has not finished. A damaged result.json, without ``train``, is a StudyError."""
    from bridges.training.train import load_result, run_dir

    cfg = config(model, budget, runs, router)
    folder = run_dir(cfg)
    if train:
        from bridges.training.train import train as fit

        try:
            fit(cfg, progress=False)
        except ValueError as exc:
            raise StudyError(f"training {model} ({router} router) at budget {budget} stopped: {exc}; the tables "
                             "finished so far are kept") from None
    if not os.path.lexists(folder / "result.json"):
        return None
    try:
        return folder if load_result(folder / "result.json", cfg).finished else None
    except ValueError as exc:
        raise StudyError(f"{exc}; run with --train to set it aside and finish the run again") from None


class StudyError(Exception):
    """Bad input or a damaged file: one line on stderr, exit status 2, nothing written."""


def _shown(path: Path) -> str:
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def cell_path(name: str) -> Path:
    return HERE / "cells" / f"{name}.json"


def _cell_key(name: str) -> str:
    return f"function_vectors/{name}"  # a cell copied to another name fails its checksum


def read_cell(name: str) -> dict | None:
    """The table of cell ``name`` without its checksum, or None when it is not computed yet. A cell that is empty,
    not JSON, not a table or whose checksum (SHA-256 of its payload and name) does not match raises StudyError."""
    from bridges.runs.store import verify_checksum

    path = cell_path(name)
    if not path.exists():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        kind = "empty" if path.is_file() and path.stat().st_size == 0 else f"not JSON ({type(exc).__name__})"
        raise StudyError(f"{_shown(path)}: damaged cell, {kind}; delete it to recompute it") from None
    if not isinstance(record, dict) or not record or "checksum" not in record:
        raise StudyError(f"{_shown(path)}: damaged cell, not a checksummed table; delete it to recompute it")
    if not verify_checksum(record, _cell_key(name)):
        raise StudyError(f"{_shown(path)}: damaged cell, its checksum does not match its content; "
                         "delete it to recompute it")
    return {k: v for k, v in record.items() if k != "checksum"}


def write_cell(name: str, table: dict) -> Path:
    """``table`` with its checksum, written atomically (bridges.runs.store)."""
    from bridges.runs.store import with_checksum, write_json

    return write_json(cell_path(name), with_checksum(table, _cell_key(name)))


def cell(name: str, compute, log):
    done = read_cell(name)
    if done is not None:
        return done
    t = time.time()
    log(f"{name} ...")
    out = compute()
    out["seconds"] = round(time.time() - t, 1)
    write_cell(name, out)
    log(f"{name}: {out['seconds']} s")
    return read_cell(name)


def theory_tables(budget: int, log) -> dict:
    from fvnum import PatchSpec, tokens
    from fvnum.patching.state import injection_table, state_patching_table
    from fvsym.priors import TreePrior

    prior = TreePrior(CELL["depth"], CELL["alpha"])
    channel = tokens(CELL["n_tokens"], CELL["s2"])
    kw = dict(seed=SEED)
    out = {"transplant": {}, "injection": {}}
    for source, strategy, samples, mean in (("path", "path", THEORY_SAMPLES, THEORY_SAMPLES),
                                            ("keyed", "adaptive_keyed_weighted", KEYED_SAMPLES, KEYED_MEAN)):
        out["transplant"][source] = cell(f"transplant-{source}-B{budget}", lambda: state_patching_table(
            prior, strategy, budget, channel, samples=samples, **kw).to_dict(), log)
        out["injection"][source] = cell(f"injection-{source}-B{budget}", lambda: injection_table(
            prior, strategy, budget, channel, samples=samples, patch=PatchSpec(mean_samples=mean), **kw).to_dict(), log)
    return out


def model_tables(budget: int, runs: Path, train: bool, log) -> dict:
    """The trained sources' tables at ``budget``: from their cells where both are there (no run folder needed),
    else computed from the run folder; None for a source that can be neither read nor computed now."""
    out = {"transplant": {}, "injection": {}}
    for source, model, router in TRAINED:
        tag = source.replace(" ", "-")
        names = {kind: f"{kind}-{tag}-B{budget}" for kind in out}
        done = {kind: read_cell(name) for kind, name in names.items()}
        if all(t is not None for t in done.values()):
            for kind in out:
                out[kind][source] = done[kind]
            continue
        folder = run_folder(model, budget, runs, train, router)
        if folder is None:
            out["transplant"][source] = out["injection"][source] = None
            continue
        from bridges.analysis.audit import load_run
        from bridges.patching.state import model_injection_table, model_state_patching_table

        run = load_run(folder)

        def transplant(run=run):
            return {**model_state_patching_table(run.model, run.config.data, n_contexts=N_CONTEXTS, seed=SEED).to_dict(),
                    "run": run.config.key(), "trained_loss": run.loss}

        def injection(run=run):
            return {**model_injection_table(run.model, run.config.data, n_contexts=N_CONTEXTS, seed=SEED,
                                      mean_contexts=MEAN_CONTEXTS).to_dict(), "run": run.config.key()}

        out["transplant"][source] = cell(names["transplant"], transplant, log)
        out["injection"][source] = cell(names["injection"], injection, log)
    return out


def missing_note(source: str, budget: int) -> dict:
    model, router = {s: (m, r) for s, m, r in TRAINED}[source]
    command = train_command(model, budget, "RUNS", router)
    return {"missing": f"no finished run; train it with: {command}"}


def merge(doc: dict, computed: dict) -> dict:
    """``computed`` (budget -> kind -> source -> table, or None where a source could not be computed now) laid
    over the committed ``doc``: a table computed now replaces the committed one; a source not computable now
    keeps its committed table, and is marked missing only where none was committed. Nothing else is touched."""
    for name, kinds in computed.items():
        for kind, tables in kinds.items():
            old = doc.setdefault(kind, {}).setdefault(name, {})
            for source, table in tables.items():
                if table is not None:
                    old[source] = table
                elif not isinstance(old.get(source), dict) or "missing" in old[source]:
                    old[source] = missing_note(source, int(name[1:]))
    return doc


def figures(doc: dict, names) -> list[Path]:
    """One figure a budget (``bridges.studies.figures.function_vectors``: transplant effects, injection accuracy),
    from the tables of ``doc`` at the budgets ``names`` (``B4``)."""
    from bridges.studies.figures import function_vectors

    written = []
    for name in names:
        tables = {kind: {s: t for s, t in doc[kind][name].items() if isinstance(t, dict) and "missing" not in t}
                  for kind in ("transplant", "injection")}
        written += function_vectors(FIGURE.with_name(f"fig_function_vectors_{name}.png"), tables["transplant"],
                                    tables["injection"])
    return written


NAMES = {"path": "`path`", "keyed": "A's prediction policy (`adaptive_keyed_weighted`)", "mlp A": "trained A (MLP router)",
         "qk A": "trained A (query-key router)", "B": "trained B", "C": "trained C"}
# What the tables show, written after they were computed (the preregistration above was written before). The numbers
# are in the tables that page() writes under each claim, from function_vectors.json.
FINDINGS = {
    "transplant": "**Transplants: the theory's staircase, in the trained model too.** For `path` the effect is 0 (within "
                  "0.001, its Monte Carlo noise on the tokens channel) wherever the donor shares the target's first `l` "
                  "signs (`j > l`) and grows as `j` falls (the "
                  "staircase at the last layer is in each budget's first table below). Trained A has the same staircase, "
                  "with small effects just below the diagonal (`j = l + 1`) where `path` has none: its layer `l` already "
                  "carries some of level `l + 1`. A's prediction policy (the keyed policy) has a wider band below the "
                  "diagonal, as its rows mix levels; one-layer B and C carry several levels in their one layer.",
    "injection": "**Injections: a mean workspace steers `path` and trained A into its subtree; the keyed policy's does "
                 "not.** Injecting at layer `l` the mean state of the contexts whose leaf has a prefix of depth `j <= l` "
                 "makes `path` decode a leaf with that prefix every time. Trained A follows the injected prefix at every "
                 "layer at budget 4, and its later layers refine inside the injected subtree: the control's loss (its own "
                 "prefix's mean state injected) is far below what a foreign prefix costs. At budget 6 it follows it at "
                 "the first "
                 "layers only: deep in a trained A a mean state is no longer a state the later layers read as its "
                 "prefix. The keyed policy does not follow a mean state beyond layer 1, not even its own prefix's: its "
                 "rows are chosen per sample from the exact readings, and an average of readings is off the set it "
                 "searches on. B and C follow the first level's prefix but have no later layer to refine: their "
                 "control's loss is far above their unpatched loss.",
    "qk": "**qk A (the query-key router) routes differently, at both budgets.** Trained with A's recipe it ends above MLP "
          "A. Its first layer does not settle the first sign: a transplant at `l = 1` costs more for `j = 2` than for "
          "`j = 1`, and a first-level prefix injected at layer 1 is overruled by the later layers (accuracy below "
          "chance, 0.5), though its own prefix's mean state is followed. At the last layer its staircase is MLP A's. So "
          "its first reading is not path's first reading, and the sign of the first level is decided later. One seed a "
          "budget: a description, not a test.",
    "prereg": "**Against the preregistration.**",
    "runs": "**The trained runs** are seed 0 of the scaling study's recipes, retrained here, beside the study's committed "
            "seeds. A's bf16 key MLPs give other numbers on another CPU (the scaling report's note on reruns: its rerun "
            "of A at budget 6 gave 0.1196 too). qk A's budget-6 run is studies/scaling/qk.py's qk-B6-s0, the same key "
            "as its command in the JSON.",
}
VERDICTS = (  # source, predicted (the preregistration), found
    ("`path`", "follows the injected prefix (accuracy near 1)", "as predicted: 1.000 at every layer and budget"),
    ("A's prediction policy", "follows the injected prefix (accuracy near 1)",
     "not as predicted: far below 1 beyond layer 1 (its rows are searched per sample)"),
    ("trained A", "follows the prefix at every layer `l`", "as predicted at budget 4 and at the first layers of "
                                                           "budget 6; not at budget 6's deepest layers"),
    ("trained B and C", "the `l = 1` row follows the first level's prefix only", "as predicted"),
)


def _rows(doc: dict, kind: str, sources) -> list[tuple[str, str, dict]]:
    """(source, budget, table) for every computed table of ``kind``, budgets in order."""
    return [(s, name, doc[kind][name][s]) for name in sorted(doc[kind], key=lambda b: int(b[1:])) for s in sources
            if isinstance(doc[kind][name].get(s), dict) and "missing" not in doc[kind][name][s]]


def _num(v, f=".2f"):
    return "" if v is None or v != v else f"{v:{f}}"


def findings(doc: dict) -> list[str]:
    """The claims of FINDINGS, each with the table of its numbers (from ``doc``)."""
    md = [FINDINGS["transplant"], "", "Transplant effect just below the diagonal (`j = l + 1`), by layer `l` (paired, "
          "`loss - unpatched`; the standard errors are in the full tables below):", ""]
    rows = _rows(doc, "transplant", ("path", "keyed", "mlp A", "qk A"))
    top = max((len(t["layers"]) for _, _, t in rows), default=1)
    md += ["| source | budget | " + " | ".join(f"l={l}" for l in range(1, top)) + " |", "|---|---" + "|---" * (top - 1) + "|"]
    for s, name, t in rows:
        cells = [_num(t["effect"][a][a + 1]) if a + 1 < len(t["layers"]) else "" for a in range(top - 1)]
        md.append(f"| {NAMES[s]} | {name[1:]} | " + " | ".join(cells) + " |")
    md += ["", FINDINGS["injection"], "", "Injection at the first layer and at the last (prefix accuracy; min-max over "
           "the injected depths `j <= l` where they differ), and the control at the last layer (each target given its "
           "own prefix's mean state: accuracy and loss) beside the unpatched loss:", "",
           "| source | budget | l = 1 | last l | control: accuracy | control: loss | unpatched |",
           "|---|---|---|---|---|---|---|"]
    for s, name, t in _rows(doc, "injection", NAMES):
        acc = [[v for v in row if v is not None and v == v] for row in t["prefix_accuracy"]]
        span = [f"{min(a):.3f}" + (f"-{max(a):.3f}" if f"{max(a):.3f}" != f"{min(a):.3f}" else "") for a in (acc[0], acc[-1])]
        md.append(f"| {NAMES[s]} | {name[1:]} | {span[0]} | {span[1]} | {_num(t['own_injected_accuracy'][-1], '.3f')} | "
                  f"{_num(t['own_injected_loss'][-1], '.3f')} | {t['unpatched']['value']:.3f} |")
    md += ["", FINDINGS["qk"], "", "At layer 1: the transplant's effect for `j = 1` and `j = 2`, and the injection's "
           "accuracy for a first-level prefix and for the target's own (the control):", "",
           "| source | budget | trained loss | transplant, j = 1 | transplant, j = 2 | injection | control |",
           "|---|---|---|---|---|---|---|"]
    for s, name, t in _rows(doc, "transplant", ("mlp A", "qk A")):
        inj = doc["injection"][name].get(s, {})
        acc = inj.get("prefix_accuracy", [[None]])[0][0]
        own = inj.get("own_injected_accuracy", [None])[0]
        md.append(f"| {NAMES[s]} | {name[1:]} | {_num(t.get('trained_loss'), '.4f')} | {_num(t['effect'][0][0])} | "
                  f"{_num(t['effect'][0][1])} | {_num(acc, '.3f')} | {_num(own, '.3f')} |")
    md += ["", FINDINGS["prereg"], "", "| source | predicted | found |", "|---|---|---|",
           *[f"| {s} | {p} | {f} |" for s, p, f in VERDICTS], "", FINDINGS["runs"], "",
           "| model | budget | this study (seed 0) | the scaling study's seeds |", "|---|---|---|---|"]
    seeds = committed_seeds()
    for s, name, t in _rows(doc, "transplant", ("mlp A", "B", "C")):
        model, budget = s.split()[-1], int(name[1:])
        got = seeds.get((model, budget), [])
        md.append(f"| {NAMES[s]} | {budget} | {_num(t.get('trained_loss'), '.4f')} | "
                  + (f"{min(got):.4f}-{max(got):.4f} ({len(got)} seeds)" if got else "") + " |")
    return md


def committed_seeds() -> dict:
    """(model, budget) -> the losses of the scaling study's committed runs (studies/scaling/scaling.json)."""
    path = ROOT / "studies" / "scaling" / "scaling.json"
    try:
        runs = json.loads(path.read_text())["runs"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    out: dict = {}
    for r in runs if isinstance(runs, list) else []:
        if isinstance(r, dict) and isinstance(r.get("loss"), (int, float)):
            out.setdefault((r.get("model"), r.get("budget")), []).append(r["loss"])
    return out


def _fmt(v, e=None, f=".2f"):
    return "" if v is None or v != v else (f"{v:{f}}" if e is None else f"{v:{f}} ± {e:.1g}")


def page(doc: dict) -> str:
    """The study's page (``function_vectors.md``), from ``function_vectors.json``: the question and the test as
    preregistered, what was found, and per budget the figure, two summary tables and every full table."""
    from bridges.patching.keys import table_from_dict
    from fvnum.patching.state_tables import injection_from_dict

    pre, cell_ = doc["preregistered"], doc["cell"]
    md = ["# Function vectors at the scaling cell", "",
          f"Tree prior of depth {cell_['depth']}, alpha {cell_['alpha']}, N {cell_['n_tokens']} tokens, s2 "
          f"{cell_['s2']}, budgets {', '.join(map(str, cell_['budgets']))} (the scaling study's cell); written by "
          "`python studies/function_vectors/run.py` from [function_vectors.json](function_vectors.json) "
          "([docs/theory.md](../../theory.md), section 9: a transplant replaces the target's workspace `Phi_l` by a donor's; an injection "
          "puts the mean workspace of the contexts whose leaf has a given prefix in its place).", "",
          "## Preregistered", "", *[f"- **{k}**: {v}" for k, v in pre.items()], "",
          "## Found", "", *findings(doc), ""]
    for budget in sorted(doc["transplant"], key=lambda b: int(b[1:])):
        trans, inj = doc["transplant"][budget], doc["injection"][budget]
        md += [f"## Budget {budget[1:]}", "", f"![transplant effects and injection accuracy at budget {budget[1:]}]"
               f"(fig_function_vectors_{budget}.png)", ""]
        have = [s for s in NAMES if s in trans and "missing" not in trans[s]]
        missing = [s for s in NAMES if s in trans and "missing" in trans[s]]
        depths = trans[have[0]]["depths"] if have else []
        md += ["Transplant at the last layer each source has (paired effect `loss - unpatched`, by divergence depth "
               "`j`; 0 where the donor's state is the target's own):", "",
               "| source | l | unpatched loss | " + " | ".join(f"j={j}" for j in depths) + " |",
               "|---" * (3 + len(depths)) + "|"]
        for s in have:
            t = trans[s]
            a = len(t["layers"]) - 1
            u = t["unpatched"]
            md.append(f"| {NAMES[s]} | {t['layers'][a]} | {_fmt(u['value'], u['stderr'], '.4f')} | "
                      + " | ".join(_fmt(v, e) for v, e in zip(t["effect"][a], t["effect_stderr"][a])) + " |")
        md += ["", "Injection: prefix accuracy (the decoded leaf has the injected prefix of depth `j <= l`; chance "
               "`2^-j`) over the injected prefixes at each layer, and the control, each target given the mean state "
               "of its own prefix (accuracy, and loss beside the unpatched loss):", "",
               "| source | l | prefix accuracy, min-max over j <= l | own prefix: accuracy | own prefix: loss |",
               "|---|---|---|---|---|"]
        for s in have:
            t = inj[s]
            for a, l in enumerate(t["layers"]):
                accs = [v for v in t["prefix_accuracy"][a] if v is not None and v == v]
                md.append(f"| {NAMES[s]} | {l} | {min(accs):.3f}-{max(accs):.3f} | "
                          f"{_fmt(t['own_injected_accuracy'][a], t['own_injected_accuracy_stderr'][a], '.3f')} | "
                          f"{_fmt(t['own_injected_loss'][a], t['own_injected_loss_stderr'][a], '.3f')} "
                          f"(unpatched {t['unpatched']['value']:.3f}) |")
        for s in missing:
            md += ["", f"{NAMES[s]}: not in the tables ({trans[s]['missing']})."]
        md += [""]
        for s in have:
            md += [f"??? note \"{NAMES[s]} at budget {budget[1:]}: the full tables\"", "",
                   *["    " + line for line in ("Transplant:\n\n" + table_from_dict(trans[s]).to_markdown()
                                               + "\n\nInjection:\n\n" + injection_from_dict(inj[s]).to_markdown()
                                               ).splitlines()], ""]
    md += ["## Re-run", "", "Every table is a cell (`cells/<name>.json`); the trained models' runs are made by these "
           "commands (`RUNS`: the folder given as `--runs`), and `python studies/function_vectors/run.py --runs RUNS` "
           "rebuilds this page from the cells:", "", "```bash",
           *[f"{c}    # {k}" for k, c in sorted(doc["commands"].items())], "```", ""]
    return "\n".join(md)


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2 (argparse's usage block is left out)
        raise StudyError(f"{self.prog}: {message}")


def parse_budgets(text: str) -> list[int]:
    """``4,6`` -> [4, 6]: budgets of this study's cell only (the trained recipes and the committed tables)."""
    words = [w.strip() for w in text.split(",")]
    if not all(w.isdigit() for w in words):
        raise StudyError(f"--budgets {text!r}: give budgets of this study, comma-separated ({', '.join(map(str, BUDGETS))})")
    wrong = [int(w) for w in words if int(w) not in BUDGETS]
    if wrong:
        raise StudyError(f"--budgets {text!r}: {wrong[0]} is not a budget of this study "
                         f"({', '.join(map(str, BUDGETS))}: the cell and the trained recipes are set for these)")
    return sorted(set(int(w) for w in words))


def committed(path: Path) -> dict:
    """The committed ``function_vectors.json`` ({} when there is none): a damaged one raises StudyError, so it is
    never written over."""
    from bridges.runs.store import read_json

    try:
        doc = read_json(path, {})
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise StudyError(f"{_shown(path)}: damaged ({type(exc).__name__}); restore it (git checkout) first") from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(k, {}), dict) for k in ("transplant", "injection")):
        raise StudyError(f"{_shown(path)}: damaged (not the study's tables); restore it (git checkout) first")
    return doc


def main(argv=None) -> int:
    try:
        return _main(argv)
    except StudyError as exc:
        print(exc, file=sys.stderr)
        return 2


def _main(argv) -> int:
    p = _Parser(prog="run.py", description=__doc__.split("\n\n")[0])
    p.add_argument("--runs", default=str(ROOT / "runs" / "scaling-fv"), help="folder of the fv train runs")
    p.add_argument("--train", action="store_true", help="train the runs that are missing (hours)")
    p.add_argument("--budgets", default=",".join(map(str, BUDGETS)), help="budgets to (re)assemble: 4, 6 or 4,6")
    p.add_argument("--only", choices=("theory", "models", "all"), default="all")
    args = p.parse_args(argv)
    budgets = parse_budgets(args.budgets)
    runs = Path(args.runs)
    dest = HERE / "function_vectors.json"
    doc = committed(dest)
    for name in (f"B{b}" for b in BUDGETS):  # every cell on disk is read (and checked) before anything is written
        for kind in ("transplant", "injection"):
            for source in ("path", "keyed", *(s for s, _, _ in TRAINED)):
                read_cell(f"{kind}-{source.replace(' ', '-')}-{name}")
    log = lambda msg: print(time.strftime("%H:%M:%S"), msg, flush=True)  # noqa: E731
    computed = {}
    for budget in budgets:
        r = {"transplant": {}, "injection": {}}
        if args.only in ("theory", "all"):
            t = theory_tables(budget, log)
            r["transplant"].update(t["transplant"]), r["injection"].update(t["injection"])
        if args.only in ("models", "all"):
            m = model_tables(budget, runs, args.train, log)
            r["transplant"].update(m["transplant"]), r["injection"].update(m["injection"])
        computed[f"B{budget}"] = r
    from bridges.runs.store import write_atomic, write_json

    doc.update({"cell": {**CELL, "budgets": list(BUDGETS), "seed": SEED}, "preregistered": PREREGISTERED,
                "sources": {"path": "fvnum.state_patching_table / injection_table, strategy path, tokens channel",
                            "keyed": "the same for adaptive_keyed_weighted (Model A's prediction policy)",
                            "mlp A": "Model A with the MLP router, bridges.patching.state", "B": "Model B",
                            "C": "Model C", "qk A": "Model A with the query-key router (docs/theory.md section 7b, "
                                                    "--router qk)"},
                "commands": {**{f"{m}{b}": train_command(m, b, "RUNS") for m, b in RECIPES},
                             **{f"qkA{b}": train_command("A", b, "RUNS", "qk") for m, b in RECIPES if m == "A"}}})
    doc = merge(doc, computed)
    text = page(doc)  # the page is built before anything is written
    write_json(dest, doc)
    write_atomic(HERE / "function_vectors.md", text)
    for path in figures(doc, computed):
        log(f"wrote {path}")
    log(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
