"""An OST target written from docs/target-rules.md alone, independent of the bundled reference
(reference/target/): its own message packer and parser, its own state, and different
choices wherever the rules allow several outcomes — so that the suite is shown to accept
what the rules allow, not what the reference happens to do.

Its choices (each a member of a set the rules allow):

- replies in big-endian byte order (the suite sends little-endian requests);
- LAST_ID starts at 5 on a fresh target; a create makes at most two objects (it "stops
  early", docs/target-rules.md §3) and each object is a transaction of its own (several
  transnos per create with REPLAY_CREATE; the reply carries the last);
- transnos start at (3 << 32) + 100 and grow by 2 (gaps); OST_SYNC commits nothing; when a
  transaction commits is its commit policy (`commit`), each a schedule Lustre allows
  (docs/target-rules.md §5: a back-end commits when it will):
  - `newer3` (the default): a transaction commits once three newer ones exist, and the end of
    recovery commits everything;
  - `at-once`: every transaction commits as it is made (its own reply says so);
  - `at-restart`: nothing commits while the target runs; a restart commits everything first
    (the back-end caught up just before the crash: every change survives, no client was told);
  - `random`: after each transaction, at points drawn from a seeded generator, the oldest
    transactions commit (the same seed and requests give the same points);
- a ZFS-like back-end built before project quotas (ZFS before 0.8): a punch never changes
  mtime by itself; projid is dropped silently, so OST_GETATTR reports OBD_MD_FLPROJID (as
  every OST does) with projid 0; its hello declares no configuration;
- resends and replays of committed transactions run again (Lustre's OST: no saved replies);
  with `saved_replies=True`, a replay whose XID is that of one of its client's committed
  transactions is answered from that transaction's saved reply instead, found by the XID alone
  as reply data is (tgt_lookup_reply; RCV-REPLAY-1 allows either, never a mix);
- `restart` reports no commit point; the replay queue's gap rule does the work (no transno
  is ever the next expected one, cp + 1, since transnos grow by 2);
- with `forget=True`, a client's slot in last_rcvd is written as Lustre writes it
  (tgt_client_new -> tgt_client_data_update): in a local transaction that commits with the
  next commit of anything, and until it has, the client's transactions that take a transno
  are synchronous (exp_need_sync: the first one commits everything before it).  A restart
  forgets every client whose slot had not committed.  Under the `random` policy a commit may
  also land just before a new client connects (so of two clients that connected one after the
  other, the first may be remembered and the second forgotten); under `at-once` a slot
  commits as it is written, and under `at-restart` with everything else before the crash;
- with `old_creates=True`, an OST as those before 2.16 on a journalling back-end: it never
  grants OBD_CONNECT2_REPLAY_CREATE, and a create is a local transaction that commits in order
  with the others (it waits behind them and is lost at a restart with every transaction that
  had not committed), where the default keeps it on disk at once.

Its tables - the opcodes, the fields of the structures it reads and writes - are its own,
written from docs/target-rules.md and the Lustre headers that page names; it reads neither
spec/target.yaml nor the suite's structure walker.  From the package it takes only constants
and errnos by their Lustre names (spec.constant, spec.errno_value).

Load it with --iut python:independent_ost:testee (tests/ on sys.path).
"""
from __future__ import annotations

import copy
import random
import struct
from dataclasses import dataclass, field

from ptlrpc_conformance import spec

C = spec.constant


@dataclass(frozen=True)
class Field:
    offset: int
    size: int


# struct ptlrpc_body_v3 (lustre_idl.h): the fields this target reads or writes; pb_handle and
# the pads are opaque, never byte-swapped (lustre_swab_ptlrpc_body)
BODY = {name: Field(offset, size) for name, offset, size in (
    ("pb_handle", 0, 8), ("pb_type", 8, 4), ("pb_version", 12, 4), ("pb_opc", 16, 4), ("pb_status", 20, 4),
    ("pb_last_xid", 24, 8), ("pb_last_committed", 40, 8), ("pb_transno", 48, 8), ("pb_flags", 56, 4),
    ("pb_op_flags", 60, 4), ("pb_conn_cnt", 64, 4), ("pb_timeout", 68, 4), ("pb_pre_versions", 88, 32))}
UNSWABBED = {"pb_handle"}
# struct ost_body { struct obdo oa; } (lustre_idl.h), 208 bytes: the obdo fields this target uses
OST_BODY = {"oa." + name: Field(offset, size) for name, offset, size in (
    ("o_valid", 0, 8), ("o_oi.oi.oi_id", 8, 8), ("o_oi.oi.oi_seq", 16, 8), ("o_size", 32, 8), ("o_mtime", 40, 8),
    ("o_atime", 48, 8), ("o_ctime", 56, 8), ("o_blocks", 64, 8), ("o_mode", 84, 4), ("o_uid", 88, 4),
    ("o_gid", 92, 4), ("o_flags", 96, 4), ("o_misc", 108, 4), ("o_data_version", 176, 8), ("o_projid", 184, 4))}
