"""The suite's clients of a target, and what it expects back (docs/target-rules.md).

A `Client` builds the requests a Lustre client would send (its XIDs, connection count,
`pb_last_xid`, export cookie) with the suite's own packer (harness/ost/wire.py).  An `Expect`
is what one request must be answered with, worked out by the suite from what it sent and
what it broke; `Expect.check` judges a reply against it.  Where the rules allow several
outcomes (docs/target-rules.md: the back-end, timing or configuration decide), an `AnyOf`
lists each allowed outcome by name; the reply must match one of them, and later steps may
depend on which (docs/scenarios.md, format 2).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.ost.wire import ERR, REPLY, Message
from ptlrpc_conformance.spec import structs as S

C = spec.constant
EOF = C("OBD_OBJECT_EOF")
MD = {name[len("OBD_MD_"):]: C(name) for name in
      ("OBD_MD_FLID", "OBD_MD_FLGROUP", "OBD_MD_FLSIZE", "OBD_MD_FLBLOCKS", "OBD_MD_FLATIME",
       "OBD_MD_FLMTIME", "OBD_MD_FLCTIME", "OBD_MD_FLMODE", "OBD_MD_FLTYPE", "OBD_MD_FLUID",
       "OBD_MD_FLGID", "OBD_MD_FLPROJID", "OBD_MD_FLFLAGS")}
# attribute -> (obdo field, its valid bit)
ATTRS = {"size": ("o_size", MD["FLSIZE"]), "atime": ("o_atime", MD["FLATIME"]),
         "mtime": ("o_mtime", MD["FLMTIME"]), "ctime": ("o_ctime", MD["FLCTIME"]),
         "mode": ("o_mode", MD["FLMODE"]), "uid": ("o_uid", MD["FLUID"]), "gid": ("o_gid", MD["FLGID"]),
         "projid": ("o_projid", MD["FLPROJID"])}
SETTABLE = ("atime", "mtime", "ctime", "mode", "uid", "gid", "projid")      # SETATTR applies these
S_IFMT, S_IFREG = 0o170000, 0o100000
S_ISUID, S_ISGID, S_ISVTX = 0o4000, 0o2000, 0o1000
# a precreated object's mode (OFD_UNSET_ATTRS_MODE, ofd_internal.h): S_IFREG | 07666
FRESH_MODE = S_IFREG | S_ISUID | S_ISGID | S_ISVTX | 0o666
# what GETATTR always reports, on every back-end (ofd_getattr_hdl; docs/target-rules.md §3):
# obdo_from_la sets a bit for every attribute of the mask it is given, whatever the back-end
# filled in, and ofd_getattr_hdl's mask holds LA_PROJID, so FLPROJID is always there
GETATTR_BITS = (MD["FLSIZE"] | MD["FLATIME"] | MD["FLMTIME"] | MD["FLCTIME"] | MD["FLTYPE"] | MD["FLMODE"]
                | MD["FLUID"] | MD["FLGID"] | MD["FLPROJID"])
RDONLY = C("OBD_CONNECT_RDONLY")
FLAGS2 = C("OBD_CONNECT_FLAGS2")
REPLAY_CREATE = C("OBD_CONNECT2_REPLAY_CREATE")
# statuses of early rejections that TGT-ERR-1 names and another requirement expects (not connected,
# a replay outside recovery): sent with the wrong pb_type, they break TGT-ERR-1
_EARLY_STATUSES = (-spec.errno_value("ENOTCONN"), -spec.errno_value("ENODEV"))
# the limits of generated values (docs/target-rules.md §1): ids below 2^32 - 1, times below
# 2^34 - 2^31 seconds
MAX_ID = (1 << 32) - 2
MAX_TIME = (1 << 34) - (1 << 31) - 1

_FID_SEQ_IDIF, _FID_SEQ_IDIF_MAX = C("FID_SEQ_IDIF"), C("FID_SEQ_IDIF_MAX")
_FID_SEQ_LOV_DEFAULT = C("FID_SEQ_LOV_DEFAULT")
OI_OFFSET = next(leaf.offset for leaf in S.leaves("ost_body") if leaf.name == "oa.o_oi.oi.oi_id")


def ostid(lo: int, hi: int) -> tuple[int, int]:
    """(sequence, id) of an ost_id whose 16 bytes read as {oi_id = lo, oi_seq = hi}: Lustre's
    ostid_seq / ostid_id (lustre_ostid.h), for both union forms (oi, and a FID)."""
    if hi == 0:                                            # FID_SEQ_OST_MDT0, oi form
        return 0, lo & ((1 << 48) - 1)
    if hi == _FID_SEQ_LOV_DEFAULT:
        return hi, lo
    if _FID_SEQ_IDIF <= lo <= _FID_SEQ_IDIF_MAX:           # an IDIF FID: sequence 0
        return 0, ((lo & 0xFFFF) << 32) | (hi & 0xFFFFFFFF)
    return lo, hi & 0xFFFFFFFF                             # a FID: f_seq, f_oid


def body_object(raw: bytes, order: str) -> tuple[int, int] | None:
    """(sequence, id) of the ost_body in `raw` (a buffer 1), read in `order`.  A FID-form
    o_oi is read as {f_seq u64, f_oid u32, f_ver u32} whatever the byte order (Lustre swabs
    it as a lu_fid), an oi-form one as {oi_id u64, oi_seq u64}."""
    if len(raw) < OI_OFFSET + 16:
        return None
    b = raw[OI_OFFSET:OI_OFFSET + 16]
    lo = int.from_bytes(b[0:8], order)
    if order == "little":
        hi = int.from_bytes(b[8:16], "little")
    else:
        f_oid, f_ver = int.from_bytes(b[8:12], "big"), int.from_bytes(b[12:16], "big")
        hi = 0 if b[8:16] == bytes(8) else f_oid | (f_ver << 32)
    return ostid(lo, hi)


def reply_object_id(rep: Message | None) -> int | None:
    """The object id a reply's ost_body names (ostid_id of its o_oi), or None."""
    if rep is None or len(rep.buffers) < 2:
        return None
    got = body_object(rep.buffers[1], rep.byte_order)
    return None if got is None else got[1]


