"""`--iut lnet-tcp:NID?...`: a live OST (or `serve`) reached over LNet TCP, as a target IUT.

    lnet-tcp:NID?target=UUID&port=988&index=0&mode=readonly
             [&drop=SECONDS][&srcport=privileged|any][&control=ADDR][&restart=CMD]

  NID       the target's NID (address@tcp[N]); its address is dialled, and only it (one
            connection; no router, no failover, no other NID)
  target    the OST's UUID (e.g. lustre-OST0000_UUID); required
  port      the acceptor's TCP port (988)
  index     the OST's index, checked by the preflight's connect (OBD_CONNECT_INDEX)
  mode      readonly (the default: only requests that change nothing are sent) or destructive
            (needs --scratch-target UUID@NID, matching this target exactly)
  drop      how long a request may go unanswered before it is taken as dropped (default 5 s;
            early replies renew the wait); a heuristic: a reply after it is an error
  srcport   privileged (the default: 1023 down to 512, as Lustre's client; root or
            CAP_NET_BIND_SERVICE) or any (an unprivileged port, for a server whose lnet has
            accept=all, such as `serve --accept-all`)
  control   a `serve` control socket (a path, or 127.0.0.1:PORT): reset, restart and
            end_recovery go there, and the adapter declares capability `restart`
  restart   a shell command that restarts the target (a restart hook): capability `restart`

`{worker}` anywhere in the value is the xdist worker's number (gw3 -> 3; 0 without -n), and
`N+{worker}` their sum: `port=29980+{worker}&control=/tmp/serve-{worker}.sock` gives each worker
a served target of its own, so `control=` may be used with -n (without the placeholder it is
refused there: one served target the workers would share).

Every suite client (c1, c2, ...) is an export of its own: a client UUID
`ptlrc-<run>-<worker><generation>-<name>` (the connect's buffers 1 and 2 are rewritten to name
the live target and that UUID).  With srcport=privileged the clients share the node's one
connection and send with the node's pid, the one its hello names, as a kernel client's
imports do: a Lustre server replies to the request's source (NID, pid) (niobuf.c:
ptlrpc_send_reply to rq_source), and socklnd delivers only to a pid it has a connection for
(socklnd_cb.c: ksocknal_launch_packet refuses a user-space pid it does not know).  So the
clients' XIDs are made the node's own: a case's XID x of client c goes on the wire as
(c's number << 32) | x, and the pb_last_xid its bytes hold is moved the same way (the target
checks it against the XID); a reply is matched by (reply portal, match bits).  With
srcport=any each client has a connection of its own, since an accept=all server names an
unprivileged peer by its source port (socklnd_cb.c: ksocknal_recv_hello), and its XIDs go as
they are.  Every (generation, client) is a new export and a new number, across xdist workers
too (the worker's number is in it and in the UUID).  The requests the adapter
writes itself (preflight, disconnects) take XIDs from `_xids`: 0x7F in the top byte (far above
any case's), the worker's number from bit 40.  `reset` is the control socket's, else a new generation: the
exports of the last one disconnected, new UUIDs and pids.

Safety is the transport's (live_safety.py, spec/target.yaml `live`): a request the mode does
not allow raises NotApplicable before a byte is sent.  Every export is disconnected on close,
at exit and on SIGTERM; the UUIDs used are printed with the command that evicts leftovers.
Every connection's bytes go to a pcap (lnet_engine/tap.py) when `pcap` is given.
"""
from __future__ import annotations

import atexit
import ipaddress
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid as uuidlib
from dataclasses import dataclass
from urllib.parse import parse_qs

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.transport import live_safety as safety
from ptlrpc_conformance.harness.transport.adapter import Adapter, IUTStartError, NotApplicable, UsageError
from ptlrpc_conformance.harness.transport.protocol import Hello, Outcome, parse_hello
from ptlrpc_conformance.harness.transport.lnet_engine.node import LnetSetupError, Node, Outcome as LnetOutcome
from ptlrpc_conformance.harness.transport.lnet_engine.wire import C as LC, Nid

REPLY_PORTAL = spec.lnet()["portals"]["OSC_REPLY_PORTAL"]["value"]
C = spec.constant
RETRIES = 5                       # connection attempts after the first, per link (bounded; a hello
                                  # answered NONE, as for a peer's duplicate still closing, is retried)
DEFAULT_DROP = 5.0
SETTLE = 0.05                     # seconds a reply sent before the last one may lag behind it
PID_COUNTER_BITS = 20             # the pid: USERFLAG | worker << 20 | a counter
OWN_XIDS = 0x7F << 56             # the adapter's own requests' XIDs: far above any case's, worker << 40
OPTIONS = ("target", "port", "index", "mode", "drop", "srcport", "control", "restart")


