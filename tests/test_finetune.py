"""Fine-tuning before a personalized evaluation (FedBABU, FedSHIBU): the protocol's settings, and that it never
raises a client's loss on its own training split."""

from __future__ import annotations

import pytest
import torch
from torch.func import functional_call

from fedlib.config import Config
from fedlib.engine import Engine
from fedlib.finetune import HeadTuner, head_path_problem, select
from fedlib.optim import OptimizerSpec
from fedlib.models import build_model
from fedlib.schedule import NonFiniteLossError
from fedlib.params import Params
from fedlib.strategies import build_strategy

INFLATE = 30.0  # conv3 (the extractor's last layer) × 30, fc1's weight ÷ 30: the same function, 30× the features


def cfg(executor: str = "sequential", augment: str = "none", **ft) -> Config:
    """FedSHIBU's identity control (each client trains its own body under the frozen random dense head) on
    two-class clients: after training, each client's model fits its own training split."""
    return Config(dataset="synthetic", model="intr_cnn", strategy="fedshibu", strategy_kw={"sim": "identity", **ft},
                  partition="shards", partition_kw={"shards_per_user": 2}, num_clients=5, rounds=2, local_epochs=5,
                  batch_size=32, lr=0.05, momentum=0.9, weight_decay=0.0, augment=augment, seed=1, executor=executor,
                  personal_eval=True, eval_every=100)


@pytest.fixture(scope="module")
def trained(tiny_data) -> Engine:
    eng = Engine(cfg(), data=tiny_data, progress=False)
    eng.run()
    return eng


def engine_like(trained: Engine, tiny_data, inflate: float = 1.0, executor: str = "sequential", augment: str = "none",
                **ft) -> Engine:
    """A fresh engine holding ``trained``'s models; ``inflate``: its features scaled by a function-preserving
    reparametrization (what a body without normalization does when it fits a frozen random head)."""
    eng = Engine(cfg(executor, augment, **ft), data=tiny_data, progress=False)
    eng.round = trained.round
    eng.global_params = {**trained.global_params, "fc1.weight": trained.global_params["fc1.weight"] / inflate}
    for cid, st in trained.client_state.items():
        own = dict(st["own"])
        own["conv3.weight"], own["conv3.bias"] = own["conv3.weight"] * inflate, own["conv3.bias"] * inflate
        eng.client_state[cid] = {"own": own}
    return eng


def train_loss(eng: Engine, cid: int, params: Params) -> float:
    """Cross-entropy on client ``cid``'s whole training split, computed here (not by the engine)."""
    ix = eng.client_idx[cid]
    with torch.no_grad():
        logits = functional_call(eng.ref_model, params, (eng.data.x_train[ix],))
    return float(torch.nn.functional.cross_entropy(logits, eng.data.y_train[ix]))


def test_protocol_settings(tiny_data):
    """The papers fine-tune the head (FedBABU's abstract; FedSHIBU §3.2); FedBABU's code: 5 epochs, lr 1e-3,
    momentum 0.9, batch 50, no weight decay, the whole model (ft_part="full"); backtracking on by default."""
    eng = Engine(cfg(), data=tiny_data, progress=False)
    shibu = eng.strategy
    ft = shibu.finetune()
    assert (ft.epochs, ft.lr, ft.momentum, ft.weight_decay, ft.batch_size, ft.backtrack) == (5, 1e-3, 0.9, 0.0, 50, 3)
    names = [n for n, _ in eng.model.named_parameters() if not n.startswith("proj.")]
    assert [n for n in names if ft.trainable(n)] == [f"fc{i}.{w}" for i in (1, 2, 3) for w in ("weight", "bias")]
    babu = build_strategy("fedbabu")
    babu.setup(eng.model, eng.cfg)
    assert [n for n in names if babu.finetune().trainable(n)] == ["fc3.weight", "fc3.bias"]  # FedBABU's head
    full = build_strategy("fedbabu", ft_part="full")
    full.setup(eng.model, eng.cfg)
    assert all(full.finetune().trainable(n) for n in names)
    assert build_strategy("fedbabu", ft_backtrack=0).finetune().backtrack == 0  # the papers' protocol as written
    assert build_strategy("fedbabu", ft_epochs=0).finetune() is None
    assert build_strategy("fedavg_crsm").finetune() is None


