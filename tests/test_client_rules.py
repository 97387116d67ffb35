"""The client rules (CLI-* requirements, docs/client-rules.md) and their judge
(harness/ost/client_judge.py): hand-written conversations judged as the rules say; the suite's
model client passes every rule at several seeds; each broken client of the zoo is killed and
charged to its own requirement, and to no other."""
import pytest

from client_models import ZOO, ModelClient, converse
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.ost import client_judge as cj, wire
from ptlrpc_conformance.harness.ost.client import Client

SEEDS = range(8)
CONNECT_REPLY_FLAGS = wire.C("MSG_CONNECT_REPLAYABLE")


def failures(findings) -> dict[str, int]:
    return {rid: f.exchange for rid, f in findings.items() if f.verdict == "fail"}


def test_the_judge_rules_are_the_client_requirements():
    reqs = registry.requirements()
    client = [r for r in reqs.values() if r.capability == "client"]
    assert {r.id for r in client} == set(cj.RULES)
    assert all(r.kind == "conduct" and r.cite and r.level == "MUST" for r in client)


# ---- hand-written conversations ---------------------------------------------------------
def reply(pb_type=wire.REPLY, status=0, handle=0, op_flags=0, transno=0, last_committed=0, opc=0) -> bytes:
    return wire.pack_message([wire.pack_body({
        "pb_type": pb_type, "pb_status": status, "pb_handle": handle, "pb_op_flags": op_flags,
        "pb_transno": transno, "pb_last_committed": last_committed, "pb_opc": opc,
        "pb_version": wire.C("PTLRPC_MSG_VERSION")})])


COOKIE = 0xC00C1E


def connected() -> tuple[Client, list]:
    c = Client("hand", handle=7)
    xid, data = c.connect()
    return c, [cj.Sent(xid, data, reply(handle=COOKIE, op_flags=CONNECT_REPLY_FLAGS, opc=wire.C("OST_CONNECT")))]


def lost_ping_then_resent(resent_flag: int) -> list:
    c, events = connected()
    c.cookie = COOKIE
    xid, data = c.request("OBD_PING")
    events.append(cj.Sent(xid, data, None, "drop-reply"))
    c.unreplied.add(xid)
    x2, again = c.connect()
    events.append(cj.Sent(x2, again, reply(handle=COOKIE, op_flags=CONNECT_REPLY_FLAGS | wire.C("MSG_CONNECT_RECONNECT"),
                                           opc=wire.C("OST_CONNECT"))))
    _, resend = c.request("OBD_PING", xid=xid, flags=resent_flag)
    events.append(cj.Sent(xid, resend, reply(opc=wire.C("OBD_PING"))))
    return events


def reconnect_and_resend_ping(c: Client, events: list, xid: int) -> None:
    """`c` reconnects (the same export) and resends its ping `xid` with MSG_RESENT, both answered."""
    x2, again = c.connect()
    events.append(cj.Sent(x2, again, reply(handle=COOKIE, op_flags=CONNECT_REPLY_FLAGS | wire.C("MSG_CONNECT_RECONNECT"),
                                           opc=wire.C("OST_CONNECT"))))
    _, resend = c.request("OBD_PING", xid=xid, flags=cj.MSG_RESENT)
    events.append(cj.Sent(xid, resend, reply(opc=wire.C("OBD_PING"))))


def test_a_resend_after_a_lost_reply_with_msg_resent_passes():
    findings = cj.judge(lost_ping_then_resent(cj.MSG_RESENT))
    assert not failures(findings)
    assert {rid for rid, f in findings.items() if f.verdict == "pass"} == {
        "CLI-XID-1", "CLI-RESEND-1", "CLI-CONN-1", "CLI-CONN-2", "CLI-CONN-3", "CLI-LASTXID-1"}
    assert findings["CLI-REPLAY-1"].verdict == "not exercised"


