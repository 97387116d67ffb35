"""A small LNet node over TCP (socklnd): it connects to a peer or accepts peers, and exchanges
LNet messages with them, doing the duties a peer expects of any LNet node.

Both roles (the facts are spec/lnet.yaml's; the behaviour cited is Lustre 2.17.57's):

- **Connect** (`Node.connect`): a TCP connection from a privileged source port, 1023 down to
  512 (acceptor.c: lnet_connect; `privileged=False` binds any port, for a listener that
  accepts all, like `accept=all`), the acceptor request (v1 for an 8-byte NID, else v2), then a
  hello of type CONTROL (one connection carries everything: socklnd_proto.c:
  ksocknal_match_tx_v3 sends nothing on a connection of type ANY) with the node's one
  incarnation.  A hello answered with type NONE asks for a retry (socklnd.c:
  ksocknal_create_conn), bounded; a reply from another NID than the one dialled is refused
  (socklnd_cb.c: ksocknal_recv_hello, "they claimed they were").
- **Accept** (`Listener`): the acceptor request must name this node's NID (acceptor.c:
  lnet_accept), the source port must be privileged unless `accept_all`; the hello is answered
  in the peer's version with the inverted type; a peer with a new incarnation has its
  connections closed and is answered NONE (ksocknal_create_conn, "peer rebooted"), and so is
  a second connection of a type the peer has open already (a duplicate).  A peer on
  an unprivileged port is known by the listener's net and its IP address and the pid
  port | LNET_PID_USERFLAG, as socklnd_cb.c: ksocknal_recv_hello and
  ksocknal_process_receive make it.  The listener keeps at most MAX_CONNECTIONS connections
  and reads at most MAX_HANDSHAKES handshakes at once (acceptor.c: lnet_acceptor reads one at
  a time); a connection beyond either is closed at once and recorded.
- **Every connection** reads in a thread of its own: NOOPs are ignored (keepalives, ZC-ACKs);
  an LNET message carrying a zero-copy cookie is answered with a ZC-ACK NOOP
  (ksocknal_handle_zcreq); a GET on the reserved portal with the ping match bits is answered
  with a REPLY holding the ping info (the loopback NID and the node's own, NI_STATUS only); a
  PUT that asks for an ACK is ACKed once delivered (lib-move.c: lnet_recv_put, lib-msg.c:
  lnet_complete_msg_locked); a PUT is delivered to the exchange waiting for its (portal,
  match bits), else to the connection's handler, else kept as unmatched.
- `Connection.exchange` sends a PUT and waits for the PUT that answers it on the reply portal
  with the same match bits; with adaptive timeouts a PUT at offset 0 is an early reply
  (ptlrpc/events.c: reply_in_callback) that renews the wait, and the first other one is the
  final reply.

Every wait is bounded, and every network fault (a reset, bytes that are not socklnd, a peer
that stops, a refused handshake) is an `Outcome` of the call that met it, never an exception.
The one exception is `LnetSetupError`: no privileged port could be bound at all, a problem of
this machine, not of the peer.
"""
from __future__ import annotations

import errno
import ipaddress
import itertools
import queue
import select
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Callable

from .wire import (C, NONE_WMD, AcceptorRequest, Hello, KsockHeader, LnetHeader, Nid, WireError, acceptor_size,
                   hello_nips, hello_size, layout, lnet_header_size, ping_info, unpack_acceptor, unpack_hello,
                   unpack_ksock, unpack_lnet_header)

POLL = 0.1                       # how often a blocked reader looks at its closing flag (seconds)
GIVEN_UP_FIRST = 0.005           # an exchange's first question whether its peer gave up replying
GIVEN_UP_EVERY = 0.02            # and the next ones
MAX_QUEUED = 64                  # messages kept for one waiter, or unmatched, before older ones go
MAX_CONNECTIONS = 16             # connections a listener keeps at once
MAX_HANDSHAKES = 16              # handshakes a listener reads at once (Lustre's acceptor reads one at a time)
MAX_INBOX = 256                  # PUTs waiting for a connection's handler before new ones are dropped


_WAKE = object()                 # put in a connection's inbox by close(): its handler thread looks again


class LnetSetupError(Exception):
    """This machine cannot do what was asked (no privileged port can be bound)."""


@dataclass(frozen=True)
class Message:
    """One LNET message as received: its ksock header, its LNet header and its payload."""
    ksock: KsockHeader
    header: LnetHeader
    payload: bytes

    @property
    def portal(self) -> int:
        return self.header.portal

    @property
    def match_bits(self) -> int:
        return self.header.match_bits

    @property
    def offset(self) -> int:
        return self.header.offset


@dataclass(frozen=True)
class Outcome:
    """What one call came to.  `kind`:
    connected  the handshake succeeded (`connection` is the connection)
    sent       the message was written (`put` without an ACK asked)
    acked      the PUT was written and its ACK came back
    reply      the final reply came (`reply`; `early` holds the early replies before it)
    timeout    nothing (final) within the wait, or a peer that stopped mid-message
    reset      the connection was reset, or closed in the middle of a message
    closed     the connection was closed (by either side) between messages
    garbage    the peer sent bytes that are not what socklnd or LNet allow
    refused    the peer refused the handshake, or answered it wrongly (another NID, NONE
               after every retry, a wrong type), or the TCP connection was refused
    error      the engine itself failed (a bug here, never the peer's fault)"""
    kind: str
    detail: str = ""
    reply: Message | None = None
    early: tuple[Message, ...] = ()
    connection: "Connection | None" = None

    @property
    def ok(self) -> bool:
        return self.kind in ("connected", "sent", "acked", "reply")


