"""The JSON Schema of vector files (ptlrpc_conformance/schemas/vectors-v1.json), generated
from the protocol facts, and the validation of vector files against it.

What the schema says comes from one place each: header and body field names and widths
(integer ranges, the jobid length) from the MESSAGE description of
harness/data/message.py, itself built from spec/facts.json and spec/layouts.json; structure names from
spec/layouts.json; the id grammars from harness/data/registry.py; the decode rejection
classes from facts.json's errno table.  `python tools/gen_schemas.py` writes the file and
`--check` (run by the project's tests) says whether the committed one is what this module
gives.

The loader (harness/data/vectors.py) validates every vector file with `jsonschema` against
the committed schema and turns each error into one line naming file, vector id and field
(`problems`); it keeps in Python only what a schema cannot say: that requirement ids and
profiles exist in the registry, and the parsing of the byte notation.

Two keywords help the messages and mean nothing to other validators: `description`
(a noun phrase: "'x' is not <description>") and `errorMessage` (the ajv-errors convention:
the whole message of a rule between fields).
"""
from __future__ import annotations

import functools
import importlib.metadata
import json
import pathlib
import re
from importlib import resources
from typing import TYPE_CHECKING, Any, Iterator

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.data import message as P
from ptlrpc_conformance.harness.data.registry import CASE_ID, REQUIREMENT_ID
from ptlrpc_conformance.spec import layouts

if TYPE_CHECKING:
    import jsonschema

FILE = "vectors-v1.json"
FORMAT = "ptlrpc-conformance-vectors/1"
VERDICTS = ("valid", "invalid", "acceptable")
DIRECTIONS = ("request", "reply")
OPS = ("decode", "decode_struct")
DECODE_ERRNOS = ("EINVAL", "EFAULT", "EPROTO")       # docs/testee-protocol.md section 2.2
HEX_TEXT = r"^[0-9a-fA-F\s]*$"                        # hex digits, spaces allowed
HEX_BYTES = r"^\s*([0-9a-fA-F]\s*[0-9a-fA-F]\s*)*$"   # ... and whole bytes


def _ref(name: str) -> dict:
    return {"$ref": f"#/$defs/{name}"}


def _rule(when: dict, then: dict) -> dict:
    return {"if": when, "then": then}


STRUCT_OP = {"properties": {"op": {"const": "decode_struct"}}, "required": ["op"]}


def _verdict(verdict: str) -> dict:
    return {"properties": {"verdict": {"const": verdict}}, "required": ["verdict"]}


def struct_name_pattern() -> str:
    """Every name layouts.canonical() accepts: current names and seed aliases, with an
    optional `struct `/`union ` prefix."""
    table = layouts.load()
    names = sorted(set(table["structs"]) | set(table["aliases"]))
    return r"^(struct )?(union )?\s*(" + "|".join(map(re.escape, names)) + r")\s*$"


def _body_field(value: P.Value) -> dict:
    s = value.schema()
    s["type"] = [s["type"], "null"]
    s["description"] = f"{value.noun} (or null: the field is absent)"
    return s