def test_a_resend_without_msg_resent_is_charged_to_cli_resend_1():
    findings = cj.judge(lost_ping_then_resent(0))
    assert failures(findings) == {"CLI-RESEND-1": 3}
    assert "without MSG_RESENT" in findings["CLI-RESEND-1"].why


def test_a_new_request_with_an_answered_xid_is_charged_to_cli_xid_1():
    c, events = connected()
    c.cookie = COOKIE
    xid, data = c.request("OBD_PING")
    events.append(cj.Sent(xid, data, reply(opc=wire.C("OBD_PING"))))
    _, again = c.request("OBD_PING", xid=xid)
    events.append(cj.Sent(xid, again, reply(opc=wire.C("OBD_PING"))))
    assert failures(cj.judge(events)) == {"CLI-XID-1": 2}


def test_a_resend_of_an_answered_request_is_a_resend():
    """The target sent the reply, but it may have reached the client after its deadline (the
    reply buffer unlinked: ptlrpc_unregister_reply): the same request sent again with
    MSG_RESENT after a reconnect is a resend, not a reused XID."""
    c, events = connected()
    c.cookie = COOKIE
    xid, data = c.request("OBD_PING")
    events.append(cj.Sent(xid, data, reply(opc=wire.C("OBD_PING"))))
    c.unreplied.add(xid)
    reconnect_and_resend_ping(c, events, xid)
    findings = cj.judge(events)
    assert not failures(findings), [f.describe() for f in findings.values() if f.verdict == "fail"]
    assert findings["CLI-XID-1"].checked == 4           # two connects, the ping, its resend


def test_a_reconnect_that_keeps_the_count_is_charged_to_cli_conn_2():
    c, events = connected()
    c.cookie = COOKIE
    c.conn_cnt -= 1                     # the next connect() counts it back to the same value
    xid, data = c.connect()
    events.append(cj.Sent(xid, data, reply(handle=COOKIE, op_flags=CONNECT_REPLY_FLAGS, opc=wire.C("OST_CONNECT"))))
    assert failures(cj.judge(events)) == {"CLI-CONN-2": 1}


def test_replays_judged_against_the_transnos_the_replies_gave():
    """Two creates answered with transnos 11 and 12, pb_last_committed 10; a restart; a
    reconnect answered MSG_CONNECT_RECOVERING; replays of 12 then 11 (out of order), then
    the REPLAY_DONE ping."""
    c, events = connected()
    c.cookie = COOKIE
    sent = []
    for transno in (11, 12):
        xid, data = c.request("OST_CREATE", [b"\0" * 8 + bytes([transno])])
        events.append(cj.Sent(xid, data, reply(transno=transno, last_committed=10, opc=wire.C("OST_CREATE"))))
        sent.append((xid, transno))
    events.append(cj.Restart())
    xid, data = c.connect()
    events.append(cj.Sent(xid, data, reply(handle=COOKIE, op_flags=CONNECT_REPLY_FLAGS | wire.C("MSG_CONNECT_RECOVERING"),
                                           last_committed=10, opc=wire.C("OST_CONNECT"))))
    for x, transno in reversed(sent):
        _, data = c.request("OST_CREATE", [b"\0" * 8 + bytes([transno])], xid=x, flags=cj.MSG_REPLAY, transno=transno)
        events.append(cj.Sent(x, data, reply(transno=transno, last_committed=10, opc=wire.C("OST_CREATE"))))
    xid, data = c.request("OBD_PING", flags=cj.REQ_REPLAY_DONE | cj.LOCK_REPLAY_DONE)
    events.append(cj.Sent(xid, data, reply(opc=wire.C("OBD_PING"))))
    findings = cj.judge(events)
    assert failures(findings) == {"CLI-REPLAY-2": 6}
    assert findings["CLI-REPLAY-1"].verdict == findings["CLI-REPLAY-3"].verdict == findings["CLI-REPLAY-4"].verdict == "pass"


