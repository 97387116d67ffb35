"""A real capture read by the capture reader and the LNet codec, field by field against
Wireshark's LNet dissector: nDPI's `tests/cfgs/default/pcap/lustre.pcapng` (a Lustre 2.15.5
client mounting from an MGS: one connection's acceptor request and hellos, then, on another
connection whose start the capture missed, MGS_CONNECT, LDLM_ENQUEUE and llog requests and
their replies, and an ACK).

The file is nDPI's test data (LGPL-3.0): it is fetched, never committed.  `tools/fetch_ndpi_capture.sh`
fetches it (pinned commit, sha256 checked); the test reads it from $PTLRPC_NDPI_LUSTRE_PCAP and
skips, saying so, without it.

What is compared: every byte of every TCP stream on port 988 is framed into socklnd structures
(capture/socklnd.py: frame) with nothing left over; each LNET message is decoded by the codec
(lnet_engine/wire.py, from spec/lnet.yaml) and each field Wireshark's dissector prints for it
(lnet.*: the ksock header, the NIDs, the pids, the type, the payload length and the variant's
fields) is equal (a wire handle's cookies as bytes: Wireshark shows them as big-endian numbers,
while Lustre writes them in its host's order, which only their creator reads; the ACK of this
capture shows it).  Wireshark's dissector (4.0) does not decode the acceptor request nor the
hellos; their bytes are tshark's TCP payload of the frame, and their NIDs are the frame's IP
addresses as tshark reads them.
"""
from __future__ import annotations

import ipaddress
import json
import os
import pathlib
import subprocess

import pytest

from conftest import require_tool
from ptlrpc_conformance.harness.capture import pcap
from ptlrpc_conformance.harness.transport.lnet_engine import wire
from ptlrpc_conformance.harness.transport.lnet_engine.wire import C, Nid

ENV = "PTLRPC_NDPI_LUSTRE_PCAP"
CAPTURE = os.environ.get(ENV)
pytestmark = pytest.mark.skipif(
    not CAPTURE or not pathlib.Path(CAPTURE).is_file(),
    reason=f"nDPI's lustre.pcapng is not given (fetch it with tools/fetch_ndpi_capture.sh and set ${ENV}; "
           "it is LGPL test data, never committed)")

# Wireshark's LNet field -> the codec's name for it (the ksock header's, the LNet header's or
# the variant's; a GET's src_offset is the codec's `offset`).  The csum's field is lnet.ib_csum
# in Wireshark 4.0, lnet.ksm_csum in later releases.
KSOCK_FIELDS = {"lnet.ksm_type": "type", "lnet.ib_csum": "csum", "lnet.ksm_csum": "csum"}
HEADER_FIELDS = {"lnet.dest_pid": "dest_pid", "lnet.src_pid": "src_pid", "lnet.msg_type": "type",
                 "lnet.payload_length": "payload_length", "lnet.msg_dst_match_bits": "match_bits",
                 "lnet.msg_hdr_data": "hdr_data", "lnet.ptl_index": "portal", "lnet.offset": "offset",
                 "lnet.src_offset": "offset", "lnet.sink_length": "sink_length", "lnet.msg_length": "mlength"}
# what Wireshark prints for each message type besides the ksock header, NIDs, pids, type, length
VARIANT_FIELDS = {
    C["LNET_MSG_PUT"]: {"lnet.msg_dst_match_bits", "lnet.msg_hdr_data", "lnet.ptl_index", "lnet.offset"},
    C["LNET_MSG_GET"]: {"lnet.msg_dst_match_bits", "lnet.ptl_index", "lnet.src_offset", "lnet.sink_length"},
    C["LNET_MSG_ACK"]: {"lnet.msg_dst_match_bits", "lnet.msg_length"},
    C["LNET_MSG_REPLY"]: set(),
}
NOT_COMPARED = {"lnet.payload", "lnet.ptl_filler"}      # no value: the payload's and the padding's place
# Wireshark 4.0 flags the two LLOG_ORIGIN_HANDLE_CREATE requests (frames 15 and 19) with
# lnet.bad_buflen: its Lustre dissector read another length than the LNet payload holds.  That
# is about the Lustre message, not the LNet header; the frames' header fields are compared all
# the same, and no other expert item may appear.
TOLERATED_EXPERT = {"lnet.bad_buflen"}


def _int(text: str) -> int:
    return int(text, 16) if text.lower().startswith("0x") else int(text)


def _tshark_frames(tmp_path) -> dict[int, dict]:
    """tshark's reading of the capture: frame number -> its ip, tcp and lnet layers (lnet a
    list: one entry per LNet message the frame completes)."""
    program = require_tool("tshark")
    env = dict(os.environ, WIRESHARK_CONFIG_DIR=str(tmp_path))      # no user preference changes it
    out = subprocess.run([program, "-n", "-r", CAPTURE, "-T", "json", "-J", "frame ip tcp lnet",
                          "--no-duplicate-keys"], capture_output=True, env=env, timeout=120, check=True)
    frames = {}
    for pkt in json.loads(out.stdout):
        layers = pkt["_source"]["layers"]
        lnet = layers.get("lnet", [])
        frames[int(layers["frame"]["frame.number"])] = {
            "ip": layers.get("ip", {}), "tcp": layers.get("tcp", {}),
            "lnet": lnet if isinstance(lnet, list) else [lnet]}
    return frames


def _nid(fields: dict) -> Nid:
    """A NID as Wireshark shows it (lnet.nid.type, lnet.nid.net_interface, lnet.nid.addr)."""
    return Nid(_int(fields["lnet.nid.type"]), _int(fields["lnet.nid.net_interface"]),
               ipaddress.IPv4Address(fields["lnet.nid.addr"]).packed)


