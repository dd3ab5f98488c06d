"""lm-eval: registered metrics and filter, process_results from the document, the rerank filter's selection rule
(scripted scorer), the config variable, the bundled q2_wow tasks, and the CLI run offline through tiny local models."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

from tests.conftest import optional_import

optional_import("lm_eval", "lm-eval")

from lm_eval.api.registry import (  # noqa: E402
    get_aggregation,
    get_filter,
    get_metric,
    get_metric_aggregation,
    is_higher_better,
)

import q2_plugins.integrations.lm_eval as ext  # noqa: E402
from q2_plugins import Q2Config  # noqa: E402
from q2_plugins.metric.names import PER_RESPONSE  # noqa: E402
from q2_plugins.metric.results import ResponseResult, ResponseStatus  # noqa: E402
from q2_plugins.metric.significance import mean_interval  # noqa: E402
from tests.fakes import ScriptedScorer  # noqa: E402

TINY_ENV = json.dumps({"qg_model": "q2-models/qg", "qa_model": "q2-models/qa", "nli_model": "q2-models/nli"})


def test_metrics_and_filter_are_registered():
    declared = [(m.framework_key, m.higher_is_better) for m in PER_RESPONSE]  # one declaration, read by lm-eval
    assert declared == [("q2", True), ("q2_no_nli", True), ("q2_coverage", True), ("q2_fallback_rate", False)]
    for name, higher in declared:
        assert get_metric(name) is ext.q2
        assert get_metric_aggregation(name) is get_aggregation("mean")
        assert is_higher_better(name) is higher
    assert get_filter("q2_rerank") is ext.Q2RerankFilter
    # a re-imported module registers nothing again (lm-eval's registry refuses a second function under one name)
    reimport = "import importlib, q2_plugins.integrations.lm_eval as ext; importlib.reload(ext)"
    out = subprocess.run([sys.executable, "-c", reimport], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr


@pytest.mark.parametrize("result, expected", [
    (ResponseResult(0, ResponseStatus.SCORED, score=0.5, score_no_nli=0.25),
     {"q2": 0.5, "q2_no_nli": 0.25, "q2_coverage": 1.0, "q2_fallback_rate": 0.0, "q2_ci_low": 0.5,
      "q2_ci_high": 0.5}),
    (ResponseResult(0, ResponseStatus.FALLBACK, score=1.0, score_no_nli=1.0, used_fallback=True),
     {"q2": 1.0, "q2_no_nli": 1.0, "q2_coverage": 0.0, "q2_fallback_rate": 1.0, "q2_ci_low": 1.0,
      "q2_ci_high": 1.0}),
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
    monkeypatch.setattr(ext, "_warned_per_document", False)
    with pytest.warns(RuntimeWarning, match="one at a time"):  # not prepared by lm-eval's evaluator: one call each
        assert ext.process_results(doc, ["it aired on pbs ."])["q2"] == 0.75
    assert scorer.calls[-1] == {"responses": ["it aired on pbs ."], "knowledge": ["The show aired on PBS."],
                                "history": None}
    custom = ext.make_process_results(knowledge="passage", history="turns", use_nli=False)
    assert custom(doc, [["it aired on pbs .", "other"]]) == {"q2": 0.75, "q2_no_nli": 0.75, "q2_coverage": 1.0,
                                                             "q2_fallback_rate": 0.0, "q2_ci_low": 0.75,
                                                             "q2_ci_high": 0.75}
    assert scorer.calls[-1]["knowledge"] == ["P"] and scorer.calls[-1]["history"] == [["where?"]]
    assert seen[-1] == {"use_nli": False}
    with pytest.raises(KeyError, match="make_process_results"):
        ext.process_results({"text": "x"}, ["y"])


class _Instance:
    def __init__(self, doc_id, doc, filtered):
        self.doc_id, self.idx, self.doc, self.filtered_resps = doc_id, 0, doc, filtered


class _Task:
    """What prepare_task reads of an lm-eval task: config (process_results, metadata), instances, aggregation()."""

    def __init__(self, process_results, docs, responses, metadata=None):
        self.config = types.SimpleNamespace(process_results=process_results, metadata=metadata)
        self.instances = [_Instance(i, doc, {"none": r, "other": r + " !"}) for i, (doc, r) in
                          enumerate(zip(docs, responses))]
        self._aggregation = {}

    def aggregation(self):
        return self._aggregation

    def run(self, process_results):
        """The evaluator's loop: per filter, per document, process_results."""
        return {name: [process_results(inst.doc, [inst.filtered_resps[name]]) for inst in self.instances]
                for name in ("none", "other")}


