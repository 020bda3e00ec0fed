"""The style module: one colour per method everywhere, display names for datasets."""

from fedlib.companion.style import METHOD_STYLES, dataset_name, method_style


def test_dataset_display_names():
    assert dataset_name("fmnist") == "Fashion-MNIST" and dataset_name("cifar10") == "CIFAR-10"
    assert dataset_name("unknown") == "unknown"


def test_a_method_keeps_its_style_with_a_suffix_and_overlapping_pairs_differ():
    assert method_style("FedCKA (μ = 3)") == METHOD_STYLES["FedCKA"]
    assert method_style("FedAvg+CRSM") == METHOD_STYLES["FedAvg+CRSM"] != METHOD_STYLES["FedAvg"]
    a, b = method_style("FedAvg"), method_style("FedProx")
    assert a["color"] != b["color"] and a["ls"] != b["ls"]


def test_unlisted_names_get_a_stable_style():
    assert method_style("my method") == method_style("my method")
    assert set(method_style("my method")) == {"color", "ls"}


def test_every_listed_method_is_told_apart_in_grey_by_its_line_and_marker():
    pairs = [(st["ls"], st["marker"]) for st in METHOD_STYLES.values()]
    assert len(set(pairs)) == len(pairs)
