"""The LNet node engine (harness/transport/lnet_engine/node.py) on loopback: engine to engine,
and against hand-driven peers that misbehave.  Every peer here is on 127.0.0.0/8, the engines
connect from unprivileged ports (a listener that accepts all, like `accept=all`), and every wait
is bounded: a peer that resets, stalls, floods or lies ends as an outcome within seconds."""
from __future__ import annotations

import errno
import queue
import socket
import struct
import threading

import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.transport.lnet_engine import node as engine
from ptlrpc_conformance.harness.transport.lnet_engine import wire
from ptlrpc_conformance.harness.transport.lnet_engine.node import Listener, LnetSetupError, Node
from ptlrpc_conformance.harness.transport.lnet_engine.wire import C, Hello, KsockHeader, LnetHeader, Nid

SERVER = Nid.parse("127.0.0.1@tcp")
CLIENT = Nid.parse("127.0.0.2@tcp")
OST_REQUEST_PORTAL, OSC_REPLY_PORTAL = 28, 4      # lustre_idl.h
EARLY_SIZE = 224        # lustre_msg_early_size (ptlrpc/pack_generic.c): a final reply's offset with AT
XID = 0x5F00000000001234
INC_BIG = 0x0102030405060708
WAIT = 5.0              # the longest any single wait here may take (none should come near)


def test_the_final_reply_offset_is_lustre_msg_early_size():
    """224 = a lustre_msg_v2 header with one buffer, 8-aligned, then a ptlrpc_body, 8-aligned
    (pack_generic.c: lustre_msg_early_size_init, lustre_msg_hdr_size_v2), from the layout table."""
    def round8(n):
        return (n + 7) & ~7
    buflens = spec.layout("lustre_msg_v2").field("lm_buflens")
    assert round8(buflens.offset + buflens.elem_size) + round8(spec.layout("ptlrpc_body_v3").size) == EARLY_SIZE


@pytest.fixture
def client():
    n = Node(CLIENT, stall_timeout=1.0, send_timeout=2.0)
    yield n
    n.close()


# -- engine to engine -----------------------------------------------------------------

def _serve(handler):
    return Listener(Node(SERVER), "127.0.0.1", 0, accept_all=True, handler=handler).start()


def test_request_early_reply_final_reply_and_ack(client):
    """A request PUT with match bits = XID to portal 28; the server answers an early reply at
    offset 0, then the final one at offset 224 asking for an ACK; the client sends the ACK."""
    seen: queue.Queue = queue.Queue()

    def handler(conn, msg):
        seen.put((msg.portal, msg.match_bits, msg.offset, msg.payload))
        conn.put(OSC_REPLY_PORTAL, msg.match_bits, b"E" * EARLY_SIZE, offset=0)
        seen.put(conn.put(OSC_REPLY_PORTAL, msg.match_bits, b"final", offset=EARLY_SIZE, ack=True, timeout=WAIT))

    with _serve(handler) as listener:
        out = client.connect(*listener.address[:1], SERVER, listener.address[1], privileged=False)
        assert out.kind == "connected", out
        conn = out.connection
        r = conn.exchange(OST_REQUEST_PORTAL, XID, b"request", reply_portal=OSC_REPLY_PORTAL, at=True, timeout=WAIT)
        assert r.kind == "reply", r
        assert (r.reply.portal, r.reply.match_bits, r.reply.offset, r.reply.payload) == (4, XID, 224, b"final")
        assert [(e.offset, len(e.payload)) for e in r.early] == [(0, 224)]
        assert seen.get(timeout=WAIT) == (28, XID, 0, b"request")
        assert seen.get(timeout=WAIT).kind == "acked"
        assert conn.counts["ack_sent"] == 1
        server_side = listener.connections[0]
        assert server_side.counts["ack_received"] == 1
        # the listener knows an unprivileged peer by its address and port, as socklnd does
        assert server_side.peer_nid == CLIENT
        assert server_side.peer_pid & C["LNET_PID_USERFLAG"]


