"""spec/release_differences.yaml: what changes between the Lustre releases the suite has a
profile for.  Its loader validates it (every requirement exists, the releases are the
profiles' releases, ids are unique, every entry names its Lustre ticket and commit), every
case pattern names cases the suite has, the differences issue 25 listed are there with the
release that first has them, and docs/releases.md is what tools/gen_releases_doc.py makes
of the file."""
import copy
import fnmatch
import re
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT
from ptlrpc_conformance.spec import release_differences as rd

RELEASES = ["2.12.9", "2.15.8", "2.16.1", "2.17.0", "2.17.57"]
DOC = ROOT / "docs" / "releases.md"


def requirement_ids() -> set[str]:
    data = yaml.safe_load((ROOT / "ptlrpc_conformance" / "spec" / "requirements.yaml").read_text())
    return {r["id"] for r in data["requirements"]}


def raw() -> dict:
    return yaml.safe_load((ROOT / "ptlrpc_conformance" / "spec" / "release_differences.yaml").read_text())


def case_ids() -> set[str]:
    """Every case id the suite can run (collected as certify collects them, derived cases
    included), and the stateful parts (spec/case_aliases.yaml)."""
    from ptlrpc_conformance.cli.data import collected_cases
    ids = set(collected_cases())
    aliases = yaml.safe_load((ROOT / "ptlrpc_conformance" / "spec" / "case_aliases.yaml").read_text())["aliases"]
    for parts in aliases.values():
        ids.update(parts)
    return ids


def test_the_file_loads_and_validates():
    data = rd.load()
    assert rd.validate(data, requirement_ids()) == []
    assert len(rd.differences()) == len(data["differences"]) > 0


def test_releases_are_the_profile_releases_in_order():
    assert rd.releases() == RELEASES
    for r in rd.load()["releases"]:
        assert r["tag"] == "v" + r["release"].replace(".", "_")
        assert len(r["commit"]) == 40 and r["read"].strip() and r["target_note"].strip()


def test_every_requirement_named_exists():
    known = requirement_ids()
    named = {req for d in rd.differences() for req in d.requirements}
    assert named, "no difference names a requirement"
    assert named <= known, sorted(named - known)


def test_ids_are_unique_and_each_entry_names_ticket_and_commit():
    ids = [d.id for d in rd.differences()]
    assert len(ids) == len(set(ids))
    for d in rd.differences():
        assert d.lu.startswith("LU-") and d.lu[3:].isdigit(), d.id
        assert len(d.commit) == 40 and int(d.commit, 16) >= 0, d.id
        assert d.what and d.effect and d.cite, d.id
        assert d.kind in rd.KINDS, d.id
        assert RELEASES.index(d.to_release) == RELEASES.index(d.from_release) + 1, d.id


def test_every_case_pattern_names_cases_the_suite_has():
    known = case_ids()
    for d in rd.differences():
        for pattern in d.cases:
            assert fnmatch.filter(known, pattern), f"{d.id}: {pattern} matches no case"


# The differences issue 25 names, each with the release of ours that first has it.
LISTED = {
    "LU-14393": ("lm-opc-swabbed", "2.16.1"),
    "LU-16077": ("pb-uid-gid-swabbed", "2.16.1"),
    "LU-17166": ("pb-projid-swabbed", "2.17.0"),
    "LU-16376": ("jobid-nul-terminated", "2.15.8"),
    "LU-15671": ("replay-create", "2.16.1"),
    "LU-18986": ("reqportal-to-mgs-nidlist", "2.17.0"),
    "LU-16265": ("punch-projid-when-unset", "2.17.0"),
    "LU-18756": ("resource-id-check", "2.17.0"),
    "LU-13064": ("llog-create-mdt-body", "2.15.8"),
    "LU-10391": ("large-nid-hello", "2.15.8"),
}


@pytest.mark.parametrize("lu", sorted(LISTED))
def test_the_differences_the_issue_lists_are_there(lu):
    did, to = LISTED[lu]
    d = {x.id: x for x in rd.differences()}[did]
    assert (d.lu, d.to_release) == (lu, to)


