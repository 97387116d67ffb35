"""Fixtures for the project's own tests (tests/).  The conformance suites themselves get
their fixtures from the plugin (ptlrpc_conformance.plugin, entry point pytest11)."""
import fcntl
import json
import os
import pathlib
import shutil
import subprocess
import sys
import types

import pytest

pytest_plugins = ["pytester"]

ROOT = pathlib.Path(__file__).resolve().parent
TESTS = ROOT / "tests"
SPEC_SOURCES = ROOT / "spec-sources"         # the repository's copy of the spec sources


SETUP_SYSTEM = "bash tools/setup-system.sh"

# a user vector file of one invalid vector (a bufcount of 0xFFFFFFFF), for the tests of --vectors
USER_VECTOR = """
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
"""

def _session_folder(variable: str, prefix: str) -> str | None:
    """A folder made for this test session and removed after it, named by the environment
    variable `variable` that xdist workers and the processes the tests start inherit; None
    in a process of the session that inherited it (a worker)."""
    if variable in os.environ:
        return None
    import atexit
    import tempfile
    folder = os.environ[variable] = tempfile.mkdtemp(prefix=prefix)
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


# The tests read vector files through the parse cache (harness/data/yamlcache.py) like any run,
# but a cache of their own, made for this run and removed after it, not the user's: what an
# earlier checkout left there cannot decide a result.
_session_folder("PTLRPC_CONFORMANCE_CACHE", "ptlrpc-conformance-tests-cache-")

# Byte-code: the tests start about a thousand Python processes (xdist workers, command lines,
# pytest runs of a user's project, testees).  Where the environment says not to write byte-code
# (PYTHONDONTWRITEBYTECODE, as many container images do), each compiled every module it
# imported from source, and pytest rewrote Hypothesis's modules in each (about a second of
# each pytest run).  The processes this session starts write their byte-code to a folder of
# the session's (nothing is written in the checkout).
_pycache = _session_folder("PTLRPC_CONFORMANCE_TESTS_PYCACHE", "ptlrpc-conformance-tests-pycache-")
if _pycache is not None:
    os.environ["PYTHONPYCACHEPREFIX"] = _pycache
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)


def require_tool(name: str) -> str:
    """The path of the system tool NAME (tshark, chromium, cc, make), or the test fails,
    naming the tool and how to install it.  The README's set-up (tools/setup-system.sh, run by
    .ci/run) installs every tool the tests use, so a missing one is a broken set-up, never a
    reason to skip: every test that runs a system tool asks for it here (or through the
    `needs_tool` marker) and no test skips for a missing tool."""
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is not installed: this test runs it. `{SETUP_SYSTEM}` installs it (the README's "
                    f"set-up for the project's tests; Debian packages, needs root)", pytrace=False)
    return path


def pytest_configure(config):
    config.addinivalue_line("markers", "needs_tool(*names): the test runs these system tools; each missing one "
                                       "fails the test with the install hint (conftest.require_tool)")


# The tests that take ten seconds or more (whole certifications, stateful parts that shrink, the
# mutant zoo, the bench, a hang's timeouts), by file and function, every parameter of it.  Under
# `-n` they are dealt out evenly and each worker starts with its share, so that the end of the
# run is short tests only, shared by the workers (work stealing), and no worker is left alone
# with a long one.  tests/test_strategies.py checks that each entry names a test that exists.
LONG_TESTS = {
    "test_bench.py": ["test_bench_quick_prints_every_section"],
    "test_ci_recipe.py": ["test_the_script_installs_the_suite_as_written",
                          "test_the_workflow_certifies_and_uploads_what_certify_writes"],
    "test_cli.py": ["test_errno_agnostic_mode_judges_accept_reject_and_reports_the_class",
                    "test_a_client_reporting_eproto_for_every_bad_reply_passes_framing"],
    "test_faults_in_examples.py": ["test_a_fault_inside_an_example_is_the_cases_error",
                                   "test_a_should_failure_never_hides_a_must_failure"],
    "test_hostile_testees.py": ["test_trouble_mid_batch_hits_only_the_case_in_flight",
                                "test_a_testee_that_hangs_on_everything_stops_the_run_in_seconds"],
    "test_mutants.py": ["test_every_mutant_is_killed", "test_runner_tells_survivors_and_harness_errors_from_kills"],
    "test_plugin.py": ["test_suites_run_from_another_repository_with_xdist"],
    "test_plugin_example.py": ["test_the_example_judges_broken_implementations_as_the_doc_says"],
    "test_release_profiles.py": ["test_verify_report_reads_a_matrix_report_and_the_matrix_points_at_the_literal_profiles"],
    "test_requirement_verdicts.py": ["test_an_iut_that_rejects_everything_earns_no_pass",
                                     "test_a_byte_order_only_bug_fails_only_byte_order_requirements",
                                     "test_a_stateful_failure_is_charged_to_the_violated_invariant"],
    "test_target_suite.py": ["test_a_failing_stateful_part_gives_the_same_session_serially_and_under_xdist",
                             "test_stateful_failure_shrinks_to_a_replayable_scenario",
                             "test_the_live_target_suite_follows_the_profiles_release"],
}


