"""Which requirements a case can charge, and which one a failure is charged to.

A case lists exactly the requirements its judge can charge (`case_requirements`), and a
failure is charged to the requirement it breaks, never to the case's list wholesale.  The
judge (judge.py) knows what went wrong, and this module turns that into requirement ids:

  a decoded field that differs     the field's requirement (field_requirements): header
                                   words HDR-FIELDS-1, lm_bufcount HDR-BUFCOUNT-1, the magic
                                   and byte order HDR-MAGIC-1/-2, buflens and buffers
                                   PAD-BUFFER-1, body fields BODY-FIELDS-1, pb_status
                                   BODY-STATUS-1, pb_jobid BODY-JOBID-1, the checksum CKSUM-1,
                                   a structure STRUCT-MSG-1; in a message from a byte-swapped
                                   peer a value that is the expected one byte-swapped (or not
                                   swapped) is charged to HDR-SWAB-1 / BODY-SWAB-1 instead
  a result that is not a MESSAGE   the field's requirement when the case lists it (a pb_status
                                   outside the signed 32-bit range: BODY-STATUS-1), else
                                   DEC-ROBUST-1
  an accept where a reject was due the requirement of the first check the message fails (the
                                   rule model, model.py), or the vector's own list when the
                                   model names another
  a wrong errno class              the same, and HDR-ORDER-1 too when the errno class is that
                                   of a later check the message also fails (a check out of
                                   order, or missing, let the later one decide)
  a reject where an accept was due a golden vector: its own requirements that concern
                                   acceptance (not those about decoded content); a byte-swapped
                                   twin: the byte-order requirements; a derived variant: the
                                   boundary it sits on (PAD-TRAILING-1, HDR-BUFCOUNT-1,
                                   HDR-TOTAL-1; BODY-SIZE-1 for an EFAULT); a property
                                   example: HDR-MAGIC-2 and HDR-SWAB-1 when a byte-swapped
                                   peer sent it, else HDR-ORDER-1.  When the valid
                                   vector a derived case comes from is rejected as well (its
                                   control), the rejection is charged as that vector's is
  a crash, a hang, garbage         what a wrong verdict would be charged to, and DEC-ROBUST-1
                                   for a decode

Encodes: a length that differs ENC-LENGTH-1 (with the vector's PAD-HEADER-1/PAD-BUFFER-1),
other differing bytes ENC-CANON-1, a refusal ENC-CANON-1.  Target and recovery failures name
the violated invariant's requirement at the head of each problem line ("RULE: text");
`named_requirements` reads them back.
"""
from __future__ import annotations

import re

from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.data.registry import REQUIREMENT_ID
from ptlrpc_conformance.harness.verdicts.model import BODY, HDR, LIMITS, RULE_REQUIREMENT, failing_rules, predict

ROBUST = "DEC-ROBUST-1"
ORDER = "HDR-ORDER-1"
FOREIGN_ORDER = ("HDR-MAGIC-2", "HDR-SWAB-1", "BODY-SWAB-1")    # a byte-swapped peer's message
NATIVE_ORDER = ("HDR-MAGIC-1",)
ENCODE_LAYOUT = ("PAD-HEADER-1", "PAD-BUFFER-1")                # the layout rules bind encoders too
STRUCT_ENCODE = ("STRUCT-LAYOUT-1", "STRUCT-ALIAS-1")            # the structure rules encode_struct checks
STRUCT_IN_MESSAGE = ("STRUCT-MSG-1", "STRUCT-SWAB-1", "STRUCT-OCD-1", "VALID-OBDO-1", "VALID-MDT-1")
VALID_OF = {"obdo": "VALID-OBDO-1", "mdt_body": "VALID-MDT-1"}
# a derived variant the model accepts sits on the boundary of this requirement (derive.py kinds)
BOUNDARY = {"cut": "PAD-TRAILING-1", "bufcount": "HDR-BUFCOUNT-1", "buflen": "HDR-TOTAL-1"}
# everything the judge of a message the model alone judges (framing properties) can charge
MODEL_CHARGEABLE = tuple(dict.fromkeys(
    [r for r in RULE_REQUIREMENT.values()] + [ORDER, ROBUST, "HDR-MAGIC-1", *FOREIGN_ORDER, "HDR-BUFCOUNT-1",
                                              "HDR-FIELDS-1", "PAD-BUFFER-1", "BODY-FIELDS-1", "BODY-STATUS-1",
                                              "BODY-JOBID-1"]))

