import pytest

from bridges.config import (RECIPE_BATCH, RECIPE_LR, DataConfig, ModelConfig, RunConfig, TrainConfig,
                            recipe_steps)


@pytest.mark.parametrize("model", ["A", "B", "C"])
def test_unset_training_fields_take_the_recipe(model):
    cfg = RunConfig(DataConfig(depth=6), ModelConfig(model=model, budget=4), TrainConfig())
    assert (cfg.train.steps, cfg.train.batch, cfg.train.lr) == (recipe_steps(4, model), RECIPE_BATCH[model], RECIPE_LR[model])
    assert cfg.train.loss == "theta"


def test_given_training_fields_are_kept():
    cfg = RunConfig(DataConfig(depth=6), ModelConfig(model="A", budget=4), TrainConfig(steps=7, batch=33, lr=0.25))
    assert (cfg.train.steps, cfg.train.batch, cfg.train.lr) == (7, 33, 0.25)


def test_the_recipe_is_in_the_key():
    default = RunConfig(DataConfig(depth=6), ModelConfig(model="A", budget=4), TrainConfig())
    spelled = RunConfig(DataConfig(depth=6), ModelConfig(model="A", budget=4),
                        TrainConfig(steps=recipe_steps(4, "A"), batch=RECIPE_BATCH["A"], lr=RECIPE_LR["A"]))
    other = RunConfig(DataConfig(depth=6), ModelConfig(model="A", budget=4), TrainConfig(batch=RECIPE_BATCH["A"] + 1))
    assert default.key() == spelled.key() != other.key()


@pytest.mark.parametrize("batch", [0, -1, 2.5, "128"])
def test_bad_batch_is_one_line(batch):
    with pytest.raises(ValueError, match="batch"):
        TrainConfig(batch=batch)
