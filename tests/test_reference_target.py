"""The bundled reference OST target (reference/target.py) against docs/target-rules.md.

Requests are built here with the reference Codec and StructCodec and fed to `Target`
directly; one test drives the exec testee (`python -m ptlrpc_conformance.reference`).
"""
from __future__ import annotations

import shlex
import sys

import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.reference import make_testee
from ptlrpc_conformance.reference.codec import Codec
from ptlrpc_conformance.reference.structs import StructCodec
from ptlrpc_conformance.reference.target import Target, TargetConfig, ostid_id, ostid_seq

C = spec.constant
CODEC, SC = Codec(), StructCodec()
REQUEST, REPLY, ERR = C("PTL_RPC_MSG_REQUEST"), C("PTL_RPC_MSG_REPLY"), C("PTL_RPC_MSG_ERR")
AT = C("MSGHDR_AT_SUPPORT")
FLID, FLGROUP, FLSIZE, FLBLOCKS = C("OBD_MD_FLID"), C("OBD_MD_FLGROUP"), C("OBD_MD_FLSIZE"), C("OBD_MD_FLBLOCKS")
FLATIME, FLMTIME, FLCTIME = C("OBD_MD_FLATIME"), C("OBD_MD_FLMTIME"), C("OBD_MD_FLCTIME")
FLMODE, FLTYPE, FLUID, FLGID = C("OBD_MD_FLMODE"), C("OBD_MD_FLTYPE"), C("OBD_MD_FLUID"), C("OBD_MD_FLGID")
EOF = C("OBD_OBJECT_EOF")
RESENT, REPLAY = C("MSG_RESENT"), C("MSG_REPLAY")
REQ_DONE, LOCK_DONE = C("MSG_REQ_REPLAY_DONE"), C("MSG_LOCK_REPLAY_DONE")
RECOVERING, RECONNECT, REPLAYABLE = (C("MSG_CONNECT_RECOVERING"), C("MSG_CONNECT_RECONNECT"),
                                     C("MSG_CONNECT_REPLAYABLE"))
TARGET_UUID = spec.target()["target_uuid"]
VERSIONS = {name: C(row["version"]) for name, row in spec.target()["opcodes"].items()}


def e(name: str) -> int:
    return -spec.errno_value(name)


def ost_body(oid=None, valid=0, seq=0, fid=None, **fields) -> bytes:
    oa = {"o_valid": valid}
    if fid is not None:
        oa["o_oi"] = {"oi_fid": fid}
    elif oid is not None:
        oa["o_oi"] = {"oi": {"oi_id": oid, "oi_seq": seq}}
        oa["o_valid"] |= FLID | FLGROUP
    oa.update(fields)
    return SC.encode("ost_body", {"oa": oa})


def uuid_buf(text: str) -> bytes:
    return SC.encode("obd_uuid", {"uuid": text})


class Rep:
    """A decoded reply."""

    def __init__(self, data: bytes):
        self.msg = CODEC.decode(data, "reply")
        self.body = self.msg["body"]
        self.buffers = [bytes.fromhex(b) for b in self.msg["buffers"]]

    type = property(lambda self: self.body["pb_type"])
    status = property(lambda self: self.body["pb_status"])
    transno = property(lambda self: self.body["pb_transno"])
    committed = property(lambda self: self.body["pb_last_committed"])

    def struct(self, name: str) -> dict:
        return SC.decode(name, self.buffers[1])["fields"]

    @property
    def oa(self) -> dict:
        return self.struct("ost_body")["oa"]

    def is_err(self, name: str) -> bool:
        return (self.type == ERR and self.status == e(name) and self.transno == 0 and self.committed == 0
                and len(self.buffers) == 1)


class Client:
    def __init__(self, target: Target, name: str, handle: int | None = None, flags: int = 0, flags2: int = 0):
        self.t, self.name = target, name
        self.uuid = f"client-{name}"
        self.handle = handle if handle is not None else 0xC0DE0000 + sum(map(ord, name))
        self.flags, self.flags2 = flags, flags2
        self.xid, self.conn_cnt, self.cookie = 0, 0, 0
        self.unreplied: set[int] = set()
        self.replies: list[dict] = []          # deferred replies seen by this client's exchanges

    def last_xid(self) -> int:
        return min(self.unreplied) - 1 if self.unreplied else self.xid

    def raw(self, opc: str | int, buffers=(), *, xid=None, flags=0, op_flags=0, transno=0, version=None,
            conn_cnt=None, handle=None, last_xid=None, timeout=30, pb_type=REQUEST, lm_flags=AT,
            pre_versions=(0, 0, 0, 0)) -> tuple[int, bytes]:
        name = opc if isinstance(opc, str) else None
        code = C(opc) if name else opc
        answered = self.last_xid()
        if xid is None:
            self.xid += 1
            xid = self.xid
        connecting = name in ("OST_CONNECT", "OST_DISCONNECT")
        body = {"pb_handle": self.cookie if handle is None else handle, "pb_type": pb_type,
                "pb_version": (VERSIONS.get(name, C("LUSTRE_OST_VERSION")) if version is None else version) | 3,
                "pb_opc": code, "pb_last_xid": (0 if connecting else answered) if last_xid is None else last_xid,
                "pb_transno": transno, "pb_flags": flags, "pb_op_flags": op_flags,
                "pb_conn_cnt": self.conn_cnt if conn_cnt is None else conn_cnt, "pb_timeout": timeout,
                "pb_pre_versions": list(pre_versions)}
        data = CODEC.encode({"header": {"lm_flags": lm_flags}, "body": body,
                             "buffers": [None] + [b.hex() for b in buffers]})
        return xid, data

    def send_bytes(self, xid: int, data: bytes) -> Rep | None:
        result = self.t.exchange(data, xid, self.name)
        self.replies.extend(result.get("replies", []))
        self.last_result = result
        return Rep(bytes.fromhex(result["data"])) if result["data"] is not None else None

    def send(self, opc, buffers=(), **kw) -> Rep | None:
        xid, data = self.raw(opc, buffers, **kw)
        self.last_sent = (xid, data)
        return self.send_bytes(xid, data)

    def connect_buffers(self, flags=None, flags2=None, target=TARGET_UUID, ocd_transno=0) -> list[bytes]:
        f = (self.flags if flags is None else flags) | C("OBD_CONNECT_FULL20") | C("OBD_CONNECT_VERSION")
        ocd = {"ocd_connect_flags": f, "ocd_connect_flags2": self.flags2 if flags2 is None else flags2,
               "ocd_version": 0x02113900, "ocd_transno": ocd_transno}
        return [uuid_buf(target), uuid_buf(self.uuid), SC.encode("lustre_handle", {"cookie": self.handle}),
                SC.encode("obd_connect_data", ocd)]

    def connect(self, buffers=None, **kw) -> Rep | None:
        self.conn_cnt += 1
        rep = self.send("OST_CONNECT", buffers or self.connect_buffers(), **kw)
        if rep is not None and rep.type == REPLY and rep.status == 0:
            self.cookie = rep.body["pb_handle"]
        return rep

    # object operations
    def create(self, oid, valid=0, **fields):
        return self.send("OST_CREATE", [ost_body(oid, valid, **fields)])

    def getattr(self, oid, **kw):
        return self.send("OST_GETATTR", [ost_body(oid)], **kw)

    def setattr(self, oid, valid=FLMTIME, **kw):
        fields = {k: v for k, v in kw.items() if k.startswith("o_")}
        rest = {k: v for k, v in kw.items() if not k.startswith("o_")}
        return self.send("OST_SETATTR", [ost_body(oid, valid, **fields)], **rest)

    def replay(self, xid: int, data: bytes, transno: int, pre_versions=(0, 0, 0, 0)) -> Rep | None:
        """Replay the request sent as (xid, data) with its transno, the cookie of now."""
        msg = CODEC.decode(data, "request")
        body = dict(msg["body"], pb_flags=msg["body"]["pb_flags"] | REPLAY, pb_transno=transno,
                    pb_handle=self.cookie, pb_conn_cnt=self.conn_cnt, pb_pre_versions=list(pre_versions))
        again = CODEC.encode({"header": msg["header"], "body": body, "buffers": [None] + msg["buffers"][1:]})
        return self.send_bytes(xid, again)

    def done(self, flags=REQ_DONE | LOCK_DONE) -> Rep | None:
        return self.send("OBD_PING", flags=flags)


