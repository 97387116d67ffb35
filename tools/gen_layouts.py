#!/usr/bin/env python3
"""Generate ptlrpc_conformance/spec/layouts.json: the layout of every wire structure of
Lustre 2.17.57 (every structure wiretest.c asserts, every structure the seed documents name,
and every structure nested inside one of them).  It is the package's only layout table:
spec/layouts.py reads it, and through it spec.layout(), the codecs and the suites.

Inputs (read only):
  spec-sources/wire_facts.yaml      layouts asserted by Lustre's wiretest.c (x86_64)
  spec-sources/seed_mapping.yaml    every seed structure mapped field by field to today's layout
  the HEADER_* tables below         what the Lustre 2.17.57 headers add where wiretest is silent
                                    (anonymous unions, unasserted fields, structures wiretest
                                    has no entry for); each row cites its header line

Current Lustre names are canonical; seed names appear only as aliases.  The output is JSON so
that stdlib-only code can read it.  `python tools/gen_layouts.py --check` exits 1 when the
committed file differs from what the sources give (the project's tests run it).
"""
from __future__ import annotations

import json
import pathlib
import sys

import yaml

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import regen  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_SPEC = regen.SPEC_SOURCES    # the repository's copy of the shared spec (spec-sources/README.md)
OUTPUT = ROOT / "ptlrpc_conformance" / "spec" / "layouts.json"
UAPI = "include/uapi/linux/lustre/"
WIRETEST = "lustre/ptlrpc/wiretest.c"

SCALARS = {"__u8": "u8", "__u16": "u16", "__u32": "u32", "__u64": "u64",
           "__s8": "s8", "__s16": "s16", "__s32": "s32", "__s64": "s64", "obd_time": "s64",
           "__le16": "u16", "__le32": "u32", "__be16": "u16", "__be32": "u32",
           "unsigned char": "u8", "char": "char"}
# Typedefs and macros the wiretest facts use as field types (header lines cited).
TYPEDEFS = {"lnet_nid_t": "__u64",                 # include/uapi/linux/lnet/lnet-idl.h:32
            "netobj_t": "struct netobj_s",         # lustre_idl.h:3997
            "rawobj_t": "struct rawobj_s",         # lustre_idl.h:4002
            "sfid_t": "struct guid_t"}             # lustre_disk.h:486 (#define sfid_t guid_t)
SCALAR_SIZE = {"u8": 1, "s8": 1, "char": 1, "u16": 2, "s16": 2, "u32": 4, "s32": 4, "u64": 8, "s64": 8}

# Structures wiretest.c has no entry for, but which a seed structure nests (header facts).
HEADER_STRUCTS = {
    "lu_extent": {"size": 16, "packed": True, "cite": UAPI + "lustre_user.h:984",
                  "fields": [("e_start", 0, "__u64"), ("e_end", 8, "__u64")]},
    "ost_id_oi": {"size": 16, "cite": UAPI + "lustre_user.h:569 (anonymous struct, member oi of struct ost_id)",
                  "fields": [("oi_id", 0, "__u64"), ("oi_seq", 8, "__u64")]},
    "ldlm_wire_policy_data": {"size": 32, "kind": "union", "cite": UAPI + "lustre_idl.h:2658",
                              "fields": [("l_extent", 0, "struct ldlm_extent"),
                                         ("l_flock", 0, "struct ldlm_flock_wire"),
                                         ("l_inodebits", 0, "struct ldlm_inodebits")]},
    "close_data_resync_done": {"size": 64, "cite": UAPI + "lustre_idl.h:3822",
                               "fields": [("resync_count", 0, "__u32"),
                                          ("resync_ids_inline", 4, "__u32[15]")]},
    # nested in structures only wiretest.c names (not in the seed documents)
    "lnet_nid": {"size": 20, "packed": True, "cite": "include/uapi/linux/lnet/lnet-idl.h:47",
                 "fields": [("nid_size", 0, "__u8"), ("nid_type", 1, "__u8"),
                            ("nid_num", 2, "__be16"), ("nid_addr", 4, "__be32[4]")]},
    "guid_t": {"size": 16, "cite": "linux/uuid.h (Linux uapi: typedef struct { __u8 b[16]; } guid_t)",
               "fields": [("b", 0, "__u8[16]")]},
}

