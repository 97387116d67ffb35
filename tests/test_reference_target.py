"""The bundled reference OST target (reference/target/): a Lustre 2.17.57 OST as its code
reads (ofd on an ldiskfs OSD; the functions named in comments are Lustre's).

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
from ptlrpc_conformance.reference.target_config import OST_CONNECT_SUPPORTED
from ptlrpc_conformance.mutants import broken_targets as mutant_targets

C = spec.constant
CODEC, SC = Codec(), StructCodec()
REQUEST, REPLY, ERR = C("PTL_RPC_MSG_REQUEST"), C("PTL_RPC_MSG_REPLY"), C("PTL_RPC_MSG_ERR")
AT = C("MSGHDR_AT_SUPPORT")
FLID, FLGROUP, FLSIZE, FLBLOCKS = C("OBD_MD_FLID"), C("OBD_MD_FLGROUP"), C("OBD_MD_FLSIZE"), C("OBD_MD_FLBLOCKS")
FLATIME, FLMTIME, FLCTIME = C("OBD_MD_FLATIME"), C("OBD_MD_FLMTIME"), C("OBD_MD_FLCTIME")
FLMODE, FLTYPE, FLUID, FLGID = C("OBD_MD_FLMODE"), C("OBD_MD_FLTYPE"), C("OBD_MD_FLUID"), C("OBD_MD_FLGID")
FLPROJID, FLFLAGS, FLDATAVERSION = C("OBD_MD_FLPROJID"), C("OBD_MD_FLFLAGS"), C("OBD_MD_FLDATAVERSION")
FLOBJCOUNT = C("OBD_MD_FLOBJCOUNT")
EOF = C("OBD_OBJECT_EOF")
RDONLY, TRANSNO_FLAG = C("OBD_CONNECT_RDONLY"), C("OBD_CONNECT_TRANSNO")
REPLAY_CREATE = dict(flags=C("OBD_CONNECT_FLAGS2"), flags2=C("OBD_CONNECT2_REPLAY_CREATE"))
IDIF = C("FID_SEQ_IDIF")
FRESH_MODE = 0o107666                    # S_IFREG | S_ISUID | S_ISGID | S_ISVTX | 0666
RESENT, REPLAY = C("MSG_RESENT"), C("MSG_REPLAY")
REQ_DONE, LOCK_DONE = C("MSG_REQ_REPLAY_DONE"), C("MSG_LOCK_REPLAY_DONE")
RECOVERING, RECONNECT, REPLAYABLE = (C("MSG_CONNECT_RECOVERING"), C("MSG_CONNECT_RECONNECT"),
                                     C("MSG_CONNECT_REPLAYABLE"))
TARGET_UUID = spec.target()["target_uuid"]
VERSIONS = {name: C(row["version"]) for name, row in spec.target()["opcodes"].items()}


def e(name: str) -> int:
    return -spec.errno_value(name)


def ost_body(oid=None, valid=0, seq=0, fid=None, flid=True, **fields) -> bytes:
    oa = {"o_valid": valid}
    if fid is not None:
        oa["o_oi"] = {"oi_fid": fid}
    elif oid is not None:
        oa["o_oi"] = {"oi": {"oi_id": oid, "oi_seq": seq}}
        oa["o_valid"] |= (FLID | FLGROUP) if flid else 0
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

    @property
    def oid(self) -> tuple[int, int]:
        """(ostid_seq, ostid_id) of the reply's o_oi, in whichever form it came."""
        return ostid_seq(self.oa["o_oi"]), ostid_id(self.oa["o_oi"])

    @property
    def raw_oi(self) -> tuple[int, int]:
        return self.oa["o_oi"]["oi"]["oi_id"], self.oa["o_oi"]["oi"]["oi_seq"]

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

    def punch(self, oid, start, valid=0, **kw):
        fields = {k: v for k, v in kw.items() if k.startswith("o_")}
        rest = {k: v for k, v in kw.items() if not k.startswith("o_")}
        return self.send("OST_PUNCH", [ost_body(oid, valid | FLSIZE | FLBLOCKS, o_size=start, o_blocks=EOF,
                                                **fields)], **rest)

    def destroy(self, oid, **kw):
        return self.send("OST_DESTROY", [ost_body(oid, **kw)])

    def sync(self, oid):
        return self.send("OST_SYNC", [ost_body(oid)])

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



def test_check_req_runs_before_the_timeout_drop(t):
    """ptlrpc_server_handle_req_in: ptlrpc_check_req (stale count: drop; replay or transno
    outside recovery: ERR -ENODEV and eviction) comes before the pb_timeout 0 drop."""
    c = connected(t)
    c.connect()                                                            # count 2
    assert c.send("OBD_PING", conn_cnt=1, timeout=0) is None                 # dropped either way
    assert c.send("OBD_PING", flags=REPLAY, transno=5, timeout=0).is_err("ENODEV")
    assert c.send("OBD_PING").is_err("ENOTCONN")                              # evicted
    old = mutant_targets.TimeoutDropFirst()
    c = connected(old)
    assert c.send("OBD_PING", flags=REPLAY, transno=5, timeout=0) is None     # (bug) dropped first
    assert c.send("OBD_PING").status == 0


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



def test_row13_short_body_efault_and_missing_body(t):
    c = connected(t)
    assert c.send("OST_SETATTR", [ost_body(1)[:207]]).is_err("EFAULT")      # present but short
    assert c.send("OST_GETATTR", [b"\0" * 16]).is_err("EFAULT")
    # buffer 1 missing: Lustre unpacks no body; OST_SYNC syncs the whole device (REPLY 0) ...
    c.send("OST_CREATE", [ost_body(1)])
    transnos = [c.setattr(1, o_mtime=i).transno for i in range(4)]
    assert c.send("OBD_PING").committed < transnos[-1]
    rep = c.send("OST_SYNC")
    assert (rep.type, rep.status, rep.transno, rep.committed) == (REPLY, 0, 0, transnos[-1])
    assert rep.oa["o_valid"] == 0
    # ... and the other handlers assert in Lustre; the reference answers ERR -EFAULT (not judged)
    for opc in ("OST_GETATTR", "OST_SETATTR", "OST_PUNCH", "OST_DESTROY", "OST_CREATE"):
        assert c.send(opc).is_err("EFAULT"), opc



