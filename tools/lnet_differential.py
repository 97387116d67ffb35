#!/usr/bin/env python3
"""The loopback differential of issue 35 (docs/lnet-tcp.md): a target IUT served over LNet TCP
and certified through `--iut lnet-tcp:` gives, case by case, the verdicts of the same IUT
certified directly.

    python3 tools/lnet_differential.py [--iut reference] [-n N|auto] [--area A ...] [--case ID ...]
        [--examples N] [--drop SECONDS] [--out DIR] [--baseline IUT] [--no-tshark]

For each xdist worker (one serially) it starts `ptlrpc-conformance serve --iut IUT` on 127.0.0.1
with a control socket and a pcap of its own, certifies the selection (default: --area target
--area recovery) through
`lnet-tcp:127.0.0.1@tcp?port=P+{worker}&control=DIR/control-{worker}&mode=destructive` (restart and
reset over the control socket), certifies the same selection with `--iut IUT` in-process, and
compares each case's verdict and charged requirements (failed_requirements, exercised).  With
--baseline (e.g. `exec:python3 -m ptlrpc_conformance.reference`) the selection is certified a
third time through that IUT, compared too, and the live run's time is given as a multiple of it.

Then tshark reads every capture (each serve's --pcap, each worker's live-*.pcap): a frame it
marks malformed fails the run unless the malformation is past the LNet layer (the frame was
dissected as Lustre) and its PtlRPC message is a request the suite sent deliberately irregular,
or the reply to one (same match bits, same pid): a request is that when its bytes are, unchanged,
one the run's io-log records, and the suite's own reading of the message (live_safety.parse, the
opcodes of spec/target.yaml) finds it irregular: not a lustre_msg_v2 whose buffers fit, an opcode
the spec does not model, or a body buffer shorter than ost_body.

Prints "cases compared: N, differences: D" and exits 1 on any difference or unexplained
malformed frame (listed), 2 when a run could not be made.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = "lustre-OST0000_UUID"
SERVE_START = 30.0                  # seconds a serve may take to listen
RUN_LIMIT = 1800.0                  # seconds a certify may take


def _env() -> dict:
    env = dict(os.environ)
    paths = [str(ROOT), str(ROOT / "tests")] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))      # python:independent_ost:... loads
    env.pop("PYTEST_XDIST_WORKER", None)
    return env


def _ports(count: int) -> int:
    """A base port B with B .. B+count-1 free on 127.0.0.1 now."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base + count > 65535:
            continue
        free = True
        for p in range(base + 1, base + count):
            with socket.socket() as s:
                try:
                    s.bind(("127.0.0.1", p))
                except OSError:
                    free = False
                    break
        if free:
            return base
    raise SystemExit("lnet_differential: no run of free ports on 127.0.0.1")


def _workers(jobs: str | None) -> int:
    if jobs in (None, "0", "1"):
        return 1
    return os.cpu_count() or 1 if jobs == "auto" else int(jobs)


class Served:
    """One `serve` subprocess: its port, control socket and pcap."""

    def __init__(self, iut: str, port: int, control: Path, pcap: Path, log: Path, accept_all: bool = False):
        self.port, self.control, self.pcap = port, control, pcap
        self.log = open(log, "w")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ptlrpc_conformance", "serve", "--listen", f"127.0.0.1:{port}",
             "--control", str(control), "--iut", iut, "--pcap", str(pcap)] + (["--accept-all"] if accept_all else []),
            stdout=self.log, stderr=subprocess.STDOUT, env=_env(), cwd=ROOT)
        deadline = time.monotonic() + SERVE_START
        while not control.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"lnet_differential: serve on port {port} did not start; see {log}")
            time.sleep(0.05)

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def certify(iut: str, out: Path, selection: list[str], jobs: int, extra: list[str]) -> tuple[dict, float]:
    """Certify `selection` through `iut` into `out`; (report, seconds)."""
    cmd = [sys.executable, "-m", "ptlrpc_conformance", "certify", "--iut", iut, "--out", str(out), "-q",
           "--io-log", str(out / "io.log"), *selection, *extra]
    if jobs > 1:
        cmd += ["-n", str(jobs)]
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    run = subprocess.run(cmd, env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=RUN_LIMIT)
    took = time.monotonic() - started
    report = out / "report.json"
    if not report.exists():
        sys.stderr.write(run.stdout[-3000:] + run.stderr[-3000:])
        raise SystemExit(f"lnet_differential: certify --iut {iut!r} wrote no report (exit {run.returncode})")
    data = json.loads(report.read_text())
    if data.get("incomplete"):
        raise SystemExit(f"lnet_differential: certify --iut {iut!r} did not run: {data.get('incomplete_reason')}")
    return data, took


