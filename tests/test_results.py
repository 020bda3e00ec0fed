"""The record store loses nothing: failed runs keep their rounds, unwritable stores fail before training,
corrupt records are named and skipped, temporary files of killed writes are cleaned, dead networks are flagged;
records are checked when read (key, config, non-finite metrics) and rewritten only when their result changes;
an unreadable checkpoint is moved aside."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import warnings

import pytest
import torch

from fedlib.config import Config
from fedlib.companion.report import check_params
from fedlib.companion.results import (CorruptRecordError, Record, RecordMismatchError, Store, StoreNotWritableError,
                            atomic_write, learning_warnings, run)


@pytest.fixture(scope="module")
def mini_data(tiny_data):
    return tiny_data.subset(120, 60, seed=0)


def mini(**kw) -> Config:
    base = dict(dataset="synthetic", model="intr_cnn", partition="iid", partition_kw={}, num_clients=2, rounds=3,
                local_epochs=1, batch_size=64, lr=0.05, augment="none", executor="sequential", seed=1)
    base.update(kw)
    return Config(**base)


def fail_after(n: int):
    def callback(engine, entry):
        if entry["round"] == n:
            raise FloatingPointError("Training loss became nan")
    return callback


def test_a_failed_run_keeps_its_rounds_and_the_next_run_says_so(tmp_path, mini_data):
    store, cfg = Store(tmp_path), mini()
    with pytest.raises(FloatingPointError, match="nan"):
        run(cfg, store=store, data=mini_data, progress=False, callback=fail_after(2))
    failed = json.loads(store.failed_path(cfg.key()).read_text())
    assert failed["status"] == "failed" and failed["error"]["type"] == "FloatingPointError"
    assert [h["round"] for h in failed["history"]] == [1, 2] and "test_acc" in failed["history"][0]
    assert failed["config"] == cfg.to_dict()
    # a failed run is never a result
    assert store.get(cfg) is None and list(store.records()) == [] and store.frame().empty
    with pytest.warns(RuntimeWarning, match=r"last run of this config .* failed .*FloatingPointError"):
        rec = run(cfg, store=store, data=mini_data, progress=False)
    assert len(rec.history) == 3 and store.get(cfg) is not None
    assert not store.failed_path(cfg.key()).exists()  # the retry succeeded


def test_a_failed_record_in_records_is_not_returned(tmp_path):
    store = Store(tmp_path)
    store.record_path("abc").parent.mkdir(parents=True)
    store.record_path("abc").write_text(json.dumps({"key": "abc", "status": "failed", "history": []}))
    assert store.get("abc") is None and list(store.records()) == []


def test_an_unwritable_store_fails_before_training(tmp_path, mini_data):
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")  # a file where the results folder should be: unwritable even for root
    rounds = []
    with pytest.raises(StoreNotWritableError, match="nothing was trained") as err:
        run(mini(), store=Store(blocker / "results"), data=mini_data, progress=False,
            callback=lambda e, entry: rounds.append(entry))
    assert rounds == [] and "not_a_folder" in str(err.value) and "save=False" in str(err.value)
    assert isinstance(err.value, PermissionError)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_store_fails_before_training(tmp_path, mini_data):
    (tmp_path / "records").mkdir()
    tmp_path.chmod(0o500)
    (tmp_path / "records").chmod(0o500)
    try:
        with pytest.raises(PermissionError, match="nothing was trained"):
            run(mini(), store=Store(tmp_path), data=mini_data, progress=False)
    finally:
        (tmp_path / "records").chmod(0o700)
        tmp_path.chmod(0o700)


def _record(cfg: Config | None = None, acc: float = 0.5) -> Record:
    cfg = cfg or mini()
    return Record(key=cfg.key(), config=cfg.to_dict(), history=[{"round": 1, "test_acc": acc}], provenance={},
                  partition_hash="p", final_params_hash="f")


def test_a_corrupt_record_is_named_and_skipped(tmp_path):
    store, good = Store(tmp_path), _record()
    store.put(good)
    store.record_path("bad").write_text('{"key": "bad", "config": {"lr": 0.')  # cut short
    with pytest.raises(CorruptRecordError, match=r"bad\.json") as err:
        store.get("bad")
    assert "Delete it" in str(err.value)
    with pytest.warns(RuntimeWarning, match=r"bad\.json"):
        keys = [r.key for r in store.records()]
    assert keys == [good.key]
    with pytest.warns(RuntimeWarning):
        assert list(store.frame()["key"]) == [good.key]


def test_run_recomputes_a_corrupt_record_of_its_config(tmp_path, mini_data):
    store, cfg = Store(tmp_path), mini(rounds=1)
    store.record_path(cfg.key()).parent.mkdir(parents=True)
    store.record_path(cfg.key()).write_text("<html>")
    with pytest.warns(RuntimeWarning, match=r"not valid JSON.*Moved it to.*recomputing"):
        rec = run(cfg, store=store, data=mini_data, progress=False)
    assert store.get(cfg).key == rec.key
    assert (tmp_path / "failed" / f"{rec.key}.unreadable-record.json").read_text() == "<html>"


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def test_temporary_files_of_killed_writes_are_removed(tmp_path):
    store = Store(tmp_path)
    dead, old = _dead_pid(), time.time() - 3600
    stale = [tmp_path / "records" / f".abc.json.tmp{dead}", tmp_path / "checkpoints" / f"abc.pt.tmp{dead}",
             tmp_path / "artifacts" / f".abc.pt.tmp{dead}"]
    live = tmp_path / "records" / f".def.json.tmp{os.getppid()}"  # a writer still running
    fresh = tmp_path / "records" / f".ghi.json.tmp{dead}"  # too recent to be sure
    for p in (*stale, live, fresh):
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("partial")
        if p is not fresh:
            os.utime(p, (old, old))
    assert sorted(store.clean_temp()) == sorted(stale)
    assert live.exists() and fresh.exists() and not any(p.exists() for p in stale)


def test_atomic_write_leaves_no_temporary_file_when_the_write_fails(tmp_path):
    def boom(p):
        p.write_text("half")
        raise OSError("disk full")
    with pytest.raises(OSError, match="disk full"):
        atomic_write(tmp_path / "x.json", boom)
    assert list(tmp_path.iterdir()) == []


def test_learning_warnings_flag_chance_and_non_finite_accuracy():
    cfg = mini(rounds=10)
    assert learning_warnings(cfg, [{"round": 10, "test_acc": 0.10}], 10)
    assert "chance" in learning_warnings(cfg, [{"round": 10, "test_acc": 0.12}], 10)[0]
    assert "nan" in learning_warnings(cfg, [{"round": 10, "test_acc": float("nan")}], 10)[0]
    assert learning_warnings(cfg, [{"round": 10, "test_acc": 0.40}], 10) == []
    assert learning_warnings(mini(rounds=2), [{"round": 2, "test_acc": 0.10}], 10) == []  # too early to tell


def test_a_model_per_client_is_judged_by_its_clients_accuracy_not_a_global_model():
    cfg = mini(rounds=10)  # local-only training: no global model, so its test accuracy stays at chance
    local = [{"round": 9, "test_acc": 0.10, "personal_acc_mean": 0.91}, {"round": 10, "test_acc": 0.10}]
    assert learning_warnings(cfg, local, 10) == []
    stuck = [{"round": 10, "test_acc": 0.80, "personal_acc_mean": 0.11}]
    assert "personalized accuracy 0.110 is at chance" in learning_warnings(cfg, stuck, 10)[0]


def test_a_stored_warning_the_current_rule_does_not_give_is_not_repeated(tmp_path, mini_data):
    store, cfg = Store(tmp_path), mini(rounds=1, lr=0.1, batch_size=32)
    rec = run(cfg, store=store, data=mini_data, progress=False)
    d = json.loads(store.record_path(rec.key).read_text())
    d["provenance"]["warnings"] = ["the final test accuracy 0.100 is at chance level: the network did not learn."]
    store.record_path(rec.key).write_text(json.dumps(d))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(cfg, store=store, data=mini_data, progress=False)


def test_a_run_that_never_learns_is_flagged(tmp_path, mini_data):
    cfg = mini(rounds=1, local_epochs=5, lr=0.0)  # stays at its (chance-level) initialization
    with pytest.warns(RuntimeWarning, match="chance level"):
        rec = run(cfg, store=Store(tmp_path), data=mini_data, progress=False)
    assert "chance level" in rec.provenance["warnings"][0]
    with pytest.warns(RuntimeWarning, match="chance level"):  # and again when the stored record is reused
        run(cfg, store=Store(tmp_path), data=mini_data, progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(cfg.replace(lr=0.1, batch_size=32), store=Store(tmp_path), data=mini_data, progress=False)  # learns


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_a_cuda_config_on_a_machine_without_cuda_fails_with_the_fix(tmp_path, mini_data):
    with pytest.raises(ValueError, match=r"CUDA is not available.*device='cpu'"):
        run(mini(device="cuda"), store=Store(tmp_path), data=mini_data, progress=False)
    with pytest.raises(ValueError, match=r"device='cuda'.*CUDA is not available"):
        check_params(device="cuda")


def test_fetch_without_training_returns_pending_until_the_record_exists(tmp_path, mini_data):
    from fedlib.companion.report import Report
    from fedlib.companion.results import Pending, fetch, is_pending
    from fedlib.companion.verdicts import pending

    store, cfg = Store(tmp_path), mini(rounds=1)
    p = fetch(cfg, store=store, train=False)
    assert isinstance(p, Pending) and p.key == cfg.key() and p.cfg == cfg.validate()
    assert is_pending({"a": [p]}) and not list(store.records())
    rec = fetch(cfg, store=store, data=mini_data, progress=False)
    assert isinstance(rec, Record) and not is_pending({"a": [rec]})
    assert fetch(cfg, store=store, train=False).key == rec.key
    r = Report("x", scale="smoke", dataset="synthetic")
    r.verdict(pending("something", "T1"))
    assert r.claims[-1]["status"] == "pending"


def test_one_fetch_validates_once_and_builds_the_options_and_the_strategy_once(tmp_path, mini_data,
                                                                                  monkeypatch):
    """fetch → run → Engine: the config is validated once, its strategy options are built (and
    checked) once and the strategy is constructed once from them, all before the first local step
    and never again."""
    import fedlib.config
    from fedlib.companion.results import fetch
    from fedlib.engine import Engine
    from fedlib.options import TypedOptions
    from fedlib.strategies import Strategy, StrategyOptions

    counts = {"validations": 0, "options": 0, "strategies": 0}
    at_first_step: dict[str, int] = {}

    def counting(what, fn, when=lambda *a: True):
        def wrapped(*a, **kw):
            counts[what] += bool(when(*a))
            return fn(*a, **kw)
        return wrapped

    problems = fedlib.config._problems
    monkeypatch.setattr(fedlib.config, "_problems", counting("validations", problems))
    monkeypatch.setattr(TypedOptions, "__post_init__", counting(
        "options", TypedOptions.__post_init__, lambda self: isinstance(self, StrategyOptions)))
    monkeypatch.setattr(Strategy, "__init__", counting("strategies", Strategy.__init__))
    train = Engine.train

    def first_step(self, *a, **kw):
        at_first_step.update(at_first_step or counts)
        return train(self, *a, **kw)

    monkeypatch.setattr(Engine, "train", first_step)
    cfg = mini(strategy="fedprox", strategy_kw={"mu": 0.01}, rounds=2)
    rec = fetch(cfg, store=Store(tmp_path), data=mini_data, progress=False)
    assert len(rec.history) == 2 and rec.strategy == {"mu": 0.01, "squared": True}
    assert at_first_step == counts == {"validations": 1, "options": 1, "strategies": 1}


def test_a_copied_record_is_not_the_result_of_another_config(tmp_path, mini_data):
    store, a, b = Store(tmp_path), mini(), mini(lr=0.01)
    store.put(_record(a))
    store.record_path(b.key()).write_text(store.record_path(a.key()).read_text())  # cp A.json B.json
    with pytest.raises(RecordMismatchError, match=rf"{b.key()}\.json is not the record of {b.key()}") as err:
        store.get(b)
    assert f"{a.key()}.json" in str(err.value) and "delete it" in str(err.value)
    rounds = []
    with pytest.raises(RecordMismatchError, match=rf"{b.key()}\.json"):  # one clear error, before any training
        run(b, store=store, data=mini_data, progress=False, callback=lambda e, entry: rounds.append(entry))
    assert rounds == [] and store.record_path(b.key()).read_text() == store.record_path(a.key()).read_text()
    with pytest.warns(RuntimeWarning, match=rf"Skipping {b.key()}\.json"):
        assert [r.key for r in store.records()] == [a.key()]
    # the key inside edited to match the file name: the config still says A
    doc = json.loads(store.record_path(a.key()).read_text())
    store.record_path(b.key()).write_text(json.dumps({**doc, "key": b.key()}))
    with pytest.raises(RecordMismatchError, match=f"its config's key is '{a.key()}'"):
        store.get(b)


def test_a_stored_record_with_nan_metrics_is_flagged_and_is_not_a_result(tmp_path):
    from fedlib.companion.grid import Diverged, fetch_runs

    store, cfg = Store(tmp_path), mini()
    store.put(_record(cfg, acc=float("nan")))
    with pytest.warns(RuntimeWarning, match=rf"{cfg.key()}\.json: test_acc is nan in round\(s\) 1.*diverged"):
        rec = store.get(cfg)
    assert rec.problems() == ["test_acc is nan in round(s) 1"]
    with pytest.warns(RuntimeWarning, match="test_acc is nan"):
        out = fetch_runs({"FedAvg": cfg}, store=store, train=False)
    assert isinstance(out["FedAvg"], Diverged) and "test_acc is nan" in out["FedAvg"].message
    assert _record(cfg).problems() == []


def test_a_truncated_checkpoint_is_named_moved_aside_and_the_run_starts_over(tmp_path, mini_data):
    store, cfg = Store(tmp_path), mini(checkpoint_every=1)
    ckpt = store.checkpoint_path(cfg.key())
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(b"PK\x03\x04 cut short")  # a torch zip archive killed while being copied
    with pytest.warns(RuntimeWarning, match=rf"Checkpoint {ckpt} cannot be resumed.*moved it to .*failed"):
        rec = run(cfg, store=store, data=mini_data, progress=False)
    assert rec.provenance["resumed_from_round"] == 0 and len(rec.history) == cfg.rounds
    assert (tmp_path / "failed" / ckpt.name).read_bytes() == b"PK\x03\x04 cut short" and not ckpt.exists()
    with warnings.catch_warnings():  # later runs are not affected
        warnings.simplefilter("error")
        assert run(cfg, store=store, data=mini_data, progress=False).key == rec.key
        run(cfg.replace(seed=2), store=store, data=mini_data, progress=False)


def test_a_rerun_with_the_same_result_leaves_its_record_file_untouched(tmp_path, mini_data):
    store, cfg = Store(tmp_path), mini(rounds=1)
    run(cfg, store=store, data=mini_data, progress=False)
    p = store.record_path(cfg.key())
    before, mtime = p.read_bytes(), p.stat().st_mtime_ns
    store.get(cfg)
    list(store.records())
    again = run(cfg, store=store, data=mini_data, progress=False, recompute=True)  # new wall times, same result
    assert p.read_bytes() == before and p.stat().st_mtime_ns == mtime
    store.put(Record(**{**again.to_json(), "final_params_hash": "changed"}))  # a different result is written
    assert json.loads(p.read_text())["final_params_hash"] == "changed"


def test_a_record_this_version_cannot_read_is_moved_aside_never_overwritten(tmp_path):
    import json
    import warnings

    from fedlib.companion.results import Store, run

    store = Store(tmp_path)
    cfg = Config(dataset="synthetic", n_train=64, n_test=32, num_clients=2, rounds=1, batch_size=16)
    rec = run(cfg, store=store, progress=False)
    path = store.record_path(rec.key)
    newer = {**json.loads(path.read_text()), "field_of_a_newer_version": 1}
    path.write_text(json.dumps(newer))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run(cfg, store=store, progress=False)
    kept = tmp_path / "failed" / f"{rec.key}.unreadable-record.json"
    assert json.loads(kept.read_text()) == newer and any("Moved it to" in str(w.message) for w in caught)
    assert "field_of_a_newer_version" not in json.loads(path.read_text())


def test_a_record_copied_under_another_seed_is_an_error_naming_both_files(tmp_path):
    from fedlib.companion.grid import DuplicateSeedError, fetch_runs

    store = Store(tmp_path)
    s1, s2, s3 = (mini(seed=s) for s in (1, 2, 3))
    for cfg, h in ((s1, "f1"), (s2, "f1"), (s3, "f3")):
        rec = _record(cfg)
        rec.final_params_hash = h
        store.put(rec)
    with pytest.raises(DuplicateSeedError) as e:
        fetch_runs({"s1": s1, "s2": s2, "s3": s3}, store=store, train=False)
    assert str(store.record_path(s1.key())) in str(e.value) and str(store.record_path(s2.key())) in str(e.value)
    assert len(fetch_runs({"s1": s1, "s3": s3}, store=store, train=False)) == 2  # distinct runs are fine


def test_run_announces_its_estimate_and_a_ctrl_c_its_checkpoint_holds_resumes_without_a_failure(
        tmp_path, mini_data, capsys):
    import warnings as w

    store, cfg = Store(tmp_path), mini(checkpoint_every=1)

    def ctrl_c(engine, entry):
        if entry["round"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(cfg, store=store, data=mini_data, progress=True, callback=ctrl_c)
    out = capsys.readouterr().out
    assert "3 rounds, estimated" in out and "checkpoints every round" in out
    assert out.index("estimated") < out.index("round 1")  # before the first round
    assert not store.failed_path(cfg.key()).exists()  # nothing left behind: the checkpoint resumes it
    done = store.checkpoint_round(cfg.key())
    with w.catch_warnings():
        w.simplefilter("error", RuntimeWarning)
        rec = run(cfg, store=store, data=mini_data, progress=True)
    assert f"resuming from round {done} of 3" in capsys.readouterr().out and len(rec.history) == 3
    with pytest.raises(KeyboardInterrupt):  # without a checkpoint, an interrupted run's rounds are kept
        run(mini(seed=7, checkpoint_every=0), store=store, data=mini_data, progress=False, callback=ctrl_c)
    assert store.failed_path(mini(seed=7, checkpoint_every=0).key()).exists()
