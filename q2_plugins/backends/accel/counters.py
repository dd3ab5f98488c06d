"""Counters of what a component's model computed, and a clock of the time inside its forward passes.

Every runner keeps a :class:`RunStats` (a few additions per batch); :func:`q2_plugins.backends.accel.instrument` adds
the :class:`ForwardClock` hooks, for benchmarks.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any, Callable, ContextManager, Iterator, Optional, Sequence, TypeVar

__all__ = ["RunStats", "ForwardClock"]

T = TypeVar("T")


class RunStats:
    """What a component ran since the last :meth:`reset`: time in calls and in forwards, real and padded input
    tokens, batches. ``forward_seconds`` stays 0 unless the component is instrumented."""

    def __init__(self) -> None:
        self.timer: Callable[[], ContextManager[Any]] = contextlib.nullcontext  # counts forward time when clocked
        self.clock: Optional["ForwardClock"] = None  # set by q2_plugins.backends.accel.instrument
        self.reset()

    def reset(self) -> None:
        self.call_seconds = 0.0  # inside model(...) / generate calls
        self.forward_seconds = 0.0  # inside the model's forward passes (instrumented components only)
        self.tokens = 0  # input tokens fed to the model
        self.padded_tokens = 0  # input positions computed, padding included
        self.batches = 0  # forward passes / generate calls

    def count(self, tokens: int, padded_tokens: int) -> None:
        """One batch of ``tokens`` real tokens computed as ``padded_tokens`` positions."""
        self.tokens += tokens
        self.padded_tokens += padded_tokens
        self.batches += 1

    def padded(self, tokenizer: Any, features: Sequence[dict[str, Any]], device: Any,
               length: Optional[int] = None) -> dict[str, Any]:
        """One padded batch of ``features`` (with attention masks) on ``device``, counted; padded to ``length``
        tokens where given (a length bucket), else to its longest input."""
        if length is None:
            batch = tokenizer.pad(list(features), padding=True, return_tensors="pt")
        else:
            batch = tokenizer.pad(list(features), padding="max_length", max_length=length, return_tensors="pt")
        self.count(sum(len(f["input_ids"]) for f in features), int(batch["input_ids"].numel()))
        return {k: v.to(device) for k, v in batch.items()}

    def timed(self, fn: Callable[..., T], *args: Any, forward: bool = False, **kwargs: Any) -> T:
        """``fn(*args, **kwargs)`` with its time counted as call time (and, with ``forward``, as forward time: for
        model computations made outside ``model.forward``)."""
        t0 = time.perf_counter()
        try:
            with self.timer() if forward else contextlib.nullcontext():
                return fn(*args, **kwargs)
        finally:
            self.call_seconds += time.perf_counter() - t0


class ForwardClock:
    """Wall time inside a model's own ``forward`` calls (and its encoder's, which ``generate`` calls directly),
    added to ``stats.forward_seconds``.

    Hooks count only the outermost call, so nested modules are not counted twice. What ``generate`` does between
    decoder steps (beam bookkeeping, logits processors, cache reordering) is outside the clock.
    """

    def __init__(self, model: Any, stats: RunStats) -> None:
        self.stats = stats
        self._depth = 0
        self._t0 = 0.0
        modules = [model]
        encoder = getattr(model, "get_encoder", None)
        if callable(encoder) and getattr(model.config, "is_encoder_decoder", False):
            modules.append(encoder())
        for module in modules:
            module.register_forward_pre_hook(self._enter)
            module.register_forward_hook(self._exit)
        stats.timer = self.timing

    @contextlib.contextmanager
    def timing(self) -> Iterator[None]:
        """Count the time inside this block as forward time (for model computations made outside ``forward``)."""
        self._enter()
        try:
            yield
        finally:
            self._exit()

    def _enter(self, *_: Any) -> None:
        if self._depth == 0:
            self._t0 = time.perf_counter()
        self._depth += 1

    def _exit(self, *_: Any) -> None:
        self._depth -= 1
        if self._depth == 0:
            self.stats.forward_seconds += time.perf_counter() - self._t0
