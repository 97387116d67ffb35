"""report.json: what ran, against what, and each case's verdict (docs/report.md).

Verdicts: pass, fail, not-applicable (the IUT lacks a capability; never a pass, never a
failure), error (harness or protocol trouble: the IUT crashed, hung or garbled; kept
apart from conformance failures) and interrupted (the run was stopped while the case ran).
Cases are keyed by their declared case ids.
"""
from __future__ import annotations

import datetime as _dt
import functools
import hashlib
import json
import os
import pathlib
import re
import platform
import sys
import time

import pytest
import yaml

from ptlrpc_conformance import __version__
from ptlrpc_conformance.harness.data.vectors import SCENARIO_FORMAT
from ptlrpc_conformance.harness.options import EXIT_SUITE, reproduce_argv
from ptlrpc_conformance.harness import settings
from ptlrpc_conformance.harness.outputs import write_atomically
from ptlrpc_conformance.harness.runstate import DESELECTED
from ptlrpc_conformance.harness.outputs.level import (NOT_EXERCISED, NOT_JUDGED_AGNOSTIC, NOT_RUN, PASS_AGNOSTIC,
                                                      PASSING, level)

FORMAT = "ptlrpc-conformance-report/1"
NOT_APPLICABLE_PREFIX = "not applicable: "


def _props(report) -> dict:
    return {k: v for k, v in getattr(report, "user_properties", ())}


def _is_suite_module(config, nodeid: str) -> bool:
    """Whether a collected node id is in one of the suite's own modules (ptlrpc_conformance/
    suites/): a collection error there is the suite's; one in a user's own test module (the
    plugin in another repository) is left to pytest."""
    if not nodeid:
        return False
    suites = pathlib.Path(__file__).resolve().parents[2] / "suites"
    path = (config.rootpath / nodeid.split("::")[0]).resolve()
    return path == suites or suites in path.parents


