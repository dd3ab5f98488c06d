"""How today's consistency metrics are placed: balanced accuracy per data set (LLM-AggreFact style, at a threshold
tuned on the dev split and at a fixed one) and a TRUE-style ROC AUC table with published figures beside ours.

Published figures are shown only beside data that is theirs, each with its source, and a row says whether our
figures are on the same examples (same count) or not.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import numpy as np

from q2_plugins.datasets.registry import per_subset_benchmarks
from q2_plugins.datasets.types import MetaEvalData
from q2_plugins.metaeval import stats
from q2_plugins.metaeval.scores import MetricScores

__all__ = ["PUBLISHED", "NOT_LISTED", "per_dataset_balanced_accuracy", "published_beside", "benchmark",
           "true_summary"]

_ALIGNSCORE = ("Zha et al. 2023, AlignScore (ACL 2023), TRUE benchmark table, ROC AUC; quoted, not checked here "
               "against the paper")
#: published ROC AUC on the TRUE versions of the dialogue data sets: what data, how many examples, which figures
PUBLISHED: dict[str, dict[str, Any]] = {
    "BEGIN": {"data": "BEGIN v1 development set, as in TRUE", "n": 836,
              "figures": [("AlignScore-large", 0.827, _ALIGNSCORE), ("QAFactEval", 0.810, _ALIGNSCORE)]},
    "Q2": {"data": "the Q² paper's WoW cross annotation (both systems' responses), as in TRUE", "n": 1088,
           "figures": [("AlignScore-large", 0.786, _ALIGNSCORE), ("QAFactEval", 0.758, _ALIGNSCORE)]},
    "DialFact": {"data": "DialFact test set, as in TRUE", "n": 8689,
                 "figures": [("AlignScore-large", 0.851, _ALIGNSCORE), ("QAFactEval", 0.818, _ALIGNSCORE)]},
}
NOT_LISTED = ("MiniCheck, FactCG and Granite Guardian are not listed: no published per-data-set figure of theirs on "
              "these data sets was at hand to cite with its source.")


def _scored(metric: MetricScores, ids: Sequence[str], consistent: Sequence[bool]) -> tuple[np.ndarray, np.ndarray]:
    keep = [k for k, i in enumerate(ids) if i in metric.values]
    y = np.array([consistent[k] for k in keep], dtype=bool)
    s = metric.array([ids[k] for k in keep])
    if not metric.bounded and s.size:
        s = stats.minmax(s)
    return y, s


def _both(y: np.ndarray) -> bool:
    return bool(y.any() and (~y).any())


def _dataset_row(metric: MetricScores, dev: list, test: list, threshold: float) -> dict[str, Any]:
    """Balanced accuracy on one data set's test examples at ``threshold`` and at the dev-tuned threshold."""
    yt, st = _scored(metric, [ex.id for ex in test], [ex.consistent for ex in test])
    row: dict[str, Any] = {"n_test": int(yt.size), "n_test_unscored": len(test) - int(yt.size), "n_dev": 0,
                           "balanced_accuracy_fixed": None, "threshold_tuned": None, "balanced_accuracy_tuned": None}
    if _both(yt):
        row["balanced_accuracy_fixed"] = stats.threshold_metrics(yt, st, threshold)["balanced_accuracy"]
    yd, sd = _scored(metric, [ex.id for ex in dev], [ex.consistent for ex in dev])
    row["n_dev"] = int(yd.size)
    if _both(yd) and _both(yt):
        t, _ = stats.tune_threshold(yd, sd, objective="balanced_accuracy")
        row["threshold_tuned"] = t
        row["balanced_accuracy_tuned"] = stats.threshold_metrics(yt, st, t)["balanced_accuracy"]
    return row


def per_dataset_balanced_accuracy(data: MetaEvalData, metrics: Sequence[MetricScores], threshold: float
                                  ) -> dict[str, Any]:
    """For each metric and data set (the subset): balanced accuracy on the test examples (split ``test`` or none)
    at ``threshold`` and at the threshold of best balanced accuracy on the data set's dev examples (split
    ``dev``); and the unweighted mean over the data sets that have a figure."""
    datasets = data.subsets()
    out: dict[str, Any] = {"threshold": threshold, "datasets": datasets, "metrics": {},
                           "has_dev": any(ex.split == "dev" for ex in data.examples)}
    for m in metrics:
        rows = {}
        for name in datasets:
            exs = [ex for ex in data.examples if ex.subset == name]
            rows[name] = _dataset_row(m, [ex for ex in exs if ex.split == "dev"],
                                      [ex for ex in exs if ex.split != "dev"], threshold)
        fixed = [r["balanced_accuracy_fixed"] for r in rows.values() if r["balanced_accuracy_fixed"] is not None]
        tuned = [r["balanced_accuracy_tuned"] for r in rows.values() if r["balanced_accuracy_tuned"] is not None]
        out["metrics"][m.name] = {
            "rows": rows,
            "mean_fixed": float(np.mean(fixed)) if fixed else None, "n_fixed": len(fixed),
            "mean_tuned": float(np.mean(tuned)) if tuned else None, "n_tuned": len(tuned),
        }
    return out


