#!/usr/bin/env python3
"""Generate ptlrpc_conformance/vectors/scenarios_target.yaml: the scenario vectors of the
target and recovery suites (docs/scenarios.md).

Each scenario is written here as a short script of client actions; the requests are packed
by the suite's own builder (harness/ost/wire.py, harness/ost/client.py) and written out as bytes,
with the expectations the rules give (docs/target-rules.md).  No implementation under test
is consulted.  `pb_handle` (the export cookie the target picks) and replay transnos are
patched in at run time.  `--check` exits 1 when the committed file is stale.
"""
from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import regen  # noqa: E402

from ptlrpc_conformance import spec as _spec  # noqa: E402
from ptlrpc_conformance.harness.ost.scenario import Scenario, Step, dump_file
from ptlrpc_conformance.harness.ost.wire import REPLY as REPLY_T
from ptlrpc_conformance.harness.ost.client import C, EOF, MD, Client, Expect, dropped, err, ost_body, reply

spec_errno = _spec.errno_value
OUTPUT = ROOT / "ptlrpc_conformance" / "vectors" / "scenarios_target.yaml"
RECONNECT, REPLAYABLE, RECOVERING = (C("MSG_CONNECT_RECONNECT"), C("MSG_CONNECT_REPLAYABLE"),
                                     C("MSG_CONNECT_RECOVERING"))


class Script:
    """Client actions -> steps.  A connected client's requests get `patch: pb_handle`."""

    def __init__(self):
        self.steps: list[Step] = []
        self.clients: dict[str, Client] = {}
        self.live: set[str] = set()

    def client(self, name: str, **kw) -> Client:
        c = self.clients.get(name)
        if c is None:
            c = self.clients[name] = Client(name, handle=0x1000 + 0x111 * len(self.clients), **kw)
        return c

    def send(self, name: str, req: tuple[int, bytes], expect: Expect | None, note: str,
             handle_patch: bool = True, same_as: int | None = None, later: bool = False,
             transno_from: int | None = None, if_committed: int | None = None,
             if_uncommitted: int | None = None, if_lost: int | None = None) -> int:
        xid, data = req
        patch = {}
        if handle_patch and name in self.live:
            patch["pb_handle"] = name
        if transno_from is not None:
            patch["pb_transno"] = f"@{transno_from}"
        self.steps.append(Step(client=name, xid=xid, request=data, patch=patch, expect=expect,
                               same_as=same_as, later=later, note=note, if_committed=if_committed,
                               if_uncommitted=if_uncommitted, if_lost=if_lost))
        return len(self.steps)

    def op(self, step: str) -> None:
        self.steps.append(Step(op=step))

    # common actions
    def connect(self, name: str, reconnect: bool = False, recovering: bool = False, **kw) -> int:
        """A connect; during recovery (`recovering`) RECONNECT is optional (docs/target-rules.md §7)."""
        c = self.client(name, **kw)
        flags = REPLAYABLE | (RECONNECT if reconnect and not recovering else 0) | (RECOVERING if recovering else 0)
        n = self.send(name, c.connect(), reply(0, requirement="RCV-CONN-1" if recovering else "TGT-CONN-1",
                                               handle="nonzero", op_flags_all=flags,
                                               op_flags_none=0 if reconnect or recovering else RECONNECT,
                                               why="reconnect during recovery" if recovering else
                                               "reconnect" if reconnect else "connect"),
                      "reconnect" if reconnect or recovering else "connect")
        self.live.add(name)
        return n

    def replay(self, name: str, step: int, expect: Expect | None = None, pre_version: int = 0) -> int:
        """Client `name` replays the request of step `step` (same XID and buffers, MSG_REPLAY,
        the transno that step's reply carried); the reply may be deferred."""
        c = self.clients[name]
        orig = self.steps[step - 1]
        from ptlrpc_conformance.harness.ost import wire
        msg = wire.parse(orig.request, "request")
        opc = msg.body["pb_opc"]
        req = c.request("OBD_PING", msg.buffers[1:], xid=orig.xid, flags=C("MSG_REPLAY"), opc=opc,
                        version=msg.body["pb_version"] & 0xFFFF0000, pre_versions=(pre_version, 0, 0, 0))
        # any status: a replay of a transaction the target had committed may run again
        # (Lustre's OST does) and fail, e.g. -EEXIST for a create; the transno is the
        # invariants' business (the same, or 0)
        return self.send(name, req, expect or Expect(type=REPLY_T, status=None, transno="any",
                                                     requirement="RCV-REPLAY-1", why="replay"),
                         f"replay of step {step}", later=True, transno_from=step, if_uncommitted=step)

    def done(self, name: str) -> None:
        """The two pings that end a client's replays: MSG_REQ_REPLAY_DONE, MSG_LOCK_REPLAY_DONE."""
        c = self.clients[name]
        for flag in ("MSG_REQ_REPLAY_DONE", "MSG_LOCK_REPLAY_DONE"):
            self.send(name, c.request("OBD_PING", flags=C(flag)), ok(why=flag), flag, later=True)

    def body(self, name: str, opc: str, oid, expect: Expect, note: str, valid: int = 0, cond: dict | None = None,
             **fields) -> int:
        c = self.clients[name]
        return self.send(name, c.request(opc, [ost_body(oid, valid, **fields)]), expect, note, **(cond or {}))


