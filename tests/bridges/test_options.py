"""bridges.runs.options: the fields of a frozen dataclass as command-line options (kinds from annotations, defaults
from the fields, one-line errors), the one mechanism behind ``fv train``'s run options and the examples."""
from __future__ import annotations

from dataclasses import dataclass

import pytest

from bridges.runs.config import RUN_OPTIONS, DataConfig, ModelConfig, TrainConfig
from bridges.runs.options import Option, config_of, options_of, read_argv, usage


@dataclass(frozen=True)
class Toy:
    """A toy configuration."""

    depth: int = 3
    alpha: float = 0.5
    name: str = "a"
    flag: bool = True
    taus: tuple[float, ...] = (0.0, 0.25)
    workers: int | None = None
    n_examples: int = 7


def test_kinds_and_defaults_come_from_the_annotations_and_the_fields():
    opts = {o.field: o for o in options_of(Toy)}
    assert [o.field for o in options_of(Toy)] == list(opts) == ["depth", "alpha", "name", "flag", "taus", "workers",
                                                                 "n_examples"]
    got = {k: (o.kind, o.many, o.none, o.default) for k, o in opts.items()}
    assert got == {"depth": ("int", False, False, 3), "alpha": ("real", False, False, 0.5),
                   "name": ("text", False, False, "a"), "flag": ("bool", False, False, True),
                   "taus": ("real", True, False, (0.0, 0.25)), "workers": ("int", False, True, None),
                   "n_examples": ("int", False, False, 7)}
    assert opts["n_examples"].flag == "--n-examples" and opts["n_examples"].names == ("n_examples",)


@pytest.mark.parametrize("field,text,value", [
    ("depth", "5", 5), ("alpha", "1/3", 1 / 3), ("alpha", "0.1", 0.1), ("name", "b c", "b c"), ("flag", "off", False),
    ("flag", "Yes", True), ("taus", "0.1, 1/2", (0.1, 0.5)), ("workers", "none", None), ("workers", "4", 4),
])
def test_parse_reads_each_kind_and_text_writes_it_back(field, text, value):
    (o,) = [o for o in options_of(Toy) if o.field == field]
    assert o.parse(text) == value
    assert o.parse(o.text(value)) == value


@pytest.mark.parametrize("argv,message", [
    (["--depth=2.5"], "--depth must be an integer, got '2.5'"), (["--flag=maybe"], "--flag must be true or false"),
    (["--taus=1,,2"], "--taus must be comma-separated values .* empty item"),
    (["--alpha=x"], "--alpha must be a number such as 1/2"), (["--nope=1"], "unknown option --nope; the options are"),
    (["depth=2"], "unexpected argument 'depth=2'"), (["--depth"], "option --depth needs a value"),
])
def test_bad_input_is_one_line_naming_the_option(argv, message):
    with pytest.raises(ValueError, match=message) as info:
        read_argv(options_of(Toy), argv)
    assert "\n" not in str(info.value)


def test_read_argv_takes_both_spellings_and_builds_the_config():
    cfg = config_of(Toy, options_of(Toy), ["--n_examples=3", "--taus", "1", "--workers=none"])
    assert cfg == Toy(n_examples=3, taus=(1.0,), workers=None)
    assert config_of(Toy, options_of(Toy), ["--n-examples", "3"]) == Toy(n_examples=3)
    assert config_of(Toy, options_of(Toy), []) == Toy()
    with pytest.raises(ValueError, match="option --n-examples is given twice: give each option once"):
        config_of(Toy, options_of(Toy), ["--n_examples=2", "--n-examples", "3"])  # no last-wins, spelt either way


def test_spec_refines_orders_and_is_checked():
    opts = options_of(Toy, section="s", none=False, taus=dict(help="noises"), name=dict(choices=("a", "b"),
                      flag="--label"))
    assert [o.field for o in opts][:2] == ["taus", "name"] and {o.section for o in opts} == {"s"}
    assert opts[1].kind == "choice" and opts[1].dest == "label" and not opts[-2].none  # workers: no "none" text
    with pytest.raises(ValueError, match="unknown --label 'c'; choose one of a, b"):
        opts[1].parse("c")
    with pytest.raises(TypeError, match="no fields nope"):
        options_of(Toy, nope={})

    @dataclass(frozen=True)
    class Odd:
        x: dict = None

    with pytest.raises(TypeError, match="annotation no option reads"):
        options_of(Odd)
    with pytest.raises(ValueError, match="kind 'nope'"):
        Option("--x", None, "x", "nope")


def test_usage_lists_every_option_with_what_it_takes_and_its_default():
    text = usage(options_of(Toy), "python toy.py", Toy.__doc__)
    assert text.splitlines()[0] == "usage: python toy.py [--field=value ...]" and "A toy configuration." in text
    for line in ("--taus=<float,...>  (default 0.0,0.25)", "--workers=<int | none>  (default none)",
                 "--flag=<bool>  (default true)", "--n-examples=<int>  (default 7)"):
        assert line in text


def test_the_run_options_are_the_fields_of_the_run_configs():
    """RUN_OPTIONS is generated from DataConfig, ModelConfig and TrainConfig: every field once, its kind
    from its annotation (choices where the config has a fixed list), its default the field's (but depth: the
    number of scales, out: the default run folder)."""
    fields = {("data", f) for f in DataConfig.__dataclass_fields__} | {
        ("model", f) for f in ModelConfig.__dataclass_fields__} | {("train", f) for f in TrainConfig.__dataclass_fields__}
    assert sorted((o.section, o.field) for o in RUN_OPTIONS) == sorted(fields)
    kinds = {o.field: o.kind for o in RUN_OPTIONS}
    assert (kinds["n_tokens"], kinds["alpha"], kinds["device"], kinds["prior"], kinds["scales"]) == (
        "int", "real", "text", "choice", "numbers")
    assert not any(o.none or o.many for o in RUN_OPTIONS)
    defaults = {o.dest: o.default for o in RUN_OPTIONS}
    assert defaults["tokens"] == DataConfig().n_tokens and defaults["depth"] is None and defaults["out"] == "runs"


def test_the_study_scripts_options_and_their_one_line_refusal(capsys):
    from bridges.runs.options import script_options

    assert script_options(["--budgets=4,5", "--table"], {"budgets", "table"}) == {"budgets": "4,5", "table": "1"}
    with pytest.raises(SystemExit) as exc:
        script_options(["--budget=4"], {"budgets", "table"})
    assert exc.value.code == 2
    assert capsys.readouterr().err == "unknown options: budget; choose among --budgets, --table\n"
