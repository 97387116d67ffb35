"""harness/capture/pcap.py: LNet over TCP (socklnd) captures, written and read back."""
import io
import random
import struct
import subprocess

import pytest

from ptlrpc_conformance.harness.capture import pcap, socklnd
from ptlrpc_conformance.harness.data.vectors import load_all


def _messages():
    vs = [v for v in load_all() if v.op == "decode" and v.data]
    small = [v.data for v in vs if len(v.data) <= 600]
    big = next(v.data for v in vs if len(v.data) > 1_000_000)
    return small, big


SMALL, BIG = _messages()


def _records():
    return [
        {"client": "127.0.0.2@tcp", "xid": 1, "request": SMALL[0], "reply": SMALL[1]},
        {"client": "127.0.0.3@tcp", "xid": 1, "request": SMALL[2], "reply": None},       # same xid, other client
        {"client": "127.0.0.2@tcp", "xid": 2, "request": SMALL[3], "reply": SMALL[4]},
        {"client": "127.0.0.4@tcp", "xid": 0xFFFFFFFFFFFFFFFF, "request": BIG, "reply": SMALL[5]},
        {"client": "127.0.0.3@tcp", "xid": 7, "request": b"", "reply": b""},              # empty messages
        {"client": "127.0.0.2@tcp", "xid": 3, "request": SMALL[6], "reply": None},
    ]


CAPTURE_KEYS = ("packet", "reply_packet", "server", "portal")


def _strip(records):
    """Records without what the capture adds — packet numbers, the server and the portal
    (compared apart, where a test is about them)."""
    return [{k: v for k, v in r.items() if k not in CAPTURE_KEYS} for r in records]


def _read(path):
    return _strip(pcap.read_pcap(path))


def _rewrite(src, dst, transform, linktype=None):
    """Copy a classic pcap, passing the list of (header, frame) records through `transform`."""
    data = open(src, "rb").read()
    head, pos, recs = data[:24], 24, []
    while pos < len(data):
        incl = struct.unpack_from("<I", data, pos + 8)[0]
        recs.append((data[pos:pos + 16], data[pos + 16:pos + 16 + incl]))
        pos += 16 + incl
    recs = transform(recs)
    if linktype is not None:
        head = head[:20] + struct.pack("<I", linktype)
    with open(dst, "wb") as f:
        f.write(head)
        for h, frame in recs:
            f.write(h[:8] + struct.pack("<II", len(frame), len(frame)) + frame)


@pytest.mark.parametrize("segment,coalesce", [(None, False), (100, False), (7, False), (None, True), (50, True)])
def test_round_trip(tmp_path, segment, coalesce):
    """Whole, split (down to 7-byte segments) and packed several to a segment, several clients."""
    path = tmp_path / "t.pcap"
    recs = _records()
    if segment == 7:        # keep the 7-byte case fast
        recs = [dict(r, request=r["request"][:3000]) for r in recs]
    pcap.write_pcap(path, recs, segment=segment, coalesce=coalesce)
    assert _read(path) == recs


def test_coalesced_requests_share_segments(tmp_path):
    path = tmp_path / "t.pcap"
    recs = [{"client": "127.0.0.2@tcp", "xid": i, "request": SMALL[i], "reply": None} for i in range(5)]
    pcap.write_pcap(path, recs, coalesce=True)
    data_packets = [p for p in pcap.packets(path) if len(p.data) > 54]
    # connreq, two hellos, then one segment holding all five requests
    assert len(data_packets) == 4
    assert _read(path) == recs


def test_clients_by_name_get_their_own_connection(tmp_path):
    path = tmp_path / "t.pcap"
    recs = [{"client": name, "xid": 5, "request": SMALL[0], "reply": SMALL[1]} for name in ("c1", "c2", "10.1.2.3")]
    pcap.write_pcap(path, recs)
    got = pcap.read_pcap(path)
    assert [r["client"] for r in got] == ["127.0.0.2@tcp", "127.0.0.3@tcp", "10.1.2.3@tcp"]
    assert [(r["xid"], r["request"], r["reply"]) for r in got] == [(5, SMALL[0], SMALL[1])] * 3


