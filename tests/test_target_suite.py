"""The target and recovery suites (issues 6 and 7): the reference passes through python:
and exec:, every broken target is caught, scenario vectors hold whatever a target's commit
schedule, failures shrink to replayable scenario vectors, and check-trace judges traces."""
import json
import sys

import pytest

import iuts
from ptlrpc_conformance import spec
from adapters import started
from ptlrpc_conformance.harness.transport.adapter import InProcessAdapter
from ptlrpc_conformance.harness.capture.pcap import write_pcap
from ptlrpc_conformance.harness.data.registry import case_aliases
from ptlrpc_conformance.harness.ost import scenario as scen, wire
from ptlrpc_conformance.reference import make_testee
from ptlrpc_conformance.reference.target import TargetConfig

SCENARIOS = scen.load_all()
STATEFUL = case_aliases()["target.stateful.exchange"] + case_aliases()["recovery.stateful.restart"]


def test_reference_passes_every_scenario():
    a = started(make_testee())
    for s in SCENARIOS:
        problems, _ = scen.run(s, a)
        assert not problems, (s.id, problems)
    assert {s.id.split(".")[0] for s in SCENARIOS} == {"target", "recovery"}


@pytest.mark.parametrize("lag", [0, 1, 3, 1000])
@pytest.mark.parametrize("start", [5, (7 << 32) + 12345])
def test_scenarios_hold_for_any_commit_schedule(lag, start):
    """The suite assumes no commit schedule and no first transno (docs/target-rules.md §5):
    targets that commit at once, late or never, starting anywhere, all pass."""
    a = started(make_testee(target_config=TargetConfig(commit_lag=lag, transno_start=start)))
    for s in SCENARIOS:
        problems, _ = scen.run(s, a)
        assert not problems, (lag, start, s.id, problems)


@pytest.mark.parametrize("family", sorted(iuts.TARGET_FAMILIES))
def test_every_broken_target_is_caught_by_a_scenario(family):
    """Each broken target fails at least one scenario, on a requirement it breaks (the
    resend one needs the reconstruct profile: Lustre's own OST runs resends again)."""
    factory, _, reqs = iuts.TARGET_FAMILIES[family]
    reconstruct = family == "target_resend_executed_twice"
    a = started(factory())
    failed = {}
    for s in SCENARIOS:
        problems, _ = scen.run(s, a, reconstruct=reconstruct)
        if problems:
            failed[s.id] = problems
    assert failed, f"{family} passes every scenario"
    text = "\n".join(p for ps in failed.values() for p in ps)
    assert any(r in text for r in reqs), f"{family} is caught, but not on {reqs}: {text[:2000]}"


# a target that follows a rule the suite used before issue 18, and the scenario written for the
# corrected rule (docs/target-rules.md, "Changes from the previous version")
CORRECTED = [
    ("target_create_eexist", "target.obj.precreate"),
    ("target_create_applies_attrs", "target.obj.fresh"),
    ("target_zeroed_objects", "target.obj.fresh"),
    ("target_uid_keeps_suid", "target.obj.special-bits"),
    ("target_punch_sets_ids", "target.obj.punch"),
    ("target_honours_ungranted_rdonly", "target.obj.readonly"),
    ("target_rdonly_unenforced", "target.obj.readonly"),
    ("target_timeout_drop_first", "target.err.replay-timeout-0"),
    ("target_claimed_always_dropped", "recovery.claimed-transno"),
    ("target_runs_queued_duplicate_replay", "recovery.claimed-transno-queued"),
    ("target_version_on_every_change", "recovery.vbr-version"),
    ("target_replays_in_arrival_order", "recovery.replay.transno-order"),
]


@pytest.mark.parametrize("family,scenario_id", CORRECTED)
def test_each_corrected_rule_has_a_scenario_the_old_rule_fails(family, scenario_id):
    """For each corrected point, the scenario written for it fails a target that follows the
    old rule, on the requirement that rule breaks."""
    factory, _, reqs = iuts.TARGET_FAMILIES[family]
    s = next(s for s in SCENARIOS if s.id == scenario_id)
    problems, _ = scen.run(s, started(factory()))
    assert problems, f"{family} passes {scenario_id}"
    assert any(r in p for p in problems for r in reqs), problems


@pytest.mark.parametrize("name", sorted(iuts.CONFORMING_TARGETS))
def test_a_target_making_an_allowed_choice_passes_every_scenario(name):
    """A target that differs from the reference only in a choice the rules allow passes (the
    mutant zoo lists it as an equivalent mutant: docs/mutants.md)."""
    a = started(iuts.CONFORMING_TARGETS[name][0]())
    for s in SCENARIOS:
        try:
            assert scen.run(s, a)[0] == [], s.id
        except scen.RecoveryDisabled:
            assert name == "target_without_recovery", s.id      # the recovery scenarios: not applicable


