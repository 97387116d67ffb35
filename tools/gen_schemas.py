#!/usr/bin/env python3
"""Generate the published JSON Schemas from the protocol facts:

  ptlrpc_conformance/schemas/vectors-v1.json           harness/data/vector_schema.py
  ptlrpc_conformance/schemas/testee-protocol-v1.json   harness/transport/protocol_schema.py

Field names and widths, the jobid length, structure names, errno classes and id grammars
come from spec/facts.json, spec/layouts.json and the registry, through those modules.  The
output is committed; `--check` exits 1 when a file is stale (the project's tests run it).
"""
from __future__ import annotations

import argparse
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import regen  # noqa: E402

from ptlrpc_conformance.harness.data import vector_schema  # noqa: E402
from ptlrpc_conformance.harness.transport import protocol_schema  # noqa: E402

SCHEMAS = ROOT / "ptlrpc_conformance" / "schemas"
GENERATORS = ((vector_schema.FILE, vector_schema.text), (protocol_schema.FILE, protocol_schema.text))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--check", action="store_true", help="compare with the committed files; write nothing")
    args = ap.parse_args(argv)
    return max(regen.write_or_check("gen_schemas", SCHEMAS / name, make(), args.check, ROOT)
               for name, make in GENERATORS)


if __name__ == "__main__":
    sys.exit(main())