def ok(transno="zero", why="", **kw):
    return reply(0, transno, requirement="TGT-TRANSNO-2" if transno == "nonzero" else "TGT-ERR-2", why=why, **kw)


def getattr_expect(size=0, mtime=0, mode=0, uid=0, gid=0, atime=0, ctime=0, requirement="TGT-OBJ-1"):
    bits = MD["FLSIZE"] | MD["FLATIME"] | MD["FLMTIME"] | MD["FLCTIME"] | MD["FLMODE"] | MD["FLUID"] | MD["FLGID"]
    return reply(0, requirement=requirement, why="getattr", struct="ost_body",
                 fields={"oa.o_size": size, "oa.o_atime": atime, "oa.o_mtime": mtime, "oa.o_ctime": ctime,
                         "oa.o_mode&4095": mode, "oa.o_uid": uid, "oa.o_gid": gid, f"oa.o_valid&{bits}": bits})


SCENARIOS = []


def scenario(id, title, requirements, cite, needs=("target",)):
    def wrap(fn):
        SCENARIOS.append((id, title, requirements, cite, needs, fn))
        return fn
    return wrap


# ---- connections ----------------------------------------------------------------------------

@scenario("target.conn.connect-ping", "a first connect gives a cookie and REPLAYABLE; a ping is answered REPLY 0 with pb_handle 0",
          ["TGT-CONN-1", "TGT-TRANSNO-2"], ["RULES CONN-3, CONN-6", "ldlm_lib.c: target_handle_connect"])
def _(s):
    s.connect("c1")
    c = s.clients["c1"]
    s.send("c1", c.request("OBD_PING"), ok(why="ping"), "ping")
    s.send("c1", c.request("OST_STATFS"), ok(why="statfs"), "statfs")


@scenario("target.conn.reconnect", "a reconnect with a higher pb_conn_cnt keeps the export and says RECONNECT",
          ["TGT-CONN-1"], ["RULES CONN-4, CONN-6", "ldlm_lib.c: target_handle_connect"])
def _(s):
    s.connect("c1")
    s.connect("c1", reconnect=True)
    s.body("c1", "OST_GETATTR", 1, reply("ENOENT", why="no such object"), "getattr after reconnect")


@scenario("target.conn.reconnect-same-count", "a reconnect with the stored pb_conn_cnt is refused ERR -EALREADY",
          ["TGT-CONN-2"], ["RULES CONN-4", "ldlm_lib.c: target_handle_connect"])
def _(s):
    s.connect("c1")
    c = s.clients["c1"]
    s.send("c1", c.request("OST_CONNECT", c.connect_buffers()), err("EALREADY", "TGT-CONN-2", "same pb_conn_cnt"),
           "reconnect, same count")


@scenario("target.conn.reconnect-lower-count", "a reconnect with a pb_conn_cnt below the stored one is dropped",
          ["TGT-CONN-2", "TGT-DROP-1"], ["RULES CONN-4", "service.c: ptlrpc_check_req"])
def _(s):
    s.connect("c1")
    s.connect("c1", reconnect=True)
    c = s.clients["c1"]
    s.send("c1", c.request("OST_CONNECT", c.connect_buffers(), conn_cnt=1), dropped("pb_conn_cnt 1 below 2"),
           "reconnect, lower count")


@scenario("target.conn.stale-count", "any request with a pb_conn_cnt below its export's is dropped",
          ["TGT-DROP-1", "TGT-CONN-2"], ["RULES CONN-4", "service.c: ptlrpc_check_req", "tgt_handler.c: process_req_last_xid"])