def test_row14_bad_object_id_or_sequence_eproto(t):
    c = connected(t)
    assert c.send("OST_GETATTR", [ost_body(0)]).is_err("EPROTO")           # FLID with id 0
    assert c.send("OST_CREATE", [ost_body(0)]).is_err("EPROTO")
    local = {"f_seq": C("FID_SEQ_LOCAL_FILE"), "f_oid": 5, "f_ver": 0}     # not IDIF/MDT0/normal/echo
    assert c.send("OST_GETATTR", [ost_body(fid=local, valid=FLID)]).is_err("EPROTO")
    assert c.send("OST_CREATE", [ost_body(fid=local, valid=0)]).is_err("EPROTO")  # checked without FLID too


def test_row14_fid_with_a_version_ebadf(t):
    """ostid_to_fid refuses a (non-IDIF) FID whose f_ver is not 0: ERR -EBADF."""
    c = connected(t)
    normal = {"f_seq": C("FID_SEQ_NORMAL") + 5, "f_oid": 9, "f_ver": 1}
    for opc in ("OST_GETATTR", "OST_CREATE", "OST_DESTROY"):
        assert c.send(opc, [ost_body(fid=normal, valid=FLID)]).is_err("EBADF"), opc
    idif = {"f_seq": IDIF, "f_oid": 9, "f_ver": 1}                           # IDIF: converted, not refused
    assert c.send("OST_GETATTR", [ost_body(fid=idif, valid=FLID)]).status == e("ENOENT")
    assert c.send("OST_GETATTR", [ost_body(fid=dict(normal, f_oid=0), valid=FLID)]).is_err("EPROTO")



def test_row15_has_body_without_flid_eproto(t):
    c = connected(t)
    for opc in ("OST_GETATTR", "OST_SETATTR", "OST_PUNCH", "OST_SYNC"):
        assert c.send(opc, [ost_body(None, FLSIZE | FLBLOCKS, o_blocks=EOF)]).is_err("EPROTO"), opc
    assert c.send("OST_CREATE", [ost_body(3, flid=False)]).status == 0       # not HAS_BODY
    assert c.getattr(3).status == 0



def test_row16_rdonly_is_never_granted(t):
    """ofd_parse_connect_data masks the flags asked with OST_CONNECT_SUPPORTED, which lacks
    OBD_CONNECT_RDONLY (and OBD_CONNECT_TRANSNO): a client asking for them is not read-only."""
    assert not OST_CONNECT_SUPPORTED & (RDONLY | TRANSNO_FLAG)
    c = Client(t, "c1", flags=RDONLY | TRANSNO_FLAG | C("OBD_CONNECT_VBR"))
    rep = c.connect()
    granted = rep.struct("obd_connect_data")["ocd_connect_flags"]
    assert not granted & (RDONLY | TRANSNO_FLAG) and granted & C("OBD_CONNECT_VBR")
    assert granted & ~OST_CONNECT_SUPPORTED == 0
    assert c.create(1).status == 0
    rep = c.setattr(1, o_mtime=5)
    assert rep.status == 0 and rep.transno != 0
    assert c.punch(1, 0).status == 0 and c.destroy(1).status == 0


@pytest.mark.parametrize("enforced", [True, False])
def test_row16_a_granted_rdonly_is_enforced(enforced):
    """A target that does grant RDONLY (TargetConfig.grant_rdonly, as an MDT) refuses mutable
    opcodes with REPLY -EROFS, transno 0, last_committed 0; not enforcing it is a bug
    (mutant_targets.RdonlyUnenforced)."""
    t = (Target if enforced else mutant_targets.RdonlyUnenforced)(TargetConfig(grant_rdonly=True))
    c = Client(t, "c1", flags=RDONLY)
    assert c.connect().struct("obd_connect_data")["ocd_connect_flags"] & RDONLY
    for opc, body in (("OST_SETATTR", ost_body(1, FLMTIME)), ("OST_CREATE", ost_body(1)),
                      ("OST_DESTROY", ost_body(1)), ("OST_PUNCH", ost_body(1, FLSIZE | FLBLOCKS, o_blocks=EOF))):
        rep = c.send(opc, [body])
        if enforced:
            assert (rep.type, rep.status, rep.transno, rep.committed) == (REPLY, e("EROFS"), 0, 0), opc
        else:
            assert rep.status != e("EROFS"), opc
    assert c.getattr(1).status in (e("ENOENT"), 0)                          # reads still served


def test_honouring_an_ungranted_rdonly_is_a_bug(t):
    bad = mutant_targets.HonoursUngrantedRdonly()
    for target, status in ((t, 0), (bad, e("EROFS"))):
        c = Client(target, "c1", flags=RDONLY)
        assert not c.connect().struct("obd_connect_data")["ocd_connect_flags"] & RDONLY
        assert c.create(1).status == status



def test_row14_before_row16():
    c = connected(Target(TargetConfig(grant_rdonly=True)), flags=RDONLY)
    assert c.send("OST_SETATTR", [ost_body(0)]).is_err("EPROTO")
    assert c.send("OST_SETATTR", [ost_body(1, FLMTIME)]).status == e("EROFS")


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



def test_fresh_object_create_getattr_destroy(t):
    """ofd_precreate_objects: a new object has mode S_IFREG|S_ISUID|S_ISGID|S_ISVTX|0666, owner,
    project, size and times 0, whatever the create request carried."""
    c = connected(t)
    rep = c.create(7, FLMODE | FLUID | FLGID | FLMTIME, o_mode=0o100640, o_uid=500, o_gid=77, o_mtime=99)
    assert rep.status == 0 and rep.transno == 0                  # no REPLAY_CREATE negotiated
    assert rep.oid == (0, 7)
    oa = c.getattr(7).oa
    assert oa["o_mode"] == FRESH_MODE
    assert [oa[f] for f in ("o_size", "o_atime", "o_mtime", "o_ctime", "o_uid", "o_gid", "o_projid")] == [0] * 7
    rep = c.destroy(7)
    assert rep.status == 0 and rep.transno != 0
    rep = c.destroy(7)
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("ENOENT"), 0)
    rep = c.getattr(7)
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("ENOENT"), 0)
    assert len(rep.buffers) == 2                                 # the handler's reply carries an ost_body


