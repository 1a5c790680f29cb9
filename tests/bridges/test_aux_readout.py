"""The auxiliary readout after every layer (``TrainConfig.aux_readout``, ``fv train --aux-readout W``): keys
unchanged at 0, the loss equal to the hand-computed sum over the partial workspaces, a few training steps,
and bad values refused in one line."""
import math

import pytest
import torch

from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.training.data import TRAIN_STREAM, ContextSampler
from bridges.models.networks import build_model
from bridges.training.train import context_losses, train, training_loss
from tests._cli import fv

DATA = DataConfig(prior="tree", depth=3, n_tokens=8)


def _config(model="A", budget=3, readout="decode", **train):
    return RunConfig(DATA, ModelConfig(model=model, budget=budget, mlp_width=8, hidden_layers=1, readout=readout),
                     TrainConfig(steps=3, batch=4, eval_every=3, eval_batches=1, out=None, **train))


def test_key_and_dictionary_unchanged_at_zero():
    plain, zero = _config(), _config(aux_readout=0.0)
    assert zero.key() == plain.key() and zero.to_dict() == plain.to_dict()
    assert "aux_readout" not in zero.to_dict()["train"]
    weighted = _config(aux_readout=0.5)
    assert weighted.key() != plain.key() and weighted.to_dict()["train"]["aux_readout"] == 0.5
    assert RunConfig.from_json(weighted.to_json()) == weighted
    assert RunConfig.from_json(plain.to_json()).train.aux_readout == 0.0


def test_argv_round_trip():
    cfg = _config(aux_readout=0.25)
    assert RunConfig.from_options(_parsed(cfg.to_argv())) == cfg


def _parsed(argv):
    from bridges.runs.config import RUN_OPTION_NAMES

    values = {}
    for flag, text in zip(argv[::2], argv[1::2]):
        option = RUN_OPTION_NAMES[flag[2:].replace("-", "_")]
        values[option.dest] = option.parse(text)
    return values


def _partial_workspaces(model, c):
    """The workspace after each layer, built by hand: slot l written by layer l, later slots zero."""
    p = torch.zeros(c.x.shape[0], model.budget)
    out = []
    for l, layer in enumerate(model.layers):
        phi = layer(c.x, c.y, p)  # (batch, 1)
        p = torch.cat([p[:, :l], phi, p[:, l + 1:]], dim=1)
        out.append(p)
    return out


@pytest.mark.parametrize("readout, kind", [("decode", "theta"), ("decode", "query"), ("generic", "query")])
def test_loss_is_the_hand_computed_sum(readout, kind):
    torch.manual_seed(0)
    cfg = _config(readout=readout, loss=kind, aux_readout=0.5)
    model = build_model(cfg)
    sampler = ContextSampler(DATA)
    c = sampler.sample(5, sampler.generator(0, TRAIN_STREAM, 0))
    workspaces = _partial_workspaces(model, c)
    with torch.no_grad():
        def loss_of(p):
            if kind == "theta":
                return ((model.readout(p) - c.theta) ** 2).sum(-1).mean()
            y_hat = (model.readout(p) * c.x_q).sum(-1) if readout == "decode" else model.readout(p, c.x_q)
            return ((y_hat - c.target) ** 2).mean()

        final = loss_of(workspaces[-1])
        aux = (loss_of(workspaces[0]) + loss_of(workspaces[1])) / 2
        got = training_loss(model, c, kind, 0.5)
        assert torch.allclose(context_losses(model, c, kind).mean(), final, rtol=1e-4, atol=1e-6)
        assert torch.allclose(got, final + 0.5 * aux, rtol=1e-4, atol=1e-6)
        assert float(aux) > 0 and not torch.allclose(got, final)
        assert torch.equal(training_loss(model, c, kind, 0.0), context_losses(model, c, kind).mean())


def test_aux_loss_reaches_every_layer():
    torch.manual_seed(1)
    cfg = _config(aux_readout=1.0)
    model = build_model(cfg)
    sampler = ContextSampler(DATA)
    c = sampler.sample(6, sampler.generator(0, TRAIN_STREAM, 0))
    final = context_losses(model, c, "theta").mean()
    aux = training_loss(model, c, "theta", 1.0) - final  # the auxiliary part alone
    aux.backward()
    grads = [sum(float(q.grad.abs().sum()) for q in layer.parameters() if q.grad is not None)
             for layer in model.layers]
    assert grads[0] > 0 and grads[1] > 0 and grads[2] == 0  # layer 3 writes no partial workspace read here


def test_a_few_steps_train():
    result = train(_config(aux_readout=0.5), progress=False)
    assert result.config.train.aux_readout == 0.5
    assert len(result.history) == 2 and math.isfinite(result.loss) and result.loss >= 0


def one_line(err, *fragments):
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for f in fragments:
        assert f in lines[0], err


BASE = ("train", "--prior", "tree", "--depth", "3", "--tokens", "8", "--budget", "3", "--mlp-width", "8",
        "--hidden-layers", "1", "--steps", "1", "--out", "")


@pytest.mark.parametrize("value", ["-0.5", "nan", "inf", "-inf", "abc", "1e400", ""])
def test_cli_refuses_bad_weights_in_one_line(value):
    code, _, err = fv(*BASE, "--model", "A", "--aux-readout", value)
    assert code == 2
    one_line(err, "--aux-readout")


@pytest.mark.parametrize("model", ["B", "C"])
def test_cli_refuses_one_layer_models(model):
    code, _, err = fv(*BASE, "--model", model, "--aux-readout", "0.5")
    assert code == 2
    one_line(err, "aux_readout", "adaptive")


def test_cli_refuses_a_single_layer():
    code, _, err = fv(*BASE[:7], "--budget", "1", *BASE[9:], "--model", "A", "--aux-readout", "0.5")
    assert code == 2
    one_line(err, "aux_readout", "budget")


@pytest.mark.parametrize("value", [-1.0, math.nan, math.inf, "0.5"])
def test_library_refuses_bad_weights(value):
    with pytest.raises(ValueError, match="aux_readout"):
        TrainConfig(aux_readout=value)
    with pytest.raises(ValueError, match="aux_readout"):
        _config(model="B", aux_readout=0.5)
