"""The framing mutants of the zoo (ptlrpc_conformance/mutants/), one per rule family: each
must fail the cases of its rule, and the report must charge the failure to the mutant's own
requirement.  The lists are the cases that must be among the failures; a mutant may fail more
(a broken placement breaks many derived cases).  The runs are the zoo's (conftest.py's `zoo`:
`ptlrpc-conformance mutants`, each mutant certified over its areas with --strict), read from
its --json file: a family is not certified a second time here."""
import pytest

from conftest import assert_zoo_caught
from ptlrpc_conformance import mutants

MUST_FAIL = {
    "magic_unchecked": {"framing.magic.v1.decode", "framing.magic.zero.decode", "framing.magic.random.decode"},
    "bufcount_max_31": {"framing.bufcount.32.decode", "framing.bufcount.31.bufcount-pm1.decode"},
    "buflens_unrounded": {"framing.pad.nonzero.decode", "framing.bufcount.three-odd.cut-buffer1.decode"},
    "buflen_max_off_by_8": {"framing.buflen.total-max-plus-8.decode"},
    "buflen_unbounded_total_wraps": {"framing.buflen.no-wrap-ff8.decode"},
    "buflen_wrap_accepted": {"framing.buflen.wrap.decode", "framing.buflen.wrap-ff9.decode"},
    "encoder_pad_ff": {"framing.magic.v2-native.encode", "framing.bufcount.three-odd.encode"},
    "encoder_no_buffer_pad": {"framing.bufcount.three-odd.encode", "framing.encoded-length.encode",
                              "framing.roundtrip.encode-decode"},
    "encoder_padded_buflens": {"framing.bufcount.three-odd.encode", "framing.roundtrip.encode-decode"},
    "swabs_pb_handle": {"framing.magic.v2-swabbed.decode", "framing.body.rich-request.swabbed.decode"},
    "no_swab_pb_transno": {"framing.magic.v2-swabbed.decode", "framing.body.rich-request.swabbed.decode"},
    "swabs_padding_3": {"framing.magic.v2-swabbed.decode", "framing.header.ignored-fields.swabbed.decode"},
    "version_unchecked": {"framing.body.version-low-bits.decode"},
    "reply_accepts_request_type": {"framing.body.reply-carries-request-type.decode"},
    "cksum_final_inversion": {"framing.cksum.early-reply-body.decode", "framing.cksum.v2-body.decode"},
}


def test_every_family_is_a_framing_mutant_of_the_zoo():
    for name in MUST_FAIL:
        assert name in mutants.BY_ID and "framing" in mutants.BY_ID[name].areas, name


@pytest.mark.parametrize("name", sorted(MUST_FAIL))
def test_family_is_caught_and_charged_to_its_requirement(zoo, name):
    assert_zoo_caught(zoo.result(name), MUST_FAIL[name])

