"""The Hugging Face ``evaluate`` module: loading by path and by the bare name offline (in-process and from a built
wheel in a fresh interpreter), inputs and outputs, config, the scorer cache, combine, and the runnable examples of the
module docstring, the module card and README.md."""

from __future__ import annotations

import doctest
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import types
import zipfile
from pathlib import Path

import pytest

from q2_plugins import Q2Config, Q2Scorer
from q2_plugins.integrations import adapters
from q2_plugins.integrations.evaluate import metric_path, patch_loading
from tests.conftest import optional_import

REPO = Path(__file__).resolve().parents[3]
MODULE_DIR = REPO / "hf_evaluate_metric" / "q2"
TINY = dict(qg_model="q2-models/qg", qa_model="q2-models/qa", nli_model="q2-models/nli")
RESPONSES = ["it aired in the us , canada and latin america", "i love gardening as well ."]
KNOWLEDGE = ["The Joy of Painting aired on PBS in the United States, Canada, Latin America and Europe.",
             "Gardening is considered by many people to be a relaxing activity."]

@pytest.fixture(scope="module")
def evaluate_module():
    return optional_import("evaluate", "evaluate")


@pytest.fixture
def no_network(monkeypatch):
    """Every socket connection and DNS lookup fails and is recorded."""
    attempts: list = []

    def refuse(*args, **kwargs):
        attempts.append(args)
        raise OSError("network disabled by the test")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "getaddrinfo", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    return attempts


@pytest.fixture
def evaluate_warnings(evaluate_module):
    """Records what the ``evaluate`` loggers say at WARNING and above."""
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    handler = Keep(logging.WARNING)
    logger = logging.getLogger("evaluate")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


@pytest.fixture
def bare_name(evaluate_module, monkeypatch, no_network, evaluate_warnings):
    """The start-up hook as the wheel's .pth runs it (HF_EVALUATE_OFFLINE unset); undone afterwards."""
    import evaluate.loading

    monkeypatch.delenv("HF_EVALUATE_OFFLINE", raising=False)
    monkeypatch.setattr(evaluate.loading, "evaluation_module_factory", evaluate.loading.evaluation_module_factory)
    monkeypatch.syspath_prepend(str(REPO))  # where _q2_plugins_hook.py sits in a checkout
    exec((REPO / "q2_plugins_hook.pth").read_text(), {})  # what site does with an `import` line of a .pth
    yield
    assert no_network == [], "evaluate.load touched the network"
    assert [r.getMessage() for r in evaluate_warnings] == []


def test_load_by_path_compute_and_explain(evaluate_module, model_workdir):
    q2 = evaluate_module.load(str(MODULE_DIR), **TINY)
    assert q2.name == "q2"
    out = q2.compute(predictions=RESPONSES, knowledge=KNOWLEDGE, explain=True)
    assert out["hashcode"] == Q2Scorer(Q2Config(**TINY)).signature
    assert out["n"] == 2 and len(out["scores"]) == 2 and len(out["explanations"]) == 2
    scored = [s for s in out["scores"] if s is not None]
    assert out["q2"] == pytest.approx(sum(scored) / len(scored))
    assert {"coverage", "fallback_rate", "q2_no_nli", "n_errors"} <= set(out)
    if len(scored) == 2:  # an interval needs two scored responses
        assert out["q2_ci_low"] <= out["q2"] <= out["q2_ci_high"] and out["q2_stderr"] >= 0
    else:
        assert out["q2_ci_low"] is None and out["q2_stderr"] is None
    assert out["coverage_ci_low"] <= out["coverage"] <= out["coverage_ci_high"]
    assert out["explanations"][0]["status"] in ("scored", "fallback")
    assert "questions" in out["explanations"][0]
    plain = q2.compute(predictions=RESPONSES, knowledge=KNOWLEDGE)
    assert "explanations" not in plain and plain["scores"] == out["scores"]


def test_the_module_card_says_the_range_and_direction_the_core_declares(evaluate_module):
    from q2_plugins.metric.names import METRIC_INFO

    info = evaluate_module.load(str(MODULE_DIR))._info()
    assert f"Q2 is {METRIC_INFO.direction()}." in info.description
    assert METRIC_INFO.direction() == "in [0, 1], higher is better"


def test_bad_rows_and_inputs(evaluate_module, model_workdir):
    q2 = evaluate_module.load(str(MODULE_DIR), **TINY)
    out = q2.compute(predictions=["", "it aired on pbs ."], knowledge=["The show aired on PBS.", ""])
    assert out["n_errors"] == 2 and out["scores"] == [None, None] and out["q2"] is None
    with pytest.raises(ValueError, match="missing"):
        q2.compute(predictions=["x"])
    with pytest.raises(ValueError, match="history"):
        q2.compute(predictions=["x"], knowledge=["y"], history=[["a"], ["b"]])


