"""The campaign: plans listed with costs, priorities and status; runs within a budget; resume after a kill; a
second invocation does nothing; the ledger; the Ray backend gives the local backend's records."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

import fedlib.companion.papers
from fedlib.companion import campaign, plan_text
from fedlib.companion.plan_text import Item
from fedlib.companion.campaign import collect, dataset_missing, parse_budget
from fedlib.companion.papers import priority
from fedlib.companion.costs import CostTable, cost_key
from fedlib.companion.common import RunId
from fedlib.companion.papers import preset
from fedlib.companion.provenance import worker_seconds
from fedlib.companion.results import Store, run
from fedlib.companion.workers import cores

REPO = Path(__file__).resolve().parent.parent
TIMES = ("time_s", "train_time_s")


def smoke(**kw):
    return preset("fedintr", "smoke", **kw)


def same_record(a, b) -> None:
    """Equal but for wall-clock fields."""
    strip = lambda h: [{k: v for k, v in e.items() if k not in TIMES} for e in h]  # noqa: E731
    assert strip(a.history) == strip(b.history)
    assert a.final_params_hash == b.final_params_hash and a.partition_hash == b.partition_hash
    assert a.key == b.key


@pytest.fixture
def plans(monkeypatch):
    """Replace the plan registry with the given plans for one test."""
    def use(**fns):
        monkeypatch.setattr(fedlib.companion.papers, "PLANS", dict(fns))
    return use


def test_plan_lists_every_notebooks_paper_runs_with_cost_priority_and_status(tmp_path, capsys):
    store = Store(tmp_path)
    items = collect("paper", "cuda", store=store, costs=CostTable(None))
    nbs = {u[0] for it in items for u in it.uses}
    assert {"01_fedavg_baseline", "07_feder_optimizer_grid", "08_fedshibu_shards"} <= nbs
    assert len({it.key for it in items}) == len(items)
    assert all(it.status in ("pending", "blocked") and it.estimate_s > 0 and it.source for it in items)
    # highest priority first: FedIntR Table I's rows (notebook 01) before FedSHIBU's and FedER's tables
    assert [it.priority for it in items] == sorted(it.priority for it in items)
    first = {art: next(i for i, it in enumerate(items) if art in {u[:2] for u in it.uses})
             for art in [("01_fedavg_baseline", "table1"), ("08_fedshibu_shards", "table1"),
                         ("07_feder_optimizer_grid", "table4.2")]}
    assert list(first.values()) == sorted(first.values())
    it01 = items[first[("01_fedavg_baseline", "table1")]]  # a run shared by artifacts takes their best priority
    assert it01.priority == min(campaign.priority(nb, art) for nb, art, *_ in it01.uses) <= 13
    # paper scale: FedAvg in FedIntR's setup is 100 rounds x 10 epochs x 60,000 samples on the default H100 model
    fedavg = next(it for it in items if it.cfg.strategy == "fedavg" and it.uses[0][0] == "01_fedavg_baseline")
    assert fedavg.cfg.rounds == 100 and 60 < fedavg.estimate_s < 200 and "default" in fedavg.source
    assert fedavg.cfg.checkpoint_every == 5 and fedavg.cfg.device == "cuda"
    assert campaign.main(["plan", "--scale", "paper", "--device", "cuda", "--store", str(tmp_path),
                          "--costs", str(tmp_path / "c.json")]) == 0
    out = capsys.readouterr().out
    n = sum(it.status == "pending" for it in items)
    assert "01_fedavg_baseline · table1 · FedAvg / seed=0" in out and f"pending {n} (" in out


def test_a_run_shared_by_artifacts_counts_once_with_its_best_priority(tmp_path, plans):
    a = smoke()
    plans(**{"05_fedintr_benchmarks": lambda scale, **kw: {"Table I": {"FedAvg": a}},
             "09_unknown": lambda scale, **kw: {"fig9": {"same run": a, "other": a.replace(seed=1)}}})
    items = collect("smoke", "cpu", store=Store(tmp_path), costs=CostTable(None))
    assert len(items) == 2
    shared = next(it for it in items if it.key == a.key())
    assert shared.priority == 10 and len(shared.uses) == 2
    assert next(it for it in items if it.key != a.key()).priority == campaign.DEFAULT_PRIORITY


def test_within_one_priority_the_shortest_run_goes_first_so_cheap_settings_complete_first(tmp_path, plans):
    short, long_ = smoke(), smoke(rounds=8)
    plans(**{"06_fedintr_scaling": lambda scale, **kw: {"fig5": {"long": long_, "short": short}},
             "05_fedintr_benchmarks": lambda scale, **kw: {"Table I": {"long first": long_.replace(seed=1)}}})
    items = collect("smoke", "cpu", store=Store(tmp_path), costs=CostTable(None))
    assert [it.uses[0][2] for it in items] == ["long first", "short", "long"]  # priority still decides first
    assert items[1].estimate_s < items[2].estimate_s


def test_a_run_a_checkpoint_holds_rounds_of_resumes_before_any_new_one(tmp_path, plans):
    short, long_ = smoke(rounds=4), smoke(rounds=8, checkpoint_every=1)
    plans(**{"06_fedintr_scaling": lambda scale, **kw: {"fig5": {"short": short, "long": long_}}})
    store = Store(tmp_path)
    assert [it.uses[0][2] for it in collect("smoke", "cpu", store=store, costs=CostTable(None))] == ["short", "long"]
    def stop(engine, entry):
        if engine.round >= 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run(long_, store=store, progress=False, callback=stop)
    items = collect("smoke", "cpu", store=store, costs=CostTable(None))
    assert [(it.uses[0][2], it.status) for it in items] == [("long", "partial"), ("short", "pending")]
    assert items[0].rounds_done >= 1
    plans(**{"06_fedintr_scaling": lambda scale, **kw: {"fig5": {"short": short, "long": long_}},
             "05_fedintr_benchmarks": lambda scale, **kw: {"table1": {"first": smoke(rounds=4, seed=1)}}})
    items = collect("smoke", "cpu", store=store, costs=CostTable(None))  # its checkpoint is on this machine only:
    assert [it.uses[0][2] for it in items] == ["long", "first", "short"]  # begun, it ends before higher priorities


def test_missing_dataset_is_blocked_and_named(tmp_path, plans, monkeypatch):
    monkeypatch.setenv("FEDLIB_DATA", str(tmp_path / "nodata"))
    assert "cifar10" in dataset_missing("cifar10") and dataset_missing("synthetic") is None
    plans(**{"03_fedcka_heterogeneity": lambda scale, dataset="cifar10", **kw: {
        "table2": {"FedAvg": preset("fedcka", scale, dataset=dataset)}}})
    it, = collect("paper", "cuda", store=Store(tmp_path), costs=CostTable(None), dataset="cifar10")
    assert it.status == "blocked" and "cifar10 not found" in it.why and it.priority == 20
    out = campaign.run_local([it], Store(tmp_path), 1e9, CostTable(None), log=lambda s: None)
    assert out == {"done": [], "skipped": [], "failed": []}  # never attempted


def test_a_broken_plan_is_reported_and_the_others_still_listed(tmp_path, plans):
    def broken(scale, **kw):
        raise KeyError("no such preset")
    plans(**{"04_broken": broken, "05_ok": lambda scale, **kw: {"table1": {"a": smoke()}}})
    errors: list[str] = []
    items = collect("smoke", "cpu", store=Store(tmp_path), costs=CostTable(None), errors=errors)
    assert len(items) == 1 and errors and "04_broken" in errors[0]


@pytest.mark.parametrize("nb,art,p", [("05_fedintr_benchmarks", "Table I", 10), ("05_x", "table1_fmnist", 10),
                                      ("05_x", "Table II", 25), ("05_x", "table_v", 12), ("05_x", "table10", 25),
                                      ("03_fedcka_heterogeneity", "table2", 20), ("07_feder", "table4.2", 42),
                                      ("99_new", "anything", 50)])
def test_priority_table(nb, art, p):
    assert priority(nb, art) == p


def test_parse_budget():
    assert parse_budget("25m") == 1500 and parse_budget("1h30m") == 5400 and parse_budget("1.5h") == 5400
    assert parse_budget("90s") == 90 and parse_budget("45") == 45
    with pytest.raises(ValueError, match="25m"):
        parse_budget("25 minutes")


def test_run_respects_the_budget_and_a_second_invocation_does_nothing(tmp_path, plans, capsys):
    cheap, dear = smoke(), smoke(strategy="fedprox", strategy_kw={"mu": 0.01})
    plans(**{"05_fedintr_benchmarks": lambda scale, **kw: {"table1": {"FedProx": dear, "FedAvg": cheap}}})
    costs = CostTable(tmp_path / "costs.json")
    costs.table["cpu (measured)"] = {cost_key(dear): {"s_per_pass": 1.0, "runs": 1, "records": [], "type": "cpu"}}
    costs.save()
    args = ["run", "--scale", "smoke", "--store", str(tmp_path), "--costs", str(tmp_path / "costs.json")]
    assert campaign.main([*args, "--budget", "10m"]) == 0
    out = capsys.readouterr().out
    assert "skip 05_fedintr_benchmarks · table1 · FedProx" in out  # ~2,400 s estimated > 10 min: never started
    store = Store(tmp_path)
    assert store.get(cheap) is not None and store.get(dear) is None
    assert not store.checkpoint_path(dear.key()).exists() and not store.failed_path(dear.key()).exists()
    learnt = json.loads((tmp_path / "costs.json").read_text())["devices"]  # the finished run's time was measured
    assert any(cost_key(cheap) in entries for entries in learnt.values())
    # the ledger, in its own file: artifact x runs done / needed
    ledger = (tmp_path / "ledger-smoke.md").read_text()
    assert "| 05_fedintr_benchmarks | table1 | 1 / 2 |" in ledger and not (tmp_path / "summary-smoke.md").exists()
    # everything done: a second invocation trains nothing and rewrites no record
    costs = CostTable(tmp_path / "costs.json")
    costs.table["cpu (measured)"] = {}
    costs.save()
    assert campaign.main([*args, "--budget", "10m"]) == 0
    mtimes = {p: p.stat().st_mtime_ns for p in (tmp_path / "records").glob("*.json")}
    assert len(mtimes) == 2
    assert campaign.main([*args, "--budget", "10m"]) == 0
    assert "nothing to do: 2 done" in capsys.readouterr().out
    assert {p: p.stat().st_mtime_ns for p in (tmp_path / "records").glob("*.json")} == mtimes


def _earlier(costs: CostTable, cfg, dev: str, s_per_pass: float, runs: int = 9) -> None:
    """The cost table as earlier machines left it: ``runs`` records of ``cfg``'s key on ``dev`` at ``s_per_pass``."""
    by = {f"earlier{i}": s_per_pass for i in range(runs)}
    costs.table.setdefault(dev, {})[cost_key(cfg)] = {"s_per_pass": s_per_pass, "runs": runs, "records": sorted(by),
                                                     "by_record": by, "type": "cpu"}


