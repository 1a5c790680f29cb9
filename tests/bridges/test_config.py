import pytest

from bridges.runs.config import DataConfig, ModelConfig, RunConfig, TrainConfig, recipe_steps
from bridges.models.registry import MODELS

# the recipe of docs/training.md, by model (steps per budget, batch, lr): every stored run's key was made with it
RECIPES = {"A": (5000, 128, 5e-3), "B": (2500, 256, 3e-3), "C": (2500, 256, 1e-2)}


@pytest.mark.parametrize("model", ["A", "B", "C"])
def test_unset_training_fields_take_the_recipe(model):
    cfg = RunConfig(DataConfig(depth=6), ModelConfig(model=model, budget=4), TrainConfig())
    per_budget, batch, lr = RECIPES[model]
    assert (cfg.train.steps, cfg.train.batch, cfg.train.lr) == (recipe_steps(4, model), batch, lr) == (
        4 * per_budget, MODELS[model].recipe.batch, MODELS[model].recipe.lr)
    assert cfg.train.loss == "theta"


def test_given_training_fields_are_kept():
    cfg = RunConfig(DataConfig(depth=6), ModelConfig(model="A", budget=4), TrainConfig(steps=7, batch=33, lr=0.25))
    assert (cfg.train.steps, cfg.train.batch, cfg.train.lr) == (7, 33, 0.25)


def test_the_recipe_is_in_the_key():
    default = RunConfig(DataConfig(depth=6), ModelConfig(model="A", budget=4), TrainConfig())
    spelled = RunConfig(DataConfig(depth=6), ModelConfig(model="A", budget=4),
                        TrainConfig(steps=recipe_steps(4, "A"), batch=MODELS["A"].recipe.batch, lr=MODELS["A"].recipe.lr))
    other = RunConfig(DataConfig(depth=6), ModelConfig(model="A", budget=4), TrainConfig(batch=MODELS["A"].recipe.batch + 1))
    assert default.key() == spelled.key() != other.key()


@pytest.mark.parametrize("batch", [0, -1, 2.5, "128"])
def test_bad_batch_is_one_line(batch):
    with pytest.raises(ValueError, match="batch"):
        TrainConfig(batch=batch)


# --- one table of options: parsing, building a config and to_argv read the same fields ------------------
import dataclasses  # noqa: E402

from bridges.runs.config import RUN_OPTIONS  # noqa: E402
from bridges.runs.options import Option  # noqa: E402

ROUND_TRIP = [
    RunConfig(),
    RunConfig(DataConfig(prior="gaussian", depth=3, alpha=0.3, cov="isotropic", n_tokens=17, s2=0.25),
              ModelConfig("B", 2, mlp_width=8, hidden_layers=3, readout="generic"),
              TrainConfig(steps=7, batch=5, lr=1 / 3, warmup=0, schedule="constant", precision="fp32", grad_clip=0.0,
                          eval_every=3, eval_batches=2, seed=2**63 - 1, device="cuda:1", threads=3, out="some where",
                          checkpoint_every=4)),
    RunConfig(DataConfig(depth=3, scales=("1", "1/2", "1/3")), ModelConfig("C", 3), TrainConfig(out=None)),
    RunConfig(DataConfig(prior="gaussian", depth=2, scales=("1", "2/7")), ModelConfig("A", 1),
              TrainConfig(loss="query", lr=1e-300)),
]


def _parsed(argv: list[str]) -> RunConfig:
    from bridges.cli import build_parser
    from bridges.commands import config_from_args

    return config_from_args(build_parser().parse_args(["train", *argv]))


@pytest.mark.parametrize("cfg", ROUND_TRIP, ids=range(len(ROUND_TRIP)))
def test_config_to_argv_parse_gives_the_same_config(cfg):
    argv = cfg.to_argv()
    assert _parsed(argv) == cfg  # every field, the ones outside the key included
    values = {o.dest: o.parse(t) for o, t in ((next(o for o in RUN_OPTIONS if o.flag == f), t)
                                               for f, t in zip(argv[::2], argv[1::2]))}
    assert RunConfig.from_options(values) == cfg  # the same table without argparse (fv sweep's cells)
    assert len(argv) == 2 * len(set(argv[::2]))  # each option once


def test_every_field_of_a_run_is_one_option():
    fields = {(s, f.name) for s, kind in (("data", DataConfig), ("model", ModelConfig), ("train", TrainConfig))
              for f in dataclasses.fields(kind)}
    assert sorted((o.section, o.field) for o in RUN_OPTIONS) == sorted(fields)
    assert len({o.flag for o in RUN_OPTIONS}) == len(RUN_OPTIONS)


def test_the_fv_train_parser_is_generated_from_the_table():
    from bridges.cli import build_parser

    (train,) = [p for name, p in _subparsers(build_parser()).items() if name == "train"]
    flags = {s for a in train._actions for s in a.option_strings}
    assert {f for o in RUN_OPTIONS for f in (o.flag, *o.aliases)} <= flags
    args = train.parse_args(["--model", "B"])
    assert {o.dest: getattr(args, o.dest) for o in RUN_OPTIONS} == {**{o.dest: o.default for o in RUN_OPTIONS},
                                                                    "model": "B"}


def _subparsers(parser):
    import argparse

    (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sub.choices


@pytest.mark.parametrize("option,text,match", [
    (Option("--n", "train", "seed", "int", low=1, high=3), "4", "--n must be <= 3, got 4"),
    (Option("--n", "train", "seed", "int", low=1), "1.5", "--n must be an integer"),
    (Option("--x", "data", "alpha", "real", low=0, high=1, open_low=True, open_high=True), "1", r"--x must lie in \(0, 1\), got 1"),
    (Option("--c", "data", "prior", "choice", choices=("tree",)), "gauss", "unknown --c 'gauss'"),
    (Option("--s", "data", "scales", "numbers"), "1,,2", "--s"),
])
def test_bad_option_text_is_one_line_naming_it(option, text, match):
    with pytest.raises(ValueError, match=match):
        option.parse(text)


def test_bad_run_options_are_refused_by_the_config():
    with pytest.raises(ValueError, match="give --alpha or --scales, not both"):
        RunConfig.from_options({"alpha": 0.5, "scales": ("1", "1/2")})
    with pytest.raises(ValueError, match="--scales needs depth = 4 entries"):
        RunConfig.from_options({"depth": 4, "scales": ("1", "1/2")})
    assert RunConfig.from_options({"scales": ("1", "1/2")}).data.depth == 2
