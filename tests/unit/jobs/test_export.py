"""``q2 export``: Every Eval Ever records that pass the bundled 0.3.0 schemas, with the metric ids, the interval of a
mean score that ``q2 score`` prints, the signature, one instance record per response and honest unscored rows; a run
without NLI exported as what it measured, a file whose ids repeat exported by position."""

from __future__ import annotations

import hashlib
import json
import uuid
from pathlib import Path

import numpy as np
import pytest

from q2_plugins.cli import main
from q2_plugins.io.rows import result_row
from q2_plugins.jobs.export import SCHEMA_DIR, ExportOptions, load_schema, write_export
from q2_plugins.metric import names as M
from q2_plugins.metric.results import QuestionResult, ResponseResult, ResponseStatus
from q2_plugins.metric.significance import mean_interval
from tests.conftest import optional_import

jsonschema = optional_import("jsonschema", "dev")

SIGNATURE = "q2:test|qg:local:abc"
RUN = "2b1f6f0e-8a4c-4f3e-9d2a-0c6b5e7d8f91"


def _question(score: float) -> QuestionResult:
    return QuestionResult(candidate="PBS", question="where did it air?", response_answer="pbs",
                          knowledge_answer="PBS", knowledge_answer_kind="span", f1=1.0, nli_label=None, score=score)


def _results(tmp_path, n: int = 9):
    """A result file of ``q2 score --explain``: scored rows, one fallback, one error; its sidecar has the signature."""
    out = []
    for i in range(n):
        if i == 4:
            res = ResponseResult(i, ResponseStatus.ERROR, error="empty response")
        elif i == 7:
            res = ResponseResult(i, ResponseStatus.FALLBACK, score=1.0, score_no_nli=1.0, used_fallback=True,
                                 fallback_label="entailment", candidates=[], questions=[], dropped=[])
        else:
            s = (i % 4) / 4
            res = ResponseResult(i, ResponseStatus.SCORED, score=s, score_no_nli=s / 2, num_questions=1,
                                 num_candidates=1, candidates=["PBS"], questions=[_question(s)], dropped=[])
        fields = {"id": f"wow-{i}", "history": ["hi", "do you watch tv?"], "response": f"it aired on pbs {i}",
                  "knowledge": "The show aired on PBS."}
        out.append(result_row(i, fields, res, explain=True))
    path = tmp_path / "scored.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in out), encoding="utf-8")
    (tmp_path / "scored.jsonl.meta.json").write_text(json.dumps({"signature": SIGNATURE}), encoding="utf-8")
    return path, out


def _export(tmp_path, **options):
    path, rows = _results(tmp_path)
    paths = write_export(path, tmp_path / "eee", ExportOptions(model_id="acme/chatter", timestamp=1_700_000_000,
                                                               run_uuid=RUN, **options))
    aggregate = json.loads(paths.aggregate.read_text(encoding="utf-8"))
    instances = [json.loads(line) for line in paths.instances.read_text(encoding="utf-8").splitlines()]
    return paths, aggregate, instances, rows


def test_the_bundled_schemas_keep_their_licence():
    assert {p.name for p in SCHEMA_DIR.iterdir()} == {"LICENSE", "README.md", "eval.schema.json",
                                                       "instance_level_eval.schema.json"}
    assert "MIT License" in (SCHEMA_DIR / "LICENSE").read_text(encoding="utf-8")
    assert load_schema("eval")["version"] == load_schema("instance_level_eval")["version"] == "0.3.0"


def test_records_pass_the_published_schemas(tmp_path):
    paths, aggregate, instances, _ = _export(tmp_path)
    jsonschema.Draft7Validator(load_schema("eval")).validate(aggregate)
    validator = jsonschema.Draft7Validator(load_schema("instance_level_eval"))
    for record in instances:
        validator.validate(record)
    # the repository layout, and the aggregate's pointer and checksum are those of the samples file written
    assert paths.aggregate.relative_to(tmp_path / "eee").as_posix() == f"data/scored/acme/chatter/{RUN}.json"
    detail = aggregate["detailed_evaluation_results"]
    assert (tmp_path / "eee" / detail["file_path"]) == paths.instances
    assert detail["checksum"] == hashlib.sha256(paths.instances.read_bytes()).hexdigest()
    assert detail["total_rows"] == len(instances) == 9