@pytest.fixture
def t():
    return Target()


def connected(t, name="c1", **kw) -> Client:
    c = Client(t, name, **kw)
    rep = c.connect()
    assert rep.type == REPLY and rep.status == 0, rep.body
    return c


# ======================================================================================
# §2 order of checks
# ======================================================================================

def test_row1_undecodable_dropped(t):
    c = connected(t)
    assert t.exchange(b"\0" * 8, 99, "c1") == {"data": None}
    xid, data = c.raw("OBD_PING")
    bad = bytearray(data)
    bad[8:12] = (0x0BD00BD0).to_bytes(4, "little")          # magic V1
    assert t.exchange(bytes(bad), xid, "c1")["data"] is None


def test_row2_not_a_request_dropped(t):
    c = connected(t)
    assert c.send("OBD_PING", pb_type=REPLY) is None


def test_row3_at_without_timeout_dropped(t):
    c = connected(t)
    assert c.send("OBD_PING", timeout=0) is None
    assert c.send("OBD_PING", timeout=0, lm_flags=0).status == 0


def test_row4_stale_conn_cnt_dropped(t):
    c = connected(t)
    assert c.connect().status == 0                            # count 2 stored
    assert c.send("OBD_PING", conn_cnt=1) is None
    assert c.send("OBD_PING").status == 0


@pytest.mark.parametrize("kw", [dict(flags=REPLAY, transno=5), dict(flags=REPLAY), dict(transno=7),
                                dict(flags=REQ_DONE)])
def test_row5_replay_outside_recovery_enodev_and_evicted(t, kw):
    c = connected(t)
    assert c.send("OBD_PING", **kw).is_err("ENODEV")
    assert c.send("OBD_PING").is_err("ENOTCONN")              # evicted: the cookie is unknown


def test_row7_no_export_enotconn(t):
    c = connected(t)
    assert c.send("OBD_PING", handle=0).is_err("ENOTCONN")
    assert c.send("OBD_PING", handle=c.cookie + 12345).is_err("ENOTCONN")
    assert c.send("OST_GETATTR", [ost_body(0)], handle=0).is_err("ENOTCONN")     # before any body check


def test_row8_old_xid_eproto(t):
    c = connected(t)
    for _ in range(3):
        assert c.send("OBD_PING").status == 0
    assert c.send("OBD_PING", xid=2).is_err("EPROTO")                  # 2 <= last xid 3
    assert c.send("OBD_PING", xid=0).is_err("EPROTO")
    rep = c.send("OBD_PING", xid=10, last_xid=9)                       # raises the last xid to 9
    assert rep.status == 0
    assert c.send("OBD_PING", xid=8, last_xid=0).is_err("EPROTO")
    assert c.send("OBD_PING", xid=11, last_xid=0).status == 0


def test_row9_unknown_opcode_eopnotsupp(t):
    c = connected(t)
    rep = c.send(spec.target()["unknown_opcode"])
    assert rep.is_err("EOPNOTSUPP") and rep.body["pb_opc"] == 9999


def test_row10_service_version_einval(t):
    c = connected(t)
    assert c.send("OBD_PING", version=C("LUSTRE_OST_VERSION")).is_err("EINVAL")
    assert c.send("OST_GETATTR", [ost_body(1)], version=C("LUSTRE_OBD_VERSION")).is_err("EINVAL")
    assert c.send("OST_STATFS", version=C("LUSTRE_MDS_VERSION")).is_err("EINVAL")


def test_row8_before_row9_and_row10(t):
    c = connected(t)
    c.send("OBD_PING")
    c.send("OBD_PING")
    assert c.send(9999, xid=1).is_err("EPROTO")


def test_row13_missing_or_short_body_efault(t):
    c = connected(t)
    assert c.send("OST_GETATTR").is_err("EFAULT")
    assert c.send("OST_SETATTR", [ost_body(1)[:207]]).is_err("EFAULT")


def test_row14_bad_object_id_or_sequence_eproto(t):
    c = connected(t)
    assert c.send("OST_GETATTR", [ost_body(0)]).is_err("EPROTO")           # FLID with id 0
    assert c.send("OST_CREATE", [ost_body(0)]).is_err("EPROTO")
    local = {"f_seq": C("FID_SEQ_LOCAL_FILE"), "f_oid": 5, "f_ver": 0}     # not IDIF/MDT0/normal/echo
    assert c.send("OST_GETATTR", [ost_body(fid=local, valid=FLID)]).is_err("EPROTO")
    assert c.send("OST_CREATE", [ost_body(fid=local, valid=0)]).is_err("EPROTO")  # checked without FLID too


