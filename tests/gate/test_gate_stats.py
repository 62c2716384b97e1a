"""The gate's statistics against answers computed independently: the exact Mann–Whitney
distribution by enumeration, a textbook p-value, the normal-theory bootstrap width."""

from __future__ import annotations

import itertools
import math
import random

import pytest

from tracekit.gate import stats


def _exact_two_sided_p(a: list[float], b: list[float]) -> float:
    """Enumerate every split of the pooled (distinct) values: P(|U − mean| ≥ observed)."""
    pooled = a + b
    n_a = len(a)

    def u(xs, ys):
        return sum((x > y) + 0.5 * (x == y) for x in xs for y in ys)

    mean_u = n_a * len(b) / 2
    observed = abs(u(a, b) - mean_u)
    total = extreme = 0
    for idx in itertools.combinations(range(len(pooled)), n_a):
        xs = [pooled[i] for i in idx]
        ys = [pooled[i] for i in range(len(pooled)) if i not in idx]
        total += 1
        extreme += abs(u(xs, ys) - mean_u) >= observed - 1e-12
    return extreme / total


def test_mann_whitney_complete_separation_is_the_smallest_p():
    # 4 vs 4 with no overlap: U = 0 or 16, p = 2 / C(8, 4) = 2/70
    u, p = stats.mann_whitney([1, 2, 3, 4], [5, 6, 7, 8])
    assert u == 16  # U of `new` against `base`: every new value is larger
    assert p == pytest.approx(2 / 70)
    assert stats.min_two_sided_p(4, 4) == pytest.approx(2 / 70)
    assert stats.min_two_sided_p(3, 3) == pytest.approx(2 / 20)


@pytest.mark.parametrize(
    "a,b",
    [
        ([1.0, 3.0, 5.0], [2.0, 4.0, 6.0, 7.0]),
        ([10.0, 12.0, 14.0, 30.0], [11.0, 20.0, 21.0, 22.0, 23.0]),
        ([0.5, 0.7, 0.9, 1.4, 1.6], [0.8, 1.5, 1.7, 1.8, 1.9]),
    ],
)
def test_mann_whitney_matches_the_enumerated_exact_distribution(a, b):
    _, p = stats.mann_whitney(a, b)
    assert p == pytest.approx(_exact_two_sided_p(a, b))


def test_mann_whitney_textbook_example():
    # Siegel & Castellan-style worked example: U = 3 for n = 4 and 5 (the smaller U),
    # exact two-sided p = 2 · P(U ≤ 3) = 2 · 7/126 = 0.1111
    a = [19, 22, 16, 29, 24]
    b = [20, 11, 17, 12]
    u, p = stats.mann_whitney(a, b)
    assert min(u, 20 - u) == 3
    assert p == pytest.approx(14 / 126)


def test_identical_samples_are_not_significant():
    res = stats.compare([5.0] * 6, [5.0] * 6)
    assert res.method == "mann-whitney"
    assert not res.significant and res.p_value == 1.0
    assert res.ci == (0.0, 0.0)


def test_bootstrap_interval_on_a_known_distribution():
    # two normal samples, means 0 and 1, sd 1, 200 each: the 95% interval of the
    # difference is 1 ± 1.96·√(2/200) = 1 ± 0.196 (normal theory)
    rng = random.Random(7)
    a = [rng.gauss(0, 1) for _ in range(200)]
    b = [rng.gauss(1, 1) for _ in range(200)]
    lo, hi = stats.bootstrap_ci(a, b)
    diff = sum(b) / 200 - sum(a) / 200
    assert lo < diff < hi
    assert lo < 1 < hi
    assert hi - lo == pytest.approx(2 * 1.96 * math.sqrt(2 / 200), rel=0.15)


def test_few_steps_use_the_bootstrap_and_too_few_no_test():
    res = stats.compare([10.0, 10.2, 9.9], [12.0, 12.1, 11.9])
    assert res.method == "bootstrap"  # 3 vs 3 cannot reach p < 0.05 (min 0.1)
    assert res.significant and res.ci[0] > 1.5
    res = stats.compare([10.0, 10.2, 9.9], [10.1, 9.8, 10.3])
    assert res.method == "bootstrap" and not res.significant
    # an interval that excludes 0 is not enough when the steps overlap
    res = stats.compare([10.0, 10.2, 9.0], [12.0, 12.1, 9.5])
    assert res.method == "bootstrap" and res.ci[0] > 0 and not res.significant
    res = stats.compare([10.0], [12.0])
    assert res.method == "none" and not res.significant


def test_steps_to_decide_follows_the_sample_size_formula():
    # difference 1, pooled variance 16/3: n_t = 2·(1.96 + 0.8416)²·(16/3) = 83.7; ÷ 3/π
    base = [8.0, 12.0, 8.0, 12.0]  # mean 10, sd 2.309…
    new = [9.0, 13.0, 9.0, 13.0]  # mean 11, same sd
    var = 16 / 3  # both sides: Σ(x − mean)² / (n − 1) = 16/3
    z = 1.959964 + 0.841621
    expected = math.ceil(2 * z * z * var / 1 * math.pi / 3)
    assert stats.steps_to_decide(base, new) == expected
    assert stats.steps_to_decide(base, base) is None


