"""The LNet over TCP codec (harness/transport/lnet_engine/wire.py) and its data (spec/lnet.yaml):
sizes and offsets as Lustre's headers state them, golden bytes written out by hand, round trips
in both byte orders, and the capture reader and writer (capture/socklnd.py) agreeing with it."""
from __future__ import annotations

import os
import pathlib
import re
import subprocess

import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.capture import socklnd
from ptlrpc_conformance.spec import layouts
from ptlrpc_conformance.harness.transport.lnet_engine import wire
from ptlrpc_conformance.harness.transport.lnet_engine.wire import (
    C, NONE_WMD, AcceptorRequest, Hello, KsockHeader, LnetHeader, Nid, PingInfo, WireError)

# Sizes and offsets as Lustre 2.17.57's headers state them (written here by hand, not read
# from spec/lnet.yaml).  Citations: lnet/lnet/api-ni.c: lnet_assert_wire_constants (the
# acceptor requests, _lnet_hdr_nid4 with every variant field, lnet_ping_info, lnet_ni_status,
# lnet_nid); lnet/klnds/socklnd/socklnd-idl.h (packed: ksock_hello_msg_nid4,
# ksock_hello_msg, ksock_msg_hdr); include/uapi/linux/lnet/lnet-idl.h (packed: struct
# lnet_hdr, the nid16 header; the union variants).
LUSTRE_LAYOUTS = {
    "lnet_nid": (20, {"nid_size": 0, "nid_type": 1, "nid_num": 2, "nid_addr": 4}),
    "lnet_handle_wire": (16, {"wh_interface_cookie": 0, "wh_object_cookie": 8}),
    "lnet_acceptor_connreq": (16, {"acr_magic": 0, "acr_version": 4, "acr_nid": 8}),
    "lnet_acceptor_connreq_v2": (28, {"acr_magic": 0, "acr_version": 4, "acr_nid": 8}),
    "ksock_hello_msg_nid4": (56, {"kshm_magic": 0, "kshm_version": 4, "kshm_src_nid": 8, "kshm_dst_nid": 16,
                                  "kshm_src_pid": 24, "kshm_dst_pid": 28, "kshm_src_incarnation": 32,
                                  "kshm_dst_incarnation": 40, "kshm_ctype": 48, "kshm_nips": 52}),
    "ksock_hello_msg": (80, {"kshm_magic": 0, "kshm_version": 4, "kshm_src_nid": 8, "kshm_dst_nid": 28,
                             "kshm_src_pid": 48, "kshm_dst_pid": 52, "kshm_src_incarnation": 56,
                             "kshm_dst_incarnation": 64, "kshm_ctype": 72, "kshm_nips": 76}),
    "ksock_msg_hdr": (24, {"ksh_type": 0, "ksh_csum": 4, "ksh_zc_cookies": 8}),
    "lnet_hdr_nid4": (72, {"dest_nid": 0, "src_nid": 8, "dest_pid": 16, "src_pid": 20, "type": 24,
                           "payload_length": 28, "msg": 32}),
    "lnet_hdr_nid16": (96, {"dest_nid": 0, "src_nid": 20, "dest_pid": 40, "src_pid": 44, "type": 48,
                            "payload_length": 52, "msg": 56}),
    # variant offsets in the union (api-ni.c gives them in _lnet_hdr_nid4, i.e. 32 more)
    "lnet_put": (40, {"ack_wmd": 0, "match_bits": 16, "hdr_data": 24, "ptl_index": 32, "offset": 36}),
    "lnet_get": (36, {"return_wmd": 0, "match_bits": 16, "ptl_index": 24, "src_offset": 28, "sink_length": 32}),
    "lnet_reply": (16, {"dst_wmd": 0}),
    "lnet_ack": (28, {"dst_wmd": 0, "match_bits": 16, "mlength": 24}),
    "lnet_ping_info": (16, {"pi_magic": 0, "pi_features": 4, "pi_pid": 8, "pi_nnis": 12}),
    "lnet_ni_status": (16, {"ns_nid": 0, "ns_status": 8, "ns_msg_size": 12}),
}

