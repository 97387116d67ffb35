"""`ptlrpc-conformance serve`: a target IUT played as an OST on LNet over TCP.

Any adapter whose IUT declares capability `target` (the reference, `exec:`, `python:`) is put
behind an LNet node (lnet_engine/node.py: `Listener`) and reached by real LNet peers:

- A PUT to one of the OST services' request portals (spec/target.yaml `portals`: the services
  `ost` and `mdt_or_ost`, i.e. 6, 7, 24, 28 and 31, as ofd/ofd_oss.c registers them) is one
  `exchange` with the IUT (docs/testee-protocol.md §2.4): the request's bytes, the XID = the
  PUT's match bits (ptlrpc/events.c: request_in_callback), and the client = the LNet process
  id the request's header names (src_nid, src_pid: lnet/lnet/lib-msg.c: lnet_build_msg_event
  makes the event's initiator of them, and request_in_callback the request's rq_peer),
  written as Lustre writes it (lnet/nidstrings.c: libcfs_idstr, "12345-NID", or "U<n>-NID"
  for a user-space process).  A PUT to any other portal finds no buffer and is dropped, as
  LNet drops it.
- The reply is a PUT to that process, on the connection the request came on, on the OST
  services' reply portal (OSC_REPLY_PORTAL 4, spec/lnet.yaml) with the request's match bits, or
  its pb_mbits when the client's connect was granted OBD_CONNECT2_REP_MBITS and the request is
  not a connect (ptlrpc/niobuf.c: ptlrpc_send_reply; ptlrpc/service.c:
  ptlrpc_server_handle_req_in), at offset `lustre_msg_early_size` (224) when the request's
  lm_flags asked for adaptive timeouts, else 0 (ptlrpc/sec_null.c: null_authorize).  Replies
  the IUT sends later (deferred during recovery, listed in an exchange's `replies` or in
  `end_recovery`'s) go the same way to the process whose request they answer, at that
  request's offset (on another connection from the same NID if that one has closed).
- The IUT is called by one thread at a time, whatever the number of peers.
- With `mgs`, a PUT to the MGS request portal (26) goes to the minimal MGS (lnet_mgs.py), whose
  replies go to the MGC reply portal (25).  It is the suite's model, not judged.
- Faults (`Fault`: drop, delay, early replies, a reset mid-reply, a NOOP storm) fall on the
  target's replies, drawn from one seeded generator.

The control operations (`Server.control`) are what `serve`'s control socket carries: `status`,
`reset` (the IUT's reset), `restart` (every connection dropped, a new incarnation, the IUT's
restart: a server that rebooted), `end_recovery` (its replies delivered), `fault` and `stop`.

Not done yet: bulk, and the LDLM enqueue of the MGS's config lock.
"""
from __future__ import annotations

import ipaddress
import json
import os
import random
import select
import socket
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.capture.pcap import reply_offset
from ptlrpc_conformance.harness.transport.lnet_engine.node import Connection, Listener, Message, Node
from ptlrpc_conformance.harness.transport.lnet_engine.wire import C, Nid
from ptlrpc_conformance.harness.transport.lnet_mgs import (buffers as _buffers, message,
                                                           pack_struct as _pack, round8 as _round8)

OST_PORTALS = frozenset(p for p, row in spec.target()["portals"]["requests"].items()
                        if row["service"] in ("ost", "mdt_or_ost"))
REPLY_PORTAL = spec.lnet()["portals"]["OSC_REPLY_PORTAL"]["value"]
DEFAULT_TARGET_UUID = spec.target()["target_uuid"]  # the OST the MGS names by default: the reference's
MGS_PORTAL = spec.mgs()["portals"]["MGS_REQUEST_PORTAL"]["value"]
MGC_REPLY_PORTAL = spec.mgs()["portals"]["MGC_REPLY_PORTAL"]["value"]
CONNECTS = frozenset(spec.constant(n) for n in ("OST_CONNECT", "MDS_CONNECT", "MGS_CONNECT"))
REPLY, ERR = spec.constant("PTL_RPC_MSG_REPLY"), spec.constant("PTL_RPC_MSG_ERR")
RECOVERY_FLAGS = spec.constant("MSG_REPLAY") | spec.constant("MSG_REQ_REPLAY_DONE") | spec.constant("MSG_LOCK_REPLAY_DONE")
FLAGS2, REP_MBITS = spec.constant("OBD_CONNECT_FLAGS2"), spec.constant("OBD_CONNECT2_REP_MBITS")
_HDR = spec.layout("lustre_msg_v2")
MAX_PENDING = 4096            # requests remembered for a reply still to come (deferred)
MAX_CONTROL_LINE = 1 << 16    # a control request longer than this is refused
CONTROL_TIMEOUT = 5.0         # a control client that sends nothing for this long is dropped
CONTROL_OPS = ("status", "reset", "restart", "end_recovery", "fault", "fate", "stop")


