"""The golden vectors are data: they load cleanly, their ids are unique and declared,
every requirement they name exists, and a canonical vector's bytes are exactly what its
listed fields pack to (checked here with a packer written in this test, not with any IUT)."""
import struct

import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.data.vectors import load_all, parse_bytes

ALL_VECTORS = load_all()
VECTORS = [v for v in ALL_VECTORS if v.op == "decode"]        # message vectors
HEADER = ["lm_bufcount", "lm_secflvr", "lm_magic", "lm_repsize", "lm_cksum", "lm_flags", "lm_opc", "lm_padding_3"]


def pack(expect: dict) -> bytes:
    body = bytearray(184)
    for f in spec.layout("ptlrpc_body_v3").fields:
        v = expect.get("body", {}).get(f.name)
        if v is None:
            continue
        if f.name == "pb_jobid":
            body[f.offset:f.offset + len(v)] = v.encode("latin-1")
        elif f.count:
            body[f.offset:f.end] = struct.pack("<4Q", *v)
        else:
            body[f.offset:f.end] = (v % (1 << (8 * f.size))).to_bytes(f.size, "little")
    buflens = expect.get("buflens", [184])
    buffers = [bytes(body[:buflens[0]]) if buflens[0] <= 184 else bytes(body) + bytes(buflens[0] - 184)]
    buffers += [bytes.fromhex(b) for b in expect.get("buffers", [None])[1:]]
    header = dict.fromkeys(HEADER, 0)
    header["lm_magic"] = 0x0BD00BD3
    header.update(expect.get("header", {}))
    header["lm_bufcount"] = len(buffers)
    out = struct.pack("<8I", *(header[k] for k in HEADER)) + struct.pack(f"<{len(buffers)}I", *map(len, buffers))
    out += bytes(-len(out) % 8)
    for b in buffers:
        out += b + bytes(-len(b) % 8)
    return out


def test_there_are_vectors_of_every_verdict():
    verdicts = {v.verdict for v in VECTORS}
    assert verdicts >= {"valid", "invalid"}
    assert len(VECTORS) >= 10
    assert len({v.id for v in VECTORS}) == len(VECTORS)


@pytest.mark.parametrize("vector", [v for v in VECTORS if v.canonical], ids=lambda v: v.id)
def test_canonical_vector_bytes_are_its_fields_packed(vector):
    assert pack(vector.expect) == vector.data


def test_every_must_requirement_is_exercised_by_a_case():
    """Vectors, derived cases and declared cases together exercise every MUST, a client's too
    (the client cases, suites/test_client.py: one per client rule)."""
    from ptlrpc_conformance.cli.data import exercised
    from ptlrpc_conformance.harness.ost.client_judge import RULES
    named = {r for r, cases in exercised().items() if cases}
    missing = [r.id for r in registry.requirements().values() if r.level == "MUST" and r.id not in named]
    assert not missing, f"MUST requirements no case exercises: {missing}"
    cases = exercised()
    assert {r: cases[r] for r in RULES} == {r: {f"client.conduct.{r.lower()[4:]}"} for r in RULES}


def test_byte_notation():
    assert parse_bytes(["01 02", {"fill": "ab", "count": 3}, [["ff"]]], "t") == bytes.fromhex("0102abababff")
    for bad, text in ((["0"], "odd number"), (["xy"], "not hex"), ({"fill": "00"}, "fill: HEX, count: N"),
                      ({"fill": "00", "count": -1}, "not a whole number"), (3, "expected hex text")):
        with pytest.raises(ValueError, match=text):
            parse_bytes(bad, "t")


@pytest.mark.parametrize("profile", ["lustre-2.17.57", "lustre-2.17.57-literal"])
def test_rule_model_agrees_with_every_hand_written_vector(profile):
    """Two independent statements of the rules - the hand-written vectors and the suite's
    rule model - must agree on every verdict and errno class."""
    from ptlrpc_conformance.harness.verdicts.model import predict
    for v in VECTORS:
        v = v.for_profile(profile)
        p = predict(v.data, v.direction, tolerate_wrap=profile.endswith("literal"))
        assert p.verdict == v.verdict, f"{v.id}: vector says {v.verdict}, model says {p.verdict} ({p.rule})"
        if v.verdict == "invalid":
            assert set(p.errno) == set(v.errno), f"{v.id}: vector {v.errno}, model {p.errno} ({p.rule})"


