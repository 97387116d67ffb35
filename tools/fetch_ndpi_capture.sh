#!/usr/bin/env bash
# Fetch nDPI's Lustre capture (a Lustre 2.15.5 client mounting from an MGS) for
# tests/test_ndpi_capture.py, which reads it from $PTLRPC_NDPI_LUSTRE_PCAP and skips without it.
# The file is nDPI's test data (LGPL-3.0): it is fetched, never committed.  CI does not run this.
#   usage: tools/fetch_ndpi_capture.sh [DIR]      (default /tmp/ndpi)
#   then:  PTLRPC_NDPI_LUSTRE_PCAP=DIR/lustre.pcapng python3 -m pytest tests/test_ndpi_capture.py
set -euo pipefail
dir=${1:-/tmp/ndpi}
commit=81eaa3bd528040a937acf0e80e6811d3cc2e13da        # "Add Lustre protocol detection support (#2544)"
sha256=e52dbd3bb3e6b0da1f4110b6ba350950935bc467398c2c5a4d6ee07b08503b5f
mkdir -p "$dir"
curl -fsSLo "$dir/lustre.pcapng.part" \
  "https://raw.githubusercontent.com/ntop/nDPI/$commit/tests/cfgs/default/pcap/lustre.pcapng"
echo "$sha256  $dir/lustre.pcapng.part" | sha256sum -c --quiet
mv "$dir/lustre.pcapng.part" "$dir/lustre.pcapng"
echo "PTLRPC_NDPI_LUSTRE_PCAP=$dir/lustre.pcapng"
