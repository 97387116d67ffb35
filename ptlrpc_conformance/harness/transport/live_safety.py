"""What a run may send a live OST: the firewall of the lnet-tcp adapter (lnet_tcp.py), and the
few requests the adapter writes itself (the preflight's connect and statfs, the disconnects).

`refusal(data, mode, ...)` reads a request as the target would (lustre_msg_v2 in the byte order
its lm_magic says, ptlrpc_body_v3 in buffer 0) and says why it may not be sent, or None.  The
rules are data: spec/target.yaml `live` (the opcodes of each mode, the message flags, connect
flags, o_flags and object sequences a mode forbids, the largest request), with their
citations; this module only applies them.  Whatever the cases ask, a refused request is never
written to the socket: its case is not applicable.
"""
from __future__ import annotations

from dataclasses import dataclass

from ptlrpc_conformance import spec
from ptlrpc_conformance.spec import structs as S

C = spec.constant
LIVE = spec.target()["live"]
MODES = tuple(LIVE["modes"])                     # readonly, destructive
_HDR, _BODY = spec.layout("lustre_msg_v2"), spec.layout("ptlrpc_body_v3")
MSG_MAGIC = C("LUSTRE_MSG_MAGIC_V2")
AT_SUPPORT = C("MSGHDR_AT_SUPPORT")
UUID_SIZE = S.size("obd_uuid")
CONNECT_BUFFERS = {"target": 1, "client": 2, "ocd": 4}   # OST_CONNECT's buffers (layout RQF_OST_CONNECT)


def _opcode(name: str) -> int:
    return spec.target()["unknown_opcode"] if name == "unknown_opcode" else C(name)


def opcode_name(opc: int | None) -> str:
    if opc is None:
        return "no opcode"
    try:
        return next(n for n in list(spec.target()["opcodes"]) + list(spec.target()["unmodelled_opcodes"])
                    if C(n) == opc)
    except (StopIteration, KeyError):
        return "opcode 9999 (unknown)" if opc == spec.target()["unknown_opcode"] else f"opcode {opc}"


def request_portal(opc: int | None) -> int:
    """The portal Lustre's client sends opcode `opc` to (spec/target.yaml live.request_portal)."""
    table = LIVE["request_portal"]
    return next((p for n, p in table.items() if n != "default" and opc == C(n)), table["default"])


@dataclass(frozen=True)
class Parsed:
    """A lustre_msg_v2 as the firewall reads it: its byte order and (offset, length) of each buffer."""
    data: bytes
    order: str
    spans: tuple[tuple[int, int], ...]

    def buffer(self, i: int) -> bytes | None:
        if i >= len(self.spans):
            return None
        at, n = self.spans[i]
        return self.data[at:at + n]

    def body(self, name: str) -> int | None:
        f, b = _BODY.field(name), self.buffer(0)
        return int.from_bytes(b[f.offset:f.end], self.order) if b is not None and len(b) >= f.end else None

    def leaf(self, index: int, struct: str, name: str) -> int | None:
        b = self.buffer(index)
        leaf = next(x for x in S.leaves(struct) if x.name == name)
        if b is None or len(b) < leaf.offset + leaf.size:
            return None
        return int.from_bytes(b[leaf.offset:leaf.offset + leaf.size], self.order)


