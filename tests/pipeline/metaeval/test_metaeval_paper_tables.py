"""The paper's Topical-Chat (Table 6) and Dialogue NLI (Table 5) experiments on small synthetic files written in
the public formats, the METEOR-style baseline, and baselines whose model cannot be loaded."""

from __future__ import annotations

import json

import numpy as np
import pytest

from q2_plugins.cli import main
from q2_plugins.datasets.common import DataFormatError
from q2_plugins.datasets.dnli import load_dnli
from q2_plugins.datasets.usr import load_usr
from q2_plugins.metaeval.baselines import MeteorBaseline, NLIBaseline, score_baselines
from q2_plugins.metaeval.paper_tables import dnli_accuracy, usr_correlation
from q2_plugins.metaeval.scores import q2_star_metric, read_scores_file
from q2_plugins.metric.components import NLILabel
from q2_plugins.metric.errors import ModelLoadError
from tests.fakes import FakeNLI

MODELS = ["Original Ground Truth", "Argmax Decoding", "Nucleus Decoding (p = 0.5)", "New Human Generated"]


def usr_file(tmp_path, no_fact="_nofact\n"):
    """Three contexts in tc_usr_data.json's format (invented texts); the second has no fact."""
    contexts = [
        ("the eiffel tower is 324 metres tall.", ["it is 324 metres tall.\n", "i like towers.\n",
                                                  "it is tall, about 300 metres.\n", "is it 324 metres tall?\n"],
         [[1, 1, 1], [0, 0, 0], [1, 0, 0], [1, 1, 0]]),
        (no_fact, ["football is fun.\n", "yes.\n", "no.\n", "ok.\n"], [[0, 0, 0]] * 4),
        ("jazz began in new orleans.", ["jazz began in new orleans.\n", "do you like music?\n",
                                        "jazz is from chicago.\n", "new orleans gave us jazz.\n"],
         [[1, 1, 1], [0, 0, 0], [0, 1, 0], [1, 1, 1]]),
    ]
    data = [{"context": "hi\nwhat do you know?\n", "fact": fact, "responses": [
        {"response": r, "model": m, "Understandable": [1, 1, 1], "Natural": [3, 2, 3], "Maintains Context": [3, 3, 2],
         "Engaging": [2, 2, 2], "Uses Knowledge": u, "Overall": [4, 3, 4]} for r, m, u in zip(resps, MODELS, uk)]}
        for fact, resps, uk in contexts]
    path = tmp_path / "tc_usr_data.json"
    path.write_text(json.dumps(data, indent=1))
    return path


def result_row(i, score, *, questions=None, status="scored", fallback=None, error=None):
    """One q2 score --explain output row; ``questions`` are (score, f1, knowledge answer kind)."""
    qs = [{"candidate": f"c{n}", "question": f"q{n}?", "response_answer": f"c{n}", "knowledge_answer": None,
           "knowledge_answer_kind": kind, "f1": f1, "nli_label": None, "score": s}
          for n, (s, f1, kind) in enumerate(questions or [])]
    return {"row": 0, "id": i, "index": 0, "status": status, "score": score, "score_no_nli": score,
            "num_questions": len(qs), "num_candidates": len(qs), "used_fallback": status == "fallback",
            "fallback_label": fallback, "error": error, "candidates": [q["candidate"] for q in qs],
            "questions": qs, "dropped": []}


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# -- USR / Topical-Chat ----------------------------------------------------------------------------------------------
def test_usr_loader_drops_no_fact_contexts(tmp_path):
    data = load_usr(usr_file(tmp_path))
    assert len(data.examples) == 8 and data.experiments == ("usr",)
    first = data.examples[0]
    assert (first.id, first.response, first.knowledge, first.subset) == (
        "usr:0:0", "it is 324 metres tall.", "the eiffel tower is 324 metres tall.", "Original Ground Truth")
    assert [ex.rating for ex in data.examples[:4]] == [1.0, 0.0, 1 / 3, 2 / 3]
    assert [ex.id for ex in data.examples[4:6]] == ["usr:2:0", "usr:2:1"]  # ids keep the file's indices
    assert data.notes == ["dropped 1 contexts whose fact is the no-fact marker '_nofact' (4 responses); "
                          "8 responses remain"]
    for marker in ("_nofact", " _NOFACT ", "no fact"):
        assert len(load_usr(usr_file(tmp_path, marker)).examples) == 8


