"""Broken OST targets: the reference target with one realistic bug each, for the mutant zoo
(mutants/__init__.py) and the project's tests.

Each class below is a subclass of the reference `Target` that overrides the one method (or
table) where its bug lives; the reference itself has no setting that makes it wrong.  Build a
testee of one with `testee(BUG)` (or `testee(BUG, **TargetConfig settings)`); `BY_NAME` maps a
bug's name to its class.
"""
from __future__ import annotations

import copy
from dataclasses import replace

from .. import spec
from ..reference import ReferenceTestee, TargetConfig
from ..reference.codec import CodecError
from ..reference.target import Export, Reply, Target
from ..reference.target.constants import (AT_SUPPORT, CONNECT_RECONNECT, CONNECT_RECOVERING, ERR, FLATIME,
                                         FLCTIME, FLGID, FLGROUP, FLID, FLMODE, FLMTIME, FLPROJID, FLSIZE,
                                         FLUID, GETATTR_BITS, IDS, REPLY, S_IALLUGO, S_IFREG, S_ISGID,
                                         S_ISVTX, TIMES)
from ..reference.target.ostid import pair_id, pair_seq


# ---- drops, ERR or REPLY, statuses ------------------------------------------------------------

class RepliesToUndecodable(Target):
    """An undecodable request gets ERR -EINVAL instead of being dropped."""

    def _receive(self, data, xid, peer):
        try:
            self.codec.decode(data, "request")
        except CodecError:
            return self._pack(Reply(opc=0, type=ERR, status=-spec.errno_value("EINVAL"), early=True), None)
        return super()._receive(data, xid, peer)


class EarlyRejectionsAsReply(Target):
    """The early rejections (ERR rows of the receive path) are sent as REPLY."""

    def _reject(self, req, errno_name, exp):
        return self._pack(Reply(opc=req.opc, type=REPLY, status=-spec.errno_value(errno_name), early=True), exp)


class HandlerErrorsAsErr(Target):
    """A handler's failure status (-ENOENT, -EPERM, ...) is sent as ERR instead of REPLY."""

    def _handle(self, exp, req, row, body):
        reply = super()._handle(exp, req, row, body)
        if reply is not None and not reply.early and reply.status != 0:
            reply.type = ERR
        return reply


class ErrStatusPositive(Target):
    """ERR replies carry a positive status."""

    def _pack(self, reply, exp, connect=False):
        if reply.type == ERR:
            reply = replace(reply, status=abs(reply.status))
        return super()._pack(reply, exp, connect)


class ErrOpcZero(Target):
    """ERR replies carry pb_opc 0, not the request's opcode."""

    def _pack(self, reply, exp, connect=False):
        if reply.type == ERR:
            reply = replace(reply, opc=0)
        return super()._pack(reply, exp, connect)


class TimeoutDropFirst(Target):
    """The pb_timeout 0 drop runs before ptlrpc_check_req's checks (the old order): a replay
    outside recovery is dropped instead of refused -ENODEV."""

    def _receive(self, data, xid, peer):
        try:
            msg = self.codec.decode(data, "request")
        except CodecError:
            msg = None
        if msg is not None and msg["header"]["lm_flags"] & AT_SUPPORT and msg["body"]["pb_timeout"] == 0:
            return None
        return super()._receive(data, xid, peer)


class PunchWithoutSizeBlocks(Target):
    """OST_PUNCH without both FLSIZE and FLBLOCKS is served."""

    PUNCH_REQUIRED = 0


# ---- read-only exports ---------------------------------------------------------------------------

class HonoursUngrantedRdonly(Target):
    """A client that asked for OBD_CONNECT_RDONLY is refused -EROFS though not granted it."""

    def _readonly(self, exp):
        return super()._readonly(exp) or exp.asked_rdonly


class RdonlyUnenforced(Target):
    """A granted OBD_CONNECT_RDONLY (TargetConfig.grant_rdonly) is not enforced."""

    def _readonly(self, exp):
        return False


