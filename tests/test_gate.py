"""The regression gate (--known-failures): every outcome, and the rewrite."""
import datetime as dt

import pytest
import yaml

from ptlrpc_conformance.harness import gate

FAILING_IUT = ("--iut", "python:iuts:no_header_pad", "-k", "framing.magic.v2-native or framing.bufcount.zero")


def write(path, entries):
    path.write_text(yaml.safe_dump({"format": gate.FORMAT, "entries": entries}, sort_keys=False))
    return str(path)


@pytest.fixture(scope="module")
def failures(tmp_path_factory):
    """The failing cases (and their signatures) of the broken IUT on the selection."""
    import json
    import os
    import subprocess
    import sys
    from conftest import TESTS
    out = tmp_path_factory.mktemp("baseline")
    env = dict(os.environ, PYTHONPATH=str(TESTS))
    subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", *FAILING_IUT, "--examples", "10",
                    "--out", str(out)], capture_output=True, env=env)
    report = json.loads((out / "report.json").read_text())
    return {c["id"]: c["notes"]["signature"] for c in report["cases"] if c["verdict"] == "fail"}


def test_all_failures_known_passes_the_gate(run_cli, tmp_path, failures):
    kf = write(tmp_path / "kf.yaml", [{"id": c, "reason": "known", "signature": s} for c, s in failures.items()])
    run = run_cli(*FAILING_IUT, "--known-failures", kf)
    assert run.rc == 0, run.stdout[-3000:]
    assert "regression gate: passed" in run.stdout
    assert run.report["gate"]["ok"] and sorted(run.report["gate"]["known_failures"]) == sorted(failures)


def test_new_failure_fails_and_prints_the_lines_to_add(run_cli, tmp_path, failures):
    first, *rest = sorted(failures)
    kf = write(tmp_path / "kf.yaml", [{"id": c, "reason": "known"} for c in rest])
    run = run_cli(*FAILING_IUT, "--known-failures", kf)
    assert run.rc == 1
    assert f"  - id: {first}\n    reason: <why this failure is accepted>\n    signature: {failures[first]}" in run.stdout
    assert run.report["gate"]["new"] == [first]


def test_stale_entry_fails_and_prints_the_line_to_remove(run_cli, tmp_path, failures):
    entries = [{"id": c, "reason": "known"} for c in failures] + [{"id": "framing.magic.v1.decode", "reason": "old"}]
    run = run_cli(*FAILING_IUT, "-k", "framing.magic", "--known-failures", write(tmp_path / "kf.yaml", entries))
    assert run.rc == 1
    assert "entry framing.magic.v1.decode is stale" in run.stdout and "remove the entry `- id: framing.magic.v1.decode`" in run.stdout


def test_entry_matching_nothing_fails(run_cli, tmp_path, failures):
    entries = [{"id": c, "reason": "known"} for c in failures] + [{"id": "framing.no.such.case", "reason": "typo"}]
    run = run_cli(*FAILING_IUT, "--known-failures", write(tmp_path / "kf.yaml", entries))
    assert run.rc == 1 and "entry framing.no.such.case matches no case of this run" in run.stdout


def test_changed_signature_fails(run_cli, tmp_path, failures):
    entries = [{"id": c, "reason": "known", "signature": "accepted"} for c in failures]
    run = run_cli(*FAILING_IUT, "--known-failures", write(tmp_path / "kf.yaml", entries))
    assert run.rc == 1 and "fails differently" in run.stdout and "replace the line `signature: accepted`" in run.stdout


def test_expired_entry_fails(run_cli, tmp_path, failures):
    yesterday = (dt.date.today() - dt.timedelta(days=1)).isoformat()
    entries = [{"id": c, "reason": "known", "expires": yesterday} for c in failures]
    run = run_cli(*FAILING_IUT, "--known-failures", write(tmp_path / "kf.yaml", entries))
    assert run.rc == 1 and f"expired on {yesterday}" in run.stdout


def test_wildcard_and_requirement_entries(run_cli, tmp_path, failures):
    entries = [{"id": "framing.*.*.decode", "reason": "policy"}, {"id": "framing.*.*.*.decode", "reason": "policy"},
               {"id": "ENC-CANON-1", "reason": "our encoder is not canonical"}]
    run = run_cli(*FAILING_IUT, "--known-failures", write(tmp_path / "kf.yaml", entries))
    assert run.rc == 0, run.stdout[-3000:]


def test_broken_file_is_a_usage_error_naming_the_line(run_cli, tmp_path):
    kf = tmp_path / "kf.yaml"
    kf.write_text(f"format: {gate.FORMAT}\nentries:\n- id: NOT AN ID\n  reason: x\n")
    run = run_cli(*FAILING_IUT, "--known-failures", str(kf))
    assert run.rc == 2 and "kf.yaml:3: id 'NOT AN ID'" in run.stdout


def test_update_tightens_and_loosens(run_cli, tmp_path, failures):
    first, *rest = sorted(failures)
    entries = [{"id": c, "reason": "known"} for c in rest] + [{"id": "framing.magic.v1.decode", "reason": "old"}]
    kf = write(tmp_path / "kf.yaml", entries)
    run_cli(*FAILING_IUT, "--known-failures", kf, "--update-known-failures")
    tightened = {e["id"]: e for e in yaml.safe_load(open(kf))["entries"]}
    assert "framing.magic.v1.decode" not in tightened          # stale entry removed
    assert first not in tightened                              # a new failure is not added by tightening
    assert all(tightened[c]["signature"] == failures[c] for c in rest)   # signatures recorded
    run_cli(*FAILING_IUT, "--known-failures", kf, "--update-known-failures", "loosen")
    loosened = {e["id"] for e in yaml.safe_load(open(kf))["entries"]}
    assert first in loosened
    again = run_cli(*FAILING_IUT, "--known-failures", kf)
    assert again.rc == 0, again.stdout[-2000:]


def test_matching_is_per_segment():
    assert gate.matches("framing.*.zero.decode", "framing.bufcount.zero.decode", [])
    assert not gate.matches("framing.*.decode", "framing.bufcount.zero.decode", [])
    assert gate.matches("HDR-MAGIC-1", "framing.magic.v2-native.decode", ["HDR-MAGIC-1"])
