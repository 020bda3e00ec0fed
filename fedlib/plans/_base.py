"""The shape of a plan, ``{artifact: {run name: Config}}``, and the seeds every plan runs."""

from __future__ import annotations

from ..config import Config

Plan = dict[str, dict[str, Config]]

# Every comparison is decided over these seeds, fixed before any run: 5 a side (a 95 % t interval with 4 degrees of
# freedom); smoke proves the code runs.
SEEDS: dict[str, tuple[int, ...]] = {"paper": (0, 1, 2, 3, 4), "quick": (0, 1, 2, 3, 4), "smoke": (0,)}
