"""The conformance level a run reaches: the one rule report.json records (its `level`
member), report.html announces and the terminal prints.

    level(requirements, incomplete=False, capabilities=None) -> {
        "status":                 "fully conformant" | "conformant" | "not conformant"
                                  | "not certified" | "incomplete",
        "certified_capabilities": the capabilities the verdict is about, e.g. ["decode", "encode"],
        "failing_must":           MUST requirements that fail (verdict fail or error),
        "failing_should":         SHOULD requirements that fail (a MAY requirement never counts),
        "not_applicable":         requirements no applicable case exercised}

    words(level) -> "conformant: decode, encode"      the level in words, for people

`requirements` is report.json's `requirements` member ({id: {"level", "verdict", ...}};
entries that are not objects are ignored); `capabilities` the IUT's declared ones (its
hello), None when unknown.  The statuses, first match wins:

    incomplete        the run was stopped early: it certifies nothing
    not conformant    an applicable MUST requirement fails
    not certified     no MUST requirement of any capability applied (an IUT that declares no
                      capability; a selection whose MUST cases all were not applicable)
    conformant        every applicable MUST requirement passes, a SHOULD requirement fails
    fully conformant  every applicable MUST and SHOULD requirement passes

A requirement's capability is the one its cases need (ENC- encode; STRUCT-, VALID- structs;
TGT- and RCV-OUTSIDE-1 target; the other RCV- restart; PROTO- none: the testee protocol certifies no capability; the
others decode).  `certified_capabilities` are those of the requirements whose cases applied,
among the declared ones.  Requirements outside the declared capabilities (verdict
not-applicable) are listed apart and excluded; an `inconclusive` requirement (its only
applicable cases failed on other requirements) counts neither way.
"""
from __future__ import annotations

NOT_CONFORMANT = "not conformant"
CONFORMANT = "conformant"
FULLY_CONFORMANT = "fully conformant"
NOT_CERTIFIED = "not certified"
INCOMPLETE = "incomplete"
STATUSES = (FULLY_CONFORMANT, CONFORMANT, NOT_CONFORMANT, NOT_CERTIFIED, INCOMPLETE)
FAILING = ("fail", "error")
APPLIED = ("pass", "fail", "error", "inconclusive")
CAPABILITIES = ("decode", "encode", "structs", "target", "restart")     # the order they are named in
_PREFIX_CAPABILITY = (("ENC-", "encode"), ("STRUCT-", "structs"), ("VALID-", "structs"), ("TGT-", "target"),
                      ("RCV-", "restart"), ("PROTO-", None))


_CAPABILITY = {"RCV-OUTSIDE-1": "target"}     # a recovery rule a target without restarts keeps


def capability(rid: str) -> str | None:
    """The capability the cases of requirement `rid` need (None: the testee protocol's own)."""
    if rid in _CAPABILITY:
        return _CAPABILITY[rid]
    for prefix, cap in _PREFIX_CAPABILITY:
        if rid.startswith(prefix):
            return cap
    return "decode"


def level(requirements: dict, incomplete: bool = False, capabilities=None) -> dict:
    """The level of a run from report.json's `requirements` member (module docstring)."""
    entries = {rid: ent for rid, ent in (requirements or {}).items() if isinstance(ent, dict)}
    failing = {lvl: sorted(rid for rid, ent in entries.items()
                           if ent.get("level") == lvl and ent.get("verdict") in FAILING)
               for lvl in ("MUST", "SHOULD")}
    not_applicable = sorted(rid for rid, ent in entries.items() if ent.get("verdict") == "not-applicable")
    applied = {capability(rid) for rid, ent in entries.items()
               if ent.get("level") == "MUST" and ent.get("verdict") in APPLIED} - {None}
    if capabilities is not None:
        applied &= set(capabilities)
    certified = [c for c in CAPABILITIES if c in applied] + sorted(applied - set(CAPABILITIES))
    if incomplete:
        status = INCOMPLETE
    elif failing["MUST"]:
        status = NOT_CONFORMANT
    elif not certified:
        status = NOT_CERTIFIED
    elif failing["SHOULD"]:
        status = CONFORMANT
    else:
        status = FULLY_CONFORMANT
    return {"status": status, "certified_capabilities": certified, "failing_must": failing["MUST"],
            "failing_should": failing["SHOULD"], "not_applicable": not_applicable}


def words(lv) -> str:
    """The level in words: "conformant: decode, encode", "not certified: no MUST case applied"."""
    if not isinstance(lv, dict):
        return str(lv or "unknown")
    status = str(lv.get("status") or lv.get("name") or "unknown")
    caps = [str(c) for c in lv.get("certified_capabilities") or ()]
    if status == NOT_CERTIFIED:
        return f"{status}: no MUST case applied"
    if status == INCOMPLETE or not caps:
        return status
    return f"{status}: {', '.join(caps)}"
