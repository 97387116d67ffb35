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

CASE_ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9][a-z0-9_+-]*)+$")
REQUIREMENT_ID = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)*-[0-9]+$")
LEVELS = ("MUST", "SHOULD", "MAY")


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

    def in_profile(self, profile: str) -> bool:
        return self.profiles is None or profile in self.profiles


@dataclass(frozen=True)
class Profile:
    name: str
    lustre_version: str
    description: str


def _load_yaml(name: str):
    text = resources.files("ptlrpc_conformance.spec").joinpath(name).read_text(encoding="utf-8")
    return yaml.safe_load(text)


@functools.lru_cache(maxsize=1)
def profiles() -> tuple[str, dict[str, Profile]]:
    data = _load_yaml("profiles.yaml")
    table = {name: Profile(name, str(p["lustre_version"]), " ".join(str(p["description"]).split()))
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
        out[rid] = Requirement(rid, r["level"], " ".join(str(r["statement"]).split()),
                               tuple(r.get("rules") or ()), tuple(r["cite"]),
                               None if profs == "all" else tuple(profs))
    return out