# struct obd_connect_data (lustre_idl.h), 192 bytes: the fields a connect reads and answers
OCD = {name: Field(offset, size) for name, offset, size in (
    ("ocd_connect_flags", 0, 8), ("ocd_version", 8, 4), ("ocd_connect_flags2", 80, 8))}
MAGIC, MAGIC_SWABBED = C("LUSTRE_MSG_MAGIC_V2"), C("LUSTRE_MSG_MAGIC_V2_SWABBED")
REQUEST, REPLY, ERR = C("PTL_RPC_MSG_REQUEST"), C("PTL_RPC_MSG_REPLY"), C("PTL_RPC_MSG_ERR")
RESENT, REPLAY = C("MSG_RESENT"), C("MSG_REPLAY")
REQ_DONE, LOCK_DONE = C("MSG_REQ_REPLAY_DONE"), C("MSG_LOCK_REPLAY_DONE")
FL = {n: C("OBD_MD_FL" + n) for n in ("ID", "GROUP", "SIZE", "BLOCKS", "ATIME", "MTIME", "CTIME", "TYPE", "MODE",
                                      "UID", "GID", "PROJID", "FLAGS", "DATAVERSION")}
EOF_ = C("OBD_OBJECT_EOF")
REPLY_STATUSES = {"ENOSPC", "EACCES", "EPERM", "ENOENT", "EINPROGRESS", "EDQUOT", "EROFS"}
GRANTABLE = (C("OBD_CONNECT_FULL20") | C("OBD_CONNECT_VERSION") | C("OBD_CONNECT_GRANT") | C("OBD_CONNECT_FLAGS2")
             | C("OBD_CONNECT_AT") | C("OBD_CONNECT_FID"))
FID_SEQ_IDIF = C("FID_SEQ_IDIF")
FRESH_MODE = 0o107666
# The opcodes of docs/target-rules.md §3 with what §1 and §7 say of each: the service version
# its pb_version must carry (row 10), whether OBD_MD_FLID is required in its body (HAS_BODY,
# row 15), and what recovery does with it (§7: served, queued, or refused -EAGAIN)
OPS = {C(name): {"name": name, "version": C(version), "has_body": has_body, "recovery": recovery}
       for name, version, has_body, recovery in (
           ("OST_CONNECT", "LUSTRE_OBD_VERSION", False, "serve"),
           ("OST_DISCONNECT", "LUSTRE_OBD_VERSION", False, "serve"),
           ("OBD_PING", "LUSTRE_OBD_VERSION", False, "queue"),
           ("OST_GETATTR", "LUSTRE_OST_VERSION", True, "refuse"),
           ("OST_SETATTR", "LUSTRE_OST_VERSION", True, "queue"),
           ("OST_CREATE", "LUSTRE_OST_VERSION", False, "queue"),
           ("OST_DESTROY", "LUSTRE_OST_VERSION", False, "queue"),
           ("OST_PUNCH", "LUSTRE_OST_VERSION", True, "queue"),
           ("OST_SYNC", "LUSTRE_OST_VERSION", True, "queue"),
           ("OST_STATFS", "LUSTRE_OST_VERSION", False, "refuse"))}
TARGET_UUID = "lustre-OST0000_UUID"           # docs/target-rules.md §1: the target's UUID
UUID_CHARS = 40 - 1                           # a UUID string fits struct obd_uuid (40 bytes) with its NUL
OCD_MAX = 8 * 192                             # the longest connect data taken: 8 obd_connect_data (LU-12605)


def uuid_string(buffers: list[bytes], i: int) -> str | None:
    """Buffer i as a UUID: its string up to the NUL, None when it has no NUL or is too long."""
    end = buffers[i].find(b"\0") if len(buffers) > i else -1
    return buffers[i][:end].decode("latin-1") if 0 <= end <= UUID_CHARS else None


def errno(name: str) -> int:
    return -spec.errno_value(name)


def r8(n: int) -> int:
    return (n + 7) & ~7


# ---- the wire ---------------------------------------------------------------------------------

class Drop(Exception):
    """The request is dropped: no reply."""


