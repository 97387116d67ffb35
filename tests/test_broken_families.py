"""One deliberately broken implementation per rule family (tests/iuts.py FAMILIES): each
must fail the cases of its rule.  The lists are the cases that must be among the failures;
a family may fail more (a broken placement breaks many derived cases)."""
import pytest

from iuts import FAMILIES

MUST_FAIL = {
    "magic_unchecked": {"framing.magic.v1.decode", "framing.magic.zero.decode", "framing.magic.random.decode"},
    "bufcount_max_31": {"framing.bufcount.32.decode", "framing.bufcount.31.bufcount-pm1.decode"},
    "buflen_unrounded": {"framing.pad.nonzero.decode", "framing.bufcount.three-odd.cut-buffer1.decode"},
    "buflen_max_off_by_8": {"framing.buflen.total-max-plus-8.decode"},
    "wrap_accepted": {"framing.buflen.wrap.decode", "framing.buflen.wrap-ff9.decode"},
    "encoder_pad_ff": {"framing.magic.v2-native.encode", "framing.bufcount.three-odd.encode"},
    "encoder_no_buffer_pad": {"framing.bufcount.three-odd.encode", "framing.encoded-length.encode",
                              "framing.roundtrip.encode-decode"},
    "encoder_padded_buflens": {"framing.bufcount.three-odd.encode", "framing.roundtrip.encode-decode"},
    "swabs_handle": {"framing.magic.v2-swabbed.decode", "framing.body.rich-request.swabbed.decode"},
    "no_swab_transno": {"framing.magic.v2-swabbed.decode", "framing.body.rich-request.swabbed.decode"},
    "no_swab_padding_3": {"framing.magic.v2-swabbed.decode", "framing.header.ignored-fields.swabbed.decode"},
    "version_unchecked": {"framing.body.version-low-bits.decode"},
    "reply_accepts_request_type": {"framing.body.reply-carries-request-type.decode"},
    "cksum_final_inversion": {"framing.cksum.early-reply-body.decode", "framing.cksum.v2-body.decode"},
}


def test_every_family_has_expectations():
    assert set(MUST_FAIL) == set(FAMILIES)


@pytest.mark.parametrize("name", sorted(MUST_FAIL))
def test_family_is_caught(run_cli, name):
    run_cli("--iut", f"python:iuts:{name}", "--examples", "50", "-k", "framing").assert_caught(MUST_FAIL[name])
