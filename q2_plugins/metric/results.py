"""Result objects: per question, per response and per call. All JSON-serialisable, and results add."""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass, field, fields
from typing import Any, Iterable, Optional, Union, get_args, get_origin, get_type_hints

from q2_plugins.metric import names as M

__all__ = ["QuestionResult", "DroppedQuestion", "Span", "ResponseResult", "Q2Stats", "RowErrors", "Q2Result",
           "ResponseStatus", "print_summary", "cache_line", "RESULT_FIELDS", "EXPLANATION_FIELDS"]


class ResponseStatus:
    """How a response's score came about (plain strings so they survive JSON)."""

    SCORED = "scored"  # at least one valid question
    FALLBACK = "fallback"  # no valid question; scored by end-to-end NLI
    NO_VALID_QUESTION = "no_valid_question"  # no valid question and the fallback is off: no score
    ERROR = "error"  # the row could not be scored; see ``error``
    STOPPED = "stopped"  # ranking with early stop only: not scored to the end, it cannot rank first


@dataclass
class QuestionResult:
    """One valid question and how its answers compared."""

    candidate: str
    question: str
    response_answer: str
    knowledge_answer: Optional[str]
    knowledge_answer_kind: str
    f1: float
    nli_label: Optional[str]
    score: float
    coref: Optional[str] = None  # --coref: "he -> Bob Ross" when the candidate is a mention that replaced a pronoun
    #: the candidate's characters [start, end) in the response as given (with --coref: the replaced pronoun's); None
    #: when they are not known (a candidate not found in the response)
    start: Optional[int] = None
    end: Optional[int] = None


@dataclass
class DroppedQuestion:
    """A generated question the filters removed, and why."""

    candidate: str
    question: str
    reason: str  # "personal" | "no_answer_in_response" | "answer_mismatch" | "no_answer_in_knowledge" (Q²*)
    response_answer: Optional[str] = None


@dataclass
class Span:
    """A span of the response and whether the knowledge supports it (:func:`q2_plugins.metric.spans.response_spans`):
    characters ``[start, end)`` of the response as given, their ``text``, the lowest question ``score`` on them and
    a ``label``: supported, unsupported or unanswerable."""

    start: int
    end: int
    text: str
    score: float
    label: str


# a field's place in a result row (``metadata["row"]``): a result field, or an explanation field (``explain=True``)
_RESULT, _EXPLANATION = {"row": "result"}, {"row": "explanation"}
_SPARSE = {"row": "result", "sparse": True}  # in to_dict() only when set


@dataclass
class ResponseResult:
    """The score of one response. ``score`` is None when there is none (see ``status`` and ``error``).

    The one declaration of a result row: the fields marked as result fields, in this order, are
    :data:`RESULT_FIELDS` (every result row of both engines carries them), those marked as explanation fields
    :data:`EXPLANATION_FIELDS`; :meth:`to_dict` and the row writer (:func:`q2_plugins.io.rows.result_fields`) read them
    from here."""

    index: int
    status: str = field(metadata=_RESULT)
    score: Optional[float] = field(default=None, metadata=_RESULT)
    score_no_nli: Optional[float] = field(default=None, metadata=_RESULT)
    num_questions: int = field(default=0, metadata=_RESULT)
    num_candidates: int = field(default=0, metadata=_RESULT)
    used_fallback: bool = field(default=False, metadata=_RESULT)
    fallback_label: Optional[str] = field(default=None, metadata=_RESULT)
    error: Optional[str] = field(default=None, metadata=_RESULT)
    #: how the row was truncated to its budgets (over_budget="truncate"), if it was
    warning: Optional[str] = field(default=None, metadata=_SPARSE)
    #: BEGIN five-way label (q2_plugins.metric.taxonomy); None when not labelled
    label: Optional[str] = field(default=None, metadata=_RESULT)
    #: coarse three-way label: entailment / neutral / contradiction
    label3: Optional[str] = field(default=None, metadata=_RESULT)
    label_reason: Optional[str] = field(default=None, metadata=_RESULT)
    candidates: Optional[list[str]] = field(default=None, metadata=_EXPLANATION)
    questions: Optional[list[QuestionResult]] = field(default=None, metadata=_EXPLANATION)
    dropped: Optional[list[DroppedQuestion]] = field(default=None, metadata=_EXPLANATION)
    #: --coref: the response as scored ("response"), "original_response" and each of "replacements"
    coref: Optional[dict[str, Any]] = field(default=None, metadata=_EXPLANATION)
    #: the response's spans with their support (:mod:`q2_plugins.metric.spans`); with the questions
    spans: Optional[list[Span]] = field(default=None, metadata=_EXPLANATION)

    @property
    def explained(self) -> bool:
        """Whether the response carries an explanation: its questions (``explain=True``) or its coreference."""
        return self.questions is not None or self.coref is not None

    def to_dict(self) -> dict[str, Any]:
        """``index``, the result fields (``warning`` only when set), then the explanation when there is one: the
        candidates, questions, dropped questions and spans when questions were kept, ``coref`` when it was run."""
        out: dict[str, Any] = {"index": self.index}
        out.update({f.name: getattr(self, f.name) for f in fields(self) if f.metadata.get("row") == "result"
                    and not (f.metadata.get("sparse") and getattr(self, f.name) is None)})
        if self.questions is not None:
            out["candidates"] = self.candidates
            out["questions"] = [{k: v for k, v in vars(q).items() if k != "coref" or v is not None}
                                for q in self.questions]
            out["dropped"] = [vars(d).copy() for d in (self.dropped or [])]
            if self.spans is not None:
                out["spans"] = [vars(s).copy() for s in self.spans]
        if self.coref is not None:
            out["coref"] = self.coref
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "ResponseResult":
        data = dict(data)
        questions = data.pop("questions", None)
        dropped = data.pop("dropped", None)
        spans = data.pop("spans", None)
        return cls(
            **data,
            questions=None if questions is None else [QuestionResult(**q) for q in questions],
            dropped=None if dropped is None else [DroppedQuestion(**d) for d in dropped],
            spans=None if spans is None else [Span(**s) for s in spans],
        )


