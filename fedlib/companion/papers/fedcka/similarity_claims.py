"""Notebooks 02 and 04: FedCKA's claims on layer similarity as verdicts — early layers similar
across clients, late ones not (§3.1 / Fig. 2), the third layer's variance over client pairs (Appl.
Sci. Fig. 6) and the premise that ℓ_cka keeps the regularized layers as similar as FedAvg does
(Appl. Sci. §3.2). Each is a direction decided by :func:`fedlib.companion.verdicts.decide` over the
seeds, on the stored :class:`~fedlib.companion.similarity.LayerSimilarity` of the runs' final
models.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from fedlib.companion.budget import Scope
from fedlib.companion.results import Pending
from fedlib.companion.verdicts import Verdict, decide, not_testable, pending

__all__ = ["similarity_verdicts", "variance_verdicts", "premise_verdicts"]


def _layer_gap(values: Mapping[int, pd.Series], first: Sequence[str], rest: Sequence[str],
               how: str) -> dict:
    """Per seed: mean over ``first`` − mean over ``rest`` (``how="mean"``) or min over first − max
    over rest."""
    f = (lambda v: v[list(first)].mean() - v[list(rest)].mean()) if how == "mean" else \
        (lambda v: v[list(first)].min() - v[list(rest)].max())
    return {s: float(f(v)) for s, v in values.items()}


def similarity_verdicts(sims: Mapping[int, Any], sims50: Mapping[int, Any], scope: Scope,
                        off: Sequence[str] = ()) -> list[Verdict]:
    """§3.1 / Fig. 2 (both versions): early layers, not late ones, are similar across clients on IID
    data, a direction claim on CKA (against 0: the paper states no gap). ``sims``: seed →
    :class:`~fedlib.companion.similarity.LayerSimilarity` (or Pending) of the simple CNN;
    ``sims50``: of ResNet-50 (empty when the scale does not run it); ``off``: the runs behind them
    that are off their plateau."""
    out = []
    frames = {s: v.frame() for s, v in sims.items() if not isinstance(v, Pending)}
    some_pending = len(frames) < len(sims) or not sims
    specs = [("the first two layers are more similar to the global model than the last three",
              "FedCKA (arXiv) §3.1 / Fig. 2, "
              "'early layers, but not late layers, develop similar representations'",
              "CKA(client, global) mean", "mean", 3),
             ("the first two layers are more similar between clients than every later layer",
              "FedCKA (Appl. Sci.) §3.2 / Fig. 2, "
              "'the first two naturally similar layers are the two layers closest to the input'",
              "CKA(client, client) mean", "min", None)]
    for claim, src, col, how, n_last in specs:
        if some_pending:
            out.append(pending(f"simple CNN: {claim}", src))
            continue
        taps = list(next(iter(frames.values())).index)
        rest = taps[-n_last:] if n_last else taps[2:]
        gap = _layer_gap({s: f[col] for s, f in frames.items()}, taps[:2], rest, how)
        out.append(decide(f"simple CNN: {claim}", src, gap, unit="CKA", off=off,
                          names=("first two − " + ("last three" if n_last else "later layers"),
                                 "")))
    claim = ("ResNet-50: the stem and the first post-residual block are the most similar between "
             "clients")
    src = ("FedCKA (Appl. Sci.) §3.2 / Fig. 2, 'For ResNets, it is the initial convolutional layer "
           "and the first post-residual block'")
    name = "Appl. Sci. Fig. 2: FedAvg on IID clients, ResNet-50"
    if not sims50:
        out.append(not_testable(claim, src, scope.left_out.get(name, "not in this scale's plan")))
    elif any(isinstance(v, Pending) for v in sims50.values()):
        out.append(pending(claim, src))
    else:
        m = {s: v.frame()["CKA(client, client) mean"] for s, v in sims50.items()}
        taps = list(next(iter(m.values())).index)
        out.append(decide(claim, src, _layer_gap(m, taps[:2], taps[2:], "min"),
                          names=("stem, layer1 − rest", ""), unit="CKA", off=off))
    return out


def variance_verdicts(sims: Mapping[str, Mapping[int, Any]], scope: Scope,
                      off: Sequence[str] = ()) -> list[Verdict]:
    """Appl. Sci. §4.4 / Fig. 6: at α = 5 the third layer has the highest variance of between-client
    similarity (``sims``: run label → seed → LayerSimilarity or Pending): per seed, its variance
    over the highest of the other layers' (> 1)."""
    src = ("FedCKA (Appl. Sci.) §4.4 / Fig. 6, 'a non-similar layer (the third layer) with the "
           "highest variance of non-similarity'")
    out = []
    for name, by_seed in sims.items():
        claim = f"the third layer has the highest between-client CKA variance ({name}, α = 5)"
        if not by_seed:
            out.append(not_testable(claim, src, "not in this scale's plan"))
        elif any(isinstance(v, Pending) for v in by_seed.values()):
            out.append(pending(claim, src, "the run or its clients' models are not in the store"))
        else:
            ratio = {s: float(v.pair_var()[2] / np.delete(v.pair_var(), 2).max())
                     for s, v in by_seed.items()}
            out.append(decide(claim, src, ratio, unit="ratio", off=off,
                              names=("var(layer 3) / max var(other layers)", "")))
    return out


def premise_verdicts(sims: Mapping[str, Mapping[int, Any]],
                     regularized: Sequence[str] = ("conv1", "conv2"),
                     off: Sequence[str] = ()) -> list[Verdict]:
    """The premise of ℓ_cka (Appl. Sci. §3.2): regularizing the naturally similar layers keeps them
    as similar as they are without it, between clients and to the global model. Per seed, FedCKA's
    mean linear CKA over the ``regularized`` layers minus FedAvg's (``sims``: run label → seed →
    LayerSimilarity or Pending, labels starting "FedAvg" and "FedCKA"); "at least as similar" at the
    margin policy's 0.01 CKA; ``off``: runs off their plateau."""
    src = ("FedCKA (Appl. Sci.) §3.2, 'all settings ... should emulate the representational "
           "similarity of the ideal IID setting—achieved by regularizing only naturally similar "
           "layers'")
    by = {k.split(" ")[0]: v for k, v in sims.items()}
    out = []
    for what, col in (("between clients", "CKA(client, client) mean"),
                      ("to the global model", "CKA(client, global) mean")):
        claim = (f"FedCKA keeps its regularized layers ({', '.join(regularized)}) as similar "
                 f"{what} as FedAvg")
        if not {"FedAvg", "FedCKA"} <= set(by):
            out.append(not_testable(claim, src, "not in this scale's plan"))
            continue
        if any(isinstance(v, Pending) for s in ("FedAvg", "FedCKA") for v in by[s].values()):
            out.append(pending(claim, src, "the run or its clients' models are not in the store"))
            continue
        mean = {s: {seed: float(v.frame().loc[list(regularized), col].mean())
                    for seed, v in by[s].items()}
                for s in ("FedAvg", "FedCKA")}
        out.append(decide(claim, src, mean["FedCKA"], mean["FedAvg"], kind="at_least", unit="CKA",
                          off=off, names=("FedCKA", "FedAvg"),
                          finding="FedCKA below the baselines"))
    return out
