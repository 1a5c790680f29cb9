"""A device name is checked before anything on disk is touched (issue 56 item 6): a finished run re-run with a
device this machine cannot run keeps its checkpoint and result.json, and the command says so in one line."""
import os

import pytest

from bridges.runs.devices import check_device, check_device_name
from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from fvsym.errors import InputError
from tests._cli import fv, one_line

TRAIN = ["train", "--model", "A", "--depth", "3", "--budget", "2", "--steps", "4", "--eval-every", "2",
         "--eval-batches", "1", "--quiet"]
# names torch parses but fv does not run on; cpu:99 (one CPU); cuda and mps where this machine lacks them
REFUSED = ["xla", "lazy", "xpu", "vulkan", "hip", "mkldnn", "ipu", "mtia", "meta", "hpu", "privateuseone", "cpu:99",
           "mps:1", "", "CPU", " cpu", "cuda:x", "cuda:99999"]


def _snapshot(folder):
    """Every file of a run folder with its bytes and modification time."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("finished")
    code, _, err = fv(*TRAIN, "--out", out)
    assert code == 0, err
    (folder,) = out.iterdir()
    return out, folder


@pytest.mark.parametrize("device", REFUSED)
def test_a_finished_run_rerun_on_a_device_fv_cannot_run_is_left_as_it_was(finished, device):
    out, folder = finished
    before = _snapshot(folder)
    line = one_line(*fv(*TRAIN, "--out", out, "--device", device)[::2])
    assert f"device {device!r}" in line and "not installed" not in line, line
    assert _snapshot(folder) == before  # nothing set aside as corrupt, result.json not renamed stale


def test_a_device_this_machine_lacks_is_refused_before_the_run_folder_exists(tmp_path):
    import torch

    for device, lacks in (("cuda", not torch.cuda.is_available()), ("mps", not torch.backends.mps.is_available())):
        if lacks:
            line = one_line(*fv(*TRAIN, "--out", tmp_path, "--device", device)[::2])
            assert f"device {device!r} is not available" in line and "use cpu" in line
    assert one_line(*fv(*TRAIN, "--out", tmp_path, "--device", f"cuda:{torch.cuda.device_count()}")[::2])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [
    ["scaling", "--budgets", "1", "--steps-per-budget", "1"],
    ["compare", "--model", "A", "--depth", "3", "--budget", "2", "--steps", "4"],
    ["compare", "--grid", "--steps", "4"],
])
@pytest.mark.parametrize("device", ["meta", "xla", "cpu:99"])
def test_every_command_with_a_device_refuses_before_writing(tmp_path, command, device):
    line = one_line(*fv(*command, "--out", tmp_path / "out", "--device", device)[::2])
    assert f"device {device!r}" in line
    assert not (tmp_path / "out").exists()


def test_train_refuses_the_device_before_its_run_folder(finished):
    out, folder = finished
    before = _snapshot(folder)
    from bridges.training.train import train

    cfg = RunConfig(DataConfig(depth=3), ModelConfig(model="A", budget=2),
                    TrainConfig(steps=4, eval_every=2, eval_batches=1, out=str(out), device="xla"))
    with pytest.raises(InputError, match="device 'xla' is not one fv runs on"):
        train(cfg, progress=False)
    assert _snapshot(folder) == before


def test_the_device_checks_name_what_fv_runs_on():
    assert check_device_name("cpu") == "cpu" and check_device_name("cpu:0") == "cpu:0"
    assert check_device_name("cuda:3") == "cuda:3" and check_device("cpu") == "cpu"
    with pytest.raises(InputError, match=r"device 'cpu:99' does not exist: there is one CPU device"):
        check_device("cpu:99")
    with pytest.raises(InputError, match="got int 3"):
        check_device_name(3)


def test_the_study_configs_refuse_a_device_fv_cannot_run(tmp_path):
    from bridges.studies.reproduce import ReproduceConfig
    from bridges.studies.scaling import ScalingConfig

    for make in (ReproduceConfig, ScalingConfig):
        with pytest.raises(InputError, match="device 'hpu' is not one fv runs on"):
            make(out=str(tmp_path), device="hpu")
    assert not os.listdir(tmp_path)


def test_a_sweep_whose_cells_train_here_checks_their_devices_before_its_folder(tmp_path):
    import torch

    missing = f"cuda:{torch.cuda.device_count()}"  # never a device of this machine
    spec = tmp_path / "spec.toml"
    head = 'command = "train"\n[base]\nmodel = "A"\ndepth = 3\nsteps = 2\n[grid]\n'
    spec.write_text(f'{head}device = ["cpu", "{missing}"]\n')
    line = one_line(*fv("sweep", spec, "--out", tmp_path / "out")[::2], f"device {missing!r} is not available")
    assert "Traceback" not in line and not (tmp_path / "out").exists()
    spec.write_text(f'{head}device = ["cpu", "xla"]\n')
    one_line(*fv("sweep", spec, "--out", tmp_path / "out")[::2], "spec grid.device = 'xla'", "not one fv runs on")
    assert not (tmp_path / "out").exists()
