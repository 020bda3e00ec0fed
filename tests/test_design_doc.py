"""docs/design.md's table of hooks and declarations says what the registered strategies do: a row per strategy, a
filled cell exactly where a strategy declares a need or overrides a hook."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fedlib.config import Config
from fedlib.models import build_model
from fedlib.strategies import STRATEGIES, Strategy, build_strategy

DOC = Path(__file__).resolve().parent.parent / "docs" / "design.md"
NAMES = {"FedAvg": "fedavg", "FedProx": "fedprox", "SCAFFOLD": "scaffold", "MOON": "moon", "FedCKA": "fedcka",
         "FedIntR": "fedintr", "FedER": "feder", "centralized": "centralized", "FedBABU": "fedbabu",
         "FedSHIBU": "fedshibu", "FedAvg+CRSM": "fedavg_crsm", "local only": "local_only"}
MODEL = {"fedintr": "intr_cnn"}  # the model a strategy is set up on (its paper's); others: the simple CNN
COLUMN_HOOKS = ("penalty", "correction", "client_end", "aggregate")
# the hooks that supply a declared need: overridden exactly when that need is declared
SUPPLIES = {"references": "references", "client_tensors": "tensors"}
OTHER_HOOKS = ("trainable", "client_start", "finetune", "eval_params", "state_dict")


def _table() -> dict[str, dict[str, str]]:
    text = DOC.read_text()
    block = text[text.index("## Hooks and declarations"):].split("\n\n")[2]
    lines = [ln for ln in block.splitlines() if ln.startswith("|")]
    cols = [c.strip().strip("`").split(" ")[0].strip("`") for c in lines[0].strip("|").split("|")]
    rows = {}
    for ln in lines[2:]:
        cells = [c.strip() for c in ln.strip("|").split("|")]
        rows[NAMES[cells[0]]] = dict(zip(cols[1:], cells[1:]))
    return rows


def _strategy(name: str) -> Strategy:
    kw = {"mu": 1.0} if name in ("fedprox", "moon", "fedcka", "fedintr") else {}
    s = build_strategy(name, **kw)
    model = MODEL.get(name, "simple_cnn")
    s.setup(build_model(model, (1, 28, 28), 10), Config(strategy=name, strategy_kw=kw, model=model))
    return s


def _overrides(s: Strategy, hook: str) -> bool:
    return getattr(type(s), hook) is not getattr(Strategy, hook)


def test_the_table_has_one_row_per_registered_strategy():
    assert sorted(_table()) == sorted(STRATEGIES)
    assert "twelve" in DOC.read_text() and len(STRATEGIES) == 12


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_a_filled_cell_is_exactly_a_declared_need_or_an_overridden_hook(name):
    row, s = _table()[name], _strategy(name)
    for need in ("taps", "references", "tensors"):
        assert bool(row[f"needs.{need}"]) == bool(getattr(s.needs, need)), (name, need, row[f"needs.{need}"])
    for hook in COLUMN_HOOKS:
        assert bool(row[hook]) == _overrides(s, hook), (name, hook, row[hook])
    for hook, need in SUPPLIES.items():
        assert _overrides(s, hook) == bool(getattr(s.needs, need)), (name, hook)
    named = set(re.findall(r"`([a-z_.]+)`", row["other"]))
    assert named & set(OTHER_HOOKS) == {h for h in OTHER_HOOKS if _overrides(s, h)}, (name, row["other"])
    for flag in ("global_params", "persistent_optimizer"):
        assert (f"needs.{flag}" in named) == getattr(s.needs, flag), (name, flag)
