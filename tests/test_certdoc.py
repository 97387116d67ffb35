"""ptlrpc-conformance certification-doc: a Markdown certification document from report.json."""
import json

from ptlrpc_conformance.cli import main
from ptlrpc_conformance.harness.outputs import certdoc
from ptlrpc_conformance.harness.outputs.report import FORMAT


def _case(cid, verdict, reqs, message="", **notes):
    c = {"id": cid, "nodeid": f"x::{cid}", "requirements": reqs, "verdict": verdict, "message": message,
         "duration_s": 0.0}
    if notes:
        c["notes"] = notes
    return c


def _rejected(cid, vid, at):
    return _case(cid, "fail", ["PAD-TRAILING-1"],
                 f"{vid}: Bytes after the last buffer are ignored\nexpected: accepted\n"
                 f"actual:   rejected with EINVAL (R3: expert error: Capture:{at} offset:320)\ninput ...",
                 signature="rejected:EINVAL", reproducer={"id": vid})


def small_report():
    cases = [
        _case("framing.magic.v2-native.decode", "pass", ["HDR-MAGIC-1"]),
        _case("framing.magic.zero.decode", "pass", ["HDR-MAGIC-3"], errno="EINVAL",
              errno_class_mismatch="expected EPROTO, got EINVAL"),
        _case("framing.buflen.overrun.decode", "fail", ["HDR-TOTAL-1"],
              "framing.buflen.overrun: lm_buflens[0] = 192 announces 8 bytes more\nexpected: rejected with EINVAL\n"
              "actual:   accepted\n", signature="accepted", reproducer={"id": "framing.buflen.overrun"}),
        _case("framing.buflen.overrun.cut.decode", "fail", ["HDR-TOTAL-1"], "2 of 3 variants failed",
              signature="accepted", reproducer={"id": "framing.buflen.overrun.cut-9"}),
        _rejected("framing.trailing.bytes.pad.decode", "framing.trailing.bytes.pad", 334),
        _rejected("framing.trailing.bytes.decode", "framing.trailing.bytes", 330),
        _case("framing.body.reply.decode", "fail", ["BODY-TYPE-1"],
              "framing.body.reply: A reply\naccepted, but the result is not a well-formed MESSAGE:\n"
              "  body.pb_uid is missing\n  buffers is not a list of hex strings\ninput ...",
              signature="field:malformed-result", reproducer={"id": "framing.body.reply"}),
        _case("framing.body.err-reply.decode", "error", ["BODY-TYPE-1"],
              "framing.body.err-reply: x\nharness/protocol error (crash): tshark exited", signature="error:crash",
              outcome="crash"),
        _case("structs.obdo.le.decode", "not-applicable", ["STRUCT-LAYOUT-1"],
              "the IUT did not declare capability 'structs' (needed for op 'decode_struct')"),
        _case("structs.obdo.be.decode", "not-applicable", ["STRUCT-LAYOUT-1"],
              "the IUT did not declare capability 'structs' (needed for op 'decode_struct')"),
    ]
    reqs = {}
    for c in cases:
        for r in c["requirements"]:
            reqs.setdefault(r, {"level": "MUST", "cases": [], "verdict": None})["cases"].append(c["id"])
    for r, e in reqs.items():
        vs = {next(c for c in cases if c["id"] == i)["verdict"] for i in e["cases"]}
        e["verdict"] = ("error" if "error" in vs else "fail" if "fail" in vs else "pass" if "pass" in vs
                        else "not-applicable")
    summary = {"pass": 2, "fail": 5, "error": 1, "not-applicable": 2, "skipped": 0, "total": len(cases)}
    return {"format": FORMAT, "incomplete": False,
            "level": {"name": "not conformant", "failing_must": ["BODY-TYPE-1", "HDR-TOTAL-1", "PAD-TRAILING-1"],
                      "failing_should": [], "not_applicable": ["STRUCT-LAYOUT-1"]},
            "reproduce": ["ptlrpc-conformance", "certify", "--iut", "tshark", "--seed", "1"],
            "smoke": [{"check": "unknown op answered EOPNOTSUPP", "ok": True, "detail": ""}],
            "suite": {"name": "ptlrpc-conformance", "version": "0.1.0"}, "profile": "lustre-2.17.57",
            "seed": 1, "lustre_version": "2.17.57",
            "iut": {"spec": "tshark", "hello": {"name": "Wireshark", "version": "4.0.17", "capabilities": ["decode"],
                                                "protocol": 1, "errno_agnostic": True}},
            "environment": {"python": "3.11.7", "platform": "Linux"}, "started": "2026-01-01T00:00:00+00:00",
            "duration_s": 1.0, "summary": summary, "requirements": reqs, "cases": cases}


