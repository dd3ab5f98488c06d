from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def shared_data_dir() -> Path:
    """The reference data: $Q2_SHARED_DATA, else ../shared/data beside the repository (as in CI)."""
    return Path(os.environ.get("Q2_SHARED_DATA", REPO.parent / "shared" / "data"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if not (path / "q2_original_run").is_dir():
        pytest.fail(f"Reference data not found at {path}: put shared/ beside the repository or set Q2_SHARED_DATA")
    return path
