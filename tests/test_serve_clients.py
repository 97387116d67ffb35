"""`serve` for client developers, on loopback, with the LNet engine's Node as the client:

- the client identity comes from each request's LNet header (src_nid, src_pid), and the reply
  goes back on the connection the request came on, addressed to that process;
- the minimal MGS (lnet_mgs.py, spec/mgs.yaml): MGS_CONNECT, OBD_PING and the config llog reads
  on portal 26, answered on portal 25; the client log names the one OST;
- fault injection on the target's replies: drop, delay, early replies, a reset mid-reply, a NOOP
  storm, each shown by what the client sees; drawn with a seed.

The server runs in-process (Server) except where the command line or the control socket is
what is tested."""
from __future__ import annotations

import json
import struct
import subprocess
import sys
import time

import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.ost.client import Client, ost_body
from ptlrpc_conformance.harness.transport.adapter import InProcessAdapter
from ptlrpc_conformance.harness.transport.lnet_engine.node import Node
from ptlrpc_conformance.harness.transport.lnet_engine.wire import Nid
from ptlrpc_conformance.harness.transport.lnet_serve import Fault, Server, control_call
from ptlrpc_conformance.harness.transport.loader import load_adapter

from test_serve import Served, _can_bind_privileged, node  # noqa: F401 (node: the client fixture)

SERVER = Nid.parse("127.0.0.1@tcp")
CLIENT = Nid.parse("127.0.0.2@tcp")
OST_REQUEST_PORTAL, OSC_REPLY_PORTAL = 28, 4                    # lustre_idl.h
MGS_REQUEST_PORTAL, MGC_REPLY_PORTAL = 26, 25                   # lustre_idl.h
EARLY_SIZE = 224        # lustre_msg_early_size
USERFLAG = 0x80000000   # LNET_PID_USERFLAG (lnet-types.h)
WAIT = 10.0
C = spec.constant


@pytest.fixture
def server():
    adapter = load_adapter("reference")
    adapter.start()
    s = Server(adapter, SERVER, "127.0.0.1", 0, accept_all=True, mgs="lustre-OST0000_UUID").start()
    yield s
    s.close()
    adapter.close()


def _connect(node, server):
    out = node.connect("127.0.0.1", SERVER, server.address[1], privileged=False)
    assert out.kind == "connected", out
    return out.connection


def _ost(conn, xid, data, **kw):
    kw.setdefault("timeout", WAIT)
    return conn.exchange(OST_REQUEST_PORTAL, xid, data, reply_portal=OSC_REPLY_PORTAL, **kw)


# -- identity ---------------------------------------------------------------------------------


class Recording:
    """A target testee that records the client each exchange names and answers an empty REPLY."""

    def __init__(self):
        self.clients = []

    def handle(self, request: dict) -> dict:
        if request.get("op") == "hello":
            return {"ok": True, "result": {"name": "recording", "version": "1", "capabilities": ["target"],
                                           "protocol": 1}}
        self.clients.append(request["client"])
        req = wire.parse(bytes.fromhex(request["data"]), "request")
        body = wire.pack_body({"pb_type": wire.REPLY, "pb_opc": req.body["pb_opc"],
                               "pb_version": req.body["pb_version"]})
        return {"ok": True, "result": {"data": wire.pack_message([body]).hex()}}


@pytest.mark.skipif(not _can_bind_privileged(), reason="binding a port below 1024 needs root or CAP_NET_BIND_SERVICE")
def test_each_request_s_client_is_the_process_its_lnet_header_names():
    """One connection from a privileged port (its headers are taken as they come), two
    processes on it (src_pid U1 and U2, as the lnet-tcp IUT gives each suite client its own):
    the IUT hears of two clients, and each reply is addressed to the pid that asked, on the
    connection the request came on."""
    testee = Recording()
    adapter = InProcessAdapter(testee, description="recording")
    adapter.start()
    server = Server(adapter, SERVER, "127.0.0.1", 0).start()
    peer = Node(CLIENT)
    try:
        conn = peer.connect("127.0.0.1", SERVER, server.address[1]).connection
        seen = []
        for n, pid in ((1, USERFLAG | 1), (2, USERFLAG | 2)):
            peer.pid = pid
            xid, data = Client(f"c{n}", 0x1000 * n).request("OBD_PING")
            out = _ost(conn, xid, data)
            assert out.kind == "reply", out
            seen.append((out.reply.header.dest_pid, out.reply.header.dest_nid))
        assert testee.clients == [f"U1-{CLIENT}", f"U2-{CLIENT}"]
        assert seen == [(USERFLAG | 1, CLIENT), (USERFLAG | 2, CLIENT)]
    finally:
        peer.close()
        server.close()


