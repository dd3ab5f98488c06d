"""Training-data recipes of the seed papers: BEGIN's silver set and Conv-FEVER's consistency data.

Both start from grounded examples (a response that holds for its knowledge, with the previous turn when known) and
write one :class:`TrainingRow` per made example: ``evidence``, ``previous_turn`` and ``response`` (a classifier
reads "evidence + previous turn" as premise and the response as hypothesis), ``label`` and ``label3``.

**BEGIN** (Dziri et al., §4; ``recipe="begin"``), five labels, balanced:

* ``entailment`` (``original``): the grounded response.
* ``hallucination``: a response grounded in *other, related* evidence: the evidence of the row whose evidence shares
  most content words with this one (never the same evidence, never none shared) is the perturbed evidence. By
  default (``neighbour_response``) the response written for that evidence is taken as is; with a generator
  (``generated``, BEGIN's own way) a dialogue model writes a new response from the previous turn and the perturbed
  evidence. Either is then paired with the *original* evidence: topical, unverifiable.
* ``off-topic`` (``unrelated_response``): the response of a row whose evidence shares no content word with this
  response's evidence, nor the response with it (another dialogue when dialogues are known).
* ``generic`` (``generic_response``): one of :data:`GENERIC_RESPONSES`, chosen at random.
* ``contradiction``: the response negated (``negation``, :func:`q2_plugins.perturb.negate`); the ``antonym`` method
  (a WordNet antonym replacing a word) needs WordNet's data, which no PyPI package ships, so it
  is skipped and counted for every row.

Each row gives at most one example per label; the set is then balanced by drawing, for every label, as many
examples as the rarest label has (``balance=False`` keeps them all).

**Conv-FEVER** (Santhanam et al., §4.1–4.2.3; ``recipe="conv-fever"``), labels ``consistent`` / ``inconsistent``
(``label3``: entailment / contradiction, as FEVER's supports / refutes): the original pair; ``random_response`` and
``random_knowledge`` (the response, or the knowledge, of another dialogue); ``negated_response`` and
``negated_knowledge`` (an auxiliary or copular verb of :data:`q2_plugins.perturb.NEGATABLE` gets "not" / "n't" or
loses it; in the knowledge, in the sentence the response draws on); ``entity_swap`` (a spaCy named entity of the
response shared with the knowledge replaced by another of its type). No balancing: every method that applies.

Every random choice comes from ``random.Random`` seeded with ``(seed, source id, method)``.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence

from .errors import ModelLoadError, SettingError
from .io import InputFormatError
from .perturb import Skip, _content_forms, entity_pool, negate, swap_entity
from .taxonomy import LABELS

if TYPE_CHECKING:
    from .perturb import PerturbOptions

__all__ = [
    "RECIPES",
    "BEGIN_METHODS",
    "CONV_FEVER_METHODS",
    "GENERIC_RESPONSES",
    "SourceRow",
    "TrainingRow",
    "RecipeReport",
    "ResponseGenerator",
    "HFResponseGenerator",
    "make_training_set",
    "label_table",
    "read_sources",
    "run_recipe",
]

RECIPES = ("begin", "conv-fever")
BEGIN_METHODS = {"original": "entailment", "neighbour_response": "hallucination", "generated": "hallucination",
                 "unrelated_response": "off-topic", "generic_response": "generic", "negation": "contradiction",
                 "antonym": "contradiction"}
CONV_FEVER_METHODS = ("original", "random_response", "random_knowledge", "negated_response", "negated_knowledge",
                      "entity_swap")
CONV_FEVER_LABEL3 = {"consistent": "entailment", "inconsistent": "contradiction"}
GENERIC_RESPONSES = (
    "that's interesting, tell me more.", "i don't know much about that.", "oh really? that's cool.",
    "i have never heard of that before.", "that sounds like a lot of fun.", "wow, i didn't know that.",
    "yes, i think so too.", "i'm not sure, what do you think?", "that's great!", "i agree with you.",
    "i would love to learn more about it.", "that is very nice.", "sounds good to me.", "how interesting!",
    "what else do you know about it?", "i like that a lot.",
)
WORDNET_SKIP = "WordNet is not installed: no PyPI package ships its data"


class GeneratorLoadError(SettingError, ModelLoadError):
    """The ``generator`` model cannot be loaded."""


class DatasetError(InputFormatError, SettingError):
    """An input that the ``dataset`` setting's reader cannot read."""


