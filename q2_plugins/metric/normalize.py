"""Answer normalisation and token F1.

Two normalisations are available:

* ``q2-original`` (default): the original Q² code's ``clean_text``. It differs from SQuAD's: it lower-cases, strips
  ASCII punctuation and removes the words ``a``, ``an``, ``the`` **and** ``in``, ``our``. Derived from, and tested
  against, the recorded per-question F1 values of the original run (all 1,300 reproduce bit for bit).
* ``squad``: the SQuAD v1.1 evaluation script's ``normalize_answer`` (articles a/an/the only).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from typing import Callable, Sequence

__all__ = ["NORMALIZATIONS", "normalize", "token_f1", "tokens_f1", "answers_match"]

_PUNCT_TABLE = str.maketrans("", "", string.punctuation)
_PUNCT_SET = frozenset(string.punctuation)
_Q2_STOPWORDS = re.compile(r"\b(a|an|the|in|our)\b")
_SQUAD_ARTICLES = re.compile(r"\b(a|an|the)\b")
_MULTISPACE = re.compile(" +")


def _q2_original(text: str) -> str:
    text = text.lower().translate(_PUNCT_TABLE)
    text = _Q2_STOPWORDS.sub(" ", text)
    return _MULTISPACE.sub(" ", text).strip()


def _squad(text: str) -> str:
    text = "".join(ch for ch in text.lower() if ch not in _PUNCT_SET)
    text = _SQUAD_ARTICLES.sub(" ", text)
    return " ".join(text.split())


NORMALIZATIONS: dict[str, Callable[[str], str]] = {"q2-original": _q2_original, "squad": _squad}


def _get(name: str) -> Callable[[str], str]:
    try:
        return NORMALIZATIONS[name]
    except KeyError:
        raise ValueError(f"Unknown normalization {name!r}; expected one of {sorted(NORMALIZATIONS)}") from None


def normalize(text: str, normalization: str = "q2-original") -> str:
    """Normalise an answer string."""
    return _get(normalization)(text)


def answers_match(a: str, b: str, normalization: str = "q2-original") -> bool:
    """Normalised exact match (the filter on the response's own answer)."""
    norm = _get(normalization)
    return norm(a) == norm(b)


def token_f1(reference: str, prediction: str, normalization: str = "q2-original") -> float:
    """Token-level F1 between two answers, computed exactly as the original Q² code does."""
    if prediction == "":
        return 0.0
    norm = _get(normalization)
    return tokens_f1(norm(reference).split(), norm(prediction).split())


def tokens_f1(ref_tokens: Sequence[str], pred_tokens: Sequence[str]) -> float:
    """F1 of two token lists by their multiset overlap, in the original's arithmetic (0 when nothing is shared)."""
    common = Counter(ref_tokens) & Counter(pred_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0.0
    precision = 1.0 * num_same / len(pred_tokens)
    recall = 1.0 * num_same / len(ref_tokens)
    return (2 * precision * recall) / (precision + recall)
