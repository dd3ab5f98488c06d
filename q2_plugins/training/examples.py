"""The frame every training-data recipe shares: its names and method tables (:data:`RECIPES`, :data:`BEGIN_METHODS`,
:data:`CONV_FEVER_METHODS`, :data:`RULES`), the made example (:class:`TrainingRow`) and the report of what was made and
skipped (:class:`RecipeReport`), the evaluation texts a training set must not share (:func:`evaluation_texts`), and
the tables and preview ``q2 perturb --recipe`` prints.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Optional, Protocol, Sequence

from q2_plugins.datasets.grounded import SourceRow
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.taxonomy import LABELS

__all__ = [
    "RECIPES",
    "BEGIN_METHODS",
    "CONV_FEVER_METHODS",
    "CONV_FEVER_LABEL3",
    "RULES",
    "LEAKED",
    "TrainingRow",
    "RecipeReport",
    "ResponseGenerator",
    "method_order",
    "training_row",
    "label_table",
    "preview_lines",
    "normalised",
    "EvaluationTexts",
    "evaluation_texts",
]


RECIPES = ("begin", "conv-fever")
BEGIN_METHODS = {"original": "entailment", "personal_response": "hallucination", "neighbour_response": "hallucination",
                 "generated": "hallucination",
                 "unrelated_response": "off-topic", "generic_response": "generic", "negation": "contradiction",
                 "antonym": "contradiction"}
CONV_FEVER_METHODS = ("original", "random_response", "random_knowledge", "negated_response", "negated_knowledge",
                      "entity_swap")
CONV_FEVER_LABEL3 = {"consistent": "entailment", "inconsistent": "contradiction"}
#: the rule behind each method's label, as ``--preview`` prints it
RULES = {
    ("begin", "original"): "entailment: the grounded response, kept when it passes BEGIN's filter (no first-person "
                           "pronoun, at least 25% of its words in the evidence)",
    ("begin", "personal_response"): "hallucination: the grounded response, close to the evidence, telling a personal "
                                    "experience or taste (BEGIN counts these as hallucinations): not verifiable",
    ("begin", "neighbour_response"): "hallucination: the response written for other evidence of the same topic, "
                                     "sharing a noun, adjective or number with this evidence and adding to it: "
                                     "on topic, not verifiable",
    ("begin", "generated"): "hallucination: generated from this evidence perturbed (subject / object swap, or up to "
                            "two same-type entity swaps): on topic, not verifiable",
    ("begin", "unrelated_response"): "off-topic: a response about something else (a noun of its own evidence), "
                                     "sharing no content word with this evidence nor the topic's name; of the same "
                                     "topic where the data has one, else of another",
    ("begin", "generic_response"): "generic: a stock reply, written in the input's tokenisation",
    ("begin", "negation"): "contradiction: a claim of the response that the evidence supports, negated",
    ("begin", "antonym"): "contradiction: an adjective the evidence uses, replaced by its WordNet antonym",
    ("conv-fever", "original"): "consistent: the grounded response",
    ("conv-fever", "random_response"): "inconsistent (three-way neutral): the response of another dialogue",
    ("conv-fever", "random_knowledge"): "inconsistent (three-way neutral): the knowledge of another dialogue",
    ("conv-fever", "negated_response"): "inconsistent: a claim of the response that the knowledge supports, negated",
    ("conv-fever", "negated_knowledge"): "inconsistent: the clause of the knowledge sentence the response draws on, "
                                         "negated",
    ("conv-fever", "entity_swap"): "inconsistent: an entity shared with the knowledge, replaced by another of its "
                                   "type and shape",
}
_REPLACED = {"neighbour_response", "generated", "unrelated_response", "generic_response", "random_response",
             "random_knowledge"}  # methods that replace a whole text (the preview shows both, no marks)
@dataclass
class TrainingRow:
    """One made example: premise parts, hypothesis, label (and the three-way label), and how it was made."""

    id: str
    source_id: str
    recipe: str
    method: str
    label: str
    label3: str
    evidence: str
    previous_turn: str
    response: str
    change: str
    source: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RecipeReport:
    """What each method made, what it skipped and why, where it fell back, and the label counts before and after
    balancing."""

    recipe: str
    n_rows: int
    seed: int
    made: Counter = field(default_factory=Counter)
    skipped: dict[str, Counter] = field(default_factory=dict)
    fallbacks: dict[str, Counter] = field(default_factory=dict)
    candidates: Counter = field(default_factory=Counter)  # per label, before balancing
    labels: Counter = field(default_factory=Counter)  # per label, written
    by_method: Counter = field(default_factory=Counter)  # per method, written
    shortfall: Counter = field(default_factory=Counter)  # per label, the usable rows that gave no example of it
    #: per method, the candidates dropped by reason (BEGIN's same-topic off-topic responses about the evidence's
    #: subject, its contradictions of responses with a personal clause)
    dropped: dict[str, Counter] = field(default_factory=dict)

    def short(self, label: str) -> None:
        self.shortfall[label] += 1

    def skip(self, method: str, reason: str) -> None:
        self.skipped.setdefault(method, Counter())[reason] += 1

    def drop(self, method: str, reason: str) -> None:
        self.dropped.setdefault(method, Counter())[reason] += 1

    def fallback(self, method: str, reason: str) -> None:
        self.fallbacks.setdefault(method, Counter())[reason] += 1

    def to_dict(self) -> dict[str, Any]:
        methods = sorted(set(self.made) | set(self.skipped), key=method_order(self.recipe))
        out: dict[str, Any] = {"recipe": self.recipe, "n_rows": self.n_rows, "seed": self.seed,
                               "labels": dict(self.labels), "candidates": dict(self.candidates),
                               "shortfall": dict(self.shortfall), "methods": {}}
        for m in methods:
            out["methods"][m] = {"made": self.made[m], "written": self.by_method[m],
                                 "skipped": sum(self.skipped.get(m, Counter()).values()),
                                 "reasons": dict(self.skipped.get(m, Counter()).most_common())}
            if m in self.fallbacks:
                out["methods"][m]["fallbacks"] = dict(self.fallbacks[m].most_common())
            if m in self.dropped:
                out["methods"][m]["dropped"] = dict(self.dropped[m].most_common())
        return out


def method_order(recipe: str) -> Callable[[str], int]:
    order = list(BEGIN_METHODS) if recipe == "begin" else list(CONV_FEVER_METHODS)
    return lambda m: order.index(m) if m in order else len(order)


class ResponseGenerator(Protocol):
    """Writes one response per (previous turn, evidence) prompt, batched: greedy, or sampled at ``temperature``
    (BEGIN's regenerated hallucinations, and its generic responses from the previous turn alone)."""

    def generate(self, prompts: Sequence[tuple[str, str]], temperature: Optional[float] = None) -> list[str]: ...


def training_row(src: SourceRow, recipe: str, method: str, label: str, label3: str, evidence: str, response: str,
                 change: str) -> TrainingRow:
    """The :class:`TrainingRow` of ``method`` made from the grounded row ``src`` (its id is ``SOURCE_ID:METHOD``)."""
    return TrainingRow(id=f"{src.id}:{method}", source_id=src.id, recipe=recipe, method=method, label=label,
                       label3=label3, evidence=evidence, previous_turn=src.previous or "", response=response,
                       change=change, source=src.source)


def label_table(report: RecipeReport) -> list[str]:
    """The label counts as the papers tabulate them: BEGIN's per label (with the methods behind each), Conv-FEVER's
    per method (with its label); markdown lines."""
    d = report.to_dict()
    if report.recipe == "begin":
        lines = ["| label | examples | made (before balancing) | methods |", "|---|---|---|---|"]
        for label in LABELS:
            used = [m for m, lab in BEGIN_METHODS.items() if lab == label and m in d["methods"]]
            lines.append(f"| {label} | {report.labels[label]} | {report.candidates[label]} | {', '.join(used)} |")
        lines.append(f"| total | {sum(report.labels.values())} | {sum(report.candidates.values())} | |")
        return lines
    lines = ["| method | label | examples |", "|---|---|---|"]
    for method in CONV_FEVER_METHODS:
        label = "consistent" if method == "original" else "inconsistent"
        lines.append(f"| {method} | {label} | {report.by_method[method]} |")
    lines.append(f"| total | consistent {report.labels['consistent']} / inconsistent "
                 f"{report.labels['inconsistent']} | {sum(report.labels.values())} |")
    return lines


def _marked(before: str, after: str) -> str:
    """``after`` with its words changed from ``before`` marked: ``[-removed-]`` and ``{+added+}``."""
    import difflib

    old, new = before.split(), after.split()
    out: list[str] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if op == "equal":
            out += new[j1:j2]
            continue
        if i2 > i1:
            out.append("[-" + " ".join(old[i1:i2]) + "-]")
        if j2 > j1:
            out.append("{+" + " ".join(new[j1:j2]) + "+}")
    return " ".join(out)


def preview_lines(made: Sequence[TrainingRow], sources: Sequence[SourceRow], n: int, seed: int = 0,
                  width: int = 300) -> list[str]:
    """``n`` examples of each method drawn at random (seeded), each with its label, the rule that gave it, what
    changed and the texts, edits marked against the grounded row (``[-removed-]``, ``{+added+}``)."""
    by_id = {s.id: s for s in sources}
    by_method: dict[str, list[TrainingRow]] = {}
    for row in made:
        by_method.setdefault(row.method, []).append(row)
    if not made or n <= 0:
        return []

    def cut(text: str) -> str:
        return text if len(text) <= width else text[:width] + " ..."

    recipe = made[0].recipe
    lines: list[str] = []
    for method in sorted(by_method, key=method_order(recipe)):
        rows = by_method[method]
        picked = random.Random(f"{seed}|preview|{method}").sample(rows, min(n, len(rows)))
        lines += ["", f"== {method}: {len(picked)} of {len(rows)} written; label {rows[0].label} / "
                      f"{rows[0].label3}: {RULES[(recipe, method)]}"]
        for row in picked:
            src = by_id[row.source_id]
            lines.append(f"- {row.id}  change: {row.change}")
            if method in _REPLACED:
                lines += [f"  evidence: {cut(row.evidence)}", f"  grounded response: {cut(src.response)}",
                          f"  response: {cut(row.response)}"]
            elif row.evidence != src.knowledge:
                lines += [f"  evidence: {cut(_marked(src.knowledge, row.evidence))}",
                          f"  response: {cut(row.response)}"]
            else:
                lines += [f"  evidence: {cut(row.evidence)}",
                          f"  response: {cut(_marked(src.response, row.response))}"]
    return lines


LEAKED = "shares an evidence passage or a response with an evaluation file"


def normalised(text: Any) -> str:
    """``text`` lower-cased with its whitespace runs made one space: how passages and responses are compared."""
    return " ".join(str(text).lower().split())


@dataclass(frozen=True)
class EvaluationTexts:
    """The normalised evidence passages and responses of the evaluation files a training set is scored against."""

    passages: frozenset
    responses: frozenset

    def shares(self, evidence: Any, response: Any) -> bool:
        """Whether a row's evidence or response is one of the evaluation files'."""
        return normalised(evidence) in self.passages or normalised(response) in self.responses


def evaluation_texts(paths: Sequence[str]) -> EvaluationTexts:
    """The evidence passages (column ``evidence`` or ``knowledge``) and responses (``response``) of every row of
    ``paths``: CSV, TSV or JSONL files, or folders of them (a Q² WoW folder, BEGIN's TSV files), all rows whatever
    their label."""
    import csv
    import json
    from pathlib import Path

    passages: set[str] = set()
    responses: set[str] = set()
    for path in map(Path, paths):
        files = sorted(p for p in path.rglob("*") if p.suffix in (".csv", ".tsv", ".jsonl")) if path.is_dir() \
            else [path]
        if not files:
            raise SettingError("exclude", f"{path} holds no CSV, TSV or JSONL file")
        for file in files:
            with file.open(encoding="utf-8", newline="") as f:
                if file.suffix == ".jsonl":
                    records = [json.loads(line) for line in f if line.strip()]
                else:
                    records = list(csv.DictReader(f, delimiter="\t" if file.suffix == ".tsv" else ","))
            for r in records:
                if not isinstance(r, dict):
                    continue
                evidence = r.get("evidence", r.get("knowledge"))
                if evidence not in (None, ""):
                    passages.add(normalised(evidence))
                if r.get("response") not in (None, ""):
                    responses.add(normalised(r["response"]))
    return EvaluationTexts(frozenset(passages), frozenset(responses))


