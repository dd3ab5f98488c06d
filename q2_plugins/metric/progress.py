"""Progress bars of a scoring run: one over the rows, one per stage, kept for the whole run however many
``score()`` calls (chunks) and rounds it takes."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import IO, Any, Callable, Iterator, Optional, Sequence, Union

__all__ = ["CountLines", "Progress", "TimeLeft", "scoring_progress", "loading_line", "on_a_terminal", "MANY_ROWS"]


class TimeLeft:
    """The time left of a run of ``total`` rows from its measured row rate: the rows done over the seconds since the
    count began (the run's mean rate, so a new stage, a slow batch or a fast one moves it little and nothing resets
    it); ``"estimating"`` until a row is done. ``clock``: seconds, ``time.monotonic`` by default. (:class:`Progress`
    counts a call's rows as done by its work, each stage weighted by its measured time per row, once a first call has
    ended; before, it says "estimating".)"""

    def __init__(self, total: Optional[int], clock: Callable[[], float] = time.monotonic) -> None:
        self.total, self._clock = total, clock
        self._start = clock()

    def seconds(self, done: float) -> Optional[float]:
        """Seconds left with ``done`` rows done (None while there is no rate to go by, or no total)."""
        elapsed = self._clock() - self._start
        if not self.total or done <= 0 or elapsed <= 0:
            return None
        return max(0.0, (self.total - done) * elapsed / done)

    def text(self, done: float) -> str:
        """``"03:20 left"`` (``h:mm:ss`` past an hour), or ``"estimating"`` (the time left) before a rate."""
        left = self.seconds(done)
        if left is None:
            return "estimating"
        m, sec = divmod(int(round(left)), 60)
        h, m = divmod(m, 60)
        return f"{h}:{m:02d}:{sec:02d} left" if h else f"{m:02d}:{sec:02d} left"


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

    The row bar's time left is :class:`TimeLeft`'s (the run's measured row rate, ``clock`` its time), not tqdm's
    (whose rate follows the last updates, so it swings as stages of different speed take turns).

    >>> with Progress(total=len(responses)) as progress:  # doctest: +SKIP
    ...     for start in range(0, len(responses), 1000):
    ...         scorer.score(responses=responses[start : start + 1000],
    ...                      knowledge=knowledge[start : start + 1000], progress=progress)
    """

    def __init__(self, total: Optional[int] = None, *, rows: bool = True, stage_bars: bool = True,
                 file: Optional[IO[str]] = None, slow_seconds: Optional[float] = 60.0, plain: Optional[bool] = None,
                 every: float = 30.0, clock: Callable[[], float] = time.monotonic) -> None:
        if total is not None and (not isinstance(total, int) or total < 0):
            raise ValueError(f"Expected total to be a row count (an int >= 0) or None, but got {total!r}")
        from tqdm.auto import tqdm

        if plain is None:
            plain = file is None and not tqdm.__module__.startswith("tqdm.notebook") and not getattr(
                sys.stderr, "isatty", lambda: False)()
        self._tqdm, self._file, self._clock = tqdm, file, clock
        self._stages: dict[str, Any] = {}
        self._stage_bars = stage_bars and not plain
        if not rows:
            self._rows: Any = None
        elif plain:
            self._rows = CountLines("q2 rows", total, "row", file, every)
        else:
            self._rows = self._bar("q2 rows", total, "row", position=0, leave=True,
                                   bar_format=_ROW_BAR if total is not None else None)
        self.time_left = TimeLeft(total, clock)
        if self._rows is not None and not plain and total is not None:
            self._rows.set_postfix_str(self.time_left.text(0))
        self.closed = False
        #: a batch that takes longer than this names its largest row on ``file`` (None: never)
        self.slow_seconds = slow_seconds
        #: how the rows of the current ``score()`` call are named (their run position, id, line): set by the caller
        self.row_names: Optional[list[str]] = None
        self._named: set[str] = set()
        self.rows_seen = 0  # rows scored so far (by earlier calls of the run)
        self._seconds: dict[str, float] = {}  # stage -> seconds its batches took in the run
        self._measured: dict[str, float] = {}  # the same, as of the end of the last call
        self._stage_text = ""  # the row bar's stage part: the stage running and its items
        self._began: dict[str, float] = {}  # stage -> when its current batch began
        self._call = _Call(0, [])

    def _bar(self, desc: str, total: Optional[int], unit: str, position: int, leave: bool,
             bar_format: Optional[str] = None) -> Any:
        # (smoothing 0: the rate shown is the mean since the bar began, as the time left's)
        return self._tqdm(total=total, desc=desc, unit=unit, position=position, leave=leave, file=self._file,
                          bar_format=bar_format, smoothing=0, **_size_if_unknown(self._file))

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
            self._seconds[stage] = self._seconds.get(stage, 0.0) + self._clock() - self._began.pop(stage)
        self._call.items.setdefault(stage, [0, 0])[0] += items
        if self._stage_bars:
            self._stages[stage].update(items)
        self._show(stage)

    def stage(self, stage: str) -> None:
        """``stage`` is running now (a batch of it begins): the row bar says so."""
        self._began[stage] = self._clock()
        self._call.reached(stage)
        self._show(stage)

    def _show(self, stage: str) -> None:
        """The row bar: the stage running and its items, and the rows of the call done so far by its work."""
        if self._rows is None:
            return
        done, total = self._call.items.get(stage, (0, 0))
        rows = self._call.rows_done(self._weights())
        left = "" if isinstance(self._rows, CountLines) or self.time_left.total is None else \
            f"{self._time_left(rows)}, "
        self._stage_text = f"stage: {stage}" + (f" {done}/{total}" if total else "")
        self._rows.set_postfix_str(left + self._stage_text, refresh=False)
        if rows > self._call.shown:
            self._rows.update(rows - self._call.shown)
            self._call.shown = rows
        else:
            self._rows.refresh()

    def _time_left(self, rows: int = 0) -> str:
        """The row bar's time left with ``rows`` rows of the current call done by its work: "estimating" until a
        call has ended (its rows scored, and each stage's time per row measured), then :class:`TimeLeft`'s."""
        return self.time_left.text(self.rows_seen + rows if self.rows_seen else 0)

    def _weights(self) -> dict[str, float]:
        """Each stage of the call by its seconds per row in the calls that have ended (all 1 before one has; the
        running call's seconds wait for its rows, so a stage's time is never set against the rows before it)."""
        if not self.rows_seen or not any(self._measured.get(s) for s in self._call.stages):
            return {s: 1.0 for s in self._call.stages}
        return {s: self._measured.get(s, 0.0) / self.rows_seen for s in self._call.stages}

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
        self._measured = dict(self._seconds)
        if self._rows is not None:
            if not isinstance(self._rows, CountLines) and self.time_left.total is not None:
                self._rows.set_postfix_str(", ".join(filter(None, (self._time_left(), self._stage_text))),
                                           refresh=False)
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


#: the row bar with a total: tqdm's own, its time left (tqdm's) replaced by :class:`TimeLeft`'s in the postfix
_ROW_BAR = "{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}, {rate_fmt}{postfix}]"

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
    print(loading_line(scorer.config), file=sys.stderr, flush=True)
    scorer.load(quiet=True)
    with Progress(total=rows) as progress:
        yield progress


def loading_line(config: Any) -> str:
    """The one line a command prints while its models load: what it loads (the models a scorer of ``config``, a
    :class:`~q2_plugins.metric.config.Q2Config`, uses)."""
    models = [("coreference", config.coref_model if config.coref else None), ("QG", config.qg_model),
              ("QA", config.qa_model), ("NLI", config.nli_model if config.uses_nli else None),
              ("spaCy", config.spacy_model)]
    return "q2: loading models: " + ", ".join(f"{role} {name}" for role, name in models if name)


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
