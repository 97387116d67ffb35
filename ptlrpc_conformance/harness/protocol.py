"""Testee protocol v1: message shapes, outcome classes and validation of responses.

The normative text is docs/testee-protocol.md; the JSON Schema is
ptlrpc_conformance/schemas/testee-protocol-v1.json.  This module checks what comes back
from an IUT and turns it into an `Outcome`:

  ok        the IUT answered {"ok": true, "result": ...}
  error     the IUT answered {"ok": false, "error": ERRNO_NAME, ...}: a rejection
  crash     the IUT process died, or the in-process implementation raised
  timeout   no answer within the per-call timeout
  protocol  an answer that breaks the protocol (not JSON, wrong id, wrong shape)

The last three are harness/protocol trouble: the case fails with that reason, never
passes, and the report keeps them apart from conformance failures.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

PROTOCOL_VERSION = 1

# which capability each operation needs; ops not listed (hello) need none
CAPABILITY_OF_OP = {
    "decode": "decode",
    "encode": "encode",
    "exchange": "target",
    "reset": "target",
    "decode_struct": "structs",
    "encode_struct": "structs",
    "restart": "restart",
    "end_recovery": "restart",
}
KNOWN_CAPABILITIES = frozenset(CAPABILITY_OF_OP.values())
ERRNO_NAME = re.compile(r"^E[A-Z0-9]{1,31}$")


@dataclass(frozen=True)
class Outcome:
    kind: str
    result: Any = None
    error: str | None = None
    detail: str = ""

    TROUBLE = ("crash", "timeout", "protocol")

    @classmethod
    def crash(cls, detail: str) -> "Outcome":
        return cls("crash", detail=detail)

    @classmethod
    def timeout(cls, detail: str) -> "Outcome":
        return cls("timeout", detail=detail)

    @classmethod
    def protocol(cls, detail: str) -> "Outcome":
        return cls("protocol", detail=detail)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def rejected(self) -> bool:
        return self.kind == "error"

    @property
    def trouble(self) -> bool:
        return self.kind in self.TROUBLE

    def describe(self) -> str:
        if self.kind == "ok":
            return "accepted"
        if self.kind == "error":
            return f"rejected with {self.error}" + (f" ({self.detail})" if self.detail else "")
        return f"{self.kind}: {self.detail}"


@dataclass(frozen=True)
class Hello:
    name: str
    version: str
    capabilities: frozenset
    protocol: int
    errno_agnostic: bool = False
    raw: dict = field(default_factory=dict, compare=False)

    def as_dict(self) -> dict:
        return dict(self.raw)


class HelloError(Exception):
    pass


def parse_hello(result: Any) -> Hello:
    if not isinstance(result, dict):
        raise HelloError("hello result is not an object")
    for key, typ in (("name", str), ("version", str), ("capabilities", list), ("protocol", int)):
        if key not in result:
            raise HelloError(f"hello result has no {key!r}")
        if not isinstance(result[key], typ) or isinstance(result[key], bool):
            raise HelloError(f"hello {key!r} must be a {typ.__name__}")
    if result["protocol"] != PROTOCOL_VERSION:
        raise HelloError(f"hello says protocol {result['protocol']}; this suite speaks protocol {PROTOCOL_VERSION}")
    if not all(isinstance(c, str) for c in result["capabilities"]):
        raise HelloError("hello capabilities must be strings")
    agnostic = result.get("errno_agnostic", False)
    if not isinstance(agnostic, bool):
        raise HelloError("hello 'errno_agnostic' must be a boolean")
    caps = frozenset(c for c in result["capabilities"] if c in KNOWN_CAPABILITIES)  # unknown names ignored
    return Hello(result["name"], result["version"], caps, result["protocol"], agnostic, dict(result))


def check_response(response: Any, expected_id: Any) -> Outcome:
    """Validate one response object; `expected_id` None skips the id check (in-process)."""
    if not isinstance(response, dict):
        return Outcome.protocol(f"response is not a JSON object: {str(response)[:80]}")
    if expected_id is not None:
        rid = response.get("id")
        if type(rid) is not int or rid != expected_id:   # 1.0 and true are not the integer 1
            return Outcome.protocol(f"response id {rid!r}, expected {expected_id}")
    ok = response.get("ok")
    if ok is True:
        if "result" not in response:
            return Outcome.protocol("response has ok=true but no result")
        return Outcome("ok", result=response["result"])
    if ok is False:
        error = response.get("error")
        if not isinstance(error, str) or not ERRNO_NAME.match(error):
            return Outcome.protocol(f"response has ok=false but error {error!r} is not an errno name")
        detail = response.get("detail", "")
        return Outcome("error", error=error, detail=detail if isinstance(detail, str) else str(detail))
    return Outcome.protocol(f"response has no boolean 'ok': {str(response)[:80]}")
