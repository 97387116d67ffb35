"""LNet's TCP transport (socklnd): NIDs, the acceptor request, hellos and `ksock_msg` framing,
built (for the capture writer) and parsed (for the capture reader).

Wire facts (from Lustre's headers, paraphrased; no Lustre code is included; the constants,
sizes and offsets used below are spec/lnet.yaml's, the portal sets spec/target.yaml's):

- socklnd listens on TCP port 988.  A connection opens with the *acceptor request* the
  connecting side sends (`lnet_acceptor_connreq`: magic 0xACCE7100, version 1, the target's
  8-byte NID: 16 bytes; version 2 carries a 20-byte `struct lnet_nid`: 28 bytes), then a
  *hello* from each side (`ksock_hello_msg`: magic LNET_PROTO_MAGIC 0x45726963, protocol
  version 2 or 3 with 8-byte NIDs, 56 bytes; version 4 with 20-byte NIDs, 80 bytes; then
  `kshm_nips` 4-byte addresses).  The hello's magic tells a receiver the sender's byte order.
- Each later message is a `ksock_msg`: a 24-byte header (`ksh_type` 0xC0 NOOP or 0xC1 LNET,
  `ksh_csum`, two 8-byte zero-copy cookies; in the sender's byte order), then, for LNET, an
  LNet header and `payload_length` bytes of payload.
- The LNet header (`lnet_hdr_nid4`, 72 bytes, little-endian): dest_nid u64 @0, src_nid u64 @8,
  dest_pid u32 @16, src_pid u32 @20, type u32 @24 (0 ACK, 1 PUT, 2 GET, 3 REPLY, 4 HELLO),
  payload_length u32 @28, then the PUT variant at @32: ack_wmd (two u64 cookies), match_bits
  u64 @48, hdr_data u64 @56, ptl_index u32 @64, offset u32 @68.  With protocol version 4 the
  NIDs are 20-byte `struct lnet_nid` (size u8, type u8, net number be16, address be32[4]) and
  the header is 96 bytes.
- A NID of 8 bytes is (net << 32) | address, net = (LND type << 16) | net number; socklnd is
  LND type 2 ("tcp"); the address of 127.0.0.2 is the integer 0x7F000002.
- PtlRPC sends a request as an LNet PUT to the service's request portal (OST_REQUEST_PORTAL
  28, MDS_REQUEST_PORTAL 12, ...) with match bits = the request's XID, hdr_data 0 and offset
  0, from pid LNET_PID_LUSTRE 12345; the reply is a PUT to the client's reply portal
  (OSC_REPLY_PORTAL 4, MDC_REPLY_PORTAL 10, ...) with the same match bits.
"""
from __future__ import annotations

import ipaddress
import struct
from dataclasses import dataclass
from typing import Callable, Iterator

from ptlrpc_conformance import spec
from ptlrpc_conformance.spec import layouts

_LNET = spec.lnet()                       # spec/lnet.yaml: the wire facts, with their citations
_C = {name: row["value"] for name, row in _LNET["constants"].items()}
_PORTALS = spec.target()["portals"]       # spec/target.yaml: which portals carry what

SOCKLND_PORT = _C["ACCEPT_PORT"]
LNET_PID_LUSTRE = _C["LNET_PID_LUSTRE"]
SOCKLND = _LNET["lnds"]["SOCKLND"]       # LND type of socklnd ("tcp")
KSOCK_MSG_NOOP = _C["KSOCK_MSG_NOOP"]
KSOCK_MSG_LNET = _C["KSOCK_MSG_LNET"]
KSOCK_HDR_SIZE = layouts.lnet_struct("ksock_msg_hdr")["size"]
LNET_HDR_NID4_SIZE = layouts.lnet_struct("lnet_hdr_nid4")["size"]
LNET_HDR_NID16_SIZE = layouts.lnet_struct("lnet_hdr_nid16")["size"]
LNET_MSG_ACK, LNET_MSG_PUT, LNET_MSG_GET, LNET_MSG_REPLY, LNET_MSG_HELLO = (
    _C[f"LNET_MSG_{t}"] for t in ("ACK", "PUT", "GET", "REPLY", "HELLO"))
