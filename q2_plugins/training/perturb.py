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
replacement of the type and shape, no clause with a movable noun subject and object. The BEGIN and Conv-FEVER
training recipes (:mod:`q2_plugins.training.recipes`) build on these edits; this module never imports them. Every random
choice comes from ``random.Random`` seeded with ``(seed, source id, method)``: the same input and seed give the same
pairs, whatever the other rows or methods.
"""

from __future__ import annotations

import contextlib
import random
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Container, Iterator, Literal, Mapping, Optional, Sequence, Union

from q2_plugins.datasets.bundled import DATA_DIR
from q2_plugins.datasets.grounded import table_rows
from q2_plugins.datasets.registry import recipe_inputs
from q2_plugins.io.columns import TextColumns
from q2_plugins.metric.errors import SettingError
from q2_plugins.metric.taxonomy import COARSE

__all__ = [
    "METHODS",
    "DATASETS",
    "NEGATABLE",
    "EXPECTED_LABEL",
    "Edit",
    "Skip",
    "StressPair",
    "PerturbReport",
    "negate",
    "antonym",
    "wordnet_antonyms",
    "model_words",
    "swap_entity",
    "invert",
    "entity_pool",
    "EntityPool",
    "EntityInfo",
    "content_forms",
    "make_stress_pairs",
    "PerturbOptions",
    "stress_pairs",
]

METHODS = ("negation", "entity_swap", "random_pairing", "inversion")
DATASETS = ("auto", *recipe_inputs(), "wow-json", "table")  # how q2 perturb --recipe reads an input
NEGATABLE = frozenset({"are", "is", "was", "were", "have", "has", "had", "do", "does", "did", "can", "could", "may",
                       "might", "must", "shall", "should", "will", "would"})
EXPECTED_LABEL = {"negation": "contradiction", "entity_swap": "contradiction", "inversion": "contradiction",
                  "random_pairing": "off-topic"}  # random pairing within a topic: hallucination
_PERTURBS = {"negation": "response", "entity_swap": "response", "inversion": "knowledge",
             "random_pairing": "knowledge"}
_NOT = frozenset({"not", "n't"})
_OTHER_NEGATIONS = frozenset({"never", "no", "nothing", "nobody", "none", "nowhere", "neither", "nor"})
_SUBJECTS = ("nsubj", "nsubjpass", "expl")
_NOUNS = ("NOUN", "PROPN")
_UNMOVABLE = frozenset({"relcl", "acl", "appos", "conj", "cc", "punct"})  # children that make a phrase unmovable


@dataclass(frozen=True)
class Edit:
    """A perturbed text, what changed, and the expected label when it is not the method's usual one."""

    text: str
    change: str
    expected_label: Optional[str] = None


@dataclass(frozen=True)
class Skip:
    """The method does not apply; ``reason`` is counted in the report."""

    reason: str


def content_forms(doc: Any) -> set[str]:
    """Lower-cased forms and lemmas of the content words (no stop words, punctuation or space) of a doc or span."""
    words = [t for t in doc if not (t.is_stop or t.is_punct or t.is_space)]
    return {t.lower_ for t in words} | {t.lemma_.lower() for t in words}


def _by_overlap(doc: Any, words: set[str]) -> list[tuple[int, Any]]:
    """(overlap, sentence) for the sentences of ``doc``, most content words in ``words`` first (stable)."""
    scored = [(len(content_forms(s) & words), i, s) for i, s in enumerate(doc.sents)]
    return [(n, s) for n, _, s in sorted(scored, key=lambda x: (-x[0], x[1]))]


# -- negation -----------------------------------------------------------------------------------------------------
def _negation_site(tok: Any) -> Union[Literal["insert", "remove"], Skip]:
    """"insert" or "remove" for a negatable verb token, or why it cannot be negated."""
    clause = tok.head if tok.dep_ in ("aux", "auxpass") else tok
    subjects = [c for c in clause.children if c.dep_ in _SUBJECTS]
    if subjects and subjects[0].i > tok.i:
        return Skip("only a question's inverted verb")
    nxt = tok.nbor(1) if tok.i + 1 < len(tok.doc) else None
    if nxt is not None and nxt.lower_ in _NOT:
        return "remove"
    if nxt is not None and nxt.lower_ in _OTHER_NEGATIONS:
        return Skip("negated by another word (never, no, ...)")
    if any(c.dep_ == "neg" for c in list(clause.children) + list(tok.children)):
        return Skip("negated by another word (never, no, ...)")
    return "insert"


_SPEAKERS = frozenset({"i", "we", "you"})  # a clause whose subject is the speaker or the listener: a stance, no claim
_HEDGES = frozenset({"may", "might", "could"})  # a possibility, not a claim: negating it contradicts nothing


def _blocked(tok: Any, other_words: Optional[set[str]]) -> Optional[str]:
    """Why the claim ``tok`` (a verb or adjective) belongs to should not be edited, or None: a question, a quotation
    or title, the speaker's hedge or opinion, a hedged possibility, or (with ``other_words``) a clause sharing no
    content word with the other text (a claim the evidence does not support)."""
    sent = tok.sent
    if sent.text.rstrip().endswith("?"):
        return "a question"
    before = tok.doc.text[sent.start_char:tok.idx]
    if before.count('"') % 2 or before.count("\u201c") > before.count("\u201d") or (
            tok.text[:1].isupper() and tok.i != sent.start and tok.text.lower() != "i"):
        return "inside a quotation or title"
    clause = tok.head if tok.dep_ in ("aux", "auxpass", "amod", "acomp") else tok
    while clause.dep_ in ("xcomp", "ccomp", "conj", "advcl") and clause.head != clause:
        if any(c.dep_ in _SUBJECTS for c in clause.children):
            break
        clause = clause.head  # a clause without its own subject speaks for its head's
    if any(c.dep_ in _SUBJECTS and c.lower_ in _SPEAKERS for c in clause.children):
        return "the speaker's hedge or opinion (i / we / you)"
    if tok.lower_ in _HEDGES or any(c.lower_ in _HEDGES and c.dep_ == "aux" for c in clause.children):
        return "a hedged possibility (may / might / could)"
    if other_words is not None:
        span = tok.doc[clause.left_edge.i: clause.right_edge.i + 1]
        if not content_forms(span) & other_words:
            return "the clause shares no content word with the other text"
    return None


