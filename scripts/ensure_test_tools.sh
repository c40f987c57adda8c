#!/usr/bin/env bash
# Tools the test suite uses beyond Python packages: headless Chromium renders the HTML report.
# Installed from Debian's packages when missing (as root on Debian); elsewhere the test that
# needs it says why it skipped.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" = 0 ] && [ -f /etc/debian_version ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends chromium >/dev/null
  echo "[ensure_test_tools] installed chromium" >&2
else
  echo "[ensure_test_tools] chromium missing and cannot be installed here; the HTML screenshot test will skip" >&2
fi
