"""report.html: the self-contained certification page a vendor publishes, from report.json.

One HTML5 file, inline CSS, no external resource of any kind (the only script is a
three-line helper that opens the collapsed sections for printing; the page reads fully
without it).  Everything taken from the report is escaped: IUT names and messages are
untrusted input.

    render(report) -> str       the page
    write(report, path)         the page, written atomically
    level(report) -> Level      the conformance level the page announces
"""
from __future__ import annotations

import datetime as _dt
import html as _html
import os
import pathlib
import re
import shlex
from dataclasses import dataclass, field

from . import hexdump

VERDICTS = ("pass", "fail", "error", "not-applicable", "skipped")
VERDICT_LABELS = {"pass": "Pass", "fail": "Fail", "error": "Error", "not-applicable": "Not applicable",
                  "skipped": "Skipped"}
LEVEL_RANK = {"MUST": 0, "SHOULD": 1, "MAY": 2}
FAILING = ("fail", "error")
DUMP_LIMIT = 512          # bytes shown of a dump, beyond that only rows with highlighted bytes
DUMP_EXTRA_ROWS = 32      # at most this many highlighted rows beyond DUMP_LIMIT
MAX_DUMPED_FAILURES = 400  # failures beyond this get their message but no HTML dump
SUMMARY_LINES = 60        # lines of a failure message shown before "full message"

CONFORMANT, FULLY_CONFORMANT, NOT_CONFORMANT = "conformant", "fully conformant", "not conformant"


def e(value) -> str:
    """Escaped text of anything (None -> '')."""
    return _html.escape("" if value is None else str(value), quote=True)


# ----------------------------------------------------------------------------------------
# the level
# ----------------------------------------------------------------------------------------

@dataclass
class Level:
    text: str                                   # conformant / fully conformant / not conformant / as reported
    reasons: list[str] = field(default_factory=list)
    failing_must: list[str] = field(default_factory=list)
    unverified_must: list[str] = field(default_factory=list)
    failing_should: list[str] = field(default_factory=list)
    not_applicable: list[str] = field(default_factory=list)
    from_report: bool = False

    @property
    def css(self) -> str:
        t = self.text.lower()
        if t.startswith(NOT_CONFORMANT) or t.startswith("non") or "incomplete" in t:
            return "level-no"
        if t.startswith(FULLY_CONFORMANT):
            return "level-full"
        if t.startswith(CONFORMANT):
            return "level-yes"
        return "level-other"


def _registry() -> dict:
    try:
        from . import registry
        return registry.requirements()
    except Exception:           # the page must render even when the registry cannot load
        return {}


def _req_level(rid: str, entry: dict, known: dict) -> str | None:
    lvl = entry.get("level") if isinstance(entry, dict) else None
    if lvl is None and rid in known:
        lvl = known[rid].level
    return lvl


def level(report: dict) -> Level:
    """The level reached: every MUST requirement passes (not-applicable ones excluded, they
    are outside the declared capabilities) = conformant; every SHOULD too = fully
    conformant; otherwise not conformant.  A `level` member of the report wins; an
    `incomplete` run reaches no level."""
    reqs = report.get("requirements") or {}
    if not isinstance(reqs, dict):
        reqs = {}
    known = _registry()
    lv = Level(NOT_CONFORMANT)
    passed_must = 0
    for rid, entry in reqs.items():
        if not isinstance(entry, dict):
            continue
        verdict = entry.get("verdict")
        rl = _req_level(rid, entry, known)
        if verdict == "not-applicable":
            lv.not_applicable.append(rid)
            continue
        if rl == "MUST":
            if verdict == "pass":
                passed_must += 1
            elif verdict in FAILING:
                lv.failing_must.append(rid)
            else:
                lv.unverified_must.append(rid)
        elif rl == "SHOULD" and verdict != "pass":
            lv.failing_should.append(rid)
    if lv.failing_must:
        lv.reasons.append(f"{len(lv.failing_must)} MUST requirement(s) fail")
    if lv.unverified_must:
        lv.reasons.append(f"{len(lv.unverified_must)} MUST requirement(s) not verified (skipped)")
    if not passed_must and not lv.failing_must and not lv.unverified_must:
        lv.reasons.append("no MUST requirement was verified")
    incomplete = report.get("incomplete")
    if incomplete:
        lv.reasons.append("the run is incomplete" + (f": {_plain(incomplete)}" if incomplete is not True else ""))
    if not lv.reasons:
        lv.text = FULLY_CONFORMANT if not lv.failing_should else CONFORMANT
    given = report.get("level")
    if given not in (None, "", {}):
        if isinstance(given, dict):     # {name, failing_must, failing_should, not_applicable}
            for key in ("failing_must", "failing_should", "not_applicable"):
                if isinstance(given.get(key), list):
                    setattr(lv, key, [str(r) for r in given[key]])
            if isinstance(given.get("failing_must"), list):
                lv.unverified_must = []
            given = given.get("name") or given.get("level") or _plain(given)
        lv.text = str(given)
        lv.from_report = True
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


