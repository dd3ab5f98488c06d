"""Concurrent calls gathered into batches: :class:`MicroBatcher`, shared by the front ends whose frameworks score
one sample per call, concurrently (Inspect's scorers, DeepEval's ``a_measure``, Ragas's ``single_turn_ascore``),
so that the calls that arrive together become one :meth:`Q2Scorer.score` call. Needs only ``anyio`` (which every
one of those frameworks installs), no framework."""

from __future__ import annotations

import threading
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
    deadline: float = 0.0  # anyio.current_time() at which the batch stops waiting for more calls
    leader: Optional[int] = None  # the position of the call that runs the batch; None: the next call to wake takes it
    full: Any = None  # anyio.Event: set when the batch reaches max_batch
    done: bool = False  # its results (or error) are in
    wake: Any = None  # anyio.Event: set when the batch is done or its leader is cancelled before it ran
    results: Optional[list[Out]] = None
    error: Optional[BaseException] = None


class MicroBatcher(Generic[Item, Out]):
    """Gathers concurrent :meth:`submit` calls into batches for ``run_batch`` (a blocking function from a list of
    items to a list of results, one per item, in order), run in a worker thread, one batch at a time.

    The first call of a batch leads it: it waits out the window, then runs the batch. A leader cancelled before the
    batch ran hands it to another waiting call, which runs it once the window is over; the batch's other calls get
    their results either way."""

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
        self._loop: Any = None
        # one batch at a time in the threads too, whichever event loop submitted it (a scorer may serve several)
        self._thread_lock = threading.Lock()

    def _on_this_loop(self) -> None:
        """One lock and one open batch per event loop (a scorer may outlive the loop of one eval). Tokens are
        compared by equality: anyio gives a new, equal token on each call."""
        token = anyio.lowlevel.current_token()
        if self._lock is None or self._loop != token:
            self._lock, self._loop, self._open = anyio.Lock(), token, None

    def _join(self, item: Item) -> tuple[_Batch[Item, Out], int]:
        """The open batch (a new one if none is open) with ``item`` added, and its position there."""
        self._on_this_loop()
        batch = self._open
        if batch is None:
            batch = self._open = _Batch(deadline=anyio.current_time() + self.window, full=anyio.Event(),
                                        wake=anyio.Event())
        position = len(batch.items)
        batch.items.append(item)
        if len(batch.items) >= self.max_batch:
            self._open = None
            batch.full.set()
        return batch, position

    async def submit(self, item: Item) -> Out:
        """The result of ``item``, scored in a batch with the calls that arrive with it."""
        batch, position = self._join(item)
        try:
            while not batch.done:
                if batch.leader is None:
                    batch.leader = position
                if batch.leader == position:
                    await self._lead(batch)
                else:
                    await batch.wake.wait()
        except BaseException:
            if batch.leader == position and not batch.done:  # cancelled before the batch ran: hand it over
                batch.leader = None
                wake, batch.wake = batch.wake, anyio.Event()
                wake.set()
            raise
        if batch.error is not None:
            raise batch.error
        assert batch.results is not None
        return batch.results[position]

    async def _lead(self, batch: _Batch[Item, Out]) -> None:
        """Wait out the rest of the batch's window (or until it is full), close it, and run it."""
        wait = batch.deadline - anyio.current_time()
        if wait > 0 and not batch.full.is_set():
            with anyio.move_on_after(wait):
                await batch.full.wait()
        if self._open is batch:
            self._open = None
        async with self._lock:
            await self._run(batch)

    def _run_locked(self, items: list[Item]) -> Sequence[Out]:
        with self._thread_lock:
            return self.run_batch(items)

    async def _run(self, batch: _Batch[Item, Out]) -> None:
        """Run the batch in a worker thread (not abandoned when the leader is cancelled: its calls wait on it)."""
        try:
            results = await anyio.to_thread.run_sync(self._run_locked, list(batch.items))
            if len(results) != len(batch.items):
                raise RuntimeError(f"q2: a batch of {len(batch.items)} items gave {len(results)} results")
            batch.results = list(results)
            self.batches += 1
        except BaseException as e:  # every waiting call raises it, not just the leader
            batch.error = e
            if not isinstance(e, Exception):
                raise
        finally:
            batch.done = True
            batch.wake.set()
