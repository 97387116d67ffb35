#!/usr/bin/env bash
# The system packages the project's tests need, from Debian's packages: a C compiler and
# make (the C example testee) and Chromium (the HTML report is rendered headless).
# Installs only what is missing; needs root (as on the project's machines and in CI).
set -euo pipefail
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