@dataclass(frozen=True)
class SourceRow:
    """A grounded example a recipe starts from; ``dialogue`` (when known) keeps random pairs out of its dialogue."""

    id: str
    response: str
    knowledge: str
    previous: Optional[str] = None
    dialogue: Optional[str] = None
    source: str = ""


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
    """What each method made, what it skipped and why, and the label counts before and after balancing."""

    recipe: str
    n_rows: int
    seed: int
    made: Counter = field(default_factory=Counter)
    skipped: dict[str, Counter] = field(default_factory=dict)
    candidates: Counter = field(default_factory=Counter)  # per label, before balancing
    labels: Counter = field(default_factory=Counter)  # per label, written
    by_method: Counter = field(default_factory=Counter)  # per method, written

    def skip(self, method: str, reason: str) -> None:
        self.skipped.setdefault(method, Counter())[reason] += 1

    def to_dict(self) -> dict[str, Any]:
        methods = sorted(set(self.made) | set(self.skipped), key=_method_order(self.recipe))
        return {"recipe": self.recipe, "n_rows": self.n_rows, "seed": self.seed,
                "labels": dict(self.labels), "candidates": dict(self.candidates),
                "methods": {m: {"made": self.made[m], "written": self.by_method[m],
                                "skipped": sum(self.skipped.get(m, Counter()).values()),
                                "reasons": dict(self.skipped.get(m, Counter()).most_common())} for m in methods}}


def _method_order(recipe: str) -> Callable[[str], int]:
    order = list(BEGIN_METHODS) if recipe == "begin" else list(CONV_FEVER_METHODS)
    return lambda m: order.index(m) if m in order else len(order)


class ResponseGenerator(Protocol):
    """Writes one response per (previous turn, evidence) prompt, batched (BEGIN's regenerated hallucinations)."""

    def generate(self, prompts: Sequence[tuple[str, str]]) -> list[str]: ...


def _row(src: SourceRow, recipe: str, method: str, label: str, label3: str, evidence: str, response: str,
         change: str) -> TrainingRow:
    return TrainingRow(id=f"{src.id}:{method}", source_id=src.id, recipe=recipe, method=method, label=label,
                       label3=label3, evidence=evidence, previous_turn=src.previous or "", response=response,
                       change=change, source=src.source)


class _Neighbours:
    """Content-word sets of every row's knowledge and response, and the related / unrelated rows of a row."""

    def __init__(self, rows: Sequence[SourceRow], kdocs: dict[str, Any], rdocs: Sequence[Any]) -> None:
        self.rows = rows
        self.kwords = [_content_forms(kdocs[r.knowledge]) for r in rows]
        self.rwords = [_content_forms(d) for d in rdocs]

    def related(self, i: int) -> Optional[int]:
        """The row whose knowledge shares most content words with row ``i``'s (other knowledge, >= 1 shared)."""
        own, best, best_n = self.rows[i].knowledge, None, 0
        for j, words in enumerate(self.kwords):
            n = len(words & self.kwords[i])
            if n > best_n and self.rows[j].knowledge != own and self.rows[j].response != self.rows[i].response:
                best, best_n = j, n
        return best

    def unrelated(self, i: int, rng: random.Random) -> Optional[int]:
        """A random row of another dialogue whose response and knowledge share no content word with row ``i``'s
        knowledge."""
        row, words = self.rows[i], self.kwords[i]
        options = [j for j in range(len(self.rows)) if not (self.rwords[j] & words) and not (self.kwords[j] & words)
                   and (row.dialogue is None or self.rows[j].dialogue != row.dialogue)]
        return rng.choice(options) if options else None


