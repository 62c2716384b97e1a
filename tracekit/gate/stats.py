"""The gate's statistics: is a change in per-step samples more than noise?

- Mann–Whitney U (`scipy.stats.mannwhitneyu`, two-sided, exact for small samples
  without ties): the test asv uses beside its ratio threshold. It needs no normality —
  step times are skewed (a stall makes a long tail) — and it is used when the smallest
  two-sided p-value the sample sizes allow, 2 / C(n_a + n_b, n_a), is below α (4 vs 4
  steps, or 3 vs 5).
- With fewer steps (or an α so small the exact test cannot reach it), a percentile
  bootstrap interval of the difference in means (`scipy.stats.bootstrap`, resampling
  each side independently, fixed seed): the change is real when the 1 − α interval
  excludes zero *and* every new step lies beyond every base step — a bootstrap of a few
  steps is too narrow to be trusted alone.
- Steps that would decide it: the normal-approximation sample size for a two-sided test
  at α with 80% power, n = 2·(z₁₋α/₂ + z₀.₈)²·s²/Δ², divided by Mann–Whitney's asymptotic
  relative efficiency 3/π (Lehmann, *Nonparametrics*, 1975).

scipy is imported inside the functions: `tracekit analyze` never loads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev

ALPHA = 0.05
CONFIDENCE = 0.95
POWER = 0.8
RESAMPLES = 4000


@dataclass(frozen=True)
class TestResult:
    """What the samples say about new − base."""

    method: str  # "mann-whitney", "bootstrap" or "none"
    n_base: int
    n_new: int
    p_value: float | None  # Mann–Whitney only
    ci: tuple[float, float] | None  # interval of mean(new) − mean(base)
    significant: bool

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "n_base": self.n_base,
            "n_new": self.n_new,
            "p_value": self.p_value,
            "ci": list(self.ci) if self.ci else None,
            "significant": self.significant,
        }


def min_two_sided_p(n_a: int, n_b: int) -> float:
    """The smallest two-sided exact Mann–Whitney p-value n_a vs n_b samples can reach."""
    if n_a < 1 or n_b < 1:
        return 1.0
    return min(1.0, 2 / math.comb(n_a + n_b, n_a))


def mann_whitney(base: list[float], new: list[float]) -> tuple[float, float]:
    """(U of `new` against `base`, two-sided p-value)."""
    from scipy.stats import mannwhitneyu

    res = mannwhitneyu(new, base, alternative="two-sided", method="auto")
    p = float(res.pvalue)
    return float(res.statistic), (1.0 if math.isnan(p) else p)


def bootstrap_ci(
    base: list[float], new: list[float], confidence: float = CONFIDENCE, seed: int = 0
) -> tuple[float, float] | None:
    """Percentile bootstrap interval of mean(new) − mean(base); None below 2 samples a side."""
    if len(base) < 2 or len(new) < 2:
        return None
    if len(set(base)) == 1 and len(set(new)) == 1:  # no spread: the interval is the point
        d = new[0] - base[0]
        return (d, d)
    import numpy as np
    from scipy.stats import bootstrap

    def diff(a, b, axis=-1):
        return np.mean(b, axis=axis) - np.mean(a, axis=axis)

    res = bootstrap(
        (np.asarray(base, float), np.asarray(new, float)),
        diff,
        confidence_level=confidence,
        n_resamples=RESAMPLES,
        method="percentile",
        vectorized=True,
        paired=False,
        rng=np.random.default_rng(seed),
    )
    lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return (lo, hi)


def compare(base: list[float], new: list[float], alpha: float = ALPHA) -> TestResult:
    """Mann–Whitney U when the sizes can reach α, else the bootstrap interval (at
    confidence 1 − α), else none."""
    base = [float(x) for x in base if x is not None and math.isfinite(x)]
    new = [float(x) for x in new if x is not None and math.isfinite(x)]
    ci = bootstrap_ci(base, new, confidence=1 - alpha)
    if min_two_sided_p(len(base), len(new)) < alpha:
        _, p = mann_whitney(base, new)
        return TestResult("mann-whitney", len(base), len(new), p, ci, p < alpha)
    if ci is not None:
        # a percentile bootstrap of a few steps is too narrow: ask also that every new
        # step lies beyond every base step, the most a rank test could see
        apart = min(new) > max(base) or max(new) < min(base)
        significant = (ci[0] > 0 or ci[1] < 0) and apart
        return TestResult("bootstrap", len(base), len(new), None, ci, significant)
    return TestResult("none", len(base), len(new), None, None, False)


def steps_to_decide(
    base: list[float], new: list[float], alpha: float = ALPHA, power: float = POWER
) -> int | None:
    """Steps per run a Mann–Whitney test would need to call the observed difference
    at α with the given power (None without spread or without a difference)."""
    if len(base) < 2 or len(new) < 2:
        return None
    delta = fmean(new) - fmean(base)
    var = ((len(base) - 1) * stdev(base) ** 2 + (len(new) - 1) * stdev(new) ** 2) / (
        len(base) + len(new) - 2
    )
    if delta == 0 or var == 0:
        return None
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    n_t = 2 * z * z * var / (delta * delta)
    n = math.ceil(n_t * math.pi / 3)  # ÷ the asymptotic relative efficiency 3/π
    # the exact test must also be able to reach α with that many steps
    while min_two_sided_p(n, n) >= alpha:
        n += 1
    return max(n, min(len(base), len(new)) + 1)
