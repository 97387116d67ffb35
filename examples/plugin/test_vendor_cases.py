"""Two conformance cases of a vendor's own, run by the ptlrpc-conformance pytest plugin
(docs/plugin.md walks through them).  Run them against your implementation with

    python3 -m pytest examples/plugin --iut "exec:./my-testee" --conformance-report report.json
"""
import pytest

from ptlrpc_conformance.harness.data.vectors import load_all
from ptlrpc_conformance.harness.transport.protocol import Outcome
from ptlrpc_conformance.harness.verdicts.judge import ERROR, FAIL, PASS, Judgement

# A valid OBD_PING request, little-endian: one of the suite's golden vectors (canonical bytes).
PING = next(v for v in load_all() if v.id == "framing.magic.v2-native")
HEADER = 32      # bytes of lustre_msg_v2 before lm_buflens[]


def short_header_verdict(prefix: bytes, outcome: Outcome, errno_agnostic: bool) -> Judgement | None:
    """None when the IUT rejected `prefix` as HDR-LENGTH-1 requires, else the judgement."""
    if outcome.trouble:                      # crashed, hung or garbled its answer
        return Judgement(ERROR, f"{len(prefix)}-byte prefix: {outcome.describe()}")
    if outcome.ok:
        return Judgement(FAIL, f"{len(prefix)}-byte prefix {prefix.hex() or '(empty)'}: accepted, "
                               "expected a rejection with EINVAL")
    if outcome.error != "EINVAL" and not errno_agnostic:
        return Judgement(FAIL, f"{len(prefix)}-byte prefix {prefix.hex() or '(empty)'}: "
                               f"{outcome.describe()}, expected EINVAL")
    return None


@pytest.mark.conformance(case="vendor.short-header.decode", requirements=["HDR-LENGTH-1"])
def test_every_prefix_shorter_than_the_header_is_rejected(iut, need, errno_agnostic, conclude):
    need(iut, "decode", "request")           # not applicable unless the IUT decodes requests
    for length in range(HEADER):
        prefix = PING.data[:length]
        outcome = iut.call({"op": "decode", "data": prefix.hex(), "direction": "request"})
        verdict = short_header_verdict(prefix, outcome, errno_agnostic)
        if verdict is not None:
            conclude(verdict)                # fails the case (or records an error) with the message
    conclude(Judgement(PASS))


@pytest.mark.conformance(case="vendor.ping.round-trip", requirements=["ENC-CANON-1"])
def test_decoded_ping_encodes_to_the_same_bytes(iut, need, conclude):
    need(iut, "decode", "request")
    need(iut, "encode")                      # a decoder-only IUT: this case is not applicable
    decoded = iut.call({"op": "decode", "data": PING.data.hex(), "direction": "request"})
    if not decoded.ok:
        conclude(Judgement.unexpected(decoded, "decoding the ping"))
    encoded = iut.call({"op": "encode", "message": decoded.result})
    if not encoded.ok:
        conclude(Judgement.unexpected(encoded, "encoding the decoded ping"))
    data = encoded.result.get("data") if isinstance(encoded.result, dict) else None
    if data != PING.data.hex():
        conclude(Judgement(FAIL, f"encode(decode(ping)) gave {data}, expected {PING.data.hex()}"))
    conclude(Judgement(PASS))
