"""``q2 meta-eval --experiments spans`` end to end with tiny models on the small synthetic RAGTruth and HalluDial
files (random weights: the machinery and the printed table, not the numbers)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from q2_plugins.cli import main

FORMATS = Path(__file__).resolve().parents[2] / "data" / "metaeval_formats"


@pytest.mark.slow
def test_span_meta_eval_on_ragtruth_and_halludial(tiny_models, tmp_path, capsys):
    models = ["--qg-model", str(tiny_models["qg"]), "--qa-model", str(tiny_models["qa"]), "--nli-model",
              str(tiny_models["nli"]), "--qg-max-length", "12", "--no-progress"]
    # HalluDial's train and test files in one folder: the train file is the dev split thresholds come from
    folder = tmp_path / "halludial"
    folder.mkdir()
    shutil.copy(FORMATS / "halludial_spontaneous_test.json", folder / "spontaneous_test.json")
    shutil.copy(FORMATS / "halludial_spontaneous_test.json", folder / "spontaneous_train.json")
    for data, n_dev in ((["--dataset", "ragtruth", "--data", str(FORMATS / "ragtruth")], 3),
                        (["--dataset", "halludial", "--data", str(folder)], 4)):
        argv = ["meta-eval", *data, "--compute", "--baselines", "overlap", "--experiments", "spans", *models]
        assert main(argv + ["--format", "json"]) == 0
        block = json.loads(capsys.readouterr().out)["spans"]
        assert [r["metric"] for r in block["rows"]] == ["Q2", "Q2 w/o NLI", "Overlap"]
        for row in block["rows"]:
            for level in ("span", "example"):
                x = row[level]
                assert {"precision", "recall", "f1", "threshold", "threshold_source", "n_test"} <= set(x)
                assert x["threshold_source"].startswith("best F1 on the dev split (")  # never the test examples
        assert block["n_dev"] == n_dev
        assert main(argv) == 0
        text = capsys.readouterr().out
        assert "### Span-level and example-level hallucination detection" in text
        assert "| Overlap | character |" in text and "| Q2 | example |" in text and "best F1 on the dev split" in text
