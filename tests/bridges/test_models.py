"""Models A, B, C of THEORY.md section 7: shapes, the direct-sum workspace, taps, hand-built models."""
import fvnum
import math

import pytest
import torch

from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.data import ContextSampler, path_nodes, step_generator
from bridges.models.networks import (build_model, key_rows, linear_model, linear_readout, path_model, top_levels_keys,
                            top_levels_model)
from bridges.models.taps import patch, record, tap_context, tap_names, taps

torch.set_num_threads(1)


def _model(model, budget=3, depth=3, **kw):
    torch.manual_seed(0)
    cfg = RunConfig(DataConfig(depth=depth, n_tokens=16), ModelConfig(model, budget, mlp_width=16, **kw))
    return build_model(cfg), ContextSampler(cfg.data)


@pytest.mark.parametrize("name,layers,d", [("A", 3, 1), ("B", 1, 3), ("C", 1, 3)])
def test_shapes_and_tap_names(name, layers, d):
    model, s = _model(name)
    c = s.sample(5, step_generator(0, 0, 0))
    with record(model) as r:
        out = model(c.x, c.y, c.x_q)
    assert out.y_hat.shape == (5,) and out.theta_hat.shape == (5, 7) and out.workspace.shape == (5, 3)
    expected = {f"layers.{l}.{t}" for l in range(1, layers + 1) for t in ("keys", "phi")}
    expected |= {f"workspace.{l}" for l in range(1, layers + 1)} | {"theta_hat"}
    assert set(tap_names(model)) == set(r) == expected
    for l in range(1, layers + 1):
        assert r[f"layers.{l}.keys"].shape == (5, 16, d)
        assert r[f"layers.{l}.phi"].shape == (5, d)
        assert r[f"workspace.{l}"].shape == (5, 3)
    assert torch.allclose(out.y_hat, (r["theta_hat"] * c.x_q).sum(1))


def test_generic_readout_has_no_theta_hat():
    model, s = _model("A", readout="generic")
    c = s.sample(4, step_generator(0, 0, 0))
    out = model(c.x, c.y, c.x_q)
    assert out.theta_hat is None and out.y_hat.shape == (4,) and "theta_hat" not in tap_names(model)
    with pytest.raises(ValueError, match="does not decode"):
        model.decode(out.workspace)


@pytest.mark.parametrize("name", ["A", "B", "C"])
def test_phi_is_the_token_average_of_keys_times_values(name):
    model, s = _model(name)
    c = s.sample(6, step_generator(1, 0, 0))
    with record(model) as r:
        model(c.x, c.y, c.x_q)
    for l in range(1, model.n_layers + 1):
        k = r[f"layers.{l}.keys"]  # (batch, N, d)
        assert torch.allclose(r[f"layers.{l}.phi"], (k * c.y[..., None]).mean(1), atol=1e-6)


def test_a_layer_writes_only_its_own_slots():
    model, s = _model("A", budget=4, depth=3)
    c = s.sample(6, step_generator(2, 0, 0))
    with record(model) as r:
        model(c.x, c.y, c.x_q)
    previous = torch.zeros(6, 4)  # the empty workspace
    for l in range(1, 5):
        w = r[f"workspace.{l}"]
        others = [j for j in range(4) if j != l - 1]
        assert torch.equal(w[:, others], previous[:, others])  # earlier slots unchanged, later still zero
        assert torch.equal(w[:, l - 1 : l], r[f"layers.{l}.phi"])  # slot l holds phi_l
        assert torch.any(w[:, l - 1] != 0)
        previous = w


def test_patched_phi_lands_in_its_slot_and_later_keys_see_it():
    model, s = _model("A", budget=3)
    c = s.sample(4, step_generator(3, 0, 0))
    with record(model) as before:
        model(c.x, c.y, c.x_q)
    value = torch.full((4, 1), 2.5)
    with patch(model, "layers.2.phi", value) as calls, record(model) as after:
        model(c.x, c.y, c.x_q)
    assert calls == {"layers.2.phi": 1}
    assert torch.equal(after["workspace.2"][:, 1:2], value)
    assert torch.equal(after["workspace.2"][:, :1], before["workspace.2"][:, :1])
    assert not torch.allclose(after["layers.3.keys"], before["layers.3.keys"])  # the router reads the workspace
    assert torch.equal(after["layers.2.keys"], before["layers.2.keys"])


