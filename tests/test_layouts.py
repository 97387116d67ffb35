"""Wire structure layouts live in ptlrpc_conformance/spec/layouts.json, generated from
spec-sources/ by tools/gen_layouts.py.  Regenerating must change nothing, the table must be
self-consistent, and every byte wiretest.c asserts must agree with wire_facts.yaml."""
import json
import subprocess
import sys

import pytest
import yaml

from conftest import ROOT
from ptlrpc_conformance.spec import layouts

SCALAR = {"u8": 1, "s8": 1, "char": 1, "u16": 2, "s16": 2, "u32": 4, "s32": 4, "u64": 8, "s64": 8}
TYPES = set(SCALAR) | {"bytes"}
STRUCTS = layouts.load()["structs"]


@pytest.fixture(scope="module")
def wire(spec_sources):
    """wire_facts.yaml as the generators read it (tools/regen.py: corrected to the v2_17_57 tag)."""
    return _regen().load_wire_facts(spec_sources)["structs"]


def _regen():
    import importlib.util
    spec = importlib.util.spec_from_file_location("regen", ROOT / "tools" / "regen.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mapping(spec_sources):
    return yaml.safe_load((spec_sources / "seed_mapping.yaml").read_text())["structs"]


def elem_size(f: dict) -> int:
    if "elem_size" in f:
        return f["elem_size"]
    t = f["type"]
    return STRUCTS[t[len("struct "):]]["size"] if t.startswith("struct ") else SCALAR[t]


def test_regeneration_changes_nothing(spec_sources):
    """The generator's default sources are the repository's copy (spec-sources/)."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "gen_layouts.py"), "--check"],
                          capture_output=True, text=True, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr


def test_rendering_shape():
    text = (ROOT / "ptlrpc_conformance" / "spec" / "layouts.json").read_text()
    assert text.endswith("}\n") and text.startswith('{\n "aliases"')
    table = json.loads(text)
    assert set(table) == {"meta", "structs", "aliases", "field_aliases", "size_formulas"}
    assert table["meta"]["generated_by"] == "tools/gen_layouts.py"
    assert table["meta"]["structs"] == len(table["structs"])
    # what load() gives: the file, and no field renames (2.17.57 is the release the names are)
    assert {k: v for k, v in layouts.load().items() if k != "field_names"} == table
    assert layouts.load()["field_names"] == {} and layouts.load() is layouts.load("2.17.57")


def test_every_seed_entry_is_accounted_for(mapping):
    table = layouts.load()
    from_004 = [k for k, v in mapping.items() if any(s.startswith("004") for s in v["seed_sources"])]
    assert len(from_004) == 58
    formulas = [k for k in from_004 if k in table["size_formulas"]]
    assert sorted(formulas) == ["acl", "mdt_md"] == layouts.seed_formulas()
    assert len([k for k in from_004 if k not in formulas and layouts.canonical(k) in STRUCTS]) == 56
    # seed 004's list, plus lustre_msg_v2 / lustre_msg / mgs_config_body from the C blocks of 000/003
    for seed, entry in mapping.items():
        if seed in formulas:
            continue
        current = seed if entry["current"] == "missing" else entry["current"]
        assert layouts.canonical(seed) == current and STRUCTS[current]["seed"], seed
    seeds = layouts.seed_structs()
    assert len(seeds) == table["meta"]["seed_structs"] == 58
    assert set(seeds) == {seed if e["current"] == "missing" else e["current"]
                          for seed, e in mapping.items() if seed not in formulas}
    assert [n for n, e in STRUCTS.items() if e["legacy"]] == ["lustre_capa"]


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_struct_is_self_consistent(name):
    entry = STRUCTS[name]
    fields = entry["fields"]
    # only a structure that is one flexible array (update_ops, update_params) has size 0
    assert entry["cite"] and (entry["size"] > 0 or all(f.get("flexible") for f in fields))
    assert [f["offset"] for f in fields] == sorted(f["offset"] for f in fields)
    groups: dict[str, list[dict]] = {}
    spans = []
    for f in fields:
        assert f["type"] in TYPES or f["type"].startswith("struct "), f
        if f["type"].startswith("struct "):
            assert f["type"][len("struct "):] in STRUCTS, f
        assert 0 <= f["offset"] and f["offset"] + f["size"] <= entry["size"], f
        if f.get("flexible"):
            assert f["size"] == 0 and f.get("count") == 0 and "union" not in f, f
        elif "count" in f:
            assert f["count"] > 0 and f["size"] == f["count"] * elem_size(f), f
        else:
            assert f["size"] == elem_size(f), f      # a struct X field is exactly sizeof(X)
        if "union" in f:
            groups.setdefault(f["union"], []).append(f)
        elif f["size"]:
            spans.append((f["offset"], f["offset"] + f["size"]))
    for members in groups.values():
        assert len(members) >= 2 and len({m["offset"] for m in members}) == 1, members
        start = members[0]["offset"]
        spans.append((start, start + max(m["size"] for m in members)))
    spans.sort()
    for (_, end), (start, _) in zip(spans, spans[1:]):
        assert end <= start, f"{name}: overlapping fields {spans}"
    if entry.get("kind") == "union":
        assert set(groups) == {name} and all(f["offset"] == 0 for f in fields)
    assert len({f["name"] for f in fields}) == len(fields)
    assert set(entry.get("header_fields", [])) <= {f["name"] for f in fields}


@pytest.mark.parametrize("name", sorted(STRUCTS))
def test_wiretest_facts_are_carried_over(name, wire):
    entry = STRUCTS[name]
    if name not in wire:
        assert entry["legacy"] or set(entry["header_fields"]) == {f["name"] for f in entry["fields"]}
        return
    theirs = wire[name]
    assert entry["size"] == theirs["size"]
    ours = {f["name"]: f for f in entry["fields"]}
    for f in theirs["fields"]:
        assert (ours[f["name"]]["offset"], ours[f["name"]]["size"]) == (f["offset"], f["size"]), f
        if "count" in f:
            assert ours[f["name"]].get("count") == f["count"], f
    extra = set(ours) - {f["name"] for f in theirs["fields"]}
    assert extra == set(entry.get("header_fields", [])), extra
    assert entry.get("unasserted_ranges") == theirs.get("unasserted_ranges")
    assert bool(entry.get("packed")) == bool(theirs.get("packed"))


def test_mapping_same_fields_agree(mapping):
    """Fields seed_mapping.yaml calls unchanged are where the mapping says they are."""
    for seed, entry in mapping.items():
        if entry["current"] == "missing":
            continue
        for f in entry["fields"]:
            if f["status"] in ("same", "same_name_in_header_not_asserted_by_wiretest") and "." not in f["current"]:
                if f["current"] in layouts.load()["field_aliases"].get(entry["current"], {}):
                    continue       # fe_device: a macro over fe_reserved[0]
                got = layouts.field(entry["current"], f["current"])
                assert got["offset"] == f["offset"], (seed, f)
                if f["size"] is not None:
                    assert got["size"] == f["size"], (seed, f)


def test_well_known_facts(wire):
    obdo = layouts.struct("obdo")
    assert obdo["size"] == wire["obdo"]["size"] == 208
    assert layouts.field("obdo", "o_valid") == {"name": "o_valid", "offset": 0, "size": 8, "type": "u64"}
    o_oi = layouts.field("obdo", "o_oi")
    assert (o_oi["offset"], o_oi["size"], o_oi["type"]) == (8, 16, "struct ost_id")
    assert layouts.field("obdo", "o_mtime")["type"] == "s64"
    assert layouts.struct("ost_id")["size"] == wire["ost_id"]["size"] == 16
    fid = layouts.struct("lu_fid")
    assert fid["size"] == 16 and [(f["name"], f["offset"], f["size"], f["type"]) for f in fid["fields"]] == [
        ("f_seq", 0, 8, "u64"), ("f_oid", 8, 4, "u32"), ("f_ver", 12, 4, "u32")]
    assert layouts.struct("mdt_body")["size"] == wire["mdt_body"]["size"] == 216
    assert layouts.struct("obd_connect_data")["size"] == wire["obd_connect_data"]["size"] == 192
    assert layouts.struct("obd_statfs")["size"] == wire["obd_statfs"]["size"] == 144
    assert layouts.struct("ptlrpc_body")["size"] == wire["ptlrpc_body_v3"]["size"] == 184
    assert layouts.struct("lustre_msg")["size"] == 32
    buflens = layouts.field("lustre_msg_v2", "lm_buflens")
    assert (buflens["offset"], buflens["flexible"], buflens["type"]) == (32, True, "u32")
    assert layouts.field("ptlrpc_body_v3", "pb_jobid") == {
        "name": "pb_jobid", "offset": 152, "size": 32, "type": "char", "count": 32}
    assert layouts.field("ldlm_lock_desc", "l_req_mode")["type"] == "u32"          # enum ldlm_mode
    assert layouts.field("obd_connect_data", "ocd_ibits_known")["type"] == "u64"   # 8-byte enum
    assert layouts.struct("lustre_capa")["size"] == 120 and layouts.struct("llog_cookie")["size"] == 36
    assert layouts.size_formula("mdt_md")["value"] == 56 and layouts.size_formula("acl")["value"] == 260


def test_unions_and_anonymous_structs():
    oi, oi_fid = layouts.field("ost_id", "oi"), layouts.field("ost_id", "oi_fid")
    assert oi["union"] == oi_fid["union"] and oi["offset"] == oi_fid["offset"] == 0
    assert oi["type"] == "struct ost_id_oi" and oi_fid["type"] == "struct lu_fid"
    assert layouts.field("ost_id", "oi.oi_seq")["offset"] == 8
    assert layouts.canonical("ostid") == "ost_id_oi"
    assert layouts.struct("lquota_id")["kind"] == "union"
    assert layouts.field("ldlm_lock_desc", "l_policy_data")["type"] == "struct ldlm_wire_policy_data"
    assert layouts.field("lfsck_request", "lr_status")["union"] == layouts.field("lfsck_request", "lr_speed")["union"]


def test_aliases():
    assert layouts.canonical("lustre_msg") == "lustre_msg_v2"
    assert layouts.struct("lustre_msg")["name"] == "lustre_msg_v2"
    assert layouts.canonical("ptlrpc_body") == "ptlrpc_body_v3"
    assert layouts.canonical("ll_user_fiemap") == "fiemap"
    assert layouts.canonical("lov_ost_data") == "lov_ost_data_v1"
    assert layouts.struct("ptlrpc_body_v3")["seed_name"] == "ptlrpc_body"
    for alias, current in layouts.load()["aliases"].items():
        assert alias not in STRUCTS and current in STRUCTS
    with pytest.raises(KeyError):
        layouts.struct("no_such_struct")


def test_field_aliases():
    assert layouts.resolve_field_alias("lustre_msg", "lm_padding_2") == ["lm_opc"]
    assert layouts.resolve_field_alias("obdo", "o_lcookie") == ["o_layout", "o_layout_version"]
    assert layouts.resolve_field_alias("obdo", "o_padding_4") == ["o_projid", "o_padding_4"]
    assert layouts.resolve_field_alias("mdt_body", "mbo_handle") == ["mbo_open_handle"]
    assert layouts.resolve_field_alias("mdt_body", "mbo_ioepoch") == ["mbo_version"]
    assert layouts.resolve_field_alias("mdt_body", "mbo_fid1") == ["mbo_fid1"]
    assert layouts.resolve_field_alias("layout_intent", "li_end") == ["lai_extent.e_end"]
    assert layouts.field("layout_intent", "lai_extent.e_end")["offset"] == 16
    with pytest.raises(KeyError):
        layouts.resolve_field_alias("obdo", "o_no_such_field")
    for struct_name, rows in layouts.load()["field_aliases"].items():
        for seed_field, names in rows.items():
            offsets = [layouts.field(struct_name, n)["offset"] for n in names]
            assert offsets == sorted(offsets), (struct_name, seed_field)


def test_a_later_lustre_name_for_the_same_bytes_is_accepted_in_a_result():
    """mdt_body bytes 200-207 are mbo_padding_9 in v2_17_57; a decoder following a later Lustre
    names them mbo_xattr_absent (LU-17238).  The judge reads the value under either name; a
    wrong value still differs."""
    from ptlrpc_conformance.harness.verdicts.judge import struct_diffs
    expect = {"type": "mdt_body", "fields": {"mbo_padding_9": 258, "mbo_nlink": 5}}
    assert struct_diffs(expect, {"type": "mdt_body", "fields": {"mbo_xattr_absent": 258, "mbo_nlink": 5}}, "s")[0] == []
    # a structure vector's expectation names no type: the result's says which structure it is
    assert struct_diffs({"fields": expect["fields"]},
                        {"type": "mdt_body", "fields": {"mbo_xattr_absent": 258, "mbo_nlink": 5}}, "s")[0] == []
    diffs, _ = struct_diffs(expect, {"type": "mdt_body", "fields": {"mbo_xattr_absent": 259, "mbo_nlink": 5}}, "s")
    assert [d.text for d in diffs] == ["s.fields.mbo_padding_9: expected 258 (0x102), got 259 (0x103)"]
    diffs, _ = struct_diffs(expect, {"type": "mdt_body", "fields": {"mbo_nlink": 5}}, "s")
    assert [d.text for d in diffs] == ["s.fields.mbo_padding_9: expected 258 (0x102), got nothing"]


# ---- a release's table in today's names (view, swab_rules) ------------------------------------

def _fields(release, name):
    return [(f["name"], f["offset"], f["size"]) for f in layouts.view(release)["structs"][name]["fields"]]


def test_the_default_release_s_view_is_its_table():
    assert layouts.view() is layouts.load() and layouts.view("2.17.57") is layouts.load()
    assert layouts.swab_rules() == json.loads((ROOT / "ptlrpc_conformance" / "spec" / "facts.json").read_text())["swab"]
    assert not any(layouts.reads_otherwise(n) for n in layouts.seed_closure())


def test_a_release_s_padding_takes_today_s_names():
    """2.15.8's ptlrpc_body_v3 has pb_padding1 and pb_padding64_2 where today has pb_projid,
    pb_uid and pb_gid; its obd_connect_data has a 2-byte padding0 at 74 and padding3 at 88."""
    assert ("pb_projid", 36, 4) in _fields("2.15.8", "ptlrpc_body_v3")
    assert [f for f in _fields("2.15.8", "ptlrpc_body_v3") if f[1] >= 144][:2] == [("pb_uid", 144, 4), ("pb_gid", 148, 4)]
    ocd = _fields("2.15.8", "obd_connect_data")
    assert ("ocd_conn_policy", 74, 1) in ocd and ("padding0", 75, 1) in ocd and ("ocd_compr_type", 88, 8) in ocd
    assert layouts.view("2.15.8")["structs"]["obd_connect_data"] is layouts.load()["structs"]["obd_connect_data"]


def test_a_release_s_own_layout_is_kept():
    assert layouts.view("2.12.9")["structs"]["ldlm_inodebits"]["size"] == 16
    assert layouts.view("2.15.8")["structs"]["ldlm_inodebits"]["size"] == 24
    assert layouts.view("2.16.1")["structs"]["ldlm_inodebits"]["size"] == 32
    assert "l_ost_type" not in {f[0] for f in _fields("2.16.1", "lov_ost_data_v1")}
    assert "l_ost_type" in {f[0] for f in _fields("2.17.0", "lov_ost_data_v1")}
    assert layouts.view("2.17.0")["structs"]["mdc_swap_layouts"]["size"] == 8
    # wiretest.c asserts mdc_swap_layouts from 2.17.0; the headers of every release declare it
    assert layouts.view("2.12.9")["structs"]["mdc_swap_layouts"]["size"] == 8
    assert not layouts.absent("mdc_swap_layouts", "2.12.9") and layouts.reads_otherwise("mdc_swap_layouts", "2.16.1")
    assert layouts.absent("lustre_capa", "2.17.0") is None and layouts.absent("no_such_struct", "2.15.8") is None
    assert "has no struct lnet_nid" in layouts.absent("lnet_nid", "2.12.9")      # 2.15 added large NIDs


@pytest.mark.parametrize("release, struct, field, swapped", [
    ("2.12.9", "mdt_body", "mbo_btime", False), ("2.15.8", "mdt_body", "mbo_btime", True),
    ("2.15.8", "obd_connect_data", "ocd_compr_type", False), ("2.16.1", "obd_connect_data", "ocd_compr_type", True),
    ("2.15.8", "ptlrpc_body_v3", "pb_uid", False), ("2.16.1", "ptlrpc_body_v3", "pb_uid", True),
    ("2.16.1", "ptlrpc_body_v3", "pb_projid", False), ("2.17.0", "ptlrpc_body_v3", "pb_projid", True),
    ("2.12.9", "obdo", "o_size", True), ("2.12.9", "obdo", "o_padding_4", False)])
def test_a_release_s_swab_rules(release, struct, field, swapped):
    """Read by hand from each tag's lustre_swab_mdt_body, lustre_swab_connect,
    lustre_swab_ptlrpc_body and lustre_swab_obdo."""
    assert (field not in layouts.swab_rules(release)[struct]["opaque"]) == swapped


def test_only_names_differ_is_no_difference():
    """quota_body's qb_glb_ver was padding up to 2.17.0, at the same bytes and unswapped."""
    assert ("qb_glb_ver", 80, 8) in _fields("2.17.0", "quota_body")
    assert not layouts.reads_otherwise("quota_body", "2.17.0")
    assert not layouts.reads_otherwise("layout_intent", "2.15.8")


@pytest.mark.parametrize("release", ["2.12.9", "2.15.8", "2.16.1", "2.17.0"])
def test_structures_an_older_tree_has_are_not_absent(release):
    """lmv_user_md_v1 is declared in every tree's lustre_user.h (wiretest.c asserts it from
    2.17.57 on); the older wiretest.c checks posix_acl_xattr_entry and _header by their typedef
    names ("Checks for type ..."): all three are there, not reported absent."""
    for name in ("lmv_user_md_v1", "posix_acl_xattr_entry", "posix_acl_xattr_header"):
        assert layouts.absent(name, release) is None, (name, release)
    assert [(f["name"], f["offset"], f["size"]) for f in layouts.view(release)["structs"]["posix_acl_xattr_entry"]["fields"]] \
        == [("e_tag", 0, 2), ("e_perm", 2, 2), ("e_id", 4, 4)]
    assert layouts.view(release)["structs"]["lmv_user_md_v1"]["size"] == 48


def test_a_structure_an_older_tree_lacks_stays_absent():
    assert layouts.absent("lu_pcc_detach", "2.12.9") and not layouts.absent("lu_pcc_detach", "2.15.8")


@pytest.mark.parametrize("release, struct, field, swapped", [
    ("2.12.9", "close_data", "cd_handle", False), ("2.15.8", "close_data", "cd_handle", False),
    ("2.16.1", "close_data", "cd_handle", True), ("2.17.0", "mdt_rec_reint", "rr_padding_1_h", False),
    ("2.12.9", "ldlm_request", "lock_handle", False)])
def test_every_swab_routine_is_compared_release_to_release(release, struct, field, swapped):
    """Every structure with a lustre_swab_* routine of its own is read in each tag's
    pack_generic.c (struct_unswabbed), not only the eight the suite's vectors send swapped:
    close_data's handle is swabbed from 2.16 (LU-13048), mdt_rec_reint's rr_padding_1_h from
    2.17.57; a release that swabs otherwise reads the structure otherwise."""
    rule = layouts.swab_rules(release).get(struct, {})
    assert (field not in rule.get("opaque", ())) == swapped
    assert layouts.reads_otherwise(struct, release) != swapped or struct == "ldlm_request"
    assert len(releases_json(release)["struct_unswabbed"]) > 50


def releases_json(release):
    from ptlrpc_conformance.spec import releases
    return releases.load(release)


def test_a_users_big_endian_vector_follows_its_release_s_swab_rule():
    """A big-endian close_data vector of the user's, written as 2.17.57 swabs it, is not judged
    under 2.15.8 (whose lustre_swab_close_data leaves cd_handle alone) unless it gives bytes for
    that release's profile."""
    from ptlrpc_conformance.harness.data.vectors import Vector
    from ptlrpc_conformance.harness.verdicts import release as release_rules
    v = Vector(id="user.close-data-be", title="t", requirements=("STRUCT-SWAB-1",), cite=("c",), verdict="valid",
               direction="request", data=bytes(96), op="decode_struct", struct="close_data", byte_order="big",
               expect={"fields": {}})
    assert "reads struct close_data otherwise" in release_rules.struct_not_applicable(v, "2.15.8")
    assert release_rules.struct_not_applicable(v, "2.16.1") is None