def _timed(rec, s_per_round: float):
    """``rec`` as a host that takes ``s_per_round`` seconds a round would have recorded it."""
    from fedlib.companion.results import Record

    doc = json.loads(json.dumps(rec.to_json()))
    doc["history"] = [{**h, "time_s": s_per_round} for h in doc["history"]]
    return Record.from_json(doc)


def test_a_campaign_admits_runs_at_the_pace_its_finished_runs_took(tmp_path, plans):
    """A host slower than the machines the cost table was measured on: once a run has taken twice its estimate,
    the next run is admitted on twice its estimate, and is not begun where that does not fit the budget."""
    from fedlib.companion.provenance import device_name

    a, b = smoke(), smoke(seed=1)
    plans(**{"05_fedintr_benchmarks": lambda scale, **kw: {"table1": {"a": a, "b": b}}})
    store, costs, dev = Store(tmp_path), CostTable(None), device_name("cpu")
    _earlier(costs, a, dev, 1e-4)  # nine earlier runs: this host's one run leaves the median where it is
    items = {it.key: it for it in collect("smoke", "cpu", store=store, costs=costs)}
    it_a, it_b = items[a.key()], items[b.key()]
    booking, out = campaign.Booking(store, costs, lambda s: None, dev), {"done": [], "skipped": [], "failed": []}
    raw = it_a.estimate_s
    assert booking.pace == 1.0 and booking.admit(it_a, 1e9, out) == 1e9 and it_a.estimate_s == raw
    booking.finish(run(a, store=store, progress=False), it_a, 2 * raw, out)
    assert booking.pace == pytest.approx(2.0) and out["done"] == [it_a.key]
    est_b = campaign.refresh(it_b, store, costs).estimate_s
    assert booking.admit(it_b, 1.5 * est_b, out) is None and out["skipped"] == [it_b.key]
    assert booking.admit(it_b, 2.5 * est_b, out) == 2.5 * est_b
    assert it_b.estimate_s == pytest.approx(2 * est_b) and "× 2.00 (this campaign's pace)" in it_b.source
    booking.finish(run(b, store=store, progress=False), it_b, 2 * est_b, out)
    assert booking.pace == pytest.approx(2.0)


