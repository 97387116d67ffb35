"""The mutant zoo (ptlrpc_conformance/mutants.py, docs/mutants.md): every mutant is killed by
the suite and the report charges the failure to the mutant's own requirement, every MUST
requirement has a mutant, and `ptlrpc-conformance mutants` tells a killed mutant from a
surviving one and from a run that went wrong.  The zoo is the one set of broken codecs the
project's tests use (tests/iuts.py keeps only what no mutant models)."""
import json
import os
import keyword
import re
import sys
import types

import pytest

from conftest import ROOT
from ptlrpc_conformance import mutants
from ptlrpc_conformance.harness.tools import mutation
from ptlrpc_conformance.harness.data import registry

AREAS = {"framing", "structs", "protocol", "target", "recovery"}

# MUST requirements that have no mutant yet, because the reference target has no setting that
# breaks them alone (docs/mutants.md, "Not covered yet").  A requirement leaves this set when
# its mutant joins the zoo; the test below fails if the set and the zoo disagree.
AWAITING_A_SEAM: dict[str, str] = {}

def test_every_mutant_names_a_known_requirement_area_and_profile():
    reqs = registry.requirements()
    default, profiles = registry.profiles()
    assert len({m.id for m in mutants.MUTANTS}) == len(mutants.MUTANTS)
    for m in mutants.MUTANTS:
        assert m.id.isidentifier() and not keyword.iskeyword(m.id), m.id
        assert m.requirement in reqs, f"{m.id}: unknown requirement {m.requirement}"
        assert m.description and "\n" not in m.description, m.id
        assert set(m.areas) <= AREAS, f"{m.id}: unknown area in {m.areas}"
        profile = m.profile or default
        assert profile in profiles, f"{m.id}: unknown profile {profile}"
        assert reqs[m.requirement].in_profile(profile), f"{m.id}: {m.requirement} is not in profile {profile}"


def test_every_must_requirement_has_a_mutant():
    """A target's, a codec's: the mutant zoo; a client's: the broken clients of
    tests/client_models.py (killed in tests/test_client_rules.py)."""
    from client_models import ZOO
    covered = {m.requirement for m in mutants.MUTANTS} | {b.breaks for b in ZOO}
    must = {r.id for r in registry.requirements().values() if r.level == "MUST"}
    missing = must - covered
    assert missing == set(AWAITING_A_SEAM), (
        f"MUST requirements without a mutant: {sorted(missing - set(AWAITING_A_SEAM))}; "
        f"listed as awaiting a seam but covered now: {sorted(set(AWAITING_A_SEAM) - missing)}")


def test_every_mutant_loads_through_its_iut_spec_and_breaks_something():
    """Each factory builds a testee through the --iut spec the runner uses; and each mutant
    differs from the reference in its configuration or in the class of one of its parts (no
    mutant is the reference itself)."""
    from ptlrpc_conformance.harness.transport.loader import load_adapter
    from ptlrpc_conformance.reference import make_testee
    reference = make_testee()
    for m in mutants.MUTANTS:
        adapter = load_adapter(m.iut)
        adapter.start()
        assert adapter.hello.name == f"mutant {m.id}"
        adapter.close()
        t = m.factory()
        same = (t.codec.config == reference.codec.config and t.structs.config == reference.structs.config
                and t.target_config == reference.target_config and t.target_class is reference.target_class
                and type(t.codec) is type(reference.codec) and type(t.structs) is type(reference.structs)
                and type(t) is type(reference))
        assert not same, f"{m.id} is configured like the reference"


def test_no_such_mutant_is_a_usage_error(run_cli):
    run = run_cli("mutants", "--mutant", "no_such_mutant", out=False)
    assert run.rc == 2 and "no mutant named no_such_mutant" in run.stderr and "Traceback" not in run.stderr


def test_the_docs_list_every_mutant():
    text = (ROOT / "docs" / "mutants.md").read_text().split("\n## Results\n", 1)[-1]
    listed = set(re.findall(r"^\| `([a-z0-9_]+)` \|", text, re.M))
    assert listed == {m.id for m in mutants.MUTANTS}, (
        "docs/mutants.md is out of date (regenerate the table with ptlrpc-conformance mutants --markdown FILE): "
        f"missing {sorted({m.id for m in mutants.MUTANTS} - listed)}, extra {sorted(listed - {m.id for m in mutants.MUTANTS})}")


def _fake(iut: str, area: str = "protocol"):
    return types.SimpleNamespace(id="fake", requirement="PROTO-OPS-1", areas=(area,), description="fake",
                                 profile=None, iut=iut)