def _late_create(received: bool) -> list:
    """A create whose reply (transno 11, last committed 10) the target sent late (serve's
    `delay`), then a ping, a restart and a reconnect into recovery; a client that got the late
    reply (`received`) replays transno 11 with its pb_last_xid past the create, one that gave up
    on it resends the create after the replay phase."""
    c, events = connected()
    c.cookie = COOKIE
    xid, data = c.request("OST_CREATE", [b"\0" * 8 + b"\x0b"])
    events.append(cj.Sent(xid, data, None, "delay", reply(transno=11, last_committed=10, opc=wire.C("OST_CREATE"))))
    if not received:
        c.unreplied.add(xid)
    x2, ping = c.request("OBD_PING")
    events.append(cj.Sent(x2, ping, reply(last_committed=10, opc=wire.C("OBD_PING"))))
    events.append(cj.Restart())
    x3, data3 = c.connect()
    events.append(cj.Sent(x3, data3, reply(handle=COOKIE, op_flags=CONNECT_REPLY_FLAGS | wire.C("MSG_CONNECT_RECOVERING"),
                                           last_committed=10, opc=wire.C("OST_CONNECT"))))
    if received:
        _, again = c.request("OST_CREATE", [b"\0" * 8 + b"\x0b"], xid=xid, flags=cj.MSG_REPLAY, transno=11)
        events.append(cj.Sent(xid, again, reply(transno=11, last_committed=10, opc=wire.C("OST_CREATE"))))
    x4, done = c.request("OBD_PING", flags=cj.REQ_REPLAY_DONE | cj.LOCK_REPLAY_DONE)
    events.append(cj.Sent(x4, done, reply(opc=wire.C("OBD_PING"))))
    if not received:
        _, again = c.request("OST_CREATE", [b"\0" * 8 + b"\x0b"], xid=xid, flags=cj.MSG_RESENT)
        events.append(cj.Sent(xid, again, reply(transno=13, last_committed=10, opc=wire.C("OST_CREATE"))))
    return events


@pytest.mark.parametrize("received", [True, False], ids=["received", "given-up"])
def test_a_late_reply_may_have_reached_the_client_or_not(received):
    """A reply serve sent after a delay reaches a Lustre client whose timeout is longer (5 s
    or more with adaptive timeouts): it is then answered (pb_last_xid may pass it, and its
    transno is replayed); or the client gave up on it and resends it.  Both pass.  Before,
    the first was charged to CLI-LASTXID-1, CLI-RESEND-1 and CLI-REPLAY-1."""
    findings = cj.judge(_late_create(received))
    assert not failures(findings), [f.describe() for f in findings.values() if f.verdict == "fail"]
    assert findings["CLI-REPLAY-4"].verdict == "pass"


def test_a_ping_answered_einprogress_is_not_retried_and_the_next_ping_is_new():
    """Lustre never retries a ping after -EINPROGRESS (rq_no_resend): the next ping, the same
    content under a new XID, is a new request, not a retry that lacks MSG_RESENT."""
    c, events = connected()
    c.cookie = COOKIE
    xid, data = c.request("OBD_PING")
    events.append(cj.Sent(xid, data, reply(pb_type=wire.ERR, status=cj.EINPROGRESS, opc=wire.C("OBD_PING")), "einprogress"))
    x2, again = c.request("OBD_PING")
    events.append(cj.Sent(x2, again, reply(opc=wire.C("OBD_PING"))))
    assert not failures(cj.judge(events))


