"""The stateful machine of the target suite (suites/test_target.py, whose cases run it): three
clients through connects, reconnects, disconnects, modifying and read-only requests, failing
requests, requests that break one rule each, and resends of requests whose reply was "lost",
every reply judged as it comes.  A module of its own, imported by the stateful cases when
they run: defining the machine's rules imports Hypothesis, which collecting the suites does
not need."""
from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import initialize, rule

from ptlrpc_conformance.fixtures.strategies import a_few_block, choice, drawn_as_one, number, subsets_block
from ptlrpc_conformance.fixtures.stateful import BudgetedMachine, budgeted
from ptlrpc_conformance.harness.ost.invariants import original_under_new_transno, reconstructed
from ptlrpc_conformance.harness.ost.session import Session
from ptlrpc_conformance.harness.ost.client import (EOF, MAX_ID, MAX_TIME, MD, C, check_any, dropped, err, ost_body,
                                                   reply, unknown_opcode)

CLIENTS = ("c1", "c2", "c3")
PICK = number(1 << 16)                     # which modelled object (an index, resolved at run time)
TIMES = number(MAX_TIME)                   # below 2^34 - 2^31 s
# uid, gid, projid are drawn below 2^32 - 1 (MAX_ID, docs/target-rules.md §1).  A rule with several
# arguments draws them as one block (`args`, fixtures/strategies.py): one draw a step, not one each
SETATTR_BITS = ("FLATIME", "FLMTIME", "FLCTIME", "FLMODE", "FLUID", "FLGID", "FLPROJID", "FLTYPE", "FLBLOCKS")
PUNCH_BITS = ("FLATIME", "FLMTIME", "FLCTIME", "FLUID", "FLGID", "FLPROJID", "FLMODE")
BROKEN = ("truncated", "type-reply", "at-timeout-0", "unknown-opcode", "wrong-version", "short-body",
          "object-id-0", "no-flid", "bad-sequence", "stale-xid", "unknown-handle", "stale-conn-cnt",
          "reconnect-same-count", "reconnect-lower-count", "replay-flag", "request-transno", "replay-timeout-0",
          "punch-not-eof", "punch-no-blocks", "setattr-truncate", "after-disconnect")


def _valid(bits) -> int:
    v = 0
    for b in bits:
        v |= MD[b]
    return v


