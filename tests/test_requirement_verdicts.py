"""Requirement verdicts and levels a vendor can publish (issue 15): a requirement's verdict comes
from the cases that exercise it, a failure is charged to the requirement it breaks, the level
is named by what was certified, SHOULD failures are warnings unless --strict, errno
mismatches are counted one by one, coverage comes from the collected cases, and every
failure message is headed by its requirement."""
import re

from ptlrpc_conformance import mutants
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.data.vectors import load_all
from ptlrpc_conformance.harness.outputs import certdoc
from ptlrpc_conformance.harness.outputs.report import requirement_verdicts
from ptlrpc_conformance.harness.transport.protocol import Outcome
from ptlrpc_conformance.harness.outputs import level
from ptlrpc_conformance.harness.tools import mutation
from ptlrpc_conformance.harness.verdicts import charges, judge
from ptlrpc_conformance.harness.verdicts.derive import derive, twin

FOREIGN = set(charges.FOREIGN_ORDER)


# ---- the level, and requirement verdicts from evidence (no IUT) ------------------------------

def _reqs(**verdicts):
    known = registry.requirements()
    return {rid.replace("_", "-"): {"level": known[rid.replace("_", "-")].level, "verdict": v}
            for rid, v in verdicts.items()}


def test_level_statuses_and_words():
    lv = level.level(_reqs(HDR_MAGIC_1="pass", ENC_CANON_1="pass", CKSUM_1="pass", TGT_OBJ_1="not-applicable"),
                     capabilities=["decode", "encode"])
    assert lv == {"status": "fully conformant", "certified_capabilities": ["decode", "encode"],
                  "failing_must": [], "failing_should": [], "not_applicable": ["TGT-OBJ-1"], "not_run": [],
                  "selection": {"complete": {"decode": True, "encode": True}}, "modes": []}
    assert level.words(lv) == "fully conformant: decode, encode"
    should = level.level(_reqs(HDR_MAGIC_1="pass", CKSUM_1="fail"))
    assert should["status"] == "conformant" and should["failing_should"] == ["CKSUM-1"]
    assert level.words(should) == "conformant: decode"
    must = level.level(_reqs(HDR_MAGIC_1="error", CKSUM_1="fail"))
    assert must["status"] == "not conformant" and must["failing_must"] == ["HDR-MAGIC-1"]
    # the testee protocol's own requirement certifies no capability
    nothing = level.level(_reqs(PROTO_OPS_1="pass", HDR_MAGIC_1="not-applicable"), capabilities=[])
    assert nothing["status"] == "not certified" and nothing["certified_capabilities"] == []
    assert level.words(nothing) == "not certified: no MUST case applied"
    assert level.level(_reqs(HDR_MAGIC_1="pass"), incomplete=True)["status"] == "incomplete"
    # a MUST requirement of a declared capability without evidence makes the run partial; a
    # selection that left out a case of a declared capability too
    gap = level.level(_reqs(HDR_MAGIC_1="pass", HDR_LENGTH_1="not-run"), capabilities=["decode"])
    assert gap["status"] == "partial" and gap["not_run"] == ["HDR-LENGTH-1"]
    assert level.words(gap) == "conformant (partial: 1 MUST requirement not run): decode"
    left_out = level.level(_reqs(HDR_MAGIC_1="pass"), capabilities=["decode", "target"],
                           selection={"areas": ["framing"], "deselected": {"target.x": ["TGT-OBJ-1"]}})
    assert left_out["status"] == "partial" and left_out["selection"]["complete"] == {"decode": True,
                                                                                    "target": False}
    assert level.words(left_out) == "conformant (partial: framing area): decode"
    # a relaxing mode: never "fully conformant"
    relaxed = level.level(_reqs(HDR_MAGIC_1="pass"), modes=[{"mode": "errno-agnostic", "by": "x", "why": "y"}])
    assert relaxed["status"] == "conformant" and level.words(relaxed) == "conformant (errno-agnostic): decode"
    # a failure outranks the scope
    assert level.level(_reqs(HDR_MAGIC_1="fail", HDR_LENGTH_1="not-run"))["status"] == "not conformant"