def _(s):
    s.connect("c1")
    s.connect("c1", reconnect=True)
    c = s.clients["c1"]
    s.send("c1", c.request("OBD_PING", conn_cnt=1), dropped("pb_conn_cnt 1 below 2"), "ping, old count")


@scenario("target.conn.not-connected", "a request with pb_handle 0 or an unknown cookie is refused ERR -ENOTCONN",
          ["TGT-CONN-2", "TGT-ERR-1"], ["RULES CONN-2", "tgt_handler.c: tgt_request_handle"])
def _(s):
    c = s.client("c1")
    s.send("c1", c.request("OST_GETATTR", [ost_body(1)]), err("ENOTCONN", "TGT-CONN-2", "never connected"), "getattr")
    s.connect("c1")
    s.send("c1", c.request("OST_GETATTR", [ost_body(1)], handle=0x5EED0000DEADBEEF),
           err("ENOTCONN", "TGT-CONN-2", "a cookie never issued"), "getattr, unknown cookie", handle_patch=False)


@scenario("target.conn.after-disconnect", "after OST_DISCONNECT the export's cookie is unknown (ERR -ENOTCONN)",
          ["TGT-CONN-2"], ["RULES CONN-2", "ldlm_lib.c: target_handle_disconnect"])
def _(s):
    s.connect("c1")
    c = s.clients["c1"]
    s.send("c1", c.request("OST_DISCONNECT"), ok(why="disconnect"), "disconnect")
    s.send("c1", c.request("OBD_PING"), err("ENOTCONN", "TGT-CONN-2", "disconnected"), "ping with the old cookie")


# ---- drops and early rejections -----------------------------------------------------------------

@scenario("target.drop.malformed", "undecodable requests, pb_type REPLY and an AT request with pb_timeout 0 get no reply",
          ["TGT-DROP-1"], ["RULES ERR-5, BODY-5, BODY-12", "service.c: ptlrpc_server_handle_req_in"])
def _(s):
    s.connect("c1")
    c = s.clients["c1"]
    xid, data = c.request("OBD_PING")
    s.send("c1", (xid, data[:40]), dropped("a truncated message"), "truncated")
    s.send("c1", c.request("OBD_PING", pb_type=C("PTL_RPC_MSG_REPLY")), dropped("pb_type REPLY"), "pb_type REPLY")
    s.send("c1", c.request("OBD_PING", timeout=0), dropped("AT with pb_timeout 0"), "pb_timeout 0")
    s.send("c1", c.request("OBD_PING"), ok(why="ping"), "ping still served")


def _rejection(opc_name, buffers, expect, note, **kw):
    def build(s):
        s.connect("c1")
        c = s.clients["c1"]
        s.send("c1", c.request(opc_name, buffers, **kw), expect, note)
    return build


for _id, _title, _req, _cite, _fn in [
    ("target.err.unknown-opcode", "an opcode outside every family is refused ERR -EOPNOTSUPP", "TGT-ERR-1",
     "RULES OPC-2; tgt_handler.c: tgt_handler_find_check",
     _rejection("OST_GETATTR", [ost_body(1)], err("EOPNOTSUPP", why="opcode 9999"), "opcode 9999", opc=9999)),
    ("target.err.wrong-version", "a wrong service version is refused ERR -EINVAL", "TGT-ERR-1",
     "RULES BODY-4; tgt_handler.c: tgt_request_handle",
     _rejection("OST_GETATTR", [ost_body(1)], err("EINVAL", why="LUSTRE_MDS_VERSION on OST_GETATTR"),
                "wrong version", version=C("LUSTRE_MDS_VERSION"))),
    ("target.err.short-body", "an ost_body shorter than 208 bytes is refused ERR -EFAULT", "TGT-ERR-1",
     "RULES ERR-3; tgt_handler.c: tgt_ost_body_unpack",
     _rejection("OST_GETATTR", [ost_body(1)[:100]], err("EFAULT", why="100-byte ost_body"), "short body")),
    ("target.err.object-id-0", "OBD_MD_FLID with object id 0 is refused ERR -EPROTO", "TGT-ERR-1",
     "RULES VALID-3; tgt_handler.c: tgt_validate_obdo",
     _rejection("OST_GETATTR", [ost_body(0)], err("EPROTO", why="object id 0"), "object id 0")),
    ("target.err.no-flid", "a HAS_BODY opcode without OBD_MD_FLID is refused ERR -EPROTO", "TGT-ERR-1",
     "RULES VALID-3; tgt_handler.c: tgt_ost_body_unpack",
     _rejection("OST_GETATTR", [ost_body(None, MD["FLGROUP"])], err("EPROTO", why="no FLID"), "no FLID")),
    ("target.err.bad-sequence", "an object in a sequence that is not IDIF, MDT0, normal or echo is refused ERR -EPROTO",
     "TGT-ERR-1", "RULES VALID-3; tgt_handler.c: tgt_validate_obdo",
     _rejection("OST_GETATTR", [ost_body(5, seq=1)], err("EPROTO", why="sequence 5"), "bad sequence")),
]:
    scenario(_id, _title, [_req], [_cite])(_fn)


