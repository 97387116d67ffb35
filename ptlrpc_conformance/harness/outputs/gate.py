"""The regression gate: a known-failures file, strict in both directions.

    format: ptlrpc-conformance-known-failures/1
    entries:
    - id: framing.buflen.wrap.decode     # a case id ('*' matches one segment) or a requirement id;
                                         # a renamed case id covers the cases that replaced it
      reason: we follow Lustre's code here
      signature: accepted                # optional: how it must fail (from report.json)
      expires: 2027-06-30                # optional: after this day the entry is an error

The gate fails on: a failure no entry covers (new); an entry whose cases no longer fail
(stale); an entry that matches no case of the run; a failure whose signature differs from
the entry's; an expired entry.  Each problem says which lines to add or remove.  An entry
whose cases the run did not run — outside its selection, not reached by a run that stopped
early, or of an area the run did not collect (a plugin user's own cases, `vendor.*`, in a
`certify` run of the bundled suite) — is `not run`: never stale, never unmatched, never
removed.
`update()` rewrites the file (creating it when missing), keeping its comments and order (a
round-trip YAML writer): it removes stale and unmatched entries and records missing
signatures (tightening); with `loosen=True` it also adds the new failures and the changed
signatures.  The gate's verdict on a run that rewrote the file is the verdict on the file as
written.
"""
from __future__ import annotations

import datetime as _dt
import fnmatch
import pathlib
import re
from dataclasses import dataclass, field

import yaml

from ptlrpc_conformance.harness import options
from ptlrpc_conformance.harness.data.registry import CASE_ID, REQUIREMENT_ID, case_aliases

FORMAT = "ptlrpc-conformance-known-failures/1"
MAX_EXPANSION = 1000
FAILING = ("fail", "error")
_PATTERN = re.compile(r"^[a-z*][a-z0-9_*]*(\.[a-z0-9*][a-z0-9_+*-]*)+$")


