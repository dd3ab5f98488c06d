"""Stress pairs for factual-consistency metrics: grounded responses perturbed so that they no longer hold.

In the spirit of Santhanam et al., "Rome was built in 1776" (Conv-FEVER) and of BEGIN's adversarial data, each
(response, knowledge) pair yields up to four labelled pairs, one per method:

* ``negation`` — the response negated on an auxiliary or copular verb (:data:`NEGATABLE`): "is" -> "is not",
  "can" -> "cannot", "didn't" -> "did"; a claim the knowledge supports, never a question, a quotation or title, the
  speaker's hedge ("i do know") or a "may". Expected: contradiction.
* ``entity_swap`` — a named entity (spaCy NER) that the response shares with the knowledge is replaced, in the
  response, by another entity of the same type (and, for dates and numbers, shape) seen in the data (never one in
  this response or knowledge), "a" / "an" agreeing. Expected: contradiction.
* ``random_pairing`` — the response with another example's knowledge: of the same topic when the data has topics
  and one is available (expected: hallucination, topical but unverifiable), else of another topic (expected:
  off-topic).
* ``inversion`` — subject and object of a knowledge clause swapped ("Romulus built Rome" -> "Rome built Romulus";
  passives through their agent), in the knowledge sentence the response draws on. Expected: contradiction.

Sentences where a method does not apply are skipped, and the reason counted, never forced: no negatable verb, only a
question's inverted verb, a clause negated elsewhere, a hedge, title or unsupported clause, no shared entity, no
replacement of the type and shape, no clause with a movable noun subject and object. The edits themselves are
:mod:`q2_plugins.training.edits` (negation, antonym, inversion) and :mod:`q2_plugins.training.entities` (entity
swaps), which the training recipes (:mod:`q2_plugins.training.recipes`) share; this module never imports the recipes.
Every random choice comes from ``random.Random`` seeded with ``(seed, source id, method)``: the same input and seed
give the same pairs, whatever the other rows or methods.
"""

from __future__ import annotations

import contextlib
import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Iterator, Mapping, Optional, Sequence, Union

from q2_plugins.datasets.grounded import table_rows
from q2_plugins.datasets.registry import recipe_inputs
from q2_plugins.datasets.textcheck import cells, default_budget, text_problem
from q2_plugins.io.columns import TextColumns
from q2_plugins.io.outputs import write_jsonl_atomic
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.progress import Progress
from q2_plugins.metric.spacy_parts import load_spacy
from q2_plugins.metric.taxonomy import COARSE
from q2_plugins.training.edits import Edit, Skip, content_forms, invert, negate
from q2_plugins.training.entities import entity_pool, swap_entity

__all__ = [
    "METHODS",
    "DATASETS",
    "EXPECTED_LABEL",
    "StressPair",
    "PerturbReport",
    "make_stress_pairs",
    "counted",
    "PerturbOptions",
    "stress_pairs",
]

METHODS = ("negation", "entity_swap", "random_pairing", "inversion")
DATASETS = ("auto", *recipe_inputs(), "wow-json", "table")  # how q2 perturb --recipe reads an input
EXPECTED_LABEL = {"negation": "contradiction", "entity_swap": "contradiction", "inversion": "contradiction",
                  "random_pairing": "off-topic"}  # random pairing within a topic: hallucination
_PERTURBS = {"negation": "response", "entity_swap": "response", "inversion": "knowledge",
             "random_pairing": "knowledge"}


# -- random pairing -------------------------------------------------------------------------------------------------
def _key(text: str) -> str:
    return " ".join(text.lower().split())


def _pair_randomly(i: int, knowledge: Sequence[str], topics: Optional[Sequence[Optional[str]]],
                   by_topic: Mapping[str, list[str]], distinct: Sequence[str],
                   rng: random.Random) -> Union[Edit, Skip]:
    """Another example's knowledge: of the same topic when possible (hallucination), else any other (off-topic)."""
    own = _key(knowledge[i])
    topic = topics[i] if topics is not None else None
    if topic:
        same = [k for k in by_topic.get(topic, []) if _key(k) != own]
        if same:
            return Edit(rng.choice(same), "knowledge of the same topic", "hallucination")
    for _ in range(1000):
        other = rng.choice(distinct)
        if _key(other) != own and not (topic and other in by_topic.get(topic, ())):
            change = "knowledge of another topic" if topic else "knowledge of another example (no topic)"
            return Edit(other, change, "off-topic")
    return Skip("no other knowledge in the data")


