"""Recovery (docs/target-rules.md §7): a stateful Hypothesis suite that restarts the target
at random points.

Three clients (all asking for OBD_CONNECT2_REPLAY_CREATE, so that creates take transnos where
the target grants it) create, change and destroy objects and keep their replay lists as a
Lustre client does (TRANSNO-6: a request whose transno is above the last committed value it
was sent stays on the list; the rest are dropped).  At a random point the target restarts;
some clients come back, reconnect and replay — one outstanding replay per client, none after
its MSG_REQ_REPLAY_DONE — in an interleaving Hypothesis chooses; the others never come back.
The clients send only what a Lustre client sends (docs/scenarios.md, "The client model"): a
client whose import is replaying sends its replays (requests it sent before the restart,
again) and the two pings that end them, nothing else, until recovery is over.  When every
client left waits, the recovery window expires (`end_recovery`); the target may go on with
the clients it keeps or evict every client that has not finished, so after an expiry such a
client may be answered ERR -ENOTCONN, and is evicted from then on.  Afterwards every object
is read back and must be what the rules allow (RCV-STATE-1):

- the changes at or below the target's commit point C, in transno order (a create without a
  transno survives when a later transno is committed, and may or may not otherwise);
- then, in the order the target ran them (the order their replies came; held replays of one
  batch in transno order): every replay of a lost change, and every replay of a change that
  was committed although its client had not been told — run again (Lustre's OST) or answered
  from a saved reply; a replay answered ERR -ENOTCONN (its client evicted) did not run;
- nothing else.

Transactions commit in transno order, so C lies between the highest last-committed value any
client was told and the highest transno issued; a target that reports its commit point in
`restart`'s result is judged on exactly that point, otherwise every such C is tried.  Every
reply's status must agree with the candidate state it ran on.  A second restart waits until
a client has been told that a transaction of the new epoch committed (so everything before
it is on stable storage).

The changes drawn are those a client makes on every release: setattr, punch and destroy take
a transno everywhere (ofd_trans_start, tgt_last_rcvd_update), a create only where
OBD_CONNECT2_REPLAY_CREATE was granted (2.16 and later); a create without one is never
replayed.  When a replay the target held was answered and the objects read back agree, the
replay order is judged too (RCV-ORDER-1: the candidates run each batch's held replays in
transno order).

The machine is suites/recovery_machine.py, imported when the stateful cases run (it imports
Hypothesis).
"""
from __future__ import annotations

import pytest

from ptlrpc_conformance.harness.data.registry import case_aliases
from ptlrpc_conformance.harness.outputs.report import NOT_APPLICABLE_PREFIX

REQUIREMENTS = ["RCV-CONN-1", "RCV-REPLAY-1", "RCV-ORDER-1", "RCV-EPOCH-1", "RCV-STATE-1", "TGT-TRANSNO-1",
                "TGT-TRANSNO-3", "TGT-CONN-2"]

# parts of equal weight of one budget of examples, recovery.stateful.restart.1 ...
# (spec/case_aliases.yaml: the old id names them all)
PARTS = case_aliases()["recovery.stateful.restart"]


@pytest.mark.parametrize("part", [
    pytest.param(c, id=c, marks=pytest.mark.conformance(case=c, requirements=REQUIREMENTS)) for c in PARTS])
def test_recovery_stateful(part, iut, need, conclude, conformance_examples, conformance_seed, run_settings):
    """Random changes, restarts at random points, replays in random interleavings."""
    from ptlrpc_conformance.fixtures.stateful import part_examples, part_seed, run_machine
    from ptlrpc_conformance.harness.ost.session import recovery_disabled
    from ptlrpc_conformance.suites.recovery_machine import RecoveryMachine
    need(iut, "exchange")
    need(iut, "restart")
    if recovery_disabled(iut):
        pytest.skip(NOT_APPLICABLE_PREFIX + "the target runs with recovery disabled: it has no recovery to judge "
                    "(recovery.disabled judges its restart)")
    run_machine(RecoveryMachine, iut, conclude, case=part, requirements=REQUIREMENTS,
                examples=part_examples(max(10, conformance_examples // 4), len(PARTS)), steps=30,
                run_seed=part_seed(part, conformance_seed), needs=("target", "restart"), what="recovery rules",
                release=run_settings.release)
