"""tools/recall.py and its corpus (tools/recall_corpus.yaml): the corpus is validated here
without a Lustre tree; the tool itself runs on a small part of the corpus where
$PTLRPC_LUSTRE_GIT names a lustre-release git directory."""
from __future__ import annotations

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import recall  # noqa: E402


def entry(**over):
    e = {"id": "LU-16376", "fix": "727638a1d0", "parent": "3a12414a16", "profile": "lustre-2.15.8",
         "requirements": ["BODY-JOBID-1"], "what": "An unterminated jobid.", "kind": "build"}
    e.update(over)
    return e


def test_the_corpus_is_valid():
    entries = recall.load_corpus(recall.CORPUS)
    assert recall.corpus_errors(entries, "tools/recall_corpus.yaml") == []
    assert {e["kind"] for e in entries} == {"build", "target"}
    # the two bugs the suite tells apart today, and the issue's named fixes, are in it
    fixes = {e["fix"] for e in entries}
    for fix in ("268edb13d7", "9eba5d5729", "2a78a9e2cd", "9d17996766", "5590f5aa94", "77f01308c5",
                "149f005a31", "bb83a8af59"):
        assert fix in fixes, fix


def test_corpus_entries_have_exactly_the_issue_fields_as_written():
    # the file's own text: every entry's keys are the seven fields, hashes quoted (an all-digit
    # hash read as a number would be lost)
    data = yaml.safe_load(recall.CORPUS.read_text())
    for e in data:
        assert list(e) == list(recall.FIELDS)
    for m in re.finditer(r"^  (fix|parent): (.*)$", recall.CORPUS.read_text(), re.M):
        assert m.group(2).startswith('"'), m.group(0)


@pytest.mark.parametrize("bad, message", [
    (entry(mutant="before_lu_16376"), "fields must be exactly id, fix, parent, profile, requirements, what, kind; "
                                      "unknown: mutant"),
    ({k: v for k, v in entry().items() if k != "what"}, "missing: what"),
    (entry(profile="lustre-2.13.0"), "profile: unknown profile 'lustre-2.13.0'"),
    (entry(requirements=["BODY-JOBID-9"]), "requirements: unknown requirement 'BODY-JOBID-9'"),
    (entry(requirements=[]), "requirements: a non-empty list"),
    (entry(requirements=["TGT-RESEND-2"], kind="target"), "TGT-RESEND-2 does not belong to profile lustre-2.15.8"),
    (entry(fix=4800730025), "fix: 4800730025 is not a commit hash"),
    (entry(parent="HEAD~1"), "parent: 'HEAD~1' is not a commit hash"),
    (entry(kind="server"), "kind: 'server' is not one of build, target"),
    (entry(id="12590"), "id: '12590' is not a Lustre ticket"),
    (entry(what=" "), "what: one sentence"),
])
def test_a_bad_corpus_entry_is_named_with_its_field(bad, message):
    errors = recall.corpus_errors([entry(id="LU-1", fix="1111111"), bad], "c.yaml")
    assert len(errors) == 1, errors
    assert errors[0].startswith("c.yaml: entry 1"), errors
    assert message in errors[0], errors


def test_a_corpus_listing_an_entry_twice_is_refused():
    assert recall.corpus_errors([entry(), entry()], "c.yaml") == [
        "c.yaml: entry 1 (LU-16376): the entry LU-16376 727638a1d0 is listed twice"]


