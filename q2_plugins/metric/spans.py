"""Where in a response its answer candidates are, and which of its spans the knowledge supports.

Every question Q² asks is generated for one answer candidate, a span of the response; its outcome says whether the
knowledge supports that span. This module carries the place:

- :class:`Mention`: a candidate's text that knows its characters in the text it was found in (the spaCy extractor
  gives these; any other extractor may give plain strings, which :func:`locate` finds in the response, in order).
- :func:`to_original`: with ``--coref`` candidates are found in the rewritten response; a candidate that holds a
  mention put in for a pronoun maps onto the pronoun's characters in the response as given.
- :func:`response_spans`: a response's ``spans`` explanation, from its question results.

The rule for ``spans``. Each question result with offsets is a span ``[start, end)`` of the response as given, with
the question's score and a label: ``unanswerable`` when the knowledge has no answer to the question, else
``supported`` when its score is above :data:`SUPPORTED_ABOVE` (0.5, the paper's consistency threshold) and
``unsupported`` otherwise. Spans that overlap (share a character; several questions on one candidate, or an entity
inside a noun chunk) merge into one covering all of them: its score is the lowest of their scores, its label
``supported`` when all of them are, else ``unanswerable`` when every one that is not supported is unanswerable, else
``unsupported``. Spans that only touch stay apart. The spans explain the response's score; they do not change it (the
questions Q²* leaves out are not in them, and a response scored by the fallback has none).
"""

from __future__ import annotations

import re
from typing import Any, Optional, Sequence

from q2_plugins.metric.results import Span

__all__ = ["Mention", "SUPPORTED", "UNSUPPORTED", "UNANSWERABLE", "SPAN_LABELS", "SUPPORTED_ABOVE", "locate",
           "candidate_offsets", "to_original", "question_label", "merge_spans", "question_spans", "response_spans",
           "mentions_to_json", "mentions_from_json"]

SUPPORTED, UNSUPPORTED, UNANSWERABLE = "supported", "unsupported", "unanswerable"
SPAN_LABELS = (SUPPORTED, UNSUPPORTED, UNANSWERABLE)
#: a question scoring above this supports its span (the paper's threshold between consistent and not)
SUPPORTED_ABOVE = 0.5


class Mention(str):
    """A candidate's text with its characters ``[start, end)`` in the text it was found in. It is the string it
    holds everywhere a candidate is used (equal, hashed and written as that string); only the offsets are more."""

    start: int
    end: int

    def __new__(cls, text: str, start: int, end: int) -> "Mention":
        self = super().__new__(cls, text)
        self.start, self.end = int(start), int(end)
        return self

    def __getnewargs__(self) -> tuple[str, int, int]:  # type: ignore[override]
        return str(self), self.start, self.end

    def __repr__(self) -> str:
        return f"Mention({str(self)!r}, {self.start}, {self.end})"


def mentions_to_json(candidates: Sequence[str]) -> dict[str, Any]:
    """A row's candidates as JSON: ``{"mentions": [[text, start, end], ...]}`` (start and end null for a plain
    string). (A dict, so a cached list of plain strings, written before offsets, is told apart and found again.)"""
    return {"mentions": [[str(c), c.start, c.end] if isinstance(c, Mention) else [str(c), None, None]
                         for c in candidates]}


def mentions_from_json(data: Any) -> Optional[list[str]]:
    """The candidates :func:`mentions_to_json` wrote; None for anything else (an older cache entry: a miss)."""
    if not isinstance(data, dict) or not isinstance(data.get("mentions"), list):
        return None
    return [str(t) if s is None else Mention(t, s, e) for t, s, e in data["mentions"]]


def _word_at(text: str, start: int, end: int) -> bool:
    """``text[start:end]`` does not begin or end inside a word."""
    return ((start == 0 or not (text[start - 1].isalnum() and text[start].isalnum()))
            and (end == len(text) or not (text[end - 1].isalnum() and text[end].isalnum())))


def _find_all(text: str, needle: str) -> list[tuple[int, int]]:
    out, i = [], text.find(needle)
    while i >= 0:
        out.append((i, i + len(needle)))
        i = text.find(needle, i + len(needle))
    return out


def _occurrences(text: str, needle: str) -> list[tuple[int, int]]:
    """Where ``needle`` occurs in ``text``: as it is, else ignoring case; whole-word matches when there are any."""
    if not needle:
        return []
    found = _find_all(text, needle)
    if not found:
        low, low_needle = text.lower(), needle.lower()
        if len(low) == len(text) and len(low_needle) == len(needle):  # (lower-casing kept every offset)
            found = _find_all(low, low_needle)
        else:
            found = [(m.start(), m.end()) for m in re.finditer(re.escape(needle), text, re.IGNORECASE)]
    whole = [o for o in found if _word_at(text, *o)]
    return whole or found


