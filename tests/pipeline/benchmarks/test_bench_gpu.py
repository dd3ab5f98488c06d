"""benchmarks/bench_gpu.py runs on the CPU (tiny models, two responses) and writes a report that render_docs shows.

It measures and prints; nothing here asserts a speed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_gpu.py"


@pytest.mark.slow
def test_bench_gpu_runs_on_the_cpu(tmp_path, shared_data, capsys):
    spec = importlib.util.spec_from_file_location("bench_gpu", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "gpu.json"
    code = bench.main(["--device", "cpu", "--sizes", "tiny", "--n", "2", "--data", str(shared_data),
                       "--models-dir", str(tmp_path / "models"), "--json", str(out), "--peak-n", "256"])
    assert code == 0
    report = json.loads(out.read_text())
    assert report["machine"]["gpu"] is None and report["settings"]["dtypes"] == ["float32"]
    per_item, batched = report["modes"]["per-item float32"], report["modes"]["batched float32"]
    assert per_item["work"] == batched["work"] == batched["first"]["work"]
    assert batched["defaults"]["qa"] == {"batch_size": 32, "batch_tokens": 2048}  # the CPU's defaults
    assert all(v > 0 for v in batched["peak_share"].values()) and report["peak_tflops"]["float32"] > 0
    printed = capsys.readouterr().out
    assert "| batched float32 |" in printed
    from scripts.render_docs import render_gpu

    assert render_gpu(report).splitlines()[0] in printed
