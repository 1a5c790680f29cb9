"""Training: configurations, a short run that learns, determinism, the ``fv train`` command."""
import json
import math

import pytest
import torch

from bridges.cli import main as fv
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.data import ContextSampler
from bridges.models.networks import build_model
from bridges.training.train import evaluate, load_result, lr_factor, train

torch.set_num_threads(1)


def tiny(model="A", **train_kw):
    kw = dict(steps=150, batch=64, lr=1e-2, warmup=10, eval_every=50, eval_batches=1, seed=0)
    kw.update(train_kw)
    return RunConfig(DataConfig(depth=3, n_tokens=32), ModelConfig(model, 2, mlp_width=16), TrainConfig(**kw))


# --- configuration -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "make,message",
    [
        (lambda: DataConfig(prior="laplace"), "unknown prior 'laplace'"),
        (lambda: DataConfig(prior="gaussian", cov="banded"), "unknown cov 'banded'"),
        (lambda: DataConfig(cov="isotropic"), "applies only to the gaussian prior"),
        (lambda: DataConfig(alpha=1.0), "alpha must lie in"),
        (lambda: DataConfig(alpha=0), "alpha must lie in"),
        (lambda: DataConfig(n_tokens=0), "n_tokens"),
        (lambda: DataConfig(depth=2.5), "depth must be an integer"),
        (lambda: ModelConfig(model="D"), "unknown model 'D'"),
        (lambda: ModelConfig(budget=0), "budget must be >= 1"),
        (lambda: ModelConfig(model="C", readout="generic"), "bilinear readout"),
        (lambda: TrainConfig(lr=-1.0), "lr must be > 0, got -1"),
        (lambda: TrainConfig(steps=0), "steps must be >= 1"),
        (lambda: TrainConfig(schedule="step"), "unknown schedule"),
        (lambda: RunConfig(DataConfig(depth=2), ModelConfig(budget=4)), r"budget=4 exceeds the dimension D = 2\^depth - 1 = 3"),
        (lambda: RunConfig(model=ModelConfig(readout="generic"), train=TrainConfig(loss="theta")), "needs a decoding readout"),
        (lambda: RunConfig.from_dict({"data": {"depht": 3}}), "unknown data configuration fields: depht"),
        (lambda: RunConfig.from_json("{"), "not valid JSON"),
    ],
)
def test_bad_configuration_values_are_one_line_errors(make, message):
    with pytest.raises(ValueError, match=message) as info:
        make()
    assert "\n" not in str(info.value)


def test_configuration_json_round_trip_and_key():
    cfg = RunConfig(DataConfig(prior="gaussian", depth=4, alpha=0.3), ModelConfig("B", 4), TrainConfig(seed=3, out="x"))
    assert cfg.data.cov == "matched"
    again = RunConfig.from_json(cfg.to_json())
    assert again == cfg and again.key() == cfg.key()
    same_experiment = cfg.replace(train=dict(out="elsewhere", device="cuda", threads=4, checkpoint_every=7))
    assert same_experiment.key() == cfg.key()
    for changed in (cfg.replace(train=dict(seed=4)), cfg.replace(data=dict(cov="isotropic")), cfg.replace(model=dict(mlp_width=32))):
        assert changed.key() != cfg.key()
    assert cfg.differences(cfg.replace(model=dict(mlp_width=32))) == ["model.mlp_width: 64 vs 32"]


def test_learning_rate_schedule():
    assert [lr_factor(s, 100, 4, "cosine") for s in range(4)] == [0.25, 0.5, 0.75, 1.0]
    assert lr_factor(4, 100, 4, "cosine") == 1.0
    assert lr_factor(52, 100, 4, "cosine") == pytest.approx(0.5)
    assert lr_factor(99, 100, 4, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi * 95 / 96)))
    assert lr_factor(99, 100, 4, "constant") == 1.0


# --- training ------------------------------------------------------------------------------------------
def test_a_short_training_run_learns():
    result = train(tiny("A"), progress=False)
    first, last = result.history[0], result.history[-1]
    assert first[0] == 0 and last[0] == 150 and result.finished and result.metric == "theta"
    second_moment = ContextSampler(tiny().data).second_moment  # loss of the trivial estimate theta_hat = 0
    assert last[2] + 5 * (last[3] + first[3]) < first[2]
    assert result.loss + 5 * result.stderr < second_moment
    assert result.steps_per_s > 0 and result.n_eval == 256


def test_same_seed_same_numbers_other_seed_other_numbers():
    cfg = tiny("B", steps=20, eval_every=10)
    a, b = train(cfg, progress=False), train(cfg, progress=False)
    assert [r[:4] for r in a.history] == [r[:4] for r in b.history]
    c = train(cfg.replace(train=dict(seed=1)), progress=False)
    assert c.loss != a.loss


