"""Recovery (docs/target-rules.md §7): a stateful Hypothesis suite that restarts the target
at random points.

Three clients (all with OBD_CONNECT2_REPLAY_CREATE, so that every change has a transno)
create, change and destroy objects and keep their replay lists as a Lustre client does
(TRANSNO-6: a request whose transno is above the last committed value it was sent stays
on the list; the rest are dropped).  At a random point the target restarts; some clients
come back, reconnect and replay in an interleaving Hypothesis chooses, the others never
come back.  Afterwards every object is read back and must be what the committed changes
plus the replayed ones make — nothing else (RCV-STATE-1).  Transactions commit in transno
order, so the target's commit point C lies between the highest last-committed value any
client was told and the highest transno issued; a target that reports its commit point in
`restart`'s result is judged on exactly that point, otherwise every such C is tried.
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from ptlrpc_conformance.fixtures.stateful import BudgetedMachine, budgeted, part_examples, part_seed, run_machine
from ptlrpc_conformance.harness.data.registry import case_aliases
from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.ost.session import Obj, Session
from ptlrpc_conformance.harness.ost.client import ATTRS, EOF, MD, C, Expect, ost_body, reply

REQUIREMENTS = ["RCV-CONN-1", "RCV-REPLAY-1", "RCV-ORDER-1", "RCV-EPOCH-1", "RCV-STATE-1", "TGT-TRANSNO-1",
                "TGT-TRANSNO-3", "TGT-CONN-2"]
CLIENTS = ("r1", "r2", "r3")
OIDS = st.integers(1, 3)
KINDS = ("create", "setattr", "punch", "destroy")


class RecoveryMachine(BudgetedMachine):
    def __init__(self):
        super().__init__()
        self.s = Session(self.adapter)
        # (transno, client, opc, oid, valid, fields) of every change since the last full commit
        self.log: list[tuple] = []
        self.base: dict[int, Obj] = {}          # the state every change in `log` applies to
        self.replay: dict[str, list[tuple]] = {n: [] for n in CLIENTS}   # (transno, xid, opc, oid, valid, fields)
        self.restarts = 0
        if not self.idle:
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
    @rule(name=st.sampled_from(CLIENTS), oid=OIDS, kind=st.sampled_from(KINDS), value=st.integers(1, 1 << 20))
    @budgeted
    def change(self, name, oid, kind, value):
        c = self.c(name)
        if not c.connected:
            self.s.connect(c)
        opc, valid, fields = {
            "create": ("OST_CREATE", 0, {}),
            "setattr": ("OST_SETATTR", MD["FLUID"] | MD["FLMTIME"], {"o_uid": value, "o_mtime": value * 7}),
            "punch": ("OST_PUNCH", MD["FLSIZE"] | MD["FLBLOCKS"], {"o_size": value, "o_blocks": EOF}),
            "destroy": ("OST_DESTROY", 0, {}),
        }[kind]
        xid, _, n, rep = self.s.body_op(c, opc, oid, valid, **fields)
        if rep is not None and rep.body["pb_transno"]:
            t = rep.body["pb_transno"]
            self.log.append((t, name, opc, oid, valid, fields))
            self.replay[name].append((t, xid, opc, oid, valid, fields))
        self._prune(name)

    @rule(name=st.sampled_from(CLIENTS), oid=OIDS)
    @budgeted
    def getattr(self, name, oid):
        c = self.c(name)
        if not c.connected:
            self.s.connect(c)
        self.s.body_op(c, "OST_GETATTR", oid)
        self._prune(name)

    def _prune(self, name):
        """TRANSNO-6: drop the requests the client now knows committed."""
        known = self.s.seen_committed.get(name, 0)
        self.replay[name] = [r for r in self.replay[name] if r[0] > known]

    # -- the restart ------------------------------------------------------------------------------
    @rule(absent=st.sets(st.sampled_from(CLIENTS), max_size=2), order=st.permutations(CLIENTS))
    @budgeted
    def restart_and_recover(self, absent, order):
        s = self.s
        if self.restarts >= 2 or len(self.log) < 3:
            return                  # a restart with changes behind it, at most twice a run
        self.restarts += 1
        remembered = [n for n in order if self.c(n).connected]
        present = [n for n in remembered if n not in absent]
        told = max(s.seen_committed.values(), default=0)
        issued = s.checker.max_transno
        point = s.restart()
        for n in CLIENTS:
            self.c(n).connected = False
        if point is not None and point < told:
            s.fail([f"RCV-STATE-1: the restart reports commit point {point:#x}, below {told:#x}, a last "
                    f"committed value a client was sent"])
        for n in present:
            c = self.c(n)
            xid, data = c.connect()
            s.send(c, xid, data, reply(0, requirement="RCV-CONN-1", handle="nonzero",
                                       op_flags_all=C("MSG_CONNECT_RECOVERING") | C("MSG_CONNECT_REPLAYABLE"),
                                       why="reconnect during recovery"), "reconnect (recovering)")
            c.connected = True
            self._prune(n)          # the reconnect reply says what of this client's survived
        # replays: one outstanding request per client, interleaved in `order`
        queues = {n: sorted(self.replay[n]) for n in present}
        replayed = {n: list(queues[n]) for n in present}
        stage = {n: 0 for n in present}        # 0 replaying, 1 REQ_REPLAY_DONE sent, 2 LOCK_REPLAY_DONE sent
        expiries = 0
        while True:
            progress = False
            for n in present:
                c = self.c(n)
                if any(k[0] == n for k in s.waiting) or stage[n] == 2:
                    continue
                if queues[n]:
                    t, xid, opc, oid, valid, fields = queues[n].pop(0)
                    _, data = c.request(opc, [ost_body(oid, valid, **fields)], xid=xid, flags=C("MSG_REPLAY"),
                                        transno=t)
                    s.send(c, xid, data, Expect(type=wire.REPLY, status=None, transno="any",
                                                requirement="RCV-REPLAY-1", why=f"replay of transno {t:#x}"),
                           f"replay {opc} transno {t:#x}", later=True)
                else:
                    flag = ("MSG_REQ_REPLAY_DONE", "MSG_LOCK_REPLAY_DONE")[stage[n]]
                    xid, data = c.request("OBD_PING", flags=C(flag))
                    s.send(c, xid, data, reply(0, requirement="RCV-REPLAY-1", why=flag), flag, later=True)
                    stage[n] += 1
                progress = True
            if progress:
                continue
            if all(stage[n] == 2 for n in present) and not s.waiting:
                break                   # every client is done: recovery is over
            if expiries == 2:
                s.fail(["RCV-ORDER-1: recovery is stuck: the clients wait for replies that never come "
                        f"({sorted(s.waiting)}) after two expiries of the recovery window"])
            s.expire_recovery()         # the window expires: the absent clients are evicted
            expiries += 1
        s.end_recovery()                # (recovery is over: nothing left to expire)
        # read every object back and compare with what the commit point allows
        reader = self.c(present[0]) if present else self.c(order[0])
        if not reader.connected:
            s.connect(reader)
        observed = {}
        for oid in (1, 2, 3):
            xid, data = reader.request("OST_GETATTR", [ost_body(oid)])
            rep = s.send(reader, xid, data, Expect(type=wire.REPLY, status=None, transno="zero",
                                                   requirement="RCV-STATE-1", why="read back after recovery"),
                         "read back")
            observed[oid] = _observed(rep)
        candidates = self._candidates(point, told, issued, replayed)
        match = next((state for _, state in candidates if _same(state, observed)), None)
        if match is None:
            shown = "\n".join(f"  commit point {cp:#x}: {_show(state)}" for cp, state in candidates[:6])
            s.fail([f"RCV-STATE-1: after recovery the objects are {_show(observed)}; what the committed and "
                    f"replayed changes allow:\n{shown}"])
        s.objects = {oid: copy.deepcopy(obj) for oid, obj in match.items()}
        # a sync commits everything; the model starts again from what was read back
        c = reader
        xid, data = c.request("OST_SYNC", [ost_body(1)])
        s.send(c, xid, data, Expect(type=wire.REPLY, status=None, transno="zero", requirement="TGT-ERR-2",
                                    why="sync after recovery"), "sync")
        self.log, self.base = [], copy.deepcopy(s.objects)
        self.replay = {n: [] for n in CLIENTS}     # absent clients were evicted: a later connect is new

    def _candidates(self, point, told, issued, replayed):
        """(commit point, object state) for every commit point the clients' knowledge allows."""
        replay_set = {r[0] for rs in replayed.values() for r in rs}
        if point is not None:
            points = [point]
        else:
            points = sorted({told, issued} | {e[0] for e in self.log if told <= e[0] <= issued})
        out = []
        for cp in points:
            state = copy.deepcopy(self.base)
            for t, _, opc, oid, valid, fields in sorted(self.log, key=lambda e: e[0]):
                if t <= cp or t in replay_set:
                    _apply(state, opc, oid, valid, fields)
            out.append((cp, state))
        return out


