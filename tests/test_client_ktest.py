"""ktest's user-space Lustre client (the pinned tools/lustre_tcp_client.py, fetched out of tree:
examples/ktest-client/README.md) certified unmodified as a client under test
(`certify --client`), at the seed of its published certificate
(docs/certifications/ktest-lustre_tcp_client-client-notes.md).  Skipped, with the reason,
without $KTEST_LUSTRE_CLIENT or where a source port below 1024 cannot be bound (as
tests/test_serve_ktest.py)."""
import hashlib
import sys

from test_serve_ktest import KTEST, PINNED, pytestmark  # noqa: F401  (the same skips)

SEED = "1"      # its schedule answers the client's first OST request (OST_STATFS) ERR -ENOTCONN


def test_ktest_client_certified_as_a_client(run_cli):
    with open(KTEST, "rb") as f:
        assert hashlib.sha256(f.read()).hexdigest() == PINNED, f"{KTEST} is not the pinned file (d61568a)"
    command = f"{sys.executable} {KTEST} --server {{addr}} --port {{port}} --fsname lustre --timeout 2"
    run = run_cli("certify", "--client", command, "--seed", SEED, timeout=600)
    r = run.report
    verdicts = {rid: e["verdict"] for rid, e in r["requirements"].items()}
    # what its mount and unmount do right: one XID counter, a first connect with
    # MSG_CONNECT_INITIAL, the export handle and pb_conn_cnt on every later request,
    # pb_last_xid 0 on connects and below every open XID
    assert {rid: verdicts[rid] for rid in ("CLI-XID-1", "CLI-CONN-1", "CLI-CONN-2", "CLI-CONN-3",
                                           "CLI-LASTXID-1")} == dict.fromkeys(
        ("CLI-XID-1", "CLI-CONN-1", "CLI-CONN-2", "CLI-CONN-3", "CLI-LASTXID-1"), "pass")
    # where it deviates, unseen: after ERR -ENOTCONN to its OST_STATFS it sends OST_DISCONNECT
    # without reconnecting (Lustre: ptlrpc_request_handle_notconn reconnects,
    # ptlrpc_disconnect_import waits for the import to leave recovery).  On the wire that
    # disconnect is a first send with the ERR'd request's count, as a request already on its
    # way when the ERR came would be (a Lustre client has several in flight): the judge lets
    # it through, so CLI-ERR-1 is not exercised (the notes of its certificate say so)
    assert r["level"]["failing_must"] == [] and run.rc == 0
    # never exercised: it resends nothing, replays nothing, gets no -EINPROGRESS, and never
    # sends a request after an ERR -ENOTCONN that cannot have been on its way
    assert {rid for rid, v in verdicts.items() if v == "not-exercised"} == {
        "CLI-ERR-1", "CLI-RESEND-1", "CLI-REPLAY-1", "CLI-REPLAY-2", "CLI-REPLAY-3", "CLI-REPLAY-4", "CLI-ERR-2"}
    assert r["level"]["status"] == "partial"       # no evidence for those: certified for none of them
