"""Unit tests of the bundled reference codec (the suite judges it through the adapter;
these pin its own behaviour, including the injection seam)."""
import zlib

import pytest

from ptlrpc_conformance.reference import Codec, CodecConfig, CodecError
from ptlrpc_conformance.reference.codec import check_bufcount

codec = Codec()


def ping(**body):
    fields = {"pb_type": 4711, "pb_version": 0x00010003, "pb_opc": 400}
    fields.update(body)
    return {"body": fields}


def test_checksum_worked_examples_from_rules_cksum_2():
    assert codec.checksum(b"123456789") == 0x340BC6D9
    assert codec.checksum(bytes(184)) == 0xAFE3B049
    assert codec.checksum(bytes(184)) == zlib.crc32(bytes(184)) ^ 0xFFFFFFFF


def test_encode_is_canonical_little_endian():
    data = codec.encode(ping(pb_jobid="j1"))
    assert len(data) == 40 + 184
    assert data[:4] == b"\x01\0\0\0" and data[8:12] == bytes.fromhex("d30bd00b")
    assert data[32:36] == (184).to_bytes(4, "little") and data[36:40] == bytes(4)
    assert data[40 + 152:40 + 154] == b"j1" and data[40 + 154:] == bytes(30)


def test_decode_encode_round_trip_and_byte_swapped_twin():
    msg = codec.decode(codec.encode(ping(pb_status=-2, pb_handle=0x0102030405060708)), "request")
    assert msg["body"]["pb_status"] == -2 and msg["byte_order"] == "little"
    data = bytearray(codec.encode(ping(pb_status=-2, pb_handle=0x0102030405060708)))
    for off in list(range(0, 28, 4)) + [32]:          # header words and the one buflen
        data[off:off + 4] = data[off:off + 4][::-1]
    for off, size in ((48, 4), (52, 4), (56, 4), (60, 4)):   # type, version, opc, status
        data[off:off + size] = data[off:off + size][::-1]
    twin = codec.decode(bytes(data), "request")
    assert twin["byte_order"] == "big"
    assert twin["body"]["pb_status"] == -2 and twin["body"]["pb_handle"] == 0x0102030405060708
    assert twin["header"] == msg["header"]


@pytest.mark.parametrize("message, text", [
    ({"header": {"lm_bufcount": 2}}, "lm_bufcount 2 but 1 buffers"),
    ({"buflens": [184, 8]}, "buflens has 2 entries"),
    ({"buffers": ["00"], "buflens": [2]}, "buflens[0] = 2 but buffers[0] has 1 bytes"),
    ({"body": {"pb_nonsense": 1}}, "body has no field 'pb_nonsense'"),
    ({"body": {"pb_opc": -1}}, "pb_opc = -1 does not fit 32 bits"),
    ({"body": {"pb_status": 1 << 32}}, "does not fit 32 bits"),
    ({"body": {"pb_jobid": "x" * 32}}, "at most 31 fit"),
    ({"body": {"pb_opc": None}}, "must be an integer"),
    ({"buffers": ["0g"]}, "not valid hex"),
    ({"buffers": [None, None]}, "only buffer 0 may be packed"),
    ("nope", "message must be an object"),
])
def test_encode_rejects_malformed_input_with_einval(message, text):
    with pytest.raises(CodecError) as e:
        codec.encode(message)
    assert e.value.errno == "EINVAL" and text in e.value.detail


def test_body_is_cut_or_extended_to_buflens0():
    assert len(codec.encode({"buflens": [152], "body": {"pb_type": 4711}})) == 40 + 152
    assert len(codec.encode({"buflens": [200], "body": {"pb_type": 4711}})) == 40 + 200


def test_variants_are_built_by_configuration():
    """The injection seam: limits and checks come from CodecConfig, not from patching."""
    msg = codec.encode(dict(ping(), buffers=[None] + ["00"] * 9))
    assert codec.decode(msg, "request")["header"]["lm_bufcount"] == 10
    eight = Codec(CodecConfig().but(max_bufcount=8))
    with pytest.raises(CodecError, match="outside 1..8"):
        eight.decode(msg, "request")
    without = Codec(CodecConfig().but(decode_checks=tuple(c for c in CodecConfig().decode_checks
                                                           if c is not check_bufcount)))
    assert CodecConfig().decode_checks != without.config.decode_checks
    literal = Codec(CodecConfig().but(reject_wrapped_buflen=False))
    wrapped = bytearray(codec.encode(dict(ping(), buffers=[None, ""])))
    wrapped[36:40] = b"\xff\xff\xff\xff"
    with pytest.raises(CodecError, match="wraps"):
        codec.decode(bytes(wrapped), "request")
    assert literal.decode(bytes(wrapped), "request")["buflens"][1] == 0xFFFFFFFF
