"""What FedSHIBU's CRSM can detect, in a controlled case: Fig. 1's two label groups (clients 0–4 hold labels 0–4,
clients 5–9 labels 5–9), each client's body trained on its own data alone, D̂_i its conv3 output.

* ``samples="shared"`` (every body on the same images) finds the groups, but Algorithm 3's row normalization of
  CKA values all close to 1 weighs every client almost equally;
* ``samples="own"`` (every body on its own images) compares rows of different images: its CKA sits at the level
  any unpaired representations give by chance (:func:`fedlib.crsm.chance_crsm`) and does not follow the groups;
* CKA of own-sample representations paired by feature (:func:`fedlib.crsm.feature_crsm`) finds the groups, and
  before any training too.

``benchmarks/crsm_groups.py`` measures the same on Fashion-MNIST over 1,000 local steps.
"""

from __future__ import annotations

import itertools

import pytest
import torch

from fedlib.config import Config
from fedlib.crsm import chance_crsm, crsm, feature_crsm, label_overlap, offdiag_corr, row_weights
from fedlib.engine import Engine
from fedlib.companion.papers.fedshibu.plans import GROUPS

M = 10
GROUP = torch.tensor([0 if c in GROUPS[0] else 1 for c in range(M)])
SAME = GROUP[:, None] == GROUP[None, :]
OFF = ~torch.eye(M, dtype=torch.bool)


def local_bodies(data, partition: str, train: bool = True) -> dict:
    """Every client's body trained on its own data alone (identity CRSM; ``train=False``: the initial body), and its
    D̂_i on its own / on shared samples."""
    cfg = Config(dataset="synthetic", model="intr_cnn", partition=partition, partition_kw={}, num_clients=M,
                 rounds=2, local_epochs=1, batch_size=32, lr=0.05, momentum=0.9, weight_decay=0.0, augment="none",
                 seed=0, executor="sequential", personal_eval=False, strategy="fedshibu",
                 strategy_kw={"sim": "identity"})
    eng = Engine(cfg, data=data, progress=False, keep_client_models=True)
    if train:
        eng.run()
    tap, last = (eng.strategy._tap,), eng.round - 1 if train else 0
    bodies = [eng.client_models[c] if train else eng.global_params for c in range(M)]
    return {"own": [eng.features(c, last, b, tap, 100)[0] for c, b in enumerate(bodies)],
            "shared": [eng.features(c, last, b, tap, 100, shared=True)[0] for c, b in enumerate(bodies)],
            "overlap": label_overlap(torch.tensor(eng.partition.counts))}


@pytest.fixture(scope="module")
def groups(tiny_data) -> dict:
    return local_bodies(tiny_data, "label_groups")


@pytest.fixture(scope="module")
def homogeneous(tiny_data) -> dict:
    return local_bodies(tiny_data, "iid")


def within_mass(S: torch.Tensor) -> float:
    """The mean weight (self included) a client gives its own group after Algorithm 3's row normalization."""
    return float((row_weights(S) * SAME).sum(1).mean())


def separates(S: torch.Tensor) -> bool:
    """Every pair within a group more similar than every pair across the groups."""
    return bool(S[SAME & OFF].min() > S[~SAME].max())


def test_the_controlled_case_has_two_disjoint_label_groups(groups):
    assert torch.equal(groups["overlap"] > 0.5, SAME)
    assert float(groups["overlap"][~SAME].max()) == 0.0


def test_shared_samples_find_the_label_groups(groups):
    S = crsm(groups["shared"], "linear")
    assert offdiag_corr(S, groups["overlap"]) > 0.9
    assert separates(S)


def test_row_normalization_weighs_clients_almost_equally_with_shared_samples(groups):
    """Algorithm 3 divides each CRSM row by its sum: CKA values within 1 % of each other give weights within
    0.5 % of 1/m, so the groups the CRSM finds barely move the aggregation (within-group mass 1/2, as FedBABU)."""
    S = crsm(groups["shared"], "linear")
    assert float(S[OFF].min()) > 0.98
    assert float((row_weights(S) - 1 / M).abs().max()) < 0.005
    assert within_mass(S) < 0.51


def test_own_samples_give_chance_level_cka_blind_to_the_groups(groups):
    """Rows of D̂_i and D̂_j are different images: the CRSM's off-diagonal is the CKA of an arbitrary pairing, at
    the level every unpaired pair of representations gives, and does not follow the groups the shared CRSM finds."""
    own, shared = crsm(groups["own"], "linear"), crsm(groups["shared"], "linear")
    chance = chance_crsm(groups["own"])
    assert float(own[OFF].mean()) == pytest.approx(float(chance[OFF].mean()), rel=0.25)
    assert float(own[OFF].max()) < 0.3
    r_own, r_shared = offdiag_corr(own, groups["overlap"]), offdiag_corr(shared, groups["overlap"])
    assert r_own < 0.5 < r_shared - 0.4
    assert not separates(own)
    assert float(row_weights(own).diagonal().mean()) > 4 / M  # the identity dominates each row


