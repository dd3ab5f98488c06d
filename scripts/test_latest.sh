#!/usr/bin/env bash
# Run the test suite against the newest releases of every dependency (within setup.cfg's ranges; torch stays on
# constraints.txt's pin) in a fresh .venv-latest, to find drift before users do. When it passes,
# `bash scripts/lock.sh .venv-latest` writes those versions to requirements.lock. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .venv-latest .venv-lighteval-latest
export Q2_VENV=.venv-latest Q2_CONSTRAINTS=constraints.txt
# LightEval / Inspect's own environment, on the newest releases too (tests/.../test_lighteval_env.py reads the name)
export Q2_LIGHTEVAL_VENV=.venv-lighteval-latest Q2_LIGHTEVAL_CONSTRAINTS=constraints.txt
bash scripts/setup.sh
.venv-latest/bin/python -m pip --disable-pip-version-check list --format=freeze \
  | grep -i -E '^(torch|transformers|tokenizers|spacy|numpy|ray|evaluate|lm.eval|datasets|accelerate)=' | tr '\n' ' '
echo
exec .venv-latest/bin/python -m pytest -q "$@"