def test_between_collects_the_changes_of_every_step():
    assert rd.between("2.17.57", "2.17.57") == []
    step = {d.id for d in rd.between("2.15.8", "2.16.1")}
    assert "lm-opc-swabbed" in step and "pb-projid-swabbed" not in step
    assert rd.between("2.16.1", "2.15.8") == rd.between("2.15.8", "2.16.1")
    assert {d.id for d in rd.between("2.12.9", "2.17.57")} == {d.id for d in rd.differences()}
    assert {d.id for d in rd.for_requirement("BODY-SWAB-1")} == {"pb-uid-gid-swabbed", "pb-projid-swabbed"}
    with pytest.raises(KeyError):
        rd.between("2.14.0", "2.17.57")


@pytest.mark.parametrize("breakage, message", [
    (lambda d: d["differences"].append(copy.deepcopy(d["differences"][0])), "used twice"),
    (lambda d: d["differences"][0].update(requirements=["NOPE-1"]), "unknown requirement NOPE-1"),
    (lambda d: d["differences"][0].update({"from": "2.14.0"}), "must be releases of the file"),
    (lambda d: d["differences"][0].update({"to": "2.17.57"}), "right after"),
    (lambda d: d["differences"][0].update(lu=""), "not a ticket"),
    (lambda d: d["differences"][0].update(commit="abc"), "40-digit hash"),
    (lambda d: d["differences"][0].update(kind="other"), "is not one of"),
    (lambda d: d["differences"][0].pop("effect"), "missing ['effect']"),
    (lambda d: d["differences"][0].update(cite=[]), "cite names no Lustre function"),
    (lambda d: d["releases"][0].update(release="2.12"), "not a version"),
    (lambda d: d.pop("unchanged"), "unchanged (what was checked and found the same) is missing"),
    (lambda d: d.update(extra=1), "unknown top-level keys ['extra']"),
])
def test_validation_names_each_problem(breakage, message):
    data = raw()
    breakage(data)
    problems = rd.validate(data, requirement_ids())
    assert any(message in p for p in problems), problems


def test_releases_doc_is_generated_from_the_file():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_releases_doc.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_releases_doc_names_every_difference_release_and_profile():
    doc = DOC.read_text()
    for d in rd.differences():
        assert f"### `{d.id}` — {d.lu}" in doc
    for r in RELEASES:
        assert f"### {r} (`v{r.replace('.', '_')}`)" in doc
    assert "lustre-<release>[-literal][-reconstruct]" in doc and "`lustre-2.17.57`" in doc


def test_requirements_say_where_their_rule_depends_on_the_release():
    """A difference that changes how a case of the suite is decoded or answered touches a
    requirement whose statement names the release it depends on."""
    statements = {r["id"]: r["statement"] for r in
                  yaml.safe_load((ROOT / "ptlrpc_conformance" / "spec" / "requirements.yaml").read_text())["requirements"]}
    for d in rd.differences():
        if d.kind == "format" or not d.cases:
            continue
        assert any(re.search(r"\b2\.1[0-9](\.[0-9]+)?\b", statements[r]) for r in d.requirements), (
            f"{d.id}: none of {', '.join(d.requirements)} says which releases its rule holds for")


@pytest.mark.parametrize("did, lu, to", [
    ("obd-quotactl-pool-name", "LU-11023", "2.15.8"), ("ost-fallocate-opcode", "LU-3606", "2.15.8"),
    ("ost-seek-opcode", "LU-10810", "2.15.8"), ("close-data-handle-swabbed", "LU-13048", "2.16.1")])
def test_differences_read_again_from_the_tags_are_there(did, lu, to):
    """Found by reading each tag again (issue 34): qc_poolname, OST_FALLOCATE and OST_SEEK
    are not in 2.12.9; lustre_swab_close_data swaps cd_handle from 2.16."""
    d = {x.id: x for x in rd.differences()}[did]
    assert (d.lu, d.to_release) == (lu, to)


def test_the_opcode_differences_match_the_release_facts():
    from ptlrpc_conformance.spec import releases
    for name in ("OST_SEEK", "OST_FALLOCATE"):
        assert name not in releases.load("2.12.9")["constants"] and name in releases.load("2.15.8")["constants"]
        assert name[len("OST_"):] not in {k[len("OST_"):] for k in releases.load("2.12.9")["message_formats"]}

