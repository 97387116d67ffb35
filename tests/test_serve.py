"""`ptlrpc-conformance serve` on loopback: the command runs in a process of its own, serving the
reference; an LNet engine connects to it as a client from an unprivileged port (`--accept-all`)
and sends requests the suite's own packer builds (harness/ost/client.py, wire.py).  Each reply
must come on the reply portal with the request's match bits at the offset the request asked
for, and hold what the in-process reference answers to the same requests from the same client.
The control socket restarts the server (connections drop, a new incarnation) and stops it."""
from __future__ import annotations

import json
import os
import select
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.ost.client import C, Client
from ptlrpc_conformance.harness.transport.adapter import InProcessAdapter
from ptlrpc_conformance.harness.transport.lnet_engine.node import Node
from ptlrpc_conformance.harness.transport.lnet_engine.wire import Nid
from ptlrpc_conformance.harness.transport.lnet_serve import (ControlClient, Server, control_call,
                                                             granted_rep_mbits, reply_offset)
from ptlrpc_conformance.harness.transport.loader import load_adapter

SERVER = Nid.parse("127.0.0.1@tcp")
CLIENT = Nid.parse("127.0.0.2@tcp")
OST_REQUEST_PORTAL, OST_CREATE_PORTAL, OSC_REPLY_PORTAL = 28, 7, 4    # lustre_idl.h
EARLY_SIZE = 224        # lustre_msg_early_size (test_lnet_engine.py derives it from the layouts)
WAIT = 10.0             # the longest any single wait here may take (none should come near)


class Served:
    """A `serve --iut reference` process on 127.0.0.1, port chosen by the system."""

    def __init__(self, tmp_path, control: list[str] | None = None, iut: str = "reference", cwd=None):
        self.control = str(tmp_path / "control.sock")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ptlrpc_conformance.cli", "serve", "--listen", "127.0.0.1:0", "--iut",
             iut, "--accept-all"] + (control or ["--control", self.control]),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd)
        ready, _, _ = select.select([self.proc.stdout], [], [], 30)
        line = self.proc.stdout.readline() if ready else ""
        if not line.startswith("serving "):
            self.proc.kill()
            raise AssertionError(f"serve did not start: {line!r} {self.proc.stderr.read()}")
        self.port = int(line.split(" on ")[1].split(",")[0].rsplit(":", 1)[1])
        if control:
            self.control = line.rstrip().rsplit("control ", 1)[1]

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError("serve did not end")


@pytest.fixture
def served(tmp_path):
    s = Served(tmp_path)
    yield s
    if s.proc.poll() is None:
        s.proc.kill()
        s.proc.wait()


@pytest.fixture
def node():
    n = Node(CLIENT, stall_timeout=2.0, send_timeout=2.0)
    yield n
    n.close()


def _connect(node, served):
    out = node.connect("127.0.0.1", SERVER, served.port, privileged=False)
    assert out.kind == "connected", out
    return out.connection


def _exchange(conn, xid, data, portal=OST_REQUEST_PORTAL):
    out = conn.exchange(portal, xid, data, reply_portal=OSC_REPLY_PORTAL, at=bool(reply_offset(data)), timeout=WAIT)
    assert out.kind == "reply", out
    return out.reply


class InProcess:
    """The same requests to the reference in-process, from the client `serve` says sent them."""

    def __init__(self):
        self.adapter = load_adapter("reference")
        self.adapter.start()

    def exchange(self, client, xid, data):
        out = self.adapter.call({"op": "exchange", "data": data.hex(), "xid": xid, "client": client})
        assert out.ok, out
        return bytes.fromhex(out.result["data"]) if out.result["data"] is not None else None

    def restart(self):
        assert self.adapter.call({"op": "restart"}).ok


def _served_client(served) -> str:
    """The identity serve gives the one connected client (its status lists them)."""
    return _one_client(lambda: control_call(served.control, "status"))