def test_a_slow_hosts_own_measurements_are_not_scaled_by_its_pace_again(tmp_path, plans):
    """The cost table knew the key only from a faster machine: this host's first run takes 20 times that estimate
    and the table learns its time. The next run's estimate is then this host's own, not 20 times it: the pace is
    taken against the table as it stands after learning (about 1), not against the estimate at admission. The
    measurements of the threads the runs train on come first (a 2-thread entry of another machine sorts first)."""
    from fedlib.companion.provenance import device_name

    a, b = smoke(), smoke(seed=1)
    plans(**{"05_fedintr_benchmarks": lambda scale, **kw: {"table1": {"a": a, "b": b}}})
    store, costs, dev = Store(tmp_path), CostTable(None), device_name("cpu")
    rec = _timed(run(a, store=Store(tmp_path / "ran"), progress=False), 30.0)
    fast = 1.0 / CostTable(None).estimate(a, "cpu").seconds * 1e-6  # far below anything a CPU does
    _earlier(costs, a, "cpu (another host, 2 threads)", fast, runs=1)
    assert "cpu (another host" < dev
    items = {it.key: it for it in collect("smoke", "cpu", store=store, costs=costs)}
    it_a, it_b = items[a.key()], items[b.key()]
    booking, out = campaign.Booking(store, costs, lambda s: None, dev), {"done": [], "skipped": [], "failed": []}
    raw = it_a.estimate_s
    assert booking.admit(it_a, 1e9, out) == 1e9
    took = 30.0 * a.rounds + 3.0
    assert took > 20 * raw
    booking.finish(rec, it_a, took, out)
    assert booking.pace == pytest.approx(1.0, rel=0.05)
    own = costs.estimate(b, "cpu", device_name=dev)
    assert own.seconds == pytest.approx(took, rel=0.05) and dev in own.source
    assert booking.admit(it_b, 1e9, out) == 1e9 and it_b.estimate_s == pytest.approx(own.seconds, rel=0.05)


