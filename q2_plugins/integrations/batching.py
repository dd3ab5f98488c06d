"""Concurrent calls gathered into batches: :class:`MicroBatcher`, shared by the front ends whose frameworks score
one sample per call, concurrently (Inspect's scorers, DeepEval's ``a_measure``, Ragas's ``single_turn_ascore``),
so that the calls that arrive together become one :meth:`Q2Scorer.score` call. Needs only ``anyio`` (which every
one of those frameworks installs), no framework."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Optional, Sequence, TypeVar

try:
    import anyio
except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError("q2_plugins.integrations.batching needs anyio: pip install anyio (Inspect, DeepEval, "
                              "Ragas and DSPy install it)") from e

__all__ = ["MicroBatcher", "DEFAULT_WINDOW", "DEFAULT_MAX_BATCH"]

#: seconds the first call of a batch waits for others
DEFAULT_WINDOW = 0.05
#: calls that make a batch full (scored at once, without waiting out the window)
DEFAULT_MAX_BATCH = 64

Item = TypeVar("Item")
Out = TypeVar("Out")


@dataclass
class _Batch(Generic[Item, Out]):
    items: list[Item] = field(default_factory=list)
    full: Any = None  # anyio.Event: set when the batch reaches max_batch
    done: Any = None  # anyio.Event: set when its results (or error) are in
    results: Optional[list[Out]] = None
    error: Optional[BaseException] = None


class MicroBatcher(Generic[Item, Out]):
    """Gathers concurrent :meth:`submit` calls into batches for ``run_batch`` (a blocking function from a list of
    items to a list of results, one per item, in order), run in a worker thread, one batch at a time."""

    def __init__(self, run_batch: Callable[[list[Item]], Sequence[Out]], *, max_batch: int = DEFAULT_MAX_BATCH,
                 window: float = DEFAULT_WINDOW) -> None:
        if max_batch < 1:
            raise ValueError(f"Expected max_batch of at least 1, but got {max_batch}")
        if window < 0:
            raise ValueError(f"Expected a window of 0 seconds or more, but got {window}")
        self.run_batch = run_batch
        self.max_batch = max_batch
        self.window = window
        self.batches = 0  # batches run so far (one run_batch call each)
        self._open: Optional[_Batch[Item, Out]] = None
        self._lock: Any = None
        self._lock_token: Any = None

    def _running_lock(self) -> Any:
        """One lock per event loop (a scorer may outlive the loop of one eval)."""
        token = anyio.lowlevel.current_token()
        if self._lock is None or self._lock_token is not token:
            self._lock, self._lock_token = anyio.Lock(), token
        return self._lock

    async def submit(self, item: Item) -> Out:
        """The result of ``item``, scored in a batch with the calls that arrive with it."""
        batch = self._open
        leader = batch is None
        if batch is None:
            batch = self._open = _Batch(full=anyio.Event(), done=anyio.Event())
        position = len(batch.items)
        batch.items.append(item)
        if len(batch.items) >= self.max_batch:
            self._open = None
            batch.full.set()
        if leader:
            with anyio.move_on_after(self.window):
                await batch.full.wait()
            if self._open is batch:
                self._open = None
            async with self._running_lock():
                await self._run(batch)
        else:
            await batch.done.wait()
        if batch.error is not None:
            raise batch.error
        assert batch.results is not None
        return batch.results[position]

    async def _run(self, batch: _Batch[Item, Out]) -> None:
        try:
            results = await anyio.to_thread.run_sync(self.run_batch, list(batch.items))
            if len(results) != len(batch.items):
                raise RuntimeError(f"q2: a batch of {len(batch.items)} items gave {len(results)} results")
            batch.results = list(results)
            self.batches += 1
        except BaseException as e:  # every waiting call raises it, not just the leader
            batch.error = e
            raise
        finally:
            batch.done.set()
