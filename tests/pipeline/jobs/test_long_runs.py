"""Long runs that survive (tiny models): reserved names in every input format, ``--resume`` after ``kill -9`` at
random points (0 rows lost, 0 written twice), one writer per output, a resume with another input or other settings
refused, the free-space check, and the one verdict ``q2 report``, ``q2 compare`` and ``q2 meta-eval --scores`` give
on the same files (Ray's side of the reserved names: tests/integrations/jobs/test_ray_inputs.py)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from q2_plugins.cli import main
from q2_plugins.io.inputs import INTERNAL_FIELDS
from q2_plugins.io.rows import RESERVED_FIELDS
from q2_plugins.jobs.partial import lock_output
from tests.conftest import optional_import
from tests.hostile import hostile_rows, write_jsonl
from tests.pipeline.cli import test_cli_failures as base
from tests.pipeline.cli.test_cli_failures import GOOD, REPO, jsonl

model_flags = base.model_flags  # the fixture: tiny models' flags
WOW = REPO / "q2_plugins" / "data" / "q2_wow"


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


# -- 1. reserved names are ours ----------------------------------------------------------------------------------
def every_name() -> dict:
    """A record whose extra fields take every name the readers, engines and row layout use (a dict in one)."""
    names = sorted({*INTERNAL_FIELDS, *RESERVED_FIELDS, "index", "signature", "input_score", "input___error__"})
    return {**{n: f"mine:{n}" for n in names}, "__error__": {"a": "dict"}}


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_no_input_name_crashes_a_run_or_drops_a_field(tmp_path, capsys, model_flags, kind):
    extra = every_name()
    rows = [dict(GOOD, id=f"r{i}", **extra) for i in range(3)]
    src = tmp_path / f"in.{kind}"
    if kind == "jsonl":
        jsonl(src, rows)
    else:
        import csv

        with src.open("w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows({k: json.dumps(v) if isinstance(v, dict) else v for k, v in r.items()} for r in rows)
    out = tmp_path / "out.jsonl"
    assert main(["score", "--input", str(src), "--output", str(out), *model_flags]) == 0
    got = read(out)
    assert [r["id"] for r in got] == ["r0", "r1", "r2"]
    for r in got:
        assert r["status"] != "error" and r["error"] is None, r
        assert (r["response"], r["knowledge"]) == (GOOD["response"], GOOD["knowledge"])
        # every input field kept, those named like ours under input_<name>: no value lost, none taken as ours
        values = {v if isinstance(v, str) else json.dumps(v) for k, v in r.items() if k not in RESERVED_FIELDS}
        assert {v if isinstance(v, str) else json.dumps(v) for v in extra.values()} <= values
        assert all(r[k] == f"mine:{k}" for k in extra if k not in RESERVED_FIELDS | INTERNAL_FIELDS | {"input_score",
                                                                                                      "input___error__"})
        assert r["input___error__"] in ({"a": "dict"}, json.dumps({"a": "dict"}))
    # q2 report reads it back, and its rows are the rows (none an error made of an input field)
    assert main(["report", str(out), "--output", str(tmp_path / "r.html")]) == 0
    assert "3 responses (0 errors)" in capsys.readouterr().out


# -- 2. --resume after kill -9 -------------------------------------------------------------------------------------
def _run(argv: list[str]) -> subprocess.Popen:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen([sys.executable, "-m", "q2_plugins.cli", "score", *argv], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


def _lines(path: Path) -> int:
    try:
        return path.read_bytes().count(b"\n")
    except FileNotFoundError:
        return 0


def test_kill_9_at_random_points_then_resume_loses_and_repeats_nothing(tmp_path, model_flags):
    rows = hostile_rows(90, seed=40)
    src = tmp_path / "in.jsonl"
    expected = write_jsonl(rows, src, seed=40)  # (malformed lines among them: error rows that must resume too)
    out, partial = tmp_path / "out.jsonl", tmp_path / "out.jsonl.partial"
    argv = ["--input", str(src), "--output", str(out), "--chunk-size", "3", *model_flags]
    rng = random.Random(40)
    kills = []  # rows on disk at each kill of a live run
    for attempt in range(12):
        if out.exists() or _lines(partial) >= len(expected) - 12:
            break  # near the end: the last resume below finishes it
        proc = _run(argv + (["--resume"] if attempt else []))
        if attempt == 0:  # once while it starts (no row yet), then at random rows
            time.sleep(rng.uniform(0.5, 3.0))
        else:  # a few rows past where it resumed, never within the last chunks (a fast machine would finish first)
            target = min(len(expected) - 12, _lines(partial) + rng.randint(1, 9))
            deadline = time.time() + 120
            while time.time() < deadline and _lines(partial) < target and proc.poll() is None:
                time.sleep(0.01)
            time.sleep(rng.uniform(0, 0.05))
        alive = proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
        if alive:
            kills.append(_lines(partial))
    assert sum(k > 0 for k in kills) >= 5, kills  # killed at least five times with rows on disk
    proc = _run(argv + ["--resume"])
    err = proc.communicate(timeout=300)[1]
    assert proc.returncode in (0, 1), err
    got = read(out)
    assert len(got) == len(expected), (len(got), len(expected), kills)  # 0 lost, 0 written twice
    assert [r["row"] for r in got] == list(range(len(expected)))
    for r, e in zip(got, expected):
        assert r.get("id") == e if e is not None else r["error"].startswith("line "), (r, e)
    assert not partial.exists() and not (tmp_path / "out.jsonl.resume.json").exists()
    assert json.loads((tmp_path / "out.jsonl.meta.json").read_text())["summary"]["n"] == len(expected)
    # the resumed file is the file one uninterrupted run writes
    once = tmp_path / "once.jsonl"
    assert main(["score", "--input", str(src), "--output", str(once), *model_flags]) in (0, 1)
    assert read(once) == got


def dies_on_second_chunk(real):
    """``Q2Scorer.score`` (``real``) that stops the run, as Ctrl-C does, when its second chunk begins."""
    calls = []

    def score(self, **kw):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(self, **kw)

    return score


def test_a_resume_with_another_input_or_other_settings_is_refused(tmp_path, capsys, model_flags, monkeypatch):
    from q2_plugins.scorer import Q2Scorer

    src = jsonl(tmp_path / "in.jsonl", [dict(GOOD, id=i) for i in range(6)])
    out = tmp_path / "out.jsonl"
    real = Q2Scorer.score
    monkeypatch.setattr(Q2Scorer, "score", dies_on_second_chunk(real))
    argv = ["score", "--input", str(src), "--output", str(out), "--chunk-size", "3", *model_flags]
    assert main(argv) == 130
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"q2 score: interrupted: 3 rows committed to {out}.partial" in err
    monkeypatch.setattr(Q2Scorer, "score", real)
    kept = (tmp_path / "out.jsonl.partial").read_bytes()
    other = jsonl(tmp_path / "other.jsonl", [dict(GOOD, id=i) for i in range(6)])
    for changed, message in ((["--input", str(other)], f"holds rows of {src}, not of {other}"),
                             (["--explain"], "was begun with other row settings (explain: [False])"),
                             (["--qg-max-length", "5"], "was scored with other settings (signature ")):
        assert main([*argv, *changed, "--resume"]) == 2, changed
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "q2 score: error: --resume: " in err and message in err, err
    jsonl(src, [dict(GOOD, id=i) for i in range(7)])  # the input changed since
    assert main([*argv, "--resume"]) == 2
    assert "has changed since" in capsys.readouterr().err
    assert (tmp_path / "out.jsonl.partial").read_bytes() == kept and not out.exists()


# -- 3. one writer per output --------------------------------------------------------------------------------------
def test_a_second_run_on_one_output_is_refused_and_a_dead_ones_lock_is_not(tmp_path, capsys, model_flags):
    src = jsonl(tmp_path / "in.jsonl", [GOOD])
    out = tmp_path / "out.jsonl"
    with lock_output(out):  # another run holds the output
        t0 = time.perf_counter()
        for target in (out, tmp_path / "." / "out.jsonl"):
            assert main(["score", "--input", str(src), "--output", str(target), *model_flags]) == 2
            err = capsys.readouterr().err
            assert err.count("\n") == 1 and f"is being written by another q2 score run (pid {os.getpid()} on " in err
        assert time.perf_counter() - t0 < 5  # at once: before any model loads
        assert not out.exists() and not (tmp_path / "out.jsonl.partial").exists()
    # the lock file a killed run leaves (its pid long gone) does not block
    (tmp_path / "out.jsonl.lock").write_text(json.dumps({"pid": 999999, "host": "gone", "since": "then"}))
    assert main(["score", "--input", str(src), "--output", str(out), *model_flags]) == 0
    assert len(read(out)) == 1 and not (tmp_path / "out.jsonl.lock").exists()


def test_a_killed_run_holding_the_lock_does_not_block(tmp_path):
    out = tmp_path / "out.jsonl"
    code = f"from q2_plugins.jobs.partial import lock_output; lock_output({str(out)!r}); print('held', flush=True); " \
           "import time; time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(REPO)),
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "held"
    with pytest.raises(ValueError, match="is being written by another q2 score run"):
        lock_output(out)
    proc.kill()
    proc.wait()
    assert (tmp_path / "out.jsonl.lock").exists()
    with lock_output(out):
        pass


# -- 4. the free-space check ---------------------------------------------------------------------------------------
def test_a_disk_without_room_for_the_output_is_refused_before_the_models_load(tmp_path, capsys, monkeypatch):
    import shutil
    from collections import namedtuple

    src = jsonl(tmp_path / "in.jsonl", [dict(GOOD, id=i) for i in range(50)])
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10**9, 10**9 - 1000, 1000))
    t0 = time.perf_counter()
    assert main(["score", "--input", str(src), "--output", str(tmp_path / "o.jsonl"), "--qg-model", "/nope"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"the folder {tmp_path} has 1,000 bytes free" in err and "x 3" in err, err
    assert time.perf_counter() - t0 < 5


# -- 5. one reader, one verdict -----------------------------------------------------------------------------------
def verdicts(paths: dict[str, Path], good: Path, capsys) -> dict[str, set[tuple[int, str]]]:
    """For each file: the exit codes and messages of q2 report, q2 compare and q2 meta-eval --scores."""
    out = {}
    for name, path in paths.items():
        seen = set()
        for argv in (["report", str(path), "--output", str(path.parent / f"{path.stem}.html")],
                     ["compare", str(path), str(good)],
                     ["meta-eval", "--dataset", "wow", "--data", str(WOW), "--scores", str(path), "--baselines",
                      "none", "--experiments", "system"]):
            code = main(argv)
            err = capsys.readouterr().err.strip()
            assert err.count("\n") == 0, (argv, err)
            seen.add((code, err.split(": error: ", 1)[-1]))
        out[name] = seen
    return out


def test_report_compare_and_meta_eval_give_one_verdict(tmp_path, capsys):
    pa = optional_import("pyarrow", "ray")
    import pyarrow.parquet as pq

    good = tmp_path / "good.jsonl"
    rows = [{"row": i, "id": f"x{i}", "status": "scored", "score": 0.5, "score_no_nli": 0.5, "num_questions": 1,
             "num_candidates": 1, "used_fallback": False, "error": None} for i in range(4)]
    jsonl(good, rows)
    files = {"random bytes": tmp_path / "random.jsonl", "torn line": tmp_path / "torn.jsonl",
             "truncated parquet": tmp_path / "cut.parquet", "non-result JSON": tmp_path / "config.json",
             "partial": tmp_path / "run.jsonl.partial"}
    files["random bytes"].write_bytes(random.Random(5).randbytes(200_000))
    text = good.read_text()
    files["torn line"].write_text(text[: len(text) - 20])
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "whole.parquet")
    whole = (tmp_path / "whole.parquet").read_bytes()
    files["truncated parquet"].write_bytes(whole[: len(whole) // 2])
    files["non-result JSON"].write_text('{"learning_rate": 0.1}')
    files["partial"].write_text(text)
    got = verdicts(files, good, capsys)
    for name, seen in got.items():
        assert len(seen) == 1, (name, seen)  # the same code and message from all three
        code, message = seen.pop()
        assert code == 2 and message.startswith(str(files[name])), (name, message)
    # and the messages say what each is
    said = {name: verdicts({name: p}, good, capsys)[name].pop()[1] for name, p in files.items()}
    assert "line 1 is not valid UTF-8" in said["random bytes"] and "line 4 is not valid JSON" in said["torn line"]
    assert "cannot be read as Parquet" in said["truncated parquet"]
    assert "record 1 is not a result row" in said["non-result JSON"]
    assert "still being written or left by a stopped run" in said["partial"]


def test_every_file_q2_score_writes_is_read_back_by_every_tool(tmp_path, capsys, model_flags):
    """Lone surrogates (an input's \\ud800 escapes) and every internal name: report, compare, meta-eval read it."""
    src = jsonl(tmp_path / "in.jsonl", [dict(GOOD, id="lone \ud800 id", note="\udfff"),
                                        dict(GOOD, id="b", **every_name())])
    out = tmp_path / "out.jsonl"
    assert main(["score", "--input", str(src), "--output", str(out), "--explain", *model_flags]) == 0
    capsys.readouterr()
    assert main(["report", str(out), "--output", str(tmp_path / "r.html")]) == 0
    assert "2 responses" in capsys.readouterr().out
    twin = out.with_name("twin.jsonl")  # (a file compared with itself is refused)
    twin.write_bytes(out.read_bytes())
    twin.with_name("twin.jsonl.meta.json").write_bytes(out.with_name("out.jsonl.meta.json").read_bytes())
    assert main(["compare", str(out), str(twin), "--format", "json"]) == 0
    capsys.readouterr()
    code = main(["meta-eval", "--dataset", "wow", "--data", str(WOW), "--scores", str(out), "--baselines", "none",
                 "--experiments", "system"])
    err = capsys.readouterr().err
    assert code in (0, 2) and "codec" not in err and "Traceback" not in err, err
