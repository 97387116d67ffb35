"""A misbehaving IUT is a failed case, never a broken run: the case fails with verdict
`error` and a clear reason, the testee is restarted, every other case still runs."""
import sys

import pytest

TRIGGER = "framing.magic.zero.decode"   # the input tests/testees/hostile.py misbehaves on


@pytest.mark.parametrize("mode, reason", [
    ("crash", "(crash): the testee exited with status 7"),
    ("hang", "(timeout): no response within 1 s"),
    ("garbage", "(protocol): response is not JSON"),
    ("wrongid", "(protocol): response id -1"),
])
def test_one_bad_case_fails_and_the_run_goes_on(run_cli, hostile, mode, reason):
    run = run_cli("--iut", hostile(mode), "--iut-timeout", "1", "-k", "framing.magic or framing.bufcount or framing.body")
    assert run.rc == 1, run.stdout + run.stderr
    verdicts = run.verdicts()
    assert verdicts[TRIGGER] == "error"
    assert reason in run.case(TRIGGER)["message"]
    others = {c: v for c, v in verdicts.items() if c != TRIGGER}
    assert len(others) >= 30 and set(others.values()) == {"pass"}
    summary = run.report["summary"]
    assert summary["error"] == 1 and summary["fail"] == 0


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


def test_unreadable_results_fail_properties_cleanly(run_cli):
    """A result of the wrong shape inside a property is a failed case, not a traceback."""
    run = run_cli("--iut", "python:iuts:garbles", "-k", "roundtrip or encoded-length or structs.valid")
    verdicts = run.verdicts()
    props = ["framing.roundtrip.encode-decode", "framing.encoded-length.encode", "structs.valid.obdo.decode",
             "structs.valid.obdo.encode-given"]
    assert all(verdicts[p] == "fail" for p in props), verdicts
    assert "could not be read" in run.case("framing.roundtrip.encode-decode")["message"]
    assert "Traceback" not in run.stdout
