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

The MESSAGE shape a decode returns is described once, from the protocol facts: the value of
each field of lustre_msg_v2 and ptlrpc_body in harness/data/message.py (the vector files'
schema reads it too), the members at the end of this module.  The JSON Schema is
generated from that description (harness/transport/protocol_schema.py, tools/gen_schemas.py)
and every decode result is checked against it (`message_shape_problems`).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ptlrpc_conformance.harness.data.message import (  # noqa: F401 (P.HEADER, P.U32, ... for its readers)
    BODY, BODY_FULL_SIZE, BODY_REQUIRED, BYTE_ORDERS, HEADER, MAX_BUFCOUNT, U32, Value)

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
# "client": an LNet client the suite runs and serves (`client:COMMAND`, loader.py); no testee
# operation needs it
KNOWN_CAPABILITIES = frozenset(CAPABILITY_OF_OP.values()) | {"client"}
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


DECODE_DIRECTIONS = frozenset(("request", "reply"))
# the structure operations of capability `structs` (hello `struct_operations`, default both)
STRUCT_OPERATIONS = frozenset(("decode_struct", "encode_struct"))
# the members of the hello's `configuration` (docs/testee-protocol.md §2.1.2): how the target is
# set up, where Lustre's OST behaves differently by configuration
CONFIGURATION_MEMBERS = ("project_quota", "recovery")


@dataclass(frozen=True)
class Hello:
    name: str
    version: str
    capabilities: frozenset
    protocol: int
    errno_agnostic: bool = False
    raw: dict = field(default_factory=dict, compare=False)
    # the directions whose decode the IUT implements (hello `decode_directions`, default both)
    decode_directions: frozenset = DECODE_DIRECTIONS
    # what the target's hello declares of its configuration (hello `configuration`):
    # {"project_quota": bool, "recovery": bool}, each member optional; {} when none is declared
    configuration: dict = field(default_factory=dict, compare=False)
    # the structure operations the IUT implements (hello `struct_operations`, default both):
    # an implementation with no encoder of its own (Lustre sends its structures as they lie in
    # memory) declares ["decode_struct"]
    struct_operations: frozenset = STRUCT_OPERATIONS

    def as_dict(self) -> dict:
        return dict(self.raw)

    def unknown_capabilities(self) -> list[str]:
        """The capability names the hello declares that this suite does not know (ignored:
        cases that need them are not applicable), in the hello's order."""
        return [c for c in self.raw.get("capabilities") or () if isinstance(c, str) and c not in KNOWN_CAPABILITIES]

    def decodes(self, direction: Any) -> bool:
        """Whether a decode in `direction` applies to this IUT (an unknown direction does: it is
        the testee's to refuse)."""
        return (not isinstance(direction, str) or direction not in DECODE_DIRECTIONS
                or direction in self.decode_directions)


    def implements(self, op: Any) -> bool:
        """Whether a structure operation `op` applies to this IUT (any other op does)."""
        return op not in STRUCT_OPERATIONS or op in self.struct_operations


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
    directions = result.get("decode_directions", sorted(DECODE_DIRECTIONS))
    if (not isinstance(directions, list) or not directions
            or not all(isinstance(d, str) and d in DECODE_DIRECTIONS for d in directions)):
        raise HelloError("hello 'decode_directions' must be a non-empty list of \"request\" and \"reply\"")
    struct_ops = result.get("struct_operations", sorted(STRUCT_OPERATIONS))
    if (not isinstance(struct_ops, list) or not struct_ops
            or not all(isinstance(o, str) and o in STRUCT_OPERATIONS for o in struct_ops)):
        raise HelloError("hello 'struct_operations' must be a non-empty list of \"decode_struct\" and \"encode_struct\"")
    configuration = result.get("configuration", {})
    if not isinstance(configuration, dict) or not all(
            isinstance(configuration[k], bool) for k in CONFIGURATION_MEMBERS if k in configuration):
        raise HelloError("hello 'configuration' must be an object whose members "
                         + " and ".join(repr(k) for k in CONFIGURATION_MEMBERS) + " are booleans")
    caps = frozenset(c for c in result["capabilities"] if c in KNOWN_CAPABILITIES)  # unknown names ignored
    return Hello(result["name"], result["version"], caps, result["protocol"], agnostic, dict(result),
                 frozenset(directions), {k: configuration[k] for k in CONFIGURATION_MEMBERS if k in configuration},
                 frozenset(struct_ops))


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


# ----------------------------------------------------------------------------------------
# The MESSAGE shape (docs/testee-protocol.md section 2.2), described once: each field's value
# in harness/data/message.py, the members and the checks here
# ----------------------------------------------------------------------------------------

HEX = re.compile(r"^([0-9a-fA-F]{2})*$")            # bytes: two digits each, no separators


def is_hex(text: str) -> bool:
    """`text` is pairs of hex digits and nothing else: HEX's test, done in C (the regex takes
    about 0.1 s per MiB of hex, and a decode of a 1 MiB vector returns 2 MiB of it), except
    that a trailing newline, which the regex's `$` lets through, is refused as the published
    schema refuses it."""
    if not text:
        return True
    if not (text.isascii() and text.isalnum()):        # no separators, no other characters
        return False
    try:
        bytes.fromhex(text)                             # hex digits, an even number of them
    except ValueError:
        return False
    return True


@dataclass(frozen=True)
class Member:
    name: str
    required: bool
    what: str           # in words; docs/testee-protocol.md says it at length


