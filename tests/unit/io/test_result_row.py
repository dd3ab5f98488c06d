"""The result row is declared once (``RESULT_FIELDS`` / ``EXPLANATION_FIELDS``): the local writer, Ray's Arrow schema
and the reader derive from it."""

from __future__ import annotations

import csv
import dataclasses
import json

from q2_plugins.io.rows import kept_name, read_results, response_result, result_row
from q2_plugins.metric.results import EXPLANATION_FIELDS, RESULT_FIELDS, DroppedQuestion, ResponseResult


def explained() -> ResponseResult:
    return ResponseResult(index=0, status="scored", score=0.5, score_no_nli=0.25, num_questions=1,
                          num_candidates=2, candidates=["a", "b"], questions=[],
                          dropped=[DroppedQuestion("a", "what?", "personal")], label="consistent")


def test_every_declared_field_is_a_field_of_the_result():
    fields = {f.name: f for f in dataclasses.fields(ResponseResult)}
    assert set(RESULT_FIELDS) | set(EXPLANATION_FIELDS) <= set(fields)
    assert set(fields) - set(RESULT_FIELDS) - set(EXPLANATION_FIELDS) == {"index"}  # (a row has ``row``)


def test_the_local_writer_derives_from_the_declaration():
    record = {"id": "x", "response": "r", "knowledge": "k", "score": 3, "input_score": 4}
    row = result_row(7, record, explained(), explain=True)
    assert list(row) == ["row", "id", "response", "knowledge", "input_score", "input_input_score",
                         *RESULT_FIELDS, *EXPLANATION_FIELDS]
    assert (row["row"], row["input_score"], row["input_input_score"], row["score"]) == (7, 3, 4, 0.5)
    assert list(result_row(0, {"__error__": "line 1 is not valid JSON"}, explained())) == ["row", *RESULT_FIELDS]


def test_ray_schema_derives_from_the_declaration():
    from tests.conftest import optional_import

    pa = optional_import("pyarrow", "ray")
    ray_data = optional_import("ray", "ray") and optional_import("q2_plugins.jobs.ray.dataset", "ray")
    assert list(ray_data.OUTPUT_COLUMNS) == list(RESULT_FIELDS)
    assert list(ray_data.EXPLANATION_COLUMNS) == list(EXPLANATION_FIELDS)
    kinds = {str: pa.string(), float: pa.float64(), int: pa.int64(), bool: pa.bool_(), list: pa.string(),
             dict: pa.string()}
    assert {n: ray_data.arrow_type(t) for n, t in RESULT_FIELDS.items()} == ray_data.OUTPUT_COLUMNS
    assert all(ray_data.OUTPUT_COLUMNS[n] == kinds[t] for n, t in RESULT_FIELDS.items())
    assert set(ray_data.EXPLANATION_COLUMNS.values()) == {pa.string()}  # JSON text in Parquet / CSV


def test_the_reader_types_csv_and_legacy_rows(tmp_path):
    row = result_row(3, {"id": "x"}, explained(), explain=True)
    csv_row = {k: "" if v is None else json.dumps(v) if isinstance(v, (list, dict)) else str(v)
               for k, v in row.items()}
    path = tmp_path / "out.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(csv_row))
        writer.writeheader()
        writer.writerow(csv_row)
    legacy = tmp_path / "old.jsonl"  # the Ray engine's rows before the one layout
    old = {"id": "x", "q2_score": 0.5, "q2_status": "scored", "q2_score_no_nli": 0.25, "q2_num_questions": 1,
           "q2_error": None, "q2_explanation": json.dumps({k: v for k, v in explained().to_dict().items()})}
    legacy.write_text(json.dumps(old) + "\n")
    (read,), (was,) = read_results(path).rows, read_results(legacy).rows
    assert read == {**row, "id": "x"}
    assert response_result(read).to_dict() == {**explained().to_dict(), "index": 3}
    assert response_result(was).to_dict() == explained().to_dict()


def test_kept_name():
    assert [kept_name(n) for n in ("text", "row", "label", "input_label", "input_x")] == [
        "text", "input_row", "input_label", "input_input_label", "input_x"]


def test_every_front_end_writes_the_one_layout(tmp_path):
    """``q2 meta-eval --save-scores``, the report's rows of a ``Q2Result`` and lm-eval's ``q2_details`` write
    :func:`result_row`: ``row``, their ids and texts, the result fields, the explanation, then the signature where
    the front end writes it; a field named like one of the layout is kept as ``input_<name>``."""
    from q2_plugins.integrations.lm_eval.filter_patch import details_row
    from q2_plugins.jobs.report import result_rows
    from q2_plugins.metaeval.scores import write_scores_file
    from q2_plugins.metric.results import Q2Result

    layout = [*RESULT_FIELDS, *EXPLANATION_FIELDS]
    saved = tmp_path / "scores.jsonl"
    write_scores_file(saved, ["a", "b"], [explained(), explained()], signature="sig", config={}, source="data")
    rows = [json.loads(line) for line in saved.read_text().splitlines()]
    assert [list(r) for r in rows] == [["row", "id", *layout]] * 2 and [r["row"] for r in rows] == [0, 1]
    assert [response_result(r).to_dict() for r in read_results(saved).rows] == [
        {**explained().to_dict(), "index": i} for i in range(2)]
    report = result_rows(Q2Result([explained()], "sig"), responses=["r"], knowledge=["k"], ids=["x"])
    assert [list(r) for r in report] == [["row", "id", "response", "knowledge", *layout]]
    details = details_row(explained(), "r", "k", "sig")
    assert list(details) == ["row", "response", "knowledge", *layout, "signature"] and details["row"] is None
    clash = result_row(2, {"signature": "mine", "score": 1}, explained(), signature="sig")
    assert list(clash) == ["row", "input_signature", "input_score", *RESULT_FIELDS, "signature"]
    assert (clash["input_signature"], clash["signature"]) == ("mine", "sig")
    assert "input_signature" not in result_row(2, {"signature": "mine"}, explained())  # (kept as it is without one)