# Seed structures wiretest.c has no entry for: seed_mapping.yaml gives their header (or, for
# a structure gone from Lustre, seed) layout; the header adds the cite, packing and the types
# of header fields the seed does not list.
MISSING_CITES = {"lu_fid": UAPI + "lustre_user.h:362", "hsm_extent": UAPI + "lustre_user.h:2482",
                 "close_data": UAPI + "lustre_idl.h:3827", "llog_cookie": UAPI + "lustre_idl.h:3241"}
MISSING_PACKED = {"hsm_extent", "llog_cookie", "lu_fid"}   # lustre_user.h:378 closes lu_fid packed
HEADER_ONLY_TYPES = {("close_data", "cd_resync"): "struct close_data_resync_done",
                     ("close_data", "cd_mirror_id"): "__u16", ("close_data", "cd_archive_id"): "__u32",
                     ("close_data", "cd_data_version2"): "__u64", ("llog_cookie", "lgc_offset"): "__u64"}

# Fields the headers declare but wiretest.c does not assert (or asserts without a type).
# Lines are those of the v2_17_57 tag; docs/divergences.md says why each is the header's.
HEADER_FIELDS = {
    "obd_uuid": [("uuid", 0, "char[40]")],                                   # lustre_user.h:1459 (UUID_MAX)
    "ost_id": [("oi_fid", 0, "struct lu_fid")],                              # lustre_user.h:573 (union)
    "lfsck_request": [("lr_status", 16, "__u32"),                            # lustre_idl.h:3336 (union)
                      ("lr_flags2", 28, "__u32")],                           # lustre_idl.h:3342
    "fiemap_extent": [("fe_reserved64", 24, "__u64[2]")],                    # linux/fiemap.h (Linux uapi)
    "llog_log_hdr": [("llh_reserved", 84, "__u32[1]"),                       # 96/4 - 23, lustre_idl.h:3203
                     ("llh_bitmap", 88, "__u32[2024]"),                      # (8192 - 96)/4, lustre_idl.h:3213
                     ("llh_tail", 8184, "struct llog_rec_tail")],            # lustre_idl.h:3214
    "hsm_user_state": [("hus_extended_info", 32, "char[]")],                 # lustre_user.h:2501
    "lquota_id": [("qid_fid", 0, "struct lu_fid"), ("qid_uid", 0, "__u64"),  # lustre_idl.h:1590 (union)
                  ("qid_gid", 0, "__u64"), ("qid_projid", 0, "__u64")],
    "lov_ost_data_v1": [("l_ost_type", 16, "__u32")],                        # lustre_idl.h:1245 (union)
    "mgs_config_res": [("mcr_nm_cur_pass", 8, "__u64")],                     # lustre_idl.h:2831 (union)
    "obd_quotactl": [("qc_poolname", 112, "char[]")],                         # lustre_idl.h:1605 (flexible)
    # structures only wiretest.c names (not the seeds)
    "changelog_rec": [("cr_markerflags", 32, "__u32")],                      # lustre_user.h:2109 (union)
    "llog_gen_rec": [("padding1", 32, "__u64"), ("padding2", 40, "__u64"),   # lustre_idl.h:3148
                     ("padding3", 48, "__u64")],
    "lu_idxpage": [("lip_entries", 16, "char[]")],                           # lustre_idl.h:3470
    "lu_page": [("lp_dir", 0, "struct lu_dirpage"), ("lp_idx", 0, "struct lu_idxpage"),  # lustre_idl.h:3476
                ("lp_array", 0, "char[4096]")],                              # LU_PAGE_SIZE
    "mdt_rec_create": [("cr_archive_id", 88, "__u32")],                      # lustre_idl.h:2139 (union)
    "nodemap_rec": [("ncr", 0, "struct nodemap_cluster_rec"), ("nrr", 0, "struct nodemap_range_rec"),
                    ("nrr2", 0, "struct nodemap_range2_rec"), ("nir", 0, "struct nodemap_id_rec"),
                    ("ngr", 0, "struct nodemap_global_rec"),                 # lustre_disk.h:383
                    ("ncrr", 0, "struct nodemap_cluster_roles_rec"), ("nor", 0, "struct nodemap_offset_rec"),
                    ("nfhr", 0, "struct nodemap_fileset_header_rec"), ("nfr", 0, "struct nodemap_fileset_rec"),
                    ("nucr", 0, "struct nodemap_user_capabilities_rec")],
    "update_records": [("ur_ops", 32, "struct update_ops")],                 # lustre_idl.h:3872
}
HEADER_TYPES = {("ost_id", "oi"): "struct ost_id_oi",  # wiretest asserts oi's size, not its type
                # wiretest asserts these without a type (a Linux uapi structure, a union member
                # of anonymous type, a DECLARE_FLEX_ARRAY); the header gives it
                ("posix_acl_xattr_entry", "e_tag"): "__le16",               # linux/posix_acl_xattr.h
                ("posix_acl_xattr_entry", "e_perm"): "__le16",
                ("posix_acl_xattr_entry", "e_id"): "__le32",
                ("posix_acl_xattr_header", "a_version"): "__le32",
                ("mgs_nidtbl_entry", "u.nids"): "lnet_nid_t[]",              # lustre_idl.h:2800
                ("mgs_nidtbl_entry", "u.nidlist"): "struct lnet_nid[]",      # lustre_idl.h:2801
                ("getinfo_fid2path", "gf_path"): "char[]",
                ("getinfo_fid2path", "gf_u.gf_path"): "char[]",
                ("update_params", "up_params"): "struct object_update_param[]",  # lustre_idl.h:3846
                ("update_ops", "uops_op"): "struct update_op[]"}                 # lustre_idl.h:3842

