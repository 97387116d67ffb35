"""The reference implementation as a testee: testee protocol v1 over JSON Lines.

Run it as a process (`python -m ptlrpc_conformance.reference`, which is what
`--iut exec:...` drives) or use `ReferenceTestee` in-process (`--iut reference`, or
`--iut python:ptlrpc_conformance.reference:make_testee`).  Both paths answer the same
JSON objects; see docs/testee-protocol.md.  The standard library and PyYAML: the target
reads the OST facts of spec/target.yaml (the codec and the structures need the standard
library alone).
"""
from __future__ import annotations

import json
import sys

from .. import __version__
from .codec import Codec, CodecConfig, CodecError
from .structs import StructCodec, StructConfig
from .target import Target, TargetConfig

PROTOCOL_VERSION = 1


class ReferenceTestee:
    """Answers testee-protocol requests (dicts without `id`) with response dicts."""

    name = "ptlrpc-conformance reference"

    def __init__(self, config: CodecConfig | None = None, name: str | None = None,
                 capabilities: tuple[str, ...] = ("decode", "encode", "structs", "target", "restart"),
                 struct_config: StructConfig | None = None, target_config: TargetConfig | None = None,
                 declare_configuration: bool = False,
                 target_class: type[Target] = Target, codec_class: type[Codec] = Codec,
                 struct_class: type[StructCodec] = StructCodec):
        # the classes: the reference's, or broken subclasses of them (the mutant zoo's)
        self.codec = codec_class(config)
        self.structs = struct_class(struct_config)
        self.target_config = target_config or TargetConfig()
        self.target_class = target_class
        self._target: Target | None = None
        if name:
            self.name = name
        self.capabilities = list(capabilities)
        self.declare_configuration = declare_configuration   # the hello says how the target is set up

    def hello(self) -> dict:
        out = {"name": self.name, "version": __version__, "capabilities": list(self.capabilities),
               "protocol": PROTOCOL_VERSION}
        if self.declare_configuration:
            out["configuration"] = {"project_quota": self.target_config.project_quota,
                                    "recovery": self.target_config.recovery}
        return out

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
            if op in ("exchange", "reset") and "target" in self.capabilities:
                return {"ok": True, "result": self.target_op(op, request)}
            if op in ("restart", "end_recovery") and "restart" in self.capabilities:
                return {"ok": True, "result": self.target_op(op, request)}
        except CodecError as e:
            return {"ok": False, "error": e.errno, "detail": e.detail}
        return self.unsupported(op)

    @staticmethod
    def unsupported(op) -> dict:
        """The answer to an operation this testee does not support (docs/testee-protocol.md)."""
        return {"ok": False, "error": "EOPNOTSUPP", "detail": f"operation {op!r} is not supported"}

    @property
    def target(self) -> Target:
        if self._target is None:
            self._target = self.target_class(self.target_config)
        return self._target

    def target_op(self, op: str, request: dict) -> dict:
        """exchange, reset, restart, end_recovery (docs/target-rules.md)."""
        if op == "exchange":
            data = _hex_arg(request, "data")
            xid, client = request.get("xid"), request.get("client")
            if isinstance(xid, bool) or not isinstance(xid, int) or not 0 <= xid < 1 << 64:
                raise CodecError("EINVAL", "request field 'xid' must be an integer from 0 to 2^64-1")
            if not isinstance(client, str):
                raise CodecError("EINVAL", "request field 'client' must be a string")
            return self.target.exchange(data, xid, client)
        if op == "reset":
            self._target = self.target_class(self.target_config)
            return {}
        if op == "restart":
            return {"last_committed": self.target.restart()}
        return {"replies": self.target.end_recovery()}

    def decode_message(self, data: bytes, direction: str) -> dict:
        """A MESSAGE; with `structs`, the buffers the request format defines are decoded too."""
        message = self.codec.decode(data, direction)
        if "structs" not in self.capabilities:
            return message
        opc = message["body"]["pb_opc"]
        for fmt in self.structs.config.message_formats.values():
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