LNET_PROTO_MAGIC = _C["LNET_PROTO_MAGIC"]
LNET_PROTO_TCP_MAGIC = _C["LNET_PROTO_TCP_MAGIC"]
LNET_PROTO_ACCEPTOR_MAGIC = _C["LNET_PROTO_ACCEPTOR_MAGIC"]
KSOCK_PROTO_V3 = _C["KSOCK_PROTO_V3"]
COOKIE_NONE = _C["LNET_WIRE_HANDLE_COOKIE_NONE"]
MAX_PAYLOAD = 1 << 26            # a socklnd payload above 64 MiB is not a PtlRPC message

# Lustre portals (include/uapi/linux/lustre/lustre_idl.h, as spec/target.yaml and spec/lnet.yaml hold them)
OST_REQUEST_PORTAL = next(p for p, row in _PORTALS["requests"].items() if row["name"] == "OST_REQUEST_PORTAL")
OSC_REPLY_PORTAL = _LNET["portals"]["OSC_REPLY_PORTAL"]["value"]
REPLY_PORTALS = frozenset(_PORTALS["replies"])              # CONNMGR, OSC, MDC, LDLM_CB, LDLM_CANCEL, MGC, MGS
BULK_PORTALS = frozenset(_PORTALS["bulk"])                  # OST, MDS, MGS bulk
SERVER_REQUEST_PORTALS = frozenset(_PORTALS["callbacks"])   # LDLM_CB_REQUEST: callbacks a server sends a client
LND_NAMES = {lnd: row["name"] for lnd, row in _LNET["lnds"]["types"].items()}
_IP_LNDS = frozenset(lnd for lnd, row in _LNET["lnds"]["types"].items() if row["ip"])
# the acceptor request's and the hello's sizes by version (without a V2/V3 hello's addresses)
_ACCEPTOR_SIZES = {_C["LNET_PROTO_ACCEPTOR_VERSION"]: layouts.lnet_struct("lnet_acceptor_connreq")["size"],
                   _C["LNET_PROTO_ACCEPTOR_VERSION_16"]: layouts.lnet_struct("lnet_acceptor_connreq_v2")["size"]}
_HELLO_SIZES = {_C["KSOCK_PROTO_V2"]: layouts.lnet_struct("ksock_hello_msg_nid4")["size"],
                _C["KSOCK_PROTO_V3"]: layouts.lnet_struct("ksock_hello_msg_nid4")["size"],
                _C["KSOCK_PROTO_V4"]: layouts.lnet_struct("ksock_hello_msg")["size"]}
_KSOCK_PROTO_V4 = _C["KSOCK_PROTO_V4"]


def _at(struct_name: str, field: str) -> int:
    """A field's offset in a structure of spec/lnet.yaml."""
    return next(f["offset"] for f in layouts.lnet_struct(struct_name)["fields"] if f["name"] == field)


_NIPS_AT = _at("ksock_hello_msg_nid4", "kshm_nips")     # V4 does not read its kshm_nips (no addresses)
_HDR_AT = {wide: {f: _at("lnet_hdr_nid16" if wide else "lnet_hdr_nid4", f)
                  for f in ("dest_nid", "src_nid", "type", "payload_length", "msg")} for wide in (False, True)}
_PUT_MBITS_AT, _PUT_PORTAL_AT, _PUT_OFFSET_AT = (_at("lnet_put", f) for f in ("match_bits", "ptl_index", "offset"))


class TraceError(ValueError):
    """A capture that cannot be read as LNet over TCP; names the file and the packet."""

    def __init__(self, path, packet: int | None, message: str):
        self.path, self.packet = str(path), packet
        where = f"{path}: packet {packet}" if packet else f"{path}"
        super().__init__(f"{where}: {message}")


# ------------------------------------------------------------------------------------
# NIDs
# ------------------------------------------------------------------------------------

def make_nid(address: str, net: int = 0, lnd: int = SOCKLND) -> int:
    """The 8-byte NID of an IPv4 address on network `lnd`/`net` (tcp0 by default)."""
    return ((lnd << 16 | net) << 32) | int(ipaddress.IPv4Address(address))


def nid_str(nid: int) -> str:
    """libcfs's text form of an 8-byte NID: 127.0.0.2@tcp, 192.168.1.1@o2ib3, 0@lo."""
    addr, net = nid & 0xFFFFFFFF, nid >> 32
    lnd, num = net >> 16, net & 0xFFFF
    name = LND_NAMES.get(lnd, f"lnd{lnd}-")
    where = str(ipaddress.IPv4Address(addr)) if lnd in _IP_LNDS else str(addr)
    return f"{where}@{name}{num if num else ''}"


