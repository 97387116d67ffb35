"""report.html: the self-contained certification page a vendor publishes, from report.json.

One HTML5 file, inline CSS, no external resource of any kind (the only script is a
three-line helper that opens the collapsed sections for printing; the page reads fully
without it).  The markup is the Jinja2 templates in templates/ (report.html.j2 and the
macros.html.j2 it imports), rendered with autoescape on, so every value taken from the
report is escaped: IUT names and messages are untrusted input.  This module prepares the
data the templates show (the level, the summary counts, the requirement rows, each failure
with its hex-dump rows) and writes no markup of its own.

    render(report) -> str       the page
    write(report, path)         the page, written atomically
    level(report) -> Level      the conformance level the page announces
    dump_table(data, title, highlight, op, struct) -> str   one annotated hex dump (a table)
"""
from __future__ import annotations

import datetime as _dt
import os
import pathlib
import re
import shlex
from dataclasses import dataclass, field
from typing import NamedTuple

import jinja2

from ptlrpc_conformance.harness.data import registry
from ptlrpc_conformance.harness.data.vectors import parse_bytes
from ptlrpc_conformance.harness.outputs import level as level_rule, write_atomically
from ptlrpc_conformance.harness.verdicts import hexdump

VERDICTS = ("pass", "fail", "error", "error (suite)", "not-applicable", "skipped")
VERDICT_LABELS = {"pass": "Pass", "fail": "Fail", "error": "Error", "error (suite)": "Suite error",
                  "not-applicable": "Not applicable", "skipped": "Skipped"}
# a verdict's badge class (v-NAME), where it is not the verdict itself
VERDICT_CLASS = {level_rule.PASS_AGNOSTIC: "pass-agnostic", "error (suite)": "suite-error",
                 level_rule.NOT_RUN: "not-run", level_rule.NOT_EXERCISED: "not-run"}
LEVEL_RANK = {"MUST": 0, "SHOULD": 1, "MAY": 2}
FAILING = level_rule.FAILING + ("error (suite)",)     # the cases the page shows in full
DUMP_LIMIT = 512          # bytes shown of a dump, beyond that only rows with highlighted bytes
DUMP_EXTRA_ROWS = 32      # at most this many highlighted rows beyond DUMP_LIMIT
MAX_DUMPED_FAILURES = 400  # failures beyond this get their message but no HTML dump
SUMMARY_LINES = 60        # lines of a failure message shown before "full message"
TEMPLATE = "report.html.j2"    # templates/, with the macros it imports
MACROS = "macros.html.j2"

CONFORMANT, FULLY_CONFORMANT, NOT_CONFORMANT, NOT_CERTIFIED = \
    level_rule.CONFORMANT, level_rule.FULLY_CONFORMANT, level_rule.NOT_CONFORMANT, level_rule.NOT_CERTIFIED


def _blank_none(value):
    """What `{{ value }}` prints: nothing for None, the value otherwise."""
    return "" if value is None else value


ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("ptlrpc_conformance.harness.outputs", "templates"),
    autoescape=True,                  # every {{ value }} is escaped unless the template says otherwise
    undefined=jinja2.StrictUndefined,
    trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    finalize=_blank_none)
ENV.globals["VERDICTS"] = VERDICTS
ENV.filters["verdict_class"] = lambda v: VERDICT_CLASS.get(v, v if v in VERDICTS else "unknown")


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
        lv.reasons.append("the run is incomplete" + (f": {_plain(incomplete)}" if incomplete is not True else ""))
    given = report.get("level")
    if given not in (None, "", {}):
        if isinstance(given, dict):     # {status, certified_capabilities, failing_must, failing_should, not_applicable}
            for key in ("failing_must", "failing_should", "not_applicable", "certified_capabilities"):
                if isinstance(given.get(key), list):
                    setattr(lv, key, [str(r) for r in given[key]])
            status = given.get("status") or given.get("name") or given.get("level")
            lv.status = str(status) if status else _plain(given)
            lv.text = level_rule.words(dict(given, status=lv.status)) if status else lv.status
        else:
            lv.text = lv.status = str(given)
        lv.from_report = True
    from ptlrpc_conformance.harness.outputs.verdict import scope_lines
    lv.scope = scope_lines(given if isinstance(given, dict) else reached)
    return lv