# The tests whose time is mostly waiting, not computing: a hang's timeouts, a hostile peer's
# stalls (about 75 s of waiting in all, measured with each test alone; the CPU was idle for
# most of it).  Every other test keeps the CPU busy, so while one of these waits on a worker of
# its own, a core is idle.  So `-n auto` starts one worker more than the machine has cores
# (pytest_xdist_auto_num_workers), and the last worker's run starts with all of these: they
# wait beside the other workers, which keep the cores busy (the first of them starting with
# the mutant zoo, whose runs keep two cores busy on their own).  With two workers, as under
# `-n 2`, they lead the second worker's run, beside the zoo.  "*": every test of the file.
# Only the order and the number of workers change: every test runs, as it is.
ZOO_TEST = {"test_mutants.py": ["test_every_mutant_is_killed"]}
WAITING_TESTS = {
    "test_hostile_testees.py": ["test_a_testee_that_hangs_on_everything_stops_the_run_in_seconds",
                                "test_trouble_mid_batch_hits_only_the_case_in_flight",
                                "test_the_exec_adapter_knows_a_testee_that_did_not_answer_its_hello_after_a_restart",
                                "test_one_bad_case_fails_and_the_run_goes_on"],
    "test_faults_in_examples.py": ["test_a_fault_inside_an_example_is_the_cases_error"],
    "test_lnet_hostile.py": ["*"],
    "test_lnet_engine.py": ["*"],
    "test_serve_clients.py": ["*"],
}


def _listed(table: dict, item) -> bool:
    names = table.get(item.path.name, ())
    return item.path.parent == TESTS and ("*" in names or getattr(item, "originalname", None) in names)


def is_long(item) -> bool:
    return _listed(LONG_TESTS, item)