def parse_nid(text: str) -> int:
    """The inverse of `nid_str` for IPv4 NIDs (address@tcp, address@tcpN, address@o2ibN)."""
    addr, sep, net = text.partition("@")
    if not sep:
        raise ValueError(f"{text!r} is not a NID (expected address@tcp)")
    for lnd, name in LND_NAMES.items():
        if net.startswith(name) and (net[len(name):] == "" or net[len(name):].isdigit()) and lnd in _IP_LNDS:
            try:
                return make_nid(addr, int(net[len(name):] or 0), lnd)
            except ValueError:
                break
    raise ValueError(f"{text!r} is not an IPv4 NID (expected address@tcp)")


def nid16_str(raw: bytes) -> str:
    """Text form of a 20-byte struct lnet_nid (size u8, type u8, net number be16, address be32[4])."""
    size, lnd, num = raw[0], raw[1], int.from_bytes(raw[2:4], "big")
    addr_bytes = raw[4:4 + size + 4] if size + 4 <= 16 else raw[4:20]
    name = LND_NAMES.get(lnd, f"lnd{lnd}-")
    if len(addr_bytes) == 4 and lnd in _IP_LNDS:
        where = str(ipaddress.IPv4Address(addr_bytes))
    elif len(addr_bytes) == 16:
        where = str(ipaddress.IPv6Address(addr_bytes))
    else:
        where = str(int.from_bytes(addr_bytes, "big"))
    return f"{where}@{name}{num if num else ''}"


# ------------------------------------------------------------------------------------
# socklnd messages
# ------------------------------------------------------------------------------------

def ksock_lnet_put(src_nid: int, dst_nid: int, portal: int, match_bits: int, payload: bytes, *,
                   src_pid: int = LNET_PID_LUSTRE, dst_pid: int = LNET_PID_LUSTRE,
                   hdr_data: int = 0, offset: int = 0) -> bytes:
    """One socklnd LNET message carrying an LNet PUT of `payload` (little-endian sender)."""
    return (struct.pack("<IIQQ", KSOCK_MSG_LNET, 0, 0, 0)
            + struct.pack("<QQIIII", dst_nid, src_nid, dst_pid, src_pid, LNET_MSG_PUT, len(payload))
            + struct.pack("<QQQQII", COOKIE_NONE, COOKIE_NONE, match_bits, hdr_data, portal, offset)
            + payload)


def ksock_noop() -> bytes:
    return struct.pack("<IIQQ", KSOCK_MSG_NOOP, 0, 0, 0)


def acceptor_connreq(target_nid: int) -> bytes:
    return struct.pack("<IIQ", LNET_PROTO_ACCEPTOR_MAGIC, 1, target_nid)


def ksock_hello(src_nid: int, dst_nid: int, src_incarnation: int, dst_incarnation: int,
                version: int = KSOCK_PROTO_V3) -> bytes:
    return struct.pack("<IIQQIIQQII", LNET_PROTO_MAGIC, version, src_nid, dst_nid, LNET_PID_LUSTRE,
                       LNET_PID_LUSTRE, src_incarnation, dst_incarnation, 0, 0)



# ------------------------------------------------------------------------------------
# parsing a stream of socklnd messages
# ------------------------------------------------------------------------------------

@dataclass
class LnetMessage:
    """One socklnd LNET message as read from a stream."""
    packet: int            # the packet that completed it
    src_nid: str
    dst_nid: str
    type: int
    portal: int | None
    match_bits: int | None
    offset: int | None
    payload: bytes


@dataclass(frozen=True)
class Piece:
    """One socklnd structure as framed from a stream, for a reader that wants every byte
    accounted for (`frame`'s `seen`): `kind` is acceptor, hello (with its addresses), noop or
    lnet (the ksock header, the LNet header and the payload); `big`: the sender wrote its
    own-order fields big-endian."""
    kind: str
    packet: int            # the packet that completed it
    stream: str
    data: bytes
    big: bool


def u32(b: bytes, off: int, flip: bool = False) -> int:
    return struct.unpack_from(">I" if flip else "<I", b, off)[0]


