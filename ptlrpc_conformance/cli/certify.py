"""The commands that run the suite: `certify` (and `certify --list`), `run` (one case again)
and `list` (the cases and their requirements, nothing run).  The inputs are checked before
anything runs, then the IUT's preflight, then the pytest session (cli/session.py), or the
release matrix (cli/matrix.py)."""
from __future__ import annotations

import argparse
import gc
import pathlib
import sys

from ptlrpc_conformance.cli.common import could_not_start, iut_preflight, suites_args
from ptlrpc_conformance.cli.matrix import certify_matrix, matrix_profiles
from ptlrpc_conformance.cli.session import Observer, conclude_run, report_mtime, run_session
from ptlrpc_conformance.harness import options
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.options import EXIT_FAIL, EXIT_IUT, EXIT_OK, EXIT_USAGE, Parser
from ptlrpc_conformance.harness.transport.adapter import IUTStartError
from ptlrpc_conformance.harness.transport.loader import smoke_check


def certify_parser() -> argparse.ArgumentParser:
    p = Parser(prog="ptlrpc-conformance certify",
                description="Run the conformance suite against an implementation and write report.json.")
    options.add_arguments(p, options.certify_options())
    p.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    return p


def cmd_certify(argv: list[str]) -> int:
    args = certify_parser().parse_args(argv)
    if args.list:
        return list_cases(args)
    # No garbage collection during start-up: the imports and the collection make hundreds of
    # thousands of objects that live as long as the run, and the collector walked them again
    # and again (about 0.1 s before the first case, 0.5-0.8 s a serial run).  The Observer
    # moves them out of its sight and turns it back on once the cases are collected, with a
    # larger young generation (runstate.RUN_GC_THRESHOLD); at the end they are in its sight
    # again, at the sizes they had (a caller that runs main() many times keeps no garbage).
    thresholds = gc.get_threshold()
    gc.disable()
    try:
        return _certify(args)
    finally:
        gc.set_threshold(*thresholds)
        gc.enable()
        gc.unfreeze()


def _input_problems(args) -> list[str]:
    """What the command line names, checked before anything runs (harness/options.py); the
    case ids and areas are checked by the plugin once the cases are collected."""
    problems = options.writable_dir(args.out, "--out")
    if args.io_log:
        problems += options.writable_file(args.io_log, "--io-log", make_parents=False)
    from ptlrpc_conformance.harness.outputs import gate
    problems += gate.file_problems(args.known_failures, args.update_known_failures)
    problems += options.requirement_ids(args.requirement, "--requirement")
    if (args.iut or "").startswith("lnet-tcp:") and args.jobs not in (None, "0", "1"):
        from ptlrpc_conformance.harness.transport.lnet_tcp import shared_control
        if shared_control(args.iut):
            problems.append(f"--iut {args.iut!r} with -n {args.jobs}: control= resets one served target, which the "
                            "workers would share; run without -n, or give each worker its own with {worker} (docs/live.md)")
    return problems


def _client_as_iut(args) -> list[str]:
    """--client COMMAND is the IUT client:COMMAND, whose cases are the client area's."""
    if args.client is None:
        return []
    import shlex
    import shutil
    if args.iut != options.BY_DEST["iut"].default:
        return [f"--client and --iut {args.iut!r}: give one of them (the client's OST is the suite's reference)"]
    try:
        argv = shlex.split(args.client)
    except ValueError as e:
        return [f"--client {args.client!r}: {e}"]
    if not argv or shutil.which(argv[0]) is None:
        return [f"--client {args.client!r}: {argv[0] if argv else 'an empty command'} is no program to run"]
    args.iut = "client:" + args.client
    if not (args.area or args.case):
        args.area = ["client"]
    return []


