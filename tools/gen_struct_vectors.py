#!/usr/bin/env python3
"""Generate ptlrpc_conformance/vectors/structs_generated.yaml: one little-endian
decode_struct vector for every structure the `structs` capability certifies (the seed
structures and those nested in them: spec/layouts.py seed_closure) that has no hand-written
vectors (vectors/structs.yaml covers the ones that travel in the suite's messages).

Each vector's bytes are a running counter (byte i = i % 251 + 1; char arrays are letters
ending in a NUL), so every field holds a distinct, non-zero value and a shifted, resized or
swapped field cannot decode to the expected one.  The expected fields are read back by the
suite's own structure walker (spec/structs.py), never by an implementation under test.
The output is committed as data; `--check` exits 1 when it is stale (the project's tests
run it), and `ptlrpc-conformance lint-vectors` checks it like any vector file.
"""
from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import regen  # noqa: E402

from ptlrpc_conformance.spec import layouts, structs as S  # noqa: E402

OUTPUT = ROOT / "ptlrpc_conformance" / "vectors" / "structs_generated.yaml"
HAND_WRITTEN = {"obdo", "ost_body", "ost_id", "lu_fid", "mdt_body", "obd_connect_data", "obd_statfs",
                "obd_uuid", "lustre_handle"}


def pattern(name: str, release: str | None = None) -> bytes:
    """The running-counter bytes of a structure, laid out by the default release's table or
    (tools/gen_struct_releases.py) by another release's."""
    size = S.size(name, release)
    data = bytearray((i % 251) + 1 for i in range(size))
    covered = bytearray(size)
    for leaf in S.leaves(name, release):
        covered[leaf.offset:leaf.offset + leaf.size * (leaf.count or 1)] = b"\1" * (leaf.size * (leaf.count or 1))
    for i in range(size):
        if not covered[i]:
            data[i] = 0          # bytes no field names (alignment holes) are zero, as an encoder writes them
    for leaf in S.leaves(name, release):
        if leaf.kind == "char" and leaf.first_view:
            n = leaf.count
            data[leaf.offset:leaf.offset + n] = bytes(0x61 + (leaf.offset + i) % 26 for i in range(n - 1)) + b"\0"
    return bytes(data)


# Byte-swapped vectors: one for every structure with a swab routine of its own (the
# struct_unswabbed of the default release's facts, read from its pack_generic.c, and the
# unions with a swab rule), beside the hand-written ones.  Where a routine's loop is driven by
# a count or a magic in the structure, the pattern sets them (a dotted field: value), and the
# vector holds that many elements of its flexible array: `elements`.  Sources: the routines
# named in each structure's swab rule (spec/facts.json, spec/releases/2.17.57.json).
BIG_SETUP = {
    "fiemap": ({"fm_mapped_extents": 1, "fm_extent_count": 1}, 1),          # lustre_swab_fiemap
    "lov_mds_md_v1": ({"lmm_magic": 0x0BD10BD0, "lmm_stripe_count": 1, "lmm_oi.oi.oi_seq": 0}, 1),
    "lov_mds_md_v3": ({"lmm_magic": 0x0BD30BD0, "lmm_stripe_count": 1, "lmm_oi.oi.oi_seq": 0}, 1),
    "lov_comp_md_v1": ({"lcm_magic": 0x0BD60BD0, "lcm_entry_count": 0}, 0),  # lustre_swab_lov_user_md
    "object_update_request": ({"ourq_count": 0}, 0),
    "object_update_reply": ({"ourp_count": 0}, 0),
    "object_update": ({"ou_params_count": 0}, 0),
    "lmv_mds_md_v1": ({"lmv_stripe_count": 0}, 0),
    "lustre_cfg": ({"lcfg_bufcount": 0}, 0),
    "ladvise_hdr": ({"lah_count": 0}, 0),
    "hsm_request": ({"hr_itemcount": 0}, 0),
    "ldlm_wire_policy_data": ({}, 0),
    "mgs_nidtbl_entry": ({"mne_nid_type": 0, "mne_nid_count": 0}, 0),   # 2.12.9-2.15.8 LASSERT the type      # a union: lustre_swab_ldlm_policy_data (LU-15527)
    "close_data_resync_done": ({"resync_count": 15}, 0),      # INLINE_RESYNC_ARRAY_SIZE: every id swapped
    "mgs_target_info": ({"mti_flags": 0}, 0),                  # not target_supports_large_nid: nids swapped
    "lustre_cfg": ({"lcfg_version": 0x1CF60001, "lcfg_bufcount": 0}, 0),   # LUSTRE_CFG_VERSION
    "llog_log_hdr": ({"llh_hdr.lrh_type": 0x10645539, "llh_hdr.lrh_len": 8192}, 0),   # LLOG_HDR_MAGIC
    # lustre_swab_llog_id swaps the oi view whatever the sequence: one where every rule agrees
    "llog_logid": ({"lgl_oi.oi.oi_seq": 0}, 0),
    "llogd_body": ({"lgd_logid.lgl_oi.oi.oi_seq": 0}, 0),
    "llogd_conn_body": ({"lgdc_logid.lgl_oi.oi.oi_seq": 0}, 0),
}
# Counts that claim more elements than the buffer holds (docs/vectors.md): a receiver may
# refuse, or swab the elements that are there; it must never read or write past the buffer.
OVERCLAIM = {
    "fiemap": ({"fm_mapped_extents": 1000, "fm_extent_count": 1000}, 1, "lustre_swab_fiemap: fm_mapped_extents"),
    "lov_mds_md_v1": ({"lmm_magic": 0x0BD10BD0, "lmm_stripe_count": 100, "lmm_oi.oi.oi_seq": 0}, 1,
                      "lustre_swab_lov_user_md: lmm_stripe_count (LU-10100, LU-12589)"),
    "lov_mds_md_v3": ({"lmm_magic": 0x0BD30BD0, "lmm_stripe_count": 100, "lmm_oi.oi.oi_seq": 0}, 1,
                      "lustre_swab_lov_user_md: lmm_stripe_count (LU-10100, LU-12589)"),
    "lov_comp_md_v1": ({"lcm_magic": 0x0BD60BD0, "lcm_entry_count": 50}, 0,
                       "lustre_swab_lov_comp_md_v1: lcm_entry_count, lcme_offset"),
    "object_update_request": ({"ourq_count": 50}, 0, "lustre_swab_object_update_request: ourq_count"),
    "object_update_reply": ({"ourp_count": 50}, 0, "lustre_swab_object_update_reply: ourp_count (LU-12811)"),
}