def test_getattr_reply(t):
    """ofd_getattr_hdl: o_oi in FID (IDIF) form, FLID|FLGROUP and FLFLAGS (OBD_FL_FLUSH)
    always; on success every attribute of an ldiskfs OSD, FLPROJID and FLDATAVERSION too."""
    c = connected(t)
    c.create(0x1234)
    rep = c.getattr(0x1234)
    oa = rep.oa
    every = (FLID | FLGROUP | FLFLAGS | FLSIZE | FLBLOCKS | FLATIME | FLMTIME | FLCTIME | FLTYPE | FLMODE
             | FLUID | FLGID | FLPROJID | FLDATAVERSION)
    assert oa["o_valid"] == every and oa["o_flags"] == C("OBD_FL_FLUSH") and oa["o_data_version"] == 0
    assert rep.raw_oi == (IDIF, 0x1234) and rep.oid == (0, 0x1234)             # {f_seq IDIF, f_oid}
    big = (5 << 32) | 7
    c.create(big)                                                # a huge gap: only the last ids
    assert c.getattr(big).raw_oi == (IDIF | 5, 7)
    rep = c.getattr(0x1235)
    assert rep.status == e("ENOENT") and rep.oa["o_valid"] == FLID | FLGROUP | FLFLAGS
    assert rep.raw_oi == (IDIF, 0x1235)


def test_create_precreates_up_to_the_id(t):
    """ofd_create_hdl: diff = id - LAST_ID; diff > 0 creates LAST_ID+1 .. id; diff <= 0
    creates nothing (REPLY 0, transno 0, reply id LAST_ID+1 when below, the id when equal);
    never -EEXIST, and an id at or below LAST_ID is never created again."""
    c = connected(t)
    rep = c.create(5)
    assert (rep.status, rep.transno, rep.oid) == (0, 0, (0, 5))
    assert rep.oa["o_valid"] == FLID | FLGROUP | FLSIZE and rep.oa["o_size"] == t.config.seq_width
    assert rep.raw_oi == (IDIF, 5)                               # FID form
    assert all(c.getattr(i).status == 0 for i in range(1, 6)) and c.getattr(6).status == e("ENOENT")
    c.setattr(2, FLMTIME, o_mtime=7)
    rep = c.create(3)
    assert (rep.type, rep.status, rep.transno, rep.oid) == (REPLY, 0, 0, (0, 6))   # LAST_ID + 1
    rep = c.create(5)
    assert (rep.status, rep.transno, rep.oid) == (0, 0, (0, 5))
    assert c.getattr(2).oa["o_mtime"] == 7                        # untouched
    c.destroy(4)
    assert c.create(4).status == 0 and c.getattr(4).status == e("ENOENT")     # not created again
    assert c.create(8).oid == (0, 8) and c.getattr(6).oa["o_mode"] == FRESH_MODE
    assert len(t.objects) == 7


def test_create_skips_existing_ids(t):
    c = connected(t)
    c.create(3)
    c.setattr(2, FLMTIME | FLUID, o_mtime=7, o_uid=9)
    t.last_ids[0] = 1                                            # as after a LAST_ID rebuild
    assert c.create(4).oid == (0, 4)
    oa = c.getattr(2).oa
    assert (oa["o_mtime"], oa["o_uid"]) == (7, 9)                 # skipped, not re-created
    assert c.getattr(4).oa["o_mode"] == FRESH_MODE


def test_create_batches_and_transnos():
    """One transaction per batch of precreate_batch objects: with REPLAY_CREATE each gets a
    transno and the reply carries the last; without it they are local (transno 0)."""
    t = Target(TargetConfig(precreate_batch=8, commit_lag=10 ** 6))
    rc = connected(t, "r", **REPLAY_CREATE)
    plain = connected(t, "p")
    rc.create(1)
    before = rc.setattr(1, o_mtime=1).transno
    rep = rc.create(21)                                          # 20 objects: batches of 8, 8, 4
    assert rep.status == 0 and rep.transno == before + 3 and rep.oid == (0, 21)
    assert rc.setattr(1, o_mtime=2).transno == before + 4
    assert [txn.transno for txn in t.pending][-4:-1] == [before + 1, before + 2, before + 3]
    assert rc.create(21).transno == 0 and rc.create(10).transno == 0          # nothing created
    assert plain.create(30).transno == 0 and len(t.objects) == 30


def test_create_huge_gap_creates_only_the_last_objects(t):
    """A gap above 5 * OST_MAX_PRECREATE creates only the last min(width, 20000) ids."""
    c = connected(t)
    c.create(3)
    rep = c.create(200000)
    assert rep.status == 0 and rep.oid == (0, 200000)
    assert c.getattr(180001).status == 0 and c.getattr(180000).status == e("ENOENT")
    assert len(t.objects) == 3 + 20000


def test_create_without_flid_reads_the_rewritten_id(t):
    """A CREATE without FLID and with an all-zero o_oi: tgt_validate_obdo rewrites o_oi into
    the IDIF FID {0x100000000, 0, 0}, whose bytes ostid_id reads as id 2^32 (a huge gap).  The
    suite must not send it; the reference does what Lustre does."""
    c = connected(t)
    rep = c.send("OST_CREATE", [ost_body(None)])
    assert rep.status == 0 and rep.raw_oi == (1 << 32, 0) and rep.oid == (0, 1 << 32)
    assert len(t.objects) == 20000 and c.getattr((1 << 32) - 19999).status == 0



def test_destroy_reply_and_ranges(t):
    """ofd_destroy_hdl: reply o_valid 0 and o_oi = fid_to_ostid of the id after the last one
    ({id + 1, seq 0} for a single object), -ENOENT included; FLOBJCOUNT destroys o_misc ids."""
    c = connected(t)
    c.create(10)
    rep = c.destroy(3)
    assert (rep.status, rep.oa["o_valid"], rep.raw_oi) == (0, 0, (4, 0)) and rep.transno != 0
    rep = c.destroy(3)
    assert (rep.type, rep.status, rep.transno, rep.oa["o_valid"], rep.raw_oi) == (REPLY, e("ENOENT"), 0, 0, (4, 0))
    rep = c.send("OST_DESTROY", [ost_body(5, FLOBJCOUNT, o_misc=3)])
    assert rep.status == 0 and rep.raw_oi == (8, 0)
    assert [c.getattr(i).status == 0 for i in range(4, 9)] == [True, False, False, False, True]
    rep = c.send("OST_DESTROY", [ost_body(7, FLOBJCOUNT, o_misc=3)])         # 7 is gone: -ENOENT ...
    assert rep.status == e("ENOENT") and rep.transno != 0 and c.getattr(9).status == e("ENOENT")   # ... 8, 9 destroyed



