"""What the steps of :mod:`q2_plugins.metric.stages` pass on, and the machinery that runs them.

:class:`Row` is one response with its knowledge and what the steps found for it; :class:`Slot` a candidate and its
ranked questions; :class:`ValidQuestion` a question that passed the filters; :class:`Parts` the settings and the
loaded components. :class:`StageRunner` runs a component over the items of one stage (deduplicated, memoised within a
``score()`` call, cached across calls, chunked, one progress bar per stage for the whole run) and isolates failures:
an item the component cannot process fails alone (:func:`call_isolated`), and :meth:`StageOutputs.take` turns the
failure into its row's error.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable, Optional, Sequence, Union

from q2_plugins.metric.cache import Q2Cache
from q2_plugins.metric.components import (
    Answer,
    CandidateExtractor,
    Coreference,
    NLILabel,
    NLIModel,
    PersonalQuestionFilter,
    QuestionAnswerer,
    QuestionGenerator,
    Resolution,
)
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.errors import ModelLoadError
from q2_plugins.metric.progress import Progress
from q2_plugins.metric.results import DroppedQuestion, QuestionResult
from q2_plugins.metric.scoring import nli_premise_hypothesis

if TYPE_CHECKING:
    from q2_plugins.metric.taxonomy import TextSignals

__all__ = ["Row", "Slot", "ValidQuestion", "ComparedQuestion", "Parts", "Failure", "StageOutputs", "StageRunner",
           "call_isolated", "unfit_of", "describe"]


# -- the items the stages pass on ----------------------------------------------------------------------------------
@dataclass
class Row:
    """One response with its knowledge, and what the stages found for it."""

    index: int
    response: str = ""
    knowledge: str = ""
    error: Optional[str] = None
    candidates: list[str] = field(default_factory=list)
    #: each candidate's characters in the response as given (:func:`~q2_plugins.metric.spans.candidate_offsets`)
    offsets: list[Optional[tuple[int, int]]] = field(default_factory=list)
    questions: list[QuestionResult] = field(default_factory=list)
    dropped: list[DroppedQuestion] = field(default_factory=list)
    fallback_label: Optional[NLILabel] = None
    history: str = ""  # read only with --coref
    resolution: Optional[Resolution] = None  # --coref: the response before and after (``response`` is the latter)
    original_response: Optional[str] = None
    warnings: list[str] = field(default_factory=list)  # how the row was truncated to its budgets
    full: bool = False  # truncating: the row has its budget of valid questions and takes no more
    stopped: bool = False  # ranking with early stop: it cannot rank first and takes no more (metric.contest)
    signals: Union[TextSignals, Failure, None] = None  # for the labels: its text signals, or why there are none


@dataclass
class Slot:
    """One answer candidate of a row with its generated questions, best beam first; ``next`` is the rank of the
    next question to try."""

    row: Row
    candidate: str
    questions: list[str]
    next: int = 0
    done: bool = False
    where: Optional[tuple[int, int]] = None  # the candidate's characters in the response as given


@dataclass
class ValidQuestion:
    """A question whose answer on the response matches its candidate (it passed the filters)."""

    slot: Slot
    rank: int
    question: str
    response_answer: str

    @property
    def row(self) -> Row:
        return self.slot.row


@dataclass
class ComparedQuestion:
    """A valid question with the knowledge's answer and its token F1 against the candidate."""

    valid: ValidQuestion
    knowledge_answer: Answer
    f1: float

    def nli_pair(self) -> tuple[str, str]:
        return nli_premise_hypothesis(self.valid.question, self.valid.slot.candidate, self.knowledge_answer)


@dataclass(frozen=True)
class Parts:
    """What the steps use: the settings and the loaded component of each stage. ``personal`` is there when the
    settings remove personal questions, ``nli`` when they use NLI (:attr:`Q2Config.uses_nli`), ``coref`` with
    ``coref`` on. ``overlap`` (models off the CPU, ``personal`` a
    :class:`~q2_plugins.metric.spacy_worker.PersonalAhead`): a round's personal filter runs in a worker process while
    the question answerer reads the same questions."""

    settings: Q2Config
    candidates: CandidateExtractor
    qg: QuestionGenerator
    qa: QuestionAnswerer
    personal: Optional[PersonalQuestionFilter] = None
    nli: Optional[NLIModel] = None
    coref: Optional[Coreference] = None
    overlap: bool = False


