"""Shared by the generators in tools/: write a generated file, or (--check) say whether
the committed one is what the sources give.

The generators read the spec sources kept in the repository (spec-sources/, a copy of the
project's shared spec; spec-sources/README.md says where the files come from).  Run as a
script, this module refreshes that copy:

    python3 tools/regen.py --from-shared ../shared/spec           # copy the files in
    python3 tools/regen.py --from-shared ../shared/spec --check   # exit 1 when the copy differs

then regenerate the data (tools/gen_facts.py, tools/gen_layouts.py, ...) and commit both.
"""
from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
SPEC_SOURCES = ROOT / "spec-sources"
# The shared spec's files the generators and the project's tests read.
SPEC_FILES = ("wire_facts.yaml", "flags.yaml", "seed_mapping.yaml")


# What the copy of wire_facts.yaml says that the v2_17_57 tag does not: it was extracted from a
# tree taken after the tag, which has LU-17238 (commit 9ab3dd8d31): mdt_body's mbo_padding_9
# renamed mbo_xattr_absent, MBO_XA_SEC_SELINUX/SMACK asserted by wiretest.c.  The tag's
# lustre_idl.h still declares mbo_padding_9 and lustre_swab_mdt_body leaves it unswapped
# (tests/test_release_facts.py compares with the tag's own extraction).  Applied by
# load_wire_facts and load_seed_mapping, so every generator reads the tag's facts.
TAG_RENAMED_FIELDS = {("mdt_body", "mbo_xattr_absent"): "mbo_padding_9"}
TAG_ABSENT_CONSTANTS = ("MBO_XA_SEC_SELINUX", "MBO_XA_SEC_SMACK")


def load_wire_facts(spec_dir: pathlib.Path) -> dict:
    """wire_facts.yaml with the corrections to the tag above applied."""
    import yaml
    wire = yaml.safe_load((spec_dir / "wire_facts.yaml").read_text())
    for name in TAG_ABSENT_CONSTANTS:
        wire.get("constants", {}).pop(name, None)
        wire.get("constant_sources", {}).pop(name, None)
    for (struct, old), new in TAG_RENAMED_FIELDS.items():
        for f in (wire.get("structs", {}).get(struct) or {}).get("fields", []):
            if f.get("name") == old:
                f["name"] = new
    return wire


def load_seed_mapping(spec_dir: pathlib.Path) -> dict:
    """seed_mapping.yaml with the corrections to the tag above applied (a seed field whose
    current name the tag still has is the same field)."""
    import yaml
    mapping = yaml.safe_load((spec_dir / "seed_mapping.yaml").read_text())

    def walk(node, struct=None):
        if isinstance(node, dict):
            for (s_name, old), new in TAG_RENAMED_FIELDS.items():
                if node.get("current") == old and node.get("seed") == new:
                    node["current"], node["status"] = new, "same"
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(mapping)
    return mapping


def write_or_check(tool: str, output: pathlib.Path, text: str, check: bool, root: pathlib.Path) -> int:
    name = output.relative_to(root)
    if check:
        if not output.exists() or output.read_text() != text:
            print(f"{tool}: {name} is stale; run python tools/{tool}.py", file=sys.stderr)
            return 1
        print(f"{tool}: {name} is up to date")
        return 0
    output.write_text(text)
    print(f"{tool}: wrote {name} ({len(text)} bytes)")
    return 0


def main(argv, *, tool: str, doc: str, output: pathlib.Path, root: pathlib.Path, make_text,
         spec_default: pathlib.Path | None = None, spec_files: tuple[str, ...] = ()) -> int:
    """The command line every generator shares: [--spec DIR] [--check].  `make_text(spec)`
    gives the file's text (spec is None for a generator that reads no spec files)."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    if spec_default is not None:
        ap.add_argument("--spec", type=pathlib.Path, default=spec_default, help="the spec sources (default: spec-sources/ in the repository)")
    ap.add_argument("--check", action="store_true", help="compare with the committed file; write nothing")
    args = ap.parse_args(argv)
    spec = getattr(args, "spec", None)
    for need in spec_files:
        if not (spec / need).is_file():
            print(f"{tool}: no {need} under {spec}", file=sys.stderr)
            return 2
    return write_or_check(tool, output, make_text(spec), args.check, root)


def refresh(argv=None) -> int:
    """`regen.py --from-shared DIR [--to DIR] [--check]`: copy SPEC_FILES from the shared spec
    into spec-sources/, or (--check) exit 1 naming each file that differs."""
    ap = argparse.ArgumentParser(prog="tools/regen.py",
                                 description="Refresh spec-sources/ (the repository's copy of the spec sources) "
                                             "from the shared spec.")
    ap.add_argument("--from-shared", type=pathlib.Path, required=True, metavar="DIR",
                    help="the shared spec directory, e.g. ../shared/spec")
    ap.add_argument("--to", type=pathlib.Path, default=SPEC_SOURCES, metavar="DIR",
                    help="the copy to refresh (default: spec-sources/ in the repository)")
    ap.add_argument("--check", action="store_true", help="compare only; write nothing")
    args = ap.parse_args(argv)
    missing = [name for name in SPEC_FILES if not (args.from_shared / name).is_file()]
    if missing:
        print(f"regen: {args.from_shared} has no {', '.join(missing)} (is it the shared spec directory?)",
              file=sys.stderr)
        return 2
    stale = [name for name in SPEC_FILES
             if not (args.to / name).is_file()
             or (args.to / name).read_bytes() != (args.from_shared / name).read_bytes()]
    if args.check:
        for name in stale:
            print(f"regen: {args.to / name} differs from {args.from_shared / name}; "
                  f"run python3 tools/regen.py --from-shared {args.from_shared}", file=sys.stderr)
        if not stale:
            print(f"regen: {args.to} equals {args.from_shared} ({len(SPEC_FILES)} files)")
        return 1 if stale else 0
    if args.to.exists() and not args.to.is_dir():
        print(f"regen: {args.to} is not a directory", file=sys.stderr)
        return 2
    args.to.mkdir(parents=True, exist_ok=True)
    for name in stale:
        (args.to / name).write_bytes((args.from_shared / name).read_bytes())
        print(f"regen: copied {name} into {args.to}")
    print(f"regen: {args.to} is up to date ({len(stale)} of {len(SPEC_FILES)} files changed); "
          "now run the generators (python3 tools/gen_facts.py, python3 tools/gen_layouts.py)")
    return 0


if __name__ == "__main__":
    sys.exit(refresh())
