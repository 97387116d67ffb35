"""Judging one step of an exchange with a target: the one judge shared by the stateful runs
(harness/ost/session.py, suites/test_target.py and test_recovery.py) and scenario replay
(harness/ost/scenario.py).

A step is a request sent by a client and the reply (or the drop) it got, judged against
what the step expects (an Expect, or an AnyOf listing several allowed outcomes), against the
invariants every reply must keep (harness/ost/invariants.py) and, for a resend, against the
reply of the step it resends.  The judge also remembers what later steps need: every step's
reply (for resends and for replayed transnos), the outcome each step matched (`if_outcome`),
LAST_ID after each successful create (object ids written "@N+K"), the highest last-committed
value each client was sent, the export cookie and the connect flags each client's last
successful connect gave, and the steps whose reply is deferred (recovery) until it arrives.

Recovery (docs/target-rules.md §7): `end_recovery` is one expiry of the recovery window
(`expire`).  The target may then extend the window, evict the stale clients and go on
(Lustre's target_recovery_overseer, extend_recovery_timer), or hit its hard limit and evict
every client that has not finished (sent MSG_LOCK_REPLAY_DONE); so from then on a client
that had not finished may be found evicted: a request of it answered ERR -ENOTCONN (a held
one too: abort_req_replay_queue) is the outcome "evicted", whatever the step expected.
Recovery is known over when no client that reconnected during it can still be replaying:
each has finished or has been seen evicted.  A replay sent while another client's replay of
the same transno was held may be dropped and never answered (`may_drop`: the transno is
claimed, target_queue_recovery_request).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.ost.client import (AnyOf, Expect, check_any, granted_flags, last_id_after_create,
                                                   parse_ref, projid_mode_of, projid_modes, reply_object_id,
                                                   request_object_id)
from ptlrpc_conformance.harness.ost.invariants import TargetChecker, resend_problems
from ptlrpc_conformance.harness.verdicts import release as release_rules


def connect_cookie(rep: wire.Message | None) -> int | None:
    """The export cookie a successful OST_CONNECT reply gives, or None."""
    if rep is not None and rep.body["pb_type"] == wire.REPLY and rep.status == 0 \
            and rep.body["pb_opc"] == wire.C("OST_CONNECT") and rep.body["pb_handle"]:
        return rep.body["pb_handle"]
    return None


def _is_enotconn(reply: bytes | None) -> bool:
    """The reply is ERR -ENOTCONN (the export is gone)."""
    rep = wire.try_parse(reply, "reply")[0]
    return rep is not None and rep.body["pb_type"] == wire.ERR and rep.status == -spec.errno_value("ENOTCONN")


def hello_configuration(adapter) -> dict:
    """What the target's hello declares of its configuration ({} when nothing, or no hello)."""
    return dict(getattr(getattr(adapter, "hello", None), "configuration", None) or {})


class Unresolved(ValueError):
    """An "@N+K" value whose step N gave no LAST_ID (it was not a successful create)."""


def expectation_requirements(expect: Expect | AnyOf | None, outcome: str) -> list[str]:
    """The requirements judged when a reply met `expect` as `outcome` (an AnyOf: the
    alternative it matched): the expectation's requirement, and those of the connect flags it
    names (Expect._connect_flag_groups)."""
    if isinstance(expect, AnyOf):
        expect = dict(expect.alternatives).get(outcome)
    if not isinstance(expect, Expect):
        return []
    return [expect.requirement] + [rule for rule, _ in expect._connect_flag_groups(expect.op_flags_all
                                                                                    | expect.op_flags_none)]


