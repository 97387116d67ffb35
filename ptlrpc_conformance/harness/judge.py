"""Verdicts: what an IUT's outcome means for a case, with the message a person reads.

Every failure message carries the annotated hex dump of the bytes involved and
expected-vs-actual for each differing field.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .. import spec
from . import hexdump
from .protocol import Outcome
from .vectors import DECODE_ERRNOS, HEADER_FIELDS, Vector

PASS, FAIL, NOT_APPLICABLE, ERROR = "pass", "fail", "not-applicable", "error"


@dataclass
class Judgement:
    status: str
    message: str = ""
    notes: dict = field(default_factory=dict)   # extra facts for the report (errno class, ...)

    @classmethod
    def unexpected(cls, outcome: Outcome, context: str) -> "Judgement":
        """An operation that should have succeeded did not: an error for harness trouble,
        else a failure."""
        return cls(ERROR if outcome.trouble else FAIL, f"{context}: {outcome.describe()}")

    def failing(self, vector: Vector, signature: str, highlight=None, actual: bytes | None = None) -> "Judgement":
        """Attach what a report needs of a failure: a short signature (what went wrong, for
        known-failures files), the input as a reproducer vector, the bytes to show."""
        from .vectors import to_file_dict
        self.notes["signature"] = signature
        self.notes["reproducer"] = to_file_dict(vector)
        if highlight:
            self.notes["highlight"] = sorted(highlight)[:4096]
        if actual is not None:
            self.notes["actual_hex"] = actual.hex()
        return self


def _outcome_signature(outcome) -> str:
    if outcome.trouble:
        return f"error:{outcome.kind}"
    return "accepted" if outcome.ok else f"rejected:{outcome.error}"


def _u(v, bits: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < (1 << bits)


def message_shape_problems(msg, partial_buffers: bool = False) -> list[str]:
    """What in a decode result breaks the MESSAGE shape of testee protocol v1.
    `partial_buffers`: a buffer may hold fewer bytes than its buflen (an accepted message
    whose buflen wrapped, docs/testee-protocol.md section 5)."""
    if not isinstance(msg, dict):
        return ["result is not an object"]
    p: list[str] = []
    if msg.get("byte_order") not in ("little", "big"):
        p.append(f"byte_order is {msg.get('byte_order')!r}, not 'little' or 'big'")
    header = msg.get("header")
    if not isinstance(header, dict):
        p.append("header is not an object")
    else:
        if set(header) != set(HEADER_FIELDS):
            missing = sorted(set(HEADER_FIELDS) - set(header))
            extra = sorted(set(header) - set(HEADER_FIELDS))
            p.append("header fields differ from the protocol's eight"
                     + (f"; missing {missing}" if missing else "") + (f"; unexpected {extra}" if extra else ""))
        for k, v in header.items():
            if k in HEADER_FIELDS and not _u(v, 32):
                p.append(f"header.{k} = {v!r} is not an unsigned 32-bit integer")
    buflens = msg.get("buflens")
    if not isinstance(buflens, list) or not all(_u(v, 32) for v in buflens):
        p.append("buflens is not a list of unsigned 32-bit integers")
    elif isinstance(header, dict) and header.get("lm_bufcount") != len(buflens):
        p.append(f"buflens has {len(buflens)} entries, lm_bufcount is {header.get('lm_bufcount')}")
    body = msg.get("body")
    layout = spec.layout("ptlrpc_body_v3")
    signed = set(spec.facts()["signed"]["ptlrpc_body_v3"])
    if not isinstance(body, dict):
        p.append("body is not an object")
    else:
        names = {f.name: f for f in layout.fields}
        for k in body:
            if k not in names:
                p.append(f"body.{k} is not a ptlrpc_body field")
        for f in layout.fields:
            if f.name == "pb_jobid":
                if "pb_jobid" in body and not (isinstance(body["pb_jobid"], str) and len(body["pb_jobid"]) <= 31):
                    p.append("body.pb_jobid is not a string of at most 31 characters")
                continue
            if f.name not in body:
                p.append(f"body.{f.name} is missing")
                continue
            v = body[f.name]
            if f.count:
                if not (isinstance(v, list) and len(v) == f.count and all(_u(x, 8 * f.elem_size) for x in v)):
                    p.append(f"body.{f.name} is not a list of {f.count} unsigned integers")
            elif f.name in signed:
                if not (isinstance(v, int) and not isinstance(v, bool) and -(1 << 31) <= v < (1 << 31)):
                    p.append(f"body.{f.name} = {v!r} is not a signed 32-bit integer")
            elif not _u(v, 8 * f.size):
                p.append(f"body.{f.name} = {v!r} is not an unsigned {8 * f.size}-bit integer")
        if isinstance(buflens, list) and buflens and _u(buflens[0], 32):
            has_jobid = buflens[0] >= spec.constant("PTLRPC_BODY_V3_SIZE")
            if has_jobid != ("pb_jobid" in body):
                p.append("body.pb_jobid must be present exactly when lm_buflens[0] >= 184"
                         f" (lm_buflens[0] = {buflens[0]}, pb_jobid {'present' if 'pb_jobid' in body else 'absent'})")
    buffers = msg.get("buffers")
    if not isinstance(buffers, list) or not all(isinstance(b, str) for b in buffers):
        p.append("buffers is not a list of hex strings")
    else:
        for i, b in enumerate(buffers):
            try:
                raw = bytes.fromhex(b)
            except ValueError:
                p.append(f"buffers[{i}] is not hex")
                continue
            if isinstance(buflens, list) and i < len(buflens) and len(raw) != buflens[i] \
                    and not (partial_buffers and len(raw) < buflens[i]):
                p.append(f"buffers[{i}] has {len(raw)} bytes, lm_buflens[{i}] is {buflens[i]}")
        if isinstance(buflens, list) and len(buffers) != len(buflens):
            p.append(f"{len(buffers)} buffers for {len(buflens)} buflens")
    if "computed_cksum" in msg and not _u(msg["computed_cksum"], 32):
        p.append("computed_cksum is not an unsigned 32-bit integer")
    return p


def _fmt(v) -> str:
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, int):
        return f"{v} ({v & 0xFFFFFFFFFFFFFFFF:#x})" if v < 0 else (f"{v} ({v:#x})" if v > 9 else str(v))
    return repr(v)


def compare_fields(want, got, path: str, diffs: list[str]) -> None:
    """Partial comparison: every key listed in `want` (recursively in objects) must be in
    `got` with an equal value; lists compare whole."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            diffs.append(f"{path}: expected an object, got {_fmt(got)}")
            return
        for k, w in want.items():
            if k not in got:
                diffs.append(f"{path}.{k}: expected {_fmt(w) if not isinstance(w, dict) else 'an object'}, got nothing")
            else:
                compare_fields(w, got[k], f"{path}.{k}", diffs)
    elif want != got:
        diffs.append(f"{path}: expected {_fmt(want)}, got {_fmt(got)}")


