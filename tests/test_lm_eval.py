"""lm-eval: registered metrics and filter, process_results from the document, the rerank filter's selection rule
(scripted scorer), the config variable, the bundled q2_wow tasks, and the CLI run offline through tiny local models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("lm_eval")

from lm_eval.api.registry import (  # noqa: E402
    get_aggregation,
    get_filter,
    get_metric,
    get_metric_aggregation,
    is_higher_better,
)

import q2_plugins.lm_eval_ext as ext  # noqa: E402
from q2_plugins.results import ResponseResult, ResponseStatus  # noqa: E402
from tests.fakes import ScriptedScorer  # noqa: E402

TINY_ENV = json.dumps({"qg_model": "q2-models/qg", "qa_model": "q2-models/qa", "nli_model": "q2-models/nli"})


def test_metrics_and_filter_are_registered():
    for name, higher in (("q2", True), ("q2_no_nli", True), ("q2_coverage", True), ("q2_fallback_rate", False)):
        assert get_metric(name) is ext.q2
        assert get_metric_aggregation(name) is get_aggregation("mean")
        assert is_higher_better(name) is higher
    assert get_filter("q2_rerank") is ext.Q2RerankFilter
    ext._register()  # registering again (a re-imported module) is a no-op, not a registry error


@pytest.mark.parametrize("result, expected", [
    (ResponseResult(0, ResponseStatus.SCORED, score=0.5, score_no_nli=0.25),
     {"q2": 0.5, "q2_no_nli": 0.25, "q2_coverage": 1.0, "q2_fallback_rate": 0.0}),
    (ResponseResult(0, ResponseStatus.FALLBACK, score=1.0, score_no_nli=1.0, used_fallback=True),
     {"q2": 1.0, "q2_no_nli": 1.0, "q2_coverage": 0.0, "q2_fallback_rate": 1.0}),
    (ResponseResult(0, ResponseStatus.NO_VALID_QUESTION), {"q2_coverage": 0.0, "q2_fallback_rate": 0.0}),
    (ResponseResult(0, ResponseStatus.ERROR, error="empty"), {}),
])
def test_result_metrics_never_fold_missing_scores_into_the_mean(result, expected):
    assert ext.result_metrics(result) == expected


def test_process_results_reads_knowledge_and_history_from_the_doc(monkeypatch):
    scorer = ScriptedScorer({"it aired on pbs .": 0.75})
    seen = []
    monkeypatch.setattr(ext, "scorer", lambda **options: seen.append(options) or scorer)
    doc = {"knowledge": "The show aired on PBS.", "passage": "P", "turns": ["where?"]}
    assert ext.process_results(doc, ["it aired on pbs ."])["q2"] == 0.75
    assert scorer.calls[-1] == {"responses": ["it aired on pbs ."], "knowledge": ["The show aired on PBS."],
                                "history": None}
    custom = ext.make_process_results(knowledge="passage", history="turns", use_nli=False)
    assert custom(doc, [["it aired on pbs .", "other"]]) == {"q2": 0.75, "q2_no_nli": 0.75, "q2_coverage": 1.0,
                                                             "q2_fallback_rate": 0.0}
    assert scorer.calls[-1]["knowledge"] == ["P"] and scorer.calls[-1]["history"] == [["where?"]]
    assert seen[-1] == {"use_nli": False}
    with pytest.raises(KeyError, match="make_process_results"):
        ext.process_results({"text": "x"}, ["y"])


def test_rerank_filter_keeps_the_best_candidate_per_doc(monkeypatch):
    scorer = ScriptedScorer({"a": 0.1, "b": 0.9, "c": None, "d": 0.4})
    monkeypatch.setattr(ext, "scorer", lambda **options: scorer)
    docs = [{"knowledge": "K1"}, {"knowledge": "K2"}, {"passage": "K3"}]
    out = ext.Q2RerankFilter().apply([["a", "b", "c"], ["c", "d"], ["a"]], docs[:2] + [{"knowledge": "K3"}])
    assert out == [["b"], ["d"], ["a"]]
    assert len(scorer.calls) == 1 and scorer.calls[0]["knowledge"] == ["K1"] * 3 + ["K2"] * 2 + ["K3"]
    assert ext.Q2RerankFilter(knowledge="passage").apply([["c", "a"]], [docs[2]]) == [["a"]]


def test_config_from_the_environment(monkeypatch, tmp_path):
    from q2_plugins.adapters import config_from_env

    monkeypatch.setenv(ext.CONFIG_ENV, '{"use_nli": false, "batch_size": 4}')
    cfg = config_from_env(ext.CONFIG_ENV, {"question_mode": "all"})
    assert (cfg.use_nli, cfg.batch_size, cfg.question_mode) == (False, 4, "all")
    (tmp_path / "q2.json").write_text('{"qa_decoding": "squad2"}')
    monkeypatch.setenv(ext.CONFIG_ENV, str(tmp_path / "q2.json"))
    assert config_from_env(ext.CONFIG_ENV).qa_decoding == "squad2"
    for bad, error in (("{not json", ValueError), ("[1]", ValueError), ("/no/such/file.json", ValueError),
                       ('{"qg_modle": "x"}', TypeError)):
        monkeypatch.setenv(ext.CONFIG_ENV, bad)
        with pytest.raises(error):
            config_from_env(ext.CONFIG_ENV)


def test_bundled_task_data_prompt_and_discovery(tmp_path):
    data = ext.load_q2_wow(version=1.0)["test"]
    assert len(data) == 8 and {"history", "knowledge", "response"} <= set(data.column_names)
    prompt = ext.wow_prompt(data[1])
    assert prompt.startswith("Knowledge: He was the creator") and prompt.endswith(
        "\nApprentice: yes I like to watch that some times\nWizard:")
    assert ext.wow_prompt({"knowledge": "K", "history": ["a", "b", "c"]}) == (
        "Knowledge: K\nApprentice: a\nWizard: b\nApprentice: c\nWizard:")
    own = tmp_path / "own.jsonl"
    own.write_text(json.dumps({"history": ["hi"], "knowledge": "K", "response": "r"}) + "\n")
    assert len(ext.load_q2_wow(q2_wow_data=str(own))["test"]) == 1
    own.write_text(json.dumps({"history": ["hi"]}) + "\n")
    with pytest.raises(ValueError, match="knowledge"):
        ext.load_q2_wow(q2_wow_data=str(own))
    tm = ext.task_manager(include_defaults=False)
    assert {"q2_wow", "q2_wow_rerank"} <= set(tm.all_tasks)
    out = subprocess.run([sys.executable, "-m", "q2_plugins.lm_eval_ext"], capture_output=True, text=True, check=True)
    assert Path(out.stdout.strip()) == ext.TASKS_DIR


def test_docs_yaml_excerpts_match_the_shipped_tasks():
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: "!function " + loader.construct_scalar(node))
    docs = (Path(__file__).resolve().parent.parent / "docs" / "huggingface.md").read_text()
    shipped = {}
    for name in ("q2_wow", "q2_wow_rerank"):
        shipped.update(yaml.load((ext.TASKS_DIR / "q2_wow" / f"{name}.yaml").read_text(), Loader=Loader))
    blocks = re.findall(r"```yaml\n(.*?)```", docs, flags=re.S)
    assert len(blocks) == 2
    for block in blocks:
        for key, value in yaml.load(block, Loader=Loader).items():
            if isinstance(value, list) and key == "metric_list":
                assert all(item in shipped[key] for item in value)
            else:
                assert shipped[key] == value, key


def test_docs_examples_run_offline(model_workdir, doc_blocks, monkeypatch, capsys):
    """The documented CLI command (tiny models, no network) and the Python example with q2_wow_rerank."""
    import importlib.util

    if importlib.util.find_spec("accelerate") is None:
        pytest.fail("lm-eval's hf model needs accelerate: the lm-eval extra must be lm-eval[hf] (setup.cfg)")
    blocks = doc_blocks("lm-eval")
    assert [lang for lang, _ in blocks] == ["bash", "python"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("Q2_")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    proc = subprocess.run(["bash", "-euo", "pipefail", "-c", blocks[0][1]], cwd=model_workdir, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    metrics = {cells[5].strip(): cells[7].strip() for cells in (row.split("|") for row in rows[2:])}
    assert {"q2", "q2_no_nli", "q2_coverage", "q2_fallback_rate"} <= set(metrics)
    assert 0.0 <= float(metrics["q2"]) <= 1.0
    assert "q2_wow" in rows[2]

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(ext.CONFIG_ENV, raising=False)
    monkeypatch.setattr(os, "environ", os.environ)  # the example sets Q2_LM_EVAL_CONFIG; monkeypatch restores it
    try:
        exec(compile(blocks[1][1], "README.md", "exec"), {"__name__": "__docs__"})
    finally:
        os.environ.pop(ext.CONFIG_ENV, None)
    printed = capsys.readouterr().out.strip().splitlines()[-1]
    assert 0.0 <= float(printed) <= 1.0