def test_row15_has_body_without_flid_eproto(t):
    c = connected(t)
    for opc in ("OST_GETATTR", "OST_SETATTR", "OST_PUNCH", "OST_SYNC"):
        assert c.send(opc, [ost_body(None, FLSIZE | FLBLOCKS, o_blocks=EOF)]).is_err("EPROTO"), opc
    assert c.send("OST_CREATE", [ost_body(None)]).status == 0              # not HAS_BODY


def test_row16_read_only_erofs_reply(t):
    c = connected(t, flags=C("OBD_CONNECT_RDONLY"))
    for opc, body in (("OST_SETATTR", ost_body(1, FLMTIME)), ("OST_CREATE", ost_body(1)),
                      ("OST_DESTROY", ost_body(1)), ("OST_PUNCH", ost_body(1, FLSIZE | FLBLOCKS, o_blocks=EOF))):
        rep = c.send(opc, [body])
        assert rep.type == REPLY and rep.status == e("EROFS") and rep.transno == 0, opc
    assert c.getattr(1).status == e("ENOENT")                              # reads still served


def test_row14_before_row16(t):
    c = connected(t, flags=C("OBD_CONNECT_RDONLY"))
    assert c.send("OST_SETATTR", [ost_body(0)]).is_err("EPROTO")


def test_err_replies_have_no_handle_and_echo_opcode(t):
    c = connected(t)
    rep = c.send("OST_GETATTR")
    assert rep.body["pb_handle"] == 0 and rep.body["pb_opc"] == C("OST_GETATTR")
    assert rep.body["pb_version"] & 0xFFFF == 3


# ======================================================================================
# §3 handlers
# ======================================================================================

def test_ping_and_statfs(t):
    c = connected(t)
    rep = c.send("OBD_PING")
    assert (rep.type, rep.status, rep.transno, len(rep.buffers)) == (REPLY, 0, 0, 1)
    rep = c.send("OST_STATFS")
    assert rep.status == 0 and rep.transno == 0
    statfs = rep.struct("obd_statfs")
    assert statfs["os_bsize"] == 4096 and statfs["os_blocks"] >= statfs["os_bfree"]


def test_create_getattr_destroy(t):
    c = connected(t)
    rep = c.create(7, FLMODE | FLUID, o_mode=0o100640, o_uid=500, o_gid=77)
    assert rep.status == 0 and rep.transno == 0                  # no REPLAY_CREATE negotiated
    assert rep.oa["o_oi"]["oi"] == {"oi_id": 7, "oi_seq": 0}
    assert c.create(7).status == e("EEXIST")
    oa = c.getattr(7).oa
    assert oa["o_size"] == 0 and oa["o_mode"] == 0o640 and oa["o_uid"] == 500 and oa["o_gid"] == 0
    assert oa["o_valid"] & (FLSIZE | FLMODE | FLUID | FLGID | FLATIME | FLMTIME | FLCTIME | FLID) == \
        FLSIZE | FLMODE | FLUID | FLGID | FLATIME | FLMTIME | FLCTIME | FLID
    rep = c.send("OST_DESTROY", [ost_body(7)])
    assert rep.status == 0 and rep.transno != 0
    rep = c.send("OST_DESTROY", [ost_body(7)])
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("ENOENT"), 0)
    rep = c.getattr(7)
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("ENOENT"), 0)
    assert len(rep.buffers) == 2                                 # the handler's reply carries an ost_body


def test_create_without_flid_gets_a_fresh_id(t):
    c = connected(t)
    c.create(1)
    a, b = c.send("OST_CREATE", [ost_body(None)]), c.send("OST_CREATE", [ost_body(None)])
    ids = {a.oa["o_oi"]["oi"]["oi_id"], b.oa["o_oi"]["oi"]["oi_id"]}
    assert len(ids) == 2 and 1 not in ids and 0 not in ids
    for oid in ids:
        assert c.getattr(oid).status == 0


def test_setattr_honours_valid_bits(t):
    c = connected(t)
    c.create(3)
    rep = c.setattr(3, FLMTIME | FLMODE | FLTYPE | FLGID, o_mtime=1234, o_atime=99, o_mode=0o100755,
                    o_uid=42, o_gid=43, o_ctime=5)
    assert rep.status == 0 and rep.transno != 0
    oa = c.getattr(3).oa
    assert (oa["o_mtime"], oa["o_mode"], oa["o_gid"]) == (1234, 0o755, 43)
    assert (oa["o_atime"], oa["o_uid"], oa["o_ctime"]) == (0, 0, 0)        # no bit, not applied


def test_setattr_size_eperm_and_enoent(t):
    c = connected(t)
    c.create(3)
    rep = c.setattr(3, FLSIZE | FLMTIME, o_size=100, o_mtime=9)
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("EPERM"), 0)
    assert c.getattr(3).oa["o_mtime"] == 0                                 # nothing changed
    assert c.setattr(3, FLSIZE | FLMTIME, o_size=EOF, o_mtime=9).status == 0
    assert c.getattr(3).oa["o_mtime"] == 9
    rep = c.setattr(4)
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("ENOENT"), 0)
    assert c.setattr(4, FLSIZE, o_size=1).status == e("EPERM")            # checked before existence


def test_punch(t):
    c = connected(t)
    c.create(5)
    rep = c.send("OST_PUNCH", [ost_body(5, FLSIZE | FLBLOCKS, o_size=4096, o_blocks=EOF)])
    assert rep.status == 0 and rep.transno != 0
    assert c.getattr(5).oa["o_size"] == 4096
    for valid in (FLSIZE, FLBLOCKS, 0):
        rep = c.send("OST_PUNCH", [ost_body(5, valid, o_size=0, o_blocks=EOF)])
        assert rep.is_err("EPROTO"), valid                                    # serious: ERR
    rep = c.send("OST_PUNCH", [ost_body(5, FLSIZE | FLBLOCKS, o_size=0, o_blocks=8192)])
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("EPROTO"), 0)
    rep = c.send("OST_PUNCH", [ost_body(6, FLSIZE | FLBLOCKS, o_size=0, o_blocks=EOF)])
    assert (rep.type, rep.status) == (REPLY, e("ENOENT"))
    assert c.getattr(5).oa["o_size"] == 4096


def test_sync_commits_everything(t):
    c = connected(t)
    c.create(1)
    transnos = [c.setattr(1, o_mtime=i).transno for i in range(3)]
    assert c.send("OBD_PING").committed == transnos[0]                    # §8: two newer ones pending
    rep = c.send("OST_SYNC", [ost_body(1)])
    assert rep.status == 0 and rep.transno == 0 and rep.committed == transnos[-1]
    assert c.send("OST_SYNC", [ost_body(2)]).status == e("ENOENT")