# ---- transnos and commits ------------------------------------------------------------------------

class TransnoReused(Target):
    """The transno counter is not incremented: a transno is issued twice."""

    def _next_transno(self):
        if self.last_transno >= self.config.transno_start:
            return self.last_transno
        return super()._next_transno()


class TransnoOnGetattr(Target):
    """A successful OST_GETATTR gets a transno."""

    def _wants_transno(self, exp, name):
        return name == "OST_GETATTR" or super()._wants_transno(exp, name)

    def _h_ost_getattr(self, exp, req, body):
        reply = super()._h_ost_getattr(exp, req, body)
        if reply.status == 0 and not reply.transno:
            reply.transno, _ = self._transact(exp, req, "OST_GETATTR", 0, [])
        return reply


class TransnoOnFailure(Target):
    """A failed transaction (SETATTR -ENOENT, ...) still gets a transno."""

    def _transact(self, exp, req, name, status, effects, version_before=0, vbr_object=False):
        return super()._transact(exp, req, name, 0, effects, version_before, vbr_object)


class LastCommittedBackwards(Target):
    """Every other reply reports the client's previous committed transno as last_committed."""

    @staticmethod
    def _history(exp: Export) -> dict:
        """The client's committed transnos, ascending, and whether the last reply went back."""
        return exp.__dict__.setdefault("_backwards", {"committed": [], "toggle": False})

    def _commit(self, count):
        seen = {}
        for txn in self.pending[:max(count, 0)]:
            exp = self.exports.get(txn.uuid)
            if exp is not None and txn.transno > seen.get(txn.uuid, exp.last_committed):
                seen[txn.uuid] = txn.transno
                self._history(exp)["committed"].append(txn.transno)
        super()._commit(count)

    def restart(self):
        kept = {uuid: list(self._history(exp)["committed"]) for uuid, exp in self.exports.items()}
        point = super().restart()
        for uuid, exp in self.exports.items():
            self._history(exp)["committed"] = kept.get(uuid, [])
        return point

    def _reported_last_committed(self, exp):
        history = self._history(exp)
        if len(history["committed"]) >= 2:
            history["toggle"] = not history["toggle"]
            if history["toggle"]:
                return history["committed"][-2]
        return super()._reported_last_committed(exp)


class LastCommittedAhead(Target):
    """last_committed is above the highest transno issued."""

    def _reported_last_committed(self, exp):
        return self.last_transno + 1


# ---- resends and connections ---------------------------------------------------------------------

class NoSavedReplies(Target):
    """No saved replies: a resend is executed again."""

    def _save(self, exp, req, reply):
        pass


class ResendNewTransno(Target):
    """A resend is answered with its saved reply under a new transno."""

    def _reconstruct(self, exp, saved):
        if saved.transno:
            self.last_transno += 1
            saved = replace(saved, transno=self.last_transno)
        return super()._reconstruct(exp, saved)


class HandleInReplies(Target):
    """Every reply but a connect's carries the export cookie in pb_handle."""

    def _pack(self, reply, exp, connect=False):
        if exp is not None and not connect:
            reply = replace(reply, handle=exp.cookie)
        return super()._pack(reply, exp, connect)


class NoReconnectFlag(Target):
    """Reconnect replies lack MSG_CONNECT_RECONNECT."""

    def _pack(self, reply, exp, connect=False):
        if connect:
            reply = replace(reply, op_flags=reply.op_flags & ~CONNECT_RECONNECT)
        return super()._pack(reply, exp, connect)


class NoRecoveringFlag(Target):
    """Reconnects during recovery lack MSG_CONNECT_RECOVERING."""

    def _pack(self, reply, exp, connect=False):
        if connect:
            reply = replace(reply, op_flags=reply.op_flags & ~CONNECT_RECOVERING)
        return super()._pack(reply, exp, connect)


