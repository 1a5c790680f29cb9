"""Modules moved into rooms (issue 46, docs/architecture.md): the old import paths still work, as the new module
itself, with a DeprecationWarning naming the new path; rooms named like the module they replaced keep its names."""
import importlib
import subprocess
import sys

import pytest

from fvsym import _moved

OLD_TO_NEW = {
    "fvnum.keyed_patching": "fvnum.patching.keyed", "fvnum.tree": "fvnum.priors.tree",
    "fvnum.simulate": "fvnum.mc.simulate", "fvnum.noisy_dp": "fvnum.optimum.noisy_dp",
    "fvnum.strategies": "fvnum.policies.policies", "fvnum.limits": "fvnum.guards.limits",
    "fvsym.costs": "fvsym.guards.costs", "bridges.train": "bridges.training.train",
    "bridges.config": "bridges.runs.config", "bridges.reproduce": "bridges.studies.reproduce",
    "bridges.train_memory": "bridges.prices.memory", "bridges.taps": "bridges.models.taps",
}


def _finder_table() -> dict:
    for finder in sys.meta_path:
        if isinstance(finder, _moved._MovedFinder):
            return finder.moved
    raise AssertionError("no moved-module finder installed")


@pytest.mark.parametrize("old,new", sorted(OLD_TO_NEW.items()))
def test_an_old_path_imports_the_new_module_with_a_warning(old, new):
    import fvnum  # noqa: F401  (each package installs its table)
    import bridges  # noqa: F401

    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=new.replace(".", r"\.")):
        mod = importlib.import_module(old)
    assert mod is importlib.import_module(new)


def test_every_old_path_in_the_tables_names_a_module_that_exists():
    import fvnum  # noqa: F401
    import bridges  # noqa: F401

    table = _finder_table()
    assert len(table) >= 40
    for old, new in table.items():
        assert importlib.util.find_spec(new) is not None, (old, new)
        assert old not in (new,)


def test_rooms_named_like_the_old_modules_keep_their_names():
    import fvnum.keys as keys_room
    import fvnum.patching as patching_room
    import fvnum.priors as priors_room
    from fvnum.keys.families import FAMILIES
    from fvnum.patching.keys import patching_table
    from fvnum.patching.state import state_patching_table

    assert keys_room.FAMILIES is FAMILIES
    assert patching_room.patching_table is patching_table
    assert patching_room.state_patching_table is state_patching_table
    assert priors_room.PRIORS is importlib.import_module("fvnum.priors.registry").PRIORS
    with pytest.raises(AttributeError, match="no attribute 'nothing_here'"):
        keys_room.nothing_here  # noqa: B018


def test_a_room_s_light_modules_do_not_load_torch():
    code = ("import sys; import bridges.models.registry, fvnum.patching.keys, fvnum.priors.tree; "
            "print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
