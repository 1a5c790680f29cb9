"""Model T, the standard transformer of docs/theory.md section 7.1: its configuration and shapes, its taps with
TransformerLens's names, its budget, training, and the interventions on it (key patching, the two transplants,
injection, probes), with the no-op control whose effects are exactly 0."""
import numpy as np
import pytest
import torch

from bridges.analysis.probes import workspace_probes
from bridges.models.networks import build_model
from bridges.models.taps import patch, record, tap_names
from bridges.models.transformer import TransformerModel
from bridges.prices.transformer import parameter_count
from bridges.patching.keys import key_patching_table
from bridges.patching.state import model_injection_table, model_state_patching_table
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from fvsym.errors import InputError

torch.set_num_threads(1)
DATA = DataConfig(depth=3, n_tokens=16)


def _model(seed=0, **kw) -> TransformerModel:
    torch.manual_seed(seed)
    return build_model((DATA, ModelConfig(model="T", **{"budget": 3, "d_model": 16, "head_dim": 4,
                                                        "mlp_width": 16, **kw})))


def test_the_named_shapes_and_the_numbers_that_spell_them_are_one_configuration_with_one_key():
    deep = ModelConfig(model="T", budget=4, shape="deep")
    assert (deep.n_layers, deep.n_channels, deep.theory_name, deep.attention) == (4, 1, "T-deep", "softmax")
    wide = ModelConfig(model="T", budget=4, shape="wide")
    assert (wide.n_layers, wide.n_channels, wide.theory_name) == (1, 4, "T-wide")
    assert ModelConfig(model="T", budget=4, layers=4) == deep  # the numbers of deep are deep
    assert ModelConfig(model="T", budget=4, heads=4) == wide
    mixed = ModelConfig(model="T", budget=4, layers=2, heads=2)
    assert (mixed.n_layers, mixed.n_channels, mixed.theory_name) == (2, 2, "T")
    assert ModelConfig(model="T").shape == "deep"  # the default shape
    linear = ModelConfig(model="T", attention="linear")
    assert linear.to_dict()["attention"] == "linear" and "attention" not in deep.to_dict()  # softmax is T's default
    assert ModelConfig(**ModelConfig(model="T", budget=4, layers=2, heads=2).to_dict()) == mixed
    a = RunConfig(model=ModelConfig(model="A"))
    assert "shape" not in a.model.to_dict() and "attention" not in a.model.to_dict()  # A's keys are unchanged
    assert RunConfig(model=deep, train=TrainConfig(out=None)).key().startswith("Ts-tree-K4-B4-")


@pytest.mark.parametrize("kw, words", [
    (dict(model="T", budget=3, layers=2), "layers x heads x width = 2 x 1 x 1 = 2, not budget=3"),
    (dict(model="T", budget=3, shape="tall"), "unknown shape 'tall'"),
    (dict(model="T", budget=3, shape="deep", heads=2), "shape='deep' at budget 3 has heads = 1"),
    (dict(model="T", hidden_layers=3), "hidden_layers=3 applies to models A and B"),
    (dict(model="T", router="qk"), "router='qk' applies to models A and B"),
    (dict(model="T", d_model=0), "d_model"),
    (dict(model="A", width=64), "width=64 applies to model T (docs/theory.md section 7.1), not to model A (the MLP's"),
    (dict(model="B", shape="deep"), "shape='deep' applies to model T"),
])
def test_a_bad_shape_is_refused_in_one_line_naming_the_value(kw, words):
    with pytest.raises(InputError) as err:
        ModelConfig(**kw)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_the_parameters_are_counted_without_building_the_network():
    for kw in (dict(shape="deep"), dict(shape="wide"), dict(layers=1, heads=1, width=3)):
        m = _model(**kw)
        assert sum(p.numel() for p in m.parameters()) == parameter_count(
            7, m.n_layers, m.heads, m.value_width, head_dim=4, d_model=16, mlp_width=16)


