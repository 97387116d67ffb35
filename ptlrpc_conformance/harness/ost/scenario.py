"""Scenario vectors: the target counterpart of golden vectors (docs/scenarios.md).

A scenario is a sequence of steps against a fresh target — requests written out as bytes,
each with predicates on its reply — plus `restart` / `end_recovery` steps for recovery.
Only the fields a target chooses are patched into a request before it is sent: `pb_handle`
(the export cookie the target gave a client) and, for replays, `pb_transno` (the transno an
earlier reply carried).  Every reply is also checked against the invariants
(harness/ost/invariants.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import yaml

from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.outputs.hexdump import render
from ptlrpc_conformance.harness.verdicts.model import BODY, HDR
from ptlrpc_conformance.harness.ost.client import Expect
from ptlrpc_conformance.harness.ost.steps import StepJudge
from ptlrpc_conformance.harness.data.vectors import SAFE_LOADER, SCENARIO_FORMAT, VectorError, bundled_files, check_unique_ids, user_files

OPS = ("exchange", "restart", "end_recovery")
PATCHABLE = ("pb_handle", "pb_transno")
STEP_KEYS = {"op", "client", "xid", "request", "patch", "expect", "note", "later", "if_committed", "if_uncommitted",
             "if_lost"}
EXPECT_KEYS = {"reply", "type", "status", "transno", "requirement", "why", "struct", "fields",
               "op_flags_all", "op_flags_none", "handle", "same_as"}


@dataclass
class Step:
    op: str = "exchange"
    client: str = ""
    xid: int = 0
    request: bytes = b""
    patch: dict = field(default_factory=dict)    # field -> client name | "@N" (step N's reply transno)
    expect: Expect | None = None
    same_as: int | None = None                   # reply must equal step N's (type, status, transno, buffers)
    later: bool = False                          # the reply may be deferred (recovery)
    note: str = ""
    if_committed: int | None = None              # run only if step N's transno is known committed
    if_uncommitted: int | None = None            # run only if its client has not seen it committed
    if_lost: int | None = None                   # run only if the restart's commit point is below it

    def to_dict(self) -> dict:
        if self.op != "exchange":
            out = {"op": self.op}
            if self.note:
                out["note"] = self.note
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
        if self.later:
            out["later"] = True
        if self.if_committed is not None:
            out["if_committed"] = self.if_committed
        if self.if_uncommitted is not None:
            out["if_uncommitted"] = self.if_uncommitted
        if self.if_lost is not None:
            out["if_lost"] = self.if_lost
        return out


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
        return Step(op=op, note=str(raw.get("note", "")))
    client, xid = raw.get("client"), raw.get("xid")
    if not isinstance(client, str) or not client:
        problems.append(f"{where}: 'client' must be a non-empty string")
    if not isinstance(xid, int) or isinstance(xid, bool) or xid < 0:
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
    exp_raw = raw.get("expect") or {}
    same_as = None
    expect = None
    if not isinstance(exp_raw, dict):
        problems.append(f"{where}: 'expect' must be a mapping")
    else:
        bad = set(exp_raw) - EXPECT_KEYS
        if bad:
            problems.append(f"{where}: unknown expect key(s) {sorted(bad)}")
        if exp_raw.get("type") not in (None, "REPLY", "ERR"):
            problems.append(f"{where}: expect.type must be REPLY or ERR")
        if exp_raw.get("transno", "any") not in ("zero", "nonzero", "any"):
            problems.append(f"{where}: expect.transno must be zero, nonzero or any")
        same_as = exp_raw.get("same_as")
        rest = {k: v for k, v in exp_raw.items() if k != "same_as"}
        if rest and not bad:
            try:
                expect = Expect.from_yaml(rest)
            except (KeyError, TypeError, ValueError) as e:
                problems.append(f"{where}: bad expect: {e}")
    conditions = {}
    for key in ("if_committed", "if_uncommitted", "if_lost"):
        if key in raw:
            if not isinstance(raw[key], int) or isinstance(raw[key], bool):
                problems.append(f"{where}: '{key}' must name a step by number")
            else:
                conditions[key] = raw[key]
    return Step(op="exchange", client=client or "", xid=xid if isinstance(xid, int) else 0, request=request,
                patch=dict(patch), expect=expect, same_as=same_as, later=bool(raw.get("later")),
                note=str(raw.get("note", "")), **conditions)


def load_text(name: str, text: str, problems: list[str], yaml_problems: bool = True) -> list[Scenario]:
    """Scenarios of one file's text (none if it is not a scenario file); problems appended."""
    try:
        data = yaml.load(text, Loader=SAFE_LOADER)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        if yaml_problems:
            problems.append(f"{name}:{mark.line + 1 if mark else '?'}: not valid YAML: {getattr(e, 'problem', e)}")
        return []
    if not isinstance(data, dict) or data.get("format") != SCENARIO_FORMAT:
        return []
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
        for j, s in enumerate(raw.get("steps") or [], 1):
            st = _parse_step(s, f"{where}: step {j}", problems)
            if st is not None:
                if st.same_as is not None and not (isinstance(st.same_as, int) and 1 <= st.same_as < j):
                    problems.append(f"{where}: step {j}: same_as must name an earlier step")
                for cond in (st.if_committed, st.if_uncommitted, st.if_lost):
                    if cond is not None and not 1 <= cond < j:
                        problems.append(f"{where}: step {j}: if_committed/if_uncommitted must name an earlier step")
                for value in st.patch.values():
                    if isinstance(value, str) and value.startswith("@") and not (value[1:].isdigit() and 1 <= int(value[1:]) < j):
                        problems.append(f"{where}: step {j}: patch {value!r} must name an earlier step")
                steps.append(st)
        out.append(Scenario(raw["id"], str(raw.get("title", "")), tuple(raw.get("requirements") or ()),
                            tuple(raw.get("cite") or ()), steps, tuple(raw.get("needs") or ("target",)), name))
    return out


