"""A session with a target: clients, the suite's model of the OST's objects, and every step
recorded so that a failure can be shown as a readable transcript and saved as a scenario
vector (harness/ost/scenario_file.py).  Each step is judged by the step judge scenario replay
uses too (harness/ost/steps.py).

The model (harness/ost/model.py) follows docs/target-rules.md §3: it learns LAST_ID from the
first create's reply (a target may start anywhere), names every object by its offset from
that LAST_ID (recorded in scenario vectors as "@STEP+K", so that a saved run replays on any
target), and keeps sets of allowed values where the back-end decides.

Used by the stateful suites (suites/test_target.py, suites/test_recovery.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ptlrpc_conformance.harness.ost import model, wire
from ptlrpc_conformance.harness.ost.client import (EOF, MD, OBJECT_ID, PROJID_APPLIED, PROJID_DROPPED, PROJID_MODES,
                                                   PROJID_OUTCOME, PROJID_REFUSED, AnyOf, C, Client, Expect, err,
                                                   errno, ost_body, readonly_refusal, reply, reply_object_id)
from ptlrpc_conformance.harness.ost.invariants import TargetChecker
from ptlrpc_conformance.harness.ost.model import Obj, State
from ptlrpc_conformance.harness.ost.scenario import (Record, Scenario, Step, TargetError, call, deferred_replies,
                                                     exchange, render_transcript)
from ptlrpc_conformance.harness.ost.steps import StepJudge, connect_cookie, hello_configuration
from ptlrpc_conformance.harness.verdicts import release as release_rules

MUTABLE = ("OST_SETATTR", "OST_CREATE", "OST_DESTROY", "OST_PUNCH")


class StepFailed(AssertionError):
    pass


@dataclass
class Session:
    adapter: object
    clients: dict[str, Client] = field(default_factory=dict)
    state: State = field(default_factory=State)
    steps: list[Step] = field(default_factory=list)
    records: list[Record] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    cookie_owner: dict[int, str] = field(default_factory=dict)
    reconstruct: bool = False
    release: str | None = None           # the Lustre release whose rules apply (None: the default profile's)
    allow_create_refusal: bool = True    # -ENOSPC / -EPERM are allowed answers to a create
    base_step: int | None = None         # the create step whose LAST_ID names every object ("@N+K")
    base: int = 0                        # that LAST_ID
    judge: StepJudge = field(init=False)
    projid_pending: dict = field(default_factory=dict)   # object -> a projid applied or dropped, not known which

    def __post_init__(self):
        self.judge = StepJudge(reconstruct=self.reconstruct, configuration=hello_configuration(self.adapter),
                               release=self.release)

    @property
    def objects(self) -> dict[int, Obj]:
        return self.state.objects

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

    def add_client(self, name: str, *, replay_create: bool = False, **kw) -> Client:
        """A client of the session's release: it asks for OBD_CONNECT2_REPLAY_CREATE
        (`replay_create`) only where that release defines the flag (2.16 on)."""
        replay_create = replay_create and release_rules.behaviour(self.judge.release, "replay_create")
        c = Client(name, handle=0x1000 + len(self.clients) * 0x111, replay_create=replay_create, **kw)
        self.clients[name] = c
        return c

    # -- object ids ---------------------------------------------------------------------------
    def ref(self, oid: int) -> str | None:
        """How a scenario vector names object `oid`: "@STEP+K" from the base LAST_ID."""
        if self.base_step is None:
            return None
        k = oid - self.base
        return f"@{self.base_step}{k:+d}" if k else f"@{self.base_step}"

    def modelled_ids(self) -> list[int]:
        """Ids whose state the model knows: above the floor, up to LAST_ID, plus the next one."""
        if self.state.last_id is None:
            return []
        return list(range(self.state.floor + 1, self.state.last_id + 2))

    # -- one exchange ---------------------------------------------------------------------
    def send(self, client: Client, xid: int, data: bytes, expect: Expect | AnyOf | None, note: str = "",
             same_as: int | None = None, track: bool = True, later: bool = False,
             oid: int | None = None) -> wire.Message | None:
        """Exchange one request; judge the reply against `expect` and the invariants; raise
        StepFailed (with the transcript) on any problem.  With `later` (recovery) the reply
        may be deferred: it is judged when it arrives (None is returned meanwhile).  `oid`:
        the object the request names (recorded relative to the base LAST_ID)."""
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
        if oid is not None and self.ref(oid) is not None:
            patch["oid"] = self.ref(oid)
        self.steps.append(Step(client=client.name, xid=xid, request=data, patch=patch,
                               expect=expect if not isinstance(expect, AnyOf) else None,
                               expect_any=expect if isinstance(expect, AnyOf) else None,
                               same_as=same_as, note=note, later=later))
        self.records.append(Record(n, client.name, xid, data, reply_bytes, note))
        self.judge.current_batch = n
        rep = None
        if reply_bytes is None and later:
            self.judge.defer(n, client.name, xid, data)
        else:
            rep = self._judge(n, reply_bytes)
        self.absorb(deferred)
        self._raise_if_problems()
        cookie = connect_cookie(rep) if track else None
        if cookie is not None:
            client.cookie = cookie
            self.cookie_owner[client.cookie] = client.name
            client.learn_grant(rep)
        return rep

    def _judge(self, n: int, reply_bytes: bytes | None) -> wire.Message | None:
        step, rec = self.steps[n - 1], self.records[n - 1]
        expect = step.expect_any if step.expect_any is not None else step.expect
        rep, found = self.judge.judge(n, step.client, step.xid, step.request, reply_bytes, expect, step.same_as)
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
        point = result.get("last_committed")
        if point is not None and (not isinstance(point, int) or isinstance(point, bool) or point < 0):
            self.fail(["RCV-STATE-1: restart's last_committed is not a non-negative integer"])
        self.judge.restart(point)
        return point

    def expire_recovery(self) -> bool:
        """The testee's end_recovery while clients may still be replaying: one expiry of the
        recovery window (docs/testee-protocol.md §2.4).  The target may go on with the
        clients it keeps or evict every client that has not finished; the replies it sends
        are judged.  True if recovery is known over."""
        result = call(self.adapter, {"op": "end_recovery"})
        self.steps.append(Step(op="end_recovery"))
        self.records.append(Record(len(self.steps), "", 0, b"", None, "end_recovery (the window expires)"))
        self.judge.current_batch = len(self.steps)
        over = self.judge.expire()
        self.absorb(deferred_replies(result.get("replies") or []))
        if over:
            self.judge.recovery_ended()
        self._raise_if_problems()
        return over

    def end_recovery(self) -> None:
        """end_recovery when every client is done (finished, or seen evicted): recovery is
        over, and nothing that had to be answered may be left waiting."""
        result = call(self.adapter, {"op": "end_recovery"})
        self.steps.append(Step(op="end_recovery"))
        self.records.append(Record(len(self.steps), "", 0, b"", None, "end_recovery"))
        self.judge.current_batch = len(self.steps)
        self.judge.expire()
        self.absorb(deferred_replies(result.get("replies") or []))
        self.judge.recovery_ended()
        for n, client, xid in self.judge.never_answered():
            self.records[n - 1].problems.append("the deferred reply never came (recovery is over)")
            self.problems.append(f"step {n}: RCV-ORDER-1: the deferred reply to {client} xid {xid} never came")
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

    def expect_handler(self, c: Client, opc: str, oid: int, valid: int = 0,
                       **fields) -> tuple[Expect | AnyOf, callable]:
        """What a well-formed body request should get, and the model change to make with its
        reply (a function of the parsed reply, or None)."""
        st = self.state
        if opc in MUTABLE and c.is_readonly:
            return readonly_refusal(self.judge.release, f"{opc} on an export granted OBD_CONNECT_RDONLY"), None
        if opc == "OST_CREATE":
            return self._expect_create(c, oid)
        # the handlers check their arguments before they look the object up (ofd_setattr_hdl,
        # ofd_punch_hdl)
        if opc == "OST_PUNCH" and (valid & (MD["FLSIZE"] | MD["FLBLOCKS"])) != (MD["FLSIZE"] | MD["FLBLOCKS"]):
            return err("EPROTO", "TGT-ERR-2", "punch without both FLSIZE and FLBLOCKS is a serious error"), None
        if opc == "OST_PUNCH" and fields.get("o_blocks", 0) != EOF:
            return reply("EPROTO", why="punch whose end is not OBD_OBJECT_EOF"), None
        if opc == "OST_SETATTR" and valid & MD["FLSIZE"] and fields.get("o_size", 0) != EOF:
            return reply("EPERM", why="truncation through setattr"), None
        obj = st.objects.get(oid)
        if obj is None:
            return reply("ENOENT", why=f"{opc} of a missing object"), None
        if opc == "OST_GETATTR":
            def seen(rep):
                got = model.observed(rep)
                if got is not None and oid in st.objects:
                    before = st.objects[oid]
                    pending = self.projid_pending.pop(oid, None)
                    if pending is not None and isinstance(before.projid, frozenset) and got.projid in before.projid:
                        # a projid a REPLY 0 left undecided: applied or dropped (one mode a run)
                        self.judge.keep_projid({PROJID_APPLIED} if got.projid == pending else {PROJID_DROPPED})
                    st.objects[oid] = model.resolve(before, got)
            return model.getattr_expect(obj), seen
        if opc in ("OST_SETATTR", "OST_PUNCH"):
            why = opc[4:].lower()
            if model.sets_projid(obj, opc, valid, fields, self.judge.release):
                return self._expect_projid(opc, oid, valid, fields, why)
            return reply(0, "nonzero", requirement="TGT-ERR-2", why=why), \
                lambda rep: model.apply(st, opc, oid, valid, fields, release=self.judge.release)
        if opc == "OST_DESTROY":
            return reply(0, "nonzero", requirement="TGT-ERR-2", why="destroy"), \
                lambda rep: model.apply(st, opc, oid)
        if opc == "OST_SYNC":
            return reply(0, why="sync (commits nothing the suite may count on)"), None
        raise ValueError(opc)

    def _expect_projid(self, opc: str, oid: int, valid: int, fields: dict, why: str) -> tuple[AnyOf, callable]:
        """A SETATTR or PUNCH that sets a new projid (docs/target-rules.md §3, "Project ids"):
        applied, or dropped silently (ZFS before 0.8), both REPLY 0 with a transno; or refused,
        REPLY -EOPNOTSUPP with transno 0 (no project quota).  Only the modes the target may
        still be in are offered (StepJudge.projid); the model follows the outcome."""
        st, judge = self.state, self.judge
        alts = [(f"{PROJID_OUTCOME}{m}", reply(0, "nonzero", requirement="TGT-OBJ-1", why=f"{why} of a projid ({m})")
                 if m != PROJID_REFUSED else
                 reply("EOPNOTSUPP", requirement="TGT-OBJ-1", why=f"{why} of a projid (no project quota: refused)"))
                for m in PROJID_MODES if m in judge.projid]

        def made(rep):
            if rep is None or rep.body["pb_type"] != wire.REPLY:
                return
            modes = {PROJID_REFUSED} if rep.status == errno("EOPNOTSUPP") else \
                judge.projid & {PROJID_APPLIED, PROJID_DROPPED}
            if rep.status == 0 or modes == {PROJID_REFUSED}:
                model.apply(st, opc, oid, valid, fields, projid=modes, release=judge.release)
                if modes == {PROJID_APPLIED, PROJID_DROPPED}:
                    self.projid_pending[oid] = fields.get("o_projid", 0)
        return (AnyOf(alts) if len(alts) > 1 else alts[0][1]), made

    def _expect_create(self, c: Client, n: int) -> tuple[Expect | AnyOf, callable]:
        """OST_CREATE of id `n` (docs/target-rules.md §3): a precreate up to `n`; never
        -EEXIST; the reply's id M is in (L, n] when n > L, else L+1 or n; a transno exactly
        when REPLAY_CREATE is in force and objects were made.  -ENOSPC and -EPERM are allowed
        refusals (no space, creation disabled) when `allow_create_refusal`."""
        st = self.state
        last = st.last_id
        refusals = [("refused-enospc", reply("ENOSPC", requirement="TGT-OBJ-1", why="create refused: no space")),
                    ("refused-eperm", reply("EPERM", requirement="TGT-OBJ-1", why="create refused: disabled"))] \
            if self.allow_create_refusal else []
        rc = c.creates_take_transnos
        if last is None:
            # LAST_ID unknown: only the status is judged; the reply tells LAST_ID.  Before 2.16
            # a create 20000 or more below LAST_ID is refused -EINVAL (ofd_create_hdl): the run
            # then goes on without objects
            alts = [("created", reply(0, "any", requirement="TGT-OBJ-1", why="create (LAST_ID not known yet)"))]
            if not release_rules.behaviour(self.judge.release, "create_trusts_last_id"):
                alts.append(("last-id-out-of-reach", reply("EINVAL", requirement="TGT-OBJ-1",
                                                           why="create far below LAST_ID (before 2.16)")))
        else:
            transno = "nonzero" if rc and n > last else "zero"
            why = ("create above LAST_ID" if n > last else "create at or below LAST_ID: nothing is made") + \
                  (" (REPLAY_CREATE in force)" if rc else "")
            alts = []
            for m in model.expected_create_id(last, n):
                ref = self.ref(m)
                alts.append((f"id-{m - last:+d}" if n > last else "nothing",
                             reply(0, transno, requirement="TGT-OBJ-1",
                                   why=why, struct="ost_body", fields={OBJECT_ID: ref if ref is not None else m})))
        expect = AnyOf(alts + refusals) if len(alts) + len(refusals) > 1 else alts[0][1]

        def made(rep):
            if rep is None or rep.body["pb_type"] != wire.REPLY or rep.status != 0:
                return
            learning = st.last_id is None
            model.create(st, n, reply_object_id(rep))
            if learning and st.last_id is not None and self.base_step is None:
                self.base_step, self.base = len(self.steps), st.last_id
        return expect, made

    def body_op(self, c: Client, opc: str, oid: int, valid: int = 0, note: str = "", lose: bool = False, **fields):
        exp, apply = self.expect_handler(c, opc, oid, valid, **fields)
        xid, data = c.request(opc, [ost_body(oid, valid, **fields)])
        if lose:
            c.unreplied.add(xid)
        rep = self.send(c, xid, data, exp, note or opc, oid=oid)
        if apply:
            apply(rep)
        return xid, data, len(self.steps), rep


def recovery_disabled(adapter) -> bool:
    """The target runs with recovery disabled: its hello says so, or (nothing declared) a
    connect on a reset target is answered without MSG_CONNECT_REPLAYABLE (docs/target-rules.md
    §4).  A probe that fails says nothing: False."""
    declared = hello_configuration(adapter).get("recovery")
    if declared is not None:
        return not declared
    s = Session(adapter)
    try:
        s.reset()
        s.connect(s.add_client("probe"))
    except (TargetError, StepFailed):   # the IUT's trouble or a wrong reply; any other exception is the suite's bug
        return False
    return s.judge.recovery == {False}
