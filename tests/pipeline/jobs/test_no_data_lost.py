"""No path a user can type destroys data (issue cases, tiny models): outputs that would overwrite an input, signals
and full disks that must name the ``.partial``, an HTML report that fails after the results are saved, duplicate
CSV headers / JSON keys, a cache whose entries are edited or whose file cannot be used, the sidecar's keys."""

from __future__ import annotations

import errno
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.io import outputs as q2io
from q2_plugins.io.inputs import read_rows
from q2_plugins.metric.cache import CacheError, Q2Cache
from tests.pipeline.cli import test_cli_failures as base
from tests.pipeline.cli.test_cli_failures import GOOD, REPO, jsonl

model_flags = base.model_flags  # the fixture: tiny models' flags

#: the sidecar keys both engines write (docs/failures.md)
META_KEYS = {"format", "version", "engine", "signature", "signature_short", "summary", "config", "rows", "input",
             "output", "columns", "exit_code", "libraries"}


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file() and not p.is_symlink()}


def collisions(tmp: Path) -> list[tuple[str, list[str]]]:
    """(input, extra argv) pairs where some file the run writes is the input (issue cases 1-3, and links)."""
    for name in ("in.jsonl", "r.jsonl.partial", "m.jsonl.meta.json", "h.html.tmp"):
        jsonl(tmp / name, [GOOD])
    (tmp / "link.jsonl").symlink_to(tmp / "in.jsonl")
    os.link(tmp / "in.jsonl", tmp / "hard.jsonl")
    (tmp / "dir").mkdir()
    (tmp / "dir" / "alias").symlink_to(tmp)
    i = str(tmp / "in.jsonl")
    return [
        (i, ["--output", str(tmp / "o.jsonl"), "--html", i]),  # case 1
        (str(tmp / "r.jsonl.partial"), ["--output", str(tmp / "r.jsonl")]),  # case 2
        (str(tmp / "m.jsonl.meta.json"), ["--input-format", "jsonl", "--output", str(tmp / "m.jsonl")]),
        (str(tmp / "h.html.tmp"), ["--input-format", "jsonl", "--html", str(tmp / "h.html")]),
        (i, ["--output", str(tmp / "link.jsonl")]),
        (i, ["--output", str(tmp / "hard.jsonl")]),
        (i, ["--output", str(tmp / "dir" / "alias" / "in.jsonl")]),
        (i, ["--output", str(tmp / "o.jsonl"), "--html", str(tmp / "link.jsonl")]),
        (i, ["--engine", "ray", "--output", i]),  # case 3
        (i, ["--engine", "ray", "--output", str(tmp / "dir" / "alias" / "in.jsonl")]),
        (i, ["--engine", "ray", "--output", str(tmp)]),  # a directory output holding the input
        (i, ["--engine", "ray", "--output", str(tmp / "k.jsonl"), "--keep-min-score", "0.5", "--dropped-output",
             str(tmp / "link.jsonl")]),
    ]


def test_no_output_can_be_an_input_in_either_engine(tmp_path, capsys, model_flags):
    cases = collisions(tmp_path)
    before = snapshot(tmp_path)
    for source, extra in cases:
        t0 = time.perf_counter()
        assert main(["score", "--input", source, *extra, *model_flags]) == 2, extra
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "never overwritten" in err and "q2 score: error: " in err, err
        assert time.perf_counter() - t0 < 5  # refused before models load or Ray starts
    assert snapshot(tmp_path) == before  # every input byte kept, no file made


def test_check_outputs_names_the_file_written(tmp_path):
    p = jsonl(tmp_path / "r.jsonl.partial", [GOOD])
    with pytest.raises(q2io.InputFormatError, match=r"^output r\.jsonl would write .*r\.jsonl\.partial, which is "
                                                    r"the input file") as refused:
        q2io.check_outputs([p], [("output", "r.jsonl", q2io.files_written(tmp_path / "r.jsonl"))])
    assert refused.value.setting == "output"  # each front end writes it its way (the command line: --output)
    q2io.check_outputs([p], [("output", "s.jsonl", q2io.files_written(tmp_path / "s.jsonl"))])  # no clash


# -- duplicates and short records are never silently resolved ------------------------------------------------------
def test_a_json_key_given_twice_is_an_error_row(tmp_path):
    p = tmp_path / "in.jsonl"
    p.write_text('{"response": "a", "knowledge": "k", "response": "b"}\n{"x": {"y": 1, "y": 2}}\n{"response": "c"}\n')
    rows = list(read_rows(p))
    assert rows[0] == {"__error__": "line 1 has the key 'response' twice; which value is meant cannot be told"}
    assert rows[1]["__error__"].startswith("line 2 has the key 'y' twice")
    assert rows[2] == {"response": "c"}


