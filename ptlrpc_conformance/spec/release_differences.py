"""The differences between the Lustre releases the suite has a profile for
(release_differences.yaml): what changed between two neighbouring releases, the Lustre
commit that changed it, the requirements and cases it touches and what it changes in
practice.  docs/releases.md is generated from the same file (tools/gen_releases_doc.py).

    load()                      the whole file, validated
    releases()                  the release names in order ("2.12.9" ... "2.17.57")
    differences()               every difference, as Difference records
    between(a, b)               the differences that separate release a from release b (any
                                two releases, in either order)
    for_requirement(req_id)     the differences that touch a requirement
    taken_short()               the structures every release's receiver takes shorter than their size
    minimum_size(struct, rel)   the fewest bytes of a structure a receiver of `rel` takes
"""
from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from importlib import resources

import yaml

FORMAT = "ptlrpc-conformance-release-differences/1"
KINDS = ("decode", "target", "format")
ID_RE = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
LU_RE = re.compile(r"^LU-[0-9]+$")
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
RELEASE_RE = re.compile(r"^[0-9]+\.[0-9]+\.[0-9]+$")
KEYS = {"id", "from", "to", "lu", "commit", "what", "requirements", "cases", "effect", "kind", "cite"}
OPTIONAL_KEYS = {"since", "also", "fields", "minimum_sizes"}
# libyaml's safe loader where PyYAML was built with it: this file and requirements.yaml are read
# in every run's collection (the structure cut cases ask minimum_size), 0.77 s with the pure
# Python loader
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class Difference:
    id: str
    from_release: str
    to_release: str
    lu: str
    commit: str
    what: str
    requirements: tuple[str, ...]
    cases: tuple[str, ...]
    effect: str
    kind: str
    cite: tuple[str, ...]
    since: str | None = None
    also: tuple[tuple[str, str], ...] = ()
    # structures the receiver accepts shorter than their size from this difference's `to`
    # release on (layout.c RMF_F_MINIMUM_SIZE): name -> the fewest bytes it accepts
    minimum_sizes: tuple[tuple[str, int], ...] = ()


class ReleaseDifferencesError(ValueError):
    """release_differences.yaml does not follow its format."""