class GateError(Exception):
    """A known-failures file that cannot be read; `problems` name file and line."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


@dataclass
class Entry:
    id: str
    reason: str
    signature: str | None = None
    expires: _dt.date | None = None
    line: int = 0
    source: str = ""            # the known-failures file it was read from
    index: int = -1             # its place in the file's `entries` list

    @property
    def where(self) -> str:
        """Where the entry is written: FILE:LINE."""
        return f"{self.source}:{self.line}" if self.source else f"line {self.line}"

    def as_dict(self) -> dict:
        out = {"id": self.id, "reason": self.reason}
        if self.signature:
            out["signature"] = self.signature
        if self.expires:
            out["expires"] = self.expires.isoformat()
        return out


@dataclass
class Result:
    problems: list[str] = field(default_factory=list)
    new: list[tuple[str, str]] = field(default_factory=list)        # (case id, signature)
    stale: list[Entry] = field(default_factory=list)
    unmatched: list[Entry] = field(default_factory=list)
    changed: list[tuple[Entry, str, str]] = field(default_factory=list)   # (entry, case, signature)
    expired: list[Entry] = field(default_factory=list)
    known: list[str] = field(default_factory=list)
    unsigned: list[tuple[Entry, str]] = field(default_factory=list)       # entries without a signature
    not_run: list[Entry] = field(default_factory=list)    # cases outside the selection, or not reached

    @property
    def ok(self) -> bool:
        return not self.problems

    def as_dict(self) -> dict:
        return {"ok": self.ok, "problems": self.problems, "known_failures": sorted(self.known),
                "new": [c for c, _ in self.new], "stale": [e.id for e in self.stale],
                "unmatched": [e.id for e in self.unmatched], "expired": [e.id for e in self.expired],
                "changed": [c for _, c, _ in self.changed], "not_run": [e.id for e in self.not_run]}


def _line_of(text: str, index: int) -> int:
    count = -1
    for n, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("- "):
            count += 1
            if count == index:
                return n
    return 0


def load(path: str | pathlib.Path, allow_empty: bool = False) -> list[Entry]:
    """The entries of a known-failures file.  An empty file (nothing but comments) is a
    GateError unless `allow_empty` (a file --update-known-failures is about to fill)."""
    p = pathlib.Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as e:
        raise GateError([f"{p}: cannot read: {e.strerror or e}"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise GateError([f"{p}:{mark.line + 1 if mark else '?'}: not valid YAML: {getattr(e, 'problem', e)}"]) from None
    if data is None:
        if not allow_empty:
            raise GateError([f"{p}: empty: a known-failures file holds 'format: {FORMAT}' and its 'entries' "
                             "(docs/known-failures.md); --update-known-failures loosen writes one from a run"])
        data = {"format": FORMAT, "entries": []}
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise GateError([f"{p}: not a known-failures file (expected 'format: {FORMAT}')"])
    raw = data.get("entries")
    problems, entries = [], []
    if raw is None:                     # `entries:` with nothing after it: no entry yet
        raw = []
    if not isinstance(raw, list):       # a 0, "", {} or false too: update() could not add to it
        raise GateError([f"{p}: 'entries' must be a list"])
    for i, e in enumerate(raw):
        line = _line_of(text, i)
        where = f"{p}:{line}"
        if not isinstance(e, dict):
            problems.append(f"{where}: an entry must be a mapping")
            continue
        unknown = set(e) - {"id", "reason", "signature", "expires"}
        if unknown:
            problems.append(f"{where}: unknown keys {sorted(unknown)}")
        eid = e.get("id")
        if not isinstance(eid, str) or not (_PATTERN.match(eid) or REQUIREMENT_ID.match(eid)):
            problems.append(f"{where}: id {eid!r} is neither a case id pattern nor a requirement id")
            continue
        reason = e.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            problems.append(f"{where}: entry {eid} needs a reason")
        expires = e.get("expires")
        if isinstance(expires, _dt.datetime):       # YAML reads "2027-06-30 10:00:00" as a datetime: its day
            expires = expires.date()
        if expires is not None and not isinstance(expires, _dt.date):
            try:
                expires = _dt.date.fromisoformat(str(expires))
            except ValueError:
                problems.append(f"{where}: expires {expires!r} is not a date (YYYY-MM-DD)")
                expires = None
        sig = e.get("signature")
        if sig is not None and not isinstance(sig, str):
            problems.append(f"{where}: signature must be text")
        entries.append(Entry(eid, str(reason or ""), sig, expires, line, str(p), i))
    ids = [e.id for e in entries]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"{p}: entry {dup} appears more than once")
    if problems:
        raise GateError(problems)
    return entries


def file_problems(path: str | None, update: str | None, option: str = "--known-failures",
                  update_option: str = "--update-known-failures") -> list[str]:
    """The known-failures file a run names, checked before its first case (as the other inputs
    are, harness/options.py): it parses and validates; with `update` (tighten or loosen) it may
    be missing (the run creates it), and `update` needs a file."""
    if update and not path:
        return [f"{update_option} needs {option} FILE (the file to rewrite, or to create)"]
    if not path:
        return []
    p = pathlib.Path(path)
    if not p.exists():
        if update:
            return options.writable_file(p, option)
        return [f"{option} {path}: no such file (`{update_option} loosen` creates it from a run's failures)"]
    if p.is_dir():
        return [f"{option} {path}: is a directory, not a known-failures file"]
    try:
        load(p, allow_empty=bool(update))
    except GateError as e:
        return list(e.problems)
    return options.writable_file(p, option) if update else []


def is_requirement_entry(entry_id: str) -> bool:
    return bool(REQUIREMENT_ID.match(entry_id)) and not CASE_ID.match(entry_id)


def matches(entry_id: str, case_id: str, requirements: list[str]) -> bool:
    """Whether an entry (a case id pattern or a requirement id) names a case: a requirement id
    names the cases that list it (or were charged with it).  A pattern that matches a renamed
    case id (spec/case_aliases.yaml) covers the cases that replaced it."""
    if is_requirement_entry(entry_id):
        return entry_id in requirements
    return _id_matches(entry_id, case_id) or any(
        case_id in new and _id_matches(entry_id, old) for old, new in case_aliases().items())


def stale_reason(entry_id: str) -> str:
    return "no failure is charged to it now" if is_requirement_entry(entry_id) else "its cases now pass"


def covers(entry_id: str, case_id: str, requirements: list[str], failed: list[str] | None) -> bool:
    """Whether an entry accepts the failure of a case: a case id pattern, the case's failure;
    a requirement id, a failure charged to it (`failed`, report.json's failed_requirements;
    the case's own list when the charge is not known)."""
    if is_requirement_entry(entry_id):
        return entry_id in (failed or requirements)
    return matches(entry_id, case_id, requirements)


def _outside(entry_id: str, areas: set[str]) -> bool:
    """Whether a case id entry names an area the run collected no case of: cases another run
    holds (a plugin user's own, next to the bundled suite), which this run cannot judge."""
    if is_requirement_entry(entry_id):
        return False
    area = entry_id.split(".")[0]
    return not any(fnmatch.fnmatchcase(a, area) for a in areas) and not any(
        _id_matches(entry_id, old) for old in case_aliases())


def _id_matches(pattern: str, case_id: str) -> bool:
    want, got = pattern.split("."), case_id.split(".")
    return len(want) == len(got) and all(fnmatch.fnmatchcase(g, w) if "*" in w else g == w
                                         for w, g in zip(want, got))


def evaluate(entries: list[Entry], cases: list[dict], today: _dt.date | None = None,
             deselected: dict | None = None, incomplete: bool = False) -> Result:
    """`cases`: report.json case entries (id, verdict, requirements, notes.signature);
    `deselected`: the cases the run's selection left out ({case id: requirements}, report.json's
    selection.deselected); `incomplete`: the run stopped early, so cases may not have been
    reached.  An entry that covers cases the run did not run is judged on nothing it did not see."""
    today = today or _dt.date.today()
    r = Result()
    covered: dict[str, Entry] = {}
    deselected = deselected or {}
    areas = {cid.split(".")[0] for cid in [c["id"] for c in cases] + list(deselected)}     # what it collected
    for e in entries:
        hit = [c for c in cases if matches(e.id, c["id"], c.get("requirements", []) + c.get("failed_requirements", []))]
        # some of the entry's cases were not run: what ran cannot make it stale or unmatched
        unseen = incomplete or any(matches(e.id, cid, list(reqs or ())) for cid, reqs in deselected.items()) \
            or _outside(e.id, areas)
        if len(hit) > MAX_EXPANSION:
            r.problems.append(f"{e.where}: {e.id} matches {len(hit)} cases, more than {MAX_EXPANSION}: "
                              "name the cases more precisely")
            continue
        if e.expires and e.expires < today:
            r.expired.append(e)
            r.problems.append(f"{e.where}: entry {e.id} expired on {e.expires}: fix the failure, or "
                              "renew the entry with a new date")
        if not hit and unseen:
            r.not_run.append(e)
            continue
        if not hit:
            r.unmatched.append(e)
            r.problems.append(f"{e.where}: entry {e.id} matches no case of this run: remove the entry "
                              f"`- id: {e.id}`")
            continue
        # a requirement entry accepts the failures charged to it, not every failure of a case
        # that lists it
        failing = [c for c in hit if c["verdict"] in FAILING
                   and covers(e.id, c["id"], c.get("requirements", []), c.get("failed_requirements"))]
        if not failing and unseen:
            r.not_run.append(e)
            continue
        if not failing:
            r.stale.append(e)
            r.problems.append(f"{e.where}: entry {e.id} is stale: {stale_reason(e.id)}: remove the entry "
                              f"`- id: {e.id}`")
            continue
        for c in failing:
            sig = (c.get("notes") or {}).get("signature", "")
            covered.setdefault(c["id"], e)
            if e.signature and sig != e.signature:
                r.changed.append((e, c["id"], sig))
                r.problems.append(f"{e.where}: {c['id']} fails differently: signature {sig!r}, the entry says "
                                  f"{e.signature!r}: replace the line `signature: {e.signature}` with "
                                  f"`signature: {sig}` (or fix the new failure)")
            elif not e.signature:
                r.unsigned.append((e, sig))
    for c in cases:
        if c["verdict"] in FAILING:
            if c["id"] in covered:
                r.known.append(c["id"])
            else:
                sig = (c.get("notes") or {}).get("signature", "")
                r.new.append((c["id"], sig))
    if r.new:
        lines = "".join(f"\n  - id: {cid}\n    reason: <why this failure is accepted>\n    signature: {sig}"
                        for cid, sig in r.new)
        r.problems.append(f"{len(r.new)} new failure(s); to accept them, add to the known-failures file:{lines}")
    return r


HEADER = "Known failures (ptlrpc-conformance regression gate); see docs/known-failures.md"


def _round_trip():
    """ruamel.yaml's round-trip reader and writer: what it reads it writes back with the
    user's comments, order and quoting, changing only what the update changes."""
    from ruamel.yaml import YAML
    y = YAML()
    y.preserve_quotes = True
    y.width = 100
    y.indent(mapping=2, sequence=2, offset=0)
    return y


def update(path: str | pathlib.Path, entries: list[Entry], result: Result, loosen: bool = False) -> list[str]:
    """Rewrite the file (created when missing): drop stale and unmatched entries, record
    missing signatures, and (with `loosen`) add the new failures and the changed signatures.
    Entries the run did not run (`result.not_run`) are left as they are.  The rest of the file
    — comments, order, the other entries' text — stays as written.  Returns what changed, one
    line each."""
    from ruamel.yaml.comments import CommentedMap, CommentedSeq
    p = pathlib.Path(path)
    y = _round_trip()
    doc = y.load(p.read_text(encoding="utf-8")) if p.exists() else None
    changes = [] if p.exists() else [f"created {p}"]
    if doc is None:
        doc = CommentedMap([("format", FORMAT), ("entries", CommentedSeq())])
        doc.yaml_set_start_comment(HEADER)
    if doc.get("entries") is None:
        doc["entries"] = CommentedSeq()
    seq = doc["entries"]
    drop = {id(e) for e in result.stale + result.unmatched}
    signatures = {}
    for e, sig in result.unsigned:
        signatures.setdefault(id(e), set()).add(sig)
    removed = []
    for e in entries:
        if id(e) in drop:
            why = stale_reason(e.id) if any(e is s for s in result.stale) else "it matches no case of this run"
            changes.append(f"removed `- id: {e.id}` ({why})")
            removed.append(e.index)
            continue
        sigs = signatures.get(id(e))
        if sigs and len(sigs) == 1 and next(iter(sigs)):
            e.signature = next(iter(sigs))
            seq[e.index]["signature"] = e.signature
            changes.append(f"recorded `signature: {e.signature}` for {e.id}")
    if loosen:
        for e, case, sig in result.changed:
            if e.signature != sig:
                changes.append(f"changed the signature of {e.id} from {e.signature} to {sig}")
                e.signature = sig
                seq[e.index]["signature"] = sig
        for cid, sig in result.new:
            item = CommentedMap([("id", cid), ("reason", "added by --update-known-failures=loosen: say why it is accepted")])
            if sig:
                item["signature"] = sig
            seq.append(item)
            changes.append(f"added `- id: {cid}`" + (f" (signature {sig})" if sig else ""))
    elif result.new:
        changes.append(f"did not add the {len(result.new)} new failure(s): tighten never adds "
                       "(`--update-known-failures loosen` does)")
    for index in sorted(removed, reverse=True):
        del seq[index]
    p.parent.mkdir(parents=True, exist_ok=True)
    with open(p, "w", encoding="utf-8") as f:
        y.dump(doc, f)
    return changes or ["nothing to change"]
