"""Golden vectors: loading, validation and the byte notation (docs/vectors.md).

A vector file is YAML:

    format: ptlrpc-conformance-vectors/1
    area: framing
    vectors:
    - id: framing.magic.v2-native          # case id grammar, unique across all files
      title: one line a person reads
      requirements: [HDR-MAGIC-1]
      cite: [RULES HDR-3, "pack_generic.c: lustre_unpack_msg_v2"]
      verdict: valid | invalid | acceptable
      direction: request | reply
      canonical: true                       # optional: the exact bytes an encoder must produce
      bytes:                                # hex, field by field, with comments
      - "01000000"    # lm_bufcount = 1
      - {fill: "00", count: 184}            # a run: the pattern repeated count times
      expect: {header: {...}, buflens: [...], body: {...}, buffers: [...], computed_cksum: N}
      errno: [EINVAL]                       # invalid vectors: the allowed errno classes
      profile_overrides: {PROFILE: {verdict: acceptable}}

Every problem is reported with the file, the vector id and the field.
"""
from __future__ import annotations

import pathlib
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any, Iterable

import yaml

from .. import spec
from .registry import CASE_ID, RegistryError, profiles, requirements

SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)   # libyaml's, 10x faster, when built

FORMAT = "ptlrpc-conformance-vectors/1"
VERDICTS = ("valid", "invalid", "acceptable")
DIRECTIONS = ("request", "reply")
DECODE_ERRNOS = ("EINVAL", "EFAULT", "EPROTO")
HEADER_FIELDS = ("lm_bufcount", "lm_secflvr", "lm_magic", "lm_repsize", "lm_cksum", "lm_flags", "lm_opc",
                 "lm_padding_3")
EXPECT_KEYS = ("byte_order", "header", "buflens", "body", "buffers", "computed_cksum", "structs")
STRUCT_EXPECT_KEYS = ("fields", "valid")
VECTOR_KEYS = {"id", "title", "requirements", "cite", "verdict", "direction", "canonical", "bytes", "expect",
               "errno", "profile_overrides", "note", "op", "struct", "byte_order"}
OPS = ("decode", "decode_struct")
MAX_BYTES = 4 * 1024 * 1024
_HEX = re.compile(r"^[0-9a-fA-F\s]*$")


