"""Where a meta-evaluation's metric scores come from.

Three sources, all keyed by example id (:attr:`~q2_plugins.datasets.types.Example.id`):

* a **scores file**: the output of ``q2 score`` (either engine, JSONL / Parquet / CSV; ``id`` or ``row``, and the
  result fields), read by :func:`q2_plugins.io.rows.read_results`, or any CSV / JSONL with an ``id`` (or ``row``) and a
  ``score`` field, e.g. another metric's output. Score the file
  :func:`export_inputs` writes and every example, paired-context response and control input has its id.
* a **replay** of a recorded run of the original pipeline (:func:`replay_scores`), e.g. ``data/q2_original_run``:
  Q² is the recorded per-response ``Q2`` column of ``*_scores.csv`` (the recorded steps have no NLI labels);
  Q² w/o NLI, the number of questions and the share of questions with no answer in the knowledge come from replaying
  the recorded per-question outputs (``*_out.steps.csv``) through the scoring layer.
* **on the fly** (:func:`compute_q2`) with a :class:`~q2_plugins.Q2Scorer`.

No score is ever invented: a response without one (no valid question and no fallback, an error, absent from the
file) is listed in :attr:`MetricScores.missing` or simply not covered, and every experiment reports its coverage.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional, Sequence

import numpy as np

from q2_plugins import __version__, backends
from q2_plugins.datasets.common import DataFormatError, DataSettingError
from q2_plugins.datasets.types import Example
from q2_plugins.io.outputs import atomic_file, json_line, retire_results, write_jsonl_atomic
from q2_plugins.io.rows import ROW_FIELD, read_sidecar, response_result, result_row, scan_results, write_meta
from q2_plugins.jobs.replay import load_original_steps, load_recorded_scores, replay
from q2_plugins.metric.progress import scoring_progress
from q2_plugins.metric.results import (
    EXPLANATION_FIELDS,
    RESULT_FIELDS,
    Q2Stats,
    ResponseResult,
    ResponseStatus,
    RowErrors,
)
from q2_plugins.metric.scoring import counted_questions, mean_score
from q2_plugins.metric.signature import replay_signature
from q2_plugins.metric.spans import merge_spans, question_spans
from q2_plugins.metric.taxonomy import SIGNALS_VERSION, classify_texts

__all__ = [
    "QuestionStats",
    "MetricScores",
    "metrics_from_results",
    "read_scores_file",
    "replay_scores",
    "compute_q2",
    "column_scores",
    "text_rule_labels",
    "write_scores_file",
    "export_inputs",
    "RecordedQuestionScore",
    "q2_star_metric",
    "no_question_treatments",
]


@dataclass(frozen=True)
class QuestionStats:
    """Per-response question counts of a Q² score. ``num_no_answer`` is None when the questions were not recorded
    (a ``q2 score`` file written without ``--explain``)."""

    num_questions: int
    num_no_answer: Optional[int]
    used_fallback: bool


@dataclass(frozen=True)
class RecordedQuestionScore:
    """One counted question of a Q² result: its score, its F1 and whether the knowledge had no answer."""

    score: float
    f1: float
    no_answer: bool


@dataclass
class MetricScores:
    """One metric's scores by example id, with where they came from; ``labels`` are BEGIN five-way labels by id, for
    metrics that give them (Q² results; the text rules give labels only, no scores)."""

    name: str
    values: dict[str, float]
    source: str
    signature: Optional[str] = None
    bounded: bool = True  # scores live in [0, 1], so a fixed threshold means something
    missing: dict[str, str] = field(default_factory=dict)  # id -> why there is no score
    questions: dict[str, QuestionStats] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    labels: dict[str, str] = field(default_factory=dict)
    # the counted questions of each response scored with questions, when they were recorded (``--explain``)
    per_question: dict[str, list[RecordedQuestionScore]] = field(default_factory=dict)
    #: a span source's spans of each response it scored: (start, end, score), a low score marking an unsupported
    #: span (Q² results with explanations; the overlap baseline)
    spans: dict[str, list[tuple[int, int, float]]] = field(default_factory=dict)

    @property
    def labels_only(self) -> bool:
        """A label source without scores: left out of the score experiments."""
        return bool(self.labels) and not self.values

    def array(self, ids: Sequence[str]) -> np.ndarray:
        """Scores of ``ids`` in order, NaN where there is none."""
        return np.array([self.values.get(i, np.nan) for i in ids], dtype=np.float64)

    def coverage(self, ids: Iterable[str]) -> tuple[int, int]:
        ids = list(ids)
        return sum(i in self.values for i in ids), len(ids)

    def unscored(self, ids: Iterable[str]) -> dict[str, str]:
        """Why each of ``ids`` without a score has none: the source's reason (no valid question, the row's error),
        else that the source does not score it."""
        return {i: self.missing.get(i, f"not in {self.source}") for i in ids if i not in self.values}

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "signature": self.signature, "bounded": self.bounded,
                "n_scores": len(self.values), "n_missing": len(self.missing), "n_labels": len(self.labels),
                "notes": list(self.notes)}


def _no_answer_count(result: ResponseResult) -> Optional[int]:
    if result.questions is None:
        return None
    return sum(q.knowledge_answer_kind == "no_answer" for q in result.questions)


def metrics_from_results(ids: Sequence[str], results: Sequence[ResponseResult], *, name: str = "Q2", source: str,
                         signature: Optional[str] = None, with_nli: Optional[bool] = None) -> list[MetricScores]:
    """Q² and Q² w/o NLI from per-response results.

    ``with_nli=False`` (the scorer ran with ``use_nli=False``) yields only ``"<name> w/o NLI"``. ``None`` (unknown,
    e.g. a scores file) yields both, unless ``score`` equals ``score_no_nli`` everywhere: then only ``name``, with a
    note. The results' BEGIN-style labels (responses without a score have one too) go with the first metric.
    """
    full = MetricScores(name, {}, source, signature)
    no_nli = MetricScores(f"{name} w/o NLI", {}, source, signature)
    for i, res in zip(ids, results):
        if res.score is None:
            full.missing[i] = no_nli.missing[i] = res.error or res.status
            continue
        full.values[i] = float(res.score)
        no_nli.values[i] = float(res.score_no_nli if res.score_no_nli is not None else res.score)
        full.questions[i] = no_nli.questions[i] = QuestionStats(res.num_questions, _no_answer_count(res),
                                                                res.used_fallback)
        if res.questions is not None and res.status == ResponseStatus.SCORED:
            full.per_question[i] = no_nli.per_question[i] = [
                RecordedQuestionScore(q.score, q.f1, q.knowledge_answer_kind == "no_answer") for q in res.questions]
        if res.spans is not None:  # (Q² w/o NLI's: the questions' F1s merged by the same rule)
            full.spans[i] = [(s.start, s.end, float(s.score)) for s in res.spans]
            no_nli.spans[i] = [(s, e, score) for s, e, score, _ in merge_spans(question_spans(res.questions or [],
                                                                                             "f1"))]
    out = [full, no_nli]
    if with_nli is False:
        out = [no_nli]
    elif with_nli is None and full.values == no_nli.values:
        full.notes.append("score equals score_no_nli for every response (scored without NLI?): one metric kept")
        out = [full]
    out[0].labels = {i: res.label for i, res in zip(ids, results) if res.label is not None}
    return out


def _match(found: Iterable[str], known: Mapping[str, Example], what: str) -> list[str]:
    """Check that ``found`` ids overlap the data's; returns notes on what did not match."""
    found = list(found)
    unknown = [i for i in found if i not in known]
    if found and len(unknown) == len(found):
        raise DataFormatError(
            f"None of the {len(found)} ids in {what} (e.g. {unknown[:3]}) is an example id of the data "
            f"(e.g. {list(known)[:3]}). Score the inputs that meta-eval exports (setting export_inputs), whose rows "
            f"carry the example ids."
        )
    return [f"{len(unknown)} ids in {what} are not examples of the data (ignored), e.g. {unknown[:3]}"] if unknown \
        else []