def compare_struct(expect: dict, actual, path: str, diffs: list[str]) -> bool:
    """Compare a struct expectation {fields, valid}; returns whether `valid` was compared
    (an IUT that reports no valid view is not judged on it)."""
    if not isinstance(actual, dict) or not isinstance(actual.get("fields"), dict):
        diffs.append(f"{path}: expected {{type, fields}}, got {str(actual)[:120]}")
        return False
    if "type" in expect and actual.get("type") != expect["type"]:
        diffs.append(f"{path}.type: expected {expect['type']!r}, got {actual.get('type')!r}")
    if "fields" in expect:
        compare_fields(expect["fields"], actual["fields"], f"{path}.fields", diffs)
    if "valid" in expect and "valid" in actual:
        got = actual["valid"]
        if not isinstance(got, list) or sorted(map(str, got)) != sorted(expect["valid"]):
            diffs.append(f"{path}.valid: expected {sorted(expect['valid'])}, got {got}")
        return True
    return False


def compare_message(expect: dict, actual: dict, with_structs: bool = True) -> tuple[list[str], bool]:
    """Differences between the listed expected fields and a decode result.
    Returns (differences, checksum_compared)."""
    diffs: list[str] = []
    cksum_compared = False
    for key, want in expect.items():
        if key == "byte_order":
            if actual.get("byte_order") != want:
                diffs.append(f"byte_order: expected {want!r}, got {actual.get('byte_order')!r}")
        elif key in ("header", "body"):
            got_obj = actual.get(key) or {}
            for name, w in want.items():
                if w is None:
                    if name in got_obj:
                        diffs.append(f"{key}.{name}: expected absent, got {_fmt(got_obj[name])}")
                elif name not in got_obj:
                    diffs.append(f"{key}.{name}: expected {_fmt(w)}, got nothing")
                elif got_obj[name] != w:
                    diffs.append(f"{key}.{name}: expected {_fmt(w)}, got {_fmt(got_obj[name])}")
        elif key == "buflens":
            if actual.get("buflens") != want:
                diffs.append(f"buflens: expected {want}, got {actual.get('buflens')}")
        elif key == "buffers":
            got = actual.get("buffers") or []
            for i, w in enumerate(want):
                if w is None:
                    continue
                g = got[i] if i < len(got) else None
                if g is None or g.lower() != w.lower():
                    diffs.append(f"buffers[{i}]: expected {w or '(empty)'}, got {g if g is not None else 'nothing'}")
        elif key == "structs":
            if not with_structs:
                continue
            got = actual.get("structs")
            for index, entry in want.items():
                if not isinstance(got, dict) or str(index) not in got:
                    diffs.append(f"structs.{index}: expected a decoded {entry.get('type')}, got nothing")
                else:
                    compare_struct(entry, got[str(index)], f"structs.{index}", diffs)
        elif key == "computed_cksum":
            if "computed_cksum" in actual:
                cksum_compared = True
                if actual["computed_cksum"] != want:
                    diffs.append(f"computed_cksum: expected {want:#010x}, got {_fmt(actual['computed_cksum'])}")
    return diffs, cksum_compared


