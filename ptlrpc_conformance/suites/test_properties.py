"""Framing properties, checked through the adapter with Hypothesis.

Each property is one case.  Runs are derandomized: the seed is --conformance-seed
(recorded in report.json), so two runs of one IUT give one result.  A counterexample is
shrunk by Hypothesis and reported with its annotated bytes.

Hypothesis and the strategies are imported by the cases that use them, not by the module:
collecting the suites (every certification, `list`) does not pay for importing Hypothesis.
"""
import pytest

from ptlrpc_conformance.harness.verdicts import judge, pack
from ptlrpc_conformance.harness.verdicts.charges import (FOREIGN_ORDER, MODEL_CHARGEABLE, foreign,
                                                         model_example_requirement)
from ptlrpc_conformance.harness.verdicts.derive import MAX_DERIVE_SIZE
from ptlrpc_conformance.harness.verdicts.model import predict
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.data.vectors import Vector
from ptlrpc_conformance.harness.transport.adapter import NotApplicable

case = pytest.mark.conformance


class _Counterexample(Exception):
    """A failing example (its judgement)."""

    def __init__(self, j: judge.Judgement):
        super().__init__(j.message)
        self.judgement = j


def _charges_must(j: judge.Judgement) -> bool:
    known = registry.requirements()
    return any(known[r].level == "MUST" for r in j.failed_requirements if r in known)


def _counterexamples(e: BaseException) -> list[judge.Judgement] | None:
    """The judgements of the failing examples Hypothesis reported (one, or a group: distinct
    ones, or Flaky's), those charged to a MUST requirement first; None when it reported
    anything else too (an exception of the suite's own code)."""
    if isinstance(e, _Counterexample):
        return [e.judgement]
    if not isinstance(e, BaseExceptionGroup):
        return None
    found = [_counterexamples(inner) for inner in e.exceptions]
    if not found or None in found:
        return None
    return sorted((j for js in found for j in js), key=lambda j: not _charges_must(j))


