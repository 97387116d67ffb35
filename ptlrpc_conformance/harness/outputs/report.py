"""report.json: what ran, against what, and each case's verdict (docs/report.md).

Verdicts: pass, fail, not-applicable (the IUT lacks a capability; never a pass, never a
failure), error (harness or protocol trouble: the IUT crashed, hung or garbled; kept
apart from conformance failures) and interrupted (the run was stopped while the case ran).
Cases are keyed by their declared case ids.
"""
from __future__ import annotations

import datetime as _dt
import hashlib
import json
import os
import pathlib
import platform
import sys
import time

import pytest
import yaml

from ptlrpc_conformance import __version__
from ptlrpc_conformance.harness.data.vectors import SCENARIO_FORMAT
from ptlrpc_conformance.harness.options import reproduce_argv
from ptlrpc_conformance.harness.outputs import write_atomically
from ptlrpc_conformance.harness.verdicts.level import level
from ptlrpc_conformance.spec import LUSTRE_VERSION

FORMAT = "ptlrpc-conformance-report/1"
NOT_APPLICABLE_PREFIX = "not applicable: "


def _props(report) -> dict:
    return {k: v for k, v in getattr(report, "user_properties", ())}


class Collector:
    """Registered on the controller; sees every case's report, xdist workers' included."""

    def __init__(self, config):
        self.config = config
        self.cases: dict[str, dict] = {}
        self.started = time.time()
        self.started_iso = _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")

    # pytest hooks ----------------------------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report):
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
        if session.exitstatus == pytest.ExitCode.TESTS_FAILED and self._warnings_only(report):
            session.exitstatus = pytest.ExitCode.OK     # SHOULD failures warn; --strict makes them fail the run
            report["exit_status"] = int(session.exitstatus)
        gate_file = self.config.getoption("known_failures")
        if gate_file:
            report["gate"] = self._gate(session, report, gate_file)
        if path:
            report["reproducers"] = write_reproducers(report, pathlib.Path(path).parent / "reproducers")
            write(report, path)
        self.report = report

    def _warnings_only(self, report: dict) -> bool:
        """Whether every failure of the run is a warning: failing cases charged only to SHOULD
        (or MAY) requirements, no case in error, no other test failed, the run complete, and no
        --strict (with which SHOULD failures fail the run too)."""
        if self.config.getoption("conformance_strict") or report.get("incomplete") \
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
            entries = gate.load(gate_file) if not mode or pathlib.Path(gate_file).exists() else []
        except gate.GateError as e:
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            report["exit_status"] = int(session.exitstatus)
            return {"ok": False, "problems": e.problems}
        result = gate.evaluate(entries, report["cases"])
        update = None
        if mode and report.get("incomplete"):
            update = {"file": str(gate_file), "mode": mode, "written": False,
                      "changes": ["not rewritten: the run is incomplete, and its missing cases would "
                                  "make entries look unmatched"]}
        elif mode:
            changes = gate.update(gate_file, entries, result, loosen=(mode == "loosen"))
            update = {"file": str(gate_file), "mode": mode, "written": True, "changes": changes}
            result = gate.evaluate(gate.load(gate_file), report["cases"])
        out = result.as_dict()
        if update:
            out["update"] = update
        if report.get("incomplete"):
            return dict(out, ok=False)
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
        profile = config.getoption("conformance_profile") or registry.default_profile()
        cases = sorted(self.cases.values(), key=lambda c: c["id"])
        for c in cases:
            if c["verdict"] is None:     # its call never reported: the run was stopped during it
                c["verdict"] = INTERRUPTED
                c["message"] = c["message"] or "the run was stopped before this case finished"
        reqs = requirement_verdicts(cases, registry.requirements())
        start_failure = config.stash.get(IUT_START_FAILURE, None)
        incomplete = bool(exitstatus == pytest.ExitCode.INTERRUPTED or session.shouldstop or session.shouldfail
                          or start_failure)
        reason = None
        if start_failure:
            reason = f"the IUT could not start: {start_failure}"
        elif incomplete:
            reason = stop_reason(session, exitstatus)
        return document(
            profile=profile, seed=config.getoption("conformance_seed"),
            user_vectors=config.getoption("conformance_vectors") or (),
            reproduce=_reproduce_argv(config, profile),
            iut={"spec": config.getoption("iut") or "reference", "hello": config.stash.get(HELLO, None),
                 "start_failure": start_failure},
            smoke=config.stash.get(SMOKE, None), started=self.started_iso,
            duration_s=round(time.time() - self.started, 3), exit_status=exitstatus,
            incomplete=incomplete, incomplete_reason=reason, requirements=reqs, cases=cases,
            capabilities=(config.stash.get(HELLO, None) or {}).get("capabilities"))

    def write_start_failure(self, session, exitstatus: int) -> None:
        """report.json of a run whose IUT could not start (the preflight, before any case)."""
        self.session, self.report = session, dict(self.build(session, exitstatus), reproducers=[])
        path = self.config.getoption("conformance_report")
        if path:
            write(self.report, path)


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