def test_a_requirement_passes_only_on_evidence():
    known = registry.requirements()
    cases = [
        {"id": "a", "requirements": ["HDR-MAGIC-1", "CKSUM-1"], "verdict": "pass", "not_exercised": ["CKSUM-1"]},
        {"id": "b", "requirements": ["HDR-MAGIC-1", "BODY-STATUS-1"], "verdict": "fail",
         "failed_requirements": ["BODY-STATUS-1"]},
        {"id": "c", "requirements": ["HDR-BUFCOUNT-1"], "verdict": "fail", "failed_requirements": ["TGT-REPLY-1"]},
        {"id": "d", "requirements": ["HDR-TOTAL-1"], "verdict": "error"},
        {"id": "e", "requirements": ["ENC-CANON-1"], "verdict": "not-applicable"},
    ]
    reqs = requirement_verdicts(cases, known)
    assert reqs["HDR-MAGIC-1"]["verdict"] == "pass" and reqs["HDR-MAGIC-1"]["passing"] == ["a"]
    assert reqs["HDR-MAGIC-1"]["exercised_by"] == ["a"]
    assert reqs["CKSUM-1"]["verdict"] == "not-exercised"         # case a passed, but could not judge it
    assert reqs["CKSUM-1"]["exercised_by"] == []
    assert reqs["BODY-STATUS-1"]["verdict"] == "fail" and reqs["BODY-STATUS-1"]["failing"] == ["b"]
    assert reqs["TGT-REPLY-1"]["verdict"] == "fail" and reqs["TGT-REPLY-1"]["cases"] == ["c"]
    assert reqs["HDR-BUFCOUNT-1"]["verdict"] == "inconclusive"   # its only case failed on another one
    assert reqs["HDR-TOTAL-1"]["verdict"] == "error" and cases[3]["failed_requirements"] == ["HDR-TOTAL-1"]
    assert reqs["ENC-CANON-1"]["verdict"] == "not-applicable"
    assert reqs["BODY-STATUS-1"]["exercised_by"] == ["b"]      # a failure charged to it is evidence too


def test_a_case_that_records_what_it_exercised_credits_only_that():
    """A suite case records `exercised`: a pass credits those requirements only, and the
    others it lists are its `not_exercised`; a case that records no `exercised` member (a
    plugin user's own) credits what it lists but what it named not exercised."""
    known = registry.requirements()
    cases = [
        {"id": "prop", "requirements": ["HDR-MAGIC-1", "BODY-TYPE-2", "HDR-ORDER-1"], "verdict": "pass",
         "exercised": ["HDR-MAGIC-1"]},
        {"id": "own", "requirements": ["BODY-TYPE-1", "CKSUM-1"], "verdict": "pass", "not_exercised": ["CKSUM-1"]},
        {"id": "failed", "requirements": ["HDR-ORDER-1", "HDR-TOTAL-1"], "verdict": "fail",
         "failed_requirements": ["HDR-TOTAL-1"], "exercised": []},
    ]
    reqs = requirement_verdicts(cases, known)
    assert cases[0]["not_exercised"] == ["BODY-TYPE-2", "HDR-ORDER-1"]
    assert reqs["HDR-MAGIC-1"]["verdict"] == "pass" and reqs["HDR-MAGIC-1"]["exercised_by"] == ["prop"]
    assert reqs["BODY-TYPE-2"]["verdict"] == "not-exercised" and reqs["BODY-TYPE-2"]["passing"] == []
    assert reqs["BODY-TYPE-1"]["verdict"] == "pass" and reqs["CKSUM-1"]["verdict"] == "not-exercised"
    # charging a failure is as before; a requirement only a failing case listed is inconclusive
    assert reqs["HDR-TOTAL-1"]["verdict"] == "fail" and reqs["HDR-TOTAL-1"]["exercised_by"] == ["failed"]
    assert reqs["HDR-ORDER-1"]["verdict"] == "inconclusive"


# ---- what a failure is charged to (no IUT) -------------------------------------------------------

VECTORS = {v.id: v for v in load_all()}


def _accepted(result) -> Outcome:
    return Outcome("ok", result=result)


