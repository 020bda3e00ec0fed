"""Tests for fedlib.kernels: CKA family, similarity registry, spectral metrics, EVBMF."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from fedlib import kernels as K
from fedlib.kernels._base import _numpy_median

DT = torch.float64


def _randn(*shape: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=DT)


@pytest.fixture(scope="module")
def kornblith_xy() -> tuple[torch.Tensor, torch.Tensor]:
    """Kornblith et al.'s demo data (numpy legacy seeding)."""
    np.random.seed(1337)
    x = np.random.randn(100, 10)
    y = np.random.randn(100, 10) + x
    return torch.from_numpy(x), torch.from_numpy(y)


def _orthogonal(d: int, seed: int) -> torch.Tensor:
    q, _ = torch.linalg.qr(_randn(d, d, seed=seed))
    return q


# ---------------------------------------------------------------------------------------------- golden
def test_golden_values_kornblith_demo(kornblith_xy):
    x, y = kornblith_xy
    assert K.linear_cka(x, y).item() == pytest.approx(0.55761, abs=5e-6)
    assert K.linear_cka(x, y, form="gram").item() == pytest.approx(0.55761, abs=5e-6)
    assert K.linear_cka(x, y, form="feature").item() == pytest.approx(0.55761, abs=5e-6)
    assert K.rbf_cka(x, y, threshold=0.5).item() == pytest.approx(0.65483, abs=5e-6)
    assert K.debiased_cka(x, y).item() == pytest.approx(0.51346, abs=5e-6)


def test_golden_values_float32_input(kornblith_xy):
    x, y = (t.float() for t in kornblith_xy)
    assert K.linear_cka(x, y).dtype == torch.float64  # float64 accumulation by default
    assert K.linear_cka(x, y).item() == pytest.approx(0.55761, abs=5e-6)
    out32 = K.linear_cka(x, y, dtype=None)
    assert out32.dtype == torch.float32
    assert out32.item() == pytest.approx(0.55761, abs=1e-4)


def test_rbf_median_averages_middle_values():
    # n=2: D entries {0, 0, d, d}; numpy median = d/2, torch.median would give 0.
    v = torch.tensor([[0.0, 4.0], [4.0, 0.0]], dtype=DT)
    assert _numpy_median(v).item() == 2.0
    w = torch.tensor([5.0, 1.0, 3.0], dtype=DT)
    assert _numpy_median(w).item() == 3.0
    vals = _randn(7, 9, seed=3)
    assert _numpy_median(vals).item() == pytest.approx(float(np.median(vals.numpy())), abs=1e-15)


# ---------------------------------------------------------------------------------------------- properties
@pytest.mark.parametrize("fn", [K.linear_cka, K.rbf_cka, K.debiased_cka])
def test_self_similarity_is_one_and_symmetric(fn):
    x, y = _randn(40, 12, seed=1), _randn(40, 7, seed=2)
    assert fn(x, x).item() == pytest.approx(1.0, abs=1e-12)
    assert fn(x, y).item() == pytest.approx(fn(y, x).item(), abs=1e-12)


def test_invariances_linear_and_rbf():
    x = _randn(50, 8, seed=4)
    y = x @ _randn(8, 6, seed=5) + 0.5 * _randn(50, 6, seed=6)
    q = _orthogonal(8, seed=7)
    shift = _randn(1, 8, seed=8) * 10
    for fn in (K.linear_cka, K.rbf_cka, K.debiased_cka):
        base = fn(x, y).item()
        assert fn(x @ q, y).item() == pytest.approx(base, abs=1e-10)  # orthogonal
        assert fn(3.7 * x, y).item() == pytest.approx(base, abs=1e-10)  # isotropic scaling
        assert fn(x + shift, y).item() == pytest.approx(base, abs=1e-10)  # translation


def test_not_invariant_to_per_feature_scaling():
    x = _randn(50, 8, seed=9)
    y = x[:, :4] + 0.3 * _randn(50, 4, seed=10)
    scale = torch.tensor([100.0, 1, 1, 1, 1, 1, 1, 0.01], dtype=DT)
    assert abs(K.linear_cka(x * scale, y).item() - K.linear_cka(x, y).item()) > 0.05


