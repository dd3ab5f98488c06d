"""Annotation files as they are in the wild: every published FaithDial audit layout, typos in label cells, blank
rows, empty texts and empty files; rows that cannot be examples are listed with their line, the others are read.

The FaithDial fixtures are built here from the published column layout of each file of FaithDial's ``data-audit``
folder (McGill-NLP/FaithDial); their rows are invented."""

from __future__ import annotations

import csv
import json

import pytest

from q2_plugins.datasets.begin import load_begin
from q2_plugins.datasets.common import DataFormatError, LabelOptions, read_label_map
from q2_plugins.datasets.faithdial import load_faithdial
from q2_plugins.datasets.registry import load_dataset
from q2_plugins.datasets.table import TableColumns, load_table

# (file in data-audit/, header): the twelve published files
FAITHDIAL_FILES = [
    *[(f"{folder}/{stem}_processed_{domain}.csv", ["knowledge", "history", stem, "begin_label", "vrm_label"])
      for folder, stem, domains in (("CTRL", "ctrl", ("wow", "cmu", "topicalchat")),
                                    ("GPT2", "gpt2", ("wow", "cmu", "topical")),
                                    ("DoHA", "doha", ("wow", "cmu", "topical")))
      for domain in domains],
    *[(f"gold/{domain}.csv", ["evidence", "history", "response", "BEGIN", "VRM"])
      for domain in ("wow", "cmu", "topical")],
]
# label cells as the two layouts spell them (model audits lower-case and multi-label; gold capitalised)
AUDIT_CELLS = ["entailment", "entailment,uncooperative", "hallucination", "entailment,hallucination", "generic",
               "partial hallucination"]
GOLD_CELLS = ["Entailment", "Uncooperative", "Hallucination", "Partial Hallucination", "Generic", "Entailment"]
CONSISTENT = [True, True, False, False, False, True]  # gold: Uncooperative alone is faithful


def write_audit(path, header, cells, extra_rows=()):
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(header)
        for i, cell in enumerate(cells):
            # a multi-line knowledge cell, as in the gold Topical-Chat file, and a response with a leading space
            w.writerow([f"Fact {i} about a topic,\nwith a second line.", f"user turn {i}", f" response {i}", cell,
                        "edification,\ndisclosure"])
        for row in extra_rows:
            w.writerow(row)
    return path


@pytest.mark.parametrize("name, header", FAITHDIAL_FILES, ids=[f for f, _ in FAITHDIAL_FILES])
def test_every_published_faithdial_layout(tmp_path, name, header):
    gold = name.startswith("gold/")
    cells = GOLD_CELLS if gold else AUDIT_CELLS
    path = write_audit(tmp_path / name.replace("/", "_"), header, cells)
    data = load_dataset("faithdial", path)
    assert data.name == ("faithdial-gold" if gold else f"faithdial-{header[2]}")
    assert [ex.consistent for ex in data.examples] == (CONSISTENT if gold else
                                                       [True, True, False, False, False, False])
    assert [ex.label for ex in data.examples] == (
        ["entailment", "entailment", "hallucination", "hallucination", "generic", "entailment"] if gold else
        ["entailment", "entailment", "hallucination", "hallucination", "generic", "hallucination"])
    first = data.examples[0]
    assert first.knowledge == "Fact 0 about a topic,\nwith a second line." and first.history == "user turn 0"
    assert first.response == " response 0" and data.skipped == []
    assert data.examples[3].subset == ("partial hallucination" if gold else "entailment,hallucination")


def test_typos_blank_rows_and_empty_texts_are_listed_and_the_rest_read(tmp_path):
    header = ["knowledge", "history", "gpt2", "begin_label", "vrm_label"]
    path = write_audit(tmp_path / "gpt2_processed_wow.csv", header, AUDIT_CELLS, extra_rows=[
        ["k", "h", "r", "entailmentt,uncooperative", "ack."],     # line 20
        ["k", "h", "r", "entailment. uncooperative", "ack."],     # line 21
        ["", "", "", "", ""],                                     # line 22: blank
        ["k", "h", "", "entailment", "ack."],                     # line 23: empty response
        ["k", "h", "r", "hallucinated", "ack."],                  # line 24
    ])
    data = load_faithdial(path)
    assert len(data.examples) == 6
    assert [(r.where, r.reason, r.detail) for r in data.skipped] == [
        ("line 20", "unknown label", "entailmentt,uncooperative"),
        ("line 21", "unknown label", "entailment. uncooperative"),
        ("line 22", "blank row", ""), ("line 23", "empty response", ""),
        ("line 24", "unknown label", "hallucinated")]
    notes = "\n".join(data.notes)
    assert "left out 5 rows of gpt2_processed_wow.csv: 3 unknown label, 1 blank row, 1 empty response" in notes
    assert "line 20 'entailmentt,uncooperative'; line 21 'entailment. uncooperative'; line 24 'hallucinated'" in notes
    assert "(setting label_map)" in notes and "--" not in notes
    summary = data.summary()["skipped_rows"]
    assert summary["n"] == 5 and summary["by_reason"] == {"unknown label": 3, "blank row": 1, "empty response": 1}
    # mapped: the typos become examples; the unmappable blank row and empty response stay out
    table = {"entailmentt": "entailment", "entailment. uncooperative": "entailment,uncooperative",
             "hallucinated": "hallucination"}
    mapped = load_faithdial(path, labels=LabelOptions(label_map=table))
    assert len(mapped.examples) == 9 and [r.reason for r in mapped.skipped] == ["blank row", "empty response"]
    assert [(ex.label, ex.subset) for ex in mapped.examples[6:]] == [
        ("entailment", "entailment,uncooperative"), ("entailment", "entailment,uncooperative"),
        ("hallucination", "hallucination")]
    dropped = load_faithdial(path, labels=LabelOptions(drop_unknown=True))
    assert "dropped as asked" in "\n".join(dropped.notes) and len(dropped.examples) == 6


