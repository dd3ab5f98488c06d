#!/usr/bin/env bash
# Create .venv-apps: q2-plugins with the deepeval, ragas, dspy and lm-eval-next (lm-eval's 0.5 pre-release) extras
# (and dev, for their tests), at the exact versions of requirements-apps.lock. DeepEval caps click below 8.4 and
# Ragas holds openai and huggingface_hub back (setup.cfg, extra `deepeval`), and .venv has lm-eval 0.4, so they
# cannot share .venv; tests/integrations/integrations/test_apps_env.py runs
# their suite (tests/integrations/integrations/apps_env) in this environment. scripts/setup.sh calls this.
#   Q2_APPS_VENV=DIR                     another environment folder than .venv-apps
#   Q2_APPS_CONSTRAINTS=constraints.txt  the newest releases within setup.cfg's ranges, torch alone pinned
set -euo pipefail
cd "$(dirname "$0")/.."
Q2_VENV=${Q2_APPS_VENV:-.venv-apps} \
Q2_CONSTRAINTS=${Q2_APPS_CONSTRAINTS:-requirements-apps.lock} \
Q2_EXTRAS=dev,deepeval,ragas,dspy,lm-eval-next \
Q2_LIGHTEVAL=0 Q2_APPS=0 Q2_PARLAI=0 Q2_BROWSER=0 \
  bash scripts/setup.sh
