"""docs/plugin.md's worked example is examples/plugin/test_vendor_cases.py, verbatim, and it
runs as the document says: from a vendor's directory, through the installed plugin, against
the reference and against broken implementations (tests/iuts.py)."""
import json
import os
import re
import shutil

import pytest

from conftest import ROOT, TESTS

EXAMPLE = ROOT / "examples" / "plugin" / "test_vendor_cases.py"
DOC = ROOT / "docs" / "plugin.md"


def _doc_example() -> str:
    text = DOC.read_text()
    m = re.search(r"<!-- example: examples/plugin/test_vendor_cases.py[^>]*-->\n```python\n(.*?)```\n<!-- end example -->",
                  text, re.S)
    assert m, "docs/plugin.md has no example block between the markers"
    return m.group(1)


def test_the_doc_shows_the_example_verbatim():
    assert _doc_example() == EXAMPLE.read_text()


def test_the_example_uses_the_documented_api():
    code = EXAMPLE.read_text()
    for used in ("@pytest.mark.conformance(case=", "requirements=[", "iut.call(", "need(iut,", "conclude(",
                 "Outcome", "errno_agnostic"):
        assert used in code, used
    doc = DOC.read_text()
    for fixture in ("iut", "need", "conclude", "errno_agnostic", "iut_hello", "conformance_profile",
                    "conformance_seed", "conformance_examples", "run_settings"):
        assert f"`{fixture}`" in doc, fixture


def _run(pytester, *args):
    shutil.copy(EXAMPLE, pytester.path / EXAMPLE.name)
    report = pytester.path / "report.json"
    if report.exists():
        report.unlink()
    result = pytester.runpytest_subprocess(EXAMPLE.name, "-p", "no:cacheprovider", "-n", "0", "-rfs",
                                           "--conformance-report", str(report), *args)
    cases = {c["id"]: c for c in json.loads(report.read_text())["cases"]}
    return result, cases


@pytest.fixture
def vendor_dir(pytester, monkeypatch):
    """A vendor's directory: the installed plugin, tests/iuts.py importable for python:iuts:NAME."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(TESTS)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    return pytester


def test_the_example_passes_against_the_reference(vendor_dir):
    for args in ((), ("--iut", "reference")):          # the default IUT is the reference
        result, cases = _run(vendor_dir, *args)
        result.assert_outcomes(passed=2)
        assert {k: (c["verdict"], c["requirements"]) for k, c in cases.items()} == {
            "vendor.short-header.decode": ("pass", ["HDR-LENGTH-1"]),
            "vendor.ping.round-trip": ("pass", ["ENC-CANON-1"])}


def test_the_example_judges_broken_implementations_as_the_doc_says(vendor_dir):
    result, cases = _run(vendor_dir, "--iut", "python:iuts:ebadmsg")
    result.assert_outcomes(passed=1, failed=1)
    short = cases["vendor.short-header.decode"]
    assert short["verdict"] == "fail"
    assert short["message"].splitlines()[0] in DOC.read_text()       # the message docs/plugin.md quotes
    assert cases["vendor.ping.round-trip"]["verdict"] == "pass"

    result, cases = _run(vendor_dir, "--iut", "python:iuts:ebadmsg", "--ignore-errno-class")
    result.assert_outcomes(passed=2)

    result, cases = _run(vendor_dir, "--iut", "python:iuts:decode_only")
    result.assert_outcomes(passed=1, skipped=1)
    assert cases["vendor.ping.round-trip"]["verdict"] == "not-applicable"
    result.stdout.fnmatch_lines(["*not applicable: the IUT did not declare capability 'encode'*"])

    result, cases = _run(vendor_dir, "--iut", "python:iuts:encoder_pad_ff")
    result.assert_outcomes(passed=1, failed=1)
    assert cases["vendor.ping.round-trip"]["verdict"] == "fail"
    message = cases["vendor.ping.round-trip"]["message"].splitlines()
    assert message[0].startswith("ENC-CANON-1 (MUST): ") and message[1].startswith("encode(decode(ping)) gave ")

    result, cases = _run(vendor_dir, "--iut", "python:iuts:raises")
    assert cases["vendor.short-header.decode"]["verdict"] == "error"
