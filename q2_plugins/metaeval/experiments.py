"""The experiments of the paper (Sections 4 and 5) over any metric's scores, and the run that chains them.

Every experiment takes the data, a list of :class:`~q2_plugins.metaeval.scores.MetricScores` and
:class:`MetaEvalOptions`, and returns a JSON-ready dict. Responses without a score are left out of a metric's
figures and counted (``n`` / ``n_missing``); randomness comes from ``numpy.random.default_rng(options.seed)``, created
afresh for each experiment and metric, so metrics scored on the same examples see the same random draws and the same
seed gives the same numbers.
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

from q2_plugins import __version__
from q2_plugins.datasets.types import Example, MetaEvalData
from q2_plugins.metaeval import stats
from q2_plugins.metaeval.baselines import response_length
from q2_plugins.metaeval.benchmark import benchmark
from q2_plugins.metaeval.caveats import find_caveats
from q2_plugins.metaeval.paper_tables import SYSTEM_LEVEL_PAPER, dnli_accuracy, usr_correlation
from q2_plugins.metaeval.scores import MetricScores
from q2_plugins.metaeval.spans import add_span_level
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.taxonomy import COARSE, LABELS, LABELS3

__all__ = [
    "EXPERIMENTS",
    "MetaEvalOptions",
    "control_variants",
    "response_level",
    "subset_table",
    "system_level",
    "robustness",
    "random_knowledge",
    "length_control",
    "taxonomy",
    "stress",
    "BEGIN_PAPER_BASELINE",
    "has_begin_labels",
    "run_meta_eval",
    "scored_examples",
    "MetaEvalRun",
]

EXPERIMENTS = ("response", "subsets", "system", "robustness", "random-knowledge", "length", "taxonomy", "stress",
               "usr", "dnli", "benchmark", "spans")
RANDOM_KNOWLEDGE = ("same_dialogue", "other_dialogue")
#: experiments run only when named (they score the data several times): ``variants``, the paper's Table 7
OPT_IN_EXPERIMENTS = ("variants",)


@dataclass(frozen=True)
class MetaEvalOptions:
    """Settings of a meta-evaluation run (each is a ``q2 meta-eval`` flag)."""

    threshold: float = 0.5
    tune_threshold: bool = False
    dev_fraction: float = 0.5
    seed: int = 0
    reps: int = 1000
    system_levels: tuple[float, ...] = (0.05, 0.10, 0.15, 0.20, 0.25)
    system_size: int = 350
    robustness_levels: tuple[float, ...] = tuple(round(0.1 * i, 1) for i in range(11))
    robustness_size: int = 400
    experiments: tuple[str, ...] = EXPERIMENTS
    dnli_threshold: float = 0.1

    def __post_init__(self) -> None:
        unknown = [e for e in self.experiments if e not in EXPERIMENTS + OPT_IN_EXPERIMENTS]
        if unknown:
            raise ValueError(f"Unknown experiment(s) {unknown}; expected names from "
                             f"{list(EXPERIMENTS + OPT_IN_EXPERIMENTS)}")
        for name in ("reps", "system_size", "robustness_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"MetaEvalOptions.{name} must be a positive integer, got {value!r}")
        for name in ("system_levels", "robustness_levels"):
            levels = getattr(self, name)
            if len(levels) < 2 or any(not 0.0 <= c <= 1.0 for c in levels):
                raise ValueError(f"MetaEvalOptions.{name} needs at least two levels in [0, 1], got {levels!r}")
        if not 0.0 < self.dev_fraction < 1.0:
            raise ValueError(f"MetaEvalOptions.dev_fraction must be in (0, 1), got {self.dev_fraction!r}")

    def rng(self) -> np.random.Generator:
        return np.random.default_rng(self.seed)

    @property
    def signature(self) -> str:
        """Everything here that changes a figure, in one line (printed with every report)."""
        levels = ",".join(f"{c:g}" for c in self.system_levels)
        rob = ",".join(f"{c:g}" for c in self.robustness_levels)
        tune = f"tune:dev{self.dev_fraction:g}" if self.tune_threshold else "tune:no"
        dnli = f"|dnli-thr:{self.dnli_threshold:g}(<=contra)" if "dnli" in self.experiments else ""
        return (f"q2-metaeval:{__version__}|thr:{self.threshold:g}(<=incons)|{tune}|seed:{self.seed}|"
                f"reps:{self.reps}|sys:{self.system_size}@{levels}|rob:{self.robustness_size}@{rob}{dnli}")


def _f(x: Any) -> Optional[float]:
    """A JSON-safe float (None for NaN / None)."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def scored_examples(metric: MetricScores, examples: Sequence[Example]) -> tuple[list[Example], np.ndarray]:
    """The examples ``metric`` scores, and their scores (min-max normalised when the metric is not bounded)."""
    kept = [ex for ex in examples if ex.id in metric.values]
    scores = metric.array([ex.id for ex in kept])
    if not metric.bounded and scores.size:
        scores = stats.minmax(scores)
    return kept, scores