def request_object_id(req: Message | None) -> int | None:
    if req is None or len(req.buffers) < 2:
        return None
    got = body_object(req.buffers[1], req.byte_order)
    return None if got is None else got[1]


def last_id_after_create(sent_id: int, reply_id: int) -> int:
    """LAST_ID after a successful OST_CREATE that named `sent_id` and whose reply names
    `reply_id` (docs/target-rules.md §3): M if M <= N, else M - 1."""
    return reply_id if reply_id <= sent_id else reply_id - 1


def granted_flags(rep: Message | None) -> tuple[int, int] | None:
    """(ocd_connect_flags, ocd_connect_flags2) a successful connect reply grants, or None.
    flags2 counts only when OBD_CONNECT_FLAGS2 is granted."""
    if rep is None or rep.body["pb_type"] != REPLY or rep.status != 0:
        return None
    ocd = rep.struct(1, "obd_connect_data")
    if ocd is None:
        return None
    flags = ocd["ocd_connect_flags"]
    return flags, (ocd["ocd_connect_flags2"] if flags & FLAGS2 else 0)


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
    readonly: bool = False               # asks for OBD_CONNECT_RDONLY (what it gets: `granted`)
    replay_create: bool = False          # asks for OBD_CONNECT2_REPLAY_CREATE
    unreplied: set[int] = field(default_factory=set)
    granted: int = 0                     # ocd_connect_flags of the last successful connect reply
    granted2: int = 0                    # its ocd_connect_flags2 (0 unless FLAGS2 was granted)

    @property
    def is_readonly(self) -> bool:
        """The export is read-only: the connect reply *granted* OBD_CONNECT_RDONLY (row 16)."""
        return bool(self.granted & RDONLY)

    @property
    def creates_take_transnos(self) -> bool:
        """OBD_CONNECT2_REPLAY_CREATE is in force: asked for, and granted with
        OBD_CONNECT_FLAGS2 (§5).  A grant of it unasked is TGT-CONN-1's failure, not a reason
        to expect create transnos."""
        return self.replay_create and bool(self.granted & FLAGS2) and bool(self.granted2 & REPLAY_CREATE)

    def learn_grant(self, rep: Message | None) -> None:
        got = granted_flags(rep)
        if got is not None:
            self.granted, self.granted2 = got

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

