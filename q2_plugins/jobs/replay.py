"""Replay: score recorded per-question outputs (candidate, question, knowledge answer) without running QG/QA.

The recorded format is the original pipeline's ``*_out.steps.csv``: one row per kept question with columns
``id, response, cand, question, knowledge, knowledge_ans, score``; ``knowledge_ans`` is the QA model's decoded text
(``[CLS]`` for its null answer); rows with ``cand == "NO_Q"`` mark responses with no valid question.

The steps hold no NLI labels, so a replay without an NLI model gives Q² w/o NLI. The original run's per-response
scores (``*_scores.csv``: ``id, Q2_no_nli, Q2``) are the second recorded source: :func:`load_recorded_scores` reads
them; ``Q2`` there is the full metric (NLI answer comparison and the end-to-end NLI fallback) as the original
computed it, and ``Q2_no_nli`` gives the fallback values of responses without questions.

``q2 replay`` (:class:`ReplayJob`, :func:`run_replay`) writes the replayed responses as result rows with their
``.meta.json`` and an optional HTML report.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional, Sequence

from q2_plugins.datasets.bundled import DATA_DIR
from q2_plugins.io.inputs import named_errors
from q2_plugins.io.outputs import (
    atomic_file,
    check_outputs,
    check_writable,
    files_written,
    html_files,
    json_line,
    retire_results,
    say_replaced,
)
from q2_plugins.io.rows import result_row, write_meta
from q2_plugins.jobs.local import write_report
from q2_plugins.metric import names as M
from q2_plugins.metric import stages as st
from q2_plugins.metric.components import Answer, AnswerKind, NLILabel, NLIModel
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.results import Q2Result, print_summary
from q2_plugins.metric.runner import Parts, Row, Slot, StageRunner, ValidQuestion
from q2_plugins.metric.scoring import NLI_SCORES
from q2_plugins.metric.signature import replay_signature
from q2_plugins.metric.spans import locate

__all__ = ["ReplayJob", "run_replay", "RecordedQuestion", "RecordedResponse", "RecordedScores", "load_original_steps",
           "load_recorded_scores", "decoded_answer", "replay", "bundled_original_run"]

_RECORDED_COLUMNS = ("id", "response", "cand", "question", "knowledge", "knowledge_ans")


@dataclass
class RecordedQuestion:
    candidate: str
    question: str
    knowledge_answer: Answer
    recorded_f1: Optional[float] = None


@dataclass
class RecordedResponse:
    id: str
    response: str
    knowledge: str
    questions: list[RecordedQuestion] = field(default_factory=list)
    fallback: Optional[float] = None  # recorded fallback score for responses without questions


@dataclass(frozen=True)
class RecordedScores:
    """One response's recorded per-response scores: ``q2`` with NLI, ``q2_no_nli`` with token F1 only."""

    id: str
    response: str
    q2: float
    q2_no_nli: float


def load_recorded_scores(path: str | Path) -> dict[str, RecordedScores]:
    """Read an original ``*_scores.csv`` (columns ``id, response, Q2_no_nli, Q2``) into id -> scores."""

    path = Path(path)
    with named_errors(path), path.open(newline="", encoding="utf-8") as f:  # (a bad byte: an error naming the file)
        reader = csv.DictReader(f)
        missing = [c for c in ("id", "response", "Q2_no_nli", "Q2") if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: expected the original scores columns ['id', 'response', 'Q2_no_nli', 'Q2'], "
                             f"missing {missing}")
        out = {}
        for line, row in enumerate(reader, start=2):
            try:
                out[row["id"]] = RecordedScores(row["id"], row["response"], float(row["Q2"]), float(row["Q2_no_nli"]))
            except ValueError:
                raise ValueError(f"{path}:{line}: Q2 / Q2_no_nli must be numbers, got {row['Q2']!r} / "
                                 f"{row['Q2_no_nli']!r}") from None
    return out


def bundled_original_run() -> tuple[list[Path], list[Path]]:
    """The ``*_out.steps.csv`` and matching ``*_scores.csv`` files of the slice of a recorded original run shipped
    in the package (10 responses of each of its four files; provenance and licence in its README)."""
    folder = DATA_DIR / "original_run_slice"
    steps = sorted(folder.glob("*_out.steps.csv"))
    return steps, [p.with_name(p.name.replace("_out.steps.csv", "_scores.csv")) for p in steps]