def test_reordered_retransmitted_and_overlapping_segments(tmp_path):
    src, dst = tmp_path / "a.pcap", tmp_path / "b.pcap"
    recs = _records()[:3]
    pcap.write_pcap(src, recs, segment=40)

    def shuffle(packets):
        head, data = packets[:12], packets[12:]   # handshakes and hellos of the first connections stay
        rng = random.Random(5)
        out = []
        for i in range(0, len(data), 4):         # reorder within windows of 4, duplicate some
            window = data[i:i + 4]
            rng.shuffle(window)
            out += window + ([window[0]] if i % 8 == 0 else [])
        return head + out
    _rewrite(src, dst, shuffle)
    assert _read(dst) == recs


def test_overlapping_retransmission_with_new_bytes(tmp_path):
    """A retransmitted segment that starts before the next expected byte and carries more."""
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    conn = w.connection("127.0.0.2")
    msg = socklnd.ksock_lnet_put(conn.client_nid, w.server_nid, 28, 9, SMALL[0])
    start = conn.seq[True]
    conn.send(True, msg[:60])
    conn.seq[True] = (start + 30) & 0xFFFFFFFF      # resend from byte 30, now to the end
    conn.send(True, msg[30:])
    path = tmp_path / "t.pcap"
    path.write_bytes(buf.getvalue())
    assert _read(path) == [{"client": "127.0.0.2@tcp", "xid": 9, "request": SMALL[0], "reply": None}]


def test_early_reply_then_real_reply_keeps_the_last(tmp_path):
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    c = w.connection("127.0.0.2")
    c.put(True, 28, 77, SMALL[0])
    c.put(False, 4, 77, SMALL[1])              # early reply
    c.put(False, 4, 77, SMALL[2], offset=512)  # the real one
    c.put(False, 4, 78, SMALL[3])              # a reply whose request is not in the capture
    c.put(True, 8, 77, b"bulk bytes")          # bulk portal: no PtlRPC message
    w.close()
    path = tmp_path / "t.pcap"
    path.write_bytes(buf.getvalue())
    trace = pcap.scan_pcap(path)
    assert _strip(trace.records) == [{"client": "127.0.0.2@tcp", "xid": 77, "request": SMALL[0], "reply": SMALL[2]}]
    assert [(m.match_bits, m.payload) for m in trace.orphan_replies] == [(78, SMALL[3])]
    assert trace.messages == 5


def _at_request() -> bytes:
    """A request whose lm_flags ask for adaptive timeouts (its final reply goes at
    lustre_msg_early_size, its early replies at 0)."""
    from ptlrpc_conformance.harness.ost.client import Client
    return Client("at", handle=7).request("OST_PUNCH")[1]


def test_an_early_reply_alone_leaves_its_request_in_flight(tmp_path):
    """An early reply (offset 0) to a request that asked for adaptive timeouts is not its
    reply: a capture that ends before the final one has the request in flight, and
    check-trace does not judge the early reply's transno 0 as the reply's (TGT-TRANSNO-2
    against a real OST whose punch was slow, found by a review of reply_in_callback)."""
    request = _at_request()
    assert pcap.reply_offset(request) == pcap.EARLY_SIZE
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    c = w.connection("127.0.0.2")
    c.put(True, 28, 9, request)
    c.put(False, 4, 9, SMALL[1])                            # early, at offset 0
    w.close()
    path = tmp_path / "t.pcap"
    path.write_bytes(buf.getvalue())
    assert [r["reply"] for r in pcap.read_pcap(path)] == [None]
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    c = w.connection("127.0.0.2")
    c.put(True, 28, 9, request)
    c.put(False, 4, 9, SMALL[1])                            # early
    c.put(False, 4, 9, SMALL[2], offset=pcap.EARLY_SIZE)    # final
    c.put(False, 4, 9, SMALL[3])                            # an early reply after it changes nothing
    w.close()
    path.write_bytes(buf.getvalue())
    assert [r["reply"] for r in pcap.read_pcap(path)] == [SMALL[2]]
    # the writer puts a final reply where a server does, so what it writes reads back
    pcap.write_pcap(path, [{"client": "127.0.0.2@tcp", "xid": 9, "request": request, "reply": SMALL[2]}])
    assert [r["reply"] for r in pcap.read_pcap(path)] == [SMALL[2]]