@scenario("target.err.stale-xid", "a request whose XID is not above pb_last_xid is refused ERR -EPROTO",
          ["TGT-ERR-1"], ["RULES BODY-14", "tgt_handler.c: process_req_last_xid"])
def _(s):
    s.connect("c1")
    c = s.clients["c1"]
    xid = c.new_xid()
    s.send("c1", c.request("OBD_PING", xid=xid, last_xid=xid), err("EPROTO", why="XID = pb_last_xid"), "stale XID")


@scenario("target.err.replay-outside-recovery", "MSG_REPLAY outside recovery: ERR -ENODEV and the export is evicted",
          ["RCV-OUTSIDE-1", "TGT-ERR-1"], ["RULES ERR-3, TRANSNO-7", "service.c: ptlrpc_check_req"])
def _(s):
    s.connect("c1")
    c = s.clients["c1"]
    s.send("c1", c.request("OBD_PING", flags=C("MSG_REPLAY")), err("ENODEV", "RCV-OUTSIDE-1", "replay outside recovery"),
           "replay flag")
    s.send("c1", c.request("OBD_PING"), err("ENOTCONN", "RCV-OUTSIDE-1", "the export was evicted"), "ping after eviction")


@scenario("target.err.transno-outside-recovery", "a request with a non-zero pb_transno outside recovery: ERR -ENODEV, evicted",
          ["RCV-OUTSIDE-1"], ["RULES ERR-3", "service.c: ptlrpc_check_req"])
def _(s):
    s.connect("c1")
    c = s.clients["c1"]
    s.send("c1", c.request("OBD_PING", transno=0x100000005), err("ENODEV", "RCV-OUTSIDE-1", "pb_transno outside recovery"),
           "non-zero transno")
    s.send("c1", c.request("OBD_PING"), err("ENOTCONN", "RCV-OUTSIDE-1", "the export was evicted"), "ping after eviction")


# ---- handlers, transnos -------------------------------------------------------------------------

@scenario("target.obj.lifecycle", "create, setattr, getattr, punch, destroy: statuses, transnos and attributes",
          ["TGT-TRANSNO-2", "TGT-OBJ-1", "TGT-ERR-2", "TGT-TRANSNO-1"],
          ["RULES TRANSNO-1, TRANSNO-2, OPC-1, VALID-3", "ofd_dev.c: ofd_*_hdl"])
def _(s):
    s.connect("c1")
    s.body("c1", "OST_CREATE", 7, ok(why="create without REPLAY_CREATE"), "create")
    s.body("c1", "OST_CREATE", 7, reply("EEXIST", why="exists"), "create again")
    s.body("c1", "OST_SETATTR", 7, ok("nonzero", why="setattr"), "setattr mtime, mode, uid",
           MD["FLMTIME"] | MD["FLMODE"] | MD["FLUID"], o_mtime=1700000000, o_mode=0o100644, o_uid=500)
    s.body("c1", "OST_GETATTR", 7, getattr_expect(mtime=1700000000, mode=0o644, uid=500), "getattr")
    s.body("c1", "OST_PUNCH", 7, ok("nonzero", why="punch"), "punch to 4096", MD["FLSIZE"] | MD["FLBLOCKS"],
           o_size=4096, o_blocks=EOF)
    s.body("c1", "OST_GETATTR", 7, getattr_expect(size=4096, mtime=1700000000, mode=0o644, uid=500), "getattr")
    s.body("c1", "OST_SYNC", 7, ok(why="sync"), "sync")
    s.body("c1", "OST_DESTROY", 7, ok("nonzero", why="destroy"), "destroy")
    s.body("c1", "OST_GETATTR", 7, reply("ENOENT", why="destroyed"), "getattr")
    s.body("c1", "OST_SETATTR", 7, reply("ENOENT", why="a failed setattr runs no transaction"), "setattr, missing",
           MD["FLMTIME"], o_mtime=1)
    s.body("c1", "OST_DESTROY", 7, reply("ENOENT", why="destroyed"), "destroy again")


