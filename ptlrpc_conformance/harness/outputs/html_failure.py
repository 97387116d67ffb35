"""A failing case as report.html shows it (harness/outputs/html.py): its facts, its message
without the text hex dumps it carries, and its bytes as annotated hex dumps; with the small
text helpers the rest of the page uses too.

    failure_entry(case, known_ids, with_dump) -> dict   the template's entry of one failure
    dump(data, title, highlight, op, struct) -> Dump    the lines of one annotated hex dump
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import NamedTuple

from ptlrpc_conformance.harness.data.vectors import parse_bytes
from ptlrpc_conformance.harness.verdicts import hexdump

DUMP_LIMIT = 512          # bytes shown of a dump, beyond that only rows with highlighted bytes
DUMP_EXTRA_ROWS = 32      # at most this many highlighted rows beyond DUMP_LIMIT
SUMMARY_LINES = 60        # lines of a failure message shown before "full message"


# ----------------------------------------------------------------------------------------
# small formatting helpers
# ----------------------------------------------------------------------------------------

def one_line(value, limit: int = 2000) -> str:
    """A JSON-ish value as one line of text."""
    if isinstance(value, str):
        text = value
    elif isinstance(value, (list, tuple)):
        text = ", ".join(one_line(v, limit) for v in value)
    elif isinstance(value, dict):
        text = "; ".join(f"{k}: {one_line(v, limit)}" for k, v in value.items())
    else:
        text = str(value)
    return text if len(text) <= limit else text[:limit] + " …"


def duration_text(seconds) -> str:
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


def anchor_id(prefix: str, ident) -> str:
    return prefix + re.sub(r"[^A-Za-z0-9_.+-]", "_", str(ident))


def requirement_links(rids, known_ids: set) -> list[tuple[str, str | None]]:
    """(requirement id, anchor of its row or None) for each id a case names."""
    if isinstance(rids, str):
        rids = [rids]
    elif not isinstance(rids, (list, tuple)):
        rids = []
    return [(as_text(r), anchor_id("req-", r) if isinstance(r, str) and r in known_ids else None) for r in rids]


def as_text(value) -> str:
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


def failure_entry(case: dict, known_ids: set, with_dump: bool) -> dict:
    """One failing case as the template's failure entry shows it."""
    cid = case.get("id")
    notes = case.get("notes") if isinstance(case.get("notes"), dict) else {}
    rep = notes.get("reproducer") if isinstance(notes.get("reproducer"), dict) else {}
    message = str(case.get("message") or "")
    encode = "actual_hex" in notes or str(cid).rsplit(".", 1)[-1] == "encode"
    facts: list[tuple[str, str]] = []           # (term, plain text) after the reproducer's
    entry = {"id": as_text(cid), "anchor": anchor_id("case-", cid), "verdict": case.get("verdict"),
             "requirements": requirement_links(case.get("requirements"), known_ids),
             "signature": as_text(notes.get("signature")) if notes.get("signature") else "",
             "input": None, "facts": facts}
    if rep:
        entry["input"] = {"id": as_text(rep.get("id")), "title": as_text(rep.get("title")) if rep.get("title") else ""}
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
            facts.append(("Note", as_text(rep["note"])))
    for k, v in notes.items():
        if k in ("signature", "reproducer", "highlight", "actual_hex") or v in (None, "", [], {}):
            continue
        facts.append((str(k), one_line(v, 500)))
    if case.get("duration_s") is not None:
        facts.append(("Duration", duration_text(case.get("duration_s"))))

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
