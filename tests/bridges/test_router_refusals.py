"""The qk router where it does not apply (issue 56 item 6): a study without Model A, a run grown from another
router's, a policy distilled into a router it lacks, each refused in one line before a folder is made; and the
lock file named as the code names it."""
from pathlib import Path

import pytest

from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from bridges.runs.store import LOCK
from fvsym.errors import InputError
from tests._cli import fv, one_line

TINY = ["--depth", "3", "--steps", "2", "--eval-every", "1", "--eval-batches", "1", "--quiet"]


@pytest.mark.parametrize("models", ["B", "BC", "C"])
def test_a_scaling_study_without_model_a_refuses_the_qk_router(tmp_path, models):
    from bridges.studies.scaling import ScalingConfig

    with pytest.raises(InputError, match=f"the study's models {models} have none"):
        ScalingConfig(out=str(tmp_path), models=models, router="qk")
    line = one_line(*fv("scaling", "--router", "qk", "--models", models, "--out", tmp_path / "s")[::2])
    assert "router 'qk'" in line and "add A to the models" in line
    assert not (tmp_path / "s").exists()
    assert ScalingConfig(out=str(tmp_path), models=models).router == "mlp"  # the default router still applies


def test_a_run_grown_from_another_routers_run_is_refused_naming_the_routers(tmp_path):
    code, _, err = fv("train", "--model", "A", "--budget", "1", *TINY, "--out", tmp_path)
    assert code == 0, err
    (source,) = tmp_path.iterdir()
    line = one_line(*fv("train", "--model", "A", "--budget", "2", "--router", "qk", "--init-from", source.name, *TINY,
                        "--out", tmp_path)[::2])
    assert f"run {source.name} cannot start this one: router 'mlp' vs 'qk'" in line and "None" not in line
    assert list(tmp_path.iterdir()) == [source]  # no folder left for the refused run


def test_a_policy_is_not_distilled_into_the_qk_router(tmp_path):
    with pytest.raises(InputError) as info:
        RunConfig(DataConfig(depth=3), ModelConfig(model="A", budget=2, router="qk"),
                  TrainConfig(init_policy="path", out=str(tmp_path)))
    message = str(info.value)
    assert "the qk router has none to start" in message and "Keys" not in message
    line = one_line(*fv("train", "--model", "A", "--budget", "2", "--router", "qk", "--init-policy", "path", *TINY,
                        "--out", tmp_path)[::2])
    assert "init_policy" in line and "QKKeys" not in line and "d = 1" not in line
    assert list(tmp_path.iterdir()) == []


def test_the_pages_name_the_lock_file_the_code_writes():
    page = (Path(__file__).parents[2] / "docs" / "errors-and-limits.md").read_text()
    assert f"DIR/{LOCK}`" in page and "DIR/.lock`" not in page
