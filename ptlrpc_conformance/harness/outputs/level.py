"""The conformance level a run reaches: the one rule report.json records (its `level`
member), report.html announces, the terminal prints and the certification document states.

    level(requirements, incomplete=False, capabilities=None, selection=None, modes=()) -> {
        "status":                 "fully conformant" | "conformant" | "partial" | "not conformant"
                                  | "not certified" | "incomplete",
        "certified_capabilities": the capabilities the verdict is about, e.g. ["decode", "encode"],
        "failing_must":           MUST requirements that fail (verdict fail or error),
        "failing_should":         SHOULD requirements that fail (a MAY requirement never counts),
        "not_applicable":         requirements no applicable case exercised,
        "not_run":                MUST requirements of a certified capability with no evidence:
                                  no case ran them (verdict not-run) or none exercised them
                                  (verdict not-exercised),
        "selection":              the run's selection (below), with `complete`: per declared
                                  capability (certified, when the declaration is unknown),
                                  whether the run covered it whole,
        "modes":                  the relaxing modes the verdicts were given under (below)}

    words(level) -> "conformant (partial: framing area): decode"      the level in words

`requirements` is report.json's `requirements` member ({id: {"level", "verdict", ...}};
entries that are not objects are ignored); `capabilities` the IUT's declared ones (its
hello), None when unknown.  The statuses, first match wins:

    incomplete        the run was stopped early: it certifies nothing
    not conformant    an applicable MUST requirement fails
    not certified     no MUST requirement of any capability applied (an IUT that declares no
                      capability; a selection whose MUST cases all were not applicable)
    partial           every MUST requirement that ran passes, but the run did not cover a
                      declared capability whole: a selection left cases out, or a MUST
                      requirement of that capability was not run or not exercised.  In words
                      "conformant (partial: ...)": never "conformant" or "fully conformant" alone
    conformant        every MUST requirement passes, and a SHOULD requirement fails or a
                      relaxing mode was in force (a relaxed run is never "fully conformant")
    fully conformant  every MUST and SHOULD requirement passes, in no relaxing mode

`selection` is report.json's `selection` member: {"areas", "cases", "requirements",
"keyword", "markers", "level", "deselected"} — the selection options of the run and the cases
they (or pytest's own -k, -m and --deselect) left out ({case id: [requirement ids]}).
`modes` lists the relaxing modes: {"mode", "why", "by"} — errno-agnostic judging (the
--ignore-errno-class option or the IUT's hello), a profile that tolerates Lustre's own bugs.

A requirement's capability is a field of requirements.yaml (`capability`).
`certified_capabilities` are those of the requirements whose cases applied, among the declared
ones.  Requirements outside the declared capabilities (verdict not-applicable) are listed apart
and excluded; an `inconclusive` requirement (its only applicable cases failed on other
requirements) counts neither way; `pass (accept/reject only)` (an errno-class requirement
judged errno-agnostic) counts as applied and passing; `not judged (errno-agnostic)` (a
requirement that is all errno class or order of checks, in an errno-agnostic run) counts
neither way.
"""
from __future__ import annotations

from ptlrpc_conformance.harness.data.registry import CAPABILITIES

NOT_CONFORMANT = "not conformant"
CONFORMANT = "conformant"
FULLY_CONFORMANT = "fully conformant"
PARTIAL = "partial"
NOT_CERTIFIED = "not certified"
INCOMPLETE = "incomplete"
STATUSES = (FULLY_CONFORMANT, CONFORMANT, PARTIAL, NOT_CONFORMANT, NOT_CERTIFIED, INCOMPLETE)
PASS_AGNOSTIC = "pass (accept/reject only)"     # an errno-class requirement judged errno-agnostic
NOT_JUDGED_AGNOSTIC = "not judged (errno-agnostic)"     # one that is all errno class (`errno_only`)
PASSING = ("pass", PASS_AGNOSTIC)
FAILING = ("fail", "error")
NOT_RUN = "not-run"                 # a requirement of a certified capability no case ran
NOT_EXERCISED = "not-exercised"     # its cases ran and passed, but none exercised it
NO_EVIDENCE = (NOT_RUN, NOT_EXERCISED)
APPLIED = ("pass", PASS_AGNOSTIC, "fail", "error", "inconclusive")