def client_id(nid: Nid, pid: int) -> str:
    """A peer's LNet process id as lnet/nidstrings.c: libcfs_idstr writes it."""
    user = C["LNET_PID_USERFLAG"]
    return f"{'U' if pid & user else ''}{pid & ~user}-{nid}"


def _field(message: tuple[list[bytes], str] | None, index: int, struct: str, name: str) -> int | None:
    """A field of buffer `index` of a message _buffers read, or None when it is not there."""
    if message is None or len(message[0]) <= index:
        return None
    f, buf = spec.layout(struct).field(name), message[0][index]
    return int.from_bytes(buf[f.offset:f.end], message[1]) if len(buf) >= f.end else None


def granted_rep_mbits(reply: bytes) -> bool | None:
    """Whether a connect reply granted OBD_CONNECT2_REP_MBITS (with OBD_CONNECT_FLAGS2, without
    which the second flags word does not count: lustre_export.h: exp_connect_flags2); None for
    a reply that is not a successful connect (it changes nothing)."""
    msg = _buffers(reply)
    if _field(msg, 0, "ptlrpc_body_v3", "pb_type") != REPLY or _field(msg, 0, "ptlrpc_body_v3", "pb_status") != 0:
        return None
    flags = _field(msg, 1, "obd_connect_data", "ocd_connect_flags") or 0
    flags2 = _field(msg, 1, "obd_connect_data", "ocd_connect_flags2") or 0
    return bool(flags & FLAGS2 and flags2 & REP_MBITS)


@dataclass
class Fault:
    """A fault serve puts on the target's replies (never the MGS's):

    drop    the reply is not sent (the IUT answered; the client never hears of it)
    delay   the reply is sent `value` ms late
    early   `value` early replies (default 1) first: a ptlrpc_body alone, at offset 0 on the
            reply portal with the reply's match bits (service.c: ptlrpc_at_send_early_reply),
            to a request that asked for adaptive timeouts; the final reply follows
    reset   the reply's headers and `value` bytes of its payload (default: half) are sent,
            then the connection is closed
    noop    `value` NOOPs (default 100) before the reply
    error   the reply is replaced by ERR -`value` (an errno number; `--fault error=ENOTCONN` names
            it): a ptlrpc_body alone, as a target that refused the request before its handler
            packed a reply (ptlrpc_send_error); the IUT's own reply is not sent
    evict   the export the request names is evicted before the request reaches the IUT: serve
            sends the IUT an OST_DISCONNECT in the client's name on the request's handle (its
            reply is not sent), as genops.c: class_fail_export disconnects the export
            (obd_disconnect, class_disconnect: the handle is unhashed).  The request then
            meets no export and the IUT answers it ERR -ENOTCONN (ptlrpc_server_handle_req_in
            finds no export by its handle; tgt_request_handle refuses it), as it answers
            every later request on that handle;
            the client's reconnect finds no export and gets a new one (target_handle_connect)

    It applies to the next `count` replies (`evict`: requests; None: to every one), each with
    `probability` (drawn from serve's one generator, seeded: the same seed and the same
    replies give the same faults)."""
    kind: str
    value: int | None = None
    count: int | None = None
    probability: float = 1.0

    def __post_init__(self):
        if self.kind not in FAULT_KINDS:
            raise ValueError(f"fault {self.kind!r}: expected one of {', '.join(FAULT_KINDS)}")
        if self.kind in ("drop", "evict") and self.value is not None:
            raise ValueError(f"fault {self.kind} takes no value (given {self.value!r})")
        if self.kind == "error" and not self.value:
            raise ValueError("fault error needs the errno (error=ENOTCONN or error=107)")
        if self.value is not None and (isinstance(self.value, bool) or not isinstance(self.value, int)
                                       or not 0 <= self.value <= FAULT_VALUE_MAX[self.kind]):
            raise ValueError(f"fault {self.kind}: value {self.value!r} is not a whole number from 0 to "
                             f"{FAULT_VALUE_MAX[self.kind]}")
        if self.count is not None and (isinstance(self.count, bool) or not isinstance(self.count, int)
                                       or self.count < 1):
            raise ValueError(f"fault {self.kind}: count {self.count!r} is not a count >= 1")
        if isinstance(self.probability, bool) or not isinstance(self.probability, (int, float)) \
                or not 0.0 <= self.probability <= 1.0:
            raise ValueError(f"fault {self.kind}: probability {self.probability!r} is not in [0, 1]")

    @classmethod
    def parse(cls, text: str, probability: float = 1.0) -> "Fault":
        """KIND or KIND=VALUE, as `--fault` takes it; ValueError with the reason."""
        kind, sep, value = text.partition("=")
        if kind == "error" and sep and not value.isdigit():
            try:
                value = str(spec.errno_value(value))
            except KeyError:
                raise ValueError(f"--fault {text!r}: {value!r} is no errno name Lustre uses") from None
        if sep and not value.isdigit():
            raise ValueError(f"--fault {text!r}: the value after '=' must be a whole number")
        return cls(kind, int(value) if sep else None, None, probability)

    def describe(self) -> dict:
        return {"kind": self.kind, "value": self.value, "count": self.count, "probability": self.probability}


