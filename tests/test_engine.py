"""Engine behaviour that results depend on: equivalences, resumption, determinism, clear errors."""

import dataclasses
import math

import numpy as np
import pytest
import torch

from fedlib.config import Config
from fedlib.companion.papers import preset
from fedlib.engine import Engine, NonFiniteLossError, round_lr, sample_clients
from fedlib.companion.results import Store, run


def small(**kw) -> Config:
    base = dict(dataset="synthetic", model="intr_cnn", partition="dirichlet",
                partition_kw={"beta": 0.5, "min_size": 5}, num_clients=4, rounds=2, local_epochs=1, batch_size=64,
                lr=0.05, momentum=0.9, weight_decay=1e-5, augment="flip", executor="sequential", seed=3)
    base.update(kw)
    return Config(**base)


def trained(cfg, data):
    eng = Engine(cfg, data=data, progress=False)
    eng.run()
    return eng


def assert_same_params(a, b, atol=0.0):
    assert a.keys() == b.keys()
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=atol, msg=f"parameter {k} differs")


def test_fedprox_mu0_trains_exactly_like_fedavg(tiny_data):
    cfg = small(sample_fraction=0.5, rounds=3)
    avg = trained(cfg, tiny_data)
    prox = trained(cfg.replace(strategy="fedprox", strategy_kw={"mu": 0.0}), tiny_data)
    assert_same_params(avg.global_params, prox.global_params)  # bit-identical
    # ... and mu > 0 really changes training (the equivalence is not vacuous)
    prox1 = trained(cfg.replace(strategy="fedprox", strategy_kw={"mu": 1.0}), tiny_data)
    assert not torch.equal(avg.global_params["fc3.weight"], prox1.global_params["fc3.weight"])


@pytest.mark.parametrize("rounds,momentum", [(1, 0.9), (3, 0.0)])
def test_one_client_fedavg_equals_centralized(tiny_data, rounds, momentum):
    """FedAvg with one client holding all data == centralized training with the same seed.

    FedAvg restarts the optimizer each round (as the papers' code does), centralized training keeps it, so the two
    agree exactly for one round or for momentum-free SGD; with momentum over several rounds they must differ."""
    cfg = small(partition="iid", partition_kw={}, num_clients=1, rounds=rounds, local_epochs=2, momentum=momentum)
    fed = trained(cfg, tiny_data)
    cen = trained(cfg.replace(strategy="centralized"), tiny_data)
    assert_same_params(fed.global_params, cen.global_params, atol=1e-6)
    assert fed.history[-1]["test_acc"] == pytest.approx(cen.history[-1]["test_acc"])


def test_centralized_keeps_momentum_across_rounds(tiny_data):
    cfg = small(partition="iid", partition_kw={}, num_clients=1, rounds=2, momentum=0.9)
    fed, cen = trained(cfg, tiny_data), trained(cfg.replace(strategy="centralized"), tiny_data)
    assert not torch.allclose(fed.global_params["fc3.weight"], cen.global_params["fc3.weight"])


def test_killed_run_resumes_to_the_same_record(tiny_data, tmp_path):
    cfg = small(rounds=4, sample_fraction=0.5, checkpoint_every=1)
    full = run(cfg, store=Store(tmp_path / "a"), data=tiny_data, progress=False)

    class Killed(Exception):
        pass

    def kill_after_two(engine, entry):
        if entry["round"] == 2:
            raise Killed

    store = Store(tmp_path / "b")
    with pytest.raises(Killed):
        run(cfg, store=store, data=tiny_data, progress=False, callback=kill_after_two)
    assert store.checkpoint_path(cfg.key()).exists() and store.get(cfg) is None
    resumed = run(cfg, store=store, data=tiny_data, progress=False)
    assert resumed.provenance["resumed_from_round"] == 2
    assert resumed.final_params_hash == full.final_params_hash
    strip = lambda h: [{k: v for k, v in e.items() if "time" not in k} for e in h]  # noqa: E731
    assert strip(resumed.history) == strip(full.history)
    assert not store.checkpoint_path(cfg.key()).exists()


def test_store_reuses_a_finished_record(tiny_data, tmp_path, monkeypatch):
    cfg = small(rounds=1)
    store = Store(tmp_path)
    first = run(cfg, store=store, data=tiny_data, progress=False)
    import fedlib.engine

    monkeypatch.setattr(fedlib.engine.Engine, "run", lambda *a, **k: pytest.fail("should reuse the record"))
    again = run(cfg.replace(device="cpu", label="renamed"), store=store, data=tiny_data, progress=False)
    assert again.final_params_hash == first.final_params_hash
    assert store.get(cfg).history == first.history


