"""A misbehaving IUT is a failed case, never a broken run: the case fails with verdict
`error` and a clear reason, the testee is restarted, every other case still runs."""
import json
import os
import re
import select
import subprocess
import sys
import tracemalloc

import pytest

from conftest import ROOT, TESTS
from ptlrpc_conformance.harness.transport.exec import ExecAdapter
from ptlrpc_conformance.harness.verdicts.derive import derive
from ptlrpc_conformance.harness.data.vectors import load_all
from ptlrpc_conformance.reference import make_testee

HOSTILE = [sys.executable, str(TESTS / "testees" / "hostile.py")]
VECTORS = {v.id: v for v in load_all() if v.op == "decode"}

TRIGGER = "framing.magic.zero.decode"   # the input tests/testees/hostile.py misbehaves on


@pytest.mark.parametrize("mode, reason", [
    ("crash", "(crash): the testee exited with status 7"),
    ("hang", "(timeout): no response within 5 s"),
    ("garbage", "(protocol): response is not JSON"),
    ("wrongid", "(protocol): response id -1"),
    ("toolong", "(protocol): response line longer than 16777216 bytes"),
])
def test_one_bad_case_fails_and_the_run_goes_on(run_cli, hostile, mode, reason):
    # the timeout bounds every wait, the restarted testee's hello included (~3 s on a loaded
    # machine): only the hang waits for it to pass, the other modes answer
    run = run_cli("--iut", hostile(mode), "--iut-timeout", "5" if mode == "hang" else "60",
                  "-k", "framing.magic or framing.bufcount or framing.body")
    assert run.rc == 1, run.stdout + run.stderr
    verdicts = run.verdicts()
    assert verdicts[TRIGGER] == "error"
    assert reason in run.case(TRIGGER)["message"]
    others = {c: v for c, v in verdicts.items() if c != TRIGGER}
    assert len(others) >= 30 and set(others.values()) == {"pass"}
    summary = run.report["summary"]
    assert summary["error"] == 1 and summary["fail"] == 0


def _decode(vid):
    v = VECTORS[vid]
    return {"op": "decode", "data": v.data.hex(), "direction": v.direction}


@pytest.mark.parametrize("mode, kind", [("crash", "crash"), ("hang", "timeout"), ("garbage", "protocol"),
                                        ("wrongid", "protocol"), ("bigline", "protocol"), ("toolong", "protocol"),
                                        ("deep", "protocol"), ("nested", "protocol")])
def test_trouble_mid_batch_hits_only_the_case_in_flight(mode, kind):
    """Pipelined: answers read before the trouble are kept, the request in flight gets the
    outcome class, the rest of the batch is sent again to a restarted testee."""
    batch = [_decode("framing.magic.v2-native"), _decode("framing.magic.zero"),
             _decode("framing.bufcount.zero"), _decode("framing.body.rich-request")] * 2
    # the timeout bounds every wait, a (re)started testee's hello included (~3 s on a loaded
    # machine): only the hang waits for it to pass, the other modes answer (a 20 MiB line too)
    with ExecAdapter(HOSTILE + [mode], timeout=5 if kind == "timeout" else 60) as adapter:
        outcomes = adapter.call_many(batch)
        assert adapter.restarts == 2
    assert [o.kind for o in outcomes] == ["ok", kind, "error", "ok"] * 2
    reference = make_testee()
    for request, outcome in zip(batch, outcomes):
        if outcome.kind == "ok":      # each answer is its own request's
            assert outcome.result == reference.handle(request)["result"]


def test_testee_exiting_mid_batch_keeps_the_answers_before_it():
    """The testee exits after 4 answers (hello included) with requests still unread: the
    case in flight gets `crash`, the rest are re-sent to a restarted testee."""
    vids = sorted(vid for vid, v in VECTORS.items() if len(v.data) < 4096)[:10]
    with ExecAdapter(HOSTILE + ["exitafter", "4"], timeout=5, window=8) as adapter:
        outcomes = adapter.call_many([_decode(v) for v in vids])
        assert adapter.restarts == 2
    assert [o.kind == "crash" for o in outcomes] == [False, False, False, True] * 2 + [False, False]
    assert all("exited with status 0 without answering" in o.detail for o in outcomes if o.kind == "crash")
    reference = make_testee()
    for vid, outcome in zip(vids, outcomes):
        if outcome.kind != "crash":
            expected = reference.handle(_decode(vid))
            assert (outcome.ok, outcome.result if outcome.ok else outcome.error) == \
                (expected["ok"], expected["result"] if expected["ok"] else expected["error"])


