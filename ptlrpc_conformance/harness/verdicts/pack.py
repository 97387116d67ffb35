"""The suite's own encoder of messages, and what a decoder must report for what it encodes.

A property that judges an IUT's decoder needs bytes the IUT did not make: `pack` writes a
MESSAGE (docs/testee-protocol.md §2.2) as a sender of either byte order would, from the
layouts of spec/layouts.json (spec.layout), never through an implementation under test (the bundled reference
included).  A big-endian sender writes every word in its own order, except the fields Lustre
never swabs (lm_padding_3, pb_handle, pb_padding0, pb_padding64_0/1, pb_jobid: facts.json
`unswabbed`), which are written so that they read back as given, as lustre_swab_ptlrpc_body
leaves them.  `expectation` is the MESSAGE a decoder must give back for those bytes.

The body is packed from its fields at full width: pb_status is the signed 32-bit value,
64-bit fields keep their high words, and pb_jobid may fill all 32 bytes (it then reads as
its first 31 characters, pack_generic.c: lustre_msg_get_jobid).  Pads are zero.
"""
from __future__ import annotations

import zlib

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.verdicts.model import BODY, HDR, LIMITS

UNSWABBED = frozenset(spec.facts()["unswabbed"]["lustre_msg_v2"] + spec.facts()["unswabbed"]["ptlrpc_body_v3"])
SIGNED = frozenset(spec.facts()["signed"]["ptlrpc_body_v3"])
HEADER_WORDS = tuple(name for name, f in HDR.items() if not f.flexible)
JOBID = BODY["pb_jobid"]
JOBID_CHARS = spec.constant("LUSTRE_JOBID_SIZE") - 1


def lustre_cksum(buffer0: bytes) -> int:
    """The checksum a receiver computes over buffer 0 (docs/rules.md, CKSUM-1/2): Lustre's
    lm_cksum is crc32_le seeded with ~0 and not inverted at the end.  zlib's crc32 inverts at
    both ends, so the Lustre value is zlib.crc32(data) ^ 0xFFFFFFFF."""
    return zlib.crc32(buffer0) ^ 0xFFFFFFFF


def _round8(n: int) -> int:
    return -(-n // 8) * 8


def _word(value: int, size: int, order: str) -> bytes:
    return (value & ((1 << (8 * size)) - 1)).to_bytes(size, order)


def pack_body(body: dict, size: int, order: str = "little") -> bytes:
    """Buffer 0 of `size` bytes: the ptlrpc_body fields of `body` (missing ones 0), cut at
    `size` or followed by zeros up to it.  pb_jobid is a string of up to 32 ISO-8859-1
    characters, NUL-filled."""
    full = bytearray(max(size, spec.layout("ptlrpc_body_v3").size))
    for name, value in body.items():
        f = BODY[name]
        o = "little" if name in UNSWABBED else order
        if name == "pb_jobid":
            raw = value.encode("latin-1")[:f.size]
            full[f.offset:f.offset + len(raw)] = raw
        elif f.count:
            for i, v in enumerate(value):
                full[f.offset + i * f.elem_size:f.offset + (i + 1) * f.elem_size] = _word(v, f.elem_size, o)
        else:
            full[f.offset:f.end] = _word(value, f.size, o)
    return bytes(full[:size])


def buffers_of(message: dict, order: str = "little") -> list[bytes]:
    """The buffers of `message`: buffer 0 packed from `body` at `buflens[0]` bytes, the
    others from their hex."""
    lens = message["buflens"]
    return [pack_body(message["body"], lens[0], order)] + [bytes.fromhex(b) for b in message["buffers"][1:]]


def pack(message: dict, order: str = "little") -> bytes:
    """The wire bytes of `message` from a sender of byte order `order`: header words from
    `header` (missing ones 0; lm_magic LUSTRE_MSG_MAGIC_V2, lm_bufcount the number of
    buffers), the buffers, zero pads."""
    buffers = buffers_of(message, order)
    words = dict(message.get("header") or {}, lm_bufcount=len(buffers))
    words.setdefault("lm_magic", LIMITS["magic"])
    out = bytearray()
    for name in HEADER_WORDS:
        out += _word(words.get(name, 0), 4, "little" if name in UNSWABBED else order)
    for b in buffers:
        out += _word(len(b), 4, order)
    out += bytes(_round8(len(out)) - len(out))
    for b in buffers:
        out += b + bytes(_round8(len(b)) - len(b))
    return bytes(out)


def expectation(message: dict, order: str = "little") -> dict:
    """The MESSAGE a decoder must report for `pack(message, order)`: every header word,
    buflens, every body field buffer 0 holds (pb_jobid only with 184 bytes or more, at most
    31 characters, absent otherwise), every buffer's bytes and the checksum of buffer 0."""
    buffers = buffers_of(message, order)
    size = len(buffers[0])
    header = {name: message.get("header", {}).get(name, 0) for name in HEADER_WORDS}
    header.update(lm_bufcount=len(buffers), lm_magic=LIMITS["magic"])
    body = {}
    for name, f in BODY.items():
        if name == "pb_jobid":
            body[name] = message["body"].get(name, "")[:JOBID_CHARS] if size >= LIMITS["v3"] else None
            continue
        value = message["body"].get(name, [0] * f.count if f.count else 0)
        if f.end <= size:
            body[name] = value
    return {"byte_order": order, "header": header, "buflens": [len(b) for b in buffers], "body": body,
            "buffers": [b.hex() for b in buffers], "computed_cksum": lustre_cksum(buffers[0])}