def test_fedavg_learns_and_records_provenance(tiny_data, tmp_path):
    rec = run(small(rounds=4, local_epochs=2, augment="none"), store=Store(tmp_path), data=tiny_data, progress=False)
    assert rec.history[-1]["test_acc"] > 0.3  # chance is 0.1
    for k in ("commit", "torch", "device", "cpu", "date", "wall_time_s"):
        assert k in rec.provenance
    assert len(rec.partition_hash) == 16 and rec.frame()["round"].tolist() == [1, 2, 3, 4]
    assert (tmp_path / "records" / f"{rec.key}.json").exists()


def test_host_cpu_names_the_model_and_its_matrix_units():
    import fedlib.companion.provenance as prov

    info = ("processor\t: 0\nmodel name\t: Intel(R) Xeon(R) Processor @ 2.50GHz\nflags\t\t: fpu avx2 avx512f "
            "amx_tile amx_bf16\n\nprocessor\t: 1\nmodel name\t: other\n")
    assert prov.host_cpu(info) == "Intel(R) Xeon(R) Processor @ 2.50GHz [avx2 avx512f amx_bf16 amx_tile]"
    assert prov.host_cpu("model name : Xeon\nflags : fpu sse2\n") == "Xeon []"
    assert prov.host_cpu("") and isinstance(prov.host_cpu(), str)


def test_nan_loss_raises_one_clear_error(tiny_data):
    bad = dataclasses.replace(tiny_data, x_train=torch.full_like(tiny_data.x_train, float("nan")))  # a copy
    with pytest.raises(NonFiniteLossError, match="Lower the learning rate"):
        trained(small(rounds=1), bad)


def test_client_sampling_is_a_pure_function_of_seed_and_round():
    a = sample_clients(100, 0.2, seed=1, rnd=5)
    assert len(a) == 20 and np.all(np.diff(a) > 0)
    assert np.array_equal(a, sample_clients(100, 0.2, seed=1, rnd=5))
    assert not np.array_equal(a, sample_clients(100, 0.2, seed=1, rnd=6))
    assert np.array_equal(sample_clients(10, 1.0, 0, 0), np.arange(10))


def test_lr_milestones_step_at_fractions_of_rounds():
    cfg = Config(rounds=100, lr=0.1, lr_milestones=(0.5, 0.75), lr_gamma=0.1)
    assert [round_lr(cfg, r) for r in (0, 49, 50, 74, 75, 99)] == pytest.approx(
        [0.1, 0.1, 0.01, 0.01, 0.001, 0.001])


def test_config_identity_ignores_execution_fields():
    cfg = preset("fedintr", "quick")
    assert cfg.key() == cfg.replace(device="cuda", executor="vectorized", checkpoint_every=5).key()
    assert cfg.key() != cfg.replace(seed=1).key()
    assert cfg.key() != cfg.replace(strategy_kw={"mu": 0.1}).key()


@pytest.mark.parametrize("change,match", [
    (dict(strategy="fedfoo"), "valid strategies"),
    (dict(strategy="fedprox", strategy_kw={"mu": -1}), r"strategy_kw\['mu'\] -1: .* >= 0"),
    (dict(optimizer="lion"), "valid optimizers"),
    (dict(sample_fraction=0.0), "sample_fraction"),
])
def test_bad_input_gives_one_clear_error(tiny_data, change, match):
    with pytest.raises(ValueError, match=match):
        Engine(small(**change), data=tiny_data, progress=False)


def test_unknown_preset_and_scale():
    with pytest.raises(ValueError, match="valid presets"):
        preset("fedfoo")
    with pytest.raises(ValueError, match="valid scales"):
        preset("fedintr", "huge")


def test_fedintr_paper_preset_matches_the_paper():
    cfg = preset("fedintr", "paper")
    assert (cfg.dataset, cfg.model, cfg.num_clients, cfg.rounds, cfg.local_epochs, cfg.batch_size) == (
        "fmnist", "intr_cnn", 10, 100, 10, 512)
    assert (cfg.lr, cfg.momentum, cfg.weight_decay, cfg.partition_kw["beta"]) == (0.01, 0.9, 1e-5, 0.5)
    assert preset("fedintr", "paper", dataset="cifar100").model == "resnet20"
    assert preset("fedcka", "paper").batch_size == 128 and math.isclose(preset("fedcka", "paper").lr, 0.01)


def test_bf16_precision_is_part_of_the_identity_and_trains(tiny_data):
    c = small(rounds=3, local_epochs=3)
    assert c.replace(precision="bf16").key() != c.key()
    assert c.replace(compile=True).key() == c.key()  # an execution switch: same numbers expected
    with pytest.raises(ValueError, match="precision 'fp16'"):
        c.replace(precision="fp16").validate()
    fp32 = trained(c, tiny_data)
    bf16 = trained(c.replace(precision="bf16"), tiny_data)
    # bf16 rounding depends on the CPU (native AVX512-BF16 or emulated) and this tiny run's accuracy swings by
    # 0.2 between rounds: compare the best round, not the last
    best = lambda e: max(h["test_acc"] for h in e.history)  # noqa: E731
    assert best(bf16) > 0.3  # chance is 0.1
    assert abs(best(bf16) - best(fp32)) < 0.15
    vec = trained(c.replace(precision="bf16", executor="vectorized"), tiny_data)
    assert abs(best(vec) - best(bf16)) < 0.15


