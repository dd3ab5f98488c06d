"""``Q2Scorer``: the Q² pipeline over lists of responses, every stage batched across the whole call."""

from __future__ import annotations

import time
import unicodedata
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable, Optional, Sequence

from . import __version__
from .cache import Q2Cache
from .components import (
    Answer,
    AnswerKind,
    CandidateExtractor,
    NLILabel,
    NLIModel,
    PersonalQuestionFilter,
    QuestionAnswerer,
    QuestionGenerator,
)
from .config import MODEL_KINDS, Q2Config
from .errors import ModelLoadError
from .normalize import answers_match
from .results import DroppedQuestion, Q2Result, QuestionResult, ResponseResult, ResponseStatus
from .scoring import (
    NLI_SCORES,
    answer_f1,
    counted_questions,
    mean_score,
    needs_nli,
    nli_premise_hypothesis,
    question_score,
)
from .signature import Signature, model_id, short_model_id, spacy_id
from .taxonomy import SIGNALS_VERSION, SpacyTextSignals, TextSignals, classify

__all__ = ["Q2Scorer", "score"]


# which component serves each stage (spaCy stages are cached too: re-scoring should not even parse again)
_STAGE_ROLE = {"candidates": "cand", "personal": "personal", "qg": "qg", "qa": "qa", "nli": "nli",
               "signals": "signals"}


def _describe(e: BaseException) -> str:
    """``Type: message`` on one line, whatever the exception's text holds."""
    try:
        text = str(e)
    except BaseException:  # noqa: BLE001 - a __str__ that itself fails
        text = repr(e)
    return f"{type(e).__name__}: {' '.join(text.split())}"


class _Failure:
    """An item a stage could not process; carries the message for the rows that need it."""

    __slots__ = ("message",)

    def __init__(self, message: str) -> None:
        self.message = message


@dataclass
class _Row:
    index: int
    response: str = ""
    knowledge: str = ""
    error: Optional[str] = None
    candidates: list[str] = field(default_factory=list)
    questions: list[QuestionResult] = field(default_factory=list)
    dropped: list[DroppedQuestion] = field(default_factory=list)
    fallback_label: Optional[NLILabel] = None


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
    for i, c in enumerate(value):
        if "\ud800" <= c <= "\udfff":
            return None, f"{what} is not valid Unicode: a lone surrogate {c!r} at character {i}"
    return value, None


