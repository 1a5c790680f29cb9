"""Fixtures shared by the tests of bridges."""
import pytest


@pytest.fixture(scope="session")
def run_folder(tmp_path_factory):
    """A finished ``fv train`` run folder of a tiny Model A (depth 3, budget 2, 4 steps)."""
    from bridges.cli import main

    out = tmp_path_factory.mktemp("runs")
    assert main(["train", "--model", "A", "--depth", "3", "--budget", "2", "--steps", "4", "--eval-every", "2",
                 "--eval-batches", "1", "--out", str(out), "--quiet"]) == 0
    (folder,) = out.iterdir()
    return folder