class _Fault(Exception):
    def __init__(self, kind: str, detail: str):
        super().__init__(detail)
        self.kind, self.detail = kind, detail


def _invert(ctype: int) -> int:
    """The connection type the other side records for a hello's type (socklnd_cb.c:
    ksocknal_invert_type)."""
    table = {C["SOCKLND_CONN_ANY"]: C["SOCKLND_CONN_ANY"], C["SOCKLND_CONN_CONTROL"]: C["SOCKLND_CONN_CONTROL"],
             C["SOCKLND_CONN_BULK_IN"]: C["SOCKLND_CONN_BULK_OUT"],
             C["SOCKLND_CONN_BULK_OUT"]: C["SOCKLND_CONN_BULK_IN"]}
    return table.get(ctype, C["SOCKLND_CONN_NONE"])


def _read_exact(sock: socket.socket, n: int, deadline: float, what: str,
                closing: Callable[[], bool] = lambda: False, stall: float | None = None,
                spare: bytearray | None = None) -> bytes:
    """`n` bytes from `sock`.  Before `deadline` (time.monotonic()) when `stall` is None;
    otherwise the first byte may take as long as it takes (the connection is idle), and then
    no gap between bytes may exceed `stall`.  Raises _Fault.  With `spare` (the bytes read
    before and not yet used, owned by one reader), what is there is taken first, and each
    receive takes what has come (up to 64 KiB), the bytes past `n` kept in `spare`: one
    receive for a message that came whole, not one for each of its parts."""
    if spare is not None and len(spare) >= n:
        data = bytes(spare[:n])
        del spare[:n]
        return data
    buf = bytearray()
    if spare:
        buf += spare
        spare.clear()
    last = time.monotonic()
    while len(buf) < n:
        if closing():
            raise _Fault("closed", "the connection was closed here")
        now = time.monotonic()
        if stall is None and now >= deadline:
            raise _Fault("timeout", f"{what}: {len(buf)} of {n} bytes within the wait")
        if stall is not None and buf and now - last >= stall:
            raise _Fault("timeout", f"{what}: the peer stopped after {len(buf)} of {n} bytes for {stall:g} s")
        try:
            ready, _, _ = select.select([sock], [], [], POLL if stall is not None else min(POLL, deadline - now))
            if not ready:
                continue
            data = sock.recv(max(n - len(buf), 1 << 16) if spare is not None else min(n - len(buf), 1 << 16))
        except (ConnectionError, OSError, ValueError) as exc:
            if closing():
                raise _Fault("closed", "the connection was closed here") from None
            raise _Fault("reset", f"{what}: {exc.__class__.__name__}: {exc}") from None
        if not data:
            if buf:
                raise _Fault("reset", f"{what}: the peer closed after {len(buf)} of {n} bytes")
            raise _Fault("closed", f"{what}: the peer closed the connection")
        buf += data
        last = time.monotonic()
    if len(buf) > n:
        spare += buf[n:]
        del buf[n:]
    return bytes(buf)


def _read_hello(sock: socket.socket, deadline: float) -> Hello:
    head = _read_exact(sock, 8, deadline, "hello")
    try:
        size = hello_size(head)
        head += _read_exact(sock, size - 8, deadline, "hello")
        nips = hello_nips(head)
        return unpack_hello(head + _read_exact(sock, 4 * nips, deadline, "hello's addresses"))
    except WireError as exc:
        raise _Fault("garbage", str(exc)) from None


class _Waiter:
    """The messages one exchange waits for, and the failure that ends the wait."""

    def __init__(self):
        self.queue: queue.Queue = queue.Queue()
        self.count = 0

    def offer(self, item) -> None:
        if isinstance(item, Outcome) or self.count < MAX_QUEUED:
            self.count += 1
            self.queue.put(item)