def test_without_adaptive_timeouts_the_first_reply_is_final(client):
    with _serve(lambda conn, msg: conn.put(OSC_REPLY_PORTAL, msg.match_bits, b"r", offset=0)) as listener:
        conn = client.connect("127.0.0.1", SERVER, listener.address[1], privileged=False).connection
        r = conn.exchange(OST_REQUEST_PORTAL, 7, b"q", reply_portal=OSC_REPLY_PORTAL, at=False, timeout=WAIT)
        assert (r.kind, r.reply.offset, r.early) == ("reply", 0, ())


def test_replies_are_matched_by_portal_and_match_bits(client):
    """A PUT on another portal, or with other match bits, is not the reply (it is kept unmatched)."""
    def handler(conn, msg):
        conn.put(10, msg.match_bits, b"wrong portal", offset=EARLY_SIZE)
        conn.put(OSC_REPLY_PORTAL, msg.match_bits + 1, b"wrong bits", offset=EARLY_SIZE)
        conn.put(OSC_REPLY_PORTAL, msg.match_bits, b"right", offset=EARLY_SIZE)

    with _serve(handler) as listener:
        conn = client.connect("127.0.0.1", SERVER, listener.address[1], privileged=False).connection
        r = conn.exchange(OST_REQUEST_PORTAL, XID, b"q", reply_portal=OSC_REPLY_PORTAL, timeout=WAIT)
        assert (r.kind, r.reply.payload) == ("reply", b"right")
        assert sorted(m.payload for m in conn.unmatched) == [b"wrong bits", b"wrong portal"]


def test_a_ping_is_answered_with_loopback_and_the_one_nid(client):
    with _serve(None) as listener:
        client.connect("127.0.0.1", SERVER, listener.address[1], privileged=False)
        server_side = _first_connection(listener)
        r = server_side.ping(timeout=WAIT)
        assert r.kind == "reply", r
        info = wire.unpack_ping_info(r.reply.payload)
        assert info.features == C["LNET_PING_FEAT_NI_STATUS"]
        assert [n for n, _, _ in info.nis] == [C["LNET_NID_LO_0"], CLIENT.nid4]
        assert r.reply.header.type == C["LNET_MSG_REPLY"]


def test_one_connection_per_peer_and_one_incarnation(client):
    with _serve(None) as listener:
        first = client.connect("127.0.0.1", SERVER, listener.address[1], privileged=False)
        again = client.connect("127.0.0.1", SERVER, listener.address[1], privileged=False)
        assert again.connection is first.connection
        assert first.connection.peer_incarnation == listener.node.incarnation


def test_protocol_v4_with_wide_headers(client):
    with _serve(lambda conn, msg: conn.put(OSC_REPLY_PORTAL, msg.match_bits, b"v4", offset=EARLY_SIZE)) as listener:
        out = client.connect("127.0.0.1", SERVER, listener.address[1], privileged=False, version=4)
        assert out.connection.version == 4 and out.connection.wide
        r = out.connection.exchange(OST_REQUEST_PORTAL, XID, b"q", reply_portal=OSC_REPLY_PORTAL, timeout=WAIT)
        assert (r.kind, r.reply.payload) == ("reply", b"v4")


def test_listener_refuses_another_nid_and_insecure_ports(client):
    listener = Listener(Node(SERVER), "127.0.0.1", 0, accept_all=False).start()
    with listener:
        out = client.connect("127.0.0.1", SERVER, listener.address[1], privileged=False, retries=0)
        assert out.kind in ("closed", "reset") and not out.ok
        other = Node(Nid.parse("127.0.0.3@tcp"))
        with Listener(Node(SERVER), "127.0.0.1", 0, accept_all=True) as open_listener:
            bad = other.connect("127.0.0.1", Nid.parse("127.0.0.9@tcp"), open_listener.address[1], privileged=False)
            assert not bad.ok
            assert any("acceptor request for 127.0.0.9@tcp" in r for r in open_listener.refusals)
    assert any("is not privileged" in r for r in listener.refusals)