class Collector:
    """Registered on the controller; sees every case's report, xdist workers' included."""

    def __init__(self, config):
        self.config = config
        self.cases: dict[str, dict] = {}
        self.expected: set[str] = set()      # the node ids of the run's selected tests
        self.finished: set[str] = set()      # those whose teardown reported: they ran to the end
        self.collection_errors: list[dict] = []   # {where, error}: a module or parametrization that broke
        self.started = time.time()
        self.started_iso = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    # pytest hooks ----------------------------------------------------------------------
    def pytest_collection_finish(self, session):
        self.expected.update(item.nodeid for item in session.items)

    def pytest_collectreport(self, report):
        """A collection that broke (a suite module that does not import, a parametrization that
        raised): the suite's own fault, or a plugin's the run loaded, never the IUT's.  Usage
        errors (a bad option, a bad input file) are raised before this and are not seen here."""
        if report.failed and _is_suite_module(self.config, report.nodeid):
            text = str(getattr(report, "longreprtext", "") or report.longrepr or "").strip()
            last = next((line.strip() for line in reversed(text.splitlines()) if line.strip()), "")
            last = last[1:].strip() if last.startswith("E ") else last      # pytest's error-line mark
            entry = {"where": report.nodeid, "error": last[:300], "text": text[-4000:]}
            if not any((e["where"], e["error"]) == (entry["where"], entry["error"]) for e in self.collection_errors):
                self.collection_errors.append(entry)     # xdist: each worker reports the same error

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids):
        self.expected.update(ids)          # xdist: what a worker collected (every worker, the same)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report):
        if report.when == "teardown":
            self.finished.add(report.nodeid)
        props = _props(report)
        case = props.get("case_id")
        if case is None:
            if report.failed:            # a test that is no conformance case: its failure stands
                self.other_failures = getattr(self, "other_failures", 0) + 1
            return
        # the case's facts live in report.json; JUnit (xunit2) has no place for properties on
        # a testcase, so they are taken off before pytest's JUnit writer sees the report
        report.user_properties = []
        entry = self.cases.setdefault(case, {
            "id": case, "nodeid": report.nodeid,
            "requirements": [r for r in str(props.get("requirements", "")).split(",") if r],
            "verdict": None, "message": "", "duration_s": 0.0,
        })
        entry["duration_s"] = round(entry["duration_s"] + getattr(report, "duration", 0.0), 6)
        for k, v in props.items():
            if k in CASE_MEMBERS:        # what the judge charged, and what it could not judge
                entry[k] = list(v or ())
            elif k not in ("case_id", "requirements", "verdict"):
                entry.setdefault("notes", {})[k] = v
        if props.get("verdict") == SUITE_ERROR:
            entry["verdict"] = SUITE_ERROR
            entry["message"] = f"{SUITE_ERROR_WORDS}\n{_failure_text(report)}"
            return
        if report.skipped:
            reason = _skip_reason(report)
            if reason.startswith(NOT_APPLICABLE_PREFIX):
                entry["verdict"] = "not-applicable"
                entry["message"] = reason[len(NOT_APPLICABLE_PREFIX):]
            else:
                entry["verdict"] = "skipped"
                entry["message"] = reason
        elif report.failed:
            entry["verdict"] = "error" if (props.get("verdict") == "error" or report.when != "call") else "fail"
            entry["message"] = _failure_text(report)
        elif report.when == "call" and entry["verdict"] is None:
            entry["verdict"] = "pass"

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session, exitstatus):
        self.session = session
        if self.config.getoption("collectonly"):
            return
        if session.exitstatus == pytest.ExitCode.USAGE_ERROR and not self.cases:
            return                   # nothing ran: the usage error is the whole answer
        path = self.config.getoption("conformance_report")
        report = self.build(session, int(exitstatus))
        if self.collection_errors:
            report["collection_errors"] = self.collection_errors
        if report["summary"].get(SUITE_ERROR) or self.collection_errors:
            session.exitstatus = EXIT_SUITE      # the suite's own bug: no verdict of the run stands
            report["exit_status"] = EXIT_SUITE
        elif session.exitstatus == pytest.ExitCode.TESTS_FAILED and self._warnings_only(report):
            session.exitstatus = pytest.ExitCode.OK     # SHOULD failures warn; --strict makes them fail the run
            report["exit_status"] = int(session.exitstatus)
        _junit_properties(self.config, report)
        gate_file = self.config.getoption("known_failures")
        if gate_file:
            report["gate"] = self._gate(session, report, gate_file)
        if path:
            from ptlrpc_conformance.harness.data.vectors import user_files
            try:
                inputs = user_files(self.config.getoption("conformance_vectors") or ())
            except Exception:        # an input that went away: nothing of it to keep
                inputs = []
            report["reproducers"] = write_reproducers(report, pathlib.Path(path).parent / "reproducers", inputs)
            write(report, path)
        self.report = report

    def _warnings_only(self, report: dict) -> bool:
        """Whether every failure of the run is a warning: failing cases charged only to SHOULD
        (or MAY) requirements, no case in error, no other test failed, the run complete, and no
        --strict (with which SHOULD failures fail the run too)."""
        if settings.of(self.config).strict or report.get("incomplete") \
                or getattr(self, "other_failures", 0):
            return False
        levels = {rid: ent.get("level") for rid, ent in report["requirements"].items()}
        failing = [c for c in report["cases"] if c["verdict"] not in ("pass", "not-applicable", "skipped")]
        return bool(failing) and all(
            c["verdict"] == "fail" and c["failed_requirements"]
            and all(levels.get(r) in ("SHOULD", "MAY") for r in c["failed_requirements"]) for c in failing)

    def _gate(self, session, report: dict, gate_file: str) -> dict:
        """Apply the known-failures file (rewritten first with --update-known-failures, then
        judged as written); the run's exit status becomes the gate's verdict.  What the gate
        says is printed in the verdict block (outputs/verdict.py)."""
        from ptlrpc_conformance.harness.outputs import gate
        mode = self.config.getoption("update_known_failures")
        try:
            entries = gate.load(gate_file, allow_empty=bool(mode)) if not mode or pathlib.Path(gate_file).exists() \
                else []
        except gate.GateError as e:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            report["exit_status"] = int(session.exitstatus)
            return {"ok": False, "problems": e.problems}
        seen = {"deselected": (report.get("selection") or {}).get("deselected") or {},
                "incomplete": bool(report.get("incomplete"))}
        result = gate.evaluate(entries, report["cases"], **seen)
        update = None
        if mode and report.get("incomplete"):
            update = {"file": str(gate_file), "mode": mode, "written": False,
                      "changes": ["not rewritten: the run is incomplete, and its missing cases would "
                                  "make entries look unmatched"]}
        elif mode:
            changes = gate.update(gate_file, entries, result, loosen=(mode == "loosen"))
            update = {"file": str(gate_file), "mode": mode, "written": True, "changes": changes}
            result = gate.evaluate(gate.load(gate_file, allow_empty=True), report["cases"], **seen)
        out = result.as_dict()
        if update:
            out["update"] = update
        if report.get("incomplete"):
            return dict(out, ok=False)
        if session.exitstatus == EXIT_SUITE:
            return out                   # the suite's bug outranks the gate's verdict
        if result.ok:
            if session.exitstatus == pytest.ExitCode.TESTS_FAILED:
                session.exitstatus = pytest.ExitCode.OK
        else:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        report["exit_status"] = int(session.exitstatus)
        return out

    def pytest_unconfigure(self, config):
        """The verdict block ends the run, after pytest's summary; the command line prints
        its own (with its exit status) when it started the run."""
        from ptlrpc_conformance.harness.runstate import CLI_RUN
        report, session = getattr(self, "report", None), getattr(self, "session", None)
        if report is None or session is None or config.stash.get(CLI_RUN, False):
            return
        if not (self.cases or config.getoption("conformance_report") or config.getoption("iut")):
            return                   # a run of other tests, the plugin unused
        if config.pluginmanager.get_plugin("terminalreporter") is None:
            return                   # -p no:terminal
        from ptlrpc_conformance.harness.outputs import verdict
        path = config.getoption("conformance_report")
        tw = config.get_terminal_writer()
        for line in verdict.lines(report, int(session.exitstatus), path):
            tw.line(line)

    # building --------------------------------------------------------------------------
    def build(self, session, exitstatus: int) -> dict:
        from ptlrpc_conformance.harness.data import registry
        from ptlrpc_conformance.harness.runstate import HELLO, IUT_START_FAILURE, SMOKE, stop_reason
        config = self.config
        run = settings.of(config)
        profile = run.profile
        cases = sorted(self.cases.values(), key=lambda c: c["id"])
        for c in cases:
            if c["verdict"] is None:     # its call never reported: the run was stopped during it
                c["verdict"] = INTERRUPTED
                c["message"] = c["message"] or "the run was stopped before this case finished"
        hello = config.stash.get(HELLO, None)
        modes = run_modes(profile, run.ignore_errno_class, hello)
        reqs = judged(requirement_verdicts(cases, registry.requirements()), cases, registry.requirements(),
                      profile, hello, modes)
        start_failure = config.stash.get(IUT_START_FAILURE, None)
        # a test that was selected but did not run to its end (whatever stopped the run, at
        # whatever moment) makes the run incomplete, as pytest's own interrupted status does
        unfinished = len(self.expected - self.finished)
        incomplete = bool(exitstatus == pytest.ExitCode.INTERRUPTED or session.shouldstop or session.shouldfail
                          or start_failure or unfinished)
        reason = None
        if start_failure:
            reason = f"the IUT could not start: {start_failure}"
        elif self.collection_errors:
            first = self.collection_errors[0]
            incomplete = True
            reason = (f"the suite's cases could not be collected ({first['where']}: {first['error']}; "
                      f"{len(self.collection_errors)} collection error(s)): {SUITE_ERROR_WORDS}")
        elif incomplete:
            reason = stop_reason(session, exitstatus) or \
                f"interrupted: {unfinished} of the {len(self.expected)} selected tests did not finish"
        return document(
            profile=profile, seed=run.seed,
            user_vectors=config.getoption("conformance_vectors") or (),
            reproduce=_reproduce_argv(config, profile),
            iut={"spec": config.getoption("iut") or "reference", "hello": config.stash.get(HELLO, None),
                 "start_failure": start_failure},
            smoke=config.stash.get(SMOKE, None), started=self.started_iso,
            duration_s=round(time.time() - self.started, 3), exit_status=exitstatus,
            incomplete=incomplete, incomplete_reason=reason, requirements=reqs, cases=cases,
            capabilities=(hello or {}).get("capabilities"), selection=self.selection(), modes=modes)

    def selection(self) -> dict:
        """report.json's `selection` (selection() below), with the cases this run left out."""
        get = self.config.getoption
        return selection(get("conformance_area"), get("conformance_case"), get("conformance_requirement"),
                         get("keyword"), get("markexpr"), get("conformance_level"),
                         self.config.stash.get(DESELECTED, {}))

    def write_start_failure(self, session, exitstatus: int) -> None:
        """report.json of a run whose IUT could not start (the preflight, before any case)."""
        self.session, self.report = session, dict(self.build(session, exitstatus), reproducers=[])
        path = self.config.getoption("conformance_report")
        if path:
            write(self.report, path)


