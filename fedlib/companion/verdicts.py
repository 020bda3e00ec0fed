"""Verdicts on the papers' claims: one function decides every claim of every notebook.

A claim is a statement about an effect ``d`` (a difference of accuracies, in points, or a cost
ratio) and the region the paper puts it in: ``d > margin`` ("greater"), ``d >= -margin``
("at_least"), ``|d| <= margin`` ("within") or ``d < -margin`` ("less"). :func:`decide` estimates
``d`` from the seeds with a 95 % **t interval** (paired over seeds when both sides have the same
seeds, Welch's otherwise) and returns one of four verdicts:

* **reproduced** — the whole interval lies in the claim's region (a closed region, "at_least" or
  "within", includes its edge: d = 0 exactly reproduces ``d >= 0``);
* **contradicted** — the whole interval lies outside it;
* **inconclusive** — the interval straddles the region's edge, or there are fewer than ``min_seeds``
  seeds;
* **not testable at this scale** — a run it needs diverged, sits within 2 points of chance accuracy
  or is off its plateau (:func:`plateau_rise`: it still rose more than :data:`PLATEAU_RISE` points
  over its last 20 % of rounds, or was not evaluated often enough to tell), or the scale cannot
  train the artifact (:func:`not_testable`).

**The margin policy** (:data:`MARGINS`, :func:`policy_margin`), one rule for every claim: a
direction claim ("beats", "trails", "lowers", "is larger") is tested against 0 (a ratio against 1);
a claim that two things are "comparable", "equivalent" or "at least as good" uses the one margin of
its unit: 1 accuracy point (the papers call gaps of up to 0.63 points "comparable": FedIntR §IV-C,
FedProx 70.03 vs FedIntR 70.66 at β = 5; §IV-B, FedIntR 41.48 vs FedCKA 41.91), 0.01 CKA (the papers
read similarities to two decimals). No claim gets a margin the paper does not imply; every region
prints the rule it came from.

Each comparative verdict carries two readings, as replication studies report them: its **direction**
(the verdict above) and its **size** (:meth:`Verdict.size`): the paper's own effect (``paper_d``)
inside our interval ("consistent with the paper's size"), beyond it ("smaller than the paper's" /
"larger than the paper's"). An inconclusive row also states how many seeds a side would decide it
(:func:`seeds_needed`), and every decided row its one-sided p value for a family-wise (Holm) reading
over a paper's rows (:func:`holm`).

Cost claims (:func:`decide_ratio`) are decided on the median of at least 5 interleaved repeats of a
ratio, with the min–max spread of the repeats as the interval. ``pending`` is not a verdict: the
records are not in the store yet (a claim one of whose finished runs already diverged or ended off
its plateau is not testable at once: :func:`fedlib.companion.grid.spoilt`).
"""

from __future__ import annotations

import math
import numbers
import operator
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Mapping, Sequence

from scipy import stats

from fedlib.companion.run_checks import (  # noqa: F401  (re-exported)
    PLATEAU_METRICS, PLATEAU_RISE, incomplete, learning_warnings, off_plateau,
    off_plateau_by_every_metric, plateau_rise)

__all__ = [
    "VERDICTS", "REGIONS", "Verdict", "decide", "decide_ratio", "not_testable", "pending",
    "CHANCE_MARGIN", "PLATEAU_RISE", "PLATEAU_METRICS", "plateau_rise", "off_plateau",
    "off_plateau_by_every_metric", "MARGINS", "policy_margin", "seeds_needed", "holm", "SIZES"
]

VERDICTS = ("reproduced", "contradicted", "inconclusive", "not testable at this scale")
PENDING = "pending"
REGIONS = ("greater", "at_least", "within", "less")
# points: a run within this of chance accuracy did not learn enough to test anything
CHANCE_MARGIN = 2.0
CONFIDENCE = 0.95

Values = Mapping[int, float] | Sequence[float]
# The one margin of a "comparable" / "at least as good" claim, by the unit of d (the module's
# docstring gives the rule)
MARGINS = {"points": 1.0, "CKA": 0.01}
MARGIN_RULES = {"points": "comparable: ±1 point, the margin policy",
                "CKA": "comparable: ±0.01 CKA, the margin policy"}