def test_derived_cases_are_deterministic_and_named():
    from ptlrpc_conformance.harness.verdicts.derive import derive
    from ptlrpc_conformance.harness.data.registry import CASE_ID
    first, second = derive(VECTORS), derive(VECTORS)
    assert [c.id for c in first] == [c.id for c in second]
    ids = [c.id for c in first]
    assert len(ids) == len(set(ids)) and all(CASE_ID.match(i) for i in ids)
    variant_ids = [v.id for c in first for v in c.variants]
    assert len(variant_ids) == len(set(variant_ids))
    kinds = {i.rsplit(".", 2)[-2] for i in ids}
    assert {"swabbed", "cut-fixed", "cut-buflens", "cut-buffer0", "cut-trailing", "bufcount-pm1", "buflen-pm1"} <= kinds


def test_swab_twin_swaps_exactly_what_lustre_swabs():
    from ptlrpc_conformance.harness.verdicts.derive import swab
    v = next(v for v in VECTORS if v.id == "framing.magic.v2-swabbed")
    twin = swab(v.data)
    assert swab(twin) == v.data
    changed = {i for i in range(len(twin)) if twin[i] != v.data[i]}
    assert not changed & set(range(28, 32))               # lm_padding_3
    assert not changed & set(range(40, 48))               # pb_handle
    assert not changed & set(range(40 + 34, 40 + 36))     # pb_padding0
    assert not changed & set(range(40 + 128, 40 + 144))   # pb_padding64_0/1
    assert not changed & set(range(40 + 152, 40 + 184))   # pb_jobid
    assert twin[8:12] == bytes.fromhex("d30bd00b")