@scenario("target.obj.valid-bits", "SETATTR applies only the fields whose bits are set; FLTYPE is ignored",
          ["TGT-OBJ-1"], ["RULES VALID-1, VALID-3", "ofd_dev.c: ofd_setattr_hdl", "obdo_server.c: la_from_obdo"])
def _(s):
    s.connect("c1")
    s.body("c1", "OST_CREATE", 3, ok(why="create"), "create")
    s.body("c1", "OST_SETATTR", 3, ok("nonzero", why="setattr gid only"), "setattr FLGID, every other field noise",
           MD["FLGID"] | MD["FLTYPE"], o_gid=42, o_uid=999, o_mtime=123456, o_atime=654321, o_ctime=111,
           o_mode=0o040777, o_size=EOF)
    s.body("c1", "OST_GETATTR", 3, getattr_expect(gid=42), "getattr: only the gid changed")


@scenario("target.obj.refusals", "truncation by setattr (REPLY -EPERM), punch end not EOF (REPLY -EPROTO), punch without FLBLOCKS (ERR -EPROTO)",
          ["TGT-ERR-2", "TGT-ERR-3"], ["RULES VALID-3, ERR-1", "ofd_dev.c: ofd_setattr_hdl, ofd_punch_hdl"])
def _(s):
    s.connect("c1")
    s.body("c1", "OST_CREATE", 2, ok(why="create"), "create")
    s.body("c1", "OST_SETATTR", 2, reply("EPERM", why="truncation through setattr"), "setattr FLSIZE 4096",
           MD["FLSIZE"], o_size=4096)
    s.body("c1", "OST_PUNCH", 2, reply("EPROTO", why="end is not EOF"), "punch 0..4096",
           MD["FLSIZE"] | MD["FLBLOCKS"], o_size=0, o_blocks=4096)
    s.body("c1", "OST_PUNCH", 2, err("EPROTO", "TGT-ERR-2", "without FLBLOCKS: a serious error"), "punch, FLSIZE only",
           MD["FLSIZE"], o_size=0, o_blocks=EOF)
    s.body("c1", "OST_GETATTR", 2, getattr_expect(), "getattr: nothing changed")


@scenario("target.obj.readonly", "a read-only export gets REPLY -EROFS for modifying opcodes and is served otherwise",
          ["TGT-ERR-2"], ["RULES ERR-3", "tgt_handler.c: tgt_request_preprocess"])
def _(s):
    s.connect("c1")
    s.body("c1", "OST_CREATE", 4, ok(why="create"), "create (c1)")
    s.connect("c3", readonly=True)
    s.body("c3", "OST_SETATTR", 4, reply("EROFS", why="read-only"), "setattr (read-only c3)", MD["FLUID"], o_uid=1)
    s.body("c3", "OST_DESTROY", 4, reply("EROFS", why="read-only"), "destroy (read-only c3)")
    s.body("c3", "OST_GETATTR", 4, getattr_expect(), "getattr (read-only c3)")


@scenario("target.transno.replay-create", "OST_CREATE gets a transno only when OBD_CONNECT2_REPLAY_CREATE was negotiated",
          ["TGT-TRANSNO-2"], ["RULES TRANSNO-1, OPC-1", "ofd_dev.c: ofd_create_hdl"])
def _(s):
    s.connect("c1")
    s.connect("c2", replay_create=True)
    s.body("c1", "OST_CREATE", 1, ok(why="no REPLAY_CREATE"), "create (c1)")
    s.body("c2", "OST_CREATE", 2, ok("nonzero", why="REPLAY_CREATE"), "create (c2)")


@scenario("target.transno.two-clients", "transnos increase across interleaved clients",
          ["TGT-TRANSNO-1", "TGT-TRANSNO-3"], ["RULES TRANSNO-4, TRANSNO-5", "tgt_lastrcvd.c: tgt_last_rcvd_update"])
def _(s):
    s.connect("c1")
    s.connect("c2")
    s.body("c1", "OST_CREATE", 1, ok(why="create"), "create 1")
    s.body("c2", "OST_CREATE", 2, ok(why="create"), "create 2")
    for i in range(4):
        who, oid = ("c1", 1) if i % 2 == 0 else ("c2", 2)
        s.body(who, "OST_SETATTR", oid, ok("nonzero", why="setattr"), f"setattr {i}", MD["FLMTIME"], o_mtime=i + 1)
    s.body("c1", "OST_SYNC", 1, ok(why="sync"), "sync")
    s.body("c2", "OST_SETATTR", 2, ok("nonzero", why="setattr"), "setattr after sync", MD["FLMTIME"], o_mtime=9)


