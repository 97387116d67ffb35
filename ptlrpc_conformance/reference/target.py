"""The bundled reference OST target: docs/target-rules.md, in memory.

One Lustre OST as the suite's clients see it: exports keyed by cookie, objects keyed by
(sequence, id) as Lustre's ostid_seq()/ostid_id() compute them, a transno counter with
boot epochs, a commit schedule, saved replies for resends, and recovery after `restart()`
with replays in transno order and version checks (VBR).

Every behaviour that a broken target could get wrong is a setting of `TargetConfig`; the
project's tests build broken targets with `TargetConfig().but(...)`, never by patching.

`Target.exchange(data, xid, client)` takes one request (wire bytes), the XID it travelled
with and the name of the peer, and returns `{"data": HEX | None}` plus, when replies to
earlier requests went out while handling it, `"replies": [{"client", "xid", "data"}]`.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

from .. import spec
from .codec import Codec, CodecError
from .structs import StructCodec
from .target_config import TargetConfig  # noqa: F401  (also importable from here, as before)

C = spec.constant

REQUEST = C("PTL_RPC_MSG_REQUEST")
REPLY = C("PTL_RPC_MSG_REPLY")
ERR = C("PTL_RPC_MSG_ERR")
MSG_VERSION = C("PTLRPC_MSG_VERSION")
VERSION_MASK = C("LUSTRE_VERSION_MASK")
AT_SUPPORT = C("MSGHDR_AT_SUPPORT")

MSG_RESENT = C("MSG_RESENT")
MSG_REPLAY = C("MSG_REPLAY")
MSG_REQ_REPLAY_DONE = C("MSG_REQ_REPLAY_DONE")
MSG_LOCK_REPLAY_DONE = C("MSG_LOCK_REPLAY_DONE")

CONNECT_RECOVERING = C("MSG_CONNECT_RECOVERING")
CONNECT_RECONNECT = C("MSG_CONNECT_RECONNECT")
CONNECT_REPLAYABLE = C("MSG_CONNECT_REPLAYABLE")
CONNECT_TRANSNO = C("MSG_CONNECT_TRANSNO")

OBD_CONNECT_RDONLY = C("OBD_CONNECT_RDONLY")
OBD_CONNECT_FULL20 = C("OBD_CONNECT_FULL20")
OBD_CONNECT_FLAGS2 = C("OBD_CONNECT_FLAGS2")
OBD_CONNECT_VBR = C("OBD_CONNECT_VBR")
OBD_CONNECT2_REPLAY_CREATE = C("OBD_CONNECT2_REPLAY_CREATE")

FLID, FLGROUP = C("OBD_MD_FLID"), C("OBD_MD_FLGROUP")
FLSIZE, FLBLOCKS = C("OBD_MD_FLSIZE"), C("OBD_MD_FLBLOCKS")
# attribute kept per object -> its valid bit; SETATTR applies the first six
SETTABLE = {"o_atime": C("OBD_MD_FLATIME"), "o_mtime": C("OBD_MD_FLMTIME"), "o_ctime": C("OBD_MD_FLCTIME"),
            "o_mode": C("OBD_MD_FLMODE"), "o_uid": C("OBD_MD_FLUID"), "o_gid": C("OBD_MD_FLGID")}
REPORTED = dict(SETTABLE, o_size=FLSIZE, o_blocks=FLBLOCKS)
MODE_PERMISSIONS = 0o7777
OBJECT_EOF = C("OBD_OBJECT_EOF")

FID_SEQ_OST_MDT0 = C("FID_SEQ_OST_MDT0")
FID_SEQ_LOV_DEFAULT = C("FID_SEQ_LOV_DEFAULT")
FID_SEQ_IDIF, FID_SEQ_IDIF_MAX = C("FID_SEQ_IDIF"), C("FID_SEQ_IDIF_MAX")
FID_SEQ_NORMAL, FID_SEQ_ECHO = C("FID_SEQ_NORMAL"), C("FID_SEQ_ECHO")
IDIF_MAX_OID = (1 << 48) - 1

OST_BODY_SIZE = spec.layout("ost_body").size
LUSTRE_VERSION_CODE = 0x02113900          # OBD_OCD_VERSION(2, 17, 57, 0)



def _opcode_table() -> dict[int, dict]:
    table = {}
    for name, row in spec.target()["opcodes"].items():
        table[C(name)] = dict(row, name=name, version=C(row["version"]))
    return table


# --------------------------------------------------------------------------------------
# ost_id arithmetic (Lustre's ostid_seq / ostid_id, lustre_ostid.h)
# --------------------------------------------------------------------------------------

def ostid_seq(oi: dict) -> int:
    """The object's sequence from a decoded ost_id (both union views)."""
    raw_seq = oi["oi"]["oi_seq"]
    if raw_seq == FID_SEQ_OST_MDT0:
        return FID_SEQ_OST_MDT0
    if raw_seq == FID_SEQ_LOV_DEFAULT:
        return FID_SEQ_LOV_DEFAULT
    f_seq = oi["oi_fid"]["f_seq"]
    if FID_SEQ_IDIF <= f_seq <= FID_SEQ_IDIF_MAX:
        return FID_SEQ_OST_MDT0
    return f_seq


