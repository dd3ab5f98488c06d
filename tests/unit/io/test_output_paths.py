"""Every command checks each path it will write before any model loads or any row is read: a folder that cannot be
made or written stops the run at once with one line naming the flag, exit 2.

The unwritable places work whoever runs the tests (root too, for whom permission bits do not bind): a folder under
a regular file, and /proc, where no one can create a file or a folder."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.io.outputs import UnwritablePathError, check_writable

pytestmark = pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux's /proc")

NO_MODEL = "/nonexistent-q2-model"  # were a model loaded before the check, the run would fail on it instead
MODELS = ["--qg-model", NO_MODEL, "--qa-model", NO_MODEL, "--nli-model", NO_MODEL]


def _bad_places(tmp_path: Path) -> dict[str, Path]:
    afile = tmp_path / "a-file"
    afile.write_text("not a folder\n")
    return {"under a file": afile / "sub", "missing under /proc": Path("/proc/q2-no-such-folder/sub"),
            "read-only /proc": Path("/proc")}


def _inputs(tmp_path: Path) -> dict[str, str]:
    rows = tmp_path / "rows.jsonl"
    rows.write_text(json.dumps({"response": "Paris is in France.", "knowledge": "Paris is the capital of France.",
                                "label": "consistent", "previous turn": "Where is Paris?"}) + "\n")
    empty = tmp_path / "empty.csv"
    empty.write_text("")
    return {"rows": str(rows), "empty": str(empty)}


# (command line with {out} where the path goes, the flag it names, whether the path is a folder)
CASES = [
    (["score", "--input", "{rows}", "--output", "{out}", *MODELS], "--output", False),
    (["score", "--input", "{rows}", "--html", "{out}", *MODELS], "--html", False),
    (["score", "--input", "{rows}", "--cache-dir", "{out}", *MODELS], "--cache-dir", True),
    (["score", "--engine", "ray", "--input", "{rows}", "--output", "{out}", *MODELS], "--output", True),
    (["score", "--engine", "ray", "--input", "{rows}", "--output", "{tmp}/kept.jsonl", "--keep-min-score", "0.5",
      "--dropped-output", "{out}", *MODELS], "--dropped-output", False),
    (["replay", "--steps", "{empty}", "--output", "{out}"], "--output", False),
    (["replay", "--steps", "{empty}", "--html", "{out}"], "--html", False),
    (["report", "{rows}", "--output", "{out}"], "--output", False),
    (["prefetch", "--output-dir", "{out}", *MODELS], "--output-dir", True),
    (["make-test-models", "--output-dir", "{out}"], "--output-dir", True),
    (["make-test-models", "--examples", "{out}"], "--examples", True),
    (["meta-eval", "--dataset", "table", "--data", "{rows}", "--consistent-labels", "consistent", "--compute",
      "--save-scores", "{out}", *MODELS], "--save-scores", False),
    (["meta-eval", "--dataset", "table", "--data", "{rows}", "--consistent-labels", "consistent",
      "--export-inputs", "{out}"], "--export-inputs", False),
    (["meta-eval", "--dataset", "table", "--data", "{rows}", "--consistent-labels", "consistent", "--compute",
      "--output-dir", "{out}", *MODELS], "--output-dir", True),
    (["perturb", "--input", "{rows}", "--output", "{out}"], "--output", False),
    (["perturb", "--recipe", "begin", "--input", "{rows}", "--output", "{out}"], "--output", False),
    (["train", "--train-file", "{rows}", "--output-dir", "{out}", "--base", NO_MODEL], "--output-dir", True),
    (["hooks", "install", "--target", "{out}"], "--target", True),
]


@pytest.mark.parametrize("place", ["under a file", "missing under /proc", "read-only /proc"])
@pytest.mark.parametrize("argv,flag,folder", CASES, ids=[f"{c[0][0]} {c[1]}" + (" ray" if "ray" in c[0] else "")
                                                         for c in CASES])
def test_an_unwritable_output_stops_the_run_at_once(argv, flag, folder, place, tmp_path, capsys):
    bad = _bad_places(tmp_path)[place]
    out = bad / "q2-out" if folder and place != "read-only /proc" else bad / "q2-out.jsonl"
    if folder and place == "read-only /proc":
        out = bad  # the folder itself exists and cannot be written
    values = {**_inputs(tmp_path), "tmp": str(tmp_path), "out": str(out)}
    loaded = set(sys.modules)
    start = time.perf_counter()
    code = main([a.format(**values) for a in argv])
    elapsed = time.perf_counter() - start
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert code == 2, captured
    assert len(lines) == 1, lines
    assert lines[0].startswith(f"q2 {argv[0]}: error: {flag}: ") and str(out) in lines[0], lines[0]
    assert any(w in lines[0] for w in ("cannot be", "not a folder", "does not exist")), lines[0]
    assert elapsed < 10, elapsed
    assert not {m for m in set(sys.modules) - loaded if m.startswith(("transformers", "ray"))}, "a model library loaded"
    assert captured.out == ""


def test_check_writable_leaves_nothing_behind(tmp_path):
    check_writable(tmp_path / "out.jsonl", "output")
    check_writable(tmp_path / "a" / "b" / "out.html", "html", make_parents=True)
    check_writable(tmp_path / "c" / "d", "output_dir", folder=True)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path,folder,why", [("{tmp}", False, "is a folder; name a file"),
                                             ("{tmp}/f", True, "is a file, not a folder"),
                                             ("{tmp}/f/x.jsonl", False, "is a file, not a folder"),
                                             ("{tmp}/no/x.jsonl", False, "the folder .*/no does not exist"),
                                             ("/proc/x.jsonl", False, "cannot be written"),
                                             ("/proc/q2-missing/x", True, "cannot be made in /proc")])
def test_check_writable_names_the_setting_and_the_cause(path, folder, why, tmp_path):
    (tmp_path / "f").write_text("")
    with pytest.raises(UnwritablePathError, match=why) as e:
        check_writable(path.format(tmp=tmp_path), "some_setting", folder=folder)
    assert e.value.setting == "some_setting"
