"""Recovery as the suite runs it (issue 24): what the stateful recovery case sends (only what a
Lustre client sends, docs/scenarios.md "The client model"), what `end_recovery` may mean
(one expiry: the window extended, or the hard limit; docs/testee-protocol.md §2.4), the
bundled scenarios of a change sent during recovery that claims a lost transno, and the same
examples for the same seed whatever ran before in the process."""
import importlib

import pytest

from adapters import started, scenario_by_id
from ptlrpc_conformance.harness.verdicts import judge
from hypothesis import strategies as st
from hypothesis.stateful import rule

import iuts
from ptlrpc_conformance.fixtures.stateful import BudgetedMachine, part_examples, part_seed, run_machine
from ptlrpc_conformance.harness.ost import scenario as scen, wire
from ptlrpc_conformance.harness.ost.client import C, Client, reply
from ptlrpc_conformance.harness.ost.steps import StepJudge
from ptlrpc_conformance.reference import make_testee
from ptlrpc_conformance.reference.target import Target, TargetConfig
from ptlrpc_conformance.suites import test_recovery as recovery
from ptlrpc_conformance.suites.recovery_machine import RecoveryMachine

UNUSUAL = ("recovery.unusual.claimed-transno.setattr", "recovery.unusual.claimed-transno.create",
           "recovery.unusual.claimed-transno.third-client")
REPLAY, REQ_DONE, LOCK_DONE = C("MSG_REPLAY"), C("MSG_REQ_REPLAY_DONE"), C("MSG_LOCK_REPLAY_DONE")


# -- the bundled scenarios of a change sent during recovery -----------------------------------

@pytest.mark.parametrize("sid", UNUSUAL)
def test_a_claimed_transno_scenario_passes_every_conforming_target(sid):
    """Fixed bytes (a failing run of the old recovery case): a client's change during recovery
    takes a lost transno, it replays that change, the other client's replay of the transno is
    dropped; recovery goes on past an expiry.  The reference, a target whose end_recovery is
    the hard limit and the independent OST all pass."""
    import independent_ost
    s = scenario_by_id(sid)
    for testee in (make_testee(), iuts.target_end_recovery_hard(), independent_ost.testee()):
        problems, records = scen.run(s, started(testee))
        assert problems == [], (sid, problems)
    assert any("unusual" in st.note for st in s.steps)


def test_the_claimed_replay_is_dropped_and_owed_no_reply():
    """In the first of them the reference drops the second claimant (RCV-CLAIMED-1) and lets
    recovery go on at the expiry: the claimed replay never gets a reply, and that is allowed."""
    s = scenario_by_id(UNUSUAL[0])
    problems, records = scen.run(s, started(make_testee()))
    assert problems == []
    claimed = [r for r in records if r.note.startswith("replay") and "unusual" not in r.note]
    assert len(claimed) == 1 and claimed[0].reply is None


def test_a_target_whose_end_recovery_is_the_hard_limit_evicts_the_unfinished():
    """With the hard limit, the held replay of the client that sent the change is answered
    ERR -ENOTCONN at end_recovery and its DONE pings too: outcome 'evicted', no problem."""
    s = scenario_by_id(UNUSUAL[1])
    problems, records = scen.run(s, started(iuts.target_end_recovery_hard()))
    assert problems == []
    notenotconn = [r for r in records if r.reply is not None and r.client
                   and wire.parse(r.reply, "reply").status == -107]
    assert len(notenotconn) >= 3          # the held replay, REQ_REPLAY_DONE, the final ping


def test_a_hard_limit_target_passes_the_recovery_area(run_cli):
    """docs/testee-protocol.md §2.4: end_recovery may be the hard limit (every unfinished
    client evicted, held requests ERR -ENOTCONN, recovery over).  Before, such a target failed
    RCV-REPLAY-1 in every stateful recovery part (its DONE pings got -ENOTCONN)."""
    run = run_cli("certify", "--iut", "python:iuts:target_end_recovery_hard", "--area", "recovery", examples=200)
    assert run.rc == 0, run.stdout[-3000:]
    verdicts = run.verdicts()
    assert set(recovery.PARTS) <= set(verdicts) and set(verdicts.values()) == {"pass"}


# -- the step judge -----------------------------------------------------------------------

def _ping(client: Client, flags: int) -> tuple[int, bytes]:
    return client.request("OBD_PING", flags=flags)


def test_after_an_expiry_an_unfinished_client_may_be_found_evicted():
    """ERR -ENOTCONN to a client that had not finished is the outcome 'evicted' only after an
    expiry; before it, the step's expectation holds."""
    t = Target(TargetConfig())
    j = StepJudge()
    c = Client("c1", handle=0x1000)
    xid, data = c.connect()
    rep = t.exchange(data, xid, "c1")["data"]
    j.judge(1, "c1", xid, data, bytes.fromhex(rep))
    c.cookie = wire.parse(bytes.fromhex(rep), "reply").body["pb_handle"]
    j.restart()
    enotconn = bytes.fromhex(Target(TargetConfig()).exchange(_ping(c, REQ_DONE)[1], 9, "c1")["data"])
    assert wire.parse(enotconn, "reply").status == -107
    j.reconnected.add("c1")
    xid, data = _ping(c, REQ_DONE)
    _, problems = j.judge(2, "c1", xid, data, enotconn, reply(0, requirement="RCV-REPLAY-1"))
    assert problems and j.outcomes.get(2) is None
    assert j.expire() is False and j.maybe_evicted == {"c1"}
    xid, data = _ping(c, REQ_DONE)
    _, problems = j.judge(3, "c1", xid, data, enotconn, reply(0, requirement="RCV-REPLAY-1"))
    assert problems == [] and j.outcomes[3] == "evicted" and j.evicted == {"c1"}
    assert j.replaying() == set() and j.expire() is True


