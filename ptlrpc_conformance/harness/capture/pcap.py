"""pcap and pcapng captures of LNet over TCP: a writer, and a reader that reassembles TCP streams
and hands them to the socklnd framing (`socklnd.py`).

Reading (`read_pcap`): classic pcap or pcapng; Ethernet (VLAN tags too), Linux cooked (v1 and
v2), BSD loopback and raw IPv4/IPv6 link types; TCP streams to or from port 988 are
reassembled (segments out of order, retransmitted or overlapping; several messages per
segment; one message over many segments), then split into socklnd messages.  Each LNet PUT
is classified by its portal: a reply portal makes it a reply, a bulk portal (8, 14, 33) is
bulk data and skipped, any other portal a request.  A reply pairs with the latest request of
the same client (its source NID), server and match bits; an early reply (a PUT at offset 0 to a
request that asked for adaptive timeouts: `early_reply`) is not its reply, and leaves it in
flight until the final one comes; when several replies answer one request, the last one is kept.  Records
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
packed several to a segment.  A `TcpConnection` between IPv6 addresses (what the LNet pcap
tap records of an IPv6 connection) writes IPv6 frames.
"""
from __future__ import annotations

import ipaddress
import os
import struct
from dataclasses import dataclass, field
from typing import BinaryIO, Iterable, Iterator

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.capture.socklnd import (
    BULK_PORTALS, LNET_MSG_PUT, LnetMessage, OSC_REPLY_PORTAL, OST_REQUEST_PORTAL,
    REPLY_PORTALS, SERVER_REQUEST_PORTALS, SOCKLND_PORT, TraceError, acceptor_connreq,
    frame, ksock_hello, ksock_lnet_put, make_nid, parse_nid)

MSS = 65483                      # Linux loopback MSS with TCP timestamps (MTU 65536)
_HDR = spec.layout("lustre_msg_v2")
_MSG_MAGIC = spec.constant("LUSTRE_MSG_MAGIC_V2")
_AT_SUPPORT = spec.constant("MSGHDR_AT_SUPPORT")


def round8(n: int) -> int:
    return (n + 7) & ~7


def msg_order(data: bytes) -> str | None:
    """The byte order of a lustre_msg_v2 header, told by lm_magic; None when `data` is no such
    header (too short for one, or another magic)."""
    magic = _HDR.field("lm_magic")
    if len(data) < _HDR.field("lm_buflens").offset:
        return None
    return next((o for o in ("little", "big") if int.from_bytes(data[magic.offset:magic.end], o) == _MSG_MAGIC), None)


# pack_generic.c: lustre_msg_early_size: the header with one buffer, then a ptlrpc_body
EARLY_SIZE = (round8(_HDR.field("lm_buflens").offset + _HDR.field("lm_buflens").elem_size)
              + round8(spec.layout("ptlrpc_body_v3").size))


def reply_offset(request: bytes) -> int:
    """Where the final reply to `request` goes: lustre_msg_early_size when its lm_flags hold
    MSGHDR_AT_SUPPORT (read in the sender's byte order, told by lm_magic), else 0
    (sec_null.c: null_authorize); a server's early replies go to offset 0
    (service.c: ptlrpc_at_send_early_reply), and the client tells them apart by the offset
    alone (events.c: reply_in_callback).  A message too short or of another magic: 0."""
    flags, order = _HDR.field("lm_flags"), msg_order(request)
    if order is None:
        return 0
    return EARLY_SIZE if int.from_bytes(request[flags.offset:flags.end], order) & _AT_SUPPORT else 0
_TCP_FIN, _TCP_SYN, _TCP_RST, _TCP_PSH, _TCP_ACK = 0x01, 0x02, 0x04, 0x08, 0x10
_BASE_TIME = 1_767_225_600       # 2026-01-01T00:00:00Z: fixed, so the same input gives the same file


# ------------------------------------------------------------------------------------
# checksums
# ------------------------------------------------------------------------------------