def test_runner_tells_survivors_and_harness_errors_from_kills(tmp_path):
    """The correct reference survives; an IUT whose hello is refused (exit 3) is a harness
    error, not a kill; a real mutant is killed by the case of its rule, which the result
    names with the requirements it failed; an IUT that crashes on one input is killed by that
    case's verdict error, which the result names apart from the failures."""
    env = mutation.subprocess_env(str(tmp_path / "pycache"))
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "tests"), env["PYTHONPATH"]])
    survivor = mutation.run_one(_fake("reference"), 5, None, 300, env=env)
    assert survivor.status == mutation.SURVIVED and survivor.killed_by == [] and survivor.cases_run > 0
    assert survivor.failed == {} and survivor.errored == []
    broken = mutation.run_one(_fake("python:iuts:bad_hello"), 5, None, 300, env=env)
    assert broken.status == mutation.ERROR and broken.exit_status == 3 and "exit status 3" in broken.detail
    killed = mutation.run_one(mutants.BY_ID["unknown_op_einval"], 5, None, 300, env=env)
    assert killed.status == mutation.KILLED and killed.killed_by == ["protocol.unknown-op.probe"]
    assert killed.failing_requirements == ["PROTO-OPS-1"]
    assert killed.failed == {"protocol.unknown-op.probe": ["PROTO-OPS-1"]} and killed.errored == []
    crash = f"exec:{sys.executable} {ROOT / 'tests' / 'testees' / 'hostile.py'} crash"
    crashed = mutation.run_one(_fake(crash, "framing"), 5, None, 300, env=env)
    assert crashed.status == mutation.KILLED and crashed.errored == ["framing.magic.zero.decode"], crashed
    assert crashed.killed_by == ["framing.magic.zero.decode"] and crashed.failed == {}


def test_each_run_is_a_process_forked_from_one_server_with_its_output_status_and_timeout(tmp_path):
    """The runs of the zoo are forked from one server process that imported the command line
    once (where the platform can fork): each run is still a process of its own, in its own
    folder, with its own output, exit status and timeout, as a new interpreter's would be."""
    import subprocess
    context = mutation._fork_context()
    assert context and context.get_start_method() == "forkserver"
    assert "ptlrpc_conformance.cli.certify" in mutation.PRELOAD
    env = mutation.subprocess_env(None)
    cli = [sys.executable, "-m", "ptlrpc_conformance.cli"]
    version = mutation._run(cli + ["--version"], str(tmp_path), env, 300)
    assert version.returncode == 0 and version.stdout.startswith("ptlrpc-conformance "), version
    one = mutation._run(cli + ["certify", "--iut", "reference", "--case", "framing.magic.zero.decode", "--out", "one"],
                        str(tmp_path), env, 300)
    assert one.returncode == 0 and "exit status: 0" in one.stdout, one
    report = json.loads((tmp_path / "one" / "report.json").read_text())
    assert report["command"][1:] == ["certify", "--iut", "reference", "--case", "framing.magic.zero.decode",
                                     "--out", "one"] and report["environment"]["cwd"] == str(tmp_path)
    usage = mutation._run(cli + ["certify", "--area", "framin"], str(tmp_path), env, 300)
    assert usage.returncode == 2 and "unknown area" in usage.stderr and "closest: framing" in usage.stderr, usage
    # a run of minutes (100000 examples per property) given 1 s is killed, writing no report
    with pytest.raises(subprocess.TimeoutExpired):
        mutation._run(cli + ["certify", "--iut", "reference", "--area", "framing", "--examples", "100000",
                             "--out", "out"], str(tmp_path), env, 1.0)
    assert not (tmp_path / "out" / "report.json").exists()


