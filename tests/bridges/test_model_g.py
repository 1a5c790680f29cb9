"""Model G, deep linear self-attention of docs/theory.md section 13: with ``Gamma_l = K_l = gamma_l I`` it is L steps
of gradient descent (held to a numpy loop), label values never update the residuals, its shapes and taps, its
configuration and refusals, its price, and a tiny training run."""
import numpy as np
import pytest
import torch

from bridges.models.gd import GDModel
from bridges.models.networks import build_model
from bridges.models.taps import record, tap_names
from bridges.prices.gd import parameter_count
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from fvsym.errors import InputError

torch.set_num_threads(1)
GAUSS = DataConfig(prior="gaussian", cov="isotropic", depth=3, n_tokens=12)  # D = 7


def _tokens(seed=0, batch=5, N=12, D=7):
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((batch, N, D))
    theta = rng.standard_normal((batch, D))
    y = np.einsum("bnd,bd->bn", X, theta) + 0.1 * rng.standard_normal((batch, N))
    return X, y


def _gd_numpy(X, y, gammas):
    """L steps of gradient descent on (1/2N) |y - X theta|^2 from theta = 0, step gamma_l at step l."""
    N = X.shape[1]
    theta = np.zeros((X.shape[0], X.shape[2]))
    out = []
    for g in gammas:
        residual = y - np.einsum("bnd,bd->bn", X, theta)
        theta = theta + g * np.einsum("bnd,bn->bd", X, residual) / N
        out.append(theta.copy())
    return out


