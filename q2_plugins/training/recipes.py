"""Training-data recipes of the seed papers: BEGIN's silver set and Conv-FEVER's consistency data.

Both start from grounded examples (a response that holds for its knowledge, with the previous turn when known) and
write one :class:`TrainingRow` per made example: ``evidence``, ``previous_turn`` and ``response`` (a classifier
reads "evidence + previous turn" as premise and the response as hypothesis), ``label`` and ``label3``.

**BEGIN** (Dziri et al., §4; ``recipe="begin"``), five labels, balanced:

* ``entailment`` (``original``): the grounded response, when it passes BEGIN's filter (:func:`begin_filter`: no
  first-person pronoun, at least 25% of its words in the evidence); the others are skipped and counted.
* ``hallucination``, on topic and unverifiable. By default (``neighbour_response``) the response written for the
  *related* evidence (the other evidence sharing most content words with this one) whose response shares a content
  word with this evidence beyond the topic's name and has one it lacks. With a generator (``generated``, BEGIN's own
  way) the evidence is perturbed (subject and object swapped, else up to two entities swapped for others of their
  type) and a dialogue model writes a response from the previous turn and the perturbed evidence. Either is paired
  with the *original* evidence.
* ``off-topic`` (``unrelated_response``): the response of a row of the *same topic* (another dialogue, other
  evidence) using none of this evidence's content words beyond the topic's name, as BEGIN samples them (topics: a
  WoW folder's ``topic`` column, a table's topic column, a BEGIN file's knowledge source); where the data has no
  topics, or no such row, one of another dialogue sharing no content word with it (a fallback, counted
  and said in the row's ``change``).
* ``generic`` (``generic_response``): one of :data:`GENERIC_RESPONSES` with an opener, drawn at random, written in
  the input's tokenisation ("that ' s great !" when the responses are pre-tokenised); with a generator, sampled from
  the previous turn alone at temperature 0.4, as BEGIN does.
* ``contradiction``: a claim of the response that the evidence supports, negated (``negation``,
  :func:`q2_plugins.training.perturb.negate`: never a question, a quotation or title, the speaker's hedge or a "may"),
  or an adjective the evidence uses replaced by its WordNet antonym (``antonym``, Open English WordNet's pairs bundled
  in
  ``q2_plugins/data/wordnet_antonyms``); one of the two, drawn at random, when both apply.

Each row gives at most one example per label; the set is then balanced by drawing, for every label, as many
examples as the rarest label has (``balance=False`` keeps them all).

**Conv-FEVER** (Santhanam et al., §4.1–4.2.3; ``recipe="conv-fever"``), labels ``consistent`` / ``inconsistent``:
the original pair; ``random_response`` and ``random_knowledge`` (the response, or the knowledge, of another
dialogue: three-way ``neutral``, unrelated rather than refuted); ``negated_response`` and ``negated_knowledge`` (an
auxiliary or copular verb of :data:`q2_plugins.training.perturb.NEGATABLE` gets "not" / "n't" or loses it, in a clause
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
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Optional, Protocol, Sequence, Union

from q2_plugins.backends.hf.generator import HFResponseGenerator
from q2_plugins.datasets.grounded import DatasetError, SourceRow, read_sources
from q2_plugins.datasets.textcheck import default_budget
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.taxonomy import LABELS
from q2_plugins.training.perturb import (
    Edit,
    Skip,
    antonym,
    content_forms,
    counted,
    entity_pool,
    invert,
    model_words,
    negate,
    swap_entity,
    wordnet_antonyms,
)

if TYPE_CHECKING:
    from q2_plugins.training.perturb import PerturbOptions

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
    "begin_filter",
    "preview_lines",
    "label_table",
    "read_sources",
    "run_recipe",
    "EvaluationTexts",
    "evaluation_texts",
    "normalised",
    "off_topic_draws",
    "DatasetError",
]

RECIPES = ("begin", "conv-fever")
BEGIN_METHODS = {"original": "entailment", "personal_response": "hallucination", "neighbour_response": "hallucination",
                 "generated": "hallucination",
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
_OPENERS = ("", "well, ", "haha, ", "hmm, ", "ok, ", "cool, ", "ah, ")
_PRONOUNS = frozenset({"it", "its", "they", "them", "their", "he", "him", "his", "she", "her", "these", "those"})
_STOP = frozenset({"the", "a", "an", "of", "and", "in", "on", "for", "to"})
FIRST_PERSON = frozenset({"i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "ourselves"})
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


def _share_in(response: str, evidence: str) -> float:
    """The share of ``response``'s words that ``evidence`` has."""
    words = re.findall(r"[a-z0-9]+", response.lower())
    in_evidence = set(re.findall(r"[a-z0-9]+", evidence.lower()))
    return sum(w in in_evidence for w in words) / len(words) if words else 0.0


