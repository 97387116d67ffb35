"""--max-fail and --time-budget: a hopeless run stops cleanly, with a report marked
incomplete and the reason, exit status 1."""
import pytest



def test_max_fail_stops_after_n_failing_cases_known_failures_apart(run_cli, tmp_path):
    """Every decode case of this IUT is an error; the known failures do not count."""
    known = tmp_path / "known.yaml"
    known.write_text("format: ptlrpc-conformance-known-failures/1\nentries:\n"
                     "- id: framing.magic.*.decode\n  reason: this decoder raises\n")
    run = run_cli("--iut", "python:iuts:raises", "--max-fail", "2", "-k", "framing.magic",
                  "--known-failures", str(known))
    assert run.rc == 1, run.stdout[-2000:] + run.stderr[-2000:]
    r = run.report
    assert r["incomplete"] is True and r["level"]["status"] == "incomplete"
    assert r["incomplete_reason"] == "max-fail reached: 2 case(s) failed or hit IUT trouble (limit 2)"
    failing = [c["id"] for c in r["cases"] if c["verdict"] in ("fail", "error")]
    listed = [c for c in failing if c.count(".") == 3]          # framing.magic.X.decode
    assert len(listed) >= 4 and len(failing) - len(listed) == 2
    assert r["summary"]["total"] < 30
    assert r["gate"]["ok"] is False                  # an incomplete run never passes the gate
    assert "the run stopped early (max-fail reached" in run.stderr
    assert "Traceback" not in run.stderr + run.stdout


def test_max_fail_stops_xdist_workers(run_cli):
    run = run_cli("--iut", "python:iuts:raises", "--max-fail", "3", "-k", "framing", "-n", "2")
    assert run.rc == 1, run.stdout[-2000:] + run.stderr[-2000:]
    r = run.report
    assert r["incomplete"] is True and r["incomplete_reason"].startswith("max-fail reached: 3 case(s)")
    # the workers stop after their current case, not at the end of what they were handed
    assert 3 <= r["summary"]["error"] + r["summary"]["fail"] < 40


def test_time_budget_stops_the_run_with_a_partial_report(run_cli):
    run = run_cli("--time-budget", "0.001")
    assert run.rc == 1, run.stdout[-2000:] + run.stderr[-2000:]
    r = run.report
    assert r["incomplete"] is True and r["level"]["status"] == "incomplete"
    assert r["incomplete_reason"].startswith("time budget of 0.001 s exhausted after ")
    assert r["summary"]["total"] == 1                       # it stops after the first case
    assert r["summary"]["pass"] + r["summary"]["not-applicable"] == 1
    assert "the run stopped early (time budget" in run.stderr


@pytest.mark.parametrize("args, text", [
    (["--max-fail", "0"], "argument --max-fail: 0 is not at least 1"),
    (["--max-fail", "x"], "argument --max-fail: 'x' is not a whole number"),
    (["--time-budget", "-5"], "argument --time-budget: -5 is not a positive number of seconds"),
    (["--time-budget", "nan"], "argument --time-budget: nan is not a positive number of seconds"),
    (["--iut-timeout", "inf"], "argument --iut-timeout: inf is not a positive number of seconds"),
    (["--iut-timeout", "1e400"], "argument --iut-timeout: 1e400 is not a positive number of seconds"),
    (["--iut-timeout", "0"], "argument --iut-timeout: 0 is not a positive number of seconds"),
    (["--iut-timeout", "nan"], "argument --iut-timeout: nan is not a positive number of seconds"),
])
def test_bad_limits_are_usage_errors(run_cli, args, text):
    run = run_cli(*args)
    assert run.rc == 2 and text in run.stderr and "Traceback" not in run.stderr


def test_bad_iut_timeout_of_decode_is_a_usage_error(run_cli):
    run = run_cli("decode", "00", "--iut-timeout", "inf", out=False)
    assert run.rc == 2 and "argument --iut-timeout: inf is not a positive number" in run.stderr
    assert "Traceback" not in run.stderr


def test_plugin_refuses_a_bad_iut_timeout(pytester):
    for value in ("inf", "-1"):
        result = pytester.runpytest_subprocess("--pyargs", "ptlrpc_conformance.suites", "-p", "no:cacheprovider",
                                               "--iut-timeout", value)
        assert result.ret == 4, value
        assert f"argument --iut-timeout: {float(value):g} is not a positive number of seconds" in result.stderr.str()


def test_plugin_options_are_registered(pytester):
    out = pytester.runpytest_subprocess("--help").stdout.str()
    assert "--conformance-max-fail" in out and "--conformance-time-budget" in out
    result = pytester.runpytest_subprocess("--pyargs", "ptlrpc_conformance.suites", "-p", "no:cacheprovider",
                                           "--conformance-max-fail", "0")
    assert result.ret == 4 and "argument --conformance-max-fail: 0 is not at least 1" in result.stderr.str()