def _certify(args) -> int:
    from ptlrpc_conformance.harness.data.vectors import VectorError, load_all   # jsonschema: +130 ms
    problems = _client_as_iut(args) + _input_problems(args)
    if problems:
        for line in problems:
            print(f"ptlrpc-conformance: {line}", file=sys.stderr)
        return EXIT_USAGE
    try:
        profiles = matrix_profiles(args.profile)
        if profiles is None:
            registry.profile(args.profile)
    except registry.RegistryError as e:
        print(f"ptlrpc-conformance: {e}", file=sys.stderr)
        return EXIT_USAGE
    out = pathlib.Path(args.out)
    report_path = out / "report.json"
    try:
        load_all(args.vectors)
        if args.vectors:                    # their scenarios too (the bundled ones are the suite's)
            from ptlrpc_conformance.harness.ost import scenario                 # the vectors, ost/: +200 ms
            scenario.load_all(args.vectors)
        problems = _unknown_selection(args)
    except VectorError as e:
        print("ptlrpc-conformance: vector files have problems:\n  " + "\n  ".join(e.problems), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:       # from here on, a Ctrl-C gives a report marked incomplete
        return _start_failure(args, report_path, EXIT_FAIL, None)
    if problems:                    # refused before the IUT starts and before --out is written
        for line in problems:
            print(f"ptlrpc-conformance: {line}", file=sys.stderr)
        return EXIT_USAGE
    try:
        status, adapter = iut_preflight(args.iut, args.iut_timeout, **_live(args, out))
    except KeyboardInterrupt:       # the testee started by then is killed at exit (exec.py)
        return _start_failure(args, report_path, EXIT_FAIL, None)
    if status == EXIT_IUT:
        return _start_failure(args, report_path, status, adapter)
    if status is not None:
        return status
    hello = adapter.hello
    try:
        smoke = smoke_check(adapter)
    except IUTStartError as e:
        adapter.close()
        return _start_failure(args, report_path, *could_not_start(e))
    except KeyboardInterrupt:
        adapter.close()
        return _start_failure(args, report_path, EXIT_FAIL, None, hello.as_dict())
    if args.dry_run:
        try:
            return dry_run(args, adapter)
        finally:
            adapter.close()
    adapter.close()
    before = report_mtime(report_path)
    try:
        print(f"ptlrpc-conformance: certifying {hello.name} {hello.version} ({args.iut}); "
              f"capabilities: {', '.join(sorted(hello.capabilities)) or 'none'}", flush=True)
        for line in options.capability_warnings(hello):
            print(f"ptlrpc-conformance: {line}", flush=True)

        if profiles is not None:
            return certify_matrix(args, profiles, hello, smoke)
        return run_session(args, out, hello, smoke)
    except KeyboardInterrupt:       # before pytest's session began: pytest and its plugins loading
        if report_mtime(report_path) != before:
            raise                   # the run's report is written (and says what was interrupted)
        return _start_failure(args, report_path, EXIT_FAIL, None, hello.as_dict(), smoke)


def _live(args, out: pathlib.Path) -> dict:
    """load_adapter's options of an lnet-tcp: IUT for the preflight: its own pcap beside the run's."""
    if not (args.iut or "").startswith("lnet-tcp:"):
        return {}
    pcap = None if args.no_pcap else str(out / "live-preflight.pcap")
    if pcap:
        out.mkdir(parents=True, exist_ok=True)
    return {"scratch_target": args.scratch_target, "pcap": pcap}


def dry_run(args, adapter) -> int:
    """--dry-run: what the started IUT would be sent (its preflight said, for a live target), case
    by case: the scenario vectors whose every request passes the IUT's firewall, as written, and
    whose capabilities it declares, and those blocked (why); the stateful parts."""
    from ptlrpc_conformance.harness.data.registry import case_aliases
    from ptlrpc_conformance.harness.ost import scenario
    hello = adapter.hello
    live = hello.raw.get("live") or {}
    print(f"dry run: {hello.name} {hello.version}; capabilities: {', '.join(sorted(hello.capabilities))}")
    if live:
        print(f"  preflight: {live.get('target')} at {live.get('nid')} index {live.get('index')}, mode {live.get('mode')}, "
              f"statfs {live.get('statfs')}")
    blocked = getattr(adapter, "blocked", lambda data: None)
    chosen = set(args.case or ())
    areas = set(args.area or ())
    rows = []
    for s in scenario.load_all(args.vectors):
        case = f"{s.id}.exchange"
        if (chosen and case not in chosen) or (areas and case.split(".", 1)[0] not in areas):
            continue
        missing = [n for n in s.needs if n not in hello.capabilities]
        why = f"not applicable: needs capability {missing[0]!r}" if missing else None
        for n, step in enumerate(s.steps, 1):
            if why is None and step.op == "exchange":
                refused = blocked(step.request)
                if refused:
                    why = f"blocked: step {n}: {refused}"
        rows.append((case, why))
    for part, needs in (("target.stateful.exchange", ("target",)), ("recovery.stateful.restart", ("target", "restart"))):
        for case in case_aliases()[part]:
            if (chosen and case not in chosen) or (areas and case.split(".", 1)[0] not in areas):
                continue
            missing = [n for n in needs if n not in hello.capabilities]
            rows.append((case, f"not applicable: needs capability {missing[0]!r}" if missing else
                         "random requests: each one the firewall refuses ends the case not applicable" if live else None))
    for case, why in rows:
        print(f"  {'would run' if why is None or why.startswith('random') else 'blocked  '}  {case}"
              + (f"  ({why})" if why else ""))
    runs = sum(1 for _, why in rows if why is None or why.startswith("random"))
    print(f"dry run: {runs} of {len(rows)} target and recovery cases would run; {len(rows) - runs} blocked; "
          "nothing else was sent")
    return EXIT_OK


def _unknown_selection(args) -> list[str]:
    """--case and --area values that name no case or area of the run: the cases are collected
    (as `list` does, the IUT not started; the user's plugins and vectors too) and their ids
    checked as the plugin checks them (options.selection)."""
    if not (args.case or args.area):
        return []
    import contextlib
    import io
    import pytest                                                      # +170 ms

    class CaseIds:
        ids: list[str] = []

        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, items):
            self.ids = [dict(i.user_properties)["case_id"] for i in items if "case_id" in dict(i.user_properties)]

    def collect() -> set[str] | None:
        known: set[str] = set()
        for profile in matrix_profiles(args.profile) or [args.profile]:     # a release matrix: each release's
            ids = CaseIds()
            pargs = suites_args() + ["--collect-only", "-qq"]
            pargs += options.pytest_args(args, [o for o in options.certify_options() if o.dest == "vectors"])
            pargs += ["--conformance-profile", profile] if profile else []
            with contextlib.redirect_stdout(io.StringIO()):
                rc = int(pytest.main(pargs + list(args.pytest_args), plugins=[ids]))
            if rc != pytest.ExitCode.OK or not ids.ids:
                return None             # the run itself says what is wrong with its arguments
            known.update(ids.ids)
        return known

    from ptlrpc_conformance.harness.data import yamlcache
    key = _collection_key(args)
    known = collect() if key is None else yamlcache.remember("case-ids", key, collect)
    return [] if known is None else options.selection(args.case, args.area, known, "--case", "--area")


