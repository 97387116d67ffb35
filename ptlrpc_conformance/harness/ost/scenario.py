"""Scenario vectors: the target counterpart of golden vectors (docs/scenarios.md).

A scenario is a sequence of steps against a fresh target — requests written out as bytes,
each with predicates on its reply — plus `restart` / `end_recovery` steps for recovery.
Only the fields a target chooses are patched into a request before it is sent: `pb_handle`
(the export cookie the target gave a client), for replays `pb_transno` (the transno an
earlier reply carried), and (format 2) the object id a body request names, counted from the
LAST_ID an earlier create reply revealed.  Every reply is also checked against the
invariants (harness/ost/invariants.py).

Format 2 (`ptlrpc-conformance-scenarios/2`) adds what the rules need where Lustre allows
several outcomes: `expect_any` (one of several named outcomes), `if_outcome` (a step runs
only after a given outcome of an earlier one) and `if_granted` (only when a connect reply
granted, or did not grant, some flags) and `if_release` (only under a release whose
behaviour facts, spec/releases/<release>.json, have the given values).  Format 1 files still
load; they cannot use these.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Iterable

import yaml

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.verdicts import release as release_rules
from ptlrpc_conformance.harness.verdicts.hexdump import render
from ptlrpc_conformance.harness.verdicts.model import BODY, HDR
from ptlrpc_conformance.harness.ost.client import AnyOf, Expect, is_ref
from ptlrpc_conformance.harness.ost.steps import StepJudge, Unresolved, hello_configuration
from ptlrpc_conformance.harness.data import yamlcache
from ptlrpc_conformance.harness.data.vectors import (SCENARIO_FORMAT, SCENARIO_FORMATS, VectorError,
                                                     bundled_files, check_unique_ids, user_files)

OPS = ("exchange", "restart", "end_recovery", "expire_recovery")
PATCHABLE = ("pb_handle", "pb_transno", "pb_pre_versions", "oid")
STEP_KEYS = {"op", "client", "xid", "request", "patch", "expect", "expect_any", "note", "later", "if_committed",
             "if_uncommitted", "if_lost", "if_outcome", "if_granted", "if_release"}
FORMAT2_KEYS = {"expect_any", "if_outcome", "if_granted", "if_release"}
EXPECT_KEYS = {"reply", "type", "status", "transno", "requirement", "why", "struct", "fields", "fields_if_valid",
               "op_flags_all", "op_flags_none", "handle", "same_as"}


@dataclass
class Step:
    op: str = "exchange"
    client: str = ""
    xid: int = 0
    request: bytes = b""
    patch: dict = field(default_factory=dict)    # field -> client name | "@N" | "@N+K" (oid)
    expect: Expect | None = None
    expect_any: AnyOf | None = None              # one of several named outcomes (format 2)
    same_as: int | None = None                   # reply must equal step N's (type, status, transno, buffers)
    later: bool = False                          # the reply may be deferred (recovery)
    note: str = ""
    if_committed: int | None = None              # run only if step N's transno is known committed
    if_uncommitted: int | None = None            # run only if its client has not seen it committed
    if_lost: int | None = None                   # run only if the restart's commit point is below it
    if_outcome: list | None = None               # [{"step": N, "outcome": [names]}]: run only after those
    if_granted: list | None = None               # [{"step": N, "flags": M, "flags2": M2, "granted": bool}]
    if_release: dict | None = None               # {behaviour fact: bool}: run only under such a release

    @property
    def expectation(self) -> Expect | AnyOf | None:
        return self.expect_any if self.expect_any is not None else self.expect

    def to_dict(self) -> dict:
        if self.op != "exchange":
            out = {"op": self.op}
            if self.note:
                out["note"] = self.note
            if self.if_outcome:
                items = [dict(v, outcome=v["outcome"][0] if len(v["outcome"]) == 1 else list(v["outcome"]))
                         for v in self.if_outcome]
                out["if_outcome"] = items[0] if len(items) == 1 else items
            if self.if_granted:
                items = [{k: x for k, x in v.items() if not (k == "granted" and x) and not (k in ("flags", "flags2") and not x)}
                         for v in self.if_granted]
                out["if_granted"] = items[0] if len(items) == 1 else items
            if self.if_release:
                out["if_release"] = dict(self.if_release)
            return out
        out: dict = {"client": self.client, "xid": self.xid}
        if self.note:
            out["note"] = self.note
        out["request"] = self.request.hex()
        if self.patch:
            out["patch"] = dict(self.patch)
        exp = self.expect.as_yaml() if self.expect else {}
        if self.same_as is not None:
            exp["same_as"] = self.same_as
        if exp:
            out["expect"] = exp
        if self.expect_any is not None:
            out["expect_any"] = self.expect_any.as_yaml()
        if self.later:
            out["later"] = True
        for key in ("if_committed", "if_uncommitted", "if_lost"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        for key in ("if_outcome", "if_granted"):
            value = getattr(self, key)
            if value:
                items = [dict(v, outcome=v["outcome"][0] if len(v["outcome"]) == 1 else list(v["outcome"]))
                         if key == "if_outcome" else {k: x for k, x in v.items() if not (k == "granted" and x) and
                                                      not (k in ("flags", "flags2") and not x)}
                         for v in value]
                out[key] = items[0] if len(items) == 1 else items
        if self.if_release:
            out["if_release"] = dict(self.if_release)
        return out

    def uses_format_2(self) -> bool:
        return (self.expect_any is not None or self.if_outcome is not None or self.if_granted is not None
                or self.if_release is not None or "oid" in self.patch or (self.expect is not None and bool(self.expect.refs() or self.expect.fields_if_valid)))


@dataclass
class Scenario:
    id: str
    title: str
    requirements: tuple[str, ...]
    cite: tuple[str, ...]
    steps: list[Step]
    needs: tuple[str, ...] = ("target",)
    source: str = ""

    def to_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "requirements": list(self.requirements),
                "cite": list(self.cite), "needs": list(self.needs),
                "steps": [s.to_dict() for s in self.steps]}


def dump_file(scenarios: list[Scenario]) -> str:
    return yaml.safe_dump({"format": SCENARIO_FORMAT, "scenarios": [s.to_dict() for s in scenarios]},
                          sort_keys=False, width=120)


# ---------------------------------------------------------------------------------------
# loading, with every problem named by file, scenario and step
# ---------------------------------------------------------------------------------------

def _int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_expect_dict(d: dict, where: str, problems: list[str], allow: set) -> bool:
    bad = set(d) - allow
    if bad:
        problems.append(f"{where}: unknown expect key(s) {sorted(bad)}")
    if d.get("type") not in (None, "REPLY", "ERR"):
        problems.append(f"{where}: expect.type must be REPLY or ERR")
    if d.get("transno", "any") not in ("zero", "nonzero", "any"):
        problems.append(f"{where}: expect.transno must be zero, nonzero or any")
    for key in ("fields", "fields_if_valid"):
        if key in d and not isinstance(d[key], dict):
            problems.append(f"{where}: expect.{key} must be a mapping")
    return not bad


def _parse_step(raw, where: str, problems: list[str]) -> Step | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: a step must be a mapping")
        return None
    unknown = set(raw) - STEP_KEYS
    if unknown:
        problems.append(f"{where}: unknown key(s) {sorted(unknown)}")
    op = raw.get("op", "exchange")
    if op not in OPS:
        problems.append(f"{where}: op {op!r} is not one of {list(OPS)}")
        return None
    if op != "exchange":
        extra = set(raw) - {"op", "note", "if_outcome", "if_granted", "if_release"}
        if extra:
            problems.append(f"{where}: op {op} takes only 'note', 'if_outcome', 'if_granted' and 'if_release', "
                            f"not {sorted(extra)}")
        return Step(op=op, note=str(raw.get("note", "")), **_conditions(raw, where, problems))
    client, xid = raw.get("client"), raw.get("xid")
    if not isinstance(client, str) or not client:
        problems.append(f"{where}: 'client' must be a non-empty string")
    if not _int(xid) or xid < 0:
        problems.append(f"{where}: 'xid' must be a non-negative integer")
    try:
        request = bytes.fromhex(str(raw.get("request", "")))
    except ValueError:
        problems.append(f"{where}: 'request' is not hex")
        request = b""
    if not request:
        problems.append(f"{where}: 'request' is missing or empty")
    patch = raw.get("patch") or {}
    if not isinstance(patch, dict) or set(patch) - set(PATCHABLE):
        problems.append(f"{where}: 'patch' may set only {list(PATCHABLE)}")
        patch = {}
    if "oid" in patch and not is_ref(patch["oid"]):
        problems.append(f"{where}: patch 'oid' must be '@STEP' or '@STEP+K'")
    exp_raw = raw.get("expect") or {}
    same_as = None
    expect = None
    if not isinstance(exp_raw, dict):
        problems.append(f"{where}: 'expect' must be a mapping")
    else:
        ok = _check_expect_dict(exp_raw, where, problems, EXPECT_KEYS)
        same_as = exp_raw.get("same_as")
        rest = {k: v for k, v in exp_raw.items() if k != "same_as"}
        if rest and ok:
            try:
                expect = Expect.from_yaml(rest)
            except (KeyError, TypeError, ValueError) as e:
                problems.append(f"{where}: bad expect: {e}")
    expect_any = None
    if "expect_any" in raw:
        items = raw["expect_any"]
        if "expect" in raw and {k for k in (raw.get("expect") or {}) if k != "same_as"}:
            problems.append(f"{where}: 'expect' and 'expect_any' exclude each other (put every outcome in expect_any)")
        if not isinstance(items, list) or len(items) < 2:
            problems.append(f"{where}: 'expect_any' must list at least two outcomes")
        else:
            good = True
            for i, item in enumerate(items, 1):
                if not isinstance(item, dict):
                    problems.append(f"{where}: expect_any {i}: must be a mapping")
                    good = False
                    continue
                good &= _check_expect_dict(item, f"{where}: expect_any {i}", problems,
                                           (EXPECT_KEYS - {"same_as"}) | {"outcome"})
            if good:
                try:
                    expect_any = AnyOf.from_yaml(items)
                except (KeyError, TypeError, ValueError) as e:
                    problems.append(f"{where}: bad expect_any: {e}")
    conditions = _conditions(raw, where, problems)
    return Step(op="exchange", client=client or "", xid=xid if _int(xid) else 0, request=request,
                patch=dict(patch), expect=expect, expect_any=expect_any, same_as=same_as,
                later=bool(raw.get("later")), note=str(raw.get("note", "")), **conditions)


def _conditions(raw: dict, where: str, problems: list[str]) -> dict:
    """The conditions of a step (if_committed, if_uncommitted, if_lost, if_outcome, if_granted)."""
    conditions = {}
    for key in ("if_committed", "if_uncommitted", "if_lost"):
        if key in raw:
            if not _int(raw[key]):
                problems.append(f"{where}: '{key}' must name a step by number")
            else:
                conditions[key] = raw[key]
    if "if_outcome" in raw:
        items = raw["if_outcome"] if isinstance(raw["if_outcome"], list) else [raw["if_outcome"]]
        parsed = []
        for v in items:
            names = v.get("outcome") if isinstance(v, dict) else None
            if isinstance(names, str):
                names = [names]
            if not (isinstance(v, dict) and _int(v.get("step")) and isinstance(names, list) and names
                    and all(isinstance(n, str) for n in names) and set(v) <= {"step", "outcome"}):
                problems.append(f"{where}: 'if_outcome' must be {{step: N, outcome: NAME or [NAMES]}} (or a list of them)")
                parsed = None
                break
            parsed.append({"step": v["step"], "outcome": list(names)})
        if parsed:
            conditions["if_outcome"] = parsed
    if "if_granted" in raw:
        items = raw["if_granted"] if isinstance(raw["if_granted"], list) else [raw["if_granted"]]
        parsed = []
        for v in items:
            if not (isinstance(v, dict) and _int(v.get("step")) and set(v) <= {"step", "flags", "flags2", "granted"}
                    and all(_int(v.get(k, 0)) and v.get(k, 0) >= 0 for k in ("flags", "flags2"))
                    and (v.get("flags", 0) or v.get("flags2", 0)) and isinstance(v.get("granted", True), bool)):
                problems.append(f"{where}: 'if_granted' must be {{step: N, flags: MASK, flags2: MASK, granted: true|false}} "
                                f"with a non-zero mask (or a list of them)")
                parsed = None
                break
            parsed.append({"step": v["step"], "flags": v.get("flags", 0), "flags2": v.get("flags2", 0),
                           "granted": v.get("granted", True)})
        if parsed:
            conditions["if_granted"] = parsed
    if "if_release" in raw:
        cond = raw["if_release"]
        known = _release_facts()
        if not (isinstance(cond, dict) and cond and all(isinstance(v, bool) for v in cond.values())):
            problems.append(f"{where}: 'if_release' must map behaviour facts to true or false")
        elif set(cond) - known:
            problems.append(f"{where}: 'if_release' names no behaviour fact of the releases: "
                            f"{sorted(set(cond) - known)} (spec/releases/<release>.json, behaviour)")
        else:
            conditions["if_release"] = dict(cond)
    return conditions


def _release_facts() -> set[str]:
    """The behaviour facts every release's facts file has (what `if_release` may name)."""
    from ptlrpc_conformance.harness.data import registry
    from ptlrpc_conformance.spec import releases
    return set(releases.load(registry.profile(None).release)["behaviour"])


