"""Training-data recipes of the seed papers, and their runner: BEGIN's silver set (:mod:`q2_plugins.training.begin`)
and Conv-FEVER's consistency data (here).

Both start from grounded examples (a response that holds for its knowledge, with the previous turn when known) and
write one :class:`~q2_plugins.training.examples.TrainingRow` per made example: ``evidence``, ``previous_turn`` and
``response`` (a classifier reads "evidence + previous turn" as premise and the response as hypothesis), ``label`` and
``label3``. BEGIN's set is balanced by drawing, for every label, as many examples as the rarest label has
(``balance=False`` keeps them all).

**Conv-FEVER** (Santhanam et al., §4.1–4.2.3; ``recipe="conv-fever"``), labels ``consistent`` / ``inconsistent``:
the original pair; ``random_response`` and ``random_knowledge`` (the response, or the knowledge, of another
dialogue: three-way ``neutral``, unrelated rather than refuted); ``negated_response`` and ``negated_knowledge`` (an
auxiliary or copular verb of :data:`q2_plugins.training.edits.NEGATABLE` gets "not" / "n't" or loses it, in a clause
sharing a content word with the other text; in the knowledge, only in the sentence the response draws on);
``entity_swap`` (a spaCy named entity of the response shared with the knowledge replaced by another of its type, and of
its shape for dates and numbers, "a" / "an" agreeing). Three-way: entailment / contradiction as FEVER's supports /
refutes. No balancing: every method that applies.

Both recipes skip and count rows whose response or knowledge is not text, empty, or over ``q2 score``'s per-row
budgets, and drop rows repeating an earlier row's evidence and response (counted under their method).
Every random choice comes from ``random.Random`` seeded with ``(seed, source id, method)``.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import TYPE_CHECKING, Any, Optional, Sequence

from q2_plugins import __version__
from q2_plugins.backends.hf.generator import HFResponseGenerator
from q2_plugins.datasets.grounded import SourceRow, read_sources
from q2_plugins.datasets.textcheck import default_budget, text_problem
from q2_plugins.io.outputs import meta_path, write_json_atomic, write_jsonl_atomic
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.progress import Progress
from q2_plugins.metric.spacy_parts import load_spacy
from q2_plugins.training.begin import begin_examples, off_topic_draws
from q2_plugins.training.edits import Skip, content_forms, model_words, negate, wordnet_antonyms
from q2_plugins.training.entities import entity_pool, swap_entity
from q2_plugins.training.examples import (
    CONV_FEVER_LABEL3,
    LEAKED,
    RECIPES,
    EvaluationTexts,
    RecipeReport,
    ResponseGenerator,
    TrainingRow,
    evaluation_texts,
    label_table,
    method_order,
    preview_lines,
    training_row,
)
from q2_plugins.training.perturb import counted

if TYPE_CHECKING:
    from q2_plugins.training.perturb import PerturbOptions

__all__ = [
    "make_training_set",
    "run_recipe",
]


def _other_dialogue(i: int, rows: Sequence[SourceRow], rng: random.Random, what: str) -> Optional[int]:
    row = rows[i]
    options = [j for j, r in enumerate(rows) if getattr(r, what) != getattr(row, what)
               and (row.dialogue is None or r.dialogue != row.dialogue)]
    return rng.choice(options) if options else None


def _conv_fever_examples(rows: Sequence[SourceRow], rdocs: Sequence[Any], kdocs: dict[str, Any], seed: int,
                         report: RecipeReport, progress: Any = None) -> list[TrainingRow]:
    pool = entity_pool(list(kdocs.values()))  # cased text: the tagger's types hold better than on lower-cased responses
    out: list[TrainingRow] = []
    for i, (src, rdoc) in enumerate(counted(zip(rows, rdocs), progress, "examples")):
        kdoc = kdocs[src.knowledge]

        def add(method: str, label: str, evidence: str, response: str, change: str, src: SourceRow = src,
                label3: Optional[str] = None) -> None:
            out.append(training_row(src, "conv-fever", method, label, label3 or CONV_FEVER_LABEL3[label], evidence,
                                            response, change))

        add("original", "consistent", src.knowledge, src.response, "none: the grounded response")
        for method, what in (("random_response", "response"), ("random_knowledge", "knowledge")):
            j = _other_dialogue(i, rows, random.Random(f"{seed}|{src.id}|{method}"), what)
            if j is None:
                report.skip(method, "no other dialogue in the data")
            elif what == "response":
                add(method, "inconsistent", src.knowledge, rows[j].response, f"the response of row {rows[j].id}",
                    label3="neutral")
            else:
                add(method, "inconsistent", rows[j].knowledge, src.response, f"the knowledge of row {rows[j].id}",
                    label3="neutral")
        edits: list[tuple[str, Any]] = [
            ("negated_response", negate(rdoc, content_forms(kdoc))),
            ("negated_knowledge", negate(kdoc, content_forms(rdoc), best_sentence_only=True)),
            ("entity_swap", swap_entity(rdoc, kdoc.text, pool, random.Random(f"{seed}|{src.id}|entity_swap"),
                                        knowledge_doc=kdoc)),
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


def _unique(made: list[TrainingRow], report: RecipeReport) -> list[TrainingRow]:
    """The rows whose (evidence, response) no earlier row has (whitespace and case aside): a repeat is counted
    under its method, as a duplicate (same label) or a conflict (another label)."""
    seen: dict[tuple[str, str], TrainingRow] = {}
    out = []
    for row in made:
        key = (" ".join(row.evidence.lower().split()), " ".join(row.response.lower().split()))
        first = seen.setdefault(key, row)
        if first is row:
            out.append(row)
        elif first.label == row.label:
            report.skip(row.method, "repeats an earlier row's evidence, response and label")
        else:
            report.skip(row.method, f"same evidence and response as an earlier row labelled {first.label}")
    return out


def _checked(rows: Sequence[SourceRow], report: RecipeReport, budgets: dict[str, int]) -> list[SourceRow]:
    """The rows whose response and knowledge are text within ``budgets`` and whose previous turn is text or absent
    (:func:`q2_plugins.datasets.textcheck.text_problem`: not a number or list, nothing invisible, no control or
    zero-width character, no lone surrogate); each other row is skipped and counted under ``original`` with its
    reason."""

    usable = []
    for r in rows:
        why = (text_problem(r.response, "response", budgets["response"], detail=False, setting="max_response_chars")
               or text_problem(r.knowledge, "knowledge", budgets["knowledge"], detail=False,
                               setting="max_knowledge_chars")
               or text_problem(r.previous, "previous turn", budgets["knowledge"], required=False, detail=False,
                               setting="max_knowledge_chars"))
        if why:
            report.skip("original", why)
        else:
            usable.append(r)
    return usable


def make_training_set(rows: Sequence[SourceRow], *, recipe: str, seed: int = 0, balance: bool = True,
                      generator: Optional[ResponseGenerator] = None, nlp: Any = None,
                      spacy_model: str = "en_core_web_sm", max_response_chars: Optional[int] = None,
                      max_knowledge_chars: Optional[int] = None, progress: Any = None,
                      held_out: Optional["EvaluationTexts"] = None) -> tuple[list[TrainingRow], RecipeReport]:
    """Make ``recipe``'s training examples (``"begin"`` or ``"conv-fever"``) from grounded ``rows``.

    Rows whose response or knowledge is empty, not text, or over its budget (default: ``q2 score``'s
    ``max_response_chars`` / ``max_knowledge_chars``; 0 = no limit) are skipped and counted; ids must be unique.
    Rows repeating an earlier row's evidence and response are dropped and counted. ``balance`` applies to BEGIN only
    (Conv-FEVER keeps every example), ``generator`` to BEGIN's hallucinations and generic replies only.
    ``progress``, a :class:`~q2_plugins.metric.progress.Progress`, counts the rows (stages ``parse``, then
    ``examples``). ``held_out``: the evaluation files' texts (:func:`evaluation_texts`); a grounded row sharing an
    evidence passage or a response with them is skipped (under ``original``), and so is a made example that does
    (under its method), each counted with :data:`LEAKED` as its reason.
    """
    if recipe not in RECIPES:
        raise ValueError(f"Unknown recipe {recipe!r}; expected one of {list(RECIPES)}")
    if generator is not None and recipe != "begin":
        raise ValueError("A generator writes BEGIN's hallucinations: use it with recipe 'begin'")
    repeated = sorted(k for k, c in Counter(r.id for r in rows).items() if c > 1)
    if repeated:
        raise ValueError(f"source row ids must be unique; repeated: {repeated[:5]}")
    report = RecipeReport(recipe, len(rows), seed)
    budgets = {"response": default_budget("max_response_chars") if max_response_chars is None else max_response_chars,
               "knowledge": (default_budget("max_knowledge_chars") if max_knowledge_chars is None
                             else max_knowledge_chars)}
    usable = _checked(rows, report, budgets)
    if held_out is not None:
        for r in usable:
            if held_out.shares(r.knowledge, r.response):
                report.skip("original", LEAKED)
        usable = [r for r in usable if not held_out.shares(r.knowledge, r.response)]
    if nlp is None:
        nlp = load_spacy(spacy_model)
    unique_k = list(dict.fromkeys(r.knowledge for r in usable))
    if progress is not None:
        progress.start(len(rows), ["parse", "examples"])
        progress.add("parse", len(usable) + len(unique_k))
        progress.add("examples", len(usable))
    rdocs = list(counted(nlp.pipe([r.response for r in usable]), progress, "parse"))
    kdocs = dict(zip(unique_k, counted(nlp.pipe(unique_k), progress, "parse")))
    if recipe == "begin":
        made = begin_examples(usable, rdocs, kdocs, generator, seed, report, nlp,
                               (wordnet_antonyms(), model_words(nlp)), progress)
    else:
        made = _conv_fever_examples(usable, rdocs, kdocs, seed, report, progress)
    if progress is not None:
        progress.rows_done(len(rows))
    order = {r.id: n for n, r in enumerate(usable)}
    methods = method_order(recipe)
    made.sort(key=lambda t: (order[t.source_id], methods(t.method)))
    made = _unique(made, report)
    if held_out is not None:
        for t in made:
            if held_out.shares(t.evidence, t.response):
                report.skip(t.method, LEAKED)
        made = [t for t in made if not held_out.shares(t.evidence, t.response)]
    report.made.update(t.method for t in made)
    report.candidates.update(t.label for t in made)
    if recipe == "begin" and balance and made:
        made = _balance(made, seed)
    report.labels.update(t.label for t in made)
    report.by_method.update(t.method for t in made)
    return made, report


def run_recipe(options: "PerturbOptions", preview: int = 0, progress: bool = False) -> tuple[dict[str, Any], list[str]]:
    """Read every input, make the recipe's training set, write it to ``options.output`` and its summary (with every
    method's skip counts and reasons) to the sidecar ``OUTPUT.meta.json``; returns the summary and its printed lines
    (the label counts in the paper's table form, then ``preview`` examples per method). ``progress``: the rows
    counted on standard error as ``q2 score`` counts them (a bar on a terminal, plain lines in a log)."""
    import contextlib

    sources: list[SourceRow] = []
    per_input: dict[str, int] = {}
    for path in options.inputs:
        rows = read_sources(path, options)
        per_input[path] = len(rows)
        sources += rows
    if not sources:
        raise SettingError("dataset / keep", f"no grounded rows in {', '.join(options.inputs)}: check these and the "
                                             f"column settings")
    generator = HFResponseGenerator(options.generator, seed=options.seed) if options.generator else None
    with contextlib.ExitStack() as stack:
        bar = None
        if progress:
            bar = stack.enter_context(Progress(total=len(sources)))
        made, report = make_training_set(sources, recipe=options.recipe or "", seed=options.seed,
                                         balance=options.balance, generator=generator,
                                         spacy_model=options.spacy_model, progress=bar,
                                         held_out=evaluation_texts(options.exclude) if options.exclude else None)
    write_jsonl_atomic(options.output, (row.to_dict() for row in made))
    summary = {"inputs": per_input, "output": options.output, "generator": options.generator,
               "balance": options.balance, "n_examples": len(made), **report.to_dict()}
    if options.recipe == "begin":
        summary["off_topic"] = off_topic_draws(made)
    if options.exclude:
        summary["excluded"] = {"files": list(options.exclude), "grounded_rows": report.skipped.get(
            "original", Counter())[LEAKED], "examples": sum(c[LEAKED] for m, c in report.skipped.items()
                                                            if m != "original")}
    settings = {k: getattr(options, k) for k in ("recipe", "dataset", "seed", "spacy_model", "generator", "balance")}
    if options.exclude:
        settings["exclude"] = list(options.exclude)
    write_json_atomic(meta_path(options.output), {"format": "q2-perturb-recipe/1", "version": __version__,
                                                  "settings": settings, "summary": summary})
    read = ", ".join(f"{p}: {n}" for p, n in per_input.items())
    lines = [f"q2 perturb --recipe {options.recipe}: grounded rows {read}; seed {options.seed}"
             + (f"; hallucinations by {options.generator}" if options.generator else ""), *label_table(report),
             "| method | made | written | skipped | why skipped |", "|---|---|---|---|---|"]
    for method, m in summary["methods"].items():
        why = "; ".join(f"{reason}: {count}" for reason, count in m["reasons"].items())
        fell = "; ".join(f"fallback, {reason}: {count}" for reason, count in m.get("fallbacks", {}).items())
        why = "; ".join(filter(None, (why, fell)))
        lines.append(f"| {method} | {m['made']} | {m['written']} | {m['skipped']} | {why} |")
    for method, m in summary["methods"].items():
        if m.get("dropped"):
            lines.append(f"dropped ({method}): {sum(m['dropped'].values())}: "
                         + "; ".join(f"{reason}: {count}" for reason, count in m["dropped"].items()))
    for label, n in report.shortfall.items():
        lines.append(f"shortfall: {n} of {len(sources)} grounded rows gave no {label} example (none qualified; "
                     f"nothing is filled from another topic)")
    if "excluded" in summary:
        x = summary["excluded"]
        lines.append(f"excluded: {x['grounded_rows']} grounded rows and {x['examples']} examples sharing an evidence "
                     f"passage or a response with {', '.join(x['files'])}")
    if "off_topic" in summary:
        o = summary["off_topic"]
        lines.append(f"off-topic: {o['same_topic']} of {o['written']} written of the same topic (BEGIN's draw), "
                     f"{o['other_topic']} of another topic (the fallback: no same-topic response of the input "
                     f"qualifies for them, off the evidence's subject)")
    lines.append(f"wrote {len(made)} examples to {options.output} (summary in {meta_path(options.output)})")
    return summary, lines + preview_lines(made, sources, preview, options.seed)
