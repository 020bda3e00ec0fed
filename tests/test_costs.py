"""Cost estimates by device type, the guard before long work on a CPU, and checkpoints by default."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import fedlib.companion.papers
from fedlib.companion import campaign, costs, plan_text
from fedlib.companion.campaign import collect
from fedlib.companion.costs import CostTable, LongRunError, before_run, cost_key, no_check
from fedlib.companion.grid import fetch_runs
from fedlib.companion.papers import preset
from fedlib.companion.results import Store, device_name, run


@pytest.fixture
def plans(monkeypatch):
    def use(**fns):
        monkeypatch.setattr(fedlib.companion.papers, "PLANS", dict(fns))
    return use


@pytest.fixture(autouse=True)
def no_allow_env(monkeypatch):
    monkeypatch.delenv(costs.ALLOW_LONG_ENV, raising=False)


def test_a_cpu_measurement_never_estimates_a_cuda_run(tmp_path, plans):
    cfg = preset("fedintr", "paper")
    plans(**{"05_fedintr_benchmarks": lambda scale, **kw: {"table1": {"FedAvg": cfg}}})
    table = CostTable(None)
    # this CPU's own measurement (by name and type) and an older entry without a type, named as CPUs are
    table.table[device_name("cpu")] = {cost_key(cfg): {"s_per_pass": 1e-3, "runs": 2, "records": [], "type": "cpu"}}
    table.table["cpu (x86_64, 7 threads)"] = {cost_key(cfg): {"s_per_pass": 2e-3, "runs": 1, "records": []}}
    if not torch.cuda.is_available():
        assert device_name("cuda") != device_name("cpu") and "cuda" in device_name("cuda")
    est = table.estimate(cfg, "cuda", device_name=device_name("cuda"))
    assert est.source.startswith("default") and est.seconds < 600  # the H100 model, not 52 min of this CPU
    item, = collect("paper", "cuda", store=Store(tmp_path), costs=table)
    assert item.source.startswith("default") and "cpu" not in item.source.split(":")[0]
    assert table.estimate(cfg, "cpu", device_name=device_name("cpu")).source == \
        f"measured on {device_name('cpu')} ({cost_key(cfg)}: 2 runs)"  # which measurement: the key says
    # a GPU's measurement estimates CUDA runs, never CPU ones
    assert table.add("NVIDIA H100 80GB HBM3", "cuda", cfg, 1e-6, "gpu-check 2026-11-23 abc")
    est = table.estimate(cfg, "cuda", device_name=device_name("cuda"))
    assert est.source == f"measured on NVIDIA H100 80GB HBM3 ({cost_key(cfg)}: gpu-check 2026-11-23 abc)"
    assert est.seconds == pytest.approx(costs.RUN_OVERHEAD_S["cuda"] + 1e-6 * costs._work(cfg, range(1, 101)))
    assert table.estimate(cfg, "cpu").source.startswith("measured on cpu")
    out = plan_text.format_plan([item], "paper", "cuda")
    assert "| default |" in out  # every row names its estimate's source


def test_a_gpu_check_measurement_never_replaces_finished_runs(tmp_path):
    cfg = preset("fedintr", "paper")
    table = CostTable(tmp_path / "c.json")
    table.table["GPU"] = {cost_key(cfg): {"s_per_pass": 5e-6, "runs": 3, "records": ["a", "b", "c"], "type": "cuda"}}
    assert not table.add("GPU", "cuda", cfg, 1e-6, "gpu-check")
    assert table.table["GPU"][cost_key(cfg)]["s_per_pass"] == 5e-6
    with pytest.raises(ValueError, match="kind 'gpu'"):
        table.add("GPU", "gpu", cfg, 1e-6, "gpu-check")
    with pytest.raises(ValueError, match="positive, finite"):
        table.add("GPU", "cuda", cfg, float("nan"), "gpu-check")


def test_saving_keeps_what_another_process_wrote_to_the_file_meanwhile(tmp_path):
    """A CPU campaign and a GPU check share one cost table: neither's save drops the other's measurements."""
    cfg = preset("fedintr", "paper", strategy="fedavg", strategy_kw={})
    cpu, gpu = CostTable(tmp_path / "c.json"), CostTable(tmp_path / "c.json")  # both read the empty file
    gpu.add("GPU", "cuda", cfg, 2e-6, "gpu-check")
    gpu.save()
    cpu.table["cpu (x86_64, 1 threads)"] = {cost_key(cfg): {"s_per_pass": 2e-4, "runs": 1, "records": ["k"],
                                                            "type": "cpu"}}
    cpu.save()
    both = CostTable(tmp_path / "c.json").table
    assert both["GPU"][cost_key(cfg)]["s_per_pass"] == 2e-6
    assert both["cpu (x86_64, 1 threads)"][cost_key(cfg)]["records"] == ["k"]
    third = CostTable(tmp_path / "c.json")  # what a table removes from what it read stays removed
    third.table["GPU"] = {}
    third.save()
    assert CostTable(tmp_path / "c.json").table["GPU"] == {}


def test_saving_keeps_an_entry_another_process_changed_that_this_table_did_not(tmp_path):
    """A CPU campaign that read the table before GPU runs were learnt into it saves its own CPU runs without putting
    the GPU entry back as it read it; an entry both changed keeps this table's."""
    cfg = preset("fedintr", "paper", strategy="fedavg", strategy_kw={})
    key, gpu_entry = cost_key(cfg), lambda n: {"s_per_pass": 1e-6 * n, "runs": n, "records": [], "type": "cuda"}
    first = CostTable(tmp_path / "c.json")
    first.table = {"GPU": {key: gpu_entry(4)}, "cpu": {key: gpu_entry(1) | {"type": "cpu"}}}
    first.save()
    campaign, learner = CostTable(tmp_path / "c.json"), CostTable(tmp_path / "c.json")
    learner.table["GPU"][key] = gpu_entry(5)  # a fifth GPU run learnt
    learner.save()
    campaign.table["cpu"][key] = gpu_entry(2) | {"type": "cpu"}  # the campaign's own CPU run
    campaign.save()
    both = CostTable(tmp_path / "c.json").table
    assert both["GPU"][key]["runs"] == 5 and both["cpu"][key]["runs"] == 2
    learner.table["cpu"][key] = gpu_entry(3) | {"type": "cpu"}  # now both changed the CPU entry: the saver's wins
    learner.save()
    assert CostTable(tmp_path / "c.json").table["cpu"][key]["runs"] == 3


