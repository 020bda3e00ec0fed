"""Layer-wise representational similarity between federated models (FedCKA Fig. 2, both versions;
Fig. 6).

FedCKA verifies its premise -- early layers, but not late layers, learn similar representations --
by training 10 clients on IID data and comparing, layer by layer, with linear CKA on the test set:

* arXiv Fig. 2: each client's local model (its trained model of the final round, before aggregation)
  against the final global model -> a clients x layers matrix (:func:`layer_cka_to_global`);
* Applied Sciences Fig. 2 / Fig. 6: the local models against each other -> one clients x clients
  matrix per layer (:func:`layer_cka_between_clients`), summarized by the mean and the variance over
  client pairs ``i < j`` (:func:`pair_stats`).

:func:`layer_similarity` computes both at once: per layer, one :func:`fedlib.kernels.cka_matrix`
call over ``[global, client_0, client_1, ...]`` (each centered Gram is built once). Representations
are the model's flattened taps in eval mode (:func:`fedlib.models.representations`).
"""

from __future__ import annotations

import json

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from torch import Tensor, nn

from fedlib.atomic import atomic_write_text
from fedlib.engine import load_data
from fedlib.kernels import cka_matrix
from fedlib.models import build_model, representations
from fedlib.params import Params
from fedlib.companion.results import Pending, Store, fetch

__all__ = ["LayerSimilarity", "layer_cka", "layer_similarity", "layer_cka_to_global", "cka_heatmap",
           "layer_cka_between_clients", "pair_stats", "run_similarity"]


def layer_cka(model: nn.Module, models: Sequence[Params], x: Tensor, taps: Sequence[str], *,
              kind: str = "linear", max_bytes: int | None = None) -> np.ndarray:
    """``S[l, a, b] = CKA(tap_l of models[a], tap_l of models[b])`` on ``x``: shape (layers, R, R),
    symmetric.

    ``model`` supplies the architecture (:func:`~fedlib.models.representations`); ``kind`` is any
    :func:`~fedlib.kernels.cka_matrix` kind (FedCKA uses ``"linear"``). ``max_bytes`` bounds the
    Grams held at once; ``None`` holds all R Grams of a layer (R n^2 float64 values), so each is
    built exactly once.
    """
    models = list(models)
    taps = tuple(taps)
    if not models:
        raise ValueError("layer_cka needs at least one model")
    if not taps:
        raise ValueError("layer_cka needs at least one tap")
    n = len(x)
    if max_bytes is None:
        max_bytes = max(len(models) * n * n * 8, 1)
    reps = [representations(model, p, x, taps) for p in models]  # [model][layer] -> (n, features)
    out = np.empty((len(taps), len(models), len(models)))
    for li in range(len(taps)):
        s = cka_matrix([r[li] for r in reps], kind=kind, max_bytes=max_bytes)
        out[li] = s.detach().cpu().numpy()
    return out


@dataclass(frozen=True)
class LayerSimilarity:
    """FedCKA's layer-similarity analysis of one run.

    ``to_global[c, l]``: CKA between client ``clients[c]`` and the global model at layer
    ``taps[l]``; ``between[l, c, d]``: CKA between clients ``clients[c]`` and ``clients[d]`` at
    layer ``taps[l]``.
    """

    taps: tuple[str, ...]
    clients: tuple[int, ...]
    to_global: np.ndarray
    between: np.ndarray

    def pair_mean(self) -> np.ndarray:
        """Per layer, the mean between-client CKA over pairs ``i < j`` (Appl. Sci. Fig. 2)."""
        return pair_stats(self.between)[0]

    def pair_var(self) -> np.ndarray:
        """Per layer, the variance of between-client CKA over pairs ``i < j`` (Appl. Sci. Fig.
        6)."""
        return pair_stats(self.between)[1]

    def frame(self) -> pd.DataFrame:
        """One row per layer: mean / std of CKA(client, global) over clients, mean / variance over
        client pairs."""
        mean, var = pair_stats(self.between)
        return pd.DataFrame({"CKA(client, global) mean": self.to_global.mean(0),
                             "CKA(client, global) std": self.to_global.std(0),
                             "CKA(client, client) mean": mean,
                             "CKA(client, client) var": var},
                            index=pd.Index(self.taps, name="layer"))


def layer_similarity(model: nn.Module, client_params: Mapping[int, Params], global_params: Params,
                     x: Tensor, taps: Sequence[str], *, kind: str = "linear",
                     max_bytes: int | None = None) -> LayerSimilarity:
    """Both FedCKA analyses from one CKA matrix per layer over ``[global, *clients]`` (clients
    sorted by id)."""
    cids = tuple(sorted(client_params))
    s = layer_cka(model, [global_params] + [client_params[c] for c in cids], x, taps, kind=kind,
                  max_bytes=max_bytes)
    return LayerSimilarity(taps=tuple(taps), clients=cids, to_global=s[:, 0, 1:].T.copy(),
                           between=s[:, 1:, 1:].copy())