# a problem line of a target or recovery failure: "RULE: text", "step N: RULE: text",
# "step N (client xid X): RULE: text"
# (the id's grammar is the registry's, REQUIREMENT_ID)
PROBLEM_LINE = re.compile(r"^(?:step \d+(?: \([^)\n]*\))?: )?(" + REQUIREMENT_ID.pattern.strip("^$") + "): ", re.M)


def applies_to_decode(rid: str) -> bool:
    """Whether a decode can break `rid`: every requirement but an encoder's (kind `encoding`)."""
    return registry.kind(rid) != "encoding"


def ordered(*groups) -> list[str]:
    """The requirement ids of `groups`, each once, in first-seen order."""
    return list(dict.fromkeys(r for g in groups for r in g if r))


def decode_declared(vector) -> list[str]:
    """A decode vector's own requirements that a decode can break (no encoder's)."""
    return [r for r in vector.requirements if applies_to_decode(r)]


def acceptance(declared, fallback: bool = True) -> list[str]:
    """Of a valid vector's requirements, those a wrongful rejection breaks; a vector that names
    none (only requirements about decoded content) stands by its whole list (`fallback`)."""
    acc = [r for r in declared if not registry.content_only(r)]
    return acc or (list(declared) if fallback else [])


def foreign(data: bytes) -> bool:
    """Whether `data` carries the byte-swapped magic (a big-endian sender's message)."""
    at = HDR["lm_magic"].offset
    return len(data) >= at + 4 and int.from_bytes(data[at:at + 4], "little") == LIMITS["swabbed"]


def byte_order_requirements(data: bytes) -> tuple[str, ...]:
    return FOREIGN_ORDER if foreign(data) else NATIVE_ORDER


# ---- fields ----------------------------------------------------------------------------------

def _swapped(want, got, size: int) -> bool:
    """Whether `got` is `want` with its bytes in the other order (element by element for lists)."""
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and any(w != g for w, g in zip(want, got)) and all(
            _swapped(w, g, size) or w == g for w, g in zip(want, got))
    if not isinstance(want, int) or not isinstance(got, int) or isinstance(want, bool) or isinstance(got, bool):
        return False
    mask = (1 << (8 * size)) - 1
    flipped = int.from_bytes((want & mask).to_bytes(size, "little"), "big")
    return got & mask == flipped and want != got


def _jobid_swabbed(want, got) -> bool:
    """Whether `got` is the jobid `want` read as four byte-swapped __u64 words."""
    if not isinstance(want, str) or not isinstance(got, str):
        return False
    raw = want.encode("latin-1", "replace")[:32].ljust(32, b"\0")
    flipped = b"".join(raw[i:i + 8][::-1] for i in range(0, 32, 8))
    return flipped.split(b"\0", 1)[0][:31].decode("latin-1") == got


def field_requirements(key: str, name: str | None = None) -> tuple[str, ...]:
    """The requirements a difference in one compared member can be charged to (either byte
    order), for a case's list."""
    if key == "byte_order" or (key == "header" and name == "lm_magic"):
        return ("HDR-MAGIC-1", "HDR-MAGIC-2")
    if key == "header":
        return ("HDR-BUFCOUNT-1",) if name == "lm_bufcount" else ("HDR-FIELDS-1",)
    if key == "buflens":
        return ("PAD-BUFFER-1", "HDR-BUFCOUNT-1")
    if key == "buffers":
        return ("PAD-BUFFER-1",)
    if key == "body":
        return {"pb_status": ("BODY-STATUS-1",), "pb_jobid": ("BODY-JOBID-1",)}.get(name, ("BODY-FIELDS-1",))
    if key == "computed_cksum":
        return ("CKSUM-1",)
    if key == "structs":
        return ("STRUCT-MSG-1",)
    return ()