SIZES = ("consistent with the paper's size", "smaller than the paper's", "larger than the paper's")
# the chance that the seeds_needed per side decide a row whose true effect is the target
POWER = 0.8


def policy_margin(kind: str, unit: str = "points") -> tuple[float, str]:
    """``(margin, rule)`` of the margin policy for a claim of ``kind`` on d in ``unit``: 0
    ("direction") for "greater" and "less"; :data:`MARGINS` for "within" and "at_least"; a ratio's
    direction is against 1."""
    if kind not in REGIONS:
        raise ValueError(f"decide: kind={kind!r}; valid kinds: {', '.join(REGIONS)}.")
    if unit not in (*MARGINS, "ratio"):
        raise ValueError(f"decide: unit={unit!r}; valid units: {', '.join([*MARGINS, 'ratio'])}.")
    if kind in ("greater", "less"):
        return 0.0, "direction: against 1" if unit == "ratio" else "direction: against 0"
    if unit == "ratio":
        raise ValueError(f"decide: kind={kind!r} on a ratio has no margin in the policy; state it "
                         "as 'greater' or 'less' than 1.")
    return MARGINS[unit], MARGIN_RULES[unit]


@dataclass(frozen=True)
class Verdict:
    """One claim's verdict and the numbers that decided it (``means`` per side, ``n`` seeds per
    side)."""

    claim: str
    # where the paper makes it: "FedIntR Table I", "FedCKA (Appl. Sci.) §4.2, 'FedCKA ...'"
    source: str
    verdict: str
    n: dict[str, int] = field(default_factory=dict)
    means: dict[str, float] = field(default_factory=dict)
    estimate: float = math.nan  # the effect d (ours)
    interval: tuple[float, float] = (math.nan, math.nan)
    region: str = ""  # the claim as an inequality on d, e.g. "d > 0" or "|d| <= 0.5"
    margin: float = math.nan
    method: str = ""  # "paired t 95 %", "Welch t 95 %", "median of 7 repeats, min-max"
    paper: str = ""  # the paper's own number for the effect, when it gives one
    why: str = ""  # what made it inconclusive / not testable
    # what it was decided on where that differs from the paper: "Fashion-MNIST, simple CNN; the
    # paper: CIFAR-10"
    data: str = ""
    # one of the project's own comparisons (a control or fidelity target), not a paper's claim
    control: bool = False
    paper_d: float = math.nan  # the paper's effect on d's scale, when it gives one
    kind: str = ""  # the region's kind (REGIONS)
    unit: str = ""  # d's unit: "points", "CKA" or "ratio"
    p: float = math.nan  # one-sided p value of the decision made (decided rows of a t interval)
    # seeds a side that would decide an inconclusive row (seeds_needed), None when none would
    seeds: int | None = None
    # the named finding this row belongs to, with its mechanism (several rows, one phenomenon)
    finding: str = ""

    def size(self) -> str:
        """The size reading: where the paper's effect lies against our interval (:data:`SIZES`); ""
        when there is no interval or no paper effect. "Smaller" / "larger" compare magnitudes in the
        claim's direction."""
        lo, hi = self.interval
        finite = math.isfinite(self.paper_d) and math.isfinite(lo) and math.isfinite(hi)
        if not finite or self.kind not in REGIONS:
            return ""
        if lo <= self.paper_d <= hi:
            return SIZES[0]
        below = hi < self.paper_d  # ours below the paper's value
        up = self.kind in ("greater", "at_least") or (self.kind == "within" and self.paper_d >= 0)
        return SIZES[1] if below == up else SIZES[2]

    def line(self) -> str:
        """One line: verdict, claim, source, n, means, estimate, interval, region."""
        head = f"[{self.verdict}] {self.claim} ({self.source})"
        if self.verdict == PENDING:
            return f"{head} — {self.why}"
        parts = []
        if self.means:
            parts.append(", ".join(f"{k} {v:.2f} (n={self.n.get(k, '?')})"
                                   for k, v in self.means.items()))
        if math.isfinite(self.estimate):
            lo, hi = self.interval
            parts.append(f"d = {self.estimate:+.2f}, {self.method} [{lo:+.2f}, {hi:+.2f}] vs "
                         f"{self.region}")
        if self.paper:
            parts.append(f"paper: {self.paper}")
        if self.size():
            parts.append(f"{self.size()} ({self.paper_d:+.2f})")
        if self.seeds is not None:
            parts.append(f"{self.seeds} seeds a side would decide it")
        if self.why:
            parts.append(self.why)
        return head + (" — " + "; ".join(parts) if parts else "")

    def noted(self, note: str) -> "Verdict":
        """This verdict with ``note`` added to its why (a pending one as it is)."""
        why = "; ".join(filter(None, (self.why, note)))
        return self if not note or self.verdict == PENDING else replace(self, why=why)

    def to_dict(self) -> dict[str, Any]:
        """As JSON holds it: numbers rounded, a non-finite one (a diverged side's mean) None, never
        NaN."""
        def num(x: float) -> float | None:
            return round(x, 4) if math.isfinite(x) else None
        d = asdict(self)
        d["interval"] = [num(x) for x in self.interval]
        d["estimate"], d["margin"] = num(d["estimate"]), num(d["margin"])
        d["paper_d"] = num(self.paper_d)
        d["p"] = None if not math.isfinite(self.p) else float(f"{self.p:.4g}")
        d["means"] = {k: num(v) for k, v in self.means.items()}
        d["size"] = self.size()
        return d


