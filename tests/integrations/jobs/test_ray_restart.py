"""A ``q2 score --engine ray --cache-dir D`` run killed part-way (SIGKILL to its process group: the driver, its local
Ray instance and everything they started), then the same command run again: the output has every row exactly once
with the single-process scores, and the rerun took the killed run's finished work from the cache. Each run starts
its own local Ray instance in its own process; this module starts none in the test process."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.conftest import optional_import

optional_import("ray", "ray")

import psutil  # noqa: E402

from q2_plugins.cli import main  # noqa: E402
from q2_plugins.metric.cache import Q2Cache  # noqa: E402

REPO = Path(__file__).resolve().parents[3]
Q2_FIELDS = ("score", "score_no_nli", "status", "num_questions", "error")
N_ROWS = 96


@pytest.fixture(scope="module")
def wow_input(shared_data, tmp_path_factory) -> Path:
    """N_ROWS distinct WoW responses with their knowledge, as JSONL."""
    with open(shared_data / "q2_wow" / "dodeca_consistent.csv", newline="", encoding="utf-8") as f:
        rows = [{"id": f"wow-{r['']}", "response": r["response"], "knowledge": r["knowledge"]}
                for r in csv.DictReader(f)]
    rows = list({r["response"]: r for r in rows}.values())[:N_ROWS]
    assert len(rows) == N_ROWS
    path = tmp_path_factory.mktemp("restart") / "in.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def entries(cache_dir: Path) -> int:
    """Entries committed to the cache so far (0 before the run has made it)."""
    if not (cache_dir / "q2-cache-v2.sqlite").exists():
        return 0
    cache = Q2Cache(cache_dir)
    try:
        return len(cache)
    finally:
        cache.close()


def kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL the run's process group, then any process it started that left the group (Ray's workers)."""
    try:
        tree = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        tree = []
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    for p in tree:
        try:
            p.kill()
        except psutil.NoSuchProcess:
            pass


def test_killed_run_then_rerun_reuses_the_cache(tiny_models, wow_input, tmp_path):
    models = ["--qg-model", str(tiny_models["qg_short"]), "--qa-model", str(tiny_models["qa"]),
              "--nli-model", str(tiny_models["nli"]), "--qg-max-length", "12", "--no-progress"]
    # the single-process run: the reference scores, and how many cache entries the whole input makes
    local_cache = tmp_path / "local-cache"
    assert main(["score", *models, "--input", str(wow_input), "--output", str(tmp_path / "local.jsonl"),
                 "--cache-dir", str(local_cache)]) == 0
    local = [json.loads(line) for line in (tmp_path / "local.jsonl").read_text().splitlines()]
    total = entries(local_cache)

    cache_dir, out = tmp_path / "cache", tmp_path / "ray.jsonl"
    cmd = [sys.executable, "-m", "q2_plugins.cli", "score", *models, "--engine", "ray", "--concurrency", "1",
           "--ray-batch-size", "4", "--input", str(wow_input), "--output", str(out), "--cache-dir", str(cache_dir),
           "--format", "json"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    with open(tmp_path / "killed.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            done = 0
            while proc.poll() is None and done < total // 4:  # until a quarter of the work is in the cache
                time.sleep(0.1)
                done = entries(cache_dir)
            assert proc.poll() is None, (tmp_path / "killed.log").read_text()  # killed while still running
        finally:
            kill_tree(proc)
    at_kill = entries(cache_dir)  # (the run may have committed more between the last look and the kill)
    assert 0 < at_kill < total
    assert not out.exists()

    rerun = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["id"] for r in rows] == [r["id"] for r in local]  # every row once, in input order
    assert [{f: r[f] for f in Q2_FIELDS} for r in rows] == [{f: r[f] for f in Q2_FIELDS} for r in local]
    cache = json.loads(rerun.stdout)["cache"]
    assert cache == json.loads(Path(f"{out}.meta.json").read_text())["cache"]
    assert cache["hits"] >= at_kill  # every entry the killed run committed was taken, not computed again
    assert cache["misses"] < total  # only the rest was computed
    assert entries(cache_dir) == total  # no entry lost or broken: the cache holds exactly the whole input's
