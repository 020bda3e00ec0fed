"""Strategy, model and optimizer options: typed by their signatures, checked before any training, nothing coerced,
nothing ignored. Every row is listed in docs/bad-inputs.md."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from fedlib.config import Config, ConfigError
from fedlib.engine import Engine
from fedlib.models import build_model
from fedlib.optim import OptimizerSpec, sgd_step
from fedlib.schedule import NonFiniteLossError
from fedlib.strategies import build_strategy

NAN, INF = float("nan"), float("inf")

# (config changes, the bad field, "field['option'] value" the message starts with, words it must contain)
BAD_OPTIONS = [
    # silently wrong before: coerced by int() / bool(), or accepted and ignored
    (dict(strategy="fedcka", strategy_kw={"M": 2.5}), "strategy_kw", "strategy_kw['M'] 2.5",
     "whole number (int) >= 1, not a float"),
    (dict(strategy="fedbabu", strategy_kw={"ft_batch_size": 2.5}), "strategy_kw", "strategy_kw['ft_batch_size'] 2.5",
     "whole number (int) >= 1, not a float"),
    (dict(strategy="fedintr", strategy_kw={"per_sample": "no"}), "strategy_kw", "strategy_kw['per_sample'] 'no'",
     "a bool (True or False), not a str"),
    (dict(strategy="fedprox", strategy_kw={"squared": "False"}), "strategy_kw", "strategy_kw['squared'] 'False'",
     "a bool (True or False), not a str"),
    (dict(model_kw={"code_input": "false"}), "model_kw", "model_kw['code_input'] 'false'",
     "a bool (True or False), not a str"),
    (dict(strategy="fedbabu", strategy_kw={"ft_lr": NAN}), "strategy_kw", "strategy_kw['ft_lr'] nan",
     "finite number >= 0, not finite"),
    (dict(strategy="fedavg_crsm", strategy_kw={"ft_epochs": 3}), "strategy_kw", "strategy_kw['ft_epochs'] 3",
     "not an option of strategy 'fedavg_crsm'; valid options: 'sim', 'n'"),
    # failed deep inside, or with an unclear message
    (dict(strategy="moon", strategy_kw={"mu": NAN}), "strategy_kw", "strategy_kw['mu'] nan", "finite number >= 0"),
    (dict(strategy="fedcka", strategy_kw={"mu": INF}), "strategy_kw", "strategy_kw['mu'] inf", "finite number >= 0"),
    (dict(strategy="moon", strategy_kw={"mu": "1.0"}), "strategy_kw", "strategy_kw['mu'] '1.0'", "not a str"),
    (dict(strategy="feder", strategy_kw={"floor": NAN}), "strategy_kw", "strategy_kw['floor'] nan", "finite"),
    (dict(strategy="fedshibu", strategy_kw={"rbf_threshold": 0}), "strategy_kw", "strategy_kw['rbf_threshold'] 0",
     "finite number > 0"),
    (dict(strategy="fedbabu", strategy_kw={"ft_lr": NAN, "ft_batch_size": 2.5}), "strategy_kw",
     "strategy_kw['ft_lr'] nan", "strategy_kw['ft_batch_size'] 2.5"),
    (dict(strategy="fedcka", strategy_kw={"sim": "cka"}), "strategy_kw", "strategy_kw['sim'] 'cka'",
     "one of the valid values 'linear_cka', 'rbf_cka'"),
    (dict(strategy="fedshibu", strategy_kw={"sim": "groups"}), "strategy_kw", "strategy_kw {'sim': 'groups'}",
     "go together"),
    (dict(model_kw={"proj_dim": -5}), "model_kw", "model_kw['proj_dim'] -5", "whole number (int) >= 1"),
    (dict(model="resnet18", model_kw={"proj_hidden": 0}), "model_kw", "model_kw['proj_hidden'] 0",
     "whole number (int) >= 1 or None"),
    (dict(optimizer="adamp", optimizer_kw={"deltaa": 0.1}), "optimizer_kw", "optimizer_kw['deltaa'] 0.1",
     "not an option of optimizer 'adamp' (did you mean 'delta'?); valid options: 'delta', 'wd_ratio', 'nesterov'"),
    (dict(optimizer="rmsgd", optimizer_kw={"beta": 2.0}), "optimizer_kw", "optimizer_kw['beta'] 2.0",
     "finite number in [0, 1)"),
    (dict(optimizer="adamp", optimizer_kw={"lr": 0.1}), "optimizer_kw", "optimizer_kw['lr'] 0.1",
     "set Config.lr"),
    (dict(optimizer="adam", optimizer_kw={"amsgrad": True}), "optimizer_kw", "optimizer_kw['amsgrad'] True",
     "valid options: none"),
    (dict(optimizer_kw={"nesterov": "yes"}), "optimizer_kw", "optimizer_kw['nesterov'] 'yes'", "a bool"),
    (dict(optimizer_kw={"nesterov": True}, momentum=0.0), "optimizer_kw", "optimizer_kw {'nesterov': True}",
     "needs momentum > 0"),
    (dict(strategy="fedbabu", strategy_kw={"ft_momentum": 0.0}, optimizer_kw={"nesterov": True}), "optimizer_kw",
     "optimizer_kw {'nesterov': True} (in fedbabu's fine-tuning", "needs momentum > 0"),
    (dict(optimizer="rmsgd", optimizer_kw={"nesterov": True, "dampening": 0.5}), "optimizer_kw",
     "optimizer_kw {'nesterov': True, 'dampening': 0.5}", "needs dampening=0"),
    (dict(strategy="local_only", partition="shards", partition_kw={"shards_per_user": 2}), "personal_eval",
     "personal_eval False", "set personal_eval=True"),
]


@pytest.mark.parametrize("changes,field,head,words", BAD_OPTIONS, ids=[h for _, _, h, _ in BAD_OPTIONS])
def test_bad_option_gets_one_error_naming_option_value_and_valid_values(changes, field, head, words):
    with pytest.raises(ConfigError) as err:
        Config(**changes).validate()
    assert err.value.fields == [field]
    msg = str(err.value)
    assert f"\n  - {head}" in msg and words in msg, msg


def test_options_are_checked_before_any_data_is_loaded(monkeypatch):
    import fedlib.engine as engine

    monkeypatch.setattr(engine, "load_data", lambda *a, **k: pytest.fail("data loaded before validation"))
    with pytest.raises(ConfigError, match=r"strategy_kw\['M'\] 2.5"):
        Engine(Config(strategy="fedcka", model="simple_cnn", strategy_kw={"M": 2.5}), progress=False)


def test_builders_reject_what_config_rejects():
    """Library users who build a strategy, model or optimizer directly get the same checks."""
    with pytest.raises(ValueError, match=r"strategy_kw\['M'\] 2.5: .*whole number"):
        build_strategy("fedcka", M=2.5)
    with pytest.raises(ValueError, match=r"strategy_kw\['squared'\] 'False'"):
        build_strategy("fedprox", squared="False")
    with pytest.raises(ValueError, match=r"model_kw\['proj_dim'\] -5"):
        build_model("intr_cnn", (1, 28, 28), 10, proj_dim=-5)
    with pytest.raises(ValueError, match=r"'option_a' is not an option of model 'resnet20'.*'projection'"):
        build_model("resnet20", (3, 32, 32), 10, option_a=False)  # fixed by the builder (He et al.'s option A)
    with pytest.raises(ValueError, match=r"optimizer_kw\['beta'\] 2.0"):
        OptimizerSpec(name="rmsgd", extra={"beta": 2.0}).validate()


@pytest.mark.parametrize("changes", [
    dict(strategy="fedcka", strategy_kw={"mu": 3, "M": 7}),  # an int is a number; M's upper bound is the model's
    dict(strategy="fedshibu", strategy_kw={"sim": "groups", "groups": [[0, 1], [2, 3]]}),
    dict(strategy="fedavg_crsm", strategy_kw={"sim": "uniform", "samples": "shared"}),
    dict(strategy="moon", strategy_kw={"tap": None, "tau": 0.1}),
    dict(model="resnet18", model_kw={"width": 8, "proj_hidden": None, "intr_pool": 2}),
    dict(optimizer="rmsgd", optimizer_kw={"beta": 0.98, "step_size": None, "linear": True}),
    dict(optimizer="adamp", optimizer_kw={"delta": 0.1, "wd_ratio": 0.1, "nesterov": True}),
    dict(optimizer_kw={"nesterov": True}),
    dict(strategy="local_only", personal_eval=True),
])
def test_valid_options_are_accepted(changes):
    Config(**changes).validate()


def test_every_committed_record_still_validates_under_its_key():
    records = sorted(Path(__file__).parents[1].joinpath("results", "records").glob("*.json"))
    for f in records:
        cfg = Config.from_dict(json.loads(f.read_text())["config"], migrate=True)
        assert cfg.key() == f.stem, f
        cfg.validate()


def test_unknown_config_field_is_a_config_error_with_a_hint():
    with pytest.raises(ConfigError) as err:
        Config(learning_rate=0.1)
    assert err.value.fields == ["learning_rate"]
    assert "'learning_rate' (did you mean 'lr'?)" in str(err.value) and "Valid fields:" in str(err.value)
    with pytest.raises(TypeError, match="rouns"):  # still a TypeError, as the dataclass raised
        Config(rouns=5)


# --------------------------------------------------------------------------------------------- SGD + Nesterov
@pytest.mark.parametrize("wd", [0.0, 1e-2])
def test_sgd_step_with_nesterov_equals_torch_optim(wd):
    g = torch.Generator().manual_seed(0)
    p0 = torch.randn(3, 4, generator=g)
    grads = [torch.randn(3, 4, generator=g) for _ in range(4)]
    ref = p0.clone().requires_grad_(True)
    opt = torch.optim.SGD([ref], lr=0.1, momentum=0.9, weight_decay=wd, nesterov=True)
    (p,), (b,) = [p0.clone()], [None]
    for gr in grads:
        ref.grad = gr.clone()
        opt.step()
        (p,), (b,) = sgd_step([p], [gr], [b], lr=0.1, momentum=0.9, weight_decay=wd, nesterov=True)
    torch.testing.assert_close(p, ref.detach(), rtol=0, atol=1e-6)
    built = OptimizerSpec(name="sgd", lr=0.1, momentum=0.9, extra={"nesterov": True}).build([ref])
    assert built.param_groups[0]["nesterov"] is True


def test_nesterov_trains_differently_under_its_own_key_in_both_executors(tiny_data):
    base = dict(dataset="synthetic", model="intr_cnn", partition="iid", partition_kw={}, num_clients=3, rounds=1,
                local_epochs=1, batch_size=64, lr=0.05, momentum=0.9, weight_decay=1e-4, augment="none", seed=1)
    plain = Config(**base, executor="sequential")
    nest = Config(**base, executor="sequential", optimizer_kw={"nesterov": True})
    assert nest.key() != plain.key()
    runs = {}
    for name, c in [("plain", plain), ("seq", nest), ("vec", nest.replace(executor="vectorized"))]:
        eng = Engine(c, data=tiny_data, progress=False)
        eng.run()
        runs[name] = eng.global_params
    assert any(not torch.equal(runs["plain"][k], runs["seq"][k]) for k in runs["plain"])
    for k in runs["seq"]:
        torch.testing.assert_close(runs["vec"][k], runs["seq"][k], rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------------------------ personalized evaluation
def test_a_non_finite_fine_tuned_model_is_never_scored(tiny_data):
    c = Config(dataset="synthetic", model="intr_cnn", partition="shards", partition_kw={"shards_per_user": 2},
               num_clients=5, rounds=1, local_epochs=1, batch_size=64, lr=0.05, augment="none", seed=1,
               strategy="fedbabu", strategy_kw={"ft_epochs": 1, "ft_batch_size": 1000}, personal_eval=True,
               executor="sequential")
    eng = Engine(c, data=tiny_data, progress=False)
    # one step that diverges, its loss still finite: past the frozen options (Config refuses NaN)
    object.__setattr__(eng.strategy.options, "ft_lr", float("nan"))
    with pytest.raises(NonFiniteLossError, match=r"fine-tuned .* non-finite .*fedbabu.*ft_lr"):
        eng.run()
    assert not eng.history


def test_a_strategy_built_directly_checks_its_options_in_the_same_one_place():
    from fedlib.strategies import FedCKA, FedProx, FedSHIBU

    with pytest.raises(ValueError, match=r"strategy_kw\['mu'\] -1: strategy 'fedprox' takes mu as a finite number >= 0"):
        FedProx(mu=-1)
    with pytest.raises(ValueError, match=r"strategy_kw\['ft_epochs'\] -1: strategy 'fedshibu'"):  # a parent's option
        FedSHIBU(ft_epochs=-1)
    with pytest.raises(ValueError, match=r"\['M'\] 0.*\['sim'\] 'x'"):  # every bad option in one error
        FedCKA(M=0, sim="x")
    assert FedSHIBU(ft_epochs=2, samples="own").options.ft_epochs == 2
    assert FedProx(0.5).options.mu == 0.5


def test_options_are_frozen_where_they_are_built():
    """A strategy's options are a frozen dataclass, read as ``strategy.options``: setting one is an
    error, never a value nothing reads."""
    import dataclasses

    s = build_strategy("fedprox", mu=0.5)
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.options.mu = 1.0
    assert s.options.mu == 0.5 and s.describe() == {"mu": 0.5, "squared": True}
    assert not hasattr(s, "mu")  # an option is read from the options, not the strategy


def test_every_strategy_declares_its_typed_options_in_its_own_file():
    """One convention for the twelve: a nested frozen dataclass ``Options`` declared by the
    strategy's class in the strategy's module, named after the strategy in its messages, whose
    defaults build."""
    import dataclasses
    import inspect

    from fedlib.strategies import STRATEGIES, Strategy, StrategyOptions

    for name, cls in STRATEGIES.items():
        opts = vars(cls).get("Options")
        assert opts is not None and issubclass(opts, StrategyOptions), name
        assert dataclasses.is_dataclass(opts) and opts.__dataclass_params__.frozen, name
        assert inspect.getsourcefile(opts) == inspect.getsourcefile(cls), name
        assert opts.strategy == name and opts.owner() == f"strategy {name!r}"
        s = build_strategy(name, opts())
        assert type(s.options) is opts and s.describe() is not None
    with pytest.raises(TypeError, match="FedProx.Options, not MOON.Options"):
        build_strategy("fedprox", STRATEGIES["moon"].Options())
    with pytest.raises(TypeError, match=r"declare \['alpha'\] as fields of a nested frozen"):

        class OldStyle(Strategy):  # options as __init__ parameters: refused where it is declared
            name = "old_style"

            def __init__(self, alpha: float = 1.0) -> None:
                super().__init__()


def test_a_config_builds_its_strategy_options_once_and_keeps_them_while_they_hold():
    import pickle

    cfg = Config(strategy="fedprox", strategy_kw={"mu": 1})
    opts = cfg.validate().strategy_options()
    assert opts.mu == 1.0 and isinstance(opts.mu, float)  # an int for a float is stored as a float
    assert cfg.strategy_options() is opts and cfg.validate() is cfg
    moved = cfg.replace(executor="sequential", label="x")  # where it runs: valid, same options
    assert moved.strategy_options() is opts and moved.__dict__["_validated"] == repr(moved)
    assert cfg.replace(strategy_kw={"mu": 2}).strategy_options().mu == 2.0
    assert "_validated" not in cfg.replace(lr=0.5).__dict__  # a field that computes: checked again
    cfg.strategy_kw["mu"] = -1.0  # changed in place: neither the options nor the validation hold
    with pytest.raises(ConfigError, match=r"strategy_kw\['mu'\] -1.0"):
        cfg.validate()
    again = pickle.loads(pickle.dumps(Config(strategy="moon").validate()))
    assert "_strategy_options" not in again.__dict__ and "_validated" not in again.__dict__
    assert again.strategy_options().mu == 1.0
    assert again.key() == Config(strategy="moon").key()
