"""--iut lnet-tcp: (harness/transport/lnet_tcp.py): a target reached over LNet TCP, against
`serve --iut reference` on loopback (in-process, or as a process with --accept-all and port 0).

The read-only firewall (spec/target.yaml `live`, live_safety.py) is proven by a counting peer:
every request the tier forbids raises NotApplicable and none reaches the server (its request
count, and the adapter's own pcap, hold only what was allowed)."""
from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import types

import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.capture import pcap
from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.ost.client import C, Client, ost_body
from ptlrpc_conformance.harness.transport import live_safety
from ptlrpc_conformance.harness.transport.adapter import InProcessAdapter, IUTStartError, NotApplicable, UsageError
from ptlrpc_conformance.harness.transport.lnet_serve import ControlSocket, Server
from ptlrpc_conformance.harness.transport.loader import load_adapter
from ptlrpc_conformance.reference import make_testee

TARGET = spec.target()["target_uuid"]
LIVE = spec.target()["live"]
WAIT = 60


class Recording:
    """The reference, recording every exchange it is given: (client, opcode, client UUID of a connect)."""

    def __init__(self, statfs_state: int = 0, slow_ping: float = 0.0):
        self.ref, self.seen, self.statfs_state, self.slow_ping = make_testee(), [], statfs_state, slow_ping
        self.xids = []                      # (the peer serve names, the match bits) of every exchange

    def handle(self, request):
        answer = self.ref.handle(request)
        if self.slow_ping and request.get("op") == "exchange" and \
                live_safety.parse(bytes.fromhex(request["data"])).body("pb_opc") == C("OBD_PING"):
            time.sleep(self.slow_ping)            # the reply leaves after the adapter's drop window
        if request.get("op") == "exchange":
            p = live_safety.parse(bytes.fromhex(request["data"]))
            opc = p.body("pb_opc") if p is not None else None
            uuid = live_safety.uuid_of(p.buffer(2)) if opc == C("OST_CONNECT") else None
            self.seen.append((request["client"], opc, uuid))
            self.xids.append((request["client"], request["xid"]))
            if opc == C("OST_STATFS") and self.statfs_state and answer.get("ok") and answer["result"].get("data"):
                answer["result"]["data"] = _with_state(bytes.fromhex(answer["result"]["data"]), self.statfs_state).hex()
        return answer


def _with_state(reply: bytes, state: int) -> bytes:
    p = live_safety.parse(reply)
    leaf = next(x for x in live_safety.S.leaves("obd_statfs") if x.name == "os_state")
    at = p.spans[1][0] + leaf.offset
    return reply[:at] + state.to_bytes(4, "little") + reply[at + 4:]


@pytest.fixture
def served():
    """serve --iut (a recording) reference, in-process, accept=all, with a control socket."""
    made = []

    def start(statfs_state: int = 0, slow_ping: float = 0.0):
        rec = Recording(statfs_state, slow_ping)
        adapter = InProcessAdapter(rec, description="recording reference")
        adapter.start()
        server = Server(adapter, "127.0.0.1@tcp", "127.0.0.1", 0, accept_all=True).start()
        control = ControlSocket(server, port=0).start()
        made.append((server, control, adapter))
        return types.SimpleNamespace(rec=rec, server=server, control=control.address, port=server.address[1])
    yield start
    for server, control, adapter in made:
        server.close()
        control.close()
        adapter.close()


def live_spec(s, **extra) -> str:
    options = dict({"port": s.port, "target": TARGET, "srcport": "any", "drop": "0.2"}, **extra)
    return "lnet-tcp:127.0.0.1@tcp?" + "&".join(f"{k}={v}" for k, v in options.items())


