"""Verdicts: what an IUT's outcome means for a case, with the message a person reads.

Every failure message carries the annotated hex dump of the bytes involved and
expected-vs-actual for each differing field.  Every failure is charged to the requirements it
breaks (charges.py): the judgement's `failed_requirements` note, which `finish` (called by the
`conclude` fixture) fills for judgements that did not set it and puts at the head of the
message, each requirement with its statement.  Requirements a case could not judge because
the IUT leaves an optional member out (`computed_cksum`, `structs`, a `valid` view) are its
`not_exercised` note: never passed.

A pass records what it is evidence for: the `exercised` note, the requirements whose checks
decided it (charges.py says which, e.g. `decode_exercised`).  Evidence from a rejection
counts only when the IUT accepted a valid neighbour of the rejected input sent in the same
batch (`control`): an IUT that rejects everything earns nothing.  `errno_judged` is false
when rejections were judged by accept/reject only (errno-agnostic): HDR-ORDER-1 is then never
exercised.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ptlrpc_conformance.harness.verdicts import charges as C, hexdump, release
from ptlrpc_conformance.harness.transport.protocol import Outcome, ShapeProblem, message_shape_problems
from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.data.vectors import DECODE_ERRNOS, Vector

PASS, FAIL, NOT_APPLICABLE, ERROR = "pass", "fail", "not-applicable", "error"
# how a decode judge charges a failure (charges.py): a golden vector, a byte-swapped twin, a
# variant the model judges (cut, one off), a property's example the model alone judges, or a
# case whose failures all go to the requirements it was given
VECTOR, TWIN, VARIANT, MODEL, FIXED = "vector", "twin", "variant", "model", "fixed"


class UnreadableResult(Exception):
    """An IUT's accepted result that a check cannot read (a missing member, not hex): the
    IUT's failure, never the suite's (an exception of any other kind in a check is the suite's
    own bug: verdict `error (suite)`)."""


def result_hex(outcome, what: str, member: str = "data") -> bytes:
    """The bytes of an accepted result's hex member, or UnreadableResult saying what is wrong."""
    result = outcome.result
    value = result.get(member) if isinstance(result, dict) else None
    if not isinstance(value, str):
        raise UnreadableResult(f"{what}: the result's {member!r} is not a hex string: {str(result)[:200]}")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise UnreadableResult(f"{what}: the result's {member!r} is not hex: {value[:80]!r}") from None


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

    def charge(self, requirements) -> "Judgement":
        """Charge this failure to `requirements` (kept with those charged before)."""
        self.notes["failed_requirements"] = C.ordered(self.notes.get("failed_requirements") or (), requirements)
        return self

    @property
    def failed_requirements(self) -> list[str]:
        return list(self.notes.get("failed_requirements") or ())

    def failing(self, vector: Vector, signature: str, highlight=None, actual: bytes | None = None) -> "Judgement":
        """Attach what a report needs of a failure: a short signature (what went wrong, for
        known-failures files), the input as a reproducer vector, the bytes to show."""
        from ptlrpc_conformance.harness.data.vectors import to_file_dict
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


def _fmt(v) -> str:
    if isinstance(v, bool) or v is None:
        return repr(v)
    if isinstance(v, int):
        return f"{v} ({v & 0xFFFFFFFFFFFFFFFF:#x})" if v < 0 else (f"{v} ({v:#x})" if v > 9 else str(v))
    return repr(v)


@dataclass
class Diff:
    """One member of a result that differs from the expectation: `key` the top-level member
    (byte_order, header, body, buflens, buffers, structs, computed_cksum), `name` the field
    (for structs: type, fields or valid), `struct` the expected structure, the values, and the
    line a person reads."""
    key: str
    name: str | None
    text: str
    want: object = None
    got: object = None
    struct: str | None = None


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


