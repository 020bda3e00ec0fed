"""Similarity and learning-metric kernels: the CKA family, effective rank, EVBMF.

Representational similarity (FedCKA, FedIntR analyses, FedSHIBU's CRSM)
    * :func:`linear_cka`, :func:`rbf_cka` -- Kornblith et al. 2019, "Similarity of neural network
      representations revisited" (ICML).  ``CKA = <HKH, HLH>_F / (||HKH||_F ||HLH||_F)``.
      :func:`linear_cka_to` -- the same linear CKA as a training loss takes it (FedCKA): one input
      against several references, in the input dtype, under ``vmap``.
    * :func:`debiased_cka`, :func:`hsic1`, :class:`MinibatchCKA` -- unbiased HSIC (Song et al. 2012,
      JMLR 13) via U-centering (Szekely & Rizzo 2014); minibatch CKA of Nguyen et al. 2021 (ICLR).
    * :func:`frobenius_sq`, :func:`vec_cosine` -- the alternative metrics of FedCKA Table 3.
    * :func:`cka_matrix` -- all-pairs CKA (layers x layers, clients x clients) with one batched
      matmul.

Learning metrics (FedER thesis, RMSGD of Hosseini et al.)
    * :func:`entropy_of_singular_values` (the thesis's "ER", Eq. 2.9 with the sign fixed),
      :func:`effective_rank` (Roy & Vetterli 2007), :func:`stable_rank`, :func:`condition_number`.
    * :func:`evbmf` -- empirical variational Bayes matrix factorization, global analytic solution of
      Nakajima et al. 2013 (JMLR 14), noise variance by 1-D minimization of the EVB free energy.
    * :func:`unfold_conv`, :func:`layer_metric` -- RMSGD-style per-layer metrics.

Conventions (documented choices):
    * Inputs with more than two dims are flattened to ``(n, -1)``; rows are samples.
    * CKA kernels accumulate in float64 by default (``dtype=None`` keeps the input dtype, e.g. for a
      fast training loss); they are differentiable either way.  TF32 is disabled inside
      (:func:`no_tf32`).
    * A representation with (numerically) zero variance makes CKA 0/0; we define CKA = 0 there,
      never NaN. "Zero variance" means ``||X - mean(X)||_F <= eps * ||X||_F`` (``eps`` defaults to
      100 machine epsilons of the compute dtype; an all-zero input counts as degenerate).
    * The debiased forms (:func:`debiased_cka`, :func:`hsic1`, :class:`MinibatchCKA`) need n >= 4
      samples per batch (the estimator divides by n(n-3)); smaller n raises ``ValueError``.
    * Spectral metrics of an all-zero / empty spectrum are 0 (entropy, effective rank, stable rank,
      condition number), never NaN.
    * Non-finite input (NaN or +-inf, e.g. the activations of a diverged model) raises
      ``ValueError`` naming the input, in every public kernel: no kernel turns it into a plausible
      number. Inside ``torch.compile`` or CUDA-graph capture the check (a device sync) is skipped
      and the caller owns it.
"""

from __future__ import annotations

from fedlib.kernels._base import center_gram, no_tf32
from fedlib.kernels.cka import (MinibatchCKA, choose_cka_form, cka_matrix, debiased_cka, hsic1,
                                linear_cka, linear_cka_to, rbf_cka, sample_rows)
from fedlib.kernels.evbmf import EVBMFResult, evbmf, evbmf_tau_bar
from fedlib.kernels.metrics import (DISTANCE_METRICS, SIMILARITIES, frobenius_sq, get_similarity,
                                    vec_cosine)
from fedlib.kernels.rank import (condition_number, effective_rank, entropy_of_singular_values,
                                 layer_metric, stable_rank, unfold_conv)

__all__ = [
    "no_tf32",
    "center_gram",
    "linear_cka",
    "linear_cka_to",
    "sample_rows",
    "choose_cka_form",
    "rbf_cka",
    "debiased_cka",
    "hsic1",
    "MinibatchCKA",
    "cka_matrix",
    "frobenius_sq",
    "vec_cosine",
    "SIMILARITIES",
    "DISTANCE_METRICS",
    "get_similarity",
    "entropy_of_singular_values",
    "effective_rank",
    "stable_rank",
    "condition_number",
    "EVBMFResult",
    "evbmf",
    "evbmf_tau_bar",
    "unfold_conv",
    "layer_metric",
]