def test_exchange_on_a_closed_connection_is_an_outcome(client):
    with _serve(None) as listener:
        conn = client.connect("127.0.0.1", SERVER, listener.address[1], privileged=False).connection
        conn.close()
        r = conn.exchange(OST_REQUEST_PORTAL, XID, b"q", reply_portal=OSC_REPLY_PORTAL, timeout=WAIT)
        assert r.kind == "closed"


def _first_connection(listener):
    for _ in range(int(WAIT / 0.01)):
        if listener.connections:
            return listener.connections[0]
        threading.Event().wait(0.01)
    raise AssertionError("the listener took no connection")


# -- the privileged source port --------------------------------------------------------

def test_no_privileged_port_is_a_clear_error(monkeypatch):
    class Denied(socket.socket):
        def bind(self, address):
            if address[1]:
                raise PermissionError(errno.EACCES, "Permission denied")
            return super().bind(address)

    monkeypatch.setattr(engine.socket, "socket", Denied)
    with pytest.raises(LnetSetupError) as info:
        Node(CLIENT).connect("127.0.0.1", SERVER, 9, privileged=True)
    text = str(info.value)
    assert "root" in text and "CAP_NET_BIND_SERVICE" in text and "accept=all" in text and "512-1023" in text


def test_privileged_ports_are_tried_from_1023_down(monkeypatch):
    tried = []

    class Busy(socket.socket):
        def bind(self, address):
            tried.append(address[1])
            if address[1] > 1020:
                raise OSError(errno.EADDRINUSE, "in use")
            raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(engine.socket, "socket", Busy)
    with pytest.raises(LnetSetupError):
        Node(CLIENT).connect("127.0.0.1", SERVER, 9, privileged=True)
    assert tried == list(range(1023, 511, -1))


# -- hand-driven peers -----------------------------------------------------------------

class Peer:
    """A server on 127.0.0.1 driven by hand: each connection it accepts has its acceptor request
    and hello read (with the codec) and is given to `script(peer, sock, hello)`."""

    def __init__(self, script, *, big: bool = False):
        self.script, self.big = script, big
        self.hellos: list[Hello] = []
        self.errors: list[BaseException] = []
        self.received: queue.Queue = queue.Queue()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(4)
        self._sock.settimeout(0.1)
        self.port = self._sock.getsockname()[1]
        self._stop = threading.Event()
        self._open: list[socket.socket] = []
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self):
        while not self._stop.is_set():
            try:
                sock, _ = self._sock.accept()
            except OSError:
                continue
            sock.settimeout(WAIT)
            self._open.append(sock)
            try:
                first = _recv(sock, 8)
                wire.unpack_acceptor(first + _recv(sock, wire.acceptor_size(first) - 8))
                head = _recv(sock, 8)
                head += _recv(sock, wire.hello_size(head) - 8)
                hello = wire.unpack_hello(head)
                self.hellos.append(hello)
                self.script(self, sock, hello)
            except Exception as exc:        # noqa: BLE001 (shown by the test that reads it)
                self.errors.append(exc)
            finally:
                sock.close()

    def answer(self, sock, hello, *, ctype=C["SOCKLND_CONN_CONTROL"], src=SERVER):
        sock.sendall(Hello(hello.version, src, hello.src_nid, 12345, 12345, 0xABC, hello.src_incarnation, ctype,
                           big=self.big).pack())

    def send(self, sock, header: LnetHeader, payload=b"", zc=(0, 0)):
        sock.sendall(KsockHeader(C["KSOCK_MSG_LNET"], 0, zc).pack(self.big) + header.pack() + payload)

    def reply(self, to: LnetHeader, payload=b"reply", offset=EARLY_SIZE, **kw):
        return LnetHeader(C["LNET_MSG_PUT"], to.src_nid, SERVER, 12345, 12345, len(payload),
                          match_bits=to.match_bits, portal=OSC_REPLY_PORTAL, offset=offset, **kw), payload

    def read(self, sock):
        """The next LNET message from the client (NOOPs are returned as their ksock header)."""
        k = wire.unpack_ksock(_recv(sock, 24))
        if k.type == C["KSOCK_MSG_NOOP"]:
            return k, None, b""
        h = wire.unpack_lnet_header(_recv(sock, 72))
        return k, h, _recv(sock, h.payload_length)

    def close(self):
        self._stop.set()
        for sock in self._open:               # ends a script waiting on its client
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._thread.join(timeout=WAIT)
        self._sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _recv(sock, n):
    buf = b""
    while len(buf) < n:
        data = sock.recv(n - len(buf))
        if not data:
            raise EOFError(f"{len(buf)} of {n} bytes")
        buf += data
    return buf