def _aliased(kind, want: dict, got: dict) -> dict:
    """The decoded fields with a field the result names by another name of the same bytes
    (spec/layouts.py field aliases: a seed's name, or a later Lustre's) under the name the
    expectation uses, when the result lacks that name."""
    from ptlrpc_conformance.spec import layouts
    try:
        aliases = layouts.load()["field_aliases"].get(layouts.canonical(kind), {}) if kind else {}
    except KeyError:
        return got
    out = dict(got)
    for other, current in aliases.items():
        if len(current) == 1 and current[0] in want and current[0] not in got and other in got:
            out[current[0]] = got[other]
    return out


def struct_diffs(expect: dict, actual, path: str) -> tuple[list[Diff], bool]:
    """A struct expectation {type, fields, valid} against a decoded structure: (the
    differences, whether `valid` was compared - an IUT that reports no valid view is not
    judged on it)."""
    kind = expect.get("type")
    if not isinstance(actual, dict) or not isinstance(actual.get("fields"), dict):
        return [Diff("structs", "type", f"{path}: expected {{type, fields}}, got {str(actual)[:120]}", struct=kind)], False
    out: list[Diff] = []
    if "type" in expect and actual.get("type") != expect["type"]:
        out.append(Diff("structs", "type", f"{path}.type: expected {expect['type']!r}, got {actual.get('type')!r}",
                        expect["type"], actual.get("type"), kind))
    if "fields" in expect:
        texts: list[str] = []
        named = actual.get("type")              # the IUT's word, any JSON value: a name only if a string
        compare_fields(expect["fields"], _aliased(kind or (named if isinstance(named, str) else None),
                                                  expect["fields"], actual["fields"]),
                       f"{path}.fields", texts)
        out += [Diff("structs", "fields", t, struct=kind) for t in texts]
    if "valid" in expect and "valid" in actual:
        got = actual["valid"]
        if not isinstance(got, list) or sorted(map(str, got)) != sorted(expect["valid"]):
            out.append(Diff("structs", "valid", f"{path}.valid: expected {sorted(expect['valid'])}, got {got}",
                            sorted(expect["valid"]), got, kind))
        return out, True
    return out, False


def message_diffs(expect: dict, actual: dict, with_structs: bool = True) -> tuple[list[Diff], bool]:
    """Differences between the listed expected fields and a decode result.
    Returns (differences, checksum_compared)."""
    diffs: list[Diff] = []
    cksum_compared = False
    for key, want in expect.items():
        if key == "byte_order":
            if actual.get("byte_order") != want:
                diffs.append(Diff(key, None, f"byte_order: expected {want!r}, got {actual.get('byte_order')!r}",
                                  want, actual.get("byte_order")))
        elif key in ("header", "body"):
            got_obj = actual.get(key) or {}
            for name, w in want.items():
                g = got_obj.get(name)
                if w is None:
                    if name in got_obj:
                        diffs.append(Diff(key, name, f"{key}.{name}: expected absent, got {_fmt(g)}", w, g))
                elif name not in got_obj:
                    diffs.append(Diff(key, name, f"{key}.{name}: expected {_fmt(w)}, got nothing", w, None))
                elif g != w:
                    diffs.append(Diff(key, name, f"{key}.{name}: expected {_fmt(w)}, got {_fmt(g)}", w, g))
        elif key == "buflens":
            if actual.get("buflens") != want:
                diffs.append(Diff(key, None, f"buflens: expected {want}, got {actual.get('buflens')}",
                                  want, actual.get("buflens")))
        elif key == "buffers":
            got = actual.get("buffers") or []
            for i, w in enumerate(want):
                if w is None:
                    continue
                g = got[i] if i < len(got) else None
                if g is None or g.lower() != w.lower():
                    diffs.append(Diff(key, str(i), f"buffers[{i}]: expected {w or '(empty)'}, "
                                                   f"got {g if g is not None else 'nothing'}", w, g))
        elif key == "structs":
            if not with_structs:
                continue
            got = actual.get("structs")
            for index, entry in want.items():
                if not isinstance(got, dict) or str(index) not in got:
                    diffs.append(Diff(key, "type", f"structs.{index}: expected a decoded {entry.get('type')}, got nothing",
                                      struct=entry.get("type")))
                else:
                    diffs += struct_diffs(entry, got[str(index)], f"structs.{index}")[0]
        elif key == "computed_cksum":
            if "computed_cksum" in actual:
                cksum_compared = True
                if actual["computed_cksum"] != want:
                    diffs.append(Diff(key, None, f"computed_cksum: expected {want:#010x}, "
                                                 f"got {_fmt(actual['computed_cksum'])}", want, actual["computed_cksum"]))
    return diffs, cksum_compared


