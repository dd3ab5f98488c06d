#!/usr/bin/env bash
# Write requirements.lock: the exact version of every package in .venv, after the suite passed there (for example
# after scripts/test_latest.sh). scripts/setup.sh, and so CI, install from it; setup.cfg keeps the ranges users get.
#   bash scripts/lock.sh [VENV [LOCKFILE]]   e.g. .venv-lighteval requirements-lighteval.lock
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${1:-.venv}
LOCK=${2:-requirements.lock}
{
  echo "# The exact versions the test suite last passed with: scripts/setup.sh installs through this file"
  echo "# (pip install -c $LOCK ...). Written by scripts/lock.sh; do not edit by hand."
  "$VENV/bin/python" -m pip --disable-pip-version-check freeze --all --exclude-editable \
    | grep -v -i -E '^(q2-plugins|q2_plugins)([=@ ]|$)' \
    | grep -v -i -E "^pip==" \
    | sed -E 's/^torch==([0-9.]+)\+cpu$/torch==\1/' \
    | LC_ALL=C sort -f
} > "$LOCK"
echo "$LOCK: $(grep -c '==' "$LOCK") packages from $VENV"