SUITE_ERROR = "error (suite)"        # a case the suite's own code broke: charged to no requirement
SUITE_ERROR_WORDS = "this is a bug in ptlrpc-conformance, not a failure of the IUT: please report it"


def _junit_properties(config, report: dict) -> None:
    """The level, its scope and modes, and the suite's identity as properties of junit.xml's
    test suite (written after this hook), so a CI that reads only JUnit sees them too."""
    from _pytest.junitxml import xml_key
    from ptlrpc_conformance.harness.outputs.level import words
    xml = config.stash.get(xml_key, None)
    if xml is None:
        return
    lv = report["level"]
    xml.add_global_property("conformance_level", words(lv))
    xml.add_global_property("conformance_status", lv["status"])
    complete = lv.get("selection", {}).get("complete") or {}
    xml.add_global_property("conformance_complete", ",".join(f"{c}={'yes' if v else 'no'}"
                                                             for c, v in complete.items()) or "none")
    xml.add_global_property("conformance_modes", ", ".join(f"{m['mode']} (by {m['by']})"
                                                           for m in lv.get("modes") or ()) or "none")
    xml.add_global_property("conformance_profile", report["profile"])
    xml.add_global_property("suite_version", report["suite"]["version"])
    xml.add_global_property("suite_sha256", report["suite"]["sha256"])