# -- controls: inputs with random knowledge ----------------------------------------------------------------------
def _variant(kind: str, ex: Example, knowledge: str) -> Example:
    digest = hashlib.sha1(knowledge.encode("utf-8")).hexdigest()[:8]
    return Example(id=f"random-knowledge/{kind}:{ex.id}#{digest}", response=ex.response, knowledge=knowledge,
                   consistent=ex.consistent, label=ex.label, subset=ex.subset, dialogue=ex.dialogue,
                   history=ex.history)


def control_variants(data: MetaEvalData, seed: int) -> dict[str, dict[str, Example]]:
    """The random-knowledge control: for each response-level example, the same response with the knowledge of

    * ``same_dialogue``: another turn of the same dialogue (a knowledge text of that dialogue other than its own;
      examples whose dialogue has no other knowledge get none);
    * ``other_dialogue``: a random example of another dialogue (of another example, when dialogues are unknown).

    Returns ``{kind: {example id: variant}}``. Seeded: the same seed gives the same substitutions, and a variant's id
    ends with a hash of its knowledge, so scores of other substitutions can never be matched to it.
    """
    rng = np.random.default_rng([seed, 1])
    out: dict[str, dict[str, Example]] = {kind: {} for kind in RANDOM_KNOWLEDGE}
    examples = data.examples
    for ex in examples:
        pool = [k for k in data.dialogue_knowledge.get(ex.dialogue, []) if k != ex.knowledge] \
            if ex.dialogue is not None else []
        if pool:
            out["same_dialogue"][ex.id] = _variant("same_dialogue", ex, pool[int(rng.integers(len(pool)))])
        for _ in range(1000):
            other = examples[int(rng.integers(len(examples)))]
            different = other.dialogue != ex.dialogue if ex.dialogue is not None else other.id != ex.id
            if different and other.knowledge != ex.knowledge:
                out["other_dialogue"][ex.id] = _variant("other_dialogue", ex, other.knowledge)
                break
    return out


# -- response level -------------------------------------------------------------------------------------------------
def _split(data: MetaEvalData, options: MetaEvalOptions) -> tuple[set[str], set[str], str]:
    splits = {ex.split for ex in data.examples}
    if splits == {"dev", "test"}:
        dev = {ex.id for ex in data.examples if ex.split == "dev"}
        return dev, {ex.id for ex in data.examples if ex.split == "test"}, "the data's dev / test split"
    if splits != {None}:
        raise SettingError("split_column", f"threshold tuning reads the values 'dev' and 'test' in it, found "
                                           f"{sorted(str(s) for s in splits)}")
    dev_idx, test_idx = stats.stratified_split([ex.consistent for ex in data.examples], options.dev_fraction,
                                               options.seed)
    ids = [ex.id for ex in data.examples]
    return ({ids[i] for i in dev_idx}, {ids[i] for i in test_idx},
            f"random label-stratified split, dev fraction {options.dev_fraction}, seed {options.seed}")


