#!/usr/bin/env bash
# Set up .venv (scripts/setup.sh, from requirements.lock) and run the whole test suite. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${Q2_VENV:-.venv}/bin/python" -m pytest -q "$@"
