"""Inside a Hypothesis example (a property's, a stateful part's) an IUT's fault is the IUT's:
trouble (a crash, a hang, garbage, a wrong id, an over-long line) is verdict `error` for the
case, quoting the example and the fault; an IUT that answers one input two ways fails the case;
a failing SHOULD check never hides a MUST failure.  Never `error (suite)`, never exit 6."""
import pytest

from ptlrpc_conformance.harness.outputs.report import SUITE_ERROR

# one case of each kind that runs Hypothesis examples: the framing properties, a structure
# property, a part of each stateful machine
IN_EXAMPLES = ["framing.arbitrary-bytes.decode", "framing.mutations.decode", "framing.roundtrip.encode-decode",
               "framing.encoded-length.encode", "framing.full-width.decode", "structs.valid.obdo.decode",
               "target.stateful.exchange.1", "recovery.stateful.restart.1"]
SELECTION = " or ".join(IN_EXAMPLES)

# each testee process misbehaves on its 5th request after the hello (tests/testees/hostile.py
# MODE@N) and is restarted after it: every case above sends at least 5 requests, so the fault
# lands inside each one's examples (a decode property sends its 2 direction controls first)
FAULTS = [("crash", "crash", "the testee exited with status 7"),
          ("hang", "timeout", "no response within 5 s"),
          ("garbage", "protocol", "response is not JSON"),
          ("wrongid", "protocol", "response id -1"),
          ("bigline", "protocol", "response is not JSON")]


@pytest.mark.parametrize("mode, kind, detail", FAULTS, ids=[f[0] for f in FAULTS])
def test_a_fault_inside_an_example_is_the_cases_error(run_cli, hostile, mode, kind, detail):
    # a hang waits out the 5 s timeout in each of the 8 cases: four workers (each with its own
    # testee) wait in parallel, about 10 s instead of 40 (waiting costs no CPU; a worker's
    # start about 1 s of it)
    workers = ["-n", "4"] if mode == "hang" else []
    run = run_cli("--iut", hostile(f"{mode}@5"), "--iut-timeout", "5", "-k", SELECTION, *workers, examples=10,
                  timeout=600)
    assert run.rc == 1, run.stdout[-3000:] + run.stderr[-3000:]
    verdicts = run.verdicts()
    assert verdicts == {c: "error" for c in IN_EXAMPLES}, verdicts
    assert not run.report["summary"].get(SUITE_ERROR)
    for c in IN_EXAMPLES:
        message = run.case(c)["message"]
        assert "the IUT failed " in message and detail in message, (c, message)
        assert f"({kind})" in message or f"{kind}: " in message, (c, message)
        if c.startswith(("framing.", "structs.")):
            assert "not shrunk" in message and ("example: " in message or "input, " in message), (c, message)
        else:       # the exchanges of the run before the trouble, and the request it met
            assert "request: " in message and "exchanges before it" in message, (c, message)


@pytest.mark.parametrize("case", ["framing.arbitrary-bytes.decode", "framing.mutations.decode"])
def test_a_fault_on_a_direction_control_is_the_cases_error(run_cli, case):
    """A decode property first sends a valid vector of each direction (its controls): the IUT
    crashing on one is the case's error, quoting that request, not a control it rejected."""
    run = run_cli("--iut", "python:iuts:crashes_on_its_first_decode", "-k", case, examples=10)
    assert run.rc == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.verdicts() == {case: "error"}
    assert not run.report["summary"].get(SUITE_ERROR)
    message = run.case(case)["message"]
    assert "direction control" in message and "first decode" in message and "request: " in message, message


def test_the_same_faults_give_the_same_verdicts_under_xdist(run_cli, hostile):
    """The cases spread over two workers, each with its own testee: the same verdicts as the
    serial run of test_a_fault_inside_an_example_is_the_cases_error."""
    run = run_cli("--iut", hostile("garbage@5"), "-n", "2", "-k", SELECTION, examples=10)
    assert run.rc == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.verdicts() == {c: "error" for c in IN_EXAMPLES}
    assert not run.report["summary"].get(SUITE_ERROR)


def test_an_iut_answering_one_input_two_ways_fails_the_case(run_cli):
    """Its third decode is wrong; sent again, the same input is right: Hypothesis reports that
    as Flaky, which is the IUT's failure (charged to the field's requirement), not the suite's."""
    run = run_cli("--iut", "python:iuts:unsteady", "-k", "framing.full-width.decode")
    assert run.rc == 1, run.stdout[-3000:] + run.stderr[-3000:]
    assert run.verdicts() == {"framing.full-width.decode": "fail"}
    case = run.case("framing.full-width.decode")
    assert case["failed_requirements"] == ["BODY-FIELDS-1"]
    assert "the IUT passed it when it was sent again" in case["message"] and "body.pb_transno" in case["message"]


def test_a_should_failure_never_hides_a_must_failure(run_cli):
    """Every example fails the checksum (CKSUM-1, SHOULD); those whose pb_slv needs more than
    32 bits fail BODY-FIELDS-1 (MUST) too.  The simplest failing example fails the checksum
    alone: the verdict must still be the MUST failure, the SHOULD one charged with it."""
    run = run_cli("--iut", "python:iuts:cksum_and_slv_32_bits", "-k", "framing.full-width.decode", examples=8)
    assert run.rc == 1, run.stdout[-3000:] + run.stderr[-3000:]
    case = run.case("framing.full-width.decode")
    assert case["verdict"] == "fail"
    assert case["failed_requirements"][0] == "BODY-FIELDS-1" and "CKSUM-1" in case["failed_requirements"]
    assert "body.pb_slv" in case["message"] and "computed_cksum" in case["message"]


def test_scenario_files_with_problems_are_a_usage_error_and_a_suite_bug_is_not(tmp_path):
    """The one broad handler of the target suite: a VectorError in the user's scenario files is
    a usage error; any other exception is the suite's own and goes through untouched."""
    from ptlrpc_conformance.suites.test_target import _scenarios

    class Config:
        def __init__(self, value):
            self.value = value

        def getoption(self, name):
            if isinstance(self.value, Exception):
                raise self.value
            return self.value

    bad = tmp_path / "bad.yaml"
    bad.write_text("format: ptlrpc-conformance-scenarios/1\nscenarios: [{id: x}]\n")
    with pytest.raises(pytest.UsageError, match="scenario files have problems"):
        _scenarios(Config([str(bad)]))
    with pytest.raises(KeyError):
        _scenarios(Config(KeyError("a bug of the suite")))
