"""The audit of a model's measurements (bridges.analysis.audit): Bayes decoding on the law of a model's own readings
against independent references, for a hand-built Model C (linear keys) and the hand-built path model, and
the command line with bad run folders."""
import json
import math

import numpy as np
import pytest
import torch

import fvnum
from bridges.analysis.audit import audit, audit_model
from bridges.cli import main
from bridges.runs.config import DataConfig
from bridges.training.data import ContextSampler, fv_prior
from bridges.models.networks import linear_model, linear_readout, path_model
from fvnum.mc.channels import token_statistics
from fvnum.keys.families import LinearKeys
from fvnum.keys.readings import ReadingLaw
from fvnum.keys.readings import law_posterior_mean

torch.set_num_threads(1)
DATA = DataConfig(prior="tree", depth=3, alpha=0.5, n_tokens=16)


def _leaves(data):
    K = data.depth
    bits = (torch.arange(2**K)[:, None] >> torch.arange(K - 1, -1, -1)[None, :]) & 1
    return ContextSampler(data, dtype=torch.float64).theta_from_signs((1 - 2 * bits).to(torch.int8)).numpy()


def _mean_se(losses):
    return float(losses.mean()), float(losses.std(ddof=1) / math.sqrt(losses.size))


def _design_reference(data, W, n, seed):
    """Bayes loss of the fixed design ``W`` on the tokens channel decoded under its CLT law (fvnum.keys.families
    LinearKeys, closed form): the statistic S drawn exactly in law (fvnum.mc.channels), no torch."""
    rng = np.random.default_rng(seed)
    thetas = _leaves(data)
    law = LinearKeys(W).law(thetas, n_tokens=data.n_tokens, s2=data.s2)
    m = rng.integers(0, len(thetas), n)
    (S,) = token_statistics([thetas[m]], data.n_tokens, data.s2, rng)  # (n, D)
    est = law_posterior_mean(thetas, np.zeros(len(thetas)), law, S @ W.T)
    return _mean_se(((est - thetas[m]) ** 2).sum(1))


def _path_reference(data, budget, n, seed):
    """Bayes loss of the ``path`` policy on the tokens channel under the CLT law of its readings: each
    sample reads the nodes of its decoded path (signs of its readings) from the exact statistic S, and is
    decoded with the law of its own rows (a law per sample)."""
    rng = np.random.default_rng(seed)
    thetas = _leaves(data)
    m = rng.integers(0, len(thetas), n)
    (S,) = token_statistics([thetas[m]], data.n_tokens, data.s2, rng)
    node, rows, phi = np.ones(n, dtype=int), np.zeros((n, budget, data.dim)), np.zeros((n, budget))
    for l in range(budget):
        rows[np.arange(n), l, node - 1] = 1.0
        phi[:, l] = S[np.arange(n), node - 1]
        node = 2 * node + (phi[:, l] < 0)
    laws = [LinearKeys(rows[j]).law(thetas, n_tokens=data.n_tokens, s2=data.s2) for j in range(n)]
    law = ReadingLaw(np.stack([w.mean for w in laws]), np.stack([w.cov for w in laws]))
    est = law_posterior_mean(thetas, np.zeros(len(thetas)), law, phi)
    return _mean_se(((est - thetas[m]) ** 2).sum(1))


def test_model_c_audit_is_the_bayes_loss_of_its_design():
    """Hand-built Model C (linear keys W, its exact LMMSE readout): its own loss is the exact linear theory,
    and Bayes on its readings is the Bayes loss of its design on the tokens channel (5 SE each)."""
    W = np.array([[1, 1, 0, 0, 0, 0, 0], [1, 0, -1, 0, 0, 0, 0.0]])
    W /= np.linalg.norm(W, axis=1, keepdims=True)  # unit rows that mix the nodes: the covariance matters
    a = audit_model(linear_model(DATA, W), DATA, samples=1500, token_sample=8192, seed=1)
    assert a.loss.z(linear_readout(DATA, W)[1]) == pytest.approx(0, abs=5)
    ref, ref_se = _design_reference(DATA, W, 40_000, seed=2)
    assert abs(a.bayes_on_readings.value - ref) < 5 * math.hypot(a.bayes_on_readings.stderr, ref_se)
    # the linear readout leaves a gap that Bayes decoding closes (far beyond noise on this prior)
    assert a.decoder_gap.value > 10 * a.decoder_gap.stderr
    assert a.decoder_gap.value == pytest.approx(a.loss.value - a.bayes_on_readings.value, rel=1e-12)
    rows = {s.channel: s for s in a.stein}
    assert rows[1].norm == pytest.approx(1.0, abs=0.05) and rows[1].energy_by_depth[0] == pytest.approx(0.5, abs=0.05)


