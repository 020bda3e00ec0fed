"""SCAFFOLD at FedCKA's quick setup, α = 0.1: a plain-PyTorch loop written apart from fedlib's engine and strategy,
to tell whether a run that diverges there is the method or fedlib.

    python benchmarks/scaffold_reference.py --seed 0 --rounds 10 [--momentum 0.9] [--out f.json]

The loop takes only the data, the partition and the initial model from fedlib (the same as the campaign's run of
that seed); the training is NIID-Bench's SCAFFOLD as the papers' reference code has it: per client a fresh SGD
(lr, momentum, weight decay), after every optimizer step ``w -= lr (c - c_i)``; then option II,
``c_i+ = c_i - c + (w_global - w_i) / (K lr)`` with K the client's steps, ``c += sum(c_i+ - c_i) / N``, and the
model averaged with sample-size weights. Prints the test accuracy and the clients' largest training loss per round,
and the largest |c| (how big the correction has grown); ``--momentum 0`` drops the momentum.
"""

from __future__ import annotations

import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F

from fedlib.engine import Engine
from fedlib.companion.papers import preset


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--beta", type=float, default=0.1, help="Dirichlet α of the partition")
    ap.add_argument("--momentum", type=float, default=None, help="default: the preset's (0.9)")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = preset("fedcka", "quick", dataset="fmnist", strategy="scaffold", partition_kw={"beta": a.beta}, seed=a.seed)
    eng = Engine(cfg, progress=False)  # only for its data, partition and initial weights (its model, untrained)
    data, idx, model = eng.data, list(eng.client_idx), eng.model
    mom = cfg.momentum if a.momentum is None else a.momentum
    names = [n for n, p in model.named_parameters()]
    glob = {k: v.detach().clone() for k, v in model.state_dict().items()}
    c = {n: torch.zeros_like(p) for n, p in model.named_parameters()}
    c_i = [{n: torch.zeros_like(p) for n, p in model.named_parameters()} for _ in idx]
    sizes = torch.tensor([len(ix) for ix in idx], dtype=torch.float64)
    g = torch.Generator().manual_seed(a.seed)
    out = []
    for rnd in range(a.rounds):
        new, dc, worst = [], {n: torch.zeros_like(v) for n, v in c.items()}, 0.0
        for k, ix in enumerate(idx):
            model.load_state_dict(glob)
            model.train()
            opt = torch.optim.SGD(model.parameters(), lr=cfg.lr, momentum=mom, weight_decay=cfg.weight_decay)
            steps, last = 0, 0.0
            for _ in range(cfg.local_epochs):
                perm = ix[torch.randperm(len(ix), generator=g)]
                for b in range(len(perm) // cfg.batch_size):  # drop_last, as the preset
                    j = perm[b * cfg.batch_size:(b + 1) * cfg.batch_size]
                    loss = F.cross_entropy(model(data.x_train[j]), data.y_train[j])
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
                    with torch.no_grad():
                        for n, p in model.named_parameters():
                            p -= cfg.lr * (c[n] - c_i[k][n])
                    steps += 1
                    last = float(loss.detach())
            worst = max(worst, last) if math.isfinite(last) else math.inf
            with torch.no_grad():
                w = dict(model.named_parameters())
                for n in names:
                    cn = c_i[k][n] - c[n] + (glob[n] - w[n]) / (steps * cfg.lr)
                    dc[n] += cn - c_i[k][n]
                    c_i[k][n] = cn
            new.append({kk: v.detach().clone() for kk, v in model.state_dict().items()})
        wts = sizes / sizes.sum()
        glob = {kk: sum(float(wt) * s[kk].double() for wt, s in zip(wts, new)).to(glob[kk].dtype)
                if glob[kk].is_floating_point() else new[0][kk] for kk in glob}
        for n in names:
            c[n] += dc[n] / len(idx)
        model.load_state_dict(glob)
        model.eval()
        with torch.no_grad():
            acc = float((model(data.x_test).argmax(1) == data.y_test).float().mean())
        cmax = max(float(v.abs().max()) for v in c.values())
        out.append({"round": rnd + 1, "test_acc": acc, "max_client_loss": worst, "max_abs_c": cmax})
        print(f"round {rnd + 1}: test acc {100 * acc:.2f} %, largest last client loss {worst:.3f}, max |c| {cmax:.3g}",
              flush=True)
        if not math.isfinite(worst):
            break
    if a.out:
        json.dump({"seed": a.seed, "beta": a.beta, "momentum": mom, "rounds": out}, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
