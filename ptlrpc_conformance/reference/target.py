"""The bundled reference OST target: a Lustre 2.17.57 OST (ofd on an ldiskfs OSD) as its code
reads, in memory.

One Lustre OST as the suite's clients see it: exports keyed by cookie, objects keyed by
(sequence, id) as Lustre's ostid_seq()/ostid_id() compute them, a LAST_ID per sequence, a
transno counter with boot epochs, a commit schedule, saved replies for resends, and recovery
after `restart()` with replays in transno order and version checks (VBR).

Where Lustre's outcome depends on the back-end, on timing or on configuration, the reference
picks one allowed outcome and says so where it does (look for "reference choice").  The
functions named in comments are Lustre's (lustre-release, tag v2_17_57); the behaviour is
described, not copied.

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
from ..spec import releases
from .codec import Codec, CodecError
from .structs import StructCodec
from .target_config import OBD_CONNECT_RDONLY, TargetConfig  # noqa: F401  (TargetConfig also importable from here)

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

OBD_CONNECT_FULL20 = C("OBD_CONNECT_FULL20")
OBD_CONNECT_FLAGS2 = C("OBD_CONNECT_FLAGS2")
OBD_CONNECT_VBR = C("OBD_CONNECT_VBR")
OBD_CONNECT2_REPLAY_CREATE = C("OBD_CONNECT2_REPLAY_CREATE")

FLID, FLGROUP = C("OBD_MD_FLID"), C("OBD_MD_FLGROUP")
FLSIZE, FLBLOCKS = C("OBD_MD_FLSIZE"), C("OBD_MD_FLBLOCKS")
FLATIME, FLMTIME, FLCTIME = C("OBD_MD_FLATIME"), C("OBD_MD_FLMTIME"), C("OBD_MD_FLCTIME")
FLTYPE, FLMODE = C("OBD_MD_FLTYPE"), C("OBD_MD_FLMODE")
FLUID, FLGID, FLPROJID = C("OBD_MD_FLUID"), C("OBD_MD_FLGID"), C("OBD_MD_FLPROJID")
FLFLAGS, FLDATAVERSION = C("OBD_MD_FLFLAGS"), C("OBD_MD_FLDATAVERSION")
FLOBJCOUNT = C("OBD_MD_FLOBJCOUNT")
OBD_FL_FLUSH = C("OBD_FL_FLUSH")
OBJECT_EOF = C("OBD_OBJECT_EOF")

# the attributes an object keeps, with the o_valid bit that names each (obdo_from_la)
TIMES = {"o_atime": FLATIME, "o_mtime": FLMTIME, "o_ctime": FLCTIME}
IDS = {"o_uid": FLUID, "o_gid": FLGID, "o_projid": FLPROJID}
# what GETATTR reports: OFD_VALID_FLAGS | LA_UID | LA_GID | LA_PROJID; an ldiskfs OSD reports
# every one of them, FLPROJID included (osd_inode_getattr)
GETATTR_BITS = FLATIME | FLMTIME | FLCTIME | FLSIZE | FLBLOCKS | FLTYPE | FLMODE | FLUID | FLGID | FLPROJID
# what OST_SYNC reports on success: OFD_VALID_FLAGS (no ids)
SYNC_BITS = FLATIME | FLMTIME | FLCTIME | FLSIZE | FLBLOCKS | FLTYPE | FLMODE

S_IFMT, S_IFREG = 0o170000, 0o100000
S_ISUID, S_ISGID, S_ISVTX = 0o4000, 0o2000, 0o1000
S_IALLUGO = 0o7777
OFD_UNSET_ATTRS_MODE = S_IFREG | S_ISUID | S_ISGID | S_ISVTX | 0o666   # ofd_internal.h; 0o107666

FID_SEQ_OST_MDT0 = C("FID_SEQ_OST_MDT0")
FID_SEQ_LOV_DEFAULT = C("FID_SEQ_LOV_DEFAULT")
FID_SEQ_IDIF, FID_SEQ_IDIF_MAX = C("FID_SEQ_IDIF"), C("FID_SEQ_IDIF_MAX")
FID_SEQ_NORMAL, FID_SEQ_ECHO = C("FID_SEQ_NORMAL"), C("FID_SEQ_ECHO")
IDIF_MAX_OID = (1 << 48) - 1
OBIF_MAX_OID = (1 << 32) - 1
OST_MAX_PRECREATE = 20000
OST_INDEX = 0                             # lustre-OST0000: the index IDIF FIDs are built with

OST_BODY_SIZE = spec.layout("ost_body").size
LUSTRE_VERSION_CODE = 0x02113900          # OBD_OCD_VERSION(2, 17, 57, 0)



def _opcode_table() -> dict[int, dict]:
    table = {}
    for name, row in spec.target()["opcodes"].items():
        table[C(name)] = dict(row, name=name, version=C(row["version"]))
    return table


# --------------------------------------------------------------------------------------
# ost_id arithmetic (Lustre's lustre_ostid.h / lustre_fid.h)
#
# An ost_id is 16 bytes read two ways: {oi_id, oi_seq} or a lu_fid {f_seq, f_oid, f_ver}.
# The reference keeps it as the pair (lo, hi) = (oi_id, oi_seq) of native integers; the FID
# view is f_seq = lo, f_oid = hi & 0xFFFFFFFF, f_ver = hi >> 32.
# --------------------------------------------------------------------------------------

def _is_idif(seq: int) -> bool:
    return FID_SEQ_IDIF <= seq <= FID_SEQ_IDIF_MAX


def raw_oi(oi: dict) -> tuple[int, int]:
    """The (lo, hi) pair of a decoded ost_id (the codec gives both union views)."""
    return oi["oi"]["oi_id"], oi["oi"]["oi_seq"]


def _seq(lo: int, hi: int) -> int:
    """ostid_seq."""
    if hi == FID_SEQ_OST_MDT0:
        return FID_SEQ_OST_MDT0
    if hi == FID_SEQ_LOV_DEFAULT:
        return FID_SEQ_LOV_DEFAULT
    if _is_idif(lo):
        return FID_SEQ_OST_MDT0
    return lo


def _id(lo: int, hi: int) -> int:
    """ostid_id."""
    if hi == FID_SEQ_OST_MDT0:
        return lo & IDIF_MAX_OID
    if hi == FID_SEQ_LOV_DEFAULT:
        return lo
    if _is_idif(lo):
        return ((lo & 0xFFFF) << 32) | (hi & 0xFFFFFFFF)       # fid_idif_id(seq, oid, 0)
    return hi & 0xFFFFFFFF


def ostid_seq(oi: dict) -> int:
    """The object's sequence from a decoded ost_id (both union views)."""
    return _seq(*raw_oi(oi))


