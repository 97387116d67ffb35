#!/usr/bin/env python3
"""Decode throughput through the adapter interface (a benchmark, not a test).
Inputs: the bundled message vectors up to 4 KiB (about 50, from 0 to 352 bytes).

    python tools/bench.py [--seconds 3] [--iut SPEC ...]

For each IUT: decode calls/s one request at a time (call) and in batches of 256
(call_many, pipelined for exec:).  Inputs are the bundled vectors, round robin.
"""
import argparse
import sys
import time

from ptlrpc_conformance.harness.adapter import load_adapter
from ptlrpc_conformance.harness.vectors import load_all


def measure(adapter, requests, seconds, batch):
    n = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        if batch == 1:
            adapter.call(requests[n % len(requests)])
            n += 1
        else:
            chunk = [requests[(n + i) % len(requests)] for i in range(batch)]
            outcomes = adapter.call_many(chunk)
            assert not any(o.trouble for o in outcomes)
            n += batch
    return n / (time.perf_counter() - start)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--iut", action="append")
    args = ap.parse_args()
    iuts = args.iut or ["reference", f"exec:{sys.executable} -m ptlrpc_conformance.reference"]
    # typical messages: the bundled message vectors up to 4 KiB (the three 1 MB vectors would
    # measure JSON and hex throughput, not decoding)
    requests = [v.decode_request() for v in load_all() if v.op == "decode" and len(v.data) <= 4096]
    print(f"{'iut':<60} {'one at a time':>14} {'batch of 256':>14}")
    for spec in iuts:
        with load_adapter(spec) as adapter:
            single = measure(adapter, requests, args.seconds, 1)
            batched = measure(adapter, requests, args.seconds, 256)
        print(f"{spec[:60]:<60} {single:>12,.0f}/s {batched:>12,.0f}/s")


if __name__ == "__main__":
    main()
