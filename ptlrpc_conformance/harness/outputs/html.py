"""report.html: the self-contained certification page a vendor publishes, from report.json.

One HTML5 file, inline CSS, no external resource of any kind (the only script is a
three-line helper that opens the collapsed sections for printing; the page reads fully
without it).  The markup is the Jinja2 templates in templates/ (report.html.j2 and the
macros.html.j2 it imports), rendered with autoescape on, so every value taken from the
report is escaped: IUT names and messages are untrusted input.  This module prepares the
data the templates show (the level, the summary counts, the requirement rows, each failure
with its hex-dump rows, which html_failure.py builds) and writes no markup of its own.

    render(report) -> str       the page
    write(report, path)         the page, written atomically
    level(report) -> Level      the conformance level the page announces
    dump_table(data, title, highlight, op, struct) -> str   one annotated hex dump (a table)
"""
from __future__ import annotations

import datetime as _dt
import os
import pathlib
import shlex
from dataclasses import dataclass, field

import jinja2
import jinja2.bccache

from ptlrpc_conformance.harness.data import registry, yamlcache
from ptlrpc_conformance.harness.outputs import level as level_rule, write_atomically
from ptlrpc_conformance.harness.outputs.html_failure import (  # noqa: F401  (DUMP_EXTRA_ROWS: importable from here)
    DUMP_EXTRA_ROWS, DUMP_LIMIT, anchor_id, as_text, dump, duration_text, failure_entry, one_line,
    requirement_links)

VERDICTS = ("pass", "fail", "error", "error (suite)", "not-applicable", "skipped")
VERDICT_LABELS = {"pass": "Pass", "fail": "Fail", "error": "Error", "error (suite)": "Suite error",
                  "not-applicable": "Not applicable", "skipped": "Skipped"}
# a verdict's badge class (v-NAME), where it is not the verdict itself
VERDICT_CLASS = {level_rule.PASS_AGNOSTIC: "pass-agnostic", "error (suite)": "suite-error",
                 level_rule.NOT_JUDGED_AGNOSTIC: "not-run",
                 level_rule.NOT_RUN: "not-run", level_rule.NOT_EXERCISED: "not-run"}
LEVEL_RANK = {"MUST": 0, "SHOULD": 1, "MAY": 2}
FAILING = level_rule.FAILING + ("error (suite)",)     # the cases the page shows in full
MAX_DUMPED_FAILURES = 400  # failures beyond this get their message but no HTML dump
TEMPLATE = "report.html.j2"    # templates/, with the macros it imports
MACROS = "macros.html.j2"

CONFORMANT, FULLY_CONFORMANT, NOT_CONFORMANT, NOT_CERTIFIED = \
    level_rule.CONFORMANT, level_rule.FULLY_CONFORMANT, level_rule.NOT_CONFORMANT, level_rule.NOT_CERTIFIED


def _blank_none(value):
    """What `{{ value }}` prints: nothing for None, the value otherwise."""
    return "" if value is None else value


class _CompiledTemplates(jinja2.BytecodeCache):
    """The templates as compiled by an earlier run, kept in the parse cache
    (harness/data/yamlcache.py: keyed by the package's files, so a change to a template or
    to the environment below compiles afresh): compiling them took about 50 ms a report.
    Jinja2 checks the template's source against what it compiled; anything unreadable is
    compiled again."""

    def load_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        data = yamlcache.recall("jinja2 " + jinja2.__version__, bucket.key)
        if data is not None:
            try:
                bucket.bytecode_from_string(data)
            except Exception:           # truncated or foreign: compile it
                bucket.reset()

    def dump_bytecode(self, bucket: jinja2.bccache.Bucket) -> None:
        try:
            yamlcache.keep("jinja2 " + jinja2.__version__, bucket.key, bucket.bytecode_to_string())
        except Exception:               # a cache is a shortcut, never an error
            pass


ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("ptlrpc_conformance.harness.outputs", "templates"),
    bytecode_cache=_CompiledTemplates(),
    autoescape=True,                  # every {{ value }} is escaped unless the template says otherwise
    undefined=jinja2.StrictUndefined,
    trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    finalize=_blank_none)
