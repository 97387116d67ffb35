"""The codec of LNet over TCP: the acceptor request, the socklnd hello, the ksock message header,
the LNet header with its PUT, GET, REPLY and ACK variants, and the ping info.

Every layout and constant comes from spec/lnet.yaml (spec.lnet(), its structures through
spec/layouts.py: lnet_struct; `struct lnet_nid` from the release's layout table), with its
Lustre citation; this module only walks those layouts.  Structures in the sender's byte order are written in
the order asked (little-endian unless `big`) and read in either (the magic tells); the LNet
header is always little-endian; `struct lnet_nid` and the wire handles are never swapped.

Anything that cannot be read raises `WireError`, whose message names the structure and the
field; the node engine turns it into an outcome, never lets it out.
"""
from __future__ import annotations

import functools
import ipaddress
import struct
from dataclasses import dataclass, field

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.capture import socklnd
from ptlrpc_conformance.spec import layouts

SOURCE = "spec/lnet.yaml"


class WireError(ValueError):
    """Bytes that are not the LNet structure expected (the message says which and where)."""


def _constants() -> dict[str, int]:
    return {name: row["value"] for name, row in spec.lnet()["constants"].items()}


C = _constants()
NONE_WMD = b"\xff" * 16          # a wire handle of two LNET_WIRE_HANDLE_COOKIE_NONE cookies
assert C["LNET_WIRE_HANDLE_COOKIE_NONE"] == 2 ** 64 - 1


# ------------------------------------------------------------------------------------
# layouts, from the data
# ------------------------------------------------------------------------------------

_SCALARS = {"u8": (1, "B"), "u16": (2, "H"), "u32": (4, "I"), "u64": (8, "Q")}


@dataclass(frozen=True)
class Field:
    name: str
    offset: int
    type: str
    count: int | None
    size: int                     # bytes, all elements


@dataclass(frozen=True)
class Layout:
    """One structure of spec/lnet.yaml: its byte order and its fields."""
    name: str
    order: str
    size: int
    fields: tuple[Field, ...]
    cite: str

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(f"{SOURCE}: {self.name} has no field {name!r}")

    def _fmt(self, f: Field, big: bool) -> str | None:
        scalar = _SCALARS.get(f.type)
        if scalar is None:
            return None
        if self.order == "little":
            order = "<"
        else:
            order = ">" if big else "<"
        return f"{order}{f.count or 1}{scalar[1]}"

    def pack(self, values: dict, big: bool = False) -> bytes:
        """The structure's bytes; a field not in `values` is zero."""
        out = bytearray(self.size)
        for f in self.fields:
            v = values.get(f.name)
            if v is None:
                continue
            fmt = self._fmt(f, big)
            if fmt is None:
                raw = bytes(v)
                if len(raw) != f.size:
                    raise WireError(f"{self.name}.{f.name}: {len(raw)} bytes given, the field has {f.size}")
                out[f.offset:f.offset + f.size] = raw
            else:
                try:
                    struct.pack_into(fmt, out, f.offset, *(v if f.count else (v,)))
                except struct.error as exc:
                    raise WireError(f"{self.name}.{f.name}: {v!r} does not fit: {exc}") from None
        return bytes(out)

    def unpack(self, data, big: bool = False, at: int = 0) -> dict:
        if len(data) - at < self.size:
            raise WireError(f"{self.name}: {len(data) - at} bytes, {self.size} needed")
        out = {}
        for f in self.fields:
            fmt = self._fmt(f, big)
            if fmt is None:
                out[f.name] = bytes(data[at + f.offset:at + f.offset + f.size])
            else:
                got = struct.unpack_from(fmt, data, at + f.offset)
                out[f.name] = tuple(got) if f.count else got[0]
        return out


@functools.lru_cache(maxsize=None)
def layout(name: str) -> Layout:
    """A structure of spec/lnet.yaml, checked: its fields follow each other with no gap and
    end at its size (a wrong entry is a clear error naming the file and the structure).  A
    field whose type is a structure of the release's layout table (lnet_nid) is its bytes."""
    entry = layouts.lnet_struct(name)
    fields, at = [], 0
    for row in entry["fields"]:
        t, count = row["type"], row.get("count")
        if t in _SCALARS:
            size = _SCALARS[t][0] * (count or 1)
        elif t == "bytes":
            size = row["size"]
        else:
            try:
                size = layout(t).size * (count or 1)
            except KeyError:                     # not LNet's own: the release's table
                size = spec.layout(t).size * (count or 1)
        if row["offset"] != at:
            raise ValueError(f"{SOURCE}: {name}.{row['name']} at offset {row['offset']}, "
                             f"the field before it ends at {at}")
        fields.append(Field(row["name"], row["offset"], t, count, size))
        at += size
    if at != entry["size"]:
        raise ValueError(f"{SOURCE}: {name}'s fields end at {at}, its size is {entry['size']}")
    return Layout(name, entry["order"], entry["size"], tuple(fields), entry["cite"])


