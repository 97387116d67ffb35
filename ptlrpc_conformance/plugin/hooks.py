"""The plugin's hooks for a session that uses the suite (plugin/__init__.py registers this module then):
the report's collector, the run limits, the IUT preflight, case ids and requirements as user
properties, the selection options, and what xdist's controller and workers tell each other.

Importing it loads the harness (registry, options' checks, the adapter loader, the report), so
a pytest run that never uses the suite never imports it (plugin/__init__.py says when it is used).
"""
from __future__ import annotations

import gc
import os
import shutil
import sys
import tempfile
import time

import pytest

from ptlrpc_conformance.fixtures import core
from ptlrpc_conformance.harness import options
from ptlrpc_conformance.harness.data.registry import CASE_ID, REQUIREMENT_ID, expand_case_ids, requirements
from ptlrpc_conformance.harness.options import BY_DEST
from ptlrpc_conformance.harness.outputs import gate
from ptlrpc_conformance.harness.outputs.report import Collector
from ptlrpc_conformance.harness.runstate import (
    ADAPTER, CLI_RUN, COLLECTOR, DESELECTED, HELLO, IUT_LOST, IUT_START_FAILURE, SMOKE, STOP_REASON,
    WORKER_USAGE_ERROR, collector_for_the_cases)
from ptlrpc_conformance.harness.transport.adapter import IUTStartError, UsageError
from ptlrpc_conformance.harness.transport.loader import load_adapter, smoke_check

MARKER = "conformance"


def pytest_configure(config):
    """Called when this module is registered (pytest_configure is a historic hook): at the
    start of the run, or later, when the session turns out to use the suite."""
    if not hasattr(config, "workerinput"):
        collector = Collector(config)
        config.stash[COLLECTOR] = collector
        config.pluginmanager.register(collector, "ptlrpc_conformance.report")
    problems = options.number_problems(config.getoption)
    if problems:
        raise pytest.UsageError("\n".join(problems))
    core.run_settings_of(config)          # the run's settings, resolved once (an unknown profile: a usage error)
    max_fail, budget = config.getoption("conformance_max_fail"), config.getoption("conformance_time_budget")
    config.pluginmanager.register(RunLimits(config, max_fail, budget), "ptlrpc_conformance.limits")
    if not hasattr(config, "workerinput"):
        problems = _input_problems(config)
        if problems:
            raise pytest.UsageError("\n".join(problems))


def _input_problems(config) -> list[str]:
    """The files and ids a run names, checked before anything runs (harness/options.py); the
    command line has checked the same under its own option names before it starts pytest."""
    problems = []
    for dest, option, parents in (("conformance_report", "--conformance-report", True),
                                  ("iut_io_log", "--iut-io-log", False)):
        if config.getoption(dest):
            problems += options.writable_file(config.getoption(dest), option, make_parents=parents)
    problems += gate.file_problems(config.getoption("known_failures"), config.getoption("update_known_failures"))
    problems += options.requirement_ids(config.getoption("conformance_requirement"), "--conformance-requirement")
    if config.getoption("conformance_vectors"):
        problems += options.vector_files(config.getoption("conformance_vectors"))
    return problems


