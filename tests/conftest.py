import os

import pytest
import torch

# `make test` runs the suite in TEST_JOBS pytest-xdist processes (--dist loadfile, one per core): one thread each
torch.set_num_threads(1 if os.environ.get("PYTEST_XDIST_WORKER") else 2)

# The notebooks in two units of about equal smoke training (07, 08 and 02's ResNets; the rest), no smoke run planned
# by notebooks of both (tests/test_campaign.py checks it): the two processes of `make test` train them side by side.
NOTEBOOK_UNITS = (("02", "07", "08"), ("00", "01", "03", "04", "05", "06", "09"))


def notebook_unit(path: str) -> str:
    """The scheduling unit of a notebook's path (a notebook not listed: the last unit)."""
    number = os.path.basename(path)[:2]
    return next((f"notebooks {'+'.join(u)}" for u in NOTEBOOK_UNITS if number in u),
                f"notebooks {'+'.join(NOTEBOOK_UNITS[-1])}")


try:  # pytest-xdist, the dev extra
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # pragma: no cover - a plain `pytest` run
    LoadScopeScheduling = None

if LoadScopeScheduling is not None:

    class FilesAndNotebooks(LoadScopeScheduling):
        """``--dist loadfile``, except that the notebooks run in the units of :data:`NOTEBOOK_UNITS`: their smoke
        runs share ``results/smoke/``, where two kernels could train one key at once, so notebooks that plan a
        common run share a unit. A test file runs in one process, in order."""

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return notebook_unit(path) if path.endswith(".ipynb") else path

    @pytest.hookimpl(tryfirst=True)
    def pytest_xdist_make_scheduler(config: pytest.Config, log) -> LoadScopeScheduling | None:
        return FilesAndNotebooks(config, log) if config.getvalue("dist") == "loadfile" else None


@pytest.fixture(scope="session")
def tiny_data():
    """A small learnable synthetic dataset shaped like Fashion-MNIST (fast, no files needed)."""
    from fedlib.data import load_dataset

    return load_dataset("synthetic", n_train=480, n_test=160, shape=(1, 28, 28), num_classes=10, seed=0, signal=2.0)
