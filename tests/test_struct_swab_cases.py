"""Byte-swapped structure cases for every structure with a swab routine (issue 37, section 2),
the swab rules they are judged by, the hello member `struct_operations` (a testee that
decodes structures and has no encoder: Lustre's own code), and the Lustre testee's choice of
swab routine (examples/lustre-testee/structs_table.py)."""
import importlib.util
import json
import pathlib
from importlib import resources

import jsonschema
import pytest

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.data import vectors as V
from ptlrpc_conformance.harness.transport.adapter import InProcessAdapter, NotApplicable
from ptlrpc_conformance.harness.transport.protocol import (STRUCT_OPERATIONS, HelloError, Outcome,
                                                            parse_hello)
from ptlrpc_conformance.harness.verdicts import judge
from ptlrpc_conformance.reference import make_testee
from ptlrpc_conformance.spec import layouts, releases, structs as S

ROOT = pathlib.Path(__file__).resolve().parent.parent
HELLO = {"name": "x", "version": "1", "capabilities": ["structs"], "protocol": 1}


def _generated():
    return {v.id: v for v in V.load_file(ROOT / "ptlrpc_conformance" / "vectors" / "structs_generated.yaml")}


def _load(name: str, rel: str):
    spec_ = importlib.util.spec_from_file_location(name, ROOT / rel)
    module = importlib.util.module_from_spec(spec_)
    spec_.loader.exec_module(module)
    return module


# ---- the cases ----------------------------------------------------------------------------------

def test_every_structure_with_a_swab_routine_has_a_big_endian_case():
    """Every structure the default release's own swab routine handles (struct_unswabbed of
    spec/releases/2.17.57.json) has a byte-swapped decode case, hand-written or generated,
    except a union no swab rule defines (named in the generated file)."""
    ids = {v.struct for f in ("structs.yaml", "structs_generated.yaml")
           for v in V.load_file(ROOT / "ptlrpc_conformance" / "vectors" / f)
           if v.op == "decode_struct" and v.byte_order == "big"}
    ids = {layouts.canonical(n) for n in ids}
    text = (ROOT / "ptlrpc_conformance" / "vectors" / "structs_generated.yaml").read_text()
    skipped = set(text.split("# no big-endian vector (a union no swab rule defines): ", 1)[1].split("\n")[0]
                  .split(", ")) if "# no big-endian vector" in text else set()
    swabbed = set(releases.load(layouts.DEFAULT_RELEASE)["struct_unswabbed"]) & set(layouts.load()["structs"])
    missing = swabbed - ids - skipped
    assert not missing, sorted(missing)
    for name in ("ldlm_wire_policy_data", "lov_mds_md_v1", "lov_mds_md_v3", "lov_comp_md_v1", "fiemap",
                 "object_update_request"):
        assert name in ids, name


@pytest.mark.parametrize("name", ["fiemap", "lov_mds_md_v1", "lov_mds_md_v3", "lov_comp_md_v1",
                                  "object_update_request", "object_update_reply"])
def test_counts_that_claim_more_than_the_buffer(name):
    """An overclaiming count is `acceptable` (a refusal passes) and, when accepted, judged on the
    header the bytes hold; its claimed count is larger than the elements present."""
    v = _generated()[f"structs.generated.{name.replace('_', '-')}-overclaim-be"]
    assert v.verdict == "acceptable" and v.byte_order == "big" and list(v.requirements) == ["DEC-ROBUST-1"]
    flexible = [f for f in S.entry(name)["fields"] if f.get("flexible")][0]
    t = flexible["type"]
    elem = S.size(t[len("struct "):]) if t.startswith("struct ") else int(t[1:]) // 8     # ourp_lens: u16
    present = (len(v.data) - S.size(name)) // elem
    counts = {k: val for k, val in v.expect["fields"].items() if "count" in k}
    assert counts and max(counts.values()) > present, (counts, present)
    assert flexible["name"] not in v.expect["fields"]


