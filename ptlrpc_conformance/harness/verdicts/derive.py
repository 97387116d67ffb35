"""Derived cases: variants of the golden vectors computed by the suite, never by an IUT.

From every `valid` vector:
  <id>.swabbed            its byte-swapped twin: exactly the words Lustre swabs are
                          reversed (not lm_padding_3, pb_handle, pb_padding0,
                          pb_padding64_0/1, pb_jobid, nor buffers after the first); it must
                          decode to the same header, buflens and body in the other byte order
  <id>.cut-N              the first N bytes, for cuts in each region of the message: the
                          fixed header, lm_buflens[] and its pad, each buffer, the trailing
                          bytes (cuts shorter than the required length must be rejected with
                          EINVAL; cuts inside trailing bytes stay valid)
  <id>.bufcount+1/-1      lm_bufcount one more / one less
  <id>.buflenI+1/-1       lm_buflens[I] one more / one less
The verdicts of cuts and ±1 variants come from the rule model (harness/verdicts/model.py).

Variants are grouped into cases, one per vector and kind (`<id>.cut-buffer0.decode`,
`<id>.buflen-pm1.decode`, ...), each sent to the IUT as one batch with the vector itself
(`control`: when the IUT rejects the vector too, a variant's rejection is charged as the
vector's is).  Vectors over `MAX_DERIVE_SIZE` bytes get their twin only; a cut region longer
than 64 bytes is sampled (its first and last 24 cuts and 16 between).

Requirements (charges.py): a variant the model rejects names the requirement of the rule it
breaks; one the model accepts, the boundary it sits on (a cut inside trailing bytes
PAD-TRAILING-1, lm_bufcount one off HDR-BUFCOUNT-1, a buffer length one off HDR-TOTAL-1).  A
twin names the byte-order requirements (HDR-MAGIC-2, HDR-SWAB-1, BODY-SWAB-1 for a
big-endian twin; HDR-MAGIC-1 for the little-endian twin of a big-endian vector).  A case
lists what its variants' judges can charge: those, the requirements of the fields they
compare, the vector's own acceptance requirements (charged when the vector is rejected too)
and DEC-ROBUST-1.
"""
from __future__ import annotations

import operator
from dataclasses import dataclass, replace

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.verdicts import charges
from ptlrpc_conformance.harness.verdicts.model import predict
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.data.vectors import Vector

MAX_DERIVE_SIZE = 64 * 1024
TWIN, VARIANT = "twin", "variant"        # how the judge charges a case's failures (judge.TWIN, judge.VARIANT)


@dataclass(frozen=True)
class DerivedCase:
    id: str                      # case id (ends in .decode)
    title: str
    requirements: tuple[str, ...]  # everything its variants' judges can charge
    origin: Vector               # the valid vector it comes from, sent along as the control
    variants: tuple[Vector, ...]
    role: str = VARIANT          # TWIN or VARIANT


def _case(case_id: str, title: str, origin: Vector, variants: tuple[Vector, ...], role: str) -> DerivedCase:
    reqs = charges.ordered(*(charges.variant_requirements(v, origin, role) for v in variants))
    return DerivedCase(case_id, title, tuple(reqs), origin, variants, role)


