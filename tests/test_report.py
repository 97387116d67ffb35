"""The certification report: report.json, junit.xml, reproducers, verify-report, Ctrl-C."""
import json
import os
import signal
import subprocess
import sys
import time
from importlib import resources

import xmlschema

from conftest import TESTS

SELECT = ("-k", "framing.magic or framing.bufcount or structs.obdo")


def test_clean_report_of_the_reference(run_cli):
    run = run_cli("--iut", "reference", *SELECT)
    assert run.rc == 0
    r = run.report
    assert r["level"]["name"] == "fully conformant" and r["incomplete"] is False
    assert set(r["sha256"]) == {"vectors", "requirements.yaml", "profiles.yaml", "facts.json", "layouts.json"}
    assert r["reproduce"][:4] == ["ptlrpc-conformance", "certify", "--iut", "reference"]
    assert "--seed" in r["reproduce"] and "-k" in r["reproduce"]
    assert all(c["ok"] for c in r["smoke"])
    assert r["environment"]["python"] and r["iut"]["hello"]["name"]
    assert not (run.out / "reproducers").exists()
    schema = xmlschema.XMLSchema(str(resources.files("ptlrpc_conformance.schemas").joinpath("junit-xunit2.xsd")))
    schema.validate(str(run.out / "junit.xml"))


def test_reproducers_fail_the_same_way(run_cli):
    broken = ("--iut", "python:iuts:no_header_pad")
    run = run_cli(*broken, *SELECT)
    assert run.rc == 1
    failed = {c["id"]: c["notes"]["signature"] for c in run.report["cases"] if c["verdict"] == "fail"}
    files = sorted((run.out / "reproducers").glob("*.yaml"))
    assert len(files) == len(failed) and failed
    again = run_cli(*broken, "--vectors", str(run.out / "reproducers"), "-k", "repro.")
    repro = {c["id"]: c for c in again.report["cases"] if c["id"].startswith("repro.")}
    for case_id, signature in failed.items():
        vector_id = "repro." + case_id
        vector_id = vector_id[: -len(".decode")] if vector_id.endswith(".decode") else vector_id[: -len(".encode")]
        hits = [c for cid, c in repro.items() if cid.startswith(vector_id + ".")]
        assert hits and any(c["verdict"] == "fail" and c["notes"]["signature"] == signature for c in hits), case_id
    fixed = run_cli("--iut", "reference", "--vectors", str(run.out / "reproducers"), "-k", "repro.")
    assert fixed.rc == 0


def test_verify_report_agrees_on_a_clean_and_a_failing_report(run_cli, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(TESTS))
    for iut, rc in (("reference", 0), ("python:iuts:accepts_151_byte_body", 1)):
        run = run_cli("--iut", iut, "-k", "framing.body")
        assert run.rc == rc
        proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "verify-report",
                               str(run.out / "report.json")], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "verdicts agree" in proc.stdout
    tampered = json.loads((run.out / "report.json").read_text())
    tampered["cases"][0]["verdict"] = "pass" if tampered["cases"][0]["verdict"] != "pass" else "fail"
    (tmp_path / "t.json").write_text(json.dumps(tampered))
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "verify-report", str(tmp_path / "t.json")],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 1 and "verdict(s) differ" in proc.stdout


def test_ctrl_c_writes_a_partial_report_marked_incomplete(tmp_path, hostile):
    env = dict(os.environ, PYTHONPATH=str(TESTS))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "ptlrpc_conformance.cli", "--iut", hostile("hang"),
                             "--iut-timeout", "60", "--out", str(out), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    time.sleep(8)        # the run reaches the case the testee hangs on
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 1, stdout.decode()[-2000:] + stderr.decode()[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["incomplete"] is True
    assert report["summary"]["total"] < 500


def test_smoke_check_failures_are_reported(run_cli, hostile):
    run = run_cli("--iut", hostile("acceptsall"), "-k", "protocol.unknown")
    smoke = {c["check"]: c["ok"] for c in run.report["smoke"]}
    assert smoke["unknown op answered EOPNOTSUPP"] is False
    assert run.rc == 1


def test_list_prints_cases_and_requirements(run_cli):
    for args in (("list", "--area", "protocol"), ("certify", "--list", "--area", "protocol")):
        run = run_cli(*args, out=False)
        assert run.rc == 0
        assert "protocol.unknown-op.probe" in run.stdout and "PROTO-OPS-1" in run.stdout and "9 cases" in run.stdout


def test_run_one_case_records_the_protocol_lines(run_cli, tmp_path):
    log = tmp_path / "io.log"
    run = run_cli("run", "framing.bufcount.zero.decode", "--io-log", str(log))
    assert run.rc == 0 and list(run.verdicts()) == ["framing.bufcount.zero.decode"]
    lines = log.read_text().splitlines()
    assert lines[0].startswith("> ") and '"op": "hello"' in lines[0]
    assert any('"op": "decode"' in l for l in lines) and any('"error": "EINVAL"' in l for l in lines)