# the judge's notes report.json lifts into a case: what it charged, what it produced evidence
# for, and what it lists but could not judge
CASE_MEMBERS = ("failed_requirements", "exercised", "not_exercised")


def requirement_verdicts(cases: list[dict], known: dict) -> dict[str, dict]:
    """report.json's `requirements`: per requirement id, its level and verdict, the cases that
    list it and the evidence (docs/report.md).  Each case gets its `failed_requirements`
    (a failure the judge did not charge is charged to every requirement the case lists) and
    `not_exercised`: for a case that records what it `exercised` (every suite case), the
    requirements it lists but produced no evidence for; else what its judge said it could not
    judge.

    A case is evidence for a requirement when it passed and exercised it (a case without an
    `exercised` member: when it lists it and did not name it not exercised) - it is then
    among the requirement's `passing` - or when it failed or hit trouble and was charged to it
    (`failing`; a case charged to a requirement it does not list exercises it too).
    `exercised_by` lists both.  The verdict: error if a case in error was charged to it, else
    fail if one failed on it, else pass if a passing case exercised it, else inconclusive if
    its applicable cases all failed on other requirements, else not-exercised if cases that
    list it passed without exercising it, else not-applicable."""
    reqs: dict[str, dict] = {}

    def entry(r: str) -> dict:
        return reqs.setdefault(r, {"level": known[r].level if r in known else None, "verdict": None,
                                   "cases": [], "passing": [], "failing": [], "exercised_by": []})
    for c in cases:
        if c["verdict"] in ("fail", "error"):
            c["failed_requirements"] = list(c.get("failed_requirements") or c["requirements"])
        else:
            c["failed_requirements"] = []
        if "exercised" in c:
            c["exercised"] = sorted(set(c["exercised"] or ()))
            c["not_exercised"] = sorted(set(c["requirements"]) - set(c["exercised"]) - set(c["failed_requirements"]))
        c.setdefault("not_exercised", [])
        for r in dict.fromkeys(c["requirements"] + c["failed_requirements"]):
            e = entry(r)
            e["cases"].append(c["id"])
            if r in c["failed_requirements"]:
                e["failing"].append(c["id"])
                e["exercised_by"].append(c["id"])
            elif c["verdict"] == "pass" and (r in c["exercised"] if "exercised" in c else r not in c["not_exercised"]):
                e["passing"].append(c["id"])
                e["exercised_by"].append(c["id"])
    verdicts = {c["id"]: c["verdict"] for c in cases}
    for r, e in reqs.items():
        applied = [cid for cid in e["cases"] if verdicts[cid] in ("fail", "error", INTERRUPTED)]
        if any(verdicts[cid] == "error" for cid in e["failing"]):
            e["verdict"] = "error"
        elif e["failing"]:
            e["verdict"] = "fail"
        elif e["passing"]:
            e["verdict"] = "pass"
        elif applied:
            e["verdict"] = "inconclusive"
        elif any(verdicts[cid] == "pass" for cid in e["cases"]):
            e["verdict"] = NOT_EXERCISED
        else:
            e["verdict"] = "not-applicable"
    return reqs


