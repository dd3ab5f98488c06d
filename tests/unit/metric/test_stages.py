"""The stage runner: dedup and memo, failures as row errors, one progress bar per stage across rounds."""

from __future__ import annotations

import pytest

from q2_plugins.metric.config import Q2Config
from q2_plugins.metric.errors import ModelLoadError
from q2_plugins.metric.runner import Row, StageRunner


def runner(progress: bool = False) -> StageRunner:
    return StageRunner(Q2Config(), None, progress=progress)


def test_each_item_is_computed_once_per_call_across_rounds():
    seen: list[list] = []

    def fn(part):
        seen.append(list(part))
        return [p[0].upper() for p in part]

    run = runner()
    first = run.run("qa", [("a",), ("b",), ("a",)], fn)
    second = run.run("qa", [("b",), ("c",)], fn)
    assert seen == [[("a",), ("b",)], [("c",)]]
    assert (first.get(("a",)), second.get(("b",)), second.get(("c",))) == ("A", "B", "C")


def test_a_failing_item_becomes_the_error_of_its_row_only():
    def fn(part):
        if ("bad",) in part:
            raise RuntimeError("cannot read\nthis")
        return [len(p[0]) for p in part]

    out = runner().run("qa", [("good",), ("bad",)], fn)
    good, bad = Row(0), Row(1)
    assert out.take(("good",), good, "question answering") == 4 and good.error is None
    assert out.take(("bad",), bad, "question answering") is None
    assert bad.error == "question answering failed: RuntimeError: cannot read this"


def test_unfit_items_fail_before_the_batch_runs():
    calls = []

    def fn(part):
        calls.append(list(part))
        return ["ok"] * len(part)

    out = runner().run("qg", [("x",), ("too long",)], fn, check=lambda part: [None if len(p[0]) < 3 else "too long"
                                                                              for p in part])
    assert calls == [[("x",)]]
    row = Row(0)
    out.take(("too long",), row, "question generation")
    assert row.error == "question generation failed: too long"


def test_a_model_that_cannot_load_is_no_items_fault():
    def fn(part):
        raise ModelLoadError("Cannot load the QA model")

    with pytest.raises(ModelLoadError):
        runner().run("qa", [("a",), ("b",)], fn)


def test_one_progress_bar_per_stage_counting_every_round_without_a_total(monkeypatch):
    """A stage's items are known only once the stages before it ran, in every round: its bar counts them and shows no
    total (one that grew mid-run made its time left mislead); the row bar gives the share."""
    import tqdm.auto

    bars = []

    class Bar:
        def __init__(self, total, desc, **kw):
            self.total, self.desc, self.n, self.closed = total, desc, 0, False
            bars.append(self)

        def update(self, n):
            self.n += n

        def refresh(self):
            pass

        def close(self):
            self.closed = True

    monkeypatch.setattr(tqdm.auto, "tqdm", Bar)
    run = runner(progress=True)
    for items in ([("a",), ("b",)], [("b",), ("c",)], [("d",)]):  # three QA rounds; "b" is in the memo
        run.run("qa", items, lambda part: [1] * len(part))
    run.run("nli", [("p", "h")], lambda part: [1] * len(part))
    run.close()
    assert [(b.desc, b.total, b.n, b.closed) for b in bars] == [("q2 qa", None, 4, True), ("q2 nli", None, 1, True)]