def test_an_independent_target_passes_the_target_and_recovery_areas(run_cli):
    """tests/independent_ost.py, written from docs/target-rules.md alone with other choices than
    the reference (big-endian replies, LAST_ID 5, creates that stop early, transno gaps, no
    punch mtime, no projid, resends run again, no commit point reported), passes every
    target and recovery case."""
    run = run_cli("certify", "--iut", "python:independent_ost:testee", "--area", "target", "--area", "recovery",
                  examples=100)
    assert run.rc == 0, run.stdout[-3000:]
    verdicts = run.verdicts()
    assert len(verdicts) == len(SCENARIOS) + len(STATEFUL) and set(verdicts.values()) == {"pass"}


def test_a_target_that_forgets_clients_with_nothing_committed_passes_recovery(run_cli):
    """A client none of whose transactions committed may be forgotten at a restart (-EBUSY on
    its reconnect, or no recovery at all when none is remembered): the recovery suite accepts it."""
    run = run_cli("certify", "--iut", "python:independent_ost:forgetful", "--case", "recovery.stateful.restart",
                  examples=100)
    assert run.rc == 0, run.stdout[-3000:]


def test_resend_run_again_is_conforming_by_default():
    """Lustre's OST runs a resent request again (lut_no_reconstruct): the default profile
    accepts it, the reconstruct profile does not."""
    a = started(iuts.TARGET_FAMILIES["target_resend_executed_twice"][0]())
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
    ("target_no_epoch_jump", "recovery.stateful.restart"),
])
def test_stateful_failure_shrinks_to_a_replayable_scenario(run_cli, monkeypatch, family, case):
    """`case` is the id the stateful suite had before it was split into parts: it selects
    every part; the first failing part's failure is shrunk and saved (for a few runs of the
    machine: tests/short_shrink.py; how far it shrinks is not the point here)."""
    monkeypatch.setenv("PYTEST_PLUGINS", "short_shrink")
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
    a = started(testee or make_testee())
    s = next(s for s in SCENARIOS if s.id == scenario_id)
    problems, records = scen.run(s, a)
    out = []
    for r in records:
        if not r.client:
            if r.note.startswith("restart"):
                out.append({"event": "restart"})
            elif r.note.startswith("end_recovery"):
                out.append({"event": "recovery_expiry"})
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
    write_pcap(pcap, exchanges, segment=200)
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


def test_the_seed_drives_the_stateful_cases():
    """--seed (the run's conformance seed) reaches every stateful part: the same seed gives the
    same sequence of requests, another seed another (issue 15, point 9)."""
    from ptlrpc_conformance.fixtures.stateful import part_seed, run_machine
    from ptlrpc_conformance.suites.recovery_machine import RecoveryMachine
    from ptlrpc_conformance.suites.target_machine import TargetMachine

    class Recording(InProcessAdapter):
        def call(self, request):
            if request.get("op") == "exchange":
                self.seen.append(request["data"])
            return super().call(request)

    def requests(machine, part, seed):
        a = Recording(make_testee())
        a.seen = []
        a.start()
        run_machine(machine, a, lambda j: None, case=part, requirements=[], examples=5, steps=15,
                    run_seed=part_seed(part, seed), needs=(), what="x")
        return a.seen
    for machine, part in ((TargetMachine, STATEFUL[0]), (RecoveryMachine, STATEFUL[-1])):
        first = requests(machine, part, 1)
        assert first and first == requests(machine, part, 1)
        assert first != requests(machine, part, 2)


def test_step_judge_keeps_what_later_steps_need():
    from ptlrpc_conformance.harness.ost.client import Client, reply
    from ptlrpc_conformance.harness.ost.steps import StepJudge
    a = started(make_testee())
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
    assert matched == [(3, b"x")]
    assert unmatched == ["RCV-REPLAY-1: a deferred reply to c2 xid 5 that no step is waiting for (no such request)"]
    j.defer(4, "c1", 100)
    assert j.never_answered() == [(4, "c1", 100)] and not j.waiting


def test_each_part_shrinks_for_a_number_of_runs_of_its_own():
    """A part's shrinking budget is SHRINK_RUNS runs after its own first failure, whatever the
    time they take and whatever the other parts did: a run made after it stops at once
    (ShrinkingOver), and a part that has not failed is never stopped."""
    from hypothesis.stateful import rule
    from ptlrpc_conformance.fixtures import stateful

    class Machine(stateful.BudgetedMachine):
        @rule()
        def nothing(self):
            pass

    part = [type(f"P{i}", (Machine,), dict(adapter=object(), failures=[], runs_after_failure=None)) for i in range(2)]
    for _ in range(3 * stateful.SHRINK_RUNS):
        part[1]()                                                    # no failure: never stopped
    part[0].record_failure("session of part 1")
    for _ in range(stateful.SHRINK_RUNS):
        part[0]()                                                    # shrinking runs left
    with pytest.raises(stateful.ShrinkingOver):
        part[0]()                                                    # the budget is spent
    part[0].record_failure("a later failure")                        # recorded; the count goes on
    assert part[0].runs_after_failure == stateful.SHRINK_RUNS + 1
    assert part[0].failures == ["session of part 1", "a later failure"]
    part[1]()                                                        # the other part is not concerned
    part[1].record_failure("session of part 2")
    part[1]()
    assert part[1].runs_after_failure == 1