def test_the_aggregate_names_the_library_the_metrics_and_the_interval_q2_score_prints(tmp_path):
    from q2_plugins import __version__

    _, aggregate, _, rows = _export(tmp_path)
    assert aggregate["eval_library"] == {"name": "q2-plugins", "version": __version__,
                                         "additional_details": {"signature": SIGNATURE}}
    assert aggregate["evaluation_id"] == "scored/acme/chatter/1700000000"
    by_id = {r["metric_config"]["metric_id"]: r for r in aggregate["evaluation_results"]}
    assert list(by_id) == ["q2.score", "q2.score_no_nli"]
    for metric_id, field in (("q2.score", "score"), ("q2.score_no_nli", "score_no_nli")):
        result, values = by_id[metric_id], [r[field] for r in rows]
        config = result["metric_config"]
        assert (config["lower_is_better"], config["score_type"], config["min_score"], config["max_score"]) == (
            False, "continuous", 0.0, 1.0)
        kept = [v for v in values if v is not None]
        assert result["score_details"]["score"] == pytest.approx(sum(kept) / len(kept))  # the error row left out
        assert result["score_details"]["details"] == {"signature": SIGNATURE, "n": "9", "n_scored": "8",
                                                      "n_errors": "1"}
        expected = mean_interval(len(kept), sum(kept), sum(v * v for v in kept))[1]
        interval = result["score_details"]["uncertainty"]["confidence_interval"]
        assert (interval["lower"], interval["upper"]) == (expected.low, expected.high)
        assert interval["method"] == M.MEAN_INTERVAL_METHOD and 0 <= interval["lower"] <= interval["upper"] <= 1
        assert result["score_details"]["uncertainty"]["standard_error"]["value"] == pytest.approx(
            np.std(kept, ddof=1) / np.sqrt(len(kept)))


def test_one_instance_record_per_response_with_its_questions(tmp_path):
    _, _, instances, rows = _export(tmp_path)
    assert [r["sample_id"] for r in instances] == [f"wow-{i}" for i in range(9)]
    first = instances[1]
    assert first["output"] == {"raw": ["it aired on pbs 1"]} and first["input"]["reference"] == [
        "The show aired on PBS."]
    assert first["input"]["raw"] == "hi\ndo you watch tv?"
    assert first["evaluation"] == {"score": 0.25, "is_correct": False}
    assert json.loads(first["metadata"]["questions"])[0]["question"] == "where did it air?"
    assert first["metadata"]["signature"] == SIGNATURE and first["error"] is None
    assert instances[3]["evaluation"]["is_correct"] is True  # 0.75 > 0.5
    # a response without a score: outside the mean, and its record says why
    error = instances[4]
    assert error["error"] == "error: empty response" and error["evaluation"] == {"score": 0.0, "is_correct": False}
    assert instances[7]["metadata"]["status"] == "fallback" and instances[7]["metadata"]["questions"] == "[]"


def test_the_command_writes_the_records_and_refuses_what_it_cannot_export(tmp_path, capsys):
    path, rows = _results(tmp_path)
    assert main(["export", str(path), "--output-dir", str(tmp_path / "out"), "--model-id", "acme/chatter"]) == 0
    printed = capsys.readouterr().out.split()
    aggregate = json.loads(Path(printed[1]).read_text(encoding="utf-8"))
    assert uuid.UUID(aggregate["detailed_evaluation_results"]["file_path"].split("/")[-1][:36]).version == 4
    # two runs in one file (two signatures) are not one evaluation
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text("".join(json.dumps({**r, "signature": f"sig-{i % 2}"}) + "\n" for i, r in enumerate(rows)))
    assert main(["export", str(mixed), "--output-dir", str(tmp_path / "out2"), "--model-id", "acme/chatter"]) == 2
    assert "one run with one signature, but the file carries 2" in capsys.readouterr().err
    with pytest.raises(ValueError, match="model_id"):
        ExportOptions(model_id=" ")


