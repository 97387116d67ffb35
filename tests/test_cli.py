"""The command line: exit statuses 0/1/2/3, the report, decode, lint-vectors, requirements."""
import json
import sys

import pytest


def test_certify_reference_in_process_passes(run_cli):
    run = run_cli("--iut", "reference")
    assert run.rc == 0, run.stdout + run.stderr
    r = run.report
    assert r["format"] == "ptlrpc-conformance-report/1"
    assert r["profile"] == "lustre-2.17.57" and r["lustre_version"] == "2.17.57"
    assert r["iut"]["hello"]["protocol"] == 1
    assert r["summary"]["total"] >= 30 and r["summary"]["pass"] == r["summary"]["total"]
    assert all(c["requirements"] for c in r["cases"])
    assert r["requirements"]["HDR-BUFCOUNT-1"]["verdict"] == "pass"


def test_certify_subcommand_through_exec_with_workers(run_cli):
    run = run_cli("certify", "--iut", f"exec:{sys.executable} -m ptlrpc_conformance.reference", "-n", "2")
    assert run.rc == 0, run.stdout + run.stderr
    assert run.report["summary"]["pass"] == run.report["summary"]["total"] >= 30


def test_reference_passes_the_literal_profile(run_cli):
    run = run_cli("--profile", "lustre-2.17.57-literal", "-k", "framing")
    assert run.rc == 0
    assert run.report["profile"] == "lustre-2.17.57-literal"


@pytest.mark.parametrize("args, text", [
    (["--iut", "nonsense"], "expected 'reference', 'python:package.module:factory' or 'exec:COMMAND'"),
    (["--iut", "python:no_such_module_xyz:f"], "cannot import no_such_module_xyz"),
    (["--iut", "python:iuts"], "expected python:package.module:factory"),
    (["--iut", "exec:'unbalanced"], "No closing quotation"),
    (["--profile", "lustre-1.8"], "unknown profile 'lustre-1.8'"),
    (["--vectors", "/no/such/dir"], "/no/such/dir: no such vector file or directory"),
    (["--bogus-option"], "unrecognized arguments: --bogus-option"),
    (["frobnicate"], "unknown command 'frobnicate'"),
    (["-k", "no_case_has_this_name"], "no case was selected"),
])
def test_usage_errors_exit_2(run_cli, args, text):
    run = run_cli(*args)
    assert run.rc == 2, run.stdout + run.stderr
    assert text in run.stderr
    assert "Traceback" not in run.stderr


def test_user_vectors_join_the_run(run_cli, tmp_path):
    (tmp_path / "mine.yaml").write_text("""
format: ptlrpc-conformance-vectors/1
area: local
vectors:
- id: local.bufcount.huge
  title: bufcount 0xFFFFFFFF
  requirements: [HDR-BUFCOUNT-1]
  cite: [RULES HDR-6]
  verdict: invalid
  direction: reply
  errno: [EINVAL]
  bytes: ["ffffffff 00000000 d30bd00b", {fill: "00", count: 20}]
""")
    run = run_cli("--vectors", str(tmp_path / "mine.yaml"), "-k", "local or framing.magic")
    assert run.rc == 0, run.stdout + run.stderr
    assert run.verdicts()["local.bufcount.huge.decode"] == "pass"


def test_bad_user_vectors_are_named_by_file_id_and_field(run_cli, tmp_path):
    (tmp_path / "bad.yaml").write_text("""
format: ptlrpc-conformance-vectors/1
vectors:
- id: local.bad.one
  title: t
  requirements: [NO-SUCH-1]
  cite: [x]
  verdict: invalid
  direction: request
  errno: [ENOENT]
  bytes: ["zz"]
""")
    run = run_cli("--vectors", str(tmp_path))
    assert run.rc == 2
    err = run.stderr
    assert "bad.yaml: vector 0 local.bad.one.requirements: unknown requirement 'NO-SUCH-1'" in err
    assert "local.bad.one.errno" in err and "local.bad.one.bytes" in err
    lint = run_cli("lint-vectors", str(tmp_path), out=False)
    assert lint.rc == 2 and "local.bad.one.bytes[0]: 'zz' is not hex" in lint.stdout


def test_lint_vectors_bundled_is_clean(run_cli):
    run = run_cli("lint-vectors", out=False)
    assert run.rc == 0 and "no problems" in run.stdout