class VectorError(Exception):
    """One or more problems in vector files; `problems` lists them, each naming its place."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass(frozen=True)
class Vector:
    id: str
    title: str
    requirements: tuple[str, ...]
    cite: tuple[str, ...]
    verdict: str
    direction: str
    data: bytes
    expect: dict | None = None
    errno: tuple[str, ...] = ()
    canonical: bool = False
    source: str = ""
    note: str = ""
    overrides: dict = field(default_factory=dict, compare=False)
    op: str = "decode"             # decode (a message) or decode_struct (one structure)
    struct: str = ""               # decode_struct: the structure's name as the vector gives it
    byte_order: str = "little"     # decode_struct: the sender's byte order

    @property
    def any_errno(self) -> bool:
        return self.errno == ("any",)

    def for_profile(self, profile_name: str) -> "Vector":
        o = self.overrides.get(profile_name)
        if not o:
            return self
        return replace(self, verdict=o.get("verdict", self.verdict),
                       errno=tuple(o.get("errno", self.errno)))

    def decode_request(self) -> dict:
        """The testee-protocol request that decodes this vector."""
        if self.op == "decode_struct":
            return {"op": "decode_struct", "type": self.struct, "data": self.data.hex(), "byte_order": self.byte_order}
        return {"op": "decode", "data": self.data.hex(), "direction": self.direction}

    def encode_request(self) -> dict:
        """The request an encoder is given for a canonical vector."""
        if self.op == "decode_struct":
            return {"op": "encode_struct", "type": self.struct, "fields": (self.expect or {}).get("fields", {})}
        return {"op": "encode", "message": self.encode_message()}

    def encode_message(self) -> dict:
        """The MESSAGE an encoder is given for a canonical vector."""
        e = self.expect or {}
        message: dict[str, Any] = {}
        if "header" in e:
            message["header"] = dict(e["header"])
        if "buflens" in e:
            message["buflens"] = list(e["buflens"])
        message["body"] = {k: v for k, v in e.get("body", {}).items() if v is not None}
        if "buffers" in e:
            message["buffers"] = [None] + list(e["buffers"][1:])
        return message


# ----------------------------------------------------------------------------------------
# byte notation
# ----------------------------------------------------------------------------------------

def parse_bytes(node: Any, where: str) -> bytes:
    out = bytearray()
    _collect(node, where, out)
    return bytes(out)


def _collect(node: Any, where: str, out: bytearray) -> None:
    if isinstance(node, str):
        if not _HEX.match(node):
            raise ValueError(f"{where}: {node!r} is not hex")
        digits = "".join(node.split())
        if len(digits) % 2:
            raise ValueError(f"{where}: {node!r} has an odd number of hex digits")
        out += bytes.fromhex(digits)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            _collect(item, f"{where}[{i}]", out)
    elif isinstance(node, dict):
        if set(node) != {"fill", "count"}:
            raise ValueError(f"{where}: a run is written {{fill: HEX, count: N}}, got keys {sorted(node)}")
        pattern = node["fill"]
        if not isinstance(pattern, str) or not pattern.strip() or not _HEX.match(pattern) \
                or len("".join(pattern.split())) % 2:
            raise ValueError(f"{where}.fill: {pattern!r} is not a hex byte pattern")
        count = node["count"]
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"{where}.count: {count!r} is not a whole number")
        chunk = bytes.fromhex("".join(pattern.split()))
        if len(out) + len(chunk) * count > MAX_BYTES:
            raise ValueError(f"{where}: the vector would exceed {MAX_BYTES} bytes")
        out += chunk * count
    else:
        raise ValueError(f"{where}: expected hex text, a list or {{fill, count}}, got {type(node).__name__}")


# ----------------------------------------------------------------------------------------
# validation
# ----------------------------------------------------------------------------------------

def _check_expect(expect: Any, where: str, problems: list[str]) -> None:
    if not isinstance(expect, dict):
        problems.append(f"{where}: must be a mapping")
        return
    body_fields = {f.name: f for f in spec.layout("ptlrpc_body_v3").fields}
    for key, value in expect.items():
        w = f"{where}.{key}"
        if key not in EXPECT_KEYS:
            problems.append(f"{w}: unknown key (known: {', '.join(EXPECT_KEYS)})")
        elif key == "byte_order":
            if value not in ("little", "big"):
                problems.append(f"{w}: must be little or big")
        elif key == "header":
            if not isinstance(value, dict):
                problems.append(f"{w}: must be a mapping")
                continue
            for k, v in value.items():
                if k not in HEADER_FIELDS:
                    problems.append(f"{w}.{k}: not a header field")
                elif not _is_uint(v, 32):
                    problems.append(f"{w}.{k}: {v!r} is not a 32-bit unsigned integer")
        elif key == "buflens":
            if not isinstance(value, list) or not all(_is_uint(v, 32) for v in value):
                problems.append(f"{w}: must be a list of 32-bit unsigned integers")
        elif key == "body":
            if not isinstance(value, dict):
                problems.append(f"{w}: must be a mapping")
                continue
            for k, v in value.items():
                f = body_fields.get(k)
                if f is None:
                    problems.append(f"{w}.{k}: not a ptlrpc_body field")
                elif v is None:
                    continue   # null: the field must be absent from the decoded body
                elif k == "pb_jobid":
                    if not isinstance(v, str) or len(v) > 31:
                        problems.append(f"{w}.{k}: must be a string of at most 31 characters")
                elif f.count:
                    if not isinstance(v, list) or len(v) != f.count or not all(_is_uint(x, 8 * f.elem_size) for x in v):
                        problems.append(f"{w}.{k}: must be a list of {f.count} unsigned integers")
                elif k in spec.facts()["signed"]["ptlrpc_body_v3"]:
                    if not (isinstance(v, int) and not isinstance(v, bool) and -(1 << 31) <= v < (1 << 31)):
                        problems.append(f"{w}.{k}: must be a signed 32-bit integer")
                elif not _is_uint(v, 8 * f.size):
                    problems.append(f"{w}.{k}: {v!r} is not a {8 * f.size}-bit unsigned integer")
        elif key == "buffers":
            if not isinstance(value, list) or not all(v is None or (isinstance(v, str) and _HEX.match(v))
                                                      for v in value):
                problems.append(f"{w}: must be a list of hex strings or nulls")
        elif key == "computed_cksum":
            if not _is_uint(value, 32):
                problems.append(f"{w}: must be a 32-bit unsigned integer")
        elif key == "structs":
            if not isinstance(value, dict):
                problems.append(f"{w}: must map buffer indexes to structures")
                continue
            for index, entry in value.items():
                if not str(index).isdigit() or not isinstance(entry, dict) or "type" not in entry:
                    problems.append(f"{w}.{index}: must be a buffer index with {{type, fields}}")
                    continue
                _check_struct_expect({k: v for k, v in entry.items() if k != "type"}, f"{w}.{index}", problems)


def _check_struct_expect(expect: Any, where: str, problems: list[str]) -> None:
    if not isinstance(expect, dict):
        problems.append(f"{where}: must be a mapping")
        return
    for key in expect:
        if key not in STRUCT_EXPECT_KEYS:
            problems.append(f"{where}.{key}: unknown key (known: {', '.join(STRUCT_EXPECT_KEYS)})")
    if "fields" in expect and not isinstance(expect["fields"], dict):
        problems.append(f"{where}.fields: must be a mapping of field names")
    if "valid" in expect and not (isinstance(expect["valid"], list) and all(isinstance(v, str) for v in expect["valid"])):
        problems.append(f"{where}.valid: must be a list of field names")


def _is_uint(v: Any, bits: int) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and 0 <= v < (1 << bits)


def validate_vector(raw: Any, where: str, problems: list[str]) -> Vector | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: a vector must be a mapping")
        return None
    vid = raw.get("id")
    if not isinstance(vid, str) or not CASE_ID.match(vid):
        problems.append(f"{where}: id {vid!r} does not follow the case id grammar (e.g. framing.bufcount.zero)")
        return None
    w = f"{where} {vid}"
    n_before = len(problems)
    for key in sorted(set(raw) - VECTOR_KEYS):
        problems.append(f"{w}: unknown field {key!r}")
    op = raw.get("op", "decode")
    if op not in OPS:
        problems.append(f"{w}.op: {op!r} is not one of {', '.join(OPS)}")
        return None
    required = ("title", "requirements", "cite", "verdict", "bytes") + \
        (("direction",) if op == "decode" else ("struct", "byte_order"))
    for key in required:
        if key not in raw:
            problems.append(f"{w}: missing field {key!r}")
    if len(problems) > n_before:
        return None
    if not isinstance(raw["title"], str) or not raw["title"].strip():
        problems.append(f"{w}.title: must be text")
    reqs = raw["requirements"]
    known = requirements()
    if not isinstance(reqs, list) or not reqs:
        problems.append(f"{w}.requirements: must list at least one requirement id")
        reqs = []
    for r in reqs:
        if r not in known:
            problems.append(f"{w}.requirements: unknown requirement {r!r}")
    cite = raw["cite"]
    if not isinstance(cite, list) or not cite or not all(isinstance(c, str) and c.strip() for c in cite):
        problems.append(f"{w}.cite: must list at least one source (seed section, RULES rule, Lustre function)")
    verdict = raw["verdict"]
    if verdict not in VERDICTS:
        problems.append(f"{w}.verdict: {verdict!r} is not one of {', '.join(VERDICTS)}")
    if op == "decode" and raw["direction"] not in DIRECTIONS:
        problems.append(f"{w}.direction: {raw['direction']!r} is not request or reply")
    if op == "decode_struct":
        from ..spec import layouts
        try:
            layouts.canonical(str(raw["struct"]))
        except KeyError:
            problems.append(f"{w}.struct: no wire structure named {raw['struct']!r}")
        if raw["byte_order"] not in ("little", "big"):
            problems.append(f"{w}.byte_order: {raw['byte_order']!r} is not little or big")
    try:
        data = parse_bytes(raw["bytes"], f"{w}.bytes")
    except ValueError as e:
        problems.append(str(e))
        data = b""
    expect = raw.get("expect")
    errno = raw.get("errno", [])
    if verdict == "valid":
        if expect is None:
            problems.append(f"{w}.expect: a valid vector lists the fields it must decode to")
        if errno:
            problems.append(f"{w}.errno: only invalid vectors name errno classes")
    if verdict == "invalid":
        if errno == "any" and op == "decode_struct":
            errno = ["any"]
        elif not isinstance(errno, list) or not errno:
            problems.append(f"{w}.errno: an invalid vector lists the allowed errno classes")
        elif any(e not in DECODE_ERRNOS for e in errno):
            problems.append(f"{w}.errno: {errno} - decode rejections are {', '.join(DECODE_ERRNOS)}")
        if expect is not None:
            problems.append(f"{w}.expect: an invalid vector decodes to nothing")
    if expect is not None:
        if op == "decode_struct":
            _check_struct_expect(expect, f"{w}.expect", problems)
        else:
            _check_expect(expect, f"{w}.expect", problems)
    canonical = raw.get("canonical", False)
    if not isinstance(canonical, bool):
        problems.append(f"{w}.canonical: must be true or false")
    elif canonical and verdict != "valid":
        problems.append(f"{w}.canonical: only a valid vector can be canonical")
    elif canonical and op == "decode_struct" and raw.get("byte_order") != "little":
        problems.append(f"{w}.canonical: encoders write little-endian only")
    overrides = raw.get("profile_overrides", {}) or {}
    _, known_profiles = profiles()
    if not isinstance(overrides, dict):
        problems.append(f"{w}.profile_overrides: must be a mapping")
        overrides = {}
    for pname, o in overrides.items():
        if pname not in known_profiles:
            problems.append(f"{w}.profile_overrides.{pname}: unknown profile")
        elif not isinstance(o, dict) or set(o) - {"verdict", "errno"}:
            problems.append(f"{w}.profile_overrides.{pname}: may set verdict and errno only")
        elif o.get("verdict", "valid") not in VERDICTS:
            problems.append(f"{w}.profile_overrides.{pname}.verdict: not a verdict")
    if len(problems) > n_before:
        return None
    return Vector(id=vid, title=raw["title"].strip(), requirements=tuple(reqs), cite=tuple(cite),
                  verdict=verdict, direction=raw.get("direction", "request"), data=data, expect=expect,
                  errno=tuple(errno), canonical=canonical, source=where.split(":")[0],
                  note=str(raw.get("note", "")), overrides=dict(overrides), op=op,
                  struct=str(raw.get("struct", "")), byte_order=raw.get("byte_order", "little"))


def to_file_dict(v: Vector, id_prefix: str = "") -> dict:
    """A vector in the form a vector file holds (bytes as one hex string): what reproducers
    are written as, so that `--vectors DIR` reads them back."""
    out: dict[str, Any] = {"id": id_prefix + v.id, "title": v.title, "requirements": list(v.requirements),
                           "cite": list(v.cite), "verdict": v.verdict}
    if v.op == "decode_struct":
        out.update(op="decode_struct", struct=v.struct, byte_order=v.byte_order)
    else:
        out["direction"] = v.direction
    if v.verdict == "invalid":
        out["errno"] = "any" if v.any_errno else list(v.errno)
    if v.expect is not None and v.verdict == "valid":
        out["expect"] = v.expect
    if v.canonical:
        out["canonical"] = True
    if v.note:
        out["note"] = v.note
    out["bytes"] = [v.data.hex()]
    return out


SCENARIO_FORMAT = "ptlrpc-conformance-scenarios/1"


def load_file(path: pathlib.Path | str, text: str | None = None, problems: list[str] | None = None) -> list[Vector]:
    """Vectors of one file; problems are appended to `problems` (raised if None)."""
    own = problems is None
    problems = [] if own else problems
    name = str(path)
    try:
        data = yaml.load(text if text is not None else pathlib.Path(path).read_text(encoding="utf-8"), Loader=SAFE_LOADER)
    except (OSError, UnicodeDecodeError) as e:
        problems.append(f"{name}: cannot read: {e}")
        data = None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problems.append(f"{name}:{mark.line + 1 if mark else '?'}: not valid YAML: {getattr(e, 'problem', e)}")
        data = None
    out: list[Vector] = []
    if isinstance(data, dict) and data.get("format") == SCENARIO_FORMAT:
        data = None              # a scenario file: harness/scenario.py reads it
    if data is not None:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            problems.append(f"{name}: not a vector file (expected 'format: {FORMAT}')")
        elif not isinstance(data.get("vectors"), list):
            problems.append(f"{name}: 'vectors' must be a list")
        else:
            for i, raw in enumerate(data["vectors"]):
                v = validate_vector(raw, f"{name}: vector {i}", problems)
                if v is not None:
                    out.append(replace(v, source=name))
    if own and problems:
        raise VectorError(problems)
    return out


def bundled_files() -> list[tuple[str, str]]:
    """(name, text) of every vector file shipped in the package."""
    root = resources.files("ptlrpc_conformance.vectors")
    return sorted((f"vectors/{p.name}", p.read_text(encoding="utf-8"))
                  for p in root.iterdir() if p.name.endswith((".yaml", ".yml")))


def user_files(dirs: Iterable[str]) -> list[pathlib.Path]:
    files: list[pathlib.Path] = []
    for d in dirs:
        p = pathlib.Path(d)
        if p.is_file():
            files.append(p)
        elif p.is_dir():
            files += sorted(list(p.glob("*.yaml")) + list(p.glob("*.yml")))
        else:
            raise VectorError([f"{d}: no such vector file or directory"])
    return files


def load_all(extra_dirs: Iterable[str] = ()) -> list[Vector]:
    """Bundled vectors plus the user's; every problem in every file is reported at once."""
    problems: list[str] = []
    vectors: list[Vector] = []
    for name, text in bundled_files():
        vectors += load_file(name, text, problems)
    for path in user_files(extra_dirs):
        vectors += load_file(path, None, problems)
    check_unique_ids(vectors, problems)
    if problems:
        raise VectorError(problems)
    return vectors


def check_unique_ids(items, problems: list[str]) -> None:
    """Ids (of vectors, of scenarios) are unique across all files; each `item` has .id and .source."""
    seen: dict[str, str] = {}
    for v in items:
        if v.id in seen:
            problems.append(f"{v.source} {v.id}: id already used in {seen[v.id]}")
        seen.setdefault(v.id, v.source)


__all__ = ["Vector", "VectorError", "load_all", "load_file", "parse_bytes", "RegistryError"]