def _flip_of(word: bytes, magic: int, what: str) -> bool:
    """Whether a structure whose first 4 bytes are `word` was written big-endian."""
    if int.from_bytes(word, "little") == magic:
        return False
    if int.from_bytes(word, "big") == magic:
        return True
    raise WireError(f"{what}: magic {int.from_bytes(word, 'little'):#010x} (little-endian), {magic:#010x} expected")


# ------------------------------------------------------------------------------------
# NIDs
# ------------------------------------------------------------------------------------

@dataclass(frozen=True, order=True)
class Nid:
    """An LNet NID: the LND type, the network number and the address bytes (4 for a NID that
    fits 8 bytes, "nid4"; up to 16).  `struct lnet_nid` on the wire (lnet-idl.h); the 8-byte
    form is (LND << 16 | net) << 32 | address (lnet-types.h: LNET_MKNID, lnet_nid4_to_nid)."""
    lnd: int
    net: int
    addr: bytes

    @classmethod
    def ip(cls, address: str, net: int = 0, lnd: int | None = None) -> "Nid":
        packed = ipaddress.ip_address(address).packed
        return cls(spec.lnet()["lnds"]["SOCKLND"] if lnd is None else lnd, net, packed)

    @classmethod
    def parse(cls, text: str) -> "Nid":
        """The NID of an IPv4 NID's text (address@tcp, address@tcpN, ...; capture/socklnd.py)."""
        return cls.from_nid4(socklnd.parse_nid(text))

    @classmethod
    def from_nid4(cls, value: int) -> "Nid":
        if value == C["LNET_NID_ANY"]:
            return ANY_NID
        net = value >> 32
        return cls(net >> 16, net & 0xFFFF, (value & 0xFFFFFFFF).to_bytes(4, "big"))

    @classmethod
    def from_bytes(cls, raw: bytes) -> "Nid":
        size, lnd, num, addr = (raw[f.offset:f.end] for f in _nid_fields())
        if lnd[0] == 0xFF:
            return ANY_NID
        n = size[0] + 4
        if n > len(addr):
            raise WireError(f"lnet_nid.nid_size: {size[0]} (an address of {n} bytes; at most {len(addr)})")
        return cls(lnd[0], int.from_bytes(num, _NID_ORDER), bytes(addr[:n]))

    @property
    def is_any(self) -> bool:
        return self.lnd == 0xFF

    @property
    def is_nid4(self) -> bool:
        return len(self.addr) == 4

    @property
    def nid4(self) -> int:
        if self.is_any:
            return C["LNET_NID_ANY"]
        if not self.is_nid4:
            raise WireError(f"{self} does not fit an 8-byte NID")
        return ((self.lnd << 16 | self.net) << 32) | int.from_bytes(self.addr, "big")

    @property
    def net_id(self) -> int:
        return self.lnd << 16 | self.net

    def to_bytes(self) -> bytes:
        size, lnd, num, addr = _nid_fields()
        out = bytearray(spec.layout("lnet_nid").size)
        if self.is_any:
            return bytes(b"\xff" * len(out))
        out[size.offset] = len(self.addr) - 4
        out[lnd.offset] = self.lnd
        out[num.offset:num.end] = self.net.to_bytes(num.size, _NID_ORDER)
        out[addr.offset:addr.offset + len(self.addr)] = self.addr
        return bytes(out)

    def __str__(self) -> str:
        if self.is_any:
            return "<any>"
        return socklnd.nid16_str(self.to_bytes())


ANY_NID = Nid(0xFF, 0xFFFF, b"\xff" * 4)
_NID_ORDER = spec.lnet()["lnet_nid"]["order"]        # "big": never swapped (lnet-idl.h)


@functools.lru_cache(maxsize=1)
def _nid_fields():
    """nid_size, nid_type, nid_num and nid_addr of the release's `struct lnet_nid`."""
    lay = spec.layout("lnet_nid")
    return tuple(lay.field(n) for n in ("nid_size", "nid_type", "nid_num", "nid_addr"))


def _nid_field(value: Nid, wide: bool):
    return value.to_bytes() if wide else value.nid4