@dataclass
class StepJudge:
    """The judge of one run's steps, numbered from 1.  `reconstruct`: resends must be
    answered with the original reply (profile lustre-2.17.57-reconstruct)."""
    reconstruct: bool = False
    checker: TargetChecker = field(init=False)
    replies: dict[int, wire.Message | None] = field(default_factory=dict)    # step -> its reply, parsed
    outcomes: dict[int, str] = field(default_factory=dict)     # step -> the outcome its reply matched
    last_ids: dict[int, int] = field(default_factory=dict)     # create step -> LAST_ID after it
    committed: dict[str, int] = field(default_factory=dict)    # client -> highest pb_last_committed sent to it
    cookies: dict[str, int] = field(default_factory=dict)      # client -> cookie of its last connect
    granted: dict[int, tuple[int, int]] = field(default_factory=dict)   # connect step -> (flags, flags2) granted
    waiting: dict[tuple[str, int], int] = field(default_factory=dict)   # (client, xid) -> step, reply deferred
    arrivals: list[int] = field(default_factory=list)          # steps in the order their replies were judged
    sent: dict[tuple[str, int], tuple[int, str]] = field(default_factory=dict)   # (client, xid) -> (last step, its rule)
    batch: dict[int, int] = field(default_factory=dict)        # step -> the exchange (or op) whose result held its reply
    current_batch: int = 0                                     # set by the driver before each exchange's replies
    # recovery: clients whose connect said MSG_CONNECT_RECOVERING since the restart, those that
    # sent MSG_LOCK_REPLAY_DONE, those an expiry may have evicted, and those seen evicted
    reconnected: set = field(default_factory=set)
    finished: set = field(default_factory=set)
    maybe_evicted: set = field(default_factory=set)
    evicted: set = field(default_factory=set)
    may_drop: set = field(default_factory=set)                 # replay steps that may never be answered
    held_transno: dict[int, int] = field(default_factory=dict)  # deferred step -> the transno its request carried
    expiries: int = 0                                          # expiries since the restart
    deferred: set = field(default_factory=set)                 # steps whose reply was deferred
    ending: bool = False                                       # a final ping was answered: recovery is over
    judged: list[str] = field(default_factory=list)            # the requirements of the expectations a reply met
    # the hello's `configuration` (docs/testee-protocol.md §2.1.2), and the projid modes the
    # target may still keep to: what it declared, narrowed by every projid request it answered
    configuration: dict = field(default_factory=dict)
    projid: set = field(init=False)
    release: str | None = None          # the Lustre release whose rules apply (None: the default profile's)

    def __post_init__(self):
        self.release = self.release or release_rules.default()
        self.checker = TargetChecker(reconstruct=self.reconstruct, release=self.release)
        self.projid = projid_modes(self.configuration)
        # recovery enabled (True) or disabled (False): declared, else learnt from the first
        # successful connect reply (MSG_CONNECT_REPLAYABLE), and kept for the whole run
        self.recovery = {self.configuration["recovery"]} if "recovery" in self.configuration else {True, False}
        if self.recovery == {False}:
            self.checker.recovery_disabled = True

    def _recovery_expectation(self, expect):
        """`expect` as it reads on a target with recovery disabled (docs/target-rules.md §4,
        "Recovery disabled"): no MSG_CONNECT_REPLAYABLE, no transno anywhere; outcomes named
        "recovery:enabled" / "recovery:disabled" kept by the mode."""
        if self.recovery != {False}:
            if isinstance(expect, AnyOf):
                keep = [(n, e) for n, e in expect.alternatives if n != "recovery:disabled"] \
                    if self.recovery == {True} else expect.alternatives
                return AnyOf(keep) if keep else expect
            return expect
        from dataclasses import replace as _replace

        def one(e):
            if not isinstance(e, Expect) or not e.reply:
                return e
            replayable = wire.C("MSG_CONNECT_REPLAYABLE")
            return _replace(e, transno="zero" if e.transno == "nonzero" else e.transno,
                            op_flags_all=e.op_flags_all & ~replayable,
                            op_flags_none=e.op_flags_none | (replayable if e.handle else 0))
        if isinstance(expect, AnyOf):
            keep = [(n, one(e)) for n, e in expect.alternatives if n != "recovery:enabled"]
            return AnyOf(keep) if keep else expect
        return one(expect)

    def _learn_recovery(self, rep) -> None:
        """A successful connect reply tells whether recovery is enabled (MSG_CONNECT_REPLAYABLE)."""
        if connect_cookie(rep) is None or len(self.recovery) == 1:
            return
        self.recovery = {bool(rep.body["pb_op_flags"] & wire.C("MSG_CONNECT_REPLAYABLE"))}
        self.checker.recovery_disabled = self.recovery == {False}

    def keep_projid(self, modes) -> None:
        """The target's answers so far are those of `modes` only (one configuration a run)."""
        self.projid &= set(modes)

    def _projid_expectation(self, expect):
        """`expect` without the "projid:MODE" outcomes of modes the target cannot be in: what
        it declared, or what it answered before (a target keeps one configuration a run)."""
        if not isinstance(expect, AnyOf):
            return expect, ""
        keep = [(n, e) for n, e in expect.alternatives if projid_mode_of(n) is None or projid_mode_of(n) in self.projid]
        if len(keep) == len(expect.alternatives) or not keep:
            return expect, ""
        declared = self.configuration.get("project_quota")
        why = (f" (its hello declares project_quota {str(declared).lower()})" if declared is not None else
               " (earlier in this run it answered as a target whose projids are "
               + " or ".join(sorted(self.projid)) + ": a target keeps one configuration)")
        return AnyOf(keep), why

    def _narrow_projid(self, expect, reply) -> None:
        """After a reply to a request with "projid:MODE" outcomes: the modes whose outcome it meets."""
        if not isinstance(expect, AnyOf):
            return
        named = [(projid_mode_of(n), e) for n, e in expect.alternatives if projid_mode_of(n) is not None]
        met = {mode for mode, e in named if not e.check(reply)[0]}
        if named and met:
            self.keep_projid(met)

    def value_of(self, ref: str) -> int:
        """The value of "@N+K": LAST_ID after create step N, plus K."""
        n, k = parse_ref(ref)
        if n not in self.last_ids:
            raise Unresolved(f"{ref}: step {n} is not a successful OST_CREATE, so it gave no LAST_ID")
        return self.last_ids[n] + k

    def judge(self, n: int, client: str, xid: int, request: bytes, reply: bytes | None,
              expect: Expect | AnyOf | None = None, same_as: int | None = None) -> tuple[wire.Message | None, list[str]]:
        """Judge step `n`, `client`'s request `xid` and its reply (None: dropped): (the
        reply parsed, or None; the problems found, each "RULE: text")."""
        self._next_step(n)
        unresolved = []
        if expect is not None and expect.refs():
            try:
                expect = expect.resolve(self.value_of)
            except Unresolved as e:
                unresolved.append(f"TGT-OBJ-1: cannot judge the step: {e}")
                expect = None
        if expect is not None:
            rule = expect.requirement if isinstance(expect, Expect) else expect.alternatives[0][1].requirement
            self.sent[(client, xid)] = (n, rule)
        req = wire.try_parse(request, "request")[0]
        flags = req.body["pb_flags"] if req is not None else 0
        recovering = self.checker.recovering
        if recovering and flags & wire.C("MSG_LOCK_REPLAY_DONE"):
            self.finished.add(client)
        evicted = client in self.maybe_evicted and _is_enotconn(reply)
        if evicted:
            expect = None               # evicted at an expiry: what the step expected no longer applies
        expect, kept_to = self._projid_expectation(self._recovery_expectation(expect))
        if len(self.recovery) > 1:
            self._learn_recovery(wire.try_parse(reply, "reply")[0])
            expect = self._recovery_expectation(expect)
        found, rep, outcome = check_any(expect, reply)
        found = [p + kept_to for p in found]
        if not found:
            self._narrow_projid(expect, reply)
        if evicted:
            outcome = "evicted"
        # a reply the step's expectation rejected is charged there; the invariants do not take
        # what it says of recovery (MSG_CONNECT_RECOVERING) as the target's state
        trusted = expect is None or not found
        problems = [f"{v.rule}: {v.message}"
                    for v in self.checker.observe(client, xid, request, reply, n, infer_recovery=trusted)]
        if not problems:
            self.judged += self.checker.judged      # the invariants observe put the exchange to
        problems += unresolved + found
        if outcome is not None:
            self.outcomes[n] = outcome
            self.judged += expectation_requirements(expect, outcome)
        else:
            self.outcomes.pop(n, None)      # a reply with problems has no outcome (not even "waiting")
        if same_as is not None:
            original = self.replies.get(same_as)
            if original is None:
                problems.append(f"TGT-RESEND-1: step {same_as} has no reply to compare with")
            else:
                found_resend = resend_problems(original, rep, self.reconstruct)
                problems += [f"{rule}: {msg}" for rule, msg in found_resend]
                if not found_resend:
                    self.judged += ["TGT-RESEND-1"] + (["TGT-RESEND-2"] if self.reconstruct else [])
        if evicted:
            self.evicted.add(client)
            self.checker.evicted(client)
        self.replies[n] = rep
        self.arrivals.append(n)
        self.batch[n] = self.current_batch or n
        if rep is not None and rep.body["pb_type"] == wire.REPLY:
            self.committed[client] = max(self.committed.get(client, 0), rep.body["pb_last_committed"])
        cookie = connect_cookie(rep)
        if cookie is not None:
            self.maybe_evicted.discard(client)
            self.evicted.discard(client)
            if self.checker.recovering and rep.body["pb_op_flags"] & wire.C("MSG_CONNECT_RECOVERING"):
                self.reconnected.add(client)
            self.cookies[client] = cookie
            got = granted_flags(rep)
            if got is not None:
                self.granted[n] = got
        if rep is not None and rep.body["pb_type"] == wire.REPLY and rep.status == 0 \
                and rep.body["pb_opc"] == wire.C("OST_CREATE"):
            sent = request_object_id(wire.try_parse(request, "request")[0])
            got_id = reply_object_id(rep)
            if sent is not None and got_id is not None:
                self.last_ids[n] = last_id_after_create(sent, got_id)
        if recovering and flags & wire.C("MSG_LOCK_REPLAY_DONE") and rep is not None \
                and rep.body["pb_type"] == wire.REPLY and rep.status == 0 and not self.replaying():
            # final pings are answered when recovery is over (target_recovery_thread): it is,
            # for the requests sent from now on (the replies that came with this one answer
            # requests sent before)
            self.ending = True
        return rep, problems

    def _next_step(self, n: int | None = None) -> None:
        """A new step begins (not the arrival of a deferred reply): a recovery seen ending is over."""
        if self.ending and n not in self.deferred:
            self.recovery_ended()

    def defer(self, n: int, client: str, xid: int, request: bytes | None = None) -> None:
        """Step `n` got no reply yet: it may come later (recovery), with `arrived`.  A replay
        whose transno another client's held replay carries may never be answered."""
        self._next_step()
        self.deferred.add(n)
        req = wire.try_parse(request, "request")[0] if request is not None else None
        if req is not None and self.checker.recovering and req.body["pb_flags"] & wire.C("MSG_LOCK_REPLAY_DONE"):
            self.finished.add(client)
        if req is not None and req.body["pb_transno"]:
            if any(self.held_transno.get(m) == req.body["pb_transno"]
                   for (other, _), m in self.waiting.items() if other != client):
                self.may_drop.add(n)
            self.held_transno[n] = req.body["pb_transno"]
        self.waiting[(client, xid)] = n

    def arrived(self, deferred) -> tuple[list[tuple[int, bytes | None]], list[str]]:
        """Deferred replies [(client, xid, bytes)] matched to the steps waiting for them:
        ([(step, reply bytes)], a problem for each reply that no step is waiting for)."""
        matched, problems = [], []
        for client, xid, data in deferred:
            n = self.waiting.pop((client, xid), None)
            if n is None:
                step, rule = self.sent.get((client, xid), (None, "RCV-REPLAY-1"))
                problems.append(f"{rule}: a deferred reply to {client} xid {xid} that no step is waiting for "
                                + (f"(step {step} was dropped or answered already)" if step else "(no such request)"))
            else:
                matched.append((n, data))
        return matched, problems

    def never_answered(self) -> list[tuple[int, str, int]]:
        """(step, client, xid) of every step still waiting (recovery is over) that had to be
        answered; every waiting step is forgotten."""
        out = sorted((n, client, xid) for (client, xid), n in self.waiting.items() if n not in self.may_drop)
        self.waiting.clear()
        return out

    def replaying(self) -> set[str]:
        """The clients that reconnected during this recovery and may still be replaying:
        not finished, not seen evicted."""
        return self.reconnected - self.finished - self.evicted

    def expire(self) -> bool:
        """The recovery window expired (the testee's end_recovery): every client that may
        still be replaying may have been evicted from now on.  True if recovery is over (no
        such client is left): the driver marks it over (`recovery_ended`) once it has judged
        the replies the expiry released."""
        self._next_step()
        if not self.checker.recovering:
            return True
        self.expiries += 1
        left = self.replaying()
        self.maybe_evicted |= left
        return not left

    def transno(self, n: int) -> int:
        """The transno step `n`'s reply carried (0 without a reply)."""
        rep = self.replies.get(n)
        return rep.body["pb_transno"] if rep is not None else 0

    def restart(self, commit_point: int | None = None) -> None:
        self.ending = False
        self.checker.restart(commit_point)
        for kept in (self.reconnected, self.finished, self.maybe_evicted, self.evicted):
            kept.clear()
        self.expiries = 0

    def recovery_ended(self) -> None:
        self.ending = False
        self.checker.recovery_ended()
