"""Edges a new user meets first: fv mc's default strategy follows the prior, --design alone sets the budget, one
word for the linear key family in Python and on the command line, softmax models held to their softmax rows,
and tables whose row descriptions fit a line (the definitions in a glossary below)."""
import json

import pytest

import fvnum

from bridges.cli import main


def _mc(capsys, *argv):
    rc = main(["mc", *argv, "--samples", "2000", "--seed", "0", "--format", "json"])
    out, err = capsys.readouterr()
    return rc, (json.loads(out) if rc == 0 else None), err


@pytest.mark.parametrize("prior_args, strategy", [
    (["--prior", "tree", "--depth", "3"], "path"),
    (["--prior", "gaussian", "--depth", "3"], "optimal"),
    (["--prior", "atoms", "--diversity", "6", "--dim", "3"], "greedy_coordinate"),
])
def test_fv_mc_default_strategy_applies_to_the_prior(capsys, prior_args, strategy):
    from fvnum.priors.registry import prior_entry

    rc, got, err = _mc(capsys, *prior_args, "--budget", "2", "--tau", "0.3")
    assert rc == 0, err
    assert got["strategy"] == strategy == prior_entry(prior_args[1]).strategy
    assert 0 < got["value"] < 10


def test_a_design_alone_sets_the_budget_and_the_strategy(capsys):
    rc, got, err = _mc(capsys, "--depth", "3", "--strategy", "fixed", "--design", "2,3", "--tau", "0.3")
    assert rc == 0, err
    assert got["budget"] == 2 and got["design"] == [2, 3] and got["strategy"] == "fixed"
    rc, alone, err = _mc(capsys, "--depth", "3", "--design", "2,3", "--tau", "0.3")
    assert rc == 0 and alone["strategy"] == "fixed" and alone["value"] == got["value"]  # same seed, same numbers
    rc, _, err = _mc(capsys, "--depth", "3", "--design", "2,3", "--budget", "3", "--tau", "0.3")
    assert rc == 2 and "--budget 3 does not match --design 2,3 (2 nodes)" in err and len(err.strip().splitlines()) == 1
    rc, _, err = _mc(capsys, "--depth", "3", "--strategy", "path", "--design", "2,3", "--tau", "0.3")
    assert rc == 2 and "--design applies to --strategy fixed only" in err


def test_one_word_for_the_linear_key_family():
    from fvnum.keys.families import FAMILIES, check_family
    from fvnum.theory import comparison_table
    from fvsym import TreePrior

    assert "linear" in FAMILIES and check_family("none", optional=True) is None
    with pytest.raises(ValueError, match="none is no key family"):
        check_family("none")
    kw = dict(samples=1000, search_samples=100, dense=False, seed=0)
    none = comparison_table(TreePrior(3, "1/2"), 2, fvnum.tokens(32, keys="none"), **kw)  # the command line's word
    as_none = comparison_table(TreePrior(3, "1/2"), 2, fvnum.tokens(32, keys=None), **kw)
    assert none.to_dict() == as_none.to_dict() and not any(r.name.endswith("_keyed") for r in none.rows)
    linear = comparison_table(TreePrior(3, "1/2"), 2, fvnum.tokens(32, keys="linear"), **kw)  # Python's word too
    assert {"best_adaptive_keyed", "best_nonadaptive_keyed"} <= {r.name for r in linear.rows}
    from bridges.cli import build_parser

    parser = build_parser()
    for word in ("linear", "none"):
        args = parser.parse_args(["compare", "--model", "A", "--keyed", word])
        assert args.keyed == word


def test_softmax_models_are_held_to_their_softmax_rows_by_default():
    import inspect

    from bridges.analysis.compare import BY_ATTENTION, compare, keyed_for
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig
    from fvnum.defaults import KEYED

    def run(attention, prior="tree"):
        return RunConfig(DataConfig(prior=prior, depth=3), ModelConfig("A", 2, attention=attention))

    assert inspect.signature(compare).parameters["keyed"].default == BY_ATTENTION
    assert keyed_for(run("softmax")) == "softmax" and keyed_for(run("linear")) == KEYED == "weighted"
    assert keyed_for(run("softmax", "gaussian")) == KEYED  # no softmax rows are searched on a Gaussian prior
    assert keyed_for(run("softmax"), "weighted") == "weighted" and keyed_for(run("linear"), "none") is None


def test_a_tables_row_descriptions_fit_a_line_with_a_glossary_below():
    from bridges.analysis.compare import SHORT_WHAT, short_what, to_markdown

    long = ("noisy adaptive optimum of the coordinate class with linear keys (tokens channel) >= this: the "
            "noiseless Bellman optimum; not a bound for Models A, B (MLP keys) or C (unit class)")
    assert short_what(long) == "noisy adaptive optimum of the coordinate class with linear keys …"
    assert short_what("non-adaptive, coordinate") == "non-adaptive, coordinate"
    assert len(short_what("x" * 300)) <= SHORT_WHAT
    table = {"model": "A", "prior": "tree", "depth": 3, "budget": 2, "n_tokens": 64, "seed": 0, "tau": 0.1,
             "trained": {"loss": 0.2, "stderr": 0.01, "steps": 10, "wall_s": 1.0},
             "theory": [{"name": "optimum_lower", "value": 0.1, "stderr": 0.0, "how": "exact", "what": long,
                         "channel": "noiseless"},
                        {"name": "top_levels", "value": 0.3, "stderr": 0.01, "how": "mc",
                         "what": "non-adaptive, coordinate", "channel": "tokens"}]}
    md = to_markdown(table)
    rows = [line for line in md.splitlines() if line.startswith("| optimum_lower") or line.startswith("| top_levels")]
    assert len(rows) == 2 and all(len(line.split(" | ")[0]) <= SHORT_WHAT + 20 for line in rows)
    glossary = md.split("The rows in full:", 1)[1]
    assert f"- `optimum_lower`: {long}" in glossary and "`top_levels`" not in glossary  # short already: no entry
