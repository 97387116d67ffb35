"""The regression gate (--known-failures): every outcome, and the rewrite."""
import datetime as dt

import pytest
import yaml

from ptlrpc_conformance.harness.outputs import gate

FAILING_IUT = ("--iut", "python:iuts:no_header_pad", "-k", "framing.magic.v2-native or framing.bufcount.zero")


def write(path, entries):
    path.write_text(yaml.safe_dump({"format": gate.FORMAT, "entries": entries}, sort_keys=False))
    return str(path)


@pytest.fixture(scope="module")
def failures(tmp_path_factory):
    """The failing cases (and their signatures) of the broken IUT on the selection."""
    import json
    import os
    import subprocess
    import sys
    from conftest import TESTS
    out = tmp_path_factory.mktemp("baseline")
    env = dict(os.environ, PYTHONPATH=str(TESTS))
    subprocess.run([sys.executable, "-m", "ptlrpc_conformance.cli", *FAILING_IUT, "--examples", "10",
                    "--out", str(out)], capture_output=True, env=env)
    report = json.loads((out / "report.json").read_text())
    return {c["id"]: c["notes"]["signature"] for c in report["cases"] if c["verdict"] == "fail"}


def test_all_failures_known_passes_the_gate(run_cli, tmp_path, failures):
    kf = write(tmp_path / "kf.yaml", [{"id": c, "reason": "known", "signature": s} for c, s in failures.items()])
    run = run_cli(*FAILING_IUT, "--known-failures", kf)
    assert run.rc == 0, run.stdout[-3000:]
    assert "regression gate: passed" in run.stdout
    assert run.report["gate"]["ok"] and sorted(run.report["gate"]["known_failures"]) == sorted(failures)


def test_new_failure_fails_and_prints_the_lines_to_add(run_cli, tmp_path, failures):
    first, *rest = sorted(failures)
    kf = write(tmp_path / "kf.yaml", [{"id": c, "reason": "known"} for c in rest])
    run = run_cli(*FAILING_IUT, "--known-failures", kf)
    assert run.rc == 1
    assert f"  - id: {first}\n    reason: <why this failure is accepted>\n    signature: {failures[first]}" in run.stdout
    assert run.report["gate"]["new"] == [first]


def test_stale_entry_fails_and_prints_the_line_to_remove(run_cli, tmp_path, failures):
    entries = [{"id": c, "reason": "known"} for c in failures] + [{"id": "framing.magic.v1.decode", "reason": "old"}]
    run = run_cli(*FAILING_IUT, "-k", "framing.magic", "--known-failures", write(tmp_path / "kf.yaml", entries))
    assert run.rc == 1
    assert "entry framing.magic.v1.decode is stale" in run.stdout and "remove the entry `- id: framing.magic.v1.decode`" in run.stdout


def test_entry_matching_nothing_fails(run_cli, tmp_path, failures):
    entries = [{"id": c, "reason": "known"} for c in failures] + [{"id": "framing.no.such.case", "reason": "typo"}]
    kf = write(tmp_path / "kf.yaml", entries)
    run = run_cli(*FAILING_IUT, "--known-failures", kf)
    assert run.rc == 1 and "entry framing.no.such.case matches no case of this run" in run.stdout
    # the line names the file as well as the line
    line = next(x for x in run.stdout.splitlines() if "framing.no.such.case matches no case" in x)
    where = line.strip().split(": entry ")[0]
    assert where.startswith(f"{kf}:") and where[len(kf) + 1:].isdigit(), line


def test_changed_signature_fails(run_cli, tmp_path, failures):
    entries = [{"id": c, "reason": "known", "signature": "accepted"} for c in failures]
    run = run_cli(*FAILING_IUT, "--known-failures", write(tmp_path / "kf.yaml", entries))
    assert run.rc == 1 and "fails differently" in run.stdout and "replace the line `signature: accepted`" in run.stdout


def test_expired_entry_fails(run_cli, tmp_path, failures):
    yesterday = (dt.date.today() - dt.timedelta(days=1)).isoformat()
    entries = [{"id": c, "reason": "known", "expires": yesterday} for c in failures]
    run = run_cli(*FAILING_IUT, "--known-failures", write(tmp_path / "kf.yaml", entries))
    assert run.rc == 1 and f"expired on {yesterday}" in run.stdout


