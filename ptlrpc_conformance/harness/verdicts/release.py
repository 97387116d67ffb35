"""The Lustre release a run's verdicts follow, and what it changes in an expected decode.

A vector's expectation is written as the default release's code reads the bytes.  An older
release's pack_generic.c leaves some fields of a byte-swapped message unswapped (in 2.15,
lm_opc, pb_uid, pb_gid and pb_projid were padding and were never swabbed): its code reads them
in the sender's byte order, so the value it decodes is the expected value with its bytes
reversed.  `view` turns an expectation into that release's reading, from the release's swab
lists (spec/releases/<release>.json, generated from that release's code); nothing here is
computed by an implementation under test.

The release is an argument: a run's is in its settings (harness/settings.py, resolved once
from --conformance-profile), which the suites pass on.  Left out, it is the default profile's.
"""
from __future__ import annotations

import copy
import functools

from ptlrpc_conformance import spec
from ptlrpc_conformance.harness.data import registry

def default() -> str:
    """The default profile's release: the one an expectation is written for, and the one a
    function here follows when it is given none."""
    return registry.profile(None).release


# the structure whose fields each expectation section holds
_SECTIONS = {"header": "lustre_msg_v2", "body": "ptlrpc_body_v3"}


@functools.lru_cache(maxsize=None)
def left_unswapped(release: str) -> dict[str, frozenset[str]]:
    """Per expectation section, the fields this release leaves unswapped that the default
    release swaps (today's field names)."""
    from ptlrpc_conformance.spec import releases
    default = registry.profile(None).release
    mine, base = releases.load(release)["unswabbed"], releases.load(default)["unswabbed"]
    return {section: frozenset(set(mine.get(struct, ())) - set(base.get(struct, ())))
            for section, struct in _SECTIONS.items()}


def valid_bits(release: str | None = None) -> dict:
    """The valid-bit table (obdo, mdt_body) of `release` (default: the default profile's): a field
    governed only by bits the release does not define is never valid under it
    (spec/layouts.py valid_bits)."""
    from ptlrpc_conformance.spec import layouts
    return layouts.valid_bits(release or default())


@functools.lru_cache(maxsize=None)
def never_valid(release: str) -> frozenset[str]:
    """The fields of the default valid-bit table that `release` never reports valid."""
    from ptlrpc_conformance.spec import layouts
    base, mine = layouts.valid_bits(), layouts.valid_bits(release)
    return frozenset(f for s, entry in base.items() for f in entry["fields"]
                     if f not in mine.get(s, {}).get("fields", {}))


def _drop_never_valid(expect: dict, release: str) -> dict:
    """`expect` without the fields `release` never reports valid in its structures' `valid` lists."""
    gone = never_valid(release)
    structs = expect.get("structs")
    if not gone or not isinstance(structs, dict) or not any(
            isinstance(s, dict) and gone & set(s.get("valid") or ()) for s in structs.values()):
        return expect
    out = {**expect, "structs": {}}
    for key, s in structs.items():
        if isinstance(s, dict) and gone & set(s.get("valid") or ()):
            s = {**s, "valid": [f for f in s["valid"] if f not in gone]}
        out["structs"][key] = s
    return out


def _reverse(value: int, size: int) -> int:
    return int.from_bytes((value % (1 << (8 * size))).to_bytes(size, "little"), "big")


def behaviour(release: str, name: str) -> bool:
    """A behaviour of the release's code (spec/releases/<release>.json, `behaviour`)."""
    from ptlrpc_conformance.spec import releases
    return bool(releases.load(release)["behaviour"][name]["value"])


# The behaviour facts the target and recovery rules read (docs/target-rules.md, "Releases"):
# the step conditions `if_release` of the bundled scenarios name only these, and the release
# matrix compares them to decide which target and recovery cases run again under a release.
TARGET_FACTS = ("unknown_opcode_eopnotsupp", "erofs_sent_as_reply", "punch_sets_ids", "punch_projid",
                "replay_create", "create_trusts_last_id")


def holds(condition: dict | None, release: str | None = None) -> bool:
    """Whether `release` (default: the default profile's) has every behaviour fact of `condition`
    ({name: bool}, a scenario step's `if_release`) with the value it names."""
    release = release or default()
    return all(behaviour(release, name) == bool(value) for name, value in (condition or {}).items())


