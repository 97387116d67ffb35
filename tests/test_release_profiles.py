"""Release profiles: the profile grammar, what a release changes in an expected decode, the
reference decoding as an older release, and the release matrix (`certify --profile all`)."""
from __future__ import annotations

import json

import pytest

from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.data.vectors import Vector
from ptlrpc_conformance.harness.outputs import matrix
from ptlrpc_conformance.harness.verdicts import release
from ptlrpc_conformance.spec import releases

RELEASES = ["2.12.9", "2.15.8", "2.16.1", "2.17.0", "2.17.57"]


def test_a_profile_per_release_and_modifiers_on_any_release():
    assert registry.releases() == RELEASES
    assert registry.default_profile() == "lustre-2.17.57"
    assert registry.release_profiles() == [f"lustre-{r}" for r in RELEASES]
    p = registry.profile("lustre-2.15.8-literal-reconstruct")
    assert (p.release, p.modifiers, p.base) == ("2.15.8", ("literal", "reconstruct"), "lustre-2.15.8")
    assert p.relaxes and "32-bit wrap" in p.relaxes
    assert registry.profile("lustre-2.16.1").relaxes is None
    for bad in ("lustre-2.14.0", "lustre-2.15.8-reconstruct-literal", "lustre-2.15.8-strict", "2.15.8"):
        with pytest.raises(registry.RegistryError, match="lustre-<release>"):
            registry.profile(bad)


def test_every_release_profile_names_its_tag_and_facts():
    for rid in RELEASES:
        r = registry.release(rid)
        assert r.tag == "v" + rid.replace(".", "_") and len(r.commit) == 40
        facts = releases.load(rid)
        assert facts["release"] == rid


def test_requirements_follow_modifiers():
    reqs = registry.requirements()
    for rid in RELEASES:
        assert reqs["HDR-BUFLEN-2"].in_profile(f"lustre-{rid}")
        assert not reqs["HDR-BUFLEN-2"].in_profile(f"lustre-{rid}-literal")
        assert reqs["TGT-RESEND-2"].in_profile(f"lustre-{rid}-reconstruct")
        assert not reqs["TGT-RESEND-2"].in_profile(f"lustre-{rid}")


def test_override_keys_least_specific_first():
    assert registry.override_keys("lustre-2.12.9-literal") == ["literal", "lustre-2.12.9", "lustre-2.12.9-literal"]
    assert registry.override_keys("lustre-2.17.57") == ["lustre-2.17.57"]
    v = Vector(id="x.y", title="t", requirements=("HDR-BUFLEN-2",), cite=("c",), verdict="invalid",
               direction="request", data=b"", errno=("EINVAL",),
               overrides={"literal": {"verdict": "acceptable"}, "lustre-2.12.9-literal": {"verdict": "valid"}})
    assert v.for_profile("lustre-2.16.1-literal").verdict == "acceptable"
    assert v.for_profile("lustre-2.12.9-literal").verdict == "valid"
    assert v.for_profile("lustre-2.12.9").verdict == "invalid"


def test_an_older_release_reads_its_padding_fields_unswapped():
    """2.15's code left lm_opc, pb_uid, pb_gid and pb_projid alone (they were padding); 2.16.1
    only pb_projid; 2.17.0 swaps them all, as the default release does."""
    expect = {"byte_order": "big", "header": {"lm_opc": 0x01020304, "lm_flags": 5},
              "body": {"pb_uid": 500, "pb_gid": 100, "pb_projid": 7, "pb_opc": 1}}
    v15 = release.view(expect, "2.15.8", literal=False)
    assert v15["header"] == {"lm_opc": 0x04030201, "lm_flags": 5}
    assert v15["body"] == {"pb_uid": 0xF4010000, "pb_gid": 0x64000000, "pb_projid": 0x07000000, "pb_opc": 1}
    v16 = release.view(expect, "2.16.1", literal=False)
    assert v16["header"]["lm_opc"] == 0x01020304 and v16["body"]["pb_uid"] == 500
    assert v16["body"]["pb_projid"] == 0x07000000
    assert release.view(expect, "2.17.0", literal=False) == expect
    little = dict(expect, byte_order="little")
    assert release.view(little, "2.12.9", literal=False) == little
    assert expect["body"]["pb_uid"] == 500          # not changed in place


def test_an_unterminated_jobid_is_left_unjudged_only_where_the_release_reads_it_whole():
    expect = {"body": {"pb_jobid": "j" * 31, "pb_opc": 400}}
    assert release.view(expect, "2.12.9", literal=True) == {"body": {"pb_opc": 400}}
    assert release.view(expect, "2.12.9", literal=False) == expect       # the plain profile judges the bug
    assert release.view(expect, "2.15.8", literal=True) == expect        # 2.15.8 terminates it


def test_release_facts_say_which_releases_terminate_the_jobid():
    terminated = {r: releases.load(r)["behaviour"]["jobid_nul_terminated"]["value"] for r in RELEASES}
    assert terminated == {"2.12.9": False, "2.15.8": True, "2.16.1": True, "2.17.0": True, "2.17.57": True}


