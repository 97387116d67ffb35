"""What one run's pieces tell each other through the pytest config's stash (the plugin, the
report collector, the CLI), and why a run stopped early."""
from __future__ import annotations

import gc

import pytest

IUT_START_FAILURE = pytest.StashKey[str]()
HELLO = pytest.StashKey[dict]()
COLLECTOR = pytest.StashKey[object]()
SMOKE = pytest.StashKey[list]()
STOP_REASON = pytest.StashKey[str]()
CLI_RUN = pytest.StashKey[bool]()             # the command line started this run (it prints the verdict)
WORKER_USAGE_ERROR = pytest.StashKey[str]()   # xdist: a worker found a usage error in collection
ADAPTER = pytest.StashKey[object]()            # this process's started adapter (the iut fixture's)
IUT_LOST = pytest.StashKey[str]()              # why the iut fixture could not start the IUT (after the preflight did)
DESELECTED = pytest.StashKey[dict]()          # the conformance cases a selection left out: {case id: [requirements]}

# The garbage collector's young generation during the cases of a run the command line started
# (its process, and its xdist workers).  A run makes cyclic garbage at a steady rate
# (Hypothesis's records of each example): at Python's default (700) the collector ran about
# 560 times in a serial certification of the reference, 0.34 s of CPU; at this size about 20
# times, 0.12 s (timed with gc.callbacks).  The garbage it lets wait is a few megabytes.
RUN_GC_THRESHOLD = (20000, 20, 20)


def collector_for_the_cases() -> None:
    """What the collection made moved out of the garbage collector's sight (gc.freeze), and its
    young generation sized for the cases (RUN_GC_THRESHOLD): in the command line's process
    (cli/session.py) and in its xdist workers (plugin/hooks.py)."""
    gc.freeze()
    gc.set_threshold(*RUN_GC_THRESHOLD)


def stop_reason(session, exitstatus) -> str | None:
    """Why a run ended early: a limit, xdist's reason, or an interruption (Ctrl-C)."""
    config = session.config
    reason = config.stash.get(STOP_REASON, None)
    dsession = config.pluginmanager.getplugin("dsession")
    for candidate in (reason, session.shouldstop, session.shouldfail, getattr(dsession, "shouldstop", None)):
        if candidate and isinstance(candidate, str):
            return candidate
    if exitstatus == pytest.ExitCode.INTERRUPTED:
        return "interrupted"
    return None
