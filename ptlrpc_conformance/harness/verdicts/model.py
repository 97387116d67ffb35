"""The suite's own rule model of a receiver: which messages a decoder must accept, and
with which errno class it must reject the others.

It exists to give derived variants and property tests their verdicts without asking any
implementation (the bundled reference included).  It knows only what the checks need:
lengths, counts, the magic, and three body words, read in the order of Lustre's
lustre_unpack_msg_v2 and lustre_unpack_*_ptlrpc_body.  Facts come from facts.json, layouts
from spec.layout() (spec/layouts.json).

`CHECKS` is the one statement of those checks and their order on the judging side: each
check's rule (docs/rules.md), the requirement a message failing it first breaks
(RULE_REQUIREMENT, `Prediction.requirement`), its errno classes and its step.  The table of
docs/testee-protocol.md §2.2 and the statement of HDR-ORDER-1 are checked against it
(tests/test_check_order.py); the reference codec and the C example state the order on their
own, as the independent implementations they are.  `failing_rules` lists every check a
message fails, in that order, so that a rejection with the errno class of a later check can
be told apart as a check applied out of order (HDR-ORDER-1).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ptlrpc_conformance import spec

ANY_CLASS = ("EINVAL", "EFAULT", "EPROTO")


@dataclass(frozen=True)
class Check:
    step: int                  # its place in the order (the row of docs/testee-protocol.md §2.2)
    rule: str                  # docs/rules.md
    requirement: str           # spec/requirements.yaml: what a message failing it first breaks
    errno: tuple[str, ...]     # the errno classes a rejection for it may carry
    what: str                  # in a word or two, as requirement HDR-ORDER-1 names it
    direction: str | None = None    # a check of one direction only


# Lustre's checks of a received message, in its order.  Checks of one step are alternatives:
# each buffer length is checked for a wrap and against the limit before the next one, and
# pb_type is checked as a request or as a reply.
CHECKS = (
    Check(1, "HDR-2", "HDR-LENGTH-1", ("EINVAL",), "lengths"),
    Check(2, "HDR-6", "HDR-BUFCOUNT-1", ("EINVAL",), "bufcount"),
    Check(3, "HDR-7", "HDR-BUFLENS-1", ("EINVAL",), "buflens"),
    Check(4, "HDR-8", "HDR-BUFLEN-1", ("EINVAL",), "buflens"),
    Check(4, "HDR-8 (wrap)", "HDR-BUFLEN-2", ("EINVAL",), "buflens"),
    Check(5, "HDR-9", "HDR-TOTAL-1", ("EINVAL",), "total"),
    Check(6, "HDR-4", "HDR-MAGIC-3", ("EINVAL", "EPROTO"), "magic"),
    Check(7, "BODY-2", "BODY-SIZE-1", ("EFAULT",), "body size"),
    Check(8, "BODY-3", "BODY-VERSION-1", ("EINVAL",), "version"),
    Check(9, "BODY-5", "BODY-TYPE-2", ANY_CLASS, "type", "request"),
    Check(9, "BODY-6", "BODY-TYPE-1", ("EPROTO",), "type", "reply"),
)
_CHECK = {c.rule: c for c in CHECKS}

# the requirement (spec/requirements.yaml) each rule of the model stands for
RULE_REQUIREMENT = {c.rule: c.requirement for c in CHECKS}
# a wrapped buflen Lustre follows (profile lustre-2.17.57-literal): only robustness is judged
RULE_REQUIREMENT["HDR-8 (wrap, tolerated)"] = "DEC-ROBUST-1"


@dataclass(frozen=True)
class Prediction:
    verdict: str                       # valid | invalid | acceptable
    errno: tuple[str, ...] = ()
    rule: str = ""                     # the rule (docs/rules.md) that decided
    expect: dict = field(default_factory=dict)
    required_length: int | None = None # header + rounded buffers, when the header could be read

    @property
    def requirement(self) -> str | None:
        """The requirement of the rule that decided (None for a valid message)."""
        return RULE_REQUIREMENT.get(self.rule) if self.rule else None


def _limits():
    c = spec.constant
    return dict(fixed=c("LUSTRE_MSG_HEADER_FIXED"), maxcount=c("PTLRPC_MAX_BUFCOUNT"),
                maxlen=c("PTLRPC_MAX_BUFLEN"), v2=c("PTLRPC_BODY_V2_SIZE"), v3=c("PTLRPC_BODY_V3_SIZE"),
                magic=c("LUSTRE_MSG_MAGIC_V2"), swabbed=c("LUSTRE_MSG_MAGIC_V2_SWABBED"),
                version=c("PTLRPC_MSG_VERSION"), request=c("PTL_RPC_MSG_REQUEST"),
                reply=c("PTL_RPC_MSG_REPLY"), err=c("PTL_RPC_MSG_ERR"))


LIMITS = _limits()
BODY = {f.name: f for f in spec.layout("ptlrpc_body_v3").fields}
HDR = {f.name: f for f in spec.layout("lustre_msg_v2").fields}


def _reader(data: bytes):
    """The sender's byte order (from lm_magic) and a reader of unsigned words in it."""
    magic_at = HDR["lm_magic"].offset
    order = "big" if int.from_bytes(data[magic_at:magic_at + 4], "little") == LIMITS["swabbed"] else "little"

    def u(offset: int, size: int = 4) -> int:
        return int.from_bytes(data[offset:offset + size], order)
    return order, u