@scenario("target.resend.modify", "a resent setattr, punch and destroy get their original replies and do not run twice",
          ["TGT-RESEND-1"], ["RULES TRANSNO-8", "tgt_handler.c: tgt_check_resent"])
def _(s):
    s.connect("c1")
    c = s.clients["c1"]
    s.body("c1", "OST_CREATE", 5, ok(why="create"), "create")
    for opc, valid, fields in (("OST_SETATTR", MD["FLMTIME"], {"o_mtime": 77}),
                               ("OST_PUNCH", MD["FLSIZE"] | MD["FLBLOCKS"], {"o_size": 10, "o_blocks": EOF}),
                               ("OST_DESTROY", 0, {})):
        buf = ost_body(5, valid, **fields)
        xid, data = c.request(opc, [buf])
        c.unreplied.add(xid)          # the reply is "lost"
        first = s.send("c1", (xid, data), ok("nonzero", why=opc), f"{opc} (reply lost)")
        resent = c.request(opc, [buf], xid=xid, flags=C("MSG_RESENT"))
        c.unreplied.discard(xid)
        s.send("c1", resent, None, f"{opc} resent", same_as=first)
    s.body("c1", "OST_GETATTR", 5, reply("ENOENT", why="destroyed once"), "getattr")


@scenario("target.resend.after-reconnect", "a resend after a reconnect still gets the saved reply",
          ["TGT-RESEND-1", "TGT-CONN-1"], ["RULES TRANSNO-8, CONN-4", "tgt_handler.c: tgt_check_resent"])
def _(s):
    s.connect("c1")
    c = s.clients["c1"]
    s.body("c1", "OST_CREATE", 6, ok(why="create"), "create")
    buf = ost_body(6, MD["FLUID"], o_uid=1234)
    xid, data = c.request("OST_SETATTR", [buf])
    c.unreplied.add(xid)
    first = s.send("c1", (xid, data), ok("nonzero", why="setattr"), "setattr (reply lost)")
    s.connect("c1", reconnect=True)
    resent = c.request("OST_SETATTR", [buf], xid=xid, flags=C("MSG_RESENT"))
    c.unreplied.discard(xid)
    s.send("c1", resent, None, "setattr resent", same_as=first)


# ---- recovery (docs/target-rules.md §7) ----------------------------------------------------------

def _transaction(s, name, opc, oid, note, valid=0, **fields):
    return s.body(name, opc, oid, ok("nonzero", why=opc), note, valid, **fields)


@scenario("recovery.replay.one-client", "a restart, a reconnect with RECOVERING, replays answered with their own transnos, a new epoch after",
          ["RCV-CONN-1", "RCV-REPLAY-1", "RCV-EPOCH-1", "RCV-STATE-1"],
          ["RULES TRANSNO-4, TRANSNO-7, CONN-6", "ldlm_lib.c: target_handle_connect, target_recovery_thread",
           "tgt_lastrcvd.c: tgt_boot_epoch_update"], needs=("target", "restart"))
def _(s):
    s.connect("c1", replay_create=True)
    create = _transaction(s, "c1", "OST_CREATE", 1, "create")
    setattr_ = _transaction(s, "c1", "OST_SETATTR", 1, "setattr uid", MD["FLUID"], o_uid=77)
    punch = _transaction(s, "c1", "OST_PUNCH", 1, "punch to 100", MD["FLSIZE"] | MD["FLBLOCKS"], o_size=100, o_blocks=EOF)
    s.op("restart")
    s.connect("c1", recovering=True)
    for n in (create, setattr_, punch):
        s.replay("c1", n)
    s.done("c1")
    s.op("end_recovery")
    s.body("c1", "OST_GETATTR", 1, getattr_expect(size=100, uid=77, requirement="RCV-STATE-1"), "getattr: every replayed change is there")
    _transaction(s, "c1", "OST_SETATTR", 1, "a new transaction: a new epoch", MD["FLGID"], o_gid=5)


@scenario("recovery.replay.transno-order", "two clients replay in the wrong order; the target runs the replays in transno order",
          ["RCV-ORDER-1", "RCV-REPLAY-1", "RCV-STATE-1"],
          ["RULES TRANSNO-7", "ldlm_lib.c: target_queue_recovery_request, check_for_next_transno"],
          needs=("target", "restart"))