def test_vector_files_validate_against_the_published_schema():
    import json
    from importlib import resources

    import jsonschema
    import yaml

    from ptlrpc_conformance.harness.data.vectors import bundled_files
    schema = json.loads(resources.files("ptlrpc_conformance.schemas").joinpath("vectors-v1.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    for name, text in bundled_files():
        data = yaml.safe_load(text)
        if str(data.get("format")).startswith("ptlrpc-conformance-scenarios/"):
            continue                  # scenario vectors: their own format (docs/scenarios.md)
        validator.validate(data)
    bad = {"format": "ptlrpc-conformance-vectors/1",
           "vectors": [{"id": "x.y", "title": "t", "requirements": ["HDR-MAGIC-1"], "cite": ["c"],
                        "verdict": "valid", "direction": "request", "bytes": "00"}]}
    assert not validator.is_valid(bad)   # a valid vector without expect
    for body in ({"pb_opc": 1 << 40}, {"pb_nosuch": 1}, {"pb_jobid": "j" * 40}, {"pb_status": 1 << 31}):
        bad["vectors"][0]["expect"] = {"body": body}
        assert not validator.is_valid(bad), body
    bad["vectors"][0]["expect"] = {"body": {"pb_opc": (1 << 32) - 1, "pb_status": -1, "pb_jobid": "j" * 31}}
    assert validator.is_valid(bad)


# ---- the vector schema: generated from the facts, and what the loader checks with ----------

def test_published_vector_schema_is_what_the_facts_give():
    from importlib import resources

    from ptlrpc_conformance.harness.data import vector_schema
    committed = resources.files("ptlrpc_conformance.schemas").joinpath("vectors-v1.json").read_text()
    assert committed == vector_schema.text(), "stale: run python tools/gen_schemas.py"


def test_vector_schema_says_the_facts():
    import re

    from ptlrpc_conformance.harness.data import vector_schema
    from ptlrpc_conformance.spec import layouts
    defs = vector_schema.build()["$defs"]
    header, body = defs["header"]["properties"], defs["body"]["properties"]
    assert list(header) == HEADER and defs["header"]["additionalProperties"] is False
    assert list(body) == spec.layout("ptlrpc_body_v3").names() and defs["body"]["additionalProperties"] is False
    assert header["lm_opc"]["maximum"] == (1 << 32) - 1 and body["pb_opc"]["maximum"] == (1 << 32) - 1
    assert body["pb_handle"]["maximum"] == (1 << 64) - 1 and body["pb_tag"]["maximum"] == (1 << 16) - 1
    assert (body["pb_status"]["minimum"], body["pb_status"]["maximum"]) == (-(1 << 31), (1 << 31) - 1)
    assert body["pb_jobid"]["maxLength"] == spec.constant("LUSTRE_JOBID_SIZE") - 1
    assert body["pb_pre_versions"]["minItems"] == body["pb_pre_versions"]["maxItems"] == 4
    assert set(defs["errno"]["enum"]) == {"EINVAL", "EFAULT", "EPROTO"} <= set(spec.facts()["errnos"])
    assert defs["case_id"]["pattern"] == registry.CASE_ID.pattern
    assert defs["requirement_id"]["pattern"] == registry.REQUIREMENT_ID.pattern
    struct_name = re.compile(defs["struct_name"]["pattern"])
    for name in [*layouts.load()["structs"], *layouts.load()["aliases"], "struct obdo", "union ost_id"]:
        assert struct_name.search(name), name
        layouts.canonical(name)                      # what the schema accepts, the loader resolves
    assert not struct_name.search("obdo2") and not struct_name.search("nosuch")


NOTATIONS = [["01 02", {"fill": "ab", "count": 3}, [["ff"]]], "0 1", "", [], {"fill": "00 ff", "count": 0},
             ["0"], ["xy"], {"fill": "00"}, {"fill": "", "count": 1}, {"fill": "0", "count": 1},
             {"fill": "00", "count": -1}, {"fill": "00", "count": 1.0}, {"fill": "00", "count": 1, "x": 1}, 3, None]


@pytest.mark.parametrize("notation", NOTATIONS, ids=repr)
def test_schema_and_loader_agree_on_the_byte_notation(notation):
    """The loader parses `bytes` itself (precise messages); the published schema says the
    same rule for other tools."""
    from ptlrpc_conformance.harness.data import vector_schema
    schema = vector_schema.build()
    validator = vector_schema.validator_class()(dict(schema["$defs"]["bytes"], **{"$defs": schema["$defs"]}))
    try:
        parse_bytes(notation, "t")
        parsed = True
    except ValueError:
        parsed = False
    assert validator.is_valid(notation) == parsed


def _vector(**fields) -> dict:
    v = {"id": "local.one", "title": "t", "requirements": ["HDR-MAGIC-1"], "cite": ["c"], "verdict": "valid",
         "direction": "request", "bytes": ["00"], "expect": {"byte_order": "little"}}
    v.update(fields)
    return {k: x for k, x in v.items() if x is not None}


def _problems(*vectors) -> list[str]:
    import yaml

    from ptlrpc_conformance.harness.data.vectors import load_file
    problems: list[str] = []
    load_file("mine.yaml", yaml.safe_dump({"format": "ptlrpc-conformance-vectors/1", "vectors": list(vectors)}),
              problems)
    return problems


def test_loader_names_file_vector_and_field_of_each_schema_problem():
    got = _problems(_vector(expect={"header": {"lm_opc": 1.0, "lm_nope": 1},
                                    "body": {"pb_opc": 1 << 40, "pb_nosuch": 1, "pb_jobid": "j" * 40},
                                    "buflens": [1, -1], "nope": 1}),
                    _vector(id="local.two", verdict="invalid", expect=None, errno=["ENOENT"], canonical=True),
                    _vector(id="Not An Id"), 42)
    w = "mine.yaml: vector 0 local.one"
    assert got == [
        f"{w}.expect.nope: not an expect field (known: byte_order, header, buflens, body, buffers, computed_cksum, "
        "structs)",
        f"{w}.expect.body.pb_nosuch: not a ptlrpc_body field",
        f"{w}.expect.body.pb_jobid: '{'j' * 40}' is not a string of at most 31 characters (or null: the field is "
        "absent)",
        f"{w}.expect.body.pb_opc: 1099511627776 is not an unsigned 32-bit integer (or null: the field is absent)",
        f"{w}.expect.buflens[1]: -1 is not an unsigned 32-bit integer",
        f"{w}.expect.header.lm_nope: not a header field (known: {', '.join(HEADER)})",
        f"{w}.expect.header.lm_opc: 1.0 is not an unsigned 32-bit integer",
        "mine.yaml: vector 1 local.two.canonical: only a valid vector can be canonical",
        "mine.yaml: vector 1 local.two.errno: ['ENOENT'] is not a list of decode rejection classes (EINVAL, EFAULT, "
        "EPROTO), or any (structure vectors)",
        "mine.yaml: vector 2.id: 'Not An Id' is not a case id (dotted lower-case segments, e.g. "
        "framing.bufcount.zero; docs/ids.md)",
        "mine.yaml: vector 3: 42 is not a vector (a mapping)",
    ]


@pytest.mark.parametrize("fields, line", [
    ({"expect": None}, "local.one.expect: a valid vector lists the fields it must decode to"),
    ({"errno": ["EINVAL"]}, "local.one.errno: only invalid vectors name errno classes"),
    ({"verdict": "invalid", "expect": None}, "local.one.errno: an invalid vector lists the allowed errno classes"),
    ({"verdict": "invalid", "errno": ["EINVAL"]}, "local.one.expect: an invalid vector decodes to nothing"),
    ({"verdict": "invalid", "errno": "any", "expect": None}, "local.one.errno: 'any' is for structure vectors"),
    ({"direction": None}, "local.one: missing field 'direction'"),
    ({"title": " "}, "local.one.title: ' ' is not text (not blank)"),
    ({"requirements": ["NO-SUCH-1"]}, "local.one.requirements: unknown requirement 'NO-SUCH-1'"),
    ({"profile_overrides": {"nope": {"verdict": "valid"}}}, "local.one.profile_overrides.nope: neither a modifier (literal, reconstruct) nor a profile"),
    ({"profile_overrides": {"lustre-2.17.57": {"errno": ["ENOENT"]}}},
     "local.one.profile_overrides.lustre-2.17.57.errno[0]: 'ENOENT' is not one of EINVAL, EFAULT, EPROTO"),
    ({"bytes": ["00", {"fill": "0", "count": 2}]}, "local.one.bytes[1].fill: '0' is not a hex byte pattern"),
    ({"op": "decode_struct", "direction": None, "struct": "nosuch", "byte_order": "little"},
     "local.one.struct: 'nosuch' is not the current or seed name of a wire structure in spec/layouts.json"),
    ({"op": "decode_struct", "direction": None, "struct": "obdo", "byte_order": "big", "canonical": True,
      "expect": {"fields": {}}}, "local.one.byte_order: a canonical structure vector is little-endian"),
    ({"op": "decode_struct", "direction": None, "struct": "obdo", "byte_order": "little",
      "expect": {"header": {}}}, "local.one.expect.header: not an expect field (known: fields, valid)"),
])
def test_loader_rule_messages(fields, line):
    got = _problems(_vector(**fields))
    assert any(p.startswith(f"mine.yaml: vector 0 {line}") for p in got), got


def test_user_vectors_the_old_loader_accepted_stay_valid():
    assert _problems(
        _vector(errno=[], note=2024, canonical=False, profile_overrides=None),
        _vector(id="local.two", verdict="invalid", expect=None, errno=["EINVAL"]),
        _vector(id="local.three", op="decode_struct", direction=None, struct="struct obdo", byte_order="big",
                expect={"fields": {"o_size": 1}, "valid": ["o_size"]}),
        _vector(id="local.four", op="decode_struct", direction=None, struct="lustre_msg", byte_order="little",
                verdict="invalid", errno="any", expect=None),
        _vector(id="local.five", verdict="acceptable", expect=None, errno=["EINVAL"],
                profile_overrides={"lustre-2.17.57-literal": {"verdict": "invalid"}}),
        _vector(id="local.six", expect={"body": {"pb_jobid": None, "pb_status": -2, "pb_pre_versions": [0, 1, 2, 3]},
                                        "buffers": [None, "00ff"], "structs": {1: {"type": "ost_body"}}})) == []


def test_the_suites_checksum_helper_and_the_vectors_agree():
    from ptlrpc_conformance.harness.verdicts.pack import lustre_cksum
    assert lustre_cksum(bytes(184)) == 0xAFE3B049          # RULES CKSUM-2 worked example
    assert lustre_cksum(b"123456789") == 0x340BC6D9
    with_cksum = [v for v in VECTORS if v.expect and "computed_cksum" in v.expect]
    assert len(with_cksum) >= 2
    for v in with_cksum:
        order = "big" if v.data[8:12] == bytes.fromhex("0bd00bd3") else "little"
        hdr = 32 + 4 * int.from_bytes(v.data[:4], order)
        hdr += -hdr % 8
        n = int.from_bytes(v.data[32:36], order)
        assert lustre_cksum(v.data[hdr:hdr + n]) == v.expect["computed_cksum"], v.id