def _date(value) -> str:
    if not value:
        return ""
    try:
        d = _dt.datetime.fromisoformat(str(value))
    except ValueError:
        return e(value)
    if d.tzinfo is not None:
        d = d.astimezone(_dt.timezone.utc)
        shown = d.strftime("%Y-%m-%d %H:%M:%S UTC")
    else:
        shown = d.strftime("%Y-%m-%d %H:%M:%S")
    return f'<time datetime="{e(value)}">{e(shown)}</time>'


def _badge(verdict) -> str:
    v = verdict if verdict in VERDICTS else "unknown"
    return f'<span class="v v-{v}">{e(verdict if verdict is not None else "none")}</span>'


def _anchor(prefix: str, ident: str) -> str:
    return prefix + re.sub(r"[^A-Za-z0-9_.+-]", "_", str(ident))


def _req_links(rids, known_ids: set) -> str:
    if isinstance(rids, str):
        rids = [rids]
    elif not isinstance(rids, (list, tuple)):
        rids = []
    out = []
    for r in rids:
        out.append(f'<a href="#{e(_anchor("req-", r))}">{e(r)}</a>' if r in known_ids else e(r))
    return ", ".join(out)


def _area(case_id) -> str:
    return str(case_id).split(".", 1)[0] if case_id else "?"


# ----------------------------------------------------------------------------------------
# hex dumps as tables
# ----------------------------------------------------------------------------------------

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


def dump_table(data: bytes, title: str, highlight: set[int] | None = None, op: str | None = None,
               struct: str | None = None, limit: int = DUMP_LIMIT) -> str:
    """An annotated hex dump as a table (offset | bytes | field = value); bytes whose
    offsets are in `highlight` are <mark>ed.  Beyond `limit` bytes only lines holding
    highlighted bytes are shown, the rest is counted."""
    highlight = highlight or set()
    rows = _rows(data, _spans_for(data, op, struct))
    body: list[str] = []
    hidden = 0
    extra = 0

    def flush_hidden(tail: bool = False):
        nonlocal hidden
        if hidden:
            text = f"… {hidden} more bytes" if tail else f"… {hidden} bytes not shown"
            body.append(f'<tr class="gap"><td></td><td colspan="2">{e(text)}</td></tr>')
            hidden = 0

    for off, offs, label, first in rows:
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
        cells = " ".join(f"<mark>{data[o]:02x}</mark>" if o in highlight else f"{data[o]:02x}" for o in offs)
        cls = ' class="diff"' if marked else ""
        body.append(f'<tr{cls}><td class="off">{off}</td><td class="hex">{cells}</td>'
                    f'<td class="fld">{e(shown)}</td></tr>')
    flush_hidden(tail=True)
    return (f'<div class="dump"><table class="hexdump"><caption>{e(title)}</caption>'
            '<thead><tr><th scope="col">offset</th><th scope="col">bytes</th>'
            '<th scope="col">field = value</th></tr></thead><tbody>'
            + "".join(body) + "</tbody></table></div>")


