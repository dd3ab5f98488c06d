"""The data set registry: a data set registered once is a ``q2 meta-eval --dataset`` choice with its help line and
loads through meta-eval; the data sets with a bundled copy need no ``--data``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.datasets import DATASETS, Dataset, default_data, load_dataset, register
from q2_plugins.datasets.common import DataFormatError, LabelOptions
from q2_plugins.datasets.types import Example, MetaEvalData


def load_toy(path: str | Path, *, labels: LabelOptions = LabelOptions()) -> MetaEvalData:
    """A toy format: JSONL of {"said", "known", "verdict"} with verdict "ok" (consistent) or "bad"."""
    examples = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        obj = json.loads(line)
        verdict = labels.mapped(obj["verdict"])
        if verdict not in ("ok", "bad"):
            raise DataFormatError(f"{path}:{n}: verdict must be ok or bad, got {verdict!r}")
        examples.append(Example(id=f"toy:{n}", response=obj["said"], knowledge=obj["known"],
                                consistent=verdict == "ok", subset="toy", label=verdict))
    return MetaEvalData(name="toy", source=str(path), examples=examples, label_scheme="ok = consistent; bad = not")


@pytest.fixture
def toy():
    entry = register(Dataset("toy-set", load_toy, "JSONL of said / known / verdict", labelled=True))
    yield entry
    del DATASETS["toy-set"]


def test_a_registered_data_set_is_a_meta_eval_choice_and_loads(toy, tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["meta-eval", "--help"])
    text = " ".join(capsys.readouterr().out.split())  # the short help counts them, whatever their number
    assert f"--dataset NAME the data set's name ({len(DATASETS)} of them: --help-all lists each one)" in text
    with pytest.raises(SystemExit):
        main(["meta-eval", "--help-all"])
    text = " ".join(capsys.readouterr().out.split())
    assert "toy-set: JSONL of said / known / verdict" in text  # and `--dataset toy-set` is a choice: below
    assert "toy-set" in DATASETS and DATASETS["toy-set"].loader is load_toy

    rows = [{"said": "paris is in france", "known": "paris is the capital of france", "verdict": "ok"},
            {"said": "paris is in spain", "known": "paris is the capital of france", "verdict": "bda"},
            {"said": "rome is in italy", "known": "rome is the capital of italy", "verdict": "ok"},
            {"said": "rome is in peru", "known": "rome is the capital of italy", "verdict": "bad"}]
    data = tmp_path / "toy.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    labels = tmp_path / "labels.json"
    labels.write_text('{"bda": "bad"}')  # a labelled data set takes --label-map
    assert main(["meta-eval", "--dataset", "toy-set", "--data", str(data), "--label-map", str(labels),
                 "--baselines", "overlap", "--experiments", "response", "--format", "json", "--no-plots"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["data"]["name"] == "toy" and report["data"]["n"] == 4 and report["data"]["n_consistent"] == 2
    assert report["response_level"]["metrics"]["Overlap"]["n"] == 4


def test_a_name_registers_once(toy):
    with pytest.raises(ValueError, match="'toy-set' is registered already"):
        register(Dataset("toy-set", load_toy, "again"))


def test_bundled_data_sets_need_no_path(capsys):
    for name, n in (("wow", 600), ("begin", 836), ("faithdial", 200)):
        assert len(load_dataset(name, default_data(name)).examples) == n, name
    assert default_data("usr") is None
    assert main(["meta-eval", "--dataset", "usr"]) == 2
    assert "--data" in capsys.readouterr().err