def test_privileged_clients_send_with_the_nodes_pid_and_xids_of_the_node(served):
    """With srcport=privileged every request carries the pid the connection's hello names
    (LNET_PID_LUSTRE), as a kernel client's imports do: a Lustre server replies to the
    request's (NID, pid), and socklnd delivers only to a pid it has a connection for
    (ksocknal_launch_packet refuses an unknown user-space pid: no reply would ever come).  Two
    suite clients' XID 1 therefore go with match bits of their own."""
    s = served()
    try:
        adapter = load_adapter(live_spec(s, srcport="privileged"), timeout=10)
    except IUTStartError as e:
        pytest.skip(f"no privileged source port can be bound here (root or CAP_NET_BIND_SERVICE): {e}")
    with adapter:
        a, b = Client("a", handle=0x1001), Client("b", handle=0x1002)
        connected = reply_of(exchange(adapter, a, a.connect()))
        assert connected.status == 0 and reply_of(exchange(adapter, b, b.connect())).status == 0
        a.cookie = connected.body["pb_handle"]
        assert reply_of(exchange(adapter, a, a.request("OBD_PING"))).status == 0
    node = f"{spec.lnet()['constants']['LNET_PID_LUSTRE']['value']}-127.0.0.1@tcp"
    assert {client for client, _ in s.rec.xids} == {node}, s.rec.xids
    case_xids = [x for _, x in s.rec.xids if not x >> 56]          # not the adapter's own (0x7F...)
    assert len(case_xids) == len(set(case_xids)) == 3 and all(x >> 32 for x in case_xids), case_xids


def exchange(adapter, client: Client, xid_data):
    xid, data = xid_data
    return adapter.call({"op": "exchange", "client": client.name, "xid": xid, "data": data.hex()})


def reply_of(outcome):
    assert outcome.ok, outcome.describe()
    return wire.parse(bytes.fromhex(outcome.result["data"]), "reply")


# -- the --iut value --------------------------------------------------------------------

@pytest.mark.parametrize("text, field", [
    ("lnet-tcp:127.0.0.1@tcp", "target=UUID is required"),
    ("lnet-tcp:nonsense?target=X", "NID 'nonsense'"),
    ("lnet-tcp:127.0.0.1@tcp?target=X&mode=careful", "mode='careful'"),
    ("lnet-tcp:127.0.0.1@tcp?target=X&port=0", "port='0' is outside"),
    ("lnet-tcp:127.0.0.1@tcp?target=X&index=x", "index='x' is not a number"),
    ("lnet-tcp:127.0.0.1@tcp?target=X&srcport=low", "srcport='low'"),
    ("lnet-tcp:127.0.0.1@tcp?target=X&colour=blue", "unknown option 'colour'"),
    ("lnet-tcp:127.0.0.1@tcp?target=X&target=Y", "option 'target' given 2 times"),
    ("lnet-tcp:127.0.0.1@tcp?target=X&drop=0", "drop='0' is outside"),
])
def test_bad_spec_names_the_field(text, field):
    with pytest.raises(UsageError, match=None) as e:
        load_adapter(text)
    assert field in str(e.value) and text in str(e.value)


def test_bad_scratch_target_is_a_usage_error():
    with pytest.raises(UsageError, match="UUID@NID"):
        load_adapter("lnet-tcp:127.0.0.1@tcp?target=X&mode=destructive", scratch_target="no-at-sign")


# -- the firewall -------------------------------------------------------------------------

def _forbidden_readonly() -> list[tuple[str, bytes]]:
    """One request for every opcode, message flag, transno, connect flag and object the
    read-only tier forbids, each otherwise correct."""
    rules = LIVE["modes"]["readonly"]
    allowed = {C(n) if n != "unknown_opcode" else spec.target()["unknown_opcode"] for n in rules["opcodes"]}
    c = Client("c1", handle=0x1000, cookie=0x1234)
    out = []
    names = list(spec.target()["opcodes"]) + list(spec.target()["unmodelled_opcodes"])
    for name in names:
        if C(name) not in allowed:
            out.append((f"opcode {name}", c.request("OST_GETATTR", [ost_body(1, seq=2)], opc=C(name))[1]))
    for flag in rules["forbidden_msg_flags"]:
        out.append((f"flag {flag}", c.request("OBD_PING", flags=C(flag))[1]))
    out.append(("a transno", c.request("OBD_PING", transno=5)[1]))
    for flag in LIVE["forbidden_connect_flags"]:
        out.append((f"connect flag {flag}", c.request("OST_CONNECT", c.connect_buffers(flags=C(flag)))[1]))
    bufs = c.connect_buffers()
    bufs[3] = wire.pack_struct("obd_connect_data", {"ocd_connect_flags": C("OBD_CONNECT_INDEX") | C("OBD_CONNECT_VERSION"),
                                                    "ocd_index": 7})
    out.append(("another index", c.request("OST_CONNECT", bufs)[1]))
    out.append(("getattr of sequence 0", c.request("OST_GETATTR", [ost_body(1, seq=0)])[1]))
    out.append(("getattr of an IDIF FID", c.request("OST_GETATTR", [ost_body(1 << 32, seq=C("FID_SEQ_IDIF") + 1)])[1]))
    out.append(("too big", c.request("OBD_PING", [bytes(LIVE["max_request_size"])])[1]))
    out.append(("not a message", b"\x01" * 40))
    return out