@pytest.mark.parametrize("change, message", [
    (lambda d: d[0]["responses"][0].pop("Uses Knowledge"), "no field 'Uses Knowledge'"),
    (lambda d: d[0]["responses"][0].update({"Uses Knowledge": []}), "non-empty list of annotator ratings"),
    (lambda d: d[0].pop("fact"), "no field 'fact'"),
])
def test_usr_loader_errors(tmp_path, change, message):
    path = usr_file(tmp_path)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(DataFormatError, match=message):
        load_usr(path)


def usr_scores(tmp_path):
    """Q² results for the 8 responses: 5 scored from questions, 2 without a valid question, 1 error."""
    rows = [
        result_row("usr:0:0", 1.0, questions=[(1.0, 1.0, "span")]),
        result_row("usr:0:1", None, status="no_valid_question"),
        result_row("usr:0:2", 0.25, questions=[(0.5, 0.5, "span"), (0.0, 0.0, "no_answer")]),
        result_row("usr:0:3", 0.5, questions=[(0.5, 0.5, "span")]),
        result_row("usr:2:0", 0.9, questions=[(0.9, 0.9, "span")]),
        result_row("usr:2:1", None, status="no_valid_question"),
        result_row("usr:2:2", None, status="error", error="boom"),
        result_row("usr:2:3", 0.8, questions=[(0.8, 0.8, "span")]),
    ]
    return write_jsonl(tmp_path / "scores.jsonl", rows)


