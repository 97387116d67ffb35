"""Framing: the lustre_msg_v2 header, padding and ptlrpc_body (docs/rules.md, HDR, PAD, BODY, CKSUM).

Cases come from the golden vectors in vectors/*.yaml: every vector is a decode case
(`<vector id>.decode`), every canonical vector also an encode case (`<vector id>.encode`).
"""
from ptlrpc_conformance.fixtures.core import control_vector
from ptlrpc_conformance.harness.verdicts.judge import combine, judge_decode, judge_encode


def test_decode(decode_vector, iut, need, errno_agnostic, conclude, request, run_settings):
    """valid: accepted and decoded to the listed fields; invalid: rejected with an allowed
    errno class; acceptable: either, but never a crash, hang or garbage.  An invalid or
    implementation-defined vector is sent with its valid neighbour (fixtures/core.py
    control_vector) in one batch: its rejection is evidence only when the neighbour is accepted
    (an IUT that rejects everything exercises nothing); the neighbour's own verdict is its case's."""
    need(iut, "decode", decode_vector.direction)
    neighbour = control_vector(request.config, decode_vector)
    if neighbour is None:
        outcome, control = iut.call(decode_vector.decode_request()), None
    else:
        outcome, control = iut.call_many([decode_vector.decode_request(), neighbour.decode_request()])
    j = judge_decode(decode_vector, outcome, errno_agnostic, iut.supports("structs"), control=control,
                     settings=run_settings)
    if neighbour is not None and "control_rejected" in j.notes:
        j.notes["control_rejected"] = f"{neighbour.id}: {j.notes['control_rejected']}"
    conclude(j)


def test_encode(encode_vector, iut, need, conclude):
    """A canonical vector's fields encode to exactly its bytes."""
    need(iut, "encode")
    outcome = iut.call(encode_vector.encode_request())
    conclude(judge_encode(encode_vector, outcome))


def test_derived(derived_case, iut, need, errno_agnostic, conclude, run_settings):
    """Variants the suite derives from the valid vectors (harness/verdicts/derive.py): byte-swapped
    twins, truncations, lm_bufcount and lm_buflens[] one off.  Each case sends its variants
    as one batch, with the vector they come from as a control (a variant rejected because
    the vector itself is rejected is charged as the vector is); verdicts come from the suite's
    rule model, never from an IUT."""
    need(iut, "decode")
    variants, origin = derived_case.variants, derived_case.origin
    for direction in sorted({v.direction for v in variants} | {origin.direction}):
        need(iut, "decode", direction)
    *outcomes, control = iut.call_many([{"op": "decode", "data": v.data.hex(), "direction": v.direction}
                                        for v in (*variants, origin)])
    listed = list(derived_case.requirements)
    judgements = [judge_decode(v, o, errno_agnostic, role=derived_case.role, control=control, origin=origin,
                               listed=listed, settings=run_settings) for v, o in zip(variants, outcomes)]
    conclude(combine(derived_case.id, variants, judgements))