def check_property(strategy, check, conformance_seed, conformance_examples, conclude, title, unreadable=(),
                   accepted_directions=(), iut=None, controls=None):
    """Run `check(example) -> Judgement` over `strategy`; conclude with the shrunk failure.
    `unreadable`: the requirements an IUT result the check cannot read is charged to (default:
    the case's).

    A failing SHOULD check never hides a MUST failure: a first pass raises only the examples
    charged to a MUST requirement (the verdict is that failure, shrunk, with the first SHOULD-only
    failure charged and shown beside it); a second pass from the same seed shrinks a SHOULD-only
    failure when there was no MUST one.  A failing example that passes when Hypothesis sends it again (Flaky)
    is the IUT's failure: it answered one input two ways.

    IUT trouble (a crash, a hang, garbage, a wrong id) that `iut`, the adapter, meets anywhere
    in an example ends the run at once: the verdict is `error`, quoting that example (not
    shrunk) and the trouble, whatever the check made of it (fixtures/stateful.py, IUTFault).

    A pass records what its examples exercised: the union of their judgements' `exercised`
    notes (the requirement of the check that decided each one, judge.py).  An example the IUT
    does not implement is no evidence.  A rejection (`evidence` "rejection") counts only when
    an example of its direction was accepted in the same run (the control rule: an IUT that
    rejects everything exercises nothing), or when the direction is among
    `accepted_directions`, or among those `controls()` returns (it sends the direction
    controls, `direction_controls`, before the examples: IUT trouble on one of them is the
    case's error, as in an example); `control_rejected` says when neither holds."""
    from hypothesis import given, reject, seed
    from hypothesis.errors import Flaky, Unsatisfiable

    from ptlrpc_conformance.fixtures.stateful import (IUTFault, fixed_constants, no_database_key, seed_only_settings,
                                                      trouble_judgement, untimed_shrinking, watch_trouble,
                                                      whole_block_draws)

    not_applicable = []
    mismatches: dict[str, dict] = {}    # errno-agnostic runs: every example rejected with another class
    exercised: list[str] = []           # what the passing examples decided on
    by_rejection: dict[object, list[str]] = {}     # direction -> what rejections decided on
    accepted: set = set(accepted_directions)    # the directions of the examples (or controls) accepted
    recorded = []                       # whether any example said what it exercised
    errno_judged = [True]
    # A failing SHOULD check must not hide a MUST failure (every example fails a wrong checksum,
    # so Hypothesis would stop at the first one and shrink it).  The first pass over the
    # examples raises only failures charged to a MUST requirement and notes the others; only
    # when it found none does a second pass, from the same seed, raise and shrink the first
    # SHOULD failure.  Both passes depend on the seed alone (seed_only_settings).
    search_must = [True]
    should_only: list[judge.Judgement] = []     # the SHOULD-only failures the first pass met

    @seed(conformance_seed)
    @seed_only_settings(max_examples=conformance_examples)
    @given(strategy)
    def run(example):
        met = len(troubles)
        j = None
        try:
            j = check(example)
        except NotApplicable as e:
            # an example the IUT does not implement (a decode in a direction its hello leaves
            # out): not a case of its own, so Hypothesis draws another
            not_applicable.append(str(e))
            reject()
        except judge.UnreadableResult as e:
            # an IUT result the check cannot read (missing member, bad hex) is a failed case,
            # never a broken run; any other exception is the suite's own bug (error (suite))
            j = judge.Judgement(judge.FAIL, f"the IUT's result could not be read ({e}); "
                                            f"example: {str(example)[:300]}").charge(unreadable)
        finally:
            if len(troubles) > met:     # whatever the check made of it, or raised
                raise IUTFault(trouble_judgement(
                    troubles[met:], f"{title}: the IUT failed on an example (seed {conformance_seed}; not shrunk: "
                                    f"the run stopped at its first trouble):", f"example: {str(example)[:300]}",
                    found=j, charge=unreadable))
        if j.status in (judge.FAIL, judge.ERROR):
            if search_must[0] and not _charges_must(j):
                should_only.append(j)       # not raised: the search for a MUST failure goes on
                return
            raise _Counterexample(j)
        for m in j.notes.get("errno_class_mismatches") or ():
            mismatches.setdefault(repr(example), dict(m, case=f"{title}: example {len(mismatches) + 1}"))
        if j.status == judge.PASS and "exercised" in j.notes:
            recorded.append(True)
            if j.notes.get("errno_judged") is False:
                errno_judged[0] = False
            if j.notes.get("evidence") == "rejection":
                by_rejection.setdefault(j.notes.get("direction"), []).extend(j.notes["exercised"])
            else:
                exercised.extend(j.notes["exercised"])
                accepted.add(j.notes.get("direction"))

    no_database_key(run)
    verdict = None
    try:
        # the examples and their shrinking depend on the seed alone, not on what else is loaded or on time
        with watch_trouble(iut) as troubles, fixed_constants(), untimed_shrinking(), whole_block_draws():
            if controls is not None:
                accepted.update(controls())
                if troubles:            # a crash or a hang is no rejection of the control
                    raise IUTFault(trouble_judgement(
                        troubles, f"{title}: the IUT failed on a direction control (a valid vector sent before "
                                  f"the examples):", charge=unreadable))
            run()
            if should_only:             # no MUST failure: the SHOULD failure is the verdict, shrunk
                search_must[0] = False
                run()
                # the second pass met no failure: the IUT answered an input two ways
                verdict = should_only[0]
                verdict.message = (f"{title}: counterexample (seed {conformance_seed}; not shrunk: the IUT passed "
                                   f"it in a second pass over the same examples):\n{verdict.message}")
    except IUTFault as e:
        verdict = e.judgement
    except Unsatisfiable:           # no example applied at all
        verdict = judge.Judgement(judge.NOT_APPLICABLE, not_applicable[-1] if not_applicable else
                                  f"{title}: no example applies to the IUT")
    except (_Counterexample, ExceptionGroup) as e:
        found = _counterexamples(e)
        if not found:
            raise
        # the verdict is the MUST failure; a SHOULD failure found apart from it is charged and shown too
        verdict = found[0]
        how = ("the IUT passed it when it was sent again" if isinstance(e, Flaky)     # one input answered two ways
               else "shrunk")
        verdict.message = f"{title}: counterexample (seed {conformance_seed}, {how}):\n{verdict.message}"
        for other in found[1:]:
            verdict.charge(other.failed_requirements)
            verdict.message += f"\n\nanother counterexample (seed {conformance_seed}, shrunk):\n{other.message}"
        if search_must[0] and should_only:      # a MUST failure found: the SHOULD one is charged and shown too
            verdict.charge(should_only[0].failed_requirements)
            verdict.message += (f"\n\na SHOULD check also failed (seed {conformance_seed}, the first such example, "
                                f"not shrunk):\n{should_only[0].message}")
    if mismatches:
        verdict = verdict or judge.Judgement(judge.PASS)
        verdict.notes["errno_class_mismatches"] = list(mismatches.values())
    if recorded and (verdict is None or verdict.status == judge.PASS):
        verdict = verdict or judge.Judgement(judge.PASS)
        unproven = sorted(str(d) for d in by_rejection if d not in accepted)
        verdict.notes["exercised"] = sorted(set(exercised).union(
            *(reqs for d, reqs in by_rejection.items() if d in accepted)))
        if unproven:
            verdict.notes["control_rejected"] = (f"no {' or '.join(unproven)} example was accepted: the rejections "
                                                 f"of that direction are no evidence")
        if not errno_judged[0]:
            verdict.notes["errno_judged"] = False
    if verdict is not None:         # outside the handler: the failure is printed once, with no exception chain
        conclude(verdict)