def test_a_field_is_charged_to_its_requirement_and_a_swapped_one_to_byte_order():
    from ptlrpc_conformance.reference import make_testee
    ref = make_testee()
    v = VECTORS["framing.body.rich-request"]
    t = twin(v)
    good = ref.handle({"op": "decode", "data": t.data.hex(), "direction": t.direction})["result"]
    body = dict(good["body"], pb_transno=int.from_bytes(good["body"]["pb_transno"].to_bytes(8, "little"), "big"))
    j = judge.judge_decode(t, _accepted(dict(good, body=body)), role=judge.TWIN, origin=v)
    assert j.status == judge.FAIL and j.failed_requirements == ["BODY-SWAB-1"]
    body = dict(good["body"], pb_transno=good["body"]["pb_last_committed"])     # read at the wrong offset
    j = judge.judge_decode(t, _accepted(dict(good, body=body)), role=judge.TWIN, origin=v)
    assert j.failed_requirements == ["BODY-FIELDS-1"]
    native = ref.handle({"op": "decode", "data": v.data.hex(), "direction": v.direction})["result"]
    j = judge.judge_decode(v, _accepted(dict(native, body=dict(native["body"], pb_jobid="x"))))
    assert j.failed_requirements == ["BODY-JOBID-1"]


def test_a_rejection_is_charged_by_the_rule_model():
    v = VECTORS["framing.order.total-before-body-size"]
    assert judge.judge_decode(v, _accepted({})).failed_requirements == ["HDR-TOTAL-1"]
    # EFAULT is the errno class of a later check the message also fails: checks out of order
    assert judge.judge_decode(v, Outcome("error", error="EFAULT")).failed_requirements == \
        ["HDR-TOTAL-1", "HDR-ORDER-1"]
    assert judge.judge_decode(v, Outcome("error", error="EPROTO")).failed_requirements == ["HDR-TOTAL-1"]
    # a byte-swapped twin rejected while its origin is accepted: byte order
    origin = VECTORS["framing.bufcount.32"]
    t = twin(origin)
    rejected = Outcome("error", error="EINVAL")
    assert judge.judge_decode(t, rejected, role=judge.TWIN, origin=origin,
                              control=_accepted({})).failed_requirements == list(charges.FOREIGN_ORDER)
    # ... and as its origin when that is rejected too
    assert judge.judge_decode(t, rejected, role=judge.TWIN, origin=origin,
                              control=rejected).failed_requirements == ["HDR-BUFCOUNT-1", "PAD-HEADER-1"]
    # a crash on a decode breaks DEC-ROBUST-1 too
    crash = judge.judge_decode(VECTORS["framing.bufcount.zero"], Outcome("crash", detail="boom"))
    assert crash.status == judge.ERROR and crash.failed_requirements == ["HDR-BUFCOUNT-1", "DEC-ROBUST-1"]


def test_derived_cases_list_what_their_judges_can_charge_not_their_origins_list():
    cases = {c.id: c for c in derive([v for v in load_all() if v.op == "decode"])}
    t = cases["framing.body.err-reply.swabbed.decode"]
    assert set(charges.FOREIGN_ORDER) <= set(t.requirements) and "BODY-STATUS-1" in t.requirements
    cut = cases["framing.body.rich-request.cut-fixed.decode"]
    assert cut.requirements[0] == "HDR-LENGTH-1" and "ENC-CANON-1" not in cut.requirements
    for c in cases.values():
        assert not any(r.startswith("ENC-") for r in c.requirements), c.id
    # a decode case never lists an encoder's requirement; the encode case lists them
    v = VECTORS["framing.magic.v2-native"]
    assert "ENC-CANON-1" not in charges.case_requirements(v, "decode")
    assert charges.case_requirements(v, "encode") == ["PAD-HEADER-1", "ENC-CANON-1", "ENC-LENGTH-1"]


