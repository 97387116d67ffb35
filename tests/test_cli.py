"""The command line: exit statuses 0/1/2/3, the report, decode, lint-vectors, requirements."""
import json
import os
import shlex
import subprocess
import sys

import pytest

from conftest import USER_VECTOR
from ptlrpc_conformance.harness.ost.client_judge import RULES


def test_certify_reference_in_process_passes(certified):
    run = certified("reference")
    assert run.rc == 0, run.stdout + run.stderr
    r = run.report
    assert r["format"] == "ptlrpc-conformance-report/1"
    assert r["profile"] == "lustre-2.17.57" and r["lustre_version"] == "2.17.57"
    assert r["iut"]["hello"]["protocol"] == 1
    # every case passes but the client cases, which are not applicable (the reference is no client)
    assert r["summary"]["total"] >= 30 and r["summary"]["pass"] == r["summary"]["total"] - len(RULES)
    assert {c["id"].split(".")[0] for c in r["cases"] if c["verdict"] != "pass"} == {"client"}
    assert r["summary"]["not-applicable"] == len(RULES)
    assert all(c["requirements"] for c in r["cases"])
    assert r["requirements"]["HDR-BUFCOUNT-1"]["verdict"] == "pass"


def test_certify_subcommand_through_exec_with_workers(run_cli):
    run = run_cli("certify", "--iut", f"exec:{sys.executable} -m ptlrpc_conformance.reference", "-n", "2")
    assert run.rc == 0, run.stdout + run.stderr
    assert run.report["summary"]["pass"] == run.report["summary"]["total"] - len(RULES) >= 30
    assert run.report["summary"]["not-applicable"] == len(RULES)        # the client cases


def test_an_old_case_id_selects_the_cases_that_replaced_it(run_cli):
    """`--case target.stateful.exchange` (the id before the stateful suite was split) runs
    every part, and report.json's `aliases` says which cases the old ids map to."""
    from ptlrpc_conformance.harness.data.registry import case_aliases
    run = run_cli("--case", "target.stateful.exchange", "--case", "framing.magic.zero.decode")
    assert run.rc == 0, run.stdout[-2000:] + run.stderr[-2000:]
    parts = list(case_aliases()["target.stateful.exchange"])
    assert sorted(run.verdicts()) == sorted(parts + ["framing.magic.zero.decode"])
    assert run.report["aliases"] == {old: list(new) for old, new in case_aliases().items()}
    assert run.report["aliases"]["target.stateful.exchange"] == parts
    assert run.report["aliases"]["recovery.stateful.restart"][0] == "recovery.stateful.restart.1"
    listed = run_cli("list", "--area", "recovery", out=False).stdout
    assert all(p in listed for p in case_aliases()["recovery.stateful.restart"])
    assert "recovery.stateful.restart " not in listed


def test_reference_passes_the_literal_profile(run_cli):
    run = run_cli("--profile", "lustre-2.17.57-literal", "-k", "framing")
    assert run.rc == 0
    assert run.report["profile"] == "lustre-2.17.57-literal"