class TargetMachine(BudgetedMachine):
    reconstruct = False     # profile lustre-2.17.57-reconstruct
    release = None          # the run's Lustre release (run_machine sets both from the run's settings)

    def __init__(self):
        super().__init__()
        self.s = Session(self.adapter, reconstruct=self.reconstruct, release=self.release)
        self.s.reset()
        self.s.add_client("c1")
        self.s.add_client("c2", replay_create=True)
        self.s.add_client("c3", readonly=True)
        self.lost: dict[str, list[tuple]] = {n: [] for n in CLIENTS}     # (xid, (opc, oid, valid, fields), step)
        self.old_cookie: dict[str, int] = {}

    def c(self, name):
        return self.s.clients[name]

    def _connected(self, name) -> bool:
        return self.c(name).connected

    def oid(self, pick: int) -> int | None:
        """A modelled object id (existing, destroyed, or one above LAST_ID), or None before
        LAST_ID is known."""
        ids = self.s.modelled_ids()
        return ids[pick % len(ids)] if ids else None

    # -- connections ----------------------------------------------------------------------
    @initialize()
    @budgeted
    def connect_all(self):
        """Every run starts with the three clients connected, LAST_ID learnt from a create of
        id 1, and two objects made above it (by c1, and by c2 with REPLAY_CREATE)."""
        for name in CLIENTS:
            self.s.connect(self.c(name))
        self.s.body_op(self.c("c1"), "OST_CREATE", 1, note="create id 1 (learns LAST_ID)")
        if self.s.state.last_id is not None:
            self.s.body_op(self.c("c1"), "OST_CREATE", self.s.state.last_id + 1)
            self.s.body_op(self.c("c2"), "OST_CREATE", self.s.state.last_id + 1)

    @rule(name=st.sampled_from(CLIENTS))
    @budgeted
    def connect(self, name):
        """A first connect, or a reconnect (count + 1) that must keep the export."""
        self.s.connect(self.c(name), "reconnect" if self.c(name).connected else "connect")

    @rule(name=st.sampled_from(CLIENTS))
    @budgeted
    def disconnect(self, name):
        c = self.c(name)
        if not c.connected or self.lost[name]:
            return
        self.old_cookie[name] = c.cookie
        self.s.disconnect(c)

    # -- well-formed requests ---------------------------------------------------------------
    @rule(args=drawn_as_one(choice(CLIENTS), choice([1, 1, 2, 3, 0, -1, -2])))
    @budgeted
    def create(self, args):
        """A create of LAST_ID + k: a precreate above LAST_ID, nothing at or below it."""
        name, k = args
        if not self._connected(name):
            return
        last = self.s.state.last_id
        n = 1 if last is None else max(1, last + k)
        self.s.body_op(self.c(name), "OST_CREATE", n)

    @rule(args=drawn_as_one(choice(CLIENTS), PICK, subsets_block(SETATTR_BITS), *map(number, (
        MAX_TIME, MAX_TIME, MAX_TIME, (1 << 32) - 1, MAX_ID, MAX_ID, MAX_ID, 1 << 30))))
    @budgeted
    def setattr(self, args):
        """Every obdo field holds a value; only those with a bit may be applied. A size
        without FLSIZE is noise the target must ignore."""
        name, pick, bits, atime, mtime, ctime, mode, uid, gid, projid, size = args
        oid = self.oid(pick)
        if not self._connected(name) or oid is None:
            return
        self.s.body_op(self.c(name), "OST_SETATTR", oid, _valid(bits), o_atime=atime, o_mtime=mtime, o_ctime=ctime,
                       o_mode=mode, o_uid=uid, o_gid=gid, o_projid=projid, o_size=size, o_blocks=size)
        self._read_back(name, oid)

    def _read_back(self, name: str, oid: int) -> None:
        """OST_GETATTR of `oid` after a change by `name`: from the read-only client when it is
        connected, else from the first connected one."""
        reader = next(self.c(n) for n in ("c3", "c1", "c2", name) if self.c(n).connected)
        self.s.body_op(reader, "OST_GETATTR", oid, note="read back")

    def _on_object(self, args, opc: str) -> None:
        """`opc` by a client on a modelled object, when the client is connected and there is one."""
        name, pick = args
        oid = self.oid(pick)
        if self._connected(name) and oid is not None:
            self.s.body_op(self.c(name), opc, oid)

    @rule(args=drawn_as_one(choice(CLIENTS), PICK))
    @budgeted
    def getattr(self, args):
        self._on_object(args, "OST_GETATTR")

    @rule(args=drawn_as_one(choice(CLIENTS), PICK, a_few_block(PUNCH_BITS, 3), *map(number, (
        1 << 40, MAX_TIME, MAX_TIME, MAX_TIME, MAX_ID, MAX_ID, MAX_ID))))
    @budgeted
    def punch(self, args):
        """A punch to `start`, with some times and ids (applied as ofd_attr_handle_id lets
        them) and a mode (ignored); the object is read back."""
        name, pick, bits, start, atime, mtime, ctime, uid, gid, projid = args
        oid = self.oid(pick)
        if not self._connected(name) or oid is None:
            return
        self.s.body_op(self.c(name), "OST_PUNCH", oid, MD["FLSIZE"] | MD["FLBLOCKS"] | _valid(bits), o_size=start,
                       o_blocks=EOF, o_atime=atime, o_mtime=mtime, o_ctime=ctime, o_uid=uid, o_gid=gid,
                       o_projid=projid, o_mode=0o100600)
        if bits:
            self._read_back(name, oid)

    @rule(args=drawn_as_one(choice(CLIENTS), PICK))
    @budgeted
    def destroy(self, args):
        self._on_object(args, "OST_DESTROY")

    @rule(args=drawn_as_one(choice(CLIENTS), PICK))
    @budgeted
    def sync(self, args):
        self._on_object(args, "OST_SYNC")

    @rule(args=drawn_as_one(choice(CLIENTS), choice(["OBD_PING", "OST_STATFS"])))
    @budgeted
    def bodiless(self, args):
        name, opc = args
        c = self.c(name)
        if c.connected:
            xid, data = c.request(opc)
            self.s.send(c, xid, data, reply(0, why=opc), opc)

    # -- lost replies and resends -----------------------------------------------------------
    @rule(args=drawn_as_one(choice(("c1", "c2")), PICK, choice(["setattr", "punch", "destroy", "create"]), TIMES))
    @budgeted
    def lose_reply(self, args):
        """A modifying request that succeeds with a transaction, whose reply the client then
        "loses": it stays unreplied until it is resent."""
        name, pick, kind, mtime = args
        c = self.c(name)
        oid = self.oid(pick)
        if not c.connected or oid is None:
            return
        exists = oid in self.s.objects
        if kind == "create":
            if not c.creates_take_transnos or self.s.state.last_id is None:
                return
            oid = self.s.state.last_id + 1
            args = ("OST_CREATE", oid, 0, {})
        elif not exists:
            return
        elif kind == "setattr":
            args = ("OST_SETATTR", oid, MD["FLMTIME"], {"o_mtime": mtime})
        elif kind == "punch":
            args = ("OST_PUNCH", oid, MD["FLSIZE"] | MD["FLBLOCKS"], {"o_size": mtime & 0xFFFFF, "o_blocks": EOF})
        else:
            args = ("OST_DESTROY", oid, 0, {})
        opc, oid, valid, fields = args
        xid, data, n, rep = self.s.body_op(c, opc, oid, valid, lose=True, note=f"{opc} (reply lost)", **fields)
        if rep is not None and rep.body["pb_transno"]:
            self.lost[name].append((xid, args, n))
        else:
            c.unreplied.discard(xid)          # no transaction ran (a refused create): nothing to resend

    @rule(name=st.sampled_from(("c1", "c2")))
    @budgeted
    def resend(self, name):
        """MSG_RESENT with the same XID: the saved reply again, or (default profile) a run as a
        new request, judged as one."""
        c = self.c(name)
        if not self.lost[name] or not c.connected:
            return
        xid, (opc, oid, valid, fields), n = self.lost[name].pop(0)
        # the same request again: same XID and body; the client's current handle, count, last XID
        _, data = c.request(opc, [ost_body(oid, valid, **fields)], xid=xid, flags=C("MSG_RESENT"))
        c.unreplied.discard(xid)
        rep = self.s.send(c, xid, data, None, f"resend of step {n}", same_as=n, oid=oid)
        original = self.s.replies.get(n)
        if original is not None and not reconstructed(original, rep):
            expect, apply = self.s.expect_handler(c, opc, oid, valid, **fields)
            problems, _, _ = check_any(expect.resolve(self.s.judge.value_of), rep.raw if rep is not None else None)
            if problems and original_under_new_transno(original, rep):
                # neither the original reply nor a run as a new request: a mix (TGT-RESEND-1)
                self.s.fail([f"TGT-RESEND-1: the resend of step {n} got the original reply under a new transno "
                             f"{rep.body['pb_transno']:#x} (the original's {original.body['pb_transno']:#x}); "
                             f"as a run of a new request it breaks {p}" for p in problems])
            elif problems:
                self.s.fail([f"{p} (the resend of step {n} was run again)" for p in problems])
            if apply:
                apply(rep)

    # -- one broken rule per step -------------------------------------------------------------
    @rule(args=drawn_as_one(choice(CLIENTS), choice(BROKEN), PICK))
    @budgeted
    def broken(self, args):
        name, kind, pick = args
        c = self.c(name)
        s = self.s
        oid = self.oid(pick) or 1
        gid = ost_body(oid)
        if kind == "after-disconnect":
            if c.connected or name not in self.old_cookie:
                return
            xid, data = c.request("OST_GETATTR", [gid], handle=self.old_cookie[name])
            s.send(c, xid, data, err("ENOTCONN", "TGT-CONN-2", "a request with a cookie disconnected before"), kind)
            return
        if not c.connected:
            if kind == "truncated":
                xid, data = c.request("OST_GETATTR", [gid], handle=0)
                s.send(c, xid, data, err("ENOTCONN", "TGT-CONN-2", "a request with no export"), "not connected")
                return
            s.connect(c)
        if kind == "truncated":
            xid, data = c.request("OST_GETATTR", [gid])
            s.send(c, xid, data[:20], dropped("a 20-byte message"), kind)
        elif kind == "type-reply":
            xid, data = c.request("OST_GETATTR", [gid], pb_type=C("PTL_RPC_MSG_REPLY"))
            s.send(c, xid, data, dropped("pb_type REPLY in a request"), kind)
        elif kind == "at-timeout-0":
            xid, data = c.request("OST_GETATTR", [gid], timeout=0)
            s.send(c, xid, data, dropped("MSGHDR_AT_SUPPORT with pb_timeout 0"), kind)
        elif kind == "unknown-opcode":
            xid, data = c.request("OST_GETATTR", [gid], opc=9999)
            s.send(c, xid, data, unknown_opcode(s.judge.release, why="opcode 9999"), kind)
        elif kind == "wrong-version":
            xid, data = c.request("OST_GETATTR", [gid], version=C("LUSTRE_MDS_VERSION"))
            s.send(c, xid, data, err("EINVAL", why="OST_GETATTR with LUSTRE_MDS_VERSION"), kind)
        elif kind == "short-body":
            xid, data = c.request("OST_GETATTR", [gid[:100]])
            s.send(c, xid, data, err("EFAULT", why="a 100-byte ost_body"), kind)
        elif kind == "object-id-0":
            xid, data = c.request("OST_GETATTR", [ost_body(0)])
            s.send(c, xid, data, err("EPROTO", why="OBD_MD_FLID with object id 0"), kind)
        elif kind == "no-flid":
            xid, data = c.request("OST_GETATTR", [ost_body(None, MD["FLGROUP"])])
            s.send(c, xid, data, err("EPROTO", why="OST_GETATTR (HAS_BODY) without OBD_MD_FLID"), kind)
        elif kind == "bad-sequence":
            xid, data = c.request("OST_GETATTR", [ost_body(5, seq=1)])
            s.send(c, xid, data, err("EPROTO", why="an ost_id in sequence 5 (no IDIF, MDT0, normal or echo)"), kind)
        elif kind == "stale-xid":
            if self.lost[name]:
                return              # it would free the saved replies of the lost requests
            xid = c.new_xid()
            _, data = c.request("OST_GETATTR", [gid], xid=xid, last_xid=xid)
            s.send(c, xid, data, err("EPROTO", why="XID not above pb_last_xid"), kind)
        elif kind == "unknown-handle":
            xid, data = c.request("OST_GETATTR", [gid], handle=0x5EED0000DEADBEEF)
            s.send(c, xid, data, err("ENOTCONN", "TGT-CONN-2", "a cookie the target never issued"), kind)
        elif kind == "stale-conn-cnt":
            xid, data = c.request("OST_GETATTR", [gid], conn_cnt=c.conn_cnt - 1)
            s.send(c, xid, data, dropped("pb_conn_cnt below the export's", "TGT-CONN-2"), kind)
        elif kind == "reconnect-same-count":
            xid, data = c.request("OST_CONNECT", c.connect_buffers())
            s.send(c, xid, data, err("EALREADY", "TGT-CONN-2", "a reconnect with the stored pb_conn_cnt"), kind, track=False)
        elif kind == "reconnect-lower-count":
            xid, data = c.request("OST_CONNECT", c.connect_buffers(), conn_cnt=c.conn_cnt - 1)
            s.send(c, xid, data, dropped("a reconnect with a lower pb_conn_cnt", "TGT-CONN-2"), kind, track=False)
        elif kind in ("replay-flag", "request-transno", "replay-timeout-0"):
            if self.lost[name]:
                return
            kw = {"flags": C("MSG_REPLAY")} if kind == "replay-flag" else \
                {"transno": 0x1234} if kind == "request-transno" else {"flags": C("MSG_REPLAY"), "timeout": 0}
            xid, data = c.request("OST_GETATTR", [gid], **kw)
            s.send(c, xid, data, err("ENODEV", "RCV-OUTSIDE-1", f"{kind} outside recovery (the export is evicted)"), kind)
            c.connected = False
            self.old_cookie[name] = c.cookie
        elif kind == "punch-not-eof":
            s.body_op(c, "OST_PUNCH", oid, MD["FLSIZE"] | MD["FLBLOCKS"], note=kind, o_size=0, o_blocks=4096)
        elif kind == "punch-no-blocks":
            s.body_op(c, "OST_PUNCH", oid, MD["FLSIZE"], note=kind, o_size=0, o_blocks=EOF)
        elif kind == "setattr-truncate":
            s.body_op(c, "OST_SETATTR", oid, MD["FLSIZE"], note=kind, o_size=4096)
