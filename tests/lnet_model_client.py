"""The suite's model client (client_models.py), or one of its broken clients, run as a process
that speaks LNet over TCP to a served OST: what `certify --client` runs in the tests.

    python3 tests/lnet_model_client.py --addr {addr} --port {port} [--bug NAME] [--ops N]

It connects from an unprivileged port (the suite's serve accepts any: --accept-all), PUTs each
request to the OST's request portal with its XID as the match bits and waits for the reply on
the OSC reply portal; a reply that does not come within --timeout is lost, and the client does
what client_models.py's clients do then.  The target's restarts are the suite's: the client
sees its connection drop.
"""
from __future__ import annotations

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import client_models  # noqa: E402
from ptlrpc_conformance import spec  # noqa: E402
from ptlrpc_conformance.harness.ost import wire  # noqa: E402
from ptlrpc_conformance.harness.transport.lnet_engine.node import Node  # noqa: E402
from ptlrpc_conformance.harness.transport.lnet_engine.wire import C, Nid  # noqa: E402

OST_PORTAL = next(p for p, row in spec.target()["portals"]["requests"].items()
                  if row["name"] == "OST_REQUEST_PORTAL")
REPLY_PORTAL = spec.lnet()["portals"]["OSC_REPLY_PORTAL"]["value"]


class LnetNet:
    """client_models.Net's part for a client: a request sent over LNet, its reply or None."""

    def __init__(self, addr: str, port: int, timeout: float):
        self.addr, self.port, self.timeout = addr, port, timeout
        self.node = Node(Nid.parse("127.0.0.2@tcp"), pid=os.getpid() | C["LNET_PID_USERFLAG"],
                         stall_timeout=timeout * 4, send_timeout=timeout * 4)
        self.peer = Nid.parse(f"{addr}@tcp")
        self.events: list = []          # unused: the suite records the conversation

    def send(self, xid: int, data: bytes, faultable: bool = False) -> wire.Message | None:
        out = self.node.connect(self.addr, self.peer, self.port, privileged=False)
        if not out.ok:
            return None
        rep = out.connection.exchange(OST_PORTAL, xid, data, reply_portal=REPLY_PORTAL, timeout=self.timeout,
                                      max_wait=self.timeout * 4)
        if not rep.ok:
            return None
        return wire.try_parse(rep.reply.payload, "reply")[0]


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--addr", required=True)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--bug", choices=[c.__name__ for c in client_models.ZOO], help="run this broken client")
    p.add_argument("--ops", type=int, default=24, help="creates and pings of the workload")
    p.add_argument("--seed", type=int, default=0, help="which of creates and pings, in which order")
    p.add_argument("--timeout", type=float, default=0.5, help="seconds a reply is waited for")
    args = p.parse_args(argv)
    cls = next((c for c in client_models.ZOO if c.__name__ == args.bug), client_models.ModelClient)
    net = LnetNet(args.addr, args.port, args.timeout)
    try:
        client_models.workload(cls(net), args.seed, args.ops)
    finally:
        net.node.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
