#!/usr/bin/env bash
# docs/ci.md's recipe without GitHub Actions: install the suite, certify the testee against
# the known-failures file, and archive the report for the CI system to keep.  Run it from the
# root of your repository; override the variables from the environment.  Exit status: the
# certification's (0 when the regression gate passes; the README's
# "Exit status" lists the others).
set -euo pipefail
SUITE=${SUITE:-"./ptlrpc-conformance"}                     # what pip installs: a checkout of the suite
TESTEE=${TESTEE:-"./build/ptlrpc-testee"}                  # your testee command
KNOWN_FAILURES=${KNOWN_FAILURES:-"conformance/known-failures.yaml"}
REPORT=${REPORT:-"ptlrpc-conformance-report"}

python3 -m pip install "$SUITE"
status=0
ptlrpc-conformance certify --iut "exec:$TESTEE" \
  --known-failures "$KNOWN_FAILURES" --out "$REPORT" || status=$?
if [ -d "$REPORT" ]; then
  tar -czf "$REPORT.tar.gz" "$REPORT"                      # keep this file as the job's artifact
  echo "report: $REPORT/report.html (archived in $REPORT.tar.gz)"
fi
exit "$status"
