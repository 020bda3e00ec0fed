"""Readers for each dataset's real on-disk format, into uint8 numpy arrays (:class:`Raw`).

:func:`fedlib.data.load_dataset` decides where to look and turns a :class:`Raw` into normalized
tensors; this module knows the files. One loader per dataset in :data:`LOADERS`, each ``(root,
download) -> Raw``: it looks in its folders under ``root`` (Fashion-MNIST also in
:data:`DEBIAN_FMNIST_DIRS`), downloads with torchvision when asked (removing the folders a failed
download created), and raises :class:`DatasetNotFoundError` naming every place tried and how to get
the files, or :class:`CorruptDataError` naming a file that exists but cannot be parsed.

* Fashion-MNIST: idx files (``train-images-idx3-ubyte[.gz]`` ...), gzip + ``np.frombuffer``.
* CIFAR-10 / CIFAR-100: the python pickle batches (only point the loader at files you trust).
* SVHN: ``train_32x32.mat`` / ``test_32x32.mat`` (label 10 is digit 0).
* Tiny ImageNet: ``tiny-imagenet-200/`` JPEGs decoded with PIL (the labelled val split is the test
  split).

The formats are described in full in :mod:`fedlib.data`.
"""

from __future__ import annotations

import gzip
import os
import pickle
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import scipy.io

__all__ = ["LOADERS", "Raw", "DatasetNotFoundError", "CorruptDataError", "DEBIAN_FMNIST_DIRS"]

# Debian's `dataset-fashion-mnist` package installs the four idx .gz files here.
DEBIAN_FMNIST_DIRS: tuple[Path, ...] = (Path("/usr/share/datasets/fashion-mnist"),)

_FMNIST_CLASSES = ("T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt",
                   "Sneaker", "Bag", "Ankle boot")


class DatasetNotFoundError(FileNotFoundError):
    """The dataset's files were found nowhere; the message says where fedlib looked and how to get
    them."""


class CorruptDataError(ValueError):
    """A dataset file exists but cannot be parsed; the message names the file and how to replace
    it."""


def _corrupt(path: Path, problem: str, cause: BaseException | None = None) -> CorruptDataError:
    try:
        with open(path, "rb") as f:
            head = f.read(256).lstrip().lower()
    except OSError:
        head = b""
    why = (" It is an HTML page, not the data: a download that saved an error or login page."
           if head.startswith((b"<!doctype html", b"<html", b"<?xml", b"<head")) else "")
    detail = f" ({type(cause).__name__}: {cause})" if cause is not None else ""
    return CorruptDataError(f"{path}: {problem}{detail}.{why} The file is damaged or incomplete: "
                            "delete it and get it again (load_dataset(..., download=True) fetches "
                            "missing files; see the dataset's instructions in help(fedlib.data)).")



@dataclass
class Raw:
    """One dataset as read from disk: uint8 images ``(N, C, H, W)`` and integer labels per split."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    source: str
    classes: tuple[str, ...] = ()


def _not_found(name: str, tried: list[str], how: str,
               cause: BaseException | None = None) -> DatasetNotFoundError:
    msg = (f"Dataset {name!r} not found. Looked in:\n  - " + "\n  - ".join(tried) + "\nHow to get "
                                                                                    f"it: {how}\n"
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


def _try_download(fn: Callable[[], None], name: str, tried: list[str], how: str,
                  root: Path) -> None:
    """Run the downloader ``fn``; on failure remove the empty folders it created (``root`` included)
    and raise :class:`DatasetNotFoundError`."""
    missing = {p for p in (root, *root.parents) if not p.exists()}
    before = _folders(root)
    try:
        fn()
    except Exception as e:  # network, DNS, checksum, disk: all mean "files not available"
        for d in sorted((_folders(root) - before) | missing, key=lambda p: len(p.parts),
                        reverse=True):
            try:
                # only empty folders go; partial downloads are kept (torchvision checks their md5)
                d.rmdir()
            except OSError:
                pass
        raise _not_found(name, tried, how, e) from e


# ----- Fashion-MNIST

_IDX_FILES = {"x_train": "train-images-idx3-ubyte", "y_train": "train-labels-idx1-ubyte",
              "x_test": "t10k-images-idx3-ubyte", "y_test": "t10k-labels-idx1-ubyte"}


def _read_idx(path: Path) -> np.ndarray:
    """Parse an idx file (optionally gzipped): magic 0,0,dtype,ndim then ndim big-endian int32
    sizes."""
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
        raise _corrupt(path, f"the idx header says {tuple(dims)} but the file holds {data.size} "
                             "values (truncated?)")
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


def fmnist_folders(root: Path) -> list[Path]:
    """Where Fashion-MNIST's idx files are looked for, in order."""
    return [root, root / "fashion-mnist", root / "FashionMNIST" / "raw", *DEBIAN_FMNIST_DIRS]


def find_fmnist(root: Path) -> dict[str, Path] | None:
    """Fashion-MNIST's four idx files (``x_train``, ``y_train``, ``x_test``, ``y_test``) under
    ``root`` or the Debian folder, or None."""
    return next((f for f in map(_find_idx, fmnist_folders(root)) if f is not None), None)


