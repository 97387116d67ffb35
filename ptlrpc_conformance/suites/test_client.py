"""Clients (docs/client-rules.md): one case per client rule, `client.conduct.<rule>`, each the
client judge's finding (harness/ost/client_judge.py) over one conversation.

The IUT is a client the suite runs (`certify --client COMMAND`, i.e. `--iut client:COMMAND`):
the suite serves the reference target as an OST with the minimal MGS on 127.0.0.1, starts the
client against it and puts the fault schedule of the run's seed on its workload
(harness/ost/client_run.py).  The client runs once per session; every case reads the same
conversation.  A rule the conversation never let the judge check is not exercised: its case
passes with no evidence (requirement verdict `not-exercised`).  Any other IUT: not applicable.
"""
from __future__ import annotations

import pytest

from ptlrpc_conformance.harness.ost import client_judge as cj
from ptlrpc_conformance.harness.outputs.report import NOT_APPLICABLE_PREFIX
from ptlrpc_conformance.harness.transport.loader import ClientUnderTest


def case_id(rule: str) -> str:
    """CLI-XID-1 -> client.conduct.xid-1"""
    return "client.conduct." + rule.lower().removeprefix("cli-")


@pytest.fixture(scope="session")
def client_judged(iut, run_settings):
    """(the run, the findings, why it could not be judged) of the client under test; None
    when the IUT is not a client."""
    testee = getattr(iut, "target", None)
    if not isinstance(testee, ClientUnderTest):
        return None
    from ptlrpc_conformance.harness.ost.client_run import ClientStartError, run_client
    try:
        run = run_client(testee.command, run_settings.seed)
    except ClientStartError as e:
        return None, None, str(e)
    try:
        return run, cj.judge(run.events()), ""
    except cj.UnreadableRequest as e:
        return run, None, str(e)


@pytest.mark.parametrize("rule", [
    pytest.param(r, id=case_id(r), marks=pytest.mark.conformance(case=case_id(r), requirements=[r]))
    for r in cj.RULES])
def test_client_conduct(rule, iut, conclude, client_judged):
    """The client judge's finding on `rule` over the client's conversation."""
    from ptlrpc_conformance.harness.verdicts.judge import FAIL, PASS, Judgement
    if client_judged is None:
        pytest.skip(NOT_APPLICABLE_PREFIX + "the IUT is not a client (certify --client COMMAND runs one)")
    run, findings, trouble = client_judged
    if findings is None:
        j = Judgement(FAIL, f"{rule}: the client's conversation cannot be judged: {trouble}")
        if run is not None:
            j.notes["client_reproducer"] = run.reproducer()
        conclude(j.charge([rule]))
        return
    f = findings[rule]
    notes = {"client": {"seed": run.seed, "schedule": run.described_schedule(), "exit_status": run.exit_status,
                        "exchanges": len(run.conversation), "checked": f.checked}}
    if f.verdict == "fail":
        j = Judgement(FAIL, f.describe(), notes)
        j.notes["signature"] = f"{rule}: {f.why.split(':')[0]}"[:200]
        j.notes["client_reproducer"] = run.reproducer()
        conclude(j.charge([rule]))
        return
    conclude(Judgement(PASS, "", dict(notes, exercised=[rule] if f.verdict == "pass" else [])))
