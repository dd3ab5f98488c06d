"""Quiet Ray runs: the core worker's error-level line about actor restarts (a harmless fact for Ray Data's actor
pools) is left out of standard error, and only it; a ``q2 score --engine ray --no-progress`` run writes nothing
there (no Ray INFO logs, no bars)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import optional_import

HARMLESS = (b"[2026-01-01 00:00:00,000 E 1 1] core_worker.cc:2465: Actor with class name: 'MapWorker(MapBatches(X))' "
            b"and ID: 'ab' has constructor arguments in the object store and max_restarts > 0. If the arguments ...\n")

WRITER = r"""
import os, sys, time
from q2_plugins.jobs.ray.engine import _HARMLESS_CORE_LINE
from q2_plugins.jobs.ray.stderr_filter import stderr_without
print("before", file=sys.stderr, flush=True)
with stderr_without(_HARMLESS_CORE_LINE):
    os.write(2, sys.argv[1].encode().decode("unicode_escape").encode("latin-1"))
    os.write(2, b"[2026-01-01 00:00:00,000 E 1 1] core_worker.cc:100: a real error\n")
    print("ours", file=sys.stderr, flush=True)
    os.write(2, b"bar 1/2\r")
    time.sleep(0.5)
    os.write(2, b"bar 2/2\n")
    os.write(2, b"no newline at the end")
print("after", file=sys.stderr, flush=True)
os.write(2, sys.argv[1].encode().decode("unicode_escape").encode("latin-1"))
"""


def test_only_the_harmless_core_worker_line_is_left_out(tmp_path):
    with open(tmp_path / "err", "wb") as err:
        subprocess.run([sys.executable, "-c", WRITER, HARMLESS.decode("latin-1").encode("unicode_escape").decode()],
                       stderr=err, check=True, timeout=60)
    got = (tmp_path / "err").read_bytes()
    assert got == (b"before\n[2026-01-01 00:00:00,000 E 1 1] core_worker.cc:100: a real error\nours\n"
                   b"bar 1/2\rbar 2/2\nno newline at the endafter\n" + HARMLESS)  # (after the block: not filtered)


def ray_score_argv(tiny_models, tmp_path: Path, n_rows: int, *flags: str) -> list[str]:
    """``q2 score --engine ray`` on the sample's first ``n_rows`` rows (written to ``tmp_path/in.jsonl``) with the
    tiny models, as a command line; ``flags`` go after ``--engine ray``."""
    data = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"
    rows = data.read_text(encoding="utf-8").splitlines()[:n_rows]
    (tmp_path / "in.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return [sys.executable, "-m", "q2_plugins.cli", "score", "--engine", "ray", *flags,
            "--input", str(tmp_path / "in.jsonl"), "--output", str(tmp_path / "out.jsonl"),
            "--qg-model", str(tiny_models["qg_short"]), "--qa-model", str(tiny_models["qa"]),
            "--nli-model", str(tiny_models["nli"]), "--qg-max-length", "12"]


def test_ray_run_without_progress_writes_nothing_to_standard_error(tiny_models, tmp_path):
    optional_import("ray", "ray")
    argv = ray_score_argv(tiny_models, tmp_path, 4, "--no-progress")
    with open(tmp_path / "err", "w") as err:
        proc = subprocess.run(argv, stderr=err, stdout=subprocess.DEVNULL, timeout=900)
    log = (tmp_path / "err").read_text()
    assert proc.returncode == 0, log
    assert log == "", log  # no "core_worker.cc ... max_restarts > 0" line, no INFO logs, no bars
    assert len([json.loads(line) for line in (tmp_path / "out.jsonl").read_text().splitlines()]) == 4


def test_ray_run_in_a_log_counts_the_scored_rows_in_plain_lines(tiny_models, tmp_path):
    """With progress, a log gets the run's one "loading models" line and plain ``q2 rows: done/total`` lines read
    from the actors' count of scored rows, the last at the total; no bar, no Ray log line."""
    optional_import("ray", "ray")
    argv = ray_score_argv(tiny_models, tmp_path, 4, "--ray-batch-size", "2")
    with open(tmp_path / "err", "w") as err:
        proc = subprocess.run(argv, stderr=err, stdout=subprocess.DEVNULL, timeout=900)
    lines = (tmp_path / "err").read_text().splitlines()
    assert proc.returncode == 0, lines
    assert lines[0].startswith("q2: loading models") and len(lines) >= 2, lines
    counts = [line for line in lines[1:] if line.startswith("q2 rows: ")]
    assert counts == lines[1:], lines  # nothing else
    assert counts[-1].startswith("q2 rows: 4/4 rows (100%) in "), counts
    assert "\r" not in (tmp_path / "err").read_text()


def test_ray_run_on_a_terminal_shows_the_runs_row_bar_and_not_ray_datas(tiny_models, tmp_path):
    """At a terminal the Ray engine draws the same row bar as the local engine (rows done / total, rate, time
    left), from the actors' count of scored rows; Ray Data's own operator bars stay off."""
    optional_import("ray", "ray")
    from tests.pipeline.metric.test_progress import in_a_terminal

    argv = ray_score_argv(tiny_models, tmp_path, 6, "--ray-batch-size", "2")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]),
           "TQDM_MININTERVAL": "0"}
    code, shown = in_a_terminal(argv, env, timeout=900)
    assert code == 0, shown[-3000:]
    states = [part.strip() for part in shown.replace("\n", "\r").split("\r") if part.startswith("q2 rows:")]
    counts = [int(re.search(r"\| *(\d+)/6 \[", s).group(1)) for s in states]
    assert counts and counts == sorted(counts) and counts[0] == 0 and counts[-1] == 6, (states, shown[-3000:])
    assert re.search(r"\[\d\d:\d\d, +[\d.]+(row/s|s/row), (estimating|\d\d:\d\d left)\]", states[-1]), states[-1]
    assert "MapBatches" not in shown and "Running Dataset" not in shown and "Traceback" not in shown, shown[-3000:]
    assert len((tmp_path / "out.jsonl").read_text().splitlines()) == 6
