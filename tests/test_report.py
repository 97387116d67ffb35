"""The certification report: report.json, junit.xml, reproducers, verify-report, Ctrl-C."""
import json
import os
import signal
import subprocess
import sys
import time
from importlib import resources

import pytest
import xmlschema

from conftest import TESTS

SELECT = ("-k", "framing.magic or framing.bufcount or structs.obdo")


def test_clean_report_of_the_reference(run_cli):
    run = run_cli("--iut", "reference", *SELECT)
    assert run.rc == 0
    r = run.report
    # a selection: every case passed, but the run certifies no capability whole
    assert r["level"]["status"] == "partial" and r["incomplete"] is False
    assert r["level"]["selection"]["keyword"] == SELECT[1] and r["level"]["selection"]["deselected"]
    assert set(r["sha256"]) == {"vectors", "requirements.yaml", "profiles.yaml", "facts.json", "layouts.json"}
    assert r["reproduce"][:4] == ["ptlrpc-conformance", "certify", "--iut", "reference"]
    assert "--seed" in r["reproduce"] and "-k" in r["reproduce"]
    assert all(c["ok"] for c in r["smoke"])
    assert r["environment"]["python"] and r["iut"]["hello"]["name"]
    assert not (run.out / "reproducers").exists()
    schema = xmlschema.XMLSchema(str(resources.files("ptlrpc_conformance.schemas").joinpath("junit-xunit2.xsd")))
    schema.validate(str(run.out / "junit.xml"))


def test_reproducers_fail_the_same_way(run_cli):
    broken = ("--iut", "python:iuts:no_header_pad")
    run = run_cli(*broken, *SELECT)
    assert run.rc == 1
    failed = {c["id"]: c["notes"]["signature"] for c in run.report["cases"] if c["verdict"] == "fail"}
    files = sorted((run.out / "reproducers").glob("*.yaml"))
    assert len(files) == len(failed) and failed
    again = run_cli(*broken, "--vectors", str(run.out / "reproducers"), "-k", "repro.")
    repro = {c["id"]: c for c in again.report["cases"] if c["id"].startswith("repro.")}
    for case_id, signature in failed.items():
        vector_id = "repro." + case_id
        vector_id = vector_id[: -len(".decode")] if vector_id.endswith(".decode") else vector_id[: -len(".encode")]
        hits = [c for cid, c in repro.items() if cid.startswith(vector_id + ".")]
        assert hits and any(c["verdict"] == "fail" and c["notes"]["signature"] == signature for c in hits), case_id
    fixed = run_cli("--iut", "reference", "--vectors", str(run.out / "reproducers"), "-k", "repro.")
    assert fixed.rc == 0


def test_verify_report_agrees_on_a_clean_and_a_failing_report(run_cli, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(TESTS))
    for iut, rc in (("reference", 0), ("python:iuts:accepts_151_byte_body", 1)):
        run = run_cli("--iut", iut, "-k", "framing.body")
        assert run.rc == rc
        proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "verify-report",
                               str(run.out / "report.json")], capture_output=True, text=True, env=env, cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "verdicts agree" in proc.stdout
    tampered = json.loads((run.out / "report.json").read_text())
    tampered["cases"][0]["verdict"] = "pass" if tampered["cases"][0]["verdict"] != "pass" else "fail"
    (tmp_path / "t.json").write_text(json.dumps(tampered))
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "verify-report", str(tmp_path / "t.json")],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 1 and "verdict(s) differ" in proc.stdout


