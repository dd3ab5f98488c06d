"""bench_onnx_qa.py runs (tiny models, two responses) and reports both QA rows and the NLI rows. It measures and
prints; nothing here asserts a speed."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from tests.conftest import optional_import

BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "bench_onnx_qa.py"


@pytest.mark.slow
def test_bench_onnx_qa_smoke(tmp_path, monkeypatch, capsys):
    optional_import("onnxruntime", "onnx")
    optional_import("ctranslate2", "ct2")
    monkeypatch.setenv("Q2_ONNX_CACHE", str(tmp_path / "onnx"))
    monkeypatch.setenv("Q2_CT2_CACHE", str(tmp_path / "ct2"))
    spec = importlib.util.spec_from_file_location("bench_onnx_qa", BENCH)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = tmp_path / "bench.json"
    assert bench.main(["--sizes", "tiny", "--n", "2", "--trials", "1", "--nli", "--models", str(tmp_path / "m"),
                       "--json", str(out)]) == 0
    report = json.loads(out.read_text())
    assert report["pairs"] > 0 and report["tokens"] > 0 and report["fp32_cpu_s"] > 0 and report["int8_cpu_s"] > 0
    assert 0 <= report["same_answers"] <= report["pairs"]
    assert report["nli_pairs"] >= 2 and min(report[f"nli_{k}_cpu_s"] for k in ("fp32", "ct2_int8", "onnx_int8")) > 0
    assert "1 thread" in capsys.readouterr().out
