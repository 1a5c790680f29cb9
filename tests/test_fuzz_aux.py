"""Hostile values of the auxiliary readout weight (``fv train --aux-readout W``, ``TrainConfig.aux_readout``):
one line on stderr naming the option and exit 2 from the command line, a ValueError in the library."""
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bridges.runs.config import TrainConfig
from tests._cli import examples, fv

BASE = ("train", "--model", "A", "--prior", "tree", "--depth", "3", "--tokens", "8", "--budget", "2",
        "--mlp-width", "4", "--hidden-layers", "1", "--steps", "1", "--out", "")


def _refused_in_one_line(argv, fragment):
    code, _, err = fv(*argv)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert fragment in lines[0], err


@examples(10)
@given(st.one_of(st.floats(max_value=-1e-12, allow_nan=False), st.sampled_from(["nan", "-inf", "1e999", "-0.1",
                                                                                  "1/0", "0.5.5", "none", " "])))
def test_cli_refuses_hostile_weights(value):
    _refused_in_one_line((*BASE, "--aux-readout", str(value)), "--aux-readout")


@examples(10)
@given(st.one_of(st.floats(max_value=-1e-300, allow_nan=False), st.just(math.nan), st.just(math.inf),
                 st.text(max_size=5), st.none()))
def test_library_refuses_hostile_weights(value):
    with pytest.raises(ValueError, match="aux_readout"):
        TrainConfig(aux_readout=value)
