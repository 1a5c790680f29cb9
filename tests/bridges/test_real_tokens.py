"""A's and B's keyed rows on real tokens in the comparisons (``--real-samples`` of fv compare, ``real_samples`` of
bridges.analysis.compare and of fv reproduce's config): refused in one line before any training where they are not
built, the command line's rows the library's, and fv reproduce's report lines."""
import json

import pytest

from bridges.studies.reproduce import ReproduceConfig, real_samples_of, real_token_lines
from fvsym.errors import InputError
from tests._cli import fv

RUN = ("compare", "--depth", "2", "--model", "A", "--budget", "1", "--steps", "20", "--samples", "400", "--quiet")


@pytest.mark.parametrize("argv, words", [
    (["--real-samples", "1"], "--real-samples must be >= 2, got 1"),
    (["--prior", "gaussian", "--real-samples", "20"], "real-token rows are built on the tree prior"),
    (["--keyed", "none", "--real-samples", "20"], "give a key family"),
    (["--keyed", "softmax", "--real-samples", "20"], "the softmax family's adaptive row is a search of its own"),
])
def test_fv_compare_refuses_them_before_training_in_one_line(tmp_path, argv, words):
    code, _, err = fv(*RUN, "--out", tmp_path / "runs", *argv)
    assert code == 2 and words in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "runs").exists()  # nothing trained


@pytest.mark.heavy
def test_fv_compare_adds_the_librarys_rows(tmp_path):
    from bridges.analysis.compare import keyed_cells
    from bridges.runs.config import DataConfig

    code, out, err = fv(*RUN, "--out", tmp_path, "--real-samples", "40", "--format", "json")
    assert code == 0, err
    table = json.loads(out)
    rows = {r["name"]: r for r in table["theory"]}
    mine = {r["name"]: r for r in keyed_cells(DataConfig(depth=2), [1], search_samples=2000, real_samples=40)["1"]}
    for name in ("best_adaptive_keyed_real", "best_nonadaptive_keyed_real"):
        assert rows[name]["value"] == mine[name]["value"] and rows[name]["how"] == "mc n=40"
        assert rows[name]["role"] == "upper_bound" and rows[name]["models"] == []
    assert table["beside_prediction"]["prediction"] == "best_adaptive_keyed"  # A stays held to the law's row
    md = next(tmp_path.rglob("compare.md")).read_text()
    assert "| best_adaptive_keyed_real (the best_adaptive_keyed policy on real tokens …) |" in md
    assert "- `best_adaptive_keyed_real`: the best_adaptive_keyed policy on real tokens (128 tokens" in md


def test_fv_reproduce_shows_them_in_the_tree_cells_with_linear_or_weighted_keys():
    from bridges.runs.config import DataConfig

    cfg = ReproduceConfig()
    assert cfg.real_samples == 2000
    assert real_samples_of(cfg, cfg.data("tree")) == 2000 and real_samples_of(cfg, cfg.data("gaussian")) is None
    assert real_samples_of(ReproduceConfig(keyed="softmax"), DataConfig(depth=4)) is None
    assert real_samples_of(ReproduceConfig(real_samples=None), DataConfig(depth=4)) is None
    with pytest.raises(InputError, match="real_samples must be >= 2, got 1"):
        ReproduceConfig(real_samples=1)


def test_fv_reproduce_real_samples_option_is_the_configs():
    from bridges.cli import build_parser

    parse = build_parser().parse_args
    assert parse(["reproduce"]).real_samples == ReproduceConfig().real_samples
    assert parse(["reproduce", "--real-samples", "none"]).real_samples is None
    assert parse(["reproduce", "--real-samples", "500"]).real_samples == 500
    code, _, err = fv("reproduce", "--real-samples", "1", "--quiet")
    assert code == 2 and "--real-samples must be >= 2, got 1" in err and len(err.strip().splitlines()) == 1


def test_the_reports_lines_put_each_row_beside_its_law_and_the_trained_model():
    theory = [{"name": "best_adaptive_keyed", "value": 0.13, "stderr": 0.008},
              {"name": "best_nonadaptive_keyed", "value": 0.27, "stderr": 0.004},
              {"name": "best_adaptive_keyed_real", "value": 0.1267, "stderr": 0.0066, "how": "mc n=2000"},
              {"name": "best_nonadaptive_keyed_real", "value": 0.26, "stderr": 0.005, "how": "mc n=2000"}]
    cell = {"prior": "tree", "depth": 4, "budget": 2, "seed": 0, "theory": theory}
    tables = [{**cell, "model": m, "trained": {"loss": loss}} for m, loss in (("A", 0.1441), ("B", 0.2655), ("C", 0.9))]
    lines = real_token_lines(tables)
    assert "| tree K4 B2 seed 0 | A | 0.1267 ± 0.007 (mc n=2000) | 0.1300 ± 0.008 | 0.975 | 0.1441 |" in lines
    assert sum(line.startswith("| tree K4 B2") for line in lines) == 2  # A and B; C has no keyed rows
    assert real_token_lines([{**tables[0], "theory": theory[:2]}]) == []