# Constants as Lustre's headers define them (lnet-idl.h, lnet-types.h, lib-types.h, lib-lnet.h,
# socklnd.h, socklnd-idl.h, acceptor.c).
LUSTRE_CONSTANTS = {
    "LNET_PROTO_ACCEPTOR_MAGIC": 0xACCE7100, "LNET_PROTO_MAGIC": 0x45726963, "LNET_PROTO_TCP_MAGIC": 0xEEBC0DED,
    "LNET_PROTO_PING_MAGIC": 0x70696E67, "KSOCK_MSG_NOOP": 0xC0, "KSOCK_MSG_LNET": 0xC1, "SOCKLND_CONN_NONE": -1,
    "SOCKLND_CONN_CONTROL": 1, "LNET_PID_LUSTRE": 12345, "LNET_PROTO_PING_MATCHBITS": 0x8000000000000000,
    "LNET_NID_LO_0": 0x0009000000000000, "LNET_NI_STATUS_UP": 0x15AAC0DE, "LNET_PING_FEAT_NI_STATUS": 2,
    "LNET_MTU": 1 << 20, "LNET_ACCEPTOR_MIN_RESERVED_PORT": 512, "LNET_ACCEPTOR_MAX_RESERVED_PORT": 1023,
    "ACCEPT_PORT": 988, "LNET_INTERFACES_NUM": 16, "LNET_RESERVED_PORTAL": 0,
}

CLIENT = Nid.parse("127.0.0.2@tcp")          # 0x000200007F000002
SERVER = Nid.parse("127.0.0.1@tcp")          # 0x000200007F000001
INC = 0x1122334455667788
WMD = bytes.fromhex("0807060504030201" "1817161514131211")


def hx(text: str) -> bytes:
    return bytes.fromhex("".join(text.split()))


