"""report.json: what ran, against what, and each case's verdict (docs/report.md).

Verdicts: pass, fail, not-applicable (the IUT lacks a capability; never a pass, never a
failure) and error (harness or protocol trouble: the IUT crashed, hung or garbled; kept
apart from conformance failures).  Cases are keyed by their declared case ids.
"""
from __future__ import annotations

import datetime as _dt
import json
import os
import pathlib
import platform
import sys
import time

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
    def pytest_runtest_logreport(self, report):
        props = _props(report)
        case = props.get("case_id")
        if case is None:
            return
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

    def pytest_sessionfinish(self, session, exitstatus):
        path = self.config.getoption("conformance_report")
        if path:
            write(self.build(session, int(exitstatus)), path)

    # building --------------------------------------------------------------------------
    def build(self, session, exitstatus: int) -> dict:
        from . import registry
        from ..plugin import HELLO, IUT_START_FAILURE
        config = self.config
        profile = config.getoption("profile") or registry.default_profile()
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
        return {
            "format": FORMAT,
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