def begin_filter(response: str, evidence: str) -> Optional[str]:
    """Why ``response`` fails BEGIN's filter for entailed responses (§4: no first-person pronoun, at least 25% of its
    words in the evidence), or None when it passes."""
    words = re.findall(r"[a-z0-9]+", response.lower())
    if FIRST_PERSON & set(words):
        return "BEGIN's filter: a first-person pronoun"
    in_evidence = set(re.findall(r"[a-z0-9]+", evidence.lower()))
    if not words or sum(w in in_evidence for w in words) < 0.25 * len(words):
        return "BEGIN's filter: under 25% of its words in the evidence"
    return None


def _pretokenised(texts: Sequence[str]) -> bool:
    """Whether most ``texts`` are written with punctuation split off as tokens ("i ' m not sure .")."""
    split = sum(bool(re.search(r"(?:^|\s)[^\w\s]+(?:\s|$)", t)) for t in texts)
    return split * 2 > len(texts)


def _in_style(text: str, pretokenised: bool) -> str:
    return " ".join(re.sub(r"([^\w\s])", r" \1 ", text).split()) if pretokenised else text


def _generic(rng: random.Random, pretokenised: bool) -> str:
    """A stock reply (:data:`GENERIC_RESPONSES`, with an opener at random), in the input's tokenisation."""
    opener, reply = rng.choice(_OPENERS), rng.choice(GENERIC_RESPONSES)
    if reply.split()[0].strip(",!?") in ("oh", "wow", "yes", "how"):
        opener = ""  # the reply opens with an interjection already ("wow, i didn't know that.")
    return _in_style(opener + reply, pretokenised)


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

    def short(self, label: str) -> None:
        self.shortfall[label] += 1

    def skip(self, method: str, reason: str) -> None:
        self.skipped.setdefault(method, Counter())[reason] += 1

    def fallback(self, method: str, reason: str) -> None:
        self.fallbacks.setdefault(method, Counter())[reason] += 1

    def to_dict(self) -> dict[str, Any]:
        methods = sorted(set(self.made) | set(self.skipped), key=_method_order(self.recipe))
        out: dict[str, Any] = {"recipe": self.recipe, "n_rows": self.n_rows, "seed": self.seed,
                               "labels": dict(self.labels), "candidates": dict(self.candidates),
                               "shortfall": dict(self.shortfall), "methods": {}}
        for m in methods:
            out["methods"][m] = {"made": self.made[m], "written": self.by_method[m],
                                 "skipped": sum(self.skipped.get(m, Counter()).values()),
                                 "reasons": dict(self.skipped.get(m, Counter()).most_common())}
            if m in self.fallbacks:
                out["methods"][m]["fallbacks"] = dict(self.fallbacks[m].most_common())
        return out


def _method_order(recipe: str) -> Callable[[str], int]:
    order = list(BEGIN_METHODS) if recipe == "begin" else list(CONV_FEVER_METHODS)
    return lambda m: order.index(m) if m in order else len(order)


class ResponseGenerator(Protocol):
    """Writes one response per (previous turn, evidence) prompt, batched: greedy, or sampled at ``temperature``
    (BEGIN's regenerated hallucinations, and its generic responses from the previous turn alone)."""

    def generate(self, prompts: Sequence[tuple[str, str]], temperature: Optional[float] = None) -> list[str]: ...


def _row(src: SourceRow, recipe: str, method: str, label: str, label3: str, evidence: str, response: str,
         change: str) -> TrainingRow:
    return TrainingRow(id=f"{src.id}:{method}", source_id=src.id, recipe=recipe, method=method, label=label,
                       label3=label3, evidence=evidence, previous_turn=src.previous or "", response=response,
                       change=change, source=src.source)


_HEDGE_VERBS = frozenset({"know", "think", "believe", "guess", "suppose", "mean", "say", "hear", "read", "learn",
                          "see", "remember", "wonder", "agree", "understand", "assume", "recall", "feel"})
