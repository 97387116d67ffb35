"""The MESSAGE (docs/testee-protocol.md section 2.2) as JSON values, described once from the
protocol facts: each lustre_msg_v2 header field and each ptlrpc_body field with the JSON value
it takes (an unsigned or signed integer of its width, a list of integers, text up to the NUL).

Two readers share it: the testee protocol checks every decode result an IUT returns against it
(harness/transport/protocol.py, `message_shape_problems`, and the protocol's JSON Schema), and
the vector files' schema says with it what a vector's `expect` may hold
(harness/data/vector_schema.py).  It reads spec/ only.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ptlrpc_conformance import spec

BYTE_ORDERS = ("little", "big")


@dataclass(frozen=True)
class Value:
    """The JSON form of one MESSAGE field: `uint`/`int` an unsigned/signed integer of `bits`,
    `uints` a list of `count` unsigned integers of `bits`, `text` at most `count` characters."""
    kind: str
    bits: int = 0
    count: int = 0

    @property
    def noun(self) -> str:
        """What the value must be, in words ("an unsigned 32-bit integer")."""
        return {"uint": f"an unsigned {self.bits}-bit integer", "int": f"a signed {self.bits}-bit integer",
                "uints": f"a list of {self.count} unsigned integers",
                "text": f"a string of at most {self.count} characters"}[self.kind]

    def _range(self) -> tuple[int, int]:
        if self.kind == "int":
            return -(1 << (self.bits - 1)), (1 << (self.bits - 1)) - 1
        return 0, (1 << self.bits) - 1

    def accepts(self, v: Any) -> bool:
        if self.kind == "text":
            return isinstance(v, str) and len(v) <= self.count
        if self.kind == "uints":
            return isinstance(v, list) and len(v) == self.count and all(Value("uint", self.bits).accepts(x) for x in v)
        lo, hi = self._range()
        return type(v) is int and lo <= v <= hi         # not bool, not 1.0

    def schema(self) -> dict:
        """The JSON Schema of the value."""
        if self.kind == "text":
            return {"type": "string", "maxLength": self.count}
        if self.kind == "uints":
            return {"type": "array", "items": Value("uint", self.bits).schema(),
                    "minItems": self.count, "maxItems": self.count}
        lo, hi = self._range()
        return {"type": "integer", "minimum": lo, "maximum": hi}

    def problem(self, path: str, v: Any) -> str | None:
        """None, or the line that says `v` is not this value."""
        if self.accepts(v):
            return None
        if self.kind in ("uint", "int"):
            return f"{path} = {v!r} is not {self.noun}"
        return f"{path} is not {self.noun}"


def values(struct_name: str) -> dict[str, Value]:
    """Every fixed field of a structure, as the MESSAGE carries it: integers at their width
    (signed where facts.json says so), arrays as lists, char arrays as text up to the NUL."""
    signed = set(spec.facts()["signed"].get(struct_name, ()))
    out: dict[str, Value] = {}
    for f in spec.layout(struct_name).fields:
        if f.flexible:
            continue
        if f.count and f.type.startswith("char"):
            out[f.name] = Value("text", count=f.size - 1)          # the last byte is the NUL
        elif f.count:
            out[f.name] = Value("uints", bits=8 * f.elem_size, count=f.count)
        else:
            out[f.name] = Value("int" if f.name in signed else "uint", bits=8 * f.size)
    return out



U32 = Value("uint", 32)
MAX_BUFCOUNT = spec.constant("PTLRPC_MAX_BUFCOUNT")
HEADER: dict[str, Value] = values("lustre_msg_v2")         # exactly these members
BODY: dict[str, Value] = values("ptlrpc_body_v3")          # no other members
BODY_REQUIRED: tuple[str, ...] = tuple(spec.layout("ptlrpc_body_v2").names())
BODY_FULL_SIZE = spec.constant("PTLRPC_BODY_V3_SIZE")      # fields beyond v2 present iff lm_buflens[0] >= this