def _one_client(status) -> str:
    """The one client `status()` lists.  The listener registers a connection just after its
    answer hello, which the client may see first: asked again until it is there (bounded)."""
    for _ in range(int(WAIT / 0.05)):
        answer = status()
        assert answer["ok"], answer
        if answer["result"]["clients"]:
            break
        time.sleep(0.05)
    (who,) = answer["result"]["clients"]
    return who


def test_connect_statfs_disconnect_as_the_reference_answers(served, node):
    """OST_CONNECT and OST_DISCONNECT to portal 28, OST_STATFS to portal 7 (as osc_statfs sends
    it): each reply on portal 4 with the request's XID as match bits, at offset 224 (the requests
    ask for adaptive timeouts), equal to the in-process reference's reply to the same requests
    from the same client."""
    conn = _connect(node, served)
    local_port = conn._sock.getsockname()[1]
    who = _served_client(served)
    # an unprivileged peer is known by its address and pid port | LNET_PID_USERFLAG: "U<port>-NID"
    assert who == f"U{local_port}-{CLIENT}"
    c, ref = Client("lnet", 0x1000), InProcess()
    sent = []
    xid, data = c.connect()
    sent.append((xid, data, _exchange(conn, xid, data)))
    c.cookie = wire.parse(sent[0][2].payload, "reply").body["pb_handle"]
    for opc, portal in (("OST_STATFS", OST_CREATE_PORTAL), ("OST_DISCONNECT", OST_REQUEST_PORTAL)):
        xid, data = c.request(opc)
        sent.append((xid, data, _exchange(conn, xid, data, portal)))
    for xid, data, rep in sent:
        assert (rep.portal, rep.match_bits, rep.offset) == (OSC_REPLY_PORTAL, xid, EARLY_SIZE)
        assert rep.payload == ref.exchange(who, xid, data)
    assert [wire.parse(r.payload, "reply").status for _, _, r in sent] == [0, 0, 0]
    assert control_call(served.control, "status")["result"]["counts"]["requests"] == 3


def test_a_request_without_adaptive_timeouts_is_answered_at_offset_0(served, node):
    conn = _connect(node, served)
    xid, data = Client("noat", 0x1000).request("OST_CONNECT", Client("noat", 0x1000).connect_buffers(),
                                       op_flags=C("MSG_CONNECT_INITIAL"), conn_cnt=1, lm_flags=0)
    rep = _exchange(conn, xid, data)
    assert (rep.portal, rep.match_bits, rep.offset) == (OSC_REPLY_PORTAL, xid, 0)
    assert rep.payload == InProcess().exchange(_served_client(served), xid, data)


def test_a_put_to_a_portal_no_ost_service_has_gets_no_reply(served, node):
    """Portal 12 is the MDS's: no buffer there, nothing answers (and the connection stays)."""
    conn = _connect(node, served)
    xid, data = Client("mds", 0x1000).connect()
    out = conn.exchange(12, xid, data, reply_portal=OSC_REPLY_PORTAL, timeout=0.5, max_wait=0.5)
    assert out.kind == "timeout", out
    assert _exchange(conn, xid, data).offset == EARLY_SIZE      # handled after the first PUT
    assert control_call(served.control, "status")["result"]["counts"]["not_ost_portal"] == 1


def test_restart_drops_connections_and_a_new_incarnation_serves_the_client_again(served, node):
    conn = _connect(node, served)
    first_incarnation = conn.peer_incarnation
    c, ref = Client("r", 0x1000), InProcess()
    who = _served_client(served)
    xid, data = c.connect()
    rep = _exchange(conn, xid, data)
    assert rep.payload == ref.exchange(who, xid, data)
    c.cookie = wire.parse(rep.payload, "reply").body["pb_handle"]
    answer = control_call(served.control, "restart")
    assert answer["ok"], answer
    assert answer["result"]["incarnation"] != first_incarnation
    ref.restart()
    for _ in range(int(WAIT / 0.05)):        # the connection is closed by the server (bounded)
        if not conn.alive:
            break
        time.sleep(0.05)
    assert conn.failure is not None and conn.failure.kind in ("closed", "reset"), conn.failure
    again = _connect(node, served)
    assert again is not conn and again.peer_incarnation == answer["result"]["incarnation"]
    who = _served_client(served)
    xid, data = c.connect()              # the reconnect of a known client, to a recovering target
    rep = _exchange(again, xid, data)
    assert rep.offset == EARLY_SIZE and rep.payload == ref.exchange(who, xid, data)