def test_a_failing_stateful_part_gives_the_same_session_serially_and_under_xdist(run_cli, monkeypatch):
    """The same seed, a target that breaks a rule in several parts: each part reports the same
    shortest session and charges the same requirements, run serially or by two workers (a
    budget of seconds shared by the parts made a part shrink or not as time allowed), and
    however slow the machine: the run by two workers has a clock that runs fast (tests/
    fast_clock.py, loaded by every worker; Hypothesis's search for more bugs for ten seconds after a first failure
    made a part shrink from another example, and charge other requirements, under load).  Both
    runs shrink for the same few runs of the machine (tests/short_shrink.py): the budget is
    counted in runs whatever its size."""
    parts = ["target.stateful.exchange.2", "target.stateful.exchange.3"]      # both fail at this seed
    args = ("--iut", "python:ptlrpc_conformance.mutants:target_punch_without_size_blocks", "--seed", "7",
            "--case", parts[0], "--case", parts[1], "--examples", "200")
    monkeypatch.setenv("PYTEST_PLUGINS", "short_shrink")
    serial = run_cli(*args)
    monkeypatch.setenv("PYTEST_PLUGINS", "short_shrink,fast_clock")
    parallel = run_cli(*args, "-n", "2")
    assert all(serial.verdicts()[p] == "fail" for p in parts)
    for p in parts:
        a, b = serial.case(p), parallel.case(p)
        assert (a["verdict"], a.get("failed_requirements"), a["message"]) == \
            (b["verdict"], b.get("failed_requirements"), b["message"]), p


# ---- check-trace on a real file system's traffic -------------------------------------------------

def _pack(opc, buffers=(), *, reply=False, err=False, version="LUSTRE_OST_VERSION", handle=0, transno=0,
          committed=0, status=0, op_flags=0, flags=0, mbits=0):
    from ptlrpc_conformance.harness.ost.wire import pack_body, pack_message
    from ptlrpc_conformance import spec
    C = spec.constant
    kind = C("PTL_RPC_MSG_ERR") if err else C("PTL_RPC_MSG_REPLY") if reply else C("PTL_RPC_MSG_REQUEST")
    body = {"pb_handle": handle, "pb_type": kind, "pb_version": C(version) | C("PTLRPC_MSG_VERSION"), "pb_opc": opc,
            "pb_status": status & 0xFFFFFFFF, "pb_transno": transno, "pb_last_committed": committed,
            "pb_op_flags": op_flags, "pb_flags": flags, "pb_conn_cnt": 1, "pb_timeout": 30, "pb_mbits": mbits}
    return pack_message([pack_body(body)] + list(buffers))


