"""Inspect (``inspect-ai``) integration: :func:`q2_scorer`, a scorer that scores a sample's response by Q² against the
sample's knowledge.

Inspect scores samples concurrently, one scorer call each. The scorer gathers the calls that arrive together into
one core batch (:class:`MicroBatcher`): the first call of a batch waits until ``window`` seconds pass without another
call (or until ``max_batch`` calls wait), then one :meth:`Q2Scorer.score` call, run in a worker thread so the event
loop goes on, scores them all and hands every call its result. One batch runs at a time; calls that arrive meanwhile
join the next.

Per sample, the :class:`~inspect_ai.scorer.Score` has

- ``value``: ``{"q2": score, "q2_no_nli": score_no_nli}`` (the scorer's metrics are the mean, the standard error
  and the bounds of the 95% interval ``q2 score`` prints, ``ci_low`` / ``ci_high``, of each; Inspect's log puts
  ``q2_plugins/`` in front of the last two where q2-plugins is installed as a package); a response with no score
  (an error, or no valid question with the fallback off) is *unscored*, so it leaves the means as in the core
  instead of counting as 0;
- ``answer``: the response; ``explanation``: the status, then one line per question with its two answers;
- ``metadata``: ``status``, the result row of ``q2 score --explain`` (``q2``) and the signature (``q2_signature``).

:func:`recorded_response` is a solver that answers with a response recorded in the sample's metadata (scoring what a
system already said, with no model).

Needs ``pip install 'q2-plugins[inspect]'``.
"""

from __future__ import annotations

import math
from typing import Any, Optional

try:
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import (
        Metric,
        SampleScore,
        Score,
        Scorer,
        Target,
        mean,
        metric,
        scorer,
        stderr,
        value_to_float,
    )
    from inspect_ai.solver import Generate, Solver, TaskState, solver
except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"q2_plugins.integrations.inspect needs inspect-ai: pip install 'q2-plugins[inspect]' ({e.name} is missing; "
        f"from a checkout, bash scripts/setup_lighteval.sh makes .venv-lighteval, where it runs)"
    ) from e

from q2_plugins import Q2Config, Q2Scorer, ResponseResult
from q2_plugins.integrations import adapters
from q2_plugins.integrations.adapters import explanation_of
from q2_plugins.integrations.batching import DEFAULT_MAX_BATCH, DEFAULT_WINDOW, MicroBatcher
from q2_plugins.io.rows import result_row
from q2_plugins.metric import names as M
from q2_plugins.metric.significance import mean_interval_of

__all__ = ["q2_scorer", "recorded_response", "ci_low", "ci_high", "MicroBatcher", "score_of", "explanation_of",
           "DEFAULT_WINDOW", "DEFAULT_MAX_BATCH", "NOT_TEXT"]

#: the sample metadata key where :func:`recorded_response` says why a recorded response is not text
NOT_TEXT = "q2_not_text"


def _unscored(reason: str, response: str, explanation: str, metadata: dict[str, Any]) -> Score:
    """A score that leaves the means alone: Inspect's unscored score where it has one, else NaN values."""
    unscored = getattr(Score, "unscored", None)
    if unscored is not None:
        return unscored(reason=reason, answer=response, explanation=explanation, metadata=metadata)
    return Score(value={"q2": math.nan, "q2_no_nli": math.nan}, answer=response, explanation=explanation,
                 metadata=metadata)


def score_of(result: ResponseResult, response: str, signature: str) -> Score:
    """The Inspect score of one response's Q² result (see the module docstring)."""
    metadata = {"status": result.status, "q2": result_row(None, {}, result, explain=True), "q2_signature": signature}
    explanation = explanation_of(result)
    if result.score is None:
        reason = f"{result.status}: {result.error}" if result.error else str(result.status)
        return _unscored(reason, response, explanation, metadata)
    return Score(value={"q2": result.score, "q2_no_nli": result.score_no_nli}, answer=response,
                 explanation=explanation, metadata=metadata)


