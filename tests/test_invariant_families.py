"""TargetChecker.observe records, family by family, the invariants it put an exchange to
(`judged`); the step judge credits a passing step with exactly those.  So what a step is
evidence for cannot drift from what observe checks: every rule observe flags is one it says
it judged, on recorded traces and on their replies altered at random."""
import random

from conftest import ROOT
from ptlrpc_conformance.harness.ost import trace, wire
from ptlrpc_conformance.harness.ost.invariants import TargetChecker
from ptlrpc_conformance.harness.ost.steps import StepJudge

TRACES = ROOT / "tests" / "traces"


def altered(reply: bytes | None, rng: random.Random) -> bytes | None:
    """`reply` with one or two ptlrpc_body words changed the way a faulty target would."""
    rep = wire.try_parse(reply, "reply")[0] if reply is not None else None
    if rep is None:
        return reply
    body = dict(rep.body)
    for _ in range(rng.randint(1, 2)):
        name, value = rng.choice((("pb_type", wire.ERR), ("pb_type", wire.REPLY), ("pb_transno", 0),
                                  ("pb_transno", rng.randrange(1, 1 << 34)), ("pb_last_committed", 0),
                                  ("pb_last_committed", rng.randrange(1, 1 << 34)), ("pb_status", 0),
                                  ("pb_status", rng.choice((-2, -107, -19, 5))), ("pb_handle", 0),
                                  ("pb_handle", rng.randrange(1, 1 << 63)), ("pb_opc", rng.choice((400, 4, 8)))))
        body[name] = value % (1 << 32) if name == "pb_status" else value
    return wire.pack_message([wire.pack_body(body)] + rep.buffers[1:])


def test_every_rule_observe_flags_is_one_it_judged():
    rng = random.Random(20261127)
    flagged = set()
    for path in sorted(TRACES.glob("*.jsonl")):
        records = [r for r in trace.read(path) if "request" in r]
        for attempt in range(30):
            for checker in (TargetChecker(), TargetChecker(sees_all=False)):
                for r in records:
                    reply = r["reply"] if attempt == 0 else altered(r["reply"], rng)
                    for v in checker.observe(r["client"], r["xid"], r["request"], reply):
                        assert v.rule in checker.judged, (path.name, str(v), checker.judged)
                        flagged.add(v.rule)
    assert len(flagged) >= 8, flagged


def test_a_passing_step_is_credited_with_what_observe_judged():
    records = [r for r in trace.read(TRACES / "ldlm-cancel-dead-cookie.jsonl") if "request" in r]
    steps = StepJudge()
    for n, r in enumerate(records, 1):
        _, problems = steps.judge(n, r["client"], r["xid"], r["request"], r["reply"])
        assert problems == []
        assert set(steps.checker.judged) <= set(steps.judged)
    assert {"TGT-REPLY-1", "TGT-CONN-1"} <= set(steps.judged)
