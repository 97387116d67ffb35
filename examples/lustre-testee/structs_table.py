#!/usr/bin/env python3
"""Write build/lustre_structs.c: what the Lustre testee's `decode_struct` needs besides
Lustre's own code (capability `structs`, docs/testee-protocol.md section 2.5).

    python3 structs_table.py --info build/lustre_extract.json --out build/lustre_structs.c [--release R]

For every structure that the tree's swab routines handle (extract.py lists them, with how
each is called, in the info file) and for the structures every testee with the capability
must know, it writes:

  * how to report the structure's fields: a small program of JSON steps (open an object,
    read an integer at this offset, ...), from the layout table of the release
    (ptlrpc_conformance/spec/layouts.py view: that release's offsets under today's names,
    as the testee protocol reports them).  This is ptlrpc-conformance's data, not Lustre's:
    the table is the x86_64 reading of the bytes after Lustre's swab routine ran, and the
    testee checks at run time that the tree's sizeof agrees with it before using it;
  * which of the tree's lustre_swab_* routines a big-endian sender's structure goes
    through, and how it is called (with the buffer's length where the routine takes one).

The release is the one the tree's version names, else the nearest earlier release with a
table (a development tree between releases); `--release` chooses.  Standard library and
the ptlrpc_conformance package (run from the repository, or with it installed).
"""
from __future__ import annotations

import argparse
import json
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from ptlrpc_conformance import spec  # noqa: E402
from ptlrpc_conformance.spec import layouts  # noqa: E402

# Where a structure has several routines, the one a receiver of a foreign-endian peer's
# structure runs, first found first: the LOV EA routine that swabs the stripes too
# (lustre_swab_lov_user_md, LU-10100) before the header-only ones older trees have; the
# fiemap routine that swabs the extents; lustre_swab_ost_id rather than lustre_swab_lmm_oi.
PREFER = {
    "lov_mds_md_v1": ("lustre_swab_lov_user_md", "lustre_swab_lov_mds_md"),
    "lov_mds_md_v3": ("lustre_swab_lov_user_md", "lustre_swab_lov_user_md_v3"),
    "lov_comp_md_v1": ("lustre_swab_lov_user_md", "lustre_swab_lov_comp_md_v1"),
    "fiemap": ("lustre_swab_fiemap",),
    "ost_id": ("lustre_swab_ost_id",),
    "mgs_nidtbl_entry": ("lustre_swab_mgs_nidtbl_entry", "lustre_swab_mgs_nidtbl_entry_header"),
    "object_update_result": ("lustre_swab_object_update_result", "lustre_swab_object_update_result_no_len"),
}
# routines that are not a receiver's whole swab of their structure
NOT_WHOLE = {"lustre_swab_lmm_oi", "lustre_swab_lov_user_md_common", "lustre_swab_lov_user_md_objects",
             "lustre_swab_lmv_user_md_objects", "lustre_swab_fiemap_hdr", "lustre_swab_mgs_nidtbl_entry_content"}
INT = {"u8": 1, "u16": 2, "u32": 4, "u64": 8, "s8": 1, "s16": 2, "s32": 4, "s64": 8}


def release_of(version: str) -> tuple[str, str]:
    """(the release whose layout table the testee uses, why)."""
    nums = [int(x) for x in re.findall(r"\d+", version)[:3]]
    known = layouts.known_releases()
    if len(nums) == 3 and ".".join(map(str, nums)) in known:
        return ".".join(map(str, nums)), "the tree's release"
    key = [tuple(int(x) for x in r.split(".")) for r in known]
    earlier = [r for r, k in zip(known, key) if k <= tuple(nums)]
    if not earlier:
        # a tree older than every table (a 2.12 branch commit before 2.12.9): the earliest table;
        # the testee compares each structure's sizeof with it and declines one that differs
        first = min(zip(key, known))[1]
        return first, f"the earliest release with a layout table (the tree is {version}, older)"
    return earlier[-1], f"the nearest earlier release with a layout table (the tree is {version})"


def program(name: str, release: str, base: int, key: str | None, index: dict) -> list[tuple]:
    """JSON steps for structure `name` at `base`: (op, key, offset, size, count, signed, sub)."""
    steps = [("O", key, 0, 0, 0, 0, -1)]
    for f in layouts.view(release)["structs"][name]["fields"]:
        t, at = f["type"], base + f["offset"]
        inner = t[len("struct "):] if t.startswith("struct ") else None
        if f.get("flexible"):
            if base:                               # a flexible array inside a nested structure: no room
                steps.append(("X", f["name"], 0, 0, 0, 0, -1))
            elif inner:
                steps.append(("F", f["name"], at, layouts.view(release)["structs"][inner]["size"], 0, 0,
                              index.setdefault(inner, len(index))))
            elif t == "char":
                steps.append(("G", f["name"], at, f.get("elem_size") or 1, 0, 0, -1))
            else:
                steps.append(("F", f["name"], at, INT[t], 0, int(t.startswith("s")), -1))
        elif inner and "count" in f:
            size = layouts.view(release)["structs"][inner]["size"]
            steps.append(("L", f["name"], 0, 0, 0, 0, -1))
            for i in range(f["count"]):
                steps += program(inner, release, at + i * size, None, index)
            steps.append(("E", None, 0, 0, 0, 0, -1))
        elif inner:
            steps += program(inner, release, at, f["name"], index)
        elif t == "char":
            steps.append(("S", f["name"], at, 1, f.get("count", 1), 0, -1))
        elif "count" in f:
            steps.append(("A", f["name"], at, INT[t], f["count"], int(t.startswith("s")), -1))
        else:
            steps.append(("I", f["name"], at, INT[t], 0, int(t.startswith("s")), -1))
    steps.append(("C", None, 0, 0, 0, 0, -1))
    return steps