def test_provenance_commit_is_dirty_only_for_code_changes(tmp_path):
    import subprocess

    from fedlib.companion.results import git_commit

    def git(*args):
        subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True)

    (tmp_path / "fedlib").mkdir()
    (tmp_path / "figures").mkdir()
    (tmp_path / "fedlib" / "m.py").write_text("x = 1\n")
    (tmp_path / "figures" / "f.json").write_text("{}\n")
    git("init", "-q")
    git("add", ".")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "init")
    clean = git_commit(tmp_path)
    assert len(clean) == 12 and not clean.endswith("-dirty")
    (tmp_path / "figures" / "f.json").write_text('{"new": 1}\n')  # a regenerated output
    assert git_commit(tmp_path) == clean
    (tmp_path / "fedlib" / "m.py").write_text("x = 2\n")  # code that produces numbers
    assert git_commit(tmp_path) == clean + "-dirty"


def test_a_run_is_stamped_with_the_code_its_process_imported(monkeypatch):
    """A campaign worker or notebook kernel runs the code it imported: a commit made on disk while it trains (what
    ``git_commit`` reads now) is not stamped on its records; ``$FEDLIB_COMMIT`` still is."""
    import fedlib.companion.provenance as prov

    monkeypatch.delenv("FEDLIB_COMMIT", raising=False)
    imported = prov.running_commit()
    monkeypatch.setattr(prov, "git_commit", lambda path=None: "0123456789ab")
    assert prov.provenance(small())["commit"] == imported != "0123456789ab"
    monkeypatch.setenv("FEDLIB_COMMIT", "feedfacecafe")
    assert prov.provenance(small())["commit"] == "feedfacecafe"


def test_fedprox_unsquared_norm_has_a_zero_gradient_at_the_global_model(tiny_data):
    """One step per client (batch ≥ client size) starts at w = w_g, where a hand-written sqrt(Σ(w − w_g)²) has the
    gradient 0·∞ = NaN; the norm's subgradient 0 keeps training finite, in both executors."""
    for ex in ("sequential", "vectorized"):
        c = small(strategy="fedprox", strategy_kw={"mu": 1e-3, "squared": False}, num_clients=2, rounds=1,
                  batch_size=512, executor=ex)
        eng = trained(c, tiny_data)
        assert all(torch.isfinite(v).all() for v in eng.global_params.values())
        assert math.isfinite(eng.history[-1]["test_loss"])


def test_non_finite_uploads_are_caught_before_aggregation(tiny_data, monkeypatch):
    """A client's last step can make its weights non-finite after the loss was last seen finite: the upload check
    stops the run instead of averaging a NaN model in. Weights that stay finite but overflow the logits are caught
    by the evaluation."""
    from fedlib.executors import SequentialExecutor

    train = SequentialExecutor.train

    def last_step_nan(self, task, job):
        r = train(self, task, job)
        r.params["fc1.weight"][0, 0] = float("nan")
        return r

    monkeypatch.setattr(SequentialExecutor, "train", last_step_nan)
    eng = Engine(small(num_clients=2, rounds=1), data=tiny_data, progress=False)
    with pytest.raises(NonFiniteLossError, match=r"Client 0 uploaded a non-finite 'fc1.weight' after round 1"):
        eng.run()
    monkeypatch.undo()
    eng = Engine(small(lr=1e6, batch_size=512, num_clients=2, rounds=2), data=tiny_data, progress=False)
    with pytest.raises(NonFiniteLossError, match=r"(uploaded a non-finite|Training loss became|test loss is nan)"):
        eng.run()
    assert all(torch.isfinite(v).all() for v in eng.global_params.values())  # the server kept a finite model
    assert all(math.isfinite(h["test_loss"]) for h in eng.history)  # nothing non-finite was recorded


def test_evaluation_batch_comes_from_the_device_table_and_does_not_change_the_result(tiny_data, monkeypatch):
    import fedlib.evaluation as evaluation_mod

    eng = Engine(small(), data=tiny_data, progress=False)
    x, y = tiny_data.x_test, tiny_data.y_test
    full = eng.evaluate(eng.global_params, x, y, batch_size=len(y))
    widths = []
    call = evaluation_mod.functional_call
    monkeypatch.setattr(evaluation_mod, "functional_call",
                        lambda m, p, a, *r: widths.append(len(a[0])) or call(m, p, a, *r))
    monkeypatch.setitem(evaluation_mod.EVAL_BATCH, "cpu", 48)
    acc, loss = eng.evaluate(eng.global_params, x, y)
    assert widths == [48, 48, 48, 16]  # 160 test samples
    assert acc == full[0] and loss == pytest.approx(full[1], rel=1e-6)


