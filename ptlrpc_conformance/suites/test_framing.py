"""Framing: the lustre_msg_v2 header, padding and ptlrpc_body (RULES.md HDR, PAD, BODY, CKSUM).

Cases come from the golden vectors in vectors/*.yaml: every vector is a decode case
(`<vector id>.decode`), every canonical vector also an encode case (`<vector id>.encode`).
"""
from ptlrpc_conformance.harness.judge import combine, judge_decode, judge_encode


def test_decode(decode_vector, iut, need, errno_agnostic, conclude):
    """valid: accepted and decoded to the listed fields; invalid: rejected with an allowed
    errno class; acceptable: either, but never a crash, hang or garbage."""
    need(iut, "decode")
    outcome = iut.call(decode_vector.decode_request())
    conclude(judge_decode(decode_vector, outcome, errno_agnostic, iut.supports("structs")))


def test_encode(encode_vector, iut, need, conclude):
    """A canonical vector's fields encode to exactly its bytes."""
    need(iut, "encode")
    outcome = iut.call(encode_vector.encode_request())
    conclude(judge_encode(encode_vector, outcome))


def test_derived(derived_case, iut, need, errno_agnostic, conclude):
    """Variants the suite derives from the valid vectors (harness/derive.py): byte-swapped
    twins, truncations, lm_bufcount and lm_buflens[] one off.  Each case sends its variants
    as one batch; verdicts come from the suite's rule model, never from an IUT."""
    need(iut, "decode")
    variants = derived_case.variants
    outcomes = iut.call_many([{"op": "decode", "data": v.data.hex(), "direction": v.direction} for v in variants])
    judgements = [judge_decode(v, o, errno_agnostic) for v, o in zip(variants, outcomes)]
    conclude(combine(derived_case.id, variants, judgements))
