"""Entity swaps: the named entities of a data set by kind (:func:`entity_pool`) and the swap of one a response shares
with its knowledge for another of the same kind (:func:`swap_entity`), "a" / "an" agreeing; with the knowledge's parse,
a contradiction only where the knowledge states the original alone and in the same relation.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Union

from q2_plugins.training.edits import NOUNS, Edit, Skip, with_article

__all__ = ["EntityInfo", "EntityPool", "entity_pool", "swap_entity"]


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
                if after is None or (after.pos_ not in NOUNS and after.text not in ("-", "\u2013", "\u2014")):
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


def _same_kind(seen: Optional[EntityInfo], orig: Optional[EntityInfo], label: str) -> bool:
    """Whether a replacement seen as ``seen`` is of the original's kind: a person for a person, a city for a city, a
    state or country for one (unknown as unknown: the pool's own checks decide)."""
    if seen is None:
        return True
    if label == "PERSON":
        return seen.person
    return label not in ("GPE", "LOC") or seen.level == (orig.level if orig is not None else None)


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
            if knowledge_doc is not None and not _same_kind(seen, info.get(name.lower()), label):  # type: ignore
                return False
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
        swapped = with_article(pattern.sub(new.replace("\\", "\\\\"), text), new)  # a literal replacement
        return Edit(swapped, f"{name!r} -> {new!r} ({label})")
    return Skip(reason)