def test_over_long_line_is_skipped_in_bounded_memory():
    """A 10 MiB line against a 1 MiB cap: a protocol outcome, read in chunks and dropped,
    never held whole; the next request is answered by the restarted testee."""
    tracemalloc.start()
    try:
        with ExecAdapter(HOSTILE + ["bigline"], timeout=5, max_line=1 << 20) as adapter:
            tracemalloc.reset_peak()
            outcomes = adapter.call_many([_decode("framing.magic.zero"), _decode("framing.magic.v2-native")])
            _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [o.kind for o in outcomes] == ["protocol", "ok"]
    assert outcomes[0].detail == "response line longer than 1048576 bytes"
    assert peak < 3 << 20, f"peak {peak} bytes while a 10 MiB line went by"


def _key(request: dict) -> str:
    return json.dumps({k: v for k, v in request.items() if k != "id"}, sort_keys=True)


def test_testee_exiting_mid_run_fails_exactly_the_cases_in_flight(run_cli, hostile, tmp_path):
    """exitafter 20: every testee process dies after 20 answers.  The cases whose request was
    in flight each time are `error` (crash); every other case passes."""
    log = tmp_path / "io.log"
    run = run_cli("--iut", hostile("exitafter 20"), "-k", "framing.magic", "--io-log", str(log))
    assert run.rc == 1, run.stdout[-2000:] + run.stderr[-2000:]
    # replay the protocol log: responses come in request order; '!' marks trouble for the
    # oldest unanswered request, and the rest of its batch is sent again
    in_flight, hit = [], []
    for line in log.read_text().splitlines():
        if line.startswith("> "):
            in_flight.append(line[2:])
        elif line.startswith("< "):
            in_flight.pop(0)
        elif line.startswith("! "):
            assert line.startswith("! crash: the testee exited with status 0 without answering"), line
            hit.append(_key(json.loads(in_flight[0])))
            in_flight.clear()
    assert len(hit) >= 3 and len(set(hit)) == len(hit)     # each time another request
    cases_of = {}         # request (without id) -> the cases that send it
    for v in VECTORS.values():
        cases_of.setdefault(_key(v.decode_request()), set()).add(f"{v.id}.decode")
        if v.canonical and v.verdict == "valid":
            cases_of.setdefault(_key(v.encode_request()), set()).add(f"{v.id}.encode")
    for case in derive(list(VECTORS.values())):
        for variant in case.variants:
            cases_of.setdefault(_key({"op": "decode", "data": variant.data.hex(), "direction": variant.direction}),
                                set()).add(case.id)
    verdicts = run.verdicts()
    errors = {c for c, v in verdicts.items() if v == "error"}
    expected = set()
    for data in hit:
        expected |= cases_of[data] & set(verdicts)
    assert errors == expected      # a case sending a long batch may be hit more than once
    assert {v for c, v in verdicts.items() if c not in errors} == {"pass"}
    assert all("(crash): the testee exited with status 0" in run.case(c)["message"] for c in errors)


def test_heavy_stderr_never_blocks(run_cli, hostile):
    run = run_cli("--iut", hostile("stderr"), "--iut-timeout", "5", "-k", "framing.magic or framing.bufcount")
    assert run.rc == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert run.report["summary"]["pass"] == run.report["summary"]["total"]


@pytest.mark.parametrize("spec, text", [
    ("nohello", "protocol 2"),
    ("silent", "exited with status 0 without answering"),
])
def test_testee_that_cannot_greet_exits_3(run_cli, hostile, spec, text):
    run = run_cli("--iut", hostile(spec))
    assert run.rc == 3
    assert text in run.stderr
    assert "Traceback" not in run.stderr


def test_command_that_does_not_exist_exits_3(run_cli):
    run = run_cli("--iut", "exec:/nonexistent/testee --flag")
    assert run.rc == 3
    assert "cannot start /nonexistent/testee" in run.stderr


def test_python_iut_with_bad_hello_exits_3(run_cli):
    run = run_cli("--iut", "python:iuts:bad_hello")
    assert run.rc == 3 and "protocol 2" in run.stderr


def test_python_iut_that_raises_is_an_error_per_case(run_cli):
    run = run_cli("--iut", "python:iuts:raises")
    assert run.rc == 1
    verdicts = run.verdicts()
    decode = [v for c, v in verdicts.items() if c.startswith("framing.") and c.endswith(".decode")]
    assert decode and set(decode) == {"error"}
    # it declared decode only: structure cases are not applicable, never errors
    assert {v for c, v in verdicts.items() if c.startswith("structs.generated.")} == {"not-applicable"}
    assert "the implementation raised RuntimeError: boom" in run.case(TRIGGER)["message"]


