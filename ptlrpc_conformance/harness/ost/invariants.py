"""Invariants of a target's replies that hold whatever the client meant: the checks that
`check-trace` runs over a recorded exchange and that every target case runs after every
step (docs/target-rules.md §6).

The checker sees a stream of (client, xid, request, reply) records.  It knows nothing of
what a client intended, so it flags only what is wrong for *any* request: a reply to a
request that must be dropped, an ERR that carries a transno, a transno that does not
increase, a resent transaction answered differently, and so on.  What a broken request
should have been answered with is the business of the suite that broke it.

A live run (the suites) sees every exchange from the target's reset and drives every expiry
of the recovery window, so its checker is strict.  A trace (check-trace) does not: a target
evicts clients in ways no exchange shows (a lock callback timeout, the ping evictor, the end or
abort of recovery), and a trace may begin long after the target did.  Its checker
(`sees_all=False`) allows what those unseen events make possible and says so in `notes`,
never as a violation.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.ost.wire import ERR, REPLY, Message

C = spec.constant


@functools.lru_cache(maxsize=1)
def target_facts() -> dict:
    return spec.target()


def reconstructed(original: Message, rep: Message | None) -> bool:
    """The reply claims to be the original one (its transno, non-zero, again)."""
    return rep is not None and original.body["pb_transno"] != 0 and rep.body["pb_transno"] == original.body["pb_transno"]


def original_under_new_transno(original: Message, rep: Message | None) -> bool:
    """The reply is the original one (type, status, buffers) under another transno: a resend
    half reconstructed, half run again."""
    return (rep is not None and rep.body["pb_transno"] != original.body["pb_transno"]
            and rep.body["pb_type"] == original.body["pb_type"] and rep.status == original.status
            and rep.buffers[1:] == original.buffers[1:])


def resend_problems(original: Message, rep: Message | None, reconstruct: bool) -> list[tuple[str, str]]:
    """(rule, message) for a resend of a request whose original reply ran a transaction:
    the original reply again, or (unless `reconstruct`) a run as a new request — never a mix."""
    if rep is None:
        return [("TGT-RESEND-1", "a resend of a request that ran a transaction got no reply")]
    if reconstructed(original, rep):
        out = []
        for name, a, b in (("pb_type", original.body["pb_type"], rep.body["pb_type"]),
                           ("pb_status", original.status, rep.status)):
            if a != b:
                out.append(("TGT-RESEND-1", f"the resend's reply repeats the original transno {rep.body['pb_transno']:#x} "
                                            f"but its {name} is {b}, the original's {a}"))
        if original.buffers[1:] != rep.buffers[1:]:
            out.append(("TGT-RESEND-1", "the resend's reply repeats the original transno but its buffers differ"))
        return out
    if reconstruct:
        return [("TGT-RESEND-2", f"the resend was run again (transno {rep.body['pb_transno']:#x}, status {rep.status}) "
                                 f"instead of answered with the original reply (transno {original.body['pb_transno']:#x})")]
    return []


def _opcodes() -> dict[int, dict]:
    return {C(name): dict(row, name=name) for name, row in target_facts()["opcodes"].items()}


def _errno(name: str) -> int:
    return -spec.errno_value(name)


@dataclass
class Violation:
    record: int           # 1-based position of the record in the stream
    rule: str             # requirement id
    message: str
    client: str = ""
    xid: int = 0

    def __str__(self) -> str:
        return f"record {self.record} (client {self.client}, xid {self.xid}): {self.rule}: {self.message}"


@dataclass
class Note:
    """Something a trace checker allowed because it cannot tell: an outcome that only an event
    the trace does not show (an eviction, the history before the trace) makes possible."""
    record: int
    message: str
    client: str = ""
    xid: int = 0

    def __str__(self) -> str:
        return f"record {self.record} (client {self.client}, xid {self.xid}): {self.message}"


UNSEEN_EVICTION = ("evicted in a way a trace does not show (a lock callback timeout, the ping evictor, "
                   "the end or abort of recovery)")


@dataclass
class _Export:
    cookie: int
    conn_cnt: int
    flags: int = 0
    flags2: int = 0
    generation: int = 0


@dataclass
class TargetChecker:
    """Feed records with `observe`; call `restart()` / `recovery_ended()` when the driver
    knows of those events (a trace checker infers a restart from MSG_CONNECT_RECOVERING, and
    the end of recovery from a successful connect reply without it)."""
    max_transno: int = 0
    epoch_floor: int = 0                 # every new transno must exceed it (after recovery)
    recovering: bool = False
    recovery_floor: int = 0              # during recovery a non-replay transno must exceed it
    _restart_epoch: int | None = None
    exports: dict[str, _Export] = field(default_factory=dict)       # client -> live export
    # cookies known gone -> the requirement that says they are gone (a request naming one that
    # is served breaks it: RCV-OUTSIDE-1 for an eviction by a replay outside recovery, else TGT-CONN-2)
    dead: dict[int, str] = field(default_factory=dict)
    committed: dict[tuple[str, int], int] = field(default_factory=dict)   # export -> lc of settled replies
    originals: dict[tuple[str, int], Message] = field(default_factory=dict)
    generations: dict[str, int] = field(default_factory=dict)
    count: int = 0
    reconstruct: bool = False            # profile lustre-2.17.57-reconstruct: TGT-RESEND-2
    recovery_disabled: bool = False      # the target runs with recovery disabled: no REPLAYABLE, no transnos
    unmodelled: int = 0                  # exchanges of opcodes the rules do not model (not judged on transnos)
    settled_max: int = 0                 # the highest transno of a reply captured before the current request
    issued: set[int] = field(default_factory=set)                   # non-replay transnos issued (distinctness)
    _pending: list = field(default_factory=list)                    # (answered_at, transno, export, lc) not settled yet
    # False: the checker of a trace (module docstring): unseen evictions and history are allowed, and noted
    sees_all: bool = True
    notes: list[Note] = field(default_factory=list)
    _noted: set = field(default_factory=set)                        # keys of the notes made
    # clients whose current export the checker saw created (a connect without RECONNECT or
    # RECOVERING): every transno of theirs is in the trace; and clients whose export it did
    # not see created -> when their connect reply was captured (their last committed values
    # may be transnos from before the trace, until a transno issued after it bounds them)
    _history_seen: set[str] = field(default_factory=set)
    _history_unseen: dict[str, int] = field(default_factory=dict)
    # recovery as a trace shows it: clients that reconnected with MSG_CONNECT_RECOVERING since
    # the restart, those that sent MSG_LOCK_REPLAY_DONE, those seen gone (ERR -ENOTCONN), those
    # an expiry of the window may have evicted; `_ends_at`: recovery is over for requests sent
    # after this time (a final ping was answered)
    _reconnected: set[str] = field(default_factory=set)
    _finished: set[str] = field(default_factory=set)
    _gone: set[str] = field(default_factory=set)
    _maybe_gone: set[str] = field(default_factory=set)
    _ends_at: int | None = None
    release: str | None = None           # the Lustre release whose rules apply (None: the session's)

    def __post_init__(self):
        facts = target_facts()
        self.ops = _opcodes()
        self.reply_statuses = {_errno(n) for n in facts["reply_statuses"]}
        from ptlrpc_conformance.harness.verdicts import release as release_rules
        self.release = self.release or release_rules.active()
        if not release_rules.behaviour(self.release, "erofs_sent_as_reply"):
            self.reply_statuses.discard(_errno("EROFS"))      # before 2.16 ptlrpc_send_error sends it as ERR
        self.transaction_ops = {o for o, row in self.ops.items() if row["transno"] == "yes"}
        self.create_op = C("OST_CREATE")
        self.connect_op = C("OST_CONNECT")
        self.disconnect_op = C("OST_DISCONNECT")
        self.mutable_ops = {o for o, row in self.ops.items() if row["mutable"]}
        self.unmodelled_ops = {C(name) for name in facts.get("unmodelled_opcodes", {})}
        enotconn = facts["enotconn_reply"]
        self.enotconn_reply_services = set(enotconn["services"])
        self.enotconn_reply_ops = {C(name) for name in enotconn["opcodes"]}
        self.enotconn_either_ops = {C(name) for name in enotconn["either"]}

    # -- events the driver knows of --------------------------------------------------------
    def restart(self, commit_point: int | None = None) -> None:
        """The target restarted.  `commit_point`: the highest transno on stable storage, when
        the target said so; every last-committed value a client was sent is at or below it."""
        self.recovering = True
        self._restart_epoch = self.max_transno >> 32
        told = max(self.committed.values(), default=0)
        self.recovery_floor = max(commit_point or 0, told)
        for exp in self.exports.values():      # a restarted target forgets every cookie
            self.dead[exp.cookie] = "TGT-CONN-2"
        self.exports.clear()
        for kept in (self._reconnected, self._finished, self._gone, self._maybe_gone):
            kept.clear()
        self._ends_at = None

    def recovery_ended(self) -> None:
        if self.recovering and self._restart_epoch is not None:
            self.epoch_floor = max(self.epoch_floor, (self._restart_epoch + 1) << 32)
        self.recovering = False
        self._ends_at = None

    def _replaying(self) -> set[str]:
        """Clients that reconnected during this recovery and may still be replaying."""
        return self._reconnected - self._finished - self._gone

    def expired(self) -> bool:
        """The recovery window expired once (the testee protocol's end_recovery; a trace's
        `recovery_expiry` event).  Lustre's target_recovery_overseer then evicts the clients
        that have not reconnected and either extends the window for the others or, at its hard
        limit, evicts every client that has not finished and ends recovery: so a client still
        replaying may be found evicted from now on.  True if recovery is over (no such client
        is left): the driver ends it (`recovery_ended`) once it has judged the replies the
        expiry released.  Otherwise a later expiry, an answered final ping or a connect served
        without MSG_CONNECT_RECOVERING tells that it is."""
        if not self.recovering:
            return False
        left = self._replaying()
        self._maybe_gone |= left
        return not left

    # -- records --------------------------------------------------------------------------
    def _note(self, key: tuple, n: int, client: str, xid: int, message: str) -> None:
        """Say once per `key` (what was allowed, and of which export) what the checker allowed."""
        if key not in self._noted:
            self._noted.add(key)
            self.notes.append(Note(n, message, client, xid))

    def _settle(self, now: int) -> None:
        """Replies captured before `now` (a request's send time) are known to that request."""
        if self._ends_at is not None and self._ends_at < now:
            self.recovery_ended()       # seen over (a final ping answered, a connect served without
            #                             MSG_CONNECT_RECOVERING) before this request was sent
        keep = []
        for answered_at, transno, key, lc in self._pending:
            if answered_at < now:
                self.settled_max = max(self.settled_max, transno)
                if key is not None and lc:
                    self.committed[key] = max(self.committed.get(key, 0), lc)
            else:
                keep.append((answered_at, transno, key, lc))
        self._pending = keep

    def observe(self, client: str, xid: int, request: bytes, reply: bytes | None,
                record: int | None = None, sent_at: int | None = None, answered_at: int | None = None,
                ceiling: int | None = None, infer_recovery: bool = True,
                portal: int | None = None) -> list[Violation]:
        """Judge one exchange.  `sent_at`, `answered_at`: when the request and its reply were
        captured (real traffic: several requests in flight); without them exchanges are one
        at a time.  Transno order and last_committed growth are judged only against replies
        captured before the request was sent.  `ceiling`: the highest transno of any request
        sent before this reply (default: the highest seen so far).  `infer_recovery` False: a
        connect reply does not change what the checker believes of recovery (a driver whose
        own expectation rejected that reply: a wrong MSG_CONNECT_RECOVERING is charged there,
        and the replies after it are judged by the state the driver knows).  `portal`: the
        request portal, when the record names it (the service that answered)."""
        self.count += 1
        n = record if record is not None else self.count
        now = sent_at if sent_at is not None else self.count
        done = answered_at if answered_at is not None else now
        self._settle(now)
        out: list[Violation] = []

        def flag(rule: str, message: str) -> None:
            out.append(Violation(n, rule, message, client, xid))

        def note(key: tuple, message: str) -> None:
            self._note(key, n, client, xid, message)

        req, why = wire.try_parse(request, "request")
        if req is None:
            if reply is not None:
                flag("TGT-DROP-1", f"the request does not unpack ({why}) yet it was answered")
            return out
        b = req.body
        opc = b["pb_opc"]
        flags = b["pb_flags"]
        if self.recovering and flags & C("MSG_LOCK_REPLAY_DONE"):
            self._finished.add(client)
        exp = self.exports.get(client)
        live = exp is not None and b["pb_handle"] == exp.cookie
        # rows 3, 4 and 5 of docs/target-rules.md §2, in that order (ptlrpc_check_req runs
        # before the adaptive-timeout drop)
        must_drop = outside = None
        drop_rule = "TGT-DROP-1"
        if live and b["pb_conn_cnt"] < exp.conn_cnt:
            must_drop = f"pb_conn_cnt {b['pb_conn_cnt']} is below the export's {exp.conn_cnt}"
            drop_rule = "TGT-CONN-2"
        elif live and not self.recovering and (flags & (C("MSG_REPLAY") | C("MSG_REQ_REPLAY_DONE")) or b["pb_transno"]):
            outside = True
        elif req.header["lm_flags"] & wire.AT_SUPPORT and b["pb_timeout"] == 0:
            must_drop = "MSGHDR_AT_SUPPORT with pb_timeout 0"
        if reply is None:
            if outside:
                self._evict(client, "RCV-OUTSIDE-1")
            return out
        rep, why = wire.try_parse(reply, "reply")
        if rep is None:
            flag("TGT-REPLY-1", f"the reply does not unpack: {why}")
            return out
        if must_drop:
            flag(drop_rule, f"{must_drop}: the request must be dropped, it was answered {rep.type_name}")
            return out
        r = rep.body
        if r["pb_opc"] != opc:
            flag("TGT-REPLY-1", f"the reply's pb_opc is {r['pb_opc']}, the request's {opc}")
        status, transno, committed = rep.status, r["pb_transno"], r["pb_last_committed"]
        # a target that is stopping or failing over (OBDF_FAIL) turns the reply it had packed
        # into ERR -ENODEV, transno and last committed value included (ptlrpc_send_reply): a
        # trace may hold such replies; a live run never stops its target while it waits for one
        forced = (not self.sees_all and r["pb_type"] == ERR and status == _errno("ENODEV")
                  and bool(transno or committed))

        # -- error type -------------------------------------------------------------------
        if r["pb_type"] == ERR:
            if status >= 0:
                flag("TGT-ERR-3", f"an ERR reply with status {status}: ERR statuses are negative")
            elif status in self.reply_statuses:
                flag("TGT-ERR-3", f"status {status} ({spec.errno_name(-status)}) is sent as REPLY, never ERR")
            if forced:
                note(("forced-enodev",), f"ERR -ENODEV carrying pb_transno {transno:#x} and pb_last_committed "
                                         f"{committed:#x}: allowed, as a target that is stopping or failing over "
                                         "answers so on the reply it had already packed (ptlrpc_send_reply); "
                                         "its transno still counts for transno order")
            else:
                if transno:
                    flag("TGT-ERR-1", f"an ERR reply carries pb_transno {transno:#x}")
                if committed:
                    flag("TGT-ERR-1", f"an ERR reply carries pb_last_committed {committed:#x}")

        # -- handles and connections ------------------------------------------------------
        if opc == self.connect_op:
            self._connect(client, req, rep, exp, flag, infer_recovery, note, done)
        else:
            if r["pb_handle"]:
                flag("TGT-CONN-1", f"pb_handle {r['pb_handle']:#x} in a reply to opcode {opc}: only connect replies set it")
            if live and not self.sees_all and r["pb_type"] == ERR and status == _errno("ENOTCONN"):
                # the target no longer knows the export: evicted, unseen (or at an expiry of
                # the recovery window the trace shows: no note then)
                if client not in self._maybe_gone:
                    what = (f"a replay (pb_flags {flags:#x}, pb_transno {b['pb_transno']:#x}) outside recovery"
                            if outside else f"opcode {opc}")
                    note(("evicted", exp.cookie),
                         f"cannot tell: ERR -ENOTCONN to {what} naming export {exp.cookie:#x}: the target no "
                         f"longer knows it, so it was {UNSEEN_EVICTION}"
                         + ("; had it not been, ERR -ENODEV and an eviction were due (RCV-OUTSIDE-1)" if outside else ""))
                self._gone.add(client)
                self._evict(client, "TGT-CONN-2")
            elif not live and (b["pb_handle"] == 0 or b["pb_handle"] in self.dead):
                if status != _errno("ENOTCONN"):
                    flag(self.dead.get(b["pb_handle"], "TGT-CONN-2"), f"pb_handle {b['pb_handle']:#x} names no export: expected ERR -ENOTCONN, got {rep.type_name} {status}")
                else:
                    want = self._enotconn_type(opc, portal)
                    if want == ERR and r["pb_type"] != ERR:
                        flag("TGT-ERR-1", f"pb_handle {b['pb_handle']:#x} names no export: -ENOTCONN is an early rejection, sent as ERR, not {rep.type_name}")
                    elif want == REPLY and r["pb_type"] != REPLY:
                        flag("TGT-ERR-1", f"pb_handle {b['pb_handle']:#x} names no export: the LDLM cancel service sends "
                                          f"-ENOTCONN as REPLY (ldlm_cancel_handler, ldlm_callback_reply), not {rep.type_name}")
            elif outside:
                if status != _errno("ENODEV"):
                    flag("RCV-OUTSIDE-1", f"a replay (pb_flags {flags:#x}, pb_transno {b['pb_transno']:#x}) outside recovery: expected ERR -ENODEV and eviction, got {rep.type_name} {status}")
                elif r["pb_type"] != ERR:
                    flag("TGT-ERR-1", f"a replay outside recovery: -ENODEV is an early rejection, sent as ERR, not {rep.type_name}")
                self._evict(client, "RCV-OUTSIDE-1")
                return out
            if live and opc == self.disconnect_op and r["pb_type"] == REPLY and status == 0:
                self._evict(client, "TGT-CONN-2")

        # -- transnos ---------------------------------------------------------------------
        key = (client, xid)
        original = self.originals.get(key)
        resent = bool(flags & C("MSG_RESENT"))
        replay = bool(flags & C("MSG_REPLAY"))
        modelled = opc in self.ops
        if not modelled and opc != self.connect_op:
            self.unmodelled += 1
        if resent and original is not None and original.body["pb_transno"]:
            for rule, message in resend_problems(original, rep, self.reconstruct):
                flag(rule, message)
            rerun = not reconstructed(original, rep)
        else:
            rerun = False
        if resent and original is not None and original.body["pb_transno"] and not rerun:
            pass                          # the original reply again: judged above
        elif replay or (self.recovering and b["pb_transno"]):
            # a replay (Lustre treats any request with a non-zero pb_transno as one)
            if transno not in (0, b["pb_transno"]):
                flag("RCV-REPLAY-1", f"a replay of transno {b['pb_transno']:#x} answered with transno {transno:#x} (must be the same, or 0)")
            if self.recovering and transno:
                self.recovery_floor = max(self.recovery_floor, transno)
        elif transno:
            # a transno issued while the trace ran: every earlier transno of a client whose
            # export the checker did not see created is below it
            for other, since in list(self._history_unseen.items()):
                if since < now:
                    del self._history_unseen[other]
                    self._history_seen.add(other)
            if self.recovering:
                # a change served at once during recovery: above the commit point and every
                # replay run so far, not necessarily above every transno issued before
                if transno <= self.recovery_floor:
                    flag("TGT-TRANSNO-1", f"transno {transno:#x} of a change served during recovery is not above "
                                          f"{self.recovery_floor:#x} (the commit point at the restart, the last committed "
                                          f"values clients were told, and the transnos run since)")
                self.recovery_floor = max(self.recovery_floor, transno)
            else:
                if transno <= self.settled_max:
                    flag("TGT-TRANSNO-1", f"transno {transno:#x} is not above {self.settled_max:#x}, the highest issued before")
                elif transno in self.issued:
                    flag("TGT-TRANSNO-1", f"transno {transno:#x} was issued before (to an overlapping exchange)")
                self.issued.add(transno)
            if self.epoch_floor and transno <= self.epoch_floor:
                flag("RCV-EPOCH-1", f"transno {transno:#x} after recovery is not in a new epoch (must exceed {self.epoch_floor:#x})")
            if modelled and not forced and not self._may_take_transno(client, opc, req, rep):
                flag("TGT-TRANSNO-2", f"transno {transno:#x} on a {rep.type_name} with status {status} to opcode {opc}, which runs no transaction")
        elif modelled and r["pb_type"] == REPLY and status == 0 and opc in self.transaction_ops \
                and not self.recovery_disabled:
            flag("TGT-TRANSNO-2", f"a successful opcode {opc} ran a transaction but the reply's transno is 0")
        self.max_transno = max(self.max_transno, transno)
        if opc in self.mutable_ops and r["pb_type"] == REPLY and original is None:
            self.originals[key] = rep

        # -- last committed ---------------------------------------------------------------
        gen_key = (client, self.generations.get(client, 0))
        if r["pb_type"] == REPLY and committed:
            top = self.max_transno if ceiling is None else max(ceiling, self.max_transno)
            if committed > top and not self.sees_all and client in self._history_unseen:
                note(("history", client, self.generations.get(client, 0)),
                     f"cannot tell: pb_last_committed {committed:#x} is above every transno the trace shows "
                     f"({f'{top:#x}' if top else 'none yet'}); the checker did not see client {client}'s export "
                     "created, so it may be a transaction of the client's from before the trace began (a "
                     "reconnect is told the export's last committed transno, after a restart the one "
                     "last_rcvd holds)")
            elif committed > top:
                flag("TGT-TRANSNO-3", f"pb_last_committed {committed:#x} is above the highest transno issued, {top:#x}")
            before = self.committed.get(gen_key, 0)
            if committed < before:
                flag("TGT-TRANSNO-3", f"pb_last_committed went back from {before:#x} to {committed:#x}")
        self._pending.append((done, transno, gen_key if r["pb_type"] == REPLY else None, committed))
        if (not self.sees_all and self.recovering and flags & C("MSG_LOCK_REPLAY_DONE") and r["pb_type"] == REPLY
                and status == 0 and not self._replaying()):
            # final pings are answered once recovery is over (target_recovery_thread): it is,
            # for the requests sent after this reply
            self._ends_at = done if self._ends_at is None else min(self._ends_at, done)
        if sent_at is None:
            self._settle(self.count + 1)
        return out

    def _may_take_transno(self, client: str, opc: int, req: Message, rep: Message) -> bool:
        """A REPLY 0 of this opcode may carry a new transno (docs/target-rules.md §5): SETATTR,
        PUNCH, DESTROY; CREATE only with OBD_CONNECT2_REPLAY_CREATE in force (the checker does
        not know LAST_ID, so it never demands one), and an MDT's OBD_FL_DELORPHAN create either
        way."""
        if rep.body["pb_type"] != REPLY or rep.status != 0:
            return False
        if opc in self.transaction_ops:
            return True
        if opc == self.create_op:
            exp = self.exports.get(client)
            if exp and exp.flags & C("OBD_CONNECT_FLAGS2") and exp.flags2 & C("OBD_CONNECT2_REPLAY_CREATE"):
                return True
            body = req.struct(1, "ost_body")
            return bool(body and body["oa.o_valid"] & C("OBD_MD_FLFLAGS")
                        and body["oa.o_flags"] & C("OBD_FL_DELORPHAN"))
        return False
    def evicted(self, client: str) -> None:
        """The driver saw `client` evicted (ERR -ENOTCONN after the recovery window expired):
        its cookie names no export from now on."""
        self._evict(client, "TGT-CONN-2")

    def _evict(self, client: str, rule: str) -> None:
        """`client`'s export is gone; `rule` says so (see `dead`)."""
        exp = self.exports.pop(client, None)
        if exp is not None:
            self.dead[exp.cookie] = rule

    def _enotconn_type(self, opc: int, portal: int | None) -> int | None:
        """The type of the -ENOTCONN reply to a request naming no export: ERR from the target's
        handler, REPLY from the LDLM cancel service (target.yaml `enotconn_reply`); None when
        either may have answered (a record without a portal)."""
        if portal is not None:
            row = target_facts()["portals"]["requests"].get(portal)
            return REPLY if row and row["service"] in self.enotconn_reply_services else ERR
        if opc in self.enotconn_reply_ops:
            return REPLY
        return None if opc in self.enotconn_either_ops else ERR

    def _connect(self, client: str, req: Message, rep: Message, exp: _Export | None, flag,
                 infer_recovery: bool = True, note=None, done: int = 0) -> None:
        b, r = req.body, rep.body
        op = r["pb_op_flags"]
        recovering = bool(op & C("MSG_CONNECT_RECOVERING"))
        reconnect = bool(op & C("MSG_CONNECT_RECONNECT"))
        if exp is not None and b["pb_handle"] == exp.cookie and not self.recovering and not recovering:
            if b["pb_conn_cnt"] == exp.conn_cnt and not (r["pb_type"] == ERR and rep.status == _errno("EALREADY")):
                flag("TGT-CONN-2", f"a reconnect with the stored pb_conn_cnt {exp.conn_cnt}: expected ERR -EALREADY, got {rep.type_name} {rep.status}")
                return
        if r["pb_type"] != REPLY or rep.status != 0:
            return                      # a failed connect's pb_handle is not judged (Lustre may set it)
        if r["pb_transno"]:
            flag("TGT-TRANSNO-2", f"a connect reply carries transno {r['pb_transno']:#x}")
        if not r["pb_handle"]:
            flag("TGT-CONN-1", "a successful connect reply carries no export cookie (pb_handle 0)")
        if not op & C("MSG_CONNECT_REPLAYABLE") and not self.recovery_disabled:
            flag("TGT-CONN-1", f"a connect reply without MSG_CONNECT_REPLAYABLE (pb_op_flags {op:#x})")
        elif op & C("MSG_CONNECT_REPLAYABLE") and self.recovery_disabled:
            flag("TGT-CONN-1", f"a connect reply with MSG_CONNECT_REPLAYABLE (pb_op_flags {op:#x}) from a target "
                               f"with recovery disabled")
        if infer_recovery and recovering and not self.recovering:
            self.restart()              # a trace shows a restart only this way
        elif infer_recovery and self.recovering and not recovering and self._restart_epoch is not None:
            # a connect served outside recovery: it is over (or never began); in a trace, for
            # the requests sent after this reply (those in flight may have run before the end)
            if self.sees_all:
                self.recovery_ended()
            else:
                self._ends_at = done if self._ends_at is None else min(self._ends_at, done)
        if infer_recovery and recovering and self.recovering:
            self._reconnected.add(client)
        self._gone.discard(client)
        self._maybe_gone.discard(client)
        if not reconnect and not recovering:
            self._history_seen.add(client)          # a new export: all its transnos are to come
            self._history_unseen.pop(client, None)
        elif client not in self._history_seen:
            self._history_unseen.setdefault(client, done)
        if exp is not None and b["pb_handle"] == exp.cookie and not recovering:
            if not reconnect and not self.sees_all and r["pb_handle"] != exp.cookie and note is not None:
                note(("evicted", exp.cookie),
                     f"cannot tell: a reconnect naming export {exp.cookie:#x} got a new export {r['pb_handle']:#x} "
                     f"without MSG_CONNECT_RECONNECT: the old one was {UNSEEN_EVICTION}; had it not been, "
                     "MSG_CONNECT_RECONNECT and the same cookie were due (TGT-CONN-1)")
            elif not reconnect:
                flag("TGT-CONN-1", "a reconnect to a live export is answered without MSG_CONNECT_RECONNECT")
            elif r["pb_handle"] != exp.cookie:
                flag("TGT-CONN-1", f"a reconnect changed the cookie from {exp.cookie:#x} to {r['pb_handle']:#x} without MSG_CONNECT_RECOVERING")
        asked = req.struct(4, "obd_connect_data")
        granted = rep.struct(1, "obd_connect_data")
        flags = flags2 = 0
        if granted is None:
            flag("TGT-CONN-1", "a connect reply without obd_connect_data in buffer 1")
        elif asked is not None:
            flags, flags2 = granted["ocd_connect_flags"], granted["ocd_connect_flags2"]
            if flags & ~asked["ocd_connect_flags"]:
                flag("TGT-CONN-1", f"granted connect flags {flags & ~asked['ocd_connect_flags']:#x} were not asked for")
            if flags & C("OBD_CONNECT_FLAGS2") and flags2 & ~asked["ocd_connect_flags2"]:
                flag("TGT-CONN-1", f"granted connect flags2 {flags2 & ~asked['ocd_connect_flags2']:#x} were not asked for")
            if asked["ocd_connect_flags"] & C("OBD_CONNECT_FULL20") and not flags & C("OBD_CONNECT_FULL20"):
                # target_handle_connect refuses a connect without it: a successful one grants it
                flag("TGT-CONN-1", f"the granted connect flags {flags:#x} lack OBD_CONNECT_FULL20")
        if not reconnect:
            self.generations[client] = self.generations.get(client, 0) + 1   # a new export
        self.dead.pop(r["pb_handle"], None)
        if exp is not None and exp.cookie != r["pb_handle"]:
            self.dead[exp.cookie] = "TGT-CONN-2"
        self.exports[client] = _Export(r["pb_handle"], b["pb_conn_cnt"], flags, flags2)

    def check(self, records) -> list[Violation]:
        """Check an iterable of records {"client", "xid", "request": bytes, "reply": bytes|None}."""
        out = []
        for i, rec in enumerate(records, 1):
            out += self.observe(rec["client"], rec["xid"], rec["request"], rec["reply"], i)
        return out
