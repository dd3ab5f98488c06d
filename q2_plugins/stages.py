"""The stages of Q², in the order of the README's "How Q² scores a response".

:class:`StageRunner` runs a component over the items of one stage (deduplicated, memoised within a ``score()`` call,
cached across calls, chunked, one progress bar per stage for the whole run) and isolates failures: an item the
component cannot process fails alone, and :meth:`StageOutputs.take` turns the failure into its row's error. Each step
below is one function over :class:`Row` (one response) and the named types of the selection: :class:`Slot` (a
candidate and its ranked questions) and :class:`ValidQuestion` (a question that passed the filters). The steps take
:class:`Parts`, the settings and the loaded components, and nothing else of the scorer; the labelling step takes the
text-signals component alone (it also labels results scored earlier).
"""

from __future__ import annotations

import time
import unicodedata
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Hashable, Optional, Sequence, Union

from .budgets import admit_question
from .cache import Q2Cache
from .components import (
    Answer,
    AnswerKind,
    CandidateExtractor,
    Coreference,
    NLILabel,
    NLIModel,
    PersonalQuestionFilter,
    QuestionAnswerer,
    QuestionGenerator,
    Resolution,
)
from .config import Q2Config
from .errors import ModelLoadError
from .normalize import answers_match
from .progress import Progress
from .results import DroppedQuestion, QuestionResult, ResponseResult, ResponseStatus
from .scoring import (
    NLI_SCORES,
    answer_f1,
    counted_questions,
    needs_nli,
    nli_premise_hypothesis,
    question_score,
    response_result,
)

if TYPE_CHECKING:  # the taxonomy is imported only when labels are asked for
    from .taxonomy import SpacyTextSignals, TextSignals

__all__ = ["Row", "Slot", "ValidQuestion", "ComparedQuestion", "Parts", "StageRunner", "StageOutputs", "Failure",
           "check_cells", "resolve_coreference", "extract_candidates", "generate_questions", "select_questions",
           "answer_from_knowledge", "run_nli", "compare_answers", "apply_fallback", "discard_unanswerable",
           "aggregate", "text_signals", "label", "usable", "stage_version"]


# -- the items the stages pass on ----------------------------------------------------------------------------------
@dataclass
class Row:
    """One response with its knowledge, and what the stages found for it."""

    index: int
    response: str = ""
    knowledge: str = ""
    error: Optional[str] = None
    candidates: list[str] = field(default_factory=list)
    questions: list[QuestionResult] = field(default_factory=list)
    dropped: list[DroppedQuestion] = field(default_factory=list)
    fallback_label: Optional[NLILabel] = None
    history: str = ""  # read only with --coref
    resolution: Optional[Resolution] = None  # --coref: the response before and after (``response`` is the latter)
    original_response: Optional[str] = None
    warnings: list[str] = field(default_factory=list)  # how the row was truncated to its budgets
    full: bool = False  # truncating: the row has its budget of valid questions and takes no more
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
    ``coref`` on. ``overlap`` (models off the CPU, ``personal`` a :class:`~q2_plugins.ahead.PersonalAhead`): a
    round's personal filter runs in a worker process while the question answerer reads the same questions."""

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


def _describe(e: BaseException) -> str:
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
            return [Failure(_describe(e))]
    # one bad item must not fail the others: retry one by one
    return [call_isolated(fn, [it])[0] for it in part]


class StageRunner:
    """Runs the stages of one ``score()`` call: dedup, memo, cache, chunking, progress and failure isolation.

    ``keys[stage]`` names the cache entries of a stage (its component's identity and settings; needed with a
    ``cache`` only, and may be set once the components are loaded). ``progress``:
    a run's :class:`~q2_plugins.progress.Progress` (its stage bars go on across calls), True for bars of this call
    only (closed by :meth:`close`), or False."""

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

    def _read_cache(self, namespace: str, asked: list, decode: Callable[[Any], Any], results: dict) -> None:
        try:
            cached = self.cache.get_many(namespace, [list(it) for it in asked])  # type: ignore[union-attr]
        except Exception:  # noqa: BLE001 - an unreadable cache entry is a miss; the item is computed
            cached = [None] * len(asked)
        for it, val in zip(asked, cached):
            if val is not None:
                results[it] = decode(val)

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
        """Close the progress bars of this call (a run's :class:`~q2_plugins.progress.Progress` stays open)."""
        if self._own_progress and self.progress is not None:
            self.progress.close()