def test_the_flock_view_is_swapped_as_lustre_swab_ldlm_policy_data_does():
    """LU-15527: lfw_owner (at l_extent.gid's bytes) is swapped once, lfw_padding and lfw_pid
    as 32-bit; the case's bytes are written out, its expectation is the little-endian pattern."""
    v = _generated()["structs.generated.ldlm-wire-policy-data-be"]
    flock = v.expect["fields"]["l_flock"]
    raw = v.data
    assert flock["lfw_owner"] == int.from_bytes(raw[16:24], "big")
    assert flock["lfw_padding"] == int.from_bytes(raw[24:28], "big")
    assert flock["lfw_pid"] == int.from_bytes(raw[28:32], "big")
    assert v.expect["fields"]["l_extent"]["gid"] == flock["lfw_owner"]


def test_the_reference_decodes_every_big_endian_case():
    testee = make_testee()
    for v in _generated().values():
        if v.byte_order != "big":
            continue
        out = testee.handle(dict(v.decode_request(), id=1))
        assert out["ok"], (v.id, out)
        diffs, _ = judge.struct_diffs(v.expect or {}, out["result"], v.struct)
        assert not diffs, (v.id, [d.text for d in diffs][:3])


def test_swab_rules_cover_the_default_release_routines():
    """facts.json's swab rules (tools/gen_facts.py) hold the fields each routine of the default
    release leaves alone, and the rules facts_extra.yaml writes from the code where a field is
    reached through a helper, a macro or a union."""
    rules = spec.facts()["swab"]
    for name, entry in releases.load(layouts.DEFAULT_RELEASE)["struct_unswabbed"].items():
        if entry["fields"]:
            assert "opaque" in rules.get(name, {}), name
    assert rules["ldlm_wire_policy_data"]["union_as"] == "l_flock"
    assert rules["fiemap_extent"]["swab_first"] == {"fe_reserved": 1}
    assert "gl_id" not in rules["ldlm_gl_lquota_desc"]["opaque"]


def test_an_acceptable_structure_refused_passes_and_accepted_is_judged_on_its_fields():
    v = _generated()["structs.generated.fiemap-overclaim-be"]
    refused = Outcome("error", error="EOVERFLOW")
    assert judge.judge_struct(v, refused, False).status == judge.PASS
    header = json.loads(json.dumps(v.expect["fields"]))
    right = Outcome("ok", result={"type": "fiemap", "fields": dict(header, fm_extents=[])})
    assert judge.judge_struct(v, right, False).status == judge.PASS
    header["fm_flags"] += 1
    wrong = judge.judge_struct(v, Outcome("ok", result={"type": "fiemap", "fields": header}), False)
    assert wrong.status == judge.FAIL and wrong.failed_requirements == ["DEC-ROBUST-1"]


# ---- struct_operations ------------------------------------------------------------------------

def test_parse_hello_struct_operations():
    assert parse_hello(dict(HELLO)).struct_operations == STRUCT_OPERATIONS
    hello = parse_hello(dict(HELLO, struct_operations=["decode_struct"]))
    assert hello.implements("decode_struct") and not hello.implements("encode_struct")
    assert hello.implements("decode")                     # not a structure operation
    for bad in ([], ["encode"], "decode_struct", [1]):
        with pytest.raises(HelloError, match="'struct_operations' must be a non-empty list"):
            parse_hello(dict(HELLO, struct_operations=bad))
    schema = json.loads(resources.files("ptlrpc_conformance.schemas").joinpath("testee-protocol-v1.json")
                        .read_text())
    check = jsonschema.Draft202012Validator(dict(schema["$defs"]["hello_result"], **{"$defs": schema["$defs"]}))
    check.validate(dict(HELLO, struct_operations=["decode_struct"]))
    assert not check.is_valid(dict(HELLO, struct_operations=["encode"]))


class DecodeOnly:
    """The reference, declaring that it decodes structures and has no encoder."""

    def __init__(self):
        self.inner = make_testee(capabilities=("decode", "structs"))
        self.sent = []

    def handle(self, request):
        out = self.inner.handle(request)
        if request.get("op") == "hello":
            out["result"]["struct_operations"] = ["decode_struct"]
        else:
            self.sent.append(request.get("op"))
        return out


