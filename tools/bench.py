#!/usr/bin/env python3
"""Kept for old habits: the benchmark is `ptlrpc-conformance bench` (ptlrpc_conformance/harness/bench.py).

    python tools/bench.py [bench options]    ==    ptlrpc-conformance bench [bench options]
"""
import sys

from ptlrpc_conformance.harness.tools.bench import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:], prog="tools/bench.py"))