def test_lint_vectors_reports_yaml_syntax_with_line(run_cli, tmp_path):
    (tmp_path / "broken.yaml").write_text("format: x\nvectors: [\n  - id: a\n")
    run = run_cli("lint-vectors", str(tmp_path / "broken.yaml"), out=False)
    assert run.rc == 2 and "broken.yaml:" in run.stdout and "not valid YAML" in run.stdout


def test_decode_prints_annotated_dump_and_the_iut_answer(run_cli):
    msg = "01000000" "00000000" "d30bd00b" + "00" * 20 + "b8000000" "00000000" + \
          "00" * 8 + "67120000" "03000100" "90010000" + "00" * 164
    run = run_cli("decode", msg, out=False)
    assert run.rc == 0, run.stderr
    assert "     8  d3 0b d0 0b" in run.stdout and "lm_magic = 198183891 = 0xbd00bd3" in run.stdout
    assert "[0] pb_opc = 400" in run.stdout
    assert '"pb_opc": 400' in run.stdout
    bad = run_cli("decode", msg[:60], out=False)
    assert bad.rc == 1 and "rejected with EINVAL" in bad.stdout
    nothex = run_cli("decode", "xyz", out=False)
    assert nothex.rc == 2 and "not hex" in nothex.stderr


def test_requirements_lists_the_registry(run_cli):
    run = run_cli("requirements", out=False)
    assert run.rc == 0
    assert "HDR-BUFCOUNT-1" in run.stdout
    import re
    m = re.search(r"coverage: (\d+) of (\d+) requirements of profile lustre-2.17.57 are exercised \((\d+) of (\d+) MUST\)",
                  run.stdout)
    assert m and m.group(1) == m.group(2) and m.group(3) == m.group(4), run.stdout[-500:]


def test_help_and_version(run_cli):
    assert "Exit status" in run_cli("--help", out=False).stdout
    assert run_cli("--version", out=False).stdout.startswith("ptlrpc-conformance ")


def test_errno_agnostic_mode_judges_accept_reject_and_reports_the_class(run_cli):
    strict = run_cli("--iut", "python:iuts:ebadmsg", "--examples", "20", "-k", "framing")
    assert strict.rc == 1
    assert strict.verdicts()["framing.bufcount.zero.decode"] == "fail"
    assert "actual:   rejected with EBADMSG" in strict.case("framing.bufcount.zero.decode")["message"]
    for run in (run_cli("--iut", "python:iuts:ebadmsg", "--ignore-errno-class", "--examples", "20", "-k", "framing"),
                run_cli("--iut", "python:iuts:ebadmsg_agnostic", "--examples", "20", "-k", "framing")):
        assert run.rc == 0, run.stdout[-2000:]
        notes = run.case("framing.bufcount.zero.decode")["notes"]
        assert notes["errno"] == "EBADMSG"
        assert notes["errno_class_mismatch"] == "expected EINVAL, got EBADMSG"


def test_export_writes_vectors_and_derived_cases(run_cli, tmp_path):
    out = tmp_path / "cases.json"
    run = run_cli("export", "--format", "json", "--out", str(out), out=False)
    assert run.rc == 0, run.stderr
    doc = json.loads(out.read_text())
    assert doc["format"] == "ptlrpc-conformance-export/1" and doc["count"] == len(doc["cases"])
    ids = {c["id"] for c in doc["cases"]}
    assert "framing.bufcount.zero" in ids and "framing.magic.v2-native.swabbed" in ids
    assert "framing.magic.v2-native.cut-17" in ids and "framing.magic.v2-native.bufcount+1" in ids
    cut = next(c for c in doc["cases"] if c["id"] == "framing.magic.v2-native.cut-17")
    assert cut["verdict"] == "invalid" and cut["errno"] == ["EINVAL"] and len(cut["data"]) == 34
    assert cut["derived_from"] == "framing.magic.v2-native"


def test_same_seed_gives_the_same_counterexample(run_cli):
    """Property cases are derandomized: one seed, one IUT, one result - the same shrunk
    counterexample included."""
    args = ("--iut", "python:iuts:magic_unchecked", "--seed", "1", "-k", "framing.mutations", "--examples", "200")
    a, b = run_cli(*args), run_cli(*args)
    assert a.report["seed"] == b.report["seed"] == 1
    assert a.verdicts()["framing.mutations.decode"] == "fail"
    assert a.case("framing.mutations.decode")["message"] == b.case("framing.mutations.decode")["message"]
    assert "counterexample (seed 1, shrunk)" in a.case("framing.mutations.decode")["message"]