def _row_type(annotation: Any) -> type:
    """The type a row field holds: ``Optional[float]`` -> float, ``Optional[list[...]]`` -> list."""
    args = [a for a in get_args(annotation) if a is not type(None)]
    kind = args[0] if get_origin(annotation) is Union and len(args) == 1 else annotation
    return get_origin(kind) or kind


def _row_fields(place: str) -> dict[str, type]:
    hints = get_type_hints(ResponseResult)
    return {f.name: _row_type(hints[f.name]) for f in fields(ResponseResult) if f.metadata.get("row") == place}


#: The result fields of a row of ``q2 score`` output, both engines, in the order written, each with its type (None
#: allowed for every one), read off :class:`ResponseResult`: what the local writer, Ray's Arrow schema and the
#: reader (:func:`q2_plugins.io.rows.read_results`) derive from. A result row is ``row``, the input fields, then these.
RESULT_FIELDS: dict[str, type] = _row_fields("result")
#: The fields an explained row (``explain=True``) adds after :data:`RESULT_FIELDS`: nested in JSONL, JSON text in
#: Parquet / CSV.
EXPLANATION_FIELDS: dict[str, type] = _row_fields("explanation")


class RowErrors:
    """Row errors counted by kind (the message with its numbers masked); the first message of each kind shown.
    Counts from several parts of a run combine by adding each part's ``(message, count)``."""

    SHOWN = 5

    def __init__(self) -> None:
        self.kinds: dict[str, list] = {}  # kind -> [first message, count], in order of first occurrence

    def add(self, message: str, count: int = 1) -> None:
        entry = self.kinds.setdefault(re.sub(r"\d+", "N", message), [message, 0])
        entry[1] += count

    def summary(self) -> dict[str, Any]:
        shown = [{"message": m, "count": n} for m, n in list(self.kinds.values())[: self.SHOWN]]
        return {"errors": shown, "n_error_kinds": len(self.kinds)}


