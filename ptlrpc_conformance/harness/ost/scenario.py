"""Scenario vectors: the target counterpart of golden vectors (docs/scenarios.md), run
against a target.

A scenario is a sequence of steps against a fresh target — requests written out as bytes,
each with predicates on its reply — plus `restart` / `end_recovery` steps for recovery.
Only the fields a target chooses are patched into a request before it is sent: `pb_handle`
(the export cookie the target gave a client), for replays `pb_transno` (the transno an
earlier reply carried), and (format 2) the object id a body request names, counted from the
LAST_ID an earlier create reply revealed.  Every reply is also checked against the
invariants (harness/ost/invariants.py).

The files, their two formats and their loading are harness/ost/scenario_file.py's; its
names (Step, Scenario, load_all, load_text, dump_file) are importable from here too.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.ost import wire
from ptlrpc_conformance.harness.verdicts import release as release_rules
from ptlrpc_conformance.harness.verdicts.hexdump import render
from ptlrpc_conformance.harness.verdicts.model import BODY, HDR
from ptlrpc_conformance.harness.ost.client import AnyOf, Expect
from ptlrpc_conformance.harness.ost.scenario_file import Scenario, Step
from ptlrpc_conformance.harness.ost.scenario_file import (  # noqa: F401  (importable from here, as before)
    EXPECT_KEYS, OPS, PATCHABLE, SCENARIO_FORMAT, STEP_KEYS, dump_file, load_all, load_text)
from ptlrpc_conformance.harness.ost.steps import StepJudge, Unresolved, hello_configuration


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


class ScenarioNotApplicable(Exception):
    """The scenario cannot be judged against this target in this run, for a reason the rules
    allow (one of the classes below): its case is not applicable, never failed."""


class RecoveryDisabled(ScenarioNotApplicable):
    """The target runs with recovery disabled (declared in its hello, or shown by its connect
    replies) and the scenario judges recovery: not applicable to it (docs/target-rules.md §4)."""


class ClientForgotten(ScenarioNotApplicable):
    """A client that no reply had given a transno was forgotten at a restart: its reconnect
    into recovery got ERR -EBUSY (another client keeps the target recovering) or a new export
    without MSG_CONNECT_RECOVERING (nobody was remembered: no recovery).  Lustre may do that:
    a client's slot in last_rcvd is written at its connect in a local transaction that commits
    with the next commit of anything, and only its first transaction with a transno is made
    synchronous until then (tgt_client_data_update, exp_need_sync); a restart before that
    commit forgets it (tgt_clients_data_init).  The scenario's recovery cannot be judged in
    this run: not applicable (docs/target-rules.md §7)."""


class LastIdOutOfReach(ScenarioNotApplicable):
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
    `release`: the Lustre release whose rules apply (default: the default profile's)."""
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
        if crashes and not problems and _reconnect_into_recovery(st.expectation) \
                and not any(scenario.steps[m - 1].client == st.client and steps.transno(m)
                            for m in range(1, crashes[-1][0])) \
                and _forgotten(reply):
            raise ClientForgotten(f"{scenario.id}: the target forgot {st.client} at the restart of step "
                                  f"{crashes[-1][0]} (its reconnect, step {n}: {_describe(reply)}); no reply had "
                                  f"given it a transno, so its slot in last_rcvd may not have committed "
                                  f"(tgt_client_data_update): the scenario's recovery cannot be judged in this run")
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


def _reconnect_into_recovery(expect) -> bool:
    """The step is a reconnect the scenario expects to find the target recovering (RCV-CONN-1
    with MSG_CONNECT_RECOVERING among the flags an outcome requires)."""
    alternatives = expect.alternatives if isinstance(expect, AnyOf) else [("", expect)] if expect else []
    return any(e.requirement == "RCV-CONN-1" and e.op_flags_all & wire.C("MSG_CONNECT_RECOVERING")
               for _, e in alternatives)


def _forgotten(reply: bytes | None) -> bool:
    """The connect's reply says the target does not know the client: ERR -EBUSY, or a new
    export outside recovery (REPLY 0 without MSG_CONNECT_RECOVERING)."""
    rep, _ = wire.try_parse(reply, "reply") if reply is not None else (None, None)
    if rep is None:
        return False
    body = rep.body
    if body["pb_type"] == wire.C("PTL_RPC_MSG_ERR"):
        return rep.status == -spec.errno_value("EBUSY")
    return (body["pb_type"] == wire.C("PTL_RPC_MSG_REPLY") and rep.status == 0
            and not body["pb_op_flags"] & wire.C("MSG_CONNECT_RECOVERING"))


def _describe(reply: bytes | None) -> str:
    rep, why = wire.try_parse(reply, "reply") if reply is not None else (None, "no reply")
    return rep.describe() if rep is not None else why


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