def choose(swabbers: dict, table: dict, capsule: dict | None = None) -> dict:
    """{structure: routine} for the structures of `table` the tree's routines swab: a
    structure's own routine, else the one the tree's request formats run on a buffer that
    is the structure (`capsule`, extract.py capsule_swabbers)."""
    by_struct: dict[str, list[str]] = {}
    for routine, how in sorted(swabbers.items()):
        if routine in NOT_WHOLE:
            continue
        try:
            name = layouts.canonical(how["param"].split()[1])
        except KeyError:
            continue
        by_struct.setdefault(name, []).append(routine)
    for name, routines in PREFER.items():
        for r in routines:
            if r in swabbers:
                by_struct[name] = [r]
                break
    for name, routine in (capsule or {}).items():
        try:
            by_struct.setdefault(layouts.canonical(name), [routine])
        except KeyError:
            continue
    out = {}
    for name, routines in by_struct.items():
        if name in table:
            exact = f"lustre_swab_{name}"
            out[name] = exact if exact in routines else routines[0]
    return out


def c_string(s: str | None) -> str:
    return "NULL" if s is None else json.dumps(s)


def render(info: dict, release: str, why: str) -> str:
    table = layouts.view(release)["structs"]
    swabbers = info["adapted"]["swabbers"]
    chosen = choose(swabbers, table, info["adapted"].get("capsule_swabbers"))
    required = {layouts.canonical(n) for n in spec.facts()["structs_required"]}
    names = sorted(set(chosen) | (required & set(table)))
    index = {n: i for i, n in enumerate(names)}
    programs = {}
    todo = list(names)
    while todo:
        n = todo.pop(0)
        if n in programs:
            continue
        before = set(index)
        programs[n] = program(n, release, 0, None, index)
        todo += [m for m in index if m not in before]
    order = sorted(index, key=index.get)
    out = ["/* GENERATED by examples/lustre-testee/structs_table.py: the structures the testee decodes */",
           f'#define LT_LAYOUT_RELEASE "{release}"',
           f"#define LT_LAYOUT_WHY {c_string(why)}", ""]
    for n in order:
        out.append(f"static const struct lt_step lt_steps_{n}[] = {{")
        for op, key, at, size, count, signed, sub in programs[n]:
            out.append(f"\t{{'{op}', {c_string(key)}, {at}, {size}, {count}, {signed}, {sub}}},")
        out.append("};")
    for n in chosen:
        how = swabbers[chosen[n]]
        ctype = how["param"]
        call = f"{chosen[n]}(({ctype} *)p, ({how['length']})n)" if how["length"] else f"{chosen[n]}(({ctype} *)p)"
        if how["returns"] == "int":
            body = f"\treturn {call};"
        else:
            body = f"\t(void)n;\n\t{call};\n\treturn 0;"
        out += [f"static int lt_swab_{n}(void *p, size_t n)", "{", body, "}"]
    out.append("static const struct lt_struct lt_structs[] = {")
    for n in order:
        size = table[n]["size"]
        if n in chosen:
            how = swabbers[chosen[n]]
            kind = "union" if table[n].get("kind") == "union" else "struct"
            out.append(f'\t{{"{n}", {size}, sizeof({kind} {n}), lt_steps_{n}, lt_swab_{n}, '
                       f'"{chosen[n]}", "{how["file"]}", 1}},')
        else:   # a required structure no routine swaps (opaque bytes), or only an element of another's array
            out.append(f'\t{{"{n}", {size}, {size}, lt_steps_{n}, NULL, NULL, NULL, {int(n in required)}}},')
    out += ["};", f"#define LT_NSTRUCTS {len(order)}", ""]
    # aliases: the seed documents' names (docs/testee-protocol.md section 2.5)
    aliases = {a: c for a, c in layouts.load()["aliases"].items() if c in index}
    out.append("static const char *const lt_aliases[][2] = {")
    out += [f'\t{{"{a}", "{c}"}},' for a, c in sorted(aliases.items())]
    out += ["\t{NULL, NULL}", "};", ""]
    # the buffers a message's request format defines (section 2.5, `structs` in MESSAGE)
    out.append("static const struct lt_format lt_formats[] = {")
    for entry in sorted(spec.facts()["message_formats"].values(), key=lambda e: e["opcode"]):
        for side in ("request", "reply"):
            for buf, n in sorted((entry.get(side) or {}).items()):
                if layouts.canonical(n) in index:
                    out.append(f'\t{{{entry["opcode"]}, {int(side == "reply")}, {int(buf)}, "{layouts.canonical(n)}"}},')
    out += ["\t{0, 0, 0, NULL}", "};", ""]
    return "\n".join(out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--info", required=True, help="build/lustre_extract.json (extract.py --info)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--release", help="the release whose layout table to use (default: the tree's)")
    args = ap.parse_args(argv)
    info = json.loads(pathlib.Path(args.info).read_text())
    if args.release:
        release, why = args.release, "chosen with --release"
    else:
        release, why = release_of(info["version"])
    text = render(info, release, why)
    out = pathlib.Path(args.out)
    if not out.is_file() or out.read_text() != text:
        out.write_text(text)
    print(f"structs_table.py: {out}: layout table of Lustre {release} ({why})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