def test_label_map_files(tmp_path):
    as_json = tmp_path / "map.json"
    as_json.write_text(json.dumps({"entailmentt": "entailment"}))
    as_tsv = tmp_path / "map.tsv"
    as_tsv.write_text("# typo\tfix\nentailmentt\tentailment\nhallucinated\thallucination\n")
    assert read_label_map(as_json) == {"entailmentt": "entailment"}
    assert read_label_map(as_tsv) == {"entailmentt": "entailment", "hallucinated": "hallucination"}
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b,c\n")
    with pytest.raises(DataFormatError, match="line 1: expected two values"):
        read_label_map(bad)
    bad.write_text("")
    with pytest.raises(DataFormatError, match="is empty"):
        read_label_map(bad)


def test_begin_v1_typo_is_per_row(tmp_path):
    path = tmp_path / "begin.tsv"
    path.write_text("evidence\tresponse\tgold label\nk\tr\tentailment\nk\tr2\tHallucination\nk\tr3\tentailmnet\n"
                    "\t\t\nk\tr4\tgeneric\n")
    data = load_begin(path)
    assert [(ex.id, ex.label) for ex in data.examples] == [("begin:0", "entailment"), ("begin:1", "hallucination"),
                                                           ("begin:4", "generic")]
    assert [r.describe() for r in data.skipped] == ["line 4: unknown label 'entailmnet'", "line 5: blank row"]


@pytest.mark.parametrize("kind, name, text, where", [
    ("begin", "b.tsv", "evidence\tresponse\tgold label\nk\tr\tentailment\nk\tr2\t \n", "line 3"),
    ("begin", "b2.tsv", "knowledge\tresponse\tbegin_label\nk\tr\tGeneric\nk\tr2\t\n", "line 3"),
    ("faithdial", "f.csv", "knowledge,history,ctrl,begin_label,vrm_label\nk,h,r,entailment,ack\nk,h,r2,,ack\n",
     "line 3"),
    ("dialfact", "d.jsonl", '{"response": "r", "evidence": ["k"], "label": "SUPPORTS"}\n'
                            '{"response": "r2", "evidence": ["k"], "label": null}\n', "line 2"),
    ("dnli", "n.jsonl", '{"premise": "k", "hypothesis": "r", "label": "neutral"}\n'
                        '{"premise": "k", "hypothesis": "r2", "label": ""}\n', "record 2"),
    ("halludial", "h.json", '[{"knowledge": "k", "response": "r", "target": "No."}, '
                            '{"knowledge": "k", "response": "r2", "target": ""}]', "record 1"),
])
def test_an_empty_label_cell_is_an_empty_label_not_an_unknown_one(tmp_path, kind, name, text, where):
    path = tmp_path / name
    path.write_text(text)
    data = load_dataset(kind, path)
    assert len(data.examples) == 1
    assert [r.describe() for r in data.skipped] == [f"{where}: empty label"]
    notes = "\n".join(data.notes)
    assert "1 empty label" in notes and "unknown label" not in notes  # no label map can fix an empty cell
    path.write_text(text.replace("entailment", "").replace("SUPPORTS", "").replace("neutral", "")
                    .replace("Generic", "").replace("No.", ""))
    with pytest.raises(DataFormatError, match=r"all 2 left out \{'empty label': 2\}") as e:
        load_dataset(kind, path)
    assert "unknown" not in str(e.value)


