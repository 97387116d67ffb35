"""The suite's own view of wire structures (little-endian only), from spec/layouts.json
(or, given a `release`, from that release's table in today's names: spec/layouts.py view).

Used to build inputs and read outputs of the structure cases and properties, never to
judge an IUT by asking an IUT.  It flattens a structure into leaves — integers, char
arrays, integer arrays — each with a dotted path; nested structures and every union
member view are walked.  It lives beside the layout table it reads; the reference and the
mutants never use it (the reference reads the table with its own codec, reference/structs.py;
tests/test_layers.py checks).
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field

from ptlrpc_conformance.spec import layouts

INT = {"u8": 1, "u16": 2, "u32": 4, "u64": 8, "s8": 1, "s16": 2, "s32": 4, "s64": 8}


@dataclass(frozen=True)
class Leaf:
    path: tuple[str, ...]     # ("oa", "o_oi", "oi_fid", "f_seq"); list items as "[i]"
    offset: int
    size: int                 # element size for arrays
    kind: str                 # an INT key or "char"
    count: int | None = None  # element count (arrays), None for scalars
    first_view: bool = True   # False inside the second and later members of a union
    # the dotted name ("oa.o_oi.oi_fid.f_seq", "x[0].y"), computed once: the target suites read
    # it for every leaf of every structure they parse
    name: str = field(init=False, compare=False, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "name", ".".join(self.path).replace(".[", "["))


@functools.lru_cache(maxsize=None)
def entry(name: str, release: str | None = None) -> dict:
    """A structure's layout entry (shared: do not modify)."""
    return layouts.view(release)["structs"][layouts.canonical(name)]


@functools.lru_cache(maxsize=None)
def leaves(name: str, release: str | None = None) -> tuple[Leaf, ...]:
    return tuple(_walk(layouts.canonical(name), 0, (), True, release))


def _walk(name: str, base: int, path: tuple, first: bool, release: str | None = None):
    seen_union = set()
    for f in entry(name, release)["fields"]:
        if f.get("flexible"):
            continue
        view_first = first
        if f.get("union"):
            view_first = first and f["union"] not in seen_union
            seen_union.add(f["union"])
        at = base + f["offset"]
        p = path + (f["name"],)
        t = f["type"]
        if t.startswith("struct "):
            inner = t[len("struct "):]
            if "count" in f:
                size = entry(inner, release)["size"]
                for i in range(f["count"]):
                    yield from _walk(inner, at + i * size, p + (f"[{i}]",), view_first, release)
            else:
                yield from _walk(inner, at, p, view_first, release)
        elif t == "char":
            yield Leaf(p, at, 1, "char", f.get("count", 1), view_first)
        else:
            yield Leaf(p, at, INT[t], t, f.get("count"), view_first)


def size(name: str, release: str | None = None) -> int:
    return entry(name, release)["size"]


def read_leaf(leaf: Leaf, data: bytes):
    if leaf.kind == "char":
        return data[leaf.offset:leaf.offset + leaf.count].split(b"\0", 1)[0].decode("latin-1")
    signed = leaf.kind.startswith("s")
    if leaf.count is None:
        return int.from_bytes(data[leaf.offset:leaf.offset + leaf.size], "little", signed=signed)
    return [int.from_bytes(data[leaf.offset + i * leaf.size:leaf.offset + (i + 1) * leaf.size], "little",
                           signed=signed) for i in range(leaf.count)]


def _place(out: dict, leaf: Leaf, value) -> None:
    """Put `value` at `leaf`'s path in the nested fields `out` (a "[i]" segment is a list index)."""
    node = out
    path = list(leaf.path)
    for seg, nxt in zip(path, path[1:]):
        if nxt.startswith("["):
            node = node.setdefault(seg, [])
            continue
        if seg.startswith("["):
            i = int(seg[1:-1])
            while len(node) <= i:
                node.append({})
            node = node[i]
            continue
        node = node.setdefault(seg, {})
    node[path[-1]] = value


def _leaf_source(leaf: Leaf) -> str:
    """read_leaf(leaf, data) as a Python expression."""
    at = leaf.offset
    if leaf.kind == "char":
        return f'data[{at}:{at + leaf.count}].split(b"\\0", 1)[0].decode("latin-1")'
    signed = leaf.kind.startswith("s")
    if leaf.count is None:
        return f'from_bytes(data[{at}:{at + leaf.size}], "little", signed={signed})'
    return "[" + ", ".join(f'from_bytes(data[{at + i * leaf.size}:{at + (i + 1) * leaf.size}], "little", '
                           f'signed={signed})' for i in range(leaf.count)) + "]"


@functools.lru_cache(maxsize=None)
def _reader(name: str, release: str | None = None):
    """The nesting of unpack, worked out once per structure: a function of the bytes that
    builds the nested fields in one expression, leaf by leaf (read_leaf's reads, in the same
    order), instead of walking every leaf's path for every structure read."""
    shape: dict = {}
    for leaf in leaves(name, release):
        _place(shape, leaf, leaf)

    def source(node) -> str:
        if isinstance(node, Leaf):
            return _leaf_source(node)
        if isinstance(node, list):
            return "[" + ", ".join(source(n) for n in node) + "]"
        return "{" + ", ".join(f"{key!r}: {source(n)}" for key, n in node.items()) + "}"
    # the text is built above from the layout table alone, never from the bytes read
    return eval(f"lambda data: {source(shape)}", {"from_bytes": int.from_bytes})


def unpack(name: str, data: bytes, release: str | None = None) -> dict:
    """Every field of every view, nested, as decode_struct reports `fields`."""
    out = _reader(name, release)(data)
    _nested_flexible(name, out, release)
    for f in entry(name, release)["fields"]:        # a trailing flexible array takes what follows
        if f.get("flexible"):
            t = f["type"]
            if t.startswith("struct "):
                inner = t[len("struct "):]
                n = size(inner, release)
                out[f["name"]] = [unpack(inner, data[at:at + n], release) for at in range(f["offset"], len(data) - n + 1, n)]
            elif t == "char":
                n = f.get("elem_size") or 1
                out[f["name"]] = [data[at:at + n].split(b"\0", 1)[0].decode("latin-1")
                                  for at in range(f["offset"], len(data) - n + 1, n)]
            else:
                n = INT[t]
                out[f["name"]] = [int.from_bytes(data[at:at + n], "little", signed=t.startswith("s"))
                                  for at in range(f["offset"], len(data) - n + 1, n)]
    return out


def _nested_flexible(name: str, out: dict, release: str | None = None) -> None:
    """A flexible array inside a nested structure has no room: it reads as []."""
    for f in entry(name, release)["fields"]:
        t = f["type"]
        if t.startswith("struct ") and "count" not in f and not f.get("flexible") and isinstance(out.get(f["name"]), dict):
            inner = t[len("struct "):]
            for g in entry(inner, release)["fields"]:
                if g.get("flexible"):
                    out[f["name"]][g["name"]] = []
            _nested_flexible(inner, out[f["name"]], release)


def top_field(name: str, field_name: str) -> dict:
    for f in entry(name)["fields"]:
        if f["name"] == field_name:
            return f
    raise KeyError(f"{name} has no field {field_name}")
