"""Packed oneDNN Linear layers compute what ``nn.Linear`` computes, batch-invariantly, and are used only where they
can be: the CPU, float32 / bfloat16, a build that has them. Speed is measured by the benchmark, never here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch.utils.flop_counter import FlopCounterMode

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.backends.accel import onednn
from q2_plugins.backends.hf.transformers_models import load_model

pytestmark = pytest.mark.skipif(not onednn.available(), reason="this PyTorch build has no oneDNN")

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"
KINDS = {"qg": "seq2seq", "qa": "qa", "nli": "classification"}


def _linears(model) -> list:
    return [m for m in model.modules() if type(m) is torch.nn.Linear]


def _inputs(role, tok):
    enc = tok(["Paris is the capital of France.", "a"], ["Where is Paris?", "the cat sat on the mat"],
              padding=True, return_tensors="pt")
    if role == "qg":
        enc = tok(["answer: Paris  context: Paris is the capital of France. </s>", "answer: a  context: a"],
                  padding=True, return_tensors="pt")
        enc["decoder_input_ids"] = torch.tensor([[0, 5, 9], [0, 7, 3]])
    return enc


def _logits(out) -> torch.Tensor:
    if hasattr(out, "start_logits"):
        return torch.cat([out.start_logits, out.end_logits], dim=-1)
    return out.logits


@pytest.mark.parametrize("role", ["qg", "qa", "nli"])
def test_packed_models_compute_what_the_library_computes(tiny_models, role):
    tok, plain = load_model(role, str(tiny_models[role]), None, "cpu", "float32", KINDS[role], cpu_kernels="torch")
    _, packed = load_model(role, str(tiny_models[role]), None, "cpu", "float32", KINDS[role])
    assert _linears(plain) and not _linears(packed)
    assert any(isinstance(m, onednn.PackedLinear) for m in packed.modules())
    enc = _inputs(role, tok)
    with torch.inference_mode():
        want, got = _logits(plain(**enc)), _logits(packed(**enc))
    assert want.abs().max() > 0
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-5)
    # each row alone gives exactly what it gives inside the batch (padding is masked; kernels see other row counts)
    with torch.inference_mode():
        for i in range(2):
            row = {k: v[i : i + 1, : int(enc["attention_mask"][i].sum())] if k in ("input_ids", "attention_mask",
                   "token_type_ids") else v[i : i + 1] for k, v in enc.items()}
            alone = _logits(packed(**row))[0]
            inside = _logits(packed(**enc))[i]
            if role == "qa":  # span logits: compare the real positions (start and end halves)
                n = alone.shape[-1] // 2
                inside = torch.cat([inside[:n], inside[inside.shape[-1] // 2 : inside.shape[-1] // 2 + n]])
            torch.testing.assert_close(alone, inside, rtol=1e-5, atol=1e-5)


def test_bfloat16_is_packed_where_the_cpu_runs_it_and_close_either_way(tiny_models):
    tok, plain = load_model("nli", str(tiny_models["nli"]), None, "cpu", "bfloat16", "classification",
                            cpu_kernels="torch")
    _, packed = load_model("nli", str(tiny_models["nli"]), None, "cpu", "bfloat16", "classification")
    assert bool(_linears(packed)) is not onednn.bf16_supported()
    enc = _inputs("nli", tok)
    with torch.inference_mode():
        torch.testing.assert_close(packed(**enc).logits.float(), plain(**enc).logits.float(), rtol=0.05, atol=0.05)


def test_albert_shared_layers_are_packed_once(tiny_models):
    _, plain = load_model("qa", str(tiny_models["qa"]), None, "cpu", "float32", "qa", cpu_kernels="torch")
    distinct = {id(m) for m in _linears(plain)}
    assert onednn.pack_linear_layers(plain) == len(distinct)
    packed = [m for m in plain.modules() if isinstance(m, onednn.PackedLinear)]
    assert len({id(m) for m in packed}) == len(distinct)


def test_float16_and_torch_kernels_leave_linear_layers_alone(tiny_models):
    _, half = load_model("nli", str(tiny_models["nli"]), None, "cpu", "float16", "classification")
    assert _linears(half)
    _, plain = load_model("nli", str(tiny_models["nli"]), None, "cpu", "float32", "classification",
                          cpu_kernels="torch")
    assert _linears(plain)
    with pytest.raises(ValueError, match="cpu_kernels"):
        load_model("nli", str(tiny_models["nli"]), None, "cpu", "float32", "classification", cpu_kernels="mkl")
    with pytest.raises(ValueError, match="cpu_kernels"):
        Q2Config(cpu_kernels="mkl")


def test_a_packed_product_that_disagrees_is_not_used(tiny_models, monkeypatch):
    _, model = load_model("nli", str(tiny_models["nli"]), None, "cpu", "float32", "classification",
                          cpu_kernels="torch")
    monkeypatch.setattr(onednn, "_matches", lambda linear, packed: False)
    with pytest.warns(UserWarning, match="disagrees"):
        assert onednn.pack_linear_layers(model) == 0
    assert _linears(model)


def test_flop_formulas_count_packed_layers_like_plain_ones(tiny_models):
    tok, plain = load_model("qa", str(tiny_models["qa"]), None, "cpu", "float32", "qa", cpu_kernels="torch")
    _, packed = load_model("qa", str(tiny_models["qa"]), None, "cpu", "float32", "qa")
    enc = _inputs("qa", tok)
    counts = []
    for model in (plain, packed):
        with torch.inference_mode(), FlopCounterMode(display=False, custom_mapping=onednn.flop_formulas()) as fc:
            model(**enc)
        counts.append(fc.get_total_flops())
    assert counts[0] == counts[1] > 0


def test_kernels_do_not_change_scores_or_the_signature(tiny_models):
    rows = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    results, signatures = [], []
    for kernels in ("onednn", "torch"):
        scorer = Q2Scorer(Q2Config(qg_model=str(tiny_models["qg"]), qa_model=str(tiny_models["qa"]),
                                   nli_model=str(tiny_models["nli"]), qg_max_length=12, cpu_kernels=kernels))
        result = scorer.score(responses=[r["response"] for r in rows], knowledge=[r["knowledge"] for r in rows],
                              explain=True)
        results.append(result.to_dict())
        signatures.append(result.signature)
    assert results[0] == results[1]
    assert signatures[0] == signatures[1]


def test_dropping_file_pages_keeps_contents_and_never_touches_anonymous_memory(tmp_path):
    import mmap

    page = mmap.PAGESIZE
    data = torch.arange(4 * page // 4, dtype=torch.float32)
    path = tmp_path / "weights.bin"
    path.write_bytes(data.numpy().tobytes())
    with open(path, "rb") as fh:
        mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_COPY)  # private, as checkpoints are mapped
    view = torch.frombuffer(mapped, dtype=torch.float32)
    assert any(lo <= view.data_ptr() < hi for lo, hi in onednn._file_mappings())
    onednn._drop_file_pages(view.data_ptr(), view.nbytes, onednn._file_mappings())
    assert torch.equal(view, data)  # read again from the file
    anonymous = data.clone()
    onednn._drop_file_pages(anonymous.data_ptr(), anonymous.nbytes, onednn._file_mappings())
    assert torch.equal(anonymous, data)  # not a file mapping: left alone (dropping would have zeroed it)
    del view


def test_tanh_gelu_runs_as_one_kernel_on_fast_kernels_only(tiny_models):
    from transformers.activations import GELUTanh, NewGELUActivation

    _, plain = load_model("qa", str(tiny_models["qa"]), None, "cpu", "float32", "qa", cpu_kernels="torch")
    _, fast = load_model("qa", str(tiny_models["qa"]), None, "cpu", "float32", "qa")
    assert any(type(m) is NewGELUActivation for m in plain.modules())  # ALBERT's gelu_new
    assert not any(type(m) is NewGELUActivation for m in fast.modules())
    assert any(type(m) is GELUTanh for m in fast.modules())
    x = torch.linspace(-8, 8, 10_001)
    torch.testing.assert_close(GELUTanh()(x), NewGELUActivation()(x), rtol=1e-6, atol=1e-6)
    _, half = load_model("qa", str(tiny_models["qa"]), None, "cpu", "float16", "qa")
    assert any(type(m) is NewGELUActivation for m in half.modules())  # nothing packed: nothing swapped