def frame(path, stream, packet: int, seen: Callable[[Piece], None] | None = None) -> Iterator[LnetMessage]:
    """Split the stream's in-order bytes into socklnd messages; keeps an incomplete tail.
    `seen(piece)`, if given, is told of every structure framed, the acceptor request, the
    hellos and the NOOPs too, with its bytes."""
    buf = stream.buf
    pos = 0

    def tell(kind: str, end: int, big: bool) -> None:
        if seen is not None:
            seen(Piece(kind, packet, stream.name, bytes(buf[pos:end]), big))

    while len(buf) - pos >= 4:
        word = u32(buf, pos)
        swapped = int.from_bytes(buf[pos:pos + 4], "big")
        if word == LNET_PROTO_ACCEPTOR_MAGIC or swapped == LNET_PROTO_ACCEPTOR_MAGIC:
            if len(buf) - pos < 8:
                break
            version = u32(buf, pos + 4, swapped == LNET_PROTO_ACCEPTOR_MAGIC)
            size = _ACCEPTOR_SIZES.get(version)
            if size is None:
                raise TraceError(path, packet, f"{stream.name}: acceptor request of unknown version {version}")
            if len(buf) - pos < size:
                break
            tell("acceptor", pos + size, swapped == LNET_PROTO_ACCEPTOR_MAGIC)
            pos += size
        elif word == LNET_PROTO_MAGIC or swapped == LNET_PROTO_MAGIC:
            flip = swapped == LNET_PROTO_MAGIC
            if len(buf) - pos < 8:
                break
            version = u32(buf, pos + 4, flip)
            base = _HELLO_SIZES.get(version)
            if base is None:
                raise TraceError(path, packet, f"{stream.name}: socklnd hello of unknown protocol version {version}")
            if len(buf) - pos < base:
                break
            nips = u32(buf, pos + _NIPS_AT, flip) if version != _KSOCK_PROTO_V4 else 0
            if nips > 1024:
                raise TraceError(path, packet, f"{stream.name}: socklnd hello lists {nips} addresses")
            if len(buf) - pos < base + 4 * nips:
                break
            stream.flip, stream.version = flip, version
            tell("hello", pos + base + 4 * nips, flip)
            pos += base + 4 * nips
        elif word == LNET_PROTO_TCP_MAGIC:
            raise TraceError(path, packet, f"{stream.name}: socklnd protocol version 1 is not supported")
        else:
            ktype = u32(buf, pos, stream.flip)
            if ktype == KSOCK_MSG_NOOP:
                if len(buf) - pos < KSOCK_HDR_SIZE:
                    break
                tell("noop", pos + KSOCK_HDR_SIZE, stream.flip)
                pos += KSOCK_HDR_SIZE
            elif ktype == KSOCK_MSG_LNET:
                wide = stream.version == _KSOCK_PROTO_V4
                hsize = LNET_HDR_NID16_SIZE if wide else LNET_HDR_NID4_SIZE
                start = pos + KSOCK_HDR_SIZE
                if len(buf) - start < hsize:
                    break
                at = _HDR_AT[wide]
                plen = u32(buf, start + at["payload_length"])
                if plen > MAX_PAYLOAD:
                    raise TraceError(path, packet, f"{stream.name}: LNet payload_length {plen} is implausible")
                if len(buf) - start < hsize + plen:
                    break
                h = bytes(buf[start:start + hsize])
                if wide:
                    dst = nid16_str(h[at["dest_nid"]:at["dest_nid"] + 20])
                    src = nid16_str(h[at["src_nid"]:at["src_nid"] + 20])
                else:
                    dst = nid_str(struct.unpack_from("<Q", h, at["dest_nid"])[0])
                    src = nid_str(struct.unpack_from("<Q", h, at["src_nid"])[0])
                mtype = u32(h, at["type"])
                var = at["msg"]                              # the message-type variant
                portal = mbits = offset = None
                if mtype == LNET_MSG_PUT:
                    mbits = struct.unpack_from("<Q", h, var + _PUT_MBITS_AT)[0]
                    portal = u32(h, var + _PUT_PORTAL_AT)
                    offset = u32(h, var + _PUT_OFFSET_AT)
                payload = bytes(buf[start + hsize:start + hsize + plen])
                tell("lnet", start + hsize + plen, stream.flip)
                pos = start + hsize + plen
                yield LnetMessage(packet, src, dst, mtype, portal, mbits, offset, payload)
            else:
                what = "begins" if not stream.started and not stream.saw_syn else "continues"
                hint = (" (its SYN is not in the capture, so it may start in the middle of a message)"
                        if not stream.saw_syn else "")
                raise TraceError(path, packet, f"{stream.name}: the stream {what} with bytes that are no "
                                               f"socklnd message (type word {ktype:#010x}){hint}")
        stream.started = True
    del buf[:pos]
