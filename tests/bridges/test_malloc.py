import os
import platform
import subprocess
import sys

import pytest

CODE = "from bridges.training._malloc import keep_freed_memory; print(keep_freed_memory())"


def _run(**env):
    out = subprocess.run([sys.executable, "-c", CODE], env=dict(os.environ, **env), capture_output=True, text=True,
                         check=True)
    return out.stdout.strip()


@pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_keeps_freed_memory_on_glibc():
    assert _run(FV_MALLOC="") == "True"


def test_default_allocator_on_request():
    assert _run(FV_MALLOC="default") == "False"