def test_readonly_firewall_sends_nothing_it_forbids(served, tmp_path):
    s = served()
    capture = tmp_path / "live.pcap"
    adapter = load_adapter(live_spec(s), timeout=10, pcap=str(capture))
    with adapter:
        c = Client("c1", handle=0x1000)
        rep = reply_of(exchange(adapter, c, c.connect()))      # an allowed request reaches the target
        assert rep.status == 0
        c.cookie = rep.body["pb_handle"]
        assert reply_of(exchange(adapter, c, c.request("OBD_PING"))).status == 0
        # an object of the echo sequence, in the FID form (f_seq where oi_id is, f_oid 1 where oi_seq is:
        # lustre_ostid.h: ostid_seq reads an oi_seq other than 0 and the default one as a FID)
        echo = c.request("OST_GETATTR", [ost_body(C("FID_SEQ_ECHO"), seq=1)])
        assert reply_of(exchange(adapter, c, echo)).body["pb_type"] in (wire.REPLY, wire.ERR)
        before = (s.server.counts["requests"], len(s.rec.seen))
        forbidden = _forbidden_readonly()
        assert len(forbidden) > 20
        for what, data in forbidden:
            with pytest.raises(NotApplicable, match=r"\(read-only\)"):
                adapter.call({"op": "exchange", "client": "c1", "xid": 1000, "data": data.hex()})
        assert (s.server.counts["requests"], len(s.rec.seen)) == before, "a forbidden request reached the target"
    # the capture of every byte the adapter sent holds the allowed requests only
    opcodes = {live_safety.parse(r["request"]).body("pb_opc") for r in pcap.read_pcap(capture)}
    allowed = {C(n) for n in LIVE["modes"]["readonly"]["opcodes"] if n != "unknown_opcode"}
    assert opcodes and opcodes <= allowed


def test_no_mode_sends_orphan_cleanup(served):
    s = served()
    spec_text = live_spec(s, mode="destructive")
    with load_adapter(spec_text, timeout=10, scratch_target=f"{TARGET}@127.0.0.1@tcp") as adapter:
        c = Client("c1", handle=0x1000, cookie=0x1234)
        before = s.server.counts["requests"]
        for flag in LIVE["forbidden_o_flags"]:
            with pytest.raises(NotApplicable, match="no mode sends"):
                exchange(adapter, c, c.request("OST_CREATE", [ost_body(5, o_flags=C(flag))]))
        with pytest.raises(NotApplicable, match="LDLM_ENQUEUE is not allowed in mode destructive"):
            exchange(adapter, c, c.request("OST_GETATTR", [ost_body(5)], opc=C("LDLM_ENQUEUE")))
        assert s.server.counts["requests"] == before


# -- exchange, reset, restart --------------------------------------------------------------