def read_scores_file(path: str | Path, known: Mapping[str, Example], *, name: str = "Q2") -> list[MetricScores]:
    """Read a ``q2 score`` output (both Q² variants and the question counts; only Q² w/o NLI when its sidecar says
    it was scored without NLI, as ``q2 replay`` output is) or a generic id / score file."""

    path = Path(path)
    needed = {ROW_FIELD, "score", *RESULT_FIELDS, *EXPLANATION_FIELDS}  # what is kept of a row (of an example)
    ids, records, signatures = [], [], []
    for n, row in enumerate(scan_results(path), start=1):  # one row at a time
        if row.get("id") not in (None, ""):  # (a column of ids in Parquet / CSV is null or empty where absent)
            key = str(row["id"])
        elif row.get("row") not in (None, ""):
            key = str(row["row"])
        else:
            raise DataFormatError(f"Scores file {path} record {n} has neither 'id' nor 'row'; its fields are "
                                  f"{sorted(row)}")
        if "score" not in row:
            raise DataFormatError(f"Scores file {path} record {n} has no 'score' field; its fields are {sorted(row)}")
        if isinstance(row.get("signature"), str) and row["signature"] not in signatures:
            signatures.append(row["signature"])
        ids.append(key)
        records.append({k: v for k, v in row.items() if k in needed} if key in known else None)
    meta, _ = read_sidecar(path)
    if meta is not None and isinstance(meta.get("signature"), str) and meta["signature"] not in signatures:
        signatures.append(meta["signature"])
    duplicates = sorted(i for i, n in Counter(ids).items() if n > 1)
    if duplicates:
        raise DataFormatError(f"Scores file {path} scores the same id more than once: {duplicates[:5]}")
    notes = _match(ids, known, f"scores file {path}")
    keep = [(i, r) for i, r in zip(ids, records) if i in known]
    source = f"scores file {path}"
    if all("status" in r for _, r in keep):  # a q2 score output
        try:
            results = [response_result(r) for _, r in keep]
        except (TypeError, ValueError) as e:
            raise DataFormatError(f"Scores file {path} has 'status' fields, as a q2 score output does, but not all "
                                  f"of its fields ({e}); write it with q2 score, or keep only id and score") from None
        signature = signatures[-1] if signatures else None
        use_nli = ((meta or {}).get("config") or {}).get("use_nli")
        metrics = metrics_from_results([i for i, _ in keep], results, name=name, source=source, signature=signature,
                                       with_nli=False if use_nli is False else None)
    else:
        metric = MetricScores(name, {}, source)
        for i, r in keep:
            value = r["score"]
            if value is None or (isinstance(value, str) and not value.strip()):
                metric.missing[i] = "no score in the file"
                continue
            try:
                metric.values[i] = float(value)
            except (TypeError, ValueError):
                raise DataFormatError(f"Scores file {path}: the score of {i!r} is {value!r}, not a number") from None
        metrics = [metric]
    for m in metrics:
        m.notes.extend(notes)
    return metrics