def test_requests_in_flight_when_an_err_enotconn_came_may_reach_the_target_before_the_reconnect():
    """Two requests on their way; the first is answered ERR -ENOTCONN; the second, sent with the
    same count, reaches the target before the reconnect: allowed (ptlrpc_set_import_discon).
    Resending the ERR'd one before the reconnect is not."""
    c, events = connected()
    c.cookie = COOKIE
    xa, a = c.request("OBD_PING")
    xb, b = c.request("OST_STATFS")
    notconn = reply(pb_type=wire.ERR, status=cj.RECOVERABLE[0], opc=wire.C("OBD_PING"))       # -ENOTCONN
    events.append(cj.Sent(xa, a, notconn))
    events.append(cj.Sent(xb, b, reply(pb_type=wire.ERR, status=cj.RECOVERABLE[0], opc=wire.C("OST_STATFS"))))
    x2, again = c.connect()
    events.append(cj.Sent(x2, again, reply(handle=COOKIE, op_flags=CONNECT_REPLY_FLAGS | wire.C("MSG_CONNECT_RECONNECT"),
                                           opc=wire.C("OST_CONNECT"))))
    assert not failures(cj.judge(events))
    early = events[:2] + [cj.Sent(xa, c.request("OBD_PING", xid=xa, flags=cj.MSG_RESENT, conn_cnt=1)[1], None)]
    assert failures(cj.judge(early)) == {"CLI-ERR-1": 2}


def test_a_request_packed_before_a_reconnect_may_arrive_after_it():
    """ptl_send_rpc reads the import's count long before LNet sends: a request packed with the
    old count and a lower XID than the reconnect's may reach the target after it (CLI-CONN-2
    allows it, with the handle it had); one packed after it (a higher XID) may not."""
    c, events = connected()
    c.cookie = COOKIE
    xs, straggler = c.request("OBD_PING")                  # count 1, packed now
    x2, again = c.connect()                                 # count 2
    events.append(cj.Sent(x2, again, reply(handle=COOKIE, op_flags=CONNECT_REPLY_FLAGS | wire.C("MSG_CONNECT_RECONNECT"),
                                           opc=wire.C("OST_CONNECT"))))
    events.append(cj.Sent(xs, straggler, reply(opc=wire.C("OBD_PING"))))
    assert not failures(cj.judge(events))
    xl, late = c.request("OBD_PING", conn_cnt=1)             # a higher XID than the reconnect's
    assert failures(cj.judge(events + [cj.Sent(xl, late, reply(opc=wire.C("OBD_PING")))])) == {"CLI-CONN-2": 3}


def test_a_new_mount_is_a_new_import_with_a_count_of_its_own():
    """An unmount and a new mount in one run: the new mount's OSC has a UUID of its own, and its
    import counts connects from 1 again with no handle (ptlrpc_connect_import_locked): not a
    count that went down (CLI-CONN-2) nor a reconnect without the handle (CLI-CONN-1).  The
    same UUID connecting with a lower count still breaks CLI-CONN-2."""
    c, events = connected()
    c.cookie = COOKIE
    xid, data = c.request("OST_DISCONNECT")
    events.append(cj.Sent(xid, data, reply(opc=wire.C("OST_DISCONNECT"))))
    c.cookie = 0
    xid, data = c.connect()                                  # the same import again: count 2
    events.append(cj.Sent(xid, data, reply(handle=COOKIE + 1, op_flags=CONNECT_REPLY_FLAGS, opc=wire.C("OST_CONNECT"))))
    mount = Client("second-mount", handle=8)
    mount.next_xid = c.next_xid                              # one node: one XID counter
    xid, data = mount.connect()                              # a new import: count 1, no handle
    events.append(cj.Sent(xid, data, reply(handle=COOKIE + 2, op_flags=CONNECT_REPLY_FLAGS, opc=wire.C("OST_CONNECT"))))
    mount.cookie = COOKIE + 2
    xid, data = mount.request("OBD_PING")
    events.append(cj.Sent(xid, data, reply(opc=wire.C("OBD_PING"))))
    assert not failures(cj.judge(events)), [f.describe() for f in cj.judge(events).values() if f.verdict == "fail"]
    c.conn_cnt, c.next_xid, c.cookie = 0, mount.next_xid, COOKIE + 1
    xid, data = c.connect()                                  # the first import, its count gone back to 1
    assert failures(cj.judge(events + [cj.Sent(xid, data, None)])) == {"CLI-CONN-2": 5}