def _dump(title: str, data: bytes, highlight: set[int] | None = None) -> str:
    return f"{title} ({len(data)} bytes):\n{hexdump.render(data, highlight)}"


def judge_decode(vector: Vector, outcome: Outcome, errno_agnostic: bool = False,
                 with_structs: bool = False) -> Judgement:
    head = f"{vector.id}: {vector.title}\n"

    def dump() -> str:   # rendered only for a failure message
        return _dump(f"input, {vector.direction}", vector.data)
    if outcome.trouble:
        return Judgement(ERROR, f"{head}harness/protocol error ({outcome.kind}): {outcome.detail}\n{dump()}",
                         {"outcome": outcome.kind}).failing(vector, _outcome_signature(outcome))
    j = _judge_decode(vector, outcome, errno_agnostic, with_structs, head, dump)
    if j.status == FAIL:
        first = j.notes.pop("first_diff", None)
        j.failing(vector, f"field:{first}" if first else _outcome_signature(outcome))
    return j


def _judge_decode(vector, outcome, errno_agnostic, with_structs, head, dump) -> Judgement:
    if vector.verdict == "acceptable":
        if outcome.rejected and outcome.error not in DECODE_ERRNOS:
            return Judgement(FAIL, f"{head}implementation-defined input: acceptance or rejection are both fine, "
                                   f"but decode rejections are {'/'.join(DECODE_ERRNOS)}, got {outcome.error}\n{dump()}")
        if outcome.ok:
            shape = message_shape_problems(outcome.result, partial_buffers=True)
            if shape:
                return Judgement(FAIL, f"{head}accepted, but the result is not a well-formed MESSAGE:\n  "
                                 + "\n  ".join(shape) + f"\n{dump()}")
        return Judgement(PASS, notes={"accepted": outcome.ok})
    if vector.verdict == "invalid":
        if outcome.ok:
            return Judgement(FAIL, f"{head}expected: rejected with {' or '.join(vector.errno)}\n"
                                   f"actual:   accepted\n{dump()}")
        if outcome.error in vector.errno:
            return Judgement(PASS, notes={"errno": outcome.error})
        if errno_agnostic:
            return Judgement(PASS, notes={"errno": outcome.error, "errno_class_mismatch":
                                          f"expected {'/'.join(vector.errno)}, got {outcome.error}"})
        return Judgement(FAIL, f"{head}expected: rejected with {' or '.join(vector.errno)}\n"
                               f"actual:   rejected with {outcome.error}"
                               + (f" ({outcome.detail})" if outcome.detail else "") + f"\n{dump()}")
    # valid
    if outcome.rejected:
        return Judgement(FAIL, f"{head}expected: accepted\nactual:   rejected with {outcome.error}"
                               + (f" ({outcome.detail})" if outcome.detail else "") + f"\n{dump()}")
    shape = message_shape_problems(outcome.result)
    if shape:
        return Judgement(FAIL, f"{head}accepted, but the result is not a well-formed MESSAGE:\n  "
                         + "\n  ".join(shape) + f"\n{dump()}", {"first_diff": "malformed-result"})
    diffs, cksum_compared = compare_message(vector.expect or {}, outcome.result, with_structs)
    only_cksum = all(r.startswith("CKSUM-") for r in vector.requirements)
    if only_cksum and not cksum_compared:
        return Judgement(NOT_APPLICABLE, "the IUT reports no computed_cksum")
    if diffs:
        return Judgement(FAIL, f"{head}decoded fields differ (expected vs actual):\n  " + "\n  ".join(diffs)
                         + f"\n{dump()}", {"first_diff": diffs[0].split(":", 1)[0]})
    return Judgement(PASS)