def decoded_answer(text: str, null_token: str = "[CLS]") -> Answer:
    """Interpret the original's decoded answer text: the bare null token is no answer, a span beginning with it
    came from the null position, the empty string is an end-before-start span."""
    if text == null_token:
        return Answer.none()
    if text == "":
        return Answer(AnswerKind.EMPTY, "")
    if text.startswith(null_token):
        return Answer(AnswerKind.SPAN_FROM_NULL, text)
    return Answer.span(text)


def load_original_steps(path: str | Path, fallback_scores: Optional[dict[str, float]] = None) -> list[RecordedResponse]:
    """Read an original ``*_out.steps.csv``. ``fallback_scores`` maps response ids to recorded fallback values."""

    path = Path(path)
    with named_errors(path), path.open(newline="", encoding="utf-8") as f:  # (a bad byte: an error naming the file)
        reader = csv.DictReader(f)
        missing = [c for c in _RECORDED_COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: expected the original steps columns {list(_RECORDED_COLUMNS)}, "
                             f"missing {missing}")
        by_id: dict[str, RecordedResponse] = {}
        for line, row in enumerate(reader, start=2):
            rid = row["id"]
            rec = by_id.get(rid)
            if rec is None:
                rec = by_id[rid] = RecordedResponse(rid, row["response"], row["knowledge"])
            if row["cand"] == "NO_Q":
                if rec.questions:
                    raise ValueError(f"{path}:{line}: response {rid} has both questions and a NO_Q row")
                if fallback_scores is not None:
                    rec.fallback = fallback_scores.get(rid)
                continue
            score = row.get("score")
            rec.questions.append(RecordedQuestion(
                row["cand"], row["question"], decoded_answer(row["knowledge_ans"]),
                float(score) if score not in (None, "") else None,
            ))
    return list(by_id.values())


def replay(
    records: Sequence[RecordedResponse],
    *,
    use_nli: bool = False,
    nli: Optional[NLIModel] = None,
    normalization: str = "q2-original",
    signature: Optional[str] = None,
    explain: bool = False,
    discard_unanswerable: bool = False,
) -> Q2Result:
    """Score recorded outputs with the same scoring layer as the live pipeline.

    With ``use_nli`` the answer pairs that need it go through ``nli`` in one batch; responses without questions take
    their recorded fallback value (``None`` = no score). ``discard_unanswerable`` applies the Q²* rule
    (:func:`~q2_plugins.metric.scoring.counted_questions`, as :attr:`Q2Config.discard_unanswerable` does live).
    ``signature`` defaults to :func:`q2_plugins.metric.signature.replay_signature` (naming ``nli.signature`` when NLI is
    used).
    """
    if use_nli and nli is None:
        raise ValueError("replay(use_nli=True) needs an NLI model (nli=...)")

    settings = Q2Config(use_nli=use_nli, normalization=normalization, discard_unanswerable=discard_unanswerable)
    parts = Parts(settings, None, None, None, nli=nli if use_nli else None)  # type: ignore[arg-type]
    rows, compared = [], []
    for i, rec in enumerate(records):
        row = Row(i, rec.response, rec.knowledge, fallback_label=_fallback_label(rec))
        # no mention was found here: the recorded candidates are located in the response, in their order
        for q, at in zip(rec.questions, locate(rec.response, [q.candidate for q in rec.questions])):
            valid = ValidQuestion(Slot(row, q.candidate, [q.question], where=at), 0, q.question, q.candidate)
            compared.append(st.compare_tokens(parts, valid, q.knowledge_answer))          # 5. token F1
        rows.append(row)
    nli_out = st.run_nli(StageRunner(settings, None), parts, st.nli_pairs(parts, compared))  # 5. its NLI
    st.compare_answers(parts, compared, nli_out)                                          # 5. answer comparison
    if discard_unanswerable:  # Q²*
        for row in rows:
            st.discard_unanswerable(row)
    results = [st.aggregate(row) for row in rows]                                         # 7. aggregation
    for rec, res in zip(records, results):
        if explain:
            res.candidates = [q.candidate for q in rec.questions]
        else:
            res.candidates = res.questions = res.dropped = res.spans = None
    if signature is None:
        nli_id = (getattr(nli, "signature", None) or f"custom:{type(nli).__name__}") if use_nli else None
        signature = replay_signature(normalization, nli_id, discard_unanswerable)
    return Q2Result(results, signature)