def direction_controls(iut, config) -> set[str]:
    """The directions whose control the IUT accepts: for each direction it decodes, the
    lowest-id canonical valid vector of that direction, sent in one batch before a decode
    property's examples (docs/vectors.md).  A rejection among the examples is evidence only
    for a direction whose control (or an example of it) was accepted."""
    from ptlrpc_conformance.fixtures.core import session_vectors
    controls = {}
    for v in sorted(session_vectors(config), key=lambda v: v.id):
        if v.op == "decode" and v.verdict == "valid" and v.canonical and iut.hello.decodes(v.direction):
            controls.setdefault(v.direction, v)
    outcomes = iut.call_many([v.decode_request() for v in controls.values()]) if controls else []
    return {d for d, o in zip(controls, outcomes) if o.ok}


def _model_vector(data: bytes, direction: str, how: str, tolerate_wrap: bool) -> Vector:
    """An example judged by the rule model alone: a failure is charged to the requirement of the
    rule that decides it (judge.MODEL, verdicts/charges.py)."""
    p = predict(data, direction, tolerate_wrap)
    return Vector(id="framing.property.example", title=f"{how} (rule model: {p.rule or 'valid'})",
                  requirements=model_example_requirement(data, direction, tolerate_wrap),
                  cite=("harness/verdicts/model.py",), verdict=p.verdict,
                  direction=direction, data=data, expect=p.expect if p.verdict == "valid" else None, errno=p.errno)


# what the decode of a message the suite encoded can be charged to: each compared field's
# requirement (either byte order), a wrongful rejection's (_rejection_owed), a wrong verdict on
# a pb_version lookalike, a malformed result
SUITE_ENCODED = ["BODY-FIELDS-1", "BODY-STATUS-1", "BODY-VERSION-1", "BODY-JOBID-1", "CKSUM-1", "BODY-SIZE-1",
                 "HDR-FIELDS-1", "HDR-BUFCOUNT-1", "PAD-BUFFER-1", "HDR-MAGIC-1", "HDR-MAGIC-2", "HDR-SWAB-1",
                 "BODY-SWAB-1", "HDR-ORDER-1", "DEC-ROBUST-1"]