def test_exchange_reset_restart_over_control(served):
    s = served()
    text = live_spec(s, mode="destructive", control=s.control)
    with load_adapter(text, timeout=10, scratch_target=f"{TARGET}@127.0.0.1@tcp") as adapter:
        assert adapter.hello.capabilities == {"target", "restart"}
        assert adapter.hello.version == "2.17.57.0" and TARGET in adapter.hello.name
        c1, c2 = Client("c1", handle=0x1000), Client("c2", handle=0x1111)
        for c in (c1, c2):
            rep = reply_of(exchange(adapter, c, c.connect()))
            c.cookie = rep.body["pb_handle"]
        # two clients, one XID: each gets its own reply
        assert c1.next_xid == c2.next_xid
        r1 = reply_of(exchange(adapter, c1, c1.request("OST_CREATE", [ost_body(1)])))
        r2 = reply_of(exchange(adapter, c2, c2.request("OST_CREATE", [ost_body(1)])))
        assert r1.status == 0 and r2.status == 0
        clients = {who for who, _, _ in s.rec.seen[3:]}        # after the preflight's connect, statfs, disconnect
        assert len(clients) == 2                               # two exports, two LNet identities
        dropped = exchange(adapter, c1, c1.request("OST_GETATTR", [ost_body(1)], timeout=0))   # the target drops it
        assert dropped.ok and dropped.result["data"] is None and "serve sent no reply" in dropped.result["note"]   # serve said so: no drop window
        restart = adapter.call({"op": "restart"})
        assert restart.ok and "last_committed" in restart.result
        # after the restart: the connections came back, from the same ports (the same clients)
        rep = reply_of(exchange(adapter, c1, c1.connect()))
        assert rep.body["pb_type"] == wire.REPLY and rep.status == 0
        assert {who for who, _, _ in s.rec.seen[3:]} == clients
        assert adapter.call({"op": "end_recovery"}).ok
        assert adapter.call({"op": "reset"}).ok
        rep = reply_of(exchange(adapter, Client("c1", handle=0x1000), Client("c1", handle=0x1000).connect()))
        assert rep.status == 0


def test_one_control_connection_for_every_control_call(served, monkeypatch):
    """The adapter keeps its connection to serve's control socket: the fates it asks while a
    request waits, reset, restart and end_recovery all go over the one it dialled first."""
    accepted = []
    serve_one = ControlSocket._serve_one
    monkeypatch.setattr(ControlSocket, "_serve_one", lambda self, sock: (accepted.append(sock), serve_one(self, sock)))
    s = served()
    text = live_spec(s, mode="destructive", control=s.control)
    with load_adapter(text, timeout=10, scratch_target=f"{TARGET}@127.0.0.1@tcp") as adapter:
        c = Client("c1", handle=0x1000)
        c.cookie = reply_of(exchange(adapter, c, c.connect())).body["pb_handle"]
        dropped = exchange(adapter, c, c.request("OST_GETATTR", [ost_body(1)], timeout=0))
        assert dropped.ok and "serve sent no reply" in dropped.result["note"]      # a fate asked
        for op in ("reset", "restart", "end_recovery", "reset"):
            assert adapter.call({"op": op}).ok, op
        c = Client("c1", handle=0x1000)
        assert reply_of(exchange(adapter, c, c.connect())).status == 0          # dialled again after the restart
    assert len(accepted) == 1


def test_a_reply_after_the_drop_window_is_an_error(served):
    s = served(slow_ping=1.0)
    with load_adapter(live_spec(s, drop="0.2"), timeout=10) as adapter:
        c = Client("c1", handle=0x1000)
        c.cookie = reply_of(exchange(adapter, c, c.connect())).body["pb_handle"]
        first = exchange(adapter, c, c.request("OBD_PING"))
        assert first.ok and first.result["data"] is None and "heuristic" in first.result["note"]
        deadline = time.monotonic() + WAIT
        while not adapter._late() and time.monotonic() < deadline:     # the reply arrives, late
            time.sleep(0.05)
        second = exchange(adapter, c, c.request("OST_STATFS"))
        assert second.kind == "timeout" and "came after the drop window" in second.detail


def test_restart_without_a_hook_is_not_declared(served):
    s = served()
    with load_adapter(live_spec(s), timeout=10) as adapter:
        assert adapter.hello.capabilities == {"target"}
        with pytest.raises(NotApplicable, match="restart"):
            adapter.call({"op": "restart"})
        c = Client("c1", handle=0x1000)
        reply_of(exchange(adapter, c, c.connect()))
        assert adapter.call({"op": "reset"}).ok           # without control: the exports disconnected
        disconnects = [who for who, opc, _ in s.rec.seen if opc == C("OST_DISCONNECT")]
        assert len(disconnects) == 2                        # the preflight's and c1's