def _vdump(vector: Vector, title: str, data: bytes, highlight: set[int] | None = None) -> str:
    if vector.op == "decode_struct":
        return f"{title} ({len(data)} bytes, {vector.struct}):\n{hexdump.render_struct(vector.struct, data, highlight)}"
    return _dump(title, data, highlight)


def judge_encode(vector: Vector, outcome: Outcome) -> Judgement:
    head = f"{vector.id}: {vector.title} (encode)\n"
    expected = vector.data
    if outcome.trouble:
        return Judgement(ERROR, f"{head}harness/protocol error ({outcome.kind}): {outcome.detail}",
                         {"outcome": outcome.kind}).failing(vector, _outcome_signature(outcome))
    if outcome.rejected:
        return Judgement(FAIL, f"{head}expected: the canonical bytes\nactual:   encode refused with "
                               f"{outcome.error} ({outcome.detail})\n{_vdump(vector, 'expected', expected)}"
                         ).failing(vector, f"encode-rejected:{outcome.error}")
    result = outcome.result
    data_hex = result.get("data") if isinstance(result, dict) else None
    try:
        actual = bytes.fromhex(data_hex) if isinstance(data_hex, str) else None
    except ValueError:
        actual = None
    if actual is None:
        return Judgement(FAIL, f"{head}the encode result has no hex 'data': {str(result)[:200]}"
                         ).failing(vector, "encode-malformed-result")
    if actual == expected:
        return Judgement(PASS)
    differing = {i for i in range(max(len(actual), len(expected)))
                 if i >= len(actual) or i >= len(expected) or actual[i] != expected[i]}
    first = min(differing)
    return Judgement(FAIL, f"{head}encoded bytes differ from the canonical bytes "
                           f"(expected {len(expected)} bytes, got {len(actual)}; first difference at offset {first}; "
                           f"differing bytes marked *)\n"
                           f"{_vdump(vector, 'expected', expected, differing)}\n"
                           f"{_vdump(vector, 'actual', actual, differing)}"
                     ).failing(vector, f"bytes@{first}", differing, actual)