def test_setattr_honours_valid_bits(t):
    c = connected(t)
    c.create(3)
    rep = c.setattr(3, FLMTIME | FLMODE | FLTYPE | FLGID, o_mtime=1234, o_atime=99, o_mode=0o040755,
                    o_uid=42, o_gid=43, o_ctime=5)
    assert rep.status == 0 and rep.transno != 0
    oa = c.getattr(3).oa
    assert (oa["o_mtime"], oa["o_mode"], oa["o_gid"]) == (1234, 0o100755, 43)    # FLTYPE ignored
    assert (oa["o_atime"], oa["o_uid"], oa["o_ctime"]) == (0, 0, 0)        # no bit, not applied
    # the reply echoes what was set: permission bits only, no FLTYPE, o_oi in FID form
    echo = rep.oa
    assert echo["o_valid"] == FLID | FLGROUP | FLMTIME | FLMODE | FLGID and rep.raw_oi == (IDIF, 3)
    assert (echo["o_mtime"], echo["o_mode"], echo["o_gid"]) == (1234, 0o755, 43)


@pytest.mark.parametrize("valid, mode, before, after", [
    (FLUID, 0, FRESH_MODE, 0o103666),
    (FLGID, 0, FRESH_MODE, 0o105666),
    (C("OBD_MD_FLPROJID"), 0, FRESH_MODE, 0o106666),
    (FLUID | FLGID, 0, FRESH_MODE, 0o101666),
    (FLUID | FLGID | C("OBD_MD_FLPROJID"), 0, FRESH_MODE, 0o100666),
    (FLMODE | FLUID, 0o4755, FRESH_MODE, 0o100755),              # the bit cleared from the mode asked
    (FLMODE | FLUID, 0o4755, 0o103666, 0o104755),                # ... only while the object has it
    (FLMODE, 0o6755, FRESH_MODE, 0o106755),                      # FLMODE takes all of 07777
    (FLMODE | FLGID, 0o2644, 0o101644, 0o102644),
])
def test_setattr_ids_clear_special_bits(t, valid, mode, before, after):
    """ofd_attr_handle_id (is_setattr): FLUID/FLGID/FLPROJID clear S_ISUID/S_ISGID/S_ISVTX
    where the *stored* mode still has the bit; with FLMODE from the mode asked, else from the
    stored one; the ids are always set."""
    c = connected(t)
    c.create(1)
    if before != FRESH_MODE:
        t.objects[(0, 1)]["o_mode"] = before
    rep = c.setattr(1, valid, o_mode=mode, o_uid=10, o_gid=20, o_projid=30)
    assert rep.status == 0
    oa = c.getattr(1).oa
    assert oa["o_mode"] == after, oct(oa["o_mode"])
    assert [oa[f] for f, bit in (("o_uid", FLUID), ("o_gid", FLGID), ("o_projid", FLPROJID)) if valid & bit] == \
        [v for v, bit in ((10, FLUID), (20, FLGID), (30, FLPROJID)) if valid & bit]
    if after & 0o7777 != before & 0o7777 and not valid & FLMODE:
        assert rep.oa["o_valid"] & FLMODE and rep.oa["o_mode"] == after & 0o7777      # echoed



def test_setattr_size_eperm_and_enoent(t):
    c = connected(t)
    c.create(3)
    rep = c.setattr(3, FLSIZE | FLMTIME, o_size=100, o_mtime=9)
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("EPERM"), 0)
    assert rep.oa["o_valid"] == FLID | FLGROUP and rep.raw_oi == (IDIF, 3)
    assert c.getattr(3).oa["o_mtime"] == 0                                 # nothing changed
    rep = c.setattr(3, FLSIZE | FLMTIME, o_size=EOF, o_mtime=9)
    assert rep.status == 0 and rep.oa["o_valid"] & FLSIZE and rep.oa["o_size"] == EOF
    oa = c.getattr(3).oa
    assert oa["o_mtime"] == 9 and oa["o_size"] == EOF                       # stored as is, no truncate
    assert oa["o_data_version"] == rep.transno                             # a size moves the version
    rep = c.setattr(4)
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("ENOENT"), 0)
    assert c.setattr(4, FLSIZE, o_size=1).status == e("EPERM")            # checked before existence



def test_punch_checks(t):
    c = connected(t)
    c.create(5)
    rep = c.punch(5, 4096)
    assert rep.status == 0 and rep.transno != 0
    assert rep.oa["o_valid"] == FLID and rep.raw_oi == (IDIF, 5)        # FLID only, FID form
    assert c.getattr(5).oa["o_size"] == 4096
    for valid in (FLSIZE, FLBLOCKS, 0):
        rep = c.send("OST_PUNCH", [ost_body(5, valid, o_size=0, o_blocks=EOF)])
        assert rep.is_err("EPROTO"), valid                                    # serious: ERR
    rep = c.send("OST_PUNCH", [ost_body(5, FLSIZE | FLBLOCKS, o_size=0, o_blocks=8192)])
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("EPROTO"), 0)
    assert rep.oa["o_valid"] == 0 and rep.raw_oi == (0, 0)                # before the body is filled
    rep = c.send("OST_PUNCH", [ost_body(6, FLSIZE | FLBLOCKS, o_size=0, o_blocks=8192)])
    assert rep.status == e("EPROTO")                                       # the end before existence
    rep = c.punch(6, 0)
    assert (rep.type, rep.status, rep.oa["o_valid"]) == (REPLY, e("ENOENT"), FLID)
    assert c.getattr(5).oa["o_size"] == 4096


def test_punch_times_as_ldiskfs(t):
    """osd_punch on ldiskfs: the truncate makes mtime the ctime (OST inodes keep their ctime):
    before the punch's own times when the object grows, after them when it shrinks, not at
    all when the size stays; atime and ctime are what the punch carries, else unchanged."""
    c = connected(t)
    c.create(1)
    c.setattr(1, FLATIME | FLMTIME | FLCTIME, o_atime=10, o_mtime=20, o_ctime=30)
    c.punch(1, 100)                                              # grow, no times
    oa = c.getattr(1).oa
    assert (oa["o_size"], oa["o_atime"], oa["o_mtime"], oa["o_ctime"]) == (100, 10, 30, 30)
    c.setattr(1, FLMTIME | FLCTIME, o_mtime=20, o_ctime=30)
    c.punch(1, 200, FLMTIME, o_mtime=50)                         # grow: the mtime carried wins
    oa = c.getattr(1).oa
    assert (oa["o_mtime"], oa["o_ctime"]) == (50, 30)
    c.punch(1, 50, FLMTIME | FLCTIME, o_mtime=60, o_ctime=70)    # shrink: mtime := the final ctime
    oa = c.getattr(1).oa
    assert (oa["o_size"], oa["o_mtime"], oa["o_ctime"]) == (50, 70, 70)
    c.setattr(1, FLMTIME, o_mtime=5)
    c.punch(1, 50, FLATIME, o_atime=11)                          # same size: no truncate
    oa = c.getattr(1).oa
    assert (oa["o_atime"], oa["o_mtime"], oa["o_ctime"]) == (11, 5, 70)
    c.punch(1, 10, FLMTIME | FLCTIME, o_mtime=80, o_ctime=80)    # the deterministic case: both equal
    oa = c.getattr(1).oa
    assert (oa["o_mtime"], oa["o_ctime"]) == (80, 80)


