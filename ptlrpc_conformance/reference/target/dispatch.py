"""The reference target's request dispatcher: `Target`, one in-memory Lustre 2.17.57 OST made
of the parts of this package, and the path of a request through it - decoded, checked in the
order of Lustre's receive path (the rows of docs/target-rules.md), handed to recovery or to
its handler, and its reply packed."""
from __future__ import annotations

from ... import spec
from ...spec import layouts, releases
from ..codec import Codec, CodecError
from ..structs import StructCodec, StructConfig
from ..target_config import TargetConfig
from .constants import (AT_SUPPORT, C, ERR, FLGROUP, FLID, MSG_REPLAY,
                        MSG_REQ_REPLAY_DONE, MSG_RESENT, MSG_VERSION, OST_BODY_SIZE, REPLY, VERSION_MASK)
from .exports import Connections
from .objects import Objects
from .ostid import pair_id, pair_seq, ostid_to_fid, raw_oi, valid_sequence
from .recovery import Recovery
from .state import Export, Held, Reply, Request, Txn
from .transactions import Transactions


def _opcode_table() -> dict[int, dict]:
    table = {}
    for name, row in spec.target()["opcodes"].items():
        table[C(name)] = dict(row, name=name, version=C(row["version"]))
    return table


class Target(Connections, Recovery, Transactions, Objects):
    """An in-memory Lustre 2.17.57 OST."""

    def __init__(self, config: TargetConfig | None = None):
        self.config = config or TargetConfig()
        self.codec = Codec(self.config.codec_config)
        # the target reads structures' fields only: no "valid" view of the fields the valid bits name
        self.structs = StructCodec((self.config.struct_config or StructConfig()).but(report_valid=False))
        self.opcodes = _opcode_table()
        self.refuse_statuses = {-spec.errno_value(n) for n in spec.target()["reply_statuses"]}
        # a UUID buffer's string fits an obd_uuid with its NUL (TGT-CONN-4); the longest
        # obd_connect_data buffer a connect may carry (TGT-CONN-3)
        self.uuid_size = layouts.struct("obd_uuid", self.config.release)["size"]
        self.connect_data_max = (spec.target()["connect_data_max_structs"]
                                 * layouts.struct("obd_connect_data", self.config.release)["size"])
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

    # ---- receiving -----------------------------------------------------------------------
    def _receive(self, data: bytes, xid: int, peer: str) -> bytes | None:
        cfg = self.config
        try:
            msg = self.codec.decode(data, "request")
        except CodecError:
            return None                                                      # row 1, row 2
        req = Request(xid=xid, peer=peer, msg=msg, body=msg["body"],
                      buffers=[bytes.fromhex(b) for b in msg["buffers"]], order=msg["byte_order"],
                      lm_flags=msg["header"]["lm_flags"])
        body = req.body
        no_deadline = bool(req.lm_flags & AT_SUPPORT) and body["pb_timeout"] == 0
        # ptlrpc_server_handle_req_in: ptlrpc_check_req runs for a request naming an export,
        # before the AT deadline is looked at
        exp = self._by_cookie(body["pb_handle"])
        if exp is not None and self._stale_connection(exp, req):
            return None                                                      # row 4
        if exp is not None and not self.recovering and self._is_replay(req):
            reply = self._reject(req, "ENODEV", exp)                        # row 5
            self._evict(exp)
            return reply
        if no_deadline:
            return None                                                      # row 3: deadline 0
        if req.opc == C("OST_CONNECT"):
            return self._connect(req, exp)                                   # row 6
        if exp is None:
            exp = self._unknown_handle(req)
            if exp is None:
                return self._reject(req, "ENOTCONN", None)                  # row 7
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
        if self._last_transaction_again(exp, req) and cfg.recovery:
            return None                 # (a target with recovery disabled never looks: tgt_handle_recovery)
        if self.recovering:
            return self._recovery_filter(exp, req, row)                      # row 11
        return self._process(exp, req)

    def _stale_connection(self, exp: Export, req: Request) -> bool:
        """Row 4 (ptlrpc_check_req): a pb_conn_cnt below the export's is from an older
        connection; the request is dropped."""
        return req.body["pb_conn_cnt"] < exp.conn_cnt

    @staticmethod
    def _is_replay(req: Request) -> bool:
        """Row 5 (ptlrpc_check_req): a replay, or the end of a client's replays, or a request
        carrying a transno: outside recovery it is refused -ENODEV and its export evicted."""
        return bool(req.flags & (MSG_REPLAY | MSG_REQ_REPLAY_DONE) or req.transno)

    def _unknown_handle(self, req: Request) -> Export | None:
        """Row 7: the export a request naming no export is served on.  None: there is none,
        the request is refused -ENOTCONN (tgt_request_handle)."""
        return None

    @staticmethod
    def _last_transaction_again(exp: Export, req: Request) -> bool:
        """Row 12 (tgt_handle_recovery, req_can_reconstruct): the XID of the export's last
        transaction (lcd_last_xid) again, without MSG_RESENT or MSG_REPLAY."""
        return req.xid == exp.last_trans_xid and not req.flags & (MSG_RESENT | MSG_REPLAY)

    # ---- processing: rows 12-17 -----------------------------------------------------------
    def _process(self, exp: Export, req: Request) -> bytes | None:
        cfg = self.config
        row = self.opcodes[req.opc]
        saved = self.saved.get((exp.uuid, req.xid))
        if saved is not None and req.flags & MSG_RESENT and not req.flags & MSG_REPLAY:
            # reference choice: a resend is answered from its saved reply (reconstruction, as an
            # MDT does); Lustre's OST runs it again.  A replay always runs (below).
            return self._reconstruct(exp, saved)
        if saved is not None and req.flags & MSG_REPLAY and cfg.replay_skips_committed:
            # a choice the rules allow: a committed replay answered from its saved reply
            return self._reconstruct(exp, saved)
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
        reply = self._handle(exp, req, row, body)                           # row 17
        if reply is None:
            return None
        if reply.early:                                                      # a serious error
            return self._pack(reply, exp)
        if row["mutable"] and reply.type == REPLY:
            self._save(exp, req, reply)
        return self._pack(reply, exp)

    def _handle(self, exp: Export, req: Request, row: dict, body: dict | None) -> Reply | None:
        """Row 17: the opcode's handler (`_h_<opcode>`); None: no reply."""
        return getattr(self, "_h_" + row["name"].lower())(exp, req, body)

    def _validate_obdo(self, req: Request, exp: Export, row: dict, body: dict) -> dict | bytes:
        """tgt_ost_body_unpack / tgt_validate_obdo: the ost_id checks, then o_oi rewritten into
        its FID form (kept as body["_fid"]; body["_oi"] is the ost_id as sent)."""
        valid = body["o_valid"] | FLGROUP
        body["o_valid"] = valid
        lo, hi = raw_oi(body["o_oi"])
        seq, oid = pair_seq(lo, hi), pair_id(lo, hi)
        if (valid & FLID and oid == 0) or not valid_sequence(seq):
            return self._reject(req, "EPROTO", exp)                         # row 14
        fid = ostid_to_fid(lo, hi)
        if fid is None:
            return self._reject(req, "EBADF", exp)                          # row 14: f_ver != 0
        if row["has_body"] and not valid & FLID:
            return self._reject(req, "EPROTO", exp)                         # row 15
        body["_oi"], body["_fid"] = (lo, hi), fid
        return body

    # ---- replies ----------------------------------------------------------------------------
    def _reject(self, req: Request, errno_name: str, exp: Export | None) -> bytes:
        """An early rejection (ptlrpc_send_error): ERR unless the status keeps REPLY."""
        status = -spec.errno_value(errno_name)
        kind = REPLY if status in self.refuse_statuses else ERR
        return self._pack(Reply(opc=req.opc, type=kind, status=status, early=True), exp)

    def _pack(self, reply: Reply, exp: Export | None, connect: bool = False) -> bytes:
        """The reply's wire bytes: the export's connection count and, unless the reply is an
        early rejection, its last_committed; `connect`: the reply to a connect."""
        last_committed = 0
        if not reply.early and exp is not None:
            last_committed = self._reported_last_committed(exp)
        body = {"pb_handle": reply.handle, "pb_type": reply.type, "pb_version": MSG_VERSION, "pb_opc": reply.opc,
                "pb_status": reply.status, "pb_transno": reply.transno, "pb_last_committed": last_committed,
                "pb_op_flags": reply.op_flags, "pb_conn_cnt": exp.conn_cnt if exp is not None else 0,
                "pb_pre_versions": list(reply.pre_versions)}
        message = {"header": {"lm_flags": AT_SUPPORT}, "body": body,
                   "buffers": [None] + [b.hex() for b in reply.buffers]}
        if self.behaviour["reply_body_shrunk"]:        # 2.12.9: buffer 0 cut to ptlrpc_body_v2
            message["buflens"] = [spec.constant("PTLRPC_BODY_V2_SIZE")] + [len(b) for b in reply.buffers]
        return self.codec.encode(message)