def test_an_unreadable_request_names_its_exchange():
    _, events = connected()
    events.append(cj.Sent(9, b"\x00" * 12, None))
    with pytest.raises(cj.UnreadableRequest, match="exchange 1: the client's request is not a readable lustre_msg_v2"):
        cj.judge(events)


# ---- the model client and the zoo -------------------------------------------------------
@pytest.mark.parametrize("seed", SEEDS)
def test_the_model_client_passes_every_rule(seed):
    findings = cj.judge(converse(ModelClient, seed))
    assert not failures(findings), [f.describe() for f in findings.values() if f.verdict == "fail"]


def test_the_model_client_exercises_every_rule_over_the_seeds():
    passed = set()
    for seed in SEEDS:
        passed |= {rid for rid, f in cj.judge(converse(ModelClient, seed)).items() if f.verdict == "pass"}
    assert passed == set(cj.RULES)


def test_without_faults_the_conversation_has_no_resend_and_no_replay():
    findings = cj.judge(converse(ModelClient, 0, faults=False))
    assert not failures(findings)
    assert {rid for rid, f in findings.items() if f.verdict == "not exercised"} >= {
        "CLI-RESEND-1", "CLI-REPLAY-1", "CLI-REPLAY-2", "CLI-REPLAY-3", "CLI-REPLAY-4", "CLI-ERR-1", "CLI-ERR-2"}


def test_the_zoo_breaks_every_client_requirement_once():
    assert sorted(b.breaks for b in ZOO) == sorted(cj.RULES)


@pytest.mark.parametrize("broken", ZOO, ids=lambda b: b.__name__)
def test_each_broken_client_is_killed_and_charged_to_its_own_requirement(broken):
    killed, others = [], []
    for seed in SEEDS:
        failed = failures(cj.judge(converse(broken, seed)))
        if broken.breaks in failed:
            killed.append(seed)
        others += [(seed, rid) for rid in failed if rid != broken.breaks]
    assert killed, f"{broken.__name__} survives every seed"
    assert not others, f"{broken.__name__} is charged to other requirements: {others}"


def test_after_its_own_disconnect_a_client_connects_as_new():
    """ptlrpc_disconnect_import_end (an idle import's disconnect too) clears the handle: the
    next connect is initial again, with a count above the last."""
    c, events = connected()
    c.cookie = COOKIE
    xid, data = c.request("OST_DISCONNECT")
    events.append(cj.Sent(xid, data, reply(opc=wire.C("OST_DISCONNECT"))))
    c.cookie = 0
    xid, data = c.connect()
    events.append(cj.Sent(xid, data, reply(handle=COOKIE + 1, op_flags=CONNECT_REPLY_FLAGS, opc=wire.C("OST_CONNECT"))))
    findings = cj.judge(events)
    assert not failures(findings) and findings["CLI-CONN-1"].checked == 2


def test_a_replay_under_a_new_xid_is_charged_to_cli_replay_1():
    """ptlrpc_replay_req keeps rq_xid: a replay under an XID no answered request had is not
    the replay of anything."""
    c, events = connected()
    c.cookie = COOKIE
    xid, data = c.request("OST_CREATE", [b"\0" * 8 + b"\x0b"])
    events.append(cj.Sent(xid, data, reply(transno=11, last_committed=10, opc=wire.C("OST_CREATE"))))
    events.append(cj.Restart())
    x2, data = c.connect()
    events.append(cj.Sent(x2, data, reply(handle=COOKIE, op_flags=CONNECT_REPLY_FLAGS | wire.C("MSG_CONNECT_RECOVERING"),
                                          last_committed=10, opc=wire.C("OST_CONNECT"))))
    x3, data = c.request("OST_CREATE", [b"\0" * 8 + b"\x0b"], flags=cj.MSG_REPLAY, transno=11)
    events.append(cj.Sent(x3, data, reply(transno=11, last_committed=10, opc=wire.C("OST_CREATE"))))
    xid, data = c.request("OBD_PING", flags=cj.REQ_REPLAY_DONE | cj.LOCK_REPLAY_DONE)
    events.append(cj.Sent(xid, data, reply(opc=wire.C("OBD_PING"))))
    assert failures(cj.judge(events)) == {"CLI-REPLAY-1": 4}      # the restart is exchange 2