def test_the_requirement_heads_every_failure_message():
    v = VECTORS["framing.bufcount.zero"]
    j = judge.finish(judge.judge_decode(v, _accepted({})), ["HDR-BUFCOUNT-1"])
    lines = j.message.splitlines()
    statement = registry.requirements()["HDR-BUFCOUNT-1"].statement
    assert lines[0] == f"HDR-BUFCOUNT-1 (MUST): {statement}"
    assert lines[1] == f"{v.id}: {v.title}" and lines[2].startswith("expected: rejected with EINVAL")
    # target failures name the violated invariant at the head of each problem line
    target = judge.Judgement(judge.FAIL, "target.x: a title\nstep 3 (c1 xid 3): TGT-REPLY-1: the reply's pb_opc is 0")
    judge.finish(target, ["TGT-CONN-2", "TGT-ERR-1"])
    assert target.failed_requirements == ["TGT-REPLY-1"] and target.message.startswith("TGT-REPLY-1 (MUST): ")


# ---- certification runs --------------------------------------------------------------------------

def test_an_iut_with_no_capability_is_not_certified(run_cli):
    run = run_cli("--iut", "python:iuts:no_capabilities")
    assert run.rc == 5, run.stdout[-2000:] + run.stderr[-2000:]
    r = run.report
    assert r["exit_status"] == 5 and r["level"]["status"] == "not certified"
    assert r["level"]["certified_capabilities"] == [] and r["summary"]["fail"] == 0
    # a valid selection in which no MUST case of a capability applies: the protocol area alone
    protocol = run_cli("--iut", "reference", "--area", "protocol")
    assert protocol.rc == 5 and protocol.report["level"]["status"] == "not certified"


def test_optional_members_left_out_make_their_requirements_not_applicable(run_cli):
    run = run_cli("--iut", "python:iuts:decode_only_without_cksum")
    assert run.rc == 0, run.stdout[-2000:] + run.stderr[-2000:]
    r = run.report
    # no encode case applies; the checksum is listed by decode cases that could not judge it
    assert r["requirements"]["ENC-CANON-1"]["verdict"] == "not-applicable", r["requirements"]["ENC-CANON-1"]
    assert r["requirements"]["CKSUM-1"]["verdict"] == "not-exercised", r["requirements"]["CKSUM-1"]
    assert r["requirements"]["CKSUM-1"]["exercised_by"] == []
    # the structs.message cases pass on their framing, and exercise no structure requirement:
    # of a capability the IUT does not declare, they are not applicable
    for rid in ("STRUCT-MSG-1", "STRUCT-OCD-1", "STRUCT-SWAB-1", "VALID-MDT-1"):
        assert r["requirements"][rid]["verdict"] == "not-applicable", (rid, r["requirements"][rid])
        assert r["requirements"][rid]["exercised_by"] == []
    assert r["level"]["status"] == "fully conformant" and r["level"]["certified_capabilities"] == ["decode"]
    be = run.case("structs.message.ost-connect-request-be.decode")
    assert be["verdict"] == "pass" and {"STRUCT-MSG-1", "STRUCT-OCD-1", "STRUCT-SWAB-1"} <= set(be["not_exercised"])
    for rid, entry in r["requirements"].items():
        assert (entry["verdict"] == "pass") == bool(entry["passing"]), rid


def test_a_body_only_bug_fails_only_the_body_requirement(zoo):
    """The zoo's run of the mutant over the framing area (conftest.py's `zoo`)."""
    r = zoo.result("status_unsigned")
    assert r["area"] == "framing" and r["status"] == "killed"
    decode_failures = {c: reqs for c, reqs in r["failed"].items() if c.endswith(".decode")}
    assert decode_failures and all(reqs == ["BODY-STATUS-1"] for reqs in decode_failures.values()), decode_failures
    assert "BODY-STATUS-1" in r["failing_requirements"] and registry.requirements()["BODY-STATUS-1"].level == "MUST"
    assert not [rid for rid in r["failing_requirements"] if rid.startswith("HDR-")]


def test_a_byte_order_only_bug_fails_only_byte_order_requirements(run_cli):
    run = run_cli("--iut", mutants.BY_ID["swabbed_magic_unknown"].iut, "--area", "framing", "--area", "structs")
    r = run.report
    assert run.rc == 1 and "HDR-MAGIC-2" in r["level"]["failing_must"]
    assert set(r["level"]["failing_must"]) <= FOREIGN, r["level"]["failing_must"]


