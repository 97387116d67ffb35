"""ptlrpc-conformance: the command line.

  ptlrpc-conformance [certify] [--iut SPEC] [--out DIR] [-v | -q] [options] [-- PYTEST-ARGS]
  ptlrpc-conformance run CASE-ID [--iut SPEC] [--io-log FILE]
  ptlrpc-conformance list [--requirement ID] [--area AREA] [--level MUST]
  ptlrpc-conformance verify-report DIR/report.json
  ptlrpc-conformance decode HEX [--direction request|reply] [--iut SPEC]
  ptlrpc-conformance lint-vectors [PATH ...]
  ptlrpc-conformance requirements
  ptlrpc-conformance export --format json [--out FILE]
  ptlrpc-conformance check-trace FILE [--json]      (JSON Lines or pcap)
  ptlrpc-conformance record-trace [--iut SPEC] [--scenario ID] [--out FILE]
  ptlrpc-conformance bench [--seconds S] [--quick] [--iut SPEC ...] [--json FILE]
  ptlrpc-conformance certification-doc DIR/report.json [--notes FILE] [--out FILE]
  ptlrpc-conformance mutants [--jobs N] [--mutant ID ...] [--json FILE] [--markdown FILE]

Exit status: 0 every applicable MUST case passed (SHOULD failures are warnings unless
--strict); 1 a MUST case failed (with --strict a SHOULD case too), the IUT crashed, hung or
garbled mid-run, or the run was stopped early (--max-fail, --time-budget, Ctrl-C; the report
is marked incomplete); 2 usage or input error; 3 the IUT could not start, or its hello was
missing, invalid or not protocol 1; 5 (certify) no MUST case of the selection applied to the
IUT: level "not certified"; 6 a case hit a bug in ptlrpc-conformance itself.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile
from importlib import resources

from ptlrpc_conformance import __version__
from ptlrpc_conformance.harness import options
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.options import (
    EXIT_FAIL, EXIT_IUT, EXIT_NOT_CERTIFIED, EXIT_OK, EXIT_SUITE, EXIT_USAGE, Parser)
from ptlrpc_conformance.harness.ost import trace
from ptlrpc_conformance.harness.verdicts import hexdump
from ptlrpc_conformance.harness.verdicts import charges
from ptlrpc_conformance.harness.transport.adapter import IUTStartError, NotApplicable, UsageError
from ptlrpc_conformance.harness.transport.loader import load_adapter, smoke_check

# Imports left inside functions are those of one command that would slow every other one:
# each comment gives the CPU time the import adds to `ptlrpc-conformance decode 00` (about
# 250 ms in all), median of 15 runs on the project's 2-core machine.

SUBCOMMANDS = ("certify", "run", "list", "verify-report", "decode", "lint-vectors", "requirements", "export",
               "check-trace", "record-trace", "bench", "certification-doc", "mutants")


def _certify_parser() -> argparse.ArgumentParser:
    p = Parser(prog="ptlrpc-conformance certify",
                description="Run the conformance suite against an implementation and write report.json.")
    options.add_arguments(p, options.certify_options())
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    return p


def _iut_preflight(spec: str, timeout: float):
    """(None, the started adapter), or (exit status, None) after a usage error, or (EXIT_IUT,
    why) when the IUT could not start; the problem is printed."""
    try:
        adapter = load_adapter(spec, timeout=timeout)
    except UsageError as e:
        print(f"ptlrpc-conformance: {e}", file=sys.stderr)
        return EXIT_USAGE, None
    except IUTStartError as e:
        return _could_not_start(e)
    try:
        adapter.start()
    except IUTStartError as e:
        return _could_not_start(e)
    return None, adapter


def _could_not_start(e: Exception) -> tuple[int, str]:
    """(EXIT_IUT, why): the preflight's answer when the IUT could not start."""
    print(f"ptlrpc-conformance: the IUT could not start: {e}", file=sys.stderr)
    return EXIT_IUT, str(e)