def test_stop_on_the_control_socket_ends_the_process(served):
    assert control_call(served.control, "stop") == {"ok": True, "result": {}}
    assert served.wait() == 0
    assert not os.path.exists(served.control)


def test_the_control_socket_on_a_loopback_port(tmp_path):
    served = Served(tmp_path, ["--control-port", "0"])
    try:
        assert served.control.startswith("127.0.0.1:")
        status = control_call(served.control, "status")
        assert status["ok"] and status["result"]["clients"] == []
        assert control_call(served.control, "stop")["ok"]
        assert served.wait() == 0
    finally:
        if served.proc.poll() is None:
            served.proc.kill()
            served.proc.wait()


def test_a_kept_control_connection_serves_many_calls(served):
    client = ControlClient(served.control, timeout=WAIT)
    try:
        for _ in range(5):
            assert client.call("status")["ok"]
        assert client.call("reboot")["ok"] is False
        assert client.dials == 1
    finally:
        client.close()


def test_a_control_connection_the_other_end_closed_is_dialled_again(tmp_path):
    """A control socket that answers one line and hangs up (serve drops a control client idle
    for CONTROL_TIMEOUT so): the next call dials again and gets its answer."""
    path = str(tmp_path / "control")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(4)
    listener.settimeout(WAIT)
    ops = []

    def answer_once_each():
        for _ in range(2):
            sock, _ = listener.accept()
            with sock:
                line = sock.makefile("rb").readline()
                ops.append(json.loads(line)["op"])
                sock.sendall(b'{"ok": true, "result": {}}\n')
    t = threading.Thread(target=answer_once_each, daemon=True)
    t.start()
    client = ControlClient(path, timeout=WAIT)
    try:
        assert client.call("status") == {"ok": True, "result": {}}
        assert client.call("reset") == {"ok": True, "result": {}}
        assert ops == ["status", "reset"] and client.dials == 2
    finally:
        client.close()
        t.join(WAIT)
        listener.close()


def test_sigterm_ends_the_process_cleanly(served):
    served.proc.send_signal(signal.SIGTERM)
    assert served.wait() == 0
    assert "stopped" in served.proc.stderr.read()


def test_an_unknown_control_operation_is_refused_by_name(served):
    answer = control_call(served.control, "reboot")
    assert answer["ok"] is False and "'reboot'" in answer["error"]


def test_a_bad_listen_address_is_a_usage_error():
    done = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "serve", "--listen", "localhost:988"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and "'localhost' is not an IP address" in done.stderr


def test_an_iut_that_is_not_a_target_is_refused():
    """The echo testee decodes only (capability decode): serve says so and exits 3."""
    done = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "serve", "--listen", "127.0.0.1:0",
                           "--iut", f"exec:{sys.executable} -m ptlrpc_conformance.harness.transport.echo_testee"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 3 and "does not declare capability 'target'" in done.stderr


class Deferring:
    """A target testee that holds the first request of the client it was told about and sends
    its reply while handling the next request of any other client (as a recovering target
    answers a held replay): serve must deliver each reply to the peer whose request it answers,
    at that request's offset."""

    def __init__(self):
        self.held = None

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        if op == "hello":
            return {"ok": True, "result": {"name": "deferring", "version": "1", "capabilities": ["target"],
                                           "protocol": 1}}
        if op == "exchange":
            data = "ee" * 8 + request["data"][:16]
            if self.held is None:
                self.held = {"client": request["client"], "xid": request["xid"], "data": data}
                return {"ok": True, "result": {"data": None}}
            held, self.held = self.held, None
            return {"ok": True, "result": {"data": data, "replies": [held]}}
        return {"ok": False, "error": "EOPNOTSUPP"}