def test_unreadable_results_fail_properties_cleanly(run_cli, no_shrinking):
    """A result of the wrong shape inside a property is a failed case, not a traceback."""
    run = run_cli("--iut", "python:iuts:garbles", "-k", "roundtrip or encoded-length or structs.valid")
    verdicts = run.verdicts()
    props = ["framing.roundtrip.encode-decode", "framing.encoded-length.encode", "structs.valid.obdo.decode",
             "structs.valid.obdo.encode-given"]
    assert all(verdicts[p] == "fail" for p in props), verdicts
    assert "could not be read" in run.case("framing.roundtrip.encode-decode")["message"]
    assert "Traceback" not in run.stdout


def test_any_json_value_in_a_structure_result_is_judged_not_a_suite_bug(run_cli, no_shrinking):
    """A structure's type named by a number, a valid view with a number among its names: the
    cases judge what they compare (a vector that names no type compares the fields only) and
    fail the view, never a suite error (found by an IUT that puts random values in results)."""
    run = run_cli("--iut", "python:iuts:odd_struct_values", "-k",
                  "structs.generated.obd-ioobj.decode or structs.valid.mdt-body.decode or structs.valid.obdo.decode")
    verdicts = run.verdicts()
    assert run.rc == 1 and "error (suite)" not in verdicts.values(), verdicts
    assert verdicts["structs.generated.obd-ioobj.decode"] == "pass", run.case("structs.generated.obd-ioobj.decode")
    for view in ("structs.valid.mdt-body.decode", "structs.valid.obdo.decode"):
        assert verdicts[view] == "fail" and "expected a list of field names" in run.case(view)["message"], verdicts


def test_random_values_in_any_result_are_judged_never_a_suite_bug(run_cli, no_shrinking):
    """Every case of every area against an IUT that puts values of the wrong kind anywhere in
    about a third of its results (iuts.RandomValues): many cases fail, none is the suite's bug."""
    run = run_cli("--iut", "python:iuts:random_values", examples=5)
    verdicts = run.verdicts()
    assert run.rc == 1, run.stdout[-2000:]
    assert "error (suite)" not in verdicts.values(), [c for c, v in verdicts.items() if v == "error (suite)"]
    assert "fail" in verdicts.values() and "pass" in verdicts.values()
    assert {c.split(".")[0] for c in verdicts} >= {"framing", "structs", "target", "recovery"}


def test_json_nested_too_deep_is_a_protocol_outcome():
    """100,000 nested arrays cannot be parsed (RecursionError); 200 can, but would break the
    code that judges and reports the result: both are protocol failures of the case."""
    for mode, detail in (("deep", "too deep to read"), ("nested", "more than 64 deep")):
        with ExecAdapter(HOSTILE + [mode], timeout=5) as adapter:
            out = adapter.call(_decode("framing.magic.zero"))
        assert out.kind == "protocol" and detail in out.detail, out


def test_a_restarted_testee_with_other_capabilities_is_not_kept(tmp_path):
    """The testee crashes; its replacement declares other capabilities: the replacement is
    killed (never serves a request), and the cases get a crash outcome saying why."""
    with ExecAdapter(HOSTILE + ["othercaps", str(tmp_path)], timeout=5) as adapter:
        outs = adapter.call_many([_decode("framing.magic.v2-native"), _decode("framing.magic.zero"),
                                  _decode("framing.magic.v2-native")])
        assert [o.kind for o in outs] == ["ok", "crash", "crash"]
        assert "the restarted testee declared other capabilities" in outs[2].detail
        assert adapter._proc is None
        pids = [int(x) for x in (tmp_path / "pids").read_text().split()]
        assert len(pids) == 2
        with pytest.raises(ProcessLookupError):
            os.kill(pids[1], 0)


HARNESS_THAT_DIES = """
import sys
from ptlrpc_conformance.harness.transport.exec import ExecAdapter
adapter = ExecAdapter([sys.executable, sys.argv[1], sys.argv[2]])
adapter.start()
print("started", flush=True)
sys.exit(0)          # without adapter.close()
"""

