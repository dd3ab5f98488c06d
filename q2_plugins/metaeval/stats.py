"""Statistics of the meta-evaluation. Where scikit-learn or SciPy has the statistic, it is called, not rewritten.

Conventions: ``consistent`` is a boolean array (the human label), ``scores`` a float array of the same length; a
response is predicted inconsistent when its score is at or below the threshold (the paper's rule).
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from q2_plugins.metaeval.deps import require
from q2_plugins.metric.significance import percentile_interval

__all__ = [
    "predict_consistent",
    "threshold_metrics",
    "roc_auc",
    "average_precision",
    "pr_curve",
    "tune_threshold",
    "stratified_split",
    "distribution",
    "minmax",
    "spearman_rows",
    "spearman",
    "interval",
    "simulate_paired_systems",
    "simulate_mixed_systems",
    "classification_metrics",
    "correlations",
]


def _arrays(consistent: Sequence[bool], scores: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(consistent, dtype=bool)
    s = np.asarray(scores, dtype=np.float64)
    if y.shape != s.shape or y.ndim != 1:
        raise ValueError(f"Expected labels and scores of the same length, but got {y.shape} and {s.shape}")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN; drop unscored responses first")
    return y, s


def predict_consistent(scores: Sequence[float], threshold: float) -> np.ndarray:
    """Score > threshold is consistent; score <= threshold is inconsistent."""
    return np.asarray(scores, dtype=np.float64) > threshold


def threshold_metrics(consistent: Sequence[bool], scores: Sequence[float], threshold: float) -> dict[str, Any]:
    """Accuracy, balanced accuracy and per-class precision / recall / F1 at ``threshold``."""
    metrics = require("sklearn.metrics")
    y, s = _arrays(consistent, scores)
    pred = predict_consistent(s, threshold)
    out: dict[str, Any] = {
        "threshold": float(threshold),
        "n": int(y.size),
        "accuracy": float(metrics.accuracy_score(y, pred)),
        "balanced_accuracy": _balanced_accuracy(metrics, y, pred),
    }
    for name, positive in (("inconsistent", False), ("consistent", True)):
        p, r, f, _ = metrics.precision_recall_fscore_support(y, pred, pos_label=positive, average="binary",
                                                             zero_division=0.0)
        out[name] = {"precision": float(p), "recall": float(r), "f1": float(f)}
    tn, fp, fn, tp = metrics.confusion_matrix(y, pred, labels=[False, True]).ravel()
    out["confusion"] = {"inconsistent_as_inconsistent": int(tn), "inconsistent_as_consistent": int(fp),
                        "consistent_as_inconsistent": int(fn), "consistent_as_consistent": int(tp)}
    return out


def _balanced_accuracy(metrics: Any, y: np.ndarray, pred: np.ndarray) -> float:
    """Balanced accuracy: the mean recall of the classes in ``y``. On examples of one class it is that class's recall;
    scikit-learn then warns that a predicted class is not among the gold ones, an expected fact here, not shown."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="y_pred contains classes not in y_true")
        return float(metrics.balanced_accuracy_score(y, pred))


def _both_classes(y: np.ndarray) -> bool:
    return bool(y.any() and (~y).any())


def roc_auc(consistent: Sequence[bool], scores: Sequence[float]) -> Optional[float]:
    """ROC AUC of the score as a predictor of consistency (None when only one class is present)."""
    y, s = _arrays(consistent, scores)
    if not _both_classes(y):
        return None
    return float(require("sklearn.metrics").roc_auc_score(y, s))


def average_precision(consistent: Sequence[bool], scores: Sequence[float], positive: str = "inconsistent"
                      ) -> Optional[float]:
    """Average precision of detecting ``positive`` ("inconsistent": low scores first; or "consistent")."""
    y, s = _arrays(consistent, scores)
    if not _both_classes(y):
        return None
    target, ranking = (~y, -s) if positive == "inconsistent" else (y, s)
    return float(require("sklearn.metrics").average_precision_score(target, ranking))


