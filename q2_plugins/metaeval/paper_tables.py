"""The paper's Topical-Chat and Dialogue NLI experiments (Honovich et al. 2021, Tables 6 and 5), with the paper's
figures beside ours.

* :func:`usr_correlation`: turn-level Spearman / Pearson correlation of each metric with USR's mean
  "Uses Knowledge" rating (:attr:`Example.rating`), bootstrap intervals and p-values; Q² counted both ways for
  responses without a valid question (left out; scored 0).
* :func:`dnli_accuracy`: entailment vs contradiction on the non-neutral Dialogue NLI pairs at a score threshold
  (0.1, the paper's), with Q²'s coverage.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, Sequence

import numpy as np

from q2_plugins.datasets.types import Example, MetaEvalData
from q2_plugins.metaeval import stats
from q2_plugins.metaeval.scores import MetricScores, no_question_treatments
from q2_plugins.metric.results import ResponseStatus

__all__ = ["USR_PAPER_ROWS", "DNLI_PAPER_ROWS", "SYSTEM_LEVEL_PAPER", "PAPER_FIGURES_NOTE", "usr_correlation",
           "dnli_accuracy"]

PAPER_FIGURES_NOTE = ("the Q² paper's figures (Tables 5 and 6) as quoted when this experiment was specified; "
                      "not checked here against the paper's arXiv and EMNLP versions, whose tables differ")

# Table 6 (Topical-Chat, 'Uses Knowledge', turn level): (row, Spearman, Pearson)
USR_PAPER_ROWS: tuple[dict[str, Any], ...] = (
    {"name": "Q² (responses with a valid question, 258 of 312)", "spearman": 0.6324, "pearson": 0.5914},
    {"name": "Q² (no valid question = 0, 312)", "spearman": 0.6773, "pearson": 0.6162},
    {"name": "USR (best)", "spearman": 0.4468, "pearson": 0.3175},
    {"name": "METEOR (against the reference response)", "spearman": 0.3909, "pearson": 0.3328},
)

# Table 5 (Dialogue NLI, Test Gold, non-neutral pairs, threshold 0.1): accuracy; coverage is Q²'s
# Section 5, simulated systems on all 244 paired WoW contexts: mean Spearman correlation with the true ranking
SYSTEM_LEVEL_PAPER: dict[str, float] = {"Q2": 0.9697}

DNLI_PAPER_ROWS: tuple[dict[str, Any], ...] = (
    {"name": "Q²", "accuracy": 0.6502},
    {"name": "Q² + NLI", "accuracy": 0.6890},
    {"name": "Q²* + NLI", "accuracy": 0.6962},
    {"name": "NLI", "accuracy": 0.5306},
)
DNLI_PAPER_COVERAGE = 0.6846


def _treatments(metric: MetricScores) -> dict[str, dict[str, float]]:
    return no_question_treatments(metric) or {"as scored": dict(metric.values)}


def _unscored(metric: MetricScores, examples: Sequence[Example], values: dict[str, float]) -> dict[str, int]:
    """How many of ``examples`` a treatment's ``values`` leave out, by reason: the metric's reason for a response it
    does not score (as the response-level table gives it), ``no_valid_question`` for one the fallback scored."""
    left = [ex.id for ex in examples if ex.id not in values]
    why = metric.unscored(left)
    return dict(Counter(why.get(i, ResponseStatus.NO_VALID_QUESTION) for i in left))


def usr_correlation(data: MetaEvalData, metrics: Sequence[MetricScores], *, reps: int, seed: int
                    ) -> dict[str, Any]:
    """Spearman and Pearson correlation of every metric with the examples' ratings, over the rated examples the
    metric scores, with ``reps`` bootstrap resamples (seeded) for 95% intervals and SciPy's p-values. A metric with
    question counts (Q²) gets one row per treatment of responses without a valid question
    (:func:`~q2_plugins.metaeval.scores.no_question_treatments`)."""
    rated = [ex for ex in data.examples if ex.rating is not None]
    out: dict[str, Any] = {"n_rated": len(rated), "reps": reps, "seed": seed, "rows": [],
                           "reference": [dict(r) for r in USR_PAPER_ROWS], "reference_note": PAPER_FIGURES_NOTE}
    for m in metrics:
        for treatment, values in _treatments(m).items():
            kept = [ex for ex in rated if ex.id in values]
            corr = stats.correlations([values[ex.id] for ex in kept], [ex.rating for ex in kept],  # type: ignore[misc]
                                      reps=reps, rng=np.random.default_rng(seed))
            out["rows"].append({"metric": m.name, "treatment": treatment, "n_missing": len(rated) - len(kept),
                                "unscored": _unscored(m, rated, values), **corr})
    return out


def dnli_accuracy(data: MetaEvalData, metrics: Sequence[MetricScores], *, threshold: float) -> dict[str, Any]:
    """Accuracy of telling entailment from contradiction on the non-neutral pairs: score > ``threshold`` predicts
    entailment, anything else contradiction; per metric over the pairs it scores (per treatment of responses without
    a valid question for Q²), with Q²'s coverage (share of the pairs with at least one valid question, errors
    left out)."""
    pairs = [ex for ex in data.examples if ex.label in ("entailment", "contradiction")]
    out: dict[str, Any] = {"threshold": threshold, "rule": "score > threshold: entailment; else contradiction",
                           "n_pairs": len(pairs), "n_neutral_left_out": len(data.examples) - len(pairs),
                           "rows": [], "coverage": {}, "reference": [dict(r) for r in DNLI_PAPER_ROWS],
                           "reference_coverage": DNLI_PAPER_COVERAGE, "reference_note": PAPER_FIGURES_NOTE}
    for m in metrics:
        for treatment, values in _treatments(m).items():
            kept = [ex for ex in pairs if ex.id in values]
            row: dict[str, Any] = {"metric": m.name, "treatment": treatment, "n": len(kept),
                                   "n_missing": len(pairs) - len(kept), "unscored": _unscored(m, pairs, values),
                                   "accuracy": None}
            if kept:
                gold = np.array([ex.consistent for ex in kept])
                pred = np.array([values[ex.id] > threshold for ex in kept])
                row["accuracy"] = float(np.mean(pred == gold))
                row["entailment_recall"] = float(pred[gold].mean()) if gold.any() else None
                row["contradiction_recall"] = float((~pred[~gold]).mean()) if (~gold).any() else None
            out["rows"].append(row)
        if m.questions:
            known = [ex for ex in pairs if ex.id in m.questions or m.missing.get(ex.id) == "no_valid_question"]
            covered = sum(ex.id in m.questions and m.questions[ex.id].num_questions > 0 for ex in known)
            out["coverage"][m.name] = {"n": len(known), "with_question": covered,
                                       "coverage": covered / len(known) if known else None}
    return out