# Golden bytes, written out by hand from the layouts above (little-endian sender unless said).
GOLDEN = {
    "acceptor v1": (AcceptorRequest(SERVER), hx("0071ceac 01000000 0100007f 00000200")),
    "acceptor v1 big-endian": (AcceptorRequest(SERVER, big=True), hx("acce7100 00000001 00020000 7f000001")),
    "acceptor v2 (IPv6 NID)": (AcceptorRequest(Nid.ip("::1")),
                               hx("0071ceac 02000000 0c020000 00000000 00000000 00000000 00000001")),
    "hello V3": (Hello(3, CLIENT, SERVER, 12345, 12345, INC, 0, 1),
                 hx("63697245 03000000 0200007f 00000200 0100007f 00000200 39300000 39300000"
                    "88776655 44332211 00000000 00000000 01000000 00000000")),
    "hello V3 big-endian, NONE": (Hello(3, SERVER, CLIENT, 12345, 12345, INC, 0, -1, big=True),
                                  hx("45726963 00000003 00020000 7f000001 00020000 7f000002 00003039 00003039"
                                     "11223344 55667788 00000000 00000000 ffffffff 00000000")),
    "acceptor v2 (IPv6 NID) big-endian": (AcceptorRequest(Nid.ip("::1"), big=True),        # lnet_nid: never swapped
                                          hx("acce7100 00000002 0c020000 00000000 00000000 00000000 00000001")),
    "hello V2 with two addresses big-endian": (
        Hello(2, CLIENT, SERVER, 12345, 12345, INC, INC + 1, 1, ips=(0x7F000002, 0x0A000001), big=True),
        hx("45726963 00000002 00020000 7f000002 00020000 7f000001 00003039 00003039"
           "11223344 55667788 11223344 55667789 00000001 00000002 7f000002 0a000001")),
    "hello V4 big-endian": (Hello(4, CLIENT, SERVER, 12345, 12345, INC, 0, 1, big=True),
                            hx("45726963 00000004"
                               "00020000 7f000002 00000000 00000000 00000000"
                               "00020000 7f000001 00000000 00000000 00000000"
                               "00003039 00003039 11223344 55667788 00000000 00000000 00000001 00000000")),
    "hello V4": (Hello(4, CLIENT, SERVER, 12345, 12345, INC, 0, 1),
                 hx("63697245 04000000"
                    "00020000 7f000002 00000000 00000000 00000000"
                    "00020000 7f000001 00000000 00000000 00000000"
                    "39300000 39300000 88776655 44332211 00000000 00000000 01000000 00000000")),
    "ksock NOOP ZC-ACK": (KsockHeader(0xC0, 0, (0, 5)), hx("c0000000 00000000 00000000 00000000 05000000 00000000")),
    "ksock LNET with a ZC cookie big-endian": (KsockHeader(0xC1, 0x01020304, (0x0A0B0C0D0E0F1011, 0)),
                                               hx("000000c1 01020304 0a0b0c0d 0e0f1011 00000000 00000000")),
    "PUT nid4": (LnetHeader(1, SERVER, CLIENT, 12345, 12345, 5, match_bits=0x5F00000000001234, portal=28),
                 hx("0100007f 00000200 0200007f 00000200 39300000 39300000 01000000 05000000"
                    "ffffffff ffffffff ffffffff ffffffff 34120000 0000005f 00000000 00000000 1c000000 00000000")),
    "PUT nid4 asking an ACK, offset 224": (
        LnetHeader(1, CLIENT, SERVER, 12345, 12345, 300, wmd=WMD, match_bits=0x5F00000000001234, portal=4,
                   offset=224),
        hx("0200007f 00000200 0100007f 00000200 39300000 39300000 01000000 2c010000"
           "08070605 04030201 18171615 14131211 34120000 0000005f 00000000 00000000 04000000 e0000000")),
    "GET (ping)": (LnetHeader(2, CLIENT, SERVER, 12345, 12345, 0, wmd=WMD, match_bits=1 << 63, portal=0,
                              sink_length=272),
                   hx("0200007f 00000200 0100007f 00000200 39300000 39300000 02000000 00000000"
                      "08070605 04030201 18171615 14131211 00000000 00000080 00000000 00000000 10010000 00000000")),
    "REPLY": (LnetHeader(3, SERVER, CLIENT, 12345, 12345, 48, wmd=WMD),
              hx("0100007f 00000200 0200007f 00000200 39300000 39300000 03000000 30000000"
                 "08070605 04030201 18171615 14131211 00000000 00000000 00000000 00000000 00000000 00000000")),
    "ACK": (LnetHeader(0, SERVER, CLIENT, 12345, 12345, 0, wmd=WMD, match_bits=0x5F00000000001234, mlength=300),
            hx("0100007f 00000200 0200007f 00000200 39300000 39300000 00000000 00000000"
               "08070605 04030201 18171615 14131211 34120000 0000005f 2c010000 00000000 00000000 00000000")),
    "ping info": (wire.ping_info(CLIENT, 12345),
                  hx("676e6970 02000000 39300000 02000000"
                     "00000000 00000900 dec0aa15 00000000"
                     "0200007f 00000200 dec0aa15 00000000")),
    "ping info big-endian": (PingInfo(2, 12345, ((C["LNET_NID_LO_0"], 0x15AAC0DE, 0),), big=True),
                             hx("70696e67 00000002 00003039 00000001 00090000 00000000 15aac0de 00000000")),
}
WIDE_PUT = (LnetHeader(1, SERVER, CLIENT, 12345, 12345, 5, match_bits=0x5F00000000001234, portal=28),
            hx("00020000 7f000001 00000000 00000000 00000000"
               "00020000 7f000002 00000000 00000000 00000000"
               "39300000 39300000 01000000 05000000"
               "ffffffff ffffffff ffffffff ffffffff 34120000 0000005f 00000000 00000000 1c000000 00000000"))