def tiny_paper(**kw):
    """A smoke-sized run labelled paper scale: what the guard sees of a paper run, trained in a second."""
    return preset("fedintr", "smoke", label="fedintr/paper", **kw).replace(scale="paper")


def test_paper_scale_on_a_cpu_stops_before_training_unless_allowed(tmp_path, monkeypatch, capsys):
    runs = {"a": tiny_paper(), "b": tiny_paper(seed=1)}
    monkeypatch.setattr(costs, "LONG_RUN_S", 1e-3)  # these two tiny runs count as "more than an hour"
    store = Store(tmp_path)
    with pytest.raises(LongRunError) as e:  # a notebook's artifact: its runs are checked together, before any
        fetch_runs(runs, store=store)
    msg = str(e.value)
    assert "2 run(s) to train at scale paper" in msg and "nothing was started" in msg
    assert "allow_long=True" in msg and "FEDLIB_ALLOW_LONG=1" in msg and "device='cuda'" in msg
    assert "[fedlib] 2 run(s) to train at scale paper: estimated" in capsys.readouterr().out
    assert not any(tmp_path.rglob("*.json")) and not any(tmp_path.rglob("*.pt"))  # nothing trained or written
    with pytest.raises(LongRunError, match="1 run"):  # one run alone is checked too, again each time
        run(runs["a"], store=store)
    with pytest.raises(LongRunError):
        run(runs["a"], store=store)
    assert run(runs["a"], store=store, allow_long=True, progress=False).key == runs["a"].key()
    assert fetch_runs(runs, store=store, allow_long=True, progress=False)["b"].key == runs["b"].key()
    assert run(tiny_paper(seed=2), store=store, guard=no_check, progress=False) is not None  # the caller's guard
    monkeypatch.setenv("FEDLIB_ALLOW_LONG", "1")  # what papermill's kernels inherit
    assert run(tiny_paper(seed=3), store=store, progress=False) is not None


