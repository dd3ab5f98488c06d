"""Per-row budgets: the sizes a row may have, checked before the work they bound.

Response and knowledge lengths are measured when the rows are read, before any spaCy or model work; the candidate
count after candidate extraction, before question generation; the valid-question count as the filters find them,
before the knowledge is read for more. A row over a budget gets its own error naming the budget, its size and the
flag that raises it; with ``over_budget="truncate"`` it is scored on what fits instead, with a warning in its result.
``0`` means no limit. See ``docs/failures.md``.
"""

from __future__ import annotations

from typing import Any, Sequence

from q2_plugins.metric.config import Q2Config

__all__ = ["check_lengths", "check_candidates", "admit_question", "truncate_text"]


def _over(what: str, size: int, unit: str, setting: str, limit: int) -> str:
    """The error of a row over a budget: its size, the budget and how to raise it."""
    return (f"{what} is {size} {unit}, over the budget {setting}={limit} (raise {setting}; 0 = no limit; "
            f"or set over_budget to truncate)")


def _truncated(what: str, kept: int, size: int, unit: str, setting: str, limit: int) -> str:
    """The warning of a row scored on a truncation."""
    return (f"{what} truncated to its first {kept} of {size} {unit} ({setting}={limit}; {setting} 0 = no limit)")


def truncate_text(text: str, limit: int) -> str:
    """The first ``limit`` characters of ``text``, cut after the last whitespace among them when there is one (so
    no word is cut in two), trailing whitespace removed."""
    if len(text) <= limit:
        return text
    head = text[:limit]
    if not text[limit].isspace():
        cut = max(head.rfind(c) for c in (" ", "\n", "\t"))
        if cut > 0:
            head = head[:cut]
    return head.rstrip() or text[:limit]


def check_lengths(c: Q2Config, rows: Sequence[Any]) -> None:
    """Response and knowledge lengths of the rows without an error (stage 0, before any spaCy or model work)."""
    for r in rows:
        if r.error is not None:
            continue
        for what, setting in (("response", "max_response_chars"), ("knowledge", "max_knowledge_chars")):
            limit, text = getattr(c, setting), getattr(r, what)
            if not limit or len(text) <= limit:
                continue
            if c.over_budget == "error":
                r.error = _over(what, len(text), "characters", setting, limit)
                break
            cut = truncate_text(text, limit)
            setattr(r, what, cut)
            r.warnings.append(_truncated(what, len(cut), len(text), "characters", setting, limit))


def check_candidates(c: Q2Config, rows: Sequence[Any]) -> None:
    """The candidate count of each row (after candidate extraction, before question generation)."""
    limit = c.max_candidates
    for r in rows:
        if not limit or r.error is not None or len(r.candidates) <= limit:
            continue
        if c.over_budget == "error":
            r.error = _over("response", len(r.candidates), "answer candidates", "max_candidates", limit)
        else:
            r.warnings.append(_truncated("candidates", limit, len(r.candidates), "answer candidates",
                                         "max_candidates", limit))
            r.candidates = r.candidates[:limit]


def admit_question(c: Q2Config, row: Any, count: int) -> bool:
    """Whether ``row``, which has ``count`` valid questions so far, may take one more; when not, the row gets its
    error (or, truncating, its warning and no further questions: ``row.full``)."""
    limit = c.max_questions
    if not limit or count < limit:
        return True
    if c.over_budget == "error":
        row.error = (f"response has over {limit} valid questions, over the budget max_questions={limit} (raise "
                     f"max_questions; 0 = no limit; or set over_budget to truncate)")
    elif not row.full:
        row.full = True
        row.warnings.append(f"valid questions truncated to the first {limit} found (max_questions={limit}; "
                            f"max_questions 0 = no limit)")
    return False

