"""The reference implementation as a testee: testee protocol v1 over JSON Lines.

Run it as a process (`python -m ptlrpc_conformance.reference`, which is what
`--iut exec:...` drives) or use `ReferenceTestee` in-process (`--iut reference`, or
`--iut python:ptlrpc_conformance.reference:make_testee`).  Both paths answer the same
JSON objects; see docs/testee-protocol.md.  Standard library only.
"""
from __future__ import annotations

import json
import sys

from .. import __version__
from .. import spec
from .codec import Codec, CodecConfig, CodecError
from .structs import StructCodec, StructConfig

PROTOCOL_VERSION = 1


class ReferenceTestee:
    """Answers testee-protocol requests (dicts without `id`) with response dicts."""

    name = "ptlrpc-conformance reference"

    def __init__(self, config: CodecConfig | None = None, name: str | None = None,
                 capabilities: tuple[str, ...] = ("decode", "encode", "structs"),
                 struct_config: StructConfig | None = None):
        self.codec = Codec(config)
        self.structs = StructCodec(struct_config)
        if name:
            self.name = name
        self.capabilities = list(capabilities)

    def hello(self) -> dict:
        return {"name": self.name, "version": __version__, "capabilities": list(self.capabilities),
                "protocol": PROTOCOL_VERSION}

    def handle(self, request: dict) -> dict:
        op = request.get("op")
        try:
            if op == "hello":
                return {"ok": True, "result": self.hello()}
            if op == "decode" and "decode" in self.capabilities:
                data = _hex_arg(request, "data")
                return {"ok": True, "result": self.decode_message(data, request.get("direction", "request"))}
            if op == "encode" and "encode" in self.capabilities:
                message = request.get("message")
                return {"ok": True, "result": {"data": self.codec.encode(message).hex()}}
            if op == "decode_struct" and "structs" in self.capabilities:
                data = _hex_arg(request, "data")
                return {"ok": True, "result": self.structs.decode(request.get("type"), data,
                                                                  request.get("byte_order", "little"))}
            if op == "encode_struct" and "structs" in self.capabilities:
                fields = request.get("fields")
                return {"ok": True, "result": {"data": self.structs.encode(request.get("type"), fields).hex()}}
        except CodecError as e:
            return {"ok": False, "error": e.errno, "detail": e.detail}
        return {"ok": False, "error": "EOPNOTSUPP", "detail": f"operation {op!r} is not supported"}


    def decode_message(self, data: bytes, direction: str) -> dict:
        """A MESSAGE; with `structs`, the buffers the request format defines are decoded too."""
        message = self.codec.decode(data, direction)
        if "structs" not in self.capabilities:
            return message
        opc = message["body"]["pb_opc"]
        for fmt in spec.facts()["message_formats"].values():
            if fmt["opcode"] != opc:
                continue
            decoded = {}
            for index, type_name in fmt[direction].items():
                i = int(index)
                if i >= len(message["buffers"]):
                    continue
                try:
                    decoded[index] = self.structs.decode(type_name, bytes.fromhex(message["buffers"][i]),
                                                         message["byte_order"])
                except CodecError:
                    continue     # a buffer too short for its structure is left undecoded
            if decoded:
                message["structs"] = decoded
        return message


def _hex_arg(request: dict, key: str) -> bytes:
    value = request.get(key)
    if not isinstance(value, str):
        raise CodecError("EINVAL", f"request field {key!r} must be a hex string")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise CodecError("EINVAL", f"request field {key!r} is not valid hex") from None


def serve(testee, stdin=None, stdout=None) -> int:
    """Serve JSON Lines from stdin until it ends; one response line per request line."""
    stdin = stdin or sys.stdin.buffer
    stdout = stdout or sys.stdout.buffer
    for raw in stdin:
        line = raw.strip()
        if not line:
            continue
        try:
            request = json.loads(line)
            if not isinstance(request, dict):
                raise ValueError("a request must be a JSON object")
        except ValueError as e:
            response = {"id": None, "ok": False, "error": "EINVAL", "detail": f"unreadable request: {e}"}
        else:
            response = {"id": request.get("id")}
            response.update(testee.handle(request))
        stdout.write(json.dumps(response, separators=(",", ":")).encode() + b"\n")
        stdout.flush()
    return 0


def main(argv: list[str] | None = None) -> int:
    return serve(ReferenceTestee())


if __name__ == "__main__":
    sys.exit(main())