def _region(kind: str, margin: float | None, unit: str = "points") -> tuple[float, float, str]:
    """The claim's region as closed bounds ``[r_lo, r_hi]`` and its text naming the margin policy's
    rule: "at_least" and "within" include their edge (d = 0 reproduces ``d >= 0``); the open edge of
    "greater" and "less" is moved to the next float inward, so an interval ending on it is
    outside."""
    ref = 1.0 if unit == "ratio" else 0.0
    policy, rule = policy_margin(kind, unit)
    margin = policy if margin is None else margin
    if isinstance(margin, bool) or not (isinstance(margin, numbers.Real) and
                                        math.isfinite(margin) and margin >= 0):
        raise ValueError(f"decide: margin={margin!r} must be a finite number >= 0 (points or ratio "
                         "units).")
    if margin != policy:
        raise ValueError(f"decide: margin={margin:g} for a {kind!r} claim in {unit}; the margin "
                         f"policy gives {policy:g} ({rule}): leave margin unset.")
    m = float(margin)
    lo, hi, text = {"greater": (math.nextafter(ref, math.inf), math.inf, f"d > {ref:g}"),
                    "less": (-math.inf, math.nextafter(ref, -math.inf), f"d < {ref:g}"),
                    "at_least": (-m, math.inf, f"d >= {-m:g}" if m else "d >= 0"),
                    "within": (-m, m, f"|d| <= {m:g}")}[kind]
    return lo, hi, f"{text} ({rule})"


def _seed(k: Any) -> int:
    """A seed key as an int: 3, numpy's 3 and "3" are one seed (a str key would never pair with an
    int one)."""
    if not isinstance(k, bool):
        if isinstance(k, str) and k.strip().lstrip("-").isdigit():
            return int(k)
        if isinstance(k, float) and k.is_integer():
            return int(k)
        try:
            return operator.index(k)
        except TypeError:
            pass
    raise ValueError(f"decide: seed key {k!r} is not a whole number; key the values by seed, e.g. "
                     "{0: 85.1, 1: 84.9}, or pass a list.")


def _values(x: Values) -> tuple[dict[Any, float], bool]:
    if isinstance(x, Mapping):
        out: dict[int, float] = {}
        for k, v in x.items():
            if (s := _seed(k)) in out:
                raise ValueError(f"decide: seed {s} is given twice ({list(x)}); give each seed "
                                 "once.")
            out[s] = float(v)
        return out, True
    return {i: float(v) for i, v in enumerate(x)}, False


