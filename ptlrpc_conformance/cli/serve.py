"""`ptlrpc-conformance serve`: a target IUT served as an OST on LNet over TCP
(harness/transport/lnet_serve.py; docs/lnet-tcp.md, "serve")."""
from __future__ import annotations

import signal
import sys

from ptlrpc_conformance.cli.common import iut_preflight
from ptlrpc_conformance.harness import options
from ptlrpc_conformance.harness.options import EXIT_IUT, EXIT_OK, EXIT_USAGE, Parser


def cmd_serve(argv: list[str]) -> int:
    """Serve a target IUT to LNet peers until `stop` on the control socket, SIGTERM or Ctrl-C."""
    from ptlrpc_conformance.harness.transport import lnet_serve
    from ptlrpc_conformance.harness.transport.lnet_engine.wire import Nid
    p = Parser(prog="ptlrpc-conformance serve",
               description="Serve a target IUT as an OST over LNet TCP (socklnd): requests PUT to the OST "
                           "portals are exchanged with the IUT, replies PUT back on the reply portal.")
    p.add_argument("--listen", required=True, metavar="ADDR:PORT",
                   help="the address and port to accept LNet connections on (Lustre's is 988; port 0: any free "
                        "port, printed at start)")
    p.add_argument("--nid", metavar="NID", help="this node's NID, which peers' acceptor requests must name "
                                               "(default: ADDR@tcp)")
    p.add_argument("--accept-all", action="store_true",
                   help="accept peers on unprivileged source ports (like lnet's accept=all); by default only "
                        "ports 512-1023 are accepted, as accept=secure does")
    p.add_argument("--control", metavar="PATH",
                   help="a Unix socket for the control operations (JSON Lines {\"op\": NAME}: status, reset, "
                        "restart, end_recovery, stop)")
    p.add_argument("--control-port", type=int, metavar="PORT",
                   help="the same on a TCP port of 127.0.0.1 (0: any free port, printed at start)")
    p.add_argument("--pcap", metavar="FILE", help="record every byte of every LNet connection in FILE, as TCP/IPv4 "
                                                  "frames (the server's port written as 988), for check-trace and Wireshark")
    options.add_arguments(p, options.command_options("decode"))      # --iut and --iut-timeout
    args = p.parse_args(argv)
    try:
        host, port = lnet_serve.parse_listen(args.listen)
        nid = Nid.parse(args.nid) if args.nid else lnet_serve.default_nid(host)
    except ValueError as e:
        p.error(f"--listen/--nid: {e}")
    if args.control and args.control_port is not None:
        p.error("--control and --control-port: give one of them")
    if args.control_port is not None and not 0 <= args.control_port <= 65535:
        p.error(f"--control-port: {args.control_port} is not a TCP port")
    status, adapter = iut_preflight(args.iut, args.iut_timeout)
    if status is not None:
        return status
    try:
        if not adapter.supports("target"):
            print(f"ptlrpc-conformance: --iut {args.iut!r} does not declare capability 'target': it cannot "
                  "be served as an OST", file=sys.stderr)
            return EXIT_IUT
        try:
            server = lnet_serve.Server(adapter, nid, host, port, accept_all=args.accept_all, log=sys.stderr)
            if args.pcap:
                from ptlrpc_conformance.harness.transport.lnet_engine.tap import PcapTap
                server.node.tap = PcapTap(args.pcap)         # every connection the listener accepts
            control = None
            if args.control or args.control_port is not None:
                control = lnet_serve.ControlSocket(server, path=args.control, port=args.control_port)
        except OSError as e:
            print(f"ptlrpc-conformance: serve cannot listen: {e}", file=sys.stderr)
            return EXIT_USAGE
        return _run(server, control, args.iut)
    finally:
        adapter.close()


def _run(server, control, iut: str) -> int:
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: server.stopped.set())
    server.start()
    if control is not None:
        control.start()
    addr = server.address
    print(f"serving {iut} as {server.node.nid} on {addr[0]}:{addr[1]}"
          + (f", control {control.address}" if control is not None else ""), flush=True)
    try:
        while not server.stopped.wait(0.5):
            pass
    finally:
        server.close()
        if control is not None:
            control.close()
        if server.node.tap is not None:
            server.node.tap.close()
    print("serve: stopped", file=sys.stderr, flush=True)
    return EXIT_OK