def _reproducer_bytes(rep: dict) -> bytes | None:
    raw = rep.get("bytes")
    if raw is None:
        return None
    try:
        from .vectors import parse_bytes
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


def _failure(case: dict, known_ids: set, with_dump: bool) -> str:
    cid = case.get("id")
    notes = case.get("notes") if isinstance(case.get("notes"), dict) else {}
    rep = notes.get("reproducer") if isinstance(notes.get("reproducer"), dict) else {}
    message = str(case.get("message") or "")
    verdict = case.get("verdict")
    encode = "actual_hex" in notes or str(cid).rsplit(".", 1)[-1] == "encode"
    parts = [f'<section class="failure" id="{e(_anchor("case-", cid))}" data-case="{e(cid)}">',
             f'<h3>{_badge(verdict)} <code>{e(cid)}</code></h3>', '<dl class="kv">']
    parts.append(f"<dt>Requirements</dt><dd>{_req_links(case.get('requirements'), known_ids) or '—'}</dd>")
    if notes.get("signature"):
        parts.append(f"<dt>Signature</dt><dd><code>{e(notes['signature'])}</code></dd>")
    if rep:
        what = [f"<code>{e(rep.get('id'))}</code>"]
        if rep.get("title"):
            what.append(e(rep["title"]))
        parts.append(f"<dt>Input</dt><dd>{' — '.join(what)}</dd>")
        kind = rep.get("op") or "decode"
        if encode:
            kind = "encode_struct" if kind == "decode_struct" else "encode"
        if rep.get("op") == "decode_struct":
            kind += f" {rep.get('struct')} ({rep.get('byte_order')}-endian)"
        elif rep.get("direction"):
            kind += f" ({rep['direction']})"
        parts.append(f"<dt>Operation</dt><dd>{e(kind)}</dd>")
        exp = "the canonical bytes of the input" if encode else _expectation(rep)
        if exp:
            parts.append(f"<dt>Expected</dt><dd>{e(exp)}</dd>")
        if rep.get("note"):
            parts.append(f"<dt>Note</dt><dd>{e(rep['note'])}</dd>")
    for k, v in notes.items():
        if k in ("signature", "reproducer", "highlight", "actual_hex") or v in (None, "", [], {}):
            continue
        parts.append(f"<dt>{e(k)}</dt><dd>{e(_plain(v, 500))}</dd>")
    if case.get("duration_s") is not None:
        parts.append(f"<dt>Duration</dt><dd>{e(_duration(case.get('duration_s')))}</dd>")
    parts.append("</dl>")

    data = _reproducer_bytes(rep) if rep else None
    dumps = ""
    if data is not None and with_dump:
        raw_hl = notes.get("highlight")
        hl = {o for o in raw_hl if isinstance(o, int)} if isinstance(raw_hl, list) else set()
        op, struct = rep.get("op"), rep.get("struct")
        kind = f", {struct}, {rep.get('byte_order')}-endian" if op == "decode_struct" and struct else \
            (f", {rep.get('direction')}" if rep.get("direction") else "")
        actual = _hex_bytes(notes.get("actual_hex"))
        if actual is not None:
            dumps = ('<div class="dumps two">'
                     + dump_table(data, f"expected ({len(data)} bytes{kind})", hl, op, struct)
                     + dump_table(actual, f"actual ({len(actual)} bytes)", hl, op, struct)
                     + "</div>")
        else:
            dumps = ('<div class="dumps">'
                     + dump_table(data, f"input ({len(data)} bytes{kind})", hl, op, struct) + "</div>")
    if dumps:
        short = _message_without_dumps(message)
    else:
        short = message
    lines = short.splitlines()
    cut = len(lines) > SUMMARY_LINES
    shown = "\n".join(lines[:SUMMARY_LINES]) + (f"\n… {len(lines) - SUMMARY_LINES} more lines" if cut else "")
    parts.append(f'<pre class="msg">{e(shown)}</pre>')
    parts.append(dumps)
    if dumps or cut:
        parts.append(f'<details class="full"><summary>Full message (text)</summary>'
                     f'<pre class="msg">{e(message)}</pre></details>')
    elif data is not None and not with_dump:
        parts.append('<p class="note">Dump left out (too many failures); the message above and '
                     'report.json hold the bytes.</p>')
    parts.append("</section>")
    return "".join(parts)


