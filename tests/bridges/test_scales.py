"""General tree scales in the run configuration: ``DataConfig(scales=...)`` and ``fv train/compare --scales``."""
import json

import pytest
import sympy as sp
import torch

from bridges.cli import main as fv
from bridges.cli import build_parser
from bridges.commands import config_from_args
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.data import ContextSampler, data_channel, fv_prior
from bridges.runs.store import config_key


# --- the keys of every configuration by alpha are the ones they had before scales existed -------------------
def test_keys_of_alpha_configurations_are_unchanged():
    # computed on the commit before DataConfig had scales (where cells hashed dataclasses.asdict(data))
    assert RunConfig().key() == "A-tree-K4-B3-N128-s0-b13d1b9f59"
    iso = RunConfig(DataConfig(prior="gaussian", depth=3, alpha=0.25, cov="isotropic"), ModelConfig(model="B", budget=2),
                    TrainConfig(seed=1))
    assert iso.key() == "B-gaussiso-K3-B2-N128-s1-e160d9c6e1"
    run = RunConfig(DataConfig(depth=6, n_tokens=64), ModelConfig(model="C", budget=4), TrainConfig(steps=100))
    from bridges.studies.reproduce import _cell_key

    assert run.key() == "C-tree-K6-B4-N64-s0-77558f3997" and _cell_key("compare", run) == "compare-ec90af55b056"
    theory_cell = {"name": "theory_table", "data": DataConfig(depth=6).to_dict(), "budget": 4, "samples": 20000, "seed": 0}
    assert config_key(theory_cell) == "2872a4e61efe"
    scaling_cell = {"name": "theory", "data": DataConfig(prior="gaussian", depth=4).to_dict(), "budget": 2,
                    "samples": 1000, "search_samples": 2000, "seed": 0}
    assert config_key(scaling_cell) == "c14d4c4f9cb7"
    assert "scales" not in DataConfig().to_dict() and "scales" not in RunConfig().key_dict()["data"]


# --- DataConfig ------------------------------------------------------------------------------------------
def test_scales_are_exact_strings_and_round_trip():
    d = DataConfig(depth=3, scales=(1, 0.5, sp.Rational(1, 3)))
    assert d.scales == ("1", "1/2", "1/3") and d.alpha is None
    assert DataConfig(depth=3, scales=["1", "0.5", "1/3"]) == d  # 0.5 and 1/2 are the same configuration
    cfg = RunConfig(d)
    assert RunConfig.from_json(cfg.to_json()) == cfg and cfg.to_dict()["data"]["scales"] == ["1", "1/2", "1/3"]
    assert cfg.key() != RunConfig(DataConfig(depth=3)).key()
    assert tuple(fv_prior(d).scales) == (1, sp.Rational(1, 2), sp.Rational(1, 3))
    assert ContextSampler(d).second_moment == pytest.approx(1 + 1 / 4 + 1 / 9, rel=1e-12)


@pytest.mark.parametrize("kw,message", [
    (dict(alpha=0.5, scales=(1, 0.5, 0.25)), "give alpha or scales, not both"),
    (dict(scales=(1, 0.5)), "scales must have depth=3 entries, got 2"),
    (dict(scales=(0.5, 1, 0.25)), "non-increasing, got a_1 = 1/2 < a_2 = 1"),
    (dict(scales=(1, 0.5, 0)), "scales must be > 0, got a_3 = 0"),
    (dict(scales="1,1/2,1/4"), "scales must be a sequence"),
    (dict(scales=(1, 0.5, sp.sqrt(2) / 4)), "rational"),
    (dict(prior="gaussian", cov="isotropic", scales=(1, 0.5, 0.25)), "not to cov='isotropic'"),
])
def test_bad_scales_are_one_line_errors(kw, message):
    with pytest.raises(ValueError, match=message) as info:
        DataConfig(depth=3, **kw)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("prior,cov", [("tree", None), ("gaussian", "matched")])
