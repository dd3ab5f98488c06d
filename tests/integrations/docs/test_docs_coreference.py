"""docs/coreference.md: its examples run as printed in the examples layout (``q2 make-test-models --examples``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO, _doc_blocks

DOC = REPO / "docs" / "coreference.md"


def _run(lang: str, code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("Q2_")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", PYTHONPATH=str(REPO),
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    command = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def test_cli_example_runs_as_printed(model_workdir):
    ((lang, code),) = _doc_blocks(DOC, "coref-cli")
    proc = _run(lang, code, model_workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (row,) = [json.loads(x) for x in (model_workdir / "dialogue_scores.jsonl").read_text().splitlines()]
    assert row["status"] in ("scored", "fallback")
    assert row["coref"]["original_response"] == "he became famous on youtube"


def test_python_example_prints_what_the_doc_says(model_workdir):
    ((lang, code),) = _doc_blocks(DOC, "coref-python")
    proc = _run(lang, code, model_workdir)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.splitlines() == ["Bob Ross became famous on youtube"] * 2 + ["host-rule-v1"]
    assert "prints `Bob Ross became famous on youtube` twice, then `host-rule-v1`." in DOC.read_text()
