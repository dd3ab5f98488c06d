"""The DeepEval, Ragas, DSPy and lm-eval 0.5 suites (``apps_env/``) pass in their own environment, .venv-apps:
DeepEval caps click, Ragas holds openai and huggingface_hub back (setup.cfg, extra ``deepeval``) and .venv has
lm-eval 0.4, so this suite collects them only there and this test runs them there. A missing environment skips
locally and fails in CI."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import REPO, SEPARATE_SUITES
from tests.separate_env import run_suite

VENV = Path(os.environ.get("Q2_APPS_VENV", REPO / ".venv-apps"))


def test_the_suite_is_collected_only_in_its_environment():
    assert SEPARATE_SUITES["apps"] == "integrations/integrations/apps_env"
    folder = REPO / "tests" / SEPARATE_SUITES["apps"]
    assert sorted(p.name for p in folder.glob("test_*.py")) == [
        "test_apps_agree.py", "test_deepeval.py", "test_dspy.py", "test_lm_eval_scorer.py", "test_ragas.py"]


def test_the_deepeval_ragas_and_dspy_suites_pass_in_their_environment():
    run_suite("apps", VENV, "scripts/setup_apps.sh", "DeepEval and Ragas cannot share .venv")