def _dump(title: str, data: bytes, highlight: set[int] | None = None) -> str:
    return f"{title} ({len(data)} bytes):\n{hexdump.render(data, highlight)}"


class _DecodeCharges:
    """What a decode failure of `vector` is charged to, by the way the case judges it (`role`,
    charges.py).  `control`: the outcome of the valid vector a derived case comes from
    (`origin`), sent with the variants: when it was rejected too, a variant's rejection is
    charged as the origin's is."""

    def __init__(self, vector: Vector, role: str, control: Outcome | None, origin: Vector | None,
                 with_structs: bool, listed=None):
        self.v, self.role, self.origin, self.with_structs = vector, role, origin, with_structs
        self.origin_rejected = control is not None and not control.ok and origin is not None
        self.foreign = C.foreign(vector.data)
        self._listed = listed

    @property
    def declared(self) -> list[str]:
        if self.role in (VARIANT, MODEL, FIXED, TWIN):
            return list(self.v.requirements)
        return C.decode_declared(self.v)

    @property
    def listed(self) -> list[str]:
        """Everything the case can charge (for shape problems: the field's requirement only when listed)."""
        if self._listed is None:
            if self.role == VECTOR:
                self._listed = C.vector_decode_requirements(self.v, self.with_structs)
            elif self.role in (TWIN, VARIANT) and self.origin is not None:
                self._listed = C.variant_requirements(self.v, self.origin, self.role)
            elif self.role == MODEL:
                self._listed = list(C.MODEL_CHARGEABLE)
            else:
                self._listed = C.ordered(self.declared, [C.ROBUST])
        return self._listed

    def _origin(self) -> list[str]:
        """The origin's acceptance requirements, when it was rejected too (else [])."""
        return C.acceptance(C.decode_declared(self.origin), fallback=False) if self.origin_rejected else []

    def rejected(self, errno: str | None) -> list[str]:
        """A valid message rejected."""
        if self._origin():
            return self._origin()
        if self.role == TWIN:
            return list(C.byte_order_requirements(self.v.data))
        if self.role in (VARIANT, MODEL):
            # a model example's own list: the byte-order requirements for a byte-swapped peer's
            # message, else the check order (charges.model_example_requirement)
            return ["BODY-SIZE-1"] if errno == "EFAULT" else list(self.v.requirements)
        if self.role == FIXED:
            return self.declared
        return C.acceptance(self.declared)

    def accepted(self) -> list[str]:
        """An invalid message accepted."""
        if self.role in (VARIANT, MODEL, FIXED):
            return self.declared
        return C.rejection_requirement(self.v.data, self.v.direction, self.declared)

    def wrong_errno(self, errno: str) -> list[str]:
        """An invalid message rejected with an errno class it does not allow."""
        if self._origin():
            return self._origin()
        if self.role == FIXED:
            return self.declared
        return C.rejection_requirement(self.v.data, self.v.direction, self.declared, errno)

    def verdict(self, outcome: Outcome) -> list[str]:
        """The wrong verdict a crash, hang or garbage stands for."""
        if self.v.verdict == "valid":
            return self.rejected(None)
        if self.v.verdict == "invalid":
            return self.accepted()
        return []

    def fields(self, diffs: list[Diff]) -> list[str]:
        if self.role == FIXED:
            return self.declared
        return C.ordered(C.diff_requirement(d, self.foreign, self.declared) for d in diffs)

    def shape(self, problems: list[ShapeProblem]) -> list[str]:
        if self.role == FIXED:
            return self.declared
        return C.ordered(C.shape_requirement(p, self.listed) for p in problems)

    def not_exercised(self, cksum_compared: bool) -> list[str]:
        """Requirements this decode could not judge: the IUT left an optional member out."""
        out = []
        expect = self.v.expect or {}
        if "computed_cksum" in expect and not cksum_compared:
            out.append("CKSUM-1")
        if "structs" in expect and not self.with_structs:
            out += [r for r in C.compared_requirements({"structs": expect["structs"]}, self.foreign) + self.declared
                    if r in C.STRUCT_IN_MESSAGE]
        return C.ordered(out)