def test_model_c_keys_ignore_the_workspace_and_parameters_are_w_and_u():
    model, s = _model("C", budget=3)
    assert {n: tuple(p.shape) for n, p in model.named_parameters()} == {
        "layers.0.keys.weight": (3, 7), "readout.U": (7, 3)}
    c = s.sample(4, step_generator(4, 0, 0))
    with record(model, "layers.1.keys") as r:
        out = model(c.x, c.y, c.x_q)
    assert torch.allclose(r["layers.1.keys"], c.x @ model.layers[0].keys.weight.T)
    U = model.readout.U
    assert torch.allclose(out.y_hat, torch.einsum("bd,de,be->b", c.x_q, U, out.workspace), atol=1e-5)


def _path_reference(x, y, budget):
    """Tokens-channel statistics of the path strategy, one context at a time (THEORY.md section 6)."""
    phis, nodes = torch.zeros(x.shape[0], budget), torch.zeros(x.shape[0], budget, dtype=torch.long)
    for b in range(x.shape[0]):
        n = 1
        for l in range(budget):
            phi = float((y[b] * x[b, :, n - 1]).double().mean())
            phis[b, l], nodes[b, l] = phi, n
            n = 2 * n + (1 if phi < 0 else 0)  # a tie counts as +1
    return phis, nodes


def test_hand_built_path_model_reproduces_the_tokens_channel_statistics():
    data = DataConfig(depth=4, n_tokens=32, alpha=0.5)
    model = path_model(data, 4)
    s = ContextSampler(data)
    c = s.sample(64, step_generator(5, 0, 0))
    with record(model) as r:
        model(c.x, c.y, c.x_q)
    phis, nodes = _path_reference(c.x, c.y, 4)
    got = torch.cat([r[f"layers.{l}.phi"] for l in range(1, 5)], 1)
    assert torch.allclose(got, phis, atol=1e-6)
    for l in range(1, 5):  # each layer's keys are the coordinate of the node the reference reads
        idx = (nodes[:, l - 1] - 1).view(-1, 1, 1).expand(-1, 32, 1)
        assert torch.equal(r[f"layers.{l}.keys"], c.x.gather(2, idx))
    # with little noise the decoded path is the true one, and the sign decoder is exact on the prefix
    quiet = DataConfig(depth=4, n_tokens=4096, alpha=0.5, s2=0.0)
    cq = ContextSampler(quiet).sample(16, step_generator(6, 0, 0))
    out = path_model(quiet, 4)(cq.x, cq.y, cq.x_q)
    assert torch.equal(torch.sign(out.workspace).to(torch.int8), cq.signs)
    assert torch.allclose(out.theta_hat, cq.theta)


@pytest.mark.parametrize("prior,design", [("tree", "top"), ("gaussian", "top"), ("tree", "dense")])
def test_hand_built_model_c_reaches_the_linear_mmse_theory(prior, design):
    data = DataConfig(prior=prior, depth=3, n_tokens=8, alpha=0.5)
    if design == "top":
        W = top_levels_keys(data, 3)
        model = top_levels_model(data, 3)
    else:
        W = torch.linalg.qr(torch.randn(7, 3, generator=torch.Generator().manual_seed(0), dtype=torch.float64))[0].T
        model = linear_model(data, W)
    _, exact = linear_readout(data, W)
    s = ContextSampler(data)
    losses = []
    for i in range(10):
        c = s.sample(2000, step_generator(7, 0, i))
        with torch.no_grad():
            losses.append(((model(c.x, c.y, c.x_q).theta_hat - c.theta) ** 2).sum(1).double())
    losses = torch.cat(losses)
    mean, se = float(losses.mean()), float(losses.std()) / math.sqrt(losses.numel())
    assert abs(mean - exact) <= 5 * se, (mean, exact, se)
    assert exact < float(torch.trace(s.cov)) - 0.5  # the design is informative at this noise