def _filesystem_traffic(getattr_transno=0, late_write_transno=None, rep_mbits=False):
    """The traffic of a small file system on port 988: a client mounting (MGS, MDT0000, two
    OSTs on one OSS), the MDT's own connection to an OST (orphan cleanup, precreate), a
    second client, and ordinary I/O — extent locks, writes in flight answered out of order,
    a read, a punch, a fallocate, pings, a lock cancel on the shared portal, a sync, a
    getattr, a disconnect.  Transnos: each target its own counter (the MDT's far above the
    OSTs').  `getattr_transno`, `late_write_transno`: the broken target's answers.
    `rep_mbits`: 2.15+ peers (OBD_CONNECT2_REP_MBITS granted): each bulk RPC carries pb_mbits
    (the match bits of its last bulk descriptor, not its XID), and its reply is sent on them."""
    from ptlrpc_conformance import spec
    from ptlrpc_conformance.harness.ost.client import ost_body, uuid_buffer
    from ptlrpc_conformance.harness.ost import wire
    C = spec.constant
    MDS, OSS, CL1, CL2 = "10.0.0.1", "10.0.0.2", "10.0.0.10", "10.0.0.11"
    flags = C("OBD_CONNECT_FULL20") | C("OBD_CONNECT_VERSION") | C("OBD_CONNECT_GRANT") | C("OBD_CONNECT_FLAGS2")
    out = []

    def connect(client, server, portal, opc, target, uuid, cookie, version, flags2=0, reply_portal=4):
        ocd = wire.pack_struct("obd_connect_data", {"ocd_connect_flags": flags, "ocd_connect_flags2": flags2})
        req = _pack(opc, [uuid_buffer(target), uuid_buffer(uuid), wire.pack_struct("lustre_handle", {"cookie": 7}), ocd],
                    version=version, op_flags=C("MSG_CONNECT_INITIAL"))
        rep = _pack(opc, [ocd], reply=True, version=version, handle=cookie, op_flags=C("MSG_CONNECT_REPLAYABLE"))
        out.append(dict(client=client, server=server, portal=portal, reply_portal=reply_portal,
                        xid=len(out) + 1, request=req, reply=rep))

    def rpc(client, server, portal, opc, handle, *, transno=0, committed=0, version="LUSTRE_OST_VERSION",
            body=None, reply_portal=4, **kw):
        buffers = [body if body is not None else ost_body(1)]
        xid = len(out) + 1
        if rep_mbits and opc in (C("OST_WRITE"), C("OST_READ")):     # 4 MiB: four descriptors
            kw["reply_bits"] = mbits = (xid << 8) + 3
        else:
            mbits = 0
        out.append(dict(client=client, server=server, portal=portal, reply_portal=reply_portal, xid=xid,
                        request=_pack(opc, buffers, version=version, handle=handle, mbits=mbits),
                        reply=_pack(opc, buffers, reply=True, version=version, transno=transno, committed=committed),
                        **kw))

    T, S, M = 0x200000000, 0x200000000, 0x300000000         # OST0000's, OST0001's and the MDT's counters
    connect(CL1, MDS, 26, C("MGS_CONNECT"), "MGS", "cl1-mgc", 0xA1, "LUSTRE_MGS_VERSION", reply_portal=27)
    rpc(CL1, MDS, 26, C("MGS_CONFIG_READ"), 0xA1, version="LUSTRE_MGS_VERSION", reply_portal=27)
    rpc(CL1, MDS, 26, C("OBD_PING"), 0, version="LUSTRE_OBD_VERSION", reply_portal=27)    # pb_handle 0: not attributed
    connect(CL1, MDS, 12, C("MDS_CONNECT"), "lustre-MDT0000_UUID", "cl1-mdc", 0xB1, "LUSTRE_MDS_VERSION", reply_portal=10)
    rpc(CL1, MDS, 12, C("MDS_REINT"), 0xB1, transno=M + 1, version="LUSTRE_MDS_VERSION", reply_portal=10)
    connect(MDS, OSS, 28, C("OST_CONNECT"), "lustre-OST0000_UUID", "lustre-MDT0000-mdtlov_UUID", 0xC4,
            "LUSTRE_OBD_VERSION", flags2=C("OBD_CONNECT2_REPLAY_CREATE"))
    rpc(MDS, OSS, 7, C("OST_CREATE"), 0xC4, body=ost_body(1, C("OBD_MD_FLFLAGS"), o_flags=C("OBD_FL_DELORPHAN")))
    rpc(MDS, OSS, 7, C("OST_CREATE"), 0xC4, transno=T + 1, body=ost_body(33))                 # a precreate
    connect(CL1, OSS, 28, C("OST_CONNECT"), "lustre-OST0000_UUID", "cl1-osc-0", 0xC1, "LUSTRE_OBD_VERSION")
    connect(CL1, OSS, 28, C("OST_CONNECT"), "lustre-OST0001_UUID", "cl1-osc-1", 0xC2, "LUSTRE_OBD_VERSION")
    connect(CL2, OSS, 28, C("OST_CONNECT"), "lustre-OST0000_UUID", "cl2-osc-0", 0xC3, "LUSTRE_OBD_VERSION")
    rpc(CL1, OSS, 28, C("LDLM_ENQUEUE"), 0xC1, version="LUSTRE_DLM_VERSION", body=bytes(136))
    rpc(CL1, OSS, 6, C("OST_WRITE"), 0xC1, transno=T + 3, reply_after=1)          # in flight ...
    rpc(CL1, OSS, 6, C("OST_WRITE"), 0xC1, transno=T + 2)                         # ... answered first
    rpc(CL1, OSS, 6, C("OST_WRITE"), 0xC2, transno=S + 1)                         # OST0001: a counter of its own
    rpc(CL2, OSS, 6, C("OST_READ"), 0xC3)
    rpc(CL1, OSS, 6, C("OST_PUNCH"), 0xC1, transno=T + 4, committed=T + 3)
    rpc(CL1, OSS, 28, C("OST_GETATTR"), 0xC1, transno=getattr_transno, committed=T + 3)
    rpc(CL1, OSS, 6, C("OST_FALLOCATE"), 0xC1, transno=T + 5, committed=T + 3)
    rpc(CL1, OSS, 6, C("OST_WRITE"), 0xC1, transno=late_write_transno or T + 6, committed=T + 4)
    rpc(MDS, OSS, 28, C("OST_STATFS"), 0xC4, committed=T + 1, body=b"")
    rpc(CL2, OSS, 28, C("OBD_PING"), 0xC3, version="LUSTRE_OBD_VERSION", body=b"")
    rpc(CL1, OSS, 17, C("LDLM_CANCEL"), 0xC1, version="LUSTRE_DLM_VERSION", body=bytes(72), reply_portal=18)
    rpc(CL2, OSS, 28, C("OST_SYNC"), 0xC3)
    rpc(CL1, OSS, 28, C("OST_DISCONNECT"), 0xC1, version="LUSTRE_OBD_VERSION", committed=T + 5, body=b"")
    for r in out:                       # a body of b"" stands for a bodiless request
        for key in ("request", "reply"):
            m = wire.parse(r[key], "request" if key == "request" else "reply")
            if m.buffers[1:] == [b""]:
                r[key] = wire.pack_message([m.buffers[0]])
    return out