def build() -> dict:
    errnos = spec.facts()["errnos"]
    assert all(e in errnos for e in DECODE_ERRNOS), "a decode rejection class is not in facts.json"
    defs: dict[str, Any] = {
        "case_id": {"type": "string", "pattern": CASE_ID.pattern,
                    "description": "a case id (dotted lower-case segments, e.g. framing.bufcount.zero; docs/ids.md)"},
        "requirement_id": {"type": "string", "pattern": REQUIREMENT_ID.pattern,
                           "description": "a requirement id (e.g. HDR-BUFCOUNT-1; docs/ids.md)"},
        "struct_name": {"type": "string", "pattern": struct_name_pattern(),
                        "description": "the current or seed name of a wire structure in spec/layouts.json"},
        "text": {"type": "string", "pattern": r"\S", "description": "text (not blank)"},
        "hex": {"type": "string", "pattern": HEX_TEXT, "description": "hex text"},
        "bytes": {
            "description": "hex text, a {fill: HEX, count: N} run, or a list of these",
            "anyOf": [{"type": "string", "pattern": HEX_BYTES},
                      {"type": "object", "title": "run", "required": ["fill", "count"], "additionalProperties": False,
                       "properties": {"fill": {"type": "string", "pattern": r"^\s*([0-9a-fA-F]\s*[0-9a-fA-F]\s*)+$",
                                               "description": "a hex byte pattern"},
                                      "count": {"type": "integer", "minimum": 0}}},
                      {"type": "array", "items": _ref("bytes")}]},
        "errno": {"enum": list(DECODE_ERRNOS)},
        "errnos": {"type": "array", "items": _ref("errno"),
                   "description": f"a list of decode rejection classes ({', '.join(DECODE_ERRNOS)})"},
        "header": {"type": "object", "title": "header", "additionalProperties": False,
                   "properties": {k: v.schema() for k, v in P.HEADER.items()}},
        "body": {"type": "object", "title": "ptlrpc_body", "additionalProperties": False,
                 "properties": {k: _body_field(v) for k, v in P.BODY.items()}},
        "message_expect": {
            "type": ["object", "null"], "title": "expect", "additionalProperties": False,
            "description": "a mapping of expected fields",
            "properties": {
                "byte_order": {"enum": list(P.BYTE_ORDERS)},
                "header": _ref("header"),
                "buflens": {"type": "array", "items": P.U32.schema(),
                            "description": "a list of unsigned 32-bit integers"},
                "body": _ref("body"),
                "buffers": {"type": "array", "items": {"type": ["string", "null"], "pattern": HEX_TEXT,
                                                       "description": "hex text (or null: not compared)"}},
                "computed_cksum": P.U32.schema(),
                "structs": {"type": "object", "propertyNames": {"pattern": "^[0-9]+$", "description": "a buffer index"},
                            "additionalProperties": _ref("struct_entry")}}},
        "struct_entry": {
            "type": "object", "title": "decoded structure", "required": ["type"], "additionalProperties": False,
            "properties": {"type": {"type": "string"}, "fields": {"type": "object"}, "valid": _ref("names")}},
        "struct_expect": {
            "type": ["object", "null"], "title": "expect", "additionalProperties": False,
            "description": "a mapping of expected fields",
            "properties": {"fields": {"type": "object"}, "valid": _ref("names")}},
        "names": {"type": "array", "items": {"type": "string"}, "description": "a list of field names"},
        "profile_override": {
            "type": "object", "title": "profile override", "additionalProperties": False,
            "description": "what a profile changes in a vector: its verdict, errno classes, or (a structure vector "
                           "under a release profile) the release's own bytes and expected fields",
            "properties": {"verdict": {"enum": list(VERDICTS)}, "errno": _ref("errnos"), "bytes": _ref("bytes"),
                           "expect": _ref("struct_expect"), "note": {"description": "free text"}}},
        "vector": {
            "type": "object", "title": "vector", "description": "a vector (a mapping)",
            "required": ["id", "title", "requirements", "cite", "verdict", "bytes"],
            "additionalProperties": False,
            "properties": {
                "id": _ref("case_id"),
                "title": _ref("text"),
                "requirements": {"type": "array", "minItems": 1, "items": _ref("requirement_id"),
                                 "description": "a list of at least one requirement id"},
                "cite": {"type": "array", "minItems": 1, "items": _ref("text"),
                         "description": "a list of at least one source (seed section, \"RULES X\" for rule X of docs/rules.md, Lustre function)"},
                "verdict": {"enum": list(VERDICTS)},
                "direction": {"enum": list(DIRECTIONS)},
                "op": {"enum": list(OPS)},
                "struct": _ref("struct_name"),
                "byte_order": {"enum": list(P.BYTE_ORDERS)},
                "canonical": {"type": "boolean"},
                "bytes": _ref("bytes"),
                "errno": {"anyOf": [_ref("errnos"), {"const": "any"}],
                          "description": f"a list of decode rejection classes ({', '.join(DECODE_ERRNOS)}), "
                                         "or any (structure vectors)"},
                "expect": {"description": "what the bytes decode to (by op: message_expect or struct_expect)"},
                "note": {"description": "free text"},
                "profile_overrides": {"type": ["object", "null"], "additionalProperties": _ref("profile_override")},
            },
            "allOf": [
                _rule(STRUCT_OP, {"required": ["struct", "byte_order"],
                                  "properties": {"expect": _ref("struct_expect")}}),
                _rule({"not": STRUCT_OP}, {"required": ["direction"],
                                           "properties": {"expect": _ref("message_expect")}}),
                _rule(_verdict("valid"), {
                    "required": ["expect"], "errorMessage": "a valid vector lists the fields it must decode to",
                    "properties": {
                        "expect": {"type": "object", "errorMessage": "a valid vector lists the fields it must decode to"},
                        "errno": {"type": "array", "maxItems": 0,
                                  "errorMessage": "only invalid vectors name errno classes"}}}),
                _rule(_verdict("invalid"), {
                    "required": ["errno"], "errorMessage": "an invalid vector lists the allowed errno classes",
                    "properties": {
                        "errno": {"minItems": 1, "errorMessage": "an invalid vector lists the allowed errno classes"},
                        "expect": {"type": "null", "errorMessage": "an invalid vector decodes to nothing"}}}),
                _rule({"allOf": [_verdict("invalid"), {"not": STRUCT_OP}]}, {
                    "properties": {"errno": {"type": "array", "errorMessage": "'any' is for structure vectors; "
                                             "a message vector lists the allowed errno classes"}}}),
                _rule({"not": _verdict("valid")}, {
                    "properties": {"canonical": {"const": False,
                                                 "errorMessage": "only a valid vector can be canonical"}}}),
                _rule({"allOf": [STRUCT_OP, {"properties": {"canonical": {"const": True}}, "required": ["canonical"]}]},
                      {"properties": {"byte_order": {"const": "little", "errorMessage": "a canonical structure "
                                                     "vector is little-endian: encoders write little-endian only"}}}),
            ]},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://ptlrpc-conformance.invalid/schemas/{FILE}",
        "title": "ptlrpc-conformance vector file, format 1",
        "description": "A YAML file of golden vectors (docs/vectors.md). Generated from the protocol facts by "
                       "harness/data/vector_schema.py (tools/gen_schemas.py). The loader (harness/data/vectors.py) "
                       "validates every file against it and checks in Python only what a schema cannot say "
                       "(requirement ids and profiles exist, the byte notation parses).",
        "type": "object",
        "required": ["format"],
        "anyOf": [{"required": ["vectors"]}, {"required": ["release_overrides"]}],
        "properties": {
            "format": {"const": FORMAT},
            "area": {"type": "string"},
            "fragments": {"description": "pieces reused through YAML anchors; not read by the loader"},
            "vectors": {"type": "array", "items": _ref("vector")},
            "release_overrides": {
                "type": "object", "description": "profile overrides of vectors (of any file) by id",
                "propertyNames": {"pattern": CASE_ID.pattern},
                "additionalProperties": {"type": "object", "additionalProperties": _ref("profile_override")}},
        },
        "$defs": defs,
    }