def _fallback_label(rec: RecordedResponse) -> Optional[NLILabel]:
    """The end-to-end NLI label whose score is the response's recorded fallback value (None: no fallback)."""
    if rec.fallback is None:
        return None
    for label, value in NLI_SCORES.items():
        if value == rec.fallback:
            return label
    raise ValueError(f"response {rec.id}: a recorded fallback value is an NLI label's score "
                     f"({', '.join(str(v) for v in NLI_SCORES.values())}), got {rec.fallback!r}")


# a replay has no Q2 with NLI, hence no interval of it (its interval is q2 compare's, on Q2 w/o NLI)
_NO_Q2 = {m.key: None for m in (M.Q2, M.Q2_STDERR, M.Q2_CI_LOW, M.Q2_CI_HIGH)}
_REPLAY_NOTE = ("Q2 n/a: the recorded steps carry no NLI labels, so the replay gives only Q2 w/o NLI (token F1; "
                "responses without questions take their recorded fallback value)")


@dataclass(frozen=True)
class ReplayJob:
    """One replay: the ``steps`` files (with, optionally, one ``scores`` file each: recorded fallback values for
    responses without questions), written to ``output`` (JSONL) and / or an ``html`` report (which implies
    ``explain``)."""

    steps: list[str]
    scores: list[str] = field(default_factory=list)
    output: Optional[str] = None
    html: Optional[str] = None
    explain: bool = False
    normalization: str = "q2-original"
    discard_unanswerable: bool = False
    summary_format: str = "text"


def run_replay(job: ReplayJob) -> int:
    """Check every path the job writes, replay the steps, write the rows, print the summary; returns the exit code."""

    if job.scores and len(job.scores) != len(job.steps):
        raise SettingError("scores", "give one scores file per steps file, in the same order")
    written = [(setting, path) for setting, path in (("output", job.output), ("html", job.html)) if path]
    check_outputs([*job.steps, *job.scores], [(setting, path, (files_written if setting == "output" else
                                                                    html_files)(path)) for setting, path in written])
    for setting, path in written:
        check_writable(path, setting)  # an output file's folder must exist (as for every output flag)
    say_replaced("q2 replay", written)
    records = []
    sources: list[str] = []
    for i, steps in enumerate(job.steps):
        fallback = None
        if job.scores:
            with open(job.scores[i], newline="", encoding="utf-8") as f:
                fallback = {row["id"]: float(row["Q2_no_nli"]) for row in csv.DictReader(f)}
        loaded = load_original_steps(steps, fallback)
        records.extend(loaded)
        sources.extend([Path(steps).name.removesuffix("_out.steps.csv")] * len(loaded))
    result = replay(records, normalization=job.normalization, explain=job.explain or bool(job.html),
                    discard_unanswerable=job.discard_unanswerable)
    explain = job.explain or bool(job.html)
    rows = [_replay_row(i, rec, res, src, result.signature, explain)
            for i, (rec, res, src) in enumerate(zip(records, result.responses, sources))]
    # the recorded steps carry no NLI labels: the replayed mean is Q2 w/o NLI, never to be printed as Q2
    summary = {**result.stats.summary(), **_NO_Q2, "note": _REPLAY_NOTE}
    if job.output:
        with atomic_file(job.output) as f:  # (a link at the output is replaced, never written through)
            for row in rows:
                f.write(json_line(row) + "\n")
            retire_results(job.output)  # the old rows go, then the sidecar, then the new rows go in place
            write_meta(job.output, engine="replay", signature=result.signature, summary=summary, rows=len(rows),
                       config={"use_nli": False, "normalization": job.normalization,
                               "discard_unanswerable": job.discard_unanswerable},
                       input=list(job.steps) + list(job.scores), spec=None, exit_code=0)
    print_summary(summary, result.signature, job.summary_format)
    if job.summary_format == "text":
        print(f"note          {_REPLAY_NOTE}")
    if job.html:
        write_report(job.html, rows, result.signature, summary, list(job.steps))
    return 0


def _replay_row(position: int, rec: Any, res: Any, source: str, signature: Any, explain: bool) -> dict[str, Any]:
    """One replay output row (:func:`~q2_plugins.io.rows.result_row`): its position, the response's id, source file and
    texts, its result and the signature. The original run's files are named by gold label (``<system>_consistent``
    / ``<system>_inconsistent``); such a name sets ``gold``."""

    gold = next((g for g in ("inconsistent", "consistent") if source.endswith("_" + g)), None)
    return result_row(position, {"id": rec.id, "source": source, **({"gold": gold} if gold else {}),
                                 "response": rec.response, "knowledge": rec.knowledge}, res, explain,
                      signature=signature)
