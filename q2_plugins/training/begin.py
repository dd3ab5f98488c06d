"""BEGIN's silver set (Dziri et al., §4; ``recipe="begin"``): five labels, balanced by the runner
(:func:`q2_plugins.training.recipes.make_training_set`).

* ``entailment`` (``original``): the grounded response, when it passes BEGIN's filter (:func:`begin_filter`: no
  first-person pronoun, at least 25% of its words in the evidence); the others are skipped and counted.
* ``hallucination``, on topic and unverifiable. By default (``neighbour_response``) the response written for the
  *related* evidence (the other evidence sharing most content words with this one) whose response shares a content
  word with this evidence beyond the topic's name and has one it lacks. With a generator (``generated``, BEGIN's own
  way) the evidence is perturbed (subject and object swapped, else up to two entities swapped for others of their
  type) and a dialogue model writes a response from the previous turn and the perturbed evidence. Either is paired
  with the *original* evidence.
* ``off-topic`` (``unrelated_response``): the response of a row of the *same topic* (another dialogue, other
  evidence) sharing no noun, adjective or number with this evidence, as BEGIN samples them (topics: a WoW folder's
  ``topic`` column, a table's topic column, a BEGIN file's knowledge source); where the data has no topics, or no
  such row, one of another dialogue and topic sharing no noun with it nor naming its topic (a fallback, counted and
  said in the row's ``change``).
* ``generic`` (``generic_response``): one of :data:`GENERIC_RESPONSES` with an opener, drawn at random, written in
  the input's tokenisation ("that ' s great !" when the responses are pre-tokenised); with a generator, sampled from
  the previous turn alone at temperature 0.4, as BEGIN does.
* ``contradiction``: a claim of the response that the evidence supports, negated (``negation``,
  :func:`q2_plugins.training.edits.negate`: never a question, a quotation or title, the speaker's hedge or a "may"),
  or an adjective the evidence uses replaced by its WordNet antonym (``antonym``, :func:`~q2_plugins.training.edits.
  antonym`, Open English WordNet's pairs bundled in ``q2_plugins/data/wordnet_antonyms``); one of the two, drawn at
  random, when both apply.

Each row gives at most one example per label; the runner then balances the set.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from typing import Any, Optional, Sequence, Union

from q2_plugins.datasets.grounded import SourceRow
from q2_plugins.training.edits import Edit, Skip, antonym, content_forms, invert, negate
from q2_plugins.training.entities import entity_pool, swap_entity
from q2_plugins.training.examples import RecipeReport, ResponseGenerator, TrainingRow, training_row
from q2_plugins.training.perturb import counted

__all__ = [
    "GENERIC_RESPONSES",
    "FIRST_PERSON",
    "begin_filter",
    "personal_statement",
    "begin_examples",
    "off_topic_draws",
]


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


_HEDGE_VERBS = frozenset({"know", "think", "believe", "guess", "suppose", "mean", "say", "hear", "read", "learn",
                          "see", "remember", "wonder", "agree", "understand", "assume", "recall", "feel"})
# hedge verbs that tell an experience when they take a thing ("i have never seen them", "i remember watching it")
_EXPERIENCE_VERBS = frozenset({"see", "hear", "read", "learn", "remember", "recall", "feel"})
_HEDGE_STATES = frozenset({"sure", "certain", "aware", "afraid", "positive", "right", "correct", "glad", "happy"})
# "i do (not)", "i have (not)", "i am (not)", "i can't": a verb standing for the question's, telling nothing itself
_PRO_VERBS = frozenset({"do", "have", "be", "can", "will", "would", "could", "should"})
_COMPLEMENTS = frozenset({"dobj", "xcomp", "ccomp", "acomp", "attr", "oprd", "prep", "dative", "advcl", "agent",
                          "npadvmod"})


#: sharing the previous turn's taste, experience or opinion: "me too", "so do i", "i agree", "i think so too"
_AGREEING = re.compile(r"\b(?:me (?:too|neither|either)|so (?:do|did|am|have) i|neither (?:do|did|am|have) i|"
                       r"same here|i (?:totally |completely |strongly )?agree|i think so too|i feel the same|"
                       r"you(?:'re| ' re| are) (?:so |absolutely |totally )?right)\b", re.IGNORECASE)
#: what a speaker finds a thing ("i think it's interesting that ..."): an opinion, not a hedge
_EVALUATIVE = frozenset({"interesting", "great", "cool", "amazing", "awesome", "fun", "funny", "sad", "nice", "good",
                         "bad", "weird", "crazy", "fascinating", "beautiful", "delicious", "boring", "terrible",
                         "wonderful", "neat", "cute", "scary", "impressive", "incredible", "silly", "strange"})
_SPLIT_CONTRACTION = re.compile(r"(\w)\s+'\s+(m|re|ve|s|d|ll|t)\b", re.IGNORECASE)


def personal_statement(doc: Any, nlp: Any = None) -> Optional[str]:
    """The first-person clause of ``doc`` that tells a personal experience, taste or fact ("i love gardening", "my
    brother skis", "we went there"), or None; a hedge ("i think", "i'm not sure", "i know that") tells none. Given
    ``nlp``, a pre-tokenised text ("i ' m not sure") is parsed again with its contractions joined (the parser reads
    "i ' m" as no verb at all)."""
    if nlp is not None and _SPLIT_CONTRACTION.search(doc.text):
        doc = nlp(_SPLIT_CONTRACTION.sub(r"\1'\2", doc.text))
    agreed = _AGREEING.search(doc.text)
    if agreed:
        return agreed.group(0).lower()  # "me too !": the previous turn's taste or experience, the speaker's too
    for tok in doc:
        low = tok.lower_
        if low in ("my", "our") and tok.dep_ == "poss":
            return tok.head.text if tok.head is not None else low
        if low in ("me", "us") and tok.dep_ in ("dobj", "dative") and tok.head.pos_ == "VERB" \
                and tok.head.lemma_.lower() not in _HEDGE_VERBS | {"tell", "let", "ask", "give", "show"}:
            return f"{tok.head.text} {tok.text}"  # "it took me a while": what happened to the speaker
        if low in ("i", "we") and tok.dep_ in ("nsubj", "nsubjpass"):
            head = tok.head
            lemma = head.lemma_.lower()
            if lemma in _HEDGE_VERBS:
                if lemma in _EXPERIENCE_VERBS and any(c.dep_ in ("dobj", "xcomp") and c.lower_ not in (
                        "so", "that", "it", "this") for c in head.children):
                    return f"{tok.text} {head.text}"  # "i have never seen them live", "i did not read them"
                if any(c.dep_ == "ccomp" and any(g.dep_ == "acomp" and g.lower_ in _EVALUATIVE for g in c.children)
                       for c in head.children):
                    return f"{tok.text} {head.text}"  # "i think it's interesting that ...": an opinion
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


def _names(words: set[str], title: set[str]) -> bool:
    """Whether ``words`` (lower-cased forms and lemmas) name one of the ``title`` words (a plural "s" aside)."""
    return any(t in words or f"{t}s" in words or (t.endswith("s") and t[:-1] in words) for t in title if len(t) > 2)


_DEFINITE = frozenset({"the", "this", "these", "that", "those"})


def refers_to_title(kdoc: Any) -> bool:
    """Whether an evidence sentence speaks of its article's title without naming it: its subject a pronoun ("It was
    broadcast ..."), owned by one ("Its high latitude ..."), or a definite description with no name in it ("The
    series takes place ..."), as a Wikipedia article's later sentences speak of their title."""
    sent = next(iter(kdoc.sents), None)
    if sent is None:
        return False
    subject = next((t for t in sent.root.children if t.dep_ in ("nsubj", "nsubjpass")), None)
    if subject is None:
        return False
    if subject.lower_ in _PRONOUNS or subject.lower_ in ("this", "that"):
        return True
    below = list(subject.children)
    if any(c.dep_ == "poss" and c.lower_ in _PRONOUNS for c in below):
        return True
    return (subject.pos_ != "PROPN" and any(c.dep_ == "det" and c.lower_ in _DEFINITE for c in below)
            and not any(c.pos_ == "PROPN" for c in below))


def _common_words(rows: Sequence[SourceRow], knouns: Sequence[set[str]], rnouns: Sequence[set[str]]) -> set[str]:
    """The nouns, adjectives and numbers that many topics use (in the evidence or responses of at least 3 topics and
    5% of them): words a response may share with an evidence of another subject."""
    topics: dict[str, set[str]] = {}
    for row, k, r in zip(rows, knouns, rnouns):
        topics.setdefault(row.topic or row.dialogue or row.id, set()).update(k | r)
    seen: Counter = Counter(w for words in topics.values() for w in words)
    least = max(3, 0.05 * len(topics))
    return {w for w, n in seen.items() if n >= least}


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
        self.titled = [refers_to_title(kdocs[r.knowledge]) for r in rows]
        # a topic is a title entity (a WoW topic: "McDonald's") when some of its rows name it, not a source's name
        # (a BEGIN file's "Wizard of Wikipedia")
        self.titles = {r.topic for n, r in enumerate(rows)
                       if r.topic and _names(self.kwords[n] | self.rwords[n], self.topic_words[r.topic])}
        self.rents = [{e.text.lower() for e in d.ents if e.label_ not in ("CARDINAL", "ORDINAL") and len(e.text) > 2}
                      for d in rdocs]  # (not "one", "first": words any text may have)
        self.previous = [set(re.findall(r"\w+", (r.previous or "").lower())) if isinstance(r.previous, str) else set()
                         for r in rows]
        self.common = _common_words(rows, self.knouns, self.rnouns)
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
        (it shares a noun, adjective or number with it that few topics use: a common word alone leaves it off-topic,
        :meth:`about_subject`) and adds to it (under 60% of its content words in the
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
            if not (self.rnouns[j] & self.knouns[i]) - self.common:
                reason = ("no response of this topic shares a noun, adjective or number with the evidence (beyond "
                          "words many topics use)")
                continue
            if len(words) < 2 or not words - self.kwords[i] or shared >= 0.6 * len(words):
                reason = "the same-topic responses add nothing the evidence lacks"
                continue
            if shared > best_n:
                best, best_n = j, shared
        return reason if best is None else best

    def about_subject(self, i: int, j: int) -> Optional[str]:
        """Why row ``j``'s response is about the subject of row ``i``'s evidence, so that BEGIN's annotators, asked
        first whether a response is about the document's topic (appendix B), would not call it off-topic; None when it
        is not. The subject: the title entity (the topic's name: the response names it, or its own evidence speaks of
        it, :func:`refers_to_title`, the response being grounded in it), a named entity of the response that the
        evidence or the previous turn names, or a key content word (a noun, adjective or number that few topics use)
        the response shares with them; a shared common word alone does not make it so."""
        title = self.topic_words.get(self.rows[i].topic, set()) if self.rows[i].topic in self.titles else set()
        if _names(self.rwords[j], title):
            return "the response names the title entity"
        if title and (_names(self.kwords[j], title) or self.titled[j]):
            return ("the response's own evidence is about the title entity (names it, or speaks of it as 'it', "
                    "'the ...')")
        context = self.kwords[i] | self.previous[i]
        text = f"{self.rows[i].knowledge} {self.rows[i].previous or ''}".lower()
        if any(re.search(rf"(?<!\w){re.escape(e)}(?!\w)", text) for e in self.rents[j]):
            return "the response names an entity of the evidence or previous turn"
        if {w for w in self.rnouns[j] & context if len(w) > 2} - self.common:
            return "the response shares a key content word with the evidence or previous turn"
        return None

    def unrelated(self, i: int, rng: random.Random, report: Optional[RecipeReport] = None
                  ) -> tuple[Optional[int], bool]:
        """A random row of the same topic (another dialogue, other knowledge), as BEGIN samples its off-topic
        responses, whose response is about something (a noun its own evidence or topic names, no third-person
        pronoun) and not about row ``i``'s evidence's subject (:meth:`about_subject`; the candidates that are are
        dropped and counted in ``report``); when there is none
        (or no topic), one of another dialogue and topic whose knowledge shares no content word with it and whose
        response shares no noun, adjective or number with it nor names its topic (second value True: the
        fallback)."""
        row = self.rows[i]

        def drawable(j: int) -> bool:
            r = self.rows[j]
            return r.knowledge != row.knowledge and r.response != row.response and (
                row.dialogue is None or r.dialogue != row.dialogue) and bool(self.about[j]) and self.named[j]

        if row.topic:
            same = []
            for j in self.by_topic.get(row.topic, ()):
                if self.rows[j].topic != row.topic or not drawable(j):
                    continue
                why = self.about_subject(i, j)
                if why is None:
                    same.append(j)
                elif report is not None:
                    report.drop("unrelated_response", f"a same-topic candidate about the evidence's subject: {why}")
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
                   report: RecipeReport, nlp: Any = None) -> Optional[TrainingRow]:
    """BEGIN's contradiction of one row: negation or antonym, one drawn at random when both apply. ``antonyms``:
    the WordNet pairs and the real words an antonym may be. A response that tells a personal experience or taste
    (:func:`personal_statement`) gives none (dropped and counted): BEGIN's annotators answer the personal question
    before the contradiction one (appendix B), so its edit would be labelled a hallucination."""
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
    personal = personal_statement(rdoc, nlp)
    if personal is not None:
        report.drop(method, "the response tells a personal experience or taste: a hallucination by BEGIN's order "
                            "of questions (personal before contradiction)")
        return None
    edit = edits[method]
    return training_row(src, "begin", method, "contradiction", "contradiction", src.knowledge, edit.text,  # type: ignore
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
    return training_row(src, "begin", method, "hallucination", "neutral", src.knowledge, *made[method])


def begin_examples(rows: Sequence[SourceRow], rdocs: Sequence[Any], kdocs: dict[str, Any],
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
            out.append(training_row(src, "begin", "original", "entailment", "entailment", src.knowledge, src.response,
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
        k, fell_back = near.unrelated(i, random.Random(f"{seed}|{src.id}|unrelated_response"), report)
        if k is None:
            report.skip("unrelated_response", "no response unrelated to this evidence in the data")
        else:
            why = "no topic" if not src.topic else "no response of the same topic unrelated to this evidence"
            if fell_back:
                report.fallback("unrelated_response", f"{why}: a response of another topic")
            out.append(training_row(src, "begin", "unrelated_response", "off-topic", "neutral", src.knowledge,
                                    rows[k].response, f"the response of row {rows[k].id}"
                                    + (f" (fallback, {why}: its evidence shares no content word)" if fell_back
                                       else ", of the same topic")))
        if generator is None:
            out.append(training_row(src, "begin", "generic_response", "generic", "neutral", src.knowledge,
                                    _generic(random.Random(f"{seed}|{src.id}|generic_response"), style),
                                    "a generic response"))
        row = _contradiction(src, rdoc, near.kwords[i], antonyms, seed, report, nlp)
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
        out.append(training_row(rows[i], "begin", "generated", "hallucination", "neutral", rows[i].knowledge,
                                _in_style(text.strip(), style),
                                f"generated from the evidence perturbed: {edit.change}"))
    generic = generator.generate([(r.previous or "", "") for r in rows], temperature=0.4)
    for src, text in zip(rows, generic):
        if not text.strip():
            report.skip("generic_response", "the generator wrote an empty response")
            continue
        out.append(training_row(src, "begin", "generic_response", "generic", "neutral", src.knowledge,
                                _in_style(text.strip(), style),
                                "generated from the previous turn alone, temperature 0.4"))
    return out


def off_topic_draws(made: Sequence[TrainingRow]) -> dict[str, int]:
    """How the written off-topic rows were drawn: ``same_topic`` (BEGIN's way) and ``other_topic`` (the fallback)."""
    off = [r for r in made if r.method == "unrelated_response"]
    other = sum("fallback" in r.change for r in off)
    return {"written": len(off), "same_topic": len(off) - other, "other_topic": other}


