"""The signature: one identity per model content, a short form, and the string contract callers rely on."""

from __future__ import annotations

import json
import os
import pickle
import shutil
from pathlib import Path

import pytest

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.metric.results import Q2Result
from q2_plugins.metric.signature import (
    SOURCE_RECORD,
    Signature,
    content_hashes,
    model_id,
    replay_signature,
    short_model_id,
    write_source_record,
)


def _copy(src: Path, dst: Path) -> Path:
    shutil.copytree(src, dst, symlinks=False)
    return dst


def test_byte_identical_copies_are_one_model(tiny_models, tmp_path):
    a = _copy(tiny_models["qa"], tmp_path / "somewhere" / "qa")
    b = _copy(tiny_models["qa"], tmp_path / "elsewhere" / "albert")
    os.utime(b / "config.json", ns=(1, 1))  # another mtime: content decides, not metadata
    assert model_id(str(a)) == model_id(str(b)) == model_id(str(tiny_models["qa"]))
    assert model_id(str(a)).startswith("local:sha256:") and str(a) not in model_id(str(a))
    (b / "README.md").write_text("a model card does not change the model")
    assert model_id(str(b)) == model_id(str(a))
    config = json.loads((b / "config.json").read_text())
    config["layer_norm_eps"] = 1e-5
    (b / "config.json").write_text(json.dumps(config))
    assert model_id(str(b)) != model_id(str(a))


def test_copies_share_the_signature_and_the_cache(tiny_models, tmp_path):
    first = _copy(tiny_models["qg_short"], tmp_path / "a" / "qg")
    second = _copy(tiny_models["qg_short"], tmp_path / "b" / "qg")
    common = dict(qa_model=str(tiny_models["qa"]), nli_model=str(tiny_models["nli"]), qg_max_length=8,
                  cache_dir=str(tmp_path / "cache"))
    responses, knowledge = ["Paris is the capital of France ."], ["Paris is the capital and largest city of France."]
    one = Q2Scorer(Q2Config(qg_model=str(first), **common))
    r1 = one.score(responses=responses, knowledge=knowledge)
    two = Q2Scorer(Q2Config(qg_model=str(second), **common))
    r2 = two.score(responses=responses, knowledge=knowledge)
    assert r1.signature == r2.signature
    assert two.cache.misses == 0 and two.cache.hits > 0  # the copy is served from the first copy's cache
    assert (r1 + r2).stats.n == 2


def test_a_prefetch_record_signs_as_the_hub_only_while_files_match(tiny_models, tmp_path):
    model = _copy(tiny_models["nli"], tmp_path / "nli")
    commit = "0123456789abcdef0123456789abcdef01234567"
    write_source_record(model, "FacebookAI/roberta-large-mnli", commit, None, content_hashes(model))
    assert model_id(str(model)) == f"hub:FacebookAI/roberta-large-mnli@{commit}"
    moved = _copy(model, tmp_path / "copied" / "nli")
    assert model_id(str(moved)) == model_id(str(model))
    (moved / "vocab.json").write_text((moved / "vocab.json").read_text().replace("\"<s>\"", "\"<S>\""))
    assert model_id(str(moved)).startswith("local:sha256:")  # changed files: content identity, not the record
    extra = _copy(model, tmp_path / "extra" / "nli")
    (extra / "added.bin").write_bytes(b"\0")
    assert model_id(str(extra)).startswith("local:sha256:")
    assert json.loads((model / SOURCE_RECORD).read_text())["repo_id"] == "FacebookAI/roberta-large-mnli"


def test_a_hugging_face_snapshot_directory_signs_as_the_hub(tiny_models, tmp_path):
    commit = "89abcdef0123456789abcdef0123456789abcdef"
    snapshot = _copy(tiny_models["qa"], tmp_path / "hub" / "models--org--my-qa" / "snapshots" / commit)
    assert model_id(str(snapshot)) == f"hub:org/my-qa@{commit}"
    assert model_id("org/not-cached", "v1.0") == "hub:org/not-cached@v1.0"
    assert model_id("org/not-cached", commit) == f"hub:org/not-cached@{commit}"