def test_gram_form_equals_feature_form_and_auto_choice():
    x, y = _randn(30, 5, seed=11), _randn(30, 200, seed=12)
    g = K.linear_cka(x, y, form="gram")
    f = K.linear_cka(x, y, form="feature")
    assert g.item() == pytest.approx(f.item(), abs=1e-12)
    assert K.linear_cka(x, y).item() == pytest.approx(g.item(), abs=1e-12)
    assert K.choose_cka_form(30, 5, 200) == "gram"  # 30*205 < 200*205 + 25
    assert K.choose_cka_form(512, 64, 64) == "feature"
    assert K.choose_cka_form(512, 512, 512) == "gram"  # 3 d^2 > 2 n d once d > 2n/3
    # different widths work in both directions and flatten extra dims
    assert K.linear_cka(_randn(30, 2, 3, 4, seed=13), x).shape == ()


def test_biased_positive_debiased_near_zero_on_independent_data():
    biased, debiased = [], []
    for s in range(20):
        x, y = _randn(32, 64, seed=100 + s), _randn(32, 64, seed=200 + s)
        biased.append(K.linear_cka(x, y).item())
        debiased.append(K.debiased_cka(x, y).item())
    assert 0.1 < np.mean(biased) < 0.9
    assert abs(np.mean(debiased)) < 0.02
    assert np.mean(biased) > 10 * abs(np.mean(debiased))


def test_hsic1_formula_matches_u_centering(kornblith_xy):
    x, y = kornblith_xy
    kx, ly = x @ x.T, y @ y.T
    cka = K.hsic1(kx, ly) / torch.sqrt(K.hsic1(kx, kx) * K.hsic1(ly, ly))
    assert cka.item() == pytest.approx(K.debiased_cka(x, y).item(), abs=1e-12)
    n = x.shape[0]
    u_inner = (K.center_gram(kx, unbiased=True) * K.center_gram(ly, unbiased=True)).sum()
    assert (u_inner / (n * (n - 3))).item() == pytest.approx(K.hsic1(kx, ly).item(), rel=1e-10)


def test_center_gram_equals_hkh():
    k = _randn(9, 9, seed=14)
    k = k @ k.T
    h = torch.eye(9, dtype=DT) - 1.0 / 9
    assert torch.allclose(K.center_gram(k), h @ k @ h, atol=1e-12)


def test_minibatch_cka_single_batch_and_accumulation(kornblith_xy):
    x, y = kornblith_xy
    m = K.MinibatchCKA()
    m.update(x, y)
    assert m.compute().item() == pytest.approx(K.debiased_cka(x, y).item(), abs=1e-12)
    # two batches: the ratio of summed HSIC_1 values
    m.update(x[:50] * 2, y[:50])
    kx, ly = [b @ b.T for b in (x, y)]
    kx2, ly2 = [b @ b.T for b in (x[:50] * 2, y[:50])]
    num = K.hsic1(kx, ly) + K.hsic1(kx2, ly2)
    den = torch.sqrt((K.hsic1(kx, kx) + K.hsic1(kx2, kx2)) * (K.hsic1(ly, ly) + K.hsic1(ly2, ly2)))
    assert m.compute().item() == pytest.approx((num / den).item(), abs=1e-12)
    # matrix mode over layers
    reps = [x, y, x[:, :3]]
    mm = K.MinibatchCKA()
    mm.update(reps)
    assert torch.allclose(mm.compute(), K.cka_matrix(reps, kind="debiased"), atol=1e-12)
    rb = K.MinibatchCKA(kernel="rbf", threshold=0.5)
    rb.update(x, y)
    assert rb.compute().item() == pytest.approx(K.rbf_cka(x, y, threshold=0.5, debiased=True).item(), abs=1e-12)


@pytest.mark.parametrize("kind", ["linear", "debiased", "rbf"])
def test_cka_matrix_equals_pairwise_loop(kind):
    reps = [_randn(24, w, seed=20 + i) for i, w in enumerate([3, 10, 40, 7])]
    reps.append(reps[1] @ _randn(10, 5, seed=30) + 0.1 * _randn(24, 5, seed=31))
    reps.append(torch.ones(24, 4, dtype=DT))  # degenerate
    fn = {"linear": K.linear_cka, "debiased": K.debiased_cka, "rbf": K.rbf_cka}[kind]
    loop = torch.tensor([[fn(a, b).item() for b in reps] for a in reps], dtype=DT)
    for chunk in (None, 1, 4):
        mat = K.cka_matrix(reps, kind=kind, chunk=chunk)
        assert torch.allclose(mat, loop, atol=1e-12), chunk
    cross = K.cka_matrix(reps[:2], reps[2:], kind=kind, chunk=1)
    assert torch.allclose(cross, loop[:2, 2:], atol=1e-12)


