"""A target's behaviour (docs/target-rules.md): a stateful Hypothesis suite through the
adapter, and the bundled scenario vectors.

The stateful cases (parts of one budget of examples, fixtures/stateful.py) run the machine of
suites/target_machine.py, imported when they run (it imports Hypothesis); it drives three
clients — c1 plain, c2 asking for OBD_CONNECT2_REPLAY_CREATE, c3 asking for
OBD_CONNECT_RDONLY (what each gets is what its connect reply grants) — through connects,
reconnects, disconnects, modifying and read-only requests, failing requests, requests that
break one rule each, and resends of requests whose reply was "lost".  Objects are named by
their offset from the LAST_ID the first create revealed; creates name ids above LAST_ID
(several at a time: a precreate) or at and below it (nothing is made).  After every step
the reply is judged against what the suite expects of that step and against the invariants
(harness/ost/invariants.py).  A failure is shrunk to a short list of exchanges, shown with
annotated hex and saved as a scenario vector (reproducers/ beside report.json).
"""
from __future__ import annotations

import pytest

from ptlrpc_conformance.harness.verdicts import judge
from ptlrpc_conformance.harness.verdicts.charges import named_requirements
from ptlrpc_conformance.harness.ost import scenario as scen
from ptlrpc_conformance.harness.data.registry import case_aliases, requirements
from ptlrpc_conformance.harness.ost.scenario import TargetError
from ptlrpc_conformance.harness.outputs.report import NOT_APPLICABLE_PREFIX

STATEFUL_REQUIREMENTS = ["TGT-DROP-1", "TGT-ERR-1", "TGT-ERR-2", "TGT-ERR-3", "TGT-TRANSNO-1", "TGT-TRANSNO-2",
                         "TGT-TRANSNO-3", "TGT-RESEND-1", "TGT-RESEND-2", "TGT-CONN-1", "TGT-CONN-2", "TGT-OBJ-1", "TGT-REPLY-1",
                         "RCV-OUTSIDE-1"]


def _scenarios(config):
    from ptlrpc_conformance.harness.data.vectors import VectorError
    try:
        return scen.load_all(config.getoption("conformance_vectors") or ())
    except VectorError as e:          # the user's scenario files: a usage error (any other exception is the suite's bug)
        raise pytest.UsageError("scenario files have problems:\n  " + "\n  ".join(getattr(e, "problems", [str(e)])))


def pytest_generate_tests(metafunc):
    if "scenario_vector" in metafunc.fixturenames:
        metafunc.parametrize("scenario_vector", [
            pytest.param(s, id=f"{s.id}.exchange", marks=pytest.mark.conformance(case=f"{s.id}.exchange",
                                                                                requirements=list(s.requirements)))
            for s in _scenarios(metafunc.config)])


def test_scenario(scenario_vector, iut, need, conclude, run_settings):
    for capability_op in {"target": "exchange", "restart": "restart"}.items():
        if capability_op[0] in scenario_vector.needs:
            need(iut, capability_op[1])
    judged: list[str] = []
    try:
        problems, records = scen.run(scenario_vector, iut, reconstruct=run_settings.reconstruct,
                                     judged=judged, release=run_settings.release)
    except scen.ScenarioNotApplicable as e:
        pytest.skip(NOT_APPLICABLE_PREFIX + str(e))
    except TargetError as e:
        conclude(judge.Judgement(judge.ERROR, f"{scenario_vector.id}: the target could not carry out an operation: {e}"))
        return
    if problems:
        j = judge.Judgement(judge.FAIL, f"{scenario_vector.id}: {scenario_vector.title}\n" + "\n".join(problems)
                            + "\n\nexchanges:\n" + scen.render_transcript(records))
        j.notes["signature"] = problems[0].split(": ", 2)[1] if ": " in problems[0] else problems[0]
        # charged to the first failing step's rules; the problems after it are listed, not charged
        j.charge(named_requirements("\n".join(scen.first_failure(problems)), requirements()))
        conclude(j)
    # a pass is evidence for the requirements of the steps whose expectations were judged
    conclude(judge.Judgement(judge.PASS, notes={"exercised": sorted(set(judged))}))


# the stateful cases run after the scenario vectors (a run stopped at its first failure
# reports the quickest one); they are parts of equal weight of one budget of examples,
# target.stateful.exchange.1 ... (spec/case_aliases.yaml: the old id names them all)
STATEFUL_PARTS = case_aliases()["target.stateful.exchange"]


@pytest.mark.parametrize("part", [
    pytest.param(c, id=c, marks=pytest.mark.conformance(case=c, requirements=STATEFUL_REQUIREMENTS))
    for c in STATEFUL_PARTS])
def test_target_stateful(part, iut, need, conclude, conformance_examples, run_settings, conformance_seed):
    """Random sequences of client requests; every reply judged as it comes."""
    from ptlrpc_conformance.fixtures.stateful import part_examples, part_seed, run_machine
    from ptlrpc_conformance.suites.target_machine import TargetMachine
    need(iut, "exchange")
    run_machine(TargetMachine, iut, conclude, case=part, requirements=STATEFUL_REQUIREMENTS,
                examples=part_examples(max(10, conformance_examples // 4), len(STATEFUL_PARTS)), steps=40,
                run_seed=part_seed(part, conformance_seed), needs=("target",), what="target rules",
                reconstruct=run_settings.reconstruct, release=run_settings.release)
