"""``--metrics q2`` in ParlAI's eval loop, in-process, with a scripted scorer (no models, no training).

The ``repeat_label`` agent answers with the gold response, so the scored pairs are known and the report can be
checked against the same pairs scored offline.
"""

from __future__ import annotations

import json
import math
import os
import warnings

import pytest

from tests.conftest import optional_import

optional_import("parlai", "parlai")

warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)

import parlai_ext  # noqa: E402
from parlai_ext.metric import Q2KnowledgeFieldError  # noqa: E402
from parlai_ext.options import NO_KNOWLEDGE, config_from_opt  # noqa: E402
from parlai_ext.testing import write_wow_data  # noqa: E402
from q2_plugins import Q2Config, Q2Stats  # noqa: E402
from q2_plugins.metric.names import by_key  # noqa: E402
from q2_plugins.metric.results import ResponseResult, ResponseStatus  # noqa: E402
from q2_plugins.scorer import Q2Scorer  # noqa: E402
from tests.fakes import ScriptedScorer  # noqa: E402

parlai_ext.enable()

from parlai.scripts.eval_model import EvalModel, setup_args  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::UserWarning")


def by_word_count(i: int, response: str) -> ResponseResult:
    """The scripted scorer's rule: a response's result is fixed by its number of words."""
    n = len(response.split())
    if n % 5 == 0:
        return ResponseResult(i, ResponseStatus.FALLBACK, score=0.5, score_no_nli=0.5, used_fallback=True)
    return ResponseResult(i, ResponseStatus.SCORED, score=(n % 3) / 2, score_no_nli=(n % 2) / 2, num_questions=1)


@pytest.fixture(scope="module")
def datapath(tmp_path_factory):
    path = tmp_path_factory.mktemp("parlai_data")
    write_wow_data(path)
    return str(path)


@pytest.fixture
def scorer():
    s = ScriptedScorer(rule=by_word_count)
    parlai_ext.register_scorer(s)
    yield s
    parlai_ext.unregister_scorer(s)


def evaluate(datapath, **kwargs):
    kwargs.setdefault("task", "wizard_of_wikipedia:Generator")
    report = EvalModel.main(datapath=datapath, model="repeat_label", log_every_n_secs=1e9, **kwargs)
    return {k: v.value() if hasattr(v, "value") else v for k, v in report.items()}


def offline_stats(scorer, responses):
    return Q2Stats.of(scorer.result_for(i, r) for i, r in enumerate(responses))


@pytest.mark.parametrize("batchsize", [1, 3])
def test_report_matches_offline_scoring_of_the_same_pairs(datapath, scorer, batchsize, tmp_path):
    report = evaluate(datapath, metrics="default,q2", batchsize=batchsize, report_filename=str(tmp_path / "r.json"))
    pairs = [(r, k) for call in scorer.calls for r, k in zip(call["responses"], call["knowledge"])]
    assert len(pairs) == 9  # 3 episodes x 4 turns, the 4th uses no knowledge
    assert report["q2_no_knowledge"] == 3
    assert NO_KNOWLEDGE not in [k for _, k in pairs]
    expected = offline_stats(scorer, [r for r, _ in pairs])
    assert report["q2"] == pytest.approx(expected.score)
    assert report["q2_no_nli"] == pytest.approx(expected.score_no_nli)
    assert report["q2_coverage"] == pytest.approx(expected.coverage)
    assert report["q2_fallback_rate"] == pytest.approx(expected.fallback_rate)
    assert report["q2_errors"] == 0
    for key, value in expected.intervals().items():  # the intervals of q2 score's summary, from the added sums
        name = by_key(key).framework_key
        assert (math.isnan(report[name]) if value is None else report[name] == pytest.approx(value)), name
    assert report["q2_ci_low"] <= report["q2"] <= report["q2_ci_high"] and report["q2_coverage_ci_low"] < 1
    assert report["exs"] == 12 and "f1" in report  # ParlAI's own metrics are still there
    saved = json.loads((tmp_path / "r.json").read_text())["report"]
    for key in ("q2", "q2_coverage", "q2_fallback_rate"):
        assert saved[key] == pytest.approx(report[key])
    assert saved["q2_signature"] == scorer.signature and "q2_signature" not in report  # the file, not the table


