"""Datasets as tensors, loaded once; augmentation (:mod:`fedlib.augment`) and file readers
(:mod:`fedlib.loaders`).

Every dataset is read from its *real* on-disk format straight into uint8 numpy arrays and converted
once to normalized float32 tensors ``(N, C, H, W)``; there is no ``Dataset``/``DataLoader`` and no
PIL in the training path. Batches are index lookups into these tensors (see :mod:`fedlib.engine`)
and augmentation is a batched tensor op (:func:`augment_batch`).

Where the files are looked for, in order (:func:`load_dataset`):

1. the data root: the ``root`` argument, else the ``FEDLIB_DATA`` environment variable, else
   ``./data``;
2. for Fashion-MNIST only, Debian's ``dataset-fashion-mnist`` package
   (``/usr/share/datasets/fashion-mnist``, ``fedlib.loaders.DEBIAN_FMNIST_DIRS``);
3. torchvision's downloader, into the data root (``download=True``; Tiny ImageNet has none);
4. otherwise one :class:`DatasetNotFoundError` naming every place tried and how to get the files.

A failed download removes the folders it created (no empty ``./data`` is left behind). A file that
exists but cannot be parsed (truncated, bit-flipped, an HTML error page saved under the archive's
name) raises :class:`CorruptDataError` naming the file and the fix.

Formats (parsed by :mod:`fedlib.loaders`; torchvision's dataset classes are only used to download,
because they refuse any file whose md5 differs from the official archive's):

* Fashion-MNIST: idx files (``train-images-idx3-ubyte[.gz]`` ...), gzip + ``np.frombuffer``.
* CIFAR-10 / CIFAR-100: the python pickle batches in ``<root>/cifar-10-batches-py/``
  (``data_batch_1..5``, ``test_batch``, ``batches.meta``) and ``<root>/cifar-100-python/``
  (``train``, ``test``, ``meta``; fine labels). Pickles can execute code when loaded: only point the
  loader at files you trust.
* SVHN: ``<root>/train_32x32.mat`` and ``test_32x32.mat`` (``X``: (32, 32, 3, N) uint8, ``y``: (N,
  1) with 10 meaning digit 0, mapped to label 0 as torchvision does).
* Tiny ImageNet: ``<root>/tiny-imagenet-200/`` (``wnids.txt`` gives the class order,
  ``train/<wnid>/images/*.JPEG``, ``val/images/*.JPEG`` labelled by ``val/val_annotations.txt``; the
  labelled val split is the test split since the official test split has no labels). Decoded with
  PIL, converted to RGB (a few images are grayscale).

Loaded datasets are cached in-process as CPU tensors keyed by ``(name, root, normalize)``;
``load_dataset`` then moves them to the requested device. On the CPU the returned tensors *are* the
cached ones: treat them as read-only (every fedlib op that changes data returns a new tensor).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

# Re-exported: augmentation (fedlib.augment) and the file readers' errors (fedlib.loaders) are part
# of this API.
from fedlib.augment import (AUGMENTATIONS, CUTOUT, DEFAULT_AUGMENT, apply_augment, augment_batch,
                            augment_params)
from fedlib.loaders import (CIFAR_FILES, LOADERS, CorruptDataError, DatasetNotFoundError, Raw,
                            find_fmnist)

__all__ = [
    "DATASETS",
    "NORMALIZATION",
    "DEFAULT_AUGMENT",
    "AUGMENTATIONS",
    "FedDataset",
    "DatasetNotFoundError",
    "CorruptDataError",
    "load_dataset",
    "augment_batch",
    "augment_params",
    "apply_augment",
    "CUTOUT",
    "synthetic",
    "clear_cache",
    "data_root",
    "dataset_missing",
]

DATASETS = ("fmnist", "cifar10", "cifar100", "svhn", "tinyimagenet", "synthetic")
_ALIASES = {"fashion-mnist": "fmnist", "fashionmnist": "fmnist", "fashion_mnist": "fmnist",
            "cifar-10": "cifar10", "cifar-100": "cifar100", "tiny-imagenet": "tinyimagenet",
            "tiny_imagenet": "tinyimagenet", "tiny-imagenet-200": "tinyimagenet"}

# Per-channel (mean, std) of Normalize() under normalize="paper", applied to pixels scaled to
# [0, 1].
#   fmnist, svhn:  FedIntR's code uses transforms.Normalize((0.5,), (0.5,)) for every dataset it
#                  trains (FedIntR §IV-A / reference notes); values land in [-1, 1].
#   cifar10:       MOON's / NIID-Bench's CIFAR-10 statistics, also used by FedCKA (which builds on
#                  MOON's code).
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

# --------------------------------------------------------------------------------------- FedDataset

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
    # (mean, std) applied after /255, if any
    norm: tuple[tuple[float, ...], tuple[float, ...]] | None = None

    @property
    def pad_fill(self) -> Tensor:
        """Per-channel value of a black pixel after normalization: ``fill`` for ``augment_batch``
        crop padding."""
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
        return dataclasses.replace(self, x_train=self.x_train.to(device),
                                   y_train=self.y_train.to(device), x_test=self.x_test.to(device),
                                   y_test=self.y_test.to(device))

    def subset(self, n_train: int | None, n_test: int | None, seed: int = 0) -> "FedDataset":
        """A fixed, class-stratified subset: ``n_train`` / ``n_test`` samples (None or ≥ N: the
        whole split).

        Each class keeps a share proportional to its frequency (largest remainders decided by a
        seeded shuffle); the kept samples stay in their original order. Pure function of ``(labels,
        n, seed)``.
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
        return (f"FedDataset({self.name!r}, train={tuple(self.x_train.shape)}, "
                f"test={tuple(self.x_test.shape)}, classes={self.num_classes}, "
                f"augment={self.augment!r}, device={self.device}, source={self.source!r})")


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


