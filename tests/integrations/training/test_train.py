"""``q2 train`` on tiny local models: reproducible weights, resuming, bad files, and the trained models used by Q²
(3-way as ``--nli-model``, 5-way as ``--taxonomy-model`` in ``q2 score`` and ``q2 meta-eval``, and the Python API)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from q2_plugins.backends.hf.labeller import TaxonomyModel, TaxonomyModelError
from q2_plugins.backends.hf.tiny import build_roberta_nli
from q2_plugins.cli import main
from q2_plugins.metric.taxonomy import LABELS
from q2_plugins.training.train import (
    TrainDataError,
    TrainOptions,
    evaluate_labels,
    read_pairs,
    train,
)

PAIRS = [
    ("Rome was built by Romulus in 753 BC.", "who built rome?", "rome was built by romulus .", "entailment"),
    ("Rome was built by Romulus in 753 BC.", "who built rome?", "rome was not built by romulus .", "contradiction"),
    ("Rome was built by Romulus in 753 BC.", "who built rome?", "that's great!", "generic"),
    ("Rome was built by Romulus in 753 BC.", "who built rome?", "pizza is from naples .", "off-topic"),
    ("Rome was built by Romulus in 753 BC.", "who built rome?", "romulus founded the city of rome .",
     "hallucination"),
    ("Pizza is a dish that originated in Naples, Italy.", "", "pizza is from naples .", "entailment"),
    ("Pizza is a dish that originated in Naples, Italy.", "", "pizza is not from naples .", "contradiction"),
    ("Pizza is a dish that originated in Naples, Italy.", "", "i agree with you.", "generic"),
    ("Pizza is a dish that originated in Naples, Italy.", "", "rome was built by romulus .", "off-topic"),
    ("Pizza is a dish that originated in Naples, Italy.", "", "pizza is loved in new york .", "hallucination"),
]


@pytest.fixture(scope="module")
def bases(tmp_path_factory):
    root = tmp_path_factory.mktemp("bases")
    return {3: build_roberta_nli(root / "nli3"), 5: build_roberta_nli(root / "nli5", id2label=dict(enumerate(LABELS)))}


@pytest.fixture(scope="module")
def train_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("data") / "silver.jsonl"
    path.write_text("".join(json.dumps({"evidence": e, "previous_turn": p, "response": r, "label": lab,
                                        "recipe": "begin"}) + "\n" for e, p, r, lab in PAIRS))
    return path


def options(base: Path, train_file: Path, out: Path, labels: int = 5, **kw) -> TrainOptions:
    settings = dict(max_length=48, learning_rate=1e-3, max_steps=4, per_device_train_batch_size=4, logging_steps=1,
                    save_steps=2, seed=3, progress=False)
    settings.update(kw)
    return TrainOptions(train_file=str(train_file), output_dir=str(out), labels=labels, base=str(base), **settings)


def weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def same(a: dict, b: dict) -> bool:
    import torch

    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.fixture(scope="module")
def five_way(bases, train_file, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("five") / "model"
    train(options(bases[5], train_file, out))
    return out


def test_same_seed_same_weights_and_the_saved_folder(bases, train_file, five_way, tmp_path):
    again = tmp_path / "again"
    result = train(options(bases[5], train_file, again))
    assert same(weights(five_way), weights(again))
    assert not same(weights(five_way), weights(bases[5]))  # training moved the weights
    other = tmp_path / "other_seed"
    train(options(bases[5], train_file, other, seed=4))
    assert not same(weights(five_way), weights(other))
    config = json.loads((again / "config.json").read_text())
    assert [config["id2label"][str(i)] for i in range(5)] == list(LABELS)
    card = (again / "README.md").read_text()
    assert f"sha256 `{result.data_sha256}`" in card and "recipe: begin (10 rows)" in card and "seed: 3" in card
    assert (again / "training_curve.png").stat().st_size > 0 and (again / "tokenizer_config.json").exists()
    assert [h["step"] for h in result.log_history if "loss" in h] == [1, 2, 3, 4]


def test_resumed_equals_uninterrupted(bases, train_file, five_way, tmp_path):
    resumed = tmp_path / "resumed"
    train(options(bases[5], train_file, resumed, resume_from_checkpoint=str(five_way / "checkpoint-2")))
    assert same(weights(five_way), weights(resumed))
    assert not same(weights(five_way), weights(five_way / "checkpoint-2"))


def test_three_way_model_scores_as_q2_nli_model(bases, train_file, tiny_models, tmp_path, capsys):
    out = tmp_path / "nli"
    result = train(options(bases[3], train_file, out, labels=3, eval_file=str(train_file)))
    assert result.labels == ["contradiction", "neutral", "entailment"]  # the base's head order is kept
    assert result.eval["n"] == 10 and "3way" in result.eval and "5way" not in result.eval
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"response": r, "knowledge": e}) + "\n" for e, _, r, _ in PAIRS[:3]))
    code = main(["score", "--input", str(inputs), "--output", str(tmp_path / "s.jsonl"), "--no-progress",
                 "--qg-model", str(tiny_models["qg_short"]), "--qa-model", str(tiny_models["qa"]),
                 "--nli-model", str(out), "--qg-max-length", "12"])
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert len(rows) == 3 and all(r["status"] in ("scored", "fallback") for r in rows)


def test_five_way_model_labels_in_score_and_the_api(five_way, tiny_config, tiny_models, tmp_path, capsys):
    from q2_plugins import Q2Scorer

    model = TaxonomyModel(str(five_way))
    evidence, previous, responses = [p[0] for p in PAIRS], [p[1] or None for p in PAIRS], [p[2] for p in PAIRS]
    expected = model.predict(evidence, previous, responses)
    assert set(expected) <= set(LABELS) and model.predict(evidence[:1], previous[:1], responses[:1]) == expected[:1]
    result = Q2Scorer(tiny_config).score(responses=responses[:4], knowledge=evidence[:4])
    model.label(result, responses=responses[:4], knowledge=evidence[:4], history=previous[:4])
    assert [r.label for r in result.responses] == expected[:4]
    inputs = tmp_path / "in.jsonl"
    inputs.write_text("".join(json.dumps({"response": r, "knowledge": e, "previous": p}) + "\n"
                              for e, p, r, _ in PAIRS))
    code = main(["score", "--input", str(inputs), "--output", str(tmp_path / "s.jsonl"), "--no-progress",
                 "--history-column", "previous", "--taxonomy-model", str(five_way), "--qg-model",
                 str(tiny_models["qg_short"]), "--qa-model", str(tiny_models["qa"]), "--nli-model",
                 str(tiny_models["nli"]), "--qg-max-length", "12"])
    assert code == 0, capsys.readouterr().err
    rows = [json.loads(line) for line in (tmp_path / "s.jsonl").read_text().splitlines()]
    assert [r["label"] for r in rows] == model.predict(evidence, [p[1] for p in PAIRS], responses)
    assert all(r["label_reason"].endswith("model") for r in rows)
    meta = json.loads((tmp_path / "s.jsonl.meta.json").read_text())
    assert meta["taxonomy_model"].startswith("local:sha256:")
    capsys.readouterr()  # (what the loads above printed)
    assert main(["score", "--input", str(inputs), "--output", str(tmp_path / "x.jsonl"), "--taxonomy-model",
                 str(tiny_models["nli"])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("q2 score: error: --taxonomy-model: ") and "not BEGIN's five" in err
    assert len(err.splitlines()) == 1  # (no loading bar of the model library before it)
    with pytest.raises(TaxonomyModelError, match=r"^taxonomy_model: .* not BEGIN's five"):
        TaxonomyModel(str(tiny_models["nli"]))


def test_meta_eval_reports_the_five_way_model(five_way, shared_data, tmp_path, capsys):
    rows = list(csv.DictReader((shared_data / "begin_dev" / "dev_05_24_21.tsv").open(), delimiter="\t"))[:30]
    data = tmp_path / "begin.tsv"
    with data.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]), delimiter="\t")
        writer.writeheader()
        writer.writerows(rows)
    code = main(["meta-eval", "--dataset", "begin", "--data", str(data), "--experiments", "taxonomy",
                 "--baselines", "none", "--taxonomy-model", str(five_way), "--output-dir", str(tmp_path / "me")])
    out = capsys.readouterr().out
    assert code == 0
    model = TaxonomyModel(str(five_way))
    predicted = model.predict([r["evidence"] for r in rows], [r["previous turn"] for r in rows],
                              [r["response"] for r in rows])
    figures = evaluate_labels([r["gold label"] for r in rows], predicted)
    line = next(x for x in out.splitlines() if x.startswith("| Model model | 30 |"))
    assert line == (f"| Model model | 30 | {100 * figures['3way']['accuracy']:.2f}% | "
                    f"{100 * figures['3way']['macro_f1']:.1f} | {100 * figures['5way']['accuracy']:.2f}% | "
                    f"{100 * figures['5way']['macro_f1']:.1f} |")
    assert (tmp_path / "me" / "confusion_model_model.png").exists()
    assert (tmp_path / "me" / "confusion_text_rules.png").exists()


def test_five_labels_from_a_three_label_base_say_so_in_one_line_and_count_the_examples_trained_on(
        bases, train_file, tmp_path, capfd):
    code = main(["train", "--train-file", str(train_file), "--labels", "5", "--base", str(bases[3]),
                 "--output-dir", str(tmp_path / "o"), "--max-steps", "2", "--per-device-train-batch-size", "3",
                 "--max-length", "48", "--logging-steps", "1", "--no-progress"])
    out, err = capfd.readouterr()
    assert code == 0
    # the re-initialised head: one line of ours, no load report, no library bars, no Trainer log dicts
    assert err.splitlines() == [f"q2 train: {bases[3]} has 3 labels: its classifier head is re-initialised for 5 "
                                f"labels (entailment, hallucination, generic, off-topic, contradiction), as expected"]
    for noise in ("LOAD REPORT", "MISMATCH", "Loading weights", "Writing model shards", "{'loss'", "num_labels"):
        assert noise not in out + err
    # 2 steps of 3 examples from a file of 10: what was trained on, and its rate, not the file's count
    assert out.startswith("q2 train: 6 examples trained on in 2 steps, ") and "the file has 10 examples" in out
    record = json.loads((tmp_path / "o" / "q2_train.json").read_text())
    assert (record["examples_seen"], record["steps"], record["n_train"]) == (6, 2, 10)
    assert record["examples_per_second"] == pytest.approx(6 / record["train_seconds"])


@pytest.mark.parametrize("content, message", [
    ('{"evidence": "e", "response": "r", "label": "maybe"}\n', "label 'maybe' is not one of BEGIN's five labels"),
    ('{"evidence": "e", "reply": "r", "label": "generic"}\n', "no response column 'response'"),
    ('{"evidence": "e", "response": "r", "gold": "generic"}\n', "no label column"),
    ("", "holds no rows"),
    # invisible text is no text: refused by row (rows count from 0), naming what the cell holds
    ('{"evidence": "e", "response": "r", "label": "generic"}\n{"evidence": "e", "response": 5, "label": "generic"}\n',
     "row 1: 'response' is a number"),
    ('{"evidence": "e", "response": ["r"], "label": "generic"}\n', "row 0: 'response' is a list"),
    ('{"evidence": "e", "response": "\\u0000", "label": "generic"}\n', "row 0: 'response' holds a NUL character"),
    ('{"evidence": "e\\u200b", "response": "r", "label": "generic"}\n',
     "row 0: 'evidence' holds an invisible format character U+200B"),
    ('{"evidence": "e", "response": "r \\ud800", "label": "generic"}\n', "row 0: 'response' holds a lone surrogate"),
])
def test_bad_training_file_stops_with_one_line(content, message, tmp_path, capsys):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    code = main(["train", "--train-file", str(path), "--labels", "5", "--output-dir", str(tmp_path / "o"),
                 "--base", str(tmp_path / "no-model")])
    err = capsys.readouterr().err
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "o").exists()


def test_three_way_folding_and_conv_fever_labels(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"knowledge": "k", "response": "r", "label": lab}) + "\n"
                            for lab in ("hallucination", "consistent", "inconsistent", "REFUTES", "neutral")))
    pairs = read_pairs(str(path), TrainOptions(str(path), "o", labels=3))
    assert [p.label for p in pairs] == ["neutral", "entailment", "contradiction", "contradiction", "neutral"]
    assert evaluate_labels(["entailment", "generic"], ["entailment", "off-topic"])["3way"]["accuracy"] == 1.0


def test_the_knowledge_column_is_text_columns_with_evidence_at_its_default(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({"evidence": "e", "facts": "f", "response": "r", "label": "neutral"}) + "\n")
    assert read_pairs(str(path), TrainOptions(str(path), "o"))[0].premise == "e"  # q2 perturb --recipe's column
    assert read_pairs(str(path), TrainOptions(str(path), "o", knowledge_column="facts"))[0].premise == "f"
    with pytest.raises(TrainDataError, match="knowledge_column: .* has no knowledge column 'know'"):
        read_pairs(str(path), TrainOptions(str(path), "o", knowledge_column="know"))


def test_q2_train_counts_its_steps_as_a_bar_on_a_terminal_in_plain_lines_in_a_log_and_not_with_no_progress(
        bases, train_file, tmp_path):
    """The steps of ``q2 train``: a bar redrawn in place at a terminal; plain ``q2 train: done/total steps`` lines in
    a log (the last at the total); nothing with ``--no-progress``; standard output keeps the summary
    (``--format json`` parses) either way."""
    import os
    import re
    import subprocess
    import sys

    from tests.pipeline.metric.test_progress import in_a_terminal

    repo = Path(__file__).resolve().parents[3]
    env = {**os.environ, "PYTHONPATH": str(repo), "TQDM_MININTERVAL": "0"}

    def argv(out: str) -> list[str]:
        return [sys.executable, "-m", "q2_plugins.cli", "train", "--train-file", str(train_file), "--output-dir",
                str(tmp_path / out), "--labels", "5", "--base", str(bases[5]), "--max-length", "48",
                "--max-steps", "6", "--per-device-train-batch-size", "2", "--logging-steps", "2", "--seed", "3",
                "--format", "json"]

    code, shown = in_a_terminal(argv("tty"), env, size=(24, 100))  # (the Trainer's bar: a terminal with a size)
    assert code == 0, shown[-2000:]
    states = [part for part in shown.split("\r") if re.search(r"\d+/6 \[", part)]
    assert len(states) >= 3 and re.search(r"\b6/6 \[", states[-1]), shown[-2000:]
    logged = subprocess.run(argv("log"), env=env, capture_output=True, text=True, timeout=600)
    assert logged.returncode == 0, logged.stderr[-2000:]
    lines = [line for line in logged.stderr.splitlines() if line.startswith("q2 train: ")]
    assert lines and re.match(r"q2 train: 6/6 steps \(100%\) in [\d.]+ s, [\d.]+ steps/s$", lines[-1]), lines
    assert "\r" not in logged.stderr and json.loads(logged.stdout)["steps"] == 6
    quiet = subprocess.run(argv("quiet") + ["--no-progress"], env=env, capture_output=True, text=True, timeout=600)
    assert quiet.returncode == 0 and "q2 train: " not in quiet.stderr and "\r" not in quiet.stderr, quiet.stderr
    assert json.loads(quiet.stdout)["steps"] == 6
