"""The stateful machine of the recovery suite (suites/test_recovery.py, whose cases run it and
whose docstring says what it does and what it judges): clients that change objects and keep
replay lists, restarts of the target at random points, replays in random interleavings, and
the states the rules allow afterwards.  A module of its own, imported by the stateful cases
when they run: defining the machine's rules imports Hypothesis, which collecting the suites
does not need."""
from __future__ import annotations

import itertools
from dataclasses import dataclass

from hypothesis.stateful import initialize, rule

from ptlrpc_conformance.fixtures.strategies import a_few_block, choice, drawn_as_one, number
from ptlrpc_conformance.fixtures.stateful import BudgetedMachine, budgeted
from ptlrpc_conformance.harness.ost import model, wire
from ptlrpc_conformance.harness.ost.client import (EOF, MAX_ID, MD, AnyOf, C, Expect, err, ost_body,
                                                   reply, reply_object_id)
from ptlrpc_conformance.harness.ost.model import State
from ptlrpc_conformance.harness.ost.session import Session

CLIENTS = ("r1", "r2", "r3")
KINDS = ("create", "setattr", "punch", "destroy")
PICK = number(1 << 16)
MAX_CANDIDATES = 4096


@dataclass
class Change:
    """A change the target ran with status 0: its transno (0: a create without one, a local
    transaction), who sent it, and what it did."""
    transno: int
    client: str
    xid: int
    opc: str
    oid: int
    valid: int
    fields: dict
    reply_id: int | None = None          # a create's reply id
    prev: int = 0                        # the highest transno issued before it (a create's batches come after)


@dataclass
class Ran:
    """A request run during recovery: a replay of `change`, or a change served at once."""
    change: Change
    replay: bool
    status: int
    transno: int
    batch: int
    reply_id: int | None = None