def test_per_example_file_from_the_metrics_own_calls(datapath, scorer, tmp_path):
    rows_file = tmp_path / "rows.jsonl"
    report = evaluate(datapath, metrics="q2", batchsize=3, q2_per_example_file=str(rows_file))
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    pairs = [(r, k) for call in scorer.calls for r, k in zip(call["responses"], call["knowledge"])]
    assert len(scorer.calls) == 1 and len(rows) == len(pairs) == 9  # no extra scoring: the same one call
    assert [(row["response"], row["knowledge"]) for row in rows] == pairs
    for i, row in enumerate(rows):  # the one row writer's layout: its position in the file, the ids, the texts, ...
        expected = {k: v for k, v in scorer.result_for(i, row["response"]).to_dict().items() if k != "index"}
        assert {k: row[k] for k in expected} == expected and row["row"] == i
        assert list(row)[:6] == ["row", "task", "episode_idx", "entry_idx", "response", "knowledge"]
        assert list(row)[-1] == "signature" and "index" not in row
        assert row["signature"] == scorer.signature and row["task"] == "wizard_of_wikipedia:Generator"
    ids = sorted((row["episode_idx"], row["entry_idx"]) for row in rows)
    assert ids == [(e, t) for e in range(3) for t in range(3)]  # the 4th turn of each episode has no knowledge
    assert report["q2"] == pytest.approx(offline_stats(scorer, [r for r, _ in pairs]).score)
    from q2_plugins.jobs.report import load_results

    loaded = load_results([rows_file])  # what `q2 report FILE.jsonl` reads
    assert [r["score"] for r in loaded.rows] == [r["score"] for r in rows] and loaded.signatures == ["scripted"]
    assert all(r["status"] != "error" for r in loaded.rows)
    evaluate(datapath, metrics="q2", batchsize=1, q2_per_example_file=str(rows_file))  # a new run: a new file
    assert len(rows_file.read_text().splitlines()) == 9


def test_same_numbers_with_any_batch_size(datapath, scorer):
    one = evaluate(datapath, metrics="q2", batchsize=1)
    four = evaluate(datapath, metrics="q2", batchsize=4)
    for key in ("q2", "q2_no_nli", "q2_coverage", "q2_fallback_rate", "q2_no_knowledge", "q2_ci_low", "q2_stderr"):
        assert one[key] == pytest.approx(four[key]), key


def test_scores_in_batches_not_per_example(datapath, scorer):
    evaluate(datapath, metrics="q2", batchsize=2, q2_score_every=4)
    assert [len(c["responses"]) for c in scorer.calls] == [4, 4, 1]  # full buffers, then the rest at the report


def test_knowledge_is_the_checked_sentence(datapath, scorer):
    import parlai.tasks.wizard_of_wikipedia.agents as wow

    evaluate(datapath, metrics="q2")
    knowledge = scorer.calls[0]["knowledge"]
    with open(os.path.join(datapath, "wizard_of_wikipedia", "valid_random_split.json")) as f:
        first = json.load(f)[0]["dialog"]
    assert knowledge[0] == next(iter(first[1]["checked_sentence"].values()))
    assert wow.TOKEN_NOCHOSEN == NO_KNOWLEDGE


@pytest.mark.parametrize("metrics, scored", [("default", False), ("all", True), ("f1,q2", True), ("q2", True)])
def test_metric_names(datapath, scorer, metrics, scored):
    report = evaluate(datapath, metrics=metrics)
    assert ("q2" in report) is scored
    assert bool(scorer.calls) is scored