def test_tap_helpers_refuse_unknown_names_and_always_remove_hooks():
    model, s = _model("A")
    c = s.sample(2, step_generator(8, 0, 0))
    with pytest.raises(ValueError, match="unknown tap 'layers.9.keys'; available: layers.1.keys"):
        with record(model, ["layers.9.keys"]):
            pass
    with pytest.raises(ZeroDivisionError):
        with tap_context(model, {"layers.1.phi": lambda t: 1 / 0}):
            model(c.x, c.y, c.x_q)
    assert all(not t._forward_hooks for t in taps(model).values())
    with pytest.raises(ValueError, match="has shape"):
        with patch(model, "layers.1.keys", torch.zeros(3, 3)):
            model(c.x, c.y, c.x_q)
    with pytest.raises(RuntimeError, match="never ran"):
        with patch(model, "layers.1.keys", torch.zeros(2, 16, 1)):
            pass
    assert all(not t._forward_hooks for t in taps(model).values())


def test_hand_built_models_refuse_bad_budgets():
    with pytest.raises(ValueError, match="budget"):
        path_model(DataConfig(depth=3), 4)
    with pytest.raises(ValueError, match="tree prior"):
        path_model(DataConfig(prior="gaussian", depth=3), 2)
    with pytest.raises(ValueError, match="budget"):
        top_levels_keys(DataConfig(depth=2), 4)


def test_key_rows_are_the_design_of_c_and_the_path_nodes_of_the_path_model():
    model, s = _model("C", budget=3)
    p = torch.randn(4, 3)
    assert torch.allclose(key_rows(model, 1, p), model.layers[0].keys.weight.detach().expand(4, 3, 7), atol=1e-6)
    data = DataConfig(depth=3, n_tokens=16)
    pm = path_model(data, 3)
    signs = torch.tensor([[1, 1, 1], [1, -1, 1], [-1, 1, 1], [-1, -1, 1]], dtype=torch.int8)
    p = torch.cat([signs[:, :2].float(), torch.zeros(4, 1)], 1)  # readings of layers 1, 2 so far
    nodes = path_nodes(signs)  # (4, 3)
    for l in (1, 2, 3):
        assert torch.equal(key_rows(pm, l, p, n_samples=8)[:, 0], torch.eye(7)[nodes[:, l - 1] - 1])
    with pytest.raises(ValueError, match="layer must lie in 1..3"):
        key_rows(pm, 4, p)


def test_path_model_with_sign_decoder_has_the_noiseless_path_loss():
    """Nearly noiseless tokens: every context loses exactly sum_{k > B} a_k^2 = alpha^B (1 - alpha^(K-B)) / (1 - alpha)."""
    data = DataConfig(depth=4, n_tokens=4096, alpha=0.5, s2=0.0)
    c = ContextSampler(data, dtype=torch.float64).sample(16, step_generator(9, 0, 0))
    for budget in (1, 2, 3):
        with torch.no_grad():
            out = path_model(data, budget)(c.x.float(), c.y.float(), c.x_q.float())
        loss = ((out.theta_hat.double() - c.theta) ** 2).sum(1)
        exact = 0.5**budget * (1 - 0.5 ** (4 - budget)) / (1 - 0.5)
        assert torch.allclose(loss, torch.full_like(loss, exact), rtol=1e-6)


def test_hand_built_path_model_with_bayes_readout_reaches_fvnum_path_loss():
    """THEORY.md section 7 against section 6: Model A with the path keys and fvnum's exact Bayes decoder of
    its statistics phi_l, on sampled tokens, has fvnum's tokens-channel path loss (no training)."""
    import fvnum
    from bridges.training.data import fv_prior
    from bridges.patching.keys import path_bayes_decoder
    from bridges.training.train import evaluate

    data = DataConfig(prior="tree", depth=4, alpha=0.5, n_tokens=32)  # small N: routing errors happen
    model = path_model(data, 3, readout=path_bayes_decoder(data))
    got = evaluate(model, ContextSampler(data), n_batches=24)
    want = fvnum.loss_mc(fv_prior(data), "path", 3, fvnum.tokens(32, s2=data.s2), samples=200_000, seed=1)
    assert abs(got.value - want.value) < 5 * (got.stderr**2 + want.stderr**2) ** 0.5
    noiseless = 0.125
    assert want.value > noiseless + 10 * want.stderr  # the test sees the noise, not just the noiseless loss