@pytest.mark.parametrize("args, text", [
    (["--iut", "nonsense"], "expected 'reference[:RELEASE]', 'python:package.module:factory', 'exec:COMMAND', "
                            "'tshark[:PROGRAM]', 'lnet-tcp:NID?target=UUID' or 'client:COMMAND'"),
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


def test_a_python_iut_that_cannot_be_imported_cannot_start(run_cli):
    """Like an exec: command that cannot run: exit 3, with a report that says why."""
    for spec, text in (("python:no_such_module_xyz:f", "cannot import no_such_module_xyz"),
                       ("python:iuts:no_such_factory", "iuts has no callable 'no_such_factory'")):
        run = run_cli("--iut", spec)
        assert run.rc == 3, run.stdout + run.stderr
        assert text in run.report["iut"]["start_failure"] and run.report["incomplete"] is True
        assert "Traceback" not in run.stderr


def test_the_console_script_imports_a_python_iut_from_the_current_directory(tmp_path):
    """`ptlrpc-conformance` finds ./testee.py as `python3 -m ptlrpc_conformance` does."""
    import shutil
    script = shutil.which("ptlrpc-conformance")
    assert script, "the console script is not on PATH: install the package as the README says"
    (tmp_path / "testee_here.py").write_text("from ptlrpc_conformance.reference import make_testee\n"
                                             "def make():\n    return make_testee(capabilities=('decode',))\n")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([script, "certify", "--iut", "python:testee_here:make", "--area", "protocol",
                           "--out", str(tmp_path / "out")], cwd=tmp_path, capture_output=True, text=True, env=env)
    assert "certifying" in proc.stdout and "cannot import" not in proc.stdout + proc.stderr, proc.stderr
    assert json.loads((tmp_path / "out" / "report.json").read_text())["iut"]["start_failure"] is None


def test_user_vectors_join_the_run(run_cli, tmp_path):
    (tmp_path / "mine.yaml").write_text(USER_VECTOR)
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
    assert "HDR-BUFCOUNT-1" in run.stdout
    import re
    m = re.search(r"coverage: (\d+) of (\d+) requirements of profile lustre-2.17.57 are exercised \((\d+) of (\d+) MUST\)",
                  run.stdout)
    # every requirement has a case, a client's too (client.conduct.*, run by certify --client)
    assert m and m.group(1) == m.group(2) and m.group(3) == m.group(4), run.stdout[-500:]
    assert re.search(r"^CLI-XID-1 +\S+ +cases=1 ", run.stdout, re.M), run.stdout[-500:]
    assert run.rc == 0


def test_help_and_version(run_cli):
    assert "Exit status" in run_cli("--help", out=False).stdout
    assert run_cli("--version", out=False).stdout.startswith("ptlrpc-conformance ")


def test_errno_agnostic_mode_judges_accept_reject_and_reports_the_class(run_cli, no_shrinking):
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
        # an errno-class rule keeps its accept/reject evidence; one that is all errno class or
        # order of checks (errno_only in requirements.yaml) is not judged, not a pass of any kind
        reqs = run.report["requirements"]
        assert reqs["HDR-BUFCOUNT-1"]["verdict"] == "pass (accept/reject only)"
        assert reqs["HDR-ORDER-1"]["verdict"] == "not judged (errno-agnostic)", reqs["HDR-ORDER-1"]
        assert "HDR-ORDER-1" not in run.report["level"]["not_run"]


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


def test_a_client_reporting_eproto_for_every_bad_reply_passes_framing(run_cli, no_shrinking, certified):
    """A Lustre client turns every reply it cannot unpack into -EPROTO (target-rules §9): a
    testee doing the same passes every framing case; EPROTO for a bad *request* still fails.
    Its EPROTO is no evidence of the order of the checks (HDR-ORDER-1): any check of a reply
    may end in it, where the reference's EINVAL for a wrong version shows that check first."""
    client = run_cli("--iut", "python:iuts:client_errnos", "--area", "framing")
    assert client.rc == 0, client.stdout[-3000:]
    replies = [c for c in client.report["cases"] if c["id"].startswith("framing.") and c["verdict"] == "pass"]
    assert replies, "no framing case ran"
    order_case = "framing.order.version-before-type.decode"      # a reply: wrong pb_version and pb_type
    mine = next(c for c in client.report["cases"] if c["id"] == order_case)
    assert mine["verdict"] == "pass" and "HDR-ORDER-1" not in mine["exercised"], mine
    reference = next(c for c in certified("reference").report["cases"] if c["id"] == order_case)
    assert "HDR-ORDER-1" in reference["exercised"], reference
    everywhere = run_cli("--iut", "python:iuts:eproto_everywhere", "--area", "framing")
    assert everywhere.rc == 1
    failed = {c["id"] for c in everywhere.report["cases"] if c["verdict"] == "fail"}
    assert "framing.bufcount.zero.decode" in failed          # a request: EINVAL is due, not EPROTO


# ---- what a run prints: progress, a line per failing case, the verdict block at the end --------

def _block(stdout: str) -> list[str]:
    lines = stdout.rstrip("\n").splitlines()
    return lines[lines.index("== ptlrpc-conformance verdict =="):]


def test_default_output_is_a_line_per_file_and_per_failing_case_then_the_verdict(run_cli):
    run = run_cli("--iut", "python:iuts:no_header_pad", "-k", "framing.magic or structs.obdo", html=True)
    assert run.rc == 1
    lines = run.stdout.splitlines()
    failing = sorted(c["id"] for c in run.report["cases"] if c["verdict"] in ("fail", "error"))
    assert failing
    # progress: one line per suite file (and its continuation lines), named inside the package
    progress = [line for line in lines if line.startswith("ptlrpc_conformance/suites/test_")]
    assert {line.split()[0] for line in progress} == {"ptlrpc_conformance/suites/test_framing.py",
                                                      "ptlrpc_conformance/suites/test_structs.py"}
    assert "PASSED" not in run.stdout and "_____" not in run.stdout          # no per-case lines, no tracebacks
    # one line per failing case: verdict, id, the cause (expected and actual), then the charged requirements
    fail_lines = [line for line in lines if line.startswith(("FAIL  ", "ERROR "))]
    assert [line.split()[1].rstrip(":") for line in fail_lines] == failing
    first = next(line for line in fail_lines if line.split()[1] == "framing.magic.v2-native.decode:")
    assert first.index("expected: accepted; actual: rejected with EINVAL") < first.index("[HDR-MAGIC-1")
    # the verdict block comes after pytest's summary line, on lines of its own
    block = _block(run.stdout)
    summary_at = max(i for i, line in enumerate(lines) if line.startswith("=") and " failed" in line)
    assert summary_at < lines.index(block[0])
    must = run.report["level"]["failing_must"]
    assert block[1].startswith("level: not conformant")
    assert f"failing MUST requirements: {len(must)}" in block
    assert [line.split()[0] for line in block if line.startswith("  ") and line.split()[0] in must] == must
    assert f"report: {run.out / 'report.json'} (and report.html, junit.xml, reproducers/)" in block
    assert block[-1] == "exit status: 1" and run.report["exit_status"] == 1


def test_verbose_output_has_a_line_per_case_and_every_failure_in_full(run_cli):
    run = run_cli("--iut", "python:iuts:no_header_pad", "-k", "framing.magic", "-v")
    assert run.rc == 1
    assert run.stdout.count(" PASSED") + run.stdout.count(" FAILED") >= len(run.report["cases"])
    assert "expected: accepted" in run.stdout and "header pad" in run.stdout   # the dump, in full
    assert _block(run.stdout)[-1] == "exit status: 1"


def test_quiet_output_is_progress_and_the_verdict(run_cli):
    run = run_cli("--iut", "reference", "-k", "framing.magic", "-q")
    assert run.rc == 0
    block = _block(run.stdout)
    assert block[1] == "level: " + _level_words(run.report["level"]) and block[-1] == "exit status: 0"
    assert "failing MUST requirements: none" in block and "test_framing.py" not in run.stdout
    # the block names what the level was judged against: the IUT and the profile
    assert block[2:4] == ["iut: ptlrpc-conformance reference 0.1.0 (--iut reference)", "profile: lustre-2.17.57"]


def _level_words(level: dict) -> str:
    from ptlrpc_conformance.harness.outputs.verdict import level_name
    return level_name(level)


def test_gate_messages_are_on_their_own_lines_after_the_summary(run_cli, tmp_path):
    kf = tmp_path / "kf.yaml"
    kf.write_text("format: ptlrpc-conformance-known-failures/1\nentries:\n"
                  "- id: framing.magic.v1.decode\n  reason: fixed since\n")
    run = run_cli("--iut", "reference", "-k", "framing.magic", "--known-failures", str(kf))
    assert run.rc == 1
    block = _block(run.stdout)
    assert "regression gate: FAILED" in block
    assert any("entry framing.magic.v1.decode is stale" in line for line in block)
    assert not any("[100%]" in line and "gate" in line for line in run.stdout.splitlines())
    assert block[-1] == "exit status: 1"


def test_run_one_case_ends_with_the_verdict(run_cli):
    run = run_cli("run", "framing.bufcount.zero.decode")
    assert run.rc == 0
    assert _block(run.stdout)[1].startswith("level: ") and run.stdout.rstrip().endswith("exit status: 0")


def test_listings_end_quietly_when_the_reader_closes_the_pipe():
    """`list | head -1`, `requirements | head -1`: the first line, no traceback, exit 0."""
    for command in ("list", "requirements"):
        proc = subprocess.run(f"{shlex.quote(sys.executable)} -m ptlrpc_conformance.cli {command} | head -1",
                              shell=True, capture_output=True, text=True, executable="/bin/bash")
        assert len(proc.stdout.splitlines()) == 1
        assert "Traceback" not in proc.stderr and "INTERNALERROR" not in proc.stderr + proc.stdout, proc.stderr
        status = subprocess.run(f"set -o pipefail; {shlex.quote(sys.executable)} -m ptlrpc_conformance.cli "
                                f"{command} | head -1 >/dev/null", shell=True, executable="/bin/bash")
        assert status.returncode == 0, command


def test_cli_messages_name_the_cli_and_its_commands(run_cli):
    listed = run_cli("list", "--area", "framin", out=False)
    assert listed.rc == 2 and "--area framin: unknown area (closest: framing)" in listed.stdout + listed.stderr
    assert "--conformance-area" not in listed.stdout + listed.stderr
    two = run_cli("run", "framing.magic.zero.decode", "framing.magic.v1.decode", out=False)
    assert two.rc == 2 and "one case id at a time" in two.stderr and "module or package" not in two.stderr
    bare = run_cli(out=False)
    assert bare.rc == 2 and "ptlrpc-conformance [certify]" in bare.stdout and "certifying" not in bare.stdout
    nothing = run_cli("-k", "no-case-is-named-so")
    assert nothing.rc == 2 and "no case was selected by -k no-case-is-named-so" in nothing.stderr
    assert "level:" not in nothing.stdout


def test_a_failing_line_names_the_cause_before_the_requirements():
    from ptlrpc_conformance.cli.session import failing_line
    crash = {"id": "framing.magic.zero.decode", "verdict": "error", "requirements": ["HDR-MAGIC-3", "DEC-ROBUST-1"],
             "failed_requirements": ["HDR-MAGIC-3", "DEC-ROBUST-1"],
             "message": "HDR-MAGIC-3 (MUST): A decoder rejects ...\nframing.magic.zero: A zero magic is refused\n"
                        "harness/protocol error (crash): the testee was killed by signal 11 (SIGSEGV)\ninput ..."}
    assert failing_line(crash) == ("ERROR framing.magic.zero.decode: crash: the testee was killed by signal 11 "
                                    "(SIGSEGV) [HDR-MAGIC-3,DEC-ROBUST-1]")
    field = {"id": "framing.body.x.decode", "verdict": "fail", "requirements": ["BODY-FIELDS-1", "BODY-STATUS-1"],
             "failed_requirements": ["BODY-STATUS-1"],
             "message": "BODY-STATUS-1 (MUST): pb_status ...\nframing.body.x: a very long title " + "x" * 300 +
                        "\nbody.pb_status: expected -107, got 65429\nbody.pb_opc: expected 400, got 0"}
    line = failing_line(field)
    assert line == "FAIL  framing.body.x.decode: body.pb_status: expected -107, got 65429 [BODY-STATUS-1]"


def test_every_command_names_a_function_of_its_family():
    """cli/__init__.py's dispatch table: each command is a function of its family's module."""
    import importlib

    from ptlrpc_conformance import cli
    for command, (module, function) in cli.COMMANDS.items():
        handler = getattr(importlib.import_module(f"ptlrpc_conformance.cli.{module}"), function, None)
        assert callable(handler), command
    assert all(f"ptlrpc-conformance {c}" in cli.usage() for c in cli.COMMANDS if c != "certify")


def test_the_command_answers_by_each_of_its_names():
    """The console script's entry point (pyproject.toml), `python -m ptlrpc_conformance` and
    `python -m ptlrpc_conformance.cli` are one command."""
    import importlib
    import pathlib
    import tomllib

    from ptlrpc_conformance import __version__
    pyproject = tomllib.loads((pathlib.Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())
    module, function = pyproject["project"]["scripts"]["ptlrpc-conformance"].split(":")
    assert getattr(importlib.import_module(module), function).__module__ == "ptlrpc_conformance.cli"
    for name in ("ptlrpc_conformance", "ptlrpc_conformance.cli"):
        proc = subprocess.run([sys.executable, "-m", name, "--version"], capture_output=True, text=True, timeout=60)
        assert (proc.returncode, proc.stdout.strip()) == (0, f"ptlrpc-conformance {__version__}"), name


def test_a_certification_sizes_the_young_generation_for_its_cases_and_puts_it_back(tmp_path):
    """In the command line's process, the cases run with the collector on and its young
    generation at RUN_GC_THRESHOLD; main() returns with the collector as it found it."""
    script = f"""
import gc, json, pytest
from ptlrpc_conformance.cli import main
seen = set()
real_main = pytest.main
class Spy:
    def pytest_runtest_call(self, item):
        seen.add((gc.isenabled(), gc.get_threshold()))
pytest.main = lambda args, plugins=(): real_main(args, plugins=list(plugins) + [Spy()])
gc.set_threshold(650, 9, 8)
status = main(["certify", "--iut", "reference", "--case", "framing.bufcount.zero.decode", "--out", {str(tmp_path / "out")!r}])
print(json.dumps({{"status": status, "seen": sorted(seen), "after": [gc.isenabled(), gc.get_threshold()]}}))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    from ptlrpc_conformance.harness.runstate import RUN_GC_THRESHOLD
    assert result["status"] == 0, proc.stdout + proc.stderr
    assert result["seen"] == [[True, list(RUN_GC_THRESHOLD)]]
    assert result["after"] == [True, [650, 9, 8]]


@pytest.mark.parametrize("quiet", [(), ("-q",)])
def test_a_closed_stdout_silences_the_output_and_nothing_else(tmp_path, quiet):
    """`certify ... | head -1` against a failing IUT: the reader is gone after one line, yet
    the report is written whole and the process exits with the verdict's status (1), the
    status report.json records, so a CI step piping into head or grep -m goes red."""
    from conftest import TESTS
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "ptlrpc_conformance.cli", "certify", "--iut", "python:iuts:no_header_pad",
                             "-k", "framing.magic", "--examples", "20", "--out", str(out), *quiet],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=tmp_path)
    first = proc.stdout.readline()
    proc.stdout.close()                 # as `head -1` does
    rc = proc.wait(timeout=300)
    assert first.startswith(b"ptlrpc-conformance: certifying"), first
    report = json.loads((out / "report.json").read_text())
    assert rc == 1 and report["exit_status"] == rc, (rc, report["exit_status"])
    assert not report.get("incomplete") and report["summary"]["fail"] >= 1
    assert (out / "report.html").is_file() and (out / "junit.xml").is_file()


@pytest.mark.parametrize("typo", [("--area", "framin"), ("--case", "framing.magic.bad"),
                                  ("--area", "framin", "--profile", "all")])        # a release matrix too
def test_an_unknown_area_or_case_is_refused_before_the_iut_starts_and_out_is_touched(run_cli, tmp_path, typo):
    out = tmp_path / "previous"
    out.mkdir()
    (out / "junit.xml").write_text("<previous/>")
    started = tmp_path / "started"
    iut = f"exec:sh -c 'touch {started}; exec {sys.executable} -m ptlrpc_conformance.reference'"
    run = run_cli("--iut", iut, *typo, "--out", str(out), out=False)
    assert run.rc == 2, run.stdout + run.stderr
    assert f"{typo[0]} {typo[1]}: unknown" in run.stderr, run.stderr
    assert not started.exists(), "the IUT was started"
    assert sorted(p.name for p in out.iterdir()) == ["junit.xml"]
    assert (out / "junit.xml").read_text() == "<previous/>"
