"""Annotated hex dumps: every byte of a message labelled with the field it belongs to.

The walker here is the suite's own reading of the layout (spec/layouts.json), independent of any
IUT, and tolerant: it labels what it can of a malformed message and marks the rest.
"""
from __future__ import annotations

from dataclasses import dataclass

from ptlrpc_conformance import spec


@dataclass(frozen=True)
class Span:
    offset: int
    length: int
    label: str
    value: str = ""


def _round8(n: int) -> int:
    return (n + 7) & ~7


def field_bytes(data: bytes, path: str) -> set[int]:
    """The offsets of the bytes of the field a decoded member names ("body.pb_status",
    "header.lm_opc", "buflens"): what a page highlights for a field that decoded wrongly.
    Empty when the walker does not find it (a structure's field, a malformed message)."""
    name = str(path).rsplit(".", 1)[-1].split("[", 1)[0]
    name = {"buflens": "lm_buflens", "byte_order": "lm_magic"}.get(name, name)
    out: set[int] = set()
    for span in annotate(data):
        label = span.label[4:] if span.label.startswith("[0] ") else span.label    # the body's fields
        if label.split(" ", 1)[0].split("[", 1)[0] == name:
            out.update(range(span.offset, span.offset + span.length))
    return out


def annotate(data: bytes) -> list[Span]:
    spans: list[Span] = []
    n = len(data)
    hdr = spec.layout("lustre_msg_v2")
    swabbed = spec.constant("LUSTRE_MSG_MAGIC_V2_SWABBED")
    order = "little"
    if n >= 12 and int.from_bytes(data[8:12], "little") == swabbed:
        order = "big"
    unswabbed = set(spec.facts()["unswabbed"]["lustre_msg_v2"]) | set(spec.facts()["unswabbed"]["ptlrpc_body_v3"])
    signed = set(spec.facts()["signed"].get("lustre_msg_v2", ())) | set(spec.facts()["signed"].get("ptlrpc_body_v3", ()))

    def num(off: int, size: int, name: str) -> int:
        return int.from_bytes(data[off:off + size], "little" if name in unswabbed else order)

    def value_of(v: int, size: int, name: str) -> str:
        """A field's value: signed where the layout says so (pb_status = -107), then its bits in hex."""
        return _value(v, size, name in signed)

    bufcount = 0
    for f in hdr.fields:
        if f.flexible:
            continue
        if f.end > n:
            spans.append(Span(f.offset, max(0, n - f.offset), f"{f.name} (truncated)"))
            return _with_rest(spans, n)
        v = num(f.offset, f.size, f.name)
        if f.name == "lm_bufcount":
            bufcount = v
        extra = " (byte-swapped peer)" if f.name == "lm_magic" and order == "big" else ""
        spans.append(Span(f.offset, f.size, f.name, value_of(v, f.size, f.name) + extra))
    base = hdr.field("lm_buflens").offset
    shown = min(bufcount, max(0, (n - base) // 4), 64)
    buflens = []
    for i in range(shown):
        v = num(base + 4 * i, 4, "lm_buflens")
        buflens.append(v)
        spans.append(Span(base + 4 * i, 4, f"lm_buflens[{i}]", str(v)))
    pos = base + 4 * shown
    if shown < bufcount:
        return _with_rest(spans, n, note=f"lm_buflens[{shown}..] missing (lm_bufcount {bufcount})"
                          if bufcount <= 64 else f"lm_bufcount {bufcount} (not walked)")
    hsize = _round8(base + 4 * bufcount)
    if hsize > pos:
        spans.append(Span(pos, min(hsize, n) - pos, "header pad"))
    pos = hsize
    body = spec.layout("ptlrpc_body_v3")
    for i, blen in enumerate(buflens):
        if blen == 0:
            spans.append(Span(min(pos, n), 0, f"buffer {i} (empty)"))
            continue
        if pos >= n:
            spans.append(Span(pos, 0, f"buffer {i} missing ({blen} bytes announced)"))
            return spans
        avail = min(blen, n - pos)
        if i == 0:
            for f in body.fields:
                if f.offset >= avail:
                    break
                length = min(f.size, avail - f.offset)
                label = f"[0] {f.name}" + ("" if length == f.size else " (truncated)")
                if f.name == "pb_jobid":
                    text = data[pos + f.offset:pos + f.offset + length].split(b"\0", 1)[0].decode("latin-1")
                    spans.append(Span(pos + f.offset, length, label, repr(text)))
                elif f.count:
                    spans.append(Span(pos + f.offset, length, label))
                elif length == f.size:
                    v = num(pos + f.offset, f.size, f.name)
                    spans.append(Span(pos + f.offset, length, label, value_of(v, f.size, f.name)))
                else:
                    spans.append(Span(pos + f.offset, length, label))
            if avail > body.size:
                spans.append(Span(pos + body.size, avail - body.size, "[0] beyond ptlrpc_body"))
        else:
            spans.append(Span(pos, avail, f"buffer {i}", f"{blen} bytes" + ("" if avail == blen else ", truncated")))
        if avail < blen:
            return spans
        padded = _round8(blen) & 0xFFFFFFFF
        if padded > blen and pos + blen < n:
            spans.append(Span(pos + blen, min(padded - blen, n - pos - blen), f"pad of buffer {i}"))
        pos += padded
    return _with_rest(spans, n, start=pos, label="trailing bytes")


def _value(v: int, size: int, signed: bool) -> str:
    """`v` (read unsigned from `size` bytes) as the dump shows it: `-107 = 0xffffff95` for a
    signed field, `4 = 0x4` otherwise."""
    if signed and v >= 1 << (8 * size - 1):
        return f"{v - (1 << (8 * size))} = {v:#x}"
    return f"{v} = {v:#x}"


def _with_rest(spans: list[Span], n: int, note: str = "", start: int | None = None, label: str = "unparsed") -> list[Span]:
    if start is None:
        start = max((s.offset + s.length for s in spans), default=0)
    if start < n:
        spans.append(Span(start, n - start, label, note))
    elif note:
        spans.append(Span(start, 0, note))
    return spans


def struct_spans(name: str, data: bytes, base: int = 0, prefix: str = "") -> list[Span]:
    """Spans of a wire structure by the layout tables (values read little-endian; the
    bytes are labelled, not judged)."""
    from ptlrpc_conformance.spec.structs import entry as struct_entry
    entry = struct_entry(name)
    spans: list[Span] = []
    unions_seen = set()
    for f in entry["fields"]:
        at = base + f["offset"]
        label = f"{prefix}{f['name']}"
        if f.get("union"):
            if f["union"] in unions_seen:
                continue      # one view of a union is enough to label its bytes
            unions_seen.add(f["union"])
        t = f["type"]
        if t.startswith("struct ") and "count" not in f and not f.get("flexible"):
            spans += struct_spans(t[len("struct "):], data, at, label + ".")
        elif t == "char":
            text = data[at:at + f["size"]].split(b"\0", 1)[0].decode("latin-1")
            spans.append(Span(at, min(f["size"], max(0, len(data) - at)), label, repr(text)))
        elif "count" in f or f.get("flexible") or f["size"] > 8:
            spans.append(Span(at, min(f["size"], max(0, len(data) - at)), label))
        elif at + f["size"] <= len(data):
            v = int.from_bytes(data[at:at + f["size"]], "little")
            spans.append(Span(at, f["size"], label, _value(v, f["size"], t.startswith("s"))))
        else:
            spans.append(Span(at, max(0, len(data) - at), label + " (truncated)"))
    if not prefix and len(data) > entry["size"]:
        spans.append(Span(entry["size"], len(data) - entry["size"], "beyond the structure"))
    return spans


def render_struct(name: str, data: bytes, highlight: set[int] | None = None) -> str:
    return render(data, highlight, spans=struct_spans(name, data))


def render(data: bytes, highlight: set[int] | None = None, limit: int = 4096, spans=None) -> str:
    """One line per field (long fields wrap at 16 bytes); `highlight` marks byte offsets
    with '*' after the byte."""
    highlight = highlight or set()
    lines = []
    for span in (annotate(data) if spans is None else spans):
        if span.offset >= limit:
            lines.append(f"{span.offset:6d}  ... ({len(data) - span.offset} more bytes not shown)")
            break
        chunk = range(span.offset, span.offset + span.length)
        first = True
        row: list[str] = []
        row_start = span.offset

        def flush():
            nonlocal first, row
            text = " ".join(row)
            tail = f"{span.label}" + (f" = {span.value}" if span.value else "") if first else ""
            lines.append(f"{row_start:6d}  {text:<48}  {tail}".rstrip())
            first = False
            row = []

        for k, off in enumerate(chunk):
            if off >= len(data) or off >= limit:
                break
            mark = "*" if off in highlight else ""
            row.append(f"{data[off]:02x}{mark}")
            if len(row) == 16:
                flush()
                row_start = off + 1
        if row or first:
            flush()
    return "\n".join(lines)