def _begin_examples(rows: Sequence[SourceRow], rdocs: Sequence[Any], kdocs: dict[str, Any],
                    generator: Optional[ResponseGenerator], seed: int, report: RecipeReport) -> list[TrainingRow]:
    near = _Neighbours(rows, kdocs, rdocs)
    out: list[TrainingRow] = []
    wanted: list[tuple[int, int]] = []  # (row, neighbour) whose hallucination the generator writes
    for i, (src, rdoc) in enumerate(zip(rows, rdocs)):
        out.append(_row(src, "begin", "original", "entailment", "entailment", src.knowledge, src.response,
                        "none: the grounded response"))
        j = near.related(i)
        method = "generated" if generator is not None else "neighbour_response"
        if j is None:
            report.skip(method, "no other evidence shares a content word with this one")
        elif generator is not None:
            wanted.append((i, j))
        else:
            out.append(_row(src, "begin", method, "hallucination", "neutral", src.knowledge, rows[j].response,
                            f"the response of row {rows[j].id}, whose evidence is related"))
        rng = random.Random(f"{seed}|{src.id}|unrelated_response")
        k = near.unrelated(i, rng)
        if k is None:
            report.skip("unrelated_response", "no response unrelated to this evidence in the data")
        else:
            out.append(_row(src, "begin", "unrelated_response", "off-topic", "neutral", src.knowledge,
                            rows[k].response, f"the response of row {rows[k].id}, whose evidence is unrelated"))
        rng = random.Random(f"{seed}|{src.id}|generic_response")
        out.append(_row(src, "begin", "generic_response", "generic", "neutral", src.knowledge,
                        rng.choice(GENERIC_RESPONSES), "a generic response"))
        neg = negate(rdoc, near.kwords[i])
        if isinstance(neg, Skip):
            report.skip("negation", neg.reason)
        else:
            out.append(_row(src, "begin", "negation", "contradiction", "contradiction", src.knowledge, neg.text,
                            neg.change))
        report.skip("antonym", WORDNET_SKIP)
    if generator is not None and wanted:
        texts = generator.generate([(rows[i].previous or "", rows[j].knowledge) for i, j in wanted])
        for (i, j), text in zip(wanted, texts):
            if not text.strip():
                report.skip("generated", "the generator wrote an empty response")
                continue
            out.append(_row(rows[i], "begin", "generated", "hallucination", "neutral", rows[i].knowledge,
                            text.strip(), f"generated from the evidence of row {rows[j].id}"))
    return out


def _other_dialogue(i: int, rows: Sequence[SourceRow], rng: random.Random, what: str) -> Optional[int]:
    row = rows[i]
    options = [j for j, r in enumerate(rows) if getattr(r, what) != getattr(row, what)
               and (row.dialogue is None or r.dialogue != row.dialogue)]
    return rng.choice(options) if options else None


def _conv_fever_examples(rows: Sequence[SourceRow], rdocs: Sequence[Any], kdocs: dict[str, Any], seed: int,
                         report: RecipeReport) -> list[TrainingRow]:
    pool = entity_pool(list(rdocs) + list(kdocs.values()))
    out: list[TrainingRow] = []
    for i, (src, rdoc) in enumerate(zip(rows, rdocs)):
        kdoc = kdocs[src.knowledge]

        def add(method: str, label: str, evidence: str, response: str, change: str, src: SourceRow = src) -> None:
            out.append(_row(src, "conv-fever", method, label, CONV_FEVER_LABEL3[label], evidence, response, change))

        add("original", "consistent", src.knowledge, src.response, "none: the grounded response")
        for method, what in (("random_response", "response"), ("random_knowledge", "knowledge")):
            j = _other_dialogue(i, rows, random.Random(f"{seed}|{src.id}|{method}"), what)
            if j is None:
                report.skip(method, "no other dialogue in the data")
            elif what == "response":
                add(method, "inconsistent", src.knowledge, rows[j].response, f"the response of row {rows[j].id}")
            else:
                add(method, "inconsistent", rows[j].knowledge, src.response, f"the knowledge of row {rows[j].id}")
        edits: list[tuple[str, Any]] = [
            ("negated_response", negate(rdoc, _content_forms(kdoc))),
            ("negated_knowledge", negate(kdoc, _content_forms(rdoc))),
            ("entity_swap", swap_entity(rdoc, kdoc.text, pool, random.Random(f"{seed}|{src.id}|entity_swap"))),
        ]
        for method, edit in edits:
            if isinstance(edit, Skip):
                report.skip(method, edit.reason)
            elif method == "negated_knowledge":
                add(method, "inconsistent", edit.text, src.response, edit.change)
            else:
                add(method, "inconsistent", src.knowledge, edit.text, edit.change)
    return out


