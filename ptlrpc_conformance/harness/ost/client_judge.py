"""The client judge: a recorded conversation in, one finding per client rule out.

A conversation is what the suite, playing the target, saw of one client (one node: one XID
counter; one import per mount, told apart by client UUID and export handle): the requests it
sent in order, each with the XID its LNet PUT carried (the match
bits: PtlRPC's XID is not in the message) and what the client got back - the reply bytes
delivered, or nothing (the request or its reply was dropped, delayed past the client's
timeout, or lost to a reset) - and, between them, the target's restarts.  The judge is pure:
no clock, no network, no target.  The rules are the CLI-* requirements of
spec/requirements.yaml (docs/client-rules.md says where Lustre's client code states each).

A finding is `pass` (the rule was checked at least once and held), `fail` (with the index of
the first exchange that breaks it and why) or `not exercised` (nothing in the conversation
let the rule be judged).  The first failure of a rule is kept; later ones are not searched.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.ost import wire

C = spec.constant
MSG_RESENT = C("MSG_RESENT")
MSG_REPLAY = C("MSG_REPLAY")
REQ_REPLAY_DONE = C("MSG_REQ_REPLAY_DONE")
LOCK_REPLAY_DONE = C("MSG_LOCK_REPLAY_DONE")
CONNECT_INITIAL = C("MSG_CONNECT_INITIAL")
CONNECT_RECOVERING = C("MSG_CONNECT_RECOVERING")
CONNECT_RECONNECT = C("MSG_CONNECT_RECONNECT")
CONNECTS = (C("OST_CONNECT"), C("OST_DISCONNECT"))
# requests a Lustre client never retries after -EINPROGRESS (rq_no_resend: ptlrpc_prep_ping,
# ptlrpc_disconnect_prep_req; OST_STATFS may be sent with OBD_STATFS_NODELAY, which gives up):
# the next one is a new request of the same content, not a retry (after_reply, client.c)
NOT_RETRIED = (C("OBD_PING"), C("OST_DISCONNECT"), C("OST_STATFS"))
# ptlrpc_recoverable_error: the statuses after which the client reconnects and resends the
# request with the same XID (ptlrpc_request_handle_notconn)
RECOVERABLE = (-spec.errno_value("ENOTCONN"), -spec.errno_value("ENODEV"))
EINPROGRESS = -spec.errno_value("EINPROGRESS")

RULES = ("CLI-XID-1", "CLI-RESEND-1", "CLI-CONN-1", "CLI-CONN-2", "CLI-CONN-3", "CLI-LASTXID-1",
         "CLI-REPLAY-1", "CLI-REPLAY-2", "CLI-REPLAY-3", "CLI-REPLAY-4", "CLI-ERR-1", "CLI-ERR-2")


class UnreadableRequest(ValueError):
    """A request the suite's reader cannot read: the client's own failure, which whoever runs
    the client reports as such (no CLI-* rule is about a message's framing)."""


@dataclass(frozen=True)
class Sent:
    """One request as the client sent it, and what reached the client back."""
    xid: int                      # the match bits of the request's LNet PUT
    data: bytes                   # the lustre_msg_v2 the client sent
    reply: bytes | None = None    # the reply delivered to the client; None: none reached it
    fault: str = ""               # what the suite did ("", "drop-request", "drop-reply", "delay", "einprogress")
    late: bytes | None = None     # a reply sent after a delay: it reached the client or not, in
                                  # time or not (its timeout is its own: 5 s or more with adaptive
                                  # timeouts, at_est2timeout), so either outcome is allowed


@dataclass(frozen=True)
class Restart:
    """The target restarted with a new incarnation (uncommitted transactions lost)."""


@dataclass
class Finding:
    requirement: str
    verdict: str = "not exercised"        # pass, fail, not exercised
    exchange: int | None = None           # index in the conversation of the first failure
    why: str = ""
    checked: int = 0

    def describe(self) -> str:
        where = f" at exchange {self.exchange}" if self.exchange is not None else ""
        return f"{self.requirement}: {self.verdict}{where}" + (f": {self.why}" if self.why else "")


@dataclass
class _Request:
    index: int
    xid: int
    msg: wire.Message
    reply: wire.Message | None
    late: wire.Message | None = None

    @property
    def opc(self) -> int:
        return self.msg.body["pb_opc"]

    @property
    def content(self) -> tuple:
        """What makes two sends the same request: the operation and its buffers after the
        ptlrpc_body (the body's flags, counts and last XID change from send to send)."""
        return (self.opc, tuple(self.msg.buffers[1:]))

    def flags(self, bits: int) -> bool:
        return self.msg.body["pb_flags"] & bits == bits


@dataclass
class _Judge:
    findings: dict[str, Finding] = field(default_factory=lambda: {r: Finding(r) for r in RULES})

    def ok(self, rid: str) -> None:
        self.findings[rid].checked += 1

    def fail(self, rid: str, index: int, why: str) -> None:
        f = self.findings[rid]
        f.checked += 1
        if f.verdict != "fail":
            f.verdict, f.exchange, f.why = "fail", index, why

    def check(self, rid: str, holds: bool, index: int, why: str) -> None:
        self.ok(rid) if holds else self.fail(rid, index, why)

    def done(self) -> dict[str, Finding]:
        for f in self.findings.values():
            if f.verdict != "fail" and f.checked:
                f.verdict = "pass"
        return self.findings


def _read(events) -> list:
    """The events with every request and reply read by the suite's own reader."""
    out = []
    for i, e in enumerate(events):
        if isinstance(e, Restart):
            out.append(e)
            continue
        msg, err = wire.try_parse(e.data, "request")
        if msg is None:
            raise UnreadableRequest(f"exchange {i}: the client's request is not a readable lustre_msg_v2: {err}")
        rep = wire.try_parse(e.reply, "reply")[0] if e.reply is not None else None
        late = wire.try_parse(e.late, "reply")[0] if e.late is not None and e.reply is None else None
        out.append(_Request(i, e.xid, msg, rep, late))
    return out


def _client_uuid(msg: wire.Message) -> bytes | None:
    """The client UUID an OST_CONNECT names (its buffer 2, up to the NUL), or None."""
    if len(msg.buffers) < 3:
        return None
    return bytes(msg.buffers[2]).split(b"\0", 1)[0] or None


@dataclass
class _Import:
    """What the judge knows of one import of the client (one OSC: one client UUID): its export
    handle, its connect count and what came back to it."""
    handle: int = 0                          # the export handle of its last successful connect reply
    conn_cnt: int | None = None              # pb_conn_cnt of its last connect sent
    before: tuple[int, int, int] | None = None   # (pb_conn_cnt, handle) before that connect, and its
                                             # XID: a request packed then may reach the target after it
                                             # (ptl_send_rpc reads imp_conn_cnt unlocked, long before LNet sends)
    committed: int = 0                       # the highest pb_last_committed delivered
    late_committed: int = 0                  # ... or perhaps delivered, by a late reply
    transnos: dict = field(default_factory=dict)        # xid -> transno its reply gave (uncommitted candidates)
    late_transnos: dict = field(default_factory=dict)   # xid -> transno a late reply gave (replayed or not)
    restarted: bool = False                  # the target restarted since its last reconnect
    recovery: dict | None = None             # the replay phase after a reconnect to a recovering target
    must_reconnect: "_Request | None" = None  # an ERR -ENOTCONN/-ENODEV answered this request
    handles: set = field(default_factory=set)   # every export handle it has had


def judge(events) -> dict[str, Finding]:
    """The findings of every client rule over a conversation (a sequence of Sent and Restart)."""
    j = _Judge()
    events = _read(events)
    requests = [e for e in events if isinstance(e, _Request)]
    later_xids = {}                        # xid -> index of its last send
    for r in requests:
        later_xids[r.xid] = r.index

    xids: dict[int, _Request] = {}          # xid -> its first send
    state: dict[int, str] = {}              # xid -> open, answered, einprogress
    einprogress: dict[tuple, int] = {}       # (import, content) -> XID answered -EINPROGRESS, not yet retried
    imports: dict[bytes | None, _Import] = {}   # client UUID (None: not named) -> its import
    key: bytes | None = None                 # the import of the last request
    owner: dict[int, bytes | None] = {}      # xid -> the import that sent it first

    for e in events:
        if isinstance(e, Restart):
            for each in imports.values():
                each.restarted = True
            continue
        r, body, i = e, e.msg.body, e.index
        is_connect = r.opc == CONNECTS[0]
        # -- the import: a connect names it by its client UUID (a new mount's OSC has one of
        # its own); any other request by the export handle it carries, as the target finds
        # the export (class_conn2export): an import's handle now, else one it had before (a
        # request packed before a reconnect that got a new export), else the import of the
        # request before it
        if is_connect:
            named = _client_uuid(r.msg)
            if named is not None and key is None and None in imports and named not in imports:
                # what came before the first connect that names the import is that import's
                imports[named] = imports.pop(None)
                owner = {x: named if k is None else k for x, k in owner.items()}
                einprogress = {(named if k is None else k, c): x for (k, c), x in einprogress.items()}
            key = named if named is not None else key
        elif body["pb_handle"]:
            key = next((k for k, m in imports.items() if m.handle == body["pb_handle"]),
                       next((k for k, m in imports.items() if body["pb_handle"] in m.handles), key))
        if key not in imports:
            imports[key] = _Import()         # none before a restart: it has nothing to recover
        imp = imports[key]

        # -- CLI-XID-1, CLI-RESEND-1, CLI-ERR-2: what a send with a known XID may be
        first = xids.get(r.xid)
        if first is None:
            xids[r.xid] = r
            owner[r.xid] = key
            state[r.xid] = "open"
            j.ok("CLI-XID-1")
            retried = einprogress.pop((key, r.content), None)
            if retried is not None and r.opc in NOT_RETRIED:
                retried = None                  # never retried: a new request of the same content
            if retried is not None:
                j.check("CLI-ERR-2", r.flags(MSG_RESENT), i,
                        f"the retry of XID {retried:#x} (answered -EINPROGRESS) has a new XID but no "
                        f"MSG_RESENT (flags {body['pb_flags']:#x})")
        elif first.content != r.content:
            j.fail("CLI-XID-1", i, f"a new request ({wire.TYPE_NAME.get(body['pb_type'], '?')} opc {r.opc}) "
                                   f"reuses XID {r.xid:#x} of the request sent at exchange {first.index}")
        elif einprogress.get((key, r.content)) == r.xid:
            del einprogress[(key, r.content)]
            state[r.xid] = "open"               # sent again, it awaits a reply again
            j.fail("CLI-ERR-2", i, f"the retry after -EINPROGRESS keeps XID {r.xid:#x}: Lustre gives it a new one")
        elif state[r.xid] in ("answered", "late") and r.flags(MSG_RESENT) and not r.flags(MSG_REPLAY):
            # a resend of a request whose reply the target sent: the reply may have come after
            # the client's deadline, when its buffer was already unlinked (ptlrpc_expire_one_request,
            # ptlrpc_unregister_reply), so the client still awaited it: a resend like any other
            j.ok("CLI-XID-1")
            state[r.xid] = "open"
        elif state[r.xid] != "open" and not r.flags(MSG_REPLAY):
            j.fail("CLI-XID-1", i, f"XID {r.xid:#x} was answered at or after exchange {first.index} "
                                   f"and is sent again without MSG_REPLAY or MSG_RESENT")
        elif state[r.xid] == "open":
            j.check("CLI-RESEND-1", r.flags(MSG_RESENT), i,
                    f"XID {r.xid:#x} (first sent at exchange {first.index}, no reply reached the client) "
                    f"is sent again without MSG_RESENT (flags {body['pb_flags']:#x})")

        # -- CLI-CONN-1, CLI-CONN-2, CLI-CONN-3: connects, their count and the export handle
        if is_connect:
            initial = bool(body["pb_op_flags"] & CONNECT_INITIAL)
            if imp.handle:
                j.check("CLI-CONN-1", not initial and body["pb_handle"] == imp.handle, i,
                        f"a reconnect must carry the export handle {imp.handle:#x} and no MSG_CONNECT_INITIAL; "
                        f"it has pb_handle {body['pb_handle']:#x}, op_flags {body['pb_op_flags']:#x}")
            else:
                j.check("CLI-CONN-1", initial and body["pb_handle"] == 0, i,
                        f"a first connect must carry MSG_CONNECT_INITIAL and no handle; it has pb_handle "
                        f"{body['pb_handle']:#x}, op_flags {body['pb_op_flags']:#x}")
            if imp.conn_cnt is not None:
                # one more per attempt; an attempt that failed before sending counted too
                j.check("CLI-CONN-2", body["pb_conn_cnt"] > imp.conn_cnt, i,
                        f"the connect after one with pb_conn_cnt {imp.conn_cnt} carries {body['pb_conn_cnt']}, "
                        f"not more")
            imp.before = (imp.conn_cnt, imp.handle, r.xid) if imp.conn_cnt is not None else None
            imp.conn_cnt = body["pb_conn_cnt"]
        elif imp.conn_cnt is not None:
            # XIDs are given as requests are sent for the first time: one packed before the
            # connect has a lower XID than the connect's
            straggler = (imp.before is not None and body["pb_conn_cnt"] == imp.before[0] != imp.conn_cnt
                         and r.xid < imp.before[2])
            j.check("CLI-CONN-2", body["pb_conn_cnt"] == imp.conn_cnt or straggler, i,
                    f"pb_conn_cnt {body['pb_conn_cnt']} is not {imp.conn_cnt}, the count of the last connect"
                    + (f" (nor {imp.before[0]}, that of the one before it)" if imp.before else ""))
            j.check("CLI-CONN-3", body["pb_handle"] == (imp.before[1] if straggler else imp.handle), i,
                    f"pb_handle {body['pb_handle']:#x} is not the export handle {imp.handle:#x} of the last "
                    f"connect reply")

        if r.opc == CONNECTS[1]:
            imp.handle = 0                          # the disconnect clears the import's remote handle

        # -- CLI-LASTXID-1: 0 on a connect; else below every XID still awaiting its reply
        if r.opc in CONNECTS:
            j.check("CLI-LASTXID-1", body["pb_last_xid"] == 0, i,
                    f"a connect or disconnect carries pb_last_xid {body['pb_last_xid']:#x}, not 0")
        else:
            # pb_last_xid comes from the import's own unreplied list (ptlrpc_known_replied_xid)
            waiting = [x for x, s in state.items() if s == "open" and later_xids[x] > i and owner[x] == key
                       or x == r.xid]
            low = min(waiting)
            j.check("CLI-LASTXID-1", body["pb_last_xid"] < low, i,
                    f"pb_last_xid {body['pb_last_xid']:#x} is not below XID {low:#x}, which still awaits its reply")

        # -- CLI-ERR-1: after ERR -ENOTCONN/-ENODEV the next request is a connect, but for
        # requests already on their way when the ERR came (ptlrpc_set_import_discon reconnects
        # for the first ERR only; the target may read the others after it)
        if imp.must_reconnect is not None:
            # on its way: a first send (a new XID), never a resend, with the count the ERR'd one had
            in_flight = (not is_connect and first is None and not r.flags(MSG_RESENT)
                         and body["pb_conn_cnt"] == imp.must_reconnect.msg.body["pb_conn_cnt"])
            if not in_flight:
                j.check("CLI-ERR-1", is_connect, i,
                        f"after ERR {imp.must_reconnect.reply.status} to exchange {imp.must_reconnect.index} "
                        f"the client sends opc {r.opc} (pb_conn_cnt {body['pb_conn_cnt']}) before reconnecting")
                imp.must_reconnect = None

        # -- CLI-REPLAY-*: the replay phase after a reconnect to a recovering target
        replay = r.flags(MSG_REPLAY)
        if imp.recovery is not None and not is_connect:
            done = r.flags(REQ_REPLAY_DONE | LOCK_REPLAY_DONE)
            if replay:
                t = body["pb_transno"]
                given = imp.transnos.get(r.xid, imp.late_transnos.get(r.xid))
                original = xids[r.xid] if given is not None else None
                if t <= imp.recovery["committed"]:
                    j.fail("CLI-REPLAY-3", i, f"replays transno {t:#x}, which pb_last_committed "
                                              f"{imp.recovery['committed']:#x} covered")
                else:
                    j.ok("CLI-REPLAY-3")
                    j.check("CLI-REPLAY-2", t >= imp.recovery["last"], i,
                            f"replays transno {t:#x} after transno {imp.recovery['last']:#x}")
                    imp.recovery["last"] = max(imp.recovery["last"], t)
                if original is not None:
                    j.check("CLI-REPLAY-1", t == given, i,
                            f"the replay of XID {r.xid:#x} carries transno {t:#x}, its reply gave "
                            f"{given:#x}")
                else:
                    j.fail("CLI-REPLAY-1", i, f"a replay under XID {r.xid:#x}, which no request answered with "
                                              f"a transno had: a replay keeps its request's XID")
                imp.recovery["replayed"].add(t)
            elif done:
                missing = sorted(imp.recovery["expected"] - imp.recovery["replayed"])
                j.check("CLI-REPLAY-1", not missing, i,
                        f"MSG_REQ_REPLAY_DONE without replaying transnos {[hex(t) for t in missing]}")
                j.ok("CLI-REPLAY-4")
                imp.recovery = None
            else:
                j.fail("CLI-REPLAY-4", i, f"opc {r.opc} (flags {body['pb_flags']:#x}) is sent during replay, "
                                          f"before MSG_REQ_REPLAY_DONE | MSG_LOCK_REPLAY_DONE")
                imp.recovery = None             # the client has left its replay phase
        elif replay and imp.recovery is None and not is_connect:
            j.fail("CLI-REPLAY-4", i, "MSG_REPLAY outside a recovery (after MSG_REQ_REPLAY_DONE or without "
                                      "a reconnect to a recovering target)")

        # -- what came back
        rep = r.reply
        if rep is None and r.late is not None and not is_connect and state.get(r.xid) == "open":
            # a late reply: the client may have had it (then it replays its transno, and knows
            # its last committed) or not (then the request is still unanswered)
            state[r.xid] = "late"
            lb = r.late.body
            if lb["pb_type"] == wire.REPLY and r.late.status != EINPROGRESS:
                imp.late_committed = max(imp.late_committed, lb["pb_last_committed"])
                if lb["pb_transno"] and not replay:
                    imp.late_transnos[r.xid] = lb["pb_transno"]
        if rep is None:
            continue
        rb = rep.body
        if rep.body["pb_type"] == wire.ERR and rep.status in RECOVERABLE and not is_connect:
            # the XID stays open: the request is resent after recovery.  A replay or the
            # MSG_REQ_REPLAY_DONE ping (not sent in LUSTRE_IMP_FULL) is left to its own
            # interpret callback, which is not judged here
            if not r.flags(MSG_REPLAY) and not body["pb_flags"] & (REQ_REPLAY_DONE | LOCK_REPLAY_DONE):
                imp.must_reconnect = r
            continue
        if rep.status == EINPROGRESS:
            state[r.xid] = "einprogress"
            einprogress[(key, r.content)] = r.xid
            continue
        state[r.xid] = "answered"
        imp.committed = max(imp.committed, rb["pb_last_committed"])
        if rb["pb_transno"] and not replay:
            imp.transnos[r.xid] = rb["pb_transno"]
        if is_connect and rb["pb_type"] == wire.REPLY and rep.status == 0 and rb["pb_handle"]:
            if rb["pb_handle"] != imp.handle and not rb["pb_op_flags"] & CONNECT_RECOVERING:
                # a new export outside recovery: the target holds nothing of the client.  An
                # evicted client frees its replays (import.c: ptlrpc_connect_interpret sets
                # LUSTRE_IMP_EVICTED; ptlrpc_invalidate_import: ptlrpc_abort_inflight fails the
                # requests in flight, ptlrpc_free_committed frees those of the old import
                # generation); one found holding no data (IMPF_NO_CACHED_DATA) has none
                imp.transnos.clear()
            imp.handle = rb["pb_handle"]
            imp.handles.add(imp.handle)
            # a reconnect to a target that restarted begins the replay phase; one to a target
            # still recovering while the client replays goes on with it (ptlrpc_connect_interpret)
            if imp.restarted and imp.recovery is None and rb["pb_op_flags"] & CONNECT_RECOVERING:
                # owed: what the client surely holds uncommitted (a late reply's last committed
                # may have reached it); it may also replay a late reply's transno
                expected = {t for t in imp.transnos.values() if t > max(imp.committed, imp.late_committed)}
                imp.recovery = {"committed": imp.committed, "expected": expected, "replayed": set(), "last": 0}
                imp.restarted = False
    if any(m.recovery is not None for m in imports.values()):
        j.fail("CLI-REPLAY-4", len(events) - 1, "the conversation ends in replay: no MSG_REQ_REPLAY_DONE "
                                                "| MSG_LOCK_REPLAY_DONE was sent")
    return j.done()