class RunLimits:
    """--conformance-max-fail, --conformance-time-budget and --conformance-max-timeouts: stop
    a hopeless run cleanly.  The last is always on: an IUT that left that many requests in a
    row unanswered, or did not answer its hello after a restart, has stopped answering.

    Checked after each case, so the case running when a limit is reached is finished (each
    IUT call is still bounded by --iut-timeout).  Stopping sets `session.shouldstop`: pytest
    then ends the session as interrupted (exit status 2), and report.json is written, marked
    incomplete with the reason.  With xdist, failing cases are counted on the controller
    (every worker's verdicts meet there), which tells the workers to stop through a file
    they check after each case; each worker also checks the time budget against the
    controller's deadline.  So workers stop after their current case instead of finishing
    the cases already handed to them."""

    def __init__(self, config, max_fail: int | None, budget: float | None):
        self.config = config
        self.max_fail = max_fail
        self.budget = budget
        workerinput = getattr(config, "workerinput", None)
        self.stop_file = None               # xdist: the controller writes the reason to stop here
        if workerinput is not None and "conformance_started" in workerinput:
            self.started, self.deadline = workerinput["conformance_started"], workerinput["conformance_deadline"]
            self.stop_file = workerinput["conformance_stop_file"]
        else:
            self.started = time.time()
            self.deadline = self.started + budget if budget is not None else None
        self.is_worker = workerinput is not None
        self.failing: set[str] = set()
        self.session = None
        self.known = self._known_failures()

    def _known_failures(self) -> list:
        path = self.config.getoption("known_failures")
        if not path or self.max_fail is None:
            return []
        try:
            return gate.load(path)
        except gate.GateError:      # reported by the gate at the end; count every failure meanwhile
            return []

    def pytest_sessionstart(self, session):
        self.session = session

    @pytest.hookimpl(optionalhook=True)
    def pytest_configure_node(self, node):
        """xdist controller: every worker stops at the same deadline, and when told to."""
        if self.stop_file is None:
            self.stop_file = os.path.join(tempfile.mkdtemp(prefix="ptlrpc-conformance-"), "stop")
        node.workerinput["conformance_started"] = self.started
        node.workerinput["conformance_deadline"] = self.deadline
        node.workerinput["conformance_stop_file"] = self.stop_file

    def pytest_unconfigure(self, config):
        if self.stop_file and not self.is_worker:
            shutil.rmtree(os.path.dirname(self.stop_file), ignore_errors=True)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_logreport(self, report):
        props = dict(getattr(report, "user_properties", ()))   # read before the report collector empties them
        result = yield
        case = props.get("case_id")
        collector = self.config.stash.get(COLLECTOR, None)
        if self.max_fail is not None and case and collector is not None and case not in self.failing:
            entry = collector.cases.get(case) or {}
            failed = entry.get("failed_requirements") or (entry.get("notes") or {}).get("failed_requirements")
            if entry.get("verdict") in ("fail", "error") and not self._known(case, entry.get("requirements", []), failed):
                self.failing.add(case)
                if len(self.failing) >= self.max_fail:
                    self.stop(f"max-fail reached: {len(self.failing)} case(s) failed or hit IUT trouble "
                              f"(limit {self.max_fail})")
        if self.deadline is not None and time.time() >= self.deadline:
            self.stop(f"time budget of {self.budget:g} s exhausted after {time.time() - self.started:.1f} s")
        adapter = self.config.stash.get(ADAPTER, None)
        if report.when == "teardown":
            why = self.config.stash.get(IUT_LOST, None) or (
                adapter.stopped_answering(self.config.getoption("conformance_max_timeouts") or 5) if adapter else None)
            if why:
                self.stop(why)
        if self.is_worker and self.stop_file and report.when == "teardown" and os.path.exists(self.stop_file):
            try:
                with open(self.stop_file, encoding="utf-8") as f:
                    reason = f.read()
            except OSError:
                reason = ""
            self.stop(reason or "stopped by the controller")
        return result

    def _known(self, case: str, case_requirements: list, failed: list | None) -> bool:
        return any(gate.covers(e.id, case, case_requirements, failed) for e in self.known)

    def stop(self, reason: str) -> None:
        session = self.session
        if session is None or session.shouldstop:
            return
        session.shouldstop = reason
        self.config.stash[STOP_REASON] = reason
        if self.is_worker:              # the controller names it in the report (pytest_testnodedown)
            self.config.workeroutput[STOP_OUTPUT] = reason
        dsession = self.config.pluginmanager.getplugin("dsession")     # xdist's controller loop
        if dsession is not None and not getattr(dsession, "shouldstop", False):
            dsession.shouldstop = reason
        if self.stop_file and not self.is_worker:
            try:
                with open(self.stop_file + ".tmp", "w", encoding="utf-8") as f:
                    f.write(reason)
                os.replace(self.stop_file + ".tmp", self.stop_file)
            except OSError:
                pass


def pytest_sessionstart(session):
    """Preflight on the controller: start the IUT once and read its hello, so that an IUT
    that cannot start ends the run with exit status 3 before any case runs."""
    config = session.config
    if hasattr(config, "workerinput"):
        return
    if config.getoption("iut") is None and not config.getoption("conformance_report"):
        return
    if HELLO in config.stash:           # the command line ran the preflight (cli.py)
        return
    spec = config.getoption("iut") or "reference"
    try:
        adapter = load_adapter(spec, timeout=config.getoption("iut_timeout"))
        with adapter:
            config.stash[HELLO] = adapter.hello.as_dict()
            config.stash[SMOKE] = smoke_check(adapter)
            for line in options.capability_warnings(adapter.hello):
                config.issue_config_time_warning(pytest.PytestConfigWarning(line), stacklevel=2)
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None
    except IUTStartError as e:
        config.stash[IUT_START_FAILURE] = str(e)
        collector = config.stash.get(COLLECTOR, None)
        if collector is not None:       # pytest.exit here skips pytest_sessionfinish: report now
            collector.write_start_failure(session, 3)
        pytest.exit(f"the IUT could not start: {e}", returncode=3)