def ostid_id(oi: dict) -> int:
    raw_seq = oi["oi"]["oi_seq"]
    if raw_seq == FID_SEQ_OST_MDT0:
        return oi["oi"]["oi_id"] & IDIF_MAX_OID
    if raw_seq == FID_SEQ_LOV_DEFAULT:
        return oi["oi"]["oi_id"]
    fid = oi["oi_fid"]
    if FID_SEQ_IDIF <= fid["f_seq"] <= FID_SEQ_IDIF_MAX:
        return ((fid["f_seq"] & 0xFFFF) << 32) | fid["f_oid"]       # fid_idif_id(seq, oid, 0)
    return fid["f_oid"]


def valid_sequence(seq: int) -> bool:
    """tgt_validate_obdo: IDIF, MDT0, normal or echo."""
    return (FID_SEQ_IDIF <= seq <= FID_SEQ_IDIF_MAX or seq == FID_SEQ_OST_MDT0
            or seq >= FID_SEQ_NORMAL or seq == FID_SEQ_ECHO)


# --------------------------------------------------------------------------------------
# state
# --------------------------------------------------------------------------------------

@dataclass
class Export:
    uuid: str
    client_handle: int
    cookie: int = 0                      # 0: remembered after a restart, not reconnected yet
    conn_cnt: int = 0
    flags: int = 0                       # granted ocd_connect_flags
    flags2: int = 0
    peer: str = ""
    last_xid: int = 0
    last_committed: int = 0
    committed: list = field(default_factory=list)   # this client's committed transnos, ascending
    reported_toggle: bool = False        # for last_committed_backwards
    anonymous: bool = False
    # recovery
    in_recovery: bool = False
    req_done: bool = False
    lock_done: bool = False
    vbr_failed: bool = False

    @property
    def readonly(self) -> bool:
        return bool(self.flags & OBD_CONNECT_RDONLY)

    @property
    def replay_create(self) -> bool:
        return bool(self.flags & OBD_CONNECT_FLAGS2) and bool(self.flags2 & OBD_CONNECT2_REPLAY_CREATE)

    @property
    def vbr(self) -> bool:
        return bool(self.flags & OBD_CONNECT_VBR)


@dataclass
class Request:
    """A decoded request and where it came from."""
    xid: int
    peer: str
    msg: dict
    body: dict
    buffers: list
    order: str
    lm_flags: int

    @property
    def opc(self) -> int:
        return self.body["pb_opc"]

    @property
    def flags(self) -> int:
        return self.body["pb_flags"]

    @property
    def transno(self) -> int:
        return self.body["pb_transno"]


@dataclass
class Held:
    """A request whose reply waits for recovery to progress."""
    uuid: str
    req: Request


@dataclass
class Txn:
    transno: int
    uuid: str
    effects: list                        # [(key, object state or None)]


@dataclass
class Reply:
    """A reply before packing (saved replies are re-packed with a fresh last_committed)."""
    opc: int
    type: int
    status: int
    transno: int = 0
    buffers: tuple = ()
    handle: int = 0
    op_flags: int = 0
    pre_versions: tuple = (0, 0, 0, 0)
    early: bool = False                  # an early rejection / serious error: last_committed 0


