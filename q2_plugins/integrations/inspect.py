"""Inspect (``inspect-ai``) integration: :func:`q2_scorer`, a scorer that scores a sample's response by Q² against the
sample's knowledge.

Inspect scores samples concurrently, one scorer call each. The scorer gathers the calls that arrive together into
one core batch (:class:`MicroBatcher`): the first call of a batch waits up to ``window`` seconds (or until
``max_batch`` calls wait), then one :meth:`Q2Scorer.score` call, run in a worker thread so the event loop goes on,
scores them all and hands every call its result. One batch runs at a time; calls that arrive meanwhile form the next.

Per sample, the :class:`~inspect_ai.scorer.Score` has

- ``value``: ``{"q2": score, "q2_no_nli": score_no_nli}`` (the scorer's metrics are the mean and standard error of
  each); a response with no score (an error, or no valid question with the fallback off) is *unscored*, so it leaves
  the means as in the core instead of counting as 0;
- ``answer``: the response; ``explanation``: the status, then one line per question with its two answers;
- ``metadata``: ``status``, the result row of ``q2 score --explain`` (``q2``) and the signature (``q2_signature``).

:func:`recorded_response` is a solver that answers with a response recorded in the sample's metadata (scoring what a
system already said, with no model).

Needs ``pip install 'q2-plugins[inspect]'``.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Optional, Sequence, TypeVar

try:
    import anyio
    from inspect_ai.model import ModelOutput
    from inspect_ai.scorer import Score, Scorer, Target, mean, scorer, stderr
    from inspect_ai.solver import Generate, Solver, TaskState, solver
except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError(
        f"q2_plugins.integrations.inspect needs inspect-ai: pip install 'q2-plugins[inspect]' ({e.name} is missing)"
    ) from e

from q2_plugins import Q2Config, Q2Scorer, ResponseResult
from q2_plugins.integrations import adapters
from q2_plugins.io.rows import result_row

__all__ = ["q2_scorer", "recorded_response", "MicroBatcher", "score_of", "explanation_of", "DEFAULT_WINDOW",
           "DEFAULT_MAX_BATCH", "NOT_TEXT"]

#: seconds the first call of a batch waits for others
DEFAULT_WINDOW = 0.05
#: the sample metadata key where :func:`recorded_response` says why a recorded response is not text
NOT_TEXT = "q2_not_text"
#: calls that make a batch full (scored at once, without waiting out the window)
DEFAULT_MAX_BATCH = 64

Item = TypeVar("Item")
Out = TypeVar("Out")


@dataclass
class _Batch(Generic[Item, Out]):
    items: list[Item] = field(default_factory=list)
    deadline: float = 0.0  # anyio.current_time() at which the batch stops waiting for more calls
    leader: Optional[int] = None  # the position of the call that runs the batch; None: the next call to wake takes it
    full: Any = None  # anyio.Event: set when the batch reaches max_batch
    done: bool = False  # its results (or error) are in
    wake: Any = None  # anyio.Event: set when the batch is done or its leader is cancelled before it ran
    results: Optional[list[Out]] = None
    error: Optional[BaseException] = None


class MicroBatcher(Generic[Item, Out]):
    """Gathers concurrent :meth:`submit` calls into batches for ``run_batch`` (a blocking function from a list of
    items to a list of results, one per item, in order), run in a worker thread, one batch at a time.

    The first call of a batch leads it: it waits out the window, then runs the batch. A leader cancelled before the
    batch ran hands it to another waiting call, which runs it once the window is over; the batch's other calls get
    their results either way."""

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
        self._loop: Any = None
        # one batch at a time in the threads too, whichever event loop submitted it (a scorer may serve several)
        self._thread_lock = threading.Lock()

    def _on_this_loop(self) -> None:
        """One lock and one open batch per event loop (a scorer may outlive the loop of one eval). Tokens are
        compared by equality: anyio gives a new, equal token on each call."""
        token = anyio.lowlevel.current_token()
        if self._lock is None or self._loop != token:
            self._lock, self._loop, self._open = anyio.Lock(), token, None

    def _join(self, item: Item) -> tuple[_Batch[Item, Out], int]:
        """The open batch (a new one if none is open) with ``item`` added, and its position there."""
        self._on_this_loop()
        batch = self._open
        if batch is None:
            batch = self._open = _Batch(deadline=anyio.current_time() + self.window, full=anyio.Event(),
                                        wake=anyio.Event())
        position = len(batch.items)
        batch.items.append(item)
        if len(batch.items) >= self.max_batch:
            self._open = None
            batch.full.set()
        return batch, position

    async def submit(self, item: Item) -> Out:
        """The result of ``item``, scored in a batch with the calls that arrive with it."""
        batch, position = self._join(item)
        try:
            while not batch.done:
                if batch.leader is None:
                    batch.leader = position
                if batch.leader == position:
                    await self._lead(batch)
                else:
                    await batch.wake.wait()
        except BaseException:
            if batch.leader == position and not batch.done:  # cancelled before the batch ran: hand it over
                batch.leader = None
                wake, batch.wake = batch.wake, anyio.Event()
                wake.set()
            raise
        if batch.error is not None:
            raise batch.error
        assert batch.results is not None
        return batch.results[position]

    async def _lead(self, batch: _Batch[Item, Out]) -> None:
        """Wait out the rest of the batch's window (or until it is full), close it, and run it."""
        wait = batch.deadline - anyio.current_time()
        if wait > 0 and not batch.full.is_set():
            with anyio.move_on_after(wait):
                await batch.full.wait()
        if self._open is batch:
            self._open = None
        async with self._lock:
            await self._run(batch)

    def _run_locked(self, items: list[Item]) -> Sequence[Out]:
        with self._thread_lock:
            return self.run_batch(items)

    async def _run(self, batch: _Batch[Item, Out]) -> None:
        """Run the batch in a worker thread (not abandoned when the leader is cancelled: its calls wait on it)."""
        try:
            results = await anyio.to_thread.run_sync(self._run_locked, list(batch.items))
            if len(results) != len(batch.items):
                raise RuntimeError(f"q2: a batch of {len(batch.items)} items gave {len(results)} results")
            batch.results = list(results)
            self.batches += 1
        except BaseException as e:  # every waiting call raises it, not just the leader
            batch.error = e
            if not isinstance(e, Exception):
                raise
        finally:
            batch.done = True
            batch.wake.set()


def explanation_of(result: ResponseResult) -> str:
    """The status, then one line per valid question: the question, the response's answer and the knowledge's."""
    lines = [f"status: {result.status}" + (f" ({result.error})" if result.error else "")]
    if result.used_fallback:
        lines.append(f"no valid question: end-to-end NLI says {result.fallback_label}")
    for q in result.questions or []:
        lines.append(f"Q: {q.question} | response: {q.response_answer} | knowledge: {q.knowledge_answer} "
                     f"(f1 {q.f1:.2f}, nli {q.nli_label}, score {q.score:.2f})")
    return "\n".join(lines)


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


@scorer(metrics={"q2": [mean(), stderr()], "q2_no_nli": [mean(), stderr()]})
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
