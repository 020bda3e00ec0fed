"""EVBMF: empirical variational Bayes matrix factorization (Nakajima et al. 2013), the analytic
global solution."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy.optimize import brentq, minimize_scalar
from torch import Tensor

from fedlib.kernels._base import (
    _check_finite,  # noqa: F401
    _svdvals,  # noqa: F401
)


# --------------------------------------------------------------------------------------------------
# EVBMF (Nakajima et al. 2013)
# --------------------------------------------------------------------------------------------------
@dataclass
class EVBMFResult:
    """Result of :func:`evbmf` (orientation of the input matrix, float64).

    ``singular_values``: the kept, shrunk singular values (length ``rank``, descending); ``sigma2``:
    the (estimated or given) noise variance; ``threshold``: the EVB truncation threshold on singular
    values; ``u``/``v``: left/right singular vectors of the kept components when ``compute_uv=True``
    (``Y_hat = u diag(s) v^T``).
    """

    singular_values: Tensor
    rank: int
    sigma2: float
    threshold: float
    u: Tensor | None = None
    v: Tensor | None = None


def evbmf_tau_bar(alpha: float) -> float:
    """tau-bar(alpha) of Nakajima et al. 2013: the zero of ``Phi(t) + Phi(t / alpha)``,
    ``Phi(z) = ln(z + 1) / z - 1/2``, in ``(sqrt(alpha), ...)``; ~ 2.5129 sqrt(alpha)."""
    if not 0 < alpha <= 1:
        raise ValueError(f"alpha = L/M must be in (0, 1], got {alpha}")

    def phi(z: float) -> float:
        return math.log1p(z) / z - 0.5

    lo, hi = math.sqrt(alpha), 2.5129 * math.sqrt(alpha)
    while phi(hi) + phi(hi / alpha) > 0:  # decreasing function; widen until the sign changes
        hi *= 2.0
    return float(brentq(lambda t: phi(t) + phi(t / alpha), lo, hi, xtol=1e-14, rtol=1e-14))


def _evb_objective(u: np.ndarray, g2: np.ndarray, m: int, alpha: float, h: int,
                   xubar: float) -> np.ndarray:
    """EVB free energy (up to constants and the factor 1/L) at ``sigma2 = exp(u)`` (vectorized over
    ``u``).

    ``sum_h psi0(x_h) + sum_{h<=H, x_h > xubar} psi1(x_h)`` with ``x_h = gamma_h^2 / (M sigma2)``,
    ``psi0(x) = x - ln x``, ``psi1(x) = ln(tau + 1) + alpha ln(tau/alpha + 1) - tau`` and ``tau(x)``
    the larger root of ``tau + alpha/tau = x - 1 - alpha`` (Nakajima et al. 2013; 2015 JMLR 16).
    The ``-ln gamma_h^2`` constants are dropped (so zero singular values are fine), and for kept
    components ``x - tau`` is rewritten as ``1 + alpha + alpha/tau`` to avoid cancellation at large
    ``x``.
    """
    u = np.atleast_1d(np.asarray(u, dtype=np.float64))[:, None]
    x = g2[None, :] / (m * np.exp(u))
    signal = (x > xubar) & (np.arange(g2.size) < h)[None, :]
    b = np.where(signal, x - (1.0 + alpha), 2.0 * math.sqrt(alpha) + 1.0)
    tau = 0.5 * (b + np.sqrt(np.clip(b * b - 4.0 * alpha, 0.0, None)))
    kept = 1.0 + alpha + alpha / tau + np.log1p(tau) + alpha * np.log1p(tau / alpha)
    return (np.where(signal, kept, x) + u).sum(axis=1)


def evbmf(
    y: Tensor | np.ndarray,
    sigma2: float | None = None,
    H: int | None = None,  # noqa: N803 - the paper's symbol
    *,
    compute_uv: bool = False,
    grid: int = 256,
) -> EVBMFResult:
    """Empirical VB matrix factorization, global analytic solution (Nakajima et al. 2013, JMLR 14).

    The matrix is transposed so that ``L <= M``; ``alpha = L/M``; ``tau_bar`` from
    :func:`evbmf_tau_bar`. If ``sigma2`` is None the noise variance minimizes the EVB free energy
    over ``[gamma_min^2 / (M x_bar), ||Y||_F^2 / (LM)]`` (``x_bar = (1 + tau_bar)(1 +
    alpha/tau_bar)``): a log-spaced grid of ``grid`` points, then
    ``scipy.optimize.minimize_scalar(method="bounded")`` around the best one.  Components with
    ``gamma_h > sqrt(M sigma2 x_bar)`` (at most ``H``) are kept and shrunk: ``gamma_hat = gamma/2 [1
    - (L+M) s2/gamma^2 + sqrt((1 - (L+M) s2/gamma^2)^2 - 4 L M s2^2/gamma^4)]``. Pure noise gives
    rank 0 (an empty spectrum).  Scaling ``Y`` by ``c`` scales ``sigma2`` by ``c^2``.
    """
    t = torch.as_tensor(y).detach().to(torch.float64)
    if t.ndim != 2 or t.numel() == 0:
        raise ValueError(f"evbmf expects a non-empty 2-D matrix, got shape {tuple(t.shape)}")
    _check_finite(t, "evbmf input")
    transposed = t.shape[0] > t.shape[1]
    if transposed:
        t = t.T
    big_l, big_m = t.shape
    h = big_l if H is None else int(H)
    if not 1 <= h <= big_l:
        raise ValueError(f"H must be in [1, min(Y.shape)={big_l}], got {H}")
    if compute_uv:  # SVD of the tall t^T = V S U^T (faster than the wide orientation)
        vv, s, uh = torch.linalg.svd(t.T, full_matrices=False)
        uu = uh.T
    else:
        s = _svdvals(t)
    g = s.cpu().numpy()
    g2 = g * g
    alpha = big_l / big_m
    tau_bar = evbmf_tau_bar(alpha)
    xubar = (1.0 + tau_bar) * (1.0 + alpha / tau_bar)

    empty = EVBMFResult(s.new_zeros(0), 0, 0.0, 0.0, None, None)
    if sigma2 is None:
        ub = float(g2.sum()) / (big_l * big_m)
        if not ub > 0:
            return empty  # all-zero matrix: nothing to keep, zero noise
        pos = g2[g2 > 0]
        lb = min(float(pos.min()) / (big_m * xubar), ub)
        lo = math.log(lb / ub) - 1e-9
        if lo >= 0.0:
            est = 1.0
        else:
            us = np.linspace(lo, 0.0, grid)
            vals = _evb_objective(us, g2 / ub, big_m, alpha, h, xubar)
            i = int(np.argmin(vals))
            a, b = us[max(i - 1, 0)], us[min(i + 1, grid - 1)]
            res = minimize_scalar(
                lambda u: float(_evb_objective(u, g2 / ub, big_m, alpha, h, xubar)[0]),
                bounds=(a, b), method="bounded", options={"xatol": 1e-10},
            )
            u_best = float(res.x) if res.fun <= vals[i] else float(us[i])
            est = math.exp(u_best)
        sigma2 = est * ub
    sigma2 = float(sigma2)
    if sigma2 < 0:
        raise ValueError(f"sigma2 must be non-negative, got {sigma2}")
    thr = math.sqrt(big_m * sigma2 * xubar)
    keep = int(min(h, int((g > thr).sum())))
    if keep == 0:
        return EVBMFResult(s.new_zeros(0), 0, sigma2, thr, None, None)
    gk = s[:keep]
    a = 1.0 - (big_l + big_m) * sigma2 / gk.square()
    disc = (a.square() - 4.0 * big_l * big_m * sigma2**2 / gk**4).clamp_min(0.0)
    shrunk = 0.5 * gk * (a + torch.sqrt(disc))
    u_out = v_out = None
    if compute_uv:
        u_out, v_out = uu[:, :keep], vv[:, :keep]
        if transposed:
            u_out, v_out = v_out, u_out
    return EVBMFResult(shrunk, keep, sigma2, thr, u_out, v_out)
