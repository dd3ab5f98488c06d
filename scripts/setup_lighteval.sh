#!/usr/bin/env bash
# Create .venv-lighteval: q2-plugins with the lighteval and inspect extras, and the dev, evaluate and lm-eval extras
# for the test that every front end gives the same scores, at the exact versions of requirements-lighteval.lock.
# LightEval and Inspect cannot share .venv (setup.cfg, extra `lighteval`: LightEval pins nltk, termcolor and aenum
# exactly and needs xxhash<4; inspect-ai caps fsspec), so tests/integrations/integrations/test_lighteval_env.py runs
# their suite (tests/integrations/integrations/lighteval_env) in this environment. scripts/setup.sh calls this.
#   Q2_LIGHTEVAL_VENV=DIR                   another environment folder than .venv-lighteval
#   Q2_LIGHTEVAL_CONSTRAINTS=constraints.txt the newest releases within setup.cfg's ranges, torch alone pinned
set -euo pipefail
cd "$(dirname "$0")/.."
Q2_VENV=${Q2_LIGHTEVAL_VENV:-.venv-lighteval} \
Q2_CONSTRAINTS=${Q2_LIGHTEVAL_CONSTRAINTS:-requirements-lighteval.lock} \
Q2_EXTRAS=dev,evaluate,lm-eval,lighteval,inspect \
Q2_LIGHTEVAL=0 Q2_APPS=0 Q2_PARLAI=0 Q2_BROWSER=0 \
  bash scripts/setup.sh
