from __future__ import annotations

import importlib
import os
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent

#: Suites that run in an environment of their own: the folder, and the value of ``Q2_SEPARATE_ENV`` under which it is
#: collected. LightEval and Inspect cannot share .venv (setup.cfg, extra ``lighteval``): scripts/setup_lighteval.sh
#: makes .venv-lighteval, and tests/integrations/integrations/test_lighteval_env.py runs the folder there; the same for
#: DeepEval, Ragas and DSPy (scripts/setup_apps.sh, .venv-apps, test_apps_env.py).
SEPARATE_ENV_VARIABLE = "Q2_SEPARATE_ENV"
SEPARATE_SUITES = {"lighteval": "integrations/integrations/lighteval_env", "apps": "integrations/integrations/apps_env"}
collect_ignore_glob = [f"{folder}/*" for env, folder in SEPARATE_SUITES.items()
                       if os.environ.get(SEPARATE_ENV_VARIABLE, "").strip() != env]

#: cost markers by test module: the folders say what a test checks (tier / room), these say what it costs to run
#: (`-m "not ray and not browser and not parlai"` leaves out the suites that start a Ray cluster, a browser or ParlAI)
COST_MARKERS = {"ray": ("test_ray_",), "browser": ("test_report_browser",), "parlai": ("test_parlai_",),
                "lighteval": ("test_lighteval_env",), "apps": ("test_apps_env",)}


def pytest_collection_modifyitems(config: Any, items: list[Any]) -> None:
    for item in items:
        name = Path(str(item.fspath)).name
        for marker, prefixes in COST_MARKERS.items():
            if name.startswith(prefixes):
                item.add_marker(getattr(pytest.mark, marker))


def shared_data_dir() -> Path:
    """The reference data bundled with the package (``q2_plugins/data``, whose README lists it)."""
    from q2_plugins.datasets import DATA_DIR

    return DATA_DIR


def in_ci() -> bool:
    """True in CI (``CI=true``), where ``scripts/setup.sh`` installs every extra the tests use."""
    return os.environ.get("CI", "").strip().lower() in ("1", "true", "yes")


def optional_import(name: str, extra: str) -> Any:
    """Import ``name``, an optional dependency of a test suite (installed by the setup.cfg extra ``extra``).

    Missing outside CI: the calling test, or module (at module level), is skipped. Missing in CI: a failure naming
    the extra, so a set-up that installs less cannot pass by skipping whole adapter suites. An installed module that
    fails to import is an error everywhere."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        if e.name is None or not (name == e.name or name.startswith(e.name + ".")):
            raise  # the module is there but something it imports is not: a broken set-up, never a skip
        message = f"{name} is not installed: the '{extra}' extra (scripts/setup.sh installs every extra)"
        if in_ci():
            pytest.fail(f"{message}; CI installs every extra, so its tests must run", pytrace=False)
        pytest.skip(message, allow_module_level=True)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The bundled reference data (``q2_plugins/data``): ``q2_wow``, ``q2_original_run``, ``begin_dev``, ..."""
    path = shared_data_dir()
    if not (path / "q2_original_run").is_dir():
        pytest.fail(f"Reference data not found at {path}: the checkout lacks q2_plugins/data")
    return path


# -- tiny models shared by the adapter tests (built once per session) -------------------------------------------------
@pytest.fixture(scope="session")
def examples_dir(tmp_path_factory) -> Path:
    """The layout of ``q2 make-test-models --examples DIR``: what the documented examples run in."""
    from q2_plugins.backends.hf.tiny import build_examples

    root = tmp_path_factory.mktemp("examples")
    build_examples(root)
    return root


@pytest.fixture(scope="session")
def tiny_models(examples_dir) -> dict[str, Path]:
    """Tiny random-weight Q² models (qg / qa / nli), the QG copy whose questions end early ("qg_short") and a tiny
    GPT-2 causal LM ("lm") on the NLI model's byte-level BPE tokenizer, all loadable with ``from_pretrained``."""
    models = examples_dir / "q2-models"
    return {"qg": examples_dir / "my-seq2seq-model", "qg_short": models / "qg", "qa": models / "qa",
            "nli": models / "nli", "lm": examples_dir / "my-dialogue-model"}


