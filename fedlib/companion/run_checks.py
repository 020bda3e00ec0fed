"""Whether a stored run can be read by a verdict: its history whole, its curve on its plateau, its
accuracy above chance (:func:`fedlib.companion.verdicts.decide` reads the answers)."""

from __future__ import annotations

import math
from typing import Any, Mapping

__all__ = ["PLATEAU_RISE", "PLATEAU_METRICS", "plateau_rise", "incomplete", "off_plateau",
           "off_plateau_by_every_metric", "learning_warnings"]

# On its plateau: at most this many points of rise over the last 20 % of rounds (plateau_rise).
PLATEAU_RISE = 1.0
# The accuracies a notebook reads a run's plateau from: the global model's, or the clients' own
# models' (FedSHIBU).
PLATEAU_METRICS = ("test_acc", "personal_acc_mean")


def plateau_rise(acc: Mapping[int, float], rounds: int) -> float | None:
    """The rise (in the units of ``acc``) of a run's curve over its last 20 % of rounds: the slope
    of a least-squares line through every evaluated round in ``(R/2, R]``, times ``0.2 R``. ``acc``:
    ``{round (1-based): accuracy}``. None when round ``R`` or fewer than 3 rounds of that half are
    evaluated (the plateau cannot be checked).

    A line through half the curve reads through round-to-round noise better than a few rounds at
    each end (benchmarks/plateau_rule.py; benchmarks/RESULTS.md, "The plateau rule"). On a curve
    still bending up it errs strict: its slope is the half's mean, steeper than the end's."""
    pts = [(r, float(v)) for r, v in acc.items()
           if rounds / 2 < r <= rounds and math.isfinite(float(v))]
    if rounds not in acc or not math.isfinite(float(acc[rounds])) or len(pts) < 3:
        return None
    mx = sum(r for r, _ in pts) / len(pts)
    my = sum(v for _, v in pts) / len(pts)
    slope = sum((r - mx) * (v - my) for r, v in pts) / sum((r - mx) ** 2 for r, _ in pts)
    return slope * 0.2 * rounds


def incomplete(record: Any) -> str | None:
    """``"incomplete record: round N missing"`` when ``record``'s history lacks a round of
    ``1..cfg.rounds`` (the first missing one, in the middle or at the end), holds one twice or one
    beyond them; None for a whole record."""
    rounds, n = [int(h["round"]) for h in record.history if "round" in h], int(record.cfg.rounds)
    if len(rounds) != len(set(rounds)):
        twice = next(r for r in rounds if rounds.count(r) > 1)
        return f"incomplete record: round {twice} appears twice"
    if extra := sorted(r for r in rounds if not 1 <= r <= n):
        return f"incomplete record: round {extra[0]} is not one of its {n} rounds"
    gone = sorted(set(range(1, n + 1)) - set(rounds))
    if not gone:
        return None
    more = f" ({len(gone)} in all)" if len(gone) > 1 else ""
    return f"incomplete record: round {gone[0]} missing{more}"


def off_plateau(record: Any, metric: str = "test_acc") -> str | None:
    """Why ``record`` (a :class:`fedlib.companion.results.Record`) is not on its plateau
    (:func:`plateau_rise` of ``metric``, in %, against :data:`PLATEAU_RISE`), or None when it is; an
    :func:`incomplete` record never is (its why says so), so that no verdict uses it."""
    if (gap := incomplete(record)) is not None:
        return gap
    acc = {int(h["round"]): 100 * float(h[metric]) for h in record.history
           if h.get(metric) is not None}
    rise = plateau_rise(acc, int(record.cfg.rounds))
    if rise is None:
        return (f"{metric} not evaluated often enough in its second half to read the plateau "
                "(3 rounds and the last)")
    return f"rises {rise:+.2f} points over its last 20 % of rounds" if rise > PLATEAU_RISE else None


def off_plateau_by_every_metric(record: Any) -> str | None:
    """Why ``record`` is off its plateau by each of the :data:`PLATEAU_METRICS` its history holds
    (so by whichever one a verdict reads: every claim that needs it is not testable), or None when
    it is on it by one of them."""
    held = [m for m in PLATEAU_METRICS if any(h.get(m) is not None for h in record.history)]
    whys = [off_plateau(record, m) for m in held]
    return whys[0] if held and all(whys) else None


def learning_warnings(cfg: Any, history: list[dict[str, Any]], num_classes: int) -> list[str]:
    """Why a finished run's numbers should not be trusted: a final accuracy that is not finite, or
    at chance level (<= 1.5 / classes) after at least 5 local epochs in total (rounds x
    local_epochs), when it should have learned. A run with a model per client is judged by its
    clients' mean accuracy on their own test splits (a local-only run has no global model to test).
    Empty when nothing is suspicious."""
    personal = any("personal_acc_mean" in h for h in history)
    key, what = (("personal_acc_mean", "personalized accuracy") if personal
                 else ("test_acc", "test accuracy"))
    accs = [h[key] for h in history if h.get(key) is not None]
    if not accs or num_classes < 2:
        return []
    final, chance = float(accs[-1]), 1.0 / num_classes
    if not math.isfinite(final):
        return [f"the final {what} is {final}"]
    if cfg.rounds * cfg.local_epochs >= 5 and final <= 1.5 * chance:
        return [f"the final {what} {final:.3f} is at chance level (1/{num_classes} = {chance:.3f}) "
                f"after {cfg.rounds} rounds of {cfg.local_epochs} local epoch(s): the network did "
                f"not learn. Try a lower learning rate (lr={cfg.lr}) or check the data and the "
                "model."]
    return []
