#!/usr/bin/env bash
# The system packages the project's tests need, from Debian's packages: a C compiler and
# make (the C example testee), Chromium (the HTML report is rendered headless) and tshark
# (Wireshark's Lustre dissector is certified as an IUT: --iut tshark).
# Installs only what is missing; needs root (as on the project's machines and in CI).
set -euo pipefail
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc)
command -v make >/dev/null 2>&1 || need+=(make)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v tshark >/dev/null 2>&1 || need+=(tshark)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  # wireshark-common asks whether non-root users may capture; answer no, without a prompt
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
