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
class _Exchange:
    """One exchange as TargetChecker.observe judges it: the record's place and times, the
    parsed request and reply, the export it names, and what the checks found (`out`) and which
    invariants they judged (`judged`)."""
    n: int                               # the record's position (Violation.record)
    client: str
    xid: int
    _note: object                        # TargetChecker._note
    now: int = 0                         # when the request was sent
    done: int = 0                        # when its reply was captured
    req: Message | None = None
    rep: Message | None = None
    exp: _Export | None = None           # the client's live export, if any
    live: bool = False                   # the request names that export
    outside: bool = False                # a replay outside recovery (row 4 of target-rules.md §2)
    forced: bool = False                 # an ERR -ENODEV a stopping target forced (_reply_form)
    out: list = field(default_factory=list)
    judged: list = field(default_factory=list)

    @property
    def flags(self) -> int:
        return self.req.body["pb_flags"]

    @property
    def opc(self) -> int:
        return self.req.body["pb_opc"]

    @property
    def status(self) -> int:
        return self.rep.status

    @property
    def transno(self) -> int:
        return self.rep.body["pb_transno"]

    @property
    def committed(self) -> int:
        return self.rep.body["pb_last_committed"]

    def check(self, *rules: str) -> None:
        """The exchange is put to the checks of `rules` (whatever they find)."""
        self.judged += [r for r in rules if r not in self.judged]

    def flag(self, rule: str, message: str) -> None:
        self.out.append(Violation(self.n, rule, message, self.client, self.xid))

    def note(self, key: tuple, message: str) -> None:
        self._note(key, self.n, self.client, self.xid, message)


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
    release: str | None = None           # the Lustre release whose rules apply (None: the default profile's)
    judged: list[str] = field(default_factory=list)                 # the invariants the last exchange was put to

    def __post_init__(self):
        facts = target_facts()
        self.ops = _opcodes()
        self.reply_statuses = {_errno(n) for n in facts["reply_statuses"]}
        from ptlrpc_conformance.harness.verdicts import release as release_rules
        self.release = self.release or release_rules.default()
        if not release_rules.behaviour(self.release, "erofs_sent_as_reply"):
            self.reply_statuses.discard(_errno("EROFS"))      # before 2.16 ptlrpc_send_error sends it as ERR
        # the OBD_CONNECT2_* bits the release's lustre_idl.h defines: its OST grants no other
        # (OBD_CONNECT2_REPLAY_CREATE from 2.16 on), so creates take transnos only from 2.16
        from ptlrpc_conformance.spec import releases
        self.flags2_defined = functools.reduce(
            lambda a, b: a | b, (r["value"] for r in releases.load(self.release)["connect"]["flags2"].values()), 0)
        self.replay_create_defined = release_rules.behaviour(self.release, "replay_create")
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
        request portal, when the record names it (the service that answered).

        The checks go by rule family, each a method: whether the request had to be dropped
        (`_admission`), the reply's form (`_reply_form`), its type and status (`_error_type`),
        handles and connections (`_connections`), transnos (`_transnos`), the last committed
        transno (`_last_committed`) and what the exchange tells of recovery
        (`_recovery_progress`).  `judged` lists afterwards the invariants whose checks the
        exchange was put to, whatever their verdict."""
        self.count += 1
        now = sent_at if sent_at is not None else self.count
        x = _Exchange(record if record is not None else self.count, client, xid, self._note,
                      now=now, done=answered_at if answered_at is not None else now)
        self.judged = x.judged
        self._settle(now)
        req, why = wire.try_parse(request, "request")
        if req is None:
            x.check("TGT-DROP-1")
            if reply is not None:
                x.flag("TGT-DROP-1", f"the request does not unpack ({why}) yet it was answered")
            return x.out
        x.req = req
        if self.recovering and x.flags & C("MSG_LOCK_REPLAY_DONE"):
            self._finished.add(client)
        x.exp = self.exports.get(client)
        x.live = x.exp is not None and req.body["pb_handle"] == x.exp.cookie
        must_drop, drop_rule = self._admission(x)
        if reply is None:
            if x.outside:
                self._evict(client, "RCV-OUTSIDE-1")
            return x.out
        rep, why = wire.try_parse(reply, "reply")
        x.check("TGT-REPLY-1")
        if rep is None:
            x.flag("TGT-REPLY-1", f"the reply does not unpack: {why}")
            return x.out
        x.rep = rep
        if must_drop:
            x.flag(drop_rule, f"{must_drop}: the request must be dropped, it was answered {rep.type_name}")
            return x.out
        self._reply_form(x)
        self._error_type(x)
        if self._connections(x, infer_recovery, portal):
            return x.out
        self._transnos(x)
        self._last_committed(x, ceiling)
        self._recovery_progress(x)
        if sent_at is None:
            self._settle(self.count + 1)
        return x.out

    # -- the rule families of observe ---------------------------------------------------------
    def _admission(self, x: "_Exchange") -> tuple[str | None, str]:
        """Rows 3, 4 and 5 of docs/target-rules.md §2, in that order (ptlrpc_check_req runs
        before the adaptive-timeout drop): why the request must be dropped (None: it need not
        be) and the rule a reply to it breaks; `x.outside` set for a replay outside recovery."""
        b, exp = x.req.body, x.exp
        if x.live and b["pb_conn_cnt"] < exp.conn_cnt:
            x.check("TGT-CONN-2")
            return f"pb_conn_cnt {b['pb_conn_cnt']} is below the export's {exp.conn_cnt}", "TGT-CONN-2"
        if x.live and not self.recovering and (x.flags & (C("MSG_REPLAY") | C("MSG_REQ_REPLAY_DONE")) or b["pb_transno"]):
            x.outside = True
        elif x.req.header["lm_flags"] & wire.AT_SUPPORT and b["pb_timeout"] == 0:
            x.check("TGT-DROP-1")
            return "MSGHDR_AT_SUPPORT with pb_timeout 0", "TGT-DROP-1"
        return None, "TGT-DROP-1"

    def _reply_form(self, x: "_Exchange") -> None:
        """TGT-REPLY-1: the reply echoes the request's opcode; and whether it is a reply a
        stopping target forced to ERR -ENODEV (`x.forced`): a target that is stopping or
        failing over (OBDF_FAIL) turns the reply it had packed into ERR -ENODEV, transno and
        last committed value included (ptlrpc_send_reply); a trace may hold such replies, a
        live run never stops its target while it waits for one."""
        r = x.rep.body
        if r["pb_opc"] != x.opc:
            x.flag("TGT-REPLY-1", f"the reply's pb_opc is {r['pb_opc']}, the request's {x.opc}")
        x.forced = (not self.sees_all and r["pb_type"] == ERR and x.status == _errno("ENODEV")
                    and bool(x.transno or x.committed))

    def _error_type(self, x: "_Exchange") -> None:
        """TGT-ERR-3: an ERR reply's status is negative and not one sent as REPLY; TGT-ERR-1:
        an ERR reply carries no transno and no last committed value."""
        if x.rep.body["pb_type"] != ERR:
            return
        status, transno, committed = x.status, x.transno, x.committed
        x.check("TGT-ERR-3")
        if status >= 0:
            x.flag("TGT-ERR-3", f"an ERR reply with status {status}: ERR statuses are negative")
        elif status in self.reply_statuses:
            x.flag("TGT-ERR-3", f"status {status} ({spec.errno_name(-status)}) is sent as REPLY, never ERR")
        if x.forced:
            x.note(("forced-enodev",), f"ERR -ENODEV carrying pb_transno {transno:#x} and pb_last_committed "
                                       f"{committed:#x}: allowed, as a target that is stopping or failing over "
                                       "answers so on the reply it had already packed (ptlrpc_send_reply); "
                                       "its transno still counts for transno order")
        else:
            x.check("TGT-ERR-1")
            if transno:
                x.flag("TGT-ERR-1", f"an ERR reply carries pb_transno {transno:#x}")
            if committed:
                x.flag("TGT-ERR-1", f"an ERR reply carries pb_last_committed {committed:#x}")

    def _connections(self, x: "_Exchange", infer_recovery: bool, portal: int | None) -> bool:
        """Handles and connections: a connect reply (`_connect`), a cookie only in connect
        replies (TGT-CONN-1), a request naming no export (TGT-CONN-2, TGT-ERR-1), a replay
        outside recovery (RCV-OUTSIDE-1), a disconnect.  True when the exchange is judged
        whole (a replay outside recovery)."""
        b, r, opc, exp, client, flags, status = x.req.body, x.rep.body, x.opc, x.exp, x.client, x.flags, x.status
        if opc == self.connect_op:
            self._connect(client, x.req, x.rep, exp, x.flag, infer_recovery, x.note, x.done, x.check)
            return False
        x.check("TGT-CONN-1")
        if r["pb_handle"]:
            x.flag("TGT-CONN-1", f"pb_handle {r['pb_handle']:#x} in a reply to opcode {opc}: only connect replies set it")
        if x.live and not self.sees_all and r["pb_type"] == ERR and status == _errno("ENOTCONN"):
            # the target no longer knows the export: evicted, unseen (or at an expiry of
            # the recovery window the trace shows: no note then)
            if client not in self._maybe_gone:
                what = (f"a replay (pb_flags {flags:#x}, pb_transno {b['pb_transno']:#x}) outside recovery"
                        if x.outside else f"opcode {opc}")
                x.note(("evicted", exp.cookie),
                       f"cannot tell: ERR -ENOTCONN to {what} naming export {exp.cookie:#x}: the target no "
                       f"longer knows it, so it was {UNSEEN_EVICTION}"
                       + ("; had it not been, ERR -ENODEV and an eviction were due (RCV-OUTSIDE-1)" if x.outside else ""))
            self._gone.add(client)
            self._evict(client, "TGT-CONN-2")
        elif not x.live and (b["pb_handle"] == 0 or b["pb_handle"] in self.dead):
            x.check(self.dead.get(b["pb_handle"], "TGT-CONN-2"))
            if status != _errno("ENOTCONN"):
                x.flag(self.dead.get(b["pb_handle"], "TGT-CONN-2"), f"pb_handle {b['pb_handle']:#x} names no export: expected ERR -ENOTCONN, got {x.rep.type_name} {status}")
            else:
                want = self._enotconn_type(opc, portal)
                if want is not None:
                    x.check("TGT-ERR-1")
                if want == ERR and r["pb_type"] != ERR:
                    x.flag("TGT-ERR-1", f"pb_handle {b['pb_handle']:#x} names no export: -ENOTCONN is an early rejection, sent as ERR, not {x.rep.type_name}")
                elif want == REPLY and r["pb_type"] != REPLY:
                    x.flag("TGT-ERR-1", f"pb_handle {b['pb_handle']:#x} names no export: the LDLM cancel service sends "
                                        f"-ENOTCONN as REPLY (ldlm_cancel_handler, ldlm_callback_reply), not {x.rep.type_name}")
        elif x.outside:
            x.check("RCV-OUTSIDE-1")
            if status != _errno("ENODEV"):
                x.flag("RCV-OUTSIDE-1", f"a replay (pb_flags {flags:#x}, pb_transno {b['pb_transno']:#x}) outside recovery: expected ERR -ENODEV and eviction, got {x.rep.type_name} {status}")
            else:
                x.check("TGT-ERR-1")
                if r["pb_type"] != ERR:
                    x.flag("TGT-ERR-1", f"a replay outside recovery: -ENODEV is an early rejection, sent as ERR, not {x.rep.type_name}")
            self._evict(client, "RCV-OUTSIDE-1")
            return True
        if x.live and opc == self.disconnect_op and r["pb_type"] == REPLY and status == 0:
            self._evict(client, "TGT-CONN-2")
        return False

    def _transnos(self, x: "_Exchange") -> None:
        """Transnos: a resend answered with its original reply or run again (TGT-RESEND-1/-2),
        a replay's transno (RCV-REPLAY-1), a new transno's order (TGT-TRANSNO-1) and epoch
        (RCV-EPOCH-1), and whether the opcode takes one (TGT-TRANSNO-2)."""
        b, r, opc, rep, client, status, transno = x.req.body, x.rep.body, x.opc, x.rep, x.client, x.status, x.transno
        key = (client, x.xid)
        original = self.originals.get(key)
        resent = bool(x.flags & C("MSG_RESENT"))
        replay = bool(x.flags & C("MSG_REPLAY"))
        modelled = opc in self.ops
        if not modelled and opc != self.connect_op:
            self.unmodelled += 1
        if resent and original is not None and original.body["pb_transno"]:
            x.check("TGT-RESEND-1", *(["TGT-RESEND-2"] if self.reconstruct else []))
            for rule, message in resend_problems(original, rep, self.reconstruct):
                x.flag(rule, message)
            rerun = not reconstructed(original, rep)
        else:
            rerun = False
        if resent and original is not None and original.body["pb_transno"] and not rerun:
            pass                          # the original reply again: judged above
        elif replay or (self.recovering and b["pb_transno"]):
            # a replay (Lustre treats any request with a non-zero pb_transno as one)
            x.check("RCV-REPLAY-1")
            if transno not in (0, b["pb_transno"]):
                x.flag("RCV-REPLAY-1", f"a replay of transno {b['pb_transno']:#x} answered with transno {transno:#x} (must be the same, or 0)")
            if self.recovering and transno:
                self.recovery_floor = max(self.recovery_floor, transno)
        elif transno:
            self._new_transno(x, modelled)
        elif modelled and r["pb_type"] == REPLY and status == 0 and opc in self.transaction_ops \
                and not self.recovery_disabled:
            x.check("TGT-TRANSNO-2")
            x.flag("TGT-TRANSNO-2", f"a successful opcode {opc} ran a transaction but the reply's transno is 0")
        self.max_transno = max(self.max_transno, transno)
        if opc in self.mutable_ops and r["pb_type"] == REPLY and original is None:
            self.originals[key] = rep

    def _new_transno(self, x: "_Exchange", modelled: bool) -> None:
        """A transno issued while the trace ran: above those before it (TGT-TRANSNO-1), in a
        new epoch after recovery (RCV-EPOCH-1), on an opcode that takes one (TGT-TRANSNO-2)."""
        transno, now = x.transno, x.now
        # every earlier transno of a client whose export the checker did not see created is below it
        for other, since in list(self._history_unseen.items()):
            if since < now:
                del self._history_unseen[other]
                self._history_seen.add(other)
        x.check("TGT-TRANSNO-1")
        if self.recovering:
            # a change served at once during recovery: above the commit point and every
            # replay run so far, not necessarily above every transno issued before
            if transno <= self.recovery_floor:
                x.flag("TGT-TRANSNO-1", f"transno {transno:#x} of a change served during recovery is not above "
                                        f"{self.recovery_floor:#x} (the commit point at the restart, the last committed "
                                        f"values clients were told, and the transnos run since)")
            self.recovery_floor = max(self.recovery_floor, transno)
        else:
            if transno <= self.settled_max:
                x.flag("TGT-TRANSNO-1", f"transno {transno:#x} is not above {self.settled_max:#x}, the highest issued before")
            elif transno in self.issued:
                x.flag("TGT-TRANSNO-1", f"transno {transno:#x} was issued before (to an overlapping exchange)")
            self.issued.add(transno)
        if self.epoch_floor:
            x.check("RCV-EPOCH-1")
            if transno <= self.epoch_floor:
                x.flag("RCV-EPOCH-1", f"transno {transno:#x} after recovery is not in a new epoch (must exceed {self.epoch_floor:#x})")
        if modelled and not x.forced:
            x.check("TGT-TRANSNO-2")
            if not self._may_take_transno(x.client, x.opc, x.req, x.rep):
                x.flag("TGT-TRANSNO-2", f"transno {transno:#x} on a {x.rep.type_name} with status {x.status} to opcode {x.opc}, which runs no transaction")

    def _last_committed(self, x: "_Exchange", ceiling: int | None) -> None:
        """TGT-TRANSNO-3: a REPLY's pb_last_committed is at most the highest transno issued and
        never goes back for one export; the reply then counts as settled once captured."""
        client, committed = x.client, x.committed
        is_reply = x.rep.body["pb_type"] == REPLY
        gen_key = (client, self.generations.get(client, 0))
        if is_reply and committed:
            x.check("TGT-TRANSNO-3")
            top = self.max_transno if ceiling is None else max(ceiling, self.max_transno)
            if committed > top and not self.sees_all and client in self._history_unseen:
                x.note(("history", client, self.generations.get(client, 0)),
                       f"cannot tell: pb_last_committed {committed:#x} is above every transno the trace shows "
                       f"({f'{top:#x}' if top else 'none yet'}); the checker did not see client {client}'s export "
                       "created, so it may be a transaction of the client's from before the trace began (a "
                       "reconnect is told the export's last committed transno, after a restart the one "
                       "last_rcvd holds)")
            elif committed > top:
                x.flag("TGT-TRANSNO-3", f"pb_last_committed {committed:#x} is above the highest transno issued, {top:#x}")
            before = self.committed.get(gen_key, 0)
            if committed < before:
                x.flag("TGT-TRANSNO-3", f"pb_last_committed went back from {before:#x} to {committed:#x}")
        self._pending.append((x.done, x.transno, gen_key if is_reply else None, committed))

    def _recovery_progress(self, x: "_Exchange") -> None:
        """A trace's checker learns the end of recovery from an answered final ping."""
        r = x.rep.body
        if (not self.sees_all and self.recovering and x.flags & C("MSG_LOCK_REPLAY_DONE") and r["pb_type"] == REPLY
                and x.status == 0 and not self._replaying()):
            # final pings are answered once recovery is over (target_recovery_thread): it is,
            # for the requests sent after this reply
            self._ends_at = x.done if self._ends_at is None else min(self._ends_at, x.done)

    def _may_take_transno(self, client: str, opc: int, req: Message, rep: Message) -> bool:
        """A REPLY 0 of this opcode may carry a new transno (docs/target-rules.md §5): SETATTR,
        PUNCH, DESTROY; CREATE only with OBD_CONNECT2_REPLAY_CREATE in force (the checker does
        not know LAST_ID, so it never demands one; never before 2.16, whose OST does not know
        the flag), and an MDT's OBD_FL_DELORPHAN create either
        way."""
        if rep.body["pb_type"] != REPLY or rep.status != 0:
            return False
        if opc in self.transaction_ops:
            return True
        if opc == self.create_op:
            exp = self.exports.get(client)
            if (self.replay_create_defined and exp and exp.flags & C("OBD_CONNECT_FLAGS2")
                    and exp.flags2 & C("OBD_CONNECT2_REPLAY_CREATE")):
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
                 infer_recovery: bool = True, note=None, done: int = 0, check=None) -> None:
        """A connect reply: a reconnect with the stored count refused (TGT-CONN-2); a successful
        one with a cookie, no transno, MSG_CONNECT_REPLAYABLE as recovery is, the same cookie
        on a reconnect, connect flags granted only when asked (TGT-CONN-1, TGT-TRANSNO-2); and
        what it tells of recovery and of the client's export.  `check` is told the rules judged."""
        check = check or (lambda *rules: None)
        b, r = req.body, rep.body
        op = r["pb_op_flags"]
        recovering = bool(op & C("MSG_CONNECT_RECOVERING"))
        reconnect = bool(op & C("MSG_CONNECT_RECONNECT"))
        if exp is not None and b["pb_handle"] == exp.cookie and not self.recovering and not recovering:
            if b["pb_conn_cnt"] == exp.conn_cnt:
                check("TGT-CONN-2")
            if b["pb_conn_cnt"] == exp.conn_cnt and not (r["pb_type"] == ERR and rep.status == _errno("EALREADY")):
                flag("TGT-CONN-2", f"a reconnect with the stored pb_conn_cnt {exp.conn_cnt}: expected ERR -EALREADY, got {rep.type_name} {rep.status}")
                return
        if r["pb_type"] != REPLY or rep.status != 0:
            return                      # a failed connect's pb_handle is not judged (Lustre may set it)
        check("TGT-TRANSNO-2", "TGT-CONN-1")
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
            elif flags & C("OBD_CONNECT_FLAGS2") and flags2 & ~self.flags2_defined:
                flag("TGT-CONN-1", f"granted connect flags2 {flags2 & ~self.flags2_defined:#x} that Lustre "
                                   f"{self.release} does not define (lustre_idl.h)")
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
