"""Hostile peers, as a table: the LNet engine (lnet_engine/node.py) facing a server that
misbehaves (`Node.connect` then `Connection.exchange`) and a listener facing clients that
misbehave (`Listener`, what `serve` stands on).  Each row is one behaviour and the outcome it
must come to: an `Outcome` of the call (client side) or a refusal or a failed connection the
listener records while it goes on serving (server side); never an exception, a traceback or
a hang.  Every wait is bounded (short timeouts, and each call runs in a thread joined with a
bound), and nothing here measures time.  docs/lnet-tcp.md's hostile-peer table is this one;
`test_the_docs_table_is_this_one` holds them together.

The fake server is test_lnet_engine's `Peer` (it reads the acceptor request and the hello with
the codec, then runs the row's script); the hostile clients are raw sockets here."""
from __future__ import annotations

import pathlib
import re
import socket
import struct
import threading
import time

import pytest

from ptlrpc_conformance.harness.transport.lnet_engine import node as engine
from ptlrpc_conformance.harness.transport.lnet_engine import wire
from ptlrpc_conformance.harness.transport.lnet_engine.node import Listener, Node
from ptlrpc_conformance.harness.transport.lnet_engine.wire import (C, AcceptorRequest, Hello, KsockHeader,
                                                                   LnetHeader, Nid)
from test_lnet_engine import (CLIENT, EARLY_SIZE, OSC_REPLY_PORTAL, OST_REQUEST_PORTAL, SERVER, WAIT, XID, Peer,
                              _recv, _wait_closed)

DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "lnet-tcp.md"
SHORT = 0.3             # the engine's waits in these rows (a reply, a handshake, a stalled message)
BOUND = 4 * WAIT        # no call may take longer than this (it would be a hang); none comes near
NOOP = KsockHeader(C["KSOCK_MSG_NOOP"], 0, (0, C["SOCKNAL_KEEPALIVE_PING"])).pack()
FLOOD = 5000            # NOOPs in a flood


def _bounded(fn, *args):
    """fn(*args) in a thread joined within BOUND: (its result, the exception it raised)."""
    box: dict = {}

    def run():
        try:
            box["result"] = fn(*args)
        except BaseException as exc:          # noqa: BLE001 (the test shows it)
            box["raised"] = exc

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(BOUND)
    assert not t.is_alive(), f"{fn.__name__} did not return within {BOUND:g} s (a hang)"
    return box.get("result"), box.get("raised")


# -- a server that misbehaves ---------------------------------------------------------

def _answer_then(then):
    """A script: answer the hello, read the request, then `then(peer, sock, request)`."""
    def script(peer, sock, hello):
        peer.answer(sock, hello)
        _, request, _ = peer.read(sock)
        then(peer, sock, request)
    return script


def _reset_mid_reply(peer, sock, request):
    raw = KsockHeader(C["KSOCK_MSG_LNET"]).pack() + peer.reply(request)[0].pack()
    sock.sendall(raw[:50])
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))    # the close is a RST


def _stall_mid_reply(peer, sock, request):
    sock.sendall(KsockHeader(C["KSOCK_MSG_LNET"]).pack() + peer.reply(request)[0].pack()[:10])
    _wait_closed(sock)


def _noop_flood(reply: bool):
    def then(peer, sock, request):
        try:
            sock.sendall(NOOP * FLOOD)
            if reply:
                peer.send(sock, *peer.reply(request))
        except OSError:
            pass
        _wait_closed(sock)
    return then


def _ping_first(peer, sock, request):
    peer.send(sock, LnetHeader(C["LNET_MSG_GET"], CLIENT, SERVER, 12345, 12345, 0, wmd=bytes(range(16)),
                               match_bits=C["LNET_PROTO_PING_MATCHBITS"], portal=0, sink_length=272))
    _, answer, _ = peer.read(sock)
    peer.received.put(answer)
    peer.send(sock, *peer.reply(request))
    _wait_closed(sock)


def _early_forever(peer, sock, request):
    try:
        for _ in range(200):
            peer.send(sock, *peer.reply(request, b"early", offset=0))
            time.sleep(0.02)
    except OSError:
        pass


def _other_xid_only(peer, sock, request):
    header, payload = peer.reply(request)
    peer.send(sock, LnetHeader(header.type, header.dest_nid, header.src_nid, 12345, 12345, len(payload),
                               match_bits=XID + 1, portal=OSC_REPLY_PORTAL, offset=EARLY_SIZE), payload)
    _wait_closed(sock)