def test_the_hub_results_are_one_yaml_file_per_figure_with_the_aggregate_values(tmp_path, capsys):
    """--hub-dataset-id also writes the model repository's .eval_results files: YAML lists of one result whose value
    is the aggregate record's figure, with the data set, the run's date and notes naming interval and signature."""
    yaml = optional_import("yaml", "dev")
    path, _ = _results(tmp_path)
    out = tmp_path / "out"
    assert main(["export", str(path), "--output-dir", str(out), "--model-id", "acme/chatter", "--hub-dataset-id",
                 "acme/wow-dev", "--hub-task-id", "seen", "--hub-source-url", "https://example.org/r.html"]) == 0
    printed = capsys.readouterr().out.split()
    aggregate = json.loads(Path(printed[1]).read_text(encoding="utf-8"))
    figures = {r["metric_config"]["metric_id"]: r["score_details"] for r in aggregate["evaluation_results"]}
    assert sorted(p.name for p in (out / ".eval_results").iterdir()) == ["q2.yaml", "q2_no_nli.yaml"]
    assert printed[-4:] == ["hub", str(out / ".eval_results" / "q2.yaml"), "hub",
                            str(out / ".eval_results" / "q2_no_nli.yaml")]
    for name, metric_id in (("q2.yaml", "q2.score"), ("q2_no_nli.yaml", "q2.score_no_nli")):
        (entry,) = yaml.safe_load((out / ".eval_results" / name).read_text(encoding="utf-8"))
        assert entry["dataset"] == {"id": "acme/wow-dev", "task_id": "seen"}
        assert entry["value"] == pytest.approx(figures[metric_id]["score"], abs=5e-5)
        assert entry["source"] == {"url": "https://example.org/r.html", "name": "q2-plugins"}
        interval = figures[metric_id]["uncertainty"]["confidence_interval"]
        assert f"[{interval['lower']:.4f}, {interval['upper']:.4f}]" in entry["notes"]
        assert SIGNATURE in entry["notes"] and "over 8 of 9 responses" in entry["notes"]
        assert len(entry["date"]) == 10 and entry["date"][:2] == "20"
    # text that YAML would misread stays the same text; a data set that is no Hub id, or hub flags without one, refused
    from q2_plugins.jobs.export import ExportOptions, HubResults, hub_eval_results

    tricky = 'a: "b" # c\n- d'
    files = hub_eval_results(aggregate, HubResults("acme/wow-dev", task_id=tricky))
    assert yaml.safe_load(files["q2.yaml"])[0]["dataset"]["task_id"] == tricky
    assert main(["export", str(path), "--output-dir", str(tmp_path / "o2"), "--model-id", "a/b",
                 "--hub-dataset-id", "not an id"]) == 2
    assert capsys.readouterr().err.startswith("q2 export: error: --hub-dataset-id: expected the Hub id")
    assert main(["export", str(path), "--output-dir", str(tmp_path / "o3"), "--model-id", "a/b",
                 "--hub-task-id", "seen"]) == 2
    assert "name the benchmark data set too" in capsys.readouterr().err
    assert ExportOptions(model_id="a/b").model_id == "a/b"


@pytest.mark.parametrize("flags", [[], ["--hub-task-id", "seen"], ["--hub-source-url", "https://example.org/r.html"],
                                   ["--hub-task-id", "seen", "--hub-source-url", "https://example.org/r.html"]],
                         ids=["dataset-only", "task", "source", "task+source"])
def test_every_hub_results_file_is_read_back_by_the_hub_client(tmp_path, flags):
    """What huggingface_hub's own reader makes of each file: the data set with a task id always (``default`` when
    none is named), the figure, and a source only where a URL was given (the Hub refuses one without)."""
    yaml = optional_import("yaml", "dev")
    hub_client = optional_import("huggingface_hub", "dev")
    assert hasattr(hub_client, "parse_eval_result_entries"), (
        f"huggingface_hub {hub_client.__version__} has no parse_eval_result_entries: install requirements.lock's")
    path, _ = _results(tmp_path)
    out = tmp_path / "out"
    assert main(["export", str(path), "--output-dir", str(out), "--model-id", "acme/chatter", "--hub-dataset-id",
                 "acme/wow-dev", *flags]) == 0
    given = dict(zip(flags[::2], flags[1::2]))
    for name in ("q2.yaml", "q2_no_nli.yaml"):
        data = yaml.safe_load((out / ".eval_results" / name).read_text(encoding="utf-8"))
        (entry,) = hub_client.parse_eval_result_entries(data)
        assert (entry.dataset_id, entry.task_id) == ("acme/wow-dev", given.get("--hub-task-id", "default"))
        assert entry.value == data[0]["value"] and 0 <= entry.value <= 1
        assert entry.source_url == given.get("--hub-source-url")
        assert entry.source_name == ("q2-plugins" if "--hub-source-url" in given else None)
        assert "source" in data[0] or entry.source_name is None
        assert entry.notes and "signature" in entry.notes and entry.date == data[0]["date"]