# Type names the seeds use for current structures, beyond the seed_mapping entry names.
EXTRA_ALIASES = {"lov_mds_md": "lov_mds_md_v1",   # #define, lustre_idl.h:1245; seed 004 MIN_MD_SIZE
                 "ostid": "ost_id_oi"}            # seed 000 tags ost_id's anonymous struct "ostid"
# Seed field names that are macros over a current field (lustre_fiemap.h:36).
MACRO_FIELD_ALIASES = {"fiemap_extent": {"fe_device": ["fe_reserved"]}}

NOTE = ("Generated; do not edit. The package's one layout table (Lustre 2.17.57): every structure wiretest.c "
        "asserts, every structure the seeds name and every structure nested in one. "
        "Offsets and sizes in bytes, x86_64. Current Lustre names are canonical. "
        "TYPE: u8..u64/s8..s64 for integers (enums: unsigned integer of their size; __s64/obd_time signed), "
        "'char' for char arrays, 'struct NAME' for any aggregate, union types included (their entry has "
        "kind 'union'). Arrays: type is the element type, count = elements, size = count * element size; "
        "flexible arrays: flexible true, count 0, size 0 (elem_size is given only where an element is itself "
        "an array, e.g. mti_nidlist). Union members share an offset and a 'union' group name: 'anon@<offset>' "
        "for an anonymous union inside a structure, the union's own name for a union type's members. The anonymous "
        "struct ost_id.oi is modelled as struct ost_id_oi. packed: the header declares the structure packed. "
        "condition: the #ifdef of wiretest.c around a structure, or around a field when it differs from its "
        "structure's. "
        "unasserted_ranges: bytes wiretest.c asserts nothing about (fields listed in header_fields come from "
        "the header, not wiretest). seed: the structure is a seed_mapping.yaml entry (seed 004's list of 58 "
        "= 56 structures + 2 size formulas, plus lustre_msg_v2/lustre_msg and mgs_config_body from the C "
        "blocks of seeds 000/003). legacy: gone from current Lustre, seed layout kept. field_aliases: seed "
        "field name -> current fields covering its bytes; a dotted name is a member of a nested struct.")