def test_theta_loss_and_generic_readout_train():
    r = train(tiny("B", steps=20, loss="theta"), progress=False)
    assert r.metric == "theta" and r.loss < r.history[0][2]
    cfg = RunConfig(DataConfig(depth=3, n_tokens=32), ModelConfig("B", 2, mlp_width=16, readout="generic"),
                    TrainConfig(steps=20, batch=64, lr=1e-2, warmup=5, eval_every=10, eval_batches=1))
    r = train(cfg, progress=False)
    assert r.metric == "query" and r.loss < r.history[0][2]


def test_query_and_theta_metrics_have_the_same_expectation():
    torch.manual_seed(0)
    cfg = tiny("C")
    model = build_model(cfg)
    s = ContextSampler(cfg.data)
    with torch.no_grad():
        c = s.sample(20_000, s.generator(0, 0, 0))
        out = model(c.x, c.y, c.x_q)
        diff = ((out.y_hat - c.target) ** 2 - ((out.theta_hat - c.theta) ** 2).sum(1)).double()
    assert abs(float(diff.mean())) <= 5 * float(diff.std()) / math.sqrt(diff.numel())
    est = evaluate(model, s, n_batches=2, batch=50)
    assert est.n == 100 and est.stderr > 0


def test_bad_training_requests():
    with pytest.raises(ValueError, match="device 'abacus' is not one fv runs on"):
        train(tiny(device="abacus"), progress=False)
    with pytest.raises(ValueError, match="stop_at"):
        train(tiny(), progress=False, stop_at=151)


# --- fv train ---------------------------------------------------------------------------------------------
def test_fv_train_writes_its_run_folder_and_prints_it(tmp_path, capsys):
    argv = ["train", "--model", "C", "--depth", "3", "--budget", "2", "--tokens", "16", "--steps", "12", "--batch", "32",
            "--eval-every", "6", "--eval-batches", "2", "--seed", "5", "--out", str(tmp_path), "--quiet"]
    assert fv(argv) == 0
    printed = capsys.readouterr().out
    (folder,) = tmp_path.iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["checkpoint.pt", "config.json", "result.json"]
    assert str(folder) in printed and "final held-out loss" in printed
    cfg = RunConfig.from_json((folder / "config.json").read_text())
    assert cfg.key() == folder.name and cfg.model.model == "C" and cfg.train.seed == 5
    result = load_result(folder / "result.json", cfg)
    assert f"{result.loss:.5g}" in printed and json.loads((folder / "result.json").read_text())["key"] == cfg.key()
    assert fv(argv) == 0  # a finished run is returned, not retrained
    assert f"{result.loss:.5g}" in capsys.readouterr().out
    # the machine that trained it is recorded (bfloat16 kernels differ between CPU families)
    assert result.machine.startswith("cpu: ") and f"torch {torch.__version__}" in result.machine
    # a result written before the machine was recorded still loads (the field is optional)
    from bridges.runs.store import with_checksum
    old = {k: v for k, v in json.loads((folder / "result.json").read_text()).items() if k not in ("checksum", "machine")}
    (folder / "result.json").write_text(json.dumps(with_checksum(old, cfg.key())))
    assert load_result(folder / "result.json", cfg).machine is None


@pytest.mark.parametrize("extra,message", [(["--budget", "9"], "exceeds the dimension"), (["--tokens", "0"], "n_tokens"),
                                          (["--prior", "tree", "--cov", "isotropic"], "applies only to the gaussian")])
def test_fv_train_bad_input_is_one_line_exit_2(tmp_path, capsys, extra, message):
    assert fv(["train", "--model", "A", "--depth", "3", "--out", str(tmp_path), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1


def test_registering_the_commands_does_not_load_torch():
    import subprocess
    import sys

    code = "import sys, bridges.cli; bridges.cli.build_parser(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


# --- devices and precision --------------------------------------------------------------------------------
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_a_gpu_is_a_clear_error():
    with pytest.raises(ValueError, match="not available"):
        train(tiny(device="cuda"), progress=False)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_training_on_cuda_runs_and_records_its_precision():
    result = train(tiny(device="cuda"), progress=False)
    assert math.isfinite(result.loss)
    assert result.precision == ("bf16" if torch.cuda.is_bf16_supported() else "fp32")


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_each_precision_is_deterministic_and_recorded(precision):
    a = train(tiny("A", precision=precision), progress=False)
    b = train(tiny("A", precision=precision), progress=False)
    assert a.precision == precision and a.loss == b.loss
    assert [row[:4] for row in a.history] == [row[:4] for row in b.history]  # all but the wall time


def test_unwritable_out_is_one_line_exit_2(tmp_path, capsys):
    import os

    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    try:
        if os.access(locked / "x", os.W_OK) or os.geteuid() == 0:  # root writes anywhere: use a file as the folder
            locked = tmp_path / "a-file"
            locked.write_text("")
        code = fv(["train", "--model", "C", "--depth", "3", "--budget", "2", "--steps", "2", "--out",
                   str(locked / "runs"), "--quiet"])
    finally:
        os.chmod(tmp_path / "locked", 0o700)
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("fv train: error:") and err.count("\n") == 1
