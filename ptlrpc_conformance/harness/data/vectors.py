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
      profile_overrides: {KEY: {verdict: acceptable}}   # KEY: a modifier (literal), a release
                                            # profile (lustre-2.12.9) or both (lustre-2.12.9-literal)
                                            # a structure vector's override may also give the
                                            # release's own `bytes` and `expect`
    release_overrides:                      # optional: profile_overrides of vectors of any file,
      structs.obdo.all-fields-be:           # by id (vectors/structs_releases.yaml, generated)
        lustre-2.12.9: {bytes: ..., expect: {...}}

A file is validated against the JSON Schema generated from the protocol facts
(schemas/vectors-v1.json, harness/data/vector_schema.py); this module adds what a schema
cannot say (requirement ids and profiles exist, the byte notation parses).  Every problem
is reported with the file, the vector id and the field.
"""
from __future__ import annotations

import functools
import pathlib
import re
from dataclasses import dataclass, field, replace
from importlib import resources
from typing import Any, Iterable

import yaml

from ptlrpc_conformance.harness.data import vector_schema, yamlcache
from ptlrpc_conformance.harness.data.registry import (CASE_ID, REQUIREMENT_ID, RegistryError, modifiers, override_keys,
                                                      profiles, requirements)
from ptlrpc_conformance.harness.data.vector_schema import DECODE_ERRNOS, DIRECTIONS, FORMAT, OPS, VERDICTS  # noqa: F401


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

    @property
    def accepted_errnos(self) -> tuple[str, ...]:
        """The errno classes a rejection of this vector may carry: its own, and for a decode
        of a reply also EPROTO, because a Lustre client reports every reply it cannot unpack
        as -EPROTO (`do_cli_unwrap_reply` in ptlrpc/sec.c, `after_reply` in ptlrpc/client.c;
        docs/target-rules.md section 9)."""
        if self.op == "decode" and self.direction == "reply" and not self.any_errno and "EPROTO" not in self.errno:
            return self.errno + ("EPROTO",)
        return self.errno

    def for_profile(self, profile_name: str) -> "Vector":
        """The vector as the profile judges it: the overrides whose key the profile matches
        applied, the more specific later (a modifier, then the release profile, then the
        release profile with modifiers)."""
        o = {}
        for key in override_keys(profile_name):
            o.update(self.overrides.get(key) or {})
        if not o:
            return self
        return replace(self, verdict=o.get("verdict", self.verdict),
                       errno=tuple(o.get("errno", self.errno)), expect=o.get("expect", self.expect),
                       data=parse_bytes(o["bytes"], f"{self.id}.profile_overrides") if "bytes" in o else self.data)

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

def validate_vector(raw: Any, where: str, problems: list[str],
                    schema_problems: Iterable[tuple[tuple, str]] = ()) -> Vector | None:
    """The Vector of one entry of a vector file, or None after appending its problems.
    `schema_problems` are the (path, line) the schema found in it (vector_schema.problems);
    what the schema cannot say is checked here: the registry knows the requirement ids and
    the profiles, and the bytes parse (the byte notation is read here only)."""
    n_before = len(problems)
    vid = raw.get("id") if isinstance(raw, dict) else None
    w = f"{where} {vid}" if isinstance(vid, str) and CASE_ID.match(vid) else where
    problems += [line for _, line in schema_problems]
    data = b""
    if isinstance(raw, dict) and "bytes" in raw:
        try:
            data = parse_bytes(raw["bytes"], f"{w}.bytes")
        except ValueError as e:
            problems.append(str(e))
    if not isinstance(raw, dict):
        return None
    reqs = raw.get("requirements")
    if isinstance(reqs, list):
        known = requirements()
        problems += [f"{w}.requirements: unknown requirement {r!r}" for r in reqs
                     if isinstance(r, str) and REQUIREMENT_ID.match(r) and r not in known]
    overrides = raw.get("profile_overrides") or {}
    if isinstance(overrides, dict):
        _, known_profiles = profiles()
        problems += [f"{w}.profile_overrides.{p}: neither a modifier ({', '.join(modifiers())}) nor a profile"
                     for p in overrides if p not in known_profiles and p not in modifiers()]
    if len(problems) > n_before:
        return None
    errno = raw.get("errno") or []
    return Vector(id=vid, title=raw["title"].strip(), requirements=tuple(reqs), cite=tuple(raw["cite"]),
                  verdict=raw["verdict"], direction=raw.get("direction", "request"), data=data,
                  expect=raw.get("expect"), errno=("any",) if errno == "any" else tuple(errno),
                  canonical=raw.get("canonical", False), source=where.split(":")[0],
                  note=str(raw.get("note", "")), overrides=dict(overrides), op=raw.get("op", "decode"),
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
    # a structure vector as a release profile judges it keeps that profile's override, so
    # that it applies again under that profile (verdicts/release.py struct_not_applicable)
    own = {k: {"bytes": [v.data.hex()], **({"expect": v.expect} if "expect" in out else {})}
           for k, o in v.overrides.items() if isinstance(o, dict) and "bytes" in o
           and parse_bytes(o["bytes"], k) == v.data and o.get("expect") == v.expect}
    if own:
        out["profile_overrides"] = own
    return out


SCENARIO_FORMAT = "ptlrpc-conformance-scenarios/2"      # what the suite writes
# the scenario formats it reads (docs/scenarios.md): format 1 files still load
SCENARIO_FORMATS = ("ptlrpc-conformance-scenarios/1", SCENARIO_FORMAT)


def is_scenario_text(text: str) -> bool:
    """The text of a scenario file (either format), told without parsing it."""
    return any(f"\nformat: {f}\n" in text or text.startswith(f"format: {f}\n") for f in SCENARIO_FORMATS)


def load_file(path: pathlib.Path | str, text: str | None = None, problems: list[str] | None = None,
              release_overrides: dict | None = None) -> list[Vector]:
    """Vectors of one file; problems are appended to `problems` (raised if None).  The file's
    `release_overrides` (profile overrides of vectors by id, which may be in other files) are
    checked, and added to `release_overrides` when it is given (apply_release_overrides)."""
    own = problems is None
    problems = [] if own else problems
    before = len(problems)                  # this file's problems are those appended from here
    name = str(path)
    try:
        text = text if text is not None else pathlib.Path(path).read_text(encoding="utf-8")
        data = yamlcache.load(text)
    except (OSError, UnicodeDecodeError) as e:
        problems.append(f"{name}: cannot read: {e}")
        data = None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        problems.append(f"{name}:{mark.line + 1 if mark else '?'}: not valid YAML: {getattr(e, 'problem', e)}")
        data = None
    out: list[Vector] = []
    if data is None and len(problems) == before:
        problems.append(f"{name}: nothing to check: the file is empty")
    if isinstance(data, dict) and data.get("format") in SCENARIO_FORMATS:
        data = None              # a scenario file: harness/ost/scenario_file.py reads it
    if data is not None:
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            problems.append(f"{name}: not a vector file (expected 'format: {FORMAT}')")
        elif "vectors" not in data and isinstance(data.get("release_overrides"), dict):
            _check_release_overrides(name, data["release_overrides"], problems, release_overrides)
        elif not isinstance(data.get("vectors"), list):
            problems.append(f"{name}: 'vectors' must be a list")
        elif not data["vectors"]:
            problems.append(f"{name}: nothing to check: 'vectors' is empty")
        else:
            found: dict[int | None, list[tuple[tuple, str]]] = {}
            schema = vector_schema.fingerprint()
            checked = yamlcache.known("vector-schema", schema, text)     # this text passed this check before
            if not checked:
                for index, path_in_vector, line in vector_schema.problems(data, name):
                    found.setdefault(index, []).append((path_in_vector, line))
            schema_clean = not found            # the file itself and every vector
            problems += [line for _, line in found.pop(None, [])]
            for i, raw in enumerate(data["vectors"]):
                v = validate_vector(raw, f"{name}: vector {i}", problems, found.get(i, ()))
                if v is not None:
                    out.append(replace(v, source=name))
            if not checked and schema_clean:
                yamlcache.mark("vector-schema", schema, text)
            if isinstance(data.get("release_overrides"), dict):
                _check_release_overrides(name, data["release_overrides"], problems, release_overrides)
    if own and problems:
        raise VectorError(problems)
    return out


def _check_release_overrides(name: str, table: dict, problems: list[str], out: dict | None) -> None:
    """The problems of a file's `release_overrides`: ids and profiles exist, bytes parse."""
    _, known_profiles = profiles()
    for vid, by_profile in table.items():
        if not isinstance(vid, str) or not CASE_ID.match(vid) or not isinstance(by_profile, dict):
            problems.append(f"{name}: release_overrides.{vid}: not a case id with a mapping of profile overrides")
            continue
        for key, o in by_profile.items():
            where = f"{name}: release_overrides.{vid}.{key}"
            if key not in known_profiles and key not in modifiers():
                problems.append(f"{where}: neither a modifier ({', '.join(modifiers())}) nor a profile")
            elif not isinstance(o, dict) or set(o) - {"verdict", "errno", "bytes", "expect", "note"}:
                problems.append(f"{where}: an override gives verdict, errno, bytes, expect or note")
            elif "bytes" in o:
                try:
                    parse_bytes(o["bytes"], f"{where}.bytes")
                except ValueError as e:
                    problems.append(str(e))
        if out is not None:
            out.setdefault(vid, []).append((name, by_profile))