OBJECT_ID = "oa.o_oi@id"            # pseudo field: ostid_id of the reply's o_oi (either form)
_REF = re.compile(r"^@(\d+)([+-]\d+)?$")


def is_ref(value) -> bool:
    """A value written as "@N" or "@N+K": LAST_ID after create step N, plus K (format 2)."""
    return isinstance(value, str) and _REF.match(value) is not None


def parse_ref(value: str) -> tuple[int, int]:
    m = _REF.match(value)
    if m is None:
        raise ValueError(f"{value!r} is not '@STEP' or '@STEP+K'")
    return int(m.group(1)), int(m.group(2) or 0)


@dataclass
class Expect:
    """What a request must be answered with.  `reply` False: dropped.  `transno`: "zero",
    "nonzero" or "any".  `fields`: obdo/struct values the reply buffer 1 must hold (dotted
    names, read as `struct`; "NAME&MASK" compares those bits; "oa.o_oi@id" is the object id
    the reply names, read with ostid_id).  `fields_if_valid`: {field: [valid bit, value]},
    judged only when the reply's o_valid has that bit (an attribute a back-end may leave
    out).  A value "@N+K" is LAST_ID after create step N plus K, resolved before judging.
    `requirement`: the requirement a mismatch violates."""
    reply: bool = True
    type: int | None = REPLY
    status: int | None = 0
    transno: str = "zero"
    requirement: str = "TGT-ERR-2"
    why: str = ""
    struct: str | None = None
    fields: dict = field(default_factory=dict)
    fields_if_valid: dict = field(default_factory=dict)
    op_flags_all: int = 0
    op_flags_none: int = 0
    handle: str | None = None            # "nonzero" | "zero" | None

    def refs(self) -> list[str]:
        """The "@N+K" values this expectation holds."""
        out = [v for v in self.fields.values() if is_ref(v)]
        out += [v[1] for v in self.fields_if_valid.values() if is_ref(v[1])]
        return out

    def resolve(self, value_of) -> "Expect":
        """A copy with every "@N+K" value replaced by value_of("@N+K") (an int)."""
        if not self.refs():
            return self
        return replace(self, fields={k: value_of(v) if is_ref(v) else v for k, v in self.fields.items()},
                       fields_if_valid={k: [b, value_of(v) if is_ref(v) else v]
                                        for k, (b, v) in self.fields_if_valid.items()})

    def check(self, reply: bytes | None) -> tuple[list[str], Message | None]:
        """Problems ("REQ-ID: text") with `reply`, and the parsed reply."""
        rule = self.requirement
        if not self.reply:
            if reply is not None:
                rep, _ = wire.try_parse(reply, "reply")
                got = rep.describe() if rep else f"{len(reply)} bytes"
                return [f"{self.requirement}: {self.why or 'the request'} must be dropped (no reply); got {got}"], rep
            return [], None
        if reply is None:
            return [f"{rule}: expected a reply ({self.describe()}), the target sent none"], None
        rep, why = wire.try_parse(reply, "reply")
        if rep is None:
            return [f"TGT-REPLY-1: the reply does not unpack: {why}"], None
        problems = []
        r = rep.body
        if self.type is not None and r["pb_type"] != self.type:
            # the right status with the wrong type breaks the error-type rule: an early rejection
            # (-ENOTCONN, -ENODEV) not sent as ERR TGT-ERR-1, a handler's failure not sent as
            # REPLY TGT-ERR-2; any other mismatch is the step's rule
            type_rule = rule
            if rep.status == self.status and self.type == ERR and self.status in _EARLY_STATUSES:
                type_rule = "TGT-ERR-1"
            elif rep.status == self.status and self.type == REPLY and (self.status or 0) < 0:
                type_rule = "TGT-ERR-2"
            problems.append(f"{type_rule}: expected {wire.TYPE_NAME[self.type]}, got {rep.type_name} ({self.why})")
        if self.status is not None and rep.status != self.status:
            problems.append(f"{rule}: expected status {self.status} ({_errname(self.status)}), got {rep.status} ({_errname(rep.status)}) ({self.why})")
        if self.transno == "zero" and r["pb_transno"]:
            problems.append(f"TGT-TRANSNO-2: expected transno 0, got {r['pb_transno']:#x} ({self.why})")
        if self.transno == "nonzero" and not r["pb_transno"]:
            problems.append(f"TGT-TRANSNO-2: expected a transno, got 0 ({self.why})")
        op = r["pb_op_flags"]
        for bits, verb in ((self.op_flags_all & ~op, "lacks"), (self.op_flags_none & op, "must not have")):
            for rule_of_bits, group in self._connect_flag_groups(bits):
                problems.append(f"{rule_of_bits}: pb_op_flags {op:#x} {verb} {group:#x} ({self.why})")
        if self.handle == "nonzero" and not r["pb_handle"]:
            problems.append(f"{self._connect_rule()}: the connect reply carries no export cookie ({self.why})")
        if self.struct and (self.fields or self.fields_if_valid):
            got = rep.struct(1, self.struct)
            if got is None:
                problems.append(f"{rule}: the reply has no {self.struct} in buffer 1")
            else:
                def value_of(name):
                    if name == OBJECT_ID:
                        return reply_object_id(rep)
                    base, _, mask = name.partition("&")      # "oa.o_mode&4095": compare those bits
                    value = got.get(base)
                    if mask and isinstance(value, int):
                        value &= int(mask, 0)
                    return value
                for name, want in self.fields.items():
                    value = value_of(name)
                    if value != want:
                        problems.append(f"{rule}: reply {name} is {_show(value)}, expected {_show(want)} ({self.why})")
                valid = got.get("oa.o_valid", 0)
                for name, (bit, want) in self.fields_if_valid.items():
                    value = value_of(name)
                    if valid & bit and value != want:
                        problems.append(f"{rule}: reply {name} is {_show(value)} (its bit {bit:#x} is set), "
                                        f"expected {_show(want)} ({self.why})")
        return problems, rep

    def _connect_rule(self) -> str:
        """The requirement a connect reply's cookie and MSG_CONNECT_REPLAYABLE answer to:
        RCV-CONN-1 for a connect the step expects answered in recovery (it requires
        MSG_CONNECT_RECOVERING), else TGT-CONN-1."""
        return "RCV-CONN-1" if self.op_flags_all & C("MSG_CONNECT_RECOVERING") else "TGT-CONN-1"

    def _connect_flag_groups(self, bits: int) -> list[tuple[str, int]]:
        """`bits` of pb_op_flags split by the requirement that states each: MSG_CONNECT_RECOVERING
        (whether the target is recovering) RCV-CONN-1, MSG_CONNECT_RECONNECT (whether an export
        was kept) TGT-CONN-1, the others the connect rule's (_connect_rule)."""
        recovering, reconnect = bits & C("MSG_CONNECT_RECOVERING"), bits & C("MSG_CONNECT_RECONNECT")
        rest = bits & ~recovering & ~reconnect
        groups = (("RCV-CONN-1", recovering), ("TGT-CONN-1", reconnect), (self._connect_rule(), rest))
        return [(rule, group) for rule, group in groups if group]

    def describe(self) -> str:
        if not self.reply:
            return "no reply"
        t = wire.TYPE_NAME.get(self.type, "any type") if self.type is not None else "any type"
        s = "any status" if self.status is None else f"status {self.status}"
        return f"{t}, {s}, transno {self.transno}"

    def as_yaml(self) -> dict:
        """The expectation as scenario-vector predicates (docs/scenarios.md)."""
        if not self.reply:
            out = {"reply": "none"}
            if self.requirement != "TGT-DROP-1":
                out["requirement"] = self.requirement
            if self.why:
                out["why"] = self.why
            return out
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
        if self.struct and (self.fields or self.fields_if_valid):
            out["struct"] = self.struct
            if self.fields:
                out["fields"] = dict(self.fields)
            if self.fields_if_valid:
                out["fields_if_valid"] = {k: list(v) for k, v in self.fields_if_valid.items()}
        if self.why:
            out["why"] = self.why
        return out

    @classmethod
    def from_yaml(cls, d: dict) -> "Expect":
        if d.get("reply") == "none":
            return cls(reply=False, why=d.get("why", ""), requirement=d.get("requirement", "TGT-DROP-1"))
        types = {v: k for k, v in wire.TYPE_NAME.items()}
        fiv = d.get("fields_if_valid", {}) or {}
        if not isinstance(fiv, dict) or any(not (isinstance(v, list) and len(v) == 2 and isinstance(v[0], int))
                                            for v in fiv.values()):
            raise ValueError("fields_if_valid maps a field to [valid bit, value]")
        return cls(type=types[d["type"]] if "type" in d else None, status=d.get("status"),
                   transno=d.get("transno", "any"), requirement=d.get("requirement", "TGT-ERR-2"),
                   why=d.get("why", ""), struct=d.get("struct"), fields=dict(d.get("fields", {})),
                   fields_if_valid={k: list(v) for k, v in fiv.items()},
                   op_flags_all=d.get("op_flags_all", 0), op_flags_none=d.get("op_flags_none", 0),
                   handle=d.get("handle"))