class Connection:
    """One socklnd connection after its handshake; a thread reads it (`start`)."""

    def __init__(self, node: "Node", sock: socket.socket, *, peer_nid: Nid, peer_pid: int, version: int,
                 peer_big: bool, peer_incarnation: int, handler: Callable[["Connection", Message], None] | None = None,
                 userspace_peer: bool = False, name: str = "", ctype: int = C["SOCKLND_CONN_CONTROL"]):
        self.node, self.peer_nid, self.peer_pid = node, peer_nid, peer_pid
        self.ctype = ctype                  # this side's type of the connection
        self.version, self.peer_incarnation = version, peer_incarnation
        self.wide = version == C["KSOCK_PROTO_V4"]
        self.name = name or f"{peer_nid}"
        self.failure: Outcome | None = None
        self.unmatched: deque[Message] = deque(maxlen=MAX_QUEUED)
        self.counts: dict[str, int] = {"noop": 0, "ping": 0, "ack_sent": 0, "zc_ack_sent": 0, "ack_received": 0,
                                       "get_dropped": 0, "reply_received": 0, "handler_error": 0,
                                       "handler_dropped": 0}
        self._sock, self._big, self._handler, self._userspace = sock, peer_big, handler, userspace_peer
        try:    # Nagle off, as socklnd by default (socklnd_lib.c: ksocknal_lib_setup_sock, nagle=0)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except (OSError, AttributeError):
            pass
        self._spare = bytearray()                   # bytes received and not yet read (the reader's)
        self._send_lock = threading.Lock()
        self._lock = threading.Lock()
        self._waiters: dict[tuple, _Waiter] = {}
        self._closing = False
        self._cookies = itertools.count(1)
        self._thread = threading.Thread(target=self._read_loop, name=f"lnet {self.name}", daemon=True)
        # the handler runs in a thread of its own, so that a slow one never stops the reader
        # (pings, ACKs and replies go on being answered meanwhile)
        self._inbox: queue.Queue = queue.Queue(maxsize=MAX_INBOX)
        self._handling = threading.Thread(target=self._handle_loop, name=f"lnet handler {self.name}", daemon=True)
        sock.settimeout(node.send_timeout)          # bounds a send to a peer that does not read

    # -- life ---------------------------------------------------------------------------

    def start(self) -> "Connection":
        self._thread.start()
        if self._handler is not None:
            self._handling.start()
        return self

    @property
    def alive(self) -> bool:
        return self.failure is None

    def close(self) -> None:
        """Close the connection and end its reader (bounded)."""
        self._closing = True
        self._fail(Outcome("closed", "the connection was closed here"))
        try:        # the handler thread waits on its inbox: woken now, not at its next POLL
            self._inbox.put_nowait(_WAKE)
        except queue.Full:
            pass    # it is busy, and looks at _closing before its next wait
        for t in (self._thread, self._handling):
            if t.is_alive() and threading.current_thread() is not t:
                t.join(timeout=2 * POLL + 1)

    def _fail(self, outcome: Outcome) -> None:
        with self._lock:
            if self.failure is not None:
                return
            self.failure = outcome
            waiters = list(self._waiters.values())
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass
        for w in waiters:
            w.offer(outcome)

    # -- sending ------------------------------------------------------------------------

    def _send(self, ksock: KsockHeader, header: LnetHeader | None = None, payload: bytes = b"") -> Outcome | None:
        """Write one message; a failure (also kept as the connection's) or None."""
        data = ksock.pack() + (header.pack(self.wide) if header is not None else b"") + payload
        with self._send_lock:
            if self.failure is not None:
                return self.failure
            try:
                self._sock.sendall(data)
            except socket.timeout:
                self._fail(Outcome("timeout", f"the peer did not take a message for {self.node.send_timeout:g} s"))
            except (ConnectionError, OSError) as exc:
                self._fail(Outcome("reset", f"sending: {exc.__class__.__name__}: {exc}"))
        return self.failure if self.failure is not None else None

    def _header(self, msg_type: int, payload_length: int, dest: tuple[Nid, int] | None = None,
                src_pid: int | None = None, **variant) -> LnetHeader:
        nid, pid = dest if dest is not None else (self.peer_nid, self.peer_pid)
        return LnetHeader(msg_type, nid, self.node.nid, pid, self.node.pid if src_pid is None else src_pid,
                          payload_length, **variant)

    def _send_lnet(self, header: LnetHeader, payload: bytes = b"") -> Outcome | None:
        return self._send(KsockHeader(C["KSOCK_MSG_LNET"]), header, payload)

    def put(self, portal: int, match_bits: int, payload: bytes, *, offset: int = 0, hdr_data: int = 0,
            ack: bool = False, timeout: float = 5.0, dest_pid: int | None = None) -> Outcome:
        """Send a PUT.  With `ack`, ask for an ACK (a wire handle of this connection's making)
        and wait up to `timeout` for it: `acked` (the ACK as `reply`), or the fault met."""
        wmd = self._new_wmd() if ack else NONE_WMD
        dest = (self.peer_nid, self.peer_pid if dest_pid is None else dest_pid)
        header = self._header(C["LNET_MSG_PUT"], len(payload), dest, wmd=wmd, match_bits=match_bits,
                              hdr_data=hdr_data, portal=portal, offset=offset)
        if not ack:
            failed = self._send_lnet(header, payload)
            return failed if failed is not None else Outcome("sent")
        return self._send_and_await(("ack", wmd), header, payload, timeout, "ACK", "acked")

    def noop(self, count: int = 1) -> Outcome:
        """Send `count` NOOPs (keepalives; a peer must ignore them): `sent`, or the fault met."""
        for _ in range(count):
            failed = self._send(KsockHeader(C["KSOCK_MSG_NOOP"]))
            if failed is not None:
                return failed
        return Outcome("sent")

    def put_cut(self, portal: int, match_bits: int, payload: bytes, keep: int, *, offset: int = 0,
                dest_pid: int | None = None) -> Outcome:
        """A fault made on purpose: send a PUT's headers and the first `keep` bytes of its
        payload, then close the connection (the peer sees a reset in the middle of a message)."""
        dest = (self.peer_nid, self.peer_pid if dest_pid is None else dest_pid)
        header = self._header(C["LNET_MSG_PUT"], len(payload), dest, wmd=NONE_WMD, match_bits=match_bits,
                              portal=portal, offset=offset)
        data = KsockHeader(C["KSOCK_MSG_LNET"]).pack() + header.pack(self.wide) + payload[:max(0, keep)]
        with self._send_lock:
            if self.failure is not None:
                return self.failure
            try:
                self._sock.sendall(data)
            except OSError as exc:
                self._fail(Outcome("reset", f"sending: {exc.__class__.__name__}: {exc}"))
                return self.failure
        self._fail(Outcome("closed", f"closed on purpose after {keep} of {len(payload)} payload bytes"))
        return Outcome("sent")

    def ping(self, timeout: float = 5.0) -> Outcome:
        """Ping the peer as discovery does (lib-move.c: lnet_send_ping: a GET on the reserved
        portal with the ping match bits, room for LNET_PING_INFO_MIN_SIZE): `reply` with the
        REPLY (its payload is the peer's ping info), or the fault met."""
        wmd = self._new_wmd()
        sink = layout("lnet_ping_info").size + C["LNET_INTERFACES_MIN"] * layout("lnet_ni_status").size
        header = self._header(C["LNET_MSG_GET"], 0, wmd=wmd, match_bits=C["LNET_PROTO_PING_MATCHBITS"],
                              portal=C["LNET_RESERVED_PORTAL"], sink_length=sink)
        return self._send_and_await(("reply", wmd), header, b"", timeout, "answer to the ping", "reply")

    def _new_wmd(self) -> bytes:
        """A wire handle of this connection's making (opaque to the peer, which echoes it)."""
        return (0).to_bytes(8, "little") + next(self._cookies).to_bytes(8, "little")

    def _send_and_await(self, key, header: LnetHeader, payload: bytes, timeout: float, what: str,
                        kind: str) -> Outcome:
        """Send, then wait up to `timeout` for the one message awaited under `key`."""
        waiter = self._register(key)
        if isinstance(waiter, Outcome):
            return waiter
        try:
            failed = self._send_lnet(header, payload)
            if failed is not None:
                return failed
            try:
                item = waiter.queue.get(timeout=timeout)
            except queue.Empty:
                return Outcome("timeout", f"no {what} within {timeout:g} s")
            return item if isinstance(item, Outcome) else Outcome(kind, reply=item)
        finally:
            self._unregister(key)

    # -- exchanges ----------------------------------------------------------------------

    def _register(self, key) -> "_Waiter | Outcome":
        with self._lock:
            if self.failure is not None:
                return self.failure
            if key in self._waiters:
                return Outcome("error", f"{key} is already awaited on this connection")
            w = self._waiters[key] = _Waiter()
            return w

    def _unregister(self, key) -> None:
        with self._lock:
            self._waiters.pop(key, None)

    def exchange(self, portal: int, match_bits: int, payload: bytes, *, reply_portal: int, at: bool = True,
                 timeout: float = 5.0, max_wait: float | None = None,
                 renew: Callable[[Message], float] | None = None, src_pid: int | None = None,
                 given_up: Callable[[], bool] | None = None) -> Outcome:
        """PUT `payload` to `portal` with `match_bits` and wait for the PUT that answers it on
        `reply_portal` with the same match bits.  With `at` (the request asked for adaptive
        timeouts), a reply at offset 0 is an early one: it is kept, and the wait starts again
        (`renew(early)` seconds, by default `timeout`); the first reply at another offset, or
        any reply without `at`, is the final one.  The whole wait never exceeds `max_wait`
        (default 10 x `timeout`).  `src_pid`: the process of this node that sends it (default the
        node's): only a reply to that pid answers it, so processes may use the same match bits.
        `given_up()`, asked while no reply has come (after GIVEN_UP_FIRST, then every
        GIVEN_UP_EVERY seconds), True when the peer says no reply is coming: the wait ends at
        once, as a timeout."""
        key = (reply_portal, match_bits) if src_pid is None else (reply_portal, match_bits, src_pid)
        waiter = self._register(key)
        if isinstance(waiter, Outcome):
            return waiter
        early: list[Message] = []
        try:
            failed = self._send_lnet(self._header(C["LNET_MSG_PUT"], len(payload), src_pid=src_pid,
                                                  match_bits=match_bits, portal=portal), payload)
            if failed is not None:
                return failed
            start = time.monotonic()
            cap = start + (max_wait if max_wait is not None else 10 * timeout)
            deadline = start + timeout
            ask = start + GIVEN_UP_FIRST
            while True:
                now = time.monotonic()
                remaining = min(deadline, cap) - now
                if remaining <= 0:
                    late = f" after {len(early)} early repl{'y' if len(early) == 1 else 'ies'}" if early else ""
                    return Outcome("timeout", f"no final reply to match bits {match_bits:#x}{late}", early=tuple(early))
                try:
                    item = waiter.queue.get(timeout=remaining if given_up is None else max(0.0, min(remaining, ask - now)))
                except queue.Empty:
                    if given_up is not None and time.monotonic() >= ask:
                        if given_up() and waiter.queue.empty():
                            return Outcome("timeout", f"no reply to match bits {match_bits:#x}: the peer sent none",
                                           early=tuple(early))
                        ask = time.monotonic() + GIVEN_UP_EVERY
                    continue
                if isinstance(item, Outcome):
                    return Outcome(item.kind, item.detail, early=tuple(early))
                if at and item.offset == 0:
                    early.append(item)
                    wait = renew(item) if renew is not None else timeout
                    deadline = time.monotonic() + max(0.0, wait)
                    continue
                return Outcome("reply", reply=item, early=tuple(early))
        finally:
            self._unregister(key)

    # -- reading ------------------------------------------------------------------------

    def _read(self, n: int, what: str) -> bytes:
        return _read_exact(self._sock, n, 0.0, what, lambda: self._closing, stall=self.node.stall_timeout,
                           spare=self._spare)

    def _read_loop(self) -> None:
        try:
            while True:
                ksock = unpack_ksock(self._read(layout("ksock_msg_hdr").size, "ksock message header"), self._big)
                if ksock.type == C["KSOCK_MSG_NOOP"]:
                    self.counts["noop"] += 1        # a keepalive or a ZC-ACK: this node asks for neither
                    continue
                if ksock.type != C["KSOCK_MSG_LNET"]:
                    raise _Fault("garbage", f"ksock message type {ksock.type:#x} (NOOP {C['KSOCK_MSG_NOOP']:#x} or "
                                            f"LNET {C['KSOCK_MSG_LNET']:#x} expected)")
                raw = self._read(lnet_header_size(self.wide), "LNet header")
                try:
                    header = unpack_lnet_header(raw, self.wide)
                except WireError as exc:
                    raise _Fault("garbage", str(exc)) from None
                self._check(header)
                payload = self._read(header.payload_length, "LNet payload") if header.payload_length else b""
                if ksock.zc_cookies[0]:
                    failed = self._send(KsockHeader(C["KSOCK_MSG_NOOP"], 0, (0, ksock.zc_cookies[0])))
                    if failed is not None:
                        return
                    self.counts["zc_ack_sent"] += 1
                if self._userspace:         # the identity given at the handshake, not the header's
                    header = replace(header, src_nid=self.peer_nid, src_pid=self.peer_pid)
                self._dispatch(Message(ksock, header, payload))
        except _Fault as fault:
            self._fail(Outcome(fault.kind, fault.detail))
        except Exception as exc:            # a bug of the engine: never the peer's fault
            self._fail(Outcome("error", f"LNet engine: {exc.__class__.__name__}: {exc}"))

    def _check(self, h: LnetHeader) -> None:
        """What makes lib-move.c: lnet_parse refuse a message (and socklnd drop the connection)."""
        if h.type in (C["LNET_MSG_GET"], C["LNET_MSG_ACK"]) and h.payload_length:
            raise _Fault("garbage", f"LNet message type {h.type} with a payload of {h.payload_length} bytes")
        if h.payload_length > C["LNET_MTU"]:
            raise _Fault("garbage", f"LNet payload_length {h.payload_length} above LNET_MTU {C['LNET_MTU']}")
        if h.dest_nid != self.node.nid:
            raise _Fault("garbage", f"LNet message for {h.dest_nid}, this node is {self.node.nid}")

    def _dispatch(self, msg: Message) -> None:
        h = msg.header
        if h.type == C["LNET_MSG_GET"]:
            if h.portal == C["LNET_RESERVED_PORTAL"] and h.match_bits == C["LNET_PROTO_PING_MATCHBITS"]:
                info = ping_info(self.node.nid, self.node.pid).pack()[:h.sink_length]
                if self._send_lnet(self._header(C["LNET_MSG_REPLY"], len(info), (h.src_nid, h.src_pid), wmd=h.wmd),
                                   info) is None:
                    self.counts["ping"] += 1
            else:
                self.counts["get_dropped"] += 1     # no MD here: dropped, as lnet_parse_get drops it
            return
        if h.type == C["LNET_MSG_ACK"]:
            self.counts["ack_received"] += 1
            with self._lock:
                waiter = self._waiters.get(("ack", h.wmd))
            if waiter is not None:
                waiter.offer(msg)
            return
        if h.type == C["LNET_MSG_REPLY"]:
            self.counts["reply_received"] += 1
            with self._lock:
                waiter = self._waiters.get(("reply", h.wmd))
            if waiter is not None:                  # the answer to this node's ping
                waiter.offer(msg)
            return
        with self._lock:
            waiter = self._waiters.get((h.portal, h.match_bits, h.dest_pid)) or self._waiters.get((h.portal, h.match_bits))
        if waiter is None and self._handler is None:
            self.unmatched.append(msg)              # nobody waits: dropped, no ACK (lnet_parse_put)
            return
        if h.wants_ack:
            if self._send_lnet(self._header(C["LNET_MSG_ACK"], 0, (h.src_nid, h.src_pid), wmd=h.wmd,
                                            match_bits=h.match_bits, mlength=len(msg.payload))) is not None:
                return
            self.counts["ack_sent"] += 1
        if waiter is not None:
            waiter.offer(msg)
            return
        try:
            self._inbox.put_nowait(msg)
        except queue.Full:
            self.counts["handler_dropped"] += 1

    def _handle_loop(self) -> None:
        # until closed here, or until the connection failed and what it delivered is handled
        while not self._closing and (self.failure is None or not self._inbox.empty()):
            try:
                msg = self._inbox.get(timeout=POLL)
            except queue.Empty:
                continue
            if msg is _WAKE:
                continue
            try:
                self._handler(self, msg)
            except Exception:                       # the handler's bug must not end the connection
                self.counts["handler_error"] += 1


