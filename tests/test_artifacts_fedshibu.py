"""FedSHIBU's Fig. 4 helper: intervals never leave [0, 100], no interval for one seed, the paper's Table 1 drawn."""

import matplotlib

matplotlib.use("Agg")
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from fedlib.artifacts.fedshibu import PAPER_ORDER, PAPER_T1, plot_shards  # noqa: E402


def test_fig4_intervals_stay_in_0_100_and_the_paper_values_are_drawn():
    frame = pd.DataFrame({"method": ["FedBABU"] * 3 + ["FedAvg"], "s": [2, 2, 2, 5],
                          "acc": [99.0, 60.0, 99.5, 70.0]})
    fig = plot_shards(frame, "fmnist", 10)
    ax = fig.axes[0]
    for coll in ax.collections:  # error-bar segments
        for seg in coll.get_segments():
            assert np.all(seg[:, 1] >= 0) and np.all(seg[:, 1] <= 100)
    labels = [line.get_label() for line in ax.get_lines()]
    assert all(f"paper (cifar10): {m}" in labels for m in PAPER_ORDER)
    paper = next(line for line in ax.get_lines() if line.get_label() == f"paper (cifar10): {PAPER_ORDER[0]}")
    assert list(paper.get_ydata()) == [PAPER_T1["cifar10"][s][0] for s in sorted(PAPER_T1["cifar10"])]
    assert "Fashion-MNIST" in ax.get_title()
    one_seed = [c for c in ax.collections if len(c.get_segments()) and c.get_label() == ""]
    assert all(np.ptp(seg[:, 1]) == 0 for c in one_seed for seg in c.get_segments()
               if seg[0, 0] == 5)  # FedAvg at s = 5 has one seed: no interval
