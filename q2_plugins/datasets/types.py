"""The annotated data a meta-evaluation runs on: labelled examples and, for system-level experiments, contexts that
pair the responses of several systems."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Iterator, Mapping, Optional

__all__ = ["Example", "PairedContext", "PerturbedPair", "SkippedRow", "MetaEvalData", "SourceRow"]


@dataclass(frozen=True)
class Example:
    """One response with its grounding knowledge and its human label.

    ``consistent`` is the binary view every response-level statistic uses; ``label`` keeps the data set's own label
    (BEGIN's five-way label, DialFact's three-way label, ...). ``subset`` groups the per-subset table, ``dialogue``
    identifies the dialogue (the random-knowledge control draws "same dialogue" knowledge by it). ``rating`` is a
    graded human judgement where the data has one (USR's mean "Uses Knowledge" rating), for correlations. ``spans``
    are the hallucinated characters of the response, for the span-level experiment.
    """

    id: str
    response: str
    knowledge: str
    consistent: bool
    label: str
    subset: str = "all"
    dialogue: Optional[str] = None
    history: Optional[str] = None
    split: Optional[str] = None
    extra_scores: Mapping[str, float] = field(default_factory=dict)
    rating: Optional[float] = None
    #: the hallucinated characters ``[start, end)`` of the response, where the data marks them (RAGTruth, HalluDial);
    #: () for a response marked free of them, None where the data does not say which part is hallucinated
    spans: Optional[tuple[tuple[int, int], ...]] = None


@dataclass(frozen=True)
class PairedContext:
    """A dialogue context answered by several systems, each response labelled (the paper's cross annotation).

    ``example_ids[system]`` names the :class:`Example` holding that system's response (it may be a response-level
    example or one of :attr:`MetaEvalData.extra`); ``consistent[system]`` is the label given in this context.
    """

    id: str
    example_ids: Mapping[str, str]
    consistent: Mapping[str, bool]

    @property
    def one_inconsistent(self) -> bool:
        """Two responses, exactly one inconsistent: the contexts behind the paper's system-level bootstrap."""
        return len(self.consistent) == 2 and sum(not v for v in self.consistent.values()) == 1


@dataclass(frozen=True)
class PerturbedPair:
    """A stress pair (``q2 perturb``): the example holding the original response and knowledge, the example holding
    its perturbation by ``method``, and the label the perturbed response should get (BEGIN's five-way labels)."""

    id: str
    method: str
    original_id: str
    perturbed_id: str
    expected_label: Optional[str] = None


@dataclass(frozen=True)
class SkippedRow:
    """A row of the data file that is not an example, and why: ``where`` names it (``line 12``, ``record 3``),
    ``reason`` is the kind (``blank row``, ``unknown label``, ``empty label``, ``empty response``,
    ``empty knowledge``), ``detail`` what was found (the unknown label)."""

    where: str
    reason: str
    detail: str = ""

    def describe(self) -> str:
        return f"{self.where}: {self.reason}" + (f" {self.detail!r}" if self.detail else "")


@dataclass
class MetaEvalData:
    """A loaded data set.

    ``examples`` is the response-level set. ``contexts`` (may be empty) are the paired contexts of the system-level
    experiment; their responses that are not response-level examples are in ``extra``. ``dialogue_knowledge`` maps
    a dialogue id to every knowledge text seen in it (the pool of the "same dialogue" random-knowledge control).
    ``pairs`` (may be empty) are stress pairs of two response-level examples each. ``experiments`` names the
    experiments run when none are asked for (None: all the data allows). ``skipped`` are the file's rows that are
    not examples (blank, unknown label, empty text), each with its reason; ``flagged`` are the labels of kept rows
    that were left out or changed (a RAGTruth span whose offsets are unusable or do not cut its text), each with its
    reason; ``caveats`` say where the figures on this data are not comparable with published ones.
    """

    name: str
    source: str
    examples: list[Example]
    label_scheme: str
    contexts: list[PairedContext] = field(default_factory=list)
    extra: list[Example] = field(default_factory=list)
    dialogue_knowledge: dict[str, list[str]] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    pairs: list[PerturbedPair] = field(default_factory=list)
    experiments: Optional[tuple[str, ...]] = None
    skipped: list[SkippedRow] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)
    flagged: list[SkippedRow] = field(default_factory=list)
    benchmark: Optional[str] = None  # the published data set this is ("BEGIN", "Q2", "DialFact", "RAGTruth", ...)

    def __post_init__(self) -> None:
        seen: set[str] = set()
        for ex in self.all_examples():
            if ex.id in seen:
                raise ValueError(f"{self.name}: duplicate example id {ex.id!r}")
            seen.add(ex.id)
        for ctx in self.contexts:
            missing = [i for i in ctx.example_ids.values() if i not in seen]
            if missing:
                raise ValueError(f"{self.name}: context {ctx.id} refers to unknown example(s) {missing}")
        for pair in self.pairs:
            missing = [i for i in (pair.original_id, pair.perturbed_id) if i not in seen]
            if missing:
                raise ValueError(f"{self.name}: stress pair {pair.id} refers to unknown example(s) {missing}")

    def all_examples(self) -> Iterator[Example]:
        yield from self.examples
        yield from self.extra

    def by_id(self) -> dict[str, Example]:
        return {ex.id: ex for ex in self.all_examples()}

    def subsets(self) -> list[str]:
        """Subset names in order of first appearance."""
        return list(dict.fromkeys(ex.subset for ex in self.examples))

    def summary(self) -> dict[str, Any]:
        n_con = sum(ex.consistent for ex in self.examples)
        out: dict[str, Any] = {
            "name": self.name,
            "source": self.source,
            "label_scheme": self.label_scheme,
            "n": len(self.examples),
            "n_consistent": n_con,
            "n_inconsistent": len(self.examples) - n_con,
            "labels": dict(Counter(ex.label for ex in self.examples)),
            "subsets": dict(Counter(ex.subset for ex in self.examples)),
        }
        if self.contexts:
            out["n_contexts"] = len(self.contexts)
            out["n_contexts_one_inconsistent"] = sum(c.one_inconsistent for c in self.contexts)
            out["n_extra_responses"] = len(self.extra)
        if self.pairs:
            out["n_pairs"] = len(self.pairs)
            out["pairs_by_method"] = dict(Counter(p.method for p in self.pairs))
        ratings = [ex.rating for ex in self.examples if ex.rating is not None]
        if ratings:
            out["n_rated"] = len(ratings)
            out["mean_rating"] = sum(ratings) / len(ratings)
        if self.notes:
            out["notes"] = list(self.notes)
        if self.skipped:
            out["skipped_rows"] = {"n": len(self.skipped),
                                   "by_reason": dict(Counter(r.reason for r in self.skipped)),
                                   "rows": [{"where": r.where, "reason": r.reason, "detail": r.detail}
                                            for r in self.skipped]}
        if self.flagged:
            out["flagged_labels"] = {"n": len(self.flagged),
                                     "by_reason": dict(Counter(r.reason for r in self.flagged)),
                                     "rows": [{"where": r.where, "reason": r.reason, "detail": r.detail}
                                              for r in self.flagged]}
        if self.caveats:
            out["caveats"] = list(self.caveats)
        if self.benchmark:
            out["benchmark"] = self.benchmark
        return out


@dataclass(frozen=True)
class SourceRow:
    """A grounded example a recipe starts from; ``dialogue`` (when known) keeps random pairs out of its dialogue,
    ``topic`` (when known) draws BEGIN's off-topic responses from the same topic. ``response``, ``knowledge`` and
    ``previous`` hold what the input held: a value that is not text is skipped and counted, never converted."""

    id: str
    response: Any
    knowledge: Any
    previous: Any = None
    dialogue: Optional[str] = None
    source: str = ""
    topic: Optional[str] = None