# ---------------------------------------------------------------------------------------------- gradients
def test_gradcheck_linear_cka_both_forms():
    x = _randn(6, 3, seed=40).requires_grad_()
    y = _randn(6, 4, seed=41).requires_grad_()
    for form in ("gram", "feature"):
        assert torch.autograd.gradcheck(lambda a, b: K.linear_cka(a, b, form=form), (x, y))
    assert torch.autograd.gradcheck(lambda a, b: K.debiased_cka(a, b), (x, y))


def test_gradients_finite_rbf_and_float32_loss():
    x = _randn(8, 3, seed=42).requires_grad_()
    y = _randn(8, 5, seed=43)
    assert torch.autograd.gradcheck(lambda a: K.rbf_cka(a, y, threshold=0.5), (x,))
    xf = _randn(16, 10, seed=44).float().requires_grad_()
    loss = K.linear_cka(xf, _randn(16, 6, seed=45).float(), dtype=None)
    loss.backward()
    assert xf.grad is not None and xf.grad.dtype == torch.float32 and torch.isfinite(xf.grad).all()


def test_zero_variance_gives_zero_not_nan():
    x = _randn(10, 4, seed=46)
    const = torch.full((10, 3), 0.1, dtype=DT)
    zero = torch.zeros(10, 3, dtype=DT).requires_grad_()
    for fn in (K.linear_cka, K.rbf_cka, K.debiased_cka):
        assert fn(x, const).item() == 0.0
        assert fn(const, const).item() == 0.0
        out = fn(zero, x)
        out.backward()
        assert out.item() == 0.0 and torch.isfinite(zero.grad).all()
        zero.grad = None
    for form in ("gram", "feature"):
        assert K.linear_cka(const, x, form=form).item() == 0.0
        assert K.linear_cka(const.float(), x.float(), form=form, dtype=None).item() == 0.0
    m = K.cka_matrix([x, const])
    assert torch.isfinite(m).all() and m[1, 1] == 0.0 and m[0, 0] == pytest.approx(1.0)
    mb = K.MinibatchCKA()
    mb.update(x, const)
    assert mb.compute().item() == 0.0
    assert K.vec_cosine(zero.detach(), x[:, :3], normalize=True).item() == 0.0


def test_small_n_for_debiased_raises():
    x = _randn(3, 5, seed=47)
    for call in (
        lambda: K.debiased_cka(x, x),
        lambda: K.hsic1(x @ x.T, x @ x.T),
        lambda: K.cka_matrix([x], kind="debiased"),
        lambda: K.MinibatchCKA().update(x, x),
    ):
        with pytest.raises(ValueError, match="at least 4"):
            call()
    assert K.linear_cka(x, x).item() == pytest.approx(1.0)  # biased CKA is defined for n = 3


# ---------------------------------------------------------------------------------------------- registry
def test_similarity_registry_and_table3_metrics():
    x, y = _randn(5, 4, seed=48), _randn(5, 4, seed=49)
    assert set(K.SIMILARITIES) >= {"cka", "kernel_cka", "frobenius", "cosine"}
    assert K.get_similarity("cka") is K.linear_cka
    assert K.get_similarity("kernel_cka") is K.rbf_cka
    assert K.get_similarity("frobenius")(x, y).item() == pytest.approx(((x - y) ** 2).sum().item())
    dot = (x * y).sum()
    assert K.get_similarity("cosine")(x, y).item() == pytest.approx(dot.item())
    cos = dot / (x.norm() * y.norm())
    assert K.vec_cosine(x, y, normalize=True).item() == pytest.approx(cos.item())
    assert "frobenius" in K.DISTANCE_METRICS
    with pytest.raises(ValueError, match="valid names.*cka"):
        K.get_similarity("l2")


def test_bad_input_errors():
    with pytest.raises(ValueError, match="same number of samples"):
        K.linear_cka(_randn(10, 3), _randn(11, 3))
    with pytest.raises(ValueError, match="same number of samples"):
        K.rbf_cka(_randn(10, 3), _randn(11, 3))
    with pytest.raises(ValueError, match="form"):
        K.linear_cka(_randn(10, 3), _randn(10, 3), form="fast")
    with pytest.raises(ValueError, match="sample dim"):
        K.cka_matrix([_randn(10, 3), _randn(11, 3)])
    with pytest.raises(ValueError, match="same shape"):
        K.frobenius_sq(_randn(10, 3), _randn(10, 4))
    with pytest.raises(ValueError, match="kind"):
        K.cka_matrix([_randn(10, 3)], kind="cosine")


