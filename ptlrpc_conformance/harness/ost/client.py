"""The suite's clients of a target, and what it expects back (docs/target-rules.md).

A `Client` builds the requests a Lustre client would send (its XIDs, connection count,
`pb_last_xid`, export cookie) with the suite's own packer (harness/ost/wire.py).  An `Expect`
is what one request must be answered with, worked out by the suite from what it sent and
what it broke; `Expect.check` judges a reply against it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.ost.wire import ERR, REPLY, Message

C = spec.constant
EOF = C("OBD_OBJECT_EOF")
MD = {name[len("OBD_MD_"):]: C(name) for name in
      ("OBD_MD_FLID", "OBD_MD_FLGROUP", "OBD_MD_FLSIZE", "OBD_MD_FLBLOCKS", "OBD_MD_FLATIME",
       "OBD_MD_FLMTIME", "OBD_MD_FLCTIME", "OBD_MD_FLMODE", "OBD_MD_FLTYPE", "OBD_MD_FLUID",
       "OBD_MD_FLGID")}
# attribute -> (obdo field, its valid bit)
ATTRS = {"size": ("o_size", MD["FLSIZE"]), "atime": ("o_atime", MD["FLATIME"]),
         "mtime": ("o_mtime", MD["FLMTIME"]), "ctime": ("o_ctime", MD["FLCTIME"]),
         "mode": ("o_mode", MD["FLMODE"]), "uid": ("o_uid", MD["FLUID"]), "gid": ("o_gid", MD["FLGID"])}
SETTABLE = ("atime", "mtime", "ctime", "mode", "uid", "gid")      # SETATTR applies these
TARGET_UUID = None


def errno(name: str) -> int:
    return -spec.errno_value(name)


def target_uuid() -> str:
    return spec.target()["target_uuid"]


def version_of(opc_name: str) -> int:
    return C(spec.target()["opcodes"][opc_name]["version"])


def ost_body(oid: int | None, valid: int = 0, seq: int = 0, **fields: int) -> bytes:
    """An ost_body naming object `oid` (oi form, sequence `seq`) with `valid` plus FLID|FLGROUP
    (when oid is not None) and obdo fields by name (o_size=...)."""
    values: dict = {}
    if oid is not None:
        values["oa.o_oi.oi.oi_id"] = oid
        values["oa.o_oi.oi.oi_seq"] = seq
        valid |= MD["FLID"] | MD["FLGROUP"]
    values["oa.o_valid"] = valid
    for name, value in fields.items():
        values[f"oa.{name}"] = value
    return wire.pack_struct("ost_body", values)


def uuid_buffer(text: str) -> bytes:
    return wire.pack_struct("obd_uuid", {"uuid": text})


@dataclass
class Client:
    name: str
    handle: int                          # the client's own lustre_handle cookie (buffer 3)
    uuid: str = ""
    next_xid: int = 1
    conn_cnt: int = 0
    cookie: int = 0                      # the export cookie: pb_handle of every request
    connected: bool = False
    readonly: bool = False
    replay_create: bool = False
    unreplied: set[int] = field(default_factory=set)

    def __post_init__(self):
        self.uuid = self.uuid or f"conformance-client-{self.name}"

    def last_xid(self) -> int:
        """The highest XID below which every request of this client has been answered."""
        if self.unreplied:
            return min(self.unreplied) - 1
        return self.next_xid - 1

    def new_xid(self) -> int:
        xid = self.next_xid
        self.next_xid += 1
        return xid

    def request(self, opc_name: str, buffers: list[bytes] = (), *, xid: int | None = None,
                flags: int = 0, op_flags: int = 0, transno: int = 0, version: int | None = None,
                conn_cnt: int | None = None, handle: int | None = None, last_xid: int | None = None,
                timeout: int = 30, pb_type: int = wire.REQUEST, lm_flags: int = wire.AT_SUPPORT,
                pre_versions: tuple = (0, 0, 0, 0), opc: int | None = None) -> tuple[int, bytes]:
        """(xid, bytes) of a request; every keyword overrides what a correct client sends."""
        if xid is None:
            xid = self.new_xid()
        connecting = opc_name in ("OST_CONNECT", "OST_DISCONNECT")
        body = {
            "pb_handle": self.cookie if handle is None else handle,
            "pb_type": pb_type,
            "pb_version": (version_of(opc_name) if version is None else version) | C("PTLRPC_MSG_VERSION"),
            "pb_opc": C(opc_name) if opc is None else opc,
            # the request itself is not answered yet: pb_last_xid stays below its XID
            "pb_last_xid": (0 if connecting else min(self.last_xid(), xid - 1)) if last_xid is None else last_xid,
            "pb_transno": transno,
            "pb_flags": flags,
            "pb_op_flags": op_flags,
            "pb_conn_cnt": self.conn_cnt if conn_cnt is None else conn_cnt,
            "pb_timeout": timeout,
            "pb_pre_versions": pre_versions,
        }
        return xid, wire.pack_message([wire.pack_body(body)] + list(buffers), lm_flags=lm_flags)

    def connect_buffers(self, flags: int = 0, flags2: int = 0, transno: int = 0) -> list[bytes]:
        flags |= C("OBD_CONNECT_FULL20") | C("OBD_CONNECT_VERSION") | C("OBD_CONNECT_TRANSNO")
        if self.readonly:
            flags |= C("OBD_CONNECT_RDONLY")
        if self.replay_create:
            flags |= C("OBD_CONNECT_FLAGS2")
            flags2 |= C("OBD_CONNECT2_REPLAY_CREATE")
        ocd = wire.pack_struct("obd_connect_data", {"ocd_connect_flags": flags, "ocd_connect_flags2": flags2,
                                                    "ocd_version": 0x02113900, "ocd_transno": transno})
        return [uuid_buffer(target_uuid()), uuid_buffer(self.uuid),
                wire.pack_struct("lustre_handle", {"cookie": self.handle}), ocd]

    def connect(self, **kw) -> tuple[int, bytes]:
        """The next connect attempt: the count grows by one; pb_handle is the cookie (0 first)."""
        self.conn_cnt += 1
        op_flags = 0 if self.cookie else C("MSG_CONNECT_INITIAL")
        return self.request("OST_CONNECT", self.connect_buffers(), op_flags=op_flags, **kw)


# ---------------------------------------------------------------------------------------
# expectations
# ---------------------------------------------------------------------------------------

@dataclass
class Expect:
    """What a request must be answered with.  `reply` False: dropped.  `transno`: "zero",
    "nonzero" or "any".  `fields`: obdo/struct values the reply buffer 1 must hold (dotted
    names, read as `struct`).  `requirement`: the requirement a mismatch violates."""
    reply: bool = True
    type: int | None = REPLY
    status: int | None = 0
    transno: str = "zero"
    requirement: str = "TGT-ERR-2"
    why: str = ""
    struct: str | None = None
    fields: dict = field(default_factory=dict)
    op_flags_all: int = 0
    op_flags_none: int = 0
    handle: str | None = None            # "nonzero" | "zero" | None

    def check(self, reply: bytes | None) -> tuple[list[str], Message | None]:
        """Problems ("REQ-ID: text") with `reply`, and the parsed reply."""
        rule = self.requirement
        if not self.reply:
            if reply is not None:
                rep, _ = wire.try_parse(reply, "reply")
                got = rep.describe() if rep else f"{len(reply)} bytes"
                return [f"TGT-DROP-1: {self.why or 'the request'} must be dropped (no reply); got {got}"], rep
            return [], None
        if reply is None:
            return [f"{rule}: expected a reply ({self.describe()}), the target sent none"], None
        rep, why = wire.try_parse(reply, "reply")
        if rep is None:
            return [f"TGT-REPLY-1: the reply does not unpack: {why}"], None
        problems = []
        r = rep.body
        if self.type is not None and r["pb_type"] != self.type:
            problems.append(f"{rule}: expected {wire.TYPE_NAME[self.type]}, got {rep.type_name} ({self.why})")
        if self.status is not None and rep.status != self.status:
            problems.append(f"{rule}: expected status {self.status} ({_errname(self.status)}), got {rep.status} ({_errname(rep.status)}) ({self.why})")
        if self.transno == "zero" and r["pb_transno"]:
            problems.append(f"TGT-TRANSNO-2: expected transno 0, got {r['pb_transno']:#x} ({self.why})")
        if self.transno == "nonzero" and not r["pb_transno"]:
            problems.append(f"TGT-TRANSNO-2: expected a transno, got 0 ({self.why})")
        if self.op_flags_all and (r["pb_op_flags"] & self.op_flags_all) != self.op_flags_all:
            problems.append(f"TGT-CONN-1: pb_op_flags {r['pb_op_flags']:#x} lacks {self.op_flags_all & ~r['pb_op_flags']:#x}")
        if self.op_flags_none and r["pb_op_flags"] & self.op_flags_none:
            problems.append(f"TGT-CONN-1: pb_op_flags {r['pb_op_flags']:#x} must not have {r['pb_op_flags'] & self.op_flags_none:#x}")
        if self.handle == "nonzero" and not r["pb_handle"]:
            problems.append("TGT-CONN-1: the connect reply carries no export cookie")
        if self.struct and self.fields:
            got = rep.struct(1, self.struct)
            if got is None:
                problems.append(f"{rule}: the reply has no {self.struct} in buffer 1")
            else:
                for name, want in self.fields.items():
                    base, _, mask = name.partition("&")      # "oa.o_mode&4095": compare those bits
                    value = got.get(base)
                    if mask and isinstance(value, int):
                        value &= int(mask, 0)
                    if value != want:
                        problems.append(f"{rule}: reply {name} is {value!r}, expected {want!r} ({self.why})")
        return problems, rep

    def describe(self) -> str:
        if not self.reply:
            return "no reply"
        t = wire.TYPE_NAME.get(self.type, "any type") if self.type is not None else "any type"
        s = "any status" if self.status is None else f"status {self.status}"
        return f"{t}, {s}, transno {self.transno}"

    def as_yaml(self) -> dict:
        """The expectation as scenario-vector predicates (docs/scenarios.md)."""
        if not self.reply:
            return {"reply": "none"}
        out: dict = {"requirement": self.requirement}
        if self.type is not None:
            out["type"] = wire.TYPE_NAME[self.type]
        if self.status is not None:
            out["status"] = self.status
        out["transno"] = self.transno
        if self.op_flags_all:
            out["op_flags_all"] = self.op_flags_all
        if self.op_flags_none:
            out["op_flags_none"] = self.op_flags_none
        if self.handle:
            out["handle"] = self.handle
        if self.struct and self.fields:
            out["struct"] = self.struct
            out["fields"] = dict(self.fields)
        if self.why:
            out["why"] = self.why
        return out

    @classmethod
    def from_yaml(cls, d: dict) -> "Expect":
        if d.get("reply") == "none":
            return cls(reply=False)
        types = {v: k for k, v in wire.TYPE_NAME.items()}
        return cls(type=types[d["type"]] if "type" in d else None, status=d.get("status"),
                   transno=d.get("transno", "any"), requirement=d.get("requirement", "TGT-ERR-2"),
                   why=d.get("why", ""), struct=d.get("struct"), fields=dict(d.get("fields", {})),
                   op_flags_all=d.get("op_flags_all", 0), op_flags_none=d.get("op_flags_none", 0),
                   handle=d.get("handle"))


def _errname(status: int) -> str:
    if status == 0:
        return "ok"
    name = spec.errno_name(-status) if status < 0 else None
    return f"-{name}" if name else "?"


def err(name: str, requirement: str = "TGT-ERR-1", why: str = "") -> Expect:
    return Expect(type=ERR, status=errno(name), transno="zero", requirement=requirement, why=why)


def reply(status: str | int = 0, transno: str = "zero", requirement: str = "TGT-ERR-2", why: str = "",
          **kw) -> Expect:
    s = errno(status) if isinstance(status, str) else status
    return Expect(type=REPLY, status=s, transno=transno, requirement=requirement, why=why, **kw)


def dropped(why: str) -> Expect:
    return Expect(reply=False, why=why, requirement="TGT-DROP-1")