# -- the MGS ----------------------------------------------------------------------------------


def _mgs_request(opc: str, buffers=(), lm_flags=C("MSGHDR_AT_SUPPORT")) -> bytes:
    body = wire.pack_body({"pb_type": wire.REQUEST, "pb_opc": C(opc), "pb_conn_cnt": 1,
                           "pb_version": C("PTLRPC_MSG_VERSION") | C(
                               "LUSTRE_OBD_VERSION" if opc in ("MGS_CONNECT", "MGS_DISCONNECT", "OBD_PING")
                               else "LUSTRE_LOG_VERSION" if opc.startswith("LLOG") else "LUSTRE_MGS_VERSION")})
    return wire.pack_message([body, *buffers], lm_flags=lm_flags)


def _mgs(conn, xid, data, **kw):
    out = conn.exchange(MGS_REQUEST_PORTAL, xid, data, reply_portal=MGC_REPLY_PORTAL, timeout=WAIT, **kw)
    assert out.kind == "reply", out
    assert (out.reply.portal, out.reply.match_bits, out.reply.offset) == (MGC_REPLY_PORTAL, xid, EARLY_SIZE)
    rep = wire.parse(out.reply.payload, "reply")
    formats = {C(n): bufs for n, bufs in spec.mgs()["replies"].items() if n != "cite"}
    if rep.type_name == "REPLY":        # the buffers of the opcode's reply format (layout.c)
        assert [len(b) for b in rep.buffers[1:]] == [
            8192 if b == "eadata" else wire.S.size(b) for b in formats[rep.body["pb_opc"]]]
    return rep


def _llogd(**fields) -> bytes:
    return wire.pack_struct("llogd_body", fields)


def _uuid(text: str) -> bytes:
    return text.encode() + b"\0"