TESTEE_WITH_A_HELPER = """
import json, os, subprocess, sys
fifo = os.open(sys.argv[1], os.O_WRONLY)
subprocess.Popen(["sleep", "300"], stdin=subprocess.DEVNULL, stdout=fifo)   # a helper in its process group
os.close(fifo)
for line in sys.stdin:
    req = json.loads(line)
    print(json.dumps({"id": req["id"], "ok": True, "result": {"name": "t", "version": "1",
                                                              "capabilities": ["decode"], "protocol": 1}}), flush=True)
"""


def test_a_harness_exiting_without_close_leaves_no_testee_behind(tmp_path):
    """The testee's helper holds a FIFO open; when the harness exits without closing its
    adapter, the testee's process group is killed, so the FIFO reaches end-of-file."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    testee = tmp_path / "testee.py"
    testee.write_text(TESTEE_WITH_A_HELPER)
    r = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        proc = subprocess.run([sys.executable, "-c", HARNESS_THAT_DIES, str(testee), str(fifo)],
                              capture_output=True, text=True, timeout=60,
                              env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert proc.stdout == "started\n", proc.stderr
        ready, _, _ = select.select([r], [], [], 30)      # a safety limit, not a measurement
        assert ready, "the testee's helper is still running after the harness exited"
        assert os.read(r, 1) == b""
    finally:
        os.close(r)


def test_a_testee_that_hangs_on_everything_stops_the_run_in_seconds(run_cli, hostile):
    """After --max-timeouts requests in a row went unanswered, the run stops as incomplete:
    seconds, not the ~20 minutes of a timeout per case.  The timeout bounds the restarted
    testee's hello too (~3 s on a loaded machine: 0.5 s made it an IUT that could not start)."""
    run = run_cli("--iut", hostile("hangall"), "--iut-timeout", "5", "--max-timeouts", "3", timeout=300)
    assert run.rc == 1, run.stdout[-2000:] + run.stderr[-2000:]
    r = run.report
    assert r["incomplete"] is True
    # a batch (a derived case) may time out more than one request at once
    said = re.match(r"the IUT stopped answering: (\d+) requests in a row timed out \(--max-timeouts 3\)",
                    r["incomplete_reason"])
    assert said and 3 <= int(said.group(1)) <= 10, r["incomplete_reason"]
    assert r["summary"]["error"] <= 3 and r["summary"]["total"] < 50


def test_a_testee_that_does_not_come_back_after_a_restart_stops_the_run(run_cli, hostile, tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    # a generous timeout: the run must stop because the restart fails, whatever the load
    run = run_cli("--iut", f"{hostile('gone')} {state}", "--iut-timeout", "60", timeout=300)
    assert run.rc == 1, run.stdout[-2000:] + run.stderr[-2000:]
    # the preflight started it once; the cases' start is the first restart, and it is gone
    assert run.report["incomplete_reason"].startswith("the IUT stopped answering: it did not start again")
    assert run.report["summary"]["error"] <= 2


def test_crashes_alone_never_stop_a_run(run_cli, hostile):
    run = run_cli("--iut", hostile("crash"), "--max-timeouts", "1", "-k", "framing")
    assert run.report["incomplete"] is False and run.report["summary"]["error"] >= 1


def test_the_exec_adapter_knows_a_testee_that_did_not_answer_its_hello_after_a_restart(tmp_path):
    vector = VECTORS["framing.magic.zero"]
    with ExecAdapter(HOSTILE + ["gone", str(tmp_path)], timeout=5.0) as adapter:     # its first hello in time
        assert adapter.stopped_answering(5) is None
        hung = adapter.call({"op": "decode", "data": vector.data.hex(), "direction": vector.direction})
        assert hung.kind == "timeout" and adapter.timeouts_in_a_row == 1
        after = adapter.call({"op": "decode", "data": vector.data.hex(), "direction": vector.direction})
        assert after.kind == "crash" and "could not be restarted" in after.detail
        why = adapter.stopped_answering(5)
        assert why and why.startswith("the IUT stopped answering: it did not answer its hello after a restart")


def test_every_crash_carries_what_the_testee_wrote_to_stderr():
    """The last stderr line of a testee that exits at once is in every crash outcome (the
    reader is given the testee's end before the outcome is written)."""
    vector = VECTORS["framing.magic.zero"]
    with ExecAdapter(HOSTILE + ["crashsay"], timeout=5.0) as adapter:
        for _ in range(20):
            out = adapter.call({"op": "decode", "data": vector.data.hex(), "direction": vector.direction})
            assert out.kind == "crash" and "stderr: about to crash on request" in out.detail, out.detail
