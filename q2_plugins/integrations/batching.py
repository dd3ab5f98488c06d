"""Concurrent calls gathered into batches, so that the calls that arrive together become one :meth:`Q2Scorer.score`
call: :class:`MicroBatcher` for coroutines (Inspect's scorers, DeepEval's ``a_measure``, Ragas's
``single_turn_ascore``), :class:`ThreadBatcher` for threads (DSPy's ``Evaluate`` and ``Module.batch``). Needs only
``anyio`` (which every one of those frameworks installs), no framework."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Generic, Optional, Sequence, TypeVar

try:
    import anyio
except ModuleNotFoundError as e:  # pragma: no cover - depends on the environment
    raise ModuleNotFoundError("q2_plugins.integrations.batching needs anyio: pip install anyio (Inspect, DeepEval, "
                              "Ragas and DSPy install it)") from e

__all__ = ["MicroBatcher", "ThreadBatcher", "DEFAULT_WINDOW", "DEFAULT_MAX_BATCH"]

#: seconds the first call of a batch waits for another call to join it
DEFAULT_WINDOW = 0.05
#: calls that make a batch full (scored at once, without waiting out the window)
DEFAULT_MAX_BATCH = 64

Item = TypeVar("Item")
Out = TypeVar("Out")


@dataclass
class _Batch(Generic[Item, Out]):
    items: list[Item] = field(default_factory=list)
    last: float = 0.0  # anyio.current_time() at which the latest call joined
    leader: Optional[int] = None  # the position of the call that runs the batch; None: the next call to wake takes it
    full: Any = None  # anyio.Event: set when the batch reaches max_batch
    done: bool = False  # its results (or error) are in
    wake: Any = None  # anyio.Event: set when the batch is done or its leader is cancelled before it ran
    results: Optional[list[Out]] = None
    error: Optional[BaseException] = None


class _Batching(Generic[Item, Out]):
    """What both batchers share: the settings, the count of batches run, and the lock that runs one batch at a
    time (``lock``: share one with another batcher of the same scorer)."""

    def __init__(self, run_batch: Callable[[list[Item]], Sequence[Out]], *, max_batch: int = DEFAULT_MAX_BATCH,
                 window: float = DEFAULT_WINDOW, lock: Optional[Any] = None) -> None:
        if max_batch < 1:
            raise ValueError(f"Expected max_batch of at least 1, but got {max_batch}")
        if window < 0:
            raise ValueError(f"Expected a window of 0 seconds or more, but got {window}")
        self.run_batch = run_batch
        self.max_batch = max_batch
        self.window = window
        self.batches = 0  # batches run so far (one run_batch call each)
        self.lock = threading.Lock() if lock is None else lock

    def _checked(self, items: list[Item]) -> list[Out]:
        """``run_batch(items)``, with one result per item (the caller holds :attr:`lock`)."""
        results = list(self.run_batch(items))
        if len(results) != len(items):
            raise RuntimeError(f"q2: a batch of {len(items)} items gave {len(results)} results")
        self.batches += 1
        return results


class MicroBatcher(_Batching[Item, Out]):
    """Gathers concurrent :meth:`submit` calls into batches for ``run_batch`` (a blocking function from a list of
    items to a list of results, one per item, in order), run in a worker thread, one batch at a time.

    The first call of a batch leads it: it waits until ``window`` seconds pass without another call joining (or the
    batch is full), then until the batch before it is done, and runs the batch; calls keep joining until then. A
    leader cancelled before the batch ran hands it to another waiting call, which runs it in its stead; the batch's
    other calls get their results either way."""

    def __init__(self, run_batch: Callable[[list[Item]], Sequence[Out]], *, max_batch: int = DEFAULT_MAX_BATCH,
                 window: float = DEFAULT_WINDOW, lock: Optional[Any] = None) -> None:
        super().__init__(run_batch, max_batch=max_batch, window=window, lock=lock)
        self._open: Optional[_Batch[Item, Out]] = None
        self._lock: Any = None
        self._loop: Any = None

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
            batch = self._open = _Batch(full=anyio.Event(), wake=anyio.Event())
        position = len(batch.items)
        batch.items.append(item)
        batch.last = anyio.current_time()
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
        """Wait until the window passes without a call joining (or the batch is full) and the batch before is done,
        close the batch, and run it."""
        while not batch.full.is_set():
            wait = batch.last + self.window - anyio.current_time()
            if wait <= 0:
                break
            with anyio.move_on_after(wait):
                await batch.full.wait()
        async with self._lock:
            if self._open is batch:
                self._open = None
            await self._run(batch)

    def _run_locked(self, items: list[Item]) -> list[Out]:
        # one batch at a time in the threads too, whichever event loop submitted it (a scorer may serve several)
        with self.lock:
            return self._checked(items)

    async def _run(self, batch: _Batch[Item, Out]) -> None:
        """Run the batch in a worker thread (not abandoned when the leader is cancelled: its calls wait on it)."""
        try:
            batch.results = await anyio.to_thread.run_sync(self._run_locked, list(batch.items))
        except BaseException as e:  # every waiting call raises it, not just the leader
            batch.error = e
            if not isinstance(e, Exception):
                raise
        finally:
            batch.done = True
            batch.wake.set()


@dataclass
class _ThreadBatch(Generic[Item, Out]):
    items: list[Item] = field(default_factory=list)
    last: float = 0.0  # time.monotonic() of the latest call to join
    threads: set[int] = field(default_factory=set)  # the threads of its calls
    done: threading.Event = field(default_factory=threading.Event)
    results: Optional[list[Out]] = None
    error: Optional[BaseException] = None


class ThreadBatcher(_Batching[Item, Out]):
    """Gathers :meth:`submit` calls made at once from several threads into batches for ``run_batch`` (as
    :class:`MicroBatcher` does for coroutines), one batch at a time.

    The first call of a batch leads it, as there, but runs the batch in its own thread. A call whose thread made
    the last batch alone, with no other thread's call since, runs at once: a caller with no other thread beside it
    waits the window once, not on every call."""

    def __init__(self, run_batch: Callable[[list[Item]], Sequence[Out]], *, max_batch: int = DEFAULT_MAX_BATCH,
                 window: float = DEFAULT_WINDOW, lock: Optional[Any] = None) -> None:
        super().__init__(run_batch, max_batch=max_batch, window=window, lock=lock)
        self._state = threading.Condition()  # guards _open and _alone
        self._open: Optional[_ThreadBatch[Item, Out]] = None
        self._alone: Optional[int] = None  # the thread that made the last batch alone, none else having called since

    def submit(self, items: Sequence[Item]) -> list[Out]:
        """The results of ``items``, scored in a batch with the calls of other threads that arrive with them; an
        error of the batch is raised in each of its calls."""
        items = list(items)
        if not items:
            return []
        me = threading.get_ident()
        with self._state:
            batch, lead = self._open, self._open is None
            if batch is None:
                batch = self._open = _ThreadBatch()
            wait = lead and self._alone != me
            if self._alone != me:
                self._alone = None
            start = len(batch.items)
            batch.items.extend(items)
            batch.threads.add(me)
            batch.last = time.monotonic()
            if len(batch.items) >= self.max_batch:
                self._open = None
            self._state.notify_all()
        if lead:
            self._lead(batch, wait, me)
        else:
            batch.done.wait()
        if batch.error is not None:
            raise batch.error
        assert batch.results is not None
        return batch.results[start:start + len(items)]

    def _lead(self, batch: _ThreadBatch[Item, Out], wait: bool, me: int) -> None:
        with self._state:
            while wait and self._open is batch:
                left = batch.last + self.window - time.monotonic()
                if left <= 0:
                    break
                self._state.wait(left)
        try:
            with self.lock:
                self._close(batch)
                try:
                    batch.results = self._checked(list(batch.items))
                finally:  # before the next batch can run: a call of another thread since is then seen
                    with self._state:
                        self._alone = me if batch.threads == {me} and self._open is None else None
        except BaseException as e:  # every call of the batch raises it, not just the leader
            self._close(batch)
            batch.error = e
        finally:
            batch.done.set()

    def _close(self, batch: _ThreadBatch[Item, Out]) -> None:
        with self._state:
            if self._open is batch:
                self._open = None