# ----------------------------------------------------------------------------------------
# the page
# ----------------------------------------------------------------------------------------

CSS = """
:root{--fg:#1a1a1a;--muted:#5b6270;--line:#d7dbe0;--bg:#fff;--alt:#f5f7f9;
--pass:#1b7f3b;--pass-bg:#e3f4e8;--fail:#b3261e;--fail-bg:#fdeaea;--err:#8a4b00;--err-bg:#fff1db;
--na:#4a5568;--na-bg:#eceff3;--mark:#ffd54a}
*{box-sizing:border-box}
html{-webkit-text-size-adjust:100%}
body{margin:0 auto;max-width:78rem;padding:1rem 1.25rem 3rem;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif;color:var(--fg);background:var(--bg)}
h1{font-size:1.6rem;margin:.2rem 0}
h2{font-size:1.25rem;margin:2rem 0 .6rem;padding-bottom:.25rem;border-bottom:2px solid var(--line)}
h3{font-size:1rem;margin:0 0 .5rem;word-break:break-all}
code,pre,.hexdump,.mono{font-family:ui-monospace,"SFMono-Regular",Menlo,Consolas,"DejaVu Sans Mono","Liberation Mono",monospace;font-size:.86rem}
.sub{color:var(--muted);margin:0 0 1rem}
.level{border:2px solid;border-radius:.5rem;padding:.8rem 1rem;margin:1rem 0}
.level .label{display:block;font-size:.8rem;text-transform:uppercase;letter-spacing:.06em;color:var(--muted)}
.level .text{display:block;font-size:1.9rem;font-weight:700;line-height:1.2}
.level p{margin:.35rem 0 0}
.level code,td.id code{white-space:nowrap}
.level-yes{border-color:var(--pass);background:var(--pass-bg)}.level-yes .text{color:var(--pass)}
.level-full{border-color:var(--pass);background:var(--pass-bg)}.level-full .text{color:var(--pass)}
.level-no{border-color:var(--fail);background:var(--fail-bg)}.level-no .text{color:var(--fail)}
.level-other{border-color:var(--na);background:var(--na-bg)}
.warn{border-left:4px solid var(--err);background:var(--err-bg);padding:.5rem .8rem;margin:.6rem 0}
dl.meta{display:grid;grid-template-columns:max-content 1fr;gap:.2rem 1rem;margin:0}
dl.meta dt{font-weight:600;color:var(--muted)}
dl.meta dd{margin:0;min-width:0;overflow-wrap:anywhere}
dl.kv{display:grid;grid-template-columns:max-content 1fr;gap:.1rem .8rem;margin:0 0 .6rem}
dl.kv dt{color:var(--muted)}dl.kv dd{margin:0;min-width:0;overflow-wrap:anywhere}
.scroll{overflow-x:auto;max-width:100%}
table{border-collapse:collapse;margin:.3rem 0}
table.grid{width:100%}
table.grid th,table.grid td{border:1px solid var(--line);padding:.3rem .5rem;text-align:left;vertical-align:top}
table.grid thead th{background:var(--alt)}
table.grid tbody tr:nth-child(even){background:#fafbfc}
table.grid td.n,table.grid th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
table.grid thead th.n,table.grid td.wrap{white-space:normal}
.nf{white-space:nowrap;color:var(--fail)}
table.grid tfoot td,table.grid tfoot th{font-weight:700;background:var(--alt)}
td.zero{color:#a0a6b0}
td.bad{color:var(--fail);font-weight:700;background:var(--fail-bg)}
td.id{white-space:nowrap}
.v{display:inline-block;padding:0 .45rem;border-radius:.8rem;font-size:.78rem;font-weight:700;white-space:nowrap;border:1px solid}
.v-pass{color:var(--pass);background:var(--pass-bg)}
.v-fail{color:var(--fail);background:var(--fail-bg)}
.v-error{color:var(--err);background:var(--err-bg)}
.v-not-applicable,.v-skipped,.v-unknown{color:var(--na);background:var(--na-bg)}
.failure{border:1px solid var(--line);border-left:5px solid var(--fail);border-radius:.3rem;padding:.7rem .9rem;margin:1rem 0;break-inside:auto}
.failure pre.msg{background:var(--alt);padding:.5rem .7rem;margin:.4rem 0;white-space:pre-wrap;overflow-wrap:anywhere}
.dumps{display:grid;gap:.8rem;grid-template-columns:minmax(0,1fr);margin:.5rem 0}
.dump{overflow-x:auto}
table.hexdump{font-size:.8rem;line-height:1.35}
table.hexdump caption{text-align:left;font-weight:600;padding:.2rem 0;font-family:system-ui,sans-serif}
table.hexdump th{text-align:left;color:var(--muted);font-weight:600;border-bottom:1px solid var(--line);padding:.1rem .5rem}
table.hexdump td{padding:0 .5rem;vertical-align:top;white-space:pre}
table.hexdump td.off{text-align:right;color:var(--muted)}
table.hexdump td.fld{white-space:normal;overflow-wrap:anywhere;min-width:14ch}
table.hexdump tr.diff{background:#fff7d6}
table.hexdump tr.gap td{color:var(--muted);font-style:italic}
mark{background:var(--mark);color:#000;font-weight:700;outline:1px solid #c79a00}
details{margin:.5rem 0}
details>summary{cursor:pointer;font-weight:600}
.note{color:var(--muted);font-size:.9rem}
.statement{min-width:14rem}
footer{margin-top:3rem;color:var(--muted);font-size:.85rem;border-top:1px solid var(--line);padding-top:.6rem}
a{color:#1d4ed8}
@media (max-width:40rem){body{padding:.6rem;font-size:14px}dl.meta,dl.kv{grid-template-columns:1fr}
dl.meta dt{margin-top:.3rem}.level .text{font-size:1.5rem}.statement{min-width:12rem}
.failure{padding:.5rem .5rem}table.hexdump,table.hexdump tbody{display:block}table.hexdump thead{display:none}
table.hexdump caption{display:block}table.hexdump tr{display:grid;grid-template-columns:3.2em max-content}
table.hexdump td{padding:0 .3rem}table.hexdump td.fld{grid-column:2;color:var(--muted);min-width:0;padding-bottom:.2rem}
table.hexdump td.fld:empty{display:none}}
@media print{body{max-width:none;padding:0;font-size:10pt}a{color:inherit;text-decoration:none}
h2{break-after:avoid}.failure,.level{break-inside:avoid-page}table.hexdump tr{break-inside:avoid}
.scroll,.dump{overflow:visible}
table.hexdump td.fld{min-width:0}.v,.level,mark,td.bad,tr.diff{-webkit-print-color-adjust:exact;print-color-adjust:exact}}
"""