_TEMPORAL = frozenset({"when", "while", "after", "before", "until", "till", "since", "as", "once", "whenever"})
_CONDITIONAL = frozenset({"if", "unless", "whether"})
_SUBCLAUSES = frozenset({"relcl", "acl", "advcl", "ccomp", "parataxis", "csubj", "appos"})
_FOCUS = frozenset({"also", "only", "just", "even", "merely", "simply", "solely", "too"})


def _clause_head(tok: Any) -> Any:
    return tok.head if tok.dep_ in ("aux", "auxpass") else tok


def _subordinate(tok: Any) -> Optional[str]:
    """Why negating ``tok`` would land in a clause that carries no claim of its own: a temporal clause ("when it was
    first broadcast"), a conditional one, or a relative one ("the show that was cancelled"), the verb's own clause or
    one it sits in (through complements and coordination)."""
    clause = _clause_head(tok)
    while True:
        marks = {c.lower_ for c in clause.children if c.dep_ in ("mark", "advmod") and c.i < clause.i}
        if clause.dep_ in ("relcl", "acl") or any(c.tag_ in ("WDT", "WP", "WP$") and c.i < clause.i
                                                  and c.dep_ in _SUBJECTS + ("dobj", "pobj") for c in clause.children):
            return "in a relative clause"
        if clause.dep_ == "advcl" or marks & _TEMPORAL:
            if marks & _TEMPORAL:
                return "in a temporal clause (when, while, after, ...)"
            if marks & _CONDITIONAL:
                return "in a conditional clause (if, unless)"
        if clause.dep_ not in ("ccomp", "xcomp", "conj", "advcl") or clause.head == clause:
            return None
        clause = clause.head


def _claim_tokens(tok: Any) -> list[Any]:
    """The tokens of the claim that negating ``tok`` denies: its clause's words, without its subject and without the
    clauses hanging from it (relative, adverbial, participial, coordinated verbs), which a negation of this verb does
    not deny ("X is not the largest chain, serving 69 million" still serves them)."""
    clause = _clause_head(tok)
    hanging = _SUBCLAUSES - {"ccomp"} if clause.lemma_ == "be" else _SUBCLAUSES  # "was 'Love Me Do'": its claim
    out: list[Any] = []
    stack = [c for c in clause.children if c.dep_ not in _SUBJECTS + ("csubj",)]
    while stack:
        t = stack.pop()
        if t.dep_ in hanging or (t.dep_ == "conj" and t.pos_ in ("VERB", "AUX")):
            continue
        out.append(t)
        stack += list(t.children)
    return [t for t in out if t != tok]


def _claim_words(tok: Any) -> set[str]:
    """The content words (forms and lemmas) of :func:`_claim_tokens`."""
    return content_forms(_claim_tokens(tok))


def negate(response_doc: Any, knowledge_words: Optional[set[str]] = None, *,
           best_sentence_only: bool = False) -> Union[Edit, Skip]:
    """Negate one auxiliary or copular verb of the response (or remove its negation).

    The verb is the one whose claim (:func:`_claim_words`: its clause's predicate, without the subject and the
    clauses hanging from it) shares most content words with the other text (``knowledge_words``, lower-cased forms
    and lemmas), in the sentences sharing most with it first, main-clause verbs first among equals; with
    ``best_sentence_only`` only that sentence is tried. Only the words of :data:`NEGATABLE`, used as auxiliaries (or
    any form of "be"), count; contracted forms ("'s") do not. A verb is never negated in a question, a quotation or
    title, a clause of the speaker ("i do know ...") or a hedged one ("may"), a temporal, conditional or relative
    clause, where it would read "not also / only", nor (given ``knowledge_words``) when its claim shares no content
    word with the other text: the negation must deny a claim the other text makes.
    """
    text = response_doc.text
    reasons: Counter[str] = Counter()
    ranked = _by_overlap(response_doc, knowledge_words or set())
    for _, sent in ranked[:1] if best_sentence_only else ranked:
        verbs = [t for t in sent if t.lower_ in NEGATABLE and (t.pos_ == "AUX" or t.lemma_ == "be")]
        main = {t.i for t in verbs if t == sent.root or (t.dep_.startswith("aux") and t.head == sent.root)}
        claims = {t.i: len(_claim_words(t) & knowledge_words) if knowledge_words is not None else 0 for t in verbs}
        verbs.sort(key=lambda t: (-claims[t.i], t.i not in main, t.i))
        for tok in verbs:
            site = _negation_site(tok)
            blocked = _blocked(tok, knowledge_words) or _subordinate(tok)
            nxt = tok.nbor(1) if tok.i + 1 < len(tok.doc) else None
            if site == "remove" and nxt is not None and tok.i + 2 < len(tok.doc):
                nxt = tok.nbor(2)
            if blocked is None and nxt is not None and nxt.lower_ in _FOCUS:
                blocked = f"would read 'not {nxt.lower_}' (not also / only: no contradiction)"
            if blocked is None and any(t.lower_ in ("my", "our") for t in _claim_tokens(tok)):
                blocked = "the speaker's taste or possession (my / our)"  # "purple is not my favorite color"
            if blocked is None and knowledge_words is not None and not claims[tok.i]:
                blocked = "the negated claim shares no content word with the other text"
            if isinstance(site, Skip) or blocked:
                reasons[site.reason if isinstance(site, Skip) else blocked] += 1  # type: ignore[index]
                continue
            end = tok.idx + len(tok.text)
            if site == "remove":
                neg = tok.nbor(1)
                return Edit(text[:end] + text[neg.idx + len(neg.text):], f"removed {neg.text!r} after {tok.text!r}")
            added = "not" if tok.lower_ == "can" else " not"  # "cannot", as written
            return Edit(text[:end] + added + text[end:], f"{tok.text!r} -> {tok.text + added!r}")
    if reasons:
        return Skip(reasons.most_common(1)[0][0])
    return Skip("no auxiliary or copular verb to negate")