def struct_differs(name: str, release: str | None = None) -> str | None:
    """Why the structure cases of `name` do not apply under `release` (default: the
    default profile's): the release has no such structure (spec/layouts.py absent); None when it has it."""
    from ptlrpc_conformance.spec import layouts
    return layouts.absent(name, release or default())


def struct_not_applicable(vector, release: str | None = None) -> str | None:
    """Why a structure vector does not apply under `release` (default: the default profile's), or
    None: the release lacks the structure, or reads it otherwise (another layout or byte
    swapping: spec/layouts.py reads_otherwise) and the vector gives no bytes of its own for the
    release's profile.  The bundled vectors give them for every release that reads a structure
    otherwise (vectors/structs_releases.yaml, tools/gen_struct_releases.py); a vector of the
    user's may not."""
    from ptlrpc_conformance.spec import layouts
    release = release or default()
    why = struct_differs(vector.struct, release)
    if why or not layouts.reads_otherwise(vector.struct, release):
        return why
    if "bytes" in (vector.overrides.get(f"lustre-{release}") or {}):
        return None
    return (f"Lustre {release} reads struct {layouts.canonical(vector.struct)} otherwise (docs/releases.md) and "
            f"the vector gives no bytes for profile lustre-{release}")


def tolerated_shape(problem, result, release: str | None = None, literal: bool = False) -> bool:
    """Whether a shape problem of a decode result is what the profile tolerates: under a
    literal profile (`literal`) of a release whose lustre_msg_get_jobid does not NUL-terminate,
    a pb_jobid of 32 characters (an unterminated jobid read whole)."""
    if not literal or getattr(problem, "about", None) != ("body", "pb_jobid"):
        return False
    jobid = ((result or {}).get("body") or {}).get("pb_jobid")
    return (isinstance(jobid, str) and len(jobid) == spec.constant("LUSTRE_JOBID_SIZE")
            and not behaviour(release or default(), "jobid_nul_terminated"))


def view(expect: dict | None, release: str | None = None, literal: bool = False) -> dict | None:
    """`expect` as `release` (default: the default profile's) decodes the same bytes.  Under a
    literal profile, a release whose lustre_msg_get_jobid does not NUL-terminate (before
    2.15.3) may read an unterminated jobid whole: an expected 31-character jobid, which is
    how the default release reads one, is then not compared."""
    release = release or default()
    if not expect or release == default():
        return expect
    expect = _drop_never_valid(expect, release)
    body = expect.get("body") or {}
    if (literal and isinstance(body.get("pb_jobid"), str) and len(body["pb_jobid"]) == 31
            and not behaviour(release, "jobid_nul_terminated")):
        expect = {**expect, "body": {k: v for k, v in body.items() if k != "pb_jobid"}}
    if expect.get("byte_order") != "big":
        return expect
    extra = left_unswapped(release)
    if not any(extra[s] & set(expect.get(s) or {}) for s in _SECTIONS):
        return expect
    out = copy.deepcopy(expect)
    for section, names in extra.items():
        fields = out.get(section) or {}
        for name in names & set(fields):
            size = spec.layout(_SECTIONS[section]).field(name).size
            if isinstance(fields[name], int):
                fields[name] = _reverse(fields[name], size)
    return out


def judged_facts(area: str, profile_name: str) -> dict:
    """What the judges of a case of `area` read of the profile beyond its vectors: the facts
    of its release and its modifiers.  Every judge that reads a release fact must have it
    listed here, because the release matrix (`certify --profile all`) runs again, under
    another release, only the cases whose vectors or facts differ (harness/outputs/matrix.py)."""
    prof = registry.profile(profile_name)
    if area == "framing":
        jobid = None if not prof.has("literal") else behaviour(prof.release, "jobid_nul_terminated")
        return {"left_unswapped": {k: sorted(v) for k, v in left_unswapped(prof.release).items()},
                "literal": prof.has("literal"), "jobid_nul_terminated": jobid}
    if area in ("target", "recovery"):
        return {"reconstruct": prof.has("reconstruct"),
                **{name: behaviour(prof.release, name) for name in TARGET_FACTS}}
    if area == "structs":           # the valid-bit properties: their structures' layouts and tables
        from ptlrpc_conformance.spec import layouts
        table = layouts.valid_bits(prof.release)
        return {name: [struct_differs(name, prof.release), layouts.reads_otherwise(name, prof.release),
                       table.get(name, {}).get("fields")]
                for name in ("obdo", "mdt_body")}
    return {}                       # protocol: its judges read no release fact
