"""The shape of a plan: ``{artifact: {run name: Config}}``."""

from __future__ import annotations

from ..config import Config

Plan = dict[str, dict[str, Config]]
