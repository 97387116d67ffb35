"""The testee protocol itself (docs/testee-protocol.md): unknown operations, and the
encoder's refusals of malformed input."""
import pytest

from ptlrpc_conformance.harness.verdicts import judge

# case id: (the MESSAGE given to encode, why it is malformed, its valid neighbour: the same
# message made consistent, sent with it as a control)
ENCODE_REFUSALS = {
    "protocol.encode.bufcount-mismatch": ({"header": {"lm_bufcount": 2}}, "lm_bufcount 2 with one buffer",
                                          {"header": {"lm_bufcount": 1}}),
    "protocol.encode.buflens-mismatch": ({"buflens": [184, 8]}, "two buflens for one buffer", {"buflens": [184]}),
    "protocol.encode.buflen-wrong": ({"buflens": [184, 3], "buffers": [None, "0102"]}, "buflens[1] 3, buffer of 2",
                                     {"buflens": [184, 2], "buffers": [None, "0102"]}),
    "protocol.encode.bad-hex": ({"buffers": [None, "zz"]}, "buffer 1 is not hex", {"buffers": [None, "00"]}),
    "protocol.encode.unknown-body-field": ({"body": {"pb_no_such_field": 1}}, "no such body field",
                                           {"body": {"pb_opc": 1}}),
    "protocol.encode.unknown-header-field": ({"header": {"lm_no_such_field": 1}}, "no such header field",
                                             {"header": {"lm_flags": 1}}),
    "protocol.encode.value-too-big": ({"body": {"pb_opc": 1 << 32}}, "pb_opc does not fit 32 bits",
                                      {"body": {"pb_opc": (1 << 32) - 1}}),
    "protocol.encode.negative-unsigned": ({"body": {"pb_transno": -1}}, "pb_transno is unsigned",
                                          {"body": {"pb_transno": 0}}),
}


def _known_operation(iut) -> dict:
    """A request for an operation the IUT declared, on valid input: the decode of a canonical
    valid vector (a direction it decodes), else the encode of the empty MESSAGE, else hello."""
    if iut.supports("decode"):
        from ptlrpc_conformance.harness.data.vectors import load_all
        for v in sorted(load_all(), key=lambda v: v.id):
            if v.op == "decode" and v.verdict == "valid" and v.canonical and iut.hello.decodes(v.direction):
                return v.decode_request()
    if iut.supports("encode"):
        return {"op": "encode", "message": {}}
    return {"op": "hello"}


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
    # the refusal is evidence only when an operation the IUT declared, on valid input, is accepted
    control = iut.call(_known_operation(iut), probe=True)
    conclude(judge.Judgement(judge.PASS, notes={"exercised": ["PROTO-OPS-1"]} if control.ok else {
        "exercised": [], "control_rejected": f"a declared operation on valid input was refused too "
                                             f"({control.describe()}): the refusal is no evidence"}))


@pytest.mark.parametrize("case", [pytest.param(c, id=c, marks=pytest.mark.conformance(case=c, requirements=["ENC-REJECT-1"]))
                                  for c in ENCODE_REFUSALS])
def test_encoder_refuses_malformed_input(case, iut, need, conclude):
    need(iut, "encode")
    message, why, neighbour = ENCODE_REFUSALS[case]
    outcome, control = iut.call_many([{"op": "encode", "message": message}, {"op": "encode", "message": neighbour}])
    if outcome.trouble:
        conclude(judge.Judgement(judge.ERROR, f"{why}: {outcome.describe()}"))
    if not (outcome.rejected and outcome.error == "EINVAL"):
        conclude(judge.Judgement(judge.FAIL, f"{case}: {why}\nmessage:  {message}\n"
                                             f"expected: rejected with EINVAL\nactual:   {outcome.describe()}"))
    # the refusal is evidence only when the same message made consistent is encoded
    conclude(judge.Judgement(judge.PASS, notes={"exercised": ["ENC-REJECT-1"]} if control.ok else {
        "exercised": [], "control_rejected": f"its valid neighbour {neighbour} was refused too "
                                             f"({control.describe()}): the refusal is no evidence"}))