def _(s):
    s.connect("c1", replay_create=True)
    s.connect("c2", replay_create=True)
    create = _transaction(s, "c1", "OST_CREATE", 1, "create (c1)")
    first = _transaction(s, "c1", "OST_SETATTR", 1, "setattr mtime 10 (c1)", MD["FLMTIME"], o_mtime=10)
    second = _transaction(s, "c2", "OST_SETATTR", 1, "setattr mtime 20 (c2)", MD["FLMTIME"], o_mtime=20)
    s.op("restart")
    s.connect("c2", recovering=True)
    s.connect("c1", recovering=True)
    s.replay("c2", second)                 # the higher transno arrives first: it must wait
    s.replay("c1", create)
    s.replay("c1", first)
    s.done("c1")
    s.done("c2")
    s.op("end_recovery")
    s.body("c1", "OST_GETATTR", 1, getattr_expect(mtime=20, requirement="RCV-ORDER-1"), "getattr: c2's later setattr won")


@scenario("recovery.client-never-returns", "a client that never comes back is evicted when recovery ends; the others' replays stand",
          ["RCV-STATE-1", "RCV-EPOCH-1", "TGT-CONN-2"],
          ["RULES TRANSNO-7", "ldlm_lib.c: target_recovery_overseer (eviction of stale clients)"],
          needs=("target", "restart"))
def _(s):
    s.connect("c1", replay_create=True)
    s.connect("c2", replay_create=True)
    create = _transaction(s, "c1", "OST_CREATE", 1, "create 1 (c1)")
    setattr_ = _transaction(s, "c1", "OST_SETATTR", 1, "setattr gid (c1)", MD["FLGID"], o_gid=9)
    create2 = _transaction(s, "c2", "OST_CREATE", 2, "create 2 (c2)")
    s.op("restart")
    s.connect("c1", recovering=True)
    s.replay("c1", create)
    s.replay("c1", setattr_)
    s.done("c1")
    s.op("end_recovery")
    s.body("c1", "OST_GETATTR", 1, getattr_expect(gid=9, requirement="RCV-STATE-1"), "getattr: c1's replays stand")
    s.body("c1", "OST_GETATTR", 2, reply("ENOENT", requirement="RCV-STATE-1", why="c2's uncommitted create is gone"),
           "getattr 2: lost with c2", cond={"if_lost": create2})
    s.body("c1", "OST_GETATTR", 2, getattr_expect(requirement="RCV-STATE-1"), "getattr 2: committed before the restart",
           cond={"if_committed": create2})
    c2 = s.clients["c2"]
    s.send("c2", c2.request("OBD_PING"), err("ENOTCONN", "TGT-CONN-2", "c2 was evicted at the end of recovery"),
           "c2 comes back too late")


@scenario("recovery.filter", "during recovery: GETATTR and STATFS refused ERR -EAGAIN, a new client refused ERR -EBUSY",
          ["RCV-FILTER-1", "RCV-CONN-1"], ["RULES OPC-4, CONN-8", "tgt_handler.c: tgt_filter_recovery_request",
                                         "ldlm_lib.c: target_handle_connect"], needs=("target", "restart"))
def _(s):
    s.connect("c1", replay_create=True)
    create = _transaction(s, "c1", "OST_CREATE", 1, "create")
    s.op("restart")
    s.connect("c1", recovering=True)
    c1 = s.clients["c1"]
    s.send("c1", c1.request("OST_GETATTR", [ost_body(1)]), err("EAGAIN", "RCV-FILTER-1", "GETATTR during recovery"), "getattr")
    s.send("c1", c1.request("OST_STATFS"), err("EAGAIN", "RCV-FILTER-1", "STATFS during recovery"), "statfs")
    c3 = s.client("c3")
    s.send("c3", c3.connect(), err("EBUSY", "RCV-CONN-1", "a new client during recovery"), "a new client connects")
    s.replay("c1", create)
    s.done("c1")
    s.op("end_recovery")
    s.body("c1", "OST_GETATTR", 1, getattr_expect(), "getattr after recovery")


@scenario("recovery.claimed-transno", "a replay whose transno another client already replayed is dropped",
          ["RCV-CLAIMED-1"], ["RULES ERR-5, TRANSNO-7", "ldlm_lib.c: target_queue_recovery_request"],
          needs=("target", "restart"))
