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
training recipes (:mod:`q2_plugins.recipes`) build on these edits; this module never imports them. Every random
choice comes from ``random.Random`` seeded with ``(seed, source id, method)``: the same input and seed give the same
pairs, whatever the other rows or methods.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Literal, Mapping, Optional, Sequence, Union

from .datasets.grounded import keep_filter
from .datasets.registry import recipe_inputs
from .errors import SettingError
from .taxonomy import COARSE

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
    "swap_entity",
    "invert",
    "entity_pool",
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


def negate(response_doc: Any, knowledge_words: Optional[set[str]] = None, *,
           best_sentence_only: bool = False) -> Union[Edit, Skip]:
    """Negate one auxiliary or copular verb of the response (or remove its negation).

    The verb is the first negatable one of the sentence sharing most content words with the knowledge
    (``knowledge_words``, lower-cased forms and lemmas), preferring verbs of the sentence's main clause; with
    ``best_sentence_only`` only that sentence is tried. Only the words of :data:`NEGATABLE`, used as auxiliaries (or
    any form of "be"), count; contracted forms ("'s") do not. A verb is never negated in a question, a quotation or
    title, a clause of the speaker ("i do know ...") or a hedged one ("may"), nor (given ``knowledge_words``) in a
    clause that shares no content word with the knowledge: the negation must contradict a claim the knowledge
    supports.
    """
    text = response_doc.text
    reasons: Counter[str] = Counter()
    ranked = _by_overlap(response_doc, knowledge_words or set())
    for _, sent in ranked[:1] if best_sentence_only else ranked:
        verbs = [t for t in sent if t.lower_ in NEGATABLE and (t.pos_ == "AUX" or t.lemma_ == "be")]
        verbs.sort(key=lambda t: (0 if t == sent.root or (t.dep_.startswith("aux") and t.head == sent.root) else 1,
                                  t.i))
        for tok in verbs:
            site = _negation_site(tok)
            blocked = _blocked(tok, knowledge_words)
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
    from pathlib import Path

    path = Path(__file__).parent / "data" / "wordnet_antonyms" / "adjectives.tsv"
    pairs: dict[str, set[str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines()[1:]:
        word, other = line.split("\t")
        pairs.setdefault(word, set()).add(other)
        pairs.setdefault(other, set()).add(word)
    return {w: tuple(sorted(o)) for w, o in pairs.items()}


def antonym(response_doc: Any, knowledge_words: set[str], antonyms: Mapping[str, Sequence[str]],
            rng: random.Random) -> Union[Edit, Skip]:
    """Replace an adjective of the response that the knowledge also uses (a claim it supports) by its WordNet
    antonym, fixing "a" / "an" before it; never in a question, a quotation or title, the speaker's hedge, or a
    negated clause."""
    text = response_doc.text
    found = [t for t in response_doc if t.pos_ == "ADJ" and t.lower_ in antonyms]
    if not found:
        return Skip("no adjective with a WordNet antonym")
    supported = [t for t in found if t.lower_ in knowledge_words]
    if not supported:
        return Skip("no adjective with an antonym that the knowledge uses")
    reasons: Counter[str] = Counter()
    for tok in supported:
        blocked = _blocked(tok, knowledge_words)
        clause = tok.head if tok.dep_ in ("amod", "acomp") else tok
        if blocked is None and any(c.dep_ == "neg" for c in list(clause.children) + list(tok.children)):
            blocked = "negated by another word (never, no, ...)"
        if blocked:
            reasons[blocked] += 1
            continue
        new = rng.choice(sorted(antonyms[tok.lower_]))
        if tok.text[:1].isupper():
            new = new.capitalize()
        swapped = text[:tok.idx] + new + text[tok.idx + len(tok.text):]
        return Edit(_with_article(swapped, new), f"{tok.text!r} -> {new!r} (WordNet antonym)")
    return Skip(reasons.most_common(1)[0][0])


# -- entity swap ----------------------------------------------------------------------------------------------------
def _occurs(needle: str, haystack: str) -> bool:
    return re.search(rf"(?<!\w){re.escape(needle)}(?!\w)", haystack, flags=re.IGNORECASE) is not None


_NAMES = frozenset({"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART", "LANGUAGE"})


def _shape(name: str) -> str:
    """The form of an entity's text: letters runs "a", digit runs "0" (four or more "0000", a year's), the rest kept:
    a swap keeps it, so a year stays a year and a count a count."""
    return re.sub(r"[^\W\d_]+", "a", re.sub(r"\d+", lambda m: "0000" if len(m.group()) >= 4 else "0", name))


def entity_pool(docs: Sequence[Any]) -> dict[str, list[str]]:
    """Named entities of ``docs`` by type: each distinct (case-insensitively) text once, in order of appearance, in
    its first cased form if one was seen (lower-cased data sets mix with cased ones). A text goes under the type the
    tagger gives it most often only, and a name (a person, a place, ...) only when it was seen capitalised: the
    tagger's odd calls ("stevia" as a nationality) stay out."""
    pool: dict[str, dict[str, str]] = {}
    votes: dict[str, Counter[str]] = {}
    for doc in docs:
        for ent in doc.ents:
            name = ent.text.strip()
            if name and "\n" not in name and any(ch.isalnum() for ch in name):
                votes.setdefault(name.lower(), Counter())[ent.label_] += 1
                forms = pool.setdefault(ent.label_, {})
                if forms.get(name.lower(), name.lower()) == name.lower():  # prefer a cased form
                    forms[name.lower()] = name
    return {label: [n for key, n in names.items() if votes[key].most_common(1)[0][0] == label
                    and (label not in _NAMES or n[:1].isupper())] for label, names in pool.items()}


def _with_article(text: str, new: str) -> str:
    """``text`` with "a" / "an" before each ``new`` agreeing with its first letter."""
    def fix(m: re.Match) -> str:
        art = "an" if new[:1].lower() in "aeiou" else "a"
        return (art.capitalize() if m.group(1)[0].isupper() else art) + m.group(2)

    return re.sub(rf"(?<!\w)(an?)(\s+)(?={re.escape(new)}(?!\w))", fix, text, flags=re.IGNORECASE)


def swap_entity(response_doc: Any, knowledge: str, pool: Mapping[str, Sequence[str]],
                rng: random.Random) -> Union[Edit, Skip]:
    """Replace (every mention of) an entity the response shares with the knowledge by another of its type (and, for
    dates, times and quantities, of its shape, :func:`_shape`: a year by a year), fixing "a" / "an" before it."""
    text = response_doc.text
    shared: dict[tuple[str, str], str] = {}
    for ent in response_doc.ents:
        if _occurs(ent.text, knowledge):
            shared.setdefault((ent.text.lower(), ent.label_), ent.text)
    if not shared:
        return Skip("no named entity shared by response and knowledge")
    keys = sorted(shared)
    rng.shuffle(keys)
    for key in keys:
        name, label = shared[key], key[1]
        options = sorted({c for c in pool.get(label, ()) if c.lower() != name.lower() and not _occurs(c, knowledge)
                          and not _occurs(c, text) and (label in _NAMES or _shape(c.lower()) == _shape(name.lower()))})
        if not options:
            continue
        new = rng.choice(options)
        if name == name.lower():
            new = new.lower()
        pattern = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", flags=re.IGNORECASE)
        swapped = _with_article(pattern.sub(new.replace("\\", "\\\\"), text), new)  # a literal replacement
        return Edit(swapped, f"{name!r} -> {new!r} ({label})")
    return Skip("no other entity of the shared entity's type and shape in the data")


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


def _text(value: Any) -> Optional[str]:
    return value if isinstance(value, str) and value.strip() else None


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
) -> tuple[list[StressPair], PerturbReport]:
    """Perturb every (response, knowledge) pair with every method; returns the pairs (row order, then method order)
    and the report of what was made and skipped. Rows with an empty response or knowledge are skipped by every
    method. ``ids`` (default: the row numbers) must be unique; ``topics`` steer the random pairing."""
    unknown = [m for m in methods if m not in METHODS]
    if unknown:
        raise ValueError(f"Unknown perturbation method(s) {unknown}; expected names from {list(METHODS)}")
    methods = tuple(dict.fromkeys(methods))
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
    if nlp is None:
        from .spacy_parts import load_spacy

        nlp = load_spacy(spacy_model)

    resp = [_text(r) for r in responses]
    know = [_text(k) for k in knowledge]
    usable = [i for i in range(n) if resp[i] is not None and know[i] is not None]
    report = PerturbReport(n, methods, seed)
    rdocs = dict(zip(usable, nlp.pipe([resp[i] for i in usable])))
    unique_k = list(dict.fromkeys(know[i] for i in usable))
    kdocs = dict(zip(unique_k, nlp.pipe(unique_k)))
    pool = entity_pool(list(rdocs.values()) + list(kdocs.values())) if "entity_swap" in methods else {}
    distinct = list(unique_k)
    by_topic: dict[str, list[str]] = {}
    if topic_of is not None:
        for i in usable:
            if topic_of[i] is not None and know[i] not in by_topic.setdefault(topic_of[i], []):
                by_topic[topic_of[i]].append(know[i])  # type: ignore[arg-type]

    pairs: list[StressPair] = []
    for i in range(n):
        if i not in rdocs:
            for m in methods:
                report.skip(m, "empty response or knowledge")
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
    return pairs, report


# -- command line: q2 perturb --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PerturbOptions:
    """What ``q2 perturb`` does, as typed settings (the command line maps its flags one-to-one onto these).

    ``recipe`` None makes stress pairs of one input with ``methods``; ``"begin"`` / ``"conv-fever"`` make a training
    set (:mod:`q2_plugins.recipes`) from the grounded rows of every input. ``dataset`` says how an input is read:
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
    response_column: str = "response"
    knowledge_column: str = "knowledge"
    previous_column: Optional[str] = None
    id_column: Optional[str] = None
    topic_column: Optional[str] = None
    keep: Optional[str] = None
    methods: tuple[str, ...] = METHODS
    seed: int = 0
    spacy_model: str = "en_core_web_sm"
    generator: Optional[str] = None
    balance: bool = True

    def __post_init__(self) -> None:
        if not self.inputs:
            raise SettingError("inputs", "name at least one input")
        if self.recipe is None and len(self.inputs) > 1:
            raise SettingError("inputs", "stress pairs read one input; several inputs go with recipe begin or "
                                         "conv-fever")
        if self.generator and self.recipe != "begin":
            raise SettingError("generator", "writes BEGIN's hallucinations: use it with recipe begin")
        if self.dataset not in DATASETS:
            raise SettingError("dataset", f"must be one of {', '.join(DATASETS)}, got {self.dataset!r}")


def _write_jsonl(path: str, items: Sequence[Any]) -> None:
    import json

    with open(path, "w", encoding="utf-8") as f:
        for item in items:
            f.write(json.dumps(item.to_dict(), ensure_ascii=False) + "\n")


def stress_pairs(options: PerturbOptions) -> dict[str, Any]:
    """Read ``options.inputs[0]``, make its stress pairs, write them to ``options.output``; returns the summary."""
    from .io import read_checked_rows

    path = options.inputs[0]
    keep = keep_filter(options.keep)
    fields = [("response_column", options.response_column), ("knowledge_column", options.knowledge_column),
              ("id_column", options.id_column), ("topic_column", options.topic_column),
              ("keep", keep[0] if keep else None)]
    rows = list(read_checked_rows(path, options.input_format, fields))
    n_read = len(rows)
    if keep:
        rows = [(n, row) for n, row in rows if str(row[keep[0]]).strip() in keep[1]]
    first = rows[0][1] if rows else {}
    id_column = options.id_column or ("id" if "id" in first else None)
    topic_column = options.topic_column or ("topic" if "topic" in first else None)
    pairs, report = make_stress_pairs(
        responses=[row[options.response_column] for _, row in rows],
        knowledge=[row[options.knowledge_column] for _, row in rows],
        ids=[row.get(id_column) if id_column else n for n, row in rows],
        topics=[row.get(topic_column) for _, row in rows] if topic_column else None,
        methods=options.methods, seed=options.seed, spacy_model=options.spacy_model,
    )
    _write_jsonl(options.output, pairs)
    return {"input": path, "n_read": n_read, "keep": options.keep, "output": options.output,
            "n_pairs": len(pairs), "id_column": id_column, "topic_column": topic_column, **report.to_dict()}