def test_wildcard_and_requirement_entries(run_cli, tmp_path, failures):
    entries = [{"id": "framing.*.*.decode", "reason": "policy"}, {"id": "framing.*.*.*.decode", "reason": "policy"},
               {"id": "ENC-LENGTH-1", "reason": "our encoder does not pad the header"}]
    run = run_cli(*FAILING_IUT, "--known-failures", write(tmp_path / "kf.yaml", entries))
    assert run.rc == 0, run.stdout[-3000:]


def test_broken_file_is_a_usage_error_naming_the_line(run_cli, tmp_path):
    kf = tmp_path / "kf.yaml"
    kf.write_text(f"format: {gate.FORMAT}\nentries:\n- id: NOT AN ID\n  reason: x\n")
    run = run_cli(*FAILING_IUT, "--known-failures", str(kf))
    assert run.rc == 2 and "kf.yaml:3: id 'NOT AN ID'" in run.stderr and "Traceback" not in run.stderr
    assert not (run.out / "report.json").exists()          # refused before the first case


def test_update_tightens_and_loosens(run_cli, tmp_path, failures):
    first, *rest = sorted(failures)
    passing = "framing.bufcount.zero.decode"                   # in the selection, and it passes
    assert passing not in failures
    entries = [{"id": c, "reason": "known"} for c in rest] + [{"id": passing, "reason": "old"},
                                                             {"id": "framing.magic.v1.decode", "reason": "elsewhere"}]
    kf = write(tmp_path / "kf.yaml", entries)
    run_cli(*FAILING_IUT, "--known-failures", kf, "--update-known-failures")
    tightened = {e["id"]: e for e in yaml.safe_load(open(kf))["entries"]}
    assert passing not in tightened                            # stale entry removed
    assert "framing.magic.v1.decode" in tightened              # outside the selection: kept as it was
    assert first not in tightened                              # a new failure is not added by tightening
    assert all(tightened[c]["signature"] == failures[c] for c in rest)   # signatures recorded
    run_cli(*FAILING_IUT, "--known-failures", kf, "--update-known-failures", "loosen")
    loosened = {e["id"] for e in yaml.safe_load(open(kf))["entries"]}
    assert first in loosened
    again = run_cli(*FAILING_IUT, "--known-failures", kf)
    assert again.rc == 0, again.stdout[-2000:]


def test_matching_is_per_segment():
    assert gate.matches("framing.*.zero.decode", "framing.bufcount.zero.decode", [])
    assert not gate.matches("framing.*.decode", "framing.bufcount.zero.decode", [])
    assert gate.matches("HDR-MAGIC-1", "framing.magic.v2-native.decode", ["HDR-MAGIC-1"])


# ---- renamed case ids (spec/case_aliases.yaml) ---------------------------------------------

def test_an_old_case_id_covers_the_cases_that_replaced_it():
    from ptlrpc_conformance.harness.data.registry import case_aliases
    parts = case_aliases()["target.stateful.exchange"]
    assert len(parts) >= 2 and all(p.startswith("target.stateful.exchange.") for p in parts)
    for p in parts:
        assert gate.matches("target.stateful.exchange", p, [])
        assert gate.matches("target.stateful.*", p, [])          # a pattern matching the old id
        assert gate.matches(p, p, [])                            # the new id itself
        assert not gate.matches("recovery.stateful.restart", p, [])
    assert not gate.matches("target.stateful.exchange", "target.stateful.other.1", [])
    assert not gate.matches(parts[0], parts[1], [])


def test_gate_outcomes_of_an_entry_naming_an_old_case_id():
    from ptlrpc_conformance.harness.data.registry import case_aliases
    parts = case_aliases()["recovery.stateful.restart"]
    entry = gate.Entry("recovery.stateful.restart", "known", "RCV-STATE-1", line=3)

    def cases(*failing):
        return [{"id": p, "verdict": "fail" if p in failing else "pass", "requirements": ["RCV-STATE-1"],
                 "notes": {"signature": "RCV-STATE-1"} if p in failing else {}} for p in parts]
    r = gate.evaluate([entry], cases(parts[0], parts[-1]))
    assert r.ok and sorted(r.known) == sorted([parts[0], parts[-1]]) and not r.new, r.problems
    r = gate.evaluate([entry], cases())                        # every part passes: stale
    assert not r.ok and r.stale == [entry] and "entry recovery.stateful.restart is stale" in r.problems[0]
    r = gate.evaluate([entry], [{"id": "framing.x.decode", "verdict": "pass", "requirements": []}])
    assert not r.ok and r.unmatched == [entry]                 # no part in the run: matches nothing