def test_scorer_built_once_and_rebuilt_when_signature_changes(evaluate_module, model_workdir, monkeypatch):
    built = []

    class Counting(Q2Scorer):
        def __init__(self, config, **parts):
            built.append(config)
            super().__init__(config, **parts)

    monkeypatch.setattr(adapters, "Q2Scorer", Counting)
    q2 = evaluate_module.load(str(MODULE_DIR), **TINY)
    first = q2.compute(predictions=RESPONSES[:1], knowledge=KNOWLEDGE[:1])
    again = q2.compute(predictions=RESPONSES[:1], knowledge=KNOWLEDGE[:1])
    assert len(built) == 1 and first == again
    other = q2.compute(predictions=RESPONSES[:1], knowledge=KNOWLEDGE[:1], use_nli=False)
    assert len(built) == 2 and "|cmp:f1|" in other["hashcode"] and other["hashcode"] != first["hashcode"]


def test_config_name_config_object_and_unknown_options(evaluate_module, model_workdir):
    no_nli = evaluate_module.load(str(MODULE_DIR), config_name="no_nli", **TINY)
    assert no_nli.q2_config.use_nli is False
    assert "|cmp:f1|" in no_nli.compute(predictions=RESPONSES[:1], knowledge=KNOWLEDGE[:1])["hashcode"]
    obj = evaluate_module.load(str(MODULE_DIR), config=Q2Config(**TINY, question_mode="all"), remove_personal=False)
    assert obj.q2_config == Q2Config(**TINY, question_mode="all", remove_personal=False)
    with pytest.raises(ValueError, match="config_name"):
        evaluate_module.load(str(MODULE_DIR), config_name="nope")
    with pytest.raises(TypeError, match="qg_modle"):
        evaluate_module.load(str(MODULE_DIR), qg_modle="x")
    with pytest.raises(ValueError, match="qg_num_beams"):
        evaluate_module.load(str(MODULE_DIR), qg_num_beams=0)
    q2 = evaluate_module.load(str(MODULE_DIR), **TINY)
    with pytest.raises(TypeError, match="Unknown Q2Config option"):
        q2.compute(predictions=["x"], knowledge=["y"], not_an_option=1)


def test_bare_name_offline_no_network_no_warning(bare_name, evaluate_module, model_workdir):
    q2 = evaluate_module.load("q2", **TINY)
    assert Path(sys.modules[type(q2).__module__].__file__).read_text() == (MODULE_DIR / "q2.py").read_text()
    assert q2.compute(predictions=RESPONSES[:1], knowledge=KNOWLEDGE[:1])["n"] == 1


def test_docs_examples_and_combine(bare_name, evaluate_module, model_workdir, doc_blocks, capsys):
    blocks = doc_blocks("evaluate")
    assert len(blocks) == 2 and all(lang == "python" for lang, _ in blocks)
    for _, code in blocks:
        exec(compile(code, "README.md", "exec"), {"__name__": "__docs__"})
    lines = capsys.readouterr().out.splitlines()
    assert lines[1].startswith("q2:") and lines[3] == "3" and "|cmp:f1|" in lines[4]
    combined = eval(lines[-1])  # the printed dict of the combine example
    assert combined["mean_words"] == 5.0 and combined["n"] == 1 and "q2" in combined