def test_aggrefact_empty_label_is_an_empty_label(tmp_path):
    (tmp_path / "dev.csv").write_text("dataset,doc,claim,label\nA,d1,c1,1\nA,d2,c2,\n")
    data = load_dataset("llm-aggrefact", tmp_path)
    assert [r.describe() for r in data.skipped] == ["dev.csv row 1: empty label"]


def test_table_blank_rows_are_not_inconsistent_examples(tmp_path):
    path = tmp_path / "gold.csv"
    path.write_text("response,knowledge,label\nr1,k1,1\nr2,k2,0\n,,\n,,\nr3,,1\n")
    data = load_table(path, table=TableColumns(consistent_labels=("1",)))
    s = data.summary()
    assert (s["n"], s["n_consistent"], s["n_inconsistent"]) == (2, 1, 1)
    assert s["skipped_rows"]["by_reason"] == {"blank row": 2, "empty knowledge": 1}
    assert [r.where for r in data.skipped] == ["row 2", "row 3", "row 4"]


def test_table_empty_lines_are_blank_rows_with_their_line(tmp_path, capsys):
    # lines 3 and 6 are empty; the empty line inside the quoted knowledge of line 7 is part of that row
    path = tmp_path / "gold.tsv"
    path.write_text("response\tknowledge\tlabel\nr1\tk1\t1\n\nr2\tk2\t0\n\t\t\n\n"
                    'r3\t"k3\n\nmore"\t0\n')
    data = load_table(path, table=TableColumns(consistent_labels=("1",)))
    assert [ex.id for ex in data.examples] == ["0", "1", "3"]  # row numbers stay those q2 score writes
    assert [r.describe() for r in data.skipped] == ["row 2: blank row", "line 3: blank row", "line 6: blank row"]
    assert data.summary()["skipped_rows"]["by_reason"] == {"blank row": 3}
    # a file of empty lines only says so, counted
    empty = tmp_path / "empty.csv"
    empty.write_text("response,knowledge,label\n\n\n")
    with pytest.raises(DataFormatError, match=r"all 2 left out \{'blank row': 2\}"):
        load_table(empty, table=TableColumns(consistent_labels=("1",)))
    # report.json lists them through the CLI; q2 score's reader still passes over empty lines
    from q2_plugins.io.inputs import read_rows

    assert len(list(read_rows(path))) == 4
    code, out, _ = run_cli(capsys, "--dataset", "table", "--data", str(path), "--consistent-labels", "1",
                           "--baselines", "overlap", "--experiments", "response", "--output-dir", str(tmp_path / "o"),
                           "--no-plots")
    assert code == 0 and "3 rows of the file are not examples (3 blank row)" in out
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert {"where": "line 6", "reason": "blank row", "detail": ""} in report["data"]["skipped_rows"]["rows"]


def test_aggrefact_empty_lines_are_blank_rows(tmp_path):
    (tmp_path / "dev.csv").write_text("dataset,doc,claim,label\nA,d1,c1,1\n\nA,d2,c2,0\n")
    (tmp_path / "test.csv").write_text("dataset,doc,claim,label\nA,d3,c3,1\nA,d4,c4,0\n\n")
    data = load_dataset("llm-aggrefact", tmp_path)
    assert len(data.examples) == 4
    assert [r.describe() for r in data.skipped] == ["dev.csv line 3: blank row", "test.csv line 4: blank row"]


@pytest.mark.parametrize("kind, name, extra", [
    ("faithdial", "f.csv", {}), ("begin", "b.tsv", {}), ("dialfact", "d.jsonl", {}), ("dnli", "n.jsonl", {}),
    ("table", "t.csv", {"table": TableColumns(consistent_labels=("1",))}),
])
def test_an_empty_file_says_it_is_empty(tmp_path, kind, name, extra):
    path = tmp_path / name
    path.write_text("")
    with pytest.raises(DataFormatError, match="is empty"):
        load_dataset(kind, path, **extra)


def test_label_options_only_where_labels_are_read(shared_data):
    with pytest.raises(ValueError, match="not to 'wow'"):
        load_dataset("wow", shared_data / "q2_wow", labels=LabelOptions(drop_unknown=True))


