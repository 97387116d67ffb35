"""A smaller shrinking budget for the stateful parts, for tests whose point is not how far a
failure shrinks (that a shrunk session is reported, replays, and is the same serially and under
xdist) but which pay for every run of the budget.  As a pytest plugin (PYTEST_PLUGINS=short_shrink
with tests/ on the path, so that xdist's workers load it too) a run's stateful parts shrink for
RUNS runs of the machine instead of fixtures/stateful.py's SHRINK_RUNS; the budget is still
counted in runs, so a seed gives the same session at any speed and any -n."""
from ptlrpc_conformance.fixtures import stateful

RUNS = 10


def pytest_configure(config):
    assert isinstance(getattr(stateful, "SHRINK_RUNS", None), int), "fixtures/stateful.py has no SHRINK_RUNS"
    stateful.SHRINK_RUNS = min(stateful.SHRINK_RUNS, RUNS)
