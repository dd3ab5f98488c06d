"""The onnx backend (the QA model exported to ONNX, int8 by ONNX Runtime's dynamic quantisation): exported once per
model identity and compute type, its own identity and cache keys, the transformers logits in float32, answers that do
not depend on batching, and decisions compared with float32 (on tiny random-weight models)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from q2_plugins import Q2Config, Q2Scorer, backends
from q2_plugins.metric import precision
from q2_plugins.metric.errors import SettingError
from tests.conftest import optional_import

optional_import("onnxruntime", "onnx")
from q2_plugins.backends import onnx  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"


@pytest.fixture(scope="module")
def rows(tmp_path_factory):
    """The sample rows; the exports of this module's tests go to a folder of their own."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(onnx.CACHE_ENV, str(tmp_path_factory.mktemp("onnx")))
        yield [json.loads(line) for line in SAMPLE.read_text().splitlines()]


def _config(tiny_models, compute="int8", **changes):
    return Q2Config(qg_model=str(tiny_models["qg_short"]), qa_model=f"onnx:{tiny_models['qa']}#{compute}",
                    nli_model=str(tiny_models["nli"]), qg_max_length=12, cpu_kernels="torch", **changes)


def _pairs(rows):
    return [(f"what is {r['response'].split()[0]}?", context) for r in rows for context in (r["response"],
                                                                                           r["knowledge"])]


def test_identity_and_cache_keys_never_those_of_float32(tiny_models):
    hf = Q2Config(qa_model=str(tiny_models["qa"]), qg_model=str(tiny_models["qg_short"]),
                  nli_model=str(tiny_models["nli"]), qg_max_length=12, cpu_kernels="torch")
    int8, fp32 = _config(tiny_models), _config(tiny_models, "fp32")
    ids = [backends.identity("qa", c) for c in (hf, int8, fp32)]
    assert ids[1].startswith("onnx-") and ids[1].endswith("[int8]") and ids[2].endswith("[fp32]")
    assert ids[0].split("[")[0] in ids[1] and len(set(ids)) == 3
    keys = [Q2Scorer(c).stage_keys(["qa"])["qa"] for c in (hf, int8, fp32)]
    assert len(set(keys)) == 3
    sigs = [str(Q2Scorer(c).signature) for c in (hf, int8)]
    assert "onnx-" in sigs[1] and "onnx-" not in sigs[0]
    # the QA windows and decoding are the onnx component's too: named in its signature as in the float32 one
    assert sigs[0].split("|qa-dec:")[1].split("|")[0] == sigs[1].split("|qa-dec:")[1].split("|")[0]
    with pytest.raises(SettingError, match="nli_model: the onnx backend runs QA models, not nli"):
        backends.identity("nli", int8, model=f"onnx:{tiny_models['nli']}")
    with pytest.raises(SettingError, match="compute types are int8, fp32"):
        backends.identity("qa", _config(tiny_models, "int4"))


def test_export_is_cached_by_model_identity_and_compute_type(tiny_models, rows, monkeypatch):
    first = onnx.converted("qa", f"{tiny_models['qa']}#int8", None)
    assert first.exists() and str(first.parent.parent) == os.environ[onnx.CACHE_ENV]
    assert sorted(p.name for p in first.parent.iterdir()) == ["model.onnx"]
    monkeypatch.setattr(onnx, "_export", lambda *a: pytest.fail("exported twice"))
    assert onnx.converted("qa", f"{tiny_models['qa']}", None) == first
    monkeypatch.undo()
    assert onnx.converted("qa", f"{tiny_models['qa']}#fp32", None).parent != first.parent


def test_float32_export_gives_the_transformers_logits_and_answers(tiny_models, rows):
    import torch

    mine = backends.load("qa", _config(tiny_models, "fp32"))
    ref = backends.load("qa", Q2Config(qa_model=str(tiny_models["qa"]), cpu_kernels="torch"))
    pairs = _pairs(rows)
    a, b = mine._logits(mine._windows(pairs)), ref._logits(ref._windows(pairs))
    assert all(torch.allclose(x, y, atol=1e-4) for (x, _), (y, _) in zip(a, b))
    assert all(torch.allclose(x, y, atol=1e-4) for (_, x), (_, y) in zip(a, b))
    assert mine.answer(pairs) == ref.answer(pairs)


def test_int8_answers_do_not_depend_on_batching_and_are_counted(tiny_models, rows):
    from q2_plugins.backends import accel

    qa = backends.load("qa", _config(tiny_models))
    pairs = _pairs(rows)
    stats = accel.instrument(qa)
    stats.reset()
    together = qa.answer(pairs)
    assert stats.tokens > 0 and stats.tokens == stats.padded_tokens and stats.forward_seconds > 0
    assert together == [qa.answer([p])[0] for p in pairs]
    assert qa.unfit([("word " * 600, "context")])[0].startswith("the question is")
    with pytest.raises(SettingError, match="qa_device: the onnx backend runs on the CPU"):
        backends.load("qa", _config(tiny_models, device="cuda"))


def test_an_onnx_run_checks_itself_against_float32(tiny_models, rows):
    c = _config(tiny_models, precision_check=3)
    assert "qa: onnx backend" in precision.check_due(c)
    assert precision.reference_config(c).qa_model == str(tiny_models["qa"])
    scorer = Q2Scorer(c)
    result = scorer.score(responses=[r["response"] for r in rows[:4]], knowledge=[r["knowledge"] for r in rows[:4]])
    assert "onnx-" in str(result.signature) and scorer.precision_agreement.rows == 3


def test_check_precision_compares_answers_f1_and_decisions(tiny_models, rows, tmp_path, capsys):
    from q2_plugins.cli import main

    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows[:4]))
    c = _config(tiny_models)
    code = main(["check-precision", "--input", str(data), "--rows", "4", "--qa-model", c.qa_model, "--qg-model",
                 c.qg_model, "--nli-model", c.nli_model, "--qg-max-length", "12", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["rows"] == 4 and "qa onnx int8" in out["checked"] and "onnx" not in out["reference"]
    assert {"answers", "answers_changed", "f1_changed", "answer_change_share", "filter_flip_share"} <= set(out)
    assert "onnx-" in out["signatures"]["checked"] and "onnx-" not in out["signatures"]["reference"]


def test_every_weight_matmul_is_quantised_however_large_the_weights(rows, tmp_path):
    """Weights over the exporter's folding limit (262,144 elements; a paper-size model's all are) stay behind a
    Transpose node after the export: unfolded, the quantiser would leave their MatMuls in float32."""
    import onnx as onnx_format

    from q2_plugins.backends.hf.tiny import build_albert_qa

    model = build_albert_qa(tmp_path / "qa", hidden_size=64, num_attention_heads=2, intermediate_size=4200,
                            num_hidden_layers=2, embedding_size=16)
    graph = onnx_format.load(str(onnx.converted("qa", str(model), None))).graph
    weights = {w.name for w in graph.initializer}
    float_matmuls = [n.name for n in graph.node if n.op_type in ("MatMul", "Gemm") and n.input[1] in weights]
    transposed = [n.name for n in graph.node if n.op_type == "Transpose" and n.input[0] in weights]
    assert float_matmuls == [] and transposed == []
    assert sum(n.op_type == "MatMulInteger" for n in graph.node) >= 6
