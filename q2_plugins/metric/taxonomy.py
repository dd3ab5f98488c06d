"""BEGIN's response taxonomy (Dziri et al., "Evaluating Groundedness in Dialogue Systems: The BEGIN Benchmark") read
off Q²'s evidence and a few cheap text signals.

BEGIN labels a response ``entailment``, ``hallucination`` (topical but unverifiable, personal opinions and experiences
included), ``generic`` (too vague to verify), ``off-topic`` or ``contradiction``; its coarse view is ``entailment`` /
``neutral`` / ``contradiction``. :func:`classify` is a pure function of one
:class:`~q2_plugins.metric.results.ResponseResult` (its status, score, questions and drops) and the :class:`TextSignals`
of its response and knowledge; asked with
``score(..., label=True)``, the scorer attaches its answer to every result (``label``, ``label3``, ``label_reason``).
The first rule that fires decides, in BEGIN's own order (its annotators' "generic" outranks "off-topic", which
outranks the faithfulness judgement):

1. **generic**: the response is vague (at most ``vague_max_content_words`` content words) and either shares almost
   nothing with the knowledge (support below ``off_topic_max_support``) or got no valid question from Q².
2. **off-topic**: support below ``off_topic_max_support`` (little relation to the knowledge).
3. **contradiction**: the end-to-end NLI fallback said contradiction, or NLI contradicted at least
   ``contradiction_min_share`` of the response's answers.
4. **hallucination**: at least ``unanswerable_min_share`` of the questions have no answer in the knowledge; or Q² is
   at most ``entailment_max_q2_inconsistent`` (the answers do not confirm the response); or the fallback NLI said
   neutral; or less than ``entailment_min_support`` of the content words are in the knowledge; or the response speaks
   of the speaker (a first-person subject: BEGIN's "hallucination-personal").
5. **entailment** otherwise.

*Content words* are spaCy tokens that are not stop words, punctuation or space; *support* is the share of them whose
lower-cased form or lemma occurs in the knowledge. Where the thresholds come from: the text-signal thresholds were
tuned on BEGIN's development split only (``scripts/tune_begin_taxonomy.py`` prints the search); the Q²-evidence
thresholds are documented defaults, not tuned, because no per-question Q² evidence exists for BEGIN without the real
models (see docs/taxonomy_stress.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Optional, Sequence

from q2_plugins.metric.results import ResponseResult, ResponseStatus
from q2_plugins.metric.spacy_parts import load_spacy

__all__ = [
    "LABELS",
    "LABELS3",
    "COARSE",
    "SIGNALS_VERSION",
    "TaxonomyThresholds",
    "DEFAULT_THRESHOLDS",
    "TextSignals",
    "SpacyTextSignals",
    "TaxonomyLabel",
    "classify",
    "classify_texts",
]

LABELS = ("entailment", "hallucination", "generic", "off-topic", "contradiction")
LABELS3 = ("entailment", "neutral", "contradiction")
COARSE = {"entailment": "entailment", "hallucination": "neutral", "generic": "neutral", "off-topic": "neutral",
          "contradiction": "contradiction"}
# names the definition of TextSignals; part of the cache key of the scorer's "signals" stage
SIGNALS_VERSION = "content-words:spacy-stop-punct|support:lower-or-lemma|first-person:nsubj-i-we|v1"
_FIRST_PERSON = frozenset({"i", "we"})


@dataclass(frozen=True)
class TaxonomyThresholds:
    """The thresholds of :func:`classify`; the defaults say where each comes from."""

    # Text signals, tuned on BEGIN dev: the best of 2,002 combinations by the mean of five-way and three-way macro-F1
    # (scripts/tune_begin_taxonomy.py; 5-fold cross-validation of that selection picks the same values in 4 folds).
    vague_max_content_words: int = 5
    off_topic_max_support: float = 0.05  # support strictly below this (in practice: none of the content words)
    entailment_min_support: float = 0.6  # support strictly below this: not verifiable from the knowledge
    first_person_is_personal: bool = True  # a first-person subject makes a response personal (hallucination)
    # Q² evidence: documented defaults, NOT tuned (no per-question evidence for BEGIN without the real models).
    contradiction_min_share: float = 0.5  # of the questions, NLI-contradicted; conservative: 5 of 836 dev rows
    unanswerable_min_share: float = 0.5  # of the questions, with no answer in the knowledge
    entailment_max_q2_inconsistent: float = 0.5  # Q² at or below this is inconsistent (the paper's threshold)

    def __post_init__(self) -> None:
        if not isinstance(self.vague_max_content_words, int) or self.vague_max_content_words < 0:
            raise ValueError(f"TaxonomyThresholds.vague_max_content_words must be an integer >= 0, got "
                             f"{self.vague_max_content_words!r}")
        for name in ("off_topic_max_support", "entailment_min_support", "contradiction_min_share",
                     "unanswerable_min_share", "entailment_max_q2_inconsistent"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"TaxonomyThresholds.{name} must be in [0, 1], got {value!r}")


DEFAULT_THRESHOLDS = TaxonomyThresholds()


@dataclass(frozen=True)
class TextSignals:
    """Model-free signals of one (response, knowledge) pair."""

    content_words: int  # response tokens that are not stop words, punctuation or space
    supported_words: int  # of those, how many occur in the knowledge (lower-cased form or lemma)
    first_person: bool  # "I" or "we" is a subject in the response

    @property
    def support(self) -> float:
        """Share of the response's content words found in the knowledge (0 for a response without any)."""
        return self.supported_words / self.content_words if self.content_words else 0.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "TextSignals":
        return cls(**data)

    @classmethod
    def of(cls, response_doc: Any, knowledge_doc: Any) -> "TextSignals":
        """Signals of a parsed response (needs POS, lemmas and dependencies) and knowledge (POS and lemmas)."""
        known = {t.lower_ for t in knowledge_doc} | {t.lemma_.lower() for t in knowledge_doc}
        content = [t for t in response_doc if not (t.is_stop or t.is_punct or t.is_space)]
        supported = sum(t.lower_ in known or t.lemma_.lower() in known for t in content)
        first = any(t.lower_ in _FIRST_PERSON and t.dep_ in ("nsubj", "nsubjpass") for t in response_doc)
        return cls(len(content), supported, first)


