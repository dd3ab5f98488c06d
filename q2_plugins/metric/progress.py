"""Progress bars of a scoring run: one over the rows, one per stage, kept for the whole run however many
``score()`` calls (chunks) and rounds it takes."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import IO, Any, Iterator, Optional, Sequence, Union

__all__ = ["CountLines", "Progress", "scoring_progress", "on_a_terminal", "MANY_ROWS"]


class Progress:
    """The progress bars of a run of one or more ``Q2Scorer.score(..., progress=...)`` calls.

    A bar over the rows counts them against ``total`` (the run's row count; None when it is not known, as when the
    input is a stream), so it shows the run's rate and time left. Within a ``score()`` call the count moves as the
    call's stages progress (:meth:`start` names them): the call's rows count as done in proportion to its work done,
    each stage weighted by the time per row it took earlier in the run (equally in the first call); the count is
    exact when each call ends. A bar per stage is made the first time that stage has items to compute and kept to
    the end of the run: it counts the items computed, with no total (later rounds and calls bring items no one can
    count before). Bars are tqdm bars on ``file`` (standard error by default), updated once per batch.
    ``rows=False`` leaves the row bar out (``score(progress=True)`` does, for a single call);
    ``stage_bars=False`` leaves the stage bars out (the command line does when standard error is no terminal: a log
    file would keep their cursor movements as escape codes). The row bar shows the stage running now; a batch that
    takes over ``slow_seconds`` names its largest row on ``file`` (``row_names``, set by the caller per call, say how:
    the CLI gives the row's place in the input and its id), once per row.

    ``plain=True`` (the default when standard error, the default ``file``, is no terminal and not a notebook's)
    writes no bars: the row count goes
    on ``file`` as whole lines, one at most every ``every`` seconds and one when the run ends, with no ``\r``
    redraws or cursor codes for a log file to keep; there are no stage bars.

    >>> with Progress(total=len(responses)) as progress:  # doctest: +SKIP
    ...     for start in range(0, len(responses), 1000):
    ...         scorer.score(responses=responses[start : start + 1000],
    ...                      knowledge=knowledge[start : start + 1000], progress=progress)
    """

    def __init__(self, total: Optional[int] = None, *, rows: bool = True, stage_bars: bool = True,
                 file: Optional[IO[str]] = None, slow_seconds: Optional[float] = 60.0, plain: Optional[bool] = None,
                 every: float = 30.0) -> None:
        if total is not None and (not isinstance(total, int) or total < 0):
            raise ValueError(f"Expected total to be a row count (an int >= 0) or None, but got {total!r}")
        from tqdm.auto import tqdm

        if plain is None:
            plain = file is None and not tqdm.__module__.startswith("tqdm.notebook") and not getattr(
                sys.stderr, "isatty", lambda: False)()
        self._tqdm, self._file = tqdm, file
        self._stages: dict[str, Any] = {}
        self._stage_bars = stage_bars and not plain
        if not rows:
            self._rows: Any = None
        elif plain:
            self._rows = CountLines("q2 rows", total, "row", file, every)
        else:
            self._rows = self._bar("q2 rows", total, "row", position=0, leave=True)
        self.closed = False
        #: a batch that takes longer than this names its largest row on ``file`` (None: never)
        self.slow_seconds = slow_seconds
        #: how the rows of the current ``score()`` call are named (their run position, id, line): set by the caller
        self.row_names: Optional[list[str]] = None
        self._named: set[str] = set()
        self.rows_seen = 0  # rows scored so far (by earlier calls of the run)
        self._seconds: dict[str, float] = {}  # stage -> seconds its batches took in the run
        self._began: dict[str, float] = {}  # stage -> when its current batch began
        self._call = _Call(0, [])

    def _bar(self, desc: str, total: Optional[int], unit: str, position: int, leave: bool) -> Any:
        return self._tqdm(total=total, desc=desc, unit=unit, position=position, leave=leave, file=self._file,
                          **_size_if_unknown(self._file))

    def start(self, rows: int, stages: Sequence[str]) -> None:
        """A ``score()`` call of ``rows`` rows begins; it runs ``stages`` in this order (a stage may come back in
        later rounds): the row count moves as they progress."""
        self._call = _Call(rows, list(stages))

    def add(self, stage: str, items: int) -> None:
        """``items`` more items of ``stage`` are to be computed (its bar is made the first time). A stage's bar
        counts its items with no total: how many a stage will have is known only once the stages before it have
        run, in every chunk, so a total would keep growing and its time left would mislead; the row bar's share and
        time left are the run's."""
        self._call.items.setdefault(stage, [0, 0])[1] += items
        if not self._stage_bars or stage in self._stages:
            return
        position = len(self._stages) + (self._rows is not None)
        self._stages[stage] = self._bar(f"q2 {stage}", None, "item", position=position, leave=False)

    def advance(self, stage: str, items: int) -> None:
        """``items`` items of ``stage`` are computed."""
        if stage in self._began:
            self._seconds[stage] = self._seconds.get(stage, 0.0) + time.monotonic() - self._began.pop(stage)
        self._call.items.setdefault(stage, [0, 0])[0] += items
        if self._stage_bars:
            self._stages[stage].update(items)
        self._show(stage)

    def stage(self, stage: str) -> None:
        """``stage`` is running now (a batch of it begins): the row bar says so."""
        self._began[stage] = time.monotonic()
        self._call.reached(stage)
        self._show(stage)

    def _show(self, stage: str) -> None:
        """The row bar: the stage running and its items, and the rows of the call done so far by its work."""
        if self._rows is None:
            return
        done, total = self._call.items.get(stage, (0, 0))
        self._rows.set_postfix_str(f"stage: {stage}" + (f" {done}/{total}" if total else ""), refresh=False)
        rows = self._call.rows_done(self._weights())
        if rows > self._call.shown:
            self._rows.update(rows - self._call.shown)
            self._call.shown = rows
        else:
            self._rows.refresh()

    def _weights(self) -> dict[str, float]:
        """Each stage of the call by its seconds per row in the run so far (all 1 before a call has ended)."""
        if not self.rows_seen or not any(self._seconds.get(s) for s in self._call.stages):
            return {s: 1.0 for s in self._call.stages}
        return {s: self._seconds.get(s, 0.0) / self.rows_seen for s in self._call.stages}

    def slow(self, stage: str, seconds: float, index: int, size: str) -> None:
        """A batch of ``stage`` took ``seconds``: name its largest row (row ``index`` of the current call, of
        ``size``) on standard error, once per row of the run."""
        name = self.row_names[index] if self.row_names is not None and index < len(self.row_names) else f"row {index}"
        if name in self._named:
            return
        self._named.add(name)
        line = f"q2: slow: a {stage} batch took {seconds:.0f} s; its largest row is {name} ({size})"
        if isinstance(self._rows, CountLines):
            print(line, file=self._file or sys.stderr, flush=True)
        else:
            self._tqdm.write(line, file=self._file or sys.stderr)

    def rows_done(self, rows: int) -> None:
        """``rows`` more rows are scored (the row bar, if any, moves on)."""
        self.rows_seen += rows
        if self._rows is not None:
            self._rows.update(max(0, rows - self._call.shown))
        self._call = _Call(0, [])

    def close(self) -> None:
        """Close every bar (the stage bars are cleared, the row bar stays with the run's count and time)."""
        for bar in reversed(list(self._stages.values())):
            bar.close()
        if self._rows is not None:
            self._rows.close()
        self._stages.clear()
        self.closed = True

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


#: a front end scoring at least this many rows in one call shows its progress on a terminal
MANY_ROWS = 32


def on_a_terminal(rows: int) -> bool:
    """What a front end that scores ``rows`` rows in one call (``evaluate``, reranking) passes as
    ``score(progress=...)``: bars when standard error is a terminal and the call is long (:data:`MANY_ROWS` rows or
    more); nothing in a log, a pipe or a notebook's captured output, and nothing for a few rows."""
    return rows >= MANY_ROWS and bool(getattr(sys.stderr, "isatty", lambda: False)())


@contextlib.contextmanager
def scoring_progress(scorer: Any, rows: int, enabled: bool) -> Iterator[Union[bool, "Progress"]]:
    """What a command passes as ``score(progress=...)`` for one run of ``rows`` rows: with ``enabled``, the models
    loaded first behind one "loading models" line (not the libraries' per-file bars), then a :class:`Progress`
    over the rows (a bar on a terminal, plain lines in a log), closed at the end; without, False."""
    if not enabled:
        yield False
        return
    print("q2: loading models", file=sys.stderr, flush=True)
    scorer.load(quiet=True)
    with Progress(total=rows) as progress:
        yield progress


def _size_if_unknown(file: Optional[IO[str]]) -> dict[str, int]:
    """A terminal that reports no size, or only its width (a pseudo-terminal nobody sized, or ``stty cols N`` alone:
    tqdm then measures -1 columns or 0 rows and draws nothing) gets 80 columns or 24 rows for what it lacks; a
    terminal with a size, or a notebook, is left to tqdm."""
    try:
        size = os.get_terminal_size((file or sys.stderr).fileno())
    except (AttributeError, OSError, ValueError):
        return {}
    if size.columns > 0 and size.lines > 0:
        return {}
    return {"ncols": size.columns if size.columns > 0 else 80, "nrows": size.lines if size.lines > 0 else 24}


class _Call:
    """The ``score()`` call running: its rows, its stages in order, the furthest one reached, each stage's items
    (done, total) and the rows the bar shows as done."""

    def __init__(self, rows: int, stages: list[str]) -> None:
        self.rows, self.stages, self.furthest, self.shown = rows, stages, -1, 0
        self.items: dict[str, list[int]] = {}

    def reached(self, stage: str) -> None:
        if stage in self.stages:
            self.furthest = max(self.furthest, self.stages.index(stage))

    def rows_done(self, weights: dict[str, float]) -> int:
        """The call's rows done by its work: the stages before the furthest one reached are done, that one by its
        items; never more than the rows less one (the call's end counts the last)."""
        if not self.rows or not self.stages:
            return 0
        share = 0.0
        for i, stage in enumerate(self.stages):
            if i < self.furthest:
                share += weights[stage]
            elif i == self.furthest:
                done, total = self.items.get(stage, (0, 0))
                share += weights[stage] * (done / total if total else 0.0)
        whole = sum(weights.values())
        return min(self.rows - 1, int(self.rows * share / whole)) if whole else 0


class CountLines:
    """A count (rows, steps) as whole lines on ``file`` (standard error by default): one at most every ``every`` seconds
    while rows come in, and one at :meth:`close` with the count, the time and the rate."""

    def __init__(self, desc: str, total: Optional[int], unit: str, file: Optional[IO[str]], every: float) -> None:
        self.desc, self.total, self.unit, self.n = desc, total, unit, 0
        self._file, self._every = file, every
        self._start = self._last = time.monotonic()
        self._postfix = ""
        self._closed = False

    def _write(self, line: str) -> None:
        print(line, file=self._file or sys.stderr, flush=True)

    def _count(self) -> str:
        if self.total is None:
            return f"{self.desc}: {self.n} {self.unit}s"
        share = f" ({100 * self.n / self.total:.0f}%)" if self.total else ""
        return f"{self.desc}: {self.n}/{self.total} {self.unit}s{share}"

    def set_postfix_str(self, text: str, refresh: bool = True) -> None:
        self._postfix = text

    def refresh(self) -> None:
        pass

    def update(self, n: int) -> None:
        self.n += n
        now = time.monotonic()
        if now - self._last >= self._every:
            self._last = now
            self._write(f"{self._count()} after {now - self._start:.0f} s" + (f", {self._postfix}" if self._postfix
                                                                                  else ""))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        seconds = time.monotonic() - self._start
        rate = f", {self.n / seconds:.2f} {self.unit}s/s" if seconds > 0 else ""
        self._write(f"{self._count()} in {seconds:.1f} s{rate}")
