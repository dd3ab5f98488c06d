"""Whether one input cell is text a training set can hold: the check shared by ``q2 perturb`` and ``q2 train``.

A cell is refused, with a reason naming what it holds, when it is not a string (``'response' is a number``, ``is a
list``, ``is missing``), when it holds nothing visible, or when it holds characters that are no text: NUL and the
other control characters (tab, newline and carriage return aside), format characters (zero-width spaces and joiners,
direction marks, the byte-order mark, the soft hyphen) and lone surrogates (which no UTF-8 file can hold). A text over
its size budget is refused before any work is spent on it. ``q2 perturb`` skips and counts such a row, and a record it
cannot read (:class:`Unreadable`); ``q2 train`` stops at it, naming the row.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Optional

from q2_plugins.metric.config import Q2Config

__all__ = ["text_problem", "default_budget", "Unreadable", "cells"]

_KINDS = {bool: "a boolean", int: "a number", float: "a number", list: "a list", tuple: "a list", dict: "an object"}
# control characters but tab, newline and carriage return; format characters (Cf); surrogates (Cs)
_NOT_TEXT = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u180e"
                       r"\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\ud800-\udfff]")


@dataclass(frozen=True)
class Unreadable:
    """The cells of a record the reader could not read (``why``: the reader's words, naming the line): the row is
    skipped and counted like a row whose cells are no text."""

    why: str


def cells(row: dict[str, Any], *columns: Optional[str]) -> list[Any]:
    """The values of ``columns`` in a row read by :func:`q2_plugins.io.inputs.read_checked_rows` with ``keep_bad_rows``:
    :class:`Unreadable` for each of an unreadable record, None for a missing field or column."""
    if "__error__" in row:
        return [Unreadable(str(row["__error__"])) if c else None for c in columns]
    return [row.get(c) if c else None for c in columns]


def _kind(value: Any) -> str:
    return next((name for t, name in _KINDS.items() if type(value) is t), f"not text ({type(value).__name__})")


def _name(c: str) -> str:
    if c == "\x00":
        return "a NUL character"
    if "\ud800" <= c <= "\udfff":
        return f"a lone surrogate U+{ord(c):04X}"
    if unicodedata.category(c) == "Cc":
        return f"a control character U+{ord(c):04X}"
    return f"an invisible format character U+{ord(c):04X} ({unicodedata.name(c, 'unnamed').lower()})"


def text_problem(value: Any, what: str, budget: int = 0, *, required: bool = True,
                 detail: bool = True, setting: str = "") -> Optional[str]:
    """Why ``value`` is no usable text for the field ``what`` (``"'response' is a number"``, ``"'knowledge' holds a
    NUL character at character 4"``), or None when it is. ``budget`` (characters, 0 = none) is checked first, on the
    length alone, so an enormous cell costs nothing more (``setting`` names the budget's setting);
    ``required=False`` lets a missing (None) or empty value pass (a previous turn); ``detail=False`` leaves out where
    and how long (a reason to count rows by)."""
    if isinstance(value, Unreadable):
        return "the record cannot be read" + (f" ({value.why})" if detail else "")
    if value is None:
        return None if not required else f"{what!r} is missing"
    if not isinstance(value, str):
        return f"{what!r} is {_kind(value)}"
    if budget and len(value) > budget:
        limit = f"{setting}={budget}" if setting else f"of {budget} characters"
        return f"{what!r} is over its budget {limit}" + (f" ({len(value)} characters)" if detail else "")
    bad = _NOT_TEXT.search(value)
    if bad is not None:
        return f"{what!r} holds {_name(bad.group())}" + (f" at character {bad.start()}" if detail else "")
    if required and not value.strip():
        return f"{what!r} is empty"
    return None


def default_budget(name: str) -> int:
    """The default of ``q2 score``'s per-row budget ``name`` (``max_response_chars``, ``max_knowledge_chars``)."""
    from dataclasses import fields

    return next(f.default for f in fields(Q2Config) if f.name == name)  # type: ignore[return-value]