# --- the fast encoder against a straightforward per-layer implementation --------------------------------
def _reference_forward(model, x, y):
    """Models A/B written the obvious way: layer by layer, each key MLP on ``[x_i, p]`` token-major."""
    p = torch.zeros(x.shape[0], model.budget, dtype=x.dtype)  # (batch, B)
    d = model.width
    for l, layer in enumerate(model.layers):
        mlp = layer.keys.mlp
        w_in = torch.cat([mlp.inp.weight, mlp.inp_shared.weight], 1)  # (mlp_width, D + B)
        u = torch.cat([x, p[:, None, :].expand(-1, x.shape[1], -1)], -1)  # (batch, N, D + B)
        h = u @ w_in.T + mlp.inp.bias
        for module in mlp.body:
            h = module(h)  # GELU and Linear, token-major
        phi = (h * y[..., None]).mean(1)  # (batch, d)
        p = torch.cat([p[:, : l * d], phi, p[:, (l + 1) * d:]], 1)
    return model.readout(p)  # (batch, D)


@pytest.mark.parametrize("name,hidden", [("A", 2), ("A", 3), ("B", 2), ("A", 1)])
def test_fast_encoder_computes_the_reference_function_and_gradients(name, hidden):
    torch.manual_seed(1)
    cfg = RunConfig(DataConfig(depth=3, n_tokens=9), ModelConfig(name, 3, mlp_width=8, hidden_layers=hidden),
                    TrainConfig(precision="fp32"))
    model = build_model(cfg).double()
    for param in model.parameters():  # away from the near-zero initial readout
        param.data.normal_(0, 0.5)
    s = ContextSampler(cfg.data, dtype=torch.float64)
    c = s.sample(5, step_generator(3, 0, 0))
    fast = model(c.x, c.y, c.x_q).theta_hat
    ref = _reference_forward(model, c.x, c.y)
    assert torch.allclose(fast, ref, rtol=1e-12, atol=1e-12)
    params = list(model.parameters())
    g_fast = torch.autograd.grad(fast.square().sum(), params, allow_unused=True)  # layer 1 skips its zero workspace
    g_ref = torch.autograd.grad(ref.square().sum(), params)
    for a, b, param in zip(g_fast, g_ref, params):
        assert torch.allclose(torch.zeros_like(param) if a is None else a, b, rtol=1e-10, atol=1e-12)


def test_bf16_keys_stay_close_to_fp32_and_everything_after_is_float32():
    torch.manual_seed(2)
    cfg = RunConfig(DataConfig(depth=4, n_tokens=64), ModelConfig("A", 3, mlp_width=32), TrainConfig(precision="bf16"))
    model = build_model(cfg)
    assert model.autocast == torch.bfloat16
    for param in model.parameters():
        param.data.normal_(0, 0.3)
    s = ContextSampler(cfg.data)
    c = s.sample(64, step_generator(4, 0, 0))
    with record(model) as r:
        low = model(c.x, c.y, c.x_q).theta_hat
    assert all(v.dtype == torch.float32 for v in r.values())
    model.autocast = None
    high = model(c.x, c.y, c.x_q).theta_hat
    rel = (low - high).norm() / high.norm()
    assert 0 < rel < 0.05, rel  # bfloat16 keys: a relative error of order 2^-8 per operation


def test_precision_auto_follows_the_hardware():
    from bridges.models.precision import autocast_dtype, native_bf16

    auto = autocast_dtype("auto", "cpu", has_mlp_keys=True)
    assert auto == (torch.bfloat16 if native_bf16("cpu") else None)
    assert autocast_dtype("fp32", "cpu", has_mlp_keys=True) is None
    assert autocast_dtype("bf16", "cpu", has_mlp_keys=False) is None  # Model C: nothing to gain
    c = build_model(RunConfig(DataConfig(depth=3), ModelConfig("C", 2), TrainConfig(precision="bf16")))
    assert c.autocast is None
    with pytest.raises(ValueError, match="unknown precision"):
        autocast_dtype("fp16", "cpu", has_mlp_keys=True)
