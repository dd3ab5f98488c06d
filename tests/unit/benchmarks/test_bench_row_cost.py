"""benchmarks/bench_row_cost.py runs (tiny sizes, the tiny models) and prints its three tables with slopes: it
measures, never asserts, so only its shape is checked here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_benchmark_prints_each_sweep_with_its_slopes(tiny_models):
    argv = [sys.executable, str(REPO / "benchmarks" / "bench_row_cost.py"), "--models",
            str(tiny_models["qg_short"].parent), "--rows", "1", "--repeat", "1", "--response-sizes", "100,200",
            "--knowledge-sizes", "400,800"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, check=True).stdout
    assert "models: " + str(tiny_models["qg_short"].parent) in out
    for title in ("response length", "knowledge length (response: one sentence, the same at every size)",
                  "QA on the knowledge alone"):
        assert title in out
    assert len(re.findall(r"^\| (100|200|400|800) \| ", out, flags=re.M)) == 6  # 2 + 2 rows + 2 QA sizes
    assert len(re.findall(r"^slopes? \(exponent of time against length\): ", out, flags=re.M)) == 3
    assert re.search(r"QA -?\d+\.\d\d$", out, flags=re.M)