def test_punch_ids_only_while_the_special_bit_is_set(t):
    """ofd_attr_handle_id with is_setattr 0: uid/gid taken only while the stored mode has
    S_ISUID/S_ISGID (projid while S_ISVTX, or when the stored projid is 0 and the new one not),
    then that bit is cleared; FLMODE is ignored."""
    c = connected(t)
    c.create(2)
    c.punch(1, 0, FLUID | FLMODE, o_uid=7, o_mode=0o777)
    oa = c.getattr(1).oa
    assert (oa["o_uid"], oa["o_mode"]) == (7, 0o103666)
    c.punch(1, 0, FLUID | FLGID, o_uid=8, o_gid=9)                # S_ISUID gone: uid kept
    oa = c.getattr(1).oa
    assert (oa["o_uid"], oa["o_gid"], oa["o_mode"]) == (7, 9, 0o101666)
    c.setattr(2, FLMODE, o_mode=0o644)                           # no special bits left
    c.punch(2, 0, FLUID | FLGID | FLPROJID, o_uid=1, o_gid=2, o_projid=3)
    oa = c.getattr(2).oa
    assert (oa["o_uid"], oa["o_gid"], oa["o_projid"], oa["o_mode"]) == (0, 0, 3, 0o100644)   # projid was 0
    c.punch(2, 0, FLPROJID, o_projid=4)
    assert c.getattr(2).oa["o_projid"] == 3



def test_sync_commits_only_above_the_last_committed_version(t):
    """tgt_sync syncs an object only when its version is above the last committed transno;
    the version moves only on PUNCH and SETATTR with a size (and WRITE, FALLOCATE)."""
    c = connected(t)
    c.create(1)
    transnos = [c.setattr(1, o_mtime=i).transno for i in range(3)]
    assert c.send("OBD_PING").committed == transnos[0]                    # two newer ones pending
    rep = c.sync(1)
    assert rep.status == 0 and rep.transno == 0 and rep.committed == transnos[0]   # version 0: no sync
    assert c.getattr(1).oa["o_data_version"] == 0
    punched = c.punch(1, 0).transno
    assert c.getattr(1).oa["o_data_version"] == punched
    c.setattr(1, o_mtime=9)
    rep = c.sync(1)
    assert rep.committed == punched + 1                                   # one journal commit: everything
    assert rep.oa["o_valid"] == FLID | FLGROUP | FLSIZE | FLBLOCKS | FLATIME | FLMTIME | FLCTIME | FLTYPE | FLMODE
    assert rep.raw_oi == (IDIF, 1) and rep.oa["o_mtime"] == 9
    rep = c.sync(2)
    assert rep.status == e("ENOENT") and rep.oa["o_valid"] == 0


def test_disconnect_forgets_the_export(t):
    c = connected(t)
    rep = c.send("OST_DISCONNECT")
    assert (rep.type, rep.status, rep.body["pb_handle"]) == (REPLY, 0, 0)
    assert c.send("OBD_PING").is_err("ENOTCONN")
    rep = c.connect()
    assert rep.status == 0 and not rep.body["pb_op_flags"] & RECONNECT



def test_ost_id_forms_name_the_same_object(t):
    oi_form = {"oi": {"oi_id": 0x1234, "oi_seq": 0}}
    idif = {"oi": {"oi_id": IDIF, "oi_seq": 0x1234}}           # the same 16 bytes as {IDIF, 0x1234, 0}
    assert (ostid_seq(oi_form), ostid_id(oi_form)) == (0, 0x1234) == (ostid_seq(idif), ostid_id(idif))
    c = connected(t)
    assert c.send("OST_CREATE", [ost_body(fid={"f_seq": IDIF, "f_oid": 0x1234, "f_ver": 0},
                                          valid=FLID | FLGROUP)]).status == 0
    assert c.getattr(0x1234).status == 0
    other_ost = {"f_seq": IDIF | (3 << 16), "f_oid": 0x1234, "f_ver": 0}   # converted with this OST's index
    assert c.send("OST_GETATTR", [ost_body(fid=other_ost, valid=FLID)]).raw_oi == (IDIF, 0x1234)
    normal = {"f_seq": C("FID_SEQ_NORMAL") + 5, "f_oid": 9, "f_ver": 0}
    rep = c.send("OST_CREATE", [ost_body(fid=normal, valid=FLID)])
    assert rep.status == 0 and rep.oa["o_oi"]["oi_fid"] == normal          # sequence's own LAST_ID
    assert c.send("OST_GETATTR", [ost_body(fid=dict(normal, f_oid=3), valid=FLID)]).status == 0
    assert c.getattr(9).status == 0 and c.getattr(0x1235).status == e("ENOENT")


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
    rep = rc.create(2)                                                      # nothing to create: no transaction
    assert (rep.status, rep.transno) == (0, 0)


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
    """Reference choice (TGT-RESEND-1 allows it; Lustre's OST runs a resend again): a resend
    is answered from the reply saved for its XID until pb_last_xid passes it."""
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
    c.unreplied.discard(xid)
    c.send("OBD_PING")                                                     # pb_last_xid passes xid
    assert (c.uuid, xid) not in c.t.saved                                  # released
    assert c.send_bytes(xid, resent).is_err("EPROTO")                      # now an old XID


