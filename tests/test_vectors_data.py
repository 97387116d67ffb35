"""The golden vectors are data: they load cleanly, their ids are unique and declared,
every requirement they name exists, and a canonical vector's bytes are exactly what its
listed fields pack to (checked here with a packer written in this test, not with any IUT)."""
import struct

import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness import registry
from ptlrpc_conformance.harness.vectors import load_all, parse_bytes

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
    """Vectors, derived cases and declared cases together exercise every MUST."""
    from ptlrpc_conformance.cli import exercised
    named = {r for r, cases in exercised().items() if cases}
    missing = [r.id for r in registry.requirements().values() if r.level == "MUST" and r.id not in named]
    assert not missing, f"MUST requirements no case exercises: {missing}"


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
    from ptlrpc_conformance.harness.model import predict
    for v in VECTORS:
        v = v.for_profile(profile)
        p = predict(v.data, v.direction, tolerate_wrap=profile.endswith("literal"))
        assert p.verdict == v.verdict, f"{v.id}: vector says {v.verdict}, model says {p.verdict} ({p.rule})"
        if v.verdict == "invalid":
            assert set(p.errno) == set(v.errno), f"{v.id}: vector {v.errno}, model {p.errno} ({p.rule})"


def test_derived_cases_are_deterministic_and_named():
    from ptlrpc_conformance.harness.derive import derive
    from ptlrpc_conformance.harness.registry import CASE_ID
    first, second = derive(VECTORS), derive(VECTORS)
    assert [c.id for c in first] == [c.id for c in second]
    ids = [c.id for c in first]
    assert len(ids) == len(set(ids)) and all(CASE_ID.match(i) for i in ids)
    variant_ids = [v.id for c in first for v in c.variants]
    assert len(variant_ids) == len(set(variant_ids))
    kinds = {i.rsplit(".", 2)[-2] for i in ids}
    assert {"swabbed", "cut-fixed", "cut-buflens", "cut-buffer0", "cut-trailing", "bufcount-pm1", "buflen-pm1"} <= kinds


def test_swab_twin_swaps_exactly_what_lustre_swabs():
    from ptlrpc_conformance.harness.derive import swab
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

    from ptlrpc_conformance.harness.vectors import bundled_files
    schema = json.loads(resources.files("ptlrpc_conformance.schemas").joinpath("vectors-v1.json").read_text())
    validator = jsonschema.Draft202012Validator(schema)
    validator.check_schema(schema)
    for name, text in bundled_files():
        data = yaml.safe_load(text)
        if data.get("format") == "ptlrpc-conformance-scenarios/1":
            continue                  # scenario vectors: their own format (docs/scenarios.md)
        validator.validate(data)
    bad = {"format": "ptlrpc-conformance-vectors/1",
           "vectors": [{"id": "x.y", "title": "t", "requirements": ["HDR-MAGIC-1"], "cite": ["c"],
                        "verdict": "valid", "direction": "request", "bytes": "00"}]}
    assert not validator.is_valid(bad)   # a valid vector without expect


def test_the_suites_checksum_helper_and_the_vectors_agree():
    from ptlrpc_conformance.harness.cksum import lustre_cksum
    assert lustre_cksum(bytes(184)) == 0xAFE3B049          # RULES CKSUM-2 worked example
    assert lustre_cksum(b"123456789") == 0x340BC6D9
    with_cksum = [v for v in VECTORS if v.expect and "computed_cksum" in v.expect]
    assert len(with_cksum) >= 2
    for v in with_cksum:
        hdr = 32 + 4 * int.from_bytes(v.data[:4], "little")
        hdr += -hdr % 8
        n = int.from_bytes(v.data[32:36], "little")
        assert lustre_cksum(v.data[hdr:hdr + n]) == v.expect["computed_cksum"], v.id
