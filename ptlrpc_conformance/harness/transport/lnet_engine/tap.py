"""A pcap tap: every byte an LNet connection sends and receives, written as it passes as
synthetic TCP frames (pcap.py's writer: Ethernet, IPv4 or IPv6 as the connection is, correct
checksums and sequence numbers), so that `check-trace` can re-judge the file and Wireshark can dissect it.

`PcapTap(path).wrap(sock, server_side)` returns a socket that behaves as `sock` does and writes
each segment it sends or receives, from the side that sent it: the TCP handshake when it is
wrapped, the acceptor request, the hellos and the socklnd messages as they pass, a FIN when it is
closed.  The frames carry the connection's real addresses and client port; the server's port
is written as socklnd's, 988, where `check-trace` and Wireshark's dissector look for LNet (a
loopback server on another port included; `PcapTap.ports` lists the real ones).  Timestamps
are the wall clock's, so the file is an audit trail.  A socket whose addresses cannot be had
(it is no longer connected) is not written, and is counted in `skipped`.
"""
from __future__ import annotations

import struct
import threading
import time

from ptlrpc_conformance.harness.capture.pcap import PcapWriter, TcpConnection


class _TimedWriter(PcapWriter):
    """pcap.py's writer with wall-clock timestamps."""

    def _record(self, frame: bytes) -> int:
        self.packets += 1
        t = time.time()
        self.out.write(struct.pack("<IIII", int(t), int((t % 1) * 1_000_000), len(frame), len(frame)))
        self.out.write(frame)
        self.out.flush()
        return self.packets


class PcapTap:
    """One pcap file shared by every connection wrapped with it (thread-safe)."""

    def __init__(self, path):
        self.path = str(path)
        self._file = open(self.path, "wb")
        self._writer = _TimedWriter(self._file)
        self._lock = threading.Lock()
        self._count = 0
        self.ports: list[tuple[str, int]] = []     # the real server address of each connection written
        self.skipped = 0
        self.closed = False

    def wrap(self, sock, server_side: bool = False):
        """`sock` (connected) tapped; the client side is the one that dialled."""
        try:
            local, peer = sock.getsockname()[:2], sock.getpeername()[:2]
        except OSError:
            self.skipped += 1
            return sock
        client, server = (peer, local) if server_side else (local, peer)
        with self._lock:
            if self.closed:
                return sock
            conn = TcpConnection(self._writer, client[0], client[1], self._count, server[0])
            self._count += 1
            self.ports.append(tuple(server))
            conn.handshake(hello=False)
        return TappedSocket(sock, self, conn, from_us=not server_side)

    def _write(self, conn: TcpConnection, from_client: bool, data: bytes) -> None:
        with self._lock:
            if not self.closed and not conn.closed and data:
                conn.send(from_client, data)

    def _close(self, conn: TcpConnection) -> None:
        with self._lock:
            if not self.closed:
                conn.close()

    def close(self) -> None:
        with self._lock:
            if self.closed:
                return
            for conn in self._writer.connections.values():
                conn.close()
            self.closed = True
            self._file.close()


class TappedSocket:
    """A socket whose traffic a PcapTap records; everything else is the socket's."""

    def __init__(self, sock, tap: PcapTap, conn: TcpConnection, from_us: bool):
        self._sock, self._tap, self._conn, self._from_us = sock, tap, conn, from_us
        tap._writer.connections[id(self)] = conn     # closed with the file if not before

    def sendall(self, data) -> None:
        # written first: the answer can arrive (and be written by the reader) before sendall returns
        self._tap._write(self._conn, self._from_us, bytes(data))
        self._sock.sendall(data)

    def send(self, data) -> int:
        n = self._sock.send(data)
        self._tap._write(self._conn, self._from_us, bytes(data[:n]))
        return n

    def recv(self, n: int, *flags) -> bytes:
        data = self._sock.recv(n, *flags)
        self._tap._write(self._conn, not self._from_us, data)
        return data

    def close(self) -> None:
        self._tap._close(self._conn)
        self._sock.close()

    def __getattr__(self, name):            # fileno, settimeout, shutdown, getpeername, ...
        return getattr(self._sock, name)