def validate(data: dict, requirement_ids: set[str] | None = None) -> list[str]:
    """The problems of a release-differences document (an empty list when it is valid).
    With `requirement_ids`, every requirement an entry names must be one of them."""
    problems: list[str] = []
    if not isinstance(data, dict):
        return ["the document is not a mapping"]
    if data.get("format") != FORMAT:
        problems.append(f"format is {data.get('format')!r}, expected {FORMAT!r}")
    rels = data.get("releases") or []
    names = [r.get("release") for r in rels if isinstance(r, dict)]
    if len(names) != len(rels) or not names:
        problems.append("releases must be a non-empty list of mappings with a 'release'")
    for r in rels:
        if not isinstance(r, dict):
            continue
        name = r.get("release")
        if not isinstance(name, str) or not RELEASE_RE.match(name):
            problems.append(f"release {name!r} is not a version like 2.15.8")
        for key in ("tag", "commit", "read", "target_note"):
            if not isinstance(r.get(key), str) or not r[key].strip():
                problems.append(f"release {name}: {key} is missing or empty")
        if isinstance(r.get("commit"), str) and not COMMIT_RE.match(r["commit"]):
            problems.append(f"release {name}: commit {r['commit']!r} is not a 40-digit hash")
    if len(set(names)) != len(names):
        problems.append("a release is listed twice")
    if not isinstance(data.get("unchanged"), str) or not data["unchanged"].strip():
        problems.append("unchanged (what was checked and found the same) is missing")
    unknown_top = data.keys() - {"format", "releases", "unchanged", "differences", "notes", "taken_short"}
    if unknown_top:
        problems.append(f"unknown top-level keys {sorted(unknown_top)}")
    for i, n in enumerate(data.get("notes") or []):
        if not (isinstance(n, dict) and isinstance(n.get("title"), str) and n["title"].strip()
                and isinstance(n.get("text"), str) and n["text"].strip()):
            problems.append(f"notes[{i}] needs a title and a text")
    short_seen: set[str] = set()
    for i, t in enumerate(data.get("taken_short") or []):
        if not isinstance(t, dict) or set(t) != {"struct", "minimum", "why", "cite"}:
            problems.append(f"taken_short[{i}] needs exactly struct, minimum, why and cite")
            continue
        where = f"taken_short {t['struct']!r}"
        if not isinstance(t["struct"], str) or t["struct"] in short_seen:
            problems.append(f"{where}: struct must be a structure name, listed once")
        short_seen.add(str(t["struct"]))
        if not isinstance(t["minimum"], int) or isinstance(t["minimum"], bool) or t["minimum"] < 0:
            problems.append(f"{where}: minimum must be a byte count (0 or more)")
        if not isinstance(t["why"], str) or not t["why"].strip():
            problems.append(f"{where}: why is missing or empty")
        if not (isinstance(t["cite"], list) and t["cite"] and all(isinstance(x, str) and x for x in t["cite"])):
            problems.append(f"{where}: cite must name the Lustre functions")
    order = {n: i for i, n in enumerate(names)}
    seen: set[str] = set()
    for i, d in enumerate(data.get("differences") or []):
        where = f"differences[{i}]"
        if not isinstance(d, dict):
            problems.append(f"{where} is not a mapping")
            continue
        did = d.get("id")
        where = f"difference {did!r}"
        missing = KEYS - d.keys()
        unknown = d.keys() - KEYS - OPTIONAL_KEYS
        if missing:
            problems.append(f"{where}: missing {sorted(missing)}")
        if unknown:
            problems.append(f"{where}: unknown keys {sorted(unknown)}")
        if not isinstance(did, str) or not ID_RE.match(did):
            problems.append(f"{where}: the id must be short kebab-case")
        elif did in seen:
            problems.append(f"{where}: the id is used twice")
        else:
            seen.add(did)
        a, b = d.get("from"), d.get("to")
        if a not in order or b not in order:
            problems.append(f"{where}: from {a!r} / to {b!r} must be releases of the file")
        elif order[b] != order[a] + 1:
            problems.append(f"{where}: to ({b}) must be the release right after from ({a})")
        if not isinstance(d.get("lu"), str) or not LU_RE.match(d["lu"]):
            problems.append(f"{where}: lu {d.get('lu')!r} is not a ticket like LU-16077")
        if not isinstance(d.get("commit"), str) or not COMMIT_RE.match(d["commit"]):
            problems.append(f"{where}: commit {d.get('commit')!r} is not a 40-digit hash")
        for extra in d.get("also") or []:
            if not (isinstance(extra, dict) and isinstance(extra.get("lu"), str) and LU_RE.match(extra["lu"])
                    and isinstance(extra.get("commit"), str) and COMMIT_RE.match(extra["commit"])):
                problems.append(f"{where}: every 'also' entry needs an lu and a 40-digit commit")
        if "since" in d and not (isinstance(d["since"], str) and RELEASE_RE.match(d["since"])):
            problems.append(f"{where}: since {d['since']!r} is not a version")
        for key in ("what", "effect"):
            if not isinstance(d.get(key), str) or not d[key].strip():
                problems.append(f"{where}: {key} is missing or empty")
        if d.get("kind") not in KINDS:
            problems.append(f"{where}: kind {d.get('kind')!r} is not one of {', '.join(KINDS)}")
        for key in ("requirements", "cases", "cite"):
            value = d.get(key)
            if not isinstance(value, list) or not all(isinstance(x, str) and x for x in value):
                problems.append(f"{where}: {key} must be a list of strings")
        if not d.get("cite"):
            problems.append(f"{where}: cite names no Lustre function")
        if "fields" in d and not (isinstance(d["fields"], list) and d["fields"] and all(
                isinstance(x, str) and re.fullmatch(r"(header|body)\.[a-z_0-9]+", x) for x in d["fields"])):
            problems.append(f"{where}: fields must be a list of decoded fields like body.pb_uid")
        if "minimum_sizes" in d and not (isinstance(d["minimum_sizes"], dict) and d["minimum_sizes"] and all(
                isinstance(k, str) and isinstance(v, int) and not isinstance(v, bool) and v > 0
                for k, v in d["minimum_sizes"].items())):
            problems.append(f"{where}: minimum_sizes must map structure names to a positive byte count")
        if requirement_ids is not None:
            for req in d.get("requirements") or []:
                if req not in requirement_ids:
                    problems.append(f"{where}: unknown requirement {req}")
    return problems