def test_a_task_is_scored_in_one_core_call_and_equals_per_document_scoring(monkeypatch):
    from q2_plugins.integrations.lm_eval import filter_patch

    table = {"a": 0.25, "b": 0.5, "c": None, "a !": 1.0, "b !": 0.0, "c !": 0.75}
    scorer = ScriptedScorer(table)
    monkeypatch.setattr(filter_patch, "shared_scorer", lambda config, slot: scorer)
    monkeypatch.setattr(ext, "scorer", lambda **options: scorer)
    docs = [{"knowledge": f"K{i}", "turns": [f"t{i}"]} for i in range(4)]
    responses = ["a", "b", "c", "a"]  # the first and last documents share a response, not a knowledge
    pr = ext.make_process_results(history="turns")
    task = _Task(pr, docs, responses, metadata={"version": 1.0, "q2": {"use_nli": False}})
    filter_patch.STASH.clear()
    filter_patch.prepare_task(task)
    assert len(scorer.calls) == 1 and len(scorer.calls[0]["responses"]) == 8
    batched = task.run(pr)
    assert len(scorer.calls) == 1, "process_results scored again"
    assert filter_patch.STASH.results == {} and filter_patch.STASH.wanted == {}, "every stashed result was taken once"
    assert task.config.metadata["q2"]["use_nli"] is False and task.config.metadata["version"] == 1.0
    assert task.config.metadata["q2_signature"] == "scripted"
    assert task.aggregation()["q2_details"] is filter_patch.details_aggregation
    filter_patch.STASH.clear()
    with pytest.warns(RuntimeWarning, match="one at a time"):
        monkeypatch.setattr(ext, "_warned_per_document", False)
        single = task.run(pr)
    from lm_eval import evaluator_utils  # the results leave q2_details out: it is each sample's result, no metric

    raw = {(metric, name): [r[metric] for r in batched[name] if metric in r]
           for name in batched for metric in ("q2_no_nli", "q2_details")}
    task.aggregation()["q2_no_nli"] = lambda values: sum(values) / len(values)
    task.task_name = "q2_fake"
    aggregated, _ = evaluator_utils._compute_task_aggregations(task, raw, bootstrap_iters=0)
    assert set(aggregated) == {f"q2_no_nli{part},{name}" for part in ("", "_stderr") for name in batched}
    for name in batched:
        for got, alone in zip(batched[name], single[name]):
            details = got.pop("q2_details")
            assert got == alone
            assert details["signature"] == "scripted" and details["status"] in ("scored", "no_valid_question")
            assert {"response", "knowledge", "score", "status", "num_questions"} <= set(details)
    assert batched["none"][0]["q2"] == 0.25 and batched["other"][1]["q2"] == 0.0 and "q2" not in batched["none"][2]


def test_a_task_using_the_q2_metric_is_scored_in_one_core_call(monkeypatch):
    """Tasks without process_results list the registered metric; doc_to_target is the knowledge."""
    from q2_plugins.integrations.lm_eval import filter_patch

    scorer = ScriptedScorer({"a": 0.25, "b": None, "a !": 1.0, "b !": 0.5})
    monkeypatch.setattr(filter_patch, "shared_scorer", lambda config, slot: scorer)
    monkeypatch.setattr(ext, "scorer", lambda **options: scorer)
    docs = [{"knowledge": "K0"}, {"knowledge": "K1"}, {"knowledge": "K0"}]
    task = _Task(None, docs, ["a", "b", "a"])
    task.OUTPUT_TYPE, task.multiple_target = "generate_until", False
    task.config.doc_to_choice = None
    task.doc_to_target = lambda doc: doc["knowledge"]
    task._metric_fn_list = {"q2": ext.q2, "q2_coverage": ext.q2, "exact_match": len}
    task._metric_fn_kwargs = {"q2": {"use_nli": False}, "q2_coverage": {"use_nli": False}, "exact_match": {}}
    filter_patch.STASH.clear()
    filter_patch.prepare_task(task)
    assert len(scorer.calls) == 1 and sorted(scorer.calls[0]["responses"]) == ["a", "a !", "b", "b !"]
    assert task.config.metadata["q2"]["use_nli"] is False and task.config.metadata["q2_signature"] == "scripted"
    seen = [ext.q2(references=[inst.doc["knowledge"]], predictions=[inst.filtered_resps[name]], use_nli=False)
            for name in ("none", "other") for inst in task.instances for _ in ("q2", "q2_coverage")]
    assert len(scorer.calls) == 1, "the metric scored again"
    assert [m.get("q2") for m in seen[::2]] == [0.25, None, 0.25, 1.0, 0.5, 1.0]
    filter_patch.STASH.clear()
    assert ext.q2(references=["K0"], predictions=["a"], use_nli=False)["q2"] == 0.25 and len(scorer.calls) == 2


