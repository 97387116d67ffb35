"""ptlrpc-conformance: the command line.

  ptlrpc-conformance [certify] [--iut SPEC] [--out DIR] [options] [-- PYTEST-ARGS]
  ptlrpc-conformance run CASE-ID [--iut SPEC] [--io-log FILE]
  ptlrpc-conformance list [--requirement ID] [--area AREA] [--level MUST]
  ptlrpc-conformance verify-report DIR/report.json
  ptlrpc-conformance decode HEX [--direction request|reply] [--iut SPEC]
  ptlrpc-conformance lint-vectors [PATH ...]
  ptlrpc-conformance requirements
  ptlrpc-conformance export --format json [--out FILE]
  ptlrpc-conformance check-trace FILE [--json]      (JSON Lines or pcap)
  ptlrpc-conformance bench [--seconds S] [--quick] [--iut SPEC ...] [--json FILE]
  ptlrpc-conformance certification-doc DIR/report.json [--notes FILE] [--out FILE]
  ptlrpc-conformance mutants [--jobs N] [--mutant ID ...] [--json FILE] [--markdown FILE]

Exit status: 0 every applicable case passed; 1 a case failed (the IUT crashing, hanging
or garbling mid-run included), or the run was stopped early (--max-fail, --time-budget,
Ctrl-C; the report is marked incomplete); 2 usage or input error; 3 the IUT could not
start, or its hello was missing, invalid or not protocol 1.
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import sys
from importlib import resources

EXIT_OK, EXIT_FAIL, EXIT_USAGE, EXIT_IUT = 0, 1, 2, 3
SUBCOMMANDS = ("certify", "run", "list", "verify-report", "decode", "lint-vectors", "requirements", "export",
               "check-trace", "bench", "certification-doc", "mutants")


class _Parser(argparse.ArgumentParser):
    """argparse that exits with status 2 and our prefix on usage errors."""

    def error(self, message):
        self.print_usage(sys.stderr)
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(EXIT_USAGE)


def _certify_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="ptlrpc-conformance certify",
                description="Run the conformance suite against an implementation and write report.json.")
    p.add_argument("--iut", default="reference",
                   help="reference (default), python:package.module:factory, or exec:COMMAND")
    p.add_argument("--iut-timeout", type=_positive_float, default=5.0, help="per-call timeout in seconds (exec:)")
    p.add_argument("--out", default="ptlrpc-conformance-report", help="directory for report.json (created)")
    p.add_argument("--profile", default=None, help="profile the verdicts follow (default lustre-2.17.57)")
    p.add_argument("--vectors", action="append", default=[], metavar="DIR", help="add your own vector files")
    p.add_argument("--ignore-errno-class", action="store_true",
                   help="judge accept/reject only; report errno classes separately")
    p.add_argument("--seed", type=int, default=None, help="seed of the property tests (recorded in the report)")
    p.add_argument("--examples", type=int, default=None, help="examples per property test (default 200)")
    p.add_argument("--known-failures", default=None, metavar="FILE",
                   help="regression gate: exit 1 on new failures and on stale, unmatched, changed or expired entries")
    p.add_argument("--update-known-failures", nargs="?", const="tighten", default=None, choices=("tighten", "loosen"),
                   help="rewrite the known-failures file (tighten: drop stale entries; loosen: also add new failures)")
    p.add_argument("--requirement", action="append", default=[], metavar="ID", help="only cases checking ID")
    p.add_argument("--area", action="append", default=[], metavar="AREA", help="only cases of AREA (framing, structs, ...)")
    p.add_argument("--level", choices=("MUST", "SHOULD", "MAY"), default=None, help="only cases of this level")
    p.add_argument("--case", action="append", default=[], metavar="CASE-ID", help="only this case (exact id)")
    p.add_argument("--io-log", default=None, metavar="FILE", help="record the protocol lines exchanged in FILE")
    p.add_argument("--list", action="store_true", help="print the selected cases and their requirements; run nothing")
    p.add_argument("--max-fail", type=_positive_int, default=None, metavar="N",
                   help="stop after N cases failed or hit IUT trouble (known failures do not count); "
                        "the report is marked incomplete, exit status 1")
    p.add_argument("--time-budget", type=_positive_float, default=None, metavar="SECONDS",
                   help="stop once SECONDS have passed (checked after each case); "
                        "the report is marked incomplete, exit status 1")
    p.add_argument("-n", "--jobs", default=None, help="parallel workers (pytest-xdist), e.g. 2 or auto")
    p.add_argument("-k", dest="keyword", default=None, help="only cases matching this pytest -k expression")
    p.add_argument("-q", "--quiet", action="store_true", help="less output")
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    return p


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not at least 1")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"{text} is not a positive number of seconds")
    return value


def _iut_preflight(spec: str, timeout: float):
    from .harness.adapter import IUTStartError, UsageError, load_adapter
    try:
        adapter = load_adapter(spec, timeout=timeout)
    except UsageError as e:
        print(f"ptlrpc-conformance: {e}", file=sys.stderr)
        return EXIT_USAGE, None
    except IUTStartError as e:
        print(f"ptlrpc-conformance: the IUT could not start: {e}", file=sys.stderr)
        return EXIT_IUT, None
    try:
        adapter.start()
    except IUTStartError as e:
        print(f"ptlrpc-conformance: the IUT could not start: {e}", file=sys.stderr)
        return EXIT_IUT, None
    return None, adapter


class _Observer:
    """Sees the session's config so the exit status can tell an IUT that failed to start."""

    def __init__(self):
        self.start_failure = None

    def pytest_sessionfinish(self, session):
        from .plugin import IUT_START_FAILURE
        self.start_failure = session.config.stash.get(IUT_START_FAILURE, None)