def test_no_tf32_restores_settings():
    m = torch.backends.cuda.matmul
    before = m.fp32_precision if hasattr(m, "fp32_precision") else m.allow_tf32
    with K.no_tf32():
        if hasattr(m, "fp32_precision"):
            assert m.fp32_precision == "ieee"
    after = m.fp32_precision if hasattr(m, "fp32_precision") else m.allow_tf32
    assert before == after


# ---------------------------------------------------------------------------------------------- spectra
def test_effective_rank_entropy_stable_rank_condition():
    s = torch.tensor([3.0, 1.0], dtype=DT)
    assert K.entropy_of_singular_values(s).item() == pytest.approx(0.562335, abs=1e-6)
    assert K.effective_rank(s).item() == pytest.approx(1.754765, abs=1e-6)
    assert K.effective_rank(torch.eye(4, dtype=DT)).item() == pytest.approx(4.0, abs=1e-12)
    rank1 = torch.outer(_randn(7, seed=50), _randn(5, seed=51))
    assert K.effective_rank(rank1).item() == pytest.approx(1.0, abs=1e-6)
    assert K.stable_rank(torch.diag(s)).item() == pytest.approx(1.111111, abs=1e-6)
    assert K.stable_rank(s).item() == pytest.approx(10 / 9)
    assert K.condition_number(torch.diag(s)).item() == pytest.approx(3.0)
    assert K.condition_number(torch.tensor([4.0, 2.0, 0.0], dtype=DT)).item() == pytest.approx(2.0)


def test_spectral_metrics_of_zero_and_empty():
    for z in (torch.zeros(3, 4, dtype=DT), torch.zeros(0, dtype=DT), torch.zeros(3, dtype=DT)):
        for fn in (K.entropy_of_singular_values, K.effective_rank, K.stable_rank, K.condition_number):
            v = fn(z)
            assert v.item() == 0.0 and not math.isnan(v.item())
    with pytest.raises(ValueError, match="non-negative"):
        K.effective_rank(torch.tensor([1.0, -1.0]))
    with pytest.raises(ValueError, match="unfold_conv"):
        K.effective_rank(torch.zeros(2, 2, 2, 2))


def _planted(seed: int, noise: float = 0.1) -> tuple[torch.Tensor, torch.Tensor]:
    u, _ = torch.linalg.qr(_randn(60, 3, seed=seed))
    v, _ = torch.linalg.qr(_randn(40, 3, seed=seed + 1))
    signal = u @ torch.diag(torch.tensor([10.0, 7.0, 5.0], dtype=DT)) @ v.T
    return signal, noise * _randn(60, 40, seed=seed + 2)


def test_tau_bar():
    assert K.evbmf_tau_bar(1.0) == pytest.approx(2.5129, abs=1e-4)
    for a in (0.1, 0.5, 0.9):
        t = K.evbmf_tau_bar(a)
        assert math.log1p(t) / t + a * math.log1p(t / a) / t == pytest.approx(1.0, abs=1e-10)
        assert t == pytest.approx(2.5129 * math.sqrt(a), rel=0.05)


def test_evbmf_planted_rank_scaling_and_noise():
    for seed in (0, 10, 20):
        signal, noise = _planted(seed)
        r = K.evbmf(signal + noise)
        assert r.rank == 3
        assert r.sigma2 == pytest.approx(0.01, rel=0.2)
        assert torch.all(r.singular_values < torch.linalg.svdvals(signal + noise)[:3])  # shrinkage
        assert torch.allclose(r.singular_values, torch.tensor([10.0, 7.0, 5.0], dtype=DT), rtol=0.05)
        scaled = K.evbmf(5.0 * (signal + noise))
        assert scaled.rank == 3 and scaled.sigma2 == pytest.approx(25 * r.sigma2, rel=1e-6)
        t = K.evbmf((signal + noise).T, compute_uv=True)  # orientation does not matter
        assert t.rank == 3 and t.sigma2 == pytest.approx(r.sigma2, rel=1e-6)
        recon = t.u @ torch.diag(t.singular_values) @ t.v.T
        assert recon.shape == (40, 60) and (recon - signal.T).norm() < 0.5 * noise.norm()
        pure = K.evbmf(noise)
        assert pure.rank == 0 and pure.singular_values.numel() == 0
        assert pure.sigma2 == pytest.approx(0.01, rel=0.2)
        assert K.effective_rank(pure.singular_values).item() == 0.0
    fixed = K.evbmf(signal + noise, sigma2=0.01)
    assert fixed.rank == 3 and fixed.sigma2 == 0.01
    assert K.evbmf(torch.zeros(5, 8)).rank == 0