# ---- which side of a difference an implementation follows (harness/outputs/matrix.py) ----

def _matrix_reports(verdicts: dict[str, dict[str, tuple[str, list[str]]]]) -> dict[str, dict]:
    """Composed reports as the matrix reads them: release -> {case id: (verdict, the
    requirements the report charges it with: exercised by a pass, failed by a failure)}."""
    reports = {}
    for release, cases in verdicts.items():
        reqs: dict[str, dict] = {}
        rows = []
        for cid, (verdict, charged) in cases.items():
            rows.append({"id": cid, "verdict": verdict, "requirements": ["STRUCT-LAYOUT-1", "VALID-MDT-1"],
                         "failed_requirements": charged if verdict == "fail" else []})
            for r in charged:
                reqs.setdefault(r, {"passing": [], "failing": []})["passing" if verdict == "pass" else "failing"].append(cid)
        reports[f"lustre-{release}"] = {"cases": rows, "requirements": reqs}
    return reports


def _follows(reports) -> dict[str, str]:
    from ptlrpc_conformance.harness.outputs import matrix
    return {d["id"]: d["follows"] for d in matrix.follows(reports)}


def test_a_pass_that_exercised_none_of_a_differences_requirements_follows_no_side():
    # a decoder without `structs`: the getattr reply decodes, its valid view is never judged
    passed = {"structs.message.mds-getattr-reply.decode": ("pass", [])}
    assert _follows(_matrix_reports({"2.12.9": passed, "2.15.8": passed}))["obd-md-flbtime"] == "not exercised"
    exercised = {"structs.message.mds-getattr-reply.decode": ("pass", ["VALID-MDT-1"])}
    assert _follows(_matrix_reports({"2.12.9": exercised, "2.15.8": exercised}))["obd-md-flbtime"] == "both"


INODEBITS = "structs.generated.ldlm-inodebits.decode"
LOCK_DESC = "structs.generated.ldlm-lock-desc.decode"


def test_a_failure_another_difference_explains_is_not_counted_against_this_one():
    # a 2.16 decoder: li_gid at 16 (2.15.8's side of li-gid) and 32-byte inodebits (2.16.1's
    # side of the initiator): its failure under 2.15.8 is the initiator difference's
    fail, ok = ("fail", ["STRUCT-LAYOUT-1"]), ("pass", ["STRUCT-LAYOUT-1"])
    reports = _matrix_reports({"2.12.9": {INODEBITS: fail, LOCK_DESC: fail},
                               "2.15.8": {INODEBITS: fail, LOCK_DESC: ok},
                               "2.16.1": {INODEBITS: ok, LOCK_DESC: ok}})
    seen = _follows(reports)
    assert seen["ldlm-inodebits-li-gid"] == "2.15.8 and later", seen
    assert seen["ldlm-inodebits-initiator"] == "2.16.1 and later", seen
    # a 2.12.9 decoder fails under 2.16.1 too: nothing explains its failure under 2.15.8
    reports = _matrix_reports({"2.12.9": {INODEBITS: ok, LOCK_DESC: ok},
                               "2.15.8": {INODEBITS: fail, LOCK_DESC: ok},
                               "2.16.1": {INODEBITS: fail, LOCK_DESC: ok}})
    assert _follows(reports)["ldlm-inodebits-li-gid"] == "2.12.9 and earlier"


def test_a_failure_of_a_later_difference_does_not_make_an_earlier_one_neither():
    # a 2.17 OST: its punch sets ids (2.17.0's side of punch-sets-ids), so the punch case
    # fails under 2.15.8 and 2.16.1; its creates follow 2.16.1's side of create-trusts
    punch, life = "target.obj.punch.exchange", "target.obj.lifecycle.exchange"
    fail, ok = ("fail", ["TGT-OBJ-1"]), ("pass", ["TGT-OBJ-1"])
    reports = _matrix_reports({"2.12.9": {punch: fail, life: fail}, "2.15.8": {punch: fail, life: fail},
                               "2.16.1": {punch: fail, life: ok}, "2.17.0": {punch: ok, life: ok}})
    seen = _follows(reports)
    assert seen["create-trusts-ost-last-id"] == "2.16.1 and later", seen
    assert seen["punch-sets-ids"] == "2.17.0 and later", seen