def test_row12_only_the_last_transaction_xid_is_remembered(t):
    """tgt_handle_recovery / req_can_reconstruct: one XID per export (lcd_last_xid, the XID of
    its latest request that ran a transaction); that XID again without RESENT/REPLAY is
    dropped; an older XID above the export's last XID runs as a new request."""
    c = connected(t)
    c.create(1)
    c.getattr(1)
    older = c.setattr(1, o_mtime=5); older_sent = c.last_sent
    c.unreplied.add(older_sent[0])
    last = c.setattr(1, o_mtime=7); last_sent = c.last_sent
    c.unreplied.add(last_sent[0])
    c.getattr(1)                                                           # a read does not move it
    assert c.send_bytes(*last_sent) is None                                # the last one: dropped
    rep = c.send_bytes(*older_sent)                                        # an older one: runs again
    assert rep.status == 0 and rep.transno > last.transno > older.transno
    assert c.getattr(1).oa["o_mtime"] == 5
    assert c.send_bytes(*older_sent) is None                               # now the last one
    c.connect()                                                            # the last XID restarts at 0 ...
    assert c.send_bytes(*older_sent) is None                               # ... lcd_last_xid stays
    plain = connected(t, "p")
    xid, data = plain.raw("OST_CREATE", [ost_body(9)])                     # a local transaction
    plain.send_bytes(xid, data)
    assert plain.send_bytes(xid, data).status == 0                         # not remembered


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
    """The VBR version is the transno of the object's last size-changing transaction (PUNCH,
    SETATTR with a size): ofd_trans_start is given the object only for those."""
    t = lagging()
    c = connected(t, flags=C("OBD_CONNECT_VBR"))
    c.create(1)
    r1 = c.punch(1, 10); s1 = c.last_sent
    r2 = c.setattr(1, o_mtime=2); s2 = c.last_sent
    r3 = c.setattr(1, o_mtime=3); s3 = c.last_sent
    assert r1.body["pb_pre_versions"][0] == 0
    assert r2.body["pb_pre_versions"][0] == r3.body["pb_pre_versions"][0] == r1.transno   # setattr: no move
    assert c.getattr(1).oa["o_data_version"] == r1.transno
    t.restart()
    c.connect()
    rep = c.replay(*s1, r1.transno, (r1.body["pb_pre_versions"]))
    assert (rep.status, rep.transno) == (0, r1.transno)
    rep = c.replay(*s2, r2.transno, (r1.transno, 0, 0, 0))                 # matches the size version
    assert (rep.status, rep.transno) == (0, r2.transno)
    rep = c.replay(*s3, r3.transno, (r2.transno, 0, 0, 0))                 # a plain setattr is no version
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



def test_replay_of_a_committed_transaction_runs_again(t):
    """target_queue_recovery_request: a replay below the next expected transno runs at once;
    the OST runs it again (tgt_last_rcvd_update keeps its transno), rolling newer state back."""
    c = connected(t)
    c.create(1)
    r1 = c.setattr(1, o_mtime=1); s1 = c.last_sent
    c.unreplied.add(s1[0])
    c.punch(1, 0)
    c.sync(1)
    c.setattr(1, o_mtime=2)
    c.punch(1, 0)
    c.sync(1)
    assert c.send("OBD_PING").committed > r1.transno
    t.restart()
    c.connect()
    rep = c.replay(*s1, r1.transno)
    assert (rep.status, rep.transno) == (0, r1.transno)
    c.done()
    assert c.getattr(1).oa["o_mtime"] == 1                          # run again
    skip = Target(TargetConfig(replay_skips_committed=True))          # (bug) answered from the saved reply
    assert bug_replay_skips_committed(skip) and not bug_replay_skips_committed(Target())


def test_non_replay_changes_during_recovery_take_the_next_transno_after_the_commit_point(t):
    """After a restart lut_last_transno is the commit point: a change served during recovery
    takes the next transno and may equal a lost one or a replay still to come."""
    t = lagging()
    a, b = connected(t, "a"), connected(t, "b")
    a.create(1)
    b.create(2)
    a1 = a.setattr(1, o_mtime=1)
    assert a.sync(1).committed == 0                                 # version 0: nothing synced
    b.punch(2, 0)
    commit_point = b.sync(2).committed
    assert commit_point > a1.transno
    a2 = a.setattr(1, o_mtime=2); a2_sent = a.last_sent              # lost in the crash
    assert t.restart() == commit_point
    a.connect(); b.connect()
    rep = b.setattr(2, o_mtime=9)                                   # not a replay: served at once
    assert rep.status == 0 and rep.transno == commit_point + 1 == a2.transno     # collides
    rep = a.replay(*a2_sent, a2.transno)
    assert (rep.status, rep.transno) == (0, a2.transno)
    a.done(); b.done()
    assert not t.recovering
    assert a.setattr(1).transno > ((a2.transno >> 32) + 1) << 32


def test_epoch_after_a_restart_with_nothing_committed(t):
    t = lagging()
    c = connected(t)
    c.create(1)
    lost = [c.setattr(1, o_mtime=i).transno for i in range(3)]
    t.restart()
    c.connect()
    assert c.setattr(1, o_mtime=5).transno == t.config.transno_start          # reuses a lost transno
    c.done()
    assert c.setattr(1).transno > ((max(lost) >> 32) + 1) << 32



def test_duplicate_replay_transno(t):
    """target_queue_recovery_request: a replay whose transno a still-queued replay holds is
    dropped (never answered); once the first has run, a replay of that transno runs again.
    The reference is deterministic: the first replay is queued exactly until its turn comes."""
    t = lagging()
    a, b, x = connected(t, "a"), connected(t, "b"), connected(t, "x")
    a.create(1)
    r1 = a.setattr(1, o_mtime=1); s1 = a.last_sent
    t.restart()
    a.connect(); b.connect()
    assert a.replay(*s1, r1.transno) is None                        # queued: x has not reconnected
    claim = b.send("OST_SETATTR", [ost_body(1, FLMTIME, o_mtime=7)], flags=REPLAY, transno=r1.transno)
    assert claim is None
    x.connect()
    [ran] = x.replies                                               # a's replay ran; b's never will
    assert (ran["client"], Rep(bytes.fromhex(ran["data"])).transno) == ("a", r1.transno)
    rep = b.send("OST_SETATTR", [ost_body(1, FLMTIME, o_mtime=8)], flags=REPLAY, transno=r1.transno)
    assert (rep.type, rep.status, rep.transno) == (REPLY, 0, r1.transno)     # already run: runs again
    for c in (a, b, x):
        c.done()
    assert not t.recovering and a.getattr(1).oa["o_mtime"] == 8
    claim_xid = b.xid - 2                                            # the dropped claim
    assert not [r for c in (a, b, x) for r in c.replies if (r["client"], r["xid"]) == ("b", claim_xid)]


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


def bug_connect_data_any_size(t):
    c = Client(t, "c1")
    bufs = c.connect_buffers()
    bufs[3] = bufs[3].ljust(8 * len(bufs[3]) + 8, b"\0")      # one word more than 8 obd_connect_data
    return c.connect(bufs).status == 0


def bug_uuid_any_length(t):
    c = Client(t, "c1")
    bufs = c.connect_buffers()
    bufs[1] = c.uuid.ljust(40, "u").encode() + b"\0" * 8        # 40 characters: one over obd_uuid's 39
    return c.connect(bufs).status == 0


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
    (_, first, t1), (_, third, t3) = sent[0], sent[2]
    a.replay(*first, t1)
    a.replay(*third, t3)                                        # queued: b's transno is missing
    b.done(REQ_DONE)                                            # b replays nothing: the gap is skipped
    [ran] = [r for r in b.replies if r["client"] == "a"]
    return Rep(bytes.fromhex(ran["data"])).transno != t3


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