def test_estimates_read_the_measurements_of_the_threads_a_run_trains_on(tmp_path, plans):
    """A single-thread worker's run is estimated from single-thread measurements, not from the campaign process's
    own thread count (the summary's hours left are single-thread worker-hours)."""
    from fedlib.companion.provenance import device_name

    a = smoke()
    plans(**{"05_x": lambda scale, **kw: {"table1": {"a": a}}})
    costs = CostTable(None)
    _earlier(costs, a, device_name("cpu", 1), 1e-2)
    _earlier(costs, a, device_name("cpu", 2), 1e-6)
    one, two = (collect("smoke", "cpu", store=Store(tmp_path), costs=costs, threads=t)[0] for t in (1, 2))
    assert "1 threads" in one.source and "2 threads" in two.source
    assert one.estimate_s > 5 * two.estimate_s  # 3 s of set-up each, then 10,000 times the seconds a pass


def test_ledger_lists_claims_and_statistics_over_seeds(tmp_path, plans):
    from fedlib.companion.ledger import ledger

    runs = {RunId("FedAvg", s): smoke(seed=s) for s in (0, 1)}
    plans(**{"01_fedavg_baseline": lambda scale, **kw: {"table1": runs}})
    store = Store(tmp_path)
    recs = [run(c, store=store, progress=False) for c in runs.values()]
    (tmp_path / "summary").mkdir()
    (tmp_path / "summary" / "01_fedavg_baseline.smoke.json").write_text(json.dumps({"claims": [
        {"claim": "FedProx performs like FedAvg", "source": "FedIntR Table I", "status": "pending",
         "why": "1 / 3 seeds"}]}))
    text = ledger("smoke", collect("smoke", store=store, costs=CostTable(None)), store=store)
    accs = [100 * r.final("test_acc") for r in recs]
    mean, std = sum(accs) / 2, abs(accs[0] - accs[1]) / 2 ** 0.5
    assert "| 01_fedavg_baseline | table1 | 2 / 2 |" in text
    assert "| FedProx performs like FedAvg (FedIntR Table I) | pending | 1 / 3 seeds |" in text
    assert f"| 01_fedavg_baseline | table1 | FedAvg | 2 / 2 | {mean:.2f} ± {std:.2f} |" in text
    assert "not paper-scale results" in text


RESUME_SCRIPT = """
import sys
import fedlib.companion.papers as P
from fedlib.companion.papers import preset
from fedlib.companion.campaign import main
P.PLANS.clear()
P.PLANS["05_resume"] = lambda scale, **kw: {"table1": {"FedAvg": preset("fedintr", "smoke", rounds=8)}}
sys.exit(main(["run", "--scale", "smoke", "--budget", "10m", "--jobs", "1", "--store", sys.argv[1], "--costs", sys.argv[2]]))
"""


