"""The pytest session of a certification, as the command line runs it: the arguments it
passes (all from the option table, harness/options.py), the command line's own plugin in that
session (`Observer`: the IUT's start failure, the level, a line per failing case), the
command's exit status from pytest's, and the conclusion (report.json's exit status,
report.html and the verdict block).
"""
from __future__ import annotations

import gc
import json
import pathlib
import re
import sys

import ptlrpc_conformance
from ptlrpc_conformance.cli.common import suites_args
from ptlrpc_conformance.harness import options
from ptlrpc_conformance.harness.options import EXIT_FAIL, EXIT_IUT, EXIT_NOT_CERTIFIED, EXIT_OK, EXIT_SUITE, EXIT_USAGE
from ptlrpc_conformance.harness.verdicts import charges


class Observer:
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
            reporter.startpath = pathlib.Path(ptlrpc_conformance.__file__).resolve().parent.parent
        if session.config.pluginmanager.has_plugin("dsession"):
            collector_back()        # xdist's controller collects nothing itself

    def pytest_collection_finish(self, session):
        collector_back()

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
                terminalreporter.write_line(failing_line(c))

    def pytest_sessionfinish(self, session):
        from ptlrpc_conformance.harness.runstate import COLLECTOR, IUT_START_FAILURE
        self.start_failure = session.config.stash.get(IUT_START_FAILURE, None)
        collector = session.config.stash.get(COLLECTOR, None)      # its hook ran first (tryfirst)
        report = getattr(collector, "report", None) or {}
        self.level_status = (report.get("level") or {}).get("status") if report.get("cases") else None


TROUBLE_LINE = re.compile(r"^harness/protocol error \((\w+)\): (.+)$")     # a crash, a hang, garbage

FIELD_LINE = re.compile(r"^[A-Za-z_][\w.\[\]-]*: expected .+, got ")           # a decoded field that differs

LINE_WIDTH = 220


def failing_line(case: dict) -> str:
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


def run_session(args, out: pathlib.Path, hello, smoke, conclude: bool = True) -> int:
    """One pytest session of the suites under args.profile, writing its report to `out`;
    with `conclude`, the verdict block ends it."""
    import pytest                                                      # +170 ms
    report_path = out / "report.json"
    pargs = suites_args() + ["--conformance-report", str(report_path),
                             "--junitxml", str(out / "junit.xml"), "-o", "junit_family=xunit2"]
    # every option with a pytest name is passed on; --list never gets here (`run` ignores it)
    pargs += options.pytest_args(args, [o for o in options.certify_options() if o.dest != "list"])
    # -v: a line per case and each failure in full; default: a progress line per file and a
    # line per failing case (the observer's); -q: progress dots only.  The verdict block follows.
    pargs += ["-v", "-rfE"] if args.verbose else ["-q", "--tb=no", "-rN"] if args.quiet else ["--tb=no", "-rN"]
    # a case's output is captured at the level of sys.stdout and sys.stderr, not of the file
    # descriptors: every adapter pipes its IUT's output (exec:, tshark), so only an in-process
    # IUT writing to descriptor 1 or 2 itself would go past it, and the descriptors' swap
    # around each of 663 cases cost about 0.07 s a run.  `-- --capture=fd` (or `-s`) overrides.
    pargs += ["--capture=sys"]
    pargs += args.pytest_args
    if args.jobs and not any(a in ("--dist", "-d") or a.startswith("--dist=") for a in args.pytest_args):
        # xdist's default (`load`) hands out the collection in runs of neighbours: one worker
        # gets the property and stateful cases (hundreds of ms each) and the other the vectors
        # (ms each), and waits.  `worksteal` moves cases to the idle worker at the end.
        pargs += ["--dist", "worksteal"]
    observer = Observer(failing_lines=not (args.verbose or args.quiet), preflight=(hello.as_dict(), smoke))
    from ptlrpc_conformance.harness.outputs.report import remove_earlier_pages
    remove_earlier_pages(out)           # the reproducers: by the report collector, before report.json
    before = report_mtime(report_path)
    rc = int(pytest.main(pargs, plugins=[observer]))
    if rc == pytest.ExitCode.INTERRUPTED and report_mtime(report_path) == before:
        # a Ctrl-C before pytest's session began (its report is written when the session
        # ends): the caller writes the report of a run interrupted before its first case
        raise KeyboardInterrupt
    status = _exit_status(rc, observer)
    if rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        print(f"exit status: {status}", flush=True)     # no verdict block: there is nothing to judge
        return status
    if not conclude:
        return status
    return conclude_run(report_path if report_mtime(report_path) != before else None, status,
                        html=not getattr(args, "no_html", False))


def collector_back() -> None:
    """The garbage collector on again after a start-up without it (cli/certify.py), the
    objects made so far (modules, collected cases, facts) frozen out of its walks, and the
    young generation sized for the run (runstate.RUN_GC_THRESHOLD; cmd_certify puts the old
    sizes back)."""
    from ptlrpc_conformance.harness.runstate import collector_for_the_cases
    if not gc.isenabled():
        collector_for_the_cases()
        gc.enable()


def report_mtime(path: pathlib.Path) -> int | None:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return None


def conclude_run(report_path: pathlib.Path | None, status: int, html: bool = True) -> int:
    """After the run: report.json records the command's exit status, report.html is written
    (unless `html` is false: --no-html), and the verdict block ends the output.
    `report_path`: the report this run wrote, if any."""
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
        if html:
            write_html(report_path)
        if report.get("incomplete") and not (report.get("iut") or {}).get("start_failure"):
            print(f"ptlrpc-conformance: the run stopped early ({report.get('incomplete_reason') or 'interrupted'}); "
                  "the report is marked incomplete", file=sys.stderr)
    elif status == EXIT_USAGE:
        return status             # nothing ran: the usage error said it all
    sys.stdout.flush()
    print("\n".join(verdict.lines(report, status, report_path)), flush=True)
    return status


def _exit_status(rc: int, observer: "Observer") -> int:
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


def _selection_said(observer: "Observer") -> str:
    """' by -k EXPR, --area A' : the selection options of the run that left no case."""
    config = getattr(observer, "config", None)
    if config is None:
        return ""
    said = [f"{o.cli[0]} {v}" for o in options.certify_options() if o.cli and o.dest in ("keyword", "area", "case",
                                                                                      "requirement", "level")
            for v in ([config.getoption(o.config_dest)] if not isinstance(config.getoption(o.config_dest), list)
                      else config.getoption(o.config_dest)) if v]
    return f" by {', '.join(said)}" if said else ""


def write_html(report_path: pathlib.Path) -> None:
    from ptlrpc_conformance.harness.outputs import html                 # jinja2, the vectors: +200 ms
    report = json.loads(report_path.read_text())
    html.write(report, report_path.parent / "report.html")