def _interval(a: dict[Any, float], b: dict[Any, float] | None,
              paired: bool) -> tuple[float, float, float, str, float, float]:
    """(estimate, lo, hi, method, standard error, degrees of freedom) of mean(a) - mean(b) (or
    mean(a))."""
    pct = f"{100 * CONFIDENCE:g} %"
    if b is None or paired:
        d = [a[k] - (b[k] if b is not None else 0.0) for k in a]
        n, m = len(d), sum(d) / len(d)
        se = math.sqrt(sum((x - m) ** 2 for x in d) / (n - 1)) / math.sqrt(n)
        h = stats.t.ppf(0.5 + CONFIDENCE / 2, n - 1) * se
        return m, m - h, m + h, ("paired t " if b is not None else "t ") + pct, se, float(n - 1)
    va, vb = list(a.values()), list(b.values())
    ma, mb = sum(va) / len(va), sum(vb) / len(vb)
    sa = sum((x - ma) ** 2 for x in va) / (len(va) - 1) / len(va)
    sb = sum((x - mb) ** 2 for x in vb) / (len(vb) - 1) / len(vb)
    se = math.sqrt(sa + sb)
    dof = (sa + sb) ** 2 / ((sa ** 2 / (len(va) - 1) if sa else 0)
                            + (sb ** 2 / (len(vb) - 1) if sb else 0)) if (sa or sb) else 1.0
    h = stats.t.ppf(0.5 + CONFIDENCE / 2, dof) * se
    return ma - mb, ma - mb - h, ma - mb + h, "Welch t " + pct, se, dof


def _p_value(verdict: str, est: float, se: float, dof: float, r_lo: float, r_hi: float) -> float:
    """One-sided p value of the decision made: for "reproduced", that d lies beyond the region's
    nearer edge on the wrong side (the larger of the two for a two-sided region); for
    "contradicted", that d lies inside it."""
    if verdict not in VERDICTS[:2] or not se > 0:
        return math.nan
    inside = [stats.t.sf((est - r_lo) / se, dof) if math.isfinite(r_lo) else 0.0,
              stats.t.cdf((est - r_hi) / se, dof) if math.isfinite(r_hi) else 0.0]
    if verdict == "reproduced":
        return float(max(inside))
    if est <= r_lo:
        return float(stats.t.cdf((est - r_lo) / se, dof))
    return float(stats.t.sf((est - r_hi) / se, dof))


def seeds_needed(target: float, sd: float, r_lo: float, r_hi: float, paired: bool,
                 cap: int = 1000) -> int | None:
    """Seeds a side at which a true effect ``target`` with per-seed spread ``sd`` (of the paired
    differences, or of each side for Welch) puts the 95 % interval on one side of the region's
    nearer edge with :data:`POWER`: the smallest n with sqrt(n) * gap / se1 >= t(0.975, dof) +
    t(POWER, dof). None when ``target`` sits on an edge or more than ``cap`` seeds would be
    needed."""
    edges = [e for e in (r_lo, r_hi) if math.isfinite(e)]
    gap = min(abs(target - e) for e in edges) if edges else math.inf
    if not (gap > 0 and math.isfinite(gap) and sd > 0):
        return None
    se1 = sd * (1.0 if paired else math.sqrt(2.0))
    for n in range(2, cap + 1):
        dof = n - 1 if paired else 2 * n - 2
        need = stats.t.ppf(0.5 + CONFIDENCE / 2, dof) + stats.t.ppf(POWER, dof)
        if math.sqrt(n) * gap / se1 >= need:
            return n
    return None


def holm(ps: Sequence[float], level: float = (1 - CONFIDENCE) / 2) -> list[bool]:
    """Holm's step-down over one family's one-sided p values (NaN: not a t decision, passed through
    as held): whether each decision still holds at family-wise ``level``."""
    idx = sorted((i for i, p in enumerate(ps) if math.isfinite(p)), key=lambda i: ps[i])
    m, held, running = len(idx), [True] * len(ps), 0.0
    for rank, i in enumerate(idx):
        running = max(running, min(1.0, (m - rank) * ps[i]))
        held[i] = running <= level
    return held