# -- antonym ------------------------------------------------------------------------------------------------------
def wordnet_antonyms() -> dict[str, tuple[str, ...]]:
    """Open English WordNet's single-word adjective antonyms, both ways: word -> its antonyms (bundled in
    ``q2_plugins/data/wordnet_antonyms``, with their licence and attribution)."""

    path = DATA_DIR / "wordnet_antonyms" / "adjectives.tsv"
    pairs: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        word, other = line.split("\t")
        pairs.setdefault(word, set()).add(other)
        pairs.setdefault(other, set()).add(word)
    return {w: tuple(sorted(o)) for w, o in pairs.items()}


_PREFIXES = ("un", "non", "in", "im", "il", "ir", "dis", "a")  # a negative prefix: "popular" -> "unpopular"
_NEEDS_ARTICLE = frozenset({"same", "other"})  # antonyms that need "the" / "an" where the word had none ("same")
_PREDICATE_NOUN = ("attr", "dobj", "oprd")  # a noun the clause says of its subject ("is a hot drink", "has strong legs")
_DETERMINING = frozenset({"certain", "particular", "various", "whole", "entire", "main", "only", "very", "same",
                          "other", "given", "specific"})  # adjectives that pick a thing out rather than describe it
_UNSURE = frozenset({"think", "believe", "guess", "suppose", "wonder", "feel", "hope", "love", "like", "wish",
                     "prefer"})  # "i think (that) ...": the speaker's view, not a claim ("i do know that ..." is one)


def model_words(nlp: Any) -> frozenset[str]:
    """The words a spaCy pipeline was trained on (its ``vocab/strings.json``), lower-cased: the real words an edit may
    write. A pipeline without that file gives the strings its vocabulary holds now."""
    from pathlib import Path

    path = Path(getattr(nlp, "path", None) or "") / "vocab" / "strings.json"
    if getattr(nlp, "path", None) and path.is_file():
        import json

        strings = json.loads(path.read_text(encoding="utf-8"))
    else:
        strings = list(nlp.vocab.strings)
    return frozenset(s.lower() for s in strings if isinstance(s, str) and s.isalpha())


def _prefixed(word: str, other: str) -> bool:
    """Whether ``other`` is ``word`` with a negative prefix added ("unpresidential" of "presidential")."""
    return any(other == p + word or other == p + "-" + word for p in _PREFIXES)


def _antonym_site(tok: Any, knowledge_words: set[str]) -> Optional[str]:
    """Why the adjective ``tok`` is no place for an antonym, or None: the claim must be the adjective itself, said of
    the clause's subject ("the lake is deep") or of the noun its predicate names ("a hot drink", "has strong legs"),
    that noun in the knowledge too; never inside a name, a hyphenated compound ("co-equal") or a fixed phrase ("heavy
    metal lyrics", "fair skin color"), in the subject ("ethical vegans are ..."), or a noun-like use ("between violet
    and green")."""
    doc = tok.doc
    if tok.lower_ in _DETERMINING:
        return "picks a thing out rather than describes it (a certain portion)"
    if tok.ent_type_:
        return "inside a name (a named entity)"
    if (tok.i > 0 and doc[tok.i - 1].text in ("-", "\u2013")) or (tok.i + 1 < len(doc) and doc[tok.i + 1].text in (
            "-", "\u2013")) or "-" in tok.text:
        return "inside a hyphenated compound (co-equal)"
    if tok.dep_ == "conj" or any(c.dep_ == "conj" for c in tok.children):
        return "one of coordinated adjectives (hot and cold): the other may hold"
    if tok.i > 0 and doc[tok.i - 1].lower_ in _FOCUS:
        return f"would read '{doc[tok.i - 1].lower_} ...' (only / also: no contradiction)"
    if any(any(c.dep_ in _SUBJECTS and c.lower_ in _SPEAKERS for c in a.children) and (
            a.lemma_.lower() in _UNSURE or any(c.dep_ == "neg" for c in a.children)) for a in tok.ancestors):
        return "under the speaker's doubt or opinion (i'm not sure when ..., i think ...)"
    where = _subordinate(tok)
    if where:
        return where
    if tok.dep_ == "acomp":
        return None
    if tok.dep_ != "amod":
        return "not used as an adjective of the claim (a noun-like use, a list)"
    noun = tok.head
    if noun.dep_ == "compound" or any(c.dep_ == "compound" and c.i > tok.i for c in noun.children):
        return "inside a fixed phrase (an adjective of a compound: heavy metal lyrics)"
    if noun.dep_ not in _PREDICATE_NOUN:
        if noun.dep_ in _SUBJECTS or noun.dep_ == "csubj":
            return "in the subject (the adjective names what the claim is about)"
        return "outside the predicate (in a prepositional or other phrase)"
    if noun.lower_ not in knowledge_words and noun.lemma_.lower() not in knowledge_words:
        return "the noun it qualifies is not in the knowledge"
    return None