def test_disconnect_forgets_the_export(t):
    c = connected(t)
    rep = c.send("OST_DISCONNECT")
    assert (rep.type, rep.status, rep.body["pb_handle"]) == (REPLY, 0, 0)
    assert c.send("OBD_PING").is_err("ENOTCONN")
    rep = c.connect()
    assert rep.status == 0 and not rep.body["pb_op_flags"] & RECONNECT


def test_ost_id_forms_name_the_same_object(t):
    oi_form = {"oi": {"oi_id": 0x1234, "oi_seq": 0}, "oi_fid": {}}
    idif = {"oi": {"oi_id": 0, "oi_seq": 0}, "oi_fid": {"f_seq": C("FID_SEQ_IDIF"), "f_oid": 0x1234, "f_ver": 0}}
    idif["oi"]["oi_seq"] = C("FID_SEQ_IDIF")
    assert (ostid_seq(oi_form), ostid_id(oi_form)) == (0, 0x1234) == (ostid_seq(idif), ostid_id(idif))
    c = connected(t)
    assert c.send("OST_CREATE", [ost_body(fid={"f_seq": C("FID_SEQ_IDIF"), "f_oid": 0x1234, "f_ver": 0},
                                          valid=FLID | FLGROUP)]).status == 0
    assert c.getattr(0x1234).status == 0
    normal = {"f_seq": C("FID_SEQ_NORMAL") + 5, "f_oid": 9, "f_ver": 0}
    assert c.send("OST_CREATE", [ost_body(fid=normal, valid=FLID)]).status == 0
    assert c.send("OST_GETATTR", [ost_body(fid=normal, valid=FLID)]).status == 0
    assert c.getattr(9).status == e("ENOENT")


def test_big_endian_client_is_understood(t):
    """A request from a big-endian client: header, body and ost_body byte-swapped."""
    c = connected(t)
    c.create(0x55)
    xid, data = c.raw("OST_SETATTR", [ost_body(0x55, FLMTIME | FLUID, o_mtime=0x0102030405, o_uid=0x0A0B)])
    rep = c.send_bytes(xid, to_big_endian(data))
    assert rep.status == 0 and rep.transno != 0
    oa = c.getattr(0x55).oa
    assert (oa["o_mtime"], oa["o_uid"]) == (0x0102030405, 0x0A0B)


