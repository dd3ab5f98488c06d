"""README.md: it fits on a page, its links resolve, and every quick-start example runs as printed (tiny models, no
network), each in a fresh process in a directory laid out as the README says."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO, _doc_blocks, in_ci

README = REPO / "README.md"
QUICKSTART = _doc_blocks(README, "quickstart")


def test_readme_fits_on_a_page():
    size = len(README.read_bytes())
    assert size <= 12 * 1024, f"README.md is {size} bytes; move detail to docs/"


def test_readme_links_resolve():
    links = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", README.read_text(encoding="utf-8"))
    local = [link for link in links if "://" not in link]
    assert local, "the README links its docs"
    missing = [link for link in local if not (REPO / link).exists()]
    assert not missing, missing


def test_quickstart_covers_every_front_end():
    text = "\n".join(code for _, code in QUICKSTART)
    for needle in ("q2 score", "Q2Scorer", "parlai eval_model", 'evaluate.load("q2"', "lm_eval ", "rerank("):
        assert needle in text, needle


# what each example must print or write, in README order
EXPECTED = ["cli", "python", "parlai", "evaluate", "lm-eval", "rerank"]


@pytest.mark.parametrize("index", range(len(QUICKSTART)), ids=EXPECTED[: len(QUICKSTART)])
def test_quickstart_example_runs_as_printed(index, model_workdir):
    assert len(QUICKSTART) == len(EXPECTED)
    lang, code = QUICKSTART[index]
    kind = EXPECTED[index]
    if kind == "parlai" and not in_ci() and importlib.util.find_spec("parlai") is None:
        pytest.skip("ParlAI is not installed (bash scripts/install_parlai.sh); CI runs this")
    env = {k: v for k, v in os.environ.items() if not k.startswith("Q2_")}
    env.update(HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_EVALUATE_OFFLINE="1",
               PATH=f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}")
    command = ["bash", "-euo", "pipefail", "-c", code] if lang == "bash" else [sys.executable, "-c", code]
    proc = subprocess.run(command, cwd=model_workdir, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, (proc.stdout[-2000:], proc.stderr[-3000:])
    out = proc.stdout
    if kind == "cli":
        rows = [json.loads(line) for line in (model_workdir / "mine_scores.jsonl").read_text().splitlines()]
        rows = [row for row in rows if "status" in row]
        assert len(rows) == 1 and rows[0]["status"] in ("scored", "fallback")
    elif kind == "python":
        assert "q2:" in out.splitlines()[-1]
    elif kind == "parlai":
        assert re.search(r"\bq2\b", out + proc.stderr)
        # nothing of ours on standard error: no loading bars of the Q² models, no pkg_resources warning at start-up
        assert "Loading weights" not in proc.stderr and "pkg_resources" not in proc.stderr, proc.stderr[-3000:]
    elif kind == "evaluate":
        value = out.strip().splitlines()[-1]
        assert value == "None" or 0.0 <= float(value) <= 1.0
    elif kind == "lm-eval":
        assert re.search(r"\|\s*q2\s*\|", out)
    elif kind == "rerank":
        assert out.strip().splitlines()[-1].startswith("[")
