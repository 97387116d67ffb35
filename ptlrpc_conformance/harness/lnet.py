"""PtlRPC messages as they travel over LNet's TCP transport (socklnd): a pcap writer and reader.

Wire facts (from Lustre's headers, paraphrased; no Lustre code is included):

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

Reading (`read_pcap`): classic pcap or pcapng; Ethernet (VLAN tags too), Linux cooked (v1 and
v2), BSD loopback and raw IPv4/IPv6 link types; TCP streams to or from port 988 are
reassembled (segments out of order, retransmitted or overlapping; several messages per
segment; one message over many segments), then split into socklnd messages.  Each LNet PUT
is classified by its portal: a reply portal makes it a reply, a bulk portal (8, 14, 33) is
bulk data and skipped, any other portal a request.  A reply pairs with the latest request of
the same client (its source NID), server and match bits; when several replies answer one
request (Lustre's early replies come before the real one), the last one is kept.  Records
come in capture order of their requests, each with the number of the packet that completed
its request.  Requests a server sends a client (LDLM callbacks, portal 15) are paired with
their replies but are not records.  GET, ACK, REPLY and NOOP messages carry no PtlRPC
message and are skipped; so is traffic on other ports and packets of link types the reader
does not know (a capture none of whose readable packets is socklnd traffic is refused).
Bad input raises `TraceError` (a ValueError) naming the file and the packet; so do bytes
missing from a stream (a lost segment), a stream that ends in the middle of a message, and
(`read_pcap`) a reply whose request is not in the capture, so that nothing is lost silently.

Writing (`PcapWriter`, `write_pcap`): classic pcap, Ethernet, IPv4 on 127.0.0.x with correct
header and TCP checksums and sequence numbers; one TCP connection per client (its own
address, a privileged source port as socklnd uses, the three-way handshake, the acceptor
request and hellos, then the messages, then FIN); messages can be split across segments or
packed several to a segment.
"""
from __future__ import annotations

import array
import ipaddress
import os
import struct
import sys
from dataclasses import dataclass, field
from typing import BinaryIO, Iterable, Iterator

SOCKLND_PORT = 988
LNET_PID_LUSTRE = 12345
SOCKLND = 2                      # LND type of socklnd ("tcp")
KSOCK_MSG_NOOP = 0xC0
KSOCK_MSG_LNET = 0xC1
KSOCK_HDR_SIZE = 24
LNET_HDR_NID4_SIZE = 72
LNET_HDR_NID16_SIZE = 96
LNET_MSG_ACK, LNET_MSG_PUT, LNET_MSG_GET, LNET_MSG_REPLY, LNET_MSG_HELLO = range(5)
LNET_PROTO_MAGIC = 0x45726963
LNET_PROTO_TCP_MAGIC = 0xEEBC0DED
LNET_PROTO_ACCEPTOR_MAGIC = 0xACCE7100
KSOCK_PROTO_V3 = 3
COOKIE_NONE = 0xFFFFFFFFFFFFFFFF
MAX_PAYLOAD = 1 << 26            # a socklnd payload above 64 MiB is not a PtlRPC message

# Lustre portals (include/uapi/linux/lustre/lustre_idl.h)
OST_REQUEST_PORTAL = 28
OSC_REPLY_PORTAL = 4
REPLY_PORTALS = frozenset({2, 4, 10, 16, 18, 25, 27})   # CONNMGR, OSC, MDC, LDLM_CB, LDLM_CANCEL, MGC, MGS
BULK_PORTALS = frozenset({8, 14, 33})                   # OST, MDS, MGS bulk
SERVER_REQUEST_PORTALS = frozenset({15})                # LDLM_CB_REQUEST: callbacks a server sends a client
LND_NAMES = {2: "tcp", 5: "o2ib", 9: "lo", 13: "gni", 14: "gip", 15: "ptlf", 16: "kfi", 17: "tofu",
             18: "efa", 19: "bxi3"}
_IP_LNDS = frozenset({2, 5, 14, 18})

MSS = 65483                      # Linux loopback MSS with TCP timestamps (MTU 65536)
_TCP_FIN, _TCP_SYN, _TCP_RST, _TCP_PSH, _TCP_ACK = 0x01, 0x02, 0x04, 0x08, 0x10
_BASE_TIME = 1_767_225_600       # 2026-01-01T00:00:00Z: fixed, so the same input gives the same file


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


