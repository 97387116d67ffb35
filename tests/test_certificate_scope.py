"""A certificate says exactly what the run showed: the selection it ran (a partial run is never
"conformant" alone), the relaxing modes its verdicts were given under, the suite's own bugs kept
apart from the IUT's failures, and the suite that produced it."""
import json
import sys
import textwrap

import pytest

from ptlrpc_conformance.harness.outputs import report as report_module
from ptlrpc_conformance.harness.outputs import level as rule


def test_a_selection_is_partial_everywhere_the_level_is_shown(run_cli):
    run = run_cli("certify", "--iut", "reference", "--case", "framing.magic.v2-native.decode", html=True)
    assert run.rc == 0, run.stdout + run.stderr
    rep = run.report
    lv = rep["level"]
    assert lv["status"] == rule.PARTIAL
    assert lv["selection"]["cases"] == ["framing.magic.v2-native.decode"]
    assert lv["selection"]["complete"]["decode"] is False
    # the MUST requirements of the declared capabilities that no case ran are not run, never pass
    assert rep["requirements"]["HDR-LENGTH-1"]["verdict"] == rule.NOT_RUN
    assert "HDR-LENGTH-1" in lv["not_run"]
    said = rule.words(lv)
    assert said.startswith("conformant (partial: case framing.magic.v2-native.decode")
    assert "level: conformant (partial: case framing.magic.v2-native.decode" in run.stdout
    html = (run.out / "report.html").read_text()
    assert "conformant (partial: case framing.magic.v2-native.decode" in html
    junit = (run.out / "junit.xml").read_text()
    assert 'name="conformance_status" value="partial"' in junit


def test_certification_doc_refuses_a_partial_report_unless_allowed(run_cli):
    run = run_cli("certify", "--iut", "reference", "--area", "framing")
    assert run.report["level"]["status"] == rule.PARTIAL
    path = str(run.out / "report.json")
    refused = run_cli("certification-doc", path, out=False)
    assert refused.rc == 2 and "partial run (framing area" in refused.stderr
    allowed = run_cli("certification-doc", path, "--allow-partial", out=False)
    assert allowed.rc == 0, allowed.stderr
    first = allowed.stdout.split("\n\n")[1]
    assert first.startswith("**A partial run: framing area") and first.endswith("**")


def test_a_whole_run_is_complete_and_names_the_suite(run_cli):
    run = run_cli("certify", "--iut", "python:iuts:decode_only")
    rep = run.report
    assert rep["level"]["status"] == rule.FULLY_CONFORMANT, rep["level"]
    assert rep["level"]["selection"]["complete"] == {"decode": True}
    assert rep["selection"]["deselected"] == {}
    assert rep["suite"]["sha256"] == report_module.suite_hash() and len(rep["suite"]["sha256"]) == 64
    doc = run_cli("certification-doc", str(run.out / "report.json"), out=False)
    assert rep["suite"]["sha256"] in doc.stdout


def test_errno_agnostic_runs_name_the_mode_and_never_pass_errno_rules(run_cli):
    for args, by in ((["--iut", "python:iuts:decode_only", "--ignore-errno-class"], "--ignore-errno-class"),
                     (["--iut", "python:iuts:ebadmsg_agnostic"], "the IUT's hello")):
        run = run_cli("certify", *args)
        rep = run.report
        lv = rep["level"]
        assert [m["mode"] for m in lv["modes"]] == ["errno-agnostic"] and lv["modes"][0]["by"].startswith(by)
        assert lv["status"] == rule.CONFORMANT       # never "fully conformant" in a relaxing mode
        assert rule.words(lv).startswith("conformant (errno-agnostic)")
        for rid in ("HDR-BUFCOUNT-1", "BODY-SIZE-1"):
            assert rep["requirements"][rid]["verdict"] == rule.PASS_AGNOSTIC, rid
        # all errno class (the order of checks): nothing of it was judged, and it says so
        assert rep["requirements"]["HDR-ORDER-1"]["verdict"] == rule.NOT_JUDGED_AGNOSTIC
        assert rep["requirements"]["HDR-MAGIC-1"]["verdict"] == "pass"     # no errno class in it
        assert "mode: errno-agnostic (asked by " + by in run.stdout


def test_the_literal_profile_is_a_relaxing_mode(run_cli):
    run = run_cli("certify", "--iut", "python:iuts:decode_only", "--profile", "lustre-2.17.57-literal")
    lv = run.report["level"]
    assert [m["mode"] for m in lv["modes"]] == ["profile lustre-2.17.57-literal"]
    assert lv["status"] == rule.CONFORMANT


SUITE_BUG = textwrap.dedent("""
    # a bug planted in the suite's own judge, as a plugin loaded before the suites run
    import ptlrpc_conformance.suites.test_framing as framing

    def broken_judge(vector, *args, **kwargs):
        if vector.id == "framing.magic.v2-native":
            raise KeyError("a key the judge forgot")
        return real(vector, *args, **kwargs)

    real = framing.judge_decode
    framing.judge_decode = broken_judge
""")


def test_a_bug_in_the_suite_is_the_suites_not_the_iuts(pytester):
    pytester.makepyfile(planted_bug=SUITE_BUG)
    path = pytester.path / "r.json"
    result = pytester.runpytest_subprocess(
        "-p", "planted_bug", "-p", "no:cacheprovider", "--pyargs", "ptlrpc_conformance.suites.test_framing",
        "--iut", "reference", "--conformance-report", str(path), "-k", "v2-native")
    assert result.ret == 6, result.stdout.str()
    rep = json.loads(path.read_text())
    case = {c["id"]: c for c in rep["cases"]}["framing.magic.v2-native.decode"]
    assert case["verdict"] == report_module.SUITE_ERROR
    assert case["failed_requirements"] == []
    assert "bug in ptlrpc-conformance" in case["message"] and "KeyError" in case["message"]
    assert rep["summary"][report_module.SUITE_ERROR] == 1
    assert all(e["verdict"] not in ("fail", "error") for e in rep["requirements"].values())
    assert "bug in ptlrpc-conformance" in result.stdout.str()


