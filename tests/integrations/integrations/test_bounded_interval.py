"""The interval of a mean score: one function (``mean_interval``), inside [0, 1], named as what it is, in every front
end that prints or exports one: ``q2 score``'s summary (and ParlAI / ``evaluate``, which read the same summary), the
HTML report (also in Chromium: ``tests/integrations/jobs/test_report_browser.py``), lm-eval's metrics, the Every
Eval Ever and Hub exports. LightEval and Inspect, which run in .venv-lighteval, have the same check there:
``lighteval_env/test_lighteval.py::test_the_interval_is_the_one_q2_score_prints_inside_0_1`` and
``lighteval_env/test_inspect.py::test_an_eval_scores_its_samples_in_one_core_call``.

The scores are the ones that gave ``Q2  0.8750  [0.6300, 1.1200]`` before: seven responses at 1, one at 0."""

from __future__ import annotations

import io
import json
import re

import pytest

from q2_plugins.cli import main
from q2_plugins.io.rows import result_row, write_meta
from q2_plugins.jobs.report import render_html, summary_of_rows
from q2_plugins.metric import names as M
from q2_plugins.metric.results import Q2Stats, ResponseResult, ResponseStatus, print_summary
from q2_plugins.metric.significance import mean_interval_of
from tests.conftest import optional_import

SCORES = [1.0] * 7 + [0.0]
EXPECTED = mean_interval_of(SCORES)[1]


def _page_data(page: str) -> dict:
    return json.loads(re.search(r'<script type="application/json" id="q2-data">(.*?)</script>', page, re.S).group(1))


def _results() -> list[ResponseResult]:
    return [ResponseResult(i, ResponseStatus.SCORED, score=s, score_no_nli=s) for i, s in enumerate(SCORES)]


def test_the_interval_is_inside_0_1_and_the_one_function_gives_it():
    assert 0 <= EXPECTED.low < 0.875 < EXPECTED.high <= 1


def test_the_summary_prints_and_returns_it_with_its_name():
    summary = Q2Stats.of(_results()).summary()
    assert (summary["q2_ci_low"], summary["q2_ci_high"]) == pytest.approx((EXPECTED.low, EXPECTED.high))
    out = io.StringIO()
    print_summary(summary, "sig", "text", out)
    line = out.getvalue().splitlines()[0]
    assert line.startswith(f"Q2            0.8750  [{EXPECTED.low:.4f}, {EXPECTED.high:.4f}]")
    assert f"95% interval: {M.MEAN_INTERVAL_METHOD}" in line and "normal" not in line


def test_the_report_shows_it_with_its_name():
    rows = [result_row(i, {"id": str(i)}, r, explain=False) for i, r in enumerate(_results())]
    summary = summary_of_rows(rows)
    assert (summary["q2_ci_low"], summary["q2_ci_high"]) == pytest.approx((EXPECTED.low, EXPECTED.high))
    page = render_html(rows, signatures=["sig"])
    data = _page_data(page)
    assert data["summary"]["q2_ci_high"] <= 1 and data["interval_method"] == M.MEAN_INTERVAL_METHOD


def test_a_sidecar_written_with_another_interval_is_shown_with_this_one(tmp_path, capsys):
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(json.dumps(result_row(i, {"id": str(i)}, r, explain=False)) + "\n"
                            for i, r in enumerate(_results())), encoding="utf-8")
    old = {**Q2Stats.of(_results()).summary(), "q2_ci_low": 0.63, "q2_ci_high": 1.12}  # the normal interval
    write_meta(path, engine="local", signature="sig", summary=old, exit_code=0, rows=8, config={}, input="in.jsonl",
               spec=None)
    assert main(["report", str(path), "--output", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text(encoding="utf-8")
    data = _page_data(page)
    assert data["summary"]["q2_ci_high"] == pytest.approx(EXPECTED.high)


def test_lm_eval_aggregates_the_documents_into_it():
    optional_import("lm_eval", "lm-eval")
    from lm_eval.api.registry import get_aggregation, get_metric_aggregation

    import q2_plugins.integrations.lm_eval as ext

    per_doc = [ext.result_metrics(r) for r in _results()]
    for key, bound in (("q2_ci_low", EXPECTED.low), ("q2_ci_high", EXPECTED.high)):
        assert get_metric_aggregation(key) is get_aggregation(key)
        assert get_aggregation(key)([d[key] for d in per_doc]) == pytest.approx(bound)


def test_the_exports_carry_it_with_its_name(tmp_path, capsys):
    yaml = optional_import("yaml", "dev")
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(json.dumps(result_row(i, {"id": str(i), "response": "r", "knowledge": "k"}, r,
                                                  explain=False, signature="q2:test|cmp:f1+nli")) + "\n"
                            for i, r in enumerate(_results())), encoding="utf-8")
    out = tmp_path / "out"
    assert main(["export", str(path), "--output-dir", str(out), "--model-id", "acme/chatter",
                 "--hub-dataset-id", "acme/wow"]) == 0
    aggregate = json.loads(open(capsys.readouterr().out.split()[1], encoding="utf-8").read())
    for result in aggregate["evaluation_results"]:
        interval = result["score_details"]["uncertainty"]["confidence_interval"]
        assert (interval["lower"], interval["upper"]) == pytest.approx((EXPECTED.low, EXPECTED.high))
        assert interval["method"] == M.MEAN_INTERVAL_METHOD
    (entry,) = yaml.safe_load((out / ".eval_results" / "q2.yaml").read_text(encoding="utf-8"))
    assert f"95% interval [{EXPECTED.low:.4f}, {EXPECTED.high:.4f}]" in entry["notes"]
    assert M.MEAN_INTERVAL_METHOD in entry["notes"]
