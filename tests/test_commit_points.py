"""Scenario vectors and stateful parts hold whatever commit point a target chooses (issue 34,
item 2): the independent OST of tests/independent_ost.py, under each of its commit policies
(commit at once, nothing until a restart, at seeded random points, and its default) and with
or without saved replies for committed replays, passes every bundled scenario and every
stateful part.  A scenario may relate a step to what the target's own replies said (`@N`),
never to a value one target happened to give."""
import pytest

import independent_ost
from adapters import started
from ptlrpc_conformance import spec
from ptlrpc_conformance.fixtures.stateful import part_seed, run_machine
from ptlrpc_conformance.harness.data.registry import case_aliases
from ptlrpc_conformance.harness.ost import scenario as scen, wire
from ptlrpc_conformance.harness.verdicts import judge
from ptlrpc_conformance.suites.recovery_machine import RecoveryMachine
from ptlrpc_conformance.suites.target_machine import TargetMachine

SCENARIOS = scen.load_all()
TARGETS = [pytest.param(commit, saved, id=f"{commit}{'-saved-replies' if saved else ''}")
           for commit in independent_ost.COMMIT_POLICIES for saved in (False, True)]
SEEDS = (1, 2, 3)                   # the random policy's seeds (one each for the other policies)


def _testees(commit, saved, seeds=SEEDS):
    for seed in seeds if commit == "random" else seeds[:1]:
        yield seed, independent_ost.Testee(commit=commit, seed=seed, saved_replies=saved)


@pytest.mark.parametrize("commit,saved", TARGETS)
def test_every_scenario_passes_under_each_commit_policy(commit, saved):
    assert len(SCENARIOS) >= 47
    for seed, testee in _testees(commit, saved):
        adapter = started(testee)
        failed = {s.id: problems for s in SCENARIOS if (problems := scen.run(s, adapter)[0])}
        assert not failed, (commit, saved, seed, failed)


MACHINES = [(TargetMachine, part, 40) for part in case_aliases()["target.stateful.exchange"]] + \
           [(RecoveryMachine, part, 30) for part in case_aliases()["recovery.stateful.restart"]]


@pytest.mark.parametrize("commit,saved", TARGETS)
def test_every_stateful_part_passes_under_each_commit_policy(commit, saved):
    """Each target and recovery stateful part, a small budget of examples (5 each; one seed of
    the random policy: the parts draw their own sequences)."""
    for seed, testee in _testees(commit, saved, SEEDS[:1]):
        for machine, part, steps in MACHINES:
            got: list[judge.Judgement] = []
            run_machine(machine, started(testee), got.append, case=part, requirements=[], examples=5, steps=steps,
                        run_seed=part_seed(part, 20261128 + seed), needs=(), what="rules")
            assert [j.status for j in got] == [judge.PASS], (commit, saved, seed, part, got[0].message[:3000])


def _step(records, note):
    return next(r for r in records if r.note.startswith(note))


def _reply(record):
    return wire.parse(record.reply, "reply")


@pytest.mark.parametrize("scenario_id,change,replay", [
    ("recovery.unusual.claimed-transno.setattr", 17, 18),
    ("recovery.unusual.claimed-transno.create", 12, 13),
    ("recovery.unusual.claimed-transno.third-client", 21, 22)])
def test_a_replay_carries_the_transno_its_own_reply_gave(scenario_id, change, replay):
    """The change a client sent during recovery takes the next transno (not a lost one when the
    target had committed everything) and its replay carries that transno, which a target
    answering from saved replies gives back."""
    s = next(s for s in SCENARIOS if s.id == scenario_id)
    problems, records = scen.run(s, started(independent_ost.Testee(commit="at-once", saved_replies=True)))
    assert problems == []
    sent = _reply(records[change - 1]).body["pb_transno"]
    replayed = wire.parse(records[replay - 1].request, "request").body["pb_transno"]
    assert sent and replayed == sent == _reply(records[replay - 1]).body["pb_transno"]


@pytest.mark.parametrize("saved,status", [(False, -spec.errno_value("EOVERFLOW")), (True, 0)])
def test_a_committed_replay_with_a_wrong_pre_version_may_be_answered_from_its_saved_reply(saved, status):
    """recovery.vbr-mismatch where the setattr committed at the restart, unknown to its client:
    run again, the version check refuses it; answered from its saved reply, it checks nothing."""
    s = next(s for s in SCENARIOS if s.id == "recovery.vbr-mismatch")
    problems, records = scen.run(s, started(independent_ost.Testee(commit="at-restart", saved_replies=saved)))
    assert problems == []
    assert _reply(_step(records, "replay of the committed setattr")).status == status


def test_the_commit_policies_commit_where_they_say():
    """What each policy has committed after four transactions, and after a restart."""
    seen = {}
    for commit in independent_ost.COMMIT_POLICIES:
        t = independent_ost.Target(commit=commit)
        exp = t.exports["c"] = independent_ost.Export("c", 1)
        transnos = [t.transact(exp, xid) for xid in range(1, 5)]
        before = t.last_committed
        t.restart()
        seen[commit] = (transnos.index(before) + 1 if before else 0, t.last_committed == transnos[-1])
    assert seen["newer3"] == (1, False)
    assert seen["at-once"] == (4, True)
    assert seen["at-restart"] == (0, True)
    assert seen["random"][0] in range(5)
    with pytest.raises(ValueError, match="commit policy"):
        independent_ost.Target(commit="sometimes")


@pytest.mark.parametrize("old_creates", [False, True], ids=["replay-create", "old-creates"])
def test_scenarios_hold_when_a_client_without_a_transno_is_forgotten(old_creates):
    """Lustre writes a client's slot in last_rcvd at its connect in a local transaction that
    commits with the next commit of anything; only the client's first transaction with a transno
    is synchronous until then (tgt_client_data_update, exp_need_sync).  So a restart may forget
    a client no reply had given a transno.  The independent OST with `forget=True` writes slots
    that way, under every commit policy (the random one may commit just before a connect): each
    scenario passes, or is not applicable because such a client was forgotten
    (scenario.ClientForgotten), never fails; a client that had a transno is always remembered,
    so a scenario whose every client had one (recovery.replay.one-client, and recovery.filter,
    whose client makes a change with a transno before the restart) is always judged."""
    forgotten, runs = set(), 0
    for commit in independent_ost.COMMIT_POLICIES:
        for seed in range(1, 7) if commit == "random" else (1,):
            adapter = started(independent_ost.Testee(forget=True, commit=commit, seed=seed, old_creates=old_creates))
            for s in SCENARIOS:
                try:
                    problems = scen.run(s, adapter)[0]
                except scen.ClientForgotten:
                    forgotten.add(s.id)
                    continue
                runs += 1
                assert not problems, (commit, seed, s.id, problems)
    assert runs > 8 * len(SCENARIOS)
    assert forgotten and not {"recovery.replay.one-client", "recovery.filter"} & forgotten, forgotten