def unfit_of(component: Any) -> Callable[[list], list]:
    """The ``unfit`` check of ``component`` over stage items (tuples); None for every item if it has none. (It is
    looked up only when there are items to check: a fully cached stage does not touch its component.)"""

    def check(part: list) -> list:
        unfit = getattr(component, "unfit", None)
        return [None] * len(part) if unfit is None else list(unfit([tuple(p) for p in part]))

    return check


# -- 0. the rows: every input cell checked, a bad one is its row's error ---------------------------------------------
# characters that carry no text: whitespace, control and format characters (zero-width, direction marks, BOM)
_BLANK_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


def _plain(value: str) -> str:
    """A plain ``str`` with the same characters (numpy strings and other ``str`` subclasses become ``str``)."""
    return value if type(value) is str else str.__getitem__(value, slice(None))


def _as_text(value: Any, what: str) -> tuple[Optional[str], Optional[str]]:
    """Return (text, error) for one input cell: a string, or a list of strings joined by spaces."""
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        value = " ".join(_plain(v).strip() for v in value)
    if value is None:
        return None, f"{what} is missing (None)"
    if not isinstance(value, str):
        return None, f"{what} must be a string, got {type(value).__name__}"
    value = _plain(value)
    if all(c.isspace() or unicodedata.category(c) in _BLANK_CATEGORIES for c in value):
        return None, f"{what} is empty"
    try:
        value.encode("utf-8")  # (in C: a Python loop over 200,000 characters would cost more than the check is worth)
    except UnicodeEncodeError as e:
        c = value[e.start]
        return None, f"{what} is not valid Unicode: a lone surrogate {c!r} at character {e.start}"
    return value, None


def check_cells(responses: Sequence[Any], knowledge: Sequence[Any],
                history: Optional[Sequence[Any]] = None) -> list[Row]:
    """One :class:`Row` per response; a cell that is not usable text gives its row an error. ``history`` is read
    only for coreference: a missing or empty one is no error (the response is resolved on its own)."""
    rows = []
    for i, (resp, know) in enumerate(zip(responses, knowledge)):
        r_text, r_err = _as_text(resp, "response")
        k_text, k_err = _as_text(know, "knowledge")
        rows.append(Row(i, r_text or "", k_text or "", r_err or k_err))
    for row, hist in zip(rows, history if history is not None else []):
        if isinstance(hist, (list, tuple)) and all(isinstance(t, str) for t in hist):
            hist = "\n".join(_plain(t).strip() for t in hist)
        h_text, h_err = _as_text(hist, "history")
        if h_err is not None and not h_err.endswith(("is missing (None)", "is empty")):
            row.error = row.error or h_err
        row.history = h_text or ""
    return rows


def usable(rows: Sequence[Row]) -> list[Row]:
    """The rows without an error."""
    return [r for r in rows if r.error is None]


# -- 0b. coreference (--coref): pronouns of the response replaced before anything reads it -------------------------
def resolve_coreference(run: StageRunner, parts: Parts, rows: list[Row]) -> list[Row]:
    """One call over every (history, response): each row's response becomes its resolved text (the original is
    kept in ``original_response``); returns the rows still without an error."""
    out = run.run("coref", [(r.history, r.response) for r in rows],
                  lambda part: parts.coref.resolve([tuple(p) for p in part]), encode=Resolution.to_dict,
                  decode=Resolution.from_dict, check=unfit_of(parts.coref))
    for r in rows:
        res = out.take((r.history, r.response), r, "coreference")
        if res is not None:
            r.original_response, r.resolution, r.response = r.response, res, res.response
    return usable(rows)


def replaced_mention(row: Row, candidate: str) -> Optional[str]:
    """``"he -> Bob Ross"`` when ``candidate`` is, holds or is part of a mention that replaced a pronoun of the
    row's response (several: joined by "; "); None otherwise."""
    if row.resolution is None:
        return None
    cand = candidate.lower()
    hits = [f"{x.pronoun} -> {x.mention}" for x in row.resolution.replacements
            if _within(cand, x.mention.lower()) or _within(x.mention.lower(), cand)]
    return "; ".join(dict.fromkeys(hits)) or None