def judge_decode(vector: Vector, outcome: Outcome, errno_agnostic: bool = False,
                 with_structs: bool = False, *, role: str = VECTOR, control: Outcome | None = None,
                 origin: Vector | None = None, listed=None, settings=None) -> Judgement:
    """Judge one decode, as the release of `settings` (the run's, harness/settings.py: its
    `release` and `literal`; None: the default profile's) reads the vector's bytes.  `role`
    says how a failure is charged (VECTOR: a golden vector; TWIN, VARIANT: a derived variant of
    `origin`, whose own `control` outcome tells a rejection of the origin's apart; MODEL: an example the rule model judges; FIXED: every failure charged to
    the vector's requirements); `listed`: the case's requirements, when known.  `control`: the
    outcome of a valid neighbour sent in the same batch (a golden invalid vector's too, with
    no `origin`: it then decides only whether a rejection is evidence, never what a failure is
    charged to)."""
    head = f"{vector.id}: {vector.title}\n"
    charges = _DecodeCharges(vector, role, control, origin, with_structs, listed)

    def dump() -> str:   # rendered only for a failure message
        return _dump(f"input, {vector.direction}", vector.data)
    if outcome.trouble:
        return Judgement(ERROR, f"{head}harness/protocol error ({outcome.kind}): {outcome.detail}\n{dump()}",
                         {"outcome": outcome.kind}).failing(vector, _outcome_signature(outcome)).charge(
            charges.verdict(outcome) + [C.ROBUST])
    j = _judge_decode(vector, outcome, errno_agnostic, with_structs, head, dump, charges, settings)
    if j.status == PASS:
        _evidence(j, vector, outcome, errno_agnostic, with_structs, charges, control)
    if j.status == FAIL:
        first = j.notes.pop("first_diff", None)
        # the bytes of the field that decoded wrongly are the ones a page highlights
        hl = hexdump.field_bytes(vector.data, first) if first and vector.op == "decode" else None
        j.failing(vector, f"field:{first}" if first else _outcome_signature(outcome), highlight=hl)
    return j


def _evidence(j: Judgement, vector: Vector, outcome: Outcome, errno_agnostic: bool, with_structs: bool,
              charges: "_DecodeCharges", control: Outcome | None) -> None:
    """Record on a passing decode judgement what it exercised (charges.decode_exercised), and
    whether that rests on a rejection (`evidence`: "rejection" or "acceptance").  A rejection is
    evidence only when the `control` sent with it was accepted: else the note
    `control_rejected` says why nothing was exercised.  A property's example (MODEL) has no
    control of its own: the property applies the rule over its examples (check_property)."""
    rejection = outcome.rejected
    exercised = C.decode_exercised(vector, charges.role, outcome, errno_judged=not errno_agnostic,
                                   with_structs=with_structs, cksum_compared=j.notes.pop("cksum_compared", False))
    j.notes["evidence"] = "rejection" if rejection else "acceptance"
    if charges.role == MODEL:
        j.notes["direction"] = vector.direction     # the control rule of a property goes by direction
    if errno_agnostic:
        j.notes["errno_judged"] = False
    if rejection and control is not None and not control.ok:
        j.notes["control_rejected"] = (f"the valid neighbour sent with it was rejected too "
                                       f"({control.describe()}): the rejection is no evidence")
        exercised = []
    elif rejection and control is None and charges.role != MODEL:
        j.notes["control_rejected"] = "no valid neighbour was sent with it: the rejection is no evidence"
        exercised = []
    j.notes["exercised"] = exercised