def parse(data: bytes) -> tuple[str, dict, list[bytes], int]:
    """(byte order, ptlrpc_body fields, buffers, lm_flags) of a request; Drop if it does not
    unpack (row 1)."""
    if len(data) < 32:
        raise Drop
    magic = struct.unpack_from("<I", data, 8)[0]
    order = "<" if magic == MAGIC else ">" if magic == MAGIC_SWABBED else None
    if order is None:
        raise Drop
    count = struct.unpack_from(order + "I", data, 0)[0]
    if not 1 <= count <= 32 or len(data) < 32 + 4 * count:
        raise Drop
    lens = struct.unpack_from(order + f"{count}I", data, 32)
    at = r8(32 + 4 * count)
    buffers = []
    for n in lens:
        if n > 1 << 20 or at + r8(n) > len(data):
            raise Drop
        buffers.append(data[at:at + n])
        at += r8(n)
    if len(buffers[0]) < 152:
        raise Drop
    b0 = buffers[0]
    body = {}
    for name, f in BODY.items():
        if f.offset + f.size > len(b0) or name in ("pb_jobid",):
            continue
        if name == "pb_pre_versions":
            body[name] = list(struct.unpack_from(order + "4Q", b0, f.offset))
            continue
        o = "<" if name in UNSWABBED else order
        body[name] = struct.unpack_from(o + {2: "H", 4: "I", 8: "Q"}[f.size], b0, f.offset)[0]
    if body["pb_version"] & 0xFFFF != C("PTLRPC_MSG_VERSION"):
        raise Drop
    flags = struct.unpack_from(order + "I", data, 20)[0]
    return order, body, buffers, flags


def pack(order: str, body: dict, buffers: list[bytes]) -> bytes:
    """A reply in `order`: header, a 184-byte ptlrpc_body, buffers (already in `order`)."""
    b0 = bytearray(184)
    for name, value in body.items():
        f = BODY[name]
        if name == "pb_pre_versions":
            struct.pack_into(order + "4Q", b0, f.offset, *value)
        else:
            o = "<" if name in UNSWABBED else order
            struct.pack_into(o + {2: "H", 4: "I", 8: "Q"}[f.size], b0, f.offset, value & ((1 << 8 * f.size) - 1))
    bufs = [bytes(b0)] + buffers
    head = bytearray(r8(32 + 4 * len(bufs)))
    struct.pack_into(order + "I", head, 0, len(bufs))
    struct.pack_into(order + "I", head, 8, MAGIC)
    struct.pack_into(order + "I", head, 20, C("MSGHDR_AT_SUPPORT"))
    struct.pack_into(order + f"{len(bufs)}I", head, 32, *(len(b) for b in bufs))
    return bytes(head) + b"".join(b + bytes(r8(len(b)) - len(b)) for b in bufs)


def saved_reply(data: bytes, last_committed: int) -> bytes:
    """A saved reply sent again, with the export's current pb_last_committed."""
    order = "<" if struct.unpack_from("<I", data, 8)[0] == MAGIC else ">"
    count = struct.unpack_from(order + "I", data, 0)[0]
    out = bytearray(data)
    struct.pack_into(order + "Q", out, r8(32 + 4 * count) + BODY["pb_last_committed"].offset, last_committed)
    return bytes(out)


def get_fields(table: dict, order: str, raw: bytes) -> dict:
    out = {}
    for name, leaf in table.items():
        if leaf.offset + leaf.size <= len(raw):
            out[name] = struct.unpack_from(order + {1: "B", 2: "H", 4: "I", 8: "Q"}[leaf.size], raw, leaf.offset)[0]
    return out


def put_fields(table: dict, size: int, order: str, values: dict) -> bytes:
    out = bytearray(size)
    for name, value in values.items():
        leaf = table[name]
        struct.pack_into(order + {1: "B", 2: "H", 4: "I", 8: "Q"}[leaf.size], out, leaf.offset,
                         value & ((1 << 8 * leaf.size) - 1))
    return bytes(out)


def reply_body(order: str, oid: int | None, valid: int, **fields) -> bytes:
    """An ost_body naming object `oid` in FID (IDIF) form, read as a lu_fid {u64, u32, u32}."""
    values = {"oa.o_valid": valid}
    values.update({f"oa.{k}": v for k, v in fields.items()})
    raw = bytearray(put_fields(OST_BODY, 208, order, values))
    if oid is not None:
        struct.pack_into(order + "QII", raw, OST_BODY["oa.o_oi.oi.oi_id"].offset, FID_SEQ_IDIF | (oid >> 32) & 0xFFFF,
                         oid & 0xFFFFFFFF, oid >> 48)
    return bytes(raw)


# ---- state ------------------------------------------------------------------------------------

@dataclass
class Export:
    uuid: str
    handle: int
    cookie: int = 0
    conn_cnt: int = 0
    slot_seq: int = 0                     # when its last_rcvd slot was written (forget=True)
    slot_durable: bool = True             # that write committed (forget=True: not until a commit)
    flags: int = 0
    flags2: int = 0
    last_xid: int = 0
    last_trans_xid: int = 0
    committed_xid: int = 0
    last_committed: int = 0
    req_done: bool = False
    lock_done: bool = False
    vbr_failed: bool = False
    saved: dict = field(default_factory=dict)       # xid -> a committed transaction (its saved reply)


@dataclass
class Held:
    exp: Export
    xid: int
    peer: str
    order: str
    body: dict
    buffers: list


