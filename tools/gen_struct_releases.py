#!/usr/bin/env python3
"""Generate ptlrpc_conformance/vectors/structs_releases.yaml: the structure vectors as each
older Lustre release's code reads them, written out as release-profile overrides (a vector's
bytes and expected fields under `lustre-<release>`), so that every structure case applies
under every release that has the structure.

For every structure vector (vectors/structs*.yaml, op decode_struct) and every release whose
code reads its structure otherwise than the default release's (spec/layouts.py
reads_otherwise: another size, offset or set of fields in the release's layout, or other
byte-swapping; both from spec/releases/<release>.json, generated from that release's
wiretest.c, headers and pack_generic.c), the override gives:

- for a generated vector (structs.generated.*): the running-counter bytes of the release's
  layout and every field they decode to (tools/gen_struct_vectors.py's pattern, laid out by
  the release's table in today's names, spec/layouts.py view);
- for a hand-written vector: its own bytes (the structures the suite writes by hand have one
  size in every release) and its expectation with each listed field as the release reads it:
  a field the release lacks is left out; a field the release swaps otherwise (padding then,
  left as sent) is read from the bytes as that release's swab rules leave them
  (spec/layouts.py swab_rules).  Every other listed field is checked to read, under the
  default release, as the hand-written expectation says.

A structure a release lacks gets no override: its cases are not applicable under that
release.  Field names are today's (docs/testee-protocol.md section 3.1).  Values are computed
here by the suite's own structure walker (spec/structs.py), never by an
implementation under test.  `--check` exits 1 when the committed file is stale (the
project's tests run it).
"""
from __future__ import annotations

import json
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import regen  # noqa: E402
import gen_struct_vectors  # noqa: E402

from ptlrpc_conformance.harness.data import registry, vectors as V  # noqa: E402
from ptlrpc_conformance.spec import structs as S  # noqa: E402
from ptlrpc_conformance.spec import layouts  # noqa: E402

OUTPUT = ROOT / "ptlrpc_conformance" / "vectors" / "structs_releases.yaml"
SOURCES = ("structs.yaml", "structs_generated.yaml")


