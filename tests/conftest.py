import pytest
import torch

torch.set_num_threads(2)


@pytest.fixture(scope="session")
def tiny_data():
    """A small learnable synthetic dataset shaped like Fashion-MNIST (fast, no files needed)."""
    from fedlib.data import load_dataset

    return load_dataset("synthetic", n_train=480, n_test=160, shape=(1, 28, 28), num_classes=10, seed=0, signal=2.0)