def antonym(response_doc: Any, knowledge_words: set[str], antonyms: Mapping[str, Sequence[str]],
            rng: random.Random, words: Optional[Container[str]] = None) -> Union[Edit, Skip]:
    """Replace an adjective of the response that the knowledge also uses (a claim it supports) by its WordNet
    antonym, fixing "a" / "an" before it; never in a question, a quotation or title, the speaker's hedge, or a
    negated clause, and only where the adjective is the claim (:func:`_antonym_site`). The antonym must be a real
    word: one formed by a negative prefix ("unpresidential") only when ``words`` (default: the parser's, see
    :func:`model_words`) has it; never "same" / "other", which need another determiner."""
    text = response_doc.text
    found = [t for t in response_doc if t.pos_ == "ADJ" and t.lower_ in antonyms]
    if not found:
        return Skip("no adjective with a WordNet antonym")
    supported = [t for t in found if t.lower_ in knowledge_words]
    if not supported:
        return Skip("no adjective with an antonym that the knowledge uses")
    if words is None:
        words = model_words(response_doc)
    reasons: Counter[str] = Counter()
    for tok in supported:
        blocked = _blocked(tok, knowledge_words)
        clause = tok.head if tok.dep_ in ("amod", "acomp") else tok
        if blocked is None and any(c.dep_ == "neg" for c in list(clause.children) + list(tok.children)):
            blocked = "negated by another word (never, no, ...)"
        blocked = blocked or _antonym_site(tok, knowledge_words)
        options = [a for a in sorted(antonyms[tok.lower_]) if a not in _NEEDS_ARTICLE
                   and (not _prefixed(tok.lower_, a) or a in words)]
        if blocked is None and not options:
            blocked = "no antonym that is a real word of the same use (made-up prefixed forms, 'same')"
        if blocked:
            reasons[blocked] += 1
            continue
        own = [a for a in options if _prefixed(tok.lower_, a)]  # "uncommon" says "not common" in the sense used
        new = rng.choice(own or options)
        if tok.text[:1].isupper():
            new = new.capitalize()
        swapped = text[:tok.idx] + new + text[tok.idx + len(tok.text):]
        return Edit(_with_article(swapped, new), f"{tok.text!r} -> {new!r} (WordNet antonym)")
    return Skip(reasons.most_common(1)[0][0])


# -- entity swap ----------------------------------------------------------------------------------------------------
def _occurs(needle: str, haystack: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", haystack, flags=re.IGNORECASE) is not None


_NAMES = frozenset({"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LANGUAGE"})
_NUMBERS = frozenset({"CARDINAL", "QUANTITY", "MONEY", "PERCENT"})
# how often a replacement of each type must be seen with it: the tagger often calls a word wrongly ("Mesopotamia" and
# "Software" organisations, "Frappuccino" a place, "Olympian" a nationality) but seldom the same word twice alike
_NOISY = {"ORG": 3, "PRODUCT": 3, "EVENT": 3, "FAC": 3, "WORK_OF_ART": 3, "GPE": 2, "LOC": 2, "NORP": 2}
_DATES = frozenset({"DATE", "TIME"})
_NUMBER_WORDS = {w: n for n, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve "
                                            "thirteen fourteen fifteen sixteen seventeen eighteen nineteen "
                                            "twenty".split())}
_SCALES = {"hundred": 1e2, "thousand": 1e3, "million": 1e6, "billion": 1e9, "trillion": 1e12}
# qualifiers before a number, and the way the number must move for the claim to break: "over 80 million" still holds
# of "over 69 million" (it must go up), "under 5" of "under 9" (it must go down), "about 80" of "about 82"
_UP = ("more than", "over", "at least", "above", "in excess of", "upwards of", "exceeding", "after")
_DOWN = ("less than", "fewer than", "under", "at most", "below", "up to", "no more than", "as many as", "before",
         "until", "by")
_ABOUT = ("about", "around", "approximately", "roughly", "nearly", "almost", "some", "circa", "c.")
_QUALIFIER = re.compile(r"^(?:(%s)\s+)" % "|".join(re.escape(q) for q in sorted(_UP + _DOWN + _ABOUT, key=len,
                                                                                 reverse=True)), re.IGNORECASE)


def _shape(name: str) -> str:
    """The form of an entity's text: letters runs "a", digit runs "0" (four or more "0000", a year's), the rest kept:
    a swap keeps it, so a year stays a year and a count a count."""
    return re.sub(r"[^\W\d_]+", "a", re.sub(r"\d+", lambda m: "0000" if len(m.group()) >= 4 else "0", name))


def _value(text: str) -> Optional[float]:
    """The number an entity's text states ("80 million", "10,000", "three", "4.8 billion"), or None."""
    words = text.lower().replace(",", "").split()
    value: Optional[float] = None
    for w in words:
        if re.fullmatch(r"\d+(?:\.\d+)?", w):
            value = float(w) if value is None else value
        elif w in _NUMBER_WORDS and value is None:
            value = float(_NUMBER_WORDS[w])
        elif w in _SCALES and value is not None:
            value *= _SCALES[w]
    return value


@dataclass
class EntityInfo:
    """How an entity text was seen in the data: its type (most often), its cased form, whether "the" goes before it,
    whether it is plural, whether it was seen capitalised inside a sentence (a name, not a sentence's first
    word), whether it was seen as a person (:func:`_as_person`) and, for a place, its level as the data shows it
    (:func:`_place_level`: "city", "region" or None)."""

    label: str
    form: str
    the: bool = False
    plural: bool = False
    name: bool = False
    person: bool = False
    level: Optional[str] = None


class EntityPool(dict):
    """Entity texts by type (``pool[label]``: a list of texts), with :class:`EntityInfo` per lower-cased text."""

    def __init__(self, by_label: Mapping[str, list[str]], info: Mapping[str, EntityInfo]) -> None:
        super().__init__(by_label)
        self.info = dict(info)