def compared_requirements(expect: dict | None, is_foreign: bool, with_structs: bool = True) -> list[str]:
    """The requirements the field comparison of `expect` can charge."""
    out: list[str] = []
    for key, want in (expect or {}).items():
        if key == "structs":
            if with_structs:
                out += ["STRUCT-MSG-1"] + (["STRUCT-SWAB-1"] if is_foreign else [])
                out += [VALID_OF[e.get("type")] for e in want.values()
                        if isinstance(e, dict) and "valid" in e and e.get("type") in VALID_OF]
            continue
        names = list(want) if isinstance(want, dict) and key in ("header", "body") else [None]
        for name in names:
            reqs = field_requirements(key, name)
            if key == "byte_order" or name == "lm_magic":
                reqs = ("HDR-MAGIC-2",) if is_foreign else ("HDR-MAGIC-1",)
            out += reqs
        if is_foreign and key in ("header", "buflens"):
            out.append("HDR-SWAB-1")
        if is_foreign and key == "body":
            out.append("BODY-SWAB-1")
    return ordered(out)


def diff_requirement(diff, is_foreign: bool, declared=()) -> str:
    """The requirement one field difference (judge.Diff) is charged to."""
    key, name, want, got = diff.key, diff.name, diff.want, diff.got
    if key == "byte_order" or (key == "header" and name == "lm_magic"):
        return "HDR-MAGIC-2" if is_foreign else "HDR-MAGIC-1"
    if key == "header":
        if is_foreign and _swapped(want, got, 4):
            return "HDR-SWAB-1"
        return "HDR-BUFCOUNT-1" if name == "lm_bufcount" else "HDR-FIELDS-1"
    if key == "buflens":
        if is_foreign and _swapped(want, got, 4):
            return "HDR-SWAB-1"
        if isinstance(want, list) and isinstance(got, list) and len(want) != len(got):
            return "HDR-BUFCOUNT-1"
        return "PAD-BUFFER-1"
    if key == "buffers":
        return "PAD-BUFFER-1"
    if key == "body":
        f = BODY.get(name)
        if is_foreign and name == "pb_jobid" and _jobid_swabbed(want, got):
            return "BODY-SWAB-1"
        if is_foreign and f is not None and _swapped(want, got, f.elem_size if f.count else f.size):
            return "BODY-SWAB-1"
        return field_requirements("body", name)[0]
    if key == "computed_cksum":
        return "CKSUM-1"
    if key == "structs":
        if name == "valid" and diff.struct in VALID_OF:
            return VALID_OF[diff.struct]
        if is_foreign and name == "fields":
            swab = [r for r in declared if r in ("STRUCT-OCD-1", "STRUCT-SWAB-1")]
            if "STRUCT-OCD-1" in swab and diff.struct == "obd_connect_data":
                return "STRUCT-OCD-1"
            if "STRUCT-SWAB-1" in swab:
                return "STRUCT-SWAB-1"
        return "STRUCT-MSG-1"
    return ROBUST


def shape_requirement(problem, listed) -> str:
    """The requirement a MESSAGE shape problem (protocol.ShapeProblem) is charged to: that of
    the member it is about, when the case lists it, else DEC-ROBUST-1 (a malformed result)."""
    about = getattr(problem, "about", None)
    req = field_requirements(*about)[0] if about else None
    return req if req in listed else ROBUST


# ---- rejections ------------------------------------------------------------------------------