def _within(part: str, whole: str) -> bool:
    """``part`` occurs in ``whole`` as whole words."""
    i = whole.find(part)
    while i >= 0:
        end = i + len(part)
        if part and (i == 0 or not whole[i - 1].isalnum()) and (end == len(whole) or not whole[end].isalnum()):
            return True
        i = whole.find(part, i + 1)
    return False


# -- 1. answer candidates -------------------------------------------------------------------------------------------
def extract_candidates(run: StageRunner, parts: Parts, rows: list[Row]) -> list[Row]:
    """Fill each row's candidates; returns the rows still without an error."""
    out = run.run("candidates", [(r.response,) for r in rows],
                  lambda part: parts.candidates.extract([p[0] for p in part]), check=unfit_of(parts.candidates))
    for r in rows:
        r.candidates = list(out.take((r.response,), r, "candidate extraction") or [])
    return usable(rows)


# -- 2. question generation -----------------------------------------------------------------------------------------
def generate_questions(run: StageRunner, parts: Parts, rows: list[Row]) -> list[Slot]:
    """One call over every candidate of every row: a :class:`Slot` per candidate of the rows without error."""
    out = run.run("qg", [(cand, r.response) for r in rows for cand in r.candidates],
                  lambda part: parts.qg.generate([tuple(p) for p in part]), check=unfit_of(parts.qg))
    slots = []
    for r in rows:
        for cand in r.candidates:
            questions = out.take((cand, r.response), r, "question generation")
            if questions is None:
                break
            slots.append(Slot(r, cand, list(questions)))
    return [s for s in slots if s.row.error is None]


# -- 3. filters: personal questions, then the response's own answer, in rounds over beam ranks -----------------------
def select_questions(run: StageRunner, parts: Parts, slots: list[Slot]) -> list[ValidQuestion]:
    """The valid questions, in candidate order then beam rank. ``single`` mode tries one more rank per round until
    a candidate has a valid question; ``all`` tries every rank in one round. The knowledge answers of a round's
    valid questions (step 4) ride in the next round's QA batch."""
    c = parts.settings
    valid: list[ValidQuestion] = []
    counts: dict[int, int] = {}  # valid questions per row (id), for the max_questions budget
    while True:
        ahead = [(v.question, v.row.knowledge) for v in valid if v.row.error is None]
        batch = _next_round(run, parts, slots, ahead)
        if not batch:
            break
        answers = _answer(run, parts, [(q, s.row.response) for s, _, q in batch] + ahead)  # (with overlap: known)
        for s, rank, q in batch:
            ans = answers.take((q, s.row.response), s.row, "question answering on the response")
            if ans is None:
                continue
            if not ans.has_answer:
                s.row.dropped.append(DroppedQuestion(s.candidate, q, "no_answer_in_response"))
            elif not answers_match(s.candidate, ans.text, c.normalization):
                s.row.dropped.append(DroppedQuestion(s.candidate, q, "answer_mismatch", ans.text))
            elif admit_question(c, s.row, counts.get(id(s.row), 0)):
                counts[id(s.row)] = counts.get(id(s.row), 0) + 1
                valid.append(ValidQuestion(s, rank, q, ans.text))
                s.done = s.done or c.question_mode == "single"
    order = {id(s): i for i, s in enumerate(slots)}
    valid.sort(key=lambda v: (order[id(v.slot)], v.rank))  # candidate order, then beam rank, as the original
    return [v for v in valid if v.row.error is None]