def pr_curve(consistent: Sequence[bool], scores: Sequence[float], positive: str = "inconsistent"
             ) -> dict[str, list[float]]:
    """Precision / recall over all thresholds for detecting ``positive`` responses.

    For inconsistency detection the ranking is by ascending score, and ``thresholds`` are returned on the score
    scale: a response counts as detected when its score is <= the threshold.
    """
    if positive not in ("inconsistent", "consistent"):
        raise ValueError(f"positive must be 'inconsistent' or 'consistent', got {positive!r}")
    y, s = _arrays(consistent, scores)
    metrics = require("sklearn.metrics")
    if positive == "inconsistent":
        precision, recall, thresholds = metrics.precision_recall_curve(~y, -s)
        thresholds = -thresholds
    else:
        precision, recall, thresholds = metrics.precision_recall_curve(y, s)
    return {"precision": precision.tolist(), "recall": recall.tolist(), "thresholds": thresholds.tolist()}


def tune_threshold(consistent: Sequence[bool], scores: Sequence[float], objective: str = "accuracy"
                   ) -> tuple[float, float]:
    """The threshold of highest ``objective`` (``accuracy`` or ``balanced_accuracy``) among the observed scores and
    the float just below the lowest one (everything consistent); ties go to the lowest. Returns
    ``(threshold, objective value)``."""
    if objective not in ("accuracy", "balanced_accuracy"):
        raise ValueError(f"objective must be 'accuracy' or 'balanced_accuracy', got {objective!r}")
    y, s = _arrays(consistent, scores)
    if y.size == 0:
        raise ValueError("cannot tune a threshold on no examples")
    if objective == "balanced_accuracy" and not _both_classes(y):
        raise ValueError("cannot tune a threshold for balanced accuracy on examples of one class")
    observed = np.unique(s)
    candidates = np.concatenate([[np.nextafter(observed[0], -np.inf)], observed])
    # correct at threshold t: inconsistent responses scored <= t plus consistent ones scored > t
    inc_le = np.searchsorted(np.sort(s[~y]), candidates, side="right")
    con_gt = int(y.sum()) - np.searchsorted(np.sort(s[y]), candidates, side="right")
    if objective == "balanced_accuracy":
        acc = (inc_le / int((~y).sum()) + con_gt / int(y.sum())) / 2
    else:
        acc = (inc_le + con_gt) / y.size
    best = int(np.argmax(acc))
    return float(candidates[best]), float(acc[best])