@dataclass
class Node:
    """One LNet node: its NID, its pid and its one incarnation (socklnd.c: ksnn_incarnation,
    the time the node started), shared by every connection it makes or accepts."""
    nid: Nid
    pid: int = C["LNET_PID_LUSTRE"]
    incarnation: int = field(default_factory=time.time_ns)
    handshake_timeout: float = float(C["ACCEPT_TIMEOUT"])
    send_timeout: float = 10.0        # a send the peer does not take within this is a timeout
    stall_timeout: float = 10.0       # a message begun must go on arriving without a longer gap
    tap: object = None                # a tap.py PcapTap: every byte of every connection recorded

    def __post_init__(self):
        if isinstance(self.nid, str):
            self.nid = Nid.parse(self.nid)
        self._conns: dict[Nid, Connection] = {}
        self._lock = threading.Lock()

    def connect(self, host: str, peer_nid: Nid | str, port: int = C["ACCEPT_PORT"], *, privileged: bool = True,
                retries: int = 3, version: int | None = None,
                handler: Callable[[Connection, Message], None] | None = None, source_port: int = 0) -> Outcome:
        """Connect to the node `peer_nid` at host:port (one CONTROL connection per peer: an
        open one is returned as it is).  `connected` with the connection, or the fault met."""
        peer = Nid.parse(peer_nid) if isinstance(peer_nid, str) else peer_nid
        with self._lock:
            existing = self._conns.get(peer)
            if existing is not None and existing.alive:
                return Outcome("connected", connection=existing)
        if version is None:
            version = C["KSOCK_PROTO_V3"] if peer.is_nid4 and self.nid.is_nid4 else C["KSOCK_PROTO_V4"]
        for attempt in range(max(0, retries) + 1):
            outcome, retry_version = self._connect_once(host, port, peer, privileged, version, handler, source_port)
            if retry_version is None:
                if outcome.ok:
                    with self._lock:
                        self._conns[peer] = outcome.connection
                return outcome
            version = retry_version          # NONE in another version: try the peer's (ksocknal_recv_hello)
            time.sleep(min(0.05 * (attempt + 1), 0.5))
        return Outcome("refused", f"{host}:{port} answered every hello with type NONE ({retries + 1} attempts)")

    def _connect_once(self, host, port, peer: Nid, privileged, version, handler,
                      source_port: int = 0) -> tuple[Outcome, int | None]:
        """One attempt: its outcome, and the version to retry with when answered NONE."""
        deadline = time.monotonic() + self.handshake_timeout
        source = str(ipaddress.ip_address(self.nid.addr))   # from the node's own address, as lnet_connect does
        dialled = _dial(host, port, source, privileged, self.handshake_timeout, source_port)
        if isinstance(dialled, Outcome):
            return dialled, None
        sock = dialled if self.tap is None else self.tap.wrap(dialled)
        try:
            hello = Hello(version, self.nid, peer, self.pid, C["LNET_PID_LUSTRE"], self.incarnation, 0,
                          C["SOCKLND_CONN_CONTROL"])
            sock.settimeout(self.handshake_timeout)
            sock.sendall(AcceptorRequest(peer).pack() + hello.pack())
            reply = _read_hello(sock, deadline)
            if reply.src_nid != peer or reply.src_pid != C["LNET_PID_LUSTRE"]:
                raise _Fault("refused", f"connected to {peer} at {host}:{port}, but it claims to be "
                                        f"{reply.src_nid} (pid {reply.src_pid})")
            if reply.ctype == C["SOCKLND_CONN_NONE"]:
                sock.close()
                return Outcome("refused", "hello answered NONE"), reply.version
            if _invert(reply.ctype) != C["SOCKLND_CONN_CONTROL"]:
                raise _Fault("refused", f"hello answered with type {reply.ctype}, CONTROL expected")
        except _Fault as fault:
            sock.close()
            return Outcome(fault.kind, fault.detail), None
        except (ConnectionError, OSError) as exc:
            sock.close()
            kind = "timeout" if isinstance(exc, socket.timeout) else "reset"
            return Outcome(kind, f"handshake with {host}:{port}: {exc.__class__.__name__}: {exc}"), None
        conn = Connection(self, sock, peer_nid=peer, peer_pid=reply.src_pid, version=reply.version,
                          peer_big=reply.big, peer_incarnation=reply.src_incarnation, handler=handler,
                          name=f"{peer} at {host}:{port}")
        return Outcome("connected", connection=conn.start()), None

    def close(self) -> None:
        with self._lock:
            conns, self._conns = list(self._conns.values()), {}
        for c in conns:
            c.close()


