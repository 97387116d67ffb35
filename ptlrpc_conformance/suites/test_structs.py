"""Wire structures (capability `structs`): layouts, byte swapping, unions, truncation,
and the valid-bit semantics of obdo (o_valid) and mdt_body (mbo_valid).

Vector cases come from vectors/structs*.yaml (`op: decode_struct`); truncations are
derived by the suite; the valid-bit rules are Hypothesis properties whose inputs are built
by the suite's own structure walker (spec/structs.py) from spec/layouts.json and whose
expectations come from the valid-bit table in spec/facts.json, as the session's release has it
(a field governed only by bits the release does not define is never valid: release.valid_bits).
Hypothesis and the strategies are imported by the valid-bit cases, not at collection.
"""

import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.verdicts import judge, release
from ptlrpc_conformance.harness.data.vectors import Vector
from ptlrpc_conformance.spec import layouts, release_differences as differences, structs as S
from ptlrpc_conformance.suites.test_properties import check_property

REQUIRED = {layouts.canonical(n) for n in spec.facts()["structs_required"]}


def _valid(rel: str, name: str) -> dict:
    """The fields of structure `name` the valid-bit table of release `rel` governs, with their bits."""
    return release.valid_bits(rel)[name]["fields"]


def _known_bits(rel: str, name: str) -> int:
    """Every bit the valid-bit table of release `rel` names for structure `name`."""
    return sum({b for bits in _valid(rel, name).values() for _, b in bits})


def _undefined(rel: str, mask: int) -> int:
    """The bits of `mask` no OBD_MD_* flag of release `rel` defines: what VALID-UNKNOWN-1 is
    about.  A bit Lustre defines that the table ties to no field of the structure (OBD_MD_FLRDEV
    and DOM_SIZE in an obdo, ...) is not unknown: a decoder that loses it breaks the
    structure's own valid-bit rule."""
    return mask & ~layouts.defined_valid_bits(rel)


MASK_FIELD = {"obdo": "o_valid", "mdt_body": "mbo_valid"}
case = pytest.mark.conformance


def _same_layout(conclude, name: str, rel: str) -> None:
    """End the case as not applicable when the profile's release has no structure `name`
    (verdicts/release.py struct_differs)."""
    why = release.struct_differs(name, rel)
    if why:
        conclude(judge.Judgement(judge.NOT_APPLICABLE, why))


def _applies(conclude, vector, rel: str) -> None:
    """End a vector's case as not applicable when the profile's release lacks its structure,
    or reads it otherwise and the vector has no bytes for that release (verdicts/release.py
    struct_not_applicable)."""
    why = release.struct_not_applicable(vector, rel)
    if why:
        conclude(judge.Judgement(judge.NOT_APPLICABLE, why))


def test_struct_decode(struct_vector, iut, need, conclude, request, run_settings):
    """An invalid structure is sent with its valid neighbour (fixtures/core.py control_vector):
    its rejection is evidence only when the neighbour is accepted."""
    need(iut, "decode_struct")
    _applies(conclude, struct_vector, run_settings.release)
    from ptlrpc_conformance.fixtures.core import control_vector
    neighbour = control_vector(request.config, struct_vector)
    if neighbour is None:
        outcome, control = iut.call(struct_vector.decode_request()), None
    else:
        outcome, control = iut.call_many([struct_vector.decode_request(), neighbour.decode_request()])
    conclude(judge.judge_struct(struct_vector, outcome, layouts.canonical(struct_vector.struct) in REQUIRED,
                                control))


def test_struct_encode(encode_struct_vector, iut, need, conclude, run_settings):
    need(iut, "encode_struct")
    _applies(conclude, encode_struct_vector, run_settings.release)
    outcome = iut.call(encode_struct_vector.encode_request())
    if outcome.rejected and outcome.error == "EOPNOTSUPP" and layouts.canonical(encode_struct_vector.struct) not in REQUIRED:
        conclude(judge.Judgement(judge.NOT_APPLICABLE, f"the IUT does not support {encode_struct_vector.struct}"))
    conclude(judge.judge_encode(encode_struct_vector, outcome))


