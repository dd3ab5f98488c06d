"""Hostile files and failed runs through ``q2 score``: every record read or reported by line, result files that
cannot destroy data, exit codes (docs/failures.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.io import inputs as q2io
from q2_plugins.io.inputs import read_rows

REPO = Path(__file__).resolve().parents[3]
GOOD = {"response": "paris is in france .", "knowledge": "Paris is the capital of France."}


@pytest.fixture(scope="module")
def model_flags(tiny_models):
    return ["--qg-model", str(tiny_models["qg_short"]), "--qa-model", str(tiny_models["qa"]), "--nli-model",
            str(tiny_models["nli"]), "--qg-max-length", "4", "--no-progress"]


def jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def read_out(path: Path) -> list[dict]:
    text = path.read_text(encoding="utf-8")  # valid UTF-8
    return [json.loads(line) for line in text.splitlines()]  # valid JSON, one row per line


# -- reading -------------------------------------------------------------------------------------------------------
def test_jsonl_lines_end_at_newline_only(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_bytes(b'\xef\xbb\xbf{"id": 1, "response": "a\rb"}\r\n{"id": 2,\r "response": "c"}\r\n\r\n{"id": 3}\n')
    rows = list(read_rows(p))
    assert [r.get("id") for r in rows] == [1, 2, 3]  # BOM skipped, CRLF tolerated, a bare CR stays in its record
    assert rows[0]["response"] == "a\rb"


def test_each_bad_jsonl_record_is_an_error_row_naming_its_line(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_bytes(b"\n".join([
        b'{"id": 1}',
        b"[" * 100_000,
        b'{"id": ' + b"9" * 5000 + b"}",
        b'{"id": "x", "response": "caf\xc3"}',
        b'{"id": NaN, "n": Infinity}',
        b"not json",
        b"[1, 2]",
        b'"a string"',
        b'{"id": 9}',
    ]) + b"\n")
    rows = list(read_rows(p))
    assert len(rows) == 9
    assert "line 2 is JSON nested too deeply" in rows[1]["__error__"]
    assert rows[2]["id"] == "9" * 5000  # kept as its digits
    offset = p.read_bytes().index(b"caf\xc3") + 3
    assert rows[3]["__error__"] == f"line 4 is not valid UTF-8: byte 0xc3 at byte offset {offset} of the file"
    assert rows[4] == {"id": "NaN", "n": "Infinity"}
    assert "line 6 is not valid JSON" in rows[5]["__error__"]
    assert "line 7 is a JSON list" in rows[6]["__error__"] and "line 8 is a JSON str" in rows[7]["__error__"]
    assert rows[8] == {"id": 9}


def test_an_over_long_record_is_an_error_row(tmp_path, monkeypatch):
    monkeypatch.setattr(q2io, "MAX_RECORD_BYTES", 1000)
    p = jsonl(tmp_path / "in.jsonl", [{"id": 1, "response": "x" * 5000}, {"id": 2}])
    rows = list(read_rows(p))
    assert rows == [{"__error__": "line 1 is over 1000 bytes; not read"}, {"id": 2}]


def test_csv_bom_huge_fields_bad_bytes(tmp_path):
    p = tmp_path / "in.csv"
    big = "word " * 60_000  # 300,000 characters: over the csv module's default field limit
    p.write_bytes(b"\xef\xbb\xbfid,response,knowledge\n" + f'1,"{big}",k\n'.encode()
                  + b"2,caf\xe9,k\n3,a,b,c\n4,ok,k\n5\n")
    rows = list(read_rows(p, required=("response", "knowledge")))
    assert rows[0]["response"] == big
    assert rows[1] == {"__error__": "line 3 is not valid UTF-8: byte 0xe9"}
    assert "line 4 has 4 fields" in rows[2]["__error__"]
    assert rows[3] == {"id": "4", "response": "ok", "knowledge": "k"}
    assert rows[4] == {"__error__": "line 6 has 1 fields; the header names 3"}  # too few: an error naming its line


@pytest.mark.parametrize("name, content", [("in.csv", "reply,passage\nhi,there\n"),
                                           ("in.jsonl", '{"reply": "hi", "passage": "there"}\n')])
def test_missing_columns_fail_before_scoring_listing_the_columns(tmp_path, capsys, name, content):
    p = tmp_path / name
    p.write_text(content)
    assert main(["score", "--input", str(p), "--qg-model", "/nonexistent"]) == 2  # before any model loads
    err = capsys.readouterr().err.strip()
    assert "no column(s) ['response', 'knowledge']; its columns are ['reply', 'passage']" in err
    assert err.startswith("q2 score: error: --response-column / --knowledge-column: ") and len(err.splitlines()) == 1


def test_missing_columns_name_the_settings_in_the_library(tmp_path):
    from q2_plugins.io.inputs import MissingColumnsError, read_rows
    from q2_plugins.io.rows import RowSpec

    p = tmp_path / "in.jsonl"
    p.write_text('{"response": "hi", "passage": "there", "turns": "a"}\n')
    spec = RowSpec(history_column="history")
    with pytest.raises(MissingColumnsError) as e:
        read_rows(p, None, spec.required, spec.settings)
    assert e.value.setting == "knowledge_column / history_column" and "--" not in str(e.value)
    assert str(e.value).startswith("knowledge_column / history_column: ")


def test_an_unknown_extension_names_the_format_setting(tmp_path, capsys):
    from q2_plugins.io.inputs import UnknownFormatError, read_rows

    p = tmp_path / "in.txt"
    p.write_text('{"response": "hi", "knowledge": "there"}\n')
    with pytest.raises(UnknownFormatError, match="^input_format: Cannot tell the format of .*in.txt"):
        read_rows(p)
    assert main(["score", "--input", str(p), "--qg-model", "/nonexistent"]) == 2
    assert capsys.readouterr().err.startswith("q2 score: error: --input-format: Cannot tell the format")
    other = tmp_path / "other.txt"
    other.write_text(p.read_text())
    assert main(["compare", str(p), str(other)]) == 2  # compare has no format flag: its message names none
    err = capsys.readouterr().err
    assert "--input-format" not in err and "name a .jsonl, .parquet, .csv or .tsv results file" in err


# -- model load failure through the command ----------------------------------------------------------------------
@pytest.mark.parametrize("extra", [[], ["--qg-model", "/nonexistent"]])
def test_model_load_failure_exits_at_once_with_one_line(tmp_path, extra):
    env = {**os.environ, "HF_HOME": str(tmp_path / "hf"), "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(REPO)}
    out = tmp_path / "out.jsonl"
    proc = subprocess.run([sys.executable, "-m", "q2_plugins.cli", "score", "--input",
                           str(REPO / "q2_plugins" / "data" / "sample.jsonl"), "--output", str(out), *extra],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2
    lines = [x for x in proc.stderr.splitlines() if x.startswith("q2 score")]
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert "Cannot load the QG model" in lines[0] and "(setting --qg-model)" in lines[0]
    if extra:  # a local folder that does not exist: said so, with no advice about the network
        assert "the folder /nonexistent does not exist" in lines[0] and "prefetch" not in lines[0]
    else:
        assert "q2 prefetch" in lines[0] and "point --qg-model at the copy" in lines[0]
    assert not out.exists() and not Path(str(out) + ".partial").exists()


# -- output that cannot destroy data -------------------------------------------------------------------------------
def test_output_equal_to_input_is_refused(tmp_path, capsys, model_flags):
    p = jsonl(tmp_path / "in.jsonl", [GOOD])
    before = p.read_bytes()
    (tmp_path / "link.jsonl").symlink_to(p)
    for target in (str(p), str(tmp_path / "." / "in.jsonl"), str(tmp_path / "link.jsonl")):
        assert main(["score", "--input", str(p), "--output", target, *model_flags]) == 2
        assert "is the input file" in capsys.readouterr().err
    assert p.read_bytes() == before


def test_missing_input_leaves_the_output_alone(tmp_path, capsys):
    out = tmp_path / "out.jsonl"
    out.write_text("precious\n")
    assert main(["score", "--input", str(tmp_path / "nope.jsonl"), "--output", str(out)]) == 2
    assert out.read_text() == "precious\n" and "No input file" in capsys.readouterr().err


@pytest.mark.parametrize("exc", [MemoryError, KeyboardInterrupt])
def test_a_failed_run_keeps_the_old_file_and_its_rows_so_far(tmp_path, capsys, model_flags, monkeypatch, exc):
    from q2_plugins.scorer import Q2Scorer

    out = tmp_path / "out.jsonl"
    out.write_text("precious\n")
    (tmp_path / "out.jsonl.meta.json").write_text("{}\n")
    p = jsonl(tmp_path / "in.jsonl", [dict(GOOD, id=i) for i in range(6)])
    real, calls = Q2Scorer.score, []

    def dies_on_second_chunk(self, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise exc()
        return real(self, **kw)

    monkeypatch.setattr(Q2Scorer, "score", dies_on_second_chunk)
    argv = ["score", "--input", str(p), "--output", str(out), "--chunk-size", "3", *model_flags]
    if exc is KeyboardInterrupt:
        assert main(argv) == 130
    else:  # one line, no traceback (Q2_DEBUG=1 shows it)
        monkeypatch.delenv("Q2_DEBUG", raising=False)
        assert main(argv) == 1
    assert out.read_text() == "precious\n" and (tmp_path / "out.jsonl.meta.json").read_text() == "{}\n"
    partial = read_out(tmp_path / "out.jsonl.partial")
    assert [r["id"] for r in partial] == [0, 1, 2]
    err = capsys.readouterr().err
    assert f": 3 rows committed to {out}.partial, {out} left as it was; to continue: q2 score " in err


def test_a_complete_run_replaces_the_file_and_writes_its_meta(tmp_path, capsys, model_flags):
    out = tmp_path / "out.jsonl"
    out.write_text("old\n")
    p = jsonl(tmp_path / "in.jsonl", [dict(GOOD, id=float("nan")), dict(GOOD, id="\ud800"), {"id": [1, {"a": 2}]}])
    assert '"id": NaN' in p.read_text()  # (json.dumps writes NaN bare, as users' files hold it)
    assert main(["score", "--input", str(p), "--output", str(out), *model_flags]) == 0
    rows = read_out(out)
    assert [r["id"] for r in rows] == ["NaN", "\ud800", [1, {"a": 2}]]
    assert [r["row"] for r in rows] == [0, 1, 2] and not Path(f"{out}.partial").exists()
    meta = json.loads(Path(f"{out}.meta.json").read_text(encoding="utf-8"))
    assert {"signature", "summary", "config", "version", "rows"} <= set(meta)
    assert meta["rows"] == 3 and meta["summary"]["n"] == 3 and meta["signature"].startswith("q2:")
    assert meta["config"]["qg_max_length"] == 4 and meta["exit_code"] == 0
    assert meta["summary"]["errors"] == [
        {"message": "no field(s) ['response', 'knowledge']; this record's fields are ['id']", "count": 1}]


def test_output_dash_is_standard_output(tmp_path, capsys, model_flags):
    p = jsonl(tmp_path / "in.jsonl", [GOOD, {"response": "", "knowledge": "k"}])
    assert main(["score", "--input", str(p), "--output", "-", "--format", "json", *model_flags]) == 0
    cap = capsys.readouterr()
    rows = [json.loads(x) for x in cap.out.splitlines()]
    assert [r["row"] for r in rows] == [0, 1] and rows[1]["error"] == "response is empty"
    summary = json.loads(cap.err[cap.err.index("{"):])
    assert summary["n"] == 2 and summary["errors"] == [{"message": "response is empty", "count": 1}]
    assert not (tmp_path / "-").exists() and not Path("-").exists()


# -- exit codes and the error summary ------------------------------------------------------------------------------
def test_no_row_scored_is_a_failed_run(tmp_path, capsys, model_flags):
    p = jsonl(tmp_path / "in.jsonl", [{"response": "", "knowledge": "k"}] * 3 + [{"response": 5, "knowledge": "k"}])
    assert main(["score", "--input", str(p), "--output", str(tmp_path / "o.jsonl"), *model_flags]) == 1
    cap = capsys.readouterr()
    assert "     3 x  response is empty" in cap.out and "     1 x  response must be a string, got int" in cap.out
    assert "q2 score: no row could be scored (4 rows, 4 errors)" in cap.err
    assert len(read_out(tmp_path / "o.jsonl")) == 4  # the rows are still written, each with its error


def test_fail_on_error(tmp_path, capsys, model_flags):
    p = jsonl(tmp_path / "in.jsonl", [GOOD, {"response": " ", "knowledge": "k"}])
    assert main(["score", "--input", str(p), *model_flags]) == 0
    assert main(["score", "--input", str(p), "--fail-on-error", *model_flags]) == 1
    assert "1 of 2 rows have errors (fail_on_error)" in capsys.readouterr().err


def test_error_kinds_are_counted_with_their_first_message(tmp_path, capsys, model_flags):
    p = tmp_path / "in.jsonl"
    p.write_text("\n".join(["bad"] * 4 + [json.dumps(GOOD)] + [json.dumps({"response": "x"})] * 2
                           + [json.dumps({"response": str(i), "knowledge": ""}) for i in range(8)]) + "\n")
    assert main(["score", "--input", str(p), "--format", "json", *model_flags]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["errors"][0] == {"message": "line 1 is not valid JSON: Expecting value (column 1)", "count": 4}
    assert summary["errors"][1]["count"] == 2 and "no field(s) ['knowledge']" in summary["errors"][1]["message"]
    assert summary["errors"][2] == {"message": "knowledge is empty", "count": 8}
    assert summary["n_error_kinds"] == 3


def test_docs_examples_run():
    from tests.conftest import _doc_blocks

    blocks = _doc_blocks(REPO / "docs" / "failures.md", "failures")
    assert blocks
    for lang, code in blocks:
        assert lang == "python"
        exec(compile(code, "docs/failures.md", "exec"), {})


def test_an_empty_input_is_a_failed_run(tmp_path, capsys, model_flags):
    p = tmp_path / "in.jsonl"
    p.write_bytes(b"\xef\xbb\xbf\n\r\n   \n")
    assert main(["score", "--input", str(p), *model_flags]) == 2  # no record: one line, as a header-only CSV
    assert capsys.readouterr().err == f"q2 score: error: {p} is empty (no record); there is nothing to score\n"
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n{also bad\n")
    assert main(["score", "--input", str(bad), *model_flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "None of its records could be read; the first: line 1 is not valid JSON" in err
    c = tmp_path / "in.csv"
    c.write_text("response,knowledge\n")
    assert main(["score", "--input", str(c), *model_flags]) == 2  # before any model loads (tests/unit/test_cli_errors)
    assert capsys.readouterr().err == f"q2 score: error: {c} holds only a CSV header, no record; there is nothing to " \
                                      f"score\n"


# -- one form for what stops a run: one line, exit 2, before any model loads, the cause first
# ---------------------------
def _no_models(monkeypatch):
    """Fail the test if a model starts loading: these runs must stop before."""
    from q2_plugins import scorer

    def refuse(self, *args, **kwargs):
        raise AssertionError("a model started loading")

    monkeypatch.setattr(scorer.Q2Scorer, "load", refuse)


ENCODINGS = [
    ("in.csv", "response,knowledge\nhi,there\n".encode("utf-16"), "in.csv is UTF-16 (has a UTF-16 byte-order mark)"),
    ("in.jsonl", (json.dumps(GOOD) + "\n").encode("utf-16-le"), "in.jsonl is UTF-16 (every other byte is zero)"),
    ("in.jsonl", (json.dumps(GOOD) + "\n").encode("utf-32"), "in.jsonl is UTF-32 (has a UTF-32 byte-order mark)"),
    ("in.csv", "response,knowledge\ncafé is open,Le café est ouvert\n".encode("cp1252"),
     "in.csv is not UTF-8 but reads as Windows-1252 / Latin-1 (line 2: byte 0xe9 is not UTF-8): save it as UTF-8"),
    ("in.jsonl", (json.dumps(GOOD, ensure_ascii=False).replace("paris", "café") + "\n").encode("latin-1"),
     "in.jsonl is not UTF-8 but reads as Windows-1252 / Latin-1 (line 1: byte 0xe9 at byte offset 17 of the file is "
     "not UTF-8): save it as UTF-8"),
    ("in.tsv", b"response\tknowledge\n\x81\x8d\t\x90\n", "in.tsv is not UTF-8: its records cannot be decoded (line 2: "
                                                       "byte 0x81); save it as UTF-8"),
]


@pytest.mark.parametrize("name, data, cause", ENCODINGS)
def test_a_file_in_another_encoding_stops_at_once_naming_it(tmp_path, capsys, monkeypatch, name, data, cause):
    _no_models(monkeypatch)
    monkeypatch.chdir(tmp_path)
    Path(name).write_bytes(data)
    assert main(["score", "--input", name, "--output", "out.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"q2 score: error: {cause}") and err.count("\n") == 1, err
    assert not Path("out.jsonl").exists()


def test_one_row_with_a_bad_byte_is_still_that_rows_error(tmp_path):
    p = tmp_path / "in.csv"
    p.write_bytes(b"response,knowledge\nfine,ok\ncaf\xe9,ok\n")
    rows = list(read_rows(p))
    assert rows[0] == {"response": "fine", "knowledge": "ok"} and rows[1] == {"__error__": "line 3 is not valid "
                                                                                         "UTF-8: byte 0xe9"}


def test_a_missing_input_of_a_recipe_is_one_line(tmp_path, capsys):
    assert main(["perturb", "--recipe", "conv-fever", "--input", str(tmp_path / "nope.json"),
                 "--output", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err == f"q2 perturb: error: {tmp_path / 'nope.json'}: no such file or directory\n"


@pytest.mark.parametrize("argv, suggestion", [
    (["score", "--ouput", "x"], "unrecognized argument --ouput; did you mean --output"),
    (["score", "--input", "in.jsonl", "--qg-modle", "x"], "unrecognized argument --qg-modle; did you mean --qg-model"),
    (["train", "--labls", "3"], "unrecognized argument --labls; did you mean --labels"),
    (["score", "--no-such-flag-at-all"], "unrecognized argument --no-such-flag-at-all\n"),
])
def test_a_misspelt_flag_suggests_the_close_one_in_the_commands_usage(capsys, argv, suggestion):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"q2 {argv[0]}: error: {suggestion}")  # the error first, then where the usage is
    assert len(err.splitlines()) == 2
    assert err.splitlines()[1].startswith(f"usage: q2 {argv[0]} ")  # the command's own usage, not the top level's
    assert err.splitlines()[1].endswith(f"[options]; every flag: q2 {argv[0]} --help")


@pytest.mark.parametrize("argv, first, usage", [
    (["score"], "q2 score: error: the following arguments are required: --input",
     "usage: q2 score --input FILE [options]; every flag: q2 score --help"),
    ([], "q2: error: the following arguments are required: command",
     "usage: q2 COMMAND [options]; every flag: q2 --help"),
    (["scroe"], "q2: error: argument command: invalid choice: 'scroe'", "usage: q2 COMMAND [options]"),
    (["score", "--input", "x", "--chunk-size", "many"], "q2 score: error: argument --chunk-size: invalid int value",
     "usage: q2 score --input FILE [options]"),
    (["report", "r.jsonl"], "q2 report: error: the following arguments are required: --output",
     "usage: q2 report RESULTS --output OUTPUT [options]"),
])
def test_a_usage_error_is_two_lines_the_error_and_where_the_usage_is(capsys, argv, first, usage):
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and lines[0].startswith(first) and lines[1].startswith(usage), lines


def test_abbreviated_flags_still_work():
    from q2_plugins.cli import build_parser

    assert build_parser().parse_args(["score", "--input", "x.jsonl", "--outp", "y.jsonl"]).output == "y.jsonl"


def test_score_labels_are_begin_labels_and_train_labels_a_count(capsys):
    from q2_plugins.cli import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["score", "--input", "x", "--labels"])
    assert "unrecognized argument --labels; did you mean --begin-labels?" in capsys.readouterr().err
    assert build_parser().parse_args(["score", "--input", "x", "--begin-labels"]).labels is True
    assert capsys.readouterr().err == ""
    assert build_parser().parse_args(["train", "--train-file", "f", "--output-dir", "d", "--labels", "5"]).labels == 5


def test_score_without_output_says_that_nothing_was_saved(tmp_path, capsys, model_flags):
    p = jsonl(tmp_path / "in.jsonl", [GOOD])
    assert main(["score", "--input", str(p), *model_flags]) == 0
    captured = capsys.readouterr()
    last = captured.err.splitlines()[-1]
    assert last == ("q2 score: no --output: the per-response results were not saved, only the summary above "
                    "(name a file, or - for standard output)")
    assert "Q2" in captured.out and sorted(x.name for x in tmp_path.iterdir()) == ["in.jsonl"]