def test_known_failures_naming_the_old_stateful_id_pass_the_gate(run_cli, tmp_path, monkeypatch):
    """End to end: a broken target fails stateful parts; an entry naming the old id covers them."""
    monkeypatch.setenv("PYTEST_ADDOPTS", "-p ptlrpc_conformance.harness.tools.noshrink")   # faster failures
    kf = write(tmp_path / "kf.yaml", [{"id": "target.stateful.exchange", "reason": "setattr ignores o_valid"}])
    run = run_cli("--iut", "python:iuts:target_setattr_ignores_valid", "--case", "target.stateful.exchange",
                  "--known-failures", kf)
    assert run.rc == 0, run.stdout[-3000:]
    failing = sorted(c["id"] for c in run.report["cases"] if c["verdict"] == "fail")
    assert failing and sorted(run.report["gate"]["known_failures"]) == failing
    assert all(c.startswith("target.stateful.exchange.") for c in failing)


# ---- the update flow: --update-known-failures creates, prints what it wrote, and the run that
# ---- wrote a file it now satisfies exits 0 (docs/known-failures.md, one test per mode) -------

def test_loosen_creates_a_missing_file_and_the_run_that_wrote_it_passes(run_cli, tmp_path, failures):
    kf = tmp_path / "new" / "kf.yaml"                       # neither the file nor its folder exists
    run = run_cli(*FAILING_IUT, "--known-failures", str(kf), "--update-known-failures", "loosen")
    assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
    written = {e["id"]: e.get("signature") for e in yaml.safe_load(kf.read_text())["entries"]}
    assert written == failures
    tail = run.stdout[run.stdout.index("== ptlrpc-conformance verdict =="):]
    assert f"known-failures file {kf} written (loosen):" in tail and f"created {kf}" in tail
    assert all(f"added `- id: {c}` (signature {s})" in tail for c, s in failures.items())
    assert "regression gate: passed" in tail and tail.rstrip().endswith("exit status: 0")
    update = run.report["gate"]["update"]
    assert update["written"] and update["mode"] == "loosen" and run.report["gate"]["ok"]
    assert run.report["exit_status"] == 0
    again = run_cli(*FAILING_IUT, "--known-failures", str(kf))
    assert again.rc == 0 and "update" not in again.report["gate"]


def test_tighten_removing_stale_entries_leaves_a_file_the_run_satisfies(run_cli, tmp_path):
    """The reference fails nothing: tightening drops the stale entry, writes `entries: []` and
    the run passes (it used to exit 1)."""
    kf = write(tmp_path / "kf.yaml", [{"id": "framing.magic.v1.decode", "reason": "fixed since"}])
    run = run_cli("--iut", "reference", "-k", "framing.magic", "--known-failures", kf, "--update-known-failures")
    assert run.rc == 0, run.stdout[-3000:]
    assert yaml.safe_load(open(kf))["entries"] == []
    assert "removed `- id: framing.magic.v1.decode` (its cases now pass)" in run.stdout
    assert "regression gate: passed (0 known failure(s), no new ones)" in run.stdout
    assert run.report["gate"]["ok"] and run.report["gate"]["update"]["mode"] == "tighten"


def test_tighten_never_adds_new_failures(run_cli, tmp_path, failures):
    kf = tmp_path / "kf.yaml"                               # missing: created, empty
    run = run_cli(*FAILING_IUT, "--known-failures", str(kf), "--update-known-failures", "tighten")
    assert run.rc == 1
    assert yaml.safe_load(kf.read_text())["entries"] == []
    assert f"did not add the {len(failures)} new failure(s): tighten never adds" in run.stdout
    first = sorted(failures)[0]
    assert f"  - id: {first}\n    reason: <why this failure is accepted>" in run.stdout   # the lines to add
    assert run.report["gate"]["new"] == sorted(failures) and not run.report["gate"]["ok"]


