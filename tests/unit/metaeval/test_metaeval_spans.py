"""The span-level experiment: character- and example-level P / R / F1 by hand, thresholds from the dev split only,
the loaders' gold spans (RAGTruth's label offsets, HalluDial's quoted phrases) and the sources of predicted spans."""

from __future__ import annotations

import json

import pytest

from q2_plugins.datasets.halludial import load_halludial, quoted_spans
from q2_plugins.datasets.ragtruth import load_ragtruth
from q2_plugins.datasets.types import Example, MetaEvalData
from q2_plugins.metaeval.experiments import MetaEvalOptions, run_meta_eval
from q2_plugins.metaeval.report import to_markdown
from q2_plugins.metaeval.scores import MetricScores, QuestionStats, metrics_from_results
from q2_plugins.metaeval.spans import char_prf, choose_threshold, example_prf, span_level
from q2_plugins.metric.results import QuestionResult, ResponseResult, Span


def ex(i, spans, split="test"):
    return Example(id=i, response="x" * 40, knowledge="k", consistent=not spans, label="?", split=split,
                   spans=None if spans is None else tuple(spans))


def test_character_and_example_level_by_hand():
    exs = [ex("a", [(0, 10)]), ex("b", []), ex("c", [(5, 9)]), ex("d", None)]
    m = MetricScores("M", {}, "test", spans={
        "a": [(0, 4, 0.1), (4, 20, 0.9)],      # 4 of its 10 gold characters found at 0.5; 20 predicted at 0.9
        "b": [(0, 3, 0.2)],                    # 3 false characters: a false example
        "c": [(30, 35, 0.9)],                  # nothing at 0.5
        "d": [(0, 2, 0.0)]})                   # not annotated at the character level
    got = char_prf(exs[:3], m, 0.5)
    assert (got["n_predicted"], got["n_gold"]) == (7, 14)
    p, r = 4 / 7, 4 / 14
    assert got["precision"] == pytest.approx(p) and got["recall"] == pytest.approx(r)
    assert got["f1"] == pytest.approx(2 * p * r / (p + r))
    # example level: a, b and d flagged; a and c hallucinated (d, without located spans, is labelled consistent)
    e = example_prf(exs, m, 0.5)
    assert (e["n_predicted"], e["n_gold"]) == (3, 2) and e["precision"] == pytest.approx(1 / 3)
    assert e["recall"] == pytest.approx(0.5)


def test_the_threshold_comes_from_dev_never_from_test():
    # on dev, 0.3 is best (a span at 0.3 is hallucinated, one at 0.6 is not); on test 0.6 would be best
    dev = [ex("d1", [(0, 5)], "dev"), ex("d2", [], "dev")]
    test = [ex("t1", [(0, 5)]), ex("t2", [(10, 15)])]
    m = MetricScores("M", {}, "test", spans={"d1": [(0, 5, 0.3)], "d2": [(0, 5, 0.6)],
                                             "t1": [(0, 5, 0.3)], "t2": [(10, 15, 0.6)]})
    assert choose_threshold(dev, m, char_prf) == (0.3, "best F1 on the dev split (2 examples)")
    assert choose_threshold([], m, char_prf)[0] == 0.5
    block = span_level(MetaEvalData(name="x", source="x", label_scheme="spans", examples=dev + test), [m])
    row = block["rows"][0]
    assert row["span"]["threshold"] == 0.3 and row["span"]["recall"] == 0.5  # t2 missed: 0.6 > 0.3
    assert row["span"]["n_test"] == 2 and "dev split" in row["span"]["threshold_source"]
    only_test = span_level(MetaEvalData(name="x", source="x", label_scheme="spans", examples=test), [m])["rows"][0]
    assert only_test["span"]["threshold"] == 0.5 and "no dev split" in only_test["span"]["threshold_source"]


