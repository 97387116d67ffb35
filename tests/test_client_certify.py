"""`certify --client COMMAND` end to end on loopback: the suite serves its reference OST, runs
the client (the model client of client_models.py over LNet, tests/lnet_model_client.py)
under the fault schedule of the run's seed and judges its conversation against the client
rules.  The correct client passes; a broken one is charged to its own requirement only; a
client that sends nothing is not certified."""
import sys

import pytest

from client_models import ZOO
from conftest import TESTS
from ptlrpc_conformance.harness.ost import client_run
from ptlrpc_conformance.harness.ost.client_judge import RULES

MODEL = f"{sys.executable} {TESTS / 'lnet_model_client.py'} --addr {{addr}} --port {{port}}"
SEED = "1"      # its schedule exercises every client rule (errors, drops, early replies, two restarts)
BROKEN = {c.__name__: c.breaks for c in ZOO}


def test_the_same_seed_gives_the_same_schedule():
    assert client_run.schedule(7) == client_run.schedule(7)
    assert client_run.schedule(7) != client_run.schedule(8)


def test_the_model_client_passes_every_client_rule(run_cli):
    run = run_cli("certify", "--client", MODEL, "--seed", SEED)
    assert run.rc == 0, run.stdout[-2000:] + run.stderr[-2000:]
    r = run.report
    assert {c["id"]: c["verdict"] for c in r["cases"]} == {f"client.conduct.{rid.lower()[4:]}": "pass" for rid in RULES}
    assert {rid: r["requirements"][rid]["verdict"] for rid in RULES} == {rid: "pass" for rid in RULES}
    assert r["level"]["certified_capabilities"] == ["client"]
    assert r["iut"]["spec"] == "client:" + MODEL and r["iut"]["hello"]["capabilities"] == ["client"]
    assert "--iut" in r["reproduce"] and "client:" + MODEL in r["reproduce"] and SEED in r["reproduce"]


def _charges(run) -> list[list[str]]:
    return [c["failed_requirements"] for c in run.report["cases"] if c["verdict"] == "fail"]


@pytest.mark.parametrize("bug", sorted(BROKEN))
def test_a_broken_client_is_charged_to_its_own_requirement(run_cli, bug):
    """Every broken client, at one seed, over LNet: killed and charged its own requirement only
    (docs/mutants.md, "Broken clients over LNet", has every seed: tools/client_kill_table.py).
    Seed 1 evicts the client at its first request (`evict`): ResendsBeforeReconnecting's resend
    on the evicted handle is refused too, so it is charged CLI-ERR-1 and not CLI-XID-1."""
    run = run_cli("certify", "--client", f"{MODEL} --bug {bug}", "--seed", SEED)
    assert run.rc == 1, run.stdout[-2000:] + run.stderr[-2000:]
    r = run.report
    assert r["level"]["failing_must"] == [BROKEN[bug]]
    assert _charges(run) == [[BROKEN[bug]]]
    repro = [c for c in r["cases"] if c["verdict"] == "fail"][0]["notes"]["client_reproducer"]
    assert repro["seed"] == int(SEED)
    assert repro["schedule"] == {"faults": {str(n): k for n, k in sorted(client_run.schedule(1)["faults"].items())},
                                 "restarts": client_run.schedule(1)["restarts"]}
    assert repro["exchanges"] and all("request" in e or "restart" in e for e in repro["exchanges"])


def test_seed_1_evicts_the_client():
    """The schedule the tests' seed draws evicts the client (so the zoo above meets an eviction)."""
    assert "evict" in client_run.schedule(int(SEED))["faults"].values()


@pytest.mark.parametrize("bug", [None, "ResendsBeforeReconnecting"])
def test_the_same_seed_gives_the_same_verdicts_at_any_n(run_cli, bug):
    """A client certified with the same seed serially and with -n 2 (each worker runs the client
    under the seed's schedule) gets the same verdict, and the same charge, in every case."""
    command = MODEL if bug is None else f"{MODEL} --bug {bug}"
    serial = run_cli("certify", "--client", command, "--seed", SEED)
    parallel = run_cli("certify", "--client", command, "--seed", SEED, "-n", "2")
    assert serial.rc == parallel.rc == (0 if bug is None else 1), serial.stdout[-2000:] + parallel.stdout[-2000:]

    def verdicts(run):
        return {c["id"]: (c["verdict"], c.get("failed_requirements", [])) for c in run.report["cases"]}

    def messages(run):
        return {c["id"]: c.get("message", "") for c in run.report["cases"]}
    differ = sorted(k for k in verdicts(serial) if verdicts(serial)[k] != verdicts(parallel).get(k))
    assert verdicts(serial) == verdicts(parallel), [(k, messages(serial)[k], messages(parallel).get(k)) for k in differ]
    assert len(verdicts(serial)) == len(RULES)


def test_a_client_that_sends_nothing_is_not_certified(run_cli):
    run = run_cli("certify", "--client", f"{sys.executable} -c pass", "--seed", SEED)
    assert run.rc == 5, run.stdout[-2000:] + run.stderr[-2000:]
    r = run.report
    assert r["level"]["status"] == "not certified"
    assert {r["requirements"][rid]["verdict"] for rid in RULES} == {"not-exercised"}


def test_a_client_command_that_names_no_program_is_refused(run_cli):
    run = run_cli("certify", "--client", "/nonexistent/lustre-client --addr {addr}")
    assert run.rc == 2 and "is no program to run" in run.stderr


def test_client_and_iut_together_are_refused(run_cli):
    run = run_cli("certify", "--client", MODEL, "--iut", "python:iuts:decode_only")
    assert run.rc == 2 and "give one of them" in run.stderr


def test_serve_s_error_fault_names_its_errno():
    from ptlrpc_conformance import spec
    from ptlrpc_conformance.harness.transport.lnet_serve import Fault
    assert Fault.parse("error=ENOTCONN").value == spec.errno_value("ENOTCONN")
    assert Fault.parse("error=115").value == 115
    for bad in ("error", "error=ENOSUCHERR"):
        with pytest.raises(ValueError):
            Fault.parse(bad)


def test_the_lnet_kill_table_in_docs_names_every_broken_client_and_no_wrong_charge():
    """docs/mutants.md's LNet table (tools/client_kill_table.py's output) has a row per broken
    client with its own requirement, a kill, and no other requirement failed."""
    text = (TESTS.parent / "docs" / "mutants.md").read_text()
    section = text.split("### Broken clients over LNet\n", 1)[1].split("\n## ", 1)[0]
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in section.splitlines()
            if line.startswith("| `")]
    assert {r[0].strip("`"): r[1] for r in rows} == BROKEN
    assert all(not r[2].startswith("0/") and r[3] == "none" for r in rows), rows
    assert f"Score: {len(BROKEN)}/{len(BROKEN)} killed, each charged to its own requirement only." in section