_HEDGE_STATES = frozenset({"sure", "certain", "aware", "afraid", "positive", "right", "correct", "glad", "happy"})
# "i do (not)", "i have (not)", "i am (not)", "i can't": a verb standing for the question's, telling nothing itself
_PRO_VERBS = frozenset({"do", "have", "be", "can", "will", "would", "could", "should"})
_COMPLEMENTS = frozenset({"dobj", "xcomp", "ccomp", "acomp", "attr", "oprd", "prep", "dative", "advcl", "agent",
                          "npadvmod"})


_SPLIT_CONTRACTION = re.compile(r"(\w)\s+'\s+(m|re|ve|s|d|ll|t)\b", re.IGNORECASE)


def personal_statement(doc: Any, nlp: Any = None) -> Optional[str]:
    """The first-person clause of ``doc`` that tells a personal experience, taste or fact ("i love gardening", "my
    brother skis", "we went there"), or None; a hedge ("i think", "i'm not sure", "i know that") tells none. Given
    ``nlp``, a pre-tokenised text ("i ' m not sure") is parsed again with its contractions joined (the parser reads
    "i ' m" as no verb at all)."""
    if nlp is not None and _SPLIT_CONTRACTION.search(doc.text):
        doc = nlp(_SPLIT_CONTRACTION.sub(r"\1'\2", doc.text))
    for tok in doc:
        low = tok.lower_
        if low in ("my", "our") and tok.dep_ == "poss":
            return tok.head.text if tok.head is not None else low
        if low in ("i", "we") and tok.dep_ in ("nsubj", "nsubjpass"):
            head = tok.head
            lemma = head.lemma_.lower()
            if lemma in _HEDGE_VERBS:
                continue
            if lemma == "be" and any(c.dep_ == "acomp" and c.lemma_.lower() in _HEDGE_STATES for c in head.children):
                continue
            if lemma in _PRO_VERBS and not any(c.dep_ in _COMPLEMENTS for c in head.children):
                continue  # "i do not, but i do know she was born in michigan": an answer, then the claim
            if head.pos_ in ("VERB", "AUX") or lemma == "be":
                return f"{tok.text} {head.text}"
    return None


def _noun_forms(doc: Any) -> set[str]:
    """Lower-cased forms and lemmas of the nouns, proper nouns, adjectives and numbers of ``doc`` (no stop words)."""
    words = [t for t in doc if t.pos_ in ("NOUN", "PROPN", "ADJ", "NUM") and not t.is_stop]
    return {t.lower_ for t in words} | {t.lemma_.lower() for t in words}