# -- the whole data set -------------------------------------------------------------------------------------------
@dataclass
class StressPair:
    """An original (response, knowledge) pair and one perturbation of it, with the label it should now get."""

    id: str
    source_id: str
    method: str
    expected_label: str
    expected_label3: str
    change: str
    original_response: str
    original_knowledge: str
    perturbed_response: str
    perturbed_knowledge: str
    topic: Optional[str] = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PerturbReport:
    """How many pairs each method made, and why it skipped the others."""

    n_rows: int
    methods: tuple[str, ...]
    seed: int
    made: Counter = field(default_factory=Counter)
    skipped: dict[str, Counter] = field(default_factory=dict)

    def skip(self, method: str, reason: str) -> None:
        self.skipped.setdefault(method, Counter())[reason] += 1

    def to_dict(self) -> dict[str, Any]:
        return {"n_rows": self.n_rows, "seed": self.seed,
                "methods": {m: {"pairs": self.made[m], "skipped": sum(self.skipped.get(m, Counter()).values()),
                                "reasons": dict(self.skipped.get(m, Counter()).most_common())}
                            for m in self.methods}}


def _stress_inputs(responses: Sequence[Any], knowledge: Sequence[Any], ids: Optional[Sequence[Any]],
                   topics: Optional[Sequence[Any]], methods: Sequence[str]
                   ) -> tuple[tuple[str, ...], list[str], Optional[list[Optional[str]]]]:
    """The methods (known, once each), the row ids (unique) and topics of :func:`make_stress_pairs`'s input, or a
    ``ValueError`` saying what does not fit."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"Unknown perturbation method(s) {unknown}; expected names from {list(METHODS)}")
    n = len(responses)
    if len(knowledge) != n:
        raise ValueError(f"Expected as many knowledge texts as responses, but got {len(knowledge)} for {n}")
    for name, column in (("ids", ids), ("topics", topics)):
        if column is not None and len(column) != n:
            raise ValueError(f"Expected one of {name} per response, but got {len(column)} for {n}")
    source_ids = [str(i) for i in (ids if ids is not None else range(n))]
    repeated = sorted(k for k, c in Counter(source_ids).items() if c > 1)
    if repeated:
        raise ValueError(f"ids must be unique; repeated: {repeated[:5]}")
    topic_of = [str(t) if t not in (None, "") else None for t in topics] if topics is not None else None
    return tuple(dict.fromkeys(methods)), source_ids, topic_of


def _cell_problems(responses: Sequence[Any], knowledge: Sequence[Any], max_response_chars: Optional[int],
                   max_knowledge_chars: Optional[int]) -> list[Optional[str]]:
    """Why each row's response or knowledge is no usable text (:func:`q2_plugins.datasets.textcheck.text_problem`,
    within ``q2 score``'s budgets by default), or None."""

    r_budget = default_budget("max_response_chars") if max_response_chars is None else max_response_chars
    k_budget = default_budget("max_knowledge_chars") if max_knowledge_chars is None else max_knowledge_chars
    return [text_problem(r, "response", r_budget, detail=False, setting="max_response_chars")
            or text_problem(k, "knowledge", k_budget, detail=False, setting="max_knowledge_chars")
            for r, k in zip(responses, knowledge)]