def stratified_split(consistent: Sequence[bool], dev_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Indices of a dev / test split stratified by label (scikit-learn ``train_test_split``)."""
    if not 0.0 < dev_fraction < 1.0:
        raise ValueError(f"dev_fraction must be in (0, 1), got {dev_fraction!r}")
    y = np.asarray(consistent, dtype=bool)
    model_selection = require("sklearn.model_selection")
    idx = np.arange(y.size)
    dev, test = model_selection.train_test_split(idx, train_size=dev_fraction, random_state=seed, stratify=y)
    return np.sort(dev), np.sort(test)


def distribution(scores: Sequence[float], bins: int = 10, value_range: tuple[float, float] = (0.0, 1.0)
                 ) -> dict[str, Any]:
    """Summary and histogram of a score sample (``value_range`` widens to the data when scores fall outside)."""
    s = np.asarray(scores, dtype=np.float64)
    if s.size == 0:
        return {"n": 0}
    lo, hi = min(value_range[0], float(s.min())), max(value_range[1], float(s.max()))
    counts, edges = np.histogram(s, bins=bins, range=(lo, hi))
    q25, median, q75 = np.percentile(s, [25, 50, 75])
    return {
        "n": int(s.size), "mean": float(s.mean()), "std": float(s.std(ddof=1)) if s.size > 1 else 0.0,
        "min": float(s.min()), "q25": float(q25), "median": float(median), "q75": float(q75), "max": float(s.max()),
        "histogram": {"counts": counts.tolist(), "edges": edges.tolist()},
    }


def minmax(scores: np.ndarray) -> np.ndarray:
    """Scale to [0, 1] by the sample's minimum and maximum (the paper's normalisation of BERTScore)."""
    s = np.asarray(scores, dtype=np.float64)
    span = float(s.max() - s.min()) if s.size else 0.0
    return (s - s.min()) / span if span > 0 else np.zeros_like(s)


def spearman(x: Sequence[float], y: Sequence[float]) -> Optional[float]:
    """Spearman correlation (SciPy); None when either side is constant."""
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.size < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    return float(require("scipy.stats").spearmanr(x, y).statistic)


def spearman_rows(rows: np.ndarray, reference: Sequence[float]) -> np.ndarray:
    """Spearman correlation of every row of ``rows`` with ``reference``, vectorised: Pearson correlation of SciPy's
    average ranks (the definition ``scipy.stats.spearmanr`` uses). Rows that are constant give NaN."""
    rankdata = require("scipy.stats").rankdata
    r = rankdata(np.asarray(rows, dtype=np.float64), axis=1)
    q = rankdata(np.asarray(reference, dtype=np.float64))
    r = r - r.mean(axis=1, keepdims=True)
    q = q - q.mean()
    denom = np.sqrt((r * r).sum(axis=1) * (q * q).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (r @ q) / denom, np.nan)


def interval(values: np.ndarray, level: float = 0.95, axis: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Percentile interval (the paper's 2.5th and 97.5th percentiles for ``level=0.95``), NaNs ignored: the core's
    :func:`q2_plugins.metric.significance.percentile_interval`."""

    return percentile_interval(values, level, axis=axis)


def simulate_paired_systems(inconsistent: np.ndarray, consistent: np.ndarray, levels: Sequence[float], size: int,
                            reps: int, rng: np.random.Generator) -> np.ndarray:
    """System scores of simulated systems (paper Section 5), shape ``(reps, len(levels))``.

    Context ``i`` has an inconsistent response scored ``inconsistent[i]`` and a consistent one scored
    ``consistent[i]``. Each repetition samples ``size`` contexts with replacement (shared by all levels); a system
    with inconsistency level ``c`` answers ``round(c * size)`` of them, chosen without replacement, with the
    inconsistent response and the rest with the consistent one. Its score is the mean over its responses.
    The random draws depend only on the number of contexts, ``size``, ``reps`` and ``levels``: metrics scored on the
    same contexts are compared on the same simulated systems.
    """
    inc = np.asarray(inconsistent, dtype=np.float64)
    con = np.asarray(consistent, dtype=np.float64)
    if inc.shape != con.shape or inc.size == 0:
        raise ValueError(f"Expected two equal, non-empty score arrays, but got {inc.shape} and {con.shape}")
    contexts = rng.integers(0, inc.size, size=(reps, size))
    base = con[contexts].sum(axis=1)
    delta = (inc - con)[contexts]
    out = np.empty((reps, len(levels)))
    for j, c in enumerate(levels):
        k = round(c * size)
        chosen = rng.random((reps, size)).argsort(axis=1)[:, :k]  # k distinct positions per repetition
        out[:, j] = (base + np.take_along_axis(delta, chosen, axis=1).sum(axis=1)) / size
    return out


def simulate_mixed_systems(inconsistent: np.ndarray, consistent: np.ndarray, levels: Sequence[float], size: int,
                           reps: int, rng: np.random.Generator) -> np.ndarray:
    """System scores of systems mixing ``round(c * size)`` inconsistent and ``size - round(c * size)`` consistent
    responses, each drawn with replacement from the two pools (the paper's score-robustness experiment);
    shape ``(reps, len(levels))``."""
    inc = np.asarray(inconsistent, dtype=np.float64)
    con = np.asarray(consistent, dtype=np.float64)
    if inc.size == 0 or con.size == 0:
        raise ValueError("both the inconsistent and the consistent pool must be non-empty")
    out = np.empty((reps, len(levels)))
    for j, c in enumerate(levels):
        k = round(c * size)
        total = inc[rng.integers(0, inc.size, size=(reps, k))].sum(axis=1)
        total += con[rng.integers(0, con.size, size=(reps, size - k))].sum(axis=1)
        out[:, j] = total / size
    return out