def selection(areas=(), cases=(), requirements=(), keyword=None, markers=None, level_filter=None,
              deselected=None) -> dict:
    """report.json's `selection`: the selection options of a run and the cases left out
    ({case id: [requirement ids]}: by those options or by pytest's -k, -m, --deselect)."""
    return {"areas": list(areas or ()), "cases": list(cases or ()), "requirements": list(requirements or ()),
            "keyword": keyword or None, "markers": markers or None, "level": level_filter or None,
            "deselected": dict(sorted((deselected or {}).items()))}


def run_modes(profile: str, ignore_errno_class: bool, hello: dict | None) -> list[dict]:
    """The relaxing modes a run's verdicts were given under (outputs/level.py): errno-agnostic
    judging, asked for by the option or by the IUT's hello, a live target reached read-only (the
    lnet-tcp adapter's hello), and a profile that judges less."""
    from ptlrpc_conformance.harness.data import registry
    modes = []
    if ignore_errno_class or (hello or {}).get("errno_agnostic") is True:
        by = "--ignore-errno-class" if ignore_errno_class else "the IUT's hello (errno_agnostic: true)"
        modes.append({"mode": "errno-agnostic", "by": by,
                      "why": "rejections judged by accept/reject only: the errno class of a rejection and the "
                             "order of checks that decides it were not judged"})
    live = (hello or {}).get("live")
    if isinstance(live, dict) and live.get("mode") == "readonly":
        modes.append({"mode": "read-only (live target)", "by": "--iut lnet-tcp:...&mode=readonly",
                      "why": f"a live OST ({live.get('target')} at {live.get('nid')}) was sent only requests that "
                             "change nothing (spec/target.yaml live.modes.readonly); every case that needed another "
                             "was not applicable"})
    try:
        relaxes = registry.profile(profile).relaxes
    except registry.RegistryError:
        relaxes = None
    if relaxes:
        modes.append({"mode": f"profile {profile}", "by": "--profile", "why": relaxes})
    return modes