class NoEalready(Target):
    """Reconnects with the stored pb_conn_cnt or another client handle are accepted."""

    @staticmethod
    def _already(exp, handle, conn_cnt, kind):
        return False


class ConnectDataAnySize(Target):
    """Connect data of any length is taken (Lustre before LU-12605)."""

    def __init__(self, config=None):
        super().__init__(config)
        self.connect_data_max = 1 << 62


class UuidAnyLength(Target):
    """A connect's UUID is read up to its first NUL whatever its length, so an over-long
    target UUID is -ENODEV and an over-long client UUID makes an export."""

    def _uuid(self, bufs, i):
        end = bufs[i].find(b"\0") if len(bufs) > i else -1
        return bufs[i][:end].decode("latin-1") if end >= 0 else None


class AnonymousExport(Export):
    """The export a request naming no export is served on (UnknownHandleServed)."""


class UnknownHandleServed(Target):
    """A request with an unknown pb_handle is served (on an export of its own, never
    remembered, whose replies report last_committed 0)."""

    def _unknown_handle(self, req):
        return AnonymousExport(uuid=f"anonymous:{req.peer}", client_handle=0, peer=req.peer)

    def _pack(self, reply, exp, connect=False):
        return super()._pack(reply, None if isinstance(exp, AnonymousExport) else exp, connect)

    def _save(self, exp, req, reply):
        if not isinstance(exp, AnonymousExport):
            super()._save(exp, req, reply)


class StaleConnCntServed(Target):
    """A request with a stale pb_conn_cnt is served."""

    def _stale_connection(self, exp, req):
        return False


class RunsLastTransactionXid(Target):
    """The XID of the export's last transaction again, without MSG_RESENT, is run (row 12)."""

    @staticmethod
    def _last_transaction_again(exp, req):
        return False


# ---- objects -------------------------------------------------------------------------------------

class GetattrOmitsProjid(Target):
    """OST_GETATTR leaves OBD_MD_FLPROJID out of o_valid (as if optional)."""

    GETATTR_BITS = GETATTR_BITS & ~FLPROJID


class SetattrIgnoresValid(Target):
    """OST_SETATTR applies every attribute field, whatever o_valid says."""

    def _h_ost_setattr(self, exp, req, body):
        body = dict(body, o_valid=body["o_valid"] | FLATIME | FLMTIME | FLCTIME | FLMODE | FLUID | FLGID)
        return super()._h_ost_setattr(exp, req, body)


class CreateEexist(Target):
    """OST_CREATE creates only the id it names (the old model), -EEXIST if it exists."""

    def _h_ost_create(self, exp, req, body):
        cfg = self.config
        seq, oid = pair_seq(*body["_fid"]), pair_id(*body["_fid"])
        if (seq, oid) in self.objects:
            return self._ok(req, self._errno("EEXIST"), (self._body(body["_fid"], FLSIZE, o_size=cfg.seq_width),))
        effects = [((seq, oid), self._fresh_object(body)),
                   (("LAST_ID", seq), max(oid, self.last_ids.get(seq, 0)))]
        transno, pre = self._transact(exp, req, "OST_CREATE", 0, effects)
        return self._ok(req, 0, (self._body(body["_fid"], FLID | FLGROUP | FLSIZE, o_size=cfg.seq_width),),
                        transno, pre)


class CreateAppliesAttrs(Target):
    """A new object takes the times, mode and owner the create request carries."""

    def _fresh_object(self, body):
        state = super()._fresh_object(body)
        for name, bit in {**TIMES, **IDS}.items():
            if body["o_valid"] & bit:
                state[name] = body[name]
        if body["o_valid"] & FLMODE:
            state["o_mode"] = S_IFREG | (body["o_mode"] & S_IALLUGO)
        return state


class ZeroedObjects(Target):
    """A new object's permission bits are 0, not 07666."""

    def _fresh_object(self, body):
        return dict(super()._fresh_object(body), o_mode=S_IFREG)


