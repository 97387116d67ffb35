"""`certify --profile all[-MODIFIER...]`: the release matrix.  The newest release's profile
runs every selected case; each other release re-runs only the cases it judges differently
(harness/outputs/matrix.py), and the matrix's report says to which releases the
implementation is conformant."""
from __future__ import annotations

import json
import pathlib

from ptlrpc_conformance.cli.session import conclude_run, run_session, write_html
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.options import EXIT_FAIL, EXIT_IUT, EXIT_OK, EXIT_SUITE, EXIT_USAGE


MATRIX = "all"      # --profile all[-MODIFIER...]: every release's profile (with those modifiers)


def matrix_profiles(name: str | None) -> list[str] | None:
    """The profiles of a release matrix `--profile all[-literal][-reconstruct]`, oldest
    release first; None for a single profile."""
    if name != MATRIX and not (name or "").startswith(MATRIX + "-"):
        return None
    mods = name.split("-")[1:]
    profiles = ["-".join([base, *mods]) for base in registry.release_profiles()]
    for p in profiles:
        registry.profile(p)                 # a modifier unknown or out of order: a usage error
    return profiles


def certify_matrix(args, profiles: list[str], hello, smoke) -> int:
    """--profile all: the newest release's profile runs every selected case; each other
    release runs only the cases it judges differently (harness/outputs/matrix.py).  OUT holds
    a folder per profile (report.json, report.html, junit.xml) and the matrix's report.json
    and report.html."""
    import copy
    from ptlrpc_conformance.harness.outputs import matrix, report as report_module
    out = pathlib.Path(args.out)
    base = profiles[-1]
    print(f"ptlrpc-conformance: release matrix: {', '.join(profiles)}; every case runs under {base}, "
          "and again under another release only if that release judges it differently", flush=True)
    prints = {p: matrix.fingerprints(p, args.vectors) for p in profiles}
    # the matrix's own report.json comes after every sub-run: what an earlier run left beside it
    # goes first, so that a run stopped before its report.html leaves none of them there
    report_module.remove_earlier_pages(out)
    statuses = {}
    base_args = copy.copy(args)
    base_args.profile = base
    statuses[base] = run_session(base_args, out / base, hello, smoke, conclude=False)
    base_path = out / base / "report.json"
    try:
        base_report = json.loads(base_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return conclude_run(None, statuses[base])
    _conclude_quietly(base_path, statuses[base])
    reports = {base: json.loads(base_path.read_text(encoding="utf-8"))}
    ran = {c["id"] for c in base_report["cases"]}
    selected = bool(args.area or args.case or args.requirement or args.keyword or args.level)
    for p in profiles[:-1]:
        differ = matrix.to_rerun(prints[p], prints[base], ran, selected)
        own = None
        if differ:
            print(f"ptlrpc-conformance: {p}: {len(differ)} case(s) judged differently from {base}", flush=True)
            a = copy.copy(args)
            a.profile, a.case, a.area, a.requirement, a.keyword, a.level = p, differ, [], [], None, None
            a.known_failures = a.update_known_failures = None
            statuses[p] = run_session(a, out / p / "run", hello, smoke, conclude=False)
            try:
                own = json.loads((out / p / "run" / "report.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                own = None
        else:
            print(f"ptlrpc-conformance: {p}: judges every case as {base} does", flush=True)
        composed = matrix.compose(base_report, own, p, [c for c in prints[p] if c in ran or c in differ])
        report_module.write(composed, out / p / "report.json")
        _conclude_quietly(out / p / "report.json", 0)
        reports[p] = json.loads((out / p / "report.json").read_text(encoding="utf-8"))
    status = _matrix_status(statuses, reports)
    doc = matrix.document(reports, base, status, args.profile)
    report_module.write(doc, out / "report.json")
    matrix.write_matrix(doc, out / "report.html")
    print("\n".join(matrix.verdict_lines(doc, out / "report.json")), flush=True)
    return status


def _conclude_quietly(report_path: pathlib.Path, status: int) -> None:
    """A matrix member's report: its exit status and its report.html, no verdict block."""
    from ptlrpc_conformance.harness.outputs import report as report_module
    report = json.loads(report_path.read_text(encoding="utf-8"))
    report["exit_status"] = status
    report_module.write(report, report_path)
    write_html(report_path)


def _matrix_status(statuses: dict[str, int], reports: dict[str, dict]) -> int:
    """A matrix's exit status: a suite bug (6) or an IUT that could not start (3) in any
    session first; then 0 when the implementation is conformant to at least one release's
    profile, 1 otherwise."""
    for special in (EXIT_SUITE, EXIT_IUT, EXIT_USAGE):
        if special in statuses.values():
            return special
    from ptlrpc_conformance.harness.outputs.matrix import CONFORMANT
    if any((r.get("level") or {}).get("status") in CONFORMANT and not r.get("incomplete") for r in reports.values()):
        return EXIT_OK
    return EXIT_FAIL
