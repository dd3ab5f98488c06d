"""Fidelity oracle: the original pipeline's recorded outputs must reproduce through our scoring layer."""

from __future__ import annotations

import csv
import json

import pytest

from q2_plugins.cli import main
from q2_plugins.jobs.replay import decoded_answer, load_original_steps, replay
from q2_plugins.metric.components import AnswerKind

SUBSETS = ["dodeca_consistent", "dodeca_inconsistent", "memnet_consistent", "memnet_inconsistent"]


def load(shared_data, name):
    folder = shared_data / "q2_original_run" / name
    with open(folder / f"{name}_scores.csv", newline="") as f:
        scores = {row["id"]: row for row in csv.DictReader(f)}
    fallback = {k: float(v["Q2_no_nli"]) for k, v in scores.items()}
    return load_original_steps(folder / f"{name}_out.steps.csv", fallback), scores


@pytest.mark.slow
def test_every_recorded_question_f1_reproduces_bit_for_bit(shared_data):
    n = 0
    for name in SUBSETS:
        records, _ = load(shared_data, name)
        result = replay(records, explain=True)
        for rec, res in zip(records, result.responses):
            for q, qr in zip(rec.questions, res.questions):
                assert qr.f1 == q.recorded_f1, (name, rec.id, q.candidate, q.knowledge_answer)
                n += 1
    assert n == 1300


@pytest.mark.slow
def test_every_response_score_without_nli_reproduces(shared_data):
    n = exact = 0
    for name in SUBSETS:
        records, scores = load(shared_data, name)
        result = replay(records)
        for rec, res in zip(records, result.responses):
            if not rec.questions:
                assert res.status == "fallback" and res.used_fallback
                continue
            recorded = float(scores[rec.id]["Q2_no_nli"])
            # 549 agree to the bit; the rest differ in the last one or two bits of the mean because the original
            # re-read its F1 values from CSV before averaging (largest difference seen: 2.1e-17).
            assert res.score_no_nli == pytest.approx(recorded, rel=0, abs=1e-15), (name, rec.id)
            exact += res.score_no_nli == recorded
            n += 1
    assert n == 566
    assert exact >= 549


@pytest.mark.slow
def test_accuracy_at_threshold_matches_the_recorded_run(shared_data):
    correct = total = no_q = 0
    for name in SUBSETS:
        records, _ = load(shared_data, name)
        result = replay(records)
        inconsistent = name.endswith("_inconsistent")
        for res in result.responses:
            correct += (res.score_no_nli <= 0.5) == inconsistent
            total += 1
            no_q += res.used_fallback
    assert (total, no_q) == (600, 34)
    assert round(100 * correct / total, 2) == 73.50


def test_decoded_answers_map_onto_kinds():
    assert decoded_answer("[CLS]").kind is AnswerKind.NO_ANSWER
    assert decoded_answer("").kind is AnswerKind.EMPTY
    assert decoded_answer("[CLS] who is it?[SEP] a man").kind is AnswerKind.SPAN_FROM_NULL
    assert decoded_answer("united states").kind is AnswerKind.SPAN