def response_level(data: MetaEvalData, metrics: Sequence[MetricScores], options: MetaEvalOptions) -> dict[str, Any]:
    """Accuracy and balanced accuracy at the threshold, ROC AUC, average precision, precision / recall curves and
    score distributions per label, for each metric; with ``tune_threshold`` also a threshold tuned on a dev split
    and applied to the test split."""
    split = _split(data, options) if options.tune_threshold else None
    out: dict[str, Any] = {"threshold": options.threshold, "rule": "score <= threshold is inconsistent",
                           "metrics": {}}
    if split is not None:
        out["split"] = {"how": split[2], "n_dev": len(split[0]), "n_test": len(split[1])}
    for m in metrics:
        kept, s = scored_examples(m, data.examples)
        y = np.array([ex.consistent for ex in kept], dtype=bool)
        row: dict[str, Any] = {"n": len(kept), "n_missing": len(data.examples) - len(kept),
                               "normalised": not m.bounded,
                               "unscored": dict(Counter(m.unscored(ex.id for ex in data.examples).values()))}
        if len(kept) == 0:
            out["metrics"][m.name] = row
            continue
        row.update(stats.threshold_metrics(y, s, options.threshold))
        row["roc_auc"] = stats.roc_auc(y, s)
        row["ap_inconsistent"] = stats.average_precision(y, s, "inconsistent")
        row["ap_consistent"] = stats.average_precision(y, s, "consistent")
        if y.any() and (~y).any():
            row["pr_inconsistent"] = stats.pr_curve(y, s, "inconsistent")
            row["pr_consistent"] = stats.pr_curve(y, s, "consistent")
        row["distribution"] = {"consistent": stats.distribution(s[y]), "inconsistent": stats.distribution(s[~y])}
        labels = list(dict.fromkeys(ex.label for ex in kept))
        if set(labels) != {"consistent", "inconsistent"}:
            row["distribution_by_label"] = {lab: stats.distribution(s[[ex.label == lab for ex in kept]])
                                            for lab in labels}
        if split is not None:
            dev = np.array([ex.id in split[0] for ex in kept], dtype=bool)
            test = np.array([ex.id in split[1] for ex in kept], dtype=bool)
            if dev.any() and test.any():
                t, dev_acc = stats.tune_threshold(y[dev], s[dev])
                row["tuned"] = {
                    "threshold": t, "dev_accuracy": dev_acc, "n_dev": int(dev.sum()),
                    "test": stats.threshold_metrics(y[test], s[test], t),
                    "test_at_fixed_threshold": stats.threshold_metrics(y[test], s[test], options.threshold),
                }
        out["metrics"][m.name] = row
    return out


# -- the paper's Table 2 ----------------------------------------------------------------------------------------
def _question_columns(metric: MetricScores, ids: Sequence[str]) -> dict[str, Any]:
    qs = [metric.questions[i] for i in ids if i in metric.questions]
    if not qs:
        return {}
    with_q = [q for q in qs if q.num_questions > 0]
    total = sum(q.num_questions for q in qs)
    out: dict[str, Any] = {
        "n": len(qs),
        "questions": total,
        "questions_per_response": _f(total / len(with_q)) if with_q else None,
        "fallback_rate": sum(q.used_fallback for q in qs) / len(qs),
        "no_answer_rate": None,
    }
    if all(q.num_no_answer is not None for q in qs) and total:
        out["no_answer_rate"] = sum(q.num_no_answer for q in qs) / total  # type: ignore[misc]
    return out


def subset_table(data: MetaEvalData, metrics: Sequence[MetricScores]) -> dict[str, Any]:
    """Mean score per subset (and per binary label) for each metric; for metrics with question counts (Q²) the
    number of questions, questions per response with questions, the share of questions with no answer in the
    knowledge and the share of responses scored by the fallback (the paper's Table 2)."""
    groups: list[tuple[str, list[Example]]] = [(s, [ex for ex in data.examples if ex.subset == s])
                                               for s in data.subsets()]
    if len(groups) > 2 or {g for g, _ in groups} != {"consistent", "inconsistent"}:
        groups += [("all consistent", [ex for ex in data.examples if ex.consistent]),
                   ("all inconsistent", [ex for ex in data.examples if not ex.consistent])]
    rows = []
    for name, members in groups:
        ids = [ex.id for ex in members]
        row: dict[str, Any] = {"subset": name, "n": len(ids), "mean": {}, "n_scored": {}, "questions": {}}
        for m in metrics:
            values = m.array(ids)
            values = values[~np.isnan(values)]
            row["n_scored"][m.name] = int(values.size)
            row["mean"][m.name] = _f(values.mean()) if values.size else None
            q = _question_columns(m, ids)
            if q:
                row["questions"][m.name] = q
        rows.append(row)
    return {"rows": rows, "metrics": [m.name for m in metrics]}