def replay_scores(run_dir: str | Path, known: Mapping[str, Example], *, name: str = "Q2") -> list[MetricScores]:
    """Scores of a recorded run of the original pipeline: one sub-folder ``<subset>/`` per data file holding
    ``<subset>_out.steps.csv`` and ``<subset>_scores.csv``; response ``id`` there is example ``<subset>:<id>``.

    ``name`` is the recorded per-response ``Q2`` (with NLI); ``"<name> w/o NLI"`` is the replay of the recorded
    questions (responses without questions take their recorded fallback value). Every replayed response must have
    the example's text, or the run is not of this data.
    """
    folder = Path(run_dir)
    if not folder.is_dir():
        raise DataSettingError("replay", f"expects the folder of a recorded run (sub-folders <subset>/ with "
                                         f"<subset>_out.steps.csv and <subset>_scores.csv); {folder} is not a folder")
    subsets = sorted(p for p in folder.iterdir() if (p / f"{p.name}_out.steps.csv").is_file())
    if not subsets:
        raise DataFormatError(f"{folder} holds no <subset>/<subset>_out.steps.csv: not a recorded run of the "
                              f"original pipeline")
    source_q2 = f"recorded per-response Q2 of {folder}/*/*_scores.csv"
    source_replay = f"replay of the recorded questions {folder}/*/*_out.steps.csv"
    full = MetricScores(name, {}, source_q2, signature="original run (recorded)")
    no_nli = MetricScores(f"{name} w/o NLI", {}, source_replay, signature=replay_signature("q2-original"))
    found = []
    for sub in subsets:
        scores_csv = sub / f"{sub.name}_scores.csv"
        if not scores_csv.is_file():
            raise DataFormatError(f"{sub} has steps but no {scores_csv.name} (the recorded per-response scores)")
        recorded = load_recorded_scores(scores_csv)
        records = load_original_steps(sub / f"{sub.name}_out.steps.csv",
                                      {k: v.q2_no_nli for k, v in recorded.items()})
        result = replay(records, explain=True)
        for rec, res in zip(records, result.responses):
            eid = f"{sub.name}:{rec.id}"
            found.append(eid)
            if eid not in known:
                continue
            if known[eid].response != rec.response or rec.id not in recorded:
                raise DataFormatError(f"{sub}: recorded response {rec.id} is not the response of example {eid} "
                                      f"(or has no recorded Q2): the run is not of this data")
            stats = QuestionStats(res.num_questions, _no_answer_count(res), res.used_fallback)
            full.values[eid] = recorded[rec.id].q2
            full.questions[eid] = stats
            if res.score_no_nli is None:
                no_nli.missing[eid] = res.status
            else:
                no_nli.values[eid] = res.score_no_nli
                no_nli.questions[eid] = stats
    notes = _match(found, known, f"recorded run {folder}")
    for m in (full, no_nli):
        m.notes.extend(notes)
    return [full, no_nli]