def _dial(host: str, port: int, source: str, privileged: bool, timeout: float,
          source_port: int = 0) -> "socket.socket | Outcome":
    """A TCP connection to host:port from the address `source` and a privileged port (1023 down
    to 512, as acceptor.c: lnet_connect scans; a port in use is passed by), or any port."""
    try:
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
    except ValueError:
        return Outcome("refused", f"{host!r} is not an IP address (a NID's address is dialled, never a name)")
    ports = (range(C["LNET_ACCEPTOR_MAX_RESERVED_PORT"], C["LNET_ACCEPTOR_MIN_RESERVED_PORT"] - 1, -1)
             if privileged else (source_port,))     # unprivileged: that port (a user-space peer's identity) or any
    denied = None
    for p in ports:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((source, p))
        except OSError as exc:
            sock.close()
            if exc.errno in (errno.EACCES, errno.EPERM):
                denied = exc
            elif exc.errno not in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
                return Outcome("refused", f"binding port {p}: {exc}")
            continue
        try:
            sock.settimeout(timeout)
            sock.connect((host, port))
            return sock
        except OSError as exc:
            sock.close()
            if exc.errno in (errno.EADDRINUSE, errno.EADDRNOTAVAIL):
                continue
            kind = "timeout" if isinstance(exc, socket.timeout) else "refused"
            return Outcome(kind, f"TCP connection to {host}:{port}: {exc}")
    if denied is not None:
        raise LnetSetupError(
            f"cannot bind a privileged source port ({C['LNET_ACCEPTOR_MIN_RESERVED_PORT']}-"
            f"{C['LNET_ACCEPTOR_MAX_RESERVED_PORT']}) to reach {host}:{port}: {denied.strerror}.  An LNet "
            "acceptor with accept=secure (the default) refuses any other port: run as root or with "
            "CAP_NET_BIND_SERVICE, or have the server load lnet with accept=all and connect from an "
            "unprivileged port")
    return Outcome("refused", f"no privileged source port free to reach {host}:{port}")


