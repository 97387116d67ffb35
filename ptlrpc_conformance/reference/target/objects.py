"""The reference target's objects: the OST handlers (ofd_*_hdl) and the attribute rules
they share (ofd_attr_handle_id, dt_attr_set on an ldiskfs OSD, precreated objects)."""
from __future__ import annotations

from ... import spec
from .constants import (ERR, FID_SEQ_NORMAL, FID_SEQ_OST_MDT0, FLBLOCKS, FLDATAVERSION, FLFLAGS, FLGROUP,
                        FLID, FLMODE, FLOBJCOUNT, FLSIZE, GETATTR_BITS, IDIF_MAX_OID, IDS, MSG_REPLAY,
                        OBD_FL_FLUSH, OBIF_MAX_OID, OBJECT_EOF, OFD_UNSET_ATTRS_MODE, OST_MAX_PRECREATE,
                        REPLY, SYNC_BITS, S_IALLUGO, S_IFMT, S_ISGID, S_ISUID, S_ISVTX, TIMES)
from .ostid import pair_id, is_idif, pair_seq, fid_key, fid_to_ostid, ostid_set_id
from .state import Reply, Request


class Objects:
    """The handlers of `Target` (a mix-in), one `_h_<opcode>` per opcode the OST serves."""

    # the o_valid bits OST_GETATTR reports on success (besides FLID, FLGROUP, FLFLAGS, FLDATAVERSION)
    GETATTR_BITS = GETATTR_BITS
    # the o_valid bits OST_PUNCH requires (ofd_punch_hdl: else ERR -EPROTO)
    PUNCH_REQUIRED = FLSIZE | FLBLOCKS
    # the mode bit a change of each id clears (ofd_attr_handle_id)
    ID_MODE_BITS = {"o_uid": S_ISUID, "o_gid": S_ISGID, "o_projid": S_ISVTX}

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
        return pre != 0 and pre != state.get("version", 0)

    def _projid_refused(self, la: dict, stored: dict) -> bool:
        """An OST without project quota (TargetConfig.project_quota False, ldiskfs without the
        project feature): a projid other than the stored one fails -EOPNOTSUPP in the quota
        transfer (osd_quota_transfer -> osd_transfer_project), before any attribute is set."""
        return not self.config.project_quota and "o_projid" in la and la["o_projid"] != stored["o_projid"]

    def _fresh_object(self, body: dict) -> dict:
        """A precreated object (ofd_precreate_objects): OFD_UNSET_ATTRS_MODE, owner 0, size 0,
        times 0, no version; the create request's attributes are not used."""
        return {"o_size": 0, "o_blocks": 0, "o_atime": 0, "o_mtime": 0, "o_ctime": 0,
                "o_mode": OFD_UNSET_ATTRS_MODE, "o_uid": 0, "o_gid": 0, "o_projid": 0, "version": 0}

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
        for name, bit in self.ID_MODE_BITS.items():
            if name in la and mode & bit:
                mask |= bit
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
        the last min(width, 20000) (before 2.16: the last 10000); N <= L creates nothing (reply
        id L+1 when N < L, N when N == L, transno 0).  Never -EEXIST.  From 2.16 every reply
        has OBD_MD_FLSIZE with o_size the sequence width (the release's behaviour facts
        create_gap_seq_width, create_reply_seq_width).  Reference choices: no grant or
        free-space limit and no time limit, so creation never stops early."""
        cfg = self.config
        lo, hi = body["_fid"]
        seq, oid = pair_seq(lo, hi), pair_id(lo, hi)
        last = self.last_ids.get(seq, 0)
        reply_oi, status, transno, pre = (lo, hi), 0, 0, (0, 0, 0, 0)
        size = {"o_size": cfg.seq_width} if self.behaviour["create_reply_seq_width"] else {}
        sized = FLSIZE if size else 0
        if not (seq == FID_SEQ_OST_MDT0 or seq >= FID_SEQ_NORMAL) or oid == 0:
            diff = 1
        else:
            diff = oid - last
            if diff <= -OST_MAX_PRECREATE and not self.behaviour["create_trusts_last_id"]:
                # before 2.16: "Likely MDS last_id corruption", nothing created
                return self._ok(req, self._errno("EINVAL"), (self._body((lo, hi), sized, **size),))
            if diff < 0:
                reply_oi = ostid_set_id(lo, hi, last + 1)
        if diff > 0:
            if diff > 5 * OST_MAX_PRECREATE:
                diff = (min(cfg.seq_width, OST_MAX_PRECREATE) if self.behaviour["create_gap_seq_width"]
                        else OST_MAX_PRECREATE // 2)
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
        valid = sized | (FLID | FLGROUP if status == 0 else 0)
        return self._ok(req, status, (self._body(reply_oi, valid, **size),), transno, pre)

    def _h_ost_destroy(self, exp, req, body):
        """ofd_destroy_hdl: destroys the object (FLOBJCOUNT: o_misc objects from it), each in a
        transaction of its own; the reply's o_valid is 0 and its o_oi the id after the last one
        (fid_to_ostid of the advanced FID: {id + count, seq 0} for sequence 0)."""
        fid = body["_fid"]
        oid = pair_id(*fid)
        count = body["o_misc"] if body["o_valid"] & FLOBJCOUNT else 1
        fseq = fid_key(*fid)[0]
        limit = IDIF_MAX_OID if is_idif(fid[0]) else OBIF_MAX_OID
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
        return self._ok(req, 0, (self._body(fid, valid | self.GETATTR_BITS | FLDATAVERSION, o_flags=OBD_FL_FLUSH,
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
        valid = body["o_valid"]
        fid = body["_fid"]
        if valid & self.PUNCH_REQUIRED != self.PUNCH_REQUIRED:
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
        taken = {**TIMES, **IDS} if self.behaviour["punch_sets_ids"] else TIMES
        la = {name: body[name] for name, bit in taken.items() if valid & bit}
        la["o_size"] = start
        self._handle_ids(la, state, is_setattr=False)
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