def test_fingerprints_differ_only_where_a_release_judges_differently():
    base = matrix.fingerprints("lustre-2.17.57")
    newer = matrix.fingerprints("lustre-2.17.0")
    differ = {c for c in newer if base.get(c) != newer[c]}
    # 2.17.57 grew mdc_swap_layouts from 8 to 24 bytes: 2.17.0 has bytes of its own for it
    # (vectors/structs_releases.yaml); quota_body's qb_glb_ver was padding, at the same bytes
    assert "structs.generated.mdc-swap-layouts.decode" in differ
    assert "structs.generated.quota-body.decode" not in differ
    assert all(c.startswith("structs.generated.") for c in differ), differ
    older = matrix.fingerprints("lustre-2.15.8")
    differ = {c for c in older if base.get(c) != older[c]}
    assert "framing.magic.v2-swabbed.decode" in differ          # pb_uid of a big-endian request
    assert "framing.magic.v2-native.decode" not in differ
    assert "structs.obd-connect-data.be-flags2-compress.decode" in differ    # ocd_compr_type was padding
    assert "structs.obd-connect-data.all-fields-le.decode" not in differ     # ... read the same little-endian
    assert "structs.generated.ldlm-inodebits.encode" in differ               # 24 bytes in 2.15.8
    assert "structs.obdo.valid-shared-grant-le.decode" not in differ
    # the target rules differ too (unknown opcode, -EROFS, punch ids, REPLAY_CREATE): every
    # target and recovery case runs again under 2.15.8, none under 2.17.0
    assert any(c.startswith("target.") for c in differ) and any(c.startswith("recovery.") for c in differ)
    assert not any(c.startswith(("target.", "recovery.")) and base[c] != newer[c] for c in newer)
    rec = matrix.fingerprints("lustre-2.17.57-reconstruct")
    assert any(c.startswith("target.") and base[c] != rec[c] for c in rec)


def _run_matrix(run_cli, iut):
    run = run_cli("certify", "--iut", iut, "--profile", "all", "-q", "-k", "swabbed or jobid or magic")
    doc = json.loads((run.out / "report.json").read_text())
    return run, doc


def test_the_matrix_names_the_release_an_implementation_follows(run_cli):
    run, doc = _run_matrix(run_cli, "reference:2.15.8")
    assert doc["format"] == matrix.FORMAT and doc["base"] == "lustre-2.17.57"
    rows = {r["release"]: r for r in doc["releases"]}
    assert list(rows) == RELEASES
    # -k: a partial run, conformant to no release as a whole, under each release alike
    assert doc["conformant_to"] == [] and doc["partial"], doc
    assert all(r["level"]["status"] in ("partial", "not conformant") for r in doc["releases"])
    assert doc["no_failing_must_in"] == ["2.12.9", "2.15.8"], doc["no_failing_must_in"]
    assert "BODY-SWAB-1" in rows["2.17.57"]["failing_requirements"]
    assert rows["2.17.0"]["own_cases"] == 0                 # judged like 2.17.57 (-k): nothing ran again
    assert rows["2.15.8"]["own_cases"] > 0
    assert run.rc == 0                                       # conformant to at least one release
    for r in RELEASES:                                       # each release has its own report
        rep = json.loads((run.out / f"lustre-{r}" / "report.json").read_text())
        assert rep["profile"] == f"lustre-{r}" and rep["lustre_version"] == r
    assert "release matrix" in run.stdout and "conformant to: no release as a whole (a partial run" in run.stdout
    assert "no MUST failed among the cases that ran under: 2.12.9, 2.15.8" in run.stdout
    assert "conformant to: 2.12.9" not in run.stdout
    html = (run.out / "report.html").read_text()
    assert "lustre-2.15.8/report.html" in html


def test_the_matrix_certification_document(run_cli, tmp_path):
    run, doc = _run_matrix(run_cli, "reference")
    assert doc["conformant_to"] == [] and doc["no_failing_must_in"] == ["2.17.0", "2.17.57"]
    out = tmp_path / "matrix.md"
    refused = run_cli("certification-doc", str(run.out / "report.json"), "--out", str(out), out=False)
    assert refused.rc == 2 and "a partial run" in refused.stderr and "--allow-partial" in refused.stderr
    assert not out.exists()                     # a selection's matrix is refused as a single profile's is
    doc_run = run_cli("certification-doc", str(run.out / "report.json"), "--allow-partial", "--out", str(out),
                      out=False)
    assert doc_run.rc == 0, doc_run.stderr
    text = out.read_text()
    assert "**Conformant to: no release as a whole (a partial run: " in text
    assert "no MUST failed among the cases that ran under: 2.17.0, 2.17.57.**" in text
    assert "**Conformant to: 2.17" not in text
    assert "| lustre-2.15.8 | not conformant" in text and "## lustre-2.15.8: what fails" in text


