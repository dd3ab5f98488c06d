"""The row bar's time left, on a fake clock: "estimating" until a row is done, then the rows left at the run's
measured row rate; a new stage, or a slow stage after a fast one, moves it by what the rate moved, and never resets
it. (On a terminal, 200 rows: tqdm's own estimate went from 00:27 to 09:57 in 16 s as a slow stage began.)"""

from __future__ import annotations

import io
import re

from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.progress import Progress, TimeLeft, loading_line


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_time_left_is_estimating_until_a_row_is_done_then_the_measured_rate():
    clock = Clock()
    left = TimeLeft(200, clock)
    assert left.text(0) == "estimating" and left.seconds(0) is None
    clock.now += 10
    assert left.text(0) == "estimating"
    assert left.seconds(20) == 90.0 and left.text(20) == "01:30 left"  # 20 rows in 10 s: 180 rows in 90 s
    clock.now += 3590
    assert left.text(20) == "9:00:00 left"  # 20 rows in an hour: 180 rows in 9 h (h:mm:ss)
    assert TimeLeft(None, clock).text(5) == "estimating"  # no total, no time left


def _shown(progress: Progress) -> str:
    """The row bar as it stands: its time left and stage."""
    return re.search(r"(estimating|[\d:]+ left)(?=, stage|\])", str(progress._rows)).group(0)


def test_the_row_bar_goes_by_the_measured_rate_and_a_new_stage_does_not_reset_it():
    """200 rows: a first call of 50 (a fast stage, 1 s, then a slow one, 10 s), then one of 150 at the same pace.
    Time left says "estimating" until the first call's rows are scored, then follows the truth (44 s in all) within a
    second, through the change of stage and the slow stage, where tqdm's own rate swung by the updates of the last."""
    clock = Clock()
    progress = Progress(total=200, file=Terminal(), plain=False, stage_bars=False, clock=clock)
    start = clock.now
    assert _shown(progress) == "estimating"

    def call(rows: int, per_second: dict[str, int]) -> list[tuple[float, str]]:
        seen = []
        progress.start(rows, list(per_second))
        for stage, rate in per_second.items():
            progress.add(stage, rows)
            for _ in range(rows // rate):  # one batch a second, as the stages run them
                progress.stage(stage)
                seen.append((clock.now - start, _shown(progress)))
                clock.now += 1
                progress.advance(stage, rate)
                seen.append((clock.now - start, _shown(progress)))
        progress.rows_done(rows)
        seen.append((clock.now - start, _shown(progress)))
        return seen

    first = call(50, {"candidates": 50, "qg": 5})
    assert all(shown == "estimating" for _, shown in first[:-1]), first
    assert first[-1] == (11, "00:33 left")  # 50 rows in 11 s: 150 rows in 33 s
    second = call(150, {"candidates": 50, "qg": 5})
    at_stage_change = [shown for t, shown in second if t == 14]
    assert len(set(at_stage_change)) == 1, second  # the qg stage begins: the same time left
    for t, shown in second[:-1]:
        m, s = map(int, re.search(r"(\d\d):(\d\d)", shown).groups())
        assert abs(60 * m + s - (44 - t)) <= 1, (t, shown)
    progress.close()


def test_model_loading_says_what_it_loads():
    line = loading_line(Q2Config(qg_model="org/qg", qa_model="org/qa", nli_model="org/nli"))
    assert line == "q2: loading models: QG org/qg, QA org/qa, NLI org/nli, spaCy en_core_web_sm"