def bug_create_eexist(t):
    c = connected(t)
    c.create(3)
    return c.getattr(1).status != 0 or c.create(3).status != 0


def bug_create_applies_attrs(t):
    c = connected(t)
    c.create(1, FLUID | FLMTIME, o_uid=5, o_mtime=6)
    oa = c.getattr(1).oa
    return (oa["o_uid"], oa["o_mtime"]) != (0, 0)


def bug_zeroed_objects(t):
    c = connected(t)
    c.create(1)
    return c.getattr(1).oa["o_mode"] != FRESH_MODE


def bug_uid_keeps_suid(t):
    c = connected(t)
    c.create(1)
    c.setattr(1, FLUID, o_uid=5)
    return bool(c.getattr(1).oa["o_mode"] & 0o4000)


def bug_punch_sets_ids(t):
    c = connected(t)
    c.create(1)
    c.setattr(1, FLUID, o_uid=5)                                # S_ISUID cleared: the owner is set
    c.punch(1, 0, FLUID, o_uid=6)
    return c.getattr(1).oa["o_uid"] != 5


def bug_honours_ungranted_rdonly(t):
    c = Client(t, "c1", flags=RDONLY)
    c.connect()
    return c.create(1).status == e("EROFS")


def bug_rdonly_unenforced(t):
    c = Client(t, "c1", flags=RDONLY)
    granted = c.connect().struct("obd_connect_data")["ocd_connect_flags"]
    return bool(granted & RDONLY) and c.create(1).status != e("EROFS")


def bug_timeout_drop_first(t):
    return connected(t).send("OBD_PING", flags=REPLAY, transno=5, timeout=0) is None


def bug_replay_skips_committed(t):
    c = connected(t)
    c.create(1)
    r1 = c.setattr(1, o_mtime=1); s1 = c.last_sent
    c.unreplied.add(s1[0])                                      # the saved reply is kept
    for _ in range(3):
        c.setattr(1, o_mtime=2)
    t.restart()
    c.connect()
    c.replay(*s1, r1.transno)
    c.done()
    return c.getattr(1).oa["o_mtime"] != 1


def bug_claimed_always_dropped(t):
    t.config = t.config.but(commit_lag=100)
    a, b, sent = _recovery(t)
    client, (xid, data), transno = sent[0]
    a.replay(xid, data, transno)                                # runs: a's transno is the next one
    return b.send("OST_SETATTR", [ost_body(2, FLMTIME, o_mtime=7)], flags=REPLAY, transno=transno) is None


def bug_runs_queued_duplicate_replay(t):
    t.config = t.config.but(commit_lag=100)
    a, b, x = connected(t, "a"), connected(t, "b"), connected(t, "x")
    a.create(1)
    r1 = a.setattr(1, o_mtime=1); s1 = a.last_sent
    t.restart()
    a.connect(); b.connect()
    a.replay(*s1, r1.transno)                                   # queued: x is not back
    b.send("OST_SETATTR", [ost_body(1, FLMTIME, o_mtime=7)], flags=REPLAY, transno=r1.transno)
    claim = b.last_sent[0]
    x.connect()
    for c in (a, x, b):
        c.done()
    return any((r["client"], r["xid"]) == ("b", claim) for c in (a, b, x) for r in c.replies)


def bug_version_on_every_change(t):
    c = connected(t)
    c.create(1)
    c.setattr(1, o_mtime=3)
    return c.getattr(1).oa["o_data_version"] != 0


def bug_getattr_omits_projid(t):
    c = connected(t)
    c.create(1)
    return not c.getattr(1).oa["o_valid"] & FLPROJID


def bug_no_full20(t):
    return not Client(t, "c1").connect().struct("obd_connect_data")["ocd_connect_flags"] & C("OBD_CONNECT_FULL20")


def bug_runs_last_transaction_xid(t):
    c = connected(t)
    c.create(1)
    c.unreplied.add(c.xid + 1)                                  # the reply is lost: pb_last_xid stays below
    c.setattr(1, o_mtime=1)
    return c.send_bytes(*c.last_sent) is not None                # the same bytes, no MSG_RESENT: dropped


DETECTORS = {name: globals()["bug_" + name[len("target_"):]] for name in TARGET_FAMILIES}


@pytest.mark.parametrize("name", sorted(TARGET_FAMILIES))
def test_broken_target_is_detectable(name):
    factory, what, ids = TARGET_FAMILIES[name]
    assert what and ids and all(i.startswith(("TGT-", "RCV-")) for i in ids)
    testee = factory()
    assert {"target", "restart"} <= set(testee.hello()["capabilities"])
    assert DETECTORS[name](testee.target), f"{name}: the bug does not show"
    assert not DETECTORS[name](Target()), f"{name}: the correct target shows it too"


# ---- configurations of Lustre's OST (issue 25) -------------------------------------------------

def test_without_project_quota_a_new_projid_is_refused():
    """osd_transfer_project: -EOPNOTSUPP, transno 0; a SETATTR sets nothing (its mtime neither),
    a PUNCH has truncated already (osd_punch before dt_attr_set); projid 0 is no transfer."""
    t = Target(TargetConfig(project_quota=False))
    c = connected(t)
    c.create(2)
    rep = c.setattr(1, FLPROJID | FLMTIME, o_projid=5, o_mtime=9)
    assert (rep.type, rep.status, rep.transno) == (REPLY, e("EOPNOTSUPP"), 0)
    oa = c.getattr(1).oa
    assert (oa["o_projid"], oa["o_mtime"], oa["o_mode"], oa["o_valid"] & FLPROJID) == (0, 0, 0o107666, FLPROJID)
    assert c.setattr(1, FLPROJID, o_projid=0).status == 0
    rep = c.punch(2, 100, FLPROJID, o_projid=6)
    assert (rep.status, rep.transno) == (e("EOPNOTSUPP"), 0)
    assert (c.getattr(2).oa["o_size"], c.getattr(2).oa["o_projid"]) == (100, 0)