def _place(lo: float, hi: float, r_lo: float, r_hi: float) -> str:
    """Where the interval [lo, hi] lies relative to the claim's closed region [r_lo, r_hi]
    (:func:`_region`)."""
    if r_lo <= lo and hi <= r_hi:
        return "reproduced"
    return "contradicted" if hi < r_lo or lo > r_hi else "inconclusive"


def decide(claim: str, source: str, a: Values, b: Values | None = None, *, kind: str = "greater",
           margin: float | None = None, unit: str = "points", names: tuple[str, str] = ("A", "B"),
           chance: float | None = None, runs: Sequence[float] = (), diverged: Sequence[str] = (),
           off: Sequence[str] = (), min_seeds: int = 3, paper: str = "", paper_d: float = math.nan,
           finding: str = "") -> Verdict:
    """The verdict on ``claim``: the effect ``d = mean(a) - mean(b)`` (``b=None``: ``d = mean(a)``)
    against the region ``kind`` in ``unit`` with the margin policy's margin (:func:`policy_margin`;
    ``margin``, when given, must equal it). ``a``/``b`` are per-seed values (``{seed: value}`` pairs
    by seed when both have the same seeds). ``chance`` (accuracy in points, e.g. 10 for ten
    classes): any value of ``a``, ``b`` or ``runs`` (the underlying accuracies when ``a``/``b`` are
    differences) within :data:`CHANCE_MARGIN` of it makes the claim not testable, as does any name
    in ``diverged`` and any entry of ``off`` (runs off their plateau: ``"<run>: <why>"``,
    :func:`off_plateau`). ``paper_d``: the paper's effect on d's scale (the size reading; the power
    of an inconclusive row is computed at it, else at ours). Values must be finite; ``min_seeds`` at
    least 2."""
    if not (isinstance(min_seeds, int) and min_seeds >= 2):
        raise ValueError(f"decide: min_seeds={min_seeds!r} must be a whole number >= 2 (a t "
                         "interval needs two seeds a side).")
    if b is not None and (len(names) != 2 or names[0] == names[1]):
        raise ValueError(f"decide: names={names!r} must be two different names, one per side (e.g. "
                         "('FedIntR', 'FedAvg')).")
    if chance is not None and (isinstance(chance, bool) or not isinstance(chance, numbers.Real)
                               or not 0 <= chance <= 100):
        raise ValueError(f"decide: chance={chance!r} must be an accuracy in points from 0 to 100 "
                         "(e.g. 10 for ten classes), or None.")
    r_lo, r_hi, text = _region(kind, margin, unit)
    av, amap = _values(a)
    bv, bmap = _values(b) if b is not None else (None, False)
    means = {names[0]: sum(av.values()) / len(av)} if av else {}
    if bv:
        means[names[1]] = sum(bv.values()) / len(bv)
    n = {names[0]: len(av)} | ({names[1]: len(bv)} if bv is not None else {})
    base = dict(claim=claim, source=source, n=n, means=means, region=text,
                margin=policy_margin(kind, unit)[0], paper=paper, paper_d=float(paper_d), kind=kind,
                unit=unit, finding=finding)
    if diverged:
        return Verdict(**base, verdict=VERDICTS[3], why=f"diverged: {', '.join(diverged)}")
    if off:
        why = f"{len(off)} run(s) off their plateau: {'; '.join(off[:3])}"
        return Verdict(**base, verdict=VERDICTS[3], why=why + (" ..." if len(off) > 3 else ""))
    if any(not math.isfinite(v) for v in [*av.values(), *(bv or {}).values(), *runs]):
        return Verdict(**base, verdict=VERDICTS[3], why="a run has a non-finite result")
    if chance is not None:
        low = [v for v in [*(runs or [*av.values(), *(bv or {}).values()])]
               if v <= chance + CHANCE_MARGIN]
        if low:
            return Verdict(**base, verdict=VERDICTS[3],
                           why=f"{len(low)} run(s) within {CHANCE_MARGIN:g} points of chance "
                               f"({chance:g} %): min {min(low):.2f}")
    if len(av) < min_seeds or (bv is not None and len(bv) < min_seeds):
        return Verdict(**base, verdict=VERDICTS[2], why=f"fewer than {min_seeds} seeds per side")
    paired = bool(bv is not None and amap and bmap and set(av) == set(bv))
    est, lo, hi, method, se, dof = _interval(av, bv, paired)
    verdict = _place(lo, hi, r_lo, r_hi)
    seeds = None
    if verdict == VERDICTS[2]:
        k = len(av) if bv is None or paired else min(len(av), len(bv))
        sd = se * math.sqrt(k) / (1.0 if bv is None or paired else math.sqrt(2.0))
        seeds = seeds_needed(paper_d if math.isfinite(paper_d) else est, sd, r_lo, r_hi,
                             bv is None or paired)
    return Verdict(**base, verdict=verdict, estimate=est, interval=(lo, hi), method=method,
                   seeds=seeds, p=_p_value(verdict, est, se, dof, r_lo, r_hi))


