"""Scenario vector files (docs/scenarios.md): the steps and scenarios they hold, loaded and
checked with every problem named by file, scenario and step, and dumped back to YAML.
Running them is harness/ost/scenario.py's job.

A scenario is a sequence of steps against a fresh target — requests written out as bytes,
each with predicates on its reply — plus `restart` / `end_recovery` steps for recovery.
A step's `patch` names the fields the runner fills in before sending it (`pb_handle`,
`pb_transno`, `pb_pre_versions`, and in format 2 the object id `oid`).

Format 2 (`ptlrpc-conformance-scenarios/2`) adds what the rules need where Lustre allows
several outcomes: `expect_any` (one of several named outcomes), `if_outcome` (a step runs
only after a given outcome of an earlier one) and `if_granted` (only when a connect reply
granted, or did not grant, some flags) and `if_release` (only under a release whose
behaviour facts, spec/releases/<release>.json, have the given values).  Format 1 files still
load; they cannot use these.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import yaml

from ptlrpc_conformance.harness.ost.client import AnyOf, Expect, is_ref
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
    # every other member's kind, so that a wrong one is named here, not met by the judge
    wrong = [f"{where}: expect.{key} must be {what}" for key, what, good in (
        ("reply", "none", lambda v: v == "none"),
        ("status", "an integer (the signed pb_status) or null", lambda v: v is None or _int(v)),
        ("op_flags_all", "a non-negative integer", lambda v: _int(v) and v >= 0),
        ("op_flags_none", "a non-negative integer", lambda v: _int(v) and v >= 0),
        ("handle", "nonzero, zero or null", lambda v: v in (None, "nonzero", "zero")),
        ("requirement", "a requirement id (a string)", lambda v: isinstance(v, str) and v),
        ("why", "a string", lambda v: isinstance(v, str)),
        ("struct", "a structure name (a string)", lambda v: v is None or (isinstance(v, str) and _known_struct(v))),
        ("outcome", "a non-empty string", lambda v: isinstance(v, str) and v)) if key in d and not good(d[key])]
    problems.extend(wrong)
    return not bad and not wrong and d.get("type") in (None, "REPLY", "ERR") \
        and d.get("transno", "any") in ("zero", "nonzero", "any") \
        and all(isinstance(d[k], dict) for k in ("fields", "fields_if_valid") if k in d)


def _known_struct(name: str) -> bool:
    from ptlrpc_conformance.spec import layouts
    try:
        layouts.canonical(name)
    except KeyError:
        return False
    return True


def _parse_step(raw, where: str, problems: list[str]) -> Step | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: a step must be a mapping")
        return None
    unknown = set(raw) - STEP_KEYS
    if unknown:
        problems.append(f"{where}: unknown key(s) {sorted(unknown)}")
    op = raw.get("op", "exchange")
    if not isinstance(op, str) or op not in OPS:
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
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                problems.append(f"{where}: bad expect: {e}")
    expect_any = None
    if "expect_any" in raw:
        items = raw["expect_any"]
        if isinstance(raw.get("expect"), dict) and {k for k in raw["expect"] if k != "same_as"}:
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
                except (KeyError, TypeError, ValueError, AttributeError) as e:
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
        if raw.get("title") and not isinstance(raw["title"], str):
            problems.append(f"{where}: 'title' must be a string")
        for key in ("requirements", "cite", "needs"):
            if raw.get(key) and not (isinstance(raw[key], list) and all(isinstance(x, str) and x for x in raw[key])):
                problems.append(f"{where}: '{key}' must be a list of strings")
                raw = dict(raw, **{key: None})
        if raw.get("steps") and not isinstance(raw["steps"], list):
            problems.append(f"{where}: 'steps' must be a list of steps")
            raw = dict(raw, steps=None)
        steps = []
        by_no: dict[int, Step] = {}
        for j, s in enumerate(raw.get("steps") or [], 1):
            try:
                st = _parse_step(s, f"{where}: step {j}", problems)
            except (KeyError, TypeError, ValueError, AttributeError) as e:
                # a shape no check above foresaw: still the file's problem, named by its step
                problems.append(f"{where}: step {j}: not a step this format reads ({type(e).__name__}: {e})")
                continue
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


def _bundled() -> tuple[list[Scenario], list[str]]:
    """The bundled scenarios and their problems, kept in the parse cache between runs (the
    cache's name covers every file of the package): building them took about 25 ms of every
    process's start-up, reading them back 5 ms."""
    def read() -> tuple[list[Scenario], list[str]]:
        from ptlrpc_conformance.harness.data.vectors import is_scenario_text
        problems: list[str] = []
        scenarios: list[Scenario] = []
        for name, text in bundled_files():
            if is_scenario_text(text):   # the bundled vector files are not parsed twice
                scenarios += load_text(name, text, problems)
        return scenarios, problems
    return yamlcache.remember("bundled-scenarios", b"", read)


def load_all(extra: Iterable[str] = ()) -> list[Scenario]:
    """Bundled scenarios plus those in the user's vector files; every problem reported at once."""
    scenarios, problems = _bundled()
    try:
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