class _Neighbours:
    """Content-word sets of every row's knowledge and response, and the same-topic / unrelated rows of a row. A
    row's topic is its ``topic``, else its dialogue (a dialogue keeps to its topic)."""

    def __init__(self, rows: Sequence[SourceRow], kdocs: dict[str, Any], rdocs: Sequence[Any]) -> None:
        self.rows = rows
        self.kwords = [content_forms(kdocs[r.knowledge]) for r in rows]
        self.rwords = [content_forms(d) for d in rdocs]
        self.topic_words = {r.topic: set(re.findall(r"\w+", re.sub(r"\(.*?\)", "", r.topic.lower()))) - _STOP
                            for r in rows if r.topic}  # "Reading (process)": reading
        # nouns of each response that its own evidence or topic names: a response about something
        self.about = [{t.lower_ for t in d if t.pos_ in ("NOUN", "PROPN") and not t.is_stop}
                      & (self.kwords[n] | self.topic_words.get(rows[n].topic, set())) for n, d in enumerate(rdocs)]
        # responses that name what they speak of: "it originated in india" could be about anything, the evidence's
        # topic included, so it is no off-topic response
        self.named = [not _PRONOUNS & set(re.findall(r"[a-z]+", d.text.lower())) for d in rdocs]
        self.rnouns = [_noun_forms(d) for d in rdocs]
        self.knouns = [_noun_forms(kdocs[r.knowledge]) for r in rows]
        self.by_topic: dict[str, list[int]] = {}
        for n, r in enumerate(rows):
            key = r.topic or r.dialogue
            if key:
                self.by_topic.setdefault(key, []).append(n)

    def near(self, i: int) -> set[str]:
        """Row ``i``'s evidence's content words and its topic's name words."""
        return self.kwords[i] | self.topic_words.get(self.rows[i].topic, set())

    def same_topic(self, i: int) -> Union[int, str]:
        """The response of another row of row ``i``'s topic (other evidence) that stays close to row ``i``'s evidence
        (it shares a noun, adjective or number with it) and adds to it (under 60% of its content words in the
        evidence, one at least beyond): the one sharing most with the evidence; else why there is none. Never a
        response of another topic."""
        row = self.rows[i]
        key = row.topic or row.dialogue
        if not key:
            return "no topic or dialogue: a hallucination must stay on the evidence's topic"
        best, best_n, reason = None, 0, "no other evidence of this topic"
        for j in self.by_topic[key]:
            r = self.rows[j]
            if r.knowledge == row.knowledge or r.response == row.response:
                continue
            words = self.rwords[j]
            shared = len(words & self.kwords[i])
            if not self.rnouns[j] & self.knouns[i]:
                reason = "no response of this topic shares a noun, adjective or number with the evidence"
                continue
            if len(words) < 2 or not words - self.kwords[i] or shared >= 0.6 * len(words):
                reason = "the same-topic responses add nothing the evidence lacks"
                continue
            if shared > best_n:
                best, best_n = j, shared
        return reason if best is None else best

    def unrelated(self, i: int, rng: random.Random) -> tuple[Optional[int], bool]:
        """A random row of the same topic (another dialogue, other knowledge), as BEGIN samples its off-topic
        responses, whose response is about something (a noun its own evidence or topic names, no third-person
        pronoun) and shares no noun, adjective or number with row ``i``'s evidence (it speaks of another part of the
        topic; a verb may be shared; one sharing a noun is a hallucination, :meth:`same_topic`); when there is none
        (or no topic), one of another dialogue and topic whose knowledge shares no content word with it and whose
        response shares no noun, adjective or number with it nor names its topic (second value True: the
        fallback)."""
        row, near = self.rows[i], self.near(i)

        def drawable(j: int) -> bool:
            r = self.rows[j]
            return r.knowledge != row.knowledge and r.response != row.response and (
                row.dialogue is None or r.dialogue != row.dialogue) and bool(self.about[j]) and self.named[j]

        if row.topic:
            same = [j for j in self.by_topic.get(row.topic, ()) if self.rows[j].topic == row.topic and drawable(j)
                    and not self.rnouns[j] & self.knouns[i]]
            if same:
                return rng.choice(same), False

        def other(j: int) -> bool:  # a verb may be shared, as in BEGIN's own off-topic rows; no noun, nor the topic
            return drawable(j) and not (self.rnouns[j] & self.knouns[i]) and not (
                self.rwords[j] & self.topic_words.get(row.topic, set()))

        options = [j for j in range(len(self.rows)) if other(j) and not (self.kwords[j] & self.kwords[i])
                   and (not row.topic or self.rows[j].topic != row.topic)]
        return (rng.choice(options) if options else None), True


def _perturbed_evidence(kdoc: Any, rwords: set[str], pool: dict[str, list[str]], nlp: Any,
                        rng: random.Random) -> Union[Edit, Skip]:
    """BEGIN's evidence perturbations: subject and object swapped, else up to two same-type entities swapped."""
    inverted = invert(kdoc, rwords)
    if isinstance(inverted, Edit):
        return inverted
    first = swap_entity(kdoc, kdoc.text, pool, rng)
    if isinstance(first, Skip):
        return Skip("no evidence perturbation applies (subject / object swap, entity swap)")
    second = swap_entity(nlp(first.text), first.text, pool, rng)
    return first if isinstance(second, Skip) else Edit(second.text, f"{first.change}; {second.change}")


def _contradiction(src: SourceRow, rdoc: Any, words: set[str], antonyms: Any, seed: int,
                   report: RecipeReport) -> Optional[TrainingRow]:
    """BEGIN's contradiction of one row: negation or antonym, one drawn at random when both apply. ``antonyms``:
    the WordNet pairs and the real words an antonym may be."""
    rng = random.Random(f"{seed}|{src.id}|antonym")
    pairs, real = antonyms
    edits = {"negation": negate(rdoc, words), "antonym": antonym(rdoc, words, pairs, rng, real)}
    for method, edit in edits.items():
        if isinstance(edit, Skip):
            report.skip(method, edit.reason)
    usable = [m for m, e in edits.items() if isinstance(e, Edit)]
    if not usable:
        return None
    method = random.Random(f"{seed}|{src.id}|contradiction").choice(usable)
    for other in usable:
        if other != method:
            report.skip(other, "the row's contradiction was drawn from the other method")
    edit = edits[method]
    return _row(src, "begin", method, "contradiction", "contradiction", src.knowledge, edit.text,  # type: ignore
                edit.change)  # type: ignore[union-attr]