def test_the_campaign_and_reproduce_stop_long_cpu_work_with_one_message(tmp_path, plans, monkeypatch, capsys):
    from fedlib.companion import reproduce

    if campaign.dataset_missing("fmnist"):
        pytest.skip("Fashion-MNIST is not on this machine (README, Data)")
    plans(**{"05_x": lambda scale, **kw: {"table1": {"a": tiny_paper()}}})
    monkeypatch.setattr(costs, "LONG_RUN_S", 1e-3)
    monkeypatch.delenv("MAKELEVEL", raising=False)  # the flag form, as typed outside make
    args = ["run", "--scale", "paper", "--budget", "10m", "--store", str(tmp_path), "--costs", str(tmp_path / "c.json")]
    assert campaign.main(args) == 2
    err = capsys.readouterr().err
    assert "--allow-long" in err and "more than" in err and not any(tmp_path.rglob("records/*.json"))
    why = reproduce.too_long(Path("05_x.ipynb"), "paper", "cpu", None)
    assert why is not None and "--allow-long" in why
    assert "[reproduce] 05_x: 1 run(s) to train: estimated" in capsys.readouterr().out
    assert reproduce.too_long(Path("05_x.ipynb"), "quick", "cpu", None) is None
    assert campaign.main([*args, "--allow-long", "--no-progress"]) == 0
    assert Store(tmp_path).get(tiny_paper()) is not None


def test_runs_longer_than_a_few_minutes_checkpoint_by_default_and_resume(tmp_path, monkeypatch):
    cfg = preset("fedintr", "smoke", rounds=4)
    assert cfg.checkpoint_every is None
    assert before_run(cfg).checkpoint_every == 0  # seconds: no checkpoints
    assert before_run(cfg.replace(checkpoint_every=3)).checkpoint_every == 3
    monkeypatch.setattr(costs, "CHECKPOINT_AFTER_S", 0.0)  # now it counts as a long run
    assert before_run(cfg).checkpoint_every == 1  # every 5 % of the rounds, at least 1
    assert before_run(cfg.replace(checkpoint_every=0)).checkpoint_every == 0  # off stays off
    store = Store(tmp_path)

    def killed(engine, entry):
        if entry["round"] == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(cfg, store=store, callback=killed, progress=False)
    assert torch.load(store.checkpoint_path(cfg.key()), weights_only=False)["round"] == 2
    rec = run(cfg, store=store, progress=False)
    assert rec.provenance["resumed_from_round"] == 2 and rec.provenance["checkpoint_every"] == 1
    assert json.loads(store.record_path(cfg.key()).read_text())["key"] == cfg.key()


def test_rendering_reads_a_timing_of_this_cpu_taken_with_another_thread_count(tmp_path, monkeypatch):
    from fedlib.config import Config
    from fedlib.companion.timing import cached_costs

    cfg = Config(dataset="synthetic", n_train=32, n_test=16, num_clients=2, rounds=2, batch_size=16)
    configs = {"FedAvg": cfg, "FedProx": cfg.replace(strategy="fedprox", strategy_kw={"mu": 0.01})}
    store = Store(tmp_path)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 1)
    timed = cached_costs(configs, "cifar10", 32, reps=2, store=store, train=True)
    monkeypatch.setattr(torch, "get_num_threads", lambda: 2)
    again = cached_costs(configs, "cifar10", 32, reps=2, store=store, train=False)
    assert again is not None and again.index.tolist() == timed.index.tolist()
    assert len(list((tmp_path / "costs").glob("*.json"))) == 1  # nothing timed again
    doc = json.loads(next((tmp_path / "costs").glob("*.json")).read_text())
    assert "1 threads" in doc["provenance"]["device"]


def test_the_cost_model_maps_each_strategy_to_its_cost_family():
    from fedlib.strategies import STRATEGIES

    assert sorted(costs.FAMILY) == sorted(STRATEGIES)  # the cost model's own map
    fams = {n: costs.family(n) for n in STRATEGIES}
    assert fams == {"fedavg": "fedavg", "fedprox": "prox", "scaffold": "prox", "moon": "contrastive",
                    "fedcka": "contrastive", "fedintr": "contrastive", "feder": "feder", "centralized": "fedavg",
                    "fedbabu": "personal", "fedshibu": "personal", "fedavg_crsm": "personal", "local_only": "fedavg"}
    assert set(fams.values()) <= set(costs.FAMILY_FACTOR) and costs.family("unregistered") == "unregistered"