def big_structs() -> list[str]:
    from ptlrpc_conformance.spec import releases
    table = layouts.load()["structs"]
    names = set(releases.load(layouts.DEFAULT_RELEASE).get("struct_unswabbed") or {})
    names |= set(BIG_SETUP) | set(OVERCLAIM)        # the LOV EA, OUT and union routines: named there
    return sorted(n for n in names if n in table and n not in HAND_WRITTEN)


def _set_field(name: str, data: bytearray, path: str, value: int, release: str | None) -> None:
    leaf = next((l for l in S.leaves(name, release) if l.name == path), None)
    if leaf is None:
        raise SystemExit(f"gen_struct_vectors: {name} has no field {path}")
    data[leaf.offset:leaf.offset + leaf.size] = value.to_bytes(leaf.size, "little")


def little_for_big(name: str, setup: tuple, release: str | None = None) -> bytes:
    """The little-endian pattern a big-endian vector swaps: counts and magics set, and the
    flexible array's elements (each the element's own pattern) appended."""
    values, elements = setup[0], setup[1]
    data = bytearray(pattern(name, release))
    for path, value in values.items():
        _set_field(name, data, path, value, release)
    flex = [f for f in S.entry(name, release)["fields"] if f.get("flexible")]
    if elements and flex and flex[0]["type"].startswith("struct "):
        inner = flex[0]["type"][len("struct "):]
        one = bytearray(pattern(inner, release))
        if inner == "lov_ost_data_v1":
            _set_field(inner, one, "l_ost_oi.oi.oi_seq", 0, release)
        data += bytes(one) * elements
    return bytes(data)


def header_fields(name: str, little: bytes) -> dict:
    """The fields of a structure without its flexible array."""
    fields = S.unpack(name, little)
    for f in S.entry(name)["fields"]:
        if f.get("flexible"):
            fields.pop(f["name"], None)
    return fields


def big_endian(name: str, v, release: str | None = None) -> bytes:
    """A big-endian vector's bytes for `release`'s layout: the little-endian pattern as a
    sender swaps it (the default release's swab rules)."""
    import gen_struct_releases
    over = v.id.endswith("-overclaim-be")
    setup = OVERCLAIM[name] if over else BIG_SETUP.get(name, ({}, 0))
    buf = bytearray(little_for_big(name, setup, release))
    gen_struct_releases.swab(name, buf, release, rules=layouts.swab_rules())
    return bytes(buf)


def _gap(name: str, data: bytes, start: int, end: int) -> str:
    named = [l.name for l in S.leaves(name) if not l.first_view
             and l.offset < end and start < l.offset + l.size * (l.count or 1)]
    what = f"bytes of another union view ({', '.join(named[:3])})" if named else "a hole no field names"
    return f'  - "{data[start:end].hex()}"  # {start} {what}'