def _hallucination(i: int, src: SourceRow, rdoc: Any, near: "_Neighbours", seed: int, report: RecipeReport,
                   nlp: Any) -> Optional[TrainingRow]:
    """BEGIN's hallucination of one row without a dialogue model: the grounded response itself when it tells a
    personal experience or taste (``personal_response``: BEGIN counts these as hallucinations) while staying close to
    the evidence (a quarter of its words in it), or the response of another evidence of the same topic, close to this
    evidence and adding to it (``neighbour_response``); one drawn at random when both apply. Never another topic's."""
    made: dict[str, tuple[str, str]] = {}
    personal = personal_statement(rdoc, nlp)
    if personal is None:
        report.skip("personal_response", "the grounded response tells no personal experience or taste")
    elif _share_in(src.response, src.knowledge) < 0.25:
        report.skip("personal_response", "the grounded response is not close to the evidence (under 25% of its "
                                         "words in it)")
    else:
        made["personal_response"] = (src.response, f"the grounded response, telling a personal experience or "
                                                   f"taste ({personal!r}): unverifiable")
    j = near.same_topic(i)
    if isinstance(j, str):
        report.skip("neighbour_response", j)
    else:
        made["neighbour_response"] = (near.rows[j].response, f"the response of row {near.rows[j].id}, of the same "
                                                             f"topic and other evidence")
    if not made:
        return None
    method = random.Random(f"{seed}|{src.id}|hallucination").choice(sorted(made))
    for other in made:
        if other != method:
            report.skip(other, "the row's hallucination was drawn from the other method")
    return _row(src, "begin", method, "hallucination", "neutral", src.knowledge, *made[method])


def _begin_examples(rows: Sequence[SourceRow], rdocs: Sequence[Any], kdocs: dict[str, Any],
                    generator: Optional[ResponseGenerator], seed: int, report: RecipeReport, nlp: Any,
                    antonyms: Any, progress: Any = None) -> list[TrainingRow]:
    near = _Neighbours(rows, kdocs, rdocs)
    style = _pretokenised([r.response for r in rows])
    pool = entity_pool(list(kdocs.values())) if generator is not None else {}
    out: list[TrainingRow] = []
    wanted: list[tuple[int, Edit]] = []  # (row, perturbed evidence) whose hallucination the generator writes
    for i, (src, rdoc) in enumerate(counted(zip(rows, rdocs), progress, "examples")):
        failed = begin_filter(src.response, src.knowledge)
        if failed:
            report.skip("original", failed)
        else:
            out.append(_row(src, "begin", "original", "entailment", "entailment", src.knowledge, src.response,
                            "none: the grounded response"))
        if generator is not None:
            edit = _perturbed_evidence(kdocs[src.knowledge], near.rwords[i], pool, nlp,
                                       random.Random(f"{seed}|{src.id}|generated"))
            if isinstance(edit, Skip):
                report.skip("generated", edit.reason)
            else:
                wanted.append((i, edit))
        else:
            row = _hallucination(i, src, rdoc, near, seed, report, nlp)
            if row is None:
                report.short("hallucination")
            else:
                out.append(row)
        k, fell_back = near.unrelated(i, random.Random(f"{seed}|{src.id}|unrelated_response"))
        if k is None:
            report.skip("unrelated_response", "no response unrelated to this evidence in the data")
        else:
            why = "no topic" if not src.topic else "no response of the same topic unrelated to this evidence"
            if fell_back:
                report.fallback("unrelated_response", f"{why}: a response of another topic")
            out.append(_row(src, "begin", "unrelated_response", "off-topic", "neutral", src.knowledge,
                            rows[k].response, f"the response of row {rows[k].id}"
                            + (f" (fallback, {why}: its evidence shares no content word)" if fell_back
                               else ", of the same topic")))
        if generator is None:
            out.append(_row(src, "begin", "generic_response", "generic", "neutral", src.knowledge,
                            _generic(random.Random(f"{seed}|{src.id}|generic_response"), style),
                            "a generic response"))
        row = _contradiction(src, rdoc, near.kwords[i], antonyms, seed, report)
        if row is not None:
            out.append(row)
    if generator is not None:
        out += _generated(rows, wanted, generator, style, report)
    return out


