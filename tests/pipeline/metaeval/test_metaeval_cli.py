"""``q2 meta-eval`` end to end: the recorded run's figures, reproducibility, the export / score / evaluate loop,
format errors, and on-the-fly scoring with tiny models."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from q2_plugins.cli import main
from tests.conftest import optional_import

SUBSET_MEANS_Q2 = {"dodeca_consistent": 0.692, "dodeca_inconsistent": 0.251, "memnet_consistent": 0.771,
                   "memnet_inconsistent": 0.124}


def run_json(capsys, *argv) -> dict:
    assert main(["meta-eval", *argv, "--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.slow
def test_replay_of_the_original_run_prints_the_paper_figures(shared_data, tmp_path, capsys):
    """The full default run (1000 repetitions) from the recorded outputs, with plots (about 10 s on an idle
    2-core machine, most of it importing spaCy, scikit-learn and matplotlib): no --data and a bare --replay read the
    bundled annotations and recorded run."""
    out = tmp_path / "out"
    code = main(["meta-eval", "--dataset", "wow", "--replay", "--output-dir", str(out)])
    text = capsys.readouterr().out
    assert code == 0
    assert "| Q2 | 600 | 77.33% |" in text
    assert "| Q2 w/o NLI | 600 | 73.50% |" in text
    assert "| dodeca_consistent | 150 | 0.692 | 0.525 |" in text
    assert "| dodeca_inconsistent | 150 | 0.251 | 0.162 |" in text
    assert "| Q2 | 23 of 244 |" in text  # recorded Q² covers both responses of only 23 system-level contexts
    q2_row = next(line for line in text.splitlines() if line.startswith("| Q2 | 23 of 244 |"))
    assert q2_row.endswith("| 0.9697 |")  # the paper's figure beside the measured one, and why they differ:
    assert "The paper's 0.9697 for Q2 comes from simulated systems drawn from all 244 contexts" in text
    assert "only 23 of them" in text and "not comparable" in text
    report = json.loads((out / "report.json").read_text())
    assert Path(report["data"]["source"]) == shared_data / "q2_wow"
    rl = report["response_level"]["metrics"]
    assert round(100 * rl["Q2"]["accuracy"], 2) == 77.33 and round(100 * rl["Q2 w/o NLI"]["accuracy"], 2) == 73.50
    rows = {r["subset"]: r for r in report["subsets"]["rows"]}
    for subset, mean in SUBSET_MEANS_Q2.items():
        assert round(rows[subset]["mean"]["Q2"], 3) == mean
    q = rows["dodeca_inconsistent"]["questions"]["Q2"]
    assert (q["questions"], round(q["no_answer_rate"], 4)) == (313, 0.5431)
    sl = report["system_level"]
    assert (sl["n_one_inconsistent"], sl["reps"], sl["size"]) == (244, 1000, 350)
    assert sl["per_metric"]["Overlap"]["n_contexts"] == 244 and sl["common"]["n_contexts"] == 23
    assert report["robustness"]["levels"] == [round(0.1 * i, 1) for i in range(11)]
    names = {Path(p).name for p in report["plots"]}
    assert {"pr_curve.png", "robustness.png", "hist_q2.png", "hist_q2_w_o_nli.png", "hist_overlap.png"} <= names
    for p in report["plots"]:
        assert Path(p).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and Path(p).stat().st_size > 10_000


def test_same_seed_same_numbers(shared_data, capsys):
    argv = ["--dataset", "wow", "--data", str(shared_data / "q2_wow"), "--replay",
            str(shared_data / "q2_original_run"), "--baselines", "bleu", "--reps", "60",
            "--experiments", "system,robustness,random-knowledge", "--tune-threshold"]
    first = run_json(capsys, *argv)
    assert first == run_json(capsys, *argv)
    other = run_json(capsys, *argv, "--seed", "7")
    assert other["system_level"] != first["system_level"] and other["robustness"] != first["robustness"]
    assert other["random_knowledge"] != first["random_knowledge"]


def test_export_score_evaluate_loop(shared_data, tmp_path, capsys):
    data = ["--dataset", "wow", "--data", str(shared_data / "q2_wow")]
    inputs = tmp_path / "inputs.jsonl"
    assert main(["meta-eval", *data, "--export-inputs", str(inputs)]) == 0
    assert "wrote 1969 inputs" in capsys.readouterr().out  # 600 + 488 cross-annotation + 281 + 600 random knowledge
    rows = [json.loads(line) for line in inputs.read_text().splitlines()]
    # stand-in for `q2 score --input inputs.jsonl --output scores.jsonl`: a metric that knows the labels
    scores = tmp_path / "scores.jsonl"
    with scores.open("w") as f:
        for i, row in enumerate(rows):
            value = 0.1 if row["id"].startswith("random-knowledge/") else (0.9 if row["label"] == "consistent" else 0.2)
            f.write(json.dumps({"row": i, "id": row["id"], "index": i, "status": "scored", "score": value,
                                "score_no_nli": value, "num_questions": 1, "num_candidates": 1,
                                "used_fallback": False, "fallback_label": None, "error": None}) + "\n")
    report = run_json(capsys, *data, "--scores", f"oracle={scores}", "--baselines", "none", "--reps", "50")
    assert report["response_level"]["metrics"]["oracle"]["accuracy"] == 1.0
    assert report["system_level"]["per_metric"]["oracle"]["n_contexts"] == 244
    assert report["system_level"]["per_metric"]["oracle"]["spearman_mean"] == 1.0
    assert report["random_knowledge"]["other_dialogue"]["subsets"]["all"]["oracle"]["substituted"] == 0.1
    # a different seed draws other random knowledge: those inputs were not scored, and say so
    other = run_json(capsys, *data, "--scores", f"oracle={scores}", "--baselines", "none", "--reps", "50",
                     "--seed", "1", "--experiments", "random-knowledge")
    assert other["random_knowledge"]["other_dialogue"]["subsets"]["all"]["oracle"]["n"] < 20


@pytest.mark.parametrize("argv, message", [
    (["--dataset", "begin", "--data", "{wow}/dodeca_consistent.csv"], "is not a BEGIN (v1 TSV, or v2 TSV"),
    (["--dataset", "wow", "--data", "{wow}/dodeca_consistent.csv"], "is not a folder"),
    (["--dataset", "wow", "--data", "{wow}", "--label-column", "gold"], "--label-column only apply to --dataset table"),
    (["--dataset", "table", "--data", "{wow}/dodeca_consistent.csv"],
     "error: --consistent-labels: name the label values"),
    (["--dataset", "wow", "--data", "{wow}", "--scores", "{wow}/cross_annotation.csv"],
     "cross_annotation.csv line 2 is not a result row: no 'status' or 'score' field"),  # the readers' one verdict
    (["--dataset", "wow", "--data", "{wow}", "--replay", "{wow}"], "not a recorded run"),
    (["--dataset", "wow", "--data", "{wow}", "--replay", "{wow}/none"], "error: --replay: expects the folder"),
    (["--dataset", "table", "--data", "{wow}/dodeca_consistent.csv", "--label-column", "gold",
      "--consistent-labels", "1", "--score-column", "alignscore"], "error: --score-column: "),
])
def test_format_errors_exit_2_with_a_message(shared_data, capsys, argv, message):
    argv = [a.replace("{wow}", str(shared_data / "q2_wow")) for a in argv]
    assert main(["meta-eval", *argv, "--baselines", "none"]) == 2
    assert message in capsys.readouterr().err


# -- with tiny random-weight models: the machinery, not the numbers ----------------------------------------------
@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, Path]:
    from q2_plugins.backends.hf.tiny import build_all

    return build_all(tmp_path_factory.mktemp("tiny-models"))


@pytest.fixture()
def small_table(tmp_path) -> Path:
    sample = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"
    rows = [json.loads(line) for line in sample.read_text().splitlines()][:6]
    path = tmp_path / "table.jsonl"
    path.write_text("".join(json.dumps({"response": r["response"], "knowledge": r["knowledge"],
                                        "human": "ok" if i % 2 else "bad"}) + "\n" for i, r in enumerate(rows)))
    return path


@pytest.mark.slow
def test_compute_on_the_fly_with_nli_baseline(tiny, small_table, tmp_path, capsys):
    models = ["--qg-model", str(tiny["qg"]), "--qa-model", str(tiny["qa"]), "--nli-model", str(tiny["nli"]),
              "--qg-max-length", "12"]
    data = ["--dataset", "table", "--data", str(small_table), "--label-column", "human", "--consistent-labels", "ok",
            "--experiments", "response,subsets"]
    saved = tmp_path / "scores.jsonl"
    report = run_json(capsys, *data, "--compute", "--save-scores", str(saved), "--baselines", "nli",
                      "--no-progress", *models)
    names = [m["name"] for m in report["metrics"]]
    assert names == ["Q2", "Q2 w/o NLI", "E2E NLI"]
    assert all(m["coverage"] == {"examples": 6, "of": 6} for m in report["metrics"])
    from q2_plugins.metric.signature import model_id

    assert model_id(str(tiny["nli"])) in report["metrics"][2]["signature"]
    assert "qg:local:sha256:" in report["metrics"][0]["signature"]
    # the saved results are a scores file: evaluating them gives the same figures
    again = run_json(capsys, *data, "--scores", str(saved), "--baselines", "none")
    assert again["response_level"]["metrics"]["Q2"] == report["response_level"]["metrics"]["Q2"]
    assert again["subsets"]["rows"][0]["mean"]["Q2"] == report["subsets"]["rows"][0]["mean"]["Q2"]


@pytest.mark.slow
def test_saved_scores_carry_their_signature_to_compare_and_report(tiny, small_table, tmp_path, capsys):
    models = ["--qg-model", str(tiny["qg"]), "--qa-model", str(tiny["qa"]), "--nli-model", str(tiny["nli"]),
              "--qg-max-length", "12"]
    data = ["--dataset", "table", "--data", str(small_table), "--label-column", "human", "--consistent-labels", "ok",
            "--experiments", "response", "--baselines", "none", "--no-progress"]
    saved = [tmp_path / "first.jsonl", tmp_path / "second.jsonl"]
    signatures, shorts = [], []
    for path in saved:
        report = run_json(capsys, *data, "--compute", "--save-scores", str(path), *models)
        meta = json.loads((tmp_path / f"{path.name}.meta.json").read_text())
        assert (meta["signature"], meta["rows"], meta["input"]) == (report["metrics"][0]["signature"], 6,
                                                                   str(small_table))
        assert meta["summary"]["n"] == 6 and meta["config"]["qg_max_length"] == 12 and meta["libraries"]
        signatures.append(meta["signature"])
        shorts.append(meta["signature_short"])
    assert signatures[0] == signatures[1] and "qg:local:sha256:" in signatures[0]
    assert main(["compare", *map(str, saved)]) == 0
    out = capsys.readouterr().out
    assert f"scores      {signatures[0]}\n" in out and "unknown" not in out
    page = tmp_path / "report.html"
    assert main(["report", str(saved[0]), "--output", str(page)]) == 0
    assert shorts[0] in page.read_text()
    from q2_plugins.jobs.report import load_results

    read = load_results([saved[0]])
    assert read.signatures == [signatures[0]] and read.summary is not None and read.summary["n"] == 6


@pytest.mark.slow
def test_bertscore_baseline_with_a_tiny_model(tiny):
    optional_import("bert_score", "bertscore")
    from q2_plugins.metaeval.baselines import BERTScoreBaseline

    b = BERTScoreBaseline(str(tiny["nli"]), num_layers=2, rescale_with_baseline=False)
    scores = b.score([("Paris is in France.", "Paris is the capital of France."), ("I like dogs.", "The river.")])
    assert len(scores) == 2 and all(-1.0 <= s <= 1.0 for s in scores)
    assert str(tiny["nli"]) in b.signature and "_L2_" in b.signature


@pytest.mark.slow
def test_export_then_real_q2_score_then_evaluate(tiny, small_table, tmp_path, capsys):
    models = ["--qg-model", str(tiny["qg"]), "--qa-model", str(tiny["qa"]), "--nli-model", str(tiny["nli"]),
              "--qg-max-length", "12"]
    data = ["--dataset", "table", "--data", str(small_table), "--label-column", "human", "--consistent-labels", "ok",
            "--experiments", "response,subsets,random-knowledge", "--baselines", "none"]
    inputs, scores = tmp_path / "inputs.jsonl", tmp_path / "scores.jsonl"
    assert main(["meta-eval", *data, "--export-inputs", str(inputs)]) == 0
    assert "wrote 12 inputs" in capsys.readouterr().out  # 6 examples + 6 with another example's knowledge
    assert main(["score", "--input", str(inputs), "--output", str(scores), "--explain", "--no-progress",
                 *models]) == 0
    capsys.readouterr()
    report = run_json(capsys, *data, "--scores", str(scores))
    # (random weights: if score equals score_no_nli everywhere, one metric is kept, with a note)
    assert report["metrics"][0]["name"] == "Q2"
    assert all(m["coverage"] == {"examples": 6, "of": 6} for m in report["metrics"])
    rows = {r["subset"]: r for r in report["subsets"]["rows"]}
    assert rows["all"]["questions"]["Q2"]["n"] == 6
    assert report["random_knowledge"]["other_dialogue"]["subsets"]["all"]["Q2"]["n"] == 6
