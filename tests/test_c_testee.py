"""The C example testee (examples/c-testee): built with the machine's cc, warnings as
errors; certified green by the suite, plain and under AddressSanitizer/UBSan."""
import os
import subprocess

import pytest

from conftest import ROOT, require_tool

SRC = ROOT / "examples" / "c-testee"


@pytest.fixture(scope="module")
def built():
    for tool in ("cc", "make"):          # the C testee is built with a C compiler and make
        require_tool(tool)
    proc = subprocess.run(["make", "-C", str(SRC), "ptlrpc-testee", "ptlrpc-testee-san"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return SRC


@pytest.mark.parametrize("binary", ["ptlrpc-testee", "ptlrpc-testee-san"])
def test_c_testee_is_certified_green(run_cli, built, binary, monkeypatch):
    monkeypatch.setenv("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1")
    run = run_cli("--iut", f"exec:{built / binary}", "--examples", "100")
    assert run.rc == 0, run.stdout[-4000:] + run.stderr[-2000:]
    summary = run.report["summary"]
    assert summary["fail"] == summary["error"] == 0
    not_applicable = {c for c, v in run.verdicts().items() if v == "not-applicable"}
    # the example declares decode and encode only: the structure, target, recovery and client
    # cases are not applicable
    assert all(c.startswith(("structs.", "target.", "recovery.", "client.")) for c in not_applicable)
    assert summary["pass"] + len(not_applicable) == summary["total"] and summary["pass"] > 150
    assert run.report["iut"]["hello"]["name"].startswith("ptlrpc-conformance C")


def test_c_testee_stderr_is_clean_under_sanitizers(built):
    requests = "".join(line + "\n" for line in (
        '{"id":1,"op":"hello"}',
        '{"id":2,"op":"decode","data":"00000000","direction":"request"}',
        '{"id":3,"op":"decode","data":"' + "ff" * 64 + '","direction":"reply"}',
        '{"id":4,"op":"encode","message":{"buffers":[null,"0102"]}}',
        'not json',
        '{"id":5,"op":"frobnicate"}',
    ))
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1")
    proc = subprocess.run([str(built / "ptlrpc-testee-san")], input=requests, capture_output=True, text=True,
                          env=env, timeout=30)
    assert proc.returncode == 0 and proc.stderr == ""
    assert len(proc.stdout.splitlines()) == 6
