#!/usr/bin/env bash
# Add ParlAI to .venv and hook `--metrics q2` into it: the one step for the ParlAI adapter (safe to re-run).
#
# ParlAI 1.7.2 pins old transformers / torchtext / urllib3 that conflict with transformers 5 and lm-eval, so it goes
# in with --no-deps; the `parlai` extra brings the packages its code imports. torch stays pinned by constraints.txt.
# Last, `q2 hooks install` writes q2_plugins_hook.pth into site-packages (see docs/integrations.md).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
"${PIP[@]}" install -c constraints.txt torch==2.13.0
"${PIP[@]}" install -c constraints.txt -e ".[parlai]"
"${PIP[@]}" install -c constraints.txt --no-deps parlai==1.7.2
.venv/bin/q2 hooks install
.venv/bin/q2 hooks status
