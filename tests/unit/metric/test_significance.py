"""The interval and test statistics against SciPy's references, on the same data, within Monte-Carlo error."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest
from scipy import stats  # the dev extra installs SciPy: a missing SciPy fails here, never skips

from q2_plugins.metric.significance import (
    PairedTest,
    bootstrap_figures,
    bootstrap_p_value,
    mean_interval,
    paired_ar,
    paired_bootstrap,
    percentile_interval,
    proportion_interval,
    systems_arrays,
)


def _systems(n: int = 400, shift: float = 0.04, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    base = rng.beta(2, 2, n)
    return np.stack([base, np.clip(base + shift + rng.normal(0, 0.25, n), 0, 1)])


def test_bootstrap_interval_matches_scipy_percentile():
    x = _systems()
    ones = np.ones_like(x)
    figs = paired_bootstrap(x, ones, PairedTest("bs", 20000, seed=1))
    ref = stats.bootstrap((x[0],), np.mean, n_resamples=20000, method="percentile", random_state=2)
    assert figs[0].interval.low == pytest.approx(ref.confidence_interval.low, abs=2e-3)
    assert figs[0].interval.high == pytest.approx(ref.confidence_interval.high, abs=2e-3)
    diff = stats.bootstrap((x[1], x[0]), lambda a, b, axis: a.mean(axis) - b.mean(axis), paired=True,
                           n_resamples=20000, method="percentile", random_state=3)
    assert figs[1].diff == pytest.approx(x[1].mean() - x[0].mean())
    assert figs[1].diff_interval.low == pytest.approx(diff.confidence_interval.low, abs=2e-3)
    assert figs[1].diff_interval.high == pytest.approx(diff.confidence_interval.high, abs=2e-3)


@pytest.mark.parametrize("shift", [0.0, 0.03, 0.08])
def test_approximate_randomisation_matches_scipy_permutation_test(shift):
    x = _systems(n=300, shift=shift, seed=4)
    p = paired_ar(x, np.ones_like(x), PairedTest("ar", 20000, seed=5))[1].p_value
    ref = stats.permutation_test((x[1], x[0]), lambda a, b, axis: np.abs(a.mean(axis) - b.mean(axis)),
                                 permutation_type="samples", n_resamples=20000, alternative="greater",
                                 random_state=6).pvalue
    se = math.sqrt(max(ref * (1 - ref), 1e-4) / 20000)  # Monte-Carlo error of each estimate
    assert abs(p - ref) < 5 * math.sqrt(2) * se + 1e-4


def test_missing_scores_leave_the_mean_and_the_resamples():
    values = [[0.5, None, 1.0, 0.0], [1.0, 1.0, None, None]]
    num, den = systems_arrays(values)
    figs = paired_bootstrap(num, den, PairedTest("bs", 500, seed=0))
    assert figs[0].value == pytest.approx(0.5) and figs[1].value == pytest.approx(1.0)
    resampled = bootstrap_figures(num, den, 500, seed=0)
    assert np.nanmax(resampled[:, 1]) == 1.0 and np.nanmin(resampled[:, 1]) == 1.0


def test_fixed_seed_gives_identical_output_and_another_seed_does_not():
    x = _systems(n=200)
    ones = np.ones_like(x)
    for kind in ("bs", "ar"):
        a = paired_bootstrap if kind == "bs" else paired_ar
        assert a(x, ones, PairedTest(kind, 300, seed=7)) == a(x, ones, PairedTest(kind, 300, seed=7))
        assert a(x, ones, PairedTest(kind, 300, seed=7)) != a(x, ones, PairedTest(kind, 300, seed=8))


def test_identical_systems_are_never_different():
    x = _systems(n=100)
    same = np.stack([x[0], x[0]])
    assert paired_ar(same, np.ones_like(same), PairedTest("ar", 1000, seed=0))[1].p_value == 1.0
    assert paired_bootstrap(same, np.ones_like(same), PairedTest("bs", 1000, seed=0))[1].p_value == 1.0


def test_bootstrap_p_value_rules():
    diffs = np.random.default_rng(0).normal(0.1, 0.05, 10000)
    assert bootstrap_p_value(diffs, 0.1) < 0.05  # two standard errors from 0
    assert bootstrap_p_value(diffs - 0.1, 0.0) == 1.0
    with pytest.raises(ValueError, match="centred"):
        bootstrap_p_value(diffs, 0.1, rule="other")


def test_closed_form_intervals_match_scipy():
    """The mean's standard error is SciPy's; its interval nears the normal one away from the bounds (large n); all
    scores at a bound give Wilson's interval of k = n; coverage's interval is Wilson's."""
    x = _systems(n=500)[0]
    stderr, interval = mean_interval(x.size, float(x.sum()), float((x * x).sum()))
    assert stderr == pytest.approx(stats.sem(x))
    low, high = stats.norm.interval(0.95, loc=x.mean(), scale=stats.sem(x))
    assert (interval.low, interval.high) == pytest.approx((low, high), abs=1e-4)
    ones = mean_interval(8, 8.0, 8.0)[1]
    wilson = stats.binomtest(8, 8).proportion_ci(0.95, method="wilson")
    assert (ones.low, ones.high) == pytest.approx((wilson.low, wilson.high))
    wilson = stats.binomtest(37, 50).proportion_ci(0.95, method="wilson")
    got = proportion_interval(37, 50)
    assert (got.low, got.high) == pytest.approx((wilson.low, wilson.high))
    assert mean_interval(1, 0.5, 0.25) == (None, None) and proportion_interval(0, 0) is None
    with pytest.raises(ValueError, match=r"scores in \[0, 1\]"):
        mean_interval(3, 6.0, 14.0)