def _next_round(run: StageRunner, parts: Parts, slots: list[Slot],
                ahead: list[tuple[str, str]]) -> list[tuple[Slot, int, str]]:
    """The (slot, beam rank, question) triples of the next round, in slot then rank order: each open slot's next
    question (``single``) or all its remaining ones (``all``), personal questions dropped on the way (in ``single``
    mode a candidate whose question is personal tries its next rank in the same round). Only the questions a round
    reaches go through the personal filter. With ``parts.overlap`` the filter runs in a worker process while the
    question answerer reads the same questions (and the ``ahead`` pairs); a personal question's answer is unused."""
    c = parts.settings
    tries = [t for s in slots for t in _take(c, s, first=True)]
    if parts.personal is None:
        return tries
    batch: list[tuple[Slot, int, str]] = []
    while tries:
        questions = [(q,) for _, _, q in tries]
        if parts.overlap:
            parts.personal.start([q for _, _, q in tries])  # type: ignore[attr-defined]
            _answer(run, parts, [(q, s.row.response) for s, _, q in tries] + ahead)
            ahead = []
        personal = run.run("personal", questions, lambda part: parts.personal.is_personal([p[0] for p in part]))
        again = []
        for s, rank, q in tries:
            if s.row.error is not None:
                s.done = True
                continue
            if personal.get((q,), False) and personal.take((q,), s.row, "personal-question filter"):
                s.row.dropped.append(DroppedQuestion(s.candidate, q, "personal"))
                if c.question_mode == "single":
                    again.extend(_take(c, s, first=False))
                continue
            if s.row.error is None:  # (not the filter's failure on this question)
                batch.append((s, rank, q))
        tries = again
    order = {id(s): i for i, s in enumerate(slots)}
    batch.sort(key=lambda t: (order[id(t[0])], t[1]))
    return [t for t in batch if t[0].row.error is None]


def _take(c: Q2Config, s: Slot, *, first: bool) -> list[tuple[Slot, int, str]]:
    """The slot's next question (``single``) or all its remaining ones (``all``), moving its next rank on; none for a
    slot that is done, whose row has an error or is full (``first``: at the round's start)."""
    if first and (s.done or s.row.error is not None or s.row.full):
        s.done = True
        return []
    end = len(s.questions) if c.question_mode == "all" else min(s.next + 1, len(s.questions))
    out = [(s, rank, s.questions[rank]) for rank in range(s.next, end)]
    s.next = end
    s.done = s.next >= len(s.questions) or c.question_mode == "all"
    return out


def _answer(run: StageRunner, parts: Parts, items: list[tuple[str, str]]) -> StageOutputs:
    return run.run("qa", items, lambda part: parts.qa.answer([tuple(p) for p in part]),
                   encode=Answer.to_dict, decode=Answer.from_dict, check=unfit_of(parts.qa))


# -- 4. question answering on the knowledge -------------------------------------------------------------------------
def answer_from_knowledge(run: StageRunner, parts: Parts, valid: list[ValidQuestion]) -> list[ComparedQuestion]:
    """The knowledge's answer to every valid question (those of earlier rounds come from the memo), with its F1."""
    answers = _answer(run, parts, [(v.question, v.row.knowledge) for v in valid])
    compared = []
    for v in valid:
        k_ans = answers.take((v.question, v.row.knowledge), v.row, "question answering on the knowledge")
        if k_ans is not None:
            f1 = answer_f1(v.slot.candidate, k_ans, parts.settings.normalization)
            compared.append(ComparedQuestion(v, k_ans, f1))
    return compared


# -- 5 and 6 share one NLI call: answer comparison and the end-to-end fallback --------------------------------------
def run_nli(run: StageRunner, parts: Parts, pairs: list[tuple[str, str]]) -> StageOutputs:
    """One NLI call over the answer pairs of step 5 and the fallback pairs of step 6 (none when the settings use
    no NLI, and then ``parts.nli`` is None)."""
    return run.run("nli", pairs, lambda part: parts.nli.predict([tuple(p) for p in part]),  # type: ignore[union-attr]
                   encode=lambda x: x.value, decode=NLILabel, check=unfit_of(parts.nli))


def compare_answers(parts: Parts, compared: list[ComparedQuestion], nli_out: StageOutputs) -> None:
    """Step 5: each compared question becomes a :class:`QuestionResult` of its row (F1, upgraded by NLI)."""
    c = parts.settings
    for cq in compared:
        v, label = cq.valid, None
        if c.use_nli and needs_nli(cq.knowledge_answer, cq.f1):
            label = nli_out.take(cq.nli_pair(), v.row, "NLI on answers")
            if label is None:
                continue
        v.row.questions.append(QuestionResult(
            candidate=v.slot.candidate, question=v.question, response_answer=v.response_answer,
            knowledge_answer=cq.knowledge_answer.text, knowledge_answer_kind=cq.knowledge_answer.kind.value,
            f1=cq.f1, nli_label=label.value if label else None, score=question_score(cq.f1, label),
            coref=replaced_mention(v.row, v.slot.candidate),
        ))