def ctype(text: str, struct: str, size_hint: int | None = None) -> tuple[str, bool]:
    """C type text -> (TYPE, is_array)."""
    base, is_array = text.split("[", 1)[0].strip(), "[" in text
    base = TYPEDEFS.get(base, base)
    if base.endswith("*"):
        return "u64", is_array          # a pointer (rawobj_s.data): 8 bytes on LP64
    if base.startswith(("struct ", "union ")):
        return "struct " + base.split()[1], is_array
    if base.startswith("enum "):
        return f"u{8 * size_hint}", is_array
    if base not in SCALARS:
        raise SystemExit(f"gen_layouts: {struct}: cannot type {text!r}")
    return SCALARS[base], is_array


def field(name, offset, size, type_, count=None, flexible=False, elem_size=None) -> dict:
    row = {"name": name, "offset": offset, "size": 0 if flexible else size, "type": type_}
    if flexible:
        row["flexible"], row["count"] = True, 0
    elif count is not None:
        row["count"] = count
    if elem_size is not None:
        row["elem_size"] = elem_size
    return row


def header_field(struct: str, name: str, offset: int, text: str, sizes: dict) -> dict:
    t, is_array = ctype(text, struct)
    elem = sizes[t[7:]] if t.startswith("struct ") else SCALAR_SIZE[t]
    if not is_array:
        return field(name, offset, elem, t)
    dim = text.split("[", 1)[1].rstrip("]")
    if dim in ("", "0"):
        return field(name, offset, 0, t, flexible=True)
    return field(name, offset, int(dim) * elem, t, count=int(dim))


