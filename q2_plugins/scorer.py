"""``Q2Scorer``: the Q² pipeline over lists of responses. It loads the components once, names them in the
signature, and runs the steps of :mod:`q2_plugins.metric.stages`, each batched across the whole call."""

from __future__ import annotations

from typing import Any, Iterator, Mapping, Optional, Sequence, Union

from q2_plugins import __version__, backends
from q2_plugins.backends.accel.device import check_devices
from q2_plugins.backends.loading import quiet_loading, random_weight_models
from q2_plugins.metric import names as M
from q2_plugins.metric import precision, spacy_worker
from q2_plugins.metric import stages as st
from q2_plugins.metric.budgets import check_candidates, check_lengths
from q2_plugins.metric.cache import Q2Cache
from q2_plugins.metric.components import (
    CandidateExtractor,
    Coreference,
    NLIModel,
    PersonalQuestionFilter,
    QuestionAnswerer,
    QuestionGenerator,
)
from q2_plugins.metric.config import STAGES, Q2Config
from q2_plugins.metric.contest import Contest
from q2_plugins.metric.progress import Progress
from q2_plugins.metric.results import Q2Result, ResponseResult
from q2_plugins.metric.runner import Parts, Row, StageRunner
from q2_plugins.metric.signature import Signature, scorer_signature, spacy_id, stage_key
from q2_plugins.metric.spacy_parts import SpacyCandidateExtractor, SpacyPersonalFilter, load_spacy

__all__ = ["Q2Scorer", "score"]


