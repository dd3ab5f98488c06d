"""The ``spans`` experiment: which characters of a response are hallucinated, scored as RAGTruth and HalluDial data
define them.

A span source (Q² results with explanations: their ``spans``; Q² w/o NLI: the same questions merged by F1; the
overlap baseline: the response's tokens the knowledge lacks) marks spans with scores. At a threshold ``t`` the
predicted hallucinated characters of a response are those of its spans scoring ``<= t`` (at 0.5, Q²'s own
``unsupported`` and ``unanswerable`` spans).

- **Character level** (RAGTruth's span-level task): precision, recall and F1 of the predicted hallucinated characters
  against the annotated ones, summed over the responses whose annotation locates them (:attr:`Example.spans`).
- **Example level**: a response is predicted hallucinated when any of its characters is (a response Q² scored by
  its fallback, which has no spans, when its score is at or below the same threshold); precision, recall and F1 of
  the hallucinated class over every labelled response the source scored.

Each level's threshold is the one of best F1 on the data's dev split (RAGTruth's ``train`` split; a HalluDial file
named ``*train*`` / ``*dev*``), never on its test examples; without a dev split it is fixed at 0.5. The report
names which, with the number of dev examples.
"""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from q2_plugins.datasets.types import Example, MetaEvalData
from q2_plugins.metaeval.scores import MetricScores

__all__ = ["FIXED_THRESHOLD", "predicted_chars", "char_prf", "example_prf", "choose_threshold", "span_level",
           "add_span_level", "span_section"]

#: the threshold without a dev split: Q²'s own line between supported and not
FIXED_THRESHOLD = 0.5


def _chars(spans: Sequence[tuple[int, int]]) -> set[int]:
    return {c for s, e in spans for c in range(s, e)}


def predicted_chars(spans: Sequence[tuple[int, int, float]], threshold: float) -> set[int]:
    """The characters of the spans scoring at or below ``threshold``."""
    return _chars([(s, e) for s, e, score in spans if score <= threshold])


def _prf(tp: int, predicted: int, gold: int, n: int) -> dict[str, Any]:
    """P / R / F1 of ``n`` examples; None for each (an empty cell) when there is no example."""
    if not n:
        return {"precision": None, "recall": None, "f1": None, "n_predicted": 0, "n_gold": 0}
    p = tp / predicted if predicted else 0.0
    r = tp / gold if gold else 0.0
    return {"precision": p, "recall": r, "f1": 2 * p * r / (p + r) if p + r else 0.0, "n_predicted": predicted,
            "n_gold": gold}


def char_prf(examples: Sequence[Example], metric: MetricScores, threshold: float) -> dict[str, Any]:
    """Character-level precision, recall and F1 (counts summed over ``examples``, which have annotated spans)."""
    tp = predicted = gold = 0
    for ex in examples:
        pred, truth = predicted_chars(metric.spans[ex.id], threshold), _chars(ex.spans or ())
        tp, predicted, gold = tp + len(pred & truth), predicted + len(pred), gold + len(truth)
    return _prf(tp, predicted, gold, len(examples))


def example_scores(metric: MetricScores, example_id: str) -> list[float]:
    """The scores that decide whether a response is hallucinated at the example level: its spans' scores, or, for a
    response scored by Q²'s fallback (no question, so no span), its score."""
    stats = metric.questions.get(example_id)
    if stats is not None and stats.used_fallback and not metric.spans[example_id] and example_id in metric.values:
        return [metric.values[example_id]]
    return [score for _, _, score in metric.spans[example_id]]


def example_prf(examples: Sequence[Example], metric: MetricScores, threshold: float) -> dict[str, Any]:
    """Example-level precision, recall and F1 of the hallucinated class (:func:`example_scores` decide)."""
    flagged = [ex for ex in examples if any(score <= threshold for score in example_scores(metric, ex.id))]
    tp = sum(not ex.consistent for ex in flagged)
    return _prf(tp, len(flagged), sum(not ex.consistent for ex in examples), len(examples))