def test_module_docstring_example(bare_name, evaluate_module, model_workdir):
    import importlib.util

    spec = importlib.util.spec_from_file_location("q2_module_under_test", MODULE_DIR / "q2.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    test = doctest.DocTestParser().get_doctest(module._KWARGS_DESCRIPTION, {}, "q2._KWARGS_DESCRIPTION", None, 0)
    assert len(test.examples) >= 4
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    runner.run(test)
    assert runner.failures == 0


def test_module_card(bare_name, evaluate_module, model_workdir):
    import yaml

    text = (MODULE_DIR / "README.md").read_text(encoding="utf-8")
    header = yaml.safe_load(text.split("---")[1])
    assert header["title"] == "Q²" and "evaluate" in header["tags"] and header["sdk"] == "gradio"
    for heading in ("### Inputs", "### Output Values", "## Limitations and Bias", "## Citation"):
        assert heading in text
    code = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert code, "the card has a runnable example"
    for block in code:
        test = doctest.DocTestParser().get_doctest(block, {}, "README.md", None, 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        runner.run(test)
        assert runner.failures == 0


def test_patch_leaves_other_names_and_a_local_q2_dir_to_evaluate(tmp_path, monkeypatch):
    calls = []
    loading = types.SimpleNamespace(evaluation_module_factory=lambda path, module_type=None, **kw: calls.append(
        (path, module_type, kw)))
    patch_loading(loading)
    patch_loading(loading)  # idempotent
    monkeypatch.chdir(tmp_path)
    loading.evaluation_module_factory("q2", download_mode=None)
    loading.evaluation_module_factory("accuracy")
    loading.evaluation_module_factory("q2", module_type="comparison")
    (tmp_path / "q2").mkdir()
    (tmp_path / "q2" / "q2.py").write_text("")
    loading.evaluation_module_factory("q2")
    assert calls == [(metric_path(), None, {"download_mode": None}), ("accuracy", None, {}),
                     ("q2", "comparison", {}), ("q2", None, {})]


@pytest.mark.parametrize("value", ["0", "false", "NO", "off"])
def test_hook_can_be_switched_off(monkeypatch, value):
    monkeypatch.syspath_prepend(str(REPO))
    import _q2_plugins_hook

    monkeypatch.setattr(_q2_plugins_hook.FINDER, "watched", set())
    monkeypatch.setattr(sys, "meta_path", [f for f in sys.meta_path if f is not _q2_plugins_hook.FINDER])
    monkeypatch.setenv("Q2_PLUGINS_EVALUATE_HOOK", value)
    monkeypatch.delitem(sys.modules, "evaluate.loading", raising=False)
    _q2_plugins_hook.install()
    assert "evaluate.loading" not in _q2_plugins_hook.FINDER.watched
    monkeypatch.setenv("Q2_PLUGINS_EVALUATE_HOOK", "1")
    _q2_plugins_hook.install()
    assert "evaluate.loading" in _q2_plugins_hook.FINDER.watched and sys.meta_path[0] is _q2_plugins_hook.FINDER


WHEEL_CHECK = r"""
import json, socket, site, sys
attempts = []
def refuse(*a, **k):
    attempts.append(repr(a)); raise OSError("network disabled by the test")
socket.socket.connect = refuse; socket.getaddrinfo = refuse; socket.create_connection = refuse
site.addsitedir(sys.argv[1])   # the unpacked wheel, as site-packages: runs q2_plugins_hook.pth
import logging, evaluate
said = []
class Keep(logging.Handler):
    def emit(self, record): said.append(record.getMessage())
logging.getLogger("evaluate").addHandler(Keep(logging.WARNING))
import q2_plugins
q2 = evaluate.load("q2", qg_model="q2-models/qg", qa_model="q2-models/qa", nli_model="q2-models/nli")
out = q2.compute(predictions=["it aired on pbs ."], knowledge=["The show aired on PBS."])
print(json.dumps({"n": out["n"], "hashcode": out["hashcode"], "attempts": attempts, "warnings": said,
                  "package": q2_plugins.__file__}))
"""


def test_wheel_ships_module_and_hook_and_bare_name_works_offline(model_workdir, tmp_path_factory):
    """Build the wheel from a copy of the sources, unpack it as a site directory and, in a fresh interpreter with
    HF_EVALUATE_OFFLINE=1 and no network, load the bare name."""
    src = tmp_path_factory.mktemp("src")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    for name in ("setup.cfg", "pyproject.toml", "README.md", "_q2_plugins_hook.py", "q2_plugins_hook.pth"):
        shutil.copy(REPO / name, src / name)
    for name in ("q2_plugins", "hf_evaluate_metric"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    dist = tmp_path_factory.mktemp("dist")
    subprocess.run([sys.executable, "-c", f"from setuptools import build_meta; build_meta.build_wheel({str(dist)!r})"],
                   cwd=src, check=True, capture_output=True)
    (wheel,) = dist.glob("*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for required in ("q2_plugins_hook.pth", "_q2_plugins_hook.py", "hf_evaluate_metric/q2/q2.py",
                     "hf_evaluate_metric/q2/README.md", "q2_plugins/integrations/evaluate.py",
                     "q2_plugins/integrations/lm_eval/tasks/q2_wow/q2_wow.yaml",
                     "q2_plugins/integrations/lm_eval/tasks/q2_wow/q2_wow_rerank.yaml",
                     "q2_plugins/integrations/lm_eval/tasks/q2_wow/q2_wow_sample.jsonl",
                     "q2_plugins/integrations/lm_eval/tasks/q2_wow/README.md"):
        assert required in names, required
    site_dir = tmp_path_factory.mktemp("site")
    zipfile.ZipFile(wheel).extractall(site_dir)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "Q2_PLUGINS"))}
    env.update(HF_EVALUATE_OFFLINE="1", HF_HOME=str(tmp_path_factory.mktemp("hf-home")))
    proc = subprocess.run([sys.executable, "-c", WHEEL_CHECK, str(site_dir)], cwd=model_workdir, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["n"] == 1 and report["hashcode"].startswith("q2:")
    assert report["attempts"] == [] and report["warnings"] == []
    assert report["package"].startswith(str(site_dir))


EDITABLE_CHECK = r"""
import json, socket
attempts = []
def refuse(*a, **k):
    attempts.append(repr(a)); raise OSError("network disabled by the test")
socket.socket.connect = refuse; socket.getaddrinfo = refuse; socket.create_connection = refuse
import evaluate
try:
    q2 = evaluate.load("q2", qg_model="q2-models/qg", qa_model="q2-models/qa", nli_model="q2-models/nli")
except Exception as e:
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
else:
    out = q2.compute(predictions=["it aired on pbs ."], knowledge=["The show aired on PBS."])
    print(json.dumps({"n": out["n"], "attempts": attempts}))
"""


@pytest.mark.slow
def test_editable_install_then_q2_hooks_install_loads_the_bare_name(evaluate_module, model_workdir, tmp_path_factory):
    """The README's set-up is an editable install (scripts/setup.sh), which gets no .pth from pip: before
    `q2 hooks install` the bare name fails as on the Hub; after it, it loads offline in that venv."""
    import sysconfig
    import venv

    src = tmp_path_factory.mktemp("editable-src")
    ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", "build", "dist")
    for name in ("setup.cfg", "pyproject.toml", "README.md", "_q2_plugins_hook.py", "q2_plugins_hook.pth"):
        shutil.copy(REPO / name, src / name)
    for name in ("q2_plugins", "parlai_ext", "hf_evaluate_metric"):
        shutil.copytree(REPO / name, src / name, ignore=ignore)
    env_dir = tmp_path_factory.mktemp("editable-venv")
    venv.create(env_dir, with_pip=False)
    python = env_dir / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "zz_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")  # this venv's packages
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps",
                    "--no-build-isolation", "--no-index", "-e", str(src)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHONPATH", "Q2_PLUGINS", "HF_EVALUATE"))}
    env.update(HF_HOME=str(tmp_path_factory.mktemp("hf-home")), HF_HUB_OFFLINE="1")

    def load() -> dict:
        proc = subprocess.run([str(python), "-c", EDITABLE_CHECK], cwd=model_workdir, env=env, capture_output=True,
                              text=True, timeout=600)
        assert proc.returncode == 0, proc.stderr[-3000:]
        return json.loads(proc.stdout.strip().splitlines()[-1])

    assert "q2" in load().get("error", "")
    proc = subprocess.run([str(env_dir / "bin" / "q2"), "hooks", "install"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and str(site) in proc.stdout, proc.stderr
    assert load() == {"n": 1, "attempts": []}


def test_explanations_are_report_rows(bare_name, evaluate_module, model_workdir):
    """docs/integrations.md: explain=True rows written as JSON lines are `q2 score --explain` rows."""
    from q2_plugins.io.rows import response_result, result_fields
    from q2_plugins.metric.results import EXPLANATION_FIELDS, RESULT_FIELDS
    from tests.conftest import _doc_blocks

    (block,) = _doc_blocks(REPO / "docs" / "integrations.md", "evaluate-report")
    exec(compile(block[1], "docs/integrations.md", "exec"), {"__name__": "__docs__"})
    rows = [json.loads(line) for line in (model_workdir / "q2_rows.jsonl").read_text().splitlines()]
    assert [(r["id"], r["response"]) for r in rows] == [(0, "it aired on pbs ."), (1, "i like it .")]
    assert rows[1]["knowledge"] == "Paris is the capital of France." and rows[0]["signature"].startswith("q2:")
    for i, row in enumerate(rows):  # the one row writer's layout: row, the texts, the result, the explanation
        assert list(row) == ["id", "row", "response", "knowledge", *RESULT_FIELDS, *EXPLANATION_FIELDS,
                             "random_weights", "signature"]
        assert row["row"] == i and result_fields(response_result(row), explain=True) == {
            k: row[k] for k in (*RESULT_FIELDS, *EXPLANATION_FIELDS)}
        assert row["random_weights"] == ["nli_model", "qa_model", "qg_model"]  # the examples' test models
    # the report of these rows (no sidecar) says what the report of a q2 score output says: the scores mean nothing
    from q2_plugins.cli import main
    from q2_plugins.jobs.report import load_results

    assert main(["report", str(model_workdir / "q2_rows.jsonl"), "--output", str(model_workdir / "r.html")]) == 0
    page = (model_workdir / "r.html").read_text(encoding="utf-8")
    assert "random-weight test models (nli_model, qa_model, qg_model" in page
    assert all("random_weights" not in r for r in load_results([model_workdir / "q2_rows.jsonl"]).rows)
    for row in rows:  # the same rows from real models (no such field): no note
        del row["random_weights"]
    (model_workdir / "real.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["report", str(model_workdir / "real.jsonl"), "--output", str(model_workdir / "real.html")]) == 0
    assert "random-weight test models" not in (model_workdir / "real.html").read_text(encoding="utf-8")
