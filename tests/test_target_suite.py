"""The target and recovery suites (issues 6 and 7): the reference passes through python:
and exec:, every broken target is caught, scenario vectors hold whatever a target's commit
schedule, failures shrink to replayable scenario vectors, and check-trace judges traces."""
import json
import sys

import pytest

import iuts
from ptlrpc_conformance.harness import lnet  # the documented compatibility path: also tests it
from ptlrpc_conformance.harness.data.registry import case_aliases
from ptlrpc_conformance.harness.ost import scenario as scen, wire
from ptlrpc_conformance.harness.transport.adapter import InProcessAdapter
from ptlrpc_conformance.reference import make_testee
from ptlrpc_conformance.reference.target import TargetConfig

SCENARIOS = scen.load_all()
STATEFUL = case_aliases()["target.stateful.exchange"] + case_aliases()["recovery.stateful.restart"]


def _adapter(testee):
    a = InProcessAdapter(testee)
    a.start()
    return a


def test_reference_passes_every_scenario():
    a = _adapter(make_testee())
    for s in SCENARIOS:
        problems, _ = scen.run(s, a)
        assert not problems, (s.id, problems)
    assert {s.id.split(".")[0] for s in SCENARIOS} == {"target", "recovery"}


@pytest.mark.parametrize("lag", [0, 1, 3, 1000])
@pytest.mark.parametrize("start", [5, (7 << 32) + 12345])
def test_scenarios_hold_for_any_commit_schedule(lag, start):
    """The suite assumes no commit schedule and no first transno (docs/target-rules.md §5):
    targets that commit at once, late or never, starting anywhere, all pass."""
    a = _adapter(make_testee(target_config=TargetConfig(commit_lag=lag, transno_start=start)))
    for s in SCENARIOS:
        problems, _ = scen.run(s, a)
        assert not problems, (lag, start, s.id, problems)


@pytest.mark.parametrize("family", sorted(iuts.TARGET_FAMILIES))
def test_every_broken_target_is_caught_by_a_scenario(family):
    """Each broken target fails at least one scenario, on a requirement it breaks (the
    resend one needs the reconstruct profile: Lustre's own OST runs resends again)."""
    factory, _, reqs = iuts.TARGET_FAMILIES[family]
    reconstruct = family == "target_resend_executed_twice"
    a = _adapter(factory())
    failed = {}
    for s in SCENARIOS:
        problems, _ = scen.run(s, a, reconstruct=reconstruct)
        if problems:
            failed[s.id] = problems
    assert failed, f"{family} passes every scenario"
    text = "\n".join(p for ps in failed.values() for p in ps)
    assert any(r in text for r in reqs), f"{family} is caught, but not on {reqs}: {text[:2000]}"


def test_resend_run_again_is_conforming_by_default():
    """Lustre's OST runs a resent request again (lut_no_reconstruct): the default profile
    accepts it, the reconstruct profile does not."""
    a = _adapter(iuts.TARGET_FAMILIES["target_resend_executed_twice"][0]())
    s = next(s for s in SCENARIOS if s.id == "target.resend.modify")
    assert scen.run(s, a)[0] == []
    problems = scen.run(s, a, reconstruct=True)[0]
    assert problems and all("TGT-RESEND-2" in p for p in problems)


def test_reference_target_and_recovery_through_exec(run_cli):
    run = run_cli("certify", "--iut", f"exec:{sys.executable} -m ptlrpc_conformance.reference",
                  "--area", "target", "--area", "recovery")
    assert run.rc == 0, run.stdout[-3000:]
    verdicts = run.verdicts()
    assert set(STATEFUL) <= set(verdicts) and len(STATEFUL) >= 4
    assert len(verdicts) == len(SCENARIOS) + len(STATEFUL) and set(verdicts.values()) == {"pass"}


@pytest.mark.parametrize("family,case", [
    ("target_setattr_ignores_valid", "target.stateful.exchange"),
    ("target_replay_new_transno", "recovery.stateful.restart"),
])
def test_stateful_failure_shrinks_to_a_replayable_scenario(run_cli, family, case):
    """`case` is the id the stateful suite had before it was split into parts: it selects
    every part; the first failing part's failure is shrunk and saved."""
    run = run_cli("certify", "--iut", f"python:iuts:{family}", "--case", case)
    assert run.rc == 1, run.stdout[-3000:]
    assert set(run.verdicts()) == set(case_aliases()[case])
    assert run.report["aliases"][case] == list(case_aliases()[case])
    case = next(c for c in case_aliases()[case] if run.verdicts()[c] == "fail")
    c = run.case(case)
    assert c["verdict"] == "fail"
    assert "exchanges (oldest first)" in c["message"] and "!!" in c["message"]
    repro = run.out / "reproducers" / f"{case}.yaml"
    assert repro.is_file()
    # the saved scenario fails the broken target the same way and passes the reference
    again = run_cli("certify", "--iut", f"python:iuts:{family}", "--vectors", str(repro),
                    "--case", f"repro.{case}.exchange")
    assert again.rc == 1 and again.case(f"repro.{case}.exchange")["verdict"] == "fail"
    ok = run_cli("certify", "--iut", "reference", "--vectors", str(repro), "--case", f"repro.{case}.exchange")
    assert ok.rc == 0, ok.stdout[-3000:]