# -- the stage runner -----------------------------------------------------------------------------------------------
class Failure:
    """An item a stage could not process; carries the message for the rows that need it."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


def describe(e: BaseException) -> str:
    """``Type: message`` on one line, whatever the exception's text holds."""
    try:
        text = str(e)
    except BaseException:  # noqa: BLE001 - a __str__ that itself fails
        text = repr(e)
    return f"{type(e).__name__}: {' '.join(text.split())}"


class StageOutputs:
    """A stage's output per item, or the :class:`Failure` of the items it could not process."""

    def __init__(self, values: dict[Hashable, Any]) -> None:
        self._values = values

    def take(self, item: Hashable, row: Row, what: str) -> Any:
        """The output for ``item``; when it failed, ``row`` gets the error "<what> failed: <message>" and None."""
        out = self._values[item]
        if isinstance(out, Failure):
            row.error = f"{what} failed: {out.message}"
            return None
        return out

    def get(self, item: Hashable, default: Any = None) -> Any:
        """The output or :class:`Failure` for ``item`` (``default`` when the stage did not see it)."""
        return self._values.get(item, default)


def call_isolated(fn: Callable[[list], list], part: list) -> list:
    """``fn(part)``; whatever it raises (a Rust panic from a tokenizer included) fails only the items that cause it:
    a failed batch is retried one item at a time. A model that cannot load is no item's fault: its
    :class:`ModelLoadError` propagates, as do interrupts."""
    try:
        out = list(fn(part))
        if len(out) != len(part):
            raise RuntimeError(f"component returned {len(out)} outputs for {len(part)} inputs")
        return out
    except (ModelLoadError, KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as e:  # noqa: BLE001 - any other component error becomes a per-item failure
        if len(part) == 1:
            return [Failure(describe(e))]
    # one bad item must not fail the others: retry one by one
    return [call_isolated(fn, [it])[0] for it in part]


class StageRunner:
    """Runs the stages of one ``score()`` call: dedup, memo, cache, chunking, progress and failure isolation.

    ``keys[stage]`` names the cache entries of a stage (its component's identity and settings; needed with a
    ``cache`` only, and may be set once the components are loaded). ``progress``:
    a run's :class:`~q2_plugins.metric.progress.Progress` (its stage bars go on across calls), True for bars of this
    call only (closed by :meth:`close`), or False."""

    def __init__(self, config: Q2Config, cache: Optional[Q2Cache], keys: Optional[dict[str, str]] = None,
                 progress: Union[bool, Progress] = False) -> None:
        self.config, self.cache, self.keys = config, cache, keys or {}
        self.progress: Optional[Progress] = Progress(rows=False, plain=False) if progress is True else progress or None
        self._own_progress = progress is True
        self.timings: dict[str, float] = {}
        self.computed: dict[str, int] = {}  # items each stage's component was given (not known already)
        self._memo: dict[str, dict[Hashable, Any]] = {}  # stage -> item -> output, within one score() call
        self.rows: Sequence[Row] = ()  # the call's rows: a slow batch names its largest row
        self.batch_sizes: dict[str, int] = {}  # a loaded component's own batch size (a GPU's is set by its memory)

    def run(self, name: str, items: Sequence[Hashable], fn: Callable[[list], list], *,
            encode: Callable[[Any], Any] = lambda x: x, decode: Callable[[Any], Any] = lambda x: x,
            check: Optional[Callable[[list], list]] = None) -> StageOutputs:
        """Run ``fn`` over the unique ``items`` not already known. ``check`` (a component's ``unfit``) names the
        items that cannot be processed; they fail before batching, so they never cost their batch a retry."""
        t0 = time.perf_counter()
        unique = list(dict.fromkeys(items))
        memo = self._memo.setdefault(name, {})  # a question asked again in a later round, say
        results: dict[Hashable, Any] = {it: memo[it] for it in unique if it in memo}
        namespace = self.keys[name] if self.cache is not None and len(results) < len(unique) else None
        if namespace is not None:
            self._read_cache(namespace, [it for it in unique if it not in results], decode, results)
        todo = [it for it in unique if it not in results]
        if todo and check is not None:
            for it, reason in zip(todo, call_isolated(check, todo)):
                if reason is not None:
                    results[it] = reason if isinstance(reason, Failure) else Failure(str(reason))
            todo = [it for it in todo if it not in results]
        if todo:
            self._compute(name, todo, fn, encode, namespace, results)
        memo.update(results)
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0
        return StageOutputs(results)

    def known(self, name: str, item: Hashable) -> Any:
        """The output of ``item`` that stage ``name`` already computed in this call (None: not yet, or failed)."""
        out = self._memo.get(name, {}).get(item)
        return None if isinstance(out, Failure) else out

    def _read_cache(self, namespace: str, asked: list, decode: Callable[[Any], Any], results: dict) -> None:
        try:
            cached = self.cache.get_many(namespace, [list(it) for it in asked])  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - an unreadable cache entry is a miss; the item is computed
            cached = [None] * len(asked)
        for it, val in zip(asked, cached):
            value = None if val is None else decode(val)
            if value is not None:  # (a decoder may refuse an entry of an older form: a miss)
                results[it] = value

    def _compute(self, name: str, todo: list, fn: Callable[[list], list], encode: Callable[[Any], Any],
                 namespace: Optional[str], results: dict) -> None:
        size = self.batch_sizes.get(name) or (self.config.role_batch_size(name) if name in ("qg", "qa", "nli") else 64)
        chunk = max(1, size) * 8
        self.computed[name] = self.computed.get(name, 0) + len(todo)
        if self.progress is not None:  # a later round or call adds its items to the stage's total
            self.progress.add(name, len(todo))
        for start in range(0, len(todo), chunk):
            part = todo[start : start + chunk]
            done = []
            t0 = time.perf_counter()
            if self.progress is not None:
                self.progress.stage(name)
            outs = call_isolated(fn, part)
            self._check_slow(name, part, time.perf_counter() - t0)
            for it, out in zip(part, outs):
                results[it] = out
                if not isinstance(out, Failure):
                    done.append((list(it), encode(out)))
            if namespace is not None and done:
                try:
                    self.cache.put_many(namespace, done)  # type: ignore[union-attr]
                except Exception:  # noqa: BLE001 - not cached; the results themselves are kept
                    pass
            if self.progress is not None:
                self.progress.advance(name, len(part))

    def _check_slow(self, name: str, part: list, seconds: float) -> None:
        """A batch slower than the progress's ``slow_seconds``: name the largest row whose texts it holds."""
        limit = None if self.progress is None else self.progress.slow_seconds
        if limit is None or seconds < limit or not self.rows:
            return
        texts = {t for it in part for t in it if isinstance(t, str)}
        mine = [r for r in self.rows if r.response in texts or r.knowledge in texts] or list(self.rows)
        r = max(mine, key=lambda r: len(r.response) + len(r.knowledge))
        self.progress.slow(name, seconds, r.index,  # type: ignore[union-attr]
                           f"response {len(r.response)} characters, knowledge {len(r.knowledge)} characters")

    def start(self, rows: int, stages: Sequence[str]) -> None:
        """The call scores ``rows`` rows through ``stages`` (in the order they run): the run's row bar moves with
        them."""
        if self.progress is not None:
            self.progress.start(rows, stages)

    def rows_done(self, rows: int) -> None:
        """``rows`` rows of the run are scored (the run's row bar, if any, moves on)."""
        if self.progress is not None:
            self.progress.rows_done(rows)

    def close(self) -> None:
        """Close the progress bars of this call (a run's :class:`~q2_plugins.metric.progress.Progress` stays open)."""
        if self._own_progress and self.progress is not None:
            self.progress.close()


def unfit_of(component: Any) -> Callable[[list], list]:
    """The ``unfit`` check of ``component`` over stage items (tuples); None for every item if it has none. (It is
    looked up only when there are items to check: a fully cached stage does not touch its component.)"""

    def check(part: list) -> list:
        unfit = getattr(component, "unfit", None)
        return [None] * len(part) if unfit is None else list(unfit([tuple(p) for p in part]))

    return check