def _cases(report: dict) -> dict:
    return {c["id"]: c for c in report["cases"]}


def compare(base: dict, other: dict, name: str) -> tuple[int, list[str]]:
    """(cases compared, the differences as lines) between two reports of one selection."""
    a, b = _cases(base), _cases(other)
    lines = []
    for cid in sorted(set(a) | set(b)):
        if cid not in a or cid not in b:
            lines.append(f"{cid}: only in {'the direct run' if cid in a else name}")
            continue
        for key in ("verdict", "failed_requirements", "exercised"):
            x, y = a[cid].get(key), b[cid].get(key)
            if (sorted(x) if isinstance(x, list) else x) != (sorted(y) if isinstance(y, list) else y):
                lines.append(f"{cid}: {key} {x!r} directly, {y!r} {name}")
    return len(set(a) & set(b)), lines


# -- the captures through tshark ---------------------------------------------------------

TSHARK_FIELDS = ("frame.number", "frame.protocols", "lnet.msg_type", "lnet.msg_dst_match_bits",
                 "lnet.src_pid", "lnet.dest_pid", "lnet.payload_length", "lnet.bad_buflen", "lnet.bad_type", "tcp.payload",
                 "tcp.reassembled.data")


def _frames(pcap: Path, malformed_only: bool) -> list[dict]:
    cmd = ["tshark", "-r", str(pcap), "-T", "fields", "-E", "occurrence=f"]
    for f in TSHARK_FIELDS:
        cmd += ["-e", f]
    if malformed_only:
        cmd += ["-Y", "_ws.malformed || lnet.bad_buflen || lnet.bad_type"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if run.returncode != 0:
        raise SystemExit(f"lnet_differential: tshark -r {pcap}: {run.stderr.strip()[-500:]}")
    return [dict(zip(TSHARK_FIELDS, line.split("\t"))) for line in run.stdout.splitlines() if line]


def _message(frame: dict) -> bytes | None:
    """The PtlRPC message of an LNet PUT frame: its TCP data (reassembled when its headers came
    in segments of their own) after the ksock and LNet headers; None when that is not as long as
    the LNet header's payload_length says (the LNet framing itself is wrong)."""
    from ptlrpc_conformance.harness.transport.lnet_engine import wire
    data = bytes.fromhex((frame.get("tcp.reassembled.data") or frame["tcp.payload"]).replace(":", ""))
    msg = data[wire.layout("ksock_msg_hdr").size + wire.layout("lnet_hdr_nid4").size:]
    return msg if frame.get("lnet.payload_length", "").isdigit() and len(msg) == int(frame["lnet.payload_length"]) \
        else None


def irregular(msg: bytes) -> str | None:
    """Why the suite's own reading finds a request irregular, or None."""
    from ptlrpc_conformance import spec
    from ptlrpc_conformance.harness.transport import live_safety as safety
    p = safety.parse(msg)
    if p is None:
        return "not a lustre_msg_v2 whose buffers fit"
    opc = p.body("pb_opc")
    t = spec.target()
    if opc is None:
        return "no ptlrpc_body"
    known = {spec.constant(n): v for n, v in t["opcodes"].items()}
    if opc not in known:
        return f"opcode {opc} is not one spec/target.yaml models"
    if known[opc].get("has_body") and len(p.buffer(1) or b"") < safety.S.size("ost_body"):
        return "its body buffer is shorter than ost_body"
    if opc == spec.constant("OST_CONNECT"):         # the TGT-CONN-3 and TGT-CONN-4 scenarios
        ocd = p.buffer(safety.CONNECT_BUFFERS["ocd"]) or b""
        if len(ocd) > safety.S.size("obd_connect_data"):
            return "its obd_connect_data buffer is longer than the structure"
        for key in ("target", "client"):
            raw = p.buffer(safety.CONNECT_BUFFERS[key]) or b""
            if len(raw) >= safety.UUID_SIZE and 0 not in raw[:safety.UUID_SIZE]:
                return f"its {key} UUID has no NUL within sizeof(struct obd_uuid)"
    return None


def _sans_uuids(msg: bytes) -> bytes:
    """A request with a connect's UUID buffers and its pb_last_xid zeroed: lnet-tcp writes the
    live target's and the run's own UUIDs over the suite's (live_safety.with_uuids) and, on the
    shared connection, moves pb_last_xid with the XIDs it makes the node's own
    (live_safety.with_last_xid), so a request on the wire is the one the suite sent but for
    those bytes."""
    from ptlrpc_conformance import spec
    from ptlrpc_conformance.harness.transport import live_safety as safety
    msg = safety.with_last_xid(msg, lambda last: 0)
    p = safety.parse(msg)
    if p is None or p.body("pb_opc") != spec.constant("OST_CONNECT"):
        return msg
    out = bytearray(msg)
    for key in ("target", "client"):
        i = safety.CONNECT_BUFFERS[key]
        if i < len(p.spans):
            at, n = p.spans[i]
            out[at:at + n] = bytes(n)
    return bytes(out)


def check_captures(pcaps: list[Path], io_logs: list[Path]) -> tuple[int, list[str], list[str]]:
    """(frames read, accepted malformed frames, failing ones) over the captures."""
    sent = set()
    for log in io_logs:
        if log.exists():
            for line in log.read_text().splitlines():
                if line.startswith("> "):
                    try:
                        r = json.loads(line[2:])
                    except ValueError:
                        continue
                    if isinstance(r, dict) and r.get("op") == "exchange" and r.get("data"):
                        sent.add(_sans_uuids(bytes.fromhex(r["data"])))
    total, accepted, failing = 0, [], []
    for pcap in pcaps:
        frames = _frames(pcap, malformed_only=False)
        total += len(frames)
        deliberate = set()          # (match bits, pid) of the requests sent deliberately irregular
        for f in frames:
            if f["lnet.msg_type"] != "1" or "lustre" not in f["frame.protocols"]:
                continue
            msg = _message(f)
            if msg is not None and _sans_uuids(msg) in sent and irregular(msg):
                deliberate.add((f["lnet.msg_dst_match_bits"], f["lnet.src_pid"]))
                deliberate.add((f["lnet.msg_dst_match_bits"], f["lnet.dest_pid"]))
        for f in _frames(pcap, malformed_only=True):
            where = f"{pcap.name} frame {f['frame.number']}"
            layers = f["frame.protocols"].split(":")
            msg = _message(f)
            if "lnet" not in layers or "lustre" not in layers or f["lnet.bad_type"] or msg is None:
                failing.append(f"{where}: malformed at the LNet layer ({f['frame.protocols']}, payload_length "
                               f"{f['lnet.payload_length'] or '?'})")
                continue
            why = irregular(msg) if _sans_uuids(msg) in sent else None
            if why:
                accepted.append(f"{where}: a request the suite sent irregular ({why})")
            elif (f["lnet.msg_dst_match_bits"], f["lnet.dest_pid"]) in deliberate \
                    or (f["lnet.msg_dst_match_bits"], f["lnet.src_pid"]) in deliberate:
                accepted.append(f"{where}: the reply to a request the suite sent irregular")
            else:
                failing.append(f"{where}: malformed PtlRPC message no case sent deliberately")
    return total, accepted, failing


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--iut", default="reference", help="the target IUT served and certified directly")
    ap.add_argument("-n", "--jobs", help="xdist workers for the lnet-tcp run (and the direct one): N or auto")
    ap.add_argument("--area", action="append", help="an area of the selection (default: target, recovery)")
    ap.add_argument("--case", action="append", default=[], help="a case of the selection (repeatable)")
    ap.add_argument("--examples", type=int, help="examples per property test (default: certify's)")
    ap.add_argument("--drop", type=float, default=0.3, help="lnet-tcp's drop window (seconds; 0.3)")
    ap.add_argument("--srcport", default="privileged" if os.geteuid() == 0 else "any",
                    choices=("privileged", "any"), help="lnet-tcp's srcport (privileged when root)")
    ap.add_argument("--baseline", metavar="IUT", help="also certify through IUT (e.g. exec:...) and time it")
    ap.add_argument("--out", type=Path, help="keep the reports, logs and captures here")
    ap.add_argument("--no-tshark", action="store_true", help="do not read the captures with tshark")
    args = ap.parse_args(argv)

    areas = args.area or ([] if args.case else ["target", "recovery"])
    selection = [a for area in areas for a in ("--area", area)]
    selection += [a for c in args.case for a in ("--case", c)]
    extra = ["--examples", str(args.examples)] if args.examples else []
    jobs = _workers(args.jobs)
    out = args.out or Path(tempfile.mkdtemp(prefix="lnet-differential-"))
    out.mkdir(parents=True, exist_ok=True)
    base = _ports(jobs)
    servers: list[Served] = []
    try:
        for w in range(jobs):
            servers.append(Served(args.iut, base + w, out / f"control-{w}", out / f"serve-{w}.pcap",
                                  out / f"serve-{w}.log", accept_all=args.srcport == "any"))
        live_iut = (f"lnet-tcp:127.0.0.1@tcp?target={TARGET}&port={base}+{{worker}}&drop={args.drop:g}"
                    f"&srcport={args.srcport}&control={out}/control-{{worker}}&mode=destructive")
        live, live_s = certify(live_iut, out / "live", selection + ["--scratch-target", f"{TARGET}@127.0.0.1@tcp"],
                               jobs, extra)
    finally:
        for s in servers:
            s.stop()
    direct, direct_s = certify(args.iut, out / "direct", selection, jobs, extra)
    compared, differences = compare(direct, live, "over lnet-tcp")
    print(f"selection: {' '.join(selection + extra)}; -n {jobs if jobs > 1 else 0}; iut {args.iut}")
    print(f"lnet-tcp over serve: {live_s:.1f} s; {args.iut} directly: {direct_s:.1f} s")
    if args.baseline:
        other, other_s = certify(args.baseline, out / "baseline", selection, jobs, extra)
        n, more = compare(direct, other, f"through {args.baseline}")
        differences += more
        print(f"{args.baseline}: {other_s:.1f} s; lnet-tcp over serve / {args.baseline} = {live_s / other_s:.2f}x "
              f"({n} cases compared)")
    print(f"cases compared: {compared}, differences: {len(differences)}")
    for line in differences:
        print(f"  {line}")
    failing: list[str] = []
    if not args.no_tshark:
        if shutil.which("tshark") is None:
            print("tshark: not installed, captures not read (install tshark, or give --no-tshark)")
            return 2
        pcaps = sorted(out.glob("serve-*.pcap")) + sorted((out / "live").glob("live*.pcap"))
        total, accepted, failing = check_captures(pcaps, [out / "live" / "io.log"])
        print(f"tshark: {len(pcaps)} captures, {total} frames, {len(accepted)} malformed frames of requests "
              f"the suite sent irregular (or their replies), {len(failing)} other malformed frames")
        for line in failing:
            print(f"  {line}")
    print(f"reports in {out}")
    return 1 if differences or failing or compared == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
