"""The reference target's transactions: transnos, the commit schedule, last_rcvd's
per-client records (lcd_last_xid, last_committed) and saved replies."""
from __future__ import annotations

from .constants import C, MSG_REPLAY
from .state import Export, Reply, Request, Txn, is_last_id


class Transactions:
    """Transactions and commits of `Target` (a mix-in)."""

    def _wants_transno(self, exp: Export, name: str) -> bool:
        """Whether a transaction of opcode `name` on `exp` takes a transno (spec/target.yaml's
        opcode table)."""
        mode = self.opcodes[C(name)]["transno"]
        if not self.config.recovery:
            # recovery disabled: tgt_init registers no transaction callbacks, so no
            # tgt_txn_stop_cb / tgt_last_rcvd_update: no transno, no last_committed
            return False
        return mode == "yes" or (mode == "replay_create" and exp.replay_create)

    def _transact(self, exp: Export, req: Request, name: str, status: int, effects: list,
                  version_before: int = 0, vbr_object: bool = False) -> tuple[int, tuple]:
        """Apply `effects` [(key, state or None)] as one transaction; returns (transno,
        pre_versions).  `vbr_object`: the transaction passes its object to ofd_trans_start, so
        the object's VBR version becomes the transno (PUNCH, SETATTR with a size).
        Reference choice: with OBD_CONNECT_VBR a mutable REPLY carries the object's VBR version
        before the change in pb_pre_versions[0]; Lustre's OST leaves it 0."""
        cfg = self.config
        pre = (version_before, 0, 0, 0) if exp.vbr and self.opcodes[C(name)]["mutable"] else (0, 0, 0, 0)
        if status != 0:
            return 0, pre
        if not self._wants_transno(exp, name):
            # a local transaction (dt_trans_start_local): no transno, no last_rcvd update.
            # Reference choice: it counts as committed at once.
            self._apply(effects, durable=True)
            return 0, pre
        transno = self._transno_for(exp, req)
        if vbr_object:
            for key, state in effects:
                if state is not None and not is_last_id(key):
                    state["version"] = transno
        exp.last_trans_xid = req.xid                                     # lcd_last_xid
        self._apply(effects, durable=False)
        self.pending.append(Txn(transno, exp.uuid, req.xid, [(key, copied(state)) for key, state in effects]))
        self._commit(len(self.pending) - cfg.commit_lag)
        return transno, pre

    def _transno_for(self, exp: Export, req: Request) -> int:
        """The transno of a transaction: a replay keeps its own (tgt_last_rcvd_update), any
        other takes the next one."""
        if req.flags & MSG_REPLAY and req.transno != 0:
            transno = req.transno
            self.last_transno = max(self.last_transno, transno)
            self.replayed[transno] = exp.uuid
            return transno
        return self._next_transno()

    def _next_transno(self) -> int:
        """A new transno: one above the highest issued (lut_last_transno)."""
        self.last_transno += 1
        return self.last_transno

    def _apply(self, effects: list, durable: bool) -> None:
        for key, state in effects:
            if is_last_id(key):
                tables = (self.last_ids, self.durable_last_ids) if durable else (self.last_ids,)
                for table in tables:
                    table[key[1]] = state
                continue
            for table in ((self.objects, self.durable) if durable else (self.objects,)):
                if state is None:
                    table.pop(key, None)
                else:
                    table[key] = copied(state)

    def _commit(self, count: int) -> None:
        """Commit the oldest `count` pending transactions."""
        if count <= 0:
            return
        done, self.pending = self.pending[:count], self.pending[count:]
        for txn in done:
            for key, state in txn.effects:
                if is_last_id(key):
                    self.durable_last_ids[key[1]] = state
                elif state is None:
                    self.durable.pop(key, None)
                else:
                    self.durable[key] = copied(state)
            self.last_committed = max(self.last_committed, txn.transno)
            exp = self.exports.get(txn.uuid)
            if exp is not None:
                exp.durable_trans_xid = txn.xid
                if txn.transno > exp.last_committed:
                    exp.last_committed = txn.transno

    # ---- saved replies -------------------------------------------------------------------------
    def _save(self, exp: Export, req: Request, reply: Reply) -> None:
        """Keep the REPLY to a mutable request for its resends (reference choice: reconstruction)."""
        self.saved[(exp.uuid, req.xid)] = reply

    def _reconstruct(self, exp: Export, saved: Reply) -> bytes:
        """A resend answered from its saved reply, with the export's current last_committed."""
        return self._pack(saved, exp)

    def _release_saved(self, exp: Export) -> None:
        """The replies the client has seen (pb_last_xid) are not kept any longer."""
        for key in [k for k in self.saved if k[0] == exp.uuid and k[1] <= exp.last_xid]:
            del self.saved[key]

    def _reported_last_committed(self, exp: Export) -> int:
        """The pb_last_committed of a reply on `exp`: the highest of its transnos committed."""
        return exp.last_committed


def copied(state):
    """A copy of an object's state (a flat dict of integers; a LAST_ID is an integer, a
    removed object None) that later changes of the original do not reach."""
    return dict(state) if isinstance(state, dict) else state