def _apply(state, opc, oid, valid, fields):
    obj = state.get(oid)
    if opc == "OST_CREATE":
        if obj is None:
            state[oid] = Obj()
    elif obj is None:
        return
    elif opc == "OST_DESTROY":
        del state[oid]
    elif opc == "OST_PUNCH":
        obj.size = fields["o_size"]
    elif opc == "OST_SETATTR":
        for attr, (fname, bit) in ATTRS.items():
            if attr != "size" and valid & bit:
                setattr(obj, attr, fields.get(fname, 0) & (0o7777 if attr == "mode" else ~0))


def _observed(rep):
    if rep is None or rep.body["pb_type"] != wire.REPLY or rep.status != 0:
        return None
    oa = rep.struct(1, "ost_body") or {}
    return Obj(size=oa.get("oa.o_size", 0), atime=oa.get("oa.o_atime", 0), mtime=oa.get("oa.o_mtime", 0),
               ctime=oa.get("oa.o_ctime", 0), mode=oa.get("oa.o_mode", 0) & 0o7777, uid=oa.get("oa.o_uid", 0),
               gid=oa.get("oa.o_gid", 0))


def _same(state, observed) -> bool:
    return all(state.get(oid) == observed[oid] for oid in observed)


def _show(state) -> str:
    parts = []
    for oid in (1, 2, 3):
        o = state.get(oid)
        parts.append(f"{oid}: absent" if o is None else f"{oid}: size {o.size} uid {o.uid} mtime {o.mtime}")
    return "; ".join(parts)


# parts of equal weight of one budget of examples, recovery.stateful.restart.1 ...
# (spec/case_aliases.yaml: the old id names them all)
PARTS = case_aliases()["recovery.stateful.restart"]


@pytest.mark.parametrize("part", [
    pytest.param(c, id=c, marks=pytest.mark.conformance(case=c, requirements=REQUIREMENTS)) for c in PARTS])
def test_recovery_stateful(part, iut, need, conclude, conformance_examples, conformance_seed):
    """Random changes, restarts at random points, replays in random interleavings."""
    need(iut, "exchange")
    need(iut, "restart")
    run_machine(RecoveryMachine, iut, conclude, case=part, requirements=REQUIREMENTS,
                examples=part_examples(max(10, conformance_examples // 4), len(PARTS)), steps=30,
                run_seed=part_seed(part, conformance_seed), needs=("target", "restart"), what="recovery rules")
