"""benchmarks/bench_significance.py runs (tiny sizes) and prints what docs/compare.md quotes: it measures, never
asserts, so only its shape is checked here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def test_benchmark_prints_rates_and_timing():
    argv = [sys.executable, str(REPO / "benchmarks" / "bench_significance.py"), "--pairs", "4", "--n", "50",
            "--power-pairs", "2", "--shifts", "0.1", "--speed-n", "500"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=env, check=True).stdout
    assert re.search(r"3 systems x 500 responses, 1,000 resamples .*: [\d.]+ s wall, [\d.]+ s CPU", out)
    assert "calibration: 4 pairs with no true difference" in out and "power: 2 pairs, true latent difference 0.1" in out
    for name in ("bootstrap", "bootstrap (sacrebleu rule)", "approximate randomisation"):
        assert len(re.findall(rf"^  {re.escape(name)} +[01]\.\d{{4}}$", out, flags=re.M)) == 2
