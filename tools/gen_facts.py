#!/usr/bin/env python3
"""Generate ptlrpc_conformance/spec/facts.json from the project's spec sources.

Inputs (read only):
  spec-sources/wire_facts.yaml     constants (from Lustre's wiretest.c)
  spec-sources/flags.yaml          MSG_*, MSGHDR_*, pb_type, pb_version, magic, opcodes, wire errnos
  tools/facts_extra.yaml           limits and facts the two files above do not carry as values

The output is JSON so that the bundled reference implementation (stdlib only) can read
the very same facts the suites read.  Structure layouts are not here: they are in
spec/layouts.json (tools/gen_layouts.py), the package's one layout table.
`python tools/gen_facts.py --check` exits 1 when the committed file differs from what the
sources give (the project's tests run it).
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
OUTPUT = ROOT / "ptlrpc_conformance" / "spec" / "facts.json"
EXTRA = ROOT / "tools" / "facts_extra.yaml"

# flags.yaml sections copied as {name: value}; obsolete names are kept but marked.
FLAG_SECTIONS = {
    "MSG_pb_flags": "msg_flags",
    "MSG_CONNECT_op_flags": "msg_connect_flags",
    "MSGHDR_lm_flags": "msghdr_flags",
    "PTL_RPC_MSG_pb_type": "msg_types",
    "pb_version": "versions",
    "lustre_msg_magic": "magic",
}


def _flag_table(section: dict) -> dict:
    table = {}
    for name, entry in section.items():
        if not isinstance(entry, dict) or "value" not in entry:
            continue
        if not name.isupper():
            continue  # derived helper rows such as computed_byteswap_of_V2
        row = {"value": entry["value"]}
        if entry.get("line"):
            row["cite"] = entry["line"]
        if "obsolete" in str(entry.get("status", "")) or "local define" in str(entry.get("status", "")):
            row["status"] = entry["status"]
        table[name] = row
    return dict(sorted(table.items(), key=lambda kv: (kv[1]["value"], kv[0])))


def _swab(rules: dict, constants: dict) -> dict:
    """Swab rules with constant names resolved to values; every other structure with a swab
    routine of its own gets the fields the default release's routine leaves alone
    (struct_unswabbed of spec/releases/2.17.57.json, read from its pack_generic.c and
    llog_swab.c), and so does a rule here that names only a union's member."""
    import json
    release = json.loads((ROOT / "ptlrpc_conformance" / "spec" / "releases" / "2.17.57.json").read_text())
    rules = {name: dict(rule) for name, rule in rules.items()}
    for name, entry in sorted((release.get("struct_unswabbed") or {}).items()):
        if "opaque" not in rules.get(name, {}) and entry["fields"]:
            rules.setdefault(name, {"cite": entry["cite"]})["opaque"] = list(entry["fields"])
    out = {}
    for name, rule in rules.items():
        r = {k: v for k, v in rule.items() if k in ("opaque", "union_as", "swab_first", "cite")}
        if "when" in rule:
            r["when"] = {f: [[flag, constants[c]["value"]] for flag, c in conds] for f, conds in rule["when"].items()}
        if "union_by" in rule:
            u = dict(rule["union_by"])
            u["values"] = [constants[c]["value"] for c in u["values"]]
            r["union_by"] = u
        out[name] = r
    return out


def _valid_bits(table: dict, flags: dict) -> dict:
    """field -> [[bit name, value], ...] in VALID-2 order, per structure."""
    md = flags["OBD_MD"]["current"]
    out = {}
    for struct, entry in table.items():
        out[struct] = {"cite": entry["cite"],
                       "fields": {f: [[b, md[b]["value"]] for b in bits] for f, bits in entry["fields"].items()}}
    return out


def _formats(table: dict, opcodes: dict) -> dict:
    out = {}
    for opc, entry in table.items():
        out[opc] = {"opcode": opcodes[opc]["value"], "cite": entry["cite"],
                    "request": {str(k): v for k, v in entry.get("request", {}).items()},
                    "reply": {str(k): v for k, v in entry.get("reply", {}).items()}}
    return out


def build(spec_dir: pathlib.Path) -> dict:
    wire = regen.load_wire_facts(spec_dir)
    flags = yaml.safe_load((spec_dir / "flags.yaml").read_text())
    extra = yaml.safe_load(EXTRA.read_text())

    constants = {name: {"value": value} for name, value in wire["constants"].items()}
    for name, src in wire.get("constant_sources", {}).items():
        if name in constants:
            constants[name]["cite"] = f"lustre/ptlrpc/wiretest.c:{src['line']}"
    for name, row in extra["constants"].items():
        constants[name] = {"value": row["value"], "cite": row["cite"]}

    opcodes = {}
    for family, fam in flags["opcodes"].items():
        for name, entry in (fam.get("opcodes") or {}).items():
            if isinstance(entry, dict) and "value" in entry:
                opcodes[name] = {"value": entry["value"], "family": family, "cite": entry.get("line", "")}

    errnos = {}
    for entry in flags["wire_errno"]["table"].values():
        errnos[entry["host_name"]] = {"wire": entry["value"], "x86": entry["linux_x86_value"],
                                      "cite": entry.get("line", "")}

    facts = {
        "meta": {
            "generated_by": "tools/gen_facts.py",
            "sources": ["spec-sources/wire_facts.yaml", "spec-sources/flags.yaml", "tools/facts_extra.yaml"],
            "lustre_version": "2.17.57",
            "abi": wire["meta"]["abi"],
            "note": "Generated; do not edit. Facts are Lustre's; the arrangement is this project's.",
        },
        "limits": {k: v for k, v in extra["limits"].items()},
        "constants": dict(sorted(constants.items())),
        "opcodes": dict(sorted(opcodes.items(), key=lambda kv: (kv[1]["value"], kv[0]))),
        "errnos": dict(sorted(errnos.items(), key=lambda kv: (kv[1]["wire"], kv[0]))),
        "unswabbed": {name: extra["swab"][name]["opaque"] for name in ("lustre_msg_v2", "ptlrpc_body_v3")},
        "signed": extra["signed"],
        "swab": _swab(extra["swab"], constants),
        "valid_bits": _valid_bits(extra["valid_bits"], flags),
        "message_formats": _formats(extra["message_formats"], opcodes),
        "structs_required": extra["structs_required"],
    }
    for section, key in FLAG_SECTIONS.items():
        facts[key] = _flag_table(flags[section])
    return facts


def render(facts: dict) -> str:
    return json.dumps(facts, indent=1, sort_keys=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    return regen.main(argv, tool="gen_facts", doc=__doc__, output=OUTPUT, root=ROOT, spec_default=DEFAULT_SPEC,
                      spec_files=("wire_facts.yaml", "flags.yaml"), make_text=lambda spec: render(build(spec)))

if __name__ == "__main__":
    sys.exit(main())