def test_a_killed_campaign_resumes_to_the_record_of_an_uninterrupted_one(tmp_path):
    script = tmp_path / "camp.py"
    script.write_text(textwrap.dedent(RESUME_SCRIPT))
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "FEDLIB_COMMIT": "test"}
    cfg = smoke(rounds=8)
    killed, whole = Store(tmp_path / "killed"), Store(tmp_path / "whole")
    cmd = lambda store: [sys.executable, str(script), str(store.root), str(tmp_path / "costs.json")]  # noqa: E731
    proc = subprocess.Popen(cmd(killed), env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ckpt, deadline = killed.checkpoint_path(cfg.key()), time.monotonic() + 240
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if ckpt.exists() and torch.load(ckpt, weights_only=False)["round"] >= 2:
                break
            time.sleep(0.05)
        assert proc.poll() is None, "the run ended before it could be killed"
        proc.send_signal(signal.SIGKILL)
    finally:
        proc.wait()
    assert killed.get(cfg) is None and ckpt.exists()
    subprocess.run(cmd(killed), env=env, check=True, capture_output=True)  # resumes from the checkpoint
    subprocess.run(cmd(whole), env=env, check=True, capture_output=True)  # uninterrupted
    a, b = killed.get(cfg), whole.get(cfg)
    assert a.provenance["resumed_from_round"] >= 2 and b.provenance["resumed_from_round"] == 0
    same_record(a, b)
    assert not ckpt.exists()
    earlier = sum(h["time_s"] for h in a.history[:a.provenance["resumed_from_round"]])  # the killed slice's rounds
    assert earlier > 0 and worker_seconds(a) == pytest.approx(a.provenance["wall_time_s"] + earlier)
    assert worker_seconds(b) == b.provenance["wall_time_s"]  # one slice: its wall time


def test_a_resumed_runs_worker_time_counts_the_rounds_of_its_earlier_slices():
    class Rec:
        history = [{"round": r, "time_s": 10.0} for r in (1, 2, 3, 4)]
        provenance = {"wall_time_s": 25.0, "resumed_from_round": 2}

    assert worker_seconds(Rec()) == 45.0  # rounds 1-2 (20 s) before the checkpoint, then 25 s of wall time
    Rec.provenance = {"wall_time_s": 41.0, "resumed_from_round": 0}
    assert worker_seconds(Rec()) == 41.0


def test_ray_backend_missing_gives_one_error_naming_the_fix(tmp_path, plans, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    plans(**{"05_x": lambda scale, **kw: {"table1": {"a": smoke()}}})
    with pytest.raises(SystemExit, match=r"pip install 'fedlib\[ray\]'"):
        campaign.main(["run", "--scale", "smoke", "--budget", "5m", "--backend", "ray", "--store", str(tmp_path),
                       "--costs", str(tmp_path / "c.json")])


def test_ray_backend_gives_the_local_backends_records(tmp_path, plans):
    pytest.importorskip("ray", reason="Ray is not installed: pip install 'fedlib[ray]' (make test installs it)")
    runs = {"FedAvg": smoke(), "FedProx": smoke(strategy="fedprox", strategy_kw={"mu": 0.01})}
    plans(**{"05_x": lambda scale, **kw: {"table1": runs}})
    local, remote = Store(tmp_path / "local"), Store(tmp_path / "ray")
    costs = CostTable(None)
    threads = torch.get_num_threads()
    out = campaign.run_local(collect("smoke", "cpu", store=local, costs=costs), local, 600, costs,
                             log=lambda s: None)
    assert len(out["done"]) == 2
    out = campaign.run_ray(collect("smoke", "cpu", store=remote, costs=costs), remote, 600, costs, num_cpus=2,
                  threads=threads, log=lambda s: None)
    assert len(out["done"]) == 2 and not out["failed"]
    for c in runs.values():
        same_record(local.get(c), remote.get(c))


def test_worker_processes_give_the_sequential_records(tmp_path, plans):
    """Two single-thread worker processes (the CPU default) store the records that one run after another does."""
    runs = {"FedAvg": smoke(), "FedProx": smoke(strategy="fedprox", strategy_kw={"mu": 0.01})}
    plans(**{"05_x": lambda scale, **kw: {"table1": runs}})
    one, two = Store(tmp_path / "one"), Store(tmp_path / "two")
    costs = CostTable(None)
    threads = torch.get_num_threads()
    torch.set_num_threads(max(1, cores() // 2))  # a worker's threads: the thread count changes the last bits
    try:
        out = campaign.run_local(collect("smoke", "cpu", store=one, costs=costs), one, 600, costs, log=lambda s: None)
    finally:
        torch.set_num_threads(threads)
    assert len(out["done"]) == 2
    out = campaign.run_local(collect("smoke", "cpu", store=two, costs=costs), two, 600, costs, jobs=2,
                             log=lambda s: None)
    assert sorted(out["done"]) == sorted(c.key() for c in runs.values()) and not out["failed"]
    for c in runs.values():
        same_record(one.get(c), two.get(c))
    with pytest.raises(ValueError, match="jobs=0"):
        campaign.run_local([], one, 600, costs, jobs=0)


def test_doc_regenerates_the_plans_numbers_in_their_block_only(tmp_path, plans):
    cfgs = {"FedAvg": smoke(), "FedProx": smoke(strategy="fedprox", strategy_kw={"mu": 0.01})}
    plans(**{"05_fedintr_benchmarks": lambda scale, **kw: {"Table I": cfgs},
             "08_x": lambda scale, **kw: {"fig1": {"again": cfgs["FedAvg"], "new": smoke(seed=3)}}})
    doc = tmp_path / "campaign.md"
    doc.write_text(f"# head\n\nkept\n{plan_text.DOC_BEGIN}\nold numbers\n{plan_text.DOC_END}\ntail kept\n")
    args = ["doc", "--scale", "smoke", "--file", str(doc), "--store", str(tmp_path), "--costs", str(tmp_path / "c")]
    assert campaign.main(args) == 0
    text = doc.read_text()
    assert text.startswith("# head\n\nkept\n") and text.endswith(f"{plan_text.DOC_END}\ntail kept\n")
    assert "old numbers" not in text and "python -m fedlib.companion.campaign doc" in text
    assert "**3 distinct runs," in text and "| 05_fedintr_benchmarks | 2 | fmnist |" in text
    assert "| 08_x | 1 | fmnist |" in text  # a shared run counts once, under the first notebook listing it
    assert "| 10 | 05 · Table I | 2 |" in text and "| 45 | 08 · fig1 | 1 |" in text
    assert "0 of 3 estimates measured" in text and "Estimate sources: default:" in text
    doc.write_text("no block\n")
    with pytest.raises(SystemExit, match="campaign plan: begin"):
        campaign.main(args)


def test_the_ledger_never_overwrites_the_batch_summary(tmp_path, plans, monkeypatch):
    from fedlib.companion import ledger

    monkeypatch.setattr(ledger, "DEFAULT_ROOT", tmp_path)
    (tmp_path / "summary-quick.md").write_text("the committed batch summary")
    plans(**{"05_x": lambda scale, **kw: {"table1": {"a": smoke()}}})
    assert campaign.main(["ledger", "--scale", "quick", "--store", str(tmp_path), "--costs",
                          str(tmp_path / "c.json")]) == 0
    assert ledger.ledger_path("quick", Store(tmp_path)) == tmp_path / "ledger-quick.md"
    assert (tmp_path / "summary-quick.md").read_text() == "the committed batch summary"
    assert "# fedlib ledger" in (tmp_path / "ledger-quick.md").read_text()


def _diverge(cfg, store):
    """Leave what a run that stops with a non-finite loss in round 1 leaves: failed/<key>.json."""
    from fedlib.schedule import NonFiniteLossError

    def boom(engine, entry):
        raise NonFiniteLossError("Training loss became nan for client 0 in round 1")
    with pytest.raises(NonFiniteLossError):
        run(cfg, store=store, progress=False, callback=boom)


def test_a_diverged_run_is_a_finished_result_and_is_retried_only_when_asked(tmp_path, plans, capsys):
    from fedlib.companion.ledger import ledger

    cfg = smoke()
    plans(**{"05_fedintr_benchmarks": lambda scale, **kw: {"table1": {"FedAvg": cfg}}})
    store = Store(tmp_path)
    _diverge(cfg, store)
    it, = collect("smoke", "cpu", store=store, costs=CostTable(None))
    assert it.status == "diverged" and "round 1" in it.why and it.estimate_s == 0
    assert "| diverged |" in plan_text.format_plan([it], "smoke", "cpu")
    args = ["run", "--scale", "smoke", "--budget", "10m", "--store", str(tmp_path), "--costs", str(tmp_path / "c.json")]
    assert campaign.main(args) == 0
    assert "nothing to do: 0 done, 1 diverged" in capsys.readouterr().out and store.get(cfg) is None
    assert "| 05_fedintr_benchmarks | table1 | 1 / 1 | 1 |" in ledger("smoke", collect("smoke", store=store, costs=CostTable(None)), store=store)
    assert campaign.main([*args, "--retry-diverged"]) == 0  # asked: trained again (it learns this time)
    assert store.get(cfg) is not None and "done 05_fedintr_benchmarks" in capsys.readouterr().out


def test_the_other_seeds_of_a_diverged_setting_are_moot_and_trained_last(tmp_path, plans, capsys):
    seeds = {f"FedAvg / seed={s}": smoke(seed=s) for s in range(3)}
    other = smoke(lr=0.05)
    plans(**{"05_fedintr_benchmarks": lambda scale, **kw: {"table1": {**seeds, "other": other}},
             "09_later": lambda scale, **kw: {"fig": {"late": smoke(lr=0.02)}}})
    store = Store(tmp_path)
    _diverge(seeds["FedAvg / seed=0"], store)
    items = collect("smoke", "cpu", store=store, costs=CostTable(None))
    by = {it.key: it for it in items}
    moot = [by[seeds[f"FedAvg / seed={s}"].key()] for s in (1, 2)]
    assert all(it.status == "pending" and "seed 0 of its setting diverged" in it.moot for it in moot)
    assert not by[other.key()].moot and items[-2:] == sorted(moot, key=lambda i: i.sort_key)  # after a later notebook
    assert "pending (moot)" in plan_text.format_plan(items, "smoke", "cpu")
    assert "moot 2 of the pending" in plan_text.format_plan(items, "smoke", "cpu")


def test_a_divergence_during_a_campaign_sends_its_settings_other_seeds_last(tmp_path):
    store = Store(tmp_path)
    a0, a1, b = smoke(), smoke(seed=1), smoke(lr=0.05)
    items = [Item(c.key(), c, uses=[("05_x", "t", RunId("x", 0))], order=i) for i, c in enumerate((a0, a1, b))]
    _diverge(a0, store)
    queue = items[1:]
    campaign.Booking(store, CostTable(None), lambda s: None).failed(items[0], queue)
    assert items[0].status == "diverged" and [q.key for q in queue] == [b.key(), a1.key()] and queue[1].moot
    queue2 = [Item(b.key(), b)]
    campaign.Booking(store, CostTable(None), lambda s: None).failed(Item(a1.key(), a1), queue2)
    assert not queue2[0].moot  # a run that stopped without diverging defers nothing


def _rising(cfg, store, rise: float):
    """Store a record of ``cfg`` whose test accuracy climbs ``rise`` points a round: off its plateau when > 0."""
    from fedlib.companion.results import Record

    history = [{"round": r, "test_acc": 0.5 + rise * r / 100} for r in range(1, 11)]
    rec = Record(key=cfg.key(), config=cfg.replace(rounds=10).to_dict(), history=history, provenance={},
                 partition_hash="p", final_params_hash="f")
    store.put(rec)
    return rec


def test_the_other_seeds_of_a_setting_with_a_seed_off_its_plateau_are_moot_and_trained_last(tmp_path, plans, capsys):
    seeds = {f"FedAvg / seed={s}": smoke(seed=s, rounds=10) for s in range(3)}
    flat = {f"flat / seed={s}": smoke(lr=0.05, rounds=10, seed=s) for s in range(2)}
    plans(**{"05_fedintr_benchmarks": lambda scale, **kw: {"table1": {**seeds, **flat}}})
    store = Store(tmp_path)
    _rising(seeds["FedAvg / seed=1"], store, 1.0)
    _rising(flat["flat / seed=0"], store, 0.0)
    items = collect("smoke", "cpu", store=store, costs=CostTable(None))
    by = {it.key: it for it in items}
    moot = [by[seeds[f"FedAvg / seed={s}"].key()] for s in (0, 2)]
    assert all("seed 1 of its setting ended off its plateau (rises" in it.moot for it in moot)
    assert by[seeds["FedAvg / seed=1"].key()].off and not by[flat["flat / seed=1"].key()].moot
    assert items[-2:] == sorted(moot, key=lambda i: i.sort_key)
    assert "diverged or ended off its plateau" in plan_text.format_plan(items, "smoke", "cpu")


def test_a_run_ending_off_its_plateau_during_a_campaign_sends_its_settings_other_seeds_last(tmp_path):
    store = Store(tmp_path)
    a0, a1, b = (smoke(rounds=10), smoke(seed=1, rounds=10), smoke(lr=0.05, rounds=10))
    items = [Item(c.key(), c, uses=[("05_x", "t", RunId("x", 0))], order=i) for i, c in enumerate((a0, a1, b))]
    booking, out = campaign.Booking(store, CostTable(None), lambda s: None), {"done": []}
    queue = items[1:]
    booking.finish(_rising(a0, store, 0.0), items[0], 1.0, out, queue)  # on its plateau: nothing moves
    assert [q.key for q in queue] == [a1.key(), b.key()] and not any(q.moot for q in queue)
    booking.finish(_rising(a0, store, 1.0), items[0], 1.0, out, queue)
    assert [q.key for q in queue] == [b.key(), a1.key()] and "seed 0" in queue[1].moot and not queue[0].moot


def test_a_record_with_nan_metrics_is_diverged_not_done(tmp_path, plans):
    from fedlib.companion.results import Record

    cfg = smoke()
    plans(**{"05_x": lambda scale, **kw: {"table1": {"a": cfg}}})
    store = Store(tmp_path)
    store.put(Record(key=cfg.key(), config=cfg.to_dict(), history=[{"round": 1, "test_acc": float("nan")}],
                     provenance={}, partition_hash="p", final_params_hash="f"))
    with pytest.warns(RuntimeWarning, match="test_acc is nan"):
        it, = collect("smoke", "cpu", store=store, costs=CostTable(None))
    assert it.status == "diverged" and "test_acc is nan" in it.why


def test_a_copied_record_blocks_its_run_with_the_fix(tmp_path, plans):
    a, b = smoke(), smoke(seed=1)
    plans(**{"05_x": lambda scale, **kw: {"table1": {"a": b}}})
    store = Store(tmp_path)
    store.record_path(b.key()).parent.mkdir(parents=True)
    store.record_path(b.key()).write_text(json.dumps({"key": a.key(), "config": a.to_dict(), "history": [],
                                                      "provenance": {}, "partition_hash": "",
                                                      "final_params_hash": ""}))
    it, = collect("smoke", "cpu", store=store, costs=CostTable(None))
    assert it.status == "blocked" and f"move it to {store.record_path(a.key())}" in it.why


def test_an_unknown_notebook_in_only_is_an_error_listing_the_valid_ones(tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        campaign.main(["plan", "--scale", "paper", "--only", "99", "--store", str(tmp_path)])
    assert err.value.code == 2
    msg = capsys.readouterr().err
    assert "--only 99: no notebook with a plan matches '99'" in msg and "05_fedintr_benchmarks" in msg


def test_an_unwritable_store_is_one_error_before_any_training(tmp_path, plans, capsys):
    plans(**{"05_x": lambda scale, **kw: {"table1": {"a": smoke()}}})
    blocker = tmp_path / "not_a_folder"
    blocker.write_text("")
    for cmd in (["run", "--budget", "5m"], ["ledger"]):
        with pytest.raises(SystemExit) as err:
            campaign.main([*cmd, "--scale", "smoke", "--store", str(blocker / "results"),
                           "--costs", str(tmp_path / "c.json")])
        msg = capsys.readouterr().err
        assert err.value.code == 2 and f"cannot write to {blocker}" in msg and "Traceback" not in msg


def test_plan_names_a_planned_runs_unreadable_record(tmp_path):
    from fedlib.companion.campaign import collect
    from fedlib.companion.plan_text import format_plan
    from fedlib.companion.results import Store

    store = Store(tmp_path)
    items = collect("smoke", "cpu", store=store, only=["01"])
    path = store.record_path(items[0].key)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"key": "cut sho')
    items = collect("smoke", "cpu", store=store, only=["01"])
    text = format_plan(items, "smoke", "cpu")
    assert str(path) in text and "unreadable record" in text


def test_match_keeps_the_runs_whose_name_contains_a_text_as_plan_prints_it(tmp_path, plans, capsys):
    a = smoke()
    plans(**{"05_fedintr_benchmarks": lambda scale, **kw: {"table1": {RunId("FedAvg", 0): a,
                                                                       RunId("FedIntR", 0): a.replace(seed=1)}}})
    items = collect("smoke", "cpu", store=Store(tmp_path), costs=CostTable(None))
    kept = plan_text.matching(items, ["table1 · FedAvg /"])
    assert [str(it.uses[0][2]) for it in kept] == [str(RunId("FedAvg", 0))]
    assert plan_text.matching(items, ["table1 · FedAvg |"]) == kept  # the name's own separator works as well
    with pytest.raises(SystemExit) as err:
        campaign.main(["plan", "--scale", "smoke", "--match", "FedSHIBU", "--store", str(tmp_path)])
    assert err.value.code == 2 and "--match 'FedSHIBU': no run of the plan(s) contains it" in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="the block is costed for a machine without a GPU (this "
                    "GPU's own measurements would replace the table's)")
def test_the_committed_campaign_doc_block_is_the_current_plans(tmp_path):
    """docs/campaign.md's generated block (the paper-scale plans on cuda) matches what `campaign doc` writes now,
    the commit it names aside: a plan, priority or GPU cost changed without regenerating it fails here."""
    doc = REPO / "docs" / "campaign.md"
    fresh = tmp_path / "campaign.md"
    fresh.write_text(doc.read_text())
    assert campaign.main(["doc", "--file", str(fresh)]) == 0

    def block(path: Path) -> str:
        text = path.read_text().split(plan_text.DOC_BEGIN, 1)[1].split(plan_text.DOC_END, 1)[0]
        return re.sub(r"at commit [\w-]+", "at commit X", text)  # -dirty: a tree with edits
    assert block(doc) == block(fresh), "docs/campaign.md's plan block is stale: run `python -m fedlib.companion.campaign doc`"


def test_no_smoke_run_is_planned_by_notebooks_of_two_test_units(tmp_path):
    """`make test` runs the notebook units side by side on one smoke store: a run two units plan could be trained
    by both at once. Every notebook is in a unit, and each planned run belongs to one."""
    from conftest import NOTEBOOK_UNITS, notebook_unit

    numbers = sorted(p.name[:2] for p in (Path(__file__).parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert sorted(n for u in NOTEBOOK_UNITS for n in u) == numbers
    items = collect("smoke", "cpu", store=Store(tmp_path))
    spans = {it.key: {notebook_unit(nb) for nb, _, _ in it.uses} for it in items}
    assert spans and all(len(units) == 1 for units in spans.values()), {k: u for k, u in spans.items() if len(u) > 1}
    assert len({u for units in spans.values() for u in units}) == len(NOTEBOOK_UNITS)  # each unit trains something