def test_adapter_refuses_an_undeclared_structure_operation_before_sending():
    testee = DecodeOnly()
    adapter = InProcessAdapter(testee)
    adapter.require("decode_struct")
    with pytest.raises(NotApplicable, match="implements decode_struct only"):
        adapter.require("encode_struct")
    with pytest.raises(NotApplicable):
        adapter.call({"op": "encode_struct", "type": "lu_fid", "fields": {}})
    assert "encode_struct" not in testee.sent


# ---- the Lustre testee's choice of routine ------------------------------------------------------

def test_structs_table_prefers_the_routine_that_swabs_the_stripes():
    table = _load("structs_table", "examples/lustre-testee/structs_table.py")
    swabbers = {"lustre_swab_lov_mds_md": {"param": "struct lov_mds_md", "length": None, "returns": "void",
                                           "file": "lustre/ptlrpc/pack_generic.c"},
                "lustre_swab_lov_user_md": {"param": "struct lov_user_md", "length": "size_t", "returns": "void",
                                            "file": "lustre/ptlrpc/pack_generic.c"},
                "lustre_swab_lmm_oi": {"param": "struct ost_id", "length": None, "returns": "void",
                                       "file": "lustre/ptlrpc/pack_generic.c"},
                "lustre_swab_ost_id": {"param": "struct ost_id", "length": None, "returns": "void",
                                       "file": "lustre/obdclass/llog_swab.c"},
                "lustre_swab_fid2path": {"param": "struct getinfo_fid2path", "length": None, "returns": "void",
                                         "file": "lustre/ptlrpc/pack_generic.c"}}
    chosen = table.choose(swabbers, layouts.load()["structs"])
    assert chosen["lov_mds_md_v1"] == "lustre_swab_lov_user_md"
    assert chosen["ost_id"] == "lustre_swab_ost_id"
    assert chosen["getinfo_fid2path"] == "lustre_swab_fid2path"
    older = {k: v for k, v in swabbers.items() if k != "lustre_swab_lov_user_md"}
    assert table.choose(older, layouts.load()["structs"])["lov_mds_md_v1"] == "lustre_swab_lov_mds_md"
    text = table.render({"adapted": {"swabbers": swabbers}}, "2.17.57", "test")
    assert "lustre_swab_lov_user_md((struct lov_user_md *)p, (size_t)n)" in text
    assert 'sizeof(struct lov_mds_md_v1), lt_steps_lov_mds_md_v1, lt_swab_lov_mds_md_v1' in text
    assert '{"lustre_handle", 8, 8, lt_steps_lustre_handle, NULL, NULL, NULL, 1}' in text


@pytest.mark.parametrize("version,expected", [("2.15.8", "2.15.8"), ("2.15.56", "2.15.8"), ("2_12_57", "2.12.9"),
                                              ("2.17.57", "2.17.57")])
def test_structs_table_release_of_a_tree(version, expected):
    table = _load("structs_table", "examples/lustre-testee/structs_table.py")
    assert table.release_of(version)[0] == expected