def test_resent_request_pairs_with_the_reply_after_it(tmp_path):
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    c = w.connection("127.0.0.2")
    c.put(True, 28, 5, SMALL[0])
    c.put(True, 28, 5, SMALL[1])     # resent, no reply to the first
    c.put(False, 4, 5, SMALL[2])
    path = tmp_path / "t.pcap"
    path.write_bytes(buf.getvalue())
    assert [r["reply"] for r in pcap.read_pcap(path)] == [None, SMALL[2]]


def test_big_endian_sender_and_noop(tmp_path):
    """A hello whose magic is byte-swapped makes the ksock header big-endian; the LNet header
    stays little-endian.  NOOP messages are skipped."""
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    c = w.connection("127.0.0.2", hello=False)
    c.send(True, socklnd.acceptor_connreq(w.server_nid))
    c.send(True, struct.pack(">IIQQIIQQII", socklnd.LNET_PROTO_MAGIC, 3, c.client_nid, w.server_nid,
                             12345, 12345, 1, 0, 0, 1) + b"\x7f\0\0\2")      # one (deprecated) address
    le = socklnd.ksock_lnet_put(c.client_nid, w.server_nid, 28, 11, SMALL[0])
    be = struct.pack(">IIQQ", socklnd.KSOCK_MSG_LNET, 0, 0, 0) + le[24:]
    c.send(True, struct.pack(">IIQQ", socklnd.KSOCK_MSG_NOOP, 0, 0, 0) + be, segment=33)
    path = tmp_path / "t.pcap"
    path.write_bytes(buf.getvalue())
    assert _read(path) == [{"client": "127.0.0.2@tcp", "xid": 11, "request": SMALL[0], "reply": None}]


def test_protocol_v4_wide_nids(tmp_path):
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    c = w.connection("127.0.0.2", hello=False)

    def nid16(ip):
        return bytes([0, socklnd.SOCKLND]) + b"\0\0" + bytes(map(int, ip.split("."))) + bytes(12)
    c.send(True, struct.pack("<II", socklnd.LNET_PROTO_MAGIC, 4) + nid16("127.0.0.2") + nid16("127.0.0.1")
           + struct.pack("<IIQQII", 12345, 12345, 1, 0, 0, 0))
    hdr = (nid16("127.0.0.1") + nid16("127.0.0.2") + struct.pack("<IIII", 12345, 12345, 1, len(SMALL[0]))
           + struct.pack("<QQQQII", ~0 & (2**64 - 1), ~0 & (2**64 - 1), 21, 0, 28, 0))
    assert len(hdr) == socklnd.LNET_HDR_NID16_SIZE
    c.send(True, struct.pack("<IIQQ", socklnd.KSOCK_MSG_LNET, 0, 0, 0) + hdr + SMALL[0])
    path = tmp_path / "t.pcap"
    path.write_bytes(buf.getvalue())
    assert _read(path) == [{"client": "127.0.0.2@tcp", "xid": 21, "request": SMALL[0], "reply": None}]


def _pcapng(src, dst):
    """The same packets as pcapng: section header, one interface, enhanced packet blocks."""
    def block(btype, body):
        body += b"\0" * (-len(body) % 4)
        n = len(body) + 12
        return struct.pack("<II", btype, n) + body + struct.pack("<I", n)
    out = block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
    out += block(1, struct.pack("<HHI", 1, 0, 262144))
    for p in pcap.packets(src):
        out += block(6, struct.pack("<IIIII", 0, 0, p.number, len(p.data), len(p.data)) + p.data)
    open(dst, "wb").write(out)


def test_pcapng_and_raw_ip(tmp_path):
    src = tmp_path / "a.pcap"
    recs = _records()[:3]
    pcap.write_pcap(src, recs, segment=300)
    _pcapng(src, tmp_path / "b.pcapng")
    assert _read(tmp_path / "b.pcapng") == recs
    _rewrite(src, tmp_path / "c.pcap", lambda rs: [(h, f[14:]) for h, f in rs], linktype=228)
    assert _read(tmp_path / "c.pcap") == recs


