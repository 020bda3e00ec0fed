"""Datasets: tiny files in the real on-disk formats go through the real loaders; augmentation; synthetic data."""

import gzip
import pickle
import time
import urllib.error

import numpy as np
import pytest
import torch

from fedlib import data, loaders
from fedlib.data import (DATASETS, NORMALIZATION, DatasetNotFoundError, FedDataset, augment_batch, load_dataset,
                         synthetic)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch):
    monkeypatch.delenv("FEDLIB_DATA", raising=False)
    data.clear_cache()
    yield
    data.clear_cache()


def _images(n, shape, seed):
    return np.random.default_rng(seed).integers(0, 256, size=(n, *shape), dtype=np.uint8)


def _normalized(x_u8, name):
    mean, std = NORMALIZATION[name]
    c = x_u8.shape[1]
    m = np.broadcast_to(np.asarray(mean, np.float32), (c,)).reshape(1, c, 1, 1)
    s = np.broadcast_to(np.asarray(std, np.float32), (c,)).reshape(1, c, 1, 1)
    return (x_u8.astype(np.float32) / 255 - m) / s


def _dump(path, obj):
    with open(path, "wb") as f:
        pickle.dump(obj, f, protocol=2)


# ------------------------------------------------------------------------------------------- CIFAR-10 / 100

