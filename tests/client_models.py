"""The suite's own model client, the conversations it holds with the in-process reference
target under a fault schedule chosen from a seed, and the zoo of broken clients (one bug each)
that the client judge (ptlrpc_conformance/harness/ost/client_judge.py) must kill.

`ModelClient` is one import of a Lustre client as lustre/ptlrpc's client code behaves
(docs/client-rules.md): XIDs from one counter; a request whose reply never came is resent with
the same XID and MSG_RESENT after a reconnect (ptlrpc_expire_one_request, ptlrpc_fail_import);
ERR -ENOTCONN/-ENODEV makes it reconnect, then resend; -EINPROGRESS makes it resend with a new
XID and MSG_RESENT; every connect counts one more; a reconnect to a recovering target replays
the uncommitted requests in transno order, then sends OBD_PING with MSG_REQ_REPLAY_DONE |
MSG_LOCK_REPLAY_DONE.  A reconnect answered with a new export handle and no
MSG_CONNECT_RECOVERING, by a target that holds state of it (a reply with a transno came since
its first connect), finds it evicted (import.c: ptlrpc_connect_interpret sets
LUSTRE_IMP_EVICTED): the request in flight fails and is not resent, and the requests kept for
replay are freed (ptlrpc_invalidate_import, ptlrpc_abort_inflight, ptlrpc_free_committed frees
those of an older import generation).  It packs its requests with the suite's own packer
(harness/ost/client.py).

`converse(client_class, seed)` runs a workload (creates and pings) against a fresh reference
`Target`, injects the faults the seed chooses (a dropped request or reply, a reply delayed
past the client's timeout, an -EINPROGRESS answer, a target restart) and returns the
conversation: what `client_judge.judge` reads.
"""
from __future__ import annotations

import random

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.ost import client_judge as cj, wire
from ptlrpc_conformance.harness.ost.client import Client, ost_body
from ptlrpc_conformance.harness.ost.steps import connect_cookie
from ptlrpc_conformance.reference.target import Target, TargetConfig

TRIES = 8                 # bound of every retry loop
FAULTS = ("drop-request", "drop-reply", "delay", "einprogress")


class Net:
    """The suite between the client and the target: it forwards each request to the target
    (unless the schedule drops it), delivers the reply (unless the schedule drops or delays it)
    and records the conversation."""

    def __init__(self, seed: int, faults: bool = True):
        self.target = Target(TargetConfig())
        self.rng = random.Random(seed)
        self.faults = faults
        self.events: list = []

    def restart(self) -> None:
        self.target.restart()
        self.events.append(cj.Restart())

    def send(self, xid: int, data: bytes, faultable: bool = False) -> wire.Message | None:
        fault = ""
        if faultable and self.faults and self.rng.random() < 0.3:
            fault = self.rng.choice(FAULTS)
        reply = None
        if fault == "einprogress":
            reply = einprogress_reply(data)
        elif fault != "drop-request":
            out = self.target.exchange(data, xid, "model@tcp")
            reply = bytes.fromhex(out["data"]) if out.get("data") else None
            if fault in ("drop-reply", "delay"):
                reply = None
        self.events.append(cj.Sent(xid, data, reply, fault))
        return wire.parse(reply, "reply") if reply is not None else None


def einprogress_reply(request: bytes) -> bytes:
    """The ERR reply -EINPROGRESS the suite answers in the target's place."""
    req = wire.parse(request, "request")
    return wire.pack_message([wire.pack_body({
        "pb_type": wire.ERR, "pb_version": req.body["pb_version"], "pb_opc": req.body["pb_opc"],
        "pb_status": -spec.errno_value("EINPROGRESS"), "pb_handle": req.body["pb_handle"]})])


class Gone(Exception):
    """The client could not get its work done within its bounds (a broken client may)."""


