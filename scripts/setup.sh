#!/usr/bin/env bash
# Create .venv and install q2-plugins with every extra the tests use. torch is pinned through constraints.txt in
# every pip call: an unpinned resolve would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
PIP=(.venv/bin/python -m pip --disable-pip-version-check -q)
"${PIP[@]}" install -c constraints.txt --upgrade pip
"${PIP[@]}" install -c constraints.txt torch==2.13.0
"${PIP[@]}" install -c constraints.txt -e ".[${Q2_EXTRAS:-dev,evaluate,lm-eval,metaeval,bertscore,train,report-tests,ray}]"
# the start-up hook for evaluate.load("q2") and ParlAI's --metrics q2 (editable installs do not get it from pip)
.venv/bin/q2 hooks install
# Headless Chromium for the HTML report's browser tests (apt-get as root when missing; Q2_BROWSER=0 skips)
bash scripts/install_chromium.sh
# ParlAI (--no-deps, its pins conflict) and the hook that gives its eval loop `--metrics q2`
[ "${Q2_PARLAI:-1}" = 0 ] || bash scripts/install_parlai.sh
echo "q2-plugins installed in .venv ($(.venv/bin/python -c 'import q2_plugins; print(q2_plugins.__version__)'))"