def test_the_tool_refuses_a_bad_corpus_with_exit_2(tmp_path, capsys):
    git = tmp_path / "lustre.git"
    subprocess.run(["git", "init", "-q", "--bare", str(git)], check=True)
    bad = tmp_path / "c.yaml"
    bad.write_text(yaml.safe_dump([entry(mutant="x")]))
    assert recall.main(["--lustre-git", str(git), "--out", str(tmp_path / "o"), "--corpus", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"recall: {bad}: entry 0 (LU-16376): fields must be exactly" in err and "Traceback" not in err
    assert recall.main(["--lustre-git", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")]) == 2
    assert "not a git directory" in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_every_documented_reason_names_a_corpus_entry():
    ids = {e["id"] for e in recall.load_corpus(recall.CORPUS)}
    reasons = recall.load_reasons(recall.REASONS)
    assert reasons and set(reasons) <= ids, set(reasons) - ids


def test_the_trees_folders_hold_every_path_extract_py_names():
    folders = recall.build_folders()
    text = (ROOT / recall.LUSTRE_DIR / "extract.py").read_text()
    named = set(re.findall(r'"((?:lustre|lnet|include)/[\w./-]+)"', text))
    assert named
    for path in named:
        assert any(path == f or path.startswith(f + "/") for f in folders), (path, folders)
    assert "lustre/ptlrpc" in folders and "lustre/include" in folders


def report(*cases):
    return {"cases": [{"id": cid, "verdict": verdict, "failed_requirements": reqs} for cid, verdict, reqs in cases]}


def test_the_parents_extra_failures_are_what_is_charged():
    parent = report(("a", "fail", ["HDR-BUFCOUNT-1"]), ("b", "fail", ["HDR-BUFLEN-2"]),
                    ("c", "error", ["DEC-ROBUST-1", "HDR-TOTAL-1"]), ("d", "pass", []))
    fix = report(("a", "pass", []), ("b", "fail", ["HDR-BUFLEN-2"]), ("c", "fail", ["DEC-ROBUST-1"]),
                 ("d", "fail", ["HDR-MAGIC-1"]))
    cases, charged = recall.compare(parent, fix)
    # b fails on both (not a difference); d fails only on the fix (not the parent's failure)
    assert cases == {"a": ["HDR-BUFCOUNT-1"], "c": ["HDR-TOTAL-1"]}
    assert charged == ["HDR-BUFCOUNT-1", "HDR-TOTAL-1"]
    assert recall.compare(fix, fix) == ({}, [])


def test_a_case_not_applicable_to_the_parent_tells_nothing_apart():
    # LU-11997: the parent had no routine for the structure (not applicable), the fix passed
    parent = report(("a", "not-applicable", []))
    fix = report(("a", "pass", []))
    assert recall.compare(parent, fix) == ({}, [])


def test_a_failure_that_names_no_requirement_charges_the_ones_its_case_tests():
    parent = {"cases": [{"id": "a", "verdict": "error", "failed_requirements": [], "requirements": ["STRUCT-SWAB-1"]}]}
    assert recall.compare(parent, report(("a", "pass", []))) == ({"a": ["STRUCT-SWAB-1"]}, ["STRUCT-SWAB-1"])


def _row(**over):
    r = {"id": "LU-11753", "fix": "77f01308c5", "told_apart": False, "charged": [], "caught": False}
    r.update(over)
    return r


def test_a_reason_that_contradicts_the_runs_own_finding_is_refused(tmp_path):
    reason = {"told_apart": False, "charged": [], "not_compiled": ["lu_dirent_calc_size"], "reason": "r"}
    assert recall.reason_errors(_row(), reason, "r.yaml") == []
    assert recall.reason_errors(_row(), None, "r.yaml") == []
    # a reason for an entry the run caught
    (e,) = recall.reason_errors(_row(told_apart=True, charged=["X"], caught=True), reason, "r.yaml")
    assert e == "r.yaml: LU-11753 (fix 77f01308c5): documents a reason for an entry the suite caught: remove it"
    # told apart now, but not charged as expected: the reason explains another finding
    (e,) = recall.reason_errors(_row(told_apart=True, charged=["STRUCT-SWAB-1"]), reason, "r.yaml")
    assert "explains told_apart=False, charged nothing; the run found told_apart=True, charged ['STRUCT-SWAB-1']" in e
    # a function the reason says is not compiled, which the build compiles
    build = tmp_path / "b"
    build.mkdir()
    (build / "lustre_extract.c").write_text("static inline int\nlu_dirent_calc_size(int namelen,\n\tint attr)\n{\n"
                                            "\treturn 0;\n}\n")
    (e,) = recall.reason_errors(_row(builds={"parent": str(build)}), reason, "r.yaml")
    assert e.endswith("not_compiled: the testee built from the parent compiles lu_dirent_calc_size")
    # a call or a prototype is not a definition
    (build / "lustre_extract.c").write_text("int lu_dirent_calc_size(int n);\nint f(void)\n{\n"
                                            "\tif (lu_dirent_calc_size(1)) {\n\t\treturn 1;\n\t}\n}\n")
    assert recall.reason_errors(_row(builds={"parent": str(build)}), reason, "r.yaml") == []


@pytest.mark.parametrize("text, message", [
    ("LU-1: just a sentence\n", "expected the fields told_apart, charged, reason"),
    ("LU-1: {told_apart: maybe, charged: [], reason: r}\n", "told_apart: true or false"),
    ("LU-1: {told_apart: false, charged: [], reason: r, why: x}\n", "expected the fields"),
    ("'12590': {told_apart: false, charged: [], reason: r}\n", "not a Lustre ticket"),
])
def test_a_bad_reason_is_named(tmp_path, text, message):
    path = tmp_path / "r.yaml"
    path.write_text(text)
    with pytest.raises(recall.CorpusError, match=message):
        recall.load_reasons(path)


def test_the_documented_reasons_explain_what_the_published_document_found():
    """Without a Lustre tree: each reason's finding is the one recall.md shows for every missed
    row of its id, and no reason stands for an id whose rows were all caught."""
    text = recall.DOC.read_text(encoding="utf-8")
    rows = [line.split(" | ") for line in text.splitlines() if re.match(r"^\| LU-\d+ \| `", line)]
    for rid, r in recall.load_reasons(recall.REASONS).items():
        mine = [row for row in rows if row[0].lstrip("| ") == rid]
        missed = [row for row in mine if row[9] != "yes"]
        assert missed, f"{rid}: a reason for an entry recall.md shows caught"
        for row in missed:
            charged = [] if row[7] == "none" else row[7].split(", ")
            assert (row[8] == "yes", charged) == (r["told_apart"], sorted(r["charged"])), (rid, row)
            assert " ".join(r["reason"].split()) in row[10], (rid, row[10])


def test_a_partial_run_keeps_the_other_entries_results(tmp_path, capsys):
    git = tmp_path / "g"
    subprocess.run(["git", "init", "-q", str(git)], check=True)
    for n in range(3):
        subprocess.run(["git", "-C", str(git), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                        "--allow-empty", "-m", str(n)], check=True)
    log = subprocess.run(["git", "-C", str(git), "log", "--format=%H"], capture_output=True, text=True).stdout.split()
    c2, c1, c0 = log
    entries = [entry(id="LU-1", fix=c1[:10], parent=c0[:10], kind="target", requirements=["TGT-CONN-1"]),
               entry(id="LU-2", fix=c2[:10], parent=c1[:10], kind="target", requirements=["TGT-CONN-1"])]
    corpus = tmp_path / "c.yaml"
    corpus.write_text(yaml.safe_dump(entries, sort_keys=False))
    args = ["--lustre-git", str(git / ".git"), "--corpus", str(corpus), "--reasons", str(tmp_path / "none.yaml")]
    assert recall.main(args + ["--out", str(tmp_path / "all"), "--doc", str(tmp_path / "all.md")]) == 0
    prev = tmp_path / "all" / "summary.json"
    doc = tmp_path / "one.md"
    assert recall.main(args + ["--out", str(tmp_path / "one"), "--doc", str(doc), "--id", "LU-1",
                               "--merge", str(prev)]) == 0
    summary = json.loads((tmp_path / "one" / "summary.json").read_text())
    assert [(r["id"], r["fix"]) for r in summary["entries"]] == [("LU-1", c1[:10]), ("LU-2", c2[:10])]
    assert summary["recall"]["all"] == {"caught": 0, "total": 2} and "**Recall: 0 / 2**" in doc.read_text()
    assert "LU-2 " + c2[:10] + ": kept from" in capsys.readouterr().err
    # a kept result for an entry the corpus has changed since is not kept
    corpus.write_text(yaml.safe_dump([entries[0], dict(entries[1], requirements=["TGT-CONN-2"])], sort_keys=False))
    assert recall.main(args + ["--out", str(tmp_path / "two"), "--doc", str(doc), "--id", "LU-1",
                               "--merge", str(prev)]) == 2
    assert f"no result for LU-2 {c2[:10]} as the corpus gives it now: run it (--id LU-2)" in capsys.readouterr().err


def test_a_target_entry_without_its_mutant_is_a_miss_naming_the_mutant(tmp_path):
    row = recall.judge(entry(id="LU-1", kind="target", requirements=["TGT-CONN-1"]), "unused", tmp_path, [])
    assert row["told_apart"] is False and row["caught"] is False
    assert row["missing"] == ["TGT-CONN-1"]
    assert "no before_lu_1()" in row["reason"]
    assert row["iuts"]["parent"] == "python:independent_ost:before_lu_1"


def _scenarios_of(requirements):
    from ptlrpc_conformance.harness.ost import scenario as scen
    return [s for s in scen.load_all() if set(s.requirements) & set(requirements)]


# target entries that can have no mutant: a resend while its original is still in progress
# cannot be sent through the testee protocol (tools/recall_reasons.yaml says why)
WITHOUT_MUTANT = {"LU-15190"}


@pytest.mark.parametrize("e", [e for e in recall.load_corpus(recall.CORPUS) if e["kind"] == "target"],
                         ids=lambda e: f"{e['id']}-{e['fix']}")
def test_a_target_entrys_mutant_is_killed_by_its_requirements_scenarios(e):
    # what tools/recall.py certifies, in process: the independent OST (the code after the fix)
    # passes the scenarios of the entry's requirements, and its mutant before_<id> (the code
    # before it) fails one of them, on every requirement the corpus expects
    from adapters import started
    from ptlrpc_conformance.harness.ost import scenario as scen
    import independent_ost
    name = recall.mutant_name(e["id"])
    if e["id"] in WITHOUT_MUTANT:
        assert not recall.has_mutant(name) and e["id"] in recall.load_reasons(recall.REASONS)
        return
    assert recall.has_mutant(name), f"tests/independent_ost.py has no {name}()"
    scenarios = _scenarios_of(e["requirements"])
    assert scenarios, e
    charged = set()
    for s in scenarios:
        assert scen.run(s, started(independent_ost.testee()))[0] == [], s.id
        problems = scen.run(s, started(getattr(independent_ost, name)()))[0]
        charged |= {r for p in problems for r in e["requirements"] if f": {r}: " in p}
    assert charged == set(e["requirements"]), (e["id"], charged)


def test_the_document_gives_the_figure_by_kind():
    rows = [dict(id="LU-1", fix="a" * 10, parent="b" * 10, kind="build", profile="lustre-2.15.8", what="w",
                 expected=["X"], charged=["X"], told_apart=True, caught=True, reason=None, cases={"c": ["X"]}),
            dict(id="LU-2", fix="c" * 10, parent="d" * 10, kind="target", profile="lustre-2.15.8", what="w",
                 expected=["Y"], charged=[], told_apart=False, caught=False, reason="no mutant", cases={})]
    fig = recall.figure(rows)
    assert fig == {"all": {"caught": 1, "total": 2}, "build": {"caught": 1, "total": 1},
                   "target": {"caught": 0, "total": 1}}
    doc = recall.document(rows, fig, "tools/recall_corpus.yaml")
    assert "**Recall: 1 / 2** (build: 1 / 1, target: 0 / 1)" in doc
    assert "| LU-2 | `cccccccccc` | `dddddddddd` | target |" in doc and "no mutant |" in doc


GIT = os.environ.get("PTLRPC_LUSTRE_GIT")


@pytest.mark.skipif(not GIT, reason="set PTLRPC_LUSTRE_GIT to a lustre-release git directory to run the tool "
                                    "(the full corpus is the tool's job: python3 tools/recall.py)")
def test_the_tool_tells_a_fix_from_its_parent_in_a_lustre_git_directory(tmp_path):
    entries = recall.load_corpus(recall.CORPUS)
    assert recall.corpus_errors(entries, "tools/recall_corpus.yaml", GIT) == []
    # one entry: the b2_15 backport of the jobid fix (two builds, two small certifications)
    small = tmp_path / "corpus.yaml"
    small.write_text(yaml.safe_dump([e for e in entries if e["fix"] == "727638a1d0"], sort_keys=False))
    doc = tmp_path / "recall.md"
    assert recall.main(["--lustre-git", GIT, "--out", str(tmp_path / "out"), "--corpus", str(small),
                        "--doc", str(doc)]) == 0
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    (row,) = summary["entries"]
    assert row["told_apart"] and row["caught"], row
    assert row["charged"] == ["BODY-JOBID-1"] and row["missing"] == []
    assert summary["recall"]["all"] == {"caught": 1, "total": 1}
    assert "**Recall: 1 / 1**" in doc.read_text()


def test_the_published_recall_document_covers_the_corpus_and_adds_up():
    text = recall.DOC.read_text(encoding="utf-8")
    rows = [line.split(" | ") for line in text.splitlines() if re.match(r"^\| LU-\d+ \| `", line)]
    listed = {(r[0].lstrip("| "), r[1].strip("`")) for r in rows}
    corpus = {(e["id"], e["fix"][:10]) for e in recall.load_corpus(recall.CORPUS)}
    assert listed == corpus, "re-run python3 tools/recall.py --lustre-git DIR --out DIR after changing the corpus"
    caught = {kind: sum(1 for r in rows if r[3] == kind and r[9] == "yes") for kind in recall.KINDS}
    total = {kind: sum(1 for r in rows if r[3] == kind) for kind in recall.KINDS}
    assert (f"**Recall: {sum(caught.values())} / {len(rows)}** (build: {caught['build']} / {total['build']}, "
            f"target: {caught['target']} / {total['target']}).") in text
    # every miss says why
    for r in rows:
        assert r[9] == "yes" or r[10].strip(" |"), r


def test_a_selection_that_applies_to_nothing_is_a_reason_not_a_verdict():
    rep = {"iut": {"hello": {"capabilities": ["decode"]}},
           "cases": [{"id": "structs.x.decode", "verdict": "not-applicable", "failed_requirements": [],
                      "message": "the IUT did not declare capability 'structs'"}]}
    assert recall.not_applied(rep) == ("no case of the selection applies to the IUT (its hello declares decode; the "
                                       "cases say: the IUT did not declare capability 'structs'): not certified")
    rep["cases"].append({"id": "framing.y.decode", "verdict": "pass", "failed_requirements": []})
    assert recall.not_applied(rep) is None


def test_the_compiled_code_ignores_where_the_tree_keeps_it(tmp_path):
    def tree(name, line, uapi="struct a { int b; };\n", body="int f(void) { return 1; }"):
        src, into = tmp_path / name / "src", tmp_path / name / "build"
        (src / "lustre/include/uapi/linux/lustre").mkdir(parents=True)
        (src / "lustre/include/uapi/linux/lustre/lustre_idl.h").write_text(uapi)
        into.mkdir()
        (into / "lustre_extract.c").write_text(
            f"/*\n *   tree:    {src}\n *   version: {name}\n *   sha256 {name}  lustre/ptlrpc/pack_generic.c\n */\n"
            f'#line {line} "lustre/ptlrpc/pack_generic.c"\n{body}\n#define LUSTRE_EXTRACT_VERSION "{name}"\n')
        (into / "lustre_compat.h").write_text("#define LT_X 1\n")
        return recall.compiled_code(src, into)
    same = tree("parent", 100)
    assert tree("fix", 107) == same                                  # a function moved down the file
    assert tree("fix2", 100, body="int f(void) { return 2; }") != same
    assert tree("fix3", 100, uapi="struct a { long b; };\n") != same  # a uapi header main.c includes