def evicted_then_restarted(replay_the_old: bool) -> list:
    """A create answered with transno 11 (pb_last_committed 10); the client is evicted (a ping
    answered ERR -ENOTCONN, the reconnect answered with a new handle, no
    MSG_CONNECT_RECOVERING); the target restarts; the reconnect finds it recovering; the client
    replays the create (`replay_the_old`) or not, then sends the REPLAY_DONE ping."""
    c, events = connected()
    c.cookie = COOKIE
    body = [b"\0" * 8 + b"\x0b"]
    created, data = c.request("OST_CREATE", body)
    events.append(cj.Sent(created, data, reply(transno=11, last_committed=10, opc=wire.C("OST_CREATE"))))
    xid, data = c.request("OBD_PING")
    events.append(cj.Sent(xid, data, reply(pb_type=wire.ERR, status=cj.RECOVERABLE[0], opc=wire.C("OBD_PING"))))
    x, data = c.connect()
    events.append(cj.Sent(x, data, reply(handle=COOKIE + 1, op_flags=CONNECT_REPLY_FLAGS, last_committed=10,
                                         opc=wire.C("OST_CONNECT"))))
    c.cookie = COOKIE + 1
    events.append(cj.Restart())
    x, data = c.connect()
    events.append(cj.Sent(x, data, reply(handle=COOKIE + 2, op_flags=CONNECT_REPLY_FLAGS | wire.C("MSG_CONNECT_RECOVERING"),
                                         last_committed=10, opc=wire.C("OST_CONNECT"))))
    c.cookie = COOKIE + 2
    if replay_the_old:
        _, data = c.request("OST_CREATE", body, xid=created, flags=cj.MSG_REPLAY, transno=11)
        events.append(cj.Sent(created, data, reply(transno=11, last_committed=10, opc=wire.C("OST_CREATE"))))
    xid, data = c.request("OBD_PING", flags=cj.REQ_REPLAY_DONE | cj.LOCK_REPLAY_DONE)
    events.append(cj.Sent(xid, data, reply(opc=wire.C("OBD_PING"))))
    return events


def test_an_evicted_client_replays_nothing_it_sent_before_the_eviction():
    """ptlrpc_connect_interpret: a new handle outside recovery is an eviction;
    ptlrpc_invalidate_import frees the replay list of the old import generation
    (ptlrpc_abort_inflight, ptlrpc_free_committed).  The create answered before the eviction
    is not expected in the replay after the later restart, and the ping the eviction aborted,
    never sent again, is not waited for."""
    findings = cj.judge(evicted_then_restarted(replay_the_old=False))
    assert not failures(findings), [f.describe() for f in findings.values() if f.verdict == "fail"]
    assert findings["CLI-REPLAY-1"].verdict == findings["CLI-REPLAY-4"].verdict == "pass"
    assert findings["CLI-ERR-1"].verdict == "pass"
    # a replay of it is the replay of nothing the target holds of the client
    assert failures(cj.judge(evicted_then_restarted(replay_the_old=True))) == {"CLI-REPLAY-1": 6}