def _ip_nid(address: str) -> Nid:
    return Nid.ip(address)           # tcp0: the capture's only network


@pytest.fixture(scope="module")
def read(tmp_path_factory):
    pieces = []
    trace = pcap.scan_pcap(CAPTURE, seen=pieces.append)
    return trace, pieces, _tshark_frames(tmp_path_factory.mktemp("tshark"))


def test_the_capture_is_read_completely(read):
    """Every structure of both connections is framed (scan_pcap raises on a byte it cannot
    place, a gap, or a stream that ends mid-message), and every request has its record."""
    trace, pieces, frames = read
    kinds = [p.kind for p in pieces]
    assert kinds.count("acceptor") == 1 and kinds.count("hello") == 2
    assert kinds.count("lnet") == trace.messages == sum(len(f["lnet"]) for f in frames.values()) > 0
    assert trace.records and not trace.orphan_replies
    assert all(r["server"] == "192.168.88.119@tcp" for r in trace.records)


def test_acceptor_request_and_hellos_are_the_frames_bytes_and_addresses(read):
    _, pieces, frames = read
    for piece in (p for p in pieces if p.kind in ("acceptor", "hello")):
        frame = frames[piece.packet]
        assert bytes.fromhex(frame["tcp"]["tcp.payload"].replace(":", "")) == piece.data, piece
        src, dst = _ip_nid(frame["ip"]["ip.src"]), _ip_nid(frame["ip"]["ip.dst"])
        if piece.kind == "acceptor":
            request = wire.unpack_acceptor(piece.data)
            assert frame["tcp"]["tcp.dstport"] == str(C["ACCEPT_PORT"])
            assert (request.nid, request.version, request.big) == (dst, C["LNET_PROTO_ACCEPTOR_VERSION"], False)
        else:
            hello = wire.unpack_hello(piece.data)
            assert (hello.src_nid, hello.dst_nid) == (src, dst)
            assert hello.version == C["KSOCK_PROTO_V3"] and hello.src_pid == C["LNET_PID_LUSTRE"]
            assert hello.ips == () and not hello.big
    client, server = (wire.unpack_hello(p.data) for p in pieces if p.kind == "hello")
    # the passive side answers in the inverted type and echoes the incarnation it was sent
    assert (client.ctype, server.ctype) == (C["SOCKLND_CONN_BULK_IN"], C["SOCKLND_CONN_BULK_OUT"])
    assert server.dst_incarnation == client.dst_incarnation


def test_every_lnet_header_field_is_what_wireshark_reads(read):
    _, pieces, frames = read
    lnets = [p for p in pieces if p.kind == "lnet"]
    by_frame: dict[int, list] = {}
    for p in lnets:
        by_frame.setdefault(p.packet, []).append(p)
    assert {n: len(ps) for n, ps in by_frame.items()} == {n: len(f["lnet"]) for n, f in frames.items() if f["lnet"]}
    compared, bad_buflen = 0, set()
    for number, ps in by_frame.items():
        for piece, shown in zip(ps, frames[number]["lnet"]):
            ksock = wire.unpack_ksock(piece.data, piece.big)
            size = wire.layout("ksock_msg_hdr").size
            header = wire.unpack_lnet_header(piece.data[size:])
            where = f"frame {number}"
            assert _nid(shown["lnet.dest_nid"]) == header.dest_nid, where
            assert _nid(shown["lnet.src_nid"]) == header.src_nid, where
            assert _int(shown["lnet.ksm_zc_req_cookie"]) == ksock.zc_cookies[0], where
            assert _int(shown["lnet.ksm_zc_ack_cookie"]) == ksock.zc_cookies[1], where
            assert header.payload_length == len(piece.data) - size - wire.lnet_header_size(False), where
            values = {}
            for key, text in shown.items():
                if key in KSOCK_FIELDS:
                    values[key] = (_int(text), getattr(ksock, KSOCK_FIELDS[key]))
                elif key in HEADER_FIELDS:
                    values[key] = (_int(text), getattr(header, HEADER_FIELDS[key]))
                elif key in ("lnet.msg_dst_interface_cookie", "lnet.msg_dst_object_cookie"):
                    # the wire handle is opaque (its creator's byte order, never swapped); Wireshark
                    # shows each cookie as a big-endian number, so its bytes are compared
                    half = header.wmd[:8] if key.endswith("interface_cookie") else header.wmd[8:]
                    values[key] = (_int(text).to_bytes(8, "big"), half)
                elif key in ("_ws.expert", "_ws.malformed"):
                    assert key == "_ws.malformed" or TOLERATED_EXPERT & set(text), f"{where}: {text}"
                    bad_buflen.add(number)
                else:
                    assert key in NOT_COMPARED | {"lnet.dest_nid", "lnet.src_nid", "lnet.ksm_zc_req_cookie",
                                                  "lnet.ksm_zc_ack_cookie"}, f"{where}: {key} not compared"
            assert {k: a for k, (a, _) in values.items()} == {k: b for k, (_, b) in values.items()}, where
            expected = VARIANT_FIELDS[header.type] | {"lnet.msg_dst_interface_cookie", "lnet.msg_dst_object_cookie",
                                                      "lnet.ksm_type", "lnet.dest_pid", "lnet.src_pid",
                                                      "lnet.msg_type", "lnet.payload_length"}
            assert expected <= set(values), f"{where}: {sorted(expected - set(values))} not shown"
            compared += 1
    assert compared == len(lnets)
    assert bad_buflen <= {15, 19}
    types = {wire.unpack_lnet_header(p.data[24:]).type for p in lnets}
    assert {C["LNET_MSG_PUT"], C["LNET_MSG_ACK"]} <= types