class Q2Scorer:
    """Scores responses against knowledge with Q².

    Models load lazily on first use, once per scorer, through the backend each model setting names
    (:mod:`q2_plugins.backends`: ``hf`` by default, ``SCHEME:...`` for another). Any component can also be replaced
    by an object implementing the matching protocol in :mod:`q2_plugins.metric.components` (its ``signature`` attribute,
    if any, names it in the signature); a backend reaches every front end, an object only this scorer.

    >>> scorer = Q2Scorer(Q2Config(use_nli=False))            # doctest: +SKIP
    >>> result = scorer.score(responses=["..."], knowledge=["..."], explain=True)  # doctest: +SKIP
    """

    #: torchmetrics-style metadata, from the one declaration (:data:`q2_plugins.metric.names.METRIC_INFO`)
    higher_is_better: bool = bool(M.METRIC_INFO.higher_is_better)
    plot_lower_bound: float = M.METRIC_INFO.bounds[0]  # type: ignore[index]
    plot_upper_bound: float = M.METRIC_INFO.bounds[1]  # type: ignore[index]

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
        self._custom = {  # by stage (spaCy stages are cached too: re-scoring should not even parse again)
            "candidates": candidate_extractor, "qg": question_generator, "qa": question_answerer, "nli": nli,
            "personal": personal_filter, "signals": None, "coref": coreference,
        }
        if cache is None and config.cache_dir:
            cache = Q2Cache(config.cache_dir, trusted=config.cache_trusted)
        self.cache = cache
        self.timings: dict[str, float] = {}
        #: per stage, the items its component was given in the last call (the others were known already)
        self.stage_items: dict[str, int] = {}
        self._signature: Optional[Signature] = None
        self._random_weights: Optional[tuple[str, ...]] = None
        self._part_ids: dict[str, str] = {}
        #: the agreement of this scorer's first rows with float32 (:mod:`q2_plugins.metric.precision`), once checked
        self.precision_agreement: Any = None
        self._precision_pending = True
        self._ahead: Any = None  # the candidates extractor that works ahead (see ahead())
        self._personal_background: Any = None  # the personal filter beside the answerer (models on a GPU)
        self._devices_checked = False

    # -- components (lazy) ------------------------------------------------------------------------------------
    def _nlp(self) -> Any:
        return load_spacy(self.config.spacy_model)

    @property
    def candidate_extractor(self) -> CandidateExtractor:
        if self._candidates is None:
            self._candidates = SpacyCandidateExtractor(self._nlp())
        return self._candidates

    @property
    def personal_filter(self) -> PersonalQuestionFilter:
        if self._personal is None:
            self._personal = SpacyPersonalFilter(self._nlp())
        return self._personal

    @property
    def text_signals(self) -> Any:
        """The text signals of the BEGIN-style labels (:mod:`q2_plugins.metric.taxonomy`), from the spaCy pipeline."""
        if self._signals is None:
            # (lazy: the taxonomy loads only when labels are asked for)
            from q2_plugins.metric.taxonomy import SpacyTextSignals

            self._signals = SpacyTextSignals(self._nlp())
        return self._signals

    def _component(self, role: str) -> Any:
        """The component of ``role``, loaded by the backend its model setting names (:mod:`q2_plugins.backends`)."""

        component = backends.load(role, self.config)
        if self._part_ids.pop(role, None) is not None:  # loading can fill the cache an identity reads: ask again
            self._signature = None
        return component

    @property
    def question_generator(self) -> QuestionGenerator:
        if self._qg is None:
            self._qg = self._component("qg")
        return self._qg

    @property
    def question_answerer(self) -> QuestionAnswerer:
        if self._qa is None:
            self._qa = self._component("qa")
        return self._qa

    @property
    def nli(self) -> NLIModel:
        if self._nli is None:
            self._nli = self._component("nli")
        return self._nli

    @property
    def coreference(self) -> Coreference:
        """The coreference of ``--coref`` (:mod:`q2_plugins.backends.hf.coref`), loaded on first use."""
        if self._coref is None:
            self._coref = self._component("coref")
        return self._coref

    def load(self, *, quiet: bool = False) -> "Q2Scorer":
        """Load every component this configuration needs now; a model that cannot load raises
        :class:`~q2_plugins.metric.errors.ModelLoadError` here, once. ``score()`` calls it before its first stage.
        ``quiet`` silences the model library's per-file loading bars while it runs."""
        if quiet:
            with quiet_loading():
                return self.load()
        self.parts()
        return self

    def parts(self) -> Parts:
        """The settings and the components that scoring with them uses, loaded: what the steps of
        :mod:`q2_plugins.metric.stages` are given."""
        c = self.config
        if not self._devices_checked:  # a device that is not here stops before any model loads
            check_devices(c, [role for role in ("qg", "qa", "nli") if self._custom[role] is None])
            self._devices_checked = True
        # the models first (the coreference model before the others), spaCy after: a model that cannot load stops
        # the run before seconds go into loading a spaCy pipeline
        coref = self.coreference if c.coref else None
        qg, qa = self.question_generator, self.question_answerer
        nli = self.nli if c.uses_nli else None
        personal, overlap = None, False
        if c.remove_personal:
            personal, overlap = self._personal_part()
        return Parts(c, self._ahead or self.candidate_extractor, qg, qa, personal=personal, nli=nli, coref=coref,
                        overlap=overlap)

    def _personal_part(self) -> tuple[PersonalQuestionFilter, bool]:
        """The personal filter, and whether it runs beside the question answerer: with the project's own spaCy
        filter and models off the CPU, a :class:`~q2_plugins.metric.spacy_worker.PersonalAhead` (a worker process with a
        pipeline of its own)."""
        if self._custom["personal"] is not None or not spacy_worker.off_cpu(self.config):
            return self.personal_filter, False
        if self._personal_background is None:
            self._personal_background = spacy_worker.PersonalAhead(self.personal_filter, self.config.spacy_model)
            self._personal_background.prepare()  # its pipeline loads while the candidates and questions are made
        return self._personal_background, True

    # -- signature ----------------------------------------------------------------------------------------------
    def _part_id(self, stage: str) -> str:
        """The identity of the component of ``stage`` (computed once: it may hash a model's files)."""
        if stage not in self._part_ids:
            self._part_ids[stage] = self._compute_part_id(stage)
        return self._part_ids[stage]

    def _compute_part_id(self, stage: str) -> str:
        custom = self._custom[stage]
        if custom is not None:
            return str(getattr(custom, "signature", f"custom:{type(custom).__name__}"))
        if stage in ("candidates", "personal", "signals"):
            return spacy_id(self._nlp())

        return backends.identity(stage, self.config)

    @property
    def signature(self) -> Signature:
        """Reproducibility signature: models with revisions, decoding, filters, normalisation, package version.

        A string (the full form) with a sacrebleu-style ``.short`` form, derived from the settings' declarations;
        see :mod:`q2_plugins.metric.signature`.
        """
        if self._signature is None:
            self._signature = scorer_signature(self.config, _Identities(self), __version__)
        return self._signature

    @property
    def random_weights(self) -> tuple[str, ...]:
        """The model settings naming a random-weight test model (``q2 make-test-models``): a report of its scores
        says they mean nothing. Read once from the model folders' cards (not in the signature)."""
        if self._random_weights is None:
            self._random_weights = tuple(random_weight_models(self.config.to_dict()))
        return self._random_weights

    def stage_keys(self, stages: Sequence[str]) -> dict[str, str]:
        """The cache namespace of each of ``stages``: the stage, its component's identity and the settings that
        change its outputs (:func:`~q2_plugins.metric.signature.stage_key`)."""
        return {stage: stage_key(self.config, stage, self._part_id(stage), st.stage_version(stage))
                for stage in stages}

    def _stages(self, label: bool) -> list[str]:
        """The stages that scoring with these settings runs (``label``: and the labels' text signals)."""
        c = self.config
        used = {"personal": c.remove_personal, "nli": c.uses_nli, "signals": label, "coref": c.coref}
        return [stage for stage in STAGES if used.get(stage, True)]

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
        contest: Optional[Contest] = None,
    ) -> Q2Result:
        """Score ``responses[i]`` against ``knowledge[i]``; the steps are those of :mod:`q2_plugins.metric.stages`.

        Each knowledge item is a string or a list of strings (joined by spaces). ``history`` (the dialogue before
        each response) is read only with ``coref`` (the paper's appendix A step, :mod:`q2_plugins.backends.hf.coref`).
        Bad rows get ``status="error"`` and a message; they never stop the other rows. ``label`` adds the
        BEGIN-style label of each response (:mod:`q2_plugins.metric.taxonomy`). ``progress``: True for a bar per stage
        of this call, or a :class:`~q2_plugins.metric.progress.Progress` to keep one set of bars (rows with an ETA, and
        stages) over the several calls of a run.

        With models off the CPU, a call of more than :data:`AHEAD_ROWS` rows is scored in parts of that many, each
        part's answer candidates extracted while the models score the part before (:meth:`ahead`); the results are
        those of one call.

        ``contest`` (:class:`~q2_plugins.metric.contest.Contest`, what reranking with early stop passes): rows that
        compete in groups; those that cannot rank first in theirs stop early and get the status ``stopped``.
        """
        _check_inputs(responses, knowledge, history)
        _check_progress(progress)
        if len(responses) > AHEAD_ROWS and self._custom["candidates"] is None and contest is None:
            if spacy_worker.off_cpu(self.config):
                return self._score_in_parts(responses, knowledge, history, explain, progress, label)
        return self._score_call(responses, knowledge, history, explain, progress, label, contest)

    def _score_in_parts(self, responses: Sequence[Any], knowledge: Sequence[Any], history: Optional[Sequence[Any]],
                        explain: bool, progress: Union[bool, Progress], label: bool) -> Q2Result:
        """:meth:`score` over parts of :data:`AHEAD_ROWS` rows, the next part's candidates extracted ahead; one set
        of bars (``progress`` True) over all of them, one result with the call's row indices."""
        bars = Progress(rows=False, plain=False) if progress is True else progress
        results: list[ResponseResult] = []
        timings: dict[str, float] = {}
        items: dict[str, int] = {}
        try:
            for start in range(0, len(responses), AHEAD_ROWS):
                end, after = start + AHEAD_ROWS, start + 2 * AHEAD_ROWS
                if end < len(responses):
                    self.ahead(responses[end:after])
                part = self._score_call(responses[start:end], knowledge[start:end],
                                        None if history is None else history[start:end], explain, bars, label)
                for res in part.responses:
                    res.index += start
                results.extend(part.responses)
                for k, v in self.timings.items():
                    timings[k] = timings.get(k, 0.0) + v
                for k, n in self.stage_items.items():
                    items[k] = items.get(k, 0) + n
        finally:
            if progress is True and isinstance(bars, Progress):
                bars.close()
        self.timings, self.stage_items = timings, items
        return Q2Result(results, self.signature, self.random_weights)

    def _score_call(self, responses: Sequence[Any], knowledge: Sequence[Any], history: Optional[Sequence[Any]],
                    explain: bool, progress: Union[bool, Progress], label: bool,
                    contest: Optional[Contest] = None) -> Q2Result:
        c = self.config
        rows = st.check_cells(responses, knowledge, history if c.coref else None)
        if contest is not None:
            contest.rows = rows
        check_lengths(c, rows)                                                            # 0. budgets, up front
        checked = self._rows_to_check(rows)
        run = StageRunner(c, self.cache, progress=progress)
        run.rows = rows
        run.start(len(rows), [s for s in _RUN_ORDER if s in self._stages(label)])
        try:
            active = st.usable(rows)
            if active:  # (models load only when there is a row to score; without progress, with no loading bars)
                if progress is False:
                    self.load(quiet=True)
                p = self.parts()                                                          # the loaded components
                run.batch_sizes = {k: getattr(getattr(p, k), "batch_size", None) for k in ("qg", "qa", "nli")
                                   if self._custom[k] is None}  # (a GPU model's batch size comes from its memory)
                run.keys = self.stage_keys(self._stages(label)) if self.cache is not None else {}
                if p.coref is not None:  # the paper's appendix A: pronouns resolved over the history
                    active = st.resolve_coreference(run, p, active)
                active = st.extract_candidates(run, p, active)                            # 1. answer candidates
                check_candidates(c, active)
                active = st.usable(active)
                slots = st.generate_questions(run, p, active)                             # 2. question generation
                valid = st.select_questions(run, p, slots, contest)                       # 3. filters
                compared = st.answer_from_knowledge(run, p, valid)                        # 4. QA on the knowledge
                if contest is not None:  # ranking with early stop: the losers known before NLI stop here
                    st.stop_losers(run, p, contest, slots, valid)
                    compared = [cq for cq in compared if not cq.valid.row.stopped]
                fallback_rows = st.needing_fallback(p, active, compared)
                nli_out = st.run_nli(run, p, st.nli_pairs(p, compared)                    # 5 and 6: one NLI call
                                     + [st.fallback_pair(p, r) for r in fallback_rows])
                st.compare_answers(p, compared, nli_out)                                  # 5. answer comparison
                if c.discard_unanswerable:  # Q²*
                    for r in active:
                        st.discard_unanswerable(r)
                st.apply_fallback(p, fallback_rows, nli_out)                              # 6. fallback
                if label:
                    st.text_signals(run, self.text_signals, st.usable(rows))              # 8. labels' signals
            results = [st.aggregate(r) for r in rows]                                     # 7. aggregation
            run.rows_done(len(rows))
            if label:
                st.label(rows, results)                                                   # 8. BEGIN labels
        finally:
            run.close()
            self.timings = run.timings
            self.stage_items = run.computed
        checked = [i for i in checked if not rows[i].stopped]
        if checked:  # a setting the tests cannot run: its decisions against float32 on its first rows
            self._check_decisions(checked, responses, knowledge, history, results)
        if not explain:
            for res in results:
                res.candidates = res.questions = res.dropped = res.coref = res.spans = None
        return Q2Result(results, self.signature, self.random_weights)

    def ahead(self, responses: Sequence[Any]) -> None:
        """Start extracting the answer candidates of ``responses`` (a later call's) in a worker process, with a
        spaCy pipeline of its own, so they are ready when that call needs them (:mod:`q2_plugins.metric.spacy_worker`).
        Same candidates as without; a run whose models are on a GPU calls it for its next chunk. Does nothing with a
        candidate extractor passed in."""
        if self._custom["candidates"] is not None:
            return
        if self._ahead is None:
            self._ahead = spacy_worker.CandidatesAhead(self.candidate_extractor, self.config.spacy_model)
        self._ahead.start([r for r in responses if isinstance(r, str)])

    def skip_precision_check(self) -> None:
        """Take no precision check (:mod:`q2_plugins.metric.precision`): another scorer of the same run takes it."""
        self._precision_pending = False

    def _rows_to_check(self, rows: Sequence[Row]) -> list[int]:
        """The rows of this call whose decisions are compared with float32 (:mod:`q2_plugins.metric.precision`): the
        first
        ``precision_check`` usable rows of the first call with any, on a setting that is due a check and with the
        models of the backends (a component passed in has no float32 reference)."""
        if not self._precision_pending or not self.config.precision_check:
            return []
        if any(self._custom[k] is not None for k in ("qg", "qa", "nli")):
            self._precision_pending = False
            return []
        if precision.check_due(self.config) is None:
            self._precision_pending = False
            return []
        return [r.index for r in st.usable(rows)][: self.config.precision_check]

    def _check_decisions(self, indices: list[int], responses: Sequence[Any], knowledge: Sequence[Any],
                         history: Optional[Sequence[Any]], results: list[Any]) -> None:
        """Score the rows ``indices`` again with the float32 reference, keep the agreement in
        :attr:`precision_agreement` and warn below the tolerance; the reference models are let go after."""
        self._precision_pending = False
        reference = Q2Scorer(precision.reference_config(self.config), candidate_extractor=self._custom["candidates"],
                             personal_filter=self._custom["personal"], coreference=self._custom["coref"])
        ref = reference.score(responses=[responses[i] for i in indices], knowledge=[knowledge[i] for i in indices],
                              history=None if history is None else [history[i] for i in indices], explain=True)
        agreement = precision.compare(ref.responses, [results[i] for i in indices])
        agreement.reference = precision.describe(reference.config, library_paths=True)
        agreement.checked = precision.describe(self.config)
        self.precision_agreement = agreement
        precision.warn_if_below(agreement)

    def label(self, result: Q2Result, *, responses: Sequence[Any], knowledge: Sequence[Any]) -> Q2Result:
        """Label a result afterwards with the BEGIN-style labels, given the inputs it was scored from: the labels
        ``score(..., label=True)`` gives, when the result has its explanations (without them the rules that read the
        questions are skipped). Labels ``result`` in place and returns it."""
        _check_inputs(responses, knowledge, None)
        if len(responses) != len(result.responses):
            raise ValueError(f"Expected the {len(result.responses)} responses the result was scored from, "
                             f"but got {len(responses)}")
        rows = st.check_cells(responses, knowledge)
        check_lengths(self.config, rows)
        if st.usable(rows):
            keys = self.stage_keys(["signals"]) if self.cache is not None else {}
            st.text_signals(StageRunner(self.config, self.cache, keys), self.text_signals, st.usable(rows))
        st.label(rows, result.responses)
        return result


#: with models off the CPU, a ``score()`` call of more rows is scored in parts of this many, each part's candidates
#: extracted while the models score the part before (a run's default chunk; a part's work fills any GPU's batches)
AHEAD_ROWS = 1000

#: the order in which ``score()`` first runs its stages (the personal filter comes with the questions' filters)
_RUN_ORDER = ("coref", "candidates", "qg", "personal", "qa", "nli", "signals")


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
        raise TypeError(f"Expected progress to be True, False or a q2_plugins.metric.progress.Progress, "
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


class _Identities(Mapping[str, str]):
    """The identity of each stage's component, computed when the signature first asks for it."""

    def __init__(self, scorer: Q2Scorer) -> None:
        self._scorer = scorer

    def __getitem__(self, stage: str) -> str:
        return self._scorer._part_id(stage)

    def __iter__(self) -> Iterator[str]:
        return iter(STAGES)

    def __len__(self) -> int:
        return len(STAGES)