def _collection_key(args) -> bytes | None:
    """What the case ids of a run depend on besides the package (yamlcache.remember keys on its
    files): the profile, the user's vector files (their contents), pytest's arguments and
    environment.  None when a plugin from outside the package could add cases (`-p` of another
    module, PYTEST_PLUGINS): those are collected every time."""
    import hashlib
    import json
    import os
    from ptlrpc_conformance.harness.data.vectors import VectorError, user_files
    extra = list(args.pytest_args)
    plugins = [extra[i + 1] for i, a in enumerate(extra[:-1]) if a == "-p"] + \
        [a[2:] for a in extra if a.startswith("-p") and len(a) > 2]
    if os.environ.get("PYTEST_PLUGINS") or any(not (p.startswith("ptlrpc_conformance.") or p.startswith("no:"))
                                               for p in plugins):
        return None
    try:
        files = [(str(f), hashlib.sha256(f.read_bytes()).hexdigest()) for f in user_files(args.vectors or ())]
    except (OSError, VectorError):
        return None
    return json.dumps([args.profile, extra, os.environ.get("PYTEST_ADDOPTS", ""), files]).encode()


def _start_failure(args, report_path: pathlib.Path, status: int, why: str | None, hello: dict | None = None,
                   smoke=None) -> int:
    """The IUT could not start: report.json says so (`iut.start_failure`), no case ran.  With
    no `why`: a Ctrl-C before the first case (while the IUT or pytest started); report.json
    says the run is incomplete, as after a Ctrl-C during the cases."""
    from ptlrpc_conformance.harness.outputs import report as report_module   # +60 ms
    given = {o.config_dest: getattr(args, o.dest) for o in options.certify_options() if o.pytest}
    profiles = matrix_profiles(args.profile)        # a release matrix's report names its newest release
    profile = profiles[-1] if profiles else registry.profile(args.profile).name
    doc = report_module.start_failure_document(
        iut_spec=args.iut, message=why, exit_status=status, profile=profile, seed=args.seed,
        user_vectors=args.vectors, reproduce=options.reproduce_argv(given.get, {"profile": profile}),
        selected=report_module.selection(args.area, args.case, args.requirement, args.keyword, None, args.level),
        ignore_errno_class=bool(args.ignore_errno_class), hello=hello, smoke=smoke)
    report_module.remove_earlier_pages(report_path.parent, args.vectors or ())
    report_module.write(doc, report_path)
    return conclude_run(report_path, status, html=not args.no_html)


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
    args = certify_parser().parse_args(rest)
    args.case = list(args.case) + [case_id]
    if not any(a == "--out" or a.startswith("--out=") for a in rest):
        args.out = RUN_OUT          # a re-run of one case never replaces a certification's report
    return _certify(args)


RUN_OUT = "ptlrpc-conformance-run"       # `run`'s default --out (certify's: ptlrpc-conformance-report)


def cmd_list(argv: list[str]) -> int:
    p = Parser(prog="ptlrpc-conformance list", description="Print the cases and their requirements, run nothing.")
    options.add_arguments(p, options.command_options("list"))
    return list_cases(p.parse_args(argv))


def list_cases(args) -> int:
    """`list`, and `certify --list` (whose other options are ignored)."""
    import pytest                                                      # +170 ms
    pargs = suites_args() + ["--collect-only", "-qq", "--conformance-list"]
    pargs += options.pytest_args(args, options.command_options("list"))
    rc = int(pytest.main(pargs, plugins=[Observer()]))
    return EXIT_OK if rc == 0 else EXIT_USAGE