def _rejection_owed(message: dict, data: bytes, direction: str) -> tuple[str, ...]:
    """What a rejection of a valid message the suite encoded is charged to: the requirement
    that says each unusual value in it is no reason to reject (service bits in pb_version
    BODY-VERSION-1, a pb_status BODY-STATUS-1, a jobid BODY-JOBID-1, a buffer 0 other than 184
    bytes BODY-SIZE-1, a buffer length not a multiple of 8 PAD-BUFFER-1) and, from a
    big-endian sender, the byte-order ones; else the rule model's (a check out of order).
    Hypothesis shrinks a failing example towards the one value that matters."""
    body = message["body"]
    owed = [r for r, unusual in (("BODY-VERSION-1", body["pb_version"] >> 16),
                                 ("BODY-STATUS-1", body.get("pb_status")),
                                 ("BODY-JOBID-1", body.get("pb_jobid") and message["buflens"][0] >= 184),
                                 ("BODY-SIZE-1", message["buflens"][0] != 184),
                                 ("PAD-BUFFER-1", any(n % 8 for n in message["buflens"]))) if unusual]
    if foreign(data):
        owed += FOREIGN_ORDER[:2]
    return tuple(owed) or model_example_requirement(data, direction, False)


def _decode_suite_encoding(iut, direction: str, order: str, message: dict, errno_agnostic: bool,
                           how: str, settings) -> judge.Judgement:
    """The IUT's decode of `message` as the suite encodes it (harness/verdicts/pack.py), sent by
    a peer of byte order `order`, judged field by field: a field that differs is charged to
    its own requirement, a verdict other than the rule model's to the requirement of the rule
    (a pb_version lookalike accepted: BODY-VERSION-1), a rejection to _rejection_owed."""
    data = pack.pack(message, order)
    out = iut.call({"op": "decode", "data": data.hex(), "direction": direction})
    p = predict(data, direction)
    valid = p.verdict == "valid"
    v = Vector(id="framing.full-width.example", title=f"{how} ({order}-endian; rule model: {p.rule or 'valid'})",
               requirements=_rejection_owed(message, data, direction) if valid else (p.requirement,),
               cite=("harness/verdicts/pack.py", "harness/verdicts/model.py"), verdict=p.verdict,
               direction=direction, data=data, expect=pack.expectation(message, order) if valid else None,
               errno=p.errno)
    return judge.judge_decode(v, out, errno_agnostic, role=judge.MODEL, listed=SUITE_ENCODED, settings=settings)


def _check_suite_encoded(strategy, check, judged: list, conformance_seed, conformance_examples, conclude, title,
                         unreadable, iut) -> None:
    """check_property over examples the suite encodes itself; `judged` collects the judgements
    of their decodes.  When the IUT reported the checksum of no valid example, a pass notes
    CKSUM-1 as not exercised (the IUT leaves computed_cksum out), never as passed."""
    def unexercised() -> bool:
        valid = [j for j in judged if j.status == judge.PASS and "errno" not in j.notes]
        return bool(valid) and all("CKSUM-1" in (j.notes.get("not_exercised") or ()) for j in valid)
    concluded = []

    def finish(j: judge.Judgement) -> None:
        if j.status == judge.PASS and unexercised():
            j.notes["not_exercised"] = ["CKSUM-1"]
        concluded.append(j)
        conclude(j)

    check_property(strategy, check, conformance_seed, conformance_examples, finish, title, unreadable, iut=iut)
    if not concluded and unexercised():
        conclude(judge.Judgement(judge.PASS, notes={"not_exercised": ["CKSUM-1"]}))