def rejection_requirement(data: bytes, direction: str, declared, errno: str | None = None,
                          tolerate_wrap: bool = False) -> list[str]:
    """What an invalid message wrongly accepted (`errno` None) or rejected with the wrong errno
    class is charged to: the requirement of the first check it fails (whose errno class it
    did not get), if the declared list names it (else the declared list); and HDR-ORDER-1 too
    when `errno` is that of a later check the message also fails - a check applied out of
    order, or missing, let that one decide."""
    rules = failing_rules(data, direction, tolerate_wrap)
    out = list(declared)
    if rules:
        req = RULE_REQUIREMENT.get(rules[0][0])
        if req and (req in declared or not declared):
            out = [req]
    if errno is not None and len(rules) > 1 and errno not in rules[0][1] \
            and any(errno in allowed for _, allowed in rules[1:]):
        out.append(ORDER)
    return ordered(out)


def order_chargeable(data: bytes, direction: str, tolerate_wrap: bool = False) -> bool:
    """Whether a rejection of `data` can name the errno class of a later check (HDR-ORDER-1)."""
    rules = failing_rules(data, direction, tolerate_wrap)
    return any(set(allowed) - set(rules[0][1]) for _, allowed in rules[1:])


def order_shown(data: bytes, direction: str, errno: str | None, tolerate_wrap: bool = False) -> bool:
    """Whether a rejection of `data` with `errno` shows that the first failing check decided
    (evidence for HDR-ORDER-1): its class is one that check gives and none of the later failing
    checks could.  For a reply every check may also answer EPROTO (a Lustre client's name for
    any reply it cannot unpack, Vector.accepted_errnos), so an EPROTO rejection of a reply
    never tells the checks apart, nor does a class a later check shares."""
    rules = failing_rules(data, direction, tolerate_wrap)
    if len(rules) < 2 or errno is None:
        return False
    widened = {"EPROTO"} if direction == "reply" else set()
    later = set().union(*(set(allowed) for _, allowed in rules[1:])) | widened
    return errno in set(rules[0][1]) | widened and errno not in later


def first_check_shown(data: bytes, direction: str, errno: str | None, tolerate_wrap: bool = False) -> bool:
    """Whether a rejection of `data` with `errno` (None: the class is not judged) is evidence
    that the first check it fails was applied: it fails that check alone, or the class is
    one no later failing check gives (order_shown).  Otherwise any of them could have refused
    it (for a reply, EPROTO is every check's), and the rejection shows only that one did."""
    rules = failing_rules(data, direction, tolerate_wrap)
    return len(rules) < 2 or order_shown(data, direction, errno, tolerate_wrap)


# ---- what each case lists ----------------------------------------------------------------------

def vector_decode_requirements(vector, with_structs: bool = True) -> list[str]:
    """Everything the decode judge of a golden vector (op decode) can charge."""
    declared = decode_declared(vector)
    out = list(declared)
    if vector.verdict == "valid":
        out += compared_requirements(vector.expect, foreign(vector.data), with_structs)
    elif vector.verdict == "invalid":
        out += rejection_requirement(vector.data, vector.direction, declared)
        if order_chargeable(vector.data, vector.direction):
            out.append(ORDER)
    return ordered(out, [ROBUST])


def variant_requirements(variant, origin, role: str) -> list[str]:
    """Everything the judge of a derived variant (derive.py) can charge: its own rule (or
    boundary), the fields it compares, the origin's acceptance requirements (charged when the
    origin is rejected too) and DEC-ROBUST-1."""
    out = list(variant.requirements)
    if variant.verdict == "valid":
        out += compared_requirements(variant.expect, foreign(variant.data), with_structs=False)
        if role == "variant":
            out.append("BODY-SIZE-1")
    if variant.verdict == "invalid" and order_chargeable(variant.data, variant.direction):
        out.append(ORDER)
    if variant.verdict != "invalid":
        # fields an accepted variant carries over from its origin: the shape check judges them
        out += [r for r in compared_requirements(origin.expect, foreign(variant.data), with_structs=False)
                if r in ("BODY-STATUS-1", "BODY-JOBID-1", "HDR-FIELDS-1", "BODY-FIELDS-1")]
    out += acceptance(decode_declared(origin), fallback=False)
    return ordered(out, [ROBUST])