@pytest.mark.parametrize("executor", ["features", "sequential", "vectorized"])
def test_finetuning_never_raises_a_clients_training_loss(trained, tiny_data, executor):
    """Each client's trained model fits its own training split; with its features 30× larger (the same function)
    the papers' lr 1e-3 is past the edge of stability of the head's loss. Fine-tuning on that very split must not
    end with a higher loss than it started from (on the head's cached features, or by either executor)."""
    cached = executor == "features"
    executor = "sequential" if cached else executor
    cids = list(range(5))
    eng = engine_like(trained, tiny_data, INFLATE, executor)
    plain = engine_like(trained, tiny_data)
    starts = [eng.strategy.eval_params(c, eng.global_params, eng.client_state[c]) for c in cids]
    before = [train_loss(eng, c, p) for c, p in zip(cids, starts)]
    assert before == pytest.approx([train_loss(plain, c, plain.strategy.eval_params(c, plain.global_params,
                                                                                    plain.client_state[c]))
                                    for c in cids], rel=1e-3, abs=1e-5)  # the same function
    assert max(before) < 0.5  # fitted: nothing to unlearn
    after = [train_loss(eng, c, p) for c, p in zip(cids, eng.personalize(cids, cached=cached))]
    for c in cids:
        assert after[c] <= before[c], (c, before[c], after[c], eng.finetune_log["lr"])
    assert eng.finetune_log["loss_after"] == pytest.approx(after, rel=1e-4, abs=1e-6)
    # the case can fail: fine-tuning at lr 1e-3 throughout (no backtracking) raises some client's loss
    literal = engine_like(trained, tiny_data, INFLATE, executor, ft_backtrack=0)
    raised = [train_loss(literal, c, p) > before[c] for c, p in zip(cids, literal.personalize(cids, cached=cached))]
    assert any(raised)
    assert all(lr < 1e-3 for lr, r in zip(eng.finetune_log["lr"], raised) if r)


def test_where_the_papers_lr_is_stable_the_protocol_is_the_papers(trained, tiny_data):
    """Without inflated features lr 1e-3 lowers every client's training loss: nothing backtracks, and the models
    are those of fine-tuning at lr 1e-3 (ft_backtrack=0)."""
    cids = list(range(5))
    eng, literal = engine_like(trained, tiny_data), engine_like(trained, tiny_data, ft_backtrack=0)
    tuned, ref = eng.personalize(cids), literal.personalize(cids)
    assert eng.finetune_log["lr"] == [1e-3] * 5
    log = eng.finetune_log
    assert all(a < b for a, b in zip(log["loss_after"], log["loss_before"]))
    for t, r in zip(tuned, ref):
        assert all(torch.equal(t[k], r[k]) for k in t)


def test_both_accuracies_and_the_kept_rates_are_recorded(trained, tiny_data):
    eng = engine_like(trained, tiny_data, INFLATE)
    out = eng.personal_evaluation()
    assert {"personal_acc_mean", "personal_acc_std", "personal_noft_acc_mean", "personal_noft_acc_std"} <= set(out)
    assert len(out["personal_ft_lr"]) == 5 and all(0 <= lr <= 1e-3 for lr in out["personal_ft_lr"])
    assert out["personal_train_loss_mean"] <= out["personal_noft_train_loss_mean"]