# -- system level ------------------------------------------------------------------------------------------------
def _bootstrap_summary(system_scores: np.ndarray, levels: Sequence[float]) -> dict[str, Any]:
    rho = stats.spearman_rows(system_scores, [-c for c in levels])  # true ranking: fewer inconsistent = better
    valid = rho[~np.isnan(rho)]
    lo, hi = stats.interval(valid) if valid.size else (np.nan, np.nan)
    return {
        "spearman_mean": _f(valid.mean()) if valid.size else None,
        "spearman_low": _f(lo), "spearman_high": _f(hi),
        "n_undefined": int(rho.size - valid.size),
        "system_score_mean": [_f(v) for v in system_scores.mean(axis=0)],
    }


def system_level(data: MetaEvalData, metrics: Sequence[MetricScores], options: MetaEvalOptions) -> dict[str, Any]:
    """The paper's simulated-systems experiment (Section 5) on the paired contexts with exactly one inconsistent
    response: bootstrap systems with each inconsistency level, and the Spearman correlation of their system scores
    with the true ranking (fewer inconsistent responses ranks higher): mean and 95% interval over the repetitions.

    Each metric runs on every context it scores both responses of (``per_metric``) and, for a like-for-like
    comparison on the same simulated systems, on the contexts every metric scores (``common``).
    """
    eligible = [c for c in data.contexts if c.one_inconsistent]
    out: dict[str, Any] = {
        "n_contexts": len(data.contexts), "n_one_inconsistent": len(eligible), "levels": list(options.system_levels),
        "size": options.system_size, "reps": options.reps, "seed": options.seed, "per_metric": {}, "common": {},
        "paper": dict(SYSTEM_LEVEL_PAPER),
    }
    pairs = []  # (inconsistent id, consistent id)
    for c in eligible:
        inc = next(s for s, ok in c.consistent.items() if not ok)
        con = next(s for s, ok in c.consistent.items() if ok)
        pairs.append((c.example_ids[inc], c.example_ids[con]))

    def run(metric: MetricScores, chosen: list[tuple[str, str]]) -> dict[str, Any]:
        # raw scores even for unbounded metrics: min-max scaling is affine and leaves the rank correlation as is
        inc = metric.array([i for i, _ in chosen])
        con = metric.array([c for _, c in chosen])
        sims = stats.simulate_paired_systems(inc, con, options.system_levels, options.system_size, options.reps,
                                             options.rng())
        return {"n_contexts": len(chosen), **_bootstrap_summary(sims, options.system_levels)}

    covered = {m.name: [p for p in pairs if p[0] in m.values and p[1] in m.values] for m in metrics}
    for m in metrics:
        chosen = covered[m.name]
        out["per_metric"][m.name] = run(m, chosen) if len(chosen) >= 2 else {"n_contexts": len(chosen)}
    common = [p for p in pairs if all(p[0] in m.values and p[1] in m.values for m in metrics)]
    out["common"]["n_contexts"] = len(common)
    if len(common) >= 2 and any(len(covered[m.name]) != len(common) for m in metrics):
        out["common"]["metrics"] = {m.name: run(m, common) for m in metrics}
    return out