def _nid_value(raw, wide: bool) -> Nid:
    return Nid.from_bytes(raw) if wide else Nid.from_nid4(raw)


# ------------------------------------------------------------------------------------
# the acceptor request
# ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class AcceptorRequest:
    """What the connecting side sends first: the NID it wants on the listening node."""
    nid: Nid
    version: int = 0              # 0: as lnet_connect picks (1 for a nid4 NID, else 2)
    big: bool = False             # written big-endian

    def pack(self) -> bytes:
        version = self.version or (C["LNET_PROTO_ACCEPTOR_VERSION"] if self.nid.is_nid4
                                   else C["LNET_PROTO_ACCEPTOR_VERSION_16"])
        wide = version == C["LNET_PROTO_ACCEPTOR_VERSION_16"]
        name = "lnet_acceptor_connreq_v2" if wide else "lnet_acceptor_connreq"
        return layout(name).pack({"acr_magic": C["LNET_PROTO_ACCEPTOR_MAGIC"], "acr_version": version,
                                  "acr_nid": _nid_field(self.nid, wide)}, self.big)


def acceptor_size(first: bytes) -> int:
    """The size of the acceptor request whose first 8 bytes are `first`."""
    big = _flip_of(first[:4], C["LNET_PROTO_ACCEPTOR_MAGIC"], "acceptor request")
    version = int.from_bytes(first[4:8], "big" if big else "little")
    if version == C["LNET_PROTO_ACCEPTOR_VERSION"]:
        return layout("lnet_acceptor_connreq").size
    if version == C["LNET_PROTO_ACCEPTOR_VERSION_16"]:
        return layout("lnet_acceptor_connreq_v2").size
    raise WireError(f"acceptor request: acr_version {version} (1 or 2 expected)")


def unpack_acceptor(data: bytes) -> AcceptorRequest:
    size = acceptor_size(data[:8])
    big = _flip_of(data[:4], C["LNET_PROTO_ACCEPTOR_MAGIC"], "acceptor request")
    wide = size == layout("lnet_acceptor_connreq_v2").size
    f = layout("lnet_acceptor_connreq_v2" if wide else "lnet_acceptor_connreq").unpack(data, big)
    return AcceptorRequest(_nid_value(f["acr_nid"], wide), f["acr_version"], big)


# ------------------------------------------------------------------------------------
# the socklnd hello
# ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Hello:
    """A socklnd hello (V2 and V3: 8-byte NIDs then kshm_nips addresses; V4: 20-byte NIDs)."""
    version: int
    src_nid: Nid
    dst_nid: Nid
    src_pid: int
    dst_pid: int
    src_incarnation: int
    dst_incarnation: int
    ctype: int                     # SOCKLND_CONN_*; SOCKLND_CONN_NONE is -1
    ips: tuple[int, ...] = ()      # V2/V3 only (deprecated; Lustre sends none)
    big: bool = False

    @property
    def wide(self) -> bool:
        return self.version == C["KSOCK_PROTO_V4"]

    def pack(self) -> bytes:
        name = "ksock_hello_msg" if self.wide else "ksock_hello_msg_nid4"
        order = ">" if self.big else "<"
        head = layout(name).pack({
            "kshm_magic": C["LNET_PROTO_MAGIC"], "kshm_version": self.version,
            "kshm_src_nid": _nid_field(self.src_nid, self.wide), "kshm_dst_nid": _nid_field(self.dst_nid, self.wide),
            "kshm_src_pid": self.src_pid, "kshm_dst_pid": self.dst_pid,
            "kshm_src_incarnation": self.src_incarnation, "kshm_dst_incarnation": self.dst_incarnation,
            "kshm_ctype": self.ctype & 0xFFFFFFFF, "kshm_nips": 0 if self.wide else len(self.ips)}, self.big)
        return head if self.wide else head + b"".join(struct.pack(order + "I", ip) for ip in self.ips)


def hello_size(first: bytes) -> int:
    """The size, without addresses, of the hello whose first 8 bytes are `first`
    (socklnd_cb.c: ksocknal_parse_proto_version: V2, V3, V4 in either byte order)."""
    word = int.from_bytes(first[:4], "little")
    if word == C["LNET_PROTO_TCP_MAGIC"]:
        raise WireError("socklnd hello: protocol V1 (LNET_PROTO_TCP_MAGIC), not spoken here")
    big = _flip_of(first[:4], C["LNET_PROTO_MAGIC"], "socklnd hello")
    version = int.from_bytes(first[4:8], "big" if big else "little")
    if version in (C["KSOCK_PROTO_V2"], C["KSOCK_PROTO_V3"]):
        return layout("ksock_hello_msg_nid4").size
    if version == C["KSOCK_PROTO_V4"]:
        return layout("ksock_hello_msg").size
    raise WireError(f"socklnd hello: kshm_version {version} (2, 3 or 4 expected)")