def ostid_id(oi: dict) -> int:
    return _id(*raw_oi(oi))


def valid_sequence(seq: int) -> bool:
    """tgt_validate_obdo: IDIF, MDT0, normal or echo."""
    return (FID_SEQ_IDIF <= seq <= FID_SEQ_IDIF_MAX or seq == FID_SEQ_OST_MDT0
            or seq >= FID_SEQ_NORMAL or seq == FID_SEQ_ECHO)


def _idif_fid(oid: int, idx: int = OST_INDEX) -> tuple[int, int]:
    """The IDIF FID of id `oid` on OST `idx`, as a (lo, hi) pair (fid_idif_seq)."""
    return FID_SEQ_IDIF | (idx << 16) | ((oid >> 32) & 0xFFFF), (oid & 0xFFFFFFFF) | ((oid >> 48) << 32)


def ostid_to_fid(lo: int, hi: int) -> tuple[int, int] | None:
    """ostid_to_fid with this OST's index: the FID form tgt_validate_obdo rewrites o_oi into,
    or None where Lustre returns -EBADF (a non-IDIF FID with a non-zero f_ver)."""
    seq = _seq(lo, hi)
    if seq == FID_SEQ_OST_MDT0:
        return _idif_fid(_id(lo, hi))
    if seq == FID_SEQ_LOV_DEFAULT:
        return lo, hi                    # Lustre leaves the FID unset; not a sequence the suite uses
    if hi >> 32:
        return None
    return lo, hi


def fid_key(lo: int, hi: int) -> tuple[int, int]:
    """The (sequence, id) an object FID names (what lookups use: the FID, never the ost_id view
    of its bytes)."""
    if _is_idif(lo):
        return FID_SEQ_OST_MDT0, ((hi >> 32) << 48) | ((lo & 0xFFFF) << 32) | (hi & 0xFFFFFFFF)
    return lo, hi & 0xFFFFFFFF


def ostid_set_id(lo: int, hi: int, oid: int) -> tuple[int, int] | None:
    """ostid_set_id on an ost_id in either form; None where Lustre returns -E2BIG."""
    if hi == FID_SEQ_OST_MDT0:
        return (oid, hi) if oid <= IDIF_MAX_OID else None
    if _is_idif(lo):
        return _idif_fid(oid, (lo >> 16) & 0xFFFF) if oid <= IDIF_MAX_OID else None
    return (lo, (hi & ~0xFFFFFFFF) | oid) if oid <= OBIF_MAX_OID else None


def fid_to_ostid(lo: int, hi: int) -> tuple[int, int]:
    """fid_to_ostid: an IDIF FID goes back to the {id, seq 0} form, any other FID stays."""
    if _is_idif(lo):
        return fid_key(lo, hi)[1], FID_SEQ_OST_MDT0
    return lo, hi


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
    asked_rdonly: bool = False           # the connect asked for OBD_CONNECT_RDONLY (granted or not)
    peer: str = ""
    last_xid: int = 0
    last_committed: int = 0
    committed: list = field(default_factory=list)   # this client's committed transnos, ascending
    reported_toggle: bool = False        # for last_committed_backwards
    anonymous: bool = False
    # lcd_last_xid: the XID of this client's most recent request that ran a (non-local)
    # transaction, and its value on stable storage (written in that transaction)
    last_trans_xid: int = 0
    durable_trans_xid: int = 0
    # recovery
    in_recovery: bool = False
    req_done: bool = False
    lock_done: bool = False
    vbr_failed: bool = False

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
    xid: int
    effects: list                        # [(key, object state or None)]; ("LAST_ID", seq) keys hold a LAST_ID


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


def _is_last_id(key: tuple) -> bool:
    return key[0] == "LAST_ID"