def encode_requirements(vector) -> list[str]:
    """Everything the encode judge of a canonical vector can charge."""
    if vector.op == "decode_struct":
        return [r for r in vector.requirements if r in STRUCT_ENCODE] or list(vector.requirements)
    return ordered([r for r in vector.requirements if registry.kind(r) == "encoding" or r in ENCODE_LAYOUT],
                   ["ENC-CANON-1", "ENC-LENGTH-1"])


def struct_requirements(vector) -> list[str]:
    """Everything the judge of a decode_struct vector can charge: its own requirements."""
    return list(vector.requirements)


def case_requirements(vector, op: str) -> list[str]:
    """The requirements the case `<vector id>.<op>` lists."""
    if op == "encode":
        return encode_requirements(vector)
    if vector.op == "decode_struct":
        return struct_requirements(vector)
    return vector_decode_requirements(vector)


def named_requirements(message: str, known) -> list[str]:
    """The requirement ids that head the problem lines of a message ("RULE: text", "step N:
    RULE: text"), each once, in order; only ids in `known`."""
    return ordered(m.group(1) for m in PROBLEM_LINE.finditer(message or "") if m.group(1) in known)


# ---- what a pass is evidence for -----------------------------------------------------------------

def decode_exercised(vector, role: str, outcome, errno_judged: bool = True, with_structs: bool = False,
                     cksum_compared: bool = False) -> list[str]:
    """The requirements a passing decode of `vector` exercised (`role` as judge.py's: vector,
    twin, variant, model, fixed), before the control rule (judge.py):

      an implementation-defined input   DEC-ROBUST-1 only
      an invalid message rejected       the requirement of the check that decides it (a golden
                                        vector: the rule model's first failing check, when the
                                        vector names it, else its own list; a variant or a
                                        property's example: its rule's) when the rejection
                                        shows that check (first_check_shown), HDR-ORDER-1 when
                                        the errno class was judged (`errno_judged`) and it is
                                        one no later failing check gives (order_shown), and
                                        DEC-ROBUST-1
      a valid message accepted          the fields compared (compared_requirements: structures
                                        only `with_structs`, the checksum only when the IUT
                                        reported one), what accepting it shows (a golden
                                        vector's own requirements, but those about decoded
                                        content it did not compare; a twin's byte order; a
                                        variant's boundary; a property's byte order, never
                                        HDR-ORDER-1, which a rejection is charged to for want
                                        of a better one) and DEC-ROBUST-1"""
    if vector.verdict == "acceptable":
        return [ROBUST]
    if vector.verdict == "invalid":
        decided = rejection_requirement(vector.data, vector.direction, decode_declared(vector)) \
            if role == "vector" else list(vector.requirements)
        order = errno_judged and outcome.error in vector.accepted_errnos \
            and order_shown(vector.data, vector.direction, outcome.error)
        if not first_check_shown(vector.data, vector.direction, outcome.error if errno_judged else None):
            decided = []        # a later failing check could have refused it with this class
        return ordered(decided, [ORDER] if order else [], [ROBUST])
    compared = [r for r in compared_requirements(vector.expect, foreign(vector.data), with_structs)
                if r != "CKSUM-1" or cksum_compared]
    if role == "vector":
        structs_compared = with_structs and "structs" in (vector.expect or {})
        own = [r for r in decode_declared(vector) if not registry.content_only(r) or r in compared
               or (registry.capability(r) == "structs" and structs_compared)]
    elif role == "model":
        own = [r for r in vector.requirements if r != ORDER]
    else:
        own = list(vector.requirements)
    out = ordered(own, compared, [ROBUST])
    return out if with_structs else [r for r in out if registry.capability(r) != "structs"]


def model_example_requirement(data: bytes, direction: str, tolerate_wrap: bool) -> tuple[str, ...]:
    """The declared requirement of a message judged by the model alone (a property's example)."""
    p = predict(data, direction, tolerate_wrap)
    if p.requirement:
        return (p.requirement,)
    if p.verdict == "valid" and foreign(data):
        return FOREIGN_ORDER[:2]        # a byte-swapped peer's valid message: refusing it breaks byte order
    return (ORDER,)
