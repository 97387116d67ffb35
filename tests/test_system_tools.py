"""One policy for the system tools the project's tests run (tshark, chromium, cc, make): the
README's set-up (bash tools/setup-system.sh) installs them, so a missing one fails the test
that needs it, with the install hint — through conftest.require_tool or the `needs_tool`
marker — and no test skips for it."""
import re

from conftest import ROOT, TESTS

TOOLS = ("tshark", "chromium", "cc", "make")


def test_a_missing_tool_fails_with_the_install_hint(pytester):
    pytester.makeconftest((ROOT / "conftest.py").read_text())
    pytester.makepyfile(test_needs="""
        import pytest
        from conftest import require_tool

        def test_called():
            require_tool("no-such-tool-for-the-policy-test")

        @pytest.mark.needs_tool("sh", "no-such-tool-for-the-policy-test")
        def test_marked():
            pass

        @pytest.mark.needs_tool("sh")
        def test_present():
            assert require_tool("sh").endswith("/sh")
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-n", "0", "-rfE")
    result.assert_outcomes(passed=1, failed=1, errors=1)      # errors: the marker fails the set-up
    hint = ("no-such-tool-for-the-policy-test is not installed: this test runs it. "
            "`bash tools/setup-system.sh` installs it")
    assert result.stdout.str().count(hint) >= 2, result.stdout.str()
    result.stdout.no_fnmatch_line("*SKIP*")


def test_no_test_skips_for_a_missing_tool():
    """Every test that runs a system tool asks conftest.require_tool (or the marker) for it."""
    offenders = []
    for path in sorted(TESTS.glob("test_*.py")):
        text = path.read_text()
        for m in re.finditer(r"(pytest\.skip\(|skipif\(|importorskip\()", text):
            call = text[m.start():text.find(")", m.end()) + 1]
            if "not installed" in call or any(re.search(rf"\b{t}\b", call) for t in TOOLS):
                offenders.append(f"{path.name}: {call[:80]!r}")
        for t in TOOLS:
            if re.search(rf"shutil\.which\(\s*['\"]{t}['\"]\s*\)\s+is\s+None", text):
                offenders.append(f"{path.name}: its own check for {t}")
    assert offenders == []