def judged(reqs: dict[str, dict], cases: list[dict], known: dict, profile: str, hello: dict | None,
           modes) -> dict[str, dict]:
    """The requirement verdicts as the level reads them: every requirement of the profile and of
    a declared capability is present (`not-run` when no case ran it); a decoder rule of a
    direction the IUT does not decode that has no evidence is `not-applicable`; in an
    errno-agnostic run an errno-class requirement that passed, or whose passing cases did not
    exercise it only because the errno class went unjudged, is `pass (accept/reject only)`, and
    one that is all errno class (`errno_only`: HDR-ORDER-1) is `not judged (errno-agnostic)`; one
    whose only cases hit a bug of the suite (`error (suite)`) is `not-run`."""
    caps = (hello or {}).get("capabilities")
    directions = (hello or {}).get("decode_directions") or ("request", "reply")
    agnostic = any(m.get("mode") == "errno-agnostic" for m in modes or ())
    out = {rid: dict(e) for rid, e in reqs.items()}
    verdicts = {c["id"]: c["verdict"] for c in cases}
    if isinstance(caps, list):
        for rid, req in known.items():
            if rid not in out and req.in_profile(profile) and req.capability in caps:
                out[rid] = {"level": req.level, "verdict": NOT_RUN, "cases": [], "passing": [], "failing": []}
    for rid, e in out.items():
        listed = [verdicts.get(cid) for cid in e.get("cases") or ()]
        if e["verdict"] == "not-applicable" and SUITE_ERROR in listed:
            e["verdict"] = NOT_RUN
        req = known.get(rid)
        if req is None:
            continue
        if isinstance(caps, list) and req.capability is not None and req.capability not in caps \
                and e["verdict"] == NOT_EXERCISED:
            e["verdict"] = "not-applicable"          # listed by a case it applied to, of a capability not declared
            e["why"] = f"the IUT does not declare capability {req.capability}"
        elif not req.in_profile(profile) and e["verdict"] not in ("fail", "error"):
            e["verdict"] = "not-applicable"          # listed by a case, but no rule of this profile
            e["why"] = f"not a requirement of profile {profile}"
        elif req.direction and req.direction not in directions and e["verdict"] not in PASSING + ("fail", "error"):
            e["verdict"] = "not-applicable"
            e["why"] = f"the IUT decodes no {req.direction}s (decode_directions)"
        elif agnostic and req.errno_only and e["verdict"] not in ("fail", "error", "not-applicable"):
            e["verdict"] = NOT_JUDGED_AGNOSTIC
            e["why"] = "the run was errno-agnostic, and this requirement is all errno class or order of checks"
        elif agnostic and req.errno_class and (e["verdict"] == "pass" or (e["verdict"] == NOT_EXERCISED
                                                                           and "pass" in listed)):
            e["verdict"] = PASS_AGNOSTIC
    return out


INTERRUPTED = "interrupted"          # the verdict of a case the run was stopped in
SUMMARY_KEYS = ("pass", "fail", "error", SUITE_ERROR, "not-applicable", "skipped", INTERRUPTED)


def document(*, profile: str, seed, user_vectors, reproduce: list[str], iut: dict, smoke, started: str,
             duration_s: float, exit_status: int, incomplete: bool, incomplete_reason: str | None,
             requirements: dict, cases: list[dict], capabilities=None, selection: dict | None = None,
             modes=()) -> dict:
    """report.json's content: the members of docs/report.md, in their order.  The summary
    counts every case in exactly one bucket, so the buckets add up to `total`."""
    from ptlrpc_conformance.harness.data import registry
    summary = {k: 0 for k in SUMMARY_KEYS}
    for c in cases:
        summary[c["verdict"] if c["verdict"] in summary else "error"] += 1
    summary["total"] = len(cases)
    return {
        "format": FORMAT,
        "incomplete": bool(incomplete),
        "incomplete_reason": incomplete_reason if incomplete else None,
        "level": level(requirements, bool(incomplete), capabilities, selection, modes),
        "selection": (selection or {}),
        "modes": list(modes or ()),
        "sha256": fingerprints(user_vectors),
        "reproduce": reproduce,
        "smoke": smoke,
        "suite": suite_identity(),
        "profile": profile,
        "seed": seed,
        "lustre_version": registry.profile(profile).release,
        "iut": iut,
        "environment": {"python": platform.python_version(), "platform": platform.platform(),
                        "cwd": os.getcwd()},
        "command": [pathlib.Path(sys.argv[0]).name] + sys.argv[1:],
        "started": started,
        "duration_s": duration_s,
        "exit_status": exit_status,
        "summary": summary,
        "requirements": dict(sorted(requirements.items())),
        # renamed case ids -> the cases that replaced them (spec/case_aliases.yaml)
        "aliases": {old: list(new) for old, new in registry.case_aliases().items()},
        "cases": cases,
    }


INTERRUPTED_BEFORE_THE_CASES = "interrupted before the first case"


