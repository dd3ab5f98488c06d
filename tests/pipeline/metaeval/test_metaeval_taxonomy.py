"""Meta-evaluation of BEGIN labels (taxonomy experiment) and of stress pairs (stress experiment): statistics, loader,
report, CLI; with tiny models, Q² labels and scores computed on the fly."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.datasets.begin import load_begin
from q2_plugins.datasets.common import DataFormatError
from q2_plugins.datasets.stress import load_stress
from q2_plugins.metaeval.experiments import BEGIN_PAPER_BASELINE, MetaEvalOptions, run_meta_eval
from q2_plugins.metaeval.report import to_markdown
from q2_plugins.metaeval.scores import MetricScores, metrics_from_results
from q2_plugins.metaeval.stats import classification_metrics
from q2_plugins.metric.results import ResponseResult, ResponseStatus


def run_json(capsys, *argv) -> dict:
    assert main(["meta-eval", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_classification_metrics():
    gold = ["a", "a", "b", "b", "c"]
    pred = ["a", "b", "b", "b", "a"]
    m = classification_metrics(gold, pred, ["a", "b", "c", "d"])
    assert m["accuracy"] == 3 / 5
    f1 = {"a": 2 * 0.5 * 0.5 / 1.0, "b": 2 * (2 / 3) * 1.0 / (2 / 3 + 1.0), "c": 0.0}  # "d" is absent: not averaged
    assert m["macro_f1"] == pytest.approx(sum(f1.values()) / 3)
    assert m["confusion"] == [[1, 1, 0, 0], [0, 2, 0, 0], [1, 0, 0, 0], [0, 0, 0, 0]]
    assert m["per_label"]["c"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    with pytest.raises(ValueError, match=r"Labels \['x'\] are not among"):
        classification_metrics(["a"], ["x"], ["a", "b"])


# -- taxonomy ------------------------------------------------------------------------------------------------------
BEGIN_ROWS = [("entailment", "he was an american singer."), ("hallucination", "he loved dogs a lot."),
              ("generic", "that's cool."), ("off-topic", "i like pizza."), ("contradiction", "he was british.")]


@pytest.fixture()
def begin_tsv(tmp_path) -> Path:
    path = tmp_path / "begin.tsv"
    lines = ["evidence\tprevious turn\tresponse\tgold label\tcoarse label\tfull label set"]
    for label, response in BEGIN_ROWS:
        lines.append(f"elvis presley was an american singer.\twho was he?\t{response}\t{label}\tx\ty")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_taxonomy_experiment_and_report(begin_tsv):
    data = load_begin(begin_tsv)
    ids = [ex.id for ex in data.examples]
    oracle = MetricScores("oracle", {}, "test", labels={ex.id: ex.label for ex in data.examples})
    lazy = MetricScores("always entailment", {i: 1.0 for i in ids}, "test", labels={i: "entailment" for i in ids[:4]})
    run = run_meta_eval(data, [oracle, lazy], MetaEvalOptions(experiments=("response", "taxonomy", "stress")))
    block = run.report["taxonomy"]["metrics"]
    assert block["oracle"]["five_way"]["accuracy"] == 1.0 and block["oracle"]["three_way"]["macro_f1"] == 1.0
    assert (block["always entailment"]["n"], block["always entailment"]["n_missing"]) == (4, 1)
    assert block["always entailment"]["five_way"]["accuracy"] == 0.25
    assert block["always entailment"]["three_way"]["accuracy"] == 0.25  # neutral x3 wrong
    assert list(run.report["response_level"]["metrics"]) == ["always entailment"]  # labels only: no score tables
    assert "stress" in run.report["skipped"]
    text = to_markdown(run.report)
    assert "| oracle | 5 | 100.00% | 100.0 | 100.00% | 100.0 |" in text
    assert f"| {BEGIN_PAPER_BASELINE['name']} |  | 71.00% | 52.6 | 46.40% | 33.5 |" in text
    assert "| **generic** | 0 | 0 | 1 | 0 | 0 |" in text  # the oracle's confusion matrix
    assert "| oracle | test | 0/5 (5 labelled) |" in text


def test_labels_come_with_q2_results():
    results = [ResponseResult(0, ResponseStatus.SCORED, score=1.0, score_no_nli=0.5, label="entailment"),
               ResponseResult(1, ResponseStatus.NO_VALID_QUESTION, label="generic"),
               ResponseResult(2, ResponseStatus.ERROR, error="boom")]
    full, no_nli = metrics_from_results(["a", "b", "c"], results, source="test")
    assert full.labels == {"a": "entailment", "b": "generic"} and no_nli.labels == {}
    assert full.values == {"a": 1.0}  # a label without a score: still labelled, never scored
    (only,) = metrics_from_results(["a", "b", "c"], results, source="test", with_nli=False)
    assert only.name == "Q2 w/o NLI" and only.labels == full.labels


def test_taxonomy_asked_on_data_without_five_way_labels_stops_before_any_model(shared_data, begin_tsv, tmp_path,
                                                                               capsys):
    v2 = shared_data / "begin_v2_dev" / "wow" / "begin_dev_wow.tsv"
    no_model = str(tmp_path / "no-such-model")  # loading it would fail differently: no model is loaded
    code = main(["meta-eval", "--dataset", "begin", "--data", str(v2), "--experiments", "response,taxonomy",
                 "--compute", "--qg-model", no_model, "--qa-model", no_model, "--nli-model", no_model])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert err.startswith("q2 meta-eval: error: --experiments: the taxonomy experiment needs BEGIN's five-way labels "
                          "(entailment, hallucination, generic, off-topic, contradiction) and begin_dev_wow.tsv has "
                          "none (its labels: Fully attributable, Not fully attributable); BEGIN v1 has them")
    assert "q2_plugins/data/begin_dev" in err and "FaithDial" in err
    # the inputs it would export say the taxonomy reads their BEGIN labels: refused too
    assert main(["meta-eval", "--dataset", "begin", "--data", str(v2), "--experiments", "taxonomy",
                 "--export-inputs", str(tmp_path / "inputs.jsonl")]) == 2
    assert "five-way" in capsys.readouterr().err and not (tmp_path / "inputs.jsonl").exists()
    # data with the five labels: exported; BEGIN v2 without taxonomy asked for: taxonomy skipped as before
    assert main(["meta-eval", "--dataset", "begin", "--data", str(begin_tsv), "--experiments", "taxonomy",
                 "--export-inputs", str(tmp_path / "inputs.jsonl")]) == 0
    assert "the taxonomy experiment reads their BEGIN labels" in capsys.readouterr().out
    report = run_json(capsys, "--dataset", "begin", "--data", str(v2), "--baselines", "overlap", "--reps", "10")
    assert "five-way" in report["skipped"]["taxonomy"]


# -- stress pairs ----------------------------------------------------------------------------------------------
def pair(source, method, response, knowledge, new_response=None, new_knowledge=None, expected="contradiction"):
    return {"id": f"{source}:{method}", "source_id": source, "method": method, "expected_label": expected,
            "original_response": response, "original_knowledge": knowledge,
            "perturbed_response": new_response or response, "perturbed_knowledge": new_knowledge or knowledge}


PAIRS = [
    pair("0", "negation", "rome is old.", "rome is very old.", new_response="rome is not old."),
    pair("0", "random_pairing", "rome is old.", "rome is very old.", new_knowledge="cats purr.",
         expected="off-topic"),
    pair("1", "negation", "paris is big.", "paris is a big city.", new_response="paris is not big."),
]


@pytest.fixture()
def stress_file(tmp_path) -> Path:
    path = tmp_path / "pairs.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    return path


def test_load_stress(stress_file, tmp_path):
    data = load_stress(stress_file)
    assert [ex.id for ex in data.examples] == ["original:0", "0:negation", "0:random_pairing", "original:1",
                                               "1:negation"]
    assert [ex.subset for ex in data.examples] == ["original", "negation", "random_pairing", "original", "negation"]
    assert data.summary()["pairs_by_method"] == {"negation": 2, "random_pairing": 1}
    bad = tmp_path / "bad.jsonl"
    for rows, message in [
        ([{"method": "negation"}], "no field(s) ['original_response'"),
        ([{**PAIRS[0], "expected_label": "wrong"}], "expected_label 'wrong' is not one of"),
        ([PAIRS[0], {**PAIRS[2], "source_id": "0"}], "source_id '0' names two different originals"),
        ([PAIRS[0], PAIRS[0]], "duplicate example id"),
    ]:
        bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
        with pytest.raises(DataFormatError, match=re.escape(message)):
            load_stress(bad)


def test_stress_experiment_from_a_scores_file(stress_file, tmp_path, capsys):
    data = ["--dataset", "stress", "--data", str(stress_file)]
    inputs = tmp_path / "inputs.jsonl"
    assert main(["meta-eval", *data, "--export-inputs", str(inputs), "--experiments", "response,stress"]) == 0
    capsys.readouterr()
    # stand-in for q2 score: originals 0.9, negations 0.2 (labelled contradiction), the random pairing 0.9
    value = {"original:0": 0.9, "original:1": 0.9, "0:negation": 0.2, "1:negation": 0.9, "0:random_pairing": 0.9}
    label = {"0:negation": "contradiction", "1:negation": "entailment", "0:random_pairing": "hallucination"}
    scores = tmp_path / "scores.jsonl"
    with scores.open("w") as f:
        for i, row in enumerate(json.loads(line) for line in inputs.read_text().splitlines()):
            f.write(json.dumps({"row": i, "id": row["id"], "index": i, "status": "scored", "score": value[row["id"]],
                                "score_no_nli": value[row["id"]], "num_questions": 1, "num_candidates": 1,
                                "used_fallback": False, "fallback_label": None, "error": None,
                                "label": label.get(row["id"], "entailment"), "label3": None,
                                "label_reason": "scripted"}) + "\n")
    report = run_json(capsys, *data, "--scores", str(scores), "--baselines", "overlap", "--experiments", "stress")
    rows = {r["method"]: r for r in report["stress"]["rows"]}
    assert rows["negation"]["scores"]["Q2"] == {"n": 2, "above": 0.5, "ties": 0.5, "below": 0.0,
                                                "mean_original": 0.9, "mean_perturbed": 0.55}
    assert rows["random_pairing"]["scores"]["Q2"]["ties"] == 1.0
    assert rows["random_pairing"]["scores"]["Overlap"]["above"] == 1.0  # "cats purr." shares nothing
    assert rows["negation"]["scores"]["Overlap"]["ties"] == 1.0  # "not" is a stop word
    assert rows["negation"]["labels"]["Q2"]["expected_label"] == 0.5
    assert rows["random_pairing"]["labels"]["Q2"] == {"n": 1, "expected_label": 0.0, "expected_label3": 1.0,
                                                      "original_entailment": 1.0}
    assert rows["all"]["n_pairs"] == 3 and "Text rules" in rows["all"]["labels"]
    assert main(["meta-eval", *data, "--scores", str(scores), "--baselines", "none", "--experiments", "stress",
                 "--no-text-rules"]) == 0
    text = capsys.readouterr().out
    assert "| negation | 2 | 50.00% (ties 50.00%, n=2) |" in text and "Text rules" not in text


# -- with tiny random-weight models: the machinery, not the numbers ----------------------------------------------
@pytest.mark.slow
def test_perturb_then_compute_q2_on_the_stress_pairs(tmp_path, capsys):
    from q2_plugins.backends.hf.tiny import build_all

    tiny = build_all(tmp_path / "models")
    src = tmp_path / "dialogue.jsonl"
    src.write_text(json.dumps({"response": "Rome was built by Romulus.",
                               "knowledge": "Rome was built by Romulus in 753 BC."}) + "\n"
                   + json.dumps({"response": "Paris is big.", "knowledge": "Paris is a big city."}) + "\n")
    pairs = tmp_path / "pairs.jsonl"
    assert main(["perturb", "--input", str(src), "--output", str(pairs), "--methods", "negation,inversion"]) == 0
    capsys.readouterr()
    models = ["--qg-model", str(tiny["qg"]), "--qa-model", str(tiny["qa"]), "--nli-model", str(tiny["nli"]),
              "--qg-max-length", "8", "--no-progress"]
    report = run_json(capsys, "--dataset", "stress", "--data", str(pairs), "--compute", "--baselines", "none",
                      "--experiments", "stress", *models)
    rows = {r["method"]: r for r in report["stress"]["rows"]}
    assert rows["negation"]["n_pairs"] == 2 and rows["inversion"]["n_pairs"] == 1
    assert rows["all"]["scores"]["Q2"]["n"] == 3  # every pair scored on both sides
    assert rows["all"]["labels"]["Q2"]["n"] == 3  # and every perturbation labelled by Q²'s own rules