def _v1_hello(peer, sock, hello):
    sock.sendall(C["LNET_PROTO_TCP_MAGIC"].to_bytes(4, "little") + bytes(28))
    _wait_closed(sock)


# behaviour -> (its script, the outcome's kind, a fragment of its detail)
SERVERS = {
    "resets in the middle of the reply": (_answer_then(_reset_mid_reply), "reset", ""),
    "stops in the middle of the reply": (_answer_then(_stall_mid_reply), "timeout", "stopped after"),
    "answers every hello with NONE": (
        lambda peer, sock, hello: peer.answer(sock, hello, ctype=C["SOCKLND_CONN_NONE"]), "refused", "NONE"),
    "claims another NID in its hello": (
        lambda peer, sock, hello: peer.answer(sock, hello, src=Nid.parse("127.0.0.9@tcp")), "refused",
        "claims to be 127.0.0.9@tcp"),
    "never answers the hello": (lambda peer, sock, hello: _wait_closed(sock), "timeout", "hello"),
    "sends garbage instead of its hello": (
        lambda peer, sock, hello: sock.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n"), "garbage", "socklnd hello: magic"),
    "sends a socklnd V1 hello": (_v1_hello, "garbage", "protocol V1"),
    "sends garbage after its hello": (
        _answer_then(lambda peer, sock, request: (sock.sendall(b"\xde\xad\xbe\xef" * 6), _wait_closed(sock))),
        "garbage", "ksock message type 0xefbeadde"),
    "sends a GET with a payload (lnet_parse refuses it)": (
        _answer_then(lambda peer, sock, request: (
            peer.send(sock, LnetHeader(C["LNET_MSG_GET"], CLIENT, SERVER, 12345, 12345, 8, portal=0), bytes(8)),
            _wait_closed(sock))),
        "garbage", "with a payload of 8 bytes"),
    "closes the connection after the hello": (
        _answer_then(lambda peer, sock, request: None), "closed", "closed the connection"),
    "floods NOOPs and never replies": (_answer_then(_noop_flood(False)), "timeout", "no final reply"),
    "floods NOOPs, then replies": (_answer_then(_noop_flood(True)), "reply", ""),
    "never replies": (_answer_then(lambda peer, sock, request: _wait_closed(sock)), "timeout", "no final reply"),
    "replies to another XID only": (_answer_then(_other_xid_only), "timeout", "no final reply"),
    "sends early replies and never the final one": (_answer_then(_early_forever), "timeout", "early repl"),
    "pings before the first reply": (_answer_then(_ping_first), "reply", ""),
}


def _connect_and_exchange(client: Node, port: int, timeout: float):
    out = client.connect("127.0.0.1", SERVER, port, privileged=False, retries=1)
    if not out.ok:
        return out
    return out.connection.exchange(OST_REQUEST_PORTAL, XID, b"request", reply_portal=OSC_REPLY_PORTAL,
                                   timeout=timeout, max_wait=2 * timeout)


def _engine_threads() -> set[threading.Thread]:
    return {t for t in threading.enumerate() if t.name.startswith("lnet")}


@pytest.mark.parametrize("behaviour", list(SERVERS))
def test_a_hostile_server_is_an_outcome(behaviour):
    script, kind, fragment = SERVERS[behaviour]
    before = _engine_threads()
    client = Node(CLIENT, handshake_timeout=SHORT, stall_timeout=SHORT, send_timeout=SHORT)
    with Peer(script) as peer:
        # a stalled message is met within SHORT, long before the exchange's own wait ends; a
        # row that ends in a reply waits as long as it must (the wait ends with the reply)
        timeout = WAIT if kind == "reply" or fragment == "stopped after" else 3 * SHORT
        result, raised = _bounded(_connect_and_exchange, client, peer.port, timeout)
        client.close()
    assert raised is None, f"{behaviour}: the engine raised {raised!r}"
    assert isinstance(result, engine.Outcome), result
    assert result.kind == kind and fragment in result.detail, f"{behaviour}: {result}"
    if behaviour == "pings before the first reply":
        assert peer.received.get(timeout=WAIT).type == C["LNET_MSG_REPLY"]       # the ping was answered
    for t in _engine_threads() - before:          # the client's threads end with it
        t.join(timeout=WAIT)
        assert not t.is_alive(), t.name


# -- clients that misbehave -----------------------------------------------------------

def _echo(conn, msg):
    conn.put(OSC_REPLY_PORTAL, msg.match_bits, b"answer to " + msg.payload, offset=EARLY_SIZE)


def _dial(address) -> socket.socket:
    sock = socket.create_connection(address, timeout=WAIT)
    sock.settimeout(WAIT)
    return sock


def _greet(sock, *, nid: Nid = SERVER, ctype: int = C["SOCKLND_CONN_CONTROL"], src: Nid = CLIENT) -> None:
    sock.sendall(AcceptorRequest(nid).pack() + Hello(3, src, SERVER, 12345, 12345, 7, 0, ctype).pack())


def _greeted(sock) -> Hello:
    return wire.unpack_hello(_recv(sock, wire.layout("ksock_hello_msg_nid4").size))


def _request(xid: int = XID, length: int = 7) -> bytes:
    return KsockHeader(C["KSOCK_MSG_LNET"]).pack() + LnetHeader(
        C["LNET_MSG_PUT"], SERVER, CLIENT, 12345, 12345, length, match_bits=xid, portal=OST_REQUEST_PORTAL).pack()


def _silent(address, listener):
    return [_dial(address)]


def _garbage_first(address, listener):
    sock = _dial(address)
    sock.sendall(b"GET / HTTP/1.1\r\n\r\n")
    return [sock]


def _other_nid(address, listener):
    sock = _dial(address)
    _greet(sock, nid=Nid.parse("127.0.0.9@tcp"))
    return [sock]


def _hello_none(address, listener):
    sock = _dial(address)
    _greet(sock, ctype=C["SOCKLND_CONN_NONE"])
    return [sock]


def _hello_any(address, listener):
    sock = _dial(address)
    sock.sendall(AcceptorRequest(SERVER).pack() + Hello(3, CLIENT, SERVER, 12345, 12345, 7, 0, 1).pack()[:8]
                 + b"\xff" * 8 + Hello(3, CLIENT, SERVER, 12345, 12345, 7, 0, 1).pack()[16:])
    return [sock]


def _greeted_then(send: bytes, rst: bool = False):
    def client(address, listener):
        sock = _dial(address)
        _greet(sock)
        _greeted(sock)
        sock.sendall(send)
        if rst:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.close()
        return [sock]
    return client


def _noop_flood_then_ask(address, listener):
    sock = _dial(address)
    _greet(sock)
    _greeted(sock)
    sock.sendall(NOOP * FLOOD + _request() + b"request")
    return [sock]


def _ping_then_ask(address, listener):
    sock = _dial(address)
    _greet(sock)
    _greeted(sock)
    sock.sendall(KsockHeader(C["KSOCK_MSG_LNET"]).pack() + LnetHeader(
        C["LNET_MSG_GET"], SERVER, CLIENT, 12345, 12345, 0, wmd=bytes(range(16)),
        match_bits=C["LNET_PROTO_PING_MATCHBITS"], portal=0, sink_length=272).pack())
    sock.sendall(_request() + b"request")
    return [sock]


def _too_many_silent(address, listener):
    return [_dial(address) for _ in range(engine.MAX_HANDSHAKES + 1)]


# behaviour -> (the client, what the listener records: ("refusal", fragment) for a refused
# connection, ("failure", kind) for a connection that failed, ("answered", counter) for a
# request answered (with the connection's counter that shows the hostile part was met))
CLIENTS = {
    "connects and sends nothing": (_silent, ("refusal", "acceptor request: 0 of 8 bytes")),
    "sends garbage instead of the acceptor request": (_garbage_first, ("refusal", "acceptor request: magic")),
    "asks the acceptor for another NID": (_other_nid, ("refusal", "acceptor request for 127.0.0.9@tcp")),
    "sends a hello of type NONE": (_hello_none, ("refusal", "hello of type -1")),
    "sends a hello from LNET_NID_ANY": (_hello_any, ("refusal", "hello from LNET_NID_ANY")),
    "resets in the middle of a request": (_greeted_then(_request()[:40], rst=True), ("failure", "reset")),
    "stops in the middle of a request": (_greeted_then(_request()[:40]), ("failure", "timeout")),
    "sends garbage after the hello": (_greeted_then(b"\xde\xad\xbe\xef" * 6), ("failure", "garbage")),
    "floods NOOPs, then asks": (_noop_flood_then_ask, ("answered", "noop")),
    "pings before its first request": (_ping_then_ask, ("answered", "ping")),
    "opens more connections at once than the listener reads, and says nothing": (
        _too_many_silent, ("refusal", "handshakes under way already")),
}


def _wait_for(check, what: str):
    """Poll `check()` until it is true, within BOUND (a listener that never records is a hang)."""
    give_up = time.monotonic() + BOUND
    while time.monotonic() < give_up:
        got = check()
        if got:
            return got
        time.sleep(0.02)
    pytest.fail(f"the listener never recorded {what} within {BOUND:g} s")


@pytest.mark.parametrize("behaviour", list(CLIENTS))
def test_a_hostile_client_is_refused_or_failed_and_the_listener_goes_on(behaviour):
    hostile, (kind, expected) = CLIENTS[behaviour]
    # the handshake's wait is long enough for MAX_HANDSHAKES + 1 silent connections to be open at once
    server = Node(SERVER, handshake_timeout=2.0, stall_timeout=SHORT, send_timeout=SHORT)
    with Listener(server, "127.0.0.1", 0, accept_all=True, handler=_echo) as listener:
        socks, raised = _bounded(hostile, listener.address, listener)
        assert raised is None, f"{behaviour}: the hostile client itself failed: {raised!r}"
        try:
            if kind == "refusal":
                found = _wait_for(lambda: [r for r in list(listener.refusals) if expected in r], expected)
                assert found
            elif kind == "failure":
                failed = _wait_for(lambda: [c.failure for c in list(listener.connections) if c.failure], "a failure")
                assert failed[0].kind == expected, failed[0]
            else:
                sock = socks[0]
                while True:                   # the ping's REPLY may come first; the answer is a PUT
                    assert wire.unpack_ksock(_recv(sock, 24)).type == C["KSOCK_MSG_LNET"]
                    h = wire.unpack_lnet_header(_recv(sock, 72))
                    payload = _recv(sock, h.payload_length)
                    if h.type == C["LNET_MSG_PUT"]:
                        break
                assert (h.match_bits, h.portal, payload) == (XID, OSC_REPLY_PORTAL, b"answer to request")
                conn = listener.connections[0]
                assert conn.counts[expected] > 0 and conn.alive
        finally:
            for s in socks:
                s.close()
        # whatever the hostile client did, a well-behaved one is served next
        good = Node(CLIENT, handshake_timeout=WAIT)
        try:
            out, raised = _bounded(_connect_and_exchange_patiently, good, listener.address[1])
        finally:
            good.close()
        assert raised is None and out.kind == "reply", out


def _connect_and_exchange_patiently(client: Node, port: int):
    """A well-behaved client, which waits out the hostile one's silent connections."""
    give_up = time.monotonic() + BOUND / 2
    while True:
        out = client.connect("127.0.0.1", SERVER, port, privileged=False)
        if out.ok or time.monotonic() > give_up:
            break
        time.sleep(SHORT)
    if not out.ok:
        return out
    return out.connection.exchange(OST_REQUEST_PORTAL, XID, b"request", reply_portal=OSC_REPLY_PORTAL, timeout=WAIT)


# -- the table in the docs ------------------------------------------------------------

def _doc_rows(heading: str) -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split(heading, 1)[1].split("\n\n", 2)[1]
    rows = {}
    for line in section.splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        rows[cells[0]] = cells[1]
    return rows


def test_the_docs_table_is_this_one():
    """docs/lnet-tcp.md lists each behaviour of the two tables with the outcome it comes to."""
    servers = _doc_rows("A server that misbehaves (`Node.connect`, `Connection.exchange`):")
    assert list(servers) == list(SERVERS)
    for behaviour, (_, kind, _) in SERVERS.items():
        assert re.match(rf"`{kind}`", servers[behaviour]), (behaviour, servers[behaviour])
    clients = _doc_rows("A client that misbehaves (`Listener`, what `serve` stands on):")
    assert list(clients) == list(CLIENTS)
    for behaviour, (_, (kind, expected)) in CLIENTS.items():
        assert kind in clients[behaviour] or (kind == "answered" and "answered" in clients[behaviour]), behaviour