PRINT_SCRIPT = ("addEventListener('beforeprint',function(){"
                "document.querySelectorAll('details.print-open').forEach(function(d){d.open=true})});")


def _meta_row(name: str, value_html: str) -> str:
    return f"<dt>{e(name)}</dt><dd>{value_html}</dd>" if value_html else ""


def _header(report: dict, lv: Level) -> str:
    iut = report.get("iut") if isinstance(report.get("iut"), dict) else {}
    hello = iut.get("hello") if isinstance(iut.get("hello"), dict) else {}
    suite = report.get("suite") if isinstance(report.get("suite"), dict) else {}
    name = hello.get("name") or iut.get("spec") or "unknown implementation"
    version = hello.get("version")
    caps = hello.get("capabilities")
    out = ['<header>', '<h1>PtlRPC conformance report</h1>',
           f'<p class="sub"><strong>{e(name)}</strong>' + (f" {e(version)}" if version else "")
           + f" — {e(suite.get('name') or 'ptlrpc-conformance')} {e(suite.get('version') or '')},"
           f" Lustre {e(report.get('lustre_version') or '?')}</p>"]

    # the level
    out.append(f'<div id="level" class="level {lv.css}" role="status">'
               f'<span class="label">Level reached</span><strong class="text">{e(lv.text)}</strong>')
    if lv.reasons and not lv.from_report:
        out.append(f"<p>{e('; '.join(lv.reasons))}.</p>")
    if lv.failing_must:
        out.append("<p>Failing MUST requirements: " + ", ".join(
            f'<a href="#{e(_anchor("req-", r))}"><code>{e(r)}</code></a>' for r in lv.failing_must) + "</p>")
    if lv.unverified_must:
        out.append("<p>MUST requirements not verified: "
                   + ", ".join(f"<code>{e(r)}</code>" for r in lv.unverified_must) + "</p>")
    if lv.failing_should and not lv.failing_must:
        out.append("<p>SHOULD requirements not met (full conformance needs them): "
                   + ", ".join(f'<a href="#{e(_anchor("req-", r))}"><code>{e(r)}</code></a>'
                               for r in lv.failing_should) + "</p>")
    if lv.not_applicable:
        out.append("<p>Outside the declared capabilities (not applicable, excluded): "
                   + ", ".join(f"<code>{e(r)}</code>" for r in lv.not_applicable) + "</p>")
    out.append("</div>")

    inc = report.get("incomplete")
    if inc:
        reason = report.get("incomplete_reason")      # --max-fail / --time-budget / interrupted
        detail = f": {_plain(reason)}" if reason else "" if inc is True else f": {_plain(inc)}"
        out.append(f'<p class="warn" id="incomplete"><strong>Incomplete run</strong>{e(detail)}</p>')
    if iut.get("start_failure"):
        out.append(f'<p class="warn"><strong>The IUT failed to start:</strong> {e(_plain(iut["start_failure"]))}</p>')

    rows = []
    rows.append(_meta_row("Implementation", f"{e(name)}" + (f" {e(version)}" if version else "")))
    rows.append(_meta_row("IUT spec", f"<code>{e(iut.get('spec'))}</code>" if iut.get("spec") else ""))
    if isinstance(caps, list):
        rows.append(_meta_row("Capabilities", ", ".join(f"<code>{e(c)}</code>" for c in caps) or "none declared"))
    elif caps is not None:
        rows.append(_meta_row("Capabilities", e(_plain(caps))))
    if hello.get("protocol") is not None:
        rows.append(_meta_row("Testee protocol", e(hello.get("protocol"))))
    for k, v in hello.items():
        if k not in ("name", "version", "capabilities", "protocol") and v not in (None, "", [], {}):
            rows.append(_meta_row(f"IUT {k}", e(_plain(v, 300))))
    rows.append(_meta_row("Suite", e(f"{suite.get('name') or 'ptlrpc-conformance'} {suite.get('version') or ''}".strip())))
    rows.append(_meta_row("Profile", f"<code>{e(report.get('profile'))}</code>" if report.get("profile") else ""))
    rows.append(_meta_row("Verdicts follow Lustre", e(report.get("lustre_version"))))
    rows.append(_meta_row("Date", _date(report.get("started"))))
    rows.append(_meta_row("Seed", e(report.get("seed")) if report.get("seed") is not None else ""))
    rows.append(_meta_row("Duration", e(_duration(report.get("duration_s")))))
    if report.get("exit_status") is not None:
        rows.append(_meta_row("Exit status", e(report.get("exit_status"))))
    cmd = _command(report.get("command"))
    rows.append(_meta_row("Command as run" if report.get("reproduce") else "Command", f"<code>{e(cmd)}</code>" if cmd else ""))
    rep = report.get("reproduce")
    if rep not in (None, "", [], {}):
        if isinstance(rep, (list, tuple)) and all(isinstance(x, str) for x in rep):
            rep_html = f"<code>{e(_command(rep))}</code>"
        elif isinstance(rep, dict):
            rep_html = "<br>".join(f"{e(k)}: <code>{e(_command(v) if isinstance(v, list) else _plain(v))}</code>"
                                   for k, v in rep.items())
        else:
            rep_html = f"<code>{e(_plain(rep))}</code>"
        rows.append(_meta_row("Command to reproduce", rep_html))
    sha = report.get("sha256")
    if sha not in (None, "", {}):
        if isinstance(sha, dict):
            rows.append(_meta_row("SHA-256", "<br>".join(f"{e(k)}: <code>{e(v)}</code>" for k, v in sha.items())))
        else:
            rows.append(_meta_row("SHA-256", f"<code>{e(_plain(sha))}</code>"))
    env = report.get("environment")
    if isinstance(env, dict) and env:
        rows.append(_meta_row("Environment", "; ".join(f"{e(k)} {e(_plain(v, 300))}" for k, v in env.items())))
    if report.get("format"):
        rows.append(_meta_row("Report format", f"<code>{e(report.get('format'))}</code>"))
    out.append('<dl class="meta">' + "".join(rows) + "</dl>")
    out.append("</header>")
    return "".join(out)