def _step_refs(st: Step) -> list[int]:
    """Steps an "@N" / "@N+K" value of this step names."""
    out = []
    values = list(st.patch.values())
    exp = st.expectation
    if exp is not None:
        values += exp.refs()
    for v in values:
        if isinstance(v, str) and v.startswith("@"):
            head = v[1:].split("+")[0].split("-")[0]
            out.append(int(head) if head.isdigit() else -1)
    return out


def load_text(name: str, text: str, problems: list[str], yaml_problems: bool = True) -> list[Scenario]:
    """Scenarios of one file's text (none if it is not a scenario file); problems appended."""
    try:
        data = yamlcache.load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        if yaml_problems:
            problems.append(f"{name}:{mark.line + 1 if mark else '?'}: not valid YAML: {getattr(e, 'problem', e)}")
        return []
    if not isinstance(data, dict) or data.get("format") not in SCENARIO_FORMATS:
        return []
    version = 1 if data["format"] == SCENARIO_FORMATS[0] else 2
    if not isinstance(data.get("scenarios"), list):
        problems.append(f"{name}: 'scenarios' must be a list")
        return []
    if not data["scenarios"]:
        problems.append(f"{name}: nothing to check: 'scenarios' is empty")
        return []
    out = []
    for i, raw in enumerate(data["scenarios"]):
        where = f"{name}: scenario {i}"
        if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
            problems.append(f"{where}: needs an 'id'")
            continue
        where = f"{name}: {raw['id']}"
        for key in ("title", "requirements", "cite", "steps"):
            if not raw.get(key):
                problems.append(f"{where}: '{key}' is missing")
        steps = []
        by_no: dict[int, Step] = {}
        for j, s in enumerate(raw.get("steps") or [], 1):
            st = _parse_step(s, f"{where}: step {j}", problems)
            if st is None:
                continue
            by_no[j] = st
            if version == 1 and (st.uses_format_2() or st.op == "expire_recovery"):
                problems.append(f"{where}: step {j}: expect_any, if_outcome, if_granted, fields_if_valid, expire_recovery "
                                f"and object ids counted from a step ('@N+K') need 'format: {SCENARIO_FORMAT}'")
            if st.same_as is not None and not (_int(st.same_as) and 1 <= st.same_as < j):
                problems.append(f"{where}: step {j}: same_as must name an earlier step")
            for cond in (st.if_committed, st.if_uncommitted, st.if_lost):
                if cond is not None and not 1 <= cond < j:
                    problems.append(f"{where}: step {j}: if_committed/if_uncommitted/if_lost must name an earlier step")
            for key in ("if_outcome", "if_granted"):
                for cond in getattr(st, key) or ():
                    if not 1 <= cond["step"] < j:
                        problems.append(f"{where}: step {j}: {key} must name an earlier step")
            for cond in st.if_outcome or ():
                if not 1 <= cond["step"] < j:
                    continue
                target = by_no.get(cond["step"])
                if target is None or target.op != "exchange":
                    known = None
                elif target.expect_any is not None:
                    known = set(target.expect_any.names) | {"skipped"}
                else:
                    known = {"expected", "skipped"}
                if known is not None and target.later:
                    known.add("waiting")
                if known is None:
                    problems.append(f"{where}: step {j}: if_outcome must name an exchange step")
                elif set(cond["outcome"]) - known:
                    problems.append(f"{where}: step {j}: if_outcome names outcome(s) "
                                    f"{sorted(set(cond['outcome']) - known)} that step {cond['step']} "
                                    f"does not list ({sorted(known)})")
            for value in st.patch.values():
                if isinstance(value, str) and value.startswith("@") and not is_ref(value):
                    problems.append(f"{where}: step {j}: patch {value!r} must be '@STEP' or '@STEP+K'")
            for ref in _step_refs(st):
                if not 1 <= ref < j:
                    problems.append(f"{where}: step {j}: '@{ref}' must name an earlier step")
            steps.append(st)
        out.append(Scenario(raw["id"], str(raw.get("title", "")), tuple(raw.get("requirements") or ()),
                            tuple(raw.get("cite") or ()), steps, tuple(raw.get("needs") or ("target",)), name))
    return out


