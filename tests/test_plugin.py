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


def test_a_plugin_run_without_iut_names_the_bundled_reference(pytester):
    result = pytester.runpytest_subprocess("--pyargs", "ptlrpc_conformance.suites", "-p", "no:cacheprovider",
                                           "--conformance-area", "protocol")
    lines = result.stdout.lines
    block = lines[lines.index("== ptlrpc-conformance verdict =="):]
    assert "iut: the bundled reference implementation (--iut reference)" in block


def test_a_run_of_other_tests_prints_no_verdict(pytester):
    pytester.makepyfile(test_plain="def test_ok():\n    assert True\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    assert result.ret == 0 and "ptlrpc-conformance verdict" not in result.stdout.str()


# What a pytest run that never uses the suite may load of the package: the plugin, its option
# table and its fixtures module (each fixture imports what it needs when a test asks for it).
REGISTRATION = {"ptlrpc_conformance", "ptlrpc_conformance.plugin", "ptlrpc_conformance.harness",
                "ptlrpc_conformance.harness.options", "ptlrpc_conformance.harness.transport",
                "ptlrpc_conformance.fixtures", "ptlrpc_conformance.fixtures.core"}
HEAVY = ("yaml", "hypothesis", "jsonschema", "jinja2")       # none of these is pytest's


def _loaded(names) -> tuple[set, set]:
    names = set(names)
    ours = {m for m in names if m.split(".")[0] == "ptlrpc_conformance"}
    return ours, {m for m in names if m.split(".")[0] in HEAVY}


def test_importing_the_plugin_imports_nothing_else():
    """The entry point's module imports no other module of the package, nor the judge, the
    reference, the YAML or Hypothesis; not even pytest (the run has loaded it): its import
    costs about a millisecond, which `python -X importtime` shows."""
    import subprocess
    code = "import sys; import ptlrpc_conformance.plugin; print('\\n'.join(sorted(sys.modules)))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    names = proc.stdout.split()
    ours, heavy = _loaded(names)
    assert ours == {"ptlrpc_conformance", "ptlrpc_conformance.plugin"} and not heavy
    assert "pytest" not in names and "_pytest" not in names


def test_a_run_of_other_tests_loads_no_part_of_the_suite(pytester):
    """A one-test project, with and without xdist: the plugin registers its options, marker and
    fixtures, and loads nothing else of the package (no registry, judge, reference, report)."""
    pytester.makepyfile(test_plain="""
        import sys

        def test_ok():
            with open("modules.txt", "w") as f:
                f.write("\\n".join(sorted(sys.modules)))
    """)
    for args in ((), ("-n", "2")):
        result = pytester.runpytest_subprocess("-p", "no:cacheprovider", *args)
        result.assert_outcomes(passed=1)
        ours, heavy = _loaded((pytester.path / "modules.txt").read_text().split())
        assert ours <= REGISTRATION and not heavy, (args, sorted(ours - REGISTRATION), sorted(heavy))
        assert "ptlrpc-conformance verdict" not in result.stdout.str()


def test_a_test_that_asks_for_a_fixture_uses_the_suite(pytester):
    """No option and no marker: a test asking for `iut` starts the session's use of the suite
    (the IUT, the judge's release, the report's collector), and passes."""
    pytester.makepyfile(test_fixture="""
        import sys

        def test_hello(iut):
            assert iut.hello.protocol == 1
            assert "ptlrpc_conformance.plugin.hooks" in sys.modules
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)


def test_a_worker_usage_error_reaches_the_controller(pytester):
    """xdist: the controller collects nothing, so it learns of the suite from its workers; a
    case id the workers find broken still ends the run as a usage error."""
    pytester.makepyfile(test_bad="""
        import pytest

        @pytest.mark.conformance(case="Not An Id", requirements=["HDR-MAGIC-1"])
        def test_x():
            pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "2")
    assert result.ret == 4
    assert "does not follow the case id grammar" in result.stderr.str() + result.stdout.str()


# Hypothesis and Jinja2 cost about 0.1 s to import; the suites import Hypothesis in the cases
# that use it, the command line Jinja2 when it writes report.html.  A plugin that writes the
# names of the loaded modules when the suites are collected, when the first case starts its call
# and when the run ends.
MODULE_WATCH = """
import sys

def _write(name):
    with open(name, "w") as f:
        f.write("\\n".join(sorted(sys.modules)))

def pytest_collection_finish(session):
    _write("collected.txt")

def pytest_runtest_call(item):
    if not hasattr(sys, "_first_case_seen"):
        sys._first_case_seen = True
        _write("first-case.txt")

def pytest_unconfigure(config):
    _write("ended.txt")
"""
LAZY = ("hypothesis", "jinja2")


def _lazy_loaded(path) -> set:
    return {m.split(".")[0] for m in path.read_text().split()} & set(LAZY)


def test_a_certification_starts_without_hypothesis_or_jinja2(tmp_path):
    """`certify` collects every suite and runs its first case (a framing vector) without
    importing Hypothesis or Jinja2; a property case imports Hypothesis when it runs (the check
    sees a loaded module)."""
    import os
    import subprocess
    (tmp_path / "module_watch.py").write_text(MODULE_WATCH)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path)] + sys.path))
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance", "certify", "--iut", "reference",
                           "--out", str(tmp_path / "out"), "-q", "--", "-p", "module_watch",
                           "-k", "framing.magic.v2-native.decode or framing.encoded-length.encode"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "cases: 2 (2 pass)" in proc.stdout
    assert _lazy_loaded(tmp_path / "collected.txt") == set()
    assert _lazy_loaded(tmp_path / "first-case.txt") == set()
    assert _lazy_loaded(tmp_path / "ended.txt") == {"hypothesis"}


def test_collecting_the_suites_as_a_plugin_imports_no_hypothesis(pytester):
    """A plugin user's pytest collecting the suites (Hypothesis' own pytest plugin loaded)
    imports neither Hypothesis nor Jinja2."""
    pytester.makeconftest(MODULE_WATCH)
    result = pytester.runpytest_subprocess("--pyargs", "ptlrpc_conformance.suites", "--collect-only", "-q",
                                           "-p", "no:cacheprovider")
    assert result.ret == 0 and " tests collected" in result.stdout.str()
    names = (pytester.path / "collected.txt").read_text().split()
    assert {"ptlrpc_conformance.suites.test_properties", "ptlrpc_conformance.suites.test_target",
            "ptlrpc_conformance.suites.test_recovery"} <= set(names)
    assert _lazy_loaded(pytester.path / "collected.txt") == set()
