"""Datasets as tensors, loaded once, plus batched on-device augmentation.

Every dataset is read from its *real* on-disk format straight into uint8 numpy arrays and converted once to
normalized float32 tensors ``(N, C, H, W)``; there is no ``Dataset``/``DataLoader`` and no PIL in the training
path. Batches are index lookups into these tensors (see :mod:`fedlib.engine`) and augmentation is a batched
tensor op (:func:`augment_batch`).

Where the files are looked for, in order (:func:`load_dataset`):

1. the data root: the ``root`` argument, else the ``FEDLIB_DATA`` environment variable, else ``./data``;
2. for Fashion-MNIST only, Debian's ``dataset-fashion-mnist`` package (``/usr/share/datasets/fashion-mnist``);
3. torchvision's downloader, into the data root (``download=True``; Tiny ImageNet has none);
4. otherwise one :class:`DatasetNotFoundError` naming every place tried and how to get the files.

A failed download removes the folders it created (no empty ``./data`` is left behind). A file that exists but cannot
be parsed (truncated, bit-flipped, an HTML error page saved under the archive's name) raises
:class:`CorruptDataError` naming the file and the fix.

Formats (all parsed here; torchvision's dataset classes are only used to download, because they refuse any file
whose md5 differs from the official archive's):

* Fashion-MNIST: idx files (``train-images-idx3-ubyte[.gz]`` ...), gzip + ``np.frombuffer``.
* CIFAR-10 / CIFAR-100: the python pickle batches in ``<root>/cifar-10-batches-py/`` (``data_batch_1..5``,
  ``test_batch``, ``batches.meta``) and ``<root>/cifar-100-python/`` (``train``, ``test``, ``meta``; fine labels).
  Pickles can execute code when loaded: only point the loader at files you trust.
* SVHN: ``<root>/train_32x32.mat`` and ``test_32x32.mat`` (``X``: (32, 32, 3, N) uint8, ``y``: (N, 1) with 10
  meaning digit 0, mapped to label 0 as torchvision does).
* Tiny ImageNet: ``<root>/tiny-imagenet-200/`` (``wnids.txt`` gives the class order, ``train/<wnid>/images/*.JPEG``,
  ``val/images/*.JPEG`` labelled by ``val/val_annotations.txt``; the labelled val split is the test split since the
  official test split has no labels). Decoded with PIL, converted to RGB (a few images are grayscale).

Loaded datasets are cached in-process as CPU tensors keyed by ``(name, root, normalize)``; ``load_dataset`` then
moves them to the requested device. On the CPU the returned tensors *are* the cached ones: treat them as
read-only (every fedlib op that changes data returns a new tensor).
"""

from __future__ import annotations

import dataclasses
import gzip
import os
import pickle
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import Tensor

__all__ = [
    "DATASETS", "NORMALIZATION", "DEFAULT_AUGMENT", "AUGMENTATIONS", "FedDataset", "DatasetNotFoundError",
    "CorruptDataError", "load_dataset", "augment_batch", "synthetic", "clear_cache", "data_root",
]

DATASETS = ("fmnist", "cifar10", "cifar100", "svhn", "tinyimagenet", "synthetic")
_ALIASES = {"fashion-mnist": "fmnist", "fashionmnist": "fmnist", "fashion_mnist": "fmnist",
            "cifar-10": "cifar10", "cifar-100": "cifar100", "tiny-imagenet": "tinyimagenet",
            "tiny_imagenet": "tinyimagenet", "tiny-imagenet-200": "tinyimagenet"}

# Per-channel (mean, std) of Normalize() under normalize="paper", applied to pixels scaled to [0, 1].
#   fmnist, svhn:  FedIntR's code uses transforms.Normalize((0.5,), (0.5,)) for every dataset it trains
#                  (FedIntR §IV-A / reference notes); values land in [-1, 1].
#   cifar10:       MOON's / NIID-Bench's CIFAR-10 statistics, also used by FedCKA (which builds on MOON's code).
#   cifar100:      the standard CIFAR-100 training-set statistics (MOON's CIFAR-100 transform).
#   tinyimagenet:  the ImageNet statistics (MOON / torchvision convention for Tiny ImageNet).
#   synthetic:     generated already standardized; no normalization.
# normalize="none" only scales to [0, 1].
NORMALIZATION: dict[str, tuple[tuple[float, ...], tuple[float, ...]]] = {
    "fmnist": ((0.5,), (0.5,)),
    "svhn": ((0.5, 0.5, 0.5), (0.5, 0.5, 0.5)),
    "cifar10": ((0.4914, 0.4822, 0.4465), (0.2470, 0.2435, 0.2616)),
    "cifar100": ((0.5071, 0.4865, 0.4409), (0.2673, 0.2564, 0.2762)),
    "tinyimagenet": ((0.485, 0.456, 0.406), (0.229, 0.224, 0.225)),
}
NORMALIZE_MODES = ("paper", "none")