@dataclass
class Txn:
    transno: int
    uuid: str
    xid: int
    objects: dict                 # the live objects after it
    last_id: int
    reply: bytes | None = None    # its reply, kept for saved_replies
    seq: int = 0                  # when it was made (a commit of it commits every slot written before)


COMMIT_POLICIES = ("newer3", "at-once", "at-restart", "random")


class Target:
    def __init__(self, forget: bool = False, old_creates: bool = False, commit: str = "newer3",
                 rng: random.Random | None = None, saved_replies: bool = False, ocd_max: int | None = OCD_MAX):
        if commit not in COMMIT_POLICIES:
            raise ValueError(f"commit policy {commit!r}: not one of {', '.join(COMMIT_POLICIES)}")
        self.forget = forget
        self.old_creates = old_creates
        self.policy = commit
        self.saved_replies = saved_replies
        self.ocd_max = ocd_max                      # None: connect data of any length is taken
        self.rng = rng if rng is not None else random.Random(0)
        self.reset()

    def reset(self) -> None:
        self.objects: dict[int, dict] = {}
        self.last_id = 5
        self.durable = ({}, 5)
        self.pending: list[Txn] = []
        self.made: Txn | None = None                # the newest transaction a handler made
        self.last_transno = (3 << 32) + 100
        self.last_committed = 0
        self.exports: dict[str, Export] = {}
        self.cookies: dict[int, Export] = {}
        self.next_cookie = 0x1D00
        self.recovering = False
        self.next_recovery = 0
        self.queue: list[Held] = []
        self.lock_queue: list[Held] = []
        self.final_queue: list[Held] = []
        self.out: list[dict] = []
        self.seq = 0                                # the order of transactions and slot writes

    def tick(self) -> int:
        self.seq += 1
        return self.seq

    # -- transactions ----------------------------------------------------------------------
    def transact(self, exp: Export, xid: int, replay_transno: int = 0, versioned: int | None = None) -> int:
        """A new transaction (`versioned`: the object whose version becomes its transno)."""
        if replay_transno:
            t = replay_transno
            self.last_transno = max(self.last_transno, t)
        else:
            self.last_transno += 2
            t = self.last_transno
        exp.last_trans_xid = xid
        if versioned is not None:
            self.objects[versioned]["version"] = t
        self.made = Txn(t, exp.uuid, xid, copy.deepcopy(self.objects), self.last_id, seq=self.tick())
        self.pending.append(self.made)
        self.settle()
        if self.forget and not exp.slot_durable:   # exp_need_sync: this one is synchronous
            self.commit_all()
        return t

    def commit_all(self) -> None:
        while self.pending:
            self.commit(self.pending.pop(0))

    def settle(self) -> None:
        """Commit what the commit policy commits after a new transaction."""
        if self.policy == "newer3":
            keep = 3
        elif self.policy == "at-once":
            keep = 0
        elif self.policy == "random" and self.rng.random() < 0.4:
            keep = self.rng.randrange(len(self.pending))
        else:
            keep = len(self.pending)
        while len(self.pending) > keep:
            self.commit(self.pending.pop(0))

    def commit(self, txn: Txn) -> None:
        self.durable = (txn.objects, txn.last_id)
        for exp in self.exports.values():
            if exp.slot_seq < txn.seq:
                exp.slot_durable = True
        if not txn.transno:
            return                                  # a local transaction: no last_rcvd update
        self.last_committed = max(self.last_committed, txn.transno)
        exp = self.exports.get(txn.uuid)
        if exp is not None:
            exp.last_committed = max(exp.last_committed, txn.transno)
            exp.committed_xid = txn.xid
            exp.saved[txn.xid] = txn

    def local(self, exp: Export | None = None, xid: int = 0) -> None:
        """A local transaction (a create without REPLAY_CREATE): on disk at once, or (with
        `old_creates`) committed in order with the transactions around it."""
        if self.old_creates:
            self.pending.append(Txn(0, exp.uuid if exp else "", xid, copy.deepcopy(self.objects), self.last_id,
                                    seq=self.tick()))
            self.settle()
            return
        objects, _ = self.durable
        objects = dict(objects)
        for oid in range(self.durable[1] + 1, self.last_id + 1):
            if oid in self.objects:
                objects[oid] = copy.deepcopy(self.objects[oid])
        self.durable = (objects, max(self.durable[1], self.last_id))

    # -- the protocol operations ---------------------------------------------------------------
    def exchange(self, data: bytes, xid: int, peer: str) -> dict:
        self.out = []
        self.current = None
        try:
            reply = self.receive(data, xid, peer)
        except Drop:
            reply = None
        result = {"data": reply.hex() if reply is not None else None}
        if self.out:
            result["replies"] = self.out
        return result

    def restart(self) -> dict:
        if self.policy == "at-restart":
            self.commit_all()
            for exp in self.exports.values():
                exp.slot_durable = True             # the back-end caught up before the crash
        objects, last_id = self.durable
        self.objects, self.last_id = copy.deepcopy(objects), last_id
        self.pending = []
        point = self.last_committed
        self.last_transno = max(point, (self.last_transno >> 32) << 32)
        self.cookies = {}
        kept = {}
        for uuid, exp in self.exports.items():
            if self.forget and not exp.slot_durable:
                continue
            kept[uuid] = Export(uuid, exp.handle, flags=exp.flags, flags2=exp.flags2, conn_cnt=exp.conn_cnt,
                                last_committed=exp.last_committed, last_trans_xid=exp.committed_xid,
                                committed_xid=exp.committed_xid, saved=dict(exp.saved))
        self.exports = kept
        self.queue, self.lock_queue, self.final_queue = [], [], []
        self.recovering = bool(kept)
        self.next_recovery = point + 1
        if not kept:
            self.new_epoch()
        return {}                                   # no commit point reported

    def end_recovery(self) -> dict:
        self.out = []
        self.current = None
        if self.recovering:
            for exp in list(self.exports.values()):
                held = any(h.exp is exp for h in self.queue)
                if not exp.cookie or (not exp.req_done and not held):
                    self.evict(exp)
            self.advance()
        return {"replies": self.out}

    def new_epoch(self) -> None:
        while self.pending and self.policy == "newer3":
            self.commit(self.pending.pop(0))
        self.last_transno = ((self.last_transno >> 32) + 1) << 32

    # -- receiving ----------------------------------------------------------------------------------
    def receive(self, data: bytes, xid: int, peer: str) -> bytes | None:
        order, body, buffers, lm_flags = parse(data)
        if body["pb_type"] != REQUEST:
            raise Drop                                                        # row 2
        exp = self.cookies.get(body["pb_handle"]) if body["pb_handle"] else None
        if exp is not None and body["pb_conn_cnt"] < exp.conn_cnt:
            raise Drop                                                        # row 3
        if exp is not None and not self.recovering and (body["pb_flags"] & (REPLAY | REQ_DONE) or body["pb_transno"]):
            self.evict(exp)
            return self.reject(order, body, "ENODEV")                         # row 4
        if lm_flags & C("MSGHDR_AT_SUPPORT") and body["pb_timeout"] == 0:
            raise Drop                                                        # row 5
        if body["pb_opc"] == C("OST_CONNECT"):
            return self.connect(order, body, buffers, peer)                   # row 6
        if exp is None:
            return self.reject(order, body, "ENOTCONN")                       # row 7
        exp.last_xid = max(exp.last_xid, body["pb_last_xid"])
        if (xid == 0 or xid <= exp.last_xid) and not body["pb_flags"] & REPLAY:
            return self.reject(order, body, "EPROTO")                         # row 8
        row = OPS.get(body["pb_opc"])
        if row is None:
            return self.reject(order, body, "EOPNOTSUPP")                     # row 9
        if body["pb_version"] & 0xFFFF0000 != row["version"]:
            return self.reject(order, body, "EINVAL")                         # row 10
        if xid == exp.last_trans_xid and not body["pb_flags"] & (RESENT | REPLAY):
            raise Drop                                                        # row 12
        held = Held(exp, xid, peer, order, body, buffers)
        if self.recovering:                                                   # row 11
            if row["recovery"] == "refuse":
                return self.reject(order, body, "EAGAIN")
            if row["recovery"] == "queue":
                return self.enqueue(held)
        return self.process(held)

    def enqueue(self, h: Held) -> bytes | None:
        b = h.body
        if b["pb_flags"] & LOCK_DONE:
            h.exp.req_done = h.exp.lock_done = True
            self.final_queue.append(h)
        elif b["pb_flags"] & REQ_DONE:
            h.exp.req_done = True
            self.lock_queue.append(h)
        elif not b["pb_transno"]:
            return self.process(h)                    # not a replay: served at once
        elif b["pb_transno"] < self.next_recovery:
            return self.process(h)                    # below the next expected: at once
        elif any(q.body["pb_transno"] == b["pb_transno"] for q in self.queue):
            return None                               # its transno is held already: dropped
        else:
            self.queue.append(h)
        self.current = h
        self.current_reply = None
        self.advance()
        return self.current_reply

    def advance(self) -> None:
        if not self.recovering or any(not e.cookie for e in self.exports.values()):
            return
        while self.queue:
            self.queue.sort(key=lambda q: q.body["pb_transno"])
            first = self.queue[0]
            replaying = [e for e in self.exports.values() if not e.req_done]
            if not (first.body["pb_transno"] == self.next_recovery
                    or all(any(q.exp is e for q in self.queue) for e in replaying)):
                return
            self.queue.pop(0)
            self.next_recovery = first.body["pb_transno"] + 1
            self.answer(first, self.process(first))
        if any(not e.req_done for e in self.exports.values()):
            return
        for exp in [e for e in self.exports.values() if e.vbr_failed]:
            self.evict(exp)
        while self.lock_queue:
            h = self.lock_queue.pop(0)
            self.answer(h, self.ok(h))
        if any(not e.lock_done for e in self.exports.values()):
            return
        self.recovering = False
        self.new_epoch()
        for e in self.exports.values():
            e.req_done = e.lock_done = False
        final, self.final_queue = self.final_queue, []
        for h in final:
            self.answer(h, self.ok(h))

    def answer(self, h: Held, reply: bytes | None) -> None:
        if h is getattr(self, "current", None):
            self.current_reply = reply
        elif reply is not None:
            self.out.append({"client": h.peer, "xid": h.xid, "data": reply.hex()})

    def evict(self, exp: Export) -> None:
        self.exports.pop(exp.uuid, None)
        self.cookies = {c: e for c, e in self.cookies.items() if e is not exp}
        for q in (self.queue, self.lock_queue, self.final_queue):
            q[:] = [h for h in q if h.exp is not exp]

    # -- connections --------------------------------------------------------------------------------
    def connect(self, order, body, buffers, peer) -> bytes:
        target, uuid = uuid_string(buffers, 1), uuid_string(buffers, 2)
        if target is None:
            return self.reject(order, body, "EINVAL")
        if target != TARGET_UUID:
            return self.reject(order, body, "ENODEV")
        if uuid is None:
            return self.reject(order, body, "EINVAL")
        if len(buffers) < 5 or (self.ocd_max is not None and len(buffers[4]) > self.ocd_max):
            return self.reject(order, body, "EPROTO")
        handle = struct.unpack_from(order + "Q", buffers[3])[0]
        ocd = get_fields(OCD, order, buffers[4])
        cnt = body["pb_conn_cnt"]
        exp = self.exports.get(uuid)
        op_flags = C("MSG_CONNECT_REPLAYABLE")
        if exp is None:
            if self.recovering:
                return self.reject(order, body, "EBUSY")
            if self.forget and self.policy == "random" and self.rng.random() < 0.4:
                self.commit_all()                   # a commit lands just before this client's slot is written
                for other in self.exports.values():
                    other.slot_durable = True
            exp = self.exports[uuid] = Export(uuid, handle)
            if self.forget:
                exp.slot_seq, exp.slot_durable = self.tick(), self.policy == "at-once"
        elif not exp.cookie:                             # remembered across a restart
            if cnt == 1 or cnt <= exp.conn_cnt:
                return self.reject(order, body, "EALREADY")
        else:
            if handle != exp.handle or cnt <= exp.conn_cnt:
                return self.reject(order, body, "EALREADY")
            op_flags |= C("MSG_CONNECT_RECONNECT")
        if not exp.cookie:
            self.next_cookie += 0x31
            exp.cookie = self.next_cookie
            self.cookies[exp.cookie] = exp
        if self.recovering:
            op_flags |= C("MSG_CONNECT_RECOVERING")
        exp.conn_cnt, exp.handle, exp.last_xid = cnt, handle, 0
        exp.flags = ocd.get("ocd_connect_flags", 0) & GRANTABLE
        exp.flags2 = ocd.get("ocd_connect_flags2", 0) & C("OBD_CONNECT2_REPLAY_CREATE") \
            if exp.flags & C("OBD_CONNECT_FLAGS2") and not self.old_creates else 0
        granted = put_fields(OCD, 192, order, {"ocd_connect_flags": exp.flags, "ocd_connect_flags2": exp.flags2,
                                                "ocd_version": 0x02113900})
        reply = self.pack(order, body, REPLY, 0, exp, [granted], handle=exp.cookie, op_flags=op_flags)
        self.advance()
        return reply

    # -- handlers -------------------------------------------------------------------------------
    def reject(self, order, body, name) -> bytes:
        kind = REPLY if name in REPLY_STATUSES else ERR
        return self.pack(order, body, kind, errno(name), None, [])

    def ok(self, h: Held) -> bytes:
        return self.pack(h.order, h.body, REPLY, 0, h.exp, [])

    def pack(self, order, body, kind, status, exp, buffers, transno=0, handle=0, op_flags=0) -> bytes:
        return pack(order, {"pb_handle": handle, "pb_type": kind, "pb_version": C("PTLRPC_MSG_VERSION"),
                            "pb_opc": body["pb_opc"], "pb_status": status, "pb_transno": transno,
                            "pb_last_committed": exp.last_committed if exp is not None and kind == REPLY else 0,
                            "pb_op_flags": op_flags, "pb_conn_cnt": exp.conn_cnt if exp else 0}, buffers)

    def process(self, h: Held) -> bytes | None:
        exp, b, order = h.exp, h.body, h.order
        row = OPS[b["pb_opc"]]
        name = row["name"]
        if name == "OST_DISCONNECT":
            reply = self.ok(h)
            self.evict(exp)
            return reply
        if name in ("OBD_PING", "OST_STATFS"):
            extra = [bytes(144)] if name == "OST_STATFS" else []
            return self.pack(order, b, REPLY, 0, exp, extra)
        if len(h.buffers) < 2 or len(h.buffers[1]) < 208:
            return self.reject(order, b, "EFAULT")                            # row 13
        oa = get_fields(OST_BODY, order, h.buffers[1])
        valid = oa["oa.o_valid"]
        lo = oa["oa.o_oi.oi.oi_id"]
        hi = oa["oa.o_oi.oi.oi_seq"]
        if hi == 0:
            seq, oid = 0, lo & ((1 << 48) - 1)
        elif FID_SEQ_IDIF <= lo < FID_SEQ_IDIF << 1:
            seq, oid = 0, ((lo & 0xFFFF) << 32) | (hi & 0xFFFFFFFF)
        else:
            seq, oid = lo, hi & 0xFFFFFFFF
        if (valid & FL["ID"] and oid == 0) or not (seq == 0 or seq == 2 or seq >= C("FID_SEQ_NORMAL")
                                                   or FID_SEQ_IDIF <= seq < FID_SEQ_IDIF << 1):
            return self.reject(order, b, "EPROTO")                            # row 14
        if row["has_body"] and not valid & FL["ID"]:
            return self.reject(order, b, "EPROTO")                            # row 15
        saved = exp.saved.get(h.xid)
        if self.saved_replies and b["pb_flags"] & REPLAY and saved is not None and saved.reply is not None:
            return saved_reply(saved.reply, exp.last_committed)
        self.made = None
        reply = getattr(self, "h_" + name.lower())(h, oa, valid, oid)         # row 17
        if self.made is not None:
            self.made.reply = reply
        return reply

    def done(self, h, status, oid, valid=FL["ID"] | FL["GROUP"], transno=0, **fields):
        return self.pack(h.order, h.body, REPLY, status, h.exp, [reply_body(h.order, oid, valid, **fields)], transno)

    def h_ost_create(self, h, oa, valid, n):
        last, transno = self.last_id, 0
        rc = h.exp.flags & C("OBD_CONNECT_FLAGS2") and h.exp.flags2 & C("OBD_CONNECT2_REPLAY_CREATE")
        if n <= last:
            m = last + 1 if n < last else n
        else:
            m = min(n, last + 2)                      # stops early after two objects
            for i in range(last + 1, m + 1):
                self.objects.setdefault(i, {"size": 0, "atime": 0, "mtime": 0, "ctime": 0, "mode": FRESH_MODE,
                                            "uid": 0, "gid": 0, "version": 0})
                self.last_id = i
                if rc:
                    transno = self.transact(h.exp, h.xid, h.body["pb_transno"] if h.body["pb_flags"] & REPLAY else 0)
                else:
                    self.local(h.exp, h.xid)
        return self.done(h, 0, m, FL["ID"] | FL["GROUP"] | FL["SIZE"], transno, o_size=0x1FFFFFF)

    def h_ost_getattr(self, h, oa, valid, oid):
        o = self.objects.get(oid)
        if o is None:
            return self.done(h, errno("ENOENT"), oid)
        bits = (FL["ID"] | FL["GROUP"] | FL["SIZE"] | FL["BLOCKS"] | FL["ATIME"] | FL["MTIME"] | FL["CTIME"] | FL["TYPE"]
                | FL["MODE"] | FL["UID"] | FL["GID"] | FL["PROJID"] | FL["DATAVERSION"])
        return self.done(h, 0, oid, bits, o_size=o["size"], o_blocks=1, o_atime=o["atime"], o_mtime=o["mtime"],
                         o_ctime=o["ctime"], o_mode=o["mode"], o_uid=o["uid"], o_gid=o["gid"], o_projid=0,
                         o_data_version=o["version"])

    def _replay(self, h):
        return h.body["pb_transno"] if h.body["pb_flags"] & REPLAY else 0

    def _vbr(self, h, o):
        pre = h.body["pb_pre_versions"][0]
        return bool(h.body["pb_flags"] & REPLAY and pre and pre != o["version"])

    def h_ost_setattr(self, h, oa, valid, oid):
        if valid & FL["SIZE"] and oa["oa.o_size"] != EOF_:
            return self.done(h, errno("EPERM"), oid)
        o = self.objects.get(oid)
        if o is None:
            return self.done(h, errno("ENOENT"), oid)
        if self._vbr(h, o):
            h.exp.vbr_failed = True
            return self.done(h, errno("EOVERFLOW"), oid)
        new = dict(o)
        for attr in ("atime", "mtime", "ctime", "uid", "gid"):
            if valid & FL[attr.upper()]:
                new[attr] = oa[f"oa.o_{attr}"]
        mask = (0o4000 if valid & FL["UID"] else 0) | (0o2000 if valid & FL["GID"] else 0) | \
            (0o1000 if valid & FL["PROJID"] else 0)
        perm = oa["oa.o_mode"] & 0o7777 if valid & FL["MODE"] else o["mode"] & 0o7777
        new["mode"] = 0o100000 | (perm & ~(mask & o["mode"]))
        self.objects[oid] = new
        t = self.transact(h.exp, h.xid, self._replay(h))
        return self.done(h, 0, oid, transno=t)

    def h_ost_punch(self, h, oa, valid, oid):
        if valid & (FL["SIZE"] | FL["BLOCKS"]) != FL["SIZE"] | FL["BLOCKS"]:
            return self.pack(h.order, h.body, ERR, errno("EPROTO"), None, [])
        if oa["oa.o_blocks"] != EOF_:
            return self.done(h, errno("EPROTO"), None, 0)
        o = self.objects.get(oid)
        if o is None:
            return self.done(h, errno("ENOENT"), oid, FL["ID"])
        if self._vbr(h, o):
            h.exp.vbr_failed = True
            return self.done(h, errno("EOVERFLOW"), oid, FL["ID"])
        new = dict(o, size=oa["oa.o_size"])
        for attr in ("atime", "mtime", "ctime"):
            if valid & FL[attr.upper()]:
                new[attr] = oa[f"oa.o_{attr}"]
        cleared = 0
        if valid & FL["UID"] and o["mode"] & 0o4000:
            new["uid"], cleared = oa["oa.o_uid"], cleared | 0o4000
        if valid & FL["GID"] and o["mode"] & 0o2000:
            new["gid"], cleared = oa["oa.o_gid"], cleared | 0o2000
        if valid & FL["PROJID"] and o["mode"] & 0o1000:
            cleared |= 0o1000                         # projid dropped (no project accounting)
        new["mode"] = o["mode"] & ~cleared
        self.objects[oid] = new
        t = self.transact(h.exp, h.xid, self._replay(h), versioned=oid)
        return self.done(h, 0, oid, FL["ID"], transno=t)

    def h_ost_destroy(self, h, oa, valid, oid):
        if oid not in self.objects:
            return self.done(h, errno("ENOENT"), oid + 1, 0)
        del self.objects[oid]
        t = self.transact(h.exp, h.xid, self._replay(h))
        return self.done(h, 0, oid + 1, 0, transno=t)

    def h_ost_sync(self, h, oa, valid, oid):
        if oid not in self.objects:
            return self.done(h, errno("ENOENT"), None, 0)
        return self.done(h, 0, oid)