def test_every_block_has_the_hook_points_a_transformerlens_user_recognises():
    m = _model()
    names = tap_names(m)
    for l in (1, 2, 3):
        for hook in ("attn.hook_q", "attn.hook_k", "attn.hook_v", "attn.hook_z", "hook_attn_out", "hook_mlp_out",
                     "hook_resid_post"):
            assert f"blocks.{l}.{hook}" in names
        assert f"workspace.{l}" in names
    assert "theta_hat" in names
    c = torch.randn(5, 16, 7), torch.randn(5, 16), torch.randn(5, 7)
    with record(m) as r:
        m(*c)
    assert r["blocks.2.attn.hook_k"].shape == (5, 17, 1, 4) and r["blocks.2.attn.hook_z"].shape == (5, 17, 1, 1)
    assert r["blocks.3.hook_resid_post"].shape == (5, 17, 16)
    torch.testing.assert_close(r["workspace.3"], r["blocks.3.hook_resid_post"][:, 0])  # the summary's residual
    with pytest.raises(RuntimeError, match="never ran"):
        with patch(m, "blocks.1.attn.hook_k", lambda k: k):
            pass  # no forward pass: the patch must not silently do nothing
    with pytest.raises(InputError, match="unknown tap 'blocks.4.attn.hook_k'"):
        with patch(m, "blocks.4.attn.hook_k", lambda k: k):
            m(*c)


def test_the_summary_token_receives_the_budget_and_no_more_from_the_context():
    """B = L H d: the summary's residual after a block moves with the context only through the ``H d`` values its
    heads' outputs ``hook_z`` carry to it; with those fixed, another context leaves the summary unchanged."""
    m = _model(shape="wide")  # one block, 3 heads of one value
    x, x_q = torch.randn(4, 16, 7), torch.randn(4, 7)
    y1, y2 = torch.randn(4, 16), torch.randn(4, 16)
    with record(m, ["blocks.1.attn.hook_z", "workspace.1"]) as r1:
        m(x, y1, x_q)
    z1 = r1["blocks.1.attn.hook_z"]
    assert z1.shape[2] * z1.shape[3] == 3

    def keep_summary(z):
        return torch.cat([z1[:, :1], z[:, 1:]], 1)

    with patch(m, "blocks.1.attn.hook_z", keep_summary), record(m, "workspace.1") as r2:
        m(x, y2, x_q)
    torch.testing.assert_close(r2["workspace.1"], r1["workspace.1"], rtol=0, atol=0)


def test_the_no_op_control_has_every_effect_exactly_zero():
    """Donor = target (divergence depth 0): key patching, both transplants and the injection of the target's own
    prefix change nothing, to the last bit."""
    m = _model()
    for table in (key_patching_table(m, DATA, n_contexts=64, depths=(0, 2)),
                  model_state_patching_table(m, DATA, n_contexts=64, depths=(0, 2)),
                  model_state_patching_table(m, DATA, n_contexts=64, depths=(0, 2), site="attention")):
        assert np.all(table.effect[:, 0] == 0) and np.all(table.effect_stderr[:, 0] == 0), table.intervention
        assert np.any(np.abs(table.effect[:, 1]) > 0)  # a real donor does something
    assert model_state_patching_table(m, DATA, n_contexts=8, depths=(1,), site="attention").intervention == \
        "attention transplant"


def test_key_patching_replaces_the_context_tokens_keys_and_keeps_the_summarys():
    m = _model()
    c1 = torch.randn(3, 16, 7), torch.randn(3, 16), torch.randn(3, 7)
    y2 = torch.randn(3, 16)
    with record(m, ["blocks.2.attn.hook_k"]) as donor:
        m(c1[0], y2, c1[2])
    name, fn = m.key_patch(2, donor)
    with record(m, ["blocks.2.attn.hook_k"]) as own:
        m(*c1)
    with patch(m, name, fn), record(m, ["blocks.2.attn.hook_k"]) as seen:
        m(*c1)
    # the tap records the activation before the patch's hook replaces it: compare through the function
    out = fn(own["blocks.2.attn.hook_k"])
    torch.testing.assert_close(out[:, 1:], donor["blocks.2.attn.hook_k"][:, 1:])
    torch.testing.assert_close(out[:, :1], own["blocks.2.attn.hook_k"][:, :1])
    assert seen["blocks.2.attn.hook_k"].shape == own["blocks.2.attn.hook_k"].shape


