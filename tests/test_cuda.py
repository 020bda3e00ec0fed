"""The vectorized executor on a GPU: eager and CUDA-graph paths train like the sequential loop.

Skipped without CUDA (CI has none); run on a GPU machine with ``python -m pytest tests/test_cuda.py``. cuDNN's
TF32 convolutions (PyTorch's default) are switched off here so that float32 tolerances mean float32 rounding.
"""

import pytest
import torch

from fedlib.config import Config
from fedlib.data import load_dataset
from fedlib.engine import Engine
from fedlib.executors import VectorizedExecutor

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")


@pytest.fixture(autouse=True)
def no_tf32():
    old = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = old


@pytest.fixture(scope="module")
def data():
    return load_dataset("synthetic", n_train=960, n_test=320, shape=(3, 32, 32), num_classes=10, seed=1, signal=2.0,
                        device="cuda")


def cfg(**kw) -> Config:
    base = dict(dataset="synthetic", model="simple_cnn", partition="dirichlet", partition_kw={"beta": 0.5,
                "min_size": 5}, num_clients=8, sample_fraction=0.5, rounds=3, local_epochs=2, batch_size=48, lr=0.02,
                momentum=0.9, weight_decay=1e-4, augment="crop_flip", executor="sequential", seed=3, device="cuda")
    base.update(kw)
    return Config(**base)


def run(c: Config, data) -> Engine:
    eng = Engine(c, data=data, progress=False, keep_client_models=True)
    eng.run()
    return eng


def close(a: Engine, b: Engine, atol=1e-5, rtol=1e-4) -> None:
    for k, v in a.global_params.items():
        torch.testing.assert_close(b.global_params[k], v, atol=atol, rtol=rtol, msg=lambda m: f"{k}: {m}")
    for x, y in zip(a.history, b.history):
        assert x["clients"] == y["clients"]
        assert y["train_loss"] == pytest.approx(x["train_loss"], rel=1e-4, abs=1e-5)


@pytest.mark.parametrize("strategy,kw", [("fedavg", {}), ("fedprox", {"mu": 0.5})])
def test_eager_and_graph_match_sequential_on_cuda(strategy, kw, data):
    c = cfg(strategy=strategy, strategy_kw=kw)
    seq = run(c, data)
    eager = run(c.replace(executor="vectorized", cuda_graph=False), data)
    assert isinstance(eager.executor, VectorizedExecutor) and not eager.executor.static
    graph = run(c.replace(executor="vectorized", cuda_graph=True), data)
    ex = graph.executor
    assert ex.static and ex.capture and ex.steps.graphs and all(g is not None for g in ex.steps.graphs)
    close(seq, eager)
    close(seq, graph)


def test_the_default_config_replays_a_cuda_graph(data):
    """cuda_graph=None (the default) with executor auto: vectorized and captured on CUDA, no flag needed; the
    same training as the sequential loop."""
    c = cfg(strategy="fedprox", strategy_kw={"mu": 0.5})
    eng = run(c.replace(executor="auto"), data)
    assert eng.cfg.cuda_graph is None and eng.executor_name == "vectorized"
    assert eng.executor.static and eng.executor.capture
    close(run(c, data), eng)


def test_auto_picks_vectorized_on_cuda_and_bf16_graph_trains_like_fp32(data):
    """bf16 autocast under a captured graph trains as float32 does. This config learns (train loss 2.14 → 1.49 in
    5 rounds) but is sensitive: on an H100 the bf16 graph's losses matched the fp32 sequential run's for 3 rounds
    and were 15 % apart by round 5 (accuracy oscillates between rounds here, and bf16 rounding moves it); so the
    first rounds are compared closely and the rest only for learning."""
    c = cfg(sample_fraction=1.0, rounds=5, lr=0.05, augment="none")
    ref = run(c, data)
    eng = run(c.replace(executor="auto", precision="bf16"), data)  # the graph by default
    assert eng.executor_name == "vectorized" and eng.executor.capture
    assert all(torch.isfinite(v).all() for v in eng.global_params.values())
    loss = [h["train_loss"] for h in eng.history]
    assert loss[:3] == pytest.approx([h["train_loss"] for h in ref.history[:3]], rel=0.02)
    assert loss[-1] < 0.9 * loss[0]