class Testee:
    """Testee protocol v1 around the target, in process.  `commit` is the target's commit
    policy; under "random", `seed` seeds the one generator of its commit points."""

    def __init__(self, forget: bool = False, old_creates: bool = False, commit: str = "newer3", seed: int = 0,
                 saved_replies: bool = False, ocd_max: int | None = OCD_MAX):
        self.forget = forget
        self.ocd_max = ocd_max
        self.old_creates = old_creates
        self.commit = commit
        self.saved_replies = saved_replies
        self.rng = random.Random(seed)
        self.target = self.new_target()

    def new_target(self) -> Target:
        return Target(self.forget, self.old_creates, self.commit, self.rng, self.saved_replies, self.ocd_max)

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        if op == "hello":
            return {"ok": True, "result": {"name": "independent OST" + (" (forgets)" if self.forget else "")
                                           + (" (creates without transnos)" if self.old_creates else "")
                                           + (f" (commits {self.commit})" if self.commit != "newer3" else "")
                                           + (" (saved replies)" if self.saved_replies else "")
                                           + (" (any connect data)" if self.ocd_max is None else ""),
                                           "version": "1", "capabilities": ["target", "restart"], "protocol": 1}}
        if op == "exchange":
            return {"ok": True, "result": self.target.exchange(bytes.fromhex(request["data"]), request["xid"],
                                                               request["client"])}
        if op == "reset":
            self.target = self.new_target()
            return {"ok": True, "result": {}}
        if op == "restart":
            return {"ok": True, "result": self.target.restart()}
        if op == "end_recovery":
            return {"ok": True, "result": self.target.end_recovery()}
        return {"ok": False, "error": "EOPNOTSUPP", "detail": f"operation {op!r} is not supported"}


def testee():
    return Testee()


def forgetful():
    return Testee(forget=True)


def old_creates():
    """Creates as before 2.16: no REPLAY_CREATE, local transactions that may be lost."""
    return Testee(old_creates=True)


# -- Lustre's own bugs, as this target would have had them (tools/recall.py, kind: target) ------
def before_lu_12605():
    """target_handle_connect before LU-12605 (149f005a31; b2_12 backport d70c45a124): connect
    data of any length is taken, its first obd_connect_data read and the rest ignored."""
    return Testee(ocd_max=None)
