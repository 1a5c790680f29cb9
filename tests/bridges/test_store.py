"""bridges.runs.store.update_json: read, change and write a study's JSON under a lock."""
import json
import multiprocessing

import pytest

from bridges.runs.store import update_json


def _add(path: str, who: int, n: int) -> None:
    for i in range(n):
        update_json(path, lambda cells: cells.__setitem__(f"{who}-{i}", i))


def test_processes_writing_at_once_lose_nothing(tmp_path):
    """Four processes add 25 entries each to one file: every entry is there (without the lock, a read-modify-write
    of one process overwrites what another wrote in between)."""
    path = str(tmp_path / "study.json")
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_add, args=(path, who, 25)) for who in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0, 0, 0]
    with open(path) as f:
        assert len(json.load(f)) == 100


def test_default_document_and_nested_changes(tmp_path):
    path = tmp_path / "study.json"
    default = {"runs": {}, "theory": {}}
    update_json(path, lambda d: d["runs"].__setitem__("a", 1), default)
    update_json(path, lambda d: d["theory"].__setitem__("b", 2), default)
    assert json.loads(path.read_text()) == {"runs": {"a": 1}, "theory": {"b": 2}}
    assert default == {"runs": {}, "theory": {}}  # the default is copied, never edited


def test_a_damaged_document_is_refused_and_left_alone(tmp_path):
    path = tmp_path / "study.json"
    path.write_text("{not json")
    with pytest.raises(ValueError):
        update_json(path, lambda d: d.__setitem__("a", 1))
    assert path.read_text() == "{not json"


def test_a_value_that_is_not_finite_is_refused_before_writing(tmp_path):
    path = tmp_path / "study.json"
    update_json(path, lambda d: d.__setitem__("a", 1.0))
    with pytest.raises(ValueError):
        update_json(path, lambda d: d.__setitem__("b", float("nan")))
    assert json.loads(path.read_text()) == {"a": 1.0}
