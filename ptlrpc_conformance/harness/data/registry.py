"""Requirements and profiles, read from ptlrpc_conformance/spec/*.yaml.

Ids follow one grammar (docs/ids.md):
  case ids         dotted lower-case segments, e.g. framing.bufcount.zero
  requirement ids  upper-case dash-separated, ending in a number, e.g. HDR-BUFCOUNT-1
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

import yaml

from ptlrpc_conformance.harness.data import yamlcache

CASE_ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9][a-z0-9_+-]*)+$")
REQUIREMENT_ID = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)*-[0-9]+$")
LEVELS = ("MUST", "SHOULD", "MAY")
CAPABILITIES = ("decode", "encode", "structs", "target", "restart")    # the order they are named in
DIRECTIONS = ("request", "reply")


class RegistryError(Exception):
    pass


@dataclass(frozen=True)
class Requirement:
    id: str
    level: str
    statement: str
    rules: tuple[str, ...]
    cite: tuple[str, ...]
    profiles: tuple[str, ...] | None   # None = every profile
    capability: str | None = "decode"  # what an IUT declares for its cases to apply; None: the protocol's own
    direction: str | None = None       # a decoder rule of one direction only
    errno_class: bool = False          # judges the errno class of a rejection

    def in_profile(self, profile: str) -> bool:
        return self.profiles is None or profile in self.profiles


@dataclass(frozen=True)
class Profile:
    name: str
    lustre_version: str
    description: str
    relaxes: str | None = None          # what a profile that judges less lets through


def _load_yaml(name: str):
    text = resources.files("ptlrpc_conformance.spec").joinpath(name).read_text(encoding="utf-8")
    return yaml.load(text, Loader=yamlcache.SAFE_LOADER)


@functools.lru_cache(maxsize=1)
def profiles() -> tuple[str, dict[str, Profile]]:
    data = _load_yaml("profiles.yaml")
    table = {name: Profile(name, str(p["lustre_version"]), " ".join(str(p["description"]).split()),
                           " ".join(str(p["relaxes"]).split()) if p.get("relaxes") else None)
             for name, p in data["profiles"].items()}
    if data["default"] not in table:
        raise RegistryError(f"profiles.yaml: default profile {data['default']!r} is not defined")
    return data["default"], table


def default_profile() -> str:
    return profiles()[0]


def profile(name: str | None) -> Profile:
    default, table = profiles()
    name = name or default
    if name not in table:
        raise RegistryError(f"unknown profile {name!r}; known: {', '.join(sorted(table))}")
    return table[name]


@functools.lru_cache(maxsize=1)
def requirements() -> dict[str, Requirement]:
    data = _load_yaml("requirements.yaml")
    _, known_profiles = profiles()
    out: dict[str, Requirement] = {}
    for i, r in enumerate(data.get("requirements") or []):
        where = f"requirements.yaml: entry {i} ({r.get('id', '?')})"
        rid = r.get("id")
        if not isinstance(rid, str) or not REQUIREMENT_ID.match(rid):
            raise RegistryError(f"{where}: id {rid!r} does not follow the requirement id grammar")
        if rid in out:
            raise RegistryError(f"{where}: duplicate id")
        if r.get("level") not in LEVELS:
            raise RegistryError(f"{where}: level must be one of {LEVELS}")
        profs = r.get("profiles", "all")
        if profs != "all":
            unknown = [p for p in profs if p not in known_profiles]
            if unknown:
                raise RegistryError(f"{where}: unknown profiles {unknown}")
        if not r.get("cite"):
            raise RegistryError(f"{where}: no citation")
        cap = r.get("capability")
        if cap not in CAPABILITIES + ("none",):
            raise RegistryError(f"{where}: capability must be one of {CAPABILITIES + ('none',)}")
        if r.get("direction") not in (None,) + DIRECTIONS:
            raise RegistryError(f"{where}: direction must be one of {DIRECTIONS}")
        if not isinstance(r.get("errno_class", False), bool):
            raise RegistryError(f"{where}: errno_class must be true or false")
        out[rid] = Requirement(rid, r["level"], " ".join(str(r["statement"]).split()),
                               tuple(r.get("rules") or ()), tuple(r["cite"]),
                               None if profs == "all" else tuple(profs),
                               None if cap == "none" else cap, r.get("direction"), r.get("errno_class", False))
    return out


ALIASES_FORMAT = "ptlrpc-conformance-case-aliases/1"


@functools.lru_cache(maxsize=1)
def case_aliases() -> dict[str, tuple[str, ...]]:
    """Renamed case ids: old id -> the case ids that replaced it (spec/case_aliases.yaml)."""
    data = _load_yaml("case_aliases.yaml")
    if not isinstance(data, dict) or data.get("format") != ALIASES_FORMAT:
        raise RegistryError(f"case_aliases.yaml: expected 'format: {ALIASES_FORMAT}'")
    out: dict[str, tuple[str, ...]] = {}
    for old, new in (data.get("aliases") or {}).items():
        where = f"case_aliases.yaml: {old}"
        if not isinstance(old, str) or not CASE_ID.match(old):
            raise RegistryError(f"{where}: does not follow the case id grammar")
        if not isinstance(new, list) or not new or not all(isinstance(n, str) and CASE_ID.match(n) for n in new):
            raise RegistryError(f"{where}: needs a list of case ids")
        out[old] = tuple(new)
    renamed = {n for new in out.values() for n in new}
    if renamed & set(out):
        raise RegistryError(f"case_aliases.yaml: {sorted(renamed & set(out))} are both old and new ids")
    return out


def expand_case_ids(ids) -> list[str]:
    """Case ids with every old id replaced by the ids of the cases that replaced it."""
    aliases = case_aliases()
    out: list[str] = []
    for i in ids:
        for n in aliases.get(i, (i,)):
            if n not in out:
                out.append(n)
    return out
