"""Time that runs fast, to show that a verdict does not depend on it without loading the machine
or asserting anything about wall-clock time.  `fast(clock)` is a clock that reads 11 s more at
each read than the read before (more than any limit in seconds Hypothesis keeps between two of
its reads); as a pytest plugin (PYTEST_PLUGINS=fast_clock with tests/ on the
path, so that xdist's workers load it too) a run's time.monotonic and time.perf_counter are such clocks, as on a machine so
loaded that every step takes seconds."""
import itertools
import time

STEP = 11.0


def fast(clock):
    reads = itertools.count(1)
    return lambda: clock() + STEP * next(reads)


def pytest_configure(config):
    time.monotonic = fast(time.monotonic)
    time.perf_counter = fast(time.perf_counter)