def test_other_traffic_is_ignored(tmp_path):
    src, dst = tmp_path / "a.pcap", tmp_path / "b.pcap"
    recs = _records()[:2]
    pcap.write_pcap(src, recs)

    def add_noise(rs):
        h, f = rs[5]
        ip = bytearray(f)
        ip[14 + 20:14 + 22] = struct.pack("!H", 2049)     # source port 2049 -> not socklnd
        ip[14 + 22:14 + 24] = struct.pack("!H", 2050)
        arp = b"\xff" * 6 + b"\0" * 6 + b"\x08\x06" + bytes(28)
        return rs[:3] + [(h, bytes(ip)), (h, arp)] + rs[3:]
    _rewrite(src, dst, add_noise)
    assert _read(dst) == recs


# ------------------------------------------------------------------------------------
# bad input: a TraceError (ValueError) naming the file and the packet
# ------------------------------------------------------------------------------------

def test_not_a_capture(tmp_path):
    p = tmp_path / "x.pcap"
    p.write_text("hello, world\n")
    with pytest.raises(socklnd.TraceError, match=r"x\.pcap: not a pcap or pcapng file"):
        pcap.read_pcap(p)
    with pytest.raises(ValueError, match="cannot open"):
        pcap.read_pcap(tmp_path / "missing.pcap")


def test_truncated_capture_names_the_packet(tmp_path):
    src = tmp_path / "a.pcap"
    pcap.write_pcap(src, _records()[:2])
    data = src.read_bytes()
    cut = tmp_path / "cut.pcap"
    cut.write_bytes(data[:-10])
    with pytest.raises(socklnd.TraceError) as e:
        pcap.read_pcap(cut)
    n = len(list(pcap.packets(src)))
    assert e.value.packet == n and f"packet {n}" in str(e.value) and "cut.pcap" in str(e.value)


def test_stream_without_its_start(tmp_path):
    src, dst = tmp_path / "a.pcap", tmp_path / "b.pcap"
    pcap.write_pcap(src, _records()[:1], segment=50)
    # drop the handshake, the hellos and the first segment of the request
    _rewrite(src, dst, lambda rs: rs[7:])
    with pytest.raises(socklnd.TraceError, match=r"packet 1: .*SYN is not in the capture"):
        pcap.read_pcap(dst)


def test_garbage_in_a_stream(tmp_path):
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    c = w.connection("127.0.0.2")
    c.put(True, 28, 1, SMALL[0])
    c.send(True, b"\xde\xad\xbe\xef" * 10)
    path = tmp_path / "t.pcap"
    path.write_bytes(buf.getvalue())
    with pytest.raises(socklnd.TraceError, match=r"packet 8: TCP 127\.0\.0\.2:1023 -> 127\.0\.0\.1:988: .*0xefbeadde"):
        pcap.read_pcap(path)


def test_snap_length_cut(tmp_path):
    src, dst = tmp_path / "a.pcap", tmp_path / "b.pcap"
    pcap.write_pcap(src, _records()[:1])
    data = src.read_bytes()
    # packets over 200 bytes cut to 200, as a capture with snap length 200 holds them
    out = bytearray(data[:24])
    pos = 24
    while pos < len(data):
        incl = struct.unpack_from("<I", data, pos + 8)[0]
        frame = data[pos + 16:pos + 16 + incl]
        if len(frame) > 200:
            out += data[pos:pos + 8] + struct.pack("<II", 200, len(frame)) + frame[:200]
        else:
            out += data[pos:pos + 16 + incl]
        pos += 16 + incl
    dst.write_bytes(bytes(out))
    with pytest.raises(socklnd.TraceError, match="snap length"):
        pcap.read_pcap(dst)


def test_nids():
    nid = socklnd.make_nid("192.168.1.7", 3)
    assert nid == (0x00020003 << 32) | 0xC0A80107
    assert socklnd.nid_str(nid) == "192.168.1.7@tcp3"
    assert socklnd.parse_nid("192.168.1.7@tcp3") == nid
    assert socklnd.nid_str(socklnd.make_nid("10.0.0.1", 0, 5)) == "10.0.0.1@o2ib"
    assert socklnd.nid_str(9 << 48) == "0@lo"
    with pytest.raises(ValueError):
        socklnd.parse_nid("c1")


