"""check-trace: the target invariants over a recorded exchange (docs/check-trace.md).

A trace is JSON Lines, one record per request in the order the target received them:

    {"client": "c1", "xid": 17, "request": "d30bd00b...", "reply": "d30bd00b..." | null}

(`reply` null: the target sent none).  Optional members: `"event": "restart"` or
`"event": "recovery_end"` lines (no other member needed) tell the checker of a target
restart and of the end of its recovery; without them a restart is inferred from a connect
reply with MSG_CONNECT_RECOVERING.  A pcap of LNet over TCP is read by harness/capture/pcap.py
(pairing requests and replies by match bits).
"""
from __future__ import annotations

import json
import pathlib

from ptlrpc_conformance.harness.capture import pcap
from ptlrpc_conformance.harness.ost.invariants import TargetChecker, Violation

PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a")


class TraceError(ValueError):
    """A trace that cannot be read: names the file and line."""


NOT_A_TRACE = "not a JSON Lines trace or a pcap"


def read_jsonl(path: str | pathlib.Path) -> list[dict]:
    records = []
    name = str(path)
    try:
        raw = pathlib.Path(path).read_bytes()
    except OSError as e:
        raise TraceError(f"{name}: cannot read: {e.strerror or e}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise TraceError(f"{name}: {NOT_A_TRACE}: byte 0x{raw[e.start]:02x} at offset {e.start} "
                         "is not UTF-8 text") from None
    offset = 0                          # of the line in the file, in bytes
    for n, line in enumerate(text.splitlines(keepends=True), 1):
        start, offset = offset, offset + len(line.encode("utf-8"))
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        where = f"{name}:{n}"
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            if not records:             # the first record: the file is no trace at all
                raise TraceError(f"{name}: {NOT_A_TRACE}: line {n} (offset {start + e.pos}) is not JSON: "
                                 f"{e.msg}") from None
            raise TraceError(f"{where}: not JSON (offset {start + e.pos}): {e.msg}") from None
        if not isinstance(rec, dict):
            raise TraceError(f"{where}: a record must be a JSON object")
        if "event" in rec:
            if rec["event"] not in ("restart", "recovery_end"):
                raise TraceError(f"{where}: event must be 'restart' or 'recovery_end', not {rec['event']!r}")
            records.append({"event": rec["event"], "line": n})
            continue
        client, xid = rec.get("client"), rec.get("xid")
        if not isinstance(client, str):
            raise TraceError(f"{where}: 'client' must be a string")
        if not isinstance(xid, int) or isinstance(xid, bool) or xid < 0:
            raise TraceError(f"{where}: 'xid' must be a non-negative integer")
        out = {"client": client, "xid": xid, "line": n}
        for key, nullable in (("request", False), ("reply", True)):
            value = rec.get(key)
            if value is None:
                if not nullable or key not in rec:
                    raise TraceError(f"{where}: '{key}' is missing" + ("" if nullable else " (a hex string)"))
                out[key] = None
                continue
            if not isinstance(value, str):
                raise TraceError(f"{where}: '{key}' must be a hex string{' or null' if nullable else ''}")
            try:
                out[key] = bytes.fromhex(value)
            except ValueError:
                raise TraceError(f"{where}: '{key}' is not valid hex") from None
        records.append(out)
    return records


def read(path: str | pathlib.Path) -> list[dict]:
    """Records of a JSON Lines trace or a pcap capture.  A file that is neither, or that holds
    no exchange ("nothing to check"), is a TraceError: an empty capture must not pass."""
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as e:
        raise TraceError(f"{path}: cannot read: {e.strerror or e}") from None
    if head in PCAP_MAGICS:
        try:
            records = pcap.read_pcap(path)
        except ValueError as e:
            raise TraceError(str(e)) from None
        for i, r in enumerate(records, 1):
            r.setdefault("line", r.get("packet", i))     # a pcap record is named by its request's packet
        if not records:
            raise TraceError(f"{path}: nothing to check: the capture holds no LNet request")
        return records
    records = read_jsonl(path)
    if not any("event" not in r for r in records):
        raise TraceError(f"{path}: nothing to check: the trace holds no exchange"
                         + (" (only events)" if records else ""))
    return records


def check(records: list[dict]) -> list[Violation]:
    checker = TargetChecker()
    out: list[Violation] = []
    for r in records:
        if r.get("event") == "restart":
            checker.restart()
        elif r.get("event") == "recovery_end":
            checker.recovery_ended()
        else:
            out += checker.observe(r["client"], r["xid"], r["request"], r["reply"], r["line"])
    return out