class Listener:
    """Accepts LNet connections for `node` on host:port (0: any free port), each answered and
    read as socklnd's passive side does; `handler(connection, message)` receives the PUTs no
    exchange waits for (called from the connection's reader: it must not block long)."""

    def __init__(self, node: Node, host: str = "127.0.0.1", port: int = 0, *, accept_all: bool = False,
                 handler: Callable[[Connection, Message], None] | None = None):
        self.node, self.accept_all, self.handler = node, accept_all, handler
        family = socket.AF_INET6 if ipaddress.ip_address(host).version == 6 else socket.AF_INET
        self._sock = socket.socket(family, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self._sock.listen(8)
        self.address = self._sock.getsockname()[:2]
        self.connections: list[Connection] = []
        self.refusals: deque[str] = deque(maxlen=MAX_QUEUED)     # why each refused connection was refused
        self._incarnations: dict[tuple[Nid, int], int] = {}     # by peer (NID, pid)
        self._lock = threading.Lock()
        self._handshakes = 0                                    # handshakes being read now
        self._closing = False
        self._thread = threading.Thread(target=self._accept_loop, name=f"lnet listener {self.address}", daemon=True)

    def start(self) -> "Listener":
        if self._thread.ident is None:
            self._thread.start()
        return self

    def close(self) -> None:
        self._closing = True
        self._thread.join(timeout=2 * POLL + 1)
        try:
            self._sock.close()
        except OSError:
            pass
        with self._lock:
            conns, self.connections = list(self.connections), []
        for c in conns:
            c.close()

    def __enter__(self) -> "Listener":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    def _accept_loop(self) -> None:
        while not self._closing:
            try:
                ready, _, _ = select.select([self._sock], [], [], POLL)
                if not ready:
                    continue
                sock, peer = self._sock.accept()
            except OSError:
                continue
            if self.node.tap is not None:
                sock = self.node.tap.wrap(sock, server_side=True)
            with self._lock:
                live = [c for c in self.connections if c.alive]
                self.connections = live
                full = len(live) >= MAX_CONNECTIONS
                busy = not full and self._handshakes >= MAX_HANDSHAKES
                if not (full or busy):
                    self._handshakes += 1
            if full or busy:
                why = (f"{MAX_CONNECTIONS} connections open already" if full else
                       f"{MAX_HANDSHAKES} handshakes under way already (peers that connect and do not speak)")
                self.refusals.append(f"{peer[0]}:{peer[1]}: {why}")
                sock.close()
                continue
            try:
                threading.Thread(target=self._handshake_counted, args=(sock, peer), daemon=True,
                                 name=f"lnet handshake {peer[0]}:{peer[1]}").start()
            except RuntimeError as exc:          # no thread to be had: this one is refused
                with self._lock:
                    self._handshakes -= 1
                self.refusals.append(f"{peer[0]}:{peer[1]}: {exc}")
                sock.close()

    def _handshake_counted(self, sock: socket.socket, peer) -> None:
        try:
            self._handshake(sock, peer)
        except Exception as exc:                # a bug here: the peer is refused, the listener goes on
            self._refuse(sock, peer, f"LNet engine: {exc.__class__.__name__}: {exc}")
        finally:
            with self._lock:
                self._handshakes -= 1

    def _refuse(self, sock: socket.socket, peer, why: str, answer: bytes = b"") -> None:
        """Record why, send `answer` if any, close.  Bytes the peer sent that were not read
        would make the close a reset that can destroy the answer: they are read first, for a
        moment at most."""
        self.refusals.append(f"{peer[0]}:{peer[1]}: {why}")
        try:
            if answer:
                sock.sendall(answer)
                sock.shutdown(socket.SHUT_WR)
                sock.settimeout(POLL)
                for _ in range(16):
                    if not sock.recv(1 << 12):
                        break
        except OSError:
            pass
        sock.close()

    def _handshake(self, sock: socket.socket, peer) -> None:
        node = self.node
        deadline = time.monotonic() + node.handshake_timeout
        if peer[1] > C["LNET_ACCEPTOR_MAX_RESERVED_PORT"] and not self.accept_all:
            return self._refuse(sock, peer, f"source port {peer[1]} is not privileged (acceptor.c: lnet_acceptor)")
        stub = AcceptorRequest(Nid.from_nid4(0), C["LNET_PROTO_ACCEPTOR_VERSION"]).pack()
        try:
            first = _read_exact(sock, 8, deadline, "acceptor request")
            if int.from_bytes(first[:4], "little") == C["LNET_PROTO_MAGIC"]:
                return self._refuse(sock, peer, "a hello where the acceptor request belongs", stub)
            try:
                size = acceptor_size(first)
            except WireError as exc:
                answer = stub if "acr_version" in str(exc) else b""
                return self._refuse(sock, peer, str(exc), answer)
            request = unpack_acceptor(first + _read_exact(sock, size - 8, deadline, "acceptor request"))
            if request.nid != node.nid:
                return self._refuse(sock, peer, f"acceptor request for {request.nid}, this node is {node.nid}")
            hello = _read_hello(sock, deadline)
        except _Fault as fault:
            return self._refuse(sock, peer, fault.detail)
        except WireError as exc:
            return self._refuse(sock, peer, str(exc))
        if hello.src_nid.is_any:
            return self._refuse(sock, peer, "hello from LNET_NID_ANY")
        userspace = peer[1] > C["LNET_ACCEPTOR_MAX_RESERVED_PORT"]
        if userspace:
            addr = ipaddress.ip_address(peer[0]).packed
            peer_nid, peer_pid = Nid(node.nid.lnd, node.nid.net, addr), peer[1] | C["LNET_PID_USERFLAG"]
        else:
            peer_nid, peer_pid = hello.src_nid, hello.src_pid
        ctype = _invert(hello.ctype)
        if ctype == C["SOCKLND_CONN_NONE"]:
            return self._refuse(sock, peer, f"hello of type {hello.ctype}")
        who = (peer_nid, peer_pid)
        conn = None
        with self._lock:
            # socklnd_cb.c: ksocknal_send_hello rewrites the received hello's source fields, the
            # destination NID and the type; its dst_pid and dst_incarnation stay as they came.
            # The incarnation is the node's when the connection is listed
            answer = Hello(hello.version, node.nid, peer_nid, node.pid, hello.dst_pid, node.incarnation,
                           hello.dst_incarnation, ctype)
            known = self._incarnations.get(who)
            stale = [c for c in self.connections if (c.peer_nid, c.peer_pid) == who]
            rebooted = known is not None and known != hello.src_incarnation
            if rebooted:
                del self._incarnations[who]
            else:
                self._incarnations[who] = hello.src_incarnation
            # socklnd.c: ksocknal_create_conn refuses a duplicate of a connection of the same
            # type (one per type: conns_per_peer 1); a client's typed connections (CONTROL,
            # BULK_IN, BULK_OUT) are not duplicates of each other
            duplicate = any(c.alive and c.ctype == ctype for c in stale)
            if not (rebooted or duplicate or self._closing):
                # listed before the answer: once the peer has it, the connection is listed
                # (and closing the listener's connections closes it too)
                conn = Connection(node, sock, peer_nid=peer_nid, peer_pid=peer_pid, version=hello.version,
                                  peer_big=hello.big, peer_incarnation=hello.src_incarnation, handler=self.handler,
                                  userspace_peer=userspace, name=f"{peer_nid} from {peer[0]}:{peer[1]}", ctype=ctype)
                self.connections.append(conn)
        none = replace(answer, ctype=C["SOCKLND_CONN_NONE"]).pack()
        if rebooted:
            for c in stale:
                c.close()
            return self._refuse(sock, peer, f"{peer_nid} came back with a new incarnation (peer rebooted)", none)
        if duplicate:
            return self._refuse(sock, peer, f"{peer_nid} is connected already (duplicate)", none)
        if conn is None:                    # the listener is closing
            sock.close()
            return
        try:
            sock.settimeout(node.handshake_timeout)
            sock.sendall(answer.pack())
        except OSError as exc:
            conn.close()
            self.refusals.append(f"{peer[0]}:{peer[1]}: answering the hello: {exc}")
            return
        sock.settimeout(node.send_timeout)
        conn.start()
