"""The text rules of the paper's pronoun step (appendix A), shared by every coreference backend: a response's
third-person pronouns are replaced by the most informative mention of their cluster, found over the dialogue history
and the response. A backend finds the clusters (character spans); :func:`rewrite` applies them."""

from __future__ import annotations

import re
from typing import Optional, Sequence

from q2_plugins.metric.components import Replacement, Resolution

__all__ = ["PRONOUNS", "WORD", "join_dialogue", "rewrite"]

#: third-person pronouns that get replaced (speakers' own I/you/we are left alone), and the possessive ones,
#: which become "<mention>'s"
PRONOUNS = frozenset({"he", "him", "she", "her", "it", "they", "them", "his", "hers", "its", "their", "theirs"})
_POSSESSIVE = frozenset({"his", "hers", "its", "their", "theirs"})
_NOT_INFORMATIVE = PRONOUNS | {"i", "me", "my", "mine", "you", "your", "yours", "we", "us", "our", "ours",
                               "this", "that", "these", "those", "himself", "herself", "itself", "themselves"}
WORD = re.compile(r"\w+|[^\w\s]")

def join_dialogue(history: str, response: str) -> tuple[str, int]:
    """The text coreference reads (history, a newline, response) and where the response starts in it."""
    if not history.strip():
        return response, 0
    text = history.rstrip() + "\n"
    return text + response, len(text)


def _informative(mentions: list[str]) -> Optional[str]:
    """The cluster's most informative mention: the one with the most words that is not a pronoun (the earliest of
    equals); None when every mention is a pronoun."""
    best: Optional[str] = None
    for m in mentions:
        words = WORD.findall(m)
        if not words or (len(words) == 1 and words[0].lower() in _NOT_INFORMATIVE):
            continue
        if best is None or len(words) > len(WORD.findall(best)):
            best = m
    return best


def rewrite(history: str, response: str, clusters: Sequence[Sequence[tuple[int, int]]]) -> Resolution:
    """Replace each pronoun of ``response`` that a cluster holds by the cluster's most informative mention.

    ``clusters``: character spans over ``join_dialogue(history, response)[0]``, in any order.
    """
    text, offset = join_dialogue(history, response)
    found: dict[tuple[int, int], str] = {}
    for cluster in clusters:
        spans = sorted({(int(s), int(e)) for s, e in cluster})
        mention = _informative([text[s:e] for s, e in spans])
        if mention is None:
            continue
        for s, e in spans:
            word = text[s:e]
            if s >= offset and word.lower() in PRONOUNS and " ".join(mention.split()).lower() != word.lower():
                found[(s - offset, e - offset)] = " ".join(mention.split())
    out, last, done = [], 0, []
    for (s, e), mention in sorted(found.items()):
        if s < last:  # overlapping spans: the first wins
            continue
        pronoun = response[s:e]
        new = mention + "'s" if pronoun.lower() in _POSSESSIVE else mention
        out += [response[last:s], new]
        last = e
        done.append(Replacement(s, e, pronoun, new))
    return Resolution("".join(out) + response[last:], tuple(done))
