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

from ptlrpc_conformance.harness.data import yamlcache

CASE_ID = re.compile(r"^[a-z][a-z0-9_]*(\.[a-z0-9][a-z0-9_+-]*)+$")
REQUIREMENT_ID = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)*-[0-9]+$")
LEVELS = ("MUST", "SHOULD", "MAY")
CAPABILITIES = ("decode", "encode", "structs", "target", "restart", "client")    # the order they are named in
DIRECTIONS = ("request", "reply")
# what a requirement judges (its `kind`, explained in requirements.yaml's header and docs/ids.md)
KINDS = ("acceptance", "content", "checksum", "valid", "encoding", "behaviour", "conduct", "protocol")
# the kinds of a requirement about what a decoder reports, never about whether it accepts a message
CONTENT_KINDS = ("content", "checksum", "valid")


class RegistryError(Exception):
    pass


@dataclass(frozen=True)
class Applies:
    """Which profiles a requirement belongs to: releases from `since` to `until` (inclusive,
    None = open), under profiles that have every modifier of `with_` and none of `without`."""
    since: str | None = None
    until: str | None = None
    with_: tuple[str, ...] = ()
    without: tuple[str, ...] = ()

    def __call__(self, prof: "Profile") -> bool:
        key = release_key
        if self.since and key(prof.release) < key(self.since):
            return False
        if self.until and key(prof.release) > key(self.until):
            return False
        return set(self.with_) <= set(prof.modifiers) and not set(self.without) & set(prof.modifiers)


@dataclass(frozen=True)
class Requirement:
    id: str
    level: str
    statement: str
    rules: tuple[str, ...]
    cite: tuple[str, ...]
    profiles: Applies | None   # None = every profile
    capability: str | None             # what an IUT declares for its cases to apply; None: the protocol's own
    kind: str                          # what it judges (KINDS)
    direction: str | None = None       # a decoder rule of one direction only
    errno_class: bool = False          # judges the errno class of a rejection
    errno_only: bool = False           # the errno class (or the order of checks) is all it judges

    def in_profile(self, name: str) -> bool:
        return self.profiles is None or self.profiles(profile(name))


@dataclass(frozen=True)
class Release:
    id: str                             # "2.15.8"
    tag: str                            # "v2_15_8"
    commit: str
    description: str


@dataclass(frozen=True)
class Profile:
    name: str                           # lustre-<release>[-<modifier>]...
    release: str
    modifiers: tuple[str, ...]
    description: str
    relaxes: str | None = None          # what a profile that judges less lets through

    @property
    def lustre_version(self) -> str:
        return self.release

    def has(self, modifier: str) -> bool:
        return modifier in self.modifiers

    @property
    def base(self) -> str:
        """The release profile without modifiers."""
        return f"lustre-{self.release}"


def release_key(release: str) -> tuple[int, ...]:
    """Sort key of a release id ("2.15.8" < "2.16.1")."""
    return tuple(int(x) for x in release.split("."))


def _load_yaml(name: str):
    text = resources.files("ptlrpc_conformance.spec").joinpath(name).read_text(encoding="utf-8")
    return yamlcache.load(text)         # parsed once per text, then read back (marshal)


def _words(text) -> str:
    return " ".join(str(text).split())


@functools.lru_cache(maxsize=1)
def _profile_data() -> tuple[str, dict[str, Release], dict[str, dict]]:
    data = _load_yaml("profiles.yaml")
    if data.get("format") != "ptlrpc-conformance-profiles/2":
        raise RegistryError("profiles.yaml: expected 'format: ptlrpc-conformance-profiles/2'")
    rels = {}
    for rid, r in (data.get("releases") or {}).items():
        rid = str(rid)
        if not re.fullmatch(r"[0-9]+(\.[0-9]+)+", rid):
            raise RegistryError(f"profiles.yaml: release {rid!r} is not a version like 2.15.8")
        for k in ("tag", "commit", "description"):
            if not r.get(k):
                raise RegistryError(f"profiles.yaml: release {rid}: no {k}")
        rels[rid] = Release(rid, str(r["tag"]), str(r["commit"]), _words(r["description"]))
    mods = {str(m): v for m, v in (data.get("modifiers") or {}).items()}
    for m, v in mods.items():
        if not re.fullmatch(r"[a-z]+", m) or not (v or {}).get("description"):
            raise RegistryError(f"profiles.yaml: modifier {m!r} needs a lower-case name and a description")
    return str(data["default"]), rels, mods


def releases() -> list[str]:
    """Every release with a profile, oldest first."""
    return sorted(_profile_data()[1], key=release_key)


def release(rid: str) -> Release:
    rels = _profile_data()[1]
    if rid not in rels:
        raise RegistryError(f"unknown Lustre release {rid!r}; known: {', '.join(releases())}")
    return rels[rid]


def modifiers() -> list[str]:
    """The modifiers, in the order a profile name lists them."""
    return list(_profile_data()[2])


