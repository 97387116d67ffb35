"""The pytest plugin (entry point `pytest11`): options, markers, case ids, report.

Loaded into every pytest run of an environment where the package is installed, so it
does nothing until asked: the IUT is started only by a test that uses it, the report is
written only with --conformance-report, the preflight runs only with an explicit --iut.
"""
from __future__ import annotations

import os
import time

import pytest

from .harness.registry import CASE_ID, REQUIREMENT_ID

MARKER = "conformance"

IUT_START_FAILURE = pytest.StashKey[str]()
HELLO = pytest.StashKey[dict]()
COLLECTOR = pytest.StashKey[object]()
SMOKE = pytest.StashKey[list]()
DEFAULT_SEED = 20261122


def pytest_addoption(parser):
    g = parser.getgroup("ptlrpc-conformance", "PtlRPC conformance suite")
    g.addoption("--iut", default=None, metavar="SPEC",
                help="implementation under test: reference (default), python:package.module:factory, exec:COMMAND")
    g.addoption("--iut-timeout", type=float, default=5.0, metavar="SECONDS",
                help="per-call timeout for exec: testees (default 5)")
    g.addoption("--conformance-profile", default=None, metavar="NAME",
                help="profile the verdicts follow (default: the current Lustre code, lustre-2.17.57)")
    g.addoption("--conformance-vectors", action="append", default=[], metavar="DIR",
                help="add the vector files of DIR (or one file) to the run; may be repeated")
    g.addoption("--ignore-errno-class", action="store_true", default=False,
                help="judge rejections by accept/reject only; errno classes are reported, not judged")
    g.addoption("--conformance-seed", type=int, default=DEFAULT_SEED, metavar="N",
                help=f"seed of the property tests (default {DEFAULT_SEED}); recorded in the report")
    g.addoption("--conformance-examples", type=int, default=200, metavar="N",
                help="examples per property test (default 200)")
    g.addoption("--conformance-report", default=None, metavar="FILE",
                help="write a report.json of the run to FILE (reproducers of failures beside it)")
    g.addoption("--known-failures", default=None, metavar="FILE",
                help="regression gate: fail on failures not in FILE, and on entries of FILE that no longer fail")
    g.addoption("--update-known-failures", nargs="?", const="tighten", default=None,
                choices=("tighten", "loosen"),
                help="rewrite --known-failures FILE: drop stale entries, record signatures (tighten, the default); "
                     "'loosen' also adds the new failures")
    g.addoption("--conformance-requirement", action="append", default=[], metavar="ID",
                help="only the cases that check requirement ID (repeatable)")
    g.addoption("--conformance-area", action="append", default=[], metavar="AREA",
                help="only the cases of AREA, the first segment of the case id (repeatable)")
    g.addoption("--conformance-level", default=None, choices=("MUST", "SHOULD", "MAY"),
                help="only the cases that check a requirement of this level")
    g.addoption("--conformance-case", action="append", default=[], metavar="CASE-ID",
                help="only this case (exact id; repeatable)")
    g.addoption("--conformance-list", action="store_true", default=False,
                help="print the selected cases with their requirements instead of running them")
    g.addoption("--iut-io-log", default=None, metavar="FILE",
                help="record every protocol line exchanged with the IUT in FILE")


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        f"{MARKER}(case, requirements, area=None): a conformance case with its declared case id and the "
        "requirement ids it checks")
    if not config.pluginmanager.has_plugin("ptlrpc_conformance.fixtures.core"):
        from .fixtures import core
        config.pluginmanager.register(core, "ptlrpc_conformance.fixtures.core")
    if not hasattr(config, "workerinput"):
        from .harness.report import Collector
        collector = Collector(config)
        config.stash[COLLECTOR] = collector
        config.pluginmanager.register(collector, "ptlrpc_conformance.report")


def pytest_sessionstart(session):
    """Preflight on the controller: start the IUT once and read its hello, so that an IUT
    that cannot start ends the run with exit status 3 before any case runs."""
    config = session.config
    if hasattr(config, "workerinput"):
        return
    if config.getoption("iut") is None and not config.getoption("conformance_report"):
        return
    from .harness.adapter import IUTStartError, UsageError, load_adapter
    spec = config.getoption("iut") or "reference"
    try:
        adapter = load_adapter(spec, timeout=config.getoption("iut_timeout"))
        with adapter:
            config.stash[HELLO] = adapter.hello.as_dict()
            config.stash[SMOKE] = smoke_check(adapter)
    except UsageError as e:
        raise pytest.UsageError(str(e)) from None
    except IUTStartError as e:
        config.stash[IUT_START_FAILURE] = str(e)
        pytest.exit(f"the IUT could not start: {e}", returncode=3)


def smoke_check(adapter) -> list[dict]:
    """Before a run: the testee answers an unknown op with EOPNOTSUPP and echoes ids (the
    exec adapter checks every id).  Problems are harness/protocol errors, reported apart."""
    checks = []
    out = adapter.call({"op": "x-smoke-unknown-op"}, probe=True)
    checks.append({"check": "unknown op answered EOPNOTSUPP",
                   "ok": out.rejected and out.error == "EOPNOTSUPP", "detail": out.describe()})
    again = adapter.call({"op": "hello"}, probe=True)
    checks.append({"check": "hello answered again, ids echoed", "ok": again.ok, "detail": again.describe()})
    return checks


def pytest_collection_modifyitems(session, config, items):
    """Every conformance case carries its declared id and requirements as user
    properties, so reports (and xdist workers' reports) keep them."""
    seen: dict[str, str] = {}
    problems = []
    for item in items:
        mark = item.get_closest_marker(MARKER)
        if mark is None:
            continue
        case = mark.kwargs.get("case") or (mark.args[0] if mark.args else None)
        reqs = mark.kwargs.get("requirements") or (mark.args[1] if len(mark.args) > 1 else ())
        if not isinstance(case, str) or not CASE_ID.match(case):
            problems.append(f"{item.nodeid}: case id {case!r} does not follow the case id grammar")
            continue
        if case in seen:
            problems.append(f"{item.nodeid}: case id {case} already used by {seen[case]}")
        seen[case] = item.nodeid
        if not reqs or not all(isinstance(r, str) and REQUIREMENT_ID.match(r) for r in reqs):
            problems.append(f"{item.nodeid}: case {case} names no valid requirement ids ({reqs!r})")
        item.extra_keyword_matches.add(case)   # so that -k selects by case id
        item.user_properties.append(("case_id", case))
        item.user_properties.append(("requirements", ",".join(reqs)))
    if problems:
        raise pytest.UsageError("conformance case declarations are broken:\n  " + "\n  ".join(problems))
    _select(config, items)
    if config.getoption("conformance_list"):
        from .harness.registry import requirements
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


def _select(config, items) -> None:
    """--conformance-requirement / -area / -level / -case: keep only the matching cases."""
    reqs, areas, level, cases = (config.getoption("conformance_requirement"), config.getoption("conformance_area"),
                                 config.getoption("conformance_level"), config.getoption("conformance_case"))
    if not (reqs or areas or level or cases):
        return
    from .harness.registry import requirements
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


def pytest_generate_tests(metafunc):
    from .fixtures.core import generate_vector_cases
    generate_vector_cases(metafunc)