@dataclass(frozen=True)
class LiveSpec:
    nid: Nid
    host: str
    target: str
    port: int = LC["ACCEPT_PORT"]
    index: int = 0
    mode: str = "readonly"
    drop: float = DEFAULT_DROP
    privileged: bool = True
    control: str | None = None
    restart: str | None = None
    text: str = ""


WORKER = "{worker}"


def worker_number() -> int:
    """The xdist worker's number (gw3 -> 3), 0 outside xdist: what `{worker}` stands for."""
    w = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(w[2:]) if w.startswith("gw") and w[2:].isdigit() else 0


def with_worker(text: str, worker: int) -> str:
    """`text` with `N+{worker}` replaced by the sum and any other `{worker}` by the number."""
    text = re.sub(r"(\d+)\+" + re.escape(WORKER), lambda m: str(int(m.group(1)) + worker), text)
    return text.replace(WORKER, str(worker))


def shared_control(text: str) -> bool:
    """Whether an --iut value names one control socket for every xdist worker (refused with -n)."""
    if not text.startswith("lnet-tcp:"):
        return False
    control = parse_qs(text.partition("?")[2], keep_blank_values=True).get("control") or [""]
    return bool(control[0]) and WORKER not in control[0]


def parse_spec(text: str) -> LiveSpec:
    """An --iut lnet-tcp: value; UsageError naming the field that is wrong.  `{worker}` is this
    process's xdist worker number (the spec's text keeps the placeholder: one description)."""
    original, text = text, with_worker(text, worker_number())
    body = text[len("lnet-tcp:"):]
    nid_text, _, query = body.partition("?")
    where = f"--iut {text!r}"
    try:
        nid = Nid.parse(nid_text)
        host = str(ipaddress.ip_address(nid.addr))
    except (ValueError, KeyError) as e:
        raise UsageError(f"{where}: NID {nid_text!r} is not address@tcp[N] ({e})") from None
    try:
        fields = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError as e:
        raise UsageError(f"{where}: the options after '?' are not name=value&...: {e}") from None
    unknown = sorted(set(fields) - set(OPTIONS))
    if unknown:
        raise UsageError(f"{where}: unknown option {unknown[0]!r} (options: {', '.join(OPTIONS)})")
    for k, v in fields.items():
        if len(v) != 1:
            raise UsageError(f"{where}: option {k!r} given {len(v)} times")
    f = {k: v[0] for k, v in fields.items()}
    if not f.get("target"):
        raise UsageError(f"{where}: target=UUID is required (the OST's UUID, e.g. lustre-OST0000_UUID)")
    if len(f["target"]) >= safety.UUID_SIZE:
        raise UsageError(f"{where}: target {f['target']!r} is longer than a UUID ({safety.UUID_SIZE - 1} characters)")

    def number(name, kind, low, high, default):
        if name not in f:
            return default
        try:
            value = kind(f[name])
        except ValueError:
            raise UsageError(f"{where}: {name}={f[name]!r} is not a number") from None
        if not low <= value <= high:
            raise UsageError(f"{where}: {name}={f[name]!r} is outside {low}..{high}")
        return value
    mode = f.get("mode", "readonly")
    if mode not in safety.MODES:
        raise UsageError(f"{where}: mode={mode!r}: expected {' or '.join(safety.MODES)}")
    srcport = f.get("srcport", "privileged")
    if srcport not in ("privileged", "any"):
        raise UsageError(f"{where}: srcport={srcport!r}: expected privileged or any")
    for k in ("control", "restart"):
        if k in f and not f[k]:
            raise UsageError(f"{where}: {k}= is empty")
    return LiveSpec(nid, host, f["target"], number("port", int, 1, 65535, LC["ACCEPT_PORT"]),
                    number("index", int, 0, 0xFFFF, 0), mode, number("drop", float, 0.01, 600.0, DEFAULT_DROP),
                    srcport == "privileged", f.get("control"), f.get("restart"), original)


def parse_scratch(text: str) -> tuple[str, Nid]:
    """--scratch-target UUID@NID -> (UUID, NID); ValueError with the reason."""
    uuid, sep, nid = text.partition("@")
    if not sep or not uuid:
        raise ValueError(f"--scratch-target {text!r}: expected UUID@NID (e.g. scratch-OST0007_UUID@192.0.2.5@tcp)")
    return uuid, Nid.parse(nid)


