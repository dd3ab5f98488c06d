"""The LightEval and Inspect suites (``lighteval_env/``) pass in their own environment, .venv-lighteval: LightEval's
pins conflict with .venv's (setup.cfg, extra ``lighteval``), so this suite collects them only there and this test
runs them there. A missing environment skips locally and fails in CI, where scripts/setup.sh makes it."""

from __future__ import annotations

import os
from pathlib import Path

from tests.conftest import REPO, SEPARATE_SUITES
from tests.separate_env import run_suite

VENV = Path(os.environ.get("Q2_LIGHTEVAL_VENV", REPO / ".venv-lighteval"))


def test_the_suite_is_collected_only_in_its_environment():
    assert SEPARATE_SUITES["lighteval"] == "integrations/integrations/lighteval_env"
    folder = REPO / "tests" / SEPARATE_SUITES["lighteval"]
    assert sorted(p.name for p in folder.glob("test_*.py")) == ["test_front_ends_agree.py", "test_inspect.py",
                                                                "test_lighteval.py"]


def test_the_lighteval_and_inspect_suites_pass_in_their_environment():
    run_suite("lighteval", VENV, "scripts/setup_lighteval.sh", "LightEval and Inspect cannot share .venv")