@pytest.fixture(scope="session")
def tiny_config(tiny_models):
    """A :class:`Q2Config` on the tiny models, with questions cut at 12 tokens (random weights rarely stop)."""
    from q2_plugins import Q2Config

    return Q2Config(qg_model=str(tiny_models["qg_short"]), qa_model=str(tiny_models["qa"]),
                    nli_model=str(tiny_models["nli"]), qg_max_length=12)


@pytest.fixture
def model_workdir(examples_dir, tmp_path, monkeypatch) -> Path:
    """A working directory laid out as the docs assume (``q2 make-test-models --examples``): ``q2-models/{qg,qa,nli}``
    (the QG model stops questions early), ``my-dialogue-model`` (causal LM), ``my-seq2seq-model`` (T5) and
    ``metrics/response_length``. The test runs inside it."""
    for entry in examples_dir.iterdir():
        (tmp_path / entry.name).symlink_to(entry, target_is_directory=True)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture(scope="session")
def doc_blocks():
    """``doc_blocks(tag)``: the runnable examples tagged ``<!-- test: TAG -->`` in README.md and docs/*.md, in that
    order (README first, then the docs files by name)."""
    return lambda tag: [block for path in doc_files() for block in _doc_blocks(path, tag)]


def doc_files() -> list[Path]:
    """README.md, then every page under docs/."""
    return [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _doc_blocks(path: Path, tag: str) -> list[tuple[str, str]]:
    """The fenced code blocks of a Markdown file preceded by ``<!-- test: TAG -->``: [(language, code)]."""
    import re

    text = path.read_text(encoding="utf-8")
    pattern = rf"<!-- test: {re.escape(tag)} -->\s*\n```(\w+)\n(.*?)\n```"
    return [(m.group(1), m.group(2) + "\n") for m in re.finditer(pattern, text, flags=re.S)]


# -- docs pages whose commands the tests run (docs/metaeval.md, docs/taxonomy_stress.md) -----------------------------
def doc_block(doc: Path, kind: str, tag: str) -> str:
    """The fenced block after ``<!-- kind: tag -->`` in ``doc``."""
    import re

    found = re.search(rf"<!-- {kind}: {re.escape(tag)} -->\s*\n```\w*\n(.*?)\n```", doc.read_text(), flags=re.S)
    assert found, f"no <!-- {kind}: {tag} --> block in {doc}"
    return found.group(1)


def run_doc_commands(doc: Path, tag: str, capsys) -> None:
    """Run the ``q2`` commands of the ``test: tag`` block in-process; each must exit 0 and together print every line
    of the ``output: tag`` block."""
    import shlex

    from q2_plugins.cli import main

    for line in doc_block(doc, "test", tag).splitlines():
        argv = shlex.split(line)
        assert argv[0] == "q2"
        assert main(argv[1:]) == 0, line
    printed = capsys.readouterr().out
    for expected in doc_block(doc, "output", tag).splitlines():
        assert expected in printed, expected


@pytest.fixture()
def repo_dir(tmp_path, monkeypatch) -> Path:
    """A working directory laid out as the docs assume: the repository root (its ``tests``, the bundled data at
    ``q2_plugins/data`` and an ``out`` folder)."""
    (tmp_path / "repo" / "q2_plugins").mkdir(parents=True)
    (tmp_path / "repo" / "q2_plugins" / "data").symlink_to(shared_data_dir(), target_is_directory=True)
    (tmp_path / "repo" / "out").mkdir()
    (tmp_path / "repo" / "tests").symlink_to(REPO / "tests", target_is_directory=True)
    monkeypatch.chdir(tmp_path / "repo")
    return tmp_path / "repo"
