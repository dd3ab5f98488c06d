"""Progress bars of a scoring run: one over the rows, one per stage, kept for the whole run however many
``score()`` calls (chunks) and rounds it takes."""

from __future__ import annotations

import sys
import time
from typing import IO, Any, Optional

__all__ = ["Progress"]


class Progress:
    """The progress bars of a run of one or more ``Q2Scorer.score(..., progress=...)`` calls.

    A bar over the rows counts them against ``total`` (the run's row count; None when it is not known, as when the
    input is a stream), so it shows the run's ETA; each ``score()`` call advances it by its rows when it ends. A bar
    per stage is made the first time that stage has items to compute and kept to the end of the run: its total grows
    as later rounds and later calls bring items. Bars are tqdm bars on ``file`` (standard error by default), updated
    once per batch. ``rows=False`` leaves the row bar out (``score(progress=True)`` does, for a single call);
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
            self._rows = _Lines("q2 rows", total, "row", file, every)
        else:
            self._rows = self._bar("q2 rows", total, "row", position=0, leave=True)
        self.closed = False
        #: a batch that takes longer than this names its largest row on ``file`` (None: never)
        self.slow_seconds = slow_seconds
        #: how the rows of the current ``score()`` call are named (their run position, id, line): set by the caller
        self.row_names: Optional[list[str]] = None
        self._named: set[str] = set()
        self.rows_seen = 0  # rows scored so far (by earlier calls of the run)

    def _bar(self, desc: str, total: Optional[int], unit: str, position: int, leave: bool) -> Any:
        return self._tqdm(total=total, desc=desc, unit=unit, position=position, leave=leave, file=self._file)

    def add(self, stage: str, items: int) -> None:
        """``items`` more items of ``stage`` are to be computed: its bar's total grows (the bar is made the first
        time)."""
        if not self._stage_bars:
            return
        bar = self._stages.get(stage)
        if bar is None:
            position = len(self._stages) + (self._rows is not None)
            self._stages[stage] = self._bar(f"q2 {stage}", items, "item", position=position, leave=False)
        else:
            bar.total += items
            bar.refresh()

    def advance(self, stage: str, items: int) -> None:
        """``items`` items of ``stage`` are computed."""
        if self._stage_bars:
            self._stages[stage].update(items)

    def stage(self, stage: str) -> None:
        """``stage`` is running now: the row bar says so."""
        if self._rows is not None:
            self._rows.set_postfix_str(f"stage: {stage}")

    def slow(self, stage: str, seconds: float, index: int, size: str) -> None:
        """A batch of ``stage`` took ``seconds``: name its largest row (row ``index`` of the current call, of
        ``size``) on standard error, once per row of the run."""
        name = self.row_names[index] if self.row_names is not None and index < len(self.row_names) else f"row {index}"
        if name in self._named:
            return
        self._named.add(name)
        line = f"q2: slow: a {stage} batch took {seconds:.0f} s; its largest row is {name} ({size})"
        if isinstance(self._rows, _Lines):
            print(line, file=self._file or sys.stderr, flush=True)
        else:
            self._tqdm.write(line, file=self._file or sys.stderr)

    def rows_done(self, rows: int) -> None:
        """``rows`` more rows are scored (the row bar, if any, moves on)."""
        self.rows_seen += rows
        if self._rows is not None:
            self._rows.update(rows)

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


class _Lines:
    """The row count as whole lines on ``file`` (standard error by default): one at most every ``every`` seconds
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

    def set_postfix_str(self, text: str) -> None:
        self._postfix = text

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
