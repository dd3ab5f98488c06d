"""The device's defaults as functions of made-up devices: batch sizes and token caps from the free memory and the
model's shape on a GPU, the tuned values on the CPU, padded windows off the CPU, TF32 where the GPU has it."""

from __future__ import annotations

import pytest

from q2_plugins import Q2Config
from q2_plugins.backends.accel import device as dev
from q2_plugins.metric.errors import SettingError

GB = 1 << 30
ALBERT_XL = dev.ModelShape(hidden=2048, intermediate=8192, layers=24, heads=16)
T5_BASE = dev.ModelShape(hidden=768, intermediate=3072, layers=24, heads=12, seq2seq=True, beams=5)
H200 = dev.DeviceProps("cuda", "NVIDIA H200", free_bytes=130 * GB, total_bytes=141 * GB, capability=(9, 0))
T4 = dev.DeviceProps("cuda", "Tesla T4", free_bytes=12 * GB, total_bytes=16 * GB, capability=(7, 5))
FULL = dev.DeviceProps("cuda", "busy", free_bytes=200 << 20, total_bytes=16 * GB, capability=(8, 6))


def test_the_cpu_keeps_its_tuned_defaults():
    for shape in (ALBERT_XL, T5_BASE):
        for dtype in ("float32", "bfloat16"):
            assert dev.default_batching(dev.DeviceProps("cpu"), shape, dtype) == (32, 2048)
    assert dev.default_batching(dev.DeviceProps("mps"), ALBERT_XL, "float32") == (32, 2048)  # memory unknown


def test_a_large_gpu_gets_large_batches_within_its_memory():
    size, tokens = dev.default_batching(H200, ALBERT_XL, "bfloat16")
    assert (size, tokens) == (dev.GPU_MAX_BATCH, dev.GPU_MAX_TOKENS)
    fp32 = dev.default_batching(H200, T5_BASE, "float32")
    assert 32 < fp32[0] <= dev.GPU_MAX_BATCH and 2048 < fp32[1] <= dev.GPU_MAX_TOKENS
    per_token = 4 * (T5_BASE.intermediate + 4 * T5_BASE.hidden + T5_BASE.heads * 512
                     + T5_BASE.beams * T5_BASE.layers * 2 * T5_BASE.hidden)
    assert fp32[1] * per_token <= H200.free_bytes * dev.GPU_MEMORY_SHARE < 2 * fp32[1] * per_token


def test_smaller_memory_and_wider_values_give_smaller_batches():
    big, small = dev.default_batching(H200, T5_BASE, "float32"), dev.default_batching(T4, T5_BASE, "float32")
    assert small[1] < big[1] and small[0] <= big[0]
    assert dev.default_batching(T4, T5_BASE, "bfloat16")[1] == 2 * small[1]  # half the bytes, twice the tokens
    assert dev.default_batching(FULL, ALBERT_XL, "float32") == (32, 512)  # a full card: the CPU's small passes


def test_windows_are_packed_on_the_cpu_only():
    assert dev.packed_windows("cpu", True) and not dev.packed_windows("cpu", False)
    assert not dev.packed_windows("cuda", True) and not dev.packed_windows("mps", True)


def test_tf32_needs_an_ampere_or_newer_gpu():
    assert dev.supports_tf32(H200) and not dev.supports_tf32(T4) and not dev.supports_tf32(dev.DeviceProps("cpu"))
    with pytest.raises(SettingError, match="tf32 needs a CUDA GPU of compute capability 8.0"):
        dev.check_dtype("tf32", "cpu")
    dev.check_dtype("float32", "cpu")


def test_settings_say_when_the_device_default_applies():
    rt = Q2Config().role_runtime("qa")
    assert (rt.batch_size, rt.batch_tokens, rt.auto_batch_size, rt.auto_batch_tokens) == (32, 2048, True, True)
    rt = Q2Config(batch_size=8, batch_tokens=0).role_runtime("qa")
    assert (rt.batch_size, rt.batch_tokens, rt.auto_batch_size, rt.auto_batch_tokens) == (8, None, False, False)
    rt = Q2Config(qg_batch_size=4, nli_batch_tokens=512).role_runtime("qg")
    assert (rt.batch_size, rt.auto_batch_size, rt.auto_batch_tokens) == (4, False, True)
    assert not Q2Config(per_item=True).role_runtime("qa").auto_batch_size


def test_a_user_setting_is_never_replaced(monkeypatch):
    monkeypatch.setattr(dev, "probe", lambda device: H200)

    class Model:
        class config:
            hidden_size, intermediate_size, num_hidden_layers, num_attention_heads = 2048, 8192, 24, 16

    assert dev.fitted_batching(Model, "cuda", "bfloat16", 32, 2048, auto_size=True, auto_tokens=True) == \
        (dev.GPU_MAX_BATCH, dev.GPU_MAX_TOKENS)
    assert dev.fitted_batching(Model, "cuda", "bfloat16", 8, 2048, auto_size=False, auto_tokens=True) == \
        (8, dev.GPU_MAX_TOKENS)
    assert dev.fitted_batching(Model, "cuda", "bfloat16", 8, 100, auto_size=False, auto_tokens=False) == (8, 100)


def test_model_shape_reads_t5_and_encoder_configs():
    from transformers import AlbertConfig, T5Config

    t5 = dev.model_shape(T5Config(d_model=768, d_ff=3072, num_layers=12, num_heads=12), beams=5)
    assert (t5.hidden, t5.intermediate, t5.layers, t5.heads, t5.seq2seq, t5.beams) == (768, 3072, 24, 12, True, 5)
    al = dev.model_shape(AlbertConfig(hidden_size=2048, intermediate_size=8192, num_hidden_layers=24,
                                      num_attention_heads=16))
    assert (al.hidden, al.intermediate, al.layers, al.seq2seq) == (2048, 8192, 24, False)