ENV.globals["VERDICTS"] = VERDICTS
ENV.filters["verdict_class"] = lambda v: VERDICT_CLASS.get(v, v if v in VERDICTS else "unknown")
ENV.filters["req_anchor"] = lambda rid: anchor_id("req-", rid)     # the id of a requirement's row


# ----------------------------------------------------------------------------------------
# the level
# ----------------------------------------------------------------------------------------

@dataclass
class Level:
    text: str                                   # the level in words: "conformant: decode, encode"
    reasons: list[str] = field(default_factory=list)
    failing_must: list[str] = field(default_factory=list)
    failing_should: list[str] = field(default_factory=list)
    not_applicable: list[str] = field(default_factory=list)
    from_report: bool = False
    status: str = ""                            # outputs/level.py's status (the text of an older report)
    certified_capabilities: list[str] = field(default_factory=list)
    scope: list[str] = field(default_factory=list)   # partial selection, requirements without evidence, modes

    @property
    def css(self) -> str:
        t = (self.status or self.text).lower()
        if t.startswith(NOT_CERTIFIED) or t.startswith(level_rule.PARTIAL):
            return "level-other"
        if t.startswith(NOT_CONFORMANT) or t.startswith("non") or "incomplete" in t:
            return "level-no"
        if t.startswith(FULLY_CONFORMANT):
            return "level-full"
        if t.startswith(CONFORMANT):
            return "level-yes"
        return "level-other"


def _registry() -> dict:
    try:
        return registry.requirements()
    except Exception:           # the page must render even when the registry cannot load
        return {}


def _req_level(rid: str, entry: dict, known: dict) -> str | None:
    lvl = entry.get("level") if isinstance(entry, dict) else None
    if lvl is None and rid in known:
        lvl = known[rid].level
    return lvl


def level(report: dict, known: dict | None = None) -> Level:
    """The level the page announces, in words (outputs.level.words): outputs.level's rule
    (the one report.json records) applied to the report's requirements, a level missing from an
    entry taken from the registry (`known`, loaded when not given).  A `level` member of the
    report (which that rule wrote) wins."""
    reqs = report.get("requirements") or {}
    if not isinstance(reqs, dict):
        reqs = {}
    known = _registry() if known is None else known
    entries = {rid: dict(ent, level=_req_level(rid, ent, known)) for rid, ent in reqs.items()
               if isinstance(ent, dict)}
    incomplete = report.get("incomplete")
    iut = report.get("iut") if isinstance(report.get("iut"), dict) else {}
    hello = iut.get("hello") if isinstance(iut.get("hello"), dict) else {}
    caps = hello.get("capabilities") if isinstance(hello.get("capabilities"), list) else None
    selection = report.get("selection") if isinstance(report.get("selection"), dict) else None
    modes = report.get("modes") if isinstance(report.get("modes"), list) else ()
    reached = level_rule.level(entries, bool(incomplete), caps, selection, modes)
    lv = Level(level_rule.words(reached), failing_must=reached["failing_must"],
               failing_should=reached["failing_should"], not_applicable=reached["not_applicable"],
               status=reached["status"], certified_capabilities=reached["certified_capabilities"])
    if lv.failing_must:
        lv.reasons.append(f"{len(lv.failing_must)} MUST requirement(s) fail")
    if lv.status == NOT_CERTIFIED:
        lv.reasons.append("no MUST case applied to the implementation: nothing was certified")
    if incomplete:
        lv.reasons.append("the run is incomplete" + (f": {one_line(incomplete)}" if incomplete is not True else ""))
    given = report.get("level")
    if given not in (None, "", {}):
        if isinstance(given, dict):     # {status, certified_capabilities, failing_must, failing_should, not_applicable}
            for key in ("failing_must", "failing_should", "not_applicable", "certified_capabilities"):
                if isinstance(given.get(key), list):
                    setattr(lv, key, [str(r) for r in given[key]])
            status = given.get("status") or given.get("name") or given.get("level")
            lv.status = str(status) if status else one_line(given)
            lv.text = level_rule.words(dict(given, status=lv.status)) if status else lv.status
        else:
            lv.text = lv.status = str(given)
        lv.from_report = True
    from ptlrpc_conformance.harness.outputs.verdict import scope_lines
    lv.scope = scope_lines(given if isinstance(given, dict) else reached)
    return lv


