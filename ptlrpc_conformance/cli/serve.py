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
                        "restart, end_recovery, fault, stop)")
    p.add_argument("--control-port", type=int, metavar="PORT",
                   help="the same on a TCP port of 127.0.0.1 (0: any free port, printed at start)")
    p.add_argument("--no-mgs", action="store_true",
                   help="serve no MGS; by default serve also answers as the file system's MGS on portal 26 "
                        "(MGS_CONNECT and the config log reads a client uses to find the OST; not judged)")
    p.add_argument("--target-uuid", metavar="UUID", default=lnet_serve.DEFAULT_TARGET_UUID,
                   help="the OST's UUID that the MGS's client config log names (FSNAME-OSTxxxx_UUID; default "
                        "%(default)s, the reference's)")
    p.add_argument("--fault", action="append", default=[], metavar="KIND[=VALUE]",
                   help="put a fault on the target's replies, repeatable: drop, delay=MS, early[=N], reset[=BYTES], "
                        "noop[=N], error=ERRNO, evict (the client's export, before its request) (docs/lnet-tcp.md); also "
                        "set at run time on the control socket")
    p.add_argument("--fault-probability", type=float, default=1.0, metavar="P",
                   help="the chance each --fault falls on a reply (default 1: every reply)")
    p.add_argument("--fault-seed", type=int, default=0, metavar="N",
                   help="the seed of the draws of --fault-probability (default 0)")
    p.add_argument("--request-log", metavar="FILE",
                   help="write one JSON line per request received (client, portal, xid, opcode, bytes)")
    p.add_argument("--pcap", metavar="FILE", help="record every byte of every LNet connection in FILE, as TCP/IPv4 "
                                                  "frames (the server's port written as 988), for check-trace and Wireshark")
    options.add_arguments(p, options.command_options("decode"))      # --iut and --iut-timeout
    args = p.parse_args(argv)
    try:
        faults = [lnet_serve.Fault.parse(f, args.fault_probability) for f in args.fault]
    except ValueError as e:
        p.error(str(e))
    if not args.no_mgs:
        from ptlrpc_conformance.harness.transport.lnet_mgs import ost_of
        try:
            ost_of(args.target_uuid)
        except ValueError as e:
            p.error(f"--target-uuid: {e}")
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
            request_log = open(args.request_log, "w", encoding="utf-8") if args.request_log else None
        except OSError as e:
            print(f"ptlrpc-conformance: serve: --request-log: {e}", file=sys.stderr)
            return EXIT_USAGE
        try:
            server = lnet_serve.Server(adapter, nid, host, port, accept_all=args.accept_all, log=sys.stderr,
                                       mgs=None if args.no_mgs else args.target_uuid, faults=faults,
                                       fault_seed=args.fault_seed, request_log=request_log)
            if args.pcap:
                from ptlrpc_conformance.harness.transport.lnet_engine.tap import PcapTap
                server.node.tap = PcapTap(args.pcap)         # every connection the listener accepts
            control = None
            if args.control or args.control_port is not None:
                control = lnet_serve.ControlSocket(server, path=args.control, port=args.control_port)
        except OSError as e:
            print(f"ptlrpc-conformance: serve cannot listen: {e}", file=sys.stderr)
            return EXIT_USAGE
        try:
            return _run(server, control, args.iut)
        finally:
            if request_log is not None:
                request_log.close()
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
          + (f", MGS of {server.mgs.fsname} naming {server.mgs.target_uuid}" if server.mgs is not None else "")
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