def _ask(client, peer, timeout=WAIT, **kw):
    out = client.connect("127.0.0.1", SERVER, peer.port, privileged=False, **kw)
    if not out.ok:
        return out
    return out.connection.exchange(OST_REQUEST_PORTAL, XID, b"request", reply_portal=OSC_REPLY_PORTAL,
                                   timeout=timeout)


def _wait_closed(sock):
    """Hold the connection until the client closes it (bounded)."""
    sock.settimeout(WAIT)
    try:
        while sock.recv(4096):
            pass
    except OSError:
        pass


def test_big_endian_peer_is_read(client):
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        _, h, _ = peer.read(sock)
        peer.send(sock, *peer.reply(h))
        _wait_closed(sock)

    with Peer(script, big=True) as peer:
        r = _ask(client, peer)
        assert (r.kind, r.reply.payload, r.reply.offset) == ("reply", b"reply", EARLY_SIZE)
        hello = peer.hellos[0]
        assert (hello.ctype, hello.src_nid, hello.dst_nid, hello.dst_incarnation) == (1, CLIENT, SERVER, 0)


def test_ping_before_the_first_reply_is_answered(client):
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        _, request, _ = peer.read(sock)
        wmd = bytes(range(16))
        peer.send(sock, LnetHeader(C["LNET_MSG_GET"], CLIENT, SERVER, 12345, 12345, 0, wmd=wmd,
                                   match_bits=C["LNET_PROTO_PING_MATCHBITS"], portal=0, sink_length=272))
        _, answer, payload = peer.read(sock)
        peer.received.put((answer, payload))
        peer.send(sock, *peer.reply(request))
        _wait_closed(sock)

    with Peer(script) as peer:
        r = _ask(client, peer)
        assert r.kind == "reply", r
        answer, payload = peer.received.get(timeout=WAIT)
        assert (answer.type, answer.wmd, answer.dest_nid, answer.payload_length) == (3, bytes(range(16)), SERVER, 48)
        assert [n for n, _, _ in wire.unpack_ping_info(payload).nis] == [C["LNET_NID_LO_0"], CLIENT.nid4]


def test_zero_copy_cookie_is_zc_acked(client):
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        _, h, _ = peer.read(sock)
        peer.send(sock, *peer.reply(h), zc=(77, 0))
        peer.received.put(peer.read(sock)[0])
        _wait_closed(sock)

    with Peer(script) as peer:
        assert _ask(client, peer).kind == "reply"
        assert peer.received.get(timeout=WAIT) == KsockHeader(C["KSOCK_MSG_NOOP"], 0, (0, 77))


def test_noop_flood_is_ignored(client):
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        _, h, _ = peer.read(sock)
        sock.sendall(KsockHeader(C["KSOCK_MSG_NOOP"], 0, (0, C["SOCKNAL_KEEPALIVE_PING"])).pack() * 5000)
        peer.send(sock, *peer.reply(h))
        _wait_closed(sock)

    with Peer(script) as peer:
        r = _ask(client, peer)
        assert r.kind == "reply"
        assert client.connect("127.0.0.1", SERVER, peer.port).connection.counts["noop"] == 5000