# ----------------------------------------------------------------------------------------
# small formatting helpers (those a failure's entry uses too are in html_failure.py)
# ----------------------------------------------------------------------------------------

def _command(cmd) -> str:
    if isinstance(cmd, (list, tuple)):
        return shlex.join(str(c) for c in cmd)
    return "" if cmd is None else str(cmd)


def _area(case_id) -> str:
    return str(case_id).split(".", 1)[0] if case_id else "?"


def dump_table(data: bytes, title: str, highlight: set[int] | None = None, op: str | None = None,
               struct: str | None = None, limit: int = DUMP_LIMIT) -> str:
    """dump(...) as the page shows it: an HTML table, highlighted bytes in <mark>."""
    return str(ENV.get_template(MACROS).module.dump_table(dump(data, title, highlight, op, struct, limit)))


# ----------------------------------------------------------------------------------------
# the page's parts
# ----------------------------------------------------------------------------------------

def _date(value) -> tuple[str, object] | None:
    if not value:
        return None
    try:
        d = _dt.datetime.fromisoformat(str(value))
    except ValueError:
        return ("text", str(value))
    if d.tzinfo is not None:
        shown = d.astimezone(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    else:
        shown = d.strftime("%Y-%m-%d %H:%M:%S")
    return ("time", {"datetime": str(value), "shown": shown})


def _meta(report: dict, iut: dict, hello: dict, suite: dict, name: str) -> list[tuple[str, str, object]]:
    """The header's facts as (term, kind, value); the template shows a kind `text` as
    text, `code` as code, `codes` as a list of code (or "none declared"), `pairs` as lines
    of `key: code`, `time` as a <time> element."""
    rows: list[tuple[str, str, object]] = []

    def add(term: str, kind: str, value) -> None:
        if value not in (None, ""):
            rows.append((term, kind, value))

    version = hello.get("version")
    add("Implementation", "text", f"{name}" + (f" {version}" if version else ""))
    add("IUT spec", "code", as_text(iut.get("spec")) if iut.get("spec") else None)
    caps = hello.get("capabilities")
    if isinstance(caps, list):
        add("Capabilities", "codes", [as_text(c) for c in caps])
    elif caps is not None:
        add("Capabilities", "text", one_line(caps))
    if hello.get("protocol") is not None:
        add("Testee protocol", "text", as_text(hello.get("protocol")))
    for k, v in hello.items():
        if k not in ("name", "version", "capabilities", "protocol") and v not in (None, "", [], {}):
            add(f"IUT {k}", "text", one_line(v, 300))
    add("Suite", "text", f"{suite.get('name') or 'ptlrpc-conformance'} {suite.get('version') or ''}".strip())
    if suite.get("sha256"):
        add("Suite code and data (SHA-256)", "code", as_text(suite["sha256"]))
    add("Profile", "code", as_text(report.get("profile")) if report.get("profile") else None)
    add("Verdicts follow Lustre", "text", as_text(report.get("lustre_version")))
    date = _date(report.get("started"))
    if date:
        add("Date", *date)
    add("Seed", "text", as_text(report.get("seed")) if report.get("seed") is not None else None)
    add("Duration", "text", duration_text(report.get("duration_s")))
    if report.get("exit_status") is not None:
        add("Exit status", "text", as_text(report.get("exit_status")))
    cmd = _command(report.get("command"))
    add("Command as run" if report.get("reproduce") else "Command", "code", cmd or None)
    rep = report.get("reproduce")
    if rep not in (None, "", [], {}):
        if isinstance(rep, (list, tuple)) and all(isinstance(x, str) for x in rep):
            add("Command to reproduce", "code", _command(rep))
        elif isinstance(rep, dict):
            add("Command to reproduce", "pairs",
                [(str(k), _command(v) if isinstance(v, list) else one_line(v)) for k, v in rep.items()])
        else:
            add("Command to reproduce", "code", one_line(rep))
    sha = report.get("sha256")
    if sha not in (None, "", {}):
        if isinstance(sha, dict):
            add("SHA-256", "pairs", [(str(k), as_text(v)) for k, v in sha.items()])
        else:
            add("SHA-256", "code", one_line(sha))
    env = report.get("environment")
    if isinstance(env, dict) and env:
        add("Environment", "text", "; ".join(f"{k} {one_line(v, 300)}" for k, v in env.items()))
    if report.get("format"):
        add("Report format", "code", as_text(report.get("format")))
    return rows


def _count(n: int, verdict: str) -> tuple[int, str]:
    return n, ("n zero" if not n else ("n bad" if verdict in FAILING else "n"))


def _summary(cases: list[dict]) -> dict:
    """Counts of each verdict per area (the first part of the case id), with totals."""
    areas: dict[str, dict[str, int]] = {}
    other = False
    for c in cases:
        a = areas.setdefault(_area(c.get("id")), {v: 0 for v in VERDICTS} | {"other": 0})
        v = c.get("verdict")
        if v in VERDICTS:
            a[v] += 1
        else:
            a["other"] += 1
            other = True
    seen = {c.get("verdict") for c in cases}
    cols = [v for v in VERDICTS if v != "error (suite)" or v in seen] + (["other"] if other else [])
    totals = {v: 0 for v in cols}
    rows = []
    for name in sorted(areas):
        counts = areas[name]
        rows.append({"area": name, "cells": [_count(counts[v], v) for v in cols],
                     "total": sum(counts[v] for v in cols)})
        for v in cols:
            totals[v] += counts[v]
    return {"heads": [VERDICT_LABELS.get(v, "No verdict") for v in cols], "rows": rows,
            "totals": [_count(totals[v], v) for v in cols], "total": sum(totals.values())}


def _gate(report: dict) -> dict | None:
    """The regression gate's verdict as the page's second box shows it (None without a gate)."""
    g = report.get("gate")
    if not isinstance(g, dict):
        return None
    counts = [(label, len(g.get(key) or ())) for key, label in (
        ("known_failures", "known failures"), ("new", "new failures"), ("stale", "stale entries"),
        ("unmatched", "entries matching no case"), ("changed", "changed signatures"), ("expired", "expired entries"),
        ("not_run", "entries not run (kept)"))]
    update = g.get("update") if isinstance(g.get("update"), dict) else None
    return {"ok": bool(g.get("ok")), "counts": [(label, n) for label, n in counts if n],
            "problems": [one_line(p, 2000) for p in g.get("problems") or ()],
            "rewritten": [one_line(c, 500) for c in (update or {}).get("changes") or ()],
            "file": as_text((update or {}).get("file") or "")}


def _groups(bad: list[dict], known_ids: set) -> list[dict]:
    """The failures grouped by what went wrong (the certification document's grouping:
    signature and cause), largest group first; one full example each, the rest named."""
    from ptlrpc_conformance.harness.outputs.certdoc import rank, reason
    groups: dict[str, dict] = {}
    for c in bad:
        key, words = reason(c)
        groups.setdefault(key, {"words": as_text(words), "members": []})["members"].append(c)
    out = []
    dumped = 0
    for g in sorted(groups.values(), key=lambda g: (-len(g["members"]), g["words"])):
        members = sorted(g["members"], key=rank)
        example = failure_entry(members[0], known_ids, dumped < MAX_DUMPED_FAILURES)
        dumped += 1
        others = [{"id": as_text(c.get("id")), "anchor": anchor_id("case-", c.get("id")), "verdict": c.get("verdict"),
                   "message": one_line(c.get("message") or "", 4000)} for c in members[1:]]
        out.append({"words": g["words"], "count": len(members), "example": example, "others": others})
    return out


def _requirements(report: dict, cases_by_id: dict, known: dict) -> list[dict]:
    reqs = report.get("requirements") or {}
    if not isinstance(reqs, dict):
        reqs = {}
    items = [(rid, ent) for rid, ent in reqs.items() if isinstance(ent, dict)]
    items.sort(key=lambda it: (LEVEL_RANK.get(_req_level(it[0], it[1], known), 9), it[0]))
    rows = []
    for rid, ent in items:
        case_ids = ent.get("cases") or []
        rows.append({"id": as_text(rid), "anchor": anchor_id("req-", rid),
                     "level": as_text(_req_level(rid, ent, known) or "?"),
                     "statement": known[rid].statement if rid in known else "",
                     "verdict": ent.get("verdict"), "cases": len(case_ids),
                     # the cases charged with breaking it (a report before that evidence: those failing)
                     "failing": len(ent["failing"]) if isinstance(ent.get("failing"), list) else
                     sum(1 for c in case_ids if (cases_by_id.get(c) or {}).get("verdict") in FAILING)})
    return rows


def _case_rows(cases: list[dict], known_ids: set) -> list[dict]:
    rows = []
    for c in cases:
        cid = c.get("id")
        v = c.get("verdict")
        note = ""
        if v in ("not-applicable", "skipped") and c.get("message"):
            first = str(c["message"]).splitlines()[0] if str(c["message"]).strip() else ""
            note = first[:200] + (" …" if len(first) > 200 else "")
        rows.append({"id": as_text(cid), "anchor": anchor_id("case-", cid) if v in FAILING else None, "verdict": v,
                     "requirements": requirement_links(c.get("requirements"), known_ids), "note": note})
    return rows


def context(report: dict) -> dict:
    """Everything the template shows, prepared from report.json."""
    if not isinstance(report, dict):
        raise TypeError("render() takes the report.json dict")
    cases = [c for c in (report.get("cases") or []) if isinstance(c, dict)]
    cases_by_id = {c.get("id"): c for c in cases}
    known = _registry()
    reqs = report.get("requirements") if isinstance(report.get("requirements"), dict) else {}
    known_ids = set(reqs)
    lv = level(report, known)
    iut = report.get("iut") if isinstance(report.get("iut"), dict) else {}
    hello = iut.get("hello") if isinstance(iut.get("hello"), dict) else {}
    suite = report.get("suite") if isinstance(report.get("suite"), dict) else {}
    name = as_text(hello.get("name") or iut.get("spec") or "unknown implementation")
    version = as_text(hello.get("version")) if hello.get("version") else ""
    inc = report.get("incomplete")
    incomplete = None               # the detail after "Incomplete run", when the run is incomplete
    if inc:
        reason = report.get("incomplete_reason")      # --max-fail / --time-budget / interrupted
        incomplete = f": {one_line(reason)}" if reason else "" if inc is True else f": {one_line(inc)}"
    bad = [c for c in cases if c.get("verdict") in FAILING]
    reqs_rows = _requirements(report, cases_by_id, known)
    return {
        "title": f"PtlRPC conformance: {name}" + (f" {version}" if version else "") + f" — {lv.text}",
        "name": name, "version": version,
        "suite_name": as_text(suite.get("name") or "ptlrpc-conformance"), "suite_version": as_text(suite.get("version") or ""),
        "lustre_version": as_text(report.get("lustre_version") or "?"),
        "level": lv,
        "incomplete": incomplete,
        "start_failure": one_line(iut["start_failure"]) if iut.get("start_failure") else None,
        "meta": _meta(report, iut, hello, suite, name),
        "summary": _summary(cases),
        "requirements": [r for r in reqs_rows if r["verdict"] != "not-applicable"],
        "requirements_na": [r for r in reqs_rows if r["verdict"] == "not-applicable"],
        "gate": _gate(report),
        "groups": _groups(bad, known_ids),
        "failures": bad,
        "failed": sum(1 for c in bad if c.get("verdict") == "fail"),
        "max_dumped": MAX_DUMPED_FAILURES,
        "cases": _case_rows(cases, known_ids),
    }


def render(report: dict) -> str:
    """The report page as one self-contained HTML5 document."""
    return ENV.get_template(TEMPLATE).render(context(report))


def write(report: dict, path: str | os.PathLike) -> pathlib.Path:
    """Write render(report) to `path` (atomically; the directory is created)."""
    return write_atomically(path, render(report))