def layer_cka_to_global(model: nn.Module, client_params: Mapping[int, Params],
                        global_params: Params, x: Tensor, taps: Sequence[str], **kw) -> np.ndarray:
    """FedCKA arXiv Fig. 2: CKA(client, global) per layer, shape (clients sorted by id, layers)."""
    cids = sorted(client_params)
    s = layer_cka(model, [global_params] + [client_params[c] for c in cids], x, taps, **kw)
    return s[:, 0, 1:].T.copy()


def layer_cka_between_clients(model: nn.Module, client_params: Mapping[int, Params], x: Tensor,
                              taps: Sequence[str], **kw) -> np.ndarray:
    """FedCKA Appl. Sci. Fig. 2: CKA between clients per layer, shape (layers, clients, clients),
    clients sorted."""
    return layer_cka(model, [client_params[c] for c in sorted(client_params)], x, taps, **kw)


def pair_stats(between: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Mean and (population) variance over the pairs ``i < j`` of each (clients x clients) matrix in
    ``between``.

    ``between`` has shape (layers, C, C) with C >= 2; returns two arrays of shape (layers,)."""
    between = np.asarray(between, dtype=float)
    if between.ndim != 3 or between.shape[1] != between.shape[2] or between.shape[1] < 2:
        raise ValueError(f"between must have shape (layers, C, C) with C >= 2, got {between.shape}")
    iu = np.triu_indices(between.shape[1], k=1)
    pairs = between[:, iu[0], iu[1]]
    return pairs.mean(1), pairs.var(1)



def run_similarity(cfg: Any, *, store: Any = None, train: bool = True, n_eval: int | None = None,
                   taps: Sequence[str] | None = None,
                   kind: str = "linear") -> "LayerSimilarity | Any":
    """:func:`layer_similarity` of a run's final models (global and every client's last local model)
    on the first ``n_eval`` images of a fixed class-stratified test subset (``None``: the run's
    whole test split), all the model's ``layer_taps`` unless ``taps`` is given.

    The result is kept in the store (``analysis/<key>.similarity-....json``, committed) and read
    from there when present; otherwise the run is fetched with its models (``fetch(cfg,
    artifacts=True)``: trained if missing, or trained again once if its stored record has no saved
    models, the record kept as stored). With ``train=False`` and neither it nor the models stored it
    returns a :class:`~fedlib.companion.results.Pending`."""
    store = store or Store()
    rec = fetch(cfg, store=store, train=False, progress=False)
    name = f"similarity-{kind}-{n_eval or 'all'}" + (f"-{'+'.join(taps)}" if taps else "")
    cached = store.analysis_path(rec.key, name) if not isinstance(rec, Pending) else None
    if cached is not None and cached.exists():
        d = json.loads(cached.read_text())
        return LayerSimilarity(tuple(d["taps"]), tuple(d["clients"]), np.array(d["to_global"]),
                               np.array(d["between"]))
    rec = fetch(cfg, store=store, train=train, progress=False, artifacts=True)
    if isinstance(rec, Pending) or not store.artifact_path(rec.key).exists():
        return Pending(cfg.key(), cfg.to_dict())
    models = store.artifacts(rec.key, device=cfg.device)
    data = load_data(cfg)
    model = build_model(cfg.model, data.in_shape, data.num_classes, **cfg.model_kw).to(cfg.device)
    x = data.subset(None, n_eval, seed=0).x_test if n_eval else data.x_test
    sim = layer_similarity(model, models["clients"], models["global"], x,
                           tuple(taps or model.layer_taps), kind=kind)
    atomic_write_text(store.analysis_path(rec.key, name), json.dumps(
        {"key": rec.key, "analysis": name, "taps": list(sim.taps), "clients": list(sim.clients),
         "to_global": sim.to_global.tolist(), "between": sim.between.tolist()}))
    return sim


# ------------------------------------------------------------------------------------------ figures


def cka_heatmap(ax, values: np.ndarray, rows: Sequence[str], cols: Sequence[str], *,
                vmin: float = 0.0, vmax: float = 1.0, cmap: str = "viridis", annotate: bool = True,
                fmt: str = "{:.2f}", colorbar: bool = True):
    """A (rows x cols) CKA matrix as an annotated heatmap (FedCKA Fig. 2: clients x layers); returns
    the image."""
    values = np.asarray(values, dtype=float)
    im = ax.imshow(values, aspect="auto", cmap=cmap, vmin=vmin, vmax=vmax, interpolation="nearest")
    ax.set_xticks(range(len(cols)), list(cols))
    ax.set_yticks(range(len(rows)), list(rows))
    if annotate:
        mid = vmin + 0.5 * (vmax - vmin)
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                ax.text(j, i, fmt.format(values[i, j]), ha="center", va="center", fontsize=8,
                        color="black" if values[i, j] > mid else "white")
    if colorbar:
        plt.colorbar(im, ax=ax, fraction=0.046, pad=0.02, label="linear CKA")
    return im
