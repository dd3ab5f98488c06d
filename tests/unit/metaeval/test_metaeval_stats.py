"""Meta-evaluation statistics: known cases, agreement with scikit-learn / SciPy, seeded reproducibility."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from scipy import stats as sps
from sklearn import metrics as skm

from q2_plugins.metaeval import stats

# 10 responses: label (True = consistent) and score
Y = np.array([1, 1, 1, 1, 0, 0, 0, 0, 1, 0], dtype=bool)
S = np.array([0.9, 0.8, 0.5, 0.7, 0.1, 0.5, 0.6, 0.0, 1.0, 0.3])


def test_threshold_metrics_known_case():
    m = stats.threshold_metrics(Y, S, 0.5)
    # predicted consistent: score > 0.5 -> 0.9 0.8 0.7 0.6 1.0; the 0.5s count as inconsistent
    assert m["confusion"] == {"inconsistent_as_inconsistent": 4, "inconsistent_as_consistent": 1,
                              "consistent_as_inconsistent": 1, "consistent_as_consistent": 4}
    assert m["accuracy"] == pytest.approx(0.8)
    assert m["balanced_accuracy"] == pytest.approx(0.8)
    assert m["inconsistent"] == pytest.approx({"precision": 0.8, "recall": 0.8, "f1": 0.8})
    pred = S > 0.5
    assert m["accuracy"] == skm.accuracy_score(Y, pred)
    assert m["consistent"]["precision"] == skm.precision_score(Y, pred)


def test_threshold_is_inclusive_for_inconsistent():
    assert stats.threshold_metrics([False, True], [0.5, 0.50001], 0.5)["accuracy"] == 1.0
    assert stats.predict_consistent([0.5, 0.6], 0.5).tolist() == [False, True]


def test_roc_auc_and_average_precision_match_sklearn():
    assert stats.roc_auc(Y, S) == pytest.approx(skm.roc_auc_score(Y, S))
    assert stats.roc_auc([0, 0, 1, 1], [0.1, 0.2, 0.3, 0.4]) == 1.0
    assert stats.roc_auc([1, 1, 0, 0], [0.1, 0.2, 0.3, 0.4]) == 0.0
    assert stats.roc_auc([0, 1], [0.5, 0.5]) == 0.5
    assert stats.roc_auc([1, 1], [0.1, 0.2]) is None  # one class: undefined, not an exception
    assert stats.average_precision(Y, S, "inconsistent") == pytest.approx(skm.average_precision_score(~Y, -S))
    assert stats.average_precision(Y, S, "consistent") == pytest.approx(skm.average_precision_score(Y, S))


def test_pr_curve_inconsistent_thresholds_are_on_the_score_scale():
    curve = stats.pr_curve(Y, S, "inconsistent")
    for p, r, t in zip(curve["precision"], curve["recall"], curve["thresholds"]):
        flagged = S <= t
        assert p == pytest.approx((flagged & ~Y).sum() / flagged.sum())
        assert r == pytest.approx((flagged & ~Y).sum() / (~Y).sum())
    p, r, _ = skm.precision_recall_curve(Y, S)
    assert stats.pr_curve(Y, S, "consistent")["precision"] == pytest.approx(p.tolist())
    with pytest.raises(ValueError, match="positive"):
        stats.pr_curve(Y, S, "both")


def test_tune_threshold_equals_brute_force():
    rng = np.random.default_rng(3)
    y = rng.random(300) < 0.4
    s = np.round(rng.random(300) * 0.6 + 0.3 * y, 2)
    t, acc = stats.tune_threshold(y, s)
    best = max(np.mean((s > c) == y) for c in np.unique(s))
    assert acc == pytest.approx(best)
    assert np.mean((s > t) == y) == pytest.approx(acc)
    assert t == min(c for c in np.unique(s) if np.mean((s > c) == y) == best)  # ties: lowest threshold
    # one class only: everything consistent is best, by a threshold just below the lowest score
    t, acc = stats.tune_threshold([True, True], [0.3, 0.6])
    assert acc == 1.0 and t < 0.3 and np.nextafter(t, 1) == 0.3


def test_stratified_split_is_seeded_and_stratified():
    y = np.array([True] * 40 + [False] * 60)
    dev, test = stats.stratified_split(y, 0.5, seed=1)
    assert len(dev) == len(test) == 50 and set(dev).isdisjoint(test)
    assert y[dev].sum() == 20
    again, _ = stats.stratified_split(y, 0.5, seed=1)
    other, _ = stats.stratified_split(y, 0.5, seed=2)
    assert again.tolist() == dev.tolist() and other.tolist() != dev.tolist()
    with pytest.raises(ValueError, match="dev_fraction"):
        stats.stratified_split(y, 1.0, seed=0)


def test_distribution_matches_numpy():
    d = stats.distribution(S)
    assert d["mean"] == pytest.approx(S.mean()) and d["std"] == pytest.approx(S.std(ddof=1))
    assert d["median"] == pytest.approx(np.median(S))
    counts, edges = np.histogram(S, bins=10, range=(0, 1))
    assert d["histogram"] == {"counts": counts.tolist(), "edges": edges.tolist()}
    assert stats.distribution([])["n"] == 0


def test_spearman_rows_equals_scipy_with_ties_and_constants():
    rng = np.random.default_rng(0)
    rows = np.round(rng.random((200, 5)), 1)  # many ties
    rows[7] = 0.4  # constant row
    reference = [-0.05, -0.1, -0.15, -0.2, -0.25]
    ours = stats.spearman_rows(rows, reference)
    with np.errstate(invalid="ignore"), pytest.warns(sps.ConstantInputWarning):
        theirs = np.array([sps.spearmanr(reference, r).statistic for r in rows])
    np.testing.assert_allclose(ours, theirs, rtol=0, atol=1e-12, equal_nan=True)
    assert np.isnan(ours[7])
    assert stats.spearman([1, 2, 3], [1, 1, 1]) is None
    assert stats.spearman([1, 2, 3], [3, 5, 4]) == pytest.approx(sps.spearmanr([1, 2, 3], [3, 5, 4]).statistic)


def test_interval_is_numpy_percentiles():
    v = np.arange(1001, dtype=float)
    lo, hi = stats.interval(v)
    assert (lo, hi) == (np.percentile(v, 2.5), np.percentile(v, 97.5))


def test_minmax():
    assert stats.minmax(np.array([-0.2, 0.3, 0.8])).tolist() == pytest.approx([0.0, 0.5, 1.0])
    assert stats.minmax(np.array([0.3, 0.3])).tolist() == [0.0, 0.0]


def test_paired_simulation_exact_on_a_degenerate_case():
    # every inconsistent response scores 0, every consistent one 1: a system's score is exactly 1 - k / size
    levels = (0.05, 0.10, 0.15, 0.20, 0.25)
    sims = stats.simulate_paired_systems(np.zeros(244), np.ones(244), levels, 350, 100, np.random.default_rng(0))
    expected = [1 - round(c * 350) / 350 for c in levels]
    np.testing.assert_allclose(sims, np.tile(expected, (100, 1)), rtol=0, atol=1e-12)
    assert (stats.spearman_rows(sims, [-c for c in levels]) == 1.0).all()


def test_paired_simulation_expectation_and_seed():
    rng = np.random.default_rng(5)
    inc, con = rng.random(50) * 0.4, 0.5 + rng.random(50) * 0.5
    levels = (0.0, 0.5, 1.0)
    sims = stats.simulate_paired_systems(inc, con, levels, 350, 400, np.random.default_rng(1))
    # E[system score] = (1 - c) mean(con) + c mean(inc) over uniformly sampled contexts
    for j, c in enumerate(levels):
        assert sims[:, j].mean() == pytest.approx((1 - c) * con.mean() + c * inc.mean(), abs=0.01)
    again = stats.simulate_paired_systems(inc, con, levels, 350, 400, np.random.default_rng(1))
    other = stats.simulate_paired_systems(inc, con, levels, 350, 400, np.random.default_rng(2))
    assert np.array_equal(sims, again) and not np.array_equal(sims, other)
    with pytest.raises(ValueError, match="equal, non-empty"):
        stats.simulate_paired_systems(inc, con[:3], levels, 10, 2, np.random.default_rng(0))


def test_paired_simulation_picks_distinct_positions():
    # context i scores i for the inconsistent response, 0 for the consistent one: with one context sampled
    # throughout, a level choosing k of size positions gives exactly k * score / size
    sims = stats.simulate_paired_systems(np.array([7.0]), np.array([0.0]), (0.5,), 10, 50,
                                         np.random.default_rng(0))
    assert (sims == 3.5).all()


def test_mixed_simulation_endpoints_and_mean():
    inc, con = np.array([0.0, 0.2]), np.array([0.8, 1.0])
    sims = stats.simulate_mixed_systems(inc, con, (0.0, 0.5, 1.0), 400, 300, np.random.default_rng(0))
    assert sims[:, 0].min() >= 0.8 and sims[:, 2].max() <= 0.2
    assert sims[:, 1].mean() == pytest.approx(0.5, abs=0.01)
    assert np.array_equal(sims, stats.simulate_mixed_systems(inc, con, (0.0, 0.5, 1.0), 400, 300,
                                                             np.random.default_rng(0)))


def test_missing_optional_package_names_the_extra(monkeypatch):
    from q2_plugins.metaeval.deps import require

    monkeypatch.setitem(sys.modules, "bert_score", None)
    with pytest.raises(ModuleNotFoundError, match=r"'bertscore' extra: pip install 'q2-plugins\[bertscore\]'"):
        require("bert_score")
    monkeypatch.setitem(sys.modules, "sklearn.metrics", None)
    with pytest.raises(ModuleNotFoundError, match=r"'metaeval' extra"):
        stats.roc_auc([0, 1], [0.1, 0.9])


def test_threshold_metrics_on_examples_of_one_class_warn_of_nothing():
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        only_consistent = stats.threshold_metrics([True, True, True], [0.1, 0.5, 0.9], 0.4)
        only_inconsistent = stats.threshold_metrics([False, False], [0.1, 0.5], 0.4)
    assert only_consistent["balanced_accuracy"] == pytest.approx(2 / 3)  # the one class's recall
    assert only_inconsistent["balanced_accuracy"] == pytest.approx(1 / 2)