FAULT_KINDS = ("drop", "delay", "early", "reset", "noop", "error", "evict")
# the largest value of each kind: every fault ends (a delay of ten minutes, a storm of a
# million NOOPs, a thousand early replies; a reset's bytes are cut at the payload's length)
FAULT_VALUE_MAX = {"drop": 0, "delay": 600_000, "early": 1000, "reset": 1 << 32, "noop": 1_000_000, "error": 4095,
                   "evict": 0}
NOOP_STORM = 100                # NOOPs a `noop` fault sends when it says no number
EARLY_TIMEOUT = 10              # the seconds an early reply tells the client to wait on (pb_timeout)


@dataclass
class _Outgoing:
    """A reply on its way: where it goes and what it answers."""
    conn: Connection
    portal: int
    mbits: int
    payload: bytes
    offset: int
    pid: int
    client: str
    xid: int
    request: bytes = b""
    target: bool = True             # the target's reply (faults apply), not the MGS's


class Server:
    """A target IUT (a started adapter) served as an OST by an LNet node `nid` listening on
    host:port (port 0: any free port; `address` says which).  `mgs`: the OST UUID the minimal
    MGS announces in its client config log (lnet_mgs.py), or None for no MGS.  `faults`: those
    put on the target's replies from the start, drawn with random.Random(`fault_seed`).
    `request_log`: a file object that gets one JSON line per request received.  `plan`: a
    fault for the n-th request of the workload (counted from 0; a request to the OST that is
    neither a connect nor part of a replay), put on its reply; `restarts`: the numbers of the
    workload's requests that find the target restarting (the request is lost with its
    connection, as in a server that rebooted as it came).  `record`: keep the conversation
    (`conversation`, what `certify --client` judges)."""

    def __init__(self, adapter, nid: Nid | str, host: str, port: int, *, accept_all: bool = False, log=None,
                 mgs: str | None = None, faults=(), fault_seed: int = 0, request_log=None,
                 plan: dict[int, "Fault"] | None = None, restarts=(), record: bool = False):
        self.adapter, self.accept_all = adapter, accept_all
        self.node = Node(Nid.parse(nid) if isinstance(nid, str) else nid)
        self.mgs = None
        if mgs is not None:
            from ptlrpc_conformance.harness.transport.lnet_mgs import Mgs
            self.mgs = Mgs(self.node.nid, mgs)
        self.listener = Listener(self.node, host, port, accept_all=accept_all, handler=self._on_put)
        self.address = self.listener.address
        self.stopped = threading.Event()
        self.counts = {"requests": 0, "replies": 0, "deferred_delivered": 0, "undeliverable": 0,
                       "not_ost_portal": 0, "iut_failed": 0, "lost_in_restart": 0, "mgs_requests": 0,
                       "faults": 0}
        self.faults: list[Fault] = list(faults)
        self._rng = random.Random(fault_seed)
        self._log, self._request_log = log, request_log
        self._lock = threading.Lock()               # one call into the IUT at a time
        # (client, xid) -> (the reply's offset, its match bits, the client's pid, the request)
        self._pending: OrderedDict[tuple[str, int], tuple[int, int, int, bytes]] = OrderedDict()
        self._peers: dict[str, Connection] = {}     # client -> the connection of its last request
        self._rep_mbits: set[str] = set()           # clients whose connect was granted REP_MBITS
        self._mgs_rep_mbits: set[str] = set()       # the same, of the MGS
        self.plan = dict(plan or {})
        self.restarts = frozenset(restarts)
        self._workload = 0                          # the workload's requests so far (`plan`)
        # the OST's requests and restarts as they came, each request a dict {"client", "xid",
        # "data", "reply": the reply sent whole and in time (None: none), "fault"}
        self.conversation: list[dict] | None = [] if record else None
        self._entries: dict[tuple[str, int], dict] = {}   # (client, xid) -> its last entry
        # (pid, xid) -> [times received, "reply" (sent) | "none" (no reply sent now) | None (not
        # yet known)] of its last receipt: the control op "fate"
        self._fates: OrderedDict[tuple[int, int], list] = OrderedDict()

    def start(self) -> "Server":
        self.listener.start()
        return self

    def close(self) -> None:
        self.stopped.set()
        self.listener.close()

    def _say(self, text: str) -> None:
        if self._log is not None:
            print(f"serve: {text}", file=self._log, flush=True)

    # -- requests -----------------------------------------------------------------------

    def _on_put(self, conn: Connection, msg: Message) -> None:
        # the requester is the process the LNet header names (lib-msg.c: lnet_build_msg_event,
        # events.c: request_in_callback: rq_peer), not the connection's
        pid = msg.header.src_pid
        client, xid = client_id(msg.header.src_nid, pid), msg.match_bits
        request = _buffers(msg.payload)
        opc = _field(request, 0, "ptlrpc_body_v3", "pb_opc")
        service = ("mgs" if self.mgs is not None and msg.portal == MGS_PORTAL else
                   "ost" if msg.portal in OST_PORTALS else None)
        self._record(client, msg, opc, service)
        if service is None:
            self.counts["not_ost_portal"] += 1      # no request buffer there: LNet drops it
            return
        if service == "mgs":
            with self._lock:
                self.counts["mgs_requests"] += 1
                data = self.mgs.handle(msg.payload)
                mbits = self._reply_mbits(self._mgs_rep_mbits, client, request, opc, xid)
                if data is not None:
                    self._learn_grant(self._mgs_rep_mbits, client, opc, data)
            if data is not None:
                self._transmit(_Outgoing(conn, MGC_REPLY_PORTAL, mbits, data, reply_offset(msg.payload), pid, client,
                                         xid, msg.payload, target=False))
            return
        seen = self._fates.pop((pid, xid), [0, None])
        self._fate(pid, xid, None, seen[0] + 1)
        with self._lock:
            if not conn.alive:          # dropped meanwhile (a restart): the request died with it
                self.counts["lost_in_restart"] += 1
                self._fate(pid, xid, "none")
                return
            self.counts["requests"] += 1
            self._peers[client] = conn
            number = self._note_request(client, xid, msg.payload, request, opc)
            if number in self.restarts:
                self._restart()
                outcome = self.adapter.call({"op": "restart"})
                if not outcome.ok:
                    self._say(f"the IUT's restart: {outcome.describe()}")
                return
            mbits = self._reply_mbits(self._rep_mbits, client, request, opc, xid)
            self._pending[(client, xid)] = (reply_offset(msg.payload), mbits, pid, msg.payload)
            while len(self._pending) > MAX_PENDING:
                self._pending.popitem(last=False)
            if self._evicts(client, xid, number is not None):
                self._evict(client, xid, msg.payload)
            outcome = self.adapter.call({"op": "exchange", "data": msg.payload.hex(), "xid": xid, "client": client})
            if not outcome.ok or not isinstance(outcome.result, dict):
                self.counts["iut_failed"] += 1
                self._say(f"exchange from {client} xid {xid:#x}: {outcome.describe()}: no reply sent")
                self._fate(pid, xid, "none")
                return
            out = self._route_deferred(outcome.result.get("replies"))
            reply = self._route(client, xid, outcome.result.get("data"), conn)
            if reply is not None:
                self._learn_grant(self._rep_mbits, client, opc, reply.payload)
        for item in out:
            self._deliver_deferred(item)
        self._fate(pid, xid, "reply" if reply is not None and self._transmit(reply) else "none")

    def _evicts(self, client: str, xid: int, workload: bool) -> bool:
        """Whether an `evict` fault falls on this request: the plan's, or one of `faults` (drawn
        here, before the IUT sees the request, and only on a `workload` request: neither a
        connect nor part of a replay)."""
        if not workload:
            return False
        entry = self._entries.get((client, xid))
        if entry is not None and entry["planned"] is not None:
            return entry["planned"].kind == "evict"
        drawn = self._draw(evict=True)
        if drawn and entry is not None:
            entry["planned"] = drawn[0]         # recorded as the request's fault
        return bool(drawn)

    def _evict(self, client: str, xid: int, request: bytes) -> None:
        """Evict the export `request` names (Fault's `evict`): an OST_DISCONNECT on its handle,
        connection count and XID (its version the disconnect's, no flags, no transno; the
        request's other buffers stay, which a disconnect does not read), sent to the IUT in
        `client`'s name; its reply goes nowhere."""
        msg = _buffers(request)
        if msg is None or not msg[0] or len(msg[0][0]) < spec.layout("ptlrpc_body_v3").size:
            return
        body, order = bytearray(msg[0][0]), msg[1]
        version = spec.constant(spec.target()["opcodes"]["OST_DISCONNECT"]["version"]) | spec.constant("PTLRPC_MSG_VERSION")
        for name, value in (("pb_opc", spec.constant("OST_DISCONNECT")), ("pb_version", version), ("pb_flags", 0),
                            ("pb_transno", 0)):
            f = spec.layout("ptlrpc_body_v3").field(name)
            body[f.offset:f.end] = value.to_bytes(f.end - f.offset, order)
        start = _round8(_HDR.field("lm_buflens").offset + len(msg[0]) * _HDR.field("lm_buflens").elem_size)
        disconnect = request[:start] + bytes(body) + request[start + len(body):]
        self._say(f"fault evict: the export of {client}'s request xid {xid:#x} is disconnected")
        outcome = self.adapter.call({"op": "exchange", "data": disconnect.hex(), "xid": xid, "client": client})
        if not outcome.ok:
            self._say(f"the IUT's eviction (OST_DISCONNECT) of {client}: {outcome.describe()}")

    def _deliver_deferred(self, item: "_Outgoing") -> None:
        if self._transmit(item):
            self.counts["deferred_delivered"] += 1
            if (item.pid, item.xid) in self._fates:
                self._fate(item.pid, item.xid, "reply")

    def _fate(self, pid: int, xid: int, fate: str | None, received: int | None = None) -> None:
        entry = self._fates.setdefault((pid, xid), [1, None])
        if received is not None:
            entry[0] = received
        entry[1] = fate
        while len(self._fates) > MAX_PENDING:
            self._fates.popitem(last=False)

    @staticmethod
    def _reply_mbits(granted: set, client: str, request, opc, xid: int) -> int:
        """The match bits of the reply: the request's pb_mbits when the client's connect to this
        service was granted REP_MBITS and the request is not a connect (and names some), else
        the XID (service.c: ptlrpc_server_handle_req_in)."""
        mbits = _field(request, 0, "ptlrpc_body_v3", "pb_mbits") if client in granted else None
        return xid if opc in CONNECTS or not mbits else mbits

    @staticmethod
    def _learn_grant(granted: set, client: str, opc, reply: bytes) -> None:
        """A connect reply's REP_MBITS grant, kept per client of the service (Lustre keeps it
        per export)."""
        if opc in CONNECTS:
            grant = granted_rep_mbits(reply)
            if grant:
                granted.add(client)
            elif grant is False:
                granted.discard(client)

    def _note_request(self, client: str, xid: int, data: bytes, request, opc) -> int | None:
        """The conversation's entry of a request to the OST, with the fault `plan` puts on it;
        its number in the workload (None: a connect or part of a replay)."""
        flags = _field(request, 0, "ptlrpc_body_v3", "pb_flags") or 0
        entry = {"client": client, "xid": xid, "data": data, "reply": None, "fault": "", "planned": None}
        number = None
        if opc not in CONNECTS and not flags & RECOVERY_FLAGS:
            number = self._workload
            entry["planned"] = self.plan.get(number)
            entry["fault"] = "restart" if number in self.restarts else ""
            self._workload += 1
        self._entries[(client, xid)] = entry
        while len(self._entries) > MAX_PENDING:
            self._entries.pop(next(iter(self._entries)))
        if self.conversation is not None:
            self.conversation.append(entry)
        return number

    def _record(self, client: str, msg: Message, opc, service) -> None:
        if self._request_log is None:
            return
        line = {"client": client, "portal": msg.portal, "xid": msg.match_bits, "opc": opc,
                "service": service, "data": msg.payload.hex()}
        with self._lock:
            self._request_log.write(json.dumps(line) + "\n")
            self._request_log.flush()

    def _route(self, client: str, xid: int, data, conn: Connection | None = None) -> "_Outgoing | None":
        """Where the reply (hex) to `client`'s request `xid` goes; None when `data` is null (a
        dropped request, or one whose reply is deferred: its offset is kept) or cannot go."""
        if data is None:
            return None
        offset, mbits, pid, request = self._pending.pop((client, xid), (None, xid, 0, b""))
        conn = conn if conn is not None else self._connection_of(client)
        try:
            payload = bytes.fromhex(data) if isinstance(data, str) else None
        except ValueError:
            payload = None
        if payload is None:
            self.counts["iut_failed"] += 1
            self._say(f"the IUT's reply to {client} xid {xid:#x} is not hex: not sent")
            return None
        if conn is None or not conn.alive or offset is None:
            self.counts["undeliverable"] += 1
            self._say(f"reply to {client} xid {xid:#x}: no connection or request for it: not sent")
            return None
        return _Outgoing(conn, REPLY_PORTAL, mbits, payload, offset, pid, client, xid, request)

    def _route_deferred(self, replies) -> list[_Outgoing]:
        out = []
        for item in replies if isinstance(replies, list) else []:
            if isinstance(item, dict) and isinstance(item.get("client"), str) and isinstance(item.get("xid"), int):
                routed = self._route(item["client"], item["xid"], item.get("data"))
                if routed is not None:
                    out.append(routed)
        return out

    def _connection_of(self, client: str) -> Connection | None:
        """The live connection to `client`: the one its last request came on, else another
        from the same NID (the peer reconnected since)."""
        last = self._peers.get(client)
        if last is not None and last.alive:
            return last
        nid = client.split("-", 1)[1]
        return next((c for c in list(self.listener.connections) if c.alive and str(c.peer_nid) == nid), None)

    def _transmit(self, out: _Outgoing) -> bool:
        """PUT a reply to the process that asked (its pid, on `out.conn`), with the faults that
        fall on it; whether the reply was sent whole."""
        faults = self._draw_faults() if out.target else []
        entry = self._entries.pop((out.client, out.xid), None) if out.target else None
        if entry is not None and entry["planned"] is not None:
            faults.append(entry["planned"])
        kinds = {f.kind: f for f in faults}
        if entry is not None:
            entry["fault"] = ",".join(sorted(kinds))
        for f in faults:
            self.counts["faults"] += 1
            self._say(f"fault {f.kind} on the reply to {out.client} xid {out.xid:#x}")
        if "noop" in kinds:
            out.conn.noop(NOOP_STORM if kinds["noop"].value is None else kinds["noop"].value)
        if "early" in kinds and out.offset:        # only a request that asked for AT gets one
            early = self._body_reply(out.request, pb_type=REPLY, pb_timeout=EARLY_TIMEOUT)
            for _ in range(1 if kinds["early"].value is None else kinds["early"].value):
                out.conn.put(out.portal, out.mbits, early, offset=0, dest_pid=out.pid)
        if "delay" in kinds:
            self.stopped.wait((kinds["delay"].value or 0) / 1000.0)
        if "drop" in kinds:
            return False
        if "error" in kinds:
            out.payload = self._body_reply(out.request, pb_type=ERR, pb_status=-kinds["error"].value)
        if "reset" in kinds:
            keep = len(out.payload) // 2 if kinds["reset"].value is None else kinds["reset"].value
            out.conn.put_cut(out.portal, out.mbits, out.payload, keep, offset=out.offset, dest_pid=out.pid)
            return False
        sent = out.conn.put(out.portal, out.mbits, out.payload, offset=out.offset, dest_pid=out.pid)
        if not sent.ok:
            self._say(f"reply to {out.client} xid {out.xid:#x}: {sent.kind}: {sent.detail}")
            return False
        self.counts["replies"] += 1
        if entry is not None and "delay" not in kinds:
            entry["reply"] = out.payload
        elif entry is not None:
            entry["late_reply"] = out.payload  # late: the client may have given up on it, or not
        return True

    def _draw_faults(self) -> list[Fault]:
        with self._lock:
            return self._draw(evict=False)

    def _draw(self, evict: bool) -> list[Fault]:
        """The faults of `faults` that fall now (the caller holds the lock): those on a reply,
        or (`evict`) the evictions, which fall on a request."""
        drawn = []
        for f in list(self.faults):
            if (f.kind == "evict") != evict:
                continue
            if self._rng.random() >= f.probability:
                continue
            drawn.append(f)
            if f.count is not None:
                f.count -= 1
                if f.count == 0:
                    self.faults.remove(f)
        return drawn

    @staticmethod
    def _body_reply(request: bytes, **fields) -> bytes:
        """A reply to `request` holding a ptlrpc_body alone with `fields` set: an early reply
        (service.c: ptlrpc_at_send_early_reply packs one buffer of lustre_msg_early_size;
        pb_timeout the time the client may still wait) or an ERR reply (ptlrpc_send_error).
        niobuf.c: ptlrpc_send_reply sets the type and the opcode; the handle, version and
        connection count are the request's."""
        msg = _buffers(request)
        body = {}
        for name in ("pb_handle", "pb_version", "pb_opc", "pb_conn_cnt"):
            value = _field(msg, 0, "ptlrpc_body_v3", name)
            body[name] = value or 0
        packed = _pack("ptlrpc_body_v3", **body, **fields)
        return message([bytes(packed)])

    # -- control ------------------------------------------------------------------------

    def control(self, op: str, args: dict | None = None) -> dict:
        """One control operation: {"ok": true, "result": {...}} or {"ok": false, "error": why}."""
        if op not in CONTROL_OPS:
            return {"ok": False, "error": f"unknown operation {op!r} (operations: {', '.join(CONTROL_OPS)})"}
        if op == "stop":
            self.stopped.set()
            return {"ok": True, "result": {}}
        if op == "fault":
            return self._control_fault(args or {})
        if op == "fate":
            # what became of the `sent`th receipt of process `pid`'s request `xid`: "reply" (sent,
            # now or deferred), "none" (no reply sent yet; a deferred one may follow) or
            # "pending" (not received that many times yet, or in the IUT); "requests":
            # [[pid, xid, sent], ...] asks for several ("fates", in order)
            args = args or {}
            many = args.get("requests")
            asked = many if isinstance(many, list) else [[args.get(k) for k in ("pid", "xid", "sent")]]
            if not all(isinstance(a, list) and len(a) == 3 and all(isinstance(v, int) and not isinstance(v, bool) for v in a)
                       for a in asked):
                return {"ok": False, "error": "fate needs integers pid, xid and sent (or requests: [[pid, xid, sent], ...])"}
            fates = []
            for pid, xid, sent in asked:
                received, fate = self._fates.get((pid, xid), (0, None))
                fates.append(fate if received == sent and fate else "pending")
            return {"ok": True, "result": {"fates": fates} if isinstance(many, list) else {"fate": fates[0]}}
        if op in ("restart", "end_recovery") and not self.adapter.supports("restart"):
            return {"ok": False, "error": f"the IUT does not declare capability 'restart' (needed for {op})"}
        deferred: list[_Outgoing] = []
        with self._lock:
            if op == "restart":
                self._restart()
            result: dict = {}
            if op != "status":
                outcome = self.adapter.call({"op": op})
                if not outcome.ok or not isinstance(outcome.result, dict):
                    return {"ok": False, "error": f"the IUT's {op}: {outcome.describe()}"}
                result = dict(outcome.result)
                if op == "reset":
                    self._pending.clear()
                    self._rep_mbits.clear()
                if op == "end_recovery":
                    deferred = self._route_deferred(result.get("replies"))
        for item in deferred:
            self._deliver_deferred(item)
        self._say(f"{op}: done")
        return {"ok": True, "result": {**result, **self._status()}}

    def _status(self) -> dict:
        live = [c for c in self.listener.connections if c.alive]
        with self._lock:
            faults = [f.describe() for f in self.faults]
        return {"incarnation": self.node.incarnation, "counts": dict(self.counts),
                "clients": [client_id(c.peer_nid, c.peer_pid) for c in live], "faults": faults}

    def _control_fault(self, args: dict) -> dict:
        """{"op": "fault", "kind": K, "value": V, "count": N, "probability": P} adds a fault;
        {"op": "fault", "kind": "clear"} removes them all."""
        if args.get("kind") == "clear":
            with self._lock:
                self.faults.clear()
            return {"ok": True, "result": self._status()}
        try:
            fault = Fault(args.get("kind"), args.get("value"), args.get("count"), args.get("probability", 1.0))
        except (TypeError, ValueError) as e:
            return {"ok": False, "error": str(e)}
        with self._lock:
            self.faults.append(fault)
        return {"ok": True, "result": self._status()}

    def _restart(self) -> None:
        """A reboot of the node (the IUT's restart is the caller's): a new incarnation."""
        self._drop_connections()
        self.node.incarnation = max(time.time_ns(), self.node.incarnation + 1)
        if self.conversation is not None:
            self.conversation.append({"restart": self.node.incarnation})

    def _drop_connections(self) -> None:
        """A reboot: every connection closed, the requests awaiting a reply forgotten."""
        for c in list(self.listener.connections):
            c.close()
        self._pending.clear()
        self._entries.clear()
        self._peers.clear()
        self._rep_mbits.clear()
        self._mgs_rep_mbits.clear()