def locate(text: str, candidates: Sequence[str]) -> list[Optional[tuple[int, int]]]:
    """The characters of each candidate in ``text``, for candidates given without offsets. A candidate given
    several times takes its successive occurrences (its n-th time, its n-th occurrence; the last one again when
    there are fewer); None for a candidate not found."""
    seen: dict[str, int] = {}
    out: list[Optional[tuple[int, int]]] = []
    cache: dict[str, list[tuple[int, int]]] = {}
    for cand in candidates:
        occ = cache.setdefault(cand, _occurrences(text, cand))
        n = seen.get(cand, 0)
        seen[cand] = n + 1
        out.append(occ[min(n, len(occ) - 1)] if occ else None)
    return out


def to_original(start: int, end: int, replacements: Sequence[Any]) -> tuple[int, int]:
    """Characters ``[start, end)`` of a response rewritten by coreference (:class:`.components.Resolution`)
    in the response as given: an end inside an inserted mention goes to the end of the pronoun it replaced, a start
    inside one to that pronoun's start; other characters shift by what the insertions before them added."""
    new_start = new_end = None
    shift = 0  # rewritten position - original position, after the replacements passed
    for r in sorted(replacements, key=lambda r: r.start):
        lo = r.start + shift  # the inserted mention's characters in the rewritten text
        hi = lo + len(r.mention)
        if new_start is None and start < lo:
            new_start = start - shift
        if new_start is None and start < hi:
            new_start = r.start
        if new_end is None and end <= lo:
            new_end = end - shift
        if new_end is None and end <= hi:
            new_end = r.end
        shift += len(r.mention) - (r.end - r.start)
    return (start - shift if new_start is None else new_start), (end - shift if new_end is None else new_end)


def candidate_offsets(response: str, candidates: Sequence[str], replacements: Sequence[Any] = ()
                      ) -> list[Optional[tuple[int, int]]]:
    """The characters in the response as given of each candidate found in ``response`` (the text the candidates
    were extracted from: with ``--coref`` the rewritten one, whose ``replacements`` are mapped back): a
    :class:`Mention`'s own offsets, a plain string's located (:func:`locate`)."""
    located = locate(response, [c for c in candidates if not isinstance(c, Mention)])
    out: list[Optional[tuple[int, int]]] = []
    k = 0
    for c in candidates:
        if isinstance(c, Mention):
            where: Optional[tuple[int, int]] = (c.start, c.end)
        else:
            where, k = located[k], k + 1
        out.append(None if where is None else to_original(*where, replacements) if replacements else where)
    return out


def question_label(knowledge_answer_kind: str, score: float) -> str:
    """A question's span label: unanswerable (no answer in the knowledge), else supported above
    :data:`SUPPORTED_ABOVE`, else unsupported."""
    if knowledge_answer_kind == "no_answer":
        return UNANSWERABLE
    return SUPPORTED if score > SUPPORTED_ABOVE else UNSUPPORTED


def merge_spans(items: Sequence[tuple[int, int, float, str]]) -> list[tuple[int, int, float, str]]:
    """(start, end, score, label) of questions, merged by the module docstring's rule, in order of position."""
    groups: list[list[Any]] = []
    for s, e, score, label in sorted(items):
        if groups and s < groups[-1][1]:
            g = groups[-1]
            g[1], g[2] = max(g[1], e), min(g[2], score)
            g[3].append(label)
        else:
            groups.append([s, e, score, [label]])
    out = []
    for s, e, score, labels in groups:
        rest = [x for x in labels if x != SUPPORTED]
        label = SUPPORTED if not rest else UNANSWERABLE if all(x == UNANSWERABLE for x in rest) else UNSUPPORTED
        out.append((s, e, score, label))
    return out


def question_spans(questions: Sequence[Any], score: str = "score") -> list[tuple[int, int, float, str]]:
    """(start, end, score, label) of each question result with offsets (objects or dicts); ``score`` names the
    field scored by (``f1``: as Q² w/o NLI)."""

    def get(q: Any, name: str) -> Any:
        return q.get(name) if isinstance(q, dict) else getattr(q, name, None)

    return [(get(q, "start"), get(q, "end"), float(get(q, score)),
             question_label(get(q, "knowledge_answer_kind"), float(get(q, score))))
            for q in questions if get(q, "start") is not None and get(q, "end") is not None]


def response_spans(response: str, questions: Sequence[Any]) -> list[Any]:
    """The ``spans`` of a response (the module docstring's rule) from its question results (objects or dicts with
    ``start``, ``end``, ``score``, ``knowledge_answer_kind``); questions without offsets are left out."""

    return [Span(s, e, response[s:e], score, label) for s, e, score, label in merge_spans(question_spans(questions))]