def compute_q2(examples: Sequence[Example], scorer: Any, *, name: str = "Q2", progress: bool = False
               ) -> tuple[list[MetricScores], list[ResponseResult]]:
    """Score ``examples`` with a :class:`~q2_plugins.Q2Scorer` (with explanations, for the question counts, and
    BEGIN labels, for the taxonomy experiment).
    Returns the metrics and the per-response results (for :func:`write_scores_file`). ``progress``: a bar over the
    rows on a terminal, plain lines in a log (:func:`~q2_plugins.metric.progress.scoring_progress`)."""

    with scoring_progress(scorer, len(examples), progress) as shown:
        result = scorer.score(responses=[ex.response for ex in examples],
                              knowledge=[ex.knowledge for ex in examples], explain=True, progress=shown, label=True)
    metrics = metrics_from_results([ex.id for ex in examples], result.responses, name=name,
                                   source="computed on the fly", signature=result.signature,
                                   with_nli=scorer.config.use_nli)
    return metrics, result.responses


def column_scores(examples: Sequence[Example]) -> list[MetricScores]:
    """Metrics stored in the data file itself (:attr:`Example.extra_scores`, from ``--score-column``)."""
    metrics: dict[str, MetricScores] = {}
    for ex in examples:
        for column, value in ex.extra_scores.items():
            metrics.setdefault(column, MetricScores(column, {}, "column of the data file")).values[ex.id] = value
    return list(metrics.values())


def text_rule_labels(examples: Sequence[Example], *, nlp: Any = None, spacy_model: str = "en_core_web_sm",
                     name: str = "Text rules") -> MetricScores:
    """BEGIN labels from :mod:`q2_plugins.metric.taxonomy`'s rules on the text signals alone (no Q² evidence): the
    model-free part of Q²'s labels, tuned on BEGIN dev. A label source without scores."""

    usable = [ex for ex in examples if ex.response.strip() and ex.knowledge.strip()]
    verdicts = classify_texts([ex.response for ex in usable], [ex.knowledge for ex in usable], nlp=nlp,
                              spacy_model=spacy_model)
    metric = MetricScores(name, {}, "q2_plugins.metric.taxonomy rules on text signals only (no Q2 evidence)",
                          signature=f"taxonomy-text|{SIGNALS_VERSION}|spacy:{spacy_model}|q2:{__version__}")
    metric.labels = {ex.id: v.label for ex, v in zip(usable, verdicts) if v.label is not None}
    metric.missing = {ex.id: "empty response or knowledge" for ex in examples
                      if not (ex.response.strip() and ex.knowledge.strip())}
    return metric


def taxonomy_model_labels(examples: Sequence[Example], path: str, *, name: Optional[str] = None) -> MetricScores:
    """BEGIN labels from a five-way classifier ``q2 train --labels 5`` wrote (premise: evidence + previous turn):
    a label source without scores, beside the text rules."""

    model = backends.load("taxonomy", model=path)
    usable = [ex for ex in examples if ex.response.strip() and ex.knowledge.strip()]
    labels = model.predict([ex.knowledge for ex in usable], [ex.history for ex in usable],
                           [ex.response for ex in usable])
    metric = MetricScores(name or f"Model {Path(path).name}", {}, f"five-way classifier {path} (q2 train)",
                          signature=f"taxonomy-model|{backends.identity('taxonomy', model=path)}")
    metric.labels = {ex.id: label for ex, label in zip(usable, labels)}
    metric.missing = {ex.id: "empty response or knowledge" for ex in examples
                      if not (ex.response.strip() and ex.knowledge.strip())}
    return metric