# The augmentation the papers train each dataset with. FedIntR §IV-A: "random horizontal flip ... except for
# the SVHN dataset". FedCKA trains without augmentation: its preset overrides this with augment="none".
# "crop_flip" (MOON-style RandomCrop(32, padding=4) + flip) is available but no dataset defaults to it.
DEFAULT_AUGMENT = {"fmnist": "flip", "svhn": "none", "cifar10": "flip", "cifar100": "flip",
                   "tinyimagenet": "flip", "synthetic": "none"}
# "crop_flip_cutout" (FedER thesis §4.2, "CIFAR100 with cutout"): crop_flip, then one square hole of side
# CUTOUT (DeVries & Taylor 2017's CIFAR-100 setting) centred anywhere in the image, clipped at the borders, set to 0.
AUGMENTATIONS = ("none", "flip", "crop_flip", "crop_flip_cutout")
CUTOUT = 8

# Debian's `dataset-fashion-mnist` package installs the four idx .gz files here.
DEBIAN_FMNIST_DIRS: tuple[Path, ...] = (Path("/usr/share/datasets/fashion-mnist"),)

_FMNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                   "Ankle boot")


class DatasetNotFoundError(FileNotFoundError):
    """The dataset's files were found nowhere; the message says where fedlib looked and how to get them."""


class CorruptDataError(ValueError):
    """A dataset file exists but cannot be parsed; the message names the file and how to replace it."""