def _wait_for_line(log, predicate, proc, limit: float = 300.0) -> None:
    """Wait until a line of the io-log `log` satisfies `predicate` (the run got there), the
    process ended, or `limit` seconds passed: an observable event, never a fixed sleep."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline and proc.poll() is None:
        if log.exists() and any(predicate(line) for line in log.read_text(errors="replace").splitlines()):
            return
        time.sleep(0.05)
    raise AssertionError(f"the run never logged the line waited for (exit {proc.poll()})")


def _hang_request(line: str) -> bool:
    """The request hostile.py hangs on: a decode whose lm_magic bytes are 0."""
    if not line.startswith("> "):
        return False
    try:
        req = json.loads(line[2:])
    except ValueError:
        return False
    data = req.get("data") or ""
    return req.get("op") == "decode" and data[16:24] == "00000000" and len(data) > 64


# Python turns SIGINT into KeyboardInterrupt only when the signal is at its default action as
# the program starts: a program started with SIGINT ignored (or blocked) keeps it so, and its
# run goes on to the end with a complete report.  A test run started as a background job of a
# shell without job control (`.ci/run &`, `nohup ... &`) passes SIGINT on ignored, through pytest
# and its xdist workers, to every command line a test starts.  The command lines these tests
# interrupt start through this prologue, which gives SIGINT its default action back and then
# becomes the command (same process): they test the command line's Ctrl-C, whatever the way
# the tests themselves were started.
INTERRUPTIBLE = [sys.executable, "-c",
                 "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL); "
                 "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT}); "
                 "os.execv(sys.executable, [sys.executable] + sys.argv[1:])"]


def _interrupted_run(tmp_path, iut, predicate=None, wait=None):
    """Run the command line and send it SIGINT once the io-log has a line satisfying
    `predicate`, or once `wait(proc)` returns (another observable event)."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    out, log = tmp_path / "out", tmp_path / "io.log"
    proc = subprocess.Popen([*INTERRUPTIBLE, "-m", "ptlrpc_conformance.cli", "--iut", iut,
                             "--iut-timeout", "60", "--out", str(out), "--io-log", str(log), "-q"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
    try:
        if wait is not None:
            wait(proc)
        else:
            _wait_for_line(log, predicate, proc)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc, stdout, stderr, out


def test_the_interrupted_command_lines_get_ctrl_c_back_whatever_the_tests_inherited():
    """Started from a process that ignores and blocks SIGINT (as a background job does), a
    Python program keeps no KeyboardInterrupt (a Ctrl-C would be lost, the run would end
    complete); started through INTERRUPTIBLE it has Python's own Ctrl-C handler."""
    parent = ("import signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
              "signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT}); "
              "sys.exit(subprocess.run(sys.argv[1:]).returncode)")
    probe = ("import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, "
             "signal.SIGINT in signal.pthread_sigmask(signal.SIG_BLOCK, ()))")
    plain = subprocess.run([sys.executable, "-c", parent, sys.executable, "-c", probe],
                           capture_output=True, text=True, timeout=120)
    started = subprocess.run([sys.executable, "-c", parent, *INTERRUPTIBLE, "-c", probe],
                             capture_output=True, text=True, timeout=120)
    assert plain.stdout.split() == ["False", "True"], plain.stdout + plain.stderr    # a Ctrl-C is lost
    assert started.stdout.split() == ["True", "False"], started.stdout + started.stderr


def test_ctrl_c_at_the_first_case_gives_an_incomplete_report(tmp_path, hostile):
    """A Ctrl-C at any moment after the run started: here as soon as the first request of a
    case is on its way."""
    proc, stdout, stderr, out = _interrupted_run(tmp_path, hostile("ok"), lambda line: line.startswith("> "))
    assert proc.returncode == 1, stdout.decode()[-2000:] + stderr.decode()[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["incomplete"] is True and report["incomplete_reason"]
    assert report["summary"]["total"] < 500


def test_ctrl_c_while_the_iut_starts_gives_an_incomplete_report(tmp_path, hostile):
    """A Ctrl-C while the command line waits for the IUT's hello (its preflight, before
    pytest starts): report.json, marked incomplete, no case run, exit status 1."""
    pids = tmp_path / "pids"

    def testee_started(proc):
        deadline = time.monotonic() + 300
        while not (pids.exists() and pids.read_text().endswith("\n")):
            assert proc.poll() is None and time.monotonic() < deadline, f"the testee never started (exit {proc.poll()})"
            time.sleep(0.05)

    proc, stdout, stderr, out = _interrupted_run(tmp_path, hostile(f"hellohang {tmp_path}"), wait=testee_started)
    assert proc.returncode == 1, stdout.decode()[-2000:] + stderr.decode()[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["incomplete"] is True and report["incomplete_reason"] == "interrupted before the first case"
    assert report["summary"]["total"] == 0 and report["iut"]["start_failure"] is None
    assert report["exit_status"] == 1 and report["level"]["status"] == "incomplete"
    assert "the report is marked incomplete" in stderr.decode()
    assert stdout.decode().rstrip().endswith("exit status: 1")


def test_ctrl_c_as_pytest_starts_gives_an_incomplete_report(tmp_path, hostile):
    """A Ctrl-C right after the line that says what is certified: pytest and its plugins are
    loading, or the first cases run; either way report.json is marked incomplete."""
    def certifying_line(proc):
        for line in proc.stdout:
            if line.startswith(b"ptlrpc-conformance: certifying "):
                return
        raise AssertionError(f"the run never said what it certifies (exit {proc.wait()})")

    proc, stdout, stderr, out = _interrupted_run(tmp_path, hostile("ok"), wait=certifying_line)
    assert proc.returncode == 1, stdout.decode()[-2000:] + stderr.decode()[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["incomplete"] is True and report["incomplete_reason"]
    assert report["summary"]["total"] < 500 and report["exit_status"] == 1


def test_ctrl_c_writes_a_partial_report_marked_incomplete(tmp_path, hostile):
    # the signal comes once the testee hangs on its message (the io-log shows it was sent)
    proc, stdout, stderr, out = _interrupted_run(tmp_path, hostile("hang"), _hang_request)
    assert proc.returncode == 1, stdout.decode()[-2000:] + stderr.decode()[-2000:]
    report = json.loads((out / "report.json").read_text())
    assert report["incomplete"] is True
    assert report["summary"]["total"] < 500
    # the report tells the truth: the process's exit status, and buckets that add up, the case
    # the run was stopped in counted as interrupted
    assert report["exit_status"] == 1
    summary = report["summary"]
    assert sum(v for k, v in summary.items() if k != "total") == summary["total"]
    interrupted = [c for c in report["cases"] if c["verdict"] == "interrupted"]
    assert summary["interrupted"] == len(interrupted) == 1, summary
    assert stdout.decode().rstrip().endswith("exit status: 1")


def test_a_ctrl_c_where_python_keeps_no_line_number_gives_an_incomplete_report(pytester, tmp_path):
    """Python 3.11 can leave a KeyboardInterrupt's traceback with an entry without a line
    number (tb_lineno None, an instruction the compiler gave no line); pytest's terminal
    reporter failed on it with a TypeError while noting the interruption, before pytest
    recorded it, so the session ended as if it had passed: report.json not marked incomplete
    and a crash (the CI failure of the Ctrl-C test: exit 1, a complete-looking report).  The
    interruption is raised here with such an entry."""
    pytester.makepyfile(test_stop="""
        import types

        def test_interrupted():
            try:
                raise KeyboardInterrupt
            except KeyboardInterrupt as e:
                frame = e.__traceback__.tb_frame
            # an instruction address past the code's end: Python finds no line for it
            raise KeyboardInterrupt().with_traceback(types.TracebackType(None, frame, 10 ** 6, -1))
    """)
    report = tmp_path / "report.json"
    result = pytester.runpytest_subprocess("--conformance-report", str(report), "-p", "no:cacheprovider")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()[-2000:] + result.stderr.str()[-2000:]
    doc = json.loads(report.read_text())
    assert doc["incomplete"] is True and doc["incomplete_reason"] == "interrupted"
    assert doc["exit_status"] == pytest.ExitCode.INTERRUPTED
    assert "TypeError" not in result.stderr.str() and "KeyboardInterrupt" in result.stdout.str()


def test_smoke_check_failures_are_reported(run_cli, hostile):
    run = run_cli("--iut", hostile("acceptsall"), "-k", "protocol.unknown")
    smoke = {c["check"]: c["ok"] for c in run.report["smoke"]}
    assert smoke["unknown op answered EOPNOTSUPP"] is False
    assert run.rc == 1


def test_list_prints_cases_and_requirements(run_cli):
    for args in (("list", "--area", "protocol"), ("certify", "--list", "--area", "protocol")):
        run = run_cli(*args, out=False)
        assert run.rc == 0
        assert "protocol.unknown-op.probe" in run.stdout and "PROTO-OPS-1" in run.stdout and "9 cases" in run.stdout


def test_run_one_case_records_the_protocol_lines(run_cli, tmp_path):
    log = tmp_path / "io.log"
    run = run_cli("run", "framing.bufcount.zero.decode", "--io-log", str(log))
    assert run.rc == 0 and list(run.verdicts()) == ["framing.bufcount.zero.decode"]
    lines = log.read_text().splitlines()
    assert lines[0].startswith("> ") and '"op": "hello"' in lines[0]
    assert any('"op": "decode"' in l for l in lines) and any('"error": "EINVAL"' in l for l in lines)


def test_max_fail_records_the_exit_status_of_the_process(run_cli):
    run = run_cli("--iut", "python:iuts:raises", "--max-fail", "1", "-k", "framing.magic")
    assert run.rc == 1 and run.report["incomplete"] and run.report["exit_status"] == 1
    summary = run.report["summary"]
    assert sum(v for k, v in summary.items() if k != "total") == summary["total"]


def test_summary_buckets_add_up_to_total(run_cli):
    run = run_cli("--iut", "python:iuts:decode_only", *SELECT)
    summary = run.report["summary"]
    assert set(summary) == {"pass", "fail", "error", "error (suite)", "not-applicable", "skipped", "interrupted",
                            "total"}
    assert sum(v for k, v in summary.items() if k != "total") == summary["total"] == len(run.report["cases"])
    assert summary["not-applicable"] > 0 and run.report["exit_status"] == run.rc


def test_an_iut_that_cannot_start_gets_a_report(run_cli):
    run = run_cli("--iut", "exec:/nonexistent/testee --flag", html=True)
    assert run.rc == 3
    r = run.report
    assert r["iut"]["start_failure"] and "cannot start /nonexistent/testee" in r["iut"]["start_failure"]
    assert r["iut"]["hello"] is None and r["cases"] == [] and r["exit_status"] == 3
    assert r["incomplete"] is True and r["incomplete_reason"].startswith("the IUT could not start: ")
    assert r["summary"]["total"] == 0 and r["reproduce"][:4] == ["ptlrpc-conformance", "certify", "--iut",
                                                                 "exec:/nonexistent/testee --flag"]
    assert (run.out / "report.html").exists()
    normal = run_cli("--iut", "reference", "-k", "framing.magic.zero").report
    assert set(r) == set(normal)                  # the same members as any report (docs/report.md)
    assert "level: incomplete (the IUT could not start: " in run.stdout and run.stdout.rstrip().endswith("exit status: 3")


def test_plugin_writes_a_report_when_the_iut_cannot_start(pytester, run_cli):
    """The plugin's report of an IUT that could not start (written from the plugin's own
    preflight) is the command line's (written by cli.py before pytest starts), but for the
    command that ran, where and when, and the time it took."""
    result = pytester.runpytest_subprocess("--pyargs", "ptlrpc_conformance.suites", "-p", "no:cacheprovider",
                                           "--iut", "exec:/nonexistent/testee", "--conformance-report", "r.json",
                                           "--conformance-examples", "20")
    assert result.ret == 3
    report = json.loads((pytester.path / "r.json").read_text())
    assert "cannot start /nonexistent/testee" in report["iut"]["start_failure"] and report["exit_status"] == 3
    cli = run_cli("--iut", "exec:/nonexistent/testee", "--examples", "20").report
    for doc in (report, cli):
        del doc["environment"]["cwd"]           # each ran in its own directory
    differ = {k for k in set(report) | set(cli) if report.get(k) != cli.get(k)}
    assert differ <= {"command", "duration_s", "started"}, {k: (report.get(k), cli.get(k)) for k in differ}


def test_verify_report_reruns_in_the_recorded_directory(run_cli, tmp_path):
    """`--iut exec:./run-ref x` means the testee of the directory the run ran in; the command is
    printed shell-quoted."""
    work = tmp_path / "work"
    work.mkdir()
    script = work / "run-ref"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -m ptlrpc_conformance.reference\n")
    script.chmod(0o755)
    run = run_cli("--iut", "exec:./run-ref x", "-k", "framing.magic", cwd=work)
    assert run.rc == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert run.report["environment"]["cwd"] == str(work)
    env = dict(os.environ, PYTHONPATH=str(TESTS))
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "verify-report", str(run.out / "report.json")],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert f"re-running in {work}: ptlrpc-conformance certify --iut 'exec:./run-ref x' --profile " in proc.stdout
    assert "verdicts agree" in proc.stdout
    moved = json.loads((run.out / "report.json").read_text())
    moved["environment"]["cwd"] = str(tmp_path / "gone")
    (tmp_path / "moved.json").write_text(json.dumps(moved))
    proc = subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", "verify-report", str(tmp_path / "moved.json")],
                          capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode == 2 and f"the run's working directory {tmp_path / 'gone'}" in proc.stderr


def test_certification_doc_quotes_the_reproduce_command():
    from ptlrpc_conformance.harness.outputs import certdoc
    from test_certdoc import small_report
    report = small_report()
    report["reproduce"] = ["ptlrpc-conformance", "certify", "--iut", "exec:node testee.js"]
    assert "`ptlrpc-conformance certify --iut 'exec:node testee.js'`" in certdoc.render(report)


def test_one_run_one_report_in_a_reused_out(run_cli, tmp_path):
    """A second run in the same --out leaves nothing of the first: its reproducers go (the
    ones this run reads with --vectors stay, its reproduce command names them), files that are
    not the suite's stay, and the verdict block lists only this run's outputs."""
    out = tmp_path / "same"
    first = run_cli("--iut", "python:iuts:no_header_pad", "-k", "framing.magic", "--out", str(out), out=False)
    assert first.rc == 1
    old = sorted(p.name for p in (out / "reproducers").glob("*.yaml"))
    assert len(old) > 1
    (out / "reproducers" / "notes.yaml").write_text("my own notes\n")
    replayed = out / "reproducers" / old[0]
    again = run_cli("--iut", "reference", "-k", "framing.magic or repro", "--vectors", str(replayed),
                    "--out", str(out), out=False)
    assert again.rc == 0, again.stdout[-2000:]
    left = sorted(p.name for p in (out / "reproducers").iterdir())
    assert left == sorted(["notes.yaml", old[0]])
    assert any(c["id"].startswith("repro.") for c in json.loads((out / "report.json").read_text())["cases"])


def test_run_writes_to_its_own_folder(run_cli, tmp_path):
    (tmp_path / "ptlrpc-conformance-report").mkdir()
    (tmp_path / "ptlrpc-conformance-report" / "report.json").write_text("{}")
    run = run_cli("run", "framing.magic.zero.decode", out=False)
    assert run.rc == 0, run.stderr
    assert (tmp_path / "ptlrpc-conformance-run" / "report.json").exists()
    assert (tmp_path / "ptlrpc-conformance-report" / "report.json").read_text() == "{}"


def test_a_failure_message_from_an_xdist_worker_is_the_serial_runs_message():
    """xdist puts the worker's name and interpreter before a worker's failure text; report.json
    keeps the failure alone, so the same seed gives the same message serially and under -n."""
    from types import SimpleNamespace

    from ptlrpc_conformance.harness.outputs.report import _failure_text
    failure = "HDR-MAGIC-3 (MUST): A decoder rejects any other lm_magic\nexpected: rejected"
    worker = SimpleNamespace(longreprtext="[gw1] linux -- Python 3.11.7 /usr/bin/python3\n" + failure)
    assert _failure_text(worker) == failure == _failure_text(SimpleNamespace(longreprtext=failure))
    quoted = SimpleNamespace(longreprtext=failure + "\n[gw0] a line of the IUT's own output")
    assert _failure_text(quoted) == quoted.longreprtext          # only a first line is the worker's


def test_a_second_ctrl_c_leaves_no_page_of_an_earlier_run_beside_the_new_report(tmp_path):
    """The second Ctrl-C lands after report.json is written and before the pages are (pytest's
    junit.xml, the command line's report.html): what sits beside the new report.json is of
    this run or nothing, never the earlier run's pages or reproducers."""
    out = tmp_path / "out"
    (out / "reproducers").mkdir(parents=True)
    for name in ("report.html", "junit.xml"):
        (out / name).write_text("earlier run")
    (out / "reproducers" / "framing.old.decode.yaml").write_text(
        "format: ptlrpc-conformance-vectors/1\narea: repro\nvectors:\n- id: repro.framing.old.decode\n")
    script = f"""
import _pytest.junitxml
from ptlrpc_conformance.cli import main, session
def second_ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt
_pytest.junitxml.LogXML.pytest_sessionfinish = lambda self: None     # stopped before junit.xml
session.write_html = second_ctrl_c                                     # and before report.html
print("status", main(["certify", "--iut", "reference", "--case", "framing.bufcount.zero.decode", "--out", {str(out)!r}]))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert proc.stdout.strip().splitlines()[-1] == "status 1", proc.stdout + proc.stderr
    report = json.loads((out / "report.json").read_text())
    assert [c["id"] for c in report["cases"]] == ["framing.bufcount.zero.decode"]
    assert sorted(p.name for p in out.iterdir()) == ["report.json"]


def test_a_matrix_run_leaves_no_page_of_an_earlier_run_beside_its_report(tmp_path):
    """`--profile all`: the matrix's report.json is written after its sub-runs, and a Ctrl-C
    before its report.html leaves what an earlier run wrote at the top of --out only if
    nothing removed it first: the earlier pages go before the sub-runs start."""
    out = tmp_path / "out"
    out.mkdir()
    for name in ("report.html", "junit.xml"):
        (out / name).write_text("earlier run")
    script = f"""
from ptlrpc_conformance.cli import main
from ptlrpc_conformance.harness.outputs import matrix
def ctrl_c(*args, **kwargs):
    raise KeyboardInterrupt
matrix.write_matrix = ctrl_c                                           # stopped before report.html
print("status", main(["certify", "--iut", "reference", "--profile", "all", "-q", "--case",
                      "framing.bufcount.zero.decode", "--out", {str(out)!r}]))
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert "ptlrpc-conformance: interrupted" in proc.stderr, proc.stdout + proc.stderr
    assert proc.stdout.strip().splitlines()[-1].startswith("status "), proc.stdout + proc.stderr
    from ptlrpc_conformance.harness.outputs.matrix import FORMAT
    assert json.loads((out / "report.json").read_text())["format"] == FORMAT
    assert not (out / "report.html").exists() and not (out / "junit.xml").exists(), sorted(p.name for p in out.iterdir())