def parse(data: bytes) -> Parsed | None:
    """The buffers of a lustre_msg_v2, or None when `data` is not one (short, another magic,
    buffers beyond its end)."""
    magic, count_at, lens = _HDR.field("lm_magic"), _HDR.field("lm_bufcount"), _HDR.field("lm_buflens")
    if len(data) < lens.offset:
        return None
    order = next((o for o in ("little", "big") if int.from_bytes(data[magic.offset:magic.end], o) == MSG_MAGIC), None)
    if order is None:
        return None
    count = int.from_bytes(data[count_at.offset:count_at.end], order)
    at = -(-(lens.offset + lens.elem_size * count) // 8) * 8
    if count > 64 or len(data) < at:
        return None
    spans = []
    for i in range(count):
        start = lens.offset + lens.elem_size * i
        n = int.from_bytes(data[start:start + lens.elem_size], order)
        if at + n > len(data):
            return None
        spans.append((at, n))
        at += -(-n // 8) * 8
    return Parsed(data, order, tuple(spans))


def _bits(names) -> int:
    out = 0
    for n in names:
        out |= C(n)
    return out


def _ostid_seq(p: Parsed) -> int | None:
    """The sequence of buffer 1's ost_body o_oi as the target reads it (lustre_ostid.h:
    ostid_seq: sequence 0 and the default one in the oi form; an IDIF FID is sequence 0;
    else the FID's own sequence, which shares its bytes with oi_id)."""
    oi_seq = p.leaf(1, "ost_body", "oa.o_oi.oi.oi_seq")
    f_seq = p.leaf(1, "ost_body", "oa.o_oi.oi.oi_id")
    if oi_seq is None or f_seq is None:
        return None
    if oi_seq in (C("FID_SEQ_OST_MDT0"), C("FID_SEQ_LOV_DEFAULT")):
        return oi_seq
    if C("FID_SEQ_IDIF") <= f_seq <= C("FID_SEQ_IDIF_MAX"):
        return C("FID_SEQ_OST_MDT0")
    return f_seq


def refusal(data: bytes, mode: str, *, target_uuid: str, client_prefix: str, index: int | None) -> str | None:
    """Why `data` may not be sent to the live target in `mode`, or None when it may."""
    rules = LIVE["modes"][mode]
    if len(data) > LIVE["max_request_size"]:
        return f"{len(data)} bytes, above the {LIVE['max_request_size']} an OST service takes (OST_MAXREQSIZE)"
    p = parse(data)
    opc = p.body("pb_opc") if p is not None else None
    if opc is None:
        if mode == "readonly":
            return "not a lustre_msg_v2 with a ptlrpc_body the firewall can read: what it asks for cannot be told"
        return None                     # the target cannot unpack it either: it drops it
    name = opcode_name(opc)
    if opc not in {_opcode(n) for n in rules["opcodes"]}:
        return f"{name} is not allowed in mode {mode} (allowed: {', '.join(rules['opcodes'])})"
    flags = (p.body("pb_flags") or 0) & _bits(rules["forbidden_msg_flags"])
    if flags:
        return f"{name} with message flags {flags:#x} ({', '.join(rules['forbidden_msg_flags'])} are forbidden in {mode})"
    if rules["forbid_transno"] and p.body("pb_transno"):
        return f"{name} with pb_transno {p.body('pb_transno')} (a replay) in {mode}"
    if name in spec.target()["opcodes"] and spec.target()["opcodes"][name]["body"] and len(p.spans) > 1:
        o_flags = (p.leaf(1, "ost_body", "oa.o_flags") or 0) & _bits(LIVE["forbidden_o_flags"])
        o_valid = (p.leaf(1, "ost_body", "oa.o_valid") or 0) & _bits(LIVE["forbidden_o_valid"])
        if o_flags or o_valid:
            return f"{name} with o_flags {o_flags:#x} / o_valid {o_valid:#x}, which no mode sends"
    sequences = rules["object_sequences"].get(name)
    if sequences is not None:
        seq = _ostid_seq(p)
        if seq not in {C(s) for s in sequences}:
            return f"{name} of an object in sequence {seq if seq is None else hex(seq)}: {mode} allows only " \
                   f"{', '.join(sequences)}"
    if opc == C("OST_CONNECT"):
        return _connect_refusal(p, target_uuid, client_prefix, index)
    return None


def _connect_refusal(p: Parsed, target_uuid: str, client_prefix: str, index: int | None) -> str | None:
    target, client = (uuid_of(p.buffer(CONNECT_BUFFERS[k])) for k in ("target", "client"))
    raw_target = p.buffer(CONNECT_BUFFERS["target"]) or b""
    # a target UUID left unterminated on purpose (TGT-CONN-4) that begins with the live target's
    # name: target_handle_connect refuses it -EINVAL before it looks any target up
    unterminated = len(raw_target) >= UUID_SIZE and 0 not in raw_target[:UUID_SIZE]
    if target != target_uuid and not (unterminated and target.startswith(target_uuid)):
        return f"OST_CONNECT to target {target!r}, not {target_uuid!r}"
    if client is None or not client.startswith(client_prefix):
        return f"OST_CONNECT with client UUID {client!r}, outside this run's prefix {client_prefix!r}"
    flags = p.leaf(CONNECT_BUFFERS["ocd"], "obd_connect_data", "ocd_connect_flags") or 0
    bad = flags & _bits(LIVE["forbidden_connect_flags"])
    if bad:
        return f"OST_CONNECT asking for connect flags {bad:#x} ({', '.join(LIVE['forbidden_connect_flags'])} are forbidden)"
    if flags & C("OBD_CONNECT_INDEX") and index is not None:
        asked = p.leaf(CONNECT_BUFFERS["ocd"], "obd_connect_data", "ocd_index")
        if asked != index:
            return f"OST_CONNECT with OBD_CONNECT_INDEX {asked}, the target's index is {index}"
    return None


def uuid_of(buf: bytes | None) -> str | None:
    return None if buf is None else buf.split(b"\0", 1)[0].decode("latin-1")


def with_uuids(data: bytes, target_uuid: str, client_uuid: str) -> bytes:
    """An OST_CONNECT with its target and client UUIDs replaced (the suite names its own target and
    clients; a live run names the live target and the run's client UUIDs); anything else as it is."""
    p = parse(data)
    if p is None or p.body("pb_opc") != C("OST_CONNECT"):
        return data
    out = bytearray(data)
    for key, value in (("target", target_uuid), ("client", client_uuid)):
        i = CONNECT_BUFFERS[key]
        if i < len(p.spans) and p.spans[i][1] >= UUID_SIZE:
            at = p.spans[i][0]
            raw = value.encode("latin-1")[:UUID_SIZE - 1]
            sent = bytes(out[at:at + UUID_SIZE])
            if 0 not in sent:
                # a UUID the case makes unterminated or over-long on purpose (TGT-CONN-4) stays so:
                # the name is written over its start, its other bytes kept
                out[at:at + len(raw)] = raw
            else:
                out[at:at + UUID_SIZE] = raw + bytes(UUID_SIZE - len(raw))
    return bytes(out)


def with_last_xid(data: bytes, shift) -> bytes:
    """The message with pb_last_xid replaced by shift(pb_last_xid) (a case's XIDs made the node's
    own: lnet_tcp.py); anything that does not parse, as it is."""
    p = parse(data)
    if p is None or not p.spans or p.spans[0][1] < _BODY.field("pb_last_xid").end:
        return data
    f = _BODY.field("pb_last_xid")
    at = p.spans[0][0] + f.offset
    out = bytearray(data)
    out[at:at + f.size] = shift(int.from_bytes(data[at:at + f.size], p.order)).to_bytes(f.size, p.order)
    return bytes(out)


# -- the requests the adapter writes itself (little-endian, as Lustre's client packs them) -------

def _pack(struct: str, values: dict) -> bytes:
    out = bytearray(S.size(struct))
    for leaf in S.leaves(struct):
        if leaf.name in values:
            v = values[leaf.name]
            if leaf.kind == "char":
                raw = v.encode("latin-1")[:leaf.count - 1]
                out[leaf.offset:leaf.offset + leaf.count] = raw + bytes(leaf.count - len(raw))
            else:
                out[leaf.offset:leaf.offset + leaf.size] = v.to_bytes(leaf.size, "little")
    return bytes(out)


def message(opc_name: str, buffers: list[bytes] = (), *, handle: int = 0, conn_cnt: int = 0,
            op_flags: int = 0, timeout: int = 30) -> bytes:
    """A request as Lustre's client packs it (lustre_msg_v2 with adaptive timeouts)."""
    version = C(spec.target()["opcodes"][opc_name]["version"]) | C("PTLRPC_MSG_VERSION")
    body = bytearray(_BODY.size)
    for name, value in (("pb_handle", handle), ("pb_type", C("PTL_RPC_MSG_REQUEST")), ("pb_version", version),
                        ("pb_opc", C(opc_name)), ("pb_conn_cnt", conn_cnt), ("pb_op_flags", op_flags),
                        ("pb_timeout", timeout)):
        f = _BODY.field(name)
        body[f.offset:f.end] = value.to_bytes(f.size, "little")
    parts = [bytes(body)] + list(buffers)
    lens = _HDR.field("lm_buflens")
    head = bytearray(-(-(lens.offset + 4 * len(parts)) // 8) * 8)
    for name, value in (("lm_bufcount", len(parts)), ("lm_magic", MSG_MAGIC), ("lm_flags", AT_SUPPORT)):
        f = _HDR.field(name)
        head[f.offset:f.end] = value.to_bytes(f.size, "little")
    for i, b in enumerate(parts):
        head[lens.offset + 4 * i:lens.offset + 4 * i + 4] = len(b).to_bytes(4, "little")
    return bytes(head) + b"".join(b + bytes(-len(b) % 8) for b in parts)


def connect_request(target_uuid: str, client_uuid: str, index: int) -> bytes:
    """An initial OST_CONNECT naming the target's index (OBD_CONNECT_INDEX: a wrong index is
    refused -EBADF, ofd_obd.c: ofd_parse_connect_data), asking for nothing it would keep."""
    flags = _bits(("OBD_CONNECT_INDEX", "OBD_CONNECT_VERSION", "OBD_CONNECT_AT", "OBD_CONNECT_FULL20"))
    ocd = _pack("obd_connect_data", {"ocd_connect_flags": flags, "ocd_index": index, "ocd_version": 0x02113900})
    return message("OST_CONNECT", [_pack("obd_uuid", {"uuid": target_uuid}), _pack("obd_uuid", {"uuid": client_uuid}),
                                   bytes(S.size("lustre_handle")), ocd],
                   conn_cnt=1, op_flags=C("MSG_CONNECT_INITIAL"))


def reply_status(data: bytes | None) -> tuple[int | None, Parsed | None]:
    """(pb_status as a signed number, the parsed reply) of a reply; (None, None) when unreadable."""
    p = parse(data) if data is not None else None
    status = p.body("pb_status") if p is not None else None
    if status is not None and status >= 1 << 31:
        status -= 1 << 32
    return status, p
