"""The swappable parts of the pipeline: small protocols plus the value types they exchange.

Any object with the right method can replace a built-in component (tests use scripted fakes; users can plug in
their own models). Every method takes a whole batch so implementations can batch across responses.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any, Optional, Protocol, Sequence, runtime_checkable

__all__ = [
    "AnswerKind",
    "Answer",
    "NLILabel",
    "CandidateExtractor",
    "QuestionGenerator",
    "QuestionAnswerer",
    "NLIModel",
    "PersonalQuestionFilter",
    "Replacement",
    "Resolution",
    "Coreference",
    "ResponseLabeller",
]


class AnswerKind(str, enum.Enum):
    """What an extractive QA model returned.

    ``SPAN``: an ordinary span of the context. ``NO_ANSWER``: the model chose the null answer (SQuAD2's "no answer").
    The two remaining kinds only occur with ``qa_decoding="original"``, which reproduces the original Q² code's
    independent start/end argmax: ``EMPTY`` when the end falls before the start (the original decoded an empty string),
    and ``SPAN_FROM_NULL`` when the start is the null position but the end is not (the original decoded text beginning
    with the ``[CLS]`` token). Both count as answers for the F1 but are never sent to NLI, as in the original.
    """

    SPAN = "span"
    NO_ANSWER = "no_answer"
    EMPTY = "empty"
    SPAN_FROM_NULL = "span_from_null"


@dataclass(frozen=True)
class Answer:
    """An extractive QA result: ``text`` is None only for ``NO_ANSWER``."""

    kind: AnswerKind
    text: Optional[str] = None

    def __post_init__(self) -> None:
        if (self.text is None) != (self.kind is AnswerKind.NO_ANSWER):
            raise ValueError(f"Answer of kind {self.kind.value!r} with text {self.text!r}")

    @classmethod
    def span(cls, text: str) -> "Answer":
        return cls(AnswerKind.SPAN, text)

    @classmethod
    def none(cls) -> "Answer":
        return cls(AnswerKind.NO_ANSWER, None)

    @property
    def has_answer(self) -> bool:
        return self.kind is not AnswerKind.NO_ANSWER

    def to_dict(self) -> dict:
        return {"kind": self.kind.value, "text": self.text}

    @classmethod
    def from_dict(cls, data: dict) -> "Answer":
        return cls(AnswerKind(data["kind"]), data["text"])


class NLILabel(str, enum.Enum):
    ENTAILMENT = "entailment"
    NEUTRAL = "neutral"
    CONTRADICTION = "contradiction"


@runtime_checkable
class CandidateExtractor(Protocol):
    """Picks answer candidates (informative spans) in each response."""

    def extract(self, texts: Sequence[str]) -> list[list[str]]: ...


@runtime_checkable
class QuestionGenerator(Protocol):
    """Generates questions for (answer span, context) pairs: one ranked list per pair (best first)."""

    def generate(self, pairs: Sequence[tuple[str, str]]) -> list[list[str]]: ...


@runtime_checkable
class QuestionAnswerer(Protocol):
    """Answers each (question, context) pair extractively, possibly with no answer."""

    def answer(self, pairs: Sequence[tuple[str, str]]) -> list[Answer]: ...


@runtime_checkable
class NLIModel(Protocol):
    """Labels each (premise, hypothesis) pair."""

    def predict(self, pairs: Sequence[tuple[str, str]]) -> list[NLILabel]: ...


@runtime_checkable
class PersonalQuestionFilter(Protocol):
    """Returns True for questions about the speakers themselves (subject I/you, possessive my/your)."""

    def is_personal(self, questions: Sequence[str]) -> list[bool]: ...


@dataclass(frozen=True)
class Replacement:
    """A pronoun of the response replaced by a mention of its coreference cluster: ``start``/``end`` are the
    pronoun's characters in the original response."""

    start: int
    end: int
    pronoun: str
    mention: str

    def to_dict(self) -> dict:
        return {"start": self.start, "end": self.end, "pronoun": self.pronoun, "mention": self.mention}


@dataclass(frozen=True)
class Resolution:
    """A response with its pronouns resolved: the rewritten text and each replacement (none: unchanged)."""

    response: str
    replacements: tuple[Replacement, ...] = ()

    def to_dict(self) -> dict:
        return {"response": self.response, "replacements": [r.to_dict() for r in self.replacements]}

    @classmethod
    def from_dict(cls, data: dict) -> "Resolution":
        return cls(data["response"], tuple(Replacement(**r) for r in data["replacements"]))


@runtime_checkable
class Coreference(Protocol):
    """Resolves the pronouns of each response over (dialogue history, response); an empty history means the
    response alone."""

    def resolve(self, pairs: Sequence[tuple[str, str]]) -> list[Resolution]: ...


@runtime_checkable
class ResponseLabeller(Protocol):
    """Labels responses with BEGIN's five labels (:mod:`q2_plugins.metric.taxonomy`): ``predict`` gives one label per
    (evidence, previous turn or None, response); ``label`` writes them into a
    :class:`~q2_plugins.metric.results.Q2Result`'s ``label``, ``label3`` and ``label_reason`` (rows with an error are
    left alone)."""

    def predict(self, evidence: Sequence[str], previous: Optional[Sequence[Optional[str]]],
                responses: Sequence[str]) -> list[str]: ...

    def label(self, result: Any, *, responses: Sequence[Any], knowledge: Sequence[Any],
              history: Optional[Sequence[Any]] = None) -> Any: ...