def swab(name: str, buf: bytearray, release: str | None, base: int = 0, end: int | None = None,
         rules: dict | None = None) -> None:
    """Swap `buf` in place as a receiver of `release` swaps a structure from a sender of the
    other byte order: every integer at its own size, except the fields the swab rules leave
    alone; a rule's union member and conditions decide the rest.  `rules`: another release's
    rules over this release's layout (a sender's bytes: tools/gen_struct_vectors.py)."""
    end = len(buf) if end is None else end
    rules = layouts.swab_rules(release) if rules is None else rules
    rule = rules.get(name, {})
    opaque, when = set(rule.get("opaque", ())), rule.get("when", {})
    entry = S.entry(name, release)
    chosen = None
    if "union_by" in rule:
        sel = rule["union_by"]["selector"]
        raw = int.from_bytes(buf[base + sel["offset"]:base + sel["offset"] + sel["size"]], "little")
        chosen = rule["union_by"]["then"] if raw in rule["union_by"]["values"] else rule["union_by"]["else"]
    elif "union_as" in rule:
        chosen = rule["union_as"]
    elif any(f.get("union") for f in entry["fields"]):
        raise SystemExit(f"gen_struct_releases: {name} has a union and no swab rule for it")

    def flag(field_name: str) -> int:
        f = next(g for g in entry["fields"] if g["name"] == field_name)
        return int.from_bytes(buf[base + f["offset"]:base + f["offset"] + f["size"]], "little")
    for f in entry["fields"]:
        if f["name"] in opaque or (f.get("union") and f["name"] != chosen):
            continue
        if f["name"] in when and not all(flag(g) & bit for g, bit in when[f["name"]]):
            continue
        t = f["type"]
        inner = t[len("struct "):] if t.startswith("struct ") else None
        size = S.size(inner, release) if inner else (1 if t == "char" else S.INT[t])
        at = base + f["offset"]
        count = max(0, (end - at) // size) if f.get("flexible") else \
            min(f.get("count", 1), rule.get("swab_first", {}).get(f["name"], f.get("count", 1)))
        for i in range(count):
            p = at + i * size
            if inner:
                swab(inner, buf, release, p, min(end, p + size), rules)
            elif t != "char":
                buf[p:p + size] = buf[p:p + size][::-1]


def reading(name: str, data: bytes, order: str, release: str | None) -> dict:
    """Every field of `data` as a receiver of `release` reports it."""
    buf = bytearray(data)
    if order == "big":
        swab(name, buf, release)
    return S.unpack(name, bytes(buf), release)


def _get(tree, path):
    for seg in path:
        if seg.startswith("["):
            i = int(seg[1:-1])
            if not isinstance(tree, list) or i >= len(tree):
                return None
            tree = tree[i]
        elif isinstance(tree, dict) and seg in tree:
            tree = tree[seg]
        else:
            return None
    return tree


def _set(tree, path, value) -> None:
    for seg in path[:-1]:
        tree = tree[int(seg[1:-1])] if seg.startswith("[") else tree[seg]
    tree[path[-1]] = value


def _drop(tree, path) -> None:
    for seg in path[:-1]:
        tree = tree[int(seg[1:-1])] if seg.startswith("[") else tree.get(seg)
        if tree is None:
            return
    if isinstance(tree, dict):
        tree.pop(path[-1], None)


def _prune(tree):
    """Objects left empty after their fields were dropped are dropped too."""
    if isinstance(tree, dict):
        for k in list(tree):
            _prune(tree[k])
            if tree[k] == {}:
                del tree[k]
    elif isinstance(tree, list):
        for item in tree:
            _prune(item)


def hand_written(v, release: str) -> dict:
    """A hand-written vector as `release` reads it: its bytes, and its expected fields."""
    name = layouts.canonical(v.struct)
    if S.size(name, release) != S.size(name):
        raise SystemExit(f"gen_struct_releases: {v.id}: {name} has another size in Lustre {release}; "
                         "write a vector for it")
    out = {"bytes": v.data}
    if v.verdict != "valid":
        return out
    expect = json.loads(json.dumps(v.expect))
    fields = expect.get("fields") or {}
    default = reading(name, v.data, v.byte_order, None)
    mine = reading(name, v.data, v.byte_order, release)
    theirs = {leaf.path: leaf for leaf in S.leaves(name, release)}
    for leaf in S.leaves(name):
        listed = _get(fields, leaf.path)
        if listed is None:
            continue
        if _get(default, leaf.path) != listed:
            raise SystemExit(f"gen_struct_releases: {v.id}: {leaf.name} = {listed!r} in the vector, "
                             f"{_get(default, leaf.path)!r} by the default release's rules")
        other = theirs.get(leaf.path)
        if other is None or (other.offset, other.size, other.kind, other.count) != \
                (leaf.offset, leaf.size, leaf.kind, leaf.count):
            _drop(fields, leaf.path)
        elif _get(mine, leaf.path) != listed:
            _set(fields, leaf.path, _get(mine, leaf.path))
    _prune(fields)
    out["expect"] = expect
    return out


def generated(v, release: str) -> dict:
    """A generated vector as `release` reads it: the pattern laid out by the release's table
    (a big-endian one: as a sender writes it, read with the release's swab rules)."""
    name = layouts.canonical(v.struct)
    if v.byte_order == "big":
        data = gen_struct_vectors.big_endian(name, v, release)
        fields = reading(name, data, "big", release)
        if v.verdict == "acceptable":           # a count that overclaims: the header only
            for f in S.entry(name, release)["fields"]:
                if f.get("flexible"):
                    fields.pop(f["name"], None)
        return {"bytes": data, "expect": {"fields": fields}}
    data = gen_struct_vectors.pattern(name, release)
    return {"bytes": data, "expect": {"fields": S.unpack(name, data, release)}}


def _hex_lines(data: bytes, indent: str) -> list[str]:
    return [f'{indent}- "{data[i:i + 32].hex()}"' for i in range(0, len(data), 32)] or [f'{indent}- ""']


def render() -> str:
    default = registry.profile(None).release
    releases = [r for r in registry.releases() if r != default]
    parts = [
        "# Generated by tools/gen_struct_releases.py; do not edit.  The structure vectors as each",
        "# older release's code reads them (its layout and byte swapping, today's field names):",
        "# for every vector whose structure that release reads otherwise, its bytes and expected",
        "# fields under the release's profile.  Facts: spec/releases/<release>.json.",
        "format: ptlrpc-conformance-vectors/1",
        "area: structs",
        "release_overrides:",
    ]
    root = pathlib.Path(V.__file__).resolve().parent.parent.parent / "vectors"
    vectors = []
    for source in SOURCES:
        vectors += [v for v in V.load_file(root / source) if v.op == "decode_struct"]
    for v in vectors:
        name = layouts.canonical(v.struct)
        rows = []
        for release in releases:
            if not layouts.reads_otherwise(name, release):
                continue
            o = generated(v, release) if v.id.startswith("structs.generated.") else hand_written(v, release)
            rows += [f"    lustre-{release}:",
                     f"      note: {json.dumps(_note(name, release))}",
                     "      bytes:", *_hex_lines(o["bytes"], "      ")]
            if "expect" in o:
                rows.append(f"      expect: {json.dumps(o['expect'], ensure_ascii=True)}")
        if rows:
            parts += [f"  {v.id}:", *rows]
    return "\n".join(parts) + "\n"


def _note(name: str, release: str) -> str:
    mine, base = S.entry(name, release), S.entry(name)
    what = []
    if mine is not base:
        what.append(f"its layout of {name} ({mine['size']} bytes; spec/releases/{release}.json structs)")
    if layouts.swab_rules(release).get(name) != layouts.swab_rules().get(name):
        what.append(f"its swabbing of {name} ({layouts.swab_rules(release)[name].get('cite', '')})")
    if not what:
        what.append("its layout or swabbing of a structure nested in it")
    return f"Lustre {release}: " + "; ".join(what)


def main(argv=None) -> int:
    return regen.main(argv, tool="gen_struct_releases", doc=__doc__, output=OUTPUT, root=ROOT,
                      make_text=lambda spec: render())


if __name__ == "__main__":
    sys.exit(main())