def _field(state: TaskState, key: str, what: str) -> Any:
    metadata = state.metadata or {}
    if key not in metadata:
        raise KeyError(f"q2: the sample has no {what} {key!r} in its metadata (keys: {sorted(metadata)}); name it "
                       f"with q2_scorer({what}=...)")
    return metadata[key]


def _bound(scores: list[SampleScore], which: str) -> float:
    """The ``which`` bound of the 95% interval of the mean of ``scores`` (NaN with fewer than two)."""
    to_float = value_to_float()
    interval = mean_interval_of([to_float(s.score.value) for s in scores], M.INTERVAL_CONFIDENCE)[1]
    return math.nan if interval is None else getattr(interval, which)


@metric
def ci_low() -> Metric:
    """The lower bound of the mean's 95% interval, the one ``q2 score`` prints (inside [0, 1]:
    :data:`q2_plugins.metric.names.MEAN_INTERVAL_METHOD`)."""

    def low(scores: list[SampleScore]) -> float:
        return _bound(scores, "low")

    return low


@metric
def ci_high() -> Metric:
    """The upper bound of the mean's 95% interval (see :func:`ci_low`)."""

    def high(scores: list[SampleScore]) -> float:
        return _bound(scores, "high")

    return high


@scorer(metrics={"q2": [mean(), stderr(), ci_low(), ci_high()], "q2_no_nli": [mean(), stderr(), ci_low(), ci_high()]})
def q2_scorer(knowledge: Optional[str] = "knowledge", history: Optional[str] = None, *,
              max_batch: int = DEFAULT_MAX_BATCH, window: float = DEFAULT_WINDOW, **options: Any) -> Scorer:
    """Q² of the model's response (``state.output.completion``) against the sample's knowledge: its metadata field
    ``knowledge``, or with ``knowledge=None`` the sample's target. ``history`` names a metadata field with the
    dialogue before the response (read with ``coref``). ``options`` are ``Q2Config`` fields; ``max_batch`` and
    ``window`` shape the batches (see :class:`MicroBatcher`)."""
    config: Q2Config = adapters.config_from_options(options)  # a bad option fails here, once, before any sample
    the_scorer: Q2Scorer = adapters.shared_scorer(config, slot="inspect")

    def run_batch(items: list[tuple[str, Any, Any]]) -> list[tuple[ResponseResult, str]]:
        with_history = history is not None
        res = the_scorer.score(responses=[i[0] for i in items], knowledge=[i[1] for i in items],
                               history=[i[2] for i in items] if with_history else None, explain=True)
        return [(r, str(res.signature)) for r in res.responses]

    batcher: MicroBatcher[tuple[str, Any, Any], tuple[ResponseResult, str]] = MicroBatcher(
        run_batch, max_batch=max_batch, window=window)

    async def score(state: TaskState, target: Target) -> Score:
        not_text = (state.metadata or {}).get(NOT_TEXT)
        if not_text is not None:  # recorded_response found no text to score
            return _unscored(f"error: {not_text}", "", f"status: error ({not_text})",
                             {"status": "error", "error": not_text})
        response = state.output.completion
        know = target.text if knowledge is None else _field(state, knowledge, "knowledge")
        hist = None if history is None else _field(state, history, "history")
        result, signature = await batcher.submit((response, know, hist))
        return score_of(result, response, signature)

    score.batcher = batcher  # type: ignore[attr-defined]
    return score


@solver
def recorded_response(field: str = "response") -> Solver:
    """A solver that answers with the sample's recorded response (its metadata field ``field``), calling no model:
    Q² of what a system already said, through Inspect. A recorded value that is not text (missing, ``None``, a
    number) is no answer: the sample's metadata key :data:`NOT_TEXT` says why, and :func:`q2_scorer` leaves it
    unscored with that reason."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        value = _field(state, field, "response")
        if isinstance(value, str):
            state.output = ModelOutput.from_content(model="recorded", content=value)
        else:
            state.output = ModelOutput.from_content(model="recorded", content="")
            state.metadata[NOT_TEXT] = (f"the recorded response {field!r} is "
                                        f"{'missing (None)' if value is None else type(value).__name__ + ', not text'}")
        return state

    return solve