def _bare(ent: Any) -> Any:
    """An entity span without a leading "the" and, for numbers and dates, without a leading qualifier ("over", "more
    than", "about", ...): the part a swap replaces."""
    i = 1 if len(ent) > 1 and ent[0].lower_ == "the" else 0
    if ent.label_ in _NUMBERS | _DATES:
        rest = " ".join(t.lower_ for t in ent[i:]) + " "
        q = next((q for q in sorted(_UP + _DOWN + _ABOUT, key=len, reverse=True) if rest.startswith(q + " ")), None)
        if q is not None and i + len(q.split()) < len(ent):
            i += len(q.split())
    return ent[i:]


def entity_pool(docs: Sequence[Any]) -> EntityPool:
    """Named entities of ``docs`` by type: each distinct (case-insensitively) text once, in order of appearance, in
    its first cased form if one was seen (lower-cased data sets mix with cased ones), without a leading "the" or
    qualifier ("over 80 million" gives "80 million"). A text goes under the type the tagger gives it most often only,
    and a name (a person, a place, ...) only when it was seen capitalised: the tagger's odd calls ("stevia" as a
    nationality) stay out. Each text's :class:`EntityInfo` says how it was seen."""
    pool: dict[str, dict[str, str]] = {}
    votes: dict[str, Counter[str]] = {}
    the: Counter[str] = Counter()
    plural: Counter[str] = Counter()
    named: set[str] = set()
    people: set[str] = set()
    levels: dict[str, Counter[str]] = {}
    for doc in docs:
        for ent in doc.ents:
            span = _bare(ent) if hasattr(ent, "doc") else ent
            name = span.text.strip()
            if not name or "\n" in name or not any(ch.isalnum() for ch in name):
                continue
            key = name.lower()
            votes.setdefault(key, Counter())[ent.label_] += 1
            forms = pool.setdefault(ent.label_, {})
            if forms.get(key, key) == key:  # prefer a cased form
                forms[key] = name
            if hasattr(span, "doc"):
                before = span.doc[span.start - 1] if span.start > 0 else None
                after = span.doc[span.end] if span.end < len(span.doc) else None
                if after is None or (after.pos_ not in _NOUNS and after.text not in ("-", "\u2013", "\u2014")):
                    # "the Kansas-Nebraska Act": "the" is the act's, not Kansas's
                    the[key] += 1 if before is not None and before.lower_ == "the" else -1
                plural[key] += 1 if span[-1].tag_ in ("NNS", "NNPS") else -1
                if name[:1].isupper() and span.start != span.sent.start:
                    named.add(key)
                if ent.label_ == "PERSON" and _as_person(span):
                    people.add(key)
                level = _place_level(span) if ent.label_ in ("GPE", "LOC") else None
                if level:
                    levels.setdefault(key, Counter())[level] += 1
    if any(hasattr(doc, "vocab") for doc in docs):  # a word also written in lower case is a common word ("stone")
        lower = {t.text for doc in docs for t in doc if t.text.islower() and t.i != t.sent.start}
        named -= {key for key in named if " " not in key and key in lower}
    by_label = {label: [n for key, n in names.items() if votes[key].most_common(1)[0][0] == label
                        and (label not in _NAMES or n[:1].isupper() and "." not in n)
                        and not (n.isupper() and len(n) <= 3)  # "US", "BC": "in us", "bc is a leader"
                        and votes[key][label] >= _NOISY.get(label, 1)] for label, names in pool.items()}
    info = {n.lower(): EntityInfo(label, n, the[n.lower()] >= 0 and n.lower() in the, plural[n.lower()] > 0,
                                  n.lower() in named, n.lower() in people, _level(levels.get(n.lower())))
            for label, names in by_label.items() for n in names}
    return EntityPool(by_label, info)


# a person is seen doing what people do: the agent of a passive ("directed by James Cameron"), the subject of one of
# these verbs ("Alan Freed began playing", "Sherman Poppen invented"), or born ("Edward Sheeran (born ...)")
_PERSON_VERBS = frozenset({"bear", "die", "marry", "direct", "write", "found", "create", "invent", "compose", "paint",
                           "sing", "star", "say", "produce", "begin", "study", "work", "live", "win", "lead", "join",
                           "coin", "design", "discover", "develop", "play"})


def _as_person(span: Any) -> bool:
    """Whether a PERSON span is seen as a person: the agent of a passive ("by NAME"), the subject of a verb of
    :data:`_PERSON_VERBS`, or followed by "(born"."""
    root, doc = span.root, span.doc
    if root.dep_ == "pobj" and root.head.lower_ == "by" and root.head.dep_ == "agent":
        return True
    if root.dep_ in ("nsubj", "nsubjpass") and root.head.lemma_.lower() in _PERSON_VERBS:
        return True
    if root.dep_ == "conj" and root.head.dep_ in ("nsubj", "pobj") and _as_person(doc[root.head.i:root.head.i + 1]):
        return True  # "by Richard and Maurice McDonald"
    after = doc[span.end:span.end + 3].text.lower()
    return after.startswith("(") and "born" in after


def _place_level(span: Any) -> Optional[str]:
    """How a place span is used: "city" before ", PLACE" ("Pasadena, California") or named a city ("New York
    City"), "region" after "PLACE ," (a state's or a country's), else None."""
    doc = span.doc
    if span.text.lower().endswith(" city") or (span.end + 1 < len(doc) and doc[span.end].text == ","
                                               and doc[span.end + 1].ent_type_ in ("GPE", "LOC")):
        return "city"
    if span.start >= 2 and doc[span.start - 1].text == "," and doc[span.start - 2].ent_type_ in ("GPE", "LOC"):
        return "region"
    return None


def _level(votes: Optional[Counter]) -> Optional[str]:
    """The level a place was seen at most often; None when unseen or tied."""
    if not votes:
        return None
    top = votes.most_common(2)
    return None if len(top) > 1 and top[0][1] == top[1][1] else top[0][0]