def test_signature_is_a_string_with_a_short_form():
    sig = Signature([("q2", "0.1.0"), ("qg", "hub:org/t5-qg@" + "a" * 40 + "[float32]"), ("cmp", "f1")],
                    [("q2", "0.1.0"), ("qg", short_model_id("hub:org/t5-qg@" + "a" * 40 + "[float32]"))])
    assert sig == f"q2:0.1.0|qg:hub:org/t5-qg@{'a' * 40}[float32]|cmp:f1" and isinstance(sig, str)
    assert sig.short.startswith("q2:0.1.0|qg:t5-qg@aaaaaaa[float32]|#") and sig.get("cmp") == "f1"
    other = Signature([("q2", "0.1.0"), ("qg", "hub:org/t5-qg@" + "a" * 40 + "[float32]"), ("cmp", "f1+nli")],
                      [("q2", "0.1.0"), ("qg", short_model_id("hub:org/t5-qg@" + "a" * 40 + "[float32]"))])
    assert other.short != sig.short  # the hash of the full form tells them apart
    assert json.loads(json.dumps({"s": sig}))["s"] == str(sig)
    again = pickle.loads(pickle.dumps(sig))
    assert again == sig and again.short == sig.short
    result = Q2Result([], sig)
    assert Q2Result.from_dict(json.loads(result.to_json())).signature == sig  # read back as a plain string
    assert short_model_id("local:sha256:0123456789abcdef[bfloat16]") == "local:01234567[bfloat16]"


def test_scorer_signature_full_and_short(tiny_models):
    scorer = Q2Scorer(Q2Config(qg_model=str(tiny_models["qg"]), qa_model=str(tiny_models["qa"]),
                               nli_model=str(tiny_models["nli"])))
    sig = scorer.signature
    assert sig.get("qa") == f"{model_id(str(tiny_models['qa']))}[float32]"
    assert sig.short.startswith("q2:") and "|cfg:paper|#" in sig.short and "qa:local:" in sig.short
    custom = Q2Scorer(Q2Config(qg_model=str(tiny_models["qg"]), qa_model=str(tiny_models["qa"]),
                               nli_model=str(tiny_models["nli"]), qg_num_beams=4, qg_num_return=4))
    assert "|cfg:custom|" in custom.signature.short
    faster = Q2Scorer(Q2Config(qg_model=str(tiny_models["qg"]), qa_model=str(tiny_models["qa"]),
                               nli_model=str(tiny_models["nli"]), batch_size=3, cpu_kernels="torch"))
    assert faster.signature == sig and faster.signature.short == sig.short


def test_replay_signature_names_its_nli_model():
    plain = replay_signature("q2-original")
    assert plain.get("replay") == "recorded-steps" and plain.get("cmp") == "f1" and plain.get("nli") is None
    with_nli = replay_signature("q2-original", "hub:FacebookAI/roberta-large-mnli@" + "b" * 40 + "[float32]")
    assert with_nli.get("cmp") == "f1+nli" and "nli:roberta-large-mnli@bbbbbbb" in with_nli.short


@pytest.mark.parametrize("name", ["config.json", "model.safetensors"])
def test_hashing_is_memoised_per_file(tiny_models, tmp_path, name, monkeypatch):
    from q2_plugins.metric import signature

    model = _copy(tiny_models["qa"], tmp_path / "qa")
    first = content_hashes(model)
    reads = []
    real_open = open

    def counting_open(path, *args, **kw):
        reads.append(str(path))
        return real_open(path, *args, **kw)

    monkeypatch.setattr(signature, "open", counting_open, raising=False)
    assert content_hashes(model) == first and reads == []  # unchanged files are not read again
    (model / name).write_bytes((model / name).read_bytes() + b" ")
    changed = content_hashes(model)
    assert changed[name] != first[name] and any(r.endswith(name) for r in reads)


def test_large_file_hashes_are_indexed_across_processes(tiny_models, tmp_path, monkeypatch):
    from q2_plugins.metric import signature

    model = _copy(tiny_models["qa"], tmp_path / "qa")
    index = tmp_path / "index.json"
    monkeypatch.setenv("Q2_HASH_INDEX", str(index))
    monkeypatch.setattr(signature, "INDEX_MIN_BYTES", 1000)  # the tiny weights count as large here
    monkeypatch.setattr(signature, "_memo", {})
    monkeypatch.setattr(signature, "_index_loaded", None)
    first = content_hashes(model)
    indexed = json.loads(index.read_text())
    assert first["model.safetensors"] in indexed.values() and first["config.json"] not in indexed.values()

    monkeypatch.setattr(signature, "_memo", {})  # a new process: only the index is left
    monkeypatch.setattr(signature, "_index_loaded", None)
    reads = []
    real_open = open
    monkeypatch.setattr(signature, "open", lambda p, *a, **k: reads.append(str(p)) or real_open(p, *a, **k),
                        raising=False)
    assert content_hashes(model) == first
    assert not any(r.endswith("model.safetensors") for r in reads)  # served by the index
    (model / "model.safetensors").write_bytes((model / "model.safetensors").read_bytes() + b"\0")
    assert content_hashes(model)["model.safetensors"] != first["model.safetensors"]  # new size and mtime: read
    monkeypatch.setenv("Q2_HASH_INDEX", "")
    assert signature._index_path() is None