def make_stress_pairs(
    *,
    responses: Sequence[Any],
    knowledge: Sequence[Any],
    ids: Optional[Sequence[Any]] = None,
    topics: Optional[Sequence[Any]] = None,
    methods: Sequence[str] = METHODS,
    seed: int = 0,
    nlp: Any = None,
    spacy_model: str = "en_core_web_sm",
    max_response_chars: Optional[int] = None,
    max_knowledge_chars: Optional[int] = None,
    progress: Any = None,
) -> tuple[list[StressPair], PerturbReport]:
    """Perturb every (response, knowledge) pair with every method; returns the pairs (row order, then method order)
    and the report of what was made and skipped. A row whose response or knowledge is no usable text
    (:func:`q2_plugins.datasets.textcheck.text_problem`: not a string, empty, a control or zero-width character, a lone
    surrogate) or over its budget (default: ``q2 score``'s ``max_response_chars`` / ``max_knowledge_chars``; 0 = no
    limit) is skipped by every method, its reason counted. ``ids`` (default: the row numbers) must be unique;
    ``topics`` steer the random pairing. ``progress``, a :class:`~q2_plugins.metric.progress.Progress`, counts the rows
    through the stages ``parse`` (spaCy) and ``perturb``."""
    methods, source_ids, topic_of = _stress_inputs(responses, knowledge, ids, topics, methods)
    n = len(responses)
    if nlp is None:
        nlp = load_spacy(spacy_model)

    problems = _cell_problems(responses, knowledge, max_response_chars, max_knowledge_chars)
    resp = [r if p is None else None for r, p in zip(responses, problems)]
    know = [k if p is None else None for k, p in zip(knowledge, problems)]
    usable = [i for i in range(n) if problems[i] is None]
    report = PerturbReport(n, methods, seed)
    rdocs, kdocs = _parsed(nlp, [resp[i] for i in usable], usable, [know[i] for i in usable], progress, n)
    unique_k = list(kdocs)
    pool = entity_pool(list(rdocs.values()) + list(kdocs.values())) if "entity_swap" in methods else {}
    distinct = list(unique_k)
    by_topic: dict[str, list[str]] = {}
    if topic_of is not None:
        for i in usable:
            if topic_of[i] is not None and know[i] not in by_topic.setdefault(topic_of[i], []):
                by_topic[topic_of[i]].append(know[i])  # type: ignore[arg-type]

    pairs: list[StressPair] = []
    for i in counted(range(n), progress, "perturb"):
        if i not in rdocs:
            for m in methods:
                report.skip(m, problems[i] or "")
            continue
        rdoc, kdoc = rdocs[i], kdocs[know[i]]
        for method in methods:
            rng = random.Random(f"{seed}|{source_ids[i]}|{method}")
            if method == "negation":
                out = negate(rdoc, content_forms(kdoc))
            elif method == "entity_swap":
                out = swap_entity(rdoc, kdoc.text, pool, rng)
            elif method == "inversion":
                out = invert(kdoc, content_forms(rdoc))
            else:
                out = _pair_randomly(i, know, topic_of, by_topic, distinct, rng)  # type: ignore[arg-type]
            if isinstance(out, Skip):
                report.skip(method, out.reason)
                continue
            report.made[method] += 1
            new_r, new_k = (out.text, kdoc.text) if _PERTURBS[method] == "response" else (rdoc.text, out.text)
            expected = out.expected_label or EXPECTED_LABEL[method]
            pairs.append(StressPair(
                id=f"{source_ids[i]}:{method}", source_id=source_ids[i], method=method, expected_label=expected,
                expected_label3=COARSE[expected], change=out.change, original_response=rdoc.text,
                original_knowledge=kdoc.text, perturbed_response=new_r, perturbed_knowledge=new_k,
                topic=topic_of[i] if topic_of is not None else None,
            ))
    if progress is not None:
        progress.rows_done(n)
    return pairs, report


_EVERY = 64  # rows (or spaCy documents) between two moves of the progress count


def _parsed(nlp: Any, responses: list[Any], positions: list[int], knowledge: list[Any], progress: Any,
            rows: int) -> tuple[dict[int, Any], dict[Any, Any]]:
    """The spaCy documents of the responses (by row position) and of each distinct knowledge, in first-seen order;
    ``progress`` (if any) starts its call of ``rows`` rows here (stages ``parse``, then ``perturb``) and counts the
    documents as ``parse``."""
    unique_k = list(dict.fromkeys(knowledge))
    if progress is not None:
        progress.start(rows, ["parse", "perturb"])
        progress.add("parse", len(responses) + len(unique_k))
        progress.add("perturb", rows)
    rdocs = dict(zip(positions, counted(nlp.pipe(responses), progress, "parse")))
    return rdocs, dict(zip(unique_k, counted(nlp.pipe(unique_k), progress, "parse")))