_RELIGIONS = frozenset({"christian", "christians", "catholic", "catholics", "roman catholic", "protestant", "jewish",
                        "jews", "jew", "muslim", "muslims", "islamic", "hindu", "hindus", "buddhist", "buddhists",
                        "sikh", "mormon", "orthodox"})
_PARTIES = frozenset({"republican", "republicans", "democrat", "democrats", "democratic", "communist", "communists",
                      "socialist", "socialists", "conservative", "conservatives", "liberal", "liberals", "nazi"})
_DEMONYM = re.compile(r"(?:an|ans|ian|ians|ese|ish|i|is|ch|ic|ics|ean|eans|er|ers|ite|ites)$")


def _norp_kind(name: str) -> Optional[str]:
    """A nationality, religion or party's kind ("religion", "party", "nationality"), or None when the text reads as
    none of these (the tagger's "stevia" as a nationality)."""
    low = name.lower()
    if low in _RELIGIONS:
        return "religion"
    if low in _PARTIES:
        return "party"
    return "nationality" if _DEMONYM.search(low) else None


def _with_article(text: str, new: str) -> str:
    """``text`` with "a" / "an" before each ``new`` agreeing with its first letter."""
    def fix(m: re.Match) -> str:
        art = "an" if new[:1].lower() in "aeiou" else "a"
        return (art.capitalize() if m.group(1)[0].isupper() else art) + m.group(2)

    return re.sub(rf"(?<!\w)(an?)(\s+)(?={re.escape(new)}(?!\w))", fix, text, flags=re.IGNORECASE)


def _direction(text: str, start: int) -> str:
    """How the number at ``text[start:]`` must move to break its claim: "up" after "over" / "more than" / "at least" /
    "after", "down" after "under" / "less than" / "before", "far" after "about" / "around", else "any"."""
    before = " ".join(text[:start].lower().split()[-3:])
    for words, way in ((_UP, "up"), (_DOWN, "down"), (_ABOUT, "far")):
        if any(re.search(rf"(?<!\w){re.escape(w)}$", before) for w in words):
            return way
    return "any"


def _told(name: str, knowledge: str) -> str:
    """:func:`_direction` of ``name``'s first mention in ``knowledge`` ("any" when it is not there)."""
    m = re.search(rf"(?<!\w){re.escape(name)}(?!\w)", knowledge, flags=re.IGNORECASE)
    return _direction(knowledge, m.start()) if m else "any"


def _breaks(old: Optional[float], new: Optional[float], way: str, date: bool = False) -> bool:
    """Whether a number moved from ``old`` to ``new`` breaks a claim qualified ``way``: up or down by half again at
    least ("over 80 million" -> "over 120 million"), a quarter away at least for an approximate one, or any other
    value; a year (``date``) up or down, ten years away for an approximate one."""
    if old is None or new is None:
        return way == "any"
    if date:
        return {"up": new > old, "down": new < old, "far": abs(new - old) >= 10}.get(way, new != old)
    if way == "up":
        return new >= 1.5 * old
    if way == "down":
        return new <= old / 1.5
    if way == "far":
        return not (old / 1.25 < new < old * 1.25)
    return new != old


def _kind_problem(ent: Any, label: str, knowledge_doc: Any, info: Optional[Mapping[str, EntityInfo]]) -> Optional[str]:
    """Why a shared entity is no safe place for a swap: the knowledge does not tag it with the same type, a name never
    seen capitalised inside a sentence, a date with no digit ("today"), a number stating no value or "one" ("one of
    the", "hundreds"), an ordinal used as an adverb ("was first used")."""
    text = ent.text.lower()
    if knowledge_doc is not None and not any(k.label_ == label and _occurs(text, k.text) for k in knowledge_doc.ents):
        return "the knowledge does not tag the shared entity with its type"
    if label in _NAMES and info is not None and not (info.get(_bare(ent).text.lower()) and
                                                       info[_bare(ent).text.lower()].name):
        return "the shared entity is not seen as a name (capitalised inside a sentence) in the data"
    if label in _DATES and not re.search(r"\d", text):
        return "a date without a number (today, the summer)"
    if label in _NUMBERS and _value(text) in (None, 1.0):
        return "a number stating no value, or one (one of the, hundreds)"
    if label in _NUMBERS and (re.search(r"\d\s*[,.]\s*$", ent.doc.text[:_bare(ent).start_char])
                              or re.match(r"\s*[,.]\s*\d", ent.doc.text[_bare(ent).end_char:])):
        return "part of a number the tokenisation split (45 , 700)"
    if label == "NORP" and _norp_kind(_bare(ent).text) is None:
        return "not a nationality, religion or party"
    subjects = ("nsubj", "nsubjpass")
    told = [k for k in knowledge_doc.ents if k.label_ == label and _occurs(text, k.text)] if knowledge_doc else []
    if label == "NORP" and any(t.dep_ in subjects for e in [ent, *told] for t in (e.root, e.root.head)):
        return "a nationality in the subject (Russian cuisine is diverse too: no contradiction)"
    after = ent.doc[ent.end] if ent.end < len(ent.doc) else None
    if label == "ORDINAL" and after is not None and after.lower_ in ("most", "-", "largest", "biggest", "best"):
        return "an ordinal of a superlative (third-most popular)"
    if label == "ORDINAL" and ent.root.dep_ not in ("amod", "nummod", "attr", "pobj", "dobj", "nsubj"):
        return "an ordinal used as an adverb (was first used)"
    if knowledge_doc is not None:
        return _claim_problem(ent, label, told, info)
    return None