def test_a_deferred_reply_goes_to_the_peer_whose_request_it_answers():
    adapter = InProcessAdapter(Deferring(), description="deferring")
    adapter.start()
    server = Server(adapter, SERVER, "127.0.0.1", 0, accept_all=True).start()
    first, second = Node(CLIENT), Node(Nid.parse("127.0.0.3@tcp"))
    try:
        a = first.connect("127.0.0.1", SERVER, server.address[1], privileged=False).connection
        b = second.connect("127.0.0.1", SERVER, server.address[1], privileged=False).connection
        _, held = Client("a", 0x1000).request("OST_CONNECT", lm_flags=0)       # answered at offset 0
        _, now = Client("b", 0x2000).request("OST_CONNECT")                     # answered at 224
        results = {}
        waiting = threading.Thread(
            target=lambda: results.update(a=a.exchange(OST_REQUEST_PORTAL, 0x111, held,
                                                       reply_portal=OSC_REPLY_PORTAL, at=False, timeout=WAIT)))
        waiting.start()
        for _ in range(int(WAIT / 0.05)):            # the held request has reached the testee
            if server.counts["requests"] == 1:
                break
            time.sleep(0.05)
        got = _exchange(b, 0x222, now)
        waiting.join(WAIT)
        assert (got.match_bits, got.offset, got.payload) == (0x222, EARLY_SIZE, b"\xee" * 8 + now[:8])
        deferred = results["a"]
        assert deferred.kind == "reply", deferred
        assert (deferred.reply.match_bits, deferred.reply.offset, deferred.reply.payload) == \
            (0x111, 0, b"\xee" * 8 + held[:8])
        assert server.counts["deferred_delivered"] == 1
    finally:
        first.close()
        second.close()
        server.close()


class GrantsRepMbits:
    """A target testee that grants OBD_CONNECT_FLAGS2 + OBD_CONNECT2_REP_MBITS to every connect
    (the reference grants only what spec/target.yaml lists, without REP_MBITS) and answers any
    other request with an empty REPLY."""

    def handle(self, request: dict) -> dict:
        if request.get("op") == "hello":
            return {"ok": True, "result": {"name": "rep-mbits", "version": "1", "capabilities": ["target"],
                                           "protocol": 1}}
        req = wire.parse(bytes.fromhex(request["data"]), "request")
        body = wire.pack_body({"pb_type": wire.REPLY, "pb_opc": req.body["pb_opc"], "pb_handle": 7,
                               "pb_version": req.body["pb_version"]})
        buffers = [body]
        if req.body["pb_opc"] == C("OST_CONNECT"):
            buffers.append(wire.pack_struct("obd_connect_data", {
                "ocd_connect_flags": C("OBD_CONNECT_FLAGS2") | C("OBD_CONNECT_FULL20"),
                "ocd_connect_flags2": C("OBD_CONNECT2_REP_MBITS")}))
        return {"ok": True, "result": {"data": wire.pack_message(buffers).hex()}}


