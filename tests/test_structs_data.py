"""Structure vectors and layouts: generated vectors are up to date, every seed structure
(and every structure inside one) has vectors, and broken structure codecs are caught."""
import subprocess
import sys

import pytest

from conftest import ROOT, assert_zoo_caught
from ptlrpc_conformance import mutants, spec
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.data.vectors import load_all
from ptlrpc_conformance.spec import layouts

STRUCT_VECTORS = [v for v in load_all() if v.op == "decode_struct"]


def test_generated_struct_vectors_are_up_to_date():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_struct_vectors.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_release_struct_overrides_are_up_to_date():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_struct_releases.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


RELEASES = ["2.12.9", "2.15.8", "2.16.1", "2.17.0"]


@pytest.mark.parametrize("rel", RELEASES)
def test_every_structure_case_applies_where_the_release_has_the_structure(rel):
    from ptlrpc_conformance.harness.verdicts import release
    missing = {layouts.canonical(v.struct) for v in STRUCT_VECTORS if release.struct_not_applicable(v, rel)}
    assert missing == {n for n in missing if layouts.absent(n, rel)}
    # every structure the capability certifies is in every release (mdc_swap_layouts is 8 bytes
    # before 2.17.57, asserted by wiretest.c from 2.17.0); the byte-swapped cases of other
    # structures with a swab routine may name one a release lacks (lov_hsm_md, mgs_target_nidlist)
    assert missing & set(layouts.seed_closure()) == set()


def test_a_release_vector_is_written_as_that_release_reads_it():
    """Read by hand from each tag: 2.15.8's ldlm_inodebits is 24 bytes (li_gid, no li_padding or
    li_initiator_id); its lustre_swab_connect leaves padding3 (today's ocd_compr_type) as sent;
    2.12.9's lustre_swab_mdt_body leaves mbo_padding_8 (today's mbo_btime) as sent."""
    vectors = {v.id: v for v in STRUCT_VECTORS}
    bits = vectors["structs.generated.ldlm-inodebits"].for_profile("lustre-2.15.8")
    assert len(bits.data) == 24 and set(bits.expect["fields"]) == {"bits", "try_bits", "cancel_bits", "li_gid"}
    ocd = vectors["structs.obd-connect-data.be-flags2-compress"]
    assert ocd.expect["fields"]["ocd_compr_type"] == 0x603
    assert ocd.for_profile("lustre-2.15.8").expect["fields"]["ocd_compr_type"] == 0x0306000000000000
    assert ocd.for_profile("lustre-2.16.1").expect["fields"]["ocd_compr_type"] == 0x603
    mdt = vectors["structs.mdt-body.all-fields-be"]
    assert mdt.for_profile("lustre-2.12.9").expect["fields"]["mbo_btime"] == 0x805ABB6400000000
    assert mdt.for_profile("lustre-2.15.8").expect == mdt.expect


def test_every_structure_has_vectors():
    covered = {layouts.canonical(v.struct) for v in STRUCT_VECTORS if v.verdict == "valid"}
    every = set(layouts.seed_closure())          # what the structs capability certifies
    assert every - covered == set()
    assert len(layouts.seed_structs()) == 58 and set(layouts.seed_structs()) <= covered


def test_hand_written_structures_in_both_byte_orders():
    hand = {"obdo", "ost_body", "ost_id", "lu_fid", "mdt_body", "obd_connect_data", "obd_statfs", "obd_uuid"}
    for name in hand:
        orders = {v.byte_order for v in STRUCT_VECTORS if layouts.canonical(v.struct) == name and v.verdict == "valid"}
        assert orders == {"little", "big"}, name


