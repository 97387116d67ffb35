"""Target rules that a re-read of Lustre 2.17.57's OST code corrected (issue 25, item 5): a
projid on an OST without project quota, FLPROJID in every GETATTR, FULL20 in connect replies,
the last transaction's XID repeated without MSG_RESENT (row 12), a replay claim queued in the
recovery thread's window, and the hello's `configuration` that declares how a target is set
up.  Each point comes with the scenario that failed (or passed wrongly) before."""
import pytest

import independent_ost
from adapters import started
from ptlrpc_conformance import reference, spec
from ptlrpc_conformance.mutants import broken_targets as mutant_targets
from ptlrpc_conformance.harness.ost import scenario as scen
from ptlrpc_conformance.harness.ost.client import reply
from ptlrpc_conformance.harness.transport.protocol import HelloError, parse_hello
from ptlrpc_conformance.reference import ReferenceTestee, TargetConfig, make_testee

SCENARIOS = {s.id: s for s in scen.load_all()}
PROJID_SCENARIOS = ("target.obj.special-bits", "target.obj.punch", "target.obj.projid")


def _run(scenario_id, testee):
    return scen.run(SCENARIOS[scenario_id], started(testee))


class _Lying(ReferenceTestee):
    """A reference target whose hello declares a configuration other than its own."""

    def __init__(self, declared: dict, **kw):
        super().__init__(**kw)
        self.declared = declared

    def hello(self) -> dict:
        return dict(super().hello(), configuration=self.declared)


class _Switching(ReferenceTestee):
    """A target that refuses its first projid (no project quota) and applies every later one:
    two configurations in one run."""

    def target_op(self, op, request):
        result = super().target_op(op, request)
        if op == "reset":
            self._target.config = self.target_config.but(project_quota=False)
        if op == "exchange" and self._target.config.project_quota is False and self._refused(result):
            self._target.config = self._target.config.but(project_quota=True)
        return result

    @staticmethod
    def _refused(result) -> bool:
        from ptlrpc_conformance.harness.ost import wire
        rep = wire.try_parse(bytes.fromhex(result["data"]), "reply")[0] if result.get("data") else None
        return rep is not None and rep.status == -spec.errno_value("EOPNOTSUPP")


# ---- project quota -------------------------------------------------------------------------

@pytest.mark.parametrize("testee", [reference.ost_without_project_quota,
                                    lambda: make_testee(target_config=TargetConfig(project_quota=False)),
                                    independent_ost.testee, make_testee],
                         ids=["declared", "undeclared", "zfs-before-0.8", "with-project-quota"])
def test_every_projid_configuration_passes_the_projid_scenarios(testee):
    """Applied, refused (-EOPNOTSUPP, declared or not) and dropped silently (the independent
    target, a ZFS before 0.8 that declares nothing): each passes."""
    for sid in PROJID_SCENARIOS:
        assert _run(sid, testee())[0] == [], sid


def test_a_refused_projid_failed_the_scenarios_before():
    """Before, the projid steps expected REPLY 0 with a transno: an OST without project quota
    answers REPLY -EOPNOTSUPP with transno 0, so it failed them."""
    problems, records = _run("target.obj.special-bits", reference.ost_without_project_quota())
    assert problems == []
    refused = [r for r in records if r.client and "projid" in r.note and r.reply is not None
               and reply("EOPNOTSUPP").check(r.reply)[0] == []]
    assert refused, "the target refused no projid"
    assert all(reply(0, "nonzero").check(r.reply)[0] for r in refused)      # the old expectation fails


def test_a_refused_punch_may_have_truncated():
    """ldiskfs punches before it sets the attributes: the reference without project quota
    changes the size of a refused punch, and target.obj.projid accepts it."""
    problems, records = _run("target.obj.projid", reference.ost_without_project_quota())
    assert problems == []
    seen = [r for r in records if r.note.startswith("getattr 2") and r.reply is not None]
    from ptlrpc_conformance.harness.ost import model, wire
    assert model.observed(wire.parse(seen[0].reply, "reply")).size == 100


def test_a_declared_configuration_is_held():
    """A target that declares project quota and refuses a projid fails, and so does one that
    declares none and applies it; the message names the declaration."""
    lying = _Lying({"project_quota": True}, target_config=TargetConfig(project_quota=False))
    problems, _ = _run("target.obj.projid", lying)
    assert problems and "TGT-OBJ-1" in problems[0] and "declares project_quota true" in problems[0]
    problems, _ = _run("target.obj.projid", _Lying({"project_quota": False}))
    assert problems and "declares project_quota false" in " ".join(problems)


def test_a_target_that_changes_configuration_in_a_run_fails():
    """Refusing one projid and applying the next is no configuration Lustre has."""
    problems, _ = _run("target.obj.projid", _Switching())
    assert problems and "keeps one configuration" in " ".join(problems)


def test_the_stateful_target_case_passes_an_ost_without_project_quota(run_cli):
    """The stateful parts draw projids: they failed an OST without project quota before."""
    run = run_cli("certify", "--iut", "python:ptlrpc_conformance.reference:ost_without_project_quota",
                  "--case", "target.stateful.exchange", examples=100)
    assert run.rc == 0, run.stdout[-3000:]


# ---- FLPROJID, FULL20, row 12 ----------------------------------------------------------------

