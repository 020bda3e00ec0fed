"""One look for every figure: dataset display names, a colour and line style per method, kept across
notebooks.

    from fedlib.companion.style import dataset_name, method_style
    ax.plot(x, y, label="FedAvg", **method_style("FedAvg"))
    ax.set_title(f"Table I on {dataset_name('fmnist')}")

A method's style is looked up by its display name (the label the figures use, as in the papers'
tables); names not listed get a colour from a fixed cycle, chosen from the name itself so that the
same name is drawn the same way in every figure. Line styles differ between methods whose curves
overlap (FedAvg and FedProx), so that no series hides another, and no two listed methods share both
line style and marker, so that they are told apart printed in grey.
"""

from __future__ import annotations

import zlib
from typing import Any

__all__ = ["DATASET_NAMES", "METHOD_STYLES", "dataset_name", "method_style", "PAPER_STYLE"]

DATASET_NAMES = {
    "fmnist": "Fashion-MNIST",
    "cifar10": "CIFAR-10",
    "cifar100": "CIFAR-100",
    "svhn": "SVHN",
    "tinyimagenet": "Tiny ImageNet",
    "synthetic": "synthetic (CIFAR-shaped, random)",
}

# Tableau-10 colours; each method keeps its own in every figure
_C = {
    "blue": "#4e79a7", "orange": "#f28e2b", "red": "#e15759", "teal": "#76b7b2", "green": "#59a14f",
    "yellow": "#edc948", "purple": "#b07aa1", "pink": "#ff9da7", "brown": "#9c755f",
    "grey": "#bab0ac"
}

METHOD_STYLES: dict[str, dict[str, Any]] = {
    "FedAvg": dict(color=_C["blue"], ls="-", marker="o"),
    "FedProx": dict(color=_C["orange"], ls="--", marker="s"),
    "SCAFFOLD": dict(color=_C["brown"], ls="-.", marker="^"),
    "MOON": dict(color=_C["purple"], ls=":", marker="D"),
    "FedCKA": dict(color=_C["red"], ls="-", marker="v"),
    "FedIntR": dict(color=_C["green"], ls="-", marker="P"),
    "FedER": dict(color=_C["teal"], ls="-", marker="X"),
    "FedBABU": dict(color=_C["yellow"], ls="--", marker="h"),
    "FedSHIBU": dict(color=_C["red"], ls="-", marker="p"),
    "FedAvg+CRSM": dict(color=_C["pink"], ls="-.", marker="<"),
    "Local only": dict(color=_C["grey"], ls=":", marker="x"),
    "Centralized": dict(color="0.25", ls=(0, (5, 1)), marker=None),
}
_CYCLE = [dict(color=c, ls=ls) for ls in ("-", "--", "-.", ":") for c in _C.values()]

# the papers' published values: hollow black markers, never a line that could hide ours
PAPER_STYLE: dict[str, Any] = dict(color="black", marker="*", ls="none", markersize=9,
                                   markerfacecolor="none")


def dataset_name(key: str) -> str:
    """The display name of a dataset key (``"fmnist"`` -> ``"Fashion-MNIST"``); unknown keys are
    returned as is."""
    return DATASET_NAMES.get(key, key)


def method_style(name: str) -> dict[str, Any]:
    """Matplotlib keyword arguments (``color``, ``ls``, ``marker``) for the method called ``name``.

    The longest listed name that starts ``name`` decides (``"FedCKA (μ = 3)"`` is drawn as FedCKA);
    other names get a fixed entry of a colour-and-dash cycle chosen from a checksum of the name."""
    hits = [k for k in METHOD_STYLES if name == k or name.startswith(k + " ")]
    if hits:
        return dict(METHOD_STYLES[max(hits, key=len)])
    return dict(_CYCLE[zlib.crc32(name.encode()) % len(_CYCLE)])
