"""The reference target's recovery: a restart, the recovery window and its end, the
recovery filter (tgt_filter_recovery_request, target_queue_recovery_request) and the
recovery thread's progress (replays in transno order, then the lock replays, then the rest)."""
from __future__ import annotations

from .constants import MSG_LOCK_REPLAY_DONE, MSG_REQ_REPLAY_DONE
from .state import Export, Held, Request
from .transactions import copied


class Recovery:
    """Restart and recovery of `Target` (a mix-in)."""

    def restart(self) -> int:
        """Crash and come back: uncommitted transactions are lost, clients remembered.
        Returns the commit point at the crash: the highest transno on stable storage."""
        cfg = self.config
        commit_point = self.last_committed
        lost = {t.transno for t in self.pending}
        self._reload()
        self.pending = []
        self.saved = {k: r for k, r in self.saved.items() if r.transno and r.transno not in lost}
        self.cookies = {}
        remembered = {}
        for uuid, exp in self.exports.items():
            if not cfg.recovery:                        # recovery disabled: no client in last_rcvd
                continue
            remembered[uuid] = Export(uuid=uuid, client_handle=exp.client_handle, flags=exp.flags,
                                      flags2=exp.flags2, asked_rdonly=exp.asked_rdonly, peer=exp.peer,
                                      last_committed=exp.last_committed, last_trans_xid=exp.durable_trans_xid,
                                      durable_trans_xid=exp.durable_trans_xid)
        self.exports = remembered
        self.replay_queue, self.lock_queue, self.final_queue = [], [], []
        self.replayed = {}
        self.req_replay_over = False
        self.recovering = True
        self.next_recovery_transno = self.last_committed + 1
        self._out = []
        self._current = None
        self._advance()
        self._out = []
        return commit_point

    def _reload(self) -> None:
        """What a restart finds on stable storage: the committed objects and LAST_IDs."""
        self.objects = {key: copied(state) for key, state in self.durable.items()}
        self.last_ids = dict(self.durable_last_ids)
        # tgt_server_data_init / tgt_clients_data_init: lut_last_transno restarts from the
        # highest transno on stable storage (the commit point), not from the highest issued;
        # a change served during recovery takes the next one (and may reuse a lost transno)
        self.last_transno = self.last_committed

    def end_recovery(self) -> list[dict]:
        """The recovery window expires once: stale clients are evicted — those that have not
        reconnected, and those with nothing queued that have not said MSG_REQ_REPLAY_DONE
        (Lustre's class_disconnect_stale_exports) — and recovery goes on with the others, the
        window extended (target_recovery_overseer, extend_recovery_timer); the replies sent
        meanwhile are returned.  With `end_recovery_hard` it is the hard limit instead: every
        client that has not finished is evicted, its held requests answered ERR -ENOTCONN
        (abort_req_replay_queue, abort_lock_replay_queue), and recovery ends."""
        self._out = []
        self._current = None
        if self.recovering and self.config.end_recovery_hard:
            for exp in list(self.exports.values()):
                if exp.lock_done:
                    continue
                for held in [h for h in self.replay_queue + self.lock_queue if h.uuid == exp.uuid]:
                    self._emit(held, self._reject(held.req, "ENOTCONN", exp))
                self._evict(exp, advance=False)
            self._advance(force=True)
        elif self.recovering:
            for exp in list(self.exports.values()):
                queued = any(h.uuid == exp.uuid for h in self.replay_queue)
                if not exp.cookie or (not exp.req_done and not queued):
                    self._evict(exp, advance=False)
            self._advance()      # recovery goes on with the clients left; it ends when they are done
        out, self._out = self._out, []
        return out

    def _recovery_filter(self, exp: Export, req: Request, row: dict) -> bytes | None:
        """tgt_filter_recovery_request and target_queue_recovery_request."""
        mode = row["recovery"]
        if mode == "serve":
            return self._process(exp, req)
        if mode != "queue":
            return self._reject(req, "EAGAIN", exp)
        held = Held(exp.uuid, req)
        flags = req.flags
        if flags & MSG_LOCK_REPLAY_DONE:
            exp.req_done = exp.lock_done = True
            self.final_queue = [h for h in self.final_queue if h.uuid != exp.uuid] + [held]
            return self._hold(held)
        if flags & MSG_REQ_REPLAY_DONE:
            exp.req_done = True
            self.lock_queue.append(held)
            return self._hold(held)
        if not req.transno:
            return self._process(exp, req)              # not a replay: served at once
        return self._queue_replay(exp, req, held)

    def _queue_replay(self, exp: Export, req: Request, held: Held) -> bytes | None:
        """A replay during recovery: queued to run in transno order (target_queue_recovery_request),
        or run at once when its transno is already behind."""
        if self.config.claim_window and req.transno == self._window == self.next_recovery_transno - 1:
            self.replay_queue.insert(0, held)           # queued before the count moved: waits (below)
            return self._hold(held)
        if req.transno < self.next_recovery_transno:
            # below the next expected transno (committed before the crash, already replayed or
            # skipped as a gap): runs at once, whoever replayed that transno before
            return self._process(exp, req)
        # a transno still held by a queued replay: the newcomer is dropped, never answered.
        # The reference has no concurrency, so "still queued" is exact here: the first replay
        # is queued until its turn comes, then it has run and the rule above applies.
        for other in self.replay_queue:
            if other.req.transno == req.transno:
                if other.uuid == exp.uuid and other.req.xid == req.xid:
                    other.req = req                      # a resend of a queued replay: the queued copy answers
                    return self._hold(other)
                if self._claim_dropped(exp, req, other):
                    return None
        self.replay_queue.append(held)
        self.replay_queue.sort(key=lambda h: h.req.transno)
        return self._hold(held)

    def _claim_dropped(self, exp: Export, req: Request, queued: Held) -> bool:
        """A replay of the transno `queued` holds, from another client or XID: dropped."""
        return True

    def _hold(self, held: Held) -> None:
        self._current = held
        self._current_reply = None
        self._advance()
        return None

    # ---- recovery progress -------------------------------------------------------------------
    def _advance(self, force: bool = False) -> None:
        """Run whatever recovery allows now (and everything, with `force`)."""
        if not self.recovering:
            return
        live = list(self.exports.values())
        if not force and any(not e.cookie for e in live):
            return                                        # waiting for every remembered client
        # stage 1: request replay, in transno order
        if self.req_replay_over:
            while self.replay_queue:                      # late replays run in order
                self._run_held(self.replay_queue.pop(0))
        while not self.req_replay_over:
            replaying = [e for e in self.exports.values() if not e.req_done]
            if self.replay_queue:
                first = self.replay_queue[0]
                if first.req.transno < self.next_recovery_transno:
                    # a claim queued in the window (claim_window): it runs once no client is
                    # still replaying (Lustre's gap rule would trip its assertion before that)
                    if replaying and not force:
                        return
                    self.replay_queue.pop(0)
                    self._run_held(first)
                    self.next_recovery_transno += 1
                    continue
                if first.req.transno == self.next_recovery_transno:
                    pass
                elif force or all(any(h.uuid == e.uuid for h in self.replay_queue) for e in replaying):
                    self.next_recovery_transno = first.req.transno        # skip the gap
                else:
                    return
                self.replay_queue.pop(0)
                self._run_held(first)
                self.window_transno = first.req.transno
                self.next_recovery_transno += 1
                continue
            if replaying and not force:
                return
            self.req_replay_over = True
            for exp in list(self.exports.values()):
                if exp.vbr_failed:
                    self._evict(exp, advance=False)
        # stage 2: requests that ended their client's replays
        while self.lock_queue:
            self._run_held(self.lock_queue.pop(0))
        if not force and any(not e.lock_done for e in self.exports.values()):
            return
        # stage 3: recovery ends; the new boot epoch is written synchronously, which commits
        # everything before it (tgt_boot_epoch_update)
        self.recovering = False
        self._commit(len(self.pending))
        self._new_boot_epoch()
        for exp in self.exports.values():
            exp.in_recovery = exp.req_done = exp.lock_done = False
        final, self.final_queue = self.final_queue, []
        for held in final:
            self._run_held(held)

    def _new_boot_epoch(self) -> None:
        """The boot epoch after recovery: the next transno starts the next epoch."""
        epoch = max(self.last_transno >> 32, self.boot_epoch) + 1
        self.boot_epoch = epoch
        self.last_transno = epoch << 32
        self.last_committed = max(self.last_committed, self.last_transno)

    def _run_held(self, held: Held) -> None:
        exp = self.exports.get(held.uuid)
        reply = None
        if exp is not None and exp.cookie:
            reply = self._process(exp, held.req)
        self._emit(held, reply)

    def _emit(self, held: Held, reply: bytes | None) -> None:
        if held is self._current:
            self._current_reply = reply
        elif reply is not None:
            self._out.append({"client": held.req.peer, "xid": held.req.xid, "data": reply.hex()})

