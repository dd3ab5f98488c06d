"""The LightEval and Inspect suites (``lighteval_env/``) pass in their own environment, .venv-lighteval: LightEval's
pins conflict with .venv's (setup.cfg, extra ``lighteval``), so this suite collects them only there and this test
runs them there. A missing environment skips locally and fails in CI, where scripts/setup.sh makes it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, SEPARATE_ENV_VARIABLE, SEPARATE_SUITES, in_ci

VENV = Path(os.environ.get("Q2_LIGHTEVAL_VENV", REPO / ".venv-lighteval"))


def test_the_suite_is_collected_only_in_its_environment():
    assert SEPARATE_SUITES == {"lighteval": "integrations/integrations/lighteval_env"}
    folder = REPO / "tests" / SEPARATE_SUITES["lighteval"]
    assert sorted(p.name for p in folder.glob("test_*.py")) == ["test_front_ends_agree.py", "test_inspect.py",
                                                                "test_lighteval.py"]


def test_the_lighteval_and_inspect_suites_pass_in_their_environment():
    python = VENV / "bin" / "python"
    if not python.is_file():
        message = f"{VENV} is missing: scripts/setup_lighteval.sh makes it (LightEval and Inspect cannot share .venv)"
        if in_ci():
            pytest.fail(f"{message}; CI runs scripts/setup.sh, which makes it", pytrace=False)
        pytest.skip(message)
    where = subprocess.run([str(python), "-c", "import q2_plugins; print(q2_plugins.__file__)"],
                           capture_output=True, text=True, cwd="/")
    assert where.returncode == 0 and Path(where.stdout.strip()).is_relative_to(REPO), (
        f"{VENV} does not run this checkout's q2_plugins ({where.stdout.strip() or where.stderr[-500:]}): "
        f"run scripts/setup_lighteval.sh")
    env = {**os.environ, SEPARATE_ENV_VARIABLE: "lighteval", "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([str(python), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           str(REPO / "tests" / SEPARATE_SUITES["lighteval"])],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " skipped" not in proc.stdout.splitlines()[-1], proc.stdout[-2000:]  # every test ran