def test_reconstruct_profile_catches_a_resend_run_twice(run_cli):
    run = run_cli("certify", "--iut", "python:iuts:target_resend_executed_twice", "--profile",
                  "lustre-2.17.57-reconstruct", "--case", "target.resend.modify.exchange")
    run.assert_caught({"target.resend.modify.exchange"})
    assert "TGT-RESEND-2" in run.case("target.resend.modify.exchange")["message"]


def test_target_cases_are_not_applicable_without_the_capability(run_cli):
    run = run_cli("certify", "--iut", "python:iuts:decode_only", "--area", "target", "--area", "recovery")
    assert run.rc == 5 and run.report["level"]["status"] == "not certified"     # no MUST case applied
    assert set(run.verdicts().values()) == {"not-applicable"}


# ---- check-trace -------------------------------------------------------------------------

def _trace(scenario_id: str, testee=None) -> list[dict]:
    a = _adapter(testee or make_testee())
    s = next(s for s in SCENARIOS if s.id == scenario_id)
    problems, records = scen.run(s, a)
    out = []
    for r in records:
        if not r.client:
            if r.note.startswith("restart"):
                out.append({"event": "restart"})
            elif r.note.startswith("end_recovery"):
                out.append({"event": "recovery_end"})
            continue
        out.append({"client": r.client, "xid": r.xid, "request": r.request.hex(),
                    "reply": r.reply.hex() if r.reply is not None else None})
    return out