BROKEN_COLLECTION = """
def pytest_generate_tests(metafunc):
    if metafunc.function.__name__ == "test_struct_decode":
        raise RuntimeError("planted parametrization bug")
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_a_suite_module_that_does_not_collect_is_the_suites_bug(run_cli, tmp_path, workers):
    """A suite module whose collection breaks ends the run as a bug of the suite (exit 6, the
    report incomplete and naming the module and the error), not as an interruption (exit 1)."""
    (tmp_path / "planted_collection_bug.py").write_text(BROKEN_COLLECTION)
    out = tmp_path / "o"
    run = run_cli("certify", "--area", "structs", *workers, "-q", "--out", str(out), "--",
                  "-p", "planted_collection_bug", out=False)
    assert run.rc == 6, run.stdout[-2000:] + run.stderr[-2000:]
    rep = json.loads((out / "report.json").read_text())
    assert rep["exit_status"] == 6 and rep["incomplete"]
    assert "planted parametrization bug" in rep["incomplete_reason"] and "bug in ptlrpc-conformance" in \
        rep["incomplete_reason"]
    assert [e["where"] for e in rep["collection_errors"]] == ["test_structs.py"]
    assert "exit status: 6" in run.stdout


def test_a_users_module_that_does_not_collect_keeps_pytests_status(pytester):
    pytester.makepyfile(test_mine="raise ImportError('my own module is broken')\n")
    path = pytester.path / "r.json"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--conformance-report", str(path))
    assert result.ret == 2, result.stdout.str()


def test_a_users_own_case_keeps_pytests_verdict(pytester):
    pytester.makepyfile(test_mine="""
        import pytest

        @pytest.mark.conformance(case="local.broken.decode", requirements=["HDR-MAGIC-1"])
        def test_my_own_case(iut, need):
            need(iut, "decode")
            raise KeyError("my own bug")
    """)
    path = pytester.path / "r.json"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--conformance-report", str(path))
    assert result.ret == 1
    case = json.loads(path.read_text())["cases"][0]
    assert case["verdict"] == "fail" and case["failed_requirements"] == ["HDR-MAGIC-1"]


def test_verify_report_says_when_the_installed_suite_differs(run_cli, tmp_path):
    run = run_cli("certify", "--iut", "reference", "--area", "protocol")
    rep = run.report
    rep["suite"]["sha256"] = "0" * 64
    changed = tmp_path / "changed.json"
    changed.write_text(json.dumps(rep))
    again = run_cli("verify-report", str(changed), out=False)
    assert "the installed suite differs from the one that wrote the report" in again.stdout
    assert again.rc == 0, again.stdout + again.stderr     # the verdicts themselves agree


def test_the_suite_hash_follows_the_code(tmp_path, monkeypatch):
    """Two packages that differ in one byte of code hash differently (the hash covers code,
    not only data)."""
    import pathlib
    import shutil
    import ptlrpc_conformance
    src = pathlib.Path(ptlrpc_conformance.__file__).parent
    copy = tmp_path / "ptlrpc_conformance"
    shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))
    hashes = []
    for text in ("", "\n# one more line\n"):
        with open(copy / "harness" / "verdicts" / "judge.py", "a", encoding="utf-8") as f:
            f.write(text)
        code = (f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
                "from ptlrpc_conformance.harness.outputs.report import suite_hash; print(suite_hash())")
        import subprocess
        hashes.append(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                                     check=True).stdout.strip())
    assert len(set(hashes)) == 2 and all(len(h) == 64 for h in hashes)


PROPERTY_BUG = textwrap.dedent("""
    # a bug planted in the judge a property uses: a KeyError inside a check is the suite's
    import ptlrpc_conformance.harness.verdicts.judge as judge

    def broken(*args, **kwargs):
        raise KeyError("a key the judge forgot")

    judge.judge_decode = broken
""")


def test_a_bug_in_a_propertys_check_is_the_suites(pytester):
    pytester.makepyfile(planted_property_bug=PROPERTY_BUG)
    path = pytester.path / "r.json"
    result = pytester.runpytest_subprocess(
        "-p", "planted_property_bug", "-p", "no:cacheprovider", "--pyargs",
        "ptlrpc_conformance.suites.test_properties", "--iut", "reference", "--conformance-report", str(path),
        "--conformance-examples", "5", "-k", "arbitrary")
    assert result.ret == 6, result.stdout.str()[-3000:]
    case = {c["id"]: c for c in json.loads(path.read_text())["cases"]}["framing.arbitrary-bytes.decode"]
    assert case["verdict"] == report_module.SUITE_ERROR and case["failed_requirements"] == []


def test_an_unreadable_iut_result_is_still_the_iuts():
    from ptlrpc_conformance.harness.transport.protocol import Outcome
    from ptlrpc_conformance.harness.verdicts import judge
    import pytest
    with pytest.raises(judge.UnreadableResult, match="'data' is not hex"):
        judge.result_hex(Outcome("ok", result={"data": "zz"}), "encode")
    with pytest.raises(judge.UnreadableResult, match="'data' is not a hex string"):
        judge.result_hex(Outcome("ok", result={}), "encode")