def test_loosen_takes_a_changed_signature_and_tighten_does_not(run_cli, tmp_path, failures):
    kf = write(tmp_path / "kf.yaml", [{"id": c, "reason": "known", "signature": "accepted"} for c in failures])
    tight = run_cli(*FAILING_IUT, "--known-failures", kf, "--update-known-failures")
    assert tight.rc == 1 and "fails differently" in tight.stdout
    assert {e["signature"] for e in yaml.safe_load(open(kf))["entries"]} == {"accepted"}
    loose = run_cli(*FAILING_IUT, "--known-failures", kf, "--update-known-failures", "loosen")
    assert loose.rc == 0, loose.stdout[-3000:]
    assert {e["id"]: e["signature"] for e in yaml.safe_load(open(kf))["entries"]} == failures
    first = sorted(failures)[0]
    assert f"changed the signature of {first} from accepted to {failures[first]}" in loose.stdout


def test_an_incomplete_run_never_rewrites_the_file(run_cli, tmp_path, failures):
    kf = write(tmp_path / "kf.yaml", [{"id": "framing.magic.v1.decode", "reason": "old"}])
    before = open(kf).read()
    run = run_cli(*FAILING_IUT, "--max-fail", "1", "--known-failures", kf, "--update-known-failures", "loosen")
    assert run.rc == 1 and run.report["incomplete"]
    assert open(kf).read() == before
    assert f"known-failures file {kf} not rewritten (loosen):" in run.stdout and "the run is incomplete" in run.stdout
    assert run.report["gate"]["update"]["written"] is False and not run.report["gate"]["ok"]


@pytest.mark.parametrize("args, text", [
    (["--update-known-failures"], "--update-known-failures needs --known-failures FILE"),
    (["--known-failures", "missing.yaml"], "--known-failures missing.yaml: no such file (`--update-known-failures "
                                           "loosen` creates it"),
    (["--known-failures", "."], "--known-failures .: is a directory, not a known-failures file"),
])
def test_known_failures_options_are_checked_before_the_run(run_cli, args, text):
    run = run_cli(*args)
    assert run.rc == 2 and text in run.stderr and "Traceback" not in run.stderr
    assert not (run.out / "report.json").exists()


@pytest.mark.parametrize("value", ["0", "''", "{}", "false"])
def test_entries_that_are_not_a_list_are_named_not_a_traceback(tmp_path, value):
    """`entries: 0` and the like read as "no entry" once, and then a loosening update had
    nothing to add its entries to (AttributeError, found by a fuzzer): they are refused where
    they are.  `entries:` with nothing after it is an empty list."""
    kf = tmp_path / "kf.yaml"
    kf.write_text(f"format: {gate.FORMAT}\nentries: {value}\n")
    with pytest.raises(gate.GateError, match="'entries' must be a list"):
        gate.load(kf)
    kf.write_text(f"format: {gate.FORMAT}\nentries:\n")
    assert gate.load(kf) == []


def test_a_requirement_entry_covers_the_failures_charged_to_it():
    """`- id: REQ` accepts failures charged to REQ (failed_requirements), wherever the case
    lists it; a case that lists REQ but failed on another requirement is a new failure."""
    entry = gate.Entry("TGT-CONN-2", "known")
    charged_elsewhere = {"id": "target.conn.stale-count.exchange", "verdict": "fail",
                         "requirements": ["TGT-CONN-2"], "failed_requirements": ["TGT-ERR-2"]}
    r = gate.evaluate([entry], [charged_elsewhere])
    assert r.new == [("target.conn.stale-count.exchange", "")] and r.stale == [entry]
    charged_here = {"id": "target.stateful.exchange.1", "verdict": "fail", "requirements": ["TGT-DROP-1"],
                    "failed_requirements": ["TGT-CONN-2"]}
    r = gate.evaluate([entry], [charged_here])
    assert r.known == ["target.stateful.exchange.1"] and not r.new
    passing = {"id": "target.conn.stale-count.exchange", "verdict": "pass", "requirements": ["TGT-CONN-2"],
               "failed_requirements": []}
    r = gate.evaluate([entry], [passing])
    assert r.stale == [entry] and not r.new


