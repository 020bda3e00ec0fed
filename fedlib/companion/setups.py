"""What a claim was decided on where it differs from the paper: the datasets and model of the table
or sentence it cites (:data:`PAPER_SETUPS`) and what a scale changes of the paper's setup."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any, Mapping, Sequence

from fedlib.companion.style import dataset_name
from fedlib.companion.verdicts import Verdict


# Where each paper's claims were made (first matching pattern of a claim's source wins): the
# datasets of the cited table or sentence and the paper's model. A claim decided on other data or
# another model says so.
PAPER_SETUPS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    (r"FedIntR (Table (I|II|V)\b|§IV-B|§IV-F)", ("fmnist", "svhn", "cifar10", "cifar100"),
     "FedIntR CNN (ResNet-20 on CIFAR-100)"),
    (r"FedIntR Table III|FedIntR §IV-C", ("cifar10", "cifar100"),
     "FedIntR CNN (ResNet-20 on CIFAR-100)"),
    (r"FedIntR", ("cifar10",), "FedIntR CNN"),
    (r"FedCKA.*Table 4|Table 4.*FedCKA", ("cifar10", "tinyimagenet"),
     "simple CNN and ResNet-50 on a GTX Titan V"),
    (r"FedCKA.*Table 1", ("cifar10", "cifar100", "tinyimagenet"),
     "simple CNN (ResNet-50 on CIFAR-100, Tiny ImageNet)"),
    (r"FedCKA", ("cifar10",), "simple CNN"),
    (r"FedER|thesis", ("cifar100",), "ResNet-18"),
    (r"FedSHIBU.*Table 1", ("cifar10", "cifar100"), "ResNet-18"),
    (r"FedSHIBU", ("cifar10",), "ResNet-18"),
)
MODEL_NAMES = {"simple_cnn": "simple CNN", "intr_cnn": "FedIntR CNN", "resnet18": "ResNet-18",
               "resnet20": "ResNet-20", "resnet50": "ResNet-50"}


def decided_on(source: str, dataset: str, model: str, device: str = "", timed: bool = False) -> str:
    """What a claim citing ``source`` was decided on, where it differs from the paper
    (:data:`PAPER_SETUPS`): ``"Fashion-MNIST, simple CNN; the paper: CIFAR-10, simple CNN"``; ""
    when the data and model are the paper's. ``timed``: a cost claim, decided on synthetic data on
    ``device``."""
    for pat, datasets, paper_model in PAPER_SETUPS:
        if re.search(pat, source):
            paper = f"{', '.join(dataset_name(d) for d in datasets)}, {paper_model}"
            if timed:
                return f"synthetic data timed on {device or 'this device'}; the paper: {paper}"
            ours = MODEL_NAMES.get(model, model)
            same = dataset in datasets and ours in paper_model
            return "" if same else f"{dataset_name(dataset)}, {ours}; the paper: {paper}"
    return ""


# training and test images of each of the papers' datasets (the papers train and test on all)
IMAGES = {"fmnist": (60_000, 10_000), "svhn": (73_257, 26_032), "cifar10": (50_000, 10_000),
          "cifar100": (50_000, 10_000)}


def setup_changes(cfg: Any, paper: Any, who: str = "the paper") -> str:
    """What ``cfg`` (a run's :class:`~fedlib.config.Config`) changes from ``paper`` (the paper's
    setup on its dataset): images, rounds × local epochs, batch, model options, as ``"at this scale:
    12,000 of the 60,000 training images; ..."``; "" when nothing."""
    tr, te = IMAGES.get(cfg.dataset, (None, None))
    imgs = [f"{n:,} of the {t:,} {w} images" if t else f"{n:,} {w} images"
            for n, t, w in ((cfg.n_train, tr, "training"), (cfg.n_test, te, "test"))
            if n and n != t]
    parts = [", ".join(imgs)] if imgs else []
    if (cfg.rounds, cfg.local_epochs) != (paper.rounds, paper.local_epochs):
        parts.append(f"{cfg.rounds} rounds × {cfg.local_epochs} local epochs ({who}: "
                     f"{paper.rounds} × {paper.local_epochs})")
    if cfg.batch_size != paper.batch_size:
        parts.append(f"batch {cfg.batch_size} ({who}: {paper.batch_size})")
    if dict(cfg.model_kw) != dict(paper.model_kw):
        kw = [", ".join(f"{k}={v}" for k, v in dict(c.model_kw).items()) or "none"
              for c in (cfg, paper)]
        parts.append(f"model options {kw[0]} ({who}: {kw[1]})")
    return "at this scale: " + "; ".join(parts) if parts else ""


def label_rows(verdicts: Any, cfg: Any, paper: Any, notes: Mapping[str, str] | None = None,
               who: str = "the paper") -> list[Verdict]:
    """``verdicts`` with ``data`` saying what they were decided on where it differs from the paper:
    the dataset and model (:func:`decided_on`), this scale's setup (:func:`setup_changes` of ``cfg``
    against ``paper``) and ``notes`` (``{pattern: note}``: the note of the rows whose source
    matches, e.g. one artifact's rounds)."""
    setup, out = setup_changes(cfg, paper, who), []
    for v in verdicts:
        if v.data or v.verdict == "pending":
            out.append(v)
            continue
        other = decided_on(v.source, cfg.dataset, cfg.model)
        head = other or (f"the paper's data and model ({dataset_name(cfg.dataset)}, "
                         f"{MODEL_NAMES.get(cfg.model, cfg.model)})")
        matched = (n for pat, n in (notes or {}).items() if re.search(pat, v.source))
        tail = "; ".join(filter(None, [setup, *matched]))
        out.append(replace(v, data=f"{head}; {tail}" if tail else other))
    return out


# The parts of a run's setup a scale may shrink, as a claim's "decided on" names them where they
# differ
SETUP_FIELDS = (("num_clients", "{} clients"), ("n_train", "{} training images"),
                ("rounds", "{} rounds"), ("local_epochs", "{} local epoch(s)"),
                ("batch_size", "batch {}"))


def _span(values: Any) -> str:
    vs = sorted(set(values), key=lambda v: (v is None, v or 0))
    text = lambda v: "all" if v is None else f"{v:,}"  # noqa: E731
    return text(vs[0]) if len(vs) == 1 else f"{text(vs[0])}-{text(vs[-1])}"


def setup_label(source: str, dataset: str, ours: Sequence[Any], paper: Any) -> str:
    """What a claim citing ``source`` was decided on where it differs from the paper's setup: the
    data and model (:func:`decided_on`) and each of :data:`SETUP_FIELDS` whose values in ``ours``
    (the Configs of the runs it reads) differ from ``paper`` (the paper-scale plan's Config of the
    same artifact). "" when nothing differs."""
    if not ours:
        return decided_on(source, dataset, "")
    diff = [(fmt, _span(getattr(c, f) for c in ours), _span([getattr(paper, f)]))
            for f, fmt in SETUP_FIELDS if {getattr(c, f) for c in ours} != {getattr(paper, f)}]
    head = decided_on(source, dataset, ours[0].model)
    if not diff:
        return head
    o, t = (", ".join(fmt.format(x[k]) for fmt, *x in diff) for k in (0, 1))
    if head:
        mine, theirs = head.split("; the paper: ")
        return f"{mine}, {o}; the paper: {theirs}, {t}"
    model = MODEL_NAMES.get(ours[0].model, ours[0].model)
    return f"{dataset_name(dataset)}, {model} as the paper's, {o}; the paper: {t}"
