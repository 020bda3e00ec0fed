"""The shape of a plan, ``{artifact: {RunId: Config}}``, the run ids, and the seeds every plan runs.

A :class:`RunId` names one planned run by what its plan varies: the method's label (as the tables
name it), the seed and, in a subclass per paper, the settings as typed fields (FedCKA's α and E,
FedIntR's β, N, E and μ, FedER's optimizer, FedSHIBU's s). Artifacts select and group runs by these
fields; ``str(run_id)`` is the run's name as every table, ledger and summary prints it (``"FedBABU |
s=2 | seed=4"``, ``"β=0.1 | FedIntR | μ=10 | seed=0"``, ``"Adam · FedER · seed=0"``).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar

from fedlib.config import Config

__all__ = [
    "Plan", "SEEDS", "RunId", "FedCKARunId", "FedIntRRunId", "FedERRunId", "FedSHIBURunId",
    "Setting"
]

Setting = int | float | str
# a field's symbol in the papers (and in run names)
SYMBOLS = {"alpha": "α", "beta": "β", "mu": "μ"}


def _text(value: Setting) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass(frozen=True)
class RunId:
    """A planned run: its method's label and its seed, ``"<method> | seed=<n>"``; a subclass adds
    the settings its plans vary as fields (None where a run does not name one), named after the
    method in field order."""

    method: str
    seed: int
    SEP: ClassVar[str] = " | "

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if v is not None and str(f.type).startswith("float"):
                object.__setattr__(self, f.name, float(v))

    def settings(self) -> dict[str, Setting]:
        """The settings it names besides method and seed, by the papers' symbols: ``{"β": 0.1, "μ":
        10.0}``."""
        return {
            SYMBOLS.get(f.name, f.name): v
            for f in fields(self)[2:] if (v := getattr(self, f.name)) is not None
        }

    def parts(self) -> list[str]:
        """Its name's parts but the seed, in order."""
        return [self.method, *(f"{k}={_text(v)}" for k, v in self.settings().items())]

    def unseeded(self) -> str:
        """Its name without the seed: what the seeds of one setting share."""
        return self.SEP.join(self.parts())

    def __str__(self) -> str:
        return self.SEP.join([*self.parts(), f"seed={self.seed}"])

    def __repr__(self) -> str:
        named = (f"{f.name}={getattr(self, f.name)!r}" for f in fields(self)[2:]
                 if getattr(self, f.name) is not None)
        args = ", ".join([repr(self.method), f"seed={self.seed}", *named])
        return f"{type(self).__name__}({args})"


@dataclass(frozen=True, repr=False)
class FedCKARunId(RunId):
    """FedCKA's heterogeneity runs: ``"<method> | α=<α> | seed=<n>"`` (Table 2's Dirichlet α) or
    ``"<method> | E=<E> | seed=<n>"`` (Appl. Sci. Fig. 5's local epochs)."""

    alpha: float | None = None
    E: int | None = None


@dataclass(frozen=True, repr=False)
class FedIntRRunId(RunId):
    """FedIntR's runs: ``"<method> | μ=<μ> | seed=<n>"`` (FedAvg: no μ); Table III's β, Table IV's
    clients N and Fig. 5's local epochs E lead the name: ``"β=0.1 | FedIntR | μ=10 | seed=0"``."""

    beta: float | None = None
    N: int | None = None
    E: int | None = None
    mu: float | None = None

    def parts(self) -> list[str]:
        lead = {k: v for k, v in self.settings().items() if k != "μ"}
        return [*(f"{k}={_text(v)}" for k, v in lead.items()), self.method,
                *([f"μ={_text(self.mu)}"] if self.mu is not None else [])]

    @property
    def label(self) -> str:
        """The method with its μ, as Table IV names it: ``"FedIntR (μ=10)"``."""
        return self.method + ("" if self.mu is None else f" (μ={_text(self.mu)})")


@dataclass(frozen=True, repr=False)
class FedERRunId(RunId):
    """FedER's runs: ``"<optimizer> · <method> · seed=<n>"``, Table 4.2's row (the optimizer) and
    column (non-federated, FedAvg, FedER; Fig. A.1: FedER with the stable rank)."""

    optimizer: str = ""
    SEP: ClassVar[str] = " · "

    def parts(self) -> list[str]:
        return [self.optimizer, self.method]


@dataclass(frozen=True, repr=False)
class FedSHIBURunId(RunId):
    """FedSHIBU's runs: ``"<method> | s=<s> | seed=<n>"`` (``s``: shards per user; Fig. 1's runs
    have none)."""

    s: int | None = None


Plan = dict[str, dict[RunId, Config]]

# Every comparison is decided over these seeds, fixed before any run: 5 a side (a 95 % t interval
# with 4 degrees of freedom); smoke proves the code runs.
SEEDS: dict[str, tuple[int,
                       ...]] = {"paper": (0, 1, 2, 3, 4), "quick": (0, 1, 2, 3, 4), "smoke": (0, )}