class Target:
    """An in-memory OST (docs/target-rules.md)."""

    def __init__(self, config: TargetConfig | None = None):
        self.config = config or TargetConfig()
        self.codec = Codec(self.config.codec_config)
        self.structs = StructCodec(self.config.struct_config)
        self.opcodes = _opcode_table()
        self.refuse_statuses = {-spec.errno_value(n) for n in spec.target()["reply_statuses"]}
        self.reset()

    # ---- public ----------------------------------------------------------------------------
    def reset(self) -> None:
        cfg = self.config
        self.exports: dict[str, Export] = {}          # by client UUID
        self.cookies: dict[int, str] = {}              # export cookie -> client UUID
        self.next_cookie = cfg.cookie_start
        self.objects: dict[tuple, dict] = {}           # live state
        self.durable: dict[tuple, dict] = {}           # committed state
        self.pending: list[Txn] = []                   # uncommitted transactions, in issue order
        self.last_transno = cfg.transno_start - 1       # highest transno issued
        self.last_committed = cfg.transno_start - 1     # the last transno on disk, target-wide
        self.saved: dict[tuple, Reply] = {}            # (uuid, xid) -> reply, for resends
        self.next_object_id = 1
        # recovery
        self.recovering = False
        self.next_recovery_transno = 0
        self.replay_queue: list[Held] = []             # sorted by transno
        self.lock_queue: list[Held] = []               # MSG_REQ_REPLAY_DONE requests
        self.final_queue: list[Held] = []              # MSG_LOCK_REPLAY_DONE requests
        self.replayed: dict[int, str] = {}             # transno -> UUID that replayed it
        self.req_replay_over = False
        self._out: list[dict] = []
        self._current: Held | None = None
        self._current_reply: bytes | None = None

    def exchange(self, data: bytes, xid: int, client: str) -> dict:
        self._out = []
        self._current = None
        self._current_reply = None
        reply = self._receive(bytes(data), xid, client)
        if self._current is not None:            # answered (or not) through the recovery path
            reply = self._current_reply
        result: dict = {"data": reply.hex() if reply is not None else None}
        if self._out:
            result["replies"] = self._out
        self._out, self._current = [], None
        return result

    def restart(self) -> int:
        """Crash and come back (§7): uncommitted transactions are lost, clients remembered.
        Returns the commit point at the crash: the highest transno on stable storage."""
        cfg = self.config
        commit_point = self.last_committed
        lost = {t.transno for t in self.pending}
        if cfg.restart_loses_committed:
            self.objects, self.durable = {}, {}
        elif not cfg.restart_keeps_uncommitted:
            self.objects = copy.deepcopy(self.durable)
        else:
            self.durable = copy.deepcopy(self.objects)
        self.pending = []
        self.saved = {k: r for k, r in self.saved.items() if r.transno and r.transno not in lost}
        self.cookies = {}
        remembered = {}
        for uuid, exp in self.exports.items():
            if exp.anonymous:
                continue
            remembered[uuid] = Export(uuid=uuid, client_handle=exp.client_handle, flags=exp.flags,
                                      flags2=exp.flags2, peer=exp.peer, last_committed=exp.last_committed,
                                      committed=list(exp.committed))
        self.exports = remembered
        self.replay_queue, self.lock_queue, self.final_queue = [], [], []
        self.replayed = {}
        self.req_replay_over = False
        self.recovering = True
        self.next_recovery_transno = self.last_committed + 1
        self._out = []
        self._current = None
        self._advance()
        self._out = []
        return commit_point

    def end_recovery(self) -> list[dict]:
        """The recovery window expires: stale clients are evicted — those that have not
        reconnected, and those with nothing queued that have not said MSG_REQ_REPLAY_DONE
        (Lustre's class_disconnect_stale_exports) — and recovery goes on with the others;
        the replies sent meanwhile are returned."""
        self._out = []
        self._current = None
        if self.recovering:
            for exp in list(self.exports.values()):
                queued = any(h.uuid == exp.uuid for h in self.replay_queue)
                if not exp.cookie or (not exp.req_done and not queued):
                    self._evict(exp, advance=False)
            self._advance()      # recovery goes on with the clients left; it ends when they are done
        out, self._out = self._out, []
        return out

    # ---- receiving -----------------------------------------------------------------------
    def _receive(self, data: bytes, xid: int, peer: str) -> bytes | None:
        cfg = self.config
        try:
            msg = self.codec.decode(data, "request")
        except CodecError:
            if cfg.reply_to_undecodable:                                    # (bug)
                return self._pack(Reply(opc=0, type=ERR, status=-spec.errno_value("EINVAL"), early=True), None)
            return None                                                      # row 1, row 2
        req = Request(xid=xid, peer=peer, msg=msg, body=msg["body"],
                      buffers=[bytes.fromhex(b) for b in msg["buffers"]], order=msg["byte_order"],
                      lm_flags=msg["header"]["lm_flags"])
        body = req.body
        if req.lm_flags & AT_SUPPORT and body["pb_timeout"] == 0:
            return None                                                      # row 3
        exp = self._by_cookie(body["pb_handle"])
        if exp is not None and body["pb_conn_cnt"] < exp.conn_cnt and cfg.check_conn_cnt:
            return None                                                      # row 4
        if (exp is not None and not self.recovering and not cfg.replay_outside_recovery
                and (req.flags & (MSG_REPLAY | MSG_REQ_REPLAY_DONE) or req.transno)):
            reply = self._reject(req, "ENODEV", exp)                        # row 5
            self._evict(exp)
            return reply
        if req.opc == C("OST_CONNECT"):
            return self._connect(req, exp)                                   # row 6
        if exp is None:
            if cfg.check_handle:
                return self._reject(req, "ENOTCONN", None)                  # row 7
            exp = Export(uuid=f"anonymous:{peer}", client_handle=0, peer=peer, anonymous=True)  # (bug)
        exp.peer = peer
        last_xid = body["pb_last_xid"]
        if last_xid > exp.last_xid:
            exp.last_xid = last_xid
            self._release_saved(exp)
        if (xid == 0 or xid <= exp.last_xid) and not req.flags & MSG_REPLAY:
            return self._reject(req, "EPROTO", exp)                         # row 8
        row = self.opcodes.get(req.opc)
        if row is None:
            return self._reject(req, "EOPNOTSUPP", exp)                     # row 9
        if body["pb_version"] & VERSION_MASK != row["version"]:
            return self._reject(req, "EINVAL", exp)                         # row 10
        saved = self.saved.get((exp.uuid, xid))
        if saved is not None and not req.flags & (MSG_RESENT | MSG_REPLAY):
            return None                                                      # row 12's drop (checked first)
        if self.recovering:
            return self._recovery_filter(exp, req, row)                      # row 11
        return self._process(exp, req)

    def _recovery_filter(self, exp: Export, req: Request, row: dict) -> bytes | None:
        mode = row["recovery"]
        if mode == "serve":
            return self._process(exp, req)
        if mode != "queue":
            if not self.config.recovery_filter:            # (bug) served during recovery
                return self._process(exp, req)
            return self._reject(req, "EAGAIN", exp)
        held = Held(exp.uuid, req)
        flags = req.flags
        if flags & MSG_LOCK_REPLAY_DONE:
            exp.req_done = exp.lock_done = True
            self.final_queue = [h for h in self.final_queue if h.uuid != exp.uuid] + [held]
            return self._hold(held)
        if flags & MSG_REQ_REPLAY_DONE:
            exp.req_done = True
            self.lock_queue.append(held)
            return self._hold(held)
        if not req.transno:
            return self._process(exp, req)              # not a replay: served at once
        if not self.config.replay_in_transno_order:     # (bug) replays run as they arrive
            return self._process(exp, req)
        if req.transno < self.next_recovery_transno:
            owner = self.replayed.get(req.transno)
            if owner is not None and owner != exp.uuid and self.config.drop_claimed:
                return None                              # claimed by another client
            return self._process(exp, req)
        for other in self.replay_queue:
            if other.req.transno == req.transno:
                if other.uuid == exp.uuid and other.req.xid == req.xid:
                    other.req = req                      # a resend of a queued replay replaces it
                    return self._hold(other)
                if self.config.drop_claimed:
                    return None                          # transno claimed by another client
        self.replay_queue.append(held)
        self.replay_queue.sort(key=lambda h: h.req.transno)
        return self._hold(held)

    def _hold(self, held: Held) -> None:
        self._current = held
        self._current_reply = None
        self._advance()
        return None

    # ---- recovery progress -------------------------------------------------------------------
    def _advance(self, force: bool = False) -> None:
        """Run whatever recovery allows now (and everything, with `force`)."""
        if not self.recovering:
            return
        live = list(self.exports.values())
        if not force and any(not e.cookie for e in live):
            return                                        # waiting for every remembered client
        # stage 1: request replay, in transno order
        if self.req_replay_over:
            while self.replay_queue:                      # late replays run in order
                self._run_held(self.replay_queue.pop(0))
        while not self.req_replay_over:
            replaying = [e for e in self.exports.values() if not e.req_done]
            if self.replay_queue:
                first = self.replay_queue[0]
                if first.req.transno == self.next_recovery_transno:
                    pass
                elif force or all(any(h.uuid == e.uuid for h in self.replay_queue) for e in replaying):
                    self.next_recovery_transno = first.req.transno        # skip the gap
                else:
                    return
                self.replay_queue.pop(0)
                self._run_held(first)
                self.next_recovery_transno += 1
                continue
            if replaying and not force:
                return
            self.req_replay_over = True
            for exp in list(self.exports.values()):
                if exp.vbr_failed:
                    self._evict(exp, advance=False)
        # stage 2: requests that ended their client's replays
        while self.lock_queue:
            self._run_held(self.lock_queue.pop(0))
        if not force and any(not e.lock_done for e in self.exports.values()):
            return
        # stage 3: recovery ends; the new boot epoch is written synchronously, which commits
        # everything before it
        self.recovering = False
        self._commit(len(self.pending))
        if self.config.epoch_jump:
            self.last_transno = max(self.last_transno, ((self.last_transno >> 32) + 1) << 32)
            self.last_committed = max(self.last_committed, self.last_transno)
        for exp in self.exports.values():
            exp.in_recovery = exp.req_done = exp.lock_done = False
        final, self.final_queue = self.final_queue, []
        for held in final:
            self._run_held(held)

    def _run_held(self, held: Held) -> None:
        exp = self.exports.get(held.uuid)
        reply = None
        if exp is not None and exp.cookie:
            reply = self._process(exp, held.req)
        self._emit(held, reply)

    def _emit(self, held: Held, reply: bytes | None) -> None:
        if held is self._current:
            self._current_reply = reply
        elif reply is not None:
            self._out.append({"client": held.req.peer, "xid": held.req.xid, "data": reply.hex()})

    def _evict(self, exp: Export, advance: bool = True) -> None:
        """Destroy an export: its cookie is unknown from now on, its waiting requests dropped."""
        if self.exports.get(exp.uuid) is exp:
            del self.exports[exp.uuid]
        self.cookies = {c: u for c, u in self.cookies.items() if u != exp.uuid}
        self.saved = {k: r for k, r in self.saved.items() if k[0] != exp.uuid}
        for queue in (self.replay_queue, self.lock_queue, self.final_queue):
            queue[:] = [h for h in queue if h.uuid != exp.uuid]
        if advance and self.recovering:
            self._advance()

    # ---- connections ------------------------------------------------------------------------
    def _connect(self, req: Request, found: Export | None) -> bytes | None:
        cfg = self.config
        bufs = req.buffers
        if len(bufs) < 2 or b"\0" not in bufs[1][:40]:
            return self._reject(req, "EINVAL", None)
        if bufs[1].split(b"\0", 1)[0].decode("latin-1") != cfg.target_uuid:
            return self._reject(req, "ENODEV", None)
        if len(bufs) < 3 or b"\0" not in bufs[2][:40] or not bufs[2].split(b"\0", 1)[0]:
            return self._reject(req, "EINVAL", None)
        if len(bufs) < 5:
            return self._reject(req, "EPROTO", None)
        try:
            handle = self.structs.decode("lustre_handle", bufs[3], req.order)["fields"]["cookie"]
            ocd = self.structs.decode("obd_connect_data", bufs[4], req.order)["fields"]
        except CodecError:
            return self._reject(req, "EPROTO", None)
        if not ocd["ocd_connect_flags"] & OBD_CONNECT_FULL20:
            return self._reject(req, "EPROTO", None)
        uuid = bufs[2].split(b"\0", 1)[0].decode("latin-1")
        conn_cnt = req.body["pb_conn_cnt"]
        exp = self.exports.get(uuid)
        op_flags = CONNECT_REPLAYABLE
        if exp is None:
            if self.recovering and cfg.busy_new_clients:
                return self._reject(req, "EBUSY", None)
            exp = Export(uuid=uuid, client_handle=handle)
            if cfg.check_ealready and conn_cnt <= exp.conn_cnt:
                return self._reject(req, "EALREADY", None)
            self.exports[uuid] = exp
            exp.cookie = self._new_cookie(exp)
        elif not exp.cookie:
            # remembered after a restart: Lustre rebuilt the export without a connection, so
            # this is not flagged RECONNECT; a count of 1 claims to be a new client
            if cfg.check_ealready and (conn_cnt == 1 or conn_cnt <= exp.conn_cnt):
                return self._reject(req, "EALREADY", None)
            exp.cookie = self._new_cookie(exp)
            exp.client_handle = handle
        else:
            if cfg.check_ealready and (handle != exp.client_handle or conn_cnt <= exp.conn_cnt):
                return self._reject(req, "EALREADY", None)
            if cfg.reconnect_flag:
                op_flags |= CONNECT_RECONNECT
        exp.conn_cnt = conn_cnt
        exp.peer = req.peer
        exp.last_xid = 0
        exp.flags = ocd["ocd_connect_flags"] & cfg.connect_flags
        exp.flags2 = ocd["ocd_connect_flags2"] & cfg.connect_flags2 if exp.flags & OBD_CONNECT_FLAGS2 else 0
        if self.recovering:
            if cfg.recovering_flag:
                op_flags |= CONNECT_RECOVERING
            if not exp.in_recovery:
                exp.in_recovery = True
                transno = ocd["ocd_transno"]
                if (req.body["pb_op_flags"] & CONNECT_TRANSNO and 0 < transno < self.next_recovery_transno
                        and transno > self.last_committed):
                    self.next_recovery_transno = transno
        granted = {"ocd_connect_flags": exp.flags, "ocd_connect_flags2": exp.flags2,
                   "ocd_version": LUSTRE_VERSION_CODE, "ocd_index": 0,
                   "ocd_instance": (self.last_transno >> 32) & 0xFFFFFFFF}
        reply = self._pack(Reply(opc=req.opc, type=REPLY, status=0, handle=exp.cookie, op_flags=op_flags,
                                 buffers=(self.structs.encode("obd_connect_data", granted),)), exp, connect=True)
        if self.recovering:
            self._advance()          # the reply goes out first; a reconnect may let recovery run
        return reply

    def _new_cookie(self, exp: Export) -> int:
        cookie = self.next_cookie
        self.next_cookie += 1
        self.cookies[cookie] = exp.uuid
        exp.cookie = cookie
        return cookie

    def _by_cookie(self, cookie: int) -> Export | None:
        uuid = self.cookies.get(cookie) if cookie else None
        return self.exports.get(uuid) if uuid is not None else None

    # ---- processing: rows 12-17 -----------------------------------------------------------
    def _process(self, exp: Export, req: Request) -> bytes | None:
        cfg = self.config
        row = self.opcodes[req.opc]
        saved = self.saved.get((exp.uuid, req.xid))
        if saved is not None and req.flags & (MSG_RESENT | MSG_REPLAY):
            if cfg.resend_new_transno and saved.transno and req.flags & MSG_RESENT:    # (bug)
                self.last_transno += 1
                saved = replace(saved, transno=self.last_transno)
            return self._pack(saved, exp)                                    # row 12
        if req.opc == C("OST_DISCONNECT"):
            reply = self._pack(Reply(opc=req.opc, type=REPLY, status=0), exp)
            self._evict(exp)
            return reply
        body = None
        if row["body"]:
            if len(req.buffers) < 2 or len(req.buffers[1]) < OST_BODY_SIZE:
                return self._reject(req, "EFAULT", exp)                     # row 13
            body = self.structs.decode("ost_body", req.buffers[1], req.order)["fields"]["oa"]
            valid = body["o_valid"] | FLGROUP
            body["o_valid"] = valid
            seq, oid = ostid_seq(body["o_oi"]), ostid_id(body["o_oi"])
            if (valid & FLID and oid == 0) or not valid_sequence(seq):
                return self._reject(req, "EPROTO", exp)                     # row 14
            if row["has_body"] and not valid & FLID:
                return self._reject(req, "EPROTO", exp)                     # row 15
        if row["mutable"] and exp.readonly:
            return self._reject(req, "EROFS", exp)                          # row 16
        handler = getattr(self, "_h_" + row["name"].lower())
        result = handler(exp, req, body)                                     # row 17
        if result is None:
            return None
        reply = result
        if reply.early:                                                      # a serious error
            return self._pack(reply, exp)
        if reply.status != 0 and cfg.handler_errors_as_err:                 # (bug)
            reply.type = ERR
        if row["name"] in cfg.extra_transno_opcodes and reply.status == 0 and not reply.transno:   # (bug)
            reply.transno, _ = self._transact(exp, req, row["name"], 0, [])
        if row["mutable"] and reply.type == REPLY and cfg.save_replies and not exp.anonymous:
            self.saved[(exp.uuid, req.xid)] = reply
        return self._pack(reply, exp)

    # ---- transactions -------------------------------------------------------------------------
    def _wants_transno(self, exp: Export, name: str) -> bool:
        mode = self.opcodes[C(name)]["transno"]
        if name in self.config.extra_transno_opcodes:
            return True
        return mode == "yes" or (mode == "replay_create" and exp.replay_create)

    def _transact(self, exp: Export, req: Request, name: str, status: int, effects: list,
                  version_before: int = 0) -> tuple[int, tuple]:
        """Apply `effects` [(key, state or None)] as one transaction when it earns a transno;
        returns (transno, pre_versions)."""
        cfg = self.config
        pre = (version_before, 0, 0, 0) if exp.vbr and self.opcodes[C(name)]["mutable"] else (0, 0, 0, 0)
        if status != 0 and not cfg.transno_on_failure:
            return 0, pre
        if not self._wants_transno(exp, name):
            self._apply(effects, durable=True)
            return 0, pre
        replay = bool(req.flags & MSG_REPLAY) and req.transno != 0
        if replay and not cfg.replay_new_transno:
            transno = req.transno
            self.last_transno = max(self.last_transno, transno)
            self.replayed[transno] = exp.uuid
        elif cfg.transno_reuse and self.last_transno >= cfg.transno_start:
            transno = self.last_transno                                  # (bug) not incremented
        else:
            self.last_transno += 1
            transno = self.last_transno
        for key, state in effects:
            if state is not None:
                state["version"] = transno
        self._apply(effects, durable=False)
        self.pending.append(Txn(transno, exp.uuid, copy.deepcopy(effects)))
        self._commit(len(self.pending) - cfg.commit_lag)
        return transno, pre

    def _apply(self, effects: list, durable: bool) -> None:
        for key, state in effects:
            for table in ((self.objects, self.durable) if durable else (self.objects,)):
                if state is None:
                    table.pop(key, None)
                else:
                    table[key] = copy.deepcopy(state)

    def _commit(self, count: int) -> None:
        """Commit the oldest `count` pending transactions."""
        if count <= 0:
            return
        done, self.pending = self.pending[:count], self.pending[count:]
        for txn in done:
            for key, state in txn.effects:
                if state is None:
                    self.durable.pop(key, None)
                else:
                    self.durable[key] = copy.deepcopy(state)
            self.last_committed = max(self.last_committed, txn.transno)
            exp = self.exports.get(txn.uuid)
            if exp is not None and txn.transno > exp.last_committed:
                exp.last_committed = txn.transno
                exp.committed.append(txn.transno)

    def _release_saved(self, exp: Export) -> None:
        for key in [k for k in self.saved if k[0] == exp.uuid and k[1] <= exp.last_xid]:
            del self.saved[key]

    # ---- handlers (§3) ---------------------------------------------------------------------------
    @staticmethod
    def _key(body: dict) -> tuple:
        return ostid_seq(body["o_oi"]), ostid_id(body["o_oi"])

    def _ok(self, req: Request, status: int = 0, buffers: tuple = (), transno: int = 0,
            pre: tuple = (0, 0, 0, 0)) -> Reply:
        return Reply(opc=req.opc, type=REPLY, status=status, transno=transno, buffers=buffers, pre_versions=pre)

    def _body(self, oi: dict, valid: int = FLID | FLGROUP, **fields) -> bytes:
        oa = {"o_valid": valid, "o_oi": {"oi": dict(oi["oi"])}}
        oa.update(fields)
        return self.structs.encode("ost_body", {"oa": oa})

    def _attrs_body(self, oi: dict, state: dict) -> bytes:
        valid = FLID | FLGROUP
        fields = {}
        for name, bit in REPORTED.items():
            valid |= bit
            fields[name] = state[name]
        return self._body(oi, valid, **fields)

    def _vbr_mismatch(self, req: Request, state: dict) -> bool:
        if not req.flags & MSG_REPLAY:
            return False
        pre = req.body["pb_pre_versions"][0]
        return self.config.vbr_check and pre != 0 and pre != state.get("version", 0)

    def _h_obd_ping(self, exp, req, body):
        return self._ok(req)

    def _h_ost_statfs(self, exp, req, body):
        files = 1 << 20
        statfs = {"os_type": 0x0BD00BD0, "os_blocks": 1 << 24, "os_bfree": (1 << 24) - len(self.objects),
                  "os_bavail": (1 << 24) - len(self.objects), "os_files": files,
                  "os_ffree": files - len(self.objects), "os_bsize": 4096, "os_namelen": 255,
                  "os_maxbytes": (1 << 63) - 1}
        return self._ok(req, buffers=(self.structs.encode("obd_statfs", statfs),))

    def _h_ost_create(self, exp, req, body):
        oi = body["o_oi"]
        if body["o_valid"] & FLID:
            key = self._key(body)
        else:
            while (FID_SEQ_OST_MDT0, self.next_object_id) in self.objects:
                self.next_object_id += 1
            key = (FID_SEQ_OST_MDT0, self.next_object_id)
            oi = {"oi": {"oi_id": key[1], "oi_seq": FID_SEQ_OST_MDT0}}
        if key[0] == FID_SEQ_OST_MDT0 and key[1] >= self.next_object_id:
            self.next_object_id = key[1] + 1
        if key in self.objects:
            return self._ok(req, -spec.errno_value("EEXIST"), (self._body(oi),))
        state = {name: 0 for name in REPORTED}
        state["version"] = 0
        for name, bit in SETTABLE.items():
            if body["o_valid"] & bit:
                state[name] = body[name] & MODE_PERMISSIONS if name == "o_mode" else body[name]
        transno, pre = self._transact(exp, req, "OST_CREATE", 0, [(key, state)])
        return self._ok(req, 0, (self._body(oi),), transno, pre)

    def _h_ost_destroy(self, exp, req, body):
        key = self._key(body)
        state = self.objects.get(key)
        if state is None:
            transno, pre = self._transact(exp, req, "OST_DESTROY", -spec.errno_value("ENOENT"), [])
            return self._ok(req, -spec.errno_value("ENOENT"), (self._body(body["o_oi"]),), transno, pre)
        transno, pre = self._transact(exp, req, "OST_DESTROY", 0, [(key, None)], state.get("version", 0))
        return self._ok(req, 0, (self._body(body["o_oi"]),), transno, pre)

    def _h_ost_getattr(self, exp, req, body):
        state = self.objects.get(self._key(body))
        if state is None:
            return self._ok(req, -spec.errno_value("ENOENT"), (self._body(body["o_oi"]),))
        return self._ok(req, 0, (self._attrs_body(body["o_oi"], state),))

    def _fail(self, exp, req, name, errno_name, oi) -> Reply:
        status = -spec.errno_value(errno_name)
        transno, pre = self._transact(exp, req, name, status, [])
        return self._ok(req, status, (self._body(oi),), transno, pre)

    def _h_ost_setattr(self, exp, req, body):
        valid = body["o_valid"]
        if valid & FLSIZE and body["o_size"] != OBJECT_EOF:
            return self._fail(exp, req, "OST_SETATTR", "EPERM", body["o_oi"])
        key = self._key(body)
        state = self.objects.get(key)
        if state is None:
            return self._fail(exp, req, "OST_SETATTR", "ENOENT", body["o_oi"])
        if self._vbr_mismatch(req, state):
            exp.vbr_failed = True
            return self._ok(req, -spec.errno_value("EOVERFLOW"), (self._body(body["o_oi"]),))
        before = state.get("version", 0)
        new = dict(state)
        applied = FLID | FLGROUP
        fields = {}
        for name, bit in SETTABLE.items():
            if valid & bit or self.config.setattr_ignores_valid:
                new[name] = body[name] & MODE_PERMISSIONS if name == "o_mode" else body[name]
                applied |= bit
                fields[name] = new[name]
        transno, pre = self._transact(exp, req, "OST_SETATTR", 0, [(key, new)], before)
        return self._ok(req, 0, (self._body(body["o_oi"], applied, **fields),), transno, pre)

    def _h_ost_punch(self, exp, req, body):
        valid = body["o_valid"]
        if (valid & (FLSIZE | FLBLOCKS)) != (FLSIZE | FLBLOCKS) and self.config.punch_requires_size_blocks:
            return Reply(opc=req.opc, type=ERR, status=-spec.errno_value("EPROTO"), early=True)
        if valid & FLBLOCKS and body["o_blocks"] != OBJECT_EOF:
            return self._ok(req, -spec.errno_value("EPROTO"), (self._body(body["o_oi"], FLID),))
        key = self._key(body)
        state = self.objects.get(key)
        if state is None:
            return self._fail(exp, req, "OST_PUNCH", "ENOENT", body["o_oi"])
        if self._vbr_mismatch(req, state):
            exp.vbr_failed = True
            return self._ok(req, -spec.errno_value("EOVERFLOW"), (self._body(body["o_oi"], FLID),))
        new = dict(state)
        if valid & FLSIZE:
            new["o_size"] = body["o_size"]
        transno, pre = self._transact(exp, req, "OST_PUNCH", 0, [(key, new)], state.get("version", 0))
        return self._ok(req, 0, (self._body(body["o_oi"], FLID),), transno, pre)

    def _h_ost_sync(self, exp, req, body):
        state = self.objects.get(self._key(body))
        if state is None:
            return self._ok(req, -spec.errno_value("ENOENT"), (self._body(body["o_oi"]),))
        self._commit(len(self.pending))
        return self._ok(req, 0, (self._attrs_body(body["o_oi"], state),))

    def _h_ost_disconnect(self, exp, req, body):       # handled in _process
        return self._ok(req)

    def _h_ost_connect(self, exp, req, body):          # never reached: row 6
        return None

    # ---- replies ----------------------------------------------------------------------------
    def _reject(self, req: Request, errno_name: str, exp: Export | None) -> bytes:
        """An early rejection (ptlrpc_send_error): ERR unless the status keeps REPLY."""
        status = -spec.errno_value(errno_name)
        kind = REPLY if status in self.refuse_statuses or self.config.early_rejections_as_reply else ERR
        return self._pack(Reply(opc=req.opc, type=kind, status=status, early=True), exp)

    def _reported_last_committed(self, exp: Export) -> int:
        cfg = self.config
        if cfg.last_committed_ahead:
            return self.last_transno + 1
        value = exp.last_committed
        if cfg.last_committed_backwards and len(exp.committed) >= 2:
            exp.reported_toggle = not exp.reported_toggle
            if exp.reported_toggle:
                value = exp.committed[-2]
        return value

    def _pack(self, reply: Reply, exp: Export | None, connect: bool = False) -> bytes:
        cfg = self.config
        status = reply.status
        if reply.type == ERR and cfg.err_status_positive:
            status = abs(status)
        handle = reply.handle
        if cfg.handle_in_replies and exp is not None and not connect:
            handle = exp.cookie
        last_committed = 0
        if not reply.early and exp is not None and not exp.anonymous:
            last_committed = self._reported_last_committed(exp)
        body = {"pb_handle": handle, "pb_type": reply.type, "pb_version": MSG_VERSION, "pb_opc": 0 if reply.type == ERR and cfg.err_opc_zero else reply.opc,
                "pb_status": status, "pb_transno": reply.transno, "pb_last_committed": last_committed,
                "pb_op_flags": reply.op_flags, "pb_conn_cnt": exp.conn_cnt if exp is not None else 0,
                "pb_pre_versions": list(reply.pre_versions)}
        message = {"header": {"lm_flags": AT_SUPPORT}, "body": body,
                   "buffers": [None] + [b.hex() for b in reply.buffers]}
        return self.codec.encode(message)