class RecoveryMachine(BudgetedMachine):
    release = None          # the run's Lustre release (run_machine sets it from the run's settings)

    def __init__(self):
        super().__init__()
        self.s = Session(self.adapter, release=self.release)
        self.log: list[Change] = []              # every change since `base`, in the order issued
        self.base = State()                      # the durable state every change in `log` applies to
        self.replay: dict[str, list[Change]] = {n: [] for n in CLIENTS}
        self.restarts = 0
        self.settle_floor = 0                    # a restart waits until a client was told a commit above it
        self.s.reset()

    def c(self, name):
        return self.s.clients[name]

    @initialize()
    @budgeted
    def start(self):
        for name in CLIENTS:
            self.s.add_client(name, replay_create=True)
            self.s.connect(self.c(name))

    # -- changes and reads --------------------------------------------------------------------
    @rule(args=drawn_as_one(choice(CLIENTS), PICK, choice(KINDS), number(1 << 20, 1), choice([1, 2])))
    @budgeted
    def change(self, args):
        name, pick, kind, value, more = args
        c = self.c(name)
        if not c.connected:
            self.s.connect(c)
        last = self.s.state.last_id
        if kind == "create":
            oid = 1 if last is None else last + more
        else:
            ids = self.s.modelled_ids()
            if not ids:
                return
            oid = ids[pick % len(ids)]
        opc, valid, fields = {
            "create": ("OST_CREATE", 0, {}),
            "setattr": ("OST_SETATTR", MD["FLUID"] | MD["FLMTIME"], {"o_uid": value % MAX_ID, "o_mtime": value * 7}),
            "punch": ("OST_PUNCH", MD["FLSIZE"] | MD["FLBLOCKS"], {"o_size": value, "o_blocks": EOF}),
            "destroy": ("OST_DESTROY", 0, {}),
        }[kind]
        prev = self.s.checker.max_transno
        xid, _, n, rep = self.s.body_op(c, opc, oid, valid, **fields)
        if rep is not None and rep.body["pb_type"] == wire.REPLY and rep.status == 0:
            ch = Change(rep.body["pb_transno"], name, xid, opc, oid, valid, fields,
                        reply_object_id(rep) if opc == "OST_CREATE" else None, prev)
            self.log.append(ch)
            if ch.transno:
                self.replay[name].append(ch)
        self._prune(name)

    @rule(args=drawn_as_one(choice(CLIENTS), PICK))
    @budgeted
    def getattr(self, args):
        name, pick = args
        c = self.c(name)
        ids = self.s.modelled_ids()
        if not ids:
            return
        if not c.connected:
            self.s.connect(c)
        self.s.body_op(c, "OST_GETATTR", ids[pick % len(ids)])
        self._prune(name)

    def _prune(self, name):
        """TRANSNO-6: drop the requests the client now knows committed."""
        known = self.s.seen_committed.get(name, 0)
        self.replay[name] = [r for r in self.replay[name] if r.transno > known]

    # -- the restart ------------------------------------------------------------------------------
    @rule(args=drawn_as_one(a_few_block(CLIENTS, 2), choice(itertools.permutations(CLIENTS)), choice([False, True])))
    @budgeted
    def restart_and_recover(self, args):
        """`absent`: up to two clients that do not come back; `order`: the order the others
        reconnect in.  `prune`: the clients drop what their reconnect reply says committed (as
        Lustre's do); without, they also replay transactions the target had committed
        (deliberately: it must run them again or answer them from saved replies)."""
        absent, order, prune = args
        s = self.s
        told = max(s.seen_committed.values(), default=0)
        if self.restarts >= 2 or not self.log or told <= self.settle_floor and self.restarts:
            return                  # a restart with changes behind it, at most twice a run
        self.restarts += 1
        remembered = [n for n in order if self.c(n).connected]
        issued = s.checker.max_transno
        point = s.restart()
        for n in CLIENTS:
            self.c(n).connected = False
        if point is not None and point < told:
            s.fail([f"RCV-STATE-1: the restart reports commit point {point:#x}, below {told:#x}, a last "
                    f"committed value a client was sent"])
        # a client none of whose transactions is known committed may have been forgotten
        # (its record was a local transaction: tgt_client_new)
        def may_forget(n):
            mine = [ch.transno for ch in self.log if ch.client == n and ch.transno] + \
                   [ch.transno for ch in self.replay[n]]
            return s.seen_committed.get(n, 0) == 0 and (point is None or all(t > point for t in mine))
        present, gone = [], []
        recovering = True
        for n in (n for n in remembered if n not in absent):
            c = self.c(n)
            xid, data = c.connect()
            back = reply(0, requirement="RCV-CONN-1", handle="nonzero",
                         op_flags_all=C("MSG_CONNECT_RECOVERING") | C("MSG_CONNECT_REPLAYABLE"),
                         why="reconnect during recovery")
            alts = [("remembered", back)]
            if recovering and may_forget(n):
                alts.append(("forgotten", err("EBUSY", "RCV-CONN-1", "a client with nothing committed may be forgotten")))
                if not present and all(may_forget(m) for m in remembered):
                    alts.append(("no-recovery", reply(0, requirement="RCV-CONN-1", handle="nonzero",
                                                      op_flags_all=C("MSG_CONNECT_REPLAYABLE"),
                                                      op_flags_none=C("MSG_CONNECT_RECOVERING"),
                                                      why="no client remembered: no recovery, a new export")))
            if not recovering:
                alts = [("new", reply(0, requirement="RCV-CONN-1", handle="nonzero",
                                      op_flags_all=C("MSG_CONNECT_REPLAYABLE"),
                                      op_flags_none=C("MSG_CONNECT_RECOVERING") | C("MSG_CONNECT_RECONNECT"),
                                      why="no recovery: a new export"))]
            expect = AnyOf(alts) if len(alts) > 1 else alts[0][1]
            s.send(c, xid, data, expect, "reconnect (recovering)")
            outcome = s.judge.outcomes.get(len(s.steps))
            if outcome == "forgotten":
                gone.append(n)
                continue
            if outcome == "no-recovery":
                recovering = False
                s.judge.recovery_ended()
            c.connected = True
            present.append(n)
            if recovering and prune:
                self._prune(n)      # the reconnect reply says what of this client's survived
        ran: list[Ran] = []
        replay_steps: dict[int, Change] = {}
        if recovering:
            self._replay_all(present, replay_steps)
            s.end_recovery()            # (recovery is over: nothing left to expire)
            for n in s.judge.evicted:  # evicted at an expiry: a later connect is new
                self.c(n).connected = False
            present = [n for n in present if n not in s.judge.evicted]
        held_ran = set()                # replay steps whose reply the target deferred and then sent
        for n, ch in replay_steps.items():
            rep = s.replies.get(n)
            if rep is None or s.judge.outcomes.get(n) == "evicted":
                continue                # dropped, or refused to an evicted client: it did not run
            if n in s.judge.deferred:
                held_ran.add(n)
            ran.append(Ran(ch, True, rep.status if rep.body["pb_type"] == wire.REPLY else None,
                           rep.body["pb_transno"], s.judge.batch.get(n, n),
                           reply_object_id(rep) if ch.opc == "OST_CREATE" else None))
        candidates = self._candidates(point, told, issued, ran)
        if not candidates:
            s.fail(["RCV-STATE-1: no commit point explains the statuses the replays and the changes served during "
                    "recovery got (" + ", ".join(f"{r.change.opc} transno {r.change.transno:#x}: {r.status}" for r in ran)
                    + ")"])
        # read every object back and compare with what the rules allow
        reader = self.c(present[0]) if present else self.c(order[0])
        if not reader.connected:
            s.connect(reader)
            reader.connected = True
        ids = sorted({i for _, st_ in candidates for i in st_.objects} |
                     {st_.last_id + 1 for _, st_ in candidates if st_.last_id is not None})
        observed = {}
        for oid in ids:
            xid, data = reader.request("OST_GETATTR", [ost_body(oid)])
            rep = s.send(reader, xid, data, Expect(type=wire.REPLY, status=None, transno="zero",
                                                   requirement="RCV-STATE-1", why="read back after recovery"),
                         "read back", oid=oid)
            observed[oid] = model.observed(rep)
        matches = [(cp, st_) for cp, st_ in candidates
                   if all(model.same(st_.objects.get(oid), seen) for oid, seen in observed.items())]
        if not matches:
            shown = "\n".join(f"  commit point {cp:#x}: {_show(st_, ids)}" for cp, st_ in candidates[:6])
            s.fail([f"RCV-STATE-1: after recovery the objects are {_show_seen(observed)}; what the committed, replayed "
                    f"and recovery-time changes allow:\n{shown}"])
        if held_ran:
            # a replay the target held came back, and the objects are what running the held
            # replays of each batch in transno order makes: the replay order was judged
            s.judge.judged.append("RCV-ORDER-1")
        state = matches[0][1].copy()
        for oid, seen in observed.items():
            if seen is not None and oid in state.objects:
                state.objects[oid] = model.resolve(state.objects[oid], seen)
        if len({m[1].last_id for m in matches}) > 1:
            state = State()             # LAST_ID not known: the next create tells it
        s.state = state
        self.base, self.log = state.copy(), []
        for n in CLIENTS:               # absent and forgotten clients were evicted: a later connect is new
            if n not in present:
                self.replay[n] = []
                self.c(n).unreplied.clear()
        self.settle_floor = s.checker.epoch_floor

    def _replay_all(self, present: list[str], replay_steps: dict[int, Change]) -> None:
        """Replays (one outstanding request per client, interleaved in `present`'s order),
        then each client's MSG_REQ_REPLAY_DONE (for the lock replays that carry it in Lustre:
        the suite replays no locks) and its final ping, MSG_LOCK_REPLAY_DONE with
        MSG_REQ_REPLAY_DONE (signal_completed_replay).  A client found evicted sends no more."""
        s = self.s
        queues = {n: sorted(self.replay[n], key=lambda ch: ch.transno) for n in present}
        stage = {n: 0 for n in present}        # 0 replaying, 1 REQ_REPLAY_DONE sent, 2 final ping sent
        expiries = 0
        while True:
            progress = False
            for n in present:
                c = self.c(n)
                if n in s.judge.evicted:
                    stage[n] = 2
                if any(k[0] == n for k in s.waiting) or stage[n] == 2:
                    continue
                if queues[n]:
                    ch = queues[n].pop(0)
                    _, data = c.request(ch.opc, [ost_body(ch.oid, ch.valid, **ch.fields)], xid=ch.xid,
                                        flags=C("MSG_REPLAY"), transno=ch.transno)
                    s.send(c, ch.xid, data, Expect(type=wire.REPLY, status=None, transno="any",
                                                   requirement="RCV-REPLAY-1", why=f"replay of transno {ch.transno:#x}"),
                           f"replay {ch.opc} transno {ch.transno:#x}", later=True, oid=ch.oid)
                    replay_steps[len(s.steps)] = ch
                else:
                    flag = ("MSG_REQ_REPLAY_DONE", "MSG_LOCK_REPLAY_DONE")[stage[n]]
                    flags = C(flag) | (C("MSG_REQ_REPLAY_DONE") if stage[n] else 0)
                    xid, data = c.request("OBD_PING", flags=flags)
                    s.send(c, xid, data, reply(0, requirement="RCV-REPLAY-1", why=flag), flag, later=True)
                    stage[n] += 1
                progress = True
            if progress:
                continue
            # every client left waits; a replay whose transno another client's held replay
            # claims may be dropped: the rules require no reply to it
            owed = sorted(k for k, step in s.waiting.items() if step not in s.judge.may_drop)
            if not owed:
                return                  # every client is done or evicted: recovery is over
            if expiries == 2:
                s.fail(["RCV-ORDER-1: recovery is stuck: the clients wait for replies that never come "
                        f"({owed}) after two expiries of the recovery window"])
            s.expire_recovery()         # the window expires: stale clients (or every unfinished one) are evicted
            expiries += 1

    def _candidates(self, point, told, issued, ran: list[Ran]) -> list[tuple[int, State]]:
        """(commit point, object state) for every commit point and every choice the rules
        leave to the target that agrees with the statuses the target answered."""
        if point is not None:
            points = [point]
        else:
            inside = {ch.transno - 1 for ch in self.log if ch.opc == "OST_CREATE" and ch.transno - 1 > ch.prev}
            points = sorted({p for p in {told, issued} | {ch.transno for ch in self.log} | inside if told <= p <= issued})
        out = []
        for cp in points:
            # the changes that survived the crash, in the order issued
            states = [self.base.copy()]
            for i, ch in enumerate(self.log):
                if ch.transno:
                    whole = ch.transno <= cp
                    # a create takes a transno per batch and its reply carries the last: when the
                    # commit point falls between, its first batches survive (any prefix of its ids)
                    part = not whole and ch.opc == "OST_CREATE" and ch.prev < cp
                else:           # a local create: it survives if a later transno is committed
                    later = [x.transno for x in self.log[i + 1:] if x.transno]
                    whole = bool(later) and min(later) <= cp
                    part = not whole
                nxt = []
                for st_ in states:
                    if whole:
                        st2 = st_.copy()
                        model.apply(st2, ch.opc, ch.oid, ch.valid, ch.fields, ch.reply_id)
                        nxt.append(st2)
                    elif part:
                        last = st_.last_id
                        top = ch.reply_id if ch.reply_id is not None else ch.oid
                        for k in ([None] if last is None else range(last, max(last, top) + 1)):
                            st2 = st_.copy()
                            if k is None:
                                model.apply(st2, ch.opc, ch.oid, ch.valid, ch.fields, ch.reply_id)
                            elif k > last:
                                model.create(st2, k, k)
                            nxt.append(st2)
                        if last is None:
                            nxt.append(st_)
                    else:
                        nxt.append(st_)
                states = _unique(nxt)[:MAX_CANDIDATES]
            # then what ran during recovery, in the order it ran
            order = sorted(ran, key=lambda r: (r.batch, 1 if r.replay and r.change.transno > cp else 0,
                                               r.change.transno))
            for r in order:
                nxt = []
                committed_replay = r.replay and r.change.transno <= cp
                for st_ in states:
                    st2 = st_.copy()
                    status = model.apply(st2, r.change.opc, r.change.oid, r.change.valid, r.change.fields,
                                         r.reply_id if r.reply_id is not None else r.change.reply_id)
                    if status == r.status:
                        nxt.append(st2)         # run (again)
                    if committed_replay and r.status == 0 and r.transno == r.change.transno:
                        nxt.append(st_)         # answered from a saved reply: not run again
                states = _unique(nxt)[:MAX_CANDIDATES]
            out += [(cp, st_) for st_ in states]
        return out[:MAX_CANDIDATES]


def _unique(states: list[State]) -> list[State]:
    seen, out = set(), []
    for st_ in states:
        key = repr((sorted(st_.objects.items()), st_.last_id, st_.floor))
        if key not in seen:
            seen.add(key)
            out.append(st_)
    return out


def _show(state: State, ids) -> str:
    return "; ".join(f"{oid}: absent" if state.objects.get(oid) is None else f"{oid}: {state.objects[oid].show()}"
                     for oid in ids)


def _show_seen(observed) -> str:
    return "; ".join(f"{oid}: absent" if o is None else f"{oid}: {o.show()}" for oid, o in observed.items())