def test_a_link_planted_where_an_export_file_goes_is_refused(tmp_path, capsys):
    path, _ = _results(tmp_path)
    out, target = tmp_path / "out", tmp_path / "elsewhere.txt"
    target.write_text("keep me")
    (out / ".eval_results").mkdir(parents=True)
    (out / ".eval_results" / "q2.yaml.tmp").symlink_to(target)
    assert main(["export", str(path), "--output-dir", str(out), "--model-id", "acme/chatter",
                 "--hub-dataset-id", "acme/wow-dev"]) == 2
    assert "is a link" in capsys.readouterr().err and target.read_text() == "keep me"


def test_a_link_at_the_hub_results_folder_is_refused_and_its_target_untouched(tmp_path, capsys):
    path, _ = _results(tmp_path)
    out, elsewhere = tmp_path / "out", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "q2.yaml").write_text("keep me")
    out.mkdir()
    (out / ".eval_results").symlink_to(elsewhere, target_is_directory=True)
    assert main(["export", str(path), "--output-dir", str(out), "--model-id", "acme/chatter",
                 "--hub-dataset-id", "acme/wow-dev"]) == 2
    err = capsys.readouterr().err
    assert str(out / ".eval_results") in err and "is a link" in err, err
    assert [p.name for p in elsewhere.iterdir()] == ["q2.yaml"] and (elsewhere / "q2.yaml").read_text() == "keep me"


@pytest.mark.parametrize("flags", [["--model-id", "../..", "--evaluation-name", ".."],
                                   ["--model-id", "../../..", "--evaluation-name", "../x/.."],
                                   ["--model-id", "a\\..\\b/..", "--evaluation-name", "./."]])
def test_names_that_are_paths_stay_folder_names_under_the_output(tmp_path, capsys, flags):
    path, _ = _results(tmp_path)
    out = tmp_path / "deep" / "out"
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["export", str(path), "--output-dir", str(out), *flags]) == 0
    written = [Path(line.split()[-1]) for line in capsys.readouterr().out.splitlines()]
    assert written and all(p.resolve().is_relative_to(out.resolve()) for p in written), written
    assert all(p.resolve().parent.parent.parent.parent == (out / "data").resolve() for p in written), written
    after = {p.relative_to(tmp_path) for p in tmp_path.rglob("*")}
    assert {p for p in after if not p.is_relative_to(Path("deep/out"))} == set(before) | {Path("deep")}


def test_control_characters_in_hub_fields_give_yaml_that_parses_to_the_same_text(tmp_path, capsys):
    yaml = optional_import("yaml", "dev")
    path, _ = _results(tmp_path)
    out = tmp_path / "out"
    task = "seen\x7fdel\x85nel\u2028ls\x9fc1\ufffeend \U0001F600"
    assert main(["export", str(path), "--output-dir", str(out), "--model-id", "acme/chatter", "--hub-dataset-id",
                 "acme/wow-dev", "--hub-task-id", task, "--hub-source-url", "https://example.org/\x7f"]) == 0
    for name in ("q2.yaml", "q2_no_nli.yaml"):
        text = (out / ".eval_results" / name).read_text(encoding="utf-8")
        (entry,) = yaml.safe_load(text)
        assert entry["dataset"]["task_id"] == task and entry["source"]["url"] == "https://example.org/\x7f"