def test_check_trace_passes_ordinary_filesystem_traffic(run_cli, tmp_path):
    """A capture of a file system's ordinary traffic — the MGS, an MDT and two OSTs, writes in
    flight, opcodes the rules do not model — passes check-trace with no violation; what it
    could not judge is counted (docs/target-rules.md §6)."""
    from ptlrpc_conformance.harness.ost import trace
    path = tmp_path / "fs.pcap"
    write_pcap(path, _filesystem_traffic())
    records = trace.read(path)
    result = trace.check_trace(records)
    assert result.violations == [], [str(v) for v in result.violations]
    assert result.exchanges == len(records) == 25
    assert sorted(result.targets) == ["lustre-OST0000_UUID@10.0.0.2@tcp", "lustre-OST0001_UUID@10.0.0.2@tcp"]
    assert result.other_targets == 4 and result.unattributed == 1
    assert result.unmodelled == 8            # LDLM_ENQUEUE, 4 OST_WRITE, OST_READ, OST_FALLOCATE, LDLM_CANCEL
    assert result.judged == 20
    run = run_cli("check-trace", str(path), out=False)
    assert run.rc == 0, run.stdout + run.stderr
    assert "25 exchanges, 0 violations" in run.stderr and "do not model" in run.stderr


def test_check_trace_pairs_replies_sent_on_the_requests_match_bits(run_cli, tmp_path):
    """Between 2.15+ peers a server replies on the request's pb_mbits (LU-14594): for a bulk
    RPC of several descriptors those are not the XID.  check-trace pairs such replies and
    reads the capture as it reads the same traffic replied on XIDs."""
    from ptlrpc_conformance.harness.ost import trace
    traffic = _filesystem_traffic(rep_mbits=True)
    assert sum(1 for r in traffic if r.get("reply_bits", r["xid"]) != r["xid"]) == 5   # 4 writes, a read
    path = tmp_path / "fs-2.15.pcap"
    write_pcap(path, traffic)
    records = trace.read(path)
    assert all(r["reply"] is not None for r in records)
    result = trace.check_trace(records)
    assert result.violations == [] and result.exchanges == 25 and result.judged == 20
    run = run_cli("check-trace", str(path), out=False)
    assert run.rc == 0 and "25 exchanges, 0 violations" in run.stderr, run.stdout + run.stderr
    path = tmp_path / "broken.pcap"                  # a broken target is still found in that traffic
    write_pcap(path, _filesystem_traffic(getattr_transno=0x200000007, rep_mbits=True))
    run = run_cli("check-trace", str(path), out=False)
    assert run.rc == 1 and "TGT-TRANSNO-2" in run.stdout.splitlines()[0], run.stdout + run.stderr


@pytest.mark.parametrize("broken,rule", [(dict(getattr_transno=0x200000007), "TGT-TRANSNO-2"),
                                         (dict(late_write_transno=0x200000001), "TGT-TRANSNO-1")])
def test_check_trace_finds_a_broken_target_in_filesystem_traffic(run_cli, tmp_path, broken, rule):
    """In the same capture, a transno on a GETATTR, or a write's transno below one captured
    before it was sent, is still found and named."""
    path = tmp_path / "fs.pcap"
    write_pcap(path, _filesystem_traffic(**broken))
    run = run_cli("check-trace", str(path), out=False)
    assert run.rc == 1 and f": {rule}: client 10.0.0.10@tcp cl1-osc-0 " in run.stdout.splitlines()[0], run.stdout


# ---- scenario format 2 ---------------------------------------------------------------------------

def _scenario_file(tmp_path, fmt, steps, name="s.yaml"):
    import yaml
    f = tmp_path / name
    f.write_text(yaml.safe_dump({"format": f"ptlrpc-conformance-scenarios/{fmt}", "scenarios": [
        {"id": "mine.one", "title": "t", "requirements": ["TGT-ERR-2"], "cite": ["x"], "steps": steps}]}))
    return f


