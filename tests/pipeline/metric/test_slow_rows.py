"""A batch slower than ``Progress.slow_seconds`` names its largest row on standard error, once per row; the row bar
shows the stage running."""

from __future__ import annotations

import io
import re

from q2_plugins.metric.progress import Progress
from tests.fakes import scripted_scorer

SHORT, LONG = "paris is in france .", "paris is in france and " + "it is big " * 50 + "."
KNOW = "Paris is the capital of France."


def test_a_slow_batch_names_its_largest_row_once():
    cands = {SHORT: ["paris"], LONG: ["paris"]}
    qg = {("paris", r): ["where is paris?"] for r in cands}
    qa = {("where is paris?", r): "paris" for r in cands}
    scorer = scripted_scorer(cands, qg, qa)
    err = io.StringIO()
    with Progress(total=4, file=err, slow_seconds=0.0) as progress:  # every batch is "slow"
        for start in (0, 2):
            progress.row_names = [f"row {start + i} (id 'r{start + i}')" for i in range(2)]
            scorer.score(responses=[SHORT, LONG], knowledge=[KNOW, KNOW], progress=progress)
        postfix = progress._rows.postfix
    notices = re.findall(r"q2: slow: [^\n]*", err.getvalue())  # (each on a line of its own, among the bars)
    assert notices[0] == (f"q2: slow: a candidates batch took 0 s; its largest row is row 1 (id 'r1') (response "
                          f"{len(LONG)} characters, knowledge {len(KNOW)} characters)")
    assert len(notices) == len(set(notices)) == 2  # rows 1 and 3; each named once, whatever the batches
    assert "row 3 (id 'r3')" in notices[1]
    assert re.fullmatch(r"(estimating|\d\d:\d\d left), stage: .*", postfix), postfix


def test_no_notice_under_the_threshold():
    err = io.StringIO()
    scorer = scripted_scorer({SHORT: []}, {}, {})
    with Progress(total=1, file=err) as progress:
        scorer.score(responses=[SHORT], knowledge=[KNOW], progress=progress)
    assert "q2: slow" not in err.getvalue()
