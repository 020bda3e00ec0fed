"""What can FedSHIBU's CRSM detect? Clients of known label groups, every reading of D̂_i, round by round.

    python benchmarks/crsm_groups.py                       # every run below -> benchmarks/crsm_groups.json
    python benchmarks/crsm_groups.py --runs groups_local   # one run (merged into the JSON)
    python benchmarks/crsm_groups.py --table               # the table of the JSON again

The controlled case is Fig. 1's federation: ten clients, clients 0–4 hold labels 0–4 and clients 5–9 labels 5–9
(partition ``label_groups``), on the FedSHIBU quick preset (Fashion-MNIST, the FedIntR CNN with fc1–fc3 as the
frozen head, D̂_i = conv3's output, 288-d, n = 100 samples; 10 rounds of 100 local SGD steps). A CRSM that measures
data similarity must make clients of the same group more similar than clients of different groups.

Runs (``--runs``): ``groups_local`` / ``groups_local_s1`` (seeds 0 and 1) train every client's body on its own
data alone (the identity CRSM), so bodies of different groups drift apart as far as local training takes them.
``groups_own`` / ``groups_shared`` are FedSHIBU itself with each reading (the CRSM then also feeds back into the
bodies). ``shards_local`` / ``shards_own`` / ``shards_shared``: the same three on Fig. 3's partition (shards,
s = 5), where label overlap is graded. ``iid_local``: homogeneous data, where §4.3 says "all clients would be
weighed equally and FedSHIBU would equal FedBABU". About 2.5 min a run on one core.

After every round (and before the first, step 0: all bodies equal to the initial one) each client's trained body
is evaluated on the samples the strategy itself draws, and the CRSM is built under each reading:

* ``own`` / ``own_rbf``: Algorithm 2 with ``D_i``, each client's own n samples (§4.3), linear / RBF CKA over the
  samples (the strategy's ``samples="own"``). Rows of D̂_i and D̂_j are different images.
* ``shared`` / ``shared_rbf``: the same n samples for every client (Algorithm 2's ``D``; ``samples="shared"``).
* ``own_features``: own samples, linear CKA with the feature axis paired instead of the sample axis
  (:func:`fedlib.crsm.feature_crsm`). Not the paper's wording, but the one pairing own samples have: every body
  has the same architecture and starts from the same model, so feature k of client i and of client j are the
  same unit.
* ``own_chance``: not a reading but a prediction of ``own`` (:func:`fedlib.crsm.chance_crsm`): averaged over every
  pairing of the rows, unpaired linear CKA is √(r_i r_j) / (n − 1), r the participation ratio of each client's
  representation alone.

Each CRSM is summarized by: ``corr_overlap``, the Pearson correlation of its off-diagonal with the label overlap
(cosine of label histograms, :func:`fedlib.crsm.label_overlap`); ``self_weight``, the mean weight a client keeps
of its own body after Algorithm 3's row normalization (CRSM[i, j] / Σ_j CRSM[i, j]: 1 = local, 1/m = uniform);
``offdiag``, the mean off-diagonal entry; ``within`` / ``across``, the mean off-diagonal within / across label
groups (label_groups runs); ``mix_overlap``, the label overlap of what a client mixes in, Σ_{j≠i} W_ij O_ij /
Σ_{j≠i} W_ij averaged over clients (uniform weights give the mean overlap, ``uniform_overlap``; weighting by group
gives 1); ``nn_overlap``, the label overlap of each client's most similar other client; ``vs_chance``, the
correlation of the off-diagonal with ``own_chance``. A run's ``strategy_check`` is the largest difference between
the CRSM the strategy logged and the same reading recomputed here.

Findings (``crsm_groups.json``, seed 0 unless noted; ranges over the 10 trained rounds, 100–1,000 local steps):

* ``own`` is at chance: its mean off-diagonal (0.022–0.041) is 0.87–1.15 times ``own_chance``'s in all 88 CRSMs
  (step 0 included), its correlation with label overlap swings between −0.38 and +0.26 on the label groups
  (−0.03 to +0.21 on shards), and clients keep on average 0.73–0.84 of their own body, on IID data as well
  (0.73–0.81).
* ``shared`` finds Fig. 1's groups: correlation 0.80–1.00 in FedSHIBU's runs (0.54–1.00 with local bodies, where
  it decays as bodies of a group drift apart), every client's nearest client in its group. Its mean off-diagonal
  is 0.96–1.00 in FedSHIBU's runs (0.84–0.99 with local bodies), so Algorithm 3's row normalization leaves each
  client 0.100–0.117 of its own body and a mix as overlapping as uniform weights (0.45–0.53 against 0.44). On
  Fig. 3's shards (s = 5) it does not follow the graded overlap at this scale: −0.28 to +0.41, and at most +0.01
  from 200 steps on.
* ``own_features`` follows the groups with weights too (correlation ≥ 0.96; mix overlap 0.81–1.00 against 0.44)
  and partly the shards (0.24–0.73), but it separates the groups before any training (0.995 at step 0, through
  the one initial body) and its off-diagonal falls on IID data as bodies drift (0.86 → 0.53).
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from fedlib.crsm import chance_crsm, crsm, feature_crsm, label_overlap, offdiag_corr, row_weights  # noqa: E402
from fedlib.engine import Engine  # noqa: E402
from fedlib.companion.papers.fedshibu.plans import GROUPS  # noqa: E402
from fedlib.companion.papers import preset  # noqa: E402
from fedlib.companion.results import git_commit  # noqa: E402

OUT = Path(__file__).with_suffix(".json")
N = 100  # FedSHIBU's default n
RUNS: dict[str, dict[str, Any]] = {
    "groups_local": dict(partition="label_groups", partition_kw={}, strategy_kw={"sim": "identity"}),
    "groups_local_s1": dict(partition="label_groups", partition_kw={}, strategy_kw={"sim": "identity"}, seed=1),
    "groups_own": dict(partition="label_groups", partition_kw={}, strategy_kw={"sim": "linear", "samples": "own"}),
    "groups_shared": dict(partition="label_groups", partition_kw={},
                          strategy_kw={"sim": "linear", "samples": "shared"}),
    "shards_local": dict(partition="shards", partition_kw={"shards_per_user": 5}, strategy_kw={"sim": "identity"}),
    "shards_own": dict(partition="shards", partition_kw={"shards_per_user": 5},
                       strategy_kw={"sim": "linear", "samples": "own"}),
    "shards_shared": dict(partition="shards", partition_kw={"shards_per_user": 5},
                          strategy_kw={"sim": "linear", "samples": "shared"}),
    "iid_local": dict(partition="iid", partition_kw={}, strategy_kw={"sim": "identity"}),
}
READINGS = ("own", "own_rbf", "shared", "shared_rbf", "own_features", "own_chance")


def readings(eng: Engine, rnd: int, bodies: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    """Every reading's CRSM of the clients' ``bodies`` on the samples the strategy draws in round ``rnd``."""
    tap = (eng.strategy._tap,)
    own = [eng.features(c, rnd, b, tap, N)[0] for c, b in enumerate(bodies)]
    shared = [eng.features(c, rnd, b, tap, N, shared=True)[0] for c, b in enumerate(bodies)]
    thr = eng.strategy.options.rbf_threshold
    return {"own": crsm(own, "linear"), "own_rbf": crsm(own, "rbf", thr), "shared": crsm(shared, "linear"),
            "shared_rbf": crsm(shared, "rbf", thr), "own_features": feature_crsm(own), "own_chance": chance_crsm(own)}


def summary(S: Tensor, O: Tensor, chance: Tensor, groups: Tensor | None) -> dict[str, float]:
    """The measures of one CRSM ``S`` (see the module docstring); ``O`` the label overlap."""
    m = len(S)
    off = ~torch.eye(m, dtype=torch.bool)
    W = row_weights(S)
    Woff = W.masked_fill(~off, 0)
    nn = S.masked_fill(~off, float("-inf")).argmax(1)
    out = {"corr_overlap": offdiag_corr(S, O), "self_weight": float(W.diagonal().mean()),
           "offdiag": float(S[off].mean()),
           "mix_overlap": float(((Woff * O).sum(1) / Woff.sum(1).clamp_min(1e-300)).mean()),
           "nn_overlap": float(O[torch.arange(m), nn].mean()), "vs_chance": offdiag_corr(S, chance)}
    if groups is not None:
        same = (groups[:, None] == groups[None, :]) & off
        out.update(within=float(S[same].mean()), across=float(S[~same & off].mean()))
    return out


def run(name: str, rounds: int) -> dict[str, Any]:
    spec = dict(RUNS[name])
    cfg = preset("fedshibu", "quick", dataset="fmnist", executor="sequential", personal_eval=False, rounds=rounds,
                 eval_every=rounds, **spec)
    eng = Engine(cfg, progress=False, keep_client_models=True)
    m = eng.n_clients
    O = label_overlap(torch.as_tensor(eng.partition.counts.copy()))
    groups = torch.tensor([0 if c in GROUPS[0] else 1 for c in range(m)]) if cfg.partition == "label_groups" \
        else None
    steps = eng.context(0, 0).steps
    keep = ("dataset", "model", "partition", "partition_kw", "num_clients", "rounds", "local_epochs", "batch_size",
            "lr", "n_train", "seed", "strategy", "strategy_kw")
    out: dict[str, Any] = {
        "config": {k: v for k, v in cfg.to_dict().items() if k in keep}, "steps_per_round": steps,
        "uniform_overlap": float(O[~torch.eye(m, dtype=torch.bool)].mean()), "label_overlap": O.tolist(),
        "rounds": [], "strategy_check": 0.0}

    def record(rnd_key: int, bodies: list[dict[str, Tensor]], logged: Any = None) -> None:
        t0 = time.perf_counter()
        R = readings(eng, rnd_key, bodies)
        entry = {"round": len(out["rounds"]), "steps": len(out["rounds"]) * steps,
                 **{k: summary(S, O, R["own_chance"], groups) for k, S in R.items()}}
        if logged is not None:
            reading = cfg.strategy_kw.get("samples", "own")
            out["strategy_check"] = max(out["strategy_check"],
                                        float((torch.tensor(logged, dtype=torch.float64) - R[reading]).abs().max()))
        out["rounds"].append(entry)
        out["crsm_last"] = {k: [[round(v, 5) for v in row] for row in S.tolist()] for k, S in R.items()}
        print(f"  {name} round {entry['round']:2d} ({entry['steps']:4d} steps, readings {time.perf_counter() - t0:.1f}"
              f" s): " + ", ".join(f"{k} r={entry[k]['corr_overlap']:+.2f} self={entry[k]['self_weight']:.2f}"
                                   for k in ("own", "shared", "own_features")), flush=True)

    record(0, [eng.global_params] * m)  # before training: the round-0 samples through the initial body
    for rnd in range(rounds):
        entry = eng.run_round(rnd)
        eng.history.append(entry)
        eng.round = rnd + 1
        # D̂_i comes from the body each client trained this round (what the strategy evaluates in client_end)
        record(rnd, [eng.client_models[c] for c in range(m)],
               entry.get("crsm") if cfg.strategy_kw.get("sim") == "linear" else None)
    out["test_acc"] = eng.history[-1].get("test_acc")
    return out


def ranges(res: dict[str, Any]) -> dict[str, Any]:
    """Per run and reading, the [min, max] over the trained rounds (steps > 0) of each measure."""
    out: dict[str, Any] = {}
    for name, r in res["runs"].items():
        trained = [e for e in r["rounds"] if e["steps"] > 0]
        out[name] = {k: {q: [round(min(e[k][q] for e in trained), 4), round(max(e[k][q] for e in trained), 4)]
                         for q in trained[0][k]} for k in READINGS}
    return out


def table(res: dict[str, Any]) -> str:
    rows = [f"{'run':<16} {'step':>5} {'reading':<13} {'r(overlap)':>10} {'self':>6} {'offdiag':>8} {'within':>8} "
            f"{'across':>8} {'mix_ov':>7} {'nn_ov':>6} {'r(chance)':>9}"]
    for name, r in res["runs"].items():
        for e in r["rounds"]:
            if e["round"] not in (0, 1, 5, len(r["rounds"]) - 1):
                continue
            for k in READINGS:
                s = e[k]
                rows.append(f"{name:<16} {e['steps']:>5} {k:<13} {s['corr_overlap']:>+10.3f} {s['self_weight']:>6.3f} "
                            f"{s['offdiag']:>8.4f} {s.get('within', float('nan')):>8.4f} "
                            f"{s.get('across', float('nan')):>8.4f} {s['mix_overlap']:>7.3f} {s['nn_overlap']:>6.3f} "
                            f"{s['vs_chance']:>+9.3f}")
        rows.append(f"{name:<16} uniform mixing overlap {r['uniform_overlap']:.3f}; strategy check "
                    f"{r['strategy_check']:.1e}; test_acc {r['test_acc']}")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", nargs="*", default=list(RUNS), choices=list(RUNS))
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--table", action="store_true", help="print the table of --out and stop")
    a = ap.parse_args(argv)
    res = json.loads(a.out.read_text()) if a.out.exists() else {"runs": {}}
    if a.table:
        print(table(res))
        return 0
    torch.set_num_threads(1)
    for name in a.runs:
        t0 = time.perf_counter()
        res["runs"][name] = run(name, a.rounds)
        res["meta"] = {"date": str(datetime.date.today()), "commit": git_commit(), "torch": torch.__version__,
                       "n": N, "readings": list(READINGS)}
        res["ranges_over_rounds"] = ranges(res)
        a.out.write_text(json.dumps(res, indent=1))
        print(f"{name}: {time.perf_counter() - t0:.0f} s", flush=True)
    print(table(res))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
