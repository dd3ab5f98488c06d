"""How a list of inputs is cut into batches: by length, against padding, within a count and a token cap."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

__all__ = ["Batching", "length_batches", "packed_batches", "merge_consecutive", "bucket_length", "input_limit",
           "BATCH_OVERHEAD_TOKENS", "PACKED_BATCH_TOKENS"]

# A forward pass costs about as much as this many more input tokens would: small matrix products run far below the
# machine's speed, and every pass has fixed work. Batching trades this against padding (see length_batches).
BATCH_OVERHEAD_TOKENS = 64

# Real tokens per pass when windows are packed (no padding): enough rows for the matrix products to run near the
# machine's speed, few enough that a layer's activations stay in cache (measured: docs/performance.md).
PACKED_BATCH_TOKENS = 512


@dataclass(frozen=True)
class Batching:
    """A component's batching settings for one call: at most ``size`` inputs and (padded) ``max_tokens`` tokens
    per batch; ``sort`` off runs the inputs in their own order (the per-item reference mode)."""

    size: int
    sort: bool = True
    max_tokens: Optional[int] = None


def bucket_length(n: int, limit: Optional[int] = None) -> int:
    """``n`` tokens rounded up to its length bucket: a multiple of 8 below 128 tokens, then of an eighth of the power
    of two below ``n`` (16 from 128, 32 from 256, ...). A padded batch then has one of few lengths (8 an octave;
    from 64 tokens on, at most 12.5% more padding); a GPU pays for the first sight of each shape. Never over the
    power of two at or above ``n``, nor over ``limit`` (the model's longest input), nor under ``n``."""
    step = max(8, 1 << max(0, n.bit_length() - 4))
    rounded = -(-n // step) * step
    return max(n, min(rounded, limit)) if limit else rounded


def input_limit(tokenizer: Any) -> Optional[int]:
    """The longest input a tokenizer's model takes (``model_max_length``), or None where it states none (the library
    then gives a huge placeholder): the cap of :func:`bucket_length`."""
    limit = getattr(tokenizer, "model_max_length", None)
    return limit if isinstance(limit, int) and 0 < limit < 1_000_000 else None


def length_batches(lengths: Sequence[int], batch_size: int, sort: bool, max_tokens: Optional[int] = None,
                   overhead: int = BATCH_OVERHEAD_TOKENS) -> list[list[int]]:
    """Index batches of at most ``batch_size`` inputs and, with ``max_tokens``, at most that many padded tokens
    (inputs x longest input; an input longer than the cap goes alone).

    The inputs, sorted by length (or in input order with ``sort`` off, as the per-item reference mode runs them), are
    cut into the consecutive batches that minimise the padded tokens computed plus ``overhead`` per batch: a few very
    long inputs no longer pad a batch of short ones, and similar lengths still fill whole batches.
    """
    n = len(lengths)
    order = sorted(range(n), key=lambda i: lengths[i]) if sort else list(range(n))
    best = [0] * (n + 1)  # best[j]: least cost of batching the first j inputs of ``order``
    start = [0] * (n + 1)  # where the last batch of that best split starts
    for j in range(1, n + 1):
        longest = 0
        best[j] = -1
        for size in range(1, min(batch_size, j) + 1):
            longest = max(longest, lengths[order[j - size]])
            if size > 1 and max_tokens is not None and size * longest > max_tokens:
                break  # size x longest only grows with size
            cost = best[j - size] + size * longest + overhead
            if best[j] < 0 or cost <= best[j]:  # ties: the larger batch
                best[j], start[j] = cost, j - size
    batches: list[list[int]] = []
    j = n
    while j > 0:
        batches.append(order[start[j] : j])
        j = start[j]
    return batches[::-1]


def packed_batches(lengths: Sequence[int], batch_size: int, sort: bool, max_tokens: int) -> list[list[int]]:
    """Consecutive runs of the inputs (sorted by length, or in input order without ``sort``) of at most
    ``batch_size`` inputs and ``max_tokens`` real tokens (an input longer than that goes alone)."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i]) if sort else list(range(len(lengths)))
    batches: list[list[int]] = []
    total = 0
    for i in order:
        if batches and len(batches[-1]) < batch_size and total + lengths[i] <= max_tokens:
            batches[-1].append(i)
            total += lengths[i]
        else:
            batches.append([i])
            total = lengths[i]
    return batches


def merge_consecutive(groups: list[list[int]], most: int) -> list[list[list[int]]]:
    """Consecutive groups joined while their total size stays within ``most``."""
    runs = packed_batches([len(g) for g in groups], len(groups), False, most)
    return [[groups[j] for j in run] for run in runs]