def _ones_sum(data: bytes) -> int:
    """The 16-bit one's complement sum of `data` (big-endian words), not yet inverted."""
    # the words as one big-endian number: 2**16 is 1 modulo 0xFFFF, so the number modulo
    # 0xFFFF is their sum folded (0 for a sum that folds to 0xFFFF, told apart by data not zero)
    value = int.from_bytes(data + b"\0" if len(data) & 1 else data, "big")
    return value % 0xFFFF or (0xFFFF if value else 0)


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

    def __init__(self, writer: "PcapWriter", client_ip: str, client_port: int, index: int,
                 server_ip: str | None = None, server_port: int = SOCKLND_PORT):
        self.w = writer
        self.client_ip, self.client_port, self.server_port = client_ip, client_port, server_port
        self.server_ip = server_ip or writer.server_ip
        client_a, server_a = ipaddress.ip_address(client_ip), ipaddress.ip_address(self.server_ip)
        if client_a.version != server_a.version:
            raise ValueError(f"a TCP connection from {client_ip} to {self.server_ip}: one IPv4 and one IPv6")
        self.ipv6 = client_a.version == 6       # its frames IPv6 (what the tap records); no NIDs then:
        self.client_nid = None if self.ipv6 else make_nid(client_ip)       # handshake(hello=True) and put()
        self.server_nid = None if self.ipv6 else make_nid(self.server_ip)  # write nid4 hellos only
        self.seq = {True: (0x10000000 * (index + 1) + 0x1234) & 0xFFFFFFFF,    # client's next seq
                    False: (0x80000000 + 0x01000000 * index + 0x4321) & 0xFFFFFFFF}
        self.ipid = {True: 1, False: 1}
        self.closed = False
        client_b, server_b = client_a.packed, server_a.packed
        self._ends = {True: (client_b, server_b, client_port, server_port),     # by from_client:
                      False: (server_b, client_b, server_port, client_port)}   # src, dst, sport, dport

    def _segment(self, from_client: bool, flags: int, payload: bytes = b"") -> int:
        w = self.w
        src_b, dst_b, sport, dport = self._ends[from_client]
        seq, ack = self.seq[from_client], self.seq[not from_client]
        tcp = struct.pack("!HHIIBBHHH", sport, dport, seq, ack if flags & _TCP_ACK else 0, 5 << 4, flags,
                          65535, 0, 0)
        if self.ipv6:       # RFC 8200 §8.1: the pseudo-header's length is 32 bits, then 3 zero bytes
            pseudo = src_b + dst_b + struct.pack("!IxxxB", len(tcp) + len(payload), 6)
        else:
            pseudo = src_b + dst_b + struct.pack("!BBH", 0, 6, len(tcp) + len(payload))
        csum = internet_checksum(pseudo, tcp, payload)
        tcp = tcp[:16] + struct.pack("!H", csum) + tcp[18:]
        if self.ipv6:       # version 6, no traffic class or flow label, next header TCP, hop limit 64
            ip = struct.pack("!IHBB16s16s", 6 << 28, len(tcp) + len(payload), 6, 64, src_b, dst_b)
            ether = b"\0" * 12 + b"\x86\xdd"
        else:
            total = 20 + len(tcp) + len(payload)
            ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, total, self.ipid[from_client], 0x4000, 64, 6, 0, src_b, dst_b)
            ip = ip[:10] + struct.pack("!H", internet_checksum(ip)) + ip[12:]
            self.ipid[from_client] = (self.ipid[from_client] + 1) & 0xFFFF
            ether = b"\0" * 12 + b"\x08\x00"
        advance = len(payload) + (1 if flags & (_TCP_SYN | _TCP_FIN) else 0)
        self.seq[from_client] = (seq + advance) & 0xFFFFFFFF
        return w._record(ether + ip + tcp + payload)

    def handshake(self, hello: bool = True) -> None:
        self._segment(True, _TCP_SYN)
        self._segment(False, _TCP_SYN | _TCP_ACK)
        self._segment(True, _TCP_ACK)
        if hello:
            w = self.w
            self.send(True, acceptor_connreq(self.server_nid))
            self.send(True, ksock_hello(self.client_nid, self.server_nid, w.incarnation(self.client_nid), 0))
            self.send(False, ksock_hello(self.server_nid, self.client_nid, w.incarnation(self.server_nid),
                                         w.incarnation(self.client_nid)))

    def send(self, from_client: bool, data: bytes, segment: int | None = None) -> list[int]:
        """Write `data` as the next bytes of one direction, in segments of at most `segment`
        bytes (default the MSS); returns the packet numbers written."""
        size = max(1, min(segment or MSS, MSS))
        return [self._segment(from_client, _TCP_PSH | _TCP_ACK, data[i:i + size])
                for i in range(0, len(data), size)] if data else []

    def put(self, from_client: bool, portal: int, match_bits: int, payload: bytes,
            segment: int | None = None, offset: int = 0) -> list[int]:
        src, dst = (self.client_nid, self.server_nid) if from_client else (self.server_nid, self.client_nid)
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

    def connection(self, client_ip: str, hello: bool = True, server_ip: str | None = None) -> TcpConnection:
        """The connection of the client at `client_ip` to the server at `server_ip` (default
        the writer's), opened (handshake, acceptor request, hellos) the first time it is
        asked for."""
        server_ip = server_ip or self.server_ip
        conn = self.connections.get((client_ip, server_ip))
        if conn is None:
            index = len(self.connections)
            conn = TcpConnection(self, client_ip, 1023 - index % 512, index, server_ip)
            self.connections[(client_ip, server_ip)] = conn
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