def test_noop_flood_without_reply_times_out(client):
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        peer.read(sock)
        noop = KsockHeader(C["KSOCK_MSG_NOOP"]).pack()
        try:
            for _ in range(20000):
                sock.sendall(noop * 10)
        except OSError:
            pass
        _wait_closed(sock)

    with Peer(script) as peer:
        r = _ask(client, peer, timeout=0.5)
        assert r.kind == "timeout", r


def test_never_replying_is_a_timeout(client):
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        peer.read(sock)
        _wait_closed(sock)

    with Peer(script) as peer:
        r = _ask(client, peer, timeout=0.3)
        assert r.kind == "timeout" and "no final reply to match bits 0x5f00000000001234" in r.detail


def test_early_replies_without_a_final_one_end_within_the_cap(client):
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        _, h, _ = peer.read(sock)
        try:
            for _ in range(200):
                peer.send(sock, *peer.reply(h, b"early", offset=0))
                threading.Event().wait(0.02)
        except OSError:
            pass

    with Peer(script) as peer:
        out = client.connect("127.0.0.1", SERVER, peer.port, privileged=False)
        r = out.connection.exchange(OST_REQUEST_PORTAL, XID, b"q", reply_portal=OSC_REPLY_PORTAL, timeout=0.3,
                                    max_wait=0.6)
        assert r.kind == "timeout" and r.early and "early repl" in r.detail


def test_reset_mid_message(client):
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        _, h, _ = peer.read(sock)
        raw = KsockHeader(C["KSOCK_MSG_LNET"]).pack() + peer.reply(h)[0].pack()
        sock.sendall(raw[:50])
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))   # RST

    with Peer(script) as peer:
        r = _ask(client, peer)
        assert r.kind == "reset", r


def test_stall_mid_message(client):
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        _, h, _ = peer.read(sock)
        sock.sendall(KsockHeader(C["KSOCK_MSG_LNET"]).pack() + peer.reply(h)[0].pack()[:10])
        _wait_closed(sock)

    with Peer(script) as peer:
        r = _ask(client, peer)
        assert r.kind == "timeout" and "stopped after" in r.detail


def test_garbage_after_the_hello(client):
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        peer.read(sock)
        sock.sendall(b"\xde\xad\xbe\xef" * 6)
        _wait_closed(sock)

    with Peer(script) as peer:
        r = _ask(client, peer)
        assert r.kind == "garbage" and "ksock message type 0xefbeadde" in r.detail


@pytest.mark.parametrize("header, message", [
    (LnetHeader(2, CLIENT, SERVER, 12345, 12345, 8, portal=0), "with a payload of 8 bytes"),
    (LnetHeader(1, Nid.parse("127.0.0.7@tcp"), SERVER, 12345, 12345, 0), "for 127.0.0.7@tcp"),
    (LnetHeader(1, CLIENT, SERVER, 12345, 12345, (1 << 20) + 1), "above LNET_MTU"),
])
def test_lnet_headers_lnet_parse_refuses_are_garbage(client, header, message):
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        peer.read(sock)
        peer.send(sock, header)
        _wait_closed(sock)

    with Peer(script) as peer:
        r = _ask(client, peer)
        assert r.kind == "garbage" and message in r.detail