def _checks(data: bytes, direction: str, tolerate_wrap: bool, first_only: bool) -> tuple[list[tuple], dict | None]:
    """Lustre's checks of a received message, made in the order of CHECKS, with their errno
    classes: (the checks `data` fails, each (rule, errno classes, required length or None),
    and the words a valid expectation is built from, or None when a check failed).
    `first_only` stops at the first failure (predict); otherwise the later checks are made
    as far as the message can still be read (failing_rules): a message too short for its
    lm_buflens[] ends the list, as does one too short for the body words checked."""
    L = LIMITS
    n = len(data)
    out: list[tuple] = []

    def fail(rule: str, required: int | None = None) -> bool:
        out.append((rule, _CHECK[rule].errno, required))
        return first_only
    if n < L["fixed"]:
        fail("HDR-2")
        return out, None
    order, u = _reader(data)
    count = u(HDR["lm_bufcount"].offset)
    if (count < 1 or count > L["maxcount"]) and fail("HDR-6"):
        return out, None
    base = HDR["lm_buflens"].offset
    header = -(-(base + 4 * count) // 8) * 8
    if n < header:
        fail("HDR-7")
        return out, None
    lens = [u(base + 4 * i) for i in range(count)]
    wrapped = False
    for length in lens:
        rounded = -(-length // 8) * 8
        if rounded >= 1 << 32:
            if not tolerate_wrap:
                if fail("HDR-8 (wrap)"):
                    return out, None
                break
            wrapped, rounded = True, rounded - (1 << 32)
        if rounded > L["maxlen"]:
            if fail("HDR-8"):
                return out, None
            break
    # each buffer rounded up to 8 bytes, as a 32-bit sum would (a wrap Lustre follows)
    required = header + sum(-(-x // 8) * 8 % (1 << 32) for x in lens)
    if (required > n or required > L["maxlen"]) and fail("HDR-9", required):
        return out, None
    if u(HDR["lm_magic"].offset) != L["magic"] and fail("HDR-4", required):
        return out, None
    if not lens:
        fail("BODY-2", required)
        return out, None
    if lens[0] < L["v2"] and fail("BODY-2", required):
        return out, None
    body = header
    if not first_only and n < body + BODY["pb_version"].offset + 4:
        return out, None        # predict reads the words even when short (see failing_rules)
    version = u(body + BODY["pb_version"].offset)
    if version & 0xFFFF != L["version"] and fail("BODY-3", required):
        return out, None
    ptype = u(body + BODY["pb_type"].offset)
    if direction == "reply" and ptype not in (L["reply"], L["err"]) and fail("BODY-6", required):
        return out, None
    if direction == "request" and ptype != L["request"] and fail("BODY-5", required):
        return out, None
    if out:
        return out, None
    return out, dict(order=order, count=count, lens=lens, version=version, ptype=ptype, required=required,
                     wrapped=wrapped)


def predict(data: bytes, direction: str, tolerate_wrap: bool = False) -> Prediction:
    """The verdict for `data` received as `direction`.  With `tolerate_wrap` (profile
    lustre-2.17.57-literal) a buffer length whose rounding wraps is followed as Lustre
    follows it, and a message that then passes every check is `acceptable`."""
    failed, words = _checks(data, direction, tolerate_wrap, first_only=True)
    if failed:
        rule, errno, required = failed[0]
        return Prediction("invalid", errno, rule, required_length=required)
    if words["wrapped"]:
        return Prediction("acceptable", (), "HDR-8 (wrap, tolerated)", required_length=words["required"])
    expect = {
        "byte_order": words["order"],
        "header": {"lm_bufcount": words["count"], "lm_magic": LIMITS["magic"]},
        "buflens": words["lens"],
        "body": {"pb_type": words["ptype"], "pb_version": words["version"]},
    }
    if words["lens"][0] < LIMITS["v3"]:
        expect["body"]["pb_jobid"] = None
    return Prediction("valid", (), "", expect, words["required"])


def failing_rules(data: bytes, direction: str, tolerate_wrap: bool = False) -> list[tuple[str, tuple[str, ...]]]:
    """Every check `data` fails, in Lustre's order, as (rule, errno classes); [] for a message
    the model accepts.  The first is `predict`'s rule (both walk _checks), but for a buffer
    length whose wrap is tolerated and leaves the message shorter than the body words: predict
    reads them short, and this list ends before them."""
    return [(rule, errno) for rule, errno, _ in _checks(data, direction, tolerate_wrap, first_only=False)[0]]