def _write(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


@pytest.mark.parametrize("scenario_id", ["target.obj.lifecycle", "target.resend.modify", "recovery.replay.transno-order"])
def test_check_trace_passes_a_correct_exchange(run_cli, tmp_path, scenario_id):
    f = _write(tmp_path / "ok.jsonl", _trace(scenario_id))
    run = run_cli("check-trace", str(f), out=False)
    assert run.rc == 0, run.stdout + run.stderr
    assert "0 violations" in run.stderr


def test_check_trace_names_the_record_and_rule(run_cli, tmp_path):
    records = _trace("target.obj.lifecycle", iuts.TARGET_FAMILIES["target_transno_reused"][0]())
    f = _write(tmp_path / "bad.jsonl", records)
    run = run_cli("check-trace", str(f), out=False)
    assert run.rc == 1
    lines = [line for line in run.stdout.splitlines() if "TGT-TRANSNO-1" in line]
    assert lines and lines[0].startswith(f"{f}:")
    line_no = int(lines[0].split(":")[1])
    bad = records[line_no - 1]
    assert wire.parse(bytes.fromhex(bad["reply"]), "reply").body["pb_transno"] != 0
    js = run_cli("check-trace", str(f), "--json", out=False)
    first = json.loads(js.stdout.splitlines()[0])
    assert set(first) == {"record", "client", "xid", "rule", "message"}


def test_check_trace_flags_a_reply_to_an_undecodable_request(run_cli, tmp_path):
    records = _trace("target.conn.connect-ping")
    records.append({"client": "c1", "xid": 99, "request": "00" * 20, "reply": records[-1]["reply"]})
    run = run_cli("check-trace", str(_write(tmp_path / "t.jsonl", records)), out=False)
    assert run.rc == 1 and f":{len(records)}: TGT-DROP-1" in run.stdout


@pytest.mark.parametrize("line,why", [
    ("not json", "not JSON"),
    ('{"client": "c1", "xid": -1, "request": "00", "reply": null}', "'xid'"),
    ('{"client": "c1", "xid": 1, "request": "zz", "reply": null}', "'request' is not valid hex"),
    ('{"client": "c1", "xid": 1, "request": "00"}', "'reply' is missing"),
    ('{"event": "boom"}', "event must be"),
])
def test_check_trace_bad_input_names_the_line(run_cli, tmp_path, line, why):
    f = tmp_path / "t.jsonl"
    f.write_text('{"event": "restart"}\n' + line + "\n")
    run = run_cli("check-trace", str(f), out=False)
    assert run.rc == 2 and f"{f}:2" in run.stderr and why in run.stderr
    assert "Traceback" not in run.stderr


def test_check_trace_reads_a_pcap(run_cli, tmp_path):
    records = _trace("target.obj.lifecycle", iuts.TARGET_FAMILIES["target_transno_on_getattr"][0]())
    exchanges = [dict(r, request=bytes.fromhex(r["request"]),
                      reply=bytes.fromhex(r["reply"]) if r["reply"] else None) for r in records if "event" not in r]
    pcap = tmp_path / "trace.pcap"
    lnet.write_pcap(pcap, exchanges, segment=200)
    run = run_cli("check-trace", str(pcap), out=False)
    assert run.rc == 1 and "TGT-TRANSNO-2" in run.stdout, run.stdout + run.stderr


# ---- scenario files ------------------------------------------------------------------------

def test_lint_vectors_names_file_scenario_and_step(run_cli, tmp_path):
    f = tmp_path / "s.yaml"
    f.write_text("format: ptlrpc-conformance-scenarios/1\nscenarios:\n"
                 "- id: mine.one\n  title: t\n  requirements: [TGT-ERR-1]\n  cite: [x]\n  steps:\n"
                 "  - {client: c1, xid: 1, request: zz}\n"
                 "  - {client: c1, xid: 2, request: '00', expect: {type: MAYBE}}\n"
                 "  - {op: jump}\n")
    run = run_cli("lint-vectors", str(f), out=False)
    assert run.rc == 2
    assert f"{f}: mine.one: step 1: 'request' is not hex" in run.stdout
    assert f"{f}: mine.one: step 2: expect.type must be REPLY or ERR" in run.stdout
    assert f"{f}: mine.one: step 3: op 'jump'" in run.stdout


def test_generated_scenarios_are_up_to_date():
    import subprocess
    import pathlib
    root = pathlib.Path(__file__).resolve().parent.parent
    proc = subprocess.run([sys.executable, str(root / "tools" / "gen_scenarios.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


# ---- the stateful parts and the one step judge ------------------------------------------------

def test_stateful_parts_share_one_budget_with_distinct_seeds():
    from ptlrpc_conformance.fixtures.stateful import part_examples, part_seed
    from ptlrpc_conformance.suites import test_recovery, test_target
    assert test_target.STATEFUL_PARTS == case_aliases()["target.stateful.exchange"]
    assert test_recovery.PARTS == case_aliases()["recovery.stateful.restart"]
    for total in (10, 50, 51, 7):
        for n in (1, 2, 5):
            assert part_examples(total, n) * n >= total and part_examples(total, n) >= 5
            assert part_examples(total, n) == 5 or total > (part_examples(total, n) - 1) * n
    seeds = {part_seed(p, 20261122) for p in STATEFUL}
    assert len(seeds) == len(STATEFUL)                              # every part its own run
    assert part_seed(STATEFUL[0], 1) != part_seed(STATEFUL[0], 2)   # --seed changes them
    assert part_seed(STATEFUL[0], 1) == part_seed(STATEFUL[0], 1)   # and nothing else does


def test_step_judge_keeps_what_later_steps_need():
    from ptlrpc_conformance.harness.ost.client import Client, reply
    from ptlrpc_conformance.harness.ost.steps import StepJudge
    a = _adapter(make_testee())
    a.call({"op": "reset"})
    c = Client("c1", handle=0x1000)
    j = StepJudge()
    xid, data = c.connect()
    rep, problems = j.judge(1, "c1", xid, data, scen.exchange(a, "c1", xid, data)[0], reply(0, handle="nonzero"))
    assert problems == [] and j.cookies["c1"] == rep.body["pb_handle"] != 0 and j.replies[1] is rep
    # a resend compared with a step that has no reply is a problem, not a crash
    _, problems = j.judge(2, "c1", xid + 1, data, None, None, same_as=7)
    assert "TGT-RESEND-1: step 7 has no reply to compare with" in problems
    # deferred replies are matched to the steps waiting for them
    j.defer(3, "c1", 99)
    matched, unmatched = j.arrived([("c1", 99, b"x"), ("c2", 5, None)])
    assert matched == [(3, b"x")] and unmatched == ["a deferred reply to c2 xid 5 that no step is waiting for"]
    j.defer(4, "c1", 100)
    assert j.never_answered() == [(4, "c1", 100)] and not j.waiting


def test_parts_of_a_suite_share_one_shrinking_budget(monkeypatch):
    """A part shrinks only while the suite's budget (from the first failure of any part)
    lasts; a part that has not failed is never idle, so it still gives its own verdict."""
    from hypothesis.stateful import rule
    from ptlrpc_conformance.fixtures import stateful

    class Machine(stateful.BudgetedMachine):
        @rule()
        def nothing(self):
            pass

    monkeypatch.setattr(stateful, "_shrink_started", {})
    key = (Machine, 1)
    part = [type(f"P{i}", (Machine,), dict(suite=key, failures=[], first_failure=None)) for i in range(2)]
    part[0].record_failure("session of part 1")
    assert not part[0]().idle and not part[1]().idle                  # shrinking time left
    stateful._shrink_started[key] -= stateful.SHRINK_SECONDS + 1     # the budget is spent
    assert part[0]().idle                                            # part 1 stops shrinking
    assert not part[1]().idle                                        # part 2 has not failed: it runs
    part[1].record_failure("session of part 2")
    assert part[1]().idle and part[1].failures == ["session of part 2"]   # its failure is kept, unshrunk
    other = type("Q", (Machine,), dict(suite=(Machine, 2), failures=[], first_failure=None))
    other.record_failure("another IUT")
    assert not other().idle                                          # another IUT, another budget