def start_failure_document(*, iut_spec: str, message: str | None, exit_status: int, profile: str, seed,
                           user_vectors, reproduce: list[str], selected: dict | None = None,
                           ignore_errno_class: bool = False, hello: dict | None = None, smoke=None) -> dict:
    """report.json of a certification that ran no case, incomplete: its IUT could not start
    (`iut.start_failure` says why, the command line's preflight), or, with no `message`, a
    Ctrl-C came before the first case (while the IUT or pytest started)."""
    reason = f"the IUT could not start: {message}" if message is not None else INTERRUPTED_BEFORE_THE_CASES
    doc = document(profile=profile, seed=seed, user_vectors=user_vectors, reproduce=reproduce,
                   iut={"spec": iut_spec, "hello": hello, "start_failure": message}, smoke=smoke,
                   started=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), duration_s=0.0,
                   exit_status=exit_status, incomplete=True, incomplete_reason=reason, requirements={}, cases=[],
                   capabilities=(hello or {}).get("capabilities"),
                   selection=selected if selected is not None else selection(),
                   modes=run_modes(profile, ignore_errno_class, hello))
    doc["reproducers"] = []
    return doc


def _reproduce_argv(config, profile: str) -> list[str]:
    """The certify command that repeats the run; `profile` is the one it followed (the
    registry's default when none was named).  The options come from the option table."""
    return reproduce_argv(config.getoption, {"profile": profile})


SUITE_FILES = (".py", ".yaml", ".json", ".j2", ".ini", ".xsd")     # what the package judges with


@functools.lru_cache(maxsize=1)
def suite_hash() -> str:
    """sha256 of the installed package's code and data (its .py, .yaml, .json, .j2, .ini and
    .xsd files, by path relative to the package and content, in path order): the verdict logic
    and the facts it reads.  Two installs give the same hash exactly when they judge alike."""
    root = pathlib.Path(__file__).resolve().parents[2]          # ptlrpc_conformance/
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in SUITE_FILES and p.is_file()
                       and "__pycache__" not in p.parts):
        h.update(path.relative_to(root).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def suite_identity() -> dict:
    """report.json's `suite`: the package's name, version and code-and-data hash."""
    return {"name": "ptlrpc-conformance", "version": __version__, "sha256": suite_hash()}


def fingerprints(user_vectors) -> dict:
    """sha256 of the data the verdicts rest on: vectors, requirements, profiles, facts, layouts."""
    from importlib import resources

    from ptlrpc_conformance.harness.data.vectors import bundled_files, user_files
    from ptlrpc_conformance.spec import layouts
    h = hashlib.sha256()
    for name, text in bundled_files():
        h.update(name.encode() + b"\0" + text.encode())
    for path in user_files(user_vectors):
        h.update(str(path).encode() + b"\0" + path.read_bytes())
    spec_dir = resources.files("ptlrpc_conformance.spec")
    out = {"vectors": h.hexdigest()}
    for name in ("requirements.yaml", "profiles.yaml", "facts.json"):
        out[name] = hashlib.sha256(spec_dir.joinpath(name).read_bytes()).hexdigest()
    out["layouts.json"] = layouts.sha256()
    return out


SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)   # libyaml's, much faster, when built


REPRODUCER_FORMATS = ("format: ptlrpc-conformance-vectors/", "format: " + SCENARIO_FORMAT.rsplit("/", 1)[0] + "/")


def _remove_old_reproducers(directory: pathlib.Path, keep: set[pathlib.Path]) -> None:
    """Remove the reproducers an earlier run wrote into `directory` (a .yaml file that starts
    with a vector or scenario format line and names a `repro.` id), and the directory when
    that leaves it empty.  Anything else there is not the suite's, and stays.  The run's own
    --vectors were read when its cases were collected, before this."""
    if not directory.is_dir():
        return
    for path in directory.glob("*.yaml"):
        if path.resolve() in keep or not path.is_file():
            continue
        try:
            head = path.read_text(encoding="utf-8")[:4000]
        except (OSError, UnicodeDecodeError):
            continue
        if head.startswith(REPRODUCER_FORMATS) and "id: repro." in head:
            path.unlink(missing_ok=True)
    try:
        directory.rmdir()           # only when empty
    except OSError:
        pass