# the structure mutants of the zoo (ptlrpc_conformance/mutants/) and cases each must fail
MUST_FAIL = {
    "struct_field_shifted": {"structs.obdo.all-fields-le.decode", "structs.obdo.all-fields-le.encode",
                             "structs.valid.obdo.decode"},
    "struct_union_always_oi": {"structs.ost-id.fid-form-be.decode"},
    "valid_size_under_flid": {"structs.valid.obdo.decode", "structs.ost-body.valid-be.decode"},
    "valid_unknown_bits_dropped": {"structs.valid.obdo.decode", "structs.valid.mdt-body.decode",
                                   "structs.valid.obdo.encode-given"},
    "valid_omitted_is_every_bit": {"structs.valid.obdo.encode-omitted", "structs.valid.mdt-body.encode-omitted"},
}


def test_every_struct_family_is_a_structure_mutant_of_the_zoo():
    for name in MUST_FAIL:
        assert name in mutants.BY_ID and "structs" in mutants.BY_ID[name].areas, name


@pytest.mark.parametrize("name", sorted(MUST_FAIL))
def test_struct_family_is_caught(zoo, name):
    """Read from the zoo's run (conftest.py's `zoo`), not certified again."""
    assert mutants.BY_ID[name].requirement in {r.id for r in registry.requirements().values() if r.level == "MUST"}
    assert_zoo_caught(zoo.result(name), MUST_FAIL[name])


def test_valid_unknown_1_is_about_bits_no_flag_defines():
    """VALID-UNKNOWN-1 covers the o_valid/mbo_valid bits no OBD_MD_* flag defines.  A bit Lustre
    defines that the valid-bit table ties to no field (OBD_MD_FLRDEV) is not unknown: a decoder
    that loses it breaks the structure's own rule, and an example whose mask holds only such
    bits is no evidence for VALID-UNKNOWN-1 (found by a review: both went to VALID-UNKNOWN-1)."""
    from ptlrpc_conformance.suites import test_structs as ts
    rdev, undefined = spec.constant("OBD_MD_FLRDEV"), 1 << 63
    assert rdev & layouts.defined_valid_bits() and not undefined & layouts.defined_valid_bits()
    assert not rdev & ts._known_bits("2.17.57", "obdo")          # defined, governs no field of the table
    flid = spec.constant("OBD_MD_FLID")
    assert ts._mask_requirement("2.17.57", "obdo", flid | rdev, flid, "VALID-OBDO-1") == "VALID-OBDO-1"
    assert ts._mask_requirement("2.17.57", "obdo", flid | undefined, flid, "VALID-OBDO-1") == "VALID-UNKNOWN-1"
    assert ts._mask_requirement("2.17.57", "obdo", flid | undefined | rdev, flid, "VALID-OBDO-1") == "VALID-OBDO-1"
    assert ts._undefined("2.17.57", flid | rdev) == 0 and ts._undefined("2.17.57", flid | undefined) == undefined


def test_a_decoder_with_lustres_mdt_body_valid_bits_passes_every_valid_bit_case(run_cli):
    """An mdt_body valid view worked out from the pairs of field and bit Lustre's MDT sets
    together (tests/iuts.py LustreMdtValidView: mbo_version under FLDATAVERSION, the DoM size
    under DOM_SIZE, the buffer sizes under their buffers' bits, ...) passes every case that
    judges one, under the profiles of releases that define each of the bits (2.14 and later:
    FLBTIME).  The table once tied no bit to those fields: a vector with FLDATAVERSION set
    expected an empty view and the property's other bits did the same, so such a decoder
    failed VALID-MDT-1."""
    cases = [f"{v.id}.decode" for v in STRUCT_VECTORS if v.struct == "mdt_body" and "valid" in (v.expect or {})] \
        + ["structs.valid.mdt-body.decode", "structs.message.mds-getattr-reply.decode"]
    assert len(cases) >= 5
    for profile in ("lustre-2.17.57", "lustre-2.15.8"):
        args = ["--iut", "python:iuts:lustre_mdt_valid_view", "--profile", profile, "--examples", "200"]
        for case in cases:
            args += ["--case", case]
        run = run_cli(*args)
        assert run.rc == 0, run.stdout[-3000:] + run.stderr[-2000:]
        verdicts = run.verdicts()
        assert set(verdicts) == set(cases) and set(verdicts.values()) == {"pass"}, verdicts
