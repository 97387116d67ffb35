"""The testee protocol itself (docs/testee-protocol.md): unknown operations, and the
encoder's refusals of malformed input."""
import pytest

from ptlrpc_conformance.harness.verdicts import judge

# case id: (the MESSAGE given to encode, why it is malformed)
ENCODE_REFUSALS = {
    "protocol.encode.bufcount-mismatch": ({"header": {"lm_bufcount": 2}}, "lm_bufcount 2 with one buffer"),
    "protocol.encode.buflens-mismatch": ({"buflens": [184, 8]}, "two buflens for one buffer"),
    "protocol.encode.buflen-wrong": ({"buflens": [184, 3], "buffers": [None, "0102"]}, "buflens[1] 3, buffer of 2"),
    "protocol.encode.bad-hex": ({"buffers": [None, "zz"]}, "buffer 1 is not hex"),
    "protocol.encode.unknown-body-field": ({"body": {"pb_no_such_field": 1}}, "no such body field"),
    "protocol.encode.unknown-header-field": ({"header": {"lm_no_such_field": 1}}, "no such header field"),
    "protocol.encode.value-too-big": ({"body": {"pb_opc": 1 << 32}}, "pb_opc does not fit 32 bits"),
    "protocol.encode.negative-unsigned": ({"body": {"pb_transno": -1}}, "pb_transno is unsigned"),
}


@pytest.mark.conformance(case="protocol.unknown-op.probe", requirements=["PROTO-OPS-1"])
def test_unknown_operation_is_eopnotsupp(iut, conclude):
    outcome = iut.call({"op": "x-no-such-operation"}, probe=True)
    if outcome.trouble:
        conclude(judge.Judgement(judge.ERROR, f"unknown op: {outcome.describe()}"))
    if not (outcome.rejected and outcome.error == "EOPNOTSUPP"):
        conclude(judge.Judgement(judge.FAIL, f"expected: rejected with EOPNOTSUPP\nactual:   {outcome.describe()}"))
    after = iut.call({"op": "hello"}, probe=True)
    if not after.ok:
        conclude(judge.Judgement(judge.FAIL, f"after an unknown op the testee no longer answers hello: {after.describe()}"))


@pytest.mark.parametrize("case", [pytest.param(c, id=c, marks=pytest.mark.conformance(case=c, requirements=["ENC-REJECT-1"]))
                                  for c in ENCODE_REFUSALS])
def test_encoder_refuses_malformed_input(case, iut, need, conclude):
    need(iut, "encode")
    message, why = ENCODE_REFUSALS[case]
    outcome = iut.call({"op": "encode", "message": message})
    if outcome.trouble:
        conclude(judge.Judgement(judge.ERROR, f"{why}: {outcome.describe()}"))
    if not (outcome.rejected and outcome.error == "EINVAL"):
        conclude(judge.Judgement(judge.FAIL, f"{case}: {why}\nmessage:  {message}\n"
                                             f"expected: rejected with EINVAL\nactual:   {outcome.describe()}"))