class ControlSocket:
    """Serves `server.control` as JSON Lines ({"op": NAME} -> the answer) on a Unix socket
    (`path`) or on a loopback TCP port (`port`; 0: any free one, `address` says which)."""

    def __init__(self, server: Server, *, path: str | None = None, port: int | None = None):
        self.server, self.path = server, path
        if path is not None:
            if os.path.exists(path):
                raise OSError(f"{path} exists already (another serve, or a leftover to remove)")
            self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self._sock.bind(path)
            self.address = path
        else:
            self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            self._sock.bind(("127.0.0.1", port or 0))
            self.address = "127.0.0.1:%d" % self._sock.getsockname()[1]
        self._sock.listen(4)
        self._thread = threading.Thread(target=self._loop, name="serve control", daemon=True)

    def start(self) -> "ControlSocket":
        self._thread.start()
        return self

    def close(self) -> None:
        self._thread.join(timeout=1.0)
        self._sock.close()
        if self.path is not None:
            try:
                os.unlink(self.path)
            except OSError:
                pass

    def _loop(self) -> None:
        while not self.server.stopped.is_set():
            try:
                ready, _, _ = select.select([self._sock], [], [], 0.1)
                if ready:
                    sock, _ = self._sock.accept()
                    threading.Thread(target=self._serve_one, args=(sock,), daemon=True,
                                     name="serve control client").start()
            except OSError:
                if self.server.stopped.is_set():
                    return

    def _serve_one(self, sock: socket.socket) -> None:
        sock.settimeout(CONTROL_TIMEOUT)
        buf = b""
        try:
            while not self.server.stopped.is_set():
                while b"\n" not in buf:
                    chunk = sock.recv(4096)
                    if not chunk:
                        return
                    buf += chunk
                    if len(buf) > MAX_CONTROL_LINE:
                        sock.sendall(json.dumps({"ok": False, "error": "control line too long"}).encode() + b"\n")
                        return
                line, buf = buf.split(b"\n", 1)
                try:
                    request = json.loads(line)
                    op = request.get("op") if isinstance(request, dict) else None
                except ValueError:
                    op = None
                answer = (self.server.control(op, request) if isinstance(op, str) else
                          {"ok": False, "error": 'a control request is one JSON object per line: {"op": NAME}'})
                sock.sendall(json.dumps(answer).encode() + b"\n")
        except OSError:
            pass
        finally:
            sock.close()