def _count_cell(n: int, verdict: str) -> str:
    cls = "n zero" if not n else ("n bad" if verdict in FAILING else "n")
    return f'<td class="{cls}">{n}</td>'


def _summary(cases: list[dict]) -> str:
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
    cols = list(VERDICTS) + (["other"] if other else [])
    head = "".join(f'<th scope="col" class="n">{e(VERDICT_LABELS.get(v, "No verdict"))}</th>' for v in cols)
    body = []
    totals = {v: 0 for v in cols}
    for name in sorted(areas):
        counts = areas[name]
        body.append(f'<tr><th scope="row">{e(name)}</th>'
                    + "".join(_count_cell(counts[v], v) for v in cols)
                    + f'<td class="n">{sum(counts[v] for v in cols)}</td></tr>')
        for v in cols:
            totals[v] += counts[v]
    foot = ('<tr><th scope="row">Total</th>' + "".join(_count_cell(totals[v], v) for v in cols)
            + f'<td class="n">{sum(totals.values())}</td></tr>')
    return ('<section id="areas"><h2>Summary by area</h2><div class="scroll">'
            '<table id="summary" class="grid"><thead><tr><th scope="col">Area</th>' + head
            + '<th scope="col" class="n">Total</th></tr></thead><tbody>' + "".join(body)
            + "</tbody><tfoot>" + foot + "</tfoot></table></div></section>")