def test_the_mgs_connects_pings_and_hands_out_a_client_log_naming_the_ost(server, node):
    conn = _connect(node, server)
    asked = C("OBD_CONNECT_VERSION") | C("OBD_CONNECT_AT") | C("OBD_CONNECT_FULL20") | C("OBD_CONNECT_GRANT")
    connect = _mgs_request("MGS_CONNECT", [_uuid("MGS"), _uuid("client-1"), bytes(8),
                                           wire.pack_struct("obd_connect_data", {"ocd_connect_flags": asked})])
    rep = _mgs(conn, 0x100, connect)
    assert (rep.type_name, rep.status, rep.body["pb_opc"]) == ("REPLY", 0, C("MGS_CONNECT"))
    # MGS_CONNECT_SUPPORTED (lustre_idl.h) has no OBD_CONNECT_GRANT
    assert rep.struct(1, "obd_connect_data")["ocd_connect_flags"] == asked & ~C("OBD_CONNECT_GRANT")
    assert rep.body["pb_handle"] != 0
    assert _mgs(conn, 0x101, _mgs_request("OBD_PING")).status == 0

    # LLOG_ORIGIN_HANDLE_CREATE by name: the logid (object 1 of FID_SEQ_LLOG_NAME, 10)
    rep = _mgs(conn, 0x102, _mgs_request("LLOG_ORIGIN_HANDLE_CREATE",
                                         [_llogd(), _uuid("lustre-client"), bytes(wire.S.size("mdt_body"))]))
    assert rep.status == 0
    logid = rep.buffers[1][:20]
    assert logid == struct.pack("<QQI", 1, 10, 0)
    # LLOG_ORIGIN_HANDLE_READ_HEADER: an 8192-byte llog_log_hdr, 6 records (bits 0..6 set)
    rep = _mgs(conn, 0x103, _mgs_request("LLOG_ORIGIN_HANDLE_READ_HEADER",
                                         [logid + _llogd(lgd_llh_flags=C("LLOG_F_IS_PLAIN"))[20:]]))
    hdr = rep.buffers[1]
    assert len(hdr) == 8192
    lrh_len, lrh_index, lrh_type = struct.unpack_from("<III", hdr, 0)
    assert (lrh_len, lrh_type) == (8192, C("LLOG_HDR_MAGIC"))
    count, bitmap_offset = struct.unpack_from("<II", hdr, 24)
    assert (count, bitmap_offset) == (7, 88) and hdr[88] == 0x7F and not any(hdr[89:8184])
    assert struct.unpack_from("<II", hdr, 8184) == (8192, 6)            # llh_tail: lrt_len, lrt_index
    assert hdr[44:44 + 12] == b"config_uuid\0"
    # LLOG_ORIGIN_HANDLE_NEXT_BLOCK from index 1: every record in one chunk
    rep = _mgs(conn, 0x104, _mgs_request("LLOG_ORIGIN_HANDLE_NEXT_BLOCK", [
        logid + _llogd(lgd_llh_flags=4, lgd_index=1, lgd_len=8192, lgd_cur_offset=8192)[20:]]))
    body = rep.struct(1, "llogd_body")
    assert (body["lgd_saved_index"], body["lgd_index"]) == (6, 1)
    block = rep.buffers[2]
    assert len(block) == 8192
    records, at = [], 0
    while at < len(block) and struct.unpack_from("<I", block, at)[0]:
        length, index, rtype = struct.unpack_from("<III", block, at)
        assert rtype == C("OBD_CFG_REC") and struct.unpack_from("<II", block, at + length - 8) == (length, index)
        records.append(block[at:at + length])
        at += length
    assert body["lgd_cur_offset"] == 8192 + at and not any(block[at:])
    commands = [struct.unpack_from("<I", r, 16 + 4)[0] for r in records]
    assert commands == [C(n) for n in ("LCFG_MARKER", "LCFG_ADD_UUID", "LCFG_ATTACH", "LCFG_SETUP",
                                       "LCFG_LOV_ADD_OBD", "LCFG_MARKER")]
    # record 2, add_uuid: lcfg_nid is serve's NID (0x200007f000001: tcp, 127.0.0.1)
    assert struct.unpack_from("<Q", records[1], 16 + 16)[0] == 0x200007F000001
    # record 5, lov_add_obd, written out by hand: llog_rec_hdr (128 bytes, index 5, OBD_CFG_REC),
    # lustre_cfg (LUSTRE_CFG_VERSION, LCFG_LOV_ADD_OBD, 4 buffers of 14, 20, 2, 2 bytes), the
    # buffers 8-aligned, llog_rec_tail (128, 5)  (mgs_llog.c: record_lov_add)
    golden = bytes.fromhex(
        "80000000" "05000000" "00006210" "00000000"                       # llog_rec_hdr
        "0100f61c" "0df00c00" "00000000" "00000000" "0000000000000000"    # version, command, num, flags, nid
        "00000000" "04000000" "0e000000" "14000000" "02000000" "02000000"  # nal, bufcount, buflens
        + b"lustre-clilov\0\0\0".hex() + b"lustre-OST0000_UUID\0\0\0\0\0".hex()
        + b"0\0\0\0\0\0\0\0".hex() + b"1\0\0\0\0\0\0\0".hex()
        + "80000000" "05000000")                                          # llog_rec_tail
    assert records[4] == golden
    # past the last record: ERR -EBADR (llog_osd_next_block)
    rep = _mgs(conn, 0x105, _mgs_request("LLOG_ORIGIN_HANDLE_NEXT_BLOCK", [
        logid + _llogd(lgd_llh_flags=4, lgd_index=7, lgd_saved_index=6, lgd_len=8192,
                       lgd_cur_offset=8192 + at)[20:]]))
    assert (rep.type_name, rep.status) == ("ERR", -spec.errno_value("EBADR"))
    assert _mgs(conn, 0x106, _mgs_request("MGS_DISCONNECT")).status == 0