def _steps_with_outcomes():
    """connect; a ping answered one of two ways; steps that depend on the outcome and on the
    grant; an object id counted from a create's LAST_ID."""
    from ptlrpc_conformance.harness.ost.client import Client, ost_body
    from ptlrpc_conformance import spec
    c = Client("c1", handle=0x1000, readonly=True)
    x1, connect = c.connect()
    x2, ping = c.request("OBD_PING")
    x3, create = c.request("OST_CREATE", [ost_body(1)])
    x4, create2 = c.request("OST_CREATE", [ost_body(2)])
    x5, getattr_ = c.request("OST_GETATTR", [ost_body(2)])
    rdonly = spec.constant("OBD_CONNECT_RDONLY")
    return [
        {"client": "c1", "xid": x1, "request": connect.hex(), "expect": {"type": "REPLY", "status": 0}},
        {"client": "c1", "xid": x2, "request": ping.hex(), "patch": {"pb_handle": "c1"},
         "expect_any": [{"outcome": "served", "type": "REPLY", "status": 0},
                        {"outcome": "refused", "type": "ERR", "status": -107}]},
        {"client": "c1", "xid": x3, "request": create.hex(), "patch": {"pb_handle": "c1"},
         "if_outcome": {"step": 2, "outcome": "served"}, "expect": {"type": "REPLY", "status": 0}},
        {"client": "c1", "xid": x4, "request": create2.hex(), "patch": {"pb_handle": "c1", "oid": "@3+1"},
         "if_granted": {"step": 1, "flags": rdonly, "granted": False},
         "expect": {"type": "REPLY", "status": 0, "transno": "zero", "struct": "ost_body",
                    "fields": {"oa.o_oi@id": "@3+1"}}},
        {"client": "c1", "xid": x4, "request": create2.hex(), "patch": {"pb_handle": "c1", "oid": "@3+1"},
         "if_granted": {"step": 1, "flags": rdonly}, "expect": {"type": "REPLY", "status": -30}},
        {"client": "c1", "xid": x5, "request": getattr_.hex(), "patch": {"pb_handle": "c1", "oid": "@4"},
         "if_outcome": [{"step": 2, "outcome": "served"}, {"step": 5, "outcome": "skipped"}],
         "expect": {"type": "REPLY", "status": 0, "struct": "ost_body", "fields": {"oa.o_mode&4095": 0o7666},
                    "fields_if_valid": {"oa.o_projid": [1 << 56, 0]}}},
        {"op": "expire_recovery", "if_outcome": {"step": 2, "outcome": "refused"}},
    ]


def test_scenario_format_2_outcomes_conditions_and_object_ids(tmp_path):
    """expect_any names the allowed outcomes; if_outcome and if_granted choose the steps that
    follow; "@N+K" counts object ids from create step N's LAST_ID (docs/scenarios.md)."""
    f = _scenario_file(tmp_path, 2, _steps_with_outcomes())
    [s] = scen.load_all([str(f)])[-1:]
    assert s.steps[1].expect_any.names == ["served", "refused"]
    a = started(make_testee())
    problems, records = scen.run(s, a)
    assert problems == [], problems
    notes = [r.note for r in records]
    assert notes[4].startswith("skipped: step 1's connect did not grant")     # RDONLY asked, not granted
    assert notes[6].startswith("skipped: expire_recovery: step 2 ended served")
    # the same file with another LAST_ID: the ids follow the target (independent_ost starts at 5)
    import independent_ost
    assert scen.run(s, started(independent_ost.testee()))[0] == []
    # a saved scenario writes back what it read
    from ptlrpc_conformance.harness.ost.scenario import dump_file, load_text
    again = load_text("x", dump_file([s]), [])
    assert [st.to_dict() for st in again[0].steps] == [st.to_dict() for st in s.steps]


def test_an_outcome_outside_the_allowed_ones_fails(tmp_path):
    steps = _steps_with_outcomes()[:2]
    steps[1]["expect_any"] = [{"outcome": "refused", "type": "ERR", "status": -107},
                              {"outcome": "other", "type": "REPLY", "status": -2}]
    [s] = scen.load_all([str(_scenario_file(tmp_path, 2, steps))])[-1:]
    problems, _ = scen.run(s, started(make_testee()))
    assert problems and all("closest allowed outcome 'other'; the others fail too: 'refused'" in p for p in problems), problems


def test_format_1_still_loads_but_cannot_use_format_2(run_cli, tmp_path):
    steps = _steps_with_outcomes()
    plain = _scenario_file(tmp_path, 1, steps[:1], "one.yaml")
    assert [s.id for s in scen.load_all([str(plain)])][-1] == "mine.one"
    f = _scenario_file(tmp_path, 1, steps, "two.yaml")
    run = run_cli("lint-vectors", str(f), out=False)
    assert run.rc == 2
    for n in (2, 3, 4, 6, 7):
        assert f"{f}: mine.one: step {n}: " in run.stdout and "need 'format: ptlrpc-conformance-scenarios/2'" in run.stdout