def test_cifar10_real_pickle_format(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    xs, ys = [], []
    for i in range(1, 6):
        x = _images(5, (3, 32, 32), i)
        y = [(i + j) % 10 for j in range(5)]
        # the real batches: 'data' is (N, 3072) uint8 rows of R, G, B planes; 'labels' a list of ints
        _dump(folder / f"data_batch_{i}", {"batch_label": f"training batch {i} of 5", "labels": y,
                                           "data": x.reshape(5, 3072), "filenames": [f"im{j}.png" for j in range(5)]})
        xs.append(x)
        ys += y
    xt = _images(4, (3, 32, 32), 99)
    # bytes keys, as the original python-2 pickles load with encoding='bytes'
    _dump(folder / "test_batch", {b"labels": [3, 1, 4, 1], b"data": xt.reshape(4, 3072)})
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    _dump(folder / "batches.meta", {"label_names": names, "num_cases_per_batch": 5, "num_vis": 3072})

    d = load_dataset("cifar10", root=tmp_path, download=False)
    assert isinstance(d, FedDataset) and d.name == "cifar10"
    assert d.x_train.shape == (25, 3, 32, 32) and d.x_train.dtype == torch.float32
    assert d.y_train.dtype == torch.int64 and d.y_train.tolist() == ys
    assert d.x_test.shape == (4, 3, 32, 32) and d.y_test.tolist() == [3, 1, 4, 1]
    assert d.num_classes == 10 and d.in_shape == (3, 32, 32) and d.augment == "flip"
    assert d.classes == tuple(names) and d.source == str(folder)
    np.testing.assert_allclose(d.x_train.numpy(), _normalized(np.concatenate(xs), "cifar10"), atol=1e-5)
    np.testing.assert_allclose(d.x_test.numpy(), _normalized(xt, "cifar10"), atol=1e-5)
    # a black pixel in channel 0 maps to -mean/std
    assert torch.allclose(d.pad_fill, torch.tensor([-0.4914 / 0.2470, -0.4822 / 0.2435, -0.4465 / 0.2616]))
    # normalize="none" is just /255
    raw = load_dataset("cifar10", root=tmp_path, download=False, normalize="none")
    np.testing.assert_allclose(raw.x_test.numpy(), xt / 255.0, atol=1e-6)


def test_cifar100_fine_labels(tmp_path):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    x, xt = _images(6, (3, 32, 32), 1), _images(3, (3, 32, 32), 2)
    _dump(folder / "train", {"filenames": [], "batch_label": "training batch 1 of 1",
                             "fine_labels": [0, 99, 50, 7, 7, 1], "coarse_labels": [4, 19, 5, 0, 0, 1],
                             "data": x.reshape(6, 3072)})
    _dump(folder / "test", {"fine_labels": [98, 2, 3], "coarse_labels": [1, 2, 3], "data": xt.reshape(3, 3072)})
    _dump(folder / "meta", {"fine_label_names": [f"c{i}" for i in range(100)],
                            "coarse_label_names": [f"s{i}" for i in range(20)]})
    d = load_dataset("cifar100", root=tmp_path, download=False)
    assert d.num_classes == 100 and d.y_train.tolist() == [0, 99, 50, 7, 7, 1] and d.y_test.tolist() == [98, 2, 3]
    np.testing.assert_allclose(d.x_train.numpy(), _normalized(x, "cifar100"), atol=1e-5)
    assert d.classes[99] == "c99"


# -------------------------------------------------------------------------------------------------- SVHN

def test_svhn_mat_format(tmp_path):
    import scipy.io
    x, xt = _images(7, (3, 32, 32), 3), _images(3, (3, 32, 32), 4)
    y = np.array([[10], [1], [2], [10], [9], [5], [3]], dtype=np.uint8)
    yt = np.array([[1], [10], [7]], dtype=np.uint8)
    # the real layout: X (32, 32, 3, N) uint8, y (N, 1), digit 0 stored as 10
    scipy.io.savemat(tmp_path / "train_32x32.mat", {"X": np.transpose(x, (2, 3, 1, 0)), "y": y})
    scipy.io.savemat(tmp_path / "test_32x32.mat", {"X": np.transpose(xt, (2, 3, 1, 0)), "y": yt})
    d = load_dataset("svhn", root=str(tmp_path), download=False)
    assert d.y_train.tolist() == [0, 1, 2, 0, 9, 5, 3] and d.y_test.tolist() == [1, 0, 7]
    assert d.x_train.shape == (7, 3, 32, 32) and d.augment == "none"
    np.testing.assert_allclose(d.x_train.numpy(), x / 127.5 - 1.0, atol=1e-5)  # Normalize(0.5, 0.5)
    np.testing.assert_allclose(d.x_test.numpy(), xt / 127.5 - 1.0, atol=1e-5)


# ------------------------------------------------------------------------------------------ Tiny ImageNet

def test_tinyimagenet_folder(tmp_path):
    from PIL import Image
    root = tmp_path / "tiny-imagenet-200"
    wnids = ["n09999999", "n01443537", "n05555555"]  # class order = file order, not sorted
    (root / "val" / "images").mkdir(parents=True)
    (root / "wnids.txt").write_text("\n".join(wnids) + "\n")
    colors = {w: (40 * i + 20, 200 - 50 * i, 90) for i, w in enumerate(wnids)}
    for w in wnids:
        (root / "train" / w / "images").mkdir(parents=True)
        for j in range(2):
            Image.new("RGB", (64, 64), colors[w]).save(root / "train" / w / "images" / f"{w}_{j}.JPEG", quality=95)
        (root / "train" / w / f"{w}_boxes.txt").write_text("")
    Image.new("L", (64, 64), 128).save(root / "train" / wnids[1] / "images" / f"{wnids[1]}_2.JPEG")  # grayscale
    ann = []
    for i, w in enumerate([wnids[2], wnids[0], wnids[1], wnids[2]]):
        Image.new("RGB", (64, 64), colors[w]).save(root / "val" / "images" / f"val_{i}.JPEG", quality=95)
        ann.append(f"val_{i}.JPEG\t{w}\t0\t0\t63\t63")
    (root / "val" / "val_annotations.txt").write_text("\n".join(ann) + "\n")

    d = load_dataset("tinyimagenet", root=tmp_path, download=False, normalize="none")
    assert d.x_train.shape == (7, 3, 64, 64) and d.x_test.shape == (4, 3, 64, 64)
    assert d.y_train.tolist() == [0, 0, 1, 1, 1, 2, 2] and d.y_test.tolist() == [2, 0, 1, 2]
    assert d.num_classes == 3 and d.classes == tuple(wnids)
    want = torch.tensor(colors[wnids[2]], dtype=torch.float32) / 255
    assert torch.allclose(d.x_test[0].mean(dim=(1, 2)), want, atol=3 / 255)  # JPEG of a flat colour
    assert torch.allclose(d.x_train[4], torch.full((3, 64, 64), 128 / 255), atol=2 / 255)  # gray → RGB
    dn = load_dataset("tinyimagenet", root=tmp_path, download=False)
    np.testing.assert_allclose(dn.x_test[0, 0].mean().item(), (want[0].item() - 0.485) / 0.229, atol=0.02)


# --------------------------------------------------------------------------------------------- Fashion-MNIST

def test_fmnist_from_debian_package(tmp_path):
    if not all((loaders.DEBIAN_FMNIST_DIRS[0] / f"{s}.gz").is_file() for s in loaders._IDX_FILES.values()):
        pytest.skip("Debian's dataset-fashion-mnist is not installed")
    t = time.perf_counter()
    d = load_dataset("fmnist", root=tmp_path, download=False)
    elapsed = time.perf_counter() - t
    assert d.x_train.shape == (60000, 1, 28, 28) and d.x_test.shape == (10000, 1, 28, 28)
    assert d.num_classes == 10 and d.augment == "flip"
    assert d.y_train.bincount().tolist() == [6000] * 10 and d.y_test.bincount().tolist() == [1000] * 10
    assert d.x_train.min().item() == -1.0 and d.x_train.max().item() == 1.0
    assert -1.0 < d.x_train.mean().item() < 0.0
    assert d.source == str(loaders.DEBIAN_FMNIST_DIRS[0])
    assert elapsed < 5.0, f"Fashion-MNIST took {elapsed:.2f}s to load (target < 2 s)"
    # cached: the second call is instant and shares the CPU tensors
    again = load_dataset("fmnist", root=tmp_path, download=False)
    assert again.x_train.data_ptr() == d.x_train.data_ptr()


def _write_idx(path, arr, gz):
    header = bytes([0, 0, 0x08, arr.ndim]) + np.asarray(arr.shape, dtype=">i4").tobytes()
    payload = header + arr.astype(np.uint8).tobytes()
    (gzip.open if gz else open)(path, "wb").write(payload)


def test_fmnist_idx_files_in_root(tmp_path, monkeypatch):
    monkeypatch.setattr(loaders, "DEBIAN_FMNIST_DIRS", ())
    x, xt = _images(12, (28, 28), 5), _images(4, (28, 28), 6)
    y, yt = np.arange(12) % 10, np.array([9, 8, 0, 1])
    raw = tmp_path / "FashionMNIST" / "raw"  # torchvision's layout; one file gzipped, the rest not
    raw.mkdir(parents=True)
    _write_idx(raw / "train-images-idx3-ubyte.gz", x, gz=True)
    _write_idx(raw / "train-labels-idx1-ubyte", y, gz=False)
    _write_idx(raw / "t10k-images-idx3-ubyte", xt, gz=False)
    _write_idx(raw / "t10k-labels-idx1-ubyte", yt, gz=False)
    monkeypatch.setenv("FEDLIB_DATA", str(tmp_path))
    d = load_dataset("fmnist", download=False)
    assert d.x_train.shape == (12, 1, 28, 28) and d.y_test.tolist() == [9, 8, 0, 1]
    np.testing.assert_allclose(d.x_train[:, 0].numpy(), x / 127.5 - 1.0, atol=1e-5)
    assert d.y_train.tolist() == y.tolist()


def test_missing_dataset_names_the_fix(tmp_path, monkeypatch):
    monkeypatch.setattr(loaders, "DEBIAN_FMNIST_DIRS", ())
    with pytest.raises(DatasetNotFoundError) as e:
        load_dataset("fmnist", root=tmp_path, download=False)
    msg = str(e.value)
    assert "apt-get install dataset-fashion-mnist" in msg and str(tmp_path) in msg
    assert isinstance(e.value, FileNotFoundError)
    with pytest.raises(DatasetNotFoundError, match="cifar-10-batches-py"):
        load_dataset("cifar10", root=tmp_path, download=False)
    with pytest.raises(DatasetNotFoundError, match="cifar-100-python"):
        load_dataset("cifar100", root=tmp_path, download=False)
    with pytest.raises(DatasetNotFoundError, match="test_32x32.mat"):
        load_dataset("svhn", root=tmp_path, download=False)
    with pytest.raises(DatasetNotFoundError, match="tiny-imagenet-200"):
        load_dataset("tinyimagenet", root=tmp_path, download=True)  # no downloader: still one clear error


def test_download_failure_becomes_dataset_not_found(tmp_path, monkeypatch):
    import torchvision.datasets as tvd

    class Offline:
        def __init__(self, *a, **k):
            raise urllib.error.URLError("no network")

    monkeypatch.setattr(tvd, "CIFAR10", Offline)
    with pytest.raises(DatasetNotFoundError) as e:
        load_dataset("cifar10", root=tmp_path / "new", download=True)
    assert "download failed" in str(e.value) and "no network" in str(e.value)
    assert "cifar-10-python.tar.gz" in str(e.value)


def test_unknown_name_lists_valid(tmp_path):
    with pytest.raises(ValueError) as e:
        load_dataset("mnist-ish", root=tmp_path)
    assert all(n in str(e.value) for n in DATASETS)
    with pytest.raises(ValueError, match="normalize"):
        load_dataset("synthetic", normalize="imagenet")


# ---------------------------------------------------------------------------------------------- augmentation

def test_flip_flips_exactly_the_chosen_samples():
    x = torch.randn(64, 3, 8, 8)
    out = augment_batch(x, "flip", torch.Generator().manual_seed(7))
    chosen = torch.rand(64, generator=torch.Generator().manual_seed(7)) < 0.5
    assert 0 < chosen.sum() < 64
    assert torch.equal(out[chosen], x[chosen].flip(-1))
    assert torch.equal(out[~chosen], x[~chosen])
    assert torch.equal(out, augment_batch(x, "flip", torch.Generator().manual_seed(7)))
    assert not torch.equal(out, augment_batch(x, "flip", torch.Generator().manual_seed(8)))
    assert augment_batch(x, "none", None) is x


def test_crop_flip_matches_per_sample_reference():
    x = torch.randn(16, 3, 32, 32)
    out = augment_batch(x, "crop_flip", torch.Generator().manual_seed(3))
    assert out.shape == x.shape
    g = torch.Generator().manual_seed(3)
    dy, dx = torch.randint(0, 9, (16,), generator=g), torch.randint(0, 9, (16,), generator=g)
    flip = torch.rand(16, generator=g) < 0.5
    padded = torch.nn.functional.pad(x, (4, 4, 4, 4))
    for b in range(16):
        ref = padded[b, :, dy[b]:dy[b] + 32, dx[b]:dx[b] + 32]
        assert torch.equal(out[b], ref.flip(-1) if flip[b] else ref)
    # a non-zero fill shows in the padded border
    filled = augment_batch(x, "crop_flip", torch.Generator().manual_seed(3), fill=torch.tensor([-5.0, -6.0, -7.0]))
    b = int(torch.nonzero(dy > 4)[0])  # shifted down: the last rows are padding
    assert torch.all(filled[b, :, -1, :] == torch.tensor([-5.0, -6.0, -7.0])[:, None])
    with pytest.raises(ValueError, match="crop_flip"):
        augment_batch(x, "rotate", None)


# ------------------------------------------------------------------------------------------------ synthetic

def test_synthetic_deterministic_and_learnable():
    a = load_dataset("synthetic", n_train=2000, n_test=500, seed=1)
    b = synthetic(n_train=2000, n_test=500, seed=1)
    c = synthetic(n_train=2000, n_test=500, seed=2)
    assert torch.equal(a.x_train, b.x_train) and torch.equal(a.y_test, b.y_test)
    assert not torch.equal(a.x_train, c.x_train)
    assert a.x_train.dtype == torch.float32 and a.in_shape == (3, 32, 32) and a.num_classes == 10
    assert a.y_train.bincount().tolist() == [200] * 10 and a.source.startswith("synthetic")
    # class means differ, and a nearest-class-mean classifier fit on train generalizes to test
    means = torch.stack([a.x_train[a.y_train == k].mean(0) for k in range(10)]).flatten(1)
    assert torch.cdist(means, means).fill_diagonal_(float("inf")).min() > 5.0
    pred = torch.cdist(a.x_test.flatten(1), means).argmin(1)
    assert (pred == a.y_test).float().mean() > 0.95
    small = synthetic(n_train=13, n_test=0, shape=(1, 28, 28), num_classes=4)
    assert small.x_train.shape == (13, 1, 28, 28) and small.x_test.shape == (0, 1, 28, 28)


def test_subset_and_to():
    d = synthetic(n_train=1000, n_test=300, seed=0)
    s = d.subset(100, 50, seed=0)
    assert s.x_train.shape[0] == 100 and s.x_test.shape[0] == 50
    assert s.y_train.bincount(minlength=10).tolist() == [10] * 10
    s2 = d.subset(100, 50, seed=0)
    assert torch.equal(s.x_train, s2.x_train) and torch.equal(s.y_test, s2.y_test)
    assert not torch.equal(s.x_train, d.subset(100, 50, seed=1).x_train)
    assert d.subset(None, None, 0).x_train is d.x_train and d.subset(5000, 10**6, 0).x_test is d.x_test
    moved = d.to("cpu")
    assert moved.device.type == "cpu" and moved.in_shape == d.in_shape


# ------------------------------------------------------------------------------- damaged files, failed downloads

def _fmnist_folder(folder):
    folder.mkdir(parents=True, exist_ok=True)
    _write_idx(folder / "train-images-idx3-ubyte.gz", _images(12, (28, 28), 5), gz=True)
    _write_idx(folder / "train-labels-idx1-ubyte.gz", np.arange(12) % 10, gz=True)
    _write_idx(folder / "t10k-images-idx3-ubyte.gz", _images(4, (28, 28), 6), gz=True)
    _write_idx(folder / "t10k-labels-idx1-ubyte.gz", np.arange(4), gz=True)
    return folder / "train-images-idx3-ubyte.gz"


def _truncate(b):
    return b[: len(b) // 2]


def _flip(b):
    i = len(b) // 2
    return b[:i] + bytes([b[i] ^ 0xFF]) + b[i + 1:]


def _html(b):
    return b"<!DOCTYPE html><html><body>404 Not Found</body></html>\n"


def _bad_header(b):
    return gzip.compress(b"\x08\x03\x00\x00" + gzip.decompress(b)[4:])


def _short_payload(b):
    return gzip.compress(_truncate(gzip.decompress(b)))


@pytest.mark.parametrize("damage,words", [(_truncate, "cannot be decompressed"), (_flip, "cannot be decompressed"),
                                          (_html, "HTML page"), (_bad_header, "not a uint8 idx"),
                                          (_short_payload, "truncated")])
def test_damaged_fmnist_file_names_the_file_and_the_fix(tmp_path, monkeypatch, damage, words):
    monkeypatch.setattr(loaders, "DEBIAN_FMNIST_DIRS", ())
    path = _fmnist_folder(tmp_path / "fashion-mnist")
    path.write_bytes(damage(path.read_bytes()))
    with pytest.raises(data.CorruptDataError) as e:
        load_dataset("fmnist", root=tmp_path, download=False)
    msg = str(e.value)
    assert str(path) in msg and words in msg and "delete it" in msg
    assert isinstance(e.value, ValueError)


def test_damaged_cifar_and_svhn_files_name_the_file(tmp_path):
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    for fn in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        (folder / fn).write_bytes(b"<html>Service unavailable</html>")
    with pytest.raises(data.CorruptDataError, match=r"data_batch_1.*HTML page"):
        load_dataset("cifar10", root=tmp_path, download=False)
    for split in ("train", "test"):
        (tmp_path / f"{split}_32x32.mat").write_bytes(b"MATLAB 5.0 MAT-file, truncated")
    with pytest.raises(data.CorruptDataError, match=r"train_32x32\.mat.*delete it"):
        load_dataset("svhn", root=tmp_path, download=False)


def _offline_fmnist(monkeypatch):
    import os

    import torchvision.datasets as tvd

    class Offline:  # what torchvision does: create its raw folder, then fail to fetch
        def __init__(self, root, *a, **k):
            os.makedirs(os.path.join(root, "FashionMNIST", "raw"), exist_ok=True)
            raise urllib.error.URLError("no network")

    monkeypatch.setattr(loaders, "DEBIAN_FMNIST_DIRS", ())
    monkeypatch.setattr(tvd, "FashionMNIST", Offline)


def test_failed_download_leaves_no_empty_data_folder(tmp_path, monkeypatch):
    _offline_fmnist(monkeypatch)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(DatasetNotFoundError, match="no network"):
        load_dataset("fmnist")  # the default root, ./data
    assert list(tmp_path.iterdir()) == []
    with pytest.raises(DatasetNotFoundError):
        load_dataset("fmnist", root=tmp_path / "a" / "b")
    assert list(tmp_path.iterdir()) == []


def test_failed_download_keeps_what_was_there(tmp_path, monkeypatch):
    _offline_fmnist(monkeypatch)
    (tmp_path / "data" / "mine").mkdir(parents=True)
    (tmp_path / "data" / "notes.txt").write_text("keep")
    with pytest.raises(DatasetNotFoundError):
        load_dataset("fmnist", root=tmp_path / "data")
    assert sorted(p.name for p in (tmp_path / "data").iterdir()) == ["mine", "notes.txt"]