@pytest.mark.slow
def test_replay_cli(shared_data, tmp_path, capsys):
    folder = shared_data / "q2_original_run" / "memnet_consistent"
    out = tmp_path / "replay.jsonl"
    code = main(["replay", "--steps", str(folder / "memnet_consistent_out.steps.csv"),
                 "--scores", str(folder / "memnet_consistent_scores.csv"), "--output", str(out), "--format", "json"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    recorded = json.loads((folder / "memnet_consistent_scores.json").read_text())
    assert summary["q2_no_nli"] == pytest.approx(recorded["Q2 (no nli)"], abs=1e-12)
    assert summary["n"] == 150 and len(out.read_text().splitlines()) == 150


def test_load_rejects_other_formats(tmp_path):
    bad = tmp_path / "x.csv"
    bad.write_text("a,b\n1,2\n")
    with pytest.raises(ValueError, match="expected the original steps columns"):
        load_original_steps(bad)


def test_replay_summary_labels_the_f1_mean_as_what_it_is(tmp_path, capsys):
    steps = tmp_path / "x_out.steps.csv"
    steps.write_text("id,response,cand,question,knowledge,knowledge_ans,score\n"
                     "0,r0,Paris,Which city?,k0,Paris,1.0\n"
                     "1,r1,Rome,Which town?,k1,[CLS],0.0\n")
    assert main(["replay", "--steps", str(steps)]) == 0
    text = capsys.readouterr().out
    assert "Q2            n/a" in text and "Q2 w/o NLI    0.5000" in text
    assert "the recorded steps carry no NLI labels" in text
    assert main(["replay", "--steps", str(steps), "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["q2"] is None and summary["q2_no_nli"] == 0.5 and "no NLI labels" in summary["note"]
    assert "discard-unanswerable" not in summary["signature"]
    # Q²*: response 1's only question has no answer, so it still counts; the mean stays (1 + 0) / 2
    assert main(["replay", "--steps", str(steps), "--discard-unanswerable", "--format", "json"]) == 0
    star = json.loads(capsys.readouterr().out)
    assert star["q2_no_nli"] == 0.5 and "|questions:discard-unanswerable" in star["signature"]


def test_a_byte_that_is_not_utf8_is_named_by_file_and_line(tmp_path, capsys):
    steps = tmp_path / "x_out.steps.csv"
    head = b"id,response,cand,question,knowledge,knowledge_ans,score\n0,r0,Paris,Which city?,k0,Paris,1.0\n"
    steps.write_bytes(head + b"1,caf\xa9,Rome,Which town?,k1,[CLS],0.0\n")
    assert main(["replay", "--steps", str(steps)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"{steps} line 3 is not valid UTF-8: byte 0xa9 at byte offset "
                                             f"{len(head) + 5} of the file"), err


def test_replay_scores_through_the_metrics_own_steps(tmp_path, monkeypatch):
    """Replay builds its rows with the steps of the live pipeline (step 5's comparison, Q²*, step 7): a change to
    step 5 reaches it."""
    from q2_plugins.metric import stages

    steps = tmp_path / "x_out.steps.csv"
    steps.write_text("id,response,cand,question,knowledge,knowledge_ans,score\n"
                     "0,Paris is in France,Paris,Which city?,k0,paris,1.0\n"
                     "0,Paris is in France,France,Which country?,k0,the country of France,0.5\n"
                     "1,r1,Rome,Which town?,k1,[CLS],0.0\n")
    records = load_original_steps(steps)
    before = replay(records, explain=True)
    assert before.scores == [0.75, 0.0]
    assert [(q.start, q.end) for q in before.responses[0].questions] == [(0, 5), (12, 18)]
    monkeypatch.setattr(stages, "question_score", lambda f1, label: f1 / 2)  # step 5's rule, changed
    after = replay(records, explain=True)
    assert after.scores == [0.375, 0.0] and [q.score for q in after.responses[0].questions] == [0.5, 0.25]
    assert [s.score for s in after.responses[0].spans] == [0.5, 0.25]


def test_replay_nli_goes_through_step_5():
    from q2_plugins.jobs.replay import RecordedQuestion, RecordedResponse
    from q2_plugins.metric.components import Answer, NLILabel
    from tests.fakes import FakeNLI

    rec = RecordedResponse("0", "Bob is a painter", "k", [
        RecordedQuestion("a painter", "What is Bob?", Answer.span("an artist who paints"))])
    pair = ("What is Bob? an artist who paints.", "What is Bob? a painter.")
    got = replay([rec], use_nli=True, nli=FakeNLI({pair: NLILabel.ENTAILMENT}), explain=True).responses[0]
    assert got.score == 1.0 and got.score_no_nli == 0.0 and got.questions[0].nli_label == "entailment"
    with pytest.raises(ValueError, match="an NLI label's score"):
        replay([RecordedResponse("1", "r", "k", fallback=0.3)])