EARLIER_PAGES = ("report.html", "junit.xml")     # what the command line writes beside report.json


def remove_earlier_pages(out: pathlib.Path, user_vectors=None) -> None:
    """Before a run writes report.json into `out`: the pages an earlier run left there
    (report.html, junit.xml, and with `user_vectors` its reproducers, except those the run
    reads), so that a run stopped between report.json and its pages (a second Ctrl-C) leaves
    none of an earlier run beside the new report.json."""
    for name in EARLIER_PAGES:
        (out / name).unlink(missing_ok=True)
    if user_vectors is not None:
        from ptlrpc_conformance.harness.data.vectors import user_files
        _remove_old_reproducers(out / "reproducers", {p.resolve() for p in user_files(user_vectors)})


def write_reproducers(report: dict, directory: pathlib.Path, inputs=()) -> list[str]:
    """Each failing case with a reproducer, as a vector file `--vectors DIR` reads back; the
    reproducers of an earlier run in `directory` are removed (one run, one report), except
    the run's own `inputs` (its --vectors files: its reproduce command names them)."""
    written: list[str] = []
    try:
        written = _write_reproducers(report, directory)
        return written
    finally:
        keep = {pathlib.Path(p).resolve() for p in list(written) + list(inputs)}
        _remove_old_reproducers(directory, keep)


def _write_reproducers(report: dict, directory: pathlib.Path) -> list[str]:
    written = []
    for c in report["cases"]:
        rep = (c.get("notes") or {}).get("reproducer")
        scenario = (c.get("notes") or {}).get("scenario")
        if c["verdict"] not in ("fail", "error") or not (rep or scenario):
            continue
        directory.mkdir(parents=True, exist_ok=True)
        if scenario:           # a target case: the shrunk exchanges, as a scenario vector
            doc = {"format": SCENARIO_FORMAT,
                   "scenarios": [dict(scenario, id=f"repro.{c['id']}".replace("..", "."))]}
            path = directory / f"{c['id']}.yaml"
            path.write_text(yaml.dump(doc, Dumper=SAFE_DUMPER, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")
            written.append(str(path))
            continue
        vector = dict(rep, id=f"repro.{c['id']}".replace("..", "."))
        vector["title"] = f"reproducer of {c['id']}: {rep.get('title', '')}"[:200]
        vector["note"] = f"written by ptlrpc-conformance for a failure ({(c.get('notes') or {}).get('signature', '')})"
        doc = {"format": "ptlrpc-conformance-vectors/1", "area": "repro", "vectors": [vector]}
        path = directory / f"{c['id']}.yaml"
        path.write_text(yaml.dump(doc, Dumper=SAFE_DUMPER, sort_keys=False, allow_unicode=True, width=120), encoding="utf-8")
        written.append(str(path))
    return written


def _skip_reason(report) -> str:
    lr = report.longrepr
    if isinstance(lr, tuple) and len(lr) == 3:
        text = str(lr[2])
    else:
        text = str(lr)
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text


MESSAGE_HEAD, MESSAGE_TAIL = 12000, 8000      # what report.json keeps of a long failure message
XDIST_WORKER_LINE = re.compile(r"\A\[gw\d+\] [^\n]*\n")


def _failure_text(report) -> str:
    """A failure's message: whole, or when long its head (the requirement, the problems) and its
    tail (the end of the transcript), with what was left out said between them."""
    text = getattr(report, "longreprtext", "") or str(report.longrepr)
    # an xdist worker's report starts with the worker's name and interpreter ("[gw0] linux --
    # Python 3.11.7 ..."): not part of the failure, and a serial run has no such line
    text = XDIST_WORKER_LINE.sub("", text, count=1)
    if len(text) <= MESSAGE_HEAD + MESSAGE_TAIL:
        return text
    left_out = len(text) - MESSAGE_HEAD - MESSAGE_TAIL
    return f"{text[:MESSAGE_HEAD]}\n[... {left_out} characters left out ...]\n{text[-MESSAGE_TAIL:]}"


def write(report: dict, path: str | os.PathLike) -> None:
    write_atomically(path, json.dumps(report, indent=1) + "\n")