def test_the_mgs_grants_rep_mbits_and_then_answers_on_pb_mbits(server, node):
    """MGS_CONNECT_SUPPORTED2 (lustre_idl.h) is REP_MBITS and LARGE_NID: of the second word a
    client asks, the MGS grants those (mgs_handler.c: mgs_obd_reconnect), and a client granted
    REP_MBITS is then answered on its pb_mbits, the connect itself on its XID."""
    conn = _connect(node, server)
    asked2 = C("OBD_CONNECT2_REP_MBITS") | C("OBD_CONNECT2_LARGE_NID") | C("OBD_CONNECT2_LSEEK")
    ocd = wire.pack_struct("obd_connect_data", {"ocd_connect_flags": C("OBD_CONNECT_FLAGS2") | C("OBD_CONNECT_FULL20"),
                                                "ocd_connect_flags2": asked2})
    rep = _mgs(conn, 0x600, _mgs_request("MGS_CONNECT", [_uuid("MGS"), _uuid("client-2"), bytes(8), ocd]))
    assert rep.struct(1, "obd_connect_data")["ocd_connect_flags2"] == asked2 & ~C("OBD_CONNECT2_LSEEK")
    ping = bytearray(_mgs_request("OBD_PING"))
    body_at = -(-(spec.layout("lustre_msg_v2").field("lm_buflens").offset + 4) // 8) * 8
    field = spec.layout("ptlrpc_body_v3").field("pb_mbits")
    ping[body_at + field.offset:body_at + field.end] = (0x601 | 1 << 40).to_bytes(8, "little")
    assert conn.put(MGS_REQUEST_PORTAL, 0x601, bytes(ping)).kind == "sent"
    for _ in range(int(WAIT / 0.05)):            # nobody waits on either match bits: it is kept
        if conn.unmatched:
            break
        time.sleep(0.05)
    (reply,) = conn.unmatched
    assert (reply.portal, reply.match_bits) == (MGC_REPLY_PORTAL, 0x601 | 1 << 40)


def test_the_mgs_has_no_other_log_and_serves_no_other_opcode(server, node):
    conn = _connect(node, server)
    rep = _mgs(conn, 0x200, _mgs_request("LLOG_ORIGIN_HANDLE_CREATE",
                                         [_llogd(), _uuid("lustre-MDT0000"), bytes(wire.S.size("mdt_body"))]))
    assert (rep.type_name, rep.status) == ("REPLY", -spec.errno_value("ENOENT"))   # ENOENT stays a REPLY
    rep = _mgs(conn, 0x201, _mgs_request("MGS_CONFIG_READ", [bytes(wire.S.size("mgs_config_body"))]))
    assert (rep.type_name, rep.status) == ("ERR", -spec.errno_value("EOPNOTSUPP"))
    assert server.counts["mgs_requests"] == 2 and server.counts["requests"] == 0


def test_without_the_mgs_its_portal_finds_no_buffer(node):
    adapter = load_adapter("reference")
    adapter.start()
    server = Server(adapter, SERVER, "127.0.0.1", 0, accept_all=True).start()       # mgs=None
    try:
        conn = _connect(node, server)
        out = conn.exchange(MGS_REQUEST_PORTAL, 0x300, _mgs_request("OBD_PING"), reply_portal=MGC_REPLY_PORTAL,
                            timeout=0.5, max_wait=0.5)
        assert out.kind == "timeout"
        assert server.counts["not_ost_portal"] == 1 and server.counts["mgs_requests"] == 0
    finally:
        server.close()


def test_the_mgs_needs_an_ost_uuid():
    adapter = load_adapter("reference")
    adapter.start()
    with pytest.raises(ValueError, match="not an OST's UUID"):
        Server(adapter, SERVER, "127.0.0.1", 0, mgs="lustre-MDT0000_UUID")


# -- faults -----------------------------------------------------------------------------------


def _fault(server, **args):
    answer = server.control("fault", args)
    assert answer["ok"], answer
    return answer


def test_a_dropped_reply_is_never_seen_and_the_next_one_comes(server, node):
    conn = _connect(node, server)
    _fault(server, kind="drop", count=1)
    client = Client("drop", 0x1000)
    xid, data = client.request("OBD_PING")
    out = _ost(conn, xid, data, timeout=0.5, max_wait=0.5)
    assert out.kind == "timeout" and not out.early
    xid, data = client.request("OBD_PING")
    assert _ost(conn, xid, data).kind == "reply"
    assert server.counts["faults"] == 1 and server.faults == []


def test_a_delayed_reply_arrives_after_a_client_that_waits_less_gave_up(server, node):
    conn = _connect(node, server)
    _fault(server, kind="delay", value=1500, count=1)
    xid, data = Client("delay", 0x1000).request("OBD_PING")
    out = _ost(conn, xid, data, timeout=0.2, max_wait=0.2)
    assert out.kind == "timeout"                  # the reply cannot come before 1.5 s
    for _ in range(int(WAIT / 0.05)):             # then it comes, and nobody waits for it
        if conn.unmatched:
            break
        time.sleep(0.05)
    (late,) = conn.unmatched
    assert (late.match_bits, late.offset) == (xid, EARLY_SIZE)


def test_early_replies_come_first_at_offset_0_then_the_final_reply(server, node):
    conn = _connect(node, server)
    _fault(server, kind="early", value=2, count=1)
    xid, data = Client("early", 0x1000).request("OBD_PING")
    out = _ost(conn, xid, data)
    assert out.kind == "reply" and len(out.early) == 2
    for e in out.early:
        assert (e.portal, e.match_bits, e.offset, len(e.payload)) == (OSC_REPLY_PORTAL, xid, 0, EARLY_SIZE)
        msg = wire.parse(e.payload, "reply")
        assert len(msg.buffers) == 1 and msg.header["lm_flags"] == 0      # a reply's: none set
        assert (msg.body["pb_opc"], msg.body["pb_timeout"]) == (C("OBD_PING"), 10)
    assert out.reply.offset == EARLY_SIZE
    assert wire.parse(out.reply.payload, "reply").body["pb_opc"] == C("OBD_PING")


def test_a_request_without_adaptive_timeouts_gets_no_early_reply(server, node):
    conn = _connect(node, server)
    _fault(server, kind="early", count=1)
    xid, data = Client("no-at", 0x1000).request("OBD_PING", lm_flags=0)
    out = _ost(conn, xid, data, at=False)
    assert out.kind == "reply" and out.reply.offset == 0 and not out.early


def test_a_reset_mid_reply_is_a_reset_for_the_client_which_reconnects(server, node):
    conn = _connect(node, server)
    _fault(server, kind="reset", count=1)
    client = Client("reset", 0x1000)
    xid, data = client.request("OBD_PING")
    out = _ost(conn, xid, data)
    assert out.kind == "reset", out                 # the message began and did not end
    again = _connect(node, server)
    assert again is not conn
    xid, data = client.request("OBD_PING")
    assert _ost(again, xid, data).kind == "reply"


def test_a_noop_storm_before_the_reply_is_ignored_by_the_client(server, node):
    conn = _connect(node, server)
    _fault(server, kind="noop", value=500, count=1)
    xid, data = Client("noop", 0x1000).request("OBD_PING")
    out = _ost(conn, xid, data)
    assert out.kind == "reply" and conn.counts["noop"] == 500


def _reply(out):
    assert out.kind == "reply", out
    return wire.parse(out.reply.payload, "reply")


def _enotconn(out) -> bool:
    rep = _reply(out)
    return rep.body["pb_type"] == wire.ERR and rep.status == -spec.errno_value("ENOTCONN")


@pytest.mark.parametrize("how", ["plan", "control"])
def test_an_eviction_takes_the_export_away(node, how):
    """`evict` evicts the export the request names (genops.c: class_fail_export): the request
    and every later one on that handle are answered ERR -ENOTCONN by the target itself, and a
    reconnect with the old handle gets a new export (not MSG_CONNECT_RECONNECT)."""
    adapter = load_adapter("reference")
    adapter.start()
    plan = {1: Fault.parse("evict")} if how == "plan" else None     # the workload's second request
    server = Server(adapter, SERVER, "127.0.0.1", 0, accept_all=True, plan=plan, record=True).start()
    try:
        conn = _connect(node, server)
        client = Client("evict", 0x1000)
        first = _reply(_ost(conn, *client.connect()))
        client.cookie = first.body["pb_handle"]
        assert not _enotconn(_ost(conn, *client.request("OBD_PING")))
        if how == "control":
            _fault(server, kind="evict", count=1)
        xid, data = client.request("OST_CREATE", [ost_body(1)])
        assert _enotconn(_ost(conn, xid, data))
        _, again = client.request("OST_CREATE", [ost_body(1)], xid=xid, flags=C("MSG_RESENT"))
        assert _enotconn(_ost(conn, xid, again))             # the fault fell once: the export is gone
        assert _enotconn(_ost(conn, *client.request("OBD_PING")))
        rep = _reply(_ost(conn, *client.connect()))
        assert rep.body["pb_type"] == wire.REPLY and rep.status == 0
        assert rep.body["pb_handle"] not in (0, client.cookie)
        assert not rep.body["pb_op_flags"] & C("MSG_CONNECT_RECONNECT")
        client.cookie = rep.body["pb_handle"]
        assert not _enotconn(_ost(conn, *client.request("OBD_PING")))
        assert [e["fault"] for e in server.conversation if e.get("xid") == xid] == ["evict", ""]
        assert server.counts["faults"] == 1
    finally:
        server.close()
        adapter.close()


def test_the_mgs_s_replies_take_no_fault(server, node):
    conn = _connect(node, server)
    _fault(server, kind="drop")
    assert _mgs(conn, 0x400, _mgs_request("OBD_PING")).status == 0
    assert server.counts["faults"] == 0


def _drops(seed: int, node) -> list[bool]:
    adapter = load_adapter("reference")
    adapter.start()
    server = Server(adapter, SERVER, "127.0.0.1", 0, accept_all=True, fault_seed=seed,
                    faults=[Fault("drop", probability=0.5)]).start()
    try:
        conn = _connect(node, server)
        client, seen = Client(f"seed{seed}", 0x1000), []
        for n in range(1, 13):          # each reply is sent or dropped before the next request
            xid, data = client.request("OBD_PING")
            assert conn.put(OST_REQUEST_PORTAL, xid, data).kind == "sent"
            for _ in range(int(WAIT / 0.01)):
                if server.counts["replies"] + server.counts["faults"] == n:
                    break
                time.sleep(0.01)
            seen.append(server.counts["faults"] > sum(seen))
        for _ in range(int(WAIT / 0.01)):                   # the replies sent come
            if len(conn.unmatched) == seen.count(False):
                break
            time.sleep(0.01)
        assert len(conn.unmatched) == seen.count(False)
        return seen
    finally:
        node.close()
        server.close()


def test_a_fault_with_a_probability_falls_the_same_way_for_the_same_seed():
    first, second = _drops(7, Node(CLIENT)), _drops(7, Node(CLIENT))
    assert first == second and any(first) and not all(first)


def test_a_bad_fault_is_refused_by_name(server):
    assert "expected one of drop, delay, early, reset, noop" in server.control("fault", {"kind": "melt"})["error"]
    assert "probability" in server.control("fault", {"kind": "drop", "probability": 2})["error"]
    assert "from 0 to 1000000" in server.control("fault", {"kind": "noop", "value": 10 ** 9})["error"]
    assert "takes no value" in server.control("fault", {"kind": "drop", "value": 1})["error"]
    assert "takes no value" in server.control("fault", {"kind": "evict", "value": 1})["error"]
    assert "count" in server.control("fault", {"kind": "delay", "value": 1, "count": 0})["error"]
    assert server.control("fault", {"kind": "clear"})["result"]["faults"] == []


def test_faults_from_the_command_line_and_the_control_socket(tmp_path, node):
    """`--fault drop --fault-probability 1` drops every reply of the target; `fault clear` on
    the control socket ends that, and `fault` adds one for the next reply."""
    served = Served(tmp_path, control=["--control", str(tmp_path / "c.sock"), "--fault", "drop"])
    try:
        out = node.connect("127.0.0.1", SERVER, served.port, privileged=False)
        conn, client = out.connection, Client("cli", 0x1000)
        xid, data = client.request("OBD_PING")
        assert _ost(conn, xid, data, timeout=0.5, max_wait=0.5).kind == "timeout"
        status = control_call(served.control, "status")["result"]
        assert status["faults"] == [{"kind": "drop", "value": None, "count": None, "probability": 1.0}]
        assert control_call(served.control, "fault", kind="clear")["result"]["faults"] == []
        xid, data = client.request("OBD_PING")
        assert _ost(conn, xid, data).kind == "reply"
        assert control_call(served.control, "fault", kind="noop", value=3, count=1)["ok"]
        xid, data = client.request("OBD_PING")
        assert _ost(conn, xid, data).kind == "reply" and conn.counts["noop"] == 3
    finally:
        served.proc.kill()
        served.proc.wait()


@pytest.mark.parametrize("args, why", [(["--fault", "delay=soon"], "whole number"),
                                       (["--fault", "melt"], "expected one of"),
                                       (["--fault", "drop", "--fault-probability", "2"], "probability"),
                                       (["--target-uuid", "lustre-MDT0000_UUID"], "is not an OST's UUID"),
                                       (["--request-log", "/nonexistent/dir/log"], "--request-log")])
def test_a_bad_option_is_a_usage_error(args, why):
    done = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "serve", "--listen", "127.0.0.1:0",
                           "--iut", "reference", *args], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and why in done.stderr and "Traceback" not in done.stderr