def test_reference_as_an_older_release_passes_that_release(run_cli):
    run = run_cli("certify", "--iut", "reference:2.12.9", "--profile", "lustre-2.12.9-literal", "-q",
                  "-k", "jobid or swabbed")
    assert run.rc == 0, run.stdout[-2000:]
    run = run_cli("certify", "--iut", "reference:2.12.9", "--profile", "lustre-2.12.9", "-q", "-k", "jobid")
    assert run.rc == 1 and "BODY-JOBID-1" in run.stdout        # the plain profile judges 2.12.9's jobid bug
    bad = run_cli("certify", "--iut", "reference:2.14.0", out=False)
    assert bad.rc == 2 and "unknown Lustre release '2.14.0'" in bad.stderr


def test_a_release_reruns_only_what_it_judges_differently_within_the_selection():
    base = {"a": "1", "b": "2", "c": "3"}
    mine = {"a": "1", "b": "X", "c": "Y", "d": "4"}
    # c was not run by the base (deselected); d is a case only this release has
    assert matrix.to_rerun(mine, base, ran={"a", "b"}, selected=True) == ["b"]
    assert matrix.to_rerun(mine, base, ran={"a", "b", "c"}, selected=False) == ["b", "c", "d"]
    assert matrix.to_rerun(base, base, ran=set(base), selected=False) == []


def test_valid_bits_follow_the_release():
    """A release's valid-bit table keeps only the OBD_MD_* bits its lustre_idl.h defines:
    2.12.9 has no OBD_MD_FLBTIME, so mbo_btime is never valid there; 2.15.8 has every bit
    of the default table."""
    from ptlrpc_conformance.spec import layouts
    default = layouts.valid_bits()
    assert default["mdt_body"]["fields"]["mbo_btime"] == [["OBD_MD_FLBTIME", 1 << 60]]
    assert "OBD_MD_FLBTIME" not in releases.load("2.12.9")["valid_bits_defined"]
    assert releases.load("2.15.8")["valid_bits_defined"]["OBD_MD_FLBTIME"]["value"] == 1 << 60
    old = layouts.valid_bits("2.12.9")
    assert "mbo_btime" not in old["mdt_body"]["fields"]
    assert {f: b for f, b in old["mdt_body"]["fields"].items()} == \
        {f: b for f, b in default["mdt_body"]["fields"].items() if f != "mbo_btime"}
    assert old["obdo"]["fields"] == default["obdo"]["fields"]
    assert layouts.valid_bits("2.15.8") == default
    assert release.never_valid("2.12.9") == {"mbo_btime"} and release.never_valid("2.15.8") == frozenset()


def test_a_release_without_a_bit_expects_its_field_never_valid():
    """release.view drops from an expected valid list a field the release never reports
    valid; the reference as 2.12.9 reports the same."""
    from ptlrpc_conformance.reference import make_testee, release_testee
    expect = {"byte_order": "little", "structs": {"1": {"type": "mdt_body", "valid": ["mbo_size", "mbo_btime"]}}}
    assert release.view(expect, "2.12.9", False)["structs"]["1"]["valid"] == ["mbo_size"]
    assert release.view(expect, "2.15.8", False) == expect
    assert expect["structs"]["1"]["valid"] == ["mbo_size", "mbo_btime"]        # not changed in place
    from ptlrpc_conformance.spec import structs as S
    data = bytearray(S.size("mdt_body"))
    f = S.top_field("mdt_body", "mbo_valid")
    data[f["offset"]:f["offset"] + 8] = ((1 << 60) | 0x10).to_bytes(8, "little")
    request = {"op": "decode_struct", "type": "mdt_body", "data": bytes(data).hex(), "byte_order": "little"}
    views = {}
    for name, testee in (("default", make_testee()), ("2.12.9", release_testee("2.12.9"))):
        out = testee.handle(request)
        assert out["ok"], out
        views[name] = sorted(out["result"]["valid"])
    assert views == {"default": ["mbo_btime", "mbo_size"], "2.12.9": ["mbo_size"]}


def test_verify_report_reads_a_matrix_report_and_the_matrix_points_at_the_literal_profiles(run_cli, tmp_path):
    run = run_cli("certify", "--iut", "reference:2.12.9", "--profile", "all", "-q", "-k", "jobid-unterminated")
    assert run.rc == 1 and "BODY-JOBID-1" in run.stdout      # 2.12.9's unterminated jobid: the plain profiles
    assert "note: a release's own code is judged under its -literal profile (--profile all-literal)" in run.stdout
    doc = json.loads((run.out / "report.json").read_text())
    assert doc["reproduce"][doc["reproduce"].index("--profile") + 1] == "all"
    again = run_cli("verify-report", str(run.out / "report.json"), out=False)
    assert again.rc == 0 and "verdicts agree" in again.stdout, again.stdout[-2000:] + again.stderr[-2000:]
    # a release's verdict changed in its own report beside the matrix's: verify-report names it
    member = run.out / "lustre-2.15.8" / "report.json"
    rep = json.loads(member.read_text())
    case = rep["cases"][0]
    case["verdict"] = "pass" if case["verdict"] != "pass" else "fail"
    member.write_text(json.dumps(rep))
    changed = run_cli("verify-report", str(run.out / "report.json"), out=False)
    assert changed.rc == 1 and f"lustre-2.15.8: {case['id']}: report says {case['verdict']}" in changed.stdout