# -- the command line and the typed entry point ---------------------------------------------------------------------
def run_cli(capsys, *argv):
    from q2_plugins.cli import main

    code = main(["meta-eval", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cli_goes_on_past_typos_and_says_what_it_left_out(tmp_path, capsys):
    header = ["evidence", "history", "response", "BEGIN", "VRM"]
    path = write_audit(tmp_path / "wow.csv", header, GOLD_CELLS,
                       extra_rows=[["k", "h", "r", "Entailmentt", "ack."], ["", "", "", "", ""]])
    argv = ["--dataset", "faithdial", "--data", str(path), "--baselines", "overlap", "--experiments", "response",
            "--output-dir", str(tmp_path / "out"), "--no-plots"]
    code, out, err = run_cli(capsys, *argv)
    assert code == 0
    assert "6 responses: 3 consistent, 3 inconsistent" in out
    assert "2 rows of the file are not examples (1 unknown label, 1 blank row)" in out
    assert "line 20 'Entailmentt'" in out and "warning: 1 rows of" in err and "--label-map FILE" in err
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["data"]["skipped_rows"]["rows"] == [
        {"where": "line 20", "reason": "unknown label", "detail": "Entailmentt"},
        {"where": "line 21", "reason": "blank row", "detail": ""}]
    assert "line 20" in (tmp_path / "out" / "report.md").read_text()
    assert "line 20" in (tmp_path / "out" / "report.html").read_text()
    # acknowledged: no warning; mapped: read
    assert run_cli(capsys, *argv, "--drop-unknown-labels")[2] == ""
    table = tmp_path / "map.tsv"
    table.write_text("Entailmentt\tEntailment\n")
    code, out, err = run_cli(capsys, *argv, "--label-map", str(table))
    assert "7 responses: 4 consistent" in out and "1 rows of the file are not examples (1 blank row)" in out
    assert err == ""


def test_unscored_rows_carry_their_reason(tmp_path, capsys):
    data = tmp_path / "t.csv"
    data.write_text("id,response,knowledge,label\na,r1,k1,1\nb,r2,k2,0\nc,r3,k3,1\nd,r4,k4,0\n")
    scores = tmp_path / "scores.jsonl"
    from q2_plugins.metric.results import ResponseResult

    results = [ResponseResult(0, "scored", 0.9, 0.9, 2, 2, False),
               ResponseResult(1, "scored", 0.1, 0.1, 1, 1, False),
               ResponseResult(2, "no_valid_question", None, None, 0, 1, False)]
    scores.write_text("".join(json.dumps({"id": i, **r.to_dict()}) + "\n" for i, r in zip("abc", results)))
    code, out, _ = run_cli(capsys, "--dataset", "table", "--data", str(data), "--consistent-labels", "1",
                           "--id-column", "id", "--scores", f"Q2={scores}", "--baselines", "none",
                           "--experiments", "response",
                           "--output-dir", str(tmp_path / "out"), "--no-plots")
    assert code == 0
    assert "| Q2 ‡ | 2 (2 unscored: 1 no_valid_question, 1 not in scores file /" in out  # long reasons cut at 60
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["metrics"][0]["unscored"] == {"c": "no_valid_question", "d": f"not in scores file {scores}"}
    # a caveat and a marker say that Q2's figures are on 2 of the 4 responses
    assert "- ‡ partial coverage: Q2 (2 of 4) score only part" in out
    assert report["caveat_markers"] == {"Q2": ["‡"]}


def test_library_entry_point_takes_typed_settings_and_names_the_setting(shared_data, capsys):
    from q2_plugins.datasets.table import TableColumns
    from q2_plugins.metaeval.runner import MetaEvalSettings, SettingError, evaluate

    begin = str(shared_data / "begin_v2_dev" / "wow" / "begin_dev_wow.tsv")
    run = evaluate(MetaEvalSettings(dataset="begin", data=begin, baselines=("overlap",), experiments=("response",)))
    assert run.report["response_level"]["metrics"]["Overlap"]["n"] == 430
    with pytest.raises(SettingError, match="^save_scores: writes the scores of compute") as e:
        MetaEvalSettings(dataset="begin", data=begin, save_scores="x.jsonl")
    assert e.value.setting == "save_scores"
    with pytest.raises(SettingError, match="^drop_unknown_labels: applies to the data sets with label values"):
        MetaEvalSettings(dataset="wow", data=begin, drop_unknown_labels=True)
    with pytest.raises(SettingError, match="^table: "):
        MetaEvalSettings(dataset="begin", data=begin, table=TableColumns(consistent_labels=("1",)))
    with pytest.raises(SettingError, match="^experiments: Unknown experiment"):
        evaluate(MetaEvalSettings(dataset="begin", data=begin, experiments=("nope",), baselines=()))
    # the command line names the flag instead
    from q2_plugins.cli import main

    assert main(["meta-eval", "--dataset", "begin", "--data", begin, "--save-scores", "x.jsonl"]) == 2
    assert "--save-scores: writes the scores of compute" in capsys.readouterr().err
    assert main(["meta-eval", "--dataset", "begin", "--data", begin, "--reps", "0"]) == 2
    assert "--reps must be a positive integer" in capsys.readouterr().err
    assert main(["meta-eval", "--dataset", "ragtruth", "--data", begin, "--drop-unknown-labels"]) == 2
    assert "--drop-unknown-labels: applies to the data sets with label values" in capsys.readouterr().err