KEPT = """\
# our gate: comments stay where they are
format: ptlrpc-conformance-known-failures/1
entries:
# outside the selection below: never touched by a run that does not run it
- id: structs.obdo.*.decode     # a pattern
  reason: "our structs are not done (issue #12)"
- id: framing.magic.v1.decode
  reason: fixed since
"""


def test_a_selection_judges_and_updates_only_what_it_ran(run_cli, tmp_path):
    kf = tmp_path / "kf.yaml"
    kf.write_text(KEPT)
    gated = run_cli("--iut", "reference", "-k", "framing.magic", "--known-failures", str(kf))
    assert gated.report["gate"]["not_run"] == ["structs.obdo.*.decode"]
    assert not any("structs.obdo" in p for p in gated.report["gate"]["problems"])
    assert "known-failures entries not run by this run (1: outside its selection" in gated.stdout
    updated = run_cli("--iut", "reference", "-k", "framing.magic", "--known-failures", str(kf),
                      "--update-known-failures")
    assert updated.rc == 0, updated.stdout[-2000:]
    text = kf.read_text()
    # the stale entry went; the entry the run did not run, and every comment, stayed as written
    assert "framing.magic.v1.decode" not in text
    assert text == KEPT.replace("- id: framing.magic.v1.decode\n  reason: fixed since\n", "")
    assert gate.load(kf)[0].reason == "our structs are not done (issue #12)"


def test_an_early_stop_reports_unreached_entries_as_not_run(run_cli, tmp_path, failures):
    kf = write(tmp_path / "kf.yaml", [{"id": "structs.obdo.getattr.decode", "reason": "later"}])
    run = run_cli("--iut", "python:iuts:no_header_pad", "--max-fail", "1", "--known-failures", kf)
    assert run.report["incomplete"] is True and run.rc == 1
    gate_said = run.report["gate"]
    assert "structs.obdo.getattr.decode" in gate_said["not_run"] and not gate_said["stale"] \
        and not gate_said["unmatched"]
    assert not any("remove the entry" in p for p in gate_said["problems"])


def test_the_documented_example_parses_as_it_reads():
    from conftest import ROOT
    text = (ROOT / "docs" / "known-failures.md").read_text()
    block = text.split("```yaml\n", 1)[1].split("```", 1)[0]
    path = ROOT / "docs" / "known-failures.md"
    example = yaml.safe_load(block)
    assert example["entries"][0]["reason"] == "we accept what Lustre 2.17 accepts (issue #12)", path
    assert [e["id"] for e in example["entries"]] == ["framing.buflen.wrap.decode", "framing.*.*.encode",
                                                     "STRUCT-OCD-1"]


def test_an_update_by_certify_keeps_the_entries_of_plugin_cases(run_cli, tmp_path, failures):
    """One known-failures file for a site's own plugin cases (area `vendor`, docs/plugin.md) and
    for the bundled suite: `certify`, which collects only the bundled suite, cannot judge the
    plugin's entries, so it keeps them (not run), while an entry of the suite's areas that
    matches no case is still removed."""
    own = {"id": "vendor.short-header.decode", "reason": "our decoder, tracked as BUG-1"}
    typo = {"id": "framing.no.such.case", "reason": "typo"}
    kf = write(tmp_path / "kf.yaml", [{"id": c, "reason": "known", "signature": s} for c, s in failures.items()]
               + [own, typo])
    run = run_cli(*FAILING_IUT, "--known-failures", kf, "--update-known-failures", "tighten")
    assert run.rc == 0, run.stdout[-3000:]
    kept = [e["id"] for e in yaml.safe_load(open(kf))["entries"]]
    assert own["id"] in kept and typo["id"] not in kept, kept
    assert run.report["gate"]["not_run"] == [own["id"]]
    assert "removed `- id: vendor.short-header.decode`" not in run.stdout


def test_an_entry_of_an_area_the_run_did_not_collect_is_not_run():
    entries = [gate.Entry("vendor.short-header.decode", "ours", line=3), gate.Entry("vendor.*.decode", "ours", line=5),
               gate.Entry("framing.no.such.case", "typo", line=7)]
    r = gate.evaluate(entries, [{"id": "framing.x.decode", "verdict": "pass", "requirements": []}],
                      deselected={"structs.y.decode": []})
    assert r.not_run == entries[:2] and r.unmatched == entries[2:]