def apply_release_overrides(vectors: list[Vector], table: dict, problems: list[str]) -> list[Vector]:
    """The vectors with the release_overrides of every file (load_file) merged into their
    profile overrides; an override for an unknown vector, or one its own file already
    gives, is a problem."""
    if not table:
        return vectors
    by_id = {v.id: v for v in vectors}
    for vid, entries in table.items():
        for source, by_profile in entries:
            v = by_id.get(vid)
            if v is None:
                problems.append(f"{source}: release_overrides.{vid}: no vector has this id")
                continue
            twice = sorted(set(by_profile) & set(v.overrides))
            if twice:
                problems.append(f"{source}: release_overrides.{vid}: {', '.join(twice)} already overridden in {v.source}")
                continue
            by_id[vid] = replace(v, overrides={**v.overrides, **by_profile})
    return [by_id[v.id] for v in vectors]


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
            found = sorted(list(p.glob("*.yaml")) + list(p.glob("*.yml")))
            if not found:
                raise VectorError([f"{d}: nothing to check: no .yaml or .yml vector file in the directory"])
            files += found
        else:
            raise VectorError([f"{d}: no such vector file or directory"])
    return files


@functools.lru_cache(maxsize=1)
def _bundled() -> tuple[tuple[Vector, ...], tuple[str, ...]]:
    """The bundled vectors and their problems, read once per process (a certification reads
    them twice: the command line before the run, the plugin in it), and kept in the parse
    cache between runs: parsing their bytes and checking them took about 25 ms of every
    process's start-up, reading them back 6 ms.  The cache's name covers every file of the
    package (the vector files, the facts, this code); the schema check's fingerprint also
    covers the installed jsonschema."""
    return yamlcache.remember("bundled-vectors", vector_schema.fingerprint().encode("utf-8", "surrogateescape"),
                              _read_bundled)


def _read_bundled() -> tuple[tuple[Vector, ...], tuple[str, ...]]:
    problems: list[str] = []
    vectors: list[Vector] = []
    table: dict = {}
    for name, text in bundled_files():
        if is_scenario_text(text):
            continue            # the bundled scenario file: harness/ost/scenario_file.py reads it (not parsed twice)
        vectors += load_file(name, text, problems, table)
    return tuple(apply_release_overrides(vectors, table, problems)), tuple(problems)


def load_all(extra_dirs: Iterable[str] = ()) -> list[Vector]:
    """Bundled vectors plus the user's; every problem in every file is reported at once."""
    bundled, bundled_problems = _bundled()
    problems: list[str] = list(bundled_problems)
    vectors: list[Vector] = list(bundled)
    table: dict = {}
    for path in user_files(extra_dirs):
        vectors += load_file(path, None, problems, table)
    vectors = apply_release_overrides(vectors, table, problems)
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