def to_big_endian(data: bytes) -> bytes:
    """Byte-swap a little-endian request (one ost_body in buffer 1) as a big-endian sender writes it."""
    msg = CODEC.decode(data, "request")
    out = bytearray(data)
    hdr = spec.layout("lustre_msg_v2")
    for f in hdr.fields:
        if f.name == "lm_padding_3":
            continue
        count = msg["header"]["lm_bufcount"] if f.flexible else 1
        for i in range(count):
            at = f.offset + 4 * i
            out[at:at + 4] = out[at:at + 4][::-1]
    base = -(-(32 + 4 * len(msg["buflens"])) // 8) * 8
    unswabbed = set(spec.facts()["unswabbed"]["ptlrpc_body_v3"])
    for f in spec.layout("ptlrpc_body_v3").fields:
        if f.name in unswabbed:
            continue
        size = f.elem_size or f.size
        for i in range(f.count or 1):
            at = base + f.offset + i * size
            out[at:at + size] = out[at:at + size][::-1]
    if len(msg["buffers"]) > 1:
        start = base + -(-msg["buflens"][0] // 8) * 8
        buf = bytearray(out[start:start + 208])
        SC._swab("ost_body", buf, 0, len(buf))
        out[start:start + 208] = buf
    return bytes(out)


# ======================================================================================
# §4 connections
# ======================================================================================

def test_first_connect(t):
    c = Client(t, "c1", flags=C("OBD_CONNECT_VBR") | C("OBD_CONNECT_LRU_RESIZE"))
    rep = c.connect()
    assert (rep.type, rep.status, rep.transno) == (REPLY, 0, 0)
    assert rep.body["pb_handle"] != 0 and rep.body["pb_op_flags"] & REPLAYABLE
    assert not rep.body["pb_op_flags"] & (RECONNECT | RECOVERING)
    ocd = rep.struct("obd_connect_data")
    asked = c.connect_buffers()[3]
    asked_flags = SC.decode("obd_connect_data", asked)["fields"]["ocd_connect_flags"]
    assert ocd["ocd_connect_flags"] & ~asked_flags == 0
    assert ocd["ocd_connect_flags"] & C("OBD_CONNECT_FULL20")
    assert not ocd["ocd_connect_flags"] & C("OBD_CONNECT_LRU_RESIZE")      # not offered by the reference


def test_reconnect_keeps_cookie_and_restarts_xids(t):
    c = connected(t)
    cookie = c.cookie
    for _ in range(5):
        c.send("OBD_PING")
    rep = c.connect()
    assert rep.status == 0 and rep.body["pb_handle"] == cookie
    assert rep.body["pb_op_flags"] & (RECONNECT | REPLAYABLE) == RECONNECT | REPLAYABLE
    assert c.send("OBD_PING", xid=3, last_xid=0).status == 0              # last xid restarted at 0


def test_reconnect_ealready_and_drop(t):
    c = connected(t)
    c.connect()                                                            # count 2
    rep = c.send("OST_CONNECT", c.connect_buffers(), conn_cnt=2)
    assert rep.is_err("EALREADY")
    assert c.send("OST_CONNECT", c.connect_buffers(), conn_cnt=1) is None  # row 4
    assert c.send("OST_CONNECT", c.connect_buffers(), conn_cnt=1, handle=0).is_err("EALREADY")
    other = Client(t, "c1", handle=c.handle + 1)                            # same UUID, another handle
    other.conn_cnt = 10
    assert other.connect().is_err("EALREADY")
    assert c.send("OBD_PING").status == 0


def test_connect_buffer_checks(t):
    c = Client(t, "c1")
    assert c.connect(buffers=c.connect_buffers(target="lustre-OST0009_UUID")).is_err("ENODEV")
    assert c.connect(buffers=c.connect_buffers()[:3]).is_err("EPROTO")
    bufs = c.connect_buffers()
    bufs[3] = SC.encode("obd_connect_data", {"ocd_connect_flags": C("OBD_CONNECT_VERSION")})
    assert c.connect(buffers=bufs).is_err("EPROTO")                        # FULL20 missing
    assert c.connect().status == 0


def test_handle_zero_outside_connect_replies_and_last_committed_on_connect(t):
    c = connected(t)
    c.create(1)
    for i in range(4):
        assert c.setattr(1, o_mtime=i).body["pb_handle"] == 0
    assert c.getattr(1).body["pb_handle"] == 0
    rep = c.connect()
    assert rep.transno == 0 and rep.committed == c.send("OBD_PING").committed != 0


def test_replay_create_gives_creates_a_transno(t):
    plain = connected(t, "p")
    rc = connected(t, "r", flags=C("OBD_CONNECT_FLAGS2"), flags2=C("OBD_CONNECT2_REPLAY_CREATE"))
    half = connected(t, "h", flags2=C("OBD_CONNECT2_REPLAY_CREATE"))       # flags2 without FLAGS2
    assert plain.create(1).transno == 0
    assert rc.create(2).transno != 0
    assert half.create(3).transno == 0
    assert rc.create(2).transno == 0                                        # -EEXIST: failed, no transno


# ======================================================================================
# §5 transnos, commits, resends
# ======================================================================================

def test_transnos_increase_across_clients_and_only_on_transactions(t):
    a, b = connected(t, "a"), connected(t, "b")
    a.create(1)
    b.create(2)
    seen = []
    for client, oid in ((a, 1), (b, 2), (a, 1), (b, 2)):
        rep = client.setattr(oid, o_mtime=len(seen))
        seen.append(rep.transno)
        assert client.getattr(oid).transno == 0
        assert client.send("OST_STATFS").transno == 0
        assert client.send("OBD_PING").transno == 0
        assert client.setattr(99).transno == 0                             # failed
    assert seen == sorted(seen) and len(set(seen)) == 4 and seen[0] >= 1 << 32


def test_last_committed_per_client_lags_and_never_decreases(t):
    a, b = connected(t, "a"), connected(t, "b")
    a.create(1)
    b.create(2)
    ta = [a.setattr(1, o_mtime=i).transno for i in range(3)]
    tb = [b.setattr(2, o_mtime=i).transno for i in range(3)]
    ra, rb = a.send("OBD_PING"), b.send("OBD_PING")
    assert ra.committed == ta[-1]                       # a's transactions all have 2 newer ones
    assert rb.committed == tb[0]                        # b's last two are pending
    issued = max(ta + tb)
    values = []
    for i in range(6):
        rep = a.setattr(1, o_mtime=100 + i)
        issued = max(issued, rep.transno)
        assert rep.committed <= issued
        values.append(rep.committed)
    assert values == sorted(values)


def test_resend_gets_the_saved_reply_and_is_not_executed_again(t):
    c = connected(t)
    c.create(1)
    first = c.setattr(1, o_mtime=5)
    xid, data = c.last_sent
    c.unreplied.add(xid)                                 # the client never saw this reply
    c.setattr(1, o_mtime=7)
    msg = CODEC.decode(data, "request")
    resent = CODEC.encode({"header": msg["header"], "buffers": [None] + msg["buffers"][1:],
                           "body": dict(msg["body"], pb_flags=RESENT, pb_last_xid=c.last_xid())})
    again = c.send_bytes(xid, resent)
    assert (again.type, again.status, again.transno, again.buffers[1:]) == \
        (first.type, first.status, first.transno, first.buffers[1:])
    assert c.getattr(1).oa["o_mtime"] == 7                                 # not executed again
    assert c.send_bytes(xid, data) is None                                 # same XID, no RESENT: dropped
    c.unreplied.discard(xid)
    c.send("OBD_PING")                                                     # pb_last_xid passes xid
    assert (c.uuid, xid) not in c.t.saved                                  # released
    assert c.send_bytes(xid, resent).is_err("EPROTO")                      # now an old XID


def test_resend_without_saved_reply_is_executed(t):
    c = connected(t)
    c.create(1)
    rep = c.getattr(1)
    xid, data = c.last_sent
    c.unreplied.add(xid)
    msg = CODEC.decode(data, "request")
    resent = CODEC.encode({"header": msg["header"], "buffers": [None] + msg["buffers"][1:],
                           "body": dict(msg["body"], pb_flags=RESENT, pb_last_xid=c.last_xid())})
    assert c.send_bytes(xid, resent).status == 0 == rep.status
    rep = c.send("OST_SETATTR", [ost_body(1, FLMTIME, o_mtime=3)], flags=RESENT)   # original never arrived
    assert rep.status == 0 and rep.transno != 0


def test_failed_mutable_replies_are_saved_too(t):
    c = connected(t)
    rep = c.setattr(9)
    xid, data = c.last_sent
    c.unreplied.add(xid)
    c.create(9)
    msg = CODEC.decode(data, "request")
    resent = CODEC.encode({"header": msg["header"], "buffers": [None] + msg["buffers"][1:],
                           "body": dict(msg["body"], pb_flags=RESENT, pb_last_xid=c.last_xid())})
    assert c.send_bytes(xid, resent).status == rep.status == e("ENOENT")


# ======================================================================================
# §7 recovery
# ======================================================================================

def lagging(**kw) -> Target:
    """A target that commits only on OST_SYNC (so that every change of a test is uncommitted)."""
    return Target(TargetConfig(commit_lag=10 ** 6, **kw))


def test_restart_loses_uncommitted_keeps_committed(t):
    c = connected(t)
    c.create(1)
    transnos = [c.setattr(1, o_mtime=i + 1).transno for i in range(3)]     # mtime 1 committed
    t.restart()
    assert t.recovering
    assert c.send("OBD_PING").is_err("ENOTCONN")                           # cookies are not remembered
    old = c.cookie
    rep = c.connect()
    assert rep.status == 0 and rep.body["pb_handle"] not in (0, old)
    assert rep.body["pb_op_flags"] & (RECOVERING | REPLAYABLE) == RECOVERING | REPLAYABLE
    assert rep.committed == transnos[0]
    done = c.done()
    assert done.status == 0 and not t.recovering                           # the only client is done
    assert c.getattr(1).oa["o_mtime"] == 1
    assert c.setattr(1, o_mtime=9).transno > ((transnos[-1] >> 32) + 1) << 32   # epoch jump


def test_restart_without_clients_does_not_recover(t):
    c = connected(t)
    c.create(1)
    before = c.setattr(1).transno
    c.send("OST_DISCONNECT")
    t.restart()
    assert not t.recovering
    c = connected(t)
    assert c.setattr(1).transno > ((before >> 32) + 1) << 32


def test_replays_in_transno_order_across_clients(t):
    t = lagging()
    a, b = connected(t, "a"), connected(t, "b")
    a.create(1)
    b.create(2)
    a1 = a.setattr(1, o_mtime=10); a1_sent = a.last_sent
    b2 = b.setattr(2, o_mtime=20); b2_sent = b.last_sent
    a3 = a.setattr(1, o_mtime=30); a3_sent = a.last_sent
    t.restart()
    assert a.getattr(1, handle=0).is_err("ENOTCONN")
    assert a.connect().status == 0
    assert a.replay(*a1_sent, a1.transno) is None                  # waits for b to reconnect
    rep = b.connect()
    assert rep.status == 0
    [deferred] = b.replies                                         # a's replay ran when b came back
    assert (deferred["client"], deferred["xid"]) == ("a", a1_sent[0])
    r = Rep(bytes.fromhex(deferred["data"]))
    assert (r.type, r.status, r.transno) == (REPLY, 0, a1.transno)
    assert a.replay(*a3_sent, a3.transno) is None                  # b's transno comes first
    rep = b.replay(*b2_sent, b2.transno)
    assert (rep.status, rep.transno) == (0, b2.transno)
    [deferred] = b.replies[1:]
    assert deferred["xid"] == a3_sent[0] and Rep(bytes.fromhex(deferred["data"])).transno == a3.transno
    assert a.done() is None                                         # held until every client is done
    rep = b.done()
    assert rep.status == 0 and not t.recovering
    [final] = b.replies[2:]
    assert final["client"] == "a" and Rep(bytes.fromhex(final["data"])).status == 0
    assert a.getattr(1).oa["o_mtime"] == 30 and b.getattr(2).oa["o_mtime"] == 20
    assert a.setattr(1).transno > (((a3.transno >> 32) + 1) << 32)


def test_gap_is_skipped_when_every_client_waits(t):
    t = lagging()
    a, b = connected(t, "a"), connected(t, "b")
    a.create(1)
    b.create(2)
    a1 = a.setattr(1, o_mtime=1); a1_sent = a.last_sent
    b.setattr(2, o_mtime=2)                                         # lost: b will not replay it
    a3 = a.setattr(1, o_mtime=3); a3_sent = a.last_sent
    t.restart()
    a.connect(); b.connect()
    assert a.replay(*a1_sent, a1.transno).transno == a1.transno
    assert a.replay(*a3_sent, a3.transno) is None                   # b has not said it is done
    assert b.done(REQ_DONE) is None                                 # b's replays are over: the gap is skipped
    [ran] = b.replies
    assert ran["xid"] == a3_sent[0] and Rep(bytes.fromhex(ran["data"])).transno == a3.transno
    assert a.done(REQ_DONE).status == 0                             # replays are over: both pings answered
    [pong] = a.replies
    assert pong["client"] == "b" and Rep(bytes.fromhex(pong["data"])).status == 0
    assert a.done(LOCK_DONE) is None
    assert t.recovering
    assert b.done(LOCK_DONE).status == 0 and not t.recovering
    assert b.getattr(2).oa["o_mtime"] == 0 and a.getattr(1).oa["o_mtime"] == 3


def test_end_recovery_evicts_a_client_that_never_came_back(t):
    t = lagging()
    a, b = connected(t, "a"), connected(t, "b")
    t.restart()
    a.connect()
    assert a.done() is None                                          # waiting for b
    replies = t.end_recovery()
    assert [(r["client"], r["xid"]) for r in replies] == [("a", a.last_sent[0])]
    assert Rep(bytes.fromhex(replies[0]["data"])).status == 0
    assert not t.recovering
    assert b.send("OBD_PING").is_err("ENOTCONN")
    rep = b.connect()
    assert rep.status == 0 and not rep.body["pb_op_flags"] & (RECONNECT | RECOVERING)
    assert t.end_recovery() == []


def test_end_recovery_drops_replays_of_evicted_clients_and_runs_the_rest(t):
    t = lagging()
    a, b = connected(t, "a"), connected(t, "b")
    a.create(1)
    b.create(2)
    a1 = a.setattr(1, o_mtime=1); a1_sent = a.last_sent
    b.setattr(2, o_mtime=2)
    a3 = a.setattr(1, o_mtime=3); a3_sent = a.last_sent
    t.restart()
    a.connect(); b.connect()
    a.replay(*a1_sent, a1.transno)
    assert a.replay(*a3_sent, a3.transno) is None
    assert a.done() is None                                          # a is done; b is not
    replies = t.end_recovery()
    assert [r["xid"] for r in replies] == [a3_sent[0], a.last_sent[0]]
    assert b.send("OBD_PING").is_err("ENOTCONN")
    assert a.getattr(1).oa["o_mtime"] == 3


def test_recovery_filter(t):
    t = lagging()
    a, b = connected(t, "a"), connected(t, "b")
    a.create(1)
    t.restart()
    a.connect()
    assert a.getattr(1).is_err("EAGAIN")
    assert a.send("OST_STATFS").is_err("EAGAIN")
    assert a.send("OBD_PING").status == 0                           # not a replay: served at once
    rep = a.setattr(1, o_mtime=4)
    assert rep.status == 0 and rep.transno != 0
    assert a.done(LOCK_DONE | REQ_DONE) is None                     # held until recovery ends
    new = Client(t, "new")
    assert new.connect().is_err("EBUSY")
    b.connect()
    assert b.send("OST_DISCONNECT").status == 0                     # served; b leaves
    [final] = b.replies                                             # a was the last one waited for
    assert final["client"] == "a" and not t.recovering
    assert new.connect().status == 0


def test_recovery_reconnect_count_one_is_refused(t):
    c = connected(t)
    t.restart()
    assert c.send("OST_CONNECT", c.connect_buffers(), conn_cnt=1, handle=0).is_err("EALREADY")
    assert c.send("OST_CONNECT", c.connect_buffers(), conn_cnt=5, handle=0).status == 0


def test_vbr_versions(t):
    t = lagging()
    c = connected(t, flags=C("OBD_CONNECT_VBR"))
    c.create(1)
    r1 = c.setattr(1, o_mtime=1); s1 = c.last_sent
    r2 = c.setattr(1, o_mtime=2); s2 = c.last_sent
    assert r1.body["pb_pre_versions"][0] == 0 and r2.body["pb_pre_versions"][0] == r1.transno
    t.restart()
    c.connect()
    rep = c.replay(*s1, r1.transno, (r1.body["pb_pre_versions"]))
    assert (rep.status, rep.transno) == (0, r1.transno)
    rep = c.replay(*s2, r2.transno, (12345, 0, 0, 0))
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("EOVERFLOW"), 0)
    c.done()
    assert not t.recovering
    assert c.send("OBD_PING").is_err("ENOTCONN")                    # evicted: version recovery failed


def test_vbr_matching_version_replays(t):
    t = lagging()
    c = connected(t, flags=C("OBD_CONNECT_VBR"))
    c.create(1)
    r1 = c.setattr(1, o_mtime=1); s1 = c.last_sent
    r2 = c.setattr(1, o_mtime=2); s2 = c.last_sent
    t.restart()
    c.connect()
    c.replay(*s1, r1.transno, r1.body["pb_pre_versions"])
    rep = c.replay(*s2, r2.transno, r2.body["pb_pre_versions"])
    assert (rep.status, rep.transno) == (0, r2.transno)
    assert c.done().status == 0
    assert c.getattr(1).oa["o_mtime"] == 2


def test_replay_of_a_committed_transaction_answers_the_saved_reply(t):
    c = connected(t)
    c.create(1)
    r1 = c.setattr(1, o_mtime=1); s1 = c.last_sent
    c.unreplied.add(s1[0])
    c.send("OST_SYNC", [ost_body(1)])
    c.setattr(1, o_mtime=2)
    c.send("OST_SYNC", [ost_body(1)])
    t.restart()
    c.connect()
    rep = c.replay(*s1, r1.transno)
    assert (rep.status, rep.transno) == (0, r1.transno)
    c.done()
    assert c.getattr(1).oa["o_mtime"] == 2                          # not run again


def test_replay_claimed_by_another_client_is_dropped(t):
    t = lagging()
    a, b = connected(t, "a"), connected(t, "b")
    a.create(1)
    r1 = a.setattr(1, o_mtime=1); s1 = a.last_sent
    a.setattr(1, o_mtime=2)
    t.restart()
    a.connect(); b.connect()
    assert b.send("OST_SETATTR", [ost_body(1, FLMTIME, o_mtime=7)], flags=REPLAY, transno=r1.transno + 1) is None
    assert a.replay(*s1, r1.transno).transno == r1.transno
    assert b.replies == [] and len(a.replies) == 1                  # b's replay ran after a's
    assert a.send("OST_SETATTR", [ost_body(1, FLMTIME, o_mtime=8)], flags=REPLAY,
                  transno=r1.transno + 1) is None                   # claimed by b


def test_transno_hint_on_reconnect(t):
    t = lagging()
    c = connected(t)
    t.restart()
    t.next_recovery_transno += 10
    hint = t.next_recovery_transno - 5
    rep = c.send("OST_CONNECT", c.connect_buffers(ocd_transno=hint), conn_cnt=2, handle=0,
                 op_flags=C("MSG_CONNECT_TRANSNO"))
    assert rep.status == 0 and t.next_recovery_transno == hint


# ======================================================================================
# the testee: ops, errors, the exec path
# ======================================================================================

def test_testee_ops_and_bad_arguments():
    testee = make_testee()
    hello = testee.handle({"op": "hello"})["result"]
    assert {"target", "restart"} <= set(hello["capabilities"])
    c = Client(Target(), "c1")
    c.conn_cnt = 1
    xid, data = c.raw("OST_CONNECT", c.connect_buffers())
    r = testee.handle({"op": "exchange", "data": data.hex(), "xid": xid, "client": "c1"})
    assert r["ok"] and Rep(bytes.fromhex(r["result"]["data"])).status == 0
    for bad in ({"data": "zz", "xid": 1, "client": "c"}, {"data": "00", "xid": -1, "client": "c"},
                {"data": "00", "xid": 1 << 64, "client": "c"}, {"data": "00", "xid": True, "client": "c"},
                {"data": "00", "xid": 1, "client": 5}, {"xid": 1, "client": "c"}):
        assert testee.handle(dict(bad, op="exchange"))["error"] == "EINVAL", bad
    restarted = testee.handle({"op": "restart"})
    assert restarted["ok"] and set(restarted["result"]) == {"last_committed"}
    assert isinstance(restarted["result"]["last_committed"], int)
    assert testee.handle({"op": "end_recovery"})["ok"]
    assert testee.handle({"op": "reset"}) == {"ok": True, "result": {}}
    assert testee.handle({"op": "end_recovery"}) == {"ok": True, "result": {"replies": []}}
    r = testee.handle({"op": "exchange", "data": data.hex(), "xid": xid, "client": "c1"})
    assert Rep(bytes.fromhex(r["result"]["data"])).status == 0          # a fresh target after reset
    plain = make_testee(capabilities=("decode",))
    assert plain.handle({"op": "exchange", "data": data.hex(), "xid": 1, "client": "c"})["error"] == "EOPNOTSUPP"


def test_exec_testee_serves_exchange():
    from ptlrpc_conformance.harness.transport.loader import load_adapter
    adapter = load_adapter("exec:" + shlex.join([sys.executable, "-m", "ptlrpc_conformance.reference"]))
    with adapter:
        assert adapter.supports("target") and adapter.supports("restart")
        c = Client(Target(), "c1")
        c.conn_cnt = 1
        xid, data = c.raw("OST_CONNECT", c.connect_buffers())
        out = adapter.call({"op": "exchange", "data": data.hex(), "xid": xid, "client": "c1"})
        assert out.ok, out.describe()
        rep = Rep(bytes.fromhex(out.result["data"]))
        assert (rep.type, rep.status) == (REPLY, 0) and rep.body["pb_handle"] != 0
        assert set(adapter.call({"op": "restart"}).result) == {"last_committed"}
        assert adapter.call({"op": "end_recovery"}, probe=True).result == {"replies": []}


def test_testee_traffic_validates_against_the_schema():
    jsonschema = pytest.importorskip("jsonschema")
    import json
    from importlib import resources
    schema = json.loads(resources.files("ptlrpc_conformance.schemas").joinpath("testee-protocol-v1.json").read_text())

    def sub(name):
        return jsonschema.Draft202012Validator(dict(schema["$defs"][name], **{"$defs": schema["$defs"]}))

    line = jsonschema.Draft202012Validator(schema)
    testee = make_testee(target_config=TargetConfig(commit_lag=100))
    a, b = Client(Target(), "a"), Client(Target(), "b")
    requests = []

    def call(request):
        request = dict(request, id=len(requests) + 1)
        requests.append(request)
        response = dict(testee.handle(request), id=request["id"])
        line.validate(request)
        line.validate(response)
        return response

    for c in (a, b):
        c.conn_cnt = 1
        xid, data = c.raw("OST_CONNECT", c.connect_buffers())
        r = call({"op": "exchange", "data": data.hex(), "xid": xid, "client": c.name})
        sub("exchange_result").validate(r["result"])
        c.cookie = Rep(bytes.fromhex(r["result"]["data"])).body["pb_handle"]
    xid, data = a.raw("OBD_PING")
    sub("exchange_result").validate(call({"op": "exchange", "data": data.hex(), "xid": xid, "client": "a"})["result"])
    sub("empty_result").validate(call({"op": "restart"})["result"])
    for c in (a, b):
        c.conn_cnt += 1
        xid, data = c.raw("OST_CONNECT", c.connect_buffers(), handle=0)
        r = call({"op": "exchange", "data": data.hex(), "xid": xid, "client": c.name})
        c.cookie = Rep(bytes.fromhex(r["result"]["data"])).body["pb_handle"]
    xid, data = a.raw("OBD_PING", flags=REQ_DONE | LOCK_DONE)
    r = call({"op": "exchange", "data": data.hex(), "xid": xid, "client": "a"})
    assert r["result"] == {"data": None}
    xid, data = b.raw("OBD_PING", flags=REQ_DONE | LOCK_DONE)
    r = call({"op": "exchange", "data": data.hex(), "xid": xid, "client": "b"})
    sub("exchange_result").validate(r["result"])
    assert r["result"]["replies"][0]["client"] == "a"
    sub("end_recovery_result").validate(call({"op": "end_recovery"})["result"])
    sub("empty_result").validate(call({"op": "reset"})["result"])


# ======================================================================================
# every broken target of tests/iuts.py is caught by a scenario the correct one passes
# ======================================================================================

sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
from iuts import TARGET_FAMILIES  # noqa: E402


def _setattr_pair(t):
    c = connected(t)
    c.create(1)
    return c, [c.setattr(1, o_mtime=i) for i in range(4)]


def _recovery(t, **kw):
    """Two clients, three lost transactions (a, b, a), a restart, both back."""
    a, b = connected(t, "a"), connected(t, "b")
    a.create(1)
    b.create(2)
    sent = []
    for client, oid, mtime in ((a, 1, 10), (b, 2, 20), (a, 1, 30)):
        rep = client.setattr(oid, o_mtime=mtime)
        sent.append((client, client.last_sent, rep.transno))
    t.restart()
    a.connect()
    b.connect()
    return a, b, sent


def bug_transno_reused(t):
    _, reps = _setattr_pair(t)
    return len({r.transno for r in reps}) < len(reps)


def bug_transno_on_getattr(t):
    c = connected(t)
    c.create(1)
    return c.getattr(1).transno != 0


def bug_transno_on_failure(t):
    c = connected(t)
    return c.setattr(5).transno != 0


def bug_last_committed_backwards(t):
    c, _ = _setattr_pair(t)
    values = [c.send("OBD_PING").committed for _ in range(4)]
    return values != sorted(values)


def bug_last_committed_ahead(t):
    c, reps = _setattr_pair(t)
    return c.send("OBD_PING").committed > max(r.transno for r in reps)


def bug_handler_error_as_err(t):
    return connected(t).getattr(9).type == ERR


def bug_early_rejection_as_reply(t):
    return connected(t).send("OBD_PING", handle=0).type == REPLY


def bug_replies_to_undecodable(t):
    return t.exchange(b"\1" * 40, 1, "c1")["data"] is not None


def bug_err_status_positive(t):
    return connected(t).send(9999).status > 0


def bug_handle_in_replies(t):
    return connected(t).send("OBD_PING").body["pb_handle"] != 0


def bug_no_reconnect_flag(t):
    c = connected(t)
    return not c.connect().body["pb_op_flags"] & RECONNECT


def bug_no_ealready(t):
    c = connected(t)
    c.connect()
    return c.send("OST_CONNECT", c.connect_buffers(), conn_cnt=2).status == 0


def bug_unknown_handle_served(t):
    return connected(t).send("OBD_PING", handle=12345).status == 0


def bug_stale_conn_cnt_served(t):
    c = connected(t)
    c.connect()
    return c.send("OBD_PING", conn_cnt=1) is not None


def bug_resend_executed_twice(t):
    c = connected(t)
    c.create(1)
    first = c.setattr(1, o_mtime=5)
    xid, data = c.last_sent
    c.unreplied.add(xid)
    msg = CODEC.decode(data, "request")
    resent = CODEC.encode({"header": msg["header"], "buffers": [None] + msg["buffers"][1:],
                           "body": dict(msg["body"], pb_flags=RESENT, pb_last_xid=c.last_xid())})
    return c.send_bytes(xid, resent).transno != first.transno


def bug_setattr_ignores_valid(t):
    c = connected(t)
    c.create(1)
    c.setattr(1, FLMTIME, o_mtime=5, o_uid=77)
    return c.getattr(1).oa["o_uid"] == 77


def bug_punch_without_size_blocks(t):
    c = connected(t)
    c.create(1)
    return c.send("OST_PUNCH", [ost_body(1, FLSIZE, o_size=0)]).type == REPLY


def bug_replay_outside_recovery(t):
    c = connected(t)
    c.create(1)
    return c.setattr(1, flags=REPLAY, transno=1 << 33).type != ERR


def bug_replay_new_transno(t):
    t.config = t.config.but(commit_lag=100)
    a, b, sent = _recovery(t)
    client, (xid, data), transno = sent[0]
    return client.replay(xid, data, transno).transno != transno


def bug_replays_in_arrival_order(t):
    t.config = t.config.but(commit_lag=100)
    a, b, sent = _recovery(t)
    client, (xid, data), transno = sent[2]
    return client.replay(xid, data, transno) is not None        # a's second replay ran before b's


def bug_no_epoch_jump(t):
    a, b, sent = _recovery(t)
    a.done()
    b.done()
    return a.setattr(1).transno <= ((sent[-1][2] >> 32) + 1) << 32


def bug_restart_keeps_uncommitted(t):
    t.config = t.config.but(commit_lag=100)
    a, b, sent = _recovery(t)
    a.done()
    b.done()
    return a.getattr(1).oa["o_mtime"] != 0


def bug_restart_loses_committed(t):
    a, b, sent = _recovery(t)
    a.done()
    b.done()
    return a.getattr(1).status != 0


DETECTORS = {name: globals()["bug_" + name[len("target_"):]] for name in TARGET_FAMILIES}


@pytest.mark.parametrize("name", sorted(TARGET_FAMILIES))
def test_broken_target_is_detectable(name):
    factory, what, ids = TARGET_FAMILIES[name]
    assert what and ids and all(i.startswith(("TGT-", "RCV-")) for i in ids)
    testee = factory()
    assert {"target", "restart"} <= set(testee.hello()["capabilities"])
    assert DETECTORS[name](testee.target), f"{name}: the bug does not show"
    assert not DETECTORS[name](Target()), f"{name}: the correct target shows it too"
