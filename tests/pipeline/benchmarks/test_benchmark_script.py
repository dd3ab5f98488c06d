"""The benchmark script runs (tiny models, two responses) and reports identical batched / per-item results.

It measures and prints; nothing here asserts a speed.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_pipeline.py"


@pytest.mark.slow
def test_benchmark_script_smoke(tmp_path, shared_data, capsys):
    spec = importlib.util.spec_from_file_location("bench_pipeline", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    code = bench.main(["--sizes", "tiny", "--n", "2", "--data", str(shared_data), "--models-dir",
                       str(tmp_path / "models"), "--json", str(out), "--scale", "2", "--torch-kernels",
                       "--bf16", "--peak-size", "256"])
    assert code == 0
    report = json.loads(out.read_text())
    same = report["identical_per_item_vs_batched"]
    assert (same["results"], same["raw_model_outputs"], same["input_tokens"]) == (True, True, True)
    assert set(same["raw_diff"]) >= {"qa_span_changed", "filter_changed", "nli_label_changed"}
    assert {t["target"]: t["met"] for t in report["targets"]}["cached re-run speed-up"] is not None
    assert report["modes"]["per_item"]["work"] == report["modes"]["batched"]["work"]
    assert report["modes"]["cached"]["cache"]["misses"] == 0
    assert all(e["gflop"] > 0 for e in report["stage_efficiency_batched_fp32"].values())
    assert report["scaling"]["n_big"] == 4
    kernels = report["torch_kernels"]
    assert kernels["per_item"]["work"] == report["modes"]["per_item"]["work"]
    assert kernels["speedup_batched_vs_torch_per_item"] > 0
    assert set(report["peak_gflops_start"]["float32"]) >= {"torch", "best"}
    native_bf16 = report["machine"]["native_bf16"]
    # bf16 is measured only where the CPU runs it natively; elsewhere the report says why it was skipped
    assert ("bfloat16" in report["peak_gflops_start"]) == native_bf16 == ("bf16" in report)
    assert ("bf16_skipped" in report) != native_bf16
    assert "| per_item |" in capsys.readouterr().out
    assert report["qg_vs_library_generate"]["inputs"] > 0
    assert report["qg_vs_library_generate"]["inputs_with_other_questions"] == 0  # our beam search = generate's
    ceil = report["ceilings"]
    assert ceil["fp32_seconds_at_peak"] > 0
    if native_bf16:
        assert ceil["bf16_seconds_at_peak"] < ceil["fp32_seconds_at_peak"]
    else:
        assert "bf16_seconds_at_peak" not in ceil
    # the derived figures are recomputed from the JSON alone, measuring nothing
    assert bench.main(["--from-json", str(out)]) == 0
    assert "ceilings:" in capsys.readouterr().out


@pytest.mark.slow
def test_beam_ends_script_smoke(tmp_path, shared_data, capsys):
    spec = importlib.util.spec_from_file_location("bench_beam_ends", BENCH.parent / "bench_beam_ends.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    assert bench.main(["--sizes", "tiny", "--n", "2", "--repeats", "1", "--data", str(shared_data), "--models-dir",
                       str(tmp_path / "models")]) == 0
    rows = [line.split("|")[1:-1] for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    table = [[cell.strip() for cell in row] for row in rows[1:]]  # the header row first
    assert [row[0] for row in table] == ["never", "once an eighth of it is final", "as soon as one is final (default)"]
    decoded = [int(row[1]) for row in table]
    assert decoded[0] >= decoded[1] >= decoded[2] > 0  # leaving earlier never decodes more
    assert decoded[2] < decoded[0]  # the seeded models' inputs do finish at different steps
    assert all(row[3] == "identical" for row in table)