@dataclass
class Q2Stats:
    """Additive sufficient statistics: combining batches or workers is ``sum``."""

    n: int = 0
    n_scored: int = 0  # responses with a score (valid questions or fallback)
    n_with_questions: int = 0
    n_fallback: int = 0
    n_no_valid_question: int = 0
    n_errors: int = 0
    sum_score: float = 0.0
    sum_score_no_nli: float = 0.0
    sum_sq_score: float = 0.0  # sum of squared scores: the standard error, still additive

    def __add__(self, other: "Q2Stats") -> "Q2Stats":
        if not isinstance(other, Q2Stats):
            return NotImplemented
        return Q2Stats(**{k: getattr(self, k) + getattr(other, k) for k in vars(self)})

    def __radd__(self, other: Any) -> "Q2Stats":
        if other == 0:  # lets sum() start from 0
            return self
        return self.__add__(other)

    @classmethod
    def of(cls, responses: Iterable[ResponseResult]) -> "Q2Stats":
        s = cls()
        for r in responses:
            if r.status == ResponseStatus.STOPPED:  # (a ranking's, never a run's: not a scored row)
                continue
            s.n += 1
            if r.status == ResponseStatus.ERROR:
                s.n_errors += 1
                continue
            if r.status == ResponseStatus.NO_VALID_QUESTION:
                s.n_no_valid_question += 1
                continue
            s.n_scored += 1
            s.sum_score += r.score  # type: ignore[operator]
            s.sum_sq_score += r.score * r.score  # type: ignore[operator]
            s.sum_score_no_nli += r.score_no_nli  # type: ignore[operator]
            if r.status == ResponseStatus.FALLBACK:
                s.n_fallback += 1
            else:
                s.n_with_questions += 1
        return s

    def exit_code(self, fail_on_error: bool = False) -> tuple[int, str]:
        """A run's exit code and why: 1 when no row could be scored (or, with ``fail_on_error``, any row failed);
        else 0 and an empty reason."""
        if self.n_errors == self.n:  # (a row without valid questions is a result, not a failure)
            return 1, f"no row could be scored ({self.n} rows, {self.n_errors} errors)"
        if fail_on_error and self.n_errors:
            return 1, f"{self.n_errors} of {self.n} rows have errors (fail_on_error)"
        return 0, ""

    @property
    def score(self) -> float:
        """System score: mean over scored responses (NaN when none)."""
        return self.sum_score / self.n_scored if self.n_scored else math.nan

    @property
    def score_no_nli(self) -> float:
        return self.sum_score_no_nli / self.n_scored if self.n_scored else math.nan

    @property
    def coverage(self) -> float:
        """Share of responses (errors excluded) with at least one valid question."""
        valid = self.n - self.n_errors
        return self.n_with_questions / valid if valid else math.nan

    @property
    def fallback_rate(self) -> float:
        valid = self.n - self.n_errors
        return self.n_fallback / valid if valid else math.nan

    def intervals(self) -> dict[str, Optional[float]]:
        """Q²'s standard error and 95% interval (:func:`~q2_plugins.metric.significance.mean_interval`, inside [0, 1],
        from the additive sums) and coverage's 95% Wilson interval, under their declared names (None where undefined:
        fewer than two scored responses)."""
        # (lazy: numpy, which results and the report do without)
        from q2_plugins.metric.significance import mean_interval, proportion_interval

        stderr, q2 = mean_interval(self.n_scored, self.sum_score, self.sum_sq_score, M.INTERVAL_CONFIDENCE)
        coverage = proportion_interval(self.n_with_questions, self.n - self.n_errors, M.INTERVAL_CONFIDENCE)
        return {M.Q2_STDERR.key: stderr, M.Q2_CI_LOW.key: q2 and q2.low, M.Q2_CI_HIGH.key: q2 and q2.high,
                M.COVERAGE_CI_LOW.key: coverage and coverage.low, M.COVERAGE_CI_HIGH.key: coverage and coverage.high}

    def summary(self) -> dict[str, Any]:
        return {
            M.Q2.key: _json_float(self.score),
            M.Q2_NO_NLI.key: _json_float(self.score_no_nli),
            M.COVERAGE.key: _json_float(self.coverage),
            M.FALLBACK_RATE.key: _json_float(self.fallback_rate),
            **self.intervals(),
            "n": self.n,
            "n_scored": self.n_scored,
            "n_with_questions": self.n_with_questions,
            "n_fallback": self.n_fallback,
            "n_no_valid_question": self.n_no_valid_question,
            "n_errors": self.n_errors,
        }


def _json_float(x: float) -> Optional[float]:
    return None if math.isnan(x) else x