def _mismatch(vector: Vector, allowed, got: str, requirements) -> dict:
    return {"case": vector.id, "expected": "/".join(allowed), "got": got, "requirements": list(requirements)}


def _judge_decode(vector, outcome, errno_agnostic, with_structs, head, dump, charges, settings) -> Judgement:
    rel, literal = (settings.release, settings.literal) if settings is not None else (None, False)
    if vector.verdict == "acceptable":
        if outcome.rejected and outcome.error not in DECODE_ERRNOS:
            return Judgement(FAIL, f"{head}implementation-defined input: acceptance or rejection are both fine, "
                                   f"but decode rejections are {'/'.join(DECODE_ERRNOS)}, got {outcome.error}\n{dump()}"
                             ).charge([C.ROBUST])
        if outcome.ok:
            shape = message_shape_problems(outcome.result, partial_buffers=True)
            if shape:
                return Judgement(FAIL, f"{head}accepted, but the result is not a well-formed MESSAGE:\n  "
                                 + "\n  ".join(shape) + f"\n{dump()}").charge(charges.shape(shape))
        return Judgement(PASS, notes={"accepted": outcome.ok})
    if vector.verdict == "invalid":
        allowed = vector.accepted_errnos
        if outcome.ok:
            return Judgement(FAIL, f"{head}expected: rejected with {' or '.join(allowed)}\n"
                                   f"actual:   accepted\n{dump()}").charge(charges.accepted())
        if outcome.error in allowed:
            return Judgement(PASS, notes={"errno": outcome.error})
        owed = charges.wrong_errno(outcome.error)
        if errno_agnostic:
            return Judgement(PASS, notes={"errno": outcome.error, "errno_class_mismatch":
                                          f"expected {'/'.join(allowed)}, got {outcome.error}",
                                          "errno_class_mismatches": [_mismatch(vector, allowed, outcome.error, owed)]})
        return Judgement(FAIL, f"{head}expected: rejected with {' or '.join(allowed)}\n"
                               f"actual:   rejected with {outcome.error}"
                               + (f" ({outcome.detail})" if outcome.detail else "") + f"\n{dump()}").charge(owed)
    # valid
    if outcome.rejected and vector.verdict == "acceptable":
        # implementation-defined (a count that claims more than the buffer holds): a refusal
        # passes; an acceptance is judged on the fields listed, the bytes that are there
        return Judgement(PASS, notes={"errno": outcome.error})
    if outcome.rejected:
        return Judgement(FAIL, f"{head}expected: accepted\nactual:   rejected with {outcome.error}"
                               + (f" ({outcome.detail})" if outcome.detail else "") + f"\n{dump()}"
                         ).charge(charges.rejected(outcome.error))
    shape = [s for s in message_shape_problems(outcome.result) if not release.tolerated_shape(s, outcome.result, rel, literal)]
    if shape:
        return Judgement(FAIL, f"{head}accepted, but the result is not a well-formed MESSAGE:\n  "
                         + "\n  ".join(shape) + f"\n{dump()}", {"first_diff": "malformed-result"}
                         ).charge(charges.shape(shape))
    diffs, cksum_compared = message_diffs(release.view(vector.expect, rel, literal) or {}, outcome.result, with_structs)
    only_cksum = all(registry.kind(r) == "checksum" for r in vector.requirements)
    if only_cksum and not cksum_compared:
        return Judgement(NOT_APPLICABLE, "the IUT reports no computed_cksum")
    if diffs:
        return Judgement(FAIL, f"{head}decoded fields differ (expected vs actual):\n  "
                         + "\n  ".join(d.text for d in diffs)
                         + f"\n{dump()}", {"first_diff": diffs[0].text.split(":", 1)[0],
                                          "fields_differ": [d.text.split(":", 1)[0] for d in diffs]}
                         ).charge(charges.fields(diffs))
    unjudged = charges.not_exercised(cksum_compared)
    return Judgement(PASS, notes=dict({"not_exercised": unjudged} if unjudged else {}, cksum_compared=cksum_compared))