def write_scores_file(path: str | Path, ids: Sequence[str], results: Sequence[ResponseResult], *, signature: Any,
                      config: Any, source: str | Path) -> Path:
    """Write per-response results in the ``q2 score --output`` format (readable by :func:`read_scores_file`) with
    the sidecar ``q2 score`` writes (``PATH.meta.json``: ``signature`` of the scorer, its ``config``, the summary,
    ``source`` as the input, library versions), so that ``q2 compare`` and ``q2 report`` know what scored them.
    Returns the sidecar's path."""

    errors = RowErrors()
    with atomic_file(path) as f:  # (a link at the path is replaced, never written through)
        for row, (i, res) in enumerate(zip(ids, results)):
            f.write(json_line(result_row(row, {"id": i}, res, res.explained)) + "\n")
            if res.error is not None:
                errors.add(res.error)
        retire_results(path)  # the old rows go, then the sidecar, then the new rows go in place
        return write_meta(path, engine="meta-eval", signature=signature, config=config, rows=len(results),
                          input=source, summary={**Q2Stats.of(results).summary(), **errors.summary()}, spec=None,
                          exit_code=0)


def export_inputs(path: str | Path, examples: Sequence[Example]) -> int:
    """Write the scoring inputs (``id``, ``response``, ``knowledge``, ``history``, ``label``, ``subset``) as JSONL for
    ``q2 score``; returns the number of rows."""
    return write_jsonl_atomic(path, ({"id": ex.id, "response": ex.response, "knowledge": ex.knowledge,
                                       "history": ex.history or "", "label": ex.label, "subset": ex.subset}
                                      for ex in examples), setting="export_inputs")


def q2_star_metric(metric: MetricScores, *, f1_only: bool = False) -> Optional[MetricScores]:
    """Q²* from a Q² metric's recorded questions: the rule of :attr:`Q2Config.discard_unanswerable`
    (:func:`~q2_plugins.metric.scoring.counted_questions`) applied to each response's counted questions, the mean of the
    question scores (``f1_only``: of their F1) over the questions that still count. Responses scored by the
    fallback keep their score. None when the questions were not recorded (a scores file written without
    ``--explain``)."""
    if not metric.questions or any(q.num_questions > 0 and i not in metric.per_question
                                   for i, q in metric.questions.items()):
        return None
    star = MetricScores(f"{metric.name}*", dict(metric.values), f"{metric.source}, Q2* rule on its questions",
                        signature=f"{metric.signature}|q2star-derived" if metric.signature else "q2star-derived",
                        missing=dict(metric.missing))
    for i, questions in metric.per_question.items():
        keep = counted_questions([q.no_answer for q in questions], discard_unanswerable=True)
        kept = [q for q, k in zip(questions, keep) if k]
        star.values[i] = mean_score([q.f1 if f1_only else q.score for q in kept])
        star.per_question[i] = kept
        star.questions[i] = QuestionStats(len(kept), sum(q.no_answer for q in kept), False)
    for i, q in metric.questions.items():
        if i not in star.questions:
            star.questions[i] = q
    return star


def no_question_treatments(metric: MetricScores) -> Optional[dict[str, dict[str, float]]]:
    """The ways to count responses without a valid question, for a metric with question counts (Q²); None for
    other metrics:

    * ``"with a valid question"``: only the responses scored from their questions;
    * ``"no valid question = 0"``: those, and every response without a valid question (scored by the fallback or
      not scored) at 0;
    * ``"with fallback"``: the scores as they are, when some responses were scored by the end-to-end NLI fallback.

    Errors are never counted.
    """
    if not metric.questions:
        return None
    with_q = {i: v for i, v in metric.values.items() if i in metric.questions and metric.questions[i].num_questions}
    zero = dict(with_q)
    no_question = [i for i, q in metric.questions.items() if not q.num_questions]
    no_question += [i for i, why in metric.missing.items() if why == ResponseStatus.NO_VALID_QUESTION]
    zero.update({i: 0.0 for i in no_question})
    out = {"with a valid question": with_q, "no valid question = 0": zero}
    if any(q.used_fallback for q in metric.questions.values()):
        out["with fallback"] = dict(metric.values)
    return out
