"""check-trace: the target invariants over a recorded exchange (docs/check-trace.md).

A trace is JSON Lines, one record per request in the order the target received them:

    {"client": "c1", "xid": 17, "request": "d30bd00b...", "reply": "d30bd00b..." | null}

(`reply` null: the target sent none).  Optional members: `"event": "restart"`,
`"event": "recovery_expiry"` and `"event": "recovery_end"` lines (no other member needed) tell
the checker of a target restart, of an expiry of its recovery window (which may end recovery
or extend it) and of the known end of its recovery; without them a restart is inferred from a
connect reply with MSG_CONNECT_RECOVERING, and the end of recovery from a connect reply
without it or an answered final ping.  A pcap of LNet over TCP is read by harness/capture/pcap.py
(pairing requests and replies by match bits).

A capture holds the traffic of a whole file system: the MGS, MDTs and OSTs, on one server or
several (docs/target-rules.md §6).  Records that name a `portal` (every pcap record; JSON
Lines records may carry `portal` and `server` too) are first split per target: a connect
names its target in buffer 1 and its reply returns the cookie later requests carry in
`pb_handle`, keyed by server; only OST targets (connected with OST_CONNECT) are judged, each
with a checker of its own.  Records that cannot be attributed are counted, not judged;
opcodes the rules do not model are judged on everything but TGT-TRANSNO-2 and counted.
Exchanges that overlap (several requests in flight: a request sent before an earlier reply
was captured) are judged on transno order and last_committed growth only against replies
captured before them.

A trace does not show evictions (lock callback timeouts, the ping evictor, the end or abort
of recovery) nor what happened before it began: what only those make possible is allowed and
reported as a note (`Result.notes`), never as a violation (harness/ost/invariants.py).
"""
from __future__ import annotations

import bisect
import json
import pathlib
from dataclasses import dataclass, field

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.capture import pcap
from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.ost.invariants import Note, TargetChecker, Violation

PCAP_MAGICS = (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4", b"\x4d\x3c\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x0a\x0d\x0d\x0a")


class TraceError(ValueError):
    """A trace that cannot be read: names the file and line."""


NOT_A_TRACE = "not a JSON Lines trace or a pcap"
EVENTS = ("restart", "recovery_expiry", "recovery_end")


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
            if rec["event"] not in EVENTS:
                raise TraceError(f"{where}: event must be one of {', '.join(repr(e) for e in EVENTS)}, "
                                 f"not {rec['event']!r}")
            records.append({"event": rec["event"], "line": n})
            continue
        client, xid = rec.get("client"), rec.get("xid")
        if not isinstance(client, str):
            raise TraceError(f"{where}: 'client' must be a string")
        if not isinstance(xid, int) or isinstance(xid, bool) or xid < 0:
            raise TraceError(f"{where}: 'xid' must be a non-negative integer")
        out = {"client": client, "xid": xid, "line": n}
        if "replied_at" in rec:         # a deferred reply (record-trace): the line during which it was sent
            at = rec["replied_at"]
            if not isinstance(at, int) or isinstance(at, bool) or at < n:
                raise TraceError(f"{where}: 'replied_at' must be the number of this line or a later one")
            out["replied_at"] = at
        for key in ("portal", "server"):
            if key in rec:
                ok = isinstance(rec[key], int) and not isinstance(rec[key], bool) and rec[key] >= 0 \
                    if key == "portal" else isinstance(rec[key], str) and rec[key]
                if not ok:
                    raise TraceError(f"{where}: '{key}' must be " + ("a non-negative integer" if key == "portal"
                                                                     else "a non-empty string"))
                out[key] = rec[key]
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


def _reply_match_bits(request: bytes) -> int | None:
    """The match bits a 2.15+ server may reply on instead of the XID: the request's pb_mbits
    (ptl_send_rpc sets it for a bulk RPC or with OBD_CONNECT2_REP_MBITS granted, and
    ptlrpc_server_handle_req_in makes it the reply's match bits when the export has that
    flag; LU-14594).  None for a request the suite cannot read or without pb_mbits."""
    msg, _ = wire.try_parse(request, "request")
    return (msg.body.get("pb_mbits") or None) if msg is not None else None


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
            records = pcap.read_pcap(path, reply_bits=_reply_match_bits)
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


@dataclass
class Result:
    """What check-trace found: the violations, and how much of the trace it judged."""
    violations: list[Violation] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)     # what was allowed because the trace cannot tell
    exchanges: int = 0              # request records (events aside)
    judged: int = 0                 # exchanges judged by the target rules
    unmodelled: int = 0             # of those, opcodes the rules do not model (not judged on TGT-TRANSNO-2)
    other_targets: int = 0          # exchanges with targets that are not OSTs (MGS, MDT)
    unattributed: int = 0           # exchanges no connect in the trace names the target of
    targets: list[str] = field(default_factory=list)

    def summary(self) -> str:
        out = f"{self.exchanges} exchanges, {len(self.violations)} violations"
        if self.notes:
            out += f", {len(self.notes)} allowed and noted above"
        parts = [f"{self.judged} judged" + (f" on {len(self.targets)} OST target(s)" if self.targets else "")]
        if self.unmodelled:
            parts.append(f"{self.unmodelled} of opcodes the target rules do not model (not judged on transnos)")
        if self.other_targets:
            parts.append(f"{self.other_targets} with other targets (MGS, MDT: not judged)")
        if self.unattributed:
            parts.append(f"{self.unattributed} not attributed to a target (no connect seen: not judged)")
        return out + " (" + "; ".join(parts) + ")"


_CONNECTS = {spec.constant("OST_CONNECT"): "ost", spec.constant("MDS_CONNECT"): "mdt",
             spec.constant("MGS_CONNECT"): "mgs"}


