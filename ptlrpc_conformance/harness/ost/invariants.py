"""Invariants of a target's replies that hold whatever the client meant: the checks that
`check-trace` runs over a recorded exchange and that every target case runs after every
step (docs/target-rules.md §6).

The checker sees a stream of (client, xid, request, reply) records.  It knows nothing of
what a client intended, so it flags only what is wrong for *any* request: a reply to a
request that must be dropped, an ERR that carries a transno, a transno that does not
increase, a resent transaction answered differently, and so on.  What a broken request
should have been answered with is the business of the suite that broke it.
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

    def recovery_ended(self) -> None:
        if self.recovering and self._restart_epoch is not None:
            self.epoch_floor = max(self.epoch_floor, (self._restart_epoch + 1) << 32)
        self.recovering = False

    # -- records --------------------------------------------------------------------------
    def _settle(self, now: int) -> None:
        """Replies captured before `now` (a request's send time) are known to that request."""
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
                ceiling: int | None = None, infer_recovery: bool = True) -> list[Violation]:
        """Judge one exchange.  `sent_at`, `answered_at`: when the request and its reply were
        captured (real traffic: several requests in flight); without them exchanges are one
        at a time.  Transno order and last_committed growth are judged only against replies
        captured before the request was sent.  `ceiling`: the highest transno of any request
        sent before this reply (default: the highest seen so far).  `infer_recovery` False: a
        connect reply does not change what the checker believes of recovery (a driver whose
        own expectation rejected that reply: a wrong MSG_CONNECT_RECOVERING is charged there,
        and the replies after it are judged by the state the driver knows)."""
        self.count += 1
        n = record if record is not None else self.count
        now = sent_at if sent_at is not None else self.count
        done = answered_at if answered_at is not None else now
        self._settle(now)
        out: list[Violation] = []

        def flag(rule: str, message: str) -> None:
            out.append(Violation(n, rule, message, client, xid))

        req, why = wire.try_parse(request, "request")
        if req is None:
            if reply is not None:
                flag("TGT-DROP-1", f"the request does not unpack ({why}) yet it was answered")
            return out
        b = req.body
        opc = b["pb_opc"]
        flags = b["pb_flags"]
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

        # -- error type -------------------------------------------------------------------
        if r["pb_type"] == ERR:
            if status >= 0:
                flag("TGT-ERR-3", f"an ERR reply with status {status}: ERR statuses are negative")
            elif status in self.reply_statuses:
                flag("TGT-ERR-3", f"status {status} ({spec.errno_name(-status)}) is sent as REPLY, never ERR")
            if transno:
                flag("TGT-ERR-1", f"an ERR reply carries pb_transno {transno:#x}")
            if committed:
                flag("TGT-ERR-1", f"an ERR reply carries pb_last_committed {committed:#x}")

        # -- handles and connections ------------------------------------------------------
        if opc == self.connect_op:
            self._connect(client, req, rep, exp, flag, infer_recovery)
        else:
            if r["pb_handle"]:
                flag("TGT-CONN-1", f"pb_handle {r['pb_handle']:#x} in a reply to opcode {opc}: only connect replies set it")
            if not live and (b["pb_handle"] == 0 or b["pb_handle"] in self.dead):
                if status != _errno("ENOTCONN"):
                    flag(self.dead.get(b["pb_handle"], "TGT-CONN-2"), f"pb_handle {b['pb_handle']:#x} names no export: expected ERR -ENOTCONN, got {rep.type_name} {status}")
                elif r["pb_type"] != ERR:
                    flag("TGT-ERR-1", f"pb_handle {b['pb_handle']:#x} names no export: -ENOTCONN is an early rejection, sent as ERR, not {rep.type_name}")
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
            if modelled and not self._may_take_transno(client, opc, req, rep):
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
            if committed > top:
                flag("TGT-TRANSNO-3", f"pb_last_committed {committed:#x} is above the highest transno issued, {top:#x}")
            before = self.committed.get(gen_key, 0)
            if committed < before:
                flag("TGT-TRANSNO-3", f"pb_last_committed went back from {before:#x} to {committed:#x}")
        self._pending.append((done, transno, gen_key if r["pb_type"] == REPLY else None, committed))
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

    def _connect(self, client: str, req: Message, rep: Message, exp: _Export | None, flag,
                 infer_recovery: bool = True) -> None:
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
            self.recovery_ended()       # a connect served outside recovery: it is over (or never began)
        if exp is not None and b["pb_handle"] == exp.cookie and not recovering:
            if not reconnect:
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