@pytest.mark.parametrize("change,message", [
    (lambda st: st[2].update(if_outcome={"step": 2, "outcome": "nope"}), "step 3: if_outcome names outcome(s) ['nope']"),
    (lambda st: st[2].update(if_outcome={"step": 9, "outcome": "served"}), "step 3: if_outcome must name an earlier step"),
    (lambda st: st[1]["expect_any"].pop(), "step 2: 'expect_any' must list at least two outcomes"),
    (lambda st: st[1]["expect_any"][1].update(outcome="served"), "step 2: bad expect_any: expect_any needs outcomes"),
    (lambda st: st[3]["patch"].update(oid="3+1"), "step 4: patch 'oid' must be '@STEP' or '@STEP+K'"),
    (lambda st: st[3].update(if_granted={"step": 1, "flags": 0}), "step 4: 'if_granted' must be"),
    (lambda st: st[6].update(client="c1"), "step 7: op expire_recovery takes only 'note', 'if_outcome', 'if_granted' and 'if_release'"),
])
def test_format_2_problems_name_the_step(tmp_path, change, message):
    steps = _steps_with_outcomes()
    change(steps)
    f = _scenario_file(tmp_path, 2, steps)
    with pytest.raises(Exception) as e:
        scen.load_all([str(f)])
    assert any(message in p for p in e.value.problems), e.value.problems


# ---- which requirement a target failure is charged to (issue 15) -------------------------------

def test_a_scenario_is_charged_for_its_first_failing_step():
    problems = ["step 3 (c1 xid 3): TGT-CONN-2: answered", "step 3 (c1 xid 3): TGT-ERR-1: as REPLY",
                "step 5 (c1 xid 5): TGT-ERR-2: refused afterwards", "RCV-ORDER-1: a reply no step waits for"]
    assert scen.first_failure(problems) == problems[:2]
    assert scen.first_failure(problems[3:]) == problems[3:]
    assert scen.first_failure([]) == []
    # step 1 is not step 10
    assert scen.first_failure(["step 1: A-1: x", "step 10: B-1: y"]) == ["step 1: A-1: x"]


def test_connect_flags_are_charged_to_the_requirement_that_states_them():
    from ptlrpc_conformance.harness.ost.client import C, reply
    recovering, replayable = C("MSG_CONNECT_RECOVERING"), C("MSG_CONNECT_REPLAYABLE")
    reconnect = C("MSG_CONNECT_RECONNECT")
    # a connect answered in recovery: RECOVERING and REPLAYABLE are RCV-CONN-1's
    during = reply(0, requirement="RCV-CONN-1", op_flags_all=recovering | replayable, why="recovery")
    assert during._connect_flag_groups(recovering | replayable) == [("RCV-CONN-1", recovering),
                                                                    ("RCV-CONN-1", replayable)]
    # a new export after a restart with nothing to recover (the step's rule is RCV-CONN-1):
    # RECONNECT and REPLAYABLE are TGT-CONN-1's, a RECOVERING flag RCV-CONN-1's
    after = reply(0, requirement="RCV-CONN-1", op_flags_all=replayable, op_flags_none=recovering | reconnect,
                  why="no recovery")
    assert after._connect_flag_groups(recovering | reconnect | replayable) == [
        ("RCV-CONN-1", recovering), ("TGT-CONN-1", reconnect), ("TGT-CONN-1", replayable)]
    other = reply(0, requirement="TGT-ERR-2", why="x")
    assert other._connect_flag_groups(replayable) == [("TGT-CONN-1", replayable)]


# ---- the target rules of each release (docs/target-rules.md, "Releases") --------------------

# the scenarios whose verdict a release's OST changes against 2.17.57's rules, and why (the
# recorded claimed-transno scenarios are keyed to the REPLAY_CREATE grant, as every rule of
# it is: an OST that does not grant it is judged on their connects only, under any release)
RELEASE_FAILS = {
    "2.12.9": {"target.err.unknown-opcode", "target.obj.punch", "target.obj.projid"},
    "2.16.1": {"target.obj.punch", "target.obj.projid"},
    "2.17.0": set(),
}
RELEASE_FAILS["2.15.8"] = RELEASE_FAILS["2.12.9"]


@pytest.mark.parametrize("release", sorted(RELEASE_FAILS))
def test_an_older_release_ost_passes_its_own_release_and_not_2_17_57(release):
    """The reference answering as that release's OST (unknown opcode ERR -524 and no
    REPLAY_CREATE before 2.16, a punch that sets no ids before 2.17.0, 2.12.9's 152-byte reply
    body) passes every scenario under its release's rules; under 2.17.57's exactly the
    scenarios that judge a difference fail."""
    from ptlrpc_conformance.reference import release_ost
    a = started(release_ost(release))
    failed = {}
    for s in SCENARIOS:
        assert scen.run(s, a, release=release)[0] == [], (release, s.id)
        if scen.run(s, a)[0]:
            failed[s.id] = scen.run(s, a)[0]
    assert set(failed) == RELEASE_FAILS[release], failed


def _asks_replay_create(s) -> bool:
    """A connect request of the scenario asks for OBD_CONNECT2_REPLAY_CREATE (its bytes, read
    with the suite's own parser)."""
    bit, flags2 = spec.constant("OBD_CONNECT2_REPLAY_CREATE"), spec.constant("OBD_CONNECT_FLAGS2")
    for st in s.steps:
        try:
            req = wire.parse(st.request, "request")
        except wire.WireError:               # a request the scenario breaks on purpose, or none
            continue
        ocd = req.struct(4, "obd_connect_data") if req.body["pb_opc"] == spec.constant("OST_CONNECT") else None
        if ocd and ocd["ocd_connect_flags"] & flags2 and ocd["ocd_connect_flags2"] & bit:
            return True
    return False