def test_a_stateful_failure_is_charged_to_the_violated_invariant(run_cli, monkeypatch):
    monkeypatch.setenv("PYTEST_ADDOPTS", f"-p {mutation.NO_SHRINK_PLUGIN}")   # shrinking changes no verdict
    m = mutants.BY_ID["target_setattr_ignores_valid"]
    run = run_cli("--iut", m.iut, "--case", "target.stateful.exchange")
    r = run.report
    failed = [c for c in r["cases"] if c["verdict"] == "fail"]
    assert failed and all(c["failed_requirements"] == ["TGT-OBJ-1"] for c in failed)
    assert all(len(c["requirements"]) > 1 for c in failed)      # the case covers more than it broke
    assert r["level"]["failing_must"] == ["TGT-OBJ-1"]


def test_should_failures_are_warnings_unless_strict(run_cli):
    iut = mutants.BY_ID["cksum_final_inversion"].iut
    warned = run_cli("--iut", iut, "-k", "framing.cksum", html=True)
    assert warned.rc == 0, warned.stdout[-2000:] + warned.stderr[-2000:]
    r = warned.report
    assert r["exit_status"] == 0 and r["summary"]["fail"] > 0
    assert r["level"]["status"] == "partial" and r["level"]["failing_should"] == ["CKSUM-1"]
    assert "Warning: SHOULD requirements not met" in (warned.out / "report.html").read_text()
    assert "failing SHOULD requirements: 1 (warnings: they change the exit status only with --strict)" \
        in warned.stdout
    message = warned.case("framing.cksum.v2-body.decode")["message"]
    assert message.startswith("CKSUM-1 (SHOULD): The checksum of a message")
    assert message.splitlines()[1].startswith("framing.cksum.v2-body: ")
    strict = run_cli("--iut", iut, "-k", "framing.cksum", "--strict")
    assert strict.rc == 1 and strict.report["exit_status"] == 1
    assert "--strict" in strict.report["reproduce"]


def test_a_property_failure_is_printed_once(run_cli):
    run = run_cli("--iut", mutants.BY_ID["valid_omitted_is_zero"].iut, "-k", "structs.valid.obdo.encode-omitted",
                  "-v", html=True)
    assert run.rc == 1
    html = (run.out / "report.html").read_text()
    for text in (run.stdout, run.case("structs.valid.obdo.encode-omitted")["message"], html):
        assert "During handling of the above exception" not in text
    message = run.case("structs.valid.obdo.encode-omitted")["message"]
    assert message.count("counterexample") == 1 and message.startswith("VALID-ENC-1 (MUST): ")


def test_every_errno_mismatch_is_counted_derived_variants_included(run_cli):
    """With --ignore-errno-class, a decoder that names every rejection EBADMSG passes, and each of
    its rejections - of a vector or of a derived variant - is counted under its requirement.
    (The properties that draw invalid messages are left out: their count depends on the draw.)"""
    run = run_cli("--iut", "python:iuts:ebadmsg", "--ignore-errno-class", "--area", "framing", "-k",
                  "not arbitrary and not mutations and not full_width_messages")
    assert run.rc == 0
    decode = [v for v in load_all() if v.op == "decode" and v.id.startswith("framing.")]
    expected = sum(v.verdict == "invalid" for v in decode) + sum(
        x.verdict == "invalid" for c in derive(decode) for x in c.variants)
    found, per_requirement = certdoc.errno_mismatches(run.report["cases"])
    assert len(found) == expected and sum(per_requirement.values()) >= expected
    assert per_requirement["HDR-TOTAL-1"] > 0 and per_requirement["BODY-SIZE-1"] > 0
    doc = certdoc.render(run.report)
    assert re.search(rf"Rejections that named another class than Lustre's: {expected}, in \d+ cases", doc)


