"""FedBABU's two reference-code forms, offered as options: the plain body mean (``body_mean="plain"``) and the lr
milestones at ⌊m·R⌋ (``lr_rounding="floor"``); the defaults (the papers' forms) and every stored key unchanged."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from fedlib.config import Config, ConfigError
from fedlib.engine import Engine
from fedlib.schedule import round_lr
from fedlib.strategies import build_strategy, strategy_options
from test_fedshibu import cfg as shibu_cfg, trained  # noqa: F401  (the same small FedBABU setup)


def cfg(**kw) -> Config:
    return shibu_cfg(**{"rounds": 1, "strategy": "fedbabu", **kw})


def sizes(eng: Engine) -> list[int]:
    return [len(i) for i in eng.client_idx]


# ------------------------------------------------------------------------------------------------ body_mean
@pytest.mark.parametrize("strategy", ["fedbabu", "fedshibu"])
def test_plain_mean_equals_the_sample_weighted_mean_bitwise_when_clients_are_equally_large(strategy, tiny_data):
    weighted = trained(cfg(strategy=strategy, rounds=2), tiny_data)
    plain = trained(cfg(strategy=strategy, rounds=2, strategy_kw={"body_mean": "plain"}), tiny_data)
    assert len(set(sizes(weighted))) == 1  # shards: equal clients
    for k, v in weighted.global_params.items():
        assert torch.equal(plain.global_params[k], v), k


def test_plain_mean_differs_with_unequal_clients_and_equals_a_hand_computed_mean(tiny_data):
    kw = dict(partition="dirichlet", partition_kw={"beta": 0.5}, personal_eval=False, rounds=1)
    weighted = trained(cfg(**kw), tiny_data)
    plain = trained(cfg(**kw, strategy_kw={"body_mean": "plain"}), tiny_data)
    n = sizes(plain)
    assert len(set(n)) > 1
    body = sorted(plain.trained)
    assert any(not torch.equal(plain.global_params[k], weighted.global_params[k]) for k in body)
    m = len(n)
    for k in body:
        clients = [plain.client_models[c][k].double() for c in range(m)]
        by_hand = sum(clients) / m
        by_size = sum(c * (ni / sum(n)) for c, ni in zip(clients, n))
        if plain.global_params[k].is_floating_point():
            torch.testing.assert_close(plain.global_params[k].double(), by_hand, rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(weighted.global_params[k].double(), by_size, rtol=1e-5, atol=1e-6)
        else:  # integer buffers: the mean, rounded
            assert torch.equal(plain.global_params[k], by_hand.round().to(plain.global_params[k].dtype)), k


def test_plain_mean_of_the_aggregate_hook_is_one_over_m_whatever_the_weights():
    g = torch.Generator().manual_seed(0)
    uploads = [{"w": torch.randn(3, 4, generator=g), "n": torch.tensor(i)} for i in (2, 5, 9)]
    weights = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64)
    plain, metrics = build_strategy("fedbabu", body_mean="plain").aggregate(0, {}, uploads, weights, [])
    weighted, _ = build_strategy("fedbabu").aggregate(0, {}, uploads, weights, [])
    by_hand = (uploads[0]["w"] + uploads[1]["w"] + uploads[2]["w"]) / 3
    torch.testing.assert_close(plain["w"], by_hand)
    torch.testing.assert_close(weighted["w"], 0.7 * uploads[0]["w"] + 0.2 * uploads[1]["w"] + 0.1 * uploads[2]["w"])
    assert int(plain["n"]) == round(16 / 3) and metrics == {}


# ------------------------------------------------------------------------------------------------ lr_rounding
def lr_by_hand(R: int, rnd: int, floor: bool, lr: float = 0.1) -> float:
    """lr × 0.1 from round R/2 and from round 3R/4 (0-based), rounded down or up, in integer arithmetic."""
    half, three_q = (R // 2, 3 * R // 4) if floor else (-(-R // 2), -(-3 * R // 4))
    return lr * 0.1 ** ((rnd >= half) + (rnd >= three_q))


@pytest.mark.parametrize("R", range(1, 41))
def test_floor_and_ceil_milestones_differ_exactly_when_r_half_or_three_quarters_is_fractional(R):
    c = Config(rounds=R, lr=0.1, lr_milestones=(0.5, 0.75), lr_gamma=0.1)
    ceil = [round_lr(c, r) for r in range(R)]
    floor = [round_lr(c, r, "floor") for r in range(R)]
    assert ceil == [round_lr(c, r, "ceil") for r in range(R)]  # the default
    assert ceil == pytest.approx([lr_by_hand(R, r, floor=False) for r in range(R)], rel=1e-12)
    assert floor == pytest.approx([lr_by_hand(R, r, floor=True) for r in range(R)], rel=1e-12)
    assert (ceil != floor) == (R % 2 != 0 or (3 * R) % 4 != 0)


@pytest.mark.parametrize("strategy", ["fedbabu", "fedshibu"])
def test_the_engine_uses_the_strategys_lr_rounding(strategy, tiny_data):
    c = cfg(strategy=strategy, rounds=3, lr_milestones=(0.5, 0.75), lr_gamma=0.1, eval_every=3,
            strategy_kw={"ft_epochs": 0})
    ceil = [h["lr"] for h in trained(c, tiny_data).history]
    floor = [h["lr"] for h in trained(c.replace(strategy_kw={"ft_epochs": 0, "lr_rounding": "floor"}),
                                      tiny_data).history]
    assert ceil == pytest.approx([lr_by_hand(3, r, False, 0.05) for r in range(3)]) == [0.05, 0.05, 0.005]
    assert floor == pytest.approx([lr_by_hand(3, r, True, 0.05) for r in range(3)]) == [0.05, 0.005, 0.0005]


# ------------------------------------------------------------------------------------------------ errors, keys
@pytest.mark.parametrize("strategy", ["fedbabu", "fedshibu"])
@pytest.mark.parametrize("option,bad,valid", [("body_mean", "mean", "'weighted', 'plain'"),
                                              ("lr_rounding", "round", "'ceil', 'floor'")])
def test_a_bad_value_is_one_error_naming_the_option_and_its_valid_values(strategy, option, bad, valid, tiny_data):
    with pytest.raises(ConfigError) as err:
        Config(strategy=strategy, strategy_kw={option: bad}).validate()
    assert err.value.fields == ["strategy_kw"] and str(err.value).count("\n  - ") == 1
    assert f"strategy_kw[{option!r}] {bad!r}" in str(err.value) and valid in str(err.value)
    with pytest.raises(ValueError, match=rf"strategy_kw\['{option}'\].*{valid}"):
        build_strategy(strategy, **{option: bad})
    with pytest.raises(ConfigError, match=option):  # before any data is loaded or round trained
        Engine(cfg(strategy=strategy, strategy_kw={option: bad}), data=tiny_data, progress=False)
    with pytest.raises(ValueError, match="'ceil', 'floor'"):
        round_lr(Config(), 0, "round")


@pytest.mark.parametrize("strategy", ["fedbabu", "fedshibu"])
def test_default_valued_options_keep_the_key_and_others_change_it(strategy):
    from fedlib.config import _LATER_OPTIONS

    options = strategy_options(strategy)
    later = _LATER_OPTIONS["strategy_kw"]
    assert {k: options[k].default for k in later} == later  # the identity drops exactly the defaults
    base = Config(strategy=strategy, strategy_kw={"ft_lr": 1e-3})
    assert Config(strategy=strategy, strategy_kw={"ft_lr": 1e-3, **later}).key() == base.key()
    assert Config(strategy=strategy, strategy_kw={"ft_lr": 1e-3, "body_mean": "plain"}).key() != base.key()
    assert Config(strategy=strategy, strategy_kw={"ft_lr": 1e-3, "lr_rounding": "floor"}).key() != base.key()
    assert Config(strategy=strategy, strategy_kw={"ft_lr": 1e-3, **later}).to_dict()["strategy_kw"] == \
        {"ft_lr": 1e-3, **later}  # kept in the record's config, left out of its key only


def test_every_committed_record_keeps_its_key_under_the_current_code():
    records = sorted(Path(__file__).parents[1].joinpath("results", "records").glob("*.json"))
    assert records
    for f in records:
        assert Config.from_dict(json.loads(f.read_text())["config"], migrate=True).key() == f.stem, f