NOT_EXERCISED = "not-exercised"      # cases that list a requirement passed, none with evidence on it


INTERRUPTED = "interrupted"          # the verdict of a case the run was stopped in
SUMMARY_KEYS = ("pass", "fail", "error", "not-applicable", "skipped", INTERRUPTED)


def document(*, profile: str, seed, user_vectors, reproduce: list[str], iut: dict, smoke, started: str,
             duration_s: float, exit_status: int, incomplete: bool, incomplete_reason: str | None,
             requirements: dict, cases: list[dict], capabilities=None) -> dict:
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
        "level": level(requirements, bool(incomplete), capabilities),
        "sha256": fingerprints(user_vectors),
        "reproduce": reproduce,
        "smoke": smoke,
        "suite": {"name": "ptlrpc-conformance", "version": __version__},
        "profile": profile,
        "seed": seed,
        "lustre_version": LUSTRE_VERSION,
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


def start_failure_document(*, iut_spec: str, message: str, exit_status: int, profile: str, seed,
                           user_vectors, reproduce: list[str]) -> dict:
    """report.json of a certification whose IUT could not start: no case ran, the run is
    incomplete and `iut.start_failure` says why (the command line's preflight)."""
    doc = document(profile=profile, seed=seed, user_vectors=user_vectors, reproduce=reproduce,
                   iut={"spec": iut_spec, "hello": None, "start_failure": message}, smoke=None,
                   started=_dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), duration_s=0.0,
                   exit_status=exit_status, incomplete=True,
                   incomplete_reason=f"the IUT could not start: {message}", requirements={}, cases=[])
    doc["reproducers"] = []
    return doc


def _reproduce_argv(config, profile: str) -> list[str]:
    """The certify command that repeats the run; `profile` is the one it followed (the
    registry's default when none was named).  The options come from the option table."""
    return reproduce_argv(config.getoption, {"profile": profile})


def fingerprints(user_vectors) -> dict:
    """sha256 of the data the verdicts rest on: vectors, requirements, profiles, facts, layouts."""
    from importlib import resources

    from ptlrpc_conformance.harness.data.vectors import bundled_files, user_files
    h = hashlib.sha256()
    for name, text in bundled_files():
        h.update(name.encode() + b"\0" + text.encode())
    for path in user_files(user_vectors):
        h.update(str(path).encode() + b"\0" + path.read_bytes())
    spec_dir = resources.files("ptlrpc_conformance.spec")
    out = {"vectors": h.hexdigest()}
    for name in ("requirements.yaml", "profiles.yaml", "facts.json", "layouts.json"):
        out[name] = hashlib.sha256(spec_dir.joinpath(name).read_bytes()).hexdigest()
    return out


SAFE_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)   # libyaml's, much faster, when built


def write_reproducers(report: dict, directory: pathlib.Path) -> list[str]:
    """Each failing case with a reproducer, as a vector file `--vectors DIR` reads back."""
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


def _failure_text(report) -> str:
    """A failure's message: whole, or when long its head (the requirement, the problems) and its
    tail (the end of the transcript), with what was left out said between them."""
    text = getattr(report, "longreprtext", "") or str(report.longrepr)
    if len(text) <= MESSAGE_HEAD + MESSAGE_TAIL:
        return text
    left_out = len(text) - MESSAGE_HEAD - MESSAGE_TAIL
    return f"{text[:MESSAGE_HEAD]}\n[... {left_out} characters left out ...]\n{text[-MESSAGE_TAIL:]}"


def write(report: dict, path: str | os.PathLike) -> None:
    write_atomically(path, json.dumps(report, indent=1) + "\n")