@pytest.mark.parametrize("name", sorted(LUSTRE_LAYOUTS))
def test_layouts_are_lustres(name):
    size, offsets = LUSTRE_LAYOUTS[name]
    lay = spec.layout(name) if name == "lnet_nid" else wire.layout(name)    # lnet_nid: the release's table
    assert lay.size == size
    assert {f.name: f.offset for f in lay.fields} == offsets
    assert name == "lnet_nid" or lay.cite           # every structure names its source


# Where Lustre declares each structure (packed, so each member follows the one before it),
# by the name spec/lnet.yaml gives it; read from a lustre-release tree or git directory.
HEADERS = {"include/uapi/linux/lnet/lnet-idl.h": {
               "lnet_nid": "struct lnet_nid", "lnet_handle_wire": "struct lnet_handle_wire",
               "lnet_acceptor_connreq": "struct lnet_acceptor_connreq",
               "lnet_acceptor_connreq_v2": "struct lnet_acceptor_connreq_v2",
               "lnet_hdr_nid4": "struct _lnet_hdr_nid4", "lnet_hdr_nid16": "struct lnet_hdr",
               "lnet_put": "struct lnet_put", "lnet_get": "struct lnet_get", "lnet_reply": "struct lnet_reply",
               "lnet_ack": "struct lnet_ack", "lnet_ping_info": "struct lnet_ping_info",
               "lnet_ni_status": "struct lnet_ni_status"},
           "lnet/klnds/socklnd/socklnd-idl.h": {
               "ksock_hello_msg_nid4": "struct ksock_hello_msg_nid4", "ksock_hello_msg": "struct ksock_hello_msg",
               "ksock_msg_hdr": "struct ksock_msg_hdr"}}
C_SIZES = {"__u8": 1, "__s8": 1, "__u16": 2, "__be16": 2, "__s16": 2, "__u32": 4, "__be32": 4, "__s32": 4,
           "lnet_pid_t": 4, "__u64": 8, "__s64": 8, "__be64": 8, "lnet_nid_t": 8}
LUSTRE_GIT, LUSTRE_TREE = os.environ.get("PTLRPC_LUSTRE_GIT"), os.environ.get("PTLRPC_LUSTRE_TREE")


def _lustre_source(path: str) -> str:
    if LUSTRE_GIT:
        return subprocess.run(["git", "--git-dir", LUSTRE_GIT, "show", f"v2_17_57:{path}"], capture_output=True,
                              text=True, check=True, timeout=60).stdout
    return (pathlib.Path(LUSTRE_TREE) / path).read_text(encoding="utf-8", errors="replace")


def _packed_layouts(text: str, out: dict) -> dict[str, tuple[int, dict[str, int]]]:
    """Size and member offsets of every packed struct and union declared in a C header whose
    members are of the types above or of a struct or union declared before, or arrays of them
    (a flexible array at the end takes no room and is left out), added to `out` (the ones
    declared before, in this header or another); any other is not listed."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    for kind, name, body in re.findall(r"^(struct|union)\s+(\w+)\s*\{(.*?)^\}\s*(?:__packed|__attribute__)", text, re.M | re.S):
        at, size, offsets = 0, 0, {}
        for member in filter(None, (m.strip() for m in body.split(";"))):
            found = re.fullmatch(r"((?:struct|union)\s+\w+|\w+)\s+(\w+)(?:\[(\d*)\])?", " ".join(member.split()))
            if not found or (found[1] not in out and found[1] not in C_SIZES):
                break
            ctype, field, count = found.groups()
            one = out[ctype][0] if ctype in out else C_SIZES[ctype]
            room = one * (int(count) if count else 0 if count is not None else 1)
            if count is not None and room == 0:
                continue
            offsets[field] = 0 if kind == "union" else at
            at += 0 if kind == "union" else room
            size = max(size, room) if kind == "union" else at
        else:
            out[f"{kind} {name}"] = (size, offsets)
    return out


@pytest.mark.skipif(not (LUSTRE_GIT or LUSTRE_TREE), reason="not run: neither $PTLRPC_LUSTRE_GIT (a lustre-release "
                    "git directory with tag v2_17_57) nor $PTLRPC_LUSTRE_TREE (a lustre-release tree) is given")
def test_the_sizes_and_offsets_written_here_are_what_lustre_s_headers_declare():
    """LUSTRE_LAYOUTS, written by hand, against the declarations in Lustre's own headers."""
    seen, declared = {}, {}
    for path, names in HEADERS.items():             # lnet-idl.h first: socklnd-idl.h uses its lnet_nid
        _packed_layouts(_lustre_source(path), declared)
        seen.update({ours: declared[theirs] for ours, theirs in names.items()})
    assert seen == LUSTRE_LAYOUTS