def test_a_run_timed_under_load_does_not_pull_up_its_keys_estimate(tmp_path):
    """The estimate is the median of the records' seconds per sample-pass; an entry from before per-record values
    were kept (a running mean) takes them as its records are learnt again, without counting a run twice, and
    estimates from those known."""
    from types import SimpleNamespace

    cfg = preset("fedintr", "smoke")
    work = costs._work(cfg, range(2, cfg.rounds + 1))

    def rec(key: str, s_per_pass: float) -> SimpleNamespace:
        hist = [{"round": r, "time_s": 99.0 if r == 1 else s_per_pass * work / (cfg.rounds - 1)}
                for r in range(1, cfg.rounds + 1)]  # round 1 (warm-up) is never learnt
        return SimpleNamespace(config=cfg.to_dict(), history=hist, key=key, provenance={"device": "cpu (test)"})

    table = CostTable(tmp_path / "c.json")
    for i, s in enumerate([1e-4, 1.1e-4, 0.9e-4, 1e-4, 1e-3]):  # the last one beside a test suite: 10x
        assert table.learn(rec(f"r{i}", s))
    assert not table.learn(rec("r0", 1e-4))  # learnt once
    entry = table.table["cpu (test)"][cost_key(cfg)]
    assert entry["runs"] == 5 and entry["s_per_pass"] == pytest.approx(1e-4)  # the mean would read 2.6e-4
    # an entry of the older format: two runs, their mean, no per-record values
    table.table["cpu (test)"][cost_key(cfg)] = {"s_per_pass": 5.5e-4, "runs": 2, "records": ["r0", "r4"],
                                               "type": "cpu"}
    assert table.learn(rec("r0", 1e-4))
    entry = table.table["cpu (test)"][cost_key(cfg)]
    assert entry["runs"] == 2 and entry["s_per_pass"] == pytest.approx(1e-4)  # the median of the values known
    assert table.learn(rec("r4", 1e-3)) and not table.learn(rec("r4", 1e-3))
    entry = table.table["cpu (test)"][cost_key(cfg)]
    assert entry["runs"] == 2 and entry["s_per_pass"] == pytest.approx(5.5e-4)
    assert table.learn(rec("r1", 1.1e-4)) and table.table["cpu (test)"][cost_key(cfg)]["runs"] == 3
    assert table.table["cpu (test)"][cost_key(cfg)]["s_per_pass"] == pytest.approx(1.1e-4)


def test_a_round_counts_the_reference_models_forwards_once_per_table():
    """MOON, FedCKA and FedIntR run the global and previous models over the clients' samples once a round (both
    orientations under flips), with every batch under crops; μ = 0 runs none. So FedIntR's round at E = 1 costs
    more than a sixth of its round at E = 6, as its records show (6.4-7.9 against 24.5-26.2 s on one thread)."""
    e6 = preset("fedintr", "quick", dataset="fmnist", strategy="fedintr", strategy_kw={"mu": 10.0})
    e1 = e6.replace(local_epochs=1)
    n = costs.sample_passes(e1)[0]
    assert e6.augment in (None, "flip") and costs.reference_passes(e1) == pytest.approx(costs.REF_FORWARD * 2 * 2 * n)
    assert costs.reference_passes(e6) == costs.reference_passes(e1)  # one table per round whatever E
    ratio = costs._work(e6, [2]) / costs._work(e1, [2])
    assert 3.3 < ratio < 3.9  # the records: 25.5 / 7.0 = 3.6 (an E-proportional count would say about 5.4)
    from fedlib.companion.budget import estimate_s  # the stated model, which sizes the quick plans, counts them too
    assert estimate_s(e6) / estimate_s(e1) == pytest.approx(ratio, rel=0.05)
    crops = e1.replace(augment="crop_flip", local_epochs=3)
    assert costs.reference_passes(crops) == pytest.approx(costs.REF_FORWARD * 2 * 3 * n)  # with every batch
    assert costs.reference_passes(e1.replace(strategy_kw={**e1.strategy_kw, "mu": 0.0})) == 0.0
    assert costs.reference_passes(e1.replace(strategy="fedavg", strategy_kw={})) == 0.0
    # a GPU check times a round's training: its seconds per training sample-pass become seconds per unit of work
    table = CostTable(None)
    assert table.add("GPU", "cuda", e1, 1e-6, "gpu-check")
    assert table.table["GPU"][cost_key(e1)]["s_per_pass"] == pytest.approx(1e-6 * n / (n + costs.reference_passes(e1)))