def choose_threshold(dev: Sequence[Example], metric: MetricScores,
                     measure: Callable[[Sequence[Example], MetricScores, float], dict[str, Any]]
                     ) -> tuple[float, str]:
    """The threshold of best F1 on ``dev`` (among the span scores seen there; the lowest of equals), and where it
    comes from; :data:`FIXED_THRESHOLD` when there is no dev example."""
    if not dev:
        return FIXED_THRESHOLD, f"fixed at {FIXED_THRESHOLD:g}: the data has no dev split (never tuned on test)"
    scores = sorted({score for ex in dev for score in example_scores(metric, ex.id)} | {FIXED_THRESHOLD})
    best = max(scores, key=lambda t: (measure(dev, metric, t)["f1"] or 0.0, -t))
    return best, f"best F1 on the dev split ({len(dev)} examples)"


def span_level(data: MetaEvalData, metrics: Sequence[MetricScores]) -> dict[str, Any]:
    """Character- and example-level P / R / F1 of every span source, on the test examples (split ``test`` or none),
    thresholds chosen on the dev examples (split ``dev``)."""
    rows = []
    for m in metrics:
        if not m.spans:
            continue
        scored = [ex for ex in data.examples if ex.id in m.spans]
        dev = [ex for ex in scored if ex.split == "dev"]
        test = [ex for ex in scored if ex.split != "dev"]
        row: dict[str, Any] = {"metric": m.name, "signature": m.signature,
                               "n_test_unscored": sum(ex.split != "dev" and ex.id not in m.spans
                                                      for ex in data.examples)}
        for level, measure, keep in (("span", char_prf, lambda ex: ex.spans is not None),
                                     ("example", example_prf, lambda ex: True)):
            t, source = choose_threshold([ex for ex in dev if keep(ex)], m, measure)
            on = [ex for ex in test if keep(ex)]
            row[level] = {"threshold": t, "threshold_source": source, "n_test": len(on), **measure(on, m, t)}
        rows.append(row)
    annotated = sum(ex.spans is not None for ex in data.examples)
    return {"rows": rows, "n_annotated": annotated, "n_examples": len(data.examples),
            "n_dev": sum(ex.split == "dev" for ex in data.examples),
            "definition": "character level: predicted hallucinated characters (spans scoring <= threshold) against "
                          "the annotated ones, counts summed over responses; example level: a response with any "
                          "predicted character is hallucinated"}


def add_span_level(report: dict[str, Any], data: MetaEvalData, metrics: Sequence[MetricScores]) -> None:
    """The experiment into ``report["spans"]``, or why not into ``report["skipped"]``."""
    if not any(ex.spans for ex in data.examples):
        report["skipped"]["spans"] = "the data locates no hallucinated span (RAGTruth and HalluDial do)"
    elif not any(m.spans for m in metrics):
        report["skipped"]["spans"] = "no metric gives spans (Q² results with explanations, the overlap baseline)"
    else:
        report["spans"] = span_level(data, metrics)


def _num(x: Optional[float]) -> str:
    return "–" if x is None else f"{100 * x:.1f}"


def span_section(block: dict[str, Any]) -> list[str]:
    """The experiment's markdown: one row per span source and level, with the threshold and its source."""
    out = ["### Span-level and example-level hallucination detection", "",
           "| metric | level | n test | not scored | precision | recall | F1 | threshold | threshold from |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in block["rows"]:
        for level in ("span", "example"):
            x = r[level]
            out.append(f"| {r['metric']} | {'character' if level == 'span' else 'example'} | {x['n_test']} | "
                       f"{r['n_test_unscored']} | "
                       f"{_num(x['precision'])} | {_num(x['recall'])} | {_num(x['f1'])} | {x['threshold']:.4g} | "
                       f"{x['threshold_source']} |")
    out += ["", f"{block['n_annotated']} of {block['n_examples']} responses are annotated at the character level "
                f"(their hallucinated characters located, or none); {block['n_dev']} are dev examples. "
                f"{block['definition'][0].upper()}{block['definition'][1:]}. 'Not scored': the metric's test "
                f"examples without spans (an error, e.g. a response over the response budget, or no score), left out "
                f"of its rows.", ""]
    return out
