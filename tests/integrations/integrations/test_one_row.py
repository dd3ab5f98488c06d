"""One result row for both engines: ``q2 score`` with the local engine and with ``--engine ray`` (JSONL, Parquet and
CSV output) on the same input, with the tiny random-weight models, then ``q2 report`` (with and without ``--texts``),
``q2 compare`` and ``q2 meta-eval --scores`` on every output: the same rows and the same figures from each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import optional_import

optional_import("ray", "ray")

import ray  # noqa: E402

from q2_plugins.cli import main  # noqa: E402
from q2_plugins.io.rows import read_results  # noqa: E402
from q2_plugins.metric.results import EXPLANATION_FIELDS, RESULT_FIELDS  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"
RAY_OUTPUTS = ("ray.jsonl", "ray.parquet", "ray.csv")


@pytest.fixture(scope="module")
def runs(tiny_models, tmp_path_factory) -> Path:
    """The input (the sample, a record with a field named like a result field, rows the core rejects), scored by
    each engine with explanations and labels: ``local.jsonl`` and the Ray outputs in ``RAY_OUTPUTS``."""
    root = tmp_path_factory.mktemp("one-row")
    records = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    records[1]["label"] = "a field of the input named like a result field"
    records[2]["response"] = ""
    records[3]["knowledge"] = None
    (root / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    flags = ["--qg-model", str(tiny_models["qg_short"]), "--qa-model", str(tiny_models["qa"]), "--nli-model",
             str(tiny_models["nli"]), "--qg-max-length", "12", "--no-progress", "--input", str(root / "in.jsonl"),
             "--explain", "--begin-labels", "--format", "json"]
    assert main(["score", *flags, "--output", str(root / "local.jsonl")]) == 0
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        for name in RAY_OUTPUTS:
            assert main(["score", *flags, "--engine", "ray", "--output", str(root / name), "--ray-batch-size",
                         "5"]) == 0
    finally:
        ray.shutdown()
    return root


def result_part(row: dict) -> dict:
    """What a result row says of its response: its position, id and every result and explanation field."""
    return {k: row.get(k) for k in ("row", "id", *RESULT_FIELDS, *EXPLANATION_FIELDS)}


@pytest.mark.parametrize("name", RAY_OUTPUTS)
def test_both_engines_write_the_same_rows(runs, name):
    local, other = read_results(runs / "local.jsonl"), read_results(runs / name)
    assert len(local.rows) == len(other.rows) == 12
    assert [result_part(r) for r in other.rows] == [result_part(r) for r in local.rows]
    statuses = {r["status"] for r in local.rows}
    assert "error" in statuses and len(statuses) > 1
    assert any(r["questions"] for r in local.rows) or any(r["dropped"] for r in local.rows)
    # the input fields are kept, one named like a result field under input_
    assert local.rows[1]["input_label"] == other.rows[1]["input_label"] != local.rows[1]["label"]
    assert [r["response"] for r in other.rows] == [r["response"] for r in local.rows]
    assert other.signatures == local.signatures and len(local.signatures) == 1
    if name.endswith(".jsonl"):  # explanations nested in JSONL, as the local engine writes them
        first = json.loads((runs / name).read_text().splitlines()[0])
        assert isinstance(first["dropped"], list)


@pytest.mark.parametrize("name", RAY_OUTPUTS)
@pytest.mark.parametrize("texts", [False, True])
def test_report_reads_either_engine(runs, name, texts, capsys):
    pages = {}
    for source in ("local.jsonl", name):
        page = runs / f"{source}.{texts}.html"
        assert main(["report", str(runs / source), "--output", str(page),
                     *(["--texts", str(runs / "in.jsonl")] if texts else [])]) == 0
        pages[source] = capsys.readouterr().out.split(": ", 1)[1]
    assert pages["local.jsonl"] == pages[name] == "12 responses (2 errors) from 1 file\n"

    from q2_plugins.jobs.report import attach_texts, load_results

    local, other = load_results([runs / "local.jsonl"]), load_results([runs / name])
    if texts:
        for data in (local, other):
            attach_texts(data, runs / "in.jsonl")
    assert other.summary == local.summary and local.summary["n_errors"] == 2
    assert not [r for r in other.rows if "not a Q² result row" in str(r.get("error"))]
    keys = ("status", "score", "response", "knowledge", "questions", "dropped")

    def shown(row: dict) -> dict:  # (CSV cannot tell a missing text from an empty one)
        return {k: row.get(k) or None for k in keys}

    assert [shown(r) for r in other.rows] == [shown(r) for r in local.rows]
    assert sum(isinstance(r.get("response"), str) for r in other.rows) == 12  # every row shows its response


def test_compare_reads_either_engine(runs, capsys):
    files = [str(runs / n) for n in ("local.jsonl", *RAY_OUTPUTS)]
    assert main(["compare", *files, "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["paired_by"], out["n"]) == ("id", 12)
    assert out["scores_signature"] == read_results(runs / "local.jsonl").signatures[0]
    base = out["systems"][0]
    for system in out["systems"][1:]:
        assert system["q2"]["value"] == base["q2"]["value"] and system["q2"]["diff"] == 0
        assert system["coverage"]["value"] == base["coverage"]["value"]
        assert (system["n_scored"], system["n_fallback"]) == (base["n_scored"], base["n_fallback"])


def test_meta_eval_reads_either_engine(runs, capsys):
    data = ["meta-eval", "--dataset", "table", "--data", str(runs / "in.jsonl"), "--label-column", "human_label",
            "--consistent-labels", "consistent", "--id-column", "id", "--baselines", "none", "--format", "json",
            "--experiments", "response", "--reps", "20"]
    reports = {}
    for name in ("local.jsonl", *RAY_OUTPUTS):
        assert main([*data, "--scores", f"q2={runs / name}"]) == 0, capsys.readouterr().err
        reports[name] = json.loads(capsys.readouterr().out)["response_level"]
    local = reports.pop("local.jsonl")
    assert "q2" in local["metrics"]  # (with "q2 w/o NLI" when the two differ somewhere)
    for name, report in reports.items():
        assert report == local, name
