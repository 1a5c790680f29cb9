"""docs/architecture.md is a true map (issue 59, item 7): a toy prior, strategy, model and command, each written as
a module in a temporary folder outside the package and added through its public registration call, work end to end
(the prior samples and gets a ``loss_mc``, the strategy runs in ``loss_mc``, the model trains a few steps on the CPU,
the command runs through ``fv``), with as many files as the page says each takes; and the page names every module
of the three packages in its room."""
from __future__ import annotations

import contextlib
import importlib
import io
import re
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "architecture.md"

# what each extension takes, written from outside: file name -> its text
PRIOR = {"ext_corners.py": '''
    """A prior written outside the package: the 2^D corners of a box with side lengths ``sides``."""
    import itertools

    import numpy as np

    from fvnum.priors.atoms import FinitePrior
    from fvnum.priors.registry import register_prior


    class Corners(FinitePrior):
        name = "ext_corners"

        def __init__(self, sides):
            sides = np.asarray(sides, dtype=float)
            signs = np.array(list(itertools.product((1.0, -1.0), repeat=sides.size)))
            self._set(signs * sides, None)


    ENTRY = register_prior("ext_corners", Corners, summary="the corners of a box (written outside)")
'''}
STRATEGY = {"ext_first.py": '''
    """A strategy written outside the package: read coordinates 1, 2, .., B in this order (the top levels)."""
    import numpy as np

    from fvnum.policies.registry import register_strategy
    from fvnum.policies.policies import CallablePolicy


    def build(prior, channel, budget, *, layers, width, seed):
        def rows(layer, phi):
            return np.full((phi.shape[0], 1), layer + 1, dtype=np.int64)

        return CallablePolicy(rows, budget, 1, "ext_first")


    STRATEGY = register_strategy("ext_first", "coordinates 1..B in order (written outside)", build)
'''}
MODEL = {"ext_model.py": '''
    """A model written outside the package: one layer of d = B channels, linear keys, the bilinear readout."""
    from bridges.models.registry import ModelSpec, Recipe, register_model


    def network(data, model):
        from bridges.models.networks import BilinearReadout, LinearKeyLayer, WorkspaceModel

        return WorkspaceModel(data.dim, model.budget, [LinearKeyLayer(data.dim, model.budget)],
                              BilinearReadout(data.dim, model.budget), model.attention)


    SPEC = register_model(ModelSpec("E", "a one-layer model written outside the package", network,
                                    Recipe(lr=2e-2, batch=16, steps_per_budget=3), prediction=("top_levels_linear",),
                                    law="power", band="exact", marker=("D", "C6"), mlp_keys=False,
                                    bounded_by=("best_linear_nonadaptive",), price=lambda cfg: 1e-3))
'''}
COMMAND = {"ext_command.py": '''
    """A command written outside the package: ``fv ext-hello --name NAME``."""


    def add_hello_command(subparsers):
        p = subparsers.add_parser("ext-hello", help="say hello (a command written outside the package)")
        p.add_argument("--name", required=True)
        p.set_defaults(func=hello)


    def hello(args):
        print(f"hello, {args.name}")
        return 0
'''}
EXTENSIONS = {"a prior": PRIOR, "a strategy": STRATEGY, "a model": MODEL, "a command": COMMAND}


@pytest.fixture
def outside(tmp_path, monkeypatch):
    """``write(files)``: the files written in a folder outside the package, importable; their modules are dropped
    afterwards."""
    folder = tmp_path / "outside"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    written = []

    def write(files: dict) -> list[str]:
        for name, text in files.items():
            (folder / name).write_text(textwrap.dedent(text))
            written.append(name[:-3])
        importlib.invalidate_caches()
        return [name[:-3] for name in files]

    yield write
    for name in written:
        sys.modules.pop(name, None)
    assert not any(Path(p).is_relative_to(ROOT / name) for p in sys.path for name in ("fvsym", "fvnum", "bridges"))


def page_counts() -> dict[str, int]:
    """The page's table of extensions: ``{"a prior": files from outside, ...}``."""
    rows = re.findall(r"^\| (a [a-z]+) \| (\d+) \|", PAGE.read_text(), flags=re.M)
    return {kind: int(n) for kind, n in rows}


def test_the_page_counts_the_files_each_extension_takes():
    assert page_counts() == {kind: len(files) for kind, files in EXTENSIONS.items()}