def _nid16_str(raw: bytes) -> str:
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
# checksums
# ------------------------------------------------------------------------------------

_LITTLE = sys.byteorder == "little"


def _ones_sum(data: bytes) -> int:
    """The 16-bit one's complement sum of `data` (big-endian words), not yet inverted."""
    if len(data) & 1:
        data += b"\0"
    words = array.array("H", data)
    if _LITTLE:
        words.byteswap()
    total = sum(words)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def internet_checksum(*parts: bytes) -> int:
    total = 0
    for p in parts:
        total += _ones_sum(p)
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return (~total) & 0xFFFF


# ------------------------------------------------------------------------------------
# writing
# ------------------------------------------------------------------------------------

class TcpConnection:
    """One client's TCP connection to the server; `send` writes segments of the stream."""

    def __init__(self, writer: "PcapWriter", client_ip: str, client_port: int, index: int):
        self.w = writer
        self.client_ip, self.client_port = client_ip, client_port
        self.client_nid = make_nid(client_ip)
        self.seq = {True: (0x10000000 * (index + 1) + 0x1234) & 0xFFFFFFFF,    # client's next seq
                    False: (0x80000000 + 0x01000000 * index + 0x4321) & 0xFFFFFFFF}
        self.ipid = {True: 1, False: 1}
        self.closed = False

    def _segment(self, from_client: bool, flags: int, payload: bytes = b"") -> int:
        w = self.w
        src, dst = (self.client_ip, w.server_ip) if from_client else (w.server_ip, self.client_ip)
        sport, dport = (self.client_port, SOCKLND_PORT) if from_client else (SOCKLND_PORT, self.client_port)
        seq, ack = self.seq[from_client], self.seq[not from_client]
        src_b, dst_b = ipaddress.IPv4Address(src).packed, ipaddress.IPv4Address(dst).packed
        tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack if flags & _TCP_ACK else 0, 5 << 4, flags,
                          65535, 0, 0)
        pseudo = src_b + dst_b + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
        csum = internet_checksum(pseudo, tcp, payload)
        tcp = tcp[:16] + struct.pack("!H", csum) + tcp[18:]
        total = 20 + len(tcp) + len(payload)
        ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, self.ipid[from_client], 0x4000, 64, 6, 0, src_b, dst_b)
        ip = ip[:10] + struct.pack("!H", internet_checksum(ip)) + ip[12:]
        self.ipid[from_client] = (self.ipid[from_client] + 1) & 0xFFFF
        advance = len(payload) + (1 if flags & (_TCP_SYN | _TCP_FIN) else 0)
        self.seq[from_client] = (seq + advance) & 0xFFFFFFFF
        ether = b"\0" * 12 + b"\x08\x00"
        return w._record(ether + ip + tcp + payload)

    def handshake(self, hello: bool = True) -> None:
        self._segment(True, _TCP_SYN)
        self._segment(False, _TCP_SYN | _TCP_ACK)
        self._segment(True, _TCP_ACK)
        if hello:
            w = self.w
            self.send(True, acceptor_connreq(w.server_nid))
            self.send(True, ksock_hello(self.client_nid, w.server_nid, w.incarnation(self.client_nid), 0))
            self.send(False, ksock_hello(w.server_nid, self.client_nid, w.incarnation(w.server_nid),
                                         w.incarnation(self.client_nid)))

    def send(self, from_client: bool, data: bytes, segment: int | None = None) -> list[int]:
        """Write `data` as the next bytes of one direction, in segments of at most `segment`
        bytes (default the MSS); returns the packet numbers written."""
        size = max(1, min(segment or MSS, MSS))
        return [self._segment(from_client, _TCP_PSH | _TCP_ACK, data[i:i + size])
                for i in range(0, len(data), size)] if data else []

    def put(self, from_client: bool, portal: int, match_bits: int, payload: bytes,
            segment: int | None = None, offset: int = 0) -> list[int]:
        src, dst = (self.client_nid, self.w.server_nid) if from_client else (self.w.server_nid, self.client_nid)
        return self.send(from_client, ksock_lnet_put(src, dst, portal, match_bits, payload, offset=offset), segment)

    def close(self) -> None:
        if not self.closed:
            self._segment(True, _TCP_FIN | _TCP_ACK)
            self._segment(False, _TCP_FIN | _TCP_ACK)
            self._segment(True, _TCP_ACK)
            self.closed = True