def test_every_structure_of_the_data_is_checked_here():
    assert set(layouts.lnet()["structs"]) | {"lnet_nid"} == set(LUSTRE_LAYOUTS)
    assert "lnet_nid" not in layouts.lnet()["structs"]      # one layout of it: the release table's


def test_constants_are_lustres():
    assert {k: C[k] for k in LUSTRE_CONSTANTS} == LUSTRE_CONSTANTS
    assert all(row.get("cite") for row in spec.lnet()["constants"].values())


def _structures(value, wide: bool = False) -> set[str]:
    """The structures of spec/lnet.yaml whose bytes a golden case writes out."""
    if isinstance(value, AcceptorRequest):
        return {"lnet_acceptor_connreq" if value.nid.is_nid4 else "lnet_acceptor_connreq_v2"}
    if isinstance(value, Hello):
        return {"ksock_hello_msg" if value.wide else "ksock_hello_msg_nid4"}
    if isinstance(value, KsockHeader):
        return {"ksock_msg_hdr"}
    if isinstance(value, LnetHeader):
        return {"lnet_hdr_nid16" if wide else "lnet_hdr_nid4", "lnet_handle_wire",
                spec.lnet()["variants"][value.type]}
    return {"lnet_ping_info"} | ({"lnet_ni_status"} if value.nis else set())


def test_every_structure_has_golden_bytes_in_each_byte_order_it_may_come_in():
    """Each structure of spec/lnet.yaml is written out above; one in the sender's byte order
    (`order: sender`) both little- and big-endian, since a receiver must read either."""
    seen: dict[str, set[bool]] = {}
    for case, (value, _raw) in list(GOLDEN.items()) + [("wide PUT", WIDE_PUT[:2])]:
        for name in _structures(value, wide=case == "wide PUT"):
            seen.setdefault(name, set()).add("big-endian" in case)
    structs = layouts.lnet()["structs"]
    assert set(seen) == set(structs)
    for name, row in structs.items():
        assert seen[name] == ({False, True} if row["order"] == "sender" else {False}), name


@pytest.mark.parametrize("case", sorted(GOLDEN))
def test_golden_bytes(case):
    value, raw = GOLDEN[case]
    if isinstance(value, KsockHeader):          # its byte order is the connection's, not its own
        big = "big-endian" in case
        assert value.pack(big) == raw and wire.unpack_ksock(raw, big) == value
        return
    packed = value.pack()
    assert packed == raw
    if isinstance(value, AcceptorRequest):
        assert wire.unpack_acceptor(raw) == (value if value.version else
                                             AcceptorRequest(value.nid, 1 if value.nid.is_nid4 else 2, value.big))
    elif isinstance(value, Hello):
        assert wire.unpack_hello(raw) == value
    elif isinstance(value, KsockHeader):
        assert wire.unpack_ksock(raw) == value
    elif isinstance(value, LnetHeader):
        assert wire.unpack_lnet_header(raw) == value
    else:
        assert wire.unpack_ping_info(raw) == value


def test_golden_nid16_header():
    header, raw = WIDE_PUT
    assert header.pack(wide=True) == raw
    assert wire.unpack_lnet_header(raw, wide=True) == header