def test_with_recovery_disabled():
    """No MSG_CONNECT_REPLAYABLE, no transno, last_committed 0, row 12 not applied, and a
    restart remembers no client: no recovery."""
    t = Target(TargetConfig(recovery=False))
    c = Client(t, "c1")
    rep = c.connect()
    assert rep.status == 0 and not rep.body["pb_op_flags"] & C("MSG_CONNECT_REPLAYABLE")
    c.create(1)
    c.unreplied.add(c.xid + 1)
    rep = c.setattr(1, o_mtime=1)
    assert (rep.status, rep.transno, rep.committed) == (0, 0, 0)
    assert c.send_bytes(*c.last_sent) is not None             # row 12 is not looked at
    t.restart()
    assert not t.recovering
    rep = c.connect()
    assert rep.status == 0 and not rep.body["pb_op_flags"] & (C("MSG_CONNECT_RECOVERING") | C("MSG_CONNECT_REPLAYABLE"))


# ---- an OST of another release (TargetConfig.release: its facts in spec/releases/) ---------

def test_the_default_release_is_the_default_profiles():
    from ptlrpc_conformance.harness.data import registry
    assert TargetConfig().release == registry.profile(None).release


@pytest.mark.parametrize("release, errno", [("2.12.9", "ENOTSUPP"), ("2.15.8", "ENOTSUPP"), ("2.16.1", "EOPNOTSUPP")])
def test_row9_unknown_opcode_by_release(release, errno):
    """tgt_handler_find_check returned -ENOTSUPP (524 on the wire) before 2.16."""
    rep = connected(Target(TargetConfig(release=release))).send(spec.target()["unknown_opcode"])
    assert rep.is_err(errno) and rep.status == -{"ENOTSUPP": 524, "EOPNOTSUPP": 95}[errno]


@pytest.mark.parametrize("release, kind", [("2.15.8", ERR), ("2.16.1", REPLY)])
def test_row16_erofs_type_by_release(release, kind):
    """ptlrpc_send_error sends -EROFS as ERR before 2.16."""
    c = Client(Target(TargetConfig(release=release, grant_rdonly=True)), "c1", flags=RDONLY)
    c.connect()
    rep = c.send("OST_SETATTR", [ost_body(1, FLMTIME)])
    assert (rep.type, rep.status, rep.transno, rep.committed) == (kind, e("EROFS"), 0, 0)


@pytest.mark.parametrize("release, granted", [("2.15.8", False), ("2.16.1", True)])
def test_replay_create_granted_only_where_the_release_has_it(release, granted):
    """OBD_CONNECT2_REPLAY_CREATE is in OST_CONNECT_SUPPORTED2 from 2.16: before, creates
    answer transno 0."""
    c = Client(Target(TargetConfig(release=release)), "c1", **REPLAY_CREATE)
    ocd = c.connect().struct("obd_connect_data")
    assert bool(ocd["ocd_connect_flags2"] & REPLAY_CREATE["flags2"]) == granted
    assert bool(c.create(1).transno) == granted


@pytest.mark.parametrize("release, applied", [("2.16.1", False), ("2.17.0", True)])
def test_punch_ids_by_release(release, applied):
    """From 2.17.0 a punch hands uid, gid and projid on (ofd_punch_hdl) and sets a projid on an
    object whose projid is 0 (ofd_attr_handle_id); before, only the size and the times."""
    c = connected(Target(TargetConfig(release=release)))
    c.create(2)
    assert c.punch(1, 0, FLUID | FLGID | FLPROJID, o_uid=5, o_gid=6, o_projid=7).status == 0
    oa = c.getattr(1).oa
    want = (5, 6, 7, 0o100666) if applied else (0, 0, 0, FRESH_MODE)
    assert (oa["o_uid"], oa["o_gid"], oa["o_projid"], oa["o_mode"]) == want
    c.setattr(2, FLMODE, o_mode=0o644)                 # no S_ISVTX, projid 0
    c.punch(2, 0, FLPROJID, o_projid=9)
    assert c.getattr(2).oa["o_projid"] == (9 if applied else 0)


@pytest.mark.parametrize("release, size", [("2.12.9", 152), ("2.15.8", 184)])
def test_reply_buffer_0_by_release(release, size):
    """2.12.9's ptlrpc_send_reply cuts buffer 0 of every reply to the 152-byte ptlrpc_body_v2."""
    c = Client(Target(TargetConfig(release=release)), "c1")
    assert len(c.connect().buffers[0]) == size
    assert len(c.send("OBD_PING").buffers[0]) == size


@pytest.mark.parametrize("release, status", [("2.15.8", "EINVAL"), ("2.16.1", None)])
def test_create_far_below_last_id_by_release(release, status):
    """Before 2.16 ofd_create_hdl refuses an id OST_MAX_PRECREATE (20000) or more below LAST_ID
    with REPLY -EINVAL; from 2.16 it trusts the OST and names LAST_ID + 1."""
    c = connected(Target(TargetConfig(release=release, last_id_start=30000)))
    rep = c.create(1)
    assert rep.type == REPLY and rep.transno == 0
    if status:
        assert rep.status == e(status)
    else:
        assert rep.status == 0 and ostid_id(rep.oa["o_oi"]) == 30001
    assert c.create(10001).status == 0                  # less than 20000 below: trusted in both


@pytest.mark.parametrize("release, sized", [("2.12.9", False), ("2.15.8", False), ("2.16.1", True), ("2.17.57", True)])
def test_create_reply_size_by_release(release, sized):
    """From 2.16 ofd_create_hdl sets OBD_MD_FLSIZE in every create reply, o_size the sequence
    width; before, a create reply has no size (FLID | FLGROUP on success, nothing on -EINVAL)."""
    t = Target(TargetConfig(release=release, last_id_start=30000))
    c = connected(t)
    rep = c.create(30005)
    assert rep.status == 0
    assert rep.oa["o_valid"] == FLID | FLGROUP | (FLSIZE if sized else 0)
    assert rep.oa["o_size"] == (t.config.seq_width if sized else 0)
    if not sized:                                       # far below LAST_ID: refused, no bits at all
        rep = c.create(1)
        assert rep.status == e("EINVAL") and rep.oa["o_valid"] == 0 and rep.oa["o_size"] == 0


@pytest.mark.parametrize("release, made", [("2.12.9", 10000), ("2.15.8", 10000), ("2.16.1", 20000)])
def test_create_huge_gap_by_release(release, made):
    """A gap above 5 * OST_MAX_PRECREATE: from 2.16 the last min(width, OST_MAX_PRECREATE) ids
    are made; before, the last OST_MAX_PRECREATE / 2 (ofd_create_hdl)."""
    t = Target(TargetConfig(release=release))
    c = connected(t)
    c.create(3)
    rep = c.create(200000)
    assert rep.status == 0 and rep.oid == (0, 200000)
    assert c.getattr(200000 - made + 1).status == 0 and c.getattr(200000 - made).status == e("ENOENT")
    assert len(t.objects) == 3 + made