@case(case="framing.full-width.decode", requirements=SUITE_ENCODED)
def test_decoder_on_full_width_messages(iut, need, conclude, errno_agnostic, conformance_seed, conformance_examples,
                                        run_settings):
    """Messages the suite encodes itself, every field drawn over its full range (edges often),
    in either byte order: decoded field by field to what was encoded, pb_version lookalikes
    refused."""
    from ptlrpc_conformance.fixtures.strategies import full_width_messages
    need(iut, "decode")
    judged: list = []

    def check(example):
        direction, order, message = example
        judged.append(_decode_suite_encoding(iut, direction, order, message, errno_agnostic, "a full-width message",
                                              run_settings))
        return judged[-1]

    _check_suite_encoded(full_width_messages(), check, judged, conformance_seed, conformance_examples, conclude,
                         "full-width messages", unreadable=["DEC-ROBUST-1"], iut=iut)


LITTLE_ENDIAN_ONLY = ("HDR-MAGIC-2", "HDR-SWAB-1", "BODY-SWAB-1")


@case(case="framing.roundtrip.encode-decode", requirements=["ENC-LENGTH-1", "ENC-CANON-1"]
      + [r for r in SUITE_ENCODED if r not in LITTLE_ENDIAN_ONLY])
def test_decode_of_encode_is_identity(iut, need, conclude, errno_agnostic, conformance_seed, conformance_examples,
                                      run_settings):
    """decode(encode(m)) gives back every field of m.  The suite's own encoding of m is decoded
    first: a decoder that gets it wrong is charged to the field's requirement, never to the
    encoder's."""
    from ptlrpc_conformance.fixtures.strategies import canonical_messages
    need(iut, "encode")
    need(iut, "decode")
    judged: list = []

    def check(example):
        direction, message = example
        judged.append(_decode_suite_encoding(iut, direction, "little", message, errno_agnostic,
                                             "the suite's encoding of m", run_settings))
        if judged[-1].status != judge.PASS:
            return judged[-1]
        enc = iut.call({"op": "encode", "message": message})
        if not enc.ok:
            return judge.Judgement.unexpected(enc, f"encode of a representable message {message}").charge(
                ["ENC-CANON-1"])
        data = judge.result_hex(enc, "encode")
        dec = iut.call({"op": "decode", "data": data.hex(), "direction": direction})
        expect = {"byte_order": "little",
                  "header": dict(message["header"], lm_bufcount=len(message["buflens"]), lm_magic=0x0BD00BD3),
                  "buflens": message["buflens"],
                  "body": {k: v for k, v in message["body"].items()
                           if k != "pb_jobid" or message["buflens"][0] >= 184},
                  "buffers": message["buffers"]}
        if message["buflens"][0] < 184:
            expect["body"]["pb_jobid"] = None
        v = Vector(id="framing.roundtrip.example", title="decode(encode(m))", requirements=("ENC-LENGTH-1",),
                   cite=("RULES PAD-2",), verdict="valid", direction=direction, data=data, expect=expect)
        j = judge.judge_decode(v, dec, role=judge.FIXED, settings=run_settings)    # whatever differs: it does not decode back
        if j.status == judge.PASS:
            # judged: the encode's acceptance of a representable message, the fields it decodes
            # back to, and a clean decode
            j.notes["exercised"] = ["ENC-CANON-1", "ENC-LENGTH-1", "DEC-ROBUST-1"]
        return j

    _check_suite_encoded(canonical_messages(), check, judged, conformance_seed, conformance_examples, conclude,
                         "decode(encode(m)) == m", unreadable=["ENC-CANON-1"], iut=iut)