def test_a_run_evaluates_in_the_precision_it_trains_in(tiny_data, monkeypatch):
    """bf16 evaluation runs under autocast (float32 logits) and agrees with float32's accuracy; a bf16 run's history
    is evaluated that way, a float32 run's in float32."""
    eng = Engine(small(rounds=1), data=tiny_data, progress=False)
    eng.run()
    x, y = eng.data.x_test, eng.data.y_test
    (a32, l32), (a16, l16) = (eng.evaluate(eng.global_params, x, y, precision=p) for p in ("fp32", "bf16"))
    assert l16 != l32 and l16 == pytest.approx(l32, rel=2e-2) and abs(a16 - a32) <= 2 / len(y)
    for precision in ("fp32", "bf16"):
        seen = []
        run_eng = Engine(small(rounds=1, precision=precision), data=tiny_data, progress=False)
        evaluate = run_eng.evaluate
        monkeypatch.setattr(run_eng, "evaluate", lambda *a, **k: seen.append(k.get("precision")) or evaluate(*a, **k))
        run_eng.run()
        assert seen and set(seen) == {precision}


def test_sequential_executor_trains_the_model_without_swapping_its_own_tensors(tiny_data, monkeypatch):
    """functional_call(model, model's own tensors) swaps every tensor with itself at every step: the sequential
    executor calls the model directly (reference models still go through functional_call)."""
    import fedlib.local as local_mod

    eng = Engine(small(strategy="moon", strategy_kw={"mu": 1.0}, num_clients=2, rounds=2), data=tiny_data,
                 progress=False)
    seen = []
    call = local_mod.functional_call
    monkeypatch.setattr(local_mod, "functional_call", lambda m, *a: seen.append(m) or call(m, *a))
    eng.run()
    assert seen and all(m is not eng.model for m in seen)  # MOON's reference models only


def test_evaluated_and_reference_models_keep_the_models_memory_format(tiny_data, monkeypatch):
    """Averaged weights come back contiguous while the CPU model is channels_last, and a conv's output takes its
    weight's format: the global model (what evaluation and MOON's reference taps run), a strategy's mixed
    per-client models and a resumed checkpoint's weights are put back in the model's strides, values unchanged."""
    import fedlib.evaluation as evaluation_mod
    from fedlib.executors.fast.layout import in_layout

    eng = Engine(small(strategy="moon", strategy_kw={"mu": 1.0}, num_clients=2, rounds=2), data=tiny_data,
                 progress=False)
    convs = {k: v.stride() for k, v in eng.model.state_dict().items() if v.dim() == 4}
    assert convs and all(v.is_contiguous(memory_format=torch.channels_last) for k, v in eng.model.state_dict().items()
                         if k in convs)
    seen = []
    call = evaluation_mod.functional_call
    monkeypatch.setattr(evaluation_mod, "functional_call",
                        lambda m, p, *a: seen.append({k: p[k].stride() for k in convs}) or call(m, p, *a))
    eng.run()
    assert all(eng.global_params[k].stride() == s for k, s in convs.items())
    assert seen and all(s == convs for s in seen)  # every evaluation
    nchw = {k: v.contiguous() for k, v in eng.global_params.items()}
    assert any(nchw[k].stride() != s for k, s in convs.items())
    back = in_layout(nchw, eng.model.state_dict())
    assert all(back[k].stride() == s and torch.equal(back[k], nchw[k]) for k, s in convs.items())
    assert all(back[k] is nchw[k] for k in nchw if k not in convs)
    assert in_layout(back, eng.model.state_dict())["conv1.weight"] is back["conv1.weight"]  # nothing to do: no copy
    assert eng.evaluate(nchw, tiny_data.x_test, tiny_data.y_test)[0] == eng.evaluate(
        eng.global_params, tiny_data.x_test, tiny_data.y_test)[0]


def test_a_resumed_run_puts_contiguous_checkpoint_weights_in_the_models_format(tiny_data, tmp_path):
    eng = Engine(small(rounds=2), data=tiny_data, progress=False)
    eng.run_round(0)
    eng.round = 1
    eng.global_params = {k: v.contiguous() for k, v in eng.global_params.items()}  # as older checkpoints hold them
    eng.save_checkpoint(tmp_path / "c.pt")
    again = Engine(small(rounds=2), data=tiny_data, progress=False)
    again.load_checkpoint(tmp_path / "c.pt")
    assert all(again.global_params[k].stride() == v.stride() for k, v in again.model.state_dict().items()
               if v.dim() == 4)