class SpacyTextSignals:
    """:class:`TextSignals` of many pairs, batched with ``nlp.pipe`` (the knowledge without parser and NER)."""

    def __init__(self, nlp: Any, batch_size: int = 64) -> None:
        self.nlp = nlp
        self.batch_size = batch_size

    def compute(self, pairs: Sequence[tuple[str, str]]) -> list[TextSignals]:
        responses = list(self.nlp.pipe([r for r, _ in pairs], batch_size=self.batch_size))
        skip = [name for name in ("parser", "ner") if name in self.nlp.pipe_names]
        unique = list(dict.fromkeys(k for _, k in pairs))
        docs = dict(zip(unique, self.nlp.pipe(unique, batch_size=self.batch_size, disable=skip)))
        return [TextSignals.of(r, docs[k]) for r, (_, k) in zip(responses, pairs)]


@dataclass(frozen=True)
class TaxonomyLabel:
    """A five-way BEGIN label, its coarse three-way label and why (``label`` None: not labelled, see ``reason``)."""

    label: Optional[str]
    label3: Optional[str]
    reason: str


def _label(label: str, reason: str) -> TaxonomyLabel:
    return TaxonomyLabel(label, COARSE[label], f"{label}: {reason}")


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def classify(result: Optional[ResponseResult], signals: Optional[TextSignals],
             thresholds: TaxonomyThresholds = DEFAULT_THRESHOLDS) -> TaxonomyLabel:
    """Label one response from its Q² result and text signals (rules in the module docstring).

    ``result=None`` labels from the text signals alone. A result without its questions (scored without
    ``explain``) still gives its status, score and fallback label; the question shares are then unknown and skipped.
    An errored result, or missing signals, is not labelled.
    """
    t = thresholds
    if result is not None and result.status == ResponseStatus.ERROR:
        return TaxonomyLabel(None, None, "not labelled: the response could not be scored")
    if signals is None:
        return TaxonomyLabel(None, None, "not labelled: no text signals")
    n_words, support = signals.content_words, signals.support
    words = f"{signals.supported_words} of {n_words} content words in the knowledge"
    vague = n_words <= t.vague_max_content_words
    unrelated = support < t.off_topic_max_support
    no_question = result is not None and result.status in (ResponseStatus.FALLBACK, ResponseStatus.NO_VALID_QUESTION)
    if vague and unrelated:
        return _label("generic", f"vague ({n_words} content words), {words}")
    if vague and no_question:
        return _label("generic", f"vague ({n_words} content words) and no valid question")
    if unrelated:
        return _label("off-topic", words)

    questions = result.questions if result is not None else None
    n_q = len(questions) if questions else 0
    if result is not None and result.fallback_label == "contradiction":
        return _label("contradiction", "no valid question; end-to-end NLI says contradiction")
    if n_q:
        contradicted = sum(q.nli_label == "contradiction" for q in questions)  # type: ignore[union-attr]
        if contradicted and contradicted / n_q >= t.contradiction_min_share:
            return _label("contradiction", f"NLI contradicts {contradicted} of {n_q} answers")
        unanswerable = sum(q.knowledge_answer_kind == "no_answer" for q in questions)  # type: ignore[union-attr]
        if unanswerable and unanswerable / n_q >= t.unanswerable_min_share:
            return _label("hallucination", f"{unanswerable} of {n_q} questions have no answer in the knowledge")
    if result is not None and result.status == ResponseStatus.SCORED and result.score is not None \
            and result.score <= t.entailment_max_q2_inconsistent:
        return _label("hallucination", f"Q2 {result.score:.2f} over {result.num_questions} questions: the "
                                       f"knowledge does not confirm the answers")
    if result is not None and result.fallback_label == "neutral":
        return _label("hallucination", "no valid question; end-to-end NLI says neutral")
    if support < t.entailment_min_support:
        return _label("hallucination", f"only {words} ({_pct(support)})")
    if t.first_person_is_personal and signals.first_person:
        return _label("hallucination", "personal: the speaker is a subject (I / we)")
    if result is None:
        evidence = "text signals only"
    elif result.status == ResponseStatus.SCORED:
        evidence = f"Q2 {result.score:.2f} over {result.num_questions} questions"
    elif result.fallback_label is not None:
        evidence = f"no valid question; end-to-end NLI says {result.fallback_label}"
    else:
        evidence = "no valid question and no fallback"
    return _label("entailment", f"{evidence}; {words}")


def classify_texts(responses: Sequence[str], knowledge: Sequence[str], *, nlp: Any = None,
                   spacy_model: str = "en_core_web_sm",
                   thresholds: TaxonomyThresholds = DEFAULT_THRESHOLDS) -> list[TaxonomyLabel]:
    """Label responses from the text signals alone (no Q² evidence): the model-free part of the rules."""
    if len(responses) != len(knowledge):
        raise ValueError(f"Expected as many knowledge texts as responses, but got {len(knowledge)} for "
                         f"{len(responses)}")
    if nlp is None:
        nlp = load_spacy(spacy_model)
    signals = SpacyTextSignals(nlp).compute(list(zip(responses, knowledge)))
    return [classify(None, s, thresholds) for s in signals]