def test_document_from_a_small_report():
    doc = certdoc.render(small_report(), command="ptlrpc-conformance certification-doc r.json")
    assert doc.startswith("# Certification: Wireshark 4.0.17\n")
    assert "`ptlrpc-conformance certification-doc r.json`" in doc
    assert "Level: **not conformant**." in doc and "Failing MUST requirements (3)" in doc
    assert "| 2 | 5 | 1 | 2 | 0 | 10 |" in doc
    # an older report's single note counts once, under the case's requirements
    assert "Rejections that named another class than Lustre's: 1, in 1 case " in doc
    for rid, verdict in (("HDR-MAGIC-1", "pass"), ("HDR-TOTAL-1", "fail"), ("BODY-TYPE-1", "error"),
                         ("STRUCT-LAYOUT-1", "not-applicable")):
        assert f"| {rid} | MUST | **{verdict}** |" in doc
    # failing cases grouped by reason: the two accepted ones together, the two rejections
    # differing only in numbers together, the malformed result, the crash
    assert "6 cases in 4 groups" in doc
    assert "| 2 | accepted input that breaks HDR-TOTAL-1" in doc
    assert "rejected a valid message: rejected with EINVAL (R3: expert error: Capture:N offset:N)" in doc
    # a representative is the hand-written vector, not a derived variant
    assert "Representative `framing.buflen.overrun.decode`" in doc
    assert "Representative `framing.trailing.bytes.decode`" in doc
    assert "harness/protocol trouble (crash)" in doc
    assert "| 2 | the IUT did not declare capability 'structs'" in doc
    assert "Requirements none of whose cases applied: STRUCT-LAYOUT-1." in doc
    # the same report gives the same document
    assert doc == certdoc.render(small_report(), command="ptlrpc-conformance certification-doc r.json")


def test_every_errno_mismatch_is_counted_per_requirement():
    """Errno-agnostic runs: each rejection with another errno class - a derived variant's too -
    counts once, under the requirement it would have been charged to; the level is in words."""
    report = small_report()
    report["level"] = {"status": "not conformant", "certified_capabilities": ["decode"],
                       "failing_must": ["BODY-TYPE-1"], "failing_should": [], "not_applicable": []}
    case = next(c for c in report["cases"] if c["id"] == "framing.buflen.overrun.cut.decode")
    case["notes"]["errno_class_mismatches"] = [
        {"case": f"framing.buflen.overrun.cut-{k}", "expected": "EFAULT", "got": "EINVAL",
         "requirements": ["BODY-SIZE-1"]} for k in (40, 41, 42)]
    doc = certdoc.render(report)
    assert "Level: **not conformant: decode**." in doc
    assert "Rejections that named another class than Lustre's: 4, in 2 cases" in doc
    assert "Per requirement: BODY-SIZE-1 3, HDR-MAGIC-3 1." in doc


def test_certification_doc_command(tmp_path, capsys):
    report = tmp_path / "report.json"
    report.write_text(json.dumps(small_report()))
    notes = tmp_path / "notes.md"
    notes.write_text("Wireshark reads every field little-endian.\n")
    out = tmp_path / "docs" / "cert.md"
    assert main(["certification-doc", str(report), "--notes", str(notes), "--out", str(out)]) == 0
    doc = out.read_text()
    assert f"`ptlrpc-conformance certification-doc {report} --notes {notes} --out {out}`" in doc
    assert "## Certifier's notes\n\nWireshark reads every field little-endian." in doc
    assert main(["certification-doc", str(report)]) == 0
    assert capsys.readouterr().out.startswith("# Certification: Wireshark 4.0.17")


def test_bad_input_is_a_clear_usage_error(tmp_path, capsys):
    cases = {"missing.json": None, "text.json": "not json", "list.json": "[1, 2]",
             "other.json": json.dumps({"format": "something/1"}),
             "damaged.json": json.dumps({"format": FORMAT, "cases": [{"id": 1}], "summary": {}, "level": {},
                                         "requirements": {}})}
    expected = {"missing.json": "cannot read", "text.json": "not JSON", "list.json": "format is 'list'",
                "other.json": "format is 'something/1'", "damaged.json": "the report is damaged"}
    for name, text in cases.items():
        path = tmp_path / name
        if text is not None:
            path.write_text(text)
        assert main(["certification-doc", str(path)]) == 2
        err = capsys.readouterr().err
        assert expected[name] in err and name in err and "Traceback" not in err
    good = tmp_path / "r.json"
    good.write_text(json.dumps(small_report()))
    assert main(["certification-doc", str(good), "--notes", str(tmp_path / "no-notes.md")]) == 2
    assert "cannot read the notes" in capsys.readouterr().err


def _damaged(change):
    report = small_report()
    change(report)
    return report


def test_damaged_shapes_name_the_key_and_exit_2(tmp_path, capsys):
    """Values of the wrong type deep in the report: a usage error naming the key (and the
    case), never a traceback."""
    damages = {
        "notes": (lambda r: r["cases"][2].update(notes="oops"),
                  "'cases[2]' (framing.buflen.overrun.decode): 'notes' must be an object, not str"),
        "iut": (lambda r: r.update(iut="exec:foo"), "'iut' must be an object, not str"),
        "req-cases": (lambda r: r["requirements"]["HDR-MAGIC-1"].update(cases=[["a"]]),
                      "'requirements.HDR-MAGIC-1.cases' must be a list of case ids"),
        "message": (lambda r: r["cases"][0].update(message=["x"]),
                    "'cases[0]' (framing.magic.v2-native.decode): 'message' must be a string"),
        "signature": (lambda r: r["cases"][2]["notes"].update(signature=7), "'notes.signature' must be a string"),
        "hello": (lambda r: r["iut"]["hello"].update(capabilities=[1]), "'iut.hello.capabilities' must be a list"),
        "level": (lambda r: r["level"].update(failing_must="HDR-TOTAL-1"), "'level.failing_must' must be a list"),
        "suite": (lambda r: r.update(suite=None), "'suite' must be an object"),
        "smoke": (lambda r: r.update(smoke=["ok"]), "'smoke' must be a list of objects"),
    }
    for name, (change, text) in damages.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(_damaged(change)))
        assert main(["certification-doc", str(path)]) == 2, name
        err = capsys.readouterr().err
        assert f"{path}: the report is damaged" in err and text in err and "Traceback" not in err, (name, err)
