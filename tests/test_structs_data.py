"""Structure vectors and layouts: generated vectors are up to date, every seed structure
(and every structure inside one) has vectors, and broken structure codecs are caught."""
import subprocess
import sys

import pytest

from conftest import ROOT
from ptlrpc_conformance import mutants
from ptlrpc_conformance.harness.data.vectors import load_all
from ptlrpc_conformance.spec import layouts

STRUCT_VECTORS = [v for v in load_all() if v.op == "decode_struct"]


def test_generated_struct_vectors_are_up_to_date():
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_struct_vectors.py"), "--check"],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


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


# the structure mutants of the zoo (ptlrpc_conformance/mutants.py) and cases each must fail
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
def test_struct_family_is_caught(run_cli, name):
    m = mutants.BY_ID[name]
    run = run_cli("--iut", m.iut, "--examples", "60", "-k", "structs")
    run.assert_caught(MUST_FAIL[name])
    assert m.requirement in run.report["level"]["failing_must"]
