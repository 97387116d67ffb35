"""A pytest plugin `bench` gives its serial certifications (`-p`): it writes the wall-clock time
(time.time()) at which the run's first case starts its call, where the case sends its first
request, and the CPU time the process had used by then (time.process_time()), to the file
$PTLRPC_CONFORMANCE_BENCH_FIRST_CASE.  Against the time the bench started
the process, that is the certification's start-up: interpreter, imports, the command line's
checks and preflight, pytest's collection and the first case's fixtures."""
from __future__ import annotations

import os
import time

ENV = "PTLRPC_CONFORMANCE_BENCH_FIRST_CASE"
_seen = []


def pytest_runtest_call(item):
    if _seen:
        return
    _seen.append(item.nodeid)
    path = os.environ.get(ENV)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            f.write(f"{time.time()!r} {time.process_time()!r}\n")