def deal_long_tests(items, workers: int) -> None:
    """Under `-n N` (worksteal): the first worker's run starts with the zoo; the waiting tests
    (WAITING_TESTS) lead the last worker's run, alone on it from three workers on (the lane
    `-n auto` adds), beside the zoo on two; the other long tests (LONG_TESTS) are shared out
    among the workers that keep the cores busy; the short tests fill the runs up (plugin/hooks.py
    lead_runs).  On one worker, the same order on it."""
    zoo = [i for i in items if _listed(ZOO_TEST, i)]
    waiting = [i for i in items if _listed(WAITING_TESTS, i) and i not in zoo]
    taken = {id(i) for i in zoo + waiting}
    long = [i for i in items if is_long(i) and id(i) not in taken]
    leads = [[] for _ in range(workers)]
    leads[0] += zoo
    leads[-1] += waiting
    busy = workers - 1 if workers >= 3 else workers     # the workers that compute
    for n, item in enumerate(long):
        leads[n % busy].append(item)
    from ptlrpc_conformance.plugin.hooks import lead_runs
    lead_runs(items, leads)


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@pytest.hookimpl(tryfirst=True, optionalhook=True)       # optional: a run with -p no:xdist has no such hook
def pytest_xdist_auto_num_workers(config):
    """`-n auto`: a worker per core, and one more for the waiting tests (WAITING_TESTS), unless
    PYTEST_XDIST_AUTO_NUM_WORKERS says how many (xdist's own rule then)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return _cores() + 1


@pytest.hookimpl(tryfirst=True)      # before xdist's own, which makes `-n` without --dist `load`
def pytest_cmdline_main(config):
    """`-n` without `--dist`: work stealing (`load` hands the collection out in chunks, so a
    worker could end the run alone with a long test while the other waits)."""
    if getattr(config.option, "numprocesses", None) and getattr(config.option, "dist", None) == "no" \
            and not getattr(config.option, "distload", False):
        config.option.dist = "worksteal"


@pytest.hookimpl(trylast=True)       # after the -k and marker deselection
def pytest_collection_modifyitems(config, items):
    worker = getattr(config, "workerinput", None) or {}
    if worker.get("workercount") and worker.get("conformance_dist") == "worksteal":
        deal_long_tests(items, worker["workercount"])


@pytest.hookimpl(tryfirst=True)      # before the test's fixtures start the tool
def pytest_runtest_setup(item):
    for marker in item.iter_markers("needs_tool"):
        for name in marker.args:
            require_tool(name)


@pytest.fixture(scope="session")
def spec_sources() -> pathlib.Path:
    """spec-sources/, the spec sources the generators read (kept in the repository; see
    spec-sources/README.md)."""
    if not (SPEC_SOURCES / "wire_facts.yaml").is_file():
        pytest.fail(f"{SPEC_SOURCES}/wire_facts.yaml is missing: the repository's spec sources are incomplete")
    return SPEC_SOURCES


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


def cli_env() -> dict:
    """The environment of a command line a test starts: tests/ on PYTHONPATH (for --iut
    python:iuts:NAME)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS)] + [p for p in [env.get("PYTHONPATH")] if p])
    return env


def cli_process(args: list[str], cwd, env: dict, timeout: float, input: str | None = None) -> subprocess.CompletedProcess:
    """`ptlrpc-conformance ARGS` in a process of its own, run in `cwd` under `env`, its output
    captured, killed after `timeout` s (subprocess.TimeoutExpired).  Forked, as the mutant zoo's
    runs are, from a server process that imported the command line, pytest, Hypothesis and the
    harness once (harness/tools/mutation.py `_run`): about half a second less of each of the
    tests' few hundred runs than a new interpreter; a new one where the platform cannot fork or
    the test writes to the run's stdin, for `mutants`, which forks its own runs (a forked,
    daemonic, process may start none), and for a run that would import another copy of the
    package."""
    cmd = [sys.executable, "-m", "ptlrpc_conformance.cli", *args]
    # the server's modules are this checkout's: a run that would import another copy of the
    # package (from its working directory or PYTHONPATH) gets a new interpreter
    folders = [str(cwd), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    other_copy = any((pathlib.Path(f) / "ptlrpc_conformance").is_dir() and pathlib.Path(f).resolve() != ROOT
                     for f in folders)
    if input is None and args[:1] != ["mutants"] and not other_copy:
        from ptlrpc_conformance.harness.tools import mutation
        return mutation._run(cmd, str(cwd), env, timeout)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=cwd, input=input)


@pytest.fixture
def run_cli(tmp_path):
    """run_cli(*args, out=True) runs `ptlrpc-conformance ARGS` in a subprocess with tests/ on
    PYTHONPATH (for --iut python:iuts:NAME) and returns a CliRun; a certify run writes its
    report.html only with html=True."""
    def _run(*args, out=True, timeout=300, cwd=None, input=None, examples=20, html=False):
        env = cli_env()
        out_dir = tmp_path / f"out{len(list(tmp_path.iterdir()))}" if out else None
        cmd = list(args)
        if out_dir is not None:
            cmd += ["--out", str(out_dir)]
            if "--examples" not in args:
                cmd += ["--examples", str(examples)]   # property cases small unless a test says otherwise
        # a certify run writes no report.html unless the test reads it (html=True): half a
        # second of each of the few hundred runs the tests start
        if not html and args and "--" not in args and (args[0] in ("certify", "run") or args[0].startswith("-")):
            cmd += ["--no-html"]
        return CliRun(cli_process(cmd, cwd or tmp_path, env, timeout, input=input), out_dir)
    return _run