class PcapWriter:
    """A classic pcap file (Ethernet, microsecond timestamps) of socklnd connections from
    clients 127.0.0.2, 127.0.0.3, ... to a server on 127.0.0.1:988.  Packet numbers count
    from 1, as Wireshark's do."""

    def __init__(self, out: BinaryIO, server_ip: str = "127.0.0.1"):
        self.out = out
        self.server_ip = server_ip
        self.server_nid = make_nid(server_ip)
        self.packets = 0
        self.connections: dict[str, TcpConnection] = {}
        out.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 262144, 1))

    def incarnation(self, nid: int) -> int:
        return 0x1800000000000000 | (nid & 0xFFFFFFFF)

    def _record(self, frame: bytes) -> int:
        self.packets += 1
        t = self.packets
        self.out.write(struct.pack("<IIII", _BASE_TIME + t // 1_000_000, t % 1_000_000, len(frame), len(frame)))
        self.out.write(frame)
        return self.packets

    def connection(self, client_ip: str, hello: bool = True) -> TcpConnection:
        """The connection of the client at `client_ip`, opened (handshake, acceptor request,
        hellos) the first time it is asked for."""
        conn = self.connections.get(client_ip)
        if conn is None:
            index = len(self.connections)
            conn = TcpConnection(self, client_ip, 1023 - index % 512, index)
            self.connections[client_ip] = conn
            conn.handshake(hello)
        return conn

    def close(self) -> None:
        for conn in self.connections.values():
            conn.close()


def _client_ip(name: str, names: dict[str, str]) -> str:
    """A record's client as an IPv4 address: a NID's address, an address itself, or any other
    name mapped to the next free 127.0.0.x (from 127.0.0.2, in order of appearance)."""
    if name in names:
        return names[name]
    ip = None
    try:
        ip = str(ipaddress.IPv4Address(parse_nid(name) & 0xFFFFFFFF))
    except ValueError:
        try:
            ip = str(ipaddress.IPv4Address(name))
        except ValueError:
            pass
    if ip is None:
        used = set(names.values())
        n = 2
        while f"127.0.0.{n}" in used:
            n += 1
        if n > 254:
            raise ValueError("more than 253 named clients")
        ip = f"127.0.0.{n}"
    if ip == "127.0.0.1":
        raise ValueError(f"client {name!r}: 127.0.0.1 is the server's address")
    names[name] = ip
    return ip


def write_pcap(path: str | os.PathLike, records: Iterable[dict], *, segment: int | None = None,
               coalesce: bool = False, request_portal: int = OST_REQUEST_PORTAL,
               reply_portal: int = OSC_REPLY_PORTAL) -> None:
    """Write records of `read_pcap`'s shape ({client, xid, request, reply}) as a capture:
    each request a PUT from the client on `request_portal`, its reply (unless None) a PUT
    back on `reply_portal`, both with match bits `xid`.  `segment` splits every message into
    TCP segments of at most that many bytes; `coalesce` sends each request together with
    the next records' requests of the same client in one write (several messages per
    segment) when they are consecutive for that client.  A client named by a NID or an IPv4
    address uses that address; other names get 127.0.0.2, 127.0.0.3, ..."""
    records = list(records)
    names: dict[str, str] = {}
    with open(path, "wb") as f:
        w = PcapWriter(f)
        i = 0
        while i < len(records):
            r = records[i]
            conn = w.connection(_client_ip(r["client"], names))
            if coalesce:
                group = [r]
                while (i + len(group) < len(records) and records[i + len(group)]["client"] == r["client"]
                       and group[-1].get("reply") is None):
                    group.append(records[i + len(group)])
                blob = b"".join(ksock_lnet_put(conn.client_nid, w.server_nid, request_portal, g["xid"],
                                               bytes(g["request"])) for g in group)
                conn.send(True, blob, segment)
                for g in group:
                    if g.get("reply") is not None:
                        conn.put(False, reply_portal, g["xid"], bytes(g["reply"]), segment)
                i += len(group)
                continue
            conn.put(True, request_portal, r["xid"], bytes(r["request"]), segment)
            if r.get("reply") is not None:
                conn.put(False, reply_portal, r["xid"], bytes(r["reply"]), segment)
            i += 1
        w.close()


# ------------------------------------------------------------------------------------
# reading: capture files
# ------------------------------------------------------------------------------------

@dataclass
class Packet:
    number: int
    linktype: int
    data: bytes
    truncated: bool


def _pcap_packets(path, f: BinaryIO, head: bytes) -> Iterator[Packet]:
    magic = head[:4]
    if magic in (b"\xd4\xc3\xb2\xa1", b"\x4d\x3c\xb2\xa1"):
        e = "<"
    elif magic in (b"\xa1\xb2\xc3\xd4", b"\xa1\xb2\x3c\x4d"):
        e = ">"
    else:
        raise TraceError(path, None, "not a pcap or pcapng file")
    rest = f.read(20)
    if len(rest) < 20:
        raise TraceError(path, None, "the pcap file header is cut short")
    linktype = struct.unpack(e + "I", rest[16:20])[0] & 0x0FFFFFFF
    n = 0
    while True:
        rh = f.read(16)
        if not rh:
            return
        n += 1
        if len(rh) < 16:
            raise TraceError(path, n, "the capture ends in the middle of a packet record header")
        _, _, incl, orig = struct.unpack(e + "IIII", rh)
        if incl > 1 << 28:
            raise TraceError(path, n, f"packet record claims {incl} bytes: the file is damaged")
        data = f.read(incl)
        if len(data) < incl:
            raise TraceError(path, n, f"the capture ends in the middle of a packet ({len(data)} of {incl} bytes)")
        yield Packet(n, linktype, data, orig > incl)


def _pcapng_packets(path, f: BinaryIO, head: bytes) -> Iterator[Packet]:
    interfaces: list[int] = []
    e = "<"
    n = 0
    block = head
    while True:
        if len(block) < 8:
            if not block:
                return
            raise TraceError(path, n + 1, "the capture ends in the middle of a pcapng block header")
        btype = struct.unpack(e + "I", block[:4])[0]
        if btype == 0x0A0D0D0A:                        # section header: byte order from its magic
            bom = f.read(4)
            if bom == b"\x4d\x3c\x2b\x1a":
                e = "<"
            elif bom == b"\x1a\x2b\x3c\x4d":
                e = ">"
            else:
                raise TraceError(path, None, "pcapng section header with an unknown byte-order magic")
            length = struct.unpack(e + "I", block[4:8])[0]
            if length < 28 or length % 4:
                raise TraceError(path, None, f"pcapng section header of length {length}")
            body = f.read(length - 12)
            if len(body) < length - 12:
                raise TraceError(path, None, "the capture ends in the middle of a pcapng section header")
            interfaces = []
        else:
            length = struct.unpack(e + "I", block[4:8])[0]
            if length < 12 or length % 4 or length > 1 << 28:
                raise TraceError(path, n + 1, f"pcapng block of length {length}: the file is damaged")
            body = f.read(length - 8)
            if len(body) < length - 8:
                raise TraceError(path, n + 1, "the capture ends in the middle of a pcapng block")
            body = body[:-4]
            if btype == 1:                             # interface description
                interfaces.append(struct.unpack(e + "H", body[:2])[0])
            elif btype in (6, 3):                      # enhanced / simple packet
                n += 1
                if btype == 6:
                    iface, _, _, cap, orig = struct.unpack(e + "IIIII", body[:20])
                    data = body[20:20 + cap]
                else:
                    iface, orig = 0, struct.unpack(e + "I", body[:4])[0]
                    cap = min(orig, len(body) - 4)
                    data = body[4:4 + cap]
                if iface >= len(interfaces):
                    raise TraceError(path, n, f"packet on interface {iface}, which the file does not describe")
                yield Packet(n, interfaces[iface], data, orig > cap)
            elif btype == 2:                           # obsolete packet block
                n += 1
                iface, _, _, _, cap, orig = struct.unpack(e + "HHIIII", body[:20])
                if iface >= len(interfaces):
                    raise TraceError(path, n, f"packet on interface {iface}, which the file does not describe")
                yield Packet(n, interfaces[iface], body[20:20 + cap], orig > cap)
        block = f.read(8)


def packets(path: str | os.PathLike) -> Iterator[Packet]:
    """The packets of a pcap or pcapng file, numbered from 1."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise TraceError(path, None, f"cannot open: {e.strerror or e}") from None
    last = 0
    with f:
        head = f.read(4)
        reader = (_pcapng_packets(path, f, head + f.read(4)) if head == b"\x0a\x0d\x0d\x0a"
                  else _pcap_packets(path, f, head))
        try:
            for pkt in reader:
                last = pkt.number
                yield pkt
        except struct.error:
            raise TraceError(path, last + 1, "a block too short for its fields: the file is damaged") from None
        except OSError as e:
            raise TraceError(path, last + 1, f"cannot read: {e.strerror or e}") from None


LINKTYPES = frozenset({1, 113, 276, 0, 108, 101, 12, 14, 228, 229})
_SNAP_CUT = ("the packet was cut short by the capture's snap length; "
             "capture with a larger snap length (tcpdump -s 0)")


def _ports(tcp: bytes) -> tuple[int, int] | None:
    """The TCP source and destination ports at the start of `tcp`, if it holds them."""
    return struct.unpack("!HH", tcp[:4]) if len(tcp) >= 4 else None


def _ip_payload(path, pkt: Packet, port: int = SOCKLND_PORT):
    """(src, dst, tcp bytes) of a TCP/IP packet, or None for anything else.  Packets that
    cannot be read are an error only when they may carry TCP port `port` (unrelated
    traffic, even cut short or fragmented, is skipped); a link type this reader does not
    know is the caller's to skip."""
    d, lt = pkt.data, pkt.linktype
    if lt == 1:                                         # Ethernet
        if len(d) < 14:
            return None
        etype, off = struct.unpack("!H", d[12:14])[0], 14
        while etype in (0x8100, 0x88A8) and len(d) >= off + 4:
            etype, off = struct.unpack("!H", d[off + 2:off + 4])[0], off + 4
    elif lt == 113:                                     # Linux cooked v1
        if len(d) < 16:
            return None
        etype, off = struct.unpack("!H", d[14:16])[0], 16
    elif lt == 276:                                     # Linux cooked v2
        if len(d) < 20:
            return None
        etype, off = struct.unpack("!H", d[0:2])[0], 20
    elif lt in (0, 108):                                # BSD loopback / OpenBSD loop
        if len(d) < 4:
            return None
        fam = struct.unpack("<I" if lt == 0 else "!I", d[:4])[0]
        if lt == 0 and fam > 0xFFFF:
            fam = struct.unpack("!I", d[:4])[0]
        etype, off = (0x0800 if fam == 2 else 0x86DD if fam in (10, 24, 28, 30) else 0), 4
    elif lt in (101, 12, 14, 228, 229):                 # raw IP
        if not d:
            return None
        etype, off = (0x0800 if d[0] >> 4 == 4 else 0x86DD), 0
    else:
        raise TraceError(path, pkt.number, f"link type {lt} is not supported (Ethernet, Linux cooked, "
                                           "loopback or raw IP are)")
    if etype == 0x0800:
        if len(d) < off + 20:
            return None
        vihl = d[off]
        ihl = (vihl & 0x0F) * 4
        total = struct.unpack("!H", d[off + 2:off + 4])[0]
        if d[off + 9] != 6:
            return None
        frag = struct.unpack("!H", d[off + 6:off + 8])[0]
        ports = _ports(d[off + ihl:]) if ihl >= 20 else None
        if frag & 0x3FFF:
            # a later fragment has no TCP header: skipped (if it belongs to socklnd traffic,
            # its first fragment raises here, or the stream has a gap that scan_pcap reports)
            if frag & 0x1FFF or (ports is not None and port not in ports):
                return None
            raise TraceError(path, pkt.number, "a fragmented IPv4 packet carries TCP port "
                                               f"{port}: IP reassembly is not supported")
        src, dst = d[off + 12:off + 16], d[off + 16:off + 20]
        end = off + total if total else len(d)
        if end > len(d):
            if ports is not None and port not in ports:
                return None
            if pkt.truncated:
                raise TraceError(path, pkt.number, _SNAP_CUT)
            raise TraceError(path, pkt.number, f"IPv4 total length {total} exceeds the packet")
        return src, dst, d[off + ihl:end]
    if etype == 0x86DD:
        if len(d) < off + 40:
            return None
        nxt, plen = d[off + 6], struct.unpack("!H", d[off + 4:off + 6])[0]
        if nxt != 6:
            return None
        end = off + 40 + plen
        if end > len(d):
            ports = _ports(d[off + 40:])
            if ports is not None and port not in ports:
                return None
            if pkt.truncated:
                raise TraceError(path, pkt.number, _SNAP_CUT)
            raise TraceError(path, pkt.number, f"IPv6 payload length {plen} exceeds the packet")
        return d[off + 8:off + 24], d[off + 24:off + 40], d[off + 40:end]
    return None


def _addr(raw: bytes) -> str:
    return str(ipaddress.ip_address(raw))


# ------------------------------------------------------------------------------------
# reading: TCP streams and socklnd messages
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


@dataclass
class _Stream:
    """One direction of a TCP connection: reassembly, then socklnd message framing."""
    name: str
    next_seq: int | None = None
    saw_syn: bool = False
    isn: int | None = None                          # the sequence number of its SYN
    pending: dict = field(default_factory=dict)     # seq -> (bytes, packet): segments beyond next_seq
    buf: bytearray = field(default_factory=bytearray)
    flip: bool = False                              # the sender's byte order is big-endian
    version: int | None = None                      # socklnd protocol version from the hello
    started: bool = False                           # some bytes were framed already
    last_packet: int = 0                            # the last packet that carried bytes of it
    closed: bool = False                            # its sender sent FIN or RST

    def add(self, seq: int, data: bytes, packet: int = 0) -> bool:
        """Take a segment; True if new in-order bytes were appended."""
        self.last_packet = packet
        if self.next_seq is None:
            self.next_seq = seq
        rel = (seq - self.next_seq) & 0xFFFFFFFF
        if rel >= 0x80000000:                       # starts before next_seq: a retransmission
            skip = (self.next_seq - seq) & 0xFFFFFFFF
            if skip >= len(data):
                return False
            data, seq, rel = data[skip:], self.next_seq, 0
        if rel:
            old = self.pending.get(seq)
            if old is None or len(old[0]) < len(data):
                self.pending[seq] = (data, packet)
            return False
        self.buf += data
        self.next_seq = (self.next_seq + len(data)) & 0xFFFFFFFF
        while self.pending:                         # segments that now fit
            progressed = False
            for s in list(self.pending):
                r = (s - self.next_seq) & 0xFFFFFFFF
                if r >= 0x80000000 or r == 0:
                    seg = self.pending.pop(s)[0]
                    skip = (self.next_seq - s) & 0xFFFFFFFF
                    if skip < len(seg):
                        self.buf += seg[skip:]
                        self.next_seq = (self.next_seq + len(seg) - skip) & 0xFFFFFFFF
                    progressed = True
            if not progressed:
                break
        return True

    def check_complete(self, path) -> None:
        """Raise TraceError if bytes of the stream are missing (a gap: segments beyond it
        were never joined) or it ends in the middle of a message."""
        if self.pending:
            first = min(self.pending, key=lambda s: (s - self.next_seq) & 0xFFFFFFFF)
            missing = (first - self.next_seq) & 0xFFFFFFFF
            relative = f" (relative seq {(first - self.isn) & 0xFFFFFFFF})" if self.isn is not None else ""
            raise TraceError(path, self.pending[first][1],
                             f"bytes missing before seq {first}{relative} in stream {self.name}: "
                             f"{missing} bytes were not captured (a lost segment), so the messages from "
                             "there on cannot be read")
        if self.buf:
            raise TraceError(path, self.last_packet,
                             f"stream {self.name} ends in the middle of a socklnd message ({len(self.buf)} "
                             "bytes of it captured): the capture stopped, or the connection was cut, "
                             "before the message was whole")


def _u32(b: bytes, off: int, flip: bool = False) -> int:
    return struct.unpack_from(">I" if flip else "<I", b, off)[0]


def _frame(path, stream: _Stream, packet: int) -> Iterator[LnetMessage]:
    """Split the stream's in-order bytes into socklnd messages; keeps an incomplete tail."""
    buf = stream.buf
    pos = 0
    while len(buf) - pos >= 4:
        word = _u32(buf, pos)
        swapped = int.from_bytes(buf[pos:pos + 4], "big")
        if word == LNET_PROTO_ACCEPTOR_MAGIC or swapped == LNET_PROTO_ACCEPTOR_MAGIC:
            if len(buf) - pos < 8:
                break
            version = _u32(buf, pos + 4, swapped == LNET_PROTO_ACCEPTOR_MAGIC)
            size = {1: 16, 2: 28}.get(version)
            if size is None:
                raise TraceError(path, packet, f"{stream.name}: acceptor request of unknown version {version}")
            if len(buf) - pos < size:
                break
            pos += size
        elif word == LNET_PROTO_MAGIC or swapped == LNET_PROTO_MAGIC:
            flip = swapped == LNET_PROTO_MAGIC
            if len(buf) - pos < 8:
                break
            version = _u32(buf, pos + 4, flip)
            base = {2: 56, 3: 56, 4: 80}.get(version)
            if base is None:
                raise TraceError(path, packet, f"{stream.name}: socklnd hello of unknown protocol version {version}")
            if len(buf) - pos < base:
                break
            nips = _u32(buf, pos + base - 4, flip)
            if nips > 1024:
                raise TraceError(path, packet, f"{stream.name}: socklnd hello lists {nips} addresses")
            if len(buf) - pos < base + 4 * nips:
                break
            stream.flip, stream.version = flip, version
            pos += base + 4 * nips
        elif word == LNET_PROTO_TCP_MAGIC:
            raise TraceError(path, packet, f"{stream.name}: socklnd protocol version 1 is not supported")
        else:
            ktype = _u32(buf, pos, stream.flip)
            if ktype == KSOCK_MSG_NOOP:
                if len(buf) - pos < KSOCK_HDR_SIZE:
                    break
                pos += KSOCK_HDR_SIZE
            elif ktype == KSOCK_MSG_LNET:
                wide = stream.version == 4
                hsize = LNET_HDR_NID16_SIZE if wide else LNET_HDR_NID4_SIZE
                start = pos + KSOCK_HDR_SIZE
                if len(buf) - start < hsize:
                    break
                plen_at = start + (52 if wide else 28)
                plen = _u32(buf, plen_at)
                if plen > MAX_PAYLOAD:
                    raise TraceError(path, packet, f"{stream.name}: LNet payload_length {plen} is implausible")
                if len(buf) - start < hsize + plen:
                    break
                h = bytes(buf[start:start + hsize])
                if wide:
                    dst, src = _nid16_str(h[0:20]), _nid16_str(h[20:40])
                    m = 40
                else:
                    dst, src = nid_str(struct.unpack_from("<Q", h, 0)[0]), nid_str(struct.unpack_from("<Q", h, 8)[0])
                    m = 16
                mtype = _u32(h, m + 8)
                var = m + 16                                 # the message-type variant
                portal = mbits = offset = None
                if mtype == LNET_MSG_PUT:
                    mbits = struct.unpack_from("<Q", h, var + 16)[0]
                    portal, offset = struct.unpack_from("<II", h, var + 32)
                payload = bytes(buf[start + hsize:start + hsize + plen])
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


@dataclass
class Trace:
    """What `scan_pcap` found: the records, what it could not pair, how many socklnd
    messages it read, and how many server-initiated requests (LDLM callbacks) it set aside."""
    records: list[dict]
    orphan_replies: list[LnetMessage]
    messages: int
    callbacks: int = 0


def scan_pcap(path: str | os.PathLike, port: int = SOCKLND_PORT) -> Trace:
    """Every PtlRPC exchange of a capture, and the replies it could not pair (see
    `read_pcap`, which refuses a capture with such replies).  Raises TraceError on input it
    cannot read, on bytes missing from a stream and on a stream that ends mid-message."""
    streams: dict[tuple, _Stream] = {}
    records: list[dict] = []
    latest: dict[tuple, dict] = {}
    orphans: list[LnetMessage] = []
    count = callbacks = 0
    unsupported: dict[int, int] = {}               # link type -> its first packet
    seen_port = False
    for pkt in packets(path):
        if pkt.linktype not in LINKTYPES:
            unsupported.setdefault(pkt.linktype, pkt.number)
            continue
        got = _ip_payload(path, pkt, port)
        if got is None:
            continue
        src, dst, tcp = got
        ports = _ports(tcp)
        if ports is None or port not in ports:
            continue
        seen_port = True
        if len(tcp) < 20:
            raise TraceError(path, pkt.number, f"a TCP segment of {len(tcp)} bytes, shorter than its header")
        sport, dport = ports
        seq = struct.unpack("!I", tcp[4:8])[0]
        hlen = (tcp[12] >> 4) * 4
        flags = tcp[13]
        if hlen < 20 or hlen > len(tcp):
            raise TraceError(path, pkt.number, f"TCP header length {hlen} does not fit the segment")
        key = (src, sport, dst, dport)
        stream = streams.get(key)
        if flags & _TCP_SYN:
            # a SYN with another ISN than the stream's (or on a stream that was closed, or
            # began without a SYN and carried bytes) opens a new connection on the same
            # addresses and ports; a SYN with the same ISN is a retransmission
            if stream is not None and (stream.closed or (stream.isn != seq if stream.isn is not None
                                                         else stream.next_seq is not None)):
                stream.check_complete(path)
                stream = None
            if stream is None:
                stream = streams[key] = _Stream(f"TCP {_addr(src)}:{sport} -> {_addr(dst)}:{dport}")
            if stream.isn is None:
                stream.isn, stream.saw_syn = seq, True
                stream.next_seq = (seq + 1) & 0xFFFFFFFF
            seq = (seq + 1) & 0xFFFFFFFF
        elif stream is None:
            stream = streams[key] = _Stream(f"TCP {_addr(src)}:{sport} -> {_addr(dst)}:{dport}")
        if flags & (_TCP_FIN | _TCP_RST):
            stream.closed = True
        payload = tcp[hlen:]
        if not payload:
            continue
        if pkt.truncated:
            raise TraceError(path, pkt.number, _SNAP_CUT)
        if not stream.add(seq, payload, pkt.number):
            continue
        for m in _frame(path, stream, pkt.number):
            count += 1
            if m.type != LNET_MSG_PUT or m.portal in BULK_PORTALS:
                continue
            if m.portal in REPLY_PORTALS:
                rec = latest.get((m.dst_nid, m.src_nid, m.match_bits))
                if rec is None:
                    orphans.append(m)
                else:
                    rec["reply"] = m.payload
            else:
                rec = {"client": m.src_nid, "xid": m.match_bits, "request": m.payload, "reply": None,
                       "packet": m.packet}
                if m.portal in SERVER_REQUEST_PORTALS:
                    callbacks += 1            # the server asks a client: paired, not a record
                else:
                    records.append(rec)
                latest[(m.src_nid, m.dst_nid, m.match_bits)] = rec
    for stream in streams.values():
        stream.check_complete(path)
    if unsupported and not seen_port:
        lt, first = min(unsupported.items(), key=lambda kv: kv[1])
        raise TraceError(path, first, f"link type {lt} is not supported (Ethernet, Linux cooked, loopback or "
                                      f"raw IP are), and no packet of a supported link type carries TCP port {port}")
    return Trace(records, orphans, count, callbacks)


def read_pcap(path: str | os.PathLike) -> list[dict]:
    """The PtlRPC requests of a capture, each with its reply: a list of
    {"client": NID, "xid": int, "request": bytes, "reply": bytes | None, "packet": int} in
    capture order (`packet`: the number of the packet that completed the request, counting
    from 1 as Wireshark does).  Requests a server sends a client (LDLM callbacks on portal
    15) are not records: the target rules judge what a target answers, not what it asks.
    Raises TraceError (a ValueError) naming the file and packet on input it cannot read, on
    bytes missing from a stream, on a stream that ends mid-message, and on a reply whose
    request is not in the capture (so no exchange is ever silently lost)."""
    trace = scan_pcap(path)
    if trace.orphan_replies:
        m = trace.orphan_replies[0]
        more = len(trace.orphan_replies) - 1
        raise TraceError(path, m.packet, f"a reply from {m.src_nid} to {m.dst_nid} (portal {m.portal}, match bits "
                                         f"{m.match_bits}) answers no request in the capture"
                                         + (f" ({more} more such replies)" if more else "")
                                         + ": the capture started after the request was sent, or lost it")
    return trace.records