def _load_fmnist(root: Path, download: bool) -> Raw:
    folders = fmnist_folders(root)
    tried = [f"{f}/{{train,t10k}}-{{images-idx3,labels-idx1}}-ubyte[.gz]" for f in folders]
    how = ("on Debian/Ubuntu `apt-get install dataset-fashion-mnist` (installs "
           "/usr/share/datasets/fashion-mnist), or download the four *-ubyte.gz files from "
           f"https://github.com/zalandoresearch/fashion-mnist into {root}/fashion-mnist/, or call "
           "load_dataset('fmnist', download=True) with internet access.")
    files = find_fmnist(root)
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
    return Raw(x_train=arr["x_train"][:, None], y_train=arr["y_train"],
               x_test=arr["x_test"][:, None], y_test=arr["y_test"], num_classes=10,
               source=str(files["x_train"].parent), classes=_FMNIST_CLASSES)


# ----- CIFAR-10 / CIFAR-100

CIFAR_FILES = {
    "cifar10": dict(folder="cifar-10-batches-py", train=[f"data_batch_{i}" for i in range(1, 6)],
                    test=["test_batch"], meta="batches.meta", label_key="labels",
                    names_key="label_names", num_classes=10, tv="CIFAR10",
                    url="https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"),
    "cifar100": dict(folder="cifar-100-python", train=["train"], test=["test"], meta="meta",
                     label_key="fine_labels", names_key="fine_label_names", num_classes=100,
                     tv="CIFAR100", url="https://www.cs.toronto.edu/~kriz/cifar-100-python.tar.gz"),
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


def _read_cifar_batches(folder: Path, files: list[str],
                        label_key: str) -> tuple[np.ndarray, np.ndarray]:
    xs, ys = [], []
    for fn in files:
        d = _unpickle(folder / fn)
        try:
            data = np.asarray(d["data"], dtype=np.uint8)
            # rows are 1024 R, 1024 G, 1024 B values, row-major 32×32
            xs.append(data.reshape(-1, 3, 32, 32))
            ys.append(np.asarray(d[label_key], dtype=np.int64))
        except (KeyError, ValueError, TypeError) as e:
            raise _corrupt(folder / fn, "is not a CIFAR batch (no 'data' / labels of the expected "
                                        "shape)", e) from e
    return np.concatenate(xs), np.concatenate(ys)


def _load_cifar(name: str, root: Path, download: bool) -> Raw:
    spec = CIFAR_FILES[name]
    folder = root / spec["folder"]
    need = spec["train"] + spec["test"]
    tried = [f"{folder}/ (needs {', '.join(need)})"]
    how = (f"download and extract {spec['url']} so that {folder}/ holds {', '.join(need)} "
           f"(the python version), or call load_dataset({name!r}, download=True) with internet "
           "access.")

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
    return Raw(x_tr, y_tr, x_te, y_te, spec["num_classes"], str(folder), classes)


# ----- SVHN

def _read_svhn(path: Path) -> tuple[np.ndarray, np.ndarray]:
    try:
        m = scipy.io.loadmat(str(path))
        # (H, W, C, N) → (N, C, H, W)
        x = np.transpose(np.asarray(m["X"], dtype=np.uint8), (3, 2, 0, 1))
        y = np.asarray(m["y"], dtype=np.int64).reshape(-1)
    except (PermissionError, FileNotFoundError, IsADirectoryError, MemoryError):
        raise
    except Exception as e:  # scipy's MatReadError, ValueError, TypeError, KeyError ...
        raise _corrupt(path, "is not a readable SVHN .mat file (format 2, with X and y)", e) from e
    y[y == 10] = 0  # SVHN stores digit 0 as label 10
    return np.ascontiguousarray(x), y


def _load_svhn(root: Path, download: bool) -> Raw:
    paths = [root / "train_32x32.mat", root / "test_32x32.mat"]
    tried = [str(p) for p in paths]
    how = ("download http://ufldl.stanford.edu/housenumbers/train_32x32.mat and test_32x32.mat "
           f"(format 2, cropped digits) into {root}/, or call load_dataset('svhn', download=True) "
           "with internet access.")
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
    return Raw(x_tr, y_tr, x_te, y_te, 10, str(root), tuple(str(d) for d in range(10)))


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


def _load_tinyimagenet(root: Path, download: bool) -> Raw:
    folder = root / "tiny-imagenet-200"
    tried = [f"{folder}/ (needs wnids.txt, train/<wnid>/images/*.JPEG, val/images/, "
             "val/val_annotations.txt)"]
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
            raise ValueError("tinyimagenet: no training images in "
                             f"{folder / 'train' / w / 'images'}.")
        tr_paths += imgs
        tr_y += [cls[w]] * len(imgs)
    te_paths, te_y = [], []
    for line in (folder / "val" / "val_annotations.txt").read_text().splitlines():
        parts = line.split("\t") if "\t" in line else line.split()
        if len(parts) < 2:
            continue
        if parts[1] not in cls:
            raise ValueError(f"tinyimagenet: val_annotations.txt names {parts[1]!r}, which is not "
                             "in wnids.txt.")
        te_paths.append(folder / "val" / "images" / parts[0])
        te_y.append(cls[parts[1]])
    return Raw(_decode_rgb(tr_paths), np.asarray(tr_y, np.int64), _decode_rgb(te_paths),
               np.asarray(te_y, np.int64), len(wnids), str(folder), tuple(wnids))


LOADERS: dict[str, Callable[[Path, bool], Raw]] = {
    "fmnist": _load_fmnist,
    "cifar10": lambda r, d: _load_cifar("cifar10", r, d),
    "cifar100": lambda r, d: _load_cifar("cifar100", r, d),
    "svhn": _load_svhn,
    "tinyimagenet": _load_tinyimagenet,
}