# ----------------------------------------------------------------- run-to-run noise


@pytest.mark.parametrize(
    "a,b",
    [
        ([100.0, 104.0, 98.0], [110.0, 113.0, 108.0]),
        ([5.0, 5.5, 4.8, 5.1, 5.3], [5.2, 5.9]),
    ],
)
def test_between_runs_is_students_t_with_the_pooled_variance(a, b):
    """Two runs a side or more: scipy's pooled two-sample t (an independent code)."""
    from scipy.stats import ttest_ind

    res = stats.between_runs(a, b)
    ref = ttest_ind(b, a, equal_var=True)
    assert res.p_value == pytest.approx(float(ref.pvalue), rel=1e-9)
    assert res.df == len(a) + len(b) - 2 and res.measured


def test_one_new_run_is_the_prediction_interval_test():
    """One new run against n: (x − x̄)/(s·√(1 + 1/n)) ~ t(n − 1), by hand: base
    100, 104, 98 (mean 100.667, Σ(x − x̄)² = 18.667, s = √9.333 = 3.0551), new 112 →
    t = 11.333 / (3.0551·1.1547) = 3.2127, df 2; for 2 degrees of freedom the two-sided
    p has the closed form 1 − t/√(t² + 2) = 0.08475."""
    res = stats.between_runs([100.0, 104.0, 98.0], [112.0])
    assert res.sd == pytest.approx(math.sqrt(18.6667 / 2), rel=1e-4)
    t = 3.2127
    assert res.df == 2
    assert res.p_value == pytest.approx(1 - t / math.sqrt(t * t + 2), abs=1e-4)
    assert res.p_value == pytest.approx(0.08475, abs=1e-4)
    # the 95% interval: d ± t(0.975, 2)·se, t(0.975, 2) = 4.3027 (tables)
    half = 4.3027 * math.sqrt(18.6667 / 2) * math.sqrt(1 + 1 / 3)
    assert res.ci[0] == pytest.approx(112 - 302 / 3 - half, rel=1e-3)


def test_against_prior_is_a_normal_test_of_two_runs():
    # difference 10 with a prior sd 5 per run: z = 10 / (5·√2) = 1.4142, p = 0.1573
    res = stats.against_prior(100.0, 110.0, 5.0)
    assert not res.measured and res.method == "prior"
    assert res.p_value == pytest.approx(0.1573, abs=1e-4)
    assert stats.against_prior(100.0, 100.0, 0.0).p_value == 1.0


def test_runs_to_decide_is_the_first_n_the_change_would_stand_out_at():
    from scipy.stats import t

    n = stats.runs_to_decide(15.0, 5.0, 1)
    # by the formula: |d| > t(0.975, n − 1)·sd·√(1 + 1/n), first true at n, not at n − 1
    def stands_out(k):
        return t.ppf(0.975, k - 1) * 5.0 * math.sqrt(1 + 1 / k) < 15.0

    assert stands_out(n) and not stands_out(n - 1)
    assert stats.runs_to_decide(0.0, 5.0) is None
    assert stats.runs_to_decide(0.1, 5.0) is None  # past MAX_RUNS


# ----------------------------------------------------------------- calibrate


def test_sd_upper_bound_is_the_chi_square_interval():
    from tracekit.gate import calibrate

    # 6 runs: χ²(0.10, 5) = 1.6103 (tables) → s·√(5 / 1.6103) = 1.7621·s
    assert calibrate.sd_upper(1.0, 6) == pytest.approx(math.sqrt(5 / 1.6103), rel=1e-3)


def test_false_fail_threshold_keeps_the_simulated_false_rate_under_target():
    from tracekit.gate import calibrate

    # z(0.99) = 2.3263: one new run against 5, sd 1 → T = 2.3263·√1.2 = 2.5484
    t = calibrate.false_fail_threshold(1.0, 5, 0.01)
    assert t == pytest.approx(2.3263 * math.sqrt(1.2), rel=1e-4)
    # the model's own false rate at that threshold: at most 1% (the t-test only lowers it)
    assert calibrate.simulate(1.0, 0.0, t, 5, 0.05) <= 0.01 + 0.003
    # a shift of 5 sd is caught most of the time, one of 0.5 sd rarely
    assert calibrate.simulate(1.0, 5.0, t, 5, 0.05) > 0.6
    assert calibrate.simulate(1.0, 0.5, t, 5, 0.05) < 0.05


def test_steps_to_decide_returns_for_a_tiny_change_in_a_wide_spread():
    """A change a millionth of the spread needs ~10¹³ steps: the answer comes at once
    (the exact test's smallest p is not enumerated for such sizes)."""
    n = stats.steps_to_decide([0.0, 10.0, 0.0, 10.0], [1e-6, 10.0, 0.0, 10.0])
    assert n > 10**9
    assert stats.min_two_sided_p(10**6, 10**6) == 0.0