def text() -> str:
    """The file's text, as committed."""
    return json.dumps(build(), indent=1, ensure_ascii=False) + "\n"


# ----------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------

@functools.lru_cache(maxsize=1)
def validator_class():
    """Draft 2020-12 with one change: an integer is a whole number written without a fraction
    (YAML's 1.0 is a float, and protocol integers are never written so; docs/testee-protocol.md
    section 2).  jsonschema is imported here, not at the top: the import costs 70-90 ms in every
    process, and a run whose vector files are known valid (yamlcache) never needs it."""
    import jsonschema
    types = jsonschema.Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda checker, v: isinstance(v, int) and not isinstance(v, bool))
    return jsonschema.validators.extend(jsonschema.Draft202012Validator, type_checker=types)



def schema_text() -> str:
    """The published schema's text, which validator() applies."""
    return resources.files("ptlrpc_conformance.schemas").joinpath(FILE).read_text(encoding="utf-8")


@functools.lru_cache(maxsize=1)
def fingerprint() -> str:
    """What a vector file known valid is known valid under: the schema's text, this module's
    own source (how it is applied) and the installed jsonschema's version."""
    try:
        checker = pathlib.Path(__file__).read_text(encoding="utf-8")
    except OSError:
        checker = "?"
    try:
        jsonschema_version = importlib.metadata.version("jsonschema")
    except importlib.metadata.PackageNotFoundError:
        jsonschema_version = "?"
    return "\0".join((schema_text(), checker, jsonschema_version))


@functools.lru_cache(maxsize=1)
def validator() -> jsonschema.protocols.Validator:
    """A validator for the committed (published) schema, with two changes that make it four
    times faster and say the same (measured on the bundled files: 0.6 s to 0.15 s on the
    project's 2-core machine): the byte notation is left to the loader, which parses it
    anyway and says precisely what is wrong (vectors.parse_bytes; tests/test_vectors_data.py
    checks that it and the schema agree), and references are replaced by what they name."""
    schema = json.loads(schema_text())
    schema["$defs"]["bytes"] = {}
    return validator_class()(_inline(schema, schema["$defs"], ()))