def _balance(made: list[TrainingRow], seed: int) -> list[TrainingRow]:
    """As many examples of each label as the rarest label has, drawn at random; source order kept."""
    by_label: dict[str, list[int]] = {}
    for n, row in enumerate(made):
        by_label.setdefault(row.label, []).append(n)
    size = min(len(v) for v in by_label.values())
    keep: set[int] = set()
    for label, idx in by_label.items():
        keep.update(random.Random(f"{seed}|balance|{label}").sample(idx, size))
    return [row for n, row in enumerate(made) if n in keep]


def make_training_set(rows: Sequence[SourceRow], *, recipe: str, seed: int = 0, balance: bool = True,
                      generator: Optional[ResponseGenerator] = None, nlp: Any = None,
                      spacy_model: str = "en_core_web_sm") -> tuple[list[TrainingRow], RecipeReport]:
    """Make ``recipe``'s training examples (``"begin"`` or ``"conv-fever"``) from grounded ``rows``.

    Rows with an empty response or knowledge are skipped and counted; ids must be unique. ``balance`` applies to
    BEGIN only (Conv-FEVER keeps every example), ``generator`` to BEGIN's hallucinations only.
    """
    if recipe not in RECIPES:
        raise ValueError(f"Unknown recipe {recipe!r}; expected one of {list(RECIPES)}")
    if generator is not None and recipe != "begin":
        raise ValueError("A generator writes BEGIN's hallucinations: use it with recipe 'begin'")
    repeated = sorted(k for k, c in Counter(r.id for r in rows).items() if c > 1)
    if repeated:
        raise ValueError(f"source row ids must be unique; repeated: {repeated[:5]}")
    report = RecipeReport(recipe, len(rows), seed)
    usable = [r for r in rows if r.response.strip() and r.knowledge.strip()]
    for _ in range(len(rows) - len(usable)):
        report.skip("original", "empty response or knowledge")
    if nlp is None:
        from .spacy_parts import load_spacy

        nlp = load_spacy(spacy_model)
    rdocs = list(nlp.pipe([r.response for r in usable]))
    unique_k = list(dict.fromkeys(r.knowledge for r in usable))
    kdocs = dict(zip(unique_k, nlp.pipe(unique_k)))
    if recipe == "begin":
        made = _begin_examples(usable, rdocs, kdocs, generator, seed, report)
    else:
        made = _conv_fever_examples(usable, rdocs, kdocs, seed, report)
    order = {r.id: n for n, r in enumerate(usable)}
    methods = _method_order(recipe)
    made.sort(key=lambda t: (order[t.source_id], methods(t.method)))
    report.made.update(t.method for t in made)
    report.candidates.update(t.label for t in made)
    if recipe == "begin" and balance and made:
        made = _balance(made, seed)
    report.labels.update(t.label for t in made)
    report.by_method.update(t.method for t in made)
    return made, report


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


