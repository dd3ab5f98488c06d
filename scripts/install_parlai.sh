#!/usr/bin/env bash
# Add ParlAI to .venv and hook `--metrics q2` into it: the one step for the ParlAI adapter (safe to re-run).
#
# ParlAI 1.7.2 pins old transformers / torchtext / urllib3 that conflict with transformers 5 and lm-eval, so it goes
# in with --no-deps; the `parlai` extra brings the packages its code imports. Versions come from requirements.lock
# (Q2_CONSTRAINTS and Q2_VENV as in scripts/setup.sh). Last, `q2 hooks install` writes q2_plugins_hook.pth into
# site-packages (see docs/integrations.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${Q2_VENV:-.venv}
PINS=${Q2_CONSTRAINTS:-requirements.lock}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# PYTHONWARNINGS: no build-backend warnings (setuptools' "Editable installation" banner) among the set-up lines
PIP=(env PYTHONWARNINGS=ignore "$VENV/bin/python" -m pip --disable-pip-version-check -q)
"${PIP[@]}" install -c "$PINS" torch==2.13.0
"${PIP[@]}" install -c "$PINS" -e ".[parlai]"
"${PIP[@]}" install -c "$PINS" --no-deps parlai==1.7.2
"$VENV/bin/q2" hooks install
"$VENV/bin/q2" hooks status