def test_runs_started_from_several_threads_each_get_their_own_exit_status(tmp_path):
    """The zoo starts its runs from two threads at once: each run's exit status is its own.
    (multiprocessing reads a forked child's status once, and a start from another thread
    polls every running child: unguarded, about 1 run in 100 here came back as 255, the
    status of a lost fork server; one such run failed the zoo.)"""
    import threading
    (tmp_path / "exit_with.py").write_text("import sys\nsys.exit(int(sys.argv[1]))\n")
    env = dict(mutation.subprocess_env(None), PYTHONPATH=str(tmp_path))
    got: dict[int, list[int]] = {}

    def runs(status: int) -> None:
        got[status] = []
        for n in range(100):
            folder = tmp_path / f"{status}-{n}"
            folder.mkdir()
            got[status].append(mutation._run([sys.executable, "-m", "exit_with", str(status)], str(folder), env,
                                             120).returncode)

    threads = [threading.Thread(target=runs, args=(status,)) for status in (3, 4, 5, 6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(600)
    assert {status: sorted(set(codes)) for status, codes in got.items()} == {3: [3], 4: [4], 5: [5], 6: [6]}
    assert all(len(codes) == 100 for codes in got.values())


def test_a_forked_run_starts_with_the_path_python_m_gives_it(tmp_path):
    """A forked run's sys.path is its working directory, its PYTHONPATH, then a new
    interpreter's: none of the folders the process that started the server had besides (an
    xdist worker of a forked run imports its IUT and -p plugins from there), and its
    Hypothesis folder is its own working directory's."""
    extra = tmp_path / "extra"
    extra.mkdir()
    (tmp_path / "where.py").write_text(
        "import json, sys\nfrom hypothesis.configuration import storage_directory\n"
        "print(json.dumps([sys.path, str(storage_directory('x', intent_to_write=False).path)]))\n")
    env = dict(mutation.subprocess_env(None), PYTHONPATH=str(extra))
    env.pop("HYPOTHESIS_STORAGE_DIRECTORY", None)
    run = mutation._run([sys.executable, "-m", "where"], str(tmp_path), env, 300)
    assert run.returncode == 0, run
    path, storage = json.loads(run.stdout)
    assert path[:2] == [str(tmp_path), str(extra)], path
    assert str(ROOT / "tests") not in path and str(ROOT) not in path, path      # this session's, not the run's
    assert storage == str(tmp_path / ".hypothesis" / "x")


def test_a_forked_run_finds_the_bundled_data_read_and_reads_a_users_own(tmp_path):
    """The server read the package's bundled vectors, requirements, profiles and release
    differences once (harness/tools/forkwarm.py): a forked run finds them in memory, as a second run in one
    process would; a user's vector file it reads itself, and a problem in it is reported."""
    (tmp_path / "probe.py").write_text(
        "import json\n"
        "from ptlrpc_conformance.harness.data import registry, vectors\n"
        "from ptlrpc_conformance.spec import release_differences\n"
        "print(json.dumps([vectors._bundled.cache_info().currsize, registry.requirements.cache_info().currsize,\n"
        "                  registry.profiles.cache_info().currsize, release_differences.load.cache_info().currsize]))\n")
    env = mutation.subprocess_env(None)
    run = mutation._run([sys.executable, "-m", "probe"], str(tmp_path), env, 300)
    assert run.returncode == 0, run
    assert json.loads(run.stdout) == [1, 1, 1, 1]
    bad = tmp_path / "bad.yaml"
    bad.write_text("format: ptlrpc-conformance-vectors/1\nvectors:\n  - id: x.y\n    verdict: maybe\n")
    cli = [sys.executable, "-m", "ptlrpc_conformance.cli"]
    lint = mutation._run(cli + ["lint-vectors", str(bad)], str(tmp_path), env, 300)
    assert lint.returncode != 0 and "bad.yaml" in lint.stdout + lint.stderr, lint


def test_tests_load_broken_codecs_from_the_zoo():
    """One zoo: tests/iuts.py holds no broken codec of its own, only aliases of mutants."""
    import iuts
    for name, mutant_id in iuts.ZOO_NAMES.items():
        assert getattr(iuts, name) is mutants.BY_ID[mutant_id].factory
    assert not hasattr(iuts, "FAMILIES") and not hasattr(iuts, "STRUCT_FAMILIES")


def test_every_mutant_is_killed(zoo):
    """The zoo (conftest.py's session fixture: one run, which the zoo's other tests and
    test_broken_families.py and test_structs_data.py read too)."""
    doc = zoo.doc
    not_killed = {m["id"]: (m["status"], m["detail"]) for m in doc["mutants"] if m["status"] != "killed"}
    assert not not_killed, f"mutants not killed: {not_killed}\n{zoo.stdout[-3000:]}"
    assert zoo.returncode == 0, zoo.stderr[-3000:]
    assert {m["id"] for m in doc["mutants"]} == {m.id for m in mutants.MUTANTS}
    by_id = {m.id: m for m in mutants.MUTANTS}
    for m in doc["mutants"]:
        assert m["killed_by"], m["id"]
        # a mutant is killed only by cases of the areas it was run on
        assert all(c.split(".")[0] in by_id[m["id"]].areas for c in m["killed_by"]), m
    assert doc["score"] == {"killed": len(mutants.MUTANTS), "total": len(mutants.MUTANTS)}


def test_every_mutant_is_charged_to_its_own_requirement(zoo):
    """Not only some case of its area failed: the report lists the mutant's own requirement as
    failing."""
    uncharged = {m["id"]: (m["requirement"], m["failing_requirements"]) for m in zoo.doc["mutants"]
                 if m["requirement"] not in m["failing_requirements"]}
    assert not uncharged, f"mutants whose report does not list their requirement as failing: {uncharged}"


def test_the_zoo_run_prints_the_table_and_scores(zoo):
    assert "mutation score: " in zoo.stdout and "by area: " in zoo.stdout and "by requirement: " in zoo.stdout
    for m in mutants.MUTANTS:
        assert f"| `{m.id}` | {m.requirement} |" in zoo.md
    assert "Traceback" not in zoo.stderr