def lines(name: str, data: bytes) -> list[str]:
    out = []
    covered = 0
    for leaf in sorted((l for l in S.leaves(name) if l.first_view), key=lambda l: l.offset):
        width = leaf.size * (leaf.count or 1)
        if leaf.offset > covered:
            out.append(_gap(name, data, covered, leaf.offset))
        value = S.read_leaf(leaf, data)
        shown = json.dumps(value) if not isinstance(value, list) else f"[{len(value)} values]"
        if leaf.kind == "char":
            shown = json.dumps(value)
        out.append(f'  - "{data[leaf.offset:leaf.offset + width].hex()}"  # {leaf.offset} {leaf.name} = {shown[:60]}')
        covered = max(covered, leaf.offset + width)
    if covered < len(data):
        out.append(_gap(name, data, covered, len(data)))
    return out


def render() -> str:
    table = layouts.load()
    parts = [
        "# Generated by tools/gen_struct_vectors.py; do not edit.  One little-endian vector per",
        "# structure without hand-written vectors: every field distinct and non-zero.",
        "format: ptlrpc-conformance-vectors/1",
        "area: structs",
        "vectors:",
    ]
    for name in layouts.seed_closure():
        if name in HAND_WRITTEN:
            continue
        entry = table["structs"][name]
        data = pattern(name)
        fields = S.unpack(name, data)
        seed = " (named in the seeds)" if entry.get("seed") else " (inside a seed structure)"
        parts += [
            f"- id: structs.generated.{name.replace('_', '-')}",
            f"  title: every field of {name} distinct{seed}",
            "  requirements: [STRUCT-LAYOUT-1]",
            f"  cite: [{json.dumps('spec/layouts.json ' + name + ' (' + str(entry.get('cite', 'wiretest.c')) + ')')}]",
            "  op: decode_struct",
            f"  struct: {name}",
            "  byte_order: little",
            "  verdict: valid",
            "  canonical: true",
            "  bytes:",
            *lines(name, data),
            "  expect:",
            f"    fields: {json.dumps(fields, ensure_ascii=True)}",
        ]
    skipped = []
    for name in big_structs():
        cite = layouts.swab_rules().get(name, {}).get("cite") or "pack_generic.c"
        setup = BIG_SETUP.get(name, ({}, 0))
        little = little_for_big(name, setup)
        try:
            data = big_endian(name, type("V", (), {"id": ""})())
        except SystemExit:          # a union whose foreign-endian form no swab rule defines
            skipped.append(name)
            continue
        note = f"; set: {', '.join(f'{k} = {v:#x}' for k, v in setup[0].items())}" if setup[0] else ""
        parts += [
            f"- id: structs.generated.{name.replace('_', '-')}-be",
            f"  title: {json.dumps(f'every field of {name} distinct, from a big-endian sender{note}')}",
            "  requirements: [STRUCT-SWAB-1]",
            f"  cite: [{json.dumps(cite)}, \"tools/gen_struct_vectors.py BIG_SETUP\"]",
            "  op: decode_struct",
            f"  struct: {name}",
            "  byte_order: big",
            "  verdict: valid",
            "  bytes:",
            *[f'  - "{data[i:i + 32].hex()}"' for i in range(0, len(data), 32)],
            "  expect:",
            f"    fields: {json.dumps(S.unpack(name, little), ensure_ascii=True)}",
        ]
        if name in OVERCLAIM:
            values, elements, why = OVERCLAIM[name]
            data = big_endian(name, type("V", (), {"id": "-overclaim-be"})())
            parts += [
                f"- id: structs.generated.{name.replace('_', '-')}-overclaim-be",
                "  title: " + json.dumps(f"{name} from a big-endian sender whose count claims more than the buffer "
                                         f"holds ({', '.join(f'{k} = {v}' for k, v in values.items() if 'count' in k)}, "
                                         f"{elements} present)"),
                "  requirements: [DEC-ROBUST-1]",
                f"  cite: [{json.dumps(why)}, \"RULES DEC-ROBUST-1\"]",
                "  op: decode_struct",
                f"  struct: {name}",
                "  byte_order: big",
                "  verdict: acceptable",
                "  bytes:",
                *[f'  - "{data[i:i + 32].hex()}"' for i in range(0, len(data), 32)],
                "  expect:      # if accepted: the header as swapped (the elements are STRUCT-SWAB-1's, in -be)",
                f"    fields: {json.dumps(header_fields(name, little_for_big(name, OVERCLAIM[name])), ensure_ascii=True)}",
            ]
    if skipped:
        parts.append(f"# no big-endian vector (a union no swab rule defines): {', '.join(skipped)}")
    return "\n".join(parts) + "\n"


def main(argv=None) -> int:
    return regen.main(argv, tool="gen_struct_vectors", doc=__doc__, output=OUTPUT, root=ROOT,
                      make_text=lambda spec: render())

if __name__ == "__main__":
    sys.exit(main())