def _server_ip(server) -> str | None:
    if server is None:
        return None
    try:
        return str(ipaddress.IPv4Address(parse_nid(server) & 0xFFFFFFFF))
    except ValueError:
        return str(ipaddress.IPv4Address(server))


def write_pcap(path: str | os.PathLike, records: Iterable[dict], *, segment: int | None = None,
               coalesce: bool = False, request_portal: int = OST_REQUEST_PORTAL,
               reply_portal: int = OSC_REPLY_PORTAL) -> None:
    """Write records of `read_pcap`'s shape ({client, xid, request, reply}) as a capture:
    each request a PUT from the client on `request_portal`, its reply (unless None) a PUT
    back on `reply_portal`, both with match bits `xid`.  `segment` splits every message into
    TCP segments of at most that many bytes; `coalesce` sends each request together with
    the next records' requests of the same client in one write (several messages per
    segment) when they are consecutive for that client.  A client named by a NID or an IPv4
    address uses that address; other names get 127.0.0.2, 127.0.0.3, ...

    A record may also say where it goes and when it is answered: `server` (a NID or IPv4
    address; default 127.0.0.1), `portal` and `reply_portal` (its own portals), and
    `reply_after` N (its reply is written after the requests of the next N records: several
    requests in flight, answered out of order: after those records and their own replies),
    and `reply_bits` (the match bits of its reply, when not the XID: a 2.15+ server's reply
    on the request's pb_mbits)."""
    records = list(records)
    names: dict[str, str] = {}
    pending: list[list] = []            # [records still to go, connection, portal, xid, reply]

    def flush(force: bool = False) -> None:
        for p in list(pending):
            if force or p[0] <= 0:
                pending.remove(p)
                p[1].put(False, p[2], p[3], bytes(p[4]), segment, offset=p[5])

    with open(path, "wb") as f:
        w = PcapWriter(f)
        i = 0
        while i < len(records):
            r = records[i]
            conn = w.connection(_client_ip(r["client"], names), server_ip=_server_ip(r.get("server")))
            if coalesce:
                group = [r]
                while (i + len(group) < len(records) and records[i + len(group)]["client"] == r["client"]
                       and records[i + len(group)].get("server") == r.get("server")
                       and group[-1].get("reply") is None):
                    group.append(records[i + len(group)])
                blob = b"".join(ksock_lnet_put(conn.client_nid, conn.server_nid, g.get("portal", request_portal),
                                               g["xid"], bytes(g["request"])) for g in group)
                conn.send(True, blob, segment)
                for g in group:
                    if g.get("reply") is not None:
                        conn.put(False, g.get("reply_portal", reply_portal), g.get("reply_bits", g["xid"]),
                                 bytes(g["reply"]), segment, offset=reply_offset(bytes(g["request"])))
                i += len(group)
                continue
            conn.put(True, r.get("portal", request_portal), r["xid"], bytes(r["request"]), segment)
            for p in pending:
                p[0] -= 1
            if r.get("reply") is not None:
                if r.get("reply_after", 0) > 0:
                    pending.append([r["reply_after"], conn, r.get("reply_portal", reply_portal),
                                    r.get("reply_bits", r["xid"]), r["reply"], reply_offset(bytes(r["request"]))])
                else:
                    conn.put(False, r.get("reply_portal", reply_portal), r.get("reply_bits", r["xid"]),
                             bytes(r["reply"]), segment, offset=reply_offset(bytes(r["request"])))
            flush()                     # the earlier replies now due come after this record's
            i += 1
        flush(force=True)
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



