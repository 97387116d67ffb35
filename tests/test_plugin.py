"""The pytest plugin as a user's repository sees it (entry point pytest11)."""
import sys


def test_options_and_markers_are_registered(pytester):
    result = pytester.runpytest_subprocess("--help")
    out = result.stdout.str()
    assert "PtlRPC conformance suite:" in out
    for opt in ("--iut=SPEC", "--iut-timeout", "--conformance-profile", "--conformance-vectors", "--ignore-errno-class",
                "--conformance-report", "--known-failures", "--conformance-requirement", "--conformance-area",
                "--conformance-level", "--conformance-case", "--iut-io-log"):
        assert opt in out
    markers = pytester.runpytest_subprocess("--markers").stdout.str()
    assert "@pytest.mark.conformance(case, requirements" in markers


def test_suites_run_from_another_repository_with_xdist(pytester):
    report = pytester.path / "r.json"
    result = pytester.runpytest_subprocess("--pyargs", "ptlrpc_conformance.suites", "-n", "2", "-p", "no:cacheprovider",
                                           "--iut", f"exec:{sys.executable} -m ptlrpc_conformance.reference",
                                           "--conformance-report", str(report), "--conformance-examples", "20")
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) > 500 and "failed" not in outcomes and "error" not in outcomes
    assert report.exists()


def test_user_tests_can_use_the_fixtures(pytester):
    pytester.makepyfile(test_mine="""
        import pytest

        @pytest.mark.conformance(case="local.ping.decode", requirements=["HDR-MAGIC-1"])
        def test_my_own_case(iut, need, conclude):
            need(iut, "decode")
            out = iut.call({"op": "decode", "data": "00", "direction": "request"})
            assert out.rejected and out.error == "EINVAL"

        def test_hello(iut_hello, conformance_profile):
            assert iut_hello.protocol == 1 and conformance_profile == "lustre-2.17.57"
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2)


def test_a_case_without_a_valid_id_is_a_usage_error(pytester):
    pytester.makepyfile(test_bad="""
        import pytest

        @pytest.mark.conformance(case="Not An Id", requirements=["HDR-MAGIC-1"])
        def test_x():
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 4
    assert "does not follow the case id grammar" in result.stderr.str() + result.stdout.str()


def test_plugin_is_inert_when_unused(pytester):
    pytester.makepyfile(test_plain="def test_ok():\n    assert 1 + 1 == 2\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_plugin_run_ends_with_the_verdict_block(pytester):
    report = pytester.path / "r.json"
    result = pytester.runpytest_subprocess("--pyargs", "ptlrpc_conformance.suites", "-p", "no:cacheprovider",
                                           "--iut", "reference", "--conformance-report", str(report),
                                           "--conformance-area", "protocol")
    assert result.ret == 0
    lines = result.stdout.lines
    start = lines.index("== ptlrpc-conformance verdict ==")
    assert any(line.startswith("=") and " passed" in line for line in lines[:start])    # pytest's summary first
    block = lines[start:]
    assert block[1].startswith("level: ") and f"report: {report}" in block and block[-1] == "exit status: 0"
    # the plugin was given --iut reference: the block names the implementation it judged
    assert block[2] == "iut: ptlrpc-conformance reference 0.1.0 (--iut reference)"


def test_a_run_of_other_tests_prints_no_verdict(pytester):
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 0 and "ptlrpc-conformance verdict" not in result.stdout.str()