@pytest.mark.heavy
def test_path_model_audit_is_the_path_monte_carlo_under_tokens():
    """The hand-built path model (keys follow the decoded path, sign readout): Bayes on its readings is the
    loss of the path policy decoded under the CLT law of its adaptive readings (5 SE), and its keys read
    the path node of each depth."""
    a = audit_model(path_model(DATA, 3), DATA, samples=800, token_sample=4096, seed=3)
    ref, ref_se = _path_reference(DATA, 3, 20_000, seed=4)
    assert abs(a.bayes_on_readings.value - ref) < 5 * math.hypot(a.bayes_on_readings.stderr, ref_se)
    # and the path Monte Carlo of fvnum under tokens, with its exact CLT decoder
    mc = fvnum.loss_mc(fv_prior(DATA), "path", 3, fvnum.tokens(DATA.n_tokens, s2=DATA.s2), samples=20_000, seed=5)
    assert mc.decoder.startswith("exact")
    assert abs(a.bayes_on_readings.value - mc.value) < 5 * math.hypot(a.bayes_on_readings.stderr, mc.stderr)
    assert a.decoder_gap.value > -5 * a.decoder_gap.stderr  # the sign decoder is not better than Bayes
    for s in a.stein:  # layer l reads one node of depth l, with a unit row (sample moments on 4096 tokens:
        # the other D - 1 nodes get about (D - 1) / 4096 of the energy)
        assert s.energy_by_depth[s.layer - 1] == pytest.approx(1.0, abs=6 * 6 / 4096)
        assert s.norm == pytest.approx(1.0, abs=0.05)
    d = a.to_dict()
    assert [len(layer["channels"]) for layer in d["layers"]] == [1, 1, 1]
    assert set(d) >= {"loss", "bayes_on_readings", "decoder_gap", "layers", "decoder"}
    assert d["decoder"].startswith("exact")


def test_audit_is_reproducible_and_refuses_bad_arguments():
    model = path_model(DATA, 2)
    one = audit_model(model, DATA, samples=50, token_sample=256, seed=5)
    assert audit_model(model, DATA, samples=50, token_sample=256, seed=5).to_dict() == one.to_dict()
    assert audit_model(model, DATA, samples=50, token_sample=256, seed=6).to_dict() != one.to_dict()
    with pytest.raises(ValueError, match="samples"):
        audit_model(model, DATA, samples=1)
    with pytest.raises(ValueError, match="D = 7"):
        audit_model(model, DataConfig(depth=4), samples=10)
    with pytest.raises(ValueError, match="TrainResult"):
        audit(object())


def test_fv_audit_of_a_run_folder(run_folder, capsys):
    assert main(["audit", str(run_folder), "--samples", "40", "--token-sample", "512", "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert d["model"] == "A" and d["budget"] == 2 and d["bayes_on_readings"]["n"] == 40
    assert d["decoder_gap"]["value"] == pytest.approx(d["loss"]["value"] - d["bayes_on_readings"]["value"])
    # the same numbers from the Python API on the loaded run
    again = audit(str(run_folder), samples=40, token_sample=512)
    assert again.bayes_on_readings.value == pytest.approx(d["bayes_on_readings"]["value"], rel=1e-12)


def _copy(src, dst):
    dst.mkdir()
    for f in src.iterdir():
        (dst / f.name).write_bytes(f.read_bytes())
    return dst


@pytest.mark.parametrize("damage, message", [
    ("no_result", "is not a finished fv train run"),
    ("truncated", "is corrupt or truncated"),
    ("empty_folder", "is not an fv train run folder"),
    ("result_json", "is not a readable training result"),
    ("missing", "no run folder"),
])
def test_fv_audit_refuses_a_folder_that_is_not_a_finished_run(run_folder, tmp_path, capsys, damage, message):
    folder = tmp_path / "run"
    if damage == "empty_folder":
        folder.mkdir()
    elif damage != "missing":
        _copy(run_folder, folder)
    if damage == "no_result":
        (folder / "result.json").unlink()
    elif damage == "truncated":
        ck = folder / "checkpoint.pt"
        ck.write_bytes(ck.read_bytes()[:500])
    elif damage == "result_json":
        (folder / "result.json").write_text("{")
    assert main(["audit", str(folder), "--samples", "10"]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_gaussian_prior_audit_of_linear_keys_is_near_the_linear_theory():
    """Matched Gaussian prior, hand-built Model C: the importance-sampling Bayes decoder (named approximate)
    is an upper bound on the MMSE, which linear keys leave within a few per cent of the exact linear theory;
    a decoder over prior draws alone would sit far above it."""
    data = DataConfig(prior="gaussian", depth=3, alpha=0.5, n_tokens=32)
    W = np.eye(7)[:2]
    a = audit_model(linear_model(data, W), data, samples=150, token_sample=1024, n_latents=128, seed=7)
    assert a.decoder.startswith("approximate")
    assert a.loss.z(linear_readout(data, W)[1]) == pytest.approx(0, abs=5)
    assert abs(a.decoder_gap.value) < 0.03 * a.loss.value + 5 * a.decoder_gap.stderr


def test_fv_audit_is_priced_before_work(run_folder, capsys):
    """Issue 32: ``fv --max-seconds 1 audit RUN --samples 10^7 --token-sample 10^7`` (tens of GB) is refused in
    one line naming the largest token sample that fits, and a size over the time cap names the contexts that
    fit; the size it names is accepted by the same price."""
    from bridges.analysis.audit import audit_cost, check_audit_cost
    from fvsym.guards.limits import available_memory, time_limit

    code = main(["--max-seconds", "1", "audit", str(run_folder), "--samples", "10000000", "--token-sample", "10000000"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "token sample" in err[0] and "largest" in err[0], err
    code = main(["--max-seconds", "30", "audit", str(run_folder), "--samples", "1000000", "--token-sample", "512"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "contexts (--samples) fit" in err[0], err
    most = int(err[0].rsplit("at most ", 1)[1].split()[0])
    sizes = dict(tree=True, depth=3, dim=7, layers=2, width=1, budget=2, mlp_width=64, hidden_layers=2,
                 token_sample=512)
    with time_limit(30):
        check_audit_cost(**sizes, samples=most)
        with pytest.raises(ValueError):
            check_audit_cost(**sizes, samples=2 * most + 2)
    memory, _ = audit_cost(**{**sizes, "samples": 10**7, "token_sample": 10**7})
    assert memory > 8.0 * 256 * 10**7 * 2 > available_memory() / 100  # the keys of one batch on the sample alone