def _(s):
    s.connect("c1", replay_create=True)
    s.connect("c2", replay_create=True)
    create = _transaction(s, "c1", "OST_CREATE", 1, "create (c1)")
    setattr_ = _transaction(s, "c1", "OST_SETATTR", 1, "setattr (c1)", MD["FLUID"], o_uid=3)
    s.op("restart")
    s.connect("c1", recovering=True)
    s.connect("c2", recovering=True)
    s.replay("c1", create)
    s.replay("c1", setattr_)
    c2 = s.clients["c2"]
    msg_buf = ost_body(1, MD["FLUID"], o_uid=4)
    s.send("c2", c2.request("OST_SETATTR", [msg_buf], flags=C("MSG_REPLAY")), dropped("transno claimed by c1"),
           "c2 replays c1's transno", transno_from=setattr_, if_uncommitted=setattr_)
    s.done("c1")
    s.done("c2")
    s.op("end_recovery")
    s.body("c1", "OST_GETATTR", 1, getattr_expect(uid=3, requirement="RCV-CLAIMED-1"), "getattr: c1's setattr, not c2's claim")


@scenario("recovery.vbr-mismatch", "a replayed setattr whose pre-version differs from the object's version gets REPLY -EOVERFLOW",
          ["RCV-VBR-1"], ["RULES TRANSNO-9", "ofd_dev.c: ofd_version_get_check"], needs=("target", "restart"))
def _(s):
    s.connect("c1", replay_create=True)
    create = _transaction(s, "c1", "OST_CREATE", 1, "create")
    setattr_ = _transaction(s, "c1", "OST_SETATTR", 1, "setattr", MD["FLUID"], o_uid=8)
    s.op("restart")
    s.connect("c1", recovering=True)
    s.replay("c1", create)
    s.replay("c1", setattr_, Expect(type=REPLY_T, status=-spec_errno("EOVERFLOW"), transno="zero",
                                    requirement="RCV-VBR-1", why="pb_pre_versions[0] 0xdead0000 is not the object's version"),
             pre_version=0xDEAD0000)
    s.op("end_recovery")
    c1 = s.clients["c1"]
    s.send("c1", c1.request("OBD_PING"), err("ENOTCONN", "RCV-VBR-1", "a client whose replay failed VBR is evicted"),
           "ping after recovery")
    s.live.discard("c1")
    s.connect("c1")
    s.body("c1", "OST_GETATTR", 1, getattr_expect(requirement="RCV-VBR-1"), "getattr: the mismatched setattr did not run",
           cond={"if_lost": setattr_})
    s.body("c1", "OST_GETATTR", 1, getattr_expect(uid=8, requirement="RCV-STATE-1"),
           "getattr: the setattr was committed before the restart",
           cond={"if_committed": setattr_})


@scenario("recovery.committed-survives", "what OST_SYNC committed survives a restart with nothing to replay",
          ["RCV-STATE-1"], ["RULES TRANSNO-5, TRANSNO-6", "ofd_dev.c: ofd_sync_hdl"], needs=("target", "restart"))
def _(s):
    s.connect("c1", replay_create=True)
    create = _transaction(s, "c1", "OST_CREATE", 1, "create")
    setattr_ = _transaction(s, "c1", "OST_SETATTR", 1, "setattr uid and mtime", MD["FLUID"] | MD["FLMTIME"], o_uid=31,
                            o_mtime=1234)
    punch = _transaction(s, "c1", "OST_PUNCH", 1, "punch to 4000", MD["FLSIZE"] | MD["FLBLOCKS"], o_size=4000, o_blocks=EOF)
    s.body("c1", "OST_SYNC", 1, ok(why="sync: commits everything"), "sync")
    s.op("restart")
    s.connect("c1", recovering=True)
    for n in (create, setattr_, punch):
        s.replay("c1", n)           # skipped: a client does not replay what it knows committed
    s.done("c1")
    s.op("end_recovery")
    s.body("c1", "OST_GETATTR", 1, getattr_expect(size=4000, uid=31, mtime=1234, requirement="RCV-STATE-1"),
           "getattr: the synced changes survived")


def make_text(_spec) -> str:
    out = []
    for id, title, reqs, cite, needs, fn in SCENARIOS:
        s = Script()
        fn(s)
        out.append(Scenario(id, title, tuple(reqs), tuple(cite), s.steps, tuple(needs)))
    header = ("# Generated by tools/gen_scenarios.py: do not edit; change the generator and rerun it.\n"
              "# Scenario vectors for targets (docs/scenarios.md, docs/target-rules.md).\n")
    return header + dump_file(out)


if __name__ == "__main__":
    sys.exit(regen.main(sys.argv[1:], tool="gen_scenarios", doc=__doc__, output=OUTPUT, root=ROOT,
                        make_text=make_text))