def _round8(n: int) -> int:
    return -(-n // 8) * 8


def _order(data: bytes) -> str:
    swabbed = spec.constant("LUSTRE_MSG_MAGIC_V2_SWABBED")
    return "big" if len(data) >= 12 and int.from_bytes(data[8:12], "little") == swabbed else "little"


def swab(data: bytes) -> bytes:
    """Reverse, in place, every field Lustre swabs: the header words but lm_padding_3, every
    lm_buflens[i], and the integer fields of the ptlrpc_body in buffer 0 (BODY-8)."""
    order = _order(data)
    out = bytearray(data)
    unswabbed = set(spec.facts()["unswabbed"]["lustre_msg_v2"]) | set(spec.facts()["unswabbed"]["ptlrpc_body_v3"])

    def flip(offset: int, size: int) -> None:
        out[offset:offset + size] = out[offset:offset + size][::-1]

    hdr = spec.layout("lustre_msg_v2")
    count = int.from_bytes(data[0:4], order)
    for f in hdr.fields:
        if not f.flexible and f.name not in unswabbed:
            flip(f.offset, f.size)
    base = hdr.field("lm_buflens").offset
    lens = [int.from_bytes(data[base + 4 * i: base + 4 * i + 4], order) for i in range(count)]
    for i in range(count):
        flip(base + 4 * i, 4)
    body_at = _round8(base + 4 * count)
    for f in spec.layout("ptlrpc_body_v3").fields:
        if f.name in unswabbed or f.end > lens[0]:
            continue
        if f.count:
            for i in range(f.count):
                flip(body_at + f.offset + i * f.elem_size, f.elem_size)
        else:
            flip(body_at + f.offset, f.size)
    return bytes(out)


def _variant(origin: Vector, suffix: str, data: bytes, tolerate_wrap: bool, title: str, kind: str) -> Vector:
    """A variant judged by the model; its requirement is the rule it breaks, or the boundary
    of its `kind` (cut, bufcount, buflen) when the model accepts it."""
    p = predict(data, origin.direction, tolerate_wrap)
    requirement = p.requirement or charges.BOUNDARY[kind]
    return Vector(id=f"{origin.id}.{suffix}", title=f"{title} ({p.rule or 'passes every check'})",
                  requirements=(requirement,), cite=("suite rule model (harness/verdicts/model.py)", *origin.cite),
                  verdict=p.verdict, direction=origin.direction, data=data,
                  expect=p.expect if p.verdict == "valid" else None, errno=p.errno, source=origin.source)


def twin(v: Vector) -> Vector:
    data = swab(v.data)
    expect = {k: val for k, val in (v.expect or {}).items() if k not in ("buffers", "computed_cksum")}
    expect["byte_order"] = "little" if _order(v.data) == "big" else "big"
    return replace(v, id=f"{v.id}.swabbed", title=f"byte-swapped twin of: {v.title}", data=data, expect=expect,
                   canonical=False, requirements=charges.byte_order_requirements(data),
                   cite=("RULES HDR-3, BODY-8", *v.cite), overrides={})


def _sample(lo: int, hi: int) -> list[int]:
    span = list(range(lo, hi))
    if len(span) <= 64:
        return span
    middle = span[24:-24]
    step = max(1, len(middle) // 16)
    return span[:24] + middle[::step][:16] + span[-24:]


def cut_regions(v: Vector) -> list[tuple[str, list[int]]]:
    data = v.data
    p = predict(data, v.direction)
    order = _order(data)
    count = int.from_bytes(data[0:4], order)
    header = _round8(32 + 4 * count)
    regions = [("cut-fixed", list(range(0, 32))), ("cut-buflens", list(range(32, header)))]
    lens = [int.from_bytes(data[32 + 4 * i:36 + 4 * i], order) for i in range(count)]
    at = header
    for i, n in enumerate(lens):
        if n:
            regions.append((f"cut-buffer{i}", _sample(at, at + _round8(n))))
        at += _round8(n)
    if p.required_length is not None and len(data) > p.required_length:
        regions.append(("cut-trailing", _sample(p.required_length, len(data))))
    return [(name, cuts) for name, cuts in regions if cuts]


def _distance(a: bytes, b: bytes) -> int:
    """The bytes in which `a` and `b` differ, position by position; a byte beyond the shorter
    one counts as differing."""
    return sum(map(operator.ne, a, b)) + abs(len(a) - len(b))      # map: a million pairs a run


def neighbour(vector: Vector, vectors) -> Vector | None:
    """The valid neighbour of an invalid (or implementation-defined) vector: the control sent
    with it, whose acceptance makes its rejection evidence (docs/vectors.md).  Among the valid
    vectors of the same operation and direction (for a structure: the same structure and byte
    order), the one whose bytes differ from it in the fewest positions; ties go to the
    lower id.  None when there is no such vector."""
    def same_kind(v: Vector) -> bool:
        if v.op != vector.op or v.verdict != "valid":
            return False
        if vector.op == "decode_struct":
            return v.struct == vector.struct and v.byte_order == vector.byte_order
        return v.direction == vector.direction
    candidates = [v for v in vectors if same_kind(v)]
    return min(candidates, key=lambda v: (_distance(v.data, vector.data), v.id), default=None)


def derive(vectors: list[Vector], profile: str | None = None) -> list[DerivedCase]:
    tolerate = bool(profile) and registry.profile(profile).has("literal")
    cases: list[DerivedCase] = []
    for v in vectors:
        if v.verdict != "valid":
            continue
        t = twin(v)
        cases.append(_case(f"{t.id}.decode", t.title, v, (t,), TWIN))
        if len(v.data) > MAX_DERIVE_SIZE:
            continue
        for region, cuts in cut_regions(v):
            variants = tuple(_variant(v, f"cut-{k}", v.data[:k], tolerate, f"first {k} bytes of {v.id}", "cut")
                             for k in cuts)
            cases.append(_case(f"{v.id}.{region}.decode", f"{v.id} cut short inside {region[4:]}", v, variants,
                               VARIANT))
        order = _order(v.data)
        count = int.from_bytes(v.data[0:4], order)
        pm = []
        for delta, sign in ((1, "+"), (-1, "-")):
            data = bytearray(v.data)
            data[0:4] = ((count + delta) % (1 << 32)).to_bytes(4, order)
            pm.append(_variant(v, f"bufcount{sign}1", bytes(data), tolerate, f"lm_bufcount {sign}1 in {v.id}",
                               "bufcount"))
        cases.append(_case(f"{v.id}.bufcount-pm1.decode", f"lm_bufcount of {v.id} one off", v, tuple(pm), VARIANT))
        pm = []
        for i in range(count):
            at = 32 + 4 * i
            n = int.from_bytes(v.data[at:at + 4], order)
            for delta, sign in ((1, "+"), (-1, "-")):
                data = bytearray(v.data)
                data[at:at + 4] = ((n + delta) % (1 << 32)).to_bytes(4, order)
                pm.append(_variant(v, f"buflen{i}{sign}1", bytes(data), tolerate,
                                   f"lm_buflens[{i}] {sign}1 in {v.id}", "buflen"))
        cases.append(_case(f"{v.id}.buflen-pm1.decode", f"each lm_buflens[] of {v.id} one off", v, tuple(pm),
                           VARIANT))
    return cases