def test_injection_and_probes_run_on_the_summary_residual():
    m = _model()
    inj = model_injection_table(m, DATA, n_contexts=64, mean_contexts=512, layers=(1, 3), depths=(1,))
    assert inj.layers == (1, 3) and inj.loss.shape == (2, 1) and np.all(np.isfinite(inj.loss))
    assert np.all((0 <= inj.prefix_accuracy) & (inj.prefix_accuracy <= 1))
    probes = workspace_probes(m, DATA, n_contexts=64)
    assert len(probes.to_dict()["prefix"]) == 3  # one probe of the summary residual after each block


def test_a_tiny_model_t_trains_and_the_same_seed_gives_the_same_numbers(tmp_path):
    from bridges.training.train import train

    cfg = RunConfig(DATA, ModelConfig(model="T", budget=2, d_model=16, head_dim=4, mlp_width=16),
                    TrainConfig(steps=30, batch=32, eval_every=30, eval_batches=1, warmup=5, out=None))
    a, b = train(cfg, progress=False), train(cfg, progress=False)
    assert a.loss == b.loss and [row[:4] for row in a.history] == [row[:4] for row in b.history]  # not the clock
    assert a.history[-1][2] < a.history[0][2]  # the held-out loss falls from step 0


def test_fv_intervene_on_model_t_gives_every_table_with_the_no_op_control(tmp_path, capsys):
    import json

    from bridges.cli import main

    assert main(["train", "--model", "T", "--depth", "3", "--budget", "2", "--steps", "4", "--eval-every", "2",
                 "--eval-batches", "1", "--d-model", "16", "--head-dim", "4", "--mlp-width", "16", "--out",
                 str(tmp_path), "--quiet"]) == 0
    (run,) = tmp_path.iterdir()
    capsys.readouterr()
    assert main(["intervene", str(run), "--table", "all", "--control", "--contexts", "64", "--mean-contexts", "256",
                 "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) >= {"transplant", "attention", "keys", "injection"}
    for kind in ("transplant", "attention", "keys"):
        table = out[kind]["model"]
        assert table["depths"][0] == 0 and all(row[0] == 0 for row in table["effect"]), kind
    assert out["attention"]["model"]["intervention"] == "attention transplant"


def test_fv_intervene_refuses_the_attention_table_of_a_model_without_blocks(run_folder, capsys):
    from bridges.cli import main

    assert main(["intervene", str(run_folder), "--table", "attention"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "attention outputs of Model T's blocks; model A has none" in err[0]


@pytest.mark.heavy
def test_fv_sweep_and_fv_scaling_take_model_t(tmp_path, capsys):
    """A sweep over T's shapes, and a scaling study of T beside B (T's audit measures its readings' law)."""
    import json

    from bridges.cli import main

    spec = tmp_path / "t.toml"
    spec.write_text('command = "train"\n[base]\nmodel = "T"\ndepth = 3\nsteps = 4\neval_every = 2\neval_batches = 1\n'
                    'd_model = 16\nhead_dim = 4\nmlp_width = 16\n[grid]\nshape = ["deep", "wide"]\nbudget = [2]\n')
    assert main(["sweep", str(spec), "--out", str(tmp_path / "sweep"), "--scheduler", "synchronous", "--quiet"]) == 0
    rows = json.loads((tmp_path / "sweep" / "results.json").read_text())
    rows = rows["rows"] if isinstance(rows, dict) else rows
    assert sorted(r["shape"] for r in rows) == ["deep", "wide"]
    assert main(["scaling", "--out", str(tmp_path / "sc"), "--depth", "3", "--budgets", "1-2", "--models", "TB",
                 "--seeds", "2", "--steps-per-budget", "4", "--samples", "300", "--search-samples", "60",
                 "--workers", "1", "--quiet"]) == 0
    study = json.loads((tmp_path / "sc" / "scaling.json").read_text())
    models = {(r["model"], r["budget"]) for r in study["runs"]}
    assert {("T", 1), ("T", 2), ("B", 1), ("B", 2)} <= models
    audits = [r["audit"] for r in study["runs"] if r["model"] == "T"]
    assert audits and all("measured by simulation" in a["decoder"] for a in audits)