def counted(items: Any, progress: Any, stage: str) -> Iterator[Any]:
    """``items`` as they come; ``progress`` (if any) is told of each :data:`_EVERY` once the caller is done with
    them (and of the rest at the end) as items of ``stage``."""
    if progress is None:
        yield from items
        return
    done = 0
    progress.stage(stage)
    for item in items:
        yield item
        done += 1
        if done % _EVERY == 0:
            progress.advance(stage, _EVERY)
            progress.stage(stage)
    if done % _EVERY:
        progress.advance(stage, done % _EVERY)


# -- command line: q2 perturb --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PerturbOptions(TextColumns):
    """What ``q2 perturb`` does, as typed settings (the command line maps its flags one-to-one onto these).

    ``recipe`` None makes stress pairs of one input with ``methods``; ``"begin"`` / ``"conv-fever"`` make a training
    set (:mod:`q2_plugins.training.recipes`) from the grounded rows of every input. ``dataset`` says how an input is
    read:
    ``wow`` (the Q² WoW folder: its consistent files), ``begin`` (BEGIN v1 or v2 TSV: its entailed / fully
    attributable rows), ``wow-json`` (ParlAI's ``wizard_of_wikipedia`` JSON: its wizard turns), ``table`` (any JSONL /
    CSV / TSV: the column settings and ``keep``), or ``auto`` (a folder is ``wow``, a TSV with BEGIN's columns
    ``begin``, a ``.json`` file holding a list ``wow-json``, anything else ``table``).
    """

    inputs: tuple[str, ...]
    output: str
    recipe: Optional[str] = None
    dataset: str = "auto"
    input_format: Optional[str] = None
    previous_column: Optional[str] = None
    id_column: Optional[str] = None
    topic_column: Optional[str] = None
    keep: Optional[str] = None
    methods: tuple[str, ...] = METHODS
    seed: int = 0
    spacy_model: str = "en_core_web_sm"
    generator: Optional[str] = None
    balance: bool = True
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.inputs:
            raise SettingError("inputs", "name at least one input")
        if self.recipe is None and len(self.inputs) > 1:
            raise SettingError("inputs", "stress pairs read one input; several inputs go with recipe begin or "
                                         "conv-fever")
        if self.generator and self.recipe != "begin":
            raise SettingError("generator", "writes BEGIN's hallucinations: use it with recipe begin")
        if self.exclude and self.recipe is None:
            raise SettingError("exclude", "keeps evaluation rows out of a training set: use it with a recipe")
        if self.dataset not in DATASETS:
            raise SettingError("dataset", f"must be one of {', '.join(DATASETS)}, got {self.dataset!r}")


def stress_pairs(options: PerturbOptions, progress: bool = False) -> dict[str, Any]:
    """Read ``options.inputs[0]``, make its stress pairs, write them to ``options.output``; returns the summary.
    ``progress``: the rows counted on standard error as ``q2 score`` counts them (a bar on a terminal, plain lines
    in a log)."""

    path = options.inputs[0]
    fields = [("response_column", options.response_column), ("knowledge_column", options.knowledge_column),
              ("id_column", options.id_column), ("topic_column", options.topic_column)]
    rows, first, n_read = table_rows(path, options.input_format, fields, options.keep)
    id_column = options.id_column or ("id" if "id" in first else None)
    topic_column = options.topic_column or ("topic" if "topic" in first else None)
    columns = [cells(row, options.response_column, options.knowledge_column) for _, row in rows]
    with contextlib.ExitStack() as stack:
        bar = None
        if progress:
            bar = stack.enter_context(Progress(total=len(rows)))
        pairs, report = make_stress_pairs(
            responses=[c[0] for c in columns], knowledge=[c[1] for c in columns],
            ids=[f"unreadable row {n}" if "__error__" in row else row.get(id_column) if id_column else n
                 for n, row in rows],
            topics=[row.get(topic_column) for _, row in rows] if topic_column else None,
            methods=options.methods, seed=options.seed, spacy_model=options.spacy_model, progress=bar,
        )
    write_jsonl_atomic(options.output, (pair.to_dict() for pair in pairs))
    return {"input": path, "n_read": n_read, "keep": options.keep, "output": options.output,
            "n_pairs": len(pairs), "id_column": id_column, "topic_column": topic_column, **report.to_dict()}
