"""FLOPs of a training step, counted on the model itself, and FLOP-matched schedules (issue 29: Model A trained
for the compute of Model B's run). A leaf of ``bridges``: it imports the model, data and training code, and
nothing that prices or runs studies (``bridges.studies.scaling`` imports it)."""
from __future__ import annotations

from fvsym.errors import InputError

from bridges.prices.memory import check_train_memory


def step_flops(cfg) -> float:
    """FLOPs of one training step of ``cfg`` (a ``RunConfig``): the forward pass and the backward pass of its
    training loss on one batch of ``cfg.train.batch`` contexts of ``cfg.data.n_tokens`` tokens, counted by
    ``torch.utils.flop_counter.FlopCounterMode`` on the model itself (every matrix product, 2 FLOPs a
    multiply-add; elementwise work is not counted). The count is exact for the model as built, whatever it is
    (a registered model, softmax attention), and does not depend on the weights: the model is built untrained
    and the batch is drawn with seed 0. The optimizer's update is not counted (a few FLOPs a parameter).

    The count compares models, not machines: ``flop_matched_steps`` turns it into a schedule. It is computed once
    per model, data and batch in a process (the steps do not enter it)."""
    t = cfg.train
    what = (cfg.data, cfg.model, t.batch, t.loss, t.aux_readout)
    if what not in _FLOPS:
        _FLOPS[what] = _count_step_flops(cfg)
    return _FLOPS[what]


_FLOPS: dict = {}  # (data, model, batch, loss, aux_readout) -> FLOPs of one training step


def _count_step_flops(cfg) -> float:
    """Counted at 1 and 2 contexts and extended to the run's batch (a step's FLOPs are affine in the batch: every
    product is per context, or once per step), so the count allocates two contexts, not a batch: a configuration
    too large to train is still counted, and one whose weights and two contexts do not fit is refused in one line
    by the memory check of training."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from bridges.training.data import TRAIN_STREAM, ContextSampler
    from bridges.models.networks import build_model
    from bridges.training.train import training_loss

    t = cfg.train
    check_train_memory(cfg.replace(train=dict(batch=2, tokens_from=0, batch_late=0)),
                       f"counting the FLOPs of {cfg.model.model} at depth {cfg.data.depth}")
    counts = []
    with torch.random.fork_rng(devices=[]):  # building the model draws weights: the caller's stream is kept
        model = build_model(cfg)
        sampler = ContextSampler(cfg.data)
        for n in (1, 2):
            contexts = sampler.sample(n, sampler.generator(0, TRAIN_STREAM, 0))
            with FlopCounterMode(display=False) as counter:
                training_loss(model, contexts, t.loss, t.aux_readout).backward()
            counts.append(float(counter.get_total_flops()))
    flops = counts[0] + (counts[1] - counts[0]) * (t.batch - 1)
    if not flops > 0:
        raise InputError(f"{cfg.model.model} counts no matrix products in a training step: no FLOPs to match")
    return flops


def flop_matched_steps(cfg, reference) -> int:
    """The steps of ``cfg`` whose training FLOPs equal those of ``reference`` (a ``RunConfig`` with its own steps
    and batch): ``reference.train.steps x step_flops(reference) / step_flops(cfg)``, rounded, at least 1. At the
    scaling study's cell, Model A at budget 6 matched to Model B's 15,000 steps trains for about 5,250 steps."""
    steps = reference.train.steps * step_flops(reference) / step_flops(cfg)
    return max(1, round(steps))