class HFResponseGenerator:
    """A Hugging Face causal or sequence-to-sequence LM writing responses from "evidence + previous turn" prompts:
    greedy decoding, ``batch_size`` prompts a call (left padding for causal models). Loaded on construction."""

    def __init__(self, model: str, *, batch_size: int = 16, max_new_tokens: int = 40, device: str = "cpu") -> None:
        from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForSeq2SeqLM, AutoTokenizer

        try:
            config = AutoConfig.from_pretrained(model)
            self.seq2seq = bool(getattr(config, "is_encoder_decoder", False))
            self.tokenizer = AutoTokenizer.from_pretrained(model, padding_side="left" if not self.seq2seq else "right")
            cls = AutoModelForSeq2SeqLM if self.seq2seq else AutoModelForCausalLM
            from .transformers_models import quiet_loading

            with quiet_loading():  # (no per-file loading bars)
                self.model = cls.from_pretrained(model).to(device).eval()
        except (OSError, ValueError) as e:
            raise GeneratorLoadError("generator", f"{model} could not be loaded ({str(e).splitlines()[0]}); name a "
                                                  f"local folder or hub name of a causal or seq2seq LM") from None
        if self.tokenizer.pad_token is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.batch_size, self.max_new_tokens, self.device = batch_size, max_new_tokens, device

    def generate(self, prompts: Sequence[tuple[str, str]]) -> list[str]:
        import torch

        texts = [f"knowledge: {evidence} previous turn: {previous} response:" for previous, evidence in prompts]
        out: list[str] = []
        for start in range(0, len(texts), self.batch_size):
            batch = self.tokenizer(texts[start:start + self.batch_size], return_tensors="pt", padding=True,
                                   truncation=True, max_length=512).to(self.device)
            with torch.no_grad():
                ids = self.model.generate(**batch, do_sample=False, max_new_tokens=self.max_new_tokens,
                                          pad_token_id=self.tokenizer.pad_token_id)
            if not self.seq2seq:
                ids = ids[:, batch["input_ids"].shape[1]:]
            out += [t.strip() for t in self.tokenizer.batch_decode(ids, skip_special_tokens=True)]
        return out


# -- reading the grounded rows, and the command line's recipe run ------------------------------------------------
_PREVIOUS = ("previous turn", "previous_turn", "message", "history")


def _kind(path: Path, dataset: str) -> str:
    if dataset != "auto":
        return dataset
    if path.is_dir():
        return "wow"
    if path.suffix.lower() == ".json":
        with path.open(encoding="utf-8") as f:
            if f.read(4096).lstrip().startswith("["):  # a JSON list: ParlAI's dialogues (a table is JSON lines)
                return "wow-json"
    if path.suffix.lower() == ".tsv":
        with path.open(encoding="utf-8") as f:
            header = f.readline().rstrip("\n").split("\t")
        if "response" in header and ("gold label" in header or "begin_label" in header):
            return "begin"
    return "table"


def _table_rows(path: Path, options: "PerturbOptions") -> list[SourceRow]:
    from .io import read_checked_rows
    from .perturb import _keep_filter

    keep = _keep_filter(options.keep)
    fields = [("response_column", options.response_column), ("knowledge_column", options.knowledge_column),
              ("id_column", options.id_column), ("topic_column", options.topic_column),
              ("previous_column", options.previous_column), ("keep", keep[0] if keep else None)]
    rows = [(n, r) for n, r in read_checked_rows(str(path), options.input_format, fields)
            if not keep or str(r[keep[0]]).strip() in keep[1]]
    first = rows[0][1] if rows else {}
    previous = options.previous_column or next((c for c in _PREVIOUS if c in first), None)
    topic = options.topic_column or ("topic" if "topic" in first else None)
    return [SourceRow(id=str(r[options.id_column]) if options.id_column else str(n),
                      response=str(r[options.response_column] or ""), knowledge=str(r[options.knowledge_column] or ""),
                      previous=str(r[previous] or "") if previous else None,
                      dialogue=str(r[topic]) if topic and r.get(topic) not in (None, "") else None)
            for n, r in rows]


_NO_KNOWLEDGE = "no_passages_used"