def test_q2_results_give_spans_and_q2_without_nli_merges_by_f1():
    q = QuestionResult("Paris", "q?", "Paris", "Rome", "span", 0.2, "entailment", 1.0, start=0, end=5)
    res = ResponseResult(0, "scored", 1.0, 0.2, 1, questions=[q], spans=[Span(0, 5, "Paris", 1.0, "supported")])
    fallback = ResponseResult(1, "fallback", 0.5, 0.5, spans=[], questions=[])
    full, no_nli = metrics_from_results(["a", "b"], [res, fallback], source="t", with_nli=None)
    assert full.spans == {"a": [(0, 5, 1.0)], "b": []} and no_nli.spans == {"a": [(0, 5, 0.2)], "b": []}


def test_ragtruth_labels_and_halludial_quotes_are_the_gold_spans(tmp_path):
    folder = tmp_path / "rt"
    folder.mkdir()
    (folder / "source_info.jsonl").write_text(json.dumps({"source_id": "s", "task_type": "QA",
                                                          "source_info": "The museum closes at 6 pm."}) + "\n")
    rows = [{"id": "1", "source_id": "s", "labels": [{"start": 21, "end": 25, "text": "9 pm"}], "split": "train",
             "response": "The museum closes at 9 pm."},
            {"id": "2", "source_id": "s", "labels": [], "split": "test", "response": "It closes at 6 pm."},
            {"id": "3", "source_id": "s", "labels": [{"start": 5, "end": 99}], "split": "test", "response": "Late."}]
    (folder / "response.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    data = load_ragtruth(folder)
    assert [(e.spans, e.split) for e in data.examples] == [(((21, 25),), "dev"), ((), "test"), (None, "test")]
    assert "spans" in data.experiments
    assert quoted_spans("It is about 80 metres tall.", 'Yes. The hallucination lies in "80 Metres".') == ((12, 21),)
    assert quoted_spans("It is tall.", "Yes. “80 metres” is wrong.") is None
    path = tmp_path / "spontaneous_train.json"
    path.write_text(json.dumps([
        {"dialogue_id": 0, "knowledge": "k", "dialogue_history": "h", "turn": 1, "response": "It is 80 metres tall.",
         "target": 'Yes. The hallucination lies in "80 metres".'},
        {"dialogue_id": 0, "knowledge": "k", "dialogue_history": "h", "turn": 2, "response": "Fine.",
         "target": "No."}]))
    hd = load_halludial(path)
    assert [(e.spans, e.split) for e in hd.examples] == [(((6, 15),), "dev"), ((), "dev")]


def test_the_experiment_runs_and_prints_its_thresholds_source():
    exs = [ex("d1", [(0, 5)], "dev"), ex("d2", [], "dev"), ex("t1", [(0, 5)]), ex("t2", [])]
    m = MetricScores("Q2", {e.id: 0.5 for e in exs}, "test", spans={
        "d1": [(0, 5, 0.0)], "d2": [(0, 5, 1.0)], "t1": [(0, 5, 0.0)], "t2": [(0, 5, 1.0)]})
    run = run_meta_eval(MetaEvalData(name="x", source="x", label_scheme="spans", examples=exs), [m],
                        MetaEvalOptions(experiments=("spans",)))
    row = run.report["spans"]["rows"][0]
    assert row["span"]["f1"] == 1.0 and row["example"]["f1"] == 1.0
    text = to_markdown(run.report)
    assert "| Q2 | character | 2 | 0 | 100.0 | 100.0 | 100.0 | 0 | best F1 on the dev split (2 examples) |" in text
    plain = run_meta_eval(MetaEvalData(name="x", source="x", label_scheme="spans", examples=[ex("a", None)]), [m],
                          MetaEvalOptions(experiments=("spans",)))
    assert "spans" not in plain.report and "locates no hallucinated span" in plain.report["skipped"]["spans"]


def test_unscored_examples_are_counted_in_the_table_and_an_empty_cell_is_a_dash():
    # t3 has no spans (its row errored, e.g. over the response budget): counted in the table itself
    exs = [ex("t1", [(0, 5)]), ex("t2", []), ex("t3", [(0, 5)]), ex("u", None)]
    m = MetricScores("Q2", {"t1": 0.1, "t2": 0.9}, "test", spans={"t1": [(0, 5, 0.0)], "t2": [(0, 5, 1.0)],
                                                                   "u": [(0, 5, 0.0)]})
    run = run_meta_eval(MetaEvalData(name="x", source="x", label_scheme="spans", examples=exs), [m],
                        MetaEvalOptions(experiments=("spans",)))
    assert run.report["spans"]["rows"][0]["n_test_unscored"] == 1
    assert "| Q2 | character | 2 | 1 | 100.0 | 100.0 | 100.0 |" in to_markdown(run.report)
    # no test example at the character level: empty cells, not 0.0
    only_dev = [ex("d1", [(0, 5)], "dev"), ex("d2", [], "dev"), ex("t", None)]
    m2 = MetricScores("Q2", {}, "test", spans={"d1": [(0, 5, 0.0)], "d2": [(0, 5, 1.0)], "t": [(0, 5, 0.0)]})
    run = run_meta_eval(MetaEvalData(name="x", source="x", label_scheme="spans", examples=only_dev), [m2],
                        MetaEvalOptions(experiments=("spans",)))
    row = run.report["spans"]["rows"][0]
    assert row["span"]["n_test"] == 0 and row["span"]["f1"] is None
    assert "| Q2 | character | 0 | 0 | – | – | – |" in to_markdown(run.report)


def test_a_fallback_response_is_decided_by_its_score_at_the_same_threshold():
    exs = [ex("f1", [(0, 2)]), ex("f2", []), ex("s", [(0, 5)])]
    m = MetricScores("Q2", {"f1": 0.2, "f2": 0.9, "s": 0.3}, "test",
                     questions={"f1": QuestionStats(0, None, True), "f2": QuestionStats(0, None, True),
                                "s": QuestionStats(1, None, False)},
                     spans={"f1": [], "f2": [], "s": [(0, 5, 0.3)]})
    # f1 (fallback, 0.2 <= 0.5) is flagged, f2 (0.9) is not, s by its span
    e = example_prf(exs, m, 0.5)
    assert (e["n_predicted"], e["n_gold"], e["precision"], e["recall"]) == (2, 2, 1.0, 1.0)
    # the same threshold as the spans': at 0.25, f1 still flagged, s not
    assert example_prf(exs, m, 0.25)["n_predicted"] == 1
    # without the fallback flag an empty span list flags nothing (the overlap baseline's clean responses)
    plain = MetricScores("Overlap", {"f1": 0.2}, "test", spans={"f1": [], "f2": [], "s": [(0, 5, 0.3)]})
    assert example_prf(exs, plain, 0.5)["n_predicted"] == 1
    assert choose_threshold([ex("f1", [(0, 2)], "dev")], m, example_prf)[0] == 0.2


def test_the_response_budget_is_raised_for_the_spans_experiment():
    from q2_plugins.metaeval.runner import MetaEvalSettings, _span_budget
    from q2_plugins.metric.config import Q2Config

    long = [Example(id="a", response="x" * 2500, knowledge="k", consistent=True, label="?", spans=())]
    notes: list = []
    spans = MetaEvalOptions(experiments=("spans",))
    raised = _span_budget(MetaEvalSettings(dataset="ragtruth", data="x", compute=True), spans, long, notes)
    assert raised.max_response_chars == 2500 and "raised from its default 2000 to 2500" in notes[0]
    # a budget the user set, another experiment, or no computing: left as it is
    mine = MetaEvalSettings(dataset="ragtruth", data="x", compute=True, config=Q2Config(max_response_chars=900))
    assert _span_budget(mine, spans, long, []).max_response_chars == 900
    other = MetaEvalOptions(experiments=("response",))
    assert _span_budget(MetaEvalSettings(dataset="ragtruth", data="x", compute=True), other, long, []
                        ).max_response_chars == 2000