def test_a_replay_of_a_transno_another_client_holds_is_owed_no_reply():
    j = StepJudge()
    j.restart()
    a, b = Client("a", handle=0x1000), Client("b", handle=0x1111)
    _, ra = a.request("OST_SETATTR", xid=5, flags=REPLAY, transno=0x100000002)
    _, rb = b.request("OST_CREATE", xid=7, flags=REPLAY, transno=0x100000002)
    _, rc = b.request("OST_SETATTR", xid=8, flags=REPLAY, transno=0x100000003)
    j.defer(1, "a", 5, ra)
    j.defer(2, "b", 7, rb)
    j.defer(3, "b", 8, rc)
    assert j.may_drop == {2}
    assert j.never_answered() == [(1, "a", 5), (3, "b", 8)]


# -- the client model of the stateful recovery case ---------------------------------------

class _Recording:
    """A testee that records what each client sends, around the reference."""

    def __init__(self):
        self.inner = make_testee()
        self.log: list[tuple] = []

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        response = self.inner.handle(request)
        if op == "exchange":
            data = (response.get("result") or {}).get("data")
            self.log.append(("exchange", request["client"], request["xid"], bytes.fromhex(request["data"]),
                             bytes.fromhex(data) if data else None))
        elif op in ("restart", "reset", "end_recovery"):
            self.log.append((op,))
        return response


def _fail_unless_pass(j) -> None:
    """A part's conclusion: a pass (with what it exercised) goes by, anything else fails the test."""
    if j.status != judge.PASS:
        pytest.fail(f"{j.status}: {j.message}")


def test_the_recovery_case_sends_only_what_a_lustre_client_sends():
    """Between its reconnect after a restart and its final ping a client sends only replays —
    of requests it sent before the restart (same XID and buffers), with a transno — and the
    pings with MSG_REQ_REPLAY_DONE / MSG_LOCK_REPLAY_DONE; the final ping carries both flags."""
    rec = _Recording()
    a = started(rec)
    for part in recovery.PARTS[:3]:
        run_machine(RecoveryMachine, a, _fail_unless_pass, case=part,
                    requirements=recovery.REQUIREMENTS, examples=part_examples(100, 5), steps=30,
                    run_seed=part_seed(part, 7), needs=("target", "restart"), what="recovery rules")
    sent: dict[str, dict[int, bytes]] = {}        # client -> xid -> request sent outside recovery
    replaying: set[str] = set()
    recovering = False
    replays = finals = 0
    for entry in rec.log:
        if entry[0] in ("reset", "restart"):
            if entry[0] == "reset":
                sent.clear()
            recovering = entry[0] == "restart"
            replaying = set()
            continue
        if entry[0] != "exchange":
            continue
        _, client, xid, data, answer = entry
        m = wire.parse(data, "request")
        b = m.body
        rep = wire.parse(answer, "reply") if answer is not None else None
        if recovering and b["pb_opc"] == C("OST_CONNECT"):
            if rep is not None and rep.body["pb_op_flags"] & C("MSG_CONNECT_RECOVERING"):
                replaying.add(client)
            else:
                recovering = False          # no recovery (nothing remembered), or over
        elif client in replaying:
            if b["pb_flags"] & LOCK_DONE:
                assert b["pb_flags"] & REQ_DONE and b["pb_opc"] == C("OBD_PING")
                replaying.discard(client)
                finals += 1
            elif b["pb_flags"] & REQ_DONE:
                assert b["pb_opc"] == C("OBD_PING")
            else:
                assert b["pb_flags"] & REPLAY and b["pb_transno"], "a new request while the import replays"
                before = sent.get(client, {}).get(xid)
                assert before is not None, "a replay of a request not sent before the restart"
                assert m.buffers[1:] == wire.parse(before, "request").buffers[1:]
                replays += 1
            if rep is not None and rep.status == -107:
                replaying.discard(client)   # evicted: it sends nothing more on that export
        else:
            sent.setdefault(client, {})[xid] = data
    assert replays >= 5 and finals >= 5


# -- the same examples whatever ran before --------------------------------------------------

def test_a_parts_examples_do_not_depend_on_the_modules_loaded_before(tmp_path, monkeypatch):
    """Hypothesis draws some values from the literals of the local modules loaded so far; a
    module loaded between two runs of one seed must not change what they draw (before the
    fix, recovery.stateful.restart.1 failed under -n and passed serially)."""
    draws: list[int] = []

    class Machine(BudgetedMachine):
        @rule(x=st.integers())
        def draw(self, x):
            draws.append(x)

    def run() -> list[int]:
        draws.clear()
        run_machine(Machine, object(), _fail_unless_pass, case="c", requirements=[], examples=200,
                    steps=5, run_seed=1234, needs=(), what="nothing")
        return list(draws)

    first = run()
    module = tmp_path / "a_module_full_of_constants.py"
    module.write_text("VALUES = [" + ", ".join(str(987654321 + 7919 * i) for i in range(400)) + "]\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("a_module_full_of_constants")
    assert run() == first and len(first) > 500