def two_mounts() -> tuple[Client, Client, list]:
    """Two mounts of one node connected, one after the other: (the first, the second, the
    conversation).  One XID counter: hand it over (next_xid) as the mounts take turns."""
    a, events = connected()
    a.cookie = COOKIE
    b = Client("second-mount", handle=8)
    b.next_xid = a.next_xid
    xb, data = b.connect()
    events.append(cj.Sent(xb, data, reply(handle=COOKIE + 1, op_flags=CONNECT_REPLY_FLAGS, opc=wire.C("OST_CONNECT"))))
    b.cookie, a.next_xid = COOKIE + 1, b.next_xid
    return a, b, events


def test_two_mounts_at_once_are_judged_each_against_its_own_import():
    """Two mounts on one node, their requests interleaved: one XID counter, but each import has
    its own count and its own export handle.  The judge follows the export handle a request
    carries, as the target does (class_conn2export).  A request of one import carrying the
    other's count still breaks CLI-CONN-2."""
    a, b, events = two_mounts()
    xa, ping = a.request("OBD_PING")                           # a's ping, waiting for its reply
    a.unreplied.add(xa)
    b.next_xid = a.next_xid
    for _ in range(2):
        xs, statfs = b.request("OST_STATFS")                   # b knows nothing of a's ping
        events.append(cj.Sent(xs, statfs, reply(opc=wire.C("OST_STATFS"))))
    a.next_xid = b.next_xid
    events.append(cj.Sent(xa, ping, reply(opc=wire.C("OBD_PING"))))
    a.unreplied.discard(xa)
    xr, again = a.connect()                                    # a reconnects: its count 2, b's still 1
    events.append(cj.Sent(xr, again, reply(handle=COOKIE, op_flags=CONNECT_REPLY_FLAGS | wire.C("MSG_CONNECT_RECONNECT"),
                                           opc=wire.C("OST_CONNECT"))))
    b.next_xid = a.next_xid
    xs, statfs = b.request("OST_STATFS")                       # b's count is still 1
    events.append(cj.Sent(xs, statfs, reply(opc=wire.C("OST_STATFS"))))
    findings = cj.judge(events)
    assert not failures(findings), [f.describe() for f in findings.values() if f.verdict == "fail"]
    a.next_xid = b.next_xid
    xw, wrong = b.request("OST_STATFS", conn_cnt=2)             # b with a's count
    assert failures(cj.judge(events + [cj.Sent(xw, wrong, reply(opc=wire.C("OST_STATFS")))])) == {"CLI-CONN-2": 7}


def test_a_mounts_last_xid_counts_only_its_own_requests_awaiting_a_reply():
    """The first mount's ping loses its reply and is resent after a reconnect; meanwhile the
    second mount's request names a last XID at or above the ping's: its own unreplied list
    holds only that request (ptlrpc_known_replied_xid), so that is right.  The same last XID
    from the first mount, whose ping still awaits its reply, breaks CLI-LASTXID-1."""
    a, b, events = two_mounts()
    xa, ping = a.request("OBD_PING")
    events.append(cj.Sent(xa, ping, None, "drop-reply"))
    a.unreplied.add(xa)
    b.next_xid = a.next_xid
    xs, statfs = b.request("OST_STATFS")
    assert wire.parse(statfs, "request").body["pb_last_xid"] >= xa
    events.append(cj.Sent(xs, statfs, reply(opc=wire.C("OST_STATFS"))))
    a.next_xid = b.next_xid
    reconnect_and_resend_ping(a, events, xa)
    findings = cj.judge(events)
    assert not failures(findings), [f.describe() for f in findings.values() if f.verdict == "fail"]
    assert findings["CLI-LASTXID-1"].verdict == "pass"
    wrong = events[:3] + [cj.Sent(xs, a.request("OST_STATFS", xid=xs, last_xid=xa, conn_cnt=1)[1], reply(opc=wire.C("OST_STATFS")))] \
        + events[4:]
    assert failures(cj.judge(wrong)) == {"CLI-LASTXID-1": 3}