def _service(portal) -> str | None:
    """The kind of service a request portal belongs to (spec/target.yaml `portals`)."""
    row = spec.target()["portals"]["requests"].get(portal)
    return row["service"] if row else None


def _uuid(buf: bytes) -> str:
    return buf.split(b"\0", 1)[0].decode("latin-1")


def _split(records: list[dict]) -> tuple[dict, Result]:
    """Records attributed to OST targets: {target: [(client name, record)]} in order."""
    result = Result()
    targets: dict[tuple, list] = {}
    cookies: dict[tuple, tuple] = {}            # (server, cookie) -> (target, kind, client name)
    for r in records:
        if "event" in r:
            for recs in targets.values():
                recs.append((None, r))
            continue
        result.exchanges += 1
        server = r.get("server", "")
        req, _ = wire.try_parse(r["request"], "request")
        if req is None:
            result.unattributed += 1
            continue
        opc = req.body["pb_opc"]
        if opc in _CONNECTS and len(req.buffers) >= 3:
            target = (server, _uuid(req.buffers[1]))
            name = f"{r['client']} {_uuid(req.buffers[2])}"
            kind = _CONNECTS[opc]
            rep, _ = wire.try_parse(r["reply"], "reply")
            if rep is not None and rep.body["pb_type"] == wire.REPLY and rep.status == 0 and rep.body["pb_handle"]:
                cookies[(server, rep.body["pb_handle"])] = (target, kind, name)
        else:
            found = cookies.get((server, req.body["pb_handle"])) if req.body["pb_handle"] else None
            if found is None:
                result.unattributed += 1
                continue
            target, kind, name = found
        if kind != "ost" or _service(r.get("portal")) in ("mgs", "mdt"):
            result.other_targets += 1   # an MGS or MDT target, or a request on their portals
            continue
        targets.setdefault(target, []).append((name, r))
    return targets, result


def _event(checker: TargetChecker, event: str) -> bool:
    """Tell the checker of an event line; True: recovery ended with it (an expiry that left no
    client replaying), to be marked once the replies it released are judged."""
    if event == "restart":
        checker.restart()
    elif event == "recovery_expiry":
        return checker.expired()
    else:
        checker.recovery_ended()
    return False


def judge_in_order(checker: TargetChecker, records: list[dict]) -> list[Violation]:
    """Feed one target's records, one exchange at a time, to `checker`: (the violations).  A
    deferred reply is judged where it was sent: just before the record it was sent during, or
    just after the event that released it (an expiry of the recovery window evicts first, then
    answers what it released, then, when no client is left replaying, ends recovery)."""
    events = {r["line"] for r in records if "event" in r}

    def order(r: dict) -> tuple[int, int]:
        if "replied_at" in r:
            return (r["replied_at"], 1 if r["replied_at"] in events else 0)
        return (r["line"], 0 if "event" in r else 1)

    out: list[Violation] = []
    ends_after = None               # the line of an expiry that ended recovery
    for r in sorted(records, key=order):
        if ends_after is not None and order(r)[0] > ends_after:
            checker.recovery_ended()
            ends_after = None
        if "event" in r:
            if _event(checker, r["event"]):
                ends_after = r["line"]
        else:
            out += checker.observe(r["client"], r["xid"], r["request"], r["reply"], r["line"])
    if ends_after is not None:
        checker.recovery_ended()
    return out


def check_trace(records: list[dict]) -> Result:
    """Judge a trace (docs/check-trace.md).  Records without a `portal` are one target's
    exchanges, one at a time (a trace the suite wrote); with one, they are split per target
    first and may overlap.  The checkers allow what unseen evictions and history make possible
    (`sees_all=False`) and say so in the notes."""
    if not any("portal" in r for r in records if "event" not in r):
        checker = TargetChecker(sees_all=False)
        result = Result(exchanges=sum(1 for r in records if "event" not in r))
        result.violations = judge_in_order(checker, records)
        result.judged = result.exchanges
        result.unmodelled = checker.unmodelled
        result.notes = checker.notes
        return result
    targets, result = _split(records)
    for (server, uuid), recs in targets.items():
        result.targets.append(f"{uuid}@{server}" if server else uuid)
        checker = TargetChecker(sees_all=False)
        timed = [(n, r) for n, r in recs if n is not None]
        # the highest transno of any request sent before each reply was captured (TGT-TRANSNO-3)
        sends = sorted((_sent(r), _transno(r)) for _, r in timed)
        times = [at for at, _ in sends]
        highest, top = [], 0
        for _, t in sends:
            top = max(top, t)
            highest.append(top)
        for name, r in recs:
            if name is None:
                if _event(checker, r["event"]):
                    checker.recovery_ended()
                continue
            done = _answered(r)
            k = bisect.bisect_left(times, done)
            ceiling = highest[k - 1] if k else 0
            result.violations += checker.observe(name, r["xid"], r["request"], r["reply"], r["line"],
                                                 sent_at=_sent(r), answered_at=done, ceiling=ceiling,
                                                 portal=r.get("portal"))
            result.judged += 1
        result.unmodelled += checker.unmodelled
        result.notes += checker.notes
    result.violations.sort(key=lambda v: v.record)
    result.notes.sort(key=lambda v: v.record)
    return result


def _sent(r: dict) -> int:
    return r.get("packet", r["line"])


def _answered(r: dict) -> int:
    return r.get("reply_packet", _sent(r))


def _transno(r: dict) -> int:
    rep, _ = wire.try_parse(r["reply"], "reply")
    return rep.body["pb_transno"] if rep is not None else 0


def check(records: list[dict]) -> list[Violation]:
    return check_trace(records).violations
