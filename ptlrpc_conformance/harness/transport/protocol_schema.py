"""The JSON Schema of testee protocol v1 (ptlrpc_conformance/schemas/testee-protocol-v1.json),
generated: the MESSAGE shape comes from the one description in harness/transport/protocol.py
(itself built from the layout facts), the rest of the protocol is written out here.

`python tools/gen_schemas.py` writes the file; `--check` (run by the project's tests) says
whether the committed file is what this module gives.
"""
from __future__ import annotations

import json

from ptlrpc_conformance.harness.transport import protocol as P

FILE = "testee-protocol-v1.json"
U64 = P.Value("uint", 64).schema()


def _ref(name: str) -> dict:
    return {"$ref": f"#/$defs/{name}"}


def _op(op: str, required: list[str], properties: dict) -> dict:
    return {"if": {"properties": {"op": {"const": op}}},
            "then": {"required": required, "properties": properties}}


def header(required: bool) -> dict:
    out: dict = {"type": "object", "properties": {k: v.schema() for k, v in P.HEADER.items()}}
    if required:
        out["required"] = list(P.HEADER)
    out["additionalProperties"] = False
    return out


def body(required: bool) -> dict:
    out: dict = {"type": "object", "properties": {k: v.schema() for k, v in P.BODY.items()}}
    if required:
        out["required"] = list(P.BODY_REQUIRED)
    out["additionalProperties"] = False
    return out


def message() -> dict:
    """The result of a decode, from protocol.MESSAGE."""
    members = {
        "byte_order": {"enum": list(P.BYTE_ORDERS)},
        "header": _ref("header"),
        "buflens": {"type": "array", "items": P.U32.schema(), "minItems": 1, "maxItems": P.MAX_BUFCOUNT},
        "body": _ref("body"),
        "buffers": {"type": "array", "items": _ref("hex")},
        "computed_cksum": P.U32.schema(),
        "structs": {"type": "object", "propertyNames": {"pattern": "^[0-9]+$"},
                    "additionalProperties": _ref("struct_result")},
    }
    assert set(members) == {m.name for m in P.MESSAGE}, "protocol.MESSAGE and the schema name different members"
    return {"description": "The result of a successful decode.", "type": "object",
            "required": [m.name for m in P.MESSAGE if m.required],
            "properties": {m.name: members[m.name] for m in P.MESSAGE}}


def encode_message() -> dict:
    return {"description": "The input of encode: every member optional.", "type": "object",
            "properties": {
                "byte_order": {"enum": list(P.BYTE_ORDERS)},
                "header": header(required=False),
                "buflens": {"type": "array", "items": P.U32.schema()},
                "body": body(required=False),
                "buffers": {"type": "array", "items": {"anyOf": [_ref("hex"), {"type": "null"}]}}}}


def _deferred_reply() -> dict:
    return {"type": "object", "required": ["client", "xid", "data"],
            "properties": {"client": {"type": "string"}, "xid": U64, "data": _ref("hex")}}


def build() -> dict:
    request = {
        "type": "object", "required": ["id", "op"],
        "properties": {"id": {"type": "integer"}, "op": {"type": "string"}},
        "allOf": [
            _op("decode", ["data", "direction"],
                {"data": _ref("hex"), "direction": {"enum": ["request", "reply"]}}),
            _op("encode", ["message"], {"message": _ref("encode_message")}),
            _op("exchange", ["data", "xid", "client"],
                {"data": _ref("hex"), "xid": U64, "client": {"type": "string"}}),
            _op("decode_struct", ["type", "data", "byte_order"],
                {"type": {"type": "string"}, "data": _ref("hex"), "byte_order": {"enum": list(P.BYTE_ORDERS)}}),
            _op("encode_struct", ["type", "fields"], {"type": {"type": "string"}, "fields": {"type": "object"}}),
        ]}
    response = {
        "type": "object", "required": ["id", "ok"],
        "properties": {"id": {"type": ["integer", "null"]}, "ok": {"type": "boolean"}},
        "if": {"properties": {"ok": {"const": True}}},
        "then": {"required": ["result"]},
        "else": {"required": ["error"], "properties": {"error": _ref("errno"), "detail": {"type": "string"}}}}
    hello = {
        "type": "object", "required": ["name", "version", "capabilities", "protocol"],
        "properties": {"name": {"type": "string"}, "version": {"type": "string"},
                       "capabilities": {"type": "array", "items": {"type": "string"}},
                       "protocol": {"const": P.PROTOCOL_VERSION}, "errno_agnostic": {"type": "boolean"},
                       "decode_directions": {"type": "array", "minItems": 1,
                                             "items": {"enum": sorted(P.DECODE_DIRECTIONS)}},
                       "struct_operations": {"type": "array", "minItems": 1,
                                             "items": {"enum": sorted(P.STRUCT_OPERATIONS)}},
                       "configuration": {"type": "object",
                                         "properties": {k: {"type": "boolean"} for k in P.CONFIGURATION_MEMBERS}}}}
    defs = {
        "hex": {"type": "string", "pattern": P.HEX.pattern},
        "errno": {"type": "string", "pattern": P.ERRNO_NAME.pattern},
        "request": request,
        "response": response,
        "hello_result": hello,
        "header": header(required=True),
        "body": body(required=True),
        "message": message(),
        "encode_message": encode_message(),
        "encode_result": {"type": "object", "required": ["data"], "properties": {"data": _ref("hex")}},
        "exchange_result": {
            "type": "object", "required": ["data"],
            "properties": {"data": {"anyOf": [_ref("hex"), {"type": "null"}]},
                           "replies": {"type": "array", "items": _ref("deferred_reply")}},
            "description": "Result of exchange (docs/testee-protocol.md §2.4): the reply to this request or null, "
                           "and replies sent meanwhile to earlier requests (recovery, docs/target-rules.md §7)."},
        "deferred_reply": _deferred_reply(),
        "end_recovery_result": {
            "description": "Result of end_recovery (one expiry of the recovery window): the replies sent meanwhile, as recovery went on or ended, in the order sent.",
            "type": "object", "required": ["replies"],
            "properties": {"replies": {"type": "array", "items": _ref("deferred_reply")}}},
        "empty_result": {
            "description": "Result of reset and restart (restart may say last_committed: the commit point at the crash).",
            "type": "object", "properties": {"last_committed": U64}},
        "struct_result": {
            "type": "object", "required": ["type", "fields"],
            "properties": {"type": {"type": "string"}, "fields": {"type": "object"},
                           "valid": {"type": "array", "items": {"type": "string"}}}},
    }
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": f"https://ptlrpc-conformance.invalid/schemas/{FILE}",
        "title": "ptlrpc-conformance testee protocol v1",
        "description": "One JSON object per line; see docs/testee-protocol.md (normative). A line is a request or a "
                       "response.",
        "oneOf": [_ref("request"), _ref("response")],
        "$defs": defs,
    }


def text() -> str:
    """The file's text, as committed."""
    return json.dumps(build(), indent=1, ensure_ascii=False) + "\n"
