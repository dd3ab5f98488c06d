"""Reduced precision is judged by Q²'s decisions, not exact equality: the agreement of two runs is measured, a
forced disagreement is found and reported (warning, sidecar), and the checked run keeps its fast paths."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pytest

from q2_plugins import Q2Config
from q2_plugins.backends.accel.packed import PackedEncoder
from q2_plugins.metric import precision
from q2_plugins.metric.results import DroppedQuestion, QuestionResult, ResponseResult
from q2_plugins.scorer import Q2Scorer

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()][:6]


def _q(cand, question, label=None, score=1.0):
    return QuestionResult(candidate=cand, question=question, response_answer=cand, knowledge_answer=cand,
                          knowledge_answer_kind="span", f1=1.0, nli_label=label, score=score)


def _res(i, score, questions=(), dropped=(), fallback=None):
    return ResponseResult(index=i, status="ok", score=score, questions=list(questions), dropped=list(dropped),
                          fallback_label=fallback)


def test_compare_counts_flips_moves_and_one_sided_questions():
    ref = [_res(0, 1.0, [_q("Paris", "Where?", "entailment")], [DroppedQuestion("it", "What?", "personal")]),
           _res(1, 0.5, fallback="neutral"),
           _res(2, 0.2, [_q("x", "Who?")])]
    chk = [_res(0, 0.96, [_q("Paris", "Where?", "contradiction")],
                [DroppedQuestion("it", "What?", "answer_mismatch")]),
           _res(1, 0.5, fallback="neutral"),
           _res(2, 0.9, [_q("x", "Whom?")])]
    a = precision.compare(ref, chk)
    assert (a.rows, a.scores, a.moved) == (3, 3, 1)  # 0.04 is within MOVED, 0.7 is not
    assert a.score_mae == pytest.approx((0.04 + 0 + 0.7) / 3)
    assert (a.filter_decisions, a.filter_flips, a.questions_one_side) == (2, 1, 2)
    assert (a.nli_labels, a.nli_flips) == (2, 1)  # the answer pair flipped, the fallback agreed
    assert a.below() and "filter decisions flipped" in " ".join(a.below())
    assert precision.compare(ref, ref).below() == [] and precision.compare(ref, ref).score_corr == pytest.approx(1)
    with pytest.raises(ValueError, match="same rows"):
        precision.compare(ref, chk[:2])


def test_a_fallback_in_one_run_only_is_a_flipped_label():
    a = precision.compare([_res(0, 0.5, fallback="neutral")], [_res(0, 1.0, [_q("a", "b")])])
    assert (a.nli_labels, a.nli_flips, a.moved) == (1, 1, 1)


def test_which_settings_are_due_a_check():
    assert precision.check_due(Q2Config()) is None
    assert precision.check_due(Q2Config(dtype="bfloat16")) is None  # tested exactly on the CPU
    assert "float16 on cpu" in precision.check_due(Q2Config(dtype="float16"))
    assert "tf32 on cuda" in precision.check_due(Q2Config(device="cuda", dtype="tf32"))
    assert "qa: float32 on cuda" in precision.check_due(Q2Config(qa_device="cuda:1"))
    ref = precision.reference_config(Q2Config(dtype="bfloat16", qa_dtype="float16", precision_check=8))
    assert (ref.role_dtype("qa"), ref.role_dtype("qg"), ref.qg_search, ref.pack_windows, ref.precision_check) == \
        ("float32", "float32", "library", False, 0)


def _scorer(tiny_config, **changes):
    return Q2Scorer(tiny_config.replace(cpu_kernels="torch", **changes))


def test_a_check_that_agrees_is_recorded_and_silent(tiny_config, rows, monkeypatch):
    monkeypatch.setattr(precision, "check_due", lambda config: "forced")
    scorer = _scorer(tiny_config, precision_check=4)
    plain = _scorer(tiny_config, precision_check=0).score(responses=[r["response"] for r in rows],
                                                          knowledge=[r["knowledge"] for r in rows])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = scorer.score(responses=[r["response"] for r in rows], knowledge=[r["knowledge"] for r in rows])
    a = scorer.precision_agreement
    assert a is not None and a.rows == 4 and a.filter_decisions > 0
    assert (a.moved, a.filter_flips, a.nli_flips, a.questions_one_side) == (0, 0, 0, 0)  # fp32 fast == library
    assert [r.score for r in result.responses] == [r.score for r in plain.responses]  # the check changes nothing
    assert "library paths" in a.reference and a.to_dict()["within_tolerance"] is True


def test_a_forced_disagreement_is_found_and_reported_and_the_fast_path_kept(tiny_config, rows, monkeypatch):
    monkeypatch.setattr(precision, "check_due", lambda config: "forced")
    real = PackedEncoder.class_logits
    monkeypatch.setattr(PackedEncoder, "class_logits",  # the checked run's packed NLI picks another label
                        lambda self, f: real(self, f).roll(1, -1))
    scorer = _scorer(tiny_config, precision_check=6)
    with pytest.warns(RuntimeWarning, match=r"decisions of .* differ from .*float32.*library paths.*"
                                            r"NLI labels flipped.*goes on with its own setting"):
        scorer.score(responses=[r["response"] for r in rows], knowledge=[r["knowledge"] for r in rows])
    a = scorer.precision_agreement
    assert a.nli_flips == a.nli_labels > 0 and a.filter_flips == 0
    assert a.to_dict()["within_tolerance"] is False
    assert scorer.nli.runner.packer() is not None  # still packed: never switched to another path
    with warnings.catch_warnings():  # checked once per scorer
        warnings.simplefilter("error")
        scorer.score(responses=[rows[0]["response"]], knowledge=[rows[0]["knowledge"]])


def test_a_run_records_the_check_in_its_sidecar(tiny_config, rows, tmp_path, monkeypatch, capsys):
    from q2_plugins.cli import main

    monkeypatch.setattr(precision, "check_due", lambda config: "forced")
    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    out = tmp_path / "out.jsonl"
    c = tiny_config
    code = main(["score", "--input", str(data), "--output", str(out), "--qg-model", c.qg_model, "--qa-model",
                 c.qa_model, "--nli-model", c.nli_model, "--qg-max-length", "12", "--precision-check", "2",
                 "--no-progress"])
    assert code == 0
    meta = json.loads(out.with_name(out.name + ".meta.json").read_text())
    assert meta["precision_check"]["rows"] == 2 and "within_tolerance" in meta["precision_check"]
    assert "precision     first 2 rows vs" in capsys.readouterr().out


def test_the_speed_line_says_which_setting_is_faster():
    from q2_plugins.metric.precision import Agreement

    a = Agreement(rows=4)
    a.reference, a.checked = "float32", "bfloat16"
    a.seconds = {"reference": 12.27, "checked": 8.07}
    assert "speed         bfloat16 1.52x faster than float32 (8.07 s vs 12.27 s)" in a.lines()
    a.seconds = {"reference": 8.07, "checked": 12.27}
    assert "speed         bfloat16 1.52x slower than float32 (12.27 s vs 8.07 s)" in a.lines()