@dataclass
class Q2Result:
    """The result of one ``score`` call: per-response results, the system figures and the signature;
    ``random_weights``: the model settings whose folder is a random-weight test model (its scores mean nothing)."""

    responses: list[ResponseResult]
    signature: str
    random_weights: tuple[str, ...] = ()
    stats: Q2Stats = field(init=False)

    def __post_init__(self) -> None:
        self.stats = Q2Stats.of(self.responses)

    @property
    def score(self) -> float:
        return self.stats.score

    @property
    def score_no_nli(self) -> float:
        return self.stats.score_no_nli

    @property
    def coverage(self) -> float:
        return self.stats.coverage

    @property
    def fallback_rate(self) -> float:
        return self.stats.fallback_rate

    @property
    def scores(self) -> list[Optional[float]]:
        return [r.score for r in self.responses]

    def __len__(self) -> int:
        return len(self.responses)

    def __add__(self, other: "Q2Result") -> "Q2Result":
        if not isinstance(other, Q2Result):
            return NotImplemented
        if other.signature != self.signature:
            raise ValueError(f"Cannot add results of different signatures:\n  {self.signature}\n  {other.signature}")
        return Q2Result(self.responses + other.responses, self.signature,
                        tuple(sorted({*self.random_weights, *other.random_weights})))

    def to_dict(self) -> dict[str, Any]:
        return {"signature": self.signature, **self.stats.summary(),
                "responses": [r.to_dict() for r in self.responses]}

    def to_json(self, **kwargs: Any) -> str:
        return json.dumps(self.to_dict(), **kwargs)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Q2Result":
        return cls([ResponseResult.from_dict(r) for r in data["responses"]], data["signature"])

    def __repr__(self) -> str:
        s = self.stats
        return (f"Q2Result(q2={s.score:.4f}, coverage={s.coverage:.3f}, fallback_rate={s.fallback_rate:.3f}, "
                f"n={s.n}, errors={s.n_errors}, signature={self.signature!r})")


def cache_line(counts: dict[str, int], cache_dir: Any) -> str:
    """The summary's cache line; entries that failed their check (recomputed, never used) are named."""
    failed = counts.get("failed_checks", 0)
    note = f"  failed checks {failed} (damaged or edited entries: computed again)" if failed else ""
    return f"cache         hits {counts['hits']}  misses {counts['misses']}{note}  ({cache_dir})"


def print_summary(summary: dict[str, Any], signature: str, fmt: str, out: Any = None) -> None:
    """Print a run's summary (:meth:`Q2Stats.summary` plus row errors) and signature: text or JSON."""
    out = out or sys.stdout
    short = getattr(signature, "short", None)  # a Signature has a short form; a plain string is its own
    if fmt == "json":
        print(json.dumps({**summary, "signature": signature, "signature_short": short or signature}, indent=2),
              file=out)
        return
    errors = summary.get("errors") or []

    def pct(x: Optional[float]) -> str:
        return "n/a" if x is None else f"{100 * x:.2f}%"

    def interval(low: Any, high: Any, show: Any) -> str:
        return "" if low is None or high is None else f"  [{show(low)}, {show(high)}]"

    q2 = summary["q2"]
    q2_ci = interval(summary.get(M.Q2_CI_LOW.key), summary.get(M.Q2_CI_HIGH.key), lambda x: f"{x:.4f}")
    print(f"Q2            {'n/a' if q2 is None else f'{q2:.4f}'}"
          + (f"{q2_ci}  (95% interval: {M.MEAN_INTERVAL_METHOD}; q2 compare for paired tests)"
             if q2 is not None and q2_ci else ""), file=out)
    nn = summary["q2_no_nli"]
    print(f"Q2 w/o NLI    {'n/a' if nn is None else f'{nn:.4f}'}", file=out)
    cov_ci = interval(summary.get(M.COVERAGE_CI_LOW.key), summary.get(M.COVERAGE_CI_HIGH.key), pct)
    print(f"coverage      {pct(summary['coverage'])}{cov_ci}  (responses with a valid question"
          + (", 95% Wilson interval)" if cov_ci else ")"), file=out)
    print(f"fallback      {pct(summary['fallback_rate'])}  (scored by end-to-end NLI)", file=out)
    # rows unscored for want of a question occur only with the fallback off: the count is shown when there are any
    unscored = summary["n_no_valid_question"]
    print(f"responses     {summary['n']}  scored {summary['n_scored']}"
          + (f"  unscored for want of a question (fallback off) {unscored}" if unscored else "")
          + f"  errors {summary['n_errors']}", file=out)
    for e in errors:
        print(f"  {e['count']:>6} x  {e['message']}", file=out)
    if summary.get("n_error_kinds", 0) > len(errors):
        print(f"  ... and {summary['n_error_kinds'] - len(errors)} other kinds of row error", file=out)
    if short:
        print(f"signature     {short}", file=out)
    print(f"{'full' if short else 'signature':<14}{signature}", file=out)
