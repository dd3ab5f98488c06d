"""``Q2Scorer``: the Q² pipeline over lists of responses. It loads the components once, names them in the
signature, and runs the steps of :mod:`q2_plugins.stages`, each batched across the whole call."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from . import __version__
from . import stages as st
from .budgets import budget_id, check_candidates, check_lengths
from .cache import Q2Cache
from .components import (
    CandidateExtractor,
    Coreference,
    NLIModel,
    PersonalQuestionFilter,
    QuestionAnswerer,
    QuestionGenerator,
)
from .config import MODEL_KINDS, Q2Config
from .progress import Progress
from .results import Q2Result, ResponseResult
from .signature import Signature, model_id, short_model_id, spacy_id

__all__ = ["Q2Scorer", "score"]


# which component serves each stage (spaCy stages are cached too: re-scoring should not even parse again)
_STAGE_ROLE = {"candidates": "cand", "personal": "personal", "qg": "qg", "qa": "qa", "nli": "nli",
               "signals": "signals", "coref": "coref"}


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
        coreference: Optional[Coreference] = None,
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
        self._signals: Any = None
        self._coref = coreference
        self._custom = {
            "cand": candidate_extractor, "qg": question_generator, "qa": question_answerer, "nli": nli,
            "personal": personal_filter, "signals": None, "coref": coreference,
        }
        if cache is None and config.cache_dir:
            cache = Q2Cache(config.cache_dir)
        self.cache = cache
        self.timings: dict[str, float] = {}
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
    def text_signals(self) -> Any:
        """The text signals of the BEGIN-style labels (:mod:`q2_plugins.taxonomy`), from the spaCy pipeline."""
        if self._signals is None:
            from .taxonomy import SpacyTextSignals

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
        """The wrapper's fast-path settings: ``search`` of QG, ``pack_windows`` of QA and NLI."""
        c = self.config
        return {"search": c.qg_search} if role == "qg" else {"pack_windows": c.pack_windows}

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

    @property
    def coreference(self) -> Coreference:
        """The coreference of ``--coref`` (:mod:`q2_plugins.coref`), loaded on first use."""
        if self._coref is None:
            from .coref import FCoref, load_fcoref

            c = self.config
            tok, model = load_fcoref(c.coref_model, c.coref_revision, c.device)
            if self._part_ids.get("coref", "").startswith("hub:"):  # loading can fill the Hugging Face cache
                self._part_ids.pop("coref")
                self._signature = None
            self._coref = FCoref(tok, model, batch_size=1 if c.per_item else c.batch_size,
                                 sort_by_length=not c.per_item)
        return self._coref

    def load(self, *, quiet: bool = False) -> "Q2Scorer":
        """Load every component this configuration needs now; a model that cannot load raises
        :class:`~q2_plugins.errors.ModelLoadError` here, once. ``score()`` calls it before its first stage.
        ``quiet`` silences the model library's per-file loading bars while it runs."""
        if quiet:
            from transformers.utils import logging as hf_logging

            was_on = hf_logging.is_progress_bar_enabled()
            hf_logging.disable_progress_bar()
            try:
                return self.load()
            finally:
                if was_on:
                    hf_logging.enable_progress_bar()
        c = self.config
        needed = ["coreference"] * c.coref + ["candidate_extractor", "question_generator", "question_answerer"]
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
        if role == "coref":
            from .coref import COREF_IMPL

            return f"{COREF_IMPL}:{model_id(c.coref_model, c.coref_revision)}[float32]"
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
            from .taxonomy import SIGNALS_VERSION

            return SIGNALS_VERSION
        if role == "coref":
            return "pronouns-to-mention"
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
            if c.coref:
                parts.append(("coref", self._part_id("coref")))
                parts.append(("coref-dec", self._stage_settings("coref")))
            parts.append(("budget", budget_id(c)))  # the per-row budgets: a row over one is not scored as is
            short = [("q2", __version__), ("qg", short_model_id(self._part_id("qg"))),
                     ("qa", short_model_id(self._part_id("qa")))]
            if c.use_nli or c.fallback:
                short.append(("nli", short_model_id(self._part_id("nli"))))
            short += [("cmp", "f1+nli" if c.use_nli else "f1"), ("fb", self._fallback_id()),
                      *([("coref", short_model_id(self._part_id("coref").split(":", 1)[-1]))] if c.coref else []),
                      ("cfg", "paper" if c.score_settings() == Q2Config().score_settings() else "custom")]
            self._signature = Signature(parts, short)
        return self._signature

    def _namespace(self, stage: str) -> str:
        """The cache namespace of a stage: its component's identity and settings."""
        role = _STAGE_ROLE[stage]
        return f"{stage}|{self._part_id(role)}|{self._stage_settings(role)}"

    # -- the pipeline ---------------------------------------------------------------------------------------------
    def score(
        self,
        *,
        responses: Sequence[Any],
        knowledge: Sequence[Any],
        history: Optional[Sequence[Any]] = None,
        explain: bool = False,
        progress: Union[bool, Progress] = False,
        label: bool = False,
    ) -> Q2Result:
        """Score ``responses[i]`` against ``knowledge[i]``; the steps are those of :mod:`q2_plugins.stages`.

        Each knowledge item is a string or a list of strings (joined by spaces). ``history`` (the dialogue before
        each response) is read only with ``coref`` (the paper's appendix A step, :mod:`q2_plugins.coref`).
        Bad rows get ``status="error"`` and a message; they never stop the other rows. ``label`` adds the
        BEGIN-style label of each response (:mod:`q2_plugins.taxonomy`). ``progress``: True for a bar per stage of
        this call, or a :class:`~q2_plugins.progress.Progress` to keep one set of bars (rows with an ETA, and
        stages) over the several calls of a run.
        """
        _check_inputs(responses, knowledge, history)
        _check_progress(progress)
        c = self.config
        rows = st.read_rows(responses, knowledge, history if c.coref else None)
        check_lengths(c, rows)                                                            # 0. budgets, up front
        run = st.StageRunner(c, self.cache, self._namespace, progress)
        run.rows = rows
        if any(r.error is None for r in rows):
            self.load()
        try:
            active = st.usable(rows)
            if c.coref:  # the paper's appendix A: pronouns resolved over the history
                active = st.resolve_coreference(run, self, active)
            active = st.extract_candidates(run, self, active)                             # 1. answer candidates
            check_candidates(c, active)
            active = st.usable(active)
            slots = st.generate_questions(run, self, active)                              # 2. question generation
            valid = st.select_questions(run, c, self, slots)                              # 3. filters
            compared = st.answer_from_knowledge(run, c, self, valid)                      # 4. QA on the knowledge
            fallback_rows = st.needing_fallback(c, active, compared)
            nli_out = st.run_nli(run, self, st.nli_pairs(c, compared)                     # 5 and 6: one NLI call
                                 + [st.fallback_pair(c, r) for r in fallback_rows])
            st.compare_answers(c, compared, nli_out)                                      # 5. answer comparison
            if c.discard_unanswerable:  # Q²*
                for r in active:
                    st.discard_unanswerable(r)
            st.apply_fallback(c, fallback_rows, nli_out)                                  # 6. fallback
            results = [st.aggregate(r) for r in rows]                                     # 7. aggregation
            if label:
                self._label(run, rows, results)
            run.rows_done(len(rows))
        finally:
            run.close()
            self.timings = run.timings
        if not explain:
            for res in results:
                res.candidates = res.questions = res.dropped = res.coref = None
        return Q2Result(results, self.signature)

    def label(self, result: Q2Result, *, responses: Sequence[Any], knowledge: Sequence[Any]) -> Q2Result:
        """Label a result afterwards with the BEGIN-style labels, given the inputs it was scored from: the labels
        ``score(..., label=True)`` gives, when the result has its explanations (without them the rules that read the
        questions are skipped). Labels ``result`` in place and returns it."""
        _check_inputs(responses, knowledge, None)
        if len(responses) != len(result.responses):
            raise ValueError(f"Expected the {len(result.responses)} responses the result was scored from, "
                             f"but got {len(responses)}")
        run = st.StageRunner(self.config, self.cache, self._namespace)
        rows = st.read_rows(responses, knowledge)
        check_lengths(self.config, rows)
        self._label(run, rows, result.responses)
        return result

    def _label(self, run: st.StageRunner, rows: list[st.Row], results: list[ResponseResult]) -> None:
        """Attach the BEGIN-style label of each response (it reads the explanations, so they are still attached)."""
        from .taxonomy import TextSignals, classify

        labelled = [r for r in rows if r.error is None]
        signals = run.run("signals", [(r.response, r.knowledge) for r in labelled],
                          lambda part: self.text_signals.compute([tuple(p) for p in part]),
                          encode=TextSignals.to_dict, decode=TextSignals.from_dict)
        for r, res in zip(rows, results):
            found = signals.get((r.response, r.knowledge))
            if isinstance(found, st.Failure):
                res.label_reason = f"not labelled: text signals failed: {found.message}"
            else:
                verdict = classify(res, found)
                res.label, res.label3, res.label_reason = verdict.label, verdict.label3, verdict.reason


def _check_inputs(responses: Any, knowledge: Any, history: Any) -> None:
    """The arguments of ``score()`` are lists of one length (their cells are checked row by row)."""
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


def _check_progress(progress: Any) -> None:
    if not isinstance(progress, (bool, Progress)):
        raise TypeError(f"Expected progress to be True, False or a q2_plugins.progress.Progress, "
                        f"but got {type(progress).__name__}")
    if isinstance(progress, Progress) and progress.closed:
        raise ValueError("This Progress is closed; make a new one for another run")


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