def test_getattr_without_flprojid_fails():
    """obdo_from_la sets FLPROJID in every GETATTR: a target that leaves it out was passed
    before (the suite took it as optional) and fails now."""
    problems, _ = _run("target.obj.fresh", mutant_targets.testee(mutant_targets.GetattrOmitsProjid))
    assert problems and "TGT-OBJ-1" in problems[0] and "o_valid" in problems[0]


def test_a_connect_reply_without_full20_fails():
    flags = TargetConfig().connect_flags & ~spec.constant("OBD_CONNECT_FULL20")
    problems, _ = _run("target.conn.connect-ping", make_testee(target_config=TargetConfig(connect_flags=flags)))
    assert problems and "TGT-CONN-1" in problems[0] and "FULL20" in problems[0]


def test_the_last_transaction_xid_repeated_without_resent_is_dropped():
    """Row 12: no scenario sent it before, so a target that runs it again passed everything."""
    assert _run("target.drop.last-transaction-xid", make_testee())[0] == []
    problems, _ = _run("target.drop.last-transaction-xid",
                       mutant_targets.testee(mutant_targets.RunsLastTransactionXid))
    assert problems and "TGT-DROP-1" in problems[0]


# ---- the claim window ------------------------------------------------------------------------

def test_a_claim_queued_in_the_recovery_threads_window_passes():
    """A claim that arrives before the recovery thread moved the next expected transno past the
    reply it just sent is queued and answered later: the scenario, which used to demand an
    answer at once, accepts it."""
    problems, records = _run("recovery.claimed-transno", make_testee(target_config=TargetConfig(claim_window=True)))
    assert problems == []
    claim = next(r for r in records if r.note.startswith("c2 replays") and r.client)
    assert "(reply deferred)" in claim.note
    assert SCENARIOS["recovery.claimed-transno"].steps[claim.step - 1].later


# ---- the hello ------------------------------------------------------------------------------

def test_the_hello_configuration_member():
    base = {"name": "t", "version": "1", "capabilities": ["target"], "protocol": 1}
    assert parse_hello(base).configuration == {}
    got = parse_hello(dict(base, configuration={"project_quota": False, "recovery": True, "later": 1}))
    assert got.configuration == {"project_quota": False, "recovery": True}
    for bad in ([], {"project_quota": "no"}, {"recovery": 1}):
        with pytest.raises(HelloError):
            parse_hello(dict(base, configuration=bad))
    assert reference.ost_without_recovery().hello()["configuration"] == {"project_quota": True, "recovery": False}
    assert "configuration" not in make_testee().hello()


# ---- recovery disabled -------------------------------------------------------------------------

TARGET_AREA = [s for s in SCENARIOS.values() if "restart" not in s.needs]


@pytest.mark.parametrize("testee", [reference.ost_without_recovery,
                                    lambda: make_testee(target_config=TargetConfig(recovery=False),
                                                        capabilities=("target",))],
                         ids=["declared", "undeclared"])
def test_a_target_with_recovery_disabled_passes_the_target_scenarios(testee):
    """No MSG_CONNECT_REPLAYABLE, no transno, row 12 never applied: before, every connect
    (REPLAYABLE required) and every change (a transno required) failed it."""
    for s in TARGET_AREA:
        assert scen.run(s, started(testee()))[0] == [], s.id
    problems, records = _run("target.conn.connect-ping", testee())
    assert problems == [] and reply(0, handle="nonzero", op_flags_all=spec.constant("MSG_CONNECT_REPLAYABLE")
                                    ).check(records[0].reply)[0]     # the old expectation fails it


def test_recovery_is_one_configuration_a_run():
    """Declared recovery enabled, a connect without REPLAYABLE fails; declared disabled, one with
    it fails."""
    problems, _ = _run("target.obj.lifecycle", _Lying({"recovery": True}, target_config=TargetConfig(recovery=False)))
    assert problems and "TGT-CONN-1" in problems[0] and "REPLAYABLE" in problems[0]
    problems, _ = _run("target.obj.lifecycle", _Lying({"recovery": False}))
    assert problems and "TGT-CONN-1" in problems[0]


def test_a_restart_with_recovery_disabled_has_no_recovery():
    """recovery.disabled judges both settings; the scenarios that judge recovery are not
    applicable to a target with recovery disabled (declared or shown by its connect reply)."""
    for testee in (reference.ost_without_recovery, make_testee,
                   lambda: make_testee(target_config=TargetConfig(recovery=False))):
        assert _run("recovery.disabled", testee())[0] == []
    for testee in (reference.ost_without_recovery, lambda: make_testee(target_config=TargetConfig(recovery=False))):
        with pytest.raises(scen.RecoveryDisabled):
            _run("recovery.replay.one-client", testee())
    # a target with recovery disabled that still recovers after a restart fails it
    problems, _ = _run("recovery.disabled", _Lying({"recovery": False}))
    assert problems and "TGT-CONN-1" in problems[0]


def test_the_reference_without_recovery_certifies(run_cli):
    run = run_cli("certify", "--iut", "python:ptlrpc_conformance.reference:ost_without_recovery",
                  "--area", "target", "--area", "recovery", examples=100)
    assert run.rc == 0, run.stdout[-3000:]
    verdicts = run.verdicts()
    assert verdicts["recovery.disabled.exchange"] == "pass"
    assert verdicts["recovery.replay.one-client.exchange"] == "not-applicable"
