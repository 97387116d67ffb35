"""The reference codec for wire structures (obdo, ost_id, mdt_body, obd_connect_data, ...).

Standard library only.  Layouts come from spec/layouts.json, byte-swapping rules, valid
bits and message formats from spec/facts.json; every table is injectable through
`StructConfig`, so variants (and mutants) are built by configuration.

JSON shape of decoded fields: integers; nested structures as objects; every member view
of a union; char arrays as ISO-8859-1 strings up to the first NUL; other arrays and
flexible arrays as lists.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field, replace

from .. import spec
from ..spec import layouts
from .codec import CodecError

INT_SIZES = {"u8": 1, "u16": 2, "u32": 4, "u64": 8, "s8": 1, "s16": 2, "s32": 4, "s64": 8}
INT_FORMATS = {"u8": "B", "u16": "H", "u32": "I", "u64": "Q", "s8": "b", "s16": "h", "s32": "i", "s64": "q"}


@dataclass(frozen=True)
class StructConfig:
    layouts: dict = field(default_factory=lambda: layouts.load())
    swab: dict = field(default_factory=lambda: spec.facts()["swab"])
    valid_bits: dict = field(default_factory=lambda: spec.facts()["valid_bits"])
    report_valid: bool = True         # add the "valid" view for structures with valid bits
    message_formats: dict = field(default_factory=lambda: spec.facts()["message_formats"])  # buffers per opcode

    def but(self, **changes) -> "StructConfig":
        return replace(self, **changes)


class StructCodec:
    def __init__(self, config: StructConfig | None = None):
        self.config = config or StructConfig()
        self._plans: dict[str, list[tuple]] = {}
        self._readers: dict[str, tuple] = {}
        self._writers: dict[str, tuple] = {}

    # helpers -------------------------------------------------------------------------------
    def canonical(self, name) -> str:
        if not isinstance(name, str):
            raise CodecError("EINVAL", "type must be a structure name")
        table = self.config.layouts
        bare = name.removeprefix("struct ").strip()
        if bare in table["structs"]:
            return bare
        if bare in table["aliases"]:
            return table["aliases"][bare]
        today = layouts.load()
        if bare in today["structs"] or bare in today["aliases"]:      # a later release's structure
            raise CodecError("EOPNOTSUPP", f"no structure {name!r} in this release")
        raise CodecError("EINVAL", f"no wire structure named {name!r}")

    def entry(self, name: str) -> dict:
        return self.config.layouts["structs"][name]

    def _elem(self, f: dict) -> tuple[str, int]:
        """(kind, element size): kind is an int type, 'char' or a structure name."""
        t = f["type"]
        if t.startswith("struct "):
            inner = t[len("struct "):]
            return inner, self.entry(inner)["size"]
        if t == "char":
            return "char", 1
        return t, INT_SIZES[t]

    # decode --------------------------------------------------------------------------------
    def decode(self, type_name, data: bytes, byte_order: str = "little") -> dict:
        name = self.canonical(type_name)
        size = self.entry(name)["size"]
        if byte_order not in ("little", "big"):
            raise CodecError("EINVAL", f"byte_order must be little or big, not {byte_order!r}")
        if len(data) < size:
            raise CodecError("EINVAL", f"{name} needs {size} bytes, got {len(data)}")
        buf = bytearray(data)
        if byte_order == "big":
            self._swab(name, buf, 0, len(buf))
        fields = self._read(name, bytes(buf), 0, len(buf))
        out = {"type": name, "fields": fields}
        if self.config.report_valid:
            valid = self.valid_view(name, fields)
            if valid is not None:
                out["valid"] = valid
        return out

    def _plan(self, name: str) -> list[tuple]:
        """A structure's fields as (name, kind, element size, offset, flexible, count, string
        element size), worked out once per structure (decoding reads them for every message)."""
        plan = self._plans.get(name)
        if plan is None:
            plan = []
            for f in self.entry(name)["fields"]:
                kind, esize = self._elem(f)
                plan.append((f["name"], kind, esize, f["offset"], bool(f.get("flexible")), f.get("count"),
                             f.get("elem_size") or 1))
            self._plans[name] = plan
        return plan

    def _reader(self, name: str) -> tuple:
        """(a struct.Struct reading a structure's integer fields and arrays in one call, their
        names and counts, the bytes it needs, the rest of the plan, every field's name in order),
        worked out once per structure.  A union member that overlaps the field before it is read with the rest."""
        reader = self._readers.get(name)
        if reader is None:
            fmt, names, rest, at = "<", [], [], 0
            for entry in self._plan(name):
                fname, kind, esize, offset, flexible, fcount, _ = entry
                if kind in INT_FORMATS and not flexible and offset >= at:
                    fmt += (f"{offset - at}x" if offset > at else "") + f"{fcount or ''}{INT_FORMATS[kind]}"
                    names.append((fname, fcount))
                    at = offset + esize * (fcount or 1)
                else:
                    rest.append(entry)
            reader = (struct.Struct(fmt), tuple(names), at, rest, [entry[0] for entry in self._plan(name)])
            self._readers[name] = reader
        return reader

    def _read(self, name: str, buf: bytes, base: int, end: int) -> dict:
        fixed, names, need, rest, order = self._reader(name)
        if names and len(buf) >= base + need:
            values, out, k = fixed.unpack_from(buf, base), {}, 0
            for fname, count in names:
                if count is None:
                    out[fname] = values[k]
                    k += 1
                else:
                    out[fname] = list(values[k:k + count])
                    k += count
            plan = rest
        else:
            out, plan = {}, self._plan(name)
        for fname, kind, esize, offset, flexible, fcount, str_size in plan:
            at = base + offset
            if flexible:
                if kind == "char":          # elements are fixed-size strings
                    count = max(0, (end - at) // str_size)
                    out[fname] = [buf[at + i * str_size:at + (i + 1) * str_size].split(b"\0", 1)[0].decode("latin-1")
                                  for i in range(count)]
                    continue
                count = max(0, (end - at) // esize) if esize else 0
                out[fname] = [self._value(kind, buf, at + i * esize, esize, end) for i in range(count)]
            elif fcount is not None:
                if kind == "char":
                    out[fname] = buf[at:at + fcount].split(b"\0", 1)[0].decode("latin-1")
                else:
                    out[fname] = [self._value(kind, buf, at + i * esize, esize, end) for i in range(fcount)]
            elif kind in INT_SIZES:
                out[fname] = int.from_bytes(buf[at:at + esize], "little", signed=kind[0] == "s")
            else:
                out[fname] = self._value(kind, buf, at, esize, end)
        if plan is rest and rest:
            out = {f: out[f] for f in order}        # the layout's order, as the fields were read before
        return out

    def _value(self, kind: str, buf: bytes, at: int, size: int, end: int):
        if kind in INT_SIZES:
            return int.from_bytes(buf[at:at + size], "little", signed=kind.startswith("s"))
        if kind == "char":
            return buf[at:at + 1].decode("latin-1")
        return self._read(kind, buf, at, min(end, at + size))

    # byte swapping -------------------------------------------------------------------------
    def _swab(self, name: str, buf: bytearray, base: int, end: int) -> None:
        rule = self.config.swab.get(name, {})
        opaque = set(rule.get("opaque", ()))
        when = rule.get("when", {})
        entry = self.entry(name)
        chosen = None
        if "union_by" in rule:
            chosen = self._union_member(rule["union_by"], buf, base)
        elif "union_as" in rule:
            chosen = rule["union_as"]
        unions = {f.get("union") for f in entry["fields"] if f.get("union")}
        if unions and chosen is None:
            raise CodecError("EOPNOTSUPP", f"{name} has a union whose foreign-endian form is not defined here")
        for f in entry["fields"]:
            if f["name"] in opaque or (f.get("union") and f["name"] != chosen):
                continue
            if f["name"] in when and not all(self._flag(entry, buf, base, flag) & bit for flag, bit in when[f["name"]]):
                continue
            kind, esize = self._elem(f)
            at = base + f["offset"]
            count = 1
            if f.get("flexible"):
                count = max(0, (end - at) // esize) if esize else 0
            elif "count" in f:
                count = min(f["count"], rule.get("swab_first", {}).get(f["name"], f["count"]))
            for i in range(count):
                p = at + i * esize
                if kind in INT_SIZES:
                    buf[p:p + esize] = buf[p:p + esize][::-1]
                elif kind != "char":
                    self._swab(kind, buf, p, min(end, p + esize))

    @staticmethod
    def _union_member(union_by: dict, buf: bytearray, base: int) -> str:
        """The member of a union a foreign-endian structure is swabbed as: the swab rule's
        choice by its selector field (lustre_swab_ost_id: by the FID sequence)."""
        sel = union_by["selector"]
        raw = int.from_bytes(buf[base + sel["offset"]:base + sel["offset"] + sel["size"]], "little")
        return union_by["then"] if raw in union_by["values"] else union_by["else"]

    def _flag(self, entry: dict, buf: bytearray, base: int, name: str) -> int:
        for f in entry["fields"]:
            if f["name"] == name:
                return int.from_bytes(buf[base + f["offset"]:base + f["offset"] + f["size"]], "little")
        raise CodecError("EINVAL", f"swab rule names unknown field {name}")

    # valid bits ----------------------------------------------------------------------------
    def valid_view(self, name: str, fields: dict, prefix: str = "") -> list[str] | None:
        """Dotted names of the fields the valid bits make meaningful, for structures with
        valid bits (obdo, mdt_body) and structures that contain one (ost_body)."""
        table = self.config.valid_bits.get(name)
        if table is not None:
            mask_field = next(f["name"] for f in self.entry(name)["fields"] if f["name"].endswith("_valid"))
            mask = fields.get(mask_field, 0)
            return [prefix + f for f, bits in table["fields"].items() if any(mask & b for _, b in bits)]
        found = None
        for f in self.entry(name)["fields"]:
            kind = f["type"][len("struct "):] if f["type"].startswith("struct ") else None
            if kind and "count" not in f and not f.get("flexible"):
                inner = self.valid_view(kind, fields.get(f["name"], {}), f"{prefix}{f['name']}.")
                if inner is not None:
                    found = (found or []) + inner
        return found

    # encode --------------------------------------------------------------------------------
    def encode(self, type_name, fields) -> bytes:
        name = self.canonical(type_name)
        if not isinstance(fields, dict):
            raise CodecError("EINVAL", "fields must be an object")
        entry = self.entry(name)
        buf = bytearray(entry["size"])
        extra = self._write(name, fields, buf, 0, name)
        return bytes(buf) + extra

    def _writer(self, name: str) -> tuple[frozenset, list[tuple]]:
        """(the structure's field names, its fields as (name, kind, element size, offset,
        flexible, count, union group)), worked out once per structure."""
        writer = self._writers.get(name)
        if writer is None:
            fields = self.entry(name)["fields"]
            writer = (frozenset(f["name"] for f in fields),
                      [(f["name"], *self._elem(f), f["offset"], bool(f.get("flexible")), f.get("count"), f.get("union"))
                       for f in fields])
            self._writers[name] = writer
        return writer

    def _write(self, name: str, fields: dict, buf: bytearray, base: int, path: str) -> bytes:
        known, plan = self._writer(name)
        for key in fields:
            if key not in known:
                raise CodecError("EINVAL", f"{path} has no field {key!r}")
        fields = dict(fields)
        table = self.config.valid_bits.get(name)
        if table is not None:
            mask_field = next(f for f in known if f.endswith("_valid"))
            if mask_field not in fields:             # an omitted mask: the bits of the fields given
                mask = 0
                for f, bits in table["fields"].items():
                    if f in fields:
                        mask |= bits[0][1]
                fields[mask_field] = mask
        written: dict[str, bytes] = {}
        extra = b""
        for fname, kind, esize, offset, flexible, count, group in plan:
            if fname not in fields:
                continue
            value = fields[fname]
            at = base + offset
            where = f"{path}.{fname}"
            if flexible:
                if not isinstance(value, list):
                    raise CodecError("EINVAL", f"{where} must be a list")
                tail = bytearray(esize * len(value))
                for i, v in enumerate(value):
                    self._put(kind, v, tail, i * esize, esize, f"{where}[{i}]")
                extra += bytes(tail)
                continue
            if count is not None:
                if kind == "char":
                    if not isinstance(value, str):
                        raise CodecError("EINVAL", f"{where} must be a string")
                    try:
                        raw = value.encode("latin-1")
                    except UnicodeEncodeError:
                        raise CodecError("EINVAL", f"{where} has a character outside ISO-8859-1") from None
                    if len(raw) > count:
                        raise CodecError("EINVAL", f"{where} is longer than {count} bytes")
                    chunk = raw + bytes(count - len(raw))
                else:
                    if not isinstance(value, list) or len(value) != count:
                        raise CodecError("EINVAL", f"{where} must be a list of {count}")
                    tmp = bytearray(esize * count)
                    for i, v in enumerate(value):
                        self._put(kind, v, tmp, i * esize, esize, f"{where}[{i}]")
                    chunk = bytes(tmp)
            else:
                tmp = bytearray(esize)
                self._put(kind, value, tmp, 0, esize, where)
                chunk = bytes(tmp)
            if group:
                # union members given together must agree on their bytes (a decode result
                # carries every view)
                prior = written.get(group)
                common = min(len(chunk), len(prior)) if prior is not None else 0
                if prior is not None and prior[:common] != chunk[:common]:
                    raise CodecError("EINVAL", f"{where}: union members given with different bytes")
                if prior is not None and len(prior) > len(chunk):
                    continue       # the longer member already wrote these bytes
                written[group] = chunk
            buf[at:at + len(chunk)] = chunk
        return extra

    def _put(self, kind: str, value, buf: bytearray, at: int, size: int, where: str) -> None:
        if kind in INT_SIZES:
            if isinstance(value, bool) or not isinstance(value, int):
                raise CodecError("EINVAL", f"{where} must be an integer")
            signed = kind.startswith("s")
            low, high = (-(1 << (8 * size - 1)), 1 << (8 * size - 1)) if signed else (0, 1 << (8 * size))
            if not low <= value < high:
                raise CodecError("EINVAL", f"{where} = {value} does not fit {kind}")
            buf[at:at + size] = value.to_bytes(size, "little", signed=signed)
        elif kind == "char":
            if not isinstance(value, str) or len(value) != 1:
                raise CodecError("EINVAL", f"{where} must be one character")
            buf[at:at + 1] = value.encode("latin-1")
        else:
            if not isinstance(value, dict):
                raise CodecError("EINVAL", f"{where} must be an object")
            tmp = bytearray(size)
            self._write(kind, value, tmp, 0, where)
            buf[at:at + size] = tmp