def test_restart_hook_runs(served, tmp_path):
    s = served()
    mark = tmp_path / "restarted"
    with load_adapter(live_spec(s, restart=f"touch {mark}"), timeout=10) as adapter:
        assert "restart" in adapter.hello.capabilities
        assert adapter.call({"op": "restart"}).ok and mark.exists()


# -- destructive mode's checks --------------------------------------------------------------

@pytest.mark.parametrize("scratch, why", [
    (None, "needs --scratch-target"),
    ("other-OST0001_UUID@127.0.0.1@tcp", "does not match"),
    (f"{TARGET}@127.0.0.2@tcp", "does not match"),
])
def test_destructive_needs_the_matching_scratch_target(served, scratch, why):
    s = served()
    with pytest.raises(IUTStartError, match=why):
        load_adapter(live_spec(s, mode="destructive"), timeout=10, scratch_target=scratch).start()
    # the preflight's export was disconnected all the same
    assert [opc for _, opc, _ in s.rec.seen][-1] == C("OST_DISCONNECT")


@pytest.mark.parametrize("state", sorted(LIVE["destructive_refused_states"]))
def test_destructive_refused_on_a_readonly_or_not_precreating_ost(served, state):
    s = served(statfs_state=LIVE["destructive_refused_states"][state])
    with pytest.raises(IUTStartError, match=state):
        load_adapter(live_spec(s, mode="destructive"), timeout=10, scratch_target=f"{TARGET}@127.0.0.1@tcp").start()


# -- the command line: dry run, certify, check-trace, SIGTERM --------------------------------

def _cli(*argv, timeout=600, **kw):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-m", "ptlrpc_conformance", *argv], capture_output=True, text=True,
                          timeout=timeout, env=env, **kw)


def test_dry_run_lists_what_would_run_and_what_is_blocked(served, tmp_path):
    s = served()
    done = _cli("certify", "--dry-run", "--iut", live_spec(s), "--out", str(tmp_path / "out"))
    assert done.returncode == 0, done.stderr
    assert "would run  target.conn.connect-ping.exchange" in done.stdout
    lines = {word: line for line in done.stdout.splitlines() if line.startswith(("  would run", "  blocked"))
             for word in line.split()[1:3] if word.startswith(("target.", "recovery."))}
    assert "OST_CREATE is not allowed in mode readonly" in lines["target.obj.lifecycle.exchange"]
    assert lines["target.obj.lifecycle.exchange"].startswith("  blocked")
    assert "needs capability 'restart'" in lines["recovery.stateful.restart.1"]
    # nothing but the preflight was sent: connect, statfs, disconnect
    assert [opc for _, opc, _ in s.rec.seen] == [C("OST_CONNECT"), C("OST_STATFS"), C("OST_DISCONNECT")]


CASES = ["target.conn.connect-ping.exchange", "target.conn.reconnect.exchange", "target.drop.malformed.exchange",
         "target.obj.lifecycle.exchange", "target.transno.two-clients.exchange", "recovery.replay.transno-order.exchange",
         "recovery.change-during-recovery.exchange"]


def _verdicts(out) -> dict:
    doc = json.loads((out / "report.json").read_text())
    return {c["id"]: c["verdict"] for c in doc["cases"]}, doc


def test_certify_over_lnet_tcp_gives_the_reference_verdicts(served, tmp_path):
    s = served()
    selection = [x for case in CASES for x in ("--case", case)]
    live = _cli("certify", "--iut", live_spec(s, mode="destructive", control=s.control),
                "--scratch-target", f"{TARGET}@127.0.0.1@tcp", "--out", str(tmp_path / "live"), "-q", *selection)
    ref = _cli("certify", "--out", str(tmp_path / "ref"), "-q", *selection)
    assert ref.returncode == 0, ref.stdout + ref.stderr
    assert live.returncode == 0, live.stdout + live.stderr
    got, doc = _verdicts(tmp_path / "live")
    assert got == _verdicts(tmp_path / "ref")[0] and set(got.values()) == {"pass"}
    # the run's traffic is kept, and check-trace reads it
    assert (tmp_path / "live" / "live.pcap").stat().st_size > 0
    judged = _cli("check-trace", str(tmp_path / "live" / "live.pcap"))
    assert judged.returncode in (0, 1) and " exchanges, " in judged.stdout + judged.stderr, judged.stderr
    assert "client UUIDs used" in live.stderr and "evict_client" in live.stderr


