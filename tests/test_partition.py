"""Client partitions: determinism, coverage, heterogeneity, the schemes' defining properties, clear errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedlib.partition import (DIRICHLET_CONVENTIONS, SCHEMES, Partition, dirichlet, iid, label_groups,
                              make_partition, shards)

N_CLASSES = 10


@pytest.fixture(scope="module")
def labels():
    """CIFAR-10-like train labels: 5000 per class, shuffled."""
    return np.random.default_rng(123).permutation(np.repeat(np.arange(N_CLASSES), 5000))


@pytest.fixture(scope="module")
def test_labels():
    return np.random.default_rng(321).permutation(np.repeat(np.arange(N_CLASSES), 1000))


def _check_consistent(p: Partition, labels, exact_cover=True):
    allix = np.concatenate(p.client_indices)
    if exact_cover:
        assert np.array_equal(np.sort(allix), np.arange(len(labels))), "every index used exactly once"
    else:
        assert len(np.unique(allix)) == len(allix), "no index used twice"
    for c, ix in enumerate(p.client_indices):
        assert ix.dtype == np.int64
        assert np.array_equal(np.bincount(labels[ix], minlength=p.counts.shape[1]), p.counts[c])
    assert np.array_equal(p.sizes, p.counts.sum(1))


def _mean_entropy(counts):
    q = counts / counts.sum(1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.where(q > 0, q * np.log(q), 0.0).sum(1)
    return h.mean()


ALL = [
    lambda y, s: iid(y, 10, s),
    lambda y, s: dirichlet(y, 10, 0.5, s),
    lambda y, s: dirichlet(y, 10, 0.5, s, convention="fedintr"),
    lambda y, s: shards(y, 10, 2, s),
    lambda y, s: label_groups(y, seed=s),
]


@pytest.mark.parametrize("make", ALL)
def test_deterministic_hash(labels, make):
    a, b, c = make(labels, 0), make(labels, 0), make(labels, 1)
    assert a.hash == b.hash and len(a.hash) == 16
    assert all(np.array_equal(x, y) for x, y in zip(a.client_indices, b.client_indices))
    assert a.hash != c.hash


def test_hash_is_stable_value():
    # guards against accidental changes to the hashing or the generator use
    p = Partition.from_indices([[0, 2], [1]], np.array([0, 1, 0]))
    assert p.hash == Partition.from_indices([np.array([2, 0]), np.array([1])], [0, 1, 0]).hash
    assert p.hash != Partition.from_indices([[0], [2, 1]], [0, 1, 0]).hash
    assert p.hash != Partition.from_indices([[0, 2], [1]], [0, 1, 0], test_indices=[[0], [1]]).hash


def test_partition_is_read_only(labels):
    p = iid(labels, 5, 0)
    with pytest.raises(ValueError):
        p.client_indices[0][0] = 7
    with pytest.raises(Exception):
        p.scheme = "x"


@pytest.mark.parametrize("make", ALL[:4])
def test_every_index_once(labels, make):
    _check_consistent(make(labels, 3), labels)


def test_iid_balanced(labels):
    p = iid(labels, 7, 0)
    assert p.sizes.max() - p.sizes.min() <= 1
    assert p.test_indices is None and p.scheme == "iid"


def test_dirichlet_min_size(labels):
    for seed in range(5):
        p = dirichlet(labels, 10, 0.05, seed, min_size=10)
        assert p.sizes.min() >= 10
    p = dirichlet(labels[:2000], 20, 0.3, 0, min_size=30)
    assert p.sizes.min() >= 30


def test_dirichlet_heterogeneity_grows_as_beta_shrinks(labels):
    ent = {b: np.mean([_mean_entropy(dirichlet(labels, 10, b, s).counts) for s in range(3)])
           for b in (100.0, 5.0, 0.5, 0.1)}
    assert ent[100.0] > ent[5.0] > ent[0.5] > ent[0.1]
    assert ent[100.0] > 0.99 * np.log(N_CLASSES)


def test_dirichlet_balance_cap(labels):
    n = 10
    cap = len(labels) / n
    biggest_class = np.bincount(labels).max()
    for seed in range(5):
        p = dirichlet(labels, n, 0.1, seed)
        assert p.sizes.max() <= cap + biggest_class
        assert p.params["balance_cap"] is True and p.params["min_size"] == 10


def test_dirichlet_conventions(labels):
    assert DIRICHLET_CONVENTIONS["fedintr"] == {"balance_cap": False, "min_size": 0}
    p = dirichlet(labels, 10, 0.1, 0, convention="fedintr")
    assert p.params["balance_cap"] is False and p.params["min_size"] == 0 and p.params["draws"] == 1
    _check_consistent(p, labels)
    # explicit options override the convention
    q = dirichlet(labels, 10, 0.1, 0, convention="fedintr", balance_cap=True)
    assert q.params["balance_cap"] is True
    with pytest.raises(ValueError, match="convention"):
        dirichlet(labels, 10, 0.1, 0, convention="nope")


def test_shards(labels, test_labels):
    p = shards(labels, 20, 2, 0, test_labels=test_labels)
    _check_consistent(p, labels)
    assert p.test_indices is not None and len(p.test_indices) == 20
    assert ((p.counts > 0).sum(1) <= 2).all()
    assert p.sizes.max() - p.sizes.min() <= 2  # equal shards
    allt = np.concatenate(p.test_indices)
    assert len(np.unique(allt)) == len(allt), "test shards are disjoint"
    assert len(allt) == len(test_labels)
    for c in range(20):
        train_classes = set(np.unique(labels[p.client_indices[c]]).tolist())
        test_counts = np.bincount(test_labels[p.test_indices[c]], minlength=N_CLASSES)
        assert set(np.flatnonzero(test_counts).tolist()) == train_classes
        # same proportions as the train shard assignment (shards of one class are equal)
        train_frac = p.counts[c] / p.counts[c].sum()
        assert np.allclose(test_counts / test_counts.sum(), train_frac, atol=0.01)


def test_shards_more_classes_per_client(labels, test_labels):
    p = shards(labels, 10, 5, 0, test_labels=test_labels)
    assert ((p.counts > 0).sum(1) <= 5).all()
    _check_consistent(p, labels)


def test_label_groups_fedshibu_fig1(labels, test_labels):
    p = label_groups(labels, test_labels=test_labels, seed=0)
    assert p.n_clients == 10
    _check_consistent(p, labels)
    for c in range(10):
        want = set(range(5)) if c < 5 else set(range(5, 10))
        assert set(np.flatnonzero(p.counts[c]).tolist()) == want
        assert set(np.unique(test_labels[p.test_indices[c]]).tolist()) == want
    # each group's samples are split evenly among its clients
    assert p.sizes.max() - p.sizes.min() <= 5
    allt = np.concatenate(p.test_indices)
    assert len(np.unique(allt)) == len(allt) == len(test_labels)


def test_label_groups_general(labels):
    p = label_groups(labels, groups=((0, 1), (2,), (3, 4, 5)), clients_per_group=2, seed=1)
    assert p.n_clients == 6
    _check_consistent(p, labels, exact_cover=False)
    assert set(np.flatnonzero(p.counts[2]).tolist()) == {2}
    assert np.concatenate(p.client_indices).size == (labels <= 5).sum()  # labels in no group are left out


def test_make_partition_dispatch(labels, test_labels):
    assert set(SCHEMES) == {"iid", "dirichlet", "shards", "label_groups"}
    assert make_partition("iid", labels, 1, 0).sizes.tolist() == [len(labels)]
    assert make_partition("dirichlet", labels, 10, 0, test_labels=test_labels, beta=0.5).hash == \
        dirichlet(labels, 10, 0.5, 0).hash
    p = make_partition("shards", labels, 10, 0, test_labels=test_labels, shards_per_user=2)
    assert p.hash == shards(labels, 10, 2, 0, test_labels=test_labels).hash
    q = make_partition("label_groups", labels, 10, 0, test_labels=test_labels)
    assert q.hash == label_groups(labels, seed=0, test_labels=test_labels).hash
    # list-valued params (from JSON configs) work
    r = make_partition("label_groups", labels, 4, 0, groups=[[0, 1], [2, 3]])
    assert r.n_clients == 4
    with pytest.raises(ValueError, match="valid schemes: iid, dirichlet, shards, label_groups"):
        make_partition("pathological", labels, 10, 0)


def test_torch_labels_accepted(labels):
    import torch
    assert iid(torch.as_tensor(labels), 4, 0).hash == iid(labels, 4, 0).hash


@pytest.mark.parametrize("call, fix", [
    (lambda y: dirichlet(y, 10, 0.0, 0), "beta"),
    (lambda y: dirichlet(y, 10, -1, 0), "beta"),
    (lambda y: dirichlet(y, 10, float("nan"), 0), "beta"),
    (lambda y: dirichlet(y, 10, float("inf"), 0), "beta"),
    (lambda y: iid(y[:5], 10, 0), "Use at most 5 clients"),
    (lambda y: dirichlet(y[:50], 100, 0.5, 0), "Use at most 50 clients"),
    (lambda y: dirichlet(y[:200], 10, 0.5, 0, min_size=30), "lower min_size"),
    (lambda y: dirichlet(y[:300], 20, 0.01, 0, min_size=14, max_retries=5),
     "Lower min_size, raise beta, or use fewer clients"),
    (lambda y: shards(y, 7, 3, 0), "multiple of 10"),
    (lambda y: shards(y[:30], 10, 3, 0), "use fewer clients, a smaller shards_per_user"),
    (lambda y: shards(y[:100], 20, 5, 0), "use fewer clients, a smaller shards_per_user"),
    (lambda y: shards(y, 10, 2, 0, test_labels=np.arange(10)), "larger n_test"),
    (lambda y: label_groups(y, groups=((0, 1), (2, 11))), "fix groups"),
    (lambda y: make_partition("label_groups", y, 7, 0), "multiple of 2"),
    (lambda y: make_partition("dirichlet", y, 10, 0), "beta"),
    (lambda y: make_partition("shards", y, 10, 0), "shards_per_user"),
])
def test_impossible_requests_name_the_fix(labels, call, fix):
    with pytest.raises(ValueError) as e:
        call(labels)
    assert fix in str(e.value)


# ------------------------------------------------------------------------------------------ property-based

_SCHEME_KW = st.one_of(
    st.tuples(st.just("iid"), st.just({})),
    st.tuples(st.just("dirichlet"), st.fixed_dictionaries(
        {"beta": st.floats(0.01, 100.0)}, optional={"convention": st.sampled_from(["niid-bench", "fedintr",
                                                                                 "flower"])})),
    st.tuples(st.just("shards"), st.fixed_dictionaries({"shards_per_user": st.integers(1, 4)})),
    st.tuples(st.just("label_groups"), st.just({})),
)


@settings(max_examples=60, deadline=None)
@given(labels=st.lists(st.integers(0, 9), min_size=1, max_size=300), n_clients=st.integers(1, 20),
       seed=st.integers(0, 2**32), scheme_kw=_SCHEME_KW)
def test_random_partitions_assign_every_index_exactly_once(labels, n_clients, seed, scheme_kw):
    """Any labels, client count and seed: a partition, or one ValueError saying why not (never a silent drop)."""
    scheme, kw = scheme_kw
    y = np.array(labels)
    try:
        p = make_partition(scheme, y, n_clients, seed, test_labels=y, **kw)
    except ValueError as e:
        assert str(e)
        return
    assigned = np.concatenate(p.client_indices)
    expected = np.arange(len(y)) if scheme != "label_groups" else np.flatnonzero(np.isin(y, range(10)))
    assert np.array_equal(np.sort(assigned), expected)  # every index exactly once
    assert len(p.client_indices) == n_clients and p.counts.sum() == len(expected)
