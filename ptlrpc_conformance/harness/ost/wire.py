"""The suite's own request builder and reply reader for the target suites.

Independent of the implementations under test (the bundled reference included): it packs
requests little-endian from the layouts of spec/layouts.json and reads replies in either byte
order.  A reply that the suite's rule model (harness/verdicts/model.py) would not accept as a reply
is reported as unreadable, with the rule that refused it.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.verdicts.model import BODY, HDR, predict
from ptlrpc_conformance.spec import structs as S

C = spec.constant
BODY_SIZE = spec.layout("ptlrpc_body_v3").size
REQUEST, REPLY, ERR = C("PTL_RPC_MSG_REQUEST"), C("PTL_RPC_MSG_REPLY"), C("PTL_RPC_MSG_ERR")
TYPE_NAME = {REQUEST: "REQUEST", REPLY: "REPLY", ERR: "ERR"}
MAGIC = C("LUSTRE_MSG_MAGIC_V2")
AT_SUPPORT = C("MSGHDR_AT_SUPPORT")
U64 = (1 << 64) - 1


class WireError(ValueError):
    """Bytes the suite cannot read as a message."""


def _round8(n: int) -> int:
    return -(-n // 8) * 8


def pack_body(fields: dict) -> bytes:
    """A little-endian ptlrpc_body_v3 from field values (missing fields are 0)."""
    out = bytearray(BODY_SIZE)
    for name, value in fields.items():
        f = BODY[name]
        if name == "pb_pre_versions":
            for i, v in enumerate(value):
                out[f.offset + 8 * i:f.offset + 8 * i + 8] = (v & U64).to_bytes(8, "little")
        elif name == "pb_jobid":
            raw = value.encode("latin-1") if isinstance(value, str) else bytes(value)
            out[f.offset:f.offset + len(raw)] = raw[:f.size]
        else:
            out[f.offset:f.offset + f.size] = (value & ((1 << (8 * f.size)) - 1)).to_bytes(f.size, "little")
    return bytes(out)


def pack_message(buffers: list[bytes], lm_flags: int = AT_SUPPORT, lm_opc: int = 0) -> bytes:
    """lustre_msg_v2 around `buffers` (buffer 0 is the body), little-endian, zero pads."""
    count = len(buffers)
    header = bytearray(_round8(HDR["lm_buflens"].offset + 4 * count))
    def put(name, value):
        f = HDR[name]
        header[f.offset:f.offset + 4] = value.to_bytes(4, "little")
    put("lm_bufcount", count)
    put("lm_magic", MAGIC)
    put("lm_flags", lm_flags)
    put("lm_opc", lm_opc)
    base = HDR["lm_buflens"].offset
    for i, b in enumerate(buffers):
        header[base + 4 * i:base + 4 * i + 4] = len(b).to_bytes(4, "little")
    out = bytearray(header)
    for b in buffers:
        out += b + bytes(_round8(len(b)) - len(b))
    return bytes(out)


def pack_struct(name: str, values: dict[str, int | str] | None = None) -> bytes:
    """A little-endian structure; `values` maps dotted leaf names ("oa.o_oi.oi.oi_id") to
    integers or strings (char arrays).  Unnamed leaves are zero."""
    out = bytearray(S.size(name))
    by_name = {leaf.name: leaf for leaf in S.leaves(name)}
    for key, value in (values or {}).items():
        leaf = by_name.get(key)
        if leaf is None:
            raise KeyError(f"{name} has no field {key!r}")
        if leaf.kind == "char":
            raw = value.encode("latin-1")[:leaf.count]
            out[leaf.offset:leaf.offset + leaf.count] = raw + bytes(leaf.count - len(raw))
        else:
            out[leaf.offset:leaf.offset + leaf.size] = (value & ((1 << (8 * leaf.size)) - 1)).to_bytes(leaf.size, "little")
    return bytes(out)


def read_struct(name: str, data: bytes, order: str = "little") -> dict[str, int | str]:
    """Leaf values by dotted name, first union view only, from a structure in `order`.

    A big-endian structure is read by swapping each leaf at its own size; that is Lustre's
    swab for every structure the target suites read (ost_body with an `oi`-form ost_id,
    obd_connect_data, obd_statfs), not a general one."""
    if len(data) < S.size(name):
        raise WireError(f"{name} needs {S.size(name)} bytes, the buffer has {len(data)}")
    out = {}
    for leaf in S.leaves(name):
        if not leaf.first_view:
            continue
        if leaf.kind == "char":
            out[leaf.name] = data[leaf.offset:leaf.offset + leaf.count].split(b"\0", 1)[0].decode("latin-1")
        elif leaf.count is None:
            out[leaf.name] = int.from_bytes(data[leaf.offset:leaf.offset + leaf.size], order,
                                            signed=leaf.kind.startswith("s"))
    return out


@dataclass
class Message:
    """A message as the suite reads it."""
    raw: bytes
    byte_order: str
    header: dict[str, int]
    body: dict[str, int]
    buffers: list[bytes]
    pre_versions: tuple[int, ...] = field(default=(0, 0, 0, 0))

    @property
    def type_name(self) -> str:
        return TYPE_NAME.get(self.body["pb_type"], str(self.body["pb_type"]))

    @property
    def status(self) -> int:
        """pb_status as the signed value a receiver sees."""
        s = self.body["pb_status"]
        return s - (1 << 32) if s >= 1 << 31 else s

    def struct(self, index: int, name: str) -> dict | None:
        if index >= len(self.buffers) or len(self.buffers[index]) < S.size(name):
            return None
        return read_struct(name, self.buffers[index], self.byte_order)

    def describe(self) -> str:
        b = self.body
        return (f"{self.type_name} opc={b['pb_opc']} status={self.status} transno={b['pb_transno']:#x} "
                f"last_committed={b['pb_last_committed']:#x} handle={b['pb_handle']:#x} "
                f"flags={b['pb_flags']:#x} op_flags={b['pb_op_flags']:#x} buffers={len(self.buffers)}")


UNSWABBED = set(spec.facts()["unswabbed"]["ptlrpc_body_v3"])
INT_BODY_FIELDS = [f for f in BODY.values() if f.name not in ("pb_pre_versions", "pb_jobid")
                   and f.offset + f.size <= BODY_SIZE and f.size in (2, 4, 8)]


def parse(data: bytes, direction: str) -> Message:
    """Read a message; WireError (naming the rule) if the suite's rule model would not
    accept it as a `direction` message."""
    m = _parse(bytes(data), direction)
    # a stateful step reads each message several times (the step judge, the invariants, the
    # session): it is parsed once, and every reader gets its own copy
    return Message(m.raw, m.byte_order, dict(m.header), dict(m.body), list(m.buffers), m.pre_versions)


@functools.lru_cache(maxsize=256)
def _parse(data: bytes, direction: str) -> Message:
    p = predict(data, direction)
    if p.verdict != "valid":
        raise WireError(f"not a readable {direction}: {p.rule} ({'/'.join(p.errno) or 'rejected'})")
    order = p.expect["byte_order"]
    lens = p.expect["buflens"]
    count = len(lens)
    at = _round8(HDR["lm_buflens"].offset + 4 * count)
    header = {name: int.from_bytes(data[f.offset:f.offset + 4], order)
              for name, f in HDR.items() if name != "lm_buflens" and f.size == 4}
    buffers = []
    for n in lens:
        buffers.append(bytes(data[at:at + n]))
        at += _round8(n)
    b0 = buffers[0]
    body = {}
    for f in INT_BODY_FIELDS:
        # fields Lustre never swabs (pb_handle, an opaque cookie) are read as they lie
        o = "little" if f.name in UNSWABBED else order
        body[f.name] = int.from_bytes(b0[f.offset:f.offset + f.size], o) if f.offset + f.size <= len(b0) else 0
    pv = BODY["pb_pre_versions"]
    pre = tuple(int.from_bytes(b0[pv.offset + 8 * i:pv.offset + 8 * i + 8], order) for i in range(4)) \
        if pv.offset + pv.size <= len(b0) else (0, 0, 0, 0)
    return Message(bytes(data), order, header, body, buffers, pre)


def try_parse(data: bytes | None, direction: str) -> tuple[Message | None, str | None]:
    if data is None:
        return None, None
    try:
        return parse(data, direction), None
    except WireError as e:
        return None, str(e)