def _vdump(vector: Vector, title: str, data: bytes, highlight: set[int] | None = None) -> str:
    if vector.op == "decode_struct":
        return f"{title} ({len(data)} bytes, {vector.struct}):\n{hexdump.render_struct(vector.struct, data, highlight)}"
    return _dump(title, data, highlight)


def _encode_charges(vector: Vector, expected: bytes, actual: bytes | None, differing: set[int]) -> list[str]:
    """What a wrong encode of `vector` is charged to: a structure's own requirements (those an
    encoder can break); for a message, ENC-LENGTH-1 (with the vector's layout requirements)
    when the length differs, else ENC-CANON-1 (a refusal, a malformed result, other bytes)."""
    listed = C.encode_requirements(vector)
    if vector.op == "decode_struct":
        refused_alias = actual is None and _struct_charges(vector) == ["STRUCT-ALIAS-1"]
        return ["STRUCT-ALIAS-1"] if refused_alias else listed
    if actual is not None and len(actual) != len(expected):
        return ["ENC-LENGTH-1"] + [r for r in listed if r in C.ENCODE_LAYOUT]
    return ["ENC-CANON-1"]


def judge_encode(vector: Vector, outcome: Outcome) -> Judgement:
    head = f"{vector.id}: {vector.title} (encode)\n"
    expected = vector.data
    if outcome.trouble:
        return Judgement(ERROR, f"{head}harness/protocol error ({outcome.kind}): {outcome.detail}",
                         {"outcome": outcome.kind}).failing(vector, _outcome_signature(outcome)).charge(
            C.encode_requirements(vector))
    if outcome.rejected:
        return Judgement(FAIL, f"{head}expected: the canonical bytes\nactual:   encode refused with "
                               f"{outcome.error} ({outcome.detail})\n{_vdump(vector, 'expected', expected)}"
                         ).failing(vector, f"encode-rejected:{outcome.error}").charge(
            _encode_charges(vector, expected, None, set()))
    result = outcome.result
    data_hex = result.get("data") if isinstance(result, dict) else None
    try:
        actual = bytes.fromhex(data_hex) if isinstance(data_hex, str) else None
    except ValueError:
        actual = None
    if actual is None:
        return Judgement(FAIL, f"{head}the encode result has no hex 'data': {str(result)[:200]}"
                         ).failing(vector, "encode-malformed-result").charge(_encode_charges(vector, expected, None, set()))
    if actual == expected:       # every byte as Lustre writes it: all it can charge is exercised
        return Judgement(PASS, notes={"exercised": [r for r in C.encode_requirements(vector) if r != "ENC-REJECT-1"]})
    differing = {i for i in range(max(len(actual), len(expected)))
                 if i >= len(actual) or i >= len(expected) or actual[i] != expected[i]}
    first = min(differing)
    return Judgement(FAIL, f"{head}encoded bytes differ from the canonical bytes "
                           f"(expected {len(expected)} bytes, got {len(actual)}; first difference at offset {first}; "
                           f"differing bytes marked *)\n"
                           f"{_vdump(vector, 'expected', expected, differing)}\n"
                           f"{_vdump(vector, 'actual', actual, differing)}"
                     ).failing(vector, f"bytes@{first}", differing, actual).charge(
        _encode_charges(vector, expected, actual, differing))


