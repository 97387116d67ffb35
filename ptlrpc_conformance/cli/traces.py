"""The commands about recorded traffic with a target: `check-trace` (the target invariants
over a JSON Lines or pcap trace) and `record-trace` (replay a scenario, write its trace)."""
from __future__ import annotations

import json
import pathlib
import sys

from ptlrpc_conformance.cli.common import iut_preflight
from ptlrpc_conformance.harness import options
from ptlrpc_conformance.harness.options import EXIT_FAIL, EXIT_OK, EXIT_USAGE, Parser
from ptlrpc_conformance.harness.ost import trace


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
    options.add_arguments(p, options.command_options("decode") + [options.BY_DEST["profile"]])
    args = p.parse_args(argv)
    problems = options.writable_file(args.out, "--out") if args.out != "-" else []
    from ptlrpc_conformance.harness import settings
    from ptlrpc_conformance.harness.data import registry
    try:
        run = settings.for_profile(args.profile)
    except registry.RegistryError as e:
        problems.append(str(e))
    known = {s.id: s for s in scenarios.load_all()}
    if args.scenario and args.scenario not in known:
        problems.append(f"--scenario {args.scenario}: unknown scenario{options.closest(args.scenario, known)}")
    for line in problems:
        print(f"ptlrpc-conformance record-trace: {line}", file=sys.stderr)
    if problems:
        return EXIT_USAGE
    status, adapter = iut_preflight(args.iut, args.iut_timeout)
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
            text, failed = record.record(chosen, adapter, release=run.release, reconstruct=run.reconstruct)
        except (record.RecordError, scenarios.TargetError) as e:
            print(f"ptlrpc-conformance record-trace: {chosen.id}: {e}", file=sys.stderr)
            return EXIT_FAIL
        except scenarios.ScenarioNotApplicable as e:
            print(f"ptlrpc-conformance record-trace: {chosen.id} cannot be recorded against {adapter.hello.name} "
                  f"in this run (not applicable, not a failure): {e}", file=sys.stderr)
            return EXIT_FAIL
    if args.out == "-":
        sys.stdout.write(text)
    else:
        pathlib.Path(args.out).write_text(text, encoding="utf-8")
    lines = text.count("\n")
    print(f"record-trace: {chosen.id} against {adapter.hello.name} (profile {run.profile}): {lines} lines"
          + ("" if args.out == "-" else f" written to {args.out}")
          + (f"; the scenario found {len(failed)} problem(s): {failed[0]}" if failed else ""), file=sys.stderr)
    return EXIT_FAIL if failed else EXIT_OK