def test_the_request_log_has_a_line_per_request(tmp_path, node):
    log = tmp_path / "requests.jsonl"
    served = Served(tmp_path, control=["--control", str(tmp_path / "c.sock"), "--request-log", str(log)])
    try:
        conn = node.connect("127.0.0.1", SERVER, served.port, privileged=False).connection
        xid, data = Client("logged", 0x1000).request("OBD_PING")
        assert _ost(conn, xid, data).kind == "reply"
        _mgs(conn, 0x500, _mgs_request("OBD_PING"))
        for _ in range(int(WAIT / 0.05)):
            if len(log.read_text().splitlines()) == 2:
                break
            time.sleep(0.05)
        lines = [json.loads(x) for x in log.read_text().splitlines()]
        assert [(r["service"], r["portal"], r["xid"], r["opc"]) for r in lines] == \
            [("ost", 28, xid, C("OBD_PING")), ("mgs", 26, 0x500, C("OBD_PING"))]
        assert lines[0]["data"] == data.hex()
    finally:
        served.proc.kill()
        served.proc.wait()


@pytest.mark.parametrize("name, status", [("lustre-OST0000_UUID", 0), ("lustre-OST0000", 0),
                                          ("lustre-OST0001", -spec.errno_value("ENODEV"))])
def test_the_reference_finds_its_target_by_uuid_or_device_name(name, status):
    """ldlm_lib.c: target_handle_connect finds the target with class_str2obd (genops.c), which
    compares the string with each device's UUID and its name: ktest's client sends the name
    (lustre-OST0000), a kernel client the UUID."""
    from ptlrpc_conformance.harness.ost.client import uuid_buffer
    adapter = load_adapter("reference")
    adapter.start()
    client = Client("by-name", 0x1000)
    bufs = client.connect_buffers()
    client.conn_cnt += 1                    # as Client.connect counts a connect attempt
    xid, data = client.request("OST_CONNECT", [uuid_buffer(name)] + bufs[1:], op_flags=C("MSG_CONNECT_INITIAL"))
    out = adapter.call({"op": "exchange", "data": data.hex(), "xid": xid, "client": "12345-127.0.0.2@tcp"})
    assert out.ok
    assert wire.parse(bytes.fromhex(out.result["data"]), "reply").status == status
    adapter.close()
