"""The steps of Q², in the order of the README's "How Q² scores a response".

Each step is one function over :class:`~q2_plugins.metric.runner.Row` (one response) and the named types of the
selection: :class:`~q2_plugins.metric.runner.Slot` (a candidate and its ranked questions) and
:class:`~q2_plugins.metric.runner.ValidQuestion` (a question that passed the filters), run over its items by a
:class:`~q2_plugins.metric.runner.StageRunner`. The steps take :class:`~q2_plugins.metric.runner.Parts`, the
settings and the loaded components, and nothing else of the scorer; the labelling step takes the text-signals
component alone (it also labels results scored earlier).
"""

from __future__ import annotations

import unicodedata
from typing import TYPE_CHECKING, Any, Optional, Sequence

from q2_plugins.metric.budgets import admit_question
from q2_plugins.metric.components import (
    Answer,
    AnswerKind,
    NLILabel,
    Resolution,
)
from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.contest import Contest, score_bounds
from q2_plugins.metric.normalize import answers_match
from q2_plugins.metric.results import DroppedQuestion, QuestionResult, ResponseResult, ResponseStatus
from q2_plugins.metric.runner import (
    ComparedQuestion,
    Failure,
    Parts,
    Row,
    Slot,
    StageOutputs,
    StageRunner,
    ValidQuestion,
    unfit_of,
)
from q2_plugins.metric.scoring import (
    NLI_SCORES,
    answer_f1,
    counted_questions,
    needs_nli,
    nli_premise_hypothesis,
    question_score,
    response_result,
)
from q2_plugins.metric.spans import candidate_offsets, mentions_from_json, mentions_to_json, response_spans

if TYPE_CHECKING:  # the taxonomy is imported only when labels are asked for
    from q2_plugins.metric.taxonomy import SpacyTextSignals

__all__ = ["check_cells", "resolve_coreference", "extract_candidates", "generate_questions", "select_questions",
           "answer_from_knowledge", "compare_tokens", "run_nli", "compare_answers", "apply_fallback",
           "discard_unanswerable", "aggregate", "text_signals", "label", "usable", "stage_version"]


# -- 0. the rows: every input cell checked, a bad one is its row's error ---------------------------------------------
# characters that carry no text: whitespace, control and format characters (zero-width, direction marks, BOM)
_BLANK_CATEGORIES = frozenset({"Cc", "Cf", "Zs", "Zl", "Zp"})


def _plain(value: str) -> str:
    """A plain ``str`` with the same characters (numpy strings and other ``str`` subclasses become ``str``)."""
    return value if type(value) is str else str.__getitem__(value, slice(None))


def _as_text(value: Any, what: str) -> tuple[Optional[str], Optional[str]]:
    """Return (text, error) for one input cell: a string, or a list of strings joined by spaces."""
    if isinstance(value, (list, tuple)):
        wrong = next((i for i, v in enumerate(value) if not isinstance(v, str)), None)
        if wrong is not None:
            return None, f"{what} item {wrong} must be a string, got {type(value[wrong]).__name__}"
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
                  lambda part: parts.candidates.extract([p[0] for p in part]), check=unfit_of(parts.candidates),
                  encode=mentions_to_json, decode=mentions_from_json)
    for r in rows:
        r.candidates = list(out.take((r.response,), r, "candidate extraction") or [])
        r.offsets = candidate_offsets(r.response, r.candidates,
                                      r.resolution.replacements if r.resolution is not None else ())
    return usable(rows)


# -- 2. question generation -----------------------------------------------------------------------------------------
def generate_questions(run: StageRunner, parts: Parts, rows: list[Row]) -> list[Slot]:
    """One call over every candidate of every row: a :class:`Slot` per candidate of the rows without error."""
    out = run.run("qg", [(cand, r.response) for r in rows for cand in r.candidates],
                  lambda part: parts.qg.generate([tuple(p) for p in part]), check=unfit_of(parts.qg))
    slots = []
    for r in rows:
        for cand, where in zip(r.candidates, r.offsets):
            questions = out.take((cand, r.response), r, "question generation")
            if questions is None:
                break
            slots.append(Slot(r, str(cand), list(questions), where=where))
    return [s for s in slots if s.row.error is None]


# -- 3. filters: personal questions, then the response's own answer, in rounds over beam ranks -----------------------
def select_questions(run: StageRunner, parts: Parts, slots: list[Slot],
                     contest: Optional[Contest] = None) -> list[ValidQuestion]:
    """The valid questions, in candidate order then beam rank. ``single`` mode tries one more rank per round until
    a candidate has a valid question; ``all`` tries every rank in one round. The knowledge answers of a round's
    valid questions (step 4) ride in the next round's QA batch. With a ``contest`` (ranking with early stop), they
    come in a second QA call of the same round instead, and the rows that cannot rank first stop before each
    round."""
    c = parts.settings
    valid: list[ValidQuestion] = []
    counts: dict[int, int] = {}  # valid questions per row (id), for the max_questions budget
    while True:
        stop_losers(run, parts, contest, slots, valid)
        ahead = [(v.question, v.row.knowledge) for v in valid if v.row.error is None and not v.row.stopped]
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
        if contest is not None:  # the round's knowledge answers at once: the next round's stops know them
            _answer(run, parts, [(v.question, v.row.knowledge) for v in valid if v.row.error is None])
    order = {id(s): i for i, s in enumerate(slots)}
    valid.sort(key=lambda v: (order[id(v.slot)], v.rank))  # candidate order, then beam rank, as the original
    return [v for v in valid if v.row.error is None and not v.row.stopped]