def _requirements(report: dict, cases_by_id: dict, known: dict) -> str:
    reqs = report.get("requirements") or {}
    if not isinstance(reqs, dict):
        reqs = {}
    items = [(rid, ent) for rid, ent in reqs.items() if isinstance(ent, dict)]
    items.sort(key=lambda it: (LEVEL_RANK.get(_req_level(it[0], it[1], known), 9), it[0]))
    rows = []
    for rid, ent in items:
        lvl = _req_level(rid, ent, known)
        stmt = known[rid].statement if rid in known else ""
        case_ids = ent.get("cases") or []
        failing = sum(1 for c in case_ids if (cases_by_id.get(c) or {}).get("verdict") in FAILING)
        count = f"{len(case_ids)}" + (f' <span class="nf">({failing} failing)</span>' if failing else "")
        verdict = ent.get("verdict")
        rows.append(f'<tr id="{e(_anchor("req-", rid))}"><td class="id"><code>{e(rid)}</code></td>'
                    f"<td>{e(lvl or '?')}</td>"
                    f'<td class="statement">{e(stmt) if stmt else "<span class=note>not in the registry</span>"}</td>'
                    f'<td>{_badge(verdict)}</td><td class="n wrap">{count}</td></tr>')
    return ('<section id="requirements"><h2>Requirements</h2><div class="scroll">'
            '<table class="grid" id="requirements-table"><thead><tr><th scope="col">Requirement</th>'
            '<th scope="col">Level</th><th scope="col">Statement</th><th scope="col">Verdict</th>'
            '<th scope="col" class="n">Cases</th></tr></thead><tbody>'
            + ("".join(rows) or '<tr><td colspan="5">No requirement was exercised.</td></tr>')
            + "</tbody></table></div></section>")