def _worker() -> int:
    """This process's xdist worker number + 1 (gw0 -> 1), 0 outside xdist."""
    w = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(w[2:]) + 1 if w.startswith("gw") and w[2:].isdigit() else 0


@dataclass
class _Client:
    name: str
    uuid: str
    pid: int
    cookie: int = 0                 # pb_handle of its export, once a connect succeeded
    link: object = None             # its connection (srcport=any), else the adapter's one
    port: int = 0                   # srcport=any: the source port of its connection (its identity)
    node: object = None             # srcport=any: its LNet node (one incarnation for its reconnects)


@dataclass
class _Sent:
    client: str
    xid: int
    at: float


class LnetTcpAdapter(Adapter):
    """A live target as an IUT (module docstring)."""

    def __init__(self, live: LiveSpec, *, timeout: float = 30.0, scratch_target: str | None = None,
                 pcap: str | None = None, say=None):
        super().__init__()
        self.live, self.timeout, self.scratch_target, self.pcap = live, timeout, scratch_target, pcap
        self.description = live.text
        self.say = say or (lambda text: print(f"lnet-tcp: {text}", file=sys.stderr, flush=True))
        run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or os.environ.get("PTLRPC_CONFORMANCE_RUN_ID") \
            or uuidlib.uuid4().hex
        os.environ.setdefault("PTLRPC_CONFORMANCE_RUN_ID", run)      # the same prefix in the pytest session
        self.worker = _worker()
        self.prefix = f"ptlrc-{run[:8]}-"
        self.generation = 0
        self.used: list[str] = []                   # every client UUID this process connected
        self.leftover: list[str] = []               # those whose disconnect got no reply
        self.preflight: dict = {}
        self.tap = None
        self._pids = itertools.count(1)
        self._xids = itertools.count(OWN_XIDS | (self.worker << 40) | 1)
        self._clients: dict[str, _Client] = {}
        self._links: list = []
        self._conn_pid: dict[int, int] = {}         # srcport=any: id(connection) -> its client's pid
        self._node: Node | None = None
        self._incarnation = time.time_ns()          # this machine's one (socklnd.c: ksnn_incarnation)
        self._lock = threading.Lock()
        self._arrival = threading.Condition(self._lock)     # notified as a reply lands in _arrived
        self._arrived: dict[tuple[int, int], bytes] = {}    # (pid, match bits) -> a reply no exchange waited for
        self._dropped: dict[tuple[int, int], _Sent] = {}   # requests whose reply was taken as dropped
        self._sent: dict[tuple[int, int], int] = {}        # (pid, xid) -> times sent (serve's "fate" asks)
        self._from_wire: dict[int, tuple[int, int]] = {}   # srcport=privileged: match bits -> (pid, xid)
        self._closed = False
        self._ctl = None                            # lnet_serve.ControlClient, with control=

    # -- identities and links -----------------------------------------------------------

    def _new_pid(self) -> int:
        return LC["LNET_PID_USERFLAG"] | (self.worker << PID_COUNTER_BITS) | (next(self._pids) & ((1 << PID_COUNTER_BITS) - 1))

    def _local_nid(self) -> Nid:
        """This node's NID: the address the route to the target leaves from, on the target's net."""
        import socket
        family = socket.AF_INET6 if ":" in self.live.host else socket.AF_INET
        with socket.socket(family, socket.SOCK_DGRAM) as s:
            s.connect((self.live.host, self.live.port))
            addr = s.getsockname()[0]
        return Nid.ip(addr, net=self.live.nid.net, lnd=self.live.nid.lnd)

    def _connect(self, c: _Client):
        """A connection: the adapter's one node's, or with srcport=any the client's own node's,
        from the port it had (the server knows the client by it, and by the node's one
        incarnation: a new one would be a peer that rebooted, socklnd.c: ksocknal_create_conn).
        The engine's outcome; raises IUTStartError when no privileged port can be bound."""
        pid, source_port = c.pid, c.port
        if self.live.privileged:
            if self._node is None:
                self._node = Node(self._local_nid(), incarnation=self._incarnation, tap=self.tap)
            node = self._node
        else:
            if c.node is None:
                # one incarnation for every client: a new client on a port an old one had is
                # no reboot to the server
                c.node = Node(self._local_nid(), pid=pid, incarnation=self._incarnation, tap=self.tap)
            node = c.node
            if not c.port:
                # its port chosen once, so that every attempt comes from it: a server that
                # knew the port from an earlier peer answers the first hello NONE (a peer that
                # rebooted) and takes the next
                c.port = source_port = _free_port(str(ipaddress.ip_address(node.nid.addr)))
        try:
            out = node.connect(self.live.host, self.live.nid, self.live.port, privileged=self.live.privileged,
                               retries=RETRIES, handler=self._unwaited, source_port=source_port)
            if not out.ok and source_port:      # its old port is taken: a new identity
                out = node.connect(self.live.host, self.live.nid, self.live.port, privileged=False,
                                   retries=RETRIES, handler=self._unwaited)
        except LnetSetupError as e:
            raise IUTStartError(f"{self.description}: {e}") from None
        if out.ok and out.connection not in self._links:
            self._links.append(out.connection)
            self._conn_pid[id(out.connection)] = pid
        return out

    def _client(self, name: str) -> _Client:
        c = self._clients.get(name)
        if c is None:
            uuid = (self.prefix + f"{self.worker:x}g{self.generation}-" + name)[:safety.UUID_SIZE - 1]
            c = self._clients[name] = _Client(name, uuid, self._new_pid())
        return c

    def _unwaited(self, conn, msg) -> None:
        """A PUT no exchange waited for: a reply that came after its wait, or a deferred one."""
        if msg.portal == REPLY_PORTAL:
            if self.live.privileged:
                key = self._from_wire.get(msg.match_bits)
                if key is None:
                    return                  # no request of a client's went with these bits
            else:
                key = (self._conn_pid.get(id(conn)), msg.match_bits)
            with self._lock:
                self._arrived[key] = msg.payload
                self._arrival.notify_all()

    # -- start: handshake and preflight --------------------------------------------------

    def _start(self) -> Hello:
        if self.pcap:
            from ptlrpc_conformance.harness.transport.lnet_engine.tap import PcapTap
            try:
                self.tap = PcapTap(self.pcap)
            except OSError as e:
                raise IUTStartError(f"{self.description}: cannot write the pcap {self.pcap}: {e}") from None
        _guard(self)
        try:
            return self._preflight()
        except BaseException:
            self.close()
            raise

    def _preflight(self) -> Hello:
        pre = self._client("preflight")
        link = self._link(pre)
        if isinstance(link, LnetOutcome):
            raise IUTStartError(f"{self.description}: cannot reach {self.live.nid} at {self.live.host}:"
                                f"{self.live.port}: {link.kind}: {link.detail}")
        data = safety.connect_request(self.live.target, pre.uuid, self.live.index)
        reply = self._call(pre, next(self._xids), data)
        status, rep = safety.reply_status(reply)
        if status != 0 or rep is None:
            why = "no reply" if reply is None else f"status {status}" + (" (-EBADF: another index)" if status == -9 else "")
            raise IUTStartError(f"{self.description}: the preflight connect to {self.live.target} index "
                                f"{self.live.index} failed: {why}")
        pre.cookie = rep.body("pb_handle") or 0
        self.used.append(pre.uuid)
        version = rep.leaf(1, "obd_connect_data", "ocd_version") or 0
        reply = self._call(pre, next(self._xids), safety.message("OST_STATFS", handle=pre.cookie, conn_cnt=1))
        status, rep = safety.reply_status(reply)
        statfs = {}
        if status == 0 and rep is not None:
            statfs = {k: rep.leaf(1, "obd_statfs", k) for k in ("os_state", "os_blocks", "os_bfree", "os_bavail", "os_bsize")}
        self.preflight = {"nid": str(self.live.nid), "target": self.live.target, "index": self.live.index,
                          "ocd_version": version, "statfs": statfs}
        self._new_generation()                  # the preflight's export disconnected
        self._check_mode(statfs)
        caps = ["target"] + (["restart"] if self.live.control or self.live.restart else [])
        return parse_hello({"protocol": 1, "name": f"live OST {self.live.target}", "version": _version(version),
                            "capabilities": caps,
                            "live": {"mode": self.live.mode, "nid": str(self.live.nid), "target": self.live.target,
                                     "index": self.live.index, "drop_window": self.live.drop,
                                     "statfs": statfs}})

    def _check_mode(self, statfs: dict) -> None:
        if self.live.mode != "destructive":
            return
        if not self.scratch_target:
            raise IUTStartError(f"{self.description}: mode=destructive needs --scratch-target UUID@NID naming this "
                             "very target (a scratch OST whose data may be destroyed)")
        try:
            uuid, nid = parse_scratch(self.scratch_target)
        except ValueError as e:
            raise IUTStartError(str(e)) from None
        if uuid != self.live.target or nid != self.live.nid:
            raise IUTStartError(f"--scratch-target {self.scratch_target!r} does not match the target reached: "
                             f"{self.live.target}@{self.live.nid} (index {self.live.index}); destructive mode refused")
        if not statfs:
            raise IUTStartError(f"{self.description}: the preflight statfs failed: destructive mode refused")
        refused = {n: v for n, v in spec.target()["live"]["destructive_refused_states"].items()
                   if (statfs.get("os_state") or 0) & v}
        if refused:
            raise IUTStartError(f"{self.description}: statfs reports {', '.join(refused)}: destructive mode refused")

    # -- the protocol's operations --------------------------------------------------------

    def _exchange(self, requests: list[dict]) -> list[Outcome]:
        out = []
        for r in requests:
            if self.io_log is not None:
                self.log(">", json.dumps(r))
            o = self._one(r)
            if self.io_log is not None:
                self.log("<", json.dumps({"kind": o.kind, "result": o.result, "error": o.error, "detail": o.detail}))
            out.append(o)
        return out

    def _one(self, request: dict) -> Outcome:
        op = request.get("op")
        if op == "hello":
            return Outcome("ok", result=dict(self.hello.raw) if self.hello else {})
        if op == "exchange":
            return self._exchange_one(request)
        if op == "reset":
            return self._reset()
        if op in ("restart", "end_recovery") and (self.live.control or (op == "restart" and self.live.restart)):
            return self._restart(op)
        return Outcome("error", error="EOPNOTSUPP", detail=f"{op!r} is not an operation of a live target")

    def blocked(self, data: bytes, client: str = "c1") -> str | None:
        """Why the firewall would refuse `data` sent by suite client `client`, or None (nothing sent)."""
        uuid = (self.prefix + f"{self.worker:x}g{self.generation}-" + client)[:safety.UUID_SIZE - 1]
        return self._refusal(safety.with_uuids(data, self.live.target, uuid))

    def _refusal(self, rewritten: bytes) -> str | None:
        """Why the firewall refuses a request whose UUIDs are already the live ones, or None."""
        return safety.refusal(rewritten, self.live.mode, target_uuid=self.live.target, client_prefix=self.prefix,
                              index=self.live.index)

    def _exchange_one(self, request: dict) -> Outcome:
        name, xid = request.get("client"), request.get("xid")
        try:
            data = bytes.fromhex(request.get("data") or "")
        except ValueError:
            return Outcome("error", error="EINVAL", detail="data is not hex")
        if not isinstance(name, str) or not isinstance(xid, int) or isinstance(xid, bool) or not 0 <= xid < 1 << 64:
            return Outcome("error", error="EINVAL", detail="an exchange needs a string client and a 64-bit xid")
        c = self._client(name)
        data = safety.with_uuids(data, self.live.target, c.uuid)
        why = self._refusal(data)
        if why is not None:
            self.log("!", f"refused ({self.live.mode}): {why}")
            raise NotApplicable(f"({'read-only' if self.live.mode == 'readonly' else self.live.mode}) the lnet-tcp "
                                f"transport does not send this request: {why}")
        late = self._late()
        if late and not self.live.control:
            self._deferred()                    # said once
            return Outcome.timeout(late)
        link = self._link(c)
        if isinstance(link, LnetOutcome):
            return Outcome.crash(f"the target cannot be reached: {link.kind}: {link.detail}")
        opc = safety.parse(data)
        opc = opc.body("pb_opc") if opc is not None else None
        told = []                   # serve's control socket said it sent no reply
        sent = self._sent[(c.pid, xid)] = self._sent.get((c.pid, xid), 0) + 1

        def given_up() -> bool:
            if self._fate(c, xid, sent) == "none":
                told.append(True)
            return bool(told)
        wire = self._wire_xid(c, xid)
        if wire != xid:
            data = safety.with_last_xid(data, lambda last: self._wire_xid(c, last) if last else 0)
        out = link.exchange(safety.request_portal(opc), wire, data, reply_portal=REPLY_PORTAL,
                            at=bool(_lm_flags(data) & safety.AT_SUPPORT), timeout=self.live.drop,
                            max_wait=max(self.timeout, self.live.drop),
                            given_up=given_up if self.live.control else None)
        result: dict = {"data": None, "replies": []}
        if out.kind == "reply":
            result["data"] = out.reply.payload.hex()
            self._learn(c, opc, out.reply.payload)
        elif out.kind == "timeout" and not out.early:
            self._dropped[(c.pid, xid)] = _Sent(name, xid, time.monotonic())
            result["note"] = ("serve sent no reply (its control socket said so)" if told else
                              f"no reply within the drop window ({self.live.drop:g} s): taken as dropped "
                              "(a heuristic on a live target)")
        elif out.kind == "timeout":
            return Outcome.timeout(f"{len(out.early)} early replies, then no final reply: {out.detail}")
        else:
            return Outcome.crash(f"the LNet connection: {out.kind}: {out.detail}")
        result["replies"] = self._deferred(settle=True)
        return Outcome("ok", result=result)

    def _link(self, c: _Client):
        link = c.link if not self.live.privileged else (self._links[-1] if self._links else None)
        if link is not None and link.alive:
            return link
        # srcport=any: an accept=all server names the client by its source port, so a client
        # reconnects (after a restart dropped its connection) from the port it had
        out = self._connect(c)
        if not out.ok:
            return out
        c.link = out.connection
        if not self.live.privileged:
            try:
                c.port = out.connection._sock.getsockname()[1]
            except OSError:
                c.port = 0
        return out.connection

    def _wire_xid(self, c: _Client, xid: int) -> int:
        """The match bits client `c`'s XID `xid` goes with: on the shared connection
        (srcport=privileged) made the node's own, (c's number << 32) | xid (module docstring);
        the adapter's own XIDs (`_xids`) and an XID of 2^32 or more go as they are."""
        if not self.live.privileged or xid >> 32:
            return xid
        wire = ((c.pid & ~LC["LNET_PID_USERFLAG"]) << 32) | xid
        self._from_wire[wire] = (c.pid, xid)
        return wire

    def _call(self, c: _Client, xid: int, data: bytes) -> bytes | None:
        """One of the adapter's own requests; its reply, or None."""
        link = self._link(c)
        if isinstance(link, LnetOutcome):
            self.log("!", f"{c.name}: {link.kind}: {link.detail}")
            return None
        opc = safety.parse(data).body("pb_opc")
        # with a control socket, serve says when it sent no reply (a target in recovery keeps
        # a disconnect): no need to wait out the window
        out = link.exchange(safety.request_portal(opc), xid, data, reply_portal=REPLY_PORTAL,
                            timeout=max(self.live.drop, 1.0), max_wait=self.timeout,
                            given_up=(lambda: self._fate(c, xid, 1) == "none") if self.live.control else None)
        return out.reply.payload if out.kind == "reply" else None

    def _learn(self, c: _Client, opc: int | None, reply: bytes) -> None:
        """The export a reply made or ended: a connect's cookie, a disconnect's end."""
        status, rep = safety.reply_status(reply)
        if status != 0 or rep is None:
            return
        if opc == C("OST_CONNECT"):
            c.cookie = rep.body("pb_handle") or c.cookie
            if c.uuid not in self.used:
                self.used.append(c.uuid)
        elif opc == C("OST_DISCONNECT"):
            c.cookie = 0

    def _deferred(self, settle: bool = False) -> list[dict]:
        """The replies that arrived for requests taken as dropped: deferred replies (protocol §2.4).
        With `settle`, while such requests wait, a moment (SETTLE, less when all have come) for
        replies sent before the last one but still in a connection's reader (another
        connection's, with srcport=any): all of them are returned together, as sent.  With a
        control socket serve says which of them it has answered: the wait is for those only (at
        most a drop window), and none when it has answered none."""
        if settle and self._dropped:
            waited = list(self._dropped)
            deadline = time.monotonic() + SETTLE
            if self.live.control:           # serve says which it sent: wait for those, as long as a drop window
                with self._lock:
                    missing = [k for k in waited if k not in self._arrived]
                fates = self._fates(missing) if missing else []
                if fates is not None:
                    waited = [k for k, f in zip(missing, fates) if f == "reply"]
                    deadline = time.monotonic() + self.live.drop
            with self._arrival:
                self._arrival.wait_for(lambda: all(k in self._arrived for k in waited),
                                       max(0.0, deadline - time.monotonic()))
        out = []
        with self._lock:
            for key in [k for k in self._arrived if k in self._dropped]:
                sent = self._dropped.pop(key)
                out.append({"client": sent.client, "xid": sent.xid, "data": self._arrived.pop(key).hex()})
        return out

    def _late(self) -> str | None:
        """Without a control socket there is no recovery: a reply to a request taken as dropped
        came after the drop window, and the verdict that took it as dropped was wrong."""
        with self._lock:
            late = [self._dropped[k] for k in self._arrived if k in self._dropped]
        if not late:
            return None
        s = late[0]
        return (f"a reply to {s.client}'s XID {s.xid:#x} came after the drop window ({self.live.drop:g} s): the "
                "earlier 'dropped' was wrong; give a longer drop=")

    def _disconnect(self, c: _Client) -> None:
        if c.cookie:
            reply = self._call(c, next(self._xids), safety.message("OST_DISCONNECT", handle=c.cookie, conn_cnt=1))
            if safety.reply_status(reply)[0] is None:       # no reply: the export may be left
                self.leftover.append(c.uuid)
            c.cookie = 0

    def _new_generation(self) -> None:
        """Every export of this generation disconnected; the next clients are new exports."""
        for c in list(self._clients.values()):
            self._disconnect(c)
            if not self.live.privileged and c.link is not None:
                c.link.close()
                if c.link in self._links:
                    self._links.remove(c.link)
        self._clients.clear()
        self._dropped.clear()
        self._sent.clear()
        with self._lock:
            self._arrived.clear()
        self.generation += 1

    def _reset(self) -> Outcome:
        if self.live.control:
            out = self._control("reset")
            if not out.ok:
                return out
            for c in self._clients.values():
                c.cookie = 0                    # the target forgot every export
        self._new_generation()
        return Outcome("ok", result={})

    def _restart(self, op: str) -> Outcome:
        if op == "restart" and self.live.restart and not self.live.control:
            try:
                proc = subprocess.run(self.live.restart, shell=True, timeout=self.timeout, capture_output=True)
            except subprocess.TimeoutExpired:
                return Outcome.timeout(f"the restart hook did not end within {self.timeout:g} s")
            if proc.returncode != 0:
                return Outcome.crash(f"the restart hook exited {proc.returncode}: {proc.stderr.decode(errors='replace')[-300:]}")
            self._drop_links()
            return Outcome("ok", result={})
        out = self._control(op)
        if not out.ok:
            return out
        if op == "restart":
            self._drop_links()
        result = {k: v for k, v in out.result.items() if k not in ("incarnation", "counts", "clients", "replies")}
        if op == "end_recovery":
            expected = sum(1 for r in out.result.get("replies") or () if isinstance(r, dict) and r.get("data"))
            result["replies"] = self._await_deferred(expected)
        return Outcome("ok", result=result)

    def _drop_links(self) -> None:
        """A restarted target closed every connection: closed here too, at once, so that the
        next request dials again instead of going out on the old connection before its reader
        has seen the close (and ending as a reset)."""
        for link in self._links:
            link.close()
        self._links.clear()

    def _await_deferred(self, expected: int) -> list[dict]:
        """The deferred replies serve delivered before answering its control call (they may still
        be on their way in the connection's reader), waited for at most one drop window."""
        got, deadline = [], time.monotonic() + self.live.drop
        while True:
            got += self._deferred()
            if len(got) >= expected or time.monotonic() >= deadline:
                return got
            with self._arrival:
                self._arrival.wait_for(lambda: any(k in self._dropped for k in self._arrived),
                                       max(0.0, deadline - time.monotonic()))

    def _fates(self, keys: list[tuple[int, int]]) -> list[str] | None:
        """serve's fates of requests taken as dropped ((pid, xid) keys of _dropped), or None."""
        asked = []
        for pid, xid in keys:
            c = self._clients.get(self._dropped[(pid, xid)].client)
            if c is None:
                return None
            asked.append([self._served_pid(c), self._wire_xid(c, xid), self._sent.get((pid, xid), 1)])
        try:
            answer = self._control_client().call("fate", requests=asked)
        except (OSError, ValueError):
            return None
        fates = (answer.get("result") or {}).get("fates") if answer.get("ok") else None
        return fates if isinstance(fates, list) and len(fates) == len(keys) else None

    def _served_pid(self, c: _Client) -> int:
        """The pid serve knows client `c` by: the node's (srcport=privileged), or with
        srcport=any its source port (the pid of an unprivileged peer, as socklnd_cb.c:
        ksocknal_recv_hello names it)."""
        return self._node.pid if self.live.privileged and self._node is not None else \
            c.port | LC["LNET_PID_USERFLAG"]

    def _fate(self, c: _Client, xid: int, sent: int) -> str | None:
        """What serve's control socket says became of client `c`'s request `xid`, sent for the
        `sent`th time ("reply", "none", "pending"), or None when it cannot say (the drop window
        decides then)."""
        try:
            answer = self._control_client().call("fate", xid=self._wire_xid(c, xid), sent=sent,
                                                 pid=self._served_pid(c))
        except (OSError, ValueError):
            return None
        return (answer.get("result") or {}).get("fate") if answer.get("ok") else None

    def _control_client(self):
        """The one connection to serve's control socket, kept open (dialled again when serve
        closed it)."""
        if self._ctl is None:
            from ptlrpc_conformance.harness.transport.lnet_serve import ControlClient
            self._ctl = ControlClient(self.live.control, self.timeout)
        return self._ctl

    def _control(self, op: str) -> Outcome:
        try:
            answer = self._control_client().call(op)
        except (OSError, ValueError) as e:
            return Outcome.crash(f"control socket {self.live.control}: {op}: {e}")
        if not answer.get("ok"):
            return Outcome("error", error="EIO", detail=f"control {op}: {answer.get('error')}")
        return Outcome("ok", result=dict(answer.get("result") or {}))

    # -- the end -----------------------------------------------------------------------

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if self.hello is not None or self._clients:
                for c in list(self._clients.values()):
                    self._disconnect(c)
        finally:
            for link in self._links:
                link.close()
            if self._node is not None:
                self._node.close()
            if self.tap is not None:
                self.tap.close()
            if self._ctl is not None:
                self._ctl.close()
            _unguard(self)
        if self.used:
            name = self.live.target[:-5] if self.live.target.endswith("_UUID") else self.live.target
            shown = ", ".join(self.used) if len(self.used) <= 6 else \
                f"{', '.join(self.used[:3])}, ... {', '.join(self.used[-2:])}"
            self.say(f"{len(self.used)} client UUIDs used on {self.live.target}, all {self.prefix}*: {shown}; "
                     + (f"{len(self.leftover)} not disconnected: {', '.join(self.leftover)}; " if self.leftover
                        else "every export was disconnected.  ")
                     + f"To evict a leftover, on the OSS: lctl set_param obdfilter.{name}.evict_client=<UUID> "
                       f"(lctl get_param obdfilter.{name}.exports.*.uuid lists them)")


