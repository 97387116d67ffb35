"""report.json: what ran, against what, and each case's verdict (docs/report.md).

Verdicts: pass, fail, not-applicable (the IUT lacks a capability; never a pass, never a
failure) and error (harness or protocol trouble: the IUT crashed, hung or garbled; kept
apart from conformance failures).  Cases are keyed by their declared case ids.
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

from .. import __version__
from ..spec import LUSTRE_VERSION

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
            if k not in ("case_id", "requirements", "verdict"):
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
        if self.config.getoption("collectonly"):
            return
        path = self.config.getoption("conformance_report")
        report = self.build(session, int(exitstatus))
        gate_file = self.config.getoption("known_failures")
        if gate_file:
            report["gate"] = self._gate(session, report, gate_file)
        if path:
            report["reproducers"] = write_reproducers(report, pathlib.Path(path).parent / "reproducers")
            write(report, path)

    def _gate(self, session, report: dict, gate_file: str) -> dict:
        """Apply the known-failures file; the run's exit status becomes the gate's verdict."""
        from . import gate
        tw = self.config.get_terminal_writer()
        try:
            entries = gate.load(gate_file)
        except gate.GateError as e:
            tw.line("known-failures file has problems:\n  " + "\n  ".join(e.problems), red=True)
            session.exitstatus = pytest.ExitCode.USAGE_ERROR
            return {"ok": False, "problems": e.problems}
        result = gate.evaluate(entries, report["cases"])
        mode = self.config.getoption("update_known_failures")
        if mode:
            gate.update(gate_file, entries, result, loosen=(mode == "loosen"))
            tw.line(f"known-failures file {gate_file} rewritten ({mode})")
        if report.get("incomplete"):
            return dict(result.as_dict(), ok=False)
        if result.ok:
            tw.line(f"regression gate: passed ({len(result.known)} known failure(s), no new ones)", green=True)
            if session.exitstatus == pytest.ExitCode.TESTS_FAILED:
                session.exitstatus = pytest.ExitCode.OK
        else:
            tw.line("regression gate: FAILED\n  " + "\n  ".join(result.problems), red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED
        report["exit_status"] = int(session.exitstatus)
        return result.as_dict()

    # building --------------------------------------------------------------------------
    def build(self, session, exitstatus: int) -> dict:
        from . import registry
        from ..plugin import HELLO, IUT_START_FAILURE, SMOKE, stop_reason
        config = self.config
        profile = config.getoption("conformance_profile") or registry.default_profile()
        cases = sorted(self.cases.values(), key=lambda c: c["id"])
        summary = {k: 0 for k in ("pass", "fail", "error", "not-applicable", "skipped")}
        for c in cases:
            if c["verdict"] in summary:
                summary[c["verdict"]] += 1
        summary["total"] = len(cases)
        reqs: dict[str, dict] = {}
        known = registry.requirements()
        for c in cases:
            for r in c["requirements"]:
                entry = reqs.setdefault(r, {"level": known[r].level if r in known else None, "cases": [],
                                            "verdict": None})
                entry["cases"].append(c["id"])
        rank = {"error": 4, "fail": 3, "pass": 2, "not-applicable": 1, "skipped": 0, None: 0}
        for r, entry in reqs.items():
            verdicts = [self.cases[cid]["verdict"] for cid in entry["cases"]]
            worst = max(verdicts, key=lambda v: rank.get(v, 0))
            if worst == "pass" or (worst in ("not-applicable", "skipped") and "pass" in verdicts):
                worst = "pass"
            entry["verdict"] = worst
        incomplete = exitstatus == pytest.ExitCode.INTERRUPTED or session.shouldstop or session.shouldfail
        return {
            "format": FORMAT,
            "incomplete": bool(incomplete),
            "incomplete_reason": stop_reason(session, exitstatus) if incomplete else None,
            "level": level(reqs, bool(incomplete)),
            "sha256": fingerprints(config.getoption("conformance_vectors") or ()),
            "reproduce": _reproduce_argv(config),
            "smoke": config.stash.get(SMOKE, None),
            "suite": {"name": "ptlrpc-conformance", "version": __version__},
            "profile": profile,
            "seed": config.getoption("conformance_seed"),
            "lustre_version": LUSTRE_VERSION,
            "iut": {"spec": config.getoption("iut") or "reference",
                    "hello": config.stash.get(HELLO, None),
                    "start_failure": config.stash.get(IUT_START_FAILURE, None)},
            "environment": {"python": platform.python_version(), "platform": platform.platform(),
                            "cwd": os.getcwd()},
            "command": [pathlib.Path(sys.argv[0]).name] + sys.argv[1:],
            "started": self.started_iso,
            "duration_s": round(time.time() - self.started, 3),
            "exit_status": exitstatus,
            "summary": summary,
            "requirements": dict(sorted(reqs.items())),
            "cases": cases,
        }


def _reproduce_argv(config) -> list[str]:
    argv = ["ptlrpc-conformance", "certify", "--iut", config.getoption("iut") or "reference",
            "--profile", config.getoption("conformance_profile") or "lustre-2.17.57",
            "--seed", str(config.getoption("conformance_seed")),
            "--examples", str(config.getoption("conformance_examples"))]
    for v in config.getoption("conformance_vectors") or ():
        argv += ["--vectors", os.path.abspath(v)]
    if config.getoption("ignore_errno_class"):
        argv.append("--ignore-errno-class")
    argv += ["--iut-timeout", str(config.getoption("iut_timeout"))]
    for opt in ("requirement", "area", "case"):
        for v in config.getoption(f"conformance_{opt}") or ():
            argv += [f"--{opt}", v]
    if config.getoption("conformance_level"):
        argv += ["--level", config.getoption("conformance_level")]
    if config.option.keyword:
        argv += ["-k", config.option.keyword]
    return argv


def level(reqs: dict, incomplete: bool = False) -> dict:
    """conformant: every applicable MUST passes; fully conformant: every SHOULD too."""
    failing = {lvl: sorted(r for r, e in reqs.items() if e["level"] == lvl and e["verdict"] in ("fail", "error"))
               for lvl in ("MUST", "SHOULD")}
    not_applicable = sorted(r for r, e in reqs.items() if e["verdict"] == "not-applicable")
    name = ("not conformant" if failing["MUST"] else "conformant" if failing["SHOULD"] else "fully conformant")
    if incomplete:
        name = "incomplete"       # an interrupted run certifies nothing
    return {"name": name, "failing_must": failing["MUST"], "failing_should": failing["SHOULD"],
            "not_applicable": not_applicable}


def fingerprints(user_vectors) -> dict:
    """sha256 of the data the verdicts rest on: vectors, requirements, profiles, facts, layouts."""
    from importlib import resources

    from .vectors import bundled_files, user_files
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
            doc = {"format": "ptlrpc-conformance-scenarios/1",
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


def _failure_text(report) -> str:
    text = getattr(report, "longreprtext", "") or str(report.longrepr)
    return text[-20000:]


def write(report: dict, path: str | os.PathLike) -> None:
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    tmp.replace(p)