def test_structs_table_runs_the_routine_the_trees_request_format_runs_on_a_structure(tmp_path):
    # LU-11997: before the fix, layout.c's RMF_FIEMAP_KEY ran lustre_swab_fiemap on the
    # ll_fiemap_info_key buffer; the testee built from that tree must run it too
    extract = _load("extract", "examples/lustre-testee/extract.py")
    table = _load("structs_table", "examples/lustre-testee/structs_table.py")
    (tmp_path / "lustre/ptlrpc").mkdir(parents=True)
    (tmp_path / "lustre/ptlrpc/layout.c").write_text(
        'struct req_msg_field RMF_FIEMAP_KEY =\n\tDEFINE_MSGF("fiemap", 0, sizeof(struct ll_fiemap_info_key),\n'
        '\t\t    lustre_swab_fiemap, NULL);\n'
        'struct req_msg_field RMF_A =\n\tDEFINE_MSGF("a", 0, sizeof(struct obdo), lustre_swab_obdo, NULL);\n'
        'struct req_msg_field RMF_B =\n\tDEFINE_MSGF("b", 0, sizeof(struct obdo), lustre_swab_ost_body, NULL);\n')
    swabbers = {"lustre_swab_fiemap": {"param": "struct fiemap", "length": None, "returns": "void",
                                       "file": "lustre/ptlrpc/pack_generic.c"},
                "lustre_swab_obdo": {"param": "struct obdo", "length": None, "returns": "void",
                                     "file": "lustre/ptlrpc/pack_generic.c"},
                "lustre_swab_ost_body": {"param": "struct ost_body", "length": None, "returns": "void",
                                         "file": "lustre/ptlrpc/pack_generic.c"}}
    capsule = extract.capsule_swabbers(tmp_path, swabbers)
    assert capsule == {"ll_fiemap_info_key": "lustre_swab_fiemap"}     # obdo: two routines, none chosen
    chosen = table.choose(swabbers, layouts.load()["structs"], capsule)
    assert chosen["ll_fiemap_info_key"] == "lustre_swab_fiemap" and chosen["fiemap"] == "lustre_swab_fiemap"
    # a structure's own routine comes first (the tree after the fix)
    fixed = dict(swabbers, lustre_swab_fiemap_info_key={"param": "struct ll_fiemap_info_key", "length": None,
                                                         "returns": "void", "file": "lustre/ptlrpc/pack_generic.c"})
    assert table.choose(fixed, layouts.load()["structs"], capsule)["ll_fiemap_info_key"] == \
        "lustre_swab_fiemap_info_key"
    text = table.render({"adapted": {"swabbers": swabbers, "capsule_swabbers": capsule}}, "2.17.57", "test")
    assert "lustre_swab_fiemap((struct fiemap *)p)" in text
    assert "sizeof(struct ll_fiemap_info_key), lt_steps_ll_fiemap_info_key, lt_swab_ll_fiemap_info_key" in text


def _cut_case_is(run_cli, iut: str, case_id: str, verdict: str, *options: str) -> dict:
    """One cut case of tests/iuts.py's IUT `iut` ends as `verdict`; a failure is charged to
    STRUCT-TRUNC-1.  The case's entry in the report."""
    run = run_cli("certify", "--iut", f"python:iuts:{iut}", "--case", case_id, *options, "-q")
    # 5: the selection's one case exercised no requirement it declares (all its cuts acceptable)
    assert run.rc in (0, 1, 5), run.stderr
    cases = {c["id"]: c for c in run.report["cases"]}
    assert cases[case_id]["verdict"] == verdict, cases[case_id]
    if verdict == "fail":
        assert "STRUCT-TRUNC-1" in cases[case_id]["requirements"]
    return cases[case_id]


@pytest.mark.parametrize("iut, verdict", [("swap_layouts_from_8", "pass"), ("swap_layouts_from_7", "fail")])
def test_a_2_17_57_receiver_may_take_mdc_swap_layouts_from_8_bytes(run_cli, iut, verdict):
    """2.17.57's layout.c takes RMF_SWAP_LAYOUTS at its length from the 8 bytes of
    mdc_swap_layouts_217 up (RMF_F_MINIMUM_SIZE, LU-5896): a decoder that accepts the cuts of 12
    and 23 bytes as that code does passes the cut case under the default profile; one that also
    takes 7 bytes (the cut of 0 stays refused by both) fails it, charged to STRUCT-TRUNC-1."""
    case = _cut_case_is(run_cli, iut, "structs.generated.mdc-swap-layouts.cut.decode", verdict)
    if verdict == "pass":       # the refused cuts of 0 and 7 bytes are its evidence
        assert "STRUCT-TRUNC-1" in case["exercised"], case
    # the minimum is the 2.17.57 release's: 2.17.0's receiver takes only the whole (8-byte) structure
    from ptlrpc_conformance.spec import release_differences
    assert release_differences.minimum_size("mdc_swap_layouts", "2.17.57") == 8
    assert release_differences.minimum_size("mdc_swap_layouts", "2.17.0") is None