def _true_set(data: MetaEvalData) -> tuple[list[str], list[bool], str]:
    """The examples TRUE's version of the data set holds: for the Q² WoW data the cross-annotated responses with
    the cross-annotation labels, else the response-level examples."""
    if data.benchmark == "Q2" and data.contexts:
        pairs = [(i, c.consistent[sys]) for c in data.contexts for sys, i in c.example_ids.items()]
        return [i for i, _ in pairs], [y for _, y in pairs], "the cross-annotated responses"
    return [ex.id for ex in data.examples], [ex.consistent for ex in data.examples], "the response-level examples"


def published_beside(data: MetaEvalData, metrics: Sequence[MetricScores]) -> Optional[dict[str, Any]]:
    """ROC AUC of each metric on the examples TRUE's version of the data holds, beside the published figures on
    that data (None when none are published for it)."""
    published = PUBLISHED.get(data.benchmark or "")
    if published is None:
        return None
    ids, consistent, which = _true_set(data)
    rows = []
    for m in metrics:
        y, s = _scored(m, ids, consistent)
        rows.append({"metric": m.name, "n": int(y.size), "roc_auc": stats.roc_auc(y, s) if _both(y) else None,
                     "same_examples": int(y.size) == published["n"]})
    return {"benchmark": data.benchmark, "data": published["data"], "published_n": published["n"], "ours": which,
            "n_examples": len(ids), "rows": rows,
            "published": [{"metric": name, "roc_auc": value, "source": source}
                          for name, value, source in published["figures"]],
            "not_listed": NOT_LISTED}


def benchmark(data: MetaEvalData, metrics: Sequence[MetricScores], threshold: float) -> dict[str, Any]:
    """The ``benchmark`` experiment: per-data-set balanced accuracy (when the data is a benchmark of several data
    sets, or has a dev split) and the published figures beside ours (when there are any for the data)."""

    out: dict[str, Any] = {}
    if data.benchmark in per_subset_benchmarks() or any(ex.split == "dev" for ex in data.examples):
        out["per_dataset"] = per_dataset_balanced_accuracy(data, metrics, threshold)
    beside = published_beside(data, metrics)
    if beside is not None:
        out["published"] = beside
    return out


def true_summary(reports: Sequence[dict[str, Any]]) -> str:
    """One TRUE-style markdown table from several reports (``report.json`` of runs with the ``benchmark``
    experiment on BEGIN v1, the Q² WoW data, DialFact): a column per data set, a row per metric (ROC AUC; ‡ when
    not on the examples the published figures are on), then the published rows and their sources."""
    blocks = [r["benchmark"]["published"] for r in reports if "published" in r.get("benchmark", {})]
    if not blocks:
        raise ValueError("none of the reports has published figures beside it: run the benchmark experiment on "
                         "BEGIN v1, the Q² WoW data or DialFact")
    columns = [b["benchmark"] for b in blocks]
    names = list(dict.fromkeys(r["metric"] for b in blocks for r in b["rows"]))
    lines = ["| metric | " + " | ".join(columns) + " |", "|" + "---|" * (len(columns) + 1)]
    for name in names:
        cells = []
        for b in blocks:
            row = next((r for r in b["rows"] if r["metric"] == name), None)
            auc = None if row is None else row["roc_auc"]
            cells.append("–" if auc is None else f"{auc:.3f}" + ("" if row["same_examples"] else " ‡"))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    published = list(dict.fromkeys(p["metric"] for b in blocks for p in b["published"]))
    for name in published:
        cells = [next((f"{p['roc_auc']:.3f}" for p in b["published"] if p["metric"] == name), "–") for b in blocks]
        lines.append(f"| published: {name} | " + " | ".join(cells) + " |")
    sources = sorted({p["source"] for b in blocks for p in b["published"]})
    lines += ["", "‡ not on the examples the published figures are on (another count): not like for like.",
              "Published figures: " + "; ".join(sources) + ".", blocks[0]["not_listed"]]
    return "\n".join(lines)
