"""Recorded outputs of ``fv derive``, ``fv mc`` and ``fv bounds`` (tests/golden/): the commands of
``commands.txt`` (fixed seeds, one thread) must print exactly what they printed when recorded, to the
last printed digit of every float, so a change of layout inside the packages is seen to change nothing.

Re-record after a deliberate change of output: ``python -m tests.test_golden --record``.
"""
from __future__ import annotations

import contextlib
import io
import shlex
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).parent / "golden"


def _commands() -> list[list[str]]:
    lines = (GOLDEN / "commands.txt").read_text().splitlines()
    return [shlex.split(line) for line in lines if line.strip() and not line.lstrip().startswith("#")]


def _run(argv: list[str]) -> str:
    from bridges.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return f"exit {code}\n{out.getvalue()}{err.getvalue()}"


def _recorded(i: int) -> Path:
    return GOLDEN / f"{i:02d}.out"


@pytest.mark.parametrize("i", range(len(_commands())), ids=lambda i: " ".join(_commands()[i][:3]) + f" #{i:02d}")
def test_output_as_recorded(i):
    argv = _commands()[i]
    got = _run(argv)
    want = _recorded(i).read_text()
    assert got == want, f"fv {' '.join(argv)} printed something else than tests/golden/{i:02d}.out"


def test_every_command_is_recorded():
    assert sorted(p.name for p in GOLDEN.glob("*.out")) == [_recorded(i).name for i in range(len(_commands()))]


if __name__ == "__main__":
    if sys.argv[1:] != ["--record"]:
        sys.exit("usage: python -m tests.test_golden --record")
    for old in GOLDEN.glob("*.out"):
        old.unlink()
    for i, argv in enumerate(_commands()):
        _recorded(i).write_text(_run(argv))
        print(f"{_recorded(i).name}: fv {' '.join(argv)}")