@dataclass
class AnyOf:
    """Several allowed outcomes of one request, each with a name: the reply must match one of
    them (docs/scenarios.md: `expect_any`).  Never squeeze two outcomes into one Expect."""
    alternatives: list[tuple[str, Expect]]

    def __post_init__(self):
        names = [n for n, _ in self.alternatives]
        if not names or len(set(names)) != len(names):
            raise ValueError("expect_any needs outcomes with distinct names")

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.alternatives]

    def refs(self) -> list[str]:
        return [r for _, e in self.alternatives for r in e.refs()]

    def resolve(self, value_of) -> "AnyOf":
        return AnyOf([(n, e.resolve(value_of)) for n, e in self.alternatives])

    def check(self, reply: bytes | None) -> tuple[list[str], Message | None, str | None]:
        """(problems, the parsed reply, the name of the outcome the reply matched or None)."""
        results = []
        for name, exp in self.alternatives:
            problems, rep = exp.check(reply)
            if not problems:
                return [], rep, name
            results.append((name, problems, rep))
        best = min(results, key=lambda r: len(r[1]))
        others = "; ".join(f"{n!r}: {p[0].split(': ', 1)[-1]}" for n, p, _ in results if n != best[0])
        rep = next((r for _, _, r in results if r is not None), None)
        tail = f" [closest allowed outcome {best[0]!r}; the others fail too: {others}]" if others else \
            f" [the only allowed outcome {best[0]!r}]"
        return [p + tail for p in best[1]], rep, None

    def describe(self) -> str:
        return " or ".join(f"{n}: {e.describe()}" for n, e in self.alternatives)

    def as_yaml(self) -> list[dict]:
        return [dict({"outcome": n}, **e.as_yaml()) for n, e in self.alternatives]

    @classmethod
    def from_yaml(cls, items: list) -> "AnyOf":
        if not isinstance(items, list) or len(items) < 2:
            raise ValueError("expect_any must list at least two outcomes")
        alts = []
        for it in items:
            if not isinstance(it, dict) or not isinstance(it.get("outcome"), str) or not it["outcome"]:
                raise ValueError("each expect_any entry needs an 'outcome' name")
            alts.append((it["outcome"], Expect.from_yaml({k: v for k, v in it.items() if k != "outcome"})))
        return cls(alts)