def combine(case_id: str, variants, judgements: list[Judgement]) -> Judgement:
    """One verdict for a case made of several variants: an error if any variant hit
    harness trouble, else a failure if any failed (listing them, with the first one's
    full message), else a pass; not applicable only if every variant was.  A failure is
    charged to every requirement a failing variant was charged to; the errno class
    mismatches of an errno-agnostic run are kept, every one."""
    bad = [(v, j) for v, j in zip(variants, judgements) if j.status in (FAIL, ERROR)]
    mismatches = [m for j in judgements for m in j.notes.get("errno_class_mismatches") or ()]
    if bad:
        status = ERROR if any(j.status == ERROR for _, j in bad) else FAIL
        names = ", ".join(v.id.rsplit(".", 1)[-1] for v, _ in bad[:20]) + (" ..." if len(bad) > 20 else "")
        notes = {k: v for k, v in bad[0][1].notes.items() if k in ("signature", "reproducer", "highlight", "outcome")}
        if all(j.notes.get("fields_differ") for _, j in bad):     # every failure a decoded field's
            notes["fields_differ"] = sorted({f for _, j in bad for f in j.notes["fields_differ"]})
        out = Judgement(status, f"{case_id}: {len(bad)} of {len(judgements)} variants failed: {names}\n"
                                f"first failure:\n{bad[0][1].message}", notes)
        for _, j in bad:
            out.charge(j.failed_requirements)
        if mismatches:
            out.notes["errno_class_mismatches"] = mismatches
        return out
    if judgements and all(j.status == NOT_APPLICABLE for j in judgements):
        return Judgement(NOT_APPLICABLE, judgements[0].message)
    out = Judgement(PASS)
    if mismatches:
        out.notes["errno_class_mismatch"] = f"{len(mismatches)} variant(s): " + "; ".join(
            f"{m['case'].rsplit('.', 1)[-1]} expected {m['expected']}, got {m['got']}" for m in mismatches[:5]) \
            + (" ..." if len(mismatches) > 5 else "")
        out.notes["errno_class_mismatches"] = mismatches
    unjudged = [set(j.notes.get("not_exercised") or ()) for j in judgements if j.status == PASS]
    if unjudged and all(unjudged):
        common = set.intersection(*unjudged)
        if common:
            out.notes["not_exercised"] = sorted(common)
    passed = [j for j in judgements if j.status == PASS]
    if any("exercised" in j.notes for j in passed):
        out.notes["exercised"] = C.ordered(*(j.notes.get("exercised") or () for j in passed))
    unproven = [j.notes["control_rejected"] for j in passed if "control_rejected" in j.notes]
    if unproven:
        out.notes["control_rejected"] = unproven[0]
    if any(j.notes.get("errno_judged") is False for j in passed):
        out.notes["errno_judged"] = False
    return out


def judge_struct(vector: Vector, outcome: Outcome, required: bool, control: Outcome | None = None) -> Judgement:
    """A decode_struct vector.  `required`: the structure is one every IUT with the
    `structs` capability must know; for others EOPNOTSUPP makes the case not applicable.
    `control`: the outcome of a valid structure of the same type sent with an invalid one: its
    rejection exercises the vector's requirements only when the control was accepted."""
    head = f"{vector.id}: {vector.title}\n"

    def dump() -> str:
        return _vdump(vector, f"input, {vector.byte_order}-endian", vector.data)
    # an `acceptable` structure (either answer is right) shows only that the IUT answers it:
    # DEC-ROBUST-1, as for a message (charges.decode_exercised), whatever else the vector lists
    acceptable = vector.verdict == "acceptable"
    if outcome.trouble:
        return Judgement(ERROR, f"{head}harness/protocol error ({outcome.kind}): {outcome.detail}\n{dump()}",
                         {"outcome": outcome.kind}).failing(vector, _outcome_signature(outcome)).charge(
            [C.ROBUST] if acceptable else vector.requirements)
    j = _judge_struct(vector, outcome, required, head, dump)
    if j.status == FAIL:
        first = j.notes.pop("first_diff", None)
        j.failing(vector, f"field:{first}" if first else _outcome_signature(outcome))
    if j.status == PASS:
        unjudged = j.notes.get("not_exercised") or ()
        j.notes["exercised"] = [C.ROBUST] if acceptable else [r for r in vector.requirements if r not in unjudged]
        j.notes["evidence"] = "rejection" if outcome.rejected else "acceptance"
        if outcome.rejected and (control is None or not control.ok):
            j.notes["control_rejected"] = (f"the valid {vector.struct} sent with it was rejected too "
                                           f"({control.describe()}): the rejection is no evidence"
                                           if control is not None else
                                           f"no valid {vector.struct} was sent with it: the rejection is no evidence")
            j.notes["exercised"] = []
    return j


