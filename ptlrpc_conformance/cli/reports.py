"""The commands about reports: `verify-report` (re-run the command a report records, compare
the verdicts) and `certification-doc` (a published certification document from a report)."""
from __future__ import annotations

import json
import os
import pathlib
import shlex
import subprocess
import sys
import tempfile

from ptlrpc_conformance.harness.options import EXIT_FAIL, EXIT_OK, EXIT_USAGE, Parser


def cmd_verify_report(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance verify-report",
                description="Re-run the command a report records and say whether the verdicts still agree.")
    p.add_argument("report", help="a report.json")
    args = p.parse_args(argv)
    try:
        report = json.loads(pathlib.Path(args.report).read_text())
        command = report["reproduce"]
        before = _verdicts(report, pathlib.Path(args.report).parent)
        if not (isinstance(command, list) and command and all(isinstance(a, str) for a in command)):
            raise ValueError("'reproduce' is not a list of arguments")
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"ptlrpc-conformance verify-report: {args.report}: not a report with a reproducible command ({e})",
              file=sys.stderr)
        return EXIT_USAGE
    # the command runs where the run ran: an `exec:./testee` or a relative path means what it meant then
    cwd = (report.get("environment") or {}).get("cwd") or None
    if cwd is not None and not pathlib.Path(cwd).is_dir():
        print(f"ptlrpc-conformance verify-report: {args.report}: the run's working directory {cwd} "
              "(environment.cwd) does not exist here", file=sys.stderr)
        return EXIT_USAGE
    from ptlrpc_conformance.harness.outputs.report import suite_identity
    recorded, installed = report.get("suite") if isinstance(report.get("suite"), dict) else {}, suite_identity()
    if recorded.get("sha256") != installed["sha256"]:
        print(f"verify-report: the installed suite differs from the one that wrote the report "
              f"(report: {recorded.get('version', '?')}, code and data {str(recorded.get('sha256') or 'not recorded')[:16]}; "
              f"installed: {installed['version']}, {installed['sha256'][:16]}): verdicts that differ below may "
              "come from the suite's change, not the IUT's", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        argv2 = [sys.executable, "-m", "ptlrpc_conformance.cli"] + command[1:] + ["--out", tmp, "-q"]
        print(f"verify-report: re-running in {cwd or os.getcwd()}: {shlex.join(command)}", flush=True)
        proc = subprocess.run(argv2, capture_output=True, text=True, cwd=cwd)
        try:
            again = json.loads((pathlib.Path(tmp) / "report.json").read_text())
            after = _verdicts(again, pathlib.Path(tmp))
        except (OSError, ValueError, KeyError, TypeError):
            print(f"verify-report: the re-run wrote no report (exit {proc.returncode}):\n{proc.stderr[-2000:]}",
                  file=sys.stderr)
            return EXIT_FAIL
    diffs = [f"  {cid}: report says {before.get(cid, '(absent)')}, re-run says {after.get(cid, '(absent)')}"
             for cid in sorted(set(before) | set(after)) if before.get(cid) != after.get(cid)]
    if report.get("iut", {}).get("hello") != again.get("iut", {}).get("hello"):
        diffs.append(f"  the IUT's hello differs: {report.get('iut', {}).get('hello')} vs {again.get('iut', {}).get('hello')}")
    if diffs:
        print(f"verify-report: {len(diffs)} verdict(s) differ:\n" + "\n".join(diffs[:200]))
        return EXIT_FAIL
    print(f"verify-report: all {len(before)} verdicts agree")
    return EXIT_OK


def _verdicts(report: dict, folder: pathlib.Path) -> dict[str, str]:
    """What verify-report compares: case id -> verdict; for a release matrix (whose report
    holds no case), each release's verdicts (from its report beside the matrix's), keyed
    "PROFILE: CASE", and what the matrix concluded from them."""
    from ptlrpc_conformance.harness.outputs.matrix import FORMAT as MATRIX
    if report.get("format") != MATRIX:
        return {c["id"]: c["verdict"] for c in report["cases"]}
    out = {"conformant to": ", ".join(report.get("conformant_to") or ()),
           "no MUST failed among the cases run under": ", ".join(report.get("no_failing_must_in") or ())}
    out.update({f"difference {d['id']} follows": d["follows"] for d in report["differences"]})
    for row in report["releases"]:
        try:
            member = json.loads((folder / row["report"]).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            raise ValueError(f"the report of {row['profile']} ({folder / row['report']}) cannot be read") from None
        out.update({f"{row['profile']}: {c['id']}": c["verdict"] for c in member["cases"]})
    return out


def cmd_certification_doc(argv: list[str]) -> int:
    """A Markdown certification document from a report.json (harness/outputs/certdoc.py)."""
    from ptlrpc_conformance.harness.outputs import certdoc  # with report.py and pytest: +155 ms
    return certdoc.main(argv)
