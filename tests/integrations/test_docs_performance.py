"""docs/performance.md's measured figures are what benchmarks/results/ renders (benchmarks/render_docs.py --check).

No models, no measuring: the renderer reads the committed results files and compares the page with them.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def render_docs():
    spec = importlib.util.spec_from_file_location("render_docs", REPO / "benchmarks" / "render_docs.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_performance_doc_matches_its_results_files(render_docs, capsys):
    code = render_docs.main(["--check"])
    assert code == 0, "docs/performance.md is stale: run python benchmarks/render_docs.py\n" + capsys.readouterr().out


def _copy(render_docs, tmp_path: Path) -> tuple[Path, Path]:
    results = tmp_path / "results"
    shutil.copytree(render_docs.RESULTS, results)
    doc = tmp_path / "performance.md"
    doc.write_text(render_docs.DOC.read_text())
    return doc, results


def test_check_fails_on_a_changed_result_and_rewrites_the_figure(render_docs, tmp_path, capsys):
    doc, results = _copy(render_docs, tmp_path)
    run = results / render_docs.MAIN_RUN
    report = json.loads(run.read_text())
    report["modes"]["batched"]["wall_s"] = 44.44  # the bold batched-default row, and every ratio built on it
    run.write_text(json.dumps(report))
    before = doc.read_text()
    assert render_docs.main(["--check"], doc=doc, results=results) == 1
    assert "+| **batched default** | **44.4** |" in capsys.readouterr().out
    assert doc.read_text() == before  # --check writes nothing
    assert render_docs.main([], doc=doc, results=results) == 0
    assert "| **batched default** | **44.4** |" in doc.read_text()
    assert render_docs.main(["--check"], doc=doc, results=results) == 0


def test_check_fails_on_a_hand_edit_and_on_an_unrendered_results_file(render_docs, tmp_path, capsys):
    doc, results = _copy(render_docs, tmp_path)
    text = doc.read_text()
    doc.write_text(text.replace("| 9,500x |", "| 9,000x |", 1))
    assert text != doc.read_text()
    assert render_docs.main(["--check"], doc=doc, results=results) == 1
    doc.write_text(text)
    assert render_docs.main(["--check"], doc=doc, results=results) == 0
    shutil.copy(results / render_docs.MAIN_RUN, results / "bench_n16_0000000.json")
    assert render_docs.main(["--check"], doc=doc, results=results) == 1
    assert "bench_n16_0000000.json is not rendered" in capsys.readouterr().err