def nli_pairs(parts: Parts, compared: list[ComparedQuestion]) -> list[tuple[str, str]]:
    """The answer pairs that NLI decides (step 5)."""
    use_nli = parts.settings.use_nli
    return [cq.nli_pair() for cq in compared if use_nli and needs_nli(cq.knowledge_answer, cq.f1)]


def needing_fallback(parts: Parts, rows: list[Row], compared: list[ComparedQuestion]) -> list[Row]:
    """Rows without error and without a compared question: end-to-end NLI scores them (when the settings'
    ``fallback`` is on)."""
    if not parts.settings.fallback:
        return []
    with_questions = {id(cq.valid.row) for cq in compared}
    return [r for r in rows if r.error is None and id(r) not in with_questions]


def fallback_pair(parts: Parts, row: Row) -> tuple[str, str]:
    """The fallback's (premise, hypothesis): knowledge and response, lower-cased as the original does."""
    c = parts.settings
    premise = row.knowledge.lower() if c.fallback_lowercase_knowledge else row.knowledge
    return premise, row.response.lower() if c.fallback_lowercase_response else row.response


def apply_fallback(parts: Parts, rows: list[Row], nli_out: StageOutputs) -> None:
    """Step 6: the end-to-end NLI label of each row that has no valid question."""
    for r in rows:
        r.fallback_label = nli_out.take(fallback_pair(parts, r), r, "fallback NLI")


def discard_unanswerable(row: Row) -> None:
    """Q²*: questions with no answer in the knowledge move to the dropped ones when another one has an answer."""
    counted = counted_questions([q.knowledge_answer_kind == AnswerKind.NO_ANSWER.value for q in row.questions],
                                discard_unanswerable=True)
    row.dropped += [DroppedQuestion(q.candidate, q.question, "no_answer_in_knowledge", q.response_answer)
                    for q, keep in zip(row.questions, counted) if not keep]
    row.questions = [q for q, keep in zip(row.questions, counted) if keep]


# -- 7. aggregation -------------------------------------------------------------------------------------------------
def aggregate(r: Row) -> ResponseResult:
    """A row's result (:func:`~q2_plugins.scoring.response_result`), its explanations attached."""
    if r.error is not None:
        return ResponseResult(index=r.index, status=ResponseStatus.ERROR, num_candidates=len(r.candidates),
                              error=r.error, warning="; ".join(r.warnings) or None)
    label = r.fallback_label
    res = response_result(r.index, r.questions, fallback_score=None if label is None else NLI_SCORES[label],
                          fallback_label=None if label is None else label.value, num_candidates=len(r.candidates))
    res.candidates, res.questions, res.dropped = list(r.candidates), list(r.questions), list(r.dropped)
    if r.resolution is not None:
        res.coref = {"original_response": r.original_response, **r.resolution.to_dict()}
    res.warning = "; ".join(r.warnings) or None
    return res


# -- 8. BEGIN-style labels (asked with label=True) --------------------------------------------------------------------
def stage_version(stage: str) -> str:
    """The version of a stage that no setting changes but whose definition may (the labels' text signals), for its
    cache key; "" for the others."""
    if stage != "signals":
        return ""
    from .taxonomy import SIGNALS_VERSION

    return SIGNALS_VERSION


def text_signals(run: StageRunner, signals: SpacyTextSignals, rows: list[Row]) -> None:
    """The text signals of each row's response and knowledge (:mod:`q2_plugins.taxonomy`), from ``signals``."""
    from .taxonomy import TextSignals

    out = run.run("signals", [(r.response, r.knowledge) for r in rows],
                  lambda part: signals.compute([tuple(p) for p in part]),
                  encode=TextSignals.to_dict, decode=TextSignals.from_dict)
    for r in rows:
        r.signals = out.get((r.response, r.knowledge))


def label(rows: Sequence[Row], results: Sequence[ResponseResult]) -> None:
    """Attach the BEGIN-style label of each response from its result and its row's text signals (it reads the
    explanations, so they are still attached)."""
    from .taxonomy import classify

    for r, res in zip(rows, results):
        if isinstance(r.signals, Failure):
            res.label_reason = f"not labelled: text signals failed: {r.signals.message}"
        else:
            verdict = classify(res, r.signals)
            res.label, res.label3, res.label_reason = verdict.label, verdict.label3, verdict.reason
