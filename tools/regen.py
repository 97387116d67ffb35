"""Shared by the generators in tools/: write a generated file, or (--check) say whether
the committed one is what the sources give."""
from __future__ import annotations

import argparse
import pathlib
import sys


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
        ap.add_argument("--spec", type=pathlib.Path, default=spec_default, help="the shared/spec directory")
    ap.add_argument("--check", action="store_true", help="compare with the committed file; write nothing")
    args = ap.parse_args(argv)
    spec = getattr(args, "spec", None)
    for need in spec_files:
        if not (spec / need).is_file():
            print(f"{tool}: no {need} under {spec}", file=sys.stderr)
            return 2
    return write_or_check(tool, output, make_text(spec), args.check, root)
