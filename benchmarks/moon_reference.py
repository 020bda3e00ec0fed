"""A MOON run that diverged, replayed: the failing client's local training in fedlib and in a plain-PyTorch loop
written apart from fedlib's engine and strategy, to tell whether the divergence is the method or fedlib.

    python benchmarks/moon_reference.py --key 23343b64f2e26d60 [--out benchmarks/moon_reference.json]

``--key`` names a diverged run in ``results/failed/``. The engine resumes from the run's checkpoint
(``results/checkpoints/<key>.pt``, kept by the campaign when a run fails; without it, from round 0) and replays the
rounds before the failing one, each checked against the stored curve (the same run, or the script stops). Then
the failing client's local training of the failing round runs twice from the same global and previous local models
on the same batches: through fedlib (its penalty recorded each step) and through the loop here, MOON's Eq. 3-4 as
the paper writes it: ``CE + μ · CE([cos(z, z_g), cos(z, z_p)] / τ, 0)``, a fresh SGD (lr, momentum, weight decay).
The loop also runs without momentum, at μ = 1 and at μ = 0. Prints per variant the step of the first non-finite
loss, the largest projection norm ``|z|`` reached and the first step where the two implementations' penalties
differ by more than 1e-3. Simple CNN with MOON's projection head only.
"""

from __future__ import annotations

import argparse
import json
import math
import re
from pathlib import Path

import torch
import torch.nn.functional as F

from fedlib.config import Config
from fedlib.engine import Engine
from fedlib.schedule import NonFiniteLossError
from fedlib.executors.sequential import batches


def forward(w: dict[str, torch.Tensor], x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The simple CNN (MOON's ``ModelFedCon``) from its weights: the projection ``z`` and the logits."""
    h = F.max_pool2d(F.relu(F.conv2d(x, w["conv1.weight"], w["conv1.bias"])), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, w["conv2.weight"], w["conv2.bias"])), 2)
    h = F.relu(F.linear(h.flatten(1), w["fc1.weight"], w["fc1.bias"]))
    h = F.relu(F.linear(h, w["fc2.weight"], w["fc2.bias"]))
    z = F.linear(F.relu(F.linear(h, w["l1.weight"], w["l1.bias"])), w["l2.weight"], w["l2.bias"])
    return z, F.linear(z, w["l3.weight"], w["l3.bias"])


def reference(eng: Engine, cid: int, rnd: int, g: dict, prev: dict, mu: float, momentum: float, tau: float) -> list:
    """Per step ``(μ · contrastive term, max |z|)`` of client ``cid``'s local training in round ``rnd``."""
    cfg = eng.cfg
    w = {k: v.detach().clone().contiguous().requires_grad_(True) for k, v in g.items()}
    opt = torch.optim.SGD(list(w.values()), lr=cfg.lr, momentum=momentum, weight_decay=cfg.weight_decay)
    trace = []
    for epoch in range(cfg.local_epochs):
        for x, y in batches(eng.task(), cid, rnd, epoch):
            x = x.contiguous()
            z, logits = forward(w, x)
            with torch.no_grad():
                z_g, z_p = forward(g, x)[0], forward(prev, x)[0]
            sims = torch.stack([F.cosine_similarity(z, z_g, dim=1), F.cosine_similarity(z, z_p, dim=1)], 1) / tau
            term = mu * F.cross_entropy(sims, torch.zeros(len(y), dtype=torch.long, device=y.device))
            loss = F.cross_entropy(logits, y) + term
            trace.append((float(term.detach()), float(z.detach().norm(dim=1).max())))
            if not math.isfinite(float(loss.detach())):
                return trace
            opt.zero_grad()
            loss.backward()
            opt.step()
    return trace


def fedlib_trace(eng: Engine, cid: int, rnd: int) -> list:
    """The same client and round through fedlib's executor, its penalty and max |z| recorded each step."""
    strat, trace = eng.strategy, []
    penalty = strat.penalty

    def recorded(ctx, b):
        out = penalty(ctx, b)
        trace.append((float(out.detach()), float(b.taps[0].detach().flatten(1).norm(dim=1).max())))
        return out

    strat.penalty = recorded
    ctx = eng.context(cid, rnd)
    try:
        eng.train([ctx], [strat.client_start(ctx, eng.global_params)])
    except NonFiniteLossError:
        pass
    finally:
        strat.penalty = penalty
    return trace


def summary(trace: list, other: list | None = None) -> dict:
    bad = next((i for i, (t, z) in enumerate(trace) if not (math.isfinite(t) and math.isfinite(z))), None)
    apart = None if other is None else next((i for i, (a, b) in enumerate(zip(trace, other))
                                             if not abs(a[0] - b[0]) <= 1e-3), None)
    finite = [[v if math.isfinite(v) else None for v in step] for step in trace]  # valid JSON: null, not NaN
    return {"steps": len(trace), "first_non_finite_step": bad, "first_step_apart": apart,
            "max_z": max(z for _, z in trace if math.isfinite(z)), "trace": finite}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--key", required=True, help="a diverged MOON run in results/failed/")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)  # the campaign's single-thread workers: the same sums, the same run
    failed = json.loads(Path(f"results/failed/{a.key}.json").read_text())
    cfg = Config.from_dict(failed["config"])
    if cfg.strategy != "moon" or cfg.model != "simple_cnn":
        raise SystemExit(f"--key {a.key}: a MOON run on the simple CNN is needed, not {cfg.strategy} on {cfg.model}")
    rnd, cid = failed["failed_round"] - 1, int(re.search(r"client (\d+)", failed["error"]["message"]).group(1))
    eng = Engine(cfg, progress=False)
    if (ck := Path(f"results/checkpoints/{a.key}.pt")).exists():
        eng.load_checkpoint(ck)
    stored = {h["round"]: h["test_acc"] for h in failed["history"]}
    for r in range(eng.round, rnd):
        acc = eng.run_round(r)["test_acc"]
        assert acc == stored[r + 1], f"round {r + 1}: replay {acc} != stored {stored[r + 1]}"
        print(f"round {r + 1}: {100 * acc:.2f} % (as stored)", flush=True)
    g = {k: v.clone() for k, v in eng.global_params.items()}
    prev = {k: v.clone().contiguous() for k, v in eng.client_state[cid].get("prev", g).items()}
    ours = fedlib_trace(eng, cid, rnd)
    out = {"key": a.key, "round": rnd + 1, "client": cid, "mu": cfg.strategy_kw["mu"], "fedlib": summary(ours)}
    mu, tau, m = cfg.strategy_kw["mu"], eng.strategy.options.tau, cfg.momentum
    for name, (v_mu, v_m) in {"reference": (mu, m), "reference, momentum 0": (mu, 0.0),
                              "reference, μ = 1": (1.0, m), "reference, μ = 0": (0.0, m)}.items():
        out[name] = summary(reference(eng, cid, rnd, g, prev, v_mu, v_m, tau), ours if v_mu == mu and v_m == m
                            else None)
    print(f"client {cid}, round {rnd + 1} ({len(ours)} fedlib steps):")
    for name in [k for k in out if isinstance(out[k], dict)]:
        s = out[name]
        print(f"  {name:24s} steps {s['steps']:4d}  first non-finite step {s['first_non_finite_step']}  "
              f"max |z| {s['max_z']:.3g}" + (f"  apart from fedlib from step {s['first_step_apart']}"
                                            if name == "reference" else ""))
    if a.out:
        Path(a.out).write_text(json.dumps(out, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
