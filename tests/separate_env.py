"""Run a suite of its own environment (``SEPARATE_SUITES`` in tests/conftest.py) there, from .venv: a missing
environment skips locally and fails in CI, where scripts/setup.sh makes it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import REPO, SEPARATE_ENV_VARIABLE, SEPARATE_SUITES, in_ci


def run_suite(name: str, venv: Path, setup_script: str, why: str) -> None:
    """Run the suite ``name`` with ``venv``'s Python (offline); fail with its output unless every test passed.
    ``setup_script`` makes the environment; ``why`` says why the suite cannot share .venv."""
    python = venv / "bin" / "python"
    if not python.is_file():
        message = f"{venv} is missing: {setup_script} makes it ({why})"
        if in_ci():
            pytest.fail(f"{message}; CI runs scripts/setup.sh, which makes it", pytrace=False)
        pytest.skip(message)
    where = subprocess.run([str(python), "-c", "import q2_plugins; print(q2_plugins.__file__)"],
                           capture_output=True, text=True, cwd="/")
    assert where.returncode == 0 and Path(where.stdout.strip()).is_relative_to(REPO), (
        f"{venv} does not run this checkout's q2_plugins ({where.stdout.strip() or where.stderr[-500:]}): "
        f"run {setup_script}")
    env = {**os.environ, SEPARATE_ENV_VARIABLE: name, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1"}
    proc = subprocess.run([str(python), "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider",
                           str(REPO / "tests" / SEPARATE_SUITES[name])],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=3000)
    assert proc.returncode == 0, proc.stdout[-6000:] + proc.stderr[-2000:]
    assert " skipped" not in proc.stdout.splitlines()[-1], proc.stdout[-2000:]  # every test ran