def test_unfold_conv_and_layer_metric():
    w = _randn(16, 8, 3, 3, seed=60)
    assert K.unfold_conv(w, "input").shape == (8, 16 * 9)
    assert K.unfold_conv(w, "output").shape == (16, 8 * 9)
    assert torch.equal(K.unfold_conv(w, "input")[2, :9], w[0, 2].reshape(-1))
    raw = K.layer_metric(w, "erank", denoise=None)
    expect = 0.5 * (
        K.effective_rank(K.unfold_conv(w, "input")).item() + K.effective_rank(K.unfold_conv(w, "output")).item()
    )
    assert raw == pytest.approx(expect)
    assert K.layer_metric(w, "erank") == 0.0  # random init is pure noise for EVBMF
    signal, noise = _planted(70)
    lin = signal + noise  # 60 x 40 linear weight
    assert K.layer_metric(lin, "rank") == 3
    assert 1.0 < K.layer_metric(lin, "erank") < 3.0
    assert K.layer_metric(lin, "entropy") == pytest.approx(math.log(K.layer_metric(lin, "erank")))
    with pytest.raises(ValueError, match="conv.*linear"):
        K.layer_metric(torch.zeros(5))
    with pytest.raises(ValueError, match="unknown metric"):
        K.layer_metric(w, "qg")


# ----------------------------------------------------------------------------------------- non-finite input
_NONFINITE_CASES = {
    "linear_cka": lambda x, bad: K.linear_cka(x, bad),
    "linear_cka_feature": lambda x, bad: K.linear_cka(bad, x, form="feature"),
    "linear_cka_float32": lambda x, bad: K.linear_cka(x.float(), bad.float(), dtype=None),
    "rbf_cka": lambda x, bad: K.rbf_cka(x, bad),
    "debiased_cka": lambda x, bad: K.debiased_cka(bad, x),
    "debiased_cka_rbf": lambda x, bad: K.debiased_cka(x, bad, kernel="rbf"),
    "hsic1": lambda x, bad: K.hsic1(x @ x.T, bad @ bad.T),
    "center_gram": lambda x, bad: K.center_gram(bad @ bad.T),
    "cka_matrix": lambda x, bad: K.cka_matrix([x, x, bad]),
    "cka_matrix_b": lambda x, bad: K.cka_matrix([x], [x, bad], kind="debiased"),
    "minibatch_cka": lambda x, bad: K.MinibatchCKA().update(x, bad),
    "minibatch_cka_layers": lambda x, bad: K.MinibatchCKA(kernel="rbf").update([x, bad]),
    "frobenius": lambda x, bad: K.frobenius_sq(x, bad),
    "cosine": lambda x, bad: K.vec_cosine(bad, x, normalize=True),
    "effective_rank": lambda x, bad: K.effective_rank(bad),
    "entropy": lambda x, bad: K.entropy_of_singular_values(bad),
    "stable_rank": lambda x, bad: K.stable_rank(bad),
    "condition_number": lambda x, bad: K.condition_number(bad),
    "evbmf": lambda x, bad: K.evbmf(bad),
    "layer_metric": lambda x, bad: K.layer_metric(bad, denoise=None),
}


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
@pytest.mark.parametrize("case", sorted(_NONFINITE_CASES))
def test_non_finite_input_raises_instead_of_a_plausible_number(case, value):
    """One NaN or inf among the activations of a diverged model never reads as "dissimilar" (0) or a rank."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(24, 6, generator=g, dtype=torch.float64)
    bad = torch.randn(24, 6, generator=g, dtype=torch.float64)
    bad[5, 2] = value
    with pytest.raises(ValueError, match="non-finite"):
        _NONFINITE_CASES[case](x, bad)


def test_non_finite_error_names_the_input():
    x = torch.randn(10, 3, dtype=torch.float64)
    bad = x.clone()
    bad[0, 0] = float("nan")
    with pytest.raises(ValueError, match=r"reps_a\[1\]"):
        K.cka_matrix([x, bad])
    with pytest.raises(ValueError, match="effective_rank"):
        K.effective_rank(torch.tensor([1.0, float("inf")]))
