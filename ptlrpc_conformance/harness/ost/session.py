"""A session with a target: clients, the suite's model of the OST's objects, and every step
recorded so that a failure can be shown as a readable transcript and saved as a scenario
vector (harness/ost/scenario.py).  Each step is judged by the step judge scenario replay
uses too (harness/ost/steps.py).

Used by the stateful suite (suites/test_target.py) and by tools/gen_scenarios.py.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.ost.invariants import TargetChecker
from ptlrpc_conformance.harness.ost.scenario import (Record, Scenario, Step, call, deferred_replies, exchange,
                                                     render_transcript)
from ptlrpc_conformance.harness.ost.steps import StepJudge, connect_cookie
from ptlrpc_conformance.harness.ost.client import ATTRS, MD, Client, Expect, err, ost_body, reply, C, EOF

GETATTR_BITS = MD["FLSIZE"] | MD["FLATIME"] | MD["FLMTIME"] | MD["FLCTIME"] | MD["FLMODE"] | MD["FLUID"] | MD["FLGID"]


@dataclass
class Obj:
    size: int = 0
    atime: int = 0
    mtime: int = 0
    ctime: int = 0
    mode: int = 0       # permission bits
    uid: int = 0
    gid: int = 0


class StepFailed(AssertionError):
    pass


@dataclass
class Session:
    adapter: object
    clients: dict[str, Client] = field(default_factory=dict)
    objects: dict[int, Obj] = field(default_factory=dict)
    steps: list[Step] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    cookie_owner: dict[int, str] = field(default_factory=dict)
    reconstruct: bool = False
    judge: StepJudge = field(init=False)

    def __post_init__(self):
        self.judge = StepJudge(reconstruct=self.reconstruct)

    @property
    def checker(self) -> TargetChecker:
        return self.judge.checker

    @property
    def replies(self) -> dict[int, wire.Message | None]:
        """step -> its reply, parsed"""
        return self.judge.replies

    @property
    def waiting(self) -> dict[tuple[str, int], int]:
        """(client, xid) -> the step whose reply is deferred"""
        return self.judge.waiting

    @property
    def seen_committed(self) -> dict[str, int]:
        """client -> highest last_committed sent to it"""
        return self.judge.committed

    def reset(self) -> None:
        call(self.adapter, {"op": "reset"})

    def add_client(self, name: str, **kw) -> Client:
        c = Client(name, handle=0x1000 + len(self.clients) * 0x111, **kw)
        self.clients[name] = c
        return c

    # -- one exchange ---------------------------------------------------------------------
    def send(self, client: Client, xid: int, data: bytes, expect: Expect | None, note: str = "",
             same_as: int | None = None, track: bool = True, later: bool = False) -> wire.Message | None:
        """Exchange one request; judge the reply against `expect` and the invariants; raise
        StepFailed (with the transcript) on any problem.  With `later` (recovery) the reply
        may be deferred: it is judged when it arrives (None is returned meanwhile)."""
        reply_bytes, deferred = exchange(self.adapter, client.name, xid, data)
        n = len(self.steps) + 1
        patch = {}
        req, _ = wire.try_parse(data, "request")
        if req is not None and req.body["pb_handle"] in self.cookie_owner:
            patch["pb_handle"] = self.cookie_owner[req.body["pb_handle"]]
        if req is not None and req.body["pb_transno"]:       # a replay: its transno came from a reply
            source = next((m for m, r in self.replies.items()
                           if r is not None and r.body["pb_transno"] == req.body["pb_transno"]), None)
            if source is not None:
                patch["pb_transno"] = f"@{source}"
        self.steps.append(Step(client=client.name, xid=xid, request=data, patch=patch, expect=expect,
                               same_as=same_as, note=note, later=later))
        self.records.append(Record(n, client.name, xid, data, reply_bytes, note))
        rep = None
        if reply_bytes is None and later:
            self.judge.defer(n, client.name, xid)
        else:
            rep = self._judge(n, reply_bytes)
        self.absorb(deferred)
        self._raise_if_problems()
        cookie = connect_cookie(rep) if track else None
        if cookie is not None:
            client.cookie = cookie
            self.cookie_owner[client.cookie] = client.name
        return rep

    def _judge(self, n: int, reply_bytes: bytes | None) -> wire.Message | None:
        step, rec = self.steps[n - 1], self.records[n - 1]
        rep, found = self.judge.judge(n, step.client, step.xid, step.request, reply_bytes, step.expect, step.same_as)
        rec.problems += found
        self.problems += [f"step {n}: {p}" for p in rec.problems]
        return rep

    def absorb(self, deferred) -> None:
        """Judge deferred replies (recovery) as they arrive."""
        matched, unmatched = self.judge.arrived(deferred)
        self.problems += unmatched
        if self.records:
            self.records[-1].problems += unmatched
        for n, data in matched:
            self.records[n - 1].reply = data
            self.records[n - 1].note += " (reply deferred)"
            self._judge(n, data)

    def _raise_if_problems(self) -> None:
        if self.problems:
            raise StepFailed(self.failure_text())

    def restart(self) -> int | None:
        """The testee's restart; returns the commit point it reports, if any."""
        result = call(self.adapter, {"op": "restart"})
        self.steps.append(Step(op="restart"))
        self.records.append(Record(len(self.steps), "", 0, b"", None, "restart"))
        self.judge.restart()
        point = result.get("last_committed")
        if point is not None and (not isinstance(point, int) or isinstance(point, bool) or point < 0):
            self.fail(["RCV-STATE-1: restart's last_committed is not a non-negative integer"])
        return point

    def expire_recovery(self) -> None:
        """end_recovery while clients still wait: stale clients are evicted, recovery goes on."""
        result = call(self.adapter, {"op": "end_recovery"})
        self.steps.append(Step(op="end_recovery"))
        self.records.append(Record(len(self.steps), "", 0, b"", None, "end_recovery (the window expires)"))
        self.absorb(deferred_replies(result.get("replies") or []))
        self._raise_if_problems()

    def end_recovery(self) -> None:
        """end_recovery when every client left is done: nothing may be left waiting."""
        result = call(self.adapter, {"op": "end_recovery"})
        self.steps.append(Step(op="end_recovery"))
        self.records.append(Record(len(self.steps), "", 0, b"", None, "end_recovery"))
        self.absorb(deferred_replies(result.get("replies") or []))
        self.judge.recovery_ended()
        for n, client, xid in self.judge.never_answered():
            self.records[n - 1].problems.append("the deferred reply never came (recovery is over)")
            self.problems.append(f"step {n}: the deferred reply to {client} xid {xid} never came")
        self._raise_if_problems()

    def fail(self, problems: list[str]) -> None:
        """Add problems to the last step and stop the run."""
        n = len(self.records)
        if self.records:
            self.records[-1].problems += problems
        self.problems += [f"step {n}: {p}" for p in problems]
        raise StepFailed(self.failure_text())

    def failure_text(self) -> str:
        return ("\n".join(self.problems) + "\n\nexchanges (oldest first):\n" + render_transcript(self.records))

    def scenario(self, case_id: str, requirements) -> Scenario:
        return Scenario(case_id, f"exchanges of a failing run of {case_id}", tuple(requirements),
                        ("docs/target-rules.md",), list(self.steps))

    # -- requests a correct client sends, with what the model expects -----------------------
    def connect(self, c: Client, note: str = "connect") -> wire.Message | None:
        reconnect = c.connected
        xid, data = c.connect()
        exp = reply(0, requirement="TGT-CONN-1", why=note, handle="nonzero",
                    op_flags_all=C("MSG_CONNECT_REPLAYABLE") | (C("MSG_CONNECT_RECONNECT") if reconnect else 0),
                    op_flags_none=0 if reconnect else C("MSG_CONNECT_RECONNECT"))
        rep = self.send(c, xid, data, exp, note)
        c.connected = True
        return rep

    def disconnect(self, c: Client) -> None:
        xid, data = c.request("OST_DISCONNECT")
        self.send(c, xid, data, reply(0, requirement="TGT-CONN-2", why="disconnect"), "disconnect")
        c.connected = False

    def expect_handler(self, c: Client, opc: str, oid: int, valid: int = 0, **fields) -> tuple[Expect, callable]:
        """What a well-formed body request should get, and the model change to apply after it."""
        mutable = opc in ("OST_SETATTR", "OST_CREATE", "OST_DESTROY", "OST_PUNCH")
        if mutable and c.readonly:
            return reply("EROFS", why=f"{opc} on a read-only export"), None
        obj = self.objects.get(oid)
        if opc == "OST_CREATE":
            if obj is not None:
                return reply("EEXIST", why="create of an existing object"), None
            return reply(0, "nonzero" if c.replay_create else "zero", requirement="TGT-TRANSNO-2",
                         why="create" + (" (REPLAY_CREATE negotiated)" if c.replay_create else "")), \
                lambda: self.objects.__setitem__(oid, Obj())
        # the handlers check their arguments before they look the object up (ofd_setattr_hdl,
        # ofd_punch_hdl)
        if opc == "OST_PUNCH" and (valid & (MD["FLSIZE"] | MD["FLBLOCKS"])) != (MD["FLSIZE"] | MD["FLBLOCKS"]):
            return err("EPROTO", "TGT-ERR-2", "punch without both FLSIZE and FLBLOCKS is a serious error"), None
        if opc == "OST_PUNCH" and fields.get("o_blocks", 0) != EOF:
            return reply("EPROTO", why="punch whose end is not OBD_OBJECT_EOF"), None
        if opc == "OST_SETATTR" and valid & MD["FLSIZE"] and fields.get("o_size", 0) != EOF:
            return reply("EPERM", why="truncation through setattr"), None
        if obj is None:
            return reply("ENOENT", why=f"{opc} of a missing object"), None
        if opc == "OST_GETATTR":
            f = {"oa.o_size": obj.size, "oa.o_atime": obj.atime, "oa.o_mtime": obj.mtime,
                 "oa.o_ctime": obj.ctime, "oa.o_mode&4095": obj.mode, "oa.o_uid": obj.uid,
                 "oa.o_gid": obj.gid, f"oa.o_valid&{GETATTR_BITS}": GETATTR_BITS}
            return reply(0, requirement="TGT-OBJ-1", why="getattr", struct="ost_body", fields=f), None
        if opc == "OST_SETATTR":
            def apply():
                for attr, (fname, bit) in ATTRS.items():
                    if attr != "size" and valid & bit:
                        value = fields.get(fname, 0)
                        setattr(obj, attr, value & 0o7777 if attr == "mode" else value)
            return reply(0, "nonzero", requirement="TGT-TRANSNO-2", why="setattr"), apply
        if opc == "OST_PUNCH":
            return reply(0, "nonzero", requirement="TGT-TRANSNO-2", why="punch"), \
                lambda: setattr(obj, "size", fields.get("o_size", 0))
        if opc == "OST_DESTROY":
            return reply(0, "nonzero", requirement="TGT-TRANSNO-2", why="destroy"), lambda: self.objects.pop(oid)
        if opc == "OST_SYNC":
            return reply(0, why="sync"), None
        raise ValueError(opc)

    def body_op(self, c: Client, opc: str, oid: int, valid: int = 0, note: str = "", lose: bool = False, **fields):
        exp, apply = self.expect_handler(c, opc, oid, valid, **fields)
        xid, data = c.request(opc, [ost_body(oid, valid, **fields)])
        if lose:
            c.unreplied.add(xid)
        rep = self.send(c, xid, data, exp, note or opc)
        if apply:
            apply()
        return xid, data, len(self.steps), rep