def _declared(item) -> tuple[object, tuple]:
    """An item's declared case id and requirement ids (its conformance marker), or (None, ())."""
    mark = item.get_closest_marker(MARKER)
    if mark is None:
        return None, ()
    case = mark.kwargs.get("case") or (mark.args[0] if mark.args else None)
    reqs = mark.kwargs.get("requirements") or (mark.args[1] if len(mark.args) > 1 else ())
    return case, tuple(reqs)


def pytest_deselected(items):
    """Every conformance case a selection leaves out (ours, -k, -m, --deselect), with its
    requirements: report.json's `selection.deselected`, from which the level tells a partial
    run.  An xdist worker hands its list to the controller (pytest_testnodedown)."""
    if not items:
        return
    config = items[0].config
    store = config.stash.setdefault(DESELECTED, {})
    for item in items:
        case, reqs = _declared(item)
        if isinstance(case, str):
            store[case] = [r for r in reqs if isinstance(r, str)]
    if hasattr(config, "workeroutput"):
        config.workeroutput[DESELECTED_OUTPUT] = store


DESELECTED_OUTPUT = "conformance_deselected"
STOP_OUTPUT = "conformance_stop_reason"       # why a worker stopped the run


def _suite_bug(item, excinfo) -> bool:
    """Whether an exception that ended a case is a bug of the suite's own code: a case of the
    bundled suites (a plugin user's own cases keep pytest's verdict), ended by an exception that
    is no test outcome (pytest.fail, skip), no interruption, and no Hypothesis "Flaky" (the IUT
    answered one input two ways: the IUT's fault)."""
    module = getattr(getattr(item, "module", None), "__name__", "") or ""
    if not module.startswith("ptlrpc_conformance.") or _declared(item)[0] is None:
        return False
    from _pytest.outcomes import OutcomeException

    def bug(e: BaseException) -> bool:
        if isinstance(e, BaseExceptionGroup):
            return any(bug(x) for x in e.exceptions)
        if isinstance(e, (OutcomeException, KeyboardInterrupt, SystemExit)):
            return False
        return not any(c.__name__ == "Flaky" and c.__module__.startswith("hypothesis") for c in type(e).__mro__)
    return bug(excinfo.value)


@pytest.hookimpl(wrapper=True)
def pytest_keyboard_interrupt(excinfo):
    """A Ctrl-C is recorded whatever pytest makes of its traceback.  Python 3.11 leaves the
    traceback entry of an instruction the compiler gave no line number (tb_lineno None) where
    the signal can land; pytest's terminal reporter fails on it with a TypeError while it notes
    the interruption, and that error left pytest's session before pytest recorded the
    interruption (main.wrap_session): the session ended with exit status 0, report.json was
    not marked incomplete, and the command line ended in a traceback.  Such entries are left
    out of the traceback shown; any other failure of that note is said in one line."""
    def has_line(entry) -> bool:
        try:
            return entry.lineno is not None
        except TypeError:
            return False
    if not all(has_line(entry) for entry in excinfo.traceback):
        excinfo.traceback = excinfo.traceback.filter(has_line)
    try:
        return (yield)
    except Exception as e:
        sys.stderr.write(f"ptlrpc-conformance: pytest could not show where the run was interrupted: "
                         f"{type(e).__name__}: {e}\n")
        return None