def test_chance_crsm_is_unpaired_cka_averaged_over_every_pairing_of_the_rows():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 3, generator=g, dtype=torch.float64) @ torch.randn(3, 8, generator=g, dtype=torch.float64)
    y = torch.randn(5, 8, generator=g, dtype=torch.float64).relu()
    every = [float(crsm([x, y[list(p)]], "linear")[0, 1]) for p in itertools.permutations(range(5))]
    assert sum(every) / len(every) == pytest.approx(float(chance_crsm([x, y])[0, 1]), rel=1e-9)
    assert max(every) - min(every) > 0.1  # one pairing's CKA depends on which rows happen to meet
    assert torch.equal(chance_crsm([x, y]).diagonal(), torch.ones(2, dtype=torch.float64))


def test_feature_paired_cka_of_own_samples_finds_the_groups_and_weighs_by_them(groups):
    S = feature_crsm(groups["own"])
    assert offdiag_corr(S, groups["overlap"]) > 0.9
    assert separates(S)
    assert within_mass(S) > 0.54


def test_feature_paired_cka_separates_the_groups_before_any_training(tiny_data):
    """Through one and the same initial body, own-sample feature CKA already groups the clients (it follows the
    data alone), while shared-sample CKA is 1 everywhere until the bodies differ."""
    init = local_bodies(tiny_data, "label_groups", train=False)
    assert separates(feature_crsm(init["own"]))
    torch.testing.assert_close(crsm(init["shared"], "linear"), torch.ones(M, M, dtype=torch.float64))


def test_homogeneous_data_weighs_clients_equally_with_shared_samples_only(homogeneous):
    """§4.3: "When the data distribution is homogeneous, all clients would be weighed equally and FedSHIBU would
    equal FedBABU". With shared samples they are; with own samples each client keeps several times 1/m."""
    shared, own = crsm(homogeneous["shared"], "linear"), crsm(homogeneous["own"], "linear")
    assert float((row_weights(shared) - 1 / M).abs().max()) < 0.005
    assert float(row_weights(own).diagonal().min()) > 3 / M


def test_the_uniform_rule_calls_the_uniform_crsm_uniform_and_a_grouped_or_identity_one_not():
    """Every weight within UNIFORM_SHARE of 1/N: the all-ones CRSM and CKA values all near 1 are uniform; the group
    CRSM (weights 0 and 2/N), the identity and one client that keeps twice its share are not."""
    from fedlib.crsm import UNIFORM_SHARE, control_crsm, group_crsm, uniform_deviation
    assert uniform_deviation(control_crsm(M, "uniform")) == pytest.approx(0.0)
    near = torch.full((M, M), 0.97, dtype=torch.float64).fill_diagonal_(1.0)
    assert uniform_deviation(near) <= UNIFORM_SHARE
    assert uniform_deviation(control_crsm(M, "identity")) == pytest.approx(M - 1)
    assert uniform_deviation(group_crsm(list(range(M)), GROUPS)) == pytest.approx(1.0)
    keeps_twice = torch.ones(M, M, dtype=torch.float64)
    keeps_twice[0, 0] = 2.0 * (M - 1) / (M - 2)  # client 0 keeps about 2/N of its own body
    assert uniform_deviation(keeps_twice) > UNIFORM_SHARE


def test_crsm_reading_reads_the_second_half_of_a_run():
    """A run's CRSM is read over rounds (R/2, R]: a grouped CRSM in its first half does not count, in its second it
    does; the self-weight range is every client's, not the mean."""
    from fedlib.crsm import crsm_reading, group_crsm
    grouped, ones = group_crsm(list(range(M)), GROUPS).tolist(), torch.ones(M, M).tolist()
    early = [{"round": r, "crsm": grouped if r <= 2 else ones} for r in range(1, 5)]
    got = crsm_reading(early, 4)
    assert got["deviation"] == pytest.approx(0.0) and got["rounds"] == 2 and got["clients"] == M
    late = [{"round": r, "crsm": grouped if r == 4 else ones} for r in range(1, 5)]
    got = crsm_reading(late, 4)
    assert got["deviation"] == pytest.approx(1.0) and got["self_min"] == pytest.approx(0.1)
    assert got["self_max"] == pytest.approx(0.2)
    assert crsm_reading([{"round": 4}], 4) is None