class ModelClient:
    """A correct client (see the module's docstring)."""

    def __init__(self, net: Net):
        self.net = net
        self.c = Client("model", handle=0x5EED_0000_0001, replay_create=True)
        self.replay: dict[int, tuple[str, list[bytes], int]] = {}   # xid -> (opc, buffers, transno)
        self.committed = 0
        self.cached = False         # a reply with a transno came (import.c: IMPF_NO_CACHED_DATA cleared)
        self.evicted = False        # the last reconnect found the client evicted

    # -- sending -------------------------------------------------------------------------
    def new_xid(self) -> int:
        return self.c.new_xid()

    def transmit(self, xid: int, opc: str, buffers, flags: int = 0, transno: int = 0,
                 faultable: bool = False) -> wire.Message | None:
        _, data = self.c.request(opc, list(buffers), xid=xid, flags=flags, transno=transno,
                                 handle=self.handle_for(opc, flags))
        return self.net.send(xid, data, faultable)

    def handle_for(self, opc: str, flags: int) -> int | None:
        return None                               # the export handle of the last connect reply

    def call(self, opc: str, buffers=()) -> wire.Message | None:
        """One request of the workload, until it is answered (bounded)."""
        xid = self.new_xid()
        self.c.unreplied.add(xid)
        flags = 0
        for _ in range(TRIES):
            rep = self.transmit(xid, opc, buffers, flags, faultable=True)
            if rep is None:                                   # timed out: reconnect, resend
                self.reconnect()
            elif rep.body["pb_type"] == wire.ERR and rep.status in cj.RECOVERABLE:
                self.on_notconn(xid, opc, buffers)
            if self.evicted:                                  # the request fails (-EIO): not resent
                self.evicted = False
                self.c.unreplied.discard(xid)
                return None
            if rep is None or rep.body["pb_type"] == wire.ERR and rep.status in cj.RECOVERABLE:
                flags = self.resent_flag()
                continue
            if rep.status == cj.EINPROGRESS:
                self.c.unreplied.discard(xid)
                xid = self.einprogress_xid(xid)
                self.c.unreplied.add(xid)
                flags = self.resent_flag()
                continue
            self.c.unreplied.discard(xid)
            self.after_reply(xid, opc, buffers, rep)
            return rep
        raise Gone(f"{opc} XID {xid:#x} never answered")

    def resent_flag(self) -> int:
        return cj.MSG_RESENT

    def einprogress_xid(self, xid: int) -> int:
        return self.new_xid()

    def on_notconn(self, xid, opc, buffers) -> None:
        self.reconnect()

    def after_reply(self, xid: int, opc: str, buffers, rep: wire.Message) -> None:
        committed = rep.body["pb_last_committed"]
        transno = rep.body["pb_transno"]
        self.cached = self.cached or bool(transno)
        if transno and transno > committed:
            self.replay[xid] = (opc, list(buffers), transno)
        self.committed = max(self.committed, committed)
        self.free_committed()

    def free_committed(self) -> None:
        self.replay = {x: r for x, r in self.replay.items() if r[2] > self.committed}

    # -- connecting and recovery -----------------------------------------------------------
    def connect_request(self) -> tuple[int, bytes]:
        """The next connect attempt: one more in the count, the handle (or MSG_CONNECT_INITIAL)."""
        return self.c.connect()

    def reconnect(self) -> None:
        for _ in range(TRIES):
            xid, data = self.connect_request()
            rep = self.net.send(xid, data)
            cookie = connect_cookie(rep)
            if cookie is None:
                continue
            self.note_eviction(rep, cookie)
            self.c.cookie = cookie
            self.c.learn_grant(rep)
            self.committed = max(self.committed, rep.body["pb_last_committed"])
            self.free_committed()
            if rep.body["pb_op_flags"] & cj.CONNECT_RECOVERING:
                self.recover()
            return
        raise Gone("no connect succeeded")

    def note_eviction(self, rep: wire.Message, cookie: int) -> None:
        """Whether a successful connect reply says the target evicted the client
        (ptlrpc_connect_interpret): a reconnect answered with another handle and no
        MSG_CONNECT_RECOVERING, or with neither MSG_CONNECT_RECONNECT nor MSG_CONNECT_RECOVERING
        while the client holds data (IMPF_NO_CACHED_DATA clear).  Evicted, it drops its replays."""
        flags = rep.body["pb_op_flags"]
        if not self.c.cookie or flags & cj.CONNECT_RECOVERING:
            return
        if cookie != self.c.cookie if flags & cj.CONNECT_RECONNECT else self.cached:
            self.evicted = True
            self.replay.clear()

    def replay_order(self) -> list[int]:
        return sorted(self.replay, key=lambda x: self.replay[x][2])

    def recover(self) -> None:
        for xid in self.replay_order():
            opc, buffers, transno = self.replay[xid]
            self.c.unreplied.add(xid)
            flags = cj.MSG_REPLAY
            for _ in range(TRIES):
                rep = self.transmit(xid, opc, buffers, flags, transno)
                if rep is not None:
                    break
                flags |= cj.MSG_RESENT
            self.c.unreplied.discard(xid)
            if rep is not None:
                self.committed = max(self.committed, rep.body["pb_last_committed"])
        self.free_committed()
        self.replay_done()

    def replay_done(self) -> None:
        xid = self.new_xid()
        self.c.unreplied.add(xid)
        self.transmit(xid, "OBD_PING", (), cj.REQ_REPLAY_DONE | cj.LOCK_REPLAY_DONE)
        self.c.unreplied.discard(xid)

    # -- the workload ----------------------------------------------------------------------
    def create(self, n: int):
        return self.call("OST_CREATE", [ost_body(n)])

    def ping(self):
        return self.call("OBD_PING")


def converse(client_class=ModelClient, seed: int = 0, ops: int = 24, faults: bool = True) -> list:
    """The conversation of a `client_class` client with a fresh reference target: a connect,
    then `ops` creates and pings, with the faults and restarts `seed` chooses."""
    net = Net(seed, faults)
    workload(client_class(net), seed, ops, net.restart if faults else None)
    return net.events


