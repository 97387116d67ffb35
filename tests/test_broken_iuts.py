"""Implementations that break one rule each (mutants of the zoo) fail exactly the cases of that
rule, with a message that shows expected vs actual and the annotated bytes."""
import pytest

from ptlrpc_conformance import mutants

BROKEN = {
    # mutant: (cases that must fail, text the failure message must contain)
    "bufcount_zero_accepted": ({"framing.bufcount.zero.decode"},
                              ["expected: rejected with EINVAL", "actual:   rejected with EFAULT", "lm_bufcount = 0"]),
    "no_header_pad": ({"framing.magic.v2-native.decode", "framing.magic.v2-native.encode",
                       "framing.pad.header-absent.decode", "framing.bufcount.three-odd.encode"},
                      ["header pad", "differing bytes marked *"]),
    "swabbed_magic_unknown": ({"framing.magic.v2-swabbed.decode"},
                              ["expected: accepted", "actual:   rejected with EINVAL", "(byte-swapped peer)"]),
    "body_151_accepted": ({"framing.body.size-151.decode"},
                              ["expected: rejected with EFAULT", "actual:   accepted", "lm_buflens[0] = 151"]),
}


@pytest.mark.parametrize("factory", sorted(BROKEN))
def test_broken_implementation_fails_its_rule(run_cli, no_shrinking, factory):
    must_fail, texts = BROKEN[factory]
    run = run_cli("--iut", mutants.BY_ID[factory].iut, "-k", "framing", "-v")
    run.assert_caught(must_fail)
    messages = "\n".join(run.case(c)["message"] for c in must_fail)
    for text in texts:
        assert text in messages, f"{text!r} not in the failure messages:\n{messages[:3000]}"
    # the same dump is printed on the console (-v: every failure in full)
    assert texts[0] in run.stdout


def test_no_header_pad_fails_only_framing_that_depends_on_it(run_cli):
    """Vectors with an even bufcount do not depend on the header pad and still pass."""
    run = run_cli("--iut", mutants.BY_ID["no_header_pad"].iut, "-k", "framing.bufcount")
    verdicts = run.verdicts()
    assert verdicts["framing.bufcount.two-even.decode"] == "pass"
    assert verdicts["framing.bufcount.two-even.encode"] == "pass"


def test_missing_capability_is_not_applicable_and_never_fails(certified):
    run = certified("python:iuts:decode_only")
    assert run.rc == 0, run.stdout + run.stderr
    verdicts = run.verdicts()
    # decode only: every encode case and every structure case (capability structs) is not applicable,
    # decode only: also every target and recovery case (capabilities target, restart), and every
    # client case (a client under test is run by certify --client)
    needs_more = {c for c in verdicts if c.endswith(".encode") or ".encode-" in c or c.startswith("protocol.encode.")
                  or c.startswith("structs.") and not c.startswith("structs.message.")
                  or c.startswith(("target.", "recovery.", "client."))}
    not_applicable = {c for c, v in verdicts.items() if v == "not-applicable"}
    assert needs_more and not_applicable == needs_more
    assert run.report["summary"]["fail"] == 0