def _minimum(struct: str, rel: str | None) -> int | None:
    """The fewest bytes of `struct` the release's receiver takes, where fewer than its size."""
    try:
        name = layouts.canonical(struct)
    except KeyError:                    # a name of an older release only: no minimum is recorded
        return None
    return differences.minimum_size(name, rel or release.default())


def _cut_cases(config):
    from ptlrpc_conformance.fixtures.core import run_settings_of, session_vectors
    rel = run_settings_of(config).release
    out = []
    for v in session_vectors(config):
        if v.op != "decode_struct" or v.verdict != "valid":
            continue
        size = S.size(v.struct, None if release.struct_differs(v.struct, rel) else rel)
        # a release whose receiver takes the structure from fewer bytes (release_differences.yaml
        # taken_short and minimum_sizes): a cut at or above that minimum may be accepted or
        # refused, and the cuts on either side of it are sent too
        taken = _minimum(v.struct, rel)
        minimum = size if taken is None else taken
        edge = {minimum - 1, minimum} if minimum < size else set()
        cuts = sorted(k for k in {0, size // 2, size - 1} | edge if 0 <= k < size)
        variants = tuple(Vector(id=f"{v.id}.cut-{k}", title=f"the first {k} of {size} bytes of {v.struct}",
                                requirements=("STRUCT-TRUNC-1",), cite=("RULES PAD-3",),
                                verdict="invalid" if k < minimum else "acceptable",
                                direction="request", data=v.data[:k], errno=("any",), op="decode_struct",
                                struct=v.struct, byte_order=v.byte_order) for k in cuts)
        out.append(pytest.param((v, variants), id=f"{v.id}.cut.decode",
                                marks=case(case=f"{v.id}.cut.decode", requirements=["STRUCT-TRUNC-1"])))
    return out


def pytest_generate_tests(metafunc):
    if "struct_cut_variants" in metafunc.fixturenames:
        metafunc.parametrize("struct_cut_variants", _cut_cases(metafunc.config))


def test_struct_truncated(struct_cut_variants, iut, need, conclude, run_settings):
    """The cuts of a valid structure, sent in one batch with the whole structure as their
    control: a rejected cut is evidence only when the whole one is accepted."""
    need(iut, "decode_struct")
    origin, struct_cut_variants = struct_cut_variants
    _applies(conclude, origin, run_settings.release)
    *outcomes, control = iut.call_many([v.decode_request() for v in (*struct_cut_variants, origin)])
    required = layouts.canonical(struct_cut_variants[0].struct) in REQUIRED
    judgements = [judge.judge_struct(v, o, required, control) for v, o in zip(struct_cut_variants, outcomes)]
    conclude(judge.combine(struct_cut_variants[0].id.rsplit(".", 1)[0] + ".decode", struct_cut_variants, judgements))


# ---- valid bits -----------------------------------------------------------------------------------

def _expected_view(rel: str, name: str, mask: int) -> set[str]:
    return {f for f, bits in _valid(rel, name).items() if any(mask & b for _, b in bits)}


def _mask_block(rel: str, name: str):
    """A valid mask: some of the bits the valid-bit table defines, sparse to full, and up to
    three bits it does not define.  The bits of the default release's table are drawn alike:
    under a release that lacks one (OBD_MD_FLBTIME before 2.14) it is a bit that governs nothing."""
    from ptlrpc_conformance.fixtures.strategies import a_few_block, joined, subsets_block
    default = layouts.valid_bits()[name]["fields"]
    bits = sorted({b for table in (_valid(rel, name), default) for bs in table.values() for _, b in bs})
    unknown = [1 << i for i in range(64) if not (_known_bits(rel, name) >> i) & 1]
    return joined(subsets_block(bits), a_few_block(unknown, 3)).map(lambda t: sum(t[0]) | sum(t[1]))


def _set_field(name: str, data: bytearray, field: str, value: int) -> None:
    f = S.top_field(name, field)
    data[f["offset"]:f["offset"] + f["size"]] = value.to_bytes(f["size"], "little")


def _garbage_clear_fields(rel: str, name: str, data: bytes, mask: int, noise: bytes) -> bytes:
    """Overwrite every field whose bits are all clear with noise."""
    out = bytearray(data)
    meaningful = _expected_view(rel, name, mask)
    for f in _valid(rel, name):
        if f not in meaningful:
            g = S.top_field(name, f)
            out[g["offset"]:g["offset"] + g["size"]] = noise[g["offset"]:g["offset"] + g["size"]]
    return bytes(out)


def _valid_decode_case(name: str):
    size = S.size(name)

    def test(iut, need, conclude, conformance_seed, conformance_examples, run_settings):
        from ptlrpc_conformance.fixtures.strategies import drawn_as_one, raw_bytes

        need(iut, "decode_struct")
        rel = run_settings.release
        _same_layout(conclude, name, rel)
        strategy = drawn_as_one(_mask_block(rel, name), raw_bytes(size), raw_bytes(size))

        def check(example):
            mask, data, noise = example
            data = bytearray(data)
            _set_field(name, data, MASK_FIELD[name], mask)
            first = bytes(data)
            second = _garbage_clear_fields(rel, name, first, mask, noise)
            a = iut.call({"op": "decode_struct", "type": name, "data": first.hex(), "byte_order": "little"})
            b = iut.call({"op": "decode_struct", "type": name, "data": second.hex(), "byte_order": "little"})
            for o in (a, b):
                if not o.ok:
                    return judge.Judgement.unexpected(o, f"decode_struct {name}")
            for o in (a, b):
                if not isinstance(o.result, dict) or not isinstance(o.result.get("fields"), dict):
                    return judge.Judgement(judge.FAIL, f"decode_struct {name}: the result is not "
                                                       f"{{type, fields}}: {str(o.result)[:200]}")
            if "valid" not in a.result:
                return judge.Judgement(judge.NOT_APPLICABLE, "the IUT reports no valid view")
            want = _expected_view(rel, name, mask)
            problems = []
            charged = []
            got_mask = a.result["fields"].get(MASK_FIELD[name])
            if got_mask != mask:
                problems.append(f"{MASK_FIELD[name]}: expected {mask:#x} (unknown bits included), "
                                f"got {got_mask!r}")
                charged.append(_mask_requirement(rel, name, mask, got_mask, VALID_OF[name]))
            for label, r in (("first", a.result), ("with garbage in clear-bit fields", b.result)):
                view = r.get("valid", [])
                if not isinstance(view, list) or not all(isinstance(f, str) for f in view):
                    problems.append(f"valid view ({label}): expected a list of field names, got {str(view)[:120]}")
                    continue
                got = set(view)
                if got != want:
                    problems.append(f"valid view ({label}): expected {sorted(want)}, got {sorted(got)}"
                                    + (f"; fields whose bits are clear: {sorted(got - want)}" if got - want else ""))
            for f in want:
                if a.result["fields"].get(f) != b.result["fields"].get(f):
                    problems.append(f"{f} changed when only clear-bit fields changed")
            raw = S.unpack(name, first)
            for f in _valid(rel, name):
                if a.result["fields"].get(f) != raw[f]:
                    problems.append(f"{f}: fields are reported raw: expected {raw[f]!r}, got {a.result['fields'].get(f)!r}")
            if len(problems) > len(charged):       # the view, or fields not reported raw
                charged.append(VALID_OF[name])
            if problems:
                return judge.Judgement(judge.FAIL, f"{MASK_FIELD[name]} = {mask:#x}:\n  " + "\n  ".join(problems[:10])
                                       ).charge(charged)
            return judge.Judgement(judge.PASS, notes={"exercised": [VALID_OF[name]] + (
                ["VALID-UNKNOWN-1"] if _undefined(rel, mask) else [])})     # unknown bits kept, when there were some

        outcome = []
        check_property(strategy, lambda ex: outcome.append(check(ex)) or outcome[-1], conformance_seed,
                       conformance_examples, conclude, f"{name} valid view", iut=iut)
        if outcome and all(j.status == judge.NOT_APPLICABLE for j in outcome):
            conclude(outcome[0])
    return test


def _valid_encode_case(name: str, give_mask: bool):
    size = S.size(name)

    def test(iut, need, conclude, conformance_seed, conformance_examples, run_settings):
        from ptlrpc_conformance.fixtures.strategies import drawn_as_one, raw_bytes, subsets_block

        need(iut, "encode_struct")
        rel = run_settings.release
        _same_layout(conclude, name, rel)
        governed = list(_valid(rel, name))
        strategy = drawn_as_one(subsets_block(governed), _mask_block(rel, name), raw_bytes(size))
        zero = S.unpack(name, bytes(size))          # what a field not given must be encoded as

        def check(example):
            chosen, mask, noise = example
            source = S.unpack(name, noise)
            fields = {f: source[f] for f in chosen}
            if give_mask:
                fields[MASK_FIELD[name]] = mask
            out = iut.call({"op": "encode_struct", "type": name, "fields": fields})
            if not out.ok:
                return judge.Judgement.unexpected(out, f"encode_struct {name}")
            data = judge.result_hex(out, f"encode_struct {name}")
            if len(data) != size:
                return judge.Judgement(judge.FAIL, f"encode_struct {name}: {len(data)} bytes, expected {size}")
            got = S.unpack(name, data)
            want_mask = mask if give_mask else 0
            if not give_mask:
                for f in chosen:
                    want_mask |= _valid(rel, name)[f][0][1]
            problems = []
            charged = []
            if got[MASK_FIELD[name]] != want_mask:
                problems.append(f"{MASK_FIELD[name]}: expected {want_mask:#x}, got {got[MASK_FIELD[name]]:#x}")
                charged.append(_mask_requirement(rel, name, want_mask, got[MASK_FIELD[name]], "VALID-ENC-1")
                               if give_mask else "VALID-ENC-1")
            for f in governed:
                want = source[f] if f in chosen else zero[f]
                if got[f] != want:
                    problems.append(f"{f}: expected {want!r} ({'given' if f in chosen else 'not given: zero'}), got {got[f]!r}")
            if len(problems) > len(charged):
                charged.append("VALID-ENC-1")
            if problems:
                return judge.Judgement(judge.FAIL, f"fields given: {sorted(fields)}:\n  " + "\n  ".join(problems[:10])
                                       ).charge(charged)
            return judge.Judgement(judge.PASS, notes={"exercised": ["VALID-ENC-1"] + (
                ["VALID-UNKNOWN-1"] if give_mask and _undefined(rel, mask) else [])})

        check_property(strategy, check, conformance_seed, conformance_examples, conclude,
                       f"{name} encode with {MASK_FIELD[name]} {'given' if give_mask else 'left out'}", iut=iut)
    return test


VALID_OF = {"obdo": "VALID-OBDO-1", "mdt_body": "VALID-MDT-1"}


def _mask_requirement(rel: str, name: str, want: int, got, otherwise: str) -> str:
    """A valid mask that differs only in bits no flag defines breaks VALID-UNKNOWN-1; any other
    difference, `otherwise`."""
    if isinstance(got, int) and (want ^ got) and _undefined(rel, want ^ got) == want ^ got:
        return "VALID-UNKNOWN-1"
    return otherwise


for _name, _req in VALID_OF.items():
    _slug = _name.replace("_", "-")
    globals()[f"test_valid_view_{_name}"] = case(
        case=f"structs.valid.{_slug}.decode", requirements=[_req, "VALID-UNKNOWN-1"])(_valid_decode_case(_name))
    globals()[f"test_valid_given_{_name}"] = case(
        case=f"structs.valid.{_slug}.encode-given", requirements=["VALID-ENC-1", "VALID-UNKNOWN-1"])(
        _valid_encode_case(_name, True))
    globals()[f"test_valid_omitted_{_name}"] = case(
        case=f"structs.valid.{_slug}.encode-omitted", requirements=["VALID-ENC-1"])(_valid_encode_case(_name, False))