class _Observer:
    """The command line's plugin in its pytest run: sees the session's config so the exit
    status can tell an IUT that failed to start, tells the report collector that the command
    line prints the verdict block, shows the suites' files relative to the package, and (by
    default) lists each failing case on one line."""

    def __init__(self, failing_lines: bool = False, preflight: tuple[dict, list] | None = None):
        self.start_failure = None
        self.failing_lines = failing_lines
        self.preflight = preflight          # (hello, smoke checks): the plugin does not start the IUT again

    def pytest_configure(self, config):
        from ptlrpc_conformance.harness.runstate import CLI_RUN, HELLO, SMOKE    # imports pytest: +170 ms
        self.config = config
        config.stash[CLI_RUN] = True
        if self.preflight is not None:
            config.stash[HELLO], config.stash[SMOKE] = self.preflight

    def pytest_sessionstart(self, session):
        reporter = session.config.pluginmanager.getplugin("terminalreporter")
        if reporter is not None:    # "ptlrpc_conformance/suites/test_framing.py ....", not a venv's path
            reporter.startpath = pathlib.Path(__file__).resolve().parent.parent

    def pytest_terminal_summary(self, terminalreporter, config):
        from ptlrpc_conformance.harness.runstate import COLLECTOR
        collector = config.stash.get(COLLECTOR, None)
        if not self.failing_lines or collector is None:
            return
        failing = [c for _, c in sorted(collector.cases.items())
                   if c.get("verdict") in ("fail", "error", "error (suite)")]
        if failing:
            terminalreporter.write_sep("-", f"{len(failing)} failing case(s); -v shows each failure in full")
            for c in failing:
                terminalreporter.write_line(_failing_line(c))

    def pytest_sessionfinish(self, session):
        from ptlrpc_conformance.harness.runstate import COLLECTOR, IUT_START_FAILURE
        self.start_failure = session.config.stash.get(IUT_START_FAILURE, None)
        collector = session.config.stash.get(COLLECTOR, None)      # its hook ran first (tryfirst)
        report = getattr(collector, "report", None) or {}
        self.level_status = (report.get("level") or {}).get("status") if report.get("cases") else None


TROUBLE_LINE = re.compile(r"^harness/protocol error \((\w+)\): (.+)$")     # a crash, a hang, garbage
FIELD_LINE = re.compile(r"^[A-Za-z_][\w.\[\]-]*: expected .+, got ")           # a decoded field that differs
LINE_WIDTH = 220


def _failing_line(case: dict) -> str:
    """One line for a failing case: its verdict and id, then the cause — for trouble what the
    IUT did (crash with the signal, timeout, garbage), for a failure the first field that
    differed, else the expected and actual lines, else the problem the message starts with —
    and last the requirements the failure was charged to."""
    heading = tuple(f"{r} (" for r in (case.get("failed_requirements") or []) + (case.get("requirements") or []))
    lines = [" ".join(line.split()) for line in str(case.get("message") or "").splitlines()
             if line.strip() and not line.startswith(heading or ("\0",))]     # not the requirement headings
    cause = None
    for line in lines:
        trouble = TROUBLE_LINE.match(line)
        if trouble:
            cause = f"{trouble.group(1)}: {trouble.group(2)}"
            break
    if cause is None:
        cause = next((line for line in lines if FIELD_LINE.match(line)), None)
    if cause is None:
        said = [line for line in lines if line.startswith(("expected:", "actual:"))][:2]
        cause = "; ".join(said) or next((line for line in lines if line.startswith("encoded bytes differ")), None)
    if cause is None:
        malformed = next((i for i, line in enumerate(lines) if "not a well-formed MESSAGE" in line), None)
        if malformed is not None and malformed + 1 < len(lines):
            cause = f"malformed result: {lines[malformed + 1]}"
    if cause is None:
        cause = next((line for line in lines if charges.PROBLEM_LINE.match(line)), lines[0] if lines else "")
    charged = case.get("failed_requirements") or case.get("requirements") or ()
    tail = f" [{','.join(charged)}]" if charged else ""
    head = f"{case.get('verdict', '').upper():<5} {case.get('id')}: "
    room = LINE_WIDTH - len(head) - len(tail)
    if len(cause) > room:
        cause = cause[:max(room - 1, 20)] + "…"
    return f"{head}{cause}{tail}"


def cmd_certify(argv: list[str]) -> int:
    args = _certify_parser().parse_args(argv)
    if args.list:
        return _list(args)
    return _certify(args)


def _input_problems(args) -> list[str]:
    """What the command line names, checked before anything runs (harness/options.py); the
    case ids and areas are checked by the plugin once the cases are collected."""
    problems = options.writable_dir(args.out, "--out")
    if args.io_log:
        problems += options.writable_file(args.io_log, "--io-log", make_parents=False)
    from ptlrpc_conformance.harness.outputs import gate
    problems += gate.file_problems(args.known_failures, args.update_known_failures)
    problems += options.requirement_ids(args.requirement, "--requirement")
    return problems