def hello_nips(head: bytes) -> int:
    """How many 4-byte addresses follow a V2/V3 hello's fixed part (0 for V4, whose reader
    never reads them: socklnd_proto.c: ksocknal_recv_hello_v4)."""
    size = hello_size(head[:8])
    if size != layout("ksock_hello_msg_nid4").size:
        return 0
    big = _flip_of(head[:4], C["LNET_PROTO_MAGIC"], "socklnd hello")
    nips = layout("ksock_hello_msg_nid4").unpack(head, big)["kshm_nips"]
    if nips > C["LNET_INTERFACES_NUM"]:
        raise WireError(f"socklnd hello: kshm_nips {nips} (at most {C['LNET_INTERFACES_NUM']})")
    return nips


def unpack_hello(data: bytes) -> Hello:
    size = hello_size(data[:8])
    big = _flip_of(data[:4], C["LNET_PROTO_MAGIC"], "socklnd hello")
    wide = size == layout("ksock_hello_msg").size
    f = layout("ksock_hello_msg" if wide else "ksock_hello_msg_nid4").unpack(data, big)
    nips = hello_nips(data[:size])
    if len(data) < size + 4 * nips:
        raise WireError(f"socklnd hello: {len(data)} bytes, {size + 4 * nips} needed for {nips} addresses")
    ips = struct.unpack_from(f"{'>' if big else '<'}{nips}I", data, size)
    ctype = f["kshm_ctype"]
    return Hello(f["kshm_version"], _nid_value(f["kshm_src_nid"], wide), _nid_value(f["kshm_dst_nid"], wide),
                 f["kshm_src_pid"], f["kshm_dst_pid"], f["kshm_src_incarnation"], f["kshm_dst_incarnation"],
                 ctype - (1 << 32) if ctype & 0x80000000 else ctype, tuple(ips), big)


# ------------------------------------------------------------------------------------
# the ksock message header and the LNet header
# ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class KsockHeader:
    type: int
    csum: int = 0
    zc_cookies: tuple[int, int] = (0, 0)

    def pack(self, big: bool = False) -> bytes:
        return layout("ksock_msg_hdr").pack({"ksh_type": self.type, "ksh_csum": self.csum,
                                             "ksh_zc_cookies": self.zc_cookies}, big)


def unpack_ksock(data: bytes, big: bool = False) -> KsockHeader:
    f = layout("ksock_msg_hdr").unpack(data, big)
    return KsockHeader(f["ksh_type"], f["ksh_csum"], f["ksh_zc_cookies"])


# the variant fields, by the name this module gives them -> the name in each variant's layout
_VARIANT_FIELDS = {
    "lnet_put": {"wmd": "ack_wmd", "match_bits": "match_bits", "hdr_data": "hdr_data",
                 "portal": "ptl_index", "offset": "offset"},
    "lnet_get": {"wmd": "return_wmd", "match_bits": "match_bits", "portal": "ptl_index",
                 "offset": "src_offset", "sink_length": "sink_length"},
    "lnet_reply": {"wmd": "dst_wmd"},
    "lnet_ack": {"wmd": "dst_wmd", "match_bits": "match_bits", "mlength": "mlength"},
}


def _variant(msg_type: int) -> str:
    name = spec.lnet()["variants"].get(msg_type)
    if name is None:
        raise WireError(f"LNet header: type {msg_type} is no ACK, PUT, GET or REPLY (lib-move.c: lnet_parse)")
    return name


@dataclass(frozen=True)
class LnetHeader:
    """An LNet header.  The variant's fields by one set of names: `wmd` is a PUT's ack_wmd, a
    GET's return_wmd, a REPLY's or ACK's dst_wmd; `offset` a PUT's offset or a GET's
    src_offset; `portal` the ptl_index.  Fields a variant does not have stay 0."""
    type: int
    dest_nid: Nid
    src_nid: Nid
    dest_pid: int
    src_pid: int
    payload_length: int = 0
    wmd: bytes = NONE_WMD
    match_bits: int = 0
    hdr_data: int = 0
    portal: int = 0
    offset: int = 0
    sink_length: int = 0
    mlength: int = 0

    @property
    def wants_ack(self) -> bool:
        return self.type == C["LNET_MSG_PUT"] and self.wmd != NONE_WMD

    def pack(self, wide: bool = False) -> bytes:
        variant = _variant(self.type)
        msg = layout(variant).pack({theirs: getattr(self, ours) for ours, theirs in _VARIANT_FIELDS[variant].items()})
        return layout("lnet_hdr_nid16" if wide else "lnet_hdr_nid4").pack({
            "dest_nid": _nid_field(self.dest_nid, wide), "src_nid": _nid_field(self.src_nid, wide),
            "dest_pid": self.dest_pid, "src_pid": self.src_pid, "type": self.type,
            "payload_length": self.payload_length, "msg": msg.ljust(40, b"\0")})