def _not_applicable(e: BaseException) -> str | None:
    """The message of the adapter's NotApplicable that ended a case: `e`, an exception group
    holding it (Hypothesis), or the exception it caused; None for any other end."""
    from ptlrpc_conformance.harness.transport.adapter import NotApplicable
    stack, seen = [e], set()
    while stack:
        x = stack.pop()
        if x is None or id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, NotApplicable):
            return str(x)
        stack += list(x.exceptions) if isinstance(x, BaseExceptionGroup) else []
        stack.append(x.__cause__)
    return None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A case the suite's own code broke gets the verdict `error (suite)` (report.py): charged
    to no requirement, its traceback kept, and said to be the suite's bug.  A case ended by the
    adapter's NotApplicable (a request its transport will not send: a live target's firewall,
    lnet_tcp.py) is not applicable, whatever code it came through."""
    report = yield
    why = _not_applicable(call.excinfo.value) if call.excinfo is not None else None
    if why is not None:
        from ptlrpc_conformance.harness.outputs.report import NOT_APPLICABLE_PREFIX
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {NOT_APPLICABLE_PREFIX}{why}")
        return report
    if call.excinfo is not None and _suite_bug(item, call.excinfo):
        from ptlrpc_conformance.harness.outputs.report import SUITE_ERROR, SUITE_ERROR_WORDS
        report.user_properties.append(("verdict", SUITE_ERROR))
        report.sections.append(("ptlrpc-conformance", SUITE_ERROR_WORDS))
    return report


def pytest_collection_modifyitems(session, config, items):
    """Every conformance case carries its declared id and requirements as user
    properties, so reports (and xdist workers' reports) keep them."""
    seen: dict[str, str] = {}
    problems = []
    for item in items:
        if item.get_closest_marker(MARKER) is None:
            continue
        case, reqs = _declared(item)
        if not isinstance(case, str) or not CASE_ID.match(case):
            problems.append(f"{item.nodeid}: case id {case!r} does not follow the case id grammar")
            continue
        if case in seen:
            problems.append(f"{item.nodeid}: case id {case} already used by {seen[case]}")
        seen[case] = item.nodeid
        if not reqs or not all(isinstance(r, str) and REQUIREMENT_ID.match(r) for r in reqs):
            problems.append(f"{item.nodeid}: case {case} names no valid requirement ids ({reqs!r})")
        elif options.marker_requirements("", case, reqs):    # the place is named only then: item.location
            path, line, _ = item.location                         # costs about 0.1 ms an item
            problems += options.marker_requirements(f"{path}:{(line or 0) + 1}", case, reqs)
        item.extra_keyword_matches.add(case)   # so that -k selects by case id
        item.user_properties.append(("case_id", case))
        item.user_properties.append(("requirements", ",".join(reqs)))
    if problems:
        return _usage_error(config, items, "conformance case declarations are broken:\n  " + "\n  ".join(problems))
    problems = _selection_problems(config, seen)
    if problems:
        return _usage_error(config, items, "\n".join(problems))
    _select(config, items)
    worker = getattr(config, "workerinput", None) or {}
    if worker.get("workercount") and worker.get("conformance_dist") == "worksteal":
        long_cases_first(items, worker["workercount"])
    if config.getoption("conformance_list"):
        known = requirements()
        tw = config.get_terminal_writer()
        for item in items:
            props = dict(item.user_properties)
            if "case_id" in props:
                reqs = props["requirements"].split(",")
                levels = sorted({known[r].level for r in reqs if r in known})
                tw.line(f"{props['case_id']:<64} {props['requirements']}  [{'/'.join(levels)}]")
        tw.line(f"{sum(1 for i in items if 'case_id' in dict(i.user_properties))} cases")
        config.option.collectonly = True


def long_cases_first(items, workers: int, is_long=None) -> None:
    """xdist `worksteal` on `workers` workers: the long cases (those that run the examples
    budget: properties and stateful parts, hundreds of ms each, against a few ms for a vector)
    are shared out evenly and each worker runs its share first.  Work stealing then moves the
    short cases at the end, so no worker is left alone with a long one.  Worksteal hands the
    collection out in `workers` consecutive runs (run k: what is left // the workers left), so
    the long cases go to the head of each run.  The report sorts cases by id, so the order is
    seen nowhere else; with any other scheduler it is left alone.  `is_long(item)`: another
    test of what is long (the project's own tests use it, conftest.py)."""
    if is_long is None:
        def is_long(item):
            return "conformance_examples" in getattr(item, "fixturenames", ())
    long = [i for i in items if is_long(i)]
    lead_runs(items, [long[k::workers] for k in range(workers)])


def lead_runs(items, leads: list) -> None:
    """xdist `worksteal` on len(`leads`) workers: reorder `items` so that worker k's run starts
    with the items of leads[k], in that order, and is filled up with the others in collection
    order (see long_cases_first for how worksteal hands out its runs)."""
    workers = len(leads)
    led = {id(i) for lead in leads for i in lead}
    short = [i for i in items if id(i) not in led]
    order, left = [], len(items)
    for k, mine in enumerate(leads):
        size = left // (workers - k)
        left -= size
        order += list(mine) + short[:max(size - len(mine), 0)]
        short = short[max(size - len(mine), 0):]
    items[:] = order + short


USAGE_ERROR = "conformance_usage_error"       # an xdist worker's usage error, for the controller


def _usage_error(config, items, message: str) -> None:
    """A usage error found in collection: raised, or on an xdist worker (where an exception
    ends in an internal error) handed to the controller with no case left to run."""
    if not hasattr(config, "workerinput"):
        raise pytest.UsageError(message)
    config.workeroutput[USAGE_ERROR] = message
    config.hook.pytest_deselected(items=list(items))
    items[:] = []


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """xdist controller: a worker's usage error ends the run as one (see pytest_sessionfinish)."""
    output = getattr(node, "workeroutput", None) or {}
    node.config.stash.setdefault(DESELECTED, {}).update(output.get(DESELECTED_OUTPUT) or {})
    reason = output.get(STOP_OUTPUT)
    if reason and STOP_REASON not in node.config.stash:
        # a worker stopped for its IUT: the whole run stops, for that reason
        node.config.stash[STOP_REASON] = reason
        dsession = node.config.pluginmanager.getplugin("dsession")
        if dsession is not None and not getattr(dsession, "shouldstop", False):
            dsession.shouldstop = reason
    message = output.get(USAGE_ERROR)
    if message:
        node.config.stash[WORKER_USAGE_ERROR] = message


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session):
    message = session.config.stash.get(WORKER_USAGE_ERROR, None)
    if message:
        session.exitstatus = pytest.ExitCode.USAGE_ERROR
        print(f"ERROR: {message}", file=sys.stderr)
    return (yield)