@pytest.fixture
def no_shrinking(monkeypatch):
    """The command lines the test starts load the noshrink plugin (the one `ptlrpc-conformance
    mutants` uses): a failing property or stateful case is not shrunk.  For tests of a verdict,
    a charge or a message that shrinking does not change, only the example it shows."""
    from ptlrpc_conformance.harness.tools.mutation import NO_SHRINK_PLUGIN
    monkeypatch.setenv("PYTEST_ADDOPTS", f"-p {NO_SHRINK_PLUGIN}")


@pytest.fixture(scope="session")
def hostile():
    """The exec: spec of tests/testees/hostile.py in a given mode."""
    return lambda mode: f"exec:{sys.executable} {TESTS / 'testees' / 'hostile.py'} {mode}"


def once_per_session(tmp_path_factory, name: str, args: list[str], timeout: float) -> tuple[pathlib.Path, dict]:
    """`ptlrpc-conformance ARGS` run once per test session, in the folder NAME of the
    session's temporary folder (ARGS may name files there through `{out}`): the first test (of
    any xdist worker) to ask runs it, under a lock in the session's shared temporary folder,
    and the others read what it wrote.  The folder, and the run's returncode, stdout and
    stderr."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent                   # one folder for every worker of this session
    out = base / name
    with open(base / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)     # released when the file closes
        if not (out / "run.json").is_file():
            out.mkdir(exist_ok=True)
            proc = cli_process([a.format(out=out) for a in args], out, cli_env(), timeout)
            (out / "run.json").write_text(json.dumps({"returncode": proc.returncode, "stdout": proc.stdout,
                                                      "stderr": proc.stderr}))
    return out, json.loads((out / "run.json").read_text())


@pytest.fixture(scope="session")
def zoo(tmp_path_factory):
    """`ptlrpc-conformance mutants` over the whole zoo, run once per test session
    (once_per_session).  `zoo.doc` is its --json file, `zoo.md` its --markdown file,
    `zoo.result(ID)` one mutant's entry."""
    out, run = once_per_session(tmp_path_factory, "zoo", ["mutants", "--json", "{out}/zoo.json",
                                                          "--markdown", "{out}/zoo.md"], 1800)
    assert (out / "zoo.json").is_file(), f"the zoo run wrote no --json file: {run['stderr'][-3000:]}"
    doc = json.loads((out / "zoo.json").read_text())
    by_id = {m["id"]: m for m in doc["mutants"]}
    return types.SimpleNamespace(**run, doc=doc, md=(out / "zoo.md").read_text(), result=by_id.__getitem__)


def assert_zoo_caught(result: dict, must_fail: set[str]) -> None:
    """A mutant's entry in the zoo's --json file: killed (its --strict run exited 1), the cases
    of its rule among the failures (verdict fail), no case of verdict error, and its own
    requirement failing, charged by at least one of those cases."""
    name, requirement = result["id"], result["requirement"]
    assert result["status"] == "killed" and result["exit_status"] == 1, (name, result["status"], result["detail"])
    failed = result["failed"]
    assert must_fail <= set(failed), f"{name}: not caught: {sorted(must_fail - set(failed))}"
    assert result["errored"] == [], (name, result["errored"])
    assert requirement in result["failing_requirements"], (name, result["failing_requirements"])
    charged = {r for c in must_fail for r in failed[c]}
    assert requirement in charged, (name, charged)


@pytest.fixture(scope="session")
def certified(tmp_path_factory):
    """certified(IUT): `certify --iut IUT` with run_cli's defaults (every case, `--examples
    20`), run once per test session (once_per_session) for the tests that read its whole
    report; a CliRun."""
    def _certified(iut: str) -> CliRun:
        name = "certify-" + "".join(c if c.isalnum() else "_" for c in iut)
        out, run = once_per_session(tmp_path_factory, name, ["certify", "--iut", iut, "--out", "{out}/report",
                                                             "--examples", "20"], 300)
        return CliRun(subprocess.CompletedProcess([], run["returncode"], run["stdout"], run["stderr"]),
                      out / "report")
    return _certified
