"""RAGTruth's labels judged one by one and HalluDial's quoted phrases located, on files in the real formats
(tests/data/metaeval_formats/ragtruth_cases: RAGTruth's README row and invented rows; HalluDial/: invented rows in the
released folder layout)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.datasets.common import DataFormatError
from q2_plugins.datasets.halludial import load_halludial, locate_quotes
from q2_plugins.datasets.ragtruth import judge_label, load_ragtruth
from q2_plugins.datasets.registry import load_dataset

FORMATS = Path(__file__).resolve().parents[2] / "data" / "metaeval_formats"


def cut(ex):
    return None if ex.spans is None else [ex.response[s:e] for s, e in ex.spans]


def test_ragtruth_readme_row_cuts_its_text():
    data = load_ragtruth(FORMATS / "ragtruth_cases")
    readme = data.by_id()["ragtruth:1472"]
    assert cut(readme) == ["Gaza Strip"] and readme.subset == "Summary" and readme.split == "dev"


def test_ragtruth_each_label_is_judged_on_its_own():
    data = load_ragtruth(FORMATS / "ragtruth_cases")
    by_id = data.by_id()
    # one good label beside one past the end, one empty and one with string offsets: the good one stays
    assert cut(by_id["ragtruth:1001"]) == ["free parking for cyclists"] and not by_id["ragtruth:1001"].consistent
    # a label whose text is not at its offsets (shifted by one) is left out, the response's other label kept
    assert cut(by_id["ragtruth:1002"]) == ["an hour"]
    # offsets counted in UTF-16 code units (an emoji before the span) are converted
    assert cut(by_id["ragtruth:1003"]) == ["the 5 bakers"]
    # no usable label: still hallucinated, at the example level only
    assert by_id["ragtruth:1006"].spans is None and not by_id["ragtruth:1006"].consistent
    assert by_id["ragtruth:1007"].spans == () and by_id["ragtruth:1007"].consistent
    flagged = {(r.where, r.reason) for r in data.flagged}
    assert flagged == {("line 2 label 1", "offsets past the end"), ("line 2 label 2", "empty or reversed offsets"),
                       ("line 2 label 3", "offsets not integers"), ("line 3 label 0", "text mismatch"),
                       ("line 4 label 0", "utf-16 offsets"), ("line 7 label 0", "empty or reversed offsets")}
    summary = data.summary()
    assert summary["flagged_labels"]["n"] == 6
    note = next(n for n in data.notes if n.startswith("labels:"))
    assert "9 judged one by one, 5 left out" in note and "'every 30 minutes'" in note


def test_ragtruth_quality_follows_the_authors_by_default():
    good = load_ragtruth(FORMATS / "ragtruth_cases")
    assert "ragtruth:1004" not in good.by_id() and "ragtruth:1005" not in good.by_id()
    assert good.notes[0].startswith("quality: only responses of quality 'good'") and "'truncated': 1" in good.notes[0]
    assert {(r.where, r.reason, r.detail) for r in good.skipped} == {
        ("line 5", "quality not good", "incorrect_refusal"), ("line 6", "quality not good", "truncated")}
    every = load_dataset("ragtruth", FORMATS / "ragtruth_cases", quality="all")
    assert cut(every.by_id()["ragtruth:1005"]) == ["films"] and every.by_id()["ragtruth:1004"].consistent
    assert every.notes[0].startswith("quality: every response kept (quality 'all')")
    with pytest.raises(DataFormatError, match="quality choice"):
        load_ragtruth(FORMATS / "ragtruth_cases", quality="best")


@pytest.mark.parametrize("label, problem", [
    ({"start": 0, "end": 99, "text": "abc"}, "offsets past the end"),
    ({"start": 2, "end": 2, "text": ""}, "empty or reversed offsets"),
    ({"start": "0", "end": "3", "text": "abc"}, "offsets not integers"),
    ({"start": 0.0, "end": 3, "text": "abc"}, "offsets not integers"),
    ({"start": True, "end": 3, "text": "abc"}, "offsets not integers"),
    ({"start": 1, "end": 4, "text": "abc"}, "text mismatch"),
    ("abc", "not an object"),
])
def test_ragtruth_bad_labels(label, problem):
    assert judge_label(label, "abc def")[:2] == (None, problem)


def test_ragtruth_label_without_text_is_kept_unchecked():
    assert judge_label({"start": 0, "end": 3}, "abc def")[:2] == ((0, 3), "text not checked")
    assert judge_label({"start": 4, "end": 7, "text": "def"}, "abc def") == ((4, 7), None, "")


def test_ragtruth_quality_flag_reaches_the_loader(capsys):
    argv = ["meta-eval", "--dataset", "ragtruth", "--data", str(FORMATS / "ragtruth_cases"), "--baselines", "overlap",
            "--experiments", "spans", "--format", "json"]
    assert main(argv) == 0
    data = json.loads(capsys.readouterr().out)["data"]
    assert data["n"] == 6 and data["flagged_labels"]["n"] == 6
    assert main(argv + ["--ragtruth-quality", "all"]) == 0
    assert json.loads(capsys.readouterr().out)["data"]["n"] == 8


def test_halludial_quotes_trimmed_whole_words_and_in_the_response_only():
    # the rationale's sentence ends inside the quotes, the response goes on
    response = "He went fishing with his brother and then left."
    got = locate_quotes(response, 'Yes. It lies in "went fishing with his brother."')
    assert [response[s:e] for s, e in got.spans] == ["went fishing with his brother"] and got.in_response == 1
    # "he" is not found inside "them" (nor "the")
    got = locate_quotes("I met them at the lake.", 'Yes. "he" was not there.')
    assert got.spans is None and got.nowhere == 1
    # a phrase the rationale quotes from the knowledge is no response span: counted apart
    got = locate_quotes("It was built in 1890.", 'Yes. "built in 1890", while the knowledge says "built in 1871".',
                        "The lighthouse was built in 1871.")
    assert got.spans == ((7, 20),) and (got.in_response, got.in_knowledge) == (1, 1)
    # and so is one the response repeats, where the rationale quotes it as the knowledge's
    response = "It was built in 1871 and stands 80 metres tall."
    got = locate_quotes(response, 'Yes. As the knowledge states, it was "built in 1871", but "80 metres" is wrong.',
                        "The lighthouse was built in 1871 and stands 40 metres tall.")
    assert [response[s:e] for s, e in got.spans] == ["80 metres"] and got.in_knowledge == 1
    # case and spacing aside
    assert locate_quotes("It is about 80  Metres tall.", "Yes. “80 metres.”").spans == ((12, 22),)


def test_halludial_released_layout(tmp_path, capsys):
    data = load_halludial(FORMATS / "HalluDial")  # HalluDial/ holding data/spontaneous and data/induced
    assert {ex.subset for ex in data.examples} == {"spontaneous_train", "spontaneous_test", "induced_test"}
    spans = {ex.id: cut(ex) for ex in data.examples}
    assert spans["halludial:spontaneous_test:0"] == ["went fishing with his brother and then left for the city"]
    assert spans["halludial:spontaneous_test:1"] is None  # "he": not inside "them"
    assert spans["halludial:spontaneous_test:2"] == ["15th century"]  # the knowledge's phrases are no spans
    assert spans["halludial:spontaneous_train:1"] == ["built in 1890"]
    assert spans["halludial:induced_test:2"] == ["80 metres"]  # not "built in 1871", quoted as the knowledge's
    assert data.notes[0] == ("quoted phrases of the rationales: 5 located in the response, 5 quoting the knowledge "
                             "(no response span), 1 found in neither; 1 hallucinated responses have no located span "
                             "(example level only)")
    assert [ex.id for ex in load_halludial(FORMATS / "HalluDial" / "data").examples] == [ex.id for ex in data.examples]
    assert sum(ex.split == "dev" for ex in data.examples) == 2
    # the command as docs/spans.md prints it
    argv = ["meta-eval", "--dataset", "halludial", "--data", str(FORMATS / "HalluDial"), "--baselines", "overlap",
            "--experiments", "spans", "--format", "json"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out)["spans"]["n_dev"] == 2
    # a folder holding neither files nor the layout: the error names the folder to pass
    (tmp_path / "HalluDial" / "img").mkdir(parents=True)
    with pytest.raises(DataFormatError, match="pass the HalluDial folder, or HalluDial/data/spontaneous"):
        load_halludial(tmp_path / "HalluDial")
    shutil.copytree(FORMATS / "HalluDial" / "data" / "induced", tmp_path / "induced")
    assert len(load_halludial(tmp_path / "induced").examples) == 3