class ControlClient:
    """One connection to a serve's control socket (a path, or 127.0.0.1:PORT), kept open from
    call to call: a caller that asks often (lnet-tcp asks the fate of every request it waits
    on) dials once.  serve drops a control client idle for CONTROL_TIMEOUT; one idle for half
    of it, or whose connection the other end closed before answering (nothing of the request
    was read then), dials again."""

    def __init__(self, address: str, timeout: float = 30.0):
        self.address, self.timeout = address, timeout
        self.dials = 0
        self._sock: socket.socket | None = None
        self._used = 0.0
        self._lock = threading.Lock()

    def _dial(self) -> socket.socket:
        if "/" in self.address or not self.address.rsplit(":", 1)[-1].isdigit():
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            target: object = self.address
        else:
            host, port = self.address.rsplit(":", 1)
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            target = (host, int(port))
        try:
            sock.settimeout(self.timeout)
            sock.connect(target)
        except OSError:
            sock.close()
            raise
        self.dials += 1
        return sock

    def call(self, op: str, **args) -> dict:
        """Send one control operation (with the fields `args`) and return its answer."""
        line = json.dumps({**args, "op": op}).encode() + b"\n"
        with self._lock:
            if self._sock is not None and time.monotonic() - self._used > CONTROL_TIMEOUT / 2:
                self._drop()
            for fresh in (self._sock is None, True):
                if self._sock is None:
                    self._sock = self._dial()
                try:
                    self._sock.sendall(line)
                    buf = b""
                    while b"\n" not in buf:
                        chunk = self._sock.recv(4096)
                        if not chunk:
                            break
                        buf += chunk
                except OSError as e:
                    self._drop()
                    if fresh or isinstance(e, socket.timeout):      # a timeout: serve may be at it still
                        raise
                    continue
                if b"\n" in buf:
                    self._used = time.monotonic()
                    return json.loads(buf.split(b"\n", 1)[0])
                self._drop()
                if fresh or buf:            # closed by serve mid-answer, or on a new connection
                    return {"ok": False, "error": "no answer"}
            return {"ok": False, "error": "no answer"}

    def _drop(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def close(self) -> None:
        with self._lock:
            self._drop()


def control_call(address: str, op: str, timeout: float = 30.0, **args) -> dict:
    """Send one control operation (with the fields `args`, e.g. a fault's) to a serve's control
    socket (a path, or 127.0.0.1:PORT) and return its answer."""
    client = ControlClient(address, timeout)
    try:
        return client.call(op, **args)
    finally:
        client.close()


def parse_listen(text: str) -> tuple[str, int]:
    """ADDR:PORT ([ADDR]:PORT for IPv6) -> (address, port); ValueError with the reason."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"{text!r}: expected ADDR:PORT (e.g. 127.0.0.1:988)")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ipaddress.ip_address(host)
    except ValueError:
        raise ValueError(f"{text!r}: {host!r} is not an IP address") from None
    return host, int(port)


def default_nid(host: str) -> Nid:
    """The NID of a node listening on `host`, on the first tcp network: host@tcp."""
    addr = ipaddress.ip_address(host)
    if addr.is_unspecified:
        raise ValueError(f"listening on {host} names no NID: say which with --nid")
    return Nid.ip(host)