def _wow_json_rows(path: Path) -> list[SourceRow]:
    """Every wizard turn of ParlAI's ``wizard_of_wikipedia`` JSON (a list of dialogues, each a ``dialog`` list of
    turns): the wizard's text, the sentence of its ``checked_sentence`` (empty when none or ``no_passages_used``, so
    the recipe counts it as skipped) and the previous turn's text (the chosen topic for an opening turn)."""
    import json

    with path.open(encoding="utf-8") as f:
        try:
            data = json.load(f)
        except json.JSONDecodeError as e:
            raise DatasetError("dataset", f"{path}: not JSON ({e}); a JSONL table is dataset table") from None
    if not isinstance(data, list) or not all(isinstance(d, dict) and isinstance(d.get("dialog"), list)
                                              for d in data):
        raise InputFormatError(f"{path}: not a list of dialogues with a 'dialog' list (ParlAI's wizard_of_wikipedia"
                               f" JSON); name another --dataset")
    rows: list[SourceRow] = []
    for d, dialogue in enumerate(data):
        previous = str(dialogue.get("chosen_topic") or "") or None
        for t, turn in enumerate(dialogue["dialog"]):
            if not isinstance(turn, dict) or "speaker" not in turn or "text" not in turn:
                raise InputFormatError(f"{path}: dialogue {d} turn {t} has no 'speaker' / 'text'")
            if "Wizard" in str(turn["speaker"]):
                chosen = turn.get("checked_sentence") or {}
                sentence = str(next(iter(chosen.values()), "")) if isinstance(chosen, dict) else ""
                rows.append(SourceRow(id=f"{d}:{t}", response=str(turn["text"]), previous=previous, dialogue=str(d),
                                      knowledge="" if sentence == _NO_KNOWLEDGE else sentence))
            previous = str(turn["text"])
    return rows


def read_sources(path: str, options: "PerturbOptions") -> list[SourceRow]:
    """The grounded rows of one input: a Q² WoW folder's consistent responses, BEGIN's entailed (v1) or fully
    attributable (v2) ones, the wizard turns of ParlAI's ``wizard_of_wikipedia`` JSON, or every row of a table
    (``options.keep`` filters)."""
    where = Path(path)
    kind = _kind(where, options.dataset)
    if kind == "table":
        rows = _table_rows(where, options)
    elif kind == "wow-json":
        rows = _wow_json_rows(where)
    else:
        from .metaeval.loaders import load_begin, load_wow

        data = load_wow(where, cross_annotation=False) if kind == "wow" else load_begin(where)
        rows = [SourceRow(id=ex.id, response=ex.response, knowledge=ex.knowledge, previous=ex.history,
                          dialogue=ex.dialogue) for ex in data.examples if ex.consistent]
    name = where.name
    return [SourceRow(f"{name}/{r.id}", r.response, r.knowledge, r.previous, r.dialogue and f"{name}/{r.dialogue}",
                      f"{name} ({kind})") for r in rows]


def run_recipe(options: "PerturbOptions") -> tuple[dict[str, Any], list[str]]:
    """Read every input, make the recipe's training set, write it to ``options.output``; returns the summary and
    its printed lines (the label counts in the paper's table form)."""
    import json

    sources: list[SourceRow] = []
    per_input: dict[str, int] = {}
    for path in options.inputs:
        rows = read_sources(path, options)
        per_input[path] = len(rows)
        sources += rows
    if not sources:
        raise SettingError("dataset / keep", f"no grounded rows in {', '.join(options.inputs)}: check these and the "
                                             f"column settings")
    generator = HFResponseGenerator(options.generator) if options.generator else None
    made, report = make_training_set(sources, recipe=options.recipe or "", seed=options.seed,
                                     balance=options.balance, generator=generator, spacy_model=options.spacy_model)
    with open(options.output, "w", encoding="utf-8") as f:
        for row in made:
            f.write(json.dumps(row.to_dict(), ensure_ascii=False) + "\n")
    summary = {"inputs": per_input, "output": options.output, "generator": options.generator,
               "balance": options.balance, "n_examples": len(made), **report.to_dict()}
    read = ", ".join(f"{p}: {n}" for p, n in per_input.items())
    lines = [f"q2 perturb --recipe {options.recipe}: grounded rows {read}; seed {options.seed}"
             + (f"; hallucinations by {options.generator}" if options.generator else ""), *label_table(report),
             "| method | made | written | skipped | why skipped |", "|---|---|---|---|---|"]
    for method, m in summary["methods"].items():
        why = "; ".join(f"{reason}: {count}" for reason, count in m["reasons"].items())
        lines.append(f"| {method} | {m['made']} | {m['written']} | {m['skipped']} | {why} |")
    lines.append(f"wrote {len(made)} examples to {options.output}")
    return summary, lines