def load_all(extra: Iterable[str] = ()) -> list[Scenario]:
    """Bundled scenarios plus those in the user's vector files; every problem reported at once."""
    from ptlrpc_conformance.harness.data.vectors import is_scenario_text
    problems: list[str] = []
    scenarios: list[Scenario] = []
    try:
        for name, text in bundled_files():
            if is_scenario_text(text):   # the bundled vector files are not parsed twice
                scenarios += load_text(name, text, problems)
        for f in user_files(extra):
            try:
                scenarios += load_text(str(f), f.read_text(encoding="utf-8"), problems)
            except (OSError, UnicodeDecodeError) as e:
                problems.append(f"{f}: cannot read: {e}")
    except VectorError as e:
        problems += e.problems
    check_unique_ids(scenarios, problems)
    if problems:
        raise VectorError(problems)
    return scenarios


# ---------------------------------------------------------------------------------------
# running
# ---------------------------------------------------------------------------------------

def patch_request(data: bytes, values: dict[str, int]) -> bytes:
    """Overwrite body fields of a request in its own byte order; "oid" is the object id in
    buffer 1's ost_body (its o_oi in `oi` form: oi_id)."""
    from ptlrpc_conformance.harness.ost.client import OI_OFFSET
    out = bytearray(data)
    order = "big" if int.from_bytes(data[8:12], "little") == wire.C("LUSTRE_MSG_MAGIC_V2_SWABBED") else "little"
    count = int.from_bytes(data[HDR["lm_bufcount"].offset:HDR["lm_bufcount"].offset + 4], order)
    lens_at = HDR["lm_buflens"].offset
    lens = [int.from_bytes(data[lens_at + 4 * i:lens_at + 4 * i + 4], order) for i in range(count)]
    body = -(-(lens_at + 4 * count) // 8) * 8
    for name, value in values.items():
        if name == "pb_pre_versions":        # the first pre-version only
            f = BODY[name]
            out[body + f.offset:body + f.offset + 8] = value.to_bytes(8, order)
            continue
        if name == "oid":
            if count < 2 or lens[1] < OI_OFFSET + 8:
                raise ValueError("patch oid: the request has no ost_body in buffer 1")
            at = body + -(-lens[0] // 8) * 8 + OI_OFFSET
            out[at:at + 8] = value.to_bytes(8, order)
            continue
        f = BODY[name]
        if name == "pb_handle":       # an opaque cookie: Lustre never swabs it
            out[body + f.offset:body + f.offset + 8] = value.to_bytes(8, "little")
        else:
            out[body + f.offset:body + f.offset + f.size] = value.to_bytes(f.size, order)
    return bytes(out)


@dataclass
class Record:
    step: int
    client: str
    xid: int
    request: bytes
    reply: bytes | None
    note: str = ""
    problems: list[str] = field(default_factory=list)


class TargetError(Exception):
    """The testee could not carry out an operation (crash, timeout, protocol error, refusal)."""


class RecoveryDisabled(Exception):
    """The target runs with recovery disabled (declared in its hello, or shown by its connect
    replies) and the scenario judges recovery: not applicable to it (docs/target-rules.md §4)."""


class LastIdOutOfReach(Exception):
    """The target's first create was refused REPLY -EINVAL as 20000 or more below its LAST_ID,
    as an OST before 2.16 answers (ofd_create_hdl; the release fact create_trusts_last_id
    false): the scenario cannot learn LAST_ID, so it cannot name objects (docs/target-rules.md
    §10): not applicable to that target."""


def last_id_out_of_reach(release: str, request: bytes, reply: bytes | None, learnt: bool) -> bool:
    """A create sent before LAST_ID is known got REPLY -EINVAL with transno 0 from a target
    judged by a release whose OST refuses a create far below LAST_ID."""
    if learnt or release_rules.behaviour(release, "create_trusts_last_id"):
        return False
    req, rep = wire.try_parse(request, "request")[0], wire.try_parse(reply, "reply")[0]
    return (req is not None and rep is not None and req.body["pb_opc"] == wire.C("OST_CREATE")
            and rep.body["pb_type"] == wire.REPLY and rep.status == -spec.errno_value("EINVAL")
            and rep.body["pb_transno"] == 0)


def handles_recovery_disabled(scenario: "Scenario") -> bool:
    """The scenario has outcomes for a target with recovery disabled ("recovery:disabled")."""
    return any(isinstance(st.expectation, AnyOf) and "recovery:disabled" in st.expectation.names
               for st in scenario.steps)


def call(adapter, request: dict) -> dict:
    outcome = adapter.call(request)
    if not outcome.ok:
        raise TargetError(f"{request.get('op')}: {outcome.describe()}")
    if not isinstance(outcome.result, dict):
        raise TargetError(f"{request.get('op')}: result is not an object")
    return outcome.result


def exchange(adapter, client: str, xid: int, data: bytes) -> tuple[bytes | None, list[tuple[str, int, bytes]]]:
    """(reply bytes or None, deferred replies [(client, xid, bytes)]) of one exchange."""
    result = call(adapter, {"op": "exchange", "data": data.hex(), "xid": xid, "client": client})
    return _hex_or_none(result.get("data"), "data"), deferred_replies(result.get("replies"))


def _hex_or_none(value, what: str) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise TargetError(f"exchange: {what} is not a hex string or null")
    try:
        return bytes.fromhex(value)
    except ValueError:
        raise TargetError(f"exchange: {what} is not hex") from None


def deferred_replies(items) -> list[tuple[str, int, bytes | None]]:
    """The deferred replies an exchange or end_recovery result lists: [(client, xid, bytes)]."""
    if items is None:
        return []
    if not isinstance(items, list):
        raise TargetError("exchange: 'replies' is not a list")
    out = []
    for i, it in enumerate(items):
        if not (isinstance(it, dict) and isinstance(it.get("client"), str) and isinstance(it.get("xid"), int)):
            raise TargetError(f"exchange: replies[{i}] needs a string client and an integer xid")
        out.append((it["client"], it["xid"], _hex_or_none(it.get("data"), f"replies[{i}].data")))
    return out


def run(scenario: Scenario, adapter, reconstruct: bool = False,
        judged: list | None = None, release: str | None = None) -> tuple[list[str], list[Record]]:
    """Run a scenario on a reset target: (problems, transcript).  `reconstruct`: resends must
    be answered with the original reply (profile lustre-2.17.57-reconstruct).  `judged`, when
    given, receives the requirements of the expectations the replies met (StepJudge.judged).
    `release`: the Lustre release whose rules apply (default: the session's, release.active())."""
    problems: list[str] = []
    records: list[Record] = []
    steps = StepJudge(reconstruct=reconstruct, configuration=hello_configuration(adapter), release=release)
    commit_point: list[int | None] = [None]         # what the last restart said was on stable storage
    call(adapter, {"op": "reset"})

    # what the clients had been told committed when the target restarted (and what their
    # reconnects told them): after the first restart that followed a step, that is what
    # tells whether the step survived the crash (replays run later commit again)
    crashes: list[tuple] = []      # (restart step, told (with reconnects), told before it, commit point)

    def at_crash(step_no: int, reconnects: bool = True) -> tuple[dict[str, int], int | None]:
        for at, told, before, point in crashes:
            if at > step_no:
                return (told if reconnects else before), point
        return steps.committed, commit_point[0]

    def told_committed(step_no: int, reconnects: bool = True) -> bool:
        """The client of step N had been told it committed when the target restarted (with
        `reconnects`: or by its reconnect after that)."""
        t = steps.transno(step_no)
        told, _ = at_crash(step_no, reconnects)
        return t != 0 and told.get(scenario.steps[step_no - 1].client, 0) >= t

    def known_committed(step_no: int) -> bool:
        t = steps.transno(step_no)
        _, point = at_crash(step_no)
        return told_committed(step_no) or (t != 0 and point is not None and point >= t)

    def known_lost(step_no: int) -> bool:
        t = steps.transno(step_no)
        _, point = at_crash(step_no)
        return t != 0 and point is not None and point < t and not told_committed(step_no)

    def judge(step_no: int, st: Step, data: bytes | None, record: Record) -> None:
        _, found = steps.judge(step_no, st.client, st.xid, record.request, data, st.expectation, st.same_as)
        record.problems += found
        problems.extend(f"step {step_no} ({st.client} xid {st.xid}): {p}" for p in record.problems)

    def absorb(deferred) -> None:
        matched, unmatched = steps.arrived(deferred)
        problems.extend(unmatched)
        for n, data in matched:
            rec = records[n - 1]
            rec.reply = data
            rec.note += " (reply deferred)"
            judge(n, scenario.steps[n - 1], data, rec)

    def skip(n: int, why: str) -> None:
        steps.outcomes[n] = "skipped"
        records.append(Record(n, "", 0, b"", None, f"skipped: {why}"))

    def unmet(st: Step) -> str | None:
        """Why a step's if_release / if_outcome / if_granted conditions do not hold (None: they do)."""
        if st.if_release and not release_rules.holds(st.if_release, steps.release):
            return (f"Lustre {steps.release} does not have "
                    + ", ".join(f"{k} {str(v).lower()}" for k, v in st.if_release.items()))
        for cond in st.if_outcome or ():
            got = steps.outcomes.get(cond["step"])
            if got not in cond["outcome"]:
                return (f"step {cond['step']} ended {got or 'with no known outcome'}, "
                        f"not {' or '.join(cond['outcome'])}")
        for g in st.if_granted or ():
            flags = steps.granted.get(g["step"])
            if flags is None:
                return f"step {g['step']} is not a successful connect"
            has = (flags[0] & g["flags"]) == g["flags"] and (flags[1] & g["flags2"]) == g["flags2"]
            if has != g["granted"]:
                return (f"step {g['step']}'s connect {'did not grant' if g['granted'] else 'granted'} "
                        f"flags {g['flags']:#x}/{g['flags2']:#x}")
        return None

    for n, st in enumerate(scenario.steps, 1):
        if st.op != "exchange" and unmet(st):
            skip(n, f"{st.op}: {unmet(st)}")
            continue
        if st.op == "restart":
            if steps.recovery == {False} and not handles_recovery_disabled(scenario) and not problems:
                raise RecoveryDisabled(f"{scenario.id} judges recovery; the target runs with recovery disabled")
            result = call(adapter, {"op": "restart"})
            point = result.get("last_committed")
            if point is not None and (not isinstance(point, int) or isinstance(point, bool) or point < 0):
                raise TargetError("restart: last_committed must be a non-negative integer")
            commit_point[0] = point
            told = max(steps.committed.values(), default=0)
            if point is not None and point < told:
                problems.append(f"step {n}: RCV-STATE-1: the restart's commit point {point:#x} is below {told:#x}, "
                                f"a last committed value a client was sent")
            steps.restart(point)
            crashes.append((n, dict(steps.committed), dict(steps.committed), point))
            records.append(Record(n, "", 0, b"", None, "restart"))
            continue
        if st.op in ("end_recovery", "expire_recovery"):
            # one expiry of the recovery window (expire_recovery is another name for it): the
            # target may go on with the clients it keeps, or evict every client that has not
            # finished; recovery is over when no client can still be replaying
            result = call(adapter, {"op": "end_recovery"})
            records.append(Record(n, "", 0, b"", None, st.op))
            over = steps.expire()
            absorb(deferred_replies(result.get("replies")))
            if over:
                steps.recovery_ended()
            continue
        if st.if_committed is not None and not known_committed(st.if_committed):
            skip(n, f"step {st.if_committed} is not known committed")
            continue
        if st.if_uncommitted is not None and told_committed(st.if_uncommitted, reconnects=False):
            skip(n, f"step {st.if_uncommitted} was seen committed")
            continue
        if st.if_lost is not None and not known_lost(st.if_lost):
            skip(n, f"step {st.if_lost} is not known lost")
            continue
        why = unmet(st)
        if why is not None:
            skip(n, why)
            continue
        values = {}
        try:
            for name, source in st.patch.items():
                if name == "oid":
                    values[name] = steps.value_of(source)
                elif isinstance(source, str) and source.startswith("@"):
                    values[name] = steps.transno(int(source[1:]))     # pb_transno, pb_pre_versions
                else:
                    values[name] = steps.cookies.get(source, 0)
        except Unresolved as e:
            problems.append(f"step {n} ({st.client} xid {st.xid}): TGT-OBJ-1: cannot build the request: {e}")
            skip(n, str(e))
            continue
        data = patch_request(st.request, values) if values else st.request
        reply, deferred = exchange(adapter, st.client, st.xid, data)
        rec = Record(n, st.client, st.xid, data, reply, st.note)
        records.append(rec)
        if reply is None and st.later:
            steps.defer(n, st.client, st.xid, data)
            steps.outcomes[n] = "waiting"       # until its reply comes
        else:
            if last_id_out_of_reach(steps.release, data, reply, bool(steps.last_ids)) and not problems:
                raise LastIdOutOfReach(f"{scenario.id}: the target refused a create of id 1 with -EINVAL: its LAST_ID "
                                       f"is 20000 or more above it, as a Lustre {steps.release} OST answers; the "
                                       f"scenario cannot name objects")
            judge(n, st, reply, rec)
            if crashes and steps.checker.recovering and n in steps.granted:
                told = crashes[-1][1]      # a reconnect during recovery tells what survived
                told[st.client] = max(told.get(st.client, 0), steps.committed.get(st.client, 0))
        absorb(deferred)
    for n, client, xid in steps.never_answered():
        # a claim of a transno whose first claimant had been answered must run (RCV-CLAIMED-1);
        # any other held request's reply is owed by the replay order (RCV-ORDER-1)
        exp = scenario.steps[n - 1].expectation
        rule = "RCV-CLAIMED-1" if isinstance(exp, Expect) and exp.requirement == "RCV-CLAIMED-1" else "RCV-ORDER-1"
        problems.append(f"step {n} ({client} xid {xid}): {rule}: the deferred reply never came")
    if judged is not None:
        judged += steps.judged
    return problems, records


def first_failure(problems: list[str]) -> list[str]:
    """The problems of the first step that failed ("step N ...: RULE: text"), in the order they
    were judged; the first problem alone when it names no step.  A failure is charged to these:
    what later steps show may only follow from it (a target that wrongly evicted a client
    refuses it afterwards)."""
    if not problems:
        return []
    m = _STEP_PREFIX.match(problems[0])
    if m is None:
        return problems[:1]
    return [p for p in problems if (q := _STEP_PREFIX.match(p)) and q.group(1) == m.group(1)]


_STEP_PREFIX = re.compile(r"^step (\d+)\b")


def render_transcript(records: list[Record], limit: int = 40) -> str:
    """A readable list of exchanges with annotated hex of every request and reply."""
    lines = []
    for r in records[-limit:]:
        if not r.client:
            lines.append(f"--- step {r.step}: {r.note}")
            continue
        rep, why = wire.try_parse(r.reply, "reply")
        req, _ = wire.try_parse(r.request, "request")
        head = f"--- step {r.step}: {r.client} xid {r.xid}"
        if r.note:
            head += f" — {r.note}"
        lines.append(head)
        lines.append("  request: " + (req.describe() if req else "(does not unpack)"))
        lines.append("  reply:   " + ("none" if r.reply is None else rep.describe() if rep else f"unreadable: {why}"))
        for p in r.problems:
            lines.append(f"  !! {p}")
        if r.problems:
            lines.append("  request bytes:\n" + _indent(render(r.request, limit=512)))
            if r.reply is not None:
                lines.append("  reply bytes:\n" + _indent(render(r.reply, limit=512)))
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.splitlines())