def workload(client: ModelClient, seed: int = 0, ops: int = 24, restart=None) -> None:
    """A client's work: a connect, then `ops` creates and pings (which, `seed` chooses), and
    the target restarted by `restart` (when given) at points `seed` chooses.  A client that
    cannot get its work done stops (what it sent is judged all the same)."""
    rng = random.Random(seed ^ 0x5EED)
    try:
        client.reconnect()
        restarts, made = 0, 0
        for _ in range(ops):
            if restart is not None and restarts < 2 and made and rng.random() < 0.15:
                restart()
                restarts += 1
            if rng.random() < 0.7:
                made += 1
                client.create(made)
            else:
                client.ping()
    except Gone:
        pass


# ---- the zoo: one bug each, and the requirement it breaks -------------------------------
class ReusesXid(ModelClient):
    """Its second ping reuses the XID of its first, which was answered."""
    breaks = "CLI-XID-1"
    pings = 0
    first_ping = 0

    def ping(self):
        self.pings += 1
        if self.pings == 1:
            self.first_ping = self.c.next_xid
        elif self.pings == 2:
            # only the ping's first XID is the stale one; a retry's new XID is fresh
            self.new_xid = lambda: (self.__dict__.pop("new_xid"), self.first_ping)[1]
        try:
            return super().ping()
        finally:
            self.__dict__.pop("new_xid", None)


class ResendsWithoutResent(ModelClient):
    """A resend after a lost reply or an -ENOTCONN keeps the XID but not MSG_RESENT."""
    breaks = "CLI-RESEND-1"

    def call(self, opc, buffers=()):
        self.resent_flag = lambda: 0
        return super().call(opc, buffers)

    def einprogress_xid(self, xid):
        self.resent_flag = lambda: cj.MSG_RESENT       # the -EINPROGRESS retry is right
        return super().einprogress_xid(xid)


class ReplaysOutOfOrder(ModelClient):
    """Replays the highest transno first."""
    breaks = "CLI-REPLAY-2"

    def replay_order(self):
        return super().replay_order()[::-1]


class ReplaysCommitted(ModelClient):
    """Never frees a committed request: replays it too."""
    breaks = "CLI-REPLAY-3"

    def after_reply(self, xid, opc, buffers, rep):
        transno = rep.body["pb_transno"]
        if transno:
            self.replay[xid] = (opc, list(buffers), transno)
        self.committed = max(self.committed, rep.body["pb_last_committed"])

    def free_committed(self):
        pass


class NeverSaysReplayDone(ModelClient):
    """Goes back to work after its replays without MSG_REQ_REPLAY_DONE."""
    breaks = "CLI-REPLAY-4"

    def replay_done(self):
        pass


class ReplaysOnlyTheLast(ModelClient):
    """Replays only its newest uncommitted request."""
    breaks = "CLI-REPLAY-1"

    def replay_order(self):
        return super().replay_order()[-1:]


class KeepsConnCnt(ModelClient):
    """Counts its first connect only: every reconnect keeps pb_conn_cnt."""
    breaks = "CLI-CONN-2"

    def connect_request(self):
        # from 2 on (a target in recovery refuses pb_conn_cnt 1 with -EALREADY), never counted again
        self.c.conn_cnt = 1
        return super().connect_request()


class ReconnectsAsNew(ModelClient):
    """Every connect carries MSG_CONNECT_INITIAL and no handle."""
    breaks = "CLI-CONN-1"

    def reconnect(self):
        self.c.cookie = 0
        super().reconnect()


class ConnectCarriesLastXid(ModelClient):
    """A connect carries pb_last_xid like any other request."""
    breaks = "CLI-LASTXID-1"

    def reconnect(self):
        request = self.c.request

        def with_last_xid(opc, buffers=(), **kw):
            if opc == "OST_CONNECT":
                kw["last_xid"] = self.c.last_xid()
            return request(opc, buffers, **kw)
        self.c.request = with_last_xid
        try:
            super().reconnect()
        finally:
            del self.c.request


class ResendsBeforeReconnecting(ModelClient):
    """After ERR -ENOTCONN it resends the request once before reconnecting."""
    breaks = "CLI-ERR-1"

    def on_notconn(self, xid, opc, buffers):
        self.transmit(xid, opc, buffers, cj.MSG_RESENT)
        self.reconnect()


class EinprogressKeepsXid(ModelClient):
    """Retries a request answered -EINPROGRESS with the same XID."""
    breaks = "CLI-ERR-2"

    def einprogress_xid(self, xid):
        return xid


class StaleHandle(ModelClient):
    """Its workload pings carry the export handle of its first connect, whatever the
    reconnects since gave it."""
    breaks = "CLI-CONN-3"
    first = 0

    def handle_for(self, opc, flags):
        self.first = self.first or self.c.cookie
        return self.first if opc == "OBD_PING" and not flags & cj.REQ_REPLAY_DONE else None


ZOO = (ReusesXid, ResendsWithoutResent, ReplaysOutOfOrder, ReplaysCommitted, NeverSaysReplayDone,
       ReplaysOnlyTheLast, KeepsConnCnt, ReconnectsAsNew, ConnectCarriesLastXid,
       ResendsBeforeReconnecting, EinprogressKeepsXid, StaleHandle)
