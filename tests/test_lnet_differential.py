"""tools/lnet_differential.py (issue 35 §4, docs/lnet-tcp.md): a small selection served by
`serve` and certified through `lnet-tcp:` with two xdist workers (each its own served target,
through `{worker}` in the --iut value) gives the verdicts of the reference in-process, and
tshark finds no malformed frame but those of the requests the suite sent irregular.  CI runs
the tool on the whole target and recovery selection (.ci/run); this covers its logic."""
import json
import subprocess
import sys

import pytest

from conftest import ROOT

sys.path.insert(0, str(ROOT / "tools"))
import lnet_differential as diff  # noqa: E402

from ptlrpc_conformance.harness.transport import lnet_tcp  # noqa: E402
from ptlrpc_conformance.harness.transport.adapter import UsageError  # noqa: E402

# a drop (of a malformed request: serve's "fate" ends the wait) and a restart over the control socket
CASES = ("target.drop.malformed.exchange", "recovery.replay.transno-order.exchange")


def test_worker_placeholder_gives_each_worker_its_own_target(monkeypatch):
    text = "lnet-tcp:127.0.0.1@tcp?target=T_UUID&port=29980+{worker}&control=/tmp/d/control-{worker}"
    assert lnet_tcp.with_worker(text, 3).endswith("port=29983&control=/tmp/d/control-3")
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    live = lnet_tcp.parse_spec(text)
    assert (live.port, live.control, live.text) == (29982, "/tmp/d/control-2", text)
    monkeypatch.delenv("PYTEST_XDIST_WORKER")
    assert lnet_tcp.parse_spec(text).port == 29980
    assert lnet_tcp.shared_control(text.replace("-{worker}", "")) and not lnet_tcp.shared_control(text)
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    with pytest.raises(UsageError, match="port="):
        lnet_tcp.parse_spec(text.replace("29980", "65535"))


def test_compare_lists_each_difference():
    def report(**cases):
        return {"cases": [{"id": k, "verdict": v[0], "failed_requirements": v[1], "exercised": v[2]}
                          for k, v in cases.items()]}
    direct = report(a=("pass", [], ["R-1"]), b=("fail", ["R-2"], ["R-2"]), c=("pass", [], []))
    live = report(a=("pass", [], ["R-1"]), b=("fail", ["R-3"], ["R-2"]), d=("pass", [], []))
    compared, lines = diff.compare(direct, live, "over lnet-tcp")
    assert compared == 2
    assert lines == ["b: failed_requirements ['R-2'] directly, ['R-3'] over lnet-tcp",
                     "c: only in the direct run", "d: only in over lnet-tcp"]


def test_irregular_reads_the_message_as_the_suite_does():
    from ptlrpc_conformance.harness.transport import live_safety as safety
    assert diff.irregular(safety.message("OST_STATFS")) is None
    assert diff.irregular(safety.message("OST_GETATTR", [bytes(safety.S.size("ost_body"))])) is None
    assert diff.irregular(safety.message("OST_GETATTR", [bytes(100)])) == "its body buffer is shorter than ost_body"
    statfs = bytearray(safety.message("OST_STATFS"))
    at = safety.parse(bytes(statfs)).spans[0][0] + safety._BODY.field("pb_opc").offset
    statfs[at:at + 4] = (9999).to_bytes(4, "little")
    assert diff.irregular(bytes(statfs)) == "opcode 9999 is not one spec/target.yaml models"
    assert diff.irregular(b"\x00" * 16) == "not a lustre_msg_v2 whose buffers fit"


@pytest.fixture(scope="module")
def differential(tmp_path_factory):
    out = tmp_path_factory.mktemp("differential")
    args = [a for c in CASES for a in ("--case", c)]
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "lnet_differential.py"), *args, "-n", "2",
                           "--srcport", "any", "--out", str(out)], capture_output=True, text=True, timeout=600, cwd=ROOT)
    return proc, out


@pytest.mark.needs_tool("tshark")
def test_differential_serial_and_two_workers_agree(differential):
    proc, out = differential
    assert "Traceback" not in proc.stdout + proc.stderr
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"cases compared: {len(CASES)}, differences: 0" in proc.stdout
    assert "; -n 2;" in proc.stdout
    # one served target per worker, each with its capture
    assert sorted(p.name for p in out.glob("serve-*.pcap")) == ["serve-0.pcap", "serve-1.pcap"]
    live = {c["id"]: c["verdict"] for c in json.loads((out / "live" / "report.json").read_text())["cases"]}
    assert live == {c: "pass" for c in CASES}
    # the dropped request ended on serve's word, not after the drop window
    log = (out / "live" / "io.log").read_text()
    assert "serve sent no reply" in log and "drop window" not in log
    assert "0 other malformed frames" in proc.stdout


@pytest.mark.needs_tool("tshark")
def test_malformed_frames_are_accepted_only_for_requests_sent_irregular(differential):
    proc, out = differential
    pcaps = sorted(out.glob("serve-*.pcap")) + sorted((out / "live").glob("live*.pcap"))
    total, accepted, failing = diff.check_captures(pcaps, [out / "live" / "io.log"])
    assert total > 0 and accepted and not failing
    assert any("a request the suite sent irregular" in line for line in accepted)
    # without the run's io-log nothing says the malformed requests were the suite's own
    total, accepted, failing = diff.check_captures(pcaps, [])
    assert not accepted and failing
    assert all("no case sent deliberately" in line for line in failing)