# -- score robustness ------------------------------------------------------------------------------------------------
def robustness(data: MetaEvalData, metrics: Sequence[MetricScores], options: MetaEvalOptions) -> dict[str, Any]:
    """The paper's score-robustness experiment: systems of ``robustness_size`` responses drawn with replacement
    from the consistent and inconsistent pools, a share ``c`` inconsistent; mean system score and 95% interval over
    the repetitions, per level."""
    out: dict[str, Any] = {"levels": list(options.robustness_levels), "size": options.robustness_size,
                           "reps": options.reps, "seed": options.seed, "metrics": {}}
    for m in metrics:
        kept, s = scored_examples(m, data.examples)
        y = np.array([ex.consistent for ex in kept], dtype=bool)
        if not (y.any() and (~y).any()):
            out["metrics"][m.name] = {"n_consistent": int(y.sum()), "n_inconsistent": int((~y).sum())}
            continue
        sims = stats.simulate_mixed_systems(s[~y], s[y], options.robustness_levels, options.robustness_size,
                                            options.reps, options.rng())
        lo, hi = stats.interval(sims)
        out["metrics"][m.name] = {
            "n_consistent": int(y.sum()), "n_inconsistent": int((~y).sum()), "normalised": not m.bounded,
            "mean": [_f(v) for v in sims.mean(axis=0)], "low": [_f(v) for v in lo], "high": [_f(v) for v in hi],
        }
    return out


# -- controls ---------------------------------------------------------------------------------------------------------
def random_knowledge(data: MetaEvalData, metrics: Sequence[MetricScores],
                     variants: dict[str, dict[str, Example]]) -> dict[str, Any]:
    """Mean score with the example's own knowledge and with substituted random knowledge, per subset, over the
    examples that have a substitution and a score under both (a metric that reads the knowledge drops)."""
    out: dict[str, Any] = {}
    for kind, by_id in variants.items():
        block: dict[str, Any] = {"n_examples": len(data.examples), "n_substituted": len(by_id), "subsets": {}}
        groups = [(s, [ex for ex in data.examples if ex.subset == s]) for s in data.subsets()]
        groups.append(("all", list(data.examples)))
        for name, members in groups:
            cell: dict[str, Any] = {}
            for m in metrics:
                both = [ex for ex in members
                        if ex.id in by_id and ex.id in m.values and by_id[ex.id].id in m.values]
                cell[m.name] = {
                    "n": len(both),
                    "original": _f(np.mean([m.values[ex.id] for ex in both])) if both else None,
                    "substituted": _f(np.mean([m.values[by_id[ex.id].id] for ex in both])) if both else None,
                }
            block["subsets"][name] = cell
        out[kind] = block
    return out


def length_control(data: MetaEvalData, metrics: Sequence[MetricScores]) -> dict[str, Any]:
    """Response length (words): mean per subset and label, how well length alone separates the labels (ROC AUC),
    and each metric's Spearman correlation with length."""
    lengths = {ex.id: response_length(ex.response) for ex in data.examples}
    y = np.array([ex.consistent for ex in data.examples], dtype=bool)
    ln = np.array([lengths[ex.id] for ex in data.examples], dtype=np.float64)
    out: dict[str, Any] = {
        "unit": "words",
        "mean_by_subset": {s: _f(np.mean([lengths[ex.id] for ex in data.examples if ex.subset == s]))
                           for s in data.subsets()},
        "mean_consistent": _f(ln[y].mean()) if y.any() else None,
        "mean_inconsistent": _f(ln[~y].mean()) if (~y).any() else None,
        "length_roc_auc": stats.roc_auc(y, ln),
        "spearman_with_length": {},
    }
    for m in metrics:
        kept = [ex for ex in data.examples if ex.id in m.values]
        out["spearman_with_length"][m.name] = {
            "n": len(kept),
            "spearman": stats.spearman(m.array([ex.id for ex in kept]), [lengths[ex.id] for ex in kept]),
        }
    return out


# -- BEGIN's taxonomy ------------------------------------------------------------------------------------------------
# The best fine-tuned classifiers of the BEGIN paper (BERT / T5 trained on MNLI plus adversarial data), dev split of
# the preprint's data version (the released data was revised since, so the figures compare loosely).
BEGIN_PAPER_BASELINE = {
    "name": "BEGIN paper: best of BERT / T5 fine-tuned on MNLI + adversarial data (dev, preprint data)",
    "three_way": {"accuracy": 0.710, "macro_f1": 0.526},
    "five_way": {"accuracy": 0.464, "macro_f1": 0.335},
}


def has_begin_labels(data: MetaEvalData) -> bool:
    return bool(data.examples) and all(ex.label in LABELS for ex in data.examples)