def test_the_nids_of_the_golden_bytes():
    assert CLIENT.nid4 == 0x000200007F000002 == socklnd.make_nid("127.0.0.2")
    assert str(CLIENT) == "127.0.0.2@tcp" and str(Nid.ip("::1")) == "::1@tcp"
    assert Nid.from_bytes(CLIENT.to_bytes()) == CLIENT and Nid.from_nid4(CLIENT.nid4) == CLIENT
    assert Nid.from_nid4(C["LNET_NID_ANY"]).is_any
    with pytest.raises(WireError, match="does not fit an 8-byte NID"):
        Nid.ip("::1").nid4


@pytest.mark.parametrize("big", [False, True])
@pytest.mark.parametrize("version", [2, 3, 4])
def test_hello_round_trip_in_either_order(version, big):
    ips = (0x7F000002, 0x0A000001) if version != 4 else ()
    h = Hello(version, CLIENT, SERVER, 12345, 0x80000401, 2 ** 64 - 1, 7, 3, ips, big)
    raw = h.pack()
    assert wire.hello_size(raw[:8]) == (80 if version == 4 else 56)
    assert wire.hello_nips(raw[:wire.hello_size(raw[:8])]) == len(ips)
    assert wire.unpack_hello(raw) == h


@pytest.mark.parametrize("big", [False, True])
def test_ksock_and_ping_info_round_trip_in_either_order(big):
    k = KsockHeader(0xC1, 0xDEADBEEF, (2 ** 64 - 1, 1))
    assert wire.unpack_ksock(k.pack(big), big) == k
    p = PingInfo(2, 0x80001234, ((C["LNET_NID_LO_0"], 1, 2), (CLIENT.nid4, 3, 4)), big)
    assert wire.unpack_ping_info(p.pack()) == p


@pytest.mark.parametrize("wide", [False, True])
@pytest.mark.parametrize("header", [
    LnetHeader(1, SERVER, CLIENT, 1, 2, 1 << 20, wmd=WMD, match_bits=2 ** 64 - 1, hdr_data=9, portal=31, offset=224),
    LnetHeader(2, SERVER, CLIENT, 1, 2, 0, wmd=WMD, match_bits=5, portal=0, offset=8, sink_length=272),
    LnetHeader(3, SERVER, CLIENT, 1, 2, 48, wmd=WMD),
    LnetHeader(0, SERVER, CLIENT, 1, 2, 0, wmd=WMD, match_bits=5, mlength=4096),
])
def test_lnet_header_round_trip(header, wide):
    raw = header.pack(wide)
    assert len(raw) == (96 if wide else 72)
    assert wire.unpack_lnet_header(raw, wide) == header


@pytest.mark.parametrize("raw, message", [
    (hx("12345678 01000000"), "acceptor request: magic 0x78563412"),
    (hx("0071ceac 03000000"), "acr_version 3"),
])
def test_acceptor_errors_name_the_field(raw, message):
    with pytest.raises(WireError, match=message):
        wire.acceptor_size(raw)


@pytest.mark.parametrize("raw, message", [
    (hx("ed0dbcee 01000000"), "protocol V1"),
    (hx("63697245 05000000"), "kshm_version 5"),
    (hx("0071ceac 01000000"), "socklnd hello: magic"),
])
def test_hello_errors_name_the_field(raw, message):
    with pytest.raises(WireError, match=message):
        wire.hello_size(raw)


def test_hello_with_too_many_addresses_is_refused():
    raw = Hello(3, CLIENT, SERVER, 1, 1, 1, 0, 1, tuple(range(1, 18))).pack()
    with pytest.raises(WireError, match="kshm_nips 17"):
        wire.hello_nips(raw[:56])


def test_lnet_header_of_unknown_type_is_refused():
    raw = bytearray(GOLDEN["PUT nid4"][1])
    raw[24] = 4                               # LNET_MSG_HELLO: socklnd V1 only
    with pytest.raises(WireError, match="type 4 is no ACK, PUT, GET or REPLY"):
        wire.unpack_lnet_header(bytes(raw))