def _generated(rows: Sequence[SourceRow], wanted: Sequence[tuple[int, Edit]], generator: ResponseGenerator,
               style: bool, report: RecipeReport) -> list[TrainingRow]:
    """The generator's hallucinations (greedy, from the perturbed evidence) and generic replies (sampled at 0.4,
    BEGIN's temperature, from the previous turn alone)."""
    out: list[TrainingRow] = []
    texts = generator.generate([(rows[i].previous or "", edit.text) for i, edit in wanted]) if wanted else []
    for (i, edit), text in zip(wanted, texts):
        if not text.strip():
            report.skip("generated", "the generator wrote an empty response")
            continue
        out.append(_row(rows[i], "begin", "generated", "hallucination", "neutral", rows[i].knowledge,
                        _in_style(text.strip(), style), f"generated from the evidence perturbed: {edit.change}"))
    generic = generator.generate([(r.previous or "", "") for r in rows], temperature=0.4)
    for src, text in zip(rows, generic):
        if not text.strip():
            report.skip("generic_response", "the generator wrote an empty response")
            continue
        out.append(_row(src, "begin", "generic_response", "generic", "neutral", src.knowledge,
                        _in_style(text.strip(), style), "generated from the previous turn alone, temperature 0.4"))
    return out


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
            out.append(_row(src, "conv-fever", method, label, label3 or CONV_FEVER_LABEL3[label], evidence, response,
                            change))

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
    from q2_plugins.datasets.textcheck import text_problem

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
        from q2_plugins.metric.spacy_parts import load_spacy

        nlp = load_spacy(spacy_model)
    unique_k = list(dict.fromkeys(r.knowledge for r in usable))
    if progress is not None:
        progress.start(len(rows), ["parse", "examples"])
        progress.add("parse", len(usable) + len(unique_k))
        progress.add("examples", len(usable))
    rdocs = list(counted(nlp.pipe([r.response for r in usable]), progress, "parse"))
    kdocs = dict(zip(unique_k, counted(nlp.pipe(unique_k), progress, "parse")))
    if recipe == "begin":
        made = _begin_examples(usable, rdocs, kdocs, generator, seed, report, nlp,
                               (wordnet_antonyms(), model_words(nlp)), progress)
    else:
        made = _conv_fever_examples(usable, rdocs, kdocs, seed, report, progress)
    if progress is not None:
        progress.rows_done(len(rows))
    order = {r.id: n for n, r in enumerate(usable)}
    methods = _method_order(recipe)
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
    for method in sorted(by_method, key=_method_order(recipe)):
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


def off_topic_draws(made: Sequence[TrainingRow]) -> dict[str, int]:
    """How the written off-topic rows were drawn: ``same_topic`` (BEGIN's way) and ``other_topic`` (the fallback)."""
    off = [r for r in made if r.method == "unrelated_response"]
    other = sum("fallback" in r.change for r in off)
    return {"written": len(off), "same_topic": len(off) - other, "other_topic": other}


def run_recipe(options: "PerturbOptions", preview: int = 0, progress: bool = False) -> tuple[dict[str, Any], list[str]]:
    """Read every input, make the recipe's training set, write it to ``options.output`` and its summary (with every
    method's skip counts and reasons) to the sidecar ``OUTPUT.meta.json``; returns the summary and its printed lines
    (the label counts in the paper's table form, then ``preview`` examples per method). ``progress``: the rows
    counted on standard error as ``q2 score`` counts them (a bar on a terminal, plain lines in a log)."""
    import contextlib
    import json

    from q2_plugins import __version__
    from q2_plugins.io.outputs import meta_path, write_json_atomic

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
            from q2_plugins.metric.progress import Progress

            bar = stack.enter_context(Progress(total=len(sources)))
        made, report = make_training_set(sources, recipe=options.recipe or "", seed=options.seed,
                                         balance=options.balance, generator=generator,
                                         spacy_model=options.spacy_model, progress=bar,
                                         held_out=evaluation_texts(options.exclude) if options.exclude else None)
    with open(options.output, "w", encoding="utf-8") as f:
        for row in made:
            f.write(json.dumps(row.to_dict(), ensure_ascii=False) + "\n")
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
                     f"{o['other_topic']} of another topic (the fallback: the input has no same-topic response "
                     f"for them)")
    lines.append(f"wrote {len(made)} examples to {options.output} (summary in {meta_path(options.output)})")
    return summary, lines + preview_lines(made, sources, preview, options.seed)