def capability(rid: str) -> str | None:
    """The capability the cases of requirement `rid` need (None: the testee protocol's own);
    `decode` for an id the registry does not know."""
    from ptlrpc_conformance.harness.data.registry import requirements
    req = requirements().get(rid)
    return req.capability if req is not None else "decode"


def _selection_words(selection: dict) -> str:
    """What a selection kept, in a few words: "framing area", "3 cases", "-k roundtrip"."""
    parts = []
    areas = list(selection.get("areas") or ())
    if areas:
        parts.append(f"{', '.join(areas)} area{'s' if len(areas) > 1 else ''}")
    for key, one, many in (("cases", "case", "cases"), ("requirements", "requirement", "requirements")):
        ids = list(selection.get(key) or ())
        if len(ids) == 1:
            parts.append(f"{one} {ids[0]}")
        elif ids:
            parts.append(f"{len(ids)} {many}")
    if selection.get("level"):
        parts.append(f"{selection['level']} cases")
    if selection.get("keyword"):
        parts.append(f"-k {selection['keyword']}")
    if selection.get("markers"):
        parts.append(f"-m {selection['markers']}")
    if not parts and selection.get("deselected"):
        parts.append(f"{len(selection['deselected'])} cases deselected")
    return ", ".join(parts)


def level(requirements: dict, incomplete: bool = False, capabilities=None, selection: dict | None = None,
          modes=()) -> dict:
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
    # the scope a certification answers for: every declared capability (the certified ones
    # when the declaration is unknown)
    scope = certified if capabilities is None else [c for c in CAPABILITIES if c in set(capabilities)]
    not_run = sorted(rid for rid, ent in entries.items()
                     if ent.get("level") == "MUST" and ent.get("verdict") in NO_EVIDENCE
                     and capability(rid) in scope)
    selection = dict(selection or {})
    deselected = selection.get("deselected") or {}
    short = {capability(r) for r in not_run}
    for reqs in deselected.values():
        short |= {capability(r) for r in reqs}
    selection["complete"] = {c: c not in short for c in scope}
    modes = [dict(m) for m in modes or () if isinstance(m, dict)]
    if incomplete:
        status = INCOMPLETE
    elif failing["MUST"]:
        status = NOT_CONFORMANT
    elif not certified:
        status = NOT_CERTIFIED
    elif not all(selection["complete"].values()):
        status = PARTIAL
    elif failing["SHOULD"] or modes:
        status = CONFORMANT
    else:
        status = FULLY_CONFORMANT
    return {"status": status, "certified_capabilities": certified, "failing_must": failing["MUST"],
            "failing_should": failing["SHOULD"], "not_applicable": not_applicable, "not_run": not_run,
            "selection": selection, "modes": modes}


def scope_words(lv: dict) -> str:
    """Why a partial level is partial: the selection in a few words, or the MUST requirements
    that have no evidence."""
    selection = lv.get("selection") if isinstance(lv.get("selection"), dict) else {}
    said = _selection_words(selection)
    not_run = list(lv.get("not_run") or ())
    if not_run and not said:
        said = f"{len(not_run)} MUST requirement{'s' if len(not_run) != 1 else ''} not run"
    elif not_run:
        said += f"; {len(not_run)} MUST requirement{'s' if len(not_run) != 1 else ''} not run"
    return said or "part of the suite"


def words(lv) -> str:
    """The level in words: "conformant: decode, encode", "conformant (partial: framing area):
    decode", "conformant (errno-agnostic): decode", "not certified: no MUST case applied"."""
    if not isinstance(lv, dict):
        return str(lv or "unknown")
    status = str(lv.get("status") or lv.get("name") or "unknown")
    caps = [str(c) for c in lv.get("certified_capabilities") or ()]
    if status == NOT_CERTIFIED:
        return f"{status}: no MUST case applied"
    qualifiers = []
    if status == PARTIAL:
        status = CONFORMANT
        qualifiers.append(f"partial: {scope_words(lv)}")
    if status in (CONFORMANT, FULLY_CONFORMANT):
        qualifiers += [str(m.get("mode")) for m in lv.get("modes") or () if isinstance(m, dict) and m.get("mode")]
    if qualifiers:
        status = f"{status} ({'; '.join(qualifiers)})"
    if lv.get("status") == INCOMPLETE or not caps:
        return status
    return f"{status}: {', '.join(caps)}"