def stop_losers(run: StageRunner, parts: Parts, contest: Optional[Contest], slots: Sequence[Slot],
                valid: Sequence[ValidQuestion]) -> None:
    """With a ``contest``: stop the rows that can no longer rank first in their group, from the bounds of their
    scores (:func:`~q2_plugins.metric.contest.score_bounds`) given what this call has computed so far."""
    if contest is None:
        return
    slots_of: dict[int, list[Slot]] = {}
    valid_of: dict[int, list[ValidQuestion]] = {}
    for s in slots:
        slots_of.setdefault(id(s.row), []).append(s)
    for v in valid:
        valid_of.setdefault(id(v.row), []).append(v)

    def answer_of(v: ValidQuestion) -> Optional[Answer]:
        return run.known("qa", (v.question, v.row.knowledge))

    def label_of(v: ValidQuestion, answer: Answer) -> Optional[NLILabel]:
        return run.known("nli", nli_premise_hypothesis(v.question, v.slot.candidate, answer))

    def fallback_of(r: Row) -> Optional[NLILabel]:
        return run.known("nli", fallback_pair(parts, r)) if parts.settings.fallback else None

    _label_early(run, parts, contest.rows, slots_of, valid_of, answer_of)
    contest.prune(lambda r: score_bounds(parts.settings, r, slots_of.get(id(r), []), valid_of.get(id(r), []),
                                         answer_of, label_of, fallback_of(r)))


def _label_early(run: StageRunner, parts: Parts, rows: Sequence[Row], slots_of: dict[int, list[Slot]],
                 valid_of: dict[int, list[ValidQuestion]], answer_of: Any) -> None:
    """NLI, ahead of step 5, for what is known already of the rows in play: the valid questions whose knowledge
    answer NLI decides, and the fallback of rows with no valid question and none to come. The labels are those of
    the one NLI call later (which finds them in the memo); known now, they pin the rows' scores early."""
    c = parts.settings
    if parts.nli is None:
        return
    pairs = []
    for r in rows:
        if r.error is not None or r.stopped:
            continue
        for v in valid_of.get(id(r), []):
            answer = answer_of(v)
            if answer is not None and c.use_nli and needs_nli(answer, answer_f1(v.slot.candidate, answer,
                                                                                 c.normalization)):
                pairs.append(nli_premise_hypothesis(v.question, v.slot.candidate, answer))
        if c.fallback and id(r) not in valid_of and all(s.done for s in slots_of.get(id(r), [])):
            pairs.append(fallback_pair(parts, r))
    if pairs:
        run_nli(run, parts, pairs)


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
    if first and (s.done or s.row.error is not None or s.row.full or s.row.stopped):
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
            compared.append(compare_tokens(parts, v, k_ans))
    return compared


def compare_tokens(parts: Parts, valid: ValidQuestion, knowledge_answer: Answer) -> ComparedQuestion:
    """Step 5's token F1: the valid question with the knowledge's answer and its F1 against the candidate (replay
    builds its recorded answers' comparisons here too)."""
    return ComparedQuestion(valid, knowledge_answer,
                            answer_f1(valid.slot.candidate, knowledge_answer, parts.settings.normalization))


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
            start=None if v.slot.where is None else v.slot.where[0],
            end=None if v.slot.where is None else v.slot.where[1],
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
    return [r for r in rows if r.error is None and not r.stopped and id(r) not in with_questions]


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
    """A row's result (:func:`~q2_plugins.metric.scoring.response_result`), its explanations attached."""
    if r.stopped and r.error is None:
        return ResponseResult(index=r.index, status=ResponseStatus.STOPPED, num_candidates=len(r.candidates))
    if r.error is not None:
        return ResponseResult(index=r.index, status=ResponseStatus.ERROR, num_candidates=len(r.candidates),
                              error=r.error, warning="; ".join(r.warnings) or None)
    label = r.fallback_label
    res = response_result(r.index, r.questions, fallback_score=None if label is None else NLI_SCORES[label],
                          fallback_label=None if label is None else label.value, num_candidates=len(r.candidates))
    res.candidates, res.questions, res.dropped = [str(c) for c in r.candidates], list(r.questions), list(r.dropped)
    res.spans = response_spans(r.response if r.original_response is None else r.original_response, r.questions)
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
    from q2_plugins.metric.taxonomy import SIGNALS_VERSION  # (lazy: the taxonomy loads only when labels are asked for)

    return SIGNALS_VERSION


def text_signals(run: StageRunner, signals: SpacyTextSignals, rows: list[Row]) -> None:
    """The text signals of each row's response and knowledge (:mod:`q2_plugins.metric.taxonomy`), from ``signals``."""
    from q2_plugins.metric.taxonomy import TextSignals  # (lazy: the taxonomy loads only when labels are asked for)

    out = run.run("signals", [(r.response, r.knowledge) for r in rows],
                  lambda part: signals.compute([tuple(p) for p in part]),
                  encode=TextSignals.to_dict, decode=TextSignals.from_dict)
    for r in rows:
        r.signals = out.get((r.response, r.knowledge))


def label(rows: Sequence[Row], results: Sequence[ResponseResult]) -> None:
    """Attach the BEGIN-style label of each response from its result and its row's text signals (it reads the
    explanations, so they are still attached)."""
    from q2_plugins.metric.taxonomy import classify  # (lazy: the taxonomy loads only when labels are asked for)

    for r, res in zip(rows, results):
        if isinstance(r.signals, Failure):
            res.label_reason = f"not labelled: text signals failed: {r.signals.message}"
        else:
            verdict = classify(res, r.signals)
            res.label, res.label3, res.label_reason = verdict.label, verdict.label3, verdict.reason
