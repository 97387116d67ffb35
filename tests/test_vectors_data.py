"""The golden vectors are data: they load cleanly, their ids are unique and declared,
every requirement they name exists, and a canonical vector's bytes are exactly what its
listed fields pack to (checked here with a packer written in this test, not with any IUT)."""
import struct

import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness import registry
from ptlrpc_conformance.harness.vectors import load_all, parse_bytes

VECTORS = load_all()
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


def test_every_must_requirement_of_framing_has_a_vector():
    named = {r for v in VECTORS for r in v.requirements}
    missing = [r.id for r in registry.requirements().values() if r.level == "MUST" and r.id not in named]
    assert not missing, f"MUST requirements without a vector: {missing}"


def test_byte_notation():
    assert parse_bytes(["01 02", {"fill": "ab", "count": 3}, [["ff"]]], "t") == bytes.fromhex("0102abababff")
    for bad, text in ((["0"], "odd number"), (["xy"], "not hex"), ({"fill": "00"}, "fill: HEX, count: N"),
                      ({"fill": "00", "count": -1}, "not a whole number"), (3, "expected hex text")):
        with pytest.raises(ValueError, match=text):
            parse_bytes(bad, "t")