MESSAGE: tuple[Member, ...] = (
    Member("byte_order", True, "the sender's byte order: " + " or ".join(BYTE_ORDERS)),
    Member("header", True, f"exactly the {len(HEADER)} lustre_msg_v2 header fields"),
    Member("buflens", True, f"lm_bufcount (1 to {MAX_BUFCOUNT}) unsigned 32-bit buffer lengths"),
    Member("body", True, "every ptlrpc_body_v2 field; the ptlrpc_body_v3 ones exactly when "
                         f"lm_buflens[0] >= {BODY_FULL_SIZE}; no other member"),
    Member("buffers", True, "every buffer's bytes as received, unpadded, as hex"),
    Member("computed_cksum", False, "crc32 of buffer 0 as received (optional)"),
    Member("structs", False, "capability structs: the buffers after the body, decoded, by index "
                             "(judged by comparison, not here)"),
)


class ShapeProblem(str):
    """One line of `message_shape_problems` that also says which member it is about, so the
    judge charges it without reading the text (verdicts/charges.py `shape_requirement`).
    `about` is a (member, field) pair as charges.field_requirements takes it: ("header", f)
    or ("body", f) for one field's value or absence, ("header", "lm_bufcount") for buflens
    against lm_bufcount, ("body", "pb_jobid") for a field a full body adds, present in a
    short body or absent from a full one, ("buffers", None) for a buffer's size or the count
    of buffers, ("computed_cksum", None).  None for the rest: a member that is not an object
    or a list, a field the structure does not have, a byte_order that is neither."""

    about: tuple[str, str | None] | None

    def __new__(cls, text: str, about: tuple[str, str | None] | None = None) -> "ShapeProblem":
        self = super().__new__(cls, text)
        self.about = about
        return self


def message_shape_problems(msg: Any, partial_buffers: bool = False) -> list[ShapeProblem]:
    """What in a decode result breaks the MESSAGE shape described above, one line each.
    `partial_buffers`: a buffer may hold fewer bytes than its buflen (an accepted message
    whose buflen wrapped, docs/testee-protocol.md section 5)."""
    P = ShapeProblem
    if not isinstance(msg, dict):
        return [P("result is not an object")]
    p: list[ShapeProblem] = []
    if msg.get("byte_order") not in BYTE_ORDERS:
        p.append(P(f"byte_order is {msg.get('byte_order')!r}, not " + " or ".join(map(repr, BYTE_ORDERS))))
    header = msg.get("header")
    if not isinstance(header, dict):
        p.append(P("header is not an object"))
    else:
        p += _fields_problems("header", header, HEADER, required=tuple(HEADER), title="lustre_msg_v2 header")
    buflens = msg.get("buflens")
    if not isinstance(buflens, list) or not 1 <= len(buflens) <= MAX_BUFCOUNT or not all(U32.accepts(v) for v in buflens):
        p.append(P(f"buflens is not a list of 1 to {MAX_BUFCOUNT} unsigned 32-bit integers"))
        buflens = None
    elif isinstance(header, dict) and header.get("lm_bufcount") != len(buflens):
        p.append(P(f"buflens has {len(buflens)} entries, lm_bufcount is {header.get('lm_bufcount')}",
                   ("header", "lm_bufcount")))
    body = msg.get("body")
    if not isinstance(body, dict):
        p.append(P("body is not an object"))
    else:
        p += _fields_problems("body", body, BODY, required=BODY_REQUIRED, title="ptlrpc_body")
        if buflens:
            full = buflens[0] >= BODY_FULL_SIZE
            for name in BODY:
                if name not in BODY_REQUIRED and (name in body) != full:
                    p.append(P(f"body.{name} must be present exactly when lm_buflens[0] >= {BODY_FULL_SIZE}"
                               f" (lm_buflens[0] = {buflens[0]}, {name} {'present' if name in body else 'absent'})",
                               ("body", "pb_jobid")))
    buffers = msg.get("buffers")
    if not isinstance(buffers, list) or not all(isinstance(b, str) for b in buffers):
        p.append(P("buffers is not a list of hex strings"))
    else:
        for i, b in enumerate(buffers):
            if not is_hex(b):
                p.append(P(f"buffers[{i}] is not hex", ("buffers", None)))
            elif buflens and i < len(buflens) and len(b) // 2 != buflens[i] \
                    and not (partial_buffers and len(b) // 2 < buflens[i]):
                p.append(P(f"buffers[{i}] has {len(b) // 2} bytes, lm_buflens[{i}] is {buflens[i]}",
                           ("buffers", None)))
        if buflens and len(buffers) != len(buflens):
            p.append(P(f"{len(buffers)} buffers for {len(buflens)} buflens", ("buffers", None)))
    if "computed_cksum" in msg:
        line = U32.problem("computed_cksum", msg["computed_cksum"])
        if line:
            p.append(P(line, ("computed_cksum", None)))
    return p


def _fields_problems(path: str, obj: dict, values: dict[str, Value], required: tuple[str, ...],
                     title: str) -> list[ShapeProblem]:
    p = [ShapeProblem(f"{path}.{k} is not a {title} field") for k in obj if k not in values]
    for name, value in values.items():
        if name in obj:
            line = value.problem(f"{path}.{name}", obj[name])
            if line:
                p.append(ShapeProblem(line, (path, name)))
        elif name in required:
            p.append(ShapeProblem(f"{path}.{name} is missing", (path, name)))
    return p
