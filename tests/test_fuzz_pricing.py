"""Hostile inputs of the prices, guards and the time cap (issue 32, items 1, 2 and 10): torch scalars (0-d
tensors of every dtype, tensors of other shapes, on the meta device, with gradients) in the Monte Carlo engine,
the bracket and the exact noisy recursion; sizes whose exact solves, weights or audits do not fit. Each either
works or ends in one ValueError line in the project's words (the command line: one line, exit 2); never an
AttributeError from a torch dtype, never a traceback, never work started on a size that does not fit.

Example counts follow the hypothesis profiles of ``tests/conftest.py`` (``dev``, ``ci``, ``thorough``).
"""
import fvnum
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from fvnum import bounds, loss_mc, noisy_bellman
from fvsym.priors import TreePrior
from tests._cli import examples, fv, one_line

torch.set_num_threads(1)
PRIOR = TreePrior(2, "1/2")


DTYPES = [torch.float64, torch.float32, torch.float16, torch.bfloat16, torch.int64, torch.int32, torch.int8,
          torch.uint8, torch.bool, torch.complex64]
NUMBERS = st.one_of(st.floats(allow_nan=True, allow_infinity=True, width=32), st.integers(-5, 10**6))


@st.composite
def torch_values(draw):
    """A torch tensor: mostly 0-d of any dtype, sometimes of shape (k,) or (1, 1), with or without gradients."""
    value = draw(NUMBERS)
    dtype = draw(st.sampled_from(DTYPES))
    shape = draw(st.sampled_from([(), (), (), (1,), (2,), (1, 1), (0,)]))
    try:
        t = torch.full(shape, value, dtype=dtype)
    except (RuntimeError, OverflowError, TypeError):
        t = torch.zeros(shape, dtype=dtype)
    if draw(st.booleans()) and t.is_floating_point():
        t.requires_grad_(True)
    return t


def works_or_refused(call):
    """A finite result, or one ValueError line; any other exception (AttributeError above all) fails."""
    try:
        result = call()
    except ValueError as exc:
        message = str(exc)
        assert message and "\n" not in message and "dtype" not in message.lower() or "torch" in message, message
        return None
    return result


@examples(30)
@given(tau=torch_values(), samples=st.one_of(torch_values(), st.just(200)), budget=st.one_of(torch_values(), st.just(2)))
def test_torch_scalars_in_loss_mc(tau, samples, budget):
    est = works_or_refused(lambda: loss_mc(PRIOR, "path", budget, fvnum.gaussian(tau), samples=samples, seed=0, threads=1))
    if est is not None:
        assert math.isfinite(est.value) and math.isfinite(est.stderr)


@examples(10)
@given(tau=torch_values(), budget=st.one_of(torch_values(), st.just(2)))
def test_torch_scalars_in_the_noisy_recursion(tau, budget):
    solved = works_or_refused(lambda: noisy_bellman(PRIOR, budget, fvnum.gaussian(tau), threads=1))
    if solved is not None:
        assert math.isfinite(solved.value) and (solved.error is None or solved.error >= 0)


def test_torch_scalars_read_as_their_numbers():
    """A 0-d tensor gives the very numbers of the Python number it holds (same seed, same estimate)."""
    plain = loss_mc(PRIOR, "path", 2, fvnum.gaussian(0.5), samples=300, seed=3, threads=1)
    t = loss_mc(PRIOR, "path", torch.tensor(2), fvnum.gaussian(torch.tensor(0.5, dtype=torch.float64)), samples=torch.tensor(300),
                seed=torch.tensor(3), threads=torch.tensor(1))
    assert t == plain
    b = bounds(PRIOR, torch.tensor(2), fvnum.gaussian(torch.tensor(0.5, dtype=torch.float64)), samples=torch.tensor(200),
               threads=torch.tensor(1), select_samples=torch.tensor(100))
    assert b.exact == bounds(PRIOR, 2, fvnum.gaussian(0.5), samples=200, threads=1, select_samples=100).exact
    for bad in (torch.tensor([0.3, 0.2]), torch.empty(0), torch.tensor(0.3, device="meta")):
        with pytest.raises(ValueError, match="tau must be a number"):
            loss_mc(PRIOR, "path", 2, fvnum.gaussian(bad), samples=10)


# --- sizes that do not fit: refused before work, in one line naming the largest size that fits ---------------
REFUSED = [
    (["bounds", "--depth", 14, "--budget", 3, "--tau", "0.3"], ("exact noiseless solve", "largest depth that fits")),
    (["bounds", "--depth", 12, "--alpha", "1/2", "--budget", 6, "--tau", "0.3", "--samples", 500],
     ("exact noiseless solve", "largest depth that fits")),
    (["mc", "--strategy", "bellman_noiseless", "--depth", 14, "--budget", 3, "--tau", "0.3"], ("largest depth",)),
    (["mc", "--strategy", "optimal_nonadaptive_coordinate", "--depth", 14, "--budget", 30, "--tau", "0.3"], ("limit",)),
    (["train", "--model", "A", "--mlp-width", 30000, "--tokens", 32, "--out", ""], ("largest",)),
    (["train", "--model", "B", "--hidden-layers", 1000, "--mlp-width", 4096, "--out", ""], ("largest",)),
]


@pytest.mark.parametrize("argv, fragments", REFUSED, ids=[" ".join(map(str, a[:5])) for a, _ in REFUSED])
def test_sizes_that_do_not_fit_are_refused_in_one_line(argv, fragments):
    code, out, err = fv("--max-seconds", 60, *argv)
    one_line(code, err, *fragments)
    assert not out


@examples(15)
@given(samples=st.integers(2, 10**7), token_sample=st.integers(2, 10**7), hidden=st.integers(1, 10**4),
       width=st.integers(1, 10**5), tree=st.booleans())
def test_the_audit_price_refuses_or_accepts_in_one_line(samples, token_sample, hidden, width, tree):
    """``bridges.analysis.audit.check_audit_cost`` at any sizes: accepted, or one line naming a size that fits (the
    sizes it names are accepted)."""
    from bridges.analysis.audit import check_audit_cost
    from fvsym.guards.limits import time_limit

    sizes = dict(tree=tree, depth=4, dim=15, layers=3, width=1, budget=3, mlp_width=width, hidden_layers=hidden,
                 samples=samples, token_sample=token_sample)
    with time_limit(60):
        try:
            check_audit_cost(**sizes)
        except ValueError as exc:
            line = str(exc)
            assert "\n" not in line and ("largest token sample" in line or "contexts (--samples) fit" in line
                                         or "no token sample fits" in line), line
            if "contexts (--samples) fit" in line:
                most = int(line.rsplit("at most ", 1)[1].split()[0])
                check_audit_cost(**{**sizes, "samples": most})  # the size it names fits