def load_all(extra: Iterable[str] = ()) -> list[Scenario]:
    """Bundled scenarios plus those in the user's vector files; every problem reported at once."""
    problems: list[str] = []
    scenarios: list[Scenario] = []
    try:
        for name, text in bundled_files():
            if f"\nformat: {SCENARIO_FORMAT}\n" in text:   # the bundled vector files are not parsed twice
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
    """Overwrite body fields of a request in its own byte order."""
    out = bytearray(data)
    order = "big" if int.from_bytes(data[8:12], "little") == wire.C("LUSTRE_MSG_MAGIC_V2_SWABBED") else "little"
    count = int.from_bytes(data[HDR["lm_bufcount"].offset:HDR["lm_bufcount"].offset + 4], order)
    body = -(-(HDR["lm_buflens"].offset + 4 * count) // 8) * 8
    for name, value in values.items():
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


def run(scenario: Scenario, adapter, reconstruct: bool = False) -> tuple[list[str], list[Record]]:
    """Run a scenario on a reset target: (problems, transcript).  `reconstruct`: resends must
    be answered with the original reply (profile lustre-2.17.57-reconstruct)."""
    problems: list[str] = []
    records: list[Record] = []
    steps = StepJudge(reconstruct=reconstruct)
    commit_point: list[int | None] = [None]         # what the last restart said was on stable storage
    call(adapter, {"op": "reset"})

    def seen_committed(step_no: int) -> bool:
        """Step N's transaction is known committed to the client that sent it (TRANSNO-6)."""
        t = steps.transno(step_no)
        return t != 0 and steps.committed.get(scenario.steps[step_no - 1].client, 0) >= t

    def known_committed(step_no: int) -> bool:
        t = steps.transno(step_no)
        return seen_committed(step_no) or (t != 0 and commit_point[0] is not None and commit_point[0] >= t)

    def known_lost(step_no: int) -> bool:
        t = steps.transno(step_no)
        return t != 0 and commit_point[0] is not None and commit_point[0] < t and not seen_committed(step_no)

    def judge(step_no: int, st: Step, data: bytes | None, record: Record) -> None:
        _, found = steps.judge(step_no, st.client, st.xid, record.request, data, st.expect, st.same_as)
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

    for n, st in enumerate(scenario.steps, 1):
        if st.op == "restart":
            result = call(adapter, {"op": "restart"})
            point = result.get("last_committed")
            if point is not None and (not isinstance(point, int) or isinstance(point, bool) or point < 0):
                raise TargetError("restart: last_committed must be a non-negative integer")
            commit_point[0] = point
            told = max(steps.committed.values(), default=0)
            if point is not None and point < told:
                problems.append(f"step {n}: RCV-STATE-1: the restart's commit point {point:#x} is below {told:#x}, "
                                f"a last committed value a client was sent")
            steps.restart()
            records.append(Record(n, "", 0, b"", None, "restart"))
            continue
        if st.op == "end_recovery":
            result = call(adapter, {"op": "end_recovery"})
            records.append(Record(n, "", 0, b"", None, "end_recovery"))
            absorb(deferred_replies(result.get("replies")))
            steps.recovery_ended()
            continue
        if st.if_committed is not None and not known_committed(st.if_committed):
            records.append(Record(n, "", 0, b"", None, f"skipped: step {st.if_committed} is not known committed"))
            continue
        if st.if_uncommitted is not None and seen_committed(st.if_uncommitted):
            records.append(Record(n, "", 0, b"", None, f"skipped: step {st.if_uncommitted} was seen committed"))
            continue
        if st.if_lost is not None and not known_lost(st.if_lost):
            records.append(Record(n, "", 0, b"", None, f"skipped: step {st.if_lost} is not known lost"))
            continue
        values = {}
        for name, source in st.patch.items():
            if isinstance(source, str) and source.startswith("@"):
                values[name] = steps.transno(int(source[1:]))
            else:
                values[name] = steps.cookies.get(source, 0)
        data = patch_request(st.request, values) if values else st.request
        reply, deferred = exchange(adapter, st.client, st.xid, data)
        rec = Record(n, st.client, st.xid, data, reply, st.note)
        records.append(rec)
        if reply is None and st.later:
            steps.defer(n, st.client, st.xid)
        else:
            judge(n, st, reply, rec)
        absorb(deferred)
    for n, client, xid in steps.never_answered():
        problems.append(f"step {n} ({client} xid {xid}): the deferred reply never came")
    return problems, records


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