def test_a_csv_header_naming_a_column_twice_stops_the_run(tmp_path, capsys):
    p = tmp_path / "in.csv"
    p.write_text("response,knowledge,response\na,b,c\n")
    assert main(["score", "--input", str(p), "--output", str(tmp_path / "o.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "header names column 'response' twice (columns 1 and 3)" in err and err.count("\n") == 1


# -- runs that stop name their .partial ----------------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_names_the_partial_like_ctrl_c(tmp_path, model_flags, sig):
    p = jsonl(tmp_path / "in.jsonl", [dict(GOOD, id=i) for i in range(400)])
    out = tmp_path / "out.jsonl"
    out.write_text("precious\n")
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen([sys.executable, "-m", "q2_plugins.cli", "score", "--input", str(p), "--output",
                             str(out), "--chunk-size", "2", *model_flags], env=env, stderr=subprocess.PIPE, text=True)
    partial = tmp_path / "out.jsonl.partial"
    deadline = time.time() + 120
    while time.time() < deadline and not (partial.exists() and partial.stat().st_size):
        time.sleep(0.1)
    proc.send_signal(sig)
    err = proc.communicate(timeout=120)[1]
    assert proc.returncode == 128 + sig, err
    lines = partial.read_text().splitlines()
    # two lines: the notice that the existing output will be replaced at the end, then the stop line
    notice, stop = err.splitlines()
    assert notice.startswith(f"q2 score: {out} exists; a complete run replaces it"), err
    assert stop.startswith(f"q2 score: terminated ({sig.name}): {len(lines)} rows committed to {partial}, {out} left "
                           f"as it was; to continue: q2 score "), err
    assert " --resume (rows are committed every --chunk-size rows or --commit-seconds of work; with --cache-dir" \
        in err and out.read_text() == "precious\n"
    assert all(json.loads(line)["row"] == i for i, line in enumerate(lines))


class _FullDisk:
    """A text file on a disk that fills after ``room`` characters: writes then fail, and so does closing."""

    def __init__(self, f, room: int) -> None:
        self.f, self.room = f, room

    def write(self, text: str) -> int:
        self.room -= len(text)
        if self.room < 0:
            raise OSError(errno.ENOSPC, "No space left on device")
        return self.f.write(text)

    def flush(self) -> None:
        self.f.flush()

    def close(self) -> None:
        self.f.close()
        if self.room < 0:
            raise OSError(errno.ENOSPC, "No space left on device")


def test_a_full_disk_names_the_partial_and_exits_2(tmp_path, capsys, model_flags, monkeypatch):
    real = q2io.ResultFile.__init__

    def on_a_small_disk(self, target, **kw):
        real(self, target, **kw)
        self._f = _FullDisk(self._f, room=1500)

    monkeypatch.setattr(q2io.ResultFile, "__init__", on_a_small_disk)
    out = tmp_path / "out.jsonl"
    p = jsonl(tmp_path / "in.jsonl", [dict(GOOD, id=i) for i in range(12)])
    assert main(["score", "--input", str(p), "--output", str(out), "--chunk-size", "4", *model_flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"q2 score: error: {out}.partial: no space left on device: "), err
    kept = len((tmp_path / "out.jsonl.partial").read_text().splitlines())
    assert f": {kept} rows committed to {out}.partial, {out} left as it was; free some space, then continue: " in err
    assert " --resume (rows are committed every " in err and not out.exists()


def test_an_html_report_that_cannot_be_written_is_exit_2_in_the_sidecar_too(tmp_path, capsys, model_flags,
                                                                           monkeypatch):
    out = tmp_path / "out.jsonl"
    p = jsonl(tmp_path / "in.jsonl", [GOOD, {"response": "", "knowledge": "k"}])
    html = tmp_path / "r.html"  # its folder is writable when checked; the disk fills before the report is written

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("q2_plugins.jobs.report.write_html", full_disk)
    assert main(["score", "--input", str(p), "--output", str(out), "--html", str(html), *model_flags]) == 2
    meta = json.loads(Path(f"{out}.meta.json").read_text())
    assert meta["exit_code"] == 2 and meta["html_error"].startswith(f"--html {html} could not be written")
    assert meta["rows"] == 2 and len(out.read_text().splitlines()) == 2  # the results are saved
    assert f"q2 score: --html {html} could not be written" in capsys.readouterr().err


def test_the_sidecar_has_the_documented_keys(tmp_path, model_flags):
    out = tmp_path / "out.jsonl"
    assert main(["score", "--input", str(jsonl(tmp_path / "in.jsonl", [GOOD])), "--output", str(out),
                 *model_flags]) == 0
    meta = json.loads(Path(f"{out}.meta.json").read_text())
    assert META_KEYS <= set(meta) and meta["engine"] == "local" and meta["format"] == "q2-score-results"
    assert meta["signature_short"] != meta["signature"] and meta["columns"]["response"] == "response"
    from importlib.metadata import version

    assert meta["libraries"]["transformers"] == version("transformers")
    assert meta["libraries"]["torch"] == version("torch")


# -- a cache that cannot be poisoned ---------------------------------------------------------------------------
def test_an_edited_cache_entry_is_a_counted_miss_never_a_value(tmp_path):
    cache = Q2Cache(tmp_path)
    cache.put_many("ns", [(["a"], {"label": "entailment"}), (["b"], 1.0)])
    cache.close()
    db = sqlite3.connect(tmp_path / "q2-cache-v2.sqlite")
    db.execute("UPDATE kv SET value = '0.0' WHERE value = '1.0'")
    db.commit()
    db.close()
    cache = Q2Cache(tmp_path)
    assert cache.get_many("ns", [["a"], ["b"]]) == [{"label": "entailment"}, None]
    assert cache.counts() == {"hits": 1, "misses": 1, "failed_checks": 1}
    # an entry moved under another key fails too: the check is tied to the key
    db = sqlite3.connect(tmp_path / "q2-cache-v2.sqlite")
    value, check = db.execute("SELECT value, checksum FROM kv WHERE key = ?", [Q2Cache._key("ns", ["a"])]).fetchone()
    db.execute("INSERT OR REPLACE INTO kv VALUES (?, ?, ?)", [Q2Cache._key("ns", ["c"]), value, check])
    db.commit()
    assert cache.get_many("ns", [["c"]]) == [None] and cache.failed == 2


def test_an_edited_cache_changes_no_score_and_is_reported(tmp_path, capsys, model_flags):
    p = jsonl(tmp_path / "in.jsonl", [dict(GOOD, id=i) for i in range(5)])
    cache = ["--cache-dir", str(tmp_path / "c")]
    assert main(["score", "--input", str(p), "--output", str(tmp_path / "a.jsonl"), *cache, *model_flags]) == 0
    db = sqlite3.connect(tmp_path / "c" / "q2-cache-v2.sqlite")
    edited = db.execute("UPDATE kv SET value = '\"neutral\"' WHERE value LIKE '%entailment%' OR value "
                        "LIKE '%contradiction%'").rowcount
    db.commit()
    db.close()
    assert edited > 0
    capsys.readouterr()
    assert main(["score", "--input", str(p), "--output", str(tmp_path / "b.jsonl"), *cache, *model_flags]) == 0
    assert f"failed checks {edited} " in capsys.readouterr().out
    scores = [[(r["score"], r["status"]) for r in map(json.loads, (tmp_path / f).read_text().splitlines())]
              for f in ("a.jsonl", "b.jsonl")]
    assert scores[0] == scores[1]
    assert json.loads((tmp_path / "b.jsonl.meta.json").read_text())["cache"]["failed_checks"] == edited


def test_a_cache_that_cannot_be_used_is_one_line_naming_it(tmp_path, capsys, monkeypatch):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "q2-cache-v2.sqlite").write_bytes(b"not a database at all" * 100)
    p = jsonl(tmp_path / "in.jsonl", [GOOD])
    assert main(["score", "--input", str(p), "--cache-dir", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the cache {tmp_path / 'bad' / 'q2-cache-v2.sqlite'} cannot be used" in err
    Q2Cache(tmp_path / "ro").close()  # an existing cache, then on read-only media
    real = sqlite3.connect
    monkeypatch.setattr(sqlite3, "connect", lambda path, **kw: real(f"file:{path}?mode=ro", uri=True, **kw))
    with pytest.raises(CacheError, match=r"the cache .*ro/q2-cache-v2\.sqlite cannot be used \(attempt to write a "
                                         r"readonly database\)"):
        Q2Cache(tmp_path / "ro")


def test_report_and_replay_never_write_over_what_they_read(tmp_path, capsys):
    results = jsonl(tmp_path / "r.jsonl", [{"row": 0, "status": "error", "error": "x"}])
    jsonl(tmp_path / "r.jsonl.meta.json", [{}])
    steps = tmp_path / "a_out.steps.csv"
    steps.write_text("id\n")
    before = snapshot(tmp_path)
    for argv in (["report", str(results), "--output", str(results)],
                 ["report", str(results), "--output", str(tmp_path / "r.jsonl.meta.json")],
                 ["report", str(results), "--texts", str(steps), "--output", str(steps)],
                 ["replay", "--steps", str(steps), "--output", str(steps)],
                 ["replay", "--steps", str(steps), "--html", str(steps)]):
        assert main(argv) == 2, argv
        assert "never overwritten" in capsys.readouterr().err
    assert snapshot(tmp_path) == before