def taxonomy(data: MetaEvalData, metrics: Sequence[MetricScores]) -> dict[str, Any]:
    """Five-way and three-way agreement of each label source with BEGIN's gold labels (accuracy, macro-F1, per
    label, confusion matrix), over the examples the source labels, beside the BEGIN paper's best baseline."""

    out: dict[str, Any] = {"labels": list(LABELS), "labels3": list(LABELS3), "reference": BEGIN_PAPER_BASELINE,
                           "metrics": {}}
    for m in metrics:
        if not m.labels:
            continue
        kept = [ex for ex in data.examples if ex.id in m.labels]
        gold, pred = [ex.label for ex in kept], [m.labels[ex.id] for ex in kept]
        out["metrics"][m.name] = {
            "n": len(kept), "n_missing": len(data.examples) - len(kept),
            "five_way": stats.classification_metrics(gold, pred, LABELS),
            "three_way": stats.classification_metrics([COARSE[g] for g in gold], [COARSE[p] for p in pred], LABELS3),
        }
    return out


# -- stress pairs ---------------------------------------------------------------------------------------------------
def stress(data: MetaEvalData, metrics: Sequence[MetricScores]) -> dict[str, Any]:
    """Per perturbation method, how often each metric scores the original above its perturbation (and ties, below),
    over the pairs it scores on both sides; for label sources, how often the perturbation gets the expected label."""

    methods = list(dict.fromkeys(p.method for p in data.pairs))
    groups = [(method, [p for p in data.pairs if p.method == method]) for method in methods]
    if len(groups) > 1:
        groups.append(("all", list(data.pairs)))
    out: dict[str, Any] = {"methods": methods, "rows": []}
    for name, pairs in groups:
        row: dict[str, Any] = {"method": name, "n_pairs": len(pairs), "scores": {}, "labels": {}}
        for m in metrics:
            both = [p for p in pairs if p.original_id in m.values and p.perturbed_id in m.values]
            if m.values:
                orig = m.array([p.original_id for p in both])
                pert = m.array([p.perturbed_id for p in both])
                row["scores"][m.name] = {
                    "n": len(both),
                    "above": _f(np.mean(orig > pert)) if both else None,
                    "ties": _f(np.mean(orig == pert)) if both else None,
                    "below": _f(np.mean(orig < pert)) if both else None,
                    "mean_original": _f(orig.mean()) if both else None,
                    "mean_perturbed": _f(pert.mean()) if both else None,
                }
            expected = [p for p in pairs if p.expected_label and p.perturbed_id in m.labels]
            if m.labels:
                got = [m.labels[p.perturbed_id] for p in expected]
                row["labels"][m.name] = {
                    "n": len(expected),
                    "expected_label": _f(np.mean([g == p.expected_label for g, p in zip(got, expected)]))
                    if expected else None,
                    "expected_label3": _f(np.mean([COARSE[g] == COARSE[p.expected_label]  # type: ignore[index]
                                                   for g, p in zip(got, expected)])) if expected else None,
                    "original_entailment": _f(np.mean([m.labels[p.original_id] == "entailment" for p in pairs
                                                       if p.original_id in m.labels]))
                    if any(p.original_id in m.labels for p in pairs) else None,
                }
        out["rows"].append(row)
    return out


# -- one run ------------------------------------------------------------------------------------------------------
@dataclass
class MetaEvalRun:
    """Everything a run produced: the report (JSON-ready) and what the plots need."""

    report: dict[str, Any]
    data: MetaEvalData
    metrics: list[MetricScores] = field(default_factory=list)  # with scores
    label_sources: list[MetricScores] = field(default_factory=list)  # every metric, label sources without scores too