# ------------------------------------------------------------------------------------
# the writer's checksums: by our own arithmetic, and by tshark's validation
# ------------------------------------------------------------------------------------

def test_checksums_verify(tmp_path):
    path = tmp_path / "t.pcap"
    pcap.write_pcap(path, _records()[:3], segment=333)
    for p in pcap.packets(path):
        ip = p.data[14:34]
        assert pcap.internet_checksum(ip) == 0, f"IPv4 header checksum of packet {p.number}"
        tcp = p.data[34:]
        pseudo = ip[12:20] + struct.pack("!BBH", 0, 6, len(tcp))
        assert pcap.internet_checksum(pseudo, tcp) == 0, f"TCP checksum of packet {p.number}"


@pytest.mark.needs_tool("tshark")
def test_tshark_finds_the_checksums_and_sequence_numbers_right(tmp_path):
    path = tmp_path / "t.pcap"
    pcap.write_pcap(path, _records()[:3], segment=500)
    out = subprocess.run(["tshark", "-n", "-r", str(path), "-o", "ip.check_checksum:TRUE",
                          "-o", "tcp.check_checksum:TRUE", "-T", "fields", "-e", "ip.checksum.status",
                          "-e", "tcp.checksum.status", "-e", "tcp.analysis.flags", "-e", "_ws.expert.severity"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    rows = [line.split("\t") for line in out.stdout.splitlines()]
    assert rows and all(r[0] == "1" and r[1] == "1" for r in rows), rows[:5]   # 1 = good, 0 = bad
    assert not any(r[2] for r in rows), "tshark's TCP analysis flagged a segment"


def test_damaged_captures_raise_only_trace_errors(tmp_path):
    """Random damage to a pcap and a pcapng file: a TraceError or records, never another exception."""
    src = tmp_path / "a.pcap"
    pcap.write_pcap(src, _records()[:3], segment=120)
    _pcapng(src, tmp_path / "a.pcapng")
    rng = random.Random(7)
    target = tmp_path / "damaged"
    for base in (src.read_bytes(), (tmp_path / "a.pcapng").read_bytes()):
        for _ in range(150):
            data = bytearray(base)
            for _ in range(rng.randint(1, 6)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            if rng.random() < 0.3:
                data = data[:rng.randrange(len(data))]
            target.write_bytes(bytes(data))
            try:
                pcap.read_pcap(target)
            except socklnd.TraceError as e:
                assert str(e).startswith(str(target))


def test_a_pcapng_block_too_short_for_its_fields(tmp_path):
    def block(btype, body):
        body += b"\0" * (-len(body) % 4)
        return struct.pack("<II", btype, len(body) + 12) + body + struct.pack("<I", len(body) + 12)
    path = tmp_path / "short.pcapng"
    path.write_bytes(block(0x0A0D0D0A, struct.pack("<IHHq", 0x1A2B3C4D, 1, 0, -1))
                     + block(1, struct.pack("<HHI", 1, 0, 0)) + block(6, b""))
    with pytest.raises(socklnd.TraceError, match=r"short\.pcapng: packet 1: .*damaged"):
        pcap.read_pcap(path)


# ------------------------------------------------------------------------------------
# nothing lost silently: gaps, captures ending mid-message, replies without requests
# ------------------------------------------------------------------------------------

def test_a_lost_segment_is_an_error_naming_the_stream_and_packet(tmp_path, run_cli):
    src, dst = tmp_path / "a.pcap", tmp_path / "lost.pcap"
    pcap.write_pcap(src, _records()[:3], segment=50)
    n = len(list(pcap.packets(src)))
    # drop packet 10 (a segment of the first request); packet 11 follows the gap
    _rewrite(src, dst, lambda rs: rs[:9] + rs[10:])
    with pytest.raises(socklnd.TraceError) as e:
        pcap.read_pcap(dst)
    msg = str(e.value)
    assert e.value.packet == 10 and msg.startswith(f"{dst}: packet 10: bytes missing before seq ")
    assert "(relative seq " in msg and "in stream TCP 127.0.0.2:1023 -> 127.0.0.1:988: 50 bytes" in msg
    # check-trace refuses it (exit 2) instead of reporting "0 exchanges, 0 violations"
    run = run_cli("check-trace", str(dst), out=False)
    assert run.rc == 2 and "bytes missing before seq" in run.stderr and "exchanges" not in run.stderr
    assert "Traceback" not in run.stderr and n > 10


def test_a_capture_that_ends_mid_message_names_the_last_packet(tmp_path):
    src, dst = tmp_path / "a.pcap", tmp_path / "cut.pcap"
    recs = [{"client": "127.0.0.2@tcp", "xid": 1, "request": SMALL[0], "reply": None}]
    pcap.write_pcap(src, recs, segment=40)
    packets = list(pcap.packets(src))
    keep = len(packets) - 5           # the FIN exchange (3) and the request's last 2 segments go
    _rewrite(src, dst, lambda rs: rs[:keep])
    with pytest.raises(socklnd.TraceError, match=rf"packet {keep}: stream TCP 127\.0\.0\.2:1023 -> "
                                              r"127\.0\.0\.1:988 ends in the middle of a socklnd message"):
        pcap.read_pcap(dst)


def test_a_reply_without_its_request_is_an_error(tmp_path):
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    c = w.connection("127.0.0.2")
    c.put(True, 28, 77, SMALL[0])
    c.put(False, 4, 77, SMALL[1])
    late = c.put(False, 4, 78, SMALL[3])[-1]      # its request is not in the capture
    w.close()
    path = tmp_path / "t.pcap"
    path.write_bytes(buf.getvalue())
    assert [m.match_bits for m in pcap.scan_pcap(path).orphan_replies] == [78]    # scan_pcap reports it
    with pytest.raises(socklnd.TraceError, match=rf"packet {late}: a reply from 127\.0\.0\.1@tcp to 127\.0\.0\.2@tcp "
                                              r"\(portal 4, match bits 78\) answers no request in the capture"):
        pcap.read_pcap(path)


def test_a_duplicate_syn_and_a_new_connection_on_the_same_ports(tmp_path):
    """A late duplicate of the SYN (same ISN) changes nothing; a new connection on the same
    addresses and ports (another ISN) starts a new stream."""
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    c = w.connection("127.0.0.2")
    c.put(True, 28, 1, SMALL[0])
    c.put(False, 4, 1, SMALL[1])
    c.close()
    c2 = pcap.TcpConnection(w, "127.0.0.2", c.client_port, 7)       # same ports, other ISNs
    w.connections["127.0.0.2"] = c2
    c2.handshake()
    c2.put(True, 28, 2, SMALL[2])
    c2.put(False, 4, 2, SMALL[3])
    path, dup = tmp_path / "t.pcap", tmp_path / "dup.pcap"
    path.write_bytes(buf.getvalue())
    want = [{"client": "127.0.0.2@tcp", "xid": 1, "request": SMALL[0], "reply": SMALL[1]},
            {"client": "127.0.0.2@tcp", "xid": 2, "request": SMALL[2], "reply": SMALL[3]}]
    assert _read(path) == want
    _rewrite(path, dup, lambda rs: rs[:6] + [rs[0]] + rs[6:])      # the SYN again, after the hellos
    assert _read(dup) == want


def test_server_callbacks_are_not_records(tmp_path):
    """An LDLM callback the server sends the client (portal 15) and the client's answer
    (portal 16) are paired and set aside: the target rules judge what a target answers."""
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    c = w.connection("127.0.0.2")
    c.put(True, 28, 5, SMALL[0])
    c.put(False, 15, 900, SMALL[1])        # blocking AST, server -> client
    c.put(True, 16, 900, SMALL[2])         # the client's reply
    c.put(False, 4, 5, SMALL[3])
    w.close()
    path = tmp_path / "t.pcap"
    path.write_bytes(buf.getvalue())
    trace = pcap.scan_pcap(path)
    assert _strip(trace.records) == [{"client": "127.0.0.2@tcp", "xid": 5, "request": SMALL[0], "reply": SMALL[3]}]
    assert trace.callbacks == 1 and trace.orphan_replies == []
    assert _read(path) == _strip(trace.records)


def test_records_carry_the_packet_number_of_their_request(tmp_path):
    from ptlrpc_conformance.harness.ost import trace
    buf = io.BytesIO()
    w = pcap.PcapWriter(buf)
    c = w.connection("127.0.0.2")
    first = c.put(True, 28, 1, SMALL[0], segment=100)[-1]
    c.put(False, 4, 1, SMALL[1])
    second = c.put(True, 28, 2, SMALL[2])[-1]
    path = tmp_path / "t.pcap"
    path.write_bytes(buf.getvalue())
    assert [r["packet"] for r in pcap.read_pcap(path)] == [first, second]
    # check-trace names a pcap record by that number (file:N)
    assert [r["line"] for r in trace.read(path)] == [first, second] and first > 7


def _fragment(frame: bytes, offset8: int, more: bool, ports=(2049, 2050)) -> bytes:
    """An Ethernet/IPv4/TCP frame made a fragment (offset in 8-byte units), other ports."""
    f = bytearray(frame)
    f[14 + 6:14 + 8] = struct.pack("!H", (0x2000 if more else 0) | offset8)
    if offset8 == 0:
        f[34:38] = struct.pack("!HH", *ports)
    return bytes(f)


def test_unrelated_fragments_and_unknown_link_types_are_skipped(tmp_path):
    src, dst = tmp_path / "a.pcap", tmp_path / "b.pcap"
    recs = _records()[:2]
    pcap.write_pcap(src, recs)

    def noise(rs):
        h, f = rs[4]
        return rs[:3] + [(h, _fragment(f, 0, True)), (h, _fragment(f, 8, False))] + rs[3:]
    _rewrite(src, dst, noise)
    assert _read(dst) == recs
    # a fragment of socklnd traffic is still refused
    bad = tmp_path / "bad.pcap"
    _rewrite(src, bad, lambda rs: rs[:3] + [(rs[4][0], _fragment(rs[4][1], 0, True, (1023, 988)))] + rs[3:])
    with pytest.raises(socklnd.TraceError, match="packet 4: a fragmented IPv4 packet carries TCP port 988"):
        pcap.read_pcap(bad)
    # pcapng: a second interface of a link type the reader does not know (USB, 189)
    ng = tmp_path / "c.pcapng"
    _pcapng(src, ng)
    data = ng.read_bytes()

    def block(btype, body):
        body += b"\0" * (-len(body) % 4)
        return struct.pack("<II", btype, len(body) + 12) + body + struct.pack("<I", len(body) + 12)
    shb_len = struct.unpack_from("<I", data, 4)[0]
    idb_len = struct.unpack_from("<I", data, shb_len + 4)[0]
    head, rest = data[:shb_len + idb_len], data[shb_len + idb_len:]
    usb = block(6, struct.pack("<IIIII", 1, 0, 0, 4, 4) + b"\x01\x02\x03\x04")
    ng.write_bytes(head + block(1, struct.pack("<HHI", 189, 0, 0)) + usb + rest)
    assert _read(ng) == recs
    only = tmp_path / "usb.pcapng"
    only.write_bytes(head[:shb_len] + block(1, struct.pack("<HHI", 189, 0, 0))
                     + block(6, struct.pack("<IIIII", 0, 0, 0, 4, 4) + b"\x01\x02\x03\x04"))
    with pytest.raises(socklnd.TraceError, match=r"usb\.pcapng: packet 1: link type 189 is not supported"):
        pcap.read_pcap(only)


def test_records_name_their_server_portal_and_reply_packet(tmp_path):
    """A record says which server it went to, on which portal, and when its reply came; the
    writer puts clients and servers anywhere and answers requests out of order."""
    path = tmp_path / "servers.pcap"
    sample = _records()
    recs = [dict(sample[0], server="10.0.0.5", portal=6, reply_portal=4, reply_after=1),
            dict(sample[2], xid=5, reply=SMALL[3], server="10.0.0.6@tcp", portal=12, reply_portal=10)]
    pcap.write_pcap(path, recs)
    got = pcap.read_pcap(path)
    assert _strip(got) == [{k: r[k] for k in ("client", "xid", "request", "reply")} for r in recs]
    assert [(r["server"], r["portal"]) for r in got] == [("10.0.0.5@tcp", 6), ("10.0.0.6@tcp", 12)]
    first, second = got
    assert first["packet"] < second["packet"] < second["reply_packet"] < first["reply_packet"]