def test_readonly_certify_is_scoped_read_only(served, tmp_path):
    s = served()
    done = _cli("certify", "--iut", live_spec(s), "--out", str(tmp_path / "ro"), "-q",
                "--case", "target.conn.connect-ping.exchange", "--case", "target.obj.lifecycle.exchange")
    got, doc = _verdicts(tmp_path / "ro")
    assert got == {"target.conn.connect-ping.exchange": "pass", "target.obj.lifecycle.exchange": "not-applicable"}, done.stdout
    message = next(c["message"] for c in doc["cases"] if c["id"] == "target.obj.lifecycle.exchange")
    assert "(read-only)" in message and "OST_CREATE" in message
    assert any(m["mode"] == "read-only (live target)" for m in doc["level"]["modes"])
    assert doc["level"]["status"] != "fully conformant"


SIGTERM_CHILD = """
import sys, time
from ptlrpc_conformance.harness.ost.client import Client
from ptlrpc_conformance.harness.transport.loader import load_adapter
adapter = load_adapter(sys.argv[1], timeout=10)
adapter.start()
for name in ("c1", "c2"):
    c = Client(name, handle=0x1000)
    xid, data = c.connect()
    assert adapter.call({"op": "exchange", "client": name, "xid": xid, "data": data.hex()}).ok
print("connected", flush=True)
time.sleep(60)
"""


def test_exports_disconnected_on_sigterm(served):
    s = served()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-c", SIGTERM_CHILD, live_spec(s)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], WAIT)
        assert ready and proc.stdout.readline().strip() == "connected", proc.stderr.read()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    connected = {who for who, opc, uuid in s.rec.seen if opc == C("OST_CONNECT")}
    disconnected = {who for who, opc, _ in s.rec.seen if opc == C("OST_DISCONNECT")}
    assert len(connected) == 3 and connected == disconnected, s.rec.seen    # the preflight's, c1's, c2's
    assert "evict_client" in err and "g1-c1" in err


def test_serve_records_a_pcap(tmp_path):
    """serve --pcap FILE: the server's side of every connection, readable as a capture."""
    capture = tmp_path / "serve.pcap"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    proc = subprocess.Popen([sys.executable, "-m", "ptlrpc_conformance", "serve", "--listen", "127.0.0.1:0",
                             "--accept-all", "--control-port", "0", "--iut", "reference", "--pcap", str(capture)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], WAIT)
        line = proc.stdout.readline() if ready else ""
        assert line.startswith("serving "), proc.stderr.read()
        port = int(line.split(" on ")[1].split(",")[0].rsplit(":", 1)[1])
        control = line.rstrip().rsplit("control ", 1)[1]
        s = types.SimpleNamespace(port=port)
        with load_adapter(live_spec(s), timeout=10) as adapter:
            c = Client("c1", handle=0x1000)
            assert reply_of(exchange(adapter, c, c.connect())).status == 0
        from ptlrpc_conformance.harness.transport.lnet_serve import control_call
        assert control_call(control, "stop")["ok"]
        proc.wait(timeout=WAIT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    records = pcap.read_pcap(capture)
    opcodes = [live_safety.parse(r["request"]).body("pb_opc") for r in records]
    # the preflight (connect, statfs, disconnect), then c1's connect and its disconnect at close
    assert opcodes == [C("OST_CONNECT"), C("OST_STATFS"), C("OST_DISCONNECT"), C("OST_CONNECT"), C("OST_DISCONNECT")]
    assert all(r["reply"] is not None for r in records)
