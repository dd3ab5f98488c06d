"""Baselines scored through the same harness as Q², so every table shows them side by side.

As in the paper's code (``baselines.py`` / ``nli_eval.py`` of the original repository), each compares the response
with its knowledge, and the knowledge is lower-cased first (named in every signature):

* ``overlap`` — token F1 of response and knowledge over spaCy tokens, lower-cased, without stop words and
  punctuation; as a span baseline, each such token of the response is unsupported when the knowledge lacks it.
* ``bleu`` — sacrebleu BLEU of the response against the knowledge as the single reference (``corpus_score`` of
  the one pair, no effective order, as the original's ``corpus_bleu``), divided by 100.
* ``meteor`` — a METEOR-style score: NLTK's ``meteor_score`` of the response against the knowledge, on
  lower-cased word / punctuation tokens, with exact and Porter-stem matches only. It is *not* full METEOR: the
  WordNet synonym stage is off unless ``synonyms="wordnet"`` and the WordNet data is installed (it is not
  downloaded); the signature says which.
* ``bertscore`` — BERTScore F1 (the ``bertscore`` extra; model configurable; rescaled with the baseline by default).
  Not bounded to [0, 1]: threshold statistics use min–max normalised scores, as the paper did.
* ``nli`` — end-to-end NLI with the knowledge as premise and the response as hypothesis: entailment 1, neutral 0.5,
  contradiction 0 (the model of :attr:`Q2Config.nli_model`, through :attr:`Q2Scorer.nli`), lower-cased as the
  Q² fallback is (:attr:`Q2Config.fallback_lowercase_knowledge` / ``fallback_lowercase_response``).

Every baseline has ``name``, ``signature``, ``bounded`` and ``score(pairs) -> list[float]``. A baseline whose model
cannot be loaded raises :class:`~q2_plugins.metric.errors.ModelLoadError` naming the option to change.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Optional, Protocol, Sequence, runtime_checkable

from q2_plugins.datasets.types import Example
from q2_plugins.metaeval.deps import require
from q2_plugins.metaeval.scores import MetricScores
from q2_plugins.metric.components import NLIModel
from q2_plugins.metric.errors import SETTING, ModelLoadError
from q2_plugins.metric.normalize import tokens_f1
from q2_plugins.metric.scoring import NLI_SCORES
from q2_plugins.metric.spacy_parts import load_spacy, spacy_signature

__all__ = [
    "Baseline",
    "TokenOverlap",
    "SentenceBLEU",
    "BERTScoreBaseline",
    "NLIBaseline",
    "MeteorBaseline",
    "BASELINE_NAMES",
    "build_baselines",
    "score_baselines",
    "response_length",
]

BASELINE_NAMES = ("overlap", "bleu", "meteor", "bertscore", "nli")
_WORD = re.compile(r"\w+")
_WORD_OR_PUNCT = re.compile(r"\w+|[^\w\s]")


@runtime_checkable
class Baseline(Protocol):
    name: str
    signature: str
    bounded: bool

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        """Score (response, knowledge) pairs."""
        ...


class TokenOverlap:
    """Token F1 of response and lower-cased knowledge over spaCy tokens without stop words and punctuation."""

    name = "Overlap"
    bounded = True

    def __init__(self, nlp: Any = None, spacy_model: str = "en_core_web_sm") -> None:
        self._nlp = nlp
        self.spacy_model = spacy_model

    @property
    def nlp(self) -> Any:
        if self._nlp is None:
            self._nlp = load_spacy(self.spacy_model)
        return self._nlp

    @property
    def signature(self) -> str:
        return f"overlap|tok:spacy-{spacy_signature(self.nlp)}|lc|-stop-punct|ref:knowledge.lower()"

    def tokens(self, texts: Sequence[str]) -> list[list[str]]:
        # stop-word and punctuation flags are lexical: the tokenizer alone gives the full pipeline's answer
        return [[t.text.lower() for t in doc if not t.is_stop and not t.is_punct]
                for doc in self.nlp.tokenizer.pipe(texts)]

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        responses = self.tokens([r for r, _ in pairs])
        knowledge = self.tokens([k.lower() for _, k in pairs])
        return [tokens_f1(k, r) for r, k in zip(responses, knowledge)]

    def spans(self, pairs: Sequence[tuple[str, str]]) -> list[list[tuple[int, int, float]]]:
        """The span baseline: each counted token of the response (the same tokens as :meth:`score`) with 1.0 when
        the lower-cased knowledge has it, else 0.0 (unsupported)."""
        knowledge = [set(toks) for toks in self.tokens([k.lower() for _, k in pairs])]
        return [[(t.idx, t.idx + len(t.text), 1.0 if t.text.lower() in known else 0.0) for t in doc
                 if not t.is_stop and not t.is_punct]
                for doc, known in zip(self.nlp.tokenizer.pipe([r for r, _ in pairs]), knowledge)]


class SentenceBLEU:
    """sacrebleu BLEU of each response against its lower-cased knowledge, in [0, 1]."""

    name = "BLEU"
    bounded = True

    def __init__(self) -> None:
        self._bleu = require("sacrebleu.metrics").BLEU()
        self._bleu.corpus_score(["a"], [["a"]])  # the signature names the number of references once one was seen
        self.signature = f"bleu|{self._bleu.get_signature()}|per-pair corpus_score/100|ref:knowledge.lower()"

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        return [self._bleu.corpus_score([r], [[k.lower()]]).score / 100.0 for r, k in pairs]


class _NoSynonyms:
    """Stands in for NLTK's WordNet reader: no word has a synonym (METEOR's synonym stage matches nothing)."""

    @staticmethod
    def synsets(word: str) -> list:
        return []


class MeteorBaseline:
    """METEOR-style score of each response against its lower-cased knowledge (NLTK ``meteor_score``, alpha 0.9,
    beta 3, gamma 0.5), exact and Porter-stem matches; WordNet synonyms only with ``synonyms="wordnet"``."""

    name = "METEOR-style"
    bounded = True

    def __init__(self, synonyms: str = "none") -> None:
        if synonyms not in ("none", "wordnet"):
            raise ValueError(f"MeteorBaseline synonyms must be 'none' or 'wordnet', got {synonyms!r}")
        nltk = require("nltk")
        self._meteor = require("nltk.translate.meteor_score").meteor_score
        if synonyms == "wordnet":
            try:
                nltk.data.find("corpora/wordnet")
            except LookupError:
                raise ModelLoadError(f"METEOR with WordNet synonyms needs NLTK's WordNet data, which is not installed "
                                     f"(setting {SETTING}): install it with nltk.download('wordnet') on a connected "
                                     f"machine, or set it to none", setting="meteor_synonyms") from None
            from nltk.corpus import wordnet

            self._wordnet: Any = wordnet
        else:
            self._wordnet = _NoSynonyms()
        match = "exact+porter-stem" + ("+wordnet-synonyms" if synonyms == "wordnet" else "")
        self.signature = (f"meteor-style|nltk-{nltk.__version__}|tok:lc-word-punct|match:{match}|a0.9-b3-g0.5|"
                          f"ref:knowledge.lower()")

    @staticmethod
    def tokens(text: str) -> list[str]:
        return _WORD_OR_PUNCT.findall(text.lower())

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        out = []
        for r, k in pairs:
            hypothesis = self.tokens(r)
            out.append(float(self._meteor([self.tokens(k)], hypothesis, wordnet=self._wordnet)) if hypothesis
                       else 0.0)
        return out


class BERTScoreBaseline:
    """BERTScore F1 of each response against its lower-cased knowledge (``bert_score.BERTScorer``, loaded once)."""

    name = "BERTScore"
    bounded = False

    def __init__(self, model_type: str = "roberta-large", *, num_layers: Optional[int] = None, lang: str = "en",
                 rescale_with_baseline: bool = True, idf: bool = False, batch_size: int = 64,
                 device: Optional[str] = None, scorer: Any = None) -> None:
        self.options = dict(model_type=model_type, num_layers=num_layers, lang=lang,
                            rescale_with_baseline=rescale_with_baseline, idf=idf, batch_size=batch_size,
                            device=device)
        self._scorer = scorer

    @property
    def scorer(self) -> Any:
        if self._scorer is None:
            bert_score = require("bert_score")
            try:
                self._scorer = bert_score.BERTScorer(**self.options)
            except Exception as e:  # noqa: BLE001 - whatever stops the load, the run stops here with the option
                model = self.options["model_type"]
                cause = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"
                if isinstance(e, KeyError) and self.options["num_layers"] is None:
                    cause = "BERTScore knows no default layer for this model: set the number of layers"
                raise ModelLoadError(
                    f"Cannot load the BERTScore model {model!r} (settings {SETTING}): {cause} -- without network, name "
                    f"a local directory of the model and its number of layers, or leave bertscore out of the "
                    f"baselines", setting="bertscore_model / bertscore_num_layers"
                ) from e
        return self._scorer

    @property
    def signature(self) -> str:
        return f"bertscore|{self.scorer.hash}|F1|ref:knowledge.lower()"

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        _, _, f1 = self.scorer.score([r for r, _ in pairs], [k.lower() for _, k in pairs])
        return [float(x) for x in f1.tolist()]


class NLIBaseline:
    """End-to-end NLI: premise the knowledge (lower-cased, as the original's fallback), hypothesis the response."""

    name = "E2E NLI"
    bounded = True

    def __init__(self, nli: NLIModel, *, lowercase_knowledge: bool = True, lowercase_response: bool = False,
                 model_id: str = "") -> None:
        self.nli = nli
        self.lowercase_knowledge = lowercase_knowledge
        self.lowercase_response = lowercase_response
        part = getattr(nli, "signature", None) or model_id or f"custom:{type(nli).__name__}"
        case = ("lowerknow" if lowercase_knowledge else "know") + ("-lowerresp" if lowercase_response else "")
        self.signature = f"e2e-nli|{part}|{case}|e1-n0.5-c0"

    def score(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        premises = [(k.lower() if self.lowercase_knowledge else k, r.lower() if self.lowercase_response else r)
                    for r, k in pairs]
        return [NLI_SCORES[label] for label in self.nli.predict(premises)]


def build_baselines(names: Sequence[str], *, nli_factory: Optional[Callable[[], NLIBaseline]] = None,
                    bertscore: Optional[dict[str, Any]] = None, spacy_model: str = "en_core_web_sm",
                    meteor_synonyms: str = "none") -> list[Baseline]:
    """Baselines by name (:data:`BASELINE_NAMES`), in the order given; models load when first scoring."""
    unknown = [n for n in names if n not in BASELINE_NAMES]
    if unknown:
        raise ValueError(f"Unknown baseline(s) {unknown}; expected names from {list(BASELINE_NAMES)}")
    out: list[Baseline] = []
    for name in dict.fromkeys(names):
        if name == "overlap":
            out.append(TokenOverlap(spacy_model=spacy_model))
        elif name == "bleu":
            out.append(SentenceBLEU())
        elif name == "meteor":
            out.append(MeteorBaseline(meteor_synonyms))
        elif name == "bertscore":
            out.append(BERTScoreBaseline(**(bertscore or {})))
        else:
            if nli_factory is None:
                raise ValueError("the nli baseline needs an NLI model (nli_factory=...)")
            out.append(nli_factory())
    return out


def score_baselines(baselines: Sequence[Baseline], examples: Sequence[Example]) -> list[MetricScores]:
    """Score every example with every baseline (each distinct pair once). An empty response or knowledge gets no
    score, as with Q²."""
    usable = [ex for ex in examples if ex.response.strip() and ex.knowledge.strip()]
    skipped = {ex.id: "empty response or knowledge" for ex in examples
               if not (ex.response.strip() and ex.knowledge.strip())}
    pairs = list(dict.fromkeys((ex.response, ex.knowledge) for ex in usable))
    metrics = []
    for baseline in baselines:
        values = dict(zip(pairs, baseline.score(pairs))) if pairs else {}
        metrics.append(MetricScores(
            baseline.name, {ex.id: values[(ex.response, ex.knowledge)] for ex in usable}, "baseline",
            signature=baseline.signature, bounded=baseline.bounded, missing=dict(skipped),
        ))
        if hasattr(baseline, "spans") and pairs:  # a baseline that also marks spans (overlap)
            spans = dict(zip(pairs, baseline.spans(pairs)))
            metrics[-1].spans = {ex.id: spans[(ex.response, ex.knowledge)] for ex in usable}
    return metrics


def response_length(text: str) -> int:
    """Length of a response in words (runs of word characters)."""
    return len(_WORD.findall(text))