def test_the_interval_of_a_mean_score_stays_inside_0_1():
    """Seven scores of 1 and one of 0: the normal interval [0.63, 1.12] passes 1; this one stays inside [0, 1], on
    every sample of scores at or near the bounds."""
    stderr, interval = mean_interval(8, 7.0, 7.0)
    assert stderr == pytest.approx(0.125)
    assert 0 <= interval.low < 0.875 < interval.high <= 1
    rng = np.random.default_rng(0)
    for n in (2, 3, 5, 8, 20, 100):
        for p in (0.0, 0.02, 0.5, 0.97, 1.0):
            x = np.where(rng.random(n) < p, 1.0, rng.random(n) * 0.2)
            _, got = mean_interval(n, float(x.sum()), float((x * x).sum()))
            assert 0 <= got.low <= x.mean() <= got.high <= 1, (n, p, got)


def test_the_interval_of_a_mean_score_covers_the_true_mean_as_often_as_it_says():
    """Q2-like scores (mostly 0 or 1, some between) near the top of the scale, 30 responses: the interval holds the
    true mean in about 95% of seeded samples, where the normal interval falls short."""
    rng = np.random.default_rng(7)
    reps, n, hits, normal_hits = 4000, 30, 0, 0
    kinds = rng.choice(3, size=(reps, n), p=[0.06, 0.84, 0.10])
    x = np.where(kinds == 0, 0.0, np.where(kinds == 1, 1.0, rng.random((reps, n))))
    true = 0.84 + 0.10 * 0.5
    for row in x:
        stderr, got = mean_interval(n, float(row.sum()), float((row * row).sum()))
        hits += got.low <= true <= got.high
        normal_hits += abs(row.mean() - true) <= 1.959964 * stderr
    assert 0.93 <= hits / reps <= 0.975 and normal_hits / reps < hits / reps


def test_percentile_interval_and_bad_input():
    lo, hi = percentile_interval(np.arange(101.0))
    assert (lo, hi) == (2.5, 97.5)
    with pytest.raises(ValueError, match="same shape|one shape"):
        paired_ar(np.ones((2, 3)), np.ones((2, 4)), PairedTest("ar", 10, 0))
    with pytest.raises(ValueError, match="'bs' or 'ar'"):
        PairedTest("t", 10, 0)


class _MeanMetric:
    """The mean as a sacrebleu metric: per-sentence statistics (score, 1), aggregated by summing."""

    def _extract_corpus_statistics(self, hyps, refs):
        return np.array([[h, 1.0] for h in hyps])

    def _aggregate_and_compute(self, stats):
        s = np.asarray(stats).sum(axis=0)
        return types.SimpleNamespace(score=s[0] / s[1])


def _sacrebleu_ar(base, system, trials, seed):
    from sacrebleu.significance import _paired_ar_test

    m = _MeanMetric()
    stats = m._extract_corpus_statistics(base, None)
    _, res = _paired_ar_test({"m": (stats, m._aggregate_and_compute(stats))}, "s", list(system), None, {"m": m},
                             n_samples=trials, n_ar_confidence=-1, seed=seed)
    return res["m"].p_value


def test_approximate_randomisation_is_sacrebleus_own_on_the_same_seed():
    x = _systems(n=200, shift=0.03, seed=9)
    ours = paired_ar(x, np.ones_like(x), PairedTest("ar", 2000, seed=5))[1].p_value
    assert ours == _sacrebleu_ar(x[0], x[1], 2000, seed=5)  # same swap patterns, same p-value (no ties here)
    same = np.stack([x[0], x[0]])  # with ties it differs on purpose: sacrebleu calls a system different from itself
    assert _sacrebleu_ar(x[0], x[0], 2000, seed=5) == 1 / 2001
    assert paired_ar(same, np.ones_like(same), PairedTest("ar", 2000, seed=5))[1].p_value == 1.0