@pytest.mark.parametrize("change, message", [
    (lambda r: r[:4] + (0).to_bytes(4, "little") + r[8:], "without NI_STATUS"),
    (lambda r: r[:12] + (0).to_bytes(4, "little") + r[16:], "pi_nnis 0"),
    (lambda r: r[:16] + r[32:48] + r[16:32], "not the loopback NID"),
    (lambda r: r[:40], "40 bytes, 48 needed"),
])
def test_ping_info_is_checked_as_lustre_checks_it(change, message):
    with pytest.raises(WireError, match=message):
        wire.unpack_ping_info(change(GOLDEN["ping info"][1]))


def test_a_broken_layout_entry_is_a_clear_error(monkeypatch):
    entry = {**layouts.lnet_struct("ksock_msg_hdr"), "size": 32}
    real = layouts.lnet_struct
    monkeypatch.setattr(layouts, "lnet_struct", lambda name: entry if name == "ksock_msg_hdr" else real(name))
    wire.layout.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"spec/lnet.yaml: ksock_msg_hdr's fields end at 24, its size is 32"):
            wire.layout("ksock_msg_hdr")
    finally:
        monkeypatch.undo()
        wire.layout.cache_clear()


# -- the capture's writer and reader agree with the codec ------------------------------

def test_capture_builders_write_what_the_codec_writes():
    assert socklnd.acceptor_connreq(SERVER.nid4) == AcceptorRequest(SERVER).pack()
    assert socklnd.ksock_hello(CLIENT.nid4, SERVER.nid4, INC, 0) == Hello(3, CLIENT, SERVER, 12345, 12345, INC, 0,
                                                                          C["SOCKLND_CONN_ANY"]).pack()
    assert socklnd.ksock_noop() == KsockHeader(C["KSOCK_MSG_NOOP"]).pack()
    put = socklnd.ksock_lnet_put(CLIENT.nid4, SERVER.nid4, 28, 0x5F00000000001234, b"hello")
    assert put == KsockHeader(C["KSOCK_MSG_LNET"]).pack() + GOLDEN["PUT nid4"][0].pack() + b"hello"


class _Stream:
    def __init__(self, data: bytes):
        self.buf, self.name, self.flip, self.version = bytearray(data), "s", False, None
        self.started, self.saw_syn = False, True


@pytest.mark.parametrize("version", [3, 4])
@pytest.mark.parametrize("big", [False, True])
def test_capture_reader_reads_the_codec(version, big):
    """The capture's stream framing reads what the engine's codec writes, in both protocol
    versions and both byte orders of the sender."""
    wide = version == 4
    header = LnetHeader(1, SERVER, CLIENT, 12345, 12345, 3, match_bits=77, portal=28, offset=0)
    data = (AcceptorRequest(SERVER, big=big).pack() + Hello(version, CLIENT, SERVER, 12345, 12345, INC, 0, 1,
                                                            big=big).pack()
            + KsockHeader(C["KSOCK_MSG_NOOP"]).pack(big) + KsockHeader(C["KSOCK_MSG_LNET"]).pack(big)
            + header.pack(wide) + b"abc")
    messages = list(socklnd.frame("t.pcap", _Stream(data), 1))
    assert [(m.src_nid, m.dst_nid, m.type, m.portal, m.match_bits, m.offset, m.payload) for m in messages] == [
        ("127.0.0.2@tcp", "127.0.0.1@tcp", 1, 28, 77, 0, b"abc")]


def test_capture_portals_and_lnds_come_from_the_data():
    assert socklnd.OST_REQUEST_PORTAL == 28 and socklnd.OSC_REPLY_PORTAL == 4
    assert socklnd.REPLY_PORTALS == frozenset(spec.target()["portals"]["replies"])
    assert socklnd.LND_NAMES[19] == "bxi3f"       # lnet/lnet/nidstrings.c: libcfs_netstrfns
    assert socklnd.nid_str(socklnd.make_nid("10.1.2.3", 2, 18)) == "10.1.2.3@efa2"