def test_task_settings_from_metadata_else_the_environment(monkeypatch, tmp_path):
    from q2_plugins.integrations.lm_eval import filter_patch

    assert filter_patch.task_settings({"version": 1}) is None and filter_patch.task_settings(None) is None
    assert filter_patch.task_settings({"q2": '{"use_nli": false}'}) == {"use_nli": False}
    (tmp_path / "q2.json").write_text('{"question_mode": "all"}')
    assert filter_patch.task_settings({"q2": str(tmp_path / "q2.json")}) == {"question_mode": "all"}
    for bad in ("{nope", "/no/such.json", 3):
        with pytest.raises(ValueError, match="metadata 'q2'"):
            filter_patch.task_settings({"q2": bad})
    monkeypatch.setenv(ext.CONFIG_ENV, '{"question_mode": "all"}')
    assert filter_patch.scorer().config.question_mode == "all"
    with filter_patch._task_settings({"use_nli": False}):
        assert filter_patch._config({"remove_personal": False}) == Q2Config(use_nli=False, remove_personal=False)


def test_rerank_filter_keeps_the_best_candidate_per_doc(monkeypatch):
    scorer = ScriptedScorer({"a": 0.1, "b": 0.9, "c": None, "d": 0.4})
    monkeypatch.setattr(ext, "scorer", lambda **options: scorer)
    docs = [{"knowledge": "K1"}, {"knowledge": "K2"}, {"passage": "K3"}]
    out = ext.Q2RerankFilter().apply([["a", "b", "c"], ["c", "d"], ["a"]], docs[:2] + [{"knowledge": "K3"}])
    assert out == [["b"], ["d"], ["a"]]
    assert len(scorer.calls) == 1 and scorer.calls[0]["knowledge"] == ["K1"] * 3 + ["K2"] * 2 + ["K3"]
    assert ext.Q2RerankFilter(knowledge="passage").apply([["c", "a"]], [docs[2]]) == [["a"]]


def test_config_from_the_environment(monkeypatch, tmp_path):
    from q2_plugins.integrations.adapters import config_from_env

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
    out = subprocess.run([sys.executable, "-m", "q2_plugins.integrations.lm_eval"], capture_output=True, text=True,
                         check=True)
    assert Path(out.stdout.strip()) == ext.TASKS_DIR


