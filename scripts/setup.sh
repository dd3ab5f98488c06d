#!/usr/bin/env bash
# Create .venv and install q2-plugins with every extra the tests use, at the exact versions of requirements.lock
# (the ones the suite last passed with), so a release upstream cannot change CI or the scores unannounced.
#   Q2_CONSTRAINTS=constraints.txt   the newest releases within setup.cfg's ranges, torch alone pinned
#                                    (scripts/test_latest.sh uses it to find drift before users do)
#   Q2_VENV=DIR                      another environment folder than .venv
# torch is pinned in every pip call (both files pin it): an unpinned resolve would pull a multi-GB CUDA build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=${Q2_VENV:-.venv}
PINS=${Q2_CONSTRAINTS:-requirements.lock}
[ -x "$VENV/bin/python" ] || "$PY" -m venv "$VENV"
# PYTHONWARNINGS: no build-backend warnings (setuptools' "Editable installation" banner) among the set-up lines.
# Q2_COMPILE=0: no byte-compiling of the installed files (torch's alone: ~20 s on 2 cores); the caller compiles them
# later (scripts/score_sample.sh, after its first score), since with PYTHONDONTWRITEBYTECODE set every run would
# otherwise compile what it imports, every time.
PIP=(env PYTHONWARNINGS=ignore "$VENV/bin/python" -m pip --disable-pip-version-check -q)
INSTALL=(install)
[ "${Q2_COMPILE:-1}" = 1 ] || INSTALL+=(--no-compile)
"${PIP[@]}" "${INSTALL[@]}" -c "$PINS" --upgrade pip
"${PIP[@]}" "${INSTALL[@]}" -c "$PINS" torch==2.13.0
# Q2_EXTRAS: the extras to install (default: all the tests use; empty: scoring only, as scripts/score_sample.sh does)
EXTRAS=${Q2_EXTRAS-dev,evaluate,lm-eval,metaeval,bertscore,train,report-tests,ray,ct2,onnx}
"${PIP[@]}" "${INSTALL[@]}" -c "$PINS" -e ".${EXTRAS:+[$EXTRAS]}"
# the start-up hook for evaluate.load("q2") and ParlAI's --metrics q2 (editable installs do not get it from pip)
"$VENV/bin/q2" hooks install
# Headless Chromium for the HTML report's browser tests (apt-get as root when missing; Q2_BROWSER=0 skips)
bash scripts/install_chromium.sh
# ParlAI (--no-deps, its pins conflict) and the hook that gives its eval loop `--metrics q2`
[ "${Q2_PARLAI:-1}" = 0 ] || bash scripts/install_parlai.sh
# LightEval and Inspect in an environment of their own, .venv-lighteval (their pins conflict with this one's);
# Q2_LIGHTEVAL=0 skips it (then, in CI, the test that runs their suite there fails)
[ "${Q2_LIGHTEVAL:-1}" = 0 ] || bash scripts/setup_lighteval.sh
# DeepEval, Ragas and DSPy in .venv-apps, for the same reason (Q2_APPS=0 skips it)
[ "${Q2_APPS:-1}" = 0 ] || bash scripts/setup_apps.sh
echo "q2-plugins installed in $VENV ($("$VENV/bin/python" -c 'import q2_plugins; print(q2_plugins.__version__)'))"