def _struct_charges(vector: Vector, diffs: list[Diff] | None = None) -> list[str]:
    """A structure's failure: a `valid` view that differs is charged to its requirements of
    kind `valid`, anything else (a field, a refusal) to the vector's other requirements; a
    refusal of a structure named by its seed-document name to STRUCT-ALIAS-1."""
    valid = [r for r in vector.requirements if registry.kind(r) == "valid"]
    other = [r for r in vector.requirements if registry.kind(r) != "valid"]
    if diffs is None:
        from ptlrpc_conformance.spec import layouts
        if "STRUCT-ALIAS-1" in other and layouts.canonical(vector.struct) != vector.struct:
            return ["STRUCT-ALIAS-1"]       # a structure refused under its seed-document name
        return other or list(vector.requirements)
    out = []
    for d in diffs:
        out += (valid or list(vector.requirements)) if d.name == "valid" else (other or list(vector.requirements))
    return C.ordered(out)


def _judge_struct(vector, outcome, required, head, dump) -> Judgement:
    if outcome.rejected and outcome.error == "EOPNOTSUPP" and not required:
        return Judgement(NOT_APPLICABLE, f"the IUT does not support structure {vector.struct}")
    if vector.verdict == "invalid":
        if outcome.ok:
            return Judgement(FAIL, f"{head}expected: rejected\nactual:   accepted: {str(outcome.result)[:300]}\n{dump()}"
                             ).charge(vector.requirements)
        if vector.any_errno or outcome.error in vector.errno:
            return Judgement(PASS, notes={"errno": outcome.error})
        return Judgement(FAIL, f"{head}expected: rejected with {' or '.join(vector.errno)}\n"
                               f"actual:   rejected with {outcome.error}\n{dump()}").charge(vector.requirements)
    if outcome.rejected and vector.verdict == "acceptable":
        # implementation-defined (a count that claims more than the buffer holds): a refusal
        # passes; an acceptance is judged on the fields listed, the bytes that are there
        return Judgement(PASS, notes={"errno": outcome.error})
    if outcome.rejected:
        return Judgement(FAIL, f"{head}expected: accepted\nactual:   rejected with {outcome.error}"
                               + (f" ({outcome.detail})" if outcome.detail else "") + f"\n{dump()}"
                         ).charge(_struct_charges(vector))
    diffs, valid_compared = struct_diffs(vector.expect or {}, outcome.result, vector.struct)
    unjudged = [r for r in vector.requirements if registry.kind(r) == "valid"] \
        if "valid" in (vector.expect or {}) and not valid_compared else []
    if not diffs and unjudged and len(unjudged) == len(vector.requirements):
        return Judgement(NOT_APPLICABLE, "the IUT reports no valid view")
    if diffs:
        return Judgement(FAIL, f"{head}decoded fields differ (expected vs actual):\n  "
                         + "\n  ".join(d.text for d in diffs[:40])
                         + f"\n{dump()}", {"first_diff": diffs[0].text.split(":", 1)[0]}).charge(
            _struct_charges(vector, diffs))
    return Judgement(PASS, notes={"not_exercised": unjudged} if unjudged else {})


# ---- the end of a case ----------------------------------------------------------------------------

def heading(requirements) -> str:
    """The lines that head a failure message: each charged requirement with its level and
    statement (spec/requirements.yaml)."""
    known = registry.requirements()
    lines = []
    for rid in requirements:
        r = known.get(rid)
        lines.append(f"{rid} ({r.level}): {r.statement}" if r else rid)
    return "\n".join(lines)


def finish(j: Judgement, declared) -> Judgement:
    """Make a failure ready for the report: charge it (the requirements its judge named; else
    those that head its problem lines, "RULE: text", as target and recovery failures write
    them; else the case's `declared` list) and head its message with them."""
    if j.status not in (FAIL, ERROR):
        return j
    if not j.failed_requirements:
        j.charge(C.named_requirements(j.message, registry.requirements()) or list(declared))
    j.message = f"{heading(j.failed_requirements)}\n{j.message}"
    return j