# How a target without project quota answers a request that sets a projid other than the
# stored one (docs/target-rules.md §3, "Project ids"): the outcomes of such a request are named
# "projid:MODE" in an AnyOf, and a run keeps to one mode (harness/ost/steps.py)
PROJID_APPLIED, PROJID_REFUSED, PROJID_DROPPED = "applied", "refused", "dropped"
PROJID_MODES = (PROJID_APPLIED, PROJID_REFUSED, PROJID_DROPPED)
PROJID_OUTCOME = "projid:"


def projid_modes(configuration: dict | None) -> set[str]:
    """The projid modes a target may keep to, by what its hello declares: project quota
    declared, the projid is applied; declared absent, it is refused (-EOPNOTSUPP: ldiskfs
    without the project feature, ZFS 0.8 or later without project accounting) or dropped
    silently (ZFS before 0.8); not declared, any of the three."""
    declared = (configuration or {}).get("project_quota")
    if declared is True:
        return {PROJID_APPLIED}
    if declared is False:
        return {PROJID_REFUSED, PROJID_DROPPED}
    return set(PROJID_MODES)


def projid_mode_of(outcome: str) -> str | None:
    """The projid mode an outcome name stands for ("projid:refused" -> "refused"), or None."""
    return outcome[len(PROJID_OUTCOME):] if outcome.startswith(PROJID_OUTCOME) else None