def _relation(span: Any) -> set[str]:
    """The content words (lemmas) between an entity and its clause's verb, the verb included: what the sentence
    says of it ("formed in 1960": form; "an American painter": painter; "the capital of Tennessee": capital)."""
    out: set[str] = set()
    tok = span.root
    while tok.head.i != tok.i:
        tok = tok.head
        if tok.pos_ in ("NOUN", "VERB", "ADJ") and not tok.is_stop:
            out.add(tok.lemma_.lower())
        if tok.pos_ in ("VERB", "AUX"):
            break
    return out


def _qualifying(span: Any) -> bool:
    """Whether a place follows another place, with or without a comma ("Pasadena, California")."""
    doc, i = span.doc, span.start
    places = ("GPE", "LOC", "FAC")
    return i >= 1 and (doc[i - 1].ent_type_ in places or (i >= 2 and doc[i - 1].text == ","
                                                          and doc[i - 2].ent_type_ in places))


def _listed(span: Any) -> bool:
    """Whether an entity is one of a coordinated list ("Canada, Latin America, and Europe")."""
    root = span.root
    return root.dep_ == "conj" or any(c.dep_ == "conj" for c in root.children)


def _claim_problem(ent: Any, label: str, told: Sequence[Any], info: Optional[Mapping[str, EntityInfo]]
                   ) -> Optional[str]:
    """Why swapping the response's entity ``ent`` would not contradict the knowledge (its mentions ``told``), or
    None: the knowledge must state it in the same relation (:func:`_relation` shares a word) and alone, not as one of
    a list (another member could hold too); a place qualifying another ("Pasadena, California") moves to another
    level; a number in "one of the N ..." or a date "as of" bounds nothing; a person must be seen as a person."""
    doc, bare = ent.doc, _bare(ent)
    if _listed(ent) or any(_listed(k) for k in told):
        return "one of a list (another member could hold too): no contradiction"
    mine = _relation(ent)
    if mine and told and not any(mine & _relation(k) for k in told if _relation(k)):
        return "the knowledge states it in another relation: no contradiction"
    if label in ("GPE", "LOC") and any(_qualifying(e) for e in [ent, *told]):
        return "a place qualifying another (Pasadena, California)"
    if label in _NUMBERS and re.search(r"(?<!\w)one of the\s+$", doc.text[:bare.start_char].lower()):
        return "a number in 'one of the N ...': a rank, not a count"
    if label in _DATES and re.search(r"(?<!\w)as of\s+$", doc.text[:bare.start_char].lower()):
        return "a date 'as of': it bounds nothing"
    if label == "PERSON" and info is not None and not getattr(info.get(bare.text.lower()), "person", False):
        return "not seen as a person in the data (the agent or subject of what people do)"
    if label in ("GPE", "LOC") and info is not None and not getattr(info.get(bare.text.lower()), "level", None):
        return "a place whose level (city, state or country) the data does not show"
    return None


def swap_entity(response_doc: Any, knowledge: str, pool: Mapping[str, Sequence[str]],
                rng: random.Random, knowledge_doc: Any = None) -> Union[Edit, Skip]:
    """Replace (every mention of) an entity the response shares with the knowledge by another of the same kind,
    fixing "a" / "an" before it.

    Same kind, by more than the tagger's type: the replacement was seen with that type in the data (``pool``, best
    from :func:`entity_pool` over cased text); the shared entity is tagged with it in the knowledge too (given
    ``knowledge_doc``); names are names seen capitalised inside a sentence, with "the" before them as the original
    has it and plural as it is; dates and numbers keep their shape (:func:`_shape`: a year for a year), a number
    states another value, moved the way that breaks a qualified claim ("over 80 million" up, "under 5" down,
    "about 80" by a quarter at least) and never to a value the knowledge states."""
    text = response_doc.text
    info = getattr(pool, "info", None)
    shared: dict[tuple[str, str], Any] = {}
    for ent in response_doc.ents:
        if _occurs(_bare(ent).text, knowledge):
            shared.setdefault((_bare(ent).text.lower(), ent.label_), ent)
    if not shared:
        return Skip("no named entity shared by response and knowledge")
    keys = sorted(shared)
    rng.shuffle(keys)
    known = {v for v in (_value(m.group()) for m in re.finditer(
        r"\d[\d,.]*(?:\s+(?:hundred|thousand|million|billion|trillion))?", knowledge)) if v is not None}
    reason = "no other entity of the shared entity's type and shape in the data"
    for key in keys:
        ent, label = shared[key], key[1]
        kind = _kind_problem(ent, label, knowledge_doc, info)
        if kind:
            reason = kind
            continue
        bare = _bare(ent)
        name = bare.text
        the_before = bare.start > 0 and response_doc[bare.start - 1].lower_ == "the"
        way = "any"
        if label in _NUMBERS | _DATES:
            way, told = _direction(text, bare.start_char), _told(name, knowledge)
            dated = label in _DATES or re.match(r"\s*(?:bc|b\.c\.|bce|ad|a\.d\.)\b",
                                                text[bare.end_char:].lower()) is not None
            if dated and (way != "any" or told != "any"):
                reason = "a date qualified by before / after / at least ...: no move surely breaks it"
                continue
            if knowledge_doc is not None and way != "any" and told != "any":
                reason = "a bound in both texts (over 70, over 70): no value surely breaks it"
                continue
            if way == "any":  # the knowledge's bound: "over 80 million" is broken by a bare "40 million"
                way = {"up": "down", "down": "up"}.get(told, told)
        old = _value(name)

        def fits(c: str, name: str = name, label: str = label, old: Optional[float] = old, way: str = way,
                 the_before: bool = the_before) -> bool:
            if c.lower() == name.lower() or _occurs(c, knowledge) or _occurs(c, text):
                return False
            if label == "NORP" and _norp_kind(c) != _norp_kind(name):
                return False  # "an American painter" never "a Roman Catholic painter": both could hold
            if label not in _NAMES:
                new = _value(c)
                return (_shape(c.lower()) == _shape(name.lower()) and new not in known and new != 1.0
                        and (label == "ORDINAL" or new is not None or label in _DATES)
                        and _breaks(old, new, way, label in _DATES))
            seen = info.get(c.lower()) if info is not None else None
            if info is not None and (seen is None or not seen.name):
                return False
            if knowledge_doc is not None and seen is not None and (
                    (label == "PERSON" and not seen.person) or (label in ("GPE", "LOC") and seen.level != (
                        info.get(name.lower()).level if info.get(name.lower()) else None))):  # type: ignore[union-attr]
                return False  # a person for a person, a city for a city, a state or country for one
            if seen is not None and seen.the != the_before and (the_before or not seen.plural):
                return False  # "play the guitar" never "play the metallica"; "the beatles" never in "played beatles"
            orig = info.get(name.lower()) if info is not None else None
            return seen is None or orig is None or seen.plural == orig.plural

        options = sorted({c for c in pool.get(label, ()) if fits(c)})
        if not options:
            continue
        new = rng.choice(options)
        if name == name.lower():
            new = new.lower()
        pattern = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", flags=re.IGNORECASE)
        swapped = _with_article(pattern.sub(new.replace("\\", "\\\\"), text), new)  # a literal replacement
        return Edit(swapped, f"{name!r} -> {new!r} ({label})")
    return Skip(reason)