def test_requirements_list_and_report_count_the_same_cases(run_cli, certified):
    """`requirements`, `list` and report.json agree on the cases of every requirement."""
    run = run_cli("requirements", out=False)
    counted = {m.group(1): int(m.group(2)) for m in re.finditer(r"^(\S+)\s+\S+\s+cases=(\d+)", run.stdout, re.M)}
    listing = run_cli("list", out=False)
    listed: dict[str, int] = {}
    for line in listing.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and "." in parts[0]:
            for rid in parts[1].split(","):
                listed[rid] = listed.get(rid, 0) + 1
    report = certified("reference").report
    reported = {rid: len(e["cases"]) for rid, e in report["requirements"].items()}
    profile = registry.profile(None).name
    in_profile = {r.id for r in registry.requirements().values() if r.in_profile(profile)}
    assert counted and listed and reported, "a listing came back empty: nothing to compare"
    assert {r: n for r, n in counted.items() if n} == {r: n for r, n in listed.items() if r in in_profile} \
        == {r: n for r, n in reported.items() if r in in_profile}


# ---- evidence: what a pass exercised (issue 24) ----------------------------------------------------

def test_a_rejection_is_evidence_only_when_its_valid_neighbour_is_accepted():
    v = VECTORS["framing.order.total-before-body-size"]
    rejected = Outcome("error", error="EINVAL")
    j = judge.judge_decode(v, rejected, control=_accepted({}))
    assert j.status == judge.PASS and j.notes["exercised"] == ["HDR-TOTAL-1", "HDR-ORDER-1", "DEC-ROBUST-1"]
    # the neighbour rejected too: still a pass, but evidence for nothing, and the note says why
    j = judge.judge_decode(v, rejected, control=rejected)
    assert j.status == judge.PASS and j.notes["exercised"] == [] and "control_rejected" in j.notes
    # no neighbour sent: no evidence either
    assert judge.judge_decode(v, rejected).notes["exercised"] == []
    # errno-agnostic: accept/reject judged, the errno class not, so nothing tells which of the
    # checks it fails (total length, then body size) refused it: neither HDR-ORDER-1 nor
    # HDR-TOTAL-1 is shown, only that the decoder refuses such a message
    j = judge.judge_decode(v, Outcome("error", error="EBADMSG"), errno_agnostic=True, control=_accepted({}))
    assert j.notes["exercised"] == ["DEC-ROBUST-1"] and j.notes["errno_judged"] is False


def test_a_rejection_with_a_class_a_later_check_shares_shows_no_check():
    """framing.bufcount.33 fails the bufcount check and, later, the header size and total
    checks, all EINVAL: its EINVAL shows that some check refused it, not that the bufcount
    check did (a decoder without one refuses it too), so it credits neither HDR-BUFCOUNT-1 nor
    HDR-ORDER-1 (found by a review of lustre_unpack_msg_v2's order).  A vector that fails one
    check alone is evidence for it, as before."""
    v = VECTORS["framing.bufcount.33"]
    j = judge.judge_decode(v, Outcome("error", error="EINVAL"), control=_accepted({}))
    assert j.status == judge.PASS and j.notes["exercised"] == ["DEC-ROBUST-1"], j.notes
    one = VECTORS["framing.bufcount.zero"]
    j = judge.judge_decode(one, Outcome("error", error="EINVAL"), control=_accepted({}))
    assert "HDR-BUFCOUNT-1" in j.notes["exercised"], j.notes


def test_a_structure_in_a_message_is_exercised_only_with_structs():
    from ptlrpc_conformance.reference import make_testee
    v = VECTORS["structs.message.ost-connect-request-be"]
    result = make_testee().handle({"op": "decode", "data": v.data.hex(), "direction": v.direction})["result"]
    without = judge.judge_decode(v, _accepted(result), with_structs=False).notes["exercised"]
    assert not [r for r in without if r.startswith(("STRUCT-", "VALID-"))] and "HDR-MAGIC-2" in without
    with_structs = judge.judge_decode(v, _accepted(result), with_structs=True).notes["exercised"]
    assert {"STRUCT-MSG-1", "STRUCT-OCD-1", "STRUCT-SWAB-1"} <= set(with_structs)


