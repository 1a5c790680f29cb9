"""bridges exports its public API in ``__all__`` (like fvsym and fvnum), lazily: ``import bridges`` loads
neither torch nor numba, and no exported name shadows a submodule."""
import pkgutil
import subprocess
import sys
from pathlib import Path

import bridges

ROOT = Path(__file__).resolve().parents[2]


def test_every_public_name_resolves_and_none_is_a_submodule():
    submodules = {info.name for info in pkgutil.iter_modules(bridges.__path__)}
    assert not set(bridges.__all__) & submodules
    for name in bridges.__all__:
        assert getattr(bridges, name).__module__.startswith("bridges.")
    assert {"DataConfig", "RunConfig", "theory_table", "key_patching_table", "workspace_probes"} <= set(bridges.__all__)


def test_import_bridges_loads_no_torch_or_numba():
    code = "import sys, bridges; print([m for m in ('torch', 'numba') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