def test_a_request_packed_before_its_mount_got_a_new_export_is_that_mounts():
    """The first mount is evicted (ERR -ENOTCONN) and reconnects to a new export, a new handle;
    a request it had packed before, with the old count and handle, reaches the target after a
    request of the second mount.  The old handle is the first mount's (it had it), so the
    request is judged against the first mount's import, as a straggler of its reconnect
    (CLI-CONN-2, CLI-CONN-3), and its ERR is the first mount's to reconnect after, not the
    second's.  And a request of the second mount whose content matches one of the first's
    answered -EINPROGRESS is a new request, not that one's retry (CLI-ERR-2)."""
    a, b, events = two_mounts()
    notconn = reply(pb_type=wire.ERR, status=cj.RECOVERABLE[0], opc=wire.C("OBD_PING"))
    xe, ping = a.request("OBD_PING")
    events.append(cj.Sent(xe, ping, notconn))
    xs, straggler = a.request("OST_STATFS")                     # packed with count 1, handle COOKIE
    xr, again = a.connect()                                      # count 2: evicted, a new export
    events.append(cj.Sent(xr, again, reply(handle=COOKIE + 2, op_flags=CONNECT_REPLY_FLAGS, opc=wire.C("OST_CONNECT"))))
    a.cookie, b.next_xid = COOKIE + 2, a.next_xid
    xq, statfs = b.request("OST_STATFS")
    events.append(cj.Sent(xq, statfs, reply(opc=wire.C("OST_STATFS"))))
    events.append(cj.Sent(xs, straggler, reply(pb_type=wire.ERR, status=cj.RECOVERABLE[0], opc=wire.C("OST_STATFS"))))
    a.next_xid = b.next_xid
    xt, statfs_b = b.request("OST_STATFS")                      # the second mount goes on as before
    events.append(cj.Sent(xt, statfs_b, reply(opc=wire.C("OST_STATFS"))))
    findings = cj.judge(events)
    assert not failures(findings), [f.describe() for f in findings.values() if f.verdict == "fail"]
    # -EINPROGRESS: each import's own retries
    c, d, events = two_mounts()
    xg, getattr_ = c.request("OST_GETATTR", [b"object 1"])
    events.append(cj.Sent(xg, getattr_, reply(pb_type=wire.ERR, status=cj.EINPROGRESS, opc=wire.C("OST_GETATTR"))))
    d.next_xid = c.next_xid
    xo, other = d.request("OST_GETATTR", [b"object 1"])        # the same content, another mount
    events.append(cj.Sent(xo, other, reply(opc=wire.C("OST_GETATTR"))))
    c.next_xid = d.next_xid
    xn, retry = c.request("OST_GETATTR", [b"object 1"], flags=cj.MSG_RESENT)    # the first mount's retry
    events.append(cj.Sent(xn, retry, reply(opc=wire.C("OST_GETATTR"))))
    findings = cj.judge(events)
    assert not failures(findings) and findings["CLI-ERR-2"].verdict == "pass", \
        [f.describe() for f in findings.values() if f.verdict != "pass"]


def test_what_comes_before_the_first_connect_is_the_import_it_names():
    """A request before any connect (a conversation the judge may be given, not one a Lustre
    client starts with) belongs to the import the first connect then names: an ERR -ENOTCONN
    to it is followed by that connect (CLI-ERR-1 passes), as when the judge knew one import."""
    c = Client("hand", handle=7)
    xid, ping = c.request("OBD_PING")
    events = [cj.Sent(xid, ping, reply(pb_type=wire.ERR, status=cj.RECOVERABLE[0], opc=wire.C("OBD_PING")))]
    x2, data = c.connect()
    events.append(cj.Sent(x2, data, reply(handle=COOKIE, op_flags=CONNECT_REPLY_FLAGS, opc=wire.C("OST_CONNECT"))))
    findings = cj.judge(events)
    assert findings["CLI-ERR-1"].verdict == "pass", findings["CLI-ERR-1"].describe()
