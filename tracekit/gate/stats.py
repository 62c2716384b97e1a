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

Run-to-run noise (`between_runs`, `against_prior`, `runs_to_decide`): steps of one run
share the run's process placement, caches, clocks and the machine's load, so a test over
steps calls the difference between two runs of the same code significant. The runs are
the experimental units, the steps sub-samples of them — pseudoreplication (Hurlbert,
*Ecological Monographs* 54:187, 1984; Lazic, *BMC Neuroscience* 11:5, 2010, whose remedy
is to test the units' means). So with several runs the gate tests the run means:

- **Student's two-sample t over run means, variance pooled** (`between_runs`). Why this
  test: a CI baseline has 3–10 runs and a pull request one. Mann–Whitney over run means
  cannot reach α = 0.05 below 4 vs 4 runs (smallest p: 1 vs 3 → 0.5, 3 vs 3 → 0.1); a
  bootstrap over 3 runs has 10 distinct resampled means and a percentile interval far
  too narrow (Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993, §13.3:
  undercoverage at small n); a mixed model of steps within runs tests the same
  fixed effect with the run means' degrees of freedom when every run has the same steps
  (a balanced nested design: Murray, *Design and Analysis of Group-Randomized Trials*,
  1998, §9). Welch's t needs two runs a side, and the usual CI case is one new run: both
  sides are the same job on the same machine, so under "no change" they share one
  spread, which the baseline measures — pooled Student's t, which for one new run is the
  prediction-interval test of a new observation, (x − x̄)/(s·√(1 + 1/n)) ~ t(n − 1).
  s is never taken below the stated prior σ: three runs that happened to agree do not
  make the runner quieter than it is known to be (measured on the shared machine: 2 of
  30 baseline comparisons of identical runs failed on such a chance-small s).
- **One run a side**: nothing measures the spread between runs; a stated prior σ (the
  run-to-run standard deviation of one run's figure, `[tool.tracekit.gate.run_noise]`)
  stands in: z = (new − base)/(σ·√2), two-sided normal p (`against_prior`).

scipy is imported inside the functions: `tracekit analyze` never loads it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist, fmean, stdev

MAX_RUNS = 50  # runs_to_decide looks no further

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
    if n_a + n_b > 1000:  # below any float α (and C(n, k) of millions would never end)
        return 0.0
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


# ---------------------------------------------------------------- run-to-run noise


@dataclass(frozen=True)
class RunTest:
    """What the runs say about mean(new) − mean(base), against run-to-run noise."""

    method: str  # "student-t over runs" (measured) or "prior" (one run a side)
    n_base: int  # runs
    n_new: int
    sd: float  # the run-to-run standard deviation used (measured, or the prior)
    df: float | None  # degrees of freedom of the measured spread (None: the prior)
    p_value: float
    ci: tuple[float, float]  # 1 − α interval of mean(new) − mean(base)
    floored: bool = False  # the measured spread was below the prior: the prior was used

    @property
    def measured(self) -> bool:
        return self.df is not None

    def to_dict(self) -> dict:
        return {
            "method": self.method,
            "noise": "measured" if self.measured else "prior",
            "n_base_runs": self.n_base,
            "n_new_runs": self.n_new,
            "run_sd": self.sd,
            "prior_floor_used": self.floored,
            "df": self.df,
            "p_value": self.p_value,
            "ci": list(self.ci),
        }


def pooled_sd(base: list[float], new: list[float]) -> tuple[float, int]:
    """(pooled run-to-run standard deviation, its degrees of freedom n_a + n_b − 2):
    √(Σ(a − ā)² + Σ(b − b̄)²) / (n_a + n_b − 2); a side of one run adds no spread."""
    ss = sum((x - fmean(base)) ** 2 for x in base) + sum((x - fmean(new)) ** 2 for x in new)
    df = len(base) + len(new) - 2
    return (math.sqrt(ss / df) if df > 0 else 0.0), df


def between_runs(
    base: list[float], new: list[float], alpha: float = ALPHA, floor: float = 0.0
) -> RunTest:
    """Student's two-sample t over run means with the pooled variance (see the module
    docstring for why): t = (b̄ − ā) / (s·√(1/n_a + 1/n_b)), df = n_a + n_b − 2.
    Needs three runs in all (df ≥ 1). `floor`: the stated run-to-run sd (the prior);
    s is never taken below it — three runs that happened to agree do not make the
    runner quieter than it is known to be. Where the prior is used, it is a known σ, as
    in `against_prior`: the normal distribution, not t with the runs' few degrees of
    freedom (with t(2) a 3-run baseline was a weaker test than one run a side: measured
    here, +20% step time caught 18 of 18 single-run pairs but 1 of 3 against a baseline
    of three runs)."""
    from scipy.stats import norm
    from scipy.stats import t as student_t

    sd, df = pooled_sd(base, new)
    floored = floor > sd
    sd = max(sd, floor)
    if df < 1:
        raise ValueError("between_runs needs at least three runs in all")
    d = fmean(new) - fmean(base)
    se = sd * math.sqrt(1 / len(base) + 1 / len(new))
    dist = norm if floored else student_t(df)
    p = (1.0 if d == 0 else 0.0) if se == 0 else float(2 * dist.sf(abs(d) / se))
    half = float(dist.ppf(1 - alpha / 2)) * se
    return RunTest(
        "student-t over runs", len(base), len(new), sd, df, p, (d - half, d + half), floored
    )


def moderated(
    base: list[float], new: list[float], alpha: float, prior_sd: float, prior_df: int
) -> RunTest:
    """Student's t over run means with the spread moderated towards a prior: s̃² =
    (d₀·s₀² + d·s²)/(d₀ + d) on d₀ + d degrees of freedom (Smyth, *Linear models and
    empirical Bayes methods for assessing differential expression*, SAGMB 3:3, 2004 —
    the moderated t). For the drill-down metrics: their family's prior s₀ (calibrated
    on d₀ + 1 runs) is its noisiest entity's, above most entities' own spread, so a floor
    would hide every change; the runs' own s alone, from two or three runs, is small by
    chance too often (a kernel failed a 3-vs-3 comparison of identical runs on s = 19%
    from 5 runs). Moderation weighs the two by their degrees of freedom."""
    from scipy.stats import t as student_t

    sd, df = pooled_sd(base, new)
    if df + prior_df < 1:
        raise ValueError("moderated needs a prior or three runs")
    s2 = (prior_df * prior_sd**2 + df * sd**2) / (prior_df + df)
    dft = prior_df + df
    d = fmean(new) - fmean(base)
    se = math.sqrt(s2) * math.sqrt(1 / len(base) + 1 / len(new))
    dist = student_t(dft)
    p = (1.0 if d == 0 else 0.0) if se == 0 else float(2 * dist.sf(abs(d) / se))
    half = float(dist.ppf(1 - alpha / 2)) * se
    return RunTest(
        "moderated t over runs", len(base), len(new), math.sqrt(s2), dft, p,
        (d - half, d + half),
    )  # fmt: skip


def against_prior(
    base: float, new: float, sd: float, alpha: float = ALPHA, n_base: int = 1, n_new: int = 1
) -> RunTest:
    """One run a side: the difference against a stated run-to-run standard deviation `sd`
    (absolute units), z = (new − base) / (sd·√(1/n_a + 1/n_b)), two-sided normal p."""
    d = new - base
    se = sd * math.sqrt(1 / n_base + 1 / n_new)
    p = (1.0 if d == 0 else 0.0) if se == 0 else 2 * (1 - NormalDist().cdf(abs(d) / se))
    half = NormalDist().inv_cdf(1 - alpha / 2) * se
    return RunTest("prior", n_base, n_new, sd, None, p, (d - half, d + half))


def runs_to_decide(delta: float, sd: float, n_new: int = 1, alpha: float = ALPHA) -> int | None:
    """Baseline runs that would let a change of `delta` stand out of a run-to-run spread
    `sd` (one new run against them): the smallest n with
    |delta| > t(1 − α/2, n + n_new − 2)·sd·√(1/n + 1/n_new). None past MAX_RUNS, or
    without spread or change."""
    from scipy.stats import t as student_t

    if sd <= 0 or delta == 0:
        return None
    for n in range(2, MAX_RUNS + 1):
        df = n + n_new - 2
        if abs(delta) > student_t.ppf(1 - alpha / 2, df) * sd * math.sqrt(1 / n + 1 / n_new):
            return n
    return None