@pytest.mark.parametrize("augment", ["none", "flip"])
def test_the_head_on_cached_features_trains_as_the_executor_does(trained, tiny_data, augment):
    """The fast path (the body run once per client, the head trained on its output; with flips, on the mirror
    images' too) gives the executor's models: the same batches, flips, optimizer and steps, at a stable lr and one at
    the edge of stability."""
    cids = list(range(5))
    for inflate in (1.0, INFLATE):
        fast = engine_like(trained, tiny_data, inflate, augment=augment, ft_backtrack=0)
        tuned = fast.personalize(cids)
        assert fast._finetune_executor is None  # it did not take the executor's path
        slow = engine_like(trained, tiny_data, inflate, augment=augment, ft_backtrack=0)
        ref = slow.personalize(cids, cached=False)
        for t, r in zip(tuned, ref):  # at the edge of stability float rounding grows over the steps: 1e-3
            for k in r:
                torch.testing.assert_close(t[k], r[k], rtol=1e-4 if inflate == 1 else 1e-3, atol=1e-5 * inflate)
        assert fast.finetune_log["loss_after"] == pytest.approx(slow.finetune_log["loss_after"], rel=1e-3, abs=1e-5)


@pytest.mark.parametrize("augment,optimizer", [("none", "sgd"), ("flip", "sgd"), ("none", "adam")])
def test_the_ladder_trained_together_equals_one_job_at_a_time(trained, tiny_data, augment, optimizer):
    """``HeadTuner.many`` (every client and lr of the ladder stacked, one vmapped step) gives each job the model
    and loss that fine-tuning it alone gives; a client with fewer samples (other batch sizes) trains in its own
    group."""
    ft = trained.strategy.finetune()
    trainable = trained._trainable(ft.trainable)
    spec = OptimizerSpec(name=optimizer, lr=1e-3, momentum=0.9 if optimizer == "sgd" else 0.0, weight_decay=1e-3)
    idx = list(trained.client_idx)
    idx[3] = idx[3][:len(idx[3]) - 5]

    def tuner() -> HeadTuner:
        return HeadTuner(trained.model, str(ft.features), trainable, spec, 2, 16, False, tiny_data.x_train,
                         tiny_data.y_train, idx, augment, seed=1, round=2)

    starts = [trained.strategy.eval_params(c, trained.global_params, trained.client_state[c]) for c in range(5)]
    jobs = [(c, starts[c], lr) for lr in (1e-3, 1e-4) for c in range(5)]
    alone = [tuner()(*j) for j in jobs]
    together = tuner().many(jobs)
    for (cid, start, lr), a, b in zip(jobs, alone, together):
        assert a[1] == pytest.approx(b[1], rel=1e-4, abs=1e-6), (cid, lr)
        assert any(not torch.equal(b[0][k], start[k]) for k in trainable)  # it trained
        for k in start:
            torch.testing.assert_close(b[0][k], a[0][k], rtol=1e-4, atol=1e-5)
            assert b[0][k].stride() == start[k].stride()


def test_tail_is_the_rest_of_the_forward_pass(tiny_data):
    torch.manual_seed(0)
    model = build_model("intr_cnn", tiny_data.in_shape, tiny_data.num_classes).eval()
    x = tiny_data.x_train[:16]
    with torch.no_grad():
        for tap in model.tail_taps:
            torch.testing.assert_close(model.tail(tap, model(x, taps=(tap,))[1][0]), model(x))
        with pytest.raises(ValueError, match="cannot run from tap 'conv2'"):
            model.tail("conv2", model(x, taps=("conv2",))[1][0])