def test_garbage_instead_of_a_hello(client):
    with Peer(lambda peer, sock, hello: sock.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")) as peer:
        out = client.connect("127.0.0.1", SERVER, peer.port, privileged=False)
        assert out.kind == "garbage" and "socklnd hello: magic" in out.detail


def test_hello_answered_none_is_retried_then_refused(client):
    with Peer(lambda peer, sock, hello: peer.answer(sock, hello, ctype=C["SOCKLND_CONN_NONE"])) as peer:
        out = client.connect("127.0.0.1", SERVER, peer.port, privileged=False, retries=2)
        assert out.kind == "refused" and "NONE (3 attempts)" in out.detail
        assert len(peer.hellos) == 3
        assert len({h.src_incarnation for h in peer.hellos}) == 1      # one incarnation per node


def test_hello_answered_none_once_then_connected(client):
    def script(peer, sock, hello):
        if len(peer.hellos) == 1:
            return peer.answer(sock, hello, ctype=C["SOCKLND_CONN_NONE"])
        peer.answer(sock, hello)
        _, h, _ = peer.read(sock)
        peer.send(sock, *peer.reply(h))
        _wait_closed(sock)

    with Peer(script) as peer:
        assert _ask(client, peer).kind == "reply"
        assert len(peer.hellos) == 2


def test_hello_claiming_another_nid_is_refused(client):
    with Peer(lambda peer, sock, hello: peer.answer(sock, hello, src=Nid.parse("127.0.0.9@tcp"))) as peer:
        out = client.connect("127.0.0.1", SERVER, peer.port, privileged=False)
        assert out.kind == "refused" and "claims to be 127.0.0.9@tcp" in out.detail


def test_hello_of_the_wrong_type_is_refused(client):
    with Peer(lambda peer, sock, hello: peer.answer(sock, hello, ctype=C["SOCKLND_CONN_ANY"])) as peer:
        out = client.connect("127.0.0.1", SERVER, peer.port, privileged=False)
        assert out.kind == "refused" and "CONTROL expected" in out.detail


def test_silent_peer_during_the_handshake_is_a_timeout():
    quiet = Node(CLIENT, handshake_timeout=0.3)
    with Peer(lambda peer, sock, hello: _wait_closed(sock)) as peer:
        out = quiet.connect("127.0.0.1", SERVER, peer.port, privileged=False)
        assert out.kind == "timeout"
    quiet.close()


def test_a_host_that_is_no_address_is_an_outcome(client):
    out = client.connect("lustre-oss.example", SERVER, 988, privileged=False)
    assert out.kind == "refused" and "not an IP address" in out.detail


def test_connection_refused_is_an_outcome(client):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()                                         # nothing listens there now
    out = client.connect("127.0.0.1", SERVER, port, privileged=False)
    assert out.kind == "refused" and not out.ok


def test_listener_reads_a_big_endian_peer_and_answers_in_its_version():
    """A peer writing big-endian (acceptor request, hello, ksock header) is read; the answer is
    in the peer's version, with the inverted type (BULK_IN -> BULK_OUT), from the listener's NID;
    the peer's PUT reaches the handler under the identity the listener gave it."""
    got: queue.Queue = queue.Queue()
    with Listener(Node(SERVER), "127.0.0.1", 0, accept_all=True, handler=lambda c, m: got.put(m)) as listener:
        with socket.create_connection(listener.address, timeout=WAIT, source_address=("127.0.0.2", 0)) as sock:
            hello = Hello(2, CLIENT, SERVER, 12345, 12345, INC_BIG, 0, C["SOCKLND_CONN_BULK_IN"], big=True)
            sock.sendall(wire.AcceptorRequest(SERVER, big=True).pack() + hello.pack())
            answer = wire.unpack_hello(_recv(sock, 56))
            assert (answer.version, answer.ctype, answer.src_nid, answer.big) == (2, C["SOCKLND_CONN_BULK_OUT"],
                                                                                  SERVER, False)
            assert answer.src_incarnation == listener.node.incarnation
            header = LnetHeader(C["LNET_MSG_PUT"], SERVER, CLIENT, 12345, 12345, 2, match_bits=9, portal=28)
            sock.sendall(KsockHeader(C["KSOCK_MSG_LNET"]).pack(big=True) + header.pack() + b"hi")
            msg = got.get(timeout=WAIT)
            assert (msg.portal, msg.match_bits, msg.payload) == (28, 9, b"hi")
            port = sock.getsockname()[1]
            assert (msg.header.src_nid, msg.header.src_pid) == (CLIENT, port | C["LNET_PID_USERFLAG"])


def _can_bind_privileged() -> bool:
    s = socket.socket()
    try:
        s.bind(("127.0.0.2", 0))
        s.close()
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        for port in range(1023, 511, -1):
            try:
                s.bind(("127.0.0.2", port))
                return True
            except PermissionError:
                return False
            except OSError:
                continue
        return False
    finally:
        s.close()


@pytest.mark.skipif(not _can_bind_privileged(), reason="binding a port below 1024 needs root or CAP_NET_BIND_SERVICE")
def test_privileged_peer_new_incarnation_and_duplicate():
    """From a privileged port the hello's NID is trusted; the same NID with a new incarnation
    has its connection closed and is answered NONE, then accepted on the retry (peer rebooted);
    a second connection with the same incarnation is a duplicate, answered NONE every time."""
    with Listener(Node(SERVER), "127.0.0.1", 0) as listener:
        first = Node(CLIENT, incarnation=1)
        a = first.connect("127.0.0.1", SERVER, listener.address[1])
        assert a.kind == "connected", a
        assert _first_connection(listener).peer_pid == 12345       # the hello's, not the port's
        rebooted = Node(CLIENT, incarnation=2)
        b = rebooted.connect("127.0.0.1", SERVER, listener.address[1])
        assert b.kind == "connected", b
        assert any("peer rebooted" in r for r in listener.refusals)
        r = a.connection.exchange(OST_REQUEST_PORTAL, XID, b"q", reply_portal=OSC_REPLY_PORTAL, timeout=WAIT)
        assert r.kind in ("closed", "reset")                        # the old incarnation's connection is gone
        twin = Node(CLIENT, incarnation=2)
        c = twin.connect("127.0.0.1", SERVER, listener.address[1], retries=1)
        assert c.kind == "refused" and "NONE" in c.detail
        assert any("duplicate" in r for r in listener.refusals)
        for n in (first, rebooted, twin):
            n.close()


def _typed_hello(listener, port: int, ctype: int, opened: list) -> Hello:
    """Dial from 127.0.0.2:`port` as CLIENT (incarnation 7) with a hello of type `ctype`; the
    listener's answer.  The socket is added to `opened`, for the caller to close."""
    sock = socket.socket()
    opened.append(sock)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.2", port))
    sock.settimeout(WAIT)
    sock.connect(listener.address)
    sock.sendall(wire.AcceptorRequest(SERVER).pack() + Hello(3, CLIENT, SERVER, 12345, 12345, 7, 0, ctype).pack())
    head = _recv(sock, 8)
    answer = wire.unpack_hello(head + _recv(sock, wire.hello_size(head) - 8))
    return answer


@pytest.mark.skipif(not _can_bind_privileged(), reason="binding a port below 1024 needs root or CAP_NET_BIND_SERVICE")
def test_a_kernel_peer_s_typed_connections_are_not_duplicates():
    """A kernel client opens CONTROL, BULK_IN and BULK_OUT connections (typed_conns): each is
    answered with the inverted type; only a second one of a type already open is a duplicate,
    answered NONE (socklnd.c: ksocknal_create_conn compares the types)."""
    ctl, bin_, bout = (C[f"SOCKLND_CONN_{t}"] for t in ("CONTROL", "BULK_IN", "BULK_OUT"))
    free = [p for p in range(1023, 511, -1) if _port_free(p)][:4]
    opened: list = []
    try:
        with Listener(Node(SERVER), "127.0.0.1", 0) as listener:
            answers = [_typed_hello(listener, port, t, opened).ctype
                       for port, t in zip(free, (ctl, bin_, bout, bin_))]
            assert answers == [ctl, bout, bin_, C["SOCKLND_CONN_NONE"]]
            assert sum("duplicate" in r for r in listener.refusals) == 1
    finally:
        for sock in opened:
            sock.close()


def _port_free(port: int) -> bool:
    s = socket.socket()
    try:
        s.bind(("127.0.0.2", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


@pytest.mark.parametrize("first", [
    wire.layout("lnet_acceptor_connreq").pack({"acr_magic": C["LNET_PROTO_ACCEPTOR_MAGIC"], "acr_version": 3}),
    Hello(3, CLIENT, SERVER, 12345, 12345, 1, 0, 1).pack(),
])
def test_listener_answers_an_unknown_acceptor_version_or_a_hello_with_its_own_version(first):
    """acceptor.c: lnet_accept answers an acceptor request of another version, or a hello where
    the request belongs, with magic and version 1, then closes."""
    with Listener(Node(SERVER), "127.0.0.1", 0, accept_all=True) as listener:
        with socket.create_connection(listener.address, timeout=WAIT) as sock:
            sock.sendall(first)
            answer = _recv(sock, 16)
            assert wire.unpack_acceptor(answer).version == 1
            assert sock.recv(1) == b""
        assert len(listener.refusals) == 1


# -- the pcap tap -------------------------------------------------------------------------

def _ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not _ipv6_loopback(), reason="this machine has no IPv6 loopback (::1) to connect over")
def test_the_tap_records_an_ipv6_connection(tmp_path):
    """A connection over ::1 is recorded as IPv6 frames (next header TCP, checksums right over
    the IPv6 pseudo-header): its TCP stream holds the acceptor request, the hellos and both
    messages, as sent."""
    from ptlrpc_conformance.harness.capture import pcap
    from ptlrpc_conformance.harness.transport.lnet_engine.tap import PcapTap
    path = tmp_path / "v6.pcap"
    tap = PcapTap(path)
    server_nid = client_nid = Nid.ip("::1")     # an accept=all listener knows the peer by its address

    def handler(conn, msg):
        conn.put(OSC_REPLY_PORTAL, msg.match_bits, b"reply over IPv6", offset=EARLY_SIZE)
    node = Node(client_nid, tap=tap)
    try:
        with Listener(Node(server_nid), "::1", 0, accept_all=True, handler=handler) as listener:
            out = node.connect("::1", server_nid, listener.address[1], privileged=False)
            assert out.kind == "connected", out
            r = out.connection.exchange(OST_REQUEST_PORTAL, XID, b"request over IPv6", reply_portal=OSC_REPLY_PORTAL,
                                        at=True, timeout=WAIT)
            assert r.kind == "reply" and r.reply.payload == b"reply over IPv6", r
            node.close()
    finally:
        node.close()
        tap.close()
    assert tap.skipped == 0
    streams = {True: b"", False: b""}
    frames = list(pcap.packets(path))
    assert frames
    for p in frames:
        assert p.data[12:14] == b"\x86\xdd", f"packet {p.number} is not IPv6"
        ip, tcp = p.data[14:54], p.data[54:]
        assert ip[0] >> 4 == 6 and ip[6] == 6 and struct.unpack("!H", ip[4:6])[0] == len(tcp)
        assert ip[8:24] == ip[24:40] == socket.inet_pton(socket.AF_INET6, "::1")
        pseudo = ip[8:40] + struct.pack("!IxxxB", len(tcp), 6)
        assert pcap.internet_checksum(pseudo, tcp) == 0, f"TCP checksum of packet {p.number}"
        from_server = struct.unpack("!H", tcp[0:2])[0] == 988         # the tap writes socklnd's port
        streams[from_server] += tcp[(tcp[12] >> 4) * 4:]
    sent, received = streams[False], streams[True]
    assert sent.startswith(wire.AcceptorRequest(server_nid).pack())
    assert b"request over IPv6" in sent and b"reply over IPv6" in received