# -- subject / object inversion ---------------------------------------------------------------------------------
def _phrase(tok: Any) -> Optional[Any]:
    """The subtree span of a noun ``tok``; None when moving it would take a clause, a coordination or an apposition
    along (the result would be mangled) or when ``tok`` is no noun."""
    if tok.pos_ not in _NOUNS or any(c.dep_ in _UNMOVABLE for c in tok.children):
        return None
    return tok.doc[tok.left_edge.i : tok.right_edge.i + 1]


def _clause(verb: Any) -> Optional[tuple[Any, Any]]:
    """(subject phrase, object phrase) of an active clause with a direct object or of a passive with an agent, both
    movable noun phrases, subject first; None otherwise. (The verb's own tag is not checked: the tagger sometimes
    calls a verb a noun, "the dog bit the cat", while the parser still gives it a subject and an object.)"""
    children = list(verb.children)
    subj = next((c for c in children if c.dep_ == "nsubj"), None)
    obj = next((c for c in children if c.dep_ == "dobj"), None)
    if subj is None or obj is None:
        subj = next((c for c in children if c.dep_ == "nsubjpass"), None)
        agent = next((c for c in children if c.dep_ == "agent"), None)
        obj = next((c for c in agent.children if c.dep_ == "pobj"), None) if agent is not None else None
    if subj is None or obj is None:
        return None
    s, o = _phrase(subj), _phrase(obj)
    if s is None or o is None or s.end > o.start or s.text.lower() == o.text.lower():
        return None
    return s, o


def invert(knowledge_doc: Any, response_words: set[str]) -> Union[Edit, Skip]:
    """Swap subject and object of the first invertible clause of the knowledge whose subject and object both share a
    content word with the response (``response_words``, lower-cased forms and lemmas): a relation the response draws
    on. Sentences sharing most with the response are tried first, main clauses first."""
    text = knowledge_doc.text
    ranked = [(n, s) for n, s in _by_overlap(knowledge_doc, response_words) if n > 0]
    if not ranked:
        return Skip("no knowledge sentence shares a content word with the response")
    reason = "no clause with a movable noun subject and object in the sentences the response draws on"
    for _, sent in ranked:
        for verb in sorted(sent, key=lambda t: (t != sent.root, t.i)):
            found = _clause(verb)
            if found is None:
                continue
            s, o = found
            if not (content_forms(s) & response_words and content_forms(o) & response_words):
                reason = "the response names no invertible clause's subject and object"
                continue
            subj, obj = s.text, o.text
            if s.start == sent.start and text[s.start_char].isupper():
                if s[0].pos_ != "PROPN":
                    subj = subj[0].lower() + subj[1:]
                obj = obj[0].upper() + obj[1:]
            new = text[:s.start_char] + obj + text[s.end_char:o.start_char] + subj + text[o.end_char:]
            return Edit(new, f"{s.text!r} <-> {o.text!r}")
    return Skip(reason)


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
    from q2_plugins.datasets.textcheck import default_budget, text_problem

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
        from q2_plugins.metric.spacy_parts import load_spacy

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


def _write_jsonl(path: str, items: Sequence[Any]) -> None:
    import json

    with open(path, "w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item.to_dict(), ensure_ascii=False) + "\n")


def stress_pairs(options: PerturbOptions, progress: bool = False) -> dict[str, Any]:
    """Read ``options.inputs[0]``, make its stress pairs, write them to ``options.output``; returns the summary.
    ``progress``: the rows counted on standard error as ``q2 score`` counts them (a bar on a terminal, plain lines
    in a log)."""
    from q2_plugins.datasets.textcheck import cells

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
            from q2_plugins.metric.progress import Progress

            bar = stack.enter_context(Progress(total=len(rows)))
        pairs, report = make_stress_pairs(
            responses=[c[0] for c in columns], knowledge=[c[1] for c in columns],
            ids=[f"unreadable row {n}" if "__error__" in row else row.get(id_column) if id_column else n
                 for n, row in rows],
            topics=[row.get(topic_column) for _, row in rows] if topic_column else None,
            methods=options.methods, seed=options.seed, spacy_model=options.spacy_model, progress=bar,
        )
    _write_jsonl(options.output, pairs)
    return {"input": path, "n_read": n_read, "keep": options.keep, "output": options.output,
            "n_pairs": len(pairs), "id_column": id_column, "topic_column": topic_column, **report.to_dict()}