def _inline(node: Any, defs: dict, within: tuple[str, ...]) -> Any:
    """`node` with each {"$ref": "#/$defs/NAME"} replaced by that definition (a recursive
    one is left a reference; `$defs` stays, so that it still resolves)."""
    if isinstance(node, list):
        return [_inline(x, defs, within) for x in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if len(node) == 1 and isinstance(ref, str) and ref.startswith("#/$defs/"):
        name = ref[len("#/$defs/"):]
        return node if name in within else _inline(defs[name], defs, within + (name,))
    return {k: (v if k == "$defs" else _inline(v, defs, within)) for k, v in node.items()}


def problems(data: Any, name: str) -> Iterator[tuple[int | None, tuple, str]]:
    """Each schema violation of a vector file's content: (vector index or None for the
    file itself, the path inside the vector, the line that names file, vector id and field)."""
    vectors = data.get("vectors") if isinstance(data, dict) else None
    seen: set[str] = set()
    for e in sorted(validator().iter_errors(data), key=lambda e: [str(p) for p in e.absolute_path]):
        path = list(e.absolute_path)
        if len(path) >= 2 and path[0] == "vectors" and isinstance(path[1], int):
            index, rest = path[1], tuple(path[2:])
            raw = vectors[index]
            vid = raw.get("id") if isinstance(raw, dict) else None
            head = f"{name}: vector {index}" + (f" {vid}" if isinstance(vid, str) and CASE_ID.match(vid) else "")
        else:
            index, rest, head = None, tuple(path), name
        for sub, line in _lines(e):
            dotted = _dotted(rest + sub)
            if index is not None:
                loc = head + dotted                     # bad.yaml: vector 0 local.one.expect.body.pb_opc
            else:
                loc = f"{head}: {dotted.lstrip('.')}" if dotted else head
            text = f"{loc}: {line}"
            if text not in seen:
                seen.add(text)
                yield index, rest + sub, text


def _dotted(path: tuple) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def _lines(e: jsonschema.ValidationError) -> list[tuple[tuple, str]]:
    """(further path, message) of one error."""
    schema = e.schema if isinstance(e.schema, dict) else {}
    custom = schema.get("errorMessage")
    if e.validator == "additionalProperties" and e.validator_value is False:
        known = list(schema.get("properties", {}))
        title = schema.get("title", "known")
        listed = f" (known: {', '.join(known)})" if len(known) <= 16 else ""
        article = "an" if title[:1] in "aeiou" else "a"
        return [((k,), f"not {article} {title} field{listed}") for k in e.instance if k not in known]
    if e.validator == "required":
        missing = [k for k in e.validator_value if k not in e.instance]
        return [((k,), custom) if custom else ((), f"missing field {k!r}") for k in missing]
    if custom:
        return [((), custom)]
    return [((), f"{_short(e.instance)} is not {_noun(schema) or e.message}")]


def _short(v: Any) -> str:
    text = repr(v)
    return text if len(text) <= 60 else text[:57] + "..."


def _noun(s: dict) -> str:
    """What a schema asks for, in words."""
    if "description" in s:
        return s["description"]
    if "enum" in s:
        return "one of " + ", ".join(map(str, s["enum"]))
    if "const" in s:
        return repr(s["const"])
    types = s.get("type")
    types = [types] if isinstance(types, str) else list(types or [])
    if "null" in types and len(types) > 1:
        return _noun(dict(s, type=[t for t in types if t != "null"])) + ", or null"
    if types == ["integer"]:
        lo, hi = s.get("minimum"), s.get("maximum")
        if lo == 0 and hi is not None and (hi + 1) & hi == 0:
            return f"an unsigned {(hi + 1).bit_length() - 1}-bit integer"
        if lo is not None and hi is not None and lo == -hi - 1 and (hi + 1) & hi == 0:
            return f"a signed {(hi + 1).bit_length()}-bit integer"
        return "a whole number" + (" (0 or more)" if lo == 0 else "")
    if types == ["string"]:
        return f"a string of at most {s['maxLength']} characters" if "maxLength" in s else "a string"
    if types == ["array"]:
        return "a list"
    if types == ["object"]:
        return "a mapping"
    if types == ["boolean"]:
        return "true or false"
    return ""