def test_a_prior_from_outside_samples_and_gets_a_loss_mc(outside):
    import numpy as np

    from fvnum import gaussian, loss_mc
    from fvnum.priors.registry import PRIORS

    (name,) = outside(PRIOR)
    try:
        module = importlib.import_module(name)
        sides = np.array([1.0, 0.7, 0.4])
        prior = PRIORS["ext_corners"].load()(sides)
        assert isinstance(prior, module.Corners)
        thetas = prior.thetas(prior.sample(1000, np.random.default_rng(0)))
        assert thetas.shape == (1000, 3) and set(np.unique(np.abs(thetas))) == set(sides)
        # noiseless, reading a corner's coordinate reveals its sign there: the best B reads leave the smallest sides
        for budget in (1, 2):
            est = loss_mc(prior, "greedy_coordinate", budget, gaussian(0.0), samples=300, seed=0)
            assert est.value == pytest.approx(float(np.sort(sides**2)[: 3 - budget].sum()), abs=1e-9)
    finally:
        PRIORS.pop("ext_corners", None)


def test_a_strategy_from_outside_runs_in_loss_mc(outside):
    from fvnum import gaussian, loss_mc
    from fvnum.policies.registry import STRATEGIES, unregister_strategy
    from fvsym import TreePrior

    (name,) = outside(STRATEGY)
    try:
        importlib.import_module(name)
        prior = TreePrior(3, "1/2")
        mine = loss_mc(prior, "ext_first", 3, gaussian(0.3), samples=4000, seed=1)
        top = loss_mc(prior, "top_levels", 3, gaussian(0.3), samples=4000, seed=1)  # same reads, another kernel
        assert "ext_first" in STRATEGIES and abs(mine.value - top.value) < 5 * (mine.stderr**2 + top.stderr**2) ** 0.5
    finally:
        unregister_strategy("ext_first")


def test_a_model_from_outside_trains_a_few_steps_on_the_cpu(outside):
    pytest.importorskip("torch")
    from bridges.models.registry import MODELS, unregister_model
    from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from bridges.training.train import train

    (name,) = outside(MODEL)
    try:
        importlib.import_module(name)
        cfg = RunConfig(DataConfig(prior="tree", depth=2, n_tokens=8), ModelConfig("E", 2),
                        TrainConfig(steps=4, batch=8, eval_every=4, eval_batches=1, device="cpu"))
        result = train(cfg, progress=False)
        assert "E" in MODELS and result.steps == 4 and result.finished and result.loss >= 0
        assert cfg.key().startswith("E-tree-K2-B2")
    finally:
        unregister_model("E")


def test_a_command_from_outside_runs_through_the_cli(outside):
    from bridges.cli import main, register_commands, unregister_commands

    (name,) = outside(COMMAND)
    register_commands(f"{name}:add_hello_command")
    try:
        with contextlib.redirect_stdout(io.StringIO()) as out:
            assert main(["ext-hello", "--name", "map"]) == 0
        assert out.getvalue() == "hello, map\n"
    finally:
        unregister_commands(f"{name}:add_hello_command")
    with contextlib.redirect_stderr(io.StringIO()) as err:
        assert main(["ext-hello", "--name", "map"]) == 2  # gone again
    assert "invalid choice: 'ext-hello'" in err.getvalue()
    for bad in ("not a module", name, f"{name}:", "a.b:not a function", 3):
        with pytest.raises(ValueError, match="module:function"):
            register_commands(bad)


def _rooms() -> dict[tuple[str, str], str]:
    """``(package, room) -> the text of the page's bullet for that room`` (``room`` "root" or ``"mc/_kernels"``)."""
    text, rooms = PAGE.read_text(), {}
    for package in ("fvsym", "fvnum", "bridges"):
        section = re.search(rf"^## {package}:.*?(?=^## |\Z)", text, flags=re.M | re.S).group(0)
        for bullet in re.split(r"^- ", section, flags=re.M)[1:]:
            head = bullet.split(":", 1)[0]
            room = "root" if head == "root" else head.strip("`").rstrip("/")
            rooms[package, room] = bullet
    return rooms


def test_the_page_names_every_module_in_its_room_and_is_short():
    rooms = _rooms()
    missing = []
    for package in ("fvsym", "fvnum", "bridges"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "__init__.py":
                continue
            room = path.parent.relative_to(ROOT / package).as_posix()
            bullet = rooms.get((package, "root" if room == "." else room), "")
            if f"`{path.name}`" not in bullet:
                missing.append(str(path.relative_to(ROOT)))
    assert missing == []
    assert len(PAGE.read_text().splitlines()) <= 150
