"""FedCKA at its quick setup: a plain-PyTorch loop written apart from fedlib's engine, strategy and kernels, to tell
whether FedCKA falling below FedAvg at α = 0.1 (and losing accuracy over rounds) is the method or fedlib, and
whether Table 3's squared Frobenius norm diverging at α = 5 is.

    python benchmarks/fedcka_reference.py --seed 4 --rounds 30 [--beta 0.1] [--mu 3] [--out f.json]
    python benchmarks/fedcka_reference.py --seed 0 --rounds 3 --beta 5 --sim frobenius

The loop takes only the data, the partition and the initial model from fedlib (the same as the campaign's run of
that seed). Everything else is written here from the papers (Eq. 1-3 of both versions): the simple CNN's forward in
``torch.nn.functional`` (a conv layer's activation is its block's output, ReLU then 2×2 max pooling, flattened),
linear CKA in Kornblith et al.'s feature form on column-centred activations, and per batch

    ℓ = CE + μ · (1/M) Σ_{n ≤ M} −log( e^{CKA(a_n, a_g,n)} / (e^{CKA(a_n, a_g,n)} + e^{CKA(a_n, a_p,n)}) )

(as ``logsumexp(s_g, s_p) − s_g``, the same value, finite for unbounded similarities). ``--sim frobenius`` puts
Table 3's squared Frobenius norm in CKA's place with the sign of a similarity, ``−‖a₁ − a₂‖²_F`` (a sum over the
batch's whole activation maps); ``frobenius_mean`` divides it by the number of entries. A non-finite loss stops the
loop and names its round, client and step.

with the global model of the round and the client's own previous local model (the global one at its first round).
Per client a fresh SGD (lr, momentum, weight decay), sample-size-weighted averaging. ``--mu 0`` is FedAvg in the
same loop. Prints per round the test accuracy and the clients' mean CKA to the global and previous models.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch
import torch.nn.functional as F
from torch import Tensor

from fedlib.engine import Engine
from fedlib.companion.papers import preset

LAYERS = ("conv1", "conv2")  # the first M = 2 layers


def forward(w: dict[str, Tensor], x: Tensor) -> tuple[Tensor, dict[str, Tensor]]:
    """The FedCKA / MOON simple CNN (projection head included): logits and the first two layers' activations."""
    a1 = F.max_pool2d(F.relu(F.conv2d(x, w["conv1.weight"], w["conv1.bias"])), 2)
    a2 = F.max_pool2d(F.relu(F.conv2d(a1, w["conv2.weight"], w["conv2.bias"])), 2)
    h = F.relu(F.linear(a2.flatten(1), w["fc1.weight"], w["fc1.bias"]))
    h = F.relu(F.linear(h, w["fc2.weight"], w["fc2.bias"]))
    h = F.linear(F.relu(F.linear(h, w["l1.weight"], w["l1.bias"])), w["l2.weight"], w["l2.bias"])
    return F.linear(h, w["l3.weight"], w["l3.bias"]), {"conv1": a1.flatten(1), "conv2": a2.flatten(1)}


def cka(x: Tensor, y: Tensor) -> Tensor:
    """Linear CKA of (n, p) and (n, q): ‖Yᵀ X‖²_F / (‖Xᵀ X‖_F ‖Yᵀ Y‖_F) on centred columns, computed through the
    n × n products (‖Yᵀ X‖²_F = ⟨X Xᵀ, Y Yᵀ⟩; p is up to 2,304 here, n is the batch)."""
    x, y = x - x.mean(0), y - y.mean(0)
    kx, ky = x @ x.T, y @ y.T
    return (kx * ky).sum() / (kx.square().sum().sqrt() * ky.square().sum().sqrt())


SIMS = {"cka": cka, "frobenius": lambda x, y: -(x - y).square().sum(),
        "frobenius_mean": lambda x, y: -(x - y).square().mean()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seed", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--beta", type=float, default=0.1, help="Dirichlet α of the partition")
    ap.add_argument("--mu", type=float, default=3.0, help="FedCKA's μ (0: FedAvg in the same loop)")
    ap.add_argument("--sim", default="cka", choices=sorted(SIMS), help="the similarity in Eq. 2")
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    torch.set_num_threads(1)
    cfg = preset("fedcka", "quick", dataset="fmnist", strategy="fedcka", strategy_kw={"mu": a.mu},
                 partition_kw={"beta": a.beta}, seed=a.seed)
    eng = Engine(cfg, progress=False)  # only for its data, partition and initial weights (its model, untrained)
    data, idx = eng.data, list(eng.client_idx)
    glob = {k: v.detach().clone().contiguous() for k, v in eng.model.state_dict().items()}
    prev = [dict(glob) for _ in idx]
    sizes = torch.tensor([len(ix) for ix in idx], dtype=torch.float64)
    g = torch.Generator().manual_seed(a.seed)
    out = []
    for rnd in range(a.rounds):
        new, s_g, s_p = [], [], []
        for k, ix in enumerate(idx):
            w = {n: v.clone().requires_grad_(True) for n, v in glob.items()}
            opt = torch.optim.SGD(list(w.values()), lr=cfg.lr, momentum=cfg.momentum, weight_decay=cfg.weight_decay)
            for _ in range(cfg.local_epochs):
                perm = ix[torch.randperm(len(ix), generator=g)]
                n_b = len(perm) // cfg.batch_size if cfg.drop_last else -(-len(perm) // cfg.batch_size)
                for b in range(n_b):
                    j = perm[b * cfg.batch_size:(b + 1) * cfg.batch_size]
                    x, y = data.x_train[j], data.y_train[j]
                    logits, act = forward(w, x)
                    loss = F.cross_entropy(logits, y)
                    if a.mu and len(j) >= 4:
                        with torch.no_grad():
                            _, act_g = forward(glob, x)
                            _, act_p = forward(prev[k], x)
                        terms = []
                        for n in LAYERS:
                            sg, sp = SIMS[a.sim](act[n], act_g[n]), SIMS[a.sim](act[n], act_p[n])
                            terms.append(torch.logsumexp(torch.stack([sg, sp]), 0) - sg)
                            s_g.append(float(sg.detach()))
                            s_p.append(float(sp.detach()))
                        loss = loss + a.mu * sum(terms) / len(terms)
                    if not torch.isfinite(loss):
                        print(f"round {rnd + 1}, client {k}, epoch-step {b}: loss {float(loss.detach())} (similarity to "
                              f"global {s_g[-1]:.4g}, to previous {s_p[-1]:.4g})", flush=True)
                        return 1
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
            prev[k] = {n: v.detach().clone() for n, v in w.items()}
            new.append(prev[k])
        wts = sizes / sizes.sum()
        glob = {n: sum(float(wt) * s[n].double() for wt, s in zip(wts, new)).float() for n in glob}
        with torch.no_grad():
            acc = float((forward(glob, data.x_test)[0].argmax(1) == data.y_test).float().mean())
        mg = sum(s_g) / len(s_g) if s_g else float("nan")
        mp = sum(s_p) / len(s_p) if s_p else float("nan")
        out.append({"round": rnd + 1, "test_acc": acc, "cka_global": mg, "cka_prev": mp})
        print(f"round {rnd + 1}: test acc {100 * acc:.2f} %, mean {a.sim} to global {mg:.4g}, to previous {mp:.4g}",
              flush=True)
    if a.out:
        json.dump({"seed": a.seed, "beta": a.beta, "mu": a.mu, "sim": a.sim, "rounds": out}, open(a.out, "w"), indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