def _requirement_ids() -> set[str]:
    text = resources.files(__package__).joinpath("requirements.yaml").read_text(encoding="utf-8")
    return {r["id"] for r in yaml.load(text, Loader=_LOADER)["requirements"]}


@functools.lru_cache(maxsize=1)
def load() -> dict:
    """release_differences.yaml, checked (ReleaseDifferencesError when it is not valid)."""
    text = resources.files(__package__).joinpath("release_differences.yaml").read_text(encoding="utf-8")
    data = yaml.load(text, Loader=_LOADER)
    problems = validate(data, _requirement_ids())
    if problems:
        raise ReleaseDifferencesError("release_differences.yaml: " + "; ".join(problems))
    return data


def releases() -> list[str]:
    """The releases in order, oldest first."""
    return [r["release"] for r in load()["releases"]]


def release(name: str) -> dict:
    """One release's entry (tag, commit, branch, what was read, the target note)."""
    for r in load()["releases"]:
        if r["release"] == name:
            return r
    raise KeyError(f"no release {name!r} in release_differences.yaml (known: {', '.join(releases())})")


@functools.lru_cache(maxsize=1)
def differences() -> tuple[Difference, ...]:
    return tuple(Difference(d["id"], d["from"], d["to"], d["lu"], d["commit"], d["what"].strip(),
                            tuple(d["requirements"]), tuple(d["cases"]), d["effect"].strip(), d["kind"],
                            tuple(d["cite"]), d.get("since"),
                            tuple((x["lu"], x["commit"]) for x in d.get("also") or ()),
                            tuple(sorted((d.get("minimum_sizes") or {}).items())))
                 for d in load()["differences"])


def taken_short() -> dict[str, dict]:
    """{structure: its taken_short entry}: the structures a receiver of every release read takes
    from fewer bytes than their size (a field marked RMF_F_NO_SIZE_CHECK that a handler reads
    with no lower bound)."""
    return {t["struct"]: t for t in load().get("taken_short") or ()}


def minimum_size(struct: str, release: str) -> int | None:
    """The fewest bytes of `struct` a receiver of `release` accepts when that is fewer than its
    size (taken_short, for every release; else a difference's `minimum_sizes`, from its `to`
    release on); None: the whole size."""
    order = {n: i for i, n in enumerate(releases())}
    if release not in order:
        return None
    if struct in taken_short():
        return taken_short()[struct]["minimum"]
    found = None
    for d in differences():
        if order[d.to_release] <= order[release]:
            found = dict(d.minimum_sizes).get(struct, found)
    return found


def between(a: str, b: str) -> list[Difference]:
    """The differences between releases a and b: every change whose `to` release lies after
    the older of the two and at or before the newer (empty for a == b)."""
    order = {n: i for i, n in enumerate(releases())}
    for name in (a, b):
        if name not in order:
            raise KeyError(f"no release {name!r} in release_differences.yaml (known: {', '.join(order)})")
    lo, hi = sorted((order[a], order[b]))
    return [d for d in differences() if lo < order[d.to_release] <= hi]


def for_requirement(req_id: str) -> list[Difference]:
    """The differences whose rule touches requirement `req_id`."""
    return [d for d in differences() if req_id in d.requirements]