def test_scales_equal_to_the_powers_of_alpha_give_the_same_data(prior, cov):
    by_alpha = DataConfig(prior=prior, cov=cov, depth=3, alpha=0.25, n_tokens=8)
    by_scales = DataConfig(prior=prior, cov=cov, depth=3, scales=("1", "1/2", "1/4"), n_tokens=8)  # (1/4)^((k-1)/2)
    exact_cov = (lambda p: p.covariance) if prior == "tree" else (lambda p: p.cov)
    assert exact_cov(fv_prior(by_scales)) == exact_cov(fv_prior(by_alpha))  # the same exact sympy matrix
    assert data_channel(by_scales).tau == data_channel(by_alpha).tau
    a, b = ContextSampler(by_alpha), ContextSampler(by_scales)
    assert torch.equal(a.chol, b.chol) and a.second_moment == b.second_moment
    ca, cb = a.sample(64, a.generator(3, 0, 7)), b.sample(64, b.generator(3, 0, 7))
    for name in ("x", "y", "x_q", "theta", "noise"):
        assert torch.equal(getattr(ca, name), getattr(cb, name)), name
    from fvnum.linear_theory import gaussian_optimum  # the theory side reads the same prior

    assert gaussian_optimum(fv_prior(by_scales), 2, data_channel(by_scales)) == \
        gaussian_optimum(fv_prior(by_alpha), 2, data_channel(by_alpha))


# --- fv train / fv compare --------------------------------------------------------------------------------
def _compare_options(argv):  # the run options of fv compare (--model optional), parsed by the fv parser
    return config_from_args(build_parser().parse_args(["compare", *argv]))


def test_run_options_read_scales_and_infer_the_depth():
    cfg = _compare_options(["--scales", "1,1/2,1/3"])
    assert cfg.data.depth == 3 and cfg.data.scales == ("1", "1/2", "1/3") and cfg.data.alpha is None
    argv = cfg.to_argv()
    assert argv[argv.index("--scales") + 1] == "1,1/2,1/3" and "--alpha" not in argv
    assert _compare_options(argv) == cfg
    assert _compare_options([]).key() == RunConfig().key()  # defaults as before


def test_fv_train_with_scales(tmp_path, capsys):
    argv = ["train", "--model", "A", "--scales", "1,1/2,1/4", "--depth", "3", "--budget", "2", "--steps", "20",
            "--tokens", "16", "--batch", "32", "--eval-batches", "2", "--out", str(tmp_path), "--quiet"]
    assert fv(argv) == 0
    (folder,) = tmp_path.iterdir()
    saved = json.loads((folder / "config.json").read_text())["data"]
    assert saved["scales"] == ["1", "1/2", "1/4"] and saved["alpha"] is None
    assert RunConfig.from_json((folder / "config.json").read_text()).key() == folder.name
    assert folder.name in capsys.readouterr().out


@pytest.mark.parametrize("command", ["train", "compare"])
@pytest.mark.parametrize("extra,message", [
    (["--alpha", "1/2", "--scales", "1,1/2,1/4"], "give --alpha or --scales, not both"),
    (["--depth", "4", "--scales", "1,1/2,1/4"], "--scales needs depth = 4 entries (one a_k per level), got 3"),
    (["--scales", "1/4,1/2,1"], "scales must be non-increasing, got a_1 = 1/4 < a_2 = 1/2"),
    (["--scales", "1,,1/4"], "an empty item"),
])
def test_bad_scales_on_the_command_line_are_one_line_exit_2(tmp_path, capsys, command, extra, message):
    assert fv([command, "--model", "A", "--budget", "2", "--out", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not any(tmp_path.iterdir())


def test_fv_compare_grid_refuses_scales(tmp_path, capsys):
    assert fv(["compare", "--grid", "--scales", "1,1/2,1/4", "--out", str(tmp_path)]) == 2
    assert "does not take --scales" in capsys.readouterr().err
