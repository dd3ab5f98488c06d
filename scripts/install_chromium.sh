#!/usr/bin/env bash
# Headless Chromium for the HTML report's browser tests: Debian's chromium + chromium-driver, installed with apt-get
# when missing and running as root (CI). Q2_BROWSER=0 skips. Elsewhere the tests skip, except in CI where they fail.
set -euo pipefail
[ "${Q2_BROWSER:-1}" = 0 ] && exit 0
if command -v chromium >/dev/null && command -v chromedriver >/dev/null; then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver
else
  echo "chromium / chromedriver not found and not root with apt-get: the HTML report's browser tests will skip" \
       "(install Debian's chromium and chromium-driver)" >&2
fi
