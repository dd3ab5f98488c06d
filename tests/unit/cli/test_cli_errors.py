"""What reaches a person at the command line when a run cannot work: one line naming the fix and exit 2 (a bug: one
line and exit 1), before any model loads; ``Q2_DEBUG=1`` shows the traceback instead. From Python the same error
keeps its type."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from q2_plugins import Q2Config, Q2Scorer, cli
from q2_plugins.cli import main
from q2_plugins.metric.errors import SettingError
from tests.conftest import optional_import


def a_missing_device() -> str:
    """A torch device this machine does not have: cuda without a GPU, else one past its last GPU."""
    import torch

    return f"cuda:{torch.cuda.device_count()}" if torch.cuda.is_available() else "cuda"


@pytest.fixture
def rows(tmp_path) -> Path:
    path = tmp_path / "rows.jsonl"
    path.write_text(json.dumps({"response": "it aired on pbs .", "knowledge": "It aired on PBS."}) + "\n")
    return path


@pytest.fixture
def no_model_loads(monkeypatch):
    """A model load fails the test: the errors below must come first."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(Q2Scorer, "load", refuse)
    monkeypatch.setattr(Q2Scorer, "parts", refuse)


@pytest.mark.parametrize("flag", ["--device", "--qa-device"])
def test_a_device_that_is_not_here_is_one_line_naming_the_fix_before_any_model_loads(rows, capsys, flag,
                                                                                     no_model_loads):
    device = a_missing_device()
    assert main(["score", "--input", str(rows), flag, device]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"q2 score: error: {flag}: {device} is not available: "), err
    assert err.rstrip().endswith("set it to cpu")


def test_from_python_a_missing_device_keeps_its_type_and_names_the_setting_first():
    scorer = Q2Scorer(Q2Config(device=a_missing_device(), qg_model="./none", qa_model="./none", nli_model="./none"))
    with pytest.raises(SettingError) as e:
        scorer.load()  # before the (missing) model folders are even looked at
    assert isinstance(e.value, ValueError) and str(e.value).startswith("device: ")