def _certify(args) -> int:
    from ptlrpc_conformance.harness.data.vectors import VectorError, load_all   # jsonschema: +130 ms
    problems = _input_problems(args)
    if problems:
        for line in problems:
            print(f"ptlrpc-conformance: {line}", file=sys.stderr)
        return EXIT_USAGE
    try:
        matrix_profiles = _matrix_profiles(args.profile)
        if matrix_profiles is None:
            registry.profile(args.profile)
    except registry.RegistryError as e:
        print(f"ptlrpc-conformance: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        load_all(args.vectors)
        if args.vectors:                    # their scenarios too (the bundled ones are the suite's)
            from ptlrpc_conformance.harness.ost import scenario                 # the vectors, ost/: +200 ms
            scenario.load_all(args.vectors)
    except VectorError as e:
        print("ptlrpc-conformance: vector files have problems:\n  " + "\n  ".join(e.problems), file=sys.stderr)
        return EXIT_USAGE
    out = pathlib.Path(args.out)
    report_path = out / "report.json"
    status, adapter = _iut_preflight(args.iut, args.iut_timeout)
    if status == EXIT_IUT:
        return _start_failure(args, report_path, status, adapter)
    if status is not None:
        return status
    hello = adapter.hello
    try:
        smoke = smoke_check(adapter)
    except IUTStartError as e:
        adapter.close()
        return _start_failure(args, report_path, *_could_not_start(e))
    adapter.close()
    print(f"ptlrpc-conformance: certifying {hello.name} {hello.version} ({args.iut}); "
          f"capabilities: {', '.join(sorted(hello.capabilities)) or 'none'}", flush=True)
    for line in options.capability_warnings(hello):
        print(f"ptlrpc-conformance: {line}", flush=True)

    if matrix_profiles is not None:
        return _certify_matrix(args, matrix_profiles, hello, smoke)
    return _session(args, out, hello, smoke)


def _session(args, out: pathlib.Path, hello, smoke, conclude: bool = True) -> int:
    """One pytest session of the suites under args.profile, writing its report to `out`;
    with `conclude`, the verdict block ends it."""
    import pytest                                                      # +170 ms
    report_path = out / "report.json"
    suites = resources.files("ptlrpc_conformance.suites")
    ini = str(suites.joinpath("pytest.ini"))
    pargs = ["-c", ini, "--rootdir", str(suites), "--pyargs", "ptlrpc_conformance.suites",
             "--conformance-report", str(report_path),
             "--junitxml", str(out / "junit.xml"), "-o", "junit_family=xunit2"]
    # every option with a pytest name is passed on; --list never gets here (`run` ignores it)
    pargs += options.pytest_args(args, [o for o in options.certify_options() if o.dest != "list"])
    # -v: a line per case and each failure in full; default: a progress line per file and a
    # line per failing case (the observer's); -q: progress dots only.  The verdict block follows.
    pargs += ["-v", "-rfE"] if args.verbose else ["-q", "--tb=no", "-rN"] if args.quiet else ["--tb=no", "-rN"]
    pargs += args.pytest_args
    if args.jobs and not any(a in ("--dist", "-d") or a.startswith("--dist=") for a in args.pytest_args):
        # xdist's default (`load`) hands out the collection in runs of neighbours: one worker
        # gets the property and stateful cases (hundreds of ms each) and the other the vectors
        # (ms each), and waits.  `worksteal` moves cases to the idle worker at the end.
        pargs += ["--dist", "worksteal"]
    observer = _Observer(failing_lines=not (args.verbose or args.quiet), preflight=(hello.as_dict(), smoke))
    before = _mtime(report_path)
    rc = int(pytest.main(pargs, plugins=[observer]))
    status = _exit_status(rc, observer)
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        print(f"exit status: {status}", flush=True)     # no verdict block: there is nothing to judge
        return status
    if not conclude:
        return status
    return _conclude(report_path if _mtime(report_path) != before else None, status)


MATRIX = "all"      # --profile all[-MODIFIER...]: every release's profile (with those modifiers)


def _matrix_profiles(name: str | None) -> list[str] | None:
    """The profiles of a release matrix `--profile all[-literal][-reconstruct]`, oldest
    release first; None for a single profile."""
    if name != MATRIX and not (name or "").startswith(MATRIX + "-"):
        return None
    mods = name.split("-")[1:]
    profiles = ["-".join([base, *mods]) for base in registry.release_profiles()]
    for p in profiles:
        registry.profile(p)                 # a modifier unknown or out of order: a usage error
    return profiles


def _certify_matrix(args, profiles: list[str], hello, smoke) -> int:
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
    statuses = {}
    base_args = copy.copy(args)
    base_args.profile = base
    statuses[base] = _session(base_args, out / base, hello, smoke, conclude=False)
    base_path = out / base / "report.json"
    try:
        base_report = json.loads(base_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return _conclude(None, statuses[base])
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
            statuses[p] = _session(a, out / p / "run", hello, smoke, conclude=False)
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
    doc = matrix.document(reports, base, status)
    report_module.write(doc, out / "report.json")
    from ptlrpc_conformance.harness.outputs import html
    html.write_matrix(doc, out / "report.html")
    print("\n".join(matrix.verdict_lines(doc, out / "report.json")), flush=True)
    return status


def _conclude_quietly(report_path: pathlib.Path, status: int) -> None:
    """A matrix member's report: its exit status and its report.html, no verdict block."""
    from ptlrpc_conformance.harness.outputs import report as report_module
    report = json.loads(report_path.read_text(encoding="utf-8"))
    report["exit_status"] = status
    report_module.write(report, report_path)
    _write_html(report_path)


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


def _mtime(path: pathlib.Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def _conclude(report_path: pathlib.Path | None, status: int) -> int:
    """After the run: report.json records the command's exit status, report.html is written,
    and the verdict block ends the output.  `report_path`: the report this run wrote, if any."""
    from ptlrpc_conformance.harness.outputs import report as report_module, verdict   # +60 ms
    report = None
    if report_path is not None:
        try:
            report = json.loads(report_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            report = None
    if report is not None:
        report["exit_status"] = status
        report_module.write(report, report_path)
        _write_html(report_path)
        if report.get("incomplete") and not (report.get("iut") or {}).get("start_failure"):
            print(f"ptlrpc-conformance: the run stopped early ({report.get('incomplete_reason') or 'interrupted'}); "
                  "the report is marked incomplete", file=sys.stderr)
    elif status == EXIT_USAGE:
        return status             # nothing ran: the usage error said it all
    sys.stdout.flush()
    print("\n".join(verdict.lines(report, status, report_path)), flush=True)
    return status


def _start_failure(args, report_path: pathlib.Path, status: int, why: str) -> int:
    """The IUT could not start: report.json says so (`iut.start_failure`), no case ran."""
    from ptlrpc_conformance.harness.outputs import report as report_module   # +60 ms
    given = {o.config_dest: getattr(args, o.dest) for o in options.certify_options() if o.pytest}
    profile = registry.profile(args.profile).name
    doc = report_module.start_failure_document(
        iut_spec=args.iut, message=why, exit_status=status, profile=profile, seed=args.seed,
        user_vectors=args.vectors, reproduce=options.reproduce_argv(given.get, {"profile": profile}),
        selected=report_module.selection(args.area, args.case, args.requirement, args.keyword, None, args.level),
        ignore_errno_class=bool(args.ignore_errno_class))
    report_module.write(doc, report_path)
    return _conclude(report_path, status)


def _exit_status(rc: int, observer: "_Observer") -> int:
    """The command's exit status from pytest's."""
    if observer.start_failure:
        return EXIT_IUT
    if rc == 0:
        from ptlrpc_conformance.harness.outputs.level import NOT_CERTIFIED
        if getattr(observer, "level_status", None) == NOT_CERTIFIED:
            return EXIT_NOT_CERTIFIED        # cases ran, but no MUST case applied
        return EXIT_OK
    if rc == EXIT_SUITE:      # a bug in the suite's own code (the report collector's status)
        return EXIT_SUITE
    if rc in (4, 5):          # usage error, or nothing selected
        if rc == 5:
            print(f"ptlrpc-conformance: no case was selected{_selection_said(observer)}: nothing was run "
                  "and nothing is certified (`ptlrpc-conformance list` shows the case ids)", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_FAIL


def _selection_said(observer: "_Observer") -> str:
    """' by -k EXPR, --area A' : the selection options of the run that left no case."""
    config = getattr(observer, "config", None)
    if config is None:
        return ""
    said = [f"{o.cli[0]} {v}" for o in options.certify_options() if o.cli and o.dest in ("keyword", "area", "case",
                                                                                      "requirement", "level")
            for v in ([config.getoption(o.config_dest)] if not isinstance(config.getoption(o.config_dest), list)
                      else config.getoption(o.config_dest)) if v]
    return f" by {', '.join(said)}" if said else ""


def _write_html(report_path: pathlib.Path) -> None:
    from ptlrpc_conformance.harness.outputs import html                 # jinja2, the vectors: +200 ms
    report = json.loads(report_path.read_text())
    html.write(report, report_path.parent / "report.html")


def cmd_run(argv: list[str]) -> int:
    """Re-run one case (exact id), optionally recording the protocol lines exchanged."""
    if not argv or argv[0].startswith("-"):
        print("usage: ptlrpc-conformance run CASE-ID [--iut SPEC] [--io-log FILE] [certify options]", file=sys.stderr)
        return EXIT_USAGE
    case_id, rest = argv[0], argv[1:]
    if rest and not rest[0].startswith("-"):
        print(f"ptlrpc-conformance run: one case id at a time ({rest[0]!r} is a second one); "
              f"to run several, use `certify --case {case_id} --case {rest[0]}`", file=sys.stderr)
        return EXIT_USAGE
    args = _certify_parser().parse_args(rest)
    args.case = list(args.case) + [case_id]
    if not any(a == "--out" or a.startswith("--out=") for a in rest):
        args.out = RUN_OUT          # a re-run of one case never replaces a certification's report
    return _certify(args)


RUN_OUT = "ptlrpc-conformance-run"       # `run`'s default --out (certify's: ptlrpc-conformance-report)


def cmd_list(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance list", description="Print the cases and their requirements, run nothing.")
    options.add_arguments(p, options.command_options("list"))
    return _list(p.parse_args(argv))


def _list(args) -> int:
    """`list`, and `certify --list` (whose other options are ignored)."""
    import pytest                                                      # +170 ms
    suites = resources.files("ptlrpc_conformance.suites")
    pargs = ["-c", str(suites.joinpath("pytest.ini")), "--rootdir", str(suites), "--pyargs",
             "ptlrpc_conformance.suites", "--collect-only", "-qq", "--conformance-list"]
    pargs += options.pytest_args(args, options.command_options("list"))
    rc = int(pytest.main(pargs, plugins=[_Observer()]))
    return EXIT_OK if rc == 0 else EXIT_USAGE


def cmd_verify_report(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance verify-report",
                description="Re-run the command a report records and say whether the verdicts still agree.")
    p.add_argument("report", help="a report.json")
    args = p.parse_args(argv)
    try:
        report = json.loads(pathlib.Path(args.report).read_text())
        command = report["reproduce"]
        before = {c["id"]: c["verdict"] for c in report["cases"]}
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
        except (OSError, ValueError):
            print(f"verify-report: the re-run wrote no report (exit {proc.returncode}):\n{proc.stderr[-2000:]}",
                  file=sys.stderr)
            return EXIT_FAIL
    after = {c["id"]: c["verdict"] for c in again["cases"]}
    diffs = [f"  {cid}: report says {before.get(cid, '(absent)')}, re-run says {after.get(cid, '(absent)')}"
             for cid in sorted(set(before) | set(after)) if before.get(cid) != after.get(cid)]
    if report.get("iut", {}).get("hello") != again.get("iut", {}).get("hello"):
        diffs.append(f"  the IUT's hello differs: {report.get('iut', {}).get('hello')} vs {again.get('iut', {}).get('hello')}")
    if diffs:
        print(f"verify-report: {len(diffs)} verdict(s) differ:\n" + "\n".join(diffs[:200]))
        return EXIT_FAIL
    print(f"verify-report: all {len(before)} verdicts agree")
    return EXIT_OK


def _read_hex(text: str) -> bytes:
    """The bytes of `decode`'s argument (hex, '-' for standard input, '@FILE'); whitespace
    between digits is ignored.  ValueError says what is wrong: a character that is not a hex
    digit (and where), or an odd number of digits."""
    where = "the argument"
    if text == "-":
        text, where = sys.stdin.read(), "standard input"
    elif text.startswith("@"):
        where = text[1:]
        try:
            text = pathlib.Path(where).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            raise ValueError(f"{where}: not a text file of hex digits") from None
    digits = "".join(text.split())
    for i, ch in enumerate(digits):
        if ch not in "0123456789abcdefABCDEF":
            raise ValueError(f"{where}: {ch!r} at digit {i + 1} is not a hexadecimal digit")
    if len(digits) % 2:
        raise ValueError(f"{where}: an odd number of hex digits ({len(digits)}): "
                         "every byte is two digits (a digit is missing, or one too many)")
    return bytes.fromhex(digits)


def cmd_decode(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance decode",
                description="Print a message as a hex dump annotated with field names and offsets, "
                            "then what the IUT decodes it to.")
    p.add_argument("hex", help="the message as hex; '-' reads stdin, '@FILE' reads a file")
    p.add_argument("--direction", choices=("request", "reply"), default="request")
    options.add_arguments(p, options.command_options("decode"))
    args = p.parse_args(argv)
    try:
        data = _read_hex(args.hex)
    except ValueError as e:
        print(f"ptlrpc-conformance decode: not hex: {e}", file=sys.stderr)
        return EXIT_USAGE
    except OSError as e:
        print(f"ptlrpc-conformance decode: cannot read {args.hex[1:]}: {e.strerror or e}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{len(data)} bytes, annotated by the suite's own layout walker:")
    print(hexdump.render(data, limit=1 << 30))
    status, adapter = _iut_preflight(args.iut, args.iut_timeout)
    if status is not None:
        return status
    with adapter:
        try:
            outcome = adapter.call({"op": "decode", "data": data.hex(), "direction": args.direction})
        except NotApplicable as e:
            print(f"\n{adapter.hello.name}: {e}")
            return EXIT_FAIL
    print(f"\n{adapter.hello.name} ({args.direction}): {outcome.describe()}")
    if outcome.ok:
        print(json.dumps(outcome.result, indent=1))
        return EXIT_OK
    return EXIT_FAIL


def cmd_lint_vectors(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance lint-vectors",
                description="Check vector files; every problem is reported with file, vector id and field.")
    p.add_argument("paths", nargs="*", help="vector files or directories (default: the bundled vectors)")
    args = p.parse_args(argv)
    from ptlrpc_conformance.harness.data.vectors import (                # jsonschema: +130 ms
        VectorError, bundled_files, load_file, user_files)
    from ptlrpc_conformance.harness.ost import scenario                  # the vectors, ost/: +200 ms
    problems: list[str] = []
    count = scenarios = 0
    try:
        if args.paths:
            files = [(str(path), None, path) for path in user_files(args.paths)]
        else:
            files = [(name, text, name) for name, text in bundled_files()]
        for name, text, path in files:
            count += len(load_file(path, text, problems))
            try:
                body = text if text is not None else pathlib.Path(path).read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue              # load_file has reported it
            scenarios += len(scenario.load_text(name, body, problems, yaml_problems=False))
    except VectorError as e:
        problems += e.problems
    if problems:
        for line in problems:
            print(line)
        print(f"lint-vectors: {len(problems)} problem(s)", file=sys.stderr)
        return EXIT_USAGE
    print(f"lint-vectors: {count} vectors, {scenarios} scenarios, no problems")
    return EXIT_OK


class _CaseCollector:
    """A pytest plugin that keeps, once the cases are collected (and declared by the plugin),
    each case id with the requirements it lists."""

    def __init__(self):
        self.cases: dict[str, list[str]] = {}

    def pytest_collection_finish(self, session):
        for item in session.items:
            props = dict(item.user_properties)
            if "case_id" in props:
                self.cases[props["case_id"]] = [r for r in props["requirements"].split(",") if r]


def collected_cases(profile: str | None = None) -> dict[str, list[str]]:
    """Every case a certification run would run, with the requirements it lists: collected by
    pytest from the suites, exactly as `certify` and `list` collect them."""
    import contextlib
    import io

    import pytest                                                      # +170 ms
    suites = resources.files("ptlrpc_conformance.suites")
    pargs = ["-c", str(suites.joinpath("pytest.ini")), "--rootdir", str(suites), "--pyargs",
             "ptlrpc_conformance.suites", "--collect-only", "-qq", "-p", "no:cacheprovider"]
    if profile:
        pargs += ["--conformance-profile", profile]
    plugin = _CaseCollector()
    output = io.StringIO()
    with contextlib.redirect_stdout(output):
        rc = int(pytest.main(pargs, plugins=[plugin]))
    if rc != 0:
        raise RuntimeError(f"the cases could not be collected (pytest exit status {rc}):\n{output.getvalue()[-2000:]}")
    return plugin.cases


def exercised(profile: str | None = None) -> dict[str, set[str]]:
    """requirement id -> the ids of the collected cases that list it (collected_cases)."""
    out: dict[str, set[str]] = {}
    for case, reqs in collected_cases(profile).items():
        for r in reqs:
            out.setdefault(r, set()).add(case)
    return out


def cmd_requirements(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance requirements",
                description="List the requirement registry and how many cases exercise each requirement.")
    options.add_arguments(p, options.command_options("requirements"))
    args = p.parse_args(argv)
    try:
        prof = registry.profile(args.profile).name
    except registry.RegistryError as e:
        print(f"ptlrpc-conformance: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        cases = exercised(prof)
    except RuntimeError as e:
        print(f"ptlrpc-conformance requirements: {e}", file=sys.stderr)
        return EXIT_USAGE
    reqs = [r for r in registry.requirements().values() if r.in_profile(prof)]
    for r in reqs:
        print(f"{r.id:<16} {r.level:<6} cases={len(cases.get(r.id, ())):<5} {r.statement}")
    n = sum(1 for r in reqs if cases.get(r.id))
    must = [r for r in reqs if r.level == "MUST"]
    n_must = sum(1 for r in must if cases.get(r.id))
    print(f"\ncoverage: {n} of {len(reqs)} requirements of profile {prof} are exercised "
          f"({n_must} of {len(must)} MUST)")
    return EXIT_OK if n_must == len(must) else EXIT_FAIL


def cmd_export(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance export",
                description="Write every data case - hand-written vectors and the variants derived from them - "
                            "for consumers in other languages.")
    p.add_argument("--format", choices=("json",), default="json")
    p.add_argument("--out", default="-", help="file to write (default: standard output)")
    options.add_arguments(p, options.command_options("export"))
    args = p.parse_args(argv)
    bad_out = options.writable_file(args.out, "--out", make_parents=False) if args.out != "-" else []
    if bad_out:
        print(f"ptlrpc-conformance export: {bad_out[0]}", file=sys.stderr)
        return EXIT_USAGE
    from ptlrpc_conformance.harness.data.vectors import VectorError, load_all   # jsonschema: +130 ms
    from ptlrpc_conformance.harness.verdicts.derive import derive         # the vectors, model: +180 ms
    try:
        prof = registry.profile(args.profile).name
        vectors = [v.for_profile(prof) for v in load_all(args.vectors)]
    except (registry.RegistryError, VectorError) as e:
        print(f"ptlrpc-conformance export: {e}", file=sys.stderr)
        return EXIT_USAGE

    def row(v, derived_from=None):
        out = {"id": v.id, "title": v.title, "requirements": list(v.requirements), "cite": list(v.cite),
               "op": v.op, "verdict": v.verdict, "data": v.data.hex()}
        if v.op == "decode_struct":
            out.update(struct=v.struct, byte_order=v.byte_order)
        else:
            out["direction"] = v.direction
        if v.verdict == "valid":
            out["expect"] = v.expect
            out["canonical"] = v.canonical
        if v.verdict == "invalid":
            out["errno"] = "any" if v.any_errno else list(v.accepted_errnos)
        if derived_from:
            out["derived_from"] = derived_from
        return out

    cases = [row(v) for v in vectors]
    for case in derive([v for v in vectors if v.op == "decode"], prof):
        cases += [row(v, case.origin.id) for v in case.variants]
    doc = {"format": "ptlrpc-conformance-export/1", "suite_version": __version__, "profile": prof,
           "lustre_version": registry.profile(prof).lustre_version, "count": len(cases), "cases": cases}
    text = json.dumps(doc, indent=1) + "\n"
    if args.out == "-":
        sys.stdout.write(text)
    else:
        pathlib.Path(args.out).write_text(text)
        print(f"export: {len(cases)} cases ({len(vectors)} vectors, {len(cases) - len(vectors)} derived) "
              f"written to {args.out}", file=sys.stderr)
    return EXIT_OK


def cmd_check_trace(argv: list[str]) -> int:
    """Check the target invariants over a recorded exchange; one line per violation."""
    p = Parser(prog="ptlrpc-conformance check-trace",
                description="Check a recorded exchange with a target (JSON Lines records "
                            "{client, xid, request, reply}, or a pcap of LNet over TCP) against the "
                            "target invariants of docs/target-rules.md.")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print violations as JSON Lines")
    args = p.parse_args(argv)
    try:
        records = trace.read(args.file)
    except trace.TraceError as e:
        print(f"ptlrpc-conformance: {e}", file=sys.stderr)
        return EXIT_USAGE
    result = trace.check_trace(records)
    violations = result.violations
    for v in violations:
        if args.json:
            print(json.dumps({"record": v.record, "client": v.client, "xid": v.xid, "rule": v.rule,
                              "message": v.message}))
        else:
            print(f"{args.file}:{v.record}: {v.rule}: client {v.client} xid {v.xid}: {v.message}")
    for note in result.notes:           # allowed: not violations, said where the summary is
        print(f"{args.file}:{note.record}: note: client {note.client} xid {note.xid}: {note.message}", file=sys.stderr)
    print(result.summary(), file=sys.stderr)
    return EXIT_FAIL if violations else EXIT_OK


RECORDED = ("recovery.replay.transno-order", "target.transno.two-clients")   # with restart, and without


def cmd_record_trace(argv: list[str]) -> int:
    """Replay one bundled scenario against a target IUT and write the traffic as a trace
    check-trace reads (harness/ost/record.py)."""
    from ptlrpc_conformance.harness.ost import record, scenario as scenarios
    p = Parser(prog="ptlrpc-conformance record-trace",
                description="Replay a scenario vector against a target IUT and write what went between the "
                            "clients and the target as a JSON Lines trace (docs/check-trace.md).")
    p.add_argument("--scenario", metavar="ID", help=f"the scenario to replay (default: {RECORDED[0]} for an IUT "
                                                    f"with capability restart, else {RECORDED[1]})")
    p.add_argument("--out", default="trace.jsonl", metavar="FILE", help="the trace file to write (default "
                                                                        "trace.jsonl; - for standard output)")
    options.add_arguments(p, options.command_options("decode"))
    args = p.parse_args(argv)
    problems = options.writable_file(args.out, "--out") if args.out != "-" else []
    known = {s.id: s for s in scenarios.load_all()}
    if args.scenario and args.scenario not in known:
        problems.append(f"--scenario {args.scenario}: unknown scenario{options.closest(args.scenario, known)}")
    for line in problems:
        print(f"ptlrpc-conformance record-trace: {line}", file=sys.stderr)
    if problems:
        return EXIT_USAGE
    status, adapter = _iut_preflight(args.iut, args.iut_timeout)
    if status is not None:
        return status
    with adapter:
        caps = adapter.hello.capabilities
        chosen = known[args.scenario or (RECORDED[0] if "restart" in caps else RECORDED[1])]
        missing = sorted(set(chosen.needs) - set(caps))
        if missing:
            print(f"ptlrpc-conformance record-trace: {adapter.hello.name} does not declare {', '.join(missing)}, "
                  f"which scenario {chosen.id} needs", file=sys.stderr)
            return EXIT_USAGE
        try:
            text, failed = record.record(chosen, adapter)
        except (record.RecordError, scenarios.TargetError) as e:
            print(f"ptlrpc-conformance record-trace: {chosen.id}: {e}", file=sys.stderr)
            return EXIT_FAIL
    if args.out == "-":
        sys.stdout.write(text)
    else:
        pathlib.Path(args.out).write_text(text, encoding="utf-8")
    lines = text.count("\n")
    print(f"record-trace: {chosen.id} against {adapter.hello.name}: {lines} lines"
          + ("" if args.out == "-" else f" written to {args.out}")
          + (f"; the scenario found {len(failed)} problem(s): {failed[0]}" if failed else ""), file=sys.stderr)
    return EXIT_FAIL if failed else EXIT_OK


def cmd_bench(argv: list[str]) -> int:
    """Throughput of the harness and of IUTs on this machine (harness/tools/bench.py)."""
    from ptlrpc_conformance.harness.tools import bench      # with the vectors (jsonschema): +200 ms
    return bench.main(argv)


def cmd_mutants(argv: list[str]) -> int:
    """The suite against every mutant of the reference, with the mutation score (harness/tools/mutation.py)."""
    from ptlrpc_conformance.harness.tools import mutation   # with the mutants and registry: +90 ms
    return mutation.main(argv)


def cmd_certification_doc(argv: list[str]) -> int:
    """A Markdown certification document from a report.json (harness/outputs/certdoc.py)."""
    from ptlrpc_conformance.harness.outputs import certdoc  # with report.py and pytest: +155 ms
    return certdoc.main(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        print(__doc__.strip())
        return EXIT_USAGE           # no command: say what there is, run nothing
    if argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return EXIT_OK
    if argv and argv[0] == "--version":
        print(f"ptlrpc-conformance {__version__}")
        return EXIT_OK
    command = "certify"
    if argv and argv[0] in SUBCOMMANDS:
        command = argv.pop(0)
    elif argv and not argv[0].startswith("-"):
        print(f"ptlrpc-conformance: unknown command {argv[0]!r} (commands: {', '.join(SUBCOMMANDS)})",
              file=sys.stderr)
        return EXIT_USAGE
    handler = {"certify": cmd_certify, "run": cmd_run, "list": cmd_list, "verify-report": cmd_verify_report,
               "decode": cmd_decode, "lint-vectors": cmd_lint_vectors,
               "requirements": cmd_requirements, "export": cmd_export, "check-trace": cmd_check_trace,
               "record-trace": cmd_record_trace,
               "bench": cmd_bench, "certification-doc": cmd_certification_doc, "mutants": cmd_mutants}[command]
    try:
        return handler(argv)
    except KeyboardInterrupt:
        print("ptlrpc-conformance: interrupted", file=sys.stderr)
        return EXIT_FAIL
    except BrokenPipeError:
        # the reader closed the pipe (`list | head`): what it wanted was written; end quietly,
        # with nothing more written to the closed pipe at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK


def entry() -> None:
    """The console command: main(), then the exit.  The run's objects are moved out of the
    garbage collector's sight first (gc.freeze): the interpreter's last collection walked
    them all, about 0.15 s of every run.  Not in main(), which tests call in-process."""
    status = main()
    gc.freeze()
    sys.exit(status)


if __name__ == "__main__":
    entry()
