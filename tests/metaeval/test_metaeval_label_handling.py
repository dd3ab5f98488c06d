"""Annotation files as they are in the wild: every published FaithDial audit layout, typos in label cells, blank
rows, empty texts and empty files; rows that cannot be examples are listed with their line, the others are read.

The FaithDial fixtures are built here from the published column layout of each file of FaithDial's ``data-audit``
folder (McGill-NLP/FaithDial); their rows are invented."""

from __future__ import annotations

import csv
import json

import pytest

from q2_plugins.metaeval.loaders import (
    DataFormatError,
    LabelOptions,
    load_begin,
    load_dataset,
    load_faithdial,
    load_table,
    read_label_map,
)

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
    assert "`--label-map FILE`" in notes
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


def test_table_blank_rows_are_not_inconsistent_examples(tmp_path):
    path = tmp_path / "gold.csv"
    path.write_text("response,knowledge,label\nr1,k1,1\nr2,k2,0\n,,\n,,\nr3,,1\n")
    data = load_table(path, consistent_labels=["1"])
    s = data.summary()
    assert (s["n"], s["n_consistent"], s["n_inconsistent"]) == (2, 1, 1)
    assert s["skipped_rows"]["by_reason"] == {"blank row": 2, "empty knowledge": 1}
    assert [r.where for r in data.skipped] == ["row 2", "row 3", "row 4"]


@pytest.mark.parametrize("kind, name, extra", [
    ("faithdial", "f.csv", {}), ("begin", "b.tsv", {}), ("dialfact", "d.jsonl", {}), ("dnli", "n.jsonl", {}),
    ("table", "t.csv", {"consistent_labels": ["1"]}),
])
def test_an_empty_file_says_it_is_empty(tmp_path, kind, name, extra):
    path = tmp_path / name
    path.write_text("")
    with pytest.raises(DataFormatError, match="is empty"):
        load_dataset(kind, path, **extra)


def test_label_options_only_where_labels_are_read(shared_data):
    with pytest.raises(ValueError, match="not to 'wow'"):
        load_dataset("wow", shared_data / "q2_wow", labels=LabelOptions(drop_unknown=True))