def test_a_client_granted_rep_mbits_is_answered_on_its_pb_mbits(node):
    """With OBD_CONNECT2_REP_MBITS granted, the reply to a request other than a connect goes to
    the request's pb_mbits (service.c: ptlrpc_server_handle_req_in; niobuf.c:
    ptlrpc_send_reply); the connect's own reply keeps the XID."""
    adapter = InProcessAdapter(GrantsRepMbits(), description="rep-mbits")
    adapter.start()
    server = Server(adapter, SERVER, "127.0.0.1", 0, accept_all=True).start()
    try:
        conn = node.connect("127.0.0.1", SERVER, server.address[1], privileged=False).connection
        c = Client("mbits", 0x1000)
        xid, data = c.connect()
        assert _exchange(conn, xid, data).match_bits == xid
        c.cookie = 7
        xid, data = c.request("OST_STATFS")
        mbits = xid | (1 << 40)
        # pb_mbits set as a client sets it (niobuf.c: ptl_send_rpc); the body is the one buffer
        body_at = -(-(spec.layout("lustre_msg_v2").field("lm_buflens").offset + 4) // 8) * 8
        field = spec.layout("ptlrpc_body_v3").field("pb_mbits")
        data = data[:body_at + field.offset] + mbits.to_bytes(8, "little") + data[body_at + field.end:]
        assert wire.parse(data, "request").body["pb_mbits"] == mbits
        assert conn.put(OST_CREATE_PORTAL, xid, data).kind == "sent"
        for _ in range(int(WAIT / 0.05)):            # nobody waits on either match bits: it is kept
            if conn.unmatched:
                break
            time.sleep(0.05)
        (reply,) = conn.unmatched
        assert (reply.portal, reply.match_bits, reply.offset) == (OSC_REPLY_PORTAL, mbits, EARLY_SIZE)
    finally:
        server.close()


def test_the_reference_does_not_grant_rep_mbits_so_its_replies_keep_the_xid():
    """The reference grants what spec/target.yaml lists (no REP_MBITS): serve's reading of its
    connect reply says so."""
    c = Client("plain", 0x1000)
    xid, data = c.request("OST_CONNECT", c.connect_buffers(flags=C("OBD_CONNECT_FLAGS2"),
                                                           flags2=C("OBD_CONNECT2_REP_MBITS")),
                          op_flags=C("MSG_CONNECT_INITIAL"), conn_cnt=1)
    assert granted_rep_mbits(InProcess().exchange("12345-127.0.0.2@tcp", xid, data)) is False
    assert granted_rep_mbits(wire.pack_message([wire.pack_body({"pb_type": wire.ERR})])) is None


def test_restart_of_an_iut_without_capability_restart_is_refused_and_drops_nothing(node):
    adapter = InProcessAdapter(GrantsRepMbits(), description="rep-mbits")     # capability target only
    adapter.start()
    server = Server(adapter, SERVER, "127.0.0.1", 0, accept_all=True).start()
    try:
        conn = node.connect("127.0.0.1", SERVER, server.address[1], privileged=False).connection
        before = server.node.incarnation
        answer = server.control("restart")
        assert answer["ok"] is False and "capability 'restart'" in answer["error"]
        assert conn.alive and server.node.incarnation == before
        xid, data = Client("still", 0x1000).connect()
        assert _exchange(conn, xid, data).match_bits == xid
    finally:
        server.close()


def test_serve_python_iut_the_independent_ost(tmp_path, node):
    """A python: IUT (the independent OST of tests/, imported from the current directory)
    served as the reference is: its connect reply comes back as it answers in-process."""
    import independent_ost
    here = pathlib.Path(__file__).resolve().parent
    served = Served(tmp_path, iut="python:independent_ost:testee", cwd=here)
    try:
        conn = _connect(node, served)
        c = Client("indep", 0x1000)
        xid, data = c.connect()
        rep = _exchange(conn, xid, data)
        local = InProcessAdapter(independent_ost.testee(), description="independent")
        local.start()
        out = local.call({"op": "exchange", "data": data.hex(), "xid": xid, "client": _served_client(served)})
        assert (rep.offset, rep.payload.hex()) == (EARLY_SIZE, out.result["data"])
    finally:
        served.proc.kill()
        served.proc.wait()


def test_a_peer_sending_garbage_is_dropped_and_serve_goes_on(served, node):
    """Bytes that are not socklnd after the handshake end that peer's connection only; the next
    client is served."""
    with socket.create_connection(("127.0.0.1", served.port), timeout=WAIT) as raw:
        raw.sendall(b"\xff" * 64)
        raw.settimeout(WAIT)
        try:
            assert raw.recv(1 << 12) == b""             # closed without an answer
        except ConnectionResetError:
            pass
    conn = _connect(node, served)
    xid, data = Client("after", 0x1000).connect()
    assert _exchange(conn, xid, data).match_bits == xid


def _can_bind_privileged() -> bool:
    from test_lnet_engine import _can_bind_privileged as can
    return can()


@pytest.mark.skipif(not _can_bind_privileged(), reason="binding a port below 1024 needs root or CAP_NET_BIND_SERVICE")
def test_a_privileged_peer_is_known_by_its_hello_without_accept_all(node):
    """Without --accept-all (accept=secure) a peer from a port below 1024 is accepted and known
    by its hello's NID and pid: client "12345-127.0.0.2@tcp", as a kernel client would be."""
    adapter = load_adapter("reference")
    adapter.start()
    server = Server(adapter, SERVER, "127.0.0.1", 0).start()
    try:
        out = node.connect("127.0.0.1", SERVER, server.address[1])
        assert out.kind == "connected", out
        assert _one_client(lambda: server.control("status")) == f"12345-{CLIENT}"
        xid, data = Client("kernel-like", 0x1000).connect()
        rep = _exchange(out.connection, xid, data)
        assert rep.payload == InProcess().exchange(f"12345-{CLIENT}", xid, data)
    finally:
        server.close()


@pytest.mark.skipif(not _can_bind_privileged(), reason="binding a port below 1024 needs root or CAP_NET_BIND_SERVICE")
def test_a_deferred_reply_reaches_a_peer_that_reconnected():
    """A kernel-like peer (its identity from its hello) whose request is held, then whose
    connection drops and comes back: the reply goes out on the new connection."""
    adapter = InProcessAdapter(Deferring(), description="deferring")
    adapter.start()
    server = Server(adapter, SERVER, "127.0.0.1", 0, accept_all=True).start()
    first, second = Node(CLIENT), Node(Nid.parse("127.0.0.3@tcp"))
    try:
        old = first.connect("127.0.0.1", SERVER, server.address[1]).connection
        _, held = Client("a", 0x1000).request("OST_CONNECT")
        assert old.put(OST_REQUEST_PORTAL, 0x111, held).kind == "sent"
        for _ in range(int(WAIT / 0.05)):            # the held request has reached the testee
            if server.counts["requests"] == 1:
                break
            time.sleep(0.05)
        old.close()
        new = first.connect("127.0.0.1", SERVER, server.address[1]).connection
        assert new is not old and new.alive
        b = second.connect("127.0.0.1", SERVER, server.address[1], privileged=False).connection
        _, now = Client("b", 0x2000).request("OST_CONNECT")
        _exchange(b, 0x222, now)
        for _ in range(int(WAIT / 0.05)):            # nobody waits on 0x111 any more: it is kept
            if new.unmatched:
                break
            time.sleep(0.05)
        (reply,) = new.unmatched
        assert (reply.match_bits, reply.offset, reply.payload) == (0x111, EARLY_SIZE, b"\xee" * 8 + held[:8])
    finally:
        first.close()
        second.close()
        server.close()


def test_the_reply_offset_reads_lm_flags_in_the_sender_s_byte_order():
    """lm_flags is read in the order lm_magic tells (a big-endian sender's too); bytes that are
    no lustre_msg_v2 header get offset 0."""
    magic, at = C("LUSTRE_MSG_MAGIC_V2"), C("MSGHDR_AT_SUPPORT")
    # lm_bufcount, lm_secflvr, lm_magic, lm_repsize, lm_cksum, lm_flags, lm_opc, padding, one buflen
    for order in ("little", "big"):
        words = (1, 0, magic, 0, 0, at, 0, 0, 0, 0)
        header = b"".join(w.to_bytes(4, order) for w in words)
        assert reply_offset(header) == EARLY_SIZE, order
        no_at = b"".join(w.to_bytes(4, order) for w in (1, 0, magic, 0, 0, 0, 0, 0, 0, 0))
        assert reply_offset(no_at) == 0, order
    assert reply_offset(header[:12]) == 0 and reply_offset(bytes(40)) == 0