def check_any(expect: "Expect | AnyOf | None", reply: bytes | None) -> tuple[list[str], Message | None, str | None]:
    """Judge `reply` against an Expect or an AnyOf: (problems, parsed reply, outcome name).
    A plain Expect's outcome is "expected"."""
    if expect is None:
        rep, _ = wire.try_parse(reply, "reply")
        return [], rep, "expected"
    if isinstance(expect, AnyOf):
        return expect.check(reply)
    problems, rep = expect.check(reply)
    return problems, rep, None if problems else "expected"


def _show(value) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and value > 7:
        return f"{value} ({value:#o})" if value < 0o200000 else f"{value} ({value:#x})"
    return repr(value)


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


def unknown_opcode(release: str, why: str = "") -> Expect:
    """An opcode no handler serves (docs/target-rules.md §2, row 9): ERR -EOPNOTSUPP, or before
    2.16 ERR -ENOTSUPP (524, LUSTRE_ENOTSUPP) (tgt_handler_find_check; `release`'s
    unknown_opcode_eopnotsupp)."""
    from ptlrpc_conformance.harness.verdicts import release as release_rules
    return err("EOPNOTSUPP" if release_rules.behaviour(release, "unknown_opcode_eopnotsupp") else "ENOTSUPP", why=why)


def readonly_refusal(release: str, why: str = "") -> Expect:
    """A mutable opcode on an export granted OBD_CONNECT_RDONLY (row 16): REPLY -EROFS, or
    before 2.16 ERR -EROFS (ptlrpc_send_error; `release`'s erofs_sent_as_reply)."""
    from ptlrpc_conformance.harness.verdicts import release as release_rules
    if release_rules.behaviour(release, "erofs_sent_as_reply"):
        return reply("EROFS", why=why)
    return err("EROFS", requirement="TGT-ERR-2", why=why)


def dropped(why: str, requirement: str = "TGT-DROP-1") -> Expect:
    """No reply.  `requirement`: the rule that drops it (TGT-CONN-2 for a stale pb_conn_cnt)."""
    return Expect(reply=False, why=why, requirement=requirement)