class UidKeepsSuid(Target):
    """A uid change does not clear S_ISUID."""

    ID_MODE_BITS = {"o_gid": S_ISGID, "o_projid": S_ISVTX}


class PunchSetsIds(Target):
    """OST_PUNCH applies uid/gid/projid as OST_SETATTR does (the is_setattr rule)."""

    def __init__(self, config=None):
        super().__init__(config)
        self.behaviour["punch_sets_ids"] = True          # the ids are taken from the request ...

    def _handle_ids(self, la, stored, is_setattr):
        super()._handle_ids(la, stored, True)             # ... under SETATTR's rule


# ---- recovery ------------------------------------------------------------------------------------

class ReplayOutsideRecovery(Target):
    """A replay outside recovery is executed instead of refused ERR -ENODEV."""

    @staticmethod
    def _is_replay(req):
        return False


class ReplayNewTransno(Target):
    """A replay is answered with a new transno instead of its own."""

    def _transno_for(self, exp, req):
        return self._next_transno()


class ReplaysInArrivalOrder(Target):
    """Replays run as they arrive, not in transno order."""

    def _queue_replay(self, exp, req, held):
        return self._process(exp, req)


class NoEpochJump(Target):
    """No new boot epoch after recovery: transnos stay in the old one."""

    def _new_boot_epoch(self):
        pass


class RestartKeepsUncommitted(Target):
    """Uncommitted changes survive a restart."""

    def _reload(self):
        self.durable = copy.deepcopy(self.objects)
        self.durable_last_ids = dict(self.last_ids)
        for exp in self.exports.values():
            exp.durable_trans_xid = exp.last_trans_xid


class RestartLosesCommitted(Target):
    """A restart loses committed changes too."""

    def _reload(self):
        self.objects, self.durable = {}, {}
        self.last_ids, self.durable_last_ids = {}, {}


class NewClientDuringRecovery(Target):
    """A new client is let in during recovery (no -EBUSY)."""

    def _busy_during_recovery(self):
        return False


class NoRecoveryFilter(Target):
    """Every opcode is served during recovery (no -EAGAIN)."""

    def _recovery_filter(self, exp, req, row):
        if row["recovery"] not in ("serve", "queue"):
            return self._process(exp, req)
        return super()._recovery_filter(exp, req, row)


class NoVbrCheck(Target):
    """Replays run whatever their pb_pre_versions say."""

    def _vbr_mismatch(self, req, state):
        return False


class VersionOnEveryChange(Target):
    """Every change, not only a size change, sets the object's VBR version."""

    def _transact(self, exp, req, name, status, effects, version_before=0, vbr_object=False):
        return super()._transact(exp, req, name, status, effects, version_before, vbr_object=True)


class RunsQueuedDuplicateReplay(Target):
    """A replay of a transno a still-queued replay holds is queued (and run) too."""

    def _claim_dropped(self, exp, req, queued):
        return False


class ClaimedAlwaysDropped(Target):
    """A replay of a transno another client already replayed is dropped, not run (the old
    "claimed" rule)."""

    def _queue_replay(self, exp, req, held):
        if req.transno < self.next_recovery_transno:
            owner = self.replayed.get(req.transno)
            if owner is not None and owner != exp.uuid:
                return None
        return super()._queue_replay(exp, req, held)


# ---- building one ----------------------------------------------------------------------------------

def testee(bug: type[Target], name: str | None = None, **settings) -> ReferenceTestee:
    """The reference testee whose target is the broken class `bug`, set up with TargetConfig
    `settings` (e.g. grant_rdonly=True for RdonlyUnenforced)."""
    return ReferenceTestee(target_config=TargetConfig(**settings), target_class=bug, name=name)


BY_NAME: dict[str, type[Target]] = {
    cls.__name__: cls for cls in list(globals().values())
    if isinstance(cls, type) and issubclass(cls, Target) and cls is not Target}