@pytest.mark.parametrize("release", ["2.15.8", "2.16.1"])
def test_2_17_57s_ost_fails_an_older_releases_rules(release):
    """Vice versa: Lustre 2.17.57's answers are not those of an older release (-EOPNOTSUPP
    before 2.16, ids set by a punch before 2.17.0, and before 2.16 a grant of
    OBD_CONNECT2_REPLAY_CREATE, which that release does not define: every scenario whose
    client asks for it fails)."""
    a = started(make_testee())
    failed = {s.id for s in SCENARIOS if scen.run(s, a, release=release)[0]}
    granted = {s.id for s in SCENARIOS if _asks_replay_create(s)} if release < "2.16" else set()
    assert granted or release >= "2.16"
    assert failed == RELEASE_FAILS[release] | granted


@pytest.mark.parametrize("release, kind", [("2.15.8", "ERR"), ("2.17.57", "REPLY")])
def test_row16_erofs_type_follows_the_release(release, kind):
    """Row 16's -EROFS is ERR before 2.16 (ptlrpc_send_error): a target that grants RDONLY passes
    target.obj.readonly under its own release only, and the invariants (TGT-ERR-3) agree."""
    s = next(s for s in SCENARIOS if s.id == "target.obj.readonly")
    a = started(make_testee(target_config=TargetConfig(release=release, grant_rdonly=True)))
    other = "2.17.57" if release == "2.15.8" else "2.15.8"
    assert scen.run(s, a, release=release)[0] == []
    problems = scen.run(s, a, release=other)[0]
    assert problems and all(p.split(": ")[1] in ("TGT-ERR-2", "TGT-ERR-3")
                            for p in scen.first_failure(problems)), problems


def test_scenarios_name_only_the_release_facts_the_matrix_compares():
    """Every `if_release` of the bundled scenarios names a fact of release.TARGET_FACTS (what
    judged_facts compares for the target and recovery areas), so that the release matrix runs
    a scenario again under a release exactly when a fact it reads differs."""
    from ptlrpc_conformance.harness.verdicts import release
    named = {k for s in SCENARIOS for st in s.steps for k in (st.if_release or {})}
    assert named and named <= set(release.TARGET_FACTS)
    facts = {r: release.judged_facts("target", f"lustre-{r}") for r in ("2.15.8", "2.16.1", "2.17.0", "2.17.57")}
    assert facts["2.17.0"] == facts["2.17.57"]
    assert facts["2.15.8"] != facts["2.16.1"] != facts["2.17.0"]


@pytest.mark.parametrize("profile, rc", [("lustre-2.15.8", 0), (None, 1)])
def test_the_live_target_suite_follows_the_profiles_release(run_cli, monkeypatch, profile, rc):
    """The target and recovery areas run under --profile lustre-2.15.8 judge a 2.15.8 OST by its
    release's rules (the stateful cases too: the unknown opcode's -524, a punch that sets no
    ids); under the default profile the same target fails."""
    if rc:          # its stateful failures are not shrunk: shrinking changes no verdict
        monkeypatch.setenv("PYTEST_ADDOPTS", "-p ptlrpc_conformance.harness.tools.noshrink")
    args = ["certify", "--iut", "python:iuts:ost_2_15_8", "--area", "target", "--area", "recovery"]
    run = run_cli(*args, *(["--profile", profile] if profile else []), examples=60)
    assert run.rc == rc, run.stdout[-3000:]
    verdicts = run.verdicts()
    if rc == 0:
        assert set(verdicts.values()) == {"pass"}
    else:
        assert verdicts["target.err.unknown-opcode.exchange"] == "fail"


def test_a_create_far_below_last_id_before_2_16_leaves_the_scenario_not_applicable():
    """An OST before 2.16 whose LAST_ID is 20000 or more above id 1 refuses the scenarios' first
    create REPLY -EINVAL (ofd_create_hdl): under its release the scenarios that name objects are
    not applicable, none fails; under 2.17.57's rules that answer fails.  A 2.17.57 OST with the
    same LAST_ID passes every scenario."""
    old = started(make_testee(target_config=TargetConfig(release="2.15.8", last_id_start=30000)))
    out_of_reach = 0
    for s in SCENARIOS:
        try:
            assert scen.run(s, old, release="2.15.8")[0] == [], s.id
        except scen.LastIdOutOfReach:
            out_of_reach += 1
    assert out_of_reach > 10
    probe = next(s for s in SCENARIOS if s.id == "target.obj.lifecycle")
    problems = scen.run(probe, old)[0]
    assert problems and "TGT-OBJ-1" in problems[0] and "-22" in problems[0]
    new = started(make_testee(target_config=TargetConfig(last_id_start=30000)))
    for s in SCENARIOS:
        assert scen.run(s, new)[0] == [], s.id