# ----------------------------------------------------------------------------------------
# small formatting helpers
# ----------------------------------------------------------------------------------------

def _plain(value, limit: int = 2000) -> str:
    """A JSON-ish value as one line of text."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, (list, tuple)):
        text = ", ".join(_plain(v, limit) for v in value)
    elif isinstance(value, dict):
        text = "; ".join(f"{k}: {_plain(v, limit)}" for k, v in value.items())
    else:
        text = str(value)
    return text if len(text) <= limit else text[:limit] + " …"


def _command(cmd) -> str:
    if isinstance(cmd, (list, tuple)):
        return shlex.join(str(c) for c in cmd)
    return "" if cmd is None else str(cmd)


def _duration(seconds) -> str:
    try:
        s = float(seconds)
    except (TypeError, ValueError):
        return ""
    if s < 0.001:
        return "< 1 ms"
    if s < 1:
        return f"{s * 1000:.0f} ms"
    if s < 60:
        return f"{s:.1f} s"
    m, s = divmod(int(round(s)), 60)
    h, m = divmod(m, 60)
    return f"{h} h {m} min {s} s" if h else f"{m} min {s} s"


def _anchor(prefix: str, ident) -> str:
    return prefix + re.sub(r"[^A-Za-z0-9_.+-]", "_", str(ident))


ENV.filters["req_anchor"] = lambda rid: _anchor("req-", rid)     # the id of a requirement's row


def _req_links(rids, known_ids: set) -> list[tuple[str, str | None]]:
    """(requirement id, anchor of its row or None) for each id a case names."""
    if isinstance(rids, str):
        rids = [rids]
    elif not isinstance(rids, (list, tuple)):
        rids = []
    return [(_text(r), _anchor("req-", r) if isinstance(r, str) and r in known_ids else None) for r in rids]


def _area(case_id) -> str:
    return str(case_id).split(".", 1)[0] if case_id else "?"


def _text(value) -> str:
    return "" if value is None else str(value)


# ----------------------------------------------------------------------------------------
# hex dumps
# ----------------------------------------------------------------------------------------

class DumpRow(NamedTuple):
    gap: str                      # set: a line standing for bytes not shown (the rest is unset)
    offset: int = 0
    hex: tuple | list = ()        # the bytes in hex, as runs of (text, highlighted)
    label: str = ""               # field = value, on the first line of the field
    diff: bool = False            # holds a highlighted byte


@dataclass
class Dump:
    title: str
    rows: list[DumpRow]


def _spans_for(data: bytes, op: str | None, struct: str | None) -> list:
    try:
        spans = hexdump.struct_spans(struct, data) if op == "decode_struct" and struct else hexdump.annotate(data)
    except Exception:           # a malformed input or an unknown structure: label nothing
        spans = []
    spans = sorted(spans, key=lambda s: s.offset)
    out = []
    pos = 0
    for s in spans:
        if s.offset > pos and pos < len(data):
            out.append(hexdump.Span(pos, min(s.offset, len(data)) - pos, "(not labelled)"))
        out.append(s)
        pos = max(pos, s.offset + s.length)
    if pos < len(data):
        out.append(hexdump.Span(pos, len(data) - pos, "(not labelled)"))
    return out


_EMPTY_BUFFER = re.compile(r"^buffer (\d+) \(empty\)$")


def _merge_empty(spans) -> list:
    """Runs of empty buffers at one offset as one line ("buffers 1-30 (empty)")."""
    out = []
    run: list = []

    def flush():
        if len(run) > 2:
            first = _EMPTY_BUFFER.match(run[0].label).group(1)
            last = _EMPTY_BUFFER.match(run[-1].label).group(1)
            out.append(hexdump.Span(run[0].offset, 0, f"buffers {first}–{last} (empty)"))
        else:
            out.extend(run)
        run.clear()

    for s in spans:
        if s.length == 0 and _EMPTY_BUFFER.match(s.label) and (not run or run[-1].offset == s.offset):
            run.append(s)
            continue
        flush()
        if s.length == 0 and _EMPTY_BUFFER.match(s.label):
            run.append(s)
        else:
            out.append(s)
    flush()
    return out


def _rows(data: bytes, spans) -> list[tuple[int, list[int], str, bool]]:
    """(offset, byte offsets, field text, first line of the field) per line, 16 bytes at
    most per line."""
    rows = []
    n = len(data)
    for s in _merge_empty(spans):
        label = s.label + (f" = {s.value}" if s.value else "")
        offs = [o for o in range(s.offset, s.offset + s.length) if o < n]
        if not offs:
            rows.append((s.offset, [], label, True))
            continue
        for k in range(0, len(offs), 16):
            rows.append((offs[k], offs[k:k + 16], label, k == 0))
    return rows


def _hex_runs(data: bytes, offs: list[int], highlight: set[int]) -> list[tuple[str, bool]]:
    """The bytes at `offs` in hex, one space apart, as runs of (text, highlighted): each
    highlighted byte a run of its own."""
    runs: list[tuple[str, bool]] = []
    plain = ""
    for i, o in enumerate(offs):
        text = f"{data[o]:02x}"
        if i:
            plain += " "
        if o in highlight:
            if plain:
                runs.append((plain, False))
                plain = ""
            runs.append((text, True))
        else:
            plain += text
    if plain:
        runs.append((plain, False))
    return runs


def dump(data: bytes, title: str, highlight: set[int] | None = None, op: str | None = None,
         struct: str | None = None, limit: int = DUMP_LIMIT) -> Dump:
    """The lines of an annotated hex dump (offset | bytes | field = value); bytes whose
    offsets are in `highlight` are marked.  Beyond `limit` bytes only lines holding
    highlighted bytes are kept, the rest is counted in gap lines."""
    highlight = highlight or set()
    out: list[DumpRow] = []
    hidden = 0
    extra = 0

    def flush_hidden(tail: bool = False):
        nonlocal hidden
        if hidden:
            out.append(DumpRow(f"… {hidden} more bytes" if tail else f"… {hidden} bytes not shown"))
            hidden = 0

    for off, offs, label, first in _rows(data, _spans_for(data, op, struct)):
        marked = any(o in highlight for o in offs)
        visible = (off < limit) or (not offs and hidden == 0) or (marked and extra < DUMP_EXTRA_ROWS)
        if not visible:
            hidden += len(offs)
            continue
        if off >= limit and offs:
            extra += 1
        after_gap = bool(hidden)
        flush_hidden()
        shown = label if first else (f"(… {label})" if after_gap else "")
        runs = _hex_runs(data, offs, highlight) if marked else \
            [(data[offs[0]:offs[-1] + 1].hex(" "), False)] if offs else []    # a line's offsets are contiguous
        out.append(DumpRow("", off, runs, shown, marked))
    flush_hidden(tail=True)
    return Dump(title, out)


def dump_table(data: bytes, title: str, highlight: set[int] | None = None, op: str | None = None,
               struct: str | None = None, limit: int = DUMP_LIMIT) -> str:
    """dump(...) as the page shows it: an HTML table, highlighted bytes in <mark>."""
    return str(ENV.get_template(MACROS).module.dump_table(dump(data, title, highlight, op, struct, limit)))


def _reproducer_bytes(rep: dict) -> bytes | None:
    raw = rep.get("bytes")
    if raw is None:
        return None
    try:
        return parse_bytes(raw, "bytes")
    except Exception:
        return None


def _hex_bytes(text) -> bytes | None:
    if not isinstance(text, str):
        return None
    try:
        return bytes.fromhex("".join(text.split()))
    except ValueError:
        return None


# ----------------------------------------------------------------------------------------
# failure messages
# ----------------------------------------------------------------------------------------

_DUMP_LINE = re.compile(r"^ *\d+  (?:[0-9a-f]{2}\*?(?: [0-9a-f]{2}\*?)*)?(?: {2,}\S.*)?$|^ *\d+  \.\.\. \(")


def _message_without_dumps(message: str) -> str:
    """The message with its text hex dumps (and their title lines) taken out."""
    lines = message.splitlines()
    keep = []
    for i, line in enumerate(lines):
        if _DUMP_LINE.match(line):
            continue
        nxt = lines[i + 1] if i + 1 < len(lines) else ""
        if line.rstrip().endswith("):") and _DUMP_LINE.match(nxt):
            continue
        keep.append(line)
    while keep and not keep[-1].strip():
        keep.pop()
    return "\n".join(keep)


def _expectation(rep: dict) -> str:
    verdict = rep.get("verdict")
    if verdict == "valid":
        return "accepted" + (" (canonical bytes)" if rep.get("canonical") else "")
    if verdict == "invalid":
        errno = rep.get("errno")
        if errno == "any" or not errno:
            return "rejected"
        return "rejected with " + " or ".join(str(x) for x in (errno if isinstance(errno, list) else [errno]))
    if verdict == "acceptable":
        return "accepted or rejected (implementation-defined)"
    return str(verdict or "")


def _failure(case: dict, known_ids: set, with_dump: bool) -> dict:
    """One failing case as the template's failure entry shows it."""
    cid = case.get("id")
    notes = case.get("notes") if isinstance(case.get("notes"), dict) else {}
    rep = notes.get("reproducer") if isinstance(notes.get("reproducer"), dict) else {}
    message = str(case.get("message") or "")
    encode = "actual_hex" in notes or str(cid).rsplit(".", 1)[-1] == "encode"
    facts: list[tuple[str, str]] = []           # (term, plain text) after the reproducer's
    entry = {"id": _text(cid), "anchor": _anchor("case-", cid), "verdict": case.get("verdict"),
             "requirements": _req_links(case.get("requirements"), known_ids),
             "signature": _text(notes.get("signature")) if notes.get("signature") else "",
             "input": None, "facts": facts}
    if rep:
        entry["input"] = {"id": _text(rep.get("id")), "title": _text(rep.get("title")) if rep.get("title") else ""}
        kind = rep.get("op") or "decode"
        if encode:
            kind = "encode_struct" if kind == "decode_struct" else "encode"
        if rep.get("op") == "decode_struct":
            kind += f" {rep.get('struct')} ({rep.get('byte_order')}-endian)"
        elif rep.get("direction"):
            kind += f" ({rep['direction']})"
        facts.append(("Operation", kind))
        exp = "the canonical bytes of the input" if encode else _expectation(rep)
        if exp:
            facts.append(("Expected", exp))
        if rep.get("note"):
            facts.append(("Note", _text(rep["note"])))
    for k, v in notes.items():
        if k in ("signature", "reproducer", "highlight", "actual_hex") or v in (None, "", [], {}):
            continue
        facts.append((str(k), _plain(v, 500)))
    if case.get("duration_s") is not None:
        facts.append(("Duration", _duration(case.get("duration_s"))))

    data = _reproducer_bytes(rep) if rep else None
    dumps: list[Dump] = []
    if data is not None and with_dump:
        raw_hl = notes.get("highlight")
        hl = {o for o in raw_hl if isinstance(o, int)} if isinstance(raw_hl, list) else set()
        op, struct = rep.get("op"), rep.get("struct")
        kind = f", {struct}, {rep.get('byte_order')}-endian" if op == "decode_struct" and struct else \
            (f", {rep.get('direction')}" if rep.get("direction") else "")
        actual = _hex_bytes(notes.get("actual_hex"))
        if actual is not None:
            dumps = [dump(data, f"expected ({len(data)} bytes{kind})", hl, op, struct),
                     dump(actual, f"actual ({len(actual)} bytes)", hl, op, struct)]
        else:
            dumps = [dump(data, f"input ({len(data)} bytes{kind})", hl, op, struct)]
    lines = (_message_without_dumps(message) if dumps else message).splitlines()
    cut = len(lines) > SUMMARY_LINES
    entry.update(
        message="\n".join(lines[:SUMMARY_LINES]) + (f"\n… {len(lines) - SUMMARY_LINES} more lines" if cut else ""),
        dumps=dumps, full_message=message if (dumps or cut) else None,
        dump_left_out=not dumps and not cut and data is not None and not with_dump)
    return entry


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
    add("IUT spec", "code", _text(iut.get("spec")) if iut.get("spec") else None)
    caps = hello.get("capabilities")
    if isinstance(caps, list):
        add("Capabilities", "codes", [_text(c) for c in caps])
    elif caps is not None:
        add("Capabilities", "text", _plain(caps))
    if hello.get("protocol") is not None:
        add("Testee protocol", "text", _text(hello.get("protocol")))
    for k, v in hello.items():
        if k not in ("name", "version", "capabilities", "protocol") and v not in (None, "", [], {}):
            add(f"IUT {k}", "text", _plain(v, 300))
    add("Suite", "text", f"{suite.get('name') or 'ptlrpc-conformance'} {suite.get('version') or ''}".strip())
    if suite.get("sha256"):
        add("Suite code and data (SHA-256)", "code", _text(suite["sha256"]))
    add("Profile", "code", _text(report.get("profile")) if report.get("profile") else None)
    add("Verdicts follow Lustre", "text", _text(report.get("lustre_version")))
    date = _date(report.get("started"))
    if date:
        add("Date", *date)
    add("Seed", "text", _text(report.get("seed")) if report.get("seed") is not None else None)
    add("Duration", "text", _duration(report.get("duration_s")))
    if report.get("exit_status") is not None:
        add("Exit status", "text", _text(report.get("exit_status")))
    cmd = _command(report.get("command"))
    add("Command as run" if report.get("reproduce") else "Command", "code", cmd or None)
    rep = report.get("reproduce")
    if rep not in (None, "", [], {}):
        if isinstance(rep, (list, tuple)) and all(isinstance(x, str) for x in rep):
            add("Command to reproduce", "code", _command(rep))
        elif isinstance(rep, dict):
            add("Command to reproduce", "pairs",
                [(str(k), _command(v) if isinstance(v, list) else _plain(v)) for k, v in rep.items()])
        else:
            add("Command to reproduce", "code", _plain(rep))
    sha = report.get("sha256")
    if sha not in (None, "", {}):
        if isinstance(sha, dict):
            add("SHA-256", "pairs", [(str(k), _text(v)) for k, v in sha.items()])
        else:
            add("SHA-256", "code", _plain(sha))
    env = report.get("environment")
    if isinstance(env, dict) and env:
        add("Environment", "text", "; ".join(f"{k} {_plain(v, 300)}" for k, v in env.items()))
    if report.get("format"):
        add("Report format", "code", _text(report.get("format")))
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
            "problems": [_plain(p, 2000) for p in g.get("problems") or ()],
            "rewritten": [_plain(c, 500) for c in (update or {}).get("changes") or ()],
            "file": _text((update or {}).get("file") or "")}


