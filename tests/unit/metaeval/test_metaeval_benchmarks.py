"""LLM-AggreFact, RAGTruth and HalluDial loaders on small synthetic files in their published formats
(tests/data/metaeval_formats), balanced accuracy per data set at a dev-tuned and a fixed threshold (golden values
worked out by hand below), and the TRUE-style table of published figures beside ours."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from q2_plugins.datasets.common import DataFormatError
from q2_plugins.datasets.registry import load_dataset
from q2_plugins.metaeval import stats

FORMATS = Path(__file__).resolve().parents[2] / "data" / "metaeval_formats"

# invented scores: per data set (dev consistent, dev inconsistent, test consistent, test inconsistent)
SCORES = {"dev": [0.9, 0.7, 0.3, 0.6, 0.45, 0.8, 0.2, 0.3], "test": [0.65, 0.8, 0.55, 0.4, 0.4, 0.9, 0.35, 0.1]}


def scores_file(tmp_path):
    path = tmp_path / "minicheck_scores.csv"
    path.write_text("id,score\n" + "".join(f"aggrefact:{split}:{i},{s}\n" for split, values in SCORES.items()
                                           for i, s in enumerate(values)))
    return path


def test_llm_aggrefact_fixture():
    data = load_dataset("llm-aggrefact", FORMATS / "llm_aggrefact")
    s = data.summary()
    assert (s["n"], s["n_consistent"], s["n_inconsistent"]) == (16, 8, 8)
    assert s["subsets"] == {"AggreFact-CNN": 8, "WiCE": 8}
    assert sum(ex.split == "dev" for ex in data.examples) == 8
    assert [r.describe() for r in data.skipped] == ["test.jsonl row 8: unknown label '2'",
                                                    "test.jsonl row 9: empty knowledge"]
    ex = data.by_id()["aggrefact:test:0"]
    assert ex.split == "test" and data.by_id()["aggrefact:dev:0"].split == "dev"
    assert (ex.response, ex.consistent, ex.subset) == ("The bridge carries a railway.", True, "AggreFact-CNN")


def test_ragtruth_fixture():
    data = load_dataset("ragtruth", FORMATS / "ragtruth")
    assert [(ex.id, ex.consistent, ex.subset, ex.split) for ex in data.examples] == [
        ("ragtruth:1", True, "QA", "dev"), ("ragtruth:2", False, "QA", "dev"), ("ragtruth:3", True, "Summary", "dev"),
        ("ragtruth:4", False, "Summary", "test"), ("ragtruth:5", True, "Data2txt", "test")]
    qa = data.examples[0]
    assert qa.knowledge.startswith("passage 1: The museum closes") and qa.history == "when does the museum close"
    assert json.loads(data.examples[4].knowledge)["city"] == "Springfield"  # a data-to-text record, as JSON
    assert [r.describe() for r in data.skipped] == ["line 6: quality not good 'truncated'",
                                                    "line 7: malformed labels 'None'", "line 8: unknown source_id 's9'"]
    assert data.notes[0].startswith("quality: only responses of quality 'good', as RAGTruth's own evaluation (1 left")
    assert data.notes[1] == "labels: all 3 cut exactly their text" and not data.flagged
    every = load_dataset("ragtruth", FORMATS / "ragtruth", quality="all")
    six = every.examples[-1]
    assert six.id == "ragtruth:6" and [six.response[s:e] for s, e in six.spans] == ["Shelbyville"]
    assert every.notes[0] == ("quality: every response kept (quality 'all'), 1 with quality issues {'truncated': 1}; "
                              "RAGTruth's own evaluation keeps only 'good' (the default)")
    with pytest.raises(DataFormatError, match="response.jsonl and source_info.jsonl"):
        load_dataset("ragtruth", FORMATS / "llm_aggrefact")


def test_ragtruth_line_that_is_not_json(tmp_path):
    import shutil

    folder = tmp_path / "ragtruth"
    shutil.copytree(FORMATS / "ragtruth", folder)
    with (folder / "response.jsonl").open("a") as f:
        f.write("{not json\n")
    data = load_dataset("ragtruth", folder)
    assert len(data.examples) == 5 and data.skipped[-1].where == "line 9" and data.skipped[-1].reason == "invalid JSON"


def test_halludial_fixture():
    data = load_dataset("halludial", FORMATS / "halludial_spontaneous_test.json")
    assert [(ex.id, ex.consistent, ex.dialogue) for ex in data.examples] == [
        ("halludial:0", True, "0"), ("halludial:1", False, "0"), ("halludial:2", True, "1"),
        ("halludial:3", False, "1")]
    assert data.examples[1].history == "[Human]: How tall is it?"
    assert data.examples[0].subset == "halludial_spontaneous_test"
    assert [r.describe() for r in data.skipped] == ["record 4: unknown label 'Maybe, the annotator was unsure.'"]


def test_balanced_accuracy_tuning():
    # dev: consistent 0.45, 0.8; inconsistent 0.2, 0.3 -> the lowest perfect threshold is 0.3
    assert stats.tune_threshold([True, True, False, False], [0.45, 0.8, 0.2, 0.3], "balanced_accuracy") == (0.3, 1.0)
    # 1 consistent, 4 inconsistent: accuracy calls everything inconsistent, balanced accuracy does not
    y, s = [True, False, False, False, False], [0.2, 0.6, 0.1, 0.3, 0.4]
    assert stats.tune_threshold(y, s) == (0.6, 0.8)
    assert stats.tune_threshold(y, s, "balanced_accuracy") == (0.1, 0.625)
    with pytest.raises(ValueError, match="one class"):
        stats.tune_threshold([True, True], [0.1, 0.2], "balanced_accuracy")


def test_per_dataset_balanced_accuracy_cli(tmp_path, capsys):
    from q2_plugins.cli import main

    out_dir = tmp_path / "out"
    assert main(["meta-eval", "--dataset", "llm-aggrefact", "--data", str(FORMATS / "llm_aggrefact"),
                 "--scores", f"MiniCheck={scores_file(tmp_path)}", "--baselines", "none", "--experiments",
                 "benchmark", "--output-dir", str(out_dir), "--no-plots"]) == 0
    text = capsys.readouterr().out
    # AggreFact-CNN: tuned on dev at 0.6 -> test 100%; at 0.5 -> 75%. WiCE: tuned at 0.3 -> 75%; at 0.5 -> 75%
    assert "| metric | AggreFact-CNN | WiCE | mean |" in text
    assert "| MiniCheck | 100.00% / 75.00% | 75.00% / 75.00% | 87.50% / 75.00% |" in text
    block = json.loads((out_dir / "report.json").read_text())["benchmark"]["per_dataset"]["metrics"]["MiniCheck"]
    assert block["rows"]["AggreFact-CNN"]["threshold_tuned"] == 0.6
    assert block["rows"]["WiCE"]["threshold_tuned"] == 0.3
    assert (block["mean_tuned"], block["mean_fixed"]) == (0.875, 0.75)
    assert "100.00% / 75.00%" in (out_dir / "report.html").read_text()


def test_published_figures_beside_ours(shared_data):
    from q2_plugins.metaeval.runner import MetaEvalSettings, evaluate

    begin = evaluate(MetaEvalSettings(dataset="begin", data=str(shared_data / "begin_dev" / "dev_05_24_21.tsv"),
                                      baselines=("bleu",), experiments=("benchmark",)))
    block = begin.report["benchmark"]["published"]
    assert block["published_n"] == 836 and block["rows"][0]["n"] == 836 and block["rows"][0]["same_examples"]
    assert [(p["metric"], p["roc_auc"]) for p in block["published"]] == [("AlignScore-large", 0.827),
                                                                        ("QAFactEval", 0.810)]
    assert all("Zha et al. 2023" in p["source"] for p in block["published"])
    # the Q² WoW data: TRUE's set is the 1,088 cross-annotated responses; the recorded run scores 600 of them
    wow = evaluate(MetaEvalSettings(dataset="wow", data=str(shared_data / "q2_wow"),
                                    replay=str(shared_data / "q2_original_run"), baselines=("bleu",),
                                    experiments=("benchmark",)))
    rows = {r["metric"]: r for r in wow.report["benchmark"]["published"]["rows"]}
    assert rows["BLEU"]["n"] == 1088 and rows["BLEU"]["same_examples"]
    assert rows["Q2"]["n"] == 600 and not rows["Q2"]["same_examples"]
    from q2_plugins.metaeval.report import to_markdown

    text = to_markdown(wow.report)
    assert "| Q2 | 600 |" in text and "**not like for like**: 600 examples, the published figures have 1088" in text
    assert "| published: AlignScore-large | 1088 | 0.786 |" in text


def test_caveats_long_knowledge_bleu_and_other_versions(shared_data, tmp_path, capsys):
    from q2_plugins.cli import main

    cmu = shared_data / "begin_v2_dev" / "cmu-dog" / "begin_dev_cmu.tsv"
    out_dir = tmp_path / "out"
    assert main(["meta-eval", "--dataset", "begin", "--data", str(cmu), "--baselines", "bleu", "--experiments",
                 "response", "--output-dir", str(out_dir), "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "| BLEU § | 416 |" in text
    assert "- § long knowledge: the knowledge averages 204 words" in text and "(ROC AUC 0.506)" in text
    assert "- different data version: published BEGIN figures" in text
    for name in ("report.md", "report.html"):
        assert "long knowledge: the knowledge averages 204 words" in (out_dir / name).read_text()
    # WoW's one-sentence knowledge: no BLEU caveat
    wow_v2 = shared_data / "begin_v2_dev" / "wow" / "begin_dev_wow.tsv"
    assert main(["meta-eval", "--dataset", "begin", "--data", str(wow_v2), "--baselines", "bleu", "--experiments",
                 "response"]) == 0
    assert "long knowledge" not in capsys.readouterr().out


def test_reference_rows_from_another_split_are_flagged(shared_data):
    from q2_plugins.datasets.faithdial import load_faithdial
    from q2_plugins.metaeval.caveats import find_caveats
    from q2_plugins.metaeval.experiments import BEGIN_PAPER_BASELINE

    data = load_faithdial(shared_data / "faithdial_audit_ctrl_wow" / "ctrl_processed_wow.csv")
    texts, markers = find_caveats({"taxonomy": {"reference": BEGIN_PAPER_BASELINE}}, data)
    assert markers == {}
    assert texts == [f"different split and data version: the reference row ({BEGIN_PAPER_BASELINE['name']}) was "
                     f"measured on BEGIN's development split of the preprint release; the other rows are on "
                     f"faithdial-ctrl (200 responses of {data.source}); set side by side, they are not like for like."]


def test_llm_aggrefact_one_file_with_a_split_column_and_malformed_rows(tmp_path):
    rows = [{"dataset": "X", "doc": "d", "claim": "c", "label": 1, "split": "dev"},
            {"dataset": "X", "doc": "d", "claim": "c2", "label": 0, "split": "test"},
            {"dataset": "X", "doc": "d", "claim": "c3"}]
    path = tmp_path / "aggrefact.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{broken\n")
    data = load_dataset("llm-aggrefact", path)
    assert [(ex.id, ex.split) for ex in data.examples] == [("aggrefact:dev:0", "dev"), ("aggrefact:test:1", "test")]
    assert [(r.where, r.reason) for r in data.skipped] == [("aggrefact.jsonl row 2", "malformed row"),
                                                           ("aggrefact.jsonl row 3", "unreadable row")]
    path.write_text("")
    with pytest.raises(DataFormatError, match="is empty"):
        load_dataset("llm-aggrefact", path)


def test_begin_dev_beside_the_papers_dev_figure_differs_in_version_only(shared_data):
    from q2_plugins.metaeval.caveats import find_caveats
    from q2_plugins.metaeval.experiments import BEGIN_PAPER_BASELINE

    data = load_dataset("begin", shared_data / "begin_dev" / "dev_05_24_21.tsv")
    texts, _ = find_caveats({"taxonomy": {"reference": BEGIN_PAPER_BASELINE}}, data)
    assert texts[0].startswith("different data version: the reference row")
