"""The ct2 backend (int8 CTranslate2 conversions of the QG and NLI models): converted once per model identity, its
own identity, the roles it converts only, and decisions compared with float32 (on tiny random-weight models)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from q2_plugins import Q2Config, backends
from q2_plugins.metric import precision
from q2_plugins.metric.errors import SettingError
from tests.conftest import optional_import

optional_import("ctranslate2", "ct2")
from q2_plugins.backends import ct2  # noqa: E402

SAMPLE = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "sample.jsonl"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    return [json.loads(line) for line in SAMPLE.read_text().splitlines()]


@pytest.fixture(scope="module")
def ct2_cache(tmp_path_factory):
    mp = pytest.MonkeyPatch()
    path = tmp_path_factory.mktemp("ct2")
    mp.setenv(ct2.CACHE_ENV, str(path))
    yield path
    mp.undo()


def _config(tiny_models, compute="int8", **changes):
    return Q2Config(qg_model=f"ct2:{tiny_models['qg_short']}#{compute}", qa_model=str(tiny_models["qa"]),
                    nli_model=f"ct2:{tiny_models['nli']}#{compute}", qg_max_length=12, cpu_kernels="torch", **changes)


def test_identity_names_the_engine_the_model_and_the_compute_type(tiny_models):
    c = _config(tiny_models)
    hf_id = backends.identity("nli", Q2Config(nli_model=str(tiny_models["nli"])))
    ident = backends.identity("nli", c)
    assert ident.startswith("ct2-") and ident.endswith("[int8]") and hf_id.split("[")[0] in ident
    assert backends.identity("qg", _config(tiny_models, "int8_float32")).endswith("[int8_float32]")
    with pytest.raises(SettingError, match="qa_model: the ct2 backend converts QG .* not qa"):
        backends.identity("qa", c, model=f"ct2:{tiny_models['qa']}")


def test_conversion_is_cached_by_model_identity(tiny_models, ct2_cache, monkeypatch):
    first = ct2.converted("nli", f"{tiny_models['nli']}#int8", None)
    assert (first / "model.bin").exists() and (first / "q2_head.pt").exists()
    monkeypatch.setattr(ct2, "_convert", lambda *a: pytest.fail("converted twice"))
    assert ct2.converted("nli", f"{tiny_models['nli']}#int8", None) == first
    assert ct2.converted.__module__ and first.parent == ct2_cache


def test_float32_conversion_gives_the_transformers_logits(tiny_models, ct2_cache, rows):
    import torch

    mine = backends.load("nli", _config(tiny_models, "float32"))
    ref = backends.load("nli", Q2Config(nli_model=str(tiny_models["nli"]), cpu_kernels="torch"))
    pairs = [(r["knowledge"], r["response"]) for r in rows]
    a, b = mine._logits(mine._windows(pairs)), ref._logits(ref._windows(pairs))
    assert all(torch.allclose(x, y, atol=1e-4) for x, y in zip(a, b))
    assert mine.predict(pairs) == ref.predict(pairs)
    int8 = backends.load("nli", _config(tiny_models))
    assert len(int8.predict(pairs)) == len(pairs)


def test_question_generation_returns_the_asked_questions(tiny_models, ct2_cache, rows):
    qg = backends.load("qg", _config(tiny_models))
    pairs = [(r["response"].split()[0], r["response"]) for r in rows[:4]]
    out = qg.generate(pairs)
    assert len(out) == 4 and all(len(q) == 5 and all(isinstance(x, str) for x in q) for q in out)
    assert qg.unfit([("x", "word " * 600)])[0].startswith("the response is")
    with pytest.raises(SettingError, match="qg_device: the ct2 backend runs on the CPU"):
        backends.load("qg", _config(tiny_models, device="cuda"))


def test_a_ct2_run_checks_itself_against_float32(tiny_models, ct2_cache, rows):
    from q2_plugins.scorer import Q2Scorer

    c = _config(tiny_models, precision_check=3)
    assert "qg: ct2 backend" in precision.check_due(c) and "nli: ct2 backend" in precision.check_due(c)
    ref = precision.reference_config(c)
    assert ref.qg_model == str(tiny_models["qg_short"]) and ref.nli_model == str(tiny_models["nli"])
    scorer = Q2Scorer(c)
    result = scorer.score(responses=[r["response"] for r in rows[:4]], knowledge=[r["knowledge"] for r in rows[:4]])
    assert "ct2-" in str(result.signature) and scorer.precision_agreement.rows == 3


def test_check_precision_prints_the_comparison(tiny_models, ct2_cache, rows, tmp_path, capsys):
    from q2_plugins.cli import main

    data = tmp_path / "in.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    c = _config(tiny_models)
    code = main(["check-precision", "--input", str(data), "--rows", "3", "--qg-model", c.qg_model, "--qa-model",
                 c.qa_model, "--nli-model", c.nli_model, "--qg-max-length", "12", "--format", "json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0 and out["rows"] == 3 and out["speed_ratio"] > 0
    assert "ct2" in out["checked"] and "ct2" not in out["reference"]
    assert {"score_mae", "score_corr", "moved_share", "filter_flip_share", "nli_flip_share"} <= set(out)
    assert "ct2-" in out["signatures"]["checked"] and "ct2-" not in out["signatures"]["reference"]


def test_batches_run_side_by_side_give_each_batch_its_own_questions(tiny_models, ct2_cache, rows):
    """All batches are queued at once: every row still gets the questions of its own input, in input order, and
    loading the translator leaves torch's thread count as it was."""
    import torch

    threads = torch.get_num_threads()
    qg = backends.load("qg", _config(tiny_models, batch_size=1))
    assert torch.get_num_threads() == threads
    pairs = [(r["response"].split()[i], r["response"]) for r in rows[:6] for i in (0, 1)]
    together = qg.generate(pairs)
    assert together == [qg.generate([p])[0] for p in pairs]
    assert len({tuple(q) for q in together}) > 1


def test_nli_batches_run_side_by_side_give_each_pair_its_own_label(tiny_models, ct2_cache, rows):
    import torch

    threads = torch.get_num_threads()
    nli = backends.load("nli", _config(tiny_models, batch_size=1))
    assert torch.get_num_threads() == threads
    pairs = [(r["knowledge"], r["response"]) for r in rows]
    together = nli._logits(nli._windows(pairs))
    assert len(together) == len(pairs)
    alone = [nli._logits(nli._windows([p]))[0] for p in pairs]
    assert all(torch.equal(a, b) for a, b in zip(together, alone))
    assert len({tuple(x.tolist()) for x in together}) == len(pairs)
