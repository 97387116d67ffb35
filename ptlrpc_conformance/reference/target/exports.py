"""The reference target's connections and exports (target_handle_connect and the export
table): connect and reconnect, export cookies, read-only exports, eviction."""
from __future__ import annotations

from .constants import (CONNECT_RECONNECT, CONNECT_RECOVERING, CONNECT_REPLAYABLE, CONNECT_TRANSNO,
                        LUSTRE_VERSION_CODE, OBD_CONNECT_FLAGS2, OBD_CONNECT_FULL20, REPLY)
from ..codec import CodecError
from ..target_config import OBD_CONNECT_RDONLY
from .state import Export, Reply, Request


class Connections:
    """The exports of `Target`: a mix-in; the state it reads is set up by `Target.reset`."""

    def _connect(self, req: Request, found: Export | None) -> bytes | None:
        cfg = self.config
        bufs = req.buffers
        target, uuid = self._uuid(bufs, 1), self._uuid(bufs, 2)
        if target is None:
            return self._reject(req, "EINVAL", None)
        # ldlm_lib.c: target_handle_connect finds the target with class_str2obd, which takes
        # its UUID or its device name (lustre-OST0000_UUID or lustre-OST0000)
        if target not in (cfg.target_uuid, cfg.target_uuid.removesuffix("_UUID")):
            return self._reject(req, "ENODEV", None)
        if not uuid:
            return self._reject(req, "EINVAL", None)
        if len(bufs) < 5:
            return self._reject(req, "EPROTO", None)
        # target_handle_connect: connect data longer than 8 structures is refused (LU-12605);
        # a shorter excess is ignored (RMF_CONNECT_DATA has no size check)
        if len(bufs[4]) > self.connect_data_max:
            return self._reject(req, "EPROTO", None)
        try:
            handle = self.structs.decode("lustre_handle", bufs[3], req.order)["fields"]["cookie"]
            ocd = self.structs.decode("obd_connect_data", bufs[4], req.order)["fields"]
        except CodecError:
            return self._reject(req, "EPROTO", None)
        if not ocd["ocd_connect_flags"] & OBD_CONNECT_FULL20:
            return self._reject(req, "EPROTO", None)
        conn_cnt = req.body["pb_conn_cnt"]
        exp = self.exports.get(uuid)
        # target_handle_connect says MSG_CONNECT_REPLAYABLE only while OBDF_REPLAYABLE is set
        op_flags = CONNECT_REPLAYABLE if cfg.recovery else 0
        if exp is None:
            if self.recovering and self._busy_during_recovery():
                return self._reject(req, "EBUSY", None)
            exp = Export(uuid=uuid, client_handle=handle)
            if self._already(exp, handle, conn_cnt, "new"):
                return self._reject(req, "EALREADY", None)
            self.exports[uuid] = exp
            exp.cookie = self._new_cookie(exp)
        elif not exp.cookie:
            # remembered after a restart: Lustre rebuilt the export without a connection, so
            # this is not flagged RECONNECT; a count of 1 claims to be a new client
            if self._already(exp, handle, conn_cnt, "remembered"):
                return self._reject(req, "EALREADY", None)
            exp.cookie = self._new_cookie(exp)
            exp.client_handle = handle
        else:
            if self._already(exp, handle, conn_cnt, "connected"):
                return self._reject(req, "EALREADY", None)
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


    def _uuid(self, bufs: tuple, i: int) -> str | None:
        """Buffer i of a connect as a UUID (RMF_TGTUUID, RMF_CLUUID: a string of at most
        sizeof(struct obd_uuid) - 1 characters, lustre_msg_string), or None: the buffer is
        missing, holds no NUL or a longer string (TGT-CONN-4)."""
        end = bufs[i].find(b"\0") if len(bufs) > i else -1
        return bufs[i][:end].decode("latin-1") if 0 <= end < self.uuid_size else None

    def _busy_during_recovery(self) -> bool:
        """A new client while recovery runs is refused -EBUSY (target_handle_connect)."""
        return True

    @staticmethod
    def _already(exp: Export, handle: int, conn_cnt: int, kind: str) -> bool:
        """-EALREADY (target_handle_connect): a connect whose pb_conn_cnt is not above the
        export's, or a reconnect from another client handle.  `kind`: the export is "new",
        "remembered" after a restart (a count of 1 claims to be a new client) or "connected"."""
        if kind == "connected":
            return handle != exp.client_handle or conn_cnt <= exp.conn_cnt
        if kind == "remembered":
            return conn_cnt == 1 or conn_cnt <= exp.conn_cnt
        return conn_cnt <= exp.conn_cnt

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
        return bool(exp.flags & OBD_CONNECT_RDONLY)

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

