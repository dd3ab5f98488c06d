"""Questions of the length a random-weight QG generates: every generated id one of its tokenizer's pieces.

The paper-size QG has T5-base's 32,128 embedding rows (so each decoder step costs what T5-base's does) and a
tokenizer trained on the WoW / BEGIN text with far fewer pieces. Left alone, its random weights choose rows the
tokenizer lacks, which decode to nothing: questions of a word or two, or empty ones dropped as duplicates, and the
filter's QA work on the beams it would try is never done. :func:`in_range_questions` makes a transformers model score
those rows ``-inf`` at its output layer (after the full 32,128-row product: the same cost), so its beams are exactly
those of the same model cut to its tokenizer's rows; a backend without a reachable output layer (ct2) gets its ids
past the tokenizer decoded as ordinary pieces instead (:class:`InRangeQuestions`)."""

from __future__ import annotations

import re
from typing import Any

_UNUSED = re.compile(r"<q2_unused_(\d+)>")  # the ct2 backend's names of rows its tokenizer lacks


class InRangeQuestions:
    """A QG tokenizer that decodes an id past its own pieces as one of its ordinary pieces (``id`` modulo their
    number), so a random-weight model with more embedding rows than its tokenizer has pieces (T5-base's 32,128
    here) makes questions of the length it generated instead of words that decode to nothing. Everything else
    (encoding, lengths, padding) is the tokenizer's own."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        special = set(tokenizer.all_special_ids)
        self._ordinary = [i for i in range(len(tokenizer)) if i not in special]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._tokenizer(*args, **kwargs)

    def __len__(self) -> int:
        return len(self._tokenizer)

    def in_range(self, i: int) -> int:
        return i if i < len(self._tokenizer) else self._ordinary[(i - len(self._tokenizer)) % len(self._ordinary)]

    def convert_tokens_to_ids(self, tokens: Any) -> Any:
        if isinstance(tokens, str):
            return self.convert_tokens_to_ids([tokens])[0]
        ids = self._tokenizer.convert_tokens_to_ids(list(tokens))
        return [int(m.group(1)) if (m := _UNUSED.fullmatch(t)) else i for t, i in zip(tokens, ids)]

    def batch_decode(self, rows: Any, **kwargs: Any) -> list[str]:
        rows = [row.tolist() if hasattr(row, "tolist") else list(row) for row in rows]
        return self._tokenizer.batch_decode([[self.in_range(int(i)) for i in row] for row in rows], **kwargs)


def tokenizer_rows_only(model: Any, rows: int) -> Any:
    """Score the output rows ``rows`` and past ``-inf`` on every forward of ``model``'s output layer (a hook; the
    product itself still covers every row). Returns the hook's handle."""

    def hook(module: Any, args: Any, output: Any) -> Any:
        output[..., rows:] = float("-inf")
        return output

    return model.get_output_embeddings().register_forward_hook(hook)


def in_range_questions(qg: Any) -> Any:
    """``qg`` (any backend's question generator) making questions of in-range pieces only: a transformers model's
    output layer limited to its tokenizer's rows (:func:`tokenizer_rows_only`), and every id decoded in range
    (:class:`InRangeQuestions`, for backends whose model this cannot reach)."""
    if isinstance(qg.tokenizer, InRangeQuestions):
        return qg
    model = getattr(getattr(qg, "runner", None), "model", None)
    rows = len(qg.tokenizer)
    if model is not None and model.get_output_embeddings() is not None and model.config.vocab_size > rows:
        tokenizer_rows_only(model, rows)
    qg.tokenizer = InRangeQuestions(qg.tokenizer)
    return qg