# ------------------------------------------------------------------------------------------ loading

_CACHE: dict[tuple, FedDataset] = {}


def clear_cache() -> None:
    """Forget every dataset loaded in this process."""
    _CACHE.clear()


# Classes of each dataset: what chance accuracy is (synthetic data: its default)
CLASSES = {
    "fmnist": 10, "cifar10": 10, "cifar100": 100, "svhn": 10, "tinyimagenet": 200, "synthetic": 10
}


def chance(dataset: str) -> float:
    """Chance accuracy (%) of a classifier of ``dataset``'s classes: 100 / classes."""
    return 100.0 / CLASSES[canonical_name(dataset)]


def canonical_name(name: str) -> str:
    """A dataset's key for any of its accepted spellings (``"Fashion-MNIST"`` -> ``"fmnist"``)."""
    return _ALIASES.get(str(name).lower(), str(name).lower())


def data_root(root: str | Path | None = None) -> Path:
    """The data root: ``root``, else ``$FEDLIB_DATA``, else ``./data``."""
    if root is None:
        root = os.environ.get("FEDLIB_DATA") or "data"
    return Path(root).expanduser()


def dataset_missing(name: str) -> str | None:
    """Why ``name``'s files are not on this machine (None when they are); looks where
    ``load_dataset`` looks."""
    root = data_root()
    if name == "synthetic":
        return None
    if name == "fmnist":
        ok = find_fmnist(root) is not None
    elif name in CIFAR_FILES:
        spec = CIFAR_FILES[name]
        ok = all((root / spec["folder"] / f).is_file() for f in spec["train"] + spec["test"])
    elif name == "svhn":
        ok = all((root / f"{s}_32x32.mat").is_file() for s in ("train", "test"))
    elif name == "tinyimagenet":
        ok = (root / "tiny-imagenet-200" / "wnids.txt").is_file()
    else:
        return f"unknown dataset {name!r}"
    if ok:
        return None
    return f"{name} not found under {root} (README, Data: where to put it; FEDLIB_DATA)"