def _corrupt(path: Path, problem: str, cause: BaseException | None = None) -> CorruptDataError:
    try:
        with open(path, "rb") as f:
            head = f.read(256).lstrip().lower()
    except OSError:
        head = b""
    why = (" It is an HTML page, not the data: a download that saved an error or login page."
           if head.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head")) else "")
    detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
    return CorruptDataError(f"{path}: {problem}{detail}.{why} The file is damaged or incomplete: delete it and get "
                            f"it again (load_dataset(..., download=True) fetches missing files; see the "
                            f"dataset's instructions in help(fedlib.data)).")


# ------------------------------------------------------------------------------------------------ FedDataset

@dataclass
class FedDataset:
    """A whole dataset as tensors: normalized float32 images ``(N, C, H, W)`` and int64 labels."""

    name: str
    x_train: Tensor
    y_train: Tensor
    x_test: Tensor
    y_test: Tensor
    num_classes: int
    augment: str
    source: str
    classes: tuple[str, ...] = ()
    norm: tuple[tuple[float, ...], tuple[float, ...]] | None = None  # (mean, std) applied after /255, if any

    @property
    def pad_fill(self) -> Tensor:
        """Per-channel value of a black pixel after normalization: ``fill`` for ``augment_batch`` crop padding."""
        c = self.in_shape[0]
        if self.norm is None:
            return torch.zeros(c, device=self.device)
        m, s = (torch.tensor(v, dtype=torch.float32).expand(c) for v in self.norm)
        return ((0.0 - m) / s).to(self.device)

    @property
    def in_shape(self) -> tuple[int, int, int]:
        return tuple(int(s) for s in self.x_train.shape[1:])  # type: ignore[return-value]

    @property
    def device(self) -> torch.device:
        return self.x_train.device

    def to(self, device: str | torch.device) -> "FedDataset":
        """The same dataset on ``device`` (no copy when it is already there)."""
        device = torch.device(device)
        return dataclasses.replace(self, x_train=self.x_train.to(device), y_train=self.y_train.to(device),
                                   x_test=self.x_test.to(device), y_test=self.y_test.to(device))

    def subset(self, n_train: int | None, n_test: int | None, seed: int = 0) -> "FedDataset":
        """A fixed, class-stratified subset: ``n_train`` / ``n_test`` samples (None or ≥ N: the whole split).

        Each class keeps a share proportional to its frequency (largest remainders decided by a seeded
        shuffle); the kept samples stay in their original order. Pure function of ``(labels, n, seed)``.
        """
        tr = _stratified_subset(self.y_train.cpu().numpy(), n_train, seed)
        te = _stratified_subset(self.y_test.cpu().numpy(), n_test, seed + 1)
        out = self
        if tr is not None:
            ix = torch.as_tensor(tr, device=self.device)
            out = dataclasses.replace(out, x_train=out.x_train[ix], y_train=out.y_train[ix])
        if te is not None:
            ix = torch.as_tensor(te, device=self.device)
            out = dataclasses.replace(out, x_test=out.x_test[ix], y_test=out.y_test[ix])
        return out

    def __repr__(self) -> str:
        return (f"FedDataset({self.name!r}, train={tuple(self.x_train.shape)}, test={tuple(self.x_test.shape)}, "
                f"classes={self.num_classes}, augment={self.augment!r}, device={self.device}, "
                f"source={self.source!r})")


def _stratified_subset(labels: np.ndarray, n: int | None, seed: int) -> np.ndarray | None:
    N = len(labels)
    if n is None or n >= N:
        return None
    if n < 0:
        raise ValueError(f"subset size must be >= 0, got {n}.")
    rng = np.random.default_rng(seed)
    perm = rng.permutation(N)
    lab = labels[perm]
    # rank of each sample within its class, in the shuffled order
    order = np.argsort(lab, kind="stable")
    counts = np.bincount(lab)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    rank = np.empty(N, dtype=np.int64)
    rank[order] = np.arange(N) - starts[lab[order]]
    # taking the n smallest (rank + 0.5) / class_count is a proportional allocation per class
    key = (rank + 0.5) / counts[lab]
    keep = np.argsort(key, kind="stable")[:n]
    return np.sort(perm[keep])


# --------------------------------------------------------------------------------------------- loading

_CACHE: dict[tuple, FedDataset] = {}


def clear_cache() -> None:
    """Forget every dataset loaded in this process."""
    _CACHE.clear()


def data_root(root: str | Path | None = None) -> Path:
    """The data root: ``root``, else ``$FEDLIB_DATA``, else ``./data``."""
    if root is None:
        root = os.environ.get("FEDLIB_DATA") or "data"
    return Path(root).expanduser()


def load_dataset(name: str, root: str | Path | None = None, device: str | torch.device = "cpu", *,
                 download: bool = True, normalize: str = "paper", **synthetic_kw: Any) -> FedDataset:
    """Load dataset ``name`` (one of :data:`DATASETS`) as normalized tensors on ``device``.

    ``normalize``: ``"paper"`` (the table :data:`NORMALIZATION`) or ``"none"`` (pixels / 255).
    ``synthetic_kw`` only for ``name="synthetic"`` (see :func:`synthetic`).
    Raises :class:`DatasetNotFoundError` when the files are nowhere, ``ValueError`` for an unknown name.
    """
    key_name = _ALIASES.get(str(name).lower(), str(name).lower())
    if key_name not in DATASETS:
        raise ValueError(f"Unknown dataset {name!r}; valid names: {', '.join(DATASETS)}.")
    if normalize not in NORMALIZE_MODES:
        raise ValueError(f"Unknown normalize={normalize!r}; valid: {NORMALIZE_MODES}.")
    if key_name == "synthetic":
        key = ("synthetic", tuple(sorted((k, repr(v)) for k, v in synthetic_kw.items())))
        if key not in _CACHE:
            _CACHE[key] = synthetic(**synthetic_kw)
        return _CACHE[key].to(device)
    if synthetic_kw:
        raise TypeError(f"load_dataset({key_name!r}) got unexpected options {sorted(synthetic_kw)} "
                        f"(only 'synthetic' takes options).")
    base = data_root(root)
    key = (key_name, str(base.resolve()), normalize)
    if key not in _CACHE:
        raw = _LOADERS[key_name](base, download)
        _CACHE[key] = _to_dataset(key_name, raw, normalize)
    return _CACHE[key].to(device)


@dataclass
class _Raw:
    x_train: np.ndarray  # uint8 (N, C, H, W)
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    source: str
    classes: tuple[str, ...] = ()


def _to_float(x: np.ndarray, mean: tuple[float, ...] | None, std: tuple[float, ...] | None) -> Tensor:
    if not x.flags.writeable:  # np.frombuffer views of file bytes; .to() copies anyway, but torch warns
        x = x.copy()
    t = torch.from_numpy(np.ascontiguousarray(x)).to(torch.float32).div_(255.0)
    if mean is not None:
        c = t.shape[1]
        m = torch.tensor(mean, dtype=torch.float32).expand(c) if len(mean) == 1 else torch.tensor(mean)
        s = torch.tensor(std, dtype=torch.float32).expand(c) if len(std) == 1 else torch.tensor(std)
        t.sub_(m.view(1, c, 1, 1)).div_(s.view(1, c, 1, 1))
    return t


def _to_dataset(name: str, raw: _Raw, normalize: str) -> FedDataset:
    mean, std = NORMALIZATION[name] if normalize == "paper" else (None, None)
    for split, (x, y) in {"train": (raw.x_train, raw.y_train), "test": (raw.x_test, raw.y_test)}.items():
        if x.ndim != 4 or x.dtype != np.uint8 or len(x) != len(y):
            raise ValueError(f"{name}: malformed {split} split in {raw.source}: images {x.shape} {x.dtype}, "
                             f"labels {y.shape}; the files may be corrupt — delete and re-download them.")
        if len(y) and (y.min() < 0 or y.max() >= raw.num_classes):
            raise ValueError(f"{name}: {split} labels outside [0, {raw.num_classes}) in {raw.source}.")
    return FedDataset(
        name=name,
        x_train=_to_float(raw.x_train, mean, std), y_train=torch.from_numpy(raw.y_train.astype(np.int64)),
        x_test=_to_float(raw.x_test, mean, std), y_test=torch.from_numpy(raw.y_test.astype(np.int64)),
        num_classes=raw.num_classes, augment=DEFAULT_AUGMENT[name], source=raw.source, classes=raw.classes,
        norm=None if mean is None else (tuple(mean), tuple(std)))


def _not_found(name: str, tried: list[str], how: str, cause: BaseException | None = None) -> DatasetNotFoundError:
    msg = (f"Dataset {name!r} not found. Looked in:\n  - " + "\n  - ".join(tried) + f"\nHow to get it: {how}\n"
           f"Then pass root=<folder>, set FEDLIB_DATA=<folder>, or place it under ./data.")
    if cause is not None:
        msg += f"\n(download failed: {type(cause).__name__}: {cause})"
    return DatasetNotFoundError(msg)


def _folders(root: Path, depth: int = 3) -> set[Path]:
    """``root`` and its sub-folders down to ``depth`` levels (symlinks not followed)."""
    out: set[Path] = set()
    level = [root] if root.is_dir() else []
    for _ in range(depth + 1):
        out.update(level)
        level = [c for d in level for c in d.iterdir() if c.is_dir() and not c.is_symlink()]
    return out


def _try_download(fn: Callable[[], None], name: str, tried: list[str], how: str, root: Path) -> None:
    """Run the downloader ``fn``; on failure remove the empty folders it created (``root`` included) and raise
    :class:`DatasetNotFoundError`."""
    missing = {p for p in (root, *root.parents) if not p.exists()}
    before = _folders(root)
    try:
        fn()
    except Exception as e:  # network, DNS, checksum, disk: all mean "files not available"
        for d in sorted((_folders(root) - before) | missing, key=lambda p: len(p.parts), reverse=True):
            try:
                d.rmdir()  # only empty folders go; partial downloads are kept (torchvision checks their md5)
            except OSError:
                pass
        raise _not_found(name, tried, how, e) from e


# ----- Fashion-MNIST

_IDX_FILES = {"x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
              "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte"}


def _read_idx(path: Path) -> np.ndarray:
    """Parse an idx file (optionally gzipped): magic 0,0,dtype,ndim then ndim big-endian int32 sizes."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as f:
            buf = f.read()
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise _corrupt(path, "cannot be decompressed", e) from e
    if len(buf) < 4 or buf[0] != 0 or buf[1] != 0 or buf[2] != 0x08:
        raise _corrupt(path, "is not a uint8 idx file (wrong magic number)")
    ndim = buf[3]
    if len(buf) < 4 + 4 * ndim:
        raise _corrupt(path, "ends inside its idx header")
    dims = np.frombuffer(buf, dtype=">i4", count=ndim, offset=4).astype(np.int64)
    data = np.frombuffer(buf, dtype=np.uint8, offset=4 + 4 * ndim)
    if data.size != int(np.prod(dims)):
        raise _corrupt(path, f"the idx header says {tuple(dims)} but the file holds {data.size} values (truncated?)")
    return data.reshape(tuple(dims))


def _find_idx(folder: Path) -> dict[str, Path] | None:
    found = {}
    for key, stem in _IDX_FILES.items():
        for cand in (folder / stem, folder / f"{stem}.gz"):
            if cand.is_file():
                found[key] = cand
                break
        else:
            return None
    return found


def _load_fmnist(root: Path, download: bool) -> _Raw:
    folders = [root, root / "fashion-mnist", root / "FashionMNIST" / "raw", *DEBIAN_FMNIST_DIRS]
    tried = [f"{f}/{{train,t10k}}-{{images-idx3,labels-idx1}}-ubyte[.gz]" for f in folders]
    how = ("on Debian/Ubuntu `apt-get install dataset-fashion-mnist` (installs /usr/share/datasets/fashion-mnist), "
           "or download the four *-ubyte.gz files from https://github.com/zalandoresearch/fashion-mnist into "
           f"{root}/fashion-mnist/, or call load_dataset('fmnist', download=True) with internet access.")
    files = next((f for f in map(_find_idx, folders) if f is not None), None)
    if files is None and download:
        def dl() -> None:
            from torchvision.datasets import FashionMNIST
            root.mkdir(parents=True, exist_ok=True)
            FashionMNIST(str(root), train=True, download=True)
            FashionMNIST(str(root), train=False, download=True)
        tried.append(f"torchvision download into {root}/FashionMNIST/raw")
        _try_download(dl, "fmnist", tried, how, root)
        files = _find_idx(root / "FashionMNIST" / "raw")
    if files is None:
        raise _not_found("fmnist", tried, how)
    arr = {k: _read_idx(p) for k, p in files.items()}
    return _Raw(x_train=arr["x_train"][:, None], y_train=arr["y_train"], x_test=arr["x_test"][:, None],
                y_test=arr["y_test"], num_classes=10, source=str(files["x_train"].parent), classes=_FMNIST_CLASSES)


# ----- CIFAR-10 / CIFAR-100

_CIFAR = {
    "cifar10": dict(folder="cifar-10-batches-py", train=[f"data_batch_{i}" for i in range(1, 6)],
                    test=["test_batch"], meta="batches.meta", label_key="labels", names_key="label_names",
                    num_classes=10, tv="CIFAR10", url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"),
    "cifar100": dict(folder="cifar-100-python", train=["train"], test=["test"], meta="meta",
                     label_key="fine_labels", names_key="fine_label_names", num_classes=100, tv="CIFAR100",
                     url="https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"),
}


def _unpickle(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            d = pickle.load(f, encoding="latin1")
    except (PermissionError, FileNotFoundError, IsADirectoryError, MemoryError):
        raise
    except Exception as e:  # garbage makes pickle raise almost anything
        raise _corrupt(path, "is not a readable CIFAR pickle", e) from e
    if not isinstance(d, dict):
        raise _corrupt(path, f"holds a {type(d).__name__}, not a CIFAR batch dict")
    return {(k.decode() if isinstance(k, bytes) else k): v for k, v in d.items()}


def _read_cifar_batches(folder: Path, files: list[str], label_key: str) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for fn in files:
        d = _unpickle(folder / fn)
        try:
            data = np.asarray(d["data"], dtype=np.uint8)
            xs.append(data.reshape(-1, 3, 32, 32))  # rows are 1024 R, 1024 G, 1024 B values, row-major 32×32
            ys.append(np.asarray(d[label_key], dtype=np.int64))
        except (KeyError, ValueError, TypeError) as e:
            raise _corrupt(folder / fn, "is not a CIFAR batch (no 'data' / labels of the expected shape)", e) from e
    return np.concatenate(xs), np.concatenate(ys)


def _load_cifar(name: str, root: Path, download: bool) -> _Raw:
    spec = _CIFAR[name]
    folder = root / spec["folder"]
    need = spec["train"] + spec["test"]
    tried = [f"{folder}/ (needs {', '.join(need)})"]
    how = (f"download and extract {spec['url']} so that {folder}/ holds {', '.join(need)} "
           f"(the python version), or call load_dataset({name!r}, download=True) with internet access.")

    def present() -> bool:
        return all((folder / f).is_file() for f in need)

    if not present() and download:
        def dl() -> None:
            import torchvision.datasets as tvd
            root.mkdir(parents=True, exist_ok=True)
            getattr(tvd, spec["tv"])(str(root), train=True, download=True)
        tried.append(f"torchvision download into {root}")
        _try_download(dl, name, tried, how, root)
    if not present():
        raise _not_found(name, tried, how)
    x_tr, y_tr = _read_cifar_batches(folder, spec["train"], spec["label_key"])
    x_te, y_te = _read_cifar_batches(folder, spec["test"], spec["label_key"])
    classes: tuple[str, ...] = ()
    if (folder / spec["meta"]).is_file():
        classes = tuple(_unpickle(folder / spec["meta"]).get(spec["names_key"], ()))
    return _Raw(x_tr, y_tr, x_te, y_te, spec["num_classes"], str(folder), classes)


# ----- SVHN

def _read_svhn(path: Path) -> tuple[np.ndarray, np.ndarray]:
    import scipy.io
    try:
        m = scipy.io.loadmat(str(path))
        x = np.transpose(np.asarray(m["X"], dtype=np.uint8), (3, 2, 0, 1))  # (H, W, C, N) → (N, C, H, W)
        y = np.asarray(m["y"], dtype=np.int64).reshape(-1)
    except (PermissionError, FileNotFoundError, IsADirectoryError, MemoryError):
        raise
    except Exception as e:  # scipy's MatReadError, ValueError, TypeError, KeyError ...
        raise _corrupt(path, "is not a readable SVHN .mat file (format 2, with X and y)", e) from e
    y[y == 10] = 0  # SVHN stores digit 0 as label 10
    return np.ascontiguousarray(x), y


def _load_svhn(root: Path, download: bool) -> _Raw:
    paths = [root / "train_32x32.mat", root / "test_32x32.mat"]
    tried = [str(p) for p in paths]
    how = ("download http://ufldl.stanford.edu/housenumbers/train_32x32.mat and test_32x32.mat (format 2, "
           f"cropped digits) into {root}/, or call load_dataset('svhn', download=True) with internet access.")
    if not all(p.is_file() for p in paths) and download:
        def dl() -> None:
            from torchvision.datasets import SVHN
            root.mkdir(parents=True, exist_ok=True)
            for split in ("train", "test"):
                if not (root / f"{split}_32x32.mat").is_file():
                    SVHN(str(root), split=split, download=True)
        tried.append(f"torchvision download into {root}")
        _try_download(dl, "svhn", tried, how, root)
    if not all(p.is_file() for p in paths):
        raise _not_found("svhn", tried, how)
    x_tr, y_tr = _read_svhn(paths[0])
    x_te, y_te = _read_svhn(paths[1])
    return _Raw(x_tr, y_tr, x_te, y_te, 10, str(root), tuple(str(d) for d in range(10)))


# ----- Tiny ImageNet

def _decode_rgb(paths: list[Path], size: int = 64) -> np.ndarray:
    from PIL import Image

    def one(p: Path) -> np.ndarray:
        with Image.open(p) as im:
            im = im.convert("RGB")
            if im.size != (size, size):
                raise ValueError(f"{p}: expected a {size}×{size} image, got {im.size}.")
            return np.asarray(im, dtype=np.uint8)

    out = np.empty((len(paths), 3, size, size), dtype=np.uint8)
    with ThreadPoolExecutor(max_workers=max(1, min(8, os.cpu_count() or 1))) as pool:
        for i, a in enumerate(pool.map(one, paths, chunksize=256)):
            out[i] = a.transpose(2, 0, 1)
    return out


def _load_tinyimagenet(root: Path, download: bool) -> _Raw:
    folder = root / "tiny-imagenet-200"
    tried = [f"{folder}/ (needs wnids.txt, train/<wnid>/images/*.JPEG, val/images/, val/val_annotations.txt)"]
    how = (f"download http://cs231n.stanford.edu/tiny-imagenet-200.zip and unzip it into {root}/ "
           "(torchvision has no downloader for it).")
    if not ((folder / "wnids.txt").is_file() and (folder / "train").is_dir()
            and (folder / "val" / "val_annotations.txt").is_file()):
        raise _not_found("tinyimagenet", tried, how)
    wnids = [w.strip() for w in (folder / "wnids.txt").read_text().split() if w.strip()]
    cls = {w: i for i, w in enumerate(wnids)}
    tr_paths, tr_y = [], []
    for w in wnids:
        imgs = sorted((folder / "train" / w / "images").glob("*.JPEG"))
        if not imgs:
            raise ValueError(f"tinyimagenet: no training images in {folder / 'train' / w / 'images'}.")
        tr_paths += imgs
        tr_y += [cls[w]] * len(imgs)
    te_paths, te_y = [], []
    for line in (folder / "val" / "val_annotations.txt").read_text().splitlines():
        parts = line.split("\t") if "\t" in line else line.split()
        if len(parts) < 2:
            continue
        if parts[1] not in cls:
            raise ValueError(f"tinyimagenet: val_annotations.txt names {parts[1]!r}, which is not in wnids.txt.")
        te_paths.append(folder / "val" / "images" / parts[0])
        te_y.append(cls[parts[1]])
    return _Raw(_decode_rgb(tr_paths), np.asarray(tr_y, np.int64), _decode_rgb(te_paths), np.asarray(te_y, np.int64),
                len(wnids), str(folder), tuple(wnids))


_LOADERS: dict[str, Callable[[Path, bool], _Raw]] = {
    "fmnist": _load_fmnist,
    "cifar10": lambda r, d: _load_cifar("cifar10", r, d),
    "cifar100": lambda r, d: _load_cifar("cifar100", r, d),
    "svhn": _load_svhn,
    "tinyimagenet": _load_tinyimagenet,
}


# ------------------------------------------------------------------------------------------- synthetic

def synthetic(n_train: int = 50_000, n_test: int = 10_000, shape: tuple[int, int, int] = (3, 32, 32),
              num_classes: int = 10, seed: int = 0, signal: float = 0.5, noise: float = 1.0) -> FedDataset:
    """Deterministic, learnable synthetic images for timing and tests.

    Each class has a smooth mean pattern (a 4×4 Gaussian grid per channel, bilinearly upsampled, scaled to
    per-pixel std ``signal``); a sample is its class pattern plus i.i.d. uniform noise of std ``noise``
    (uniform because it is several times cheaper to draw than Gaussian noise). Labels cycle
    0, 1, …, K−1, 0, 1, … (exactly balanced; partitions and batches shuffle anyway). Train and test noise come
    from one numpy PCG64 stream seeded by ``seed``, so the data are identical across runs and platforms.
    """
    C, H, W = (int(s) for s in shape)
    if n_train < 1 or n_test < 0 or num_classes < 2:
        raise ValueError("synthetic needs n_train >= 1, n_test >= 0 and num_classes >= 2.")
    rng = np.random.default_rng(seed)
    coarse = torch.from_numpy(rng.standard_normal((num_classes, C, 4, 4)).astype(np.float32))
    means = torch.nn.functional.interpolate(coarse, size=(H, W), mode="bilinear", align_corners=False)
    means = means / means.std(dim=(1, 2, 3), keepdim=True).clamp_min(1e-6) * signal

    def draw(n: int) -> tuple[Tensor, Tensor]:
        if n == 0:
            return torch.empty(0, C, H, W), torch.empty(0, dtype=torch.int64)
        blocks = -(-n // num_classes)
        u8 = rng.integers(0, 256, size=(blocks, num_classes, C, H, W), dtype=np.uint8)
        scale = noise / 73.9  # std of the uniform distribution on {0, ..., 255} is 73.9
        # mean[class] + (u8 − 127.5)·scale, broadcast over the cyclic label layout (in place after one cast)
        x = torch.from_numpy(u8).to(torch.float32).mul_(scale).add_(means - 127.5 * scale)
        x = x.view(blocks * num_classes, C, H, W)[:n]
        y = torch.arange(n, dtype=torch.int64) % num_classes
        return x, y

    x_tr, y_tr = draw(int(n_train))
    x_te, y_te = draw(int(n_test))
    return FedDataset(name="synthetic", x_train=x_tr, y_train=y_tr, x_test=x_te, y_test=y_te,
                      num_classes=int(num_classes), augment=DEFAULT_AUGMENT["synthetic"],
                      source=f"synthetic(seed={seed}, shape={(C, H, W)}, signal={signal}, noise={noise})",
                      classes=tuple(str(k) for k in range(num_classes)))


# ---------------------------------------------------------------------------------------- augmentation

def augment_params(kind: str, n: int, generator: torch.Generator | None = None, *, pad: int = 4) -> dict[str, Tensor]:
    """Random draws for augmenting ``n`` samples, on the generator's device (CPU by default).

    Drawing them apart from the images lets the engine draw a whole client-epoch at once on the CPU, so every
    executor and every device sees the same flips and crops. Order: crop row offsets, column offsets, flip mask.
    """
    if kind not in AUGMENTATIONS:
        raise ValueError(f"Unknown augmentation {kind!r}; valid: {AUGMENTATIONS}.")
    dev = generator.device if generator is not None else torch.device("cpu")
    out: dict[str, Tensor] = {}
    if kind == "none":
        return out
    if kind in ("crop_flip", "crop_flip_cutout") and pad > 0:
        out["dy"] = torch.randint(0, 2 * pad + 1, (n,), generator=generator, device=dev)
        out["dx"] = torch.randint(0, 2 * pad + 1, (n,), generator=generator, device=dev)
    out["flip"] = torch.rand(n, generator=generator, device=dev) < 0.5
    if kind == "crop_flip_cutout":  # hole centres as fractions of the image side (any image size)
        out["cy"] = torch.rand(n, generator=generator, device=dev)
        out["cx"] = torch.rand(n, generator=generator, device=dev)
    return out


def apply_augment(x: Tensor, kind: str, params: dict[str, Tensor], *, pad: int = 4,
                  fill: float | Tensor = 0.0) -> Tensor:
    """Apply draws from :func:`augment_params` to a batch ``(B, C, H, W)``; returns a new tensor."""
    if kind == "none" or x.shape[0] == 0:
        return x
    B, C, H, W = x.shape
    dev = x.device
    if "dy" in params:
        padded = torch.nn.functional.pad(x, (pad, pad, pad, pad), value=0.0)
        if not (isinstance(fill, (int, float)) and fill == 0):
            f = torch.as_tensor(fill, dtype=x.dtype, device=dev).reshape(-1)
            f = f.view(1, -1, 1, 1).expand(1, C, 1, 1)
            inside = torch.zeros(1, 1, H + 2 * pad, W + 2 * pad, dtype=torch.bool, device=dev)
            inside[..., pad:pad + H, pad:pad + W] = True
            padded = torch.where(inside, padded, f)
        dy, dx = params["dy"].to(dev), params["dx"].to(dev)
        rows = (dy[:, None] + torch.arange(H, device=dev))[:, None, :, None]  # (B, 1, H, 1)
        cols = (dx[:, None] + torch.arange(W, device=dev))[:, None, None, :]  # (B, 1, 1, W)
        b = torch.arange(B, device=dev)[:, None, None, None]
        c = torch.arange(C, device=dev)[None, :, None, None]
        x = padded[b, c, rows, cols]
    flip = params["flip"].to(dev)
    x = torch.where(flip[:, None, None, None], x.flip(-1), x)
    if "cy" in params:
        cy = (params["cy"].to(dev) * H).long()[:, None]
        cx = (params["cx"].to(dev) * W).long()[:, None]
        r, c = torch.arange(H, device=dev)[None, :], torch.arange(W, device=dev)[None, :]
        rows = (r >= cy - CUTOUT // 2) & (r < cy + CUTOUT - CUTOUT // 2)
        cols = (c >= cx - CUTOUT // 2) & (c < cx + CUTOUT - CUTOUT // 2)
        hole = rows[:, None, :, None] & cols[:, None, None, :]
        x = x.masked_fill(hole, 0.0)
    return x


def augment_batch(x: Tensor, kind: str, generator: torch.Generator | None = None, *, pad: int = 4,
                  fill: float | Tensor = 0.0) -> Tensor:
    """Augment a batch ``(B, C, H, W)`` on its own device; returns a new tensor (``x`` is not modified).

    * ``"none"``: ``x`` itself.
    * ``"flip"``: each sample is flipped left-right with probability 1/2 (one Bernoulli draw per sample).
    * ``"crop_flip"``: MOON-style ``RandomCrop(H×W, padding=pad)`` then the flip: the batch is padded by ``pad``
      pixels of ``fill`` (default 0, i.e. zero in the normalized space; pass the per-channel normalized value of
      black, ``(0 − mean) / std`` = ``FedDataset.pad_fill``, to match torchvision's ``fill=0`` on raw pixels) and
      each sample gets its own uniformly drawn offset in ``[0, 2·pad]²``, gathered with one advanced-indexing op.

    Random draws come from ``generator`` (which must live on ``x.device``) via :func:`augment_params`.
    """
    if kind not in AUGMENTATIONS:
        raise ValueError(f"Unknown augmentation {kind!r}; valid: {AUGMENTATIONS}.")
    if kind == "none" or x.shape[0] == 0:
        return x
    params = augment_params(kind, x.shape[0], generator, pad=pad)
    return apply_augment(x, kind, params, pad=pad, fill=fill)
