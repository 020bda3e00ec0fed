"""What FedCKA's term does to the layers it regularizes during one client's local training.

    python benchmarks/fedcka_similarity.py                     # writes benchmarks/fedcka_similarity.json, prints tables
    python benchmarks/fedcka_similarity.py --table benchmarks/fedcka_similarity.json      # the tables again

FedCKA's quick preset on Fashion-MNIST (Dirichlet α = 5, 10 clients, the simple CNN, seed 0) is trained for two
rounds, of FedAvg (``--starts fedavg``) or of FedCKA with μ = 3 (``fedcka``: the state a FedCKA run is in at round 3).
The global model after them is where the third round starts; the chosen client's local model of round 2 (before
aggregation) is its "previous local model" (FedCKA's ``prev`` reference at round 3). From there the client trains for
``--steps`` local SGD steps (the preset's round is 5 epochs, 115 steps for client 0; the steps go on past it with the
epochs' own shuffles) under:

* μ = 0 (FedAvg), μ = 0.3 and μ = 3 (the papers' best on CIFAR-10): fedlib's FedCKA strategy, M = 2 (conv1, conv2);
* two controls at μ = 3: ``previous = global`` (a client's first visit: Eq. 2 is then log 2 with a zero gradient, so
  training must equal μ = 0's), and ``pull only``: ``−μ · mean_n CKA(a_n, a_g,n)``, Eq. 2's positive side alone.

At logged steps: linear CKA (float64, :func:`fedlib.companion.similarity.layer_cka`, the committed analyses' routine) of the
local model to the global and to the previous model per layer on ``--n-eval`` fixed test images (the quick preset's
class-stratified test subset); on the step's mini-batch, the loss terms averaged since the last log (cross-entropy,
ℓ_cka, s_g = CKA(a, a_g), s_p = CKA(a, a_p) per regularized layer) and, before the step, the gradient norms over
the regularized layers' parameters of the mean s_g, the mean s_p, the cross-entropy and μ ℓ_cka.

Checks, in the JSON's ``checks``: the training loop here (fedlib's ``local_loss``, batches, optimizer) against the
sequential executor for one round; ℓ_cka on logged batches and the first and last CKA on the test images against
the independent float64 implementation of ``tests/test_fedcka_reference.py``.

Result (``fedcka_similarity.json``, client 0; CKA(local, global) conv1 / conv2 after one round of 115 steps):

* Both starts: at step 0 the local model is the global one, s_g = 1 and the gradient of s_g is float32 noise (norm
  2e-7 and 3e-7 against s_p's 0.044 from the FedAvg start and 0.098 from the FedCKA start): the term's first steps
  only push the regularized layers away from the previous model.
* FedAvg start (CKA(global, previous) 0.9993 / 0.9962): μ = 3 gives 0.985 / 0.946 against μ = 0's 0.995 / 0.898.
  conv1, which the cross-entropy hardly moves, keeps s_g near 1 and is pushed away; conv2 drifts under the
  cross-entropy, s_g falls, and the pull holds it closer to the global model than μ = 0 does.
* FedCKA start (CKA(global, previous) 0.9931 / 0.9845: the previous model was itself pushed): μ = 3 gives 0.909 /
  0.820 against μ = 0's 0.9945 / 0.917, and 0.829 / 0.726 against 0.989 / 0.795 after 300 steps. After 300 steps
  the extra displacement μ = 3 causes in conv1, θ(μ=3) − θ(μ=0), points along θ_global − θ_previous (cosine 0.82;
  0.34 from the FedAvg start) and is 3.0 times as long: the client is carried past the global model, away from
  where it was.
* Controls: previous = global trains bit for bit as μ = 0; pull only keeps both layers at CKA ≥ 0.994 to the global
  model. The loop equals the sequential executor exactly (difference 0); fedlib against the independent
  implementation: ℓ_cka 2e-7 relative, test-image CKA 3e-8 absolute.

So the loss is Eq. 2 as printed and the fall in similarity is the method's: with no temperature and CKA's maximum at
local = global, the only descent direction at the start of a round is away from the previous local model, and a
round of FedCKA leaves the next round's previous model farther from the global one, which strengthens the push.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from fedlib.engine import Engine  # noqa: E402
from fedlib.executors.sequential import batches  # noqa: E402
from fedlib.kernels import linear_cka_to  # noqa: E402
from fedlib.local import forward, local_loss  # noqa: E402
from fedlib.params import load_params_  # noqa: E402
from fedlib.companion.papers import preset  # noqa: E402
from fedlib.schedule import num_batches  # noqa: E402
from fedlib.strategies.fedcka import fedcka_loss  # noqa: E402
from fedlib.companion.similarity import layer_cka  # noqa: E402
from test_fedcka_reference import as_f64, ref_ell_cka, ref_linear_cka, ref_simple_cnn  # noqa: E402

OUT = Path(__file__).with_suffix(".json")
REG = ("conv1", "conv2")  # M = 2
VARIANTS: dict[str, dict[str, Any]] = {
    "mu=0": dict(mu=0.0),
    "mu=0.3": dict(mu=0.3),
    "mu=3": dict(mu=3.0),
    "mu=3, previous = global (control)": dict(mu=3.0, prev="global"),
    "mu=3, pull only (control)": dict(mu=3.0, term="pull"),
}


def _pull_penalty(mu: float):
    """``−μ · mean_n CKA(a_n, a_g,n)``: Eq. 2's positive side alone (fedlib's CKA)."""
    def penalty(ctx, b):
        return -mu * torch.stack([linear_cka_to(a, [g])[0] for a, g in zip(b.taps, b.refs["global"])]).mean()
    return penalty


def _engine(cfg, data, mu: float) -> Engine:
    c = cfg.replace(strategy="fedcka" if mu else "fedavg", strategy_kw={"mu": mu} if mu else {})
    return Engine(c, data=data, progress=False)


def _grad_norms(model, live, x, y, refs, mu: float) -> dict[str, float]:
    """Gradient norms, over the regularized layers' parameters, of mean s_g, mean s_p, the cross-entropy and
    μ ℓ_cka on one batch (fedlib's CKA)."""
    names = [k for k in live if k.split(".")[0] in REG]
    logits, taps = forward(model, None, x, REG, amp=False)
    sg = torch.stack([linear_cka_to(a, [g])[0] for a, g in zip(taps, refs["global"])]).mean()
    sp = torch.stack([linear_cka_to(a, [p])[0] for a, p in zip(taps, refs["prev"])]).mean()
    ell = fedcka_loss(taps, refs["global"], refs["prev"])
    ce = F.cross_entropy(logits, y)
    out = {}
    for key, f in (("s_g", sg), ("s_p", sp), ("cross_entropy", ce), ("mu*ell_cka", mu * ell)):
        if not f.requires_grad:
            out[key] = 0.0
            continue
        gs = torch.autograd.grad(f, [live[n] for n in names], retain_graph=True, allow_unused=True)
        out[key] = math.sqrt(sum(float((g * g).sum()) for g in gs if g is not None))
    return out


def train_variant(name: str, spec: dict[str, Any], cfg, data, cid: int, glob, prev, x_eval, steps: int,
                  log_at: list[int], check_at: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """One client's local training from ``glob``; returns the trajectory and the parameters at ``check_at``."""
    mu = spec["mu"]
    eng = _engine(cfg, data, mu)
    task = eng.task()
    if spec.get("term") == "pull":
        task = dataclasses.replace(task, penalty=_pull_penalty(mu))
    ref_prev = glob if spec.get("prev") == "global" else prev
    eng.global_params = glob
    eng.client_state[cid]["prev"] = ref_prev
    eng.visited.add(cid)
    ctx = eng.context(cid, 2)
    model, ref_model, spec_opt = eng.model, eng.ref_model, eng.optimizer
    for n, p in model.named_parameters():
        p.requires_grad_(n in task.trainable)
    load_params_(model, glob)
    model.train()
    full = model.state_dict(keep_vars=True)
    live = {n: full[n] for n in task.trainable}
    opt = spec_opt.build([live[n] for n in task.trainable])
    refs_params = {"global": glob, "prev": ref_prev}
    taps_all = tuple(model.layer_taps)

    traj: list[dict[str, Any]] = []
    acc = {"cross_entropy": [], "ell_cka": [], **{f"s_g:{k}": [] for k in REG}, **{f"s_p:{k}": [] for k in REG}}
    ref_checks: list[float] = []
    at_check: dict[str, torch.Tensor] = {}
    step, epoch = 0, 0

    def log(grads: dict[str, float] | None) -> None:
        params = {k: v.detach().clone() for k, v in full.items()}
        s = layer_cka(ref_model, [params, glob, ref_prev], x_eval, taps_all)
        row = {"step": step, "epoch": epoch,
               "cka_to_global": {t: float(s[i, 0, 1]) for i, t in enumerate(taps_all)},
               "cka_to_previous": {t: float(s[i, 0, 2]) for i, t in enumerate(taps_all)},
               "batch_mean_since_last_log": {k: (sum(v) / len(v) if v else None) for k, v in acc.items()},
               "grad_norms": grads}
        traj.append(row)
        for v in acc.values():
            v.clear()

    while step < steps:
        for g in opt.param_groups:
            g["lr"] = spec_opt.epoch_lr(ctx.lr, ctx.round * task.epochs + epoch)
        for x, y in batches(task, cid, ctx.round, epoch):
            with torch.no_grad():
                refs = {r: forward(ref_model, p, x, REG, False)[1] for r, p in refs_params.items()}
            if step in log_at:
                log(_grad_norms(model, live, x, y, refs, mu))
                # the independent implementation on this batch, float64
                w = as_f64({k: v for k, v in full.items()})
                ell_ref = ref_ell_cka(w, as_f64(glob), as_f64(ref_prev), x.double())
                with torch.no_grad():
                    _, taps = forward(model, None, x, REG, amp=False)
                    ell = fedcka_loss(taps, refs["global"], refs["prev"])
                ref_checks.append(abs(float(ell) - float(ell_ref)) / float(ell_ref))
            loss = local_loss(task, ctx, model, None, live, x, y, None, refs if task.needs.references else {},
                              {}, glob)
            with torch.no_grad():
                logits, taps = forward(model, None, x, REG, amp=False)
                acc["cross_entropy"].append(float(F.cross_entropy(logits, y)))
                acc["ell_cka"].append(float(fedcka_loss(taps, refs["global"], refs["prev"])))
                for k, a, ag, ap in zip(REG, taps, refs["global"], refs["prev"]):
                    s_g, s_p = linear_cka_to(a, [ag, ap])
                    acc[f"s_g:{k}"].append(float(s_g))
                    acc[f"s_p:{k}"].append(float(s_p))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            step += 1
            if step == check_at:
                at_check = {k: v.detach().clone() for k, v in full.items()}
            if step >= steps:
                break
        spec_opt.end_epoch(opt)
        epoch += 1
    log(None)
    final = {k: v.detach().clone() for k, v in full.items()}
    test_acc = eng.evaluate(final, data.x_test, data.y_test)[0]
    out = {"mu": mu, "control": "control" in name, "trajectory": traj, "test_acc_final": test_acc,
           "reference_batch_ell_cka_max_rel_diff": max(ref_checks) if ref_checks else None}
    return out, {"at_check": at_check, "final": final}


def executor_round(cfg, data, mu: float, cid: int, glob, prev) -> dict[str, torch.Tensor]:
    """One round of local training of client ``cid`` by the engine's sequential executor."""
    eng = _engine(cfg, data, mu)
    eng.global_params = glob
    eng.client_state[cid]["prev"] = prev
    eng.visited.add(cid)
    (res,) = eng.train([eng.context(cid, 2)], [glob])
    return res.params


def ref_cka_eval(params, glob, prev, x_eval) -> dict[str, dict[str, float]]:
    """The independent implementation's CKA (float64, feature form) on the test images, regularized layers."""
    with torch.no_grad():
        _, a = ref_simple_cnn(as_f64(params), x_eval.double())
        _, ag = ref_simple_cnn(as_f64(glob), x_eval.double())
        _, ap = ref_simple_cnn(as_f64(prev), x_eval.double())
    return {"to_global": {k: float(ref_linear_cka(a[k], ag[k])) for k in REG},
            "to_previous": {k: float(ref_linear_cka(a[k], ap[k])) for k in REG}}


def _cos(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a * b).sum() / (a.norm() * b.norm()))


STARTS = {"fedavg": ("fedavg", {}), "fedcka": ("fedcka", {"mu": 3.0})}  # the two rounds before the measured one


def run(args, start_with: str) -> dict[str, Any]:
    torch.set_num_threads(1)
    t0 = time.perf_counter()
    cfg = preset("fedcka", "quick", dataset="fmnist", seed=args.seed, executor="sequential", rounds=2)
    strategy, kw = STARTS[start_with]
    what = {"fedavg": "FedAvg", "fedcka": "FedCKA"}[strategy] + (f", mu={kw['mu']:g}" if kw else "")
    base = Engine(cfg.replace(strategy=strategy, strategy_kw=kw), progress=False, keep_client_models=True)
    base.run()
    data = base.data
    glob = {k: v.clone() for k, v in base.global_params.items()}
    prev = {k: v.clone() for k, v in base.client_models[args.client].items()}
    x_eval = data.subset(None, args.n_eval, seed=0).x_test
    n_cid = len(base.client_idx[args.client])
    round_steps = cfg.local_epochs * num_batches(n_cid, cfg.batch_size, cfg.drop_last)
    log_at = sorted({s for s in (0, 1, 2, 5, 10, 20, 40, 60, 80, 100, round_steps, 150, 200, 250)
                     if s < args.steps})
    start = layer_cka(base.ref_model, [glob, prev], x_eval, base.model.layer_taps)
    out: dict[str, Any] = {
        "setup": {"preset": "fedcka/quick", "dataset": "fmnist", "seed": args.seed, "client": args.client,
                  "client_samples": n_cid, "batch_size": cfg.batch_size, "lr": cfg.lr, "momentum": cfg.momentum,
                  "weight_decay": cfg.weight_decay, "round_steps": round_steps, "steps": args.steps,
                  "n_eval": len(x_eval), "regularized": list(REG),
                  "start": f"global model after 2 rounds of {what}",
                  "previous": f"client {args.client}'s local model of round 2 ({what})",
                  "global_test_acc": base.history[-1]["test_acc"], "threads": 1},
        "start": {"cka_global_previous": {t: float(start[i, 0, 1]) for i, t in enumerate(base.model.layer_taps)}},
        "variants": {}, "checks": {},
    }
    params: dict[str, dict[str, dict[str, torch.Tensor]]] = {}
    for name, spec in VARIANTS.items():
        t = time.perf_counter()
        res, ps = train_variant(name, spec, cfg, data, args.client, glob, prev, x_eval, args.steps, log_at,
                                round_steps)
        res["seconds"] = round(time.perf_counter() - t, 1)
        out["variants"][name] = res
        params[name] = ps
        print(f"{name}: {res['seconds']} s", flush=True)

    checks = out["checks"]
    for name, mu in (("mu=0", 0.0), ("mu=3", 3.0)):  # the loop here vs the engine's sequential executor
        ex = executor_round(cfg, data, mu, args.client, glob, prev)
        mine = params[name]["at_check"]
        if not mine:  # fewer steps than a round
            continue
        checks[f"executor vs this loop after one round, {name}: max |diff| / max |param|"] = max(
            float((ex[k] - mine[k]).abs().max() / mine[k].abs().max()) for k in mine)
    checks["previous = global vs mu=0 after all steps: max |diff|"] = max(
        float((params["mu=0"]["final"][k] - params["mu=3, previous = global (control)"]["final"][k]).abs().max())
        for k in glob)
    checks["reference vs fedlib, l_cka on logged batches: max rel diff"] = max(
        v["reference_batch_ell_cka_max_rel_diff"] for v in out["variants"].values())
    worst = 0.0
    for name, v in out["variants"].items():
        for row, ps in ((v["trajectory"][0], glob), (v["trajectory"][-1], params[name]["final"])):
            ref_prev = glob if "previous = global" in name else prev
            r = ref_cka_eval(ps, glob, ref_prev, x_eval)
            for k in REG:
                worst = max(worst, abs(r["to_global"][k] - row["cka_to_global"][k]),
                            abs(r["to_previous"][k] - row["cka_to_previous"][k]))
    checks["reference vs fedlib.companion.similarity, CKA on the test images (first, last): max abs diff"] = worst
    # where the term moves the regularized layers, in parameter space
    move = {}
    for k in ("conv1.weight", "conv2.weight"):
        d3 = params["mu=3"]["final"][k] - params["mu=0"]["final"][k]
        move[k] = {"cos(theta_mu3 - theta_mu0, theta_global - theta_previous)": _cos(d3, glob[k] - prev[k]),
                   "|theta_mu3 - theta_mu0| / |theta_global - theta_previous|":
                       float(d3.norm() / (glob[k] - prev[k]).norm())}
    out["parameter_space"] = move
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def tables(res: dict[str, Any]) -> str:
    s = res["setup"]
    lines = [f"FedCKA quick preset, Fashion-MNIST, seed {s['seed']}, client {s['client']} ({s['client_samples']} "
             f"images, {s['round_steps']} steps per round), linear CKA on {s['n_eval']} test images",
             f"start: {s['start']}; previous: {s['previous']}",
             "start: " + ", ".join(f"CKA(global, previous) {k} {v:.4f}"
                                   for k, v in res["start"]["cka_global_previous"].items() if k in REG)]
    rs = s["round_steps"]
    for title, last in ((f"after one round ({rs} steps)", False), (f"after {s['steps']} steps", True)):
        lines.append(f"\n{title}; l_cka: batch mean over the steps since the previous log")
        lines.append(f"{'variant':36s} {'CKA to global':>17s} {'CKA to previous':>17s} {'l_cka':>7s} "
                     f"{'test acc':>8s}")
        lines.append(f"{'':36s} {'conv1':>8s} {'conv2':>8s} {'conv1':>8s} {'conv2':>8s}")
        for name, v in res["variants"].items():
            r = v["trajectory"][-1] if last else next(r for r in v["trajectory"] if r["step"] == rs)
            ell = r["batch_mean_since_last_log"]["ell_cka"]
            acc = f"{100 * v['test_acc_final']:.2f}" if last else ""
            lines.append(f"{name:36s} {r['cka_to_global']['conv1']:8.4f} {r['cka_to_global']['conv2']:8.4f} "
                         f"{r['cka_to_previous']['conv1']:8.4f} {r['cka_to_previous']['conv2']:8.4f} "
                         f"{ell if ell is not None else float('nan'):7.4f} {acc:>8s}")
    lines.append("\ntrajectory of mu=3 (batch means since the previous log; gradient norms before the step)")
    lines.append(f"{'step':>5s} {'to g c1':>8s} {'to g c2':>8s} {'to p c1':>8s} {'to p c2':>8s} {'s_g c2':>7s} "
                 f"{'s_p c2':>7s} {'|grad s_g|':>10s} {'|grad s_p|':>10s} {'|grad CE|':>9s} {'|mu grad l|':>11s}")
    for r in res["variants"]["mu=3"]["trajectory"]:
        b, gn = r["batch_mean_since_last_log"], r["grad_norms"] or {}
        f = lambda v, w=7: f"{v:{w}.4f}" if v is not None else " " * (w - 1) + "-"  # noqa: E731
        lines.append(f"{r['step']:5d} {r['cka_to_global']['conv1']:8.4f} {r['cka_to_global']['conv2']:8.4f} "
                     f"{r['cka_to_previous']['conv1']:8.4f} {r['cka_to_previous']['conv2']:8.4f} "
                     f"{f(b['s_g:conv2'])} {f(b['s_p:conv2'])} {f(gn.get('s_g'), 10)} {f(gn.get('s_p'), 10)} "
                     f"{f(gn.get('cross_entropy'), 9)} {f(gn.get('mu*ell_cka'), 11)}")
    lines.append("\nchecks")
    lines += [f"  {k}: {v:.3g}" for k, v in res["checks"].items()]
    lines.append("parameter space (final, mu=3 minus mu=0)")
    lines += [f"  {k}: " + ", ".join(f"{n} {x:.3f}" for n, x in v.items()) for k, v in res["parameter_space"].items()]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--client", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--n-eval", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--starts", nargs="+", choices=sorted(STARTS), default=list(STARTS),
                    help="what the two rounds before the measured one run: FedAvg, or FedCKA with mu=3")
    ap.add_argument("--table", type=Path, help="print the tables of a stored result and exit")
    args = ap.parse_args()
    if args.table:
        for res in json.loads(args.table.read_text())["starts"].values():
            print(tables(res) + "\n")
        return
    out: dict[str, Any] = {"starts": {}}
    for start_with in args.starts:
        out["starts"][start_with] = res = run(args, start_with)
        args.out.write_text(json.dumps(out, indent=1) + "\n")
        print(tables(res) + "\n", flush=True)
    print(f"{sum(r['seconds'] for r in out['starts'].values()):.0f} s; written to {args.out}")


if __name__ == "__main__":
    main()
