"""An interval on every system score: additive, the same as SciPy's closed forms, shown in the summary; the figure
names come from one declaration, and every front end's result row from one serialiser."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats as scipy_stats

from q2_plugins.cli import main
from q2_plugins.metric import names as M
from q2_plugins.metric.results import Q2Stats, ResponseResult, ResponseStatus, print_summary
from q2_plugins.metric.significance import mean_interval

REPO = Path(__file__).resolve().parents[3]


def _responses(scores):
    out = []
    for i, s in enumerate(scores):
        if s is None:
            out.append(ResponseResult(i, ResponseStatus.NO_VALID_QUESTION))
        else:
            status = ResponseStatus.FALLBACK if i % 5 == 0 else ResponseStatus.SCORED
            out.append(ResponseResult(i, status, score=s, score_no_nli=s, used_fallback=i % 5 == 0))
    return out


def test_intervals_add_across_parts_and_match_scipy():
    rng = np.random.default_rng(0)
    scores = [None if x < 0.1 else float(x) for x in rng.random(200)]
    responses = _responses(scores)
    whole = Q2Stats.of(responses)
    parts = sum(Q2Stats.of(responses[i:i + 37]) for i in range(0, 200, 37))
    assert parts.intervals() == pytest.approx(whole.intervals())
    scored = np.array([s for s in scores if s is not None])
    got = whole.summary()
    assert got["q2_stderr"] == pytest.approx(scipy_stats.sem(scored))
    interval = mean_interval(len(scored), float(scored.sum()), float((scored * scored).sum()))[1]
    assert (got["q2_ci_low"], got["q2_ci_high"]) == pytest.approx((interval.low, interval.high))
    wilson = scipy_stats.binomtest(whole.n_with_questions, whole.n).proportion_ci(0.95, method="wilson")
    assert (got["coverage_ci_low"], got["coverage_ci_high"]) == pytest.approx((wilson.low, wilson.high))


def test_every_summary_figure_is_declared_once():
    summary = Q2Stats.of(_responses([0.5, 1.0, None])).summary()
    figures = [k for k in summary if not k.startswith("n")]
    assert figures == [m.key for m in M.METRICS]
    assert len({m.framework_key for m in M.METRICS}) == len(M.METRICS)
    assert M.by_key("coverage").framework_key == "q2_coverage" and M.FALLBACK_RATE.higher_is_better is False
    with pytest.raises(KeyError, match="declared"):
        M.by_key("q2_coverage")


def test_too_few_scores_give_no_interval_and_the_text_shows_one_when_there_is():
    one = Q2Stats.of(_responses([0.5, None])).summary()
    assert one["q2_stderr"] is None and one["q2_ci_low"] is None and one["coverage_ci_low"] is not None
    out = io.StringIO()
    print_summary(Q2Stats.of(_responses([0.2, 0.4, 0.9, 1.0])).summary(), "sig", "text", out)
    q2_line, _, cov_line = out.getvalue().splitlines()[:3]
    assert q2_line.startswith("Q2            0.6250  [0.") and "95% interval" in q2_line
    assert M.MEAN_INTERVAL_METHOD in q2_line and "normal" not in q2_line
    assert "Wilson" in cov_line and "[" in cov_line


def test_replay_summary_has_no_q2_interval_and_its_rows_come_from_the_serialiser(tmp_path, capsys):
    from q2_plugins.jobs.replay import bundled_original_run

    steps, scores = bundled_original_run()
    out = tmp_path / "replay.jsonl"
    argv = ["replay", "--steps", str(steps[0]), "--scores", str(scores[0]), "--output", str(out), "--format", "json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["q2"] is None and summary["q2_ci_low"] is None and summary["q2_stderr"] is None
    assert summary["coverage_ci_low"] <= summary["coverage"] <= summary["coverage_ci_high"]
    row = json.loads(out.read_text().splitlines()[0])
    assert list(row)[:6] == ["row", "id", "source", "gold", "response", "knowledge"] and "index" not in row
    assert list(row)[-1] == "signature" and row["row"] == 0


def test_the_responses_line_names_rows_unscored_for_want_of_a_question_only_when_there_are_some():
    def responses_line(scores):
        out = io.StringIO()
        print_summary(Q2Stats.of(_responses(scores)).summary(), "sig", "text", out)
        return next(line for line in out.getvalue().splitlines() if line.startswith("responses"))

    assert responses_line([0.2, 0.4, 0.9]).split() == ["responses", "3", "scored", "3", "errors", "0"]
    assert "unscored for want of a question (fallback off) 1" in responses_line([0.2, None, 0.9])


def test_the_metric_declares_its_bounds_and_direction_once_and_the_front_ends_read_them():
    import q2_plugins
    from q2_plugins import Q2Scorer

    info = q2_plugins.METRIC_INFO
    assert info is M.Q2 and info.bounds == (0.0, 1.0) and info.higher_is_better is True
    assert info.direction() == "in [0, 1], higher is better" and M.Q2_STDERR.direction() == ""
    assert M.FALLBACK_RATE.direction() == "in [0, 1], lower is better"
    # torchmetrics' names on the scorer
    assert (Q2Scorer.higher_is_better, Q2Scorer.plot_lower_bound, Q2Scorer.plot_upper_bound) == (True, 0.0, 1.0)
    # the wheel's type marker
    assert (REPO / "q2_plugins" / "py.typed").is_file()
    assert "py.typed" in (REPO / "setup.cfg").read_text().split("[options.package_data]")[1].split("[")[0]