def classification_metrics(gold: Sequence[str], predicted: Sequence[str], labels: Sequence[str]) -> dict[str, Any]:
    """Multi-class agreement of predicted with gold labels: accuracy, macro-F1, per-label precision / recall / F1 and
    the confusion matrix (rows gold, columns predicted, in the order of ``labels``).

    Macro-F1 averages over the labels that occur in the gold or the predicted labels (scikit-learn's default), so a
    gold label that is never predicted counts with F1 0 and a label absent from both does not count.
    """
    metrics = require("sklearn.metrics")
    gold, predicted = list(gold), list(predicted)
    if len(gold) != len(predicted):
        raise ValueError(f"Expected as many predicted labels as gold labels, but got {len(predicted)} for {len(gold)}")
    unknown = sorted((set(gold) | set(predicted)) - set(labels))
    if unknown:
        raise ValueError(f"Labels {unknown} are not among {list(labels)}")
    if not gold:
        return {"n": 0, "labels": list(labels)}
    present = [lab for lab in labels if lab in set(gold) | set(predicted)]
    p, r, f, support = metrics.precision_recall_fscore_support(gold, predicted, labels=list(labels), zero_division=0.0)
    return {
        "n": len(gold),
        "labels": list(labels),
        "accuracy": float(metrics.accuracy_score(gold, predicted)),
        "macro_f1": float(metrics.f1_score(gold, predicted, labels=present, average="macro", zero_division=0.0)),
        "per_label": {lab: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                            "support": int(support[i])} for i, lab in enumerate(labels)},
        "confusion": metrics.confusion_matrix(gold, predicted, labels=list(labels)).tolist(),
    }


def _rowwise_pearson(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    denom = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(denom > 0, (a * b).sum(axis=1) / denom, np.nan)


def correlations(scores: Sequence[float], ratings: Sequence[float], *, reps: int, rng: np.random.Generator,
                 level: float = 0.95) -> dict[str, Any]:
    """Spearman and Pearson correlation of ``scores`` with ``ratings`` (SciPy, with its two-sided p-values) and
    percentile bootstrap intervals: ``reps`` resamples of the pairs with replacement (NaN resamples, where a side
    is constant, are left out and counted). A coefficient is None when either side is constant."""
    x, y = np.asarray(scores, dtype=np.float64), np.asarray(ratings, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 1:
        raise ValueError(f"Expected scores and ratings of the same length, but got {x.shape} and {y.shape}")
    out: dict[str, Any] = {"n": int(x.size)}
    if x.size < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        for name in ("spearman", "pearson"):
            out[name] = {"r": None, "p": None, "low": None, "high": None, "n_undefined": 0}
        return out
    sp = require("scipy.stats")
    idx = rng.integers(0, x.size, size=(reps, x.size))
    xs, ys = x[idx], y[idx]
    boot = {"spearman": _rowwise_pearson(sp.rankdata(xs, axis=1), sp.rankdata(ys, axis=1)),
            "pearson": _rowwise_pearson(xs, ys)}
    full = {"spearman": sp.spearmanr(x, y), "pearson": sp.pearsonr(x, y)}
    for name, res in full.items():
        values = boot[name]
        valid = values[~np.isnan(values)]
        lo, hi = interval(valid, level) if valid.size else (np.nan, np.nan)
        out[name] = {"r": float(res.statistic), "p": float(res.pvalue), "low": float(lo), "high": float(hi),
                     "n_undefined": int(values.size - valid.size)}
    out["reps"] = reps
    return out