def test_missing_field_is_one_clear_error(datapath, scorer):
    with pytest.raises(Q2KnowledgeFieldError) as info:
        evaluate(datapath, metrics="q2", q2_knowledge_field="gold_knowledge")
    message = str(info.value)
    assert "'gold_knowledge'" in message and "--q2-knowledge-field" in message and "checked_sentence" in message
    assert isinstance(info.value, ValueError) and not scorer.calls


def test_missing_field_ends_the_command_with_one_line(datapath):
    import subprocess
    import sys
    from pathlib import Path

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3]), "PYTHONWARNINGS": "ignore"}
    code = "import parlai_ext, sys; parlai_ext.enable(); from parlai.scripts.eval_model import EvalModel; " \
           "sys.argv[1:] = sys.argv[2:]; EvalModel.main()"
    out = subprocess.run([sys.executable, "-c", code, "eval_model", "-m", "repeat_label", "-t",
                          "wizard_of_wikipedia:Generator", "--datapath", datapath, "--metrics", "q2",
                          "--q2-knowledge-field", "gold_knowledge"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    last = out.stderr.strip().splitlines()[-1]
    assert "'gold_knowledge'" in last and "--q2-knowledge-field" in last


def test_other_teachers_name_their_field(tmp_path, scorer):
    data = tmp_path / "dialogs.txt"
    data.write_text(
        "text:Where is the Louvre?\tlabels:It is in Paris.\tfacts:The Louvre is a museum in Paris.\n"
        "text:Who painted it?\tlabels:Leonardo da Vinci.\tfacts:Leonardo da Vinci painted the Mona Lisa."
        "\tepisode_done:True\n"
    )
    report = evaluate(str(tmp_path), task="fromfile:parlaiformat", fromfile_datapath=str(data), metrics="q2",
                      q2_knowledge_field="facts", q2_history=True)
    assert report["q2"] == pytest.approx(offline_stats(scorer, ["It is in Paris.", "Leonardo da Vinci."]).score)
    call = scorer.calls[0]
    assert call["knowledge"] == ["The Louvre is a museum in Paris.", "Leonardo da Vinci painted the Mona Lisa."]
    assert call["history"] == [["Where is the Louvre?"], ["Where is the Louvre?", "It is in Paris.", "Who painted it?"]]


def test_options_in_help_and_mapped_onto_the_config():
    parser = setup_args()
    text = parser.format_help()
    for flag in ("--q2-qg-model", "--q2-qa-model", "--q2-nli-model", "--q2-device", "--q2-batch-size",
                 "--q2-no-nli", "--q2-knowledge-field", "--q2-score-every"):
        assert flag in text, flag
    opt = parser.parse_args(["--q2-qg-model", "/m/qg", "--q2-no-nli", "--q2-batch-size", "4",
                             "--q2-question-mode", "all", "--q2-fallback", "false"])
    assert config_from_opt(opt) == Q2Config(qg_model="/m/qg", use_nli=False, batch_size=4, question_mode="all",
                                            fallback=False)
    assert config_from_opt(parser.parse_args([])) == Q2Config()


def test_no_scored_response_reports_nan(datapath, scorer):
    def fail(i, response):
        return ResponseResult(i, ResponseStatus.ERROR, error="scripted")

    scorer.result_for = fail
    report = evaluate(datapath, metrics="q2")
    assert math.isnan(report["q2"]) and report["q2_errors"] == 9


@pytest.mark.parametrize("options, message", [({"q2_score_every": 0}, "--q2-score-every"),
                                              ({"q2_batch_size": 0}, "^--q2-batch-size: must be a positive integer")])
def test_bad_options_fail_at_the_first_example(datapath, options, message):
    with pytest.raises(ValueError, match=message):
        evaluate(datapath, metrics="q2", **options)


def test_a_backend_named_in_the_model_options_scores_the_eval(datapath, tmp_path):
    """``--q2-qg-model scripted:x ...``: no scorer registered, so the metric builds its scorer from the options and
    the registry loads the scripted backend (tests/scripted_backend.py); the report is the offline scoring of the same
    pairs with those components, and the report file is signed with the backend's identity."""
    from q2_plugins import Q2Scorer
    from tests import scripted_backend  # registers "scripted", as Q2_BACKEND_MODULES or an entry point would

    rows_file = tmp_path / "rows.jsonl"
    models = {f"q2_{role}_model": "scripted:x" for role in ("qg", "qa", "nli")}
    report = evaluate(datapath, metrics="q2", batchsize=3, q2_per_example_file=str(rows_file),
                      report_filename=str(tmp_path / "r.json"), **models)
    rows = [json.loads(line) for line in rows_file.read_text().splitlines()]
    assert len(rows) == 9
    parts = scripted_backend.parts("x")
    offline = Q2Scorer(config_from_opt(models), question_generator=parts["qg"], question_answerer=parts["qa"],
                       nli=parts["nli"]).score(responses=[r["response"] for r in rows],
                                               knowledge=[r["knowledge"] for r in rows])
    assert [row["score"] for row in rows] == [r.score for r in offline.responses]
    assert report["q2"] == pytest.approx(offline.stats.score) and report["q2_errors"] == 0
    saved = json.loads((tmp_path / "r.json").read_text())["report"]["q2_signature"]
    assert saved == offline.signature and dict(offline.signature.parts)["qa"] == "scripted:x"


def test_train_model_keeps_the_best_model_by_each_q2_metrics_declared_direction(datapath, tmp_path, capsys):
    """ParlAI's train_model maximises a validation metric it does not ship; the Q² figures' directions come from
    q2_plugins.metric.names: q2_fallback_rate is minimised, q2 maximised, a mode the user gives is kept (with a
    note when it is the opposite)."""
    from parlai.scripts.train_model import TrainLoop
    from parlai.scripts.train_model import setup_args as train_args

    def opt(metric, **more):
        return train_args().parse_kwargs(task="wizard_of_wikipedia:Generator", model="repeat_label",
                                         datapath=datapath, validation_metric=metric, **more)

    assert TrainLoop(opt("q2_fallback_rate", model_file=str(tmp_path / "m"))).valid_optim == -1  # minimised
    assert [opt(m).get("validation_metric_mode") for m in ("q2", "q2_coverage", "q2_no_nli")] == ["max"] * 3
    assert opt("q2_stderr").get("validation_metric_mode") is None  # (no direction: ParlAI's default)
    capsys.readouterr()
    assert opt("q2_fallback_rate", validation_metric_mode="max")["validation_metric_mode"] == "max"
    err = capsys.readouterr().err.splitlines()
    assert [line for line in err if line.startswith("q2: ")] == [
        "q2: --validation-metric-mode max with --validation-metric q2_fallback_rate, whose lower values are better "
        "(--validation-metric-mode min); kept as given"]


class _TerminalScorer(ScriptedScorer, Q2Scorer):
    """A scripted scorer that is a Q2Scorer to the metric (as the hook's own scorer is; no model loads) and records
    the progress each call asks for."""

    def __init__(self) -> None:
        super().__init__(rule=by_word_count)
        self.progress: list = []

    def score(self, *, responses, knowledge, history=None, explain=False, progress=False):
        self.progress.append(progress)
        return super().score(responses=responses, knowledge=knowledge, history=history, explain=explain)


def test_a_long_scoring_call_shows_bars_on_a_terminal_only(datapath, monkeypatch):
    import io

    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr("q2_plugins.metric.progress.MANY_ROWS", 4)  # the fixture's 9 responses make a long call
    scorer = _TerminalScorer()
    parlai_ext.register_scorer(scorer)
    try:
        monkeypatch.setattr("sys.stderr", io.StringIO())  # a log: quiet
        evaluate(datapath, metrics="q2", batchsize=3)
        monkeypatch.setattr("sys.stderr", Terminal())  # a terminal: bars
        evaluate(datapath, metrics="q2", batchsize=3)
    finally:
        parlai_ext.unregister_scorer(scorer)
    assert scorer.progress == [False, True]