def cmd_certify(argv: list[str]) -> int:
    args = _certify_parser().parse_args(argv)
    if args.list:
        rest = [x for opt in ("requirement", "area") for v in getattr(args, opt) for x in (f"--{opt}", v)]
        rest += (["--level", args.level] if args.level else []) + (["--profile", args.profile] if args.profile else [])
        rest += [x for v in args.vectors for x in ("--vectors", v)]
        return cmd_list(rest)
    return _certify(args)


def _certify(args) -> int:
    from .harness import registry
    from .harness.vectors import VectorError, load_all
    try:
        registry.profile(args.profile)
    except registry.RegistryError as e:
        print(f"ptlrpc-conformance: {e}", file=sys.stderr)
        return EXIT_USAGE
    try:
        load_all(args.vectors)
    except VectorError as e:
        print("ptlrpc-conformance: vector files have problems:\n  " + "\n  ".join(e.problems), file=sys.stderr)
        return EXIT_USAGE
    status, adapter = _iut_preflight(args.iut, args.iut_timeout)
    if status is not None:
        return status
    hello = adapter.hello
    adapter.close()
    out = pathlib.Path(args.out)
    report_path = out / "report.json"
    print(f"ptlrpc-conformance: certifying {hello.name} {hello.version} ({args.iut}); "
          f"capabilities: {', '.join(sorted(hello.capabilities)) or 'none'}", flush=True)

    import pytest
    suites = resources.files("ptlrpc_conformance.suites")
    ini = str(suites.joinpath("pytest.ini"))
    pargs = ["-c", ini, "--rootdir", str(suites), "--pyargs", "ptlrpc_conformance.suites",
             "--iut", args.iut, "--iut-timeout", str(args.iut_timeout),
             "--conformance-report", str(report_path), "-rfE",
             "--junitxml", str(out / "junit.xml"), "-o", "junit_family=xunit2"]
    if args.known_failures:
        pargs += ["--known-failures", os.path.abspath(args.known_failures)]
    if args.update_known_failures:
        pargs += ["--update-known-failures", args.update_known_failures]
    for opt in ("requirement", "area", "case"):
        for v in getattr(args, opt):
            pargs += [f"--conformance-{opt}", v]
    if args.level:
        pargs += ["--conformance-level", args.level]
    if args.io_log:
        pargs += ["--iut-io-log", os.path.abspath(args.io_log)]
    if args.profile:
        pargs += ["--conformance-profile", args.profile]
    for v in args.vectors:
        pargs += ["--conformance-vectors", os.path.abspath(v)]
    if args.ignore_errno_class:
        pargs.append("--ignore-errno-class")
    if args.seed is not None:
        pargs += ["--conformance-seed", str(args.seed)]
    if args.examples is not None:
        pargs += ["--conformance-examples", str(args.examples)]
    if args.max_fail is not None:
        pargs += ["--conformance-max-fail", str(args.max_fail)]
    if args.time_budget is not None:
        pargs += ["--conformance-time-budget", repr(args.time_budget)]
    if args.jobs:
        pargs += ["-n", str(args.jobs)]
    if args.keyword:
        pargs += ["-k", args.keyword]
    pargs.append("-q" if args.quiet else "-v")
    pargs += args.pytest_args
    observer = _Observer()
    rc = int(pytest.main(pargs, plugins=[observer]))
    if observer.start_failure:
        return EXIT_IUT
    if report_path.exists():
        _write_html(report_path)
        print(f"ptlrpc-conformance: report written to {report_path} (and report.html, junit.xml"
              + (", reproducers/" if (out / "reproducers").is_dir() else "") + ")")
        reason = _incomplete_reason(report_path)
        if reason:
            print(f"ptlrpc-conformance: the run stopped early ({reason}); the report is marked incomplete",
                  file=sys.stderr)
    if rc == 0:
        return EXIT_OK
    if rc in (4, 5):          # usage error, or nothing selected
        if rc == 5:
            print("ptlrpc-conformance: no case was selected", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_FAIL


def _incomplete_reason(report_path: pathlib.Path) -> str | None:
    try:
        report = json.loads(report_path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(report, dict) or not report.get("incomplete"):
        return None
    return str(report.get("incomplete_reason") or "interrupted")


def _write_html(report_path: pathlib.Path) -> None:
    try:
        from .harness import html
    except ImportError:      # the HTML renderer is optional until it lands
        return
    report = json.loads(report_path.read_text())
    html.write(report, report_path.parent / "report.html")


def cmd_run(argv: list[str]) -> int:
    """Re-run one case (exact id), optionally recording the protocol lines exchanged."""
    if not argv or argv[0].startswith("-"):
        print("usage: ptlrpc-conformance run CASE-ID [--iut SPEC] [--io-log FILE] [certify options]", file=sys.stderr)
        return EXIT_USAGE
    case_id, rest = argv[0], argv[1:]
    args = _certify_parser().parse_args(rest)
    args.case = list(args.case) + [case_id]
    return _certify(args)


def cmd_list(argv: list[str]) -> int:
    p = _Parser(prog="ptlrpc-conformance list", description="Print the cases and their requirements, run nothing.")
    p.add_argument("--requirement", action="append", default=[])
    p.add_argument("--area", action="append", default=[])
    p.add_argument("--level", choices=("MUST", "SHOULD", "MAY"), default=None)
    p.add_argument("--profile", default=None)
    p.add_argument("--vectors", action="append", default=[])
    args = p.parse_args(argv)
    import pytest
    suites = resources.files("ptlrpc_conformance.suites")
    pargs = ["-c", str(suites.joinpath("pytest.ini")), "--rootdir", str(suites), "--pyargs",
             "ptlrpc_conformance.suites", "--collect-only", "-qq", "--conformance-list"]
    for opt in ("requirement", "area", "vectors"):
        for v in getattr(args, opt):
            pargs += [f"--conformance-{opt}", os.path.abspath(v) if opt == "vectors" else v]
    if args.level:
        pargs += ["--conformance-level", args.level]
    if args.profile:
        pargs += ["--conformance-profile", args.profile]
    rc = int(pytest.main(pargs))
    return EXIT_OK if rc == 0 else EXIT_USAGE


def cmd_verify_report(argv: list[str]) -> int:
    p = _Parser(prog="ptlrpc-conformance verify-report",
                description="Re-run the command a report records and say whether the verdicts still agree.")
    p.add_argument("report", help="a report.json")
    args = p.parse_args(argv)
    try:
        report = json.loads(pathlib.Path(args.report).read_text())
        command = report["reproduce"]
        before = {c["id"]: c["verdict"] for c in report["cases"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        print(f"ptlrpc-conformance verify-report: {args.report}: not a report with a reproducible command ({e})",
              file=sys.stderr)
        return EXIT_USAGE
    import subprocess
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        argv2 = [sys.executable, "-m", "ptlrpc_conformance.cli"] + command[1:] + ["--out", tmp, "-q"]
        print("verify-report: re-running " + " ".join(command), flush=True)
        proc = subprocess.run(argv2, capture_output=True, text=True)
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
    if text == "-":
        text = sys.stdin.read()
    elif text.startswith("@"):
        text = pathlib.Path(text[1:]).read_text()
    digits = "".join(text.split())
    return bytes.fromhex(digits)


def cmd_decode(argv: list[str]) -> int:
    p = _Parser(prog="ptlrpc-conformance decode",
                description="Print a message as a hex dump annotated with field names and offsets, "
                            "then what the IUT decodes it to.")
    p.add_argument("hex", help="the message as hex; '-' reads stdin, '@FILE' reads a file")
    p.add_argument("--direction", choices=("request", "reply"), default="request")
    p.add_argument("--iut", default="reference")
    p.add_argument("--iut-timeout", type=_positive_float, default=5.0)
    args = p.parse_args(argv)
    from .harness import hexdump
    try:
        data = _read_hex(args.hex)
    except (ValueError, OSError) as e:
        print(f"ptlrpc-conformance decode: not hex: {e}", file=sys.stderr)
        return EXIT_USAGE
    print(f"{len(data)} bytes, annotated by the suite's own layout walker:")
    print(hexdump.render(data, limit=1 << 30))
    status, adapter = _iut_preflight(args.iut, args.iut_timeout)
    if status is not None:
        return status
    with adapter:
        from .harness.adapter import NotApplicable
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
    p = _Parser(prog="ptlrpc-conformance lint-vectors",
                description="Check vector files; every problem is reported with file, vector id and field.")
    p.add_argument("paths", nargs="*", help="vector files or directories (default: the bundled vectors)")
    args = p.parse_args(argv)
    from .harness import scenario
    from .harness.vectors import VectorError, bundled_files, load_file, user_files
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


def exercised() -> dict[str, set[str]]:
    """requirement id -> the case ids that exercise it (vectors, derived cases, declared
    property and protocol cases), without running anything."""
    import inspect

    from .harness import scenario
    from .harness.derive import derive
    from .harness.vectors import load_all
    from .suites import test_properties, test_protocol, test_recovery, test_structs, test_target
    out: dict[str, set[str]] = {}
    for s in scenario.load_all():
        for r in s.requirements:
            out.setdefault(r, set()).add(f"{s.id}.exchange")
    vectors = load_all()
    for v in vectors:
        for r in v.requirements:
            out.setdefault(r, set()).add(f"{v.id}.decode")
            if v.verdict == "valid":
                out.setdefault("STRUCT-TRUNC-1" if v.op == "decode_struct" else r, set()).add(f"{v.id}.cut.decode")
    for c in derive([v for v in vectors if v.op == "decode"]):
        for r in c.requirements:
            out.setdefault(r, set()).add(c.id)
    for case in test_protocol.ENCODE_REFUSALS:
        out.setdefault("ENC-REJECT-1", set()).add(case)
    for module in (test_properties, test_protocol, test_structs, test_target, test_recovery):
        for _, fn in inspect.getmembers(module, inspect.isfunction):
            for mark in getattr(fn, "pytestmark", []):
                if mark.name == "conformance":
                    for r in mark.kwargs["requirements"]:
                        out.setdefault(r, set()).add(mark.kwargs["case"])
    return out


def cmd_requirements(argv: list[str]) -> int:
    p = _Parser(prog="ptlrpc-conformance requirements",
                description="List the requirement registry and how many cases exercise each requirement.")
    p.add_argument("--profile", default=None)
    args = p.parse_args(argv)
    from .harness import registry
    try:
        prof = registry.profile(args.profile).name
    except registry.RegistryError as e:
        print(f"ptlrpc-conformance: {e}", file=sys.stderr)
        return EXIT_USAGE
    cases = exercised()
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
    p = _Parser(prog="ptlrpc-conformance export",
                description="Write every data case - hand-written vectors and the variants derived from them - "
                            "for consumers in other languages.")
    p.add_argument("--format", choices=("json",), default="json")
    p.add_argument("--out", default="-", help="file to write (default: standard output)")
    p.add_argument("--profile", default=None)
    p.add_argument("--vectors", action="append", default=[], metavar="DIR")
    args = p.parse_args(argv)
    from . import __version__
    from .harness import registry
    from .harness.derive import derive
    from .harness.vectors import VectorError, load_all
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
            out["errno"] = "any" if v.any_errno else list(v.errno)
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
    p = _Parser(prog="ptlrpc-conformance check-trace",
                description="Check a recorded exchange with a target (JSON Lines records "
                            "{client, xid, request, reply}, or a pcap of LNet over TCP) against the "
                            "target invariants of docs/target-rules.md.")
    p.add_argument("file")
    p.add_argument("--json", action="store_true", help="print violations as JSON Lines")
    args = p.parse_args(argv)
    from .harness import trace
    try:
        records = trace.read(args.file)
    except trace.TraceError as e:
        print(f"ptlrpc-conformance: {e}", file=sys.stderr)
        return EXIT_USAGE
    violations = trace.check(records)
    exchanges = sum(1 for r in records if "event" not in r)
    for v in violations:
        if args.json:
            print(json.dumps({"record": v.record, "client": v.client, "xid": v.xid, "rule": v.rule,
                              "message": v.message}))
        else:
            print(f"{args.file}:{v.record}: {v.rule}: client {v.client} xid {v.xid}: {v.message}")
    if not args.json:
        print(f"{exchanges} exchanges, {len(violations)} violations", file=sys.stderr)
    return EXIT_FAIL if violations else EXIT_OK


def cmd_bench(argv: list[str]) -> int:
    """Throughput of the harness and of IUTs on this machine (harness/bench.py)."""
    from .harness import bench
    return bench.main(argv)


def cmd_mutants(argv: list[str]) -> int:
    """The suite against every mutant of the reference, with the mutation score (harness/mutation.py)."""
    from .harness import mutation
    return mutation.main(argv)


def cmd_certification_doc(argv: list[str]) -> int:
    """A Markdown certification document from a report.json (harness/certdoc.py)."""
    from .harness import certdoc
    return certdoc.main(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return EXIT_OK
    if argv and argv[0] == "--version":
        from . import __version__
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
               "bench": cmd_bench, "certification-doc": cmd_certification_doc, "mutants": cmd_mutants}[command]
    try:
        return handler(argv)
    except KeyboardInterrupt:
        print("ptlrpc-conformance: interrupted", file=sys.stderr)
        return EXIT_FAIL


if __name__ == "__main__":
    sys.exit(main())