def _free_port(host: str) -> int:
    """A TCP port of `host` free now (0 when none can be had: any port then)."""
    import socket
    try:
        with socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind((host, 0))
            return s.getsockname()[1]
    except OSError:
        return 0


def _lm_flags(data: bytes) -> int:
    p = safety.parse(data)
    if p is None:
        return 0
    f = safety._HDR.field("lm_flags")
    return int.from_bytes(data[f.offset:f.end], p.order)


def _version(ocd_version: int) -> str:
    """OBD_OCD_VERSION(major, minor, patch, fix) as text (lustre_ver.h)."""
    return ".".join(str((ocd_version >> s) & 0xFF) for s in (24, 16, 8, 0)) if ocd_version else "unknown"


# -- every export disconnected at exit and on SIGTERM --------------------------------------

_OPEN: list[LnetTcpAdapter] = []
_SAVED: list = []                 # the SIGTERM handler replaced while adapters are open
_AT_EXIT: list = []               # [True] once _close_all is registered


def _close_all() -> None:
    for a in list(_OPEN):
        a.close()


def _on_sigterm(signum, frame):
    raise KeyboardInterrupt          # the run ends as after Ctrl-C: cases stop, adapters close


def _guard(adapter: LnetTcpAdapter) -> None:
    """While an adapter is open: at exit it is closed, and a SIGTERM ends the run as Ctrl-C
    does (unless the program handles SIGTERM itself), so its exports are disconnected."""
    if not _OPEN:
        if not _AT_EXIT:
            _AT_EXIT.append(atexit.register(_close_all))
        if threading.current_thread() is threading.main_thread() \
                and signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, None):
            _SAVED.append(signal.signal(signal.SIGTERM, _on_sigterm))
    _OPEN.append(adapter)


def _unguard(adapter: LnetTcpAdapter) -> None:
    if adapter in _OPEN:
        _OPEN.remove(adapter)
    if not _OPEN and _SAVED and threading.current_thread() is threading.main_thread() \
            and signal.getsignal(signal.SIGTERM) is _on_sigterm:
        signal.signal(signal.SIGTERM, _SAVED.pop() or signal.SIG_DFL)


def make(text: str, timeout: float, scratch_target: str | None = None, pcap: str | None = None) -> LnetTcpAdapter:
    """The adapter of an --iut lnet-tcp: value (not started); UsageError for a bad value."""
    if scratch_target:
        try:
            parse_scratch(scratch_target)
        except ValueError as e:
            raise UsageError(str(e)) from None
    return LnetTcpAdapter(parse_spec(text), timeout=timeout, scratch_target=scratch_target, pcap=pcap)