@pytest.mark.parametrize("iut, case_id, verdict", [
    ("connect_data_any_length", "structs.obd-connect-data.all-fields-le.cut.decode", "pass"),
    ("connect_data_any_length", "structs.obd-connect-data.truncated.decode", "pass"),
    ("ldlm_request_any_length", "structs.generated.ldlm-request.cut.decode", "pass"),
    ("ost_body_any_length", "structs.ost-body.all-fields-le.cut.decode", "fail")])
def test_a_structure_a_lustre_receiver_takes_at_any_length_may_be_taken_cut(run_cli, iut, case_id, verdict):
    """layout.c marks RMF_CONNECT_DATA and RMF_DLM_REQ RMF_F_NO_SIZE_CHECK and their handlers
    (target_handle_connect, ldlm_handle_enqueue) set no lower bound: a decoder that takes a cut
    obd_connect_data or ldlm_request passes, in every release; ost_body's field is size-checked,
    and a decoder that takes a cut one fails, charged to STRUCT-TRUNC-1."""
    for profile in ("lustre-2.17.57", "lustre-2.12.9"):
        case = _cut_case_is(run_cli, iut, case_id, verdict, "--profile", profile)
        if verdict == "pass":
            # every cut is acceptable: the pass shows only that the IUT answered, never that a
            # short structure is refused, so it is no evidence for STRUCT-TRUNC-1
            assert "STRUCT-TRUNC-1" not in case["exercised"], case
    from ptlrpc_conformance.spec import release_differences
    assert release_differences.minimum_size("obd_connect_data", "2.15.8") == 0
    assert release_differences.minimum_size("ost_body", "2.15.8") is None


@pytest.mark.parametrize("rel", ["2.12.9", "2.15.8", "2.16.1"])
def test_ldlm_policy_data_from_a_byte_swapped_sender_reads_as_the_releases_routine_swaps_it(rel):
    """lustre_swab_ldlm_policy_data swaps bytes 0-7, 8-15 and 16-23 (l_extent), then, in 2.12.9
    and 2.15.8, bytes 16-23 again (l_flock.lfw_owner) and 28-31 (lfw_pid); from 2.16 (LU-15527)
    bytes 24-27 (lfw_padding) and 28-31.  The byte-swapped vector of the union, under each
    release's profile, expects what that routine leaves, worked out here byte by byte: before
    2.16 the owner (and l_extent.gid, the same bytes) and the padding arrive as sent.  The suite
    once expected 2.16's swabbing under every profile, and Lustre 2.15.8's own code failed."""
    vector = next(v for v in V.load_all()
                  if v.id == "structs.generated.ldlm-wire-policy-data-be").for_profile(f"lustre-{rel}")
    data = bytearray(vector.data)
    swaps = [(0, 8), (8, 8), (16, 8)] + ([(16, 8), (28, 4)] if rel in ("2.12.9", "2.15.8") else [(24, 4), (28, 4)])
    for at, size in swaps:
        data[at:at + size] = data[at:at + size][::-1]
    word = lambda at, size: int.from_bytes(data[at:at + size], "little")     # noqa: E731
    fields = vector.expect["fields"]
    assert fields["l_flock"] == {"lfw_start": word(0, 8), "lfw_end": word(8, 8), "lfw_owner": word(16, 8),
                                 "lfw_padding": word(24, 4), "lfw_pid": word(28, 4)}, rel
    assert fields["l_extent"] == {"start": word(0, 8), "end": word(8, 8), "gid": word(16, 8)}, rel
    from ptlrpc_conformance.reference import release_testee
    got = release_testee(rel).handle({"id": 1, "op": "decode_struct", "type": "ldlm_wire_policy_data",
                                           "data": vector.data.hex(), "byte_order": "big"})
    assert got["ok"] and got["result"]["fields"]["l_flock"] == fields["l_flock"], (rel, got)