def _report_head(data: MetaEvalData, metrics: Sequence[MetricScores], options: MetaEvalOptions) -> dict[str, Any]:
    """The report before its experiments: version, signature, data, options and each metric's coverage."""
    report: dict[str, Any] = {
        "q2_plugins": __version__,
        "signature": options.signature,
        "data": data.summary(),
        "options": {k: (list(v) if isinstance(v, tuple) else v) for k, v in asdict(options).items()},
        "metrics": [m.describe() for m in metrics],
        "skipped": {},
    }
    for m, d in zip(metrics, report["metrics"]):
        d["coverage"] = {"examples": m.coverage(ex.id for ex in data.examples)[0], "of": len(data.examples)}
        d["labelled"] = sum(ex.id in m.labels for ex in data.examples)
        d["unscored"] = m.unscored(ex.id for ex in data.examples)  # id -> why it has no score
    return report


def run_meta_eval(data: MetaEvalData, metrics: Sequence[MetricScores], options: Optional[MetaEvalOptions] = None,
                  *, variants: Optional[dict[str, dict[str, Example]]] = None) -> MetaEvalRun:
    """Run the experiments of ``options.experiments`` that the data allows; returns the report.

    ``variants`` are the random-knowledge inputs (:func:`control_variants`) the metrics were scored on; without
    them the random-knowledge control is skipped.
    """
    options = options or MetaEvalOptions()
    if not metrics:
        raise ValueError("No metric to evaluate: give a score source (scores file, replay, compute) or baselines")
    names = [m.name for m in metrics]
    if len(set(names)) != len(names):
        raise ValueError(f"Two metrics share a name: {names}; name the scores files differently (NAME=FILE)")
    report = _report_head(data, metrics, options)
    labelled = list(metrics)
    metrics = [m for m in metrics if not m.labels_only]  # label sources without scores: taxonomy and stress only
    todo = options.experiments
    if "response" in todo:
        report["response_level"] = response_level(data, metrics, options)
    if "subsets" in todo:
        report["subsets"] = subset_table(data, metrics)
    if "system" in todo:
        if data.contexts:
            report["system_level"] = system_level(data, metrics, options)
        else:
            report["skipped"]["system"] = "the data has no paired contexts (the wow cross annotation has)"
    if "robustness" in todo:
        report["robustness"] = robustness(data, metrics, options)
    if "random-knowledge" in todo:
        if variants is not None:
            report["random_knowledge"] = random_knowledge(data, metrics, variants)
        else:
            report["skipped"]["random-knowledge"] = "no random-knowledge inputs were scored"
    if "length" in todo:
        report["length"] = length_control(data, metrics)
    if "taxonomy" in todo:
        if not has_begin_labels(data):
            report["skipped"]["taxonomy"] = "the data has no BEGIN five-way labels (entailment, hallucination, ...)"
        elif not any(m.labels for m in labelled):
            report["skipped"]["taxonomy"] = "no metric gives labels (q2 score results, computed scores, text rules)"
        else:
            report["taxonomy"] = taxonomy(data, labelled)
    if "stress" in todo:
        if data.pairs:
            report["stress"] = stress(data, labelled)
        else:
            report["skipped"]["stress"] = "the data has no stress pairs (q2 perturb writes them; dataset stress)"
    if "usr" in todo:
        if any(ex.rating is not None for ex in data.examples):
            report["usr"] = usr_correlation(data, metrics, reps=options.reps, seed=options.seed)
        else:
            report["skipped"]["usr"] = "the data has no graded ratings (dataset usr has)"
    if "dnli" in todo:
        if any(ex.label == "contradiction" for ex in data.examples) and \
                any(ex.label == "entailment" for ex in data.examples):
            report["dnli"] = dnli_accuracy(data, metrics, threshold=options.dnli_threshold)
        else:
            report["skipped"]["dnli"] = "the data has no entailment and contradiction labels (dataset dnli has)"
    if "benchmark" in todo:  # per-data-set balanced accuracy; published figures beside ours (benchmark.py)
        report["benchmark"] = benchmark(data, metrics, options.threshold)
        if not report["benchmark"]:
            report["skipped"]["benchmark"] = "no dev split, several data sets or published figures for this data"
            del report["benchmark"]
    if "spans" in todo:  # hallucinated characters, as RAGTruth and HalluDial mark them (spans.py)
        add_span_level(report, data, metrics)
    # where figures are not like for like (caveats.py)
    report["caveats"], report["caveat_markers"] = find_caveats(report, data)
    return MetaEvalRun(report, data, list(metrics), labelled)
