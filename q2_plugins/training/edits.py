"""Text edits that turn a supported claim into a contradicted one: negation, antonym and subject / object inversion.

* :func:`negate` — an auxiliary or copular verb (:data:`NEGATABLE`) negated, or its negation removed: "is" -> "is
  not", "can" -> "cannot", "didn't" -> "did"; a claim the other text supports, never a question, a quotation or title,
  the speaker's hedge ("i do know") or a "may".
* :func:`antonym` — an adjective the other text uses, replaced by its WordNet antonym where the adjective is the claim.
* :func:`invert` — subject and object of a knowledge clause swapped ("Romulus built Rome" -> "Rome built Romulus";
  passives through their agent), in the knowledge sentence the response draws on.

Each returns an :class:`Edit` or, where it does not apply, a :class:`Skip` with the reason (counted by its caller).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Container, Literal, Mapping, Optional, Sequence, Union

from q2_plugins.datasets.bundled import DATA_DIR

__all__ = [
    "NEGATABLE",
    "SUBJECTS",
    "NOUNS",
    "Edit",
    "Skip",
    "content_forms",
    "with_article",
    "negate",
    "antonym",
    "wordnet_antonyms",
    "model_words",
    "invert",
]

NEGATABLE = frozenset({"are", "is", "was", "were", "have", "has", "had", "do", "does", "did", "can", "could", "may",
                       "might", "must", "shall", "should", "will", "would"})

_NOT = frozenset({"not", "n't"})
_OTHER_NEGATIONS = frozenset({"never", "no", "nothing", "nobody", "none", "nowhere", "neither", "nor"})
SUBJECTS = ("nsubj", "nsubjpass", "expl")
NOUNS = ("NOUN", "PROPN")
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




def with_article(text: str, new: str) -> str:
    """``text`` with "a" / "an" before each ``new`` agreeing with its first letter."""
    def fix(m: re.Match) -> str:
        art = "an" if new[:1].lower() in "aeiou" else "a"
        return (art.capitalize() if m.group(1)[0].isupper() else art) + m.group(2)

    return re.sub(rf"(?<!\w)(an?)(\s+)(?={re.escape(new)}(?!\w))", fix, text, flags=re.IGNORECASE)



# -- negation -----------------------------------------------------------------------------------------------------
def _negation_site(tok: Any) -> Union[Literal["insert", "remove"], Skip]:
    """"insert" or "remove" for a negatable verb token, or why it cannot be negated."""
    clause = tok.head if tok.dep_ in ("aux", "auxpass") else tok
    subjects = [c for c in clause.children if c.dep_ in SUBJECTS]
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
        if any(c.dep_ in SUBJECTS for c in clause.children):
            break
        clause = clause.head  # a clause without its own subject speaks for its head's
    if any(c.dep_ in SUBJECTS and c.lower_ in _SPEAKERS for c in clause.children):
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
                                                  and c.dep_ in SUBJECTS + ("dobj", "pobj") for c in clause.children):
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
    stack = [c for c in clause.children if c.dep_ not in SUBJECTS + ("csubj",)]
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
_PREDICATE_NOUN = ("attr", "dobj", "oprd")  # a noun the clause says of its subject: "is a hot drink", "has strong legs"
_DETERMINING = frozenset({"certain", "particular", "various", "whole", "entire", "main", "only", "very", "same",
                          "other", "given", "specific"})  # adjectives that pick a thing out rather than describe it
_COLOURS = frozenset({"green", "black", "white", "blue", "red", "yellow", "brown", "grey", "gray", "pink", "purple",
                      "orange"})  # a colour's WordNet antonym is of another sense ("green": "ripe")
# the speaker's doubt written out, as a pre-tokenised text's parse may miss it ("i ' m not sure when it became ...")
_DOUBT = re.compile(r"\b(?:not sure|i think|i guess|i believe|i suppose|i wonder|(?:don\s*'?\s*t|do not) know)\b")
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
    before = doc.text[tok.sent.start_char:tok.idx].lower()
    doubt = list(_DOUBT.finditer(before))
    if doubt and not re.search(r"\bbut\b", before[doubt[-1].end():]):
        return "under the speaker's doubt or opinion (i'm not sure when ..., i think ...)"
    if any(any(c.dep_ in SUBJECTS and c.lower_ in _SPEAKERS for c in a.children) and (
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
        if noun.dep_ in SUBJECTS or noun.dep_ == "csubj":
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
    :func:`model_words`) has it; never "same" / "other", which need another determiner; never a colour's ("green":
    "ripe" is the unripe sense), nor one of several senses unless the word's own prefixed antonym is among them
    ("common": "uncommon", never "individual"; "dominant": none)."""
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
        own = [a for a in options if _prefixed(tok.lower_, a)]  # "uncommon" says "not common" in the sense used
        if blocked is None and not options:
            blocked = "no antonym that is a real word of the same use (made-up prefixed forms, 'same')"
        if blocked is None and tok.lower_ in _COLOURS:
            blocked = "a colour word (its WordNet antonym is of another sense: green, ripe)"
        if blocked is None and not own and len(options) > 1:
            blocked = "antonyms of several senses and none of the word's own (dominant: recessive, subordinate)"
        if blocked:
            reasons[blocked] += 1
            continue
        new = rng.choice(own or options)
        if tok.text[:1].isupper():
            new = new.capitalize()
        swapped = text[:tok.idx] + new + text[tok.idx + len(tok.text):]
        return Edit(with_article(swapped, new), f"{tok.text!r} -> {new!r} (WordNet antonym)")
    return Skip(reasons.most_common(1)[0][0])


# -- subject / object inversion ---------------------------------------------------------------------------------
def _phrase(tok: Any) -> Optional[Any]:
    """The subtree span of a noun ``tok``; None when moving it would take a clause, a coordination or an apposition
    along (the result would be mangled) or when ``tok`` is no noun."""
    if tok.pos_ not in NOUNS or any(c.dep_ in _UNMOVABLE for c in tok.children):
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