def _groups(bad: list[dict], known_ids: set) -> list[dict]:
    """The failures grouped by what went wrong (the certification document's grouping:
    signature and cause), largest group first; one full example each, the rest named."""
    from ptlrpc_conformance.harness.outputs.certdoc import rank, reason
    groups: dict[str, dict] = {}
    for c in bad:
        key, words = reason(c)
        groups.setdefault(key, {"words": _text(words), "members": []})["members"].append(c)
    out = []
    dumped = 0
    for g in sorted(groups.values(), key=lambda g: (-len(g["members"]), g["words"])):
        members = sorted(g["members"], key=rank)
        example = _failure(members[0], known_ids, dumped < MAX_DUMPED_FAILURES)
        dumped += 1
        others = [{"id": _text(c.get("id")), "anchor": _anchor("case-", c.get("id")), "verdict": c.get("verdict"),
                   "message": _plain(c.get("message") or "", 4000)} for c in members[1:]]
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
        rows.append({"id": _text(rid), "anchor": _anchor("req-", rid),
                     "level": _text(_req_level(rid, ent, known) or "?"),
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
        rows.append({"id": _text(cid), "anchor": _anchor("case-", cid) if v in FAILING else None, "verdict": v,
                     "requirements": _req_links(c.get("requirements"), known_ids), "note": note})
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
    name = _text(hello.get("name") or iut.get("spec") or "unknown implementation")
    version = _text(hello.get("version")) if hello.get("version") else ""
    inc = report.get("incomplete")
    incomplete = None               # the detail after "Incomplete run", when the run is incomplete
    if inc:
        reason = report.get("incomplete_reason")      # --max-fail / --time-budget / interrupted
        incomplete = f": {_plain(reason)}" if reason else "" if inc is True else f": {_plain(inc)}"
    bad = [c for c in cases if c.get("verdict") in FAILING]
    reqs_rows = _requirements(report, cases_by_id, known)
    return {
        "title": f"PtlRPC conformance: {name}" + (f" {version}" if version else "") + f" — {lv.text}",
        "name": name, "version": version,
        "suite_name": _text(suite.get("name") or "ptlrpc-conformance"), "suite_version": _text(suite.get("version") or ""),
        "lustre_version": _text(report.get("lustre_version") or "?"),
        "level": lv,
        "incomplete": incomplete,
        "start_failure": _plain(iut["start_failure"]) if iut.get("start_failure") else None,
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


_MATRIX = jinja2.Environment(autoescape=True).from_string("""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>ptlrpc-conformance release matrix: {{ iut }}</title>
<style>
body { font-family: sans-serif; margin: 2em; max-width: 75em; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: .3em .6em; text-align: left; vertical-align: top; }
th { background: #eee; }
.conformant { background: #dfd; } .partial { background: #ffe9b3; } .notc { background: #fdd; }
code { font-size: 95%; }
</style></head><body>
<h1>Release matrix: {{ iut }}</h1>
<p>Conformant to: <strong>{{ doc.conformant_to | join(', ') or 'no release' }}</strong>.
Every case ran under {{ doc.base }}; another release ran again only the cases it judges differently, and took
{{ doc.base }}'s verdicts for the rest. Exit status {{ doc.exit_status }}.</p>
<table><tr><th>Profile</th><th>Level</th><th>Cases run under it</th><th>Failing requirements</th><th>Report</th></tr>
{% for r in doc.releases %}<tr class="{{ 'partial' if r.level.status == 'partial' else 'conformant'
  if r.level.status in ('conformant', 'fully conformant') else 'notc' }}">
<td>{{ r.profile }}</td><td>{{ r.words }}</td><td>{{ r.own_cases }}</td>
<td>{{ r.failing_requirements | join(', ') or 'none' }}</td><td><a href="{{ r.profile }}/report.html">{{ r.profile }}/report.html</a></td></tr>
{% endfor %}</table>
<h2>Differences between releases</h2>
<p>For each difference the suite knows, which release's behaviour this implementation follows, from the verdicts
of the cases it changes under each side's profile.</p>
<table><tr><th>Difference</th><th>Releases</th><th>Lustre change</th><th>Follows</th><th>What it changes in practice</th><th>Requirements</th></tr>
{% for d in doc.differences %}<tr><td><code>{{ d.id }}</code><br>{{ d.what }}</td><td>{{ d['from'] }} &rarr; {{ d.to }}</td>
<td>{{ d.lu or '' }}</td><td>{{ d.follows }}</td><td>{{ d.effect or '' }}</td><td>{{ d.requirements | join(', ') }}</td></tr>
{% endfor %}</table>
</body></html>
""")


def write_matrix(doc: dict, path: str | os.PathLike) -> pathlib.Path:
    """The release matrix's report.html: a row per release, a row per known difference."""
    iut = doc.get("iut") or {}
    hello = iut.get("hello") if isinstance(iut.get("hello"), dict) else {}
    name = " ".join(str(hello[k]) for k in ("name", "version") if hello.get(k)) or iut.get("spec") or "?"
    return write_atomically(path, _MATRIX.render(doc=doc, iut=name))