def _failures(cases: list[dict], known_ids: set) -> str:
    bad = [c for c in cases if c.get("verdict") in FAILING]
    if not bad:
        return '<section id="failures"><h2>Failures and errors</h2><p>None.</p></section>'
    n_fail = sum(1 for c in bad if c.get("verdict") == "fail")
    n_err = len(bad) - n_fail
    intro = (f"<p>{n_fail} failing case(s), {n_err} error(s). Highlighted bytes differ from the "
             "expected bytes; each input is the reproducer vector recorded in report.json.</p>")
    if len(bad) > MAX_DUMPED_FAILURES:
        intro += (f'<p class="note">Hex dumps are shown for the first {MAX_DUMPED_FAILURES} '
                  "failures only.</p>")
    body = "".join(_failure(c, known_ids, i < MAX_DUMPED_FAILURES) for i, c in enumerate(bad))
    return (f'<section id="failures"><h2>Failures and errors ({len(bad)})</h2>' + intro + body + "</section>")


def _all_cases(cases: list[dict], known_ids: set) -> str:
    rows = []
    for c in cases:
        cid = c.get("id")
        v = c.get("verdict")
        ident = (f'<a href="#{e(_anchor("case-", cid))}"><code>{e(cid)}</code></a>' if v in FAILING
                 else f"<code>{e(cid)}</code>")
        note = ""
        if v in ("not-applicable", "skipped") and c.get("message"):
            first = str(c["message"]).splitlines()[0] if str(c["message"]).strip() else ""
            note = e(first[:200] + (" …" if len(first) > 200 else ""))
        rows.append(f"<tr><td>{ident}</td><td>{_badge(v)}</td>"
                    f"<td>{_req_links(c.get('requirements'), known_ids)}</td><td>{note}</td></tr>")
    return ('<section id="cases"><h2>All cases</h2><details id="all-cases" class="print-open"><summary>'
            f"All {len(cases)} cases with their verdicts</summary><div class=\"scroll\">"
            '<table class="grid"><thead><tr><th scope="col">Case</th><th scope="col">Verdict</th>'
            '<th scope="col">Requirements</th><th scope="col">Note</th></tr></thead><tbody>'
            + "".join(rows) + "</tbody></table></div></details></section>")


def render(report: dict) -> str:
    """The report page as one self-contained HTML5 document."""
    if not isinstance(report, dict):
        raise TypeError("render() takes the report.json dict")
    cases = [c for c in (report.get("cases") or []) if isinstance(c, dict)]
    cases_by_id = {c.get("id"): c for c in cases}
    known = _registry()
    reqs = report.get("requirements") if isinstance(report.get("requirements"), dict) else {}
    known_ids = set(reqs)
    lv = level(report)
    iut = report.get("iut") if isinstance(report.get("iut"), dict) else {}
    hello = iut.get("hello") if isinstance(iut.get("hello"), dict) else {}
    name = hello.get("name") or iut.get("spec") or "unknown implementation"
    suite = report.get("suite") if isinstance(report.get("suite"), dict) else {}
    title = f"PtlRPC conformance: {name}" + (f" {hello['version']}" if hello.get("version") else "") + f" — {lv.text}"
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="color-scheme" content="light">',
        f"<title>{e(title)}</title><style>{CSS}</style></head><body>",
        _header(report, lv),
        "<main>",
        _summary(cases),
        _requirements(report, cases_by_id, known),
        _failures(cases, known_ids),
        _all_cases(cases, known_ids),
        "</main>",
        f"<footer>Rendered from report.json by {e(suite.get('name') or 'ptlrpc-conformance')} "
        f"{e(suite.get('version') or '')}. The verdicts are those of report.json; this page adds "
        "nothing to them.</footer>",
        f"<script>{PRINT_SCRIPT}</script>",
        "</body></html>\n",
    ])


def write(report: dict, path: str | os.PathLike) -> pathlib.Path:
    """Write render(report) to `path` (atomically; the directory is created)."""
    p = pathlib.Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(p.suffix + ".tmp")
    tmp.write_text(render(report), encoding="utf-8")
    tmp.replace(p)
    return p
