"""record-trace writes the traffic of a scenario against a target IUT as a trace check-trace
reads; the sample trace in examples/traces/ is the bundled reference's, as the command writes it."""
import json

from conftest import ROOT
from ptlrpc_conformance.harness.ost import record, scenario, trace
from ptlrpc_conformance.reference import make_testee
from ptlrpc_conformance.harness.transport.adapter import InProcessAdapter

SAMPLE = ROOT / "examples" / "traces" / "reference-recovery.jsonl"


def test_the_sample_is_what_record_trace_writes_for_the_reference(run_cli, tmp_path):
    run = run_cli("record-trace", "--out", str(tmp_path / "t.jsonl"), out=False)
    assert run.rc == 0, run.stderr
    assert (tmp_path / "t.jsonl").read_text() == SAMPLE.read_text()
    assert "recovery.replay.transno-order against ptlrpc-conformance reference" in run.stderr


def test_record_trace_follows_the_profile_it_is_given(run_cli, tmp_path):
    """record-trace judges the replayed scenario under --profile, as certify does, and says
    which; an unknown profile is a usage error."""
    run = run_cli("record-trace", "--iut", "reference:2.15.8", "--profile", "lustre-2.15.8",
                  "--out", str(tmp_path / "t.jsonl"), out=False)
    assert run.rc == 0, run.stderr
    assert "(profile lustre-2.15.8)" in run.stderr and (tmp_path / "t.jsonl").read_text()
    wrong = run_cli("record-trace", "--profile", "lustre-2.1", "--out", str(tmp_path / "u.jsonl"), out=False)
    assert wrong.rc == 2 and "unknown profile 'lustre-2.1'" in wrong.stderr, wrong.stderr
    assert not (tmp_path / "u.jsonl").exists()


def test_the_sample_passes_check_trace(run_cli):
    run = run_cli("check-trace", str(SAMPLE), out=False)
    assert run.rc == 0, run.stdout + run.stderr
    assert "0 violations" in run.stderr
    lines = [json.loads(line) for line in SAMPLE.read_text().splitlines()]
    assert {"event": "restart"} in lines and {"event": "recovery_expiry"} in lines
    # replays held in recovery are answered later: their records say when
    deferred = [n for n, line in enumerate(lines, 1) if "replied_at" in line]
    assert deferred and all(lines[n - 1]["replied_at"] > n for n in deferred)


def test_a_deferred_reply_is_judged_where_it_was_sent(tmp_path):
    records = trace.read_jsonl(SAMPLE)
    held = next(r for r in records if "replied_at" in r)
    assert held["replied_at"] > held["line"]
    bad = tmp_path / "bad.jsonl"
    line = json.loads(SAMPLE.read_text().splitlines()[held["line"] - 1])
    bad.write_text("{\"event\": \"restart\"}\n" + json.dumps(dict(line, replied_at=1)) + "\n")
    try:
        trace.read_jsonl(bad)
    except trace.TraceError as e:
        assert "'replied_at' must be the number of this line or a later one" in str(e)
    else:
        raise AssertionError("a reply sent before its request was read")


def test_a_trace_is_one_target_life():
    recorder = record.Recorder(InProcessAdapter(make_testee(), description="reference"))
    scenario.call(recorder, {"op": "reset"})
    try:
        scenario.call(recorder, {"op": "reset"})
    except record.RecordError as e:
        assert "one target's life" in str(e)
    else:
        raise AssertionError("a second reset was recorded")


def test_record_trace_needs_a_target(run_cli):
    run = run_cli("record-trace", "--iut", "python:iuts:decode_only", "--out", "t.jsonl", out=False)
    assert run.rc == 2 and "does not declare target" in run.stderr
    unknown = run_cli("record-trace", "--scenario", "recovery.replay.transno-ordr", out=False)
    assert unknown.rc == 2 and "unknown scenario (closest: recovery.replay.transno-order" in unknown.stderr