def test_usr_correlation_both_treatments(tmp_path, capsys):
    from scipy.stats import pearsonr, spearmanr

    path = usr_file(tmp_path)
    assert main(["meta-eval", "--dataset", "usr", "--data", str(path), "--scores", str(usr_scores(tmp_path)),
                 "--baselines", "bleu,meteor", "--reps", "300", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert set(report) >= {"usr"} and "response_level" not in report  # the dataset's default experiments
    rows = {(r["metric"], r["treatment"]): r for r in report["usr"]["rows"]}
    ratings = {"usr:0:0": 1, "usr:0:1": 0, "usr:0:2": 1 / 3, "usr:0:3": 2 / 3, "usr:2:0": 1, "usr:2:1": 0,
               "usr:2:3": 1}
    with_q = {"usr:0:0": 1.0, "usr:0:2": 0.25, "usr:0:3": 0.5, "usr:2:0": 0.9, "usr:2:3": 0.8}
    zero = {**with_q, "usr:0:1": 0.0, "usr:2:1": 0.0}  # the error stays out
    for treatment, values in (("with a valid question", with_q), ("no valid question = 0", zero)):
        row = rows[("Q2", treatment)]
        ids = [i for i in ratings if i in values]
        x, y = [values[i] for i in ids], [ratings[i] for i in ids]
        assert row["n"] == len(ids) and row["n_missing"] == 8 - len(ids)
        assert row["spearman"]["r"] == pytest.approx(spearmanr(x, y).statistic, abs=1e-12)
        assert row["spearman"]["p"] == pytest.approx(spearmanr(x, y).pvalue, abs=1e-12)
        assert row["pearson"]["r"] == pytest.approx(pearsonr(x, y).statistic, abs=1e-12)
        for name in ("spearman", "pearson"):
            assert row[name]["low"] <= row[name]["r"] <= row[name]["high"]
    # each unscored response with its reason: no valid question (left out by one treatment only), the row's error
    assert rows[("Q2", "with a valid question")]["unscored"] == {"no_valid_question": 2, "boom": 1}
    assert rows[("Q2", "no valid question = 0")]["unscored"] == {"boom": 1}
    assert rows[("BLEU", "as scored")]["unscored"] == {}
    assert ("Q2", "with fallback") not in rows  # no response was scored by the fallback
    assert rows[("BLEU", "as scored")]["n"] == rows[("METEOR-style", "as scored")]["n"] == 8
    assert [r["name"] for r in report["usr"]["reference"]][:2] == [
        "Q² (responses with a valid question, 258 of 312)", "Q² (no valid question = 0, 312)"]
    # the markdown table puts the paper's rows beside ours
    assert main(["meta-eval", "--dataset", "usr", "--data", str(path), "--scores", str(usr_scores(tmp_path)),
                 "--baselines", "none", "--reps", "50"]) == 0
    text = capsys.readouterr().out
    assert "| Q2 (with a valid question) | 5 (3 unscored: 2 no_valid_question, 1 boom) |" in text
    assert "| Q2 (no valid question = 0) | 7 (1 unscored: 1 boom) |" in text
    assert "| paper: Q² (no valid question = 0, 312) |  | 0.6773 |  | 0.6162 |  |" in text
    assert "not checked here against the paper's arXiv and EMNLP versions" in text


def test_correlation_bootstrap_is_seeded(tmp_path):
    data = load_usr(usr_file(tmp_path))
    metrics = read_scores_file(usr_scores(tmp_path), data.by_id())
    a = usr_correlation(data, metrics, reps=200, seed=1)
    assert a == usr_correlation(data, metrics, reps=200, seed=1)
    assert a != usr_correlation(data, metrics, reps=200, seed=2)


# -- Dialogue NLI --------------------------------------------------------------------------------------------------
DNLI_ROWS = [
    {"id": "d1", "sentence1": "i have a dog .", "sentence2": "my dog is called rex .", "label": "positive"},
    {"id": "d2", "sentence1": "i live in paris .", "sentence2": "paris is my home .", "label": "positive"},
    {"id": "d3", "sentence1": "i am a nurse .", "sentence2": "i am a pilot .", "label": "negative"},
    {"id": "d4", "sentence1": "i am 20 .", "sentence2": "i am 60 years old .", "label": "negative"},
    {"id": "d5", "sentence1": "i like tea .", "sentence2": "i have a cat .", "label": "neutral"},
    {"id": "d6", "sentence1": "i swim .", "sentence2": "swimming is what i do .", "label": "positive"},
    {"id": "d7", "sentence1": "i hate rain .", "sentence2": "i love rain .", "label": "negative"},
]
SPAN, NONE = "span", "no_answer"


def dnli_scores(tmp_path):
    rows = [
        result_row("d1", 1.0, questions=[(1.0, 1.0, SPAN)]),
        # one answered question and nine the knowledge cannot answer: Q² 0.1 (<= 0.1: contradiction), Q²* 1.0
        result_row("d2", 0.1, questions=[(1.0, 1.0, SPAN)] + [(0.0, 0.0, NONE)] * 9),
        result_row("d3", 0.0, questions=[(0.0, 0.0, NONE), (0.0, 0.2, SPAN)]),
        result_row("d4", 1 / 3, questions=[(1.0, 1.0, SPAN), (0.0, 0.0, NONE), (0.0, 0.0, NONE)]),
        result_row("d5", 0.5, questions=[(0.5, 0.5, SPAN)]),
        result_row("d6", 1.0, status="fallback", fallback="entailment"),
        result_row("d7", 0.0, status="fallback", fallback="contradiction"),
    ]
    return write_jsonl(tmp_path / "dnli_scores.jsonl", rows)


def test_dnli_table_hand_computed(tmp_path, capsys):
    data_path = write_jsonl(tmp_path / "dnli.jsonl", DNLI_ROWS)
    assert main(["meta-eval", "--dataset", "dnli", "--data", str(data_path), "--scores", str(dnli_scores(tmp_path)),
                 "--baselines", "none", "--format", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    block = report["dnli"]
    assert (block["threshold"], block["n_pairs"], block["n_neutral_left_out"]) == (0.1, 6, 1)
    acc = {(r["metric"], r["treatment"]): (r["n"], r["accuracy"]) for r in block["rows"]}
    # gold: d1 d2 d6 entailment, d3 d4 d7 contradiction; predicted entailment when score > 0.1
    # Q2 with questions: d1 ok, d2 0.1 -> contradiction (wrong), d3 ok, d4 1/3 -> entailment (wrong): 2 of 4
    assert acc[("Q2", "with a valid question")] == (4, 2 / 4)
    # no valid question = 0: d6 -> contradiction (wrong), d7 -> contradiction (right): 3 of 6
    assert acc[("Q2", "no valid question = 0")] == (6, 3 / 6)
    # with the fallback: d6 1.0 (right), d7 0.0 (right): 4 of 6
    assert acc[("Q2", "with fallback")] == (6, 4 / 6)
    # Q²*: d2 -> 1.0 (right), d4 -> 1.0 (still wrong), d3 keeps its answered question at 0 (right)
    assert acc[("Q2*", "with a valid question")] == (4, 3 / 4)
    assert acc[("Q2*", "no valid question = 0")] == (6, 4 / 6)
    assert acc[("Q2*", "with fallback")] == (6, 5 / 6)
    assert block["coverage"]["Q2"] == {"n": 6, "with_question": 4, "coverage": 4 / 6}
    why = {(r["metric"], r["treatment"]): r["unscored"] for r in block["rows"]}
    # d6 and d7 were scored by the fallback: left out of "with a valid question" for having none
    assert why[("Q2", "with a valid question")] == why[("Q2*", "with a valid question")] == {"no_valid_question": 2}
    assert why[("Q2", "no valid question = 0")] == why[("Q2", "with fallback")] == {}
    assert "dnli-thr:0.1(<=contra)" in report["signature"] and "response_level" not in report
    assert main(["meta-eval", "--dataset", "dnli", "--data", str(data_path), "--scores", str(dnli_scores(tmp_path)),
                 "--baselines", "none", "--dnli-threshold", "0.05", "--output-dir", str(tmp_path / "out"),
                 "--no-plots"]) == 0
    text = capsys.readouterr().out
    row = "| Q2 (with a valid question) | 4 (2 unscored: 2 no_valid_question) | 75.00% |"  # d2 (0.1) now above
    assert row in text and row in (tmp_path / "out" / "report.md").read_text()
    saved = json.loads((tmp_path / "out" / "report.json").read_text())["dnli"]["rows"]
    assert {(r["metric"], r["treatment"]): r["unscored"] for r in saved} == why
    assert "| paper: Q²* + NLI |  | 69.62% |  |  |" in text and "paper: 68.46%" in text


def test_q2_star_from_recorded_questions_matches_the_rule():
    from q2_plugins.metaeval.scores import MetricScores, QuestionStats, RecordedQuestionScore

    q = [RecordedQuestionScore(1.0, 1.0, False), RecordedQuestionScore(0.4, 0.4, False),
         RecordedQuestionScore(0.0, 0.0, True)]
    m = MetricScores("Q2", {"a": 1.4 / 3, "b": 0.5}, "test", questions={
        "a": QuestionStats(3, 1, False), "b": QuestionStats(0, 0, True)}, per_question={"a": q})
    star = q2_star_metric(m)
    assert star.name == "Q2*" and star.values == {"a": 0.7, "b": 0.5}  # (1 + 0.4) / 2; fallback kept
    assert star.questions["a"].num_questions == 2
    m.per_question = {}  # written without --explain: no Q²*
    assert q2_star_metric(m) is None


def test_nli_only_baseline_on_dnli(tmp_path):
    data = load_dnli(write_jsonl(tmp_path / "dnli.jsonl", DNLI_ROWS))
    E, N, C = NLILabel.ENTAILMENT, NLILabel.NEUTRAL, NLILabel.CONTRADICTION
    labels = {"d1": E, "d2": N, "d3": C, "d4": N, "d5": N, "d6": C, "d7": C}
    nli = FakeNLI({(ex.knowledge, ex.response): labels[ex.id] for ex in data.examples})
    (metric,) = score_baselines([NLIBaseline(nli)], data.examples)
    block = dnli_accuracy(data, [metric], threshold=0.1)
    (row,) = block["rows"]
    # neutral scores 0.5 > 0.1: entailment. d1 ok, d2 ok, d3 ok, d4 wrong, d6 wrong, d7 ok
    assert (row["metric"], row["treatment"], row["n"], row["accuracy"]) == ("E2E NLI", "as scored", 6, 4 / 6)
    assert block["coverage"] == {}


# -- METEOR-style baseline -------------------------------------------------------------------------------------------
def test_meteor_style_hand_computed():
    m = MeteorBaseline()
    # three tokens, all matched ("cats" by its Porter stem), one chunk: 1 - 0.5 * (1 / 3) ** 3
    # "big dog" vs "large dog": no synonyms, so only "dog": P = R = 1/2, Fmean = 1/2, one chunk of one match,
    # penalty 0.5 * (1 / 1) ** 3: 0.25
    got = m.score([("the cats sat", "The cat sat"), ("big dog", "large dog"), ("...", "x")])
    assert got[0] == pytest.approx(1 - 0.5 / 27, abs=1e-12)
    assert got[1] == pytest.approx(0.25, abs=1e-12)
    assert got[2] == 0.0
    assert "match:exact+porter-stem|" in m.signature


def test_meteor_wordnet_needs_its_data(monkeypatch):
    import nltk

    def missing(name, *args, **kwargs):
        raise LookupError(name)

    monkeypatch.setattr(nltk.data, "find", missing)
    with pytest.raises(ModelLoadError, match="needs NLTK's WordNet data"):
        MeteorBaseline("wordnet")


# -- baselines without their weights -------------------------------------------------------------------------------
@pytest.mark.parametrize("flags, message", [
    (["--baselines", "bertscore", "--bertscore-model", "/nonexistent/model"], "Cannot load the BERTScore model"),
    (["--baselines", "bertscore", "--bertscore-model", "/nonexistent/model", "--bertscore-num-layers", "2"],
     "Cannot load the BERTScore model"),
    (["--baselines", "nli", "--nli-model", "/nonexistent/nli"], "Cannot load the NLI model"),
    (["--baselines", "overlap", "--spacy-model", "en_core_web_zz"], "Cannot load the spaCy pipeline"),
    (["--baselines", "meteor", "--meteor-synonyms", "wordnet"], None),
])
def test_baseline_without_weights_fails_with_one_clear_line(tmp_path, monkeypatch, capsys, flags, message):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data_path = write_jsonl(tmp_path / "dnli.jsonl", DNLI_ROWS)
    if message is None:  # WordNet data: not installed here, but a machine may have it
        import nltk

        try:
            nltk.data.find("corpora/wordnet")
        except LookupError:
            message = "METEOR with WordNet synonyms needs NLTK's WordNet data"
        else:
            assert main(["meta-eval", "--dataset", "dnli", "--data", str(data_path), *flags]) == 0
            return
    code = main(["meta-eval", "--dataset", "dnli", "--data", str(data_path), *flags])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith(f"q2 meta-eval: error: {message}") and "Traceback" not in err


def test_bertscore_load_error_is_a_model_load_error():
    from q2_plugins.metaeval.baselines import BERTScoreBaseline

    with pytest.raises(ModelLoadError, match=r"\(settings bertscore_model / bertscore_num_layers\)") as e:
        BERTScoreBaseline("/nonexistent/model").score([("a", "b")])
    assert e.value.setting == "bertscore_model / bertscore_num_layers"


def test_numpy_arrays_in_rows_are_plain():
    # the report is JSON: every figure a plain float
    rng = np.random.default_rng(0)
    from q2_plugins.metaeval.stats import correlations

    out = correlations([0.1, 0.5, 0.2, 0.9], [0, 1, 0, 1], reps=20, rng=rng)
    json.dumps(out)
    assert out["n"] == 4 and isinstance(out["spearman"]["r"], float)


@pytest.mark.slow
def test_dnli_and_usr_computed_with_tiny_models(tiny_models, tmp_path, capsys):
    """--compute on both experiments (random weights: the machinery, not the numbers); Q²* derived from the
    computed questions equals Q²* computed with --discard-unanswerable."""
    models = ["--qg-model", str(tiny_models["qg"]), "--qa-model", str(tiny_models["qa"]), "--nli-model",
              str(tiny_models["nli"]), "--qg-max-length", "12", "--no-progress"]
    data = ["--dataset", "dnli", "--data", str(write_jsonl(tmp_path / "dnli.jsonl", DNLI_ROWS))]
    assert main(["meta-eval", *data, "--compute", "--baselines", "nli", "--format", "json", *models]) == 0
    report = json.loads(capsys.readouterr().out)
    names = {r["metric"] for r in report["dnli"]["rows"]}
    assert {"Q2", "Q2*", "E2E NLI"} <= names and "Q2" in report["dnli"]["coverage"]
    derived = {(r["metric"], r["treatment"]): r for r in report["dnli"]["rows"] if r["metric"] == "Q2*"}
    assert main(["meta-eval", *data, "--compute", "--discard-unanswerable", "--baselines", "none", "--format",
                 "json", *models]) == 0
    star = json.loads(capsys.readouterr().out)
    for r in star["dnli"]["rows"]:
        if r["metric"] == "Q2":
            assert r["accuracy"] == derived[("Q2*", r["treatment"])]["accuracy"]
    assert "discard-unanswerable" in star["metrics"][0]["signature"]
    usr = ["--dataset", "usr", "--data", str(usr_file(tmp_path)), "--reps", "50"]
    assert main(["meta-eval", *usr, "--compute", "--baselines", "meteor", "--format", "json", *models]) == 0
    rows = json.loads(capsys.readouterr().out)["usr"]["rows"]
    assert {r["treatment"] for r in rows if r["metric"] == "Q2"} >= {"with a valid question", "no valid question = 0"}
