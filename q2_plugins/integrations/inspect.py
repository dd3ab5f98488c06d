"""Inspect (``inspect-ai``) integration: :func:`q2_scorer`, a scorer that scores a sample's response by Q² against the
sample's knowledge.

Inspect scores samples concurrently, one scorer call each. The scorer gathers the calls that arrive together into
one core batch (:class:`MicroBatcher`): the first call of a batch waits up to ``window`` seconds (or until
``max_batch`` calls wait), then one :meth:`Q2Scorer.score` call, run in a worker thread so the event loop goes on,
scores them all and hands every call its result. One batch runs at a time; calls that arrive meanwhile form the next.

Per sample, the :class:`~inspect_ai.scorer.Score` has

- ``value``: ``{"q2": score, "q2_no_nli": score_no_nli}`` (the scorer's metrics are the mean, the standard error
  and the bounds of the 95% interval ``q2 score`` prints, ``ci_low`` / ``ci_high`` (in Inspect's log
  ``q2_plugins/ci_low``, ...), of each); a response with no score (an error, or no valid question with the fallback
  off) is *unscored*, so it leaves
  the means as in the core instead of counting as 0;
- ``answer``: the response; ``explanation``: the status, then one line per question with its two answers;
- ``metadata``: ``status``, the result row of ``q2 score --explain`` (``q2``) and the signature (``q2_signature``).

:func:`recorded_response` is a solver that answers with a response recorded in the sample's metadata (scoring what a
system already said, with no model).

Needs ``pip install 'q2-plugins[inspect]'``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Optional, Sequence, TypeVar

try:
    import anyio
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
from q2_plugins.io.rows import result_row
from q2_plugins.metric import names as M
from q2_plugins.metric.significance import mean_interval_of

__all__ = ["q2_scorer", "recorded_response", "ci_low", "ci_high", "MicroBatcher", "score_of", "explanation_of",
           "DEFAULT_WINDOW", "DEFAULT_MAX_BATCH"]

#: seconds the first call of a batch waits for others
DEFAULT_WINDOW = 0.05
#: calls that make a batch full (scored at once, without waiting out the window)
DEFAULT_MAX_BATCH = 64

Item = TypeVar("Item")
Out = TypeVar("Out")


@dataclass
class _Batch(Generic[Item, Out]):
    items: list[Item] = field(default_factory=list)
    full: Any = None  # anyio.Event: set when the batch reaches max_batch
    done: Any = None  # anyio.Event: set when its results (or error) are in
    results: Optional[list[Out]] = None
    error: Optional[BaseException] = None


class MicroBatcher(Generic[Item, Out]):
    """Gathers concurrent :meth:`submit` calls into batches for ``run_batch`` (a blocking function from a list of
    items to a list of results, one per item, in order), run in a worker thread, one batch at a time."""

    def __init__(self, run_batch: Callable[[list[Item]], Sequence[Out]], *, max_batch: int = DEFAULT_MAX_BATCH,
                 window: float = DEFAULT_WINDOW) -> None:
        if max_batch < 1:
            raise ValueError(f"Expected max_batch of at least 1, but got {max_batch}")
        if window < 0:
            raise ValueError(f"Expected a window of 0 seconds or more, but got {window}")
        self.run_batch = run_batch
        self.max_batch = max_batch
        self.window = window
        self.batches = 0  # batches run so far (one run_batch call each)
        self._open: Optional[_Batch[Item, Out]] = None
        self._lock: Any = None
        self._lock_token: Any = None

    def _running_lock(self) -> Any:
        """One lock per event loop (a scorer may outlive the loop of one eval)."""
        token = anyio.lowlevel.current_token()
        if self._lock is None or self._lock_token is not token:
            self._lock, self._lock_token = anyio.Lock(), token
        return self._lock

    async def submit(self, item: Item) -> Out:
        """The result of ``item``, scored in a batch with the calls that arrive with it."""
        batch = self._open
        leader = batch is None
        if batch is None:
            batch = self._open = _Batch(full=anyio.Event(), done=anyio.Event())
        position = len(batch.items)
        batch.items.append(item)
        if len(batch.items) >= self.max_batch:
            self._open = None
            batch.full.set()
        if leader:
            with anyio.move_on_after(self.window):
                await batch.full.wait()
            if self._open is batch:
                self._open = None
            async with self._running_lock():
                await self._run(batch)
        else:
            await batch.done.wait()
        if batch.error is not None:
            raise batch.error
        assert batch.results is not None
        return batch.results[position]

    async def _run(self, batch: _Batch[Item, Out]) -> None:
        try:
            results = await anyio.to_thread.run_sync(self.run_batch, list(batch.items))
            if len(results) != len(batch.items):
                raise RuntimeError(f"q2: a batch of {len(batch.items)} items gave {len(results)} results")
            batch.results = list(results)
            self.batches += 1
        except BaseException as e:  # every waiting call raises it, not just the leader
            batch.error = e
            raise
        finally:
            batch.done.set()


def explanation_of(result: ResponseResult) -> str:
    """The status, then one line per valid question: the question, the response's answer and the knowledge's."""
    lines = [f"status: {result.status}" + (f" ({result.error})" if result.error else "")]
    if result.used_fallback:
        lines.append(f"no valid question: end-to-end NLI says {result.fallback_label}")
    for q in result.questions or []:
        lines.append(f"Q: {q.question} | response: {q.response_answer} | knowledge: {q.knowledge_answer} "
                     f"(f1 {q.f1:.2f}, nli {q.nli_label}, score {q.score:.2f})")
    return "\n".join(lines)


def score_of(result: ResponseResult, response: str, signature: str) -> Score:
    """The Inspect score of one response's Q² result (see the module docstring)."""
    metadata = {"status": result.status, "q2": result_row(None, {}, result, explain=True), "q2_signature": signature}
    explanation = explanation_of(result)
    if result.score is None:
        unscored = getattr(Score, "unscored", None)
        if unscored is not None:
            return unscored(reason=result.status, answer=response, explanation=explanation, metadata=metadata)
        return Score(value={"q2": math.nan, "q2_no_nli": math.nan}, answer=response, explanation=explanation,
                     metadata=metadata)
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
    Q² of what a system already said, through Inspect."""

    async def solve(state: TaskState, generate: Generate) -> TaskState:
        state.output = ModelOutput.from_content(model="recorded", content=str(_field(state, field, "response")))
        return state

    return solve