@case(case="framing.encoded-length.encode", requirements=["ENC-LENGTH-1", "PAD-HEADER-1", "PAD-BUFFER-1"])
def test_encoded_length(iut, need, conclude, conformance_seed, conformance_examples):
    """len(encode(m)) = round_up(32 + 4 * bufcount, 8) + sum of round_up(buflen, 8)."""
    from ptlrpc_conformance.fixtures.strategies import canonical_messages
    need(iut, "encode")

    def check(example):
        _, message = example
        enc = iut.call({"op": "encode", "message": message})
        if not enc.ok:
            return judge.Judgement.unexpected(enc, "encode of a representable message").charge(["ENC-LENGTH-1"])
        encoded = judge.result_hex(enc, "encode")
        got = len(encoded)
        lens = message["buflens"]
        want = -(-(32 + 4 * len(lens)) // 8) * 8 + sum(-(-n // 8) * 8 for n in lens)
        if got != want:
            # the header pad is 4 bytes of an odd lm_bufcount; the rest of a difference is buffer pads
            layout = "PAD-HEADER-1" if len(lens) % 2 and want - got == 4 else "PAD-BUFFER-1"
            return judge.Judgement(judge.FAIL, f"buflens {lens}: expected {want} bytes, got {got}\n"
                                               + judge._dump("actual", encoded)
                                   ).charge(["ENC-LENGTH-1", layout])
        # the header is padded only after an odd lm_bufcount, a buffer only when not a multiple of 8
        return judge.Judgement(judge.PASS, notes={"exercised": ["ENC-LENGTH-1"] + (
            ["PAD-HEADER-1"] if len(lens) % 2 else []) + (["PAD-BUFFER-1"] if any(n % 8 for n in lens) else [])})

    check_property(canonical_messages(), check, conformance_seed, conformance_examples, conclude,
                   "encoded length", unreadable=["ENC-LENGTH-1"], iut=iut)


@case(case="framing.arbitrary-bytes.decode", requirements=list(MODEL_CHARGEABLE))
def test_decoder_on_arbitrary_bytes(iut, need, conclude, errno_agnostic, run_settings, request,
                                    conformance_seed, conformance_examples):
    """Random bytes and random headers: accepted or rejected exactly as the rule model says,
    never a crash, a hang or a malformed result."""
    from ptlrpc_conformance.fixtures.strategies import arbitrary_messages
    need(iut, "decode")
    tolerate = run_settings.literal

    def check(example):
        data, direction = example
        out = iut.call({"op": "decode", "data": data.hex(), "direction": direction})
        return judge.judge_decode(_model_vector(data, direction, "arbitrary bytes", tolerate), out, errno_agnostic,
                                  role=judge.MODEL, settings=run_settings)

    check_property(arbitrary_messages(), check, conformance_seed, conformance_examples, conclude,
                   "arbitrary bytes", unreadable=["DEC-ROBUST-1"],
                   controls=lambda: direction_controls(iut, request.config), iut=iut)


@case(case="framing.mutations.decode", requirements=list(MODEL_CHARGEABLE))
def test_decoder_on_mutated_vectors(iut, need, conclude, errno_agnostic, run_settings, request,
                                    conformance_seed, conformance_examples):
    """Bit flips and truncations of the valid vectors: verdict and errno class as the rule
    model says."""
    need(iut, "decode")
    from ptlrpc_conformance.fixtures.core import session_vectors
    from ptlrpc_conformance.fixtures.strategies import mutated
    vectors = [v for v in session_vectors(request.config)
               if v.op == "decode" and v.verdict == "valid" and len(v.data) <= MAX_DERIVE_SIZE]
    tolerate = run_settings.literal

    def check(example):
        data, direction, how = example
        out = iut.call({"op": "decode", "data": data.hex(), "direction": direction})
        return judge.judge_decode(_model_vector(data, direction, how, tolerate), out, errno_agnostic,
                                  role=judge.MODEL, settings=run_settings)

    check_property(mutated(vectors), check, conformance_seed, conformance_examples, conclude, "mutated vectors",
                   unreadable=["DEC-ROBUST-1"], controls=lambda: direction_controls(iut, request.config), iut=iut)
