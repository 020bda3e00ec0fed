"""A paper's setup as a :class:`Preset`; ``preset(name, scale, variant, **overrides) -> Config``.

Each paper's preset is in its folder (``fedlib/companion/papers/<paper>/preset.py``), each value
with the sentence it comes from: the paper's setup (``paper`` scale), what ``quick`` and ``smoke``
change of it (:mod:`fedlib.companion.scales`), the changes the paper states per dataset, and named
departures (``variants``: documented readings of a paper or its code). :data:`PRESETS` holds the
preset of every paper in the registry (:data:`fedlib.companion.papers.PAPERS`, which registers them
when it is imported: ``from fedlib.companion.papers import preset``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping

from fedlib.config import SCALES, Config, reject_unknown
from fedlib.companion.scales import scale_of

__all__ = ["Preset", "PRESETS", "preset", "register"]

Fields = Mapping[str, Any]


@dataclass(frozen=True)
class Preset:
    """One paper's setup: ``config(scale, variant, **overrides)`` is the Config of a run of it."""

    name: str  # "fedintr": the Config's label starts with it
    setup: Fields  # the paper's setup: the Config fields it states (paper scale)
    scales: Mapping[str, Fields]  # what each scale changes of the setup ("paper": nothing)
    datasets: Mapping[str, Fields] = field(default_factory=dict)  # what it changes on a dataset
    variants: Mapping[str, Fields] = field(default_factory=dict)  # named departures, each a reading

    def __post_init__(self) -> None:
        if set(self.scales) != set(SCALES):
            raise ValueError(f"Preset {self.name!r}: give what each of the scales {SCALES} changes "
                             f"(paper: {{}}); got {sorted(self.scales)}.")

    def config(self, scale: str = "paper", variant: str | None = None, **overrides: Any) -> Config:
        """The setup on the dataset of ``overrides`` (default the paper's), then what ``scale``
        changes, then the named ``variant``, then ``overrides``."""
        scale_of(scale)
        if variant is not None and variant not in self.variants:
            raise ValueError(f"Unknown variant {variant!r} of preset {self.name!r}; valid: "
                             f"{sorted(self.variants)}.")
        dataset = overrides.get("dataset", self.setup["dataset"])
        on_dataset = dict(self.datasets.get(dataset, {}))
        base = {**self.setup, **on_dataset, "model_kw": dict(on_dataset.get("model_kw", {}))}
        base.update(self.scales[scale])
        if variant is not None:
            base.update(self.variants[variant])
        base["label"] = f"{self.name}/{scale}" + (f"/{variant}" if variant else "")
        base["scale"] = scale
        reject_unknown(overrides, f"preset({self.name!r})")
        base.update(overrides)
        return Config(**base).validate()


PRESETS: dict[str, Preset] = {}  # every paper's preset by name, filled by the papers' registry


def register(presets: Iterable[Preset]) -> None:
    """Add ``presets`` to :data:`PRESETS` (the papers' registry does, for every paper it lists)."""
    for p in presets:
        if PRESETS.setdefault(p.name, p) is not p:
            raise ValueError(f"Two presets are named {p.name!r}: a preset belongs to one paper.")


def preset(name: str, scale: str = "paper", variant: str | None = None, **overrides: Any) -> Config:
    """The setup of the paper preset ``name`` at ``scale``, then the named ``variant``, then
    ``overrides``.

    >>> preset("fedintr", "quick", strategy="fedprox", strategy_kw={"mu": 0.01}).rounds
    40
    >>> preset("fedcka", variant="lr0.1").lr
    0.1
    """
    if name not in PRESETS:
        hint = "" if PRESETS else " (none registered: import fedlib.companion.papers, the registry)"
        raise ValueError(f"Unknown preset {name!r}; valid presets: {sorted(PRESETS)}{hint}.")
    return PRESETS[name].config(scale, variant, **overrides)
