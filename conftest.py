"""Fixtures for the project's own tests (tests/).  The conformance suites themselves get
their fixtures from the plugin (ptlrpc_conformance.plugin, entry point pytest11)."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

ROOT = pathlib.Path(__file__).resolve().parent
TESTS = ROOT / "tests"
SHARED_SPEC = ROOT.parent / "shared" / "spec"


@pytest.fixture(scope="session")
def shared_spec() -> pathlib.Path:
    """../shared/spec, the project's spec sources.  CI and every development checkout have
    it beside the repository; a test that needs it says so when it is missing."""
    if not (SHARED_SPEC / "wire_facts.yaml").is_file():
        pytest.fail(f"{SHARED_SPEC} is missing: the facts tests need the shared spec beside the repository")
    return SHARED_SPEC


class CliRun:
    def __init__(self, proc: subprocess.CompletedProcess, out: pathlib.Path | None):
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.out = out

    @property
    def report(self) -> dict:
        return json.loads((self.out / "report.json").read_text())

    def verdicts(self) -> dict:
        return {c["id"]: c["verdict"] for c in self.report["cases"]}

    def assert_caught(self, must_fail: set[str]) -> None:
        """A broken IUT's run: exit 1, the cases of its rule among the failures, no harness errors."""
        assert self.rc == 1, self.stdout[-3000:] + self.stderr[-3000:]
        verdicts = self.verdicts()
        failed = {c for c, v in verdicts.items() if v == "fail"}
        assert must_fail <= failed, f"not caught: {must_fail - failed}"
        assert "error" not in verdicts.values()

    def case(self, case_id: str) -> dict:
        for c in self.report["cases"]:
            if c["id"] == case_id:
                return c
        raise KeyError(case_id)


@pytest.fixture
def run_cli(tmp_path):
    """run_cli(*args, out=True) runs `ptlrpc-conformance ARGS` in a subprocess with tests/ on
    PYTHONPATH (for --iut python:iuts:NAME) and returns a CliRun."""
    def _run(*args, out=True, timeout=300, cwd=None, input=None, examples=20):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(TESTS)] + [p for p in [env.get("PYTHONPATH")] if p])
        out_dir = tmp_path / f"out{len(list(tmp_path.iterdir()))}" if out else None
        cmd = [sys.executable, "-m", "ptlrpc_conformance.cli", *args]
        if out_dir is not None:
            cmd += ["--out", str(out_dir)]
            if "--examples" not in args:
                cmd += ["--examples", str(examples)]   # property cases small unless a test says otherwise
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                              cwd=cwd or tmp_path, input=input)
        return CliRun(proc, out_dir)
    return _run


@pytest.fixture(scope="session")
def hostile():
    """The exec: spec of tests/testees/hostile.py in a given mode."""
    return lambda mode: f"exec:{sys.executable} {TESTS / 'testees' / 'hostile.py'} {mode}"