@pytest.mark.filterwarnings("ignore:.*chance level")  # three rounds of 32 images: the time is what counts here
def test_a_table_counted_the_older_way_is_learnt_again_from_the_store(tmp_path):
    """A table written before the reference forwards were counted keeps its GPU-check measurements, drops its
    runs' values (on save too, though the file still holds them) and the campaign learns the stored runs again."""
    from fedlib.config import Config

    cfg = Config(dataset="synthetic", n_train=32, n_test=16, num_clients=2, rounds=3, batch_size=16)
    old = {"about": "", "devices": {"cpu (test)": {cost_key(cfg): {"s_per_pass": 9.0, "runs": 2, "records": ["a"],
                                                                   "type": "cpu"}},
                                    "GPU": {cost_key(cfg): {"s_per_pass": 1e-6, "runs": 0, "records": [],
                                                            "type": "cuda", "source": "gpu-check"}}}}
    path = tmp_path / "c.json"
    path.write_text(json.dumps(old))
    table = CostTable(path)
    assert table.relearn and table.table == {"cpu (test)": {}, "GPU": old["devices"]["GPU"]}
    table.save()
    doc = json.loads(path.read_text())
    assert doc["work_model"] == costs.WORK_MODEL and doc["devices"]["cpu (test)"] == {}
    fresh = CostTable(path)
    assert not fresh.relearn
    store = Store(tmp_path / "store")
    run(cfg, store=store, progress=False)
    path.write_text(json.dumps(old))
    stale = CostTable(path)
    collect("smoke", "cpu", store=store, costs=stale, plans={})
    assert stale.relearn  # smoke runs are all set-up: never learnt into a table
    collect("quick", "cpu", store=store, costs=stale, plans={})
    assert not stale.relearn and stale.table[device_name("cpu")][cost_key(cfg)]["runs"] == 1
    assert json.loads(path.read_text())["devices"][device_name("cpu")][cost_key(cfg)]["runs"] == 1


def test_a_narrow_resnets_stated_cost_falls_with_its_width_not_its_flops():
    """Both stated models, the cost table's default and the quick plans' budget, take a width-w ResNet-18 as 64/w
    times faster a sample-pass than the full one (a narrow ResNet's many small convolutions cost more than their
    FLOPs on one thread; benchmarks/RESULTS.md has the measurement), and so agree with each other on FedER's quick
    runs. Other models and a full-width ResNet are not scaled."""
    from fedlib.companion.costs import width_speedup
    from fedlib.companion.budget import estimate_s
    from fedlib.companion.papers.feder.preset import feder_grid

    narrow = feder_grid("quick")[("AdamP", "FedAvg")]
    full = narrow.replace(model_kw={})
    assert width_speedup(narrow) == 8.0 and width_speedup(preset("feder")) == 1.0
    assert width_speedup(preset("fedintr", "quick")) == 1.0  # not a ResNet
    table = CostTable(None)
    default = lambda c: table.estimate(c, "cpu").seconds - costs.RUN_OVERHEAD_S["cpu"]  # noqa: E731
    assert table.estimate(narrow, "cpu").source.startswith("default")
    assert default(full) / default(narrow) == pytest.approx(8.0)
    assert estimate_s(full) / estimate_s(narrow) == pytest.approx(8.0)
    assert estimate_s(narrow) == pytest.approx(default(narrow), rel=0.1)


def test_the_feder_columns_hours_that_quick_leaves_out_are_the_stated_models():
    """The reason quick leaves FedER's column and the stable rank out names their cost: the budget's estimate."""
    import re

    from fedlib.companion.budget import estimate_s
    from fedlib.companion.papers.feder.plans import FEDER_LEFT_OUT, FEDER_SEEDS
    from fedlib.companion.papers.feder.preset import feder_grid

    grid = feder_grid("quick")
    hours = FEDER_SEEDS["quick"] * (sum(estimate_s(c) for (_, s), c in grid.items() if s == "FedER")
                                    + estimate_s(grid[("Adam", "FedER")])) / 3600
    stated = re.search(r"about (\d+) single-thread worker-hours", FEDER_LEFT_OUT["quick"]["feder"])
    assert stated and int(stated.group(1)) == round(hours)