def lnet_header_size(wide: bool) -> int:
    return layout("lnet_hdr_nid16" if wide else "lnet_hdr_nid4").size


def unpack_lnet_header(data: bytes, wide: bool = False) -> LnetHeader:
    f = layout("lnet_hdr_nid16" if wide else "lnet_hdr_nid4").unpack(data)
    variant = _variant(f["type"])
    v = layout(variant).unpack(f["msg"])
    return LnetHeader(f["type"], _nid_value(f["dest_nid"], wide), _nid_value(f["src_nid"], wide),
                      f["dest_pid"], f["src_pid"], f["payload_length"],
                      **{ours: v[theirs] for ours, theirs in _VARIANT_FIELDS[variant].items()})


# ------------------------------------------------------------------------------------
# the ping info
# ------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PingInfo:
    """`struct lnet_ping_info` with its `lnet_ni_status` entries (nid4, status, msg_size)."""
    features: int
    pid: int
    nis: tuple[tuple[int, int, int], ...]
    big: bool = False
    magic: int = field(default=C["LNET_PROTO_PING_MAGIC"])

    def pack(self) -> bytes:
        head = layout("lnet_ping_info").pack({"pi_magic": self.magic, "pi_features": self.features,
                                              "pi_pid": self.pid, "pi_nnis": len(self.nis)}, self.big)
        entry = layout("lnet_ni_status")
        return head + b"".join(entry.pack({"ns_nid": n, "ns_status": s, "ns_msg_size": m}, self.big)
                               for n, s, m in self.nis)


def ping_info(own: Nid, pid: int) -> PingInfo:
    """What a node that is not multi-rail answers a ping with: the loopback NID first, then its
    own, both up, feature NI_STATUS only (api-ni.c: lnet_ping_info_validate; not DISCOVERY nor
    MULTI_RAIL, so that the peer never pushes: peer.c: lnet_discovery_event_reply).  A NID
    that does not fit 8 bytes is not listed (its entries would need LARGE_ADDR)."""
    up = C["LNET_NI_STATUS_UP"]
    nis = ((C["LNET_NID_LO_0"], up, 0),) + (((own.nid4, up, 0),) if own.is_nid4 else ())
    return PingInfo(C["LNET_PING_FEAT_NI_STATUS"], pid, nis)


def unpack_ping_info(data: bytes) -> PingInfo:
    """A ping info in either byte order, checked as the pinging node checks it (api-ni.c:
    lnet_ping_info_validate): the magic, NI_STATUS, 1 to 4096 entries, the loopback first."""
    big = _flip_of(data[:4], C["LNET_PROTO_PING_MAGIC"], "ping info")
    head = layout("lnet_ping_info").unpack(data, big)
    if not head["pi_features"] & C["LNET_PING_FEAT_NI_STATUS"]:
        raise WireError(f"ping info: pi_features {head['pi_features']:#x} without NI_STATUS")
    nnis = head["pi_nnis"]
    if not 1 <= nnis <= C["LNET_INTERFACES_MAX_DEFAULT"]:
        raise WireError(f"ping info: pi_nnis {nnis} (1 to {C['LNET_INTERFACES_MAX_DEFAULT']})")
    entry, base = layout("lnet_ni_status"), layout("lnet_ping_info").size
    if len(data) < base + nnis * entry.size:
        raise WireError(f"ping info: {len(data)} bytes, {base + nnis * entry.size} needed for {nnis} entries")
    nis = tuple((e["ns_nid"], e["ns_status"], e["ns_msg_size"])
                for e in (entry.unpack(data, big, base + i * entry.size) for i in range(nnis)))
    if nis[0][0] != C["LNET_NID_LO_0"]:
        raise WireError(f"ping info: first entry {nis[0][0]:#x}, not the loopback NID")
    return PingInfo(head["pi_features"], head["pi_pid"], nis, big)
