"""ktest's user-space Lustre client (tools/lustre_tcp_client.py at d61568a, fetched out of tree:
examples/ktest-client/README.md), run unmodified against `serve --iut reference` with its
minimal MGS, on loopback: its mount flow (MGS connect and ping, the client config log, the OST's
connect and statfs, the disconnects) must complete.  What it sent is recorded (serve's request
log, and the list of opcodes) in the test's directory.

ktest's client always binds a source port below 1024 (the acceptor's accept=secure), so the
test runs where such a port can be bound (root or CAP_NET_BIND_SERVICE) and where
$KTEST_LUSTRE_CLIENT names the file; elsewhere it is skipped with the reason.  ktest takes
--port, so serve listens on a free port; --fsname names the file system, which spares the
fsname probe (64 opens by logid) that a client without it makes."""
from __future__ import annotations

import hashlib
import json
import os
import select
import subprocess
import sys

import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.transport.lnet_serve import control_call

KTEST = os.environ.get("KTEST_LUSTRE_CLIENT")
PINNED = "1c2b41bfb89c322e027976f88822bb22d942b5d133b2eb8ae39776620f158dd8"   # examples/ktest-client/README.md
WAIT = 60.0


def _can_bind_privileged() -> bool:
    from test_lnet_engine import _can_bind_privileged as can
    return can()


pytestmark = [
    pytest.mark.skipif(not KTEST or not os.path.isfile(KTEST),
                       reason="not run: $KTEST_LUSTRE_CLIENT does not name ktest's lustre_tcp_client.py "
                              "(fetch it as examples/ktest-client/README.md says)"),
    pytest.mark.skipif(not _can_bind_privileged(),
                       reason="not run: ktest's client binds a source port below 1024, which needs root or "
                              "CAP_NET_BIND_SERVICE"),
]


def test_ktest_mounts_from_serve_s_mgs_connects_the_ost_and_unmounts(tmp_path):
    with open(KTEST, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == PINNED, f"{KTEST} is not the pinned file (d61568a)"
    log, control = tmp_path / "requests.jsonl", str(tmp_path / "control.sock")
    serve = subprocess.Popen([sys.executable, "-m", "ptlrpc_conformance.cli", "serve", "--listen", "127.0.0.1:0",
                              "--iut", "reference", "--request-log", str(log), "--control", control],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        ready, _, _ = select.select([serve.stdout], [], [], 30)
        line = serve.stdout.readline() if ready else ""
        assert line.startswith("serving ") and "MGS of lustre naming lustre-OST0000_UUID" in line, line
        port = line.split(" on ")[1].split(",")[0].rsplit(":", 1)[1]
        run = subprocess.run([sys.executable, KTEST, "--server", "127.0.0.1", "--port", port, "--fsname", "lustre",
                              "--timeout", "10"], capture_output=True, text=True, timeout=WAIT)
        (tmp_path / "ktest.log").write_text(run.stdout + run.stderr)
        assert run.returncode == 0, run.stderr
        assert "mount flow done: 2/2 targets connected (MGS, lustre-OST0000)" in run.stderr, run.stderr
        assert "umount flow done" in run.stderr
        sent = [json.loads(x) for x in log.read_text().splitlines()]
        names = {spec.constant(n): n for n in (
            "MGS_CONNECT", "OBD_PING", "LLOG_ORIGIN_HANDLE_CREATE", "LLOG_ORIGIN_HANDLE_READ_HEADER",
            "LLOG_ORIGIN_HANDLE_NEXT_BLOCK", "OST_CONNECT", "OST_STATFS", "OST_DISCONNECT", "MGS_DISCONNECT")}
        opcodes = [(r["service"], names.get(r["opc"], r["opc"])) for r in sent]
        (tmp_path / "opcodes.txt").write_text("".join(f"{s} {o}\n" for s, o in opcodes))
        print("ktest sent:", ", ".join(f"{o} ({s})" for s, o in opcodes))
        assert opcodes == [("mgs", "MGS_CONNECT"), ("mgs", "OBD_PING"), ("mgs", "LLOG_ORIGIN_HANDLE_CREATE"),
                           ("mgs", "LLOG_ORIGIN_HANDLE_READ_HEADER"), ("mgs", "LLOG_ORIGIN_HANDLE_NEXT_BLOCK"),
                           ("ost", "OST_CONNECT"), ("ost", "OST_STATFS"), ("ost", "OST_DISCONNECT"),
                           ("mgs", "MGS_DISCONNECT")]
        # one client, known by its header (a kernel-like peer on a privileged port: pid 12345)
        assert {r["client"] for r in sent} == {"12345-127.0.0.1@tcp"}
        counts = control_call(control, "status")["result"]["counts"]
        assert counts["replies"] == 9 and counts["mgs_requests"] == 6 and counts["requests"] == 3 and counts["iut_failed"] == 0
    finally:
        serve.terminate()
        try:
            serve.wait(timeout=10)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