class Target:
    """An in-memory Lustre 2.17.57 OST."""

    def __init__(self, config: TargetConfig | None = None):
        self.config = config or TargetConfig()
        self.codec = Codec(self.config.codec_config)
        self.structs = StructCodec(self.config.struct_config)
        self.opcodes = _opcode_table()
        self.refuse_statuses = {-spec.errno_value(n) for n in spec.target()["reply_statuses"]}
        facts = releases.load(self.config.release)
        self.behaviour = {name: bool(row["value"]) for name, row in facts["behaviour"].items()}
        self.ost_supported2 = facts["connect"]["ost_supported2"]["value"]
        if not self.behaviour["erofs_sent_as_reply"]:
            self.refuse_statuses.discard(-spec.errno_value("EROFS"))       # ERR before 2.16 (ptlrpc_send_error)
        self.reset()

    # ---- public ----------------------------------------------------------------------------
    def reset(self) -> None:
        cfg = self.config
        self.exports: dict[str, Export] = {}          # by client UUID
        self.cookies: dict[int, str] = {}              # export cookie -> client UUID
        self.next_cookie = cfg.cookie_start
        self.objects: dict[tuple, dict] = {}           # live state, by (sequence, id)
        self.durable: dict[tuple, dict] = {}           # committed state
        self.last_ids: dict[int, int] = {0: cfg.last_id_start} if cfg.last_id_start else {}   # LAST_ID per sequence
        self.durable_last_ids: dict[int, int] = dict(self.last_ids)   # ... and on stable storage
        self.pending: list[Txn] = []                   # uncommitted transactions, in issue order
        self.last_transno = cfg.transno_start - 1       # lut_last_transno: the highest transno issued
        self.last_committed = cfg.transno_start - 1     # obd_last_committed: target-wide
        # the boot epoch written (synchronously) when this instance started: every transno it
        # issues is in this epoch or later (tgt_boot_epoch_update)
        self.boot_epoch = cfg.transno_start >> 32
        self.saved: dict[tuple, Reply] = {}            # (uuid, xid) -> reply, for resends
        # recovery
        self.recovering = False
        self.next_recovery_transno = 0
        self.replay_queue: list[Held] = []             # sorted by transno
        self.lock_queue: list[Held] = []               # MSG_REQ_REPLAY_DONE requests
        self.final_queue: list[Held] = []              # MSG_LOCK_REPLAY_DONE requests
        self.replayed: dict[int, str] = {}             # transno -> UUID that replayed it
        self.req_replay_over = False
        self.window_transno: int | None = None         # the transno of the queued replay run last
        self._window: int | None = None
        self._out: list[dict] = []
        self._current: Held | None = None
        self._current_reply: bytes | None = None

    def exchange(self, data: bytes, xid: int, client: str) -> dict:
        # TargetConfig.claim_window: the request that follows the run of a queued replay comes
        # before the next expected transno has moved past it
        self._window, self.window_transno = self.window_transno, None
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
        """Crash and come back: uncommitted transactions are lost, clients remembered.
        Returns the commit point at the crash: the highest transno on stable storage."""
        cfg = self.config
        commit_point = self.last_committed
        lost = {t.transno for t in self.pending}
        if cfg.restart_loses_committed:
            self.objects, self.durable = {}, {}
            self.last_ids, self.durable_last_ids = {}, {}
        elif not cfg.restart_keeps_uncommitted:
            self.objects = copy.deepcopy(self.durable)
            self.last_ids = dict(self.durable_last_ids)
            # tgt_server_data_init / tgt_clients_data_init: lut_last_transno restarts from the
            # highest transno on stable storage (the commit point), not from the highest issued;
            # a change served during recovery takes the next one (and may reuse a lost transno)
            self.last_transno = self.last_committed
        else:
            self.durable = copy.deepcopy(self.objects)
            self.durable_last_ids = dict(self.last_ids)
        self.pending = []
        self.saved = {k: r for k, r in self.saved.items() if r.transno and r.transno not in lost}
        self.cookies = {}
        remembered = {}
        for uuid, exp in self.exports.items():
            if exp.anonymous or not cfg.recovery:       # recovery disabled: no client in last_rcvd
                continue
            trans_xid = exp.last_trans_xid if cfg.restart_keeps_uncommitted else exp.durable_trans_xid
            remembered[uuid] = Export(uuid=uuid, client_handle=exp.client_handle, flags=exp.flags,
                                      flags2=exp.flags2, asked_rdonly=exp.asked_rdonly, peer=exp.peer,
                                      last_committed=exp.last_committed, committed=list(exp.committed),
                                      last_trans_xid=trans_xid, durable_trans_xid=exp.durable_trans_xid)
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
        """The recovery window expires once: stale clients are evicted — those that have not
        reconnected, and those with nothing queued that have not said MSG_REQ_REPLAY_DONE
        (Lustre's class_disconnect_stale_exports) — and recovery goes on with the others, the
        window extended (target_recovery_overseer, extend_recovery_timer); the replies sent
        meanwhile are returned.  With `end_recovery_hard` it is the hard limit instead: every
        client that has not finished is evicted, its held requests answered ERR -ENOTCONN
        (abort_req_replay_queue, abort_lock_replay_queue), and recovery ends."""
        self._out = []
        self._current = None
        if self.recovering and self.config.end_recovery_hard:
            for exp in list(self.exports.values()):
                if exp.lock_done:
                    continue
                for held in [h for h in self.replay_queue + self.lock_queue if h.uuid == exp.uuid]:
                    self._emit(held, self._reject(held.req, "ENOTCONN", exp))
                self._evict(exp, advance=False)
            self._advance(force=True)
        elif self.recovering:
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
        no_deadline = bool(req.lm_flags & AT_SUPPORT) and body["pb_timeout"] == 0
        if no_deadline and cfg.timeout_drop_first:                           # (bug) the old order
            return None
        # ptlrpc_server_handle_req_in: ptlrpc_check_req runs for a request naming an export,
        # before the AT deadline is looked at
        exp = self._by_cookie(body["pb_handle"])
        if exp is not None and body["pb_conn_cnt"] < exp.conn_cnt and cfg.check_conn_cnt:
            return None                                                      # row 4
        if (exp is not None and not self.recovering and not cfg.replay_outside_recovery
                and (req.flags & (MSG_REPLAY | MSG_REQ_REPLAY_DONE) or req.transno)):
            reply = self._reject(req, "ENODEV", exp)                        # row 5
            self._evict(exp)
            return reply
        if no_deadline:
            return None                                                      # row 3: deadline 0
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
            return self._reject(req, "EOPNOTSUPP" if self.behaviour["unknown_opcode_eopnotsupp"]
                                else "ENOTSUPP", exp)                          # row 9 (-524 before 2.16)
        if body["pb_version"] & VERSION_MASK != row["version"]:
            return self._reject(req, "EINVAL", exp)                         # row 10
        # row 12 (tgt_handle_recovery, req_can_reconstruct): the OST remembers one XID per
        # export, lcd_last_xid, the XID of its latest request that ran a transaction; that XID
        # again without MSG_RESENT / MSG_REPLAY is dropped.  Any older XID runs as a new request.
        if xid == exp.last_trans_xid and not req.flags & (MSG_RESENT | MSG_REPLAY) and cfg.check_last_trans_xid \
                and cfg.recovery:
            return None                 # (a target with recovery disabled never looks: tgt_handle_recovery)
        if self.recovering:
            return self._recovery_filter(exp, req, row)                      # row 11
        return self._process(exp, req)

    def _recovery_filter(self, exp: Export, req: Request, row: dict) -> bytes | None:
        """tgt_filter_recovery_request and target_queue_recovery_request."""
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
        if self.config.claim_window and req.transno == self._window == self.next_recovery_transno - 1:
            self.replay_queue.insert(0, held)           # queued before the count moved: waits (below)
            return self._hold(held)
        if req.transno < self.next_recovery_transno:
            # below the next expected transno (committed before the crash, already replayed or
            # skipped as a gap): runs at once, whoever replayed that transno before
            if self.config.claimed_always_dropped:      # (bug) the old "claimed" rule
                owner = self.replayed.get(req.transno)
                if owner is not None and owner != exp.uuid:
                    return None
            return self._process(exp, req)
        # a transno still held by a queued replay: the newcomer is dropped, never answered.
        # The reference has no concurrency, so "still queued" is exact here: the first replay
        # is queued until its turn comes, then it has run and the rule above applies.
        for other in self.replay_queue:
            if other.req.transno == req.transno:
                if other.uuid == exp.uuid and other.req.xid == req.xid:
                    other.req = req                      # a resend of a queued replay: the queued copy answers
                    return self._hold(other)
                if self.config.drop_claimed:
                    return None
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
                if first.req.transno < self.next_recovery_transno:
                    # a claim queued in the window (claim_window): it runs once no client is
                    # still replaying (Lustre's gap rule would trip its assertion before that)
                    if replaying and not force:
                        return
                    self.replay_queue.pop(0)
                    self._run_held(first)
                    self.next_recovery_transno += 1
                    continue
                if first.req.transno == self.next_recovery_transno:
                    pass
                elif force or all(any(h.uuid == e.uuid for h in self.replay_queue) for e in replaying):
                    self.next_recovery_transno = first.req.transno        # skip the gap
                else:
                    return
                self.replay_queue.pop(0)
                self._run_held(first)
                self.window_transno = first.req.transno
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
        # everything before it (tgt_boot_epoch_update)
        self.recovering = False
        self._commit(len(self.pending))
        if self.config.epoch_jump:
            epoch = max(self.last_transno >> 32, self.boot_epoch) + 1
            self.boot_epoch = epoch
            self.last_transno = epoch << 32
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
        # target_handle_connect says MSG_CONNECT_REPLAYABLE only while OBDF_REPLAYABLE is set
        op_flags = CONNECT_REPLAYABLE if cfg.recovery else 0
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
        # ofd_parse_connect_data: granted = asked & OST_CONNECT_SUPPORTED (the reference grants
        # a subset of it: TargetConfig.connect_flags), which never holds OBD_CONNECT_RDONLY
        supported = cfg.connect_flags | (OBD_CONNECT_RDONLY if cfg.grant_rdonly else 0)
        asked = ocd["ocd_connect_flags"]
        exp.asked_rdonly = bool(asked & OBD_CONNECT_RDONLY)
        exp.flags = asked & supported
        exp.flags2 = ocd["ocd_connect_flags2"] & cfg.connect_flags2 & self.ost_supported2 \
            if exp.flags & OBD_CONNECT_FLAGS2 else 0
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

    def _readonly(self, exp: Export) -> bool:
        """Row 16 (tgt_request_preprocess): refused -EROFS only on an export *granted*
        OBD_CONNECT_RDONLY, which an OST never grants (TargetConfig.grant_rdonly aside)."""
        cfg = self.config
        if exp.flags & OBD_CONNECT_RDONLY:
            return not cfg.rdonly_unenforced
        return cfg.honour_ungranted_rdonly and exp.asked_rdonly                  # (bug)

    # ---- processing: rows 12-17 -----------------------------------------------------------
    def _process(self, exp: Export, req: Request) -> bytes | None:
        cfg = self.config
        row = self.opcodes[req.opc]
        saved = self.saved.get((exp.uuid, req.xid))
        if saved is not None and req.flags & MSG_RESENT and not req.flags & MSG_REPLAY:
            # reference choice: a resend is answered from its saved reply (reconstruction, as an
            # MDT does); Lustre's OST runs it again.  A replay always runs (below).
            if cfg.resend_new_transno and saved.transno:                        # (bug)
                self.last_transno += 1
                saved = replace(saved, transno=self.last_transno)
            return self._pack(saved, exp)
        if saved is not None and req.flags & MSG_REPLAY and cfg.replay_skips_committed:   # (bug)
            return self._pack(saved, exp)
        if req.opc == C("OST_DISCONNECT"):
            reply = self._pack(Reply(opc=req.opc, type=REPLY, status=0), exp)
            self._evict(exp)
            return reply
        body = None
        if row["body"]:
            if len(req.buffers) < 2:
                # buffer 1 absent: tgt_request_preprocess unpacks no ost_body at all.  OST_SYNC
                # then syncs the whole device (REPLY 0); the other handlers assert or oops in
                # Lustre.  Reference choice for those: ERR -EFAULT, harmless; not judged.
                if row["name"] != "OST_SYNC":
                    return self._reject(req, "EFAULT", exp)
            elif len(req.buffers[1]) < OST_BODY_SIZE:
                return self._reject(req, "EFAULT", exp)                     # row 13
            else:
                body = self.structs.decode("ost_body", req.buffers[1], req.order)["fields"]["oa"]
                body = self._validate_obdo(req, exp, row, body)
                if isinstance(body, bytes):
                    return body                                              # rows 14, 15
        if row["mutable"] and self._readonly(exp):
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

    def _validate_obdo(self, req: Request, exp: Export, row: dict, body: dict) -> dict | bytes:
        """tgt_ost_body_unpack / tgt_validate_obdo: the ost_id checks, then o_oi rewritten into
        its FID form (kept as body["_fid"]; body["_oi"] is the ost_id as sent)."""
        valid = body["o_valid"] | FLGROUP
        body["o_valid"] = valid
        lo, hi = raw_oi(body["o_oi"])
        seq, oid = _seq(lo, hi), _id(lo, hi)
        if (valid & FLID and oid == 0) or not valid_sequence(seq):
            return self._reject(req, "EPROTO", exp)                         # row 14
        fid = ostid_to_fid(lo, hi)
        if fid is None:
            return self._reject(req, "EBADF", exp)                          # row 14: f_ver != 0
        if row["has_body"] and not valid & FLID:
            return self._reject(req, "EPROTO", exp)                         # row 15
        body["_oi"], body["_fid"] = (lo, hi), fid
        return body

    # ---- transactions -------------------------------------------------------------------------
    def _wants_transno(self, exp: Export, name: str) -> bool:
        mode = self.opcodes[C(name)]["transno"]
        if name in self.config.extra_transno_opcodes:
            return True
        if not self.config.recovery:
            # recovery disabled: tgt_init registers no transaction callbacks, so no
            # tgt_txn_stop_cb / tgt_last_rcvd_update: no transno, no last_committed
            return False
        return mode == "yes" or (mode == "replay_create" and exp.replay_create)

    def _transact(self, exp: Export, req: Request, name: str, status: int, effects: list,
                  version_before: int = 0, vbr_object: bool = False) -> tuple[int, tuple]:
        """Apply `effects` [(key, state or None)] as one transaction; returns (transno,
        pre_versions).  `vbr_object`: the transaction passes its object to ofd_trans_start, so
        the object's VBR version becomes the transno (PUNCH, SETATTR with a size).
        Reference choice: with OBD_CONNECT_VBR a mutable REPLY carries the object's VBR version
        before the change in pb_pre_versions[0]; Lustre's OST leaves it 0."""
        cfg = self.config
        pre = (version_before, 0, 0, 0) if exp.vbr and self.opcodes[C(name)]["mutable"] else (0, 0, 0, 0)
        if status != 0 and not cfg.transno_on_failure:
            return 0, pre
        if not self._wants_transno(exp, name):
            # a local transaction (dt_trans_start_local): no transno, no last_rcvd update.
            # Reference choice: it counts as committed at once.
            self._apply(effects, durable=True)
            return 0, pre
        replay = bool(req.flags & MSG_REPLAY) and req.transno != 0
        if replay and not cfg.replay_new_transno:
            transno = req.transno                                        # tgt_last_rcvd_update
            self.last_transno = max(self.last_transno, transno)
            self.replayed[transno] = exp.uuid
        elif cfg.transno_reuse and self.last_transno >= cfg.transno_start:
            transno = self.last_transno                                  # (bug) not incremented
        else:
            self.last_transno += 1
            transno = self.last_transno
        if vbr_object or cfg.version_on_every_change:
            for key, state in effects:
                if state is not None and not _is_last_id(key):
                    state["version"] = transno
        exp.last_trans_xid = req.xid                                     # lcd_last_xid
        self._apply(effects, durable=False)
        self.pending.append(Txn(transno, exp.uuid, req.xid, copy.deepcopy(effects)))
        self._commit(len(self.pending) - cfg.commit_lag)
        return transno, pre

    def _apply(self, effects: list, durable: bool) -> None:
        for key, state in effects:
            if _is_last_id(key):
                tables = (self.last_ids, self.durable_last_ids) if durable else (self.last_ids,)
                for table in tables:
                    table[key[1]] = state
                continue
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
                if _is_last_id(key):
                    self.durable_last_ids[key[1]] = state
                elif state is None:
                    self.durable.pop(key, None)
                else:
                    self.durable[key] = copy.deepcopy(state)
            self.last_committed = max(self.last_committed, txn.transno)
            exp = self.exports.get(txn.uuid)
            if exp is not None:
                exp.durable_trans_xid = txn.xid
                if txn.transno > exp.last_committed:
                    exp.last_committed = txn.transno
                    exp.committed.append(txn.transno)

    def _release_saved(self, exp: Export) -> None:
        for key in [k for k in self.saved if k[0] == exp.uuid and k[1] <= exp.last_xid]:
            del self.saved[key]

    # ---- handlers ---------------------------------------------------------------------------------
    def _ok(self, req: Request, status: int = 0, buffers: tuple = (), transno: int = 0,
            pre: tuple = (0, 0, 0, 0)) -> Reply:
        return Reply(opc=req.opc, type=REPLY, status=status, transno=transno, buffers=buffers, pre_versions=pre)

    def _body(self, oi: tuple[int, int] = (0, 0), valid: int = 0, **fields) -> bytes:
        """A reply ost_body.  Lustre's reply buffers start zeroed: what a handler does not set
        is 0.  `oi` is an ost_id as a (lo, hi) pair."""
        oa = {"o_valid": valid, "o_oi": {"oi": {"oi_id": oi[0], "oi_seq": oi[1]}}}
        oa.update(fields)
        return self.structs.encode("ost_body", {"oa": oa})

    @staticmethod
    def _errno(name: str) -> int:
        return -spec.errno_value(name)

    def _vbr_mismatch(self, req: Request, state: dict) -> bool:
        """ofd_version_get_check: only a replay's pb_pre_versions[0] counts, and 0 never."""
        if not req.flags & MSG_REPLAY:
            return False
        pre = req.body["pb_pre_versions"][0]
        return self.config.vbr_check and pre != 0 and pre != state.get("version", 0)

    def _projid_refused(self, la: dict, stored: dict) -> bool:
        """An OST without project quota (TargetConfig.project_quota False, ldiskfs without the
        project feature): a projid other than the stored one fails -EOPNOTSUPP in the quota
        transfer (osd_quota_transfer -> osd_transfer_project), before any attribute is set."""
        return not self.config.project_quota and "o_projid" in la and la["o_projid"] != stored["o_projid"]

    def _fresh_object(self, body: dict) -> dict:
        """A precreated object (ofd_precreate_objects): OFD_UNSET_ATTRS_MODE, owner 0, size 0,
        times 0, no version; the create request's attributes are not used."""
        cfg = self.config
        state = {"o_size": 0, "o_blocks": 0, "o_atime": 0, "o_mtime": 0, "o_ctime": 0,
                 "o_mode": S_IFREG if cfg.zeroed_objects else OFD_UNSET_ATTRS_MODE,     # (bug) / Lustre
                 "o_uid": 0, "o_gid": 0, "o_projid": 0, "version": 0}
        if cfg.create_applies_attrs:                                         # (bug)
            for name, bit in {**TIMES, **IDS}.items():
                if body["o_valid"] & bit:
                    state[name] = body[name]
            if body["o_valid"] & FLMODE:
                state["o_mode"] = S_IFREG | (body["o_mode"] & S_IALLUGO)
        return state

    def _handle_ids(self, la: dict, stored: dict, is_setattr: bool) -> None:
        """ofd_attr_handle_id.  `la` holds the attributes about to be set (a key per LA_ bit).
        A uid, gid or projid change clears S_ISUID, S_ISGID or S_ISVTX respectively where the
        *stored* mode still has that bit (with the mode requested by a SETATTR's FLMODE, else
        the stored one).  Outside SETATTR (is_setattr 0: PUNCH) the ids are taken only while
        the stored bit is set (projid also when the stored projid is 0 and the new one not)."""
        if not any(k in la for k in IDS):
            return
        mode = stored["o_mode"]
        if not is_setattr:
            if not mode & S_ISUID:
                la.pop("o_uid", None)
            if not mode & S_ISGID:
                la.pop("o_gid", None)
            if not mode & S_ISVTX and (stored["o_projid"] != 0 or la.get("o_projid", 0) == 0
                                       or not self.behaviour["punch_projid"]):
                la.pop("o_projid", None)
        mask = 0
        if "o_uid" in la and mode & S_ISUID and not self.config.uid_keeps_suid:     # (bug) keeps it
            mask |= S_ISUID
        if "o_gid" in la and mode & S_ISGID:
            mask |= S_ISGID
        if "o_projid" in la and mode & S_ISVTX:
            mask |= S_ISVTX
        if mask:
            if "o_mode" not in la or not is_setattr:
                la["o_mode"] = mode
            la["o_mode"] &= ~mask

    @staticmethod
    def _set_attrs(state: dict, la: dict) -> None:
        """dt_attr_set on an ldiskfs OSD: each attribute present is stored; a mode keeps the type."""
        for name, value in la.items():
            if name == "o_mode":
                state["o_mode"] = (state["o_mode"] & S_IFMT) | (value & S_IALLUGO)
            elif name != "o_blocks":                 # neither OSD stores a requested block count
                state[name] = value

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
        """ofd_create_hdl: a precreate up to the id named.  With LAST_ID L and the id N read from
        the rewritten o_oi: N > L creates L+1..N (existing ids skipped), in batches of
        `precreate_batch`, one transaction each (a transno per batch only with
        OBD_CONNECT2_REPLAY_CREATE; the reply carries the last); a gap above 100000 creates only
        the last min(width, 20000); N <= L creates nothing (reply id L+1 when N < L, N when
        N == L, transno 0).  Never -EEXIST.  Reference choices: no grant or free-space limit and
        no time limit, so creation never stops early."""
        cfg = self.config
        lo, hi = body["_fid"]
        seq, oid = _seq(lo, hi), _id(lo, hi)
        if cfg.create_eexist:
            return self._create_named(exp, req, body, seq, oid)              # (bug)
        last = self.last_ids.get(seq, 0)
        reply_oi, status, transno, pre = (lo, hi), 0, 0, (0, 0, 0, 0)
        if not (seq == FID_SEQ_OST_MDT0 or seq >= FID_SEQ_NORMAL) or oid == 0:
            diff = 1
        else:
            diff = oid - last
            if diff <= -OST_MAX_PRECREATE and not self.behaviour["create_trusts_last_id"]:
                # before 2.16: "Likely MDS last_id corruption", nothing created
                return self._ok(req, self._errno("EINVAL"), (self._body((lo, hi), FLSIZE, o_size=cfg.seq_width),))
            if diff < 0:
                reply_oi = ostid_set_id(lo, hi, last + 1)
        if diff > 0:
            if diff > 5 * OST_MAX_PRECREATE:
                diff = min(cfg.seq_width, OST_MAX_PRECREATE)
                last = oid - diff
            while diff > 0:
                count = min(cfg.precreate_batch, diff)
                effects = [((seq, i), self._fresh_object(body)) for i in range(last + 1, last + count + 1)
                           if (seq, i) not in self.objects]
                last += count
                effects.append((("LAST_ID", seq), last))
                batch, pre = self._transact(exp, req, "OST_CREATE", 0, effects)
                transno = batch or transno
                diff -= count
            reply_oi = ostid_set_id(lo, hi, last)
        if reply_oi is None:
            status, reply_oi = self._errno("E2BIG"), (lo, hi)
        valid = FLSIZE | (FLID | FLGROUP if status == 0 else 0)
        return self._ok(req, status, (self._body(reply_oi, valid, o_size=cfg.seq_width),), transno, pre)

    def _create_named(self, exp, req, body, seq, oid):
        """(bug) the old model: creates exactly the id named, -EEXIST if it exists."""
        cfg = self.config
        if (seq, oid) in self.objects:
            return self._ok(req, self._errno("EEXIST"), (self._body(body["_fid"], FLSIZE, o_size=cfg.seq_width),))
        effects = [((seq, oid), self._fresh_object(body)),
                   (("LAST_ID", seq), max(oid, self.last_ids.get(seq, 0)))]
        transno, pre = self._transact(exp, req, "OST_CREATE", 0, effects)
        return self._ok(req, 0, (self._body(body["_fid"], FLID | FLGROUP | FLSIZE, o_size=cfg.seq_width),),
                        transno, pre)

    def _h_ost_destroy(self, exp, req, body):
        """ofd_destroy_hdl: destroys the object (FLOBJCOUNT: o_misc objects from it), each in a
        transaction of its own; the reply's o_valid is 0 and its o_oi the id after the last one
        (fid_to_ostid of the advanced FID: {id + count, seq 0} for sequence 0)."""
        fid = body["_fid"]
        oid = _id(*fid)
        count = body["o_misc"] if body["o_valid"] & FLOBJCOUNT else 1
        fseq = fid_key(*fid)[0]
        limit = IDIF_MAX_OID if _is_idif(fid[0]) else OBIF_MAX_OID
        status, transno, pre = 0, 0, (0, 0, 0, 0)
        if count > 0:
            end = min(oid + count - 1, limit)                    # the last id the loop reaches
            keys = [fid_key(*fid)] + sorted(k for k in self.objects if k[0] == fseq and oid < k[1] <= end)
            destroyed = 0
            for key in keys:
                state = self.objects.get(key)
                if state is None:
                    continue
                destroyed += 1
                t, pre = self._transact(exp, req, "OST_DESTROY", 0, [(key, None)], state.get("version", 0))
                transno = t or transno
            if destroyed < end - oid + 1:
                status = self._errno("ENOENT")
                if not destroyed:
                    transno, pre = self._transact(exp, req, "OST_DESTROY", status, [])
            if oid + count - 1 > limit:
                status = self._errno("EBADF")                     # fid_set_id overflow
            fid = ostid_set_id(*fid, end + 1) if end + 1 <= limit else ostid_set_id(*fid, end)
        return self._ok(req, status, (self._body(fid_to_ostid(*fid), 0),), transno, pre)

    def _h_ost_getattr(self, exp, req, body):
        """ofd_getattr_hdl: o_oi in FID form and FLID|FLGROUP always, FLFLAGS with OBD_FL_FLUSH
        always; on success every attribute an ldiskfs OSD reports and FLDATAVERSION (the
        object's version)."""
        fid = body["_fid"]
        state = self.objects.get(fid_key(*fid))
        valid = FLID | FLGROUP | FLFLAGS
        if state is None:
            return self._ok(req, self._errno("ENOENT"), (self._body(fid, valid, o_flags=OBD_FL_FLUSH),))
        fields = {name: state[name] for name in ("o_size", "o_blocks", "o_mode", *TIMES, *IDS)}
        bits = GETATTR_BITS & ~FLPROJID if self.config.getattr_omits_projid else GETATTR_BITS   # (bug) when set
        return self._ok(req, 0, (self._body(fid, valid | bits | FLDATAVERSION, o_flags=OBD_FL_FLUSH,
                                            o_data_version=state.get("version", 0), **fields),))

    def _fail(self, exp, req, name, errno_name, oi, valid) -> Reply:
        status = self._errno(errno_name)
        transno, pre = self._transact(exp, req, name, status, [])
        return self._ok(req, status, (self._body(oi, valid),), transno, pre)

    def _h_ost_setattr(self, exp, req, body):
        """ofd_setattr_hdl / ofd_attr_set: -EPERM for FLSIZE other than OBD_OBJECT_EOF before
        -ENOENT; the times, ids and FLMODE (all of 07777) set per bit; FLTYPE dropped; the
        special bits cleared by _handle_ids (is_setattr); a size (FLSIZE with EOF, stored as
        is) bumps the object's version.  The reply echoes what was set."""
        cfg = self.config
        valid = body["o_valid"]
        fid = body["_fid"]
        if valid & FLSIZE and body["o_size"] != OBJECT_EOF:
            return self._fail(exp, req, "OST_SETATTR", "EPERM", fid, FLID | FLGROUP)
        key = fid_key(*fid)
        state = self.objects.get(key)
        if state is None:
            return self._fail(exp, req, "OST_SETATTR", "ENOENT", fid, FLID | FLGROUP)
        if self._vbr_mismatch(req, state):
            exp.vbr_failed = True
            return self._ok(req, self._errno("EOVERFLOW"), (self._body(fid, FLID | FLGROUP),))
        if cfg.setattr_ignores_valid:                                        # (bug)
            valid |= FLATIME | FLMTIME | FLCTIME | FLMODE | FLUID | FLGID
        bits = {**TIMES, **IDS, "o_size": FLSIZE, "o_blocks": FLBLOCKS}
        la = {name: body[name] for name, bit in bits.items() if valid & bit}
        if valid & FLMODE:
            la["o_mode"] = body["o_mode"] & S_IALLUGO
        self._handle_ids(la, state, is_setattr=True)
        if self._projid_refused(la, state):
            return self._fail(exp, req, "OST_SETATTR", "EOPNOTSUPP", fid, FLID | FLGROUP)
        new = dict(state)
        self._set_attrs(new, la)
        transno, pre = self._transact(exp, req, "OST_SETATTR", 0, [(key, new)], state.get("version", 0),
                                      vbr_object="o_size" in la)
        echo = {name: (value & S_IALLUGO if name == "o_mode" else value) for name, value in la.items()}
        echo_valid = FLID | FLGROUP
        for name in echo:
            echo_valid |= FLMODE if name == "o_mode" else bits[name]
        return self._ok(req, 0, (self._body(fid, echo_valid, **echo),), transno, pre)

    def _h_ost_punch(self, exp, req, body):
        """ofd_punch_hdl / ofd_object_punch, on an ldiskfs OSD (reference choice; ZFS leaves
        mtime alone): without FLSIZE and FLBLOCKS ERR -EPROTO (serious), an end other than EOF
        REPLY -EPROTO, then -ENOENT; the times carried are set, uid/gid/projid only per
        _handle_ids with is_setattr 0, FLMODE ignored; size = start; the truncate sets mtime to
        the ctime (Lustre's ldiskfs keeps ctime on OST objects): before the attributes are set
        when the object grows (a carried mtime wins), after them when it shrinks (it does not);
        nothing when the size stays.  The version becomes the transno."""
        cfg = self.config
        valid = body["o_valid"]
        fid = body["_fid"]
        if (valid & (FLSIZE | FLBLOCKS)) != (FLSIZE | FLBLOCKS) and cfg.punch_requires_size_blocks:
            return Reply(opc=req.opc, type=ERR, status=self._errno("EPROTO"), early=True)
        if valid & FLBLOCKS and body["o_blocks"] != OBJECT_EOF:
            return self._ok(req, self._errno("EPROTO"), (self._body(),))
        key = fid_key(*fid)
        state = self.objects.get(key)
        if state is None:
            return self._fail(exp, req, "OST_PUNCH", "ENOENT", fid, FLID)
        if self._vbr_mismatch(req, state):
            exp.vbr_failed = True
            return self._ok(req, self._errno("EOVERFLOW"), (self._body(fid, FLID),))
        start = body["o_size"]
        # before 2.17.0 ofd_punch_hdl hands la_from_obdo the times only (punch_sets_ids)
        taken = {**TIMES, **IDS} if self.behaviour["punch_sets_ids"] or cfg.punch_sets_ids else TIMES
        la = {name: body[name] for name, bit in taken.items() if valid & bit}
        la["o_size"] = start
        self._handle_ids(la, state, is_setattr=cfg.punch_sets_ids)           # (bug) when True
        if self._projid_refused(la, state):
            # ldiskfs: osd_punch has set the size (the truncate runs at transaction stop, and
            # sets mtime to the ctime) before dt_attr_set fails; the transaction takes no transno
            if start != state["o_size"]:
                truncated = dict(state, o_size=start, o_mtime=state["o_ctime"])
                self._apply([(key, truncated)], durable=True)
            return self._fail(exp, req, "OST_PUNCH", "EOPNOTSUPP", fid, FLID)
        new = dict(state)
        if start > state["o_size"]:
            new["o_mtime"] = state["o_ctime"]           # grow: the truncate runs first
        self._set_attrs(new, la)
        if start < state["o_size"]:
            new["o_mtime"] = new["o_ctime"]             # shrink: the truncate runs at transaction stop
        transno, pre = self._transact(exp, req, "OST_PUNCH", 0, [(key, new)], state.get("version", 0),
                                      vbr_object=True)
        return self._ok(req, 0, (self._body(fid, FLID),), transno, pre)

    def _h_ost_sync(self, exp, req, body):
        """ofd_sync_hdl / tgt_sync: an object is synced only when its version is above the
        last committed transno; the sync commits every pending transaction (one journal
        commit: reference choice).  Without buffer 1 the whole device is synced."""
        if body is None:
            self._commit(len(self.pending))
            return self._ok(req, 0, (self._body(),))
        fid = body["_fid"]
        state = self.objects.get(fid_key(*fid))
        if state is None:
            return self._ok(req, self._errno("ENOENT"), (self._body(),))
        if state.get("version", 0) > self.last_committed:
            self._commit(len(self.pending))
        fields = {name: state[name] for name in ("o_size", "o_blocks", "o_mode", *TIMES)}
        return self._ok(req, 0, (self._body(fid, FLID | FLGROUP | SYNC_BITS, **fields),))

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
        if self.behaviour["reply_body_shrunk"]:        # 2.12.9: buffer 0 cut to ptlrpc_body_v2
            message["buflens"] = [spec.constant("PTLRPC_BODY_V2_SIZE")] + [len(b) for b in reply.buffers]
        return self.codec.encode(message)