class Q2Scorer:
    """Scores responses against knowledge with Q².

    Models load lazily on first use, once per scorer. Any component can be replaced by an object implementing the
    matching protocol in :mod:`q2_plugins.components` (its ``signature`` attribute, if any, names it in the
    signature).

    >>> scorer = Q2Scorer(Q2Config(use_nli=False))            # doctest: +SKIP
    >>> result = scorer.score(responses=["..."], knowledge=["..."], explain=True)  # doctest: +SKIP
    """

    def __init__(
        self,
        config: Optional[Q2Config] = None,
        *,
        candidate_extractor: Optional[CandidateExtractor] = None,
        question_generator: Optional[QuestionGenerator] = None,
        question_answerer: Optional[QuestionAnswerer] = None,
        nli: Optional[NLIModel] = None,
        personal_filter: Optional[PersonalQuestionFilter] = None,
        cache: Optional[Q2Cache] = None,
    ) -> None:
        if config is None:
            config = Q2Config()
        if not isinstance(config, Q2Config):
            raise TypeError(f"Expected a Q2Config, but got {type(config).__name__}")
        self.config = config
        self._candidates = candidate_extractor
        self._qg = question_generator
        self._qa = question_answerer
        self._nli = nli
        self._personal = personal_filter
        self._signals: Optional[SpacyTextSignals] = None
        self._custom = {
            "cand": candidate_extractor, "qg": question_generator, "qa": question_answerer, "nli": nli,
            "personal": personal_filter, "signals": None,
        }
        if cache is None and config.cache_dir:
            cache = Q2Cache(config.cache_dir)
        self.cache = cache
        self.timings: dict[str, float] = {}
        self._memo: dict[str, dict[Hashable, Any]] = {}  # stage -> input -> output, within one score() call
        self._signature: Optional[Signature] = None
        self._part_ids: dict[str, str] = {}

    # -- components (lazy) ------------------------------------------------------------------------------------
    def _nlp(self) -> Any:
        from .spacy_parts import load_spacy

        return load_spacy(self.config.spacy_model)

    @property
    def candidate_extractor(self) -> CandidateExtractor:
        if self._candidates is None:
            from .spacy_parts import SpacyCandidateExtractor

            self._candidates = SpacyCandidateExtractor(self._nlp())
        return self._candidates

    @property
    def personal_filter(self) -> PersonalQuestionFilter:
        if self._personal is None:
            from .spacy_parts import SpacyPersonalFilter

            self._personal = SpacyPersonalFilter(self._nlp())
        return self._personal

    @property
    def text_signals(self) -> SpacyTextSignals:
        """The text signals of the BEGIN-style labels (:mod:`q2_plugins.taxonomy`), from the spaCy pipeline."""
        if self._signals is None:
            self._signals = SpacyTextSignals(self._nlp())
        return self._signals

    def _load(self, role: str) -> tuple[Any, Any]:
        from .hf import load_model

        c = self.config
        loaded = load_model(role, getattr(c, f"{role}_model"), getattr(c, f"{role}_revision"), c.role_device(role),
                            c.role_dtype(role), MODEL_KINDS[role], c.cpu_kernels)
        if self._part_ids.get(role, "").startswith("hub:"):  # loading can fill the Hugging Face cache: resolve again
            self._part_ids.pop(role)
            self._signature = None
        return loaded

    def _batching(self, role: str) -> dict[str, Any]:
        """The batching keyword arguments of a model wrapper of ``role``."""
        rt = self.config.role_runtime(role)
        return {"batch_size": rt.batch_size, "batch_tokens": rt.batch_tokens, "sort_by_length": rt.sort_by_length}

    def _fast_paths(self, role: str) -> dict[str, Any]:
        """The wrapper's fast-path settings (``search`` of QG, ``pack_windows`` of QA and NLI); a setting at its
        default is left to the wrapper's own default."""
        c = self.config
        if role == "qg":
            return {} if c.qg_search == "own" else {"search": c.qg_search}
        return {} if c.pack_windows else {"pack_windows": False}

    @property
    def question_generator(self) -> QuestionGenerator:
        if self._qg is None:
            from .hf import HFQuestionGenerator

            c = self.config
            tok, model = self._load("qg")
            self._qg = HFQuestionGenerator(
                tok, model, decoding=c.qg_decoding, num_beams=c.qg_num_beams, num_return=c.qg_num_return,
                no_repeat_ngram=c.qg_no_repeat_ngram, max_length=c.qg_max_length,
                max_input_tokens=c.qg_max_input_tokens, input_template=c.qg_input_template,
                **self._batching("qg"), **self._fast_paths("qg"),
            )
        return self._qg

    @property
    def question_answerer(self) -> QuestionAnswerer:
        if self._qa is None:
            from .hf import HFQuestionAnswerer

            c = self.config
            tok, model = self._load("qa")
            self._qa = HFQuestionAnswerer(
                tok, model, decoding=c.qa_decoding, max_length=c.qa_max_length, stride=c.qa_stride,
                max_answer_tokens=c.qa_max_answer_tokens, **self._batching("qa"), **self._fast_paths("qa"),
            )
        return self._qa

    @property
    def nli(self) -> NLIModel:
        if self._nli is None:
            from .hf import HFNLI

            c = self.config
            tok, model = self._load("nli")
            self._nli = HFNLI(tok, model, max_length=c.nli_max_length, stride=c.nli_stride, model_name=c.nli_model,
                              **self._batching("nli"), **self._fast_paths("nli"))
        return self._nli

    def load(self) -> "Q2Scorer":
        """Load every component this configuration needs now; a model that cannot load raises
        :class:`~q2_plugins.errors.ModelLoadError` here, once. ``score()`` calls it before its first stage."""
        c = self.config
        needed = ["candidate_extractor", "question_generator", "question_answerer", "text_signals"]
        needed += ["personal_filter"] * c.remove_personal + ["nli"] * (c.use_nli or c.fallback)
        for name in needed:
            getattr(self, name)
        return self

    # -- signature ----------------------------------------------------------------------------------------------
    def _part_id(self, role: str) -> str:
        if role not in self._part_ids:
            self._part_ids[role] = self._compute_part_id(role)
        return self._part_ids[role]

    def _compute_part_id(self, role: str) -> str:
        custom = self._custom[role]
        if custom is not None:
            return str(getattr(custom, "signature", f"custom:{type(custom).__name__}"))
        if role in ("cand", "personal", "signals"):
            return spacy_id(self._nlp())
        c = self.config
        return f"{model_id(getattr(c, f'{role}_model'), getattr(c, f'{role}_revision'))}[{c.role_dtype(role)}]"

    def _stage_settings(self, role: str) -> str:
        c = self.config
        if role == "qg":
            dec = (f"beam{c.qg_num_beams}-ret{c.qg_num_return}-nrng{c.qg_no_repeat_ngram}"
                   if c.qg_decoding == "beam" else "greedy")
            return f"{dec}-max{c.qg_max_length}-in{c.qg_max_input_tokens}-tpl:{c.qg_input_template!r}"
        if role == "qa":
            extra = f"-maxans{c.qa_max_answer_tokens}" if c.qa_decoding == "squad2" else ""
            return f"{c.qa_decoding}-win{c.qa_max_length}-stride{c.qa_stride}{extra}"
        if role == "nli":
            return f"win{c.nli_max_length}-stride{c.nli_stride}"
        if role == "signals":
            return SIGNALS_VERSION
        return ""

    def _fallback_id(self) -> str:
        c = self.config
        if not c.fallback:
            return "none"
        return ("e2e-nli" + ("-lowerknow" if c.fallback_lowercase_knowledge else "")
                + ("-lowerresp" if c.fallback_lowercase_response else ""))

    @property
    def signature(self) -> Signature:
        """Reproducibility signature: models with revisions, decoding, filters, normalisation, package version.

        A string (the full form) with a sacrebleu-style ``.short`` form; see :mod:`q2_plugins.signature`.
        """
        if self._signature is None:
            c = self.config
            parts = [
                ("q2", __version__),
                ("cand", self._part_id("cand")),
                ("qg", self._part_id("qg")),
                ("qg-dec", self._stage_settings("qg")),
                ("questions", c.question_mode + ("+discard-unanswerable" if c.discard_unanswerable else "")),
                ("qa", self._part_id("qa")),
                ("qa-dec", self._stage_settings("qa")),
                ("personal", ("remove:" + self._part_id("personal")) if c.remove_personal else "keep"),
                ("norm", c.normalization),
                ("cmp", "f1+nli" if c.use_nli else "f1"),
                ("fallback", self._fallback_id()),
            ]
            if c.use_nli or c.fallback:
                parts.append(("nli", self._part_id("nli")))
                parts.append(("nli-dec", self._stage_settings("nli")))
            short = [("q2", __version__), ("qg", short_model_id(self._part_id("qg"))),
                     ("qa", short_model_id(self._part_id("qa")))]
            if c.use_nli or c.fallback:
                short.append(("nli", short_model_id(self._part_id("nli"))))
            short += [("cmp", "f1+nli" if c.use_nli else "f1"), ("fb", self._fallback_id()),
                      ("cfg", "paper" if c.score_settings() == Q2Config().score_settings() else "custom")]
            self._signature = Signature(parts, short)
        return self._signature

    # -- stage runner: dedupe, cache, batch, isolate failures --------------------------------------------------
    def _run_stage(
        self,
        name: str,
        items: Sequence[Hashable],
        fn: Callable[[list], list],
        encode: Callable[[Any], Any] = lambda x: x,
        decode: Callable[[Any], Any] = lambda x: x,
        progress: bool = False,
        check: Optional[Callable[[list], list]] = None,
    ) -> dict[Hashable, Any]:
        """Run ``fn`` over the unique ``items``; returns item -> output or :class:`_Failure`.

        ``check`` (a component's ``unfit``) names the items that cannot be processed; they fail before batching,
        so they never cost their batch a one-by-one retry."""
        t0 = time.perf_counter()
        unique = list(dict.fromkeys(items))
        # outputs (and failures) computed earlier in this score() call: a question asked again in a later round, say
        memo = self._memo.setdefault(name, {})
        results: dict[Hashable, Any] = {it: memo[it] for it in unique if it in memo}
        namespace = None
        if self.cache is not None and len(results) < len(unique):
            role = _STAGE_ROLE[name]
            namespace = f"{name}|{self._part_id(role)}|{self._stage_settings(role)}"
            asked = [it for it in unique if it not in results]
            try:
                cached = self.cache.get_many(namespace, [list(it) for it in asked])  # type: ignore[arg-type]
            except Exception:  # noqa: BLE001 - an unreadable cache entry is a miss; the item is computed
                cached = [None] * len(asked)
            for it, val in zip(asked, cached):
                if val is not None:
                    results[it] = decode(val)
        todo = [it for it in unique if it not in results]
        if todo and check is not None:
            for it, reason in zip(todo, self._call_isolated(check, todo)):
                if isinstance(reason, (str, _Failure)):
                    results[it] = reason if isinstance(reason, _Failure) else _Failure(reason)
            todo = [it for it in todo if it not in results]
        if todo:
            chunk = max(1, self.config.role_batch_size(name) if name in ("qg", "qa", "nli") else 64) * 8
            bar = None
            if progress:
                from tqdm.auto import tqdm

                bar = tqdm(total=len(todo), desc=f"q2 {name}", unit="item", leave=False)
            for start in range(0, len(todo), chunk):
                part = todo[start : start + chunk]
                outputs = self._call_isolated(fn, part)
                done = []
                for it, out in zip(part, outputs):
                    results[it] = out
                    if not isinstance(out, _Failure):
                        done.append((list(it), encode(out)))  # type: ignore[arg-type]
                if namespace is not None and done:
                    try:
                        self.cache.put_many(namespace, done)  # type: ignore[union-attr]
                    except Exception:  # noqa: BLE001 - not cached; the results themselves are kept
                        pass
                if bar is not None:
                    bar.update(len(part))
            if bar is not None:
                bar.close()
        memo.update(results)
        self.timings[name] = self.timings.get(name, 0.0) + time.perf_counter() - t0
        return results

    @staticmethod
    def _call_isolated(fn: Callable[[list], list], part: list) -> list:
        """``fn(part)``; whatever it raises (a Rust panic from a tokenizer included) fails only the items that
        cause it: a failed batch is retried one item at a time. A model that cannot load is no item's fault: its
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
                return [_Failure(_describe(e))]
        # one bad item must not fail the others: retry one by one
        return [Q2Scorer._call_isolated(fn, [it])[0] for it in part]

    # -- the pipeline ---------------------------------------------------------------------------------------------
    def score(
        self,
        *,
        responses: Sequence[Any],
        knowledge: Sequence[Any],
        history: Optional[Sequence[Any]] = None,
        explain: bool = False,
        progress: bool = False,
    ) -> Q2Result:
        """Score ``responses[i]`` against ``knowledge[i]``.

        Each knowledge item is a string or a list of strings (joined by spaces). ``history`` (the dialogue before
        each response) is checked and accepted for interface compatibility; Q² as published does not read it.
        Bad rows get ``status="error"`` and a message; they never stop the other rows.
        """
        for name, value in (("responses", responses), ("knowledge", knowledge), ("history", history)):
            if value is None and name == "history":
                continue
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
                raise TypeError(f"Expected {name} to be a list, but got {type(value).__name__}")
        if len(responses) != len(knowledge):
            raise ValueError(f"Expected as many knowledge items as responses, but got {len(knowledge)} "
                             f"knowledge for {len(responses)} responses")
        if history is not None and len(history) != len(responses):
            raise ValueError(f"Expected one history per response, but got {len(history)} for {len(responses)}")
        self.timings = {}
        self._memo = {}
        c = self.config
        rows: list[_Row] = []
        for i, (resp, know) in enumerate(zip(responses, knowledge)):
            r_text, r_err = _as_text(resp, "response")
            k_text, k_err = _as_text(know, "knowledge")
            rows.append(_Row(i, r_text or "", k_text or "", r_err or k_err))
        active = [r for r in rows if r.error is None]
        if active:
            self.load()

        # 1. answer candidates
        cand_out = self._run_stage("candidates", [(r.response,) for r in active],
                                   lambda part: self.candidate_extractor.extract([p[0] for p in part]),
                                   progress=progress)
        for r in active:
            out = cand_out[(r.response,)]
            if isinstance(out, _Failure):
                r.error = f"candidate extraction failed: {out.message}"
            else:
                r.candidates = list(out)
        active = [r for r in active if r.error is None]

        # 2. question generation, one call over every candidate of every response
        qg_out = self._run_stage("qg", [(cand, r.response) for r in active for cand in r.candidates],
                                 lambda part: self.question_generator.generate([tuple(p) for p in part]),
                                 progress=progress, check=lambda part: self._unfit(self.question_generator, part))
        slots: list[tuple[_Row, str, list[str]]] = []  # (row, candidate, ranked questions)
        for r in active:
            for cand in r.candidates:
                out = qg_out[(cand, r.response)]
                if isinstance(out, _Failure):
                    r.error = f"question generation failed: {out.message}"
                    break
                slots.append((r, cand, list(out)))
        slots = [s for s in slots if s[0].error is None]

        # 3. personal-question filter
        personal: dict[Hashable, Any] = {}
        if c.remove_personal:
            personal = self._run_stage("personal", [(q,) for _, _, qs in slots for q in qs],
                                       lambda part: self.personal_filter.is_personal([p[0] for p in part]),
                                       progress=progress)

        # 4. the response's own answer: rounds over beam ranks ("single") or all questions at once ("all").
        # Step 5 (the knowledge's answer) of the questions found valid in a round rides in the next round's batch.
        pointer = [0] * len(slots)
        valid: list[tuple[int, int, str, str]] = []  # (slot index, beam rank, question, response answer text)
        pending = set(range(len(slots)))
        while pending:
            batch: list[tuple[int, int, str]] = []
            for s in sorted(pending):
                row, cand, qs = slots[s]
                if row.error is not None:
                    pending.discard(s)
                    continue
                take = len(qs) if c.question_mode == "all" else 1
                while pointer[s] < len(qs) and take > 0:
                    q = qs[pointer[s]]
                    pointer[s] += 1
                    flag = personal.get((q,), False)
                    if isinstance(flag, _Failure):
                        row.error = f"personal-question filter failed: {flag.message}"
                        break
                    if flag:
                        row.dropped.append(DroppedQuestion(cand, q, "personal"))
                        continue
                    batch.append((s, pointer[s] - 1, q))
                    take -= 1
                if pointer[s] >= len(qs) or c.question_mode == "all":
                    pending.discard(s)
            if not batch:
                break
            # (those answered in an earlier round come from the call's memo)
            k_items = [(q, slots[s][0].knowledge) for s, _, q, _ in valid if slots[s][0].error is None]
            qa_out = self._run_stage("qa", [(q, slots[s][0].response) for s, _, q in batch] + k_items,
                                     lambda part: self.question_answerer.answer([tuple(p) for p in part]),
                                     encode=Answer.to_dict, decode=Answer.from_dict, progress=progress,
                                     check=lambda part: self._unfit(self.question_answerer, part))
            for s, rank, q in batch:
                row, cand, _ = slots[s]
                ans = qa_out[(q, row.response)]
                if isinstance(ans, _Failure):
                    row.error = f"question answering on the response failed: {ans.message}"
                elif not ans.has_answer:
                    row.dropped.append(DroppedQuestion(cand, q, "no_answer_in_response"))
                elif not answers_match(cand, ans.text, c.normalization):
                    row.dropped.append(DroppedQuestion(cand, q, "answer_mismatch", ans.text))
                else:
                    valid.append((s, rank, q, ans.text))
                    if c.question_mode == "single":
                        pending.discard(s)
        valid.sort(key=lambda v: (v[0], v[1]))  # candidate order, then beam rank, as the original lists them
        valid = [v for v in valid if slots[v[0]][0].error is None]

        # 5. answer every valid question from the knowledge (only the last round's are not in the memo yet)
        kqa_out = self._run_stage("qa", [(q, slots[s][0].knowledge) for s, _, q, _ in valid],
                                  lambda part: self.question_answerer.answer([tuple(p) for p in part]),
                                  encode=Answer.to_dict, decode=Answer.from_dict, progress=progress,
                                  check=lambda part: self._unfit(self.question_answerer, part))

        # 6. compare answers: F1, upgraded by NLI
        compared: list[tuple[int, str, str, Answer, float]] = []
        for s, _, q, resp_ans in valid:
            row, cand, _ = slots[s]
            k_ans = kqa_out[(q, row.knowledge)]
            if isinstance(k_ans, _Failure):
                row.error = f"question answering on the knowledge failed: {k_ans.message}"
                continue
            compared.append((s, q, resp_ans, k_ans, answer_f1(cand, k_ans, c.normalization)))
        nli_pairs = []
        if c.use_nli:
            nli_pairs = [nli_premise_hypothesis(q, slots[s][1], k) for s, q, _, k, f1 in compared if needs_nli(k, f1)]
        # 7 (inputs). Responses without a valid question get end-to-end NLI: every compared answer ends as a question
        # or an error of its row, so these are known now, and both kinds of NLI pair go in one batched call.
        compared_rows = {slots[s][0].index for s, *_ in compared}
        need_fallback = ([r for r in active if r.error is None and r.index not in compared_rows]
                         if c.fallback else [])
        fb_pairs = [self._fallback_pair(r) for r in need_fallback]
        nli_out = self._run_stage("nli", nli_pairs + fb_pairs,
                                  lambda part: self.nli.predict([tuple(p) for p in part]),
                                  encode=lambda x: x.value, decode=NLILabel, progress=progress,
                                  check=lambda part: self._unfit(self.nli, part))
        for s, q, resp_ans, k_ans, f1 in compared:
            row, cand, _ = slots[s]
            label = None
            if c.use_nli and needs_nli(k_ans, f1):
                out = nli_out[nli_premise_hypothesis(q, cand, k_ans)]
                if isinstance(out, _Failure):
                    row.error = f"NLI on answers failed: {out.message}"
                    continue
                label = out
            row.questions.append(QuestionResult(
                candidate=cand, question=q, response_answer=resp_ans, knowledge_answer=k_ans.text,
                knowledge_answer_kind=k_ans.kind.value, f1=f1, nli_label=label.value if label else None,
                score=question_score(f1, label),
            ))

        if c.discard_unanswerable:  # Q²*
            for r in active:
                self._discard_unanswerable(r)

        # 7. end-to-end NLI fallback for responses without a valid question
        for r, pair in zip(need_fallback, fb_pairs):
            out = nli_out[pair]
            if isinstance(out, _Failure):
                r.error = f"fallback NLI failed: {out.message}"
            else:
                r.fallback_label = out

        # 8. text signals of the BEGIN-style label (q2_plugins.taxonomy)
        labelled = [r for r in rows if r.error is None]
        signals = self._run_stage("signals", [(r.response, r.knowledge) for r in labelled],
                                  lambda part: self.text_signals.compute([tuple(p) for p in part]),
                                  encode=TextSignals.to_dict, decode=TextSignals.from_dict, progress=progress)
        return Q2Result([self._assemble(r, explain, signals.get((r.response, r.knowledge))) for r in rows],
                        self.signature)

    @staticmethod
    def _unfit(component: Any, part: list) -> list[Optional[str]]:
        """The component's ``unfit`` reasons for stage items (tuples); None for all if it has no such check."""
        unfit = getattr(component, "unfit", None)
        return [None] * len(part) if unfit is None else list(unfit([tuple(p) for p in part]))

    def _fallback_pair(self, row: _Row) -> tuple[str, str]:
        c = self.config
        premise = row.knowledge.lower() if c.fallback_lowercase_knowledge else row.knowledge
        return premise, row.response.lower() if c.fallback_lowercase_response else row.response

    @staticmethod
    def _discard_unanswerable(row: _Row) -> None:
        """Q²*: questions with no answer in the knowledge move to the dropped ones when another one has an answer."""
        counted = counted_questions([q.knowledge_answer_kind == AnswerKind.NO_ANSWER.value for q in row.questions],
                                    discard_unanswerable=True)
        row.dropped += [DroppedQuestion(q.candidate, q.question, "no_answer_in_knowledge", q.response_answer)
                        for q, keep in zip(row.questions, counted) if not keep]
        row.questions = [q for q, keep in zip(row.questions, counted) if keep]

    @staticmethod
    def _assemble(r: _Row, explain: bool, signals: Any = None) -> ResponseResult:
        res = ResponseResult(index=r.index, status=ResponseStatus.ERROR, num_candidates=len(r.candidates))
        if r.error is not None:
            res.error = r.error
        elif r.questions:
            res.status = ResponseStatus.SCORED
            res.score = mean_score([q.score for q in r.questions])
            res.score_no_nli = mean_score([q.f1 for q in r.questions])
            res.num_questions = len(r.questions)
        elif r.fallback_label is not None:
            res.status = ResponseStatus.FALLBACK
            res.used_fallback = True
            res.fallback_label = r.fallback_label.value
            res.score = res.score_no_nli = NLI_SCORES[r.fallback_label]
        else:
            res.status = ResponseStatus.NO_VALID_QUESTION
        if r.error is None:  # the label reads the explanations, so they are attached first and dropped after
            res.candidates = list(r.candidates)
            res.questions = list(r.questions)
            res.dropped = list(r.dropped)
        if isinstance(signals, _Failure):
            res.label_reason = f"not labelled: text signals failed: {signals.message}"
        else:
            verdict = classify(res, signals)
            res.label, res.label3, res.label_reason = verdict.label, verdict.label3, verdict.reason
        if not explain:
            res.candidates = res.questions = res.dropped = None
        return res


def score(
    *,
    responses: Sequence[Any],
    knowledge: Sequence[Any],
    history: Optional[Sequence[Any]] = None,
    explain: bool = False,
    config: Optional[Q2Config] = None,
    **options: Any,
) -> Q2Result:
    """One-shot scoring: builds a :class:`Q2Scorer` from ``config`` (or config options) and scores.

    Loads the models on every call; keep a ``Q2Scorer`` to score several times.
    """
    if config is not None and options:
        raise TypeError("Pass either config= or config options, not both")
    cfg = config if config is not None else Q2Config.from_dict(options)
    return Q2Scorer(cfg).score(responses=responses, knowledge=knowledge, history=history, explain=explain)
