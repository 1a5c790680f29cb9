"""``fv intervene`` and the run folders it reads, as a hostile user tries them (issue 56 item 6): repeated depths or
layers, options that do not apply, a price named by the size that makes it, a result.json that is no file, a time
cap that says what it kept, and the thread it is priced on."""
import os
import shutil

import pytest

from bridges.cli import WRITES
from fvnum.guards.resources import watchdog
from tests._cli import fv, one_line


@pytest.mark.parametrize("flag", ["--depths", "--layers"])
def test_a_depth_or_layer_given_twice_is_refused_before_any_work(run_folder, flag):
    line = one_line(*fv("intervene", run_folder, flag, "1,1")[::2], flag)
    assert "lists 1 twice" in line and "give each value once" in line


@pytest.mark.parametrize("flag", ["--depths", "--layers"])
def test_a_zero_depth_names_its_flag_once_and_its_range(run_folder, flag):
    line = one_line(*fv("intervene", run_folder, flag, "0")[::2])
    assert line.endswith(f"argument {flag}: {flag} must list integers >= 1, got 0"), line
    line = one_line(*fv("intervene", run_folder, flag, "2,-1")[::2])
    assert line.endswith(f"{flag} must list integers >= 1, got -1 in '2,-1'"), line


@pytest.mark.parametrize("argv, words", [
    (["--samples", "500"], "--samples 500 sets the theory's samples and applies with --theory only"),
    (["--table", "transplant", "--mean-contexts", "64"], "--mean-contexts 64 sets the injection's mean workspaces "
                                                          "and does not apply to --table transplant"),
])
def test_options_that_do_not_apply_are_refused(run_folder, argv, words):
    one_line(*fv("intervene", run_folder, *argv)[::2], words)


def test_a_price_over_the_cap_names_the_size_that_makes_it(run_folder):
    line = one_line(*fv("--max-seconds", "5", "intervene", run_folder, "--mean-contexts", "10000000")[::2])
    assert "10000000 mean contexts" in line and "over the limit of 5 s" in line


@pytest.mark.parametrize("kind", ["fifo", "dev-zero", "dangling", "folder"])
def test_a_result_json_that_is_no_file_is_named_for_what_it_is(run_folder, tmp_path, kind):
    folder = tmp_path / run_folder.name
    shutil.copytree(run_folder, folder)
    result = folder / "result.json"
    result.unlink()
    if kind == "fifo":
        os.mkfifo(result)
    elif kind == "dev-zero":
        os.symlink("/dev/zero", result)
    elif kind == "dangling":
        os.symlink(tmp_path / "nowhere", result)
    else:
        result.mkdir()
    said = {"fifo": "is a FIFO", "dev-zero": "is a link to /dev/zero (a device)", "dangling": "is a link to",
            "folder": "is a folder"}[kind]
    for command in ("intervene", "audit"):
        line = one_line(*fv(command, folder)[::2], f"{result} {said}", "not a training result")
        assert "no result.json" not in line


def test_a_time_cap_says_what_it_kept():
    assert "intervene" not in WRITES and "audit" not in WRITES and "mc" not in WRITES and "train" in WRITES
    import time

    for writes, words in ((False, "nothing was written"), (True, "the files written so far are complete")):
        line = watchdog("fv intervene", writes=writes).message(1.0, time.monotonic() - 2)
        assert line.startswith("fv intervene: error: stopped after") and words in line, line
        assert ("complete" in line) == writes


def test_the_tables_run_on_one_torch_thread_as_priced(run_folder, monkeypatch):
    import torch

    import bridges.patching.state as state

    seen = []

    def table(*args, **kw):
        seen.append(torch.get_num_threads())
        raise KeyboardInterrupt

    monkeypatch.setattr(state, "model_state_patching_table", table)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        code, _, _ = fv("intervene", run_folder, "--table", "transplant", "--contexts", "2")
        assert code == 130 and seen == [1] and torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)