@dataclass
class Trace:
    """What `scan_pcap` found: the records, what it could not pair, how many socklnd
    messages it read, and how many server-initiated requests (LDLM callbacks) it set aside."""
    records: list[dict]
    orphan_replies: list[LnetMessage]
    messages: int
    callbacks: int = 0


def early_reply(request: bytes, put: LnetMessage) -> bool:
    """A reply PUT that is an early reply, not the reply: one at offset 0 to a request whose
    final reply goes elsewhere (reply_offset: it asked for adaptive timeouts)."""
    return not put.offset and reply_offset(request) != 0


def scan_pcap(path: str | os.PathLike, port: int = SOCKLND_PORT, reply_bits=None, seen=None) -> Trace:
    """Every PtlRPC exchange of a capture, and the replies it could not pair (see
    `read_pcap`, which refuses a capture with such replies).  `reply_bits(request payload)`:
    the other match bits its reply may be sent with (a 2.15+ server replies on the request's
    pb_mbits, LU-14594), or None; a reply is paired on its request's XID first, then on
    those.  `seen(piece)`: told of every socklnd structure framed (socklnd.frame).  Raises
    TraceError on input it cannot read, on bytes missing from a stream and on a stream that
    ends mid-message."""
    streams: dict[tuple, _Stream] = {}
    records: list[dict] = []
    latest: dict[tuple, dict] = {}
    by_reply_bits: dict[tuple, dict] = {}
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
        for m in frame(path, stream, pkt.number, seen):
            count += 1
            if m.type != LNET_MSG_PUT or m.portal in BULK_PORTALS:
                continue
            if m.portal in REPLY_PORTALS:
                key = (m.dst_nid, m.src_nid, m.match_bits)
                rec = latest.get(key) or by_reply_bits.get(key)
                if rec is None:
                    orphans.append(m)
                elif early_reply(rec["request"], m):
                    continue                  # the request is still in flight: its reply may follow
                else:
                    rec["reply"] = m.payload
                    rec["reply_packet"] = m.packet
            else:
                rec = {"client": m.src_nid, "xid": m.match_bits, "request": m.payload, "reply": None,
                       "packet": m.packet, "server": m.dst_nid, "portal": m.portal}
                if m.portal in SERVER_REQUEST_PORTALS:
                    callbacks += 1            # the server asks a client: paired, not a record
                else:
                    records.append(rec)
                latest[(m.src_nid, m.dst_nid, m.match_bits)] = rec
                bits = reply_bits(m.payload) if reply_bits else None
                if bits is not None and bits != m.match_bits:
                    by_reply_bits[(m.src_nid, m.dst_nid, bits)] = rec
    for stream in streams.values():
        stream.check_complete(path)
    if unsupported and not seen_port:
        lt, first = min(unsupported.items(), key=lambda kv: kv[1])
        raise TraceError(path, first, f"link type {lt} is not supported (Ethernet, Linux cooked, loopback or "
                                      f"raw IP are), and no packet of a supported link type carries TCP port {port}")
    return Trace(records, orphans, count, callbacks)


def read_pcap(path: str | os.PathLike, reply_bits=None) -> list[dict]:
    """The PtlRPC requests of a capture, each with its reply: a list of
    {"client": NID, "xid": int, "request": bytes, "reply": bytes | None, "packet": int,
    "server": NID, "portal": int, "reply_packet": int (with a reply)} in capture order
    (`packet`: the number of the packet that completed the request, counting from 1 as
    Wireshark does; `reply_packet` the same for its reply; `portal` the request portal).  Requests a server sends a client (LDLM callbacks on portal
    15) are not records: the target rules judge what a target answers, not what it asks.
    Raises TraceError (a ValueError) naming the file and packet on input it cannot read, on
    bytes missing from a stream, on a stream that ends mid-message, and on a reply whose
    request is not in the capture (so no exchange is ever silently lost).  `reply_bits`:
    as for `scan_pcap`."""
    trace = scan_pcap(path, reply_bits=reply_bits)
    if trace.orphan_replies:
        m = trace.orphan_replies[0]
        more = len(trace.orphan_replies) - 1
        raise TraceError(path, m.packet, f"a reply from {m.src_nid} to {m.dst_nid} (portal {m.portal}, match bits "
                                         f"{m.match_bits}) answers no request in the capture"
                                         + (f" ({more} more such replies)" if more else "")
                                         + ": the capture started after the request was sent, or lost it")
    return trace.records