def pytest_collection_finish(session):
    """An xdist worker of a run the command line started collects like the command line's own
    process (cli/session.py, collector_back: runstate.collector_for_the_cases).  The worker
    ends with the run, so nothing needs putting back."""
    workerinput = getattr(session.config, "workerinput", None)
    if workerinput is not None and workerinput.get("conformance_cli"):
        collector_for_the_cases()


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """An xdist worker ends with its process, and the controller waits for that end: the
    objects of the run are moved out of the collector's sight (gc.freeze), so that the
    interpreter's last collection does not walk them (about 0.2 s per worker).  Only on
    workers: a process that goes on (pytest called in-process) would never collect them."""
    if hasattr(config, "workerinput"):
        gc.freeze()


def _option_name(config, dest: str) -> str:
    """An option as the user spelled it: the command line's name in a run it started."""
    option = BY_DEST[dest]
    by_cli = config.stash.get(CLI_RUN, False) or (getattr(config, "workerinput", None) or {}).get("conformance_cli")
    return option.cli[0] if by_cli else option.pytest


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    """xdist controller: the workers name options as the user did (see _option_name); the
    plugin tells them the scheduling (plugin/__init__.py, _ControllerWatch)."""
    node.workerinput["conformance_cli"] = bool(node.config.stash.get(CLI_RUN, False))


def _selection_problems(config, case_ids) -> list[str]:
    """--conformance-case and --conformance-area name cases and areas of the run (known ids
    before the selection; a renamed case id is known)."""
    cases, areas = config.getoption("conformance_case"), config.getoption("conformance_area")
    if not (cases or areas):
        return []
    return options.selection(cases, areas, case_ids, _option_name(config, "case"), _option_name(config, "area"))


def _select(config, items) -> None:
    """--conformance-requirement / -area / -level / -case: keep only the matching cases (an
    old, renamed case id selects the cases that replaced it: spec/case_aliases.yaml)."""
    reqs, areas, level, cases = (config.getoption("conformance_requirement"), config.getoption("conformance_area"),
                                 config.getoption("conformance_level"), config.getoption("conformance_case"))
    if not (reqs or areas or level or cases):
        return
    cases = set(expand_case_ids(cases))
    known = requirements()
    keep, drop = [], []
    for item in items:
        props = dict(item.user_properties)
        case = props.get("case_id")
        case_reqs = props.get("requirements", "").split(",") if case else []
        ok = case is not None
        ok = ok and (not cases or case in cases)
        ok = ok and (not areas or case.split(".")[0] in areas)
        ok = ok and (not reqs or any(r in case_reqs for r in reqs))
        ok = ok and (not level or any(r in known and known[r].level == level for r in case_reqs))
        (keep if ok else drop).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