def load_dataset(name: str, root: str | Path | None = None, device: str | torch.device = "cpu", *,
                 download: bool = True, normalize: str = "paper",
                 **synthetic_kw: Any) -> FedDataset:
    """Load dataset ``name`` (one of :data:`DATASETS`) as normalized tensors on ``device``.

    ``normalize``: ``"paper"`` (the table :data:`NORMALIZATION`) or ``"none"`` (pixels / 255).
    ``synthetic_kw`` only for ``name="synthetic"`` (see :func:`synthetic`). Raises
    :class:`DatasetNotFoundError` when the files are nowhere, ``ValueError`` for an unknown name.
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
        raw = LOADERS[key_name](base, download)
        _CACHE[key] = _to_dataset(key_name, raw, normalize)
    return _CACHE[key].to(device)


def _to_float(x: np.ndarray, mean: tuple[float, ...] | None,
              std: tuple[float, ...] | None) -> Tensor:
    # np.frombuffer views of file bytes; .to() copies anyway, but torch warns
    if not x.flags.writeable:
        x = x.copy()
    t = torch.from_numpy(np.ascontiguousarray(x)).to(torch.float32).div_(255.0)
    if mean is not None:
        c = t.shape[1]
        m = torch.tensor(mean,
                         dtype=torch.float32).expand(c) if len(mean) == 1 else torch.tensor(mean)
        s = torch.tensor(std, dtype=torch.float32).expand(c) if len(std) == 1 else torch.tensor(std)
        t.sub_(m.view(1, c, 1, 1)).div_(s.view(1, c, 1, 1))
    return t


def _to_dataset(name: str, raw: Raw, normalize: str) -> FedDataset:
    mean, std = NORMALIZATION[name] if normalize == "paper" else (None, None)
    for split, (x, y) in {"train": (raw.x_train, raw.y_train),
                          "test": (raw.x_test, raw.y_test)}.items():
        if x.ndim != 4 or x.dtype != np.uint8 or len(x) != len(y):
            raise ValueError(f"{name}: malformed {split} split in {raw.source}: images {x.shape} "
                             f"{x.dtype}, labels {y.shape}; the files may be corrupt — delete and "
                             "re-download them.")
        if len(y) and (y.min() < 0 or y.max() >= raw.num_classes):
            raise ValueError(f"{name}: {split} labels outside [0, {raw.num_classes}) in "
                             f"{raw.source}.")
    return FedDataset(name=name, x_train=_to_float(raw.x_train, mean, std),
                      y_train=torch.from_numpy(raw.y_train.astype(np.int64)),
                      x_test=_to_float(raw.x_test, mean,
                                       std), y_test=torch.from_numpy(raw.y_test.astype(np.int64)),
                      num_classes=raw.num_classes, augment=DEFAULT_AUGMENT[name], source=raw.source,
                      classes=raw.classes, norm=None if mean is None else (tuple(mean), tuple(std)))


# ---------------------------------------------------------------------------------------- synthetic


def synthetic(n_train: int = 50_000, n_test: int = 10_000,
              shape: tuple[int, int, int] = (3, 32, 32), num_classes: int = 10, seed: int = 0,
              signal: float = 0.5, noise: float = 1.0) -> FedDataset:
    """Deterministic, learnable synthetic images for timing and tests.

    Each class has a smooth mean pattern (a 4×4 Gaussian grid per channel, bilinearly upsampled,
    scaled to per-pixel std ``signal``); a sample is its class pattern plus i.i.d. uniform noise of
    std ``noise`` (uniform because it is several times cheaper to draw than Gaussian noise). Labels
    cycle 0, 1, …, K−1, 0, 1, … (exactly balanced; partitions and batches shuffle anyway). Train and
    test noise come from one numpy PCG64 stream seeded by ``seed``, so the data are identical across
    runs and platforms.
    """
    C, H, W = (int(s) for s in shape)
    if n_train < 1 or n_test < 0 or num_classes < 2:
        raise ValueError("synthetic needs n_train >= 1, n_test >= 0 and num_classes >= 2.")
    rng = np.random.default_rng(seed)
    coarse = torch.from_numpy(rng.standard_normal((num_classes, C, 4, 4)).astype(np.float32))
    means = torch.nn.functional.interpolate(coarse, size=(H, W), mode="bilinear",
                                            align_corners=False)
    means = means / means.std(dim=(1, 2, 3), keepdim=True).clamp_min(1e-6) * signal

    def draw(n: int) -> tuple[Tensor, Tensor]:
        if n == 0:
            return torch.empty(0, C, H, W), torch.empty(0, dtype=torch.int64)
        blocks = -(-n // num_classes)
        u8 = rng.integers(0, 256, size=(blocks, num_classes, C, H, W), dtype=np.uint8)
        scale = noise / 73.9  # std of the uniform distribution on {0, ..., 255} is 73.9
        # mean[class] + (u8 − 127.5)·scale, broadcast over the cyclic label layout (in place after
        # one cast)
        x = torch.from_numpy(u8).to(torch.float32).mul_(scale).add_(means - 127.5 * scale)
        x = x.view(blocks * num_classes, C, H, W)[:n]
        y = torch.arange(n, dtype=torch.int64) % num_classes
        return x, y

    x_tr, y_tr = draw(int(n_train))
    x_te, y_te = draw(int(n_test))
    return FedDataset(name="synthetic", x_train=x_tr, y_train=y_tr, x_test=x_te, y_test=y_te,
                      num_classes=int(num_classes), augment=DEFAULT_AUGMENT["synthetic"],
                      source=f"synthetic(seed={seed}, shape={(C, H, W)}, signal={signal}, "
                             f"noise={noise})",
                      classes=tuple(str(k) for k in range(num_classes)))