def test_a_property_credits_what_its_examples_decided():
    """Each example records the requirement that decided it; rejections count only for a
    direction in which something was accepted."""
    from hypothesis import strategies as st

    from ptlrpc_conformance.suites.test_properties import check_property

    def check(example):
        direction = "request" if example % 2 else "reply"
        if example % 3 == 0:
            return judge.Judgement(judge.PASS, notes={"exercised": ["HDR-MAGIC-1"], "evidence": "acceptance",
                                                      "direction": "reply"})
        return judge.Judgement(judge.PASS, notes={"exercised": [f"BODY-TYPE-{1 if direction == 'reply' else 2}"],
                                                  "evidence": "rejection", "direction": direction})
    concluded = []
    check_property(st.integers(0, 1000), check, 1, 30, concluded.append, "directions")
    [j] = concluded
    assert j.status == judge.PASS and j.notes["exercised"] == ["BODY-TYPE-1", "HDR-MAGIC-1"]
    assert "request" in j.notes["control_rejected"]
    # a request control accepted before the examples makes the request rejections evidence too
    concluded.clear()
    check_property(st.integers(0, 1000), check, 1, 30, concluded.append, "directions",
                   accepted_directions={"request"})
    assert concluded[0].notes["exercised"] == ["BODY-TYPE-1", "BODY-TYPE-2", "HDR-MAGIC-1"]


def test_an_iut_that_rejects_everything_earns_no_pass(run_cli, no_shrinking):
    """Not even the requirements that ask for a rejection: each rejection's valid neighbour was
    rejected too.  With errno-agnostic judging, every rejection of an invalid input passes its
    case, and still exercises nothing.  (Unshrunk, as the zoo's runs are: shrinking only looks
    for a smaller failing example, so no failing case passes without it, and it was two thirds
    of these two whole runs.  The requirements a failure charges may differ; this test reads
    only what is credited.)"""
    for iut in ("python:iuts:rejects_everything", "python:iuts:rejects_everything_agnostic"):
        run = run_cli("--iut", iut)
        r = run.report
        assert r["summary"]["pass"] > 0, iut          # cases pass: their evidence is what is withheld
        passed = [rid for rid, e in r["requirements"].items() if e["verdict"] == "pass" or e["passing"]]
        assert passed == [], (iut, passed)
        assert r["level"]["status"] not in ("conformant", "fully conformant"), r["level"]
        for rid in ("BODY-TYPE-2", "DEC-ROBUST-1", "ENC-REJECT-1", "PROTO-OPS-1", "STRUCT-TRUNC-1"):
            assert r["requirements"][rid]["verdict"] != "pass", rid
        trunc = run.case("structs.obdo.truncated.decode")
        assert trunc["verdict"] == "pass" and trunc["exercised"] == [] and "control_rejected" in trunc["notes"]


def test_a_decode_only_iut_gets_no_encoder_or_structure_requirement(certified):
    r = certified("python:iuts:decode_only").report
    passed = {rid for rid, e in r["requirements"].items() if e["verdict"] == "pass"}
    assert passed and not [rid for rid in passed if rid.startswith(("ENC-", "STRUCT-", "VALID-"))], passed


def test_the_reference_exercises_every_requirement_of_the_default_profile(certified):
    """Every passing suite case says what it exercised (among what it lists), and together
    they exercise every requirement of the default profile that a target or codec can: the
    reference is no client: a client's requirements (capability client) are judged over the
    conversation of a client `certify --client` runs (tests/test_client_certify.py), and are
    not applicable here."""
    r = certified("reference").report
    profile = registry.profile(None).name
    in_profile = {rid for rid, req in registry.requirements().items()
                  if req.in_profile(profile) and req.capability != "client"}
    for c in r["cases"]:
        if c["verdict"] == "pass":
            assert "exercised" in c and set(c["exercised"]) <= set(c["requirements"]), c["id"]
            assert c["not_exercised"] == sorted(set(c["requirements"]) - set(c["exercised"])), c["id"]
    assert {rid: e["verdict"] for rid, e in r["requirements"].items() if rid in in_profile and e["verdict"] != "pass"} \
        == {}
    assert in_profile <= set(r["requirements"])
    client = {rid for rid, req in registry.requirements().items() if req.capability == "client"}
    assert client and {r["requirements"][rid]["verdict"] for rid in client} == {"not-applicable"}
    for rid in in_profile:
        assert r["requirements"][rid]["exercised_by"], rid
