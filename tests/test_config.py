"""Config validation: every field is checked, errors name the field, the bad value and the fix."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import fedlib.config as config_mod
from fedlib.config import Config, ConfigError
from fedlib.companion.papers import preset

# (field, bad value, words the message must contain); every row is listed in docs/bad-inputs.md
BAD_FIELDS = [
    ("num_clients", 2.5, "whole number"),
    ("num_clients", "10", "not a str"),
    ("num_clients", 0, ">= 1"),
    ("num_clients", True, "not a bool"),
    ("rounds", 2.5, "whole number"),
    ("rounds", 0, ">= 1"),
    ("local_epochs", 0, ">= 1"),
    ("batch_size", 0, ">= 1"),
    ("eval_every", 0, ">= 1"),
    ("seed", -1, ">= 0"),
    ("seed", 1.0, "whole number"),
    ("chunk_size", 0, ">= 1"),
    ("n_test", 0, ">= 1"),
    ("n_train", 0, ">= 1"),
    ("n_train", 100.0, "whole number"),
    ("checkpoint_every", -1, ">= 0"),
    ("sample_fraction", 0.0, "(0, 1]"),
    ("sample_fraction", 1.5, "(0, 1]"),
    ("lr", -0.1, "[0, inf)"),
    ("lr", float("nan"), "finite"),
    ("lr", float("inf"), "finite"),
    ("lr", "0.01", "number"),
    ("momentum", 1.0, "[0, 1)"),
    ("weight_decay", -1e-5, "[0, inf)"),
    ("lr_gamma", 0.0, "(0, inf)"),
    ("lr_milestones", (0.5, 1.5), "fractions"),
    ("lr_milestones", 0.5, "tuple"),
    ("dataset", "mnist", "valid datasets"),
    ("model", "cnn", "valid models"),
    ("strategy", "fedfoo", "valid strategies"),
    ("partition", "noniid", "valid partition schemes"),
    ("optimizer", "lion", "valid optimizers"),
    ("augment", "crop", "valid augmentations"),
    ("precision", "fp16", "valid precisions"),
    ("executor", "parallel", "valid executors"),
    ("device", "gpu", "device string"),
    ("partition_kw", None, "dict"),
    ("strategy_kw", {1: 2}, "str keys"),
    ("drop_last", "yes", "True or False"),
    ("personal_eval", 1, "True or False"),
    ("compile", "false", "True or False"),
    ("cuda_graph", "yes", "None (auto), True or False"),
    ("label", 3, "string"),
]


@pytest.mark.parametrize("field,value,words", BAD_FIELDS, ids=[f"{f}={v!r}" for f, v, _ in BAD_FIELDS])
def test_bad_field_gets_one_error_naming_field_value_and_fix(field, value, words):
    with pytest.raises(ValueError) as err:
        Config(**{field: value}).validate()
    msg = str(err.value)
    assert err.value.fields == [field]
    assert f"{field} {value!r}" in msg and words in msg


def test_every_field_has_a_rule():
    assert set(config_mod._RULES) == set(Config.field_names())


def test_defaults_and_presets_validate():
    Config().validate()
    for paper in ("fedintr", "fedcka"):
        for scale in config_mod.SCALES:
            preset(paper, scale)


def test_several_bad_fields_are_reported_together():
    with pytest.raises(ConfigError) as err:
        Config(num_clients=2.5, rounds="5", lr=-1.0).validate()
    assert err.value.fields == ["num_clients", "rounds", "lr"]


def test_numpy_scalars_become_python_numbers_with_the_same_key():
    cfg = Config(num_clients=np.int64(4), lr=np.float32(0.5), drop_last=np.bool_(True)).validate()
    assert type(cfg.num_clients) is int and type(cfg.drop_last) is bool
    assert cfg.key() == Config(num_clients=4, lr=0.5, drop_last=True).key()


# ---------------------------------------------------------------------------------- unknown keys, migration

def test_from_dict_rejects_unknown_keys_and_lists_valid_fields():
    with pytest.raises(ValueError) as err:
        Config.from_dict({"lr": 0.01, "learning_rate": 0.5, "rouns": 50})
    msg = str(err.value)
    assert "'learning_rate'" in msg and "'rouns'" in msg and "did you mean 'rounds'" in msg
    assert "Valid fields:" in msg and "num_clients" in msg
    assert err.value.fields == ["learning_rate", "rouns"]


def test_replace_and_preset_reject_unknown_keys():
    with pytest.raises(TypeError, match="rouns"):  # ConfigError is a TypeError too, as replace always raised
        Config().replace(rouns=5)
    with pytest.raises(ValueError, match="rouns"):
        preset("fedintr", "smoke", rouns=5)


def test_to_dict_from_dict_round_trip():
    cfg = preset("fedintr", "quick", lr_milestones=(0.5, 0.75), strategy="fedprox", strategy_kw={"mu": 0.01})
    back = Config.from_dict(cfg.to_dict())
    assert back == cfg and back.key() == cfg.key()


def test_records_of_older_versions_migrate_explicitly(monkeypatch):
    monkeypatch.setattr(config_mod, "_RENAMED", {"num_rounds": "rounds"})
    monkeypatch.setattr(config_mod, "_DROPPED", frozenset({"use_amp"}))
    old = {"num_rounds": 7, "use_amp": False, "lr": 0.1}
    with pytest.raises(ValueError, match="num_rounds"):  # strict by default: no silent reinterpretation
        Config.from_dict(old)
    cfg = Config.from_dict(old, migrate=True)
    assert cfg.rounds == 7 and cfg.lr == 0.1
    with pytest.raises(ValueError, match="both"):
        Config.from_dict({"num_rounds": 7, "rounds": 8}, migrate=True)
    with pytest.raises(ValueError, match="rouns"):  # migration does not excuse typos
        Config.from_dict({"rouns": 7}, migrate=True)


# ------------------------------------------------------------------------------------------ property-based

_VALID = Config()
_ANY_VALUE = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 300), st.integers(2**62, 2**64),
    st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=6),
    st.sampled_from(["fmnist", "cifar10", "simple_cnn", "fedprox", "iid", "adam", "flip", "bf16", "vectorized",
                     "cuda:1", "cpu"]),
    st.dictionaries(st.text(max_size=3), st.integers(), max_size=2),
    st.lists(st.floats(0, 2), max_size=3).map(tuple),
)


def _single_field_fails(name: str, value: object) -> bool:
    try:
        Config(**{name: value}).validate()
        return False
    except ConfigError as e:
        assert e.fields == [name] and name in str(e)
        return True


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.sampled_from(Config.field_names()), _ANY_VALUE, min_size=1, max_size=4))
def test_random_configs_validate_or_raise_one_error_naming_each_bad_field(changes):
    cfg = Config(**changes)
    expected = [n for n in Config.field_names() if n in changes and _single_field_fails(n, changes[n])]
    try:
        cfg.validate()
    except ConfigError as e:
        assert e.fields == expected and all(f in str(e) for f in expected)
    else:
        assert expected == []
        for name, value in changes.items():  # what validates is usable as it is typed
            default = getattr(_VALID, name)
            if type(default) is int and name not in ("n_train", "n_test", "chunk_size"):
                assert type(value) is int and value >= 0
            if type(default) is float:
                assert not isinstance(value, bool) and math.isfinite(value)
            if type(default) is bool:
                assert type(value) is bool


@pytest.mark.parametrize("field,value", [
    ("dataset", "Fashion-MNIST"),  # an alias load_dataset accepts
    ("lr_milestones", [0.5, 0.75]),  # a list, as JSON gives it back
    ("seed", 2**63 - 1),
    ("lr", 10),  # an int is a number; a learning rate this high is flagged after the run, not refused
    ("n_train", 10**9),  # more than the split holds: the whole split (FedDataset.subset)
    ("sample_fraction", 1e-9),  # at least one client is sampled (engine.sample_clients)
    ("eval_every", 1000),  # the last round is always evaluated
    ("batch_size", 10**6),  # a client smaller than a batch takes one smaller step
    ("device", "cuda:1"),  # a valid name; whether this machine has it is checked when a run starts
])
def test_unusual_but_meaningful_values_are_accepted(field, value):
    Config(**{field: value}).validate()


def test_unknown_model_keyword_names_the_models_keyword_arguments():
    with pytest.raises(ConfigError) as e:
        Config(model="simple_cnn", model_kw={"foo": 1}).validate()
    assert e.value.fields == ["model_kw"]
    assert "'foo'" in str(e.value) and "'projection'" in str(e.value) and "'out_dim'" in str(e.value)
    Config(model="resnet18", model_kw={"width": 8}).validate()  # forwarded to ResNet: accepted
    from fedlib.models import build_model

    with pytest.raises(ValueError, match=r"'option_a' is not an option of model 'resnet20'.*'projection'"):
        build_model("resnet20", (3, 32, 32), 10, option_a=False)  # fixed by the builder (He et al.'s option A)