def test_a_device_that_is_no_device_at_all_says_what_devices_are(rows, capsys, no_model_loads):
    assert main(["score", "--input", str(rows), "--device", "gpu0"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("q2 score: error: --device: 'gpu0' is not a torch device") and err.count("\n") == 1


def test_a_missing_extra_is_one_line_naming_the_extra(monkeypatch, capsys):
    def needs_sacrebleu(args):
        raise ModuleNotFoundError("No module named 'sacrebleu'", name="sacrebleu")

    monkeypatch.setitem(cli.COMMANDS, "compare", needs_sacrebleu)
    assert main(["compare", "a.jsonl", "b.jsonl"]) == 2
    err = capsys.readouterr().err
    assert err == ("q2 compare: error: No module named 'sacrebleu'; install it: pip install 'q2-plugins[metaeval]'"
                   "\n")


def test_our_own_missing_extra_message_is_kept_as_it_is(monkeypatch, capsys):
    from q2_plugins.metaeval.deps import require

    def needs(args):
        require("no_such_module_q2_test")

    monkeypatch.setitem(cli.COMMANDS, "compare", needs)
    assert main(["compare", "a.jsonl", "b.jsonl"]) == 2
    assert capsys.readouterr().err == ("q2 compare: error: The meta-evaluation needs no_such_module_q2_test (import "
                                       "'no_such_module_q2_test'), which is in the 'metaeval' extra: pip install "
                                       "'q2-plugins[metaeval]'\n")


def test_a_bug_is_one_line_with_exit_1_and_q2_debug_shows_its_traceback(monkeypatch, capsys):
    def bug(args):
        raise KeyError("oops")

    monkeypatch.setitem(cli.COMMANDS, "compare", bug)
    monkeypatch.delenv("Q2_DEBUG", raising=False)
    assert main(["compare", "a.jsonl", "b.jsonl"]) == 1
    assert capsys.readouterr().err == ("q2 compare: error: KeyError: 'oops' (an internal error; Q2_DEBUG=1 shows "
                                       "the traceback)\n")
    monkeypatch.setenv("Q2_DEBUG", "1")
    with pytest.raises(KeyError, match="oops"):
        main(["compare", "a.jsonl", "b.jsonl"])
    with pytest.raises(SettingError):  # a user's error too: its traceback, as asked
        main(["score", "--input", "x.jsonl", "--device", "gpu0"])


# -- inputs that hold nothing to score, and paths that are not what a flag needs ------------------------------------
@pytest.mark.parametrize("name, text, what", [
    ("header.csv", "response,knowledge\n", "holds only a CSV header, no record"),
    ("header.tsv", "\ufeffresponse\tknowledge\r\n\r\n", "holds only a TSV header, no record"),
    ("empty.jsonl", "", "is empty (no record)"),
    ("blank.jsonl", "\n  \n", "is empty (no record)"),
    ("empty.csv", "", "is empty (no record)"),
])
def test_every_empty_input_stops_in_one_line_before_any_model_loads(tmp_path, capsys, no_model_loads, name, text,
                                                                    what):
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    assert main(["score", "--input", str(path), "--output", str(tmp_path / "out.jsonl")]) == 2
    assert capsys.readouterr().err == f"q2 score: error: {path} {what}; there is nothing to score\n"
    assert not (tmp_path / "out.jsonl").exists()


def test_a_file_whose_records_cannot_be_read_is_not_empty(tmp_path, capsys, no_model_loads):
    path = tmp_path / "bad.jsonl"
    path.write_text("{not json\n", encoding="utf-8")
    assert main(["score", "--input", str(path)]) == 2
    assert "None of its records could be read" in capsys.readouterr().err


def test_a_folder_as_input_says_it_is_a_folder(tmp_path, capsys):
    assert main(["score", "--input", str(tmp_path)]) == 2
    assert capsys.readouterr().err == (f"q2 score: error: {tmp_path} is a folder; name a JSONL, CSV or TSV file in "
                                       f"it (the ray engine reads a folder of files)\n")


def test_a_parquet_input_on_the_local_engine_names_the_engine_that_reads_it(tmp_path, capsys, no_model_loads):
    path = tmp_path / "turns.parquet"
    path.write_bytes(b"PAR1")
    assert main(["score", "--input", str(path)]) == 2
    assert capsys.readouterr().err == (f"q2 score: error: --engine: {path} is a Parquet file, which the local engine "
                                       f"does not read; set it to ray (the ray extra), or convert the file to JSONL\n")


@pytest.mark.parametrize("argv, flag", [
    (["score", "--input", "{rows}", "--output", "{out}"], "--output"),
    (["score", "--input", "{rows}", "--html", "{out}"], "--html"),
    (["score", "--input", "{rows}", "--output", "{tmp}/o.jsonl", "--html", "{out}"], "--html"),
    (["report", "{rows}", "--output", "{out}"], "--output"),
    (["meta-eval", "--dataset", "wow", "--compute", "--output-dir", "{tmp}/m", "--save-scores", "{out}"],
     "--save-scores"),
    (["perturb", "--input", "{rows}", "--output", "{out}"], "--output"),
])
def test_every_output_file_in_a_missing_folder_is_refused_the_same_way(tmp_path, rows, capsys, argv, flag,
                                                                      no_model_loads):
    out = tmp_path / "nodir" / "sub" / "r.out"
    values = {"rows": str(rows), "out": str(out), "tmp": str(tmp_path)}
    assert main([a.format(**values) for a in argv]) == 2
    err = capsys.readouterr().err
    assert err == (f"q2 {argv[0]}: error: {flag}: cannot write {out}: the folder {out.parent} does not exist; make "
                   f"it first (mkdir -p {out.parent}) or name a file in an existing folder\n")
    assert not (tmp_path / "nodir").exists()


def test_compare_refuses_a_file_compared_with_itself(tmp_path, capsys):
    a = tmp_path / "a.jsonl"
    a.write_text(json.dumps({"id": "1", "score": 0.5}) + "\n")
    (tmp_path / "link.jsonl").symlink_to(a)
    assert main(["compare", str(a), str(a)]) == 2
    assert capsys.readouterr().err == (f"q2 compare: error: {a} is the baseline ({a}) again: a file compared with "
                                       f"itself says nothing; name the other system's results\n")
    assert main(["compare", str(tmp_path / "link.jsonl"), str(a)]) == 2
    assert "is the baseline" in capsys.readouterr().err


def test_an_empty_parquet_on_the_ray_engine_stops_in_one_line_before_ray_starts(tmp_path, capsys, no_model_loads,
                                                                               monkeypatch):
    pa = optional_import("pyarrow", "ray")
    optional_import("ray", "ray")
    import pyarrow.parquet as pq

    from q2_plugins.jobs.ray import engine as ray_engine

    monkeypatch.setattr(ray_engine, "_start", lambda job: pytest.fail("Ray started"))
    path = tmp_path / "turns.parquet"
    pq.write_table(pa.table({"response": pa.array([], pa.string()), "knowledge": pa.array([], pa.string())}), path)
    assert main(["score", "--engine", "ray", "--input", str(path), "--output", str(tmp_path / "out")]) == 2
    assert capsys.readouterr().err == (f"q2 score: error: {path} is an empty Parquet file (no record); there is "
                                       f"nothing to score\n")
