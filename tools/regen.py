"""Shared by the generators in tools/: write a generated file, or (--check) say whether
the committed one is what the sources give."""
from __future__ import annotations

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
