"""What each scale changes of the partitions notebook: the samples it draws from.

Partitions are cheap at every scale; smoke draws a fixed class-stratified subset so that CI renders
the notebook in seconds, quick and paper partition the whole training and test splits.
"""

from __future__ import annotations

__all__ = ["PARTITION_SAMPLES"]

# (training, test) samples of the partitioned dataset; None: the whole split
PARTITION_SAMPLES: dict[str, tuple[int | None, int | None]] = {
    "smoke": (3000, 1000),
    "quick": (None, None),
    "paper": (None, None),
}