def _make(rid: str, mods: tuple[str, ...]) -> Profile:
    _, rels, table = _profile_data()
    name = "-".join([f"lustre-{rid}", *mods])
    desc = rels[rid].description
    if mods:
        desc = f"Lustre {rid}, with " + "; ".join(f"{m}: " + _words(table[m]["description"]).rstrip(".") for m in mods) + "."
    relaxes = [_words(table[m]["relaxes"]) for m in mods if table[m].get("relaxes")]
    return Profile(name, rid, mods, desc, " ".join(relaxes) or None)


@functools.lru_cache(maxsize=1)
def profiles() -> tuple[str, dict[str, Profile]]:
    """The default profile's name and every profile: each release alone and with every
    combination of modifiers (in their canonical order)."""
    default, rels, table = _profile_data()
    names = list(table)
    out: dict[str, Profile] = {}
    for rid in releases():
        for mask in range(1 << len(names)):
            mods = tuple(m for i, m in enumerate(names) if mask & (1 << i))
            p = _make(rid, mods)
            out[p.name] = p
    if default not in out:
        raise RegistryError(f"profiles.yaml: default profile {default!r} is not defined")
    return default, out


def default_profile() -> str:
    return profiles()[0]


def release_profiles() -> list[str]:
    """The plain profile of every release, oldest first (what `--profile all` runs)."""
    return [f"lustre-{r}" for r in releases()]


def profile(name: str | None) -> Profile:
    default, table = profiles()
    name = name or default
    if name not in table:
        known = ", ".join(release_profiles())
        mods = "".join(f"[-{m}]" for m in modifiers())
        raise RegistryError(f"unknown profile {name!r}; a profile is lustre-<release>{mods} "
                            f"(modifiers in that order), one of: {known}")
    return table[name]


def override_keys(name: str) -> list[str]:
    """The keys of a vector's profile_overrides that apply under a profile, least specific
    first: each of its modifiers, its release profile, then its own name."""
    prof = profile(name)
    keys = [*prof.modifiers, prof.base]
    return keys + [prof.name] if prof.name != prof.base else keys


def _applies(where: str, value) -> Applies | None:
    if value in (None, "all"):
        return None
    if not isinstance(value, dict) or set(value) - {"since", "until", "with", "without"}:
        raise RegistryError(f"{where}: profiles must be 'all' or a mapping of since/until/with/without")
    for k in ("since", "until"):
        if k in value and str(value[k]) not in _profile_data()[1]:
            raise RegistryError(f"{where}: profiles.{k}: unknown release {value[k]!r}")
    for k in ("with", "without"):
        unknown = [m for m in value.get(k, []) if m not in _profile_data()[2]]
        if unknown:
            raise RegistryError(f"{where}: profiles.{k}: unknown modifiers {unknown}")
    return Applies(str(value["since"]) if "since" in value else None,
                   str(value["until"]) if "until" in value else None,
                   tuple(value.get("with", ())), tuple(value.get("without", ())))


@functools.lru_cache(maxsize=1)
def requirements() -> dict[str, Requirement]:
    data = _load_yaml("requirements.yaml")
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
        applies = _applies(where, r.get("profiles", "all"))
        if not r.get("cite"):
            raise RegistryError(f"{where}: no citation")
        cap = r.get("capability")
        if cap not in CAPABILITIES + ("none",):
            raise RegistryError(f"{where}: capability must be one of {CAPABILITIES + ('none',)}")
        if r.get("kind") not in KINDS:
            raise RegistryError(f"{where}: kind must be one of {KINDS}")
        if r.get("direction") not in (None,) + DIRECTIONS:
            raise RegistryError(f"{where}: direction must be one of {DIRECTIONS}")
        if not isinstance(r.get("errno_class", False), bool):
            raise RegistryError(f"{where}: errno_class must be true or false")
        if r.get("errno_only", False) not in (False, True) or (r.get("errno_only") and not r.get("errno_class")):
            raise RegistryError(f"{where}: errno_only must be true or false, and true only with errno_class: true")
        out[rid] = Requirement(rid, r["level"], " ".join(str(r["statement"]).split()),
                               tuple(r.get("rules") or ()), tuple(r["cite"]),
                               applies,
                               None if cap == "none" else cap, r["kind"], r.get("direction"),
                               r.get("errno_class", False), r.get("errno_only", False))
    return out


def kind(rid: str) -> str | None:
    """The kind of requirement `rid` (None for an id the registry does not know)."""
    req = requirements().get(rid)
    return req.kind if req is not None else None


def capability(rid: str) -> str | None:
    """The capability requirement `rid` needs (None: the testee protocol's own, or an id the
    registry does not know)."""
    req = requirements().get(rid)
    return req.capability if req is not None else None


def content_only(rid: str) -> bool:
    """Whether `rid` is about what a decoder reports, never about whether it accepts a message."""
    return kind(rid) in CONTENT_KINDS


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