def test_the_fast_path_is_taken_only_where_it_is_exact(tiny_data):
    """It needs a tap the model can run from, every fine-tuned layer after it, nothing that trains differently
    (BatchNorm, dropout), no augmentation but flips, fp32."""
    cnn = build_model("intr_cnn", tiny_data.in_shape, tiny_data.num_classes)
    head = ("fc1.weight", "fc1.bias", "fc3.weight")
    assert head_path_problem(cnn, "conv3", head, "none", "fp32") is None
    assert head_path_problem(cnn, "conv3", head, None, "fp32") is None
    assert "names no feature tap" in head_path_problem(cnn, None, head, "none", "fp32")
    assert "before tap 'fc1'" in head_path_problem(cnn, "fc1", head, "none", "fp32")
    assert head_path_problem(cnn, "conv3", head, "flip", "fp32") is None  # the mirror images' features too
    assert "'crop_flip'" in head_path_problem(cnn, "conv3", head, "crop_flip", "fp32")
    assert "bf16" in head_path_problem(cnn, "conv3", head, "none", "bf16")
    resnet = build_model("resnet18", tiny_data.in_shape, tiny_data.num_classes, width=4)
    assert "cannot run from" in head_path_problem(resnet, "layer4", ("fc.weight",), "none", "fp32")


def test_best_keeps_the_lowest_training_loss_of_the_ladder(trained, tiny_data):
    """ft_select="best": every lr of the ladder, the model of lowest training-split loss kept (the un-fine-tuned one
    among them); each rung checked against fine-tuning at that lr alone."""
    cids = list(range(5))
    best = engine_like(trained, tiny_data, INFLATE, ft_select="best")
    kept = [train_loss(best, c, p) for c, p in zip(cids, best.personalize(cids))]
    before = best.finetune_log["loss_before"]
    rungs = {}
    for k in range(4):
        lr = 1e-3 / 10 ** k
        alone = engine_like(trained, tiny_data, INFLATE, ft_lr=lr, ft_backtrack=0)
        rungs[lr] = [train_loss(alone, c, p) for c, p in zip(cids, alone.personalize(cids))]
    for i in cids:
        options = {0.0: before[i], **{lr: losses[i] for lr, losses in reversed(rungs.items())}}
        assert kept[i] == pytest.approx(min(options.values()), rel=1e-4, abs=1e-6)
        assert options[best.finetune_log["lr"][i]] == pytest.approx(kept[i], rel=1e-4, abs=1e-6)
    first = engine_like(trained, tiny_data, INFLATE)  # the default keeps the first lr that does not raise it
    first.personalize(cids)
    assert sum(first.finetune_log["loss_after"]) >= sum(best.finetune_log["loss_after"]) - 1e-6


def test_the_selection_rule():
    """With training losses given per lr: "best" keeps the lowest (ties: the larger lr; none lower: the start),
    "first" the first that does not raise it; a client with no finite model at any lr is an error."""
    losses = {1e-3: [0.5, 0.2, 3.0], 1e-4: [0.1, 0.2, 2.5], 1e-5: [0.3, 0.25, 2.1]}
    before, starts = [1.0, 1.0, 2.0], [{"w": torch.zeros(1)} for _ in range(3)]

    def tune(todo, lr):
        return [({"w": torch.full((1,), lr)}, losses.get(lr, [9.0] * 3)[i]) for i in todo]

    why = lambda i, what, lr: f"client {i}: {what}"  # noqa: E731
    kept, log = select("best", 2, 1e-3, before, tune, starts, why)
    assert log["lr"] == [1e-4, 1e-3, 0.0] and log["loss_after"] == [0.1, 0.2, 2.0]
    assert kept[2] is starts[2] and float(kept[0]["w"]) == pytest.approx(1e-4)
    _, log = select("first", 2, 1e-3, before, tune, starts, why)
    assert log["lr"] == [1e-3, 1e-3, 0.0]
    _, log = select("first", 0, 1e-3, before, tune, starts, why)  # the papers' protocol: one lr, kept
    assert log["lr"] == [1e-3] * 3 and log["loss_after"] == [0.5, 0.2, 3.0]
    with pytest.raises(NonFiniteLossError, match="client 1: model's training loss"):
        select("best", 1, 1e-3, before, lambda todo, lr: ["model's training loss" if i == 1 else
                                                          ({"w": torch.zeros(1)}, 0.5) for i in todo], starts, why)
    with pytest.raises(ValueError, match="valid: \\('first', 'best'\\)"):
        select("lowest", 1, 1e-3, before, tune, starts, why)
