"""``q2 compare``: pairing, refusals that name what differs, the table and the JSON, seeds in the signature."""

from __future__ import annotations

import json

import pytest

from q2_plugins.cli import main


def _write(path, rows, meta=None):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    if meta is not None:
        (path.parent / (path.name + ".meta.json")).write_text(json.dumps(meta), encoding="utf-8")
    return str(path)


def _rows(scores, ids=True, status=True):
    out = []
    for i, s in enumerate(scores):
        row = {"score": s}
        if ids:
            row["id"] = f"r{i}"
        if status:
            row["status"] = "no_valid_question" if s is None else ("fallback" if i % 7 == 0 else "scored")
        out.append(row)
    return out


def _json(capsys, argv):
    assert main(argv + ["--format", "json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_pairs_by_id_whatever_the_order(tmp_path, capsys):
    base = _rows([0.1 * (i % 10) for i in range(60)])
    better = _rows([min(1.0, 0.1 * (i % 10) + 0.3) for i in range(60)])
    a = _write(tmp_path / "a.jsonl", base)
    b = _write(tmp_path / "b.jsonl", list(reversed(better)))
    out = _json(capsys, ["compare", a, b, "--seed", "3"])
    q2 = out["systems"][1]["q2"]
    assert q2["diff"] == pytest.approx(sum(r["score"] for r in better) / 60 - sum(r["score"] for r in base) / 60)
    assert q2["significant"] and q2["p_value"] < 0.05 and q2["diff_interval"]["low"] > 0
    assert out["paired_by"] == "id" and "seed:3" in out["signature"] and "resamples:1000" in out["signature"]
    assert out["systems"][1]["coverage"]["p_value"] == 1.0  # the same responses have questions


def test_unscored_responses_leave_the_mean_and_the_text_says_so(tmp_path, capsys):
    a = _write(tmp_path / "a.jsonl", _rows([0.5, None, 1.0, 0.0]))
    b = _write(tmp_path / "b.jsonl", _rows([1.0, 1.0, None, None]))
    out = _json(capsys, ["compare", a, b, "--paired-ar", "--paired-ar-n", "200"])
    assert [s["q2"]["value"] for s in out["systems"]] == [pytest.approx(0.5), pytest.approx(1.0)]
    assert out["systems"][1]["coverage"]["value"] == pytest.approx(0.25)  # row 0 is a fallback, row 1 scored
    assert "trials:200" in out["signature"] and out["systems"][1]["q2"]["interval"] is None
    assert main(["compare", a, b]) == 0
    text = capsys.readouterr().out
    assert "left out (a 1, b 2)" in text and '"Significant" means different' in text


def test_same_seed_same_output_and_by_row_without_ids(tmp_path, capsys):
    a = _write(tmp_path / "a.csv", [])
    (tmp_path / "a.csv").write_text("score\n0.1\n0.9\n0.4\n0.7\n", encoding="utf-8")
    (tmp_path / "b.csv").write_text("score\n0.2\n0.8\n0.9\n0.9\n", encoding="utf-8")
    b = str(tmp_path / "b.csv")
    first = _json(capsys, ["compare", a, b, "--seed", "1"])
    assert _json(capsys, ["compare", a, b, "--seed", "1"]) == first
    assert _json(capsys, ["compare", a, b, "--seed", "2"]) != first
    assert first["paired_by"] == "row" and "coverage" not in first["systems"][0]


@pytest.mark.parametrize("case, message", [
    ("ids", "hold different responses: 1 ids only in"),
    ("signature", "different signatures"),
    ("rows", "pair by row"),
    ("score", "line 2: score is 'high', not a number"),
])
def test_refusals_name_what_differs(tmp_path, capsys, case, message):
    a = _write(tmp_path / "a.jsonl", _rows([0.1, 0.2, 0.3], ids=case != "rows"), {"signature": "q2:x"})
    rows = _rows([0.1, 0.2, 0.3], ids=case != "rows")
    if case == "ids":
        rows[2]["id"] = "other"
    if case == "rows":
        rows = rows[:2]
    if case == "score":
        rows[1]["score"] = "high"
    b = _write(tmp_path / "b.jsonl", rows, {"signature": "q2:y" if case == "signature" else "q2:x"})
    assert main(["compare", a, b]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_the_report_compares_files_that_pair_and_says_why_not_otherwise(tmp_path):
    from q2_plugins.jobs.report import comparison_of_files

    a = _write(tmp_path / "a.jsonl", _rows([0.1, 0.9, 0.5]))
    b = _write(tmp_path / "b.jsonl", _rows([0.2, 0.1, 0.5]))
    got = comparison_of_files([a, b])
    assert got["format"] == "q2-compare" and got["largest_differences"][0] == {
        "id": "r1", "scores": [0.9, 0.1], "largest_gap": pytest.approx(0.8)}
    c = _write(tmp_path / "c.jsonl", _rows([0.2, 0.1]))
    notes: list = []
    assert comparison_of_files([a, c], notes) is None and "no paired comparison" in notes[0]


def test_a_file_without_a_signature_is_compared_and_the_output_says_so(tmp_path, capsys):
    a = _write(tmp_path / "a.jsonl", _rows([0.1, 0.2, 0.3]), {"signature": "q2:x"})
    b = _write(tmp_path / "b.jsonl", _rows([0.3, 0.2, 0.1]))
    assert main(["compare", a, b]) == 0
    assert "scores      q2:x (not checked for b: no signature in the file)" in capsys.readouterr().out
    out = _json(capsys, ["compare", a, b])
    assert out["scores_signature"] == "q2:x" and [s["signature"] for s in out["systems"]] == ["q2:x", None]