@pytest.mark.parametrize("gammas", [(0.7,), (0.5, 0.9), (0.3, 1.1, 0.6, 0.8)])
def test_residual_values_with_gamma_equal_to_k_are_exactly_gradient_descent(gammas):
    X, y = _tokens()
    model = GDModel(7, len(gammas), "residual").double().set_steps(gammas)
    x_t, y_t = torch.from_numpy(X), torch.from_numpy(y)
    with record(model) as seen:
        theta_hat = model.encode(x_t, y_t).detach().numpy()
    want = _gd_numpy(X, y, gammas)
    assert np.max(np.abs(theta_hat - want[-1])) < 1e-12 * max(1.0, np.max(np.abs(want[-1])))
    for l, w in enumerate(want, 1):  # every layer's workspace is that step's estimate, its residual y - X theta_hat
        np.testing.assert_allclose(seen[f"workspace.{l}"].detach().numpy(), w, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(seen[f"layers.{l}.residual"].detach().numpy(), y - np.einsum("bnd,bd->bn", X, w),
                                   rtol=1e-12, atol=1e-11)


def test_k_other_than_gamma_is_not_gradient_descent():  # the equivalence test can fail
    X, y = _tokens()
    model = GDModel(7, 2, "residual").double().set_steps((0.5, 0.9), K=(0.2, 0.9))
    theta_hat = model.encode(torch.from_numpy(X), torch.from_numpy(y)).detach().numpy()
    assert np.max(np.abs(theta_hat - _gd_numpy(X, y, (0.5, 0.9))[-1])) > 1e-3


def test_label_values_never_update_the_residuals_and_add_the_same_reading_each_layer():
    X, y = _tokens(1)
    torch.manual_seed(0)
    model = GDModel(7, 3, "label").double()
    x_t, y_t = torch.from_numpy(X), torch.from_numpy(y)
    with record(model) as seen:
        theta_hat = model.encode(x_t, y_t)
    for l in (1, 2, 3):
        assert torch.equal(seen[f"layers.{l}.residual"], y_t)
    b = x_t.transpose(1, 2) @ y_t.unsqueeze(-1) / 12  # (batch, D, 1)
    gamma = sum(layer.Gamma for layer in model.blocks)
    torch.testing.assert_close(theta_hat, (gamma @ b).squeeze(-1), rtol=1e-12, atol=1e-12)  # one layer, summed


def test_token_values_contain_gradient_descent_and_move_the_tokens():
    X, y = _tokens(2)
    gammas = (0.5, 0.9)
    model = GDModel(7, 2, "token").double()
    D = 7
    with torch.no_grad():
        for layer, g in zip(model.blocks, gammas):
            layer.V.zero_()
            layer.V[:, D] = 1.0  # every head's value reads r
            layer.Kappa.zero_()
            layer.Kappa[:, :D] = g * torch.eye(D, dtype=torch.float64)  # head k's key reads g x_k
            layer.P.zero_()
            layer.P[D, D] = -1.0  # only r moves
            layer.Q.zero_()
            layer.Q[:D, :D] = g * torch.eye(D, dtype=torch.float64)
    theta_hat = model.encode(torch.from_numpy(X), torch.from_numpy(y)).detach().numpy()
    np.testing.assert_allclose(theta_hat, _gd_numpy(X, y, gammas)[-1], rtol=1e-11, atol=1e-11)
    torch.manual_seed(0)
    free = GDModel(7, 1, "token").double()
    with record(free, ["layers.1.residual"]):
        x = torch.from_numpy(X)
        z = free.blocks[0](x, torch.from_numpy(y), torch.from_numpy(y), x.new_zeros(5, 7))[0]
    assert not torch.equal(z, x)  # the x_i move too


@pytest.mark.parametrize("values", ["residual", "label", "token"])
def test_shapes_taps_budget_and_parameters(values):
    cfg = RunConfig(GAUSS, ModelConfig(model="G", layers=3, values=values), TrainConfig(out=None))
    assert (cfg.model.budget, cfg.model.n_layers, cfg.model.n_channels) == (21, 3, 7)  # budget L D
    assert cfg.model.theory_name == f"G-{values}" and cfg.key().startswith("G-gaussiso-K3-B21-N12-")
    torch.manual_seed(0)
    model = build_model(cfg)
    assert sum(p.numel() for p in model.parameters()) == parameter_count(7, 3, values)
    assert tap_names(model) == sorted(tap_names(model), key=tap_names(model).index)
    assert set(tap_names(model)) == {"theta_hat", *(f"workspace.{l}" for l in (1, 2, 3)),
                                     *(f"layers.{l}.residual" for l in (1, 2, 3))}
    X, y = _tokens(3, batch=4)
    x, y = torch.from_numpy(X).float(), torch.from_numpy(y).float()
    with record(model) as seen:
        out = model(x, y, torch.randn(4, 7))
    assert out.theta_hat.shape == (4, 7) and out.y_hat.shape == (4,) and seen["layers.2.residual"].shape == (4, 12)
    assert torch.equal(seen["workspace.3"], out.theta_hat) and torch.equal(seen["theta_hat"], out.theta_hat)


def test_the_configuration_keeps_the_other_models_keys_and_round_trips():
    for name in "ABCT":
        assert "values" not in ModelConfig(model=name).to_dict()
    g = ModelConfig(model="G")
    assert (g.layers, g.values) == (1, "residual")
    cfg = RunConfig(GAUSS, ModelConfig(model="G", layers=2, values="label"), TrainConfig(out=None))
    assert RunConfig.from_json(cfg.to_json()) == cfg and RunConfig.from_json(cfg.to_json()).key() == cfg.key()
    assert cfg.train.steps == 2 * cfg.model.spec.recipe.steps_per_budget  # the recipe's steps a layer
    tree = RunConfig(DataConfig(depth=3, n_tokens=16), ModelConfig(model="G", layers=2), TrainConfig(out=None))
    assert tree.model.budget == 14 and tree.key().startswith("G-tree-K3-B14-")


@pytest.mark.parametrize("kw, words", [
    (dict(model="A", values="label"), "values='label' applies to model G"),
    (dict(model="T", values="residual"), "values='residual' applies to model G"),
    (dict(model="G", values="keys"), "unknown values 'keys'"),
    (dict(model="G", heads=2), "heads=2 applies to model T; model G takes layers and values"),
    (dict(model="G", attention="softmax"), "attention='softmax'"),
    (dict(model="G", router="qk"), "router='qk' applies to models A and B"),
    (dict(model="G", layers=0), "layers"),
])
def test_bad_input_is_refused_in_one_line(kw, words):
    with pytest.raises(InputError) as err:
        ModelConfig(**kw)
    assert words in str(err.value) and "\n" not in str(err.value)


def test_a_budget_that_is_not_layers_times_d_and_bf16_are_refused():
    with pytest.raises(InputError, match=r"layers x D = 2 x 7 = 14, not budget=5"):
        RunConfig(GAUSS, ModelConfig(model="G", layers=2, budget=5))
    with pytest.raises(InputError, match="float32"):
        RunConfig(GAUSS, ModelConfig(model="G"), TrainConfig(precision="bf16"))


def test_the_cli_refuses_values_on_another_model_in_one_line_with_exit_2(capsys):
    from bridges.cli import main

    assert main(["train", "--model", "A", "--values", "label", "--out", ""]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "values='label' applies to model G" in err[0]


def test_it_is_priced_and_memory_checked():
    from bridges.prices.cost import step_seconds, train_seconds

    cfg = RunConfig(GAUSS, ModelConfig(model="G", layers=2), TrainConfig(out=None))
    assert 0 < step_seconds(cfg) < 0.1 and train_seconds(cfg) > 0
    assert cfg.check_resources() is cfg and 0 < cfg.memory_bytes() < 1e9


def test_a_tiny_model_g_trains_and_the_same_seed_gives_the_same_numbers():
    from bridges.training.train import train

    cfg = RunConfig(GAUSS, ModelConfig(model="G", layers=2),
                    TrainConfig(steps=60, batch=32, eval_every=60, eval_batches=1, warmup=5, out=None))
    a, b = train(cfg, progress=False), train(cfg, progress=False)
    assert a.loss == b.loss and [row[:4] for row in a.history] == [row[:4] for row in b.history]
    assert a.history[-1][2] < 0.8 * a.history[0][2]  # the held-out loss falls from step 0


def test_compare_sets_model_g_beside_its_gradient_descent_rows():
    from bridges.analysis.compare import beside_of, compare, to_markdown
    from bridges.analysis.gd import gd_row
    from bridges.training.train import train

    cfg = RunConfig(GAUSS, ModelConfig(model="G", layers=2),
                    TrainConfig(steps=200, batch=64, eval_every=200, eval_batches=1, warmup=5, out=None))
    result = train(cfg, progress=False)
    table = compare(result, samples=2_000, seed=0).to_dict()
    rows = {r["name"]: r for r in table["theory"]}
    assert set(rows) == {"gd_steps", "gd_steps_shared", "gd_steps_limit"}
    row = gd_row(cfg, samples=2_000, seed=0)
    assert rows["gd_steps"]["value"] == row.loss and rows["gd_steps"]["value"] <= rows["gd_steps_shared"]["value"] + \
        3 * rows["gd_steps"]["stderr"]
    b = beside_of(table)
    assert b["prediction"] == "gd_steps" and b["ratio"] == pytest.approx(result.loss / row.loss)
    assert "against its prediction" in to_markdown(table) and "(gd_steps)" in to_markdown(table)


def test_gd_row_refuses_another_model():
    from bridges.analysis.gd import gd_row

    with pytest.raises(InputError, match="model A has no values option"):
        gd_row(RunConfig(GAUSS, ModelConfig(model="A", budget=2)))