def combine(case_id: str, variants, judgements: list[Judgement]) -> Judgement:
    """One verdict for a case made of several variants: an error if any variant hit
    harness trouble, else a failure if any failed (listing them, with the first one's
    full message), else a pass; not applicable only if every variant was."""
    bad = [(v, j) for v, j in zip(variants, judgements) if j.status in (FAIL, ERROR)]
    if bad:
        status = ERROR if any(j.status == ERROR for _, j in bad) else FAIL
        names = ", ".join(v.id.rsplit(".", 1)[-1] for v, _ in bad[:20]) + (" ..." if len(bad) > 20 else "")
        notes = {k: v for k, v in bad[0][1].notes.items() if k in ("signature", "reproducer", "highlight", "outcome")}
        return Judgement(status, f"{case_id}: {len(bad)} of {len(judgements)} variants failed: {names}\n"
                                 f"first failure:\n{bad[0][1].message}", notes)
    if judgements and all(j.status == NOT_APPLICABLE for j in judgements):
        return Judgement(NOT_APPLICABLE, judgements[0].message)
    return Judgement(PASS)


def judge_struct(vector: Vector, outcome: Outcome, required: bool) -> Judgement:
    """A decode_struct vector.  `required`: the structure is one every IUT with the
    `structs` capability must know; for others EOPNOTSUPP makes the case not applicable."""
    head = f"{vector.id}: {vector.title}\n"

    def dump() -> str:
        return _vdump(vector, f"input, {vector.byte_order}-endian", vector.data)
    if outcome.trouble:
        return Judgement(ERROR, f"{head}harness/protocol error ({outcome.kind}): {outcome.detail}\n{dump()}",
                         {"outcome": outcome.kind}).failing(vector, _outcome_signature(outcome))
    j = _judge_struct(vector, outcome, required, head, dump)
    if j.status == FAIL:
        first = j.notes.pop("first_diff", None)
        j.failing(vector, f"field:{first}" if first else _outcome_signature(outcome))
    return j


def _judge_struct(vector, outcome, required, head, dump) -> Judgement:
    if outcome.rejected and outcome.error == "EOPNOTSUPP" and not required:
        return Judgement(NOT_APPLICABLE, f"the IUT does not support structure {vector.struct}")
    if vector.verdict == "invalid":
        if outcome.ok:
            return Judgement(FAIL, f"{head}expected: rejected\nactual:   accepted: {str(outcome.result)[:300]}\n{dump()}")
        if vector.any_errno or outcome.error in vector.errno:
            return Judgement(PASS, notes={"errno": outcome.error})
        return Judgement(FAIL, f"{head}expected: rejected with {' or '.join(vector.errno)}\n"
                               f"actual:   rejected with {outcome.error}\n{dump()}")
    if outcome.rejected:
        return Judgement(FAIL, f"{head}expected: accepted\nactual:   rejected with {outcome.error}"
                               + (f" ({outcome.detail})" if outcome.detail else "") + f"\n{dump()}")
    diffs: list[str] = []
    valid_compared = compare_struct(vector.expect or {}, outcome.result, vector.struct, diffs)
    if not diffs and "valid" in (vector.expect or {}) and not valid_compared \
            and all(r.startswith("VALID-") for r in vector.requirements):
        return Judgement(NOT_APPLICABLE, "the IUT reports no valid view")
    if diffs:
        return Judgement(FAIL, f"{head}decoded fields differ (expected vs actual):\n  " + "\n  ".join(diffs[:40])
                         + f"\n{dump()}", {"first_diff": diffs[0].split(":", 1)[0]})
    return Judgement(PASS)