def test_docs_yaml_excerpts_match_the_shipped_tasks():
    import re

    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: "!function " + loader.construct_scalar(node))
    docs = (Path(__file__).resolve().parents[3] / "docs" / "huggingface.md").read_text()
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
    """The documented CLI command (tiny models, no network: settings and signature in the results JSON, Q² details
    in the logged samples) and the Python example with q2_wow_rerank (one core call for the task)."""
    import importlib.util

    from q2_plugins import Q2Scorer

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
    # nothing of ours on standard error: no note on the bundled task's data keywords, no loading bar but lm-eval's
    # own of the model it evaluates (the Q² models load quietly)
    assert "Custom kwargs can be passed" not in proc.stderr, proc.stderr[-3000:]
    assert proc.stderr.count("Loading weights:   0%") == 1, proc.stderr[-3000:]
    rows = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    metrics = {cells[5].strip(): cells[7].strip() for cells in (row.split("|") for row in rows[2:])}
    assert {"q2", "q2_no_nli", "q2_coverage", "q2_fallback_rate"} <= set(metrics)
    assert "q2_details" not in metrics  # the details are in the logged samples, not a metric row (a count)
    assert 0.0 <= float(metrics["q2"]) <= 1.0
    assert "q2_wow" in rows[2]
    (results_file,) = (model_workdir / "out").rglob("results_*.json")
    metadata = json.loads(results_file.read_text())["configs"]["q2_wow"]["metadata"]
    assert metadata["q2"]["qg_model"] == "q2-models/qg" and metadata["q2"]["use_nli"] is True
    assert metadata["q2_signature"] == Q2Scorer(ext.filter_patch.config_from_options(
        {"qg_model": "q2-models/qg", "qa_model": "q2-models/qa", "nli_model": "q2-models/nli"})).signature
    (samples_file,) = (model_workdir / "out").rglob("samples_q2_wow_*.jsonl")
    samples = [json.loads(line) for line in samples_file.read_text().splitlines()]
    assert len(samples) == 8
    results = json.loads(results_file.read_text())["results"]["q2_wow"]
    assert not [key for key in results if key.startswith("q2_details")]
    # lm-eval's own standard error of the q2 mean is the core's (q2 score's summary) on the same per-document values
    values = [s["q2"] for s in samples if s.get("q2") is not None]
    stderr = mean_interval(len(values), sum(values), sum(v * v for v in values))[0]
    reported = json.loads(results_file.read_text())["results"]["q2_wow"]["q2_stderr,none"]
    assert reported == pytest.approx(stderr) if stderr is not None else reported in ("N/A", None)
    # ...and the bounds of its interval are those q2 score prints, inside [0, 1]
    interval = mean_interval(len(values), sum(values), sum(v * v for v in values))[1]
    got = (results["q2_ci_low,none"], results["q2_ci_high,none"])
    assert got == pytest.approx((interval.low, interval.high)) and 0 <= got[0] <= results["q2,none"] <= got[1] <= 1
    for sample in samples:
        details = sample["q2_details"]
        assert details["response"] == sample["filtered_resps"][0] and details["knowledge"] == sample["doc"]["knowledge"]
        assert "questions" in details and details["signature"] == metadata["q2_signature"]
        assert details["score"] == sample.get("q2")
    from q2_plugins.jobs.report import load_results

    loaded = load_results([samples_file])  # `q2 report` reads the samples file: each row's q2_details
    assert [r["score"] for r in loaded.rows] == [s["q2_details"]["score"] for s in samples]
    assert loaded.signatures == [metadata["q2_signature"]]

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv(ext.CONFIG_ENV, raising=False)
    calls = []
    original = Q2Scorer.score
    monkeypatch.setattr(Q2Scorer, "score",
                        lambda self, **kw: calls.append(len(kw["responses"])) or original(self, **kw))
    exec(compile(blocks[1][1], "README.md", "exec"), {"__name__": "__docs__"})
    printed = capsys.readouterr().out.strip().splitlines()
    assert printed[-2].startswith("q2:") and 0.0 <= float(printed[-1]) <= 1.0
    assert calls == [8], "the rerank filter scores the 2 x 4 candidates; the task reuses those results"


def test_the_entry_points_name_every_registered_metric_and_filter():
    """setup.cfg declares an lm-eval entry point (lm-eval's plugin discovery) for each name the import registers, and
    each names the very object lm-eval's registry holds under that name (0.4.x reads none of them: harmless there)."""
    import configparser
    import importlib

    from tests.conftest import REPO

    parser = configparser.ConfigParser()
    parser.read(REPO / "setup.cfg", encoding="utf-8")
    declared = {}
    for group in ("lm_eval.metrics", "lm_eval.filters"):
        for line in parser["options.entry_points"][group].strip().splitlines():
            name, target = (part.strip() for part in line.split("="))
            module, attribute = target.split(":")
            declared[(group, name)] = getattr(importlib.import_module(module), attribute)
    registered = {("lm_eval.metrics", m.framework_key): get_metric(m.framework_key) for m in PER_RESPONSE}
    registered[("lm_eval.filters", "q2_rerank")] = get_filter("q2_rerank")
    assert declared.keys() == registered.keys()
    assert all(declared[key] is registered[key] for key in declared), declared