def decide_ratio(claim: str, source: str, ratios: Sequence[float], *, kind: str = "greater",
                 threshold: float = 1.0, min_repeats: int = 5, paper: str = "") -> Verdict:
    """A cost claim on a ratio (e.g. a method's time per round over FedAvg's, timed interleaved in
    one process): the median of ``ratios`` against ``threshold`` (``kind`` "greater": ratio >
    threshold, "less": < threshold). Reproduced or contradicted only when the whole min–max spread
    of the repeats is on one side."""
    if kind not in ("greater", "less"):
        raise ValueError(f"decide_ratio: kind={kind!r}; valid kinds: 'greater', 'less'.")
    if isinstance(threshold, bool) or not (isinstance(threshold, numbers.Real) and
                                           math.isfinite(threshold) and threshold > 0):
        raise ValueError(f"decide_ratio: threshold={threshold!r} must be a finite number > 0 (a "
                         "ratio, e.g. 1.0).")
    if any(not (math.isfinite(float(r)) and float(r) > 0) for r in ratios):
        raise ValueError(f"decide_ratio: every ratio must be finite and > 0, got {list(ratios)}.")
    if not (isinstance(min_repeats, int) and min_repeats >= 1):
        raise ValueError(f"decide_ratio: min_repeats={min_repeats!r} must be a whole number >= 1.")
    rs = sorted(float(r) for r in ratios)
    text = f"ratio {'>' if kind == 'greater' else '<'} {threshold:g}"
    base = dict(claim=claim, source=source, n={"repeats": len(rs)}, region=text,
                margin=float(threshold), paper=paper, kind=kind, unit="ratio")
    if len(rs) < min_repeats:
        return Verdict(**base, verdict=VERDICTS[2], why=f"fewer than {min_repeats} repeats")
    med = rs[len(rs) // 2] if len(rs) % 2 else (rs[len(rs) // 2 - 1] + rs[len(rs) // 2]) / 2
    lo, hi = rs[0], rs[-1]
    if kind == "greater":  # ratio > t: a repeat at t is not above it
        v = ("reproduced" if lo > threshold else "contradicted" if hi <= threshold
             else "inconclusive")
    else:
        v = ("reproduced" if hi < threshold else "contradicted" if lo >= threshold
             else "inconclusive")
    return Verdict(**base, verdict=v, estimate=med, interval=(lo, hi),
                   method=f"median of {len(rs)} repeats, min-max")


def not_testable(claim: str, source: str, why: str, paper: str = "", paper_d: float = math.nan,
                 finding: str = "") -> Verdict:
    """A claim this scale cannot test (e.g. its artifact cannot reach its plateau in the scale's
    budget)."""
    return Verdict(claim=claim, source=source, verdict=VERDICTS[3], why=why, paper=paper,
                   paper_d=float(paper_d), finding=finding)


def pending(claim: str, source: str, why: str = "runs not in the results store yet") -> Verdict:
    """Not a verdict: the runs the claim needs are not stored yet (a notebook rendered with
    ``train=False``)."""
    return Verdict(claim=claim, source=source, verdict=PENDING, why=why)