def test_scores_of_random_weight_test_models_are_said_so_and_never_become_hub_results(tmp_path, capsys):
    """The sidecar names the test models where their paths resolved (write_meta reads their cards); the aggregate
    record carries them, the command says so, and Hub results of them are refused before any file is written."""
    from q2_plugins.backends.loading import RANDOM_WEIGHTS_MARK
    from q2_plugins.io.rows import write_meta

    test_model, real_model = tmp_path / "tiny-qa", tmp_path / "real-qa"
    for folder, card in ((test_model, RANDOM_WEIGHTS_MARK), (real_model, "# a fine-tuned QA model")):
        folder.mkdir()
        (folder / "README.md").write_text(card + "\n")
    path, _ = _results(tmp_path)
    meta = json.loads(write_meta(path, engine="local", signature=SIGNATURE, summary={}, exit_code=0, rows=9,
                                 config={"qa_model": str(test_model)}, input="in.jsonl", spec=None).read_text())
    assert meta["random_weights"] == ["qa_model"]
    out = tmp_path / "out"
    assert main(["export", str(path), "--output-dir", str(out), "--model-id", "a/b", "--hub-dataset-id", "o/d"]) == 2
    assert "random-weight test models (qa_model;" in capsys.readouterr().err and not out.exists()
    assert main(["export", str(path), "--output-dir", str(out), "--model-id", "a/b"]) == 0
    captured = capsys.readouterr()
    assert "random-weight test models (qa_model;" in captured.err
    aggregate = json.loads(Path(captured.out.split()[1]).read_text(encoding="utf-8"))
    assert aggregate["eval_library"]["additional_details"]["random_weight_test_models"] == "qa_model"
    meta = json.loads(write_meta(path, engine="local", signature=SIGNATURE, summary={}, exit_code=0, rows=9,
                                 config={"qa_model": str(real_model)}, input="in.jsonl", spec=None).read_text())
    assert "random_weights" not in meta  # a real model's run: no such key, no word, Hub results written
    assert main(["export", str(path), "--output-dir", str(tmp_path / "o2"), "--model-id", "a/b",
                 "--hub-dataset-id", "o/d"]) == 0
    assert "random-weight" not in capsys.readouterr().err


def test_a_replay_exports_q2_without_nli_under_its_own_id_and_says_why_q2_is_absent(tmp_path, capsys):
    """A replay of recorded steps has no NLI (its Q2 is n/a): the export holds q2.score_no_nli alone, with the figure
    the replay printed as Q2 w/o NLI, its instance records score Q2 w/o NLI, and the command says why; the bundled
    slice's subsets repeat ids, so the export says how to export it (by position), and does."""
    yaml = optional_import("yaml", "dev")
    from q2_plugins.jobs.replay import bundled_original_run

    steps, scores = bundled_original_run()
    replayed = tmp_path / "replay.jsonl"
    assert main(["replay", "--steps", *map(str, steps), "--scores", *map(str, scores), "--output", str(replayed),
                 "--format", "json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    out = tmp_path / "out"
    argv = ["export", str(replayed), "--output-dir", str(out), "--model-id", "acme/chatter"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "comes twice" in err and "--sample-ids position" in err
    assert main([*argv, "--sample-ids", "position", "--hub-dataset-id", "acme/wow"]) == 0
    captured = capsys.readouterr()
    assert "q2.score is not exported" in captured.err and "no NLI" in captured.err
    aggregate = json.loads(Path(captured.out.split()[1]).read_text(encoding="utf-8"))
    (result,) = aggregate["evaluation_results"]
    assert result["metric_config"]["metric_id"] == "q2.score_no_nli" and result["metric_config"]["metric_name"] == \
        "q2_no_nli"
    assert result["score_details"]["score"] == pytest.approx(summary["q2_no_nli"])
    assert "no NLI" in aggregate["eval_library"]["additional_details"]["q2_score_absent"]
    instances = [json.loads(line) for line in Path(captured.out.split()[3]).read_text(encoding="utf-8").splitlines()]
    assert [r["sample_id"] for r in instances] == [str(i) for i in range(len(instances))]
    assert {r["evaluation_result_id"].rsplit("/", 1)[1] for r in instances} == {"q2.score_no_nli"}
    assert sorted(p.name for p in (out / ".eval_results").iterdir()) == ["q2_no_nli.yaml"]
    (entry,) = yaml.safe_load((out / ".eval_results" / "q2_no_nli.yaml").read_text(encoding="utf-8"))
    assert entry["notes"].startswith("Mean Q2 without NLI")
