"""Reranking with early stop on the bundled data (q2_wow's cross annotation: each turn's DodecaDialogue, MemNet and
gold responses as candidates) through the tiny models, in float32 and in int8 (ONNX QA, CTranslate2 QG and NLI):
the best candidate is the one full scoring picks, the candidates left in play score as in full scoring."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from q2_plugins import Q2Scorer
from q2_plugins.integrations.rerank import rerank_batch
from tests.conftest import optional_import

DATA = Path(__file__).resolve().parents[3] / "q2_plugins" / "data" / "q2_wow" / "cross_annotation.csv"


def turns(n: int) -> tuple[list[list[str]], list[str]]:
    with DATA.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))[:n]
    return [[r["dodeca_response"], r["memnet_response"], r["gold"]] for r in rows], [r["knowledge"] for r in rows]


def _config(precision, tiny_config, tiny_models):
    if precision == "fp32":
        return tiny_config.replace(cpu_kernels="torch")
    optional_import("onnxruntime", "onnx")
    optional_import("ctranslate2", "ct2")
    return tiny_config.replace(qa_model=f"onnx:{tiny_models['qa']}", qg_model=f"ct2:{tiny_models['qg_short']}",
                               nli_model=f"ct2:{tiny_models['nli']}", precision_check=0, cpu_kernels="torch")


@pytest.mark.parametrize("precision", ["fp32", "int8"])
def test_early_stop_picks_the_best_candidate_of_full_scoring_on_the_bundled_data(tiny_config, tiny_models, precision,
                                                                                 tmp_path, monkeypatch):
    monkeypatch.setenv("Q2_ONNX_CACHE", str(tmp_path / "onnx"))
    monkeypatch.setenv("Q2_CT2_CACHE", str(tmp_path / "ct2"))
    candidates, knowledge = turns(10)
    scorer = Q2Scorer(_config(precision, tiny_config, tiny_models))
    full = rerank_batch(candidates, knowledge, scorer=scorer, early_stop=False)
    qa_full = scorer.stage_items.get("qa", 0)
    early = rerank_batch(candidates, knowledge, scorer=scorer)
    qa_early = scorer.stage_items.get("qa", 0)
    for f, e in zip(full, early):
        assert e.best == f.best
        for j, stopped in enumerate(e.stopped):
            if not stopped:
                assert (e.q2[j], e.keys[j]) == (f.q2[j], f.keys[j])
    assert qa_early <= qa_full