def wire_field(struct: str, f: dict, facts_condition: str | None = None) -> dict:
    text = HEADER_TYPES.get((struct, f["name"]), f.get("type"))
    if text is None:
        raise SystemExit(f"gen_layouts: {struct}.{f['name']} has no type in wire_facts and none in HEADER_TYPES")
    t, is_array = ctype(text, struct, f.get("elem_size", f["size"]))
    elem = f.get("elem_size", SCALAR_SIZE.get(t, f["size"]) if is_array else f["size"])
    extra = elem if is_array and SCALAR_SIZE.get(t, elem) != elem else None   # char[][64]: element is char[64]
    count = (f.get("count", f["size"] // elem) if is_array else None)       # u8[sizeof(struct lu_fid)]: no count given
    flexible = bool(f.get("flexible")) or count == 0                         # lcd_padding[LR_CLIENT_SIZE - 128]
    row = field(f["name"], f["offset"], f["size"], t, count=count, flexible=flexible, elem_size=extra)
    if f.get("condition") and f["condition"] != facts_condition:
        row["condition"] = f["condition"]      # a field that only some builds have
    return row


def mark_unions(entry: dict, name: str) -> None:
    """Fields sharing a start offset are union members; a union type's members all are."""
    solid = [f for f in entry["fields"] if not f.get("flexible")]
    for f in solid:
        if entry.get("kind") == "union":
            f["union"] = name
        elif sum(g["offset"] == f["offset"] for g in solid) > 1:
            f["union"] = f"anon@{f['offset']}"


def build(spec_dir: pathlib.Path) -> dict:
    wire = regen.load_wire_facts(spec_dir)
    mapping = regen.load_seed_mapping(spec_dir)
    facts, seeds = wire["structs"], mapping["structs"]
    seed_consts = mapping["meta"]["seed_constants_used"]
    formulas = {k for k, v in seeds.items() if v["current"] == "missing" and not v.get("fields")}
    current_of = {k: (k if v["current"] == "missing" else v["current"])
                  for k, v in seeds.items() if k not in formulas}
    seed_names = {cur: sorted(s for s, c in current_of.items() if c == cur and s != cur)
                  for cur in current_of.values()}

    # Sizes of every aggregate we may meet, for typing header rows.
    sizes = {n: e["size"] for n, e in facts.items()}
    sizes.update({n: e["size"] for n, e in HEADER_STRUCTS.items()})
    for n, e in seeds.items():
        if n in current_of and e["current"] == "missing":
            sizes[n] = e["current_header_size_gcc"] if isinstance(e["current_header_size_gcc"], int) else e["seed_size"]

    def make(name: str) -> dict:
        if name in HEADER_STRUCTS:
            h = HEADER_STRUCTS[name]
            entry = {"size": h["size"], "cite": h["cite"],
                     "fields": [header_field(name, *row, sizes) for row in h["fields"]],
                     "header_fields": [row[0] for row in h["fields"]]}
            if h.get("kind"):
                entry["kind"] = h["kind"]
            if h.get("packed"):
                entry["packed"] = True
            return entry
        if name in facts:
            w = facts[name]
            cite = f"{w['header']}; " if w.get("header") else ""
            lines = w["source_lines"]
            entry = {"size": w["size"], "cite": f"{cite}{WIRETEST}:{lines[0]}-{lines[1]}",
                     "fields": [wire_field(name, f, w.get("condition")) for f in w["fields"]]}
            extra = [header_field(name, *row, sizes) for row in HEADER_FIELDS.get(name, [])]
            if extra:
                entry["fields"] += extra
                entry["header_fields"] = [f["name"] for f in extra]
            for key in ("kind", "packed", "condition", "unasserted_ranges"):
                if w.get(key) and not (key == "kind" and w[key] == "struct"):
                    entry[key] = w[key]
            return entry
        m = seeds[name]                      # wiretest has no entry: the mapping gives the layout
        legacy = not isinstance(m["current_header_size_gcc"], int)
        col = "seed" if legacy else "header"
        rows = [(f["seed"], f[f"{col}_offset"], f["seed_type"]) for f in m["fields"]]
        rows += [(f["current"], f["offset"], HEADER_ONLY_TYPES[(name, f["current"])])
                 for f in m.get("current_only_in_header", [])]
        fields = []
        for (fname, off, text), src in zip(rows, m["fields"] + m.get("current_only_in_header", [])):
            for const, value in seed_consts.items():          # e.g. lc_hmac[CAPA_HMAC_MAX_LEN]
                text = text.replace(f"[{const}]", f"[{value}]")
            row = header_field(name, fname, off, text, sizes)
            want = src.get(f"{col}_size", src.get("size"))
            if row["size"] != want:
                raise SystemExit(f"gen_layouts: {name}.{fname}: size {row['size']} != mapping {want}")
            fields.append(row)
        entry = {"size": sizes[name], "fields": fields}
        if legacy:
            entry["legacy"] = True
            entry["cite"] = "seeds: " + "; ".join(m["seed_sources"]) + " (not in current Lustre)"
        else:
            entry["cite"] = MISSING_CITES[name]
            entry["header_fields"] = [f["name"] for f in fields]
        if name in MISSING_PACKED:
            entry["packed"] = True
        return entry

    structs, todo = {}, sorted(set(current_of.values()) | set(facts))
    while todo:
        name = todo.pop()
        if name in structs:
            continue
        entry = make(name)
        entry["fields"].sort(key=lambda f: f["offset"])          # stable: wiretest order first
        mark_unions(entry, name)
        entry["seed"] = name in current_of.values()
        entry.setdefault("legacy", False)
        if seed_names.get(name) and name not in current_of:
            entry["seed_name"] = seed_names[name][0]
        structs[name] = entry
        todo += [f["type"][7:] for f in entry["fields"] if f["type"].startswith("struct ")]

    aliases = {s: c for s, c in current_of.items() if s != c}
    for m in seeds.values():                  # seed type names of current structures
        for f in m.get("fields", []):
            ct = f.get("current_type") or ""
            if ct.startswith(("struct ", "union ")) and f["seed_type"].split("[")[0] not in SCALARS:
                old, new = (t.split("[")[0].split()[-1] for t in (f["seed_type"], ct))
                if old != new:
                    aliases[old] = new
    aliases.update(EXTRA_ALIASES)

    field_aliases = build_field_aliases(seeds, current_of, structs)
    # a later Lustre's name for a field of the tag (an implementation that follows it names
    # the same bytes so): an alias too
    for (struct, later), current in regen.TAG_RENAMED_FIELDS.items():
        field_aliases.setdefault(struct, {})[later] = [current]
    size_formulas = build_formulas(seeds, facts)
    check(structs, aliases, field_aliases, seeds)
    return {
        "meta": {
            "generated_by": "tools/gen_layouts.py",
            "sources": ["spec-sources/wire_facts.yaml", "spec-sources/seed_mapping.yaml",
                        "Lustre 2.17.57 headers (tools/gen_layouts.py HEADER_* tables; cited per struct)"],
            "lustre_version": "2.17.57",
            "abi": wire["meta"]["abi"],
            "structs": len(structs),
            "seed_structs": sum(1 for e in structs.values() if e["seed"]),
            "seed_entries": dict(sorted(current_of.items())),
            "seed_formulas": sorted(formulas),
            "note": NOTE,
        },
        "structs": structs,
        "aliases": dict(sorted(aliases.items())),
        "field_aliases": field_aliases,
        "size_formulas": size_formulas,
    }


def member_at(structs: dict, struct: str, offset: int, size: int) -> str | None:
    """Dotted name of the (nested) field that spans exactly [offset, offset+size)."""
    for f in structs[struct]["fields"]:
        if f["offset"] == offset and f["size"] == size:
            return f["name"]
        if f["type"].startswith("struct ") and "count" not in f and f["offset"] <= offset < f["offset"] + f["size"]:
            inner = member_at(structs, f["type"][7:], offset - f["offset"], size)
            if inner:
                return f"{f['name']}.{inner}"
    return None


def build_field_aliases(seeds: dict, current_of: dict, structs: dict) -> dict:
    out: dict = {}
    for seed, m in seeds.items():
        cur = current_of.get(seed)
        if cur is None or m["current"] == "missing":
            continue
        offsets = {f["name"]: f["offset"] for f in structs[cur]["fields"]}
        for f in m["fields"]:
            status, names = f["status"], None
            if status in ("renamed", "replaced"):
                names = f["current"] if isinstance(f["current"], list) else [f["current"]]
            elif status == "changed":
                names = f.get("current_fields_in_seed_range") or [f["current"]]
            elif status == "now_inside_current_field":
                names = [member_at(structs, cur, f["seed_offset"], f["seed_size"])]
            elif status == "seed_only" and f.get("bytes_now_named"):
                names = f["bytes_now_named"]
            if not names or names == [f["seed"]]:
                continue
            names = sorted(names, key=lambda n: (offsets.get(n.split(".")[0], 0), n))
            out.setdefault(cur, {})[f["seed"]] = names
    for cur, rows in MACRO_FIELD_ALIASES.items():
        out.setdefault(cur, {}).update(rows)
    return {k: dict(sorted(v.items())) for k, v in sorted(out.items())}


def build_formulas(seeds: dict, facts: dict) -> dict:
    acl, mdt = seeds["acl"]["current_related"], seeds["mdt_md"]["current_related"]
    hdr, ent = facts["posix_acl_xattr_header"], facts["posix_acl_xattr_entry"]
    n = acl["LUSTRE_POSIX_ACL_MAX_ENTRIES"]
    acl_value = hdr["size"] + n * ent["size"]
    md_value = facts["lov_mds_md_v1"]["size"] + facts["lov_ost_data_v1"]["size"]
    if acl_value != acl["max_size_old_bytes"] or md_value != mdt["value"]:
        raise SystemExit("gen_layouts: size formulas disagree with seed_mapping.yaml")
    return {
        "acl": {"formula": "sizeof(struct posix_acl_xattr_header) + LUSTRE_POSIX_ACL_MAX_ENTRIES"
                           " * sizeof(struct posix_acl_xattr_entry)",
                "value": acl_value,
                "terms": {"posix_acl_xattr_header": hdr["size"], "posix_acl_xattr_entry": ent["size"],
                          "LUSTRE_POSIX_ACL_MAX_ENTRIES": n},
                "seed_macro": "LUSTRE_POSIX_ACL_MAX_SIZE", "current_macro": "LUSTRE_POSIX_ACL_MAX_SIZE_OLD",
                "condition": acl["wiretest_condition"],
                "cite": f"lustre/include/lustre_acl.h:23; {WIRETEST}:{ent['source_lines'][0]}-"
                        f"{hdr['source_lines'][1]} (posix_acl_xattr_entry/_header sizes)"},
        "mdt_md": {"formula": "sizeof(struct lov_mds_md_v1) + 1 * sizeof(struct lov_ost_data_v1)",
                   "value": md_value,
                   "terms": {"lov_mds_md_v1": facts["lov_mds_md_v1"]["size"],
                             "lov_ost_data_v1": facts["lov_ost_data_v1"]["size"]},
                   "seed_macro": "MIN_MD_SIZE", "current_macro": "MIN_MD_SIZE",
                   "cite": UAPI + "lustre_idl.h:1261 (MIN_MD_SIZE)"},
    }


def elem_size(structs: dict, f: dict) -> int:
    if "elem_size" in f:
        return f["elem_size"]
    t = f["type"]
    return structs[t[7:]]["size"] if t.startswith("struct ") else SCALAR_SIZE[t]


def check(structs: dict, aliases: dict, field_aliases: dict, seeds: dict) -> None:
    """Refuse to write a table that contradicts itself or the mapping."""
    def fail(msg):
        raise SystemExit(f"gen_layouts: {msg}")
    for name, e in structs.items():
        for f in e["fields"]:
            t = f["type"]
            if t.startswith("struct ") and t[7:] not in structs:
                fail(f"{name}.{f['name']}: {t} has no entry")
            if f["offset"] + f["size"] > e["size"]:
                fail(f"{name}.{f['name']} ends past the structure")
            if f["size"] != f.get("count", 1) * elem_size(structs, f) and not f.get("flexible"):
                fail(f"{name}.{f['name']}: size {f['size']} is not count * element size")
    for a, c in aliases.items():
        if c not in structs:
            fail(f"alias {a} -> {c}: no such structure")
    for s, rows in field_aliases.items():
        for seed, names in rows.items():
            for n in names:
                if None in names or not resolve(structs, s, n):
                    fail(f"field alias {s}.{seed} -> {n} does not resolve")
    for seed, m in seeds.items():             # header facts must agree with the mapping's
        cur = m.get("current")
        for f in m.get("fields", []):
            if f.get("status") != "same_name_in_header_not_asserted_by_wiretest":
                continue
            if f["current"] in MACRO_FIELD_ALIASES.get(cur, {}):
                continue
            got = resolve(structs, cur, f["current"])
            if not got or got[0] != f["offset"] or (f["size"] is not None and got[1] != f["size"]):
                fail(f"{cur}.{f['current']}: header row {got} disagrees with seed_mapping.yaml")


def resolve(structs: dict, struct: str, dotted: str) -> tuple[int, int] | None:
    """(offset, size) of a possibly dotted field name, or None."""
    head, _, rest = dotted.partition(".")
    for f in structs[struct]["fields"]:
        if f["name"] == head:
            if not rest:
                return f["offset"], f["size"]
            inner = resolve(structs, f["type"][7:], rest) if f["type"].startswith("struct ") else None
            return (f["offset"] + inner[0], inner[1]) if inner else None
    return None


def render(table: dict) -> str:
    return json.dumps(table, indent=1, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    return regen.main(argv, tool="gen_layouts", doc=__doc__, output=OUTPUT, root=ROOT, spec_default=DEFAULT_SPEC,
                      spec_files=("wire_facts.yaml", "seed_mapping.yaml"), make_text=lambda spec: render(build(spec)))

if __name__ == "__main__":
    sys.exit(main())
