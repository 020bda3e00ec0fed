import os

import pytest
import torch

# `make test` runs the suite in TEST_JOBS pytest-xdist processes (--dist loadfile, one per core): one thread each
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)

try:  # pytest-xdist, the dev extra
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover - a plain `pytest` run
    LoadScopeScheduling = None

if LoadScopeScheduling is not None:

    class FilesAndNotebooks(LoadScopeScheduling):
        """``--dist loadfile``, except that the notebooks are one unit: their smoke runs share ``results/smoke/``,
        where two kernels could train one key at once. A test file runs in one process, in order."""

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return "notebooks" if path.endswith(".ipynb") else path

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(config: pytest.Config, log) -> LoadScopeScheduling | None:
        return FilesAndNotebooks(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.fixture(scope="session")
def tiny_data():
    """A small learnable synthetic dataset shaped like Fashion-MNIST (fast, no files needed)."""
    from fedlib.data import load_dataset

    return load_dataset("synthetic", n_train=480, n_test=160, shape=(1, 28, 28), num_classes=10, seed=0, signal=2.0)
